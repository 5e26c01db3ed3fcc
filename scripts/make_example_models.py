#!/usr/bin/env python
"""Fit the shipped posterior ``models/tiny.nc`` to the shipped example runs in ``data/tiny``.

The fit is the demo's (:func:`bayes_grpo.report.demo.fit_example_runs`): the runs of the
demo's groups that no failure-mode diagnosis leaves out, the mechanistic law with i.i.d.
residuals, PyMC NUTS, :class:`~bayes_grpo.report.demo.DemoSettings` (2 chains x 1000 draws,
500 tuning steps, seed 0). The file is what ``GRPODynamicsModel.save`` writes, so every
verb that reads a posterior takes it (``predict``, ``stability --posterior``,
``phase-diagram``, ``diagnose --posterior``, ``forecast --prior``, ``report``).

A saved fit records the model version and the package version, and ``load`` refuses a file
of another version: after either changes, rerun this script (``tests/test_example_models.py``
fails until then). The summary it prints is the table of ``models/README.md``.

Usage::

    python scripts/make_example_models.py            # refuses to replace models/tiny.nc
    python scripts/make_example_models.py --force    # refit and replace it
    python scripts/make_example_models.py --summary  # print the table of the saved file
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL_FILE = REPO / "models" / "tiny.nc"


def summary_lines(model, seconds: float | None = None) -> list[str]:
    """Markdown lines describing a fitted example model: runs, convergence, per-run fit."""
    import numpy as np

    conv = model.convergence()
    columns = ["group_size", "learning_rate", "n_obs", "p_star", "R0", "zeta", "r2_raw", "r2_noise_ceiling", "r2_smoothed", "r_hat"]
    table = model.run_summary()[columns]
    lines = [
        f"- runs fitted: {len(table)}; draws: {model.idata.posterior.sizes['chain']} chains x "
        f"{model.idata.posterior.sizes['draw']}; sampler settings: {model.sampler_config}",
        f"- convergence: {conv.summary}",
    ]
    if seconds is not None:
        lines.append(f"- fit wall time: {seconds:.0f} s")
    lines += ["", "| run | " + " | ".join(str(c) for c in table.columns) + " |"]
    lines.append("|---" * (len(table.columns) + 1) + "|")
    for run, row in table.iterrows():
        cells = [f"{v:.3g}" if isinstance(v, float | np.floating) else str(v) for v in row.to_numpy()]
        lines.append(f"| {run} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="replace an existing models/tiny.nc")
    parser.add_argument("--summary", action="store_true", help="print the summary of the saved file and stop")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "tiny", help="folder of the example runs")
    args = parser.parse_args(argv)

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.report.demo import DemoSettings, fit_example_runs

    if args.summary:
        print("\n".join(summary_lines(GRPODynamicsModel.load(MODEL_FILE))))
        return 0
    if MODEL_FILE.exists() and not args.force:
        print(f"{MODEL_FILE} exists; pass --force to refit and replace it", file=sys.stderr)
        return 1
    MODEL_FILE.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    fitted = fit_example_runs(args.data, settings=DemoSettings())
    seconds = time.perf_counter() - start
    fitted.model.save(MODEL_FILE)
    print(f"wrote {MODEL_FILE} ({MODEL_FILE.stat().st_size / 1e6:.1f} MB)")
    print("\n".join(summary_lines(fitted.model, seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
