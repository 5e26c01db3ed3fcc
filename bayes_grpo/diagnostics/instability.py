"""Dynamical instability: growing side quantities, reward oscillation, negative damping.

Signals, each assessed on its own and listed in the result's table:

- **sustained growth** of ``grad_norm`` or the importance ratio ``pi_theta / pi_old`` (never
  TRL's ``sampling/importance_sampling_ratio/*``, the vLLM sampler's correction capped at
  ``vllm_importance_sampling_cap``: ``config.SAMPLER_RATIO_NAMES``; a run that logs it and
  not the PPO ratio is told so): the median over
  the last ``edge_fraction`` of the run divided by the median over the first
  ``edge_fraction`` (each offset by 1% of the metric's largest smoothed value, so a metric
  that starts at 0 does not divide by 0) exceeds ``growth_factor`` and its block-bootstrap
  interval lies above 1, and the growth is still going on at the end (late median >= the
  median over the central ``edge_fraction`` of the run: a ramp-up while the reward starts
  to carry signal, followed by a plateau or a decline, is not instability). Onset: first
  step after which the smoothed metric stays above
  ``sqrt(growth_factor)`` times its early level (sustained). Exact zeros are left out (a
  step whose groups all had zero reward spread has no policy gradient: its grad norm is 0
  because there was no signal, which is not a level to grow from).
- **more frequent spikes** of ``grad_norm`` or the importance ratio: a spike is a step above
  ``growth_factor`` times both the metric's moving median there and its early median (a lone
  burst, which the medians above do not see; measured against the early level too, so a
  metric whose level falls late does not turn its ordinary steps into spikes). Flagged when
  the last ``edge_fraction`` of the run holds more spikes than the first by a one-sided
  Fisher exact test at ``spike_alpha`` (0.01). Noise band: for a stationary metric with
  independent steps the two windows' counts are exchangeable, so the test's false-alarm rate
  is at most ``spike_alpha`` whatever the metric's tails (a run without spikes has p = 1).
  Onset: the first spike after the first window.
- **growth of the KL** to the reference policy: as for ``grad_norm``, but the reference is
  the median over the central ``edge_fraction`` of the run, not the first: the KL starts at
  0 (the policy starts as the reference), and its build-up while the policy learns is no
  instability. An anchored run levels off (ratio near 1); a policy drifting from the
  reference in a random walk has a KL growing like ``t`` and one drifting at a steady velocity
  like ``t^2`` (KL is quadratic in the parameter change), whose ratios over the default
  windows (medians at 87.5% and 50% of the run) are ``1.75`` and ``1.75^2 = 3.06``. A ratio
  >= ``kl_growth_factor`` (``1.75^3 = 5.36``, a KL growing like ``t^3``) with its interval
  above 1 is a KL growing faster than a steady drift's (one from up to 20% of the run reaches
  5.1): the runaway past the stability
  threshold, where each step moves the policy further than the last (a speed growing
  linearly gives ``t^4``, 9.4). Onset: first step after which the smoothed KL stays above
  ``sqrt(kl_growth_factor)`` times its central level (sustained). The ``kl`` is the KL to
  the reference (never a PPO ``approx_kl`` between the old and current policy, see
  ``bayes_grpo.runset.names``); its estimates below 0 (the k1 estimator's noise about a small
  KL) are kept, and the central level counts from its standard error at least
  (:func:`kl_level_floor`): a KL at its noise mid-run has no ratio of noise to noise. A KL
  logged as 0 at every step (a run without a KL term) is named as logged but holding no KL
  signal, not as "not logged".
- **sustained clipping**: the clip ratio (share of samples whose importance ratio left the
  PPO clip range) averages at least ``clip_min_level`` over some window of
  ``edge_fraction`` of the run, with its bootstrap lower bound above half that level (a clip
  ratio outside [0, 1], a percentage, is left out and the sentence says so).
  Clipping is bursty and starts at 0, so a level, not a growth factor, is the statistic;
  an episode of heavy clipping is what a step too large for the lag produces (the clip
  then bounds the linear instability, so the reward itself may not diverge). Onset: the
  first step at the level in the first window whose mean reaches it, and from which the
  clip ratio's moving median is at the level too when it gets there in that window (a lone
  burst before the episode does not date it).
- **oscillation** of the reward: the damped-oscillator law fitted to the reward
  (``bayes_grpo.dynamics.lsq.fit_oscillator``, or the posterior's ``zeta`` draws) has a
  damping ratio below ``zeta_threshold`` with confidence (upper bound of the Gauss-Newton
  interval of the fit, see ``diagnostics._fits``, or posterior probability >=
  ``prob_threshold``) and a visible relative overshoot
  ``exp(-pi zeta / sqrt(1 - zeta^2)) >= min_overshoot``. Without a posterior the fitted
  oscillation must also be real rather than a fit to noise: the reward has a trend
  (``bayes_grpo.metrics.has_trend``), the oscillator beats the single exponential by
  ``min_bic_gain`` in BIC, the overshoot amplitude ``overshoot * |p* - R0|``, as far as the
  fitted curve shows it at the logged steps (not inside a gap of the log), reaches
  ``min_amplitude_noise`` times the noise sd (first differences), and the period spans at
  least ``min_period_points`` logging intervals; and it survives process noise: a reward
  that wanders about a slow, overdamped curve has swings the oscillator fits under
  independent noise, so the state-space law (the SDE's noise through the run's own dynamics
  plus measurement noise, fitted by maximum likelihood) must still rule out
  ``zeta >= zeta_threshold`` at ``interval_prob`` (``process_noise_check``): its likelihood
  ratio must pass the chi-square(1) quantile and, since that large-sample calibration fails
  on short runs, the ratios of runs simulated from the best law with
  ``zeta >= zeta_threshold`` (a seeded parametric bootstrap, run only when the chi-square
  quantile is passed). Onset: first crossing of the plateau by the fitted curve.
  With a posterior, its ``zeta`` draws replace the fit; unless the posterior was fitted with
  the state-space likelihood (``posterior_with_process_noise``), an oscillation they show
  must survive the same process-noise check on the run's reward: a posterior fitted under
  independent residuals reads the wander as swings just as the least-squares fit does.
- **negative damping**: posterior probability of ``C_eff < 0`` >= ``prob_threshold``
  (only with a posterior; the least-squares law keeps ``C_eff > 0``).
- **reward divergence** (model-free, with or without a posterior, part of the reward
  assessment that ``fit_oscillation`` switches): the reward over the last
  ``edge_fraction`` of the run (3-point running median, so a lone spike does not count)
  spans at least ``growth_factor`` times the range of everything before it and leaves that
  range on both sides: a growing oscillation, which neither the least-squares law nor a
  posterior fitted to it may draw. A late rise or a collapse leaves it on one side only.
  Onset: the first step beyond the earlier range.
- **growing reward oscillation** (model-free, part of the same reward assessment): the
  reward's standard deviation about its own least-squares line over the last
  ``edge_fraction`` of the run is at least ``growth_factor`` times that over the central
  ``edge_fraction``, and the last window leaves the central one's range on both sides. The
  central window, not everything before, is the reference, so the rise does not hide a
  swing that grows at the plateau (the divergence test above compares with a range that holds
  the whole rise). Both windows need ``min_points`` points; the sds are those of the means
  of consecutive blocks of ``b`` points, ``b`` the window's points over ``min_points`` (so
  ``min_points`` blocks or more): a swing of many logging intervals keeps its size while
  the step-to-step noise shrinks by ``sqrt(b)``. Noise band: for a stationary reward (white
  noise, or a wander about a level) the two windows have the same spread, and the squared
  ratio of two such sds of ``m`` independent block means each follows ``F(m - 2, m - 2)``:
  ``P(ratio >= 3) = P(F >= 9) = 0.3%`` at ``m = 10`` and less for more blocks (at most
  0.5% with the both-sides condition, by simulation of an AR(1) wander of correlation time
  5-100% of the run, with or without white noise); the interval reported is that F interval. Onset: the first step of
  the first block after the central window whose mean leaves that window's range of block means.
- **reward collapse** (model-free, part of the same reward assessment): the reward rose and
  then fell back below where it started. With windows of ``edge_fraction`` of the run (means):
  the last window ends below the first, and the best window lies at least ``collapse_sd``
  within-window standard deviations (pooled over the best window's sd and the last window's
  sd about its best one-fall fit) above both the last and the first. A collapse to the
  reward's floor leaves a tight last window far below the best one; one inside the last window
  (a run stopped soon after it) is that window's step, which the fall fit keeps out of its
  spread; a healthy run that rose stays above its start, and the wander of a plateau moves the
  window means by about the spread within them. Noise band and detection
  (``benchmarks/collapse_noise_band.py``, a stationary AR(1) wander plus white noise, 40-400
  points, with or without a rise before it): at most 1.5% of runs when the wander's
  correlation time is up to 10% of the run (2.5% without white noise), 1-4% at 25-50% (a
  swing that slow is one rise and fall, which a single run cannot tell from a collapse);
  before the fall fit 0.7% (1.5%) and 0.3-3.5%. A collapse at 50-90% of a run is flagged in
  99-100% of runs (before the fall fit: none from 80% on). Onset: the first step from the
  best window on after which the reward (3-point running median) stays below halfway from
  the best window's mean to the last's (sustained).

The mode is detected when any signal is. A run with none of the side quantities and a
reward too short to fit is "not assessable".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bayes_grpo.checks.base import CheckResult, legend_beside, plot_text
from bayes_grpo.diagnostics import _fits
from bayes_grpo.diagnostics._result import (
    OSCILLATION_REMEDY,
    assessed,
    fmt_interval,
    interval_text,
    not_assessable,
    strength,
)
from bayes_grpo.diagnostics._series import (
    Series,
    bootstrap,
    edge_mask,
    fall_fit_variance,
    find_series,
    finite_series,
    interval,
    not_a_share,
    smooth,
    step_number,
    sustained_onset,
    window_means,
    window_size,
)
from bayes_grpo.diagnostics.config import SAMPLER_RATIO_NAMES, CommonConfig, InstabilityConfig

MODE = "instability"

#: Detected signals that stay within the oscillator law: a damped reward oscillation is its
#: underdamped regime. Every other signal (clipping, growing side quantities, a diverging
#: reward, negative damping) describes a run the law's stable trajectories cannot draw.
WITHIN_THE_LAW: tuple[str, ...] = ("reward oscillation",)

#: What the two statistics of the law's damping say, beside the verdict (its sentence and the
#: ``note`` column of its table): ``zeta < 1`` is an oscillating law, ``C_eff < 0`` an unstable
#: one. A run whose posterior gave P(zeta < 1) = 1 read "instability not detected" beside that
#: row (its overshoot too small to see, or not credible), which read as a contradiction.
LAW_STATISTIC_MEANING: dict[str, str] = {
    "reward oscillation": (
        "zeta < 1 says the law oscillates (underdamped: swings that settle, a stable regime), "
        "not that it is unstable"
    ),
    "negative damping": "C_eff < 0 says the law is unstable (swings that grow)",
}


#: When an underdamped law is flagged (said beside the meaning of ``zeta < 1``).
UNDERDAMPED_FLAGGED_WHEN: str = "flagged only with a visible, credible overshoot"


def _small_overshoot(overshoot: float, cfg: InstabilityConfig) -> str:
    """Why an underdamped law (zeta below the threshold) is not flagged: no visible swing."""
    return (
        f"underdamped, but its overshoot exp(-pi zeta / sqrt(1 - zeta^2)) {overshoot:.2g} is "
        f"below instability.min_overshoot {cfg.min_overshoot:g}: no visible swing"
    )


def signal_note(signal: dict[str, Any]) -> str | None:
    """The table's ``note`` of one signal: what a law statistic says
    (:data:`LAW_STATISTIC_MEANING`) and why an underdamped law was not flagged; None for the
    others."""
    meaning = LAW_STATISTIC_MEANING.get(signal["signal"])
    if meaning is None:
        return None
    if signal["signal"] == "reward oscillation":
        meaning += f" ({UNDERDAMPED_FLAGGED_WHEN})"
    why = ([signal["overshoot_below_minimum"]] if signal.get("overshoot_below_minimum") else []) + (
        [f"oscillation not credible: {', '.join(signal['not_credible_because'])}"]
        if signal.get("not_credible_because") and not signal["detected"]
        else []
    )
    return "; ".join([meaning, *why])


#: On a prefix that holds the reward's take-off, the grad norm grows with the share of groups
#: that carry signal (a group whose G rewards are equal adds no gradient, and early on most
#: are). The shipped tiny TRL runs (data/tiny) are flagged by it on 2 / 9 / 12 of 16 prefixes
#: of 20 / 30 / 50% of their steps (late/early ratios 3-24), and on 2 of 16 whole logs (both
#: start at zero reward; on a whole log part of the growth may be real: dividing by the share
#: of groups with signal halves one of them, 7.6 -> 3.1). The forecast's prefix check and
#: ``fit``'s note leave that signal out; ``diagnose`` (and the demo's exclusions) keep it.
TAKE_OFF_CONFOUNDED: tuple[str, ...] = ("growth of grad norm",)


def detected_signals(
    result: CheckResult, *, leave_out: tuple[str, ...] = WITHIN_THE_LAW
) -> tuple[list[str], float | None]:
    """The detected signals of an :func:`instability` result, except those named in
    ``leave_out``: ``"signal (metric: statistic value)"`` sentences, and the earliest onset
    step among them (None when none has one)."""
    kept = [
        s
        for s in (result.values.get("evidence") or {}).get("signals", [])
        if s.get("detected") and s["signal"] not in leave_out
    ]
    onsets = [float(s["onset_step"]) for s in kept if s.get("onset_step") is not None]
    return (
        [f"{s['signal']} ({s['metric']}: {s['statistic']} = {s['value']:.3g})" for s in kept],
        min(onsets) if onsets else None,
    )


def relative_overshoot(zeta: np.ndarray | float) -> np.ndarray:
    """Peak overshoot of a step response relative to its rise: ``exp(-pi zeta / sqrt(1 - zeta^2))``
    for ``0 <= zeta < 1``, 0 for ``zeta >= 1``, 1 for ``zeta < 0`` (growing oscillation)."""
    zeta = np.asarray(zeta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.exp(-np.pi * zeta / np.sqrt(1.0 - zeta**2))
    out = np.where(zeta >= 1.0, 0.0, out)
    return np.where(zeta < 0.0, 1.0, out)


def visible_overshoot(fitted: np.ndarray, plateau: float, initial_reward: float) -> float:
    """Largest excursion of a fitted curve beyond its plateau, away from its start, at the
    steps it was evaluated on (reward units; 0 when it never passes the plateau)."""
    direction = np.sign(plateau - initial_reward)
    excess = direction * (np.asarray(fitted, dtype=float) - plateau)
    return float(max(np.max(excess, initial=0.0), 0.0)) if direction != 0 else 0.0


def middle_mask(steps: np.ndarray, fraction: float) -> np.ndarray:
    """Boolean mask of the central ``fraction`` of the step span (at least 3 points)."""
    centre = (steps[0] + steps[-1]) / 2
    half = fraction * (steps[-1] - steps[0]) / 2
    mask = np.abs(steps - centre) <= half
    if mask.sum() < 3:
        mask = np.zeros(steps.size, dtype=bool)
        mid = steps.size // 2
        mask[max(0, mid - 1) : mid + 2] = True
    return mask


def growth_ratio(
    steps: np.ndarray, values: np.ndarray, edge_fraction: float, offset: float
) -> float:
    """``(median late + offset) / (median early + offset)`` over the run's edge windows."""
    early = edge_mask(steps, edge_fraction, late=False)
    late = edge_mask(steps, edge_fraction, late=True)
    return float((np.median(values[late]) + offset) / (np.median(values[early]) + offset))


