"""TRL / transformers console output: the per-step metric dicts the Trainer prints to stdout.

``Trainer`` prints each log as a Python dict, ``{'loss': 0.01, 'reward': 0.4, ...}`` (some
versions and subclasses print the values as strings, ``{'reward': '0.125'}``), when that
is all a user kept. The dicts carry no step number; it is recovered, in order:

1. from a ``step`` / ``global_step`` key in the dicts, when present;
2. from the tqdm training bar in the same log: the Trainer redraws the bar at every log
   event, so a bar counter printed twice in a row (``5/200 ... 5/200``) marks a logging step;
   used when the number of such marks equals the number of metric dicts;
3. else by order of appearance (1, 2, 3 ...), with a warning: right only for
   ``logging_steps=1`` (a manifest can give ``logging_steps`` to scale it).

A log holding several trainings one after the other (``epoch`` starts over, the tqdm bar starts
over) gives one run per training; a training resumed from a checkpoint into the same log
(``epoch`` falls back to an epoch it logged before, past its first; the bar falls back, not to
its start) stays one run, its repeated steps keeping the later values. ``nan``/``inf`` printed bare are read as NaN/inf. verl's
console lines (``step:12 - critic/score/mean:0.41 - ...``, NumPy scalars ``np.float64(0.41)``
too) are read too; they carry their step.

Evaluation dicts (``{'eval_loss': ..., 'eval_reward': ...}``) take the step of the training dict
before them. The end-of-training summary dict (``train_runtime`` ...) is not a curve point.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

from bayes_grpo.checks.base import counted
from bayes_grpo.runset.loaders._base import (
    READ_ERRORS,
    LogFormatError,
    RawRun,
    find_step_key,
    open_log,
    records_from_dicts,
    unreadable,
)
from bayes_grpo.runset.names import (
    METRIC_ALIASES,
    SUMMARY_KEYS,
    is_reward_like,
    is_summary_entry,
    split_eval,
)

_DICT_AT_END = re.compile(r"(\{[^{}\n]*\})[ \t\r]*$", re.M)
# Python prints float("nan") / float("inf") as bare names, which literal_eval refuses
_BARE_NONFINITE = re.compile(r"(?<=[:\s,\[])(-?inf|nan)(?=\s*[,}\]])")
# NumPy >= 2 prints its scalars as "np.float64(0.15)" (a custom loop's {'reward': np.mean(r)}),
# which literal_eval refuses: such a log was no log at all, left out of a folder without a word
_NUMPY_SCALAR = re.compile(r"\bnp\.(?:float|int|uint)\d*\(\s*([^()]*?)\s*\)")
_BAR = re.compile(r"(\d+)/(\d+) \[")
# a metric dict the log's end cut short (a run still writing): "{'loss': 0.01, 'rew"
_CUT_DICT = re.compile(r"\{'[^{}\n]*:[^{}\n]*$")
# verl's console logger: "step:12 - critic/score/mean:0.41 - actor/entropy:1.2"
_VERL_LINE = re.compile(r"(?:^|\s)step:(\d+)\s+-\s+(.*)$", re.M)
_KNOWN = {src for sources in METRIC_ALIASES.values() for src in sources} | {"epoch"}


def _is_metric_dict(d: object) -> bool:
    if not isinstance(d, dict) or not d:
        return False
    keys = {str(k) for k in d}
    # a custom loop's {'step': 3, 'score': 0.4, 'acc': 0.5}: an accuracy-like reward is what the
    # JSONL and CSV readers take as the reward, so the console reader must not refuse its log
    return any(
        split_eval(k)[1] in _KNOWN or k.startswith("rewards/") or is_reward_like(k) for k in keys
    ) or bool(SUMMARY_KEYS & keys)


def find_metric_dicts(text: str) -> list[dict]:
    """Every Trainer metric dict printed in ``text``, in order (summary dicts included)."""
    out = []
    for match in _DICT_AT_END.finditer(text):
        literal = _BARE_NONFINITE.sub(r"'\1'", _NUMPY_SCALAR.sub(r"\1", match.group(1)))
        try:
            parsed = ast.literal_eval(literal)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if _is_metric_dict(parsed):
            out.append(parsed)
    return out


def find_verl_lines(text: str) -> list[dict]:
    """verl console lines ``step:N - key:value - ...`` as dicts with a ``step`` key."""
    out = []
    for match in _VERL_LINE.finditer(text):
        entry: dict[str, object] = {"step": int(match.group(1))}
        for item in match.group(2).split(" - "):
            key, sep, value = item.strip().rpartition(":")
            if sep and key:
                # verl >= 0.4 prints values with pprint.pformat: its np.mean results read
                # 'np.float64(0.47)' under NumPy 2 (they were dropped as text fields)
                entry[key] = _NUMPY_SCALAR.sub(r"\1", value.strip())
        if len(entry) > 1:
            out.append(entry)
    return out


#: How far into a text file the console sniff looks for a first metric line. A log's first
#: metric dict may follow megabytes of start-up output (model loading, vLLM / Ray / NCCL messages
#: of every rank): with the first 2 MB only, such a log was no log, skipped in a folder unsaid.
SNIFF_BYTES = 16_000_000


def _trainer_logs(dicts: list[dict]) -> tuple[list[dict], list[dict]]:
    """The Trainer's own dicts of a log, and the other printed dicts.

    The Trainer adds ``epoch`` to every log it prints once training has started; in a log with
    its training dicts (``epoch`` and ``learning_rate``, at least two), a dict without ``epoch``
    that is no evaluation (one before training has none) was printed by other code: a reward
    function's per-sample ``{'reward': 1.0, 'answer': '42'}``. Logs of custom loops, which print
    no such pair, are returned as they are.
    """
    trainer = sum("epoch" in d and "learning_rate" in d for d in dicts)
    if trainer < 2:
        return dicts, []
    kept = [d for d in dicts if "epoch" in d or _is_eval_dict(d)]
    return kept, [d for d in dicts if not ("epoch" in d or _is_eval_dict(d))]


def _clip(text: str, limit: int = 60) -> str:
    """``text`` for a message, cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(entry: dict, limit: int = 60) -> str:
    """A printed dict for a message, cut to ``limit`` characters."""
    return _clip(str(entry), limit)


