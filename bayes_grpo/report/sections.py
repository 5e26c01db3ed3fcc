"""Report sections: small builders that turn results into titled blocks of text, tables and images.

Every section exists in every report; a section whose inputs are absent says why instead of
vanishing (``available=False`` with ``absent_reason``).
"""

from __future__ import annotations

import datetime
import numbers
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo.checks.base import CheckResult, counted, figure_to_base64, legend_below, plot_text
from bayes_grpo.runset.schema import group_size_text, model_text, readable_group_size


@dataclass
class Block:
    """One piece of a section: ``kind`` in {"text", "warning", "heading", "table", "image", "check"}."""

    kind: str
    content: Any
    caption: str = ""


@dataclass
class Section:
    key: str
    title: str
    intro: str = ""
    blocks: list[Block] = field(default_factory=list)
    available: bool = True
    absent_reason: str = ""
    #: The overview's notes on its run set as data (:func:`run_set_notes`), which its warnings and
    #: its table of notes on each run show; ``report --json``'s ``runset_notes``. Empty elsewhere.
    runset_notes: dict[str, Any] = field(default_factory=dict)

    def text(self, content: str) -> Section:
        self.blocks.append(Block("text", content))
        return self

    def heading(self, content: str) -> Section:
        self.blocks.append(Block("heading", content))
        return self

    def table(
        self, frame: pd.DataFrame, *, index: bool = True, float_format: str = "{:.4g}", classes: str = "data"
    ) -> Section:
        self.blocks.append(Block("table", table_html(frame, index=index, float_format=float_format, classes=classes)))
        return self

    def figure(self, fig: Any, caption: str) -> Section:
        self.blocks.append(Block("image", *figure_png(fig, caption)))
        return self

    def check(self, result: CheckResult) -> Section:
        self.blocks.append(Block("check", render_check(result)))
        return self


def absent(key: str, title: str, reason: str, intro: str = "") -> Section:
    """A section whose inputs are missing: it stays in the report and says why."""
    return Section(key=key, title=title, intro=intro, available=False, absent_reason=reason)


#: Index levels that hold a group size G: a row label of unknown G reads "?" (:func:`table_html`).
GROUP_SIZE_LEVELS: tuple[str, ...] = ("G", "group_size")


def table_html(frame: pd.DataFrame, *, index: bool = True, float_format: str = "{:.4g}", classes: str = "data") -> str:
    """HTML table with the report's CSS class (values escaped by pandas); ``classes="data notes"``:
    a table of text, its cells aligned left (the template's ``table.data.notes``)."""

    def fmt(v: Any) -> str:
        if v is None or v is pd.NA or v is pd.NaT:
            return ""
        if isinstance(v, float | np.floating):
            if np.isnan(v):
                return ""
            if float(v).is_integer() and abs(v) < 1e6:
                # a whole number in a float column (a step, a count, beside a NaN): 12000, not
                # "{:.4g}"'s 1.2e+04
                return str(int(v))
            return float_format.format(v)
        return str(v)

    # None (a value that does not apply, e.g. a diagnostic without an onset step) is printed
    # by pandas as "None" whatever na_rep says: blank it like NaN (and pd.NA, a nullable integer
    # column's missing value, written "<NA>")
    frame = frame.map(lambda v: "" if v is None or v is pd.NA else v)
    # and row labels are printed as they are ("NaN" for the G of runs of unknown G): the same
    # rule for them (formatters apply to the columns only)
    # a group's G (a level named G or group_size) as its figures, summaries and the fit's tables
    # name it: "?" when unknown (the PPC tables' rows of unknown G were blank beside "G=?")
    if len(frame.index):
        label = lambda v: fmt(v) if v is None or isinstance(v, float | np.floating) else v  # noqa: E731
        g_label = lambda v: group_size_text(v) if isinstance(v, float | np.floating | int | np.integer) else label(v)  # noqa: E731
        labellers = [g_label if name in GROUP_SIZE_LEVELS else label for name in frame.index.names]
        if isinstance(frame.index, pd.MultiIndex):
            frame.index = pd.MultiIndex.from_tuples(
                [tuple(f(v) for f, v in zip(labellers, t)) for t in frame.index], names=frame.index.names
            )
        else:
            frame.index = pd.Index([labellers[0](v) for v in frame.index], name=frame.index.name)
    # every row names each of its index levels (sparsify=False): drawn once per model (rowspan),
    # the G of the rows below was their first cell, styled as a model name (template's th:first-child)
    html = frame.to_html(classes=classes, index=index, border=0, formatters={c: fmt for c in frame.columns}, na_rep="", sparsify=False)
    if "notes" in classes.split():  # a table of text: every cell is aligned left already
        return html
    return _text_columns_marked(html, [_is_text_column(frame[c]) for c in frame.columns], index_levels=frame.index.nlevels if index else 0, header=not isinstance(frame.columns, pd.MultiIndex))


