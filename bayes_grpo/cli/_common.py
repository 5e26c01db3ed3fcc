"""Helpers shared by the CLI modules: JSON output and table printing."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import numbers
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from bayes_grpo._io import HTML_SUFFIXES, NETCDF_SUFFIXES, check_suffix
from bayes_grpo.checks.base import jsonable, refuse_repeats


def spelled_like(*choices: str) -> Callable[[str], str]:
    """An argparse ``type`` that accepts ``-`` and ``_`` alike, returning the spelling of ``choices``.

    The verbs grew both spellings (``fit --likelihood state-space``, ``invariance --likelihood
    state_space``); with this either works everywhere and ``--help`` keeps showing one.
    """
    canonical = {c.replace("-", "_"): c for c in choices}
    return lambda text: canonical.get(text.replace("-", "_"), text)


#: Figure formats a figure option writes, chosen by the file's extension.
FIGURE_FORMATS: tuple[str, ...] = ("png", "svg", "pdf")


def figure_format(path: str | Path, option: str) -> str:
    """The format a figure output is written in: its extension, one of
    :data:`FIGURE_FORMATS`; ``ValueError`` naming the option otherwise (``-o x.txt`` wrote PNG
    bytes under a ``.txt`` name, ``--plot x.pdf`` PNG bytes under ``.pdf``). Checked before any work."""
    ext = Path(path).suffix.lower().lstrip(".")
    if ext not in FIGURE_FORMATS:
        raise ValueError(
            f"{path}: {option} writes a figure as {', '.join(FIGURE_FORMATS)} by its extension; "
            f"got {('.' + ext) if ext else 'no extension'}"
        )
    return ext


def finite_float(text: str) -> float:
    """An argparse ``type``: a finite number (``nan`` and ``inf`` are no setting of a run)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse ``type``: a finite number above 0 (``--stop-threshold -1`` was refused only
    after the posterior had been read, as "stop threshold must be ...", naming no option)."""
    value = finite_float(text)
    if not value > 0.0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse ``type``: a finite number >= 0 (``predict --k-ref -1`` was refused after the
    posterior had been read, as "k_ref must be a finite lag >= 0", naming no option)."""
    value = finite_float(text)
    if not value >= 0.0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def parse_values(text: str, kind: type = float, flag: str | None = None) -> list:
    """``"0:40"`` / ``"0:40:5"`` (integer ranges, end exclusive) or ``"a,b,c"``; ``flag`` names
    the option in the error. An empty list is an error (``simulate bandit --lr ""`` was an
    IndexError traceback; ``--k-ref 0:4:0`` said "range() arg 3 must not be zero")."""
    where = f"{flag}: " if flag else ""
    text = str(text).strip()
    if ":" in text and issubclass(kind, numbers.Number):
        # ranges are of numbers: a string kind takes the text as it is (`compare --laws
        # single_exp:logistic` said "bad range 'single_exp:logistic'; use START:STOP ...")
        try:
            parts = [int(p) for p in text.split(":")]
        except ValueError:
            parts = []
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] == 0):
            raise ValueError(
                f"{where}bad range {text!r}; use START:STOP or START:STOP:STEP (whole numbers, STEP != 0)"
            )
        values = list(range(*parts))
        if not values:
            raise ValueError(f"{where}empty range {text!r}")
        return [kind(v) for v in values]
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{where}cannot read {text!r} as a list of {kind.__name__} values") from None
    if not values:
        raise ValueError(f"{where}no values given")
    refuse_repeats(values, text, flag)
    return values


class JoinedLists(argparse.Action):
    """The action of a ``nargs="+"`` option whose ``type`` reads one comma list
    (:func:`parse_values`): the words' lists joined into one, refused by :func:`refuse_repeats`
    as one comma list is (``compare --laws single_exp single_exp`` was taken, the repeat
    dropped quietly, while ``--laws single_exp,single_exp`` was refused)."""

    def __call__(self, parser, namespace, values, option_string=None):
        joined = [v for given in values for v in given]
        text = " ".join(",".join(map(str, given)) for given in values)
        try:
            refuse_repeats(joined, text)
        except ValueError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None
        setattr(namespace, self.dest, joined)


