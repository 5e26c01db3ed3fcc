#!/usr/bin/env python
"""Fit the shipped posteriors in ``models/``: ``tiny.nc`` (real TRL runs) and ``bandit.nc``
(the exact softmax bandit, known truth).

- ``tiny``: the demo's fit (:func:`bayes_grpo.report.demo.fit_example_runs`) of the shipped
  example runs in ``data/tiny``: the runs of the demo's groups that no failure-mode diagnosis
  leaves out, :class:`~bayes_grpo.report.demo.DemoSettings` (2 chains x 1000 draws, 500 tuning
  steps, seed 0).
- ``bandit``: softmax-bandit GRPO runs made here from a seed (:func:`bandit_runs`: the
  simulator's defaults, heavy-ball momentum 0.5, G 8, ``K_ref`` 1, 2, 4 x learning rate 0.05,
  0.1, 2 seeds, 150 steps), fitted with the same sampler settings; the truth of every run is in
  the run set's ``attrs["truth"]``, and ``bandit_truth_mean`` gives the true mean trajectory of
  any setting for checking a prediction.

Both are the mechanistic law with i.i.d. residuals and PyMC NUTS, saved by
``GRPODynamicsModel.save``, so every verb that reads a posterior takes them (``predict``,
``stability --posterior``, ``phase-diagram``, ``diagnose --posterior``, ``forecast --prior``,
``report``). A saved fit records the model and package versions and ``load`` refuses another
version: after either changes, rerun this script (``tests/test_example_models.py`` fails until
then). ``--summary`` prints the tables of ``models/README.md`` from the files.

Usage::

    python scripts/make_example_models.py                 # refuses to replace an existing file
    python scripts/make_example_models.py --force         # refit both and replace them
    python scripts/make_example_models.py --only bandit --force
    python scripts/make_example_models.py --summary
    python scripts/make_example_models.py --bandit-check  # predict from bandit.nc vs the truth
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "models"
EXAMPLES: tuple[str, ...] = ("tiny", "bandit")
#: The bandit example's runs: the simulator's defaults at these settings.
BANDIT_RUNS: dict[str, object] = {
    "k_ref": [1, 2, 4],
    "learning_rate": [0.05, 0.1],
    "momentum": 0.5,
    "momentum_convention": "heavy_ball",
    "group_size": 8,
    "steps": 150,
    "seeds": 2,
    "seed": 0,
}
#: Seeds of the bandit's true mean trajectory (mean of the exact expected reward over seeds).
TRUTH_SEEDS: int = 1024


def model_file(name: str) -> Path:
    return MODELS / f"{name}.nc"


def bandit_runs(**changes: object):
    """The bandit example's run set (deterministic: same seed, same runs); ``changes`` override
    :data:`BANDIT_RUNS`, e.g. ``k_ref=6, seeds=TRUTH_SEEDS`` for a held-out setting's truth."""
    from bayes_grpo.bandit import simulate_bandit

    return simulate_bandit(**{**BANDIT_RUNS, **changes})


def bandit_truth_mean(**setting: object):
    """True mean reward per step of a bandit setting (``k_ref``, ``learning_rate``, ...): the
    exact expected reward averaged over :data:`TRUTH_SEEDS` seeds; a pandas Series by step."""
    runs = bandit_runs(**{"seeds": TRUTH_SEEDS, "seed": 1000, **setting})
    return runs["expected_reward"].mean("run").to_series()


#: Settings ``bandit_prediction_scores`` checks by default: two the fit saw, three it did not.
BANDIT_CHECKS: tuple[dict[str, float], ...] = (
    {"k_ref": 2, "learning_rate": 0.1},
    {"k_ref": 1, "learning_rate": 0.05},
    {"k_ref": 6, "learning_rate": 0.1},
    {"k_ref": 2, "learning_rate": 0.2},
    {"k_ref": 6, "learning_rate": 0.075},
)


def bandit_clip_epsilon() -> float:
    """The PPO clip range the bandit example's runs ran with (their truth's settings)."""
    import json

    return float(json.loads(bandit_runs(steps=1, seeds=1).attrs["truth"])["settings"]["clip_eps"])


