"""Benchmark: wall time of ``predict`` with the stop step's look past the horizon.

Times :func:`bayes_grpo.predict.predict.predict_run` on the saved tiny models (the README's
``predict models/tiny.nc --lr 0.002 --momentum 0.9 --momentum-convention ema --k-ref 2
--group-size 16 --steps 300``, and a lightly damped bandit setting whose draws are followed past
the horizon), best of ``--repeats`` warm calls, and the share of it spent in the continuation
(``summarise_draws``' ``continuation`` / ``policy_continuation``), with the stop steps, so a
before / after pair (run it with ``PYTHONPATH`` at each checkout) shows the same numbers.

Usage::

    .venv/bin/python benchmarks/bench_predict_stop_step.py [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "readme_tiny_steps300": (
        "tiny.nc",
        dict(learning_rate=0.002, momentum=0.9, momentum_convention="ema", k_ref=2, group_size=16, steps=300),
    ),
    "bandit_k16_steps400": (
        "bandit.nc",
        dict(learning_rate=0.1, momentum=0.5, k_ref=16, group_size=8, steps=400),
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    from bayes_grpo.predict import predict as predict_module
    from bayes_grpo.predict import summary

    spent = {"continuation_s": 0.0}
    best_beyond = summary.best_beyond_horizon

    def timed_beyond(continuation, *a, **kw):
        def timed(steps):
            t0 = time.perf_counter()
            try:
                return continuation(steps)
            finally:
                spent["continuation_s"] += time.perf_counter() - t0

        return best_beyond(timed, *a, **kw)

    summary.best_beyond_horizon = timed_beyond
    out = {}
    for name, (model, kw) in CASES.items():
        walls, cont = [], []
        for _ in range(args.repeats + 1):  # the first call warms the caches
            spent["continuation_s"] = 0.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                ds = predict_module.predict_run(ROOT / "models" / model, **kw)
                walls.append(time.perf_counter() - t0)
            cont.append(spent["continuation_s"])
        i = 1 + int(np.argmin(walls[1:]))
        out[name] = {
            "wall_s": round(walls[i], 2),
            "continuation_s": round(cont[i], 2),
            "stop_step": float(ds.attrs["stop_step"]),
            "policy_stop_step": float(ds.attrs.get("policy_stop_step", np.nan)),
            "expected_remaining_gain_after": float(ds.attrs.get("expected_remaining_gain_after", np.nan)),
        }
        print(name, out[name], flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
