"""What every loader returns: one :class:`RawRun` per run found in a file, in long form.

A loader only reads: it turns a file into ``(step, metric, value)`` records in the order the
file had them, under the file's own metric names, plus whatever hyperparameters the file
itself carries. Everything else (numeric conversion, NaN counting, duplicated or backward
steps, name mapping, the reward choice, hyperparameter merging) happens once, for every
format alike, in :mod:`bayes_grpo.runset.ingest`.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import json
import lzma
import shlex
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pandas as pd
import yaml

#: Encoding logs and configs are read in: UTF-8, without the byte-order mark that Windows tools
#: (PowerShell, Notepad, spreadsheets) put first; plain UTF-8 reads the same. Read as plain
#: UTF-8, that mark made JSON files unreadable and the first line of a JSONL file "corrupt".
TEXT_ENCODING = "utf-8-sig"
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


#: The command that decompresses a file of each compression suffix (gzip, bzip2, xz, the legacy
#: ``.lzma`` of LZMA Utils, zstd).
DECOMPRESS_COMMANDS: dict[str, str] = {
    ".gz": "gunzip -k",
    ".bz2": "bunzip2 -k",
    ".xz": "unxz -k",
    ".lzma": "unlzma -k",
    ".zst": "unzstd",
}
#: What each compression suffix is, for messages.
_ARCHIVE_KINDS: dict[str, str] = {
    ".gz": "gzip",
    ".bz2": "bzip2",
    ".xz": "xz",
    ".lzma": "lzma",
    ".zst": "zstd",
}
#: The compressed logs read as the log they hold (``log.csv.gz`` is a CSV log): gzip, bzip2, xz
#: and the legacy ``.lzma`` of LZMA Utils with the standard library (:func:`lzma.open` reads
#: either format by its header, ``FORMAT_AUTO``), zstd where the ``zstandard`` module is
#: installed. A compressed log was not read at all ("decompress it first"); archived runs are
#: often kept so. A ``.lzma`` log was refused with ``unlzma -k`` though the standard library
#: reads it.
DECOMPRESSORS: dict[str, Callable[..., IO]] = {
    ".gz": gzip.open,
    ".bz2": bz2.open,
    ".xz": lzma.open,
    ".lzma": lzma.open,
}
#: What reading a corrupt or truncated compressed file raises besides :class:`OSError` (gzip's
#: ``BadGzipFile``, bzip2's "Invalid data stream"): a gzip, bzip2 or lzma file cut short
#: ("Compressed file ended before the end-of-stream marker was reached"), a damaged deflate
#: stream, xz's and lzma's own.
ARCHIVE_ERRORS: tuple[type[BaseException], ...] = (EOFError, zlib.error, lzma.LZMAError)
try:  # zstd has no standard-library module before Python 3.14
    import zstandard
except ImportError:  # pragma: no cover - depends on the environment
    zstandard = None
else:  # pragma: no cover - depends on the environment
    DECOMPRESSORS[".zst"] = zstandard.open
    ARCHIVE_ERRORS = (*ARCHIVE_ERRORS, zstandard.ZstdError)
#: Errors reading a log may raise (the file's, the archive's, its text's).
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, UnicodeDecodeError, *ARCHIVE_ERRORS)


#: The module that reads a compression suffix the standard library does not (before Python 3.14).
DECOMPRESS_MODULES: dict[str, str] = {".zst": "zstandard"}


def not_decompressed(path: str | Path) -> str | None:
    """Why a file compressed by a program this package does not read here (a ``.zst`` without
    the ``zstandard`` module: :data:`DECOMPRESS_MODULES`) is not read, with the module that reads
    it and the command that decompresses it; None for any other file. A file compressed by a
    program none of whose modules this package reads (``config.yaml.lz4``:
    :data:`UNREAD_COMPRESSIONS`) says so, with the command."""
    if (unread := unread_compression(path)) is not None:
        program, command = UNREAD_COMPRESSIONS[unread]
        return (
            f"compressed with {program}, which bayes_grpo does not read (it reads "
            f"{read_compressions_text()}); decompress it, {command} {shell_path(path)}"
        )
    suffix = compression_suffix(path)
    if suffix is None or suffix in DECOMPRESSORS:
        return None
    module = DECOMPRESS_MODULES[suffix]
    return (
        f"compressed with {_ARCHIVE_KINDS[suffix]}, which the {module} module reads: pip install "
        f"{module}; or decompress it, {DECOMPRESS_COMMANDS[suffix]} {shell_path(path)}"
    )


#: Compressions this package does not read, by the suffix their programs give a file (lower case:
#: ``.Z`` of ``compress`` too), with the program and the command that decompresses the file and
#: keeps it: lz4, brotli, lzip, lzop, snappy's framing (snzip), ``compress`` / ``pack`` (``.Z`` /
#: ``.z``, which ``gzip -d`` reads). A log so compressed (``trainer_state.json.lz4``,
#: ``metrics.jsonl.br``) was left out without a word, "no log of a known format found here"
#: where it was all a folder held: :func:`unread_compression`.
UNREAD_COMPRESSIONS: dict[str, tuple[str, str]] = {
    ".lz4": ("lz4", "lz4 -dm"),  # -m: to the file, not stdout, where stdout is no terminal
    ".br": ("brotli", "brotli -d"),
    ".lz": ("lzip", "lzip -dk"),
    ".lzo": ("lzop", "lzop -d"),
    ".sz": ("snappy", "snzip -dk"),
    ".z": ("compress", "gzip -dk"),
}


def unread_compression(path: str | Path) -> str | None:
    """The suffix of a compression this package does not read (:data:`UNREAD_COMPRESSIONS`) that
    a file's name ends with, lower case; None for any other file."""
    suffix = Path(path).suffix.lower()
    return suffix if suffix in UNREAD_COMPRESSIONS else None


