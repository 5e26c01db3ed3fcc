"""Benchmark: a K_ref sweep of the softmax-bandit GRPO (40 K_ref x 32 seeds x 3000 steps).

    .venv/bin/python benchmarks/bench_bandit_sweep.py [--device cpu|cuda|auto] [--repeat N]

Target (issue 3): <= 60 s on the 2-core CPU. Reports the wall time of the batched tensor
program alone and of the whole ``sweep_k_ref`` call (which also builds the run set and the
per-run truth), the throughput in run-steps per second (runs x steps / time), and the CPU
time of the sweep (the wall time it would take on an otherwise idle machine; the loop is
single-threaded).
Settings: G = 8, B = 16 prompts per step, eta = 0.1, mu = 0.5 heavy ball, advantage "loo",
no PPO clip (the defaults of ``sweep_k_ref`` and ``bayes-grpo sweep``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from bayes_grpo.bandit.experiments import sweep_k_ref
from bayes_grpo.bandit.simulator import simulate_bandit_arrays

N_K_REF, N_SEEDS, N_STEPS = 40, 32, 3000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    runs = N_K_REF * N_SEEDS
    lags = np.repeat(np.arange(N_K_REF), N_SEEDS).astype(float)
    print(
        f"torch {torch.__version__}, device {args.device}, {torch.get_num_threads()} intra-op threads available"
    )
    for i in range(args.repeat):
        t0 = time.perf_counter()
        simulate_bandit_arrays(
            k_ref=lags,
            group_size=np.full(runs, 8.0),
            learning_rate=np.full(runs, 0.1),
            momentum=np.full(runs, 0.5),
            beta=np.full(runs, 1.0),
            p_init=np.full(runs, 0.5),
            steps=N_STEPS,
            device=args.device,
        )
        t_sim = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        ds = sweep_k_ref(
            range(N_K_REF), seeds=N_SEEDS, steps=N_STEPS, device=args.device, progress=False
        )
        t_all, cpu_all = time.perf_counter() - t0, time.process_time() - c0
        assert ds.sizes == {"run": runs, "step": N_STEPS}
        print(
            f"[{i}] {runs} runs x {N_STEPS} steps: tensor program {t_sim:.1f} s "
            f"({runs * N_STEPS / t_sim:,.0f} run-steps/s); sweep_k_ref incl. run set {t_all:.1f} s "
            f"({runs * N_STEPS / t_all:,.0f} run-steps/s), CPU time {cpu_all:.1f} s "
            f"(wall time on an idle machine is about this); target <= 60 s: {'met' if t_all <= 60 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
