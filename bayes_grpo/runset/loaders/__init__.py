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

A text log may be compressed (``log.csv.gz``, ``train.log.xz``, ``trainer_state.json.bz2``,
``metrics.jsonl.lzma``; zstd's ``.zst`` where the ``zstandard`` module is installed): every loader opens a log through
:func:`~bayes_grpo.runset.loaders._base.open_log`, which decompresses it as it reads, and its
format is told by the name inside (:func:`~bayes_grpo.runset.loaders._base.log_name`) and the
decompressed text. The rotated pieces of a log (``train.log.1``, ``train.log.2.gz``,
``train.log-20261205``) are no runs of their own (:func:`rotated_log_error` says how to join them;
a piece alone is read as its log), and an archive of files (``runs.tar.gz``) is no log
(:func:`archive_error`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from bayes_grpo._io import NETCDF_SUFFIXES
from bayes_grpo.runset.loaders._base import (
    DECOMPRESS_COMMANDS,
    DECOMPRESS_MODULES,
    DECOMPRESSORS,
    READ_ERRORS,
    UNREAD_COMPRESSIONS,
    LogFormatError,
    RawRun,
    compression_suffix,
    inner_name,
    log_name,
    open_log,
    read_compressions_text,
    shell_path,
    unread_compression,
    unreadable,
)
from bayes_grpo.runset.loaders.console import SNIFF_BYTES, load_console, looks_like_console
from bayes_grpo.runset.loaders.manifest import ManifestRow, read_manifest
from bayes_grpo.runset.loaders.tabular import load_csv, load_jsonl
from bayes_grpo.runset.loaders.tensorboard import PREFIX as EVENT_FILE_PREFIX
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


#: Characters of a log's text :func:`detect_format` looks at first.
_SNIFF_CHARS = 4096


def _holds(path: Path, needle: str, chunk: int = 1 << 20) -> bool:
    """Whether a log's text holds ``needle``, read a chunk at a time (a Trainer state of a long
    run is tens of MB; the loader reads it whole once)."""
    tail = ""
    with open_log(path, errors="replace") as fh:
        while block := fh.read(chunk):
            if needle in tail + block:
                return True
            tail = block[-(len(needle) - 1) :]
    return False


def _json_lines_of_long_records(path: Path) -> bool:
    """Whether a ``.json`` file holds one JSON object per line, told by its first line being a
    whole object and its next line opening another: a logger writing a few hundred metrics a step
    writes lines longer than the 4096 characters :func:`detect_format` looks at first, and a
    single object on one line (a compact config) has no second line."""
    with open_log(path, errors="replace") as fh:
        lines = (line.strip() for line in fh)
        first = next((line for line in lines if line), "")
        second = next((line for line in lines if line), "")
    if not second.startswith("{"):
        return False
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


#: Suffixes of the logs this package reads by their name (before a compression suffix; the ingest
#: drops them from a run's id).
LOG_SUFFIXES: tuple[str, ...] = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".log", ".txt", ".out")


def compressed_log_error(path: str | Path) -> str | None:
    """Why a compressed log that :func:`detect_format` took for no log is not read, naming the
    file; None for any other file. A log compressed by a program this package cannot read
    (``metrics.jsonl.zst`` without the ``zstandard`` module) or a compressed TensorBoard event
    file (read as it lies on disk) is refused with the command that decompresses it; a
    compressed log (``log.csv.gz``, ``train.log.xz``) whose archive is corrupt or cut short
    is said to be so; a log compressed by a program none of whose modules is read here
    (``trainer_state.json.lz4``) is :func:`unread_compression_error`'s. A folder's compressed
    logs were left out without a word ("no log of a known format found here" when they were all
    it held)."""
    path = Path(path)
    if (why := unread_compression_error(path)) is not None:
        return why
    suffix = compression_suffix(path)
    inner = inner_name(path) if suffix else ""
    event_file = inner.startswith(EVENT_FILE_PREFIX)
    # a rotated piece's name (train.log.2.gz) is a log's too: a corrupt one was left out unsaid
    log_named = _log_named(inner)
    if suffix is None or not (event_file or log_named):
        return None
    if suffix in DECOMPRESSORS and not event_file:
        # as far as detect_format's sniff looks, a chunk at a time: an archive cut short there is
        # why no log was found in it (a console log's dicts after a long preamble); past it, a
        # file without a log in its first SNIFF_BYTES is no log (nor decompressed whole for it)
        try:
            with open_log(path, errors="replace") as fh:
                seen = 0
                while seen < SNIFF_BYTES and (block := fh.read(1 << 20)):
                    seen += len(block)
        except READ_ERRORS as exc:
            return str(unreadable(path, exc))
        return None  # read, and no log (a console log without metrics)
    return _decompress_first(path, event_file=event_file)


def _log_named(name: str) -> bool:
    """Whether a file of this name (without its compression suffix) is read as a log by its name:
    a log's suffix (:data:`LOG_SUFFIXES`) or a rotated piece's (``train.log.2``)."""
    return Path(name).suffix.lower() in LOG_SUFFIXES or _rotation(name) is not None


def unread_compression_error(path: str | Path, *, any_name: bool = False) -> str | None:
    """Why a log compressed by a program this package does not read (``trainer_state.json.lz4``,
    ``metrics.jsonl.br``: :data:`~bayes_grpo.runset.loaders._base.UNREAD_COMPRESSIONS`) is not
    read, naming the file, the compression, those that are read and the command that decompresses
    it; None for any other file. Only a file whose name without that suffix would have been read
    as a log (a log's suffix, a rotated piece, a TensorBoard event file), unless ``any_name`` (a
    format given for the file): an ``image.png.lz4`` is no log. Such a log was left out without
    a word, and a folder holding only it was "no log of a known format found here"."""
    path = Path(path)
    suffix = unread_compression(path)
    if suffix is None:
        return None
    inner = path.name[: -len(suffix)]
    event_file = inner.startswith(EVENT_FILE_PREFIX)
    console = Path(inner).suffix.lower() in _CONSOLE_SUFFIXES - {""}  # train.err.lz4 too
    if not (any_name or event_file or console or _log_named(inner)):
        return None
    program, command = UNREAD_COMPRESSIONS[suffix]
    what = "a TensorBoard event file" if event_file else "a log"
    read = (
        "an event file is read as TensorBoard wrote it, uncompressed"
        if event_file
        else f"bayes_grpo reads logs compressed with {read_compressions_text()}"
    )
    return (
        f"{path}: {what} compressed with {program} ({path.suffix}), not read ({read}); decompress "
        f"it first ({command} {shell_path(path)}) and ingest the {inner} it gives"
    )


def _decompress_first(path: Path, *, event_file: bool) -> str:
    """The refusal of a compressed file this package cannot read as the log it holds (a zstd
    file without ``zstandard``, a compressed TensorBoard event file), naming the command that
    decompresses it."""
    suffix = compression_suffix(path)
    # zstd is read where the zstandard module is installed: a .zst log needs no decompressing then
    module = DECOMPRESS_MODULES.get(suffix) if not event_file else None
    module = (
        f", or install the {module} module (pip install {module}), which reads it as it is"
        if module and suffix not in DECOMPRESSORS
        else ""
    )
    return (
        f"{path}: a compressed {'TensorBoard event file' if event_file else 'log'} ({suffix}), "
        f"not read; decompress it first ({DECOMPRESS_COMMANDS[suffix]} {shell_path(path)}) and "
        f"ingest the {inner_name(path)} it gives{module}"
    )



#: A rotated piece of a log, by its name without a compression suffix: numbered, ``train.log.1``,
#: ``metrics.jsonl.3`` (logrotate, Python's ``logging.handlers.RotatingFileHandler``; the highest
#: number is the oldest piece; logrotate's ``compress`` makes ``train.log.2.gz``) ...
_NUMBERED = re.compile(r"^(?P<log>.+)\.(?P<number>[0-9]{1,6})$")
#: ... or dated, ``train.log-20261205`` (logrotate's ``dateext``), ``train.log.2026-12-05`` or
#: ``train.log.2026-12-05_13-00`` (``TimedRotatingFileHandler``; the earliest date is the oldest).
_DATED = re.compile(
    r"^(?P<log>.+)[.-](?P<date>[0-9]{4}-?[0-9]{2}-?[0-9]{2}(?:[_-]?[0-9]{2}(?:-?[0-9]{2}){0,2})?)$"
)
#: The formats a logger appends to, whose pieces a rotation leaves (a Trainer state or an event
#: file is written whole, or by TensorBoard's own rule).
_ROTATED_FORMATS = frozenset({"console", "jsonl", "csv"})
#: The command that writes a file's text to stdout, by its compression suffix.
_CAT_COMMANDS: dict[str | None, str] = {
    None: "cat",
    ".gz": "zcat",
    ".bz2": "bzcat",
    ".xz": "xzcat",
    ".lzma": "lzcat",
    ".zst": "zstdcat",
}


def _rotation(name: str) -> tuple[str, tuple[int, int | str]] | None:
    """``(log, key)`` of a rotated piece's name (:data:`_NUMBERED`, :data:`_DATED`), the key
    ordering a set's pieces oldest first; None for a name of no piece of a log (``<log>`` of a
    log's suffix, :data:`LOG_SUFFIXES`: numbered data shards, ``train.00001``, are none)."""
    if (match := _NUMBERED.match(name)) is not None:
        log, key = match.group("log"), (1, -int(match.group("number")))
    elif (match := _DATED.match(name)) is not None:
        log, key = match.group("log"), (0, match.group("date"))
    else:
        return None
    return (log, key) if Path(log).suffix.lower() in LOG_SUFFIXES else None


def rotated_piece(path: str | Path) -> str | None:
    """The log a file is a rotated piece of (``train.log.2.gz``, ``train.log-20261205`` ->
    ``train.log``): a file named as one (:func:`_rotation`) whose text is a log of that log's
    format (a console log, a JSONL or CSV log); None for any other file."""
    path = Path(path)
    # by its name first: a numbered file of no log's name is not read through for metrics
    rotation = _rotation(inner_name(path))
    if rotation is not None and compression_suffix(path) not in (None, *DECOMPRESSORS):
        # its text cannot be read here (train.log.1.zst without zstandard): a piece by its name,
        # its pieces joined by a command that decompresses it (zstdcat)
        return rotation[0]
    if rotation is None or _format_of(path, rotation[0]) not in _ROTATED_FORMATS:
        return None
    return rotation[0]


def rotated_set(path: str | Path) -> list[Path]:
    """The pieces of the log that ``path`` is a rotated piece of (:func:`rotated_piece`) beside
    it, oldest first, and the log itself last where it is there (plain, else compressed:
    ``train.log.gz``); [] for a file that is no piece."""
    path = Path(path)
    log = rotated_piece(path)
    if log is None:
        return []
    pieces = []  # by their names: the file given is a piece by its text too
    for sibling in path.parent.iterdir():
        rotation = _rotation(inner_name(sibling))
        if rotation is not None and rotation[0] == log and sibling.is_file():
            pieces.append((rotation[1], sibling))
    order = [sibling for _key, sibling in sorted(pieces)]
    # the current log compressed too (a folder compressed with gzip -r: train.log.gz): the join
    # command left it out, and the log it gave lacked the training's last steps
    current = (path.parent / (log + end) for end in ("", *DECOMPRESS_COMMANDS))
    return [*order, *[c for c in current if c.is_file()][:1]]


def rotated_log_error(path: str | Path) -> str | None:
    """Why a rotated piece of a log (:func:`rotated_piece`) is not read, naming it, the pieces
    beside it oldest first and the command that joins them into one log (:func:`rotated_set`);
    None for any other file, and for a piece alone (no other piece nor its log beside it: read as
    its log).

    A piece is not a run of its own (read so, one training would become several runs, each
    numbered from step 1 where it has no step numbers), and it was left out without a word:
    the training's earlier steps were lost (a dated piece, ``train.log-20261205``, was a run)."""
    path = Path(path)
    order = rotated_set(path)
    if len(order) < 2:
        return None  # no piece, or a piece alone: read as its log (detect_format)
    log = _rotation(inner_name(path))[0]
    joined = path.parent / f"{Path(log).stem}.joined{Path(log).suffix}"
    groups: list[tuple[str, list[Path]]] = []
    for part in order:
        cat = _CAT_COMMANDS[compression_suffix(part)]
        if groups and groups[-1][0] == cat:
            groups[-1][1].append(part)
        else:
            groups.append((cat, [part]))
    cats = ["{} {}".format(cat, " ".join(shell_path(p) for p in parts)) for cat, parts in groups]
    join = cats[0] if len(cats) == 1 else "{ " + "; ".join(cats) + "; }"
    how = (
        "logrotate, Python's RotatingFileHandler: the highest number is the oldest"
        if _NUMBERED.match(inner_name(path))
        else "logrotate's dateext, Python's TimedRotatingFileHandler: the earliest is the oldest"
    )
    return (
        f"{path}: a rotated piece of {log} ({how}), not read as a run of its own; join the "
        f"pieces oldest first ({', '.join(p.name for p in order)}) into one log, {join} > "
        f"{shell_path(joined)}, and ingest that file (not the folder, whose pieces would be read "
        "again)"
    )


#: Archives of several files (a run folder packed whole), by the end of their names, and the
#: command that unpacks each into a given folder (``{archive}``, ``{folder}``: each through
#: :func:`_base.shell_path`): not a log, and not read here. Without the folder, ``tar -xzf`` and
#: ``unzip`` unpacked into the folder the user ran them in, wherever that was.
ARCHIVE_COMMANDS: dict[str, str] = {
    ".tar": "tar -xf {archive} -C {folder}",
    ".tar.gz": "tar -xzf {archive} -C {folder}",
    ".tgz": "tar -xzf {archive} -C {folder}",
    ".tar.bz2": "tar -xjf {archive} -C {folder}",
    ".tbz2": "tar -xjf {archive} -C {folder}",
    ".tar.xz": "tar -xJf {archive} -C {folder}",
    ".txz": "tar -xJf {archive} -C {folder}",
    ".tar.lzma": "tar --lzma -xf {archive} -C {folder}",
    ".tlz": "tar --lzma -xf {archive} -C {folder}",
    ".tar.zst": "tar --zstd -xf {archive} -C {folder}",
    ".zip": "unzip {archive} -d {folder}",
    ".7z": "7z x {archive} -o{folder}",
    ".rar": "unrar x {archive} {folder}/",
}


def _archive_suffix(path: Path) -> str | None:
    """The end of an archive's name (:data:`ARCHIVE_COMMANDS`), None for any other file."""
    return next((e for e in ARCHIVE_COMMANDS if path.name.lower().endswith(e)), None)


def unpack_command(path: str | Path) -> str | None:
    """The shell command that unpacks an archive of files into its own folder, wherever it is
    run (:data:`ARCHIVE_COMMANDS`); None for any other file."""
    path = Path(path)
    end = _archive_suffix(path)
    if end is None:
        return None
    return ARCHIVE_COMMANDS[end].format(archive=shell_path(path), folder=shell_path(path.parent))


def archive_error(path: str | Path) -> str | None:
    """Why an archive of files (``runs.tar.gz``, ``run.zip``: :data:`ARCHIVE_COMMANDS`) is not
    read, with the command that unpacks it into its own folder and that folder to ingest; None
    for any other file. It was "not a recognised log format", which said nothing of what to do."""
    path = Path(path)
    if (unpack := unpack_command(path)) is None:
        return None
    return (
        f"{path}: an archive of files ({_archive_suffix(path)}), not a log; unpack it first "
        f"({unpack}) and ingest the folder it unpacks into, {path.parent}"
    )


def detect_format(path: str | Path) -> str | None:
    """The format of one log file, from its name and, where needed, its first bytes.

    Returns None for a file that is not a log this package reads.
    """
    path = Path(path)
    if (log := rotated_piece(path)) is not None:
        # a piece of a log beside its others is no run of its own (rotated_log_error says why);
        # a piece alone is the log it was cut from
        return None if len(rotated_set(path)) > 1 else _format_of(path, log)
    return _format_of(path, log_name(path))


def _format_of(path: Path, name: str) -> str | None:
    """:func:`detect_format` of the file ``path`` read as if named ``name`` (a rotated piece's
    text as the log it was cut from: :func:`rotated_log_error`)."""
    if compression_suffix(path) is not None and compression_suffix(path) not in DECOMPRESSORS:
        return None  # not readable here (compressed_log_error says how to read it)
    name = name.lower()
    suffix = Path(name).suffix
    if name.startswith(EVENT_FILE_PREFIX):
        # TensorBoard reads an event file as it lies on disk: a compressed one is no event file
        return "tensorboard" if compression_suffix(path) is None else None
    if name == "trainer_state.json":
        return "trainer_state"
    if suffix in {".csv", ".tsv"}:
        return "csv"
    if suffix in {".jsonl", ".ndjson"}:
        return "jsonl"
    if suffix == ".json":
        try:
            with open_log(path, errors="replace") as fh:
                head = fh.read(_SNIFF_CHARS).lstrip()
            if head.startswith("{") and _holds(path, '"log_history"'):
                return "trainer_state"
            if head.startswith("["):
                return "jsonl"
            if head.startswith("{") and ("\n{" in head or _json_lines_of_long_records(path)):
                return "jsonl"
        except READ_ERRORS:
            return None  # a compressed one: compressed_log_error says why
        return None
    if suffix in _CONSOLE_SUFFIXES or suffix.startswith(".log"):
        return "console" if looks_like_console(path) else None
    return None


def load_file(path: str | Path, fmt: str | None = None, **kwargs) -> list[RawRun]:
    """Read every run of one log file (format auto-detected unless ``fmt`` is given).

    A compressed file that cannot be read as the log it holds (:func:`compressed_log_error`) is
    refused with the command that decompresses it, a ``fmt`` given or not; a path that is not
    there is said to be so, and a folder given without ``fmt`` is no log file (``load_runs``
    searches it; ``fmt="trainer_state"`` reads a Trainer output folder)."""
    path = Path(path)
    if not path.exists():  # was "not a recognised log format", or "cannot read the file" with fmt
        raise LogFormatError(f"{path}: no such file or directory")
    if path.is_dir() and fmt is None:
        raise LogFormatError(
            f"{path}: a folder, not a log file; load_runs searches a folder for its logs "
            "(load_file reads a Trainer output folder with fmt='trainer_state')"
        )
    fmt = fmt or detect_format(path)
    if fmt is None and path.suffix.lower() in RUNSET_SUFFIXES:
        # the CLI re-reads a saved run set given to ingest; the function said "not a recognised
        # log format" of it
        raise LogFormatError(
            f"{path}: a netCDF file (a saved run set?), not a log; read a run set with "
            "bayes_grpo.runset.load_runset"
        )
    if fmt is None and (
        why := rotated_log_error(path) or compressed_log_error(path) or archive_error(path)
    ):
        raise LogFormatError(why)
    if fmt is None:
        raise LogFormatError(f"{path}: not a recognised log format (formats: {', '.join(FORMATS)})")
    if (why := unread_compression_error(path, any_name=True)) is not None:
        # a format given for a file compressed by a program not read here: its compressed bytes
        # were read as that format's text
        raise LogFormatError(why)
    if fmt not in LOADERS:
        raise LogFormatError(f"{path}: unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    suffix = compression_suffix(path)
    if suffix is not None and (suffix not in DECOMPRESSORS or fmt == "tensorboard"):
        # a format given for a file that cannot be decompressed here (a .zst without zstandard;
        # an event file, read as it lies on disk): its compressed bytes were read as that
        # format's text, and the error said "cannot decode byte 0xb5" or "no metric dicts found"
        raise LogFormatError(
            _decompress_first(
                path,
                event_file=fmt == "tensorboard" or log_name(path).startswith(EVENT_FILE_PREFIX),
            )
        )
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return LOADERS[fmt](path, **kwargs)


__all__ = [
    "ARCHIVE_COMMANDS",
    "DECOMPRESSORS",
    "DECOMPRESS_COMMANDS",
    "FORMATS",
    "LOADERS",
    "LOG_SUFFIXES",
    "RUNSET_SUFFIXES",
    "LogFormatError",
    "ManifestRow",
    "RawRun",
    "add_scalars_owner",
    "archive_error",
    "unpack_command",
    "choose_trainer_state",
    "compressed_log_error",
    "detect_format",
    "inner_name",
    "is_event_file",
    "is_hparams_companion",
    "load_console",
    "load_csv",
    "load_file",
    "load_jsonl",
    "load_tensorboard",
    "load_trainer_state",
    "log_name",
    "open_log",
    "read_manifest",
    "resolve_trainer_state",
    "rotated_log_error",
    "rotated_piece",
    "rotated_set",
    "unread_compression_error",
]
