"""Ingest the public GRPO logs in ../shared/real_runs and report what came in.

Run from the repository root::

    .venv/bin/python benchmarks/ingest_real_runs.py [--manifest-out runs_manifest.csv]

Prints, for the native files and for the CSV conversions: runs ingested, runs rejected (with the
reason), the reward column of each run, which hyperparameters were found in the logs themselves,
and the wall time. ``--manifest-out`` writes a manifest for ``csv/`` with the settings recorded in
``sources.json`` (G, learning rate, seed, model, Adam beta1) so that fits can use them; values that
``sources.json`` gives only in words are left empty.
"""

from __future__ import annotations

import argparse
import json
import re
import time
import warnings
from pathlib import Path

import pandas as pd

from bayes_grpo._io import write_atomic
from bayes_grpo.runset.ingest import INGEST_ATTR, load_runs, rejected_runs, runset_summary

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "real_runs"


def _first_number(value: object) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    match = re.search(r"\((\d+(?:\.\d+)?)\)|^(\d+(?:\.\d+)?)", str(value))
    return float(match.group(1) or match.group(2)) if match else None


def manifest_rows(sources: list[dict], csv_dir: Path) -> pd.DataFrame:
    """One manifest row per CSV conversion, with the settings sources.json states as numbers."""
    rows = []
    for src in sources:
        beta1 = re.search(r"beta1\s*=\s*([0-9.]+)", str(src.get("optimizer", "")))
        adam = "adam" in str(src.get("optimizer", "")).lower()
        rows.append(
            {
                "path": str(csv_dir / f"{src['short_id']}.csv"),
                "run": src["short_id"],
                "model": str(src.get("model", "")).split(" (")[0],
                "group_size": _first_number(src.get("G")),
                "learning_rate": _first_number(src.get("learning_rate")),
                "seed": _first_number(src.get("seed")),
                "momentum": float(beta1.group(1)) if beta1 and adam else None,
                "momentum_convention": "ema" if beta1 and adam else None,
            }
        )
    return pd.DataFrame(rows)


def _report(title: str, paths: list[Path], **kwargs) -> None:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ds = load_runs(paths, **kwargs)
    elapsed = time.perf_counter() - start
    summary = runset_summary(ds)
    ok = summary[summary.status == "ok"]
    facts = json.loads(ds.attrs[INGEST_ATTR])
    print(
        f"\n== {title}: {len(ok)} runs ingested, {len(rejected_runs(ds))} rejected, {elapsed:.2f} s"
    )
    print(f"   files read: {len({f['file'] for f in facts.values()})}")
    print(ok["reward_source"].value_counts().to_string())
    filled = ok[["group_size", "learning_rate", "momentum", "k_ref", "beta", "seed"]].notna().sum()
    print("   runs with each hyperparameter found:", dict(filled))
    for info in rejected_runs(ds).values():
        print("   rejected:", info["reason"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest-out", help="write a manifest for csv/ from sources.json")
    args = parser.parse_args()
    if not REAL.is_dir():
        raise SystemExit(f"{REAL} not present")
    _report("native files", [REAL / "native"])
    _report("CSV conversions", [REAL / "csv"])
    if args.manifest_out:
        sources = json.loads((REAL / "sources.json").read_text())
        manifest = manifest_rows(sources, REAL / "csv")
        write_atomic(args.manifest_out, lambda p, df=manifest: df.to_csv(p, index=False))
        _report("CSV conversions with the sources.json manifest", [], manifest=args.manifest_out)


if __name__ == "__main__":
    main()
