"""Least-squares law fits recover known parameters, find the slow-start shape, and the single
exponential cannot draw a slow start."""

import numpy as np
import pytest

from bayes_grpo.dynamics import (
    fit_all,
    fit_logistic,
    fit_oscillator,
    fit_single_exponential,
    logistic,
    reward_trajectory,
    single_exponential,
)


def _noisy(y, sd, seed, missing=0.0):
    rng = np.random.default_rng(seed)
    out = y + sd * rng.standard_normal(y.shape)
    out[rng.uniform(size=y.shape) < missing] = np.nan
    return out


def _oscillator_data(zeta, w0, seed):
    t = np.arange(0.0, 400.0)
    clean = reward_trajectory(t, 1.0, 2 * zeta * w0, w0**2, 0.75, 0.15)
    y = _noisy(clean, 0.01, seed, missing=0.1)
    ok = np.isfinite(y)
    return t, y, float(np.sum((y[ok] - clean[ok]) ** 2))


@pytest.mark.parametrize(("zeta", "w0"), [(0.3, 0.04), (0.7, 0.02), (1.0, 0.03)])
def test_oscillator_fit_recovers_damping_ratio_and_frequency(zeta, w0):
    t, y, sse_truth = _oscillator_data(zeta, w0, int(zeta * 10))
    fit = fit_oscillator(t, y)
    assert fit.sse <= sse_truth  # the multi-start finds the least-squares optimum
    assert fit.params["zeta"] == pytest.approx(zeta, rel=0.06)
    assert fit.params["w0"] == pytest.approx(w0, rel=0.04)
    assert fit.params["plateau"] == pytest.approx(0.75, abs=0.01)
    assert fit.params["initial_reward"] == pytest.approx(0.15, abs=0.02)
    assert fit.derived["tau"] == pytest.approx(2 * fit.params["zeta"] / fit.params["w0"])
    assert fit.n == np.isfinite(y).sum()
    np.testing.assert_allclose(fit.predict(fit.t), fit.fitted)


def test_strongly_overdamped_fit_recovers_the_identifiable_slow_rate():
    # zeta = 2.5: the slow-start lasts ~3 steps, so zeta and w0 separately are weakly
    # identified; the slow relaxation rate w0 (zeta - sqrt(zeta^2 - 1)) is what the data fix.
    zeta, w0 = 2.5, 0.06
    t, y, sse_truth = _oscillator_data(zeta, w0, 25)
    fit = fit_oscillator(t, y)
    z, w = fit.params["zeta"], fit.params["w0"]
    assert fit.sse <= sse_truth
    assert w * (z - np.sqrt(z * z - 1)) == pytest.approx(
        w0 * (zeta - np.sqrt(zeta**2 - 1)), rel=0.03
    )


def test_slow_start_beats_single_exponential_and_oscillator_nests_it():
    t = np.arange(0.0, 300.0)
    slow = _noisy(reward_trajectory(t, 1.0, 2 * 1.2 * 0.03, 0.03**2, 0.8, 0.1), 0.01, 1)
    fits = fit_all(t, slow)
    assert fits["oscillator"].sse < 0.5 * fits["single_exponential"].sse
    assert fits["oscillator"].bic < fits["single_exponential"].bic
    # On single-exponential data the oscillator (strong damping) fits as well as the truth law.
    expo = _noisy(single_exponential(t, 0.8, 0.1, 40.0), 0.01, 2)
    osc, exp = fit_oscillator(t, expo), fit_single_exponential(t, expo)
    assert exp.params["tau"] == pytest.approx(40.0, rel=0.05)
    assert osc.sse <= exp.sse * 1.02
    assert osc.params["zeta"] > 2.0


def test_logistic_fit_recovers_rate_and_midpoint():
    t = np.arange(0.0, 250.0, 2.0)
    y = _noisy(logistic(t, 0.9, 0.2, 0.05, 110.0), 0.01, 4)
    fit = fit_logistic(t, y)
    assert fit.params["rate"] == pytest.approx(0.05, rel=0.1)
    assert fit.params["midpoint"] == pytest.approx(110.0, abs=3.0)
    assert fit.r2 > 0.98


def test_fits_need_enough_finite_points():
    with pytest.raises(ValueError, match="at least"):
        fit_oscillator([0, 1, 2], [0.1, np.nan, 0.3])
    with pytest.raises(ValueError, match="shape"):
        fit_logistic([0, 1, 2, 3, 4], [1, 2, 3])


