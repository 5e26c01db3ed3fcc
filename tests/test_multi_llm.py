"""Run sets of several LLMs: model sizes, the curvature regression on log model_size, and the
questions asked of a new LLM (stability, phase diagram, prediction, report)."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_grpo.dynamics.simulate import simulate_sde_runset
from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG
from bayes_grpo.model.prepare import prepare_data
from bayes_grpo.runset import RunSetError

SIZES = {"Qwen/Qwen2.5-0.5B": 0.5e9, "llm 1.5B": 1.5e9, "llm-7B ü": 7e9}


def _models(sizes=SIZES, gamma=0.5):
    """Simulator specs whose curvature follows K = 20 (N / 1.5e9)^gamma."""
    return {
        name: {
            "stiffness": 20.0 * (size / 1.5e9) ** gamma,
            "plateau": 0.5 + 0.1 * i,
            "initial_reward": 0.1,
            "noise_d": 2e-5,
            "model_size": size,
        }
        for i, (name, size) in enumerate(sizes.items())
    }


def _runset(sizes=SIZES, **kw):
    settings = dict(
        group_sizes=(8,), learning_rates=(1e-3,), momentum=0.5, convention="heavy_ball",
        n_seeds=1, n_steps=120, log_every=2, random_seed=3,
    ) | kw
    return simulate_sde_runset(models=_models(sizes), **settings)


def test_one_llm_name_with_two_model_sizes_is_an_error_naming_the_runs():
    ds = _runset()
    # the 0.5B and 1.5B runs carry one name: the fit took the median of their sizes, silently
    names = np.array([str(m) for m in ds["model"].values], dtype=object)
    names[names == "llm 1.5B"] = "Qwen/Qwen2.5-0.5B"
    ds = ds.assign_coords(model=("run", names))
    runs = [str(r) for r, m in zip(ds["run"].values, names) if m == "Qwen/Qwen2.5-0.5B"]
    with pytest.raises(RunSetError, match="different model_size") as err:
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    assert all(f"{r} (" in str(err.value) for r in runs)
    assert "'Qwen/Qwen2.5-0.5B'" in str(err.value)
    # a run that does not know its size does not contradict the others
    sizes = np.asarray(ds["model_size"].values, dtype=float).copy()
    sizes[names == "Qwen/Qwen2.5-0.5B"] = [0.5e9, np.nan]
    data = prepare_data(ds.assign_coords(model_size=("run", sizes)), DEFAULT_MODEL_CONFIG, "mechanistic")
    assert data.log_size[data.models.index("Qwen/Qwen2.5-0.5B")] == pytest.approx(np.log(0.5e9))


@pytest.mark.parametrize(
    ("coord", "value"),
    [("learning_rate", np.inf), ("momentum", -np.inf), ("k_ref", np.inf), ("group_size", np.inf), ("model_size", 0.0), ("model_size", -2.0), ("model_size", np.inf)],
)
def test_an_infinite_or_non_positive_setting_given_for_a_run_is_refused_not_read_as_unknown(coord, value):
    # an infinite learning_rate was "unknown" and the --default replaced it silently; an infinite
    # G was fitted at the reference G with a note that it was unknown; a model_size of 0, -2 or
    # inf left the LLM out of the curvature regression, with a note that its size was unknown
    ds = _runset()
    values = np.asarray(ds[coord].values, dtype=float).copy()
    values[0] = value
    ds = ds.assign_coords({coord: ("run", values)})
    run = str(ds["run"].values[0])
    defaults = {coord: 0.5} if coord != "model_size" else {}
    config = DEFAULT_MODEL_CONFIG | {"hyperparameter_defaults": defaults}
    with pytest.raises(RunSetError, match=f"invalid {coord} for runs") as err:
        prepare_data(ds, config, "mechanistic")
    assert f"{run} ({value:g})" in str(err.value)


@pytest.fixture(scope="module")
def size_fit(tmp_path_factory):
    """A mechanistic fit of three LLMs of known size (the curvature regression is on)."""
    from bayes_grpo.model import GRPODynamicsModel

    m = GRPODynamicsModel()
    m.fit(_runset(), draws=80, tune=150, chains=2, cores=1, random_seed=1, progressbar=False)
    assert "size_exponent" in m.idata.posterior
    path = tmp_path_factory.mktemp("multi_llm") / "fit.nc"
    m.save(path)
    return m, path


SETTING = dict(learning_rate=1e-3, momentum=0.5, momentum_convention="heavy_ball", k_ref=4)


def test_stability_and_phase_diagram_of_a_new_llm_take_its_size_when_the_fit_regresses_on_size(
    size_fit, tmp_path, capsys
):
    from bayes_grpo.checks.stability import phase_diagram, stability_from_posterior
    from bayes_grpo.cli import main

    m, path = size_fit
    # no way to give the size: `stability --posterior` and `phase-diagram` of a new (or no)
    # LLM stopped with "give model_size for a new model"
    small = stability_from_posterior(m, model_size=0.3e9, **SETTING)
    large = stability_from_posterior(m, model_size=14e9, **SETTING)
    assert "3e+08 parameters (population level)" in small.summary
    assert small.values["gain_median"] < large.values["gain_median"]  # K grows with N here
    res = phase_diagram(m, momentum=0.5, momentum_convention="heavy_ball", model_size=3e9, k_refs=range(5))
    assert "of 3e+09 parameters" in res.summary
    cli = ["--posterior", str(path), "--lr", "1e-3", "--momentum", "0.5", "--convention", "heavy_ball", "--k-ref", "4"]
    assert main(["stability", *cli, "--model-size", "3e9"]) == 0
    assert "3e+09 parameters" in capsys.readouterr().out
    # a fitted LLM has its own curvature: a size given with it is not used, and says so
    assert main(["stability", *cli, "--model", "llm 1.5B", "--model-size", "3e9"]) == 0
    assert "--model-size 3e+09 is not used: 'llm 1.5B' is a fitted LLM" in capsys.readouterr().err
    assert main(["stability", *cli, "--model", "llm-3B"]) == 2
    err = capsys.readouterr().err
    assert "model 'llm-3B' is not in the fit" in err and "--model-size" in err
    out = tmp_path / "phase.png"
    assert main(["phase-diagram", str(path), "-o", str(out), "--model-size", "3e9", "--k-ref-max", "4"]) == 0
    assert out.stat().st_size > 10_000
    capsys.readouterr()


def test_a_fitted_llms_phase_diagram_judges_only_its_own_runs(size_fit):
    from bayes_grpo.checks.stability import phase_diagram

    m, _ = size_fit
    # each LLM has one run; its diagram counted the other LLMs' runs, under its curvature
    res = phase_diagram(m, momentum=0.5, momentum_convention="heavy_ball", model="llm 1.5B", k_refs=range(5))
    assert "of 1 observed runs" in res.summary and "phase diagram of llm 1.5B" in res.summary


def test_the_report_of_a_multi_llm_fit_draws_one_phase_diagram_per_llm(size_fit, tmp_path):
    import html

    from bayes_grpo.report.build import report_from_posterior

    _, path = size_fit
    out = tmp_path / "r.html"
    # the report's one population-level diagram stopped the whole report with
    # "give model_size for a new model"
    report_from_posterior(path, out, diagnose=False)
    text = html.unescape(out.read_text(encoding="utf-8"))
    for name in SIZES:
        assert f"Posterior phase diagram of {name} over" in text


def test_a_new_llms_size_must_be_positive_and_is_flagged_outside_the_fitted_sizes(size_fit):
    from bayes_grpo.predict.predict import predict_run
    from bayes_grpo.predict.summary import attr_warnings

    m, _ = size_fit
    setting = SETTING | {"group_size": 8}
    # log(0) gave a zero gain: a flat "prediction" without a word; a negative size gave NaNs
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="model_size must be a positive number"):
            m.coefficient_draws(model_size=bad, **setting)
    ds = predict_run(m, model_size=1e12, steps=60, **setting)
    assert any("model_size = 1e+12 is outside the fitted LLMs' sizes [5e+08, 7e+09]" in w for w in attr_warnings(ds))
    inside = predict_run(m, model_size=3e9, steps=60, **setting)
    assert not any("model_size" in w for w in attr_warnings(inside))


def test_the_fit_says_when_the_size_regression_leaves_an_llm_out():
    from bayes_grpo.model import GRPODynamicsModel

    ds = _runset(sizes=SIZES | {"llm-14B": 14e9})
    sizes = np.asarray(ds["model_size"].values, dtype=float).copy()
    sizes[np.asarray(ds["model"].values) == "llm-14B"] = np.nan
    m = GRPODynamicsModel()
    m.build_model(ds.assign_coords(model_size=("run", sizes)))
    # llm-14B was put at the mean log size of the others (x_size = 0) without a note
    assert any("model_size unknown for LLMs ['llm-14B']" in n for n in m.data.notes)
    m.build_model(_runset(sizes={"a": 1e9, "b": 2e9}))
    assert any("not regressed on log model_size: 2 of 2 LLMs" in n for n in m.data.notes)


def test_fit_reports_the_curvature_scaling_exponent_it_recovered(size_fit):
    from bayes_grpo.model.core import size_exponent_summary

    m, _ = size_fit
    # the exponent was in the posterior file only: `fit` printed neither it nor that it was used
    s = size_exponent_summary(m)
    assert s["llms"] == list(SIZES) and s["lo"] < s["median"] < s["hi"]
