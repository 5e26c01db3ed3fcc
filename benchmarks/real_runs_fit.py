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
        [--draws 500 --tune 500 --chains 2] [--seed 0] [--parameterisations phenomenological,mechanistic]
        [--runs RUN1,RUN2] [--model-config JSON] [--json out.json]
    .venv/bin/python benchmarks/real_runs_fit.py --table out.json   # markdown tables of a saved result
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
from bayes_grpo._io import write_text_atomic
from bayes_grpo.dynamics.coefficients import damping_ratio, oscillator_coefficients
from bayes_grpo.dynamics.lsq import fit_oscillator
from bayes_grpo.dynamics.trajectory import reward_trajectory, scheduled_reward_trajectory
from bayes_grpo.model.convergence import run_r_hat
from bayes_grpo.runset import make_runset

MOMENTUM, CONVENTION, K_REF = 0.9, "ema", 1.0


def load_real_runs(root: Path, *, with_lr: bool = False):
    """The public runs as a run set (reward only; with ``with_lr`` also the logged rate as ``lr``,
    so a fit follows the schedules of the runs that log one)."""
    sources = json.loads((root / "sources.json").read_text())
    curves, meta = {}, {}
    for s in sources:
        run = s["short_id"]
        frame = pd.read_csv(root / "csv" / f"{run}.csv")
        col = s.get("csv_reward_column") or "reward"
        curve = frame[["step", col]].dropna().drop_duplicates("step").set_index("step").sort_index()
        curve.columns = ["reward"]
        if with_lr and "learning_rate" in frame.columns:
            curve["lr"] = frame.drop_duplicates("step").set_index("step")["learning_rate"].reindex(curve.index)
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


def schedule_of(ds, run: str, t: np.ndarray) -> np.ndarray | None:
    """Interval rate multipliers of ``run`` at its steps ``t`` when it logs a schedule, else None
    (the rule and nominal rate of the model's own :func:`bayes_grpo.model.prepare.schedule_multipliers`)."""
    from bayes_grpo.model.prepare import schedule_multipliers

    m = schedule_multipliers(ds, [run], t)
    return None if m is None else m[0]


def lsq_mechanistic(t, y, momentum=MOMENTUM, k_ref=K_REF, n_grid=400, multipliers=None):
    """Least squares of the mechanistic law: free ``p*, R0`` and the gain ``a = eta K``.

    ``M, C, K_eff`` follow from ``a``, the momentum and ``k_ref``
    (:func:`~bayes_grpo.dynamics.coefficients.oscillator_coefficients`); only ``a`` is free
    in the dynamics, so the fit is ``min_a min_{p*, R0} SSE``. For fixed ``a`` the curve
    ``R = p* (1 - g(t)) + R0 g(t)`` (``g`` the unit error trajectory) is linear in
    ``(p*, R0)``: the profile is solved exactly on a dense log grid of ``a`` (from ``1e-4 /
    span`` to 1, stable and unstable gains alike, as the Bayesian model allows), and the
    best grid point is polished with :func:`scipy.optimize.least_squares` over all three.
    With ``multipliers`` (one per point of ``y``, a run on a schedule) the law follows the
    schedule (:func:`~bayes_grpo.dynamics.trajectory.scheduled_reward_trajectory`).
    The law depends on the learning rate and ``K`` through ``a`` only, so a single run
    needs no learning rate. Returns the fitted curve at the finite points of ``y`` and ``a``.
    """
    ok = np.isfinite(y)
    t, y = np.asarray(t, dtype=float)[ok], np.asarray(y, dtype=float)[ok]
    mult = None if multipliers is None else np.asarray(multipliers, dtype=float)[ok]
    span = max(t.max(), 1.0)

    def unit(tt, log_a):
        m, c, k = oscillator_coefficients(np.exp(log_a), momentum, k_ref)
        if mult is not None:
            return scheduled_reward_trajectory(tt, mult, m, c, k, 0.0, 1.0, lag=k_ref)
        return reward_trajectory(tt, m, c, k, 0.0, 1.0)  # g(t): p* = 0, R0 = 1

    def profile(log_a):
        g = unit(t, log_a)
        design = np.column_stack([1.0 - g, g])
        if not np.all(np.isfinite(design)):
            return np.inf, None
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        return float(np.sum((design @ coef - y) ** 2)), coef

    grid = np.linspace(np.log(1e-4 / span), 0.0, n_grid)
    sse = [profile(la)[0] for la in grid]
    log_a0 = grid[int(np.argmin(sse))]
    coef0 = profile(log_a0)[1]

    def curve(tt, p):
        return p[0] + (p[1] - p[0]) * unit(tt, p[2])

    res = least_squares(lambda p: curve(t, p) - y, [coef0[0], coef0[1], log_a0])
    best = res.x if 2.0 * res.cost <= min(sse) else np.array([coef0[0], coef0[1], log_a0])
    return curve(t, best), float(np.exp(best[2]))


