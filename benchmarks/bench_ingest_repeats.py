"""Benchmark: wall time of ingest's read-twice check (``runset.ingest.same_training_twice``) on a
sweep of runs that start alike.

Runs whose reward is 0 for their first steps (a stalled start) all share the check's start key,
so every two of them are compared: 600 runs make 180,000 pairs. Compared pair by pair with
pandas' index intersection and ``.loc`` (about 1 ms a pair) the check took 84 s for 600 runs on
the 2-core machine; compared one row of a (run, step) table against all later rows at once
(``_same_reward_pairs``, 2026-12-06) 0.9 s, with the same pairs and notes
(``tests/test_ingest_formats.py::test_a_sweep_of_hundreds_of_runs_that_start_alike_finds_only_the_run_read_twice``).
Rerun on the loaded machine (2026-12-06), 150 / 300 / 600 runs: 3.2 / 12.2 / 61.0 s at e5a0d32 (best
of 1), 0.05 / 0.10 / 0.24 s after (best of 3); ``PYTHONPATH=<checkout>`` picks the code measured.

Usage::

    .venv/bin/python benchmarks/bench_ingest_repeats.py [--runs 600 1200] [--steps 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from bayes_grpo.runset.ingest import same_training_twice
from bayes_grpo.runset.schema import REWARD_VAR


def sweep(n_runs: int, n_steps: int) -> dict[str, pd.DataFrame]:
    """``n_runs`` runs stalled at 0 for their first 5 steps, then rising to distinct plateaus."""
    steps = np.arange(1, n_steps + 1)
    rise = np.clip(steps - 5, 0, None)
    return {
        f"run{k:04d}": pd.DataFrame({REWARD_VAR: (0.3 + 0.001 * k) * (1 - np.exp(-rise / 5.0))}, index=steps)
        for k in range(n_runs)
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, nargs="+", default=[150, 300, 600])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for n in args.runs:
        curves = sweep(n, args.steps)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            notes = same_training_twice(curves)
            times.append(time.perf_counter() - start)
        rows.append({"runs": n, "pairs": n * (n - 1) // 2, "best_s": min(times), "notes": len(notes)})
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
