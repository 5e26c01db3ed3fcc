"""Does the learning-rate clock make the constant-gain law fit the public GRPO logs better?

For every public run in ``../shared/real_runs`` whose logged ``lr`` follows a schedule (the rule
of :func:`bayes_grpo.runset.ingest.learning_rate_schedule_range`; exactly the runs
:func:`bayes_grpo.runset.clock.clock_runset` re-times), this fits the oscillator law
(:func:`bayes_grpo.dynamics.lsq.fit_oscillator`, free ``p*, R0, zeta, w0``, ``v0 = 0``) twice:

1. on the raw logged steps;
2. on the run re-timed by :func:`~bayes_grpo.runset.clock.clock_runset` (clock steps, the logged
   steps that land on one clock step averaged).

Both are then scored on the same points, the raw logged rewards: the raw fit at its steps ``t``,
the clock fit at ``tau(t)`` (:func:`~bayes_grpo.runset.clock.clock_time` of each raw step, the
nominal rate ``clock_runset`` used). Both fits have the same four free parameters; the clock fit
also uses the logged schedule, which is known before training, not fitted. Scores: raw R^2 and
the project's smoothed R^2 (:func:`bayes_grpo.metrics.smoothed_r2`, against a centred moving
average of 10% of the points), on all points, and held out: each representation fitted on the
first 70% of the raw logged points (the clock one by ``clock_runset`` of the run cut there), and
scored on the last 30% (R^2 and smoothed R^2 of that segment, against its own mean and moving
average, and RMSE). Reported beside them: ``zeta``, the plateau, the time scale ``1/w0`` (raw
steps; clock steps), the rise time ``t63`` (the raw step where the fitted curve has covered 63%
of its way from ``R0`` to ``p*``, the same unit for both fits), the fitted parameters that ended
on a search bound (``LsqFit.at_bounds``), and the share of the clock span the last 30% of the
raw steps occupy (a schedule that decays to 0 squeezes the tail).

A third fit separates the time warp from the averaging: the law fitted on the raw points at their
clock times, ``(tau(t), y)`` unbinned (``tau`` fit), so that every raw point keeps its weight (the
``clock_runset`` fit gives the many raw steps of a decayed tail, averaged into few clock steps,
the weight of those few).

The runs are read with :func:`bayes_grpo.runset.ingest.load_runs` from the CSV conversions
(``csv/``, one run per file, the run ids and reward columns of ``benchmarks/real_runs_fit.py``)
with a manifest built from ``sources.json`` (learning rate: the nominal rate of the clock).
Without ``../shared/real_runs`` the script says so and exits 0.

Measured (``benchmarks/results/real_runs_clock.md``): on the 13 scheduled public runs (9 with a
trend) the clock does not make the law fit better. Trend runs, clock fit against raw fit: smoothed
R^2 higher on 3/9 (median change -0.037), held-out RMSE lower on 4/9 (median +0.003); the
unbinned ``tau`` fit is a wash (5/9, +0.001; 5/9, -0.011). Simulated controls show the scores
could hardly tell either way (see :data:`READING`).

Run from the repository root (about 1.5 minutes on 2 cores, most of it the controls)::

    .venv/bin/python benchmarks/real_runs_clock.py --json benchmarks/results/real_runs_clock.json \\
        --markdown benchmarks/results/real_runs_clock.md [--real-runs ../shared/real_runs]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo import metrics
from bayes_grpo._io import write_atomic, write_text_atomic
from bayes_grpo.dynamics.lsq import LsqFit, fit_oscillator
from bayes_grpo.runset.clock import clock_runset, clock_time, clocked_runs
from bayes_grpo.runset.core import RunSetError
from bayes_grpo.runset.ingest import learning_rate_schedule_range, load_runs
from bayes_grpo.runset.names import LOGGED_LR_VAR
from bayes_grpo.runset.schema import REWARD_VAR, RUN_DIM, STEP_DIM

#: Same discovery as benchmarks/real_runs_fit.py: ``../shared/real_runs`` beside the checkout.
REAL = Path(__file__).resolve().parents[1].parent / "shared" / "real_runs"
#: Share of the raw logged points the held-out fits see.
TRAIN_SHARE = 0.7
#: ``t63``: share of the way from ``R0`` to ``p*``.
RISE_SHARE = 1.0 - np.exp(-1.0)


def load_public_runs(root: Path) -> xr.Dataset:
    """The CSV conversions as one run set, settings and reward columns from ``sources.json``."""
    sources = json.loads((root / "sources.json").read_text())
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # a sibling script, as in validate_schedule_prediction
    from ingest_real_runs import manifest_rows

    manifest = manifest_rows(sources, root / "csv")
    manifest["reward_key"] = [s.get("csv_reward_column") or "" for s in sources]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "manifest.csv"
        write_atomic(path, lambda p, df=manifest: df.to_csv(p, index=False))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return load_runs([], manifest=path)


def _logged_rows(ds: xr.Dataset, run: str) -> pd.DataFrame:
    """The run's logged steps as ``clock_runset`` sees them (steps where any metric is finite)."""
    sub = ds.sel({RUN_DIM: run})
    names = [str(v) for v in ds.data_vars if ds[v].dims == (RUN_DIM, STEP_DIM)]
    frame = pd.DataFrame({v: sub[v].values for v in names}, index=ds[STEP_DIM].values.astype(float))
    return frame[frame.notna().any(axis=1)]


