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

The end-of-training summary dict (``train_runtime`` ...) is not a curve point.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bayes_grpo.runset.loaders._base import (
    LogFormatError,
    RawRun,
    find_step_key,
    records_from_dicts,
)
from bayes_grpo.runset.names import METRIC_ALIASES, SUMMARY_KEYS, split_eval

_DICT_AT_END = re.compile(r"(\{[^{}\n]*\})[ \t\r]*$", re.M)
_BAR = re.compile(r"(\d+)/(\d+) \[")
_KNOWN = {src for sources in METRIC_ALIASES.values() for src in sources} | {"epoch"}


def _is_metric_dict(d: object) -> bool:
    if not isinstance(d, dict) or not d:
        return False
    keys = {str(k) for k in d}
    return any(split_eval(k)[1] in _KNOWN or k.startswith("rewards/") for k in keys) or bool(
        SUMMARY_KEYS & keys
    )


def find_metric_dicts(text: str) -> list[dict]:
    """Every Trainer metric dict printed in ``text``, in order (summary dicts included)."""
    out = []
    for match in _DICT_AT_END.finditer(text):
        try:
            parsed = ast.literal_eval(match.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if _is_metric_dict(parsed):
            out.append(parsed)
    return out


def looks_like_console(path: Path, *, max_bytes: int = 2_000_000) -> bool:
    """Cheap sniff: does the file contain at least one Trainer metric dict?"""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            text = fh.read(max_bytes)
    except OSError:
        return False
    return bool(find_metric_dicts(text))


def steps_from_progress_bar(text: str, n_dicts: int) -> list[int] | None:
    """Logging steps read off the tqdm bar's redraws, if they account for every metric dict."""
    bars: dict[int, list[int]] = {}
    for match in _BAR.finditer(text):
        bars.setdefault(int(match.group(2)), []).append(int(match.group(1)))
    for _total, seq in sorted(bars.items(), key=lambda kv: -len(kv[1])):
        marks: list[int] = []
        for prev, cur in zip(seq, seq[1:]):
            if cur == prev and (not marks or cur > marks[-1]):
                marks.append(cur)
        if len(marks) == n_dicts:
            return marks
    return None


def load_console(path: str | Path, *, logging_steps: int | None = None) -> list[RawRun]:
    """Read one run from a stdout log with Trainer metric dicts.

    Parameters
    ----------
    path
        The log file.
    logging_steps
        Steps between two printed dicts, used only when no step can be recovered from the log.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise LogFormatError(f"{path}: cannot read the file ({exc})") from exc
    dicts = [d for d in find_metric_dicts(text) if not SUMMARY_KEYS & set(map(str, d))]
    if not dicts:
        raise LogFormatError(
            f"{path}: no Trainer metric dicts ({{'loss': ..., 'reward': ...}}) found"
        )
    notes: list[str] = []
    step_key = find_step_key(str(k) for k in dicts[0])
    if step_key is not None and all(step_key in d for d in dicts):
        steps = [d[step_key] for d in dicts]
    else:
        step_key = None
        steps = steps_from_progress_bar(text, len(dicts))
        if steps is None:
            stride = int(logging_steps or 1)
            steps = [stride * (i + 1) for i in range(len(dicts))]
            notes.append(
                f"no step numbers in the console log; the {len(dicts)} metric dicts were numbered by "
                f"order of appearance with logging_steps={stride}"
                + ("" if logging_steps else " (assumed; give logging_steps in a manifest if wrong)")
            )
    step_iter = iter(steps)
    records = records_from_dicts(
        dicts, lambda _e: next(step_iter), skip=(step_key,) if step_key else ()
    )
    return [RawRun(path=path, fmt="console", records=records, notes=notes)]
