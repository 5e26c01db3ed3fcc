"""Ingest GRPO logs of any supported format into one run set.

:func:`load_runs` finds the logs under the given paths (and/or in a manifest), reads each with
its format's loader (:mod:`bayes_grpo.runset.loaders`), normalises every run the same way,
merges hyperparameters from all the places they can live, gives every run a unique id, and
ends in :func:`~bayes_grpo.runset.core.make_runset`.

Normalisation of a run (every format alike)
-------------------------------------------
- Values: numbers and numeric strings (``'0.125'``, ``'nan'``, ``'inf'``) are read as numbers;
  NaN and +-inf are kept as NaN and counted (``n_nonfinite_reward`` in the summary, a warning
  for the reward). Other text in a metric is kept as NaN with a warning giving how many and an
  example; a field that is text throughout (``loss_type``) is not a metric and is listed in a
  note. JSON ``null`` means "not logged".
- Steps: must be integers. A step logged more than once (a resumed run, a log concatenated with
  its restart) keeps the *last* value logged, and the number of repeated steps is reported;
  steps that go backwards in the file are reported separately (how often, and the first place).
  A gap between rewards far wider than the run's usual interval (a clock that jumped) is noted
  (:func:`reward_step_gap_note`); the run is kept as logged.
- Names: source metric names become canonical ones (:mod:`bayes_grpo.runset.names`); the reward
  is chosen by :func:`~bayes_grpo.runset.names.choose_reward` (or ``reward_key``).
- Length: a run with fewer than ``min_points`` finite reward values is rejected, with the reason.

Bad runs in a multi-run ingest
------------------------------
By default (``on_error="skip"``) a run that cannot be read or is rejected is left out of the run
set *and reported*: in ``ds.attrs["bayes_grpo_rejected"]`` (JSON ``{source: reason}``), in
:func:`runset_summary` (status ``rejected``), in the CLI's table and JSON, and as one Python
warning. With ``on_error="raise"`` the first bad run aborts the ingest. When no run survives,
:class:`~bayes_grpo.runset.core.RunSetError` lists every reason. Errors that concern the whole
request rather than one run (a path that does not exist, a malformed manifest, two manifest rows
with the same run id, or about the same run) always raise.

Hyperparameters (first source that has a value wins; disagreeing later sources give a warning)
------------------------------------------------------------------------------------------
1. the manifest row;  2. the project's runner metadata ``bayes_grpo_run.json`` beside the log;
3. the config inside the log (TensorBoard ``args`` text summary, also read from event files
next to a ``trainer_state.json``);  4. training configs beside the log (``training_args.json``,
``config.yaml`` ...);  5. the model config (``config.json``, TensorBoard ``model_config``): model
name, estimated parameter count;  6. constants logged as metrics (``kl_coef``, ``group_size``,
``optimizer_updates_per_rollout_batch``, ``num_parameters``, ``completions_per_step``, Adam's
``adam_beta1`` ...), text
fields of one value naming the ``model`` or ``momentum_convention`` (a W&B export's config
columns) and the logged learning rate (its schedule's peak; a value logged throughout is
compared with the configured rate as a constant).
Where each coordinate came from is kept in ``ds.attrs["bayes_grpo_ingest"]``.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import warnings as pywarnings
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo.checks.base import counted
from bayes_grpo.constants import EMA, MOMENTUM_CONVENTIONS
from bayes_grpo.runset.core import RunSetError, make_runset, runset_warnings
from bayes_grpo.runset.loaders import (
    LOG_SUFFIXES,
    LogFormatError,
    ManifestRow,
    RawRun,
    add_scalars_owner,
    archive_error,
    choose_trainer_state,
    compressed_log_error,
    detect_format,
    inner_name,
    is_event_file,
    is_hparams_companion,
    load_file,
    log_name,
    read_manifest,
    rotated_log_error,
    rotated_piece,
    unpack_command,
)
from bayes_grpo.runset.loaders._base import unread_compression
from bayes_grpo.runset.loaders.sidecar import (
    OPENRLHF_K_REF,
    OPTIMIZER_KEYS,
    SIDECAR_NAMES,
    VERL_K_REF,
    Sidecars,
    coords_from_config,
    coords_from_model_config,
    experts_of,
    find_sidecars,
    optimizer_convention,
)
from bayes_grpo.runset.loaders.tensorboard import load_tensorboard
from bayes_grpo.runset.names import (
    EVAL_PREFIX,
    HYPERPARAMETER_ALIASES,
    LOGGED_LR_VAR,
    PER_LOG_CALL_KEYS,
    SUMMARY_KEYS,
    SUMMARY_MARKERS,
    NameMapping,
    NoRewardError,
    canonical_name,
    hyperparameter_key,
    map_names,
    split_eval,
)
from bayes_grpo.runset.schema import (
    COUNT_COORDS,
    REWARD_VAR,
    RUN_COORDS,
    RUN_DIM,
    STRING_COORDS,
    readable_group_size,
)

#: Dataset attribute with per-run ingestion facts (source, reward column, counts, provenance).
INGEST_ATTR = "bayes_grpo_ingest"
#: Dataset attribute with the runs that were rejected, ``{source: {"run": id, "reason": ...}}``.
REJECTED_ATTR = "bayes_grpo_rejected"
#: Dataset attribute with the ingest's notes on what it found but did not read, and on the runs
#: of unknown G whose names read like one (a JSON list; only where there is one): :func:`ingest_notes`.
NOTES_ATTR = "bayes_grpo_ingest_notes"
#: Default minimum number of finite reward values for a run to be kept.
MIN_POINTS = 10
#: Largest distance from an integer at which a logged step is still that integer (a float
#: written as ``12.000000001``); absolute, so it does not grow with the step number.
STEP_ATOL = 1e-6
#: A gap between logged rewards is noted when it is this many times the median interval ...
GAP_FACTOR = 20
#: ... and this share of the run's step span or more (see :func:`reward_step_gap_note`).
GAP_SHARE = 0.25
#: Largest step number kept exactly (every integer up to 2**53 is a float).
MAX_STEP = 2**53

_CHECKPOINT_DIR = re.compile(r"^checkpoint-\d+$")
_PROGRESS = re.compile(r"^\s*\d+\s*/\s*\d+\s*$")
_GENERIC_DIRS = re.compile(
    r"^(checkpoint-\d+|logs?|runs|tensorboard|tb|events|outputs?|results)$", re.I
)
_GENERIC_STEMS = frozenset(
    {
        "trainer_state",
        "metrics",
        "train_metrics",
        "log",
        "logs",
        "train",
        "history",
        "progress",
        "stdout",
        "output",
        "scalars",
        "events",
        "train_log",
        "training_log",
        "logging",  # ms-swift's logging.jsonl
    }
)
_EVENT_STAMP = re.compile(r"^events\.out\.tfevents\.(\d+)")
# wandb's run folder (run-20250301_100000-abc123, offline-run-...; verl sets the run id to
# '<project>--<experiment>'): its files/ holds the run's console output (files/output.log) and
# config, so 'files' names nothing
_WANDB_RUN_DIR = re.compile(r"^(offline-)?run-\d{8}_\d{6}-.+$")
# HF's default logging folder name: datetime.now().strftime("%b%d_%H-%M-%S") + "_" + hostname
_HF_LOGGING_DIR = re.compile(r"^[A-Za-z]{3}\d{2}_\d{2}-\d{2}-\d{2}_")
#: wandb's own logs in its ``wandb/`` folder (``run-*/logs/debug.log``, linked as
#: ``wandb/debug.log``): they print the run's config as a dict (``config: {'lr': 1e-06, ...}``),
#: which reads as a metric dict, so a folder search took them for a console log of a run without
#: a reward (rejected; ``--strict`` stopped the ingest). The run's console output is
#: ``files/output.log``, which is read.
_WANDB_OWN_LOGS = frozenset({"debug.log", "debug-internal.log", "debug-core.log"})


class RunRejected(ValueError):
    """One run cannot be ingested; the message names the file, the run and the problem."""


# ------------------------------------------------------------------------------------------
# normalisation of one run
# ------------------------------------------------------------------------------------------


@dataclass
class NormalisedRun:
    """A run after normalisation: a frame indexed by step under canonical names, and facts."""

    frame: pd.DataFrame
    mapping: NameMapping
    warnings: list[str]
    facts: dict[str, object]
    logged_hparams: dict[str, object] = field(default_factory=dict)
    logged_why: dict[str, str] = field(default_factory=dict)
    #: ``{coord: warning}`` for a logged value that rounding may have changed, said when that
    #: value is the one the run keeps (no config gave the coordinate).
    logged_rounded: dict[str, str] = field(default_factory=dict)


def _to_number(value: object) -> float | None:
    """float for numbers and numeric strings (NaN/inf included); None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        try:
            return float(value)
        except OverflowError:  # a JSON integer beyond the float range: +-inf, counted as such
            return float("inf") if value > 0 else float("-inf")
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _shown_step(value: object) -> str:
    """A logged step as a message shows it: as the log wrote it (a text quoted), NumPy's
    scalars as the plain numbers they hold (their repr said 'np.int64(1152921504606846977)'), and
    a step not given (an empty cell, a JSON null) as ``(empty)``, not ``nan``."""
    if value is None or (isinstance(value, float | np.floating) and np.isnan(value)):
        return "(empty)"
    return repr(value.item() if isinstance(value, np.generic) else value)


def _skip_records(
    recs: pd.DataFrame,
    skip: pd.Series,
    where: str,
    warn: list[str],
    *,
    why: str,
    none_left: str,
    note: str = "",
    show: Callable[[object], object] = _shown_step,
) -> pd.DataFrame:
    """``recs`` without the records ``skip`` marks, said in ``warn`` with an example (step and
    metric); ``RunRejected`` (``none_left``) when that is every record. ``show`` writes a step."""
    if skip.all():
        raise RunRejected(f"{where}: {none_left} (e.g. {show(recs['step'].iloc[0])})")
    if skip.any():
        first = recs[skip].iloc[0]
        warn.append(
            f"{counted(int(skip.sum()), 'value')} {why} skipped (e.g. step {show(first['step'])}, "
            f"metric {first['metric']!r}){note}"
        )
    return recs[~skip]


def _longer_reward_hint(wide: pd.DataFrame, mapping: NameMapping, min_points: int) -> str:
    """What a run rejected for too few reward points says of a metric the reward rule would
    choose after the one it chose, when that one has ``min_points`` finite values: a log whose
    'reward' was logged a few times beside a per-function reward logged at every step was
    rejected, its usable curve unnamed. Empty when the reward was the user's ``reward_key``."""
    if mapping.reward_rule == "reward_key":
        return ""
    left = [str(c) for c in wide.columns]
    for _ in range(len(left)):
        left = [c for c in left if c != mapping.reward_source]
        try:
            mapping = map_names(left)
        except NoRewardError:
            return ""
        n = int(np.isfinite(wide[mapping.reward_source].to_numpy(dtype=float)).sum())
        if n >= min_points:
            return (
                f"; {mapping.reward_source!r} has {n}: to use it, --reward-key "
                f"{mapping.reward_source} (Python: reward_key=...)"
            )
    return ""


def normalise_run(
    raw: RawRun, *, reward_key: str | None = None, min_points: int = MIN_POINTS
) -> NormalisedRun:
    """Numbers, steps, names and reward of one raw run (see the module docstring).

    Raises
    ------
    RunRejected
        No records, no integer steps, no reward metric, or fewer than ``min_points`` rewards.
        The message ends with what reading the run had noted before (lines of the file that
        were unreadable, values without a step ...), which is often why it fell short.
    """
    warn: list[str] = list(raw.notes)
    try:
        return _normalise_run(raw, warn, reward_key=reward_key, min_points=min_points)
    except RunRejected as exc:
        if not warn:
            raise
        raise RunRejected(f"{exc} (noted while reading it: {'; '.join(warn)})") from None


