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

``--cases beyond``: forecasts from 30% and 50% of tiny runs (steps 90 and 150), three of which
have lightly damped draws that ``summary.best_beyond_horizon`` follows far past the horizon (two
to its cell budget, 2e7 cells, unsettled; twice: the logged reward and the policy); warm only (``--kinds warm``, one
untimed cold call first), with the seconds spent in ``best_beyond_horizon`` (``beyond_s``, wall)
beside the whole forecast's. Results of 2026-12-07 (``benchmarks/results/bench_forecast_beyond.json``,
``--old`` 6aa4307, each doubled look evaluated from the horizon's next step): in
``best_beyond_horizon`` 9.5 / 8.8 / 4.3 s -> 2.3 / 2.4 / 1.0 s (x3.8-4.3) for the three cases
that follow their draws far, the warm forecast 12.7 / 11.0 / 7.0 s -> 4.7 / 4.7 / 3.4 s; the two
whose look stops at step 600 unchanged (0.02-0.035 s); every number of the ten forecasts (these and
the default cases) the same, max absolute difference 0.0.

Every case also reports ``max_abs_difference`` beside ``max_relative_difference`` (NaN against NaN
counts as equal in both, a number against NaN as an infinite difference).

Usage (``--old`` a checkout of the code before, e.g. ``git worktree add /tmp/old c2e5aa7``)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_forecast.py --old /tmp/old [--repeats 3] [--json out.json]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_forecast.py --old /tmp/old --cases beyond --kinds warm \
        --json benchmarks/results/bench_forecast_beyond.json
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
#: Forecasts from 30% and 50% of tiny runs (``--cases beyond``): the first two follow their
#: draws past the horizon to the cell budget (to step 19500, not settled), the third to step 9900
#: (settled), the last two stop at step 600 (the gain at the horizon above the threshold).
BEYOND_CASES: list[tuple[str, float, tuple[float, float] | None, str]] = [
    ("g16_p8_lr0.001_k1_adamw_s0", 150, (0.0, 1.0), "state_space"),
    ("g16_p8_lr0.001_k1_adamw_s0", 150, (0.0, 1.0), "iid"),
    ("g16_p8_lr0.001_k1_adamw_s1", 150, (0.0, 1.0), "state_space"),
    ("g16_p8_lr0.002_k1_adamw_s0", 150, (0.0, 1.0), "state_space"),
    ("g4_p32_lr0.001_k1_adamw_s2", 90, None, "state_space"),
]
CASE_SETS = {"default": CASES, "beyond": BEYOND_CASES}


def child(runset_path: str, repeats: int, out: str, cases: str = "default", kinds: str = "cold,warm") -> None:
    """In the checkout on ``PYTHONPATH``: time each case of the set ``cases`` in each of ``kinds``
    (``cold``, ``warm``: a warm one alone follows an untimed cold call), with the wall seconds in
    ``summary.best_beyond_horizon``; pickle the timings and every number of the last forecast of
    each case."""
    import time
    import warnings

    from bayes_grpo.predict import forecast as fc_module
    from bayes_grpo.predict import summary
    from bayes_grpo.runset import load_runset

    warnings.simplefilter("ignore")
    rs = load_runset(runset_path)
    result = {"bayes_grpo": fc_module.__file__, "cases": {}}
    timed = kinds.split(",")
    beyond_s = [0.0]
    follow = summary.best_beyond_horizon

    def timed_follow(*args, **kwargs):
        start = time.perf_counter()
        try:
            return follow(*args, **kwargs)
        finally:
            beyond_s[0] += time.perf_counter() - start

    summary.best_beyond_horizon = timed_follow
    for run, upto, bounds, likelihood in CASE_SETS[cases]:
        times: dict[str, list[tuple[float, float, float]]] = {kind: [] for kind in timed}
        fc_module._LAPLACE_CACHE.clear()
        for i in range(repeats):
            if "cold" in timed:
                fc_module._LAPLACE_CACHE.clear()
            # warm alone: one untimed cold call fills the memo
            for kind in ("cold", "warm") if "cold" in timed or i == 0 else ("warm",):
                beyond_s[0] = 0.0
                wall, cpu = time.perf_counter(), time.process_time()
                fc = fc_module.forecast_in_runset(rs, run, upto, reward_bounds=bounds, likelihood=likelihood)
                if kind in timed:
                    times[kind].append((time.perf_counter() - wall, time.process_time() - cpu, beyond_s[0]))
        numbers = {
            "vars": {k: np.asarray(v.values) for k, v in fc.data_vars.items()},
            "attrs": {k: v for k, v in fc.attrs.items()},
        }
        result["cases"][f"{run}@{upto:g} bounds={bounds} {likelihood}"] = {"times": times, "numbers": numbers}
    with open(out, "wb") as f:
        pickle.dump(result, f)


