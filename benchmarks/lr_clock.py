"""How much a learning-rate schedule biases the constant-gain law, how much the clock removes, and
the law on the schedule (model version 7, config ``learning_rate_schedule.follow``).

Runs of the linear recursion on a schedule (DESIGN.md section 1 with the rate ``eta m[n]`` at
update ``n``, the momentum buffer apart from the rate as in torch's SGD:
``w[n] = mu w[n-1] - a e[n-L]``, ``e[n+1] = e[n] + m[n] w[n]``;
:func:`bayes_grpo.dynamics.simulate.simulate_recursion` with ``lr_multipliers``), p* 0.8, R0 0.1,
300 steps, for four schedules of :func:`bayes_grpo.dynamics.schedule.lr_multipliers` (constant;
TRL's default linear decay; 10% warm-up then linear decay; 10% warm-up then cosine). Two tables:

1. noiseless: the RMS distance of each run from the law with the *true* gain, on raw steps and on
   the learning-rate clock (:func:`bayes_grpo.runset.clock.clock_runset`), and from the law on the
   schedule (:func:`bayes_grpo.dynamics.trajectory.scheduled_reward_trajectory`), beside the same
   distance for the constant-rate run (the continuous law against the discrete recursion);
2. with noise (sd 0.02, seed 0): the gain and plateau a least-squares fit recovers: the
   constant-gain law on raw steps and on the clock, and the law on the schedule.

3. with ``--fit``: the mechanistic PyMC model (iid, 2 chains x 300 draws) fitted to four such
   runs (learning rates 0.01 and 0.02 x 2 seeds, K 0.5, mu 0.9 heavy ball, K_ref 2, warm-up then
   linear decay, noise sd 0.02): following the logged schedule (config
   ``learning_rate_schedule.follow`` true), the constant-rate law on raw steps (the default) and
   on the clock: posterior median gain per run.

    .venv/bin/python benchmarks/lr_clock.py            # a few seconds
    .venv/bin/python benchmarks/lr_clock.py --fit      # + two PyMC fits, about 3 minutes on 2 cores
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from bayes_grpo.dynamics.coefficients import oscillator_coefficients
from bayes_grpo.dynamics.schedule import lr_multipliers
from bayes_grpo.dynamics.simulate import simulate_recursion
from bayes_grpo.dynamics.trajectory import reward_trajectory, scheduled_reward_trajectory
from bayes_grpo.runset import make_runset
from bayes_grpo.runset.clock import clock_runset

T, PSTAR, R0 = 300, 0.8, 0.1
CASES = ((0.0, 1, 0.01), (0.5, 1, 0.01), (0.5, 4, 0.02), (0.9, 1, 0.002), (0.9, 2, 0.01))  # mu, K_ref, a


def schedules() -> dict[str, np.ndarray]:
    w = T // 10
    return {
        "constant": np.ones(T),
        "linear decay": lr_multipliers("linear", T),
        "warm-up + linear decay": lr_multipliers("linear", T, warmup_steps=w),
        "warm-up + cosine": lr_multipliers("cosine", T, warmup_steps=w),
    }


def recursion(a: float, shape: np.ndarray, mu: float, lag: int) -> np.ndarray:
    """Rewards at steps ``0 .. T-1`` of the recursion on the schedule ``shape``."""
    return PSTAR + simulate_recursion(a, mu, lag, T - 1, e0=R0 - PSTAR, lr_multipliers=shape)[0]


def on_clock(y: np.ndarray, shape: np.ndarray, eta: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """``(clock steps, rewards)`` of one run after :func:`clock_runset` (constant runs unchanged)."""
    ds = make_runset({"r": pd.DataFrame({"reward": y, "lr": eta * shape}, index=np.arange(T))}, {"r": {"learning_rate": eta}})
    if np.ptp(shape) > 0.5:
        ds = clock_runset(ds)
    r = ds["reward"].sel(run="r")
    r = r[np.isfinite(r.values)]
    return r["step"].values.astype(float), r.values


def law(t, a, mu, lag, pstar=PSTAR, r0=R0):
    mass, damping, k_eff = oscillator_coefficients(a, mu, lag)
    return reward_trajectory(t, mass, damping, k_eff, pstar, r0)


def scheduled_law(t, shape, a, mu, lag, pstar=PSTAR, r0=R0):
    """The law on the schedule at whole steps ``t`` (``0 .. T-1``): interval ``(n, n+1]`` at ``shape[n]``."""
    mass, damping, k_eff = oscillator_coefficients(a, mu, lag)
    mult = np.concatenate([[1.0], shape[: t.size - 1]])
    return scheduled_reward_trajectory(t, mult, mass, damping, k_eff, pstar, r0, lag=float(lag))


def fit_gain(t, y, mu, lag, shape=None) -> tuple[float, float]:
    def residual(th):
        if shape is not None:
            return scheduled_law(t, shape, np.exp(th[0]), mu, lag, th[1], th[2]) - y
        return law(t, np.exp(th[0]), mu, lag, th[1], th[2]) - y

    best = min(
        (least_squares(residual, [np.log(a0), y[-20:].mean(), y[:5].mean()]) for a0 in (0.002, 0.01, 0.05)),
        key=lambda r: r.cost,
    )
    return float(np.exp(best.x[0])), float(best.x[1])


def main() -> None:
    rng = np.random.default_rng(0)
    steps = np.arange(T, dtype=float)
    print(
        "RMS distance from the law with the true gain (noiseless): constant-rate run | scheduled on steps "
        "| on the clock | law on the schedule"
    )
    for mu, lag, a in CASES:
        floor = np.sqrt(np.mean((law(steps, a, mu, lag) - recursion(a, np.ones(T), mu, lag)) ** 2))
        for name, shape in schedules().items():
            if name == "constant":
                continue
            y = recursion(a, shape, mu, lag)
            raw = np.sqrt(np.mean((law(steps, a, mu, lag) - y) ** 2))
            tc, yc = on_clock(y, shape)
            clock = np.sqrt(np.mean((law(tc, a, mu, lag) - yc) ** 2))
            followed = np.sqrt(np.mean((scheduled_law(steps, shape, a, mu, lag) - y) ** 2))
            print(f"  mu {mu:.1f} K_ref {lag} a {a:<6g} {name:24s} {floor:.4f} | {raw:.4f} | {clock:.4f} | {followed:.4f}")
    print(
        "\nLeast-squares gain / plateau (noise sd 0.02; truth p* 0.8): constant-gain law on steps | on the clock "
        "| law on the schedule"
    )
    for mu, lag, a in CASES:
        for name, shape in schedules().items():
            y = recursion(a, shape, mu, lag) + 0.02 * rng.standard_normal(T)
            a1, p1 = fit_gain(steps, y, mu, lag)
            a2, p2 = fit_gain(*on_clock(y, shape), mu, lag)
            a3, p3 = fit_gain(steps, y, mu, lag, shape)
            print(
                f"  mu {mu:.1f} K_ref {lag} a {a:<6g} {name:24s} a {a1:.4f} p* {p1:.3f} | a {a2:.4f} p* {p2:.3f} "
                f"| a {a3:.4f} p* {p3:.3f}"
            )


def fit_comparison() -> None:
    from bayes_grpo.model import GRPODynamicsModel

    mu, lag, k, sd = 0.9, 2, 0.5, 0.02
    shape = schedules()["warm-up + linear decay"]
    rng = np.random.default_rng(1)
    curves, meta, truth = {}, {}, {}
    for eta in (0.01, 0.02):
        for seed in (0, 1):
            rid = f"lr{eta}_s{seed}"
            y = recursion(eta * k, shape, mu, lag) + sd * rng.standard_normal(T)
            curves[rid] = pd.DataFrame({"reward": y, "lr": eta * shape}, index=np.arange(T))
            meta[rid] = dict(model="m", group_size=8, learning_rate=eta, momentum=mu, momentum_convention="heavy_ball", k_ref=lag)
            truth[rid] = eta * k
    raw = make_runset(curves, meta)
    print(f"\nPyMC fit, mu {mu} K_ref {lag}, warm-up + linear decay (truth p* {PSTAR}): posterior median gain per run")
    variants = (
        ("schedule followed", raw, {"learning_rate_schedule": {"follow": True}}),
        ("constant-rate law, raw steps (default)", raw, None),
        ("constant-rate law, lr clock", clock_runset(raw), None),
    )
    for name, ds, config in variants:
        model = GRPODynamicsModel(model_config=config)
        model.fit(ds, draws=300, tune=300, chains=2, random_seed=0, progressbar=False)
        gain = model.idata.posterior["a"].median(("chain", "draw")).to_series()
        r2 = model.run_summary()["r2_raw"]
        print(f"  {name}: p* {float(model.idata.posterior['plateau'].median()):.3f}; {model.convergence().summary[:60]}")
        for rid, value in gain.items():
            print(f"    {rid}: a {value:.4f} (truth {truth[rid]:.4f}), raw R^2 {r2[rid]:.3f}")


if __name__ == "__main__":
    import sys

    main()
    if "--fit" in sys.argv[1:]:
        fit_comparison()
