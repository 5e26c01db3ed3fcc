"""Closed-form mean trajectory of the damped oscillator (DESIGN.md section 1).

``M e'' + C e' + K_eff e = 0`` with ``e(0) = e0``, ``e'(0) = v0`` has

    e(t) = exp(-gamma t) [ e0 ch(lam, t) + (v0 + gamma e0) sh(lam, t) ]

with ``gamma = C / 2M``, ``lam = gamma^2 - K_eff / M``. ``ch`` and ``sh`` are entire in
``lam t^2``; here they are evaluated by a Taylor series where ``|lam t^2|`` is small and
by exponent-combined closed forms elsewhere, so the result is smooth through critical
damping, never overflows for stable systems (all exponents are ``<= 0`` then), and every
branch stays finite, which keeps PyTensor gradients free of NaN for NUTS.
"""

from __future__ import annotations

import numpy as np

from bayes_grpo.dynamics._backend import NUMPY as NUMPY_OPS
from bayes_grpo.dynamics._backend import as_numbers, ops_for

#: ``|lam t^2|`` below which the Taylor series is used (truncation error < 1e-15 relative).
SERIES_THRESHOLD: float = 0.1
#: Largest exponent evaluated; keeps unstable trajectories (and unselected branches) finite:
#: they still grow to ~1e260, with headroom so no product of branch terms overflows.
MAX_EXPONENT: float = 600.0


def _propagators(gamma, lam, t, ops, w0sq=None):
    """``(exp(-gamma t) ch, exp(-gamma t) sh)`` for broadcast ``gamma, lam, t``.

    ``w0sq = K_eff / M`` (``= gamma^2 - lam``), when given, lets the slow overdamped rate
    ``s - gamma`` be computed without cancellation as ``-w0sq / (s + gamma)``.

    NumPy evaluates only the branches some element takes (:func:`_numpy_propagators`, the same
    values); PyTensor needs every branch in the graph.
    """
    if ops.name == "numpy":
        return _numpy_propagators(gamma, lam, t, w0sq)
    x = lam * t * t
    small = ops.abs(x) < SERIES_THRESHOLD
    # Taylor series in x = lam t^2 (exact in the limit lam -> 0).
    damp = ops.exp(ops.minimum(-gamma * t, MAX_EXPONENT))
    # Unselected branches are kept finite (no 0/0, no overflow): a NaN there would still
    # poison PyTensor gradients through the switch (0 * NaN = NaN).
    x = ops.where(small, x, 0.0)
    ch_series = _ch_series(x)
    sh_series = _sh_series(x, t)
    # Overdamped: combine exponents, exp(-g t) cosh(s t) = (exp((s-g) t) + exp(-(s+g) t)) / 2.
    over = lam > 0
    ch_over, sh_over = _over_branch(gamma, lam, t, over, ops, w0sq)
    # Underdamped: exp(-g t) cos(w t), exp(-g t) sin(w t) / w.
    ch_under, sh_under = _under_branch(lam, t, damp, ops)
    damp_small = ops.where(small, damp, 1.0)  # large damp only where the series is used
    ch = ops.where(small, damp_small * ch_series, ops.where(over, ch_over, ch_under))
    sh = ops.where(small, damp_small * sh_series, ops.where(over, sh_over, sh_under))
    return ch, sh


def _ch_series(x):
    return 1.0 + x * (1 / 2 + x * (1 / 24 + x * (1 / 720 + x * (1 / 40320 + x / 3628800))))


def _sh_series(x, t):
    return t * (1.0 + x * (1 / 6 + x * (1 / 120 + x * (1 / 5040 + x * (1 / 362880 + x / 39916800)))))


def _over_branch(gamma, lam, t, over, ops, w0sq):
    """Overdamped ``(ch, sh)``: exp(-g t) cosh(s t) = (exp((s-g) t) + exp(-(s+g) t)) / 2."""
    s = ops.sqrt(ops.where(over, lam, 1.0))
    slow = s - gamma
    if w0sq is not None:
        # s - gamma = -w0^2 / (s + gamma): no cancellation when gamma >> w0 (strong damping).
        slow = ops.where(gamma > 0, -w0sq / (s + ops.where(gamma > 0, gamma, 1.0)), slow)
    up = ops.exp(ops.minimum(slow * t, MAX_EXPONENT))
    down = ops.exp(ops.minimum(-(s + gamma) * t, MAX_EXPONENT))
    return (up + down) / 2.0, (up - down) / (2.0 * s)