def _max_relative(a, b, absolute: bool = False) -> float:
    """Largest relative difference of two nested results (JSON text attributes parsed); with
    ``absolute``, the largest absolute difference."""
    if isinstance(a, dict):
        if set(a) != set(b):
            return float("inf")
        return max((_max_relative(a[k], b[k], absolute) for k in a), default=0.0)
    if isinstance(a, str):
        try:
            return _max_relative(json.loads(a), json.loads(b), absolute)
        except (ValueError, TypeError):
            return 0.0 if a == b else float("inf")
    if isinstance(a, list) and a and not isinstance(a[0], int | float):
        return float("inf") if len(a) != len(b) else max(_max_relative(x, y, absolute) for x, y in zip(a, b))
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        return float("inf")
    if x.dtype.kind not in "fc" and y.dtype.kind not in "fc":
        return 0.0 if np.array_equal(x, y) else float("inf")
    x, y = x.astype(float), y.astype(float)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    scale = 1.0 if absolute else np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-300)
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(x - y) / scale)
    diff = np.where(np.isnan(diff), np.inf, diff)  # a number against NaN
    return float(diff.max()) if diff.size else 0.0


def run_checkout(checkout: Path, runset_path: str, repeats: int, cases: str = "default", kinds: str = "cold,warm") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.pkl")
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        subprocess.run(
            [sys.executable, "-P", __file__, "--child", runset_path, "--repeats", str(repeats), "--out", out,
             "--cases", cases, "--kinds", kinds],
            env=env, check=True,
        )  # fmt: skip
        with open(out, "rb") as f:
            return pickle.load(f)


def summary(times: list[tuple[float, ...]]) -> dict[str, float]:
    return {
        "median_wall_s": round(statistics.median(t[0] for t in times), 3),
        "median_cpu_s": round(statistics.median(t[1] for t in times), 3),
        "median_beyond_s": round(statistics.median(t[2] for t in times), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, help="checkout of the code before (compared and timed)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--cases", choices=sorted(CASE_SETS), default="default", help="which forecasts")
    parser.add_argument("--kinds", choices=["cold,warm", "cold", "warm"], default="cold,warm", help="which timings")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.repeats, args.out, args.cases, args.kinds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        runset_path = os.path.join(tmp, "tiny.nc")
        subprocess.run(
            [sys.executable, "-P", "-m", "bayes_grpo", "ingest", str(ROOT / "data" / "tiny"), "-o", runset_path],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True, capture_output=True,
        )  # fmt: skip
        checkouts = {"new": ROOT} | ({"old": args.old.resolve()} if args.old else {})
        results = {
            name: run_checkout(path, runset_path, args.repeats, args.cases, args.kinds) for name, path in checkouts.items()
        }
    report: dict[str, object] = {
        "repeats": args.repeats, "cases_set": args.cases, "kinds": args.kinds,
        "checkouts": {k: str(v) for k, v in checkouts.items()}, "cases": {},
    }  # fmt: skip
    for case in results["new"]["cases"]:
        row: dict[str, object] = {}
        for name, res in results.items():
            for kind, times in res["cases"][case]["times"].items():
                row[f"{name}_{kind}"] = summary(times)
        if "old" in results:
            for kind in args.kinds.split(","):
                for what in ("wall", "beyond"):
                    new_s = row[f"new_{kind}"][f"median_{what}_s"]
                    row[f"speedup_{kind}_{what}"] = round(row[f"old_{kind}"][f"median_{what}_s"] / new_s, 2) if new_s else None
            old_numbers, new_numbers = results["old"]["cases"][case]["numbers"], results["new"]["cases"][case]["numbers"]
            row["max_relative_difference"] = _max_relative(old_numbers, new_numbers)
            row["max_abs_difference"] = _max_relative(old_numbers, new_numbers, absolute=True)
        report["cases"][case] = row
        print(case, json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
