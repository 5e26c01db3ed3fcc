"""Failure-mode diagnoses of the real public GRPO logs in ``../shared/real_runs``.

The CSV exports are ingested with ``bayes_grpo.runset.ingest.load_runs``; the group size G
of each run is taken from ``sources.json`` (the CSVs do not carry it), since the derived
zero-spread share and the binomial expectation need it. Prints the verdict matrix and
each result's sentence.

    .venv/bin/python benchmarks/diagnostics_real_runs.py [--real-runs ../shared/real_runs] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_grpo.diagnostics import DiagnosticsConfig, diagnose, diagnosis_table, verdict_matrix


def group_sizes(sources: Path) -> dict[str, float]:
    """``{run id: G}`` from ``sources.json`` (first integer of its ``G`` field)."""
    out = {}
    for entry in json.loads(sources.read_text(encoding="utf-8")):
        m = re.search(r"\d+", str(entry.get("G", "")))
        out[entry["short_id"]] = float(m.group()) if m else np.nan
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--real-runs", default=str(Path(__file__).resolve().parents[2] / "shared" / "real_runs")
    )
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    from bayes_grpo.runset.ingest import load_runs

    root = Path(args.real_runs)
    ds = load_runs(root / "csv")
    g = group_sizes(root / "sources.json")
    ds = ds.assign_coords(group_size=("run", [g.get(str(r), np.nan) for r in ds["run"].values]))
    results = diagnose(ds, config=DiagnosticsConfig.from_mapping({"common": {"figures": False}}))
    with pd.option_context(
        "display.width", 220, "display.max_columns", 10, "display.max_rows", 200
    ):
        print(verdict_matrix(results).to_string())
        print()
        print(
            diagnosis_table(results)[["verdict", "onset_step", "strength", "lower", "upper"]]
            .round(3)
            .to_string()
        )
    print()
    for r in results:
        print(f"[{r.name}] {r.summary}")
    if args.json:
        from bayes_grpo._io import write_text_atomic

        write_text_atomic(args.json, json.dumps([r.to_dict() for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
