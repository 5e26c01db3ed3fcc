"""Forecasting a run in progress: calibration, accuracy, updating, failure modes."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from bayes_grpo.constants import STEP_DIM
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.predict.forecast import (
    ROBUST_WEIGHT,
    ForecastError,
    GaussianPrior,
    RunForecaster,
    coverage,
    default_prior,
    fit_run,
    forecast_band,
    forecast_run,
    mean_curve,
    prior_from_draws,
    prior_from_runs,
    u_from_coefficients,
)
from bayes_grpo.predict.summary import attr_warnings

STEPS = np.arange(0.0, 241.0)


def _population(rng, n):
    """Population of runs: plateau, R0, w0, zeta, sigma (a slow start, mildly underdamped)."""
    return np.column_stack(
        [
            rng.normal(0.8, 0.03, n),
            rng.normal(0.2, 0.02, n),
            np.log(rng.lognormal(np.log(0.04), 0.1, n)),
            np.log(rng.lognormal(np.log(0.8), 0.1, n)),
            np.log(np.full(n, 0.03)),
        ]
    )


def _run(u, rng):
    mean = mean_curve(u, STEPS)[0]
    return mean, mean + np.exp(u[4]) * rng.standard_normal(STEPS.size)


def test_mean_curve_is_the_closed_form_oscillator():
    u = np.array([0.7, 0.1, np.log(0.05), np.log(0.6), np.log(0.02)])
    w0, zeta = 0.05, 0.6
    expected = reward_trajectory(STEPS, 1.0, 2 * zeta * w0, w0**2, 0.7, 0.1)
    np.testing.assert_allclose(mean_curve(u, STEPS)[0], expected, rtol=1e-12)


def test_u_from_coefficients_is_scale_free_in_the_coefficients():
    # (M, C, K) and (2M, 2C, 2K) draw the same curve, so they map to the same u
    u1 = u_from_coefficients(
        np.array([0.8]),
        np.array([0.2]),
        np.array([1.3]),
        np.array([0.05]),
        np.array([0.002]),
        np.array([0.03]),
    )
    u2 = u_from_coefficients(
        np.array([0.8]),
        np.array([0.2]),
        np.array([2.6]),
        np.array([0.10]),
        np.array([0.004]),
        np.array([0.03]),
    )
    np.testing.assert_allclose(u1, u2, rtol=1e-12)
    np.testing.assert_allclose(
        mean_curve(u1, STEPS)[0], reward_trajectory(STEPS, 1.3, 0.05, 0.002, 0.8, 0.2), rtol=1e-10
    )
    # an unstable draw (C < 0) has no log zeta: dropped as NaN
    bad = u_from_coefficients(
        np.array([0.8]),
        np.array([0.2]),
        np.array([1.0]),
        np.array([-0.1]),
        np.array([0.002]),
        np.array([0.03]),
    )
    assert np.isnan(bad).all()


def test_forecast_band_covers_about_90_percent_of_the_rest_of_the_run_with_a_population_prior():
    rng = np.random.default_rng(7)
    prior = prior_from_draws(_population(rng, 4000), source="true population")
    covs_obs, covs_mean = [], []
    for _ in range(12):
        u = _population(rng, 1)[0]
        mean, y = _run(u, rng)
        n = int(0.3 * STEPS.size)
        ds = forecast_run(
            STEPS[:n],
            y[:n],
            STEPS[n:],
            prior=prior,
            rng=int(rng.integers(1 << 30)),
            n_draws=800,
            likelihood="iid",
        )
        lo, hi = forecast_band(ds, STEPS[n:], kind="obs")
        covs_obs.append(coverage(y[n:], lo, hi))
        lo, hi = forecast_band(ds, STEPS[n:], kind="mean")
        covs_mean.append(coverage(mean[n:], lo, hi))
    assert 0.85 <= np.mean(covs_obs) <= 0.95
    assert np.mean(covs_mean) >= 0.8


def test_forecast_beats_the_single_exponential_on_slow_start_runs_at_30_percent():
    lsq = pytest.importorskip("bayes_grpo.dynamics.lsq")
    from bayes_grpo.predict.evaluate import baseline_forecast, rmse

    rng = np.random.default_rng(11)
    prior = prior_from_draws(_population(rng, 4000), source="true population")
    ratios = []
    for _ in range(8):
        u = _population(rng, 1)[0]
        mean, y = _run(u, rng)
        n = int(0.3 * STEPS.size)
        ds = forecast_run(
            STEPS[:n], y[:n], STEPS[n:], prior=prior, rng=0, n_draws=500, likelihood="iid"
        )
        base = baseline_forecast("single_exp", STEPS[:n], y[:n], STEPS[n:])
        ratios.append(rmse(mean[n:], ds["mean_mean"].values) / rmse(mean[n:], base))
    assert lsq is not None
    assert np.median(ratios) < 0.8


def test_more_steps_narrow_the_forecast_and_the_forecaster_updates_in_place():
    rng = np.random.default_rng(3)
    u = np.array([0.75, 0.15, np.log(0.04), np.log(0.9), np.log(0.03)])
    mean, y = _run(u, rng)
    fc = RunForecaster(None, STEPS, n_draws=500, likelihood="iid")
    widths = []
    for upto in (60, 120, 200):
        fc.update(STEPS[:upto], y[:upto])
        ds = fc.forecast()
        lo, hi = forecast_band(ds, STEPS[200:], kind="mean")
        widths.append(float(np.mean(hi - lo)))
    assert widths[0] > widths[1] > widths[2]
    assert [h["upto_step"] for h in fc.history] == [59.0, 119.0, 199.0]
    # the plateau is recovered once most of the rise has been seen
    assert abs(float(ds["param_plateau"].mean()) - 0.75) < 0.03


def test_stop_step_is_after_the_rise_and_before_the_end():
    rng = np.random.default_rng(5)
    u = np.array([0.8, 0.2, np.log(0.05), np.log(1.2), np.log(0.02)])
    mean, y = _run(u, rng)
    ds = forecast_run(STEPS[:150], y[:150], STEPS, rng=0, n_draws=500, stop_threshold=0.006)
    stop = ds.attrs["stop_step"]
    # true remaining gain p* - p(t) falls below 0.006 (1% of the 0.6 rise) at about this step
    true_stop = STEPS[np.argmax(0.8 - mean < 0.006)]
    assert abs(stop - true_stop) < 0.25 * true_stop
    assert ds.attrs["regime"] in ("overdamped", "critical", "underdamped")


def test_prior_from_runs_centres_on_the_population():
    rng = np.random.default_rng(9)
    pop = _population(rng, 6)
    runs = [(STEPS, _run(u, rng)[1]) for u in pop]
    prior = prior_from_runs(runs)
    assert abs(prior.mean[0] - 0.8) < 0.05 and abs(prior.mean[1] - 0.2) < 0.05
    assert abs(prior.mean[2] - np.log(0.04)) < 0.3


def test_a_run_based_priors_source_counts_its_runs_once_and_says_which_were_not_fitted():
    # 'forecast --run ...' said "7 other runs of the same LLM (7 runs, empirical Bayes ...)"
    rng = np.random.default_rng(9)
    runs = [(STEPS, _run(u, rng)[1]) for u in _population(rng, 3)]
    prior = prior_from_runs(runs, source="3 other runs", kind="gaussian")
    assert prior.source.startswith("3 other runs (empirical Bayes")
    short = (STEPS[:2], runs[0][1][:2])  # 2 finite steps: not fitted
    prior = prior_from_runs([*runs, short], source="4 other runs", kind="gaussian")
    assert prior.source.startswith("4 other runs (3 of 4 fitted, empirical Bayes")


def test_too_few_steps_is_a_clear_error():
    with pytest.raises(ForecastError, match="at least 3"):
        forecast_run([0.0, 1.0], [0.1, 0.2], STEPS)
    with pytest.raises(ForecastError, match="unknown likelihood"):
        forecast_run(STEPS[:10], STEPS[:10] * 0.01, STEPS, likelihood="student")
    with pytest.raises(ForecastError, match="prior needs"):
        GaussianPrior(np.zeros(3), np.eye(3))


def test_a_forecast_from_a_handful_of_points_warns_that_its_bands_are_the_priors():
    rng = np.random.default_rng(4)
    u = np.array([0.8, 0.2, np.log(0.04), np.log(0.8), np.log(0.01)])
    _, y = _run(u, rng)
    short = forecast_run(STEPS[:4], y[:4], STEPS, n_draws=200, rng=0)
    from bayes_grpo.predict.summary import attr_warnings

    assert any("only 4 logged rewards" in w for w in attr_warnings(short))
    longer = forecast_run(STEPS[:40], y[:40], STEPS, n_draws=200, rng=0)
    assert not any("logged rewards up to step" in w for w in attr_warnings(longer))


def test_pareto_k_is_reported_and_a_confident_prior_dominates():
    rng = np.random.default_rng(2)
    u = np.array([0.8, 0.2, np.log(0.04), np.log(0.8), np.log(0.01)])
    _, y = _run(u, rng)
    good = fit_run(
        STEPS[:120], y[:120], default_prior(STEPS[:120], y[:120]), n_draws=200, likelihood="iid"
    )
    assert np.isfinite(good.pareto_k)
    # a confident prior on a plateau far below the data: the posterior leaves the Laplace region
    wrong = GaussianPrior(
        np.array([0.0, 0.0, np.log(0.5), np.log(5.0), np.log(0.1)]),
        np.diag([1e-6, 1e-6, 1e-4, 1e-4, 1e-4]),
    )
    post = fit_run(STEPS[:120], y[:120], wrong, n_draws=200, likelihood="iid")
    assert abs(post.draws[:, 0].mean() - 0.0) < 0.01  # prior dominates, as it should for a 1e-3 sd


def test_state_space_forecast_covers_runs_that_wander_where_iid_bands_are_too_narrow():
    """With process noise (G = 4) a run wanders around its mean trajectory; the Kalman
    forecast continues the run's own state and lets its variance grow to the stationary
    value, the i.i.d. band reads the wander as signal and is too narrow."""
    from bayes_grpo.dynamics.simulate import simulate_sde_runset

    ds = simulate_sde_runset(
        group_sizes=(4,),
        learning_rates=(1e-3,),
        k_refs=(1, 4),
        n_seeds=2,
        n_steps=240,
        measurement_sd=0.02,
        random_seed=0,
    )
    cov = {"state_space": [], "iid": []}
    t = ds["step"].values.astype(float)
    for r in ds["run"].values:
        y = ds["reward"].sel(run=r).values
        n = int(0.3 * t.size)
        for lik in cov:
            fc = forecast_run(t[:n], y[:n], t[n:], rng=0, n_draws=400, likelihood=lik)
            lo, hi = forecast_band(fc, t[n:], kind="obs")
            cov[lik].append(coverage(y[n:], lo, hi))
    # measured (seed 0, weak prior, 30% prefix): state space 0.85, iid 0.57
    assert np.mean(cov["state_space"]) >= 0.75
    assert np.mean(cov["state_space"]) > np.mean(cov["iid"]) + 0.15


def test_an_iid_forecast_of_a_wandering_run_warns_that_its_bands_are_too_narrow():
    """`forecast --likelihood iid` on a run whose reward wanders (stationary sd 23% of the
    rise) gave a 90% band that held 45% of the rest of the run, a regime said with
    probability 0.996 against the truth, and no warning; a run with white noise about its
    curve gets none."""
    from bayes_grpo.dynamics.simulate import simulate_sde_runset

    ds = simulate_sde_runset(
        models={"m": {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-5}},
        group_sizes=(4,),
        n_seeds=1,
        n_steps=240,
        measurement_sd=0.01,
        random_seed=1,
    )
    t = ds["step"].values.astype(float)
    y = ds["reward"].isel(run=0).values
    n = 80
    fc = forecast_run(t[:n], y[:n], t[n:], rng=0, n_draws=300, likelihood="iid")
    notes = attr_warnings(fc)
    assert any("correlated in time" in w and "state_space" in w for w in notes), notes
    white = 0.7 - 0.5 * np.exp(-t / 20.0) + np.random.default_rng(0).normal(0, 0.02, t.size)
    fc = forecast_run(t[:n], white[:n], t[n:], rng=0, n_draws=300, likelihood="iid")
    assert not any("correlated in time" in w for w in attr_warnings(fc))


def _runs_with_a_solved_one(level: float = 1.0):
    """Three runs that rise from 0.2 to 0.8 (white noise) and one, ``solved``, whose reward
    is ``level`` at every step (a run solved from step 0: 1; or never solved: 0)."""
    import pandas as pd

    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(1)
    steps = np.arange(0, 200, 2)
    rise = 0.8 - 0.6 * np.exp(-steps / 40)
    curves = {
        f"r{i}": pd.DataFrame(
            {"reward": np.clip(rise + rng.normal(0, 0.03, steps.size), 0, 1)}, index=steps
        )
        for i in range(3)
    }
    curves["solved"] = pd.DataFrame({"reward": np.full(steps.size, level)}, index=steps)
    return make_runset(curves, {k: {"model": "m"} for k in curves})


@pytest.mark.parametrize("level", [1.0, 0.0])
def test_an_iid_forecast_of_a_constant_run_does_not_say_it_wanders(level):
    """`forecast --run solved --upto 100 --likelihood iid` of a run solved from step 0 (reward
    1 throughout; or 0, never solved) said its residuals were correlated in time (lag-1 0.93)
    and its reward wandered: with the other runs' prior the curve misses the level, and the
    residuals are its mirror image, with no noise at all."""
    from bayes_grpo.predict.forecast import forecast_in_runset

    fc = forecast_in_runset(
        _runs_with_a_solved_one(level), "solved", 100, likelihood="iid", n_draws=300
    )
    assert not any("correlated in time" in w for w in attr_warnings(fc)), attr_warnings(fc)


def test_a_forecast_of_a_constant_run_says_what_fit_says_of_it(tmp_path, capsys):
    """`forecast --run solved --upto 100` of a run solved from step 0 forecast its reward
    falling to the other runs' plateau (0.8) without a word; `fit` notes a constant run
    (prepare.shape_notes). The forecast now says so too, on stderr and in the JSON."""
    import json

    from bayes_grpo.cli import main
    from bayes_grpo.model.prepare import shape_notes
    from bayes_grpo.runset import save_runset

    ds = _runs_with_a_solved_one()
    path = save_runset(ds, tmp_path / "runs.nc")
    assert main(["forecast", str(path), "--run", "solved", "--upto", "100", "--json"]) == 0
    out = capsys.readouterr()
    note = "runs ['solved (1 at all 51 logged steps up to step 100)'] have a constant reward: "
    assert any(w.startswith(note + "no dynamics to fit") for w in json.loads(out.out)["warnings"])
    assert f"bayes-grpo forecast: warning: {note}" in out.err
    fit_notes = shape_notes(["solved"], ds["step"].values, ds["reward"].sel(run=["solved"]).values)
    assert "have a constant reward: no dynamics to fit" in fit_notes[0]
    # a run that rises gets no such note
    assert main(["forecast", str(path), "--run", "r0", "--upto", "100", "--json"]) == 0
    assert not any("constant reward" in w for w in json.loads(capsys.readouterr().out)["warnings"])


# --------------------------------------------------------------------------- onset, noise shape,
# mixture prior, band calibration (issue 7, second round)


def test_onset_holds_the_reward_at_r0_then_runs_the_oscillator_from_there():
    from bayes_grpo.predict.forecast import mean_curve

    u5 = np.array([0.8, 0.05, np.log(0.04), np.log(0.7), np.log(0.02)])
    u6 = np.append(u5, np.log(60.0))
    with_onset = mean_curve(u6, STEPS)[0]
    assert np.all(with_onset[STEPS <= 60] == pytest.approx(0.05, abs=1e-12))
    shifted = mean_curve(u5, np.maximum(STEPS - 60.0, 0.0))[0]
    np.testing.assert_allclose(with_onset, shifted, rtol=1e-12)
    # a 5-coordinate row is the plain oscillator
    np.testing.assert_allclose(
        mean_curve(u5, STEPS)[0],
        reward_trajectory(STEPS, 1.0, 2 * 0.7 * 0.04, 0.04**2, 0.8, 0.05),
        rtol=1e-12,
    )


def test_bounded_reward_noise_is_largest_mid_range_and_constant_without_bounds():
    from bayes_grpo.predict.forecast import NOISE_FLOOR_SHARE, noise_shape

    m = np.array([0.0, 0.1, 0.5, 0.9, 1.0, 1.3])
    h = noise_shape(m, (0.0, 1.0))
    assert h[2] == pytest.approx(1.0)
    assert h[0] == pytest.approx(NOISE_FLOOR_SHARE) and h[-1] == pytest.approx(NOISE_FLOOR_SHARE)
    # binomial shape: p (1 - p) / (1/4), floored
    assert h[1] == pytest.approx(NOISE_FLOOR_SHARE + (1 - NOISE_FLOOR_SHARE) * 0.36)
    np.testing.assert_array_equal(noise_shape(m, None), np.ones_like(m))
    # bounds that are no range are refused by the forecast's entry points, once, before any work
    # (test_every_entry_of_the_forecast_checks_its_reward_bounds_first_in_the_fits_words), not
    # by the shape inside the likelihood


def test_binomial_noise_runs_are_covered_at_90_percent_with_the_bounded_noise_shape():
    """A success rate logged from 64 samples rises from 0.3 to 0.95: its noise sd falls
    from 0.06 to 0.03. Constant noise learnt on the prefix over-covers the plateau; the
    bounded-reward shape carries the right noise forward."""
    rng = np.random.default_rng(4)
    prior = prior_from_draws(_binomial_pop(rng, 4000), source="true population")
    cov = {"bounded": [], "constant": []}
    for _ in range(6):
        u = _binomial_pop(rng, 1)[0]
        mean = mean_curve(u, STEPS)[0]
        y = rng.binomial(64, np.clip(mean, 0, 1)) / 64.0
        n = int(0.3 * STEPS.size)
        for name, b in (("bounded", (0.0, 1.0)), ("constant", None)):
            ds = forecast_run(
                STEPS[:n],
                y[:n],
                STEPS[n:],
                prior=prior,
                rng=1,
                n_draws=500,
                likelihood="iid",
                reward_bounds=b,
            )
            lo, hi = forecast_band(ds, STEPS[n:], kind="obs")
            cov[name].append(coverage(y[n:], lo, hi))
    assert 0.85 <= np.mean(cov["bounded"]) <= 0.95
    assert np.mean(cov["constant"]) > np.mean(cov["bounded"])


def _binomial_pop(rng, n):
    return np.column_stack(
        [
            rng.normal(0.95, 0.01, n),
            rng.normal(0.3, 0.02, n),
            np.log(rng.lognormal(np.log(0.04), 0.1, n)),
            np.log(rng.lognormal(np.log(0.9), 0.1, n)),
            np.log(np.full(n, 0.5 / np.sqrt(64))),  # sd mid-range of a rate from 64 samples
        ]
    )


def test_mixture_prior_keeps_every_run_still_flat_at_the_prefix_end_in_play():
    """Half the population takes off at step 40, half at step 140. A prefix flat up to
    step 70 rules out the early risers: the forecast must put the rise after the prefix
    (onset > 70) and its band must still hold the flat reward at step 100 (some late
    risers have not moved yet) and a risen reward at step 230."""
    from bayes_grpo.predict.forecast import MixturePrior

    base = np.array([0.9, 0.02, np.log(0.05), np.log(0.9), np.log(0.02)])
    means, covs = [], []
    for onset in (40.0, 45.0, 50.0, 120.0, 140.0, 160.0):
        means.append(np.append(base, np.log(onset)))
        covs.append(np.diag([0.02, 0.005, 0.1, 0.1, 0.2, 0.05]) ** 2)
    prior = MixturePrior(np.array(means), np.array(covs), np.ones(6), source="two clusters")
    rng = np.random.default_rng(0)
    u = np.append(base, np.log(140.0))
    y = mean_curve(u, STEPS)[0] + 0.02 * rng.standard_normal(STEPS.size)
    n = 70
    post = fit_run(STEPS[:n], y[:n], prior, n_draws=600, likelihood="iid", rng=0)
    assert np.quantile(np.exp(post.draws[:, 5]), 0.05) > 70.0
    ds = forecast_run(STEPS[:n], y[:n], STEPS[n:], prior=prior, n_draws=600, likelihood="iid")
    lo, hi = forecast_band(ds, np.array([100.0, 230.0]), kind="obs")
    assert lo[0] < 0.05 < hi[0]
    assert hi[1] > 0.8
    lo, hi = forecast_band(ds, STEPS[n:], kind="obs")
    assert coverage(y[n:], lo, hi) >= 0.85
    # one Gaussian with the same two moments puts the rise right after the prefix
    # (measured: point-forecast RMSE to the true mean 0.052 with the mixture, 0.199 with it)
    truth = mean_curve(u, STEPS[n:])[0]
    gauss = GaussianPrior(prior.mean, prior.cov)
    ds_g = forecast_run(STEPS[:n], y[:n], STEPS[n:], prior=gauss, n_draws=600, likelihood="iid")

    def err(d):
        return float(np.sqrt(np.mean((d["point_forecast"].values - truth) ** 2)))

    assert err(ds) < 0.5 * err(ds_g)


def test_prior_from_runs_mixture_has_one_component_per_run_and_the_population_moments():
    from bayes_grpo.predict.forecast import MixturePrior

    rng = np.random.default_rng(9)
    runs = [(STEPS, _run(u, rng)[1]) for u in _population(rng, 5)]
    mix = prior_from_runs(runs)
    gauss = prior_from_runs(runs, kind="gaussian")
    # one component per run and the robust (weak) one, of weight ROBUST_WEIGHT
    assert isinstance(mix, MixturePrior) and mix.weights.size == 6
    np.testing.assert_allclose(mix.weights, [0.17] * 5 + [0.15])
    assert prior_from_runs(runs, robust_weight=0.0).weights.size == 5
    assert abs(mix.mean[0] - 0.8) < 0.05 and abs(gauss.mean[0] - 0.8) < 0.05
    assert np.all(np.isfinite(mix.logpdf(mix.means)))


@pytest.mark.slow
def test_a_run_whose_plateau_lies_above_every_earlier_runs_is_forecast_from_its_own_prefix():
    """Prior-data conflict: four earlier runs plateau at 0.5, the new run rises to 0.8 and its
    prefix (20% of the steps) is already past 0.5. Without the robust component every
    component of the run-based prior holds the plateau near 0.5 and the band misses the rest
    of the run; with it (the default) the evidence moves to the weak component and the band
    mostly covers it. Six seeds, measured: coverage 0.98 / 0.92 / 0.98 / 0.99 / 0.29 / 0.60
    with, 0.01 / 0.00 / 0.01 / 0.03 / 0.03 / 0.01 without (from 30% of the steps the weak
    component still takes the evidence, and the band is then as good as the weak prior's
    alone: 0.95 / 0.14 / 0.12 / 0.45 / 0.99 / 0.98, against 0.00-0.14 without)."""
    n = 48
    with_robust, without = [], []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        u_old = np.array([0.5, 0.2, np.log(0.04), np.log(0.8), np.log(0.03)])
        runs = []
        for _ in range(4):
            jitter = np.array([rng.normal(0, 0.02), rng.normal(0, 0.02), rng.normal(0, 0.1), 0.0, 0.0])
            runs.append((STEPS, _run(u_old + jitter, rng)[1]))
        y = _run(np.array([0.8, 0.2, np.log(0.04), np.log(0.8), np.log(0.03)]), rng)[1]
        assert y[n - 10 : n].mean() > 0.52  # the prefix is already past every earlier plateau
        for robust_weight, out in ((ROBUST_WEIGHT, with_robust), (0.0, without)):
            prior = prior_from_runs(runs, robust_weight=robust_weight)
            ds = forecast_run(STEPS[:n], y[:n], STEPS[n:], prior=prior, n_draws=600, likelihood="iid")
            lo, hi = forecast_band(ds, STEPS[n:], kind="obs")
            out.append(coverage(y[n:], lo, hi))
    assert np.median(with_robust) >= 0.85 and np.mean(with_robust) >= 0.7, with_robust
    assert max(without) <= 0.2, without
    with pytest.raises(ForecastError, match="robust_weight must be in"):
        prior_from_runs(runs, robust_weight=1.0)


def test_calibrated_band_scale_reaches_the_target_coverage_on_the_calibration_runs():
    from bayes_grpo.predict.forecast import (
        calibrated_band_scale,
        required_band_scale,
        scale_band,
    )

    rng = np.random.default_rng(1)
    lo, hi = -np.ones(400), np.ones(400)
    # runs whose deviations are 2x wider than the band thinks: about 2x the band is needed
    required = [
        required_band_scale(2.0 * 0.608 * rng.standard_normal(400), lo, hi) for _ in range(5)
    ]
    kappa = calibrated_band_scale(required, prob=0.9)
    assert 1.7 < kappa < 2.3
    slo, shi = scale_band(lo, hi, kappa)
    assert np.mean([np.mean(r <= kappa) for r in required]) >= 0.9
    np.testing.assert_allclose(shi - slo, kappa * (hi - lo))
    with pytest.raises(ForecastError, match="at least 2"):
        calibrated_band_scale(required[:1])


def test_steps_whose_band_collapsed_onto_the_reward_say_nothing_of_the_band_scale():
    # calibration runs stuck at a bound (a success rate at 0: every draw clipped there) have bands
    # of no width on their rewards; counted as needing a scale of 0 they made the calibrated 50%
    # band of the three tiny g4_p8 runs 0 wide (scale 0.0)
    from bayes_grpo.predict.forecast import calibrated_band_scale, required_band_scale

    rng = np.random.default_rng(2)
    moving = [required_band_scale(0.5 * rng.standard_normal(200), -np.ones(200), np.ones(200)) for _ in range(2)]
    stuck = [required_band_scale(np.zeros(200), np.zeros(200), np.zeros(200)) for _ in range(3)]
    assert np.all(np.isnan(stuck[0]))
    # a collapsed band that misses the reward needs more than any scale
    assert required_band_scale(np.array([0.1]), np.zeros(1), np.zeros(1))[0] == np.inf
    kappa = calibrated_band_scale(moving + stuck, prob=0.5)
    assert kappa == pytest.approx(calibrated_band_scale(moving, prob=0.5)) and kappa > 0.3


def test_split_calibration_never_reads_the_run_it_calibrates():
    """A run's band scale comes from backtests of the other half of the runs: changing the
    run's own held-out steps must not change it."""
    import pandas as pd

    from bayes_grpo.predict.evaluate import evaluate_forecasts
    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(5)
    steps = np.arange(0.0, 120.0)
    curves = {}
    for i, u in enumerate(_population(rng, 4)):
        u = u.copy()
        u[2] = np.log(0.08)
        y = mean_curve(u, steps)[0] + 0.03 * rng.standard_normal(steps.size)
        curves[f"r{i}"] = pd.DataFrame(
            {"reward": y}, index=pd.Index(steps.astype(int), name="step")
        )
    ds = make_runset(curves=curves, meta={k: {"model": "m"} for k in curves})
    kw = dict(fractions=(0.3,), n_draws=200, likelihood="iid", calibrate=True)
    table = evaluate_forecasts(ds, **kw)
    changed = ds.copy(deep=True)
    changed["reward"].loc[{"run": "r0", "step": slice(60, None)}] += 0.5
    table2 = evaluate_forecasts(changed, **kw)
    k1 = table.set_index("run")["band_scale"]
    k2 = table2.set_index("run")["band_scale"]
    assert k1["r0"] == pytest.approx(k2["r0"])  # r0's own future does not reach its scale
    assert k1["r1"] != pytest.approx(k2["r1"])  # it does reach the other half's
    assert table["coverage_obs_calibrated"].notna().all()