def _is_text_column(values: pd.Series) -> bool:
    """Whether a column of a report table holds text (words, a sentence, True / False): none of
    its values is a number. A number column with a word in some rows (an R^2 reading "no
    trend", a G "?") stays a number column; an empty one too."""
    shown = [v for v in values.tolist() if not (v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and np.isnan(v)) or v == "")]
    return bool(shown) and not any(_is_number(v) for v in shown)


def _is_number(value: Any) -> bool:
    """A number, or a number written as text (a group size "16" beside "?"); a time or a
    duration counts as one (a quantity, aligned as numbers are)."""
    if isinstance(value, bool | np.bool_):
        return False
    if isinstance(value, numbers.Real | datetime.date | datetime.timedelta | np.datetime64 | np.timedelta64):
        return True
    try:
        float(str(value))
    except ValueError:
        return False
    return True


def _text_columns_marked(html: str, text: list[bool], *, index_levels: int, header: bool) -> str:
    """``html`` (pandas' ``to_html`` of a table) with each cell of a text column, and its
    heading (``header``: one row of column names), of class ``text``: the template aligns those
    left, numbers right (the instability signals' "statistic" and "note" sentences were
    right-aligned as numbers)."""
    if not any(text):
        return html

    def mark(row: str, tag: str, skip: int) -> str:
        # the pieces after each opening tag; the first ``skip`` cells are the row's index levels
        cells = row.split(f"<{tag}>")
        out = [cells[0]]
        for k, cell in enumerate(cells[1:]):
            column = k - skip
            out.append((f'<{tag} class="text">' if 0 <= column < len(text) and text[column] else f"<{tag}>") + cell)
        return "".join(out)

    head, body = html.split("<tbody>", 1)
    if header:
        first, rest = head.split("</tr>", 1)
        head = mark(first, "th", index_levels) + "</tr>" + rest
    rows = body.split("</tr>")
    body = "</tr>".join(mark(row, "td", 0) for row in rows)
    return head + "<tbody>" + body


def figure_png(fig: Any, caption: str) -> tuple[str, str]:
    """``(base64 PNG, caption)`` of a figure, closed; ``("", caption saying why)`` when it cannot
    be drawn (mathtext a ``$`` in a label started, an image too large): one figure that fails
    to draw is named in its place, and with a warning, instead of stopping the whole report."""
    import matplotlib.pyplot as plt

    try:
        return figure_to_base64(fig), caption
    except Exception as exc:  # noqa: BLE001 - whatever savefig raises, the report goes on
        why = " ".join(str(exc).split())  # mathtext's message is several lines
        why = why if len(why) <= 160 else why[:157] + "..."
        note = f"Figure not drawn ({type(exc).__name__}{': ' + why if why else ''}): {caption}"
        warnings.warn(f"report: {note}", stacklevel=2)
        return "", note
    finally:
        plt.close(fig)


@dataclass
class RenderedCheck:
    name: str
    title: str
    badge: str
    badge_class: str
    summary: str
    table_html: str
    images: list[tuple[str, str]]


def render_check(result: CheckResult) -> RenderedCheck:
    """Turn a CheckResult into what the template shows (figures rendered to PNG and closed)."""
    if result.passed is None:
        badge, cls = "not assessable", "na"
    elif result.passed:
        badge, cls = "pass", "pass"
    else:
        badge, cls = "flagged", "fail"
    badge = str(result.values.get("badge", badge))
    title = str(result.values.get("title", result.name.replace("_", " ")))
    images = []  # (caption, PNG); a figure not drawn: ("Figure not drawn (why): caption", "")
    for caption, fig in result.figures.items():
        # a caption that only repeats the check's name ("phase diagram") says nothing of which
        # figure it is (two LLMs' diagrams were both captioned "phase diagram"): the title does
        if caption in (result.name.replace("_", " "), title):
            # ... and what is drawn: the caption only repeated the title, and nothing said what
            # the phase diagram's white contours, red dashed line and crosses were
            caption = title + figure_legend(result)
        png, shown = figure_png(fig, caption)
        images.append((shown, png))
    table = table_html(result.table) if result.table is not None and len(result.table) else ""
    return RenderedCheck(result.name, title, badge, cls, result.summary, table, images)


