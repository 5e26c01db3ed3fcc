"""Benchmark: what a saved fit's data checksums cost ``save`` and ``load``.

``GRPODynamicsModel.save`` hashes every array of the file it wrote (read back with h5py) and
stores the digests as an attribute; ``load`` hashes the file's arrays again and compares
(``model.core.stored_data_checksums``). The shipped ``models/*.nc`` carry no checksums, so
``bench_predict_load.py`` (which loads ``models/tiny.nc``) never runs the check: here
``models/tiny.nc`` is loaded and saved again by the checkout's code, and that file timed.

Cases, each ``--repeats`` times in this one process (best and median, wall and CPU seconds:
on a shared machine compare the CPU):

- ``checksums``: ``stored_data_checksums`` of the re-saved fit (the check ``load`` runs);
- ``write_checksums``: the step of ``save`` after the arrays are written (hash + attribute);
- ``save`` / ``load``: the whole of each, for scale.

Usage (before / after: run it with ``PYTHONPATH`` at each checkout; results of 2026-12-07 in
``benchmarks/results/bench_fit_checksums.json``)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_fit_checksums.py [--repeats 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path


def timed(fn: Callable[[], object], repeats: int) -> dict[str, float]:
    """Best and median wall and CPU milliseconds of ``repeats`` calls of ``fn``."""
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    ms = lambda xs, f: round(1000 * f(xs), 1)  # noqa: E731
    return {
        "best_ms": ms(wall, min),
        "median_ms": ms(wall, statistics.median),
        "cpu_best_ms": ms(cpu, min),
        "cpu_median_ms": ms(cpu, statistics.median),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the fit's load warnings (a tiny demo fit): not timed here

    import bayes_grpo
    from bayes_grpo.model import core
    from bayes_grpo.model.core import GRPODynamicsModel, stored_data_checksums

    tiny = Path(bayes_grpo.__file__).resolve().parents[1] / "models" / "tiny.nc"
    with tempfile.TemporaryDirectory() as tmp:
        model = GRPODynamicsModel.load(tiny)
        fit = model.save(Path(tmp) / "fit.nc")
        plain = Path(tmp) / "plain.nc"
        model.idata.to_netcdf(str(plain), engine="h5netcdf")  # the arrays as save writes them
        scratch = Path(tmp) / "scratch.nc"

        def write_checksums() -> None:
            shutil.copyfile(plain, scratch)
            core._write_data_checksums(scratch)

        cases = {
            "checksums": lambda: stored_data_checksums(fit),
            "copy_only": lambda: shutil.copyfile(plain, scratch),  # subtract from write_checksums
            "write_checksums": write_checksums,
            "save": lambda: model.save(scratch, overwrite=True),
            "load": lambda: GRPODynamicsModel.load(fit),
        }
        results = {"package": bayes_grpo.__file__, "file_bytes": fit.stat().st_size}
        for name, fn in cases.items():
            fn()  # warm: imports, file cache
            results[name] = timed(fn, args.repeats)
            print(name, json.dumps(results[name]), flush=True)
    if args.json:
        from bayes_grpo._io import write_text_atomic

        write_text_atomic(args.json, json.dumps(results, indent=2) + "\n", overwrite=True)


if __name__ == "__main__":
    main()