def test_a_runs_evaluated_forecast_does_not_depend_on_which_runs_are_evaluated_with_it():
    """Each row of the forecast evaluation is the forecast ``bayes-grpo forecast --seed``
    makes from that prefix: it was seeded ``seed + i`` by the run's position among the runs
    evaluated, so ``runs=["r2"]`` and the whole table gave r2 different figures."""
    import pandas as pd

    from bayes_grpo.predict.evaluate import evaluate_forecasts
    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(11)
    steps = np.arange(0.0, 80.0)
    curves = {}
    for i, u in enumerate(_population(rng, 3)):
        y = mean_curve(u, steps)[0] + 0.03 * rng.standard_normal(steps.size)
        curves[f"r{i}"] = pd.DataFrame(
            {"reward": y}, index=pd.Index(steps.astype(int), name="step")
        )
    ds = make_runset(curves=curves, meta={k: {"model": "m"} for k in curves})
    kw = dict(fractions=(0.3,), n_draws=200, likelihood="iid", seed=3)
    cols = ["coverage_obs", "rmse_oscillator", "stop_step"]
    whole = evaluate_forecasts(ds, **kw).set_index("run")
    alone = evaluate_forecasts(ds, runs=["r2"], **kw).set_index("run")
    np.testing.assert_allclose(alone.loc["r2", cols].astype(float), whole.loc["r2", cols].astype(float))
    reordered = evaluate_forecasts(ds, runs=["r2", "r1", "r0"], **kw).set_index("run")
    np.testing.assert_allclose(
        reordered.loc[whole.index, cols].astype(float), whole[cols].astype(float)
    )


def test_runs_without_a_model_name_are_not_called_the_same_llm():
    # runs of unknown LLM ("") were pooled as "other runs of the same LLM", even with
    # same_model_only, which exists to keep runs of other LLMs (other reward scales) out
    import pandas as pd

    from bayes_grpo.predict.forecast import population_prior_for_run
    from bayes_grpo.runset import make_runset

    steps = np.arange(30)
    curves = {
        f"r{i}": pd.DataFrame({"reward": 0.8 - 0.6 * np.exp(-steps / (5.0 + i))}, index=steps)
        for i in range(3)
    }
    runset = make_runset(curves, {})
    prior, note = population_prior_for_run(runset, "r0")
    assert prior is not None and "same LLM" not in prior.source and prior.source.startswith("2 other runs")
    prior, note = population_prior_for_run(runset, "r0", same_model_only=True)
    assert prior is None and "LLM is unknown" in note


class _StubFit:
    """A fitted model as population_prior_for_run reads it: parameterisation, fit --default
    values, and coefficient_draws returning ``draws`` (each call's settings kept in ``calls``)."""

    def __init__(self, parameterisation, defaults, draws):
        self.parameterisation = parameterisation
        self.model_config = {"hyperparameter_defaults": defaults}
        self.draws = draws
        self.calls = []

    def coefficient_draws(self, **kwargs):
        self.calls.append(kwargs)
        return self.draws


def _decaying_curve():
    """A run's rewards over 40 steps: 0.2 rising to 0.8 (time constant 8 steps)."""
    import pandas as pd

    steps = np.arange(40)
    return pd.DataFrame({"reward": 0.8 - 0.6 * np.exp(-steps / 8.0)}, index=steps)


def test_a_posterior_prior_takes_the_fits_defaults_and_a_phenomenological_fit_needs_no_setting():
    # forecast --prior refused a run lacking momentum_convention / k_ref ("lacks [...]") even
    # when the fit had fitted that very run: a phenomenological fit ignores them, and a
    # mechanistic one had taken them from `fit --default`
    import xarray as xr

    from bayes_grpo.predict.forecast import ForecastError, population_prior_for_run
    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(0)

    def var(centre, sd):
        return ("chain", "draw"), (centre + sd * rng.standard_normal(400)).reshape(2, 200)

    draws = xr.Dataset(
        {
            "plateau": var(0.8, 0.01),
            "initial_reward": var(0.2, 0.01),
            "M_eff": var(1.0, 0.0),
            "C_eff": var(0.2, 0.01),
            "K_eff": var(0.01, 0.001),
            "sigma": var(0.02, 0.001),
        }
    )

    def Fitted(parameterisation, defaults):
        return _StubFit(parameterisation, defaults, draws)

    curve = _decaying_curve()
    runset = make_runset({"r0": curve}, {"r0": {"model": "m", "learning_rate": 0.01, "momentum": 0.9}})
    phen = Fitted("phenomenological", {})
    prior, _ = population_prior_for_run(runset, "r0", posterior=phen)
    assert np.isfinite(prior.mean).all() and len(phen.calls) == 1
    mech = Fitted("mechanistic", {"momentum_convention": None})
    with pytest.raises(ForecastError, match=r"lacks \['momentum_convention', 'k_ref'\]"):
        population_prior_for_run(runset, "r0", posterior=mech)
    mech = Fitted("mechanistic", {"momentum_convention": "ema", "k_ref": 2})
    prior, _ = population_prior_for_run(runset, "r0", posterior=mech)
    assert mech.calls[0]["momentum_convention"] == "ema" and mech.calls[0]["k_ref"] == 2.0
    assert mech.calls[0]["learning_rate"] == 0.01  # the run's own value comes first
    # without momentum the conventions coincide: none needed, as in the fit
    no_momentum = make_runset({"r0": curve}, {"r0": {"model": "m", "learning_rate": 0.01, "momentum": 0.0, "k_ref": 1}})
    mech = Fitted("mechanistic", {})
    population_prior_for_run(no_momentum, "r0", posterior=mech)
    assert mech.calls[0]["momentum_convention"] == "heavy_ball"


def test_a_posterior_prior_says_which_settings_it_took_from_the_fits_defaults():
    # `forecast pct.nc --run pct --upto 40 --prior fit.nc` of a CSV export that logs no
    # hyperparameters, fitted with --default learning_rate=1e-6 ... --default group_size=8, forecast
    # the run at those defaults without a word (fit notes each one), and its note said the noise
    # was at "its LLM's reference G (the geometric mean of its fitted runs' known G)", which the
    # fit had none of: it took the run at the default G

    from bayes_grpo.predict.forecast import population_prior_for_run
    from bayes_grpo.runset import make_runset

    defaults = {"learning_rate": 1e-6, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1, "group_size": 8}

    def Fitted():
        return _StubFit("mechanistic", defaults, _phenomenological_draws())

    curve = _decaying_curve()
    bare = make_runset({"r0": curve}, {"r0": {"model": "m"}})
    fitted = Fitted()
    _, note = population_prior_for_run(bare, "r0", posterior=fitted)
    assert fitted.calls[0]["group_size"] == 8.0
    assert (
        "run 'r0' does not log group_size, learning_rate, momentum, momentum_convention, k_ref: the prior is "
        "the fit's prediction at its defaults (fit --default) group_size=8, learning_rate=1e-06, momentum=0.9, "
        "momentum_convention=ema, k_ref=1"
    ) in note, note
    assert "reference G" not in note
    # a run that logs its settings gets no such note
    logged = make_runset(
        {"r0": curve},
        {"r0": {"model": "m", "learning_rate": 1e-6, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1, "group_size": 8}},
    )
    _, note = population_prior_for_run(logged, "r0", posterior=Fitted())
    assert "defaults" not in note, note


def _phenomenological_draws():
    """Coefficient draws of a phenomenological fit (2 chains x 200), as a stand-in fit's
    ``coefficient_draws`` returns them."""
    import xarray as xr

    rng = np.random.default_rng(0)
    return xr.Dataset(
        {
            name: (("chain", "draw"), (centre + sd * rng.standard_normal(400)).reshape(2, 200))
            for name, centre, sd in [
                ("plateau", 0.8, 0.01), ("initial_reward", 0.2, 0.01), ("M_eff", 1.0, 0.0),
                ("C_eff", 0.2, 0.01), ("K_eff", 0.01, 0.001), ("sigma", 0.01, 0.001),
            ]
        }
    )  # fmt: skip


class _FittedTo:
    """A stand-in phenomenological fit of ``fitted_runs`` (its runset), drawing
    :func:`_phenomenological_draws`: what the forecast reads of a fit to say which steps it saw."""

    parameterisation = "phenomenological"
    model_config: dict = {}

    def __init__(self, fitted_runs):
        self.runset = fitted_runs

    def coefficient_draws(self, **kwargs):
        return _phenomenological_draws()


def test_a_calibrated_forecast_reads_its_posterior_file_once(monkeypatch):
    # `forecast runs.nc --run B-s0 --upto 40 --prior fit.nc --calibrate` on 6 runs read fit.nc
    # 6 times (a prior for every backtested run) and printed its two warnings 6 times each

    import bayes_grpo.model
    from bayes_grpo.predict.forecast import forecast_in_runset

    draws = _phenomenological_draws()
    loads = []

    class Fitted:
        parameterisation = "phenomenological"
        model_config: dict = {}

        def coefficient_draws(self, **kwargs):
            return draws

    def load(cls, path):
        loads.append(path)
        return Fitted()

    # as_fitted_model's loader and the texts of the fit's warnings (model.core._load_with_notes)
    monkeypatch.setattr(bayes_grpo.model.core.GRPODynamicsModel, "load", classmethod(load))
    monkeypatch.setattr(bayes_grpo.model.core, "fitted_model_warnings", lambda model, path: [f"{path}: the fit did not converge"])
    runset, _ = _coarse_runset(60.0, 1.0)
    with pytest.warns(UserWarning, match="did not converge") as seen:
        fc = forecast_in_runset(
            runset, "r0", 20, posterior="fit.nc", calibrate=True, likelihood="iid", n_draws=100
        )
    assert loads == ["fit.nc"] and len([w for w in seen if "did not converge" in str(w.message)]) == 1
    assert fc.attrs["prior_source"].startswith("posterior fit.nc ")
    assert json.loads(fc.attrs["calibration"])["n_runs"] == 2


def test_a_posterior_prior_fitted_to_the_steps_a_forecast_is_scored_on_says_its_backtest_is_in_sample():
    # `forecast runs.nc --run B-s0 --upto 40 --prior fit.nc`, fit.nc fitted to runs.nc: backtest
    # RMSE 0.024 against 0.055 with the run-based prior, as if the posterior forecast better

    from bayes_grpo.predict.forecast import fitted_rewards_after, forecast_in_runset

    runset, steps = _coarse_runset(60.0, 1.0)
    whole, prefix = _FittedTo(runset), _FittedTo(runset.where(runset["step"] <= 20))
    assert fitted_rewards_after(whole, runset, "r0", 20) == 40
    assert fitted_rewards_after(prefix, runset, "r0", 20) == 0  # a fit of the run so far
    assert fitted_rewards_after(_FittedTo(runset.sel(run=["r1", "r2"])), runset, "r0", 20) == 0
    kw = dict(likelihood="iid", n_draws=100)
    told = attr_warnings(forecast_in_runset(runset, "r0", 20, posterior=whole, **kw))
    assert any("fitted to 40 rewards of run 'r0' after step 20" in w and "in-sample" in w for w in told)
    assert not any("in-sample" in w for w in attr_warnings(forecast_in_runset(runset, "r0", 20, posterior=prefix, **kw)))