def test_fit_summary_is_json_ready():
    t = np.arange(0.0, 100.0)
    out = fit_single_exponential(
        t, _noisy(single_exponential(t, 0.6, 0.1, 20.0), 0.01, 0)
    ).to_dict()
    assert out["law"] == "single_exponential" and set(out["params"]) == {
        "plateau",
        "initial_reward",
        "tau",
    }
    assert np.isfinite(out["aic"]) and out["n"] == 100


def test_parameters_on_a_search_bound_are_flagged():
    t = np.arange(0.0, 200.0)
    y = _noisy(0.5 + 0.2 * np.sin(2 * np.pi * t / 60.0), 0.005, 8)  # undamped oscillation
    fit = fit_oscillator(t, y)
    assert "zeta" in fit.at_bounds and fit.params["zeta"] == pytest.approx(1e-3, rel=1e-3)
    good = fit_oscillator(*_oscillator_data(0.7, 0.02, 3)[:2])
    assert good.at_bounds == [] and good.to_dict()["at_bounds"] == []


def test_a_scheduled_fit_keeps_each_multiplier_with_its_point_in_any_order():
    # fit_oscillator sorted t and y but left the multipliers in the given order: the same run
    # given with its steps shuffled read zeta 0.556 and w0 0.113 for a true 0.5 and 0.08
    from bayes_grpo.dynamics.trajectory import scheduled_reward_trajectory

    t = np.arange(1.0, 101.0)
    m = np.linspace(1.0, 0.0, 100)
    y = scheduled_reward_trajectory(t, m, 1.0, 2 * 0.5 * 0.08, 0.08**2, 0.7, 0.2)
    idx = np.random.default_rng(0).permutation(t.size)
    fit = fit_oscillator(t[idx], y[idx], multipliers=m[idx])
    assert fit.params["zeta"] == pytest.approx(0.5, rel=1e-4)
    assert fit.params["w0"] == pytest.approx(0.08, rel=1e-4)
    assert fit.r2 == pytest.approx(1.0, abs=1e-9)
    # a missing step is named, not 'least-squares fit failed from every start'
    t_nan = t.copy()
    t_nan[5] = np.nan
    with pytest.raises(ValueError, match="t and y must be finite"):
        fit_oscillator(t_nan, y, multipliers=m)


@pytest.mark.parametrize("fit", [fit_oscillator, fit_single_exponential, fit_logistic])
def test_points_that_span_no_time_are_refused(fit):
    # ten rewards all logged at step 0 were 'fitted' (R^2 ~ 0, success True)
    with pytest.raises(ValueError, match="the points span no time: every finite point is at step 0"):
        fit(np.zeros(10), np.linspace(0.0, 1.0, 10))


@pytest.mark.parametrize("fit", [fit_oscillator, fit_single_exponential, fit_logistic])
@pytest.mark.parametrize(
    ("factor", "offset"),
    [(1e-9, 0.0), (1e-3, 0.0), (100.0, 0.0), (1e4, 0.0), (1.0, -1000.0), (1.0, 1000.0), (-2.0, 0.5)],
)
def test_a_fit_gives_the_same_curve_and_r2_on_any_reward_scale_or_offset(fit, factor, offset):
    # the fits worked in reward units with absolute tolerances: rewards times 1e-9 read R^2
    # 0.822 (oscillator), 0.699 (single exponential), 0.669 (logistic) where the same curve
    # in units of 1 gave 0.990, 0.806 and 0.891
    t = np.arange(0.0, 200.0)
    y = _noisy(reward_trajectory(t, 1.0, 2 * 0.4 * 0.05, 0.05**2, 0.8, 0.2), 0.02, 0)
    base, moved = fit(t, y), fit(t, factor * y + offset)
    assert moved.r2 == pytest.approx(base.r2, rel=1e-6)
    np.testing.assert_allclose((moved.fitted - offset) / factor, base.fitted, atol=1e-6)
    np.testing.assert_allclose((moved.predict(t + 0.5) - offset) / factor, base.predict(t + 0.5), atol=1e-6)
    for level in ("plateau", "initial_reward"):
        assert (moved.params[level] - offset) / factor == pytest.approx(base.params[level], abs=1e-6)
    for name in set(base.params) - {"plateau", "initial_reward"}:
        assert moved.params[name] == pytest.approx(base.params[name], rel=1e-5)
    assert moved.sse == pytest.approx(factor**2 * base.sse, rel=1e-6)
