"""The closed-form trajectory: exact solution of the oscillator ODE in every regime, smooth and
differentiable through critical damping, no overflow at long horizons, and the paper's limits
(slow start, overdamped single exponential)."""

import functools

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from bayes_grpo.dynamics import (
    damping_ratio,
    error_trajectory,
    reward_trajectory,
    single_exponential,
)


def _ode_reference(t, mass, damping, k_eff, e0, v0):
    sol = solve_ivp(
        lambda s, y: [y[1], -(damping * y[1] + k_eff * y[0]) / mass],
        (0.0, float(t[-1])),
        [e0, v0],
        t_eval=t,
        method="DOP853",
        rtol=1e-13,
        atol=1e-15,
    )
    assert sol.success
    return sol.y[0]


def _random_setting(rng, zeta):
    mass = rng.uniform(0.5, 3.0)
    w0 = rng.uniform(0.005, 0.2)
    k_eff = mass * w0**2
    damping = 2.0 * zeta * np.sqrt(mass * k_eff)
    e0 = rng.uniform(-1.0, 1.0)
    v0 = rng.uniform(-0.02, 0.02)
    decay = (
        2.0 * mass / damping if zeta < 1 else 1.0 / (zeta * w0 - w0 * np.sqrt(max(zeta**2 - 1, 0)))
    )
    horizon = min(12.0 * decay, 4000.0)
    return mass, damping, k_eff, e0, v0, horizon


ZETAS = {
    "underdamped": lambda rng: rng.uniform(0.05, 0.95),
    "near_critical_below": lambda rng: 1.0 - 10 ** rng.uniform(-12, -4),
    "critical": lambda rng: 1.0,
    "near_critical_above": lambda rng: 1.0 + 10 ** rng.uniform(-12, -4),
    "overdamped": lambda rng: rng.uniform(1.05, 10.0),
}


@pytest.mark.parametrize("regime", list(ZETAS))
def test_closed_form_matches_ode_at_random_parameters_in_every_regime(regime):
    rng = np.random.default_rng(list(ZETAS).index(regime))
    for _ in range(6):
        mass, damping, k_eff, e0, v0, horizon = _random_setting(rng, ZETAS[regime](rng))
        t = np.linspace(0.0, horizon, 401)
        ref = _ode_reference(t, mass, damping, k_eff, e0, v0)
        closed = error_trajectory(t, mass, damping, k_eff, e0, v0)
        assert np.max(np.abs(closed - ref)) <= 1e-8


@pytest.mark.parametrize("zeta", [0.02, 0.5, 1.0, 1.0 + 1e-7, 3.0, 1e3])
def test_long_horizons_to_1e5_steps_stay_finite_and_exact(zeta):
    # A slow system whose dynamics span the whole 1e5-step horizon (checked against the ODE) ...
    mass, w0 = 1.3, 2e-4
    k_eff = mass * w0**2
    damping = 2.0 * zeta * np.sqrt(mass * k_eff)
    t = np.linspace(0.0, 1e5, 201)
    ref = _ode_reference(t, mass, damping, k_eff, 0.7, 0.0)
    closed = error_trajectory(t, mass, damping, k_eff, 0.7, 0.0)
    assert np.max(np.abs(closed - ref)) <= 1e-8
    # ... and a fast one evaluated far past its decay: no overflow, no NaN, decayed to 0.
    fast_k = mass * 0.3**2
    fast = error_trajectory(
        np.linspace(0, 1e5, 1001), mass, 2 * zeta * np.sqrt(mass * fast_k), fast_k, 0.7
    )
    assert np.all(np.isfinite(fast))
    if zeta <= 3.0:
        assert abs(fast[-1]) < 1e-12
    else:  # strongly overdamped: the slow mode w0/(2 zeta) is still decaying, monotonically
        assert np.all(np.diff(fast) <= 0) and fast[-1] > 0


@pytest.mark.parametrize("damping", [-0.1, -0.2, -0.3])
def test_unstable_trajectories_stay_finite(damping):
    t = np.linspace(0, 1e5, 101)
    with np.errstate(
        over="raise", invalid="raise", divide="raise"
    ):  # no overflow anywhere, selected branch or not
        e = error_trajectory(t, 1.0, damping, 0.01, 1.0)
    assert np.all(np.isfinite(e))
    assert np.max(np.abs(e)) > 1e100


