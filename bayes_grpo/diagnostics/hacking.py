"""Train-eval decoupling (reward hacking): the training reward keeps rising while the
evaluation reward saturates or falls.

Both rewards are put on their own scale (each divided by its range, the max - min of its
smoothed curve), since a training reward (often a sum of shaped rewards) and an
evaluation accuracy need not share units. The late window starts when the smoothed
evaluation reward first covers ``eval_saturation_level`` of its rise to its maximum (at
the latest ``min_window_fraction`` of the run before the end). In it, the gain of each
reward (least-squares slope times the window's step span, over that reward's range) is
compared:

    d = gain_train - gain_eval      (fractions of each reward's range)

The gains are compared where both rewards are logged: the training reward after the last
evaluation is left out (an evaluation that stopped early is no saturation), and the result says
how many of its points that leaves out.

Detected when the lower interval bound of ``d`` exceeds ``decoupling_threshold`` and the
training reward gains at least ``min_train_gain`` with a lower bound above 0. Onset: the
start of the late window (where evaluation saturated or peaked). Strength: ``d`` with a
block-bootstrap interval (residuals of both rewards resampled independently, the window
re-selected in every replicate; residuals rescaled for the noise the moving median takes into
the trend and resampled in blocks of at most a quarter of its window,
``_series.residual_bootstrap_parts``, so that the interval is as wide as the spread of ``d``
over healthy runs: blocks as long as the window made it 60-85% as wide).

Both rewards are also fitted with the same saturation law (single exponential, the
overdamped limit, via ``bayes_grpo.dynamics.lsq``); the result reports the difference of
their plateaus (raw units; meaningful when both share a scale) and the ratio of their
saturation time constants, with Gauss-Newton intervals (``diagnostics._fits``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bayes_grpo.checks.base import CheckResult, counted, legend_beside, plot_text
from bayes_grpo.diagnostics import _fits
from bayes_grpo.diagnostics._result import assessed, fmt_interval, not_assessable, strength
from bayes_grpo.diagnostics._series import (
    Series,
    block_resample,
    find_series,
    finite_series,
    interval,
    ols_gain,
    residual_bootstrap_parts,
    smooth,
    step_number,
)
from bayes_grpo.diagnostics.config import (
    EVAL_REWARD_NAMES,
    VERL_EVAL_REWARD,
    CommonConfig,
    HackingConfig,
)

MODE = "reward_hacking"

#: Evaluation metrics (``eval_<name>``) that are no reward: the HF Trainer's own and the
#: run set's canonical side quantities; never offered as the evaluation reward.
NOT_A_REWARD: frozenset[str] = frozenset(
    {
        "loss",
        "runtime",
        "samples_per_second",
        "steps_per_second",
        "epoch",
        "kl",
        "entropy",
        "grad_norm",
        "clip_ratio",
        "completion_length",
        "frac_reward_zero_std",
        "lr",
    }
)


#: A spread, no reward: ``..._std``, and verl's ``std@N`` (``val-aux/<data>/reward/std@4`` is
#: ``eval_<data>_reward_std_4``), which the hint offered as the evaluation reward to name.
SPREAD_NAME = re.compile(r"_std(_\d+)?$")


def verl_eval_reward(frame: pd.DataFrame, min_points: int) -> Series | None:
    """verl's validation reward of the run's one validation data set (:data:`VERL_EVAL_REWARD`),
    with at least ``min_points`` finite values; None when there is none, or several data sets."""
    ranked: dict[str, tuple[tuple[int, int], str]] = {}
    for column in map(str, frame.columns):
        match = VERL_EVAL_REWARD.match(column)
        if match is None:
            continue
        if match.group("old_source") is not None:
            source, rank = match.group("old_source"), (1, 0)
        else:
            source = match.group("source")
            rank = (0 if match.group("var") == "acc" else 1, -int(match.group("n")))
        values = frame[column].to_numpy(dtype=float)
        if len(finite_series(frame.index.to_numpy(), values)) < min_points:
            continue
        if source not in ranked or rank < ranked[source][0]:
            ranked[source] = (rank, column)
    if len(ranked) != 1:
        return None
    ((_rank, column),) = ranked.values()
    return find_series(frame, [column], min_points=min_points)


def saturation_index(smoothed: np.ndarray, level: float) -> int:
    """First index where ``smoothed`` covers ``level`` of its rise from its first value to its max."""
    rise = np.max(smoothed) - smoothed[0]
    if rise <= 0:
        return 0
    return int(np.flatnonzero(smoothed >= smoothed[0] + level * rise)[0])


def window_start(
    eval_steps: np.ndarray, eval_smoothed: np.ndarray, all_steps: np.ndarray, cfg: HackingConfig
) -> float:
    """Step at which the late window starts (evaluation saturation, or the last ``min_window_fraction``):
    the first logged step (of ``all_steps``, increasing) from there. The last
    ``min_window_fraction`` of a span starts between two steps (149.25 of 0..199), which was
    reported as the onset step, a step no run has."""
    t_sat = float(eval_steps[saturation_index(eval_smoothed, cfg.eval_saturation_level)])
    latest = float(all_steps[-1] - cfg.min_window_fraction * (all_steps[-1] - all_steps[0]))
    start = min(t_sat, latest)
    return float(all_steps[min(int(np.searchsorted(all_steps, start)), all_steps.size - 1)])


def relative_gain(steps: np.ndarray, values: np.ndarray, start: float, value_range: float) -> float:
    """Gain of the least-squares line over ``steps >= start``, as a fraction of ``value_range``."""
    m = steps >= start
    if m.sum() < 2 or not value_range > 0:
        return float("nan")
    return ols_gain(steps[m], values[m]) / value_range


def _decoupling(
    train: Series,
    ev: Series,
    t_vals: np.ndarray,
    e_vals: np.ndarray,
    cfg: HackingConfig,
    common: CommonConfig,
) -> tuple[float, float, float, float]:
    """``(d, gain_train, gain_eval, window_start)`` for one pair of series values."""
    t_s = smooth(t_vals, common.smooth_fraction)
    e_s = smooth(e_vals, common.smooth_fraction)
    start = window_start(ev.steps, e_s, np.union1d(train.steps, ev.steps), cfg)
    g_t = relative_gain(train.steps, t_vals, start, float(np.ptp(t_s)))
    g_e = relative_gain(ev.steps, e_vals, start, float(np.ptp(e_s)))
    return g_t - g_e, g_t, g_e, start


def _same_as_reward(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` is the total ``reward`` (equal wherever both are logged): a run of one
    reward function logs it twice, as ``rewards/<name>/mean`` and ``reward``."""
    if "reward" not in frame or column not in frame:
        return False
    total = frame["reward"].to_numpy(dtype=float)
    part = frame[column].to_numpy(dtype=float)
    both = np.isfinite(total) & np.isfinite(part)
    return bool(both.any()) and bool(np.allclose(total[both], part[both], rtol=1e-9, atol=1e-12))