def read_compressions_text() -> str:
    """The compressions a log is read in, for messages: "gzip (.gz), bzip2 (.bz2), xz (.xz),
    lzma (.lzma) or zstd (.zst, with the zstandard module)" (:data:`DECOMPRESS_COMMANDS`, :data:`DECOMPRESS_MODULES`)."""
    kinds = [
        f"{_ARCHIVE_KINDS[s]} ({s}{f', with the {DECOMPRESS_MODULES[s]} module' if s in DECOMPRESS_MODULES else ''})"
        for s in DECOMPRESS_COMMANDS
    ]
    return ", ".join(kinds[:-1]) + " or " + kinds[-1]


def shell_path(path: str | Path) -> str:
    """A path as a shell command of a message gives it (the command that decompresses a log,
    joins rotated pieces, unpacks an archive), quoted where it needs to be (:func:`shlex.quote`).
    Put in single quotes by hand, a path holding one (``bob's runs/``) broke the command."""
    return shlex.quote(str(path))


def compression_suffix(path: str | Path) -> str | None:
    """The compression suffix a file's name ends with (:data:`DECOMPRESS_COMMANDS`: ``.gz`` of
    ``log.csv.gz``), lower case; None for a file not compressed by its name."""
    suffix = Path(path).suffix.lower()
    return suffix if suffix in DECOMPRESS_COMMANDS else None


def inner_name(path: str | Path) -> str:
    """A file's name without its compression suffix, read here or not (``train.log.1.zst`` ->
    ``train.log.1`` without ``zstandard`` too, where :func:`log_name` keeps the suffix): what a
    rotated piece and a config are told by."""
    path = Path(path)
    suffix = compression_suffix(path)
    return path.name[: -len(suffix)] if suffix else path.name


def log_name(path: str | Path) -> str:
    """A log's own name, without the compression suffix of a compressed log this package reads
    (``log.csv.gz`` -> ``log.csv``): what its format and its run's id are told by."""
    path = Path(path)
    suffix = compression_suffix(path)
    return path.name[: -len(suffix)] if suffix in DECOMPRESSORS else path.name


def file_copies(folder: Path, name: str) -> list[Path]:
    """The copies of ``folder/name`` there, in the order they are tried: the plain file, then its
    compressed copies (``trainer_state.json.gz``, ``config.yaml.xz``: :data:`DECOMPRESSORS`, in
    their order); :func:`first_readable` reads the first readable one and names the others. A
    run archived with ``gzip -r`` keeps its Trainer state and configs so: its state was not found,
    and its hyperparameters were lost without a word."""
    candidates = (name, *(name + suffix for suffix in DECOMPRESSORS))
    return [folder / c for c in candidates if (folder / c).is_file()]