def test_a_run_without_a_model_name_takes_the_fits_llm_of_such_runs():
    # the fit calls runs without a model name UNKNOWN_MODEL; `forecast --prior fit.nc` of such a
    # run asked the fit for no LLM ("model=new, population level": beside a named LLM the
    # population level, not the LLM the run was fitted as)
    import types

    import pandas as pd

    from bayes_grpo.model.prepare import UNKNOWN_MODEL
    from bayes_grpo.predict.forecast import population_prior_for_run
    from bayes_grpo.runset import make_runset

    draws = _phenomenological_draws()
    calls = []

    class Fitted:
        parameterisation = "phenomenological"
        model_config: dict = {}

        def __init__(self, models):
            self.data = types.SimpleNamespace(models=models)

        def coefficient_draws(self, **kwargs):
            calls.append(kwargs["model"])
            return draws

    steps = np.arange(40)
    curve = pd.DataFrame({"reward": 0.8 - 0.6 * np.exp(-steps / 8.0)}, index=steps)
    runset = make_runset({"r0": curve}, {"r0": {"learning_rate": 0.01}})
    prior, _ = population_prior_for_run(runset, "r0", posterior=Fitted([UNKNOWN_MODEL, "qwen"]))
    assert calls == [UNKNOWN_MODEL] and f"model={UNKNOWN_MODEL}" in prior.source
    population_prior_for_run(runset, "r0", posterior=Fitted(["qwen", "llama"]))
    assert calls[-1] is None  # a fit without such runs: a new LLM, as before


def test_runs_of_other_llms_lend_their_dynamics_but_not_their_reward_scale():
    # two runs of other LLMs on a 10x reward scale used to set the prior's plateau near 8:
    # a forecast of a run rising to 0.8 was pulled towards a plateau it never approaches
    import pandas as pd

    from bayes_grpo.predict.forecast import LEVEL_COORDS, population_prior_for_run
    from bayes_grpo.runset import make_runset

    steps = np.arange(60)
    rise = 1.0 - np.exp(-steps / 12.0)
    curves = {
        "small": pd.DataFrame({"reward": 0.1 + 0.7 * rise}, index=steps),
        "big1": pd.DataFrame({"reward": 1.0 + 7.0 * rise}, index=steps),
        "big2": pd.DataFrame({"reward": 1.0 + 7.0 * (1.0 - np.exp(-steps / 14.0))}, index=steps),
    }
    meta = {"small": {"model": "a"}, "big1": {"model": "b"}, "big2": {"model": "c"}}
    runset = make_runset(curves, meta)
    prefix = (steps[:18].astype(float), curves["small"]["reward"].to_numpy()[:18])
    pooled, _ = population_prior_for_run(runset, "small", horizon=60.0)
    scaled, _ = population_prior_for_run(runset, "small", prefix=prefix, horizon=60.0)
    assert pooled.mean[0] > 5.0  # levels of the 10x runs (the old behaviour without a prefix)
    assert abs(scaled.mean[0] - prefix[1][-2:].mean()) < 0.05 and scaled.mean[1] < 0.3
    assert "dynamics only" in scaled.source
    dyn = [i for i in range(6) if i not in LEVEL_COORDS]
    np.testing.assert_allclose(scaled.mean[dyn], pooled.mean[dyn])  # same time scale and damping
    lv = list(LEVEL_COORDS)
    assert np.all(scaled.cov[np.ix_(lv, dyn)] == 0.0)
    # runs of the same LLM keep their levels
    same = make_runset(curves, {k: {"model": "a"} for k in curves})
    kept, _ = population_prior_for_run(same, "small", prefix=prefix, horizon=60.0)
    assert kept.mean[0] > 5.0 and "dynamics only" not in kept.source


def test_rewards_outside_the_declared_reward_bounds_are_a_clear_error():
    # --reward-bounds 0 1 on a reward logged in [-8, -2] was accepted silently: the noise
    # shape sat at its floor everywhere and the forecast came out as if the bounds held
    import pandas as pd

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.runset import make_runset

    steps = np.arange(40.0)
    reward = -2.0 - 6.0 * np.exp(-steps / 8.0)
    with pytest.raises(ForecastError, match=r"^reward bounds \[0, 1\] do not hold every logged reward: at step 0: -8 \(20 rewards outside\)"):
        fit_run(
            steps[:20], reward[:20], default_prior(steps[:20], reward[:20]), reward_bounds=(0, 1)
        )
    runset = make_runset({"neg": pd.DataFrame({"reward": reward}, index=steps.astype(int))}, {})
    with pytest.raises(ForecastError, match=r"do not hold every logged reward: run 'neg' at step 0: -8"):
        forecast_in_runset(runset, "neg", 20, reward_bounds=(0.0, 1.0))
    # rewards on the bounds themselves are fine
    ok = np.clip(0.5 + 0.6 * np.sin(steps / 5.0), 0.0, 1.0)
    fit_run(
        steps, ok, default_prior(steps, ok), reward_bounds=(0.0, 1.0), n_draws=50, n_proposal=200
    )


def test_a_bounded_run_based_prior_leaves_out_the_runs_logged_outside_the_bounds_and_names_them():
    # `forecast real.nc --run sun_q35_9b_g2_rho1.0_s43 --upto 60 --reward-bounds 0 1`, beside
    # runs of a wordle reward on [-0.4, 1.8]: the whole run-based prior failed ("run-based prior
    # failed (observed rewards lie outside the reward bounds [0, 1] (min 0.05, max 1.8) ...);
    # weak default prior"), naming no run, though the other success-rate runs lay in [0, 1]
    import pandas as pd

    from bayes_grpo.predict.forecast import population_prior_for_run
    from bayes_grpo.runset import make_runset

    steps = np.arange(80)
    rng = np.random.default_rng(0)

    def rate(tau, top):
        return np.clip(0.05 + (top - 0.05) * (1.0 - np.exp(-steps / tau)) + 0.03 * rng.standard_normal(steps.size), 0, 1)

    curves = {
        "run": pd.DataFrame({"reward": rate(15.0, 0.8)}, index=steps),
        "rate1": pd.DataFrame({"reward": rate(12.0, 0.85)}, index=steps),
        "rate2": pd.DataFrame({"reward": rate(18.0, 0.75)}, index=steps),
        "wordle": pd.DataFrame({"reward": 0.1 + 1.7 * (1.0 - np.exp(-steps / 20.0))}, index=steps),
    }
    runset = make_runset(curves, {})
    prefix = (steps[:25].astype(float), curves["run"]["reward"].to_numpy()[:25])
    prior, note = population_prior_for_run(
        runset, "run", prefix=prefix, horizon=80.0, reward_bounds=(0.0, 1.0)
    )
    assert prior is not None and prior.source.startswith("2 other runs"), (prior, note)
    assert note == "1 other run left out of the prior, logged outside the reward bounds [0, 1] (another reward): wordle"
    # too few left: the weak prior, and the note still says which runs were left out and why
    few, why = population_prior_for_run(
        runset.drop_sel(run=["rate2"]), "run", prefix=prefix, horizon=80.0, reward_bounds=(0.0, 1.0)
    )
    assert few is None
    assert why == (
        "1 other run left out of the prior, logged outside the reward bounds [0, 1] (another "
        "reward): wordle; fewer than 2 other runs: weak default prior"
    )


def test_an_infinite_reward_bound_is_refused_not_forecast_with_its_noise_at_the_floor(tmp_path, capsys):
    # `forecast sde.nc --run R --upto 40 --reward-bounds 0 inf` was taken: every mean sat at
    # x = 0 of the bounds, its noise at the floor share, and a rising run's 90% band at the
    # horizon read [-0.54, 0.83] (38% of the plateau draws below 0) against [0.89, 0.99]
    from bayes_grpo.cli import main
    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.runset import save_runset

    runset, _ = _coarse_runset(60.0, 1.0)
    for bounds in ((0.0, np.inf), (-np.inf, 1.0), (np.nan, 1.0)):
        with pytest.raises(ForecastError, match=r"reward bounds must be two finite numbers \(lo, hi\)"):
            forecast_in_runset(runset, "r0", 20, reward_bounds=bounds, likelihood="iid", n_draws=100)
    path = save_runset(runset, tmp_path / "runs.nc")
    with pytest.raises(SystemExit) as done:
        main(["forecast", str(path), "--run", "r0", "--upto", "20", "--reward-bounds", "0", "inf"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "argument --reward-bounds: must be a finite number, got 'inf'" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "bounds, message",
    [
        ((1.0, 0.0), r"^reward bounds must satisfy lo < hi; got \(1, 0\)$"),
        ((0.0, 0.0), r"^reward bounds must satisfy lo < hi; got \(0, 0\)$"),
        ("01", r"^reward bounds must be two finite numbers \(lo, hi\), e\.g\. \(0, 1\) for a success rate; got '01'$"),
        ((0.0, 1.0, 2.0), r"^reward bounds must be two finite numbers \(lo, hi\).*; got \(0\.0, 1\.0, 2\.0\)$"),
        ((0.0, np.inf), r"^reward bounds must be two finite numbers \(lo, hi\).*; got \(0\.0, inf\)$"),
    ],
)
def test_every_entry_of_the_forecast_checks_its_reward_bounds_first_in_the_fits_words(bounds, message):
    # the forecast checked bounds in its own words inside the noise shape of the likelihood
    # (noise_shape: "reward bounds must be finite; got ..."), so an entry that did not reach it
    # took them: RunForecaster(reward_bounds=(1, 0)) until its first update,
    # population_prior_for_run(reward_bounds=(1, 0)) left every other run out as "logged outside
    # the reward bounds [1, 0] (another reward)", and "01" was forecast as the bounds (0, 1);
    # (0, 1, 2) was "too many values to unpack". Now each entry refuses them before any work, in
    # the words of runset.bounds.check_reward_bounds (fit, compare, invariance)
    from bayes_grpo.predict.forecast import (
        RunForecaster,
        forecast_in_runset,
        population_prior_for_run,
    )

    runset, steps = _coarse_runset(60.0, 1.0)
    y = runset["reward"].sel(run="r0").values
    prefix = (steps[:20], y[:20])
    calls = {
        "forecast_in_runset": lambda: forecast_in_runset(runset, "r0", 20, reward_bounds=bounds, likelihood="iid", n_draws=50),
        "forecast_run": lambda: forecast_run(*prefix, steps, reward_bounds=bounds, likelihood="iid", n_draws=50),
        "fit_run": lambda: fit_run(*prefix, default_prior(*prefix), reward_bounds=bounds, n_draws=50),
        "RunForecaster": lambda: RunForecaster(None, steps, reward_bounds=bounds),
        "prior_from_runs": lambda: prior_from_runs([(steps, y)] * 2, reward_bounds=bounds),
        "population_prior_for_run": lambda: population_prior_for_run(runset, "r0", prefix=prefix, reward_bounds=bounds),
    }
    said = {}
    for name, call in calls.items():
        try:
            said[name] = f"taken: {call()!r:.60}"
        except ForecastError as exc:
            said[name] = str(exc)
    assert all(re.search(message, text) for text in said.values()), said


def test_cli_forecast_refuses_reward_bounds_that_are_no_range_by_their_flag_before_reading_the_run_set(tmp_path, capsys):
    # `forecast runs.nc --run r0 --upto 20 --reward-bounds 1 0` read the run set and refused the
    # bounds as "runs.nc: reward bounds must satisfy lo < hi; got (1, 0)": the flag unnamed, after
    # the file (fit, compare and invariance name the flag, before the file is read)
    from bayes_grpo.cli import main

    missing = tmp_path / "runs.nc"
    assert main(["forecast", str(missing), "--run", "r0", "--upto", "20", "--reward-bounds", "1", "0"]) == 2
    err = capsys.readouterr().err
    assert "--reward-bounds: reward bounds must satisfy lo < hi; got (1, 0)" in err and str(missing) not in err


def test_an_upto_past_the_end_of_the_log_forecasts_from_the_last_logged_step_and_says_so():
    # `forecast --upto 5000` on a 40-step log used all 40 steps silently and drew the bands
    # out to step 10000 (2 x --upto)
    import pandas as pd

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.predict.summary import attr_warnings
    from bayes_grpo.runset import make_runset

    steps = np.arange(40.0)
    reward = 0.8 - 0.6 * np.exp(-steps / 10.0) + 0.01 * np.random.default_rng(0).normal(size=40)
    runset = make_runset({"r": pd.DataFrame({"reward": reward}, index=steps.astype(int))}, {})
    late = forecast_in_runset(runset, "r", 5000, likelihood="iid", n_draws=100, seed=0)
    notes = attr_warnings(late)
    assert any("past the last logged step 39" in w and "starts from step 39" in w for w in notes), notes
    assert float(late[STEP_DIM].max()) == 78.0  # 2 x the last logged step, not 2 x --upto
    at_end = forecast_in_runset(runset, "r", 39, likelihood="iid", n_draws=100, seed=0)
    assert not any("past the last logged step" in w for w in attr_warnings(at_end))


def test_an_upto_in_a_gap_of_the_log_says_where_the_forecast_starts():
    # `--upto 70` on a log with nothing between steps 50 and 100 forecast from step 50 silently;
    # a log every 4 steps (a K_ref 4 run) is no gap
    import pandas as pd

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.predict.summary import attr_warnings
    from bayes_grpo.runset import make_runset

    steps = np.r_[np.arange(0.0, 51.0), np.arange(100.0, 150.0)]
    reward = 0.8 - 0.6 * np.exp(-steps / 20.0) + 0.01 * np.random.default_rng(0).normal(size=steps.size)
    every4 = np.arange(1.0, 150.0, 4.0)
    curve = 0.8 - 0.6 * np.exp(-every4 / 20.0)
    runset = make_runset(
        {
            "gap": pd.DataFrame({"reward": reward}, index=steps.astype(int)),
            "k4": pd.DataFrame({"reward": curve}, index=every4.astype(int)),
        },
        {},
    )
    fc = forecast_in_runset(runset, "gap", 70, likelihood="iid", n_draws=100, seed=0, use_runs=False)
    notes = [w for w in attr_warnings(fc) if "falls in a gap" in w]
    assert len(notes) == 1 and "last logged step before it: 50" in notes[0], attr_warnings(fc)
    assert "of the log of run 'gap' (" in notes[0]  # not "run 'gap''s log"

    fc = forecast_in_runset(runset, "k4", 70, likelihood="iid", n_draws=100, seed=0, use_runs=False)
    assert not any("falls in a gap" in w for w in attr_warnings(fc))


def test_a_forecast_gives_the_policys_stop_step_ahead_of_the_logged_reward_that_trails_it():
    # a run's logged reward trails its policy (the bandit: K_ref steps; a training log: 1 step;
    # the SDE simulator: none), and a run stopped at a step keeps that step's policy; the
    # forecast read milestones and the stop step on the logged reward only, as predict once did
    import pandas as pd

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.runset import make_runset

    steps = np.arange(0.0, 120.0)
    reward = 0.8 - 0.6 * np.exp(-steps / 15.0) + 0.01 * np.random.default_rng(0).normal(size=steps.size)
    frame = pd.DataFrame({"reward": reward}, index=steps.astype(int))
    runset = make_runset(
        {"bandit": frame, "trl": frame, "sde": frame},
        {"bandit": {"source": "bandit", "k_ref": 4}, "trl": {"source": "trl", "k_ref": 4}, "sde": {"source": "simulate"}},
    )
    kw = dict(likelihood="iid", n_draws=200, seed=0, use_runs=False)
    for run, lag in (("bandit", 4.0), ("trl", 1.0)):
        fc = forecast_in_runset(runset, run, 40, **kw)
        assert fc.attrs["observation_lag"] == lag and f"{lag:g} step" in fc.attrs["milestones_of"]
        logged = fc["time_to_fraction_median"].values
        policy = fc["policy_time_to_fraction_median"].values
        assert np.all(np.isfinite(logged)) and np.all(np.abs(logged - policy - lag) <= 1.0), (logged, policy)
        assert abs(fc.attrs["stop_step"] - fc.attrs["policy_stop_step"] - lag) <= 1.0
        # the forecaster of a run in progress, told the lag, gives the same forecast
        forecaster = RunForecaster(None, fc[STEP_DIM].values, likelihood="iid", n_draws=200, seed=0, observation_lag=lag)
        forecaster.update(steps[:41], reward[:41])
        again = forecaster.forecast()
        assert again.attrs["policy_stop_step"] == fc.attrs["policy_stop_step"]
        assert forecaster.history[-1]["policy_stop_step"] == fc.attrs["policy_stop_step"]
    sde = forecast_in_runset(runset, "sde", 40, **kw)
    assert sde.attrs["observation_lag"] == 0.0 and "policy_stop_step" not in sde.attrs
    assert "no observation lag" in sde.attrs["milestones_of"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"stop_threshold": -1.0}, r"stop threshold must be a positive, finite reward gain"),
        ({"stop_threshold": 0.0}, r"stop threshold must be a positive, finite reward gain"),
        ({"stop_threshold": float("nan")}, r"stop threshold must be a positive, finite"),
        ({"horizon": 15.0}, r"horizon 15 is not after the last observed step 20 of run 'r'"),
        ({"horizon": 20.0}, r"horizon 20 is not after the last observed step 20"),
    ],
)
def test_a_stop_threshold_or_horizon_that_cannot_mean_anything_is_an_error(kwargs, message):
    # a negative threshold was taken as "never stop" ("expected remaining gain -0.149"), and a
    # horizon before --upto gave a "forecast" of steps already observed
    import pandas as pd

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.predict.summary import summarise_draws
    from bayes_grpo.runset import make_runset

    steps = np.arange(40.0)
    reward = 0.8 - 0.6 * np.exp(-steps / 10.0)
    runset = make_runset({"r": pd.DataFrame({"reward": reward}, index=steps.astype(int))}, {})
    with pytest.raises(ForecastError, match=message):
        forecast_in_runset(runset, "r", 20, likelihood="iid", n_draws=50, **kwargs)
    if "stop_threshold" in kwargs:  # the same rule for predict, which summarises draws too
        draws = np.tile(reward, (4, 1))
        with pytest.raises(ValueError, match=message):
            summarise_draws(
                steps,
                draws,
                draws,
                plateau=np.full(4, 0.8),
                initial_reward=np.full(4, 0.2),
                zeta=np.ones(4),
                damping=np.ones(4),
                hdi_probs=[0.9],
                **kwargs,
            )