def reward_hacking(
    frame: pd.DataFrame,
    *,
    run_id: str,
    config: HackingConfig | None = None,
    common: CommonConfig | None = None,
    reward_is_evaluation: str | None = None,
) -> CheckResult:
    """Does the training reward keep rising while the evaluation reward saturates or falls?

    Parameters
    ----------
    frame
        One run's metrics indexed by optimizer step (NaN where not logged); needs ``reward``
        and an evaluation reward (``config.eval_metrics``).
    run_id
        The run's id.
    config, common
        Thresholds.
    reward_is_evaluation
        The evaluation metric the run's ``reward`` was taken from, when the log has no training
        reward (the ingest's evaluation fallback; :func:`bayes_grpo.diagnostics.diagnose` reads it
        from the run set): the run then has no training reward to compare, and says so.

    Returns
    -------
    CheckResult
        See the module docstring for the rule.
    """
    config = config or HackingConfig()
    common = common or CommonConfig()
    if reward_is_evaluation is not None:
        # the log's eval/reward became the run's reward: "no evaluation reward (... eval/reward
        # ...)" named as missing the very metric the log has
        return not_assessable(
            MODE,
            run_id,
            f"the run's reward curve is its evaluation metric {reward_is_evaluation!r} (the log "
            "has no training reward; the ingest took the evaluation as the reward), so there is "
            "no training reward to compare it with",
        )
    ev = find_series(frame, config.eval_metrics, min_points=config.min_eval_points + 2)
    if ev is None and tuple(config.eval_metrics) == EVAL_REWARD_NAMES:
        # verl's val-core/<data>/reward/mean@N: found by its shape (its data set is in its name)
        ev = verl_eval_reward(frame, config.min_eval_points + 2)
    if ev is None:
        need = config.min_eval_points + 2

        def points(name: str) -> int:
            return int(np.isfinite(frame[name].to_numpy(dtype=float)).sum())

        # an evaluation reward logged too rarely is named with its count; one under another
        # name (verl's val-core/<data>/reward/mean@1 is eval_<data>_reward_mean_1) with the
        # setting that reads it (the Trainer's eval_loss, eval_runtime ... are no reward)
        # a name the run set has but this run never logged (another run of the set logs it)
        # is not "logged too rarely"
        sparse = [
            f"{c} ({points(c)})"
            for c in config.eval_metrics
            if c in frame.columns and points(c) > 0
        ]
        others = [
            str(c)
            for c in frame.columns
            if str(c).startswith("eval_")
            and c not in config.eval_metrics
            and str(c)[len("eval_") :] not in NOT_A_REWARD
            and not SPREAD_NAME.search(str(c))
            and points(c) >= need
        ]
        hint = f"; logged too rarely: {', '.join(sparse)}" if sparse else ""
        if others:
            hint += (
                f"; the run logs {others}: if one is its evaluation reward, name it with "
                f"`bayes-grpo diagnose --set hacking.eval_metrics={others[0]}` (Python: DiagnosticsConfig.from_mapping("
                f"{{'hacking': {{'eval_metrics': ['{others[0]}']}}}}))"
            )
        # TRL's per-function training rewards (rewards/<name>/mean): the total against a
        # component that scores correctness is a decoupling of proxy and correctness, on the
        # training prompts, when no held-out evaluation is logged
        components = [
            str(c)
            for c in frame.columns
            if str(c).startswith("rewards_")
            and not SPREAD_NAME.search(str(c))
            and c not in config.eval_metrics
            and points(c) >= need
        ]
        # a run of one reward function (`bayes-grpo train`'s next_digit_reward) logs it as its
        # total reward: the hint said to compare the total with it, the reward with itself
        itself = [c for c in components if _same_as_reward(frame, c)]
        components = [c for c in components if c not in itself]
        if itself and not components and not others:
            hint += (
                f"; its reward component {itself[0]} is the total reward itself (one reward "
                "function), so there is nothing to compare the reward with: log an evaluation "
                "reward (or a second reward function that scores correctness) to assess hacking"
            )
        if components and not others:
            hint += (
                f"; the run logs training reward components {components}: if one scores "
                f"correctness, the total reward can be compared with it (on the training "
                f"prompts, not a held-out evaluation) with `bayes-grpo diagnose --set "
                f"hacking.eval_metrics={components[0]}`"
            )
        return not_assessable(
            MODE,
            run_id,
            f"no evaluation reward ({', '.join(config.eval_metrics)}) with >= {need} points"
            + hint,
        )
    train = (
        finite_series(frame.index.to_numpy(), frame["reward"].to_numpy(dtype=float), "reward")
        if "reward" in frame
        else None
    )
    if train is None or len(train) < common.min_points:
        return not_assessable(
            MODE, run_id, f"fewer than {common.min_points} training-reward points"
        )
    # the gains are compared where both rewards are logged: an evaluation that stopped at step
    # 150 of a 300-step run, rising with the training reward, read as "saturates" against the
    # training reward's gain up to step 299 ("decoupling detected")
    after_eval = int((train.steps > ev.steps[-1]).sum())
    left_out = after_eval if (train.steps <= ev.steps[-1]).any() else 0
    if left_out:
        keep = train.steps <= ev.steps[-1]
        train = Series(train.name, train.steps[keep], train.values[keep])
        if len(train) < common.min_points:
            return not_assessable(
                MODE,
                run_id,
                f"fewer than {common.min_points} training-reward points up to the last "
                f"evaluation (step {ev.steps[-1]:.0f})",
            )
    if np.ptp(ev.values) == 0 or np.ptp(train.values) == 0:
        return not_assessable(
            MODE, run_id, "training or evaluation reward is constant; no scale to compare gains on"
        )
    # the gains are measured on the range of the smoothed curve (moving median), which a
    # lone value off a constant (an accuracy of 0 at every evaluation but one) leaves at 0
    flat = [
        label
        for label, s in (("training", train), ("evaluation", ev))
        if np.ptp(smooth(s.values, common.smooth_fraction)) == 0
    ]
    if flat:
        return not_assessable(
            MODE,
            run_id,
            f"{' and '.join(flat)} reward constant apart from isolated values (its moving median "
            "is flat); no scale to compare gains on",
        )

    d, g_t, g_e, start = _decoupling(train, ev, train.values, ev.values, config, common)
    n_eval_window = int((ev.steps >= start).sum())
    if n_eval_window < config.min_eval_points:
        return not_assessable(
            MODE,
            run_id,
            f"only {n_eval_window} evaluation points after step {start:.0f} (need {config.min_eval_points})",
        )
    # the training gain is a least-squares slope over the window: two points at least (an
    # evaluation logged on past the training reward's last step leaves none)
    n_train_window = int((train.steps >= start).sum())
    if n_train_window < 2:
        return not_assessable(
            MODE,
            run_id,
            f"only {counted(n_train_window, 'training-reward point')} after step {start:.0f} (need 2)",
        )

    rng = np.random.default_rng(common.seed)
    # the replicates re-select the window (its start is read off the evaluation reward), with
    # residuals and blocks that keep the noise's slow variation (residual_bootstrap_parts): the
    # residuals of the moving median in blocks as long as its window made the interval of d
    # 60-85% as wide as the spread over seeds, and healthy runs read as decoupled (7% of
    # 30-step runs, against the 5% a one-sided 90% bound allows at d = 0)
    t_s, t_res, bt = residual_bootstrap_parts(
        train.values, common.smooth_fraction, common.block_fraction
    )
    e_s, e_res, be = residual_bootstrap_parts(
        ev.values, common.smooth_fraction, common.block_fraction
    )
    boot = np.array(
        [
            _decoupling(
                train,
                ev,
                t_s + block_resample(t_res, bt, rng),
                e_s + block_resample(e_res, be, rng),
                config,
                common,
            )[:3]
            for _ in range(common.n_boot)
        ]
    )
    d_lo, d_hi = interval(boot[:, 0], common.interval_prob, centre=d)
    gt_lo, gt_hi = interval(boot[:, 1], common.interval_prob, centre=g_t)
    ge_lo, ge_hi = interval(boot[:, 2], common.interval_prob, centre=g_e)
    detected = bool(
        d_lo > config.decoupling_threshold and g_t >= config.min_train_gain and gt_lo > 0
    )
    onset_step = float(start) if detected else None
    st = strength(
        "late-window gain of train minus eval reward (fractions of their ranges)",
        d,
        d_lo,
        d_hi,
        prob=common.interval_prob,
        source="bootstrap",
    )

    laws = _law_difference(train, ev, common)
    evidence: dict[str, Any] = {
        "eval_metric": ev.name,
        "train_points_after_last_eval_left_out": left_out,
        "window_start_step": step_number(start),
        "eval_points_in_window": n_eval_window,
        "train_gain": g_t,
        "train_gain_interval": [gt_lo, gt_hi],
        "eval_gain": g_e,
        "eval_gain_interval": [ge_lo, ge_hi],
        "decoupling_threshold": config.decoupling_threshold,
        "eval_peak_step": step_number(ev.steps[int(np.argmax(e_s))]),
        **laws,
    }
    if detected:
        trend = "falls" if ge_hi < 0 else "saturates"
        summary = (
            f"train-eval decoupling detected: after step {start:.0f} the training reward gains {g_t:.0%} of its range "
            f"while the evaluation reward ({ev.name}) {trend} ({g_e:+.0%}); strength {fmt_interval(st)}."
        )
    else:
        summary = f"not detected: after step {start:.0f} train gain {g_t:+.0%}, eval gain {g_e:+.0%} of their ranges; difference {fmt_interval(st)}."
    if left_out:
        summary += (
            f" The training reward's {left_out} points after the last evaluation (step "
            f"{ev.steps[-1]:.0f}) are left out: no evaluation to compare them with."
        )
    rows = [
        ("train gain (late window)", g_t, gt_lo, gt_hi),
        ("eval gain (late window)", g_e, ge_lo, ge_hi),
        ("difference d", d, d_lo, d_hi),
    ]
    for key, label in (
        ("plateau_difference", "plateau train - eval (raw units)"),
        ("time_constant_ratio", "time constant train / eval"),
    ):
        if key in laws:
            rows.append((label, laws[key]["value"], laws[key]["lower"], laws[key]["upper"]))
    table = pd.DataFrame(rows, columns=["quantity", "value", "lower", "upper"]).set_index(
        "quantity"
    )
    figure = _figure(train, ev, t_s, e_s, start, onset_step, run_id) if common.figures else None
    return assessed(
        MODE,
        run_id,
        detected=detected,
        summary=summary,
        onset_step=onset_step,
        strength_=st,
        evidence=evidence,
        table=table,
        figure=figure,
    )


