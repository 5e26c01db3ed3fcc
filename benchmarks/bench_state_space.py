"""Cost of the exact state-space (Kalman) likelihood: compilation, one gradient, one fit.

The state-space observation model (``bayes_grpo.model.kalman``) runs a PyTensor ``scan`` over
the step grid, forward for the log density and backward for its gradient, so its cost grows
with the number of steps and is dominated by the scan's per-step overhead, not by arithmetic.
This script measures it on a small simulated run set (one LLM, G = 4 and 16, one seed each),
so a user can plan a state-space fit or ``bayes-grpo invariance --likelihood state_space``
(which fits H0 and H1 once per prior width):

    PYTENSOR_FLAGS=base_compiledir=/tmp/ptc_ss .venv/bin/python benchmarks/bench_state_space.py \
        [--steps 200] [--draws 500 --tune 500] [--samplers pymc nutpie] [--json out.json]

Prints and writes: compile time and mean wall time of one log density + gradient evaluation
(C backend, the PyMC sampler's), and per sampler the fit wall time (compilation included) with
its convergence figures.
"""

from __future__ import annotations

import argparse
import json
import time

from bayes_grpo._io import write_text_atomic


def _runset(n_steps: int, seed: int):
    from bayes_grpo.dynamics.simulate import DEFAULT_MODELS, simulate_sde_runset

    name = next(iter(DEFAULT_MODELS))
    return simulate_sde_runset(
        models={name: DEFAULT_MODELS[name]},
        group_sizes=(4, 16),
        n_seeds=1,
        n_steps=n_steps,
        measurement_sd=0.02,
        random_seed=seed,
    )


def gradient_cost(runset, n_evals: int = 200) -> dict[str, float]:
    """Compile time (s) and mean time (ms) of one log density + gradient at the initial point."""
    from pymc.blocking import DictToArrayBijection

    from bayes_grpo.model import GRPODynamicsModel

    model = GRPODynamicsModel(likelihood="state_space").build_model(runset)
    start = time.perf_counter()
    fn = model.logp_dlogp_function(ravel_inputs=True)
    fn.set_extra_values({})
    compile_s = time.perf_counter() - start
    point = model.initial_point()
    x = DictToArrayBijection.map({v.name: point[v.name] for v in fn._grad_vars}).data
    fn(x)
    start = time.perf_counter()
    for _ in range(n_evals):
        fn(x)
    return {"compile_s": compile_s, "gradient_ms": (time.perf_counter() - start) / n_evals * 1e3}


def fit_cost(runset, sampler: str, draws: int, tune: int, seed: int) -> dict[str, float]:
    """Wall time (s) of a 2-chain state-space fit with ``sampler``, and its convergence."""
    from bayes_grpo.model import GRPODynamicsModel

    start = time.perf_counter()
    model = GRPODynamicsModel(likelihood="state_space", sampler_config={"sampler": sampler})
    model.fit(runset, draws=draws, tune=tune, chains=2, random_seed=seed, progressbar=False, cores=1)
    wall = time.perf_counter() - start
    v = model.convergence().values
    return {
        "wall_s": wall,
        "max_r_hat": v["max_r_hat"],
        "min_ess_bulk": v["min_ess_bulk"],
        "divergences": v["divergences"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--samplers", nargs="*", default=["pymc", "nutpie"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    runset = _runset(args.steps, args.seed)
    result = {
        "runs": int(runset.sizes["run"]),
        "steps": int(runset.sizes["step"]),
        "draws": args.draws,
        "tune": args.tune,
        "chains": 2,
        **gradient_cost(runset),
    }
    print(f"{result['runs']} runs x {result['steps']} steps: compile {result['compile_s']:.1f} s, "
          f"log density + gradient {result['gradient_ms']:.2f} ms", flush=True)
    for sampler in args.samplers:
        result[sampler] = fit_cost(runset, sampler, args.draws, args.tune, args.seed)
        r = result[sampler]
        print(f"{sampler}: fit {r['wall_s']:.0f} s (2 x ({args.tune} + {args.draws})), max R-hat "
              f"{r['max_r_hat']:.3f}, min bulk ESS {r['min_ess_bulk']:.0f}, {r['divergences']} divergences",
              flush=True)
    if args.json:
        write_text_atomic(args.json, json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
