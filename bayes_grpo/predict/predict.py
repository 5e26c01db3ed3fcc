"""Predict the trajectory of a run with new hyperparameters from a saved posterior.

The fitted hierarchical model (:class:`bayes_grpo.model.GRPODynamicsModel`) gives, for any
setting ``(learning_rate, momentum + convention, k_ref, group_size)`` and an LLM already
fitted (or a new one through the population level, with ``model_size`` when the curvature
regression is on), posterior draws of ``(a, p*, R0, M_eff, C_eff, K_eff, sigma)``
(``coefficient_draws``). Each draw gives a mean trajectory by one of two laws:

* ``"recursion"``: the exact discrete lagged heavy-ball recursion of DESIGN.md section 1,
  ``e[n+1] - e[n] = mu (e[n] - e[n-1]) - a e[n-L]`` started at rest, with the logged reward
  ``observation_lag`` steps behind the policy (``predict_run``'s default,
  :func:`default_observation_lag`, reads it from the fitted runs: ``K_ref`` for bandit runs,
  whose every step logs the reward of rollouts from the policy ``K_ref`` steps old; 1 for
  training logs, which log at step ``s`` the rollouts of the policy before that step's update;
  0 for SDE simulations). It has the pure delay of
  the gradient that the second-order expansion lacks (at ``K_ref = 6`` the expansion rises
  several steps early);
* ``"continuous"``: DESIGN.md's closed-form second-order expansion (``M_eff, C_eff, K_eff``).

``law="auto"`` (default) takes the recursion whenever it is defined: mechanistic draws
(a gain ``a = eta_eff K``), an integer ``K_ref`` and integer steps; otherwise the
continuous law. Optionally (``discrepancy=True``, the default) a law-discrepancy term
estimated from the fit's own training runs (:mod:`bayes_grpo.predict.discrepancy`) widens
the band of the mean trajectory; adding ``Normal(0, sigma)`` noise on top gives the
posterior predictive of the logged reward. The draws are summarised by
:func:`bayes_grpo.predict.summary.summarise_draws` (bands, time to 90/95/99% of the rise,
regime probabilities, stop step) and the stability of the setting is reported by both
criteria through :func:`bayes_grpo.checks.stability.stability_probabilities`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from bayes_grpo._arguments import checked_seed
from bayes_grpo._io import (
    NETCDF_SUFFIXES,
    check_suffix,
    load_netcdf_dataset,
    read_named_netcdf,
    write_atomic,
)
from bayes_grpo.checks.base import counted, legend_beside, plot_text, share_percent, verdict_percent
from bayes_grpo.constants import HDI_PROB, STEP_DIM
from bayes_grpo.dynamics.schedule import check_multipliers, schedule_clock
from bayes_grpo.dynamics.simulate import continue_recursion, simulate_recursion
from bayes_grpo.dynamics.stability import exact_stable, is_whole
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.dynamics.trust_region import format_clip_range
from bayes_grpo.predict.discrepancy import DiscrepancyProfile, add_discrepancy
from bayes_grpo.predict.summary import (
    DEFAULT_HDI_PROBS,
    LOGGED_REWARD_VAR,
    LOGGED_STEP_DIM,
    SUMMARY_ATTRS,
    SUMMARY_VARS,
    add_warnings,
    attr_warnings,
    band,
    checked_hdi_probs,
    milestones_of,
    summarise_draws,
)
from bayes_grpo.runset.bounds import rewards_outside

#: Trajectory laws of a prediction (module docstring).
LAWS: tuple[str, ...] = ("auto", "recursion", "continuous")


#: Prediction variable holding the schedule predicted on: ``lr[n] / eta`` per step.
LR_MULTIPLIER_VAR: str = "lr_multiplier"


def draws_parameterisation(draws: xr.Dataset) -> str:
    """The parameterisation of the fit that gave ``draws`` (``coefficient_draws``' attribute;
    draws without it are mechanistic)."""
    return str(draws.attrs.get("parameterisation", "mechanistic"))

#: Variables a ``coefficient_draws`` dataset must provide.
REQUIRED_DRAW_VARS: tuple[str, ...] = (
    "a",
    "M_eff",
    "C_eff",
    "K_eff",
    "zeta",
    "plateau",
    "initial_reward",
    "sigma",
)


#: Peak memory of a prediction per (draw, step) cell, bytes (measured: 4000 draws x 10001
#: steps, 2.7 GB).
BYTES_PER_TRAJECTORY_CELL: int = 68
#: Most (draw, step) cells of a prediction's trajectories (near 3.4 GB at the peak). A longer
#: horizon thins the posterior draws evenly (:func:`thin_for_horizon`).
MAX_TRAJECTORY_CELLS: int = 50_000_000
#: Fewest draws a thinned prediction keeps; a horizon that needs fewer is refused.
MIN_PREDICTION_DRAWS: int = 200


def _horizon_too_long(n_steps: int) -> str:
    """Why a horizon of ``n_steps`` grid steps cannot be predicted with
    :data:`MIN_PREDICTION_DRAWS` draws (the memory it would take)."""
    need_gb = MIN_PREDICTION_DRAWS * n_steps * BYTES_PER_TRAJECTORY_CELL / 1e9
    return (
        f"a horizon of {n_steps - 1:g} steps is too long to predict step by step: even "
        f"{MIN_PREDICTION_DRAWS} posterior draws would need about {need_gb:.0f} GB; predict "
        f"at most {MAX_TRAJECTORY_CELLS // MIN_PREDICTION_DRAWS - 1} steps"
    )


def thin_for_horizon(draws: xr.Dataset, n_steps: int) -> tuple[xr.Dataset, str | None]:
    """As many posterior draws as :data:`MAX_TRAJECTORY_CELLS` holds for ``n_steps`` steps, evenly
    spaced in each chain, when all of them would exceed it.

    Returns the (possibly thinned) draws and a note saying how many were kept, or None. A
    horizon long enough to need fewer than :data:`MIN_PREDICTION_DRAWS` draws is a
    ``ValueError`` naming the memory it would take.
    """
    n_total = int(np.prod([draws.sizes[d] for d in ("chain", "draw") if d in draws.sizes]))
    if n_total * n_steps <= MAX_TRAJECTORY_CELLS:
        return draws, None
    keep = MAX_TRAJECTORY_CELLS // n_steps
    n_chains = int(draws.sizes.get("chain", 1))
    per_chain = keep // n_chains
    # as many draws as the budget holds, evenly spaced in each chain (a stride kept as few as
    # 150 of 300 where 200 fitted: "one in 2")
    if per_chain * n_chains < MIN_PREDICTION_DRAWS:
        raise ValueError(_horizon_too_long(n_steps))
    index = np.unique(np.round(np.linspace(0, draws.sizes["draw"] - 1, per_chain)).astype(int))
    thinned = draws.isel(draw=index)
    kept = int(np.prod([thinned.sizes[d] for d in ("chain", "draw") if d in thinned.sizes]))
    return thinned, (
        f"a horizon of {n_steps - 1:g} steps: {kept} of the {n_total} posterior draws, evenly "
        f"spaced, are used, to keep the trajectories near {MAX_TRAJECTORY_CELLS * BYTES_PER_TRAJECTORY_CELL / 1e9:.1f} GB"
    )


def horizon_steps(steps: int | Sequence[float] | np.ndarray) -> np.ndarray:
    """Steps ``0..T`` for an integer horizon ``T``, or the given steps (sorted, >= 0)."""
    if np.ndim(steps) == 0:
        value = float(steps)  # type: ignore[arg-type]
        if not (np.isfinite(value) and value == np.floor(value)):
            # NaN died in "cannot convert float NaN to integer", inf in an OverflowError, and
            # 150.5 was cut to 150 steps unsaid
            raise ValueError(f"steps={steps}: the horizon must be a whole number of steps (at least 1)")
        n = int(value)
        if n < 1:
            raise ValueError(f"steps={steps}: horizon must be at least 1 step")
        if MAX_TRAJECTORY_CELLS // (n + 1) < MIN_PREDICTION_DRAWS:
            # thin_for_horizon's refusal, before the grid is made: `--steps 100000000000`
            # ended in numpy's "Unable to allocate 745. GiB" traceback here
            raise ValueError(_horizon_too_long(n + 1))
        return np.arange(n + 1, dtype=float)
    arr = np.asarray(steps, dtype=float)
    # an infinite last step passed (its difference is inf > 0)
    if arr.size < 2 or not np.all(np.isfinite(arr)) or not np.all(np.diff(arr) > 0) or arr[0] < 0:
        raise ValueError("steps must be at least 2 increasing non-negative (finite) optimizer steps")
    return arr


def choose_law(
    law: str, *, parameterisation: str, k_ref: float, steps: np.ndarray
) -> tuple[str, str]:
    """Resolve ``law`` ("auto", "recursion", "continuous") to the law used and the reason.

    The recursion needs a gain per draw (the mechanistic parameterisation), a whole number
    of lag steps and integer steps; ``"auto"`` takes it whenever these hold.
    """
    if law not in LAWS:
        raise ValueError(f"unknown trajectory law {law!r}; expected one of {LAWS}")
    problems = []
    if parameterisation != "mechanistic":
        problems.append(f"{parameterisation} draws have no gain a = eta K")
    if not is_whole(k_ref) or float(k_ref) < 0:
        problems.append(f"K_ref = {k_ref} is not a whole number of steps")
    if not is_whole(steps):
        problems.append("the steps are not integers")
    if law == "continuous":
        return "continuous", "asked for"
    if not problems:
        return (
            "recursion",
            "exact discrete recursion (defined here)" if law == "auto" else "asked for",
        )
    if law == "recursion":
        raise ValueError("the exact recursion is not defined here: " + "; ".join(problems))
    return "continuous", "recursion not defined: " + "; ".join(problems)


def recursion_trajectories(
    a: np.ndarray,
    momentum: float,
    k_ref: float,
    steps: np.ndarray,
    plateau: np.ndarray,
    initial: np.ndarray,
    *,
    observation_lag: float | None = None,
    lr_multipliers: np.ndarray | None = None,
    clip_range: tuple[float, float] | None = None,
) -> np.ndarray:
    """Mean reward trajectories of the exact lagged heavy-ball recursion, one per draw.

    ``e[n+1] = e[n] + mu (e[n] - e[n-1]) - a e[n-L]``, ``e[m] = R0 - p*`` for ``m <= 0``
    (:func:`bayes_grpo.dynamics.simulate.simulate_recursion`); the logged reward at step
    ``n`` is ``p* + e[n - observation_lag]`` (``e[0]`` before the lag has passed).

    Parameters
    ----------
    a
        ``(n_draws,)`` gains ``eta_eff K`` (for EMA momentum ``eta (1 - b1) K``).
    momentum
        ``mu`` (heavy ball) or Adam's ``b1`` (EMA).
    k_ref
        Integer lag ``L`` of the gradient (optimizer steps).
    steps
        ``(n_steps,)`` integer optimizer steps ``>= 0``.
    plateau, initial
        ``(n_draws,)`` ``p*`` and ``R0`` (reward units).
    observation_lag
        Steps by which the logged reward trails the policy; default ``k_ref``.
    lr_multipliers
        Optional learning-rate schedule, ``lr[n] / eta`` per update (``a`` is the gain at
        ``eta``); None: a constant rate.
    clip_range
        PPO clip range ``(eps_low, eps_high)`` of a success-rate reward
        (:mod:`bayes_grpo.dynamics.trust_region`): the gradient term is scaled by the share
        clipping leaves; None: the linear law.

    Returns
    -------
    numpy.ndarray ``(n_draws, n_steps)`` (reward units; inf/NaN for diverging draws).
    """
    steps = np.asarray(steps, dtype=float)
    if not is_whole(steps) or np.any(steps < 0):
        raise ValueError("the recursion needs integer steps >= 0")
    lag_obs = float(k_ref if observation_lag is None else observation_lag)
    if not is_whole(lag_obs) or lag_obs < 0:
        raise ValueError(f"observation_lag must be a whole number of steps >= 0, got {lag_obs}")
    idx = np.maximum(np.round(steps).astype(np.int64) - int(round(lag_obs)), 0)
    a = np.asarray(a, dtype=float).reshape(-1)
    ps = np.asarray(plateau, dtype=float).reshape(-1)
    r0 = np.asarray(initial, dtype=float).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        err = simulate_recursion(
            a, float(momentum), float(k_ref), int(idx.max()), e0=r0 - ps, lr_multipliers=lr_multipliers,
            clip_range=clip_range, plateau=ps,
        )  # fmt: skip
        return ps[:, None] + err[:, idx]


#: Run sources (the part of ``source`` before ":") whose logged reward trails the policy by
#: ``K_ref`` steps: the softmax-bandit simulator logs, at every step, the reward of the
#: rollouts it samples from the behaviour policy ``K_ref`` steps old.
LAGGED_REWARD_SOURCES: tuple[str, ...] = ("bandit",)
#: Run sources that log the expected reward of the current policy (no lag): the SDE simulator.
CURRENT_REWARD_SOURCES: tuple[str, ...] = ("simulate",)


def observation_lag_of(source: str, k_ref: float) -> float:
    """Steps by which a run's logged reward trails its policy, from where the run came from.

    * the bandit simulator (:data:`LAGGED_REWARD_SOURCES`): ``k_ref``, the age of the
      behaviour policy it samples every step's rollouts from;
    * the SDE simulator (:data:`CURRENT_REWARD_SOURCES`): 0, DESIGN.md's ``p(t)`` itself;
    * a training log (TRL, verl, ... ingested by ``bayes-grpo ingest``): 1. The trainer logs at
      step ``s``, after that step's update, the reward of the rollouts generated before it, by
      the policy after ``s - 1`` updates; with ``num_iterations`` or ``steps_per_generation``
      = ``K_ref``, TRL logs a reward only at the steps that generate (``GRPOTrainer.log``
      clears its metrics at every log), so the reuse adds no lag to what is logged.
    """
    rule = _lag_rule(source)
    return float(k_ref) if rule == "k_ref" else float(rule)


def _lag_rule(source: str) -> str:
    """How a run's source logs its reward (:func:`observation_lag_of`): "k_ref", "0" or "1"."""
    kind = str(source or "").split(":", 1)[0]
    if kind in LAGGED_REWARD_SOURCES:
        return "k_ref"
    return "0" if kind in CURRENT_REWARD_SOURCES else "1"


