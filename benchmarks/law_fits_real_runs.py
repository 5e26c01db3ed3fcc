"""Least-squares fits of the three reward laws to the public GRPO logs in ../shared/real_runs.

For each run (csv/ID.csv, reward column from sources.json): the oscillator law (v0 = 0),
the single exponential and the logistic; raw R^2 of each, the noise ceiling, the smoothed
R^2 of the oscillator, the trend test, the fitted damping ratio and the BIC winner.
Usage:

    .venv/bin/python benchmarks/law_fits_real_runs.py [REAL_RUNS_DIR]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_grpo.dynamics import fit_all
from bayes_grpo.metrics import has_trend, noise_ceiling_r2, smoothed_r2

DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "real_runs"


def main(root: Path = DEFAULT_DIR) -> pd.DataFrame:
    sources = json.loads((root / "sources.json").read_text())
    rows = []
    start = time.perf_counter()
    for src in sources:
        path = root / "csv" / f"{src['short_id']}.csv"
        if not path.exists():
            continue
        frame = pd.read_csv(path)
        column = src.get("csv_reward_column") or "reward"
        t = frame["step"].to_numpy(float)
        y = pd.to_numeric(frame[column], errors="coerce").to_numpy(float)
        ok = np.isfinite(t) & np.isfinite(y)
        t, y = t[ok], y[ok]
        if y.size < 10:
            continue
        fits = fit_all(t, y)
        osc = fits["oscillator"]
        rows.append(
            {
                "run": src["short_id"],
                "n": osc.n,
                "trend": has_trend(t, y),
                "ceiling": noise_ceiling_r2(y, steps=t),
                "r2_osc": osc.r2,
                "r2_exp": fits["single_exponential"].r2,
                "r2_logi": fits["logistic"].r2,
                "sm_r2_osc": smoothed_r2(y, osc.predict(t)),
                "zeta": osc.params["zeta"],
                "bic_best": min(fits, key=lambda k: fits[k].bic),
            }
        )
    table = pd.DataFrame(rows).set_index("run")
    with pd.option_context(
        "display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format
    ):
        print(table)
    print(f"\n{len(table)} runs fitted in {time.perf_counter() - start:.1f} s")
    print("BIC winners:", table["bic_best"].value_counts().to_dict())
    trend = table[table["trend"]]
    print(
        f"runs with a trend: {len(trend)}; median R^2 oscillator {trend['r2_osc'].median():.3f}, "
        f"single exponential {trend['r2_exp'].median():.3f}, logistic {trend['r2_logi'].median():.3f}, "
        f"noise ceiling {trend['ceiling'].median():.3f}, smoothed (oscillator) {trend['sm_r2_osc'].median():.3f}"
    )
    return table


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR)
