"""Stability with uncertainty: posterior probabilities of instability and oscillation.

For a hyperparameter setting ``(learning_rate, momentum, momentum_convention, k_ref)``
and a fitted posterior, every posterior draw of the curvature gives a gain
``a = eta_eff K`` and so a whole oscillator; averaging indicator functions over the
draws gives posterior probabilities:

* ``P(unstable, closed form)`` = ``P(C_eff <= 0)`` with ``C_eff = (1 - mu) - a L``
  (the paper's threshold, exact at ``L = 1``, conservative beyond);
* ``P(unstable, exact)`` = ``P(spectral radius >= 1)`` of the discrete lagged
  heavy-ball recursion (:mod:`bayes_grpo.dynamics.stability`);
* ``P(oscillatory)`` = ``P(0 < zeta < 1)``: stable under the closed form and
  underdamped (``C_eff^2 < 4 M_eff K_eff``), the continuum model's oscillatory regime;
* the posterior of ``zeta`` and of the critical ``K_ref`` (the first integer lag at
  which the setting stops being stable, by each criterion).

A check *passes* (the setting is called stable) when ``P(unstable, exact) <= 1 -
HDI_PROB`` (i.e. stable with posterior probability at least 0.9), fails when
``P(unstable, exact) >= HDI_PROB``, and is not assessable in between.

The phase diagram evaluates the same probabilities on a grid of ``(learning_rate,
k_ref)``: for a fixed lag the exact stable set in ``a`` is the interval ``(0, a*(mu,
L))`` (:func:`bayes_grpo.dynamics.stability.exact_threshold`), so
``P(unstable, exact) = P(a >= a*)`` is computed from one threshold per lag.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo.checks.base import CheckResult, cell_edges, counted, plot_text, value_median
from bayes_grpo.constants import HDI_PROB
from bayes_grpo.dynamics.coefficients import damping_ratio, effective_step, oscillator_coefficients
from bayes_grpo.dynamics.stability import (
    AUTO_BISECTION_MAX_LAG,
    NO_CRITICAL_K_REF,
    boundary_locus_threshold,
    closed_form_stable,
    closed_form_threshold,
    critical_k_ref,
    exact_stable,
    exact_threshold,
    infinite_value_notes,
    is_whole_lag,
    spectral_radius,
)

#: Largest number of draws x K_ref entries :func:`phase_probabilities` holds in one array.
_MAX_GRID_ENTRIES: int = 2_000_000


def _interval(x: np.ndarray, prob: float = HDI_PROB) -> tuple[float, float]:
    """Equal-tailed ``prob`` interval of the finite values of ``x`` (NaN when none)."""
    v = np.asarray(x, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(v, [(1 - prob) / 2, (1 + prob) / 2])
    return float(lo), float(hi)


def _lag_interval(lags: np.ndarray, prob: float = HDI_PROB) -> tuple[float, float]:
    """Equal-tailed ``prob`` interval of critical lags, draws of ``inf`` (no lag below the
    largest float is unstable: a gain too small) included: :func:`_interval` kept the finite
    draws only, so a posterior whose every draw is ``inf`` read "inf [nan, nan]" (and one with
    some such draws an upper end too small). Sample quantiles (no interpolation between an
    integer lag and ``inf``)."""
    v = np.asarray(lags, dtype=float).ravel()
    v = v[~np.isnan(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(v, [(1 - prob) / 2, (1 + prob) / 2], method="inverted_cdf")
    return float(lo), float(hi)


def stability_probabilities(gain_draws, *, momentum: float, k_ref: float) -> dict[str, Any]:
    """Posterior stability summary from draws of the gain ``a = eta_eff K``.

    Parameters
    ----------
    gain_draws
        Posterior draws of the gain at the setting (dimensionless, per optimizer step);
        any shape, flattened.
    momentum
        Heavy-ball momentum ``mu`` of the recursion (Adam's ``beta1`` for EMA momentum;
        the EMA step factor must already be in ``gain_draws``).
    k_ref
        Lag ``L`` in optimizer steps (an integer for the exact criterion).

    Returns
    -------
    dict with ``p_unstable_closed_form``, ``p_unstable_exact``, ``p_oscillatory``,
    ``p_overdamped``, ``zeta_median``, ``zeta_lo``, ``zeta_hi`` (equal-tailed
    ``HDI_PROB`` interval over the draws with ``C_eff > 0``, the only ones with a damping
    ratio; NaN when there are none), ``p_damped`` (their share), ``gain_*``, ``spectral_radius_median``
    (eigenvalues of every draw, so only up to ``K_ref =`` :data:`AUTO_BISECTION_MAX_LAG`; NaN
    beyond, where ``p_unstable_exact``, by the threshold, needs none), and for each criterion
    ``critical_k_ref_{criterion}_{median,lo,hi}`` (the median a lag of the draws, the first at
    which at least half of them are unstable: ``checks.base.value_median``; with
    ``critical_k_ref_note`` where one is
    infinite: no lag a float holds is unstable), ``spectral_radius_note`` where the radius is
    not computed, and ``n_draws``.
    """
    a = np.asarray(gain_draws, dtype=float).ravel()
    a = a[np.isfinite(a)]
    if a.size == 0:
        raise ValueError("no finite gain draws to assess stability from")
    mu = float(momentum)
    lag = float(k_ref)
    # a NaN lag or momentum made C_eff NaN, which counted as unstable: P = 1 by the closed form
    if not (np.isfinite(lag) and lag >= 0):
        raise ValueError(f"k_ref must be a finite lag >= 0 (optimizer steps), got {k_ref}")
    if not np.isfinite(mu):
        raise ValueError(f"momentum must be a finite number in [0, 1), got {momentum}")
    mass, damping, k_eff = oscillator_coefficients(a, mu, lag)
    # the closed-form verdict of the point summary: C_eff within rounding of 0 is marginal,
    # not stable (counted stable here for a draw at a 0.3, mu 0.1, K_ref 3: C_eff = 1.1e-16)
    damped = closed_form_stable(a, mu, lag)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # Defined where the continuum oscillator is damped (C_eff > 0), as in the point
        # summary and the phase grid: C_eff <= 0 is the unstable regime, not a damping ratio.
        zeta = np.where(
            (mass > 0) & (k_eff > 0) & damped, damping_ratio(mass, damping, np.abs(k_eff)), np.nan
        )
    # the exact criterion iterates the recursion over whole lag steps: for a fractional K_ref it
    # is not defined (NaN), as in the point summary and in predict; the closed form still is
    whole = is_whole_lag(lag)
    # the verdict by the exact threshold (boundary locus), as stability_summary: the companion
    # eigenvalues of every draw took 0.23 s a draw at K_ref = 300 (`stability --posterior
    # tiny.nc --k-ref 300`: over 5 minutes for 2000 draws; hours at the verb's K_ref 2000)
    small = whole and round(lag) <= AUTO_BISECTION_MAX_LAG
    radius = spectral_radius(a, mu, round(lag)) if small else np.full(a.shape, np.nan)
    closed_unstable = ~damped
    exact_unstable = ~exact_stable(a, mu, round(lag)) if whole else np.full(a.shape, np.nan)
    oscillatory = damped & (zeta < 1.0)
    overdamped = damped & (zeta >= 1.0)
    out: dict[str, Any] = {
        "n_draws": int(a.size),
        "p_unstable_closed_form": float(np.mean(closed_unstable)),
        "p_unstable_exact": float(np.mean(exact_unstable)),
        "p_oscillatory": float(np.mean(oscillatory)),
        "p_overdamped": float(np.mean(overdamped)),
        "zeta_median": float(np.nanmedian(zeta)) if np.any(np.isfinite(zeta)) else float("nan"),
        "p_damped": float(np.mean(np.isfinite(zeta))),
        "gain_median": float(np.median(a)),
        "spectral_radius_median": float(np.median(radius)),
    }
    out["zeta_lo"], out["zeta_hi"] = _interval(zeta)
    out["gain_lo"], out["gain_hi"] = _interval(a)
    for criterion in ("exact", "closed_form"):
        crit = critical_k_ref(a, mu, method=criterion)
        # a lag of the draws (value_median): the mean of two middle lags is none
        out[f"critical_k_ref_{criterion}_median"] = float(value_median(crit))
        lo, hi = _lag_interval(crit)
        out[f"critical_k_ref_{criterion}_lo"], out[f"critical_k_ref_{criterion}_hi"] = lo, hi
    # --json writes an infinite lag null: say which and why (it was null without a word)
    out.update(infinite_value_notes(out))
    if not small:
        # null in --json with no word (`stability --posterior ... --k-ref 200`), where the point
        # mode's "note" says why its spectral_radius is null
        out["spectral_radius_note"] = "spectral_radius_median not computed (NaN, null in JSON): " + (
            f"the roots of every draw are computed up to K_ref {AUTO_BISECTION_MAX_LAG} only; the exact "
            "verdict is by the threshold (boundary locus)"
            if whole
            else "the exact criterion needs a whole number of lag steps"
        )
    return out


def stability_verdict(p_unstable_exact: float, prob: float = HDI_PROB) -> bool | None:
    """True (stable) when ``P(unstable) <= 1 - prob``, False when ``>= prob``, else None."""
    if not np.isfinite(p_unstable_exact):
        return None
    if p_unstable_exact <= 1.0 - prob:
        return True
    if p_unstable_exact >= prob:
        return False
    return None


def stability_from_draws(
    gain_draws,
    *,
    learning_rate: float,
    momentum: float,
    momentum_convention: str,
    k_ref: float,
    label: str = "",
) -> CheckResult:
    """Stability check of one setting from gain draws (see :func:`stability_probabilities`)."""
    values = stability_probabilities(gain_draws, momentum=momentum, k_ref=k_ref)
    values.update(
        learning_rate=float(learning_rate),
        momentum=float(momentum),
        momentum_convention=momentum_convention,
        k_ref=float(k_ref),
        model=label,
    )
    passed = stability_verdict(values["p_unstable_exact"])
    exact_defined = bool(np.isfinite(values["p_unstable_exact"]))
    word = {True: "stable", False: "unstable", None: "uncertain"}[passed] if exact_defined else (
        "the exact criterion is not defined (K_ref is not a whole number of steps)"
    )
    setting = (
        f"lr={learning_rate:g}, momentum={momentum:g} ({momentum_convention}), K_ref={k_ref:g}"
    )
    exact_text = (
        f"{values['p_unstable_exact']:.3f} by the exact discrete criterion (spectral radius >= 1), "
        if exact_defined
        else ""
    )
    summary = (
        f"{setting}{' for ' + label if label else ''}: {word}. "
        f"P(unstable) = {exact_text}{values['p_unstable_closed_form']:.3f} by the closed form (C_eff <= 0); "
        f"P(oscillatory, 0 < zeta < 1) = {values['p_oscillatory']:.3f}; "
        f"{_zeta_text(values)}; critical K_ref (exact) = {values['critical_k_ref_exact_median']:.0f} "
        f"[{values['critical_k_ref_exact_lo']:.0f}, {values['critical_k_ref_exact_hi']:.0f}]"
        # "inf [inf, inf]" said no more; the point mode says "none below the largest float"
        + (
            f" (inf: {NO_CRITICAL_K_REF})"
            if any(np.isinf(values[f"critical_k_ref_exact_{end}"]) for end in ("median", "lo", "hi"))
            else ""
        )
        + "."
    )
    rows = [
        ("P(unstable), exact (spectral radius >= 1)", values["p_unstable_exact"], np.nan, np.nan),
        ("P(unstable), closed form (C_eff <= 0)", values["p_unstable_closed_form"], np.nan, np.nan),
        ("P(oscillatory, 0 < zeta < 1)", values["p_oscillatory"], np.nan, np.nan),
        ("P(overdamped, zeta >= 1)", values["p_overdamped"], np.nan, np.nan),
        ("zeta (draws with C_eff > 0)", values["zeta_median"], values["zeta_lo"], values["zeta_hi"]),
        ("gain a = eta_eff K", values["gain_median"], values["gain_lo"], values["gain_hi"]),
        (
            "critical K_ref, exact",
            values["critical_k_ref_exact_median"],
            values["critical_k_ref_exact_lo"],
            values["critical_k_ref_exact_hi"],
        ),
        (
            "critical K_ref, closed form",
            values["critical_k_ref_closed_form_median"],
            values["critical_k_ref_closed_form_lo"],
            values["critical_k_ref_closed_form_hi"],
        ),
    ]
    table = pd.DataFrame(rows, columns=["quantity", "value", "lo", "hi"]).set_index("quantity")
    return CheckResult(name="stability", passed=passed, summary=summary, table=table, values=values)


def _zeta_text(values: dict[str, Any]) -> str:
    """The damping ratio's median and interval, over the draws that have one (``C_eff > 0``)."""
    if not np.isfinite(values["zeta_median"]):
        return "zeta n/a (C_eff <= 0 in every draw: the continuum oscillator is anti-damped)"
    text = (
        f"zeta = {values['zeta_median']:.3g} [{values['zeta_lo']:.3g}, {values['zeta_hi']:.3g}] "
        f"({HDI_PROB:.0%} interval)"
    )
    if values["p_damped"] < 1.0:
        text += f" over the {values['p_damped']:.1%} of draws with C_eff > 0"
    return text