def default_observation_lag(
    fitted_runs: xr.Dataset | None, *, model: str | None, k_ref: float
) -> tuple[float, str]:
    """``predict``'s observation lag for a new run at ``k_ref`` when none is given, and why.

    The runs the prediction learns from tell how their rewards were logged
    (:func:`observation_lag_of`): those of ``model`` when it is one of the fitted LLMs, else
    all fitted runs. When they disagree the most common rule wins and the reason says so;
    with no run set to read, ``K_ref`` (the bandit's convention) and the reason says that.
    """
    if fitted_runs is None or "source" not in fitted_runs.coords:
        return float(k_ref), "the fitted runs' sources are unknown: K_ref steps, the bandit's convention"
    sources = [str(s) for s in fitted_runs["source"].values]
    if model is not None and "model" in fitted_runs.coords:
        own = [s for s, m in zip(sources, fitted_runs["model"].values) if str(m) == model]
        sources = own or sources
    reasons = {
        "k_ref": "bandit runs: every step logs the reward of rollouts from the policy K_ref steps old",
        "0": "simulated runs log the current policy's expected reward",
        "1": "training logs: step s logs the rollouts of the policy before that step's update (as TRL does)",
    }
    rules = [_lag_rule(s) for s in sources]
    counts = {r: rules.count(r) for r in dict.fromkeys(rules)}
    rule = max(counts, key=counts.get)  # type: ignore[arg-type]
    lag = float(k_ref) if rule == "k_ref" else float(rule)
    reason = reasons[rule]
    if len(counts) > 1:
        reason += f" (the fitted runs mix sources: {counts}; the most common rule is used)"
    return lag, reason


def schedule_time(steps: np.ndarray, lr_multipliers: np.ndarray) -> np.ndarray:
    """The schedule's clock (:func:`bayes_grpo.dynamics.schedule.schedule_clock`) at ``steps``.

    ``steps`` ``(n,)`` in ``[0, len(lr_multipliers)]``, linear between whole steps; out:
    ``(n,)`` clock steps (steps at the nominal rate).
    """
    m = np.asarray(lr_multipliers, dtype=float)
    steps = np.asarray(steps, dtype=float)
    if steps.size and steps.max() > m.size:
        raise ValueError(
            f"the learning-rate schedule covers {m.size} updates, fewer than the {steps.max():g} needed"
        )
    return np.interp(steps, np.arange(m.size + 1, dtype=float), schedule_clock(m))


def normalised_draws(draws: xr.Dataset) -> bool:
    """Whether coefficient draws are a new LLM's, whose reward scale is unknown (every plateau or
    every initial reward NaN): the prediction is then normalised progress ``(R - R0)/(p* - R0)``.
    The one rule of :func:`trajectories_from_draws` (which simulates it) and
    :func:`predict_from_draws` (which says so, and does not clip it); draws lacking either are
    refused by the former, naming what they lack."""
    return any(
        name in draws and not np.isfinite(np.asarray(draws[name].values, dtype=float)).any()
        for name in ("plateau", "initial_reward")
    )


def trajectories_from_draws(
    draws: xr.Dataset,
    steps: np.ndarray,
    *,
    rng: np.random.Generator,
    law: str = "continuous",
    momentum: float | None = None,
    k_ref: float | None = None,
    observation_lag: float | None = None,
    discrepancy: DiscrepancyProfile | None = None,
    lr_multipliers: np.ndarray | None = None,
    clip_range: tuple[float, float] | None = None,
) -> dict[str, np.ndarray]:
    """Mean and observed-reward trajectories ``(n_draws, n_steps)`` from coefficient draws.

    ``law`` is "continuous" or "recursion" (resolved; see :func:`choose_law`), the latter
    with ``momentum`` and ``k_ref``. With a ``discrepancy`` profile, ``band`` holds the mean
    draws plus the law-discrepancy term and ``obs`` adds the noise to those; otherwise
    ``band`` is ``mean``. On a learning-rate schedule (``lr_multipliers``, ``lr[n] / eta``
    per update, the draws' gain at ``eta``) the recursion runs it update by update and the
    continuous law is read on the schedule's clock (:func:`schedule_time`). ``clip_range``: PPO
    clipping under the recursion (:func:`recursion_trajectories`; not for a new LLM's normalised
    progress, which is no success rate: :func:`clip_range_used`).
    """
    missing = [v for v in REQUIRED_DRAW_VARS if v not in draws]
    if missing:
        raise ValueError(f"coefficient draws lack {missing}; have {sorted(draws.data_vars)}")
    flat = {v: np.asarray(draws[v].values, dtype=float).reshape(-1) for v in REQUIRED_DRAW_VARS}
    if normalised_draws(draws):
        # a new LLM: its reward scale is unknown, so predict the normalised progress
        # (R - R0) / (p* - R0), from 0 at the start to 1 at the plateau, without noise
        flat["plateau"] = np.ones_like(flat["a"])
        flat["initial_reward"] = np.zeros_like(flat["a"])
        flat["sigma"] = np.zeros_like(flat["a"])
    if law == "recursion":
        if momentum is None or k_ref is None:
            raise ValueError("the recursion law needs momentum and k_ref")
        mean = recursion_trajectories(
            flat["a"],
            momentum,
            k_ref,
            steps,
            flat["plateau"],
            flat["initial_reward"],
            observation_lag=observation_lag,
            lr_multipliers=lr_multipliers,
            clip_range=clip_range,
        )
    elif law == "continuous":
        clock = steps if lr_multipliers is None else schedule_time(steps, lr_multipliers)
        with np.errstate(over="ignore", invalid="ignore"):
            mean = reward_trajectory(
                clock[None, :],
                flat["M_eff"][:, None],
                flat["C_eff"][:, None],
                flat["K_eff"][:, None],
                flat["plateau"][:, None],
                flat["initial_reward"][:, None],
            )
    else:
        raise ValueError(f"law must be 'recursion' or 'continuous' here, got {law!r}")
    band_draws = mean
    if discrepancy is not None:
        band_draws = add_discrepancy(
            mean, flat["initial_reward"], flat["plateau"], discrepancy, rng
        )
    obs = band_draws + flat["sigma"][:, None] * rng.standard_normal(mean.shape)
    bounds = draws.attrs.get("reward_bounds")
    if bounds is not None and not normalised_draws(draws):
        # draws of a fit with reward bounds (its p* and R0 lie in them): the law-discrepancy term
        # and the noise keep the reward in them too, as a logged success rate is (the forecast's censor)
        from bayes_grpo.predict.forecast import censor

        band_draws, obs = censor(band_draws, bounds), censor(obs, bounds)
    return {"mean": mean, "band": band_draws, "obs": obs, **flat}


def stability_probabilities(a: np.ndarray, momentum: float, k_ref: float) -> dict[str, float]:
    """Posterior probability that the setting is unstable, by both criteria.

    One definition for the toolkit: :func:`bayes_grpo.checks.stability.stability_probabilities`
    (``closed_form``: ``C_eff = (1 - mu) - a L <= 0``; ``exact``: spectral radius of the
    discrete recursion ``>= 1``). The exact criterion needs a whole number of lag steps:
    otherwise ``prob_unstable_exact`` is NaN and the closed form comes from
    :func:`bayes_grpo.dynamics.stability.closed_form_stable`.
    """
    from bayes_grpo.checks.stability import stability_probabilities as _probabilities

    a = np.asarray(a, dtype=float)
    if is_whole(k_ref):
        out = _probabilities(a, momentum=float(momentum), k_ref=float(k_ref))
        return {
            "prob_unstable_closed_form": out["p_unstable_closed_form"],
            "prob_unstable_exact": out["p_unstable_exact"],
        }
    from bayes_grpo.dynamics.stability import closed_form_stable

    finite = a[np.isfinite(a)]
    return {
        "prob_unstable_closed_form": float(
            np.mean(~closed_form_stable(finite, float(momentum), float(k_ref)))
        ),
        "prob_unstable_exact": float("nan"),
    }


