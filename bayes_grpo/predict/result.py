"""Turn a prediction or forecast dataset into a :class:`CheckResult` for reports and the CLI."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo.checks.base import CheckResult
from bayes_grpo.dynamics.trust_region import format_clip_range
from bayes_grpo.predict.discrepancy import SETTING_COORDS
from bayes_grpo.predict.summary import attr_warnings, steps_behind, summary_dict
from bayes_grpo.runset.schema import COUNT_COORDS, readable_group_size


def misfit_text(sd_max: float) -> str:
    """The law-discrepancy term of a band in words (``...(up to X of the rise, 1 sd).``), or, where
    its estimate is 0 (floored: the law's misfit on the training runs is within their noise),
    that it adds nothing ("up to 0 of the rise" read as a misfit measured to be nothing)."""
    if sd_max == 0.0:
        return (
            "; the law's misfit on the training runs is within their noise (discrepancy estimated "
            "at 0): band from parameter uncertainty only."
        )
    return f"; band includes the law's misfit on the training runs (up to {sd_max:.3g} of the rise, 1 sd)."


def prediction_result(
    ds: xr.Dataset,
    *,
    name: str = "prediction",
    title: str | None = None,
    observed: tuple[np.ndarray, np.ndarray] | None = None,
) -> CheckResult:
    """Headline numbers, a milestone table and the band figure of a prediction / forecast.

    ``passed`` is None: a prediction is information, not a verdict.
    """
    from bayes_grpo.predict.predict import plot_prediction

    numbers = summary_dict(ds)

    def milestone_rows(key: str, label: str) -> list[dict[str, object]]:
        settle = key.endswith("time_to_settle")
        return [
            {
                # "90%" of time_to_settle: within 10% of the rise of p* from that step on
                "milestone": (
                    f"within {100 - int(k.rstrip('%'))}% of the rise of p* from then on{label}"
                    if settle
                    else f"{k} of the rise{label}"
                ),
                "median step": v["median_step"],
                "P(reached within horizon)": v["prob_reached_within_horizon"],
            }
            for k, v in numbers.get(key, {}).items()
        ]

    rows = milestone_rows("time_to_fraction", "") + milestone_rows("time_to_settle", "")
    if "policy_time_to_fraction" in numbers:  # the logged reward trails the policy (an observation lag)
        rows = [
            row
            for key, label in (("time_to_fraction", " (logged reward)"), ("policy_time_to_fraction", " (policy)"),
                               ("time_to_settle", " (logged reward)"), ("policy_time_to_settle", " (policy)"))
            for row in milestone_rows(key, label)
        ]  # fmt: skip
    table = pd.DataFrame(rows).set_index("milestone")
    given = dict(ds.attrs)
    if isinstance(given.get("settings"), str):
        try:
            given.update(json.loads(given["settings"]))
        except ValueError:
            pass
    for coord in COUNT_COORDS:  # not `name`: that is the result's name
        if isinstance(given.get(coord), int | float):
            given[coord] = readable_group_size(given[coord])
    settings = ", ".join(
        f"{k}={given[k]}" for k in SETTING_COORDS if k in given and given[k] not in ("", None)
    )
    if not settings and "upto_step" in given:  # a forecast: named by its run and its cut
        run = f"run {given['run']}" if given.get("run") else "a run"
        settings = f"forecast of {run} from its steps up to {float(given['upto_step']):g}"
    if given.get("lr_schedule"):  # a run on a schedule (predict --lr-schedule)
        settings += f", lr_schedule={given['lr_schedule']} (peak {given.get('lr_schedule_peak_rate')})"
    def step_text(step) -> str:
        return "none within the horizon" if step is None or not np.isfinite(float(step)) else f"{float(step):.0f}"

    stop = numbers.get("stop_step")
    stop_text = step_text(stop)
    if "policy_stop_step" in numbers:
        # the logged reward trails the policy: a run stopped at a step keeps that step's policy
        lag = float(ds.attrs.get("observation_lag", np.nan))
        stop_text = (
            f"{step_text(numbers['policy_stop_step'])} for the policy ({stop_text} on the logged "
            f"reward, {steps_behind(lag)} it)"
        )
    summary = (
        f"{settings}: regime {numbers['regime']} (probability {float(numbers['regime_prob']):.2f}); "
        f"mean reward at step {numbers['final_step']:.0f}: {numbers['final_mean_reward']:.3g}; "
        f"recommended stop step: {stop_text}."
    )
    if "law" in ds.attrs:
        summary += f" Mean trajectory by the {ds.attrs['law']} law"
        if ds.attrs.get("clip_range", "off") != "off":  # predict --clip-epsilon
            summary += f" with PPO clip range {format_clip_range(tuple(json.loads(ds.attrs['clip_range'])))}"
        if "discrepancy_sd_max" in ds.attrs:
            summary += misfit_text(float(ds.attrs["discrepancy_sd_max"]))
        else:
            summary += "; band from parameter uncertainty only."
    if "backtest_rmse" in ds.attrs:  # a forecast of a run whose later steps are logged
        summary += f" Backtest on the {int(ds.attrs['backtest_steps'])} later logged steps: RMSE {float(ds.attrs['backtest_rmse']):.3g}"
        summary += "".join(
            f", {k.removeprefix('backtest_coverage_')} band coverage {float(v):.3g}"
            for k, v in sorted(ds.attrs.items())
            if k.startswith("backtest_coverage_") and not k.startswith("backtest_coverage_raw_")
        )
        summary += "."
    # a forecast's too (a cut past the run's last step, an unstable prefix): the CLI prints them
    notes = attr_warnings(ds)
    if notes:
        summary += " Warning: " + "; ".join(str(n) for n in notes) + "."
    # and those of the saved fit it was computed from (`predict FIT`, `forecast --prior FIT`):
    # a prediction of another fit than the report's kept them in its file only
    fit_notes = attr_warnings(ds, "posterior_warnings")
    if fit_notes:
        summary += " Warning of the fit it was computed from: " + "; ".join(str(n) for n in fit_notes)
        summary += "" if summary.endswith(".") else "."
    fig = plot_prediction(ds, observed=observed, title=title)
    values: dict[str, Any] = dict(numbers)
    values["title"] = title or name.replace("_", " ")
    values["badge"] = "prediction"
    return CheckResult(
        name=name,
        passed=None,
        summary=summary,
        table=table,
        figures={title or name: fig},
        values=values,
    )


__all__ = ["misfit_text", "prediction_result"]