def test_a_prior_kind_that_is_none_is_refused_not_forecast_from_the_weak_prior():
    # forecast_in_runset(..., prior_kind="gauss"): prior_from_runs' refusal was caught as a
    # run-based prior that failed, and the forecast came from the weak default prior, a note
    # in prior_note the only word of it
    from bayes_grpo.predict.forecast import (
        forecast_in_runset,
        population_prior_for_run,
        prior_from_runs,
    )

    runset, steps = _coarse_runset(60.0, 1.0)
    with pytest.raises(ForecastError, match=r"unknown prior kind 'gauss'; expected one of \('mixture', 'gaussian'\)"):
        forecast_in_runset(runset, "r0", 20, prior_kind="gauss", likelihood="iid", n_draws=100)
    with pytest.raises(ForecastError, match="unknown prior kind 'gauss'"):
        population_prior_for_run(runset, "r0", prior_kind="gauss")
    with pytest.raises(ForecastError, match="unknown prior kind 'Mixture'"):
        prior_from_runs([(steps, runset.reward.sel(run=r).values) for r in ("r1", "r2")], kind="Mixture")


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"horizon": np.inf}, "horizon inf is not a step: give a finite optimizer step"),
        ({"horizon": np.nan}, "horizon nan is not a step"),
        ({"upto": np.nan}, "upto nan is not a step"),
        ({"upto": -np.inf}, "upto -inf is not a step"),
    ],
)
def test_a_forecast_to_or_from_a_step_that_is_not_a_number_is_refused_naming_the_argument(kw, words):
    # forecast_in_runset(horizon=np.inf) said the weak prior "has non-finite moments", and
    # upto=np.nan that the run "has 0 rewards up to step nan"
    from bayes_grpo.predict.forecast import forecast_in_runset

    runset, _ = _coarse_runset(60.0, 1.0)
    args = {"upto": 20.0} | kw
    with pytest.raises(ForecastError, match=f"^{words}"):
        forecast_in_runset(runset, "r0", args.pop("upto"), use_runs=False, likelihood="iid", **args)


@pytest.mark.parametrize(
    "horizon, words",
    [
        ([], r"horizon_steps is empty: give the steps to forecast"),
        ([0.0, 10.0, np.nan], r"horizon_steps holds 1 step that is not a finite number \(nan\)"),
        (np.array([0.0, np.inf, np.inf]), r"horizon_steps holds 2 steps that are not a finite number \(inf\)"),
    ],
)
def test_forecast_run_and_the_forecaster_refuse_a_horizon_of_no_step_or_of_steps_that_are_not_numbers(horizon, words):
    # an empty horizon died in NumPy's "zero-size array to reduction operation maximum", a NaN
    # step in "prior from default (weak, scaled to the prefix) has non-finite moments"
    from bayes_grpo.predict.forecast import RunForecaster, forecast_run

    t = np.arange(20.0)
    y = 0.8 - 0.6 * np.exp(-t / 10.0)
    with pytest.raises(ForecastError, match=words):
        forecast_run(t, y, horizon, likelihood="iid", n_draws=100)
    with pytest.raises(ForecastError, match=words):
        RunForecaster(None, horizon_steps=horizon, likelihood="iid")


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"hdi_probs": ()}, r"hdi_probs is empty: give the band probabilities"),
        ({"hdi_probs": (0.5, 1.2)}, r"hdi_probs must be probabilities in \(0, 1\), got 1.2"),
        ({"n_draws": 0}, r"n_draws must be a whole number of draws >= 2, got 0"),
        ({"n_draws": 1}, r"n_draws must be a whole number of draws >= 2, got 1"),
        ({"n_draws": 10.5}, r"n_draws must be a whole number of draws >= 2, got 10.5"),
    ],
)
def test_a_forecast_of_no_band_or_too_few_draws_is_refused_naming_the_argument(kw, words):
    # hdi_probs=() died in NumPy's "need at least one array to stack" after the forecast's work,
    # and n_draws=0 said "the posterior puts its mass on diverging runs"
    from bayes_grpo.predict.forecast import RunForecaster, fit_run, forecast_in_runset, forecast_run

    t = np.arange(20.0)
    y = 0.8 - 0.6 * np.exp(-t / 10.0)
    with pytest.raises(ValueError, match=words):
        forecast_run(t, y, np.arange(40.0), likelihood="iid", **({"n_draws": 100} | kw))
    with pytest.raises(ValueError, match=words):
        RunForecaster(None, horizon_steps=np.arange(40.0), likelihood="iid", **kw)
    runset, _ = _coarse_runset(60.0, 1.0)
    with pytest.raises(ForecastError, match=words):
        forecast_in_runset(runset, "r0", 20.0, use_runs=False, likelihood="iid", **kw)
    if "n_draws" in kw:
        with pytest.raises(ValueError, match=words):
            fit_run(t, y, default_prior(t, y), likelihood="iid", **kw)


def _coarse_runset(last_step: float, every: float):
    import pandas as pd

    from bayes_grpo.runset import make_runset

    steps = np.arange(0.0, last_step + 1.0, every)
    rng = np.random.default_rng(0)
    runs = {}
    for i in range(3):
        reward = 0.8 - 0.6 * np.exp(-steps / (0.15 * last_step * (1 + 0.2 * i)))
        reward += 0.01 * rng.normal(size=steps.size)
        runs[f"r{i}"] = pd.DataFrame({"reward": reward}, index=steps.astype(int))
    return make_runset(runs, {}), steps


def test_a_forecast_a_million_steps_out_uses_a_bounded_grid_that_holds_the_logged_steps():
    # the grid was every step up to the horizon: a run logged every 1000 steps to 1e5 took
    # 104 s and ~13 GB; 1e6 steps ran out of memory. Now an even grid + the logged steps.
    from bayes_grpo.predict.forecast import FORECAST_GRID_POINTS, forecast_in_runset

    runset, steps = _coarse_runset(2e5, 10_000.0)
    fc = forecast_in_runset(runset, "r0", 1e5, horizon=1e6, likelihood="state_space", n_draws=100)
    grid = fc[STEP_DIM].values
    assert grid.size <= FORECAST_GRID_POINTS + steps.size
    assert grid[0] == 0.0 and grid[-1] == 1e6 and np.all(np.diff(grid) > 0)
    assert np.all(grid == np.round(grid))  # whole steps: milestones and stop step are steps
    assert np.isin(steps, grid).all()  # every logged step is a grid step
    # the backtest scores at logged steps exactly (no interpolation between grid steps)
    rest = steps[steps > 1e5]
    y = runset["reward"].sel(run="r0", step=rest.astype(int)).values
    point = fc["point_forecast"].sel({STEP_DIM: rest}).values
    assert fc.attrs["backtest_steps"] == rest.size
    assert fc.attrs["backtest_rmse"] == pytest.approx(np.sqrt(np.mean((y - point) ** 2)), rel=1e-12)
    assert np.isfinite(fc.attrs["stop_step"]) and fc.attrs["stop_step"] in grid
    med = fc["time_to_fraction_median"].values
    assert np.isfinite(med).all() and np.all(np.diff(med) >= 0)  # medians of grid steps


def test_how_far_a_forecast_looks_does_not_change_what_it_says_of_the_logged_steps():
    # `forecast runs.nc --run long --upto 60 --horizon 1000000` on 400-step runs said the reward
    # would stay near 0.48 (backtest RMSE 0.35, 90% coverage 0.05; 0.03 and 0.99 with the default
    # horizon), with no warning: the other runs were fitted under a weak prior scaled to the
    # horizon asked for (a rise over 1e6 steps, onset at 2e4), and their fits stayed there
    from bayes_grpo.predict.forecast import forecast_in_runset

    runset, steps = _coarse_runset(200.0, 1.0)
    rest = steps[steps > 60]
    near, far = (
        forecast_in_runset(runset, "r0", 60, horizon=h, likelihood="iid", n_draws=100, seed=1)
        for h in (200.0, 20_000.0)
    )
    np.testing.assert_allclose(
        far["mean_mean"].sel({STEP_DIM: rest}), near["mean_mean"].sel({STEP_DIM: rest}), rtol=1e-9
    )
    assert far.attrs["backtest_rmse"] == pytest.approx(near.attrs["backtest_rmse"], rel=1e-9)
    assert near.attrs["backtest_rmse"] < 0.03


def test_a_forecast_of_a_log_that_starts_late_says_so_as_fit_does():
    # a log resumed at step 1000 (or whose step counter did not start at 0) was forecast as a
    # curve that began at step 0, and the only warning was an unreliable importance sample
    # (90% coverage 0.09 of its own later steps); fit and compare name such runs
    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.runset import make_runset

    runset, steps = _coarse_runset(100.0, 1.0)
    late = make_runset(
        {r: runset["reward"].sel(run=r).to_series().set_axis(steps.astype(int) + 1000).to_frame("reward") for r in ("r0", "r1", "r2")},
        {},
    )
    kw = dict(likelihood="iid", n_draws=100)
    told = attr_warnings(forecast_in_runset(late, "r0", 1040, **kw))
    assert any("run 'r0' starts late (first logged step 1000, last seen 1040)" in w for w in told), told
    assert not any("starts late" in w for w in attr_warnings(forecast_in_runset(runset, "r0", 40, **kw)))


def test_an_ordinary_forecast_is_still_at_every_step_so_its_numbers_are_unchanged():
    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.predict.forecast import forecast_grid, forecast_in_runset

    runset = simulate_sde_runset(n_steps=300, measurement_sd=0.02, random_seed=3, n_seeds=1)
    run = str(runset["run"].values[0])
    fc = forecast_in_runset(runset, run, 120, likelihood="iid", n_draws=100, seed=1)
    # the grid is the only input the bounded grid changes: same grid, same draws, same numbers
    # (a run of 300 steps logs steps 0 .. 299, as simulate bandit's)
    np.testing.assert_array_equal(fc[STEP_DIM].values, np.arange(0.0, 300.0))
    np.testing.assert_array_equal(forecast_grid(300.0, [0.0, 7.0, 299.0]), np.arange(0.0, 301.0))
    np.testing.assert_array_equal(forecast_grid(2000.0), np.arange(0.0, 2001.0))
    np.testing.assert_array_equal(forecast_grid(77.5), np.arange(0.0, 77.5 + 1.0))  # as before
    assert forecast_grid(2001.0).size == 2001


def test_the_damping_profile_is_the_kalman_likelihood_maximised_over_plateau_start_and_noise():
    """``damping_profile`` puts p*, R0 (generalised least squares) and sigma (closed form)
    at their maximum for each (zeta, w0, rho): the same value a numerical maximisation of
    ``log_lik`` over them reaches."""
    from scipy.optimize import minimize

    from bayes_grpo.predict import statespace

    rng = np.random.default_rng(0)
    t = np.arange(1.0, 101.0)
    y = 0.7 - 0.4 * np.exp(-t / 30.0) + rng.normal(0.0, 0.05, t.size)
    for zeta, w0, rho in [(0.3, 0.05, 0.3), (2.0, 0.1, 0.8), (1.0, 0.02, 0.05)]:
        prof = statespace.damping_profile(t, y, zetas=[zeta], w0s=[w0], rhos=[rho])

        def nll(th, zeta=zeta, w0=w0, rho=rho):
            row = [th[0], th[1], np.log(w0), np.log(zeta), th[2], -50.0, np.log(rho / (1 - rho))]
            return -statespace.log_lik(np.array([row]), t, y)[0]

        best = minimize(
            nll,
            [0.7, 0.3, np.log(0.05)],
            method="Nelder-Mead",
            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000},
        )
        assert prof["loglik"].item() == pytest.approx(-best.fun, abs=1e-8)
        assert prof["plateau"].item() == pytest.approx(best.x[0], abs=1e-6)
        assert prof["initial_reward"].item() == pytest.approx(best.x[1], abs=1e-6)


@pytest.mark.parametrize(("factor", "offset"), [(1e-9, 0.0), (1e4, 0.0), (1e-3, 1000.0), (0.01, -1000.0)])
def test_the_damping_profile_and_its_damping_test_do_not_depend_on_the_reward_units(factor, offset):
    # the profile's sums of squares expanded the quadratic in (p*, R0): on a reward of 1000
    # plus changes of 1e-3 they cancelled to noise, and diagnose's state-space damping test
    # read zeta 0.48 and process-noise share 0.001 for the 0.38 and 0.08 of the same run
    from bayes_grpo.diagnostics._fits import state_space_damping_test
    from bayes_grpo.dynamics.trajectory import reward_trajectory
    from bayes_grpo.predict import statespace

    t = np.arange(200.0)
    y = reward_trajectory(t, 1.0, 2 * 0.4 * 0.05, 0.05**2, 0.8, 0.2)
    y = y + 0.02 * np.random.default_rng(0).standard_normal(t.size)
    moved = factor * y + offset
    grid = dict(zetas=[0.2, 0.4, 1.0], w0s=[0.03, 0.05], rhos=[0.05, 0.5])
    prof, prof_moved = statespace.damping_profile(t, y, **grid), statespace.damping_profile(t, moved, **grid)
    # the density of the moved rewards is the density of y over |factor| per point
    np.testing.assert_allclose(prof_moved["loglik"], prof["loglik"] - t.size * np.log(abs(factor)), atol=1e-6)
    for level in ("plateau", "initial_reward"):
        np.testing.assert_allclose((prof_moved[level] - offset) / factor, prof[level], atol=1e-8)
    test, test_moved = state_space_damping_test(t, y, 0.3), state_space_damping_test(t, moved, 0.3)
    assert test_moved == pytest.approx(test, rel=1e-6, abs=1e-9)


def test_a_reward_at_its_bound_is_censored_not_a_density():
    """At a reward bound the i.i.d. likelihood is the probability of the latent reward beyond
    it; without process noise the Kalman likelihood is the same (its state never updates)."""
    from scipy import stats as st

    from bayes_grpo.predict import statespace
    from bayes_grpo.predict.forecast import _log_lik, noise_shape

    t = np.arange(1.0, 31.0)
    y = np.zeros(t.size)
    y[20:] = [0.03, 0.0, 0.06, 0.09, 0.0, 0.12, 0.1, 0.15, 0.12, 0.2]
    u = np.array([[0.6, 0.01, np.log(0.05), np.log(1.2), np.log(0.05), np.log(15.0)]])
    bounds = (0.0, 1.0)
    mu = mean_curve(u, t, bounds)[0]
    sd = 0.05 * np.sqrt(noise_shape(mu, bounds))
    expected = np.where(y == 0.0, st.norm.logcdf((0.0 - mu) / sd), st.norm.logpdf(y, mu, sd)).sum()
    assert _log_lik(u, t, y, bounds)[0] == pytest.approx(expected, rel=1e-10)
    no_process = np.append(u[0], -30.0)[None, :]  # logit rho = -30: no process noise
    assert statespace.log_lik(no_process, t, y, bounds)[0] == pytest.approx(expected, rel=1e-8)


def test_a_prefix_stuck_at_zero_gives_a_usable_forecast_within_the_bounds():
    """A hard task logs exact zeros before its first success. Read as densities, the zeros
    drove the noise sd to 0: importance sampling collapsed (Pareto k 2-4, ESS 1-7) and a
    tiny-TRL run's band was 1e-4 wide around a reward of 2.98 for a reward in [0, 1]."""
    rng = np.random.default_rng(4)
    t = np.arange(0.0, 200.0)
    truth = np.where(t < 90, 0.0, 0.5 * (1 - np.exp(-(t - 90) / 30.0)))
    runs = []
    for _ in range(6):
        onset = rng.uniform(40, 120)
        p = np.where(t < onset, 0.0, 0.5 * (1 - np.exp(-(t - onset) / 30.0)))
        runs.append((t, rng.binomial(32, p) / 32))
    prior = prior_from_runs(runs, reward_bounds=(0.0, 1.0))
    y = rng.binomial(32, truth) / 32
    n = 40  # all zeros
    assert np.all(y[:n] == 0.0)
    ds = forecast_run(t[:n], y[:n], t[n:], prior=prior, rng=0, reward_bounds=(0.0, 1.0))
    assert ds.attrs["pareto_k"] < 0.7 and ds.attrs["ess"] > 50
    lo, hi = forecast_band(ds, t[n:], kind="obs")
    assert lo.min() >= 0.0 and hi.max() <= 1.0
    assert hi[-1] - lo[-1] > 0.2  # the run may still take off: the band says so


def test_a_success_rate_forecast_without_reward_bounds_whose_band_leaves_0_1_names_the_missing_bounds():
    # `forecast tiny_runs.nc --run g16_p8_lr0.001_k1_adamw_s0 --upto 14` (a success rate still
    # at 0) gave 90% bands from -0.16 to 1.18 and said nothing of --reward-bounds
    from bayes_grpo.predict.forecast import forecast_in_runset

    runset = _runs_with_a_solved_one(level=0.0)  # rates in [0, 1]; "solved" never solved: 0
    kw = dict(likelihood="iid", n_draws=200, seed=0)
    told = attr_warnings(forecast_in_runset(runset, "solved", 60, **kw))
    (note,) = [w for w in told if "no reward bounds were given" in w]
    assert "outside [0, 1], where every reward of the run set lies" in note and "--reward-bounds 0 1" in note
    bounded = forecast_in_runset(runset, "solved", 60, reward_bounds=(0.0, 1.0), **kw)
    assert not any("no reward bounds" in w for w in attr_warnings(bounded))
    # a reward that is no rate (the run set logs values beyond 1): nothing to suggest
    scaled = runset.assign(reward=runset["reward"] * 10.0)
    assert not any("no reward bounds" in w for w in attr_warnings(forecast_in_runset(scaled, "solved", 60, **kw)))


def test_an_unreliable_importance_sample_says_the_regime_rests_on_a_few_draws(monkeypatch):
    """When importance sampling is flagged (Pareto k above the limit; here the limit is set
    below any k so that the flag is raised), the warning says that the bands and the regime
    probability rest on about ESS draws, so that a regime probability of 1.0 (the densely
    logged wandering runs a helper forecast: ESS 2-23) is not read as certainty."""
    import json

    from bayes_grpo.predict import forecast as fc

    monkeypatch.setattr(fc, "PARETO_K_WARN", -np.inf)
    monkeypatch.setattr(fc, "_metropolis_ensemble", lambda *a, **k: None)  # the refinement failing
    rng = np.random.default_rng(2)
    t = np.arange(0.0, 80.0)
    y = 0.3 - 0.2 * np.exp(-t / 15.0) + rng.normal(0.0, 0.02, t.size)
    ds = forecast_run(t[:40], y[:40], t[40:], rng=0)
    unreliable = [w for w in json.loads(ds.attrs["warnings"]) if "importance sampling unreliable" in w]
    assert unreliable and "the regime and its probability rest on about" in unreliable[0]


def test_an_importance_sample_resting_on_a_few_draws_is_refined_by_metropolis_chains(monkeypatch):
    # on a long prefix under the state-space likelihood the posterior is concentrated far from
    # Gaussian: Pareto k rose from 0.5 at 10 steps to 2.1 at 120 on a simulated run, the bands
    # resting on about 6 distinct draws (forecast QA helper), and the warning advised a longer
    # prefix, which made it worse. A Metropolis ensemble started from the weighted draws now
    # gives the draws. It must sample the same posterior: where importance sampling is reliable
    # (k < 0.7), the ensemble forced to run gives the same mean and sd of every coordinate
    from bayes_grpo.predict import forecast as fc

    rng = np.random.default_rng(2)
    t = np.arange(0.0, 80.0)
    y = 0.3 - 0.2 * np.exp(-t / 15.0) + rng.normal(0.0, 0.02, t.size)
    prior = fc.default_prior(t[:40], y[:40], horizon=80.0)
    plain = fc.fit_run(t[:40], y[:40], prior, n_draws=4000, rng=0, likelihood="iid")
    assert plain.pareto_k < 0.7 and plain.method.startswith("laplace")
    monkeypatch.setattr(fc, "PARETO_K_WARN", -np.inf)  # every importance sample "unreliable"
    refined = fc.fit_run(t[:40], y[:40], prior, n_draws=4000, rng=0, likelihood="iid")
    assert "metropolis" in refined.method and not refined.warnings
    assert np.isnan(refined.pareto_k)
    sd = plain.draws.std(axis=0)
    assert np.all(np.abs(refined.draws.mean(axis=0) - plain.draws.mean(axis=0)) < 0.2 * sd)
    np.testing.assert_allclose(refined.draws.std(axis=0), sd, rtol=0.25)