def _clocked_reward(ds: xr.Dataset, run: str) -> tuple[np.ndarray, np.ndarray]:
    """``(clock steps, rewards)`` of ``run`` after :func:`clock_runset` of ``ds``."""
    y = ds[REWARD_VAR].sel({RUN_DIM: run}).values
    ok = np.isfinite(y)
    return ds[STEP_DIM].values[ok].astype(float), y[ok]


def rise_time(fit: LsqFit, grid_t: np.ndarray, grid_x: np.ndarray) -> float:
    """First raw step ``grid_t`` where the fitted curve (evaluated at ``grid_x``) has covered
    :data:`RISE_SHARE` of its way from ``R0`` to ``p*``; NaN if it does not within the run."""
    p, r0 = fit.params["plateau"], fit.params["initial_reward"]
    if not np.isfinite(p - r0) or p == r0:
        return float("nan")
    progress = (fit.predict(grid_x) - r0) / (p - r0)
    hit = np.flatnonzero(progress >= RISE_SHARE)
    return float(grid_t[hit[0]]) if hit.size else float("nan")


def _fit_summary(fit: LsqFit) -> dict:
    return {
        "zeta": fit.params["zeta"],
        "plateau": fit.params["plateau"],
        "initial_reward": fit.params["initial_reward"],
        "time_scale": 1.0 / fit.params["w0"],
        "tau_overdamped": fit.derived["tau"],
        "at_bounds": list(fit.at_bounds),
        "n_fit_points": fit.n,
        "r2_own_points": fit.r2,
    }


def _scores(y: np.ndarray, yhat: np.ndarray) -> dict:
    return {
        "r2": metrics.r2(y, yhat),
        "r2_smoothed": metrics.smoothed_r2(y, yhat),
        "rmse": float(np.sqrt(np.mean((y - yhat) ** 2))),
    }


