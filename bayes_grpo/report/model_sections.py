"""Report sections that come from a fitted model: fit per run, convergence, posteriors."""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo.checks.base import plot_text
from bayes_grpo.checks.ppc import iid_residual_check
from bayes_grpo.constants import HDI_PROB
from bayes_grpo.metrics import MIN_TREND_POINTS
from bayes_grpo.model.core import (
    NO_TREND,
    R2_COLUMNS,
    TOO_FEW_FOR_TREND,
    per_group_text,
    too_short_for_trend,
    with_no_trend_r2,
)
from bayes_grpo.report.sections import LABEL_WIDTH, Section, absent, short_labels
from bayes_grpo.runset.schema import group_size_text, group_sizes_as_text, model_text

FIT_INTRO = (
    f"Posterior-mean trajectory and {HDI_PROB:.0%} band of the mean trajectory per run, against the logged reward. "
    "R^2 is given three ways: raw per step, the noise ceiling (an estimate of the R^2 the true smooth curve reaches "
    "given the step-to-step noise, from second-difference pseudo-residuals; on a short noisy run it is uncertain "
    "by about 0.1 and a fit can exceed it), and against the curve smoothed by a centred "
    "moving average of 10% of the run (comparable to the paper's R^2)."
)
CONVERGENCE_INTRO = "R-hat, bulk and tail ESS, divergences, tree depth and E-BFMI of the sampler, with rank plots."
POSTERIOR_INTRO = "Posteriors of M_eff, C_eff, K_eff and zeta per run (labelled by model and G), and of the noise D per model."

#: Largest number of runs drawn in the per-run figure (the table always lists every run).
MAX_RUN_PANELS: int = 24
#: Characters per line of a panel title in the per-run figure (a 3.6 inch panel at 7 pt).
TITLE_WIDTH: int = 48
#: Font size of the forest plots (ArviZ scales its own with the figure: 15 pt, where 80-character
#: run labels left the panels a strip), and the width of a panel per x tick (a tick label of
#: 6-7 characters at that size and a gap).
FOREST_TEXT_SIZE: float = 9.0
FOREST_INCHES_PER_TICK: float = 0.7


def model_sections(model: Any | None) -> list[Section]:
    """The fit, convergence and posterior sections (absent when no fitted model is given)."""
    if model is None or getattr(model, "idata", None) is None:
        reason = "no fitted posterior was given (bayes-grpo fit, then bayes-grpo report models/NAME.nc)."
        return [
            absent("fit", "Fit per run", reason, FIT_INTRO),
            absent("convergence", "Convergence", reason, CONVERGENCE_INTRO),
            absent("posteriors", "Posteriors of the oscillator coefficients", reason, POSTERIOR_INTRO),
        ]
    return [fit_section(model), convergence_section(model), posterior_section(model)]


def _labels(model: Any) -> list[str]:
    ds = model.runset
    sizes = ds["group_size"].values
    data = getattr(model, "data", None)
    if data is not None and [str(r) for r in getattr(data, "run_ids", [])] == [str(r) for r in ds["run"].values]:
        # the G the fit used, as its tables (run_summary) give it: a fit's default (`fit --default
        # group_size=8`) for runs that log none, whose figures read "G=?" beside "group_size 8"
        sizes = data.group_size
    return [f"{model_text(m)} G={group_size_text(g)} | {r}" for r, m, g in zip(ds["run"].values, ds["model"].values, sizes)]