def test_a_run_in_progress_that_clips_its_way_through_the_updates_is_flagged_not_forecast_as_stable():
    # a softmax-bandit run at lr 6 (far past the stability threshold) was forecast as
    # "underdamped, no stop step" with nothing said: the forecast's law has zeta > 0 and
    # cannot draw an unstable run. Its prefix now goes through the instability diagnostic.
    import json

    from bayes_grpo.diagnostics.cases import bandit_case
    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.runset import concat_runsets

    runset = concat_runsets([bandit_case("bandit_large_lr"), bandit_case("bandit_healthy")])
    unstable = forecast_in_runset(
        runset, "bandit_large_lr/seed0", 90, likelihood="iid", n_draws=100, use_runs=False
    )
    found = json.loads(unstable.attrs["prefix_instability"])
    assert found["detected"] and any("sustained clipping" in s for s in found["signals"])
    assert any("instability diagnostic flags the steps up to 90" in w for w in attr_warnings(unstable))
    healthy = forecast_in_runset(
        runset, "bandit_healthy/seed0", 90, likelihood="iid", n_draws=100, use_runs=False
    )
    assert json.loads(healthy.attrs["prefix_instability"])["detected"] is False
    assert not any("instability" in w for w in attr_warnings(healthy))
    quiet = forecast_in_runset(
        runset, "bandit_large_lr/seed0", 90, likelihood="iid", n_draws=100, use_runs=False,
        check_instability=False,
    )
    assert "prefix_instability" not in quiet.attrs


def test_a_grad_norm_that_grows_with_the_take_off_does_not_make_a_forecast_warn():
    # a shipped tiny TRL run starts at zero reward: its groups carry no signal, so its grad
    # norm is small, and it grows 3x as the reward takes off. The diagnostic calls that growth
    # instability; for a forecast from step 90 it is the take-off itself, not a reason to doubt
    # the law.
    from pathlib import Path

    from bayes_grpo.predict.forecast import prefix_instability
    from bayes_grpo.runset.ingest import load_runs

    run_dir = Path(__file__).resolve().parents[1] / "data" / "tiny" / "g16_p8_lr0.001_k1_adamw_s0"
    if not run_dir.is_dir():
        pytest.skip("shipped tiny TRL runs not present")
    runset = load_runs(run_dir)
    (run_id,) = [str(r) for r in runset["run"].values]
    found = prefix_instability(runset, run_id, 90)
    assert "instability detected: growth of grad norm" in found["diagnostic"], found
    assert found["detected"] is False and found["signals"] == [] and found["onset_step"] is None
    # and it says so beside the diagnostic's sentence, which reads 'instability detected'
    assert len(found["set_aside"]) == 1
    assert found["set_aside"][0].startswith("growth of grad norm (")
    assert found["set_aside"][0].endswith(": confounded with the reward's take-off")


def test_a_bounded_reward_forecast_keeps_its_plateau_inside_the_bounds():
    # a forecast with --reward-bounds 0 1 gave a final mean reward of 2.18 (90% interval
    # [1.66, 2.75]): the bounds shaped the noise only, not the plateau
    from bayes_grpo.predict.forecast import ForecastError, RunPosterior, forecast_from_posterior

    rng = np.random.default_rng(0)
    n = 400
    u = np.column_stack(
        [
            np.where(np.arange(n) % 2 == 0, 0.8, 1.9) + 0.02 * rng.standard_normal(n),  # half above 1
            np.full(n, 0.1),
            np.log(np.full(n, 0.05)),
            np.log(np.full(n, 1.2)),
            np.log(np.full(n, 0.05)),
            np.log(np.full(n, 1.0)),
        ]
    )

    def post(draws):
        return RunPosterior(
            draws=draws, mode=draws[0], cov=np.eye(6), pareto_k=0.1, ess=float(len(draws)), n_obs=20,
            log_post_mode=0.0, reward_bounds=(0.0, 1.0), t=np.arange(20.0), y=np.full(20, 0.1),
        )  # fmt: skip

    fc = forecast_from_posterior(post(u), np.arange(0.0, 300.0))
    assert float(fc["mean_mean"].isel({STEP_DIM: -1})) < 0.85
    assert any("outside the reward bounds [0, 1] and were left out" in w for w in attr_warnings(fc))
    with pytest.raises(ForecastError, match="every posterior draw puts the plateau outside"):
        forecast_from_posterior(post(u[1::2]), np.arange(0.0, 300.0))


def test_a_few_draws_left_out_of_a_bounded_forecast_are_not_called_0_percent():
    # `forecast four.nc --run g16_p8_lr0.001_k1_adamw_s0 --upto 60 --no-population
    # --reward-bounds 0 1` warned "0% of the posterior draws put the plateau outside the reward
    # bounds [0, 1] and were left out": a few of 1000 were, rounded to 0%
    from bayes_grpo.predict.forecast import RunPosterior, forecast_from_posterior

    rng = np.random.default_rng(0)
    n = 1000
    u = np.tile([0.8, 0.1, np.log(0.05), np.log(1.2), np.log(0.05), np.log(1.0)], (n, 1))
    u[:, 0] += 0.02 * rng.standard_normal(n)
    u[:3, 0] = 1.3  # 3 draws of 1000 above the bound
    post = RunPosterior(
        draws=u, mode=u[0], cov=np.eye(6), pareto_k=0.1, ess=float(n), n_obs=20, log_post_mode=0.0,
        reward_bounds=(0.0, 1.0), t=np.arange(20.0), y=np.full(20, 0.1),
    )  # fmt: skip
    fc = forecast_from_posterior(post, np.arange(0.0, 100.0))
    (note,) = [w for w in attr_warnings(fc) if "outside the reward bounds [0, 1] and were left out" in w]
    assert note.startswith("3 of the 1000 posterior draws (0.3%) put the plateau outside"), note
    assert int(fc.attrs["n_draws"]) == n - 3


def test_a_posterior_whose_plateau_lies_outside_the_reward_bounds_says_where_it_lies():
    # `forecast tiny.nc --run g16_p8_lr0.0005_k1_adamw_s0 --upto 60 --prior models/tiny.nc
    # --reward-bounds 0 1` (that fit's plateau 3.45 +- 0.32 for a success rate) was refused with
    # "check the bounds, or forecast without them", the bounds being right and the prior not
    from bayes_grpo.predict.forecast import RunPosterior, forecast_from_posterior

    rng = np.random.default_rng(0)
    u = np.tile([3.45, 0.0, np.log(0.01), np.log(2.0), np.log(0.05), np.log(1.0)], (200, 1))
    u[:, 0] += 0.3 * rng.standard_normal(200)
    post = RunPosterior(
        draws=u, mode=u[0], cov=np.eye(6), pareto_k=0.1, ess=200.0, n_obs=20, log_post_mode=0.0,
        reward_bounds=(0.0, 1.0), t=np.arange(20.0), y=np.zeros(20),
    )  # fmt: skip
    with pytest.raises(ForecastError, match=r"\(90% of them between [23]\.\d+ and [34]\.\d+\).*the prior's plateau"):
        forecast_from_posterior(post, np.arange(0.0, 100.0))


def test_the_other_runs_of_an_llm_are_carried_to_the_forecast_runs_learning_rate(tmp_path, capsys):
    # runs of one LLM at lr 1e-3 and a run at lr 4e-3: the prior from the lr-1e-3 runs took
    # their rise rate as it was, so a run that rises twice as fast (w0 ~ sqrt(lr)) started
    # from a prior centred on the slow runs
    from bayes_grpo.dynamics.coefficients import (
        coefficients_from_hyperparameters,
        natural_frequency,
    )
    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.predict.forecast import population_prior_for_run, retime_settings

    runset = simulate_sde_runset(
        models={"llm": {"stiffness": 40.0, "plateau": 0.8, "initial_reward": 0.2, "noise_d": 1e-7}},
        group_sizes=(8,), learning_rates=(1e-3, 4e-3), k_refs=(1,), n_seeds=3, n_steps=300,
        measurement_sd=0.01, random_seed=0,
    )  # fmt: skip
    fast = [str(r) for r in runset["run"].values if float(runset["learning_rate"].sel(run=r)) == 4e-3]
    m, _, k = coefficients_from_hyperparameters(4e-3, 40.0, 0.9, 1, "ema")
    true_log_w0 = float(np.log(natural_frequency(m, k)))
    carried, _ = population_prior_for_run(runset, fast[0], same_model_only=True)
    as_logged, _ = population_prior_for_run(runset, fast[0], same_model_only=True, retime=False)
    assert "3 re-timed to this run's hyperparameters" in carried.source
    assert "re-timed" not in as_logged.source
    # every component now sits at the fast run's rise rate; as logged, the slow runs' do not
    assert np.abs(carried.means[:, 2] - true_log_w0).max() < 0.15
    assert np.abs(as_logged.means[:, 2] - true_log_w0).max() > 0.5
    # the command line does the same, and --no-retime takes the runs as logged
    import json

    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    path = save_runset(runset, tmp_path / "runs.nc")
    for flags, said in (([], True), (["--no-retime"], False)):
        argv = ["forecast", str(path), "--run", fast[0], "--upto", "60", "--likelihood", "iid"]
        assert main([*argv, "--same-model-only", "--json", *flags]) == 0
        prior = json.loads(capsys.readouterr().out)["prior"]
        assert ("3 re-timed to this run's hyperparameters" in prior) is said
    # which runs can be carried: a known learning rate in both, the rest known in both or neither
    coords = {"learning_rate": 1e-3, "momentum": 0.9, "k_ref": 1.0, "momentum_convention": "ema"}
    assert retime_settings(coords, coords) is None  # same setting: nothing to do
    assert retime_settings(dict(coords, learning_rate=np.nan), coords) is None
    assert retime_settings(dict(coords, k_ref=np.nan), dict(coords, learning_rate=2e-3)) is None
    sgd = dict(coords, learning_rate=0.03, momentum_convention="heavy_ball")
    assert retime_settings(coords, sgd) is None  # AdamW and SGD: other optimizers
    unknown = dict(coords, momentum=np.nan, k_ref=np.nan, momentum_convention="")
    src, tgt = retime_settings(unknown, dict(unknown, learning_rate=2e-3))
    assert (src["momentum"], src["k_ref"], tgt["learning_rate"]) == (0.0, 0.0, 2e-3)


def test_a_posterior_prior_for_an_llm_the_fit_lacks_says_so_and_a_phenomenological_fit_refuses():
    # `forecast tiny.nc --run R --prior bandit.nc` labelled the prior "model=tiny-gpt2" as if the
    # fit knew that LLM (it was the population level); `--prior pheno.nc` (a phenomenological fit
    # of one other LLM) took that LLM's plateau, R0 and noise and said "used the population level"
    import types

    import pandas as pd

    from bayes_grpo.predict.forecast import ForecastError, population_prior_for_run
    from bayes_grpo.runset import make_runset

    known = _phenomenological_draws()
    known.attrs.update({"model": "m", "new_model": "False"})
    new = known.copy()
    for name in ("plateau", "initial_reward", "sigma"):
        new[name] = new[name] * np.nan
    new.attrs.update({"model": "other", "new_model": "True"})

    class Fitted:
        model_config: dict = {}
        data = types.SimpleNamespace(models=["m"])

        def __init__(self, parameterisation):
            self.parameterisation = parameterisation

        def coefficient_draws(self, *, model=None, **kwargs):
            if model not in (None, "m"):
                if self.parameterisation == "phenomenological":
                    raise ValueError("the phenomenological model has no population level")
                return new
            return known  # model=None: the fit's only LLM, as coefficient_draws does

    steps = np.arange(40)
    curve = pd.DataFrame({"reward": 0.8 - 0.6 * np.exp(-steps / 8.0)}, index=steps)
    meta = {"model": "other", "learning_rate": 0.01, "momentum": 0.0, "k_ref": 1}
    runset = make_runset({"r0": curve}, {"r0": meta})
    prefix = (steps[:15].astype(float), curve["reward"].to_numpy()[:15])
    prior, note = population_prior_for_run(runset, "r0", posterior=Fitted("mechanistic"), prefix=prefix)
    assert "model=other not in the fit, population level" in prior.source
    assert "'other' is not in the fit (its LLMs: ['m'])" in note
    with pytest.raises(ForecastError, match=r"run 'r0' is of LLM 'other', for which the phenomenological fit"):
        population_prior_for_run(runset, "r0", posterior=Fitted("phenomenological"), prefix=prefix)

    # a saved fit names its file in its own refusal (GRPODynamicsModel.coefficient_draws): the
    # error named it twice, "fit phen.nc has no prior (phen.nc: the phenomenological model ...)"
    from pathlib import Path

    class Saved(Fitted):
        source_path = Path("models") / "phen.nc"

        def coefficient_draws(self, **kwargs):
            try:
                return super().coefficient_draws(**kwargs)
            except ValueError as exc:
                raise ValueError(f"{self.source_path}: {exc}") from None

    for given in (None, str(Path("models") / "phen.nc")):
        with pytest.raises(ForecastError) as info:
            population_prior_for_run(
                runset, "r0", posterior=Saved("phenomenological"), prefix=prefix, posterior_label=given
            )
        said = str(info.value)
        assert said.count("phen.nc") == 1, said
        assert f"phenomenological fit {Path('models') / 'phen.nc'} has no prior (the phenomenological model has no population level)" in said


def test_a_prior_on_another_reward_scale_is_said_to_contradict_the_run():
    # `forecast runs_x100.nc --run R --upto 100 --prior models/tiny.nc` (a fit on a 0-1 reward, the
    # run logged on 0-100): final mean reward 0.06 against a run at 90, backtest RMSE 81, coverage
    # 0.005, Pareto k 0.005 and no warning; the prefix only moved the noise sd
    rng = np.random.default_rng(0)
    pop = _population(rng, 40)
    prior = prior_from_draws(pop, source="fit on a 0-1 reward")
    u = pop[0].copy()
    u[:2] *= 100.0  # the same run logged as a percentage
    u[4] += np.log(100.0)
    _, y = _run(u, rng)
    kw = dict(prior=prior, n_draws=200, likelihood="iid", rng=0)
    told = attr_warnings(forecast_run(STEPS[:80], y[:80], STEPS, **kw))
    assert any("contradicts this run" in w and "fit on a 0-1 reward" in w for w in told)
    _, y_same = _run(pop[1], rng)  # a run of the prior's own population: nothing to say
    told = attr_warnings(forecast_run(STEPS[:80], y_same[:80], STEPS, **kw))
    assert not any("contradicts" in w for w in told)
    fc = RunForecaster(prior, STEPS, n_draws=200, likelihood="iid")
    fc.update(STEPS[:80], y[:80])
    assert any("contradicts this run" in w for w in attr_warnings(fc.forecast()))


def test_a_step_without_a_reward_in_the_prefix_is_left_out_not_an_error():
    # forecast_run(t, y, ...) and RunForecaster.update(t, y) with one NaN reward (a step not
    # logged) raised "prior from default (weak, scaled to the prefix) has non-finite moments"
    rng = np.random.default_rng(3)
    u = np.array([0.8, 0.2, np.log(0.04), np.log(0.8), np.log(0.02)])
    _, y = _run(u, rng)
    t, y = STEPS[:61].copy(), y[:61].copy()
    y[[20, 60]] = np.nan  # one inside the prefix, one at its last step
    kw = dict(n_draws=200, likelihood="iid", rng=0)
    with_gaps = forecast_run(t, y, STEPS, **kw)
    ok = np.isfinite(y)
    without = forecast_run(t[ok], y[ok], STEPS, **kw)
    np.testing.assert_array_equal(with_gaps["obs_hdi"].values, without["obs_hdi"].values)
    assert with_gaps.attrs["upto_step"] == without.attrs["upto_step"] == 59.0
    fc = RunForecaster(None, STEPS, n_draws=200, likelihood="iid")
    fc.update(t, y)
    assert fc.forecast().attrs["upto_step"] == 59.0


def test_a_nan_reward_is_said_to_be_left_out_and_never_erases_a_reward_the_forecaster_was_given():
    # RunForecaster.update(steps, rewards) with a NaN at steps 10 and 39, given with their
    # rewards by the update before, overwrote them: the forecast went on from step 38 without
    # steps 10 and 39 and said nothing; forecast_run of the same entries kept both. Neither said
    # that a step given with a NaN reward was left out
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 40.0)
    y = 0.7 - 0.5 * np.exp(-t / 15.0) + 0.02 * rng.standard_normal(t.size)
    gaps = y.copy()
    gaps[[10, 39]] = np.nan
    kw = dict(n_draws=200, likelihood="iid")
    fc = RunForecaster(None, STEPS, seed=0, **kw)
    fc.update(t, y)
    first = fc.forecast()
    fc.update(t, gaps)  # the same steps again, two rewards not (yet) logged this time
    again = fc.forecast()
    assert again.attrs["upto_step"] == 39.0
    np.testing.assert_array_equal(again["obs_hdi"].values, first["obs_hdi"].values)
    assert not any("without a finite reward" in w for w in attr_warnings(again))
    told = attr_warnings(forecast_run(t, gaps, STEPS, rng=0, **kw))
    assert any(
        "2 steps given without a finite reward (NaN: not logged) are left out of the forecast (steps 10, 39)" in w
        for w in told
    ), told
    fresh = RunForecaster(None, STEPS, seed=0, **kw)
    fresh.update(t, gaps)
    assert attr_warnings(fresh.forecast()) == told  # the forecaster says it as forecast_run does
    with pytest.raises(ForecastError, match=r"1 reward at a step that is not finite \(e.g. reward 0.5 at position 3"):
        forecast_run(np.r_[t[:3], np.nan], np.r_[y[:3], 0.5], STEPS, rng=0, **kw)


@pytest.mark.parametrize("likelihood", ["iid", "state_space"])
def test_the_forecaster_and_forecast_run_give_one_forecast_for_one_prefix_and_seed(likelihood):
    # RunForecaster seeded its fit with seed + the number of steps and its draws with seed, so
    # its bands differed from forecast_run's (rng=seed) for the same prefix: by 0.005 (iid) and
    # 0.014 (state space) in the mean band; and it left out the few-rewards note
    rng = np.random.default_rng(11)
    t = np.arange(0.0, 60.0)
    y = 0.7 - 0.5 * np.exp(-t / 15.0) * np.cos(t / 12.0) + 0.02 * rng.standard_normal(t.size)
    kw = dict(n_draws=200, likelihood=likelihood)
    direct = forecast_run(t, y, STEPS, rng=3, **kw)
    fc = RunForecaster(None, STEPS, seed=3, **kw)
    fc.update(t, y)
    once = fc.forecast()
    for name in ("mean_hdi", "obs_hdi", "param_plateau"):
        np.testing.assert_array_equal(once[name].values, direct[name].values, err_msg=name)
    assert once.attrs["stop_step"] == direct.attrs["stop_step"]
    np.testing.assert_array_equal(fc.forecast()["mean_hdi"].values, direct["mean_hdi"].values)  # again: alike
    # built up in two updates (warm-started from the first mode): the same up to the optimiser
    fc2 = RunForecaster(None, STEPS, seed=3, **kw)
    fc2.update(t[:30], y[:30])
    fc2.update(t[30:], y[30:])
    np.testing.assert_allclose(fc2.forecast()["mean_hdi"].values, direct["mean_hdi"].values, atol=1e-6)
    few = RunForecaster(None, STEPS, seed=3, **kw)
    few.update(t[:6], y[:6])
    assert attr_warnings(few.forecast()) == attr_warnings(forecast_run(t[:6], y[:6], STEPS, rng=3, **kw))
    assert any("only 6 logged rewards" in w for w in attr_warnings(few.forecast()))