def late_to_middle_ratio(
    steps: np.ndarray, values: np.ndarray, edge_fraction: float, offset: float, floor: float = 0.0
) -> float:
    """``(median late + offset) / (median central + offset)``: the last ``edge_fraction`` of
    the run against its central ``edge_fraction`` (:func:`middle_mask`).

    A KL estimate may be negative (the k1 estimator's mean, ``log pi - log pi_ref``: OpenRLHF's
    default ``kl_estimator``, verl's in-reward ``kl_penalty: kl``) where the KL is too small
    to tell from 0: the late median counts from 0 and the central one from ``floor`` (the
    central median's standard error, :func:`kl_level_floor`), so a KL at its noise mid-run
    has no ratio of noise to noise."""
    late = edge_mask(steps, edge_fraction, late=True)
    middle = middle_mask(steps, edge_fraction)
    late_level = max(float(np.median(values[late])), 0.0)
    middle_level = max(float(np.median(values[middle])), floor)
    return float((late_level + offset) / (middle_level + offset))


def kl_level_floor(steps: np.ndarray, values: np.ndarray, edge_fraction: float) -> float:
    """The standard error of the central window's median (from its MAD): a central KL level
    below it cannot be told from 0."""
    central = values[middle_mask(steps, edge_fraction)]
    mad = float(np.median(np.abs(central - np.median(central))))
    return 1.2533 * 1.4826 * mad / np.sqrt(central.size)


