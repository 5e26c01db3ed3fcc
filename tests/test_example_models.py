"""The shipped posterior ``models/tiny.nc`` is a converged fit of the shipped example runs that
loads under this code, and the verbs that read a posterior take it.

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


@pytest.fixture(scope="module")
def shipped():
    from bayes_grpo.model import GRPODynamicsModel

    assert MODEL_FILE.exists(), f"{MODEL_FILE} is missing: {REFIT}"
    try:
        return GRPODynamicsModel.load(MODEL_FILE)
    except ValueError as err:  # another model or package version, or a changed config
        pytest.fail(f"{err}\n{REFIT}")


def test_the_shipped_posterior_is_a_converged_fit_of_the_shipped_runs(shipped):
    from bayes_grpo.runset.ingest import load_runs

    fitted = [str(r) for r in shipped.runset["run"].values]
    assert len(fitted) >= 2
    runs = load_runs([DATA]).sel(run=fitted, step=shipped.runset["step"].values)
    # the rewards it was fitted to are those of data/tiny as ingested today (NaN where unlogged)
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