def test_a_prefix_given_out_of_step_order_is_forecast_as_the_forecaster_forecasts_it():
    # the prefix went into the model by hand in six places (forecast_run, RunForecaster.update,
    # fit_run, default_prior, prior_from_runs, prior_conflict_note), each masking the NaN steps,
    # and only the forecaster sorted them: forecast_run of the same 60 steps shuffled gave the
    # Kalman filter negative intervals (final mean 0.61 against 0.82, no stop step against 173)
    rng = np.random.default_rng(1)
    u = np.array([0.8, 0.1, np.log(0.05), np.log(0.7), np.log(0.03), np.log(2.0)])
    t = np.arange(0.0, 60.0)
    y = mean_curve(u[None], t)[0] + 0.03 * rng.standard_normal(t.size)
    order = rng.permutation(t.size)
    kw = dict(n_draws=200, likelihood="state_space")
    in_order = forecast_run(t, y, STEPS, rng=0, **kw)
    shuffled = forecast_run(t[order], y[order], STEPS, rng=0, **kw)
    fc = RunForecaster(None, STEPS, seed=0, **kw)
    fc.update(t[order], y[order])
    for name in ("mean_hdi", "obs_hdi", "param_plateau"):
        np.testing.assert_array_equal(shuffled[name].values, in_order[name].values, err_msg=name)
        np.testing.assert_array_equal(fc.forecast()[name].values, in_order[name].values, err_msg=name)


def test_a_step_given_twice_keeps_its_last_reward_and_says_so():
    # forecast_run counted a step given twice (a log concatenated with its resumed run) as two
    # observations, one of them at an interval of 0 steps; the forecaster kept the last reward
    rng = np.random.default_rng(2)
    t = np.arange(0.0, 40.0)
    y = 0.7 - 0.5 * np.exp(-t / 15.0) + 0.02 * rng.standard_normal(t.size)
    kw = dict(n_draws=200, likelihood="iid", rng=0)
    twice = forecast_run(np.r_[t, t[-5:]], np.r_[y[:-5], y[-5:] - 1.0, y[-5:]], STEPS, **kw)
    once = forecast_run(t, y, STEPS, **kw)
    np.testing.assert_array_equal(twice["obs_hdi"].values, once["obs_hdi"].values)
    assert any("5 steps given more than once" in w for w in attr_warnings(twice))
    # a sentence naming the steps (and the run, where the caller names it), not "(a resumed run?)"
    (note,) = [w for w in attr_warnings(twice) if "more than once" in w]
    assert note.startswith("5 steps given more than once (steps 35, 36, 37, 38, 39; e.g. a log followed by its resumed run"), note
    assert "?" not in note and note.endswith("the forecast kept the last reward given for each, as ingest does"), note
    named = forecast_run(np.r_[t, t[-1:]], np.r_[y, y[-1:]], STEPS, attrs={"run": "g4_s0"}, **kw)
    (note,) = [w for w in attr_warnings(named) if "more than once" in w]
    assert note.startswith("run 'g4_s0': 1 step given more than once (step 39; "), note
    thrice = forecast_run(np.r_[t, [39.0, 39.0]], np.r_[y, [0.1, y[-1]]], STEPS, **kw)
    assert any(w.startswith("1 step given more than once (step 39; ") for w in attr_warnings(thrice))  # one step, twice repeated
    with pytest.raises(ForecastError, match="40 steps and 39 rewards"):
        forecast_run(t, y[:-1], STEPS, **kw)
    with pytest.raises(ForecastError, match="40 steps and 39 rewards"):  # zip dropped the last step
        RunForecaster(None, STEPS, n_draws=200, likelihood="iid").update(t, y[:-1])


def test_a_count_of_one_in_a_forecast_message_is_said_in_the_singular():
    # `forecast runs.nc --run r0 --upto 0` said "run 'r0' has 1 rewards up to step 0", and the
    # forecast's other counts ("1 step(s) given more than once", "1 steps and 2 rewards",
    # "fitted to 1 rewards", "1 other runs") were as careless of their number
    import pandas as pd

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.runset import make_runset

    steps = np.arange(40.0)
    reward = 0.8 - 0.6 * np.exp(-steps / 10.0) + 0.01 * np.random.default_rng(0).normal(size=40)
    runset = make_runset({"r": pd.DataFrame({"reward": reward}, index=steps.astype(int))}, {})
    with pytest.raises(ForecastError, match=r"run 'r' has 1 reward up to step 0; need at least 3"):
        forecast_in_runset(runset, "r", 0, likelihood="iid", n_draws=100, seed=0)
    with pytest.raises(ForecastError, match=r"run 'r' has 2 rewards up to step 1; need"):
        forecast_in_runset(runset, "r", 1, likelihood="iid", n_draws=100, seed=0)
    with pytest.raises(ForecastError, match=r"^1 step and 2 rewards: one reward per step"):
        forecast_run([0.0], [0.1, 0.2], STEPS)
    kw = dict(n_draws=100, likelihood="iid", rng=0)
    once = forecast_run(np.r_[steps, 39.0], np.r_[reward, reward[-1]], STEPS, **kw)
    assert any(w.startswith("1 step given more than once") for w in attr_warnings(once)), attr_warnings(once)
    # a run still at 0 under the weak prior: importance sampling rests on one draw ("about 1
    # distinct draws")
    flat = forecast_run(np.arange(1.0, 15.0), np.zeros(14), np.arange(0.0, 301.0), **kw)
    (unreliable,) = [w for w in attr_warnings(flat) if "importance sampling unreliable" in w]
    assert "rest on about 1 distinct draw (" in unreliable, unreliable


def test_a_calibration_from_a_posterior_fitted_to_the_backtested_steps_says_its_band_scale_is_in_sample():
    # `forecast runs.nc --run R --upto U --prior fit.nc --calibrate`, fit.nc fitted to the other
    # runs' steps after U: their backtests score the fit on its own data and set the band scale,
    # and nothing said so (only the run's own in-sample backtest was named)
    from bayes_grpo.predict.forecast import forecast_in_runset

    runset, _ = _coarse_runset(60.0, 1.0)
    kw = dict(likelihood="iid", n_draws=100, calibrate=True)
    told = attr_warnings(forecast_in_runset(runset, "r0", 20, posterior=_FittedTo(runset.sel(run=["r0", "r2"])), **kw))
    assert any("1 of the 2 calibration runs (r2)" in w and "band scale may come out too small" in w for w in told)
    prefix_fit = _FittedTo(runset.where(runset["step"] <= 20))
    told = attr_warnings(forecast_in_runset(runset, "r0", 20, posterior=prefix_fit, **kw))
    assert not any("calibration runs" in w for w in told)


def test_a_phenomenological_prior_for_a_run_at_another_setting_says_it_carries_the_dynamics_over_unchanged():
    # its zeta and w0 are the fitted runs' own (no learning rate in the form): a run at 4x their
    # learning rate was forecast with their slow rise and nothing said so (forecast QA helper)
    from bayes_grpo.predict.forecast import forecast_in_runset

    runset, _ = _coarse_runset(60.0, 1.0)
    runset = runset.assign_coords(learning_rate=("run", [4e-3, 1e-3, 1e-3]), k_ref=("run", [1.0, 1.0, 1.0]))
    fit_of_others = _FittedTo(runset.sel(run=["r1", "r2"]))
    note = forecast_in_runset(runset, "r0", 20, posterior=fit_of_others, likelihood="iid", n_draws=100).attrs["prior_note"]
    assert "this run's learning_rate 0.004 (fitted runs: 0.001)" in note and "carries their dynamics over unchanged" in note
    same = forecast_in_runset(runset, "r1", 20, posterior=fit_of_others, likelihood="iid", n_draws=100)
    assert "carries their dynamics" not in same.attrs.get("prior_note", "")


def test_a_posterior_prior_of_an_llm_fitted_on_adam_and_sgd_runs_repeats_the_fits_note():
    # the fit's one curvature K of an LLM with Adam and SGD runs became a forecast's prior with
    # no word (predict repeats the fit's note; forecast --prior did not)
    from pathlib import Path

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.prepare import prepare_data
    from bayes_grpo.predict.forecast import forecast_in_runset

    fitted = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    runs = [str(r) for r in fitted.runset["run"].values]
    kw = dict(posterior=fitted, likelihood="iid", n_draws=100)
    assert "two optimizers" not in forecast_in_runset(fitted.runset, runs[1], 40, **kw).attrs.get("prior_note", "")
    conv = np.array(["ema"] + ["heavy_ball"] * (len(runs) - 1), dtype=object)
    fitted.runset = fitted.runset.assign_coords(momentum_convention=("run", conv))
    fitted.data = prepare_data(fitted.runset, fitted.model_config, fitted.parameterisation, fitted.likelihood)
    note = forecast_in_runset(fitted.runset, runs[1], 40, **kw).attrs["prior_note"]
    assert "has runs of two optimizers" in note and f"(Adam) ['{runs[0]}']" in note


def test_cli_forecast_refuses_run_based_prior_flags_where_no_run_based_prior_is_built(tmp_path, capsys):
    # `forecast runs.nc --run r --upto 120 --prior models/tiny.nc --no-population` (or
    # --same-model-only, --no-retime) forecast from the fit's posterior as without them, and
    # `--no-population --same-model-only` from the weak prior: the flags were dropped unsaid
    from pathlib import Path

    import pandas as pd

    from bayes_grpo.cli import main
    from bayes_grpo.runset import make_runset, save_runset

    steps = np.arange(40)
    reward = 0.8 - 0.6 * np.exp(-steps / 10.0)
    runs = make_runset({"r": pd.DataFrame({"reward": reward}, index=steps)}, {})
    path = str(save_runset(runs, tmp_path / "runs.nc"))
    prior = str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    argv = ["forecast", path, "--run", "r", "--upto", "20", "--likelihood", "iid"]
    for flags, named, why in (
        (["--prior", prior, "--no-population"], "--no-population shapes", f"with --prior {prior}"),
        (["--prior", prior, "--same-model-only", "--no-retime"], "--same-model-only --no-retime shape", "--prior"),
        (["--no-population", "--no-retime"], "--no-retime shapes", "with --no-population no run-based prior"),
    ):
        assert main([*argv, *flags]) == 2
        err = capsys.readouterr().err
        assert named in err and why in err and "drop one or the other" in err and "Traceback" not in err