def _growth_signal(
    kind: str, s: Series, cfg: InstabilityConfig, common: CommonConfig, rng: np.random.Generator
) -> dict[str, Any]:
    smoothed = smooth(s.values, common.smooth_fraction)
    offset = 0.01 * float(np.nanmax(np.abs(smoothed))) + 1e-12
    late_mask = edge_mask(s.steps, cfg.edge_fraction, late=True)
    # the KL starts at 0 by construction: its reference level is the central window's
    early_mask = (
        middle_mask(s.steps, cfg.edge_fraction)
        if kind == "KL"
        else edge_mask(s.steps, cfg.edge_fraction, late=False)
    )
    late_level = float(np.median(s.values[late_mask]))
    early_level = float(np.median(s.values[early_mask]))
    if kind == "clip ratio":
        # clipping is bursty and starts at 0: the statistic is the largest mean clip ratio
        # over any window of edge_fraction of the run (a sustained clipping episode)
        w = window_size(s.values.size, cfg.edge_fraction)
        rolled = window_means(s.values, w)
        value = float(rolled.max())
        boot = bootstrap(
            s.values,
            lambda v: float(window_means(v, w).max()),
            smooth_fraction=common.smooth_fraction,
            block_fraction=common.block_fraction,
            n_boot=common.n_boot,
            rng=rng,
        )
        lo, hi = interval(boot, common.interval_prob, centre=value)
        # a share: the replicates shifted to the estimate left "[-0.000348, 0.0202]" below 0
        lo, hi = max(lo, 0.0), min(hi, 1.0)
        detected = bool(value >= cfg.clip_min_level and lo > 0.5 * cfg.clip_min_level)
        statistic, threshold = (
            f"largest mean clip ratio over {cfg.edge_fraction:.0%} of the run",
            cfg.clip_min_level,
        )
        # onset: the first clipped step of the first window whose mean reaches the level
        # (such a window holds at least one step at or above it). That window reaches back up
        # to its width before the episode, where a lone burst of a healthy stretch is also at
        # the level: where the clipping holds at the level (its moving median reaches it) in
        # the window, the onset is its first step there
        first = int(np.flatnonzero(rolled >= cfg.clip_min_level)[0]) if detected else 0
        at_level = s.values[first : first + w] >= cfg.clip_min_level
        held = at_level & (smoothed[first : first + w] >= cfg.clip_min_level)
        condition = np.zeros(s.values.size, dtype=bool)
        condition[first : first + w] = held if held.any() else at_level
    else:
        floor = kl_level_floor(s.steps, s.values, cfg.edge_fraction) if kind == "KL" else 0.0
        if kind == "KL":

            def ratio(steps, values, fraction, offset):
                return late_to_middle_ratio(steps, values, fraction, offset, floor)

        else:
            ratio = growth_ratio
        value = ratio(s.steps, s.values, cfg.edge_fraction, offset)
        boot = bootstrap(
            s.values,
            lambda v: ratio(s.steps, v, cfg.edge_fraction, offset),
            smooth_fraction=common.smooth_fraction,
            block_fraction=common.block_fraction,
            n_boot=common.n_boot,
            rng=rng,
        )
        # ratios: re-centre on the log scale, where the replicates are near symmetric
        lo, hi = np.exp(
            interval(
                np.log(np.clip(boot, 1e-300, None)),
                common.interval_prob,
                centre=float(np.log(value)),
            )
        )
        lo, hi = float(lo), float(hi)
        mid_level = float(np.median(s.values[middle_mask(s.steps, cfg.edge_fraction)]))
        still_growing = bool(late_level >= mid_level)
        factor = cfg.kl_growth_factor if kind == "KL" else cfg.growth_factor
        detected = bool(value >= factor and lo > 1.0 and still_growing)
        statistic, threshold = (
            "late/central median ratio" if kind == "KL" else "late/early median ratio",
            factor,
        )
        reference = max(early_level, floor) if kind == "KL" else early_level
        condition = smoothed >= (reference + offset) * np.sqrt(factor) - offset
    onset = None
    if detected:
        idx = (
            sustained_onset(condition, common.sustain_fraction)
            if kind != "clip ratio"
            else int(np.flatnonzero(condition)[0])
        )
        onset = float(s.steps[idx]) if idx is not None else None
    extra = (
        {}
        if kind == "clip ratio"
        else {
            "middle_level": mid_level,
            "still_growing_at_end": still_growing,
            # what early_level is the median of: the KL's reference is the central window
            "reference_window": "central" if kind == "KL" else "early",
        }
    )
    return {
        **extra,
        "signal": "sustained clipping" if kind == "clip ratio" else f"growth of {kind}",
        "metric": s.name,
        "statistic": statistic,
        "value": value,
        "lower": lo,
        "upper": hi,
        "threshold": threshold,
        "early_level": early_level,
        "late_level": late_level,
        "detected": detected,
        "onset_step": onset,
        "source": "bootstrap",
    }