#: What each diagnostic mode's figure draws (``diagnostics/*._figure``), said in its caption
DIAGNOSTIC_FIGURES: dict[str, str] = {
    "reward_hacking": (
        "the training reward (blue) and the evaluation reward (orange), each as a fraction of its "
        "own range: logged values (dots) and smoothed (lines); the late window shaded grey"
    ),
    "advantage_degeneracy": (
        "the share of groups whose G rewards all tie (zero spread, no advantage) at each step "
        "(dots) and smoothed (line), with the binomial expectation p^G + (1-p)^G (green dashed) "
        "where drawn, the flag level (red dotted) and the reward (grey, right axis) where logged"
    ),
    "policy_concentration": (
        "the entropy metric the left axis names (orange) and the reward (blue, right axis): logged "
        "values (dots) and smoothed (lines); dashed: the reward level the legend names, where drawn"
    ),
    "instability": (
        "top: the reward (dots) and the fitted damped oscillator (red) where one was fitted; "
        "bottom: the side quantities whose growth or clipping was a signal, relative to the level "
        "their legend names (symmetric log scale)"
    ),
}


def figure_legend(result: CheckResult) -> str:
    """``": what the figure draws."`` for a check whose figure is captioned by its title alone
    (the phase diagram, a diagnostic's run), ``"."`` for any other: read from the figure's maker,
    not from the figure."""
    values = result.values
    if result.name == "phase_diagram":
        n_lrs, n_lags = len(values.get("learning_rates", ())), len(values.get("k_refs", ()))
        n_obs = values.get("n_observed")
        text = (
            ": the posterior probability, over learning rate and K_ref, that the setting is unstable "
            "(exact criterion, left) and that it oscillates (0 < zeta < 1, right)"
        )
        if n_lrs > 1 and n_lags > 1:
            text += (
                "; white contours at probability 0.1, 0.5 and 0.9; red dashed line (left): where "
                "the closed-form criterion gives P(unstable) = 0.5"
            )
        if n_obs is None or n_obs > 0:
            text += "; orange crosses: the settings (learning rate, K_ref) of the observed runs"
            text += "" if n_obs is None else f" ({n_obs})"
        return text + "."
    if (what := DIAGNOSTIC_FIGURES.get(result.name)) is not None:
        onset = values.get("onset_step")
        return f": {what}" + (f"; red vertical line: the onset step {onset:g}." if onset is not None else ".")
    return "."


def checks_section(key: str, title: str, results: Sequence[CheckResult] | None, *, intro: str, missing: str) -> Section:
    """A section made of check results, or an absent section naming what is missing."""
    if not results:
        return absent(key, title, missing, intro)
    section = Section(key=key, title=title, intro=intro)
    for result in results:
        section.check(result)
    return section