def _normalise_run(
    raw: RawRun, warn: list[str], *, reward_key: str | None, min_points: int
) -> NormalisedRun:
    """:func:`normalise_run`, noting its warnings in ``warn`` as it goes."""
    where = raw.label
    recs = raw.records
    if recs.empty:
        raise RunRejected(f"{where}: no metric values in the log")
    recs = recs.copy()  # loaders leave out values that were not logged; NaN here was logged
    # steps
    # a JSON true/false is no step number (pandas reads it as 1/0, or as a bool column that
    # the checks below cannot subtract)
    is_bool = recs["step"].map(lambda v: isinstance(v, bool | np.bool_)).astype(bool)
    # a step written as progress, 'N/M' (ms-swift's 'global_step/max_steps': '300/2622'), is N
    steps = recs["step"].map(
        lambda v: v.split("/")[0] if isinstance(v, str) and _PROGRESS.match(v) else v
    )
    step_num = pd.to_numeric(steps.mask(is_bool), errors="coerce")
    bad_step = step_num.isna() | ~np.isfinite(step_num)
    recs = _skip_records(
        recs, bad_step, where, warn, why="without a numeric step", none_left="no usable step numbers"
    )
    step_num = step_num[~bad_step]
    # an absolute tolerance: a relative one (np.isclose's rtol=1e-5) passed step 100000.3 as
    # 100000 at large step numbers, and the rounded duplicates were then dropped as "repeated"
    fractional = (step_num - np.round(step_num)).abs() > STEP_ATOL
    if fractional.any():
        example = step_num[fractional].iloc[0]
        raise RunRejected(f"{where}: steps must be integers (found {example:.10g})")
    # beyond 2**53 a float no longer holds every integer, and beyond 2**63 the int64 cast
    # wrapped: 2**70 + 0, 1, 2 ... all became one step and the run "had one reward value"
    huge = step_num.abs() > MAX_STEP
    if huge.any():
        raise RunRejected(
            f"{where}: step {_shown_step(recs['step'][huge].iloc[0])} is beyond 2**53; steps that large "
            "cannot be told apart as numbers (renumber the log's steps)"
        )
    recs["step"] = np.round(step_num).astype(np.int64)
    # the data contract's step counts optimizer steps from the start of training (0); a value
    # logged before it (a step -1 evaluation) has no place on that axis, and compare refused it
    recs = _skip_records(
        recs,
        recs["step"] < 0,
        where,
        warn,
        why="at negative steps",
        none_left="every step is negative",
        note=": steps count from the start of training at 0",
        show=int,
    )
    # values
    numbers = [_to_number(v) for v in recs["value"]]
    # a logged NaN/inf is a number (the NaN check below reports it); only None is not
    is_text = pd.Series([x is None for x in numbers], index=recs.index)
    recs["num"] = [np.nan if x is None else x for x in numbers]
    text_fields: list[str] = []
    for metric, sub in recs[is_text].groupby("metric", sort=False):
        total = int((recs["metric"] == metric).sum())
        if len(sub) == total:
            text_fields.append(str(metric))
        else:
            warn.append(
                f"metric {metric!r}: {counted(len(sub), 'non-numeric value')} (e.g. {sub['value'].iloc[0]!r} "
                f"at step {int(sub['step'].iloc[0])}) kept as NaN"
            )
    text_coords, text_why = _text_hyperparameters(recs[is_text], text_fields)
    kept_out = [f for f in text_fields if f not in text_why.values()]
    if kept_out:
        warn.append(f"text fields not kept as metrics: {sorted(kept_out)}")
    recs = recs[~recs["metric"].isin(text_fields)]
    recs["num"] = recs["num"].astype(float)
    # the end-of-training summary: its own names, and train_loss at a step where they are logged
    # (elsewhere train_loss is a per-step loss)
    rest = {m: split_eval(str(m))[1] for m in recs["metric"].unique()}
    named = recs["metric"].map({m: r in SUMMARY_KEYS for m, r in rest.items()}).astype(bool)
    marker = recs["metric"].map({m: r in SUMMARY_MARKERS for m, r in rest.items()}).astype(bool)
    summary_mask = named & (marker | recs["step"].isin(recs.loc[marker, "step"]))
    end_of_run = {
        str(m): float(v)
        for m, v in zip(recs.loc[summary_mask, "metric"], recs.loc[summary_mask, "num"])
    }
    recs = recs[~summary_mask]
    if recs.empty:
        raise RunRejected(f"{where}: no numeric metrics in the log")
    # order: steps going backwards, repeated steps (keep the last value logged)
    recs = recs.reset_index(drop=True)
    diffs = recs.groupby("metric", sort=False)["step"].diff()
    back = diffs < 0
    n_back = int(recs[back].groupby("metric").size().max()) if back.any() else 0
    if n_back:
        i = int(np.flatnonzero(back.to_numpy())[0])
        prev = int(recs["step"].iloc[i] - diffs.iloc[i])
        warn.append(
            f"steps go backwards {counted(n_back, 'time')} (first: step {int(recs['step'].iloc[i])} logged after "
            f"step {prev}, metric {recs['metric'].iloc[i]!r}); values ordered by step"
        )
        # back to (or before) the metric's first step after going past it: no resume from a
        # checkpoint, a new start (a log written newest first goes back without starting over)
        by_metric = recs.groupby("metric", sort=False)["step"]
        first = by_metric.transform("first")
        went_on = by_metric.cummax() > first
        restart = np.flatnonzero((back & (recs["step"] <= first) & went_on).to_numpy())
        if restart.size:
            j = int(restart[0])
            warn.append(
                f"the log starts over at step {int(recs['step'].iloc[j])} after step "
                f"{int(recs['step'].iloc[j] - diffs.iloc[j])} (metric {recs['metric'].iloc[j]!r}): "
                "a second training appended to the same log? Read as one run, its values replace "
                "the first training's at every step both logged; split the file to keep both"
            )
    dup = recs.duplicated(["metric", "step"], keep="last")
    # ``epoch`` and wandb's ``_runtime`` ... come with every log call; their repeats alone are no
    # repeated step
    per_call = {m: split_eval(str(m))[1] in PER_LOG_CALL_KEYS for m in recs["metric"].unique()}
    repeated = recs.duplicated(["metric", "step"], keep=False) & ~recs["metric"].map(
        per_call
    ).astype(bool)
    n_dup = int(recs.loc[repeated, "step"].nunique())
    if n_dup and n_back:
        warn.append(
            f"{counted(n_dup, 'step')} logged more than once (a resumed run?); kept the last value logged for each"
        )
    elif n_dup:
        # the steps never go back, as a resumed run's do: each step's rows follow one another
        # (garg's off_policy_full_sweep logs its train metrics twice a step: steps 0, 0, 1, 1, ...)
        per_step = recs[repeated].groupby(["metric", "step"], sort=False).size()
        rows = f"{per_step.min()}" if per_step.min() == per_step.max() else f"{per_step.min()}-{per_step.max()}"
        names = list(dict.fromkeys(recs.loc[repeated, "metric"].astype(str)))
        shown = ", ".join(map(repr, names[:4])) + (f" (+{len(names) - 4} more)" if len(names) > 4 else "")
        warn.append(
            f"{counted(n_dup, 'step')} logged more than once: {rows} rows with the same step, one after the "
            f"other (metrics {shown}; several log calls per step, e.g. one per micro-batch or "
            "epoch?); kept the last value logged for each"
        )
    recs = recs[~dup]
    wide = recs.pivot(index="step", columns="metric", values="num").sort_index()
    wide.columns = [str(c) for c in wide.columns]
    wide.index = wide.index.astype(np.int64)
    # names and reward
    try:
        mapping = map_names(list(dict.fromkeys(recs["metric"].astype(str))), reward_key)
    except NoRewardError as exc:
        raise RunRejected(f"{where}: {exc}") from None
    warn.extend(mapping.notes)
    frame = wide.rename(columns=mapping.columns)
    frame = frame[[REWARD_VAR, *[c for c in frame.columns if c != REWARD_VAR]]]
    reward_raw = recs.loc[recs["metric"] == mapping.reward_source, "num"]
    n_nonfinite = int((~np.isfinite(reward_raw)).sum())
    # an infinite side quantity (a grad norm that overflowed) is a logged value, not a missing
    # one: the run set keeps NaN, and the run's warnings say where (the reward's are below)
    for column in frame.columns:
        infinite = np.isinf(frame[column].to_numpy(dtype=float))
        if column != REWARD_VAR and infinite.any():
            warn.append(
                f"{column}: {counted(int(infinite.sum()), 'infinite value')} (first at step "
                f"{int(frame.index[infinite][0])}) kept as NaN"
            )
    frame = frame.replace([np.inf, -np.inf], np.nan)
    n_finite = int(frame[REWARD_VAR].notna().sum())
    if n_finite == 0:
        # no minimum keeps a run without a reward: "lower it with min_points=" was said of
        # `ingest --min-points 1` of a log whose rewards were all NaN or inf
        logged = f" ({counted(n_nonfinite, 'NaN/inf value')})" if n_nonfinite else ""
        raise RunRejected(
            f"{where}: no finite reward value in {mapping.reward_source!r}{logged}"
            f"{_longer_reward_hint(wide, mapping, max(min_points, 1))}"
        )
    if n_finite < min_points:
        raise RunRejected(
            f"{where}: only {counted(n_finite, 'finite reward value')} in {mapping.reward_source!r}, fewer "
            f"than the minimum of {counted(min_points, 'point')} (lower it with min_points=, or "
            f"`bayes-grpo ingest --min-points N`){_longer_reward_hint(wide, mapping, min_points)}"
        )
    if n_nonfinite:
        warn.append(f"reward {mapping.reward_source!r}: {counted(n_nonfinite, 'NaN/inf value')} kept as NaN")
    gap = reward_step_gap_note(frame[REWARD_VAR])
    if gap:
        warn.append(f"reward {mapping.reward_source!r}: {gap}")
    logged, logged_why = _logged_hyperparameters(wide)
    for coord, value in text_coords.items():
        logged[coord] = value
        logged_why[coord] = f"constant text column {text_why[coord]!r} of {raw.path.name}"
    _logged_adam_momentum(wide, logged, logged_why)
    rounded = {}
    if logged.get("beta") == 0 and _printed_to_decimals(wide, PRINTED_DECIMALS):
        rounded["beta"] = (
            f"beta = 0 from the {logged_why['beta']}, in a log whose every value has at most "
            f"{PRINTED_DECIMALS} decimals (verl's console logger printed '<key>:<value:.3f>' "
            "before it printed full values): a coefficient below 5e-4 reads 0.000 there; give "
            "beta in a manifest or put the run's config beside the log"
        )
    schedule = learning_rate_schedule_note(wide)
    if schedule:
        warn.append(schedule)
    facts = {
        "format": raw.fmt,
        "file": str(raw.path),
        "run_name": raw.name,
        "reward_source": mapping.reward_source,
        "reward_rule": mapping.reward_rule,
        "n_reward": n_finite,
        "n_nonfinite_reward": n_nonfinite,
        "n_duplicate_steps": n_dup,
        "n_backward_steps": n_back,
        "metrics": {src: dst for src, dst in mapping.columns.items()},
        "end_of_run": end_of_run,
    }
    return NormalisedRun(frame, mapping, warn, facts, logged, logged_why, rounded)


#: A logged learning rate whose smallest value is below this share of its peak is a schedule.
LR_SCHEDULE_SHARE = 0.5


def reward_step_gap_note(reward: pd.Series) -> str | None:
    """A note on the widest gap between logged rewards (``reward`` indexed by step) when it is
    :data:`GAP_FACTOR` times the typical interval and :data:`GAP_SHARE` of the run's span or more,
    else None.

    Such a gap is seldom missing data: a resumed run whose steps were renumbered, a step typed
    wrong, two trainings in one file. The run is kept as logged (the model reads the steps as they
    are, and the gap holds no observation), but the user should know the clock jumped.
    """
    steps = reward.index[reward.notna().to_numpy()].to_numpy(dtype=np.int64)
    if steps.size < 3:
        return None
    intervals = np.diff(steps)
    typical = float(np.median(intervals))
    widest = int(np.argmax(intervals))
    width = int(intervals[widest])
    if width < GAP_FACTOR * typical or width < GAP_SHARE * (steps[-1] - steps[0]):
        return None
    return (
        f"no reward logged for {width} steps, between step {int(steps[widest])} and step "
        f"{int(steps[widest + 1])}, where rewards are {counted(typical, 'step')} apart elsewhere "
        f"({width / (steps[-1] - steps[0]):.0%} of the run's span): steps renumbered on a resume, "
        "a mistyped step, two trainings in one log? Kept as logged; the model reads the steps as "
        "they are"
    )