def unread_copies(folder: Path, name: str) -> list[Path]:
    """The copies of ``folder/name`` compressed by a program not read here (``config.yaml.zst``
    without ``zstandard``, ``config.yaml.lz4``: :func:`not_decompressed`), which
    :func:`file_copies` leaves out."""
    unread = [s for s in DECOMPRESS_COMMANDS if s not in DECOMPRESSORS]
    # config.yaml.lz4, config.yaml.Z (UNREAD_COMPRESSIONS) were left out without a word
    candidates = (name + suffix for suffix in [*unread, *UNREAD_COMPRESSIONS, ".Z"])
    return [folder / c for c in candidates if (folder / c).is_file()]


def first_readable(
    copies: list[Path],
    read: Callable[[Path], object],
    *,
    shown: Callable[[Path], str] = str,
    other: str = "another file",
    to_read: str = "give {names} to read it",
) -> tuple[Path, object | None, list[str], list[str]]:
    """The first of a folder's copies of one file (:func:`file_copies`: the plain file, then its
    compressed copies) that ``read`` reads, its content, notes (of the copies before it that are
    not readable, and of those after it, not read) and the copies' errors; the first copy and
    None when no copy is readable. The one rule of a folder's Trainer state and its configs.

    ``read`` raises :class:`LogFormatError` naming the file for a copy that cannot be read;
    ``shown`` is a copy's name in the notes, ``other`` what a copy not read may be besides a
    compressed copy and ``to_read`` how to read it (``{names}``: the copies not read, ``{read}``:
    the one read, both as shown).

    A file beside its compressed copy was read plain and the copy left out without a word (a
    copy holding a longer training too); a plain file cut short or corrupt was the run's error,
    or a config "not read", though a readable copy lay beside it."""
    errors: list[str] = []
    for i, path in enumerate(copies):
        try:
            content = read(path)
        except LogFormatError as exc:
            errors.append(str(exc))
            continue
        notes = [f"{exc}; passed over for {shown(path)}, a copy beside it" for exc in errors]
        if others := [shown(p) for p in copies[i + 1 :]]:
            names = " and ".join(others)
            how = to_read.format(names=names, read=shown(path))
            notes.append(
                f"read {shown(path)}; {names} beside it {'is' if len(others) == 1 else 'are'} "
                f"not read (a compressed copy, or {other}: {how})"
            )
        return path, content, notes, errors
    return copies[0], None, [], errors


def open_bytes(path: str | Path) -> IO[bytes]:
    """A file's bytes as a stream, decompressed as they are read for a compressed file
    (:data:`DECOMPRESSORS`): :func:`open_log`'s way for a file that is no text (a compressed
    ``training_args.bin``). Its errors are :func:`open_log`'s."""
    path = Path(path)
    suffix = compression_suffix(path)
    return DECOMPRESSORS[suffix](path, "rb") if suffix in DECOMPRESSORS else path.open("rb")


def open_log(path: str | Path, *, errors: str = "strict") -> IO[str]:
    """A log file's text as a stream, the one way the loaders open a log: decompressed as it is
    read for a compressed log (:data:`DECOMPRESSORS`), in its :func:`text_encoding`.

    ``OSError`` (no such file, a corrupt archive), :data:`ARCHIVE_ERRORS` (an archive cut short)
    and ``UnicodeDecodeError`` come from opening or reading it; :func:`unreadable` words them."""
    path = Path(path)
    encoding = text_encoding(path)
    suffix = compression_suffix(path)
    if suffix in DECOMPRESSORS:
        return DECOMPRESSORS[suffix](path, "rt", encoding=encoding, errors=errors)
    return path.open("r", encoding=encoding, errors=errors)


