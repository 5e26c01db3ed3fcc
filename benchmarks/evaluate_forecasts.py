"""Evaluate forecasts of runs in progress (issue 7): coverage and RMSE vs baselines.

For each run set (softmax bandit, simulated SDE runs, the tiny-model TRL runs in data/,
the real public logs in ../shared/real_runs), every run is forecast from the first 20%,
30% and 50% of its steps, with the other runs of the same LLM as the prior (empirical
Bayes, leave-this-run-out: :func:`bayes_grpo.predict.forecast.population_prior_for_run`;
the weak data-scaled prior where fewer than two such runs exist), and scored on the rest:
coverage of the 90% band of the logged reward, and RMSE against the single-exponential
and logistic least-squares baselines fitted on the same prefix
(:mod:`bayes_grpo.predict.evaluate`). Where the true mean trajectory is known (bandit: the
mean over seeds of the exact expected reward of the setting; SDE: the closed-form mean)
the coverage of the mean band and the RMSE against it are reported too.

    .venv/bin/python benchmarks/evaluate_forecasts.py [--sets bandit sim tiny real] [--out DIR]
        [--likelihood state_space|iid] [--prior-kind mixture|gaussian] [--no-bounds]
        [--no-calibrate] [--calibration split|leave_one_out] [--fractions 0.2 0.3 0.5]
        [--bandit-prompts 16]

Rewards known to be success rates (bandit: expected success of the softmax policy; tiny:
the next-digit accuracy) are forecast with the bounded-reward noise shape ``(0, 1)``
(:func:`bayes_grpo.predict.forecast.noise_shape`); the SDE simulations and the real logs
(rewards of unknown range: some are scores in [-10, 11]) with constant noise. With
calibration (default) the table also has ``band_scale`` and ``coverage_obs_calibrated``:
the 90% band scaled by the factor that gives 90% coverage on backtests of the *other half*
of the runs (split conformal, :func:`bayes_grpo.predict.evaluate.evaluate_forecasts`), or
with ``--calibration leave_one_out`` on backtests of *all the other* runs, each with a prior
from the runs other than itself and the evaluated one: what ``bayes-grpo forecast
--calibrate`` does for a user (n - 1 backtests per run and prefix instead of 2).

Writes ``<set>_runs.csv`` (one row per run and prefix) and ``<set>_summary.csv`` and
``summary.json`` under ``--out`` (default benchmarks/results/evaluate_forecasts).

With ``--calibration leave_one_out`` (or ``--no-calibrate``) each run's rows depend on that run
alone (its forecasts, its calibration's backtests of the others, seeded by run id), so the set
is evaluated run by run: a progress line per run, and the rows so far kept in
``<set>_runs.partial.csv`` (its settings in ``<set>_runs.partial.json``), which ``--resume``
continues after an interruption (the tiny set's leave-one-out: 16 x 16 forecasts per prefix,
hours on the 2-core machine). The split calibration needs every run at once.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo._io import write_atomic, write_text_atomic
from bayes_grpo.predict.evaluate import evaluate_forecasts, summarise_evaluation
from bayes_grpo.predict.forecast import population_prior_for_run

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "real_runs"


def bandit_set(seed: int, n_prompts: int = 16) -> tuple[xr.Dataset, xr.DataArray]:
    """The bandit run set: K_ref 1, 2, 4 x lr 0.05, 0.1, 4 seeds, G = 8, ``n_prompts``
    groups per step (16, the simulator's default: 128 completions; more prompts make the
    logged reward less noisy, the exact expected reward is the same law)."""
    from bayes_grpo.bandit import simulate_bandit

    ds = simulate_bandit(
        k_ref=[1, 2, 4],
        learning_rate=[0.05, 0.1],
        group_size=8,
        momentum=0.5,
        seeds=4,
        steps=150,
        n_prompts=n_prompts,
        seed=seed,
    )
    # true mean trajectory of a setting: mean over its seeds of the exact expected reward
    # (4 seeds here; the bandit's own policy noise makes each run's expected reward differ)
    key = [f"{k}-{lr}" for k, lr in zip(ds["k_ref"].values, ds["learning_rate"].values)]
    er = ds["expected_reward"]
    mean = er.groupby(xr.DataArray(key, dims="run", name="setting")).mean("run")
    true = (
        xr.concat([mean.sel(setting=k) for k in key], dim="run")
        .drop_vars("setting")
        .assign_coords(run=ds["run"].values)
    )
    return ds, true


def sim_set(seed: int) -> tuple[xr.Dataset, xr.DataArray]:
    from bayes_grpo.dynamics.simulate import simulate_sde_runset

    ds = simulate_sde_runset(
        group_sizes=(4, 16),
        learning_rates=(1e-3, 2e-3),
        k_refs=(1, 4),
        n_seeds=2,
        n_steps=300,
        measurement_sd=0.02,
        random_seed=seed,
    )
    return ds, ds["true_mean_reward"]


def tiny_set() -> tuple[xr.Dataset, None]:
    from bayes_grpo.runset.ingest import load_runs

    return load_runs([REPO / "data" / "tiny"]), None


def real_set() -> tuple[xr.Dataset, None]:
    from bayes_grpo.runset.ingest import load_runs

    ds = load_runs([REAL / "csv"])
    sources = {s["short_id"]: s for s in json.loads((REAL / "sources.json").read_text())}
    # the CSVs carry no model name: take it from sources.json so that runs of one LLM share a prior
    models = [str(sources.get(str(r), {}).get("model", "")).split(" ")[0] for r in ds["run"].values]
    return ds.assign_coords(model=("run", np.array(models, dtype=object))), None


#: Reward bounds per set (None: constant noise).
BOUNDS = {"bandit": (0.0, 1.0), "tiny": (0.0, 1.0), "sim": None, "real": None}


def prior_for(ds: xr.Dataset, run_id: str, bounds=None, kind: str = "mixture", retime: bool = True):
    prior, _ = population_prior_for_run(
        ds,
        run_id,
        use_runs=True,
        same_model_only=True,
        reward_bounds=bounds,
        prior_kind=kind,
        retime=retime,
    )
    return prior


def evaluate_run_by_run(
    ds: xr.Dataset, name: str, out: Path, settings: dict, resume: bool, **kwargs
) -> tuple[pd.DataFrame, float]:
    """:func:`evaluate_forecasts` of ``ds`` one run at a time (``runs=[run]``: the same rows as
    all at once when each run's rows depend on that run alone), the rows so far kept in
    ``<name>_runs.partial.csv``; with ``resume`` a partial file of the same ``settings`` is
    continued. Returns the table (runs in ``ds``'s order) and the seconds spent on it in all."""
    partial = out / f"{name}_runs.partial.csv"
    meta = out / f"{name}_runs.partial.json"
    run_ids = [str(r) for r in ds["run"].values]
    done, seconds = [], {}
    if partial.is_file() or meta.is_file():
        if not resume:
            raise SystemExit(
                f"{partial}: a partial evaluation of set {name!r} is there; continue it with "
                "--resume, or remove it (and its .json) to start again"
            )
        stored = json.loads(meta.read_text()) if meta.is_file() else {}
        if stored.get("settings") != settings:
            raise SystemExit(
                f"{partial}: written with settings {stored.get('settings')}, not this run's "
                f"{settings}; remove it (and its .json) or rerun with its settings"
            )
        if partial.is_file():
            table = pd.read_csv(partial)
            done = [table[table["run"].astype(str) == r] for r in run_ids]
            done = [d for d in done if len(d)]
        seconds = dict(stored.get("seconds", {}))
    finished = {str(d["run"].iloc[0]) for d in done}
    for i, run_id in enumerate(run_ids, start=1):
        if run_id in finished:
            continue
        start = time.perf_counter()
        rows = evaluate_forecasts(ds, runs=[run_id], **kwargs)
        seconds[run_id] = time.perf_counter() - start
        done.append(rows)
        so_far = pd.concat(done, ignore_index=True)
        write_atomic(partial, lambda p, df=so_far: df.to_csv(p, index=False))
        write_text_atomic(meta, json.dumps({"settings": settings, "seconds": seconds}, indent=2))
        print(
            f"{name}: run {i} of {len(run_ids)} ({run_id}) in {seconds[run_id]:.0f} s", flush=True
        )
    table = pd.concat(done, ignore_index=True)
    order = {r: k for k, r in enumerate(run_ids)}
    table = table.sort_values("run", key=lambda c: c.astype(str).map(order), kind="stable")
    return table.reset_index(drop=True), float(sum(seconds.values()))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sets", nargs="+", default=["bandit", "sim", "tiny", "real"])
    ap.add_argument("--out", default="benchmarks/results/evaluate_forecasts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-population", action="store_true", help="weak default prior for every run")
    ap.add_argument("--likelihood", choices=["state_space", "iid"], default="state_space")
    ap.add_argument("--prior-kind", choices=["mixture", "gaussian"], default="mixture")
    ap.add_argument(
        "--no-retime",
        action="store_true",
        help="take the other runs' dynamics as logged (default: carried to the forecast run's "
        "learning rate, momentum and K_ref, as `bayes-grpo forecast` does)",
    )
    ap.add_argument("--no-bounds", action="store_true", help="constant noise for every set")
    ap.add_argument("--no-calibrate", action="store_true", help="skip the split calibration")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.2, 0.3, 0.5])
    ap.add_argument(
        "--bandit-prompts",
        type=int,
        default=16,
        help="prompts (groups of G = 8) per step of the bandit set (default 16, the "
        "simulator's default); the noise of the logged reward falls as 1/sqrt(prompts)",
    )
    ap.add_argument(
        "--calibration",
        choices=["split", "leave_one_out"],
        default="split",
        help="split: two halves calibrate each other (2 backtests per run); leave_one_out: "
        "each run calibrated on backtests of all the others, as `bayes-grpo forecast "
        "--calibrate` does (n - 1 backtests per run)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue a set's partial run-by-run evaluation (<set>_runs.partial.csv under "
        "--out) of the same settings",
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    loaders = {
        "bandit": lambda: bandit_set(args.seed, args.bandit_prompts),
        "sim": lambda: sim_set(args.seed),
        "tiny": tiny_set,
        "real": real_set,
    }
    # keep the sets of earlier invocations with the same --out (sets can be run one by one)
    summary = (
        json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else {}
    )
    for name in args.sets:
        if name == "real" and not REAL.is_dir():
            print(f"skipping real: {REAL} absent")
            continue
        ds, true = loaders[name]()
        bounds = None if args.no_bounds else BOUNDS[name]
        kwargs = dict(
            fractions=args.fractions,
            prior_for=None
            if args.no_population
            else (lambda r, d, b=bounds: prior_for(d, r, b, args.prior_kind, not args.no_retime)),
            true_mean=true,
            seed=args.seed,
            likelihood=args.likelihood,
            reward_bounds=bounds,
            calibrate=not args.no_calibrate,
            calibration_scheme=args.calibration,
        )
        if args.no_calibrate or args.calibration == "leave_one_out":
            settings = {k: v for k, v in vars(args).items() if k not in ("sets", "out", "resume")}
            table, seconds = evaluate_run_by_run(ds, name, out, settings, args.resume, **kwargs)
        else:
            start = time.perf_counter()
            table = evaluate_forecasts(ds, **kwargs)
            seconds = time.perf_counter() - start
        write_atomic(out / f"{name}_runs.csv", lambda p, df=table: df.to_csv(p, index=False))
        summ = summarise_evaluation(table)
        write_atomic(out / f"{name}_summary.csv", lambda p, df=summ: df.to_csv(p, index=False))
        summary[name] = {
            "n_runs": int(ds.sizes["run"]),
            "reward_bounds": bounds,
            "likelihood": args.likelihood,
            "prior_kind": args.prior_kind,
            "retime": not args.no_retime,
            "calibration": None if args.no_calibrate else args.calibration,
            **({"bandit_prompts": args.bandit_prompts} if name == "bandit" else {}),
            "seconds": seconds,
            "by_fraction": summ.to_dict(orient="records"),
        }
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(f"== {name}: {ds.sizes['run']} runs, {seconds:.1f} s")
            print(summ.round(3).to_string(index=False))
        # written after every set, so that a long run keeps what it has finished
        write_text_atomic(out / "summary.json", json.dumps(summary, indent=2, default=float))
        for partial in (out / f"{name}_runs.partial.csv", out / f"{name}_runs.partial.json"):
            partial.unlink(missing_ok=True)  # its rows are in <set>_runs.csv now


if __name__ == "__main__":
    main()