def int_values(text: str, flag: str | None = None) -> list[int]:
    """:func:`parse_values` of whole numbers (``--k-ref``, ``--group-size``); ``flag`` names
    the option in the error (``--k-ref inf`` was an ``OverflowError`` traceback, ``nan``
    "cannot convert float NaN to integer")."""
    values = parse_values(text, float, flag)
    if any(not math.isfinite(v) or v != int(v) for v in values):
        raise ValueError(f"{flag + ': ' if flag else ''}expected integers, got {text!r}")
    return [int(v) for v in values]


def checked_values(text: str, flag: str, test: Callable[[float], bool], need: str, *, whole: bool = False) -> list:
    """The values of a list option (:func:`int_values` when ``whole``, else :func:`parse_values`),
    each checked by ``test``; a bad one is an error naming ``flag`` and what it ``need``s
    (``"--lr: needs finite learning rates > 0, got nan"``): the simulators check the same, but
    their messages name their parameters, not the options."""
    values = int_values(text, flag) if whole else parse_values(text, flag=flag)
    bad = [v for v in values if not test(v)]
    if bad:
        raise ValueError(f"{flag}: needs {need}, got {', '.join(map(str, bad))}")
    return values


def fraction_below_one(text: str) -> float:
    """An argparse ``type``: a number in ``[0, 1)`` (``simulate sde --ragged 1`` was refused as
    "ragged and missing_frac must lie in [0, 1)", the simulator's parameters, naming no flag)."""
    value = finite_float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1), got {text!r}")
    return value


