"""Advantage degeneracy: most groups carry no gradient signal.

GRPO normalises rewards within each group of ``G`` completions; a group whose rewards are
all equal has zero advantage everywhere and contributes nothing. TRL logs the share of
such groups as ``frac_reward_zero_std``. For a binary reward with success probability
``p`` shared by every prompt, the expected share is ``p^G + (1 - p)^G``; a logged share
above that expectation means prompts are heterogeneous (some always solved, some never).

When the share is not logged it is derived from the mean within-group standard
deviation ``reward_std`` (binary rewards, known ``G``): if the non-degenerate groups
spread like binomial groups at the current reward, then

    reward_std = (1 - f) * E[s | not degenerate] = (1 - f) * E_binom[s] / (1 - P0(p))

so ``f = 1 - reward_std * (1 - P0(p)) / E_binom[s]`` (clipped to [0, 1]), with
``P0(p) = p^G + (1-p)^G`` and ``E_binom[s]`` the mean sample std of ``G`` Bernoulli(p)
draws. It equals ``P0(p)`` for homogeneous prompts and 1 when no group has spread.
This is a documented estimate, marked as such in the result.

``P0(p)`` is never below ``2^(1-G)`` (its value at ``p = 1/2``): at ``G = 2`` half of all groups
are all-equal at every success rate, so such a run reads as degenerate from its first step; a
detected verdict says so (:func:`group_size_floor_note`).

A per-group share of a binary reward cannot stay below ``P0(p)`` (prompts that differ only
raise it). A logged share that is only ever 0 or 1 (one group a step, or a test of the whole
batch) and is 1 at fewer steps than even one binary group a step would be all-equal at
(:func:`all_equal_steps_pvalue` at most :data:`BATCH_SHARE_ALPHA`) is no per-group share if the
reward is binary (TRL's GRPOTrainer with ``scale_rewards="batch"`` tested the batch's one std,
``frac_reward_zero_std`` then 0 unless the whole batch had one reward): the result says so
beside its verdict (a reward with partial credit may truly have no all-equal group, so the
verdict stands).

A derived share reads ``reward_std`` as the mean of the groups' own stds (TRL 0.1x). A std over the
whole batch (TRL 1.x's ``reward_std``) is told by :func:`whole_batch_size` only when each logged value
is one batch's: averaged over several batches (``logging_steps`` > 1, or a framework logging a mean
of per-batch stds) its ratio to ``r (1 - r)`` moves from step to step, and it spreads more than the
groups do, so the share derived from it is too low. The verdict says what it assumed, and when the
derived share lies well below ``p^G + (1-p)^G`` (:data:`DERIVED_BELOW_BINOMIAL`), where no share of
a binary reward's all-equal groups stays, it says the std is no mean within-group std (the verdict
stands: near a reward of 0.5 with a large ``G`` the expectation is near 0 and the two cannot be told
apart from the log).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bayes_grpo.checks.base import CheckResult, plot_text
from bayes_grpo.diagnostics._result import assessed, fmt_interval, not_assessable, strength
from bayes_grpo.diagnostics._series import (
    align,
    bootstrap,
    edge_mask,
    find_series,
    interval,
    longest_run,
    not_a_share,
    smooth,
    span,
    sustained_onset,
    window_size,
)
from bayes_grpo.diagnostics.config import CommonConfig, DegeneracyConfig

MODE = "advantage_degeneracy"

#: A logged zero-spread share that is only ever 0 or 1 is named as no per-group share when it is
#: 1 at so few steps that one binary group a step (each all-equal with probability at least
#: ``p^G + (1-p)^G``) would show as few with at most this probability: far beyond noise. TRL's
#: GRPOTrainer with ``scale_rewards="batch"`` tested the batch's one std
#: (``rewards.std().expand_as(rewards)``) for ``frac_reward_zero_std``: 0 unless the whole batch
#: had one reward. A run of one prompt a step logs a true per-group share of 0 or 1 too, as
#: often as the binomial says.
BATCH_SHARE_ALPHA: float = 1e-3


#: A share derived from a reward std whose final-window interval lies wholly below this share of
#: the binomial expectation ``p^G + (1-p)^G`` (at the reward's moving mean) is named as read from no
#: mean within-group std: such a std of a binary reward gives the expectation for prompts alike
#: (more for prompts that differ), a whole-batch std averaged over batches gives less. Over
#: simulated logs of mean within-group stds (G 2-16, 2-32 prompts, prompts alike or not, 40-200
#: steps, rising, flat or mid rewards; 864 runs) none is named (5% at 1.0, against the
#: expectation at each step's own reward); over whole-batch stds averaged over 2-4 batches
#: (G 4-16, 8-32 prompts, prompts that differ; 72 runs) 68% are: the others sit at rewards near
#: 0.5 with G >= 8, where the expectation is near 0 (scratch study of the session that added it,
#: by ``diagnose`` itself at the default settings).
DERIVED_BELOW_BINOMIAL: float = 0.8


def all_equal_steps_pvalue(ones: int, expected: np.ndarray) -> float:
    """``P(K <= ones)`` for ``K`` the number of steps whose one group is all-equal, the steps
    independent with probabilities ``expected`` (``p^G + (1-p)^G`` at each step's reward; a
    Poisson-binomial lower tail, exact)."""
    probs = np.clip(np.asarray(expected, dtype=float), 0.0, 1.0)
    dist = np.zeros(ones + 1)
    dist[0] = 1.0
    for q in probs:  # the law of K after each step, truncated at `ones`
        dist[1:] = dist[1:] * (1.0 - q) + dist[:-1] * q
        dist[0] *= 1.0 - q
    return float(min(dist.sum(), 1.0))


def group_size_floor_note(group_size: int | None, flag_fraction: float) -> str | None:
    """A note when ``G`` alone puts a binary reward's all-equal share at the flag level or above.

    ``p^G + (1-p)^G`` is smallest at ``p = 1/2``, where it is ``2^(1-G)``: at ``G = 2`` half of
    all groups are all-equal whatever the success rate, so a run at that group size reads as
    degenerate from its first step (the default flag level is 0.5). None when some reward level
    lies below the flag, or ``G`` is unknown.
    """
    if group_size is None or not group_size >= 2:
        return None
    floor = 2.0 ** (1 - int(group_size))
    if floor < flag_fraction:
        return None
    return (
        f"at G = {int(group_size)} a binary reward leaves at least {floor:.2f} of the groups "
        f"all-equal at every success rate (p^G + (1-p)^G is {floor:.2f} at p = 1/2), at or above "
        f"the flag level {flag_fraction}: the group size itself leaves that share of groups "
        "without signal (a larger G, or a reward with partial credit, gives them signal)"
    )


def binomial_zero_spread(p: np.ndarray | float, group_size: int) -> np.ndarray:
    """Probability ``p^G + (1-p)^G`` that ``G`` Bernoulli(p) rewards are all equal.

    Parameters
    ----------
    p
        Success probability per completion, in [0, 1]; any shape.
    group_size
        ``G``, completions per prompt (>= 1).
    """
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    return p**group_size + (1.0 - p) ** group_size


def binomial_mean_std(p: np.ndarray | float, group_size: int, ddof: int = 1) -> np.ndarray:
    """Expected within-group sample std of ``G`` Bernoulli(p) rewards (``ddof`` as logged).

    ``E[s] = sum_k Binom(k; G, p) sqrt(k (G - k) / (G (G - ddof)))``; same shape as ``p``.
    """
    if group_size - ddof <= 0:
        raise ValueError(f"group size {group_size} too small for a std with ddof={ddof}")
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    k = np.arange(group_size + 1)
    s_k = np.sqrt(k * (group_size - k) / (group_size * (group_size - ddof)))
    pmf = stats.binom.pmf(k[None, :], group_size, np.atleast_1d(p).ravel()[:, None])
    return (pmf @ s_k).reshape(np.shape(p))


def zero_spread_from_std(
    reward_std: np.ndarray, p: np.ndarray, group_size: int, ddof: int = 1
) -> np.ndarray:
    """Share of zero-spread groups derived from the mean within-group std (see module doc).

    Parameters
    ----------
    reward_std
        Mean within-group std, in units of the binary reward's range (so in [0, 1]); (n,).
    p
        Mean reward mapped to [0, 1]; (n,).
    """
    p0 = binomial_zero_spread(p, group_size)
    es = binomial_mean_std(p, group_size, ddof)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = 1.0 - np.asarray(reward_std, dtype=float) * (1.0 - p0) / es
    f = np.where(es <= 0, 1.0, f)
    return np.clip(f, 0.0, 1.0)


#: ``reward_std^2 / (r (1 - r))`` of a binary reward's std over one whole batch is ``N / (N - 1)``
#: at every step (ddof 1): told from the mean of the groups' stds, which moves from step to step,
#: when its spread (max - min) over the steps whose mean reward lies in
#: ``BATCH_STD_REWARD_RANGE`` is at most this share of its median (a log printed to 4 decimals
#: moves it by at most 0.3% there).
BATCH_STD_TOLERANCE: float = 5e-3
BATCH_STD_REWARD_RANGE: tuple[float, float] = (0.05, 0.95)


def whole_batch_size(reward_std: np.ndarray, p: np.ndarray, ddof: int = 1) -> int | None:
    """The batch size ``N`` when ``reward_std`` is a binary reward's std over one whole batch of
    ``N`` rewards at every step, else None.

    TRL 1.x logs ``reward_std`` as ``nanstd(rewards)`` over the batch (TRL 0.1x: the mean of
    the groups' stds, which the share is derived from); verl's ``critic/score/std`` likewise.
    For a binary reward that std is a function of the mean: ``reward_std^2 = N / (N - ddof)
    r (1 - r)``, one constant ratio at every step (:data:`BATCH_STD_TOLERANCE`), ``N = ddof c /
    (c - 1)`` (roughly, for a log printed rounded: ``c - 1 = 1 / (N - 1)`` is small). None with ``ddof`` 0 (the ratio is then 1 whatever ``N``) or fewer than 3 steps
    whose mean lies in :data:`BATCH_STD_REWARD_RANGE`.

    Parameters
    ----------
    reward_std
        The logged std in units of the binary reward's range; (n,).
    p
        Mean reward mapped to [0, 1]; (n,).
    """
    reward_std, p = np.asarray(reward_std, dtype=float), np.asarray(p, dtype=float)
    low, high = BATCH_STD_REWARD_RANGE
    ok = np.isfinite(reward_std) & np.isfinite(p) & (p > low) & (p < high) & (reward_std > 0)
    if ddof < 1 or ok.sum() < 3:
        return None
    ratio = reward_std[ok] ** 2 / (p[ok] * (1.0 - p[ok]))
    centre = float(np.median(ratio))
    if centre <= 1.0 or np.ptp(ratio) > BATCH_STD_TOLERANCE * centre:
        return None
    return int(round(ddof * centre / (centre - 1.0)))


def reward_range_for(reward: np.ndarray, config: DegeneracyConfig) -> tuple[float, float] | None:
    """The binary reward's ``(low, high)``: the configured one, else (0, 1) if all rewards lie in it;
    None when there is none, or when the run's rewards leave the configured one (one setting for
    every run of a run set: a run on another scale has no success probability in it)."""
    finite = reward[np.isfinite(reward)]
    if config.reward_range is not None:
        low, high = map(float, config.reward_range)
        if not high > low:
            raise ValueError(
                f"degeneracy.reward_range must have high > low, got {config.reward_range}"
            )
        slack = 1e-9 * (high - low)
        if finite.size and (finite.min() < low - slack or finite.max() > high + slack):
            return None
        return low, high
    if finite.size and finite.min() >= 0.0 and finite.max() <= 1.0:
        return 0.0, 1.0
    return None


def advantage_degeneracy(
    frame: pd.DataFrame,
    *,
    run_id: str,
    group_size: float = float("nan"),
    config: DegeneracyConfig | None = None,
    common: CommonConfig | None = None,
    plateau_draws: np.ndarray | None = None,
    group_size_source: str | None = None,
) -> CheckResult:
    """Is most of the batch carrying no signal (zero within-group reward spread)?

    Parameters
    ----------
    frame
        One run's metrics indexed by optimizer step (NaN where not logged).
    run_id
        The run's id (for messages).
    group_size
        ``G`` (NaN when unknown: the binomial expectation and the derivation from
        ``reward_std`` are then not available).
    config, common
        Thresholds (:class:`DegeneracyConfig`, :class:`CommonConfig`).
    plateau_draws
        Posterior draws of the plateau ``p*`` (same units as the reward), optional: gives the
        binomial zero-spread share expected at the plateau, with its interval.
    group_size_source
        Where ``group_size`` came from (``diagnose``: ``"the run set"``, the default given to
        it, or the fit's), kept as ``evidence["group_size_source"]``; the summary names a
        source other than the run set.

    Returns
    -------
    CheckResult
        ``detected`` when the zero-signal share over the final window, or over a sustained
        stretch, exceeds ``config.flag_fraction``. Strength: mean share from the onset to
        the end (final window if no onset; over the stretch when only a stretch that ended
        is above the flag level), with a block-bootstrap interval.
    """
    config = config or DegeneracyConfig()
    common = common or CommonConfig()
    G = int(group_size) if np.isfinite(group_size) and group_size >= 1 else None
    reward_all = frame["reward"].to_numpy(dtype=float) if "reward" in frame else np.array([])
    rng_range = reward_range_for(reward_all, config) if reward_all.size else None

    share = find_series(frame, config.zero_std_metrics, min_points=common.min_points)
    source = "logged"
    if share is None:
        std = find_series(frame, config.reward_std_metrics, min_points=common.min_points)
        missing = []
        if std is None and not config.reward_std_metrics:
            missing.append(
                f"no zero-spread share ({', '.join(config.zero_std_metrics)}) with >= {common.min_points} "
                "points, and its derivation from a reward std is off (degeneracy.reward_std_metrics is empty)"
            )
        elif std is None:
            missing.append(
                f"no zero-spread share ({', '.join(config.zero_std_metrics)}) nor reward std ({', '.join(config.reward_std_metrics)}) with >= {common.min_points} points"
            )
        if G is None:
            missing.append("group size G unknown (needed to derive the share from reward_std)")
        elif G - config.std_ddof <= 0:
            # G = 1 is known, not "unknown": one completion per prompt has no spread to log
            missing.append(
                f"group size G = {G} has no within-group std (ddof {config.std_ddof}) to derive "
                "the share from"
            )
        if rng_range is None and config.reward_range is not None:
            finite = reward_all[np.isfinite(reward_all)]
            missing.append(
                f"rewards from {finite.min():g} to {finite.max():g} leave degeneracy.reward_range "
                f"{tuple(config.reward_range)}: not a binary reward on that range"
            )
        elif rng_range is None:
            missing.append("reward not binary in a known range (set degeneracy.reward_range)")
        if missing and std is not None:
            # the share's own names, first: a misspelt --set degeneracy.zero_std_metrics read
            # "group size G unknown ..." without naming the metric it did not find
            missing.insert(
                0,
                f"no zero-spread share ({', '.join(config.zero_std_metrics) or 'none named'}) with "
                f">= {common.min_points} points, and its derivation from {std.name} is not possible",
            )
        if missing:
            return not_assessable(MODE, run_id, "; ".join(missing))
        low, high = rng_range  # type: ignore[misc]
        p = (
            align(
                std.steps,
                frame.index.to_numpy(dtype=float)[np.isfinite(reward_all)],
                reward_all[np.isfinite(reward_all)],
            )
            - low
        ) / (high - low)
        ok = np.isfinite(p)
        std_in_range = std.values[ok] / (high - low)  # in units of the binary reward's range
        batch = whole_batch_size(std_in_range, p[ok], config.std_ddof)
        if batch is not None:
            return not_assessable(
                MODE,
                run_id,
                f"{std.name} is the std over the whole batch of about {batch} rewards a step (its "
                "square is N / (N - 1) r (1 - r) at every step, for the mean reward r; TRL 1.x "
                "logs reward_std so), not the mean within-group spread the zero-spread share "
                "is derived from; log the share of all-equal groups (TRL: frac_reward_zero_std)",
            )
        steps, values = (
            std.steps[ok],
            zero_spread_from_std(std_in_range, p[ok], G, config.std_ddof),
        )  # type: ignore[arg-type]
        name = f"derived from {std.name}"
        source = "derived"
        if steps.size < common.min_points:
            return not_assessable(
                MODE,
                run_id,
                f"fewer than {common.min_points} steps with both reward and {std.name}",
            )
    else:
        # a share lies in [0, 1]; one logged as a percentage (20 for 20%) was clipped to 1 and
        # read as "every group degenerate": detected from the first step
        why = not_a_share(share, "groups")
        if why is not None:
            return not_assessable(MODE, run_id, why)
        steps, values, name = share.steps, np.clip(share.values, 0.0, 1.0), share.name

    rng = np.random.default_rng(common.seed)
    smoothed = smooth(values, common.smooth_fraction)
    late = edge_mask(steps, config.late_fraction, late=True)
    final_share = float(values[late].mean())
    above = smoothed > config.flag_fraction
    stretch_len, stretch_start, stretch_end = longest_run(above, steps)
    run_span = span(steps)
    long_stretch = stretch_len >= config.min_duration_fraction * run_span
    detected = bool(final_share > config.flag_fraction or long_stretch)
    episode = detected and final_share <= config.flag_fraction and stretch_start is not None
    # an episode that ended begins where its stretch does (a smoothed share back above the flag
    # at the last two steps was "sustained" to the end: 94 steps above from step 1 read "from
    # step 299")
    onset_idx = stretch_start if episode else sustained_onset(above, common.sustain_fraction)
    if detected and onset_idx is None and stretch_start is not None:
        onset_idx = stretch_start
    onset_step = float(steps[onset_idx]) if (detected and onset_idx is not None) else None
    if episode:
        # an episode that ended: its share, not the mean from its start to the end of the run
        # (a stretch at 0.85 from step 70 to 129 of 200 had strength 0.47, under the flag level
        # it was detected above)
        mask = np.zeros(steps.size, dtype=bool)
        mask[stretch_start : stretch_end + 1] = True
        label = (
            f"mean zero-signal share over its stretch above the flag level (steps "
            f"{steps[stretch_start]:.0f}-{steps[stretch_end]:.0f})"
        )
    elif onset_step is not None:
        mask = steps >= onset_step
        label = "mean zero-signal share from onset to end"
    else:
        mask = late
        label = "mean zero-signal share over the final window"

    boot = bootstrap(
        values,
        lambda v: np.array([v[mask].mean(), v[late].mean()]),
        smooth_fraction=common.smooth_fraction,
        block_fraction=common.block_fraction,
        n_boot=common.n_boot,
        rng=rng,
    )
    value = float(values[mask].mean())
    lo, hi = interval(boot[:, 0], common.interval_prob, centre=value)
    st = strength(label, value, lo, hi, prob=common.interval_prob, source="bootstrap")
    flo, fhi = interval(boot[:, 1], common.interval_prob, centre=final_share)

    evidence: dict[str, Any] = {
        "metric": name,
        "share_source": source,
        "final_share": final_share,
        "final_share_interval": [flo, fhi],
        "flag_fraction": config.flag_fraction,
        "longest_stretch_above_steps": stretch_len,
        "longest_stretch_fraction_of_run": stretch_len / run_span if run_span else float("nan"),
        "group_size": G,
    }
    if G is not None and group_size_source:
        evidence["group_size_source"] = group_size_source
    expected = None
    reward_on_steps = None
    if rng_range is not None and "reward" in frame:
        low, high = rng_range
        r_ok = np.isfinite(reward_all)
        reward_on_steps = align(steps, frame.index.to_numpy(dtype=float)[r_ok], reward_all[r_ok])
        if G is not None:
            expected = binomial_zero_spread((reward_on_steps - low) / (high - low), G)
            evidence["final_expected_binomial_share"] = float(np.nanmean(expected[late]))
            evidence["final_excess_over_binomial"] = float(
                np.nanmean(values[late] - expected[late])
            )
            if plateau_draws is not None and np.size(plateau_draws):
                draws = np.asarray(plateau_draws, dtype=float).ravel()
                centre = float(np.median(draws))
                if low <= centre <= high:
                    at_plateau = binomial_zero_spread((draws - low) / (high - low), G)
                    plo, phi = interval(at_plateau, common.interval_prob)
                    evidence["expected_share_at_plateau"] = {
                        "value": float(np.median(at_plateau)),
                        "lower": plo,
                        "upper": phi,
                        "source": "posterior plateau",
                    }
                else:
                    # models/tiny.nc's 3.4 on data/tiny's success rates read "1.0 [1.0, 1.0]"
                    # (clipped to p = 1): no success rate of this reward; set aside, as
                    # policy_concentration sets it aside
                    evidence["posterior_plateau_not_used"] = (
                        f"posterior plateau {centre:.3g} lies outside the binary reward's range "
                        f"[{low:g}, {high:g}]: no success rate to give the expected share at"
                    )

    # a logged share that is only ever 0 or 1 (one group a step, or a test of the whole batch)
    # and 1 far less often than a binary group is all-equal: a per-group share of a binary
    # reward cannot stay below p^G + (1-p)^G (prompts that differ only raise it), so it is a
    # batch-wide test or the reward is not binary
    # (at the reward's moving mean: at a step's own noisy reward P0, convex, lies above its
    # value at the success rate, and one group's reward is all-equal exactly where P0 is 1; a
    # moving median of so few reward levels sits on them)
    if expected is not None:
        low, high = rng_range  # type: ignore[misc]
        w = window_size(int(np.isfinite(reward_on_steps).sum()), common.smooth_fraction)
        mean_reward = pd.Series(reward_on_steps).rolling(w, center=True, min_periods=1).mean()
        p_mean = (mean_reward.to_numpy() - low) / (high - low)
        expected_smooth = binomial_zero_spread(p_mean, G)  # type: ignore[arg-type]
    known = np.isfinite(expected_smooth) if expected is not None else np.zeros(values.size, bool)
    not_per_group = False
    if source == "logged" and known.sum() >= common.min_points:
        binary_valued = bool(np.all((values == 0.0) | (values == 1.0)))
        ones = int((values[known] == 1.0).sum())
        p_value = all_equal_steps_pvalue(ones, expected_smooth[known]) if binary_valued else 1.0
        not_per_group = p_value <= BATCH_SHARE_ALPHA
    if not_per_group:
        evidence["share_not_per_group"] = (
            f"{name} is only ever 0 or 1, and 1 at {ones} of {int(known.sum())} steps where one "
            f"group of binary rewards at the logged reward with G = {G} would be all-equal at "
            f"{float(np.sum(expected_smooth[known])):.0f} on average (p = {p_value:.1g}; prompts that "
            "differ leave more): if the reward is binary it is not the share of groups with zero "
            "spread, and this verdict says nothing about them (TRL with scale_rewards='batch' "
            "logged 1 only when the whole batch had one reward); a reward with partial credit "
            "may have no all-equal group"
        )
    # a share derived from a reward std that stays below the binomial expectation over the final
    # window: a mean within-group std of a binary reward cannot put it there (it gives p^G +
    # (1-p)^G for prompts alike, more for prompts that differ), but a std over the whole batch
    # averaged over several logged batches can (not recognised by whole_batch_size: the average
    # moves its ratio to r (1 - r) from step to step). A run of 16 prompts x G 4 whose groups
    # were all-equal at 0.60 read "not detected: share 0.30" so, the expectation 0.50 beside it
    below_binomial = None
    if source == "derived" and expected is not None:
        expected_final = float(np.nanmean(expected_smooth[late]))
        if np.isfinite(expected_final) and fhi < DERIVED_BELOW_BINOMIAL * expected_final:
            below_binomial = (
                f"the derived share's final-window interval [{flo:.2f}, {fhi:.2f}] lies below "
                f"{DERIVED_BELOW_BINOMIAL:.0%} of the binomial expectation {expected_final:.2f}, "
                "which the share of a binary reward's all-equal groups cannot stay below: "
                f"{std.name} is not the mean within-group std this verdict assumes (a std over the whole batch averaged over several batches, "
                "e.g. TRL 1.x's reward_std with logging_steps > 1, reads so), and the verdict says "
                "nothing about the groups"
            )
            evidence["derived_share_below_binomial"] = below_binomial
    # the metric read, by name (the derived share says its source below)
    of = f" ({name})" if source == "logged" else ""
    if detected:
        why = (
            f"final-window share{of} {final_share:.2f} > {config.flag_fraction}"
            if final_share > config.flag_fraction
            else f"share{of} above {config.flag_fraction} for {stretch_len:.0f} steps ({stretch_len / run_span:.0%} of the run)"
        )
        summary = f"advantage degeneracy detected: {why}; strength {fmt_interval(st)}"
        if onset_step is not None:
            summary += f", from step {onset_step:.0f}"
    else:
        summary = f"not detected: final-window zero-signal share{of} {final_share:.2f} [{flo:.2f}, {fhi:.2f}] <= {config.flag_fraction}"
    if "final_expected_binomial_share" in evidence:
        summary += f" (binomial expectation p^G + (1-p)^G at the current reward: {evidence['final_expected_binomial_share']:.2f})"
    if not_per_group:
        summary += f"; {evidence['share_not_per_group']}"
    floor = group_size_floor_note(G, config.flag_fraction) if detected else None
    if floor is not None:
        evidence["group_size_floor"] = floor
        summary += f"; {floor}"
    if G is not None and group_size_source and group_size_source != "the run set":
        # the run set logs no G: the one the share and its expectation were read at, named
        summary += f"; G = {G} from {group_size_source}: the run set logs none"
    if source == "derived":
        # a reward with partial credit (0.3, 0.7 ...) in [0, 1] spreads less within a group than
        # a binary one of the same mean: its groups read as degenerate (a run with no group of
        # zero spread was "detected" from step 0); the estimate cannot tell, so it says so
        summary += (
            f"; share {name} assuming a binary reward and {std.name} the mean of the groups' "
            "own stds at each logged step (estimate, see docs: a reward with partial credit "
            "spreads less within a group and reads as degenerate; a std over the whole batch "
            "averaged over several batches, as TRL 1.x logs reward_std with logging_steps > 1 or "
            "a mean of per-batch stds, spreads more and reads as less degenerate than it is; "
            "--set degeneracy.reward_std_metrics=[] leaves the derivation out)"
        )
        if below_binomial is not None:
            summary += f"; {below_binomial}"
        if config.reward_range is None:  # inferred: a -1..1 reward that stays >= 0 reads as 0..1
            summary += "; binary reward range (0, 1) assumed from the rewards (else set degeneracy.reward_range)"
    summary += "."

    table = pd.DataFrame(
        {
            "quantity": [
                "final-window share",
                "binomial expectation (final)",
                "excess over binomial",
                "longest stretch above flag (steps)",
            ],
            "value": [
                final_share,
                evidence.get("final_expected_binomial_share", np.nan),
                evidence.get("final_excess_over_binomial", np.nan),
                stretch_len,
            ],
        }
    ).set_index("quantity")
    figure = None
    if common.figures:
        figure = _figure(
            steps,
            values,
            smoothed,
            expected,
            reward_on_steps,
            onset_step,
            config.flag_fraction,
            name,
            run_id,
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


def _figure(steps, values, smoothed, expected, reward, onset_step, flag, name, run_id):
    # a bare Figure (not pyplot): no global backend switch, no open-figure registry
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 3.2))
    ax = fig.subplots()
    ax.plot(steps, values, ".", ms=3, alpha=0.5, color="C0", label=name)
    ax.plot(steps, smoothed, color="C0", lw=1.5, label="smoothed")
    if expected is not None:
        ax.plot(steps, expected, color="C2", lw=1.0, ls="--", label="binomial p^G + (1-p)^G")
    ax.axhline(flag, color="C3", lw=0.8, ls=":", label=f"flag level {flag}")
    if onset_step is not None:
        ax.axvline(onset_step, color="C3", lw=1.0, label=f"onset {onset_step:.0f}")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("share of groups with zero spread")
    top = ax
    if reward is not None:
        ax2 = ax.twinx()
        ax2.plot(steps, reward, color="0.5", lw=0.8, alpha=0.7)
        ax2.set_ylabel("reward", color="0.5")
        top = ax2  # drawn last: a legend on the first axes lay under the reward's line
    ax.set_title(plot_text(f"advantage degeneracy: {run_id}"), fontsize=9)
    top.legend(*ax.get_legend_handles_labels(), fontsize=6, loc="upper left")
    fig.tight_layout()
    return fig
