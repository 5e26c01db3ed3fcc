"""Predict the trajectory of a run with new hyperparameters from a saved posterior.

The fitted hierarchical model (:class:`bayes_grpo.model.GRPODynamicsModel`) gives, for any
setting ``(learning_rate, momentum + convention, k_ref, group_size)`` and an LLM already
fitted (or a new one through the population level, with ``model_size`` when the curvature
regression is on), posterior draws of ``(p*, R0, M_eff, C_eff, K_eff, sigma)``
(``coefficient_draws``). Each draw is pushed through the closed-form trajectory; adding
``Normal(0, sigma)`` noise gives the posterior predictive of the logged reward. The draws
are summarised by :func:`bayes_grpo.predict.summary.summarise_draws` (bands, time to
90/95/99% of the rise, regime probabilities, stop step) and the stability of the setting
is reported by both criteria (closed form ``C_eff <= 0`` and the exact discrete spectral
radius).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from bayes_grpo._io import write_atomic
from bayes_grpo.constants import HDI_PROB, STEP_DIM
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.predict.summary import DEFAULT_HDI_PROBS, band, summarise_draws

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


def horizon_steps(steps: int | Sequence[float] | np.ndarray) -> np.ndarray:
    """Steps ``0..T`` for an integer horizon ``T``, or the given steps (sorted, >= 0)."""
    if np.ndim(steps) == 0:
        n = int(steps)  # type: ignore[arg-type]
        if n < 1:
            raise ValueError(f"horizon must be at least 1 step, got {steps}")
        return np.arange(n + 1, dtype=float)
    arr = np.asarray(steps, dtype=float)
    if arr.size < 2 or not np.all(np.diff(arr) > 0) or arr[0] < 0:
        raise ValueError("steps must be at least 2 increasing non-negative optimizer steps")
    return arr


def trajectories_from_draws(
    draws: xr.Dataset, steps: np.ndarray, *, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Mean and observed-reward trajectories ``(n_draws, n_steps)`` from coefficient draws."""
    missing = [v for v in REQUIRED_DRAW_VARS if v not in draws]
    if missing:
        raise ValueError(f"coefficient draws lack {missing}; have {sorted(draws.data_vars)}")
    flat = {v: np.asarray(draws[v].values, dtype=float).reshape(-1) for v in REQUIRED_DRAW_VARS}
    if not np.isfinite(flat["plateau"]).any() or not np.isfinite(flat["initial_reward"]).any():
        # a new LLM: its reward scale is unknown, so predict the normalised progress
        # (R - R0) / (p* - R0), from 0 at the start to 1 at the plateau, without noise
        flat["plateau"] = np.ones_like(flat["a"])
        flat["initial_reward"] = np.zeros_like(flat["a"])
        flat["sigma"] = np.zeros_like(flat["a"])
    with np.errstate(over="ignore", invalid="ignore"):
        mean = reward_trajectory(
            steps[None, :],
            flat["M_eff"][:, None],
            flat["C_eff"][:, None],
            flat["K_eff"][:, None],
            flat["plateau"][:, None],
            flat["initial_reward"][:, None],
        )
    obs = mean + flat["sigma"][:, None] * rng.standard_normal(mean.shape)
    return {"mean": mean, "obs": obs, **flat}


def stability_probabilities(
    a: np.ndarray, momentum: float, k_ref: float, damping: np.ndarray
) -> dict[str, float]:
    """Posterior probability that the setting is unstable, by both criteria.

    ``closed_form``: ``C_eff <= 0`` (the paper's threshold). ``exact``: spectral radius of
    the discrete lagged heavy-ball recursion ``>= 1`` (NaN when the lag is not a whole
    number of steps or the exact solver is unavailable).
    """
    out = {"prob_unstable_closed_form": float(np.mean(np.asarray(damping) <= 0))}
    try:
        from bayes_grpo.dynamics.stability import spectral_radius

        radius = spectral_radius(np.asarray(a, dtype=float), float(momentum), float(k_ref))
        out["prob_unstable_exact"] = float(np.mean(np.asarray(radius) >= 1.0))
    except (ImportError, ValueError):
        out["prob_unstable_exact"] = float("nan")
    return out