def momentum_value(text: str) -> float:
    """An argparse ``type``: a momentum ``mu`` (heavy ball) or Adam ``beta1`` in ``[0, 1)``
    (``--momentum 1`` reached the stability thresholds, whose message named no flag)."""
    return fraction_below_one(text)


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def positive_int(text: str) -> int:
    """An argparse ``type``: a whole number >= 1 (``--draws``, ``--chains``: 0 chains crashed
    PyMC with a ZeroDivisionError traceback, 0 draws failed after sampling)."""
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse ``type``: a whole number >= 0 (``--tune``: -1 crashed the sampler)."""
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def open_fraction(text: str) -> float:
    """An argparse ``type``: a number strictly between 0 and 1 (``--target-accept``)."""
    value = finite_float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1, got {text!r}")
    return value


class RawWrappedDescriptionFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's and epilog's own line breaks and indented lines (format tables,
    examples to copy), as ``RawDescriptionHelpFormatter`` does, and wraps an unindented line longer
    than the terminal at word boundaries: the descriptions of ``stability``, ``sweep``,
    ``simulate`` and ``train`` were single lines of 200-480 characters that the terminal broke
    mid-word."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        lines: list[str] = []
        for block in _prose_blocks(text):
            if len(block) == 1 and (block[0][:1].isspace() or not block[0]):
                lines.append(indent + block[0] if block[0] else "")
            elif all(len(indent + line) <= width for line in block):
                lines += [indent + line for line in block]
            else:
                # a paragraph is wrapped as one: wrapped line by line, each source line longer
                # than an 80-column terminal left a stub ("... with --convention ema (Adam
                # beta1) the recursion has" / "step eta (1 - beta1), so ...")
                lines += textwrap.wrap(
                    " ".join(block), width, initial_indent=indent, subsequent_indent=indent,
                    break_long_words=False, break_on_hyphens=False,
                )  # fmt: skip
        return "\n".join(lines)


#: A prose line that starts a paragraph of its own: a list item or a ``label:`` (``gain: a = ...``,
#: ``--json: ...``, ``manifest (CSV/YAML): ...``), which the help's text lays out as a line of its own.
_PARAGRAPH_START = re.compile(r"^(?:[-*] |[\w./*-]+(?: \([^()\s]*\))?: )")


def _prose_blocks(text: str) -> list[list[str]]:
    """``text``'s lines as blocks: each blank or indented line alone (kept as written), and
    paragraphs of consecutive unindented lines, one starting at each :data:`_PARAGRAPH_START`."""
    blocks: list[list[str]] = []
    prose = False
    for line in text.splitlines():
        if not line.strip() or line[:1].isspace():
            blocks.append([line if line.strip() else ""])
            prose = False
        elif prose and not _PARAGRAPH_START.match(line):
            blocks[-1].append(line)
        else:
            blocks.append([line])
            prose = True
    return blocks


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default X)`` to an option's help only where it says something.

    ``(default X)`` is how every command writes a default value (``(default 1000)``; argparse's
    own "(default: 1000)" made ``fit --help`` differ from the others); ``(default: ...)`` is for
    a description (``(default: the fitted runs)``). Not when the help already states its
    default, and not for flags and unset options (a default of None, False or an empty list),
    where argparse's own formatter printed "(default: None)" after text that had just explained
    what happens without the option.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = action.default is None or action.default is False or action.default == []
        if "default" in text or unset or action.default is argparse.SUPPRESS:
            return text
        stated = super()._get_help_string(action)
        return stated.replace(" (default: %(default)s)", " (default %(default)s)")


#: Run coordinates a ``--default KEY=VALUE`` may fill where the run set does not know them.
DEFAULT_KEYS = ("learning_rate", "momentum", "momentum_convention", "k_ref", "group_size")


def _default_reader(keys: tuple[str, ...], why: str = "") -> Callable[[str], tuple[str, object]]:
    """The argparse ``type`` of ``--default``: ``KEY=VALUE`` with KEY one of ``keys`` (``why``:
    the reason the verb takes only these, in the error)."""

    def read(text: str) -> tuple[str, object]:
        if "=" not in text:
            raise argparse.ArgumentTypeError(f"--default expects KEY=VALUE, got {text!r}")
        key, value = text.split("=", 1)
        if key not in keys:
            raise argparse.ArgumentTypeError(f"--default key must be one of {keys}{why}, got {key!r}")
        if key == "momentum_convention":
            return key, value
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--default {key}: not a number: {value!r}") from None
        if not math.isfinite(number):
            # nan / inf: no setting of a run ("must be null (no default) or a number; got nan")
            raise argparse.ArgumentTypeError(f"--default {key}: must be a finite number, got {value!r}")
        return key, number

    return read


_parse_default = _default_reader(DEFAULT_KEYS)


class _AppendDefault(argparse.Action):
    """``--default``'s action: appends ``(KEY, VALUE)``; a KEY given again with another value is
    an argument error (``--default k_ref=1 --default k_ref=2`` took 2 without a word)."""

    def __call__(self, parser, namespace, values, option_string=None):
        key, value = values
        given = dict(getattr(namespace, self.dest, None) or [])
        if key in given and given[key] != value:
            shown = [f"{v:g}" if isinstance(v, float) else repr(v) for v in (given[key], value)]
            raise argparse.ArgumentError(self, f"{key} given twice ({shown[0]} and {shown[1]}); give each KEY once")
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])


def add_hyperparameter_defaults_flag(
    parser: argparse.ArgumentParser, keys: tuple[str, ...] = DEFAULT_KEYS, why: str = ""
) -> None:
    """``--default KEY=VALUE`` (repeatable): what the model errors name when a run lacks a
    hyperparameter the mechanistic form needs (every verb that builds the model has it). ``keys``:
    the settings the verb reads (``compare``'s laws read momentum and k_ref only: ``compare
    --default group_size=8`` was taken and did nothing); ``why`` says so in the error."""
    parser.add_argument(
        "--default",
        dest="defaults",
        action=_AppendDefault,
        type=_default_reader(keys, why),
        default=[],
        metavar="KEY=VALUE",
        help=f"value for runs whose hyperparameter is unknown; KEY one of {', '.join(keys)} (repeatable)",
    )


def with_hyperparameter_defaults(config: dict[str, Any] | None, defaults: list[tuple[str, object]]) -> dict[str, Any] | None:
    """``config`` with the ``--default`` values merged into its ``hyperparameter_defaults``."""
    if not defaults:
        return config
    out = dict(config or {})
    out["hyperparameter_defaults"] = dict(out.get("hyperparameter_defaults", {})) | dict(defaults)
    return out


def read_json_object(path: Path, option: str = "--config") -> dict[str, Any]:
    """The JSON object in ``path`` (a ``--config`` file); ``ValueError`` naming the file when it
    is missing, not UTF-8 text, not JSON, JSON that is not an object (``[1, 2]``, ``"x"``:
    these failed later with an ``AttributeError`` traceback), or an object that gives a key twice."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such {option} file")
    if path.is_dir():  # was an IsADirectoryError traceback
        raise ValueError(f"{path}: {option} is a folder; give its JSON file")

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        # json.loads keeps the last of two equal keys: '{"plateau": {"sigma": 1}, "plateau":
        # {"sigma": 3}}' (a pasted entry) fitted at sigma 3 without a word of the 1
        keys = [k for k, _ in pairs]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"{path}: {option} gives the {'key' if len(twice) == 1 else 'keys'} {twice} twice in one object; keep one")
        return dict(pairs)

    try:
        value = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=unique_keys)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: {option} is not UTF-8 text ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ValueError(
            f"{path}: {option} must hold a JSON object {{key: value, ...}}, got {type(value).__name__} {value!r:.80}"
        )
    return value


