"""Fit the hierarchical model to the public GRPO logs and compare with least-squares fits of the same law.

For every run in ``../shared/real_runs`` (one run per file in ``csv/``, settings from
``sources.json``) this reports raw R^2, the noise ceiling (from first differences) and the
smoothed R^2 (vs a centred moving average of 10% of the run) of the posterior-mean
trajectory, for both parameterisations, next to a least-squares point fit of the same law:

- phenomenological: :func:`bayes_grpo.dynamics.lsq.fit_oscillator` (free ``zeta, w0``,
  ``v0 = 0``), the same law as the phenomenological model;
- mechanistic: least squares of the mechanistic law itself (free ``p*, R0, a``; ``M, C,
  K_eff`` from ``a`` and the run's momentum and ``k_ref``), multi-start over ``log a``.

Each run is its own "model" (LLM level) so every run gets its own plateau and curvature;
the curvature is still pooled hierarchically across runs. All runs use AdamW: momentum 0.9
with the EMA convention and ``k_ref = 1`` are given as documented defaults. A run "passes"
when it has a visible trend (:func:`bayes_grpo.metrics.has_trend`) and its Bayesian
smoothed R^2 is at least the least-squares one minus 0.01; runs without a trend are
reported as such.

Usage::

    .venv/bin/python benchmarks/real_runs_fit.py [--real-runs ../shared/real_runs]
        [--draws 500 --tune 500 --chains 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from bayes_grpo import metrics
from bayes_grpo.dynamics.coefficients import gain, oscillator_coefficients
from bayes_grpo.dynamics.lsq import fit_oscillator
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.runset import make_runset

MOMENTUM, CONVENTION, K_REF = 0.9, "ema", 1.0


def load_real_runs(root: Path):
    sources = json.loads((root / "sources.json").read_text())
    curves, meta = {}, {}
    for s in sources:
        run = s["short_id"]
        frame = pd.read_csv(root / "csv" / f"{run}.csv")
        col = s.get("csv_reward_column") or "reward"
        curve = frame[["step", col]].dropna().drop_duplicates("step").set_index("step").sort_index()
        curve.columns = ["reward"]
        g = re.match(r"\s*(\d+)", str(s.get("G", "")))
        lr = s.get("learning_rate")
        meta[run] = {
            "model": run,
            "group_size": float(g.group(1)) if g else np.nan,
            "learning_rate": float(lr) if isinstance(lr, int | float) else np.nan,
            "source": f"real_runs:{run}",
        }
        curves[run] = curve
    return make_runset(curves, meta)


def lsq_mechanistic(t, y, eta, momentum=MOMENTUM, convention=CONVENTION, k_ref=K_REF):
    """Least squares of the mechanistic law: free p*, R0, log a (multi-start)."""
    ok = np.isfinite(y)
    t, y = t[ok], y[ok]
    span = max(t.max(), 1.0)

    def curve(tt, p):
        m, c, k = oscillator_coefficients(np.exp(p[2]), momentum, k_ref)
        return reward_trajectory(tt, m, c, k, p[0], p[1])

    best = None
    k_early = max(1, len(y) // 10)
    for log_a in np.linspace(np.log(1e-3 / span), np.log(min(50.0 / span, (1 - momentum) / max(k_ref, 1e-9) * 0.999)), 12):
        res = least_squares(lambda p: curve(t, p) - y, [np.mean(y[-k_early:]), np.mean(y[:k_early]), log_a])
        if best is None or res.cost < best.cost:
            best = res
    return curve(t, best.x), float(np.exp(best.x[2]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real-runs", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "real_runs")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--sampler", default="pymc", choices=("pymc", "nutpie"))
    parser.add_argument("--parameterisations", default="phenomenological,mechanistic")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from bayes_grpo.model import GRPODynamicsModel

    ds = load_real_runs(args.real_runs)
    steps = ds.step.values.astype(float)
    out = {}
    defaults = {"momentum": MOMENTUM, "momentum_convention": CONVENTION, "k_ref": K_REF}
    for par in args.parameterisations.split(","):
        model = GRPODynamicsModel(model_config={"hyperparameter_defaults": defaults, "alpha": {"fixed": 1.0}}, parameterisation=par)
        t0 = time.perf_counter()
        model.fit(ds, draws=args.draws, tune=args.tune, chains=args.chains, sampler=args.sampler, random_seed=0, progressbar=False)
        wall = time.perf_counter() - t0
        summary = model.run_summary()
        rows = []
        for run in summary.index:
            y = ds.reward.sel(run=run).values
            ok = np.isfinite(y)
            if par == "phenomenological":
                fit = fit_oscillator(steps[ok], y[ok])
                lsq_curve = fit.fitted
            else:
                eta = float(gain(ds.learning_rate.sel(run=run).item(), 1.0, MOMENTUM, CONVENTION))
                lsq_curve, _ = lsq_mechanistic(steps, y, eta)
            lsq_s = metrics.smoothed_r2(y[ok], lsq_curve)
            r = summary.loc[run]
            trend = bool(r["has_trend"])
            rows.append(
                {
                    "run": run,
                    "has_trend": trend,
                    "r2_raw": r["r2_raw"],
                    "r2_noise_ceiling": r["r2_noise_ceiling"],
                    "r2_smoothed": r["r2_smoothed"],
                    "lsq_r2_raw": metrics.r2(y[ok], lsq_curve),
                    "lsq_r2_smoothed": lsq_s,
                    "zeta": r["zeta"],
                    "verdict": ("pass" if r["r2_smoothed"] >= lsq_s - 0.01 else "FAIL") if trend else "no trend",
                }
            )
        table = pd.DataFrame(rows).set_index("run")
        conv = model.convergence()
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(f"\n== {par}: {wall:.0f} s, convergence: {conv.summary}")
            print(table.round(3).to_string())
        out[par] = {"wall_s": wall, "convergence": conv.values, "runs": table.reset_index().to_dict(orient="records")}
        if args.json:
            from bayes_grpo.checks.base import jsonable

            Path(args.json).write_text(json.dumps(jsonable(out), indent=1))


if __name__ == "__main__":
    main()
