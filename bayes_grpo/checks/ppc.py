"""Posterior predictive checks per group size G.

For every run of the fitted run set, the posterior coefficient draws at that run's
setting (``fitted.coefficient_draws``: plateau, initial reward, ``M_eff``, ``C_eff``,
``K_eff``, ``sigma``) are pushed through the closed-form mean trajectory, and
``Normal(0, sigma)`` observation noise is added, giving the posterior predictive of the
logged reward. Three checks, each a :class:`CheckResult` with a table per (model, G):

* :func:`trajectory_band_check`: the fraction of logged rewards inside the ``HDI_PROB``
  predictive band (should be close to ``HDI_PROB``; passes when it is at least
  ``HDI_PROB - 0.15``), with one figure per (model, G) of bands and data;
* :func:`residual_autocorrelation_check`: the autocorrelation of the residuals from the
  posterior-median mean trajectory at lags 1..5. Under the independent-residual
  likelihood it should vanish; under the SDE, the stationary fluctuations are
  correlated over the relaxation time ``C / K_eff``, so a large lag-1 autocorrelation
  says "use the state-space likelihood" rather than "the law fails";
* the stationary variance at the plateau against ``D / (2 G C K_eff)`` plus the measurement variance
  (:func:`bayes_grpo.checks.invariance.stationary_variance_check`).

The coefficient draws are those of a new run of the LLM at the run's setting
(``coefficient_draws`` with its default ``run_offset=True`` and ``random_seed=0``), not the
run's own fitted ``initial_reward``: the LLM's ``plateau``; as initial reward, the LLM's
``initial_reward_model`` (the mean of its fitted runs' ``R0``) plus a new run's offset drawn from
``N(0, initial_reward_run_sd^2 (1 + 1/n))`` (``n`` the LLM's fitted runs; one draw per posterior
draw, the same for every run checked); under ``invariance="by_group"`` the (LLM, G) group's
offsets; in the phenomenological form the LLM's ``w0, zeta`` whatever the run's learning
rate. So the bands include the run-to-run spread of the start, and a run that starts further
from its LLM's average than that spread shows up as low coverage at early steps
(``coverage_first_fifth``). The residual autocorrelation is not: it is taken about each fitted
run's own posterior-median trajectory (``fitted_trajectory_draws``, with the run's fitted
``R0``), as the invariance test's :func:`bayes_grpo.checks.invariance.residual_lag1_by_llm`;
about the median of the new-run trajectories only for a run the fit did not see (or a fit
without per-run draws). About the LLM's curve, a run starting far from its LLM's average adds
a decaying, positively correlated stretch to its early residuals: white runs whose starts
spread by their LLM's run-to-run sd were flagged "correlated in time".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo._arguments import checked_seed
from bayes_grpo.checks.base import CheckResult, plot_text, share_percent, verdict_percent
from bayes_grpo.constants import HDI_PROB, RUN_DIM, STEP_DIM
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.metrics import autocorrelation, autocorrelation_sample_size
from bayes_grpo.runset.bounds import rewards_outside
from bayes_grpo.runset.schema import group_size_text, readable_group_size, readable_group_sizes

#: Largest number of posterior draws used per run (thinned evenly).
MAX_DRAWS: int = 400
#: Coverage below ``HDI_PROB - COVERAGE_SLACK`` fails the band check.
COVERAGE_SLACK: float = 0.15
#: Lags of the residual autocorrelation table.
ACF_LAGS: tuple[int, ...] = (1, 2, 3, 4, 5)


def run_hyperparameters(runset: xr.Dataset, run: Any) -> dict[str, Any]:
    """The keyword arguments of ``coefficient_draws`` for one run of ``runset``."""
    row = runset.sel({RUN_DIM: run})
    size = float(row["model_size"]) if "model_size" in row.coords else float("nan")
    return {
        "learning_rate": float(row["learning_rate"]),
        "momentum": float(row["momentum"]),
        "momentum_convention": str(row["momentum_convention"].values),
        "k_ref": float(row["k_ref"]),
        "group_size": float(row["group_size"]),
        "model": str(row["model"].values) or None,
        "model_size": size if np.isfinite(size) else None,
    }


def _flat(da: Any, n: int | None = None) -> np.ndarray:
    arr = np.asarray(getattr(da, "values", da), dtype=float).ravel()
    if n is not None and arr.size > n:
        arr = arr[np.linspace(0, arr.size - 1, n).astype(int)]
    return arr


def run_predictive(
    fitted: Any,
    runset: xr.Dataset,
    run: Any,
    *,
    rng: np.random.Generator,
    max_draws: int = MAX_DRAWS,
    group_size: float | None = None,
) -> dict[str, Any]:
    """Posterior predictive of one run's logged reward.

    Parameters
    ----------
    fitted
        A fitted model with ``coefficient_draws``.
    runset
        Run set holding ``run`` (its rewards and hyperparameters).
    run
        Run id.
    rng
        Generator for the observation noise.
    max_draws
        Posterior draws used (thinned evenly).
    group_size
        Override the run's ``G`` (to predict it at another group size).

    Returns
    -------
    dict with ``t`` (steps with a finite reward, shape ``(T,)``), ``y`` (rewards,
    ``(T,)``), ``mean`` (mean-trajectory draws, ``(n, T)``), ``obs`` (predictive draws
    of the logged reward, ``(n, T)``), ``coef`` (the coefficient draws dataset) and
    ``hyper`` (the settings used). ``obs`` is the fit's own observation model, the mean plus
    Gaussian noise: a fit with reward bounds puts its plateau and initial reward in them but
    its likelihood (``model.builder``) does not censor at them, so ``obs`` is not clipped
    there (``predict``'s and ``forecast``'s bands are) and can pass them.
    """
    hyper = run_hyperparameters(runset, run)
    # a setting the run does not log takes the fit's default (fit --default k_ref=1): the value
    # the fit gave such runs; NaN made every mean-trajectory draw NaN (empty bands)
    defaults = (getattr(fitted, "model_config", None) or {}).get("hyperparameter_defaults") or {}
    for name, value in defaults.items():
        if name not in hyper or value is None:
            continue
        if name == "momentum_convention":
            if hyper[name] in ("", "nan", "None"):
                hyper[name] = str(value)
        elif not np.isfinite(hyper[name]):
            hyper[name] = float(value)
    if group_size is not None:
        hyper["group_size"] = float(group_size)
    from bayes_grpo.model.prepare import UNKNOWN_MODEL

    fitted_llms = [str(m) for m in getattr(getattr(fitted, "data", None), "models", None) or []]
    if hyper["model"] is None and UNKNOWN_MODEL in fitted_llms:
        # a run without an LLM name is the fit's LLM UNKNOWN_MODEL (model.prepare.run_llm_names):
        # model=None asked a fit of several LLMs for a new one, whose plateau is NaN
        hyper["model"] = UNKNOWN_MODEL
    y_all = np.asarray(runset["reward"].sel({RUN_DIM: run}).values, dtype=float)
    steps = np.asarray(runset[STEP_DIM].values, dtype=float)
    ok = np.isfinite(y_all)
    t, y = steps[ok], y_all[ok]
    try:
        coef = fitted.coefficient_draws(**hyper)
    except ValueError as exc:
        # "the mechanistic model needs a finite learning_rate ...; got nan" named no run: which
        # of the run set's runs lacks it?
        raise ValueError(f"run {run}: {exc}") from exc
    pick = {
        k: _flat(coef[k], max_draws)[:, None]
        for k in ("M_eff", "C_eff", "K_eff", "plateau", "initial_reward")
    }
    sigma = _flat(coef["sigma"], max_draws)[:, None]
    if all(np.isnan(v).all() for v in (pick["plateau"], pick["initial_reward"], sigma)):
        # a new LLM's reward-valued draws are NaN (coefficient_draws: each LLM has its own
        # scale): its bands were empty, a coverage of 0 ("fails") or, with reward bounds, a
        # ZeroDivisionError (`ppc fit.nc --runs` of runs of another LLM)
        known = f" ({', '.join(repr(m) for m in fitted_llms)})" if fitted_llms else ""
        raise ValueError(
            f"run {run}: LLM {hyper['model']!r} is not one of the fit's{known}: a new LLM has no "
            "plateau, initial reward or noise to predict its rewards from (each LLM has its own "
            "scale), so its runs cannot be checked against this fit"
        )
    law = ("M_eff", "C_eff", "K_eff", "plateau", "initial_reward")
    if hasattr(fitted, "run_law"):
        # the fit's own law: on the run's logged learning-rate schedule when the fit follows it
        mean = fitted.run_law(runset, run, t, *(pick[k][:, 0] for k in law), k_ref=hyper["k_ref"])
    else:
        mean = reward_trajectory(t[None, :], *(pick[k] for k in law))
    mean = np.asarray(mean, dtype=float)
    obs = mean + rng.normal(size=mean.shape) * sigma
    return {"t": t, "y": y, "mean": mean, "obs": obs, "coef": coef, "hyper": hyper}


def draws_outside_bounds(pr: dict[str, Any], bounds: tuple[float, float] | None) -> tuple[int, int]:
    """``(outside, all)``: how many of a :func:`run_predictive` result's predictive draws
    ``obs`` lie outside a bounded fit's ``bounds`` (:func:`~bayes_grpo.runset.bounds.rewards_outside`;
    none without bounds), and how many there are."""
    obs = np.asarray(pr["obs"], dtype=float)
    return int(rewards_outside(obs, bounds).sum()), int(np.isfinite(obs).sum())


def outside_bounds_note(counts: dict[str, tuple[int, int]], bounds: tuple[float, float] | None) -> str:
    """The sentence a bounded fit's band check adds: the share of its predictive draws outside
    the bounds, in all and per group (``{label: (outside, all)}``, :func:`draws_outside_bounds`);
    "" without bounds or draws. The bands are not clipped at the bounds (:func:`run_predictive`),
    and the PPC and leave-one-G-out summaries did not say so (``models/tiny.nc``: bands from
    -0.41 to 1.35 beside a fit bounded to [0, 1])."""
    n_out = sum(out for out, _ in counts.values())
    n_all = sum(n for _, n in counts.values())
    if bounds is None or n_all == 0:
        return ""
    lo, hi = (float(b) for b in bounds)
    groups = ", ".join(f"{label}: {share_percent(out, n)}" for label, (out, n) in counts.items() if n)
    return (
        f" The fit bounds the reward to [{lo:g}, {hi:g}], but its predictive draws (the "
        f"likelihood's, not censored there) are not clipped: {share_percent(n_out, n_all)} of them "
        f"lie outside ({groups})."
    )


def _groups(runset: xr.Dataset, fitted: Any = None) -> dict[tuple[str, int | float], list[Any]]:
    # a run of unknown G is at the fit's default G where it has one (fit --default group_size=8,
    # with which run_predictive draws it): the band and autocorrelation tables said "G=?" while
    # the fit's table and the stationary-variance check said 8 for the same runs
    from bayes_grpo.checks.invariance import with_group_size_default
    from bayes_grpo.model.prepare import run_llm_names

    runset = with_group_size_default(runset, getattr(fitted, "model_config", None))[0]
    # runs without a model name as the fit names them (UNKNOWN_MODEL): keyed "", their rows
    # read "(, G=8)" in the summaries, a blank model in the tables and "model, G=8" as a title
    models = np.asarray(run_llm_names(runset), dtype=str)
    gs = np.asarray(runset["group_size"].values, dtype=float)
    out: dict[tuple[str, int | float], list[Any]] = {}
    for run, m, g in zip(runset[RUN_DIM].values, models, gs):
        # runs of unknown G are one group: keyed by the one object np.nan (a fresh NaN per run
        # made each its own group, a table row "G=nan" per run, their figures under one title)
        out.setdefault((str(m), readable_group_size(g) if np.isfinite(g) else np.nan), []).append(run)
    return out


def _fitted_runset(fitted: Any, runset: xr.Dataset | None) -> xr.Dataset:
    if runset is not None:
        from bayes_grpo.runset import require_runs

        # the checks of no run said "runs too short" and "no run of known G"
        return require_runs(runset, "check")
    from bayes_grpo.checks.stability import fitted_runset

    ds = fitted_runset(fitted)
    if ds is None:
        raise ValueError("the fitted model does not carry its run set; pass runset=...")
    return ds


def _band_legend(ax: Any) -> None:
    """The band figure's legend: a colour per run (its id), and what the band, the line and the
    dots of each colour are (the figure showed them with no key)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    runs, labels = ax.get_legend_handles_labels()
    kinds = [
        Patch(color="0.5", alpha=0.3, lw=0, label=f"{HDI_PROB:.0%} predictive band of the logged reward"),
        Line2D([], [], color="0.5", lw=1, label="posterior median of the mean trajectory"),
        Line2D([], [], color="0.5", ls="", marker=".", ms=4, label="logged reward"),
    ]
    # under the axes, the figure taller by its rows: inside, the entries of six long run ids
    # hid the bands they name
    rows = -(-(len(runs) + len(kinds)) // 2)
    fig = ax.get_figure()
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + 0.2 * rows)
    ax.legend(
        handles=[*runs, *kinds],
        labels=[*labels, *(k.get_label() for k in kinds)],
        fontsize="x-small",
        ncol=2,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
    )


