"""Built-in simulated GRPO logs, each built to show one failure mode or none.

Every case simulates the per-step logs of a GRPO run at the level of groups: each step
draws ``n_prompts`` prompts whose success probabilities are Beta-distributed around the
mean reward ``p(t)`` (``heterogeneity`` is the Beta's concentration: small means a mix of
always-solved and never-solved prompts), draws ``G`` binary rewards per prompt, and logs
what TRL logs from them: ``reward`` (mean), ``reward_std`` (mean within-group std, ddof 1)
and ``frac_reward_zero_std``. Side quantities (``entropy``, ``grad_norm``, ``clip_ratio``,
``importance_ratio_max``) and an evaluation reward (``eval_reward``, 256 held-out
samples every ``eval_every`` steps) are simulated around their own mean curves. The mean
reward curve is the closed-form damped-oscillator trajectory
(:func:`bayes_grpo.dynamics.trajectory.reward_trajectory`); in ``healthy_wandering`` the
policy's success probability also wanders about it as the SDE's process noise makes it
(:func:`bayes_grpo.dynamics.simulate.simulate_sde`, the same overdamped dynamics).

:data:`CASES` maps each case to the modes it must show; :func:`simulated_case` builds one
as a run set. Used by the tests and by ``benchmarks/diagnostics_confusion.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo._arguments import checked_seed, is_whole_number
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.runset.core import make_runset

#: Case name -> the failure modes it is built to show (empty: a healthy run).
CASES: dict[str, frozenset[str]] = {
    "healthy": frozenset(),
    "healthy_reward_only": frozenset(),
    "reward_hacking": frozenset({"reward_hacking"}),
    "advantage_degeneracy": frozenset({"advantage_degeneracy"}),
    "advantage_degeneracy_from_std": frozenset({"advantage_degeneracy"}),
    "policy_concentration": frozenset({"policy_concentration"}),
    "instability_growth": frozenset({"instability"}),
    "instability_oscillation": frozenset({"instability"}),
    # weaker versions and a noisier healthy run: where the thresholds start to matter
    "healthy_noisy": frozenset(),
    "reward_hacking_mild": frozenset({"reward_hacking"}),
    "policy_concentration_mild": frozenset({"policy_concentration"}),
    "instability_oscillation_mild": frozenset({"instability"}),
    "instability_growth_mild": frozenset({"instability"}),
    # process noise: the mean success probability wanders about a slow overdamped curve (the
    # SDE's own fluctuations), which an oscillator fitted under independent noise reads as swings
    "healthy_wandering": frozenset(),
}

#: Stationary sd of the wander of ``healthy_wandering``, as a share of its rise.
WANDER_SD_OF_RISE: float = 0.25


@dataclass(frozen=True)
class _Curve:
    """Mean reward curve of the damped oscillator with ``M = 1``."""

    r0: float
    plateau: float
    zeta: float
    rise_fraction: float  # 1 / w0 as a fraction of the run

    def __call__(self, t: np.ndarray, n_steps: int) -> np.ndarray:
        w0 = 1.0 / (self.rise_fraction * n_steps)
        return np.asarray(
            reward_trajectory(t, 1.0, 2.0 * self.zeta * w0, w0**2, self.plateau, self.r0)
        )


def _wander(curve: _Curve, t: np.ndarray, n_steps: int, rng: np.random.Generator) -> np.ndarray:
    """Process-noise path of ``curve``'s dynamics from rest at step 0, with stationary sd
    :data:`WANDER_SD_OF_RISE` times the rise, shape of ``t``."""
    from bayes_grpo.dynamics.simulate import simulate_sde, stationary_covariance

    w0 = 1.0 / (curve.rise_fraction * n_steps)
    damping, k_eff = 2.0 * curve.zeta * w0, w0 * w0
    unit_var = float(np.squeeze(stationary_covariance(1.0, damping, k_eff, 1.0, 1.0))[0, 0])
    noise_d = (WANDER_SD_OF_RISE * abs(curve.plateau - curve.r0)) ** 2 / unit_var
    return simulate_sde(1.0, damping, k_eff, noise_d, 1.0, t, e0=0.0, rng=rng)[0]


def group_logs(
    p: np.ndarray, group_size: int, n_prompts: int, heterogeneity: float, rng: np.random.Generator
) -> pd.DataFrame:
    """TRL-style per-step group statistics for mean success probabilities ``p`` (n,).

    Returns a frame with ``reward``, ``reward_std`` (mean within-group std, ddof 1) and
    ``frac_reward_zero_std`` (share of groups whose rewards are all equal).
    """
    p = np.clip(np.asarray(p, dtype=float), 1e-3, 1 - 1e-3)
    q = rng.beta(
        p[:, None] * heterogeneity, (1 - p[:, None]) * heterogeneity, size=(p.size, n_prompts)
    )
    k = rng.binomial(group_size, q)
    std = np.sqrt(k * (group_size - k) / (group_size * (group_size - 1)))
    return pd.DataFrame(
        {
            "reward": k.sum(axis=1) / (n_prompts * group_size),
            "reward_std": std.mean(axis=1),
            "frac_reward_zero_std": ((k == 0) | (k == group_size)).mean(axis=1),
        }
    )


def simulated_case(
    name: str,
    *,
    seed: int = 0,
    n_steps: int = 200,
    group_size: int = 8,
    n_prompts: int = 16,
    eval_every: int = 10,
) -> xr.Dataset:
    """One simulated run built to show the modes in ``CASES[name]`` (run id = ``name``), its
    truth in ``attrs["truth"]["runs"][name]`` (case, modes, zeta, plateau; JSON).

    Parameters
    ----------
    name
        A key of :data:`CASES`.
    seed
        Seed of everything random in the case (a whole number >= 0, recorded as the run's seed).
    n_steps
        Optimizer steps (logged every step, from step 0).
    group_size, n_prompts
        ``G`` and prompts per step.
    eval_every
        Steps between evaluations.
    """
    if name not in CASES:
        raise ValueError(f"unknown case {name!r}; cases: {sorted(CASES)}")
    # G = 1 has no within-group std (ddof 1): reward_std was NaN at every step, beside numpy's
    # "invalid value" warning; no prompt likewise; an evaluation every 0 steps died in a slice
    for label, value, least in (
        ("n_steps", n_steps, 1),
        ("group_size", group_size, 2),
        ("n_prompts", n_prompts, 1),
        ("eval_every", eval_every, 1),
    ):
        # NaN failed in int()'s "cannot convert float NaN to integer", inf in an OverflowError and
        # None in int()'s TypeError, naming none of them
        if not (is_whole_number(value) and value >= least):
            raise ValueError(f"simulated_case: {label} must be a whole number >= {least}; got {value!r}")
    # recorded as the run's seed: 1.5 failed in NumPy's "SeedSequence expects int", -1 in its
    # "expected non-negative integer", True was the seed 1 and None an unrecorded fresh seed
    checked_seed(seed, generator=False)
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=float)
    x = t / n_steps
    heterogeneity = 6.0
    curve = _Curve(r0=0.15, plateau=0.65, zeta=1.3, rise_fraction=0.08)
    if name == "instability_oscillation":
        curve = _Curve(r0=0.15, plateau=0.6, zeta=0.15, rise_fraction=0.06)
    if name == "instability_oscillation_mild":
        curve = _Curve(r0=0.15, plateau=0.6, zeta=0.45, rise_fraction=0.06)  # 20% overshoot
    if name == "healthy_noisy":
        group_size, n_prompts = 4, 4
    if name == "healthy_wandering":
        curve = _Curve(r0=0.15, plateau=0.5, zeta=1.5, rise_fraction=0.08)
    if name.startswith("advantage_degeneracy"):
        curve = _Curve(r0=0.6, plateau=0.97, zeta=1.3, rise_fraction=0.06)
        heterogeneity = 1.5
    if name.startswith("policy_concentration"):
        curve = _Curve(r0=0.15, plateau=0.65, zeta=1.3, rise_fraction=0.2)
    if name.startswith("reward_hacking"):
        curve = _Curve(r0=0.1, plateau=0.45, zeta=1.3, rise_fraction=0.08)
    p_true = curve(t, n_steps)
    if name == "healthy_wandering":
        p_true = p_true + _wander(curve, t, n_steps, rng)
    p_train = p_true
    eval_mean = 0.9 * p_true
    if name.startswith("reward_hacking"):
        t0 = 0.35
        hack = np.clip((x - t0) / (1 - t0), 0, None)
        gain, drop = (
            (0.3, 0.1) if name == "reward_hacking" else (0.12, 0.0)
        )  # mild: train +0.12, eval flat
        p_train = np.clip(p_true + gain * hack, 0, 0.99)
        eval_mean = 0.9 * p_true - drop * hack
    logs = group_logs(p_train, group_size, n_prompts, heterogeneity, rng)
    logs.index = t.astype(int)
    progress = (p_true - curve.r0) / (curve.plateau - curve.r0)

    def noisy(mean: np.ndarray, rel: float) -> np.ndarray:
        return mean * np.exp(rel * rng.standard_normal(mean.size))

    if name == "policy_concentration":
        entropy = 1.2 * (0.08 + 0.92 * np.exp(-x / 0.07))
    elif name == "policy_concentration_mild":
        entropy = 1.2 * (
            0.35 + 0.65 * np.exp(-x / 0.12)
        )  # loses 50% by ~15% of the run, ends at 35%
    else:
        entropy = 1.2 * (1 - 0.35 * np.clip(progress, 0, 1))
    logs["entropy"] = noisy(entropy, 0.04)
    grad = 0.4 * np.exp(-0.5 * x)
    clip = np.full(n_steps, 0.002)
    ratio_max = np.full(n_steps, 1.6)
    if name == "instability_growth":
        ramp = np.clip((x - 0.4) / 0.6, 0, None)
        grad = 0.4 * np.exp(3.0 * ramp)
        clip = 0.002 + 0.25 * ramp**1.5
        ratio_max = 1.6 * np.exp(1.5 * ramp)
    if name == "instability_growth_mild":
        ramp = np.clip((x - 0.5) / 0.5, 0, None)
        grad = 0.4 * np.exp(1.6 * ramp)  # x5 by the end, no clipping
    logs["grad_norm"] = noisy(grad, 0.25)
    logs["clip_ratio"] = np.clip(noisy(clip, 0.3), 0, 1)
    logs["importance_ratio_max"] = noisy(ratio_max, 0.1)
    eval_steps = t[::eval_every].astype(int)
    logs["eval_reward"] = np.nan
    logs.loc[eval_steps, "eval_reward"] = (
        rng.binomial(256, np.clip(eval_mean[eval_steps], 0, 1)) / 256
    )
    if name == "healthy_reward_only":
        logs = logs[["reward"]]
    if name == "advantage_degeneracy_from_std":
        logs = logs.drop(columns=["frac_reward_zero_std"])
    meta = {
        name: {
            "group_size": group_size,
            "seed": seed,
            "source": "synthetic:bayes_grpo.diagnostics.cases",
            "model": "synthetic",
        }
    }
    return make_runset(
        {name: logs},
        meta,
        attrs={
            # keyed by run id, like the simulators' truth: concat_runsets keeps every case's
            "truth": {
                "runs": {
                    name: {
                        "case": name,
                        "modes": sorted(CASES[name]),
                        "zeta": curve.zeta,
                        "plateau": curve.plateau,
                    }
                }
            }
        },
    )


def all_cases(*, seed: int = 0, **kwargs) -> xr.Dataset:
    """Every case of :data:`CASES` in one run set (run ids = case names)."""
    from bayes_grpo.runset.core import concat_runsets

    checked_seed(seed, generator=False)  # offset per case: True was 1, 1.5 gave 1.5, 2.5, ...
    return concat_runsets(
        [simulated_case(name, seed=seed + i, **kwargs) for i, name in enumerate(CASES)]
    )


#: Softmax-bandit cases (``bayes_grpo.bandit.simulate_bandit``, two arms, G = 8, 16 prompts,
#: from p = 0.5 unless said): settings and the modes each must show. With the KL anchor
#: ``beta = 1`` the plateau is p* = 0.854 and the stiffness K = 0.25, so ``a = eta K``.
#: A tiny anchor lets the policy collapse onto the good arm: entropy -> 0 (concentration)
#: and then every group is all-correct (degeneracy), so both are expected there.
BANDIT_CASES: dict[str, tuple[dict, frozenset[str]]] = {
    "bandit_healthy": ({"learning_rate": 0.1, "k_ref": 1, "beta": 1.0}, frozenset()),
    "bandit_healthy_lag": ({"learning_rate": 0.1, "k_ref": 8, "beta": 1.0}, frozenset()),
    "bandit_large_lr": (
        {"learning_rate": 6.0, "k_ref": 1, "beta": 1.0},
        frozenset({"instability"}),
    ),  # a = 1.5 > a* = 1
    "bandit_large_k_ref": (
        {"learning_rate": 1.0, "k_ref": 8, "beta": 1.0},
        frozenset({"instability"}),
    ),  # C_eff = 1 - 0.25 * 8 < 0
    "bandit_tiny_anchor": (
        {"learning_rate": 0.1, "k_ref": 1, "beta": 0.01},
        frozenset({"policy_concentration", "advantage_degeneracy"}),
    ),
    "bandit_easy_task": (
        {"learning_rate": 0.1, "k_ref": 1, "beta": 1.0, "p_ref": 0.9, "p_init": 0.9},
        frozenset({"advantage_degeneracy"}),
    ),
}


def bandit_case(name: str, *, seeds: int = 1, seed: int = 0, steps: int = 300) -> xr.Dataset:
    """Softmax-bandit runs of one :data:`BANDIT_CASES` setting, run ids ``<name>/seed<i>``.

    The bandit's ``expected_reward`` (ground truth, not in real logs) is dropped.
    """
    if name not in BANDIT_CASES:
        raise ValueError(f"unknown bandit case {name!r}; cases: {sorted(BANDIT_CASES)}")
    from bayes_grpo.bandit import simulate_bandit

    settings, _ = BANDIT_CASES[name]
    ds = simulate_bandit(
        seeds=seeds, steps=steps, seed=seed, group_size=8, n_prompts=16, **settings
    )
    ds = ds.drop_vars("expected_reward", errors="ignore")
    return ds.assign_coords(
        run=np.array([f"{name}/seed{i}" for i in range(ds.sizes["run"])], dtype=object)
    )
