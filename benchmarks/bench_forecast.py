"""Benchmark: seconds per forecast of a tiny TRL run with the run-based mixture prior and
reward bounds, before / after, and whether the answers are the same.

``bayes-grpo forecast runs.nc --run R --upto N --reward-bounds 0 1`` fits each other run of
the LLM once (the prior's components: ``prior_from_runs``, memoised in the process) and then
the run's prefix under the mixture (``_fit_mixture``: a Laplace fit per component, importance
sampling under the state-space likelihood). Each case is timed ``cold`` (the memo cleared: a
CLI call) and ``warm`` (the other runs' fits memoised: the leave-one-out calibration's
forecasts after the first), ``--repeats`` times each, median wall and CPU seconds kept (on a
shared machine compare the CPU too). Each checkout runs in a fresh interpreter with its own
``PYTHONPATH``; every number of the forecasts (bands, milestones, stop step, regime
probabilities, the prior's weights in the attributes) is compared between the two checkouts:
``max_relative_difference`` per case.

Results of 2026-12-07 (``benchmarks/results/bench_forecast.json``, the 2-core machine at a load
average of 5.5, ``--old`` the code before the speed-ups): cold 4.8-7.9 s -> 2.9-5.1 s (x1.5-1.7),
warm 1.5-2.2 s -> 1.0-1.5 s (x1.3-1.7), every number the same (max relative difference 0.0).
Under heavier contention the old code's two BLAS threads cost far more (a cold forecast of
``g16_p8_lr0.0005_k1_adamw_s0`` at step 30: 23.6 s old, 7.8 s new, in one earlier run).

Usage (``--old`` a checkout of the code before, e.g. ``git worktree add /tmp/old c2e5aa7``)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_forecast.py --old /tmp/old [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: (run, upto, reward bounds, likelihood) of data/tiny.
CASES: list[tuple[str, float, tuple[float, float] | None, str]] = [
    ("g16_p8_lr0.0005_k1_adamw_s0", 30, (0.0, 1.0), "state_space"),
    ("g16_p8_lr0.001_k2_adamw_s0", 60, (0.0, 1.0), "state_space"),
    ("g4_p8_lr0.001_k1_adamw_s1", 90, (0.0, 1.0), "state_space"),
    ("g16_p8_lr0.03_k1_sgd_s0", 150, (0.0, 1.0), "iid"),
    ("g4_p32_lr0.001_k1_adamw_s2", 45, None, "state_space"),
]


def child(runset_path: str, repeats: int, out: str) -> None:
    """In the checkout on ``PYTHONPATH``: time each case cold and warm; pickle the timings and
    every number of the last forecast of each case."""
    import time
    import warnings

    from bayes_grpo.predict import forecast as fc_module
    from bayes_grpo.runset import load_runset

    warnings.simplefilter("ignore")
    rs = load_runset(runset_path)
    result = {"bayes_grpo": fc_module.__file__, "cases": {}}
    for run, upto, bounds, likelihood in CASES:
        times: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}
        for _ in range(repeats):
            fc_module._LAPLACE_CACHE.clear()
            for kind in ("cold", "warm"):
                wall, cpu = time.perf_counter(), time.process_time()
                fc = fc_module.forecast_in_runset(rs, run, upto, reward_bounds=bounds, likelihood=likelihood)
                times[kind].append((time.perf_counter() - wall, time.process_time() - cpu))
        numbers = {
            "vars": {k: np.asarray(v.values) for k, v in fc.data_vars.items()},
            "attrs": {k: v for k, v in fc.attrs.items()},
        }
        result["cases"][f"{run}@{upto:g} bounds={bounds} {likelihood}"] = {"times": times, "numbers": numbers}
    with open(out, "wb") as f:
        pickle.dump(result, f)


def _max_relative(a, b) -> float:
    """Largest relative difference of two nested results (JSON text attributes parsed)."""
    if isinstance(a, dict):
        if set(a) != set(b):
            return float("inf")
        return max((_max_relative(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, str):
        try:
            return _max_relative(json.loads(a), json.loads(b))
        except (ValueError, TypeError):
            return 0.0 if a == b else float("inf")
    if isinstance(a, list) and a and not isinstance(a[0], int | float):
        return float("inf") if len(a) != len(b) else max(_max_relative(x, y) for x, y in zip(a, b))
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        return float("inf")
    if x.dtype.kind not in "fc" and y.dtype.kind not in "fc":
        return 0.0 if np.array_equal(x, y) else float("inf")
    x, y = x.astype(float), y.astype(float)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    scale = np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-300)
    diff = np.where(same, 0.0, np.abs(x - y) / scale)
    return float(diff.max()) if diff.size else 0.0


def run_checkout(checkout: Path, runset_path: str, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.pkl")
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        subprocess.run(
            [sys.executable, "-P", __file__, "--child", runset_path, "--repeats", str(repeats), "--out", out],
            env=env, check=True,
        )  # fmt: skip
        with open(out, "rb") as f:
            return pickle.load(f)


def summary(times: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "median_wall_s": round(statistics.median(w for w, _ in times), 3),
        "median_cpu_s": round(statistics.median(c for _, c in times), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, help="checkout of the code before (compared and timed)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.repeats, args.out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        runset_path = os.path.join(tmp, "tiny.nc")
        subprocess.run(
            [sys.executable, "-P", "-m", "bayes_grpo", "ingest", str(ROOT / "data" / "tiny"), "-o", runset_path],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True, capture_output=True,
        )  # fmt: skip
        checkouts = {"new": ROOT} | ({"old": args.old.resolve()} if args.old else {})
        results = {name: run_checkout(path, runset_path, args.repeats) for name, path in checkouts.items()}
    report: dict[str, object] = {"repeats": args.repeats, "checkouts": {k: str(v) for k, v in checkouts.items()}, "cases": {}}
    for case in results["new"]["cases"]:
        row: dict[str, object] = {}
        for name, res in results.items():
            for kind, times in res["cases"][case]["times"].items():
                row[f"{name}_{kind}"] = summary(times)
        if "old" in results:
            for kind in ("cold", "warm"):
                row[f"speedup_{kind}_wall"] = round(
                    row[f"old_{kind}"]["median_wall_s"] / row[f"new_{kind}"]["median_wall_s"], 2
                )
            row["max_relative_difference"] = _max_relative(
                results["old"]["cases"][case]["numbers"], results["new"]["cases"][case]["numbers"]
            )
        report["cases"][case] = row
        print(case, json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