def predict_from_draws(
    draws: xr.Dataset,
    *,
    steps: int | Sequence[float] | np.ndarray,
    momentum: float,
    k_ref: float,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    seed: int = 0,
    attrs: dict[str, Any] | None = None,
) -> xr.Dataset:
    """Prediction dataset from ``coefficient_draws`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    grid = horizon_steps(steps)
    traj = trajectories_from_draws(draws, grid, rng=rng)
    normalised = not np.isfinite(np.asarray(draws["plateau"].values, dtype=float)).any()
    stab = stability_probabilities(traj["a"], momentum, k_ref, traj["C_eff"])
    params = {k: traj[k] for k in REQUIRED_DRAW_VARS}
    units = (
        "normalised progress (R - R0)/(p* - R0): a new LLM's reward scale is unknown"
        if normalised
        else "reward"
    )
    all_attrs: dict[str, Any] = {**stab, "units": units, **(attrs or {})}
    return summarise_draws(
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
    )


def predict_run(
    posterior: Any,
    *,
    learning_rate: float,
    momentum: float,
    k_ref: float,
    group_size: float,
    steps: int | Sequence[float] | np.ndarray,
    momentum_convention: str = "heavy_ball",
    model: str | None = None,
    model_size: float | None = None,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    seed: int = 0,
) -> xr.Dataset:
    """Predict a run with new hyperparameters from a fitted model or a saved posterior file.

    Parameters
    ----------
    posterior
        A fitted ``GRPODynamicsModel`` or the path of one saved with its ``save``.
    learning_rate, momentum, momentum_convention, k_ref, group_size
        The new setting (``momentum_convention`` "heavy_ball" or "ema").
    steps
        Horizon ``T`` (steps ``0..T``) or explicit steps.
    model, model_size
        An LLM already in the fit, or None for a new LLM drawn from the population level
        (``model_size`` enters when the curvature regression on ``log N`` is on).
    hdi_probs
        Band probabilities (default 0.5 and 0.9).
    stop_threshold
        Expected remaining gain (reward units) below which to stop; default 1% of the rise.
    seed
        Seed of the observation-noise draws.

    Returns
    -------
    xarray.Dataset
        Bands over ``step`` (``mean_*``: the mean trajectory; ``obs_*``: the logged reward),
        ``time_to_fraction_*``, ``regime_probability``, ``expected_remaining_gain``; attrs
        ``regime``, ``regime_prob``, ``stop_step``, ``prob_unstable_closed_form``,
        ``prob_unstable_exact`` and the settings.
    """
    from bayes_grpo.predict.forecast import _load_model

    fitted = _load_model(posterior)
    draws = fitted.coefficient_draws(
        learning_rate=learning_rate,
        momentum=momentum,
        momentum_convention=momentum_convention,
        k_ref=k_ref,
        group_size=group_size,
        model=model,
        model_size=model_size,
    )
    settings = {
        "learning_rate": learning_rate,
        "momentum": momentum,
        "momentum_convention": momentum_convention,
        "k_ref": k_ref,
        "group_size": group_size,
        "model": model or "",
        "model_size": model_size,
        "posterior": str(posterior)
        if isinstance(posterior, str | os.PathLike)
        else type(posterior).__name__,
        "seed": seed,
    }
    return predict_from_draws(
        draws,
        steps=steps,
        momentum=momentum,
        k_ref=k_ref,
        hdi_probs=hdi_probs,
        stop_threshold=stop_threshold,
        seed=seed,
        attrs={"settings": json.dumps(settings), "kind": "prediction"},
    )


def save_prediction(ds: xr.Dataset, path: str | os.PathLike, *, overwrite: bool = True) -> Path:
    """Write a prediction / forecast dataset to netCDF (h5netcdf), atomically."""
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
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such prediction file")
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


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
        Optional ``(steps, rewards)`` logged rewards to overlay (e.g. the prefix and the rest).
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
        fig, ax = plt.subplots(figsize=(7, 4))
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
    ax.set_ylabel("reward")
    ax.set_title(
        title
        or f"{ds.attrs.get('regime', '')} (p={float(ds.attrs.get('regime_prob', np.nan)):.2f})"
    )
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


__all__ = [
    "REQUIRED_DRAW_VARS",
    "horizon_steps",
    "load_prediction",
    "plot_prediction",
    "predict_from_draws",
    "predict_run",
    "save_prediction",
    "stability_probabilities",
    "trajectories_from_draws",
]
