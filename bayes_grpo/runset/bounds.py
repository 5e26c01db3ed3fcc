"""Reward bounds of a fit: a reward known to lie in ``[lo, hi]`` (a success rate in ``[0, 1]``).

A fit setting (``GRPODynamicsModel(reward_bounds=(lo, hi))``, ``bayes-grpo fit --reward-bounds
LO HI``), saved with the fit. Without bounds the plateau ``p*`` and initial reward ``R0`` have
normal priors on the whole line, and runs that end before their plateau (a late take-off) can
put ``p*`` far outside the reward's range (``models/tiny.nc`` before it was fitted with bounds:
``p*`` 3.44 on a 0-1 accuracy). With bounds each reward-valued level of the law is the image
of the unbounded one under :func:`bounded_value`, a logistic map of ``(-inf, inf)`` onto
``(lo, hi)`` with slope 1 at the middle of the range: the priors (``plateau``,
``initial_reward``, their run-level offsets and the ``by_group`` offsets) are those of the
unbounded model on that latent value, and every LLM's and run's ``p*`` and ``R0`` lie strictly
inside the bounds. The latent centre of each prior is :func:`latent_value` of the data's guess
(the early / late reward, moved :data:`CENTRE_MARGIN` of the range inside the bounds), so the
prior's median is that guess, as without bounds.

Without bounds (``None``, the default) the model is exactly the unbounded one: same graph,
same settings and configuration hash, so fits saved before bounds existed load unchanged.

NumPy and SciPy only, in the run-set area (the reward's contract), so that the forecast
(``predict.forecast``: its ``reward_bounds``) checks and maps bounds with these functions
without importing the model area (ArviZ, PyMC).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from bayes_grpo.constants import RUN_DIM, STEP_DIM
from bayes_grpo.runset.core import RunSetError

#: A data guess at (or beyond) a bound is moved this share of the range inside it before it
#: centres a prior (the latent value of a bound is infinite).
CENTRE_MARGIN: float = 0.01

#: A logged reward this share of the range beyond a bound still counts as inside (float
#: roundoff of a mean of 0/1 rewards).
BOUND_TOLERANCE: float = 1e-9


def check_reward_bounds(bounds: Any, *, error: type[Exception] = ValueError) -> tuple[float, float] | None:
    """``bounds`` as ``(lo, hi)`` floats, or None for None. Anything else than two finite
    numbers with ``lo < hi`` is an ``error`` (a ``ValueError`` by default; the forecast's
    ``ForecastError``) naming the value (a reward bounded on one side only is fitted without
    bounds). The one check of bounds given to the fit, the law comparison, the invariance
    test and the forecast's entry points."""
    if bounds is None:
        return None
    ok = not isinstance(bounds, str | bytes | dict) and np.ndim(bounds) == 1 and len(bounds) == 2
    if ok:
        # the values as numbers; the message names the value given ((0, inf), not [0, inf])
        values = [b.item() if isinstance(b, np.generic) else b for b in bounds]
        ok = all(isinstance(b, numbers.Real) and not isinstance(b, bool) and np.isfinite(b) for b in values)
    if not ok:
        raise error(
            f"reward bounds must be two finite numbers (lo, hi), e.g. (0, 1) for a success rate; got {bounds!r:.80}"
        )
    lo, hi = float(values[0]), float(values[1])
    if not lo < hi:
        raise error(f"reward bounds must satisfy lo < hi; got ({lo:g}, {hi:g})")
    return lo, hi


def bounds_text(bounds: tuple[float, float] | None) -> str:
    """``"[0, 1]"`` (``"none"`` without bounds), as messages and tables show them."""
    return "none" if bounds is None else f"[{bounds[0]:g}, {bounds[1]:g}]"


