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
from typing import Any

import numpy as np
import xarray as xr

#: Variables the diagnostics use from a posterior.
POSTERIOR_VARS: tuple[str, ...] = ("zeta", "C_eff", "plateau")


def load_posterior(posterior: Any, notes: list[str] | None = None) -> Any:
    """A fitted model (or a draws mapping) from what the user passed; None stays None.

    ``notes``, a list, receives the warnings of loading a saved fit
    (:func:`bayes_grpo.model.core.as_fitted_model`: it did not converge, an i.i.d. fit too
    confident), which are also warned."""
    if posterior is None or isinstance(posterior, Mapping):
        return posterior
    if isinstance(posterior, str | os.PathLike) or hasattr(posterior, "coefficient_draws"):
        from bayes_grpo.model.core import as_fitted_model  # lazy: the model area is heavy to import

        model, load_notes = as_fitted_model(posterior)
        if notes is not None:
            notes.extend(load_notes)
        return model
    raise ValueError(
        f"posterior must be a path, a fitted GRPODynamicsModel or a mapping of draws; got {type(posterior).__name__}"
    )


def has_process_noise(posterior: Any) -> bool:
    """Whether the posterior (output of :func:`load_posterior`) was fitted with the state-space
    likelihood, i.e. with the SDE's process noise in the model; False for an i.i.d. fit and for
    plain draws (origin unknown)."""
    return getattr(posterior, "likelihood", None) == "state_space"


def unfitted_runs(posterior: Any, runset: Any, run_ids: list[str]) -> dict[str, str]:
    """``{run id: why}`` for the runs of ``run_ids`` that the fitted model ``posterior`` was not
    fitted to: a run id the fit does not have, or one whose rewards differ from the fitted
    run's (a fit of another run set). Their draws are then the fit's prediction at the run's
    hyperparameters (for an LLM the fit does not have, from the population level), not a fit of
    the run. Empty for plain draws or an object without its fitted run set."""
    from bayes_grpo.constants import RUN_DIM
    from bayes_grpo.runset import REWARD_VAR

    fitted = getattr(posterior, "runset", None)
    if fitted is None or isinstance(posterior, Mapping):
        return {}
    fitted_ids = {str(r) for r in fitted[RUN_DIM].values}
    models = list(getattr(getattr(posterior, "data", None), "models", []) or [])
    out = {}
    for run_id in run_ids:
        if run_id not in fitted_ids:
            why = "not a run of the fit"
        else:
            mine = runset[REWARD_VAR].sel({RUN_DIM: run_id}).astype(float)
            theirs = fitted[REWARD_VAR].sel({RUN_DIM: run_id}).astype(float)
            mine, theirs = xr.align(mine, theirs, join="outer")
            if np.allclose(mine.values, theirs.values, rtol=1e-6, atol=0.0, equal_nan=True):
                continue
            why = "rewards differ from the fitted run of that id"
        llm = str(runset["model"].sel({RUN_DIM: run_id}).values) if "model" in runset.coords else ""
        if models and llm and llm not in models:
            why += f"; LLM {llm!r} not in the fit (its LLMs: {models})" + (
                ", so drawn from the population level"
                if getattr(posterior, "parameterisation", None) == "mechanistic"
                else ""
            )
        out[run_id] = why
    return out


def fitted_group_size(posterior: Any, run_id: str) -> tuple[float, str] | None:
    """``(G, where from)``: the group size the fitted model ``posterior`` took for ``run_id``
    (the run's logged G, or the fit's ``--default group_size`` for a run that logs none), None
    for plain draws, an object without its fitted data and run set, a run it was not fitted to
    by id, or a run whose G the fit did not know either. The caller checks that the run is the
    fitted one (:func:`unfitted_runs`): a run of another run set under the same id has no G of
    the fit's."""
    if isinstance(posterior, Mapping) or getattr(posterior, "runset", None) is None:
        return None
    data = getattr(posterior, "data", None)
    run_ids, sizes = getattr(data, "run_ids", None), getattr(data, "group_size", None)
    if run_ids is None or sizes is None:
        return None
    ids = [str(r) for r in run_ids]
    if run_id not in ids:
        return None
    g = float(np.asarray(sizes, dtype=float)[ids.index(run_id)])
    if not np.isfinite(g):
        return None
    from bayes_grpo.constants import RUN_DIM

    fitted = posterior.runset
    logged = (
        float(fitted["group_size"].sel({RUN_DIM: run_id}).values)
        if "group_size" in fitted.coords and run_id in {str(r) for r in fitted[RUN_DIM].values}
        else np.nan
    )
    where = (
        "the fit (its --default group_size, at which it fitted the run)"
        if not np.isfinite(logged)
        else "the fit (its run set logs it)"
    )
    return g, where


