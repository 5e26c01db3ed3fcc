"""Build, check, save and load run sets (the ``xarray.Dataset`` of DESIGN.md section 5).

Loaders of every log format end in :func:`make_runset`; simulators (the softmax bandit,
the SDE simulator) and the TRL runner produce their run sets through it too.
"""

from __future__ import annotations

import json
import os
import warnings as pywarnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo._io import (
    NETCDF_SUFFIXES,
    check_suffix,
    load_netcdf_dataset,
    read_named_netcdf,
    write_atomic,
)
from bayes_grpo.checks.base import counted
from bayes_grpo.runset.schema import (
    ADDED_COORDS,
    NUMERIC_COORDS,
    REWARD_VAR,
    RUN_COORDS,
    RUN_DIM,
    SCHEMA_ATTR,
    SCHEMA_VERSION,
    STEP_DIM,
    STRING_COORDS,
    WARNINGS_ATTR,
)


class RunSetError(ValueError):
    """A run set (or the logs it is built from) violates the data contract."""


def make_runset(
    curves: Mapping[str, pd.DataFrame],
    meta: Mapping[str, Mapping[str, object]] | None = None,
    *,
    warnings: Mapping[str, Sequence[str]] | None = None,
    attrs: Mapping[str, object] | None = None,
) -> xr.Dataset:
    """Assemble per-run metric tables into one run set.

    Parameters
    ----------
    curves
        ``{run_id: frame}``; each frame is indexed by integer optimizer step (unique,
        increasing) with one float column per metric under canonical names; ``reward``
        is required. Runs of different lengths are padded with NaN on the union of steps.
    meta
        ``{run_id: {coordinate: value}}`` with any of :data:`RUN_COORDS`; missing ones get
        their fill value (NaN or ""). Unknown keys raise.
    warnings
        ``{run_id: [message, ...]}`` from ingestion, kept in the ``bayes_grpo_warnings``
        attribute.
    attrs
        Extra dataset attributes (JSON-serialisable values are stored as JSON strings).

    Returns
    -------
    xarray.Dataset
        dims ``(run, step)``; float64 data variables; per-run coordinates.
    """
    if not curves:
        raise RunSetError("no runs to build a run set from")
    meta = dict(meta or {})
    run_ids = list(curves)
    for run_id in run_ids:
        frame = curves[run_id]
        if REWARD_VAR not in frame.columns:
            raise RunSetError(
                f"run {run_id!r}: no {REWARD_VAR!r} column; metrics found: {sorted(map(str, frame.columns))}"
            )
        if not frame.index.is_unique or not frame.index.is_monotonic_increasing:
            raise RunSetError(f"run {run_id!r}: steps must be unique and increasing")
    unknown = {k for m in meta.values() for k in m} - set(RUN_COORDS)
    if unknown:
        raise RunSetError(f"unknown run coordinates {sorted(unknown)}; known: {list(RUN_COORDS)}")

    steps = np.unique(
        np.concatenate([np.asarray(curves[r].index, dtype=np.int64) for r in run_ids])
    )
    variables: list[str] = [REWARD_VAR]
    for r in run_ids:
        for col in curves[r].columns:
            if col not in variables:
                variables.append(str(col))
    arrays = {var: np.full((len(run_ids), len(steps)), np.nan) for var in variables}
    notes = {r: list(w) for r, w in (warnings or {}).items()}
    added: list[str] = []
    for i, r in enumerate(run_ids):
        frame = curves[r]
        values = frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
        text = frame.notna().to_numpy() & np.isnan(values)  # given, but not a number
        for j in np.flatnonzero(text.any(axis=0)):
            col = frame.columns[j]
            note = (
                f"{col}: {counted(int(text[:, j].sum()), 'value')} that "
                f"{'is not a number' if text[:, j].sum() == 1 else 'are not numbers'} (e.g. "
                f"{frame[col][text[:, j]].iloc[0]!r}) kept as NaN"
            )
            notes.setdefault(r, []).append(note)
            added.append(f"run {r!r}: {note}")
        pos = np.searchsorted(steps, np.asarray(frame.index, dtype=np.int64))
        for j, col in enumerate(frame.columns):
            arrays[str(col)][i, pos] = values[:, j]
    _warn_kept_as_nan(added)
    return runset_from_arrays(run_ids, steps, arrays, meta, warnings=notes, attrs=attrs)