def extrapolation_warnings(
    runset: xr.Dataset | None,
    *,
    model: str | None,
    learning_rate: float,
    momentum: float,
    k_ref: float,
    gain_lag: float | None = None,
    train_gain_lag: np.ndarray | None = None,
    model_size: float | None = None,
    group_size: float | None = None,
    momentum_convention: str | None = None,
    discrepancy_note: bool = True,
    gain_lag_interval: tuple[float, float] | None = None,
) -> list[str]:
    """Where a prediction leaves the range of the fitted runs' settings, one line each.

    Compares the setting's ``K_ref``, learning rate and momentum (and, when given, the
    lag-gain product ``a K_ref`` with the training runs' ``train_gain_lag``: outside when
    ``gain_lag`` is, or, given ``gain_lag_interval`` (the central half of its draws), when the
    whole interval is) with the range
    of the runs of ``model`` in ``runset`` (all runs when ``model`` is not among them), and
    ``model_size`` (parameters of a new LLM whose curvature the regression on
    ``log model_size`` gives; None when no size is used) with the sizes of the fitted LLMs. The
    law-discrepancy term measures the law's misfit on the training settings only; beyond
    their range effects the training runs do not show (on the bandit: PPO clipping that
    becomes active at larger lags, the softmax's state-dependent stiffness) are not in the
    band (benchmarks/results/PREDICTION_NOTES.md). ``group_size`` (when given) outside the
    range of the runs' known G gets its own line: the mean trajectory does not depend on G,
    the noise of the logged reward does, through the fitted exponent ``alpha``. So does a
    ``momentum_convention`` (when given, with a momentum above 0) that none of the runs
    with momentum uses: another optimizer, whose step the fit never saw.
    ``discrepancy_note``: after a line of the settings, one saying that the band's
    law-discrepancy term does not reach beyond them (False for a caller whose band has no
    such term: a forecast's prior from the fit).
    """
    if runset is None or "run" not in runset.dims:
        return []
    runs = _model_runs(runset, model)
    out = []
    checks = [
        ("K_ref", "k_ref", k_ref),
        ("learning rate", "learning_rate", learning_rate),
        ("momentum", "momentum", momentum),
    ]
    for label, coord, value in checks:
        if coord not in runset.coords:
            continue
        vals = np.asarray(runset[coord].sel(run=runs).values, dtype=float)
        vals = vals[np.isfinite(vals)]
        if vals.size and np.isfinite(value) and not _inside(value, vals):
            out.append(
                f"extrapolation: {label} = {value:g} is outside the fitted runs' range [{vals.min():g}, {vals.max():g}]"
            )
    if model_size is not None and "model_size" in runset.coords:
        sizes = np.asarray(runset["model_size"].values, dtype=float)
        sizes = sizes[np.isfinite(sizes) & (sizes > 0)]
        if sizes.size and not _inside(float(model_size), sizes):
            out.append(
                f"extrapolation: model_size = {float(model_size):.3g} is outside the fitted LLMs' sizes "
                f"[{sizes.min():.3g}, {sizes.max():.3g}]: its curvature extrapolates the regression on "
                "log model_size"
            )
    if gain_lag is not None and train_gain_lag is not None:
        vals = np.asarray(train_gain_lag, dtype=float)
        vals = vals[np.isfinite(vals)]
        # a new LLM at its fitted LLMs' very settings: the population's median gain K_ref 0.00267
        # against their runs' [0.00268, 0.00272] was "outside", its draws spread well across it
        lo, hi = gain_lag_interval if gain_lag_interval is not None else (gain_lag, gain_lag)
        if vals.size and np.isfinite(gain_lag) and not (_inside(lo, vals) or _inside(hi, vals) or lo <= vals.min() <= hi):
            out.append(
                f"extrapolation: lag-gain product a K_ref = {gain_lag:.3g} is outside the fitted runs' range "
                f"[{vals.min():.3g}, {vals.max():.3g}]"
            )
    if out and discrepancy_note:
        out.append(
            "the band's law-discrepancy term was measured within the fitted settings only; "
            "beyond them the law's misfit can be larger than the band says"
        )
    if momentum_convention and momentum and "momentum_convention" in runset.coords:
        # `predict fit.nc --momentum 0.9` of a fit of Adam runs (ema) took the default heavy
        # ball without a word: an effective step 1 / (1 - mu) = 10 times the fitted runs'
        mu = np.asarray(runset["momentum"].sel(run=runs).values, dtype=float)
        conv = np.asarray(runset["momentum_convention"].sel(run=runs).values, dtype=str)
        used = sorted({c for c, m in zip(conv, mu) if c and np.isfinite(m) and m > 0})
        if used and momentum_convention not in used:
            out.append(
                f"momentum convention {momentum_convention} is not that of the fitted runs with "
                f"momentum ({', '.join(used)}): another optimizer (Adam's beta1 is ema, SGD's momentum "
                "heavy_ball), whose effective step differs by 1 / (1 - momentum); give "
                "--momentum-convention as the runs had it"
            )
    if group_size is not None and "group_size" in runset.coords:
        # `predict ... --group-size 1000` of an LLM fitted at G = 8 said nothing, while its band
        # of the logged reward was a third as wide as at G = 8 (1 / 1000^alpha of the noise)
        vals = np.asarray(runset["group_size"].sel(run=runs).values, dtype=float)
        vals = vals[np.isfinite(vals)]
        if vals.size and np.isfinite(group_size) and not _inside(float(group_size), vals):
            out.append(
                f"extrapolation: group size G = {float(group_size):g} is outside the fitted runs' range "
                f"[{vals.min():g}, {vals.max():g}]: the band of the logged reward carries their noise "
                "there by the fitted exponent alpha (sigma^2 = D / G^alpha)"
            )
    return out


#: Share of the logged reward range by which a predicted mean may pass it before
#: :func:`beyond_logged_rewards_warning` speaks (the noise of a run's last steps is about that).
BEYOND_LOGGED_SHARE = 0.1


def beyond_logged_rewards_warning(
    runset: xr.Dataset | None,
    *,
    model: str | None,
    mean_trajectory: np.ndarray,
    plateau: np.ndarray,
) -> str | None:
    """A line when a prediction's posterior-mean trajectory leaves the range of the rewards
    the fitted runs logged (those of ``model``; all runs when it is not among them) by more
    than :data:`BEYOND_LOGGED_SHARE` of that range, else None.

    The law's plateau ``p*`` is pinned only by runs that approach it; runs that end mid-rise
    (for the law) leave it free, and a prediction past their last reward then follows the
    law's rise into values no run showed, such as a success rate above 1. ``plateau``: the
    draws of ``p*`` (reward units; NaN for a new LLM, when nothing is said).
    """
    if runset is None or "run" not in runset.dims or "reward" not in runset:
        return None
    mean = np.asarray(mean_trajectory, dtype=float)
    p_star = np.asarray(plateau, dtype=float).ravel()
    if not np.isfinite(mean).any() or not np.isfinite(p_star).any():
        return None
    logged = np.asarray(runset["reward"].sel(run=_model_runs(runset, model)).values, dtype=float)
    logged = logged[np.isfinite(logged)]
    if logged.size < 2 or not np.ptp(logged) > 0:
        return None
    lo, hi = float(logged.min()), float(logged.max())
    margin = BEYOND_LOGGED_SHARE * (hi - lo)
    top, bottom = float(np.nanmax(mean)), float(np.nanmin(mean))
    if bottom >= lo - margin and top <= hi + margin:
        return None
    reach = top if top > hi + margin else bottom
    q = np.nanquantile(p_star, [0.05, 0.5, 0.95])
    head = (
        f"the predicted mean reward reaches {reach:.3g}, beyond every reward the fitted runs "
        f"logged ([{lo:.3g}, {hi:.3g}]): the law's plateau p* = {q[1]:.3g} [{q[0]:.3g}, {q[2]:.3g}] "
    )
    tail = (
        ", so past their rewards the trajectory is the law's extrapolation (a bounded reward, "
        "such as a success rate, cannot follow it)"
    )
    if lo - margin <= q[0] and q[2] <= hi + margin:
        # the plateau is among the logged rewards: the excursion is the trajectory's swing about
        # it (an underdamped setting's overshoot), not a plateau left free by the runs
        return (
            head + "lies among them, and the mean swings past it at this setting (an overshoot "
            "larger than any fitted run showed)" + tail
        )
    return head + "is not pinned by runs that end before approaching it" + tail


#: A fitted LLM's runs count as unsettled when they still moved toward their plateau by more than
#: this share of the rise ``p* - R0`` over the last quarter of their logs, on average
#: (:func:`~bayes_grpo.metrics.late_change`) ...
UNSETTLED_SHARE = 0.02
#: ... and significantly: one-sided p-value below this (see :func:`unsettled_runs_note`).
UNSETTLED_ALPHA = 0.01


def late_change_test(changes: np.ndarray, errors: np.ndarray) -> tuple[float, float]:
    """Mean of runs' late changes (:func:`~bayes_grpo.metrics.late_change`) and the one-sided
    p-value that it is above 0, ``(mean, p)``.

    With 3 or more runs, a one-sample t-test across the runs: each run's change is one number,
    so slow autocorrelated wander within a run (which a short window's lag-1 autocorrelation
    underestimates: the corrected z of a flat AR(1) run with phi 0.9, 38-point window, still
    passed 3 in 14% of runs of 150 steps) enters only through the runs' spread. With fewer runs, the
    inverse-variance pooled change against its standard error (normal). ``(nan, nan)`` without
    a finite change.
    """
    from scipy import stats

    c = np.asarray(changes, dtype=float).ravel()
    e = np.asarray(errors, dtype=float).ravel()
    ok = np.isfinite(c) & np.isfinite(e)
    c, e = c[ok], e[ok]
    if c.size >= 3:
        mean = float(np.mean(c))
        spread = float(np.std(c, ddof=1))
        if spread == 0:
            return mean, 0.0 if mean > 0 else 1.0
        return mean, float(stats.t.sf(mean / (spread / np.sqrt(c.size)), df=c.size - 1))
    c, e = c[e > 0], e[e > 0]
    if not c.size:
        return float("nan"), float("nan")
    weight = 1.0 / e**2
    mean = float(np.sum(weight * c) / np.sum(weight))
    return mean, float(stats.norm.sf(mean * np.sqrt(np.sum(weight))))


