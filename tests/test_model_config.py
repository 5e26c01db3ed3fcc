"""Model configs are data: merged with |, validated, hashed; run sets are prepared without dropping runs."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG, config_hash, merge_config
from bayes_grpo.model.prepare import prepare_data
from bayes_grpo.runset import RunSetError, make_runset


def _runset(meta_overrides=None, lengths=(50, 30)):
    curves, meta = {}, {}
    for i, n in enumerate(lengths):
        steps = np.arange(0, n)
        curves[f"r{i}"] = pd.DataFrame({"reward": 0.1 + 0.5 * (1 - np.exp(-steps / 10.0))}, index=steps)
        meta[f"r{i}"] = {"model": "m", "group_size": 4, "learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}
        meta[f"r{i}"].update((meta_overrides or {}).get(f"r{i}", {}))
    return make_runset(curves, meta)


def test_user_config_merges_into_defaults_one_level_deep():
    cfg = merge_config(DEFAULT_MODEL_CONFIG, {"alpha": {"fixed": 1.0}})
    assert cfg["alpha"] == {"mu": 1.0, "sigma": 0.5, "fixed": 1.0}
    assert cfg["plateau"] == DEFAULT_MODEL_CONFIG["plateau"]
    assert DEFAULT_MODEL_CONFIG["alpha"]["fixed"] is None  # defaults untouched


def test_unknown_config_keys_are_rejected():
    with pytest.raises(ValueError, match="unknown configuration key"):
        merge_config(DEFAULT_MODEL_CONFIG, {"plateu": {"sigma": 1}})
    with pytest.raises(ValueError, match="unknown entries"):
        merge_config(DEFAULT_MODEL_CONFIG, {"alpha": {"fix": 1}})


def test_config_hash_changes_with_any_prior():
    a = config_hash(DEFAULT_MODEL_CONFIG)
    assert a == config_hash(merge_config(DEFAULT_MODEL_CONFIG, {}))
    assert a != config_hash(merge_config(DEFAULT_MODEL_CONFIG, {"plateau": {"sigma": 1.4}}))


def test_mechanistic_form_names_runs_with_unknown_hyperparameters():
    ds = _runset({"r1": {"learning_rate": np.nan}})
    with pytest.raises(RunSetError, match=r"learning_rate.*\['r1'\]") as refused:
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    # both ways out in the CLI's words too (it named --default, but the other only as the API's
    # parameterisation='phenomenological')
    assert "(CLI: --default learning_rate=VALUE)" in str(refused.value)
    assert "(CLI: --parameterisation phenomenological)" in str(refused.value), refused.value
    cfg = merge_config(DEFAULT_MODEL_CONFIG, {"hyperparameter_defaults": {"learning_rate": 2e-3}})
    data = prepare_data(ds, cfg, "mechanistic")
    np.testing.assert_allclose(data.learning_rate, [1e-3, 2e-3])
    np.testing.assert_allclose(data.eta_eff, [1e-4, 2e-4])  # EMA: eta (1 - beta1)
    prepare_data(ds, DEFAULT_MODEL_CONFIG, "phenomenological")  # does not need them


def test_every_hyperparameter_a_run_lacks_is_named_in_one_refusal():
    # `fit export.nc` of a CSV export logging no settings was refused for its learning rate;
    # given `--default learning_rate=...`, for its momentum; then its convention, then K_ref:
    # four tries to learn the four defaults it needed
    bare = {"learning_rate": np.nan, "momentum": np.nan, "momentum_convention": "", "k_ref": np.nan}
    ds = _runset({"r0": bare, "r1": {"k_ref": np.nan}})
    with pytest.raises(RunSetError) as refused:
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    msg = str(refused.value)
    assert (
        "needs 'learning_rate', 'momentum', 'momentum_convention', 'k_ref' for every run; unknown: learning_rate "
        "for runs ['r0']; momentum for runs ['r0']; momentum_convention for runs ['r0']; k_ref for runs ['r0', 'r1']"
    ) in msg, msg
    assert (
        "(CLI: --default learning_rate=VALUE --default momentum=VALUE --default momentum_convention=VALUE "
        "--default k_ref=VALUE)"
    ) in msg
    # with defaults for the others, only the convention of runs with momentum is still needed
    cfg = merge_config(DEFAULT_MODEL_CONFIG, {"hyperparameter_defaults": {"learning_rate": 1e-3, "k_ref": 1, "momentum": 0.9}})
    with pytest.raises(RunSetError, match=r"needs 'momentum_convention' for every run; unknown for runs \['r0'\]"):
        prepare_data(ds, cfg, "mechanistic")
    at_zero = merge_config(DEFAULT_MODEL_CONFIG, {"hyperparameter_defaults": {"learning_rate": 1e-3, "k_ref": 1, "momentum": 0.0}})
    prepare_data(ds, at_zero, "mechanistic")  # at momentum 0 no convention is needed


def test_ragged_runs_and_gaps_are_masked_not_dropped():
    ds = _runset(lengths=(50, 30))
    ds["reward"][0, 10:15] = np.nan
    data = prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    assert data.n_runs == 2
    assert np.bincount(data.obs_run).tolist() == [45, 30]
    assert np.all(np.isfinite(data.obs_y))


def test_runs_with_almost_no_data_are_an_error_naming_them():
    ds = _runset(lengths=(50, 30))
    ds["reward"][1, 2:] = np.nan
    with pytest.raises(RunSetError, match=r"\['r1'\]"):
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")


def test_invalid_momentum_is_an_error():
    ds = _runset({"r0": {"momentum": 1.2}})
    with pytest.raises(RunSetError, match="invalid momentum"):
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [("momentum", 1.0, r"momentum must be in \[0, 1\)"), ("learning_rate", -1e-3, "learning_rate must be > 0"), ("k_ref", -1, "k_ref must be >= 0")],
)
def test_a_run_setting_no_run_can_have_is_refused_saying_what_is_valid(name, value, valid):
    # "invalid momentum for runs ['r0 (1)']" named the run and value but not what a valid value is
    ds = _runset({"r0": {name: value}})
    with pytest.raises(RunSetError, match=rf"invalid {name} for runs \['r0 \({value:g}\)'\]: {valid}"):
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")


def test_run_level_initial_reward_offsets_sum_to_zero_within_each_llm():
    """R0_r = R0_m + tau z_r with the z_r of an LLM centred (R0_m is its runs' mean: no ridge
    between R0_m and the offsets' common part); a single-run LLM has no offset at all."""
    import pytensor

    from bayes_grpo.model.builder import build_pymc_model

    ds = _runset({"r2": {"model": "solo"}}, lengths=(50, 30, 40, 45))
    data = prepare_data(ds, DEFAULT_MODEL_CONFIG, "phenomenological")
    model = build_pymc_model(data, DEFAULT_MODEL_CONFIG, parameterisation="phenomenological")
    runs = list(model.coords["run"])
    # The random variables replaced by their value variables: a plain pytensor.function of
    # model["initial_reward"] would draw them from the prior instead.
    outs = model.replace_rvs_by_values([model["initial_reward"], model["initial_reward_model"]])
    r0 = pytensor.function(model.value_vars, outs[0], on_unused_input="ignore")
    r0_m = pytensor.function(model.value_vars, outs[1], on_unused_input="ignore")
    point = model.initial_point()
    point["initial_reward_run_sd_log__"] = np.log(0.2)
    point["initial_reward_run_z"] = np.array([0.3, -0.2, 0.7, 1.1])
    models = list(model.coords["model"])
    rr, mm = r0(**point), r0_m(**point)
    of_m = [runs.index(r) for r in ("r0", "r1", "r3")]
    assert np.mean(rr[of_m]) == pytest.approx(mm[models.index("m")], abs=1e-12)
    z_m = np.array([0.3, -0.2, 1.1])
    expected = data.scale[models.index("m")] * 0.2 * (z_m - z_m.mean()) * np.sqrt(3 / 2)
    np.testing.assert_allclose(rr[of_m] - np.mean(rr[of_m]), expected, atol=1e-12)
    assert rr[runs.index("r2")] == pytest.approx(mm[models.index("solo")], abs=1e-12)
    # d logp / d z_solo is the prior's -z alone: the solo run's z is not in the likelihood
    z = model.rvs_to_values[model["initial_reward_run_z"]]
    grad = pytensor.function(model.value_vars, pytensor.grad(model.logp(), z), on_unused_input="ignore")
    assert grad(**point)[runs.index("r2")] == pytest.approx(-0.7, abs=1e-9)


def test_runs_without_a_model_name_are_pooled_with_a_note_saying_so():
    named = prepare_data(_runset(), DEFAULT_MODEL_CONFIG, "phenomenological")
    assert not any("model unknown" in n for n in named.notes)
    nameless = prepare_data(_runset({"r0": {"model": ""}, "r1": {"model": ""}}), DEFAULT_MODEL_CONFIG, "phenomenological")
    assert nameless.models == ["unknown-model"]
    note = [n for n in nameless.notes if "model unknown" in n]
    assert note and "['r0', 'r1']" in note[0] and "--manifest" in note[0]


@pytest.mark.parametrize("lengths", [(50,), (50, 30)], ids=["alone", "beside a named run"])
def test_a_single_run_without_a_model_name_is_said_to_be_fitted_as_unknown_model(lengths):
    # one run without a model name (a lone CSV `step,reward`) was fitted as the LLM
    # 'unknown-model' without a word: the note named such runs only from two of them on
    ds = _runset({"r0": {"model": ""}}, lengths=lengths)
    data = prepare_data(ds, DEFAULT_MODEL_CONFIG, "phenomenological")
    assert "unknown-model" in data.models
    note = [n for n in data.notes if "model unknown" in n]
    assert note and "run 'r0'" in note[0] and "'unknown-model'" in note[0] and "--manifest" in note[0], data.notes



def test_a_late_start_and_a_constant_reward_get_a_note_naming_the_runs():
    """A run logged from step 1000 (resumed, or a step counter offset: a simulated run that
    started there was fitted with p* 1.29 for 0.7 and a 44x too small) and a run whose reward
    never moves are named; an ordinary run and a log every 50 steps from step 50 are not."""
    rise = lambda t: 0.1 + 0.5 * (1 - np.exp(-t / 10.0))  # noqa: E731
    steps = np.arange(0, 60)
    curves = {
        "ok": pd.DataFrame({"reward": rise(steps)}, index=steps),
        "every50": pd.DataFrame({"reward": rise(steps * 50 / 500.0)}, index=50 + steps * 50),
        "late": pd.DataFrame({"reward": rise(steps)}, index=1000 + steps),
        "flat": pd.DataFrame({"reward": np.full(40, 0.5)}, index=steps[:40]),
    }
    meta = {r: {"model": "m", "group_size": 4} for r in curves}
    notes = prepare_data(make_runset(curves, meta), DEFAULT_MODEL_CONFIG, "phenomenological").notes
    assert any("['late (from step 1000 to 1059)'] start late" in n for n in notes), notes
    assert any("['flat (0.5 at all 40 logged steps)'] have a constant reward" in n for n in notes)
    assert not any("'ok" in n or "every50" in n for n in notes), notes


@pytest.mark.parametrize(
    ("user", "named"),
    [
        ([1, 2], "a configuration is an object"),
        ({"plateau": 3}, "'plateau' is an object"),
        ({"plateau": None}, "'plateau' is an object"),
        ({"hyperparameter_defaults": 5}, "'hyperparameter_defaults' is an object"),
        ({"plateau": {"sigma": "wide"}}, "'plateau.sigma' must be a finite number"),
        ({"plateau": {"sigma": -1}}, "'plateau.sigma' is a scale and must be > 0"),
        ({"time_scale": {"fraction": 0}}, "'time_scale.fraction' is a scale"),
        ({"alpha": {"fixed": "1"}}, "'alpha.fixed' must be null"),
        ({"log_stiffness": {"centred": "no"}}, "'log_stiffness.centred' must be true or false"),
        ({"size_exponent": {"min_models": "3"}}, "'size_exponent.min_models' must be a finite number"),
        ({"size_exponent": {"min_models": 2.5}}, "'size_exponent.min_models' must be a whole number"),
        ({"hyperparameter_defaults": {"momentum": "0.9"}}, "'hyperparameter_defaults.momentum' must be null"),
        # settings no run can have: accepted (and the fit run) whenever no run lacked the value
        ({"hyperparameter_defaults": {"momentum": 1.5}}, "'hyperparameter_defaults.momentum' (--default momentum=...) must be in [0, 1); got 1.5"),
        ({"hyperparameter_defaults": {"learning_rate": 0}}, "'hyperparameter_defaults.learning_rate' (--default learning_rate=...) must be > 0"),
        ({"hyperparameter_defaults": {"k_ref": -1}}, "'hyperparameter_defaults.k_ref' (--default k_ref=...) must be >= 0"),
        ({"hyperparameter_defaults": {"group_size": 0}}, "'hyperparameter_defaults.group_size' (--default group_size=...) must be > 0"),
        ({"hyperparameter_defaults": {"momentum_convention": "adam"}}, "'hyperparameter_defaults.momentum_convention' (--default momentum_convention=...) must be one of ('heavy_ball', 'ema'); got 'adam'"),
    ],
)
def test_config_entries_of_the_wrong_type_are_refused_when_the_model_is_made(user, named):
    # they crashed with a TypeError / PyTensor NotImplementedError at build time, or (a string
    # alpha, a negative sd, "no" for a boolean) were fitted without a word
    from bayes_grpo.model import GRPODynamicsModel

    with pytest.raises(ValueError, match=re.escape(named)):
        GRPODynamicsModel(model_config=user)


def test_following_schedules_is_refused_with_the_state_space_likelihood_not_dropped():
    # the state-space likelihood takes the constant-rate law: follow=true was ignored without a word
    from bayes_grpo.model import GRPODynamicsModel

    follow = {"learning_rate_schedule": {"follow": True}}
    with pytest.raises(ValueError, match=re.escape("'learning_rate_schedule.follow' is true, but only the i.i.d.")):
        GRPODynamicsModel(model_config=follow, likelihood="state-space")
    assert GRPODynamicsModel(model_config=follow, likelihood="iid").likelihood == "iid"


def test_measurement_noise_settings_are_refused_with_the_iid_likelihood_not_dropped():
    # the i.i.d. likelihood has no measurement noise: these entries were ignored without a word
    from bayes_grpo.model import GRPODynamicsModel

    for entry, value in (("measurement_sigma", 0.3), ("measurement_g_exponent", 0.0)):
        given = {"noise": {entry: value}}
        with pytest.raises(ValueError, match=re.escape(f"'noise.{entry}' set, but only the state-space")):
            GRPODynamicsModel(model_config=given)
        assert GRPODynamicsModel(model_config=given, likelihood="state-space").likelihood == "state_space"
    # the defaults, spelt out (as a stored fit's full configuration is), are no request
    same = {"noise": {"measurement_sigma": 1.5, "measurement_g_exponent": "alpha"}}
    assert GRPODynamicsModel(model_config=same).likelihood == "iid"


def test_config_entries_of_the_right_type_are_accepted():
    from bayes_grpo.model import GRPODynamicsModel

    GRPODynamicsModel(
        model_config={
            "plateau": {"sigma": 2},
            "alpha": {"fixed": 1},
            "size_exponent": {"min_models": 4},
            "log_stiffness": {"centred": False},
            "hyperparameter_defaults": {"momentum": np.float64(0.9), "momentum_convention": "ema", "k_ref": 1},
            "noise": {"measurement_g_exponent": {"mu": 0.5, "sigma": 1}},
        },
        likelihood="state_space",  # the only likelihood with measurement noise
    )


def test_a_saved_fit_whose_stored_config_is_refused_names_the_file(tmp_path):
    # a fit saved before the config entries were checked (e.g. {"alpha": {"fixed": "1"}})
    # failed to load with the config message alone, not saying which file
    import json

    import arviz as az

    from bayes_grpo import __version__
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.config import DEFAULT_SAMPLER_CONFIG
    from bayes_grpo.model.core import ATTR_PREFIX

    idata = az.from_dict(posterior={"x": np.zeros((1, 4))})
    idata.posterior.attrs.update(
        {
            ATTR_PREFIX + "model_type": GRPODynamicsModel._model_type,
            ATTR_PREFIX + "model_version": GRPODynamicsModel.version,
            ATTR_PREFIX + "package_version": __version__,
            ATTR_PREFIX + "settings": json.dumps({"parameterisation": "mechanistic", "likelihood": "iid", "invariance": "shared"}),
            ATTR_PREFIX + "model_config": json.dumps({"alpha": {"fixed": "1"}}),
            ATTR_PREFIX + "sampler_config": json.dumps(DEFAULT_SAMPLER_CONFIG),
        }
    )
    path = tmp_path / "old_fit.nc"
    idata.to_netcdf(str(path), engine="h5netcdf")
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*'alpha.fixed'"):
        GRPODynamicsModel.load(path)


def test_a_fit_names_the_runs_whose_logged_learning_rate_follows_a_schedule():
    """12 of the 22 public native logs warm up or decay their learning rate; the law's gain is
    constant over a run, so the fit says which runs it averages over a schedule (not only ingest)."""
    steps = np.arange(0, 60)
    reward = 0.1 + 0.5 * (1 - np.exp(-steps / 10.0))
    warmup_decay = np.r_[np.linspace(0, 1e-4, 10), np.linspace(1e-4, 1e-6, 50)]
    curves = {
        "scheduled": pd.DataFrame({"reward": reward, "lr": warmup_decay}, index=steps),
        "constant": pd.DataFrame({"reward": reward, "lr": np.full(60, 1e-4)}, index=steps),
        "mild": pd.DataFrame({"reward": reward, "lr": np.linspace(1e-4, 0.6e-4, 60)}, index=steps),
    }
    meta = {r: {"model": "m", "group_size": 4} for r in curves}
    notes = prepare_data(make_runset(curves, meta), DEFAULT_MODEL_CONFIG, "phenomenological").notes
    (note,) = [n for n in notes if "learning-rate schedule" in n]
    assert "['scheduled (lr 0 to 0.0001)']" in note and "averages over the schedule" in note
    without_lr = {r: c.drop(columns="lr") for r, c in curves.items()}
    assert not any("schedule" in n for n in prepare_data(make_runset(without_lr, meta), DEFAULT_MODEL_CONFIG, "phenomenological").notes)


def test_a_run_without_momentum_needs_no_momentum_convention():
    """At mu = 0 heavy ball and EMA coincide (eta_eff = eta), so the mechanistic fit does not
    refuse such a run for an unknown convention (ingest leaves it unknown when momentum is only
    logged as a metric); with momentum it still does."""
    data = prepare_data(_runset({"r0": {"momentum": 0.0, "momentum_convention": ""}}), DEFAULT_MODEL_CONFIG, "mechanistic")
    assert data.momentum_convention == ["heavy_ball", "ema"] and data.eta_eff[0] == pytest.approx(1e-3)
    with pytest.raises(RunSetError, match=r"'momentum_convention' for every run; unknown for runs \['r0'\]"):
        prepare_data(_runset({"r0": {"momentum": 0.5, "momentum_convention": ""}}), DEFAULT_MODEL_CONFIG, "mechanistic")


def test_a_run_set_whose_every_reward_is_constant_is_refused_before_sampling():
    """No dynamics to fit: a state-space fit of such a set took 8 minutes, 95% divergent."""
    steps = np.arange(40)
    flat = {r: pd.DataFrame({"reward": np.full(40, v)}, index=steps) for r, v in (("a", 0.5), ("b", 0.0))}
    with pytest.raises(RunSetError, match=r"every run has a constant reward \(a, b\)"):
        prepare_data(make_runset(flat, {r: {"model": "m"} for r in flat}), DEFAULT_MODEL_CONFIG, "phenomenological")


def test_an_llm_fitted_on_adam_and_sgd_runs_gets_a_note_naming_the_llm_and_the_runs_of_each():
    """One curvature K per LLM cannot describe an Adam run (EMA momentum, per-coordinate
    normalised step) beside an SGD one: on a simulated LLM with both, the Adam runs were fitted
    at a gain 300x too small (R^2 0.001) and nothing said so. A run at momentum 0 whose
    optimizer the log does not say, and a phenomenological fit (no learning rate), get no note."""
    mixed = _runset({"r1": {"momentum_convention": "heavy_ball", "learning_rate": 0.05}}, lengths=(50, 30, 40))
    (note,) = [n for n in prepare_data(mixed, DEFAULT_MODEL_CONFIG, "mechanistic").notes if "two optimizers" in n]
    assert note.startswith("LLM 'm' has runs of two optimizers")
    assert "(Adam) ['r0', 'r2']" in note and "(SGD) ['r1']" in note and "'m-adam'" in note
    assert not any("two optimizers" in n for n in prepare_data(mixed, DEFAULT_MODEL_CONFIG, "phenomenological").notes)
    unknown = _runset({"r1": {"momentum": 0.0, "momentum_convention": ""}})
    assert not any("two optimizers" in n for n in prepare_data(unknown, DEFAULT_MODEL_CONFIG, "mechanistic").notes)
    two_llms = _runset({"r1": {"momentum_convention": "heavy_ball", "model": "other"}})
    assert not any("two optimizers" in n for n in prepare_data(two_llms, DEFAULT_MODEL_CONFIG, "mechanistic").notes)


@pytest.mark.parametrize(
    ("sampler", "named"),
    [
        ({"mass_matrix": "dense"}, "unknown mass matrix 'dense'; expected one of ('diag', 'full')"),
        ({"draws": 0}, "'draws' must be a whole number >= 1; got 0"),
        ({"chains": 2.5}, "'chains' must be a whole number >= 1; got 2.5"),
        ({"tune": -1}, "'tune' must be a whole number >= 0; got -1"),
        ({"max_treedepth": 0}, "'max_treedepth' must be a whole number >= 1; got 0"),
        ({"random_seed": "0"}, "'random_seed' must be a whole number >= 0; got '0'"),
        ({"target_accept": 1.2}, "'target_accept' must lie strictly between 0 and 1; got 1.2"),
        ({"progressbar": "no"}, "'progressbar' must be true or false; got 'no'"),
        ({"sampler": "stan"}, "unknown sampler 'stan'"),
    ],
)
def test_a_sampler_config_that_cannot_be_sampled_as_it_says_is_refused_before_the_model_is_built(sampler, named, monkeypatch):
    # sampler_config={"mass_matrix": "dense"} was sampled with the diagonal mass matrix without a
    # word; draws 0 failed after the sampling, a tune of -1 in the sampler, a target_accept of
    # 1.2 was passed on. The command line's argument types refuse these; the Python API did not
    from bayes_grpo.model import GRPODynamicsModel

    def no_build(self, runset):
        raise AssertionError("the model was built")

    monkeypatch.setattr(GRPODynamicsModel, "build_model", no_build)
    with pytest.raises(ValueError, match=re.escape(named)):
        GRPODynamicsModel(sampler_config=sampler).fit(_runset())
    if "mass_matrix" not in sampler:  # the others are keywords of fit too, refused alike and not kept
        model = GRPODynamicsModel()
        with pytest.raises(ValueError, match=re.escape(named)):
            model.fit(_runset(), **sampler)
        assert model.sampler_config == GRPODynamicsModel().sampler_config


def test_a_default_convention_for_runs_at_momentum_0_makes_no_second_optimizer():
    """`fit --default momentum_convention=ema` on an LLM with SGD runs and runs at momentum 0
    whose optimizer the log does not say: the default filled the momentum-0 runs with ema, and
    the fit said the LLM has runs of two optimizers, which nothing in the data said (at momentum
    0 the conventions coincide, so those runs need none)."""
    ds = _runset(
        {
            "r0": {"momentum_convention": "heavy_ball"},
            "r1": {"momentum": 0.0, "momentum_convention": ""},
        }
    )
    cfg = merge_config(DEFAULT_MODEL_CONFIG, {"hyperparameter_defaults": {"momentum_convention": "ema"}})
    data = prepare_data(ds, cfg, "mechanistic")
    assert not any("two optimizers" in n for n in data.notes), data.notes
    assert data.momentum_convention == ["heavy_ball", "heavy_ball"]
    assert not any("momentum_convention=ema" in n for n in data.notes), data.notes  # no run took it
    # a run with momentum and no convention does take it, and is named
    took = _runset({"r0": {"momentum_convention": "heavy_ball"}, "r1": {"momentum_convention": ""}})
    data = prepare_data(took, cfg, "mechanistic")
    assert data.momentum_convention == ["heavy_ball", "ema"]
    assert any("two optimizers" in n for n in data.notes)
    assert any("momentum_convention=ema for runs ['r1']" in n for n in data.notes), data.notes


def test_the_fit_names_the_runs_that_took_a_default_and_the_defaults_it_does_not_use():
    """`fit --default learning_rate=0.002 --default group_size=8` printed nothing of which runs the
    values filled; on the phenomenological form every default but group_size was silently unused
    (and the run table showed the default as the run's learning rate)."""
    ds = _runset({"r1": {"learning_rate": np.nan, "group_size": np.nan}})
    cfg = merge_config(
        DEFAULT_MODEL_CONFIG, {"hyperparameter_defaults": {"learning_rate": 2e-3, "group_size": 8, "k_ref": 3}}
    )
    mech = prepare_data(ds, cfg, "mechanistic")
    (note,) = [n for n in mech.notes if "hyperparameter_defaults" in n]
    assert "learning_rate=0.002 for runs ['r1']" in note and "group_size=8 for runs ['r1']" in note, note
    assert "k_ref" not in note  # every run logs it: no run took the default
    phen = prepare_data(ds, cfg, "phenomenological")
    (unused,) = [n for n in phen.notes if "not used" in n]
    assert "learning_rate=0.002, k_ref=3 not used: the phenomenological form" in unused, unused
    (took,) = [n for n in phen.notes if "taken from" in n]
    assert "group_size=8 for runs ['r1']" in took and "learning_rate" not in took, took
    assert np.isnan(phen.learning_rate[1]) and phen.group_size[1] == 8.0


@pytest.mark.parametrize(
    ("parameterisation", "user", "unused"),
    [
        ("mechanistic", {"time_scale": {"log_sigma": 0.3}}, ["'time_scale.log_sigma'"]),
        ("mechanistic", {"damping_ratio": {"log_mu": -1.0, "shape_information_weight": False}}, ["'damping_ratio.log_mu'", "'damping_ratio.shape_information_weight'"]),
        ("phenomenological", {"log_stiffness": {"mean_sigma": 0.5}, "size_exponent": {"enabled": False}}, ["'log_stiffness.mean_sigma'", "'size_exponent.enabled'"]),
    ],
)
def test_a_prior_the_parameterisation_does_not_read_is_named_in_the_fits_notes(parameterisation, user, unused):
    # the config's docstring gave a_m a log-normal prior of sd time_scale.log_sigma, which only the
    # phenomenological form reads: a mechanistic fit with {"time_scale": {"log_sigma": 0.3}}
    # (or a damping_ratio prior) had the priors of the default, and said nothing
    from bayes_grpo.model import GRPODynamicsModel

    model = GRPODynamicsModel(model_config=user, parameterisation=parameterisation)
    model.build_model(_runset())
    (note,) = [n for n in model.data.notes if n.startswith("configuration ")]
    assert f"configuration {', '.join(unused)} set, but the {parameterisation} form does not read" in note
    assert note.endswith(f"the fit's priors are as without {'it' if len(unused) == 1 else 'them'}")
    # the entries each form reads, and the defaults spelt out, get no note
    for read_by, config in (
        ("phenomenological", {"time_scale": {"log_sigma": 0.3, "fraction": 0.5}, "damping_ratio": {"log_mu": -1.0}}),
        ("mechanistic", {"log_stiffness": {"mean_sigma": 0.5}, "time_scale": {"fraction": 0.5}}),
        (parameterisation, DEFAULT_MODEL_CONFIG),
    ):
        model = GRPODynamicsModel(model_config=config, parameterisation=read_by)
        model.build_model(_runset())
        assert not [n for n in model.data.notes if n.startswith("configuration ")], (read_by, model.data.notes)


def test_a_run_with_too_few_rewards_is_refused_saying_how_to_leave_it_out():
    # "runs ['r1'] have fewer than 3 finite rewards; the model cannot use them": no remedy
    ds = _runset(lengths=(50, 2))
    with pytest.raises(RunSetError, match=re.escape("runs ['r1'] have fewer than 3 finite rewards")) as info:
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    assert "runset.drop_sel(run=['r1'])" in str(info.value) and "--min-points" in str(info.value)
    prepare_data(ds.drop_sel(run=["r1"]), DEFAULT_MODEL_CONFIG, "mechanistic")  # as it says


def test_steps_below_0_are_refused_naming_the_runs_that_log_there_or_how_to_drop_them():
    # "steps must be >= 0 (...); found -5" named no run, nor said that nothing was logged there
    curves = {
        "r0": pd.DataFrame({"reward": np.linspace(0.1, 0.6, 30)}, index=np.arange(0, 30)),
        "r1": pd.DataFrame({"reward": np.full(35, np.nan)}, index=np.arange(-5, 30)),
    }
    curves["r1"].loc[0:, "reward"] = np.linspace(0.1, 0.5, 30)
    meta = {r: {"model": "m", "group_size": 4, "learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1} for r in curves}
    ds = make_runset(curves, meta)
    with pytest.raises(RunSetError, match=re.escape("found -5: no run logs a reward there: drop those steps (runset.sel(step=runset.step >= 0))")):
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    prepare_data(ds.sel(step=ds.step >= 0), DEFAULT_MODEL_CONFIG, "mechanistic")  # as it says
    curves["r1"].loc[-3, "reward"] = 0.05
    with pytest.raises(RunSetError, match=re.escape("found -5: runs ['r1'] log a reward below step 0")):
        prepare_data(make_runset(curves, meta), DEFAULT_MODEL_CONFIG, "mechanistic")


def test_a_checks_refit_takes_the_fits_model_and_its_sampler_unless_told_otherwise():
    """The invariance test of `report` and `ppc --leave-one-g-out` refit the fit's own model:
    its priors, parameterisation, likelihood and reward bounds, with its draws, tune and chains
    except those given."""
    from bayes_grpo.model.core import GRPODynamicsModel

    fit = GRPODynamicsModel(
        model_config={"damping_ratio": {"log_mu": 0.5, "log_sigma": 2.0}},
        sampler_config={"draws": 300, "tune": 200, "chains": 3},
        parameterisation="phenomenological",
        likelihood="state_space",
        reward_bounds=(0.0, 1.0),
    )
    settings = fit.refit_settings(draws=50, tune=None)
    assert settings == {
        "model_config": fit.model_config,
        "parameterisation": "phenomenological",
        "likelihood": "state_space",
        "reward_bounds": (0.0, 1.0),
        "draws": 50,
        "tune": 200,
        "chains": 3,
    }
    assert settings["model_config"]["damping_ratio"]["log_mu"] == 0.5