def _logged_lr_column(wide: pd.DataFrame) -> str | None:
    """The run's logged learning-rate column (canonical name ``lr``; an evaluation metric's name
    is ``eval_*``, never ``lr``), or None."""
    return next((c for c in wide.columns if canonical_name(c) == LOGGED_LR_VAR), None)


def learning_rate_schedule_range(lr) -> tuple[float, float] | None:
    """``(smallest, peak)`` of a logged per-step learning rate that follows a schedule (its
    smallest finite value below :data:`LR_SCHEDULE_SHARE` of its peak), else None."""
    lr = np.asarray(pd.to_numeric(pd.Series(np.ravel(lr)), errors="coerce"), dtype=float)
    lr = lr[np.isfinite(lr)]
    if lr.size < 2 or not lr.max() > 0 or lr.min() >= LR_SCHEDULE_SHARE * lr.max():
        return None
    return float(lr.min()), float(lr.max())


def learning_rate_schedule_note(wide: pd.DataFrame) -> str | None:
    """A warning when the logged learning rate changes over the run (warm-up, decay), else None.

    The run's ``learning_rate`` coordinate is one number (the configured value, or the logged
    peak), and the mechanistic law takes the gain ``eta K`` as constant; with a schedule that
    falls to a small share of its peak (TRL's default linear decay ends at 0) the gain shrinks
    along the run. The per-step rate stays in the run set as the metric ``lr``.
    """
    col = _logged_lr_column(wide)
    if col is None:
        return None
    span = learning_rate_schedule_range(wide[col])
    if span is None:
        return None
    return (
        f"logged learning rate {col!r} follows a schedule ({span[0]:.3g} to {span[1]:.3g}): "
        f"{_SCHEDULE_NOTE_TAIL}"
    )


#: How :func:`learning_rate_schedule_note` ends (:func:`is_learning_rate_schedule_note`).
_SCHEDULE_NOTE_TAIL = (
    "the run's learning_rate is one number and the mechanistic law takes the gain eta K as "
    "constant, so read its fit as an average over the schedule (per-step rate kept as 'lr')"
)


def is_learning_rate_schedule_note(warning: str) -> bool:
    """Whether a run's warning is its :func:`learning_rate_schedule_note` (with or without the
    run's label before it): :func:`bayes_grpo.runset.clock.clock_runset` drops it from a run it
    re-times, whose fit is then no average over the schedule."""
    return warning.endswith(_SCHEDULE_NOTE_TAIL)


#: Text run coordinates a log may carry as a column (a W&B export's config columns).
TEXT_COORDS: tuple[str, ...] = ("model", "momentum_convention")


def _text_hyperparameters(
    text: pd.DataFrame, fields: Sequence[str]
) -> tuple[dict[str, object], dict[str, str]]:
    """Text run coordinates (``model``, ``momentum_convention``) logged as a text field of one
    value throughout (a W&B export with its config columns): ``(values, {coord: field})``.

    Such a field was dropped as "text fields not kept as metrics", and the run's model left
    unknown beside it. A field of several values is no run coordinate (it stays in that note).
    """
    values: dict[str, object] = {}
    fields_of: dict[str, str] = {}
    for field_name in fields:
        for coord in TEXT_COORDS:
            if coord in values or hyperparameter_key(coord, {field_name: None}) != field_name:
                continue
            seen = text.loc[text["metric"] == field_name, "value"].astype(str).str.strip()
            distinct = seen[seen != ""].unique()
            if len(distinct) == 1:
                values[coord], fields_of[coord] = str(distinct[0]), field_name
    # the optimizer's name gives the convention, as in a config file (W&B's config column
    # optimizer=SGD beside momentum=0.9 left it unknown, and the fit refused the run)
    for field_name in fields:
        if "momentum_convention" in values or field_name.split("/")[-1].lower() not in OPTIMIZER_KEYS:
            continue
        seen = text.loc[text["metric"] == field_name, "value"].astype(str).str.strip()
        distinct = seen[seen != ""].unique()
        convention = optimizer_convention(str(distinct[0])) if len(distinct) == 1 else None
        if convention is not None:
            values["momentum_convention"], fields_of["momentum_convention"] = convention, field_name
    return values, fields_of


#: Decimals of a log printed rounded (older verl's console logger: ``f"{k}:{v:.3f}"``,
#: ``verl/utils/logger/aggregate_logger.concat_dict_to_str``; later ones print full values).
PRINTED_DECIMALS = 3


def _printed_to_decimals(wide: pd.DataFrame, decimals: int) -> bool:
    """Whether every finite value of the log has at most ``decimals`` decimals (a log printed
    rounded, where a small constant such as a KL coefficient of 1e-4 reads 0)."""
    values = wide.to_numpy(dtype=float).ravel()
    values = values[np.isfinite(values)] * 10.0**decimals
    return values.size > 0 and bool(
        np.all(np.abs(values - np.round(values)) <= 1e-6 * np.maximum(1.0, np.abs(values)))
    )


def _logged_hyperparameters(wide: pd.DataFrame) -> tuple[dict[str, object], dict[str, str]]:
    """Hyperparameters logged as constant metrics, and the peak of the learning-rate schedule."""
    values: dict[str, object] = {}
    why: dict[str, str] = {}
    by_leaf = {str(c).split("/")[-1].lower(): str(c) for c in wide.columns}
    # momentum too (a constant logged "momentum" column; its convention stays unknown unless
    # another source gives it): it was kept as the metric "momentum_logged" and the run's
    # momentum coordinate left unknown
    # model_size and completions_per_step too: a W&B export's config columns (the HF wandb
    # callback's model/num_parameters) were kept as metrics and the coordinates left unknown
    for coord in (
        "group_size",
        "beta",
        "seed",
        "k_ref",
        "momentum",
        "model_size",
        "completions_per_step",
    ):
        for alias in HYPERPARAMETER_ALIASES[coord]:
            col = by_leaf.get(alias)
            if col is None or split_eval(col)[0]:
                continue
            vals = wide[col].dropna().unique()
            if len(vals) == 1:
                values[coord], why[coord] = float(vals[0]), f"constant logged metric {col!r}"
                break
    col = _logged_lr_column(wide)
    if col is not None:
        peak = wide[col].max()
        if np.isfinite(peak) and peak > 0:
            values["learning_rate"], why["learning_rate"] = (
                float(peak),
                f"constant logged learning rate {col!r}"
                if _constant_logged_lr(wide[col])
                else f"peak of the logged learning-rate schedule {col!r}",
            )
    return values, why


#: Adam's beta1 as a logged column (the Hugging Face ``TrainingArguments`` name, among the
#: config columns of a W&B export), read as a config file's ``adam_beta1`` is
#: (:func:`~bayes_grpo.runset.loaders.sidecar.coords_from_config`).
LOGGED_ADAM_BETA1: str = "adam_beta1"


def _logged_adam_momentum(
    wide: pd.DataFrame, logged: dict[str, object], why: dict[str, str]
) -> None:
    """Adam's beta1 logged as a constant column: the run's ``momentum``, convention ``ema``,
    unless the run logs a momentum or an optimizer of another convention (SGD: the Trainer's
    arguments carry ``adam_beta1`` whatever the optimizer). A W&B export's config columns
    ``optim=adamw_torch, adam_beta1=0.9`` gave the convention and left the momentum unknown,
    where the same values in a config file give both."""
    if "momentum" in logged or logged.get("momentum_convention", EMA) != EMA:
        return
    col = next((c for c in wide.columns if c.split("/")[-1].lower() == LOGGED_ADAM_BETA1), None)
    if col is None or split_eval(col)[0]:
        return
    vals = wide[col].dropna().unique()
    if len(vals) != 1:
        return
    logged["momentum"], why["momentum"] = float(vals[0]), f"constant logged metric {col!r} (Adam beta1)"
    if "momentum_convention" not in logged:
        logged["momentum_convention"] = EMA
        why["momentum_convention"] = f"constant logged metric {col!r} (Adam beta1)"


def _constant_logged_lr(lr: pd.Series) -> bool:
    """Whether a logged learning rate is one value at two or more logged steps: a rate that
    follows no schedule there, so it is the configured rate itself, not a peak the logging
    steps may have sampled short of."""
    seen = pd.to_numeric(lr, errors="coerce").dropna()
    return len(seen) >= 2 and seen.nunique() == 1


# ------------------------------------------------------------------------------------------
# discovery
# ------------------------------------------------------------------------------------------


@dataclass
class _Job:
    """A file to read, with what the manifest and neighbours say about it."""

    path: Path
    fmt: str | None
    row: ManifestRow | None = None
    config_events: list[Path] = field(default_factory=list)
    #: What choosing this file said (a checkpoint's state passed over), for the run's warnings.
    notes: list[str] = field(default_factory=list)
    #: Why ``path`` (a folder) could not be searched or (a compressed log) is not read; the job
    #: is then a rejected source.
    error: str | None = None


def _walk(root: Path) -> tuple[list[Path], list[OSError]]:
    """The files under ``root``, and the folders that could not be listed (permissions ...).

    Symbolic links to folders are followed (a run folder linked in from other storage is a log
    the user gave); a folder reached a second time (a link back up the tree, or to a folder
    already read) is read once, real folders before links to them.
    """
    files = []
    errors: list[OSError] = []
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames[:] = sorted(
            (d for d in dirnames if not d.startswith((".", "__"))),
            key=lambda d: (os.path.islink(os.path.join(dirpath, d)), d),
        )
        files.extend(Path(dirpath) / f for f in sorted(filenames) if not f.startswith("."))
    return files, errors


def _unread_inner_name(path: Path) -> str | None:
    """A file's name without the suffix of a compression not read here (``config.json.lz4`` ->
    ``config.json``: :func:`~bayes_grpo.runset.loaders._base.unread_compression`); None for a
    file not so compressed. A config so compressed is named by its run's warnings
    (``_base.unread_copies``), not taken for a log; a checkpoint's state so compressed is passed
    over with its reason, or is its run's refusal."""
    suffix = unread_compression(path)
    return path.name[: -len(suffix)] if suffix else None


