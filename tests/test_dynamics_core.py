"""The closed-form trajectory solves the oscillator ODE in every regime."""

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