def test_vectorised_over_runs_and_steps():
    t = np.arange(0.0, 50.0)
    mass = np.array([[1.0], [1.5], [2.0]])
    damping = np.array([[0.05], [0.3], [1.0]])
    k_eff = np.array([[0.01], [0.02], [0.04]])
    grid = reward_trajectory(t[None, :], mass, damping, k_eff, 0.8, 0.2)
    assert grid.shape == (3, 50)
    for i in range(3):
        row = reward_trajectory(t, mass[i, 0], damping[i, 0], k_eff[i, 0], 0.8, 0.2)
        np.testing.assert_allclose(grid[i], row, rtol=0, atol=1e-15)


def test_slow_start_has_zero_initial_slope_and_quadratic_onset():
    mass, damping, k_eff, plateau, r0 = 1.2, 0.08, 0.004, 0.9, 0.1
    h = np.array([1e-3, 1e-2])
    rise = reward_trajectory(h, mass, damping, k_eff, plateau, r0) - r0
    # e(t) = e0 (1 - (K/M) t^2 / 2 + O(t^3)) with e'(0) = 0: R - R0 = (K/M)(p* - R0) t^2/2.
    expected_curvature = k_eff / mass * (plateau - r0) / 2.0
    np.testing.assert_allclose(rise / h**2, expected_curvature, rtol=2e-2)
    slope0 = (reward_trajectory(1e-6, mass, damping, k_eff, plateau, r0) - r0) / 1e-6
    assert abs(slope0) < 1e-7
    # The single exponential with the same time constant starts with a finite slope.
    tau = damping / k_eff
    exp_slope = (single_exponential(1e-6, plateau, r0, tau) - r0) / 1e-6
    assert exp_slope > 1e3 * abs(slope0)


@pytest.mark.parametrize("mass", [1e-2, 1e-3, 1e-4])
def test_overdamped_limit_tends_to_single_exponential_with_tau_c_over_k(mass):
    damping, k_eff, plateau, r0 = 1.0, 0.02, 0.8, 0.1
    t = np.linspace(0.0, 500.0, 2001)
    osc = reward_trajectory(t, mass, damping, k_eff, plateau, r0)
    exp = single_exponential(t, plateau, r0, damping / k_eff)
    err = np.max(np.abs(osc - exp))
    # Corrections are first order in the small parameter M K_eff / C^2 (plus a fast mode of
    # width M/C near t = 0 whose amplitude is also O(M K / C^2)).
    small = mass * k_eff / damping**2
    assert err <= 2.0 * small * abs(plateau - r0) + 1e-12
    assert err >= 0.05 * small * abs(plateau - r0)  # and it is a genuine first-order effect


@functools.cache
def _pytensor_value_and_grad():
    """One compiled graph (no C compilation: FAST_COMPILE) of sum R(t)^2 and its gradient."""
    import pytensor
    import pytensor.tensor as pt

    tt = pt.dvector("t")
    m, c, k, p, r = (pt.dscalar(n) for n in ("m", "c", "k", "p", "r"))
    total = pt.sum(reward_trajectory(tt, m, c, k, p, r) ** 2)
    grads = pt.grad(total, [m, c, k, p, r])
    return pytensor.function([tt, m, c, k, p, r], [total, *grads], mode="FAST_COMPILE")


def _pytensor_grad_and_value(t, point):
    out = _pytensor_value_and_grad()(np.asarray(t, dtype=float), *[float(x) for x in point])
    return float(out[0]), np.array([float(g) for g in out[1:]])