def discover(path: str | Path) -> list[_Job]:
    """The log files a path stands for.

    A file is one log. A directory is searched recursively, links to folders followed (each
    folder read once): for each run folder, the folder's own ``trainer_state.json`` or else its
    latest ``checkpoint-*``'s; TensorBoard event files (each one a
    run, unless it lies under a run folder that has a ``trainer_state.json``, which then only reads
    its hyperparameters from it, and except the hyperparameters-only file that ``add_hparams`` writes
    into a ``<time.time()>`` subfolder, which is no run); CSV/JSONL files; text logs that contain
    Trainer metric dicts.
    Config files (:data:`~bayes_grpo.runset.loaders.sidecar.SIDECAR_NAMES`) and everything else
    inside ``checkpoint-*`` folders are not logs. A folder that cannot be listed (permissions)
    comes back as a job with an ``error``, which the ingest reports as a rejected source; so does a
    compressed log that cannot be read (``metrics.jsonl.zst`` without ``zstandard``, a corrupt
    ``train.log.gz``, a ``metrics.csv.lz4`` compressed by a program not read here:
    :func:`~bayes_grpo.runset.loaders.compressed_log_error`). A log compressed
    with gzip, bzip2 or xz is the log it holds (``log.csv.gz`` is a CSV log; its run named as
    ``log.csv``'s would be).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_file():
        return [_Job(path, detect_format(path))]
    files, errors = _walk(path)
    unreadable = [
        _Job(
            Path(exc.filename or path),
            None,
            error=f"{exc.filename or path}: folder not searched for logs ({exc.strerror or exc})",
        )
        for exc in errors
    ]
    state_roots: dict[Path, Path] = {}
    choice_notes: dict[Path, list[str]] = {}
    # a checkpoint's state stands for its run folder, unless the checkpoint is the folder given
    roots = [
        f.parent.parent if _CHECKPOINT_DIR.match(f.parent.name) and f.parent != path else f.parent
        for f in files
        # a checkpoint's .zst or .lz4 too: named, not unsaid
        if "trainer_state.json" in (inner_name(f), _unread_inner_name(f))
    ]
    for root in [*roots, path]:
        if root not in state_roots:
            chosen, notes = choose_trainer_state(root)
            if chosen is not None:
                state_roots[root], choice_notes[chosen] = chosen, notes
    jobs = {p: _Job(p, "trainer_state", notes=choice_notes[p]) for p in state_roots.values()}
    for f in files:
        # a config is no log, compressed by a program not read here too (config.json.zst: its
        # run's warnings name it)
        plain = _unread_inner_name(f) or log_name(f)
        if inner_name(f) in SIDECAR_NAMES or plain in SIDECAR_NAMES or log_name(f) == "trainer_state.json":
            continue
        if plain in _WANDB_OWN_LOGS and "wandb" in f.resolve().parts[:-1]:
            continue
        if any(_CHECKPOINT_DIR.match(part) for part in f.relative_to(path).parts[:-1]):
            continue
        if is_event_file(f):
            if is_hparams_companion(f):
                continue  # the Trainer's add_hparams copy of the arguments, beside the run's file
            owner_file = add_scalars_owner(f)
            if owner_file is not None and path in owner_file.parents:
                continue  # one curve of add_scalars: read with its run's file
            owner = next((root for root in state_roots if root in f.parents), None)
            if owner is not None:
                jobs[state_roots[owner]].config_events.append(f)
                continue
        fmt = detect_format(f)
        if fmt is not None:
            jobs[f] = _Job(f, fmt)
        elif (why := rotated_log_error(f) or compressed_log_error(f)) is not None:
            jobs[f] = _Job(f, None, error=why)  # a rejected source, not left out unsaid
    return [*jobs.values(), *unreadable]


# ------------------------------------------------------------------------------------------
# hyperparameters
# ------------------------------------------------------------------------------------------


def _same(a: object, b: object) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


#: Sources of ``k_ref`` (:func:`bayes_grpo.runset.loaders.sidecar.coords_from_config`) whose
#: frameworks log one step per rollout iteration, in which the policy takes ``k_ref`` optimizer
#: steps on one rollout: verl (its ``global_steps``) and OpenRLHF. The data contract and the law
#: count optimizer steps (DESIGN.md section 5), as TRL's ``global_step`` does.
ITERATION_STEP_SOURCES: tuple[str, ...] = (VERL_K_REF, OPENRLHF_K_REF)


def iterations_as_optimizer_steps(
    frame: pd.DataFrame, k_ref: object, k_ref_source: str, *, reward_is_eval: bool = False
) -> tuple[pd.DataFrame, str | None]:
    """A log that counts rollout iterations, on the optimizer-step axis; and the note saying so.

    When ``k_ref`` came from a framework that logs one step per rollout iteration
    (:data:`ITERATION_STEP_SOURCES`) and is a whole number above 1, iteration ``n >= 1`` (the
    metrics of its rollout, generated by the policy after ``(n - 1) k_ref`` updates) is stored
    at optimizer step ``(n - 1) k_ref + 1``: the step that generates it, where TRL logs the
    reward of a run with the same ``k_ref``. Its evaluation metrics (``eval_*``), measured after
    the iteration's updates (verl validates after ``update_actor``, OpenRLHF after ``ppo_train``),
    go to step ``n k_ref``, where TRL evaluates the policy after as many updates (the reward too
    when it is an evaluation metric, ``reward_is_eval``). Steps ``<= 0``
    (a validation before training) stay. Otherwise ``frame`` is returned as it is, with no note
    (or a note when ``k_ref`` is not whole).
    """
    if not any(formula in k_ref_source for formula in ITERATION_STEP_SOURCES):
        return frame, None
    try:
        k = float(k_ref)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return frame, None
    if not (k > 1.0):
        return frame, None  # one update per iteration: the iteration is the optimizer step
    if not k.is_integer():
        return frame, (
            f"steps: the log counts rollout iterations, but k_ref = {k:g} ({k_ref_source}) is not "
            "a whole number of optimizer steps per iteration, so they were left as logged"
        )
    steps = frame.index.to_numpy()

    def moved(part: pd.DataFrame, at: np.ndarray) -> pd.DataFrame:
        return part.set_axis(pd.Index(np.where(steps >= 1, at, steps), name=frame.index.name))

    evals = [
        c
        for c in frame.columns
        if str(c).startswith(EVAL_PREFIX) or (reward_is_eval and c == REWARD_VAR)
    ]
    out = moved(frame, (steps - 1) * int(k) + 1)
    if evals and len(evals) < frame.shape[1]:
        train = out.drop(columns=evals).dropna(how="all")
        after = moved(frame[evals], steps * int(k)).dropna(how="all")
        out = pd.concat([train, after], axis=1).sort_index()[list(frame.columns)]
    elif evals:  # evaluation metrics only
        out = moved(frame, steps * int(k))
    return out, (
        f"steps: the log counts rollout iterations of k_ref = {k:g} optimizer steps each "
        f"({k_ref_source}); iteration n is stored at optimizer step (n - 1) x {k:g} + 1, the step "
        f"that generates its rollout, and its evaluation at n x {k:g}, after its updates (the "
        "data contract's step is the optimizer step)"
    )


#: Metric names (without a ``train/`` prefix) that only logs counting rollout iterations carry:
#: verl's ``actor/*`` and ``critic/*`` sections, OpenRLHF's ``actor_lr``.
ITERATION_LOG_PREFIXES: tuple[str, ...] = ("actor/", "critic/", "actor_lr")


#: ``g4``, ``G16``, ``gs8``, ``group8``, ``group_size=8`` as a separate part of a run's name or path.
_GROUP_SIZE_IN_NAME = re.compile(
    r"(?:^|[^A-Za-z0-9])(?:g|gs|group|group_?size|num_?generations)[_=-]?(\d{1,4})(?=$|[^A-Za-z0-9])",
    re.IGNORECASE,
)


def group_size_in_name(run_id: str, path: Path) -> tuple[int, str] | None:
    """The group size a run's id or file name reads like (``sun_q35_9b_g2_rho1.0_s42`` -> 2),
    and the name that reads so; None when none does, or one reads like two.

    The name is never read as the setting (``g2`` may mean anything): a run whose G is unknown
    gets a hint (:func:`group_size_in_names_note`), since invariance, the noise law and the
    degeneracy diagnostic need ``G``.
    """
    for text in (run_id, path.stem, path.parent.name):
        found = sorted({int(m) for m in _GROUP_SIZE_IN_NAME.findall(text) if int(m) >= 1})
        if len(found) == 1:
            return found[0], text
    return None


def group_size_in_names_note(readings: Mapping[str, tuple[int, str]]) -> str | None:
    """One note for the runs of an ingest whose group size G is unknown while their names read
    like one (``readings``: ``{run: (G, name)}``, :func:`group_size_in_name`), the runs counted
    and named by the G they read like; None when there is none. It was a warning of each run,
    the same words 22 times for the CSV exports of ``real_runs``."""
    if not readings:
        return None
    by_g: dict[int, list[str]] = defaultdict(list)
    for run, (g, text) in readings.items():
        by_g[g].append(run if text == run else f"{run} ({text!r})")
    groups = "; ".join(f"G = {g}: {_first_few(runs)}" for g, runs in sorted(by_g.items()))
    (only,) = by_g if len(by_g) == 1 else (None,)
    one = len(readings) == 1
    return (
        f"group size G unknown for {counted(len(readings), 'run')} whose "
        f"{'name reads' if one else 'names read'} like one ({groups}): no log or config beside "
        f"{'it' if one else 'them'} gives G; if the {'name means' if one else 'names mean'} it, give "
        "group_size in a manifest"
        + (f" (or --default group_size={only} when fitting)" if only is not None else "")
    )


#: How many names a note lists before "... (N in all)".
FIRST_FEW: int = 5


def _first_few(names: Sequence[str], n: int = FIRST_FEW) -> str:
    """The first ``n`` of ``names``, comma-separated, and how many in all where there are more:
    ``"a, b, c, d, e, ... (38 in all)"``; the notes naming runs or files of a whole ingest."""
    shown = ", ".join(map(str, names[:n]))
    return shown + (f", ... ({len(names)} in all)" if len(names) > n else "")


def unknown_settings_note(ds: xr.Dataset) -> str | None:
    """One note for the runs of a run set whose group size G or model is unknown after their
    logs, the configs beside them and the manifest, naming them (:func:`_first_few`) and the
    manifest that gives them; None when there is none. ``load_runs`` warns it once and
    ``bayes-grpo ingest`` prints it once (``notes`` of its JSON).

    The Qwen3.5 console logs of ``real_runs`` were ingested with G and model empty, and nothing
    said where to give them: invariance, the noise law and degeneracy need G, and the fit groups
    runs by their model. Console logs print neither; so do most CSV and JSONL exports, and a
    Trainer state without its ``training_args.bin``."""
    missing: dict[str, list[str]] = {"G and model": [], "G": [], "model": []}
    console = False
    for run, source, g, model in zip(
        ds.run.values, ds.source.values, ds.group_size.values, ds.model.values
    ):
        no_g, no_model = bool(np.isnan(float(g))), not str(model).strip()
        if no_g or no_model:
            what = "G and model" if no_g and no_model else "G" if no_g else "model"
            missing[what].append(str(run))
            console = console or str(source).startswith("console:")
    parts = [
        f"{what} unknown for {counted(len(runs), 'run')} ({_first_few(runs)})"
        for what, runs in missing.items()
        if runs
    ]
    if not parts:
        return None
    them = "it" if len(parts) == 1 and not missing["G and model"] else "them"
    return (
        "; ".join(parts)
        + f": no log, config beside the log or manifest row gave {them}"
        + (" (a console log prints neither G nor the model)" if console else "")
        + f"; give {them} in a manifest (bayes-grpo ingest --manifest FILE, load_runs(manifest=...): "
        "a CSV or YAML list, one row per run, columns path, run, group_size, model and any other "
        "setting such as learning_rate or seed; README.md, 'Bring your own logs', Manifest)"
    )


def unknown_iterations_note(sources: Iterable[str]) -> str | None:
    """A note for a log that counts rollout iterations (verl, OpenRLHF: by its metric names)
    when no config gave ``k_ref``: its steps are left as logged, each one ``k_ref`` optimizer
    steps of the data contract, and nothing else says so."""
    named = sorted(
        s
        for s in map(str, sources)
        if not split_eval(s)[0] and split_eval(s)[1].lower().startswith(ITERATION_LOG_PREFIXES)
    )
    if not named:
        return None
    return (
        f"steps: its metrics ({named[0]!r} ...) are those of verl or OpenRLHF, which log one step "
        "per rollout iteration of k_ref optimizer steps; no config beside the log gave k_ref, so "
        "the steps are left as logged (put the run's config beside the log, verl's Hydra "
        "config.yaml, or give k_ref in a manifest)"
    )


#: Two runs whose rewards agree to this (absolute) at every shared logged step, over at least
#: :data:`SAME_TRAINING_MIN_SHARED` steps and half of the shorter run, are one training read
#: twice (a ``trainer_state.json`` and the console log beside it; ms-swift's ``logging.jsonl``
#: and its checkpoints' states): a fit would count it twice. 5e-4 covers a console's rounding
#: (verl prints 3 decimals, TRL's console 4 significant digits).
SAME_TRAINING_ATOL: float = 5e-4
SAME_TRAINING_MIN_SHARED: int = 10


def same_training_twice(
    curves: Mapping[str, pd.DataFrame], partial: Collection[str] = ()
) -> dict[str, list[str]]:
    """``{run: [warning]}`` for the runs whose reward curve another run repeats.

    Runs match when their rewards agree within :data:`SAME_TRAINING_ATOL` at every step both
    logged, over at least :data:`SAME_TRAINING_MIN_SHARED` steps and half of the shorter run,
    and the shared rewards are not constant (two runs stuck at 0 are not the same training).
    Neither run is dropped: the warning names both, and the user keeps the one to fit.
    Partial runs (``partial``: their bayes_grpo_run.json says ``"completed": false``) whose
    rewards are the start of one other, longer and complete, run's, and match no other run, are
    said to be a run stopped (once or more) and its rerun, not one training read more than once
    (:func:`_stopped_and_rerun_notes`).
    """
    rewards = {
        run: frame[REWARD_VAR].dropna()
        for run, frame in curves.items()
        if REWARD_VAR in frame and frame[REWARD_VAR].notna().sum() >= SAME_TRAINING_MIN_SHARED
    }
    # candidates share their first rewards (rounded): identical trainings do, other runs rarely
    groups: dict[tuple, list[str]] = defaultdict(list)
    for run, r in rewards.items():
        groups[tuple(np.round(r.to_numpy()[:3], 3))].append(run)
    matches: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for runs in groups.values():
        for a, b, n_shared in _same_reward_pairs([rewards[r] for r in runs]):
            for run, other in ((runs[a], runs[b]), (runs[b], runs[a])):
                matches[run].append((other, n_shared))
    notes = {run: [_same_training_note(found)] for run, found in matches.items()}
    for rerun, found in matches.items():
        if rerun in partial or not all(run in partial for run, _ in found):
            continue
        stopped = {run: n_shared for run, n_shared in found}
        group = {rerun, *stopped}
        r = rewards[rerun]
        if (
            # each stopped run matches only the runs of the group: no log read twice among them
            all({other for other, _ in matches[run]} <= group for run in stopped)
            and all(
                rewards[run].index.isin(r.index).all() and rewards[run].index.max() < r.index.max()
                for run in stopped
            )
        ):
            notes.update(_stopped_and_rerun_notes(stopped, rerun))
    return notes


def _stopped_and_rerun_notes(stopped: Mapping[str, int], rerun: str) -> dict[str, list[str]]:
    """The read-twice warnings of partial runs (``"completed": false``), ``stopped`` (each with
    the steps it shares with ``rerun``), whose rewards are the start of the complete run
    ``rerun``'s, and of that run: "one training read twice?" (or "more than once?", of a run
    stopped twice) of a run stopped and trained again from step 0 with the same seed misled."""
    keep = f"ingest only one of them, e.g. the complete run {rerun!r}, with a manifest"
    if len(stopped) == 1:
        ((run, n_shared),) = stopped.items()
        count = "that step twice" if n_shared == 1 else f"those {n_shared} steps twice"
        return {
            run: [
                f"the same rewards at all {n_shared} steps this partial run (\"completed\": "
                f"false) logged as the first {n_shared} logged steps of run {rerun!r}: a stopped "
                f"run and its rerun with the same seed? (a fit would count {count}; {keep})"
            ],
            rerun: [
                f"its first {n_shared} logged steps have the same rewards as run {run!r}, a "
                f"partial run (\"completed\": false): a stopped run and its rerun with the same "
                f"seed? (a fit would count {count}; {keep})"
            ],
        }
    times = "twice" if len(stopped) == 2 else f"{len(stopped)} times"
    why = (
        f"a run stopped {times} and rerun with the same seed? (a fit would count those steps "
        f"more than once; {keep})"
    )
    runs = sorted(stopped)
    named = ", ".join(f"{run!r} at all {stopped[run]} steps" for run in runs[:SAME_TRAINING_NAMED])
    more = len(runs) - SAME_TRAINING_NAMED
    notes = {
        rerun: [
            f"its first logged steps have the same rewards as {len(runs)} partial runs "
            f"(\"completed\": false): {named}{f', and {more} more' if more > 0 else ''}: {why}"
        ]
    }
    for run in runs:
        others = [other for other in runs if other != run]
        also = ", ".join(map(repr, others[:SAME_TRAINING_NAMED]))
        also += f", and {len(others) - SAME_TRAINING_NAMED} more" if len(others) > SAME_TRAINING_NAMED else ""
        notes[run] = [
            f"the same rewards at all {stopped[run]} steps this partial run (\"completed\": "
            f"false) logged as the first {stopped[run]} logged steps of run {rerun!r} (the "
            f"partial run{'s' if len(others) > 1 else ''} {also} logged the same rewards as far "
            f"as {'they' if len(others) > 1 else 'it'} ran): {why}"
        ]
    return notes


#: Runs a read-twice note names when a run's rewards repeat in several others (the rest counted).
SAME_TRAINING_NAMED = 3


def _same_training_note(found: list[tuple[str, int]]) -> str:
    """The one read-twice warning of a run whose rewards ``found`` runs repeat ``(run, shared
    steps)``: a sweep of 600 identical runs gave each run 599 lines, one per match."""
    if len(found) == 1:
        other, n_shared = found[0]
        return (
            f"the same rewards as run {other!r} at all {n_shared} steps both "
            "logged: one training read twice? (a fit would count it twice; ingest "
            "only one of them, e.g. with a manifest)"
        )
    named = ", ".join(f"{other!r} at all {n} steps" for other, n in found[:SAME_TRAINING_NAMED])
    more = len(found) - SAME_TRAINING_NAMED
    return (
        f"the same rewards as {len(found)} other runs ({named}{f', and {more} more' if more > 0 else ''}) "
        "at every step both logged: one training read more than once? (a fit would count it "
        "more than once; ingest only one of them, e.g. with a manifest)"
    )


def _same_reward_pairs(rewards: list[pd.Series]) -> Iterator[tuple[int, int, int]]:
    """``(i, j, shared steps)``, ``i < j`` in order, for the reward series that agree as
    :func:`same_training_twice` asks.

    One row of a (run, step) table against all later rows at once: pandas' index intersection
    and ``.loc`` per pair took 1 ms a pair, minutes for a sweep of hundreds of runs that start
    alike (600 runs: 180,000 pairs).
    """
    steps = np.unique(np.concatenate([r.index.to_numpy() for r in rewards]))
    present = np.zeros((len(rewards), steps.size), dtype=bool)
    values = np.zeros((len(rewards), steps.size))
    for k, r in enumerate(rewards):
        cols = np.searchsorted(steps, r.index.to_numpy())
        present[k, cols] = True
        values[k, cols] = r.to_numpy(dtype=float)
    lengths = present.sum(axis=1)
    for i in range(len(rewards) - 1):
        shared = present[i] & present[i + 1 :]
        n_shared = shared.sum(axis=1)
        enough = np.maximum(SAME_TRAINING_MIN_SHARED, 0.5 * np.minimum(lengths[i], lengths[i + 1 :]))
        later = np.flatnonzero(n_shared >= enough)
        if later.size == 0:
            continue
        mask = shared[later]
        with np.errstate(invalid="ignore"):  # an infinite reward: inf - inf is NaN, no match
            gap = np.where(mask, np.abs(values[i + 1 + later] - values[i]), 0.0).max(axis=1)
            spread = np.where(mask, values[i], -np.inf).max(axis=1) - np.where(mask, values[i], np.inf).min(axis=1)
        for k in later[(spread > 0) & (gap <= SAME_TRAINING_ATOL)]:
            yield i, i + 1 + int(k), int(n_shared[k])


def _merge_hyperparameters(
    raw: RawRun, job: _Job, norm: NormalisedRun, side: Sidecars
) -> tuple[dict[str, object], dict[str, str], list[str]]:
    """Coordinates from every source, first-wins, with warnings on disagreement."""
    warn = list(side.notes)
    if side.runner.get("completed") is False:  # bayes-grpo train's mark of a partial run
        done, total = side.runner.get("steps_done"), side.runner.get("max_steps")
        steps = f" after {done} of {total} steps" if done is not None and total else ""
        warn.append(
            f"{side.runner_source} says the training did not complete (failed or interrupted"
            f"{steps}): a partial run"
        )
    renamed = renamed_runner_folder(side)
    if renamed and raw.name is None and (job.row is None or not job.row.run_id):
        warn.append(
            f"{side.runner_source} names the run {renamed[0]!r}, its folder's name when it was "
            f"trained; the folder is now {renamed[1]!r} (renamed or copied since), which names "
            "the run here"
        )
    explicit: list[tuple[str, dict[str, object], dict[str, str]]] = []
    if job.row is not None:
        src = job.row.where
        explicit.append((src, dict(job.row.coords), {c: f"{src}" for c in job.row.coords}))
    if side.runner:
        explicit.append(("runner", *coords_from_config(side.runner, side.runner_source)))
    if raw.config:
        explicit.append(
            ("log", *coords_from_config(raw.config, f"{raw.path.name} ({raw.config_source})"))
        )
    event_model: dict[str, object] = {}
    # the latest training's arguments: a reused output folder holds the event files of earlier
    # trainings beside the Trainer state of the last one
    for event_file in sorted(job.config_events, key=_event_file_order, reverse=True):
        try:
            ev = load_tensorboard(event_file)[0]
        except LogFormatError as exc:
            warn.append(f"hyperparameters not read from {event_file}: {exc}")
            continue
        if ev.config:
            explicit.append(
                ("events", *coords_from_config(ev.config, f"{event_file} ({ev.config_source})"))
            )
            event_model = event_model or ev.model_config
            break
    if side.training:
        explicit.append(("training", *coords_from_config(side.training, side.training_source)))
    derived: list[tuple[str, dict[str, object], dict[str, str]]] = []
    experts: list[str] = []
    for model_config, src in (
        (raw.model_config, f"{raw.path.name} (model config)"),
        (event_model, "event file model config"),
        (side.model, side.model_source),
    ):
        if model_config:
            derived.append(("model", *coords_from_model_config(model_config, src)))
            moe = experts_of(model_config)
            if moe is not None:
                experts.append(f"{src} is a mixture of experts ({moe[0]} = {moe[1]:g})")
    derived.append(("logged", norm.logged_hparams, norm.logged_why))

    logged_lr = norm.frame.get(LOGGED_LR_VAR)
    constant_lr = logged_lr is not None and _constant_logged_lr(logged_lr)
    values: dict[str, object] = {}
    why: dict[str, str] = {}
    for _kind, vals, srcs in explicit:
        for coord, value in vals.items():
            if coord not in values:
                values[coord], why[coord] = value, srcs[coord]
            elif not _same(values[coord], value):
                warn.append(
                    f"{coord}: {why[coord]} gives {values[coord]!r} but {srcs[coord]} gives {value!r}; "
                    f"using {values[coord]!r}"
                )
    for kind, vals, srcs in derived:
        for coord, value in vals.items():
            if coord not in values:
                values[coord], why[coord] = value, srcs[coord]
            elif kind == "logged" and not _logged_agrees(
                coord, values[coord], value, schedule=not constant_lr
            ):
                # what the run logged against its config: a config of another run beside it
                warn.append(
                    f"{coord}: {why[coord]} gives {values[coord]!r} but {srcs[coord]} gives "
                    f"{value!r}; using {values[coord]!r}"
                )
    if experts and "model_size" not in values:
        warn.append(
            f"model_size: {experts[0]}: its parameter count is not estimated (all experts', or "
            "those active per token?); left unknown (give model_size in a manifest)"
        )
    for coord, note in norm.logged_rounded.items():
        if why.get(coord) == norm.logged_why.get(coord):  # the rounded value is the one kept
            warn.append(note)
    size_source = why.get("model_size")
    if size_source is not None and "model" in values:
        # a size is of the model its source names: a manifest's `model: Qwen/Qwen2.5-0.5B` over
        # a run folder whose bayes_grpo_run.json says tiny-gpt2 kept tiny-gpt2's 103552 as the
        # Qwen model's size, for the curvature-scaling regression to read
        for _kind, vals, srcs in (*explicit, *derived):
            if srcs.get("model_size") == size_source and "model" in vals and not _same(vals["model"], values["model"]):
                warn.append(
                    f"model_size: {size_source} gives {values['model_size']!r} for model {vals['model']!r}, "
                    f"not for {values['model']!r} ({why['model']}); left unknown (give model_size with the model)"
                )
                values.pop("model_size")
                why.pop("model_size")
                break
    conv = values.get("momentum_convention")
    if isinstance(conv, str):
        # 'EMA', 'heavy-ball', 'Heavy ball' in a manifest or config: the user's meaning is plain
        spelled = "_".join(conv.strip().lower().replace("-", " ").split())
        if spelled in MOMENTUM_CONVENTIONS:
            values["momentum_convention"] = conv = spelled
    if conv is not None and conv not in MOMENTUM_CONVENTIONS:
        warn.append(
            f"momentum_convention {conv!r} ({why['momentum_convention']}) is not one of "
            f"{list(MOMENTUM_CONVENTIONS)}; left unknown"
        )
        values.pop("momentum_convention")
        why.pop("momentum_convention")
    for coord in [c for c in values if c in VALID_RANGES]:
        problem = out_of_range(coord, values[coord])
        if problem:
            warn.append(f"{coord} = {values[coord]!r} ({why[coord]}) {problem}; left unknown")
            values.pop(coord)
            why.pop(coord)
    k_ref = values.get("k_ref")
    if isinstance(k_ref, float) and not float(k_ref).is_integer():
        warn.append(f"k_ref = {k_ref:g} ({why['k_ref']}) is not a whole number of optimizer steps")
    values = {c: v for c, v in values.items() if c in RUN_COORDS}
    return values, why, warn


def _logged_agrees(
    coord: str, configured: object, logged: object, *, schedule: bool = True
) -> bool:
    """Whether a value the run logged agrees with the one its configs give.

    A logged learning rate on a ``schedule`` is its peak as sampled at the logging steps: at
    most the configured rate, and below it after a warm-up between two logging steps; it
    disagrees above the configured rate or below :data:`LR_SCHEDULE_SHARE` of it. A rate logged
    as one value throughout (``schedule=False``) is the rate the run trained at, a constant as
    other values are (a constant 1e-6 against a manifest's 2e-6 passed as a peak sampled short).
    Both within :data:`LOGGED_PRECISION`: console logs print rounded values (TRL 4 significant
    digits, verl 3 decimals: its ``actor/kl_coef`` of a ``kl_loss_coef`` 1e-4 reads 0.000).
    """
    try:
        value, seen = float(configured), float(logged)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return _same(configured, logged)
    if coord == "learning_rate":  # a rate is printed to significant digits, never to 0.001
        if not schedule:
            return math.isclose(value, seen, rel_tol=LOGGED_PRECISION)
        return LR_SCHEDULE_SHARE * value <= seen <= value or math.isclose(
            value, seen, rel_tol=LOGGED_PRECISION
        )
    return math.isclose(value, seen, rel_tol=LOGGED_PRECISION, abs_tol=LOGGED_PRECISION)


#: Relative and absolute difference within which a logged value agrees with the configured one
#: (:func:`_logged_agrees`): the rounding of a console log's printed values.
LOGGED_PRECISION = 5e-4


def _later_event_files(job: _Job, last_step: int) -> list[str]:
    """Notes on the TensorBoard files beside a Trainer state (read for its hyperparameters) that
    log steps after the state's last one: in a run still going, the latest checkpoint's state lags
    the live log, and those steps would be left out without a word."""
    notes = []
    for event_file in sorted(job.config_events):
        try:
            steps = load_tensorboard(event_file)[0].records["step"]
        except LogFormatError:
            continue  # _merge_hyperparameters says so
        last = pd.to_numeric(steps, errors="coerce").max()
        if last > last_step:
            notes.append(
                f"TensorBoard file {event_file} logs up to step {int(last)}, after this state's "
                f"last step {last_step} (a run still going?); give that file to read those steps"
            )
    return notes


#: Valid values of the numeric run coordinates: (lowest, lowest included, highest, highest included).
VALID_RANGES: dict[str, tuple[float, bool, float, bool]] = {
    "group_size": (1.0, True, np.inf, False),
    "learning_rate": (0.0, False, np.inf, False),
    "momentum": (0.0, True, 1.0, False),
    "k_ref": (0.0, True, np.inf, False),
    "beta": (0.0, True, np.inf, False),
    "model_size": (0.0, False, np.inf, False),
    "completions_per_step": (1.0, True, np.inf, False),
}


def out_of_range(coord: str, value: object) -> str | None:
    """Why ``value`` cannot be the run coordinate ``coord`` (None when it can, or when unchecked).

    A negative group size or learning rate, a momentum of 1 or more ... would reach the fit
    as data (a momentum >= 1 has no stable setting at all), so ingest leaves them unknown.
    """
    if coord not in VALID_RANGES or isinstance(value, bool):
        return None
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "is not a number"
    lo, lo_in, hi, hi_in = VALID_RANGES[coord]
    if np.isnan(x) or x < lo or (x == lo and not lo_in) or x > hi or (x == hi and not hi_in):
        return f"is outside {'[' if lo_in else '('}{lo:g}, {hi:g}{']' if hi_in else ')'}"
    return None


# ------------------------------------------------------------------------------------------
# run ids
# ------------------------------------------------------------------------------------------


def renamed_runner_folder(side: Sidecars) -> tuple[str, str] | None:
    """``(stored, now)`` when the ``run_id`` of ``bayes_grpo_run.json`` (``bayes-grpo train``
    writes its run directory's name) is not the name of the folder that holds it now.

    The folder was renamed (or the run copied) after training: the run is named by its folder,
    as it is listed and as a manifest or ``--run`` names it; the stored id, which named it even
    after a rename (and only while no other run stored the same id), is said in a warning.
    """
    stored = side.runner.get("run_id")
    if not (isinstance(stored, str) and stored and side.runner_source):
        return None
    now = Path(os.path.abspath(Path(side.runner_source).parent)).name
    return None if stored == now else (stored, now)


def _path_components(
    path: Path,
    name: str | None,
    *,
    sole_event_file: bool = False,
    file_name: bool = False,
    own_name: bool = False,
    every_folder: bool = False,
) -> list[str]:
    """The path's parts an id is made of (generic folder names and file stems left out).

    An event file's name is only a time stamp: when it is the only run in its folder (of any
    format), the folder names the run (``tb/G8_seed1/events.out.tfevents.*`` is ``G8_seed1``).
    With ``file_name`` the file's name is the last part, joined to its folder's
    (``qwen-g8/trainer_state.json``): what tells apart two logs of one folder whose parts are
    otherwise the same (a ``trainer_state.json`` and a ``train.log`` beside it); a compressed
    log's name is the log's inside (``train.log.gz``: ``qwen-g8/train.log``, as every other id of
    it), a rotated piece's its log's, unless ``own_name``: the file's own name, what tells apart a
    log and its compressed copy beside it (``metrics.csv``, ``metrics.csv.gz``). With
    ``every_folder`` the generic folders are kept: what tells apart the states of two
    ``checkpoint-*`` folders of one run (``checkpoint-50`` and ``checkpoint-100``).
    """
    # the path as the user gave it, made absolute: resolving links named a run folder linked in
    # from other storage (runs/qwen-g8 -> /scratch/job_8812/output) after the link's target
    folders = Path(os.path.abspath(path)).parts[1:-1]
    parts = [
        p
        for i, p in enumerate(folders)
        if every_folder
        or (
            not _GENERIC_DIRS.match(p)
            and not (p == "files" and i and _WANDB_RUN_DIR.match(folders[i - 1]))
        )
    ]
    # a rotated piece read alone is named as its log (train.log.1, train.log-20261205.gz: the run
    # was 'train.log.1', train.log's its folder; beside a trainer_state.json 'qwen/train.log.1')
    piece_of = rotated_piece(path)
    if file_name:
        file = path.name if own_name else piece_of or log_name(path)
        last = f"{parts.pop()}/{file}" if parts else file
        return [*parts, last, *([name] if name else [])]
    stem = piece_of or log_name(path)  # a compressed log's run is named as the log it holds
    stamp = _EVENT_STAMP.match(stem)
    if stamp and sole_event_file and parts:
        stem = "events"  # a generic stem: left out
    elif stamp:
        stem = f"events-{stamp.group(1)}"
    else:
        for suffix in LOG_SUFFIXES:
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
                break
    if stem.lower() not in _GENERIC_STEMS:
        parts.append(stem)
    if name:
        parts.append(name)
    return parts or [path.name]


def assign_run_ids(
    candidates: Sequence[tuple[list[str], str | None, str | None]],
) -> list[str]:
    """Unique ids: fixed ids as given; else a unique name hint; else the shortest unique path suffix.

    Parameters
    ----------
    candidates
        ``(path components, fixed id or None, name hint or None)`` per run.
    """
    fixed = [c[1] for c in candidates]
    hints = [c[2] for c in candidates]
    hint_counts = defaultdict(int)
    for h in hints:
        if h:
            hint_counts[h] += 1
    comps = []
    for parts, _fixed, hint in candidates:
        comps.append([hint] if hint and hint_counts[hint] == 1 else parts)
    ks = [1] * len(candidates)
    while True:
        ids = [fixed[i] or "/".join(comps[i][-ks[i] :]) for i in range(len(candidates))]
        groups = defaultdict(list)
        for i, run_id in enumerate(ids):
            groups[run_id].append(i)
        changed = False
        for members in groups.values():
            if len(members) > 1:
                for i in members:
                    if not fixed[i] and ks[i] < len(comps[i]):
                        ks[i] += 1
                        changed = True
        if not changed:
            break
    seen: dict[str, int] = defaultdict(int)
    out = []
    for run_id in ids:
        seen[run_id] += 1
        out.append(run_id if seen[run_id] == 1 else f"{run_id}#{seen[run_id]}")
    return out


Reject = Callable[..., None]


def _manifest_jobs(rows: Sequence[ManifestRow], reject: Reject) -> list[_Job]:
    """The files the manifest rows point at (missing paths and ambiguous rows are rejected)."""
    jobs: list[_Job] = []
    for row in rows:
        if not row.path.exists():
            reject(row.where, f"{row.where}: path {row.path} does not exist", row.run_id)
            continue
        if not row.path.is_dir():
            jobs.append(_Job(row.path, detect_format(row.path), row=row))
            continue
        found = discover(row.path)
        # a file the search names but cannot read (a rotated piece, a compressed log that cannot
        # be decompressed here) is no log of the row: the row was rejected as holding several
        # logs; it is a rejected source of its own, the row's where the folder holds no other
        readable = [j for j in found if j.error is None]
        if not found:
            reject(row.where, f"{row.where}: no log found in {row.path}", row.run_id)
        elif row.run_id is not None and len(readable) > 1:
            logs = [str(j.path) for j in readable]
            reject(
                row.where,
                f"{row.where}: {row.path} holds {len(readable)} logs {logs}; point the row at one",
                row.run_id,
            )
            continue
        for job in found:
            if job.error is None or not readable:
                job.row = row
        jobs.extend(found)
    return jobs


def _sidecar_logging_steps(log_path: Path) -> int | None:
    """``logging_steps`` of the training config beside a console log (a whole number of steps).

    A console log's metric dicts carry no step; without a progress bar to read them off, the
    steps are the dicts' order times this. HF's fractional ``logging_steps`` (< 1, a share of
    the total steps) does not give the stride and is ignored.
    """
    config = find_sidecars(log_path).training
    key = next((k for k in config if k.lower().split(".")[-1] == "logging_steps"), None)
    try:
        value = float(config[key]) if key is not None else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return int(value) if value is not None and value >= 1 and value.is_integer() else None


def _read_jobs(jobs: Sequence[_Job], reject: Reject) -> list[tuple[RawRun, _Job]]:
    """Read each file once (several runs per file possible); manifest rows pick their run."""
    loaded: list[tuple[RawRun, _Job]] = []
    seen: set[str] = set()
    for job in jobs:
        resolved = str(job.path.resolve())
        if resolved in seen and job.row is None:
            continue  # already read through the manifest, or given twice
        seen.add(resolved)
        if job.error is not None:  # a folder that could not be searched, a compressed log
            reject(str(job.path), job.error, job.row.run_id if job.row else None)
            continue
        kwargs = {}
        steps = job.row.logging_steps if job.row is not None else None
        if job.fmt == "console":
            kwargs["logging_steps"] = steps or _sidecar_logging_steps(job.path)
        elif job.fmt in {"csv", "jsonl"}:  # the stride of an export without a step column
            kwargs["logging_steps"] = steps
        try:
            runs = load_file(job.path, job.fmt, **kwargs)
        except (LogFormatError, OSError) as exc:
            msg = str(exc)
            reject(str(job.path), msg if str(job.path) in msg else f"{job.path}: {msg}")
            continue
        for piece in runs:
            if piece.rejected is not None:  # rows of the file that belong to no run
                reject(f"{job.path} (rows without a run name)", piece.rejected)
        runs = [r for r in runs if r.rejected is None]
        for run in runs:
            run.notes[:0] = job.notes
            if steps and job.row is not None and not run.numbered_by_order:
                run.notes.append(
                    f"logging_steps={steps} of {job.row.where} not used: the log carries its "
                    "own step numbers"
                )
        row = job.row
        if row is not None and row.run_name is not None:
            picked = [r for r in runs if r.name == row.run_name]
            if not picked:
                names = [r.name for r in runs]
                reject(
                    row.where,
                    f"{row.where}: no run named {row.run_name!r} in {job.path} (runs: {names})",
                    row.run_id,
                )
                continue
            runs = picked
        elif row is not None and row.run_id is not None and len(runs) > 1:
            reject(
                row.where,
                f"{row.where}: {job.path} holds {len(runs)} runs; add run_name to choose one",
                row.run_id,
            )
            continue
        loaded.extend((run, job) for run in runs)
    return loaded


def _event_order(run: RawRun) -> tuple[int, tuple]:
    return _event_file_order(run.path)


def _event_file_order(path: Path) -> tuple[int, tuple]:
    """An event file's place in time: the start time its name carries (``events.out.tfevents.
    <unix time>...``). Its path does not order it: HF's default folders ``runs/Mar30_...`` and
    ``runs/Apr02_...`` sort by the month's name."""
    stamp = _EVENT_STAMP.match(path.name)
    return (int(stamp.group(1)) if stamp else 0, _natural_key(path.name))