def bandit_prediction_scores(setting: dict[str, float], seed: int = 0, *, clip: bool = False) -> dict[str, float]:
    """How ``predict`` from ``bandit.nc`` meets the truth at a bandit ``setting``: the share of
    steps with the true mean inside the 90% band of the predicted mean, the RMSE of the
    posterior mean and the band's mean width. ``clip``: predict with the runs' PPO clip range
    (``predict --clip-epsilon``, :func:`bandit_clip_epsilon`)."""
    import numpy as np

    from bayes_grpo.predict.predict import predict_run
    from bayes_grpo.predict.summary import band

    truth = bandit_truth_mean(**setting)
    pred = predict_run(
        str(model_file("bandit")),
        momentum=BANDIT_RUNS["momentum"],
        momentum_convention=BANDIT_RUNS["momentum_convention"],
        group_size=BANDIT_RUNS["group_size"],
        steps=truth.index.to_numpy(dtype=float),
        seed=seed,
        clip_epsilon=bandit_clip_epsilon() if clip else None,
        **setting,
    )
    lo, hi = band(pred, kind="mean", hdi_prob=0.9)
    true_mean = truth.to_numpy()
    return {
        "inside_90_band": float(np.mean((true_mean >= lo) & (true_mean <= hi))),
        "rmse": float(np.sqrt(np.mean((pred["mean_mean"].to_numpy() - true_mean) ** 2))),
        "band_width": float(np.mean(hi - lo)),
    }


def fit_example(name: str, settings):
    """The fitted model of one example (``tiny`` or ``bandit``)."""
    from bayes_grpo.report.demo import fit_example_runs

    if name == "tiny":
        return fit_example_runs(REPO / "data" / "tiny", settings=settings).model
    model = settings.fit(bandit_runs())
    print(f"      convergence: {model.convergence().summary}")
    return model


def summary_lines(model, seconds: float | None = None) -> list[str]:
    """Markdown lines describing a fitted example model: runs, convergence, per-run fit."""
    import numpy as np

    conv = model.convergence()
    columns = [
        "group_size",
        "learning_rate",
        "n_obs",
        "p_star",
        "R0",
        "zeta",
        "r2_raw",
        "r2_noise_ceiling",
        "r2_smoothed",
        "r_hat",
    ]
    table = model.run_summary()[columns]
    k_ref = model.runset["k_ref"].to_series()
    table.insert(2, "k_ref", [k_ref.get(run) for run in table.index])
    post = model.idata.posterior
    lines = [
        f"- runs fitted: {len(table)}; draws: {post.sizes['chain']} chains x {post.sizes['draw']}; "
        f"sampler settings: {model.sampler_config}",
        f"- fit settings: {model.settings}",
        f"- convergence: {conv.summary}",
    ]
    if seconds is not None:
        lines.append(f"- fit wall time: {seconds:.0f} s")
    lines += ["", "| run | " + " | ".join(str(c) for c in table.columns) + " |"]
    lines.append("|---" * (len(table.columns) + 1) + "|")
    for run, row in table.iterrows():
        cells = [
            f"{v:.3g}" if isinstance(v, float | np.floating) else str(v) for v in row.to_numpy()
        ]
        lines.append(f"| {run} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=EXAMPLES, action="append", help="one example (repeatable)")
    parser.add_argument("--force", action="store_true", help="replace existing files")
    parser.add_argument(
        "--summary", action="store_true", help="print the summaries of the saved files and stop"
    )
    parser.add_argument(
        "--bandit-check",
        action="store_true",
        help="print how predict from bandit.nc meets the truth at fitted and held-out settings",
    )
    args = parser.parse_args(argv)
    names = args.only or list(EXAMPLES)
    if args.bandit_check:
        fitted = {(k, r) for k in BANDIT_RUNS["k_ref"] for r in BANDIT_RUNS["learning_rate"]}
        eps = bandit_clip_epsilon()
        print(
            "| setting | fitted? | inside 90% band | RMSE | band width | with `--clip-epsilon "
            f"{eps:g}`: inside / RMSE / width |\n|---|---|---|---|---|---|"
        )
        for setting in BANDIT_CHECKS:
            v = bandit_prediction_scores(setting)
            c = bandit_prediction_scores(setting, clip=True)
            seen = "yes" if (setting["k_ref"], setting["learning_rate"]) in fitted else "no"
            print(
                f"| `K_ref` {setting['k_ref']}, lr {setting['learning_rate']:g} | {seen} | "
                f"{v['inside_90_band']:.2f} | {v['rmse']:.4f} | {v['band_width']:.3f} | "
                f"{c['inside_90_band']:.2f} / {c['rmse']:.4f} / {c['band_width']:.3f} |"
            )
        return 0

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.report.demo import DemoSettings

    if args.summary:
        for name in names:
            print(f"\n## {name}.nc\n")
            print("\n".join(summary_lines(GRPODynamicsModel.load(model_file(name)))))
        return 0
    existing = [str(model_file(n)) for n in names if model_file(n).exists()]
    if existing and not args.force:
        print(f"{', '.join(existing)} exist; pass --force to refit and replace", file=sys.stderr)
        return 1
    MODELS.mkdir(parents=True, exist_ok=True)
    for name in names:
        start = time.perf_counter()
        model = fit_example(name, DemoSettings())
        seconds = time.perf_counter() - start
        path = model.save(model_file(name), overwrite=args.force)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
        print("\n".join(summary_lines(model, seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
