"""The learning-rate clock: a run on a learning-rate schedule re-counted in steps at its nominal rate.

The law's gain ``a = eta K`` is constant over a run. A logged schedule (warm-up, TRL's default
linear decay, cosine) changes it step by step: with torch's SGD or Adam the rate multiplies the
momentum buffer, ``w[n] = mu w[n-1] - K e[n-L]``, ``e[n+1] = e[n] + eta_n w[n]``. Without inertia
that recursion advances with the sum of the rates, so counting time as

    tau(t) = integral_0^t eta(s) / eta ds        (eta: the run's learning_rate, its nominal rate)

turns a run on a schedule into a run at the constant rate ``eta``: exactly there, and
approximately with momentum and lag, whose memory is counted in optimizer steps, not in ``tau``
(during a warm-up the buffer forgets faster per clock step). Measured by
``benchmarks/lr_clock.py`` (``benchmarks/results/lr_clock.txt``: that recursion, 300 steps,
p* 0.8, 10% warm-up then linear decay). Without momentum, least squares of the constant-gain law
recovers on raw steps / on the clock ``p*`` 0.68 / 0.80 (truth 0.8) on a run still rising when
the rate reaches 0, and the law with the true gain is as close to the re-timed run as to a
constant-rate one (RMS 0.0008 vs 0.0014; 0.088 on raw steps). With momentum 0.5 (K_ref 1) the
clock leaves 0.0049 against 0.0020 (0.063 on raw steps). With momentum 0.9 and a rise that
happens within the warm-up (K_ref 2, gain 0.01) it does not help: RMS 0.072 vs 0.085 on raw
steps, the least-squares gain 0.0136 vs 0.0065 (truth 0.01), and a PyMC fit's gain 130% of the
truth on the clock against 69% on raw steps. Prediction on a known schedule needs no clock: it
runs the recursion update by update (``predict --lr-schedule``).

:func:`clock_time` is the pure map; :func:`clock_runset` re-times the scheduled runs of a run
set (the rule of :func:`bayes_grpo.runset.ingest.learning_rate_schedule_range`) onto whole clock
steps, averaging the logged steps that fall on one clock step, and leaves every other run as it
is. Predictions for a new setting are for a constant rate (``tau = t``), which is what a fit on
the clock describes.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo.checks.base import counted
from bayes_grpo.runset.core import (
    RunSetError,
    make_runset,
    run_coords,
    run_metric_frames,
    runset_warnings,
)
from bayes_grpo.runset.names import LOGGED_LR_VAR
from bayes_grpo.runset.schema import REWARD_VAR, SCHEMA_ATTR, STEP_DIM, WARNINGS_ATTR

#: Run-set attribute naming the runs re-timed on the learning-rate clock (JSON ``{run: facts}``).
CLOCK_ATTR: str = "bayes_grpo_lr_clock"


def clock_time(steps, lr, eta: float) -> np.ndarray:
    """Learning-rate clock ``tau`` at each logged step.

    Parameters
    ----------
    steps
        ``(n,)`` logged optimizer steps, increasing, ``>= 0``.
    lr
        ``(n,)`` logged learning rate at those steps (NaN where not logged); between logged
        steps it is taken as linear, before the first one as that first value.
    eta
        The nominal rate (> 0) one clock step stands for: the run's ``learning_rate``.

    Returns
    -------
    ``(n,)`` ``tau = integral_0^step lr(s) / eta ds`` (trapezoid rule on the logged points),
    in clock steps; equal to ``steps`` when ``lr == eta`` throughout.
    """
    t = np.asarray(steps, dtype=float)
    rate = np.asarray(lr, dtype=float)
    if t.shape != rate.shape or t.ndim != 1:
        raise ValueError(f"steps and lr must be 1-d arrays of one length; got {t.shape} and {rate.shape}")
    if not (np.isfinite(eta) and eta > 0):
        raise ValueError(f"the nominal learning rate must be a positive number; got {eta!r}")
    if t.size and (t[0] < 0 or np.any(np.diff(t) <= 0)):
        raise ValueError("steps must be >= 0 and increasing")
    ok = np.isfinite(rate)
    if not ok.any():
        raise ValueError("no finite logged learning rate")
    rate = np.interp(t, t[ok], rate[ok])  # fills gaps; constant beyond the ends
    knots = np.concatenate([[0.0], t]) if t[0] > 0 else t
    values = np.concatenate([[rate[0]], rate]) if t[0] > 0 else rate
    area = np.concatenate([[0.0], np.cumsum(np.diff(knots) * (values[1:] + values[:-1]) / 2.0)])
    return (area / eta)[-t.size :]


def interval_multipliers(steps, lr, eta: float) -> np.ndarray:
    """Mean rate multiplier of each interval between logged steps, for a law on the schedule.

    Parameters are those of :func:`clock_time`. Returns ``(n,)``: for interval
    ``(steps[j-1], steps[j]]`` (``steps[-1] = 0``) the clock's increment over the step
    increment, ``(tau[j] - tau[j-1]) / (steps[j] - steps[j-1])``, i.e. the mean of
    ``lr / eta`` over it (the first logged rate divided by ``eta`` for an empty first interval,
    at ``steps[0] = 0``). Consumed by
    :func:`bayes_grpo.dynamics.trajectory.scheduled_error_trajectory`.
    """
    t = np.asarray(steps, dtype=float)
    tau = clock_time(t, lr, eta)
    dt = np.diff(np.concatenate([[0.0], t]))
    dtau = np.diff(np.concatenate([[0.0], tau]))
    rate = np.asarray(lr, dtype=float)
    first = rate[np.isfinite(rate)][0] / eta
    return np.where(dt > 0, dtau / np.where(dt > 0, dt, 1.0), first)


def clock_runset(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each run on a learning-rate schedule re-timed on the learning-rate clock.

    A run whose logged ``lr`` follows a schedule gets its logged steps mapped to
    :func:`clock_time` (nominal rate: its ``learning_rate``, else the logged peak), rounded to
    whole clock steps; the metrics of the logged steps that land on one clock step are averaged.
    Other runs keep their steps. Each re-timed run gets a warning saying so (in place of the
    ingest's warning that its fit averages over the schedule), and the attribute
    :data:`CLOCK_ATTR` records, per run, the nominal rate, the step range and the clock range.

    Raises
    ------
    RunSetError
        ``ds`` is on the clock already, or has no ``lr`` variable (nothing to re-time by).
    """
    from bayes_grpo.runset.ingest import (
        is_learning_rate_schedule_note,
        learning_rate_schedule_range,
    )

    if CLOCK_ATTR in ds.attrs:
        raise RunSetError(f"the run set is on the learning-rate clock already (attribute {CLOCK_ATTR})")
    if LOGGED_LR_VAR not in ds.data_vars:
        raise RunSetError(
            f"no logged learning rate (variable {LOGGED_LR_VAR!r}) in the run set: nothing to re-time the runs by"
        )
    warns = runset_warnings(ds)
    curves: dict[str, pd.DataFrame] = {}
    meta: dict[str, dict[str, object]] = {}
    facts: dict[str, dict[str, Any]] = {}
    for run_id, frame in run_metric_frames(ds).items():
        frame = frame[frame.notna().any(axis=1)]
        coords = run_coords(ds, run_id)
        meta[run_id] = coords
        lr = frame[LOGGED_LR_VAR].to_numpy(dtype=float)
        span = learning_rate_schedule_range(lr)
        if span is None:
            curves[run_id] = frame
            continue
        eta = float(coords["learning_rate"])
        eta_from = "learning_rate"
        if not (np.isfinite(eta) and eta > 0):
            eta, eta_from = span[1], "the logged peak"
        tau = clock_time(frame.index.to_numpy(dtype=float), lr, eta)
        clock = np.rint(tau).astype(np.int64)
        binned = frame.groupby(clock).mean()
        binned.index.name = STEP_DIM
        n_rewarded = int(binned[REWARD_VAR].notna().sum())
        if n_rewarded < 3:
            raise RunSetError(
                f"run {run_id!r}: on the learning-rate clock only {counted(n_rewarded, 'clock step')} "
                f"{'has' if n_rewarded == 1 else 'have'} a reward (lr {span[0]:.3g} to {span[1]:.3g}, "
                f"nominal {eta:.3g})"
            )
        curves[run_id] = binned
        first, last = int(frame.index[0]), int(frame.index[-1])
        facts[run_id] = {
            "nominal_learning_rate": eta,
            "nominal_from": eta_from,
            "lr_range": [span[0], span[1]],
            "steps": [first, last],
            "clock_steps": [int(binned.index[0]), int(binned.index[-1])],
            "logged_steps": int(len(frame)),
            "clock_points": int(len(binned)),
        }
        # the ingest's "read its fit as an average over the schedule" holds no more
        warns[run_id] = [w for w in warns.get(run_id, []) if not is_learning_rate_schedule_note(w)]
        warns[run_id].append(
            f"re-timed on the learning-rate clock (lr {span[0]:.3g} to {span[1]:.3g}, one clock step = "
            f"one step at {eta:.3g}, {eta_from}): steps {first}-{last} -> clock steps "
            f"{int(binned.index[0])}-{int(binned.index[-1])}, {len(frame)} logged steps averaged into "
            f"{len(binned)}"
        )
    if not facts:
        raise RunSetError("no run's logged learning rate follows a schedule: nothing to re-time")
    attrs = {k: v for k, v in ds.attrs.items() if k not in (SCHEMA_ATTR, WARNINGS_ATTR)}
    attrs[CLOCK_ATTR] = json.dumps(facts)
    return make_runset(curves, meta, warnings=warns, attrs=attrs)


def clocked_runs(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """``{run: facts}`` of the runs of ``ds`` re-timed by :func:`clock_runset` (empty if none)."""
    raw = ds.attrs.get(CLOCK_ATTR)
    if raw is None:
        return {}
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


__all__ = ["CLOCK_ATTR", "clock_time", "clock_runset", "clocked_runs", "interval_multipliers"]
