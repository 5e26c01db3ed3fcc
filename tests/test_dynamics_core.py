"""The closed-form trajectory solves the oscillator ODE in every regime; the coefficients carry
one LLM's run from one setting to another."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from bayes_grpo.dynamics import reward_trajectory


@pytest.mark.parametrize("damping", [0.5, 0.2, 0.2 + 1e-10, 0.05])
def test_closed_form_matches_ode_integration(damping):
    mass, k_eff, plateau, r0 = 1.0, 0.01, 0.9, 0.1
    t = np.linspace(0.0, 300.0, 301)
    sol = solve_ivp(
        lambda s, y: [y[1], -(damping * y[1] + k_eff * y[0]) / mass],
        (0.0, 300.0), [r0 - plateau, 0.0], t_eval=t, rtol=1e-12, atol=1e-14,
    )
    closed = reward_trajectory(t, mass, damping, k_eff, plateau, r0)
    assert np.max(np.abs(closed - (plateau + sol.y[0]))) <= 1e-8


_SETTINGS = [
    {"learning_rate": 0.1, "momentum": 0.5, "k_ref": 2, "momentum_convention": "heavy_ball"},
    {"learning_rate": 0.05, "momentum": 0.5, "k_ref": 4, "momentum_convention": "heavy_ball"},
    {"learning_rate": 0.2, "momentum": 0.0, "k_ref": 1, "momentum_convention": "heavy_ball"},
    {"learning_rate": 0.3, "momentum": 0.9, "k_ref": 1, "momentum_convention": "ema"},
    {"learning_rate": 0.02, "momentum": 0.9, "k_ref": 0, "momentum_convention": "ema"},
]


@pytest.mark.parametrize("source", range(len(_SETTINGS)))
@pytest.mark.parametrize("target", range(len(_SETTINGS)))
def test_a_run_of_one_llm_carried_to_another_setting_is_that_settings_oscillator(source, target):
    # one LLM (curvature K = 1): the run at the source setting, re-timed to the target, has
    # the target's natural frequency and damping ratio (the mechanistic law at both ends)
    from bayes_grpo.dynamics.coefficients import (
        coefficients_from_hyperparameters,
        damping_ratio,
        natural_frequency,
        retime_oscillator,
    )

    def oscillator(s):
        m, c, k = coefficients_from_hyperparameters(
            s["learning_rate"], 1.0, s["momentum"], s["k_ref"], s["momentum_convention"]
        )
        return natural_frequency(m, k), damping_ratio(m, c, k)

    src, tgt = _SETTINGS[source], _SETTINGS[target]
    w0, zeta = retime_oscillator(*oscillator(src), src, tgt)
    assert (w0, zeta) == pytest.approx(oscillator(tgt), rel=1e-10)


def test_re_timing_keeps_a_runs_own_damping_and_scales_by_the_learning_rate_without_lag():
    from bayes_grpo.dynamics.coefficients import retime_oscillator

    src = {"learning_rate": 1e-6, "momentum": 0.9, "k_ref": 0, "momentum_convention": "ema"}
    tgt = dict(src, learning_rate=4e-6)
    # a fitted (phenomenological) damping ratio far from the mechanistic one is kept as its
    # damping coefficient: w0 doubles, zeta halves
    w0, zeta = retime_oscillator(np.array([0.01, 0.03]), np.array([7.0, 0.3]), src, tgt)
    assert w0 == pytest.approx([0.02, 0.06]) and zeta == pytest.approx([3.5, 0.15])
    # a target past the stability threshold has no damped oscillator: NaN, not a number
    lagged = {"learning_rate": 0.1, "momentum": 0.5, "k_ref": 2, "momentum_convention": "heavy_ball"}
    w0, zeta = retime_oscillator(0.3, 0.5, lagged, dict(lagged, learning_rate=1.0))
    assert np.isnan(w0) and np.isnan(zeta)



def test_the_formulas_take_plain_lists_as_the_arrays_they_stand_for():
    # error_trajectory([0, 1, 2], ...) failed "can't multiply sequence by non-int of type
    # 'float'", and the coefficient formulas likewise, where their docstrings say "array"
    from bayes_grpo.dynamics.coefficients import (
        coefficients_from_hyperparameters,
        damping_ratio,
        natural_frequency,
        stationary_variance,
    )
    from bayes_grpo.dynamics.trajectory import (
        error_trajectory,
        error_trajectory_on_grid,
        logistic,
        single_exponential,
    )

    t = np.array([0.0, 1.0, 2.0])
    assert np.array_equal(error_trajectory([0, 1, 2], 1.0, 0.5, 0.2, 1.0), error_trajectory(t, 1.0, 0.5, 0.2, 1.0))
    assert np.array_equal(
        reward_trajectory([0, 1, 2], 1.0, 0.5, 0.2, 0.7, [0.2, 0.3, 0.4]),
        reward_trajectory(t, 1.0, 0.5, 0.2, 0.7, np.array([0.2, 0.3, 0.4])),
    )
    assert np.array_equal(single_exponential([0, 1, 2], 0.7, 0.2, 10.0), single_exponential(t, 0.7, 0.2, 10.0))
    assert np.array_equal(logistic([0, 1, 2], 0.7, 0.2, 0.1, 5.0), logistic(t, 0.7, 0.2, 0.1, 5.0))
    grid = error_trajectory_on_grid(3, 1.0, [1.0, 1.0], [0.5, 3.0], [0.2, 1.0], [1.0, 1.0])
    np.testing.assert_allclose(grid[1], error_trajectory(t, 1.0, 3.0, 1.0, 1.0), rtol=1e-12)
    mass, damping, k_eff = coefficients_from_hyperparameters([1e-3, 2e-3], 40.0, 0.9, [1, 2], "ema")
    np.testing.assert_allclose(mass, [0.952, 0.966])
    np.testing.assert_allclose(damping_ratio([1.0], [0.5], [0.25]), [0.5])
    np.testing.assert_allclose(natural_frequency([1.0], [0.25]), [0.5])
    np.testing.assert_allclose(stationary_variance(1.0, [4, 16], 0.5, 0.2), [1.25, 0.3125])