def _law_difference(train: Series, ev: Series, common: CommonConfig) -> dict[str, Any]:
    """Plateau difference and time-constant ratio of single-exponential fits (Gauss-Newton intervals)."""
    ft = _fits.fit_saturation(train.steps, train.values)
    fe = _fits.fit_saturation(ev.steps, ev.values)
    if ft is None or fe is None:
        return {"law_fit": "not available (a single-exponential fit failed)"}
    z = stats.norm.ppf(0.5 + common.interval_prob / 2)
    dp = ft["plateau"] - fe["plateau"]
    dp_sd = float(np.hypot(ft["plateau_sd"], fe["plateau_sd"]))
    log_ratio = float(np.log(ft["time_constant"] / fe["time_constant"]))
    lr_sd = float(np.hypot(ft["log_time_constant_sd"], fe["log_time_constant_sd"]))
    # an evaluation reward that rises and falls has no single-exponential time scale: its log
    # sd runs to hundreds and the interval's ends to 0 and inf (not numpy's overflow warning
    # on the command line of every such run)
    with np.errstate(over="ignore"):
        tc_lo, tc_hi = float(np.exp(log_ratio - z * lr_sd)), float(np.exp(log_ratio + z * lr_sd))
    return {
        "law_fit": "single exponential (overdamped limit) on both rewards",
        "train_fit": {k: ft[k] for k in ("plateau", "initial_reward", "time_constant")},
        "eval_fit": {k: fe[k] for k in ("plateau", "initial_reward", "time_constant")},
        "plateau_difference": {
            "value": dp,
            "lower": dp - z * dp_sd,
            "upper": dp + z * dp_sd,
            "source": "Gauss-Newton",
        },
        "time_constant_ratio": {
            "value": float(np.exp(log_ratio)),
            "lower": tc_lo,
            "upper": tc_hi,
            "source": "Gauss-Newton",
        },
    }


