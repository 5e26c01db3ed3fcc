"""Hugging Face / TRL ``trainer_state.json`` (the Trainer's ``log_history``).

Accepts the file itself, a run directory holding it, or an output directory with
``checkpoint-*`` folders: the directory's own ``trainer_state.json`` (written at the end of
training) wins, else the one in the checkpoint with the highest step whose state is readable
(a later one cut short, being saved as the run goes on, is passed over with a note). Training
entries and evaluation entries (``eval_*`` keys, logged as separate entries at the same step)
are both read; the end-of-training summary entry (``train_runtime`` ...) is not a curve point
and is left out. A state compressed (``trainer_state.json.gz``, a checkpoint's too) is read where
the plain file is not there. The state file carries no hyperparameters; they come from files
beside it (:mod:`bayes_grpo.runset.loaders.sidecar`) or a manifest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bayes_grpo.checks.base import counted
from bayes_grpo.runset.loaders._base import (
    LogFormatError,
    RawRun,
    file_copies,
    first_readable,
    json_error,
    not_decompressed,
    read_text,
    records_from_dicts,
    unread_copies,
)
from bayes_grpo.runset.names import is_summary_entry

FILENAME = "trainer_state.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def choose_trainer_state(path: str | Path) -> tuple[Path | None, list[str]]:
    """The trainer_state.json a file or directory stands for (None when there is none), and notes.

    A file stands for itself. In a directory its own trainer_state.json wins (with a note when a
    ``checkpoint-*`` beside it is later than its last step: a training resumed after the file was
    written, whose later steps only that checkpoint holds), else the state of
    the latest ``checkpoint-*`` that is readable JSON: the Trainer writes a checkpoint's state as
    it saves it, so in a run still going (or one that crashed while saving) the latest can be cut
    short; it is passed over with a note naming it, rather than rejecting the run. When no
    checkpoint's state is readable, the latest is returned (reading it gives the error).
    A state beside a compressed copy (``trainer_state.json`` and ``trainer_state.json.gz``) is
    read plain, with a note naming the copy left out; a copy is read where the plain state is
    not readable (cut short), with a note (:func:`_readable`).
    """
    path = Path(path)
    if path.is_file():
        return path, []
    checkpoints = []
    for child in path.iterdir() if path.is_dir() else ():
        match = _CHECKPOINT.match(child.name)
        # a state compressed by a program not read here (zstd without zstandard) is tried too:
        # passed over with its reason, or the run's error, not left out unsaid
        if match and (copies := _copies(child)):
            checkpoints.append((int(match.group(1)), copies))
    checkpoints.sort(reverse=True)
    direct = _copies(path) if path.is_dir() else []
    if direct:
        state, content, notes, _errors = _readable(direct)
        last = _global_step(content)
        if checkpoints and last is not None and checkpoints[0][0] > last:
            later_path = checkpoints[0][1][0]
            later = _shown(later_path)
            # giving a .zst not read here fails as this did: say how to read it instead
            how = (
                f"give {later} to read them"
                if (why := not_decompressed(later_path)) is None
                else f"it is not read here ({why}), then give {later_path.parent.name} to read them"
            )
            notes.append(
                f"{state.name} ends at step {last:g} but {later} is later (a training resumed "
                f"after {state.name} was written?); its later steps are not read: {how}"
            )
        return state, notes
    passed_over: list[tuple[str, bool]] = []  # a reason, and whether it may be a save going on
    for _step, copies in checkpoints:
        state, content, notes, errors = _readable(copies)
        if content is None:
            # every copy failed, in order: one not read here (zstd) is no checkpoint being saved
            passed_over += [(e, not_decompressed(c) is None) for c, e in zip(copies, errors)]
            continue
        return state, [
            f"{reason}; passed over for {_shown(state)}, the latest readable state"
            + (" (a checkpoint being saved while the run goes on?)" if saving else "")
            for reason, saving in passed_over
        ] + notes
    return (checkpoints[0][1][0] if checkpoints else None), []


def _copies(folder: Path) -> list[Path]:
    """A folder's copies of its state (:func:`file_copies`), else those compressed by a program
    not read here (:func:`unread_copies`), whose reading says why."""
    return file_copies(folder, FILENAME) or unread_copies(folder, FILENAME)


def _shown(state: Path) -> str:
    """A state's name for a note: ``checkpoint-12/trainer_state.json`` in a checkpoint."""
    return (
        f"{state.parent.name}/{state.name}" if _CHECKPOINT.match(state.parent.name) else state.name
    )


def _readable(copies: list[Path]) -> tuple[Path, object | None, list[str], list[str]]:
    """The first readable of a folder's copies of its state, its content, notes and the copies'
    errors (:func:`~bayes_grpo.runset.loaders._base.first_readable`, a copy named as
    :func:`_shown`)."""
    return first_readable(copies, read_json, shown=_shown, other="another state")


def _global_step(state: object) -> float | None:
    """The last step a Trainer state logged (``global_step``), None when it has none."""
    step = state.get("global_step") if isinstance(state, dict) else None
    return float(step) if isinstance(step, int | float) and not isinstance(step, bool) else None


def resolve_trainer_state(path: str | Path) -> Path | None:
    """The trainer_state.json a file or directory stands for (:func:`choose_trainer_state`)."""
    return choose_trainer_state(path)[0]


def read_json(path: Path) -> object:
    """Parse a JSON file; an empty, truncated or corrupt file raises LogFormatError naming it."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise json_error(path, text, exc) from exc


def load_trainer_state(path: str | Path) -> list[RawRun]:
    """Read one run from a trainer_state.json (file, run directory or output directory).

    Returns
    -------
    list[RawRun]
        One run; records of every training and evaluation entry of ``log_history``.
    """
    given = Path(path)
    state_path, notes = choose_trainer_state(given)
    if state_path is None:
        raise LogFormatError(f"{given}: no {FILENAME} here or in checkpoint-* folders")
    state = read_json(state_path)
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise LogFormatError(f"{state_path}: not a Trainer state (no 'log_history' list)")
    entries = []
    n_summary = 0
    not_entries: list[int] = []  # positions of items that are no {metric: value} object
    for i, entry in enumerate(state["log_history"]):
        if not isinstance(entry, dict):
            not_entries.append(i)
            continue
        if is_summary_entry(entry):
            n_summary += 1
            continue
        entries.append(entry)
    if not entries:
        raise LogFormatError(f"{state_path}: 'log_history' has no per-step entries")
    if not_entries:
        first = state["log_history"][not_entries[0]]
        what = (
            "is not a {metric: value} object"
            if len(not_entries) == 1
            else "are not {metric: value} objects"
        )
        notes.append(
            f"{counted(len(not_entries), 'item')} of 'log_history' {what} "
            f"(first: item {not_entries[0]}, {type(first).__name__} {str(first)[:40]!r}); skipped"
        )
    if state_path.parent.name.startswith("checkpoint-") and given.resolve() != state_path.resolve():
        notes.append(
            f"read the latest checkpoint's state {state_path.parent.name}/{state_path.name}"
        )
    records = records_from_dicts(entries, lambda e: e.get("step"), skip=("step",))
    return [RawRun(path=state_path, fmt="trainer_state", records=records, notes=notes)]