def _warn_kept_as_nan(added: list[str]) -> None:
    """One ``UserWarning`` for the values a run-set builder had to keep as NaN (``added``:
    ``"run 'x': metric: ..."`` lines, also in the runs' warnings)."""
    if added:
        pywarnings.warn("run set values kept as NaN: " + "; ".join(added), UserWarning, stacklevel=3)


def runset_from_arrays(
    run_ids: Sequence[str],
    steps: np.ndarray,
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Mapping[str, object]] | None = None,
    *,
    warnings: Mapping[str, Sequence[str]] | None = None,
    attrs: Mapping[str, object] | None = None,
) -> xr.Dataset:
    """Assemble a run set from ``(run, step)`` arrays on a shared step axis.

    The fast path for simulators whose runs share one step grid; :func:`make_runset`
    ends here too. ``arrays`` maps metric names to float arrays of shape
    ``(len(run_ids), len(steps))`` (``reward`` required; +-inf become NaN, each run's count
    added to its warnings and said in one ``UserWarning``); ``meta``, ``warnings`` and
    ``attrs`` as in :func:`make_runset`.
    """
    meta = dict(meta or {})
    if REWARD_VAR not in arrays:
        raise RunSetError(f"no {REWARD_VAR!r} array; metrics given: {sorted(arrays)}")
    unknown = {k for m in meta.values() for k in m} - set(RUN_COORDS)
    if unknown:
        raise RunSetError(f"unknown run coordinates {sorted(unknown)}; known: {list(RUN_COORDS)}")
    run_ids = list(run_ids)
    shape = (len(run_ids), len(steps))
    notes = {r: list(w) for r, w in (warnings or {}).items()}
    added: list[str] = []
    data_vars = {}
    for var, value in arrays.items():
        arr = np.array(value, dtype=float)
        if arr.shape != shape:
            raise RunSetError(f"metric {var!r}: shape {arr.shape}, expected (runs, steps) = {shape}")
        infinite = np.isinf(arr)
        for i in np.flatnonzero(infinite.any(axis=1)):
            # the fit and the diagnostics read NaN as "not logged": say that these were logged
            note = (
                f"{var}: {counted(int(infinite[i].sum()), 'infinite value')} (first at step "
                f"{int(np.asarray(steps)[infinite[i]][0])}) kept as NaN"
            )
            notes.setdefault(run_ids[i], []).append(note)
            added.append(f"run {run_ids[i]!r}: {note}")
        arr[~np.isfinite(arr)] = np.nan
        data_vars[str(var)] = ((RUN_DIM, STEP_DIM), arr)
    _warn_kept_as_nan(added)
    coords: dict[str, object] = {
        RUN_DIM: np.array(run_ids, dtype=object),
        STEP_DIM: np.asarray(steps, dtype=np.int64),
    }
    for name, fill in RUN_COORDS.items():
        values = [meta.get(r, {}).get(name, fill) for r in run_ids]
        if name in STRING_COORDS:
            coords[name] = (
                RUN_DIM,
                np.array(["" if v is None else str(v) for v in values], dtype=object),
            )
        else:
            coords[name] = (
                RUN_DIM,
                np.array([_as_float(v, name, r) for v, r in zip(values, run_ids)]),
            )
    ds = xr.Dataset(data_vars, coords=coords)
    ds.attrs[SCHEMA_ATTR] = SCHEMA_VERSION
    ds.attrs[WARNINGS_ATTR] = json.dumps({r: list(w) for r, w in notes.items() if w})
    for key, value in (attrs or {}).items():
        # attributes read back from netCDF are NumPy scalars and arrays (a saved ingest's
        # min_points: np.int64), which json.dumps refuses: `ingest runs.nc --lr-clock` crashed
        if isinstance(value, np.generic | np.ndarray):
            value = value.tolist()
        ds.attrs[key] = value if isinstance(value, str | int | float) else json.dumps(value)
    return validate_runset(ds)


