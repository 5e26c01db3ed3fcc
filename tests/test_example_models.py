"""The shipped posteriors in ``models/`` are converged fits of the example runs (``tiny.nc``: the
TRL runs in ``data/tiny``; ``bandit.nc``: softmax-bandit runs made from a seed) that load under
this code, and the verbs that read a posterior take them.

A saved fit records the model and package versions, and ``load`` refuses another version, so
after either changes these tests fail until ``python scripts/make_example_models.py --force``
refits it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
MODEL_FILE = REPO / "models" / "tiny.nc"
DATA = REPO / "data" / "tiny"
REFIT = "rerun `python scripts/make_example_models.py --force`"


def _load(path: Path):
    from bayes_grpo.model import GRPODynamicsModel

    assert path.exists(), f"{path} is missing: {REFIT}"
    try:
        return GRPODynamicsModel.load(path)
    except ValueError as err:  # another model or package version, or a changed config
        pytest.fail(f"{err}\n{REFIT}")


@pytest.fixture(scope="module")
def shipped():
    return _load(MODEL_FILE)


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("scripts/make_example_models.py")


def _runs_it_was_fitted_to(name: str, shipped, script):
    from bayes_grpo.runset.ingest import load_runs

    fitted = [str(r) for r in shipped.runset["run"].values]
    runs = load_runs([DATA]) if name == "tiny" else script.bandit_runs()
    return runs.sel(run=fitted, step=shipped.runset["step"].values)


@pytest.mark.parametrize("name", ["tiny", "bandit"])
def test_the_shipped_posterior_is_a_converged_fit_of_the_example_runs(name, script):
    shipped = _load(script.model_file(name))
    assert shipped.runset.sizes["run"] >= 2
    runs = _runs_it_was_fitted_to(name, shipped, script)
    # the rewards it was fitted to are those of data/tiny as ingested today (NaN where unlogged),
    # or those the bandit simulator makes today from the example's seed
    np.testing.assert_array_equal(shipped.runset["reward"].values, runs["reward"].values)
    for coord in ("learning_rate", "momentum", "k_ref", "group_size"):
        np.testing.assert_array_equal(shipped.runset[coord].values, runs[coord].values)
    convergence = shipped.convergence()
    assert convergence.passed, convergence.summary


def test_predict_and_stability_read_the_shipped_posterior(shipped, tmp_path):
    from bayes_grpo.cli import main

    out = tmp_path / "pred.nc"
    code = main(
        [
            "predict",
            str(MODEL_FILE),
            "--lr",
            "0.002",
            "--momentum",
            "0.9",
            "--momentum-convention",
            "ema",
            "--k-ref",
            "2",
            "--group-size",
            "16",
            "--steps",
            "300",
            "-o",
            str(out),
        ]
    )
    assert code == 0 and out.stat().st_size > 0
    from bayes_grpo.predict.predict import load_prediction

    pred = load_prediction(out)
    assert np.all(np.isfinite(pred["mean_mean"].values))
    code = main(
        ["stability", "--posterior", str(MODEL_FILE), "--lr", "0.002", "--momentum", "0.9", "--convention", "ema", "--k-ref", "2"]
    )
    assert code == 0


def test_at_a_setting_it_was_fitted_to_the_bandit_posterior_predicts_the_true_mean(script):
    # the bandit's truth: the exact expected reward averaged over 1024 seeds of the setting
    scores = script.bandit_prediction_scores({"k_ref": 2, "learning_rate": 0.1})
    assert scores["inside_90_band"] >= 0.9  # measured 1.00 (2026-12-05), RMSE 0.007, rise ~0.35


def test_the_models_readme_shows_what_the_summary_of_the_shipped_files_prints(script):
    # models/README.md says `make_example_models.py --summary` prints its per-file sections
    # "from the files"; their sampler settings had no max_treedepth, which the files' settings
    # now hold (10, PyMC's default, that of every fit)
    from bayes_grpo.model import GRPODynamicsModel

    readme = (REPO / "models" / "README.md").read_text()
    for name in ("tiny", "bandit"):
        section = readme.split(f"## {name}.nc\n\n", 1)[1].split("\n## ", 1)[0].strip("\n")
        printed = "\n".join(script.summary_lines(GRPODynamicsModel.load(REPO / "models" / f"{name}.nc")))
        assert section == printed, name