def _spike_signal(
    kind: str, s: Series, cfg: InstabilityConfig, common: CommonConfig
) -> dict[str, Any]:
    early = edge_mask(s.steps, cfg.edge_fraction, late=False)
    late = edge_mask(s.steps, cfg.edge_fraction, late=True)
    level = np.maximum(smooth(s.values, common.smooth_fraction), np.median(s.values[early]))
    spike = s.values > cfg.growth_factor * level
    k_early, n_early = int(spike[early].sum()), int(early.sum())
    k_late, n_late = int(spike[late].sum()), int(late.sum())
    p_value = float(
        stats.fisher_exact(
            [[k_late, n_late - k_late], [k_early, n_early - k_early]], alternative="greater"
        ).pvalue
    )
    detected = bool(p_value <= cfg.spike_alpha)
    onset = None
    if detected:
        after = np.flatnonzero(spike & (s.steps > s.steps[early][-1]))
        onset = float(s.steps[after[0]]) if after.size else None
    nan = float("nan")
    return {
        "signal": f"more frequent {kind} spikes",
        "metric": s.name,
        "statistic": (
            f"Fisher p of spikes (> {cfg.growth_factor:g}x the level) in the last "
            f"{cfg.edge_fraction:.0%} vs the first"
        ),
        "value": p_value,
        "lower": nan,
        "upper": nan,
        "threshold": cfg.spike_alpha,
        "spikes_first_window": [k_early, n_early],
        "spikes_last_window": [k_late, n_late],
        "detected": detected,
        "onset_step": onset,
        "source": "Fisher exact test",
    }


def zeta_interval_limits(
    zeta: float, lo: float, hi: float, at_bounds: list[str], cfg: InstabilityConfig
) -> tuple[float, float, list[str]]:
    """The reported interval of a fitted damping ratio, opened where the run does not bound it.

    The Gauss-Newton interval ``[lo, hi]`` is a local approximation; it means nothing where
    the fit ended on a search bound of ``lsq.fit_oscillator`` or where the curve barely
    depends on ``zeta`` (the nearly undamped and the overdamped ridges,
    :mod:`bayes_grpo.dynamics.identifiability`), where it spans hundreds of decades. Then:

    * ``zeta`` on its lower bound (an undamped oscillation fits best): ``lo = 0``;
    * ``zeta`` on its upper bound, or ``w0`` on a bound with ``zeta >= 1`` (only the slow
      time scale, or a step, is seen): ``hi = inf``;
    * an interval wider than ``cfg.max_zeta_interval_ratio`` (``hi / lo``), or not finite:
      ``[0, inf]``.

    Returns ``(lo, hi, reasons)``, ``reasons`` empty when the interval stands as computed.
    Detection needs ``hi`` below the threshold, so an opened upper end never flags a run.
    """
    wide = not (np.isfinite(lo) and np.isfinite(hi) and lo > 0) or hi / lo > cfg.max_zeta_interval_ratio
    reasons = []
    if "zeta" in at_bounds and zeta < 1.0:
        lo = 0.0
        reasons.append(f"the fit ends on the lower bound of zeta ({zeta:.3g}: an undamped oscillation)")
    if zeta >= 1.0 and ("zeta" in at_bounds or "w0" in at_bounds):
        hi = float("inf")
        bound = "zeta" if "zeta" in at_bounds else "w0"
        reasons.append(f"the fit ends on a bound of {bound} (overdamped: only the slow time scale is seen)")
    if wide:
        reasons.append(
            f"its Gauss-Newton interval spans more than a factor {cfg.max_zeta_interval_ratio:g}"
            if not (np.isnan(lo) or np.isnan(hi))
            else "no Gauss-Newton interval (the fit's Jacobian is singular)"
        )
        lo, hi = 0.0, float("inf")
    return lo, hi, reasons


def _oscillation_signal(
    rew: Series, cfg: InstabilityConfig, common: CommonConfig
) -> dict[str, Any] | None:
    fit = _fits.fit_oscillator(rew.steps, rew.values)
    if fit is None or not np.isfinite(fit["zeta"]):
        return None
    zeta = float(fit["zeta"])
    half = stats.norm.ppf(0.5 + common.interval_prob / 2) * fit["log_zeta_sd"]
    with np.errstate(over="ignore"):
        lo, hi = (
            (float(np.exp(np.log(zeta) - half)), float(np.exp(np.log(zeta) + half)))
            if np.isfinite(half)
            else (float("nan"), float("nan"))
        )
    lo, hi, unidentified = zeta_interval_limits(zeta, lo, hi, fit.get("at_bounds", []), cfg)
    overshoot = float(relative_overshoot(zeta))
    # is the oscillation real? a trend, a better law than the single exponential, an
    # overshoot above the noise and a period the logging resolves
    sat = _fits.fit_saturation(rew.steps, rew.values)
    bic_gain = float(sat["bic"] - fit["bic"]) if sat is not None else float("inf")
    # the overshoot must show at the logged steps: a fit across a gap in the log can draw one
    # where nothing was logged (a NaN block over the rise), and that is no evidence of it
    amplitude = min(
        overshoot * abs(fit["plateau"] - fit["initial_reward"]),
        visible_overshoot(fit["fitted"], fit["plateau"], fit["initial_reward"]),
    )
    noise = _fits.noise_sd(rew.values)
    spacing = float(np.median(np.diff(rew.steps))) if len(rew) > 1 else 1.0
    period = 2 * np.pi / (fit["w0"] * np.sqrt(1 - zeta**2)) if zeta < 1 else float("inf")
    trend = _fits.has_trend(rew.steps, rew.values)
    checks = {
        "zeta_not_identified_because": unidentified,
        "reward_has_trend": bool(trend),
        "bic_gain_over_single_exponential": bic_gain,
        "overshoot_amplitude": float(amplitude),
        "noise_sd": noise,
        "period_steps": float(period),
    }
    failed = [
        why
        for ok, why in (
            (trend, "no trend in the reward"),
            (
                bic_gain >= cfg.min_bic_gain,
                f"BIC gain over the single exponential {bic_gain:.1f} < {cfg.min_bic_gain:g}",
            ),
            (
                amplitude >= cfg.min_amplitude_noise * noise,
                f"overshoot amplitude at the logged steps {amplitude:.3g} below {cfg.min_amplitude_noise:g} noise sd ({noise:.3g})",
            ),
            (
                period >= cfg.min_period_points * spacing,
                f"period {period:.3g} steps under {cfg.min_period_points:g} logging intervals",
            ),
        )
        if not ok
    ]
    flagged = zeta < cfg.zeta_threshold and hi < cfg.zeta_threshold and overshoot >= cfg.min_overshoot
    if flagged and not failed and cfg.process_noise_check:
        doubt = _process_noise_doubt(rew, cfg, common, checks)
        if doubt:
            # zeta >= zeta_threshold is not ruled out at interval_prob once the reward may
            # wander: the independent-noise interval below the threshold is not the interval
            # at that probability, so its upper end is open (as for an unidentified zeta)
            hi = float("inf")
        failed += doubt
    checks["not_credible_because"] = failed if zeta < cfg.zeta_threshold else []
    if zeta < cfg.zeta_threshold and hi < cfg.zeta_threshold and overshoot < cfg.min_overshoot:
        checks["overshoot_below_minimum"] = _small_overshoot(overshoot, cfg)
    detected = bool(flagged and not failed)
    onset = _plateau_crossing(rew.steps, fit["fitted"], fit["plateau"]) if detected else None
    return {
        "signal": "reward oscillation",
        "metric": "reward",
        "statistic": "damping ratio zeta (oscillator fit)",
        "value": zeta,
        "lower": lo,
        "upper": hi,
        "threshold": cfg.zeta_threshold,
        "overshoot": overshoot,
        "detected": detected,
        "onset_step": onset,
        "source": "Gauss-Newton",
        "fitted": fit["fitted"],
        "plateau": fit["plateau"],
        **checks,
    }