def overview_section(
    runset: Any | None,
    *,
    unfitted: dict[str, str] | None = None,
    fitted: bool = True,
    notes: Sequence[str] = (),
) -> Section:
    """Data overview: one row per run and the reward curves per model and group size.

    ``unfitted`` (``{run id: why}``, from ``diagnostics._posterior.unfitted_runs``) names the runs
    of ``runset`` the fit did not see (``report --runs`` with another run set): the intro then says
    that the overview is not of the fitted run set, and names them. ``fitted=False``: the report
    has no fit (``write_report(runset=...)`` alone), and the intro does not speak of one.
    ``notes``: the settings the fit took from its defaults for runs that log none
    (``build.fit_defaults_notes``), said under the counts: the table gives the logged ones.
    The notes of the ingest that read ``runset`` (:func:`run_set_ingest_notes`: G or model
    unknown, archives beside the logs not read, names that read like a G) and the sources it
    did not ingest (:func:`run_set_rejections`: a run too short, a log compressed by a program
    not read here) are warnings under the counts: ``bayes-grpo ingest`` printed them, and the
    report, read later and passed on, said none of them. So are its warnings on each run
    (:func:`run_notes_table`, below the table of runs: a reward curve read from an evaluation
    metric, a learning-rate schedule, a metric renamed, ...), the runs whose reward is an
    evaluation metric first among the warnings (:func:`evaluation_reward_note`)."""
    key, title = "overview", "Data overview"
    # the table is in the run set's order, not grouped (it said "grouped by model and group size
    # G"); the curves' figure is the one drawn a panel per model and G
    layout = "one row per run in the run set's order, and their reward curves a panel per model and group size G."
    intro = f"All runs in the {'fitted ' if fitted else ''}run set: {layout}"
    if unfitted:
        intro = (
            "All runs in the run set given for this report (not the fitted run set: the fit per run "
            f"below shows the fitted runs): {layout}"
        )
    if runset is None:
        return absent(key, title, "no run set was given.", intro)
    from bayes_grpo.runset.core import run_coords, run_frame

    rows = []
    for run_id in [str(r) for r in runset["run"].values]:
        frame = run_frame(runset, run_id)
        coords = run_coords(runset, run_id)
        reward = frame["reward"].to_numpy()
        rows.append(
            {
                "run": run_id,
                "model": coords["model"],
                "G": coords["group_size"],
                # the rewards logged, not the steps: a run logged every 3rd step read "steps 134"
                # beside "first step 1, last step 400"
                "rewards logged": int(len(frame)),
                "first step": int(frame.index.min()) if len(frame) else np.nan,
                "last step": int(frame.index.max()) if len(frame) else np.nan,
                "reward first": float(reward[0]) if len(reward) else np.nan,
                "reward last": float(reward[-1]) if len(reward) else np.nan,
                "lr": coords["learning_rate"],
                "momentum": coords["momentum"],
                # heavy-ball 0.9 and Adam's beta1 0.9 are different steps (eta_eff = eta vs
                # eta (1 - mu)): an SGD run beside Adam ones read as the same momentum
                "convention": coords["momentum_convention"],
                "k_ref": coords["k_ref"],
                "beta": coords["beta"],
                "seed": coords["seed"],
            }
        )
    summary = pd.DataFrame(rows).set_index("run")
    section = Section(key=key, title=title, intro=intro)
    named = summary["model"].astype(str)
    n_unnamed = int((named == "").sum())  # "" is no model name, not a model of its own
    models = counted(named[named != ""].nunique(), "model") + (
        f" ({counted(n_unnamed, 'run')} of unknown model)" if n_unnamed else ""
    )
    runs = counted(len(summary), "run")  # "1 runs" of a one-run report
    # runs of unknown G counted, as runs of unknown model are: their G was left out of the list
    # unsaid, and a run set of unknown G only read "group sizes []"
    known = sorted({readable_group_size(g) for g in summary["G"].dropna()})
    n_unknown_g = int(summary["G"].isna().sum())
    if not known:
        sizes = "group size unknown" + ("" if len(summary) == 1 else " for every run")
    else:
        # as text ("group sizes 4 and 16"), not a Python list ("group sizes [4, 16]")
        sizes = (f"group size {known[0]}" if len(known) == 1 else f"group sizes {in_words(known)}") + (
            f" ({counted(n_unknown_g, 'run')} of unknown G)" if n_unknown_g else ""
        )
    section.text(f"{runs}, {models}, {sizes}.")
    section.runset_notes = run_set_notes(runset)
    if (eval_note := section.runset_notes["evaluation_reward"]) is not None:
        section.blocks.append(Block("warning", eval_note))
    section.blocks += [Block("warning", f"Note of the ingest: {note}") for note in section.runset_notes["ingest"]]
    section.blocks += [Block("warning", f"Not ingested: {why}") for why in section.runset_notes["rejected"]]
    for note in notes:
        section.text(f"Note: the table gives the settings as logged; {note}.")
    if unfitted:
        section.text(
            f"Runs the posterior was not fitted to (their posterior-based diagnostics are the fit's "
            f"prediction at their hyperparameters): {'; '.join(f'{r}: {why}' for r, why in unfitted.items())}."
        )
    section.table(summary)
    if (run_notes := run_notes_table(runset)) is not None:
        n_runs = run_notes["run"].nunique()
        section.heading(f"Notes on each run ({counted(len(run_notes), 'note')} on {counted(n_runs, 'run')})")
        section.text(
            ("What the ingest said of each run" if _ingested(runset) else "What building the run set said of each run")
            + (" (its log named once)" if "log" in run_notes else "")
            + ": read a run's fit and diagnostics with them."
        )
        # a run and its log said on the run's first row, blank on the rows of its other notes
        later = run_notes["run"].duplicated()
        shown = run_notes.astype(object)
        shown.loc[later, [c for c in ("run", "log") if c in shown]] = ""
        section.table(shown, index=False, classes="data notes")
    section.figure(_curves_figure(runset, summary), "Training reward per run, one panel per model and G.")
    return section


