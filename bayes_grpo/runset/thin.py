"""Thinning: every ``n``-th logged point of each run, for fits of long runs.

A fit's cost grows with the logged points: the law is evaluated at every step of the run
set's grid in every gradient of every leapfrog step, and a run logged at every one of 10 000
steps pins the curve so tightly that NUTS needs long trees (``benchmarks/fit_thinning.py``,
``benchmarks/results/fit_thinning.md``: 8 runs x 10 001 steps, 2 x (200 + 200) draws, 49 minutes
and R-hat 2.16 on every point, 575 s and R-hat 1.025 on every 10th, under the same load). The
law has five numbers per run; the shape of a rise over thousands of steps is resolved by a few hundred points, and the noise of each kept point
is the noise of its step, so the likelihood of a thinned run is the exact likelihood of the
points it keeps (no averaging, which would change each point's noise). The posterior is wider
than on every point (the noise is averaged over fewer of them), which on long real logs is
mostly the overconfidence of the i.i.d. residuals the fit's residual check warns of anyway.

:func:`thin_runset` keeps, per run, its first logged reward and every ``n``-th after it, and
every other variable's values at those steps; everything else of the run is left out, and
each run's warnings say how many of its points and of each variable's values were kept
(sparse ones, e.g. an evaluation reward every 100 steps, lose most of theirs: diagnose on the
full run set). The attribute :data:`THIN_ATTR` records ``n`` and, per run, the logged and kept
points. CLI: ``bayes-grpo ingest LOGS_OR_RUNS.nc --every N -o thinned.nc``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo.runset.core import (
    RunSetError,
    make_runset,
    run_coords,
    run_metric_frames,
    runset_warnings,
)
from bayes_grpo.runset.schema import REWARD_VAR, SCHEMA_ATTR, WARNINGS_ATTR

#: Run-set attribute of a thinned run set (JSON ``{"every": n, "runs": {run: facts}}``).
THIN_ATTR: str = "bayes_grpo_thinned"

#: Logged points of the longest run above which ``fit`` suggests thinning (twice the 1000-step
#: runs of ``benchmarks/bench_fit.py``, whose 12 runs fit within a minute).
LONG_RUN_POINTS: int = 2000

#: Points per run that ``fit``'s suggestion aims at (the benchmark's runs: 1000 steps).
TARGET_POINTS: int = 1000


def kept_positions(n_points: int, every: int) -> np.ndarray:
    """Indices ``0, every, 2 every, ...`` of a run's ``n_points`` logged points (pure)."""
    if every < 1:
        raise ValueError(f"every must be a positive whole number of points, got {every}")
    return np.arange(0, int(n_points), int(every))


def suggested_every(max_points: int, target: int = TARGET_POINTS) -> int:
    """The smallest ``n`` that leaves a run of ``max_points`` points at most ``target`` (>= 1)."""
    return max(1, int(np.ceil(max_points / target)))


def ordinal(n: int) -> str:
    """``n`` as an English ordinal (``1st``, ``2nd``, ``3rd``, ``11th``, ``22nd``): the thinning
    messages said "every 3-th logged point"."""
    n = int(n)
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def thin_runset(ds: xr.Dataset, every: int) -> xr.Dataset:
    """``ds`` with each run cut to its first logged reward and every ``every``-th after it.

    Parameters
    ----------
    ds
        A run set (``runset_from_arrays`` / ``load_runs`` / ``load_runset``).
    every
        Keep one logged reward point in ``every`` (``every = 1`` returns an equal run set with
        the attribute; a positive int).

    Returns
    -------
    xarray.Dataset
        The run set on the union of the kept steps: every variable's values at each run's kept
        steps, the runs' coordinates and warnings (each run's gains one saying what was kept),
        the other attributes, and :data:`THIN_ATTR`.

    Raises
    ------
    RunSetError
        ``ds`` is thinned already, or a run would keep fewer than 3 rewards (the model needs 3).
    ValueError
        ``every`` is not a positive whole number.
    """
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"every must be a positive whole number of points, got {every!r}")
    if THIN_ATTR in ds.attrs:
        done = thinned(ds)
        raise RunSetError(
            f"the run set is thinned already (every {ordinal(done.get('every'))} point, attribute {THIN_ATTR}): "
            "thin the original run set instead"
        )
    warns = runset_warnings(ds)
    curves: dict[str, pd.DataFrame] = {}
    meta: dict[str, dict[str, object]] = {}
    facts: dict[str, dict[str, Any]] = {}
    for run_id, frame in run_metric_frames(ds).items():
        variables = list(frame.columns)
        logged = frame.index[frame[REWARD_VAR].notna().to_numpy()]
        keep = logged[kept_positions(len(logged), every)]
        if len(keep) < 3:
            raise RunSetError(
                f"run {run_id!r}: every {ordinal(every)} of its {len(logged)} logged rewards leaves {len(keep)}; "
                "the model needs at least 3 (a smaller --every)"
            )
        kept = frame.loc[keep]
        curves[run_id] = kept
        meta[run_id] = run_coords(ds, run_id)
        counts = {v: [int(frame[v].notna().sum()), int(kept[v].notna().sum())] for v in variables}
        facts[run_id] = {"logged_points": int(len(logged)), "kept_points": int(len(keep)), "values": counts}
        lost = thinned_values_text({v: c for v, c in counts.items() if v != REWARD_VAR})
        warns.setdefault(run_id, []).append(
            f"thinned to every {ordinal(every)} logged point: {len(keep)} of {len(logged)} rewards kept (steps "
            f"{int(keep[0])}-{int(keep[-1])})"
            + (f"; other values kept at those steps: {lost}" if lost else "")
        )
    attrs = {k: v for k, v in ds.attrs.items() if k not in (SCHEMA_ATTR, WARNINGS_ATTR)}
    attrs[THIN_ATTR] = json.dumps({"every": int(every), "runs": facts})
    return make_runset(curves, meta, warnings=warns, attrs=attrs)


