"""Least-squares point fits of the three reward laws (scipy), with robust multi-start.

* oscillator law (the damped oscillator with ``v0 = 0``): free ``plateau`` ``p*``,
  ``initial_reward`` ``R0``, damping ratio ``zeta`` and natural frequency ``w0`` (per step);
  the mass is normalised to 1, so ``C = 2 zeta w0`` and ``K_eff = w0^2`` (only ratios are
  identifiable from one curve);
* single exponential ``R = p* - (p* - R0) exp(-t / tau)`` (the overdamped limit);
* logistic ``R = R0 + (p* - R0) / (1 + exp(-rate (t - midpoint)))``.

Each fit starts from a grid of time scales (and damping ratios) spread over the span of the
data and keeps the best, so the slow-start (sigmoid-like) shape of the oscillator is found
rather than a local minimum near a single exponential. NaN observations are skipped.
Every fit works on the standardised rewards ``(y - mean) / sd`` (:func:`standardise_rewards`) and
gives its levels, curve and residuals back in reward units, so a reward on any scale or offset
(a success rate, a score out of 100, raw reward-model scores of 1e-6 or 1e4, 1000 plus small
changes) gets the same fitted curve up to that affine map and the same ``R^2``.
These are point fits for baselines, quick looks and initial values; the Bayesian model is in
:mod:`bayes_grpo.model`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from bayes_grpo.dynamics.trajectory import (
    logistic,
    reward_trajectory,
    scheduled_reward_trajectory,
    single_exponential,
)
from bayes_grpo.metrics import r2

#: Law names (the ``law`` field of :class:`LsqFit`).
OSCILLATOR: str = "oscillator"
SINGLE_EXPONENTIAL: str = "single_exponential"
LOGISTIC: str = "logistic"


@dataclass
class LsqFit:
    """Result of a least-squares fit of one law to one curve.

    Attributes
    ----------
    law
        ``"oscillator"``, ``"single_exponential"`` or ``"logistic"``.
    params
        Fitted parameters by name (reward units; times in optimizer steps).
    derived
        Derived quantities (e.g. ``tau`` or ``zeta``-dependent ones); may be empty.
    t, fitted, residuals
        Times of the finite observations, the fitted curve there and ``y - fitted``,
        shape ``(n,)``.
    sse
        Sum of squared residuals over the ``n`` finite points.
    n, n_params
        Number of points used and of free parameters.
    success
        Whether the optimiser reported convergence for the best start.
    at_bounds
        Parameters that ended on a search bound (e.g. ``zeta`` at 1e-3 or 1e3, ``w0`` at
        its limits): the law is then drawing something outside its range (an undamped
        oscillation, a step), and those values are bounds rather than estimates.
    """

    law: str
    params: dict[str, float]
    t: np.ndarray
    fitted: np.ndarray
    sse: float
    n: int
    n_params: int
    success: bool
    derived: dict[str, float] = field(default_factory=dict)
    at_bounds: list[str] = field(default_factory=list)
    residuals: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    _curve: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False)

    def predict(self, t) -> np.ndarray:
        """The fitted curve at times ``t`` (optimizer steps), any shape."""
        assert self._curve is not None
        return np.asarray(self._curve(np.asarray(t, dtype=float)), dtype=float)

    @property
    def r2(self) -> float:
        """Raw ``R^2`` on the fitted points (NaN for constant data)."""
        y = self.fitted + self.residuals
        return r2(y, self.fitted)

    @property
    def aic(self) -> float:
        """Gaussian AIC ``n log(SSE/n) + 2 k`` (k counts the noise variance too)."""
        return self.n * np.log(max(self.sse, 1e-300) / self.n) + 2.0 * (self.n_params + 1)

    @property
    def bic(self) -> float:
        """Gaussian BIC ``n log(SSE/n) + k log n``."""
        return self.n * np.log(max(self.sse, 1e-300) / self.n) + (self.n_params + 1) * np.log(
            self.n
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready summary (no arrays)."""
        return {
            "law": self.law,
            "params": dict(self.params),
            "derived": dict(self.derived),
            "sse": self.sse,
            "n": self.n,
            "r2": self.r2,
            "aic": self.aic,
            "bic": self.bic,
            "success": self.success,
            "at_bounds": list(self.at_bounds),
        }