def analyse_run(
    ds: xr.Dataset, clocked: xr.Dataset, run: str, facts: dict, *, controls: bool = True
) -> dict:
    """Raw-steps fit against clock fit of one scheduled run, all scored on the raw points.

    With ``controls``, the same comparison on two simulated copies of the run (its steps, its
    logged ``lr``, Gaussian noise at its second-difference noise level, seed 0): one drawn from
    the clock fit's curve at ``tau(t)`` (the law holds on the clock), one from the raw fit's curve
    at ``t`` (it holds on raw steps); what the comparison reads when either is true.
    """
    rows = _logged_rows(ds, run)
    steps = rows.index.to_numpy(dtype=float)
    eta = float(facts["nominal_learning_rate"])
    tau_all = clock_time(steps, rows[LOGGED_LR_VAR].to_numpy(dtype=float), eta)
    ok = np.isfinite(rows[REWARD_VAR].to_numpy(dtype=float))
    t, y, tau = steps[ok], rows[REWARD_VAR].to_numpy(dtype=float)[ok], tau_all[ok]

    # 1-3: whole run
    raw_fit = fit_oscillator(t, y)
    clk_fit = fit_oscillator(*_clocked_reward(clocked, run))
    grid_t = np.linspace(0.0, t[-1], 4001)
    grid_tau = np.interp(grid_t, steps, tau_all, left=0.0)
    grid_tau[grid_t < steps[0]] = grid_t[grid_t < steps[0]] * tau_all[0] / max(steps[0], 1e-12)
    tau_fit = fit_oscillator(tau, y)
    raw = {**_fit_summary(raw_fit), **_scores(y, raw_fit.predict(t))}
    clk = {**_fit_summary(clk_fit), **_scores(y, clk_fit.predict(tau))}
    unb = {**_fit_summary(tau_fit), **_scores(y, tau_fit.predict(tau))}
    raw["t63_raw_steps"] = rise_time(raw_fit, grid_t, grid_t)
    raw["time_scale_raw_steps"] = raw["time_scale"]
    for fit, out in ((clk_fit, clk), (tau_fit, unb)):
        out["t63_raw_steps"] = rise_time(fit, grid_t, grid_tau)
        ts = out["time_scale"]
        out["time_scale_raw_steps"] = (
            float(np.interp(ts, tau_all, steps)) if ts <= tau_all[-1] else float("nan")
        )

    # held out: fit on the first 70% of the raw points, score the last 30% on raw steps
    k = int(round(TRAIN_SHARE * t.size))
    cut = t[k - 1]
    train_raw = fit_oscillator(t[:k], y[:k])
    head = ds.sel({RUN_DIM: [run]})
    head = head.where(head[STEP_DIM] <= cut)
    held = {"train_points": k, "test_points": int(t.size - k), "cut_step": float(cut)}
    held["raw"] = {**_scores(y[k:], train_raw.predict(t[k:])), "at_bounds": train_raw.at_bounds}
    train_tau = fit_oscillator(tau[:k], y[:k])
    held["tau"] = {**_scores(y[k:], train_tau.predict(tau[k:])), "at_bounds": train_tau.at_bounds}
    try:
        head_clock = clock_runset(head)
        train_clk = fit_oscillator(*_clocked_reward(head_clock, run))
        held["clock"] = {
            **_scores(y[k:], train_clk.predict(tau[k:])),
            "at_bounds": train_clk.at_bounds,
        }
    except RunSetError as exc:  # the first 70% of the schedule no longer counts as one
        held["clock"] = {"r2": np.nan, "r2_smoothed": np.nan, "rmse": np.nan, "error": str(exc)}

    span = tau_all[-1] - tau_all[0]
    control = {}
    if controls:
        sd = float(np.sqrt(metrics.noise_variance(y, method=metrics.SECOND_DIFFERENCE, steps=t)))
        for name, truth in (
            ("law_on_clock", clk_fit.predict(tau)),
            ("law_on_steps", raw_fit.predict(t)),
        ):
            sim = ds.sel({RUN_DIM: [run]}).copy(deep=True)
            values = np.full(sim[STEP_DIM].size, np.nan)
            at = np.searchsorted(sim[STEP_DIM].values.astype(float), t)
            values[at] = truth + sd * np.random.default_rng(0).standard_normal(t.size)
            sim[REWARD_VAR].values[0] = values
            sim_clocked = clock_runset(sim)
            r = analyse_run(sim, sim_clocked, run, clocked_runs(sim_clocked)[run], controls=False)
            control[name] = {
                "noise_sd": sd,
                **{
                    f"{fit}:{key}": score(r, fit, key)
                    for fit in ("raw", "clock", "tau")
                    for key in SCORES
                },
            }
    return {
        "run": run,
        "has_trend": metrics.has_trend(t, y),
        "noise_ceiling_r2": metrics.noise_ceiling_r2(y, steps=t),
        "n_raw": int(t.size),
        "steps": [float(t[0]), float(t[-1])],
        "clock_steps": facts["clock_steps"],
        "clock_points": facts["clock_points"],
        "lr_range": facts["lr_range"],
        "nominal_learning_rate": eta,
        "tail_clock_share": float((tau_all[-1] - np.interp(cut, steps, tau_all)) / span)
        if span > 0
        else np.nan,
        "raw_fit": raw,
        "clock_fit": clk,
        "tau_fit": unb,
        "held_out": held,
        "controls": control,
    }


