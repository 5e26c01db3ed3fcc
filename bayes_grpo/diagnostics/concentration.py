"""Policy concentration: the entropy falls fast while the reward is still far from its plateau.

The mean-field premise of the reduced model is that the policy moves as a whole along
one order parameter ``p(t)``; a policy that concentrates its mass (entropy collapse)
before the reward has got anywhere has stopped exploring and left that premise. The
diagnostic compares the relative entropy loss ``1 - H(t) / H_start`` with the reward
progress ``phi(t) = (R(t) - R_start) / (p* - R_start)`` on the smoothed curves:

- onset: the first step at which the entropy has lost ``drop_fraction`` of its starting
  level, sustained;
- detected, premature concentration: the onset comes while ``phi < progress_threshold``.
  A fitted plateau the run does not bound (its ``interval_prob`` Gauss-Newton interval wider
  than the way from ``R_start`` to it: a reward still rising in a straight line, or a slow
  start the single exponential cannot draw, puts it anywhere up to hundreds of times the
  logged rise), or one outside [0, 1] for a run whose every reward lies in it (a slow start:
  data/tiny's 2.43 for success rates that rise to 0.99), is replaced by the extreme logged
  (smoothed) reward when that is nearer, so ``phi`` is then a lower bound of the progress and
  the detection conservative. A posterior
  plateau on the other side of ``R_start`` from where the run's reward went (a posterior of
  other runs) is not this run's: the run's own fit is used, and the evidence says so; so is
  a posterior plateau outside [0, 1] for a run whose every logged reward lies in [0, 1] (a fit
  of runs that end before their plateau does not pin it: ``models/tiny.nc``'s 3.44 when it was
  fitted without reward bounds).
  This needs a reward with a trend beyond noise (``bayes_grpo.metrics.has_trend``): a
  flat reward may be stuck or already at its plateau, so only a collapse is judged there;
- detected, collapse: the entropy ends below ``collapse_fraction`` of its start (the policy
  has become near-deterministic, whatever the reward did: exploration is gone and the
  linearisation around an interior fixed point no longer describes the run);
- strength: for premature concentration (and for runs where nothing is detected) the
  relative entropy loss at the step where the reward reaches ``progress_threshold`` of its
  rise (the end of the run if it never does, or if the reward has no trend: the strength is
  then named the final loss); for a collapse, the final relative entropy loss. Intervals from a block bootstrap of both curves, with the plateau ``p*`` drawn from
  the Gauss-Newton approximation of a single-exponential fit (``bayes_grpo.dynamics.lsq``)
  or from posterior draws.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bayes_grpo.checks.base import CheckResult, fraction_percent, plot_text
from bayes_grpo.diagnostics import _fits
from bayes_grpo.diagnostics._result import assessed, fmt_interval, not_assessable, strength
from bayes_grpo.diagnostics._series import (
    align,
    block_resample,
    edge_mask,
    find_series,
    finite_series,
    interval,
    longest_run,
    residual_bootstrap_parts,
    smooth,
    step_number,
    sustained_onset,
)
from bayes_grpo.diagnostics.config import CommonConfig, ConcentrationConfig

MODE = "policy_concentration"


def entropy_drop(entropy: np.ndarray, start_level: float) -> np.ndarray:
    """Relative entropy loss ``1 - H / H_start`` (shape of ``entropy``)."""
    return 1.0 - np.asarray(entropy, dtype=float) / start_level


def reward_progress(reward: np.ndarray, start_level: float, plateau: float) -> np.ndarray:
    """Reward progress ``(R - R_start) / (p* - R_start)``; zeros when the rise is nil."""
    rise = plateau - start_level
    if not np.isfinite(rise) or rise == 0:
        return np.zeros_like(np.asarray(reward, dtype=float))
    return (np.asarray(reward, dtype=float) - start_level) / rise


def _evaluate(
    steps, entropy_s, reward_s, plateau, start_mask, cfg: ConcentrationConfig, sustain: float
) -> dict[str, Any]:
    """Onset, progress at onset and entropy drop at the progress threshold, for smoothed curves."""
    h0 = float(np.median(entropy_s[start_mask]))
    r0 = float(np.median(reward_s[start_mask]))
    drop = entropy_drop(entropy_s, h0) if h0 > 0 else np.full_like(entropy_s, np.nan)
    phi = reward_progress(reward_s, r0, plateau)
    onset = sustained_onset(drop >= cfg.drop_fraction, sustain)
    reached = np.flatnonzero(phi >= cfg.progress_threshold)
    at = int(reached[0]) if reached.size else steps.size - 1
    return {
        "h_start": h0,
        "r_start": r0,
        "onset_idx": onset,
        "progress_at_onset": float(phi[onset]) if onset is not None else float("nan"),
        "drop_at_threshold": float(drop[at]),
        "threshold_idx": at,
        "threshold_reached": bool(reached.size),
        "final_drop": float(drop[-1]),
        "final_progress": float(phi[-1]),
        "premature": bool(
            onset is not None and np.isfinite(plateau) and phi[onset] < cfg.progress_threshold
        ),
        "collapse": bool(drop[-1] >= 1.0 - cfg.collapse_fraction),
        "drop": drop,
        "phi": phi,
    }


def policy_concentration(
    frame: pd.DataFrame,
    *,
    run_id: str,
    config: ConcentrationConfig | None = None,
    common: CommonConfig | None = None,
    plateau_draws: np.ndarray | None = None,
) -> CheckResult:
    """Did the policy entropy collapse before the reward approached its plateau?

    Parameters
    ----------
    frame
        One run's metrics indexed by optimizer step (NaN where not logged); needs ``reward``
        and an entropy metric (``config.entropy_metrics``).
    run_id
        The run's id.
    config, common
        Thresholds.
    plateau_draws
        Posterior draws of the plateau ``p*`` (reward units); when None the plateau comes
        from a single-exponential least-squares fit, with bootstrap refits.

    Returns
    -------
    CheckResult
        See the module docstring for the rule.
    """
    config = config or ConcentrationConfig()
    common = common or CommonConfig()
    ent = find_series(frame, config.entropy_metrics, min_points=common.min_points)
    if ent is None:
        return not_assessable(
            MODE,
            run_id,
            f"no entropy metric ({', '.join(config.entropy_metrics)}) with >= {common.min_points} points",
        )
    rew = (
        finite_series(frame.index.to_numpy(), frame["reward"].to_numpy(dtype=float), "reward")
        if "reward" in frame
        else None
    )
    if rew is None or len(rew) < common.min_points:
        return not_assessable(MODE, run_id, f"fewer than {common.min_points} reward points")
    steps = ent.steps
    reward = align(steps, rew.steps, rew.values)
    ok = np.isfinite(reward)
    steps, entropy, reward = steps[ok], ent.values[ok], reward[ok]
    if steps.size < common.min_points:
        return not_assessable(
            MODE, run_id, f"fewer than {common.min_points} steps with both reward and {ent.name}"
        )
    if np.any(entropy < 0):
        return not_assessable(MODE, run_id, f"{ent.name} has negative values; not an entropy")

    start_mask = edge_mask(steps, config.start_fraction, late=False)
    rng = np.random.default_rng(common.seed)
    trend_flag = _fits.has_trend(rew.steps, rew.values)
    unit_rewards = bool(np.all((reward >= 0.0) & (reward <= 1.0)))  # a success rate's range
    posterior_not_used = None
    if plateau_draws is not None and np.size(plateau_draws):
        plateau_samples = np.asarray(plateau_draws, dtype=float).ravel()
        plateau = float(np.median(plateau_samples))
        plateau_source = "posterior"
        # a posterior plateau on the other side of the reward's start from where the run went
        # (a run that rose, a plateau below its start: a posterior of other runs) makes every
        # progress negative, "covered -45% of its way to the plateau", and every entropy fall
        # premature; it is not this run's plateau, so the run's own fit measures the progress
        r_s0 = smooth(reward, common.smooth_fraction)
        r_start0 = float(np.median(r_s0[start_mask]))
        r_end0 = float(np.median(r_s0[edge_mask(steps, config.start_fraction, late=True)]))
        if trend_flag and (plateau - r_start0) * (r_end0 - r_start0) < 0:
            posterior_not_used = (
                f"posterior plateau {plateau:.3g} lies on the other side of the reward's start "
                f"({r_start0:.3g}) from where the run went ({r_end0:.3g}): not this run's plateau, "
                "so the run's own single-exponential fit is used"
            )
        elif trend_flag and unit_rewards and not 0.0 <= plateau <= 1.0:
            # a fit of runs that end before they approach their plateau does not pin it
            # (models/tiny.nc without reward bounds: p* 3.44 for success rates that rise to 0.9): every run then
            # "had covered 3% of its way" when its entropy fell, whatever it did
            posterior_not_used = (
                f"posterior plateau {plateau:.3g} lies outside [0, 1], where every logged reward of "
                "the run lies (a success rate cannot get there): not this run's plateau, so the "
                "run's own single-exponential fit is used"
            )
    if plateau_draws is None or not np.size(plateau_draws) or posterior_not_used:
        fit = _fits.fit_saturation(rew.steps, rew.values)
        if fit is None and trend_flag:
            return not_assessable(
                MODE,
                run_id,
                "the reward has a trend but its saturation law could not be fitted (no plateau)",
            )
        plateau = fit["plateau"] if fit is not None else float("nan")
        # replicates of the plateau from the fit's Gauss-Newton approximation
        plateau_samples = (
            rng.normal(plateau, fit["plateau_sd"], common.n_boot)
            if fit is not None and np.isfinite(fit["plateau_sd"])
            else None
        )
        plateau_source = "single-exponential fit"
    if posterior_not_used:
        plateau_source += f" ({posterior_not_used})"
    if not trend_flag:
        plateau_source += " (reward has no trend beyond noise: no plateau to progress to; only a collapse is judged)"

    e_s = smooth(entropy, common.smooth_fraction)
    r_s = smooth(reward, common.smooth_fraction)
    # a reward still rising at the end of the log (a straight line, a slow start) leaves the
    # single exponential's plateau unbounded: 2.4, 5 or 228 for a success rate logged up to
    # 0.7; progress towards it reads near 0 wherever the entropy falls. Unless the fit bounds
    # it (interval narrower than the way to it), the way is measured to the plateau or the
    # extreme logged (smoothed) reward, whichever is nearer: a lower bound of the progress
    plateau_bounded = True
    unbounded_why = "not bounded"  # why the fitted plateau was set aside, for the sentence
    if plateau_source.startswith("single-exponential fit") and trend_flag:
        r_start = float(np.median(r_s[start_mask]))
        z = stats.norm.ppf(0.5 + common.interval_prob / 2)
        plateau_bounded = bool(z * fit["plateau_sd"] < abs(plateau - r_start))
        # a plateau no success rate reaches is no bound either, however narrow its interval:
        # data/tiny's slow starts fitted 2.43 +- 1.07 for rewards that rose to 0.99, and read
        # "the reward had covered 4% of its way to the plateau" (the posterior's is set aside so)
        outside = unit_rewards and not 0.0 <= plateau <= 1.0
        if not plateau_bounded or outside:
            plateau_samples = None
            plateau_source += (
                f" (plateau {plateau:.3g} "
                + (
                    f"not bounded by the run, sd {fit['plateau_sd']:.3g}"
                    if not plateau_bounded
                    else f"outside [0, 1], where every logged reward of the run lies, sd {fit['plateau_sd']:.3g}"
                )
                + ": progress measured to the nearer of it and the extreme logged reward)"
            )
            if plateau_bounded:  # bounded, but where no success rate gets
                unbounded_why = "outside [0, 1]"
            plateau_bounded = False

    def reference(r_smoothed: np.ndarray, p: float) -> float:
        """The plateau, or the extreme logged reward when nearer and the plateau is unbounded."""
        if plateau_bounded or not np.isfinite(p):
            return p
        if p >= r_smoothed[start_mask].mean():
            return float(min(p, np.max(r_smoothed)))
        return float(max(p, np.min(r_smoothed)))

    progress_to = reference(r_s, plateau) if trend_flag else float("nan")
    way = (
        "of its way to the plateau"
        if plateau_bounded or progress_to == plateau
        else f"of its way to {progress_to:.3g}, its extreme logged level (the plateau is "
        + ("not bounded by the run)" if unbounded_why == "not bounded" else f"{unbounded_why})")
    )
    point = _evaluate(
        steps,
        e_s,
        r_s,
        progress_to,
        start_mask,
        config,
        common.sustain_fraction,
    )
    if not point["h_start"] > 0:
        return not_assessable(
            MODE, run_id, f"{ent.name} starts at {point['h_start']:.3g}; no entropy to lose"
        )

    # bootstrap: residual blocks of entropy and reward; plateau from posterior draws or refits
    # (residual_bootstrap_parts: residuals rescaled, blocks a quarter of the smoothing window)
    _, e_res, block = residual_bootstrap_parts(entropy, common.smooth_fraction, common.block_fraction)
    _, r_res, _ = residual_bootstrap_parts(reward, common.smooth_fraction, common.block_fraction)
    drops, prog, finals = [], [], []
    for b in range(common.n_boot):
        e_b = smooth(e_s + block_resample(e_res, block, rng), common.smooth_fraction)
        r_b = smooth(r_s + block_resample(r_res, block, rng), common.smooth_fraction)
        if not trend_flag:
            p_b = float("nan")
        elif plateau_samples is not None:
            p_b = float(plateau_samples[b % plateau_samples.size])
        else:
            p_b = reference(r_b, plateau)
        ev = _evaluate(steps, e_b, r_b, p_b, start_mask, config, common.sustain_fraction)
        drops.append(ev["drop_at_threshold"])
        prog.append(ev["progress_at_onset"])
        finals.append(ev["final_drop"])
    source = "bootstrap" + (
        " + posterior plateau"
        if plateau_source == "posterior"
        else " + fitted plateau (Gauss-Newton)"
        if plateau_bounded
        else f" + extreme logged reward (plateau {unbounded_why})"
    )
    premature, collapse = point["premature"], point["collapse"]
    detected = premature or collapse
    if collapse and not premature:
        lo, hi = interval(np.asarray(finals), common.interval_prob, centre=point["final_drop"])
        st = strength(
            "final relative entropy loss (collapse)",
            point["final_drop"],
            lo,
            hi,
            prob=common.interval_prob,
            source="bootstrap",
        )
    else:
        lo, hi = interval(
            np.asarray(drops), common.interval_prob, centre=point["drop_at_threshold"]
        )
        # the loss at the end of the run where the reward never reaches the threshold: named
        # so (a reward stuck at 0 had its final loss called the loss "when the reward reaches
        # 50% of its rise", from a "fitted plateau" that no flat reward has)
        reaches = f"{config.progress_threshold:.0%} of its rise"
        name, st_source = (
            ("final relative entropy loss (reward without trend: only a collapse is judged)", "bootstrap")
            if not trend_flag
            else (f"final relative entropy loss (the reward never reached {reaches})", source)
            if not point["threshold_reached"]
            else (f"relative entropy loss when the reward reaches {reaches}", source)
        )
        st = strength(
            name,
            point["drop_at_threshold"],
            lo,
            hi,
            prob=common.interval_prob,
            source=st_source,
        )
    onset_idx = point["onset_idx"]
    onset_step = float(steps[onset_idx]) if (detected and onset_idx is not None) else None
    prog_lo, prog_hi = interval(
        np.asarray(prog), common.interval_prob, centre=point["progress_at_onset"]
    )
    evidence: dict[str, Any] = {
        "metric": ent.name,
        "entropy_start": point["h_start"],
        "reward_start": point["r_start"],
        "plateau": plateau,
        "plateau_bounded_by_run": plateau_bounded,
        "progress_measured_to": progress_to,
        "plateau_source": plateau_source,
        "reward_has_trend": bool(trend_flag),
        "drop_fraction": config.drop_fraction,
        "progress_threshold": config.progress_threshold,
        "entropy_drop_onset_step": step_number(steps[point["onset_idx"]])
        if point["onset_idx"] is not None
        else None,
        "progress_at_onset": point["progress_at_onset"],
        "progress_at_onset_interval": [prog_lo, prog_hi],
        "share_of_bootstrap_detected": float(np.mean(np.asarray(prog) < config.progress_threshold)),
        "final_entropy_drop": point["final_drop"],
        "collapse_fraction": config.collapse_fraction,
        "premature_concentration": premature,
        "entropy_collapse": collapse,
        "final_reward_progress": point["final_progress"],
        "progress_threshold_reached": point["threshold_reached"],
    }
    # the metric read, by name (a log's token_entropy or policy_entropy)
    entropy_label = "entropy" if ent.name == "entropy" else f"entropy ({ent.name})"
    if premature:
        summary = (
            f"policy concentration detected: {entropy_label} lost {config.drop_fraction:.0%} by step {onset_step:.0f} "
            f"while the reward had covered {point['progress_at_onset']:.0%} {way}; strength {fmt_interval(st)}"
            + (
                f"; the entropy then collapsed to {fraction_percent(1 - point['final_drop'])} of its start."
                if collapse
                else "."
            )
        )
    elif collapse:
        summary = (
            f"policy concentration detected: {entropy_label} collapsed to {fraction_percent(1 - point['final_drop'], threshold=config.collapse_fraction)} of its start "
            f"(< {config.collapse_fraction:.0%})"
            + (
                f", falling below {1 - config.drop_fraction:.0%} from step {onset_step:.0f}"
                if onset_step is not None
                else ""
            )
            + f"; strength {fmt_interval(st)}."
        )
    elif not trend_flag:
        summary = (
            f"not detected: the reward has no trend (stuck or already at its plateau), so only a collapse counts; "
            f"final {entropy_label} loss {fraction_percent(point['final_drop'], threshold=1 - config.collapse_fraction)} < {1 - config.collapse_fraction:.0%}."
        )
    elif point["onset_idx"] is None and not np.any(point["drop"] >= config.drop_fraction):
        summary = f"not detected: {entropy_label} never lost {config.drop_fraction:.0%} of its start level (final loss {fraction_percent(point['final_drop'])}); strength {fmt_interval(st)}."
    elif point["onset_idx"] is None:
        # lost for a stretch, then regained: "never lost 50%" was said of an entropy at 30% of
        # its start over steps 41-130 of 300
        _, first, last = longest_run(point["drop"] >= config.drop_fraction, steps)
        summary = (
            f"not detected: {entropy_label} lost {config.drop_fraction:.0%} of its start level over "
            f"steps {steps[first]:.0f}-{steps[last]:.0f} (its longest stretch there) and regained "
            f"it: no sustained loss (final loss {fraction_percent(point['final_drop'])}); strength {fmt_interval(st)}."
        )
    else:
        summary = (
            f"not detected: {entropy_label} lost {config.drop_fraction:.0%} only after the reward covered "
            f"{point['progress_at_onset']:.0%} of its rise; strength {fmt_interval(st)}."
        )
    # a plateau set aside is named so, beside the level the progress was measured to (the
    # report's table read "plateau p* 1282" under "25% of its way to 0.969")
    set_aside = trend_flag and np.isfinite(progress_to) and progress_to != plateau
    table = pd.DataFrame(
        {
            "quantity": [
                "entropy at start",
                f"plateau p* ({unbounded_why}: set aside)" if set_aside else "plateau p*",
                *(["progress measured to (extreme logged reward)"] if set_aside else []),
                # fractions (0.5 is half), labelled so beside the summary's percentages
                "progress at entropy onset (fraction of the rise)",
                "entropy loss at threshold (fraction of the start level)",
                "final entropy loss (fraction of the start level)",
                "final progress (fraction of the rise)",
            ],
            "value": [
                point["h_start"],
                plateau,
                *([progress_to] if set_aside else []),
                point["progress_at_onset"],
                point["drop_at_threshold"],
                point["final_drop"],
                point["final_progress"],
            ],
        }
    ).set_index("quantity")
    figure = (
        _figure(
            steps,
            entropy,
            e_s,
            reward,
            r_s,
            progress_to if trend_flag else None,
            onset_step,
            run_id,
            ent.name,
            "plateau p*" if progress_to == plateau else f"extreme logged reward (p* {unbounded_why})",
        )
        if common.figures
        else None
    )
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


def _figure(steps, entropy, e_s, reward, r_s, plateau, onset_step, run_id, name, level_label):
    # a bare Figure (not pyplot): no global backend switch, no open-figure registry
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 3.2))
    ax = fig.subplots()
    ax.plot(steps, entropy, ".", ms=3, alpha=0.4, color="C1")
    ax.plot(steps, e_s, color="C1", lw=1.5, label=name)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(name, color="C1")
    ax2 = ax.twinx()
    ax2.plot(steps, reward, ".", ms=3, alpha=0.3, color="C0")
    ax2.plot(steps, r_s, color="C0", lw=1.5, label="reward")
    if plateau is not None and np.isfinite(plateau):
        # the level the progress is measured to (an unbounded fitted plateau, 228 for a success
        # rate, would squash the reward into a line at the bottom of the axis)
        ax2.axhline(plateau, color="C0", ls="--", lw=0.8, label=level_label)
    ax2.set_ylabel("reward", color="C0")
    if onset_step is not None:
        ax.axvline(onset_step, color="C3", lw=1.0, label=f"onset {onset_step:.0f}")
    ax.set_title(plot_text(f"policy concentration: {run_id}"), fontsize=9)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    # on the twin axes, drawn last: on the first, the reward's dots and line covered it
    ax2.legend(h1 + h2, l1 + l2, fontsize=6, loc="center right")
    fig.tight_layout()
    return fig
