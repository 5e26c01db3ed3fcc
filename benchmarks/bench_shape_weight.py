"""Cost of the phenomenological prior's shape-information weight (model versions 5 and 6).

The weight (:func:`bayes_grpo.dynamics.identifiability.shape_information_log_density`) needs
the unit curve and its derivatives in ``log zeta`` and ``log w0`` on every LLM's design, at
every gradient NUTS takes. Model version 5 took the derivatives by central differences (five
evaluations of the curve); version 6 uses their closed forms (one evaluation of the
propagators). This script compiles the weight and its gradient for both forms on the same
design and times compilation and evaluation, so the gain is measured, not asserted:

    PYTENSOR_FLAGS=base_compiledir=/tmp/ptc_bench_weight .venv/bin/python benchmarks/bench_shape_weight.py \
        [--curves 24] [--points 200] [--mode FAST_RUN NUMBA] [--json out.json]

Compilation times depend on PyTensor's cache: use a fresh ``base_compiledir`` for cold times.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def central_difference_form(log_zeta, log_w0, t, weight, ops, step: float = 1e-3):
    """Model version 5's weight: the same density with the derivatives by central differences."""
    from bayes_grpo.dynamics.identifiability import projected_log_det
    from bayes_grpo.dynamics.trajectory import error_trajectory

    def unit(lz, lw):
        w0 = ops.exp(lw)
        return error_trajectory(t, 1.0, 2.0 * ops.exp(lz) * w0, w0 * w0, 1.0)

    lz, lw = log_zeta[..., None], log_w0[..., None]
    f = unit(lz, lw)
    d_zeta = (unit(lz + step, lw) - unit(lz - step, lw)) / (2.0 * step)
    d_w0 = (unit(lz, lw + step) - unit(lz, lw - step)) / (2.0 * step)
    return projected_log_det(f, d_zeta, d_w0, weight, ops)


def time_form(name: str, mode: str, n_curves: int, n_points: int, repeats: int = 200) -> dict:
    """Compile ``name``'s weight + gradient in ``mode`` and time one evaluation."""
    import pytensor
    import pytensor.tensor as pt

    from bayes_grpo.dynamics._backend import pytensor_ops
    from bayes_grpo.dynamics.identifiability import shape_information_log_density

    t = np.tile(np.linspace(0.0, 400.0, n_points), (n_curves, 1))
    w = np.ones_like(t)
    a, b = pt.vector("log_zeta"), pt.vector("log_w0")
    tt, ww = pt.as_tensor_variable(t), pt.as_tensor_variable(w)
    if name == "exact (v6)":
        dens = shape_information_log_density(a, b, tt, ww).sum()
    else:
        dens = central_difference_form(a, b, tt, ww, pytensor_ops()).sum()
    start = time.perf_counter()
    fn = pytensor.function([a, b], [dens, *pytensor.grad(dens, [a, b])], mode=mode)
    compile_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    lz, lw = rng.normal(0.0, 1.0, n_curves), np.log(rng.uniform(0.005, 0.2, n_curves))
    value = float(fn(lz, lw)[0])
    start = time.perf_counter()
    for _ in range(repeats):
        fn(lz, lw)
    return {
        "form": name,
        "mode": mode,
        "compile_s": round(compile_s, 2),
        "eval_grad_ms": round((time.perf_counter() - start) / repeats * 1e3, 3),
        "graph_nodes": len(fn.maker.fgraph.apply_nodes),
        "log_density": value,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--curves", type=int, default=24, help="LLMs (one design each); default 24, the public logs")
    ap.add_argument("--points", type=int, default=200, help="design points per LLM (the cap, 200)")
    ap.add_argument("--mode", nargs="+", default=["FAST_RUN", "NUMBA"], help="PyTensor modes (C and numba backends)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    rows = [
        time_form(form, mode, args.curves, args.points)
        for mode in args.mode
        for form in ("central differences (v5)", "exact (v6)")
    ]
    for r in rows:
        print(
            f"{r['mode']:9s} {r['form']:26s} compile {r['compile_s']:7.1f} s  "
            f"weight + gradient {r['eval_grad_ms']:7.3f} ms  nodes {r['graph_nodes']:4d}  log density {r['log_density']:.6f}"
        )
    if args.json:
        from bayes_grpo._io import write_text_atomic

        write_text_atomic(args.json, json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