def table(results: list[dict]) -> pd.DataFrame:
    """One row per run: the scores on raw points of both fits, and their parameters."""
    out = []
    for r in results:
        a, c, u, h = r["raw_fit"], r["clock_fit"], r["tau_fit"], r["held_out"]
        out.append(
            {
                "run": r["run"],
                "trend": "yes" if r["has_trend"] else "no",
                "n": r["n_raw"],
                "tail": r["tail_clock_share"],
                "R2 raw": a["r2"],
                "R2 clk": c["r2"],
                "R2 tau": u["r2"],
                "sR2 raw": a["r2_smoothed"],
                "sR2 clk": c["r2_smoothed"],
                "sR2 tau": u["r2_smoothed"],
                "ho R2 raw": h["raw"]["r2"],
                "ho R2 clk": h["clock"]["r2"],
                "ho R2 tau": h["tau"]["r2"],
                "ho sR2 raw": h["raw"]["r2_smoothed"],
                "ho sR2 clk": h["clock"]["r2_smoothed"],
                "ho sR2 tau": h["tau"]["r2_smoothed"],
                "ho rmse raw": h["raw"]["rmse"],
                "ho rmse clk": h["clock"]["rmse"],
                "ho rmse tau": h["tau"]["rmse"],
                "zeta raw": a["zeta"],
                "zeta clk": c["zeta"],
                "zeta tau": u["zeta"],
                "p* raw": a["plateau"],
                "p* clk": c["plateau"],
                "p* tau": u["plateau"],
                "1/w0 raw": a["time_scale"],
                "1/w0 clk": c["time_scale"],
                "1/w0 tau": u["time_scale"],
                "1/w0 clk in steps": c["time_scale_raw_steps"],
                "t63 raw": a["t63_raw_steps"],
                "t63 clk": c["t63_raw_steps"],
                "t63 tau": u["t63_raw_steps"],
                "bounds raw": ",".join(a["at_bounds"]) or "-",
                "bounds clk": ",".join(c["at_bounds"]) or "-",
                "bounds tau": ",".join(u["at_bounds"]) or "-",
            }
        )
    return pd.DataFrame(out).set_index("run")


#: Scores compared run by run (higher is better; the RMSE is compared negated).
SCORES: dict[str, tuple[str, str]] = {
    "r2": ("all", "r2"),
    "r2_smoothed": ("all", "r2_smoothed"),
    "held_out_r2": ("held_out", "r2"),
    "held_out_r2_smoothed": ("held_out", "r2_smoothed"),
    "held_out_rmse": ("held_out", "rmse"),
}
_FIT_KEY = {"raw": "raw_fit", "clock": "clock_fit", "tau": "tau_fit"}


def score(run: dict, fit: str, name: str) -> float:
    """One score of one fit (``"raw"``, ``"clock"``, ``"tau"``) of one run's result."""
    where, key = SCORES[name]
    return float(run[_FIT_KEY[fit]][key] if where == "all" else run["held_out"][fit][key])


def summary(results: list[dict]) -> dict:
    """Per score: runs where the clock fit (and the unbinned ``tau`` fit) beats the raw-steps fit,
    and the median change (fit - raw; for the RMSE a negative change is the better)."""
    out = {}
    for subset, rows in (("all", results), ("trend", [r for r in results if r["has_trend"]])):
        block: dict = {"n_runs": len(rows)}
        for fit in ("clock", "tau"):
            for name in SCORES:
                diff = np.array([score(r, fit, name) - score(r, "raw", name) for r in rows])
                diff = diff[np.isfinite(diff)]
                better = diff < 0 if name.endswith("rmse") else diff > 0
                block[f"{fit}:{name}"] = {
                    "better": int(np.sum(better)),
                    "n": int(diff.size),
                    "median_change": float(np.median(diff)) if diff.size else float("nan"),
                }
        out[subset] = block
    return out


