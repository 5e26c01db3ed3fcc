"""Cost of following a logged learning-rate schedule in the likelihood (model version 7).

Builds the mechanistic i.i.d. model for 12 runs x 1000 steps twice, on the same rewards: runs
at a constant rate (the regular-grid closed form, baby-step giant-step) and runs on TRL's linear
decay with config ``learning_rate_schedule.follow`` true (one exact transition per step, composed
by prefix products). Prints the compile time of the log density and its gradient and the mean
time of one gradient evaluation (50 calls after 3 warm-up calls), and writes them as JSON.

    PYTENSOR_FLAGS=base_compiledir=/tmp/ptc_bench_sched .venv/bin/python benchmarks/bench_schedule_gradient.py \\
        [--json benchmarks/results/bench_schedule_gradient.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_grpo._io import write_text_atomic
from bayes_grpo.dynamics.schedule import lr_multipliers
from bayes_grpo.model import GRPODynamicsModel
from bayes_grpo.runset.core import make_runset

N_RUNS, N_STEPS = 12, 1000


def runset(schedule: str):
    rng = np.random.default_rng(0)
    steps = np.arange(1, N_STEPS + 1)
    rate = 1e-3 * (lr_multipliers("linear", N_STEPS) if schedule == "linear" else np.ones(N_STEPS))
    curves = {
        f"r{i}": pd.DataFrame({"reward": 0.8 - 0.5 * np.exp(-steps / 200) + rng.normal(0, 0.05, N_STEPS), "lr": rate}, index=steps)
        for i in range(N_RUNS)
    }
    meta = {r: {"model": "m", "learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1, "group_size": 4} for r in curves}
    return make_runset(curves, meta)


def measure(schedule: str) -> dict:
    model = GRPODynamicsModel(model_config={"learning_rate_schedule": {"follow": schedule == "linear"}})
    pm_model = model.build_model(runset(schedule))
    t0 = time.perf_counter()
    dlogp = pm_model.compile_dlogp()
    compile_s = time.perf_counter() - t0
    point = pm_model.initial_point()
    for _ in range(3):
        dlogp(point)
    t1 = time.perf_counter()
    for _ in range(50):
        dlogp(point)
    return {
        "schedule": schedule,
        "law": "on the schedule" if model.data.lr_multiplier is not None else "constant rate (grid)",
        "compile_s": round(compile_s, 1),
        "gradient_ms": round(1000.0 * (time.perf_counter() - t1) / 50, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = [measure("constant"), measure("linear")]
    for r in rows:
        print(f"{r['law']:22s} compile {r['compile_s']:7.1f} s   gradient {r['gradient_ms']:7.2f} ms")
    print(f"ratio of gradient times: {rows[1]['gradient_ms'] / rows[0]['gradient_ms']:.1f}x")
    if args.json is not None:
        write_text_atomic(args.json, json.dumps({"n_runs": N_RUNS, "n_steps": N_STEPS, "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