def _gain_draws(
    fitted: Any,
    *,
    learning_rate,
    momentum,
    momentum_convention,
    k_ref,
    model,
    group_size=None,
    model_size=None,
):
    kwargs = dict(
        learning_rate=float(learning_rate),
        momentum=float(momentum),
        momentum_convention=momentum_convention,
        k_ref=float(k_ref),
        group_size=float(group_size) if group_size is not None else _default_group_size(fitted),
        model=model,
    )
    if model_size is not None:  # only then: duck-typed posteriors need not know the keyword
        kwargs["model_size"] = float(model_size)
    # the fit's own parameterisation first: a phenomenological fit asked about a new LLM
    # (no --model) would otherwise fail in coefficient_draws on its missing population level,
    # naming the fitted LLMs as if one of them would do
    _require_mechanistic(str(getattr(fitted, "parameterisation", "mechanistic")), fitted)
    draws = fitted.coefficient_draws(**kwargs)
    _require_mechanistic(str(getattr(draws, "attrs", {}).get("parameterisation", "mechanistic")), fitted)
    from bayes_grpo.model.core import between_models_prior_note

    # `stability --posterior tiny.nc --model qwen` answered zeta 3.58 [1.56, 8.2] (tiny-gpt2's
    # own: [3.27, 3.88]) saying only "a new LLM from the population level", where predict says
    # the width is the prior's spread between LLMs
    between = between_models_prior_note(draws, "posterior intervals")
    if between is not None:
        warnings.warn(between, UserWarning, stacklevel=3)
    return np.asarray(draws["a"].values, dtype=float)