def _as_float(value: object, name: str, run_id: str) -> float:
    if value is None or value == "":
        return float("nan")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise RunSetError(
            f"run {run_id!r}: coordinate {name!r} must be numeric, got {value!r}"
        ) from None


def validate_runset(ds: xr.Dataset) -> xr.Dataset:
    """Check that ``ds`` follows the data contract; return it unchanged or raise RunSetError
    (a TypeError, :func:`require_dataset`, when it is no ``xarray.Dataset``)."""
    require_dataset(ds)
    missing_dims = {RUN_DIM, STEP_DIM} - set(ds.dims)
    if missing_dims:
        raise RunSetError(f"run set lacks dims {sorted(missing_dims)}; has {list(ds.dims)}")
    if REWARD_VAR not in ds.data_vars:
        raise RunSetError(f"run set lacks the {REWARD_VAR!r} variable; has {list(ds.data_vars)}")
    missing = [c for c in RUN_COORDS if c not in ds.coords]
    if missing:
        raise RunSetError(f"run set lacks run coordinates {missing}")
    # counted once: list.count per id was quadratic (6 of the 8 s of a 10000-run bandit call)
    counts = Counter(str(r) for r in ds[RUN_DIM].values)
    dupes = sorted(r for r, n in counts.items() if n > 1)
    if dupes:
        raise RunSetError(f"run set has duplicate run ids: {dupes}")
    return ds


def require_dataset(ds: object) -> xr.Dataset:
    """``ds``, refused (``TypeError``) unless it is an ``xarray.Dataset``: a path given where the
    Python API takes a run set (``fit("runs.nc")``, ``diagnose("runs.nc")``, as the command line
    takes its file) died in "'str' object has no attribute 'attrs'" (or 'dims', or "string
    indices must be integers"); the message says how to read one."""
    if not isinstance(ds, xr.Dataset):
        shown = f" {str(ds)!r}" if isinstance(ds, str | os.PathLike) else ""
        raise TypeError(
            f"expected a run set (an xarray.Dataset), got {type(ds).__name__}{shown}: read a saved "
            "run set with bayes_grpo.runset.load_runset(path), logs with "
            "bayes_grpo.runset.ingest.load_runs([path, ...])"
        )
    return ds


def require_runs(ds: xr.Dataset, doing: str) -> xr.Dataset:
    """``ds``, refused (:class:`RunSetError`) when it holds no run: the work named by ``doing``
    (``"fit"``, ``"compare"``) has nothing to work on.

    A run set may hold no run (a filter that matched none, ``ds.sel(run=[])``; it can be
    saved and read back), but every stage that works on its runs refuses it here: a fit said
    "every run has a constant reward ()", the law comparison died in a ZeroDivisionError, the
    diagnostics returned no result and the posterior predictive checks called the runs too
    short. Not an ``xarray.Dataset``: :func:`require_dataset`'s ``TypeError``."""
    if require_dataset(ds).sizes.get(RUN_DIM, 0) == 0:
        raise RunSetError(f"the run set holds no runs: nothing to {doing}")
    return ds


