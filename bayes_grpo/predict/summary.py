"""Turn posterior draws of reward trajectories into bands, milestones, regime and stop step.

Both :mod:`bayes_grpo.predict.predict` (new hyperparameters, no data of the run yet) and
:mod:`bayes_grpo.predict.forecast` (a run in progress) end here, so their outputs have one
layout: an ``xarray.Dataset`` over ``step`` with

* ``mean_mean``, ``mean_median`` and ``mean_hdi`` (``hdi_prob``, ``step``, ``bound``): the
  posterior of the *mean* trajectory ``p(t)`` (parameter uncertainty, plus a law-discrepancy
  term when the caller passes ``band_draws`` that include one);
* ``obs_mean`` and ``obs_hdi``: the posterior predictive of the *observed* reward (noise
  included);
* ``time_to_fraction_*`` over ``fraction``: first step (of the dataset's ``step`` grid, so at
  its resolution; nothing assumes unit spacing) at which the mean trajectory has
  covered 90/95/99% of its rise ``p* - R0`` (its first crossing: an oscillating draw may fall
  back below it): the share of draws that get there within the horizon (``_reached``), the
  median over all draws (a step of the grid: the first by which at least half of the draws
  have got there; NaN: beyond the horizon, when fewer than half get there) and the HDI of the
  draws that get there;
* ``time_to_settle_*`` over ``fraction``: the same for the settling step, the first step after
  which the mean trajectory stays within ``1 - fraction`` of the rise of ``p*`` (10/5/1%) to the
  horizon's end (a draw outside that band at the horizon's end has not settled within it):
  "when is it done" for an oscillating prediction, the first crossing for a monotone one;
* ``regime_probability`` over ``regime``;
* ``expected_remaining_gain`` over ``step`` and the attribute ``stop_step`` (a grid step):
  the first step after which the expected remaining gain stays below the threshold; when the
  caller gives the law past the horizon (``continuation``, as ``predict`` and ``forecast`` do)
  the gain counts each draw's best mean until it settles, and has to stay below the threshold
  past the horizon too (attr ``expected_remaining_gain_after``: its largest value there), so
  the stop step does not depend on the horizon once the horizon reaches it;
* for a prediction whose logged reward trails the policy (``predict``'s observation lag), the
  policy's milestones and stop step beside them: ``policy_time_to_fraction_*``,
  ``policy_time_to_settle_*``, ``policy_expected_remaining_gain`` and the attribute
  ``policy_stop_step``.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import xarray as xr

from bayes_grpo.checks.base import counted, share_percent, value_median
from bayes_grpo.constants import HDI_PROB, STEP_DIM

#: Fractions of the rise ``p* - R0`` whose first-passage steps are reported.
MILESTONE_FRACTIONS: tuple[float, ...] = (0.9, 0.95, 0.99)
#: HDI probabilities of the bands, unless the caller chooses others.
DEFAULT_HDI_PROBS: tuple[float, ...] = (0.5, HDI_PROB)
#: Regime labels (same words as :func:`bayes_grpo.dynamics.stability.classify_regime`).
REGIMES: tuple[str, ...] = ("overdamped", "critical", "underdamped", "unstable")
#: ``|zeta - 1|`` below which a draw counts as critically damped.
CRITICAL_BAND: float = 0.05
#: A forecast's run: its logged rewards on their own steps (``forecast_in_runset``), drawn by
#: ``plot_prediction`` wherever the forecast file is plotted.
LOGGED_REWARD_VAR: str = "logged_reward"
LOGGED_STEP_DIM: str = "logged_step"
#: Attributes and variables every prediction / forecast dataset has (what :func:`summary_dict`
#: and the report read); a file without them is not one.
SUMMARY_ATTRS: tuple[str, ...] = ("regime", "regime_prob", "stop_step", "stop_threshold", "n_draws")
#: Attributes of the stop step that only some datasets have, also in :func:`summary_dict`: the
#: largest expected remaining gain past the horizon (the draws followed there) and why there is
#: no stop step (a forecast of a constant prefix whose prior knows no rise).
STOP_STEP_ATTRS: tuple[str, ...] = ("expected_remaining_gain_after", "no_stop_step")
SUMMARY_VARS: tuple[str, ...] = (
    "regime_probability",
    "time_to_fraction_median",
    "time_to_fraction_reached",
    "mean_mean",
    "hdi_prob",
)


def hdi_bounds(samples: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Highest-density interval along axis 0.

    Parameters
    ----------
    samples
        Shape ``(n_draws, ...)``; NaN draws are not allowed (callers drop them).
    prob
        Probability mass in ``(0, 1)``.

    Returns
    -------
    (lower, upper), each of shape ``samples.shape[1:]``.
    """
    if not 0.0 < prob < 1.0:
        raise ValueError(f"HDI probability must be in (0, 1), got {prob}")
    x = np.sort(np.asarray(samples, dtype=float), axis=0)
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 draws for an HDI, got {n}")
    k = max(int(np.floor(prob * n)), 1)
    widths = x[k:] - x[: n - k]
    best = np.argmin(widths, axis=0)
    lower = np.take_along_axis(x, best[None], axis=0)[0]
    upper = np.take_along_axis(x, (best + k)[None], axis=0)[0]
    return lower, upper