def add_lr_schedule_args(parser: argparse.ArgumentParser, *, what: str) -> None:
    """``--lr-schedule``, ``--warmup-steps``, ``--decay-steps`` (read by :func:`lr_schedule_from_args`)."""
    from bayes_grpo.dynamics.schedule import SCHEDULES

    parser.add_argument(
        "--lr-schedule",
        "--lr-scheduler",  # the name `bayes-grpo train` takes (transformers' lr_scheduler_type)
        dest="lr_schedule",
        default="constant",
        metavar="SCHEDULE",
        help=(
            f"learning-rate schedule of {what}: {', '.join(SCHEDULES)} (Hugging Face's, as TRL uses "
            "them; default constant), or a CSV file with columns step,lr (the rate of each update, "
            "from step 0, linear in between); --lr is the nominal (peak) rate"
        ),
    )
    parser.add_argument(
        "--warmup-steps",
        type=non_negative_int,
        default=0,
        help="linear warm-up from rate 0 over this many updates (default 0); with constant this "
        "is transformers' constant_with_warmup (its plain constant ignores a warm-up)",
    )
    parser.add_argument(
        "--decay-steps",
        type=positive_int,
        default=None,
        help="update at which linear and cosine schedules reach 0: the planned training length "
        "(default: the horizon)",
    )


def lr_schedule_from_args(
    args: argparse.Namespace, learning_rate: float, n_updates: int
) -> tuple[Any, str | None]:
    """``(multipliers lr[n] / learning_rate for n < n_updates, label)`` of the schedule options,
    or ``(None, None)`` for a constant rate without warm-up. A CSV file's errors name it."""
    import numpy as np

    from bayes_grpo.dynamics.schedule import SCHEDULES, lr_multipliers

    spec = args.lr_schedule
    if spec in SCHEDULES:
        if spec == "constant" and args.decay_steps is not None:
            # also with a warm-up, where it was ignored and shown as "decay to step T"
            raise ValueError("--decay-steps needs --lr-schedule linear or cosine")
        if spec == "constant" and args.warmup_steps == 0:
            return None, None
        warm = args.warmup_steps
        if spec != "constant" and (args.decay_steps or n_updates) <= warm:
            # lr_multipliers' own message named decay_steps, and the horizon as if it were given
            if args.decay_steps is None:
                raise ValueError(
                    f"--lr-schedule {spec}: --warmup-steps {warm} does not end before the horizon ("
                    f"{n_updates} updates), where the decay ends by default; give --decay-steps (the "
                    "planned training length) above the warm-up"
                )
            raise ValueError(
                f"--lr-schedule {spec}: --decay-steps {args.decay_steps} must exceed --warmup-steps "
                f"{warm} (the decay follows the warm-up)"
            )
        multipliers = lr_multipliers(
            spec, n_updates, warmup_steps=args.warmup_steps, decay_steps=args.decay_steps
        )
        label = spec + (f", warm-up {args.warmup_steps}" if args.warmup_steps else "")
        return multipliers, label + (f", decay to step {args.decay_steps}" if args.decay_steps else "")
    path = Path(spec)
    if not path.is_file():
        raise ValueError(
            f"--lr-schedule {spec!r} is neither a schedule ({', '.join(SCHEDULES)}) nor a file"
        )
    if args.warmup_steps or args.decay_steps is not None:
        raise ValueError(f"{path}: --warmup-steps and --decay-steps apply to named schedules, not a file")
    try:
        frame = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable CSV file ({exc})") from exc
    cols = {str(c).strip().lower(): c for c in frame.columns}
    for names in (("step",), ("lr", "learning_rate")):
        given = [c for c in frame.columns if str(c).strip().lower() in names]
        if len(given) > 1:  # one silently won over the other
            raise ValueError(f"{path}: columns {given} all name the {names[0]}; keep one")
    rate_col = cols.get("lr", cols.get("learning_rate"))
    if "step" not in cols or rate_col is None:
        raise ValueError(f"{path}: a schedule file needs columns step and lr; has {list(frame.columns)}")
    step = pd.to_numeric(frame[cols["step"]], errors="coerce").to_numpy(dtype=float)
    rate = pd.to_numeric(frame[rate_col], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(step) & np.isfinite(rate) & (rate >= 0))
    if bad.any():
        row = int(np.argmax(bad))
        # Python values (10, nan), not numpy's reprs (np.int64(10), np.float64(nan))
        step_cell, rate_cell = frame[cols["step"]].tolist()[row], frame[rate_col].tolist()[row]
        raise ValueError(
            f"{path}: row {row + 2} has step {step_cell!r}, lr {rate_cell!r}; "
            "each row needs a number step and a rate >= 0"
        )
    order = np.argsort(step, kind="stable")
    step, rate = step[order], rate[order]
    if np.any(np.diff(step) == 0):
        raise ValueError(f"{path}: step {step[np.argmax(np.diff(step) == 0)]:g} is given twice")
    if step.size == 0 or step[-1] < n_updates - 1:
        last = f"ends at step {step[-1]:g}" if step.size else "is empty"
        raise ValueError(f"{path}: the schedule {last}; the horizon needs the rate up to update {n_updates - 1}")
    if step[0] > 0:
        # np.interp would carry the first rate back to update 0: a file from a logger whose
        # first row is step 1 (or that skips a warm-up) was read as a run without that warm-up
        raise ValueError(
            f"{path}: the schedule starts at step {step[0]:g}; the horizon needs the rate from update 0"
        )
    if not learning_rate > 0:  # the multipliers divide by it: inf or negative ones, and a RuntimeWarning
        raise ValueError(
            f"{path}: --lr must be a positive number (the nominal rate of the file's rates), got {learning_rate:g}"
        )
    updates = np.arange(n_updates, dtype=float)
    return np.interp(updates, step, rate) / learning_rate, str(path)