def unsettled_runs_note(
    runset: xr.Dataset | None,
    *,
    model: str | None,
    plateau: np.ndarray,
    initial_reward: np.ndarray,
) -> str | None:
    """A warning when the fitted runs of ``model`` (all runs when it is not among them) were still
    moving toward their plateau at the end of their logs, else None.

    Each run's change over the last quarter of its finite rewards
    (:func:`~bayes_grpo.metrics.late_change`), signed toward ``p*``, is tested across the runs
    (:func:`late_change_test`); the note speaks when the mean change is more than
    :data:`UNSETTLED_SHARE` of the rise ``p* - R0`` and its one-sided p-value below
    :data:`UNSETTLED_ALPHA`. The law's approach to ``p*`` is exponential; a run with a slower
    tail (the softmax bandit without momentum: mean reward 0.810 / 0.846 / 0.853 over steps
    100-150 at learning rates 0.05 / 0.1 / 0.2, 0.854 for all three by step 300) is fitted with
    a plateau that is a compromise of where its runs were heading (runs at 0.05 and 0.1 for 150
    steps: 0.846 [0.843, 0.849]), and a run that gets further than they did settles away from
    it by more than the band says (the band's law-discrepancy term sees no misfit on runs whose
    own ends the law fits). ``plateau``, ``initial_reward``: draws of ``p*`` and ``R0`` (reward
    units; NaN for a new LLM, when nothing is said).
    """
    from bayes_grpo.metrics import LATE_FRACTION, late_change

    if runset is None or "run" not in runset.dims or "reward" not in runset:
        return None
    p_draws = np.asarray(plateau, dtype=float).ravel()
    r_draws = np.asarray(initial_reward, dtype=float).ravel()
    if not (np.isfinite(p_draws).any() and np.isfinite(r_draws).any()):
        return None
    p_star, r0 = float(np.nanmedian(p_draws)), float(np.nanmedian(r_draws))
    rise = p_star - r0
    if not rise != 0:
        return None
    steps = np.asarray(runset[STEP_DIM].values, dtype=float)
    reward = runset["reward"].sel(run=_model_runs(runset, model)).transpose("run", STEP_DIM)
    changes = np.array([late_change(steps, row) for row in np.asarray(reward.values, dtype=float)])
    toward, p_value = late_change_test(changes[:, 0] * np.sign(rise), changes[:, 1])
    if not (toward > UNSETTLED_SHARE * abs(rise) and p_value < UNSETTLED_ALPHA):
        return None
    n_runs = int(np.isfinite(changes).all(axis=1).sum())
    q = np.nanquantile(p_draws, [0.05, 0.95])
    who = f"runs of {model!r}" if model is not None and reward.sizes["run"] < runset.sizes["run"] else "runs"
    return (
        f"the fitted {who} were still {'rising' if rise > 0 else 'falling'} toward their plateau over "
        f"the last {LATE_FRACTION:.0%} of their logs (by {toward:.3g} in reward on average over "
        f"{counted(n_runs, 'run')}, {toward / abs(rise):.1%} of the rise p* - R0; one-sided p = {p_value:.2g}): the "
        f"plateau p* = {p_star:.3g} [{q[0]:.3g}, {q[1]:.3g}] extrapolates runs that had not settled, "
        "and a run that gets further than they did (faster, or longer) can settle away from it by "
        "more than the band says"
    )


def unclipped_move_note(
    runset: xr.Dataset | None, *, model: str | None, prediction: xr.Dataset, k_ref: float
) -> str | None:
    """A warning when a prediction without a clip range moves its success rate by more than TRL's
    default clip range (:data:`~bayes_grpo.dynamics.trust_region.TRL_DEFAULT_CLIP_EPSILON`)
    within ``K_ref`` steps (:func:`~bayes_grpo.dynamics.trust_region.largest_move` of the
    posterior-mean trajectory): a run with PPO clipping is then slowed where the linear law is
    not (the bandit at ``K_ref`` 6: the linear law reached the plateau about 15 steps early).
    None when the fitted runs' rewards are no success rates (outside ``[0, 1]``), the mean leaves
    ``[0, 1]``, the steps are not consecutive whole steps, or ``K_ref`` is not a whole number.
    """
    from bayes_grpo.dynamics.trust_region import TRL_DEFAULT_CLIP_EPSILON, largest_move

    steps = np.asarray(prediction[STEP_DIM].values, dtype=float)
    mean = np.asarray(prediction["mean_mean"].values, dtype=float)
    if (
        not is_whole(k_ref)
        or steps.size < 2
        or not np.all(np.diff(steps) == 1)
        or not np.all(np.isfinite(mean))
        or mean.min() < 0
        or mean.max() > 1
    ):
        return None
    if runs_outside_unit_interval(runset, model=model):
        return None
    move, at = largest_move(mean, int(round(float(k_ref))))
    eps = TRL_DEFAULT_CLIP_EPSILON
    if move <= eps:
        return None
    # as many decimals as keep the move above the range (verdict_percent: a value >= the next float
    # past eps is one > eps): a move of 0.2026 read "moves by 20% ..., more than ... 0.2"
    moved = verdict_percent(move, float(np.nextafter(eps, np.inf)))
    return (
        f"the predicted success rate moves by {moved} within K_ref = {float(k_ref):g} steps (steps "
        f"{steps[at] - float(k_ref):g}-{steps[at]:g}), more than a PPO clip range of {eps:g} (TRL's default) allows: a run with "
        "such clipping is slowed there, which this linear law does not draw; give the run's clip "
        + (
            "range (--clip-epsilon, predict_run(clip_epsilon=...)) to include it"
            if prediction.attrs.get("law", "recursion") == "recursion"
            # `--law continuous`: its --clip-epsilon is not used (clip_range_used), so the advice
            # alone led to a warning that the clip cannot enter this law
            else "range with the recursion law, the only one that can clip (--law recursion "
            "--clip-epsilon, predict_run(law='recursion', clip_epsilon=...)), to include it"
        )
    )


def runs_outside_unit_interval(runset: xr.Dataset | None, *, model: str | None) -> list[str]:
    """The fitted runs of ``model`` (all runs when it is not among them) that logged a reward
    outside ``[0, 1]``, i.e. no success rate (beyond the reward bounds' rounding tolerance,
    :func:`bayes_grpo.runset.bounds.rewards_outside`); none without a run set."""
    if runset is None or "reward" not in runset or "run" not in runset.dims:
        return []
    reward = runset["reward"].sel(run=_model_runs(runset, model)).transpose("run", STEP_DIM)
    outside = rewards_outside(reward.values, (0.0, 1.0)).any(axis=1)
    return [str(r) for r in reward["run"].values[outside]]


def check_success_rate_runs(runset: xr.Dataset | None, *, model: str | None) -> None:
    """``ValueError`` when the fitted runs of ``model`` (all runs when it is not among them) logged
    a reward outside ``[0, 1]`` (:func:`runs_outside_unit_interval`): the PPO clip law reads the
    reward as a success probability (:mod:`bayes_grpo.dynamics.trust_region`), which such a
    reward is not."""
    bad = runs_outside_unit_interval(runset, model=model)
    if bad:
        reward = runset["reward"].sel(run=_model_runs(runset, model))
        lo, hi = float(reward.min()), float(reward.max())
        raise ValueError(
            f"a PPO clip range (--clip-epsilon, clip_epsilon=) reads the reward as a success rate in [0, 1], but the "
            f"fitted runs logged rewards in [{lo:.4g}, {hi:.4g}] ({counted(len(bad), 'run')} outside [0, 1], e.g. "
            f"{bad[0]!r}): leave the clip range out (the linear law) for such a reward"
        )


def _model_runs(runset: xr.Dataset, model: str | None) -> np.ndarray:
    """The fitted runs a prediction for ``model`` is compared with: those of that LLM, or all
    runs when ``model`` is None or not among them."""
    runs = np.asarray(runset["run"].values)
    if model is not None and "model" in runset.coords:
        same = np.asarray(runset["model"].values, dtype=str) == str(model)
        if same.any():
            runs = runs[same]
    return runs


def _inside(value: float, vals: np.ndarray, rel: float = 1e-9) -> bool:
    lo, hi = float(vals.min()), float(vals.max())
    tol = rel * max(abs(lo), abs(hi), 1e-300)
    return lo - tol <= float(value) <= hi + tol


def fitted_range_warnings(
    fitted: Any,
    *,
    model: str | None,
    learning_rate: float,
    momentum: float,
    k_ref: float,
    gain: np.ndarray | None = None,
    momentum_convention: str | None = None,
    model_size: float | None = None,
    group_size: float | None = None,
    discrepancy_note: bool = True,
) -> list[str]:
    """:func:`extrapolation_warnings` of a setting asked of a fitted model: against its runs as it
    fitted them (:func:`bayes_grpo.checks.stability.runset_as_fitted`: a setting taken from a
    ``fit --default`` counts), and, given the setting's draws of the gain ``gain`` (``a = eta_eff
    K``, a mechanistic fit's), the lag-gain product ``a K_ref`` (their median, named; outside
    when the central half of the draws is) against the fitted runs' (:func:`_train_gain_lag`). The one check of ``predict`` and ``stability --posterior``:
    `stability --posterior tiny.nc --k-ref 8` (fitted K_ref 1-2) said nothing where `predict`
    warned ``extrapolation: K_ref = 8 is outside the fitted runs' range [1, 2]``."""
    from bayes_grpo.checks.stability import runset_as_fitted

    gain_lag = train_gain_lag = interval = None
    if gain is not None:
        gain = np.asarray(gain, dtype=float)
        gain_lag = float(np.nanmedian(gain)) * float(k_ref)
        q25, q75 = np.nanquantile(gain, [0.25, 0.75]) * float(k_ref)
        interval = (float(q25), float(q75))
        train_gain_lag = _train_gain_lag(fitted, model)
    return extrapolation_warnings(
        runset_as_fitted(fitted),
        model=model,
        learning_rate=learning_rate,
        momentum=momentum,
        k_ref=k_ref,
        gain_lag=gain_lag,
        train_gain_lag=train_gain_lag,
        model_size=model_size,
        group_size=group_size,
        momentum_convention=momentum_convention,
        discrepancy_note=discrepancy_note,
        gain_lag_interval=interval,
    )


def _train_gain_lag(fitted: Any, model: str | None = None) -> np.ndarray | None:
    """Posterior-median ``a K_ref`` of each fitted run of ``model`` (all runs when ``model`` is
    None or not among them, as :func:`extrapolation_warnings` compares the settings), with the
    ``K_ref`` the fit used (:func:`bayes_grpo.checks.stability.runset_as_fitted`); None for a
    phenomenological fit."""
    from bayes_grpo.checks.stability import runset_as_fitted

    idata = getattr(fitted, "idata", None)
    runset = runset_as_fitted(fitted)
    if idata is None or runset is None or getattr(fitted, "parameterisation", "") != "mechanistic":
        return None
    post = idata.posterior
    if "a" not in post or "k_ref" not in runset.coords:
        return None
    runs = [r for r in _model_runs(runset, model) if r in set(post["a"]["run"].values)]
    a = post["a"].sel(run=runs).median(("chain", "draw"))
    return np.asarray(a.values, dtype=float) * np.asarray(runset["k_ref"].sel(run=runs).values, dtype=float)


def diverging_draws(gain, damping, *, law: str, momentum: float, k_ref: float) -> np.ndarray:
    """Mask of the posterior draws whose trajectory under ``law`` grows without bound.

    ``"recursion"``: the exact discrete criterion (spectral radius of the lagged heavy-ball
    recursion above 1, :func:`bayes_grpo.dynamics.stability.exact_stable`; a gain of 0 does
    not move and does not diverge); ``"continuous"``: ``C_eff <= 0``. ``gain`` and
    ``damping``: ``(n_draws,)`` draws of ``a = eta_eff K`` and ``C_eff``.
    """
    gain = np.asarray(gain, dtype=float)
    if law == "recursion":
        return (gain > 0.0) & ~exact_stable(gain, momentum, k_ref)
    return np.asarray(damping, dtype=float) <= 0.0


