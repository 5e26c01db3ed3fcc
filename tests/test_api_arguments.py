"""The Python API refuses at its edges what the command line refuses: a seed, a count, a
probability or an output file name that means nothing is a ValueError naming the argument, before
any work, not NumPy's or PyMC's own error naming none (nor a bool taken as the seed 1)."""

from pathlib import Path

import numpy as np
import pytest

from bayes_grpo.model import GRPODynamicsModel

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "models" / "tiny.nc"
SETTING = dict(learning_rate=5e-4, momentum=0.9, momentum_convention="ema", k_ref=1.0, group_size=16.0)
SEED_WORDS = r"must be a whole number >= 0 \(a random seed\)"


@pytest.fixture(scope="module")
def tiny():
    return GRPODynamicsModel.load(TINY)


def _seed_calls(tmp_path):
    """(argument name, call taking a seed) of every public function with a seed argument."""
    from bayes_grpo.checks.bayes_factor import bridge_evidence, sample_unconstrained, smc_evidence
    from bayes_grpo.checks.invariance import (
        invariance_bayes_factor,
        invariance_check,
        leave_one_g_out,
        stationary_variance_check,
    )
    from bayes_grpo.checks.ppc import (
        iid_residual_check,
        ppc_checks,
        residual_autocorrelation_check,
        trajectory_band_check,
    )
    from bayes_grpo.dynamics.simulate import simulate_recursion, simulate_sde, simulate_sde_runset
    from bayes_grpo.predict.calibration import backtest_seed
    from bayes_grpo.predict.compare import compare_laws
    from bayes_grpo.predict.evaluate import evaluate_forecasts
    from bayes_grpo.report.build import ppc_results, report_from_posterior
    from bayes_grpo.report.demo import run_demo

    def calls(model):
        runs = model.runset
        nuts = dict(draws=5, tune=5)
        return {
            "ppc_checks": ("seed", lambda s: ppc_checks(model, seed=s)),
            "trajectory_band_check": ("seed", lambda s: trajectory_band_check(model, seed=s)),
            "residual_autocorrelation_check": ("seed", lambda s: residual_autocorrelation_check(model, seed=s)),
            "iid_residual_check": ("seed", lambda s: iid_residual_check(model, seed=s)),
            "stationary_variance_check": ("seed", lambda s: stationary_variance_check(model, seed=s)),
            "ppc_results": ("seed", lambda s: ppc_results(model, seed=s)),
            "invariance_check": ("random_seed", lambda s: invariance_check(runs, random_seed=s, **nuts)),
            "invariance_bayes_factor": ("random_seed", lambda s: invariance_bayes_factor(runs, random_seed=s, **nuts)),
            "leave_one_g_out": ("random_seed", lambda s: leave_one_g_out(runs, random_seed=s, **nuts)),
            "report_from_posterior": (
                "seed", lambda s: report_from_posterior(TINY, tmp_path / "r.html", seed=s, overwrite=True)
            ),
            "run_demo": ("seed", lambda s: run_demo(tmp_path / "demo", seed=s, fast=True, progress=lambda line: None)),
            "compare_laws": ("random_seed", lambda s: compare_laws(runs, random_seed=s, **nuts)),
            "sample_prior_predictive": (
                "random_seed", lambda s: model.sample_prior_predictive(runs, samples=5, random_seed=s)
            ),
            "prior_predictive_check": (
                "random_seed", lambda s: model.prior_predictive_check(runs, samples=5, random_seed=s)
            ),
            "coefficient_draws": ("random_seed", lambda s: model.coefficient_draws(random_seed=s, **SETTING)),
            "predict": ("random_seed", lambda s: model.predict(np.arange(10.0), random_seed=s, **SETTING)),
            "simulate_sde_runset": ("random_seed", lambda s: simulate_sde_runset(n_steps=20, random_seed=s)),
            "simulate_recursion": ("rng", lambda s: simulate_recursion(0.1, 0.5, 1, 10, noise_sd=0.1, rng=s)),
            "simulate_sde": ("rng", lambda s: simulate_sde(1.0, 1.0, 1.0, 0.1, 4, np.arange(5.0), rng=s)),
            "evaluate_forecasts": ("seed", lambda s: evaluate_forecasts(runs, seed=s)),
            "backtest_seed": ("seed", lambda s: backtest_seed(s, "r0")),
            "smc_evidence": ("random_seed", lambda s: smc_evidence(None, random_seed=s)),
            "sample_unconstrained": ("random_seed", lambda s: sample_unconstrained(None, random_seed=s)),
            "bridge_evidence": ("random_seed", lambda s: bridge_evidence(None, random_seed=s)),
        }

    return calls