def warn_unused_sampler_options(args: argparse.Namespace, asked: bool, what: str) -> None:
    """Warn that ``--draws`` / ``--tune`` / ``--chains``, given, set sampled stages that ``asked``
    says were not asked for: '--draws, --tune set ``what``: not used' (``what`` names the stages
    and that they were not asked: 'the fits of --leave-one-g-out, which was not asked')."""
    unused = [f"--{k}" for k in ("draws", "tune", "chains") if getattr(args, k, None) is not None]
    if unused and not asked:
        import warnings

        warnings.warn(
            f"{', '.join(unused)} {'sets' if len(unused) == 1 else 'set'} {what}: not used",
            UserWarning,
            stacklevel=2,
        )


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as JSON (for scripts)")


def add_reward_bounds_flag(parser: argparse.ArgumentParser, effect: str) -> None:
    """``--reward-bounds LO HI``: the reward bounds of the verbs that build the model (``fit``,
    ``invariance``, ``compare``) and of ``forecast`` (:mod:`bayes_grpo.runset.bounds`), read by
    :func:`reward_bounds_arg`. ``effect``: what the bounds do in that verb, and its default."""
    parser.add_argument(
        "--reward-bounds",
        type=finite_float,
        nargs=2,
        metavar=("LO", "HI"),
        default=None,
        help=f"the reward is known to lie in [LO, HI] (e.g. 0 1 for a success rate or accuracy): {effect}",
    )


def reward_bounds_arg(args: argparse.Namespace) -> tuple[float, float] | None:
    """``--reward-bounds`` as ``(lo, hi)`` (None when not given); bounds with ``lo >= hi`` are a
    ``ValueError`` naming the flag (:func:`bayes_grpo.runset.bounds.check_reward_bounds`)."""
    from bayes_grpo.runset.bounds import check_reward_bounds

    try:
        return check_reward_bounds(tuple(args.reward_bounds) if args.reward_bounds else None)
    except ValueError as exc:
        raise ValueError(f"--reward-bounds: {exc}") from exc