def _figure(train: Series, ev: Series, t_s, e_s, start, onset_step, run_id):
    # a bare Figure (not pyplot): no global backend switch, no open-figure registry
    from matplotlib.figure import Figure

    def norm(v, ref):
        return (v - np.min(ref)) / (np.ptp(ref) or 1.0)

    fig = Figure(figsize=(7.6, 3.2))  # the plot's 6 in and its legend beside it
    ax = fig.subplots()
    ax.plot(train.steps, norm(train.values, t_s), ".", ms=2, alpha=0.3, color="C0")
    ax.plot(train.steps, norm(t_s, t_s), color="C0", lw=1.5, label="training reward")
    ax.plot(ev.steps, norm(ev.values, e_s), "o", ms=3, alpha=0.5, color="C1")
    ax.plot(ev.steps, norm(e_s, e_s), color="C1", lw=1.5, label=f"evaluation ({ev.name})")
    ax.axvspan(
        start, max(train.steps[-1], ev.steps[-1]), color="0.9", zorder=0, label="late window"
    )
    if onset_step is not None:
        ax.axvline(onset_step, color="C3", lw=1.0, label=f"onset {onset_step:.0f}")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("reward, fraction of its range")
    ax.set_title(plot_text(f"train-eval decoupling: {run_id}"), fontsize=9)
    # beside the axes: the two rewards, each scaled to its range, fill them from 0 to 1 and
    # the late window is shaded to the right edge, so "best" still covered data
    legend_beside(ax, fontsize=6)
    fig.tight_layout()
    return fig


__all__ = ["reward_hacking", "relative_gain", "saturation_index", "window_start"]
