"""Log loaders: one module per format, all returning :class:`~bayes_grpo.runset.loaders._base.RawRun`.

========================  =============================================  ===========================
format                    files                                          module
========================  =============================================  ===========================
``trainer_state``         ``trainer_state.json`` (file, run dir,         :mod:`.trainer_state`
                          output dir with ``checkpoint-*``)
``tensorboard``           ``events.out.tfevents.*``                      :mod:`.tensorboard`
``csv``                   ``*.csv``, ``*.tsv`` (wide, long, wandb)       :mod:`.tabular`
``jsonl``                 ``*.jsonl``, ``*.ndjson``, JSON lists          :mod:`.tabular`
``console``               stdout logs with Trainer metric dicts          :mod:`.console`
manifest                  CSV/YAML, one row per run                      :mod:`.manifest`
sidecar configs           ``bayes_grpo_run.json``, ``training_args.*``,  :mod:`.sidecar`
                          ``config.json`` ...
========================  =============================================  ===========================
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from bayes_grpo._io import NETCDF_SUFFIXES
from bayes_grpo.runset.loaders._base import LogFormatError, RawRun, text_encoding
from bayes_grpo.runset.loaders.console import load_console, looks_like_console
from bayes_grpo.runset.loaders.manifest import ManifestRow, read_manifest
from bayes_grpo.runset.loaders.tabular import load_csv, load_jsonl
from bayes_grpo.runset.loaders.tensorboard import (
    add_scalars_owner,
    is_event_file,
    is_hparams_companion,
    load_tensorboard,
)
from bayes_grpo.runset.loaders.trainer_state import (
    choose_trainer_state,
    load_trainer_state,
    resolve_trainer_state,
)

LOADERS: dict[str, Callable[..., list[RawRun]]] = {
    "trainer_state": load_trainer_state,
    "tensorboard": load_tensorboard,
    "csv": load_csv,
    "jsonl": load_jsonl,
    "console": load_console,
}
FORMATS: tuple[str, ...] = tuple(LOADERS)
#: Suffixes of a saved run set (netCDF): no log; ``bayes-grpo ingest`` re-reads one as it is.
RUNSET_SUFFIXES: tuple[str, ...] = NETCDF_SUFFIXES
_CONSOLE_SUFFIXES = {".log", ".txt", ".out", ".err", ".stdout", ""}


def _json_lines_of_long_records(path: Path) -> bool:
    """Whether a ``.json`` file holds one JSON object per line, told by its first line being a
    whole object and its next line opening another: a logger writing a few hundred metrics a step
    writes lines longer than the 4096 characters :func:`detect_format` looks at first, and a
    single object on one line (a compact config) has no second line."""
    with path.open("r", encoding=text_encoding(path), errors="replace") as fh:
        lines = (line.strip() for line in fh)
        first = next((line for line in lines if line), "")
        second = next((line for line in lines if line), "")
    if not second.startswith("{"):
        return False
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


#: The command that decompresses a file of each compression suffix (gzip, bzip2, xz, zstd): a log
#: compressed so is not read.
DECOMPRESS_COMMANDS: dict[str, str] = {".gz": "gunzip -k", ".bz2": "bunzip2 -k", ".xz": "unxz -k", ".zst": "unzstd"}
#: Suffixes of the logs this package reads by their name (before a compression suffix; the ingest
#: drops them from a run's id).
LOG_SUFFIXES: tuple[str, ...] = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".log", ".txt", ".out")


def compressed_log_error(path: str | Path) -> str | None:
    """Why a compressed log is not read (``log.csv.gz``, ``train.log.xz``, ``trainer_state.json.gz``),
    naming the file and how to read it; None for any other file. A folder's compressed logs were
    left out without a word ("no log of a known format found here" when they were all it held)."""
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) < 2 or suffixes[-1] not in DECOMPRESS_COMMANDS or suffixes[-2] not in LOG_SUFFIXES:
        return None
    return (
        f"{path}: a compressed log ({suffixes[-1]}), not read; decompress it first "
        f"({DECOMPRESS_COMMANDS[suffixes[-1]]} '{path}') and ingest the {path.with_suffix('').name} it gives"
    )


def detect_format(path: str | Path) -> str | None:
    """The format of one log file, from its name and, where needed, its first bytes.

    Returns None for a file that is not a log this package reads.
    """
    path = Path(path)
    name = path.name.lower()
    suffix = path.suffix.lower()
    if name.startswith("events.out.tfevents"):
        return "tensorboard"
    if name == "trainer_state.json":
        return "trainer_state"
    if suffix in {".csv", ".tsv"}:
        return "csv"
    if suffix in {".jsonl", ".ndjson"}:
        return "jsonl"
    if suffix == ".json":
        try:
            with path.open("r", encoding=text_encoding(path), errors="replace") as fh:
                head = fh.read(4096).lstrip()
        except OSError:
            return None
        if head.startswith("{") and '"log_history"' in path.read_text(
            encoding=text_encoding(path), errors="replace"
        ):
            return "trainer_state"
        if head.startswith("["):
            return "jsonl"
        if head.startswith("{") and ("\n{" in head or _json_lines_of_long_records(path)):
            return "jsonl"
        return None
    if suffix in _CONSOLE_SUFFIXES or suffix.startswith(".log"):
        return "console" if looks_like_console(path) else None
    return None


def load_file(path: str | Path, fmt: str | None = None, **kwargs) -> list[RawRun]:
    """Read every run of one log file (format auto-detected unless ``fmt`` is given)."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt is None and path.suffix.lower() in RUNSET_SUFFIXES:
        # the CLI re-reads a saved run set given to ingest; the function said "not a recognised
        # log format" of it
        raise LogFormatError(
            f"{path}: a netCDF file (a saved run set?), not a log; read a run set with "
            "bayes_grpo.runset.load_runset"
        )
    if fmt is None and (compressed := compressed_log_error(path)) is not None:
        raise LogFormatError(compressed)
    if fmt is None:
        raise LogFormatError(f"{path}: not a recognised log format (formats: {', '.join(FORMATS)})")
    if fmt not in LOADERS:
        raise LogFormatError(f"{path}: unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return LOADERS[fmt](path, **kwargs)


__all__ = [
    "DECOMPRESS_COMMANDS",
    "FORMATS",
    "LOADERS",
    "LOG_SUFFIXES",
    "RUNSET_SUFFIXES",
    "LogFormatError",
    "ManifestRow",
    "RawRun",
    "add_scalars_owner",
    "choose_trainer_state",
    "compressed_log_error",
    "detect_format",
    "is_event_file",
    "is_hparams_companion",
    "load_console",
    "load_csv",
    "load_file",
    "load_jsonl",
    "load_tensorboard",
    "load_trainer_state",
    "read_manifest",
    "resolve_trainer_state",
]