def add_progress_flag(parser: argparse.ArgumentParser, what: str = "the progress bar") -> None:
    """``--no-progress``: the one rule of the verbs that show their progress (``fit``, ``compare``,
    ``sweep``, ``simulate bandit``): shown on stderr by default, hidden by ``--no-progress`` and by
    ``--json`` (read by :func:`show_progress`)."""
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help=f"hide {what} on stderr (shown by default; hidden with --json too)",
    )


def show_progress(args: argparse.Namespace) -> bool:
    """Whether a verb shows its progress (:func:`add_progress_flag`); ``simulate bandit``'s old
    opt-in flag ``--progress`` (from before the bar was its default) shows it even with
    ``--json``, not with ``--no-progress``."""
    if args.no_progress:
        return False
    return bool(getattr(args, "progress", False)) or not args.json


def progress_lines(args: argparse.Namespace, verb: str):
    """A ``progress`` callable printing each line to stderr as ``bayes-grpo VERB: line`` when the
    verb shows its progress (:func:`show_progress`), else None: what ``compare`` and
    ``invariance`` pass to their Python functions, which are quiet unless given one."""
    if not show_progress(args):
        return None
    return lambda line: print(f"bayes-grpo {verb}: {line}", file=sys.stderr, flush=True)


def number_text(value: object, fmt: str = ".6g") -> str:
    """A number as the text output prints it: to 6 significant digits by default (the JSON keeps
    every digit), ``n/a`` for None. ``predict`` printed a float's last bits
    (``stop_threshold: 0.009638012403187308``) where ``stability`` prints 6 digits."""
    return "n/a" if value is None else format(float(value), fmt)


def value_text(value: object) -> object:
    """``value`` of a ``key: value`` text line with its floats by :func:`number_text` (a list of
    numbers as ``[a, b]``); anything else, integers and flags included, as it is."""
    if isinstance(value, float):
        return number_text(value)
    if isinstance(value, list) and value and all(isinstance(v, float) for v in value):
        return f"[{', '.join(number_text(v) for v in value)}]"
    return value


def print_json(obj: Any) -> None:
    json.dump(jsonable(obj), sys.stdout, indent=2)
    sys.stdout.write("\n")


def print_table(frame: pd.DataFrame, *, title: str | None = None) -> None:
    if title:
        print(title)
    with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200):
        print(frame.to_string())


def add_overwrite_flag(
    parser: argparse.ArgumentParser, help: str = "replace output files that exist already"
) -> None:
    parser.add_argument("--overwrite", action="store_true", help=f"{help} (default: refuse)")


@contextlib.contextmanager
def sampler_messages(shown: bool) -> Iterator[None]:
    """PyMC's progress messages (its INFO lines) as ``shown`` says; its warnings are kept either way.

    Every verb that samples (``fit``, ``invariance``, ``report``, ``demo``) hides them under
    ``--json`` and, where it has one, ``--no-progress``, as it hides the progress bar: ``fit
    --json`` and ``fit --no-progress`` printed "Auto-assigning NUTS sampler...", "Sampling 2
    chains ..." on stderr. ``compare`` makes its fits quiet itself
    (:func:`bayes_grpo.predict.compare.fit_law`)."""
    if shown:
        yield
        return
    import logging

    from bayes_grpo.model.core import pymc_messages_at

    with pymc_messages_at(logging.WARNING):
        yield


@contextlib.contextmanager
def naming_the_run_set(path: object) -> Iterator[None]:
    """Re-raise a :class:`~bayes_grpo.runset.RunSetError` (a run set the model cannot take: a
    setting unknown for some runs, no LLM at two G for an invariance test ...) with the run-set
    file the user gave in front, unless its message already names it."""
    from bayes_grpo.runset import RunSetError

    try:
        yield
    except RunSetError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise RunSetError(f"{path}: {exc}") from exc