ZETA_BANDS: tuple[tuple[float, float], ...] = ((0.0, 0.3), (0.3, 0.7), (0.7, 1.5), (1.5, np.inf))


def diagnose_run(posterior, run: str, t: np.ndarray, y: np.ndarray) -> dict:
    """Where the posterior-mean curve loses to least squares, for one run (finite ``t, y``).

    From every posterior draw's curve: the smoothed R^2 of each chain's mean curve (Monte
    Carlo spread), of the single best-fitting draw (is the least-squares shape inside the
    posterior?), of the curve at the posterior-median parameters, of the pointwise posterior
    median of the curves, and, per band of the
    damping ratio, the posterior mass and the smoothed R^2 of the band's mean curve (does
    averaging under- and overdamped shapes cost the fit?).
    """
    get = lambda v: posterior[v].sel(run=run).values  # (chain, draw)  # noqa: E731
    m, c, k, p, r0, zeta = (get(v) for v in ("M_eff", "C_eff", "K_eff", "plateau_run", "initial_reward", "zeta"))
    curves = reward_trajectory(t, m[..., None], c[..., None], k[..., None], p[..., None], r0[..., None])  # (chain, draw, n)
    flat = curves.reshape(-1, t.size)
    sse = np.sum((flat - y) ** 2, axis=1)
    med = reward_trajectory(t, *(np.median(v) for v in (m, c, k, p, r0)))
    bands = []
    for lo, hi in ZETA_BANDS:
        sel = ((zeta >= lo) & (zeta < hi)).ravel()
        bands.append(
            {
                "zeta_band": [lo, hi],
                "mass": float(sel.mean()),
                "r2_smoothed_band_mean": float(metrics.smoothed_r2(y, flat[sel].mean(axis=0))) if sel.sum() >= 5 else None,
            }
        )
    return {
        "chain_r2_smoothed": [float(metrics.smoothed_r2(y, curves[i].mean(axis=0))) for i in range(curves.shape[0])],
        "best_draw_r2_smoothed": float(metrics.smoothed_r2(y, flat[int(np.argmin(sse))])),
        "median_parameters_r2_smoothed": float(metrics.smoothed_r2(y, med)),
        "pointwise_median_r2_smoothed": float(metrics.smoothed_r2(y, np.median(flat, axis=0))),
        "zeta_bands": bands,
    }


def markdown_table(result: dict) -> str:
    """Markdown per-run table of one parameterisation's result (the ``--json`` entry)."""
    lines = [
        "| run | trend | raw R^2 | noise ceiling | smoothed R^2 (posterior mean) | smoothed R^2 (LSQ) | raw R^2 (LSQ) | zeta median [90%] | LSQ zeta | run R-hat | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['run']} | {'yes' if r['has_trend'] else 'no'} | {r['r2_raw']:.3f} | {r['r2_noise_ceiling']:.3f} | {r['r2_smoothed']:.3f} "
            f"| {r['lsq_r2_smoothed']:.3f} | {r['lsq_r2_raw']:.3f} | {r['zeta']:.2f} [{r['zeta_lo']:.2f}, {r['zeta_hi']:.2f}] | {r['lsq_zeta']:.3g} | {r.get('max_r_hat', float('nan')):.3f} | {r['verdict']} |"
        )
    return "\n".join(lines)