def _natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """``name`` with its runs of digits compared as numbers: files a writer opens within one
    second differ only in the counter at the end of their names (``...host.1234.9``,
    ``...host.1234.10``), which as text put the tenth before the ninth."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name) if p)


def _logging_folder(event_file: Path) -> Path:
    """The folder a training logs into: the event file's, or ``runs/`` for HF's default folders.

    The Hugging Face default ``logging_dir`` is ``<output_dir>/runs/<Dec03_21-00-00>_<host>``, a
    new folder for every start of the process, so a resumed training writes beside, not into,
    its first folder.
    """
    folder = event_file.parent
    if _HF_LOGGING_DIR.match(folder.name) and folder.parent.name == "runs":
        return folder.parent
    return folder


def _resume_after(first: RawRun, *, named: bool) -> float:
    """The step after which a later event file in the folder of ``first`` resumes its training.

    Named runs: after ``first``'s first step (the name tells the trainings apart). Without a
    name, after its second logged step: a resume starts from a checkpoint, a new training at the
    start, perhaps one logging step off (logging from step 0 where the other began at 1).
    """
    steps = np.unique(pd.to_numeric(first.records["step"], errors="coerce").dropna())
    return float(steps[0] if named or steps.size < 2 else steps[1])


def _merge_resumed_event_files(
    loaded: list[tuple[RawRun, _Job]],
) -> list[tuple[RawRun, _Job]]:
    """Join event files of one resumed training: same logging folder, same ``run_name``, later start.

    A Trainer resumed from a checkpoint writes a new event file into the same logging folder (with
    HF's default ``logging_dir``, a new ``runs/<date>_<host>`` folder beside the first one:
    :func:`_logging_folder`), starting after the checkpoint's step; a new training with the same
    name starts from the beginning again and stays a separate run. Event files that carry no run
    name (a plain ``SummaryWriter`` of a custom loop, which opens a new file at every start) are
    joined within one folder, unless a manifest row names the file, when they start after the
    first file's second step (:func:`_resume_after`).
    """
    groups: dict[tuple[Path, str | None], list[tuple[RawRun, _Job]]] = defaultdict(list)
    out: list[tuple[RawRun, _Job]] = []
    for run, job in loaded:
        if run.fmt == "tensorboard" and run.name_hint:
            groups[(_logging_folder(run.path), run.name_hint)].append((run, job))
        elif run.fmt == "tensorboard" and job.row is None:
            groups[(run.path.parent, None)].append((run, job))
        else:
            out.append((run, job))
    for (folder, name), members in groups.items():
        members.sort(key=lambda rj: _event_order(rj[0]))
        chains: list[list[tuple[RawRun, _Job]]] = []
        for run, job in members:
            start = pd.to_numeric(run.records["step"], errors="coerce").min()
            first = chains[-1][0][0] if chains else None
            if first is not None and start > _resume_after(first, named=name is not None):
                chains[-1].append((run, job))
            else:
                chains.append([(run, job)])
        for chain in chains:
            if len(chain) == 1:
                out.append(chain[0])
                continue
            head, last = chain[0][0], chain[-1][0]
            files = [str(r.path.relative_to(folder)) for r, _ in chain]
            merged = RawRun(
                path=head.path,
                fmt="tensorboard",
                records=pd.concat([r.records for r, _ in chain], ignore_index=True),
                name_hint=name,
                config=last.config,
                config_source=last.config_source,
                model_config=last.model_config,
                notes=[
                    f"{len(chain)} event files{f' of run {name!r}' if name else ''} in {folder} "
                    f"read as one resumed run: {files}"
                ]
                + [n for r, _ in chain for n in r.notes],
            )
            out.append((merged, chain[0][1]))
    return out


# ------------------------------------------------------------------------------------------
# the entry point
# ------------------------------------------------------------------------------------------


def _expand_pattern(path: str | os.PathLike) -> list[Path]:
    """``path`` itself, or the sorted matches of a glob pattern (``"exports/*.csv"``, ``**``).

    The shell expands patterns on the command line; in Python a pattern that names no existing
    path is expanded here, and one that matches nothing is an error naming the pattern.
    """
    text = os.fspath(path)
    if Path(text).exists() or not any(c in text for c in "*?["):
        return [Path(text)]
    matches = sorted(glob.glob(text, recursive=True))
    if not matches:
        raise FileNotFoundError(f"{text}: no file or directory matches this pattern")
    return [Path(m) for m in matches]


def run_archives(root: Path, files: Iterable[Path]) -> list[Path]:
    """The archives of files (``runs.tar.gz``: :func:`~bayes_grpo.runset.loaders.archive_error`)
    among ``files`` under the folder ``root`` that may hold runs: not those inside a
    ``checkpoint-*`` folder (a checkpoint's contents are its model and optimizer state, none of
    them a log, as :func:`discover` reads them) or a wandb folder (``wandb/``, ``run-*``: wandb's
    own storage, code and artifacts), which were named as "archives of files not read, beside
    the logs ingested: ... ingest again to read their logs"."""
    out = []
    for f in files:
        if archive_error(f) is None:
            continue
        below = f.relative_to(root).parts[:-1]
        if any(_CHECKPOINT_DIR.match(d) or d == "wandb" or _WANDB_RUN_DIR.match(d) for d in below):
            continue
        out.append(f)
    return out