def bounded_value(latent: Any, lo: Any, hi: Any, sigmoid: Any = None) -> Any:
    """The map of a latent (unbounded) level onto ``(lo, hi)``: ``lo + w sigmoid(4 (x - mid) / w)``,
    ``w = hi - lo``, ``mid = (lo + hi) / 2`` (slope 1 at ``mid``). Commutes with an affine change
    of the reward's unit (standardised or logged units alike). ``sigmoid``: PyTensor's for a
    graph (``pytensor.tensor.sigmoid``); NumPy's (``scipy.special.expit``) by default."""
    if sigmoid is None:
        from scipy.special import expit as sigmoid
    width = hi - lo
    return lo + width * sigmoid(4.0 * (latent - 0.5 * (lo + hi)) / width)


def latent_value(value: Any, lo: float | np.ndarray, hi: float | np.ndarray, margin: float = 0.0) -> np.ndarray:
    """The inverse of :func:`bounded_value` (NumPy): the latent level whose image is ``value``;
    ``value`` is first moved at least ``margin`` of the range inside the bounds (with 0, a value
    at a bound is +-inf)."""
    from scipy.special import logit

    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    width = hi - lo
    x = np.clip((np.asarray(value, dtype=float) - lo) / width, margin, 1.0 - margin)
    with np.errstate(divide="ignore"):
        return 0.5 * (lo + hi) + 0.25 * width * logit(x)


def rewards_outside(reward: Any, bounds: tuple[float, float] | None) -> np.ndarray:
    """Mask of the finite rewards outside ``bounds`` (beyond :data:`BOUND_TOLERANCE` of the
    range), the shape of ``reward`` (NaN: not logged); all False without bounds."""
    y = np.asarray(reward, dtype=float)
    if bounds is None:
        return np.zeros(y.shape, dtype=bool)
    lo, hi = (float(b) for b in bounds)
    tol = BOUND_TOLERANCE * (hi - lo)
    with np.errstate(invalid="ignore"):
        return np.isfinite(y) & ((y < lo - tol) | (y > hi + tol))


def check_rewards_within(
    reward: np.ndarray,
    run_ids: Sequence[str] | None,
    steps: np.ndarray,
    bounds: tuple[float, float] | None,
    *,
    error: type[Exception] = RunSetError,
    without: str = "fit without them",
) -> None:
    """``error`` (a ``RunSetError`` by default) naming the runs with a logged reward outside
    ``bounds`` (each run's first such step and value, and how many it has): bounds that the
    data break describe another reward. ``reward`` is ``(n_runs, n_steps)`` (NaN: not logged),
    or one series ``(n_steps,)`` with ``run_ids`` None (named by its steps only: a forecast's
    prefix); ``without``: what the message offers in place of bounds (``"forecast without
    them"``). The one check of the fit (``GRPODynamicsModel``, ``bayes-grpo fit``) and of the
    forecast (``forecast --reward-bounds``, a fit's bounds)."""
    if bounds is None:
        return
    y = np.asarray(reward, dtype=float)
    steps = np.asarray(steps, dtype=float)
    if y.ndim == 1:
        y = y[None, :]
    outside = rewards_outside(y, bounds)
    if not outside.any():
        return
    named = []
    for i in np.flatnonzero(outside.any(axis=1)):
        j = np.flatnonzero(outside[i])
        count = f" ({j.size} rewards outside)" if j.size > 1 else ""
        run = "" if run_ids is None else f"run {run_ids[i]!r} "
        named.append(f"{run}at {STEP_DIM} {steps[j[0]]:g}: {y[i, j[0]]:.6g}{count}")
    share = f" ({len(named)} of {len(y)} {RUN_DIM}s)" if len(y) > 1 else ""
    raise error(
        f"reward bounds {bounds_text(bounds)} do not hold every logged reward: "
        + "; ".join(named)
        + f"{share}; give bounds that hold every logged reward, or {without}"
    )


__all__ = [
    "BOUND_TOLERANCE",
    "CENTRE_MARGIN",
    "bounded_value",
    "bounds_text",
    "check_reward_bounds",
    "check_rewards_within",
    "latent_value",
    "rewards_outside",
]