SEED_FUNCTIONS = [
    "ppc_checks", "trajectory_band_check", "residual_autocorrelation_check", "iid_residual_check",
    "stationary_variance_check", "ppc_results", "invariance_check", "invariance_bayes_factor",
    "leave_one_g_out", "report_from_posterior", "run_demo", "compare_laws", "sample_prior_predictive",
    "prior_predictive_check", "coefficient_draws", "predict", "simulate_sde_runset", "simulate_recursion",
    "simulate_sde", "evaluate_forecasts", "backtest_seed", "smc_evidence", "sample_unconstrained",
    "bridge_evidence",
]  # fmt: skip


@pytest.mark.parametrize("bad", [-1, 1.5, True], ids=["negative", "fraction", "bool"])
@pytest.mark.parametrize("function", SEED_FUNCTIONS)
def test_every_public_seed_argument_refuses_a_seed_that_means_nothing_naming_the_argument(function, bad, tiny, tmp_path):
    # ppc_checks(seed=-1) failed in NumPy's "expected non-negative integer", 1.5 in "SeedSequence
    # expects int", True was the seed 1; report_from_posterior(seed=-1) wrote a report whose ppc
    # section was "Not assessable: expected non-negative integer"
    name, call = _seed_calls(tmp_path)(tiny)[function]
    with pytest.raises(ValueError, match=rf"^{name} {SEED_WORDS}"):
        call(bad)
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "demo").exists()


def test_a_valid_seed_gives_the_draws_it_gave_before_the_check(tiny):
    # the check hands the seed on unchanged: a numpy integer seeds as the int it equals
    from bayes_grpo.checks.ppc import trajectory_band_check

    a = tiny.coefficient_draws(random_seed=5, **SETTING)["initial_reward"].values
    b = tiny.coefficient_draws(random_seed=np.int64(5), **SETTING)["initial_reward"].values
    np.testing.assert_array_equal(a, b)
    assert trajectory_band_check(tiny, seed=3).table.equals(trajectory_band_check(tiny, seed=np.int64(3)).table)


@pytest.mark.parametrize(
    "function, argument, value",
    [
        ("report_from_posterior", "draws", 1.5),
        ("report_from_posterior", "chains", 0),
        ("compare_laws", "chains", 0),
        ("compare_laws", "draws", 2.5),
        ("invariance_check", "chains", 0),
        ("invariance_check", "tune", -1),
        ("leave_one_g_out", "draws", 0),
        ("sample_prior_predictive", "samples", 0),
    ],
)
def test_a_sampler_count_that_means_nothing_is_refused_naming_it_before_any_work(function, argument, value, tiny, tmp_path):
    # compare_laws(chains=0) and invariance_check(chains=0) failed in PyMC after the runs were
    # prepared, report_from_posterior(draws=1.5) sampled 1 draw per chain without a word
    from bayes_grpo.checks.invariance import invariance_check, leave_one_g_out
    from bayes_grpo.predict.compare import compare_laws
    from bayes_grpo.report.build import report_from_posterior

    runs = tiny.runset
    calls = {
        "report_from_posterior": lambda **kw: report_from_posterior(TINY, tmp_path / "r.html", invariance=True, **kw),
        "compare_laws": lambda **kw: compare_laws(runs, **kw),
        "invariance_check": lambda **kw: invariance_check(runs, **kw),
        "leave_one_g_out": lambda **kw: leave_one_g_out(runs, **kw),
        "sample_prior_predictive": lambda **kw: tiny.sample_prior_predictive(runs, **kw),
    }
    with pytest.raises(ValueError, match=rf"^{argument} must be a whole number >= [01], got {value!r}"):
        calls[function](**{argument: value})
    assert not (tmp_path / "r.html").exists()


def test_a_target_acceptance_outside_zero_to_one_is_refused_naming_it_before_any_fit(tiny):
    # invariance_check(target_accept=1.5) was handed to NUTS for every fit of the test
    from bayes_grpo.checks.invariance import invariance_check

    with pytest.raises(ValueError, match=r"^target_accept must lie strictly between 0 and 1, got 1.5"):
        invariance_check(tiny.runset, target_accept=1.5, draws=5, tune=5)


