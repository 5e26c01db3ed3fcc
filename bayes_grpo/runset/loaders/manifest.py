"""Run manifests: one row per run, with the log's path and any run coordinates.

CSV (header row; read as a CSV log is, :func:`~bayes_grpo.runset.loaders.tabular.read_table`:
comma, tab in a ``.tsv``, or semicolon with decimal commas) or YAML (a list of mappings, or a
mapping with a ``runs`` list)::

    path,run,model,model_size,group_size,learning_rate,momentum,momentum_convention,k_ref,beta,seed
    runs/g4_s0,g4-seed0,Qwen/Qwen2.5-0.5B,4.9e8,4,1e-6,0.9,ema,1,0.04,0

Columns: ``path`` (required; relative paths are taken from the manifest's folder), ``run``
(or ``id``: the run id to use), ``run_name`` (which run of a multi-run file, e.g. a wandb
export, the row is about), ``reward_key`` (override the reward choice for this run),
``logging_steps`` (logs without step numbers: console, CSV, JSONL), and any run coordinate
(:data:`~bayes_grpo.runset.schema.RUN_COORDS` except ``source``). Manifest values take
precedence over everything read from the logs. Empty cells mean "not given".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from bayes_grpo.runset.loaders._base import (
    ARCHIVE_ERRORS,
    LogFormatError,
    error_message,
    log_name,
    open_log,
)
from bayes_grpo.runset.loaders.tabular import read_table
from bayes_grpo.runset.schema import RUN_COORDS

CONTROL_COLUMNS: tuple[str, ...] = ("path", "run", "id", "run_name", "reward_key", "logging_steps")
COORD_COLUMNS: tuple[str, ...] = tuple(c for c in RUN_COORDS if c != "source")


@dataclass
class ManifestRow:
    """One manifest row."""

    manifest: Path
    row: int  # 1-based data row number (CSV: line number minus one)
    path: Path
    run_id: str | None = None
    run_name: str | None = None
    reward_key: str | None = None
    logging_steps: int | None = None
    coords: dict[str, object] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.manifest} row {self.row}"


def _blank(value: object) -> bool:
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


def _logging_steps(value: object, where: str) -> int:
    """A row's ``logging_steps``: a whole number of steps, at least 1 (the stride of a console
    log's numbered metric dicts). ``abc`` stopped the ingest with Python's own message, naming
    neither the manifest nor the row; -5 numbered the steps -5, -10 ...; 2.5 became 2."""
    try:
        steps = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        steps = math.nan
    if not (steps >= 1 and steps.is_integer()):
        raise LogFormatError(f"{where}: logging_steps must be a whole number >= 1, got {value!r}")
    return int(steps)


def read_manifest(path: str | Path) -> list[ManifestRow]:
    """Parse a manifest (CSV or YAML); unknown columns and rows without a path raise, naming the row."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such manifest file")
    try:
        if Path(log_name(path)).suffix.lower() in {".yaml", ".yml"}:
            # in the encodings a log is read in: a UTF-16 YAML manifest (PowerShell's Out-File)
            # was "unreadable manifest ('utf-8' codec can't decode byte 0xff ...)"
            with open_log(path) as fh:
                data = yaml.safe_load(fh.read())
            if isinstance(data, dict):
                data = data.get("runs")
            if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
                raise LogFormatError(
                    f"{path}: a YAML manifest is a list of runs (or a mapping with 'runs')"
                )
            rows = data
        else:
            # as a CSV log is read: a semicolon-separated manifest was one column
            # 'path;group_size' ("unknown column"), and rows ending with a comma its header
            # lacks took the next column's value for the path ("path 4 does not exist")
            frame = read_table(path)[0]
            rows = frame.to_dict(orient="records")
    except (yaml.YAMLError, pd.errors.ParserError, UnicodeDecodeError, *ARCHIVE_ERRORS) as exc:
        raise LogFormatError(f"{path}: unreadable manifest ({error_message(exc)})") from exc
    if not rows:  # a header alone read as "no run could be ingested: no logs found"
        raise LogFormatError(f"{path}: the manifest lists no runs (one row per run, with its 'path')")
    allowed = set(CONTROL_COLUMNS) | set(COORD_COLUMNS)
    out = []
    for i, raw in enumerate(rows, start=1):
        unknown = sorted(set(map(str, raw)) - allowed)
        if unknown:
            raise LogFormatError(
                f"{path} row {i}: unknown {'column' if len(unknown) == 1 else 'columns'} {unknown}; "
                f"allowed: {sorted(allowed)}"
            )
        if _blank(raw.get("path")):
            raise LogFormatError(f"{path} row {i}: no 'path'")
        log_path = Path(str(raw["path"]).strip()).expanduser()
        if not log_path.is_absolute():
            log_path = path.parent / log_path
        run_id = raw.get("run", raw.get("id"))
        steps = raw.get("logging_steps")
        coords = {c: raw[c] for c in COORD_COLUMNS if c in raw and not _blank(raw[c])}
        for name, value in coords.items():
            if name not in ("model", "momentum_convention"):
                try:
                    coords[name] = float(value)
                except (TypeError, ValueError):
                    raise LogFormatError(
                        f"{path} row {i}: {name} must be a number, got {value!r}"
                    ) from None
            else:
                coords[name] = str(value).strip()
        out.append(
            ManifestRow(
                manifest=path,
                row=i,
                path=log_path,
                run_id=None if _blank(run_id) else str(run_id).strip(),
                run_name=None if _blank(raw.get("run_name")) else str(raw["run_name"]).strip(),
                reward_key=None
                if _blank(raw.get("reward_key"))
                else str(raw["reward_key"]).strip(),
                logging_steps=None if _blank(steps) else _logging_steps(steps, f"{path} row {i}"),
                coords=coords,
            )
        )
    ids = [r.run_id for r in out if r.run_id]
    dupes = sorted({r for r in ids if ids.count(r) > 1})
    if dupes:
        rows_of = {d: [r.row for r in out if r.run_id == d] for d in dupes}
        raise LogFormatError(
            f"{path}: {'run id' if len(rows_of) == 1 else 'run ids'} used by more than one row: {rows_of}"
        )
    return out