def _finite(t, y, min_points: int) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(t, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if t.shape != y.shape:
        raise ValueError(f"t and y must have the same shape, got {t.shape} and {y.shape}")
    ok = np.isfinite(t) & np.isfinite(y)
    if ok.sum() < min_points:
        raise ValueError(f"need at least {min_points} finite points to fit, got {int(ok.sum())}")
    order = np.argsort(t[ok], kind="stable")
    t, y = t[ok][order], y[ok][order]
    if t[-1] == t[0]:
        # every point at one step: a law of time has nothing to draw (the fits returned a curve
        # with R^2 ~ 0, success True)
        raise ValueError(f"the points span no time: every finite point is at step {t[0]:g}")
    return t, y


def standardise_rewards(y: np.ndarray) -> tuple[np.ndarray, float, float]:
    """``(z, loc, scale)`` with ``z = (y - loc) / scale``: the rewards a fit works on.

    ``y`` finite; ``loc`` its mean, ``scale`` its standard deviation (1 for a constant ``y``).
    The fits here and :func:`bayes_grpo.predict.statespace.damping_profile` work on ``z`` and
    give their levels back as ``loc + scale * level``. The optimiser's tolerances and the
    bounds' margins are absolute, so a fit in reward units stopped early on rewards of order
    1e-9 (R^2 0.82 where the same curve in units of 1 gave 0.99), and sums of squares of a
    reward of 1000 lost the digits of its small changes.
    """
    loc = float(np.mean(y))
    scale = float(np.std(y))
    if not (np.isfinite(scale) and scale > 0.0):
        scale = 1.0
    return (y - loc) / scale, loc, scale


def _ends(t: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """(early mean, late mean, span, scale of y) used for starts and scaling."""
    k = max(2, len(y) // 10)
    early, late = float(np.mean(y[:k])), float(np.mean(y[-k:]))
    span = float(t[-1] - min(t[0], 0.0))
    span = span if span > 0 else 1.0
    scale = float(np.std(y)) or 1.0
    return early, late, span, scale


def _best(
    residual: Callable[[np.ndarray], np.ndarray],
    starts: list[np.ndarray],
    lower: np.ndarray,
    upper: np.ndarray,
    x_scale: np.ndarray,
    *,
    n_polish: int = 3,
    scout_nfev: int = 40,
):
    """Multi-start: a short run from every start, then full runs from the best ``n_polish``."""
    width = upper - lower
    margin = np.where(np.isfinite(width), 1e-9 * np.where(np.isfinite(width), width, 0.0), 0.0)

    def solve(x0, max_nfev):
        x0 = np.clip(x0, lower + margin, upper - margin)
        try:
            res = least_squares(
                residual,
                x0,
                bounds=(lower, upper),
                x_scale=x_scale,
                method="trf",
                max_nfev=max_nfev,
            )
        except ValueError:
            return None
        return res if np.all(np.isfinite(res.fun)) else None

    scouts = [r for r in (solve(x0, scout_nfev) for x0 in starts) if r is not None]
    if not scouts:
        raise ValueError("least-squares fit failed from every start")
    scouts.sort(key=lambda r: r.cost)
    best = None
    for scout in scouts[:n_polish]:
        res = solve(scout.x, 400) or scout
        if best is None or res.cost < best.cost:
            best = res
    return best


def fit_oscillator(t, y, *, n_zeta: int = 5, n_time: int = 6, multipliers=None) -> LsqFit:
    """Least-squares fit of the damped-oscillator law with a slow start (``v0 = 0``).

    ``R(t) = p* + e(t)``, ``e'' + 2 zeta w0 e' + w0^2 e = 0``, ``e(0) = R0 - p*``,
    ``e'(0) = 0``; ``t`` in optimizer steps from the start of training (``R0`` is the
    reward at ``t = 0``).

    Parameters
    ----------
    t, y
        Steps and rewards, shape ``(n,)``; NaN points skipped; at least 5 finite points.
    n_zeta, n_time
        Multi-start grid: ``n_zeta`` damping ratios in ``[0.15, 4]`` (log-spaced) times
        ``n_time`` time scales ``1/w0`` in ``[span/100, span]``.
    multipliers
        Optional ``(n,)`` learning-rate multipliers of the intervals ending at ``t`` (a run on a
        schedule: :func:`bayes_grpo.runset.clock.interval_multipliers`); the law then follows
        the schedule (:func:`~bayes_grpo.dynamics.trajectory.scheduled_reward_trajectory`,
        ``K_eff = w0^2 m``, mass and damping free of the rate, as the phenomenological
        model). Needs every ``t`` and ``y`` finite (each multiplier stays with its point, in
        any order); the fitted curve is evaluated at ``t`` only.

    Returns
    -------
    :class:`LsqFit` with ``params`` ``plateau``, ``initial_reward``, ``zeta``, ``w0`` and
    ``derived`` ``C`` (``= 2 zeta w0``), ``K_eff`` (``= w0^2``), ``tau`` (``C/K_eff``, the
    overdamped-limit time constant), all with mass 1.
    """
    if multipliers is not None:
        mult = np.asarray(multipliers, dtype=float)
        t_in, y_in = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
        if mult.shape != y_in.shape or t_in.shape != y_in.shape or not (
            np.isfinite(y_in).all() and np.isfinite(t_in).all()
        ):
            raise ValueError(
                "with multipliers, t and y must be finite and of their shape (one multiplier per point)"
            )
        # each multiplier belongs to its point: sorted with t as _finite sorts t and y (it was
        # left in the given order, so steps out of order paired rates with the wrong intervals)
        mult = mult.ravel()[np.argsort(t_in.ravel(), kind="stable")]
    t, y = _finite(t, y, 5)
    z, loc, unit = standardise_rewards(y)
    early, late, span, scale = _ends(t, z)

    def curve(tt, p):
        plateau, r0, log_zeta, log_w0 = p
        zeta, w0 = np.exp(log_zeta), np.exp(log_w0)
        if multipliers is not None:
            if not np.array_equal(tt, t):
                raise ValueError("a fit on a learning-rate schedule is evaluated at its own steps only")
            return scheduled_reward_trajectory(tt, mult, 1.0, 2.0 * zeta * w0, w0 * w0, plateau, r0)
        return reward_trajectory(tt, 1.0, 2.0 * zeta * w0, w0 * w0, plateau, r0)

    def residual(p):
        return curve(t, p) - z

    lo_w, hi_w = (
        np.log(1e-3 / span),
        np.log(20.0 / max(np.min(np.diff(t)) if t.size > 1 else 1.0, 1e-9)),
    )
    lower = np.array([-np.inf, -np.inf, np.log(1e-3), lo_w])
    upper = np.array([np.inf, np.inf, np.log(1e3), max(hi_w, lo_w + 1.0)])
    starts = [
        np.array([late, early, np.log(zeta0), -np.log(tau)])
        for zeta0, tau in itertools.product(
            np.geomspace(0.15, 4.0, n_zeta), np.geomspace(span / 100.0, span, n_time)
        )
    ]
    res = _best(residual, starts, lower, upper, np.array([scale, scale, 1.0, 1.0]))
    zeta, w0 = float(np.exp(res.x[2])), float(np.exp(res.x[3]))
    params = {**_levels(res.x, loc, unit), "zeta": zeta, "w0": w0}
    derived = {"C": 2.0 * zeta * w0, "K_eff": w0 * w0, "tau": 2.0 * zeta / w0}
    return _result(
        OSCILLATOR, params, derived, t, y, res, _in_units(curve, res.x, loc, unit), (lower, upper)
    )


def fit_single_exponential(t, y, *, n_time: int = 8) -> LsqFit:
    """Least-squares fit of ``R(t) = p* - (p* - R0) exp(-t / tau)``.

    Parameters
    ----------
    t, y
        Steps and rewards, shape ``(n,)``; NaN points skipped; at least 4 finite points.
    n_time
        Number of starting time constants in ``[span/100, 2 span]``.

    Returns
    -------
    :class:`LsqFit` with ``params`` ``plateau``, ``initial_reward``, ``tau`` (steps).
    """
    t, y = _finite(t, y, 4)
    z, loc, unit = standardise_rewards(y)
    early, late, span, scale = _ends(t, z)

    def curve(tt, p):
        return single_exponential(tt, p[0], p[1], np.exp(p[2]))

    def residual(p):
        return curve(t, p) - z

    lower = np.array([-np.inf, -np.inf, np.log(span * 1e-4)])
    upper = np.array([np.inf, np.inf, np.log(span * 1e3)])
    starts = [
        np.array([late, early, np.log(tau)])
        for tau in np.geomspace(span / 100.0, 2.0 * span, n_time)
    ]
    res = _best(residual, starts, lower, upper, np.array([scale, scale, 1.0]))
    params = {**_levels(res.x, loc, unit), "tau": float(np.exp(res.x[2]))}
    return _result(
        SINGLE_EXPONENTIAL,
        params,
        {},
        t,
        y,
        res,
        _in_units(curve, res.x, loc, unit),
        (lower, upper),
    )


def fit_logistic(t, y, *, n_rate: int = 5, n_mid: int = 5) -> LsqFit:
    """Least-squares fit of ``R(t) = R0 + (p* - R0) / (1 + exp(-rate (t - midpoint)))``.

    Parameters
    ----------
    t, y
        Steps and rewards, shape ``(n,)``; NaN points skipped; at least 5 finite points.
    n_rate, n_mid
        Multi-start grid: rates ``1/scale`` for scales in ``[span/100, span]`` times
        midpoints spread over the data.

    Returns
    -------
    :class:`LsqFit` with ``params`` ``plateau``, ``initial_reward`` (lower asymptote),
    ``rate`` (per step) and ``midpoint`` (step).
    """
    t, y = _finite(t, y, 5)
    z, loc, unit = standardise_rewards(y)
    early, late, span, scale = _ends(t, z)

    def curve(tt, p):
        return logistic(tt, p[0], p[1], np.exp(p[2]), p[3])

    def residual(p):
        return curve(t, p) - z

    lower = np.array([-np.inf, -np.inf, np.log(1e-3 / span), t[0] - 2.0 * span])
    upper = np.array([np.inf, np.inf, np.log(1e3 / span), t[-1] + 2.0 * span])
    starts = [
        np.array([late, early, -np.log(s), m])
        for s, m in itertools.product(
            np.geomspace(span / 100.0, span, n_rate),
            np.linspace(t[0], t[0] + 0.8 * (t[-1] - t[0]), n_mid),
        )
    ]
    res = _best(residual, starts, lower, upper, np.array([scale, scale, 1.0, span / 10.0]))
    params = {
        **_levels(res.x, loc, unit),
        "rate": float(np.exp(res.x[2])),
        "midpoint": float(res.x[3]),
    }
    return _result(
        LOGISTIC, params, {}, t, y, res, _in_units(curve, res.x, loc, unit), (lower, upper)
    )


def _levels(x: np.ndarray, loc: float, unit: float) -> dict[str, float]:
    """``plateau`` and ``initial_reward`` (the first two entries of every law's vector ``x``,
    fitted on the standardised rewards) in reward units."""
    return {"plateau": loc + unit * float(x[0]), "initial_reward": loc + unit * float(x[1])}


def _in_units(curve, x: np.ndarray, loc: float, unit: float) -> Callable[[np.ndarray], np.ndarray]:
    """The curve fitted on the standardised rewards (``curve(tt, x)``) in reward units."""
    return lambda tt: loc + unit * np.asarray(curve(tt, x), dtype=float)


def _result(law, params, derived, t, y, res, curve, bounds) -> LsqFit:
    """Assemble an :class:`LsqFit`; ``params`` are in the order of the optimiser's vector."""
    fitted = np.asarray(curve(t), dtype=float)
    resid = y - fitted
    lower, upper = bounds
    width = np.where(np.isfinite(upper - lower), upper - lower, 1.0)
    near = (np.abs(res.x - lower) <= 1e-6 * width) | (np.abs(upper - res.x) <= 1e-6 * width)
    at_bounds = [name for name, flag in zip(params, near) if flag]
    return LsqFit(
        law=law,
        params=params,
        derived=derived,
        t=t,
        fitted=fitted,
        sse=float(np.sum(resid**2)),
        n=int(t.size),
        n_params=len(params),
        success=bool(res.success),
        at_bounds=at_bounds,
        residuals=resid,
        _curve=curve,
    )


def fit_all(t, y) -> dict[str, LsqFit]:
    """All three laws fitted to one curve: ``{law: LsqFit}``."""
    return {
        OSCILLATOR: fit_oscillator(t, y),
        SINGLE_EXPONENTIAL: fit_single_exponential(t, y),
        LOGISTIC: fit_logistic(t, y),
    }


__all__ = [
    "LsqFit",
    "standardise_rewards",
    "OSCILLATOR",
    "SINGLE_EXPONENTIAL",
    "LOGISTIC",
    "fit_oscillator",
    "fit_single_exponential",
    "fit_logistic",
    "fit_all",
]
