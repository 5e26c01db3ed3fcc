"""The check protocol and its result type (in the manner of CausalPy's checks).

A check answers one question about a run set or a posterior ("is the mean trajectory
invariant in G?", "is this setting stable?", "is this run reward-hacking?") and returns a
:class:`CheckResult`: a verdict (``passed`` True/False, or None when not assessable), a
sentence, a table, figures, and JSON-ready numbers. The CLI prints results (``--json``
uses :meth:`CheckResult.to_dict`), and the HTML report renders them.
"""

from __future__ import annotations

import base64
import datetime
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd


@dataclass
class CheckResult:
    """Outcome of one check.

    Attributes
    ----------
    name
        Short identifier, e.g. ``"g_invariance"``.
    passed
        True / False, or None when the inputs do not allow a verdict ("not assessable").
    summary
        One or two sentences in words, for people.
    table
        Optional table of the numbers behind the verdict.
    figures
        ``{title: matplotlib Figure}``.
    values
        JSON-ready numbers and strings (the ``--json`` output).
    """

    name: str
    passed: bool | None
    summary: str
    table: pd.DataFrame | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def assessable(self) -> bool:
        return self.passed is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (figures omitted; NaN becomes None)."""
        out: dict[str, Any] = {
            "name": self.name,
            # a check's own verdict may be numpy's (``table["ok"].all()``): json cannot write np.bool_
            "passed": None if self.passed is None else bool(self.passed),
            "summary": self.summary,
            "values": _jsonable(self.values),
        }
        if self.table is not None:
            out["table"] = _jsonable(table_records(self.table))
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def figures_as_png(self, dpi: int = 110) -> dict[str, str]:
        """``{title: base64 PNG}`` of the figures, for embedding in HTML."""
        return {title: figure_to_base64(fig, dpi=dpi) for title, fig in self.figures.items()}


def verdict_percent(value: float, threshold: float) -> str:
    """``value`` as a percentage with as few decimals (0 to 4) as keep it on its side of
    ``threshold`` (``value >= threshold`` passes): a coverage of 0.7496 against 0.75 is
    "74.96%", where ``"{:.0%}"`` wrote "75% ... (required >= 75%)" beside a failed check."""
    passes = value >= threshold
    for digits in range(5):
        text = f"{value:.{digits}%}"
        if (float(text[:-1]) / 100.0 >= threshold) == passes:
            return text
    # within 5e-7 of the threshold below it: cut, not rounded, to stay below
    return f"{np.floor(value * 1e6) / 1e4:.4f}%"


def fraction_percent(value: float, *, threshold: float | None = None) -> str:
    """``value`` (a fraction, of either sign) as a percentage of two significant digits, no
    decimals from 10% up: an entropy gain of 0.5152% is "-0.52%", where ``"{:.0%}"`` wrote
    "-1%", twice its size (and 0.4% would have been "-0%"). With a ``threshold`` (``value >=
    threshold`` on one side), as many more decimals (up to 4 more) as keep it on its side:
    0.8996 against 0.9 is "89.96%", not "90%"."""
    pct = 100.0 * float(value)
    if not np.isfinite(pct):
        return f"{pct}%"
    if pct == 0.0:
        return "0%"
    digits = max(0, 1 - int(np.floor(np.log10(abs(pct)))))
    if threshold is not None:
        side = value >= threshold
        for more in range(digits, digits + 5):
            digits = more
            if (round(pct, more) / 100.0 >= threshold) == side:
                break
    return f"{pct:.{digits}f}%"


def value_median(values, axis: int | None = None) -> np.ndarray | float:
    """The median as one of ``values``: the smallest at or below which at least half of them
    lie (``inverted_cdf``). For steps and lags, where the mean of the two middle values
    (``np.median`` of an even count) is none: a milestone read 37.5 between grid steps, and a
    critical K_ref 8 where half of the draws said 7 and half 9. Infinities count as values (a
    draw that never gets there); NaN is not expected."""
    return np.quantile(np.asarray(values, dtype=float), 0.5, axis=axis, method="inverted_cdf")


def share_percent(count: int, total: int) -> str:
    """``count`` of ``total`` as a percentage with as few decimals (0 to 5) as keep a share that
    is neither none nor all off 0% and 100% and within a tenth of itself (of what is left to
    100% near 100%): 3 of 1000 is "0.3%", where ``"{:.0%}"`` wrote "0%" beside draws that were
    left out, and 1 of 2000 "0.05%", where one decimal wrote "0.1%", twice the share."""
    share = 100.0 * count / total
    if share in (0.0, 100.0):
        return f"{share:.0f}%"
    side = min(share, 100.0 - share)
    for d in range(6):
        shown = float(f"{share:.{d}f}")
        if 0.0 < shown < 100.0 and abs(shown - share) <= 0.1 * side:
            return f"{share:.{d}f}%"
    return f"{share:g}%"


def counted(count: float, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, singular for one: ``counted(1, "step")`` is "1 step", ``counted(3,
    "step")`` "3 steps" (``plural``: where adding ``s`` is wrong; the messages said "runs of 1
    steps are too short", "wrote 1 run(s) x 1 steps" and "conservative by 1 steps"). A whole
    count is written as an int (1000000, not :g's 1e+06), any other as :g."""
    shown = int(count) if float(count).is_integer() else f"{float(count):g}"
    return f"{shown} {noun if count == 1 else plural or noun + 's'}"


