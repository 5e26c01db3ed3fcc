"""Where the predictor misses on its own training settings (issue 7, bandit validation).

For each fit cached by ``benchmarks/validate_prediction.py`` (``fit_<setting>.nc``) and each
training setting (K_ref x learning rate), the predictor's trajectory for that setting (exact
recursion, LLM-level plateau and initial reward, as for a new run:
:func:`bayes_grpo.predict.discrepancy.training_predictor_trajectories`) against the mean of
the setting's runs, in units of the rise ``p* - R0``: the mean residual over the rise
(progress < 0.95; positive = the data rise faster than predicted) and over the plateau, next
to the lag-gain product ``a K_ref``. It shows whether the law's misfit grows, or changes
sign, along the training design, i.e. whether a discrepancy term estimated on the training
settings could foresee the held-out ones.

    .venv/bin/python benchmarks/prediction_residuals_by_setting.py [--fit-dir /tmp/predict_fits]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def residual_table(path: Path) -> list[dict]:
    """One row per training setting of the fit saved at ``path``."""
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.predict.discrepancy import (
        SETTING_COORDS,
        setting_labels,
        training_predictor_trajectories,
    )

    fitted = GRPODynamicsModel.load(path)
    curves, r0, plateau, _ = training_predictor_trajectories(fitted, law="recursion")
    post, runs = fitted.idata.posterior, fitted.runset
    run_ids = [str(r) for r in post["run"].values]
    reward = runs["reward"].sel(run=run_ids).transpose("run", "step").values
    coords = {c: runs[c].sel(run=run_ids).values for c in SETTING_COORDS if c in runs.coords}
    labels = setting_labels(coords, len(run_ids))
    gain = post["a"].mean(("chain", "draw")).values
    lag = runs["k_ref"].sel(run=run_ids).values.astype(float)
    lr = runs["learning_rate"].sel(run=run_ids).values.astype(float)
    rise = plateau - r0
    resid = (reward - curves) / rise[:, None]
    progress = (curves - r0[:, None]) / rise[:, None]
    rows = []
    for label in sorted(set(labels)):
        idx = [i for i, lab in enumerate(labels) if lab == label]
        mean_resid = np.nanmean(resid[idx], axis=0)
        rising = progress[idx[0]] < 0.95
        rows.append(
            {
                "k_ref": lag[idx[0]],
                "learning_rate": lr[idx[0]],
                "a_k_ref": gain[idx[0]] * lag[idx[0]],
                "runs": len(idx),
                "mean_residual_rise": float(np.nanmean(mean_resid[rising])) if rising.any() else float("nan"),
                "mean_residual_plateau": float(np.nanmean(mean_resid[~rising])) if (~rising).any() else float("nan"),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit-dir", default="/tmp/predict_fits", help="fits cached by validate_prediction.py")
    args = ap.parse_args()
    fits = sorted(Path(args.fit_dir).glob("fit_*.nc"))
    if not fits:
        raise SystemExit(f"{args.fit_dir}: no fit_*.nc (run benchmarks/validate_prediction.py --fit-only first)")
    for path in fits:
        print(path.stem.removeprefix("fit_"))
        print("  K_ref  lr      a K_ref  runs  mean residual / rise: rise  plateau")
        for r in residual_table(path):
            print(
                f"  {r['k_ref']:5.0f}  {r['learning_rate']:.3f}  {r['a_k_ref']:7.3f}  {r['runs']:4d}"
                f"  {r['mean_residual_rise']:+27.4f}  {r['mean_residual_plateau']:+.4f}"
            )


if __name__ == "__main__":
    main()
