"""Validate prediction of runs on a learning-rate schedule, on the softmax bandit (issue 7).

A fit of runs at constant rates (the training design of ``validate_prediction.py``: K_ref in
{1, 2, 4} x lr in {0.05, 0.1}, 2 seeds, 150 steps, G 8) predicts held-out runs whose rate
follows a schedule (Hugging Face's linear and cosine decay, with and without warm-up, as TRL
uses them). Each case is predicted twice from the same posterior: on the schedule
(``predict_run(..., lr_schedule=...)``: the recursion runs the schedule update by update), and
as if at the constant nominal rate (what ``predict`` gave before schedules). The truth is the
mean of the bandit's exact expected reward over ``--truth-seeds`` seeds of the same schedule.
Scored as in ``validate_prediction.py``: share of steps whose true mean lies inside the 90%
band of the predicted mean trajectory (goal >= 0.9), band width, RMSE of the posterior mean.
The held-out truth is never used to choose anything.

    nice -n 19 .venv/bin/python benchmarks/validate_schedule_prediction.py \\
        [--settings mu0.5 mu0.0] [--fit-dir /tmp/predict_fits] \\
        [--out benchmarks/results/validate_schedule_prediction]

Fits are shared with ``validate_prediction.py`` through ``--fit-dir`` (``fit_<setting>.nc``).
Writes ``summary.json`` and ``table.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from validate_prediction import (  # noqa: E402
    SETTINGS,
    add_fit_args,
    fit_or_load,
    mean_band_score,
    results_table,
    stop_step_scores,
)

from bayes_grpo._io import write_text_atomic  # noqa: E402
from bayes_grpo.bandit import simulate_bandit  # noqa: E402
from bayes_grpo.dynamics.schedule import lr_multipliers  # noqa: E402
from bayes_grpo.predict.predict import predict_run  # noqa: E402

#: Held-out cases: name -> (learning rate, K_ref, schedule, warm-up steps). The decay runs
#: to 0 at the end of the 150-step run (TRL's default: over the whole training).
CASES: dict[str, tuple[float, int, str, int]] = {
    "linear": (0.1, 2, "linear", 0),
    "linear_warmup15": (0.1, 2, "linear", 15),
    "cosine_warmup15": (0.1, 2, "cosine", 15),
    "constant_warmup30": (0.1, 2, "constant", 30),
    "lr0.2_linear_warmup15": (0.2, 2, "linear", 15),
    "k_ref4_cosine": (0.1, 4, "cosine", 0),
}
#: How each case is predicted: on its schedule, or as if at the constant nominal rate.
VARIANTS: tuple[str, ...] = ("schedule", "constant rate")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default="benchmarks/results/validate_schedule_prediction")
    ap.add_argument("--settings", nargs="+", default=["mu0.5", "mu0.0"], choices=sorted(SETTINGS))
    add_fit_args(ap)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    common = {"group_size": 8, "momentum_convention": "heavy_ball", "steps": args.steps}
    results: dict[str, object] = {"command": " ".join(sys.argv), "settings": {}}
    rows = []
    start = time.perf_counter()
    for sname in args.settings:
        setting = SETTINGS[sname]
        model, fit_s = fit_or_load(sname, setting, args, common)
        sres: dict[str, object] = {
            **setting,
            "fit_seconds": fit_s,
            "convergence": model.convergence().summary,
            "cases": {},
        }
        for cname, (rate, k_ref, kind, warm) in CASES.items():
            schedule = lr_multipliers(kind, args.steps, warmup_steps=warm)
            held = simulate_bandit(
                k_ref=k_ref,
                learning_rate=rate,
                seeds=args.truth_seeds,
                seed=args.seed + 1000,
                momentum=setting["momentum"],
                p_init=setting["p_init"],
                clip_eps=setting["clip_eps"],
                lr_multipliers=schedule,
                **common,
            )
            true_mean = held["expected_reward"].values.mean(axis=0)
            steps = held["step"].values.astype(float)
            cres: dict[str, object] = {
                "learning_rate": rate,
                "k_ref": k_ref,
                "schedule": kind,
                "warmup_steps": warm,
                "clip_ratio_max_of_mean": float(held["clip_ratio"].mean("run").max()),
                "true_final": float(true_mean[-1]),
                "variants": {},
            }
            for vname in VARIANTS:
                pred = predict_run(
                    model,
                    learning_rate=rate,
                    momentum=setting["momentum"],
                    momentum_convention="heavy_ball",
                    k_ref=k_ref,
                    group_size=8,
                    steps=steps,
                    model="softmax-bandit",
                    seed=args.seed,
                    lr_schedule=schedule if vname == "schedule" else None,
                    lr_schedule_label=kind,
                )
                v = mean_band_score(pred, true_mean) | {
                    **stop_step_scores(pred),
                    "law": str(pred.attrs["law"]),
                }
                cres["variants"][vname] = v  # type: ignore[index]
                rows.append((sname, cname, vname, v))
            sres["cases"][cname] = cres  # type: ignore[index]
            print(sname, cname, {k: round(v["true_mean_inside_90_band"], 2) for k, v in cres["variants"].items()}, flush=True)  # type: ignore[union-attr]
        results["settings"][sname] = sres  # type: ignore[index]
    results["seconds"] = time.perf_counter() - start
    lines = results_table(rows, "held-out case", "predicted")
    write_text_atomic(out / "table.md", "\n".join(lines) + "\n")
    write_text_atomic(out / "summary.json", json.dumps(results, indent=1, default=str))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