def _process_noise_doubt(
    rew: Series, cfg: InstabilityConfig, common: CommonConfig, checks: dict[str, Any]
) -> list[str]:
    """Why the oscillation is not credible once the reward may wander (empty if it is);
    adds the state-space test's numbers to ``checks``."""
    test = _fits.state_space_damping_test(rew.steps, rew.values, cfg.zeta_threshold, null_fit=True)
    if test is None:
        return []
    critical = float(stats.chi2.ppf(common.interval_prob, 1))
    checks["state_space_likelihood_ratio"] = test["likelihood_ratio"]
    checks["state_space_zeta"] = test["zeta"]
    checks["state_space_process_noise_share"] = test["process_noise_share"]
    where = (
        f"with process noise (state-space fit: zeta {test['zeta']:.2g}, {test['process_noise_share']:.0%} "
        f"of the noise variance wandering) zeta >= {cfg.zeta_threshold:g} is not ruled out"
    )
    if test["likelihood_ratio"] < critical:
        return [f"{where} (likelihood ratio {test['likelihood_ratio']:.2f} < {critical:.2f})"]
    # the chi-square(1) quantile is the large-sample calibration; a short run's ratio must
    # also beat the ratios of runs simulated from the best overdamped law (one-sided, as the
    # upper end of the interval: 5% at interval_prob 0.9)
    alpha = (1.0 - common.interval_prob) / 2.0
    n_boot = max(_fits.STATE_SPACE_BOOT, int(np.ceil(1.0 / alpha - 1.0 - 1e-9)))
    boot = _fits.state_space_null_pvalue(
        test, cfg.zeta_threshold, alpha, np.random.default_rng(common.seed), n_boot=n_boot
    )
    checks["state_space_bootstrap_p_value"] = boot["p_value"]
    # (1 - 0.9) / 2 is 0.04999..., and 1 / 20 must pass it
    if boot["p_value"] <= alpha * (1.0 + 1e-9):
        return []
    null = test["null_fit"]
    return [
        f"{where}: {boot['reaching']} of {boot['replicates']} runs simulated from the best law with "
        f"zeta >= {cfg.zeta_threshold:g} (zeta {null['zeta']:.2g}, {null['process_noise_share']:.0%} "
        f"wandering) reach its likelihood ratio {test['likelihood_ratio']:.2f} "
        f"(parametric bootstrap p >= {boot['p_value']:.2g} > {alpha:.2g})"
    ]


def _running_median3(values: np.ndarray) -> np.ndarray:
    """3-point running median (the end points kept)."""
    if values.size < 3:
        return values.copy()
    out = values.copy()
    out[1:-1] = np.median(np.stack([values[:-2], values[1:-1], values[2:]]), axis=0)
    return out


#: A spread or a difference of reward levels at most this share of the reward's largest magnitude
#: is float roundoff of a flat stretch, read as 0: a reward constant at 0.1 over 1000 steps read
#: "fall from the best 25% window to the last, in within-window sds = 144" (a window mean's
#: cumulative-sum roundoff over the roundoff of its sd) and "sd about a line, last 25% / central
#: 25% = 2.24" (the least-squares residuals' 1e-17 in both windows).
ROUNDOFF: float = 1e-9


def _flat(x: float, scale: float) -> float:
    """``x``, or 0 when ``|x|`` is within :data:`ROUNDOFF` of ``scale`` (the reward's largest
    magnitude)."""
    return 0.0 if abs(x) <= ROUNDOFF * scale else float(x)


def _ratio(num: float, den: float, *, both_zero: float, scale: float = 0.0) -> float:
    """``num / den`` for a spread ``den >= 0`` (a range or an sd), where a zero ``den`` (a flat
    window) gives ``inf`` when ``num > 0`` and ``both_zero`` otherwise (1: no growth; 0: no
    fall). The reward divergence, the growing swing and the collapse each wrote it out. Both
    are read as 0 within roundoff of ``scale`` (:func:`_flat`)."""
    num, den = _flat(num, scale), _flat(den, scale)
    if den > 0:
        return num / den
    return float("inf") if num > 0 else both_zero


def _magnitude(values: np.ndarray) -> float:
    """The largest finite ``|value|`` (0 for none): the scale of :func:`_flat`."""
    finite = np.abs(np.asarray(values, dtype=float))
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) if finite.size else 0.0


def _divergence_signal(rew: Series, cfg: InstabilityConfig) -> dict[str, Any] | None:
    values = _running_median3(rew.values)
    late = edge_mask(rew.steps, cfg.edge_fraction, late=True)
    before = ~late
    if before.sum() < 3:
        return None
    lo, hi = float(values[before].min()), float(values[before].max())
    late_lo, late_hi = float(values[late].min()), float(values[late].max())
    ratio = _ratio(late_hi - late_lo, hi - lo, both_zero=1.0, scale=_magnitude(rew.values))
    both_sides = bool(late_hi > hi and late_lo < lo)
    detected = bool(ratio >= cfg.growth_factor and both_sides)
    onset = None
    if detected:
        outside = np.flatnonzero(late & ((values > hi) | (values < lo)))
        onset = float(rew.steps[outside[0]])
    nan = float("nan")
    return {
        "signal": "reward divergence",
        "metric": "reward",
        "statistic": f"range of the last {cfg.edge_fraction:.0%} / range before",
        "value": float(ratio),
        "lower": nan,
        "upper": nan,
        "threshold": cfg.growth_factor,
        "earlier_range": [lo, hi],
        "late_range": [late_lo, late_hi],
        "beyond_earlier_range_on_both_sides": both_sides,
        "detected": detected,
        "onset_step": onset,
        "source": "reward range",
    }