def _unpack_advice(archives: Sequence[Path]) -> str:
    """What to do with archives of files that were not read: the command that unpacks the first
    into its folder (:func:`~bayes_grpo.runset.loaders.unpack_command`, its paths quoted to run
    as given) and to ingest again."""
    one = len(archives) == 1
    return (
        f"unpack {'it' if one else 'each'} into its folder ({unpack_command(archives[0])}"
        f"{'' if one else ', ...'}) and ingest again to read {'its' if one else 'their'} logs"
    )


def _archives_note(path: str | os.PathLike) -> str:
    """The archives of files a folder without a log holds (``runs.tar.gz``: not read), for its
    rejection: "no log of a known format found here" said nothing of them, and then "unpack
    them first and ingest the folders they give", without the command (:func:`_unpack_advice`)."""
    if not Path(path).is_dir():
        return ""
    archives = run_archives(Path(path), _walk(Path(path))[0])
    if not archives:
        return ""
    shown = _first_few([str(f.relative_to(path)) for f in archives])
    return f"; it holds {counted(len(archives), 'archive')} of files, not read ({shown}): {_unpack_advice(archives)}"


def archives_beside_logs_note(archives: Sequence[Path]) -> str | None:
    """The archives of files (``more.tar.gz``, not read) found in the folders given beside the
    logs that were read, with the command that unpacks the first; None when there is none. They
    were left out without a word (only a folder holding nothing but archives named them)."""
    if not archives:
        return None
    return (
        f"{counted(len(archives), 'archive')} of files not read, beside the logs ingested "
        f"({_first_few([str(a) for a in archives])}): {_unpack_advice(archives)}"
    )