def in_words(items: Sequence[Any]) -> str:
    """``"4"``, ``"4 and 16"``, ``"4, 4.5 and 16"``: a few values as a sentence lists them."""
    words = [str(item) for item in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def run_set_notes(runset: Any | None) -> dict[str, Any]:
    """What the overview warns of ``runset``, as data (``report --json``'s ``runset_notes``):
    ``evaluation_reward`` (:func:`evaluation_reward_note`, None when no run's reward is an
    evaluation metric), ``ingest`` (:func:`run_set_ingest_notes`), ``rejected`` (the sources not
    ingested, each text naming its source: :func:`run_set_rejections`) and ``runs``, ``{run id:
    {"log": the run's log or None, "notes": [...]}}`` for the runs with notes, as the table of
    notes on each run gives them (:func:`run_notes_table`: a note starting with the run's log
    without it). The overview shows these (it renders its warnings from this dict); nothing but
    the HTML showed them, and ``report --json`` said nothing of a run whose reward was an
    evaluation metric or of a log not ingested. Empty for no run set."""
    if runset is None:
        return {"evaluation_reward": None, "ingest": [], "rejected": [], "runs": {}}
    runs: dict[str, dict[str, Any]] = {}
    table = run_notes_table(runset)
    for row in [] if table is None else table.to_dict("records"):
        entry = runs.setdefault(str(row["run"]), {"log": row.get("log") or None, "notes": []})
        entry["notes"].append(str(row["note"]))
    return {
        "evaluation_reward": evaluation_reward_note(runset),
        "ingest": run_set_ingest_notes(runset),
        "rejected": run_set_rejections(runset),
        "runs": runs,
    }


def _ingested(runset: Any) -> bool:
    from bayes_grpo.runset.ingest import INGEST_ATTR, NOTES_ATTR

    return INGEST_ATTR in runset.attrs or NOTES_ATTR in runset.attrs


def run_notes_table(runset: Any) -> pd.DataFrame | None:
    """The warnings the run set keeps on each of its runs (:func:`bayes_grpo.runset.core.runset_warnings`:
    the ingest's, e.g. "no training reward in the log; using the evaluation metric ...", and
    values kept as NaN), one row per warning, in the order of the runs and of the warnings; None
    when no run of ``runset`` has one (a saved fit of a subset keeps the warnings of every run
    ingested: only those of its runs are shown).

    Columns ``run``, ``log`` and ``note``: ``log`` is the run's log (its ``source`` after the
    format, ``path`` or ``path#name``) for every run read from a log, also when none of its
    warnings names it (a run whose only note was "thinned to every 3rd logged point" read as a run
    without a log, beside runs of the same ingest with one); the ingest starts many warnings with
    the log, which is taken off them; a warning that does not start with it is shown whole.
    A simulator's source (``simulate:sde``) is no log. ``log`` is left out when no run's log is
    known (a run set built in Python or simulated)."""
    from bayes_grpo.runset.core import runset_warnings
    from bayes_grpo.runset.loaders import FORMATS as LOG_FORMATS

    warned = runset_warnings(runset)
    rows = []
    for run_id in (str(r) for r in runset["run"].values):
        notes = [str(n) for n in warned.get(run_id, [])]
        if not notes:
            continue
        source = str(runset["source"].sel(run=run_id).item()) if "source" in runset.coords else ""
        fmt, _, log = source.partition(":")  # "csv:/path/x.csv" -> "/path/x.csv"
        prefix = f"{log}: "
        # a log of a format the ingest reads, or one its notes name; not a simulator's source
        # ("simulate:sde", "synthetic:...")
        if not (log and (fmt in LOG_FORMATS or any(n.startswith(prefix) for n in notes))):
            log = ""
        rows += [{"run": run_id, "log": log, "note": n.removeprefix(prefix) if log else n} for n in notes]
    if not rows:
        return None
    table = pd.DataFrame(rows)
    return table if table["log"].astype(bool).any() else table.drop(columns="log")


def evaluation_reward_note(runset: Any) -> str | None:
    """The runs of ``runset`` whose reward curve is an evaluation metric, their log having no
    training reward (:func:`bayes_grpo.diagnostics.core.evaluation_reward_sources`), named in one
    warning: the note on each of them (:func:`run_notes_table`) sits among the others below the
    table of runs, while it changes what every section says of their reward; None when there
    are none."""
    from bayes_grpo.diagnostics.core import evaluation_reward_sources

    runs = {str(r) for r in runset["run"].values}
    sources = {run: metric for run, metric in evaluation_reward_sources(runset).items() if run in runs}
    if not sources:
        return None
    by_metric: dict[str, list[str]] = {}
    for run_id in (str(r) for r in runset["run"].values):  # in the order of the runs
        if run_id in sources:
            by_metric.setdefault(sources[run_id], []).append(run_id)
    named = "; ".join(f"{metric!r} for {', '.join(ids)}" for metric, ids in by_metric.items())
    one = len(sources) == 1
    return (
        f"Reward from an evaluation metric: {'the log' if one else 'the logs'} of {counted(len(sources), 'run')} "
        f"{'has' if one else 'have'} no training reward, and the ingest took an evaluation metric as "
        f"{'its' if one else 'their'} reward curve ({named}): what this report says of "
        f"{'its' if one else 'their'} reward (the fit, plateau, diagnostics) is said of that held-out "
        "metric, not of the reward the policy is trained on."
    )


def run_set_ingest_notes(runset: Any) -> list[str]:
    """The notes of the ingest that read ``runset`` (:func:`bayes_grpo.runset.ingest.ingest_notes`:
    those kept in its attribute ``NOTES_ATTR`` and the settings it could not find); [] for a run
    set no ingest read (simulated, or built by ``make_runset``: no log could have given it
    anything, and "no log ... gave them" would be no news)."""
    from bayes_grpo.runset.ingest import INGEST_ATTR, NOTES_ATTR, ingest_notes

    if INGEST_ATTR not in runset.attrs and NOTES_ATTR not in runset.attrs:
        return []
    return ingest_notes(runset)


def run_set_rejections(runset: Any) -> list[str]:
    """The sources the ingest that read ``runset`` did not ingest, each with its reason, named
    as ``load_runs`` warns them (:func:`bayes_grpo.runset.ingest.rejection_texts`)."""
    from bayes_grpo.runset.ingest import rejected_runs, rejection_texts

    return rejection_texts(rejected_runs(runset))


#: Characters of a run id in a figure's legend or axis labels (the tables carry it whole).
LABEL_WIDTH: int = 40


def short_labels(labels: Sequence[str], width: int = LABEL_WIDTH) -> list[str]:
    """Labels cut to ``width`` characters in the middle ("start...end"), still distinct, and
    drawn as written (``$`` escaped: :func:`~bayes_grpo.checks.base.plot_text`).

    A run id of hundreds of characters in a legend or a forest plot's axis squeezes the panels
    to nothing; its start and end (a sweep's prefix, a seed suffix) are what tell runs apart."""
    out: list[str] = []
    for i, label in enumerate(labels):
        if len(label) > width:
            head = (width - 3) // 2
            label = f"{label[:head]}...{label[len(label) - (width - 3 - head):]}"
        while label in out:  # two cut ids that read alike stay two entries
            label = f"{label} #{i}"
        out.append(label)
    return [plot_text(label) for label in out]


#: Most runs of one panel of the overview named one by one in its legend.
MAX_RUN_LEGEND: int = 6

#: The settings a panel of many runs is coloured by, in this order: the first that varies.
_COLOUR_SETTINGS: tuple[tuple[str, str], ...] = (("k_ref", "K_ref"), ("lr", "lr"), ("momentum", "momentum"), ("seed", "seed"))


def _varying_setting(rows: pd.DataFrame) -> tuple[str, pd.Series] | None:
    """The setting that tells a panel's many runs apart: the label and the values (numbers,
    NaN where unknown) of the first column of ``_COLOUR_SETTINGS`` with 2 to 8 known values
    among ``rows``; None if none does."""
    for column, name in _COLOUR_SETTINGS:
        if column in rows:
            values = pd.to_numeric(rows[column], errors="coerce")
            if 2 <= values.nunique() <= 8:
                return name, values
    return None


def _curves_figure(runset: Any, summary: pd.DataFrame):
    import matplotlib.pyplot as plt

    groups = list(summary.groupby(["model", "G"], dropna=False).groups.items())
    n = max(len(groups), 1)
    ncols = min(3, n)
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 2.8 * nrows), squeeze=False)
    for ax, ((model, g), run_ids) in zip(axes.flat, groups):
        setting = _varying_setting(summary.loc[list(run_ids)]) if len(run_ids) > MAX_RUN_LEGEND else None
        if setting is not None:  # many runs: one colour per value of the setting they differ in
            name, numeric = setting
            values = sorted(numeric.dropna().unique())
            colours = dict(zip(values, plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(values)))))
        labelled: set[str] = set()
        for run_id, label in zip(run_ids, short_labels([str(r) for r in run_ids])):
            y = runset["reward"].sel(run=run_id).values
            ok = np.isfinite(y)  # runs logged every k steps are NaN in between
            style: dict[str, Any] = {"lw": 0.8, "alpha": 0.8}
            if setting is not None:
                value = float(numeric[run_id])
                known = np.isfinite(value)
                style["color"] = colours[value] if known else "grey"
                entry = f"{name} = {value:g}" if known else f"{name} unknown"
                style["label"] = "_nolegend_" if entry in labelled else entry  # one entry per value
                labelled.add(entry)
            elif len(run_ids) <= MAX_RUN_LEGEND:
                style["label"] = label
            ax.plot(runset["step"].values[ok], y[ok], **style)
        ax.set_title(short_labels([f"{model_text(model)}  G={group_size_text(g)}"], 2 * LABEL_WIDTH)[0], fontsize=9)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("reward")
        if len(run_ids) <= MAX_RUN_LEGEND or setting is not None:
            # under the panel: inside it, matplotlib's "best" spot still covered curves (a
            # "20 runs" lr legend over the rewards), and beside it the legend narrowed the panel
            legend_below(ax, fontsize=6, title=f"{len(run_ids)} runs" if setting is not None else None, title_fontsize=6)
        else:  # too many runs to name, and no setting tells them apart: the table names them
            ax.text(0.02, 0.97, f"{len(run_ids)} runs (ids in the table)", transform=ax.transAxes, fontsize=6, va="top")
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def iter_results(obj: Any) -> Iterable[CheckResult]:
    """Flatten a CheckResult, a list of them, or a dict of them.

    A stage's own Python result is taken too: a prediction or forecast (the dataset of
    ``predict_run`` / ``forecast_run``) through :func:`bayes_grpo.predict.result.prediction_result`,
    as ``report --prediction`` does, and ``compare_laws``' result through its ``to_check_result``.
    Anything else is a ``TypeError`` naming its type (a dataset was iterated as its variable
    names, and each name as its characters, without end).
    """
    if obj is None:
        return []
    if isinstance(obj, CheckResult):
        return [obj]
    if isinstance(obj, xr.Dataset):
        from bayes_grpo.predict.result import prediction_result

        return [prediction_result(obj)]
    if hasattr(obj, "to_check_result"):
        return [obj.to_check_result()]
    if isinstance(obj, str | bytes | pd.DataFrame | pd.Series) or not isinstance(obj, Iterable):
        raise TypeError(
            f"a report section takes check results (a CheckResult, or a list or dict of them), "
            f"a prediction dataset or a law comparison; got {type(obj).__module__}.{type(obj).__qualname__}"
        )
    if isinstance(obj, dict):
        out: list[CheckResult] = []
        for v in obj.values():
            out.extend(iter_results(v))
        return out
    out = []
    for v in obj:
        out.extend(iter_results(v))
    return out
