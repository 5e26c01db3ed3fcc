"""Benchmark: the fit of long runs on every logged point against the fit of every n-th point.

Simulates one LLM's runs (``simulate_sde_runset``: 2 group sizes x 2 learning rates x
``--seeds``, ``--steps`` steps each, Adam's momentum 0.9, a rise over about a third of the
run), then fits the default model (mechanistic, i.i.d.) twice with the same sampler settings
and seed: on every point, and on the run set thinned by ``runset.thin.thin_runset`` (``--every``,
default the one ``fit`` suggests). For each: wall time (build + compile + sample), mean tree
depth, max R-hat, min bulk ESS, divergences, and the posterior mean, sd and 90% interval of
``log K``, ``p*`` and the noise sd against the truth, and the smoothed R^2 of the posterior mean
trajectory against the *full* run (the thinned fit's curve evaluated at every step).

Usage::

    .venv/bin/python benchmarks/fit_thinning.py [--steps 10000] [--seeds 2] [--every N]
        [--draws 200] [--tune 200] [--chains 2] [--skip-full] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bayes_grpo._io import write_text_atomic
from bayes_grpo.dynamics.simulate import simulate_sde_runset
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.metrics import smoothed_r2
from bayes_grpo.model import GRPODynamicsModel
from bayes_grpo.runset.thin import suggested_every, thin_runset

TRUTH = {"stiffness": 3.0, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 1e-12}
MEASUREMENT_SD = 0.08


def simulate(steps: int, seeds: int):
    return simulate_sde_runset(
        models={"m": TRUTH},
        group_sizes=(4, 16),
        learning_rates=(1e-4, 2e-4),
        momentum=0.9,
        convention="ema",
        n_seeds=seeds,
        n_steps=steps,
        measurement_sd=MEASUREMENT_SD,
        measurement_g_exponent=1.0,
        random_seed=3,
    )


def interval(x: np.ndarray) -> list[float]:
    return [float(np.quantile(x, 0.05)), float(np.quantile(x, 0.95))]


def fit_and_score(runs, full, args) -> dict:
    start = time.perf_counter()
    model = GRPODynamicsModel()
    model.fit(runs, draws=args.draws, tune=args.tune, chains=args.chains, random_seed=args.seed, progressbar=False)
    wall = time.perf_counter() - start
    conv = model.convergence().values
    post = model.idata.posterior
    out = {
        "points": int(np.isfinite(runs["reward"].values).sum()),
        "wall_s": wall,
        "mean_tree_depth": float(model.idata.sample_stats["tree_depth"].mean()),
        "max_r_hat": conv["max_r_hat"],
        "min_ess_bulk": conv["min_ess_bulk"],
        "divergences": conv["divergences"],
    }
    truths = {"log_stiffness": np.log(TRUTH["stiffness"]), "plateau": TRUTH["plateau"]}
    for name, truth in truths.items():
        x = post[name].values.ravel()
        lo, hi = interval(x)
        out[name] = {"mean": float(x.mean()), "sd": float(x.std()), "interval_90": [lo, hi], "truth": float(truth), "covers": bool(lo <= truth <= hi)}
    # every run's posterior-mean trajectory at every step of the full run set, scored against it
    steps = np.asarray(full["step"].values, dtype=float)
    thin_post = model._thinned_posterior()
    get = lambda v: thin_post[v].values.reshape(-1, thin_post.sizes["run"])[..., None]  # noqa: E731
    curves = reward_trajectory(steps, get("M_eff"), get("C_eff"), get("K_eff"), get("plateau_run"), get("initial_reward"))
    mean_curve = np.asarray(curves, dtype=float).mean(axis=0)  # (run, step)
    order = [list(map(str, thin_post["run"].values)).index(str(r)) for r in full["run"].values]
    r2 = [smoothed_r2(full["reward"].values[i], mean_curve[j]) for i, j in enumerate(order)]
    out["smoothed_r2_full_runs"] = [float(v) for v in r2]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--every", type=int, default=None)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--tune", type=int, default=200)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-full", action="store_true", help="fit the thinned run set only")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    full = simulate(args.steps, args.seeds)
    every = args.every or suggested_every(int(np.isfinite(full["reward"].values).sum(axis=1).max()))
    result = {"settings": {**vars(args), "every": every, "runs": int(full.sizes["run"])}}
    result["thinned"] = fit_and_score(thin_runset(full, every), full, args)
    print(json.dumps({"thinned": result["thinned"]}, indent=1), flush=True)
    if not args.skip_full:
        result["full"] = fit_and_score(full, full, args)
        print(json.dumps({"full": result["full"]}, indent=1), flush=True)
    if args.json:
        write_text_atomic(args.json, json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
