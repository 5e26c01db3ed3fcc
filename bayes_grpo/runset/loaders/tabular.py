"""CSV and JSONL metric exports: one run or several per file.

Layouts recognised (column names are matched case-insensitively):

- **wide, one run**: a step column (``step``, ``global_step``, ``_step``, ``Step`` ...; see
  :data:`~bayes_grpo.runset.loaders._base.STEP_KEYS`) and one column per metric, under any
  names (``train/reward``, ``reward``, ``critic/score/mean``, ``rewards/acc/mean`` ...).
- **wide, several runs**: the same plus a run column (``run``, ``run_id``, ``run_name``, ``name``);
  without one, a model column (``model``, ``model_name_or_path`` ...) naming several models
  gives one run per model (:func:`_model_runs_column`).
- **long** (wandb history exports): columns ``run_name`` (or ``run``/``run_id``), ``metric``
  (or ``key``/``tag``), ``step`` and ``value``; one row per logged value. Any other column
  (a run's config beside each row: ``learning_rate``, ``num_generations``, ``model`` ...) is a
  field of the row's step, as in a wide file, logged once a step; one of several values at a
  step (a ``wall_time`` of each row) is not read, with a note.
- In multi-run files with both ``run_name`` and ``run_id``, runs are told apart by ``run_id``
  (a display name shared by several runs gets the id appended: ``grpo_a1b2``).
- Separators: comma, tab (``.tsv``) or semicolon (spreadsheet exports); a semicolon export
  may write decimal commas (``0,25``), read as decimals with a note (:func:`_decimal_commas`);
  spaces (``numpy.savetxt``'s default, its ``#`` before the header too), with a note
  (:func:`_space_separated_names`).
- Rows of a multi-run file with an empty run name belong to no run: the ingest reports them
  as rejected, naming the lines (:func:`_run_groups`).
- **wandb panel export**: ``Step`` plus columns ``"<run> - <metric>"`` (and their ``__MIN`` /
  ``__MAX`` companions, kept as metrics ``<metric>__MIN`` ...).
- **JSONL**: one JSON object per line, with a step key (metrics nested under ``data`` or
  ``metrics`` beside it, as verl's file logger writes them, keep their own names, also beside
  other keys such as a time stamp). Lines that
  carry a record type (``"type": "train" | "rollout" | "eval"``, also ``split``/``mode``/
  ``phase``) are merged by step, their metrics prefixed with the type (``rollout/reward``,
  ``eval/reward``; ``train`` records unprefixed); without a run key, a model key naming several
  models at one step gives a run per model, as in a CSV. A JSON file holding a list of such objects is
  read the same way.

A row without a value in the ``global_step`` column used takes its step from another
``.../global_step`` column (:func:`~bayes_grpo.runset.loaders._base.other_global_steps`:
OpenRLHF's evaluation rows carry ``eval/global_step`` only); JSONL records alike.

Without a step column, rows are numbered 1, 2, 3 ... by order, with a warning (``logging_steps``
apart when the manifest row gives it).
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_grpo.checks.base import counted
from bayes_grpo.runset.loaders._base import (
    ARCHIVE_ERRORS,
    READ_ERRORS,
    STEP_KEYS,
    LogFormatError,
    RawRun,
    compression_suffix,
    find_step_key,
    json_error,
    log_name,
    open_log,
    other_global_steps,
    read_text,
    records_from_dicts,
    unreadable,
)
from bayes_grpo.runset.names import hyperparameter_key

#: Run columns of a multi-run export; ``name`` is the run column of wandb's exports ("Name"):
#: without it the rows of several runs merged into one run, later runs overwriting earlier ones.
RUN_KEYS: tuple[str, ...] = ("run_name", "run_id", "run", "name", "experiment", "trial")
#: Run id columns: unique per run where the names (``run_name``) may repeat.
ID_KEYS: tuple[str, ...] = ("run_id",)
METRIC_KEYS: tuple[str, ...] = ("metric", "key", "tag")
TYPE_KEYS: tuple[str, ...] = ("type", "split", "mode", "phase", "kind")
#: Record types whose metrics are training metrics (no prefix).
TRAIN_TYPES = frozenset({"train", "training", "step", "metrics", "log", "update"})
#: Record types that are evaluations (prefix ``eval/``).
EVAL_TYPES = frozenset({"eval", "evaluation", "val", "valid", "validation", "test"})
#: Keys under which a logger nests one step's metrics beside the step (verl's file logger writes
#: ``{"step": N, "data": {metrics}}``): a record holding only such a mapping gives its metrics
#: under their own names; they were read as ``data/critic/score/mean`` ..., no canonical names.
WRAPPER_KEYS = frozenset({"data", "metrics"})
#: ``"<run> - <metric>"``, split at the last ``" - "``: run names may hold one ("qwen - G8"),
#: metric keys do not; split at the first, runs "qwen - G8" and "qwen - G16" merged into "qwen".
_PANEL = re.compile(r"^(?P<run>.+) - (?P<metric>.+)$")


def _model_runs_column(frame: pd.DataFrame, step_col: str | None) -> str | None:
    """The model column (``model``, ``model_name_or_path`` ...: ``HYPERPARAMETER_ALIASES``) of a
    wide file without a run column, when it names several models that log the same steps: each
    model's rows are a run.

    A comparison table ``model,step,reward`` was read as one run whose steps start over at each
    model, the later model's rewards replacing the earlier's at every step. The column stays in
    each run's rows, where it is the run's ``model``. Models one after another on one step axis
    (no step logged under two) stay one run.
    """
    column = hyperparameter_key("model", {str(c): None for c in frame.columns})
    if column is None or step_col is None:
        return None
    names = frame[column].astype("string").str.strip()
    named = names.notna() & (names != "")
    if pd.to_numeric(names[named], errors="coerce").notna().any() or names[named].nunique() < 2:
        return None
    steps = frame.loc[named, step_col].astype("string").str.strip()
    models_per_step = names[named].groupby(steps).nunique()
    return column if (models_per_step > 1).any() else None


def _find(columns, candidates) -> str | None:
    lowered = {str(c).lower(): c for c in columns}
    for cand in candidates:
        if cand in lowered:
            return lowered[cand]
    return None


def _run_labels(frame: pd.DataFrame, run_col: str) -> pd.Series:
    """The run each row of a multi-run file belongs to, by its name.

    Runs are told apart by their id column (``run_id``) where the file has one beside a name
    column: wandb display names need not be unique, and two runs of one name would otherwise
    merge into one, the later overwriting the earlier. A name shared by several ids becomes
    ``<name>_<id>``.
    """
    names = frame[run_col].astype(str)
    id_col = _find(frame.columns, ID_KEYS)
    if id_col is None or id_col == run_col:
        return names
    ids = frame[id_col].astype(str)
    shared = names.groupby(names).transform(lambda g: ids[g.index].nunique() > 1)
    return names.where(~shared.astype(bool), names + "_" + ids)


def _blank(values: pd.Series) -> pd.Series:
    """True where a run-name value is missing or empty."""
    return values.isna() | (values.astype(str).str.strip() == "")


def _line_list(lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:10]))
    return shown + (f", ... ({len(lines)} in all)" if len(lines) > 10 else "")


def _run_groups(
    frame: pd.DataFrame, run_col: str, path: Path, *, fmt: str = "csv"
) -> tuple[list[tuple[str | None, pd.DataFrame]], list[str], RawRun | None]:
    """The rows of each run of a multi-run file, with the run's name (:func:`_run_labels`).

    Rows whose run column is empty belong to no run: they come back as a rejected
    :class:`RawRun` (reported by the ingest, never merged into a run nor dropped unseen).
    Exceptions: a file in which no row names a run is one run; and a JSONL file that names
    one run only is that run (a header record often carries the name the step records
    omit), with a note. A CSV's rows are all alike, so there a blank name is a blank.

    Returns ``(groups, notes, unassigned)``. ``fmt`` is ``"csv"`` (row ``i`` is file line
    ``i + 2``) or ``"jsonl"`` (row ``i`` is the file's record ``i + 1``).
    """
    unit, where, first = ("row", "line", 2) if fmt == "csv" else ("record", "record number", 1)
    blank = _blank(frame[run_col])
    named = frame[~blank]
    names = named[run_col].astype(str).unique()
    if len(names) == 0:
        return [(None, frame)], [], None
    if len(names) == 1 and fmt == "jsonl":
        notes = []
        if blank.any():
            notes.append(
                f"{counted(int(blank.sum()), unit)} without {run_col!r} read as part "
                f"of the file's one run {names[0]!r}"
            )
        return [(str(names[0]), frame)], notes, None
    labels = _run_labels(named, run_col)
    groups = [(str(name), sub) for name, sub in named.groupby(labels, sort=False)]
    unassigned = None
    if blank.any():
        lines = [int(i) + first for i in frame.index[blank]]
        unassigned = RawRun(
            path=path,
            fmt=fmt,
            records=pd.DataFrame(columns=["step", "metric", "value"]),
            rejected=(
                f"{path}: {counted(len(lines), unit)} with an empty {run_col!r} "
                f"({where if len(lines) == 1 else where + 's'} {_line_list(lines)}) "
                f"{'belongs' if len(lines) == 1 else 'belong'} to none of the file's "
                f"{counted(len(names), 'run')}; not "
                "ingested (fill in the run name to keep them)"
            ),
        )
    return groups, [], unassigned


def _ordinal_steps(path: Path, n: int, logging_steps: int | None) -> tuple[list[int], str]:
    """Steps of ``n`` rows without a step column, numbered by order (``logging_steps`` apart:
    the manifest row's stride), and the note saying so."""
    stride = int(logging_steps or 1)
    numbers = f"{stride}" if n == 1 else f"{stride}..{stride * n}"
    note = (
        f"no step column in {path.name}; the {counted(n, 'row')} {'was' if n == 1 else 'were'} "
        f"numbered {numbers} by order"
    )
    if logging_steps:
        note += f" with logging_steps={stride}"
    return [stride * i for i in range(1, n + 1)], note


def _wide_records(
    frame: pd.DataFrame,
    path: Path,
    skip: tuple[str, ...] = (),
    logging_steps: int | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    notes = []
    step_col = find_step_key(map(str, frame.columns))
    if step_col is None:
        ordinal, note = _ordinal_steps(path, len(frame), logging_steps)
        steps = pd.Series(ordinal, index=frame.index)
        notes.append(note)
    else:
        steps = frame[step_col]
        missing = _blank(steps)
        for other in other_global_steps(map(str, frame.columns), str(step_col)):
            fill = missing & ~_blank(frame[other])
            if fill.any():
                steps = steps.where(~fill, frame[other])
                missing &= ~fill
                notes.append(
                    f"{counted(int(fill.sum()), 'row')} without {step_col!r} "
                    f"{'takes its' if fill.sum() == 1 else 'take their'} step from {other!r}"
                )
    metric_cols = [c for c in frame.columns if c != step_col and c not in skip]
    # in file order, row by row and each row's cells left to right (keep-last semantics); not
    # through DataFrame.melt, whose own column names a metric may have: a column 'value'
    # ('step,value', a one-metric export) stopped the whole ingest with pandas' "value_name
    # (value) cannot match an element in the DataFrame columns", naming no file
    cells = frame[metric_cols].to_numpy(dtype=object)
    values = cells.ravel()
    logged = ~pd.isna(values)
    records = pd.DataFrame(
        {
            "step": np.repeat(steps.to_numpy(dtype=object), len(metric_cols))[logged],
            "metric": np.tile(np.array(metric_cols, dtype=str), len(frame))[logged],
            "value": values[logged],
        }
    )
    return records, notes


def _read_csv(path: Path, sep: str, **kwargs) -> pd.DataFrame:
    """The cells of a CSV file as text; the spaces after a separator (``step, reward, kl``, as
    people and ``numpy.savetxt(delimiter=", ")`` write) are not part of a name or value, nor
    spaces closing a header name (unless two names would then be one): the header's ' reward'
    was no reward ("no reward metric; metrics found: [' reward ']"), a manifest's ' group_size'
    an unknown column, and a quoted value with a comma in it (``, "a, b"``) was split in two."""
    try:
        with open_log(path) as fh:
            frame = pd.read_csv(
                fh,
                sep=sep,
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                skipinitialspace=True,
                **kwargs,
            )
    except pd.errors.EmptyDataError as exc:
        raise LogFormatError(f"{path}: empty file (nothing logged yet, or being written?)") from exc
    except (OSError, *ARCHIVE_ERRORS) as exc:
        if compression_suffix(path) is not None:
            raise unreadable(path, exc) from exc
        raise LogFormatError(f"{path}: not a readable CSV file ({exc})") from exc
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise LogFormatError(f"{path}: not a readable CSV file ({exc})") from exc
    stripped = [c.strip() if isinstance(c, str) else c for c in frame.columns]
    if len(set(stripped)) == len(stripped):
        frame.columns = stripped
    return frame


def _read_table(path: Path, sep: str) -> tuple[pd.DataFrame, str | None]:
    """The table of a CSV file, and a note when its rows end with a separator its header lacks.

    pandas takes the first field of rows that have more fields than the header names for the
    row index: in ``step,reward,kl`` over rows ``1,0.5,0.01,`` (a writer that ends every row
    with a comma) each column took its right neighbour's values, the steps became 0.5 ... and
    the run was rejected as "steps must be integers", or read shifted when they were whole
    numbers. An empty last field is read away; values in fields the header does not name are
    an error, since which column is which cannot be told.
    """
    frame = _read_csv(path, sep)
    if isinstance(frame.index, pd.RangeIndex):
        return frame, None
    if len(frame.columns) == 0 or not frame.iloc[:, -1].isna().all():
        raise LogFormatError(
            f"{path}: its rows have more fields than the {len(frame.columns)} names of its "
            "header, so which column is which cannot be told; name every column in the header"
        )
    with warnings.catch_warnings():
        # the field it leaves out is empty in every row: nothing is lost
        warnings.simplefilter("ignore", pd.errors.ParserWarning)
        frame = _read_csv(path, sep, index_col=False)
    return frame, (
        "its rows end with a separator its header does not have; the empty "
        "last field not read"
    )


def read_table(path: Path) -> tuple[pd.DataFrame, str, list[str]]:
    """A CSV file's cells as text (an empty cell NaN), the separator it uses and notes: a tab
    in a ``.tsv``, else a comma, or a semicolon when the header is one name holding one
    (spreadsheets in many locales; their decimal commas ``0,25`` read as decimals,
    :func:`_decimal_commas`); rows ending with a separator the header lacks as
    :func:`_read_table` reads them. Logs and manifests are read so."""
    sep = "\t" if Path(log_name(path)).suffix.lower() == ".tsv" else ","
    header = _read_csv(path, sep, nrows=0).columns
    if len(header) == 1 and ";" in str(header[0]):
        frame, trailing_note = _read_table(path, ";")
        frame, decimal_note = _decimal_commas(frame)
        return frame, ";", [n for n in [trailing_note, decimal_note] if n is not None]
    names = _space_separated_names(path) if len(header) == 1 else None
    if names is not None:  # the header's own names, without the '# ' numpy.savetxt puts first
        frame = _read_csv(path, WHITESPACE_SEPARATOR, header=None, skiprows=1, names=names)
        return frame, WHITESPACE_SEPARATOR, ["columns separated by spaces, read as such"]
    frame, trailing_note = _read_table(path, sep)
    return frame, sep, [trailing_note] if trailing_note is not None else []


#: The separator of a table whose columns are separated by spaces (``numpy.savetxt``'s default,
#: a console table pasted to a ``.csv``).
WHITESPACE_SEPARATOR = r"\s+"


def _space_separated_names(path: Path) -> list[str] | None:
    """The column names of a table separated by spaces, or None for any other: a header (without
    the ``#`` that ``numpy.savetxt(header=...)`` puts first) and a first row that split on spaces
    into the same number (at least 2) of fields. Read as comma-separated, ``step reward kl`` was
    one text column and the run was rejected as "no numeric metrics in the log"; a single column
    named with a space (``mean reward``) over single values stays one column."""
    with open_log(path, errors="replace") as fh:
        header, first = fh.readline().split(), fh.readline().split()
    if header[:1] == ["#"]:
        header = header[1:]
    elif header and header[0].startswith("#"):
        header = [header[0][1:], *header[1:]]
    return header if len(header) >= 2 and len(header) == len(first) else None


_DECIMAL_COMMA = re.compile(r"^\s*[-+]?\d*,\d+(?:[eE][-+]?\d+)?\s*$")


def _decimal_commas(frame: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """A semicolon-separated export written with decimal commas (``0,25``), as spreadsheets
    in many locales write it, with those cells read as decimal points; and a note saying so.

    Only cells that are a number with one decimal comma change (never a thousands separator
    such as ``1.234,5``, which stays text and is reported as non-numeric by the ingest), and
    never in a run, id, metric-name or record-type column (names are kept as written).
    """
    names = {*RUN_KEYS, *ID_KEYS, *METRIC_KEYS, *TYPE_KEYS}
    is_decimal = frame.apply(
        lambda col: pd.Series(False, index=col.index)
        if str(col.name).lower() in names
        else col.astype("string").str.match(_DECIMAL_COMMA).fillna(False)
    )
    n = int(is_decimal.to_numpy().sum())
    if n == 0:
        return frame, None
    fixed = frame.mask(is_decimal, frame.astype("string").apply(lambda c: c.str.replace(",", ".")))
    return fixed, f"{counted(n, 'value')} written with a decimal comma read as decimals"


def _repeated_headers(
    frame: pd.DataFrame, path: Path, sep: str
) -> tuple[pd.DataFrame, str | None]:
    """``frame`` with the columns its header names more than once told apart, and a note.

    pandas reads a repeated name ``X`` as ``X.1``, ``X.2`` ... In a wandb panel export the
    repeats are runs of one display name (wandb does not make names unique): the k-th
    ``"<run> - <metric>"`` becomes ``"<run>#k - <metric>"``, a run of its own; before, the
    second run's curves became extra metrics (``reward_1``) of the first, without a word. Other
    repeated names keep pandas' names; the note says so.
    """
    try:
        with open_log(path) as fh:
            first_row = pd.read_csv(
                fh,
                sep=sep,
                header=None,
                nrows=1,
                dtype=str,
                keep_default_na=False,
                skipinitialspace=True,
            )
        header = [name.strip() for name in first_row.iloc[0].tolist()]
    except (
        OSError,
        UnicodeDecodeError,
        pd.errors.ParserError,
        pd.errors.EmptyDataError,
        *ARCHIVE_ERRORS,
    ):
        return frame, None
    counts = Counter(name for name in header if name)
    repeated = [name for name, n in counts.items() if n > 1]
    if not repeated or len(header) != len(frame.columns):
        return frame, None
    seen: Counter = Counter()
    columns = list(frame.columns)
    runs = False
    for i, name in enumerate(header):
        seen[name] += 1
        match = _PANEL.match(name) if name in repeated and seen[name] > 1 else None
        if match:
            columns[i] = f"{match.group('run')}#{seen[name]} - {match.group('metric')}"
            runs = True
    shown = ", ".join(f"{name!r} ({counts[name]}x)" for name in repeated[:5])
    how = (
        "the repeats read as runs <run>#2 ... (wandb runs that share a display name)"
        if runs
        else "the later columns kept as <name>.1 ..."
    )
    return frame.set_axis(columns, axis=1), f"the header names {shown}; {how}"


def _pandas_row_index(frame: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """``frame`` without the row numbers ``DataFrame.to_csv`` writes first (a column without a
    name holding 0, 1, 2 ...), and a note; else ``frame`` as it is.

    ``pd.DataFrame(trainer.state.log_history).to_csv("log.csv")`` writes one: read as a metric,
    it was a value at every row, so the evaluation rows (and the summary row) that share a
    training step made that step "logged more than once (a resumed run?)".
    """
    first = str(frame.columns[0]) if len(frame.columns) > 1 else ""
    if not first.startswith("Unnamed: 0"):
        return frame, None
    numbers = pd.to_numeric(frame.iloc[:, 0], errors="coerce")
    if numbers.tolist() != list(range(len(frame))):
        return frame, None
    return frame.iloc[:, 1:], (
        f"its first column, without a name and numbered 0..{len(frame) - 1}, is "
        "the row index pandas writes, not a metric; not read"
    )


def load_csv(path: str | Path, *, logging_steps: int | None = None) -> list[RawRun]:
    """Read the run(s) of a CSV (or TSV) metric export (rows without a step column are
    numbered by order, ``logging_steps`` apart)."""
    path = Path(path)
    frame, sep, notes = read_table(path)
    frame, header_note = _repeated_headers(frame, path, sep)
    frame, index_note = _pandas_row_index(frame)
    notes = [n for n in [header_note, index_note] if n is not None] + notes
    runs = _csv_runs(frame, path, logging_steps)
    for run in runs:
        if run.rejected is None:
            run.notes[:0] = notes
    return runs


def _csv_runs(frame: pd.DataFrame, path: Path, logging_steps: int | None = None) -> list[RawRun]:
    """The runs of a CSV export read into ``frame`` (text cells; see the module docstring)."""
    if frame.empty:
        raise LogFormatError(f"{path}: CSV has no rows")
    if len(frame.columns) < 2 and find_step_key(map(str, frame.columns)) is not None:
        raise LogFormatError(f"{path}: CSV has only a step column, no metric")
    # a single metric column (a bare list of rewards) is a run numbered by row, with a warning
    frame = frame.reset_index(drop=True)
    cols = list(map(str, frame.columns))
    run_col = _find(cols, RUN_KEYS)
    metric_col = _find(cols, METRIC_KEYS)
    value_col = _find(cols, ("value",))
    step_col = find_step_key(cols)
    model_col = None
    if run_col is None and metric_col is None:
        run_col = model_col = _model_runs_column(frame, step_col)
    multi = run_col is not None
    if metric_col is not None and value_col is not None and step_col is not None:
        groups, notes, unassigned = (
            _run_groups(frame, run_col, path) if multi else ([(None, frame)], [], None)
        )
        runs = [unassigned] if unassigned is not None else []
        # the other columns (a run's config beside each row: learning_rate, num_generations,
        # model ...) are fields of the row's step, as in a wide file: they were dropped unseen
        layout = {step_col, metric_col, value_col, run_col, _find(cols, ID_KEYS)}
        extra = [c for c in frame.columns if c not in layout]
        for name, sub in groups:
            records = pd.DataFrame(
                {
                    "step": sub[step_col].to_numpy(),
                    "metric": sub[metric_col].astype(str).to_numpy(),
                    "value": sub[value_col].to_numpy(),
                }
            ).dropna(subset=["value"])
            run_notes = list(notes)
            if extra:
                fields, _notes = _wide_records(sub[[step_col, *extra]], path)
                # one row per metric repeats the step's fields: a field is logged once a step
                fields = fields.drop_duplicates(keep="last")
                # a column of several values at one step is a field of each row (the wall time
                # of a TensorBoard export's 'wall_time,tag,step,value'), no value of the step:
                # read, every step was "logged more than once"
                per_step = fields.groupby(["metric", "step"], dropna=False)["value"].nunique()
                by_row = sorted(map(str, per_step[per_step > 1].index.unique(level="metric")))
                if by_row:
                    fields = fields[~fields["metric"].isin(by_row)]
                    run_notes.append(
                        f"{'column' if len(by_row) == 1 else 'columns'} {by_row} "
                        f"{'holds' if len(by_row) == 1 else 'hold'} several values at one step (a "
                        "time of each row?), not one value of the step; not read"
                    )
                records = pd.concat([records, fields], ignore_index=True)
            runs.append(
                RawRun(path=path, fmt="csv", records=records, name=name, notes=run_notes)
            )
        return runs
    panel = [c for c in cols if _PANEL.match(c)]
    if panel and step_col is not None:
        by_run: dict[str, list[str]] = {}
        for col in panel:
            by_run.setdefault(_PANEL.match(col).group("run"), []).append(col)
        runs = []
        for name, run_cols in by_run.items():
            sub = frame[[step_col, *run_cols]].rename(
                columns={c: _PANEL.match(c).group("metric") for c in run_cols}
            )
            records, notes = _wide_records(sub, path)
            runs.append(RawRun(path=path, fmt="csv", records=records, name=name, notes=notes))
        return runs
    if multi:
        groups, file_notes, unassigned = _run_groups(frame, run_col, path)
        runs = [unassigned] if unassigned is not None else []
        id_col = _find(cols, ID_KEYS)
        if model_col is not None:
            file_notes = [
                *file_notes,
                f"no run column; its {len(groups)} models ({model_col!r}) read as "
                "one run each",
            ]
        for name, sub in groups:
            # the model column is each run's model (read as a text field of one value)
            skip = (id_col,) if model_col is not None else (run_col, id_col)
            records, notes = _wide_records(sub, path, skip, logging_steps)
            runs.append(
                RawRun(
                    path=path,
                    fmt="csv",
                    records=records,
                    name=name,
                    notes=file_notes + notes,
                    numbered_by_order=step_col is None,
                )
            )
        return runs
    records, notes = _wide_records(frame, path, logging_steps=logging_steps)
    return [
        RawRun(
            path=path, fmt="csv", records=records, notes=notes, numbered_by_order=step_col is None
        )
    ]


def _read_json_lines(path: Path) -> tuple[list[dict], list[str]]:
    """The per-step objects of a JSONL file (or a JSON list of them), and notes of the lines
    that are not one (by their line numbers).

    Read a line at a time from :func:`~bayes_grpo.runset.loaders._base.open_log`: the file's
    whole text and its list of lines were held beside the objects (a 100 MB log: a peak of
    724 MB against 420 MB for the objects). A line ends where the file's lines do (``\\n``,
    ``\\r\\n``, ``\\r``): a U+2028 or U+0085 a logger writes raw inside a JSON string
    (``ensure_ascii=False``) split its record in two unreadable lines under ``str.splitlines``."""
    out: list[dict] = []
    bad: list[int] = []
    last = 0  # the last line that is not blank
    try:
        with open_log(path) as fh:
            for i, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                if not last and line.lstrip().startswith("["):
                    break  # a JSON list of objects, parsed whole below
                last = i
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    bad.append(i)
                    continue
                if isinstance(obj, dict):
                    out.append(obj)
                else:
                    bad.append(i)
    except READ_ERRORS as exc:
        raise unreadable(path, exc) from exc
    if not last:  # empty, or a JSON list
        stripped = read_text(path).strip()
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise json_error(path, stripped, exc) from exc
        if not isinstance(data, list):
            raise LogFormatError(f"{path}: expected a list of per-step objects")
        objects = [d for d in data if isinstance(d, dict)]
        if not objects:
            raise LogFormatError(
                f"{path}: a JSON list of {counted(len(data), 'item')} with no per-step objects"
            )
        return objects, []
    notes = []
    if bad:
        if bad == [last]:
            notes.append(f"last line ({last}) is truncated JSON; skipped")
        else:
            notes.append(
                f"{counted(len(bad), 'unreadable JSON line')} skipped (lines {bad[:10]})"
            )
    if not out:
        raise LogFormatError(
            f"{path}: no JSON objects (unreadable or truncated JSON lines: {bad[:10]})"
        )
    return out, notes


def _type_key(entries: list[dict]) -> str | None:
    for key in TYPE_KEYS:
        vals = [e.get(key) for e in entries if key in e]
        if (
            len(vals) >= len(entries) / 2
            and all(isinstance(v, str) for v in vals)
            and len(set(vals)) <= 20
        ):
            return key
    return None


def _prefix(kind: str) -> str:
    low = kind.lower()
    if low in TRAIN_TYPES:
        return ""
    if low in EVAL_TYPES:
        return "eval/"
    return f"{kind}/"


def _unwrapped(entry: dict) -> dict:
    """The metrics of a record that nests them under one :data:`WRAPPER_KEYS` key, beside the
    record's other keys (a time stamp, a wall time a logger adds), else the record.

    The nested metrics keep their own names; a record whose other keys repeat a nested name
    (or that has two wrappers) is left as it is, its metrics under ``data/<name>``.
    """
    wrappers = [k for k, v in entry.items() if str(k).lower() in WRAPPER_KEYS and isinstance(v, dict)]
    if len(wrappers) != 1:
        return entry
    (key,) = wrappers
    rest = {k: v for k, v in entry.items() if k != key}
    nested = entry[key]
    if any(k in rest for k in nested):
        return entry
    return {**rest, **nested}


def _entries_to_run(
    entries: list[dict],
    path: Path,
    name: str | None,
    notes: list[str],
    logging_steps: int | None = None,
) -> RawRun:
    notes = list(notes)
    # the step too may be nested ({"time": ..., "data": {"step": 5, "reward": ...}}): it was
    # read as a metric and the records numbered 1, 2, 3 ... "by order" (no step column)
    entries = [_unwrapped(e) for e in entries]
    keys = Counter(k for e in entries for k in e)
    candidates = [k for k in STEP_KEYS if k in keys]
    # the step key: the first one every record has, else the first any record has
    step_key = next((k for k in candidates if keys[k] == len(entries)), None)
    if step_key is None and candidates:
        step_key = candidates[0]
    if step_key is None:
        ordinal, note = _ordinal_steps(path, len(entries), logging_steps)
        steps: list[object] = list(ordinal)
        notes.append(note)
    else:
        others = other_global_steps(keys, step_key)
        stepped = []
        for entry in entries:
            if step_key in entry:
                stepped.append((entry[step_key], entry))
                continue
            other = next((k for k in others if entry.get(k) is not None), None)
            if other is not None:
                stepped.append((entry[other], entry))
        borrowed = sum(step_key not in e for _s, e in stepped)
        if borrowed:
            notes.append(
                f"{counted(borrowed, 'record')} without {step_key!r} "
                f"{'takes its' if borrowed == 1 else 'take their'} step from "
                f"{' or '.join(repr(k) for k in others)}"
            )
        missing = len(entries) - len(stepped)
        if missing:
            notes.append(f"{counted(missing, 'record')} without {step_key!r} skipped")
        steps = [step for step, _e in stepped]
        entries = [e for _s, e in stepped]
    type_key = _type_key(entries)
    # the other step keys stay metrics, as in a CSV ('global_step' beside the 'step' used): they
    # were dropped without a word, and with them the optimizer steps of a loop whose 'step'
    # counts rollouts
    not_metrics = {step_key} - {None} | ({type_key} if type_key else set())
    renamed = []
    for entry in entries:
        prefix = _prefix(str(entry[type_key])) if type_key and type_key in entry else ""
        rest = {k: v for k, v in entry.items() if k not in not_metrics}
        renamed.append({prefix + k: v for k, v in rest.items()})
    step_iter = iter(steps)
    records = records_from_dicts(renamed, lambda _e: next(step_iter))
    return RawRun(
        path=path,
        fmt="jsonl",
        records=records,
        name=name,
        notes=notes,
        numbered_by_order=step_key is None,
    )


def _is_run_label(value: object) -> bool:
    """A run name (text) or a whole-number run id (``"run_id": 17``; a CSV reads both as text)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _names_runs(entries: list[dict], key: str) -> bool:
    """Whether ``key`` can be the run column of a JSONL file: a run name or id on some records
    and no other kind of value on any. (Integer ids were not taken for run labels: two runs
    of one file merged into one, the second replacing the first at every step.)"""
    values = [e.get(key) for e in entries]
    return all(v is None or _is_run_label(v) for v in values) and any(
        _is_run_label(v) and str(v).strip() for v in values
    )


def load_jsonl(path: str | Path, *, logging_steps: int | None = None) -> list[RawRun]:
    """Read the run(s) of a JSONL file of per-step metric objects (records without a step
    key are numbered by order, ``logging_steps`` apart)."""
    path = Path(path)
    entries, notes = _read_json_lines(path)
    run_key = next((k for k in RUN_KEYS if _names_runs(entries, k)), None)
    all_keys = {k for e in entries for k in e}
    keys = {run_key, _find(all_keys, ID_KEYS)} - {None}
    model_key = None
    if run_key is None:  # a comparison of models, one step axis each (as in a CSV)
        step_key = next((k for k in STEP_KEYS if k in all_keys), None)
        model_key = hyperparameter_key("model", {str(k): None for k in all_keys})
        if model_key is not None and step_key is not None:
            frame = pd.DataFrame(
                [
                    {model_key: m if isinstance(m := e.get(model_key), str) else None}
                    | {step_key: e.get(step_key)}
                    for e in entries
                ]
            )
            model_key = _model_runs_column(frame, step_key)
        else:
            model_key = None
        if model_key is not None:
            run_key = model_key
            keys = {model_key}
            notes = [
                *notes,
                f"no run key; the models of {model_key!r} read as one run each",
            ]
    if run_key is not None:
        frame = pd.DataFrame([{k: e.get(k) for k in keys} for e in entries])
        groups, file_notes, unassigned = _run_groups(frame, run_key, path, fmt="jsonl")
        notes = notes + file_notes
        # the model key stays in each run's records, where it is the run's model
        keys = keys - {model_key}
        if len(groups) > 1:
            runs = [unassigned] if unassigned is not None else []
            for name, sub in groups:
                kept = [{k: v for k, v in entries[i].items() if k not in keys} for i in sub.index]
                runs.append(_entries_to_run(kept, path, name, notes, logging_steps))
            return runs
        entries = [{k: v for k, v in e.items() if k not in keys} for e in entries]
        # the file's one run keeps the name it logs, as a CSV's does (the name was dropped and
        # the run named after its file)
        return [_entries_to_run(entries, path, groups[0][0], notes, logging_steps)]
    return [_entries_to_run(entries, path, None, notes, logging_steps)]
