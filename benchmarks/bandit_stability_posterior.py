"""Bandit stability check: fit on stable runs only, predict the threshold, compare with a sweep.

1. Simulate softmax-bandit GRPO runs far below the stability threshold (``--fit-lrs`` x
   ``--fit-k-refs``, momentum ``--momentum``), and fit ``GRPODynamicsModel`` (mechanistic,
   iid likelihood) to them.
2. From the posterior, predict the critical ``K_ref`` at the sweep's learning rate by the
   exact discrete criterion (and the closed form): posterior median and 90% interval.
3. Sweep ``K_ref`` at that learning rate (:func:`bayes_grpo.bandit.experiments.sweep_k_ref`)
   and find the first ``K_ref`` at which most seeds stop converging.
4. Pass when the empirical threshold lies inside the 90% interval of the exact prediction
   (:func:`bayes_grpo.checks.stability.bandit_threshold_check`).

Example::

    .venv/bin/python benchmarks/bandit_stability_posterior.py --out benchmarks/results/bandit_stability.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from bayes_grpo._io import write_text_atomic
from bayes_grpo.checks.base import jsonable


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--fit-lrs", type=float, nargs="+", default=[0.1, 0.2])
    p.add_argument("--fit-k-refs", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--fit-seeds", type=int, default=2)
    p.add_argument("--fit-steps", type=int, default=300)
    p.add_argument(
        "--p-init",
        type=float,
        default=None,
        help="initial success probability of the fitted runs (default: the bandit's p_ref = 0.5); the "
        "stiffness is the local curvature at p*, so runs started near p* measure it without the bias of "
        "the nonlinear transient",
    )
    p.add_argument("--log-every", type=int, default=3)
    p.add_argument("--sweep-lr", type=float, default=0.4)
    p.add_argument("--sweep-k-refs", type=int, nargs="+", default=list(range(0, 13)))
    p.add_argument("--sweep-seeds", type=int, default=8)
    p.add_argument("--sweep-steps", type=int, default=2000)
    p.add_argument("--draws", type=int, default=300)
    p.add_argument("--tune", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/bandit_stability.json")
    args = p.parse_args()
    warnings.filterwarnings("ignore")

    from bayes_grpo.bandit import bandit_truth, simulate_bandit
    from bayes_grpo.bandit.experiments import sweep_k_ref
    from bayes_grpo.checks.stability import bandit_threshold_check
    from bayes_grpo.model import GRPODynamicsModel

    t0 = time.perf_counter()
    ds = simulate_bandit(
        k_ref=args.fit_k_refs,
        group_size=args.group_size,
        learning_rate=args.fit_lrs,
        momentum=args.momentum,
        seeds=args.fit_seeds,
        steps=args.fit_steps,
        p_init=args.p_init,
        seed=args.seed,
    )
    ds = ds.sel(step=ds["step"].values[:: args.log_every])[["reward"]]
    model = GRPODynamicsModel()
    model.fit(
        ds,
        draws=args.draws,
        tune=args.tune,
        chains=2,
        cores=1,
        random_seed=args.seed,
        progressbar=False,
    )
    t_fit = time.perf_counter() - t0
    conv = model.convergence()
    sweep = sweep_k_ref(
        args.sweep_k_refs,
        seeds=args.sweep_seeds,
        steps=args.sweep_steps,
        group_size=args.group_size,
        learning_rate=args.sweep_lr,
        momentum=args.momentum,
        seed=args.seed + 1,
        progress=False,
    )
    res = bandit_threshold_check(model, sweep)
    truth = bandit_truth(
        group_size=args.group_size,
        learning_rate=1.0,
        momentum=args.momentum,
        momentum_convention="heavy_ball",
        k_ref=1,
        beta=1.0,
    )
    log_k = np.asarray(model.idata.posterior["log_stiffness"].values, dtype=float).ravel()
    out = {
        "settings": vars(args),
        "passed": res.passed,
        "summary": res.summary,
        "values": res.values,
        "true_stiffness": truth["stiffness"],
        "fitted_stiffness_median": float(np.exp(np.median(log_k))),
        "fitted_stiffness_90": [float(np.exp(q)) for q in np.quantile(log_k, [0.05, 0.95])],
        "fit_seconds": t_fit,
        "convergence": conv.summary,
        "total_seconds": time.perf_counter() - t0,
    }
    write_text_atomic(args.out, json.dumps(jsonable(out), indent=2))
    print(json.dumps(jsonable(out), indent=2))


if __name__ == "__main__":
    main()