def refuse_repeats(values: Sequence[Any], text: str | None = None, flag: str | None = None) -> None:
    """Refuses a list of settings (``values``, read from ``text``; its repr without one) that
    names a value more than once; ``flag`` names the option or argument in the error. Two equal
    settings are one setting: the runs they made got the same ids, which the run set then refused
    with a long list of duplicate ids, and ``compare_laws(laws=["logistic", "logistic"])`` dropped
    the repeat quietly. The one rule of the CLI's lists (``--laws``, ``--lr``) and of the Python
    functions that take them."""
    values = list(values)
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        where = f"{flag}: " if flag else ""
        shown = repr(text) if text is not None else repr(values)
        raise ValueError(f"{where}{shown} lists {', '.join(map(str, repeated))} more than once")


def table_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as dictionaries, its index as columns; a name that two columns share
    (or an index level and a column) is kept for the first and given ``.1``, ``.2``... for
    the others, as ``pandas.read_csv`` does. ``to_dict(orient="records")`` kept only the last
    of two columns of one name (a warning aside), and ``reset_index`` raised when an index
    level was named like a column."""
    flat = table.reset_index(allow_duplicates=True)
    for i in range(table.index.nlevels):
        level = table.index.get_level_values(i)
        if level.dtype == object:
            # an index level as it was made: reset_index turned a level of ints beside a NaN
            # (G 4 and an unknown G, readable_group_sizes) into floats, "G": 4.0
            flat.isetitem(i, pd.Series(list(level), index=flat.index, dtype=object))
    seen: dict[str, int] = {}
    names = []
    for col in map(str, flat.columns):
        name, k = col, seen.get(col, 0)
        while name in seen:
            k += 1
            name = f"{col}.{k}"
        seen[col] = k
        seen[name] = 0
        names.append(name)
    flat.columns = names
    return flat.to_dict(orient="records")


@runtime_checkable
class Check(Protocol):
    """Anything with a ``name`` and a ``run(...)`` returning a :class:`CheckResult`."""

    name: str

    def run(self, *args: Any, **kwargs: Any) -> CheckResult: ...


def plot_text(text: Any) -> str:
    """``text`` (a run id, an LLM's name) as matplotlib is to draw it: literally.

    Matplotlib reads a string with two ``$`` signs as mathtext: ``run $x_1$`` is drawn as math,
    and ``run_$LR_$G`` (an unexpanded shell variable in a run name) is a ``ValueError`` that
    stops the figure, and with it the report. Every ``$`` escaped is drawn as itself."""
    return str(text).replace("$", r"\$")


def legend_beside(ax: Any, **kwargs: Any) -> Any:
    """The legend of ``ax`` to the right of its axes, outside the plotted area, tops aligned:
    matplotlib's automatic placement (``loc="best"``) picks the emptiest spot inside the axes,
    and a curve that fills the axes (a reward over the whole run) is covered by it anyway.
    The figure must leave it room (``tight_layout`` counts it); keyword arguments go to
    ``ax.legend``."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def legend_below(ax: Any, *, max_columns: int = 4, **kwargs: Any) -> Any:
    """The legend of ``ax`` under its axes, below the tick labels and the x label, centred:
    where a panel of a grid has room for it without giving up width (a legend beside narrows
    the panel by its own width). Its entries run in as many columns (up to ``max_columns``)
    as keep it no wider than the axes, so that many entries do not make it taller than the
    panel. It follows the axes when ``tight_layout`` moves them (which counts it); keyword
    arguments go to ``ax.legend``."""
    from matplotlib.transforms import offset_copy

    fig = ax.figure
    # the distance from the axes' bottom edge to the bottom of its tick labels and x label,
    # in points: it does not change when tight_layout moves or resizes the axes
    drop = (ax.get_window_extent().y0 - ax.get_tightbbox().y0) * 72.0 / fig.dpi
    anchor = offset_copy(ax.transAxes, fig=fig, y=-max(drop, 0.0) - 2.0, units="points")
    handles, _ = ax.get_legend_handles_labels()
    legend = None
    for ncol in range(max(1, min(max_columns, len(handles))), 0, -1):
        legend = ax.legend(
            loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=anchor, borderaxespad=0.0, ncol=ncol, **kwargs
        )
        if ncol == 1 or legend.get_window_extent().width <= 0.95 * ax.get_window_extent().width:
            break
    return legend


def cell_edges(centres: np.ndarray, *, log: bool) -> np.ndarray:
    """Edges of a heat map's cells around sorted grid ``centres`` (for ``pcolormesh(...,
    shading="flat")``): half-way between neighbours (in log for ``log``), the outer cells as
    wide as their neighbour's half; a single centre gets a cell of one step (``K_ref +- 0.5``)
    or, in log, a factor ``sqrt(10)`` either side. ``shading="nearest"`` gave a grid of one
    value a cell of zero width: an empty figure (the phase diagrams of one K_ref)."""
    c = np.asarray(centres, dtype=float)
    v = np.log10(c) if log else c
    if v.size == 1:
        half = 0.5
        edges = np.array([v[0] - half, v[0] + half])
    else:
        mid = (v[1:] + v[:-1]) / 2.0
        edges = np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])
    return 10.0**edges if log else edges