def continued_trajectories(
    traj: Mapping[str, np.ndarray],
    *,
    law: str,
    momentum: float | None = None,
    k_ref: float | None = None,
    observation_lag: float | None = None,
    lr_multipliers: np.ndarray | None = None,
    skip: np.ndarray | None = None,
    shared: dict[str, Any] | None = None,
    clip_range: tuple[float, float] | None = None,
) -> Callable[[np.ndarray], np.ndarray]:
    """The mean trajectories of :func:`trajectories_from_draws`' draws ``traj`` at any steps, by
    the same ``law``: ``summarise_draws``' ``continuation``, which follows them past the horizon
    for the expected remaining gain. On a learning-rate schedule the rate stays, past the
    schedule's last update, at that update's (a run continued as it ends).

    ``skip``: ``(n_draws,)`` mask of draws not needed (the diverging ones, which the stop step
    leaves out): their rows are NaN, not simulated. Under the recursion the errors simulated so far
    are kept (in ``shared``, a dict the continuations of the logged reward and of the policy may
    share) and each later look resumes from them (:func:`~bayes_grpo.dynamics.simulate.continue_recursion`),
    with the same numbers as simulating from step 0: the README's `predict models/tiny.nc --lr
    0.002 --momentum 0.9 --momentum-convention ema --k-ref 2 --group-size 16 --steps 300`
    re-simulated every look from step 0, for the mean and the policy apart, diverging draws
    included (benchmarks/bench_predict_stop_step.py). ``clip_range``: as the draws were simulated."""
    n_draws = np.asarray(traj["plateau"]).size
    rows = np.ones(n_draws, dtype=bool) if skip is None else ~np.asarray(skip, dtype=bool).reshape(-1)
    state = {} if shared is None else shared
    if law == "recursion":
        lag_obs = float(k_ref if observation_lag is None else observation_lag)
        if not is_whole(lag_obs) or lag_obs < 0:
            raise ValueError(f"observation_lag must be a whole number of steps >= 0, got {lag_obs}")

    def rates(n: int) -> np.ndarray | None:
        # the schedule for n updates, continued at its last rate
        if lr_multipliers is None:
            return None
        m = np.asarray(lr_multipliers, dtype=float)
        return np.concatenate([m, np.full(max(n - m.size, 0), m[-1] if m.size else 1.0)])

    def at(steps: np.ndarray) -> np.ndarray:
        steps = np.asarray(steps, dtype=float)
        out = np.full((n_draws, steps.size), np.nan)
        ps = np.asarray(traj["plateau"], dtype=float).reshape(-1)[rows]
        r0 = np.asarray(traj["initial_reward"], dtype=float).reshape(-1)[rows]
        if law == "recursion":
            if not is_whole(steps) or np.any(steps < 0):
                raise ValueError("the recursion needs integer steps >= 0")
            idx = np.maximum(np.round(steps).astype(np.int64) - int(round(lag_obs)), 0)
            need = int(idx.max())
            err = state.get("err")
            with np.errstate(over="ignore", invalid="ignore"):
                if err is None or err.shape[1] <= need:
                    start = (r0 - ps)[:, None] if err is None else err
                    err, velocity = continue_recursion(
                        start, np.asarray(traj["a"], dtype=float).reshape(-1)[rows], float(momentum),
                        float(k_ref), need, velocity=state.get("velocity"), lr_multipliers=rates(need),
                        clip_range=clip_range, plateau=ps,
                    )  # fmt: skip
                    state.update(err=err, velocity=velocity)
                out[rows] = ps[:, None] + err[:, idx]
            return out
        m = rates(int(np.ceil(steps.max())))
        clock = steps if m is None else schedule_time(steps, m)
        with np.errstate(over="ignore", invalid="ignore"):
            out[rows] = np.asarray(reward_trajectory(
                clock[None, :], traj["M_eff"][rows, None], traj["C_eff"][rows, None], traj["K_eff"][rows, None],
                ps[:, None], r0[:, None],
            ), dtype=float)  # fmt: skip
        return out

    return at


def schedule_beyond_note(lr_multipliers: np.ndarray | None, grid: np.ndarray, ds: xr.Dataset) -> str | None:
    """What the stop step rests on past the horizon on a learning-rate schedule: the rate stays
    at the horizon's last update's (:func:`continued_trajectories`), which a schedule decaying to 0
    freezes the run at. None without a schedule, where the draws were not followed past the
    horizon, or where the last rate is the peak (a constant rate continued as it is)."""
    if lr_multipliers is None or "expected_remaining_gain_after" not in ds.attrs:
        return None
    rates = np.asarray(lr_multipliers, dtype=float)[: max(int(np.ceil(grid[-1])), 1)]
    last, peak = float(rates[-1]), float(rates.max())
    if np.isclose(last, peak, rtol=1e-6, atol=0.0):
        return None
    return (
        f"past the horizon (step {grid[-1]:g}) the expected remaining gain and the stop step take the "
        f"schedule's last rate, {last / peak:.3g} of its peak, as the rate of every later update"
        + (" (the run frozen where it is)" if last == 0.0 else "")
        + ": a run that goes on with another rate (a longer schedule, a restart) has another stop step"
    )


def clip_range_used(
    clip_range: tuple[float, float] | None,
    *,
    law: str,
    normalised: bool,
    plateau: np.ndarray | None = None,
    initial_reward: np.ndarray | None = None,
) -> tuple[tuple[float, float] | None, str | None]:
    """The PPO clip range a prediction can simulate with, and a warning when it cannot.

    Clipping enters the recursion only (``law`` resolved, :func:`choose_law`): the continuous
    law has no lagged behaviour policy whose ratios could leave the range. A new LLM's prediction
    is normalised progress, not a success rate, so the ratios of success probabilities are
    unknown. Draws whose plateau ``p*`` or initial reward ``R0`` lie outside ``[0, 1]`` are no
    success rates there: the clip is used, and the warning says how many such draws there are
    (their ratios are taken at probabilities held at the edges of ``[0, 1]``,
    :func:`~bayes_grpo.dynamics.trust_region.unclipped_share`, which slows them where the law
    crosses 0 or 1, not where the policy moves). Returns ``(clip_range or None, note or None)``.
    """
    if clip_range is None:
        return None, None
    text = f"the PPO clip range {format_clip_range(clip_range)} is not used: "
    if law != "recursion":
        return None, text + (
            f"the {law} law has no lagged behaviour policy for the clip's ratios (only the recursion "
            "has); the trajectory is the linear law's, which a clipped run follows only while its "
            "policy moves less than the range within K_ref steps"
        )
    if normalised:
        return None, text + (
            "a new LLM's prediction is normalised progress, not a success rate, so the success "
            "probabilities whose ratios the clip bounds are unknown"
        )
    outside = []
    for name, values in (("plateau p*", plateau), ("initial reward R0", initial_reward)):
        values = np.asarray([] if values is None else values, dtype=float).reshape(-1)
        values = values[np.isfinite(values)]
        off = (values < 0) | (values > 1)
        if off.any():
            outside.append(
                f"the {name} of {int(off.sum())} of {values.size} draws ({share_percent(int(off.sum()), values.size)}; median "
                f"{float(np.median(values)):.3g})"
            )
    if outside:
        return clip_range, (
            f"the PPO clip range {format_clip_range(clip_range)} reads the reward p* + e as a success "
            f"probability, but {' and '.join(outside)} {'lie' if len(outside) > 1 else 'lies'} outside [0, 1]: where p* + e leaves [0, 1] "
            "the clip's ratios are taken at probabilities held at its edges, which slows such draws "
            "where the law crosses 0 or 1, not where the policy moves more than the range"
        )
    return clip_range, None


