"""How well one reward curve identifies the damping ratio and frequency of the oscillator.

The phenomenological law draws the normalised error curve ``f(t) = e(t) / e(0)`` (``e'(0) =
0``) from two shape parameters, the damping ratio ``zeta`` and the natural frequency ``w0``;
the plateau and the initial reward enter linearly, ``R(t) = p* (1 - f(t)) + R0 f(t)``. Far
from critical damping the curve stops depending on ``zeta``:

* overdamped (``zeta >> 1``): only the slow rate ``~ w0 / (2 zeta)`` is visible; the fast
  root ``~ 2 zeta w0`` ends within a few steps, so every larger ``zeta`` at the same slow
  rate draws the same single-exponential curve;
* nearly undamped (``zeta -> 0``): the envelope ``exp(-zeta w0 t)`` is flat over the run, so
  every smaller ``zeta`` draws the same sustained oscillation.

A prior that is smooth in ``(log zeta, log w0)`` (the defaults: log-normal) puts a fixed
share of its mass on each of these two ridges, and the ridges, being long, win by volume
(the Occam factor) whenever the data favour a curve in between only mildly: the posterior
then averages an underdamped rise-and-overshoot with single-exponential curves, and its mean
trajectory is no curve the data show (benchmarks/results/REAL_RUNS_FIT_NOTES.md).

:func:`shape_information_log_density` is the log of Jeffreys' density for the shape,
``0.5 log det I(log zeta, log w0)``, with ``I`` the Fisher information of the curve per point
and per unit noise *after* the plateau and initial reward have absorbed what they can (the
derivatives are projected off ``span{1, f}``), on the run's own design (its observed steps).
It depends on when the run was logged, never on its rewards, and is invariant
to how the shape is parameterised: added to the log prior it makes the prior count
*distinguishable curves* rather than parameter volume, so the two ridges, where ``det I``
vanishes, no longer carry mass out of proportion to the curves they draw. The derivatives are
exact closed forms (:func:`unit_curve_and_shape_derivatives`: one evaluation of the
oscillator's propagators), written once for NumPy and PyTensor, so NUTS differentiates the
same expression.
"""

from __future__ import annotations

import numpy as np

from bayes_grpo.dynamics._backend import ops_for
from bayes_grpo.dynamics.trajectory import MAX_EXPONENT, SERIES_THRESHOLD, _propagators

#: Most times of a run's design the shape information is evaluated on (longer designs are
#: thinned evenly: the information per point is what enters, and the cost stays bounded).
SHAPE_INFORMATION_MAX_POINTS: int = 200
#: Floor of ``det I`` (its log is the density's floor, far below any curve a run can show).
_DET_FLOOR: float = 1e-300


def design_times(steps, max_points: int = SHAPE_INFORMATION_MAX_POINTS) -> np.ndarray:
    """The observed steps of a run (or of an LLM's runs), thinned evenly to ``max_points``.

    ``steps``: ``(p,)`` observed optimizer steps (any order; NaN ignored). Returns the sorted
    unique steps, or ``max_points`` of them evenly spread by rank (first and last kept).
    """
    t = np.asarray(steps, dtype=float)
    t = np.unique(t[np.isfinite(t)])
    if t.size > max_points:
        t = t[np.unique(np.round(np.linspace(0, t.size - 1, max_points)).astype(int))]
    return t


