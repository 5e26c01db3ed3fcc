"""Thin adapter over the law fits of ``bayes_grpo.dynamics.lsq`` and ``bayes_grpo.metrics``.

The diagnostics need three things from a reward-like series: its saturation plateau and
time constant (single exponential, the overdamped limit), its damping ratio (the
damped-oscillator law), and whether it has a trend beyond noise. This module calls the
project's fitters and returns plain dicts; it does no fitting of its own. A fit that
fails returns None (the caller says so in its result).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _params(result: Any) -> dict[str, float]:
    params = getattr(result, "params", None)
    if params is None and isinstance(result, dict):
        params = result.get("params", result)
    return {str(k): float(v) for k, v in dict(params or {}).items() if np.isscalar(v)}


def _fitted(result: Any) -> np.ndarray:
    for name in ("fitted", "curve", "yhat", "fitted_curve"):
        value = getattr(result, name, None)
        if value is None and isinstance(result, dict):
            value = result.get(name)
        if value is not None:
            return np.asarray(value, dtype=float)
    raise AttributeError("lsq result has no fitted curve")


def _get(params: dict[str, float], *names: str) -> float:
    for name in names:
        if name in params:
            return params[name]
    raise KeyError(f"none of {names} in fit parameters {sorted(params)}")


def fit_saturation(steps: np.ndarray, values: np.ndarray) -> dict[str, Any] | None:
    """Single-exponential fit ``R(t) = p* - (p* - R0) exp(-t / tau)`` of a series.

    Returns
    -------
    dict or None
        ``plateau``, ``initial_reward``, ``time_constant`` (steps), ``fitted`` (n,), ``sse``;
        None when the fit fails.
    """
    from bayes_grpo.dynamics import lsq

    try:
        res = lsq.fit_single_exponential(np.asarray(steps, dtype=float), np.asarray(values, dtype=float))
        p = _params(res)
        out = {
            "plateau": _get(p, "plateau", "p_star"),
            "initial_reward": _get(p, "initial_reward", "R0", "r0"),
            "time_constant": _get(p, "time_constant", "tau"),
            "fitted": _fitted(res),
            "sse": float(getattr(res, "sse", np.nan)),
        }
    except (RuntimeError, ValueError, FloatingPointError, KeyError, AttributeError, np.linalg.LinAlgError):
        return None
    if not (np.isfinite(out["plateau"]) and np.isfinite(out["time_constant"])):
        return None
    return out


def fit_oscillator(steps: np.ndarray, values: np.ndarray) -> dict[str, Any] | None:
    """Damped-oscillator fit of a reward series.

    Returns
    -------
    dict or None
        ``zeta`` (damping ratio), ``plateau``, ``fitted`` (n,), ``sse``; None when the fit fails.
    """
    from bayes_grpo.dynamics import lsq

    try:
        res = lsq.fit_oscillator(np.asarray(steps, dtype=float), np.asarray(values, dtype=float))
        p = _params(res)
        zeta = p.get("zeta")
        if zeta is None:
            from bayes_grpo.dynamics.coefficients import damping_ratio

            zeta = float(damping_ratio(_get(p, "mass", "M", "M_eff"), _get(p, "damping", "C", "C_eff"), _get(p, "k_eff", "K", "K_eff")))
        out = {"zeta": float(zeta), "plateau": _get(p, "plateau", "p_star"), "fitted": _fitted(res), "sse": float(getattr(res, "sse", np.nan))}
    except (RuntimeError, ValueError, FloatingPointError, KeyError, AttributeError, np.linalg.LinAlgError):
        return None
    return out


def has_trend(steps: np.ndarray, values: np.ndarray) -> bool:
    """Whether the series has a visible trend beyond noise (``bayes_grpo.metrics.has_trend``)."""
    from bayes_grpo.metrics import has_trend as _has_trend

    return bool(_has_trend(np.asarray(steps, dtype=float), np.asarray(values, dtype=float)))