def fit_section(model: Any) -> Section:
    section = Section(key="fit", title="Fit per run", intro=FIT_INTRO)
    settings = ", ".join(f"{k}={v}" for k, v in model.settings.items())
    section.text(f"Model: {settings}.")
    # what the fit printed about the data (a late start, a constant reward, pooled LLMs)
    for note in getattr(getattr(model, "data", None), "notes", None) or []:
        section.text(f"Note: {note}.")
    # among them the settings the run set lacks, taken from the fit's defaults (`fit --default
    # group_size=8`), which the tables below show as if logged: model.prepare.default_settings_notes
    # the note on the noise exponent, when its posterior excludes the theory's 1 (models/tiny.nc)
    noise_exponent = model.noise_exponent_summary() if hasattr(model, "noise_exponent_summary") else None
    if noise_exponent is not None and noise_exponent["note"]:
        section.text(f"Note: {noise_exponent['note']}.")
    runs = model.run_summary()
    # a K_ref sweep at one G: one row per K_ref (M_eff, C_eff, K_eff and zeta depend on it),
    # titled so, as `fit` titles it (it read "Per model and G" over rows per K_ref)
    split = model.mixed_settings(runs) if hasattr(model, "mixed_settings") else []
    section.heading(f"Per {per_group_text(split)}")
    # what the numbers are (`fit` titles its table "posterior medians"): beside the posterior
    # section's means (D 0.0439 here, 0.0458 there), unlabelled they read as a mismatch
    section.text(
        f"Per run, posterior medians (zeta_lo and zeta_hi: the central {HDI_PROB:.0%} interval of zeta; R^2 "
        "of the posterior-mean trajectory; r_hat: the largest R-hat of the run's own variables); per model "
        "and G, the median of its runs' values (n_runs runs), its R^2 the median over its runs with a visible "
        "trend only (n_runs_r2 runs)."
    )
    if split:
        section.text(
            f"The runs of one model and G differ in {' and '.join(split)}, of the settings the coefficients "
            "(M_eff, C_eff, K_eff, zeta) follow from: one row per value, so that no median mixes two settings."
        )
    if hasattr(model, "units_note"):
        section.text(model.units_note()[0].upper() + model.units_note()[1:] + ".")
    # a group of runs without a trend only has no R^2 (group_summary leaves it NaN): say why
    # G as fit prints it and the figures label it: "?" when unknown (a blank cell read as no group)
    section.table(group_sizes_as_text(with_no_trend_r2(runs, model.group_summary())))
    section.heading("Per run")
    cols = [c for c in ["model", "group_size", "p_star", "a", "w0_sq", "M_eff", "C_eff", "K_eff", "zeta", "zeta_lo", "zeta_hi", "D", "r2_raw", "r2_noise_ceiling", "r2_smoothed", "has_trend", "r_hat"] if c in runs.columns]
    shown = runs[cols].copy()
    no_trend = [str(r) for r, t in runs.get("has_trend", pd.Series(dtype=object)).items() if t is False]
    r2 = [c for c in R2_COLUMNS if c in shown.columns]
    if no_trend and r2:
        # a flat run's R^2 is the misfit over its noise alone (-4095 raw, -5.3e4 smoothed): a huge
        # negative number read as if it judged the law; the run has no trend for R^2 to measure
        shown[r2] = shown[r2].astype(object)
        shown.loc[[r in set(no_trend) for r in shown.index.astype(str)], r2] = NO_TREND
    short = too_short_for_trend(runs)
    if short and "has_trend" in shown.columns:  # None read as an empty cell, unexplained
        shown["has_trend"] = shown["has_trend"].astype(object)
        shown.loc[[r in short for r in shown.index.astype(str)], "has_trend"] = TOO_FEW_FOR_TREND
    section.table(group_sizes_as_text(shown))
    if short:
        section.text(
            f"Runs too short for the trend test: {', '.join(f'{r} ({n} points)' for r, n in short.items())}; "
            f'the trend test needs {MIN_TREND_POINTS} logged points to tell a rise from noise, so their has_trend reads '
            f'"{TOO_FEW_FOR_TREND}" (neither a trend nor the lack of one; `fit --json` has null).'
        )
    if no_trend:
        section.text(
            f"Runs without a visible trend (not evidence for or against the law): {', '.join(no_trend)}. "
            f'Their R^2 reads "{NO_TREND}": with no rise to explain, R^2 weighs the curve\'s misfit against the '
            "noise alone, and its value (large and negative where the run is flat) says nothing of the law "
            "(`fit --json` keeps the numbers)."
        )
    caption = (
        f"Logged reward (grey), posterior mean (line) and {HDI_PROB:.0%} band of the mean trajectory; "
        "past a run's last logged step its mean is dashed (the law's extrapolation)."
    )
    n_runs = model.runset.sizes["run"]
    if n_runs > MAX_RUN_PANELS:  # the figure stops at MAX_RUN_PANELS: say so, not drop runs unsaid
        caption += f" The first {MAX_RUN_PANELS} of the {n_runs} runs (the table above lists every run)."
    section.figure(_fit_figure(model), caption)
    independence = iid_residual_check(model)
    if independence is not None:
        section.check(independence)
    return section


