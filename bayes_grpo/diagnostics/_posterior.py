"""Posterior draws for the diagnostics, from a fitted ``bayes_grpo.model.GRPODynamicsModel``.

A posterior is given as a path to a saved model (netCDF), a fitted model object, or a
plain mapping ``{run_id: {"zeta": draws, "C_eff": draws, "plateau": draws}}``. For a run,
the model's :meth:`coefficient_draws` is evaluated at that run's hyperparameters (its
model, learning rate, momentum and convention, K_ref and G), which gives the draws of
``zeta``, ``C_eff`` and ``plateau`` for that setting.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

#: Variables the diagnostics use from a posterior.
POSTERIOR_VARS: tuple[str, ...] = ("zeta", "C_eff", "plateau")


def load_posterior(posterior: Any) -> Any:
    """A fitted model (or a draws mapping) from what the user passed; None stays None."""
    if posterior is None or isinstance(posterior, Mapping):
        return posterior
    if isinstance(posterior, str | os.PathLike):
        path = Path(posterior)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such posterior file")
        from bayes_grpo.model import GRPODynamicsModel

        return GRPODynamicsModel.load(path)
    if hasattr(posterior, "coefficient_draws"):
        return posterior
    raise ValueError(f"posterior must be a path, a fitted GRPODynamicsModel or a mapping of draws; got {type(posterior).__name__}")


def run_draws(posterior: Any, run_id: str, coords: Mapping[str, Any]) -> tuple[dict[str, np.ndarray] | None, str]:
    """Draws of :data:`POSTERIOR_VARS` for one run, and a note saying where they came from or why not.

    Parameters
    ----------
    posterior
        Output of :func:`load_posterior`.
    run_id
        The run.
    coords
        The run's coordinates (``bayes_grpo.runset.run_coords``).
    """
    if posterior is None:
        return None, "no posterior given"
    if isinstance(posterior, Mapping):
        if run_id not in posterior:
            return None, f"posterior mapping has no draws for run {run_id!r}"
        return {k: np.asarray(v, dtype=float).ravel() for k, v in posterior[run_id].items() if k in POSTERIOR_VARS}, "given draws"
    needed = ("learning_rate", "momentum", "k_ref", "group_size")
    missing = [k for k in needed if not np.isfinite(float(coords.get(k, np.nan)))]
    if missing:
        return None, f"run {run_id!r} lacks {missing}, so the posterior cannot be evaluated at its setting"
    kwargs = {
        "learning_rate": float(coords["learning_rate"]),
        "momentum": float(coords["momentum"]),
        "momentum_convention": str(coords.get("momentum_convention") or "heavy_ball"),
        "k_ref": float(coords["k_ref"]),
        "group_size": float(coords["group_size"]),
        "model": str(coords.get("model") or "") or None,
    }
    if np.isfinite(float(coords.get("model_size", np.nan))):
        kwargs["model_size"] = float(coords["model_size"])
    draws = posterior.coefficient_draws(**kwargs)
    out = {k: np.asarray(draws[k].values, dtype=float).ravel() for k in POSTERIOR_VARS if k in draws}
    return out, "posterior coefficient draws at the run's hyperparameters"
