"""The forecast's Metropolis refinement against importance weights alone, on the same forecasts.

When the Pareto k of the importance-sampling posterior stays above 0.7 after the adaptive
rounds, ``forecast.py`` refines the draws with a random-walk Metropolis ensemble
(``_metropolis_ensemble``). This script forecasts every run of a run set from ``--upto`` twice,
without and with the refinement, and prints each run's 90% band coverage of its logged rest,
RMSE and Pareto k (NaN where refined).

    .venv/bin/bayes-grpo ingest data/tiny -o /tmp/tiny.nc
    .venv/bin/python benchmarks/forecast_refinement.py /tmp/tiny.nc --upto 150
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayes_grpo.predict.forecast as forecast
from bayes_grpo.runset import load_runset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", help="run-set netCDF")
    ap.add_argument("--upto", type=float, required=True, help="last step of each run's prefix")
    ap.add_argument("--draws", type=int, default=500, help="forecast draws")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    ds = load_runset(args.runs)
    refine = forecast._metropolis_ensemble
    for label, fn in (("importance weights only", lambda *a, **k: None), ("with the Metropolis refinement", refine)):
        forecast._metropolis_ensemble = fn
        rows, start = [], time.time()
        for run in ds["run"].values:
            fc = forecast.forecast_in_runset(ds, str(run), args.upto, n_draws=args.draws, check_instability=False)
            rows.append((str(run), fc.attrs.get("backtest_coverage_0.9", np.nan), fc.attrs.get("backtest_rmse", np.nan), fc.attrs["pareto_k"]))
        forecast._metropolis_ensemble = refine
        print(f"{label} ({time.time() - start:.0f} s)")
        for run, cov, rmse, k in rows:
            print(f"  {run:40s} coverage {cov:.2f}  RMSE {rmse:.4f}  k {k:.2f}")
        print(f"  mean coverage {np.nanmean([r[1] for r in rows]):.3f}, mean RMSE {np.nanmean([r[2] for r in rows]):.4f}")


if __name__ == "__main__":
    main()
