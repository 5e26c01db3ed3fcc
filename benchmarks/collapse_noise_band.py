"""Noise band and detection rate of the "reward collapse" signal of ``diagnose``'s instability mode.

The signal (``bayes_grpo.diagnostics.instability``, ``InstabilityConfig.collapse_sd``): with
windows of a quarter of the run, the last window's mean ends below the first's, and the best
window's mean lies ``collapse_sd`` (3) within-window sds above both. This script runs the
signal itself (no fits) on two kinds of simulated rewards, ``--runs`` runs per cell:

* noise band: a stationary AR(1) wander (sd ``--wander-sd``, correlation time 5-50% of the
  run) plus white noise (sd ``--white-sd``), 40-400 points, flat at 0.3 or after a logistic
  rise 0.3 -> 0.8 centred at 10% of the run; the share of runs flagged is a false-alarm rate;
* detection: the same rise with white noise 0.05, then at a fraction ``c`` of the run the
  reward falls to a floor (0.02 +- 0.01, a reward that has collapsed to nothing; or
  0.2 +- 0.05) and stays; the share flagged is the detection rate.

    .venv/bin/python benchmarks/collapse_noise_band.py            # ~1 min
    .venv/bin/python benchmarks/collapse_noise_band.py --white-sd 0 --wander-sd 0.1

Seeded (``--seed``): every cell's runs come from one ``numpy`` generator seeded by the cell.
"""

from __future__ import annotations

import argparse

import numpy as np

from bayes_grpo.diagnostics import DiagnosticsConfig
from bayes_grpo.diagnostics._series import Series
from bayes_grpo.diagnostics.instability import _collapse_signal


def ar1(n: int, correlation_time: float, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Stationary AR(1) path of ``n`` points, marginal sd ``sd``, lag-1 r ``exp(-1/time)``."""
    phi = float(np.exp(-1.0 / max(correlation_time, 1e-9)))
    innov = rng.standard_normal(n) * sd * np.sqrt(1.0 - phi**2)
    out = np.empty(n)
    out[0] = sd * rng.standard_normal()
    for i in range(1, n):
        out[i] = phi * out[i - 1] + innov[i]
    return out


def rise(n: int, rising: bool) -> np.ndarray:
    t = np.arange(n, dtype=float)
    return 0.3 + (0.5 / (1.0 + np.exp(-(t - 0.1 * n) / (0.03 * n))) if rising else 0.0)


def flagged(values: np.ndarray, config: DiagnosticsConfig) -> bool:
    steps = np.arange(values.size, dtype=float)
    sig = _collapse_signal(Series("reward", steps, values), config.instability, config.common)
    return bool(sig is not None and sig["detected"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=400, help="runs per cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wander-sd", type=float, default=0.1)
    p.add_argument("--white-sd", type=float, default=0.03)
    args = p.parse_args()
    config = DiagnosticsConfig()

    print(f"noise band: share of healthy runs flagged (AR(1) sd {args.wander_sd} + white sd {args.white_sd})")
    print("| before it | points | correlation time / run | flagged |")
    print("|---|---|---|---|")
    for rising in (False, True):
        for n in (40, 100, 400):
            for frac in (0.05, 0.1, 0.25, 0.5):
                rng = np.random.default_rng([args.seed, n, int(1000 * frac), rising])
                hits = sum(
                    flagged(
                        rise(n, rising)
                        + ar1(n, frac * n, args.wander_sd, rng)
                        + args.white_sd * rng.standard_normal(n),
                        config,
                    )
                    for _ in range(args.runs)
                )
                label = "a rise" if rising else "flat"
                print(f"| {label} | {n} | {frac:.2f} | {hits / args.runs:.3f} |")

    print("\ndetection: share of collapsed runs flagged (rise, white sd 0.05, fall at c)")
    print("| points | floor | c = 0.5 | 0.7 | 0.75 | 0.8 | 0.85 | 0.9 |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (100, 300):
        for floor, floor_sd in ((0.02, 0.01), (0.2, 0.05)):
            cells = []
            for c in (0.5, 0.7, 0.75, 0.8, 0.85, 0.9):
                rng = np.random.default_rng([args.seed, n, int(100 * floor), int(100 * c)])
                runs = args.runs // 2
                t = np.arange(n)
                hits = 0
                for _ in range(runs):
                    v = rise(n, True) + 0.05 * rng.standard_normal(n)
                    v = np.where(t >= c * n, floor + floor_sd * rng.standard_normal(n), v)
                    hits += flagged(v, config)
                cells.append(f"{hits / runs:.2f}")
            print(f"| {n} | {floor} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