def ingest_notes(ds: xr.Dataset) -> list[str]:
    """The notes of an ingest, once each: what the folders given held but the ingest did not
    read (:func:`archives_beside_logs_note`), the runs of unknown G whose names read like one
    (:func:`group_size_in_names_note`), both kept in :data:`NOTES_ATTR`, and the settings it
    could not find (:func:`unknown_settings_note`). ``load_runs`` warns them, ``bayes-grpo
    ingest`` prints them (``notes`` of its JSON)."""
    raw = ds.attrs.get(NOTES_ATTR, "[]")
    stored = json.loads(raw) if isinstance(raw, str) else list(raw)
    return [*map(str, stored), *[n for n in [unknown_settings_note(ds)] if n]]


def load_runs(
    paths: str | os.PathLike | Iterable[str | os.PathLike] = (),
    *,
    manifest: str | os.PathLike | None = None,
    reward_key: str | None = None,
    min_points: int = MIN_POINTS,
    on_error: str = "skip",
) -> xr.Dataset:
    """Read GRPO logs into one run set.

    Parameters
    ----------
    paths
        Log files or folders (searched recursively; see :func:`discover`), or glob patterns such
        as ``"exports/*.csv"`` (expanded here, sorted). May be empty when a manifest lists the
        runs.
    manifest
        CSV or YAML manifest (:mod:`bayes_grpo.runset.loaders.manifest`): adds the runs it lists
        and sets coordinates and ids of runs (matched by file, and ``run_name`` for multi-run files).
    reward_key
        Metric to use as the reward in every run (source or canonical name); a manifest row's
        ``reward_key`` overrides it for that run. Default: the rule of
        :func:`~bayes_grpo.runset.names.choose_reward`.
    min_points
        Runs with fewer finite reward values are rejected (reported, not kept).
    on_error
        ``"skip"``: leave bad runs out and report them; ``"raise"``: stop at the first.

    Returns
    -------
    xarray.Dataset
        The run set (:func:`~bayes_grpo.runset.core.make_runset`), with per-run warnings, the
        ``bayes_grpo_ingest`` facts and the ``bayes_grpo_rejected`` runs in its attributes.
    """
    if on_error not in {"skip", "raise"}:
        raise ValueError(f"on_error must be 'skip' or 'raise', got {on_error!r}")
    if min_points < 1:
        raise ValueError(f"min_points must be at least 1, got {min_points}")
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    paths = [p for pattern in paths for p in _expand_pattern(pattern)]
    if not paths and manifest is None:
        raise ValueError("nothing to ingest: give log paths and/or a manifest")

    rejected: dict[str, dict[str, object]] = {}

    def reject(source: str, reason: str, run_id: str | None = None) -> None:
        if on_error == "raise":
            raise RunSetError(reason)
        rejected[source] = {"run": run_id, "reason": reason}

    jobs = _manifest_jobs(read_manifest(manifest), reject) if manifest is not None else []
    manifest_file = Path(manifest).resolve() if manifest is not None else None
    given: dict[Path, tuple[_Job, str]] = {}  # each file found through a path: its job, that path
    archives: dict[Path, Path] = {}  # those of folders holding logs too: by real path, as found
    for path in paths:
        found = discover(path)
        if not Path(path).is_file():  # a manifest CSV inside a log folder is no log
            found = [job for job in found if job.path.resolve() != manifest_file]
            if found:
                for f in run_archives(Path(path), _walk(Path(path))[0]):
                    archives.setdefault(f.resolve(), f)
        if not found:
            reject(str(path), f"{path}: no log of a known format found here{_archives_note(path)}")
        for job in found:
            key = job.path.resolve() if job.row is None and job.error is None else None
            if key in given:
                # the same file through two paths (a folder and a file in it, a path given
                # twice) was read once without a word
                first_job, first_path = given[key]
                first_job.notes.append(f"given more than once ({first_path!r}, then {str(path)!r}): read once")
                continue
            if key is not None:
                given[key] = (job, str(path))
            jobs.append(job)
    loaded = _merge_resumed_event_files(_read_jobs(jobs, reject))
    # drop file-level duplicates where a manifest row and a plain path name the same run
    unique: dict[tuple[str, str | None], tuple[RawRun, _Job]] = {}
    for run, job in loaded:
        key = (str(run.path.resolve()), run.name)
        first = unique[key][1].row if key in unique else None
        if first is not None and job.row is not None and job.row is not first:
            # the later row was dropped without a word, its id and coordinates with it
            raise LogFormatError(
                f"{first.manifest}: rows {first.row} and {job.row.row} are both about the run "
                f"{run.label}; give each run one row"
            )
        if key not in unique or (job.row is not None and unique[key][1].row is None):
            unique[key] = (run, job)
    loaded = list(unique.values())
    sidecars: dict[Path, Sidecars] = {}
    for run, _job in loaded:
        if run.path.parent not in sidecars:
            sidecars[run.path.parent] = find_sidecars(run.path)

    def hint(run: RawRun) -> str | None:
        side = sidecars[run.path.parent]
        suggested = side.runner.get("run_id")
        if run.name is None and isinstance(suggested, str) and suggested:
            if not renamed_runner_folder(side):  # a renamed folder names the run (a warning)
                return suggested
        return run.name or run.name_hint

    runs_in_folder = Counter(run.path.parent for run, _job in loaded)

    def sole_event_file(run: RawRun) -> bool:
        return run.fmt == "tensorboard" and runs_in_folder[run.path.parent] == 1

    components = [
        _path_components(run.path, run.name, sole_event_file=sole_event_file(run))
        for run, _job in loaded
    ]
    # logs whose parts are all alike (two generic file names in one folder) are told apart by
    # their file names; growing the path suffix could not, and their ids became the whole
    # absolute path, the second with '#2'
    alike = Counter(map(tuple, components))
    components = [
        _path_components(run.path, run.name, file_name=True) if alike[tuple(parts)] > 1 else parts
        for parts, (run, _job) in zip(components, loaded)
    ]
    # a log and its compressed copy in one folder (metrics.csv, metrics.csv.gz) hold one log's
    # name: their own file names tell them apart
    alike_here = Counter(
        (tuple(parts), run.path.parent) for parts, (run, _job) in zip(components, loaded)
    )
    components = [
        _path_components(run.path, run.name, file_name=True, own_name=True)
        if alike_here[(tuple(parts), run.path.parent)] > 1
        else parts
        for parts, (run, _job) in zip(components, loaded)
    ]
    # nor could the file names tell apart the states of two checkpoints of one run (given
    # as files, or a run folder beside one of its checkpoints): their folders do
    alike = Counter(map(tuple, components))
    components = [
        _path_components(run.path, run.name, every_folder=True)
        if alike[tuple(parts)] > 1
        else parts
        for parts, (run, _job) in zip(components, loaded)
    ]
    ids = assign_run_ids(
        [
            (parts, job.row.run_id if job.row else None, hint(run))
            for parts, (run, job) in zip(components, loaded)
        ]
    )
    curves: dict[str, pd.DataFrame] = {}
    meta: dict[str, dict[str, object]] = {}
    warn: dict[str, list[str]] = {}
    facts: dict[str, dict[str, object]] = {}
    name_readings: dict[str, tuple[int, str]] = {}  # the runs of unknown G named like one
    partial: set[str] = set()  # bayes-grpo train's runs stopped before they completed
    for (run, job), run_id in zip(loaded, ids):
        key = job.row.reward_key if job.row and job.row.reward_key else reward_key
        try:
            norm = normalise_run(run, reward_key=key, min_points=min_points)
        except RunRejected as exc:
            reject(run.label, f"run {run_id!r}: {exc}", run_id)
            continue
        values, why, hp_warn = _merge_hyperparameters(run, job, norm, sidecars[run.path.parent])
        if sidecars[run.path.parent].runner.get("completed") is False:
            partial.add(run_id)
        hp_warn += _later_event_files(job, int(norm.frame.index.max()))
        frame, step_note = iterations_as_optimizer_steps(
            norm.frame,
            values.get("k_ref"),
            why.get("k_ref", ""),
            reward_is_eval=split_eval(str(norm.facts.get("reward_source", "")))[0],
        )
        hp_warn += [step_note] if step_note else []
        if "k_ref" not in values:
            hp_warn += [n for n in [unknown_iterations_note(norm.facts["metrics"])] if n]
        if "group_size" not in values and (reading := group_size_in_name(run_id, run.path)) is not None:
            name_readings[run_id] = reading
        values["source"] = f"{run.fmt}:{run.label}"
        curves[run_id] = frame
        meta[run_id] = values
        warn[run_id] = [f"{run.label}: {w}" for w in norm.warnings + hp_warn]
        facts[run_id] = norm.facts | {"hyperparameter_sources": why}
    if not curves:
        reasons = "; ".join(str(info["reason"]) for info in rejected.values()) or "no logs found"
        raise RunSetError(f"no run could be ingested: {reasons}")
    for run_id, notes in same_training_twice(curves, partial).items():
        warn[run_id] += notes
    if rejected:
        lines = rejection_texts(rejected)
        pywarnings.warn(
            f"{counted(len(rejected), 'run')} not ingested:\n  " + "\n  ".join(lines),
            UserWarning,
            stacklevel=2,
        )
    attrs = {INGEST_ATTR: facts, REJECTED_ATTR: rejected, "min_points": int(min_points)}
    notes = [archives_beside_logs_note(list(archives.values())), group_size_in_names_note(name_readings)]
    if any(notes):
        attrs[NOTES_ATTR] = [n for n in notes if n]
    ds = make_runset(curves, meta, warnings=warn, attrs=attrs)
    for note in ingest_notes(ds):
        pywarnings.warn(note, UserWarning, stacklevel=2)
    return ds