def _block_means(values: np.ndarray, block: int) -> np.ndarray:
    """Means of consecutive blocks of ``block`` points, aligned on the last point (a partial
    first block is left out)."""
    values = np.asarray(values, dtype=float)
    n = (values.size // block) * block
    return values[values.size - n :].reshape(-1, block).mean(axis=1)


def _detrended_sd(steps: np.ndarray, values: np.ndarray) -> float:
    """Standard deviation of ``values`` about their least-squares line (``ddof = 2``)."""
    coef = np.polyfit(steps, values, 1)
    resid = values - np.polyval(coef, steps)
    return float(np.sqrt(np.sum(resid**2) / max(values.size - 2, 1)))


def _oscillation_growth_signal(
    rew: Series, cfg: InstabilityConfig, common: CommonConfig
) -> dict[str, Any] | None:
    late = edge_mask(rew.steps, cfg.edge_fraction, late=True)
    middle = middle_mask(rew.steps, cfg.edge_fraction) & ~late
    n_points = min(int(late.sum()), int(middle.sum()))
    if n_points < max(common.min_points, 3):
        return None
    # means of consecutive blocks of b points, min_points blocks per window: a swing that
    # lasts many logging intervals keeps its size while the step-to-step noise shrinks by b
    b = n_points // max(common.min_points, 3)
    blocks = {
        name: (_block_means(rew.steps[mask], b), _block_means(rew.values[mask], b))
        for name, mask in (("late", late), ("middle", middle))
    }
    n_late, n_mid = blocks["late"][1].size, blocks["middle"][1].size
    scale = _magnitude(rew.values)
    sd_late = _flat(_detrended_sd(*blocks["late"]), scale)
    sd_mid = _flat(_detrended_sd(*blocks["middle"]), scale)
    ratio = _ratio(sd_late, sd_mid, both_zero=1.0)
    # interval of the sd ratio of two independent windows: (s1/s2)^2 / (sigma1/sigma2)^2 ~ F
    # (none for two flat windows: the 1 is a convention, not an estimate)
    prob = common.interval_prob
    f_hi, f_lo = (
        stats.f.ppf(q, n_late - 2, n_mid - 2) for q in ((1 + prob) / 2, (1 - prob) / 2)
    )
    lo, hi = (
        (float(ratio / np.sqrt(f_hi)), float(ratio / np.sqrt(f_lo)))
        if sd_late > 0 or sd_mid > 0
        else (float("nan"), float("nan"))
    )
    mid_lo, mid_hi = float(blocks["middle"][1].min()), float(blocks["middle"][1].max())
    late_vals = blocks["late"][1]
    both_sides = bool(late_vals.max() > mid_hi and late_vals.min() < mid_lo)
    detected = bool(ratio >= cfg.growth_factor and both_sides)
    onset = None
    if detected:
        smoothed = _block_means(rew.values, b)
        at = _block_means(rew.steps, b)
        after = at > rew.steps[middle][-1]
        outside = np.flatnonzero(after & ((smoothed > mid_hi) | (smoothed < mid_lo)))
        # the block's first logged step: its mean step (275.5) is no step of the run
        first = rew.steps[rew.steps.size - at.size * b :: b]
        onset = float(first[outside[0]]) if outside.size else None
    return {
        "signal": "growing reward oscillation",
        "metric": "reward",
        "statistic": (
            f"sd about a line, last {cfg.edge_fraction:.0%} / central {cfg.edge_fraction:.0%}"
        ),
        "value": float(ratio),
        "lower": lo,
        "upper": hi,
        "threshold": cfg.growth_factor,
        "block_points": b,
        "central_sd": sd_mid,
        "late_sd": sd_late,
        "central_range": [mid_lo, mid_hi],
        "late_range": [float(late_vals.min()), float(late_vals.max())],
        "beyond_central_range_on_both_sides": both_sides,
        "detected": detected,
        "onset_step": onset,
        "source": "F distribution",
    }


def _collapse_signal(
    rew: Series, cfg: InstabilityConfig, common: CommonConfig
) -> dict[str, Any] | None:
    first = edge_mask(rew.steps, cfg.edge_fraction, late=False)
    last = edge_mask(rew.steps, cfg.edge_fraction, late=True)
    w = window_size(len(rew), cfg.edge_fraction)
    if w < 3 or len(rew) < 2 * w:
        return None
    means = window_means(rew.values, w)
    k = int(np.argmax(means))
    best = float(means[k])
    start_mean, end_mean = float(rew.values[first].mean()), float(rew.values[last].mean())
    # the last window's spread about its best one-fall fit: a collapse inside it (a run
    # stopped soon after) is its step, not its noise
    pooled = float(
        np.sqrt((np.var(rew.values[k : k + w], ddof=1) + fall_fit_variance(rew.values[last])) / 2)
    )
    fall, rise = best - end_mean, best - start_mean
    scale = _magnitude(rew.values)
    pooled = _flat(pooled, scale)
    value = _ratio(fall, pooled, both_zero=0.0, scale=scale)
    rise_sd = _ratio(rise, pooled, both_zero=0.0, scale=scale)
    below_start = bool(_flat(start_mean - end_mean, scale) > 0)
    detected = bool(below_start and value >= cfg.collapse_sd and rise_sd >= cfg.collapse_sd)
    onset = None
    if detected:
        smoothed = _running_median3(rew.values)
        condition = (smoothed < (best + end_mean) / 2) & (np.arange(len(rew)) >= k)
        idx = sustained_onset(condition, common.sustain_fraction)
        onset = float(rew.steps[idx]) if idx is not None else None
    nan = float("nan")
    return {
        "signal": "reward collapse",
        "metric": "reward",
        "statistic": (
            f"fall from the best {cfg.edge_fraction:.0%} window to the last, in within-window sds"
        ),
        "value": float(value),
        "lower": nan,
        "upper": nan,
        "threshold": cfg.collapse_sd,
        "best_window": [float(rew.steps[k]), float(rew.steps[k + w - 1])],
        "best_window_mean": best,
        "first_window_mean": start_mean,
        "last_window_mean": end_mean,
        "within_window_sd": pooled,
        "rise_in_within_window_sds": float(rise_sd),
        "ends_below_its_start": below_start,
        "detected": detected,
        "onset_step": onset,
        "source": "window means",
    }


def _plateau_crossing(steps: np.ndarray, fitted: np.ndarray, plateau: float) -> float | None:
    err = np.asarray(fitted) - plateau
    sign0 = np.sign(err[0])
    crossed = np.flatnonzero(np.sign(err) == -sign0) if sign0 != 0 else np.array([], dtype=int)
    return float(steps[crossed[0]]) if crossed.size else None


def _posterior_signals(
    draws: dict[str, np.ndarray],
    cfg: InstabilityConfig,
    common: CommonConfig,
    rew: Series | None = None,
) -> list[dict[str, Any]]:
    """Negative damping and oscillation from posterior draws; ``value`` is a posterior probability
    (no interval of its own: ``lower``/``upper`` NaN) and the draws' median and interval are kept
    under ``C_eff`` / ``zeta``. With ``rew`` (the run's reward, given when the draws come from a
    fit without process noise), an oscillation the draws show must also survive
    :func:`_process_noise_doubt` on it."""
    out = []
    prob = common.interval_prob
    nan = float("nan")
    if "C_eff" in draws:
        c = np.asarray(draws["C_eff"], dtype=float).ravel()
        p_neg = float(np.mean(c < 0))
        out.append(
            {
                "signal": "negative damping",
                "metric": "posterior C_eff",
                "statistic": "P(C_eff < 0)",
                "value": p_neg,
                "lower": nan,
                "upper": nan,
                "threshold": cfg.prob_threshold,
                "detected": bool(p_neg >= cfg.prob_threshold),
                "onset_step": None,
                "source": "posterior",
                "C_eff": {"median": float(np.median(c)), "interval": list(interval(c, prob))},
            }
        )
    if "zeta" in draws:
        z = np.asarray(draws["zeta"], dtype=float).ravel()
        p_osc = float(np.mean(z < cfg.zeta_threshold))
        overshoot = float(np.median(relative_overshoot(z)))
        signal = {
            "signal": "reward oscillation",
            "metric": "posterior zeta",
            "statistic": f"P(zeta < {cfg.zeta_threshold})",
            "value": p_osc,
            "lower": nan,
            "upper": nan,
            "threshold": cfg.prob_threshold,
            "overshoot": overshoot,
            "detected": bool(p_osc >= cfg.prob_threshold and overshoot >= cfg.min_overshoot),
            "onset_step": None,
            "source": "posterior",
            "zeta": {"median": float(np.median(z)), "interval": list(interval(z, prob))},
        }
        if p_osc >= cfg.prob_threshold and overshoot < cfg.min_overshoot:
            signal["overshoot_below_minimum"] = _small_overshoot(overshoot, cfg)
        if signal["detected"] and rew is not None and cfg.process_noise_check:
            failed = _process_noise_doubt(rew, cfg, common, signal)
            signal["not_credible_because"] = failed
            signal["detected"] = not failed
        out.append(signal)
    return out


def instability(
    frame: pd.DataFrame,
    *,
    run_id: str,
    config: InstabilityConfig | None = None,
    common: CommonConfig | None = None,
    posterior_draws: dict[str, np.ndarray] | None = None,
    posterior_with_process_noise: bool = False,
) -> CheckResult:
    """Is the run dynamically unstable (growing side quantities, oscillation, negative damping)?

    Parameters
    ----------
    frame
        One run's metrics indexed by optimizer step (NaN where not logged).
    run_id
        The run's id.
    config, common
        Thresholds.
    posterior_draws
        ``{"zeta": draws, "C_eff": draws}`` for this run's setting from a fitted
        ``GRPODynamicsModel``; replaces the least-squares oscillator fit and adds the
        negative-damping test.
    posterior_with_process_noise
        True when ``posterior_draws`` come from a fit with the state-space likelihood (the
        SDE's process noise in the model): their oscillation is taken as it is. Otherwise
        (i.i.d. residuals, or draws of unknown origin) an oscillation they show must survive
        the process-noise check on the run's reward, as the least-squares fit's must.

    Returns
    -------
    CheckResult
        See the module docstring.
    """
    config = config or InstabilityConfig()
    common = common or CommonConfig()
    rng = np.random.default_rng(common.seed)
    signals: list[dict[str, Any]] = []
    # not_logged: the kinds none of whose names a run logs; left_out: why a logged one is not read
    looked, not_logged, left_out = [], [], []
    rew = (
        finite_series(frame.index.to_numpy(), frame["reward"].to_numpy(dtype=float), "reward")
        if "reward" in frame
        else None
    )
    # side quantities whose finite values stop before the run's last window while the reward goes
    # on: a grad norm that became inf (or nan) from step 151 of 200 read "growth of grad norm
    # late/early median ratio 1", its "late" window the steps up to 150, without a word
    ends_early: list[str] = []
    for kind, names in (
        ("grad norm", config.grad_norm_metrics),
        ("importance ratio", config.importance_ratio_metrics),
        ("clip ratio", config.clip_ratio_metrics),
        ("KL", config.kl_metrics),
    ):
        s = find_series(frame, names, min_points=common.min_points)
        if s is not None and rew is not None and len(rew) >= 2:
            late_start = rew.steps[-1] - config.edge_fraction * (rew.steps[-1] - rew.steps[0])
            if s.steps[-1] < late_start:
                ends_early.append(
                    f"{s.name} has no finite value after step {s.steps[-1]:.0f} while the reward "
                    f"goes on to step {rew.steps[-1]:.0f}: its windows end there (a blow-up logs it "
                    "as nan or inf, which a run set keeps as NaN)"
                )
        if s is not None and kind != "clip ratio":
            # an exact 0 (grad norm of a step whose groups all had zero spread) is a step
            # without signal, not a level: growth is measured on the other steps. A KL
            # estimate below 0 (k1) is a small KL's noise, kept: dropping it left the
            # positive half of the noise as the central level
            keep = s.values != 0 if kind == "KL" else s.values > 0
            if keep.sum() < common.min_points:
                # logged, but (nearly) all 0: no level to read, which is not "not logged"
                left_out.append(_no_level_note(kind, s, int(keep.sum())))
                continue
            s = Series(s.name, s.steps[keep], s.values[keep])
        why = not_a_share(s, "tokens") if s is not None and kind == "clip ratio" else None
        if why is not None:
            # a share of tokens lies in [0, 1]; one logged as a percentage (2 for 2%) read as
            # "sustained clipping, largest mean clip ratio 2" on a run that clips 2% of tokens
            left_out.append(f"{why}, left out")
            continue
        if s is not None:
            signals.append(_growth_signal(kind, s, config, common, rng))
            if kind in ("grad norm", "importance ratio"):
                signals.append(_spike_signal(kind, s, config, common))
        else:
            not_logged.append(kind)
            looked.append(f"{kind} ({', '.join(names)})")
            if kind == "importance ratio":
                left_out.extend(_sampler_ratio_note(frame, names))

    osc = None
    if posterior_draws:
        enough_reward = rew is not None and len(rew) >= common.min_points
        signals.extend(
            _posterior_signals(
                posterior_draws,
                config,
                common,
                rew if enough_reward and not posterior_with_process_noise else None,
            )
        )
    elif config.fit_oscillation and rew is not None and len(rew) >= common.min_points:
        osc = _oscillation_signal(rew, config, common)
        if osc is not None:
            signals.append(osc)
    if config.fit_oscillation and rew is not None and len(rew) >= common.min_points:
        for reward_signal in (
            _divergence_signal(rew, config),
            _oscillation_growth_signal(rew, config, common),
            _collapse_signal(rew, config, common),
        ):
            if reward_signal is not None:
                signals.append(reward_signal)
    if not signals:
        return not_assessable(
            MODE,
            run_id,
            (
                f"none of {', '.join(looked)} logged with >= {common.min_points} points, and "
                if looked
                else ""
            )
            + "no reward oscillation fit"
            + (" (fit_oscillation is off)" if not config.fit_oscillation else "")
            + "".join(f"; {note}" for note in left_out),
        )

    for s in signals:  # whole steps as ints (JSON, the report's table)
        s["onset_step"] = step_number(s["onset_step"])
        s["note"] = signal_note(s)  # the table's note column and --json's evidence
    detected_signals = [s for s in signals if s["detected"]]
    detected = bool(detected_signals)
    onsets = [s["onset_step"] for s in detected_signals if s["onset_step"] is not None]
    onset_step = min(onsets) if onsets else None
    lead = detected_signals[0] if detected else _weakest_margin(signals)
    st = strength(
        f"{lead['signal']}: {lead['statistic']}",
        lead["value"],
        lead["lower"],
        lead["upper"],
        prob=common.interval_prob,
        source=lead["source"],
    )
    table = pd.DataFrame(
        [
            {
                k: s.get(k)
                for k in (
                    "signal",
                    "metric",
                    "statistic",
                    "value",
                    "lower",
                    "upper",
                    "threshold",
                    "detected",
                    "onset_step",
                )
            }
            for s in signals
        ]
    ).set_index("signal")
    # ints and None, not floats and NaN: pandas makes a column of ints and None float
    table["onset_step"] = pd.Series([s["onset_step"] for s in signals], table.index, dtype=object)
    table["note"] = pd.Series([s["note"] for s in signals], table.index, dtype=object)
    evidence = {
        "signals": [{k: v for k, v in s.items() if k not in ("fitted",)} for s in signals],
        "not_logged": not_logged,
        "left_out": left_out,
        "ends_early": ends_early,
    }
    oscillation_only = False
    if detected:
        names = ", ".join(
            f"{s['signal']} ({s['metric']}: {s['statistic']} = {s['value']:.3g})"
            for s in detected_signals
        )
        summary = f"instability detected: {names}; strength {fmt_interval(st)}" + (
            f", from step {onset_step:.0f}." if onset_step is not None else "."
        )
        oscillation_only = all(s["signal"] in WITHIN_THE_LAW for s in detected_signals)
        if oscillation_only:
            # an oscillation that settles is the law's underdamped regime: say that no signal of
            # growth or divergence came with it (fit and forecast leave it out for that reason)
            summary += (
                " Only a reward oscillation was detected: "
                f"{LAW_STATISTIC_MEANING['reward oscillation']}; no signal of growth, divergence "
                "or negative damping came with it."
            )
    else:
        summary = (
            "not detected: "
            + "; ".join(
                f"{s['signal']} {s['statistic']} = {s['value']:.3g}"
                + (f" {interval_text(s['lower'], s['upper'])}" if np.isfinite(s["lower"]) else "")
                + (
                    f" (posterior median {s[k]['median']:.3g} [{s[k]['interval'][0]:.3g}, {s[k]['interval'][1]:.3g}])"
                    if (
                        k := {"negative damping": "C_eff", "reward oscillation": "zeta"}.get(
                            s["signal"]
                        )
                    )
                    in s
                    else ""
                )
                + (
                    " (grown, but no longer growing at the end: its median over the last "
                    f"{config.edge_fraction:.0%} of the run is below the central {config.edge_fraction:.0%}'s)"
                    if s.get("still_growing_at_end") is False
                    and s["value"] >= config.growth_factor
                    and s["lower"] > 1.0
                    else ""
                )
                + (
                    f" (zeta not identified by this run: {'; '.join(s['zeta_not_identified_because'])})"
                    if s.get("zeta_not_identified_because")
                    else ""
                )
                + (
                    f" (oscillation not credible: {', '.join(s['not_credible_because'])})"
                    if s.get("not_credible_because")
                    else ""
                )
                + (f" ({s['overshoot_below_minimum']})" if s.get("overshoot_below_minimum") else "")
                for s in signals
            )
            + "."
        )
        if any(_underdamped(s, config) for s in signals):
            # P(zeta < 1) = 1 beside "not detected" read as a contradiction: say what it measures
            summary += f" {_law_statistics_note(signals)}."
    if left_out:
        summary += " " + "; ".join(left_out) + "."
    if ends_early:
        summary += " " + "; ".join(ends_early) + "."
    if looked and not detected:
        # a run of reward only read "not detected: reward oscillation ...; reward collapse ..." as
        # if grad norm, importance ratio, clipping and KL had been looked at and found quiet
        summary += f" Not logged, so not assessed: {'; '.join(looked)}."
    figure = _figure(frame, signals, rew, osc, onset_step, run_id) if common.figures else None
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
        remedy=OSCILLATION_REMEDY if oscillation_only else None,
    )