def padded_designs(steps_per_curve, max_points: int = SHAPE_INFORMATION_MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """``(n, p)`` design times (:func:`design_times` of each entry of ``steps_per_curve``, a
    sequence of ``n`` step arrays) padded with zeros, and their ``(n, p)`` 0/1 weights."""
    designs = [design_times(s, max_points) for s in steps_per_curve]
    width = max((d.size for d in designs), default=0)
    t, w = np.zeros((len(designs), width)), np.zeros((len(designs), width))
    for i, d in enumerate(designs):
        t[i, : d.size], w[i, : d.size] = d, 1.0
    return t, w


def unit_curve_and_shape_derivatives(log_zeta, log_w0, t, ops):
    """The unit curve ``f(t)`` and its exact derivatives in ``log zeta`` and ``log w0``.

    ``f = exp(-gamma t) (C + gamma S)`` with ``gamma = zeta w0``, ``C = ch``, ``S = sh`` of
    :func:`bayes_grpo.dynamics.trajectory._propagators` (``e(0) = 1``, ``e'(0) = 0``). Then

    * ``df / dlog w0 = t f'(t) = -t w0^2 exp(-gamma t) S`` (at a fixed ``zeta`` the curve
      depends on ``w0 t`` only);
    * ``df / dlog zeta = gamma df/dgamma``, and ``y = df/dgamma`` (at a fixed ``w0``) solves
      ``y'' + 2 gamma y' + w0^2 y = -2 f'``, ``y(0) = y'(0) = 0``, whose solution is
      ``y = w0^2 exp(-gamma t) (t C - S) / lam`` (``lam = gamma^2 - w0^2``), an entire
      function of ``x = lam t^2``: ``w0^2 exp(-gamma t) t^3 sum_k x^(k-1) 2k / (2k+1)!``,
      the series used where ``|x|`` is small (smooth through critical damping).

    One evaluation of the propagators instead of the five of central differences, and no
    truncation error. Shapes broadcast; returns ``(f, df/dlog zeta, df/dlog w0)``.
    """
    w0 = ops.exp(log_w0)
    w0sq = w0 * w0
    gamma = ops.exp(log_zeta) * w0
    lam = gamma * gamma - w0sq
    ch, sh = _propagators(gamma, lam, t, ops, w0sq)
    x = lam * t * t
    small = ops.abs(x) < SERIES_THRESHOLD
    xs = ops.where(small, x, 0.0)
    damp = ops.exp(ops.minimum(-gamma * t, MAX_EXPONENT))
    series = xs * (1 / 45360 + xs * (1 / 3991680 + xs / 518918400))
    q_series = damp * t * t * t * (1 / 3 + xs * (1 / 30 + xs * (1 / 840 + series)))
    # the closed form divides by lam: kept finite where the series is selected (a NaN in an
    # unselected branch would still poison PyTensor's gradient)
    q_closed = (t * ch - sh) / ops.where(small, 1.0, lam)
    q = ops.where(small, q_series, q_closed)
    return ch + gamma * sh, gamma * w0sq * q, -t * w0sq * sh


def shape_information_log_density(log_zeta, log_w0, t, weight=None):
    """Log of Jeffreys' density for the oscillator's shape, ``0.5 log det I`` (module docstring).

    Parameters
    ----------
    log_zeta, log_w0
        Natural logs of the damping ratio and of the natural frequency (rad/step), shape
        ``(n,)``; NumPy arrays or PyTensor variables.
    t
        ``(n, p)`` times of each curve's design (optimizer steps since the start, ``R0`` at
        ``t = 0``; e.g. :func:`design_times`), padded where a design has fewer points.
    weight
        ``(n, p)`` 1 for a design point, 0 for padding (default: all 1).

    Returns
    -------
    ``(n,)`` log density up to an additive constant (dimensionless): the information is per
    design point, so designs of different lengths over the same span compare.
    """
    ops = ops_for(log_zeta, log_w0, t, weight)
    if ops.name == "numpy":
        log_zeta, log_w0, t = (np.asarray(v, dtype=float) for v in (log_zeta, log_w0, t))
        weight = np.ones_like(t) if weight is None else np.asarray(weight, dtype=float)
    elif weight is None:
        weight = ops.asarray(t) * 0.0 + 1.0
    f, d_zeta, d_w0 = unit_curve_and_shape_derivatives(log_zeta[..., None], log_w0[..., None], t, ops)
    return projected_log_det(f, d_zeta, d_w0, weight, ops)


def projected_log_det(f, d_zeta, d_w0, weight, ops):
    """``0.5 log det I`` from the unit curve and its two shape derivatives on a design.

    ``f, d_zeta, d_w0, weight``: ``(n, p)``; ``I`` is the per-point Gram matrix of the two
    derivatives after projecting them off ``span{1, f}`` (what the plateau and the initial
    reward absorb). Returns ``(n,)``.
    """
    n = weight.sum(axis=-1, keepdims=True)

    def centred(x):
        return (x - (weight * x).sum(axis=-1, keepdims=True) / n) * weight

    def dot(x, y):
        return (x * y).sum(axis=-1, keepdims=True)

    fc, jz, jw = centred(f), centred(d_zeta), centred(d_w0)
    ff = ops.maximum(dot(fc, fc), _DET_FLOOR)
    # what is left of each derivative once the plateau and the initial reward (span{1, f})
    # have absorbed what they can
    rz = jz - fc * dot(fc, jz) / ff
    rw = jw - fc * dot(fc, jw) / ff
    gzz, gww, gzw = (dot(x, y)[..., 0] / n[..., 0] for x, y in ((rz, rz), (rw, rw), (rz, rw)))
    return 0.5 * ops.log(ops.maximum(gzz * gww - gzw * gzw, _DET_FLOOR))


__all__ = [
    "SHAPE_INFORMATION_MAX_POINTS",
    "design_times",
    "padded_designs",
    "projected_log_det",
    "shape_information_log_density",
    "unit_curve_and_shape_derivatives",
]
