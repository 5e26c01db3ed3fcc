"""Small pure helpers on one run's series: lookup, smoothing, onsets, windows, bootstrap.

Everything here works on 1-D NumPy arrays ``steps`` (optimizer steps, increasing) and
``y`` (values, NaN where not logged) and is independent of any mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Series:
    """One metric of one run: its name in the run set and its finite points."""

    name: str
    steps: np.ndarray  # (n,) optimizer steps
    values: np.ndarray  # (n,) finite values

    def __len__(self) -> int:
        return int(self.values.size)


#: Rounding a logged share may leave just outside [0, 1].
SHARE_SLACK: float = 1e-6


def find_series(
    frame: pd.DataFrame, candidates: Sequence[str], *, min_points: int = 1
) -> Series | None:
    """The first of ``candidates`` that ``frame`` has with at least ``min_points`` finite values.

    Parameters
    ----------
    frame
        One run's metrics, indexed by step (``bayes_grpo.runset.run_frame``-like; rows
        with a missing metric are kept as NaN).
    candidates
        Metric names in order of preference.
    """
    for name in candidates:
        if name in frame.columns:
            s = finite_series(frame.index.to_numpy(), frame[name].to_numpy(dtype=float), name)
            if len(s) >= min_points:
                return s
    return None


def finite_series(steps: np.ndarray, values: np.ndarray, name: str = "") -> Series:
    """The finite points of ``values`` against ``steps`` (float arrays)."""
    steps = np.asarray(steps, dtype=float)
    values = np.asarray(values, dtype=float)
    ok = np.isfinite(values) & np.isfinite(steps)
    return Series(name, steps[ok], values[ok])


def not_a_share(series: Series, of: str) -> str | None:
    """Why ``series`` is no share (of groups, of tokens) in [0, 1], or None when it is one.

    A share logged as a percentage (20 for 20%) was read as a share above 1: clipped to 1, every
    group degenerate from the first step; a clip ratio of 2, "sustained clipping"."""
    low, high = float(series.values.min()), float(series.values.max())
    if low < -SHARE_SLACK or high > 1.0 + SHARE_SLACK:
        return (
            f"{series.name} runs from {low:g} to {high:g}: not a share of {of} in [0, 1] "
            "(a percentage? the run set needs it as a fraction)"
        )
    return None


def step_number(step: float | None) -> int | float | None:
    """An optimizer step as the run set holds it: an int when whole (``--json`` prints 12120, not
    12120.0, and the report's tables do not print 1.212e+04), None when there is none."""
    if step is None:
        return None
    step = float(step)
    return int(step) if step.is_integer() else step


def window_size(n: int, fraction: float, minimum: int = 3) -> int:
    """Odd window of ``fraction * n`` points, at least ``minimum`` and at most ``n``."""
    w = max(minimum, int(round(fraction * n)))
    w = min(w, n)
    return w if w % 2 == 1 or w <= 1 else w - 1


def smooth(values: np.ndarray, fraction: float) -> np.ndarray:
    """Centred moving median over ``fraction`` of the points (shrinking at the edges)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return values
    w = window_size(values.size, fraction)
    return pd.Series(values).rolling(w, center=True, min_periods=1).median().to_numpy()


def edge_mask(steps: np.ndarray, fraction: float, *, late: bool, minimum: int = 3) -> np.ndarray:
    """Boolean mask of the first (``late=False``) or last ``fraction`` of the step span.

    At least ``minimum`` points are included (the earliest / latest ones).
    """
    steps = np.asarray(steps, dtype=float)
    n = steps.size
    span = steps[-1] - steps[0] if n else 0.0
    if late:
        mask = steps >= steps[-1] - fraction * span
    else:
        mask = steps <= steps[0] + fraction * span
    if mask.sum() < minimum:
        idx = np.arange(n)
        mask = idx >= n - minimum if late else idx < minimum
    return mask


def sustained_onset(condition: np.ndarray, sustain_fraction: float) -> int | None:
    """Index of the first point where ``condition`` holds and keeps holding for at least
    ``sustain_fraction`` of the points from there to the end; None if there is none."""
    condition = np.asarray(condition, dtype=bool)
    n = condition.size
    if n == 0:
        return None
    # fraction of True from i to the end, for every i
    tail_true = np.cumsum(condition[::-1])[::-1]
    tail_len = np.arange(n, 0, -1)
    ok = condition & (tail_true >= sustain_fraction * tail_len)
    hits = np.flatnonzero(ok)
    return int(hits[0]) if hits.size else None


def longest_run(condition: np.ndarray, steps: np.ndarray) -> tuple[float, int | None, int | None]:
    """Longest stretch (in steps) where ``condition`` holds: ``(length, start_index, end_index)``."""
    best = (0.0, None, None)
    start = None
    for i, c in enumerate(np.asarray(condition, dtype=bool)):
        if c and start is None:
            start = i
        if start is not None and (not c or i == condition.size - 1):
            end = i if c else i - 1
            length = float(steps[end] - steps[start]) + _step_width(steps)
            if length > best[0]:
                best = (length, start, end)
            start = None
    return best


def _step_width(steps: np.ndarray) -> float:
    return float(np.median(np.diff(steps))) if steps.size > 1 else 1.0


def span(steps: np.ndarray) -> float:
    """Step span of a series, counting one logging interval for the last point."""
    return float(steps[-1] - steps[0]) + _step_width(steps) if steps.size else 0.0


def ols_gain(steps: np.ndarray, values: np.ndarray) -> float:
    """Change of the least-squares line across the window: slope times step span."""
    if steps.size < 2 or np.ptp(steps) == 0:
        return float("nan")
    slope = np.polyfit(steps, values, 1)[0]
    return float(slope * (steps[-1] - steps[0]))


def interval(samples: np.ndarray, prob: float, centre: float | None = None) -> tuple[float, float]:
    """Central ``prob`` interval of ``samples`` (NaNs ignored).

    With ``centre`` (the estimate from the data), the replicates are first shifted so that
    their median is ``centre``: the residual bootstrap rebuilds series around a smoothed
    trend, which can offset every replicate by the same small bias (a moving median is
    not a moving mean); the shift removes that offset and keeps the interval's width.
    """
    samples = np.asarray(samples, dtype=float)
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return (float("nan"), float("nan"))
    if centre is not None and np.isfinite(centre):
        samples = samples + (centre - np.median(samples))
    lo, hi = np.quantile(samples, [(1 - prob) / 2, (1 + prob) / 2])
    return float(lo), float(hi)


def fall_fit_variance(values: np.ndarray, min_segment: int = 3) -> float:
    """Variance of ``values`` about their best one-fall fit (``ddof = 2``).

    The fit is two means, before and after the split that leaves the least squared error
    among the splits whose later mean is the lower (a fall), each segment at least
    ``min_segment`` points; with fewer than ``2 * min_segment`` points or no such split, the
    plain variance (``ddof = 1``). A window that holds a sudden fall of the level has the
    noise about its two levels as spread, not the fall itself; on a window without one, the
    best of its splits takes a little of the noise too (the estimate is then slightly low).
    """
    values = np.asarray(values, dtype=float)
    n = values.size
    plain = float(np.var(values, ddof=1)) if n > 1 else float("nan")
    if n < 2 * min_segment:
        return plain
    centred = values - values.mean()
    csum, csum2 = np.cumsum(centred), np.cumsum(centred**2)
    k = np.arange(min_segment, n - min_segment + 1)
    mean_before, mean_after = csum[k - 1] / k, (csum[-1] - csum[k - 1]) / (n - k)
    sse = (csum2[k - 1] - csum[k - 1] * mean_before) + (
        (csum2[-1] - csum2[k - 1]) - (csum[-1] - csum[k - 1]) * mean_after
    )
    falls = mean_after < mean_before
    return float(np.min(sse[falls]) / (n - 2)) if falls.any() else plain


def window_means(values: np.ndarray, window: int) -> np.ndarray:
    """Means of every full window of ``window`` consecutive points, ``(n - window + 1,)``.

    Entry ``k`` is the mean of ``values[k : k + window]``. No window is shorter than
    ``window`` (a shrinking edge window would turn one large value near an end into an
    "episode").
    """
    values = np.asarray(values, dtype=float)
    window = int(min(max(window, 1), values.size))
    csum = np.concatenate([[0.0], np.cumsum(values)])
    return (csum[window:] - csum[:-window]) / window


def block_resample(residuals: np.ndarray, block: int, rng: np.random.Generator) -> np.ndarray:
    """Moving-block bootstrap resample of ``residuals`` (same length)."""
    n = residuals.size
    block = int(min(max(block, 1), n))
    n_blocks = int(np.ceil(n / block))
    starts = rng.integers(0, n - block + 1, size=n_blocks)
    idx = (starts[:, None] + np.arange(block)[None, :]).ravel()[:n]
    return residuals[idx]


def residual_bootstrap_parts(
    values: np.ndarray, smooth_fraction: float, block_fraction: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """``(trend, residuals, block)`` of a residual bootstrap about the moving median.

    Each replicate is ``trend + block_resample(residuals, block, rng)``. Two corrections make
    the replicates vary as much as the series does (checked on simulated runs, where a 90%
    interval of the decoupling of ``diagnostics.hacking`` had 60-85% of the width the spread
    over seeds called for):

    - residuals about a centred moving median of ``k`` points have lost part of the noise to
      the trend (about ``1/k`` of its variance, as for a moving mean; ``k`` shrinks at the
      edges): each residual is divided by ``sqrt(1 - 1/k)``;
    - a moving median of ``w`` points takes the noise's variation on scales of ``w`` points and
      more into the trend: the residuals are negatively correlated over the window and a run
      of ``w`` of them sums to about 0. A block as long as the window copies that artefact
      into every replicate and takes the slow variation out of it (the variation a slope or a
      windowed mean reads), so a block is at most a quarter of the window
      (``block_fraction`` of the series, capped there; at least 1 point): it keeps the noise's
      own short-range correlation, not the smoother's.
    """
    values = np.asarray(values, dtype=float)
    n = values.size
    trend = smooth(values, smooth_fraction)
    w = window_size(n, smooth_fraction)
    half = w // 2
    idx = np.arange(n)
    k = np.minimum(idx, half) + np.minimum(n - 1 - idx, half) + 1  # points in each window
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(k > 1, 1.0 / np.sqrt(1.0 - 1.0 / np.maximum(k, 1)), 1.0)
    resid = (values - trend) * scale
    block = max(1, min(int(round(block_fraction * n)), w // 4))
    return trend, resid, block


def bootstrap(
    values: np.ndarray,
    statistic: Callable[[np.ndarray], float | np.ndarray],
    *,
    smooth_fraction: float,
    block_fraction: float,
    n_boot: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Replicates of ``statistic`` under a moving-block bootstrap of residuals.

    Each replicate is ``trend + block-resampled residuals`` with ``trend`` the smoothed
    series (:func:`smooth`), residuals and blocks from :func:`residual_bootstrap_parts` (so
    the replicates vary as much as the series does: with blocks as long as the smoothing
    window and unscaled residuals, 90% intervals of a growth ratio, a window's mean clip
    ratio or zero-signal share had 55-77% of the width the spread over seeds calls for).

    Returns
    -------
    numpy.ndarray
        ``(n_boot,)`` or ``(n_boot, k)`` replicates.
    """
    trend, resid, block = residual_bootstrap_parts(values, smooth_fraction, block_fraction)
    out = [statistic(trend + block_resample(resid, block, rng)) for _ in range(n_boot)]
    return np.asarray(out, dtype=float)


def align(target_steps: np.ndarray, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Linear interpolation of ``values`` (at ``steps``) onto ``target_steps``; NaN outside."""
    if steps.size == 0:
        return np.full(np.shape(target_steps), np.nan)
    out = np.interp(target_steps, steps, values)
    out[(target_steps < steps[0]) | (target_steps > steps[-1])] = np.nan
    return out


__all__ = [
    "Series",
    "align",
    "block_resample",
    "bootstrap",
    "residual_bootstrap_parts",
    "edge_mask",
    "find_series",
    "finite_series",
    "interval",
    "longest_run",
    "ols_gain",
    "smooth",
    "span",
    "not_a_share",
    "step_number",
    "sustained_onset",
    "window_size",
]
