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

from bayes_grpo.dynamics._backend import ops_for

#: ``|lam t^2|`` below which the Taylor series is used (truncation error < 1e-15 relative).
SERIES_THRESHOLD: float = 0.1
#: Largest exponent evaluated; keeps unstable trajectories (and unselected branches) finite:
#: they still grow to ~1e260, with headroom so no product of branch terms overflows.
MAX_EXPONENT: float = 600.0


def _propagators(gamma, lam, t, ops, w0sq=None):
    """``(exp(-gamma t) ch, exp(-gamma t) sh)`` for broadcast ``gamma, lam, t``.

    ``w0sq = K_eff / M`` (``= gamma^2 - lam``), when given, lets the slow overdamped rate
    ``s - gamma`` be computed without cancellation as ``-w0sq / (s + gamma)``.
    """
    x = lam * t * t
    small = ops.abs(x) < SERIES_THRESHOLD
    # Taylor series in x = lam t^2 (exact in the limit lam -> 0).
    damp = ops.exp(ops.minimum(-gamma * t, MAX_EXPONENT))
    # Unselected branches are kept finite (no 0/0, no overflow): a NaN there would still
    # poison PyTensor gradients through the switch (0 * NaN = NaN).
    x = ops.where(small, x, 0.0)
    ch_series = 1.0 + x * (1 / 2 + x * (1 / 24 + x * (1 / 720 + x * (1 / 40320 + x / 3628800))))
    sh_series = t * (1.0 + x * (1 / 6 + x * (1 / 120 + x * (1 / 5040 + x * (1 / 362880 + x / 39916800)))))
    # Overdamped: combine exponents, exp(-g t) cosh(s t) = (exp((s-g) t) + exp(-(s+g) t)) / 2.
    over = lam > 0
    s = ops.sqrt(ops.where(over, lam, 1.0))
    slow = s - gamma
    if w0sq is not None:
        # s - gamma = -w0^2 / (s + gamma): no cancellation when gamma >> w0 (strong damping).
        slow = ops.where(gamma > 0, -w0sq / (s + ops.where(gamma > 0, gamma, 1.0)), slow)
    up = ops.exp(ops.minimum(slow * t, MAX_EXPONENT))
    down = ops.exp(ops.minimum(-(s + gamma) * t, MAX_EXPONENT))
    ch_over = (up + down) / 2.0
    sh_over = (up - down) / (2.0 * s)
    # Underdamped: exp(-g t) cos(w t), exp(-g t) sin(w t) / w.
    w = ops.sqrt(ops.where(lam < 0, -lam, 1.0))
    ch_under = damp * ops.cos(w * t)
    sh_under = damp * ops.sin(w * t) / w
    damp_small = ops.where(small, damp, 1.0)  # large damp only where the series is used
    ch = ops.where(small, damp_small * ch_series, ops.where(over, ch_over, ch_under))
    sh = ops.where(small, damp_small * sh_series, ops.where(over, sh_over, sh_under))
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
    ops = ops_for(t, mass, damping, k_eff, e0, v0)
    gamma = damping / (2.0 * mass)
    w0sq = k_eff / mass
    lam = gamma * gamma - w0sq
    ch, sh = _propagators(gamma, lam, t, ops, w0sq)
    return e0 * ch + (v0 + gamma * e0) * sh


def reward_trajectory(t, mass, damping, k_eff, plateau, initial_reward, initial_velocity=0.0):
    """Mean reward ``R(t) = p* + e(t)`` with ``e(0) = R0 - p*`` (shapes broadcast)."""
    return plateau + error_trajectory(t, mass, damping, k_eff, initial_reward - plateau, initial_velocity)


def single_exponential(t, plateau, initial_reward, time_constant):
    """Overdamped limit ``M -> 0``: ``R(t) = p* - (p* - R0) exp(-t / tau)``, ``tau = C/K_eff``."""
    ops = ops_for(t, plateau, initial_reward, time_constant)
    return plateau - (plateau - initial_reward) * ops.exp(-t / time_constant)


def logistic(t, plateau, initial_reward, rate, midpoint):
    """Logistic law ``R(t) = R0 + (p* - R0) / (1 + exp(-rate (t - midpoint)))`` (baseline).

    Note ``R(0)`` is not exactly ``R0`` unless ``rate * midpoint`` is large; ``R0`` is the
    lower asymptote.
    """
    ops = ops_for(t, plateau, initial_reward, rate, midpoint)
    z = ops.minimum(-rate * (t - midpoint), 700.0)
    return initial_reward + (plateau - initial_reward) / (1.0 + ops.exp(z))


__all__ = [
    "error_trajectory",
    "reward_trajectory",
    "single_exponential",
    "logistic",
    "SERIES_THRESHOLD",
]
