"""Bandit stability check: fit on stable runs only, predict the threshold, compare with sweeps.

1. Fit runs (far below the stability threshold: ``--fit-k-refs`` small) with
   ``GRPODynamicsModel`` (mechanistic, iid likelihood). Two designs:

   ``--design perturbation`` (default): a pilot estimates the plateau from the logged
   reward, then runs start at ``plateau - amplitude`` and ``plateau + amplitude`` (two
   "models", one per side; :func:`bayes_grpo.bandit.experiments.perturbation_runs`), with
   rewards aligned to the policy that generated them. The check interpolates the two fitted
   stiffnesses to zero initial error (:func:`bayes_grpo.checks.stability.local_stiffness_draws`):
   the tangent stiffness that decides linear stability.

   ``--design transient``: runs from the reference policy (``--p-init``), one model, the
   fitted curve-level stiffness (the earlier design; it measures the secant stiffness of the
   bandit's nonlinear restoring force, ~0.32 instead of 0.25).
2. From the posterior, predict the critical ``K_ref`` by the exact discrete criterion (and
   the closed form) at each sweep setting ``--sweeps LR:MOMENTUM ...``.
3. Sweep ``K_ref`` at each setting (:func:`bayes_grpo.bandit.experiments.sweep_k_ref`) and
   find the first ``K_ref`` at which most seeds stop converging.
4. Pass when the empirical threshold lies inside the 90% interval of the exact prediction
   (:func:`bayes_grpo.checks.stability.bandit_threshold_check`).

Example::

    .venv/bin/python benchmarks/bandit_stability_posterior.py --out benchmarks/results/bandit_stability_local.json
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
    p.add_argument("--design", choices=("perturbation", "transient"), default="perturbation")
    p.add_argument(
        "--amplitude", type=float, default=0.08, help="perturbation design: |R0 - plateau|"
    )
    p.add_argument("--fit-lrs", type=float, nargs="+", default=[0.1, 0.2])
    p.add_argument("--fit-k-refs", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--momentum", type=float, default=0.5, help="momentum of the fitted runs")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--fit-seeds", type=int, default=4)
    p.add_argument("--fit-steps", type=int, default=120)
    p.add_argument(
        "--p-init",
        type=float,
        default=None,
        help="transient design: initial success probability (default the bandit's p_ref = 0.5)",
    )
    p.add_argument("--log-every", type=int, default=2)
    p.add_argument(
        "--sweeps",
        nargs="+",
        default=["0.4:0.5", "0.6:0.5", "0.4:0.0"],
        help="sweep settings LEARNING_RATE:MOMENTUM (heavy ball)",
    )
    p.add_argument("--sweep-max-k-ref", type=int, default=24)
    p.add_argument("--sweep-seeds", type=int, default=32)
    p.add_argument("--sweep-steps", type=int, default=4000)
    p.add_argument("--draws", type=int, default=300)
    p.add_argument("--tune", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/bandit_stability_local.json")
    args = p.parse_args()
    warnings.filterwarnings("ignore")

    from bayes_grpo.bandit import bandit_truth, simulate_bandit
    from bayes_grpo.bandit.experiments import perturbation_runs, sweep_k_ref
    from bayes_grpo.checks.stability import bandit_threshold_check, local_stiffness_draws
    from bayes_grpo.model import GRPODynamicsModel

    t0 = time.perf_counter()
    if args.design == "perturbation":
        ds = perturbation_runs(
            amplitude=args.amplitude,
            learning_rate=args.fit_lrs,
            k_ref=args.fit_k_refs,
            momentum=args.momentum,
            group_size=args.group_size,
            seeds=args.fit_seeds,
            steps=args.fit_steps,
            seed=args.seed,
        )
    else:
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
    plateau_estimate = ds.attrs.get("plateau_estimate")
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
    truth = bandit_truth(
        group_size=args.group_size,
        learning_rate=1.0,
        momentum=args.momentum,
        momentum_convention="heavy_ball",
        k_ref=1,
        beta=1.0,
    )
    log_k = np.asarray(model.idata.posterior["log_stiffness"].values, dtype=float)
    out = {
        "settings": vars(args),
        "true_stiffness": truth["stiffness"],
        "true_plateau": truth["plateau"],
        "plateau_estimate": plateau_estimate,
        "fitted_stiffness_per_model": {
            str(m): {
                "median": float(np.exp(np.median(log_k[..., j]))),
                "90": [float(np.exp(q)) for q in np.quantile(log_k[..., j], [0.05, 0.95])],
            }
            for j, m in enumerate(model.idata.posterior["log_stiffness"].coords["model"].values)
        },
        "fit_seconds": t_fit,
        "convergence": conv.summary,
    }
    if args.design == "perturbation":
        loc = local_stiffness_draws(model)
        k = loc["stiffness"]
        out["local_stiffness_median"] = float(np.median(k))
        out["local_stiffness_90"] = [float(q) for q in np.quantile(k, [0.05, 0.95])]
        out["per_model"] = loc["per_model"].reset_index().to_dict(orient="records")
    checks = []
    for j, spec in enumerate(args.sweeps):
        lr, mu = (float(x) for x in spec.split(":"))
        sweep = sweep_k_ref(
            list(range(0, args.sweep_max_k_ref + 1)),
            seeds=args.sweep_seeds,
            steps=args.sweep_steps,
            group_size=args.group_size,
            learning_rate=lr,
            momentum=mu,
            seed=args.seed + 10 + j,
            progress=False,
        )
        res = bandit_threshold_check(model, sweep)
        checks.append(
            {
                "learning_rate": lr,
                "momentum": mu,
                "passed": res.passed,
                "summary": res.summary,
                "values": res.values,
            }
        )
        print(res.summary, flush=True)
    out["checks"] = checks
    out["passed_all"] = all(c["passed"] for c in checks)
    out["total_seconds"] = time.perf_counter() - t0
    write_text_atomic(args.out, json.dumps(jsonable(out), indent=2))
    print(json.dumps(jsonable(out), indent=2))


if __name__ == "__main__":
    main()