def _fit_figure(model: Any):
    import matplotlib.pyplot as plt

    ds = model.runset
    draws = model.fitted_trajectory_draws()  # (sample, run, step)
    q = (1 - HDI_PROB) / 2
    lo, hi = np.nanquantile(draws.values, [q, 1 - q], axis=0)
    mean = np.nanmean(draws.values, axis=0)
    run_ids = [str(r) for r in ds["run"].values][:MAX_RUN_PANELS]
    labels = _labels(model)
    ncols = min(4, len(run_ids))
    nrows = int(np.ceil(len(run_ids) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.5 * nrows), squeeze=False)
    steps = ds["step"].values
    for i, (ax, run_id) in enumerate(zip(axes.flat, run_ids)):
        y = ds["reward"].sel(run=run_id).values
        ok = np.isfinite(y)  # runs logged every k steps are NaN in between: draw the logged points
        ax.plot(steps[ok], y[ok], color="0.6", lw=0.7)
        # band and mean where the run was logged; past its last step the mean is dashed (the
        # law's extrapolation: a 60-step run beside 140-step ones was drawn as if fitted to 140)
        last = steps[ok].max() if ok.any() else steps.max()
        seen, beyond = steps <= last, steps >= last
        ax.fill_between(steps[seen], lo[i][seen], hi[i][seen], color="C0", alpha=0.3, lw=0)
        ax.plot(steps[seen], mean[i][seen], color="C0", lw=1.2)
        if beyond.sum() > 1:
            ax.plot(steps[beyond], mean[i][beyond], color="C0", lw=0.9, ls="--")
        # a run id is often longer than its panel is wide: wrapped, or it runs into its neighbours
        ax.set_title(plot_text(textwrap.fill(labels[i], TITLE_WIDTH)), fontsize=7)
        ax.set_xlabel("optimizer step", fontsize=7)
        ax.set_ylabel("reward", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(run_ids):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def whole_ess(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its effective sample sizes (``ess_*`` columns) in whole draws, as the
    convergence summary gives them ("bulk ESS >= 767"): "766.7" beside it, or "3.205" for a fit
    that did not converge, is a precision the estimate does not have."""
    ess = [c for c in table.columns if str(c).startswith("ess")]
    if not ess:
        return table
    return table.assign(**{c: pd.to_numeric(table[c], errors="coerce").round() for c in ess})


def convergence_section(model: Any) -> Section:
    import arviz as az
    import matplotlib.pyplot as plt

    from bayes_grpo.model.convergence import RHAT_MAX

    section = Section(key="convergence", title="Convergence", intro=CONVERGENCE_INTRO)
    conv = model.convergence()
    section.check(conv if conv.table is None else dataclasses.replace(conv, table=whole_ess(conv.table)))
    post = model.idata.posterior
    names = [v for v in ("alpha", "noise_d", "plateau", "log_stiffness", "damping_ratio_model", "natural_frequency_model") if v in post]
    worst = _worst_r_hat(post, conv.table) if post.sizes.get("chain", 1) > 1 else None
    if worst is not None:
        # a fit whose R-hat failed on sigma and the per-run coefficients was shown the rank plots
        # of alpha, noise_d, plateau and log_stiffness, which looked uniform under its "flagged"
        section.figure(
            _rank_figure(az.InferenceData(posterior=worst), list(worst.data_vars)),
            f"Rank plots of the variables whose R-hat exceeds {RHAT_MAX} (largest first, each at its element of "
            "the largest R-hat): uniform histograms per chain mean the chains agree.",
        )
    elif names and post.sizes.get("chain", 1) > 1:
        section.figure(_rank_figure(model.idata, names[:4]), "Rank plots: uniform histograms per chain mean the chains agree.")
    else:
        plt.close("all")
    return section


def _worst_r_hat(post: Any, table: Any, k: int = 4) -> Any | None:
    """The ``k`` variables of the convergence table whose R-hat exceeds ``RHAT_MAX``, largest
    first, each at its element of the largest R-hat (a per-run variable of 24 runs is one
    panel, not 24), as one dataset of ``(chain, draw)`` variables named ``"name[coords]"``; None
    when no R-hat failed."""
    import arviz as az

    from bayes_grpo.model.convergence import RHAT_MAX

    if table is None or "r_hat" not in getattr(table, "columns", ()):
        return None
    bad = table["r_hat"][table["r_hat"] > RHAT_MAX].sort_values(ascending=False)
    out = {}
    for name in [str(v) for v in bad.index if v in post][:k]:
        with np.errstate(divide="ignore", invalid="ignore"):
            rhat = az.rhat(post[[name]])[name]
        values = np.where(np.isfinite(rhat.values), rhat.values, -np.inf)
        at = dict(zip(rhat.dims, np.unravel_index(int(np.argmax(values)), values.shape))) if rhat.ndim else {}
        element = post[name].isel(at)
        # a run id of 100 characters in a panel's title runs into its neighbours: cut as elsewhere
        label = ", ".join(str(element[d].values) for d in at if d in element.coords)
        label = short_labels([label], LABEL_WIDTH)[0] if label else ""
        out[f"{name}[{label}]" if label else name] = element.drop_vars([d for d in at if d in element.coords])
    return xr.Dataset(out) if out else None


def _rank_figure(idata: Any, names: list[str]):
    """ArviZ rank plots of ``names``, laid out so that the two-line titles of a variable per
    model ("plateau" / the LLM's name) do not run into the x labels of the row above."""
    import arviz as az

    axes = az.plot_rank(_drawn_model_names(idata.posterior), var_names=names)
    fig = np.ravel(axes)[0].figure
    fig.tight_layout()
    return fig


def _drawn_model_names(post: Any) -> Any:
    """``post`` with its LLM names as the figures draw them (ArviZ titles and labels plots by them)."""
    if "model" not in post.coords:
        return post
    return post.assign_coords(model=[plot_text(m) for m in post["model"].values])


def _forest_figure(post: Any, names: list[str], *, width: float, labels: dict[str, str] | None = None):
    """ArviZ forest plots of ``names``, one panel each on its own x axis.

    The coefficients differ by orders of magnitude (K_eff ~1e-4, C_eff ~0.1, zeta ~5; D ~1e-3
    beside alpha ~1): on one shared axis the small ones were a column of dots at 0."""
    import arviz as az
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    rows = [int(np.prod([n for d, n in post[v].sizes.items() if d not in ("chain", "draw")])) for v in names]
    fig, axes = plt.subplots(len(names), 1, figsize=(width, sum(0.25 * r + 0.9 for r in rows)), height_ratios=[r + 3 for r in rows], squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        az.plot_forest(post, var_names=[name], combined=True, hdi_prob=HDI_PROB, ax=np.array([ax]), textsize=FOREST_TEXT_SIZE)
        ax.set_title("")  # ArviZ's "90.0% HDI" over every panel: the caption says it once
        ax.set_xlabel((labels or {}).get(name, name))
        only = _one_row_label(post[name])
        if only is not None:
            # ArviZ squeezes a dimension of length 1 away, and its label with it: the forest plot
            # of a one-run fit read "M_eff", of one LLM "noise_d", naming neither (the callers'
            # coordinates are drawn as written already: short_labels, _drawn_model_names)
            ax.set_yticks(ax.get_yticks(), [f"{name}[{only}]"])
        ax.locator_params(axis="x", nbins=6)
        formatter = ax.xaxis.get_major_formatter()
        if isinstance(formatter, ScalarFormatter):
            # a posterior narrow beside its size (M_eff 0.951743 +- 1e-5) got ticks "2 3 4 5 6"
            # and an offset "1e-5+9.517e-1" in the corner: the ticks are the values themselves
            formatter.set_useOffset(False)
    fig.tight_layout()
    for ax in axes[:, 0]:
        # long run labels leave the panels a narrow strip, where six ticks of 0.95165 ran into
        # each other: as many ticks as the strip has room for
        inches = ax.get_position().width * fig.get_figwidth()
        if inches < FOREST_INCHES_PER_TICK * 6:
            ax.locator_params(axis="x", nbins=max(2, int(inches / FOREST_INCHES_PER_TICK)))
    return fig


def _one_row_label(values: Any) -> str | None:
    """The coordinates of the one element of ``values`` beyond ``(chain, draw)`` (its run, its
    LLM), as ArviZ labels a row; None when it has no such dimension or more than one element."""
    dims = [d for d in values.dims if d not in ("chain", "draw")]
    if not dims or any(values.sizes[d] != 1 for d in dims):
        return None
    return ", ".join(str(values[d].values[0]) if d in values.coords else "0" for d in dims)


def posterior_section(model: Any) -> Section:
    import arviz as az

    from bayes_grpo.model.core import size_exponent_summary

    section = Section(key="posteriors", title="Posteriors of the oscillator coefficients", intro=POSTERIOR_INTRO)
    post = model.idata.posterior
    labels = short_labels(_labels(model), 2 * LABEL_WIDTH)  # a long run id squeezes the plot to a strip
    coef = [v for v in ("M_eff", "C_eff", "K_eff", "zeta") if v in post]
    relabelled = post[coef].assign_coords(run=labels)
    units = model.coefficient_units() if hasattr(model, "coefficient_units") else {}
    axis = {v: f"{v} ({units[v]})" for v in coef if v in units}  # M_eff ~0.95, K_eff ~1e-4: in what?
    section.figure(
        _forest_figure(relabelled, coef, width=11, labels=axis),
        f"Forest plot ({HDI_PROB:.0%} HDI) of the coefficients per run, one panel each"
        + (" (time in optimizer steps)." if units else "."),
    )
    if "noise_d" in post:
        noise = [v for v in ("noise_d", "alpha") if v in post]
        section.figure(
            _forest_figure(_drawn_model_names(post[noise]), noise, width=7, labels={"noise_d": f"noise_d ({units['D']})"} if "D" in units else None),
            f"Noise temperature D per model (sigma^2 = D / G^alpha) and the exponent alpha (theory: 1), {HDI_PROB:.0%} HDI"
            + (f"; D in {units['D']}." if "D" in units else "."),
        )
    # unrounded: the table prints 4 significant digits (ArviZ rounds to 3 decimals: D ~2e-3 had sd 0, R-hat 2 decimals)
    scaling = size_exponent_summary(model) if "size_exponent" in post else None
    if scaling is not None:  # what `fit` prints of a fit that regresses log K on log model size
        section.text(
            f"Curvature scaling with model size (log K regressed on log model_size over the LLMs {scaling['llms']}): "
            f"size_exponent {scaling['median']:.3g} [{scaling['lo']:.3g}, {scaling['hi']:.3g}] "
            f"(median and central {scaling['prob']:.0%} interval)."
        )
    names = [v for v in ("alpha", "noise_d", "plateau", "size_exponent") if v in post]
    summary = az.summary(model.idata, var_names=names, hdi_prob=HDI_PROB, round_to="none")
    section.table(whole_ess(summary))
    return section