# ------------------------------------------------------------------------------------------
# summary
# ------------------------------------------------------------------------------------------


def _json_attr(ds: xr.Dataset, name: str) -> dict:
    raw = ds.attrs.get(name, "{}")
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def ingest_facts(ds: xr.Dataset) -> dict[str, dict[str, object]]:
    """What the ingest recorded per run (:data:`INGEST_ATTR`: sources, reward rule, hyperparameter
    sources, ...), ``{run: facts}``; ``{}`` for a run set made without the ingest."""
    return _json_attr(ds, INGEST_ATTR)


def rejected_runs(ds: xr.Dataset) -> dict[str, dict[str, object]]:
    """The runs an ingest rejected, ``{source: {"run": id or None, "reason": text}}``."""
    return _json_attr(ds, REJECTED_ATTR)


def rejection_texts(rejected: Mapping[str, Mapping[str, object]]) -> list[str]:
    """The sources an ingest rejected (:func:`rejected_runs`), each with its reason, as
    ``load_runs`` warns them and the report's overview shows them: a reason that names its
    source already ("run 'r': PATH: only 3 ...") is not prefixed again."""
    return [
        str(info["reason"]) if src in str(info["reason"]) else f"{src}: {info['reason']}"
        for src, info in rejected.items()
    ]


def runset_summary(ds: xr.Dataset, *, include_rejected: bool = True) -> pd.DataFrame:
    """One row per run: id, coordinates, length, first/last reward, counts, warnings, status.

    ``n_steps`` counts the run's finite reward values (its logged points), not optimizer steps:
    a run logged every 10 steps over 1000 steps has 100; ``first_step`` and ``last_step`` are
    the steps they span. ``n_points`` is the same count under a name that says so (``n_steps``
    is kept for scripts; the run set's step axis, the union over runs, is ``ds.sizes["step"]``).

    Rejected runs (from the ingest) are listed at the end with status ``rejected`` and the reason.
    """
    facts = ingest_facts(ds)
    warns = runset_warnings(ds)
    rows = []
    for run_id in (str(r) for r in ds[RUN_DIM].values):
        sub = ds.sel({RUN_DIM: run_id})
        reward = sub[REWARD_VAR].to_series().dropna()
        info = facts.get(run_id, {})
        row: dict[str, object] = {"run": run_id, "status": "ok"}
        for name in RUN_COORDS:
            value = sub[name].values.item()
            row[name] = str(value) if name in STRING_COORDS else float(value)
        row.update(
            {
                "n_steps": int(reward.size),
                "n_points": int(reward.size),
                "first_step": int(reward.index[0]) if reward.size else None,
                "last_step": int(reward.index[-1]) if reward.size else None,
                "reward_first": float(reward.iloc[0]) if reward.size else float("nan"),
                "reward_last": float(reward.iloc[-1]) if reward.size else float("nan"),
                "reward_source": info.get("reward_source", REWARD_VAR),
                "n_nonfinite_reward": info.get("n_nonfinite_reward", 0),
                "n_duplicate_steps": info.get("n_duplicate_steps", 0),
                "n_backward_steps": info.get("n_backward_steps", 0),
                "warnings": "; ".join(warns.get(run_id, [])),
                "reason": "",
            }
        )
        rows.append(row)
    if include_rejected:
        for source, info in rejected_runs(ds).items():
            rows.append(
                {
                    "run": info.get("run") or "",
                    "status": "rejected",
                    "source": source,
                    "reason": info.get("reason", ""),
                }
            )
    frame = pd.DataFrame(rows)
    return frame.set_index("run") if not frame.empty else frame


_INT_COLUMNS = (
    "n_steps",
    "n_points",
    "first_step",
    "last_step",
    "n_nonfinite_reward",
    "n_duplicate_steps",
    "n_backward_steps",
)


def summary_records(summary: pd.DataFrame) -> list[dict[str, object]]:
    """:func:`runset_summary` rows as JSON-ready dicts (counts as ints; rejected runs: id, source, reason)."""
    records = []
    for run_id, row in summary.iterrows():
        if row["status"] != "ok":
            records.append(
                {
                    "run": run_id or None,
                    "status": row["status"],
                    "source": row["source"],
                    "reason": row["reason"],
                }
            )
            continue
        rec = {"run": run_id, **row.to_dict()}
        for col in _INT_COLUMNS:
            rec[col] = None if pd.isna(rec[col]) else int(rec[col])
        for col in COUNT_COORDS:
            rec[col] = readable_group_size(rec[col])
        records.append(rec)
    return records


__all__ = [
    "summary_records",
    "INGEST_ATTR",
    "ingest_facts",
    "REJECTED_ATTR",
    "NOTES_ATTR",
    "archives_beside_logs_note",
    "ingest_notes",
    "MIN_POINTS",
    "RunRejected",
    "NormalisedRun",
    "normalise_run",
    "discover",
    "assign_run_ids",
    "load_runs",
    "rejected_runs",
    "rejection_texts",
    "runset_summary",
    "unknown_settings_note",
]