def control_table(results: list[dict]) -> pd.DataFrame:
    """Per run, the change (fit - raw fit) in smoothed R^2 and held-out RMSE of the clock and the
    unbinned ``tau`` fit: measured, and on the two simulated controls (``|clock``: the law holds
    on the clock; ``|steps``: it holds on raw steps)."""
    out = []
    for r in results:
        row = {"run": r["run"]}
        for fit, tag in (("clock", "clk"), ("tau", "tau")):
            for key, short in (("r2_smoothed", "d sR2"), ("held_out_rmse", "d ho rmse")):
                row[f"{short} {tag}"] = score(r, fit, key) - score(r, "raw", key)
                for ctl, label in (("law_on_clock", "|clock"), ("law_on_steps", "|steps")):
                    c = r["controls"].get(ctl)
                    row[f"{short} {tag}{label}"] = (
                        c[f"{fit}:{key}"] - c[f"raw:{key}"] if c else np.nan
                    )
        out.append(row)
    return pd.DataFrame(out).set_index("run")


def control_summary(results: list[dict]) -> dict:
    """Median over the runs of each column of :func:`control_table`."""
    return {k: float(v) for k, v in control_table(results).median().items()}


def summary_lines(summ: dict) -> list[str]:
    lines = []
    for subset, block in summ.items():
        if subset == "controls_median":
            lines.append(
                "median over runs: " + ", ".join(f"{k} {v:+.3f}" for k, v in block.items())
            )
            continue
        for fit in ("clock", "tau"):
            parts = [
                f"{name} {v['better']}/{v['n']} ({v['median_change']:+.3f})"
                for key, v in block.items()
                if key != "n_runs" and key.startswith(fit + ":")
                for name in [key.split(":", 1)[1]]
            ]
            lines.append(
                f"{fit} fit better than raw ({subset}, {block['n_runs']} runs): " + "; ".join(parts)
            )
    return lines


SCORE_COLUMNS = ["trend", "n", "tail", "R2 raw", "R2 clk", "R2 tau", "sR2 raw", "sR2 clk", "sR2 tau",
                 "ho R2 raw", "ho R2 clk", "ho R2 tau", "ho sR2 raw", "ho sR2 clk", "ho sR2 tau",
                 "ho rmse raw", "ho rmse clk", "ho rmse tau"]  # fmt: skip
PARAM_COLUMNS = ["zeta raw", "zeta clk", "zeta tau", "p* raw", "p* clk", "p* tau", "1/w0 raw",
                 "1/w0 clk", "1/w0 tau", "1/w0 clk in steps", "t63 raw", "t63 clk", "t63 tau", "bounds raw",
                 "bounds clk", "bounds tau"]  # fmt: skip


def _md(frame: pd.DataFrame) -> str:
    head = "| run | " + " | ".join(frame.columns) + " |"
    rule = "|---" * (len(frame.columns) + 1) + "|"
    body = [
        f"| {run} | "
        + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row)
        + " |"
        for run, row in zip(frame.index, frame.itertuples(index=False))
    ]
    return "\n".join([head, rule, *body])


