"""A prediction outside the fitted settings' range says so (PREDICTION_NOTES, "For the lead" 3)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from bayes_grpo.predict.predict import extrapolation_warnings
from bayes_grpo.runset import make_runset


def _runset():
    steps = pd.Index(np.arange(10), name="step")
    curves, meta = {}, {}
    for k in (1, 2, 4):
        for lr in (0.05, 0.1):
            name = f"k{k}_lr{lr}"
            curves[name] = pd.DataFrame({"reward": np.linspace(0.5, 0.8, 10)}, index=steps)
            meta[name] = {"model": "bandit", "k_ref": float(k), "learning_rate": lr, "momentum": 0.5}
    curves["other"] = pd.DataFrame({"reward": np.linspace(0.5, 0.8, 10)}, index=steps)
    meta["other"] = {"model": "other-llm", "k_ref": 8.0, "learning_rate": 0.3, "momentum": 0.5}
    return make_runset(curves=curves, meta=meta)


def test_settings_inside_the_fitted_range_give_no_warning():
    kw = dict(model="bandit", momentum=0.5, gain_lag=0.1, train_gain_lag=np.array([0.03, 0.4]))
    assert extrapolation_warnings(_runset(), learning_rate=0.075, k_ref=3, **kw) == []
    assert extrapolation_warnings(_runset(), learning_rate=0.1, k_ref=4, **kw) == []  # edges


def test_each_coordinate_outside_the_range_of_the_llms_runs_is_named():
    ws = extrapolation_warnings(
        _runset(), model="bandit", learning_rate=0.2, momentum=0.5, k_ref=6
    )
    assert any("K_ref = 6" in w and "[1, 4]" in w for w in ws)  # the other LLM's K_ref 8 not used
    assert any("learning rate = 0.2" in w and "[0.05, 0.1]" in w for w in ws)
    assert not any("momentum" in w for w in ws)
    assert "discrepancy" in ws[-1]
    gain = extrapolation_warnings(
        _runset(), model="bandit", learning_rate=0.1, momentum=0.5, k_ref=4,
        gain_lag=0.6, train_gain_lag=np.array([0.03, 0.4]),
    )  # fmt: skip
    assert any("lag-gain product" in w for w in gain)
    # an LLM not in the run set: compared with all runs
    assert extrapolation_warnings(_runset(), model="new", learning_rate=0.2, momentum=0.5, k_ref=6) == []


def test_a_lag_gain_product_whose_draws_spread_across_the_fitted_range_is_not_called_outside():
    # a new LLM (no --model) at its fitted LLMs' very settings: the population's median a K_ref
    # 0.00267 lay just below the runs' [0.00268, 0.00272] and `predict` / `stability` warned
    # "extrapolation: lag-gain product ... is outside", its draws spread well across the range
    kw = dict(model="new", learning_rate=0.1, momentum=0.5, k_ref=4, train_gain_lag=np.array([0.00268, 0.00272]))
    spread = extrapolation_warnings(_runset(), gain_lag=0.00267, gain_lag_interval=(0.0019, 0.0035), **kw)
    assert not any("lag-gain product" in w for w in spread), spread
    # the median alone (no interval) is compared as before, and so is an interval wholly outside
    assert any("lag-gain product" in w for w in extrapolation_warnings(_runset(), gain_lag=0.00267, **kw))
    far = extrapolation_warnings(_runset(), gain_lag=0.006, gain_lag_interval=(0.005, 0.007), **kw)
    assert any("lag-gain product a K_ref = 0.006 is outside the fitted runs' range [0.00268, 0.00272]" in w for w in far), far
    below = extrapolation_warnings(_runset(), gain_lag=0.001, gain_lag_interval=(0.0009, 0.0011), **kw)
    assert any("lag-gain product" in w for w in below), below
    # an interval holding the whole range is inside
    assert not any(
        "lag-gain product" in w
        for w in extrapolation_warnings(_runset(), gain_lag=0.01, gain_lag_interval=(0.001, 0.02), **kw)
    )


def test_a_group_size_outside_the_llms_fitted_g_is_named_and_predict_run_says_so():
    # `predict fit.nc ... --group-size 1000 --model llmB` of an LLM fitted at G = 8 only gave
    # a logged-reward band a third as wide as at G = 8 and no warning (lr, momentum, K_ref had one)
    from test_predict import _draws

    from bayes_grpo.predict.predict import predict_run
    from bayes_grpo.predict.summary import attr_warnings

    runs = _runset().assign_coords(group_size=("run", [4.0, 4.0, 8.0, 8.0, 16.0, 16.0, 1000.0]))
    kw = dict(model="bandit", learning_rate=0.1, momentum=0.5, k_ref=2)
    assert extrapolation_warnings(runs, group_size=16, **kw) == []
    assert extrapolation_warnings(runs, group_size=4, **kw) == []  # an edge
    (g,) = extrapolation_warnings(runs, group_size=1000, **kw)  # the other LLM's G not used
    assert "group size G = 1000" in g and "[4, 16]" in g and "alpha" in g
    assert extrapolation_warnings(runs, group_size=2, **kw) != []
    unknown = runs.assign_coords(group_size=("run", np.full(7, np.nan)))
    assert extrapolation_warnings(unknown, group_size=1000, **kw) == []  # nothing to compare

    draws = _draws(np.full(40, 0.005), momentum=0.5, k_ref=2.0)

    class Fitted:
        runset = runs

        def coefficient_draws(self, **kwargs):
            return draws

    setting = dict(momentum=0.5, k_ref=2, steps=40, discrepancy=False, **{"model": "bandit"})
    assert not any("group size" in w for w in attr_warnings(predict_run(Fitted(), learning_rate=0.1, group_size=8, **setting)))
    far = attr_warnings(predict_run(Fitted(), learning_rate=0.1, group_size=1000, **setting))
    assert any("group size G = 1000 is outside the fitted runs' range [4, 16]" in w for w in far), far


def test_a_momentum_convention_none_of_the_fitted_runs_used_is_named():
    # `predict fit.nc --momentum 0.9 ...` without --momentum-convention is heavy ball: of a fit
    # of Adam runs (ema) it predicted a 10 times larger step without a word
    runs = _runset().assign_coords(momentum_convention=("run", np.array(["ema"] * 6 + ["heavy_ball"], dtype=object)))
    kw = dict(model="bandit", learning_rate=0.1, momentum=0.5, k_ref=2)
    (w,) = extrapolation_warnings(runs, momentum_convention="heavy_ball", **kw)
    assert "momentum convention heavy_ball is not that of the fitted runs with momentum (ema)" in w
    assert extrapolation_warnings(runs, momentum_convention="ema", **kw) == []
    assert extrapolation_warnings(runs, **kw) == []  # not given: nothing to compare
    # at momentum 0 the conventions coincide
    still = runs.assign_coords(momentum=("run", np.zeros(7)))
    assert extrapolation_warnings(still, momentum_convention="heavy_ball", **(kw | {"momentum": 0.0})) == []


def test_a_group_size_a_by_group_fit_did_not_fit_says_its_offsets_are_the_priors():
    # `predict fit.nc --group-size 8 --model llmA` of a by-group fit of llmA at G 4 and 16 gave
    # a 90% band of the mean at step 150 of [0.58, 0.95] against [0.71, 0.79] at G 4, silently
    import arviz as az
    import xarray as xr

    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.prepare import prepare_data
    from bayes_grpo.predict.predict import predict_run
    from bayes_grpo.predict.summary import attr_warnings

    runset = simulate_sde_runset(
        models={"m": {"stiffness": 400.0, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 1e-6}},
        group_sizes=(4, 16), learning_rates=(1e-4,), momentum=0.0, convention="heavy_ball",
        n_seeds=1, n_steps=30, random_seed=0,
    )  # fmt: skip
    model = GRPODynamicsModel(invariance="by_group")
    model.runset = runset
    model.data = prepare_data(runset, model.model_config, model.parameterisation)
    shape, n_groups = (1, 50), len(model.data.groups)
    per = lambda dim, v, n=1: (("chain", "draw", dim), np.full((*shape, n), v))  # noqa: E731
    model.idata = az.InferenceData(
        posterior=xr.Dataset(
            {
                "log_stiffness": per("model", np.log(400.0)), "plateau": per("model", 0.75),
                "initial_reward_model": per("model", 0.15), "noise_d": per("model", 1e-4),
                "alpha": (("chain", "draw"), np.ones(shape)),
                "initial_reward_run_sd": (("chain", "draw"), np.full(shape, 0.1)),
                **{f"group_offset_{v}": per("group", 0.0, n_groups)
                   for v in ("log_stiffness", "log_damping", "plateau", "initial_reward")},
            },
            coords={"model": ["m"], "group": model.data.groups},
        )
    )  # fmt: skip
    setting = dict(learning_rate=1e-4, momentum=0.0, k_ref=1, model="m", steps=30, discrepancy=False)
    draw_setting = dict(learning_rate=1e-4, momentum=0.0, momentum_convention="heavy_ball", k_ref=1, model="m")
    assert "new_group" not in model.coefficient_draws(group_size=4, **draw_setting).attrs
    assert model.coefficient_draws(group_size=8, **draw_setting).attrs["new_group"] == "m|G=8"
    fitted = attr_warnings(predict_run(model, group_size=16, **setting))
    assert not any("is not a group" in w for w in fitted), fitted
    between = attr_warnings(predict_run(model, group_size=8, **setting))
    assert any(w.startswith("m|G=8 is not a group of this by-group fit (m|G=4, m|G=16)") for w in between), between


def test_the_fitted_g_of_an_llm_a_by_group_fit_saw_at_one_g_has_no_offsets_to_draw():
    # model version 8: H1 gives offsets to the groups of LLMs at two or more known G only, so a
    # by-group fit of "m" at G 4 and 16 and "c" at G 8 has none for "c|G=8": c's runs are on its
    # trajectory (the PPC and predict at G 8 read it as fitted, not as a new group of the prior)
    import arviz as az
    import xarray as xr

    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.prepare import prepare_data

    truth = {"stiffness": 400.0, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 1e-6}
    runset = simulate_sde_runset(
        models={"m": truth, "c": truth}, group_sizes=(4, 16, 8), learning_rates=(1e-4,), momentum=0.0,
        convention="heavy_ball", n_seeds=1, n_steps=30, random_seed=0,
    )  # fmt: skip
    keep = [(m, g) in (("m", 4), ("m", 16), ("c", 8)) for m, g in zip(runset["model"].values, runset["group_size"].values)]
    runset = runset.isel(run=np.flatnonzero(keep))
    model = GRPODynamicsModel(invariance="by_group")
    model.runset = runset
    model.data = prepare_data(runset, model.model_config, model.parameterisation)
    assert model.data.groups == ["m|G=4", "m|G=16", "c|G=8"]
    assert model.data.offset_groups == ["m|G=4", "m|G=16"]
    shape = (1, 50)
    per = lambda dim, v, n: (("chain", "draw", dim), np.full((*shape, n), v))  # noqa: E731
    model.idata = az.InferenceData(
        posterior=xr.Dataset(
            {
                "log_stiffness": per("model", np.log(400.0), 2), "plateau": per("model", 0.75, 2),
                "initial_reward_model": per("model", 0.15, 2), "noise_d": per("model", 1e-4, 2),
                "alpha": (("chain", "draw"), np.ones(shape)),
                "initial_reward_run_sd": (("chain", "draw"), np.full(shape, 0.1)),
                **{f"group_offset_{v}": per("group", 0.3, 2)
                   for v in ("log_stiffness", "log_damping", "plateau", "initial_reward")},
            },
            coords={"model": ["m", "c"], "group": model.data.offset_groups},
        )
    )  # fmt: skip
    setting = dict(learning_rate=1e-4, momentum=0.0, momentum_convention="heavy_ball", k_ref=1, run_offset=False)
    fitted_g = model.coefficient_draws(group_size=8, model="c", **setting)
    assert "new_group" not in fitted_g.attrs
    np.testing.assert_allclose(fitted_g["plateau"].values, 0.75)  # no offset (0.3 on m's groups)
    np.testing.assert_allclose(fitted_g["a"].values, 1e-4 * 400.0)
    on_m = model.coefficient_draws(group_size=16, model="m", **setting)
    assert np.all(on_m["plateau"].values > 0.75) and "new_group" not in on_m.attrs
    assert model.coefficient_draws(group_size=32, model="c", **setting).attrs["new_group"] == "c|G=32"


def test_prediction_attrs_carry_the_warnings_as_json():
    import xarray as xr

    from bayes_grpo.predict.predict import predict_from_draws
    from bayes_grpo.predict.result import prediction_result

    shape = (2, 50)
    full = lambda v: (("chain", "draw"), np.full(shape, v))  # noqa: E731
    draws = xr.Dataset(
        {"a": full(0.02), "M_eff": full(1.0), "C_eff": full(0.4), "K_eff": full(0.02), "zeta": full(1.4),
         "plateau": full(0.8), "initial_reward": full(0.2), "sigma": full(0.01)}
    )  # fmt: skip
    ws = ["extrapolation: K_ref = 6 is outside the fitted runs' range [1, 4]", "note"]
    ds = predict_from_draws(
        draws, steps=40, momentum=0.5, k_ref=6, law="continuous",
        attrs={"warnings": json.dumps(ws), "kind": "prediction"},
    )  # fmt: skip
    assert json.loads(ds.attrs["warnings"]) == ws
    assert "K_ref = 6 is outside" in prediction_result(ds).summary


def test_an_observation_lag_past_the_horizon_says_every_logged_reward_is_the_initial_one():
    # `predict ... --observation-lag 1000 --steps 100` drew a flat line at R0 without a word
    from test_predict import _draws

    from bayes_grpo.predict.predict import predict_run
    from bayes_grpo.predict.summary import attr_warnings

    draws = _draws(np.full(40, 0.005), momentum=0.5, k_ref=2.0)

    class Fitted:
        runset = _runset()

        def coefficient_draws(self, **kwargs):
            return draws

    setting = dict(learning_rate=0.1, group_size=8, momentum=0.5, k_ref=2, steps=40, discrepancy=False, model="bandit")
    far = attr_warnings(predict_run(Fitted(), observation_lag=40, **setting))
    assert any("observation lag 40 is not below the horizon's last step 40" in w for w in far), far
    near = attr_warnings(predict_run(Fitted(), observation_lag=2, **setting))
    assert not any("observation lag" in w for w in near)


def _late_runset(curve, *, n_runs=6, steps=150, phi=0.0, sd=0.02, seed=0, model="m"):
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    curves = {}
    for i in range(n_runs):
        eps = np.zeros(steps)
        for k in range(1, steps):
            eps[k] = phi * eps[k - 1] + sd * rng.standard_normal()
        curves[f"r{i}"] = pd.DataFrame({"reward": curve(t) + eps}, index=t)
    return make_runset(curves, {r: {"model": model} for r in curves})


def test_a_prediction_from_runs_still_rising_at_their_end_says_the_plateau_extrapolates_them():
    # the softmax bandit without momentum, fitted on runs at learning rates 0.05 and 0.1 for 150
    # steps: p* 0.846 [0.843, 0.849], while the runs settle at 0.854; a run at 0.2 got there, and its
    # true mean left the 90% band of the mean at half of its steps without a word
    from bayes_grpo.predict.predict import unsettled_runs_note

    plateau, start = np.full(400, 0.85), np.full(400, 0.3)
    rising = _late_runset(lambda t: 0.85 - 0.55 * np.exp(-t / 100.0))
    note = unsettled_runs_note(rising, model="m", plateau=plateau, initial_reward=start)
    assert note is not None and "still rising toward their plateau" in note and "over 6 runs" in note
    assert "p* = 0.85" in note
    settled = _late_runset(lambda t: 0.85 - 0.55 * np.exp(-t / 15.0))
    assert unsettled_runs_note(settled, model="m", plateau=plateau, initial_reward=start) is None
    # under 3 runs: each run's slope against its own error
    two = _late_runset(lambda t: 0.85 - 0.55 * np.exp(-t / 100.0), n_runs=2)
    assert "over 2 runs" in unsettled_runs_note(two, model="m", plateau=plateau, initial_reward=start)
    two_settled = _late_runset(lambda t: 0.85 - 0.55 * np.exp(-t / 15.0), n_runs=2)
    assert unsettled_runs_note(two_settled, model="m", plateau=plateau, initial_reward=start) is None
    # a falling reward (a loss-like metric) falls toward its plateau
    falling = _late_runset(lambda t: 0.3 + 0.55 * np.exp(-t / 100.0))
    note = unsettled_runs_note(falling, model="m", plateau=np.full(400, 0.3), initial_reward=np.full(400, 0.85))
    assert note is not None and "still falling" in note
    # a new LLM (reward-valued draws NaN) is not judged
    assert unsettled_runs_note(rising, model=None, plateau=np.full(4, np.nan), initial_reward=np.full(4, np.nan)) is None


def test_the_slow_wander_of_settled_runs_is_not_read_as_runs_still_rising():
    # AR(1) noise with phi 0.9 about a settled plateau: within one 38-step window its lag-1
    # autocorrelation is underestimated, so the runs are tested against their spread (a t-test
    # across runs, level 0.01); a run's own corrected z passed 3 in 10% of such runs
    from bayes_grpo.predict.predict import unsettled_runs_note

    plateau, start = np.full(400, 0.85), np.full(400, 0.3)
    flagged = sum(
        unsettled_runs_note(
            _late_runset(lambda t: 0.85 + 0.0 * t, phi=0.9, sd=0.02, seed=s),
            model="m",
            plateau=plateau,
            initial_reward=start,
        )
        is not None
        for s in range(100)
    )
    assert flagged <= 5


def test_the_fitted_range_holds_the_settings_a_fit_took_from_its_defaults():
    # `fit --default momentum=0.9 --default k_ref=1` of an LLM's runs at lr 1e-5 (no K_ref or
    # momentum logged) and 5e-5 (logged), then `predict --lr 2e-5 --k-ref 2`: the run set reads
    # NaN for the defaulted runs' K_ref, so the lag-gain product a K_ref = 0.000109 was said to lie
    # outside the range [0.000136, 0.000136] of the other runs (the defaulted run's 2.7e-05 left
    # out, and the other LLM's runs counted in), and `--momentum 0.5` against runs fitted at the
    # default 0.9 had no range to leave at all
    import arviz as az
    import xarray as xr
    from test_predict import _draws

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.prepare import prepare_data
    from bayes_grpo.predict.predict import predict_run
    from bayes_grpo.predict.summary import attr_warnings

    steps = pd.Index(np.arange(12), name="step")
    curves, meta = {}, {}
    for name, llm, lr, logged in (("slow", "m", 1e-5, False), ("fast", "m", 5e-5, True), ("other", "o", 5e-4, True)):
        curves[name] = pd.DataFrame({"reward": np.linspace(0.2, 0.6, 12)}, index=steps)
        meta[name] = {"model": llm, "learning_rate": lr, "group_size": 4.0}
        if logged:
            meta[name] |= {"k_ref": 1.0, "momentum": 0.9, "momentum_convention": "ema"}
    runs = make_runset(curves=curves, meta=meta)
    model = GRPODynamicsModel(
        model_config={"hyperparameter_defaults": {"momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}}
    )
    model.runset = runs
    model.data = prepare_data(runs, model.model_config, model.parameterisation)
    gain = np.array([2.7e-5, 1.36e-4, 1e-2])  # the runs' a = eta K (the other LLM's far above)
    model.idata = az.InferenceData(
        posterior=xr.Dataset({"a": (("chain", "draw", "run"), np.broadcast_to(gain, (1, 4, 3)).copy())}, coords={"run": ["slow", "fast", "other"]})
    )
    draws = _draws(np.full(40, 5.45e-5), momentum=0.9, k_ref=2.0)
    model.coefficient_draws = lambda **kwargs: draws
    setting = dict(model="m", group_size=4, steps=40, discrepancy=False, momentum_convention="ema")
    inside = attr_warnings(predict_run(model, learning_rate=2e-5, momentum=0.9, k_ref=2, **setting))
    assert not any("lag-gain product" in w for w in inside), inside
    assert any("K_ref = 2 is outside the fitted runs' range [1, 1]" in w for w in inside), inside
    below = attr_warnings(predict_run(model, learning_rate=2e-5, momentum=0.5, k_ref=1, **setting))
    assert any("momentum = 0.5 is outside the fitted runs' range [0.9, 0.9]" in w for w in below), below
    draws = _draws(np.full(40, 5.45e-5), momentum=0.9, k_ref=6.0)
    model.coefficient_draws = lambda **kwargs: draws
    far = attr_warnings(predict_run(model, learning_rate=2e-5, momentum=0.9, k_ref=6, **setting))
    assert any("lag-gain product a K_ref = 0.000327 is outside the fitted runs' range [2.7e-05, 0.000136]" in w for w in far), far


def test_predict_without_a_momentum_convention_takes_the_fitted_runs_convention_not_heavy_ball():
    # `bayes-grpo predict fit.nc --momentum 0.9 ...` of a fit of `bayes-grpo train` runs (AdamW,
    # ema) took heavy_ball, a step 10 times theirs: "a K_ref = 0.000502 is outside the fitted
    # runs' range [5.02e-05, 0.0001]" and the advice to give --momentum-convention
    from test_predict import _draws

    from bayes_grpo.cli import build_parser
    from bayes_grpo.predict.predict import predict_run
    from bayes_grpo.predict.summary import attr_warnings

    argv = ["predict", "fit.nc", "--lr", "0.1", "--momentum", "0.5", "--k-ref", "2", "--group-size", "8", "--steps", "40"]
    assert build_parser().parse_args(argv).momentum_convention is None
    runs = _runset().assign_coords(momentum_convention=("run", np.array(["ema"] * 7, dtype=object)))
    draws = _draws(np.full(40, 0.005), momentum=0.5, k_ref=2.0)
    seen = {}

    class Fitted:
        runset = runs

        def coefficient_draws(self, **kwargs):
            seen.update(kwargs)
            return draws

    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=40, discrepancy=False, model="bandit")
    ds = predict_run(Fitted(), momentum_convention=None, **setting)
    assert seen["momentum_convention"] == "ema" and json.loads(ds.attrs["settings"])["momentum_convention"] == "ema"
    assert not any("momentum convention" in w for w in attr_warnings(ds))
    # given, it is taken as given (and warned where no fitted run has it)
    ds = predict_run(Fitted(), momentum_convention="heavy_ball", **setting)
    assert seen["momentum_convention"] == "heavy_ball"
    assert any("momentum convention heavy_ball is not that" in w for w in attr_warnings(ds))
    # runs that record no convention: heavy_ball, as before
    bare = runs.drop_vars("momentum_convention")
    Fitted.runset = bare
    predict_run(Fitted(), momentum_convention=None, **setting)
    assert seen["momentum_convention"] == "heavy_ball"