def _underdamped(signal: dict[str, Any], cfg: InstabilityConfig) -> bool:
    """An oscillation signal, not detected, whose law is underdamped all the same (posterior
    P(zeta < threshold) at least ``prob_threshold``, or a fitted zeta whose interval lies below
    the threshold: one the run does not bound, ``[0, inf]``, says nothing either way)."""
    if signal["signal"] != "reward oscillation" or signal["detected"]:
        return False
    if signal["source"] == "posterior":
        return signal["value"] >= cfg.prob_threshold
    return signal["upper"] < cfg.zeta_threshold


def _law_statistics_note(signals: list[dict[str, Any]]) -> str:
    """The sentence that says what the law's damping statistics measure (a not-detected verdict
    beside an underdamped law)."""
    names = [n for n in LAW_STATISTIC_MEANING if any(s["signal"] == n for s in signals)]
    return "The law's damping: " + "; ".join(
        LAW_STATISTIC_MEANING[n] + (f" ({UNDERDAMPED_FLAGGED_WHEN})" if n == "reward oscillation" else "")
        for n in names
    )


def _no_level_note(kind: str, s: Series, kept: int) -> str:
    """Why a side quantity logged with enough points is not read: (nearly) all of it is 0."""
    zero = int(s.values.size - kept)
    where = f"all {zero}" if kept == 0 else f"{zero} of its {s.values.size}"
    note = f"{s.name} is {'0' if kind == 'KL' else '0 or below'} at {where} logged steps"
    if kept == 0 and kind == "KL":
        # TRL before the beta != 0 guard, OpenRLHF (a float 0 for kl_loss): a run without a
        # KL term logs its KL as 0. Logged, so not "not logged"; but no KL was measured
        return (
            f"{note}: logged, but 0 is no measured KL to the reference (a run without a KL "
            "term, beta = 0, may log it so): no KL signal"
        )
    if kept == 0:
        return f"{note}: logged, but no {kind} level to read, left out"
    return f"{note}: fewer than min_points other points to read, left out"


