"""Calibration: do 90% credible intervals cover the true p*, eta K, zeta and D in 80-98% of datasets?

Simulates ``--n`` datasets from the SDE (``simulate_sde_runset``) with truth drawn at random
per dataset (curvature K, plateau, initial reward, noise intensity D, measurement noise),
fits each with :class:`~bayes_grpo.model.GRPODynamicsModel` (mechanistic; with the
state-space likelihood ``D`` is the SDE's noise intensity; with ``--likelihood iid`` the data
carry measurement noise only and ``D`` is the residual variance times ``G``), and counts how often the central 90%
interval contains the truth. Each dataset: one LLM, G in {4, 16} x two learning rates
(4 runs), Adam-like momentum (EMA, beta1 = 0.9), ``k_ref`` 1, ``--steps`` steps.

Usage::

    .venv/bin/python benchmarks/calibrate_recovery.py --n 20 [--likelihood state_space|iid]
        [--draws 500 --tune 500 --chains 2 --sampler pymc|nutpie] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bayes_grpo.dynamics.simulate import runset_truth, simulate_sde_runset
from bayes_grpo.model import GRPODynamicsModel


def draw_truth(rng: np.random.Generator) -> dict:
    """Random truth for one dataset (a = eta_eff K in [2e-3, 2e-2] at lr 1e-3)."""
    return {
        "stiffness": float(np.exp(rng.uniform(np.log(20.0), np.log(200.0)))),
        "plateau": float(rng.uniform(0.5, 0.9)),
        "initial_reward": float(rng.uniform(0.05, 0.3)),
        "noise_d": float(np.exp(rng.uniform(np.log(1e-6), np.log(1e-5)))),
        "model_size": 1e9,
    }


def one(i: int, args, rng: np.random.Generator) -> dict:
    spec = draw_truth(rng)
    msd = float(rng.uniform(0.02, 0.06))
    if args.likelihood == "iid":
        # The iid model's D is the residual variance times G^alpha: simulate measurement
        # noise only (sd msd / sqrt(G)), so its true D is msd^2.
        spec["noise_d"] = 1e-14
    ds = simulate_sde_runset(
        models={"m": spec},
        group_sizes=(4, 16),
        learning_rates=(1e-3, 2e-3),
        momentum=0.9,
        convention="ema",
        n_seeds=1,
        n_steps=args.steps,
        measurement_sd=msd,
        measurement_g_exponent=1.0,
        random_seed=int(rng.integers(1 << 31)),
    )
    truth = runset_truth(ds)
    model = GRPODynamicsModel(likelihood=args.likelihood)
    t0 = time.perf_counter()
    model.fit(ds, draws=args.draws, tune=args.tune, chains=args.chains, sampler=args.sampler, random_seed=i, progressbar=False, cores=1)
    wall = time.perf_counter() - t0
    post = model.idata.posterior
    run0 = str(ds.run.values[0])
    targets = {
        "p_star": (post["plateau"].sel(model="m").values, truth["models"]["m"]["plateau"]),
        "eta_K": (post["a"].sel(run=run0).values, truth["runs"][run0]["a"]),
        "zeta": (post["zeta"].sel(run=run0).values, truth["runs"][run0]["zeta"]),
    }
    true_d = truth["models"]["m"]["noise_d"] if args.likelihood == "state_space" else msd**2
    targets["D"] = (post["noise_d"].sel(model="m").values, true_d)
    row = {"dataset": i, "seconds": wall, "converged": bool(model.convergence().passed)}
    for name, (draws, value) in targets.items():
        lo, hi = np.quantile(np.ravel(draws), [0.05, 0.95])
        row[name] = {"truth": value, "lo": float(lo), "hi": float(hi), "covered": bool(lo <= value <= hi)}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--likelihood", default="state_space", choices=("state_space", "iid"))
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--sampler", default="pymc", choices=("pymc", "nutpie"))
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    for i in range(args.n):
        row = one(i, args, rng)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"settings": vars(args), "rows": rows}, fh, indent=1)
    names = [k for k in rows[0] if isinstance(rows[0][k], dict)]
    summary = {n: float(np.mean([r[n]["covered"] for r in rows])) for n in names}
    summary["converged"] = float(np.mean([r["converged"] for r in rows]))
    print("coverage of central 90% intervals:", json.dumps(summary))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"settings": vars(args), "rows": rows, "coverage": summary}, fh, indent=1)


if __name__ == "__main__":
    main()