def _require_mechanistic(parameterisation: str, source: Any = None) -> None:
    """Refuse a fit that is not mechanistic; ``source``: the saved fit's path, or the fitted
    model, whose ``source_path`` (the file it was loaded from) is then named, first
    (`stability --posterior phen.nc` did not say which file was phenomenological; a fit
    loaded with ``GRPODynamicsModel.load`` and passed as the model was not named either)."""
    if parameterisation != "mechanistic":
        # its K_eff = w0^2 is the LLM's fitted curve, not eta K: the setting does not enter it
        if not isinstance(source, str | os.PathLike):
            source = getattr(source, "source_path", None)
        named = f"{source}: " if isinstance(source, str | os.PathLike) else ""
        raise ValueError(
            f"{named}stability of a setting needs a mechanistic fit; this one is {parameterisation} "
            "(free zeta and w0 per LLM, no curvature K), so the learning rate and K_ref do not "
            "enter its coefficients: refit with --parameterisation mechanistic"
        )


def _fitted_llm(fitted: Any, model: str | None) -> str | None:
    """The fitted LLM whose curvature a question uses (``model``, or the fit's only LLM when
    none is named); None for a new model, drawn from the population level."""
    data = getattr(fitted, "data", None)
    models = list(getattr(data, "models", []) or [])
    if model is not None and model in models:
        return model
    if model is None and len(models) == 1:
        return models[0]
    return None


def _warn_llm_not_in_fit(fitted: Any, model: str | None) -> None:
    """Warn when ``model`` names no fitted LLM: the question is then answered for a new LLM
    from the population level (`stability --posterior tiny.nc --model tiny-gpt` did so without a
    word, for the fit's tiny-gpt2), as predict warns."""
    models = [str(m) for m in (getattr(getattr(fitted, "data", None), "models", []) or [])]
    if model is None or not models or str(model) in models:
        return
    import difflib

    near = difflib.get_close_matches(str(model), models, n=1, cutoff=0.8)
    if not near:
        near = [m for m in models if m.lower() == str(model).lower()]
    warnings.warn(
        f"model {model!r} is not in the fit (its LLMs: {models})"
        + (f"; did you mean {near[0]!r}?" if near else "")
        + ": answered for a new LLM from the population level",
        UserWarning,
        stacklevel=3,
    )


def _label(fitted: Any, model: str | None, model_size: float | None = None) -> str:
    """Which curvature a question used: a fitted LLM's, or the population level's (with the
    new LLM's size, in parameters, when given)."""
    llm = _fitted_llm(fitted, model)
    if llm is not None:
        return llm
    if _size_regression(fitted) is False:
        model_size = None  # not used by a fit without the curvature regression on size
    size = f" of {float(model_size):.3g} parameters" if model_size is not None else ""
    return f"a new model{' ' + repr(model) if model else ''}{size} (population level)"


def _size_regression(fitted: Any) -> bool | None:
    """Whether the fit regresses ``log K`` on ``log model_size`` (its posterior has
    ``size_exponent``); None for a fit without a posterior."""
    posterior = getattr(getattr(fitted, "idata", None), "posterior", None)
    return None if posterior is None else "size_exponent" in posterior


def _default_group_size(fitted: Any) -> float:
    """A group size for coefficient draws (the gain does not depend on G; any fitted G)."""
    ds = fitted_runset(fitted)
    if ds is not None and "group_size" in ds.coords:
        g = np.asarray(ds["group_size"].values, dtype=float)
        g = g[np.isfinite(g)]
        if g.size:
            return float(np.median(g))
    return 8.0


def fitted_runset(fitted: Any) -> xr.Dataset | None:
    """The run set a model was fitted on (from the model, or the InferenceData's ``fit_data``)."""
    for attr in ("runset", "fit_runset", "data"):
        ds = getattr(fitted, attr, None)
        if isinstance(ds, xr.Dataset):
            return ds
    idata = getattr(fitted, "idata", None)
    if idata is not None and "fit_data" in getattr(idata, "groups", lambda: [])():
        return (
            idata["fit_data"].to_dataset()
            if hasattr(idata["fit_data"], "to_dataset")
            else idata["fit_data"]
        )
    return None


def stability_from_posterior(
    posterior_path_or_model: Any,
    *,
    learning_rate: float,
    momentum: float,
    momentum_convention: str,
    k_ref: float,
    model: str | None = None,
    model_size: float | None = None,
) -> CheckResult:
    """Posterior stability of one hyperparameter setting.

    Parameters
    ----------
    posterior_path_or_model
        Path of a posterior saved by ``GRPODynamicsModel.save`` or a fitted model.
    learning_rate
        Learning rate ``eta`` (per optimizer step).
    momentum
        Heavy-ball momentum ``mu`` or Adam's ``beta1``.
    momentum_convention
        ``"heavy_ball"`` or ``"ema"``.
    k_ref
        Lag ``K_ref`` in optimizer steps (integer for the exact criterion).
    model
        Name of a fitted LLM; None (or an unknown name) draws the curvature from the
        population level (a new model).
    model_size
        Parameters of a new model: needed when the fit regresses ``log K`` on
        ``log model_size`` (``GRPODynamicsModel.coefficient_draws``); not used for a fitted LLM.

    Returns
    -------
    CheckResult named ``"stability"`` (see :func:`stability_from_draws`), whose values also
    say ``new_model``: True when the curvature is the population level's (a new model, where
    ``model_size`` is used), False for a fitted LLM's, and ``extrapolation_warnings``: where the
    setting leaves the fitted runs' range, each line also warned (``UserWarning``), as ``predict``
    warns of it (:func:`bayes_grpo.predict.predict.fitted_range_warnings`).
    """
    if not (np.isfinite(float(learning_rate)) and float(learning_rate) > 0):
        # NaN is an unknown rate to coefficient_draws: it ended in "no finite gain draws"
        raise ValueError(f"learning_rate must be a finite positive number, got {learning_rate}")
    from bayes_grpo.model.core import as_fitted_model  # lazy: the model area is heavy to import

    fitted, load_notes = as_fitted_model(posterior_path_or_model)
    _require_mechanistic(str(getattr(fitted, "parameterisation", "mechanistic")), posterior_path_or_model)
    _warn_llm_not_in_fit(fitted, model)
    a = _gain_draws(
        fitted,
        learning_rate=learning_rate,
        momentum=momentum,
        momentum_convention=momentum_convention,
        k_ref=k_ref,
        model=model,
        model_size=model_size,
    )
    result = stability_from_draws(
        a,
        learning_rate=learning_rate,
        momentum=momentum,
        momentum_convention=momentum_convention,
        k_ref=k_ref,
        label=_label(fitted, model, model_size),
    )
    result.values["new_model"] = _fitted_llm(fitted, model) is None
    regression = _size_regression(fitted)
    if regression is not None:  # duck-typed fits need not have a posterior
        result.values["size_regression"] = regression
    from bayes_grpo.predict.predict import fitted_range_warnings

    # a setting outside the fitted runs' range, as `predict` warns of it (`stability --posterior
    # tiny.nc --k-ref 8`, fitted K_ref 1-2, said nothing); no band, so no law-discrepancy line
    outside = fitted_range_warnings(
        fitted,
        model=model,
        learning_rate=float(learning_rate),
        momentum=float(momentum),
        k_ref=float(k_ref),
        gain=a,
        momentum_convention=momentum_convention,
        model_size=model_size if result.values["new_model"] and regression else None,
        discrepancy_note=False,
    )
    for note in outside:
        warnings.warn(note, UserWarning, stacklevel=2)
    result.values["extrapolation_warnings"] = outside
    runs = fitted_runset(fitted)
    if runs is not None:  # runs fitted with the constant-rate law on a schedule: their gain is an average
        from bayes_grpo.model.prepare import averaged_scheduled_runs

        result.values["scheduled_runs"] = averaged_scheduled_runs(
            fitted, runs, model=_fitted_llm(fitted, model)
        )
    # the saved fit's own warnings, as predict keeps them: `stability --posterior F --json` had
    # them on stderr only
    result.values["posterior_warnings"] = load_notes
    return result