def markdown(results: list[dict], summ: dict, skipped: dict, command: str) -> str:
    """The markdown summary: command, both tables, the summary and :data:`READING`."""
    tab = table(results)
    lines = [
        "# The learning-rate clock on the public GRPO logs",
        "",
        f"    {command}",
        "",
        "Oscillator law (least squares, `fit_oscillator`) fitted on raw steps (`raw`), on the "
        "learning-rate clock (`clk`: `clock_runset`, logged steps averaged per clock step) and on "
        "the raw points at their clock times (`tau`: unbinned), all scored on the raw logged "
        "rewards (the clock fits at `tau(step)`). `sR2`: smoothed R^2 (moving average of 10% of "
        "the points); `ho`: fitted on the first 70% of the raw points, scored on the last 30% "
        "(R^2 against that segment's mean); `tail`: share of the clock span that the last 30% of "
        "the raw steps occupy (0.3 without a schedule). `1/w0` in raw steps (raw) and clock steps "
        "(clk, tau; `1/w0 clk in steps`: the raw step where the clock reaches it); `t63` (raw step where the fitted curve has covered 63% of its way from R0 to "
        "p*) in raw steps for all three; `bounds`: fitted parameters on a search bound.",
        "",
        "## Scores on the raw points",
        "",
        _md(tab[SCORE_COLUMNS]),
        "",
        "## Fitted parameters",
        "",
        _md(tab[PARAM_COLUMNS]),
        "",
        "## Changes against the raw fit, measured and on the simulated controls",
        "",
        "`d sR2`: smoothed R^2 of the fit minus that of the raw fit (all points); `d ho rmse`: "
        "held-out RMSE minus the raw fit's (negative: the clock helps). `|clock`: the same on a "
        "copy of the run simulated from the clock fit at `tau(t)` plus Gaussian noise at the run's "
        "noise level (what the comparison reads if the law holds on the clock); `|steps`: "
        "simulated from the raw fit at `t` (if it holds on raw steps).",
        "",
        _md(control_table(results)),
        "",
        "## Summary (better / runs, median change fit - raw)",
        "",
        *(f"- {line}" for line in summary_lines(summ)),
    ]
    if skipped:
        lines += [
            "",
            "Runs that log `lr` without a schedule (not re-timed): "
            + ", ".join(f"{k} (min/peak {v:.2f})" for k, v in skipped.items()),
        ]
    return "\n".join([*lines, "", READING]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--real-runs",
        type=Path,
        default=REAL,
        help="the public logs (default: ../shared/real_runs)",
    )
    parser.add_argument(
        "--json", metavar="OUT", default=None, help="write the per-run results and summary here"
    )
    parser.add_argument(
        "--markdown", metavar="OUT", default=None, help="write a short markdown summary here"
    )
    args = parser.parse_args(argv)
    if not (args.real_runs / "sources.json").is_file():
        print(f"{args.real_runs}: the public GRPO logs are not here; nothing to measure (skipped)")
        return 0
    ds = load_public_runs(args.real_runs)
    clocked = clock_runset(ds)
    facts = clocked_runs(clocked)
    skipped = {}
    for run in (str(r) for r in ds[RUN_DIM].values):
        lr = ds[LOGGED_LR_VAR].sel({RUN_DIM: run}).values if LOGGED_LR_VAR in ds else np.array([])
        if run not in facts and np.isfinite(lr).any():
            assert learning_rate_schedule_range(lr) is None
            skipped[run] = float(np.nanmin(lr) / np.nanmax(lr))
    results = [analyse_run(ds, clocked, run, facts[run]) for run in facts]
    summ = summary(results)
    summ["controls_median"] = control_summary(results)
    tab = table(results)
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.precision", 3):
        print(tab[SCORE_COLUMNS].to_string())
        print()
        print(tab[PARAM_COLUMNS].to_string())
        print()
        print(control_table(results).to_string())
    print()
    print("\n".join(summary_lines(summ)))
    if skipped:
        print(
            "lr logged without a schedule (not re-timed):",
            ", ".join(f"{k} (min/peak {v:.2f})" for k, v in skipped.items()),
        )
    command = " ".join(
        ["python", "benchmarks/real_runs_clock.py", *(sys.argv[1:] if argv is None else argv)]
    )
    out = {
        "command": command,
        "real_runs": str(args.real_runs),
        "runs": results,
        "summary": summ,
        "not_scheduled": skipped,
    }
    if args.json:
        from bayes_grpo.checks.base import jsonable

        write_text_atomic(args.json, json.dumps(jsonable(out), indent=1) + "\n")
    if args.markdown:
        write_text_atomic(args.markdown, markdown(results, summ, skipped, command))
    return 0