def unreadable(path: Path, exc: BaseException) -> LogFormatError:
    """The error of a log that cannot be read, naming the file: a compressed one's archive is
    said to be corrupt or cut short (gzip's own words, "Compressed file ended before the
    end-of-stream marker was reached", name no file). An error of the file system (no such
    file, no permission: an ``OSError`` with an ``errno``) or of the text is said as it is."""
    suffix = compression_suffix(path)
    of_the_archive = not isinstance(exc, UnicodeDecodeError) and getattr(exc, "errno", None) is None
    if suffix in DECOMPRESSORS and of_the_archive:
        return LogFormatError(
            f"{path}: not a readable {_ARCHIVE_KINDS[suffix]} file, corrupt or cut short "
            f"({error_message(exc)})"
        )
    return LogFormatError(f"{path}: cannot read the file ({error_message(exc)})")


def text_encoding(path: Path) -> str:
    """The encoding to read a log or config in: UTF-16 when the file (a compressed log's text)
    starts with its byte-order mark (Windows PowerShell 5 writes ``python train.py > train.log``
    so), else :data:`TEXT_ENCODING`. Read as UTF-8, such a log was no log at all."""
    try:
        with open_bytes(Path(path)) as fh:
            head = fh.read(2)
    except READ_ERRORS:
        return TEXT_ENCODING  # reading the file reports the error
    return "utf-16" if head in _UTF16_BOMS else TEXT_ENCODING

#: Columns of :attr:`RawRun.records`.
RECORD_COLUMNS: tuple[str, ...] = ("step", "metric", "value")

#: Keys that carry the step number in per-step records, in priority order.
STEP_KEYS: tuple[str, ...] = (
    "step",
    "global_step",
    "train/global_step",
    "trainer/global_step",
    "global_step/max_steps",  # ms-swift: '300/2622' (the step and the run's length)
    "_step",
    "optimizer_step",
    "iteration",
    "iter",
    "grpo_step",
    "update",
    "training_iteration",
)


class LogFormatError(ValueError):
    """A log file cannot be read as the format it was taken for (message names the file)."""


@dataclass
class RawRun:
    """One run as read from a log, before normalisation.

    Attributes
    ----------
    path
        The file the run was read from.
    fmt
        Format name (``"trainer_state"``, ``"csv"``, ``"jsonl"``, ``"tensorboard"``, ``"console"``).
    records
        Long table with columns ``step`` (as logged, any dtype), ``metric`` (source name) and
        ``value`` (as logged: numbers, numeric strings, text, None), in file order.
    name
        The run's name inside a multi-run file (wandb exports), else None.
    name_hint
        A name the log gives the run (``run_name`` in a TRL config), used for its id when unique.
    config
        Hyperparameters the log itself carries (flattened ``{key: value}``).
    config_source
        Where ``config`` came from, for messages (e.g. ``"TensorBoard text summary args/text_summary"``).
    model_config
        The model's config (``config.json`` content), when the log carries it.
    notes
        Loader warnings about this run (e.g. steps numbered by order of appearance).
    rejected
        Set when these records are *not* a run: rows of a multi-run file that name no run
        (an empty run column). The text says why; ingestion reports it as a rejected source
        and keeps none of the records, so they are neither dropped unseen nor merged into a run.
    numbered_by_order
        The log gives no step numbers: its records were numbered by their order (``logging_steps``
        apart), the only case a ``logging_steps`` given to the loader is used.
    """

    path: Path
    fmt: str
    records: pd.DataFrame
    name: str | None = None
    name_hint: str | None = None
    config: dict[str, object] = field(default_factory=dict)
    config_source: str = ""
    model_config: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    rejected: str | None = None
    numbered_by_order: bool = False

    @property
    def label(self) -> str:
        """``path`` or ``path#name`` for messages."""
        return f"{self.path}#{self.name}" if self.name else str(self.path)


def read_text(path: Path) -> str:
    """A log file's text (:func:`text_encoding`); an unreadable or empty file raises
    :class:`LogFormatError` naming it (empty: a run that has not logged yet, most likely), as does
    a file compressed by a program not read here (:func:`not_decompressed`: its compressed bytes
    were read as text, "cannot read the file ('utf-8' codec can't decode ...)")."""
    if (why := not_decompressed(path)) is not None:
        raise LogFormatError(f"{path}: not read ({why})")
    try:
        with open_log(path) as fh:
            text = fh.read()
    except READ_ERRORS as exc:
        raise unreadable(path, exc) from exc
    if not text.strip():
        raise LogFormatError(f"{path}: empty file (nothing logged yet, or being written?)")
    return text