def _under_branch(lam, t, damp, ops):
    """Underdamped ``(ch, sh)``: exp(-g t) cos(w t), exp(-g t) sin(w t) / w."""
    w = ops.sqrt(ops.where(lam < 0, -lam, 1.0))
    return damp * ops.cos(w * t), damp * ops.sin(w * t) / w


def _numpy_propagators(gamma, lam, t, w0sq):
    """:func:`_propagators` in NumPy, each branch evaluated only when some element takes it.

    Every element gets the value of the same expressions as in the all-branch form (the
    branches are elementwise; a branch no element takes only fed the switches a value they
    dropped), so the results are the same, at a fraction of the cost for the small arrays of
    a forecast's optimiser (rows of one run, near one another, mostly in one branch).
    """
    gamma, lam, t = (np.asarray(v, dtype=float) for v in (gamma, lam, t))
    x = lam * t * t
    small = np.abs(x) < SERIES_THRESHOLD
    damp = np.exp(np.minimum(-gamma * t, MAX_EXPONENT))
    shape = np.broadcast_shapes(x.shape, damp.shape)
    if int(np.prod(shape)) >= SUBSET_ELEMENTS:
        return _numpy_propagators_by_element(gamma, lam, t, w0sq, x, small, damp, shape)
    over = lam > 0
    any_small = bool(small.any())
    big = ~small if any_small else True  # the elements the closed forms give
    has_over = bool(np.any(over & big))
    has_under = bool(np.any(~over & big))
    if has_over:
        ch_over, sh_over = _over_branch(gamma, lam, t, over, NUMPY_OPS, w0sq)
    if has_under:
        ch_under, sh_under = _under_branch(lam, t, damp, NUMPY_OPS)
    if has_over and has_under:
        ch = np.where(over, ch_over, ch_under)
        sh = np.where(over, sh_over, sh_under)
    elif has_over:
        ch, sh = ch_over, sh_over
    elif has_under:
        ch, sh = ch_under, sh_under
    else:
        ch = sh = None
    if any_small:
        x = np.where(small, x, 0.0)
        damp_small = np.where(small, damp, 1.0)
        ch_small = damp_small * _ch_series(x)
        sh_small = damp_small * _sh_series(x, t)
        if ch is None:
            ch, sh = ch_small, sh_small
        else:
            ch = np.where(small, ch_small, ch)
            sh = np.where(small, sh_small, sh)
    if ch is None:  # no element at all
        ch = sh = np.zeros(shape)
    ch, sh = np.asarray(ch), np.asarray(sh)
    if ch.shape != shape:  # as the switches of the all-branch form broadcast them
        ch, sh = np.broadcast_to(ch, shape).copy(), np.broadcast_to(sh, shape).copy()
    return ch, sh


#: Elements from which :func:`_numpy_propagators` evaluates each branch at its own elements only
#: (gathered, then put in place): the same values, less work where the arrays are large (a
#: forecast's thousand draws over its horizon), more where the gathers cost more than they save.
SUBSET_ELEMENTS: int = 4096


def _numpy_propagators_by_element(gamma, lam, t, w0sq, x, small, damp, shape):
    """:func:`_numpy_propagators` with each branch evaluated on the elements that take it."""
    full = lambda v: np.broadcast_to(v, shape)  # noqa: E731
    small = full(small)
    over = full(lam > 0) & ~small
    under = ~small & ~over
    ch, sh = np.empty(shape), np.empty(shape)
    if small.any():
        x_s, damp_s = full(x)[small], full(damp)[small]
        ch[small] = damp_s * _ch_series(x_s)
        sh[small] = damp_s * _sh_series(x_s, full(t)[small])
    if over.any():
        w0sq_o = None if w0sq is None else full(np.asarray(w0sq, dtype=float))[over]
        lam_o = full(lam)[over]
        ch[over], sh[over] = _over_branch(full(gamma)[over], lam_o, full(t)[over], lam_o > 0, NUMPY_OPS, w0sq_o)
    if under.any():
        ch[under], sh[under] = _under_branch(full(lam)[under], full(t)[under], full(damp)[under], NUMPY_OPS)
    return ch, sh


