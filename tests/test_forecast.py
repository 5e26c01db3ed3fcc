"""Forecasting a run in progress: calibration, accuracy, updating, failure modes."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.predict.forecast import (
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


def test_too_few_steps_is_a_clear_error():
    with pytest.raises(ForecastError, match="at least 3"):
        forecast_run([0.0, 1.0], [0.1, 0.2], STEPS)
    with pytest.raises(ForecastError, match="unknown likelihood"):
        forecast_run(STEPS[:10], STEPS[:10] * 0.01, STEPS, likelihood="student")
    with pytest.raises(ForecastError, match="prior needs"):
        GaussianPrior(np.zeros(3), np.eye(3))


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
    # measured (seed 0, weak prior, 30% prefix): state space 0.83, iid 0.56
    assert np.mean(cov["state_space"]) >= 0.75
    assert np.mean(cov["state_space"]) > np.mean(cov["iid"]) + 0.15
