"""The stiffness that sets the bandit's stability threshold is the tangent at the plateau.

Claims checked here (no PyMC fit; least squares on seed-mean curves and fake posteriors):

* the bandit's restoring force is not linear in the reward, so a curve fit from the
  reference policy measures a secant stiffness well above the Jacobian one;
* fits of runs started on either side of the plateau bracket the Jacobian stiffness, and
  interpolating them to zero initial error recovers it;
* the logged reward of a lagged run is the generating policy's curve delayed by ``K_ref``:
  aligning it removes the delay;
* the threshold check interpolates per-model stiffness draws to ``e0 = 0`` when the fit has
  both signs of initial error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.optimize import least_squares

from bayes_grpo.bandit import bandit_truth, simulate_bandit
from bayes_grpo.bandit.experiments import (
    align_to_generating_policy,
    perturbation_runs,
    sweep_k_ref,
)
from bayes_grpo.checks.stability import bandit_threshold_check, local_stiffness_draws
from bayes_grpo.dynamics import effective_step, oscillator_coefficients
from bayes_grpo.dynamics.trajectory import reward_trajectory

TRUTH = bandit_truth(
    group_size=8,
    learning_rate=1.0,
    momentum=0.5,
    momentum_convention="heavy_ball",
    k_ref=1,
    beta=1.0,
)
K_TRUE = TRUTH["stiffness"]  # 0.25 (Jacobian of the exact expected update at p*)


def _fit_stiffness(ds: xr.Dataset, variable: str = "expected_reward") -> float:
    """Least-squares stiffness of the seed-mean curves (shared K, p*, R0; closed form)."""
    keys = ["learning_rate", "momentum", "k_ref"]
    frame = pd.DataFrame({k: ds[k].values for k in keys})
    curves, settings = [], []
    for setting, idx in frame.groupby(keys).groups.items():
        block = np.asarray(ds[variable].values[np.asarray(idx)])
        ok = np.isfinite(block).all(axis=0)  # aligned runs end in NaN
        y = block[:, ok].mean(axis=0)
        curves.append((np.asarray(ds["step"].values, float)[ok], y))
        settings.append(setting)

    def resid(x):
        k, p_star, r0 = np.exp(x[0]), x[1], x[2]
        out = []
        for (lr, mu, lag), (t, y) in zip(settings, curves):
            m, c, ke = oscillator_coefficients(lr * k, mu, lag)
            out.append(reward_trajectory(t, m, c, ke, p_star, r0) - y)
        return np.concatenate(out)

    y0 = float(np.mean([c[1][0] for c in curves]))
    sol = least_squares(resid, [np.log(0.3), float(np.mean([c[1][-1] for c in curves])), y0])
    return float(np.exp(sol.x[0]))


def test_curve_level_stiffness_from_the_reference_policy_is_the_secant_not_the_jacobian():
    ds = simulate_bandit(
        k_ref=0, learning_rate=[0.1, 0.2], momentum=0.5, seeds=32, steps=200, seed=3
    )
    k_fit = _fit_stiffness(ds)
    # the transient from p = 0.5 sees the stronger restoring force far below p*
    assert k_fit > 1.2 * K_TRUE


def test_fits_from_both_sides_bracket_the_jacobian_and_interpolate_to_it():
    ds = perturbation_runs(
        amplitude=0.08, learning_rate=[0.1, 0.2], k_ref=[0, 1, 2], seeds=32, steps=150, seed=5
    )
    assert abs(ds.attrs["plateau_estimate"] - TRUTH["plateau"]) < 0.005  # pilot, logged rewards
    fits = {}
    for model in np.unique(ds["model"].values):
        sub = ds.isel(run=np.flatnonzero(ds["model"].values == model))
        e0 = float(np.nanmean(sub["expected_reward"].values[:, 0])) - TRUTH["plateau"]
        fits[e0] = _fit_stiffness(sub)
    (e_lo, k_lo), (e_hi, k_hi) = sorted(fits.items())
    assert e_lo < 0 < e_hi
    assert k_lo > 1.05 * K_TRUE and k_hi < 0.95 * K_TRUE  # stiffer below p*, softer above
    k0 = (e_hi * k_lo - e_lo * k_hi) / (e_hi - e_lo)
    assert k0 == pytest.approx(K_TRUE, rel=0.05)


def test_aligned_reward_is_the_curve_of_the_policy_that_generated_it():
    ds = simulate_bandit(
        k_ref=[0, 3], learning_rate=0.2, momentum=0.5, seeds=2, steps=40, p_init=0.6, seed=1
    )
    al = align_to_generating_policy(ds, variables=["expected_reward"])
    p = al["expected_reward"].values
    # entropy is logged for the current policy (step n): it must match the aligned p at step n
    h = -(p * np.log(p) + (1 - p) * np.log1p(-p))
    ok = np.isfinite(h)
    np.testing.assert_allclose(h[ok], ds["entropy"].values[ok], rtol=1e-10)
    lag3 = np.flatnonzero(ds["k_ref"].values == 3)
    assert np.all(np.isnan(p[lag3, -3:])) and np.all(np.isfinite(p[lag3, :-3]))
    # before alignment, the lag-3 runs are flat for 3 steps and do not match the entropy
    raw = ds["expected_reward"].values[lag3]
    assert np.all(raw[:, :3] == raw[:, :1])
    with pytest.raises(ValueError, match="every optimizer step"):
        align_to_generating_policy(ds.isel(step=slice(None, None, 2)))


def test_a_run_whose_lag_outlasts_its_log_aligns_to_nothing_not_a_broadcast_error():
    # K_ref 7 over 5 logged steps: every logged reward is of the policy before step 0, none of a
    # policy the run logged; it failed "could not broadcast input array from shape (0,) into (3,)"
    ds = simulate_bandit(k_ref=[0, 5, 7], seeds=1, steps=5)
    al = align_to_generating_policy(ds, variables=["reward"])
    lags = ds["k_ref"].values
    np.testing.assert_array_equal(al["reward"].values[lags == 0], ds["reward"].values[lags == 0])
    assert np.all(np.isnan(al["reward"].values[lags > 0]))


class _PerturbationPosterior:
    """idata.posterior with two models: K_m = K + c e0_m exactly, plus coefficient_draws."""

    def __init__(self, tangent: float, slope: float, e0=(-0.08, 0.08), n: int = 400):
        rng = np.random.default_rng(0)
        k_draws = np.exp(rng.normal(np.log(tangent), 0.03, n))
        plateau = 0.85 + rng.normal(0, 0.002, (n, len(e0)))
        r0 = plateau + np.asarray(e0)[None, :] + rng.normal(0, 0.002, (n, len(e0)))
        k_m = k_draws[:, None] + slope * (r0 - plateau)
        coords = {"chain": [0], "draw": np.arange(n), "model": [f"m{j}" for j in range(len(e0))]}
        dims = ("chain", "draw", "model")
        self.idata = type("I", (), {})()
        self.idata.posterior = xr.Dataset(
            {
                "log_stiffness": (dims, np.log(k_m)[None]),
                "plateau": (dims, plateau[None]),
                "initial_reward_model": (dims, r0[None]),
            },
            coords=coords,
        )
        self.tangent = k_draws
        self.secant = k_m.mean(axis=1)

    def coefficient_draws(
        self, *, learning_rate, momentum, momentum_convention, k_ref, group_size=None, model=None
    ):
        # population level: the models' average (secant) stiffness
        a = effective_step(learning_rate, momentum, momentum_convention) * self.secant
        return {"a": pd.Series(a)}


def test_local_stiffness_draws_interpolate_to_zero_initial_error():
    post = _PerturbationPosterior(0.25, slope=-1.0)
    out = local_stiffness_draws(post)
    np.testing.assert_allclose(out["stiffness"], post.tangent, rtol=1e-10)
    np.testing.assert_allclose(out["slope"], -1.0, rtol=1e-8)
    assert out["extrapolated"] is False
    assert list(out["per_model"].index) == ["m0", "m1"]
    one_side = local_stiffness_draws(_PerturbationPosterior(0.25, slope=-1.0, e0=(-0.2, -0.08)))
    assert one_side["extrapolated"] is True
    np.testing.assert_allclose(one_side["stiffness"], post.tangent, rtol=1e-8)
    with pytest.raises(ValueError, match="at least two models"):
        local_stiffness_draws(post, models=["m0"])
    with pytest.raises(ValueError, match="not in the fit"):
        local_stiffness_draws(post, models=["m0", "nope"])


def test_threshold_check_uses_the_tangent_when_the_fit_brackets_the_plateau():
    sweep = sweep_k_ref(
        list(range(0, 9)), seeds=4, steps=1000, learning_rate=0.6, momentum=0.5, progress=False
    )
    # the models' mean (secant) stiffness 0.25 + 2 x 0.03 = 0.31; the tangent 0.25
    post = _PerturbationPosterior(K_TRUE, slope=-2.0, e0=(-0.08, 0.02))
    res = bandit_threshold_check(post, sweep)
    assert res.values["stiffness_source"] == "local"
    assert "interpolated between" in res.summary
    assert res.values["stiffness_median"] == pytest.approx(K_TRUE, rel=0.02)
    assert res.passed is True
    secant = bandit_threshold_check(post, sweep, stiffness="model")
    assert secant.values["stiffness_source"] == "model"
    assert secant.values["stiffness_median"] > 1.15 * K_TRUE
    assert secant.passed is False
    with pytest.raises(ValueError, match="stiffness must be"):
        bandit_threshold_check(post, sweep, stiffness="nope")