@pytest.mark.parametrize("writer", ["save_runset", "GRPODynamicsModel.save", "save_prediction"])
@pytest.mark.parametrize("name", ["runs.csv", "fit.json", "noext"])
def test_the_python_netcdf_writers_refuse_a_file_named_as_another_format_as_the_cli_does(writer, name, tiny, tmp_path):
    # save_runset(ds, "runs.csv") wrote netCDF bytes under a CSV name (ingest tells a saved run set
    # by its netCDF name), while `bayes-grpo ingest -o runs.csv` was refused
    from bayes_grpo.predict.predict import predict_run, save_prediction
    from bayes_grpo.runset import save_runset

    path = tmp_path / name
    write = {
        "save_runset": lambda p: save_runset(tiny.runset, p),
        "GRPODynamicsModel.save": lambda p: tiny.save(p),
        "save_prediction": lambda p: save_prediction(predict_run(tiny, steps=20, discrepancy=False, **SETTING), p),
    }[writer]
    got = Path(name).suffix or "no extension"
    with pytest.raises(ValueError, match=rf"{name}: path writes netCDF; name the file .nc or .nc4 or .netcdf \(got {got}\)"):
        write(path)
    assert not path.exists()
    assert write(tmp_path / "out.NC").exists()  # a netCDF name is written as before, in any case


@pytest.mark.parametrize("value", [0.0, 1.5, float("nan")])
def test_a_prefix_fraction_outside_zero_to_one_is_refused_naming_it_not_called_a_run_too_short(value, tiny):
    # evaluate_forecasts(fractions=[1.5]) gave every run the row error "run too short: 32 steps";
    # calibrate_for_run(fraction=1.5) said every other run had "no logged step after the prefix"
    from bayes_grpo.predict.calibration import calibrate_for_run
    from bayes_grpo.predict.evaluate import evaluate_forecasts, evaluate_run

    runs = tiny.runset
    run = str(runs["run"].values[0])
    with pytest.raises(ValueError, match=rf"^fractions must lie strictly between 0 and 1, got {value!r}"):
        evaluate_forecasts(runs, fractions=[0.5, value], runs=[run], n_draws=50, likelihood="iid")
    with pytest.raises(ValueError, match=rf"^fractions must lie strictly between 0 and 1, got {value!r}"):
        evaluate_run(np.arange(30.0), np.linspace(0.2, 0.8, 30), fractions=[value], n_draws=50, likelihood="iid")
    with pytest.raises(ValueError, match=rf"^fraction must lie strictly between 0 and 1, got {value!r}"):
        calibrate_for_run(runs, run, fraction=value, prior_for=None, n_draws=50, likelihood="iid")


@pytest.mark.parametrize("value", [0.0, 1.5, float("nan"), True])
def test_an_hdi_prob_outside_zero_to_one_is_refused_naming_hdi_prob_not_the_forecasts_hdi_probs(value, tiny):
    # evaluate_forecasts(hdi_prob=1.5) was refused by the forecast's own check, naming hdi_probs,
    # an argument it does not have; evaluate_run on a run too short to forecast took it silently
    from bayes_grpo.predict.evaluate import evaluate_forecasts, evaluate_run

    runs = tiny.runset
    run = str(runs["run"].values[0])
    says = rf"^hdi_prob must lie strictly between 0 and 1, got {value!r}"
    with pytest.raises(ValueError, match=says):
        evaluate_forecasts(runs, hdi_prob=value, runs=[run], n_draws=50, likelihood="iid")
    with pytest.raises(ValueError, match=says):
        evaluate_forecasts(runs, hdi_prob=value, runs=[run], n_draws=50, likelihood="iid", calibrate=True)
    for t in (np.arange(30.0), np.arange(3.0)):  # a run long enough to forecast, and one too short
        with pytest.raises(ValueError, match=says):
            evaluate_run(t, np.linspace(0.2, 0.8, t.size), hdi_prob=value, n_draws=50, likelihood="iid")


@pytest.mark.parametrize("value", [0.0, 1.5])
def test_a_plateau_share_outside_zero_to_one_is_refused_naming_it(value, tiny):
    # stationary_variance_check(plateau_fraction=0) pooled each run's last step alone, 1.5 every
    # step, without a word
    from bayes_grpo.checks.invariance import stationary_variance_check

    with pytest.raises(ValueError, match=rf"^plateau_fraction must lie in \(0, 1\], got {value!r}"):
        stationary_variance_check(tiny, plateau_fraction=value)
    assert stationary_variance_check(tiny, plateau_fraction=1.0).name == "stationary_variance"


@pytest.mark.parametrize("cores", [0, -1, 1.5])
def test_a_fit_on_no_cores_is_refused_naming_them_before_the_model_is_built(cores, tiny):
    # GRPODynamicsModel.fit(cores=0) built the model, then failed in PyMC's ZeroDivisionError;
    # cores=-1 was sampled without a word
    model = GRPODynamicsModel()
    with pytest.raises(ValueError, match=rf"^cores must be a whole number >= 1, got {cores!r}"):
        model.fit(tiny.runset, draws=5, tune=5, cores=cores)
    assert model.idata is None and model.runset is None