def check_output_paths(
    outputs: dict[str, object | None],
    inputs: dict[str, object | None] | None = None,
    *,
    overwrite: bool,
    figures: tuple[str, ...] = (),
    netcdf: tuple[str, ...] = (),
    html: tuple[str, ...] = (),
) -> None:
    """Refuse, before any work, an output path that would destroy something.

    ``outputs`` and ``inputs`` map an option name (for the message) to a path or None; list
    values are several paths. Raises ``FileExistsError`` when

    * an output is one of the command's input files (never allowed, even with
      ``overwrite``: a typo such as ``forecast runs.nc -o runs.nc`` must not replace the run
      set with the forecast);
    * two outputs share a path (the second would replace the first);
    * an output is an existing folder (a file path is needed), exists and is not a regular file
      (a device such as ``/dev/null``, a pipe: the writer would replace it), or lies below a file;
    * an output file already exists and ``overwrite`` is False (``--overwrite`` replaces it);

    and ``PermissionError`` when the folder an output goes to (or the nearest existing folder
    above it) cannot be written.

    The outputs named in ``figures`` must also have an extension :func:`figure_format`
    writes, those named in ``netcdf`` one of :data:`~bayes_grpo._io.NETCDF_SUFFIXES`, those
    named in ``html`` ``.html``/``.htm`` (``ValueError`` otherwise: ``ingest -o runs.csv`` wrote
    netCDF under a name the next ``ingest runs.csv`` read as a CSV log).
    """
    given: dict[Path, Path] = {}  # each resolved path: the path as given (its links unfollowed)

    def flat(named: dict[str, object | None]) -> list[tuple[str, Path]]:
        pairs = []
        for name, value in named.items():
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if item is not None and str(item) != "":
                    raw = Path(str(item)).expanduser()
                    pairs.append((name, raw.resolve()))
                    given.setdefault(pairs[-1][1], raw)
        return pairs

    outs, ins = flat(outputs), flat(inputs or {})
    for i, (out_name, out) in enumerate(outs):
        for in_name, src in ins:
            if out == src and src.is_file():
                raise FileExistsError(
                    f"{out}: {out_name} is the {in_name} file; writing there would replace the "
                    "input. Choose another output path."
                )
        for other_name, other in outs[:i]:
            if out == other:
                raise FileExistsError(f"{out}: given as both {other_name} and {out_name}; choose two paths")
    # a second pass: an output that is an input is reported as such even when an earlier
    # output merely exists
    for out_name, out in outs:
        if out.is_dir():
            raise FileExistsError(f"{out}: {out_name} is an existing folder; give a file path")
        raw = given.get(out, out)
        if (out.exists() and not out.is_file()) or (raw.exists() and not raw.is_file() and not raw.is_dir()):
            # `-o /dev/stdout` resolves to /proc/<pid>/fd/pipe:[N], a name of no file: only the
            # path as given is the pipe (it was "the folder /proc/<pid>/fd is not writable")
            # a device, a pipe, a socket: the atomic writer would put a file in its place (as
            # root, `-o /dev/null --overwrite` replaced /dev/null with the output)
            raise FileExistsError(
                f"{raw if raw.exists() else out}: {out_name} is not a regular file (a device such as /dev/null, a pipe or a "
                "socket), which the output would replace; give a file path"
            )
        # the writer makes missing folders; a file where a folder must be failed after the
        # work, with "[Errno 17] File exists: 'fit.nc'"
        blocking = next((p for p in out.parents if p.exists()), None)
        if blocking is not None and not blocking.is_dir():
            raise FileExistsError(
                f"{out}: {out_name} would be written inside {blocking}, which is a file, not a folder"
            )
        # a folder the user cannot write to failed after the work, naming the writer's
        # temporary file ("No such file or directory: '/proc/.r.html.oeowhoxe.tmp'"); a real
        # file is the only test that holds for root and read-only mounts alike
        if blocking is not None:
            try:
                with tempfile.TemporaryFile(dir=blocking):
                    pass
            except OSError as exc:
                raise PermissionError(
                    f"{out}: {out_name} cannot be written: the folder {blocking} is not writable "
                    f"({exc.strerror or exc})"
                ) from None
        if out.exists() and not overwrite:
            raise FileExistsError(
                f"{out}: {out_name} already exists; pass --overwrite to replace it "
                "or choose another path"
            )
    for name in figures:
        if outputs.get(name) is not None and str(outputs[name]) != "":
            figure_format(outputs[name], name)
    for names, suffixes, what in (
        (netcdf, NETCDF_SUFFIXES, "netCDF"),
        (html, HTML_SUFFIXES, "an HTML page"),
    ):
        for name in names:
            if outputs.get(name) is not None and str(outputs[name]) != "":
                check_suffix(outputs[name], name, suffixes, what)