def trajectory_band_check(
    fitted: Any, runset: xr.Dataset | None = None, *, seed: int = 0, max_runs_plotted: int = 6
) -> CheckResult:
    """Coverage of the logged rewards by the ``HDI_PROB`` posterior predictive band, per G.

    Every run is counted; each (model, G) figure draws the bands of its first
    ``max_runs_plotted`` runs with a reward, and its title says "(6 of 12 runs drawn)" when
    it leaves some out."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    ds = _fitted_runset(fitted, runset)
    rng = np.random.default_rng(checked_seed(seed))
    rows, figures = [], {}
    bounds = getattr(fitted, "reward_bounds", None)
    outside: dict[tuple[str, Any], tuple[int, int]] = {}  # (model, G): predictive draws outside bounds, all
    empty: list[str] = []  # runs without a finite reward: nothing to cover, not counted
    q = [(1 - HDI_PROB) / 2, (1 + HDI_PROB) / 2]
    for (model, g), runs in _groups(ds, fitted).items():
        fig, ax = plt.subplots(figsize=(6.5, 3.8), constrained_layout=True)
        inside = total = 0
        early_in = early_n = 0
        drawn = checked = 0
        for run in runs:
            pr = run_predictive(fitted, ds, run, rng=rng)
            if pr["t"].size == 0:
                empty.append(str(run))
                continue
            checked += 1
            n_out, n_all = draws_outside_bounds(pr, bounds)
            prev = outside.get((model, g), (0, 0))
            outside[(model, g)] = (prev[0] + n_out, prev[1] + n_all)
            lo, hi = np.quantile(pr["obs"], q, axis=0)
            hit = (pr["y"] >= lo) & (pr["y"] <= hi)
            inside += int(hit.sum())
            total += hit.size
            n_early = max(1, hit.size // 5)
            early_in += int(hit[:n_early].sum())
            early_n += n_early
            if drawn < max_runs_plotted:  # a run without a reward takes no colour
                color = f"C{drawn % 10}"
                drawn += 1
                ax.fill_between(pr["t"], lo, hi, color=color, alpha=0.15, lw=0)
                ax.plot(pr["t"], np.median(pr["mean"], axis=0), color=color, lw=1, label=plot_text(run))
                ax.plot(pr["t"], pr["y"], ".", ms=2, color=color)
        if drawn:
            _band_legend(ax)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("reward")
        # the figure of a group of more runs than it draws said nothing of the others
        some = f" ({drawn} of {checked} runs drawn)" if drawn < checked else ""
        ax.set_title(plot_text(f"{model}, G={group_size_text(g)}: {HDI_PROB:.0%} predictive bands and data{some}"))
        figures[f"{model} G={group_size_text(g)} bands"] = fig
        if total == 0:  # a group of runs without a finite reward: no row, no failed "nan%"
            plt.close(fig)
            del figures[f"{model} G={group_size_text(g)} bands"]
            continue
        cov = inside / total
        rows.append(
            {
                "model": model,
                "G": g,
                "n_runs": checked,  # the group's runs with a finite reward
                "n_points": total,
                "coverage": cov,
                "coverage_first_fifth": early_in / early_n if early_n else np.nan,
                "ok": bool(np.isfinite(cov) and cov >= HDI_PROB - COVERAGE_SLACK),
            }
            | (
                {"share_outside_bounds": outside[(model, g)][0] / outside[(model, g)][1]}
                if bounds is not None
                else {}
            )
        )
    columns = ["model", "G", "n_runs", "n_points", "coverage", "coverage_first_fifth", "ok"]
    columns += ["share_outside_bounds"] if bounds is not None else []
    table = pd.DataFrame(rows, columns=columns).assign(G=lambda f: readable_group_sizes(f["G"]))
    table = table.set_index(["model", "G"])
    passed = bool(table["ok"].all()) if len(table) else None
    threshold = HDI_PROB - COVERAGE_SLACK
    several = table.index.get_level_values("model").nunique() > 1
    summary = (
        f"{HDI_PROB:.0%} posterior predictive bands cover "
        # with several LLMs each group is named by its LLM too: "80% (G=4), 20% (G=4)" said
        # neither which LLM's runs the bands missed
        + ", ".join(
            f"{verdict_percent(c, threshold)} ({m + ', ' if several else ''}G={group_size_text(g)})"
            for (m, g), c in table["coverage"].items()
        )
        + f" of the logged rewards (required >= {threshold:.0%})."
        + outside_bounds_note(
            {f"{m + ', ' if several else ''}G={group_size_text(g)}": outside[(m, g)] for m, g in outside}, bounds
        )
        + (f" Runs without a finite reward, not checked: {', '.join(empty)}." if empty else "")
    )
    values = {"reward_bounds": [float(b) for b in bounds]} if bounds is not None else {}
    return CheckResult("ppc_trajectory_bands", passed, summary, table=table, figures=figures, values=values)


#: z value of the white-noise band ``z / sqrt(n)`` of a lag-1 autocorrelation from n points.
WHITE_NOISE_Z: float = 1.96


def white_noise_band(n: float) -> float:
    """Half-width ``WHITE_NOISE_Z / sqrt(n)`` of the band a lag-1 autocorrelation of ``n`` white
    residuals stays in (95%): the one band of this check, ``fit``'s warning, the invariance
    test's warning and the forecast's prefix check. ``n`` is
    :func:`bayes_grpo.metrics.autocorrelation_sample_size` (the points of a complete series, the
    lag-1 pairs plus one of one with missing steps), summed over pooled runs."""
    return WHITE_NOISE_Z / np.sqrt(max(n, 1))


def _own_trajectories(fitted: Any) -> xr.DataArray | None:
    """Posterior-median mean trajectory of each fitted run, dims (run, step) (the fit's
    ``fitted_trajectory_draws``), or None for a fit without per-run draws."""
    draws = getattr(fitted, "fitted_trajectory_draws", None)
    if draws is None:
        return None
    try:
        return draws().median("sample")
    except (AttributeError, KeyError, ValueError, RuntimeError):  # not fitted, no per-run variables
        return None


def _residual_centre(own: xr.DataArray | None, run: Any, pr: dict[str, Any]) -> np.ndarray:
    """Where a run's residuals are taken from: its own fitted trajectory at its steps when the
    fit has it (:func:`_own_trajectories`), else the median of its new-run mean draws."""
    if own is not None and run in own[RUN_DIM].values:
        curve = own.sel({RUN_DIM: run})
        steps = np.asarray(curve[STEP_DIM].values, dtype=float)
        if np.isin(pr["t"], steps).all():
            return np.asarray(curve.sel({STEP_DIM: curve[STEP_DIM].values[np.isin(steps, pr["t"])]}).values, dtype=float)
    return np.median(pr["mean"], axis=0)


def residual_autocorrelation_check(
    fitted: Any, runset: xr.Dataset | None = None, *, seed: int = 0
) -> CheckResult:
    """Autocorrelation of residuals from the posterior-median mean trajectory, per G: each
    fitted run's own (its fitted ``R0``; the module docstring says why), a run the fit did not
    see its LLM's at its setting.

    Passes when, in every group, the run-averaged lag-1 autocorrelation lies within
    ``±WHITE_NOISE_Z / sqrt(n_lag1)`` (the white-noise band for the pooled residuals; ``n_lag1``
    the runs' :func:`bayes_grpo.metrics.autocorrelation_sample_size`, their points on complete
    series, fewer where steps are missing: the lag-1 pairs the estimate rests on). The
    summary gives the largest lag-1 value in size with its sign; the state-space likelihood is
    advised only for a positive one (a wander). Not assessable (``passed`` None, table kept)
    for a state-space fit (``fitted.likelihood``), whose likelihood has correlated residuals.
    Runs with a constant reward (:func:`bayes_grpo.model.prepare.constant_reward`, e.g. a run
    solved from step 0) are left out: their residuals are the mean curve's mirror image, as
    correlated as the curve is smooth, with no noise in them to check. When the check fails
    for an LLM with such runs, the summary says they can be the cause: they pull the LLM's
    curve towards their level, away from its other runs.
    """
    from bayes_grpo.model.prepare import constant_reward

    ds = _fitted_runset(fitted, runset)
    rng = np.random.default_rng(checked_seed(seed))
    own = _own_trajectories(fitted)
    rows, constant, short, unpaired = [], [], [], []
    for (model, g), runs in _groups(ds, fitted).items():
        acfs, weights, points = [], [], []
        for run in runs:
            pr = run_predictive(fitted, ds, run, rng=rng)
            if constant_reward(pr["y"]):
                constant.append((str(run), model))
                continue
            if pr["t"].size <= max(ACF_LAGS) + 2:
                # named below: a run left out here was missing from the table without a word
                short.append(str(run))
                continue
            resid = pr["y"] - _residual_centre(own, run, pr)
            acf_run = autocorrelation(resid, ACF_LAGS, steps=pr["t"])
            if not np.isfinite(acf_run[0]):
                # no two of its points one logging interval apart: no lag-1 figure to give
                unpaired.append(str(run))
                continue
            acfs.append(acf_run)
            points.append(resid.size)
            # the lag-1 estimate rests on its pairs, not its points (a run with missing steps
            # has fewer): its white-noise n, also its weight in the average below
            weights.append(autocorrelation_sample_size(resid, steps=pr["t"]))
        if not acfs:
            continue
        n_points = sum(points)
        # a lag at which a run has no pair (its points that far apart all missing) is the
        # average over the runs that have one
        by_lag = np.array(acfs)
        w = np.asarray(weights, dtype=float)[:, None] * np.isfinite(by_lag)
        acf = np.where(
            w.sum(axis=0) > 0, np.sum(np.nan_to_num(by_lag) * w, axis=0) / np.maximum(w.sum(axis=0), 1.0), np.nan
        )
        band = white_noise_band(sum(weights))
        row = {"model": model, "G": g, "n_points": n_points, "n_lag1": sum(weights), "white_noise_band": band}
        row |= {f"acf_lag{lag}": a for lag, a in zip(ACF_LAGS, acf)}
        row["ok"] = bool(abs(acf[0]) <= band)
        rows.append(row)
    left_out = (
        f" Runs {[r for r, _ in constant]} with a constant reward are left out: no residual "
        "noise to check."
        if constant
        else ""
    )
    too_short = (
        f" Runs {short} with {max(ACF_LAGS) + 2} or fewer rewards are left out: too short for "
        f"the autocorrelation up to lag {max(ACF_LAGS)}."
        if short
        else ""
    )
    if unpaired:
        too_short += (
            f" Runs {unpaired} are left out: no two of their logged steps are one logging interval "
            "apart (the autocorrelation pairs no points across a missing step)."
        )
    # iid_residual_check rewrites the summary of a negative autocorrelation: it keeps these
    values = {"left_out": (left_out + too_short).strip()}
    if not rows:
        return CheckResult(
            "ppc_residual_autocorrelation", None, f"Not assessable: {'runs too short' if short or not unpaired else 'no run has neighbouring logged steps'}.{too_short}{left_out}", values=values
        )
    table = pd.DataFrame(rows).assign(G=lambda f: readable_group_sizes(f["G"]))
    table = table.set_index(["model", "G"])
    passed: bool | None = bool(table["ok"].all())
    # the group the summary names: the largest lag-1 in size among the groups above their own
    # white-noise band (a wander, which the advice below is about), else among those outside
    # it, else among all. Its band was the widest of any group's: a failed check read "up to
    # 0.15 (...; white-noise band ±0.36). Residuals are correlated", 0.15 being G=4's (800
    # residuals, band ±0.07) and ±0.36 the band of G=16's 30 residuals
    fails = not passed
    above = table["acf_lag1"] > table["white_noise_band"]
    among = table[above] if above.any() else table[~table["ok"]] if fails else table
    at = among["acf_lag1"].abs().idxmax()
    worst = table.loc[at, "acf_lag1"]  # signed: a negative one is no wander
    several_models = table.index.get_level_values("model").nunique() > 1
    where = (
        f", at {at[0] + ', ' if several_models else ''}G={group_size_text(at[1])}" if len(table) > 1 else ""
    )
    bad = set(table.index[~table["ok"]].get_level_values("model"))
    pulling = [r for r, m in constant if m in bad]
    if pulling:
        # a constant run pulls its LLM's plateau and initial reward towards its level: the
        # other runs' residuals then drift about the misplaced curve, a wander of no SDE
        left_out = (
            f" Runs {pulling} with a constant reward are left out, but they pull their LLM's "
            "curve towards their level, which alone can correlate its other runs' residuals: "
            "leave them out and refit before reading this as a wander."
        )
    wander = bool(above.any())
    if getattr(fitted, "likelihood", None) == "state_space":
        # the SDE's own fluctuations are correlated over C / K_eff: a state-space fit's residuals
        # from its mean trajectory are meant to be; it was failed and told to fit with
        # likelihood='state_space', the likelihood it had
        passed, advice = None, (
            " Not assessable for a state-space fit: its likelihood models the residuals' correlation "
            "(the SDE's stationary fluctuations), so correlated residuals are expected there."
        )
    elif passed:
        advice = ""
    elif wander:
        advice = (
            " Residuals are correlated in time, as the SDE's stationary fluctuations are; "
            "fit with likelihood='state_space' (`bayes-grpo fit --likelihood state_space`) for "
            "honest uncertainties."
        )
    else:
        advice = (
            " Residuals alternate in sign (negative lag-1 autocorrelation): step noise, not a reward "
            "wandering about its curve; the state-space likelihood is no remedy for it."
        )
    summary = (
        f"Residual lag-1 autocorrelation up to {worst:.2f} (the largest in size"
        f"{' beyond its white-noise band' if fails else ''}{where}; white-noise band "
        f"±{table.loc[at, 'white_noise_band']:.2f})." + advice + left_out + too_short
    )
    return CheckResult("ppc_residual_autocorrelation", passed, summary, table=table, values=values)


def iid_residual_check(fitted: Any, runset: xr.Dataset | None = None, *, seed: int = 0) -> CheckResult | None:
    """:func:`residual_autocorrelation_check` for a fit with the i.i.d. likelihood; None otherwise.

    A reward that wanders about its mean curve (the SDE's process noise) leaves residuals
    correlated in time, which the i.i.d. likelihood takes as independent: its intervals and
    bands are then too narrow. Under the state-space likelihood such residuals are the model's
    own, so nothing is checked there. Only positive autocorrelation fails it: a negative one
    (alternating step noise) is no wander. A run the check cannot evaluate (e.g. one lacking the
    hyperparameters the fit's form needs) gives a not-assessable result rather than an error.
    Shown by ``bayes-grpo fit`` and by the report's fit section.
    """
    checked_seed(seed)  # not a "Not assessable" check naming NumPy's error below
    if getattr(fitted, "likelihood", None) != "iid":
        return None
    try:
        res = residual_autocorrelation_check(fitted, runset, seed=seed)
    except (ValueError, KeyError) as exc:
        return CheckResult("ppc_residual_autocorrelation", None, f"Not assessable: {exc}")
    table = res.table
    if res.passed is False and table is not None and (table["acf_lag1"] <= table["white_noise_band"]).all():
        # only negative lag-1 autocorrelation: step-to-step noise that alternates (several
        # public GRPO logs show -0.1 to -0.2), not a wander; the state-space likelihood, whose
        # process noise correlates positively, is no remedy for it
        return CheckResult(
            res.name,
            True,
            f"Residual lag-1 autocorrelation down to {table['acf_lag1'].min():.2f}: negative, "
            "step noise that alternates rather than a reward wandering about its curve."
            # the runs left out of the check were named in res.summary only, and dropped here
            + (" " + res.values["left_out"] if res.values.get("left_out") else ""),
            table=table,
            values=res.values,
        )
    return res


def ppc_checks(
    fitted: Any, runset: xr.Dataset | None = None, *, seed: int = 0
) -> list[CheckResult]:
    """All posterior predictive checks: bands, residual autocorrelation, stationary variance."""
    from bayes_grpo.checks.invariance import stationary_variance_check

    checked_seed(seed)  # before the first check's work
    ds = _fitted_runset(fitted, runset)
    return [
        trajectory_band_check(fitted, ds, seed=seed),
        residual_autocorrelation_check(fitted, ds, seed=seed),
        stationary_variance_check(fitted, ds, seed=seed),
    ]


__all__ = [
    "run_hyperparameters",
    "run_predictive",
    "draws_outside_bounds",
    "outside_bounds_note",
    "autocorrelation",
    "white_noise_band",
    "verdict_percent",
    "trajectory_band_check",
    "residual_autocorrelation_check",
    "iid_residual_check",
    "ppc_checks",
]