def phase_probabilities(
    stiffness_draws,
    *,
    momentum: float,
    momentum_convention: str,
    learning_rates: Sequence[float],
    k_refs: Sequence[int],
) -> xr.Dataset:
    """Posterior probabilities of instability and oscillation over ``(learning_rate, k_ref)``.

    Parameters
    ----------
    stiffness_draws
        Posterior draws of the curvature ``K`` (any shape, flattened), so that the gain
        at learning rate ``eta`` is ``eta_eff K``.
    momentum, momentum_convention
        Momentum and its convention.
    learning_rates
        1-D grid of learning rates (> 0).
    k_refs
        1-D grid of integer lags (>= 0).

    Returns
    -------
    xarray.Dataset, dims ``(learning_rate, k_ref)``: ``p_unstable_exact``,
    ``p_unstable_closed_form``, ``p_oscillatory``; per ``k_ref`` the thresholds
    ``exact_threshold_gain`` and ``closed_form_threshold_gain``.
    """
    K = np.asarray(stiffness_draws, dtype=float).ravel()
    K = K[np.isfinite(K)]
    if K.size == 0:
        raise ValueError("no finite stiffness draws")
    lrs = np.asarray(learning_rates, dtype=float).ravel()
    lags = np.asarray(k_refs, dtype=float).ravel()
    if lrs.size == 0 or lags.size == 0 or np.any(lrs <= 0):
        raise ValueError("phase diagram needs positive learning rates and at least one k_ref")
    mu = float(momentum)
    eff = np.asarray(effective_step(lrs, mu, momentum_convention), dtype=float)
    # the verdict's own route (exact_stable, stability_probabilities): exact_threshold's default
    # bisects on companion eigenvalues up to K_ref = 128, 18 s of `phase-diagram --k-ref-max 128`
    a_star = np.asarray(boundary_locus_threshold(mu, lags), dtype=float)
    a_cf = np.asarray(closed_form_threshold(mu, lags), dtype=float)
    p_exact = np.empty((lrs.size, lags.size))
    p_cf = np.empty_like(p_exact)
    p_osc = np.empty_like(p_exact)
    # draws x K_ref arrays a block of K_ref at a time: the whole grid at once held ~16 GB for
    # `phase-diagram --k-ref-max 100000` (2000 draws; 820 MB at 5000)
    block = max(1, _MAX_GRID_ENTRIES // K.size)
    for i, e in enumerate(eff):
        a = (e * K)[:, None]  # (n_draws, 1)
        for start in range(0, lags.size, block):
            cols = slice(start, start + block)
            p_exact[i, cols] = np.mean(~((a > 0) & (a < a_star[None, cols])), axis=0)
            p_cf[i, cols] = np.mean(~((a > 0) & (a < a_cf[None, cols])), axis=0)
            mass, damping, k_eff = oscillator_coefficients(a, mu, lags[None, cols])
            p_osc[i, cols] = np.mean(
                (damping > 0) & (k_eff > 0) & (damping**2 < 4.0 * mass * k_eff), axis=0
            )
    dims = ("learning_rate", "k_ref")
    ds = xr.Dataset(
        {
            "p_unstable_exact": (dims, p_exact),
            "p_unstable_closed_form": (dims, p_cf),
            "p_oscillatory": (dims, p_osc),
            "exact_threshold_gain": (("k_ref",), a_star),
            "closed_form_threshold_gain": (("k_ref",), a_cf),
        },
        coords={"learning_rate": lrs, "k_ref": lags},
    )
    ds.attrs.update(momentum=mu, momentum_convention=momentum_convention, n_draws=int(K.size))
    return ds


def plot_phase_diagram(
    grid: xr.Dataset, *, observed: pd.DataFrame | None = None, title: str = ""
) -> Any:
    """Figure of a :func:`phase_probabilities` grid with the observed runs marked.

    Parameters
    ----------
    grid
        Output of :func:`phase_probabilities`.
    observed
        Optional table with columns ``learning_rate``, ``k_ref`` (and optionally ``label``)
        of the runs the posterior was fitted on.
    title
        Figure title.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    lrs = grid["learning_rate"].values
    lags = grid["k_ref"].values
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True, constrained_layout=True)
    levels = [0.1, 0.5, 0.9]
    X, Y = np.meshgrid(lrs, lags, indexing="ij")
    # cells by their edges: shading="nearest" gave a grid of one K_ref (`phase-diagram
    # --k-ref-max 0`) or one learning rate cells of zero height or width, an empty figure
    x_edges, y_edges = cell_edges(lrs, log=True), cell_edges(lags, log=False)
    for ax, var, label in (
        (axes[0], "p_unstable_exact", "P(unstable), exact criterion"),
        (axes[1], "p_oscillatory", "P(oscillatory, 0 < zeta < 1)"),
    ):
        z = grid[var].values
        filled = ax.pcolormesh(x_edges, y_edges, z.T, vmin=0, vmax=1, cmap="viridis", shading="flat")
        if lrs.size > 1 and lags.size > 1:
            cs = ax.contour(X, Y, z, levels=levels, colors="white", linewidths=1.2)
            ax.clabel(cs, fmt="%.1f", fontsize=8)
            if var == "p_unstable_exact":
                cf = ax.contour(
                    X,
                    Y,
                    grid["p_unstable_closed_form"].values,
                    levels=[0.5],
                    colors="red",
                    linestyles="--",
                )
                ax.clabel(cf, fmt="closed form 0.5", fontsize=7)
        fig.colorbar(filled, ax=ax, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("learning rate")
        ax.set_title(label)
        if observed is not None and len(observed):
            ax.scatter(
                observed["learning_rate"],
                observed["k_ref"],
                marker="x",
                s=60,
                color="orange",
                label="observed runs",
                zorder=5,
            )
            ax.legend(loc="upper right", fontsize=8)
    axes[0].set_ylabel("K_ref (lag, optimizer steps)")
    if title:
        fig.suptitle(title)
    return fig


def _stiffness_draws(
    fitted: Any,
    *,
    momentum: float,
    momentum_convention: str,
    model: str | None,
    model_size: float | None = None,
) -> np.ndarray:
    """Posterior draws of ``K`` = gain / effective step (gain queried at ``eta = 1``, ``L = 1``)."""
    a = _gain_draws(
        fitted,
        learning_rate=1.0,
        momentum=momentum,
        momentum_convention=momentum_convention,
        k_ref=1.0,
        model=model,
        model_size=model_size,
    )
    return a / float(effective_step(1.0, float(momentum), momentum_convention))


def phase_diagram(
    posterior_path_or_model: Any,
    *,
    momentum: float,
    momentum_convention: str,
    learning_rates: Sequence[float] | None = None,
    k_refs: Sequence[int] | None = None,
    model: str | None = None,
    observed: pd.DataFrame | None = None,
    n_learning_rates: int = 40,
    model_size: float | None = None,
    note_other_momenta: bool = True,
) -> CheckResult:
    """Phase diagram over ``(learning_rate, k_ref)`` with posterior probability contours.

    Parameters
    ----------
    posterior_path_or_model
        Saved posterior path or fitted model.
    momentum, momentum_convention
        Momentum setting of the diagram.
    learning_rates
        Grid of learning rates; default: ``n_learning_rates`` (40) log-spaced values spanning
        two decades around the posterior-median threshold at ``K_ref = 1``, widened down to
        half the threshold at the grid's largest ``K_ref`` and to include the observed runs.
    k_refs
        Grid of integer lags; default ``0 .. max(16, 2 x largest observed)``.
    model
        LLM name (None: a new model from the population level).
    model_size
        Parameters of a new model (needed when the fit regresses ``log K`` on
        ``log model_size``; see :func:`stability_from_posterior`).
    observed
        Runs to mark (columns ``learning_rate``, ``k_ref``); default: the fitted run set's
        runs with this momentum and convention (those of ``model`` when it is a fitted LLM).
    note_other_momenta
        Say in the summary how many fitted runs are at another momentum setting and not
        marked (default). ``False`` for a caller that draws a diagram for every setting and
        says it once (the report); ``values["n_observed_other_momentum"]`` is set either way.

    Returns
    -------
    CheckResult named ``"phase_diagram"`` with the figure, the per-``K_ref`` posterior
    median and interval of the exact threshold learning rate in ``table``, and the grid in
    ``values``. ``passed`` is True when every observed run lies where its recorded
    setting is predicted stable (``P(unstable, exact) < 0.5``), False otherwise, None
    with no observed runs.
    """
    from bayes_grpo.model.core import as_fitted_model  # lazy: the model area is heavy to import

    fitted, load_notes = as_fitted_model(posterior_path_or_model)
    _require_mechanistic(str(getattr(fitted, "parameterisation", "mechanistic")), posterior_path_or_model)
    _warn_llm_not_in_fit(fitted, model)
    K = _stiffness_draws(
        fitted,
        momentum=momentum,
        momentum_convention=momentum_convention,
        model=model,
        model_size=model_size,
    )
    others: list[tuple[float, str]] = []
    other_llms: dict[str, int] = {}
    if observed is None:
        # a fitted LLM's diagram marks its own runs (another LLM's runs have another curvature)
        runs = runset_as_fitted(fitted)
        llm = _fitted_llm(fitted, model)
        other_llms = _runs_of_other_llms(fitted, runs, llm)
        if other_llms:
            # a new LLM's diagram (the population level): every fitted run is another LLM's, of
            # another curvature (`--model qwen` of a tiny-gpt2 fit marked and judged tiny-gpt2's)
            observed = pd.DataFrame(columns=["learning_rate", "k_ref"])
        else:
            observed = observed_settings(
                runs, momentum=momentum, momentum_convention=momentum_convention, model=llm
            )
            others = _other_momentum_settings(
                runs, momentum=momentum, momentum_convention=momentum_convention, model=llm
            )
    result = phase_diagram_from_draws(
        K,
        momentum=momentum,
        momentum_convention=momentum_convention,
        learning_rates=learning_rates,
        k_refs=k_refs,
        observed=observed,
        label=_label(fitted, model, model_size),
        n_learning_rates=n_learning_rates,
    )
    # the fitted runs at another momentum are not on this diagram: say so (the summary said
    # nothing, and an empty diagram read as a fit without runs)
    result.values["n_observed_other_momentum"] = len(others)
    result.values["n_observed_other_llm"] = sum(other_llms.values())
    if other_llms:
        n = sum(other_llms.values())
        result.summary += (
            f" The {n} fitted run{'s are' if n != 1 else ' is'} of "
            f"{'other LLMs' if len(other_llms) > 1 else 'another LLM'} "
            f"({', '.join(f'{m}: {k}' for m, k in sorted(other_llms.items()))}), whose curvature is not "
            "this diagram's: none is marked or judged here; a fitted LLM's own diagram marks its runs."
        )
    result.values["other_momentum_noted"] = bool(note_other_momenta)
    if others and note_other_momenta:
        kinds = ", ".join(f"{m:g} {c}".rstrip() for m, c in sorted(set(others)))
        result.summary += f" {counted(len(others), 'fitted run')} at another momentum ({kinds}) {'is' if len(others) == 1 else 'are'} not marked."
    result.values["posterior_warnings"] = load_notes  # the saved fit's own (stderr has them too)
    return result


def _runs_of_other_llms(fitted: Any, ds: xr.Dataset | None, llm: str | None) -> dict[str, int]:
    """Fitted runs per LLM when a diagram is drawn for no fitted LLM (``llm`` None: a new one,
    from the population level), else ``{}``; ``{}`` too for a fit that names no LLMs."""
    models = [str(m) for m in (getattr(getattr(fitted, "data", None), "models", []) or [])]
    if llm is not None or not models or ds is None or "model" not in ds.coords:
        return {}
    from bayes_grpo.model.prepare import run_llm_names

    names, counts = np.unique(run_llm_names(ds).astype(str), return_counts=True)
    return {str(m): int(k) for m, k in zip(names, counts)}


def most_common_setting(
    ds: xr.Dataset, *, momentum: float | None = None, convention: str | None = None, llm: str | None = None
) -> tuple[float | None, str | None]:
    """The momentum and convention a diagram takes where not given (``phase-diagram``, the
    demo's diagram and prediction): the most common setting of the runs of ``ds`` (of LLM
    ``llm`` when given) that agree with the given one.

    The pair, not each apart: Adam runs at beta1 0.9 beside SGD runs at 0.5, 0.3 and 0.1 gave
    momentum 0.9 with heavy_ball, a setting no run has; and an LLM's diagram took the setting of
    another LLM's runs. A convention left unknown (a run at momentum 0) stays None."""
    from collections import Counter

    from bayes_grpo.model.prepare import run_llm_names

    mom = np.asarray(ds["momentum"].values, dtype=float)
    conv = np.asarray(ds["momentum_convention"].values, dtype=str)
    mine = np.isfinite(mom)
    if llm is not None and "model" in ds.coords:
        mine &= run_llm_names(ds) == str(llm)
    keep = mine.copy()
    if momentum is not None:
        keep &= np.isclose(mom, momentum)
    if convention is not None:
        keep &= (conv == convention) | (conv == "")
    if not keep.any():  # no run at the given one (`--momentum 0.7`): the runs' most common
        keep = mine
    pairs = Counter(zip(mom[keep].tolist(), conv[keep].tolist()))
    if not pairs:
        return momentum, convention
    # the most common; a tie to the smaller momentum, as before
    m, c = min(pairs, key=lambda pair: (-pairs[pair], pair))
    return (m if momentum is None else momentum), (convention if convention is not None else (c or None))


def _other_momentum_settings(
    ds: xr.Dataset | None, *, momentum: float, momentum_convention: str, model: str | None = None
) -> list[tuple[float, str]]:
    """``(momentum, convention)`` of each run in ``ds`` (of LLM ``model`` when given) that
    :func:`observed_settings` leaves out for its momentum setting."""
    if ds is None:
        return []
    mom = np.asarray(ds["momentum"].values, dtype=float)
    conv = np.asarray(ds["momentum_convention"].values, dtype=str)
    same = np.isclose(mom, float(momentum)) & ((conv == momentum_convention) | (conv == ""))
    mine = np.ones(mom.shape, dtype=bool)
    if model is not None:
        from bayes_grpo.model.prepare import run_llm_names

        mine = run_llm_names(ds) == str(model)
    return [(float(m), str(c)) for m, c in zip(mom[mine & ~same], conv[mine & ~same])]


def runset_as_fitted(fitted: Any) -> xr.Dataset | None:
    """The fitted run set with each run's settings as the fit took them: a setting the run
    does not log carries the fit's default (``fit --default momentum=0.9``), which a phase
    diagram at that momentum must mark the run at (it marked none: the logged NaN matched no
    momentum), and which ``predict``'s and ``forecast --prior``'s extrapolation checks compare a
    setting with (a run fitted at ``--default k_ref=1`` was left out of the fitted range)."""
    ds = fitted_runset(fitted)
    data = getattr(fitted, "data", None)
    run_ids = getattr(data, "run_ids", None)
    if ds is None or run_ids is None or getattr(data, "learning_rate", None) is None:
        return ds
    position = {str(r): i for i, r in enumerate(run_ids)}
    if sorted(position) != sorted(str(r) for r in ds["run"].values):
        return ds
    at = [position[str(r)] for r in ds["run"].values]
    return ds.assign_coords(
        {
            name: ("run", np.asarray(getattr(data, name), dtype=object if name == "momentum_convention" else float)[at])
            for name in ("learning_rate", "momentum", "momentum_convention", "k_ref")
        }
    )


def observed_settings(
    ds: xr.Dataset | None, *, momentum: float, momentum_convention: str, model: str | None = None
) -> pd.DataFrame:
    """``(run, learning_rate, k_ref)`` of the runs in ``ds`` with this momentum setting (only
    those of LLM ``model`` when given)."""
    cols = ["learning_rate", "k_ref"]
    if ds is None:
        return pd.DataFrame(columns=cols)
    frame = pd.DataFrame(
        {
            "learning_rate": np.asarray(ds["learning_rate"].values, dtype=float),
            "k_ref": np.asarray(ds["k_ref"].values, dtype=float),
            "momentum": np.asarray(ds["momentum"].values, dtype=float),
            "momentum_convention": np.asarray(ds["momentum_convention"].values, dtype=str),
        },
        index=pd.Index([str(r) for r in ds["run"].values], name="run"),
    )
    keep = np.isclose(frame["momentum"], float(momentum)) & (
        (frame["momentum_convention"] == momentum_convention) | (frame["momentum_convention"] == "")
    )
    if model is not None:
        from bayes_grpo.model.prepare import run_llm_names

        keep &= run_llm_names(ds) == str(model)
    frame = frame[keep & np.isfinite(frame["learning_rate"]) & np.isfinite(frame["k_ref"])]
    return frame[cols]


def phase_diagram_from_draws(
    stiffness_draws,
    *,
    momentum: float,
    momentum_convention: str,
    learning_rates: Sequence[float] | None = None,
    k_refs: Sequence[int] | None = None,
    observed: pd.DataFrame | None = None,
    label: str = "",
    n_learning_rates: int = 40,
) -> CheckResult:
    """:func:`phase_diagram` from curvature draws (no model needed)."""
    if learning_rates is None and not int(n_learning_rates) >= 2:
        raise ValueError(f"a phase diagram needs at least 2 learning rates, got {n_learning_rates}")
    K = np.asarray(stiffness_draws, dtype=float).ravel()
    K = K[np.isfinite(K) & (K > 0)]
    if K.size == 0:
        raise ValueError("no finite positive stiffness draws")
    mu = float(momentum)
    eff1 = float(effective_step(1.0, mu, momentum_convention))
    obs = observed if observed is not None else pd.DataFrame(columns=["learning_rate", "k_ref"])
    if k_refs is None:
        top = int(np.nanmax(obs["k_ref"])) if len(obs) else 0
        k_refs = np.arange(0, max(16, 2 * top) + 1)
    if learning_rates is None:
        centre = float(exact_threshold(mu, 1.0)) / (eff1 * float(np.median(K)))
        lo, hi = centre / 30.0, centre * 3.0
        # down to the threshold at the grid's largest lag: about K_ref = 1 alone, the boundary
        # left the diagram through its left edge near K_ref 40 (`--k-ref-max 200`)
        top_lag = float(np.max(np.asarray(k_refs, dtype=float)))
        if top_lag > 1:
            lo = min(lo, float(exact_threshold(mu, top_lag)) / (eff1 * float(np.median(K))) / 2.0)
        if len(obs):
            lo = min(lo, float(np.nanmin(obs["learning_rate"])) / 2)
            hi = max(hi, float(np.nanmax(obs["learning_rate"])) * 2)
        learning_rates = np.geomspace(lo, hi, int(n_learning_rates))
    grid = phase_probabilities(
        K,
        momentum=mu,
        momentum_convention=momentum_convention,
        learning_rates=learning_rates,
        k_refs=k_refs,
    )
    # Threshold learning rate per K_ref: a* / (eta_eff per unit eta * K), per draw.
    # a* scales every draw's 1 / (eta_eff per unit eta * K) alike, so the quantiles do too: no
    # draws x K_ref array (1.6 GB for 2000 draws at `--k-ref-max 100000`)
    a_star = grid["exact_threshold_gain"].values
    per_gain = 1.0 / (eff1 * K)
    median, (low, high) = float(np.median(per_gain)), _interval(per_gain)
    rows = [
        (int(lag), float(a) * median, float(a) * low, float(a) * high)
        for lag, a in zip(grid["k_ref"].values, a_star)
    ]
    table = pd.DataFrame(
        rows, columns=["k_ref", "threshold_lr_median", "threshold_lr_lo", "threshold_lr_hi"]
    )
    table = table.set_index("k_ref")
    passed: bool | None = None
    n_risky = 0
    # the exact criterion needs a whole lag: a run logged at a fractional K_ref is marked but
    # not assessed (it made the whole diagram fail)
    whole = np.array([is_whole_lag(k) for k in obs["k_ref"].to_numpy(float)], dtype=bool)
    assessed = obs[whole]
    if len(assessed):
        a_obs = np.asarray(
            effective_step(assessed["learning_rate"].to_numpy(float), mu, momentum_convention),
            dtype=float,
        )
        a_star_obs = np.asarray(exact_threshold(mu, assessed["k_ref"].to_numpy(float)), dtype=float)
        p_obs = np.array([np.mean(~(ai * K < s)) for ai, s in zip(a_obs, a_star_obs)])
        n_risky = int(np.sum(p_obs >= 0.5))
        passed = n_risky == 0
    fractional = sorted({float(k) for k in obs["k_ref"].to_numpy(float)[~whole]})
    # runs the grid does not reach are assessed at their own setting all the same (`--k-ref-max
    # 0` said "0 of 8 observed runs sit where P(unstable) >= 0.5" of runs at K_ref 1 and 2, none
    # of them on the grid it drew)
    grid_lags, grid_lrs = grid["k_ref"].values, grid["learning_rate"].values
    obs_lags, obs_lrs = obs["k_ref"].to_numpy(float), obs["learning_rate"].to_numpy(float)
    off_grid = (
        (obs_lags < grid_lags.min()) | (obs_lags > grid_lags.max())
        | (obs_lrs < grid_lrs.min()) | (obs_lrs > grid_lrs.max())
    )
    n_off = int(off_grid.sum())
    # which LLM and momentum setting: the report draws one diagram per setting, and two of one
    # LLM read alike (title and caption "phase diagram")
    title = f"phase diagram{' of ' + label if label else ''} at momentum {mu:g} ({momentum_convention})"
    fig = plot_phase_diagram(
        grid,
        observed=obs,
        title=plot_text(f"Phase diagram{' - ' + label if label else ''} (momentum {mu:g}, {momentum_convention})"),
    )
    first = table.index[table.index >= 1]
    example = ""
    if len(first):
        r = table.loc[first[0]]
        example = (
            f" At K_ref = {first[0]} the exact-criterion threshold learning rate is "
            f"{r['threshold_lr_median']:.3g} [{r['threshold_lr_lo']:.3g}, {r['threshold_lr_hi']:.3g}]."
        )
    summary = (
        f"Posterior phase diagram{' of ' + label if label else ''} over learning rate x K_ref "
        f"(momentum {mu:g}, {momentum_convention}) "
        f"from {K.size} draws.{example}"
        + (
            f" {n_risky} of {len(assessed)} observed runs sit where P(unstable) >= 0.5."
            if len(assessed)
            else ""
        )
        + (
            f" {n_off} of the {len(obs)} observed runs lie outside the grid (K_ref "
            + (f"{grid_lags.min():g}" if grid_lags.min() == grid_lags.max() else f"{grid_lags.min():g}-{grid_lags.max():g}")
            + f", learning rate {grid_lrs.min():.3g}-"
            f"{grid_lrs.max():.3g}): assessed at their own setting all the same, and marked beyond "
            "the coloured area."
            if n_off
            else ""
        )
        + (
            f" {counted(len(obs) - len(assessed), 'observed run')} at a fractional K_ref "
            f"({', '.join(f'{k:g}' for k in fractional)}) {'is' if len(obs) - len(assessed) == 1 else 'are'} "
            "marked but not assessed: the exact "
            "criterion needs a whole number of steps."
            if fractional
            else ""
        )
    )
    return CheckResult(
        name="phase_diagram",
        passed=passed,
        summary=summary,
        table=table,
        figures={"phase diagram": fig},
        values={
            "momentum": mu,
            "momentum_convention": momentum_convention,
            "learning_rates": grid["learning_rate"].values,
            "k_refs": grid["k_ref"].values,
            "p_unstable_exact": grid["p_unstable_exact"].values,
            "p_unstable_closed_form": grid["p_unstable_closed_form"].values,
            "p_oscillatory": grid["p_oscillatory"].values,
            "n_observed": len(obs),  # marked (the crosses); not all assessed
            "n_observed_at_risk": n_risky,
            "n_observed_not_assessed": len(obs) - len(assessed),
            "n_observed_outside_grid": n_off,
            "title": title,
        },
    )


def local_stiffness_draws(fitted: Any, *, models: Sequence[str] | None = None) -> dict[str, Any]:
    """Small-amplitude (linear-stability) stiffness from fits at several initial errors.

    A curve fit measures a *secant* stiffness: the restoring force averaged over the
    amplitudes the transient covers. When the force is not linear in the error (the
    bandit's is not: the sigmoid and ``sqrt(p (1 - p))`` bend it), a transient from below the
    plateau and one from above give different stiffnesses, to first order
    ``K_fit(e0) = K + c e0`` in the initial error ``e0 = R0 - p*``. Stability is decided by the
    tangent ``K`` at the plateau. Given a posterior fitted with the runs grouped into
    "models" by their initial error (e.g. :func:`bayes_grpo.bandit.experiments.perturbation_runs`),
    this regresses, draw by draw, the models' stiffness ``exp(log_stiffness)`` on their
    initial error ``initial_reward_model - plateau`` and returns the intercept at ``e0 = 0``.
    With initial errors of both signs this interpolates (the first-order term cancels);
    with one sign it extrapolates, and ``values["extrapolated"]`` says so.

    Parameters
    ----------
    fitted
        A fitted mechanistic ``GRPODynamicsModel`` (or anything with ``idata.posterior``
        holding ``log_stiffness``, ``initial_reward_model`` and ``plateau`` over ``model``).
    models
        Models to use (default: all of the fit); at least two with different initial errors.

    Returns
    -------
    dict with ``stiffness`` (draws of the tangent ``K``, 1-d), ``slope`` (draws of ``c``),
    ``per_model`` (DataFrame indexed by model: ``initial_error`` and ``stiffness`` medians,
    ``stiffness_lo``, ``stiffness_hi``), ``extrapolated`` (bool).
    """
    post = getattr(getattr(fitted, "idata", None), "posterior", None)
    if post is None or "log_stiffness" not in post:
        raise ValueError(
            "local stiffness needs a fitted mechanistic posterior (log_stiffness per model)"
        )
    names = [str(m) for m in post["log_stiffness"].coords["model"].values]
    use = list(models) if models is not None else names
    missing = sorted(set(use) - set(names))
    if missing:
        raise ValueError(f"models {missing} are not in the fit (fitted models: {names})")
    if len(use) < 2:
        raise ValueError(
            f"local stiffness needs at least two models with different initial errors, got {use}"
        )

    def stack(var: str) -> np.ndarray:
        da = post[var].sel(model=use).stack(sample=("chain", "draw")).transpose("sample", "model")
        return np.asarray(da.values, dtype=float)

    k = np.exp(stack("log_stiffness"))  # (draws, models)
    e0 = stack("initial_reward_model") - stack("plateau")
    e_mean = e0.mean(axis=1, keepdims=True)
    k_mean = k.mean(axis=1, keepdims=True)
    var_e = ((e0 - e_mean) ** 2).sum(axis=1)
    if not np.all(np.median(var_e) > 0):
        raise ValueError("the models' initial errors do not differ: cannot locate e0 = 0")
    slope = ((e0 - e_mean) * (k - k_mean)).sum(axis=1) / var_e
    tangent = k_mean[:, 0] - slope * e_mean[:, 0]
    med_e0 = np.median(e0, axis=0)
    rows = []
    for j, name in enumerate(use):
        lo, hi = _interval(k[:, j])
        rows.append((name, float(med_e0[j]), float(np.median(k[:, j])), lo, hi))
    per_model = pd.DataFrame(
        rows, columns=["model", "initial_error", "stiffness", "stiffness_lo", "stiffness_hi"]
    ).set_index("model")
    return {
        "stiffness": tangent,
        "slope": slope,
        "per_model": per_model,
        "extrapolated": bool(not (np.min(med_e0) < 0 < np.max(med_e0))),
    }


def bandit_threshold_check(
    posterior_path_or_model: Any,
    sweep: xr.Dataset,
    *,
    model: str | None = None,
    prob: float = HDI_PROB,
    stiffness: str = "auto",
    **convergence_kwargs: Any,
) -> CheckResult:
    """Does the posterior predict where a K_ref sweep stops converging?

    The posterior should come from runs far from the threshold only (e.g. bandit runs at
    small ``K_ref``); the sweep is a run set of one setting ``(learning_rate, momentum,
    convention)`` over many ``K_ref`` (e.g. :func:`bayes_grpo.bandit.experiments.sweep_k_ref`).
    The empirical threshold is the first ``K_ref`` at which most seeds do not converge
    (:func:`bayes_grpo.bandit.experiments.threshold_check`, which needs the sweep's
    ``attrs["truth"]`` only to know each run's plateau); the prediction is the posterior of
    the critical ``K_ref`` by the exact criterion (and, for comparison, the closed form) at
    the sweep's setting.

    ``stiffness`` says which stiffness the prediction uses: ``"model"`` the fitted
    curvature of ``model`` (or the population level), i.e. the curve-level (secant)
    stiffness; ``"local"`` the small-amplitude tangent of :func:`local_stiffness_draws`
    (needs a fit with runs grouped by initial error); ``"auto"`` (default) ``"local"`` when
    the fit has at least two models whose initial errors have both signs, else ``"model"``.
    Linear stability is decided by the tangent, so for a restoring force that is not linear
    in the error only ``"local"`` predicts the threshold without bias.

    Returns
    -------
    CheckResult named ``"bandit_threshold_posterior"``; passed when the empirical
    threshold lies inside the equal-tailed ``prob`` interval of the exact-criterion
    prediction.
    """
    from bayes_grpo.bandit.experiments import threshold_check
    from bayes_grpo.model.core import as_fitted_model  # lazy: the model area is heavy to import

    fitted, load_notes = as_fitted_model(posterior_path_or_model)
    settings = {}
    for coord in ("learning_rate", "momentum", "momentum_convention"):
        vals = np.unique(
            np.asarray(sweep[coord].values).astype(str if coord == "momentum_convention" else float)
        )
        if vals.size != 1:
            raise ValueError(
                f"sweep run set: runs differ in {coord} ({vals.tolist()}); give one setting"
            )
        settings[coord] = vals[0] if coord == "momentum_convention" else float(vals[0])
    empirical = threshold_check(sweep, **convergence_kwargs)
    emp = float(empirical.values["empirical_threshold_k_ref"])
    mu = float(settings["momentum"])
    if stiffness not in ("auto", "local", "model"):
        raise ValueError(f"stiffness must be 'auto', 'local' or 'model', got {stiffness!r}")
    local = None
    if stiffness in ("auto", "local"):
        try:
            local = local_stiffness_draws(fitted)
        except ValueError:
            if stiffness == "local":
                raise
        if stiffness == "auto" and local is not None and local["extrapolated"]:
            local = None
    if local is not None:
        eff = float(effective_step(settings["learning_rate"], mu, settings["momentum_convention"]))
        a = eff * np.asarray(local["stiffness"], dtype=float)
        source = (
            "local (tangent at the plateau, "
            + ("extrapolated from" if local["extrapolated"] else "interpolated between")
            + " fits at initial errors "
            + ", ".join(f"{e:+.3f}" for e in local["per_model"]["initial_error"])
            + ")"
        )
    else:
        a = _gain_draws(fitted, k_ref=1.0, model=model, **settings)
        source = f"fitted curve-level stiffness of {_label(fitted, model)}"
    rows = {}
    for criterion in ("exact", "closed_form"):
        crit = critical_k_ref(a, mu, method=criterion)
        lo, hi = _interval(crit, prob)
        rows[criterion] = {"median": float(value_median(crit)), "lo": lo, "hi": hi}
    lo, hi = rows["exact"]["lo"], rows["exact"]["hi"]
    # runs that do not converge already at the first K_ref swept put the threshold at or below
    # it: a prediction below it is not contradicted (no verdict, as threshold_check), one above
    # it is (K_ref 12-13 at a true threshold of 7 read "Empirical threshold 12 ... Not inside")
    first_lag = float(np.nanmin(np.asarray(sweep["k_ref"].values, dtype=float)))
    censored = bool(np.isfinite(emp) and emp == first_lag and first_lag > 0)
    if censored and hi < emp:
        passed = None
    elif censored and lo > emp:
        passed = False
    else:
        passed = bool(lo <= emp <= hi) if np.isfinite(emp) else None
    table = pd.DataFrame(rows).T
    table.index.name = "criterion"
    truth_exact = float(empirical.values.get("exact_threshold_k_ref", np.nan))
    summary = (
        (
            f"Empirical threshold at or below K_ref = {emp:g} (the sweep's runs do not converge "
            "already at its first K_ref); posterior prediction (exact criterion) "
            if censored
            else f"Empirical threshold K_ref = {emp:g} (sweep); posterior prediction (exact criterion) "
        )
        + f"{rows['exact']['median']:g} [{lo:g}, {hi:g}] ({prob:.0%} interval), closed form "
        f"{rows['closed_form']['median']:g} [{rows['closed_form']['lo']:g}, {rows['closed_form']['hi']:g}]; "
        f"prediction from the true stiffness {truth_exact:g}. Stiffness used: {source}. "
        + (
            "Inside the interval."
            if passed
            else "The prediction lies above the first K_ref swept, where runs already do not converge."
            if passed is False and censored
            else "Not inside the interval."
            if passed is False
            else "The prediction lies below it: no verdict."
            if censored
            else "No threshold seen."
        )
    )
    # runs too short to resolve the lags next to the threshold: the reading is the horizon's
    horizon_note = empirical.values.get("horizon_note")
    if horizon_note:
        passed = None
        summary += f" No verdict: the sweep's threshold is not determined. {horizon_note}"
    values = {
        "empirical_threshold_k_ref": emp,
        "predicted_exact_median": rows["exact"]["median"],
        "predicted_exact_lo": lo,
        "predicted_exact_hi": hi,
        "predicted_closed_form_median": rows["closed_form"]["median"],
        "predicted_closed_form_lo": rows["closed_form"]["lo"],
        "predicted_closed_form_hi": rows["closed_form"]["hi"],
        "true_stiffness_exact_threshold": truth_exact,
        "gain_median": float(np.median(a)),
        "true_gain": float(empirical.values.get("a", np.nan)),
        "threshold_determined": bool(empirical.values.get("threshold_determined", True)),
        "stiffness_source": "local" if local is not None else "model",
        "stiffness_median": float(np.median(a))
        / float(effective_step(settings["learning_rate"], mu, settings["momentum_convention"])),
        **settings,
    }
    if local is not None:
        values["stiffness_lo"], values["stiffness_hi"] = _interval(local["stiffness"], prob)
        values["per_model_stiffness"] = local["per_model"].reset_index().to_dict(orient="records")
        values["local_interpolated"] = not local["extrapolated"]
    values["posterior_warnings"] = load_notes  # the saved fit's own (warned too)
    return CheckResult("bandit_threshold_posterior", passed, summary, table=table, values=values)


__all__ = [
    "bandit_threshold_check",
    "local_stiffness_draws",
    "stability_probabilities",
    "stability_verdict",
    "stability_from_draws",
    "stability_from_posterior",
    "phase_probabilities",
    "phase_diagram",
    "phase_diagram_from_draws",
    "plot_phase_diagram",
    "observed_settings",
    "most_common_setting",
    "fitted_runset",
]
