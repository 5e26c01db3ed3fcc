"""``diagnose``: every failure mode for every run of a run set, as CheckResults."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo.checks.base import CheckResult, counted
from bayes_grpo.constants import RUN_DIM, STEP_DIM
from bayes_grpo.diagnostics._fits import fits_reused
from bayes_grpo.diagnostics._posterior import (
    fitted_group_size,
    has_process_noise,
    load_posterior,
    run_draws,
    unfitted_runs,
)
from bayes_grpo.diagnostics._result import MODE_TITLES
from bayes_grpo.diagnostics.concentration import policy_concentration
from bayes_grpo.diagnostics.config import DiagnosticsConfig
from bayes_grpo.diagnostics.degeneracy import advantage_degeneracy
from bayes_grpo.diagnostics.hacking import reward_hacking
from bayes_grpo.diagnostics.instability import instability
from bayes_grpo.runset.schema import readable_group_size

#: The four failure modes, in report order.
MODES: tuple[str, ...] = tuple(MODE_TITLES)
#: The modes that read a posterior's draws (train-eval decoupling compares two logged rewards).
POSTERIOR_MODES: tuple[str, ...] = ("advantage_degeneracy", "policy_concentration", "instability")


def _require_run(ds: xr.Dataset, run_id: str) -> None:
    if run_id not in [str(r) for r in ds[RUN_DIM].values]:
        raise ValueError(
            f"run {run_id!r} not in the run set; runs: {[str(r) for r in ds[RUN_DIM].values]}"
        )


def run_table(ds: xr.Dataset, run_id: str) -> pd.DataFrame:
    """All per-step metrics of one run, indexed by step; steps where nothing was logged dropped.

    Unlike ``bayes_grpo.runset.run_frame`` this keeps steps where only an evaluation metric
    was logged.
    """
    _require_run(ds, run_id)
    sub = ds.sel({RUN_DIM: run_id})
    frame = pd.DataFrame(
        {v: sub[v].values.astype(float) for v in ds.data_vars if sub[v].dims == (STEP_DIM,)},
        index=ds[STEP_DIM].values,
    )
    frame.index.name = STEP_DIM
    return frame.dropna(how="all")


def evaluation_reward_sources(runset: xr.Dataset) -> dict[str, str]:
    """``{run: the evaluation metric its reward was taken from}`` for the runs whose log had no
    training reward (the ingest's ``reward_rule`` "evaluation fallback ..."); ``{}`` for a run set
    made without the ingest, or whose record does not read."""
    from bayes_grpo.runset.ingest import ingest_facts

    try:
        facts = ingest_facts(runset)
    except (TypeError, ValueError):
        return {}
    return {
        str(run): str(info["reward_source"])
        for run, info in (facts.items() if isinstance(facts, dict) else ())
        if isinstance(info, dict)
        and str(info.get("reward_rule", "")).startswith("evaluation")
        and info.get("reward_source")
    }


def diagnose(
    runset: xr.Dataset,
    run: str | Sequence[str] | None = None,
    config: DiagnosticsConfig | Mapping[str, Mapping[str, Any]] | None = None,
    posterior: Any = None,
    *,
    modes: str | Sequence[str] | None = None,
    posterior_warnings: list[str] | None = None,
    defaults: Mapping[str, float] | None = None,
) -> list[CheckResult]:
    """Assess every failure mode on every (or the chosen) run.

    Parameters
    ----------
    runset
        A run set (``bayes_grpo.runset``).
    run
        One run id, several, or None for all runs.
    config
        Thresholds (:class:`DiagnosticsConfig`, or a mapping ``{section: {field: value}}`` as
        :meth:`DiagnosticsConfig.from_mapping` takes, the shape of ``diagnose --config FILE``);
        defaults when None.
    posterior
        Optional: a saved ``GRPODynamicsModel`` (path), a fitted one, or
        ``{run_id: {"zeta", "C_eff", "plateau": draws}}``. Its draws at each run's
        hyperparameters give the uncertainty of the oscillation / negative-damping
        strengths and the plateau used by policy concentration and degeneracy.
    modes
        One mode of :data:`MODES`, several, or None for all.
    posterior_warnings
        A list that receives the warnings of loading ``posterior`` when it is the path of a
        saved fit (it did not converge, an i.i.d. fit too confident; warned as well), as
        ``report_from_posterior(posterior_warnings=...)`` does: ``diagnose --posterior --json``
        gives them as ``posterior_warnings``.
    defaults
        ``{"group_size": G}`` (CLI: ``--default group_size=G``): the group size of the runs
        whose G neither the run set nor the fit gives, which advantage degeneracy needs to
        derive its share from ``reward_std`` and for its binomial expectation. A run's G is
        the one its run set logs; else, when ``posterior`` is a fit of that run
        (:func:`unfitted_runs`), the G the fit took for it (``fit --default group_size=G``);
        else this default (a fitted run's G that differs from it is warned about). The
        result's ``evidence["group_size_source"]`` says where its G came from.

    Returns
    -------
    list of CheckResult
        One per (run, mode), runs in run-set order and modes in :data:`MODES` order;
        ``passed`` is False when the mode is detected, True when it is not, None when the
        run cannot be assessed. ``values`` carries run, mode, detected, onset_step,
        strength and evidence.
    """
    from bayes_grpo.runset.core import RunSetError, require_runs, run_coords, validate_runset

    require_runs(validate_runset(runset), "diagnose")  # no result, no word, was the answer
    if isinstance(config, Mapping):
        # {section: {field: value}}, the --config file's shape (model_config is a dict too): it
        # died in "'dict' object has no attribute 'hacking'"
        config = DiagnosticsConfig.from_mapping(config)
    elif config is not None and not isinstance(config, DiagnosticsConfig):
        raise TypeError(
            f"config takes a DiagnosticsConfig or a mapping {{section: {{field: value}}}}, got {type(config).__name__}"
        )
    config = config or DiagnosticsConfig()
    # a run or mode named twice (--run a --run a) is assessed once: one result per (run, mode).
    # One mode given as a string is that mode, as one run is (modes="instability" was read as
    # its letters: "unknown diagnostic modes ['a', 'b', 'i', ...]")
    requested = [modes] if isinstance(modes, str) else list(modes or MODES)
    unknown = set(requested) - set(MODES)
    if unknown:
        raise ValueError(f"unknown diagnostic modes {sorted(unknown)}; known: {list(MODES)}")
    modes = tuple(m for m in MODES if m in requested)  # in MODES order, as the results say
    run_ids = (
        [str(r) for r in runset[RUN_DIM].values]
        if run is None
        else list(dict.fromkeys([run] if isinstance(run, str) else [str(r) for r in run]))
    )
    if not run_ids and run is not None:
        # a selection that matched no run (run=[r for r in ... if <filter>]) gave no result
        raise RunSetError("run=[] names no run: nothing to diagnose (run=None diagnoses every run)")
    default_g = _default_group_size(defaults)
    post = load_posterior(posterior, posterior_warnings)
    if post is not None and not set(modes) & set(POSTERIOR_MODES):
        # --mode reward_hacking --posterior fit.nc: the fit was loaded, its runs checked and
        # warned about, and every result said "posterior coefficient draws at the run's
        # hyperparameters", for a mode that reads no draw
        where = str(posterior) if isinstance(posterior, str | os.PathLike) else "the posterior"
        warnings.warn(
            f"{where} is not used: {', '.join(modes)} reads no posterior draws (the modes that "
            f"do: {', '.join(POSTERIOR_MODES)})",
            UserWarning,
            stacklevel=2,
        )
        post = None
    for run_id in run_ids:
        _require_run(runset, run_id)  # an unknown run id fails before the warning below
    stray = unfitted_runs(post, runset, run_ids) if post is not None else {}
    if stray:
        where = str(posterior) if isinstance(posterior, str | os.PathLike) else "the posterior"
        warnings.warn(
            f"{where} was not fitted to {counted(len(stray), 'run')} of this run set ("
            + runs_by_reason(stray)
            + "): where the posterior gives them draws, those are the fit's prediction at each "
            "run's hyperparameters, not a fit of the run; check that the posterior is the fit of "
            "this run set",
            UserWarning,
            stacklevel=2,
        )
    results: list[CheckResult] = []
    undrawn: dict[str, str] = {}
    fit_over_default: dict[str, float] = {}  # {run: the fit's G} where it is not the default
    evaluation_sources = evaluation_reward_sources(runset)  # the ingest's record, read once
    for run_id in run_ids:
        with fits_reused():  # the run's reward is fitted once for the modes that read its plateau
            frame = run_table(runset, run_id)
            coords = run_coords(runset, run_id)
            draws, draws_note = (
                run_draws(post, run_id, coords) if post is not None else (None, "no posterior given")
            )
            if post is not None and not draws:
                undrawn[run_id] = draws_note
            if run_id in stray and draws is not None:
                draws_note += f" (the fit's prediction: {stray[run_id]})"
            plateau_draws = None if not draws else draws.get("plateau")
            for mode in modes:
                if mode == "reward_hacking":
                    res = reward_hacking(
                        frame,
                        run_id=run_id,
                        config=config.hacking,
                        common=config.common,
                        reward_is_evaluation=evaluation_sources.get(run_id),
                    )
                elif mode == "advantage_degeneracy":
                    group_size, group_size_source = _run_group_size(
                        float(coords["group_size"]), default_g, None if run_id in stray else post, run_id
                    )
                    if default_g is not None and group_size_source not in (None, "the run set"):
                        if group_size != default_g:
                            fit_over_default[run_id] = readable_group_size(group_size)
                    res = advantage_degeneracy(
                        frame,
                        run_id=run_id,
                        group_size=group_size,
                        group_size_source=group_size_source,
                        config=config.degeneracy,
                        common=config.common,
                        plateau_draws=plateau_draws,
                    )
                elif mode == "policy_concentration":
                    res = policy_concentration(
                        frame,
                        run_id=run_id,
                        config=config.concentration,
                        common=config.common,
                        plateau_draws=plateau_draws,
                    )
                else:
                    osc = {k: v for k, v in (draws or {}).items() if k in ("zeta", "C_eff")} or None
                    res = instability(
                        frame,
                        run_id=run_id,
                        config=config.instability,
                        common=config.common,
                        posterior_draws=osc,
                        posterior_with_process_noise=has_process_noise(post),
                    )
                if post is not None:
                    res.values["posterior"] = (
                        draws_note if mode in POSTERIOR_MODES else "not used by this mode"
                    )
                results.append(res)
    if fit_over_default:
        # the default given was not the G of these runs: they take the one they were fitted at
        where = str(posterior) if isinstance(posterior, str | os.PathLike) else "the posterior"
        warnings.warn(
            f"the default group_size {readable_group_size(default_g)} is not used for "
            f"{counted(len(fit_over_default), 'run')} that {where} was fitted to at another G ("
            + runs_by_reason({r: f"G = {g}" for r, g in fit_over_default.items()})
            + "): advantage degeneracy reads them at the G of the fit",
            UserWarning,
            stacklevel=2,
        )
    if undrawn:
        # asked for, not used: said where every result is read, not only in each one's values
        where = str(posterior) if isinstance(posterior, str | os.PathLike) else "the posterior"
        warnings.warn(
            f"{where} gave no draws for runs {list(undrawn)} ("
            + "; ".join(undrawn.values())
            + "): their results come from the least-squares fits and the bootstrap",
            UserWarning,
            stacklevel=2,
        )
    return results


def _default_group_size(defaults: Mapping[str, float] | None) -> float | None:
    """The ``group_size`` of ``diagnose(defaults=...)``, checked; None when not given."""
    if not defaults:
        return None
    other = sorted(set(defaults) - {"group_size"})
    if other:
        raise ValueError(
            f"diagnose takes a default for group_size only (the one run setting it reads that a "
            f"run set may lack); got {other}"
        )
    value = defaults.get("group_size")
    if value is None:
        return None
    try:
        g = float(value)
    except (TypeError, ValueError):
        g = float("nan")  # "could not convert string to float" named no setting
    if not (np.isfinite(g) and g > 0):
        raise ValueError(f"default group_size must be a finite number > 0, got {value!r}")
    return g


def _run_group_size(
    logged: float, default: float | None, fit: Any, run_id: str
) -> tuple[float, str | None]:
    """A run's G for advantage degeneracy and where it came from: the run set's, else the G
    ``fit`` (a fitted model of this run, or None) took for it, else the ``defaults`` one;
    ``(NaN, None)`` when none knows it."""
    if np.isfinite(logged):
        return logged, "the run set"
    from_fit = fitted_group_size(fit, run_id) if fit is not None else None
    if from_fit is not None:
        return from_fit
    if default is not None:
        return default, "the default given to diagnose (--default group_size)"
    return float("nan"), None


#: Runs named per reason in a warning before the rest are counted (a run set of hundreds of
#: runs made one warning line of thousands of characters).
MAX_NAMED_RUNS: int = 5


def runs_by_reason(why: dict[str, str], max_named: int = MAX_NAMED_RUNS) -> str:
    """``{run id: reason}`` as text, one clause per reason: ``"reason: a, b and 3 more"``."""
    groups: dict[str, list[str]] = {}
    for run_id, reason in why.items():
        groups.setdefault(reason, []).append(run_id)
    parts = []
    for reason, runs in groups.items():
        named = ", ".join(runs[:max_named])
        more = f" and {len(runs) - max_named} more" if len(runs) > max_named else ""
        parts.append(f"{reason}: {named}{more}")
    return "; ".join(parts)


def detected_runs(
    runset: xr.Dataset, mode: str, config: DiagnosticsConfig | None = None
) -> dict[str, CheckResult]:
    """``{run id: result}`` for the runs where ``mode`` is detected.

    No figures are drawn (``config.common.figures`` is overridden); runs that cannot be
    assessed are not listed.
    """
    base = config or DiagnosticsConfig()
    config = dataclasses.replace(base, common=dataclasses.replace(base.common, figures=False))
    results = diagnose(runset, config=config, modes=[mode])
    return {str(r.values["run"]): r for r in results if r.passed is False}


#: Columns of :func:`diagnosis_table` besides its (run, mode) index.
TABLE_COLUMNS: tuple[str, ...] = (
    "verdict",
    "onset_step",
    "strength",
    "lower",
    "upper",
    "strength_of",
    "source",
)


def diagnosis_table(results: Sequence[CheckResult]) -> pd.DataFrame:
    """One row per (run, mode): verdict, onset step, strength with its interval and source.

    No results (a run set without runs) give the table with no row, not a KeyError."""
    rows = []
    for r in results:
        v = r.values
        st = v.get("strength") or {}
        verdict = (
            "not assessable"
            if r.passed is None
            else ("detected" if not r.passed else "not detected")
        )
        rows.append(
            {
                "run": v.get("run", ""),
                "mode": v.get("mode", r.name),
                "verdict": verdict,
                "onset_step": v.get("onset_step"),
                "strength": st.get("value", np.nan),
                "lower": st.get("lower", np.nan),
                "upper": st.get("upper", np.nan),
                "strength_of": st.get("name", v.get("reason", "")),
                "source": st.get("source", ""),
            }
        )
    table = pd.DataFrame(rows, columns=["run", "mode", *TABLE_COLUMNS])
    # steps as ints, None where there is no onset (pandas makes ints beside None floats: 12120.0)
    table["onset_step"] = pd.Series([row["onset_step"] for row in rows], dtype=object)
    return table.set_index(["run", "mode"])


def verdict_matrix(results: Sequence[CheckResult]) -> pd.DataFrame:
    """Runs x modes matrix of verdicts ("detected", "-", "n/a")."""
    table = diagnosis_table(results).reset_index()
    short = table["verdict"].map(
        {"detected": "detected", "not detected": "-", "not assessable": "n/a"}
    )
    return (
        table.assign(v=short)
        .pivot(index="run", columns="mode", values="v")
        .reindex(columns=[m for m in MODES if m in set(table["mode"])])
    )
