"""Forecast evaluation: forecast each run from a prefix, score the rest against baselines.

For every run of a run set and every prefix fraction (20/30/50% of the run's steps), the
oscillator forecast (:func:`bayes_grpo.predict.forecast.forecast_run`) is made from the
prefix only, and so are the two least-squares baselines fitted to the same prefix (the
single exponential, i.e. the overdamped limit, and the logistic law;
:mod:`bayes_grpo.dynamics.lsq`). On the remaining steps we record

* ``coverage_obs``: fraction of observed rewards inside the forecast's 90% band of the
  observed reward (noise included), the calibration target being 0.9;
* ``coverage_true_mean``: where the true mean trajectory is known (simulations, the
  bandit's expected reward), the fraction of it inside the 90% band of the *mean*;
* ``rmse_oscillator``, ``rmse_single_exp``, ``rmse_logistic``: RMSE of each law's point
  forecast (posterior mean / least-squares curve) against the observed rewards, and
  ``*_true`` against the true mean where known (noise-free, so more discriminating);
* ``rmse_ratio_single_exp`` = oscillator / single-exponential RMSE (< 0.8 is the goal);
* ``rmse_truth_obs`` (where the truth is known): RMSE of the true mean itself against the
  observed rewards, the noise floor of any point forecast; ``oracle_ratio_single_exp`` =
  ``rmse_truth_obs / rmse_single_exp`` is the smallest ratio a forecast that knew the true
  mean would score on the observed rewards (when the baseline is already within the noise,
  0.8 on observed rewards is out of reach by construction, and the ``*_true`` ratios are
  the ones that measure the forecast of the trajectory).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo._arguments import checked_probability, checked_seed
from bayes_grpo.checks.base import counted
from bayes_grpo.constants import HDI_PROB, RUN_DIM, STEP_DIM
from bayes_grpo.predict.calibration import (
    MIN_PREFIX_STEPS,
    PriorFor,
    backtest_required_scales,
    backtest_seed,
    calibrate_for_run,
    prefix_length,
    run_series,
)
from bayes_grpo.predict.forecast import (
    ForecastError,
    GaussianPrior,
    MixturePrior,
    calibrated_band_scale,
    coverage,
    forecast_band,
    forecast_run,
    required_band_scale,
)
from bayes_grpo.runset import REWARD_VAR

#: Prefix fractions of each run used for forecasting.
DEFAULT_FRACTIONS: tuple[float, ...] = (0.2, 0.3, 0.5)


def rmse(y: np.ndarray, yhat: np.ndarray) -> float:
    """Root-mean-square error over finite pairs (NaN when none)."""
    y = np.asarray(y, dtype=float)
    yhat = np.asarray(yhat, dtype=float)
    ok = np.isfinite(y) & np.isfinite(yhat)
    return float(np.sqrt(np.mean((y[ok] - yhat[ok]) ** 2))) if ok.any() else float("nan")


def baseline_forecast(
    kind: str, t_prefix: np.ndarray, y_prefix: np.ndarray, t_future: np.ndarray
) -> np.ndarray:
    """Least-squares baseline fitted on the prefix, evaluated at ``t_future``.

    ``kind`` is ``"single_exp"`` or ``"logistic"``; a failed fit gives NaN (counted as a
    failure of the baseline, not dropped silently: the evaluation table keeps the NaN).
    """
    from bayes_grpo.dynamics import lsq

    fitter = {"single_exp": lsq.fit_single_exponential, "logistic": lsq.fit_logistic}[kind]
    try:
        res = fitter(np.asarray(t_prefix, dtype=float), np.asarray(y_prefix, dtype=float))
    except (RuntimeError, ValueError):
        return np.full(np.shape(t_future), np.nan)
    return res.predict(np.asarray(t_future, dtype=float))


def evaluate_run(
    t: np.ndarray,
    y: np.ndarray,
    *,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    prior: GaussianPrior | MixturePrior | None = None,
    true_mean: np.ndarray | None = None,
    hdi_prob: float = HDI_PROB,
    seed: int = 0,
    n_draws: int = 1000,
    likelihood: str = "state_space",
    reward_bounds: tuple[float, float] | None = None,
) -> list[dict[str, object]]:
    """Score forecasts of one run ``(t, y)`` from each prefix fraction (rows of the table).

    ``true_mean`` (same length as ``t``) enables the ``*_true`` columns; ``reward_bounds``
    is passed to :func:`bayes_grpo.predict.forecast.forecast_run`.
    """
    fractions = list(fractions)
    for frac in fractions:  # 1.5 or 0 gave every row "run too short", not a word of the fraction
        checked_probability(frac, "fractions")
    # 1.5 was refused by the forecast naming its hdi_probs, or not at all where every prefix was
    # too short to forecast
    checked_probability(hdi_prob, "hdi_prob")
    t = np.asarray(t, dtype=float)
    y = np.asarray(y, dtype=float)
    rows = []
    for frac in fractions:
        n = prefix_length(t, fraction=frac)
        row: dict[str, object] = {
            "fraction": float(frac),
            "n_prefix": n,
            "n_future": int(t.size - n),
        }
        if n < MIN_PREFIX_STEPS or t.size - n < 1:
            row["error"] = f"run too short: {counted(t.size, 'step')}"
            rows.append(row)
            continue
        row["upto_step"] = float(t[n - 1])
        tp, yp, tf, yf = t[:n], y[:n], t[n:], y[n:]
        start = time.perf_counter()
        try:
            ds = forecast_run(
                tp,
                yp,
                tf,
                prior=prior,
                hdi_probs=(hdi_prob,),
                rng=seed,
                n_draws=n_draws,
                likelihood=likelihood,
                reward_bounds=reward_bounds,
            )
        except ForecastError as exc:
            row["error"] = str(exc)
            rows.append(row)
            continue
        row["seconds"] = time.perf_counter() - start
        lo, hi = forecast_band(ds, tf, kind="obs", hdi_prob=hdi_prob)
        point = ds["point_forecast"].values
        row["coverage_obs"] = coverage(yf, lo, hi)
        row["_required_scale"] = required_band_scale(yf, lo, hi)
        row["pareto_k"] = float(ds.attrs["pareto_k"])
        preds = {
            "oscillator": point,
            "single_exp": baseline_forecast("single_exp", tp, yp, tf),
            "logistic": baseline_forecast("logistic", tp, yp, tf),
        }
        for name, pred in preds.items():
            row[f"rmse_{name}"] = rmse(yf, pred)
        if true_mean is not None:
            truth = np.asarray(true_mean, dtype=float)[n:]
            mlo, mhi = forecast_band(ds, tf, kind="mean", hdi_prob=hdi_prob)
            row["coverage_true_mean"] = coverage(truth, mlo, mhi)
            for name, pred in preds.items():
                row[f"rmse_{name}_true"] = rmse(truth, pred)
            row["rmse_truth_obs"] = rmse(yf, truth)
            row["oracle_ratio_single_exp"] = (
                row["rmse_truth_obs"] / row["rmse_single_exp"]
                if row["rmse_single_exp"]
                else float("nan")
            )
            row["rmse_ratio_true_single_exp"] = (
                row["rmse_oscillator_true"] / row["rmse_single_exp_true"]
                if row["rmse_single_exp_true"]
                else float("nan")
            )
        row["rmse_ratio_single_exp"] = (
            row["rmse_oscillator"] / row["rmse_single_exp"]
            if row["rmse_single_exp"]
            else float("nan")
        )
        row["rmse_ratio_logistic"] = (
            row["rmse_oscillator"] / row["rmse_logistic"] if row["rmse_logistic"] else float("nan")
        )
        row["stop_step"] = float(ds.attrs["stop_step"])
        rows.append(row)
    return rows


def evaluate_forecasts(
    runset: xr.Dataset,
    *,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    prior_for: PriorFor | None = None,
    true_mean: xr.DataArray | None = None,
    hdi_prob: float = HDI_PROB,
    seed: int = 0,
    n_draws: int = 1000,
    likelihood: str = "state_space",
    runs: Sequence[str] | None = None,
    reward_bounds: tuple[float, float] | None = None,
    calibrate: bool = False,
    calibration_scheme: str = "split",
) -> pd.DataFrame:
    """Evaluate prefix forecasts of every run of a run set.

    Parameters
    ----------
    runset
        Run set (dims ``run``, ``step``).
    fractions
        Prefix fractions of each run's observed steps.
    prior_for
        ``(run_id, runset) -> GaussianPrior | None``: the prior for a run, built from the
        *other* runs (e.g. leave-one-out population or a posterior fitted on earlier runs);
        None uses :func:`bayes_grpo.predict.forecast.default_prior`.
    true_mean
        Optional ``(run, step)`` true mean trajectories (simulations).
    runs
        Subset of run ids (default all).
    reward_bounds
        ``(lo, hi)`` of a bounded reward (noise shape of the forecast), or None.
    calibrate
        Also score bands calibrated on other runs (columns ``band_scale``,
        ``coverage_obs_calibrated``), by a split that never lets a run's own steps reach
        its calibration: the runs are split in two halves (alternating); each run of one
        half is backtested (forecast from the same prefix fraction with a prior from the
        *other runs of its own half*), and the runs of the other half get the band scale
        :func:`bayes_grpo.predict.forecast.calibrated_band_scale` of those backtests.
    seed
        Seed of every run's forecast (what ``bayes-grpo forecast --seed`` passes, so a
        row does not depend on the run's place in the run set or on ``runs``); the
        calibration backtests use :func:`bayes_grpo.predict.calibration.backtest_seed`.
    calibration_scheme
        ``"split"`` (above; two backtests per run and prefix, priors from half the runs) or
        ``"leave_one_out"``: exactly what ``bayes-grpo forecast --calibrate`` does for each
        run (:func:`leave_one_out_calibration`): every *other* run is backtested with a prior
        from the runs other than itself and the evaluated run, so the backtests' priors have
        the evaluated forecast's size; ``n - 1`` backtests per run and prefix (``n^2`` in all).

    Returns
    -------
    DataFrame, one row per (run, fraction); see the module docstring for the columns.
    """
    checked_seed(seed)  # naming seed (forecast_run names it rng), before any calibration
    for frac in fractions:  # before the calibration's backtests, as evaluate_run checks them
        checked_probability(frac, "fractions")
    checked_probability(hdi_prob, "hdi_prob")  # not the forecast's "hdi_probs must be ..."
    rows = []
    run_ids = list(runs or [str(r) for r in runset[RUN_DIM].values])
    scales: dict[tuple[str, float], float] = {}
    if calibrate:
        if calibration_scheme not in ("split", "leave_one_out"):
            raise ValueError(
                f"calibration_scheme must be 'split' or 'leave_one_out', not {calibration_scheme!r}"
            )
        scheme = _split_calibration if calibration_scheme == "split" else leave_one_out_calibration
        scales = scheme(
            runset,
            run_ids,
            fractions=fractions,
            prior_for=prior_for,
            hdi_prob=hdi_prob,
            seed=seed,
            n_draws=n_draws,
            likelihood=likelihood,
            reward_bounds=reward_bounds,
        )
    for run_id in run_ids:
        t, y = run_series(runset, run_id, REWARD_VAR)
        truth = None
        if true_mean is not None:
            tm = true_mean.sel({RUN_DIM: run_id}).reindex({STEP_DIM: t}).values
            truth = np.asarray(tm, dtype=float)
        prior = prior_for(run_id, runset) if prior_for is not None else None
        for row in evaluate_run(
            t,
            y,
            fractions=fractions,
            prior=prior,
            true_mean=truth,
            hdi_prob=hdi_prob,
            seed=seed,
            n_draws=n_draws,
            likelihood=likelihood,
            reward_bounds=reward_bounds,
        ):
            required = row.pop("_required_scale", None)
            key = (run_id, float(row["fraction"]))
            if calibrate and key in scales and required is not None:
                kappa = scales[key]
                row["band_scale"] = kappa
                row["coverage_obs_calibrated"] = float(
                    np.mean(required[~np.isnan(required)] <= kappa)
                )
            row = {"run": run_id, "prior": prior.source if prior is not None else "default", **row}
            rows.append(row)
    return pd.DataFrame(rows)


def _split_calibration(
    runset: xr.Dataset,
    run_ids: Sequence[str],
    *,
    fractions: Sequence[float],
    prior_for: PriorFor | None,
    hdi_prob: float,
    seed: int,
    n_draws: int,
    likelihood: str,
    reward_bounds: tuple[float, float] | None,
) -> dict[tuple[str, float], float]:
    """Band scale per (run, fraction) from backtests of the other half of the runs.

    The backtests and the band scale are those of ``bayes-grpo forecast --calibrate``
    (:mod:`bayes_grpo.predict.calibration`); only the choice of calibration runs differs.
    """
    all_ids = [str(r) for r in runset[RUN_DIM].values]
    halves = [all_ids[0::2], all_ids[1::2]]
    required: list[dict[float, list[np.ndarray]]] = []
    for half in halves:
        sub = runset.sel({RUN_DIM: half})
        seeds = [backtest_seed(seed, run_id) for run_id in half]
        per_frac: dict[float, list[np.ndarray]] = {}
        for f in fractions:
            backtests = backtest_required_scales(
                sub,
                half,
                prior_for=prior_for,
                fraction=float(f),
                hdi_probs=(hdi_prob,),
                seeds=seeds,
                n_draws=n_draws,
                likelihood=likelihood,
                reward_bounds=reward_bounds,
            )
            per_frac[float(f)] = [r[float(hdi_prob)] for r in backtests.values()]
        required.append(per_frac)
    scales: dict[tuple[str, float], float] = {}
    for h, half in enumerate(halves):
        other = required[1 - h]
        for f in fractions:
            try:
                kappa = calibrated_band_scale(other[float(f)], prob=hdi_prob)
            except ForecastError:
                continue
            for run_id in half:
                if run_id in run_ids:
                    scales[(run_id, float(f))] = kappa
    return scales


def leave_one_out_calibration(
    runset: xr.Dataset,
    run_ids: Sequence[str],
    *,
    fractions: Sequence[float],
    prior_for: PriorFor | None,
    hdi_prob: float,
    seed: int,
    n_draws: int,
    likelihood: str,
    reward_bounds: tuple[float, float] | None,
) -> dict[tuple[str, float], float]:
    """Band scale per (run, fraction), each from backtests of all the *other* runs.

    For run ``r`` the run set without ``r`` is backtested at the same prefix fraction, each
    backtested run with ``prior_for(other, runset_without_r)`` - the calibration of
    :func:`bayes_grpo.predict.calibration.calibrate_for_run` (``bayes-grpo forecast
    --calibrate``), called with a prefix fraction in place of a step. ``r``'s steps reach
    neither its backtests nor their priors.
    """
    scales: dict[tuple[str, float], float] = {}
    for run_id in run_ids:
        for f in fractions:
            try:
                cal = calibrate_for_run(
                    runset,
                    run_id,
                    fraction=float(f),
                    prior_for=prior_for,
                    hdi_probs=(hdi_prob,),
                    seed=seed,
                    n_draws=n_draws,
                    likelihood=likelihood,
                    reward_bounds=reward_bounds,
                )
            except ForecastError:
                continue
            scales[(run_id, float(f))] = cal.scales[float(hdi_prob)]
    return scales


def summarise_evaluation(table: pd.DataFrame) -> pd.DataFrame:
    """Per prefix fraction: coverage, median and pooled RMSE ratios, share of runs won.

    ``median_ratio_vs_single_exp`` is the median over runs of the per-run ratio (the typical
    run); ``pooled_ratio_vs_single_exp`` the ratio of the mean RMSEs (dominated by the runs
    with large errors). ``*_true`` versions score against the true mean where it is known;
    ``median_oracle_ratio_single_exp`` is the median ratio a forecast equal to the true mean
    would get on the observed rewards (the noise floor).
    """
    out = []
    for frac, grp in table.groupby("fraction"):
        row: dict[str, object] = {
            "fraction": frac,
            "n_runs": int(grp["rmse_oscillator"].notna().sum()) if "rmse_oscillator" in grp else 0,
        }
        for col in ("coverage_obs", "coverage_obs_calibrated", "coverage_true_mean", "band_scale"):
            if col in grp:
                row[f"mean_{col}"] = float(grp[col].mean())
                row[f"median_{col}"] = float(grp[col].median())
        for col in (
            "rmse_oscillator",
            "rmse_single_exp",
            "rmse_logistic",
            "rmse_oscillator_true",
            "rmse_single_exp_true",
            "rmse_logistic_true",
        ):
            if col in grp:
                row[f"median_{col}"] = float(grp[col].median())
        if "rmse_ratio_single_exp" in grp:
            ratio = grp["rmse_ratio_single_exp"]
            row["median_ratio_vs_single_exp"] = float(ratio.median())
            row["share_beats_single_exp"] = float((ratio < 1).mean())
            # pooled: total RMSE reduction across runs (robust to single-run blow-ups of the baseline)
            row["pooled_ratio_vs_single_exp"] = float(
                grp["rmse_oscillator"].mean() / grp["rmse_single_exp"].mean()
            )
        if "rmse_ratio_logistic" in grp:
            row["median_ratio_vs_logistic"] = float(grp["rmse_ratio_logistic"].median())
        for col in ("rmse_ratio_true_single_exp", "oracle_ratio_single_exp"):
            if col in grp:
                row[f"median_{col}"] = float(grp[col].median())
        if "rmse_oscillator_true" in grp and "rmse_single_exp_true" in grp:
            row["pooled_ratio_true_vs_single_exp"] = float(
                grp["rmse_oscillator_true"].mean() / grp["rmse_single_exp_true"].mean()
            )
        out.append(row)
    return pd.DataFrame(out)


__all__ = [
    "DEFAULT_FRACTIONS",
    "baseline_forecast",
    "evaluate_forecasts",
    "evaluate_run",
    "leave_one_out_calibration",
    "rmse",
    "summarise_evaluation",
]
