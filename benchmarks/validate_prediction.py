"""Validate prediction for new hyperparameters on the softmax bandit (issue 7).

Fit the hierarchical mechanistic model on bandit runs with K_ref in {1, 2, 4} (two
learning rates), then predict (a) K_ref = 6 (still stable) and (b) a new learning rate,
and check that the simulated mean trajectory (mean over many seeds of the bandit's exact
expected reward) lies inside the 90% band of the predicted mean trajectory at >= 90% of
steps. Also reported: the 90% band of the logged reward against the logged rewards of the
held-out runs.

    .venv/bin/python benchmarks/validate_prediction.py [--out benchmarks/results/validate_prediction]

Writes ``summary.json``, ``*.png`` and the prediction datasets under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bayes_grpo._io import write_text_atomic
from bayes_grpo.bandit import simulate_bandit
from bayes_grpo.predict.forecast import coverage
from bayes_grpo.predict.predict import plot_prediction, predict_run, save_prediction
from bayes_grpo.predict.summary import band


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default="benchmarks/results/validate_prediction")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--fit-seeds", type=int, default=2)
    ap.add_argument("--truth-seeds", type=int, default=64)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--tune", type=int, default=300)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from bayes_grpo.model import GRPODynamicsModel

    common = {
        "group_size": 8,
        "momentum": 0.5,
        "momentum_convention": "heavy_ball",
        "steps": args.steps,
    }
    train = simulate_bandit(
        k_ref=[1, 2, 4], learning_rate=[0.05, 0.1], seeds=args.fit_seeds, seed=args.seed, **common
    )
    start = time.perf_counter()
    model = GRPODynamicsModel()
    model.fit(
        train,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        random_seed=args.seed,
        progressbar=False,
        cores=1,
    )
    fit_s = time.perf_counter() - start
    model.save(out / "bandit_k124.nc")
    conv = model.convergence()
    results = {
        "fit_seconds": fit_s,
        "convergence": conv.summary,
        "convergence_passed": conv.passed,
        "cases": {},
    }
    cases = {
        "k_ref_6": {"k_ref": 6, "learning_rate": 0.1},
        "lr_0.2": {"k_ref": 2, "learning_rate": 0.2},
        "lr_0.075_k_ref_6": {"k_ref": 6, "learning_rate": 0.075},
    }
    for name, case in cases.items():
        held = simulate_bandit(
            k_ref=case["k_ref"],
            learning_rate=case["learning_rate"],
            seeds=args.truth_seeds,
            seed=args.seed + 1000,
            **common,
        )
        true_mean = held["expected_reward"].mean("run").values
        steps = held["step"].values.astype(float)
        pred = predict_run(
            model,
            learning_rate=case["learning_rate"],
            momentum=0.5,
            momentum_convention="heavy_ball",
            k_ref=case["k_ref"],
            group_size=8,
            steps=steps,
            model="softmax-bandit",
            seed=args.seed,
        )
        lo, hi = band(pred, kind="mean", hdi_prob=0.9)
        olo, ohi = band(pred, kind="obs", hdi_prob=0.9)
        logged = held["reward"].values
        obs_cov = float(np.mean([coverage(logged[i], olo, ohi) for i in range(logged.shape[0])]))
        inside = coverage(true_mean, lo, hi)
        truth = json.loads(held.attrs["truth"])
        tr = next(iter(truth["runs"].values()))
        results["cases"][name] = {
            **case,
            "true_mean_inside_90_band": inside,
            "goal_met": bool(inside >= 0.9),
            "logged_reward_coverage_90_obs_band": obs_cov,
            "rmse_predicted_vs_true_mean": float(
                np.sqrt(np.mean((pred["mean_mean"].values - true_mean) ** 2))
            ),
            "mean_band_width_mean": float(np.mean(hi - lo)),
            "predicted_regime": pred.attrs["regime"],
            "predicted_regime_prob": pred.attrs["regime_prob"],
            "true_regime": tr.get("regime"),
            "true_zeta": tr.get("zeta"),
            "prob_unstable_closed_form": pred.attrs["prob_unstable_closed_form"],
            "prob_unstable_exact": pred.attrs["prob_unstable_exact"],
            "stop_step": pred.attrs["stop_step"],
        }
        save_prediction(pred, out / f"{name}.nc")
        fig = plot_prediction(
            pred,
            truth=(steps, true_mean),
            observed=(steps, logged[0]),
            title=f"bandit, predicted {name} (fit on K_ref 1,2,4)",
        )
        fig.savefig(out / f"{name}.png", dpi=100)
        print(name, json.dumps(results["cases"][name]))
    write_text_atomic(out / "summary.json", json.dumps(results, indent=2, default=float))
    print(json.dumps(results, indent=2, default=float))


if __name__ == "__main__":
    main()
