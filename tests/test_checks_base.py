"""The check result type: its JSON (``--json``) and how a report renders it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from bayes_grpo.checks.base import CheckResult


def test_a_check_result_of_numpy_and_pandas_values_writes_as_strict_json():
    table = pd.DataFrame(
        {
            "run": ["a", "b"],
            "ok": np.array([True, False]),
            "when": [pd.Timestamp("2026-01-02"), pd.NaT],
            "n": pd.array([1, pd.NA], dtype="Int64"),
            "x": [np.inf, np.float32(0.5)],
        }
    ).set_index("run")
    result = CheckResult(
        "user_check",
        table["ok"].all(),  # a verdict as pandas gives it: np.bool_
        "summary",
        table=table,
        values={
            "missing": pd.NA,
            "logged_at": np.datetime64("2026-01-02T03:04:05", "ns"),
            "times": np.array(["2026-01-02", "NaT"], dtype="datetime64[ns]"),
            "per_run": pd.Series({"a": 1.0, "b": np.nan}),
            "label": np.str_("r1"),
            "kept": {3, 4},
        },
    )
    out = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert out["passed"] is False
    assert out["values"] == {
        "missing": None,
        "logged_at": "2026-01-02T03:04:05",
        "times": ["2026-01-02T00:00:00", None],
        "per_run": [1.0, None],
        "label": "r1",
        "kept": [3, 4],
    }
    assert out["table"] == [
        {"run": "a", "ok": True, "when": "2026-01-02T00:00:00", "n": 1, "x": None},
        {"run": "b", "ok": False, "when": None, "n": None, "x": 0.5},
    ]
    assert json.loads(result.to_json())["passed"] is False


def test_a_table_with_two_columns_of_one_name_keeps_both_in_its_json():
    # to_dict(orient="records") kept the last of two columns named "coverage" (with a pandas
    # warning only), and reset_index raised on an index level named like a column
    import warnings

    table = pd.DataFrame([[0.9, 0.7, 3]], columns=["coverage", "coverage", "G"], index=pd.Index(["m"], name="model"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = json.loads(json.dumps(CheckResult("c", True, "s", table=table).to_dict(), allow_nan=False))
    assert out["table"] == [{"model": "m", "coverage": 0.9, "coverage.1": 0.7, "G": 3}]
    clash = pd.DataFrame({"G": [4, 8], "n": [1, 2]}, index=pd.Index([4, 8], name="G"))
    assert CheckResult("c", True, "s", table=clash).to_dict()["table"] == [
        {"G": 4, "G.1": 4, "n": 1},
        {"G": 8, "G.1": 8, "n": 2},
    ]
