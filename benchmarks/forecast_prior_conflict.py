"""Forecasts of runs unlike the earlier runs that form their prior (prior-data conflict).

The run-based prior of a forecast (:func:`bayes_grpo.predict.forecast.prior_from_runs`) is a
mixture of the earlier runs' fits plus, with weight ``robust_weight``, a weak data-scaled
component (a robust meta-analytic-predictive prior). This script builds that prior from six
SDE runs of one setting (plateau 0.5, R0 0.2, stiffness 40) and forecasts three runs of each
of five cases from 20% and 30% of their 300 steps (state-space likelihood, the default), once
per robust weight, and prints the 90%
band coverage of each run's logged rest and the median RMSE ratio to the single-exponential
baseline fitted on the same prefix (:func:`bayes_grpo.predict.evaluate.evaluate_run`).

    PYTHONHASHSEED=0 .venv/bin/python benchmarks/forecast_prior_conflict.py \
        [--weights 0 0.15] [--out benchmarks/results/forecast_prior_conflict.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bayes_grpo._io import write_text_atomic
from bayes_grpo.dynamics.simulate import simulate_sde_runset
from bayes_grpo.predict.evaluate import evaluate_run
from bayes_grpo.predict.forecast import prior_from_runs

EARLIER = {"stiffness": 40.0, "plateau": 0.5, "initial_reward": 0.2, "noise_d": 4e-6}
CASES = {
    "like the earlier runs": EARLIER,
    "higher plateau (0.8)": dict(EARLIER, plateau=0.8),
    "faster rise (stiffness 160)": dict(EARLIER, stiffness=160.0),
    "slower rise (stiffness 10)": dict(EARLIER, stiffness=10.0),
    "lower start (R0 0.05, plateau 0.6)": dict(EARLIER, initial_reward=0.05, plateau=0.6),
}


def sde_runs(model: dict[str, float], seed: int, n_seeds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_seeds`` SDE runs of one setting (G = 8, 300 steps, measurement sd 0.03)."""
    ds = simulate_sde_runset(
        models={"m": model}, group_sizes=(8,), n_seeds=n_seeds, n_steps=300, measurement_sd=0.03, random_seed=seed
    )
    return [(ds.step.values.astype(float), ds.reward.isel(run=i).values) for i in range(ds.sizes["run"])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.15])
    ap.add_argument("--out", default="benchmarks/results/forecast_prior_conflict.json")
    args = ap.parse_args()
    earlier = sde_runs(EARLIER, 1, 6)
    results: dict[str, dict[str, object]] = {}
    for weight in args.weights:
        prior = prior_from_runs(earlier, robust_weight=weight)
        start = time.perf_counter()
        per_case: dict[str, object] = {}
        for name, model in CASES.items():
            coverage, ratio = [], []
            for i, (t, y) in enumerate(sde_runs(model, 7, 3)):
                for row in evaluate_run(t, y, fractions=(0.2, 0.3), prior=prior, seed=i):
                    coverage.append(float(row.get("coverage_obs", np.nan)))
                    ratio.append(float(row.get("rmse_ratio_single_exp", np.nan)))
            per_case[name] = {
                "coverage_per_forecast": [round(c, 3) for c in coverage],
                "mean_coverage": round(float(np.nanmean(coverage)), 3),
                "median_rmse_ratio_single_exp": round(float(np.nanmedian(ratio)), 3),
            }
            print(
                f"robust_weight {weight:g}  {name:36s} coverage mean {np.nanmean(coverage):.3f} "
                f"{np.round(coverage, 2)}  median RMSE / single exp {np.nanmedian(ratio):.3f}",
                flush=True,
            )
        results[f"{weight:g}"] = {"cases": per_case, "seconds": round(time.perf_counter() - start, 1)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