def json_error(path: Path, text: str, exc: json.JSONDecodeError) -> LogFormatError:
    """The error of a JSON file that does not parse, naming the file and saying whether it was
    cut short (the error at its end, or in a string its end left open: a file being written) or
    is corrupt. ``exc.msg`` may end in "at" ("Unterminated string starting at"): the place
    follows once ("at line L, column C"), not "at at line L"."""
    cut = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
    where = "truncated" if cut else "corrupt"
    msg = exc.msg.removesuffix(" at")
    return LogFormatError(
        f"{path}: unreadable JSON ({where}: {msg} at line {exc.lineno}, column {exc.colno})"
    )


def error_message(exc: BaseException) -> str:
    """An exception's message on one line, for a warning or an error naming a file.

    A YAML parser's message spans lines (the offending line echoed, a caret under it, the
    place of the context and of the problem): it broke the ingest's one-line-per-warning list.
    It becomes its context and problem and where the problem is."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        what = ", ".join(str(part) for part in (exc.context, exc.problem) if part)
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{what}{where}"
    return " ".join(str(exc).split())


def records_from_dicts(
    entries: Iterable[Mapping[str, object]],
    step_of: Callable[[Mapping[str, object]], object],
    *,
    skip: Iterable[str] = (),
) -> pd.DataFrame:
    """Long records from per-step dictionaries.

    Parameters
    ----------
    entries
        One mapping per logged entry, in file order.
    step_of
        ``entry -> step`` (any value; checked later).
    skip
        Keys that are not metrics (the step key itself, record-type tags).

    Nested mappings (``{"train": {"reward": 0.5}}``) give metrics under joined names
    (``train/reward``); lists are kept as values, which ingestion reports as non-numeric fields
    rather than dropping them unseen.
    """
    skip = set(skip)
    steps: list[object] = []
    metrics: list[str] = []
    values: list[object] = []
    for entry in entries:
        step = step_of(entry)
        for key, value in entry.items():
            if key in skip:
                continue
            items = (
                flatten(value, prefix=f"{key}/", sep="/")
                if isinstance(value, Mapping)
                else {key: value}
            )
            for name, item in items.items():
                if item is None:
                    continue  # not logged at this step (a logged NaN is a float and is kept)
                steps.append(step)
                metrics.append(str(name))
                values.append(item)
    return pd.DataFrame(
        {"step": steps, "metric": metrics, "value": values}, columns=list(RECORD_COLUMNS)
    )


def flatten(config: Mapping[str, object], prefix: str = "", sep: str = ".") -> dict[str, object]:
    """Nested mapping -> ``{"a.b.c": value}`` (lists kept as values; ``sep`` joins the keys)."""
    out: dict[str, object] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, prefix=name + sep, sep=sep))
        else:
            out[name] = value
    return out


def other_global_steps(keys: Iterable[str], step_key: str) -> list[str]:
    """Keys besides ``step_key`` that give the same step where a record lacks it: ``global_step``
    under another prefix. OpenRLHF logs its training with ``train/global_step`` and its
    evaluations with ``eval/global_step`` only; in a wandb history export the evaluation rows
    have no ``train/global_step``. Only a ``global_step`` stands in for a ``global_step``: a
    loop's ``step`` may count rollouts, and wandb's ``_step`` counts log calls."""

    def is_global(key: str) -> bool:
        return key.lower() == "global_step" or key.lower().endswith("/global_step")

    if not is_global(step_key):
        return []
    return [str(k) for k in keys if str(k) != step_key and is_global(str(k))]


def find_step_key(keys: Iterable[str]) -> str | None:
    """The highest-priority step key among ``keys`` (exact, then case-insensitive)."""
    keys = list(keys)
    for cand in STEP_KEYS:
        if cand in keys:
            return cand
    lowered = {k.lower(): k for k in keys}
    for cand in STEP_KEYS:
        if cand in lowered:
            return lowered[cand]
    return None