@pytest.mark.parametrize("zeta", [1.0 - 1e-3, 1.0 - 1e-8, 1.0, 1.0 + 1e-8, 1.0 + 1e-3])
def test_pytensor_gradient_matches_finite_differences_through_critical_damping(zeta):
    t = np.linspace(0.0, 200.0, 81)
    mass, k_eff = 1.4, 0.003
    damping = 2.0 * zeta * np.sqrt(mass * k_eff)
    point = np.array([mass, damping, k_eff, 0.85, 0.15])
    value, grad = _pytensor_grad_and_value(t, point)

    def f(x):
        return float(np.sum(reward_trajectory(t, *x) ** 2))

    assert value == pytest.approx(f(point), rel=1e-12)
    fd = np.empty(5)
    for i in range(5):
        h = 1e-6 * max(abs(point[i]), 1e-3)
        up, down = point.copy(), point.copy()
        up[i] += h
        down[i] -= h
        fd[i] = (f(up) - f(down)) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * np.max(np.abs(fd)))
    assert damping_ratio(mass, damping, k_eff) == pytest.approx(zeta, rel=1e-12)


def test_gradient_is_continuous_across_zeta_one():
    t = np.linspace(0.0, 300.0, 61)
    mass, k_eff = 1.0, 0.01
    grads = []
    for zeta in (1.0 - 1e-9, 1.0, 1.0 + 1e-9):
        damping = 2.0 * zeta * np.sqrt(mass * k_eff)
        grads.append(_pytensor_grad_and_value(t, [mass, damping, k_eff, 0.9, 0.1])[1])
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
    np.testing.assert_allclose(grads[2], grads[1], rtol=1e-6)
    assert np.all(np.isfinite(np.concatenate(grads)))


@pytest.mark.parametrize(("t0", "dt", "n_points"), [(0.0, 1.0, 1000), (5.0, 2.0, 37), (3.0, 10.0, 2), (0.0, 1.0, 1)])
def test_grid_trajectory_equals_the_closed_form_in_every_regime(t0, dt, n_points):
    """Baby-step giant-step on a regular grid gives the closed form's values (to rounding)."""
    from bayes_grpo.dynamics.trajectory import error_trajectory_on_grid

    rng = np.random.default_rng(7)
    rows = [_random_setting(rng, draw(rng)) for draw in ZETAS.values() for _ in range(3)]
    mass, damping, k_eff, e0, v0 = (np.array([r[i] for r in rows]) for i in range(5))
    grid = error_trajectory_on_grid(n_points, dt, mass, damping, k_eff, e0, v0, t0)
    t = t0 + dt * np.arange(n_points)
    ref = error_trajectory(t[None, :], mass[:, None], damping[:, None], k_eff[:, None], e0[:, None], v0[:, None])
    assert grid.shape == (len(rows), n_points)
    np.testing.assert_allclose(grid, ref, rtol=1e-10, atol=1e-12)


def test_grid_trajectory_of_an_unstable_draw_stays_finite():
    from bayes_grpo.dynamics.trajectory import error_trajectory_on_grid

    grid = error_trajectory_on_grid(5000, 1.0, np.array([1.0]), np.array([-0.5]), np.array([0.01]), np.array([0.5]))
    assert np.all(np.isfinite(grid)) and np.abs(grid).max() > 1e100


def test_grid_trajectory_gradient_matches_finite_differences_of_the_closed_form():
    """The PyTensor graph NUTS differentiates has the closed form's gradient."""
    import pytensor
    import pytensor.tensor as pt

    from bayes_grpo.dynamics.trajectory import error_trajectory_on_grid

    params = pt.dvector("params")
    t = np.arange(300.0)
    y = np.sin(t / 40.0)
    grid = error_trajectory_on_grid(300, 1.0, params[0:1], params[1:2], params[2:3], params[3:4])
    loss = ((grid - y) ** 2).sum()
    f = pytensor.function([params], [loss, pt.grad(loss, params)])

    def closed_loss(x):
        return float(np.sum((error_trajectory(t, *x) - y) ** 2))

    for zeta in (0.3, 1.0, 3.0):
        k = 0.004
        point = np.array([1.2, 2 * zeta * np.sqrt(1.2 * k), k, -0.7])
        value, grad = f(point)
        assert value == pytest.approx(closed_loss(point), rel=1e-10)
        fd = np.empty(4)
        for i in range(4):
            h = 1e-6 * abs(point[i])
            up, down = point.copy(), point.copy()
            up[i] += h
            down[i] -= h
            fd[i] = (closed_loss(up) - closed_loss(down)) / (2 * h)
        np.testing.assert_allclose(grad, fd, rtol=1e-5)