def run_draws(
    posterior: Any, run_id: str, coords: Mapping[str, Any]
) -> tuple[dict[str, np.ndarray] | None, str]:
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
        return _finite_draws(
            {k: v for k, v in posterior[run_id].items() if k in POSTERIOR_VARS}
        ), "given draws"

    # a hyperparameter the run does not log takes the fit's own default for such runs (fit
    # --default k_ref=1): the setting the fit gave it, if it was one of the fitted runs
    fit_defaults = dict(
        (getattr(posterior, "model_config", None) or {}).get("hyperparameter_defaults") or {}
    )
    from_fit: list[str] = []

    def known(name: str) -> float | None:
        value = float(coords.get(name, np.nan))
        if np.isfinite(value):
            return value
        default = fit_defaults.get(name)
        if default is not None and np.isfinite(float(default)):
            from_fit.append(f"{name} {float(default):g}")
            return float(default)
        return None

    convention = str(coords.get("momentum_convention") or "") or None
    if convention is None and fit_defaults.get("momentum_convention"):
        convention = str(fit_defaults["momentum_convention"])
        from_fit.append(f"momentum_convention {convention}")
    learning_rate, momentum = known("learning_rate"), known("momentum")
    if convention is None and momentum is not None:
        # at momentum 0 the conventions coincide and the fit needed none (as in
        # forecast._posterior_setting): `diagnose runs.nc --posterior fit.nc` of a fit with
        # `--default momentum=0` said the model "needs ['momentum_convention']"
        from bayes_grpo.model.prepare import convention_without_momentum

        convention = str(convention_without_momentum([momentum], [""])[0]) or None
    kwargs = {
        "learning_rate": learning_rate,
        "momentum": momentum,
        "momentum_convention": convention,
        "k_ref": known("k_ref"),
        "group_size": known("group_size"),
        "model": _fit_llm_name(posterior, str(coords.get("model") or "")),
        "model_size": known("model_size"),
    }
    import warnings

    from bayes_grpo.model.core import UnusedModelSizeWarning

    try:
        with warnings.catch_warnings():
            # the run's own size, passed for a run of an LLM the fit lacks: no request to report
            warnings.simplefilter("ignore", UnusedModelSizeWarning)
            draws = posterior.coefficient_draws(**kwargs)
    except ValueError as exc:  # e.g. the mechanistic form needs hyperparameters this run lacks
        return None, f"posterior not evaluated for run {run_id!r}: {exc}"
    out = _finite_draws({k: draws[k].values for k in POSTERIOR_VARS if k in draws})
    note = "posterior coefficient draws at the run's hyperparameters"
    if from_fit:
        note += f" ({', '.join(from_fit)}: the fit's default for runs that do not log it)"
    return out, note


def _fit_llm_name(posterior: Any, model: str) -> str | None:
    """The fit's name of a run's LLM: ``model``, or for a run that names none the fit's
    ``UNKNOWN_MODEL`` when it has one (it fits such runs as that LLM), else None (a new LLM)."""
    if model:
        return model
    from bayes_grpo.model.prepare import UNKNOWN_MODEL

    fitted = [str(m) for m in getattr(getattr(posterior, "data", None), "models", None) or []]
    return UNKNOWN_MODEL if UNKNOWN_MODEL in fitted else None


def _finite_draws(draws: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Flattened draws without NaN (a new LLM has no plateau on its own scale: dropped)."""
    out = {}
    for k, v in draws.items():
        arr = np.asarray(v, dtype=float).ravel()
        arr = arr[np.isfinite(arr)]
        if arr.size:
            out[k] = arr
    return out