def looks_like_console(path: Path, *, max_bytes: int = SNIFF_BYTES) -> bool:
    """Cheap sniff: does the file contain a Trainer metric dict or a verl step line (within its
    first ``max_bytes``)? Read line by line, parsing only lines that may hold one."""
    seen = 0
    try:
        with open_log(path, errors="replace") as fh:
            for line in fh:
                if ("}" in line or "step:" in line) and (
                    find_metric_dicts(line) or find_verl_lines(line)
                ):
                    return True
                seen += len(line)
                if seen >= max_bytes:
                    break
    except READ_ERRORS:
        return False  # a compressed log's archive: compressed_log_error says why
    return False


def _bar_segments(text: str) -> list[list[list[int]]]:
    """Per tqdm bar (by total): its logging marks, split where the bar starts over.

    A bar that falls back to a count above its segment's first mark is a training resumed from a
    checkpoint in the same log: its marks stay in the segment (steps repeated from there on).
    """
    bars: dict[int, list[int]] = {}
    for match in _BAR.finditer(text):
        bars.setdefault(int(match.group(2)), []).append(int(match.group(1)))
    out = []
    for _total, seq in sorted(bars.items(), key=lambda kv: -len(kv[1])):
        segments: list[list[int]] = [[]]
        for prev, cur in zip(seq, seq[1:]):
            if cur != prev:
                continue
            seg = segments[-1]
            if seg and cur < seg[-1]:
                if cur > seg[0]:
                    seg.append(cur)  # resumed from a checkpoint: the steps after it again
                    continue
                segments.append([])  # a new training started in the same log
            if not segments[-1] or cur > segments[-1][-1]:
                segments[-1].append(cur)
        out.append([seg for seg in segments if seg])
    return out