def predict_from_draws(
    draws: xr.Dataset,
    *,
    steps: int | Sequence[float] | np.ndarray,
    momentum: float,
    k_ref: float,
    law: str = "auto",
    observation_lag: float | None = None,
    discrepancy: DiscrepancyProfile | None = None,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    seed: int = 0,
    attrs: dict[str, Any] | None = None,
    lr_multipliers: np.ndarray | None = None,
    clip_range: tuple[float, float] | None = None,
) -> xr.Dataset:
    """Prediction dataset from ``coefficient_draws`` (see the module docstring).

    Parameters
    ----------
    draws
        ``coefficient_draws`` of the setting (dims chain, draw).
    steps
        Horizon ``T`` (steps ``0..T``) or explicit steps.
    momentum, k_ref
        ``mu`` (Adam's ``b1`` for EMA) and the lag ``K_ref`` of the setting.
    law
        "auto", "recursion" or "continuous" (:func:`choose_law`).
    observation_lag
        Steps by which the logged reward trails the policy under the recursion (default
        ``k_ref``).
    discrepancy
        Law-discrepancy profile added to the band of the mean trajectory (None: parameter
        uncertainty only).
    hdi_probs, stop_threshold, seed, attrs
        Band probabilities, stop threshold (reward units; default 1% of the rise), seed of
        the noise / discrepancy draws, extra attributes.
    lr_multipliers
        Optional learning-rate schedule: ``lr[n] / eta`` for updates ``0 .. T - 1`` (at
        least), ``eta`` the rate of the draws, which the regime and P(unstable) describe.
    clip_range
        PPO clip range ``(eps_low, eps_high)`` of the setting
        (:func:`bayes_grpo.dynamics.trust_region.check_clip_range`): under the recursion the
        gradient is scaled by the share clipping leaves (:mod:`bayes_grpo.dynamics.trust_region`),
        the reward read as a success rate; where it cannot be used (:func:`clip_range_used`) a
        warning says why. None: the linear law.
    """
    rng = np.random.default_rng(checked_seed(seed))
    grid = horizon_steps(steps)
    if lr_multipliers is not None:
        lr_multipliers = check_multipliers(lr_multipliers, int(np.ceil(grid[-1])))
    draws, thin_note = thin_for_horizon(draws, grid.size)
    parameterisation = draws_parameterisation(draws)
    used, reason = choose_law(
        law,
        parameterisation=parameterisation,
        k_ref=k_ref,
        steps=grid,
    )
    normalised = normalised_draws(draws)
    clip_range, clip_note = clip_range_used(
        clip_range,
        law=used,
        normalised=normalised,
        plateau=None if normalised else draws.get("plateau"),
        initial_reward=None if normalised else draws.get("initial_reward"),
    )
    traj = trajectories_from_draws(
        draws,
        grid,
        rng=rng,
        law=used,
        momentum=momentum,
        k_ref=k_ref,
        observation_lag=observation_lag,
        discrepancy=discrepancy,
        lr_multipliers=lr_multipliers,
        clip_range=clip_range,
    )
    if parameterisation == "mechanistic":
        stab = stability_probabilities(traj["a"], momentum, k_ref)
    else:  # its K_eff = w0^2 is the LLM's fitted curve, not eta K: the setting is not in it
        stab = {"prob_unstable_closed_form": float("nan"), "prob_unstable_exact": float("nan")}
    params = {k: traj[k] for k in REQUIRED_DRAW_VARS}
    units = (
        "normalised progress (R - R0)/(p* - R0): a new LLM's reward scale is unknown"
        if normalised
        else "reward"
    )
    law_attrs: dict[str, Any] = {
        "law": used,
        "law_reason": reason,
        # the clip range the trajectories were simulated with ("off": the linear law)
        "clip_range": "off" if clip_range is None else json.dumps(list(clip_range)),
    }
    policy = None
    if used == "recursion":
        lag = float(k_ref if observation_lag is None else observation_lag)
        law_attrs["observation_lag"] = lag
        if lag > 0:
            # the logged reward trails the policy by the lag; a run stopped at a step keeps that
            # step's policy (bandit.nc at K_ref 6: stop step 34 and 90% at 25 on the logged
            # reward, 28 and 19 on the policy)
            policy = recursion_trajectories(
                traj["a"], momentum, k_ref, grid, traj["plateau"], traj["initial_reward"],
                observation_lag=0, lr_multipliers=lr_multipliers, clip_range=clip_range,
            )  # fmt: skip
    law_attrs["milestones_of"] = milestones_of(float(law_attrs["observation_lag"]) if policy is not None else 0.0)
    if lr_multipliers is not None and used == "continuous":
        law_attrs["law_reason"] = (
            f"{reason}; on the learning-rate schedule it is read on the schedule's clock "
            "(exact without momentum and lag, approximate with them)"
        )
    if discrepancy is None:
        law_attrs["discrepancy"] = "off"
    else:
        law_attrs["discrepancy"] = json.dumps(discrepancy.to_dict())
        law_attrs["discrepancy_sd_max"] = float(np.max(discrepancy.sd))
    all_attrs: dict[str, Any] = {**stab, "units": units, **law_attrs, **(attrs or {})}
    if thin_note is not None:
        all_attrs["warnings"] = json.dumps([*attr_warnings(xr.Dataset(attrs=all_attrs)), thin_note])
    diverging = diverging_draws(traj["a"], traj["C_eff"], law=used, momentum=momentum, k_ref=k_ref)
    _refuse_overflowing_draws(traj, diverging, grid)
    swinging = None
    if clip_range is not None and diverging.any():
        # the clip caps the unstable mode of mildly unstable draws in a limit cycle (README, Limits;
        # the shipped bandit at lr 0.5, K_ref 6: every draw unstable, the clipped law's swing 0.07
        # peak to peak, the bandit's 0.08): within a success rate's range of p*, they do not diverge
        with np.errstate(invalid="ignore"):
            off = np.abs(traj["mean"] - traj["plateau"][:, None])
        swinging = diverging & np.all(np.isfinite(off) & (off <= 1.0), axis=1)
    continued: dict[str, Any] = {}
    ds = summarise_draws(
        grid,
        traj["mean"],
        traj["obs"],
        plateau=traj["plateau"],
        initial_reward=traj["initial_reward"],
        zeta=traj["zeta"],
        damping=traj["C_eff"],
        hdi_probs=hdi_probs,
        stop_threshold=stop_threshold,
        parameters=params,
        attrs=all_attrs,
        band_draws=traj["band"],
        diverging=diverging,
        swinging=swinging,
        policy_draws=policy,
        # the expected remaining gain follows the draws past the horizon until they settle: it
        # counted only up to the horizon, so a lightly damped setting's stop step moved with it
        # (`predict models/bandit.nc --k-ref 16`: 198 at --steps 200, 344 at --steps 400)
        # (resumed from the errors simulated so far, shared by the two, diverging draws skipped)
        continuation=continued_trajectories(
            traj, law=used, momentum=momentum, k_ref=k_ref, observation_lag=observation_lag,
            lr_multipliers=lr_multipliers, skip=diverging, shared=continued, clip_range=clip_range,
        ),
        policy_continuation=None if policy is None else continued_trajectories(
            traj, law=used, momentum=momentum, k_ref=k_ref, observation_lag=0, lr_multipliers=lr_multipliers,
            skip=diverging, shared=continued, clip_range=clip_range,
        ),
        # a fit with reward bounds: its mean trajectory stays in them, as its band does
        mean_bounds=None if normalised else draws.attrs.get("reward_bounds"),
    )  # fmt: skip
    note = schedule_beyond_note(lr_multipliers, grid, ds)
    notes = [n for n in (clip_note, note) if n]
    if notes:
        add_warnings(ds, notes)
    if lr_multipliers is not None:  # the rates predicted on, kept with the prediction
        update = np.floor(grid).astype(np.int64)
        rate = np.where(update < lr_multipliers.size, lr_multipliers[np.minimum(update, lr_multipliers.size - 1)], np.nan)
        ds[LR_MULTIPLIER_VAR] = xr.DataArray(rate, dims=STEP_DIM, attrs={
            "long_name": "learning rate of the update from this step, over the rate of the draws (NaN: none within the horizon)"})  # fmt: skip
    return ds


def _refuse_overflowing_draws(traj: dict[str, Any], diverging: np.ndarray, grid: np.ndarray) -> None:
    """Refuse a horizon over which the unstable draws' trajectories overflow, leaving fewer than
    two finite ones, naming the step where they do: `predict --lr 0.05 --k-ref 3 --steps 3000` of a
    fit whose every draw is unstable there gave its diverging means at 1000 steps (with the
    unstable-setting warning) but at 3000 failed in the summary with NumPy's "overflow encountered
    in divide" and "fewer than 2 finite trajectory draws", not saying it was the horizon."""
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(traj["mean"]) & np.isfinite(traj["obs"]) & np.isfinite(traj["band"])
    whole = finite.all(axis=1)
    if whole.sum() >= 2 or not (diverging & ~whole).any():
        return
    first = np.argmin(finite[~whole], axis=1)  # each overflowing draw's first non-finite step
    step = float(grid[int(first.min())])
    raise ValueError(
        f"{int(diverging.sum())} of {diverging.size} posterior draws are unstable at this setting and "
        f"their trajectories overflow from step {step:g} on (the horizon is step {float(grid[-1]):g}): "
        "there is no finite prediction to give over it; predict a shorter horizon (--steps below "
        f"{step:g}) to see the divergence, or ask `bayes-grpo stability` for its probability"
    )


def fitted_convention(fitted: Any, *, momentum: float, model: str | None = None) -> str:
    """The momentum convention of the fitted runs at ``momentum`` (of LLM ``model``, or the
    fit's only LLM), the most common one where they differ, as ``phase-diagram`` takes it
    (:func:`bayes_grpo.checks.stability.most_common_setting`); heavy_ball where the runs
    record none."""
    from bayes_grpo.checks.stability import _fitted_llm, most_common_setting, runset_as_fitted

    ds = runset_as_fitted(fitted)
    if ds is None or "momentum" not in ds.coords or "momentum_convention" not in ds.coords:
        return "heavy_ball"
    _, convention = most_common_setting(ds, momentum=float(momentum), llm=_fitted_llm(fitted, model))
    return convention or "heavy_ball"


