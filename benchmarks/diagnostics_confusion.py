"""Confusion table of the failure-mode diagnostics: mode x built-in case.

Every built-in case is a run built to show some failure modes (or none); each is simulated
with several seeds and diagnosed with the default thresholds. A cell counts the seeds in
which the mode was detected; cells of the modes a case is built to show are starred
(they should read n/n), the others should read 0/n; "n/a" counts runs the mode could not
assess (the case lacks the metric, e.g. no evaluation reward in the bandit).

Cases: the simulated logs of ``bayes_grpo.diagnostics.cases.CASES`` and the softmax-bandit
runs of ``BANDIT_CASES`` (``bayes_grpo.bandit.simulate_bandit``), plus any run set under
``data/`` whose ``attrs["diagnostics_expected"]`` (JSON list of modes) says what it should
show. The project's TRL example runs (``--trl-data``, default ``data/tiny``) are diagnosed
too and printed as a separate verdict matrix: they were not built to show a mode, so they
have no expected cells.

    .venv/bin/python benchmarks/diagnostics_confusion.py --seeds 5 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_grpo.diagnostics import MODES, DiagnosticsConfig, diagnose
from bayes_grpo.diagnostics.cases import BANDIT_CASES, CASES, bandit_case, simulated_case


def _rows(ds, expected: frozenset[str], case: str, config: DiagnosticsConfig) -> list[dict]:
    out = []
    for r in diagnose(ds, config=config):
        out.append(
            {
                "case": case,
                "run": r.values["run"],
                "mode": r.name,
                "expected": r.name in expected,
                "verdict": None if r.passed is None else (not r.passed),
            }
        )
    return out


def run(seeds: int, steps: int, bandit: bool, n_boot: int) -> pd.DataFrame:
    config = DiagnosticsConfig.from_mapping({"common": {"figures": False, "n_boot": n_boot}})
    rows: list[dict] = []
    for case, expected in CASES.items():
        for s in range(seeds):
            rows += _rows(
                simulated_case(case, seed=1000 + s, n_steps=steps), expected, case, config
            )
    if bandit:
        for case, (_, expected) in BANDIT_CASES.items():
            rows += _rows(
                bandit_case(case, seeds=seeds, seed=2000, steps=max(steps, 300)),
                expected,
                case,
                config,
            )
    data = Path(__file__).resolve().parents[1] / "data"
    for path in sorted(data.glob("**/*.nc")) if data.is_dir() else []:
        from bayes_grpo.runset.core import load_runset

        try:
            ds = load_runset(path)
        except (ValueError, OSError):
            continue
        if "diagnostics_expected" in ds.attrs:
            expected = frozenset(json.loads(ds.attrs["diagnostics_expected"]))
            rows += _rows(ds, expected, f"trl:{path.name}", config)
    return pd.DataFrame(rows)


def confusion(frame: pd.DataFrame) -> pd.DataFrame:
    """Case x mode cells ``"k/n"`` (k detected of n assessed), ``*`` on expected modes."""
    cells = {}
    for (case, mode), grp in frame.groupby(["case", "mode"], sort=False):
        assessed = grp["verdict"].notna()
        k = int(grp.loc[assessed, "verdict"].astype(bool).sum())
        n = int(assessed.sum())
        na = int((~assessed).sum())
        text = f"{k}/{n}" if n else "n/a"
        if na and n:
            text += f" ({na} n/a)"
        if grp["expected"].iloc[0]:
            text += " *"
        cells[(case, mode)] = text
    out = pd.Series(cells).unstack()
    return out.reindex(columns=list(MODES)).loc[list(dict.fromkeys(frame["case"]))]


def rates(frame: pd.DataFrame) -> dict[str, float]:
    a = frame[frame["verdict"].notna()]
    pos, neg = a[a["expected"]], a[~a["expected"]]
    return {
        "sensitivity": float(pos["verdict"].astype(bool).mean()) if len(pos) else float("nan"),
        "false_positive_rate": float(neg["verdict"].astype(bool).mean())
        if len(neg)
        else float("nan"),
        "n_expected": int(len(pos)),
        "n_not_expected": int(len(neg)),
        "n_not_assessable": int(frame["verdict"].isna().sum()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=5, help="seeds per case (default 5)")
    parser.add_argument(
        "--steps",
        type=int,
        default=200,
        help="optimizer steps of the simulated cases (default 200; bandit at least 300)",
    )
    parser.add_argument(
        "--n-boot", type=int, default=100, help="bootstrap replicates per result (default 100)"
    )
    parser.add_argument("--no-bandit", action="store_true", help="skip the softmax-bandit cases")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the per-run verdicts and the table as JSON"
    )
    parser.add_argument(
        "--trl-data",
        default=str(Path(__file__).resolve().parents[1] / "data" / "tiny"),
        help="folder of TRL runs to diagnose as well (no expectations); '' to skip",
    )
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    frame = run(args.seeds, args.steps, not args.no_bandit, args.n_boot)
    table = confusion(frame)
    summary = rates(frame)
    with pd.option_context("display.width", 200, "display.max_columns", 10):
        print(table.to_string())
    print(json.dumps(summary, indent=2))
    if args.trl_data and Path(args.trl_data).is_dir():
        from bayes_grpo.diagnostics import verdict_matrix
        from bayes_grpo.runset.ingest import load_runs

        trl = diagnose(
            load_runs(args.trl_data),
            config=DiagnosticsConfig.from_mapping(
                {"common": {"figures": False, "n_boot": args.n_boot}}
            ),
        )
        print(f"\nproject TRL runs in {args.trl_data} (no built-in expectation):")
        with pd.option_context("display.width", 200, "display.max_columns", 10):
            print(verdict_matrix(trl).to_string())
    print(f"wall time {time.perf_counter() - t0:.1f} s")
    if args.json:
        from bayes_grpo._io import write_text_atomic

        payload = {
            "table": table.reset_index()
            .rename(columns={"index": "case"})
            .to_dict(orient="records"),
            "summary": summary,
            "runs": frame.replace({np.nan: None}).to_dict(orient="records"),
        }
        write_text_atomic(args.json, json.dumps(payload, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
