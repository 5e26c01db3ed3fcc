"""Helpers shared by the CLI modules: JSON output and table printing."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import pandas as pd

from bayes_grpo.checks.base import jsonable


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as JSON (for scripts)")


def print_json(obj: Any) -> None:
    json.dump(jsonable(obj), sys.stdout, indent=2)
    sys.stdout.write("\n")


def print_table(frame: pd.DataFrame, *, title: str | None = None) -> None:
    if title:
        print(title)
    with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200):
        print(frame.to_string())