def model_config_of(follow_schedules: bool, extra: dict) -> dict:
    """The model configuration of every fit here: AdamW defaults (momentum 0.9, EMA, ``k_ref``
    1), ``alpha`` fixed at 1, with ``follow_schedules`` the law on each run's logged schedule
    (``learning_rate_schedule.follow``, as the least-squares comparator gets it; the flag gave
    only the comparator the schedules), then ``extra`` (``--model-config``) over it."""
    config = {
        "hyperparameter_defaults": {"momentum": MOMENTUM, "momentum_convention": CONVENTION, "k_ref": K_REF},
        "alpha": {"fixed": 1.0},
    }
    if follow_schedules:
        config["learning_rate_schedule"] = {"follow": True}
    return config | extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real-runs", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "real_runs")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--sampler", default="pymc", choices=("pymc", "nutpie"))
    parser.add_argument("--parameterisations", default="phenomenological,mechanistic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-accept", type=float, default=None, help="NUTS target acceptance (default: the model's, 0.9)")
    parser.add_argument("--model-config", default="{}", help='JSON merged into the model configuration, e.g. \'{"damping_ratio": {"log_sigma": 2.0}}\'')
    parser.add_argument("--diagnose", action="store_true", help="add per-run diagnostics of the posterior-mean vs least-squares gap (trend runs)")
    parser.add_argument("--runs", default=None, help="comma-separated run ids to fit (default: all; for quick diagnostics)")
    parser.add_argument(
        "--follow-schedules",
        action="store_true",
        help="give the runs their logged learning rate (lr): the fit follows the schedules of the runs that log one "
        "(model version 7), and so does the least-squares fit of the same law",
    )
    parser.add_argument("--json", default=None)
    parser.add_argument("--table", type=Path, default=None, help="print the markdown tables of a saved --json file and exit (no fit)")
    args = parser.parse_args()
    if args.diagnose and args.follow_schedules:
        # diagnose_run draws each posterior draw's constant-rate curve: on scheduled fits it
        # scored curves of another law than the one fitted
        parser.error("--diagnose draws constant-rate curves; it does not follow the schedules (leave out --follow-schedules)")
    if args.table is not None:
        for par, result in json.loads(args.table.read_text()).items():
            print(f"### {par}\n\nverdicts: {result.get('verdicts')}; convergence: {result['convergence']}\n")
            print(markdown_table(result) + "\n")
        return

    from bayes_grpo.model import GRPODynamicsModel

    ds = load_real_runs(args.real_runs, with_lr=args.follow_schedules)
    if args.runs:
        wanted = [r.strip() for r in args.runs.split(",") if r.strip()]
        unknown = sorted(set(wanted) - {str(r) for r in ds.run.values})
        if unknown:
            raise SystemExit(f"--runs: unknown run ids {unknown}; known: {sorted(str(r) for r in ds.run.values)}")
        ds = ds.sel(run=wanted)
        ds = ds.isel(step=np.flatnonzero(np.isfinite(ds.reward.values).any(axis=0)))
    steps = ds.step.values.astype(float)
    out = {}
    for par in args.parameterisations.split(","):
        model_config = model_config_of(args.follow_schedules, json.loads(args.model_config))
        model = GRPODynamicsModel(model_config=model_config, parameterisation=par)
        t0 = time.perf_counter()
        extra = {} if args.target_accept is None else {"target_accept": args.target_accept}
        model.fit(ds, draws=args.draws, tune=args.tune, chains=args.chains, sampler=args.sampler, random_seed=args.seed, progressbar=False, **extra)
        wall = time.perf_counter() - t0
        summary = model.run_summary()
        per_run_rhat = run_r_hat(model.idata.posterior).to_dict()
        rows = []
        for run in summary.index:
            y = ds.reward.sel(run=run).values
            ok = np.isfinite(y)
            schedule = schedule_of(ds, run, steps[ok]) if args.follow_schedules else None
            if par == "phenomenological":
                fit = fit_oscillator(steps[ok], y[ok], multipliers=schedule)
                lsq_curve = fit.fitted
                lsq_params = {"lsq_zeta": fit.params["zeta"], "lsq_w0": fit.params["w0"], "lsq_at_bounds": ",".join(fit.at_bounds)}
            else:
                full = None
                if schedule is not None:
                    full = np.ones(steps.size)
                    full[ok] = schedule
                lsq_curve, lsq_a = lsq_mechanistic(steps, y, multipliers=full)
                m_, c_, k_ = oscillator_coefficients(lsq_a, MOMENTUM, K_REF)
                lsq_params = {"lsq_zeta": float(damping_ratio(m_, c_, k_)), "lsq_a": lsq_a}
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
                    "zeta_lo": r["zeta_lo"],
                    "zeta_hi": r["zeta_hi"],
                    model.gain_column: r[model.gain_column],
                    "max_r_hat": float(per_run_rhat.get(run, np.nan)),
                    "follows_schedule": schedule is not None,
                    **lsq_params,
                    "verdict": ("pass" if r["r2_smoothed"] >= lsq_s - 0.01 else "FAIL") if trend else "no trend",
                }
            )
            if args.diagnose and trend:
                rows[-1]["diagnostics"] = diagnose_run(model.idata.posterior, run, steps[ok], y[ok])
        table = pd.DataFrame(rows).set_index("run")
        conv = model.convergence()
        counts = table["verdict"].value_counts().to_dict()
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(f"\n== {par}: {wall:.0f} s, verdicts {counts}, convergence: {conv.summary}")
            print(table.drop(columns="diagnostics", errors="ignore").round(3).to_string())
            if args.diagnose:
                for run, d in table["diagnostics"].dropna().items():
                    bands = ", ".join(f"{b['zeta_band'][0]}-{b['zeta_band'][1]}: {b['mass']:.2f}" for b in d["zeta_bands"])
                    print(f"{run}: chains {np.round(d['chain_r2_smoothed'], 3)} best draw {d['best_draw_r2_smoothed']:.3f} "
                          f"median params {d['median_parameters_r2_smoothed']:.3f} pointwise median {d['pointwise_median_r2_smoothed']:.3f} zeta mass [{bands}]")
        out[par] = {
            "wall_s": wall,
            "settings": {"draws": args.draws, "tune": args.tune, "chains": args.chains, "sampler": args.sampler, "random_seed": args.seed, "model_config": model.model_config},
            "verdicts": counts,
            "convergence": conv.values,
            "runs": table.reset_index().to_dict(orient="records"),
        }
        if args.json:
            from bayes_grpo.checks.base import jsonable

            write_text_atomic(args.json, json.dumps(jsonable(out), indent=1))


if __name__ == "__main__":
    main()
