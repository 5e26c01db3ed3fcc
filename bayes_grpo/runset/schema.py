"""The run-set data contract (DESIGN.md section 5): dimension, coordinate and attribute names.

A run set is a plain ``xarray.Dataset`` with dims ``run`` and ``step`` (optimizer step),
one coordinate per run for each name in :data:`RUN_COORDS`, and data variables
``reward`` plus every other numeric metric the logs had, under canonical names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bayes_grpo.constants import RUN_DIM, STEP_DIM

if TYPE_CHECKING:
    import pandas as pd

#: Per-run coordinates and their fill value when unknown. Numeric ones are float64 (NaN when
#: unknown, since netCDF integers cannot hold a missing value); string ones are "" when unknown.
RUN_COORDS: dict[str, object] = {
    "model": "",  # model name (Hub id or local label)
    "model_size": np.nan,  # number of parameters
    "group_size": np.nan,  # G, completions per prompt
    "learning_rate": np.nan,  # eta (peak learning rate)
    "momentum": np.nan,  # mu: heavy-ball momentum or Adam beta1
    "momentum_convention": "",  # "heavy_ball" or "ema"
    "k_ref": np.nan,  # off-policy lag: optimizer steps that reuse one rollout / refresh interval
    "beta": np.nan,  # KL weight
    "seed": np.nan,  # random seed
    # completions whose rewards make up one optimizer step's logged reward (prompts per
    # step x G); tells a fixed prompt budget (grows with G) from a fixed completion budget
    "completions_per_step": np.nan,
    "source": "",  # where the run came from (format:path)
}
#: Coordinates added to the contract after schema version 1: a run set saved without one
#: is read with the coordinate unknown (its fill value), not refused.
ADDED_COORDS: tuple[str, ...] = ("completions_per_step",)

STRING_COORDS: tuple[str, ...] = tuple(k for k, v in RUN_COORDS.items() if isinstance(v, str))
NUMERIC_COORDS: tuple[str, ...] = tuple(k for k in RUN_COORDS if k not in STRING_COORDS)
#: Numeric coordinates that are counts (stored as float64 like the others): people read them
#: as integers, so tables, messages and JSON show them through :func:`readable_group_size`.
COUNT_COORDS: tuple[str, ...] = ("group_size", "k_ref", "seed", "completions_per_step")


def readable_group_size(value: float) -> int | float:
    """A group size as people read it: an integral G as an ``int`` (``4``, not ``4.0``).

    The coordinate is stored as float64 (NaN when unknown); tables, messages and JSON that a
    user reads show G through this. NaN and a fractional value are returned as floats.
    """
    g = float(value)
    return int(g) if np.isfinite(g) and g.is_integer() else g


def group_size_text(value: float) -> str:
    """A group size in a label or a message: ``"4"``, ``"4.5"``, and ``"?"`` when unknown
    (``G=nan`` read as a number)."""
    g = readable_group_size(value)
    return f"{g:g}" if np.isfinite(g) else "?"


#: The name of the LLM of a run whose ``model`` coordinate is empty, wherever a run or group is
#: named by its LLM: the fit (its runs' LLM, :func:`bayes_grpo.model.prepare.run_llm_names`),
#: its tables, the checks, and the report's figures (:func:`model_text`).
UNKNOWN_MODEL: str = "unknown-model"


def model_text(value: object) -> str:
    """An LLM's name in a label or a title: the name, :data:`UNKNOWN_MODEL` when empty (the
    report's figures read "?", "(model unknown)" and the fit's tables "unknown-model" for one LLM)."""
    return str(value) if value is not None and str(value) else UNKNOWN_MODEL


def readable_group_sizes(values: object) -> np.ndarray:
    """:func:`readable_group_size` of each value, as a column: int64 when every G is a known
    integer, else an object array of ints with NaN (or floats) where G is unknown (fractional)."""
    g = np.asarray(values, dtype=float).ravel()
    if np.isfinite(g).all() and all(v.is_integer() for v in g.tolist()):
        return g.astype(np.int64)
    return np.array([readable_group_size(v) for v in g], dtype=object)


def group_sizes_as_text(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its ``group_size`` index level and column (where it has them) as
    :func:`group_size_text`: ``4``, and ``?`` for an unknown G. For the tables of the fit that
    ``fit`` prints and the report shows: ``fit``'s read "unknown-model NaN" (G as a number), the
    report's a blank G beside figures labelled "G=?"."""
    import pandas as pd

    out = table.copy()
    if "group_size" in out.columns:
        out["group_size"] = [group_size_text(v) for v in out["group_size"]]
    if "group_size" in (out.index.names or []):
        text = [group_size_text(v) for v in out.index.get_level_values("group_size")]
        if isinstance(out.index, pd.MultiIndex):
            levels = [
                pd.Index(text, name=name) if name == "group_size" else out.index.get_level_values(i)
                for i, name in enumerate(out.index.names)
            ]
            out.index = pd.MultiIndex.from_arrays(levels)
        else:
            out.index = pd.Index(text, name="group_size")
    return out


#: The data variable holding the training reward curve.
REWARD_VAR: str = "reward"

#: Dataset attribute holding per-run ingestion warnings, as JSON ``{run_id: [message, ...]}``.
WARNINGS_ATTR: str = "bayes_grpo_warnings"
#: Dataset attribute holding the schema version.
SCHEMA_ATTR: str = "bayes_grpo_runset_schema"
SCHEMA_VERSION: str = "1"

__all__ = [
    "RUN_DIM",
    "STEP_DIM",
    "RUN_COORDS",
    "ADDED_COORDS",
    "STRING_COORDS",
    "COUNT_COORDS",
    "NUMERIC_COORDS",
    "REWARD_VAR",
    "WARNINGS_ATTR",
    "SCHEMA_ATTR",
    "SCHEMA_VERSION",
    "UNKNOWN_MODEL",
    "group_size_text",
    "group_sizes_as_text",
    "readable_group_size",
    "readable_group_sizes",
    "model_text",
]