@pytest.mark.parametrize("likelihood", ["state_space", "iid"])
def test_a_reward_logged_on_0_to_10_is_forecast_as_the_same_reward_on_0_to_1(likelihood):
    """`forecast runs.nc --run r0 --upto 60` of runs whose reward is logged on a 0-10 scale gave
    another forecast than the same runs divided by 10 (QA flow on an SDE run set: 90% band of
    the logged reward at the last step 0.110 vs 0.119 wide, in 0-1 units, 0.078 at a 0-1000
    scale): the optimiser's steps, the Laplace covariance's conditioning and the run-based
    prior's clip of unidentified directions were in reward units, mixed with the unit-free
    dynamics. The fit now works in the rewards' own unit, so a forecast is the same forecast
    scaled."""
    from bayes_grpo.predict.forecast import forecast_in_runset

    base = _four_runs_of_one_llm()

    def forecast(scale):
        ds = base.copy()
        ds["reward"] = base["reward"] * scale
        return forecast_in_runset(ds, "r0", 40, likelihood=likelihood, n_draws=300, seed=0)

    one = forecast(1.0)
    for scale in (10.0, 100.0):
        scaled = forecast(scale)
        for name in ("mean_mean", "obs_hdi", "mean_hdi"):
            np.testing.assert_allclose(scaled[name].values / scale, one[name].values, rtol=1e-4, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(
            scaled.time_to_fraction_median.values, one.time_to_fraction_median.values
        )


@pytest.mark.parametrize("likelihood", ["state_space", "iid"])
def test_a_reward_logged_with_an_offset_is_forecast_as_the_same_reward_without_it(likelihood):
    """`forecast runs.nc --run r --upto 60` of runs whose reward is logged as 100 + the reward
    (a score with an offset; QA flow on a [-1, 1] run set) gave another forecast than the same
    runs without it: regime overdamped at 0.87 instead of underdamped at 0.45, stop step 112
    instead of 85, 90% band coverage of the rest of the run 3% instead of 33%. The rewards were
    fitted in the unit 100 (the power of ten of their size), where the prior's sd floor on the
    plateau and R0 is 0.1, a tenth of the rise. The fit now works from the rewards' own origin
    (forecast.reward_frame), so the forecast is the same forecast shifted."""
    from bayes_grpo.predict.forecast import forecast_in_runset

    base = _four_runs_of_one_llm()

    def forecast(offset):
        ds = base.copy()
        ds["reward"] = base["reward"] + offset
        return forecast_in_runset(ds, "r0", 40, likelihood=likelihood, n_draws=300, seed=0)

    one = forecast(0.0)
    for offset in (100.0, -1000.0):
        moved = forecast(offset)
        for name in ("mean_mean", "obs_hdi", "mean_hdi"):
            np.testing.assert_allclose(moved[name].values - offset, one[name].values, rtol=1e-4, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(moved.time_to_fraction_median.values, one.time_to_fraction_median.values)
        assert moved.attrs["regime"] == one.attrs["regime"]
    # rewards that span a good part of their size keep 0 as their origin (as they are logged)
    from bayes_grpo.predict.forecast import reward_frame

    assert reward_frame(np.array([0.05, 0.7])) == (0.0, 1.0)
    assert reward_frame(np.array([-0.5, 0.6])) == (0.0, 1.0)
    assert reward_frame(np.array([99.5, 100.6])) == (100.0, 1.0)


def test_a_posterior_prior_is_the_same_prior_for_a_reward_logged_on_0_to_10():
    """`forecast runs.nc --run r --prior fit.nc` builds its prior from the fit's draws of the run's
    plateau and R0 (reward units). Their sd was floored at 1e-3 in whatever unit the reward was
    logged in: a plateau pinned to sd 2e-4 on 0-1 was widened 5x, the same plateau on 0-10 (sd
    2e-3) kept as it was, so the two forecasts rested on different priors."""
    from bayes_grpo.predict.forecast import prior_from_draws

    rng = np.random.default_rng(0)
    u = np.column_stack(
        [
            rng.normal(0.69, 2e-4, 400),
            rng.normal(0.2, 5e-4, 400),
            rng.normal(np.log(0.05), 0.1, 400),
            rng.normal(np.log(0.8), 0.1, 400),
            rng.normal(np.log(0.03), 0.1, 400),
        ]
    )
    u10 = u.copy()
    u10[:, :2] *= 10.0
    u10[:, 4] += np.log(10.0)
    one, ten = prior_from_draws(u), prior_from_draws(u10)
    levels = np.array([10.0, 10.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(ten.mean, one.mean * levels + np.array([0, 0, 0, 0, np.log(10.0)]), rtol=1e-12)
    np.testing.assert_allclose(ten.cov, one.cov * np.outer(levels, levels), rtol=1e-9)


@pytest.mark.parametrize("likelihood", ["state_space", "iid"])
def test_a_constant_prefix_takes_its_noise_from_the_prior_not_zero(likelihood):
    """`forecast --run stuck --upto 100` of a run still at reward 0 (a success rate whose
    other runs took off at steps 20-40) gave a noise sd of 1e-6 and 90% bands of the logged
    reward 1e-5 wide, covering none of the run's later steps: a constant prefix shows no
    noise, and its likelihood grows without bound as the noise sd goes to 0. The noise is
    now the prior's (the other runs')."""
    import pandas as pd

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.predict.summary import band
    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(1)
    steps = np.arange(0, 200, 2)

    def run(onset):
        p = np.where(steps < onset, 0.0, 0.8 * (1 - np.exp(-(steps - onset) / 30.0)))
        noise = np.sqrt(p * (1 - p)) * 0.2 * rng.normal(size=steps.size)  # none at p = 0
        return pd.DataFrame({"reward": np.clip(p + noise, 0, 1)}, index=steps)

    curves = {f"r{i}": run(onset) for i, onset in enumerate((20, 30, 40))}
    curves["stuck"] = run(120)
    ds = make_runset(curves, {k: {"model": "m"} for k in curves})
    fc = forecast_in_runset(ds, "stuck", 100, likelihood=likelihood, n_draws=300)
    sigma = float(np.median(fc["param_sigma"].values))
    assert 0.01 < sigma < 0.3, sigma
    lo, hi = band(fc, kind="obs")
    assert float(hi[-1] - lo[-1]) > 0.05


def test_a_constant_prefix_without_a_prior_of_its_noise_says_its_bands_have_none():
    """`forecast --run stuck --upto 40 --no-population` of a run still at reward 0 gave 90%
    bands of the logged reward 4e-6 wide without a word: the weak prior's noise is the
    prefix's own, and a constant prefix has none."""
    from bayes_grpo.predict.forecast import forecast_run

    t = np.arange(0.0, 41.0)
    fc = forecast_run(t, np.zeros(t.size), np.arange(0.0, 101.0), n_draws=200, likelihood="iid")
    assert any("knows no noise either" in w for w in attr_warnings(fc)), attr_warnings(fc)
    noisy = np.random.default_rng(0).normal(0.0, 0.02, t.size)
    fc = forecast_run(t, noisy, np.arange(0.0, 101.0), n_draws=200, likelihood="iid")
    assert not any("knows no noise" in w for w in attr_warnings(fc))


def test_a_posterior_prior_at_a_setting_outside_the_fitted_runs_says_so():
    """`forecast tiny_runs.nc --run g16_p8_lr0.001_k8_adamw_s0 --upto 100 --prior models/tiny.nc`
    (K_ref 8; the fit's runs have K_ref 1 and 2) said nothing of it, while `predict` at that
    setting warns that it extrapolates: the prior is the fit's prediction there."""
    from pathlib import Path

    from bayes_grpo.predict.forecast import population_prior_for_run
    from bayes_grpo.runset.ingest import load_runs

    root = Path(__file__).resolve().parents[1]
    runset = load_runs(root / "data" / "tiny" / "g16_p8_lr0.001_k8_adamw_s0")
    run_id = str(runset["run"].values[0])
    _, note = population_prior_for_run(runset, run_id, posterior=root / "models" / "tiny.nc")
    assert "the prior is the fit's prediction at this run's setting" in note, note
    assert "K_ref = 8 is outside the fitted runs' range [1, 2]" in note
    assert "law-discrepancy" not in note
    # a run at a fitted setting gets no such note
    runset = load_runs(root / "data" / "tiny" / "g16_p8_lr0.001_k1_adamw_s0")
    _, note = population_prior_for_run(runset, str(runset["run"].values[0]), posterior=root / "models" / "tiny.nc")
    assert "prediction at this run's setting" not in note


def test_a_posterior_prior_for_a_run_of_unknown_g_says_its_noise_is_at_the_reference_g():
    """`forecast runs.nc --run R --upto 90 --prior models/tiny.nc` of a run whose group_size is
    unknown took the noise of the LLM's reference G without a word, where `fit` notes the G it
    takes for such runs: the prior's noise depends on G, and the note now says which."""
    from pathlib import Path

    from bayes_grpo.predict.forecast import population_prior_for_run
    from bayes_grpo.runset.ingest import load_runs

    root = Path(__file__).resolve().parents[1]
    runset = load_runs(root / "data" / "tiny" / "g16_p8_lr0.001_k1_adamw_s1")
    run_id = str(runset["run"].values[0])
    _, note = population_prior_for_run(runset, run_id, posterior=root / "models" / "tiny.nc")
    assert "is unknown" not in note, note
    unknown = runset.assign_coords(group_size=("run", [np.nan]))
    _, note = population_prior_for_run(unknown, run_id, posterior=root / "models" / "tiny.nc")
    assert f"the group_size of run {run_id!r} is unknown" in note and "reference G" in note, note


def test_forecast_json_with_a_posterior_prior_carries_the_saved_fits_own_warnings(tmp_path, capsys):
    """`forecast runs.nc --run R --upto 60 --prior models/tiny.nc --json` printed no word of the
    i.i.d. fit being too confident (stderr said it; `predict --json` lists it in
    `posterior_warnings`): the forecast now keeps them (attr and JSON `posterior_warnings`)."""
    import warnings
    from pathlib import Path

    from bayes_grpo.cli import main
    from bayes_grpo.model.core import GRPODynamicsModel
    from bayes_grpo.runset import save_runset

    path = str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = tmp_path / "runs.nc"
        save_runset(GRPODynamicsModel.load(path).runset, runs)
    args = ["forecast", str(runs), "--run", "g16_p8_lr0.001_k1_adamw_s1", "--upto", "60", "--horizon", "90"]
    assert main([*args, "--prior", path, "--likelihood", "iid", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    (note,) = [w for w in out["posterior_warnings"] if "too confident" in w]
    assert note.startswith(path) and captured.err.count("too confident") == 1


def test_a_constant_prefix_whose_prior_knows_no_rise_gets_no_stop_step():
    """`forecast tiny.nc --run g16_p8_lr0.001_k1_adamw_s0 --upto 10 --no-population` (the run at 0
    before its rise) recommended stop step 0 and said "give a smaller gain": the flat prefix and
    the weak prior scaled to it know nothing of a rise, so there is no stop step, and it says so."""
    from bayes_grpo.predict.forecast import default_prior, forecast_run

    t = np.arange(0.0, 11.0)
    grid = np.arange(0.0, 301.0)
    fc = forecast_run(t, np.zeros_like(t), grid, likelihood="iid", n_draws=300)
    assert np.isnan(fc.attrs["stop_step"])
    notes = attr_warnings(fc)
    assert any("knows no rise either" in n and "no stop step" in n for n in notes), notes
    assert "knows no rise" in fc.attrs["no_stop_step"]
    assert not any("at least the whole expected remaining gain" in n for n in notes), notes
    # a prior that knows the rise (other runs rose to 0.9): the stop step is the prior's to give
    rising = 0.9 * (1.0 - np.exp(-grid / 40.0))
    fc = forecast_run(t, np.zeros_like(t), grid, prior=default_prior(grid, rising), likelihood="iid", n_draws=300)
    assert "no_stop_step" not in fc.attrs and not any("knows no rise" in n for n in attr_warnings(fc))


def test_a_falling_reward_says_that_its_stop_step_is_the_first_because_the_reward_falls():
    """A run that declines from its start got stop step 0 with "the stop threshold ... is at least
    the whole expected remaining gain ...: give a smaller gain (default: 1% of the rise)", as if the
    default threshold were the trouble: the forecast expects the reward to fall, and says so."""
    rng = np.random.default_rng(1)
    t = np.arange(0.0, 201.0)
    u = np.array([0.2, 0.8, np.log(0.03), np.log(0.9), np.log(0.03), np.log(1.0)])
    y = mean_curve(u[None], t)[0] + 0.03 * rng.standard_normal(t.size)
    fc = forecast_run(t[:60], y[:60], t, likelihood="iid", n_draws=200)
    assert fc.attrs["stop_step"] == 0.0
    notes = attr_warnings(fc)
    assert any("the reward is expected to fall" in n and "below the initial reward R0" in n for n in notes), notes
    assert not any("give a smaller gain" in n for n in notes), notes


def test_the_no_rise_verdict_of_a_constant_prefix_does_not_depend_on_the_reward_scale():
    # the verdict compared the prior's rise with the absolute sd floor 1e-3: rewards logged x1e-3
    # (a run at 0.2e-3 before a rise of 0.7e-3 the prior knows) were told the prior knows no
    # rise; it is now read in the unit the fit works in, the floor itself counting as no rise
    from bayes_grpo.predict.forecast import default_prior, forecast_run

    t = np.arange(0.0, 11.0)
    grid = np.arange(0.0, 301.0)
    rising = 0.2 + 0.7 * (1.0 - np.exp(-grid / 40.0))
    for scale, level in ((1e-3, 0.2), (1e-3, 0.0), (1e3, 0.0), (1e-6, 0.2)):
        y = np.full_like(t, level * scale)
        weak = forecast_run(t, y, grid, likelihood="iid", n_draws=300)
        known = forecast_run(t, y, grid, prior=default_prior(grid, scale * rising), likelihood="iid", n_draws=300)
        assert "knows no rise" in weak.attrs.get("no_stop_step", ""), (scale, level)
        assert "no_stop_step" not in known.attrs, (scale, level, known.attrs.get("no_stop_step"))


@pytest.mark.parametrize("level", [200.0, 2000.0])
def test_a_flat_run_at_a_large_reward_is_forecast_not_refused_by_scipys_eigenvalue_cutoff(level):
    # forecast_run of a run flat at 200 ended in "LinAlgError: ... must be symmetric positive
    # definite": its weak prior's level sds sit at the 1e-3 floor (1e-5 in the forecast's unit
    # of 100) beside log-scale sds of order 1, a positive definite covariance whose smallest
    # eigenvalue scipy's multivariate_normal took for 0; at 20 it worked
    from bayes_grpo.predict.forecast import forecast_run

    for likelihood in ("iid", "state_space"):
        ds = forecast_run(
            np.arange(11.0), np.full(11, level), np.arange(301.0), likelihood=likelihood, n_draws=300
        )
        assert np.isnan(ds.attrs["stop_step"]) and "constant" in ds.attrs["no_stop_step"]
        assert np.all(np.isfinite(ds["mean_mean"].values))
        assert np.allclose(ds["mean_mean"].values, level, rtol=1e-3)


def test_the_weak_default_prior_gives_the_same_forecast_of_a_run_logged_in_a_unit_1000_times_smaller_or_larger():
    # default_prior floored the plateau and R0 sds at an absolute 1e-3: a run rising from 0.2 to
    # 0.7 logged x1e-3 had level sds of 1e-3 (its whole size) where x1 and x1000 had 0.68 and 0.36
    # of the unit, and its forecast differed (90% bands off by 0.03 of the unit). It is now built
    # in the rewards' own unit (reward_unit) and scaled back
    from bayes_grpo.predict.forecast import default_prior, forecast_run

    rng = np.random.default_rng(1)
    grid = np.arange(0.0, 301.0)
    t = grid[:61]
    y = (0.2 + 0.5 * (1.0 - np.exp(-grid / 60.0)) + 0.02 * rng.standard_normal(grid.size))[:61]
    one_prior = default_prior(t, y, horizon=300.0)
    one = forecast_run(t, y, grid, likelihood="iid", n_draws=300, stop_threshold=0.01)
    for scale in (1e-3, 1e3):
        prior = default_prior(t, scale * y, horizon=300.0)
        np.testing.assert_allclose(prior.sd[:2] / scale, one_prior.sd[:2], rtol=1e-9)
        np.testing.assert_allclose(prior.sd[2:], one_prior.sd[2:], rtol=1e-9)
        scaled = forecast_run(t, scale * y, grid, likelihood="iid", n_draws=300, stop_threshold=0.01 * scale)
        for name in ("mean_mean", "obs_hdi", "mean_hdi", "expected_remaining_gain"):
            np.testing.assert_allclose(scaled[name].values / scale, one[name].values, rtol=1e-5, atol=1e-7, err_msg=f"{scale} {name}")
        np.testing.assert_allclose(scaled.time_to_fraction_median.values, one.time_to_fraction_median.values, rtol=1e-6)
        np.testing.assert_allclose(scaled.regime_probability.values, one.regime_probability.values, atol=1e-9)
        assert scaled.attrs["stop_step"] == one.attrs["stop_step"], scale


def test_a_prior_whose_reward_scale_is_the_prefixs_keeps_its_level_sds_for_a_run_logged_x1e_3():
    # with_levels_from (a new LLM of a fitted posterior, runs of other LLMs: their dynamics, the
    # prefix's reward scale) rebuilt the prior in the rewards' unit as logged, so the absolute 1e-3
    # sd floor came back: the prefix's plateau and R0 sds 0.67e-3 and 0.35e-3 of a run logged
    # x1e-3 became 1e-3 (at x1 and x1000 they stay 0.67 and 0.35 of the unit)
    from bayes_grpo.predict.forecast import default_prior, with_levels_from

    rng = np.random.default_rng(0)
    grid = np.arange(0.0, 301.0)
    t = grid[:61]
    y = (0.2 + 0.5 * (1.0 - np.exp(-grid / 60.0)) + 0.02 * rng.standard_normal(grid.size))[:61]
    dynamics = default_prior(grid, 0.3 + 0.6 * (1.0 - np.exp(-grid / 40.0)))
    one = with_levels_from(dynamics, default_prior(t, y, horizon=300.0))
    for scale in (1e-3, 1e3):
        scaled = with_levels_from(dynamics, default_prior(t, scale * y, horizon=300.0))
        np.testing.assert_allclose(scaled.sd[:2] / scale, one.sd[:2], rtol=1e-9, err_msg=str(scale))
        np.testing.assert_allclose(scaled.mean[:2] / scale, one.mean[:2], rtol=1e-9)
        np.testing.assert_allclose(scaled.sd[2:], one.sd[2:], rtol=1e-9)
        np.testing.assert_allclose(scaled.mean[4], one.mean[4] + np.log(scale), rtol=1e-9)


def test_the_default_prior_of_a_run_logged_with_an_offset_is_the_same_prior_shifted():
    # default_prior and with_levels_from worked in the reward's unit only: a run rising by 0.002
    # logged as 100 + reward was built in the unit 100, where the sd floor on the plateau and R0
    # (1e-3 of the unit) is 0.1, fifty times the rise; without the offset the floor is 1e-3 of
    # the unit 0.01. Both now work from the reward's frame (reward_frame: origin and unit)
    from bayes_grpo.predict.forecast import default_prior, with_levels_from

    rng = np.random.default_rng(2)
    t = np.arange(0.0, 61.0)
    y = 0.2 + 0.002 * (1.0 - np.exp(-t / 20.0)) + 1e-4 * rng.standard_normal(t.size)
    one = default_prior(t, y, horizon=300.0)
    shifted = default_prior(t, y + 100.0, horizon=300.0)
    np.testing.assert_allclose(shifted.mean[:2] - 100.0, one.mean[:2], rtol=0, atol=1e-9)
    np.testing.assert_allclose(shifted.sd, one.sd, rtol=1e-6)
    dynamics = default_prior(t, 0.3 + 0.6 * (1.0 - np.exp(-t / 40.0)))
    both = with_levels_from(dynamics, one), with_levels_from(dynamics, shifted)
    np.testing.assert_allclose(both[1].sd, both[0].sd, rtol=1e-6)


def _four_runs_of_one_llm():
    """Four runs of one LLM drawn from :func:`_population` (seed 3), 151 steps: a run set whose
    first run a forecast from the other three's prior can be scaled or shifted."""
    import pandas as pd

    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(3)
    steps = np.arange(0, 151)
    curves = {}
    for i, u in enumerate(_population(rng, 4)):
        _, y = _run(u, rng)
        curves[f"r{i}"] = pd.DataFrame({"reward": y[: steps.size]}, index=steps)
    return make_runset(curves, {k: {"model": "m"} for k in curves})


@pytest.mark.parametrize("value", ["0", "-5", "1e6"])
def test_cli_forecast_refuses_a_horizon_that_is_no_step_count_by_its_flag(value, capsys):
    # `--horizon` took a Python int: "-5" went on to the forecast's own check, "1e6" read as
    # "invalid int value"; it is a positive whole number of steps as --steps is
    from bayes_grpo.cli import main

    with pytest.raises(SystemExit) as done:
        main(["forecast", "missing.nc", "--run", "r", "--upto", "10", "--horizon", value])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "argument --horizon" in err and (
        f"must be at least 1, got '{value}'" in err or f"not a whole number: '{value}'" in err
    ), err


def test_a_model_size_the_fit_cannot_use_is_said_in_the_priors_note_not_on_stderr_alone():
    # `forecast runs.nc --run r0 --prior models/tiny.nc` of a run of another LLM of known size
    # printed a bare "model_size = 1e+08 is not used: this fit has no regression ..." on stderr,
    # naming no run, and the forecast's warnings and --json said nothing of it
    import warnings
    from pathlib import Path

    import pandas as pd

    from bayes_grpo.model.core import UnusedModelSizeWarning
    from bayes_grpo.predict.forecast import population_prior_for_run
    from bayes_grpo.runset import make_runset

    tiny = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    steps = np.arange(40)
    reward = 0.8 - 0.6 * np.exp(-steps / 10.0)
    coords = dict(model="other-llm", model_size=1e8, group_size=16, learning_rate=1e-3, momentum=0.9,
                  momentum_convention="ema", k_ref=1)
    runset = make_runset({"r0": pd.DataFrame({"reward": reward}, index=steps)}, {"r0": coords})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _, note = population_prior_for_run(runset, "r0", posterior=str(tiny), prefix=(steps[:20], reward[:20]))
    assert not [w for w in seen if issubclass(w.category, UnusedModelSizeWarning)]
    assert "the run's model_size = 1e+08 is not used: this fit has no regression" in note, note


def test_the_warnings_name_the_last_step_the_forecast_saw_as_upto_step_does():
    # `forecast runs.nc --run R --upto 150` of a run logged every other step reported
    # upto_step 149 (the last logged step at or before --upto, the one the forecast saw) while
    # its warnings said "up to step 150", "last seen 150": the same prefix, two ends
    from bayes_grpo.predict.forecast import forecast_in_runset

    fc = forecast_in_runset(_runs_with_a_solved_one(), "solved", 101, likelihood="iid", n_draws=100)
    assert fc.attrs["upto_step"] == 100
    told = attr_warnings(fc)
    assert any("solved (1 at all 51 logged steps up to step 100)" in w for w in told), told
    assert not any("101" in w for w in told), told


def test_an_evaluated_run_of_one_step_is_too_short_in_the_singular():
    # a run of one logged reward read "run too short: 1 steps" in the evaluation table
    from bayes_grpo.predict.evaluate import evaluate_run

    rows = evaluate_run(np.array([1.0]), np.array([0.5]), fractions=[0.5])
    assert [row["error"] for row in rows] == ["run too short: 1 step"]
    rows = evaluate_run(np.array([1.0, 2.0]), np.array([0.5, 0.6]), fractions=[0.5])
    assert [row["error"] for row in rows] == ["run too short: 2 steps"]


def test_the_prior_conflict_check_takes_the_priors_own_bounds_by_default_as_the_forecast_does():
    # prior_conflict_note defaulted reward_bounds to None where forecast_run and every other entry
    # default to FIT_BOUNDS (the prior's own): a bounded fit's prior at a plateau of 0.98 was checked
    # with constant, uncensored noise (range [0.65, 1.3]), so a prefix at 0.85 did not contradict it,
    # while the forecast from that prior takes the bounded noise, which is narrow at 0.98 ([0.905, 1])
    from bayes_grpo.predict.forecast import GaussianPrior, prior_conflict_note
    from bayes_grpo.runset.bounds import latent_value

    top = latent_value(0.98, 0.0, 1.0)
    mean = np.array([top, top, np.log(0.1), np.log(1.0), np.log(0.06)])
    prior = GaussianPrior(mean, np.diag([0.05, 0.05, 0.1, 0.1, 0.05]) ** 2, source="bounded fit", latent_bounds=(0, 1))
    t, y = np.arange(40.0), np.full(40, 0.85)
    note = prior_conflict_note(prior, t, y)
    assert note is not None and note == prior_conflict_note(prior, t, y, (0.0, 1.0))
    assert "step 0: 0.85 against [0.905, 1]" in note and "the prior (bounded fit) contradicts this run" in note
    assert prior_conflict_note(prior, t, y, None) is None  # no bounds, given: constant noise
    unbounded = GaussianPrior(np.array([0.98, 0.98, np.log(0.1), np.log(1.0), np.log(0.06)]), prior.cov)
    assert prior_conflict_note(unbounded, t, y) is None  # a prior without bounds: none by default
    with pytest.raises(ForecastError, match="reward bounds"):
        prior_conflict_note(prior, t, y, (1.0, 0.0))  # checked, as at the other entries


def _success_rates_near_one(n_runs: int = 5, seed: int = 3):
    """Success rates of 64 samples per step (200 steps) that sit at 0 until an onset between
    steps 20 and 60, then rise to a plateau between 0.96 and 1: a run set whose runs end near
    the upper bound."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, 200.0)
    runs = []
    for _ in range(n_runs):
        onset = rng.uniform(20, 60)
        u = np.array(
            [rng.uniform(0.96, 1.0), 0.0, np.log(rng.uniform(0.04, 0.07)), np.log(rng.uniform(0.5, 0.9)), np.log(0.05), np.log(onset)]
        )
        runs.append((t, rng.binomial(64, np.clip(mean_curve(u, t)[0], 0.0, 1.0)) / 64))
    return runs


@pytest.mark.parametrize("kind", ["mixture", "gaussian"])
def test_a_bounded_forecast_from_a_run_based_prior_draws_every_plateau_and_r0_inside_the_bounds(kind):
    """The run-based prior fitted the earlier runs on the plateau's own level, where a run near
    1 is a Gaussian with a share of its mass above 1: from the first 45 steps of a success rate,
    77% of the mixture prior's plateau draws lay above 1 (left out by the forecast, named in a
    warning) and every R0 draw below 0 (kept: the curves started below 0); data/tiny's
    g16_p8_lr0.001_k8_adamw_s0 from step 81, 44% of its plateau draws. Now the earlier runs are
    fitted on the latent levels of p* and R0, and the prior lives there (latent_bounds), as a
    bounded fit's GaussianPrior does."""
    from bayes_grpo.predict.forecast import MixturePrior

    bounds = (0.0, 1.0)
    runs = _success_rates_near_one()
    prior = prior_from_runs(runs[1:], reward_bounds=bounds, kind=kind, horizon=199.0)
    t, y = runs[0]
    n = 45
    post = fit_run(t[:n], y[:n], prior, n_draws=200, n_proposal=500, likelihood="iid", reward_bounds=bounds, rng=0)
    plateau, initial = post.draws[:, 0], post.draws[:, 1]
    assert np.all((plateau > 0.0) & (plateau < 1.0)), np.quantile(plateau, [0.05, 0.95])
    assert np.all((initial > 0.0) & (initial < 1.0)), np.quantile(initial, [0.05, 0.95])
    assert np.all((post.mode[:2] > 0.0) & (post.mode[:2] < 1.0))
    assert isinstance(prior, MixturePrior if kind == "mixture" else GaussianPrior)
    assert prior.latent_bounds == bounds
    # the prior's own draws (the forecast's prior conflict check draws them) and its summary too
    rng = np.random.default_rng(0)
    drawn = prior.draw(rng, 2000) if kind == "mixture" else prior.with_onset().draw(rng, 2000)
    assert np.all((drawn[:, :2] > 0.0) & (drawn[:, :2] < 1.0))
    summary = prior.to_dict()
    assert summary["latent_bounds"] == [0.0, 1.0] and 0.0 < summary["mean"]["plateau"] < 1.0
    ds = forecast_run(t[:n], y[:n], t[n:], prior=prior, n_draws=200, likelihood="iid", rng=0)
    assert json.loads(ds.attrs["reward_bounds"]) == [0.0, 1.0]  # the prior's bounds, not given: as a bounded fit's
    assert not any("outside the reward bounds" in w for w in attr_warnings(ds))


def test_an_unbounded_run_based_mixture_prior_is_fitted_on_the_rewards_own_levels():
    """Without reward bounds nothing changes: the prior has no latent bounds, its components
    are the earlier runs' fits on the plateau's and R0's own levels, and a forecast from it is
    not held inside [0, 1] (its R0 draws of runs that start at 0 fall on both sides of 0)."""
    from bayes_grpo.predict.forecast import MixturePrior, _laplace_fit_cached

    runs = _success_rates_near_one(n_runs=3)
    prior = prior_from_runs(runs, horizon=199.0)
    assert isinstance(prior, MixturePrior) and prior.latent_bounds is None
    modes = np.array([_laplace_fit_cached(t, y, 199.0, None)[0] for t, y in runs])
    # one component per run, then the robust one at the population's centre
    np.testing.assert_array_equal(prior.means[: len(runs), :2], modes[:, :2])
    np.testing.assert_array_equal(prior.means[-1, :2], np.median(modes[:, :2], axis=0))
    t, y = runs[0]
    post = fit_run(t[:45], y[:45], prior, n_draws=100, n_proposal=300, likelihood="iid", reward_bounds=None, rng=0)
    assert post.latent_mode is None and post.latent_cov is None
    assert (post.draws[:, 1] < 0.0).any() and (post.draws[:, 1] > 0.0).any()


def test_a_bounded_run_based_prior_of_other_llms_takes_the_prefixs_levels_on_its_latent_levels():
    """Runs of no named LLM lend their dynamics only; the plateau, R0 and noise come from the
    prefix (with_levels_from). With reward bounds the prior keeps its latent levels, so the
    prefix's levels are carried onto them, and every plateau it draws lies inside the bounds."""
    import pandas as pd

    from bayes_grpo.predict.forecast import MixturePrior, population_prior_for_run
    from bayes_grpo.runset import make_runset

    runs = _success_rates_near_one(n_runs=4)
    runset = make_runset({f"r{i}": pd.DataFrame({"reward": y}, index=t.astype(int)) for i, (t, y) in enumerate(runs)}, {})
    t, y = runs[0]
    prior, _ = population_prior_for_run(runset, "r0", prefix=(t[:45], y[:45]), horizon=199.0, reward_bounds=(0.0, 1.0))
    assert "dynamics only" in prior.source
    post = fit_run(t[:45], y[:45], prior, n_draws=200, n_proposal=500, likelihood="iid", reward_bounds=(0.0, 1.0), rng=0)
    assert np.all((post.draws[:, :2] > 0.0) & (post.draws[:, :2] < 1.0))
    assert isinstance(prior, MixturePrior) and prior.latent_bounds == (0.0, 1.0)
    drawn = prior.draw(np.random.default_rng(0), 2000)
    assert np.all((drawn[:, :2] > 0.0) & (drawn[:, :2] < 1.0))
    # the prior's plateau median is the prefix's late level, as without bounds
    assert abs(np.median(drawn[:, 0]) - np.mean(y[40:45])) < 0.1


def test_a_bounded_state_space_point_forecast_is_the_mean_of_the_censored_logged_reward():
    """A latent curve that overshoots the bound (an underdamped rise to a plateau of 0.95) had
    its point forecast at the latent mean, above 1 for a success rate; it is the conditional
    mean of the logged reward, which is censored: inside the bounds and the mean of the
    simulated logged rewards of the same row."""
    from bayes_grpo.predict import statespace

    t = np.arange(1.0, 41.0)
    y = np.clip(0.6 * t / 40.0 + np.random.default_rng(3).normal(0, 0.03, 40), 0.0, 1.0)
    row = np.array([0.95, 0.0, np.log(0.05), np.log(0.1), np.log(0.1), 0.0, 0.0])
    v = np.tile(row, (40000, 1))
    future = np.arange(41.0, 121.0)
    obs, point = statespace.forecast_paths(v, t, y, future, np.random.default_rng(0), (0.0, 1.0))
    latent = statespace.forecast_paths(v[:1], t, y, future, np.random.default_rng(0), None)[1][0]
    assert latent.max() > 1.05  # the latent curve overshoots the bound
    assert point.max() <= 1.0
    assert np.abs(point[0] - obs.mean(axis=0)).max() < 0.01


def _underdamped_bounded_posterior(n: int, plateau_sd: float = 0.0):
    """A bounded (0, 1) posterior of ``n`` draws of one underdamped law (plateau 0.95, w0 0.05,
    zeta 0.1) whose latent curve overshoots 1, its plateaus spread by ``plateau_sd``."""
    from bayes_grpo.predict.forecast import RunPosterior

    u = np.tile([0.95, 0.0, np.log(0.05), np.log(0.1), np.log(0.1), np.log(1.0)], (n, 1))
    u[:, 0] += plateau_sd * np.random.default_rng(0).standard_normal(n)
    return RunPosterior(
        draws=u, mode=u[0], cov=np.eye(6), pareto_k=0.1, ess=float(n), n_obs=20, log_post_mode=0.0,
        reward_bounds=(0.0, 1.0), t=np.arange(20.0), y=np.zeros(20),
    )  # fmt: skip


def test_a_bounded_iid_point_forecast_is_the_mean_of_the_censored_logged_reward():
    """The i.i.d. forecast's point was each draw's latent mean curve, uncensored: an
    underdamped draw whose curve overshoots a plateau of 0.95 put the point forecast of a
    success rate above 1, while its simulated logged rewards are censored to [0, 1]. The point
    is the expected logged reward: inside the bounds and the mean of the simulated ones."""
    from bayes_grpo.predict.forecast import forecast_from_posterior, mean_curve

    post = _underdamped_bounded_posterior(20000)
    steps = np.arange(0.0, 150.0)
    assert mean_curve(post.draws[:1], steps).max() > 1.05  # the latent curve overshoots the bound
    fc = forecast_from_posterior(post, steps)
    point = fc["point_forecast"].values
    assert point.max() <= 1.0
    assert np.abs(point - fc["obs_mean"].values).max() < 0.01


def test_the_mean_trajectory_of_a_bounded_forecast_stays_in_the_bounds(monkeypatch):
    """`forecast --reward-bounds 0 1` of a tiny run logged at 0.98 said "final mean reward 1.36"
    (interval 1.09-1.70): the latent curve of an underdamped draw swinging between 0.9 and 1.7.
    A success rate's mean trajectory is the law censored at its bounds, and the expected gain
    after the horizon is read on those censored curves."""
    from bayes_grpo.predict import summary
    from bayes_grpo.predict.forecast import forecast_from_posterior, mean_curve

    post = _underdamped_bounded_posterior(2000, plateau_sd=0.02)
    steps = np.arange(0.0, 300.0)
    assert mean_curve(post.draws[:1], steps).max() > 1.5  # the latent curve overshoots the bound
    fc = forecast_from_posterior(post, steps)
    assert fc["mean_mean"].max() <= 1.0 and fc["mean_hdi"].max() <= 1.0
    # the look past the horizon (the expected gain after it): every curve it reads in the bounds
    seen = []
    original = summary.best_beyond_horizon

    def look(continuation, *args, **kwargs):
        def looked(later):
            seen.append(continuation(later))
            return seen[-1]

        return original(looked, *args, **kwargs)

    monkeypatch.setattr(summary, "best_beyond_horizon", look)
    forecast_from_posterior(post, steps)
    assert seen and all(np.nanmax(m) <= 1.0 and np.nanmin(m) >= 0.0 for m in seen)


def test_a_bounded_reward_rises_along_the_image_of_the_latent_oscillator_and_stays_in_its_bounds():
    """For a success rate the oscillator runs on the latent level of ``p*`` and ``R0`` and the
    mean reward is its image in the bounds: a lightly damped draw whose latent level swings past
    its plateau (zeta 0.1 to a plateau of 0.95) stays below 1, settles on ``p*``, starts at
    ``R0``; on the reward's own level the same draw ran to 1.7."""
    from bayes_grpo.runset.bounds import bounded_value, latent_value

    u = np.array([[0.95, 0.02, np.log(0.05), np.log(0.1), np.log(0.1), np.log(5.0)]])
    steps = np.arange(0.0, 2001.0)
    bounded = mean_curve(u, steps, (0.0, 1.0))[0]
    assert mean_curve(u, steps)[0].max() > 1.5
    assert 0.0 < bounded.min() and bounded.max() < 1.0
    assert bounded[0] == pytest.approx(0.02, rel=1e-9) and bounded[-1] == pytest.approx(0.95, abs=1e-4)
    latent = reward_trajectory(
        np.maximum(steps - 5.0, 0.0), 1.0, 2 * 0.1 * 0.05, 0.05**2, latent_value(0.95, 0, 1), latent_value(0.02, 0, 1)
    )
    np.testing.assert_allclose(bounded, bounded_value(latent, 0.0, 1.0), rtol=1e-12)
    # the reward's unit does not matter: the same run logged in percent is the same curve x 100
    percent = u.copy()
    percent[0, :2] *= 100.0
    np.testing.assert_allclose(mean_curve(percent, steps, (0.0, 100.0))[0], 100.0 * bounded, rtol=1e-9)


TINY = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "tiny"


@pytest.mark.slow
def test_a_success_rate_forecast_from_the_middle_of_its_rise_holds_the_plateau_it_reaches():
    """data/tiny's g16_p8_lr0.001_k1_adamw_s0 from step 150 (a rise from 0.05 to 0.7 so far;
    later logged at 0.72-0.99), the other runs as the prior: on the reward's own level most draws
    overshot 1 (the run's rise is fast and flattens near 1), the band sat on 1 with zero width at
    most later steps and held 31% of the later rewards. On the latent level the band holds them."""
    from bayes_grpo.predict.forecast import population_prior_for_run
    from bayes_grpo.runset.ingest import load_runs

    if not TINY.is_dir():
        pytest.skip("data/tiny absent")
    runset = load_runs([TINY])
    run = "g16_p8_lr0.001_k1_adamw_s0"
    prior, _ = population_prior_for_run(runset, run, same_model_only=True, reward_bounds=(0.0, 1.0))
    t = runset[STEP_DIM].values.astype(float)
    y = runset["reward"].sel(run=run).values
    before, after = t <= 150, t > 150
    fc = forecast_run(t[before], y[before], t[after], prior=prior, reward_bounds=(0.0, 1.0), hdi_probs=(0.9,), rng=0)
    lo, hi = forecast_band(fc, t[after], kind="obs", hdi_prob=0.9)
    assert coverage(y[after], lo, hi) >= 0.8
    assert np.mean(hi - lo < 0.02) < 0.1  # a band of (almost) zero width at under a tenth of the steps
    assert 0.8 < fc["point_forecast"].values[-20:].mean() < 0.97


def test_a_state_space_forecast_of_a_prefix_logged_at_the_upper_bound_holds_it_there():
    """100 steps of a success rate logged at exactly 1, forecast in [0, 1] on the state space:
    the likelihood cannot tell a plateau beyond 1 from one at 1 (both give the mean curve at 1)
    and every posterior draw lay beyond it; the forecast left them all out and refused, telling
    to check the bounds [0, 1]. The plateau is taken at 1, the forecast holds the reward there."""
    from bayes_grpo.predict.forecast import forecast_run

    t = np.arange(1.0, 101.0)
    fc = forecast_run(t, np.ones(100), np.arange(1.0, 301.0, 5.0), reward_bounds=(0.0, 1.0), n_draws=400, rng=0)
    assert np.all(fc["param_plateau"].values == 1.0)
    assert float(fc["point_forecast"].isel({STEP_DIM: -1})) == pytest.approx(1.0, abs=1e-6)
    assert float(fc["mean_mean"].isel({STEP_DIM: -1})) == pytest.approx(1.0, abs=1e-6)
    assert any("the plateau is taken at 1" in w for w in attr_warnings(fc))


def test_a_bounded_forecasts_milestones_count_the_rise_from_where_its_curve_starts_inside_the_bounds():
    """A prefix logged at 0 before its rise leaves R0 free below 0 (every R0 there gives the
    curve's start at 0: mean_curve takes a level beyond a bound at the bound); a forecast from
    draws with R0 at -0.4 and p* at 0.8 counted the rise from -0.4, so '90% of the rise' was
    the curve at 0.68, not 0.72, and its reported initial reward lay outside [0, 1]. The rise
    is counted from the curve's own start, the bound."""
    from bayes_grpo.predict.forecast import RunPosterior, forecast_from_posterior

    n = 200
    u = np.column_stack(
        [
            np.full(n, 0.8),
            np.full(n, -0.4),
            np.full(n, np.log(0.05)),
            np.full(n, np.log(1.0)),
            np.full(n, np.log(0.05)),
            np.full(n, np.log(1.0)),
        ]
    )
    post = RunPosterior(
        draws=u, mode=u[0], cov=np.eye(6), pareto_k=0.1, ess=float(n), n_obs=20,
        log_post_mode=0.0, reward_bounds=(0.0, 1.0), t=np.arange(20.0), y=np.zeros(20),
    )  # fmt: skip
    steps = np.arange(0.0, 400.0)
    fc = forecast_from_posterior(post, steps)
    curve = mean_curve(u[:1], steps, (0.0, 1.0))[0]
    assert curve[0] == pytest.approx(0.0, abs=1e-6)
    first = steps[np.argmax(curve >= 0.9 * 0.8)]
    assert float(fc["time_to_fraction_median"].sel(fraction=0.9)) == first
    assert float(fc["param_initial_reward"].min()) >= 0.0


@pytest.mark.parametrize("likelihood", ["iid", "state_space"])
def test_a_bounded_forecast_with_the_weak_prior_of_a_rise_from_0_holds_a_plateau_inside_the_bounds(likelihood):
    """A success rate at 0 for 20 steps, then a rise towards 0.95, forecast in [0, 1] from step
    120 with the weak prior (on the plateau's own level): the latent law's likelihood is flat in a
    plateau beyond 1 (its curve is the bound's), every posterior draw's plateau lay there (4.5)
    and the forecast, leaving them out, refused ("check the bounds"). Refitted with the weak prior
    on the latent levels, it forecasts the plateau the run reaches."""
    from bayes_grpo.predict.forecast import forecast_run

    rng = np.random.default_rng(3)
    t = np.arange(1.0, 201.0)
    y = np.clip(0.95 - 0.9 * np.exp(-0.03 * t) + 0.04 * rng.standard_normal(t.size), 0.0, 1.0)
    y[:20] = 0.0
    fc = forecast_run(
        t[:120], y[:120], np.arange(1.0, 301.0, 5.0), reward_bounds=(0.0, 1.0), likelihood=likelihood, n_draws=400, rng=0
    )
    plateau = fc["param_plateau"].values
    assert np.all((plateau >= 0.0) & (plateau <= 1.0))
    assert float(fc["point_forecast"].isel({STEP_DIM: -1})) == pytest.approx(0.95, abs=0.1)
    assert any("refitted with it on the latent levels" in w for w in attr_warnings(fc))


def test_a_prefix_with_missing_steps_is_said_to_wander_only_beyond_the_band_of_its_lag1_pairs(monkeypatch):
    """The prefix check took the band of a gappy prefix from its points: with every 3rd step
    missing (200 points, 100 lag-1 pairs), white-looking residuals of lag-1 0.17 lay beyond
    1.96/sqrt(200) = 0.14 and the i.i.d. forecast was told to use the state-space likelihood,
    where the band of its pairs, 1.96/sqrt(101) = 0.195, holds them."""
    from bayes_grpo.metrics import autocorrelation
    from bayes_grpo.predict import forecast as fmod

    steps = np.arange(300.0)
    t = steps[steps % 3 != 2]
    y = next(
        y
        for seed in range(200)
        if 0.15 < autocorrelation(y := np.random.default_rng(seed).normal(0.5, 0.05, t.size), (1,), steps=t)[0] < 0.19
    )
    monkeypatch.setattr(fmod, "mean_curve", lambda draws, tt, bounds: np.full((2, tt.size), 0.5))
    post = fmod.RunPosterior(draws=np.zeros((2, 6)), mode=np.zeros(6), cov=np.eye(6), pareto_k=0.0, ess=2.0,
                             n_obs=t.size, log_post_mode=0.0, t=t, y=y)
    assert fmod._prefix_wander_note(post) is None
    # the same residuals at twice the lag-1 are said to wander
    wander = 0.5 + np.convolve(y - 0.5, [1.0, 1.0, 1.0, 1.0], mode="same")
    post.y = wander
    assert "correlated in time" in fmod._prefix_wander_note(post)


@pytest.mark.parametrize("bad", [-1, np.int64(-2), 1.5, "0", True])
def test_a_seed_numpy_cannot_take_is_refused_naming_the_argument(bad):
    # seed=-1 / rng=-1 failed in NumPy's "expected non-negative integer", naming no argument
    # (forecast_in_runset after it had built the other runs' priors)
    from bayes_grpo.predict.forecast import RunForecaster, fit_run, forecast_in_runset, forecast_run

    t = np.arange(20.0)
    y = 0.8 - 0.6 * np.exp(-t / 10.0)
    words = r"must be a whole number >= 0 \(a random seed\) or a numpy Generator, got "
    with pytest.raises(ValueError, match="rng " + words):
        forecast_run(t, y, np.arange(40.0), likelihood="iid", n_draws=100, rng=bad)
    with pytest.raises(ValueError, match="rng " + words):
        fit_run(t, y, default_prior(t, y), likelihood="iid", n_draws=100, rng=bad)
    with pytest.raises(ValueError, match="seed " + words):
        RunForecaster(None, horizon_steps=np.arange(40.0), likelihood="iid", seed=bad)
    runset, _ = _coarse_runset(60.0, 1.0)
    with pytest.raises(ForecastError, match="seed " + words):
        forecast_in_runset(runset, "r0", 20.0, use_runs=False, likelihood="iid", seed=bad)
    # a whole number >= 0, None and a Generator are seeds
    for good in (0, np.int64(3), None, np.random.default_rng(1)):
        forecast_run(t, y, np.arange(30.0), likelihood="iid", n_draws=50, rng=good)