def steps_from_progress_bar(text: str, sizes: list[int]) -> list[list[int]] | None:
    """Logging steps read off the tqdm bar's redraws, if they account for every metric dict.

    Parameters
    ----------
    sizes
        Number of metric dicts of each training in the log.
    """
    for segments in _bar_segments(text):
        if [len(seg) for seg in segments] == sizes:
            return segments
        flat = [m for seg in segments for m in seg]
        if len(sizes) == 1 and len(flat) == sizes[0] and flat == sorted(set(flat)):
            return [flat]
    return None


#: Relative tolerance within which two logged epochs are the same logging step.
EPOCH_RTOL: float = 1e-6


def _same_epoch(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=EPOCH_RTOL)


def _epoch(d: dict) -> float | None:
    try:
        return float(d.get("epoch"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _split_trainings(dicts: list[dict]) -> list[list[dict]]:
    """Split step-less dicts where ``epoch`` starts over: a new training in the same log.

    ``epoch`` falling back is a new training, unless it falls back to an epoch the part's
    training dicts logged before, after the first: that is the same training resumed from a
    checkpoint (``tee -a`` of the resumed process, logging again at the steps it logged before),
    which stays in the part (:func:`_order_slots` numbers it). Evaluation dicts move no epoch.
    """
    parts: list[list[dict]] = [[]]
    seen: list[float] = []  # epochs of the part's training dicts, in order
    for d in dicts:
        epoch = None if _is_eval_dict(d) else _epoch(d)
        if epoch is not None and seen and epoch < seen[-1] and parts[-1]:
            resumed = any(_same_epoch(epoch, e) for e in seen[1:])
            if not resumed:
                parts.append([])
                seen = []
        parts[-1].append(d)
        if epoch is not None:
            seen.append(epoch)
    return parts


def _order_slots(train_dicts: list[dict]) -> tuple[list[int], list[str]]:
    """Logging slots (1, 2, 3 ...) of a training's dicts in order, a resume going back in them.

    Where ``epoch`` falls back (a resume from a checkpoint), the dict takes the slot of the first
    earlier dict at that epoch or later, so the steps logged again repeat their slots (ingestion
    keeps the later values and reports the repeats).
    """
    slots: list[int] = []
    seen: list[tuple[float, int]] = []
    notes: list[str] = []
    last = None
    for d in train_dicts:
        epoch = _epoch(d)
        slot = slots[-1] + 1 if slots else 1
        if epoch is not None and last is not None and epoch < last:
            slot = next((s for e, s in seen if e > epoch or _same_epoch(e, epoch)), slot)
            notes.append(
                f"epoch falls back from {last:g} to {epoch:g} (a resume from a checkpoint): the "
                f"dicts from there on take the slots of the ones logged before at those epochs"
            )
        slots.append(slot)
        if epoch is not None:
            seen.append((epoch, slot))
            last = epoch
    return slots, notes


def _is_eval_dict(d: dict) -> bool:
    """An evaluation log (``eval_*`` keys and ``epoch`` only): it shares the last training step."""
    keys = [str(k) for k in d if str(k) != "epoch"]
    return bool(keys) and all(k.startswith("eval_") for k in keys)


def _with_eval_steps(part: list[dict], train_steps: list[int]) -> list[int]:
    """Steps of every dict: training dicts in order, evaluation dicts at the step before them."""
    it = iter(train_steps)
    out: list[int] = []
    current = 0
    for d in part:
        if not _is_eval_dict(d):
            current = next(it)
        out.append(current)
    return out


def load_console(path: str | Path, *, logging_steps: int | None = None) -> list[RawRun]:
    """Read the run(s) of a stdout log with Trainer metric dicts (or verl step lines).

    Parameters
    ----------
    path
        The log file.
    logging_steps
        Steps between two printed dicts, used only when no step can be recovered from the log.

    Returns
    -------
    list[RawRun]
        One run per training in the log (a log of several trainings in a row, recognised by the
        ``epoch`` starting over, gives runs named ``part1``, ``part2`` ...).
    """
    path = Path(path)
    try:
        with open_log(path, errors="replace") as fh:
            text = fh.read()
    except READ_ERRORS as exc:
        raise unreadable(path, exc) from exc
    dicts = [d for d in find_metric_dicts(text) if not is_summary_entry(d)]
    verl = find_verl_lines(text)
    file_notes = []
    # verl's step lines are a verl log's metrics; a dict printed in it (a reward function's
    # per-sample {'score': 1.0, 'acc': True}) is none: taken for the Trainer's metric dicts, such
    # dicts were the curve and the step lines were not read
    if any(_is_metric_dict({k: v for k, v in d.items() if k != "step"}) for d in verl):
        if dicts:
            file_notes.append(
                f"{counted(len(dicts), 'printed dict')} (e.g. {_short(dicts[0])}) not read as metrics: "
                "the log's verl 'step:N - ...' lines are its metrics"
            )
        dicts = verl
    elif not dicts:
        dicts = verl
    else:
        dicts, stray = _trainer_logs(dicts)
        if stray:
            file_notes.append(
                f"{counted(len(stray), 'printed dict')} without the Trainer's 'epoch' (e.g. "
                f"{_short(stray[0])}) not read as metrics: a log whose Trainer dicts carry it "
                "prints them from elsewhere (a reward function)"
            )
    if not dicts:
        raise LogFormatError(
            f"{path}: no Trainer metric dicts ({{'loss': ..., 'reward': ...}}) or verl 'step:N - ...' lines found"
        )
    last = text.rstrip().rsplit("\n", 1)[-1].rsplit("\r", 1)[-1]
    if _CUT_DICT.search(last):
        # as a JSONL log's cut last line is said (it was left out without a word)
        file_notes.append(
            f"the last line ({_clip(last.strip())}) is a metric dict cut short "
            "(a run still writing?); not read"
        )
    step_key = find_step_key(str(k) for k in dicts[0])
    if step_key is not None and all(step_key in d for d in dicts):
        parts = [dicts]
        steps = [[d[step_key] for d in dicts]]
        notes = [[]]
        by_order = False
    else:
        step_key = None
        parts = _split_trainings(dicts)
        sizes = [sum(not _is_eval_dict(d) for d in p) for p in parts]
        train_steps = steps_from_progress_bar(text, sizes)
        notes = [[] for _ in parts]
        by_order = train_steps is None
        if train_steps is None:
            stride = int(logging_steps or 1)
            train_steps = []
            for part, note in zip(parts, notes):
                slots, resumes = _order_slots([d for d in part if not _is_eval_dict(d)])
                train_steps.append([stride * slot for slot in slots])
                note.extend(resumes)
            for n, note in zip(sizes, notes):
                note.append(
                    f"no step numbers in the console log; the {n} training metric dicts were "
                    f"numbered by order of appearance with logging_steps={stride}"
                    + (
                        ""
                        if logging_steps
                        else " (assumed; give logging_steps in a manifest if wrong)"
                    )
                )
        steps = [_with_eval_steps(p, s) for p, s in zip(parts, train_steps)]
    runs = []
    for i, (part, part_steps, note) in enumerate(zip(parts, steps, notes), start=1):
        step_iter = iter(part_steps)
        skip = (step_key,) if step_key else ()
        records = records_from_dicts(part, lambda _e, it=step_iter: next(it), skip=skip)
        name = f"part{i}" if len(parts) > 1 else None
        runs.append(
            RawRun(
                path=path,
                fmt="console",
                records=records,
                name=name,
                notes=file_notes + note,
                numbered_by_order=by_order,
            )
        )
    return runs
