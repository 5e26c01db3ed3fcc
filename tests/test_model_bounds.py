"""Fits of a reward with known bounds (`fit --reward-bounds LO HI`, runset.bounds).

The example runs in data/tiny log a success rate in [0, 1] and end before their plateau:
fitted without bounds their plateau lies above 1 and some initial rewards below 0 (the shipped
tiny.nc had p* 3.44), and `forecast --prior fit.nc --reward-bounds 0 1` was refused ("every
posterior draw puts the plateau outside the reward bounds").
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from bayes_grpo.cli import main
from bayes_grpo.model import GRPODynamicsModel
from bayes_grpo.model.config import config_hash
from bayes_grpo.runset import RunSetError, save_runset
from bayes_grpo.runset.bounds import bounded_value, latent_value
from bayes_grpo.runset.ingest import load_runs
from bayes_grpo.runset.thin import thin_runset

DATA = Path(__file__).resolve().parents[1] / "data" / "tiny"
#: Two runs that take off late (reward ~0 for 100 steps, ~0.9 at step 300).
RUNS = ("g16_p8_lr0.001_k1_adamw_s0", "g16_p8_lr0.001_k1_adamw_s1")
SAMPLER = dict(draws=100, tune=100, chains=2, random_seed=0, progressbar=False)
#: The reward-valued posterior variables, each of which a bounded fit keeps inside the bounds.
LEVELS = ("plateau", "plateau_run", "initial_reward", "initial_reward_model")


@pytest.fixture(scope="module")
def runs():
    return thin_runset(load_runs([DATA / r for r in RUNS]), 3)


@pytest.fixture(scope="module")
def runs_file(runs, tmp_path_factory):
    return save_runset(runs, tmp_path_factory.mktemp("bounds") / "runs.nc")


def test_the_map_onto_the_bounds_is_the_identity_slope_at_the_middle_and_inverts():
    x = np.array([-50.0, -1.0, 0.2, 0.5, 0.9, 3.44, 50.0])
    y = bounded_value(x, 0.0, 1.0)
    assert ((y >= 0.0) & (y <= 1.0)).all() and np.all(np.diff(y) > 0)
    assert bounded_value(0.5, 0.0, 1.0) == pytest.approx(0.5)
    assert (bounded_value(0.5 + 1e-6, 0.0, 1.0) - 0.5) / 1e-6 == pytest.approx(1.0, rel=1e-5)
    assert latent_value(y[1:-1], 0.0, 1.0) == pytest.approx(x[1:-1])
    # it commutes with an affine change of unit: a reward on 0-100 is the same map, scaled
    assert bounded_value(100 * x, 0.0, 100.0) == pytest.approx(100 * y)


def test_a_fit_without_bounds_keeps_its_settings_and_hash():
    # fits saved before bounds existed (models/bandit.nc) must load: same settings, same hash
    model = GRPODynamicsModel()
    assert model.settings == {"parameterisation": "mechanistic", "likelihood": "iid", "invariance": "shared"}
    assert model.id == config_hash(model.model_config, model.settings, {"version": model.version})
    bounded = GRPODynamicsModel(reward_bounds=(0, 1))
    assert bounded.settings["reward_bounds"] == [0.0, 1.0] and bounded.id != model.id
    assert GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "bandit.nc").reward_bounds is None


@pytest.mark.parametrize(
    ("bounds", "named"),
    [((1, 0), "lo < hi"), ((0, float("inf")), "two finite numbers"), ((0, 1, 2), "two finite numbers"), ("01", "two finite numbers")],
)
def test_bounds_that_are_no_range_are_refused(bounds, named):
    with pytest.raises(ValueError, match=named):
        GRPODynamicsModel(reward_bounds=bounds)


def test_bounds_the_logged_rewards_break_are_refused_naming_run_step_and_value(runs):
    # refused before anything is built or sampled
    with pytest.raises(RunSetError, match=r"reward bounds \[0, 0.5\] do not hold every logged reward: run 'g16_p8_lr0.001_k1_adamw_s0' at step \d+: 0\.5\d+ \(\d+ rewards outside\)"):
        GRPODynamicsModel(reward_bounds=(0, 0.5)).fit(runs, **SAMPLER)


def test_the_fit_flag_names_the_run_set_file_for_data_outside_the_bounds(runs_file, tmp_path, capsys):
    out = tmp_path / "fit.nc"
    assert main(["fit", str(runs_file), "-o", str(out), "--reward-bounds", "0.1", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{runs_file}: reward bounds [0.1, 1] do not hold every logged reward: run 'g16_p8_lr0.001_k1_adamw_s0' at step 1: 0 (" in err
    assert not out.exists()
    assert main(["fit", str(runs_file), "-o", str(out), "--reward-bounds", "1", "0"]) == 2
    assert "--reward-bounds: reward bounds must satisfy lo < hi; got (1, 0)" in capsys.readouterr().err


@pytest.mark.slow
def test_a_bounded_fit_keeps_every_plateau_and_initial_reward_inside_where_the_unbounded_fit_leaves(
    runs, runs_file, tmp_path, capsys
):
    unbounded = GRPODynamicsModel()
    # the premise needs few draws: at 2 x 50 (seeds 0, 1, 2) every draw of p* was above 1.2, as
    # at 2 x 100; 29.5 s of CPU instead of 43.2 s (warm compile cache)
    unbounded.fit(runs, **(SAMPLER | {"draws": 50, "tune": 50}))
    post = unbounded.idata.posterior
    # the premise: these runs end before their plateau, and without bounds it is drawn above 1
    assert float(post["plateau"].max()) > 1.0
    out = tmp_path / "fit.nc"
    cli = ["fit", str(runs_file), "-o", str(out), "--reward-bounds", "0", "1", "--draws", "100", "--tune", "100",
           "--chains", "2", "--no-progress", "--json"]
    assert main(cli) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["settings"]["reward_bounds"] == [0.0, 1.0]
    model = GRPODynamicsModel.load(out)  # the setting round-trips through save / load
    assert model.reward_bounds == (0.0, 1.0) and model.settings["reward_bounds"] == [0.0, 1.0]
    post = model.idata.posterior
    for name in LEVELS:
        v = post[name].values
        assert np.isfinite(v).all() and v.min() >= 0.0 and v.max() <= 1.0, name
    # a new run's draws (its own R0 offset) and a prediction's levels stay inside too
    draws = model.coefficient_draws(learning_rate=1e-3, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=16)
    for name in ("plateau", "initial_reward"):
        assert draws[name].min() >= 0.0 and draws[name].max() <= 1.0
    # predict's bands of the mean (with the law-discrepancy term) and of the logged reward too
    from bayes_grpo.predict.predict import predict_run
    from bayes_grpo.predict.summary import band

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the setting's extrapolation, the i.i.d. fit's residuals
        pred = predict_run(model, learning_rate=2e-3, momentum=0.9, momentum_convention="ema", k_ref=2, group_size=16, steps=300)
    for kind in ("mean", "obs"):
        lo, hi = band(pred, kind=kind, hdi_prob=0.9)
        assert np.min(lo) >= 0.0 and np.max(hi) <= 1.0, kind
    # and the forecast from the fit, given no bounds, takes the fit's
    from bayes_grpo.predict.forecast import forecast_in_runset

    fc = forecast_in_runset(runs, RUNS[0], 150, posterior=model, seed=0, n_draws=200, check_instability=False)
    assert json.loads(fc.attrs["reward_bounds"]) == [0.0, 1.0]
    assert "reward bounds [0, 1] taken from the fit" in fc.attrs["prior_note"]


def test_the_fit_flag_refuses_rewards_outside_the_bounds_before_any_other_work(runs_file, tmp_path, capsys, monkeypatch):
    # the bounds check came after the instability diagnostic and its notes (about 30 s on
    # data/tiny, every run flagged printed) and the long-run note: it is the first look at the data
    import bayes_grpo.cli.fit as cli_fit

    looked = []
    monkeypatch.setattr(cli_fit, "flagged_unstable_runs", lambda runset: looked.append("instability") or {})
    out = tmp_path / "fit.nc"
    assert main(["fit", str(runs_file), "-o", str(out), "--reward-bounds", "0", "0.5", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert looked == [] and "note:" not in err
    assert f"{runs_file}: reward bounds [0, 0.5] do not hold every logged reward: run 'g16_p8_lr0.001_k1_adamw_s0' at step " in err


def test_one_check_of_rewards_within_bounds_for_the_fit_and_the_forecast_importing_no_model_area():
    # forecast.check_within_bounds did the job of bounds.check_rewards_within in its own words
    # ("rewards of run 'neg' lie outside the reward bounds [0, 1] (min -8, max -2.02)": no step),
    # because bayes_grpo.model.bounds could not be imported without the model area (ArviZ, ~3 s)
    import subprocess
    import sys

    import pandas as pd

    from bayes_grpo.predict.forecast import ForecastError, forecast_in_runset
    from bayes_grpo.runset import make_runset

    steps = np.arange(40)
    reward = -2.0 - 6.0 * np.exp(-steps / 8.0)
    runset = make_runset({"neg": pd.DataFrame({"reward": reward}, index=steps)}, {})
    with pytest.raises(ForecastError, match=r"^reward bounds \[0, 1\] do not hold every logged reward: run 'neg' at step 0: -8 \(40 rewards outside\); give bounds that hold every logged reward, or forecast without them$"):
        forecast_in_runset(runset, "neg", 20, reward_bounds=(0.0, 1.0))
    code = (
        "import sys; import bayes_grpo.predict.forecast;"
        "from bayes_grpo.runset.bounds import check_rewards_within, bounded_value, latent_value;"
        "print(sorted(m for m in ('arviz', 'pymc', 'pytensor') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=DATA.parents[1])
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


#: One run at G 4 and one at G 16 of one LLM and setting: a G-invariance test's smallest set.
G_RUNS = ("g4_p32_lr0.001_k1_adamw_s0", "g16_p8_lr0.001_k1_adamw_s0")


def test_the_invariance_test_fits_h0_and_h1_within_the_reward_bounds(monkeypatch):
    # the invariance test (API, CLI `invariance`, the demo, `report --invariance`) fitted H0 and H1
    # without bounds whatever the fit had: on the demo's 0-1 rewards their plateaus went above 1
    import pymc as pm

    from bayes_grpo.checks import invariance

    two_g = thin_runset(load_runs([DATA / r for r in G_RUNS]), 3)
    made, built = [], []
    make = invariance._make_model

    def recording(inv, **kw):
        made.append((inv, kw.get("reward_bounds")))
        return make(inv, **kw)

    class Sampled(Exception):
        pass

    def no_sampling(pm_model, label, **kw):
        built.append(pm_model)
        raise Sampled

    monkeypatch.setattr(invariance, "_make_model", recording)
    monkeypatch.setattr(invariance, "_bridge", no_sampling)
    plateaus = {}
    for bounds in (None, (0.0, 1.0)):
        made.clear(), built.clear()
        with pytest.raises(Sampled):
            invariance.invariance_bayes_factor(two_g, reward_bounds=bounds, draws=200, chains=2)
        assert made == [("shared", bounds), ("by_group", bounds)]
        plateaus[bounds] = pm.draw(built[0]["plateau"], draws=400, random_seed=0)
    # the premise: H0's prior plateau, without bounds, goes above 1; with them it stays inside
    assert plateaus[None].max() > 1.0
    assert plateaus[(0.0, 1.0)].min() >= 0.0 and plateaus[(0.0, 1.0)].max() <= 1.0
    # rewards outside the bounds: refused naming run, step and value, before any sampling
    with pytest.raises(RunSetError, match=r"reward bounds \[0, 0.5\] do not hold every logged reward: run 'g4_p32_lr0.001_k1_adamw_s0' at step 166: 0.578125"):
        invariance.invariance_bayes_factor(two_g, reward_bounds=(0.0, 0.5), draws=200, chains=2)


def test_leave_one_g_out_refuses_rewards_outside_the_bounds_before_its_first_fit(monkeypatch):
    # each fit checked its own runs only: with bounds [0, 0.95] the fit on the G 4 run (inside)
    # sampled (356 s at 2 x 100 draws, compile included) before the fit on the G 16 run refused
    # its rewards; and the result did not say which bounds it was fitted with
    from bayes_grpo.checks import invariance, ppc

    two_g = thin_runset(load_runs([DATA / r for r in G_RUNS]), 3)
    fitted, made = [], []
    make = invariance._make_model

    def recording(inv, **kw):
        model = make(inv, **kw)
        made.append(model.reward_bounds)
        model.fit = lambda runset, **k: fitted.append(sorted(set(runset["group_size"].values.tolist())))
        return model

    def predictive(builder, runset, run, rng):
        t = runset["step"].values.astype(float)
        y = runset["reward"].sel(run=run).values
        ok = np.isfinite(y)
        draws = np.tile(y[ok], (50, 1)) + 0.01 * rng.standard_normal((50, int(ok.sum())))
        return {"t": t[ok], "y": y[ok], "mean": draws, "obs": draws}

    monkeypatch.setattr(invariance, "_make_model", recording)
    monkeypatch.setattr(ppc, "run_predictive", predictive)
    with pytest.raises(RunSetError, match=r"^reward bounds \[0, 0.95\] do not hold every logged reward: run 'g16_p8_lr0.001_k1_adamw_s0' at step 202: 0.976562 \(12 rewards outside\)"):
        invariance.leave_one_g_out(two_g, reward_bounds=(0.0, 0.95), draws=100, tune=100)
    assert fitted == []
    res = invariance.leave_one_g_out(two_g, reward_bounds=(0, 1))
    assert fitted == [[4.0], [16.0]] and made == [(0.0, 1.0)] * 2
    assert res.values["reward_bounds"] == [0.0, 1.0]
    assert "reward_bounds" not in invariance.leave_one_g_out(two_g).values


def test_the_invariance_flag_takes_reward_bounds(tmp_path, capsys, monkeypatch):
    from bayes_grpo.checks import invariance

    monkeypatch.setattr(invariance, "_bridge", lambda *a, **k: pytest.fail("sampled before checking"))
    path = save_runset(thin_runset(load_runs([DATA / r for r in G_RUNS]), 3), tmp_path / "two_g.nc")
    assert main(["invariance", str(path), "--reward-bounds", "0", "0.5", "--draws", "200", "--no-progress"]) == 2
    assert f"{path}: reward bounds [0, 0.5] do not hold every logged reward: run 'g4_p32_lr0.001_k1_adamw_s0' at step 166: 0.578125" in capsys.readouterr().err
    assert main(["invariance", str(path), "--reward-bounds", "1", "0"]) == 2
    assert "--reward-bounds: reward bounds must satisfy lo < hi; got (1, 0)" in capsys.readouterr().err


def test_a_forecast_from_a_bounded_fit_loses_no_draw_and_its_prior_keeps_the_fits_shape():
    # prior_from_draws moment-matched a Gaussian on the raw p* and R0 of models/tiny.nc's draws
    # (p* 0.998 near the bound 1): 14.5% of the prior's p* above 1, 32% of its R0 below 0, and
    # the forecast of g16_p8_lr0.001_k1_adamw_s0 at step 60 left 194 of its 1000 draws out
    from bayes_grpo.predict.forecast import forecast_in_runset, prior_from_posterior
    from bayes_grpo.predict.summary import attr_warnings

    tiny = DATA.parents[1] / "models" / "tiny.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the i.i.d. fit's residuals
        fc = forecast_in_runset(load_runs([DATA / RUNS[0]]), RUNS[0], 60, posterior=tiny, seed=0, n_draws=400, check_instability=False)
        fit = GRPODynamicsModel.load(tiny)
    assert "reward bounds [0, 1] taken from the fit" in fc.attrs["prior_note"]
    assert not [w for w in attr_warnings(fc) if "were left out" in w], attr_warnings(fc)
    setting = dict(learning_rate=1e-3, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=16, model="tiny-gpt2")
    draws = fit.coefficient_draws(**setting)
    q = [0.05, 0.25, 0.5, 0.75, 0.95]
    raw = prior_from_posterior(fit, reward_bounds=None, **setting).draw(np.random.default_rng(0), 4000)
    assert (raw[:, 0] > 1.0).mean() > 0.1  # the premise: on the levels themselves
    prior = prior_from_posterior(fit, reward_bounds=(0.0, 1.0), **setting)
    assert prior.latent_bounds == (0.0, 1.0) and json.loads(fc.attrs["prior"])["latent_bounds"] == [0.0, 1.0]
    drawn = prior.draw(np.random.default_rng(0), 4000)
    for i, name, tol in ((0, "plateau", 0.002), (1, "initial_reward", 0.015)):
        assert drawn[:, i].min() > 0.0 and drawn[:, i].max() < 1.0, name
        assert np.quantile(drawn[:, i], q) == pytest.approx(np.quantile(draws[name].values, q), abs=tol), name


def test_a_posterior_prior_follows_the_fits_own_bounds_unless_told_none():
    # prior_from_posterior(tiny.nc, ...) in Python, without reward_bounds, gave the Gaussian on the
    # levels of a fit bounded in [0, 1]: 14.5% of its p* above 1, 32% of its R0 below 0, and a
    # forecast from it left 162 of its 1000 draws out. Not given, the bounds are the fit's; None
    # says "no bounds", as forecast_in_runset asks for a run logged outside the fit's bounds
    import pandas as pd

    from bayes_grpo.predict.forecast import (
        forecast_in_runset,
        population_prior_for_run,
        prior_from_posterior,
    )
    from bayes_grpo.runset import make_runset

    tiny = DATA.parents[1] / "models" / "tiny.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the i.i.d. fit's residuals
        fit = GRPODynamicsModel.load(tiny)
    setting = dict(learning_rate=5e-4, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=16, model="tiny-gpt2")
    rng = np.random.default_rng(0)
    default = prior_from_posterior(fit, **setting)
    assert default.latent_bounds == (0.0, 1.0)
    drawn = default.draw(rng, 4000)
    assert drawn[:, :2].min() > 0.0 and drawn[:, :2].max() < 1.0
    unbounded = prior_from_posterior(fit, reward_bounds=None, **setting)
    assert unbounded.latent_bounds is None and (unbounded.draw(rng, 4000)[:, 0] > 1.0).mean() > 0.1
    # the prior of a run set's run from the fit follows the fit's bounds too
    runs = load_runs([DATA / RUNS[0]])
    steps = runs["step"].values.astype(float)
    prefix = (steps[:60], runs["reward"].values[0, :60])
    prior, _ = population_prior_for_run(runs, RUNS[0], posterior=fit, prefix=prefix, horizon=300.0)
    assert prior.latent_bounds == (0.0, 1.0)
    # a run logged outside the fit's bounds (the same run as a percentage) is forecast without
    # them, its prior on p* and R0 themselves, as said
    reward = 100.0 * np.nan_to_num(runs["reward"].values[0])
    other = make_runset({"pct": pd.DataFrame({"reward": reward}, index=runs["step"].values)}, {"pct": {"model": "tiny-gpt2", "learning_rate": 5e-4, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1, "group_size": 16}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = forecast_in_runset(other, "pct", 60, posterior=fit, likelihood="iid", seed=0, n_draws=200, check_instability=False)
    assert "the fit's reward bounds [0, 1] are not this run's" in fc.attrs["prior_note"]
    assert fc.attrs["reward_bounds"] == "none" and "latent_bounds" not in json.loads(fc.attrs["prior"])


def test_a_forecast_from_a_bounded_fits_prior_keeps_the_fits_bounds_unless_told_none():
    # forecast_run(t, y, steps, prior=prior_from_posterior(tiny.nc, ...)) without reward_bounds
    # forecast a success rate with constant noise, uncensored: its 90% band of the logged reward
    # fell below 0 at 65% of the steps (down to -0.37) for g16_p8_lr0.0005_k1_adamw_s0 up to step 60
    from bayes_grpo.predict.forecast import (
        RunForecaster,
        forecast_band,
        forecast_run,
        prior_from_posterior,
    )

    run = "g16_p8_lr0.0005_k1_adamw_s0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the i.i.d. fit's residuals
        fit = GRPODynamicsModel.load(DATA.parents[1] / "models" / "tiny.nc")
    setting = dict(learning_rate=5e-4, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=16, model="tiny-gpt2")
    prior = prior_from_posterior(fit, **setting)
    runs = load_runs([DATA / run])
    t, y = runs["step"].values.astype(float), runs["reward"].sel(run=run).values
    seen = np.isfinite(y) & (t <= 60)
    steps = np.arange(0.0, 301.0)
    fc = forecast_run(t[seen], y[seen], steps, prior=prior, likelihood="iid", n_draws=200, rng=0)
    assert json.loads(fc.attrs["reward_bounds"]) == [0.0, 1.0]
    lo, hi = forecast_band(fc, steps, kind="obs")
    assert lo.min() >= 0.0 and hi.max() <= 1.0
    told = forecast_run(t[seen], y[seen], steps, prior=prior, likelihood="iid", n_draws=200, rng=0, reward_bounds=None)
    assert told.attrs["reward_bounds"] == "none"
    assert RunForecaster(prior, steps).reward_bounds == (0.0, 1.0)
    assert RunForecaster(prior, steps, reward_bounds=None).reward_bounds is None


def test_the_law_comparison_takes_reward_bounds(runs, runs_file, capsys):
    # `compare` fitted its four laws without bounds: a user of 0-1 rewards got plateaus above 1
    # (these runs end before their plateau), where `fit --reward-bounds 0 1` keeps them inside
    import pymc as pm

    from bayes_grpo.predict import compare

    plateaus = {}
    for bounds in (None, (0.0, 1.0)):
        data = compare.prepare_runs(runs, reward_bounds=bounds)
        z = pm.draw(compare.build_law_model("single_exp", data)["plateau"], draws=400, random_seed=0)
        plateaus[bounds] = z * data.scale + data.loc  # the prior's plateaus as rewards
    assert plateaus[None].max() > 1.0  # the premise, without bounds
    assert plateaus[(0.0, 1.0)].min() >= 0.0 and plateaus[(0.0, 1.0)].max() <= 1.0
    res = compare.compare_laws(runs, laws=["single_exp"], draws=100, tune=100, chains=2, reward_bounds=(0, 1))
    data = compare.prepare_runs(runs)
    post = res.idatas["single_exp"].posterior
    for name in ("plateau", "initial_reward"):
        levels = post[name].values * data.scale + data.loc
        assert levels.min() >= 0.0 and levels.max() <= 1.0, name
    assert "Reward bounds [0, 1]: every law's plateau and initial reward lie inside them." in res.notes
    assert main(["compare", str(runs_file), "--laws", "single_exp", "--reward-bounds", "0", "0.5", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{runs_file}: reward bounds [0, 0.5] do not hold every logged reward: run 'g16_p8_lr0.001_k1_adamw_s0' at step" in err
    assert "or compare without them" in err


def test_a_bounded_model_of_one_run_compiles_without_pytensor_logging_a_rewrite_traceback():
    # `fit one_run.nc --reward-bounds -1 0` printed PyTensor's "ERROR ... SequentialGraphRewriter
    # apply <FusionOptimizer> ... KeyError: data_bound_hi" with its traceback, three times, when
    # PyMC compiled the function of the fit's levels (plateau, R0) for its trace
    import logging

    import pandas as pd
    import pymc as pm

    from bayes_grpo.runset import make_runset

    steps = np.arange(60)
    curve = {"r0": pd.DataFrame({"reward": -0.1 - 0.8 * np.exp(-steps / 15.0)}, index=steps)}
    settings = {"model": "m", "learning_rate": 1e-6, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1, "group_size": 8}
    runset = make_runset(curve, {"r0": settings})
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    logger = logging.getLogger("pytensor.graph.rewriting.basic")
    handler = Keep(level=logging.ERROR)
    logger.addHandler(handler)
    try:
        built = GRPODynamicsModel(reward_bounds=(-1, 0)).build_model(runset)
        pm_model = built[0] if isinstance(built, tuple) else built
        with pm_model:
            # the function PyMC's trace compiles: every deterministic, in the model's order
            pm.compile(pm_model.value_vars, pm_model.deterministics, on_unused_input="ignore")
    finally:
        logger.removeHandler(handler)
    assert not records, [r.getMessage() for r in records]
