"""The least-squares baseline of benchmarks/real_runs_fit.py (the mechanistic law)."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_grpo.dynamics.coefficients import oscillator_coefficients
from bayes_grpo.dynamics.trajectory import reward_trajectory


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/real_runs_fit.py")


@pytest.mark.parametrize("a_true", [4e-4, 3e-3, 0.05])  # overdamped, near critical, oscillatory (mu = 0.9, L = 1)
def test_lsq_mechanistic_recovers_gain(script, a_true):
    rng = np.random.default_rng(0)
    t = np.arange(1.0, 301.0)
    m, c, k = oscillator_coefficients(a_true, script.MOMENTUM, script.K_REF)
    truth = reward_trajectory(t, m, c, k, 0.8, 0.2)
    y = truth + rng.normal(0.0, 0.02, t.size)
    y[::7] = np.nan  # missing points are skipped
    fitted, a_hat = script.lsq_mechanistic(t, y)
    ok = np.isfinite(y)
    assert fitted.shape == (ok.sum(),)
    assert abs(np.log(a_hat / a_true)) < 0.1
    # a least-squares fit: no worse than the true curve on the data it saw
    assert np.sum((fitted - y[ok]) ** 2) <= np.sum((truth[ok] - y[ok]) ** 2)


def test_lsq_mechanistic_finds_the_global_minimum(script):
    """On a noisy flat run (many local minima in a) the fit is no worse than a brute-force grid."""
    rng = np.random.default_rng(3)
    t = np.arange(1.0, 201.0)
    y = 0.5 + rng.normal(0.0, 0.1, t.size)
    fitted, _ = script.lsq_mechanistic(t, y)
    best = np.inf
    for a in np.geomspace(1e-6, 1.0, 5000):
        m, c, k = oscillator_coefficients(a, script.MOMENTUM, script.K_REF)
        g = reward_trajectory(t, m, c, k, 0.0, 1.0)
        design = np.column_stack([1.0 - g, g])
        if np.all(np.isfinite(design)):
            coef, *_ = np.linalg.lstsq(design, y, rcond=None)
            best = min(best, float(np.sum((design @ coef - y) ** 2)))
    assert np.sum((fitted - y) ** 2) <= best * (1 + 1e-9)