def rise_progress(mean_draws: np.ndarray, plateau: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """``(p(t) - R0) / (p* - R0)`` of each draw ``(n_draws, n_steps)``: 0 at the start, 1 at the
    plateau (signed, so a falling curve reads the same); NaN for a draw with no rise."""
    rise = (plateau - initial)[:, None]
    return (mean_draws - initial[:, None]) / np.where(rise == 0, np.nan, rise)


def first_passage(
    mean_draws: np.ndarray,
    steps: np.ndarray,
    plateau: np.ndarray,
    initial: np.ndarray,
    fraction: float,
) -> np.ndarray:
    """First step at which each draw has covered ``fraction`` of its rise ``p* - R0``.

    Works for falling curves too (the rise is signed). NaN where never reached.

    Parameters
    ----------
    mean_draws
        ``(n_draws, n_steps)`` mean trajectories.
    steps
        ``(n_steps,)`` optimizer steps.
    plateau, initial
        ``(n_draws,)`` plateau ``p*`` and initial reward ``R0`` of each draw.
    """
    reached = rise_progress(mean_draws, plateau, initial) >= fraction
    idx = np.argmax(reached, axis=1)
    out = np.asarray(steps, dtype=float)[idx]
    out[~reached.any(axis=1)] = np.nan
    return out


def settling_step(
    mean_draws: np.ndarray,
    steps: np.ndarray,
    plateau: np.ndarray,
    initial: np.ndarray,
    fraction: float,
) -> np.ndarray:
    """First step after which each draw stays within ``1 - fraction`` of its rise of ``p*``.

    The band is ``|p(t) - p*| <= (1 - fraction) |p* - R0|`` (progress within ``1 - fraction``
    of 1, as :func:`first_passage` reads progress), held from that step to the last of
    ``steps``: NaN where the draw is outside it at the last step, or enters it only there (not
    settled within the horizon: nothing within it shows the draw staying; a step of the
    horizon's end read as "settles at step T" and moved with T, ``predict --steps 30`` giving
    99% at step 30 where ``--steps 60`` gives 52). A monotone approach settles where it first
    passes ``fraction``; an oscillating one later, when its swings stay within the band.
    Arguments as :func:`first_passage`.
    """
    progress = rise_progress(mean_draws, plateau, initial)
    with np.errstate(invalid="ignore"):
        outside = ~(np.abs(progress - 1.0) <= 1.0 - fraction)
    n = outside.shape[1]
    # the step after the last one outside the band (0 when none is)
    after_last = np.where(outside.any(axis=1), n - np.argmax(outside[:, ::-1], axis=1), 0)
    out = np.asarray(steps, dtype=float)[np.minimum(after_last, n - 1)]
    # outside at the end, or inside at the last step only (a draw inside at every step, even a
    # horizon of one step, is settled from step 0)
    out[(after_last >= n) | ((after_last == n - 1) & (after_last > 0))] = np.nan
    return out


def expected_remaining_gain(
    mean_draws: np.ndarray, plateau: np.ndarray, beyond: np.ndarray | None = None
) -> np.ndarray:
    """Posterior expected gain still available after each step.

    For draw ``d`` and step index ``i`` the available gain is
    ``max(max_{j > i} p_d(t_j), b_d, p_d(t_i)) - p_d(t_i)``: the best mean reward that
    continuing could still reach, minus the current one, never below 0 (stopping at once is
    one of the choices: a draw above its plateau and falling back has nothing left to gain,
    at every step as at the last). ``b_d`` is the draw's best mean past the horizon:
    ``beyond`` (``(n_draws,)``, :func:`best_beyond_horizon`, which follows the draw until it
    settles), or, without it, its plateau ``p*_d`` (where a stable trajectory tends), which
    misses the swings of a draw still oscillating at the horizon: the gain near the
    horizon's end is then too small, and the stop step can move with the horizon.
    Returns the mean over draws, shape ``(n_steps,)``.
    """
    mean_draws = np.asarray(mean_draws, dtype=float)
    after = np.asarray(plateau, dtype=float) if beyond is None else np.asarray(beyond, dtype=float)
    future_max = np.maximum.accumulate(mean_draws[:, ::-1], axis=1)[:, ::-1]
    # the best after step i: the horizon's later steps, then what lies past it
    future_max = np.concatenate([future_max[:, 1:], np.full((mean_draws.shape[0], 1), -np.inf)], axis=1)
    best = np.maximum(np.maximum(future_max, after[:, None]), mean_draws)
    return np.mean(best - mean_draws, axis=0)


#: The draws' mean trajectories past the horizon are followed until they have settled
#: (:func:`best_beyond_horizon`): a draw when over the second half of the steps followed it moves
#: by at most this share of its rise ``|p* - R0|``; the draws together when their mean movement
#: there is at most this share of their mean rise, or at most ``tolerance``.
SETTLED_SHARE: float = 1e-4
#: Share of the stop threshold that what the draws still move past the steps followed may add to
#: the expected remaining gain (``summarise_draws``' ``tolerance`` of :func:`best_beyond_horizon`).
BEYOND_THRESHOLD_SHARE: float = 0.1
#: Most (draw, step) cells of one look past the horizon (:func:`best_beyond_horizon`).
MAX_BEYOND_CELLS: int = 20_000_000
#: Fewest steps of the first look past the horizon.
MIN_BEYOND_STEPS: int = 128


def best_beyond_horizon(
    continuation: Callable[[np.ndarray], np.ndarray],
    last_step: float,
    plateau: np.ndarray,
    initial: np.ndarray,
    *,
    counted: np.ndarray | None = None,
    tolerance: float = 0.0,
    stop_above: tuple[np.ndarray, float] | None = None,
) -> tuple[np.ndarray, float, float, float]:
    """Each draw's best mean reward after the horizon's last step, up to where it settles.

    ``continuation(steps)`` gives the mean trajectories ``(n_draws, len(steps))`` of the
    draws at whole optimizer steps past ``last_step`` (the law that drew them, continued).
    They are followed over ``last_step + 1 .. last_step + n``, ``n`` from
    ``max(last_step, MIN_BEYOND_STEPS)`` (at most :data:`MAX_BEYOND_CELLS` cells) doubling, until the ``counted`` draws (default all)
    have settled on average (what they still move adds at most :data:`SETTLED_SHARE` of the
    rise, or at most ``tolerance`` (reward units), to the expected remaining gain) or the next
    look would exceed
    :data:`MAX_BEYOND_CELLS`. A draw that has not settled itself (or whose trajectory is not
    finite) gets at least its plateau ``p*``, where a stable trajectory tends. With
    ``stop_above = (last_values, threshold)`` (the draws' means at the horizon's last step) the
    look also ends as soon as the expected remaining gain there is at least ``threshold``: the
    stop step then lies past the horizon whatever comes later (`predict models/tiny.nc
    --steps 300`, a slow approach to a far plateau, took 19 s instead of 7 following it).

    Each step is asked of ``continuation`` once: a doubled look asks only its new half (the
    half its settle test reads), in blocks of at most :data:`BLOCK_CELLS` cells, and keeps what
    the earlier halves gave; so the values ``continuation`` gives a step must not depend on the
    other steps asked with it (the closed form's are elementwise, the recursion's are kept).

    Returns ``(best, gain_after, reached, moving)``: ``(n_draws,)`` best means; the largest
    expected remaining gain (:func:`expected_remaining_gain` over the ``counted`` draws) at the
    steps followed, which :func:`stop_step` needs (a lightly damped draw's gain is near 0 at
    its peaks and large at its troughs, so a gain below the threshold at the horizon's end can
    rise again past it); the last step followed; and, when the draws had not settled there,
    their mean movement over its second half (reward units; 0 when they had).
    """
    plateau = np.asarray(plateau, dtype=float).reshape(-1)
    n_draws = plateau.size
    counted = np.ones(n_draws, dtype=bool) if counted is None else np.asarray(counted, dtype=bool)
    rise = np.abs(plateau - np.asarray(initial, dtype=float).reshape(-1))
    last = float(np.floor(last_step))
    # the first look as long as the horizon, within the cell budget: a forecast a million steps
    # out with 100 draws simulated 1e8 cells (0.8 GB, 60 s) before the budget was checked
    n = max(min(int(last), MAX_BEYOND_CELLS // max(n_draws, 1)), MIN_BEYOND_STEPS)
    # the look so far, steps last + 1 .. last + n, in the pieces asked of the continuation: each
    # doubled look asks only its new half, which is all the settle test reads (every look was
    # evaluated from step last + 1: a lightly damped forecast asked 3.8e7 cells on its way to the
    # budget of 2e7, twice, for the logged reward and the policy: 6.6 of the 8.6 s of a tiny
    # forecast), with each draw's running maximum and whether every value so far is finite
    pieces: list[np.ndarray] = []
    done = 0
    top = np.full(n_draws, -np.inf)
    finite = np.ones(n_draws, dtype=bool)
    while True:
        with np.errstate(over="ignore", invalid="ignore"):
            new = _continued(continuation, last, done, n, n_draws)
            pieces.append(new)
            top, finite = np.maximum(top, new.max(axis=1)), finite & np.isfinite(new).all(axis=1)
            # the second half of the look: all of a new half (n = 2 done), the first look's last
            span = np.ptp(new[:, n // 2 - done :], axis=1)
        done = n
        span = np.where(np.isfinite(span), span, np.inf)
        spread = float(np.mean(span[counted])) if counted.any() else 0.0
        settled = not counted.any() or not spread > max(SETTLED_SHARE * float(np.mean(rise[counted])), tolerance)
        if (
            settled
            or 2 * n * max(n_draws, 1) > MAX_BEYOND_CELLS
            or _gain_at_least(top, finite, span, plateau, rise, counted, stop_above)
        ):
            break
        n *= 2
    moving = ~(span <= SETTLED_SHARE * rise)
    best = _best_of_look(top, finite, moving, plateau)
    gain_after = 0.0
    if counted.any():
        with np.errstate(invalid="ignore"):
            end = np.where(moving, plateau, pieces[-1][:, -1])
            gain_after = _largest_gain(pieces, counted, end[counted])
    return best, gain_after, last + n, 0.0 if settled else spread


#: Columns of one piece of the look past the horizon asked of the continuation at a time, and of
#: the (draw, step) blocks :func:`_largest_gain` reduces: at most this many cells (fewer
#: temporaries of the size of the look), and never fewer than :data:`MIN_BLOCK_COLUMNS` columns.
BLOCK_CELLS: int = 1 << 20
#: Fewest columns of such a block (NumPy sums one column's draws pairwise, several columns' draws
#: in order: the mean of a block of one column differs in the last bits from the whole look's).
MIN_BLOCK_COLUMNS: int = 64


def _column_blocks(n_columns: int, n_rows: int) -> list[tuple[int, int]]:
    """``(start, stop)`` column ranges covering ``0 .. n_columns``: at most :data:`BLOCK_CELLS`
    cells each, at least :data:`MIN_BLOCK_COLUMNS` columns (or all of them where fewer)."""
    width = max(BLOCK_CELLS // max(n_rows, 1), MIN_BLOCK_COLUMNS)
    starts = list(range(0, n_columns, width))
    if len(starts) > 1 and n_columns - starts[-1] < MIN_BLOCK_COLUMNS:
        starts.pop()  # a short tail joins the block before it
    return [(a, b) for a, b in zip(starts, [*starts[1:], n_columns])]


def _continued(
    continuation: Callable[[np.ndarray], np.ndarray], last: float, done: int, n: int, n_draws: int
) -> np.ndarray:
    """The continuation's ``(n_draws, n - done)`` values at steps ``last + done + 1 .. last + n``,
    asked in blocks of at most :data:`BLOCK_CELLS` cells, the last block first (a continuation
    that simulates, :func:`~bayes_grpo.predict.predict.continued_trajectories`' recursion, then
    extends its simulation once; the values of a step do not depend on the steps asked with it)."""
    steps = last + np.arange(done + 1.0, n + 1.0)
    blocks = _column_blocks(n - done, n_draws)
    out = None
    for a, b in reversed(blocks):
        values = np.asarray(continuation(steps[a:b]), dtype=float)
        if len(blocks) == 1:
            return values
        if out is None:
            out = np.empty((values.shape[0], steps.size))
        out[:, a:b] = values
    return out


def _largest_gain(pieces: Sequence[np.ndarray], counted: np.ndarray, end: np.ndarray) -> float:
    """``max(expected_remaining_gain(m[counted], ..., end))`` of the look ``m`` given as column
    ``pieces`` (``(n_draws, n_i)`` each, in step order), block by block from the last step back
    with the maximum of the later steps carried: the same numbers as the whole look at once
    (each step's mean over the same draws in the same order), without its temporaries."""
    later = np.full(int(counted.sum()), -np.inf)  # each draw's best over the steps after the block
    largest = -np.inf
    for piece in reversed(pieces):
        for a, b in reversed(_column_blocks(piece.shape[1], later.size)):
            m = piece[:, a:b][counted]
            # from the block's last step back, the later steps' maximum before each step: column
            # k of the reversed block gets max(later, its steps after it), column b - a all of it
            ahead = np.maximum.accumulate(np.concatenate([later[:, None], m[:, ::-1]], axis=1), axis=1)
            best = np.maximum(np.maximum(ahead[:, -2::-1], end[:, None]), m)
            largest = np.maximum(largest, np.max(np.mean(best - m, axis=0)))
            later = ahead[:, -1]
    return float(largest)


def _best_of_look(top: np.ndarray, finite: np.ndarray, moving: np.ndarray, plateau: np.ndarray) -> np.ndarray:
    """Each draw's best mean over a look past the horizon, from its maximum ``top`` and whether
    all its values were ``finite`` (``-inf`` where not), at least its plateau ``p*`` where it is
    still ``moving``."""
    best = np.where(finite, top, -np.inf)
    return np.where(moving, np.maximum(best, plateau), best)


def _gain_at_least(
    top: np.ndarray,
    finite: np.ndarray,
    span: np.ndarray,
    plateau: np.ndarray,
    rise: np.ndarray,
    counted: np.ndarray,
    stop_above: tuple[np.ndarray, float] | None,
) -> bool:
    """Whether the expected remaining gain at the horizon's last step, from the look so far
    (each draw's maximum ``top`` and whether it was all ``finite``, its best as
    :func:`best_beyond_horizon` takes it), is at least the threshold of
    ``stop_above = (last_values, threshold)``; following further only adds to it."""
    if stop_above is None or not counted.any():
        return False
    last_values, threshold = np.asarray(stop_above[0], dtype=float), float(stop_above[1])
    best = _best_of_look(top, finite, ~(span <= SETTLED_SHARE * rise), plateau)
    gain = np.maximum(best, last_values) - last_values
    return bool(np.mean(gain[counted]) >= threshold)


def check_stop_threshold(threshold: float | None) -> float | None:
    """``threshold`` if it is a usable stop threshold (None or a finite gain > 0, reward
    units), else ValueError: a gain at or below 0 is never reached by a rising run's
    expected remaining gain, so such a threshold would silently mean "never stop"."""
    if threshold is None:
        return None
    value = float(threshold)
    if not (np.isfinite(value) and value > 0.0):
        raise ValueError(
            f"stop threshold must be a positive, finite reward gain (reward units), got {threshold}"
        )
    return value


def milestones_of(lag: float) -> str:
    """What a prediction's or forecast's milestones and stop step are read on (attr
    ``milestones_of``), for a logged reward ``lag`` steps behind the policy (0: none)."""
    if not lag > 0:
        return (
            "time_to_fraction, time_to_settle and stop_step: the mean trajectory, which is the "
            "policy's (no observation lag here)"
        )
    return (
        f"time_to_fraction, time_to_settle and stop_step: the logged reward, {steps_behind(lag)} "
        "the policy (observation lag), as the bands; policy_time_to_fraction, policy_time_to_settle "
        "and policy_stop_step: the policy's, which a run stopped at that step keeps"
    )


def steps_behind(lag: float) -> str:
    """``"1 step behind"`` / ``"6 steps behind"``: how far the logged reward trails the policy."""
    return f"{counted(lag, 'step')} behind"


def stop_step_notes(
    ds: xr.Dataset, *, followed: bool = False, rise: np.ndarray | None = None
) -> list[str]:
    """Warnings on a stop step that answers no question the user asked.

    * the threshold is at least the expected remaining gain at the grid's first step (e.g.
      ``--stop-threshold 5`` on a 0-1 reward): every step is "after which the gain stays
      below", so the stop step is the first one, whatever the run does; when the draws' rises
      ``rise`` (``p* - R0`` per draw) are below 0 on average, the reward falls from its start
      and the note says so (a smaller threshold is then no remedy: there is nothing to gain);
    * a forecast's stop step at or before its last logged step (``attrs["upto_step"]``): by
      the forecast the run has already gained what it will;
    * a stop step at the grid's last step when the gain was at or above the threshold one step
      before: the gain at the last step counts nothing past the horizon (a draw still rising
      there, or above its plateau, has 0 left), so the stop step may be the horizon's, not the
      run's (`predict models/bandit.nc --k-ref 24 --steps 150`: 150; 100 and 200: none);
      not when the draws were ``followed`` past the horizon (``summarise_draws``'
      ``continuation``), whose gain at the last step counts what lies beyond it.
    """
    notes = []
    stop = float(ds.attrs["stop_step"])
    threshold = float(ds.attrs["stop_threshold"])
    gain = ds["expected_remaining_gain"].values
    first = float(ds[STEP_DIM].values[0])
    falls = rise is not None and np.size(rise) > 0 and float(np.mean(rise)) < 0.0
    if gain.size and threshold >= float(gain[0]) and falls:
        # a run that declines from its start had stop step 0 with "give a smaller gain", as if
        # the threshold were the trouble (`forecast` of a falling reward at the default 1%)
        falling = np.asarray(rise) < 0.0
        share = share_percent(int(falling.sum()), falling.size)
        notes.append(
            f"the reward is expected to fall: the plateau p* lies below the initial reward R0 "
            f"(by {-float(np.mean(rise)):.3g} on average; in {share} of the draws), so the expected "
            f"remaining gain from step {first:g} ({float(gain[0]):.3g}) is already below the stop "
            f"threshold {threshold:.3g} and the stop step is the first step: by this forecast, training "
            "on does not raise the reward"
        )
    elif gain.size and threshold >= float(gain[0]):
        notes.append(
            f"the stop threshold {threshold:.3g} (reward units) is at least the whole expected "
            f"remaining gain from step {first:g} ({float(gain[0]):.3g}): the stop step is the first "
            "step whatever the run does; give a smaller gain (default: 1% of the rise)"
        )
    elif "upto_step" in ds.attrs and np.isfinite(stop) and stop <= float(ds.attrs["upto_step"]):
        notes.append(
            f"the stop step {stop:g} is at or before the last logged step {float(ds.attrs['upto_step']):g}: "
            "by this forecast the expected remaining gain was already below the threshold there "
            "(the run has gained what it will)"
        )
    if not followed and gain.size > 1 and stop == float(ds[STEP_DIM].values[-1]) and float(gain[-2]) >= threshold:
        notes.append(
            f"the stop step {stop:g} is the horizon's last step, the only one where the expected "
            f"remaining gain is below the threshold ({float(gain[-2]):.3g} one step before): the gain "
            "there counts nothing past the horizon (a draw still rising, or above its plateau, has "
            "none left), so it may be the horizon's stop, not the run's; give a longer horizon to see"
        )
    return notes


def _milestones(
    draws: np.ndarray,
    steps: np.ndarray,
    plateau: np.ndarray,
    initial: np.ndarray,
    fractions,
    probs,
    milestone: Callable[..., np.ndarray] = first_passage,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(median, hdi, reached)`` of the ``milestone`` steps (:func:`first_passage` or
    :func:`settling_step`) of ``draws`` ``(n_draws, n_steps)`` at each of ``fractions`` of the
    rise: medians ``(n_fractions,)`` (NaN: beyond the horizon), HDIs ``(n_fractions,
    len(probs), 2)`` of the draws that get there, and the share that does."""
    passage = np.stack([milestone(draws, steps, plateau, initial, f) for f in fractions])
    reached = np.isfinite(passage)
    # a draw that does not get there within the horizon gets there later: the median is over
    # every draw (beyond the horizon, NaN, when fewer than half get there), not over those that
    # do, which put the 99% milestone before the 90% one when few draws reached either. It is a
    # step of the grid, the first by which at least half of the draws have got there: the mean
    # of the two middle draws read 37.5, a step no run logs
    median = value_median(np.where(reached, passage, np.inf), axis=1)
    median[~np.isfinite(median)] = np.nan
    hdi = np.full((len(fractions), len(probs), 2), np.nan)
    for i, row in enumerate(passage):
        finite = row[np.isfinite(row)]
        if finite.size >= 2:
            for j, p in enumerate(probs):
                hdi[i, j] = hdi_bounds(finite, p)
    return median, hdi, reached.mean(axis=1)


def stop_step(steps: np.ndarray, gain: np.ndarray, threshold: float, gain_after: float | None = None) -> float:
    """First step after which the expected remaining gain stays below ``threshold`` (NaN if never
    within ``steps``): with ``gain_after``, the largest gain past the last step
    (:func:`best_beyond_horizon`), it has to stay below there too."""
    if gain_after is not None and not gain_after < threshold:
        return float("nan")
    below = np.asarray(gain) < threshold
    if not below.any():
        return float("nan")
    # the last index at which the gain is still above threshold; stop right after it
    above = np.flatnonzero(~below)
    i = 0 if above.size == 0 else above[-1] + 1
    return float(steps[i]) if i < len(steps) else float("nan")


def regime_probabilities(
    zeta: np.ndarray, damping: np.ndarray, diverging: np.ndarray | None = None
) -> dict[str, float]:
    """Posterior probability of each regime from draws of ``zeta`` and ``C_eff``.

    ``unstable`` when ``C_eff <= 0``; ``critical`` when ``|zeta - 1| < CRITICAL_BAND``;
    otherwise ``overdamped`` (``zeta > 1``) or ``underdamped``. With ``diverging`` (the
    draws whose trajectory law is unstable, e.g. by the exact recursion's criterion), those
    draws are the unstable ones, and a draw with ``C_eff <= 0`` that does not diverge is
    ``underdamped``: between the continuum's threshold and the exact one the recursion is a
    lightly damped oscillation, not a divergence.
    """
    zeta = np.asarray(zeta, dtype=float)
    damping = np.asarray(damping, dtype=float)
    if diverging is None:
        unstable = damping <= 0
        damped_past_continuum = np.zeros(damping.shape, dtype=bool)
    else:
        unstable = np.asarray(diverging, dtype=bool).reshape(damping.shape)
        damped_past_continuum = ~unstable & ~(damping > 0)
    critical = ~unstable & ~damped_past_continuum & (np.abs(zeta - 1.0) < CRITICAL_BAND)
    over = ~unstable & ~damped_past_continuum & ~critical & (zeta > 1.0)
    under = (~unstable & ~critical & (zeta < 1.0)) | damped_past_continuum
    n = max(zeta.size, 1)
    return {
        "overdamped": float(over.sum() / n),
        "critical": float(critical.sum() / n),
        "underdamped": float(under.sum() / n),
        "unstable": float(unstable.sum() / n),
    }


#: Fewest draws that stay stable for the means, milestones and stop step to describe a run.
MIN_STABLE_DRAWS: int = 2


def no_stable_run(n_diverging: int, n_draws: int) -> bool:
    """Whether the draws describe no stable run: some diverge and fewer than
    :data:`MIN_STABLE_DRAWS` do not. Then the means and milestones are over every draw and
    there is no stop step (:func:`summarise_draws`, and ``predict``'s text output)."""
    return n_diverging > 0 and n_draws - n_diverging < MIN_STABLE_DRAWS



def checked_hdi_probs(hdi_probs: Sequence[float]) -> list[float]:
    """The band probabilities ascending and once each (the widest last, which the summaries, the
    plot and the backtest read); ``ValueError`` naming ``hdi_probs`` for none (``()`` failed
    "need at least one array to stack" after the forecast's work) or one outside ``(0, 1)``."""
    try:
        probs = sorted({float(p) for p in hdi_probs})
    except (TypeError, ValueError):
        raise ValueError(f"hdi_probs must be probabilities in (0, 1), got {hdi_probs!r}") from None
    if not probs:
        raise ValueError("hdi_probs is empty: give the band probabilities, e.g. (0.5, 0.9)")
    bad = [p for p in probs if not 0.0 < p < 1.0]
    if bad:
        raise ValueError(f"hdi_probs must be probabilities in (0, 1), got {bad[0]!r}")
    return probs


def checked_n_draws(n_draws: object) -> int:
    """``n_draws`` as an int, ``ValueError`` naming it unless it is a whole number >= 2 (a band
    needs two draws; 0 read "the posterior puts its mass on diverging runs")."""
    if isinstance(n_draws, bool) or not isinstance(n_draws, numbers.Integral | float) or not (
        np.isfinite(n_draws) and float(n_draws).is_integer() and n_draws >= 2
    ):
        raise ValueError(f"n_draws must be a whole number of draws >= 2, got {n_draws!r}")
    return int(n_draws)


def summarise_draws(
    steps: Sequence[float] | np.ndarray,
    mean_draws: np.ndarray,
    obs_draws: np.ndarray,
    *,
    plateau: np.ndarray,
    initial_reward: np.ndarray,
    zeta: np.ndarray,
    damping: np.ndarray,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    parameters: Mapping[str, np.ndarray] | None = None,
    attrs: Mapping[str, object] | None = None,
    point_draws: np.ndarray | None = None,
    band_draws: np.ndarray | None = None,
    diverging: np.ndarray | None = None,
    swinging: np.ndarray | None = None,
    policy_draws: np.ndarray | None = None,
    continuation: Callable[[np.ndarray], np.ndarray] | None = None,
    policy_continuation: Callable[[np.ndarray], np.ndarray] | None = None,
    no_stop_reason: str | None = None,
    mean_bounds: tuple[float, float] | None = None,
) -> xr.Dataset:
    """Summarise trajectory draws into the prediction / forecast dataset (module docstring).

    Parameters
    ----------
    steps
        ``(n_steps,)`` optimizer steps.
    mean_draws, obs_draws
        ``(n_draws, n_steps)`` draws of the mean trajectory and of the observed reward.
    plateau, initial_reward, zeta, damping
        ``(n_draws,)`` per-draw ``p*``, ``R0``, damping ratio and ``C_eff``.
    hdi_probs
        Band probabilities.
    stop_threshold
        Expected remaining gain (reward units) below which to stop; default 1% of the
        posterior-mean rise ``|p* - R0|``.
    parameters
        Optional ``{name: (n_draws,)}`` parameter draws stored under dim ``draw``.
    attrs
        Extra attributes (non-scalars are stored as JSON).
    point_draws
        Optional ``(n_draws, n_steps)`` conditional means of the logged reward (a forecast
        that continues the run's own state); their mean is ``point_forecast``. Default: the
        mean trajectory.
    band_draws
        Optional ``(n_draws, n_steps)`` draws from which the ``mean_hdi`` bands are taken
        (e.g. the mean trajectory plus a law-discrepancy term); milestones, regime and stop
        step still use ``mean_draws``. Default: ``mean_draws``.
    diverging
        Optional ``(n_draws,)`` mask of the draws whose law is unstable at this setting:
        their trajectories grow without bound, so an average over them is not a number a
        run will show (one such draw can put the mean at 1e184). When some draws diverge and
        at least 2 do not, the means (``mean_mean``, ``obs_mean``, ``point_forecast``), the
        milestones, the expected remaining gain and the stop step are those of the stable
        draws (conditional on the run staying stable); the median and the bands keep every
        draw, so they show the divergence; a warning gives the share (attrs
        ``n_draws_diverging``). The regime probabilities take the mask too
        (:func:`regime_probabilities`): unstable means diverging.
    swinging
        Optional ``(n_draws,)`` mask of the ``diverging`` draws whose trajectories stay bounded
        within the horizon instead (a limit cycle: the recursion with a PPO clip range, which
        caps the unstable mode). They count as diverging (no settled run), and the warning and
        attr ``n_draws_swinging`` say that they swing rather than diverge.
    policy_draws
        Optional ``(n_draws, n_steps)`` draws of the policy's mean reward when ``mean_draws`` are
        the logged reward that trails it (``predict``'s observation lag): its milestones and
        stop step, from the same draws and threshold, are added as ``policy_time_to_fraction_*``,
        ``policy_expected_remaining_gain`` and attr ``policy_stop_step`` (a run stopped at a step
        keeps that step's policy).
    continuation, policy_continuation
        Optional functions of whole optimizer steps past the horizon giving the
        ``(n_draws, len(steps))`` trajectories of ``mean_draws`` (``policy_draws``) there, by
        the law that drew them: the expected remaining gain then counts each draw's best mean
        up to where it settles (:func:`best_beyond_horizon`), so the stop step does not depend
        on the horizon once the horizon reaches it; without, each draw's plateau past the
        horizon (a draw still swinging at the horizon's end has too little left there, and a
        note says when only the last step gives the stop step).
    no_stop_reason
        Why the draws say nothing of when to stop (a forecast of a constant prefix whose prior
        knows no rise): then ``stop_step`` and ``policy_stop_step`` are NaN, attr ``no_stop_step``
        keeps the reason, which is also a warning, and the stop step's other notes are left out.
    mean_bounds
        ``(lo, hi)`` of a reward known to lie in them (a success rate; ``predict`` of a fit with
        reward bounds; a bounded forecast's curves are inside them by its law): ``mean_draws``, ``policy_draws`` and what the
        continuations give are clipped to them, so the mean trajectory, its milestones and the
        gain past the horizon are the law censored at the bounds (an underdamped draw's latent
        curve past a success rate's 1 read "final mean reward 1.36" and a gain after the horizon
        up to 0.64 for a run logged at 0.98; ``predict models/tiny.nc --lr 0.008 --k-ref 8`` a
        mean of 1.077 above its band). The observed, point and band draws are the caller's.
    """
    if mean_bounds is not None:
        lo, hi = (float(b) for b in mean_bounds)

        def clipped(values: np.ndarray) -> np.ndarray:
            return np.clip(np.asarray(values, dtype=float), lo, hi)

        def clipped_continuation(later_of):
            return None if later_of is None else (lambda later: clipped(later_of(later)))

        mean_draws = clipped(mean_draws)
        policy_draws = None if policy_draws is None else clipped(policy_draws)
        continuation = clipped_continuation(continuation)
        policy_continuation = clipped_continuation(policy_continuation)
    steps = np.asarray(steps, dtype=float)
    mean_draws = np.asarray(mean_draws, dtype=float)
    obs_draws = np.asarray(obs_draws, dtype=float)
    if mean_draws.shape != obs_draws.shape or mean_draws.shape[1] != steps.size:
        raise ValueError(
            f"draw arrays must be (n_draws, {steps.size}); got {mean_draws.shape} and {obs_draws.shape}"
        )
    band_all = mean_draws if band_draws is None else np.asarray(band_draws, dtype=float)
    if band_all.shape != mean_draws.shape:
        raise ValueError(f"band_draws must be {mean_draws.shape}; got {band_all.shape}")
    keep = (
        np.isfinite(mean_draws).all(axis=1)
        & np.isfinite(obs_draws).all(axis=1)
        & np.isfinite(band_all).all(axis=1)
    )
    n_dropped = int((~keep).sum())
    if mean_draws.shape[0] < 2:
        # n_draws=0 read "the posterior puts its mass on diverging runs"
        raise ValueError(f"{mean_draws.shape[0]} trajectory draws: a band needs at least 2 (n_draws)")
    if keep.sum() < 2:
        raise ValueError(
            "fewer than 2 finite trajectory draws; the posterior puts its mass on diverging runs"
        )
    mean_all, obs_all = mean_draws[keep], obs_draws[keep]
    # ascending and once each: the widest band is the last one, which the summaries, the
    # plot and the backtest read (`--hdi 0.95 0.5` reported and drew the 50% band only)
    probs = checked_hdi_probs(hdi_probs)
    band_k = band_all[keep]
    mean_hdi = np.stack([np.stack(hdi_bounds(band_k, p), axis=-1) for p in probs])
    obs_hdi = np.stack([np.stack(hdi_bounds(obs_all, p), axis=-1) for p in probs])
    # the means, milestones and stop step: over the draws that stay stable (see diverging)
    if diverging is None:
        settled = np.ones(int(keep.sum()), dtype=bool)
    else:
        diverging = np.asarray(diverging, dtype=bool).reshape(-1)
        if diverging.shape != keep.shape:
            raise ValueError(f"diverging must be ({keep.size},); got {diverging.shape}")
        settled = ~diverging[keep]
    n_diverging = int((~settled).sum())
    n_swinging = 0 if swinging is None else int((np.asarray(swinging, dtype=bool).reshape(-1)[keep] & ~settled).sum())
    conditional = 0 < n_diverging and not no_stable_run(n_diverging, settled.size)
    if not conditional:
        settled = np.ones_like(settled)
    mean_k, obs_k = mean_all[settled], obs_all[settled]
    plateau_k = np.asarray(plateau)[keep][settled]
    init_k = np.asarray(initial_reward)[keep][settled]
    fractions = np.array(MILESTONE_FRACTIONS)
    pass_median, pass_hdi, reached = _milestones(mean_k, steps, plateau_k, init_k, fractions, probs)
    settle = _milestones(mean_k, steps, plateau_k, init_k, fractions, probs, settling_step)
    counted = np.zeros(keep.size, dtype=bool)
    counted[np.flatnonzero(keep)[settled]] = True
    # no stable run, or nothing known of a rise: no stop step
    follow = not no_stable_run(n_diverging, settled.size) and no_stop_reason is None
    unsettled: dict[str, tuple[float, float]] = {}  # attr of the stop step -> (step, mean swing)
    stop_threshold = check_stop_threshold(stop_threshold)
    if stop_threshold is None:
        stop_threshold = 0.01 * float(abs(np.mean(plateau_k - init_k)))

    def beyond(
        cont: Callable[[np.ndarray], np.ndarray] | None, what: str, draws: np.ndarray | None
    ) -> tuple[np.ndarray | None, float | None]:
        # ``what``: the attr of the stop step the look past the horizon is for; ``draws``: the
        # trajectories on the horizon whose last step it continues
        if cont is None or not follow or draws is None:
            return None, None
        best, gain_after, reached, spread = best_beyond_horizon(
            cont, steps[-1], np.asarray(plateau, dtype=float), np.asarray(initial_reward, dtype=float),
            counted=counted, tolerance=BEYOND_THRESHOLD_SHARE * stop_threshold,
            stop_above=(np.asarray(draws, dtype=float)[:, -1], stop_threshold),
        )  # fmt: skip
        if spread:
            unsettled[what] = (reached, spread)
        return best[counted], gain_after

    best_after, gain_after = beyond(continuation, "stop_step", mean_draws)
    gain = expected_remaining_gain(mean_k, plateau_k, best_after)
    regimes = regime_probabilities(zeta, damping, diverging)  # diverging: (n_draws,) or None
    ds = xr.Dataset(
        {
            "mean_mean": (STEP_DIM, mean_k.mean(axis=0)),
            "mean_median": (STEP_DIM, np.median(mean_all, axis=0)),
            "mean_hdi": (("hdi_prob", STEP_DIM, "bound"), mean_hdi),
            "obs_mean": (STEP_DIM, obs_k.mean(axis=0)),
            "obs_hdi": (("hdi_prob", STEP_DIM, "bound"), obs_hdi),
            "time_to_fraction_median": ("fraction", pass_median),
            "time_to_fraction_hdi": (("fraction", "hdi_prob", "bound"), pass_hdi),
            "time_to_fraction_reached": ("fraction", reached),
            "time_to_settle_median": ("fraction", settle[0]),
            "time_to_settle_hdi": (("fraction", "hdi_prob", "bound"), settle[1]),
            "time_to_settle_reached": ("fraction", settle[2]),
            "regime_probability": ("regime", np.array([regimes[r] for r in REGIMES])),
            "expected_remaining_gain": (STEP_DIM, gain),
            "point_forecast": (
                STEP_DIM,
                (
                    mean_k
                    if point_draws is None
                    else np.asarray(point_draws, dtype=float)[keep][settled]
                ).mean(axis=0),
            ),
        },
        coords={
            STEP_DIM: steps,
            "hdi_prob": np.array(probs),
            "bound": np.array(["lower", "upper"], dtype=object),
            "fraction": fractions,
            "regime": np.array(REGIMES, dtype=object),
        },
    )
    if policy_draws is not None:
        # the same draws' policy: the logged reward trails it (an observation lag), while a run
        # stopped at a step keeps the policy of that step
        policy_k = np.asarray(policy_draws, dtype=float)[keep][settled]
        p_median, p_hdi, p_reached = _milestones(policy_k, steps, plateau_k, init_k, fractions, probs)
        policy_after, policy_gain_after = beyond(policy_continuation, "policy_stop_step", policy_draws)
        policy_gain = expected_remaining_gain(policy_k, plateau_k, policy_after)
        ds["policy_time_to_fraction_median"] = ("fraction", p_median)
        ds["policy_time_to_fraction_hdi"] = (("fraction", "hdi_prob", "bound"), p_hdi)
        ds["policy_time_to_fraction_reached"] = ("fraction", p_reached)
        p_settle = _milestones(policy_k, steps, plateau_k, init_k, fractions, probs, settling_step)
        ds["policy_time_to_settle_median"] = ("fraction", p_settle[0])
        ds["policy_time_to_settle_hdi"] = (("fraction", "hdi_prob", "bound"), p_settle[1])
        ds["policy_time_to_settle_reached"] = ("fraction", p_settle[2])
        ds["policy_expected_remaining_gain"] = (STEP_DIM, policy_gain)
        ds.attrs["policy_stop_step"] = stop_step(steps, policy_gain, stop_threshold, policy_gain_after)
        if policy_gain_after is not None:
            ds.attrs["policy_expected_remaining_gain_after"] = policy_gain_after
    if parameters:
        for name, values in parameters.items():
            ds[f"param_{name}"] = ("draw", np.asarray(values, dtype=float)[keep])
    regime = max(regimes, key=regimes.get)  # type: ignore[arg-type]
    ds.attrs.update(
        {
            "regime": regime,
            "regime_prob": regimes[regime],
            "stop_step": stop_step(steps, gain, stop_threshold, gain_after),
            "stop_threshold": float(stop_threshold),
            "n_draws": int(keep.sum()),
            "n_draws_dropped_nonfinite": n_dropped,
            "n_draws_diverging": n_diverging,
        }
    )
    if n_swinging:
        ds.attrs["n_draws_swinging"] = n_swinging
    if gain_after is not None:
        ds.attrs["expected_remaining_gain_after"] = gain_after
    for key, value in (attrs or {}).items():
        ds.attrs[key] = value if isinstance(value, str | int | float) else json.dumps(value)
    # draws still swinging where the look past the horizon ends: their gain after it is counted
    # as their plateau, which can only matter to a stop step within the horizon (a gain left
    # uncounted would only move it later)
    gain_notes = [
        f"the {key.replace('_', ' ')} {float(ds.attrs[key]):g} counts the draws' gain up to step {reached:g}, where "
        f"they still swing ({spread:.3g} on average; lightly damped), and past it their plateau: "
        "it may come later"
        for key, (reached, spread) in unsettled.items()
        if np.isfinite(float(ds.attrs[key]))
    ]
    if no_stop_reason is not None:
        ds.attrs["stop_step"] = float("nan")
        if "policy_stop_step" in ds.attrs:
            ds.attrs["policy_stop_step"] = float("nan")
        ds.attrs["no_stop_step"] = no_stop_reason
        add_warnings(ds, [no_stop_reason])
    else:
        add_warnings(
            ds,
            [*stop_step_notes(ds, followed=continuation is not None, rise=plateau_k - init_k), *gain_notes],
        )
    if n_diverging:
        n_all = int(keep.sum())
        # share_percent: 1 of 2000 draws read "(0%)" beside the draws it says were left out
        share = f"{n_diverging} of {n_all} posterior draws ({share_percent(n_diverging, n_all)})"
        # a clipped law caps the unstable mode of some draws in a limit cycle: they swing, not diverge
        cycle = "swing about p* without settling within the horizon (a limit cycle: the clip caps the unstable mode)"
        if n_swinging == n_diverging:
            what = f"their trajectories {cycle}"
        elif n_swinging:
            what = f"their trajectories diverge, or ({n_swinging} of them) {cycle}"
        else:
            what = "their trajectories diverge"
        if conditional:
            note = (
                f"{share} are unstable at this setting and {what}: the mean "
                "trajectory, milestones, expected remaining gain and stop step are those of the "
                "stable draws (what a run shows if it stays stable); the median and the bands "
                f"include the {'unstable' if n_swinging else 'diverging'} draws"
            )
        else:
            note = (
                f"{share} are unstable at this setting: "
                + ("the trajectories diverge" if not n_swinging else what)
                + f", so the means and milestones describe no {'settled' if n_swinging else 'stable'} "
                "run, and there is no stop step"
            )
            # a diverging mean's "remaining gain" falls to 0 at the horizon's end only: the stop
            # step read as the last step (`predict --lr 1.0 --k-ref 4`: 150 of 150) as if the
            # run had settled there
            ds.attrs["stop_step"] = float("nan")
            if "policy_stop_step" in ds.attrs:
                ds.attrs["policy_stop_step"] = float("nan")
        add_warnings(ds, [note])
    return ds


def band(
    ds: xr.Dataset, *, kind: str = "obs", hdi_prob: float = HDI_PROB
) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` arrays of one band of a prediction / forecast dataset."""
    if kind not in ("obs", "mean"):
        raise ValueError(f"kind must be 'obs' or 'mean', got {kind!r}")
    probs = ds["hdi_prob"].values
    i = int(np.argmin(np.abs(probs - hdi_prob)))
    if abs(probs[i] - hdi_prob) > 1e-9:
        raise ValueError(f"no {hdi_prob} band in this dataset; it has {list(probs)}")
    arr = ds[f"{kind}_hdi"].values[i]
    return arr[:, 0], arr[:, 1]


def attr_warnings(ds: xr.Dataset, attr: str = "warnings") -> list[str]:
    """The ``warnings`` attribute (or ``attr``, e.g. ``"posterior_warnings"``) of a prediction /
    forecast dataset as a list of strings.

    :func:`summarise_draws` stores it as JSON text (netCDF attributes hold no lists); a plain
    string is one warning, a missing attribute none.
    """
    notes = ds.attrs.get(attr)
    if notes is None:
        return []
    if isinstance(notes, str):
        try:
            notes = json.loads(notes)
        except ValueError:
            return [notes]
    if isinstance(notes, str):
        return [notes]
    return [str(n) for n in np.atleast_1d(notes)]


def add_warnings(ds: xr.Dataset, notes: Sequence[str]) -> None:
    """Append ``notes`` to the ``warnings`` attribute of ``ds`` in place (JSON text, read back by
    :func:`attr_warnings`); nothing when there are none."""
    if notes:
        ds.attrs["warnings"] = json.dumps([*attr_warnings(ds), *notes])


def step_value(step) -> int | float:
    """An optimizer step as JSON and text give it: an int where it is a whole number (``predict``
    printed ``stop_step: 34.0``, ``final_step: 300.0``), else the float (a step of a grid
    that is not whole; NaN for none). A milestone's median is one of the draws' steps
    (:func:`~bayes_grpo.checks.base.value_median`), no longer the mean of two."""
    value = float(step)
    return int(value) if np.isfinite(value) and value.is_integer() else value


def _fraction_summary(ds: xr.Dataset, prefix: str) -> dict[str, dict[str, float | None]]:
    """``{"90%": {"median_step", "prob_reached_within_horizon"}, ...}`` of the milestones
    ``{prefix}_median`` / ``{prefix}_reached`` (``time_to_fraction`` or ``policy_time_to_fraction``);
    a median beyond the horizon is None."""
    return {
        f"{int(round(f * 100))}%": {
            "median_step": step_value(m) if np.isfinite(m) else None,
            "prob_reached_within_horizon": float(r),
        }
        for f, m, r in zip(ds["fraction"].values, ds[f"{prefix}_median"].values, ds[f"{prefix}_reached"].values)
    }


def summary_dict(ds: xr.Dataset) -> dict[str, object]:
    """JSON-ready headline numbers of a prediction / forecast dataset: ``time_to_fraction``
    maps ``"90%"``, ``"95%"``, ``"99%"`` (shares of the rise ``p* - R0``, not of ``p*``) to the
    median first-passage step (None: beyond the horizon) and the share of draws that get there
    within the horizon; ``policy_time_to_fraction`` and ``policy_stop_step`` the same for the
    policy when the logged reward trails it. ``expected_remaining_gain_after`` (and the policy's)
    is the largest expected remaining gain past the horizon where the draws were followed there,
    ``no_stop_step`` why there is no stop step, where the dataset has them (NaN: ``null`` in the
    CLI's JSON)."""
    out: dict[str, object] = {k: ds.attrs[k] for k in SUMMARY_ATTRS}
    out["stop_step"] = step_value(out["stop_step"])
    # what the stop step rests on past the horizon, and why there is none: attrs and text only
    # before, so `predict --json` / `forecast --json` could not tell a stop step past the horizon
    # from one that is not known at all
    for key in STOP_STEP_ATTRS:
        if key in ds.attrs:
            value = ds.attrs[key]
            out[key] = value if isinstance(value, str) else float(value)
    if ds.attrs.get("n_draws_diverging"):  # the means are then those of the stable draws
        out["n_draws_diverging"] = int(ds.attrs["n_draws_diverging"])
        if ds.attrs.get("n_draws_swinging"):  # of them, bounded by a clipped law's limit cycle
            out["n_draws_swinging"] = int(ds.attrs["n_draws_swinging"])
    out["regime_probability"] = {
        str(r): float(p) for r, p in zip(ds["regime"].values, ds["regime_probability"].values)
    }
    out["time_to_fraction"] = _fraction_summary(ds, "time_to_fraction")
    if "time_to_settle_median" in ds:  # not in a prediction saved before it was added
        out["time_to_settle"] = _fraction_summary(ds, "time_to_settle")
    if "policy_stop_step" in ds.attrs:  # the logged reward trails the policy (an observation lag)
        out["policy_stop_step"] = step_value(ds.attrs["policy_stop_step"])
        if "policy_expected_remaining_gain_after" in ds.attrs:
            out["policy_expected_remaining_gain_after"] = float(ds.attrs["policy_expected_remaining_gain_after"])
        out["policy_time_to_fraction"] = _fraction_summary(ds, "policy_time_to_fraction")
        if "policy_time_to_settle_median" in ds:
            out["policy_time_to_settle"] = _fraction_summary(ds, "policy_time_to_settle")
    last = ds[STEP_DIM].values[-1]
    lo, hi = band(ds, kind="mean", hdi_prob=float(ds["hdi_prob"].values[-1]))
    out["final_step"] = step_value(last)
    out["final_mean_reward"] = float(ds["mean_mean"].values[-1])
    out[f"final_mean_reward_hdi_{ds['hdi_prob'].values[-1]:g}"] = [float(lo[-1]), float(hi[-1])]
    return out