def error_trajectory(t, mass, damping, k_eff, e0, v0=0.0):
    """Error ``e(t) = p(t) - p*`` of the free damped oscillator.

    Parameters
    ----------
    t
        Time since the start in optimizer steps, shape ``(..., n_steps)`` or broadcastable.
    mass, damping, k_eff
        ``M_eff`` (>0), ``C_eff`` and ``K_eff``; broadcast against ``t`` (e.g. shape
        ``(n_runs, 1)`` for per-run values).
    e0
        Initial error ``R0 - p*`` (reward units).
    v0
        Initial velocity ``e'(0)`` (reward units per step); 0 gives the slow start.

    Returns
    -------
    Array or PyTensor variable of the broadcast shape.
    """
    t, mass, damping, k_eff, e0, v0 = as_numbers(t, mass, damping, k_eff, e0, v0)
    ops = ops_for(t, mass, damping, k_eff, e0, v0)
    gamma = damping / (2.0 * mass)
    w0sq = k_eff / mass
    lam = gamma * gamma - w0sq
    ch, sh = _propagators(gamma, lam, t, ops, w0sq)
    return e0 * ch + (v0 + gamma * e0) * sh


def reward_trajectory(t, mass, damping, k_eff, plateau, initial_reward, initial_velocity=0.0):
    """Mean reward ``R(t) = p* + e(t)`` with ``e(0) = R0 - p*`` (shapes broadcast)."""
    plateau, initial_reward = as_numbers(plateau, initial_reward)
    return plateau + error_trajectory(t, mass, damping, k_eff, initial_reward - plateau, initial_velocity)


def transition_entries(dt, mass, damping, k_eff):
    """Exact transition matrix ``(f11, f12, f21, f22)`` of ``(e, e')`` over an interval ``dt``.

    ``(e(t + dt), e'(t + dt)) = [[f11, f12], [f21, f22]] (e(t), e'(t))`` for the free
    oscillator; ``dt`` (optimizer steps) and the coefficients broadcast. NumPy or PyTensor.
    """
    # The propagators are used directly, not through ``error_trajectory`` with the unit
    # initial states (1, 0) and (0, 1): PyTensor's canonicalisation of the products with the
    # constant 0 through the branch switches does not terminate in usable time (minutes, for
    # a handful of nodes), which made the state-space model uncompilable.
    dt, mass, damping, k_eff = as_numbers(dt, mass, damping, k_eff)
    ops = ops_for(dt, mass, damping, k_eff)
    gamma = damping / (2.0 * mass)
    w2 = k_eff / mass
    ch, sh = _propagators(gamma, gamma * gamma - w2, dt, ops, w2)
    e1 = ch + gamma * sh
    return e1, sh, -w2 * sh, ch - gamma * sh


#: Bound on the factors of a grid trajectory: keeps unstable draws finite (their products
#: stay below the float64 range) so NUTS sees a huge misfit, never a NaN.
GRID_STATE_BOUND: float = 1e150


