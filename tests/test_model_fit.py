"""The hierarchical model samples, recovers known truth, checks convergence, and round-trips to disk.

Small but real sampling (chains=2, cores=1); one fitted model is shared by the session.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from bayes_grpo.dynamics.simulate import runset_truth, simulate_sde_runset
from bayes_grpo.model import GRPODynamicsModel
from bayes_grpo.model.core import ATTR_PREFIX

TRUE_K = 400.0
SAMPLING = dict(draws=300, tune=400, chains=2, cores=1, random_seed=3, progressbar=False)


def _sim(random_seed=11, **kw):
    spec = {"m": {"stiffness": TRUE_K, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 1e-12, "model_size": 1e9}}
    args = dict(
        models=spec,
        group_sizes=(4, 16),
        learning_rates=(1e-4, 2e-4),
        momentum=0.9,
        convention="ema",
        n_seeds=1,
        n_steps=160,
        measurement_sd=0.08,
        measurement_g_exponent=1.0,
        random_seed=random_seed,
    )
    args.update(kw)
    return simulate_sde_runset(**args)


@pytest.fixture(scope="session")
def sim_runset() -> xr.Dataset:
    return _sim(ragged=0.2, missing_frac=0.05)


@pytest.fixture(scope="session")
def fitted(sim_runset) -> GRPODynamicsModel:
    model = GRPODynamicsModel(model_config={"alpha": {"fixed": 1.0}})
    model.fit(sim_runset, **SAMPLING)
    return model


def _inside(draws: np.ndarray, value: float, prob: float = 0.98) -> bool:
    lo, hi = np.quantile(np.ravel(draws), [(1 - prob) / 2, (1 + prob) / 2])
    return bool(lo <= value <= hi)


@pytest.mark.slow
def test_posterior_recovers_true_plateau_gain_and_noise(fitted, sim_runset):
    truth = runset_truth(sim_runset)
    post = fitted.idata.posterior
    assert _inside(post["plateau"].sel(model="m").values, truth["models"]["m"]["plateau"])
    for run, tr in truth["runs"].items():
        assert _inside(post["a"].sel(run=run).values, tr["a"]), run
        assert _inside(post["zeta"].sel(run=run).values, tr["zeta"]), run
        assert _inside(post["sigma"].sel(run=run).values, tr["measurement_sd"]), run


@pytest.mark.slow
def test_every_fit_reports_convergence_with_advice(fitted):
    check = fitted.convergence()
    assert check.name == "convergence"
    assert {"max_r_hat", "min_ess_bulk", "divergences", "max_treedepth_hits", "min_bfmi", "advice"} <= set(check.values)
    assert check.values["max_r_hat"] < 1.05
    assert check.passed == (not check.values["advice"])


@pytest.mark.slow
def test_run_summary_reports_three_r2_figures_per_run(fitted, sim_runset):
    frame = fitted.run_summary()
    assert list(frame.index) == [str(r) for r in sim_runset.run.values]
    assert {"p_star", "M_eff", "C_eff", "K_eff", "zeta", "D", "r2_raw", "r2_noise_ceiling", "r2_smoothed"} <= set(frame.columns)
    assert (frame["r2_smoothed"] > 0.95).all()
    assert (frame["r2_raw"] <= frame["r2_smoothed"] + 1e-9).all()


def test_save_refuses_an_existing_file_unless_told_to_overwrite(tmp_path):
    # GRPODynamicsModel.save(path) replaced an existing file by default (the CLI refuses one)
    from pathlib import Path

    model = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    path = tmp_path / "fit.nc"
    path.write_bytes(b"the user's file")
    with pytest.raises(FileExistsError, match="fit.nc: already exists"):
        model.save(path)
    assert path.read_bytes() == b"the user's file"
    assert GRPODynamicsModel.load(model.save(path, overwrite=True)).id == model.id


def test_a_model_size_the_draws_do_not_use_is_said_so_as_predict_says_it(tmp_path, capsys):
    # coefficient_draws(model_size=7e9) of a fit without the curvature regression on size, or
    # for a fitted LLM, ignored the size silently (predict said "model_size = ... is not used")
    import warnings
    from pathlib import Path

    from bayes_grpo.cli import main
    from bayes_grpo.model import UnusedModelSizeWarning

    tiny = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    model = GRPODynamicsModel.load(tiny)  # one LLM, no size regression
    setting = dict(learning_rate=1e-3, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=16)
    with pytest.warns(UnusedModelSizeWarning, match="model_size = 7e\\+09 is not used: 'tiny-gpt2' is an LLM of the fit"):
        fitted = model.coefficient_draws(model_size=7e9, **setting)
    assert fitted.attrs["model_size_unused"] == "'tiny-gpt2' is an LLM of the fit, whose curvature is its own"
    with pytest.warns(UnusedModelSizeWarning, match="no regression of the curvature on model size"):
        new = model.coefficient_draws(model="other", model_size=7e9, **setting)
    xr.testing.assert_identical(new["a"], model.coefficient_draws(model="other", **setting)["a"])  # not used indeed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "model_size_unused" not in model.coefficient_draws(model="other", **setting).attrs
        # a fitted run's settings passed whole (the PPC, the report) carry the LLM's own size
        own = float(model.runset["model_size"].values[0])
        assert "model_size_unused" not in model.coefficient_draws(model_size=own, **setting).attrs
    # the command line says it once, as --model-size, where a new LLM's size is not used
    cli = ["stability", "--posterior", str(tiny), "--lr", "1e-3", "--momentum", "0.9", "--convention", "ema", "--k-ref", "1"]
    capsys.readouterr()
    assert main([*cli, "--model", "other", "--model-size", "7e9"]) == 0
    out = capsys.readouterr()
    assert out.err.count("is not used") == 1
    assert "--model-size 7e+09 is not used: this fit has no regression of the curvature on model size" in out.err
    assert "7e+09 parameters" not in out.out  # the label named a size that was not used


def test_a_saved_fit_loads_back_with_the_notes_its_fit_printed(monkeypatch):
    # `fit` of two LLMs of known size printed "the curvature is not regressed on log model_size: 2
    # of 2 LLMs have a known size ... the sizes are not used"; `report fit.nc` (and predict) of the
    # saved fit did not: load rebuilt the data without the notes build_model adds (the size
    # regression's, the state-space measurement batches'), while write_report(model=...) had them
    from pathlib import Path

    import bayes_grpo.model.core as core

    note = "the curvature is not regressed on log model_size (stand-in)"
    monkeypatch.setattr(core, "size_regression_note", lambda data, config, parameterisation: note)
    loaded = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    built = GRPODynamicsModel(model_config=loaded.model_config, **loaded.settings)
    built.build_model(loaded.runset)
    assert note in loaded.data.notes
    assert loaded.data.notes == built.data.notes


@pytest.mark.slow
def test_saved_fit_loads_without_refitting_and_refuses_altered_files(fitted, tmp_path):
    path = fitted.save(tmp_path / "fit.nc")
    loaded = GRPODynamicsModel.load(path)
    assert loaded.id == fitted.id
    for group in ("posterior", "sample_stats", "observed_data", "constant_data", "fit_data"):
        assert hasattr(loaded.idata, group), group
    np.testing.assert_array_equal(loaded.idata.posterior["a"].values, fitted.idata.posterior["a"].values)
    xr.testing.assert_allclose(loaded.coefficient_draws(learning_rate=1e-4, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=4),
                               fitted.coefficient_draws(learning_rate=1e-4, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=4))
    # an altered configuration no longer matches the stored hash
    idata = loaded.idata
    cfg = json.loads(idata.posterior.attrs[ATTR_PREFIX + "model_config"])
    cfg["plateau"]["sigma"] = 99.0
    idata.posterior.attrs[ATTR_PREFIX + "model_config"] = json.dumps(cfg)
    idata.to_netcdf(str(tmp_path / "altered.nc"), engine="h5netcdf")
    with pytest.raises(ValueError, match="hash"):
        GRPODynamicsModel.load(tmp_path / "altered.nc")
    idata.posterior.attrs[ATTR_PREFIX + "model_config"] = json.dumps(json.loads(fitted.idata.posterior.attrs[ATTR_PREFIX + "model_config"]))
    idata.posterior.attrs[ATTR_PREFIX + "package_version"] = "0.0.1"
    idata.to_netcdf(str(tmp_path / "old.nc"), engine="h5netcdf")
    with pytest.raises(ValueError, match="version"):
        GRPODynamicsModel.load(tmp_path / "old.nc")


@pytest.mark.slow
def test_coefficients_for_a_new_setting_follow_the_mechanistic_formulas(fitted):
    c = fitted.coefficient_draws(learning_rate=3e-4, momentum=0.9, momentum_convention="ema", k_ref=2, group_size=8)
    assert c["a"].dims == ("chain", "draw")
    k = np.exp(fitted.idata.posterior["log_stiffness"].sel(model="m").values)
    a = 3e-4 * 0.1 * k
    np.testing.assert_allclose(c["a"].values, a)
    np.testing.assert_allclose(c["M_eff"].values, 0.95 + a * 4 / 2)
    np.testing.assert_allclose(c["C_eff"].values, 0.1 - a * 2)
    # noise scales as D / G^alpha with alpha fixed to 1 here
    c16 = fitted.coefficient_draws(learning_rate=3e-4, momentum=0.9, momentum_convention="ema", k_ref=2, group_size=32)
    np.testing.assert_allclose(c16["sigma"].values, c["sigma"].values / 2.0)
    traj = fitted.trajectory_draws(np.arange(0, 50), learning_rate=3e-4, momentum=0.9, momentum_convention="ema", k_ref=2, group_size=8)
    assert traj.dims == ("chain", "draw", "step") and traj.shape[-1] == 50
    np.testing.assert_allclose(traj.isel(step=0).values, c["initial_reward"].values)
    pred = fitted.predict(np.arange(0, 50), learning_rate=3e-4, momentum=0.9, momentum_convention="ema", k_ref=2, group_size=8)
    assert set(pred.data_vars) == {"reward_mean", "reward"}


def test_by_group_model_has_per_model_and_g_offsets(sim_runset):
    model = GRPODynamicsModel(invariance="by_group")
    pm_model = model.build_model(sim_runset)
    names = {v.name for v in pm_model.deterministics}
    assert {"group_offset_plateau", "group_offset_initial_reward", "group_offset_log_stiffness", "group_offset_log_damping"} <= names
    assert pm_model.coords["group"] == ("m|G=4", "m|G=16")
    assert np.isfinite(pm_model.compile_logp()(pm_model.initial_point()))


def test_phenomenological_and_state_space_models_build_with_finite_density(sim_runset):
    for kw in ({"parameterisation": "phenomenological"}, {"likelihood": "state-space"}):
        model = GRPODynamicsModel(**kw)
        pm_model = model.build_model(sim_runset)
        assert np.isfinite(pm_model.compile_logp()(pm_model.initial_point())), kw


def test_the_models_log_densities_need_no_blas(sim_runset):
    # the per-LLM mean of the run offsets was pt.dot(matrix, z): a Gemv, which PyTensor runs
    # in Python when pip installed it without a BLAS to link, after warning "could not link to
    # a BLAS installation ... severely degraded" on every fit. The graphs before compilation
    # (compiling them takes minutes), where the dot was: the Gemv is the rewrite of a Dot, and the
    # compiled graphs of the three forms held none once it was gone
    import pytensor
    from pytensor.graph.traversal import applys_between

    def blas(ops):
        return {op for op in ops if any(k in op.lower() for k in ("gemv", "gemm", "dot"))}

    for kw in ({}, {"parameterisation": "phenomenological"}, {"likelihood": "state_space"}):
        model = GRPODynamicsModel(**kw).build_model(sim_runset)
        logp = model.logp()
        outputs = [logp, *pytensor.grad(logp, model.value_vars)]
        nodes = applys_between(model.value_vars, outputs)
        ops = {type(node.op).__name__ for node in nodes}
        ops |= {type(node.op.core_op).__name__ for node in nodes if hasattr(node.op, "core_op")}
        assert not blas(ops), (kw, ops)


def test_the_sampler_starts_every_llm_at_its_own_stable_gain_when_their_steps_are_decades_apart():
    # two LLMs, Adam at lr 1e-6 and SGD at lr 0.02 (K 2e4 and 1.5): the initial point put both
    # at the population mean log K (about 4), where the SGD runs' gain a = eta K is past the
    # stability threshold, the trajectory explodes (log density ~ -1e54) and one NUTS chain
    # in two stayed there (step size 1e-18, 199 of 200 draws divergent, R-hat 5)
    from bayes_grpo.dynamics import effective_step
    from bayes_grpo.runset.core import concat_runsets

    adam = _sim(
        models={"adam": {"stiffness": 2e4, "plateau": 7.0, "initial_reward": 2.0, "noise_d": 1e-12}},
        learning_rates=(1e-6,),
        momentum=0.9,
        convention="ema",
        measurement_sd=0.5,
    )
    sgd = _sim(
        models={"sgd": {"stiffness": 1.5, "plateau": 0.6, "initial_reward": -0.7, "noise_d": 1e-12}},
        learning_rates=(0.02,),
        momentum=0.5,
        convention="heavy_ball",
        k_refs=(4,),
        measurement_sd=0.05,
        random_seed=12,
    )
    runs = concat_runsets([adam, sgd])
    pm_model = GRPODynamicsModel().build_model(runs)
    start = pm_model.initial_point()
    stiffness = dict(zip(pm_model.coords["model"], np.exp(start["log_stiffness"]), strict=True))
    for run in runs["run"].values:
        r = runs.sel(run=run)
        mu, lag = float(r["momentum"]), float(r["k_ref"])
        gain = effective_step(float(r["learning_rate"]), mu, str(r["momentum_convention"].values)) * stiffness[str(r["model"].values)]
        assert (1.0 - mu) - gain * lag > 0, (run, gain)  # C_eff > 0: a stable oscillator
    assert pm_model.compile_logp()(start) > -1e6


def test_nutpie_gets_the_initial_curvatures_as_initial_points_of_a_model_it_can_freeze(monkeypatch):
    # the builder's per-LLM starting curvature is an initial value of the variable, and PyMC
    # refuses to freeze such a model: `fit --sampler nutpie` failed with "Cannot convert
    # models with non-default initial_values"
    nutpie = pytest.importorskip("nutpie")
    from pymc.model.transform.optimization import freeze_dims_and_data

    from bayes_grpo.model.core import _sample_nutpie

    runs = _sim()
    pm_model = GRPODynamicsModel().build_model(
        runs.assign_coords(model=("run", ["a", "a", "b", "b"]))
    )
    start = pm_model.initial_point()["log_stiffness"]
    seen = {}

    class Compiled(Exception):
        pass

    def compile_pymc_model(model, *, initial_points=None, **kwargs):
        freeze_dims_and_data(model)  # what nutpie does with freeze_model=True
        seen["initial_points"] = initial_points
        raise Compiled

    monkeypatch.setattr(nutpie, "compile_pymc_model", compile_pymc_model)
    with pytest.raises(Compiled):
        _sample_nutpie(pm_model, {"draws": 20, "tune": 20, "chains": 1, "random_seed": 0}, 1)
    np.testing.assert_allclose(seen["initial_points"]["log_stiffness"], start)
    np.testing.assert_allclose(pm_model.initial_point()["log_stiffness"], start)  # restored


def test_unknown_settings_are_rejected():
    with pytest.raises(ValueError, match="parameterisation"):
        GRPODynamicsModel(parameterisation="free")
    with pytest.raises(ValueError, match="likelihood"):
        GRPODynamicsModel(likelihood="student")


@pytest.mark.slow
def test_priors_are_scaled_to_the_data_by_a_prior_predictive_check(sim_runset):
    # the same priors must cover a binary-accuracy-like curve and the same curve in game-score units
    for factor in (1.0, 1000.0):
        ds = sim_runset.copy(deep=True)
        ds["reward"] = ds["reward"] * factor
        check = GRPODynamicsModel().prior_predictive_check(ds, samples=200, random_seed=1)
        assert check.passed, check.summary
        assert (check.table["band_width_over_range"] < 50).all(), check.table


def test_a_prior_predictive_check_on_a_fitted_model_leaves_the_fit_as_it_is(sim_runset):
    # prior_predictive_check(other) on a fitted model rebuilt the model for `other` and kept its
    # run set and data: run_summary then paired the fit's posterior with other runs (a run set
    # in another order: rows silently mislabelled; fewer runs: a ValueError). Prior draws stand
    # in for the posterior.
    import arviz as az

    model = GRPODynamicsModel()
    model.idata = az.InferenceData(posterior=model.sample_prior_predictive(sim_runset, samples=20, random_seed=1).prior)
    runs = [str(r) for r in sim_runset["run"].values]
    before = model.run_summary()
    for other in (sim_runset.isel(run=slice(None, None, -1)), sim_runset.isel(run=[0])):
        check = model.prior_predictive_check(other, samples=20, random_seed=2)
        assert list(check.table.index) == [str(r) for r in other["run"].values]
        assert model.data.run_ids == runs and model.runset is sim_runset
        assert model.run_summary().equals(before)
    assert len(model.sample_prior_predictive(sim_runset.isel(run=[0]), samples=5).prior["run"]) == 1
    assert model.data.run_ids == runs


@pytest.mark.slow
def test_nutpie_sampler_gives_the_same_posterior_as_pymc_with_every_deterministic(fitted, sim_runset, tmp_path):
    pytest.importorskip("nutpie")
    other = GRPODynamicsModel(model_config={"alpha": {"fixed": 1.0}})
    other.fit(sim_runset, **(SAMPLING | {"sampler": "nutpie"}))
    post, ref = other.idata.posterior, fitted.idata.posterior
    # deterministics are computed after sampling: same variables, same dims as with PyMC (and no
    # unconstrained values of transformed ones, which nutpie stores too)
    assert set(ref.data_vars) == set(post.data_vars), set(post.data_vars) ^ set(ref.data_vars)
    for name in ("M_eff", "K_eff", "zeta", "sigma", "plateau"):
        assert post[name].dims == ref[name].dims, name
        assert np.all(np.isfinite(post[name].values)), name
    # the same posterior: means agree within 0.5 posterior sd (each has >= 100 effective draws)
    for name in ("plateau", "a", "zeta", "sigma"):
        diff = np.abs(post[name].mean(("chain", "draw")) - ref[name].mean(("chain", "draw")))
        sd = ref[name].std(("chain", "draw"))
        assert bool((diff <= 0.5 * sd).all()), (name, diff.values, sd.values)
    assert "diverging" in other.idata.sample_stats
    other.convergence()  # nutpie's sample-stat names are understood
    path = other.save(tmp_path / "nutpie_fit.nc")
    again = GRPODynamicsModel.load(path)
    np.testing.assert_allclose(again.idata.posterior["zeta"].values, post["zeta"].values)


@pytest.mark.parametrize("gone", ["settings", "model_config", "sampler_config"])
def test_a_fit_file_missing_an_identity_attribute_is_refused_naming_the_file(tmp_path, gone):
    import arviz as az

    from bayes_grpo import __version__

    post = xr.Dataset({"a": (("chain", "draw"), np.zeros((1, 2)))}, coords={"chain": [0], "draw": [0, 1]})
    post.attrs = {
        ATTR_PREFIX + "model_type": GRPODynamicsModel._model_type,
        ATTR_PREFIX + "model_version": GRPODynamicsModel.version,
        ATTR_PREFIX + "package_version": __version__,
        ATTR_PREFIX + "settings": json.dumps(GRPODynamicsModel().settings),
        ATTR_PREFIX + "model_config": "{}",
        ATTR_PREFIX + "sampler_config": "{}",
    }
    del post.attrs[ATTR_PREFIX + gone]
    path = tmp_path / "cut.nc"
    az.InferenceData(posterior=post).to_netcdf(str(path), engine="h5netcdf")
    with pytest.raises(ValueError, match=f"cut.nc: attributes .*{gone}.* missing"):
        GRPODynamicsModel.load(path)


@pytest.mark.parametrize(
    ("attribute", "value", "message"),
    [
        ("settings", "[1, 2]", "attribute bayes_grpo_settings must hold a JSON object"),
        ("settings", "{bad", "attribute bayes_grpo_settings is not JSON text"),
        (
            "settings",
            json.dumps({"parameterisation": "mechanistic", "likelihood": 1, "invariance": "shared"}),
            r"attribute bayes_grpo_settings is refused \(unknown likelihood 1",
        ),
        (
            "settings",
            json.dumps({"parameterisation": "mechanistic", "likelihood": "iid", "invariance": "shared", "foo": 1}),
            r"attribute bayes_grpo_settings has 1 unknown field \['foo'\]",
        ),
        ("model_config", "null", "attribute bayes_grpo_model_config must hold a JSON object"),
        ("sampler_config", json.dumps({"max_treedepth": "x"}), "attribute bayes_grpo_sampler_config is refused .*'max_treedepth'"),
        ("fit_seconds", "abc", "attribute bayes_grpo_fit_seconds is 'abc', not a number of seconds"),
    ],
)
def test_a_fit_whose_stored_settings_were_altered_is_refused_naming_the_file_and_the_field(
    tmp_path, attribute, value, message
):
    # an altered settings attribute was an AttributeError traceback ('int' object has no
    # attribute 'replace') or a TypeError's words ("__init__() got an unexpected keyword
    # argument 'foo'"); an altered sampler config loaded, and convergence() failed on it later
    # ("invalid literal for int()"), naming no file; an altered fit_seconds likewise
    import arviz as az

    idata = az.from_netcdf(str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc"), engine="h5netcdf")
    idata.posterior.attrs[ATTR_PREFIX + attribute] = value
    path = tmp_path / "altered.nc"
    idata.to_netcdf(str(path), engine="h5netcdf")
    with pytest.raises(ValueError, match=f"altered.nc: {message}"):
        GRPODynamicsModel.load(path)


def test_pymcs_overflow_at_a_leapfrog_past_the_stability_threshold_is_not_printed_other_warnings_are(
    sim_runset, monkeypatch
):
    # "RuntimeWarning: overflow encountered in dot" (pymc/step_methods/hmc/quadpotential.py,
    # velocity_energy) was printed at the start of long or weakly identified fits: a leapfrog
    # step past the stability threshold, where the bounded trajectory gives a finite log density
    # of ~ -1e178 and a gradient as large, overflows the kinetic energy; NUTS marks the
    # transition divergent, and the convergence check reports such transitions after tuning.
    # A stand-in pm.sample raises it from PyMC's module, beside a warning that must still show
    seen = _warnings_of_a_fit_whose_sampler_warns(
        sim_runset,
        monkeypatch,
        ("overflow encountered in dot", "overflow encountered in exp"),
        RuntimeWarning,
        "pymc.step_methods.hmc.quadpotential",
    )
    shown = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert shown == ["overflow encountered in exp"], shown


def _warnings_of_a_fit_whose_sampler_warns(sim_runset, monkeypatch, texts, category, module):
    """The warnings a fit of ``sim_runset`` lets through when a stand-in ``pm.sample`` warns each
    of ``texts`` as ``category`` from ``module`` (and returns prior draws as the posterior)."""
    import warnings

    import arviz as az
    import pymc

    prior = GRPODynamicsModel().sample_prior_predictive(sim_runset, samples=20, random_seed=1).prior

    def fake_sample(**kw):
        for text in texts:
            warnings.warn_explicit(text, category, f"{module.rsplit('.', 1)[-1]}.py", 1, module=module)
        return az.InferenceData(posterior=prior)

    monkeypatch.setattr(pymc, "sample", fake_sample)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        GRPODynamicsModel().fit(sim_runset, draws=20, tune=20, chains=1)
    return seen


def test_a_python_fit_without_progress_bar_hides_pymcs_progress_messages_but_keeps_its_warnings(
    sim_runset, monkeypatch, caplog
):
    # GRPODynamicsModel().fit(runs, progressbar=False) still said "Initializing NUTS using
    # jitter+adapt_diag...", "Sequential sampling (1 chains in 1 job)", "Sampling 1 chain ... took
    # 0 seconds" at INFO on stderr (PyMC sets its logger to INFO and gives it a handler); only the
    # CLI held them. A stand-in pm.sample logs as PyMC's does and returns prior draws
    import logging

    import arviz as az
    import pymc

    prior = GRPODynamicsModel().sample_prior_predictive(sim_runset, samples=20, random_seed=1).prior

    def fake_sample(**kw):
        log = logging.getLogger("pymc.sampling.mcmc")
        log.info("Sampling 1 chain for 20 tune and 20 draw iterations")
        log.warning("Only 20 samples per chain.")
        return az.InferenceData(posterior=prior)

    monkeypatch.setattr(pymc, "sample", fake_sample)
    caplog.set_level(logging.DEBUG)  # the root's handler: where the records are read here

    def messages(progressbar: bool) -> list[tuple[int, str]]:
        caplog.clear()
        GRPODynamicsModel().fit(sim_runset, draws=20, tune=20, chains=1, progressbar=progressbar)
        return [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("pymc")]

    info = (logging.INFO, "Sampling 1 chain for 20 tune and 20 draw iterations")
    pymc_logger = logging.getLogger("pymc")
    before = pymc_logger.level
    try:
        # PyMC's own setting, made at its import into a program without a logging configuration
        # (pytest's handlers on the root logger kept PyMC from making it here)
        pymc_logger.setLevel(logging.INFO)
        quiet = messages(False)
        assert quiet == [(logging.WARNING, "Only 20 samples per chain.")], quiet
        assert pymc_logger.level == logging.INFO  # restored after the fit
        assert info in messages(True)
        # a program that configured logging (PyMC's logger left unset), or set the pymc
        # logger's level itself (DEBUG, to see the messages): left as it is
        for level in (logging.NOTSET, logging.DEBUG):
            pymc_logger.setLevel(level)
            assert info in messages(False), level
    finally:
        pymc_logger.setLevel(before)


def test_pytensors_blas_warning_is_not_printed_by_a_fit_whose_log_density_needs_no_blas(sim_runset, monkeypatch):
    # a state-space fit (`fit rag.nc --likelihood state-space --json`) printed PyTensor's "could
    # not link to a BLAS installation. Operations that might benefit from BLAS will be severely
    # degraded ..." (five lines on stderr), raised by a sparse rewrite that reads the BLAS flags
    # while it compiles the model, whose graphs hold no BLAS operation
    # (test_the_models_log_densities_need_no_blas). A stand-in pm.sample raises it from PyTensor
    seen = _warnings_of_a_fit_whose_sampler_warns(
        sim_runset,
        monkeypatch,
        ("PyTensor could not link to a BLAS installation. Operations ...", "another PyTensor warning"),
        UserWarning,
        "pytensor.link.c.cmodule",
    )
    assert [str(w.message) for w in seen if "PyTensor" in str(w.message)] == ["another PyTensor warning"]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"momentum": 1.5}, "momentum must be in [0, 1); got 1.5"),
        ({"k_ref": -1.0}, "k_ref must be >= 0; got -1"),
        ({"learning_rate": float("inf")}, "needs a finite learning_rate"),
        ({"momentum": float("nan")}, "needs a finite momentum"),
        ({"k_ref": float("nan")}, "needs a finite k_ref"),
    ],
)
def test_a_setting_no_run_can_have_is_refused_by_the_coefficient_draws(setting, message):
    # the CLI's argument types refuse these settings, the Python API took them: momentum 1.5
    # predicted a reward of -1.4e6 (with a RuntimeWarning), k_ref -1 a trajectory without a
    # word, a NaN setting all-NaN draws
    from pathlib import Path

    model = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    base = {"learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1.0}
    assert np.isfinite(model.predict(np.arange(0.0, 50.0, 10.0), **base)["reward_mean"].values).all()
    with pytest.raises(ValueError, match=re.escape(message)):
        model.predict(np.arange(0.0, 50.0, 10.0), **(base | setting))


@pytest.mark.parametrize(
    ("steps", "got"),
    [([-10.0, 0.0, 10.0], "got -10"), ([np.nan, 5.0], "got nan"), ([np.inf], "got inf"), ([[0.0, 1.0], [2.0, 3.0]], "got a 2-D array")],
)
def test_a_prediction_at_steps_the_law_does_not_reach_is_refused_naming_the_step(steps, got):
    # predict(steps=[-10, 0, 10]) extrapolated the law before its start (R0 at step 0) without a
    # word, a NaN step gave NaN, an infinite one a median of 3.4 on a 0-1 reward, a 2-D array a
    # broadcasting traceback
    from pathlib import Path

    model = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    setting = {"learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1.0}
    with pytest.raises(ValueError, match=re.escape(f"steps must be a 1-D array of finite optimizer steps >= 0 (R0 is at step 0); {got}")):
        model.predict(np.asarray(steps), **setting)
    assert model.predict([30.0, 0.0], **setting)["reward_mean"].sizes["step"] == 2  # any order, step 0 included


def test_a_reward_trajectory_of_an_llm_the_fit_lacks_is_refused_not_all_nan():
    # load('models/tiny.nc').predict(steps, model="other", ...) returned a reward of NaN at every
    # step and draw without a word: a new LLM's plateau and R0 have no scale in the fit
    from pathlib import Path

    model = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    setting = {"learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1.0}
    with pytest.raises(ValueError, match=r"model 'other' is not an LLM of the fit \(its LLMs: \['tiny-gpt2'\]\)"):
        model.predict([0.0, 10.0], model="other", **setting)
    assert np.isfinite(model.coefficient_draws(model="other", **setting)["a"].values).all()  # its dynamics
    assert np.isfinite(model.predict([0.0, 10.0], model="tiny-gpt2", **setting)["reward"].values).all()


def test_a_nutpie_posterior_keeps_the_variables_not_their_unconstrained_values():
    # a nutpie fit stored initial_reward_run_sd_log__ beside initial_reward_run_sd (PyMC does not),
    # and its convergence advice listed it among the model's variables
    import pymc as pm

    from bayes_grpo.model.core import _without_transformed_values

    with pm.Model() as model:
        pm.HalfNormal("scale", 1.0)
        pm.Normal("x", 0.0, 1.0)
    draws = np.zeros((1, 3))
    posterior = xr.Dataset({n: (("chain", "draw"), draws) for n in ("scale", "scale_log__", "x")})
    assert sorted(_without_transformed_values(posterior, model).data_vars) == ["scale", "x"]


def test_a_run_set_whose_attributes_a_saved_fit_cannot_hold_is_refused_before_sampling(sim_runset, monkeypatch):
    # runset.attrs["meta"] = {"source": "wandb"} (a dict) sampled the whole fit and then failed in
    # save() with xarray's "Invalid value for attr 'meta'" TypeError: the fit saves its run set
    def no_build(self, runset):
        raise AssertionError("the model was built")

    monkeypatch.setattr(GRPODynamicsModel, "build_model", no_build)
    ds = sim_runset.copy(deep=True)  # the session's run set stays as it is
    ds.attrs = dict(ds.attrs, meta={"source": "wandb"})
    ds["reward"].attrs = {"unit": None}
    with pytest.raises(ValueError, match=re.escape("the run set's attributes [\"'meta' (dict)\", \"'unit' of 'reward' (NoneType)\"] cannot be saved with the fit")):
        GRPODynamicsModel().fit(ds, draws=5, tune=5)
    with pytest.raises(AssertionError, match="was built"):  # the run set as simulated is fine
        GRPODynamicsModel().fit(sim_runset, draws=5, tune=5)
    assert "meta" not in sim_runset.attrs and "unit" not in sim_runset["reward"].attrs


def test_a_reward_trajectory_of_a_fit_of_several_llms_asks_which_llm():
    # predict(steps, ...) without model= on a fit of two LLMs read "model None is not an LLM of
    # the fit", as if None were a name given
    from types import SimpleNamespace

    model = GRPODynamicsModel()
    model.data = SimpleNamespace(n_models=2, models=["qwen", "llama"])
    setting = {"learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1.0}
    with pytest.raises(ValueError, match=r"the fit has several LLMs \(\['qwen', 'llama'\]\): name the one to predict with model="):
        model.trajectory_draws([0.0, 10.0], **setting)


def test_a_setting_at_momentum_0_needs_no_momentum_convention_as_a_fitted_run_does_not():
    # the fit takes a run at momentum 0 without a convention (the conventions coincide there:
    # prepare.convention_without_momentum), but coefficient_draws / predict of such a setting
    # refused it: "the mechanistic model needs ['momentum_convention']"
    from pathlib import Path

    model = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    setting = {"learning_rate": 1e-3, "momentum": 0.0, "k_ref": 1.0}
    without = model.coefficient_draws(**setting)
    for convention in ("heavy_ball", "ema"):
        np.testing.assert_allclose(without["a"].values, model.coefficient_draws(momentum_convention=convention, **setting)["a"].values)
    assert np.isfinite(model.predict([0.0, 10.0], **setting)["reward_mean"].values).all()
    with pytest.raises(ValueError, match=r"needs \['momentum_convention'\]"):
        model.coefficient_draws(**(setting | {"momentum": 0.9}))


def _altered_tiny_fit(tmp_path, alter) -> Path:
    """A copy of the shipped ``models/tiny.nc`` with ``alter(h5py.File)`` applied to it."""
    import shutil

    import h5py

    path = tmp_path / "altered.nc"
    shutil.copy(Path(__file__).resolve().parents[1] / "models" / "tiny.nc", path)
    with h5py.File(path, "r+") as f:
        alter(f)
    return path


@pytest.mark.parametrize(
    ("alter", "message"),
    [
        (lambda f: f["posterior"].__delitem__("zeta"), r"the posterior lacks the variables \['zeta'\] of a mechanistic iid fit"),
        (lambda f: f.__delitem__("sample_stats"), "no 'sample_stats' group .*its convergence cannot be checked"),
    ],
    ids=["posterior-variable", "sample-stats"],
)
def test_a_saved_fit_without_the_draws_or_statistics_a_fit_holds_is_refused_naming_the_file(tmp_path, alter, message):
    # a posterior without 'zeta' loaded, and `predict` then failed with a KeyError traceback
    # ("No variable named 'zeta'") naming no file; without sample_stats it loaded and its
    # convergence check counted no divergence, tree depth or energy without a word
    path = _altered_tiny_fit(tmp_path, alter)
    with pytest.raises(ValueError, match=f"altered.nc: {message}.*refit"):
        GRPODynamicsModel.load(path)


@pytest.fixture(scope="module")
def resaved_tiny_fit(tmp_path_factory) -> Path:
    """``models/tiny.nc`` loaded and saved again by this code (with its data checksums)."""
    model = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    return model.save(tmp_path_factory.mktemp("resaved") / "fit.nc")


def _edit_first_value(path: Path, dataset: str) -> None:
    """Change the first value of ``dataset`` in the file at ``path`` on disk, with h5py."""
    import h5py

    with h5py.File(path, "r+") as f:
        values = f[dataset][()]
        if values.dtype.kind == "O":  # text, as variable-length strings
            values.flat[0] = b"edited" if values.flat[0] not in ("edited", b"edited") else b"other"
        else:
            values.flat[0] = 0.123 if values.flat[0] != 0.123 else 0.321
        f[dataset][...] = values


EDITED_DATASETS = [
    ("posterior/zeta", "posterior"),
    ("fit_data/reward", "fit_data"),
    ("observed_data/reward", "observed_data"),
    ("fit_data/source", "fit_data"),
]


@pytest.mark.parametrize(("dataset", "group"), EDITED_DATASETS)
def test_a_saved_fit_whose_draws_or_fitted_rewards_were_edited_is_refused_naming_the_file(
    resaved_tiny_fit, tmp_path, dataset, group
):
    # the configuration hash covers the settings and priors only: a posterior draw or a fitted
    # reward edited in the file loaded without a word, and predict, stability and the report
    # read the edited numbers as the fit's
    import shutil

    path = tmp_path / "edited.nc"
    shutil.copy(resaved_tiny_fit, path)
    _edit_first_value(path, dataset)
    with pytest.raises(ValueError, match=rf"edited.nc: group '{group}' altered after it was saved .*refit"):
        GRPODynamicsModel.load(path)


def _checksums_as_first_saved(path: Path) -> dict[str, str]:
    """The data checksums as the code that introduced them (2fe91bb) computed them, kept here
    verbatim as the reference: each dataset looked up again by name after the walk."""
    import hashlib

    import h5py

    names: list[str] = []
    digests: dict = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        for name in sorted(names):
            values = np.asarray(f[name][()])
            digest = digests.setdefault(name.partition("/")[0] if "/" in name else "", hashlib.sha256())
            numeric = values.dtype.kind in "biufcmM"
            kind = values.dtype.str if numeric else "text"
            digest.update(f"{name}\0{kind}\0{values.shape}\0".encode())
            if numeric:
                digest.update(np.ascontiguousarray(values).tobytes())
            else:
                text = (x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x) for x in values.ravel())
                digest.update("\0".join(text).encode("utf-8", "surrogateescape"))
    return {group: digest.hexdigest()[:16] for group, digest in digests.items()}


@pytest.fixture(scope="module")
def fit_saved_by_the_first_checksum_code(tmp_path_factory) -> Path:
    """``models/tiny.nc`` saved as the code of 2fe91bb saved it: the arrays by ArviZ, then the
    checksums of :func:`_checksums_as_first_saved` written by reopening the file with h5netcdf."""
    import arviz as az
    import h5netcdf

    from bayes_grpo.model.core import DATA_CHECKSUMS_ATTR

    path = tmp_path_factory.mktemp("first_checksums") / "fit.nc"
    idata = az.from_netcdf(str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc"), engine="h5netcdf")
    idata.to_netcdf(str(path), engine="h5netcdf")
    sums = json.dumps(_checksums_as_first_saved(path), sort_keys=True)
    with h5netcdf.File(path, "a") as f:
        f["posterior"].attrs[DATA_CHECKSUMS_ATTR] = sums
    return path


def test_a_fit_saved_with_checksums_by_earlier_code_loads_and_an_edit_of_it_is_refused(
    fit_saved_by_the_first_checksum_code, resaved_tiny_fit, tmp_path
):
    # save and load hash the file through one h5py handle each now (speed); the digests, and
    # the attribute that holds them, must stay those that fits already on disk were saved with
    import shutil

    from bayes_grpo.model.core import DATA_CHECKSUMS_ATTR, stored_data_checksums

    old = fit_saved_by_the_first_checksum_code
    model = GRPODynamicsModel.load(old)
    assert json.loads(model.idata.posterior.attrs[DATA_CHECKSUMS_ATTR]) == _checksums_as_first_saved(old)
    # this code's save writes the same digests, as text, for the same arrays
    resaved = GRPODynamicsModel.load(resaved_tiny_fit).idata.posterior.attrs[DATA_CHECKSUMS_ATTR]
    assert isinstance(resaved, str)
    assert json.loads(resaved) == _checksums_as_first_saved(resaved_tiny_fit) == stored_data_checksums(resaved_tiny_fit)
    for dataset, group in EDITED_DATASETS:
        path = tmp_path / "edited.nc"
        shutil.copy(old, path)
        _edit_first_value(path, dataset)
        with pytest.raises(ValueError, match=rf"edited.nc: group '{group}' altered after it was saved .*refit"):
            GRPODynamicsModel.load(path)


def test_a_saved_fit_loads_with_its_data_checksums_and_one_saved_before_them_still_loads(resaved_tiny_fit, tmp_path):
    import hashlib

    import arviz as az

    from bayes_grpo.model.core import DATA_CHECKSUMS_ATTR, stored_data_checksums

    loaded = GRPODynamicsModel.load(resaved_tiny_fit)
    sums = json.loads(loaded.idata.posterior.attrs[DATA_CHECKSUMS_ATTR])
    assert set(sums) == {"posterior", "sample_stats", "observed_data", "constant_data", "fit_data"}
    assert sums == stored_data_checksums(resaved_tiny_fit)
    # the same arrays written again by ArviZ (text as fixed- or variable-length strings) load
    copy = tmp_path / "copy.nc"
    az.from_netcdf(str(resaved_tiny_fit), engine="h5netcdf").to_netcdf(str(copy), engine="h5netcdf")
    assert GRPODynamicsModel.load(copy).id == loaded.id
    # the shipped fits carry no checksum and load as they are, unwritten
    for name in ("tiny.nc", "bandit.nc"):
        shipped = Path(__file__).resolve().parents[1] / "models" / name
        before = hashlib.sha256(shipped.read_bytes()).hexdigest()
        model = GRPODynamicsModel.load(shipped)
        assert DATA_CHECKSUMS_ATTR not in model.idata.posterior.attrs
        assert hashlib.sha256(shipped.read_bytes()).hexdigest() == before


def test_a_saved_fit_whose_posterior_is_of_other_runs_than_its_run_set_is_refused(tmp_path):
    # the draws are read by position in the fitted run set: a posterior of other runs was put
    # on these runs without a word
    import arviz as az

    idata = az.from_netcdf(str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc"), engine="h5netcdf")
    runs = [str(r) for r in idata.posterior["run"].values]
    idata.posterior = idata.posterior.assign_coords(run=runs[::-1])
    path = tmp_path / "altered.nc"
    idata.to_netcdf(str(path), engine="h5netcdf")
    with pytest.raises(ValueError, match=r"altered.nc: the posterior's runs \[.*\] are not those of its 'fit_data' group"):
        GRPODynamicsModel.load(path)
    assert GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc").data.run_ids == runs


@pytest.mark.parametrize("parameterisation", ["mechanistic", "phenomenological"])
@pytest.mark.parametrize("likelihood", ["iid", "state_space"])
def test_the_posterior_variables_load_asks_of_a_fit_are_variables_its_model_has(sim_runset, parameterisation, likelihood):
    from bayes_grpo.model.core import posterior_variables

    model = GRPODynamicsModel(parameterisation=parameterisation, likelihood=likelihood).build_model(sim_runset)
    assert set(posterior_variables(parameterisation, likelihood)) <= set(model.named_vars)


def test_the_size_regression_note_agrees_with_one_llm_of_known_size():
    # `fit` of runs of two LLMs, one with a model_size (ingest read qwen2-494M's from its
    # config): "the curvature is not regressed on log model_size: 1 of 2 LLMs have a known size"
    import numpy as np
    import pandas as pd

    from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG
    from bayes_grpo.model.prepare import prepare_data, size_regression_note
    from bayes_grpo.runset import make_runset

    steps = pd.Index(np.arange(12), name="step")
    curves = {r: pd.DataFrame({"reward": np.linspace(0.2, 0.6, 12)}, index=steps) for r in ("a", "b", "c")}
    base = {"learning_rate": 1e-5, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1.0}
    sizes = {"a": ("small", 4.9e8), "b": ("big", np.nan), "c": ("third", 7e9)}
    meta = {r: base | {"model": m, "model_size": n} for r, (m, n) in sizes.items()}
    one = make_runset(curves={r: curves[r] for r in "ab"}, meta={r: meta[r] for r in "ab"})
    data = prepare_data(one, DEFAULT_MODEL_CONFIG, "mechanistic")
    note = size_regression_note(data, DEFAULT_MODEL_CONFIG, "mechanistic")
    assert "1 of 2 LLMs has a known size, 1 different" in note, note
    two = make_runset(curves=curves, meta=meta)
    data = prepare_data(two, DEFAULT_MODEL_CONFIG, "mechanistic")
    note = size_regression_note(data, DEFAULT_MODEL_CONFIG, "mechanistic")
    assert "2 of 3 LLMs have a known size, 2 different" in note, note
