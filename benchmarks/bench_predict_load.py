"""Benchmark: wall time of ``bayes-grpo predict`` on a small saved fit, and of its parts.

``predict models/tiny.nc ...`` (the README's command) spends most of its time before any
prediction: importing the packages, reading the fit, and the fit's load checks (convergence,
i.i.d. residuals). Each case runs in a fresh interpreter (``--repeats`` times, best and median
kept, wall and CPU seconds: on a shared machine compare the CPU), so import costs count as they
do for a user; ``modules`` says whether PyMC / PyTensor were imported by the end (a prediction
needs neither: it reads posterior draws), and the predicted numbers show that it is the same
prediction.

Usage (before / after: run it with ``PYTHONPATH`` at each checkout; results of 2026-12-05 in
``benchmarks/results/bench_predict_load.json``)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_predict_load.py [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys

#: The saved fit: ``models/tiny.nc`` of the checkout whose ``bayes_grpo`` is imported.
TINY = "str(__import__('pathlib').Path(__import__('bayes_grpo').__file__).parents[1] / 'models' / 'tiny.nc')"
#: The README's ``predict models/tiny.nc ...`` (``--json``), the fit's path put in first.
PREDICT_ARGS = [
    "--lr", "0.002", "--momentum", "0.9", "--momentum-convention", "ema", "--k-ref", "2",
    "--group-size", "16", "--steps", "300", "--json",
]
#: One fresh interpreter per case (imports count, as for a user); each prints a JSON line.
CASES: dict[str, str] = {
    "load_fit": (
        "import time, warnings, json, sys; warnings.simplefilter('ignore'); t = time.perf_counter();"
        "from bayes_grpo.model.core import as_fitted_model; imported = time.perf_counter() - t;"
        f"as_fitted_model({TINY}); total = time.perf_counter() - t;"
        "print(json.dumps({'import_s': imported, 'total_s': total,"
        " 'modules': sorted(m for m in ('pymc', 'pytensor') if m in sys.modules)}))"
    ),
    "predict_cli": (
        "import time, json, sys, io, contextlib, warnings; t = time.perf_counter();"
        "from bayes_grpo.cli import main; out = io.StringIO();"
        f"ctx = contextlib.redirect_stdout(out); ctx.__enter__(); rc = main(['predict', {TINY}, *{PREDICT_ARGS!r}]);"
        "ctx.__exit__(None, None, None); result = json.loads(out.getvalue());"
        "print(json.dumps({'total_s': time.perf_counter() - t, 'rc': rc, 'stop_step': result['stop_step'],"
        " 'final_mean_reward': result['final_mean_reward'],"
        " 'modules': sorted(m for m in ('pymc', 'pytensor') if m in sys.modules)}))"
    ),
}


def run_case(code: str) -> dict:
    """One fresh interpreter running ``code``: its JSON line, with ``cpu_s`` (user + system CPU
    seconds of the process: on a shared machine the wall time is mostly other processes')."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # -P: the working folder is not put first on the path, so PYTHONPATH (or the installed
    # package) decides which checkout is timed
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    results = {}
    for name, code in CASES.items():
        runs = [run_case(code) for _ in range(args.repeats)]
        totals = [r["total_s"] for r in runs]
        cpu = [r["cpu_s"] for r in runs]
        results[name] = {
            "best_s": round(min(totals), 2),
            "median_s": round(statistics.median(totals), 2),
            "cpu_best_s": round(min(cpu), 2),
            "cpu_median_s": round(statistics.median(cpu), 2),
            **{k: v for k, v in runs[-1].items() if k not in ("total_s", "import_s", "cpu_s")},
        }
        if "import_s" in runs[-1]:
            results[name]["import_best_s"] = round(min(r["import_s"] for r in runs), 2)
        print(name, json.dumps(results[name]), flush=True)
    if args.json:
        from bayes_grpo._io import write_text_atomic

        write_text_atomic(args.json, json.dumps(results, indent=2) + "\n", overwrite=True)


if __name__ == "__main__":
    main()