def predict_run(
    posterior: Any,
    *,
    learning_rate: float,
    momentum: float,
    k_ref: float,
    group_size: float,
    steps: int | Sequence[float] | np.ndarray,
    momentum_convention: str | None = "heavy_ball",
    model: str | None = None,
    model_size: float | None = None,
    law: str = "auto",
    observation_lag: float | None = None,
    discrepancy: bool = True,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    seed: int = 0,
    lr_schedule: np.ndarray | None = None,
    lr_schedule_label: str | None = None,
    clip_epsilon: float | None = None,
    clip_epsilon_high: float | None = None,
) -> xr.Dataset:
    """Predict a run with new hyperparameters from a fitted model or a saved posterior file.

    Parameters
    ----------
    posterior
        A fitted ``GRPODynamicsModel`` or the path of one saved with its ``save``.
    learning_rate, momentum, momentum_convention, k_ref, group_size
        The new setting (``momentum_convention`` "heavy_ball" or "ema"; None: that of the
        fitted runs at this momentum, of the predicted LLM, as ``phase-diagram`` takes it,
        heavy_ball where they record none).
    steps
        Horizon ``T`` (steps ``0..T``) or explicit steps.
    model, model_size
        An LLM already in the fit, or None for the fit's LLM when it has only one, else a new
        LLM drawn from the population level (``model_size`` enters when the curvature regression on ``log N`` is on).
    law
        Trajectory law: "auto" (the exact recursion where defined, else the continuous
        expansion), "recursion" or "continuous" (module docstring).
    observation_lag
        Steps by which the logged reward trails the policy under the recursion; default
        (None): :func:`default_observation_lag` of the fitted runs (``k_ref`` for bandit
        runs, 1 for training logs such as TRL's, 0 for SDE simulations), named in attr
        ``observation_lag_reason``.
    discrepancy
        Add the law-discrepancy term estimated from the fit's own training runs
        (:func:`bayes_grpo.predict.discrepancy.discrepancy_from_model`) to the band of the
        mean trajectory; False gives parameter uncertainty only.
    hdi_probs
        Band probabilities (default 0.5 and 0.9).
    stop_threshold
        Expected remaining gain (reward units) below which to stop; default 1% of the rise.
    seed
        Seed of every random draw: the new run's initial-reward offset and a new LLM's curvature
        (:meth:`GRPODynamicsModel.coefficient_draws`), the law-discrepancy and noise draws.
    lr_schedule, lr_schedule_label
        Optional learning-rate schedule: the multiplier ``lr[n] / learning_rate`` of each
        update ``n = 0 .. T - 1`` (:func:`bayes_grpo.dynamics.schedule.lr_multipliers`), and
        how to name it in the settings. The coefficients, the regime and P(unstable) are
        then those of the schedule's peak rate; the trajectory follows the schedule.
    clip_epsilon, clip_epsilon_high
        PPO clip range of the run (TRL's ``epsilon``, 0.2 by default there, and ``epsilon_high``,
        None: ``clip_epsilon``); None: the linear law of the paper. Under the recursion the
        gradient is scaled by the share clipping leaves, the reward read as a success rate
        (:mod:`bayes_grpo.dynamics.trust_region`): the fitted LLM's rewards must lie in
        ``[0, 1]``. The discrepancy term's training runs are simulated with the same range
        (taken to have run with it). At a lag where the policy moves more than the range within
        ``K_ref`` steps (the bandit at ``K_ref = 6``) the linear law rises too fast.

    Returns
    -------
    xarray.Dataset
        Bands over ``step`` (``mean_*``: the mean trajectory; ``obs_*``: the logged reward),
        ``time_to_fraction_*``, ``regime_probability``, ``expected_remaining_gain``; attrs
        ``regime``, ``regime_prob``, ``stop_step``, ``prob_unstable_closed_form``,
        ``prob_unstable_exact`` and the settings; attr ``posterior_warnings`` (JSON list) the
        warnings of loading a saved fit (:func:`bayes_grpo.model.load_fitted_model`), which are
        also warned.
    """
    hdi_probs = checked_hdi_probs(hdi_probs)  # before the fit is loaded and its draws run
    # -1 failed in NumPy naming no argument, after the fit was loaded; a whole number, as
    # coefficient_draws offsets it (a Generator failed in int())
    checked_seed(seed, generator=False)
    g = float(group_size)
    if np.isfinite(g) and 0 < g and (g < 2 or not g.is_integer()):  # g <= 0: refused below
        # one completion per prompt has no group to be relative to (zero advantage), and a group
        # is a whole number of completions; the noise law D / G^alpha still gave a band for both
        raise ValueError(
            f"group_size must be a whole number of completions per prompt >= 2 (GRPO compares "
            f"each completion with the rest of its group), got {g:g}"
        )
    if model is not None and not str(model).strip():
        # `--model "$LLM"` with LLM unset predicted a new LLM named '' (normalised progress)
        raise ValueError(
            "model is an empty name: give an LLM of the fit, a new LLM's name, or leave it out "
            "(the fit's LLM when it has only one)"
        )
    from bayes_grpo.dynamics.trust_region import check_clip_range
    from bayes_grpo.model.core import as_fitted_model  # lazy: the model area is heavy to import

    clip_range = check_clip_range(clip_epsilon, clip_epsilon_high)
    fitted, load_notes = as_fitted_model(posterior)
    if momentum_convention is None:
        # `predict fit.nc --momentum 0.9` of a fit of Adam runs (ema) took heavy_ball, a step
        # 1 / (1 - mu) = 10 times theirs, and only warned; now the fitted runs' own convention
        momentum_convention = fitted_convention(fitted, momentum=momentum, model=model)
    multipliers, peak_rate = None, learning_rate
    if lr_schedule is not None:
        n_updates = int(np.ceil(horizon_steps(steps)[-1]))
        multipliers = check_multipliers(lr_schedule, n_updates)[:n_updates]
        peak = float(multipliers.max())
        if peak <= 0:
            raise ValueError("the learning-rate schedule is 0 at every update of the horizon")
        peak_rate, multipliers = learning_rate * peak, multipliers / peak
    import warnings

    from bayes_grpo.model.core import UnusedModelSizeWarning, between_models_prior_note

    with warnings.catch_warnings():
        # an unused model_size is the prediction's own warning below
        warnings.simplefilter("ignore", UnusedModelSizeWarning)
        # a saved fit's refusal names its file (GRPODynamicsModel.coefficient_draws)
        draws = fitted.coefficient_draws(
            learning_rate=peak_rate,
            momentum=momentum,
            momentum_convention=momentum_convention,
            k_ref=k_ref,
            group_size=group_size,
            model=model,
            model_size=model_size,
            # the new run's R0 offset and a new LLM's curvature are random too: `--seed 1` gave
            # the same band of the mean as `--seed 0`, only the noise moved
            random_seed=seed,
        )
    parameterisation = draws_parameterisation(draws)
    mechanistic = parameterisation == "mechanistic"
    new_llm = str(draws.attrs.get("new_model", "False")) == "True"
    size_used = new_llm and "size_exponent" in fitted._require_fit().posterior
    from bayes_grpo.checks.stability import runset_as_fitted

    # with the settings the fit took from its --default values: the run set reads NaN there, and
    # a fit of runs at lr 1e-5 (K_ref 1 by --default) and 5e-5 (K_ref 1 logged) warned that a K_ref
    # 0.000109 at 2e-5 lay outside the range [0.000136, 0.000136] of the logged runs
    fitted_runs = runset_as_fitted(fitted)
    warnings_ = fitted_range_warnings(
        fitted,
        model=model,
        learning_rate=peak_rate,
        momentum=momentum,
        k_ref=k_ref,
        gain=draws["a"].values if mechanistic else None,
        model_size=model_size if size_used else None,
        group_size=None if new_llm else group_size,  # a new LLM's band has no noise to carry
        momentum_convention=momentum_convention,
    )
    noise_exponent = fitted.noise_exponent_summary() if hasattr(fitted, "noise_exponent_summary") else None
    if noise_exponent is not None and noise_exponent["note"] and not new_llm:
        # models/tiny.nc: alpha -1.02 [-1.1, -0.94], and predict's band of the logged reward at
        # any G scaled its noise by that without a word
        warnings_.append(noise_exponent["note"])
    if mechanistic and not new_llm:
        # an LLM fitted on Adam and SGD runs has one curvature for both: the fit's note
        from bayes_grpo.model.prepare import mixed_optimizer_start

        start = mixed_optimizer_start(str(draws.attrs.get("model")))
        mixed = [n for n in getattr(getattr(fitted, "data", None), "notes", []) if n.startswith(start)]
        if mixed and momentum:
            # with both conventions among the fitted runs, the warning on a convention none of them
            # has cannot fire: `predict fit.nc --momentum 0.9` of such an LLM took the default
            # heavy_ball for an Adam setting and said only that the LLM has runs of both
            optimizer = "Adam's beta1" if momentum_convention == "ema" else "SGD's heavy-ball momentum"
            mixed = [
                f"{n}. This prediction takes momentum {momentum:g} in the {momentum_convention} convention "
                f"({optimizer}; --momentum-convention sets it)"
                for n in mixed
            ]
        warnings_.extend(mixed)
    if fitted_runs is not None:
        from bayes_grpo.model.prepare import averaged_scheduled_runs, scheduled_fit_warning

        llm = draws.attrs.get("model")  # the fitted LLM predicted; a new one rests on them all
        averaged = averaged_scheduled_runs(
            fitted, fitted_runs, model=None if new_llm or llm is None else str(llm)
        )
        if averaged:
            warnings_.append(scheduled_fit_warning(averaged))
    if draws.attrs.get("new_group"):
        # `predict fit.nc --group-size 8 --model llmA` of a by-group fit of llmA at G 4 and 16
        # gave a 90% band of the mean at step 150 of [0.58, 0.95] against [0.71, 0.79] at G 4,
        # and no word on why
        from bayes_grpo.model.prepare import group_model

        fitted_g = [g for g in fitted.data.groups if group_model(g) == draws.attrs.get("model")]
        warnings_.insert(
            0,
            f"{draws.attrs['new_group']} is not a group of this by-group fit ({', '.join(fitted_g)}): its "
            "offsets of the trajectory from the LLM's are drawn from their prior, so the bands carry "
            "the prior's spread between group sizes, not an interpolation",
        )
    if new_llm:
        fitted_models = [str(m) for m in getattr(getattr(fitted, "data", None), "models", [])]
        # the noise scale D of a new LLM is unknown like its reward scale: `predict ... --model
        # newllm --group-size 2` and `--group-size 64` gave the same "logged reward" band, the
        # mean's, and said nothing of it
        # `--model llm-1.5B` of a fit of 'llm 1.5B' (or another case) became a new LLM
        import difflib

        near = difflib.get_close_matches(str(model), fitted_models, n=1, cutoff=0.8) if model is not None else []
        if model is not None and not near:
            near = [m for m in fitted_models if m.lower() == str(model).lower()]
        warnings_.insert(
            0,
            (f"model {model!r} is not in the fit" if model is not None else "no --model given")
            + f" (its LLMs: {fitted_models})"
            + (f"; did you mean {near[0]!r}?" if near else "")
            + ": predicted as a new LLM from the population level, "
            "in normalised progress (R - R0)/(p* - R0); its noise scale is unknown too, so the "
            "band of the logged reward has no noise in it (it is the band of the mean trajectory) "
            "and the group size does not enter",
        )
    if new_llm and (between := between_models_prior_note(draws)) is not None:
        # `predict models/bandit.nc --model newllm` gave the fitted LLM's own curvature: a 90%
        # band of the progress at step 150 of [0.975, 1.025], as if every LLM rose alike
        warnings_.append(between)
    if model_size is not None:
        if not new_llm:
            why = f"the prediction is for {draws.attrs.get('model')!r}, an LLM of the fit"
        elif not size_used:
            why = "this fit has no regression of the curvature on model size"
        else:
            why = None
        if why is not None:
            warnings_.insert(0, f"model_size = {float(model_size):g} is not used: {why}")
    if not mechanistic:
        warnings_.insert(
            0,
            f"a {parameterisation} fit: the learning rate, momentum and K_ref "
            "do not enter its coefficients, so this is the LLM's fitted curve, not a prediction "
            "for the setting, and P(unstable) is not given (NaN); use a mechanistic fit"
            + ("; the learning-rate schedule only re-times that curve" if multipliers is not None else ""),
        )
    elif not is_whole(k_ref):
        warnings_.append(
            f"K_ref = {float(k_ref):g} is not a whole number of steps: the exact (discrete "
            "recursion) stability criterion is not defined, so P(unstable, exact) is not given "
            "(NaN); P(unstable, closed form) is given"
        )
    settings = {
        "learning_rate": learning_rate,
        "momentum": momentum,
        "momentum_convention": momentum_convention,
        "k_ref": k_ref,
        "group_size": group_size,
        # the LLM predicted, as resolved (the fit's only LLM when --model is not given: the
        # settings said "model": "" and no output named it), and whether it is one of the fit
        "model": str(draws.attrs.get("model") or model or ""),
        "new_model": new_llm,
        "model_size": model_size,
        "posterior": str(posterior)
        if isinstance(posterior, str | os.PathLike)
        else type(posterior).__name__,
        "seed": seed,
        "clip_epsilon": None if clip_range is None else clip_range[0],
        "clip_epsilon_high": None if clip_range is None else clip_range[1],
    }
    if clip_range is not None and not new_llm:
        check_success_rate_runs(fitted_runs, model=str(draws.attrs.get("model") or model or ""))
    if multipliers is not None:
        settings["lr_schedule"] = lr_schedule_label or "custom"
        settings["lr_schedule_peak_rate"] = peak_rate
        if peak_rate != learning_rate:
            warnings_.append(
                f"the learning-rate schedule peaks at {peak_rate:g}, not at the learning rate "
                f"{learning_rate:g}: the regime and P(unstable) are for the peak rate"
            )
    if observation_lag is None:
        observation_lag, lag_reason = default_observation_lag(fitted_runs, model=model if not new_llm else None, k_ref=k_ref)
    else:
        lag_reason = "given"
        last = float(horizon_steps(steps)[-1])
        if not is_whole(observation_lag) or float(observation_lag) < 0:
            # refused by the recursion only: under the continuous law -1 passed unsaid
            raise ValueError(
                f"observation_lag must be a whole number of steps >= 0, got {float(observation_lag)}"
            )
        used_law, law_why = choose_law(
            law, parameterisation=parameterisation, k_ref=k_ref, steps=horizon_steps(steps)
        )
        if used_law != "recursion":
            # `--law continuous --observation-lag 3` (or a K_ref of 2.5, where auto falls back to
            # the continuous law) gave the policy's milestones and bands, the lag dropped unsaid
            warnings_.append(
                f"observation lag {float(observation_lag):g} is not used: the {used_law} law "
                f"({law_why}) has no observation lag, so the bands and milestones are those of "
                "the policy's mean trajectory"
            )
        elif float(observation_lag) >= last:
            # `--observation-lag 1000 --steps 100` drew a flat line at R0 and said nothing
            warnings_.append(
                f"observation lag {float(observation_lag):g} is not below the horizon's last step "
                f"{last:g}: every logged reward of the horizon is that of the initial policy (R0)"
            )
    profile = None
    if discrepancy:
        from bayes_grpo.predict.discrepancy import discrepancy_from_model

        used, _ = choose_law(
            law,
            parameterisation=parameterisation,
            k_ref=k_ref,
            steps=horizon_steps(steps),
        )
        # a new LLM's prediction does not clip (clip_range_used): neither do the runs its band rests on
        profile = discrepancy_from_model(fitted, model=model, law=used, clip_range=None if new_llm else clip_range)
    ds = predict_from_draws(
        draws,
        steps=steps,
        momentum=momentum,
        k_ref=k_ref,
        law=law,
        observation_lag=observation_lag,
        discrepancy=profile,
        hdi_probs=hdi_probs,
        stop_threshold=stop_threshold,
        seed=seed,
        lr_multipliers=multipliers,
        clip_range=clip_range,
        attrs={
            "settings": json.dumps(settings),
            "kind": "prediction",
            "warnings": json.dumps(warnings_),
            "observation_lag_reason": lag_reason,
            # the saved fit's own warnings (did not converge, an i.i.d. fit too confident) went to
            # stderr only: `predict --json` and a saved prediction did not carry them
            "posterior_warnings": json.dumps(load_notes),
        },
    )
    beyond = beyond_logged_rewards_warning(
        fitted_runs,
        model=model,
        mean_trajectory=ds["mean_mean"].values,
        plateau=draws["plateau"].values,
    )
    if beyond is not None:
        add_warnings(ds, [beyond])
    if not new_llm:
        unsettled = unsettled_runs_note(
            fitted_runs, model=model, plateau=draws["plateau"].values, initial_reward=draws["initial_reward"].values
        )
        if unsettled is not None:
            add_warnings(ds, [unsettled])
    if clip_range is None and not new_llm:
        note = unclipped_move_note(fitted_runs, model=model, prediction=ds, k_ref=k_ref)
        if note is not None:
            add_warnings(ds, [note])
    if stop_threshold is not None and str(ds.attrs.get("units", "")).startswith("normalised"):
        # `--stop-threshold 0.05` (documented in reward units) of a new LLM was read as 5% of
        # its rise, without a word
        add_warnings(ds, [
            f"the stop threshold {float(stop_threshold):g} is read in this prediction's units, "
            "normalised progress (a share of the rise p* - R0), not in reward units: a new LLM's "
            "reward scale is unknown"])
    return ds