def runset_warnings(ds: xr.Dataset) -> dict[str, list[str]]:
    """Per-run ingestion warnings stored in the run set."""
    raw = ds.attrs.get(WARNINGS_ATTR, "{}")
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def save_runset(ds: xr.Dataset, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a run set to netCDF (h5netcdf engine), atomically.

    An existing ``path`` is replaced only with ``overwrite=True`` (``FileExistsError`` otherwise);
    a ``path`` not named ``.nc`` / ``.nc4`` / ``.netcdf`` is refused (``ValueError``), as
    ``bayes-grpo ingest -o`` refuses it: ingest reads a file so named as a saved run set, any
    other as a log.
    """
    check_suffix(path, "path", NETCDF_SUFFIXES, "netCDF")  # "runs.csv" got netCDF bytes
    validate_runset(ds)
    return write_atomic(path, lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"), overwrite=overwrite)


def with_added_coords(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each coordinate of :data:`~bayes_grpo.runset.schema.ADDED_COORDS` it lacks
    (a run set saved before that coordinate joined the contract) set to unknown for every run."""
    if RUN_DIM not in ds.dims:
        return ds
    for name in ADDED_COORDS:
        if name not in ds.coords:
            fill = RUN_COORDS[name]
            kind = object if isinstance(fill, str) else float
            ds = ds.assign_coords({name: (RUN_DIM, np.full(ds.sizes[RUN_DIM], fill, dtype=kind))})
    return ds


def load_runset(path: str | os.PathLike) -> xr.Dataset:
    """Read a run set written by :func:`save_runset` (fully loaded into memory, file closed)."""
    path = Path(path)
    ds = read_named_netcdf(
        path,
        load_netcdf_dataset,
        file_noun="run-set file",
        hint=f"a run set is the file `bayes-grpo ingest {path} -o runs.nc` writes",
        not_netcdf="not a netCDF run set (a training log?)",
        unreadable="not a readable netCDF run set",
        error=RunSetError,
    )
    ds = with_added_coords(ds)
    try:
        validate_runset(ds)
    except RunSetError as exc:
        raise RunSetError(f"{path}: {exc}{_fitted_model_hint(path)}") from exc
    for name in STRING_COORDS:
        if name in ds.coords:
            ds = ds.assign_coords({name: (RUN_DIM, ds[name].values.astype(object))})
    return ds.assign_coords({RUN_DIM: ds[RUN_DIM].values.astype(object)})


def _fitted_model_hint(path: Path) -> str:
    """``"; it is a fitted model ..."`` when ``path`` holds a posterior (InferenceData groups),
    ``"; it is a prediction ..."`` for a file of ``predict`` (attribute ``kind``) or
    ``forecast`` (attribute ``upto_step``), else ``""``."""
    import h5py

    try:
        with h5py.File(path, "r") as fh:
            groups = set(fh.keys())
            kind = fh.attrs.get("kind", b"")
            kind = kind.decode() if isinstance(kind, bytes) else str(kind)
            kind = "forecast" if "upto_step" in fh.attrs else kind
    except OSError:
        return ""
    if kind in ("prediction", "forecast"):
        return (
            f"; it is a {kind} (written by `bayes-grpo {'predict' if kind == 'prediction' else 'forecast'} -o`), "
            "not a run set: give the run set (`bayes-grpo ingest ... -o runs.nc`)"
        )
    if "posterior" not in groups:
        return ""
    return (
        "; it is a fitted model (a posterior saved by `bayes-grpo fit`), not a run set: give the "
        "run set the model was fitted to"
    )


def concat_runsets(runsets: Sequence[xr.Dataset]) -> xr.Dataset:
    """Stack run sets along ``run`` (union of steps and variables; run ids must be unique).

    Dataset attributes: one the inputs agree on (or that only some have) is kept. One whose
    values differ is merged when every value is a JSON object (a dict, or a JSON string of
    one), key by key and recursively: per-run information keyed by run id (the ingest
    warnings and provenance, ``truth["runs"]`` of the simulators) is kept for every run. What
    still disagrees (a number such as the ingest's ``min_points``, a simulation setting) cannot
    describe the combined set; it is dropped, and a ``UserWarning`` names each dropped
    attribute or key (``min_points``, ``truth.settings.random_seed``).
    """
    merged = xr.concat(
        list(runsets),
        dim=RUN_DIM,
        join="outer",
        data_vars="all",
        coords="different",
        compat="equals",
        combine_attrs="drop_conflicts",  # the variables' attributes; the dataset's below
    )
    attrs, dropped = _merge_attrs([ds.attrs for ds in runsets])
    warnings: dict[str, list[str]] = {}
    for ds in runsets:
        warnings.update(runset_warnings(ds))
    merged.attrs = attrs | {WARNINGS_ATTR: json.dumps(warnings)}
    if dropped:
        pywarnings.warn(
            "concat_runsets: the run sets disagree on "
            + ", ".join(dropped)
            + "; dropped from the combined run set",
            UserWarning,
            stacklevel=2,
        )
    return validate_runset(merged)


def _merge_attrs(all_attrs: Sequence[Mapping[str, object]]) -> tuple[dict[str, object], list[str]]:
    """Dataset attributes of stacked run sets and the names of those dropped (see
    :func:`concat_runsets`); the ingest warnings are merged by the caller."""
    merged: dict[str, object] = {}
    dropped: list[str] = []
    for name in dict.fromkeys(k for attrs in all_attrs for k in attrs if k != WARNINGS_ATTR):
        values = [attrs[name] for attrs in all_attrs if name in attrs]
        if all(_same_attr(values[0], v) for v in values[1:]):
            merged[name] = values[0]
            continue
        maps = [_json_object(v) for v in values]
        if any(m is None for m in maps):
            dropped.append(name)
            continue
        value, lost = _merge_json_objects(maps, name)
        merged[name] = json.dumps(value)
        dropped += lost
    return merged, dropped


def _same_attr(a: object, b: object) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    except TypeError:  # strings and other non-numbers: no NaN to compare
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def _json_object(value: object) -> dict | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _merge_json_objects(maps: Sequence[dict], path: str) -> tuple[dict, list[str]]:
    """Key-by-key union of JSON objects; a key whose values differ is merged again when all
    are objects, else left out and its dotted path returned."""
    out: dict = {}
    lost: list[str] = []
    for key in dict.fromkeys(k for m in maps for k in m):
        values = [m[key] for m in maps if key in m]
        texts = {json.dumps(v, sort_keys=True, default=str) for v in values}
        if len(texts) == 1:
            out[key] = values[0]
        elif all(isinstance(v, dict) for v in values):
            out[key], more = _merge_json_objects(values, f"{path}.{key}")
            lost += more
        else:
            lost.append(f"{path}.{key}")
    return out, lost


def run_frame(ds: xr.Dataset, run_id: str) -> pd.DataFrame:
    """One run's metrics as a DataFrame indexed by step, rows with no reward dropped."""
    sub = ds.sel({RUN_DIM: run_id})
    frame = pd.DataFrame(
        {v: sub[v].values for v in ds.data_vars if sub[v].dims == (STEP_DIM,)},
        index=ds[STEP_DIM].values,
    )
    frame.index.name = STEP_DIM
    return frame.dropna(subset=[REWARD_VAR])


def run_metric_frames(ds: xr.Dataset) -> dict[str, pd.DataFrame]:
    """``{run id: frame}`` of every (run, step) variable of ``ds``, each frame on the whole step
    grid (integer steps, NaN where the run logged nothing): the per-run tables that
    :func:`make_runset` takes back, for transformations of a run set (``runset.clock``,
    ``runset.thin``)."""
    steps = np.asarray(ds[STEP_DIM].values).astype(np.int64)
    variables = [str(v) for v in ds.data_vars if ds[v].dims == (RUN_DIM, STEP_DIM)]
    frames = {}
    for run_id in (str(r) for r in ds[RUN_DIM].values):
        sub = ds.sel({RUN_DIM: run_id})
        frame = pd.DataFrame({v: sub[v].values for v in variables}, index=steps)
        frame.index.name = STEP_DIM
        frames[run_id] = frame
    return frames


def run_coords(ds: xr.Dataset, run_id: str) -> dict[str, object]:
    """One run's coordinates (NaN for unknown numeric, "" for unknown string)."""
    sub = ds.sel({RUN_DIM: run_id})
    out: dict[str, object] = {}
    for name in RUN_COORDS:
        value = sub[name].values.item()
        out[name] = str(value) if name in STRING_COORDS else float(value)
    return out


__all__ = [
    "RunSetError",
    "make_runset",
    "runset_from_arrays",
    "validate_runset",
    "runset_warnings",
    "save_runset",
    "load_runset",
    "with_added_coords",
    "concat_runsets",
    "run_frame",
    "run_metric_frames",
    "run_coords",
    "NUMERIC_COORDS",
]