def figure_to_base64(fig: Any, dpi: int = 110) -> str:
    """Render a matplotlib figure to a base64-encoded PNG string."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _jsonable(obj: Any) -> Any:
    """Convert numpy / pandas scalars and NaN to plain JSON values, recursively.

    Missing values (NaN, inf, ``pd.NA``, ``NaT``) become None, times ISO strings, arrays and
    pandas series lists, and any other numpy scalar its Python value: ``json.dumps`` of the
    result needs nothing else (it failed on ``pd.NA``, ``NaT``, ``np.datetime64``, a series)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "mM":  # tolist() gives integer ns
        return _jsonable(obj[()]) if obj.ndim == 0 else [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray | pd.Series | pd.Index):
        return _jsonable(obj.tolist())
    if obj is pd.NA or obj is pd.NaT:
        return None
    if isinstance(obj, np.datetime64 | np.timedelta64):
        return None if np.isnat(obj) else _jsonable(pd.Timestamp(obj) if isinstance(obj, np.datetime64) else pd.Timedelta(obj))
    if isinstance(obj, pd.Timedelta):
        return obj.isoformat()
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        value = float(obj)
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(obj, datetime.date):  # pd.Timestamp too
        return obj.isoformat()
    if isinstance(obj, np.generic):  # np.str_, np.bytes_, ...: the Python value
        return _jsonable(obj.item())
    return obj


jsonable = _jsonable

__all__ = ["CheckResult", "Check", "figure_to_base64", "jsonable", "plot_text", "refuse_repeats", "table_records"]