def save_prediction(ds: xr.Dataset, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a prediction / forecast dataset to netCDF (h5netcdf), atomically.

    An existing ``path`` is replaced only with ``overwrite=True`` (``FileExistsError`` otherwise);
    a ``path`` not named ``.nc`` / ``.nc4`` / ``.netcdf`` is refused (``ValueError``), as
    ``bayes-grpo predict -o`` / ``forecast -o`` refuse it.
    """
    check_suffix(path, "path", NETCDF_SUFFIXES, "netCDF")  # "p.txt" got netCDF bytes
    clean = ds.copy()
    for key, value in list(clean.attrs.items()):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            clean.attrs[key] = "nan" if value is not None else ""
        elif isinstance(value, bool):
            clean.attrs[key] = int(value)
        elif not isinstance(value, str | int | float):
            clean.attrs[key] = json.dumps(value)
    return write_atomic(
        path, lambda tmp: clean.to_netcdf(tmp, engine="h5netcdf"), overwrite=overwrite
    )


def load_prediction(path: str | os.PathLike) -> xr.Dataset:
    """Read a dataset written by :func:`save_prediction`."""
    path = Path(path)
    # `report --prediction DIR` and `--prediction pred.png` ended in h5py's traceback
    ds = read_named_netcdf(
        path,
        load_netcdf_dataset,
        file_noun="prediction file",
        hint="a prediction is the file `bayes-grpo predict ... -o pred.nc` (or `forecast ... -o`) writes",
        not_netcdf="not a netCDF prediction file (a plot?)",
        unreadable="not a readable netCDF prediction file",
    )
    missing = [k for k in SUMMARY_ATTRS if k not in ds.attrs]
    missing += [v for v in SUMMARY_VARS if v not in ds.variables]
    if missing:
        raise ValueError(
            f"{path}: not a prediction or forecast file (bayes-grpo predict/forecast -o): "
            f"it has no {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}"
            + _other_file_than_a_prediction(path, ds)
        )
    return ds


def _other_file_than_a_prediction(path: Path, ds: xr.Dataset) -> str:
    """``"; it is a fitted model ..."`` or ``"; it is a run set ..."``, with what gives a
    prediction from it, when the file :func:`load_prediction` refused is one; else ``""``.
    `report FIT --prediction FIT` (or the run set) said only which attributes it lacked."""
    from bayes_grpo.constants import RUN_DIM
    from bayes_grpo.runset import REWARD_VAR

    if REWARD_VAR in ds.data_vars and {RUN_DIM, STEP_DIM} <= set(ds.dims):
        return (
            "; it is a run set (written by `bayes-grpo ingest` or `simulate`): forecast one of its "
            "runs (`bayes-grpo forecast RUNS --run ID --upto STEP -o forecast.nc`) and give that file"
        )
    import h5py

    try:
        with h5py.File(path, "r") as fh:
            fitted = "posterior" in fh.keys()
    except OSError:
        return ""
    if fitted:
        return (
            "; it is a fitted model (a posterior saved by `bayes-grpo fit`): predict a setting from "
            "it (`bayes-grpo predict FIT ... -o prediction.nc`) and give that file"
        )
    return ""


def default_plot_title(ds: xr.Dataset) -> str:
    """What a prediction or forecast plot shows, for its title: the setting predicted (LLM,
    learning rate, momentum and convention, ``K_ref``, ``G``, a schedule) or the run forecast
    and its last seen step, then, on a line of its own, the regime and its probability. A plot
    titled by its regime alone did not say which of several ``--plot`` files was which setting."""
    regime = f"{ds.attrs.get('regime', '')} (p={float(ds.attrs.get('regime_prob', np.nan)):.2f})"
    try:
        settings = json.loads(str(ds.attrs.get("settings", "{}")))
    except json.JSONDecodeError:
        settings = {}
    if not isinstance(settings, dict):
        settings = {}
    if "run" in ds.attrs:  # a forecast
        head = f"run {ds.attrs['run']}"
        upto = float(ds.attrs.get("upto_step", np.nan))
        if np.isfinite(upto):
            head += f", forecast from step {upto:g}"
        return f"{head}\n{regime}"  # one line was cut at the figure's edge for a long run id
    parts = []
    for key, label in (("learning_rate", "lr"), ("momentum", "momentum"), ("k_ref", "K_ref"), ("group_size", "G")):
        value = settings.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value):
            text = f"{label} {value:g}"
            if key == "momentum" and value > 0 and settings.get("momentum_convention"):
                text += f" ({settings['momentum_convention']})"
            parts.append(text)
    if settings.get("lr_schedule"):
        parts.append(f"schedule {settings['lr_schedule']}")
    if not parts:
        return regime
    head = ", ".join(parts)
    if settings.get("model"):
        head = f"{settings['model']}: {head}"
    return f"{head}\n{regime}"


def plot_prediction(
    ds: xr.Dataset,
    *,
    observed: tuple[np.ndarray, np.ndarray] | None = None,
    truth: tuple[np.ndarray, np.ndarray] | None = None,
    title: str | None = None,
    ax: Any = None,
) -> Any:
    """Plot bands of a prediction / forecast dataset; returns the matplotlib Figure.

    Parameters
    ----------
    ds
        Output of :func:`predict_run` or :func:`bayes_grpo.predict.forecast.forecast_run`.
    observed
        Optional ``(steps, rewards)`` logged rewards to overlay (e.g. the prefix and the rest);
        default: the ``logged_reward`` a forecast dataset carries, if any.
    truth
        Optional ``(steps, mean)`` true mean trajectory (simulations).
    title
        Axes title.
    ax
        Existing axes to draw on.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 4))  # the plot's 7 in and its legend beside it
    else:
        fig = ax.figure
    steps = ds[STEP_DIM].values
    prob = float(ds["hdi_prob"].values[-1]) if HDI_PROB not in ds["hdi_prob"].values else HDI_PROB
    lo, hi = band(ds, kind="obs", hdi_prob=prob)
    ax.fill_between(
        steps, lo, hi, color="tab:blue", alpha=0.15, label=f"{prob:.0%} band, logged reward"
    )
    lo, hi = band(ds, kind="mean", hdi_prob=prob)
    ax.fill_between(
        steps, lo, hi, color="tab:blue", alpha=0.35, label=f"{prob:.0%} band, mean trajectory"
    )
    ax.plot(steps, ds["mean_mean"].values, color="tab:blue", lw=1.5, label="posterior mean")
    if observed is None and LOGGED_REWARD_VAR in ds:
        observed = (
            np.asarray(ds[LOGGED_STEP_DIM].values, dtype=float),
            np.asarray(ds[LOGGED_REWARD_VAR].values, dtype=float),
        )
    if observed is not None:
        ax.plot(observed[0], observed[1], ".", color="k", ms=2.5, label="logged reward")
    if truth is not None:
        ax.plot(truth[0], truth[1], color="tab:red", lw=1.2, ls="--", label="true mean")
    stop = float(ds.attrs.get("stop_step", np.nan))
    if np.isfinite(stop):
        ax.axvline(stop, color="tab:green", ls=":", label=f"stop step {stop:.0f}")
    upto = float(ds.attrs.get("upto_step", np.nan)) if "upto_step" in ds.attrs else np.nan
    if np.isfinite(upto):
        ax.axvline(upto, color="grey", ls="--", lw=0.8, label=f"forecast from step {upto:.0f}")
    ax.set_xlabel("optimizer step")
    # a new LLM's prediction is in normalised progress (attrs["units"]), not in reward
    units = str(ds.attrs.get("units", "reward"))
    ax.set_ylabel("normalised progress (R - R0)/(p* - R0)" if units.startswith("normalised") else "reward")
    ax.set_title(plot_text(title if title else default_plot_title(ds)), fontsize=9)
    # beside the axes: fixed at the lower right it hid the rewards of a run that rose after a
    # forecast's cut, and "best" weighs the logged points and lines, not the bands, which span
    # the whole run
    legend_beside(ax, fontsize=7)
    fig.tight_layout()
    return fig


__all__ = [
    "LAWS",
    "REQUIRED_DRAW_VARS",
    "choose_law",
    "extrapolation_warnings",
    "fitted_range_warnings",
    "unsettled_runs_note",
    "UNSETTLED_SHARE",
    "UNSETTLED_ALPHA",
    "late_change_test",
    "beyond_logged_rewards_warning",
    "check_success_rate_runs",
    "clip_range_used",
    "unclipped_move_note",
    "default_plot_title",
    "horizon_steps",
    "load_prediction",
    "plot_prediction",
    "predict_from_draws",
    "predict_run",
    "recursion_trajectories",
    "save_prediction",
    "stability_probabilities",
    "trajectories_from_draws",
]