def _sampler_ratio_note(frame: pd.DataFrame, names: tuple[str, ...]) -> list[str]:
    """A run that logs TRL's vLLM importance-sampling correction but not the PPO ratio: name it
    and say why it is not read as the importance ratio (``config.SAMPLER_RATIO_NAMES``)."""
    logged = [
        n
        for n in SAMPLER_RATIO_NAMES
        if n not in names and n in frame.columns and np.isfinite(frame[n].to_numpy(float)).any()
    ]
    if not logged:
        return []
    return [
        f"{logged[0]} is logged but not read as the importance ratio: it is TRL's correction "
        "between the vLLM sampler and the trained model (their token probabilities' ratio, "
        "capped at vllm_importance_sampling_cap), not the PPO ratio pi_theta / pi_old"
    ]


def _weakest_margin(signals: list[dict[str, Any]]) -> dict[str, Any]:
    """The signal closest to its threshold (reported as the strength of a healthy run)."""

    def margin(s: dict[str, Any]) -> float:
        if s["signal"].startswith("growth") or s["signal"] in (
            "sustained clipping",
            "reward divergence",
            "growing reward oscillation",
            "reward collapse",
        ):
            return float(np.log(max(s["value"], 1e-12)) - np.log(s["threshold"]))
        if s["source"] == "posterior":
            return s["value"] - s["threshold"]
        if s["source"] == "Fisher exact test":  # a p-value: smaller is stronger
            return float(np.log(s["threshold"]) - np.log(max(s["value"], 1e-300)))
        return s["threshold"] - s["value"]  # zeta below threshold -> positive

    return max(signals, key=margin)


#: Colours of the side quantities in the instability figure: the cycle without blue (the
#: reward's) and red (the oscillator fit's and the onset line's, as the report's caption says).
_SIDE_COLOURS: tuple[str, ...] = ("C1", "C2", "C4", "C5", "C6", "C7", "C8", "C9")


def _figure(frame, signals, rew, osc, onset_step, run_id):
    # a bare Figure (not pyplot): no global backend switch, no open-figure registry
    from matplotlib.figure import Figure

    # 8 in wide: the legends stand to the right of the axes (legend_beside), where they cover
    # no data (placed inside, the reward's legend lay over the logged points it names)
    fig = Figure(figsize=(8.0, 4.6))
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    if rew is not None:
        ax1.plot(rew.steps, rew.values, ".", ms=3, alpha=0.5, color="C0", label="reward")
        if osc is not None:
            ax1.plot(
                rew.steps,
                osc["fitted"],
                color="C3",
                lw=1.2,
                label=f"oscillator fit, zeta={osc['value']:.2f}",
            )
    ax1.set_ylabel("reward")
    legend_beside(ax1, fontsize=6)
    for i, s in enumerate(
        x
        for x in signals
        if x["signal"].startswith("growth") or x["signal"] == "sustained clipping"
    ):
        col = frame[s["metric"]].to_numpy(dtype=float)
        ok = np.isfinite(col)
        steps = frame.index.to_numpy(dtype=float)[ok]
        # the label says what the curve is divided by and which statistic the signal is: a side
        # quantity that starts at 0 (clipping) has no early median to divide by, and the clip
        # signal is a level, not a late/early ratio
        peak = float(np.nanmax(np.abs(col[ok]))) if ok.any() else 0.0
        if s["early_level"] > 0:
            base = s["early_level"]
            basis = " / central median" if s["signal"] == "growth of KL" else " / early median"
        elif peak > 0:
            base, basis = peak, " / its maximum"
        else:
            base, basis = 1.0, ""
        stat = (
            f"{s['statistic'].split()[0]} x{s['value']:.2g}"
            if s["signal"].startswith("growth")
            else f"{s['statistic']}: {s['value']:.2g}"
        )
        # not red (C3), the colour the report's caption gives the onset line and the
        # oscillator fit: the third side quantity (clip_ratio) was drawn red as well
        ax2.plot(
            steps, col[ok] / base, lw=0.9, color=_SIDE_COLOURS[i % len(_SIDE_COLOURS)], label=f"{s['metric']}{basis} ({stat})"
        )
    ax2.set_yscale("symlog", linthresh=0.1)
    ax2.set_ylabel("side quantity, relative")
    ax2.set_xlabel("optimizer step")
    if ax2.get_legend_handles_labels()[0]:
        legend_beside(ax2, fontsize=6)
    if onset_step is not None:
        for ax in (ax1, ax2):
            ax.axvline(onset_step, color="C3", lw=1.0)
    ax1.set_title(plot_text(f"dynamical instability: {run_id}"), fontsize=9)
    fig.tight_layout()
    return fig