#: Metrics named one by one in a thinning warning; a larger group of one count is counted.
NAMED_METRICS: int = 3


def thinned_values_text(counts: dict[str, list[int]]) -> str:
    """The metrics that lost values to thinning, ``{name: [logged, kept]}``, grouped by their
    counts: ``"kl 11 of 101"``, ``"60 of 300 for each of 14 metrics (clip_ratio_high_max, ...)"``
    (a TRL run logs some 15 side metrics; naming each one's count made a warning of a screen);
    ``""`` when none lost any. Pure."""
    groups: dict[tuple[int, int], list[str]] = {}
    for name, (logged, kept) in counts.items():
        if logged > 0 and kept < logged:
            groups.setdefault((logged, kept), []).append(name)
    parts = []
    for (logged, kept), names in groups.items():
        if len(names) <= NAMED_METRICS:
            parts += [f"{name} {kept} of {logged}" for name in names]
        else:
            parts.append(f"{kept} of {logged} for each of {len(names)} metrics ({', '.join(names[:2])}, ...)")
    return ", ".join(parts)


def thinned(ds: xr.Dataset) -> dict[str, Any]:
    """What :func:`thin_runset` recorded in ``ds`` (``{}`` when it is not thinned)."""
    raw = ds.attrs.get(THIN_ATTR)
    if raw is None:
        return {}
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def thinning_note(ds: xr.Dataset, *, threshold: int = LONG_RUN_POINTS) -> str | None:
    """The fit's note on thinning (``model.prepare``), or None: for a thinned run set, which
    points the fit saw; else :func:`long_runs_note`."""
    done = thinned(ds)
    if done:
        return (
            f"the run set was thinned to every {ordinal(done['every'])} logged point of each run (ingest --every): "
            "the fit, its R^2 and its residual checks describe those points"
        )
    return long_runs_note(ds, threshold=threshold)


def long_runs_note(ds: xr.Dataset, *, threshold: int = LONG_RUN_POINTS) -> str | None:
    """For a run set not thinned whose longest run logs more than ``threshold`` rewards: the cost
    and the way out, with the ``--every`` that leaves about :data:`TARGET_POINTS` points (``fit``
    says it before sampling). None otherwise."""
    if thinned(ds):
        return None
    points = np.isfinite(np.asarray(ds[REWARD_VAR].values, dtype=float)).sum(axis=1)
    longest = int(points.max()) if points.size else 0
    if longest <= threshold:
        return None
    every = suggested_every(longest)
    return (
        f"the longest run logs {longest} rewards ({int(points.sum())} in all): the fit's cost grows with "
        f"the logged points, and runs this long can take many minutes; "
        f"`bayes-grpo ingest RUNS.nc --every {every} -o THINNED.nc` keeps every {ordinal(every)} point of each run "
        f"(about {int(np.ceil(longest / every))} for the longest), "
        "enough to resolve the law's shape (runset.thin)"
    )


__all__ = ["LONG_RUN_POINTS", "NAMED_METRICS", "THIN_ATTR", "kept_positions", "long_runs_note", "ordinal", "suggested_every", "thin_runset", "thinned", "thinned_values_text", "thinning_note"]
