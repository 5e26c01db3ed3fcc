"""Law comparison tables (issue 7): oscillator (mechanistic, phenomenological), single
exponential and logistic, fitted with PyMC to the same runs; PSIS-LOO (az.compare, Pareto-k
counts), leave-future-out on the last 30% of each run, R^2 per run.

    .venv/bin/python benchmarks/compare_laws.py [--sets bandit sim real] [--draws 300 --tune 300]

Writes ``<set>_loo.csv``, ``<set>_lfo.csv``, ``<set>_per_run.csv`` and ``summary.json`` under
``--out`` (default benchmarks/results/compare_laws). Real logs: the runs named in
``--real-runs`` (default: a set covering the shapes listed in ../shared/real_runs/README.md),
subsampled to at most ``--max-points`` logged steps each to keep NUTS affordable.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bayes_grpo._io import write_atomic, write_text_atomic
from bayes_grpo.predict.compare import compare_laws

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "real_runs"
DEFAULT_REAL = [
    "alex_q25_0.5b_wordle_g4_run2",
    "sun_q35_9b_g2_rho0.7_s44",
    "shibuki_qmath1.5b_g8_lr4e-5",
    "alex_q25_3b_wordle_g12",
    "aarav_q25_3bi_finance_g4_stage1",
    "sun_q35_9b_g2_rho1.0_s43",
    "alex_q25_wordle_g16_flat",
    "duruoli_llama3.1_8b_quantqa_g4",
]


def thin(ds, max_points: int):
    """Keep every k-th logged step of each run so that no run has more than ``max_points``."""
    from bayes_grpo.runset import make_runset, run_coords, run_frame

    curves, meta = {}, {}
    for r in map(str, ds["run"].values):
        frame = run_frame(ds, r)[["reward"]]
        k = max(1, int(np.ceil(len(frame) / max_points)))
        curves[r] = frame.iloc[::k]
        meta[r] = run_coords(ds, r)
    return make_runset(curves, meta)


def load(name: str, args):
    if name == "bandit":
        from bayes_grpo.bandit import simulate_bandit

        return simulate_bandit(
            k_ref=[1, 4],
            learning_rate=[0.1],
            group_size=8,
            momentum=0.5,
            seeds=2,
            steps=150,
            seed=args.seed,
        )
    if name == "sim":
        from bayes_grpo.dynamics.simulate import simulate_sde_runset

        return simulate_sde_runset(
            group_sizes=(16,),
            learning_rates=(1e-3,),
            k_refs=(1, 4),
            n_seeds=1,
            n_steps=300,
            measurement_sd=0.02,
            random_seed=args.seed,
        )
    from bayes_grpo.runset.ingest import load_runs

    ds = load_runs([REAL / "csv"])
    return ds.sel(run=[r for r in args.real_runs if r in set(map(str, ds["run"].values))])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sets", nargs="+", default=["bandit", "sim", "real"])
    ap.add_argument("--out", default="benchmarks/results/compare_laws")
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--tune", type=int, default=300)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-points", type=int, default=150)
    ap.add_argument("--real-runs", nargs="+", default=DEFAULT_REAL)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for name in args.sets:
        if name == "real" and not REAL.is_dir():
            print(f"skipping real: {REAL} absent")
            continue
        ds = thin(load(name, args), args.max_points)
        start = time.perf_counter()
        res = compare_laws(
            ds, draws=args.draws, tune=args.tune, chains=args.chains, random_seed=args.seed
        )
        seconds = time.perf_counter() - start
        write_atomic(out / f"{name}_loo.csv", res.loo.to_csv)
        write_atomic(out / f"{name}_lfo.csv", res.lfo.to_csv)
        write_atomic(out / f"{name}_per_run.csv", lambda p, df=res.per_run: df.to_csv(p, index=False))
        winners = res.per_run_winners()
        write_atomic(out / f"{name}_winners.csv", lambda p, df=winners: df.to_csv(p, index=False))
        summary[name] = {
            "seconds": seconds,
            "n_runs": int(ds.sizes["run"]),
            **res.to_check_result().to_dict(),
        }
        write_text_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str))
        print(f"== {name} ({seconds:.0f} s)")
        print(res.loo.round(2).to_string())
        print(res.lfo.round(3).to_string())
        print(winners.to_string(index=False))
        print(res.notes)


if __name__ == "__main__":
    main()
