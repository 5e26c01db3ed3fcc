"""Thin adapter over the law fits of ``bayes_grpo.dynamics.lsq`` and ``bayes_grpo.metrics``.

The diagnostics need three things from a reward-like series: its saturation plateau and
time constant (single exponential, the overdamped limit), its damping ratio (the
damped-oscillator law), and whether it has a trend beyond noise. This module calls the
project's fitters and returns plain dicts; it does no fitting of its own. A fit that fails
returns None (the caller says so in its result).

Uncertainty of a fit (refitting every bootstrap replicate would cost seconds per run) is
the Gauss-Newton (Laplace) approximation at the optimum: ``cov = s^2 (J^T J)^-1`` with
``J`` the Jacobian of the fitted curve in the fitting parameters (central differences) and
``s^2`` the residual variance inflated by ``(1 + rho) / (1 - rho)`` for the lag-1
autocorrelation ``rho`` of the residuals (serially correlated noise carries less
information than white noise). Standard deviations are on the scale the fitter works on:
``plateau`` and ``initial_reward`` linear, ``tau``, ``zeta`` and ``w0`` logarithmic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bayes_grpo.dynamics.trajectory import reward_trajectory, single_exponential

_FIT_ERRORS = (
    RuntimeError,
    ValueError,
    FloatingPointError,
    KeyError,
    AttributeError,
    np.linalg.LinAlgError,
)


#: Eigenvalues of ``J^T J`` below this share of the largest are directions the curve does
#: not depend on (numpy's own pseudo-inverse cut-off).
NULL_RCOND = 1e-15
#: A parameter loading more than this on such a direction is not identified (sd = inf).
NULL_LOADING = 1e-6


def laplace_sd(
    curve: Callable[[np.ndarray], np.ndarray], theta: np.ndarray, residuals: np.ndarray
) -> np.ndarray:
    """Standard deviations of the fitting parameters ``theta`` (Gauss-Newton, see module doc).

    Parameters
    ----------
    curve
        ``curve(theta) -> fitted values (n,)``.
    theta
        Parameters at the optimum, shape ``(k,)``.
    residuals
        ``y - curve(theta)``, shape ``(n,)``.

    Returns
    -------
    numpy.ndarray
        ``(k,)``; ``inf`` for a parameter on a direction the curve does not depend on.
    """
    theta = np.asarray(theta, dtype=float)
    n, k = residuals.size, theta.size
    jac = np.empty((n, k))
    for j in range(k):
        h = 1e-6 * max(1.0, abs(theta[j]))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        jac[:, j] = (curve(up) - curve(down)) / (2 * h)
    r = residuals - residuals.mean()
    rho = float(np.sum(r[1:] * r[:-1]) / np.sum(r * r)) if n > 2 and np.sum(r * r) > 0 else 0.0
    inflation = float(np.clip((1 + rho) / (1 - rho), 1.0, 25.0)) if rho < 1 else 25.0
    s2 = float(np.sum(residuals**2)) / max(n - k, 1) * inflation
    info = jac.T @ jac
    cov = s2 * np.linalg.pinv(info, rcond=NULL_RCOND, hermitian=True)
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    # pinv gives a direction the curve does not depend on (zeta of a constant reward) zero
    # variance; the data say nothing there, so every parameter on it is unbounded
    eigval, eigvec = np.linalg.eigh(info)
    null = eigval <= NULL_RCOND * max(float(eigval.max()), 0.0)
    if null.any():
        sd[(np.abs(eigvec[:, null]) > NULL_LOADING).any(axis=1)] = np.inf
    return sd


def fit_saturation(steps: np.ndarray, values: np.ndarray) -> dict[str, Any] | None:
    """Single-exponential fit ``R(t) = p* - (p* - R0) exp(-t / tau)`` of a series.

    Returns
    -------
    dict or None
        ``plateau``, ``initial_reward``, ``time_constant`` (steps), ``fitted`` (n,), ``sse``,
        ``plateau_sd`` and ``log_time_constant_sd`` (Gauss-Newton), ``bic``; None when the
        fit fails.
    """
    from bayes_grpo.dynamics import lsq

    t = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    try:
        res = lsq.fit_single_exponential(t, y)
        p = res.params
        theta = np.array([p["plateau"], p["initial_reward"], np.log(p["tau"])])
        fitted = np.asarray(res.fitted, dtype=float)
        sd = laplace_sd(
            lambda th: np.asarray(single_exponential(t, th[0], th[1], np.exp(th[2]))),
            theta,
            y - fitted,
        )
    except _FIT_ERRORS:
        return None
    out = {
        "plateau": float(p["plateau"]),
        "initial_reward": float(p["initial_reward"]),
        "time_constant": float(p["tau"]),
        "fitted": fitted,
        "sse": float(res.sse),
        "plateau_sd": float(sd[0]),
        "log_time_constant_sd": float(sd[2]),
        "bic": float(res.bic),
    }
    if not (np.isfinite(out["plateau"]) and np.isfinite(out["time_constant"])):
        return None
    return out


def fit_oscillator(steps: np.ndarray, values: np.ndarray) -> dict[str, Any] | None:
    """Damped-oscillator fit of a reward series (``lsq.fit_oscillator``, mass 1, ``v0 = 0``).

    Returns
    -------
    dict or None
        ``zeta`` (damping ratio), ``w0`` (rad/step), ``plateau``, ``initial_reward``,
        ``fitted`` (n,), ``sse``, ``bic``, ``log_zeta_sd`` (Gauss-Newton) and ``at_bounds``
        (parameters that ended on a search bound of ``lsq.fit_oscillator``: their values are
        bounds, not estimates); None when the fit fails.
    """
    from bayes_grpo.dynamics import lsq

    t = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    try:
        res = lsq.fit_oscillator(t, y)
        p = res.params
        theta = np.array([p["plateau"], p["initial_reward"], np.log(p["zeta"]), np.log(p["w0"])])
        fitted = np.asarray(res.fitted, dtype=float)

        def curve(th):
            z, w = np.exp(th[2]), np.exp(th[3])
            return np.asarray(reward_trajectory(t, 1.0, 2.0 * z * w, w * w, th[0], th[1]))

        with np.errstate(all="ignore"):
            sd = laplace_sd(curve, theta, y - fitted)
    except _FIT_ERRORS:
        return None
    if not np.isfinite(p["zeta"]):
        return None
    return {
        "zeta": float(p["zeta"]),
        "w0": float(p["w0"]),
        "plateau": float(p["plateau"]),
        "initial_reward": float(p["initial_reward"]),
        "fitted": fitted,
        "sse": float(res.sse),
        "bic": float(res.bic),
        "log_zeta_sd": float(sd[2]),
        "at_bounds": [str(name) for name in res.at_bounds],
    }


def noise_sd(values: np.ndarray) -> float:
    """White-noise standard deviation from first differences (``bayes_grpo.metrics.noise_variance``, robust)."""
    from bayes_grpo.metrics import noise_variance

    return float(np.sqrt(noise_variance(np.asarray(values, dtype=float), robust=True)))


def has_trend(steps: np.ndarray, values: np.ndarray) -> bool:
    """Whether the series has a visible trend beyond noise (``bayes_grpo.metrics.has_trend``)."""
    from bayes_grpo.metrics import has_trend as _has_trend

    return bool(_has_trend(np.asarray(steps, dtype=float), np.asarray(values, dtype=float)))