def error_trajectory_on_grid(n_points: int, dt, mass, damping, k_eff, e0, v0=0.0, t0=0.0):
    """``e(t0 + j dt)`` for ``j = 0 .. n_points - 1``, per run, by baby-step giant-step.

    With ``B = ceil(sqrt(n_points))`` and ``j = q B + r`` (``0 <= r < B``),
    ``(e, e')(t0 + j dt) = Phi(q B dt) (e, e')(t0 + r dt)``, where ``Phi`` is the exact
    transition matrix (:func:`transition_entries`). The closed form is evaluated at
    ``2 B`` times per run only; every grid value is then one multiply-add
    ``e = Phi_11(q B dt) e(t0 + r dt) + Phi_12(q B dt) e'(t0 + r dt)``. Same values as
    :func:`error_trajectory` (to rounding), but the log density and its gradient cost
    ``O(sqrt(n))`` transcendental evaluations per run instead of ``O(n)``.

    Parameters
    ----------
    n_points
        Number of grid points (static).
    dt
        Grid spacing in optimizer steps (scalar).
    mass, damping, k_eff, e0
        Per-run values, shape ``(n_runs,)``.
    v0
        Initial velocity ``e'(0)`` (scalar or ``(n_runs,)``).
    t0
        Time of the first grid point, steps since the start (scalar).

    Returns
    -------
    Array or PyTensor variable of shape ``(n_runs, n_points)``.
    """
    dt, mass, damping, k_eff, e0, v0, t0 = as_numbers(dt, mass, damping, k_eff, e0, v0, t0)
    ops = ops_for(dt, mass, damping, k_eff, e0, v0, t0)
    n_points = int(n_points)
    baby = max(int(np.ceil(np.sqrt(n_points))), 1)
    giant = -(-n_points // baby)
    bound = np.float64(GRID_STATE_BOUND)
    col = lambda x: x[:, None]  # noqa: E731
    # Baby steps: state at t0 + r dt, r < B, straight from the closed form.
    r = np.arange(baby, dtype=float)[None, :]
    f11, f12, f21, f22 = transition_entries(t0 + dt * r, col(mass), col(damping), col(k_eff))
    v0 = v0 + 0.0 * e0
    e_baby = ops.clip(f11 * col(e0) + f12 * col(v0), -bound, bound)  # (run, B)
    v_baby = ops.clip(f21 * col(e0) + f22 * col(v0), -bound, bound)
    # Giant steps: first row of Phi(q B dt), q < Q.
    q = np.arange(giant, dtype=float)[None, :]
    g11, g12, _, _ = transition_entries(dt * baby * q, col(mass), col(damping), col(k_eff))
    g11 = ops.clip(g11, -bound, bound)
    g12 = ops.clip(g12, -bound, bound)
    grid = g11[:, :, None] * e_baby[:, None, :] + g12[:, :, None] * v_baby[:, None, :]  # (run, Q, B)
    return grid.reshape((grid.shape[0], giant * baby))[:, :n_points]


def scheduled_error_trajectory(times, multipliers, mass, damping, k_eff, e0, lag=0.0):
    """Error ``e(t) = p(t) - p*`` of a run on a learning-rate schedule, at ``times``.

    The rate of interval ``(times[j-1], times[j]]`` (``times[-1] = 0``) is ``eta m[j]``
    (``m = multipliers``, its mean multiplier of the nominal rate ``eta``; ``1`` everywhere
    gives :func:`error_trajectory`). The coefficients at the nominal rate, ``M, C, K_eff``
    (with ``K_eff = a``, the gain), move with the rate as the lagged recursion's do
    (:func:`bayes_grpo.dynamics.coefficients.oscillator_coefficients` at gain ``a m``):
    ``K(m) = a m``, ``M(m) = M + a L^2 (m - 1) / 2``, ``C(m) = C - a L (m - 1)``; ``lag`` ``L``
    is the run's ``K_ref``, or 0 for the phenomenological form (``M`` and ``C`` free of the
    rate). As in torch's SGD and Adam the momentum buffer is kept apart from the rate: the
    state is ``(e, w)`` with ``e' = m w``, continuous across a change of rate, and on each
    interval ``M w' = -(C(m) w + a e)``; the exact transition of each interval is composed
    by prefix products (``log2 n`` rounds of 2x2 products, no loop over steps). Against
    :func:`bayes_grpo.dynamics.simulate.simulate_recursion` with the same multipliers (linear
    decay over 300 steps, mu 0-0.9, K_ref 1-2) its RMS error is 0.004-1.13 times the
    constant-rate law's from the constant-rate recursion, and at most 0.6 times the error of
    ignoring the schedule (``tests/test_scheduled_trajectory.py``).

    Parameters
    ----------
    times
        ``(n,)`` increasing times ``>= 0`` in optimizer steps (shared by all runs).
    multipliers
        ``(..., n)`` mean rate multiplier of each interval (``>= 0``).
    mass, damping, k_eff, e0, lag
        Per-run values at the nominal rate, shape ``(...)``; the system starts at rest at
        ``t = 0`` with error ``e0``.

    Returns
    -------
    Array or PyTensor variable of shape ``(..., n)``.
    """
    ops = ops_for(times, multipliers, mass, damping, k_eff, e0, lag)
    times = np.asarray(times, dtype=float)
    dt = np.diff(np.concatenate([[0.0], times]))
    col = lambda x: ops.asarray(x)[..., None]  # noqa: E731
    m = ops.asarray(multipliers)
    a = col(k_eff)
    mass_m = col(mass) + a * col(lag) ** 2 * (m - 1.0) / 2.0
    damp_m = col(damping) - a * col(lag) * (m - 1.0)
    gamma = damp_m / (2.0 * mass_m)
    w2 = a * m / mass_m
    ch, sh = _propagators(gamma, gamma * gamma - w2, dt, ops, w2)
    # transition of (e, w) over each interval: e' = m w, so the (e, e') entries f12 and f21
    # become m f12 and f21 / m = -(a / M) sh (finite at m = 0)
    p11, p12, p21, p22 = ch + gamma * sh, m * sh, -(a / mass_m) * sh, ch - gamma * sh
    bound = np.float64(GRID_STATE_BOUND)
    n = int(times.size)
    k = 1
    while k < n:
        # Hillis-Steele: P[j] <- P[j] P[j - k] for j >= k (window products double each round)
        a11, a12, a21, a22 = (x[..., k:] for x in (p11, p12, p21, p22))  # later
        b11, b12, b21, b22 = (x[..., :-k] for x in (p11, p12, p21, p22))  # earlier
        q11 = a11 * b11 + a12 * b21
        q12 = a11 * b12 + a12 * b22
        q21 = a21 * b11 + a22 * b21
        q22 = a21 * b12 + a22 * b22
        p11, p12, p21, p22 = (
            ops.concatenate([x[..., :k], ops.clip(q, -bound, bound)], axis=-1)
            for x, q in ((p11, q11), (p12, q12), (p21, q21), (p22, q22))
        )
        k *= 2
    return p11 * col(e0)  # (e, w)(t_j) = P[j] (e0, 0)


def scheduled_reward_trajectory(times, multipliers, mass, damping, k_eff, plateau, initial_reward, lag=0.0):
    """Mean reward ``p* + e(t)`` on a schedule (:func:`scheduled_error_trajectory`)."""
    col = lambda x: ops_for(x).asarray(x)[..., None]  # noqa: E731
    e = scheduled_error_trajectory(times, multipliers, mass, damping, k_eff, initial_reward - plateau, lag)
    return col(plateau) + e


#: A log whose first reward comes after this share of its last logged step (and after its first
#: logging interval) starts late: the law's start of training (``R0``, zero velocity) at step 0
#: lies before everything it logged.
LATE_START_FRACTION: float = 0.1


def starts_late(steps) -> bool:
    """Whether a log's steps (increasing, finite) start late (:data:`LATE_START_FRACTION`):
    a resumed run, or a step counter that did not start at 0."""
    t = np.asarray(steps, dtype=float)
    if t.size == 0:
        return False
    spacing = float(np.median(np.diff(t))) if t.size > 1 else 0.0
    return bool(t[0] > LATE_START_FRACTION * t[-1] and t[0] > spacing)


def single_exponential(t, plateau, initial_reward, time_constant):
    """Overdamped limit ``M -> 0``: ``R(t) = p* - (p* - R0) exp(-t / tau)``, ``tau = C/K_eff``."""
    t, plateau, initial_reward, time_constant = as_numbers(t, plateau, initial_reward, time_constant)
    ops = ops_for(t, plateau, initial_reward, time_constant)
    return plateau - (plateau - initial_reward) * ops.exp(-t / time_constant)


def logistic(t, plateau, initial_reward, rate, midpoint):
    """Logistic law ``R(t) = R0 + (p* - R0) / (1 + exp(-rate (t - midpoint)))`` (baseline).

    Note ``R(0)`` is not exactly ``R0`` unless ``rate * midpoint`` is large; ``R0`` is the
    lower asymptote.
    """
    t, plateau, initial_reward, rate, midpoint = as_numbers(t, plateau, initial_reward, rate, midpoint)
    ops = ops_for(t, plateau, initial_reward, rate, midpoint)
    z = ops.minimum(-rate * (t - midpoint), 700.0)
    return initial_reward + (plateau - initial_reward) / (1.0 + ops.exp(z))


__all__ = [
    "error_trajectory",
    "error_trajectory_on_grid",
    "transition_entries",
    "reward_trajectory",
    "scheduled_error_trajectory",
    "scheduled_reward_trajectory",
    "single_exponential",
    "logistic",
    "SERIES_THRESHOLD",
    "LATE_START_FRACTION",
    "starts_late",
]