#: The reading of the measured tables (written from benchmarks/results/real_runs_clock.json).
READING = """## Reading

- **No fit gain from the clock on these logs.** Trend runs (9): the `clock_runset` fit beats the
  raw-steps fit on smoothed R^2 in 3/9 (median -0.037) and on held-out RMSE in 4/9 (median
  +0.003). The unbinned `tau` fit (same warp, every raw point its own weight) is a wash: 5/9
  (+0.001) and 5/9 (-0.011). All 13 runs: clock 5/13 (-0.015) and 6/13 (+0.003).
- **Most of the clock fit's in-sample loss is the averaging, not the warp.** Every schedule here
  decays to ~0 (warm-up + linear decay, or linear decay): the last 30% of the raw steps occupy
  only 9-10% of the clock span (`tail`), so `clock_runset` averages them into a few clock points
  and the least squares on the clock weights the tail about 3x less than the scoring on raw points
  does. On the runs where the clock fit loses most, the unbinned `tau` fit gets the raw fit's
  score back: sun rho1.0_s44 0.442 raw / 0.303 clock / 0.443 tau, alex run2 0.918 / 0.837 /
  0.875, alex 3b 0.931 / 0.894 / 0.927, chaos 0.989 / 0.973 / 0.976.
- **Where the clock is worse and why.** `alex_q25_0.5b_wordle_g4_run3` (no trend by the block
  test; smoothed R^2 0.617 -> 0.288): the reward creeps up steadily over all 100 steps while the
  rate decays to 1% of its peak; on the clock that rise *steepens* at the end, which the law
  cannot draw, and the binned fit falls back to a step from the first point (R0 -45.7, 1/w0 0.25
  clock steps) then flat. `sun_q35_9b_g2_rho1.0_s43` (rise then collapse, 0.739 -> 0.642, tau
  0.654; the decline runs from step ~100, rate 50% of the peak, to the end) and alex run2 (the raw
  fit turns down after step ~80, rate 20%): the clock squeezes the late change into a few clock
  steps. A reward that keeps moving per step at a small rate is progress not proportional to
  the rate, against the clock's premise: evidence against the first-order clock in the decayed
  tail (or for something that keeps acting there, e.g. the optimiser's momentum).
- **Where it helps.** `sun_q25_7bi_g4_vanilla_s43` (still rising as the rate decays): held-out
  RMSE 0.165 -> 0.092; sun rho0.7 and rho3.0 0.225 -> 0.216 and 0.266 -> 0.257. On the clock,
  an extrapolation into the decayed tail is nearly flat (tau barely advances): right when the
  reward stalls with the rate, wrong when it keeps moving (alex 3b +0.029, srinath +0.045 on a
  game score of sd ~6).
- **Parameters.** The rise of most runs is over in the first 30-60 steps, where the rate is still
  70-100% of its peak, so the time scale hardly changes (1/w0 in raw steps 27.8 / 27.5 for s43,
  31.1 / 32.7 for rho0.7, 13.3 / 12.8 for alex 3b); t63 comes earlier on the clock for the rising
  runs (rho0.7 51.6 -> 42.5, vanilla_s43 62.6 -> 43.5, srinath 104 -> 73 raw steps). The clock
  fits end on the zeta bound (1e-3, undamped) more often: 7/13 against 3/13 on raw steps (tau
  8/13): rise-then-fall shapes are drawn as undamped half-oscillations, and their `p*` is the
  oscillation's centre, not a plateau (vanilla_s43 0.844 -> 0.694, srinath 0.055 -> -1.55). Of
  the fits off the bounds, `p*` moves little except rho0.7 (0.660 -> 0.526: the centre of an
  overshoot extrapolated past the run's clock end).
- **The comparison has little power.** Simulated controls (each run's steps, schedule and noise
  level; one seed): when the law holds *on the clock*, the clock fit's median change is still
  -0.005 in smoothed R^2 and +0.000 in held-out RMSE; when it holds on raw steps, -0.013 and
  -0.002. The raw fit's free zeta and w0 absorb most of a linear-decay warp (tests: a run that
  follows the law on the clock reads R^2 0.981 on raw steps and on the clock alike, while the
  plateau reads 0.69 on raw steps and 0.76-0.77 on the clock, truth 0.8). Fit quality cannot
  decide between the clocks here; what the clock changes is the parameters of runs still rising
  when the rate decays, and those public runs give at-bound or degenerate fits on the clock.
- Held-out R^2 against the last 30% is against that segment's own mean (mostly a plateau), so it
  is dominated by small offsets (values down to -19); read the held-out RMSE instead."""


if __name__ == "__main__":
    raise SystemExit(main())
