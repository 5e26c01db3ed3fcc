"""Does the law on the logged learning-rate schedule fit the public GRPO logs better?

For every public run in ``../shared/real_runs`` whose logged ``lr`` follows a schedule (the rule
of :func:`bayes_grpo.model.prepare.schedule_multipliers`, the fit's own), least squares of the
phenomenological oscillator law (:func:`bayes_grpo.dynamics.lsq.fit_oscillator`, free ``p*, R0,
zeta, w0``, ``v0 = 0``) twice on the raw logged points: at a constant rate, and on the run's
schedule (``multipliers``: the gain ``w0^2 m`` follows the logged rate, as a fit with config
``learning_rate_schedule.follow`` does; same four free parameters, the schedule is known). Scores:
smoothed R^2 (:func:`bayes_grpo.metrics.smoothed_r2`) on all points, and held out: fitted on the
first 70% of the points, RMSE on the last 30%.

Measured (``benchmarks/results/real_runs_schedule.md``): following the schedule does not make
the law fit these logs better (see the summary line of the result file). On the simulated
recursion of torch's optimizers it is exact (``benchmarks/lr_clock.py``).

    .venv/bin/python benchmarks/real_runs_schedule.py [--real-runs ../shared/real_runs] \\
        [--markdown benchmarks/results/real_runs_schedule.md]        # about 1 minute
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_runs_fit import load_real_runs, schedule_of  # noqa: E402

from bayes_grpo import metrics  # noqa: E402
from bayes_grpo._io import write_text_atomic  # noqa: E402
from bayes_grpo.dynamics.lsq import fit_oscillator  # noqa: E402
from bayes_grpo.dynamics.trajectory import reward_trajectory, scheduled_reward_trajectory  # noqa: E402

HELD_OUT: float = 0.3


def _curve(fit, t: np.ndarray, mult: np.ndarray | None) -> np.ndarray:
    p = fit.params
    zeta, w0 = p["zeta"], p["w0"]
    if mult is None:
        return np.asarray(reward_trajectory(t, 1.0, 2.0 * zeta * w0, w0 * w0, p["plateau"], p["initial_reward"]))
    return np.asarray(scheduled_reward_trajectory(t, mult, 1.0, 2.0 * zeta * w0, w0 * w0, p["plateau"], p["initial_reward"]))


def analyse(ds, run: str) -> dict | None:
    steps = ds.step.values.astype(float)
    y = ds.reward.sel(run=run).values
    ok = np.isfinite(y)
    t, y = steps[ok], y[ok]
    mult = schedule_of(ds, run, t)
    if mult is None:
        return None
    row: dict = {"run": run, "trend": bool(metrics.has_trend(t, y)), "n": int(t.size), "lr_end": float(mult[-1])}
    k = int(round((1.0 - HELD_OUT) * t.size))
    for name, m in (("constant", None), ("schedule", mult)):
        fit = fit_oscillator(t, y, multipliers=m)
        row[f"sR2 {name}"] = float(metrics.smoothed_r2(y, fit.fitted))
        row[f"zeta {name}"] = fit.params["zeta"]
        row[f"p* {name}"] = fit.params["plateau"]
        head = fit_oscillator(t[:k], y[:k], multipliers=None if m is None else m[:k])
        pred = _curve(head, t, m)
        row[f"ho rmse {name}"] = float(np.sqrt(np.mean((pred[k:] - y[k:]) ** 2)))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real-runs", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "real_runs")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    if not (args.real_runs / "sources.json").is_file():
        print(f"no public runs at {args.real_runs}: nothing to measure")
        return 0
    ds = load_real_runs(args.real_runs, with_lr=True)
    rows = [r for r in (analyse(ds, str(run)) for run in ds.run.values) if r is not None]
    table = pd.DataFrame(rows).set_index("run")
    trend = table[table["trend"]]
    d_s = trend["sR2 schedule"] - trend["sR2 constant"]
    d_h = trend["ho rmse schedule"] - trend["ho rmse constant"]
    line = (
        f"{len(table)} scheduled runs, {len(trend)} with a trend. Law on the schedule against the constant-rate law, "
        f"trend runs: smoothed R^2 higher on {int((d_s > 0).sum())}/{len(trend)} (median change {d_s.median():+.3f}, "
        f"range {d_s.min():+.3f} to {d_s.max():+.3f}); held-out RMSE (last {HELD_OUT:.0%}) lower on "
        f"{int((d_h < 0).sum())}/{len(trend)} (median change {d_h.median():+.4f})."
    )
    text = f"{table.round(4).to_string()}\n\n{line}"
    print(text)
    if args.markdown is not None:
        body = "| run | " + " | ".join(table.columns) + " |\n|" + "---|" * (len(table.columns) + 1) + "\n"
        for run, r in table.iterrows():
            body += f"| {run} | " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r.values) + " |\n"
        write_text_atomic(
            args.markdown,
            "# The law on the logged learning-rate schedule on the public GRPO logs\n\n"
            "    .venv/bin/python benchmarks/real_runs_schedule.py --markdown benchmarks/results/real_runs_schedule.md\n\n"
            f"{body}\n{line}\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
