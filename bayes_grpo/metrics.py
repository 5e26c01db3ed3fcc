"""Goodness-of-fit numbers for reward curves, NaN-aware.

A noisy reward curve cannot be fitted to ``R^2 = 1``: the step-to-step noise sets a ceiling.
Three numbers are therefore reported together:

* :func:`r2`: the raw coefficient of determination of a fitted curve against the data;
* :func:`noise_ceiling_r2`: an estimate of the ``R^2`` the true smooth curve reaches (the best
  a smooth curve can do on average; an estimate with sampling error, not a bound), from the noise
  variance estimated by differencing: first differences (``Var[y[n+1] - y[n]] = 2 sigma^2``
  for white noise around a slowly varying trend) or second-difference pseudo-residuals
  (``y[n] - (y[n-1] + y[n+1])/2``, variance ``1.5 sigma^2``, blind to any locally linear
  trend; the default for the ceiling, see :func:`noise_variance`);
* :func:`smoothed_r2`: ``R^2`` of the fitted curve against a centred moving average of the data
  (window 10% of the run), which measures whether the curve follows the trend.

:func:`has_trend` says whether a curve shows a trend beyond its noise at all (where it does
not, every ``R^2`` is meaningless); a single wild point does not decide it
(:func:`tame_wild_points`). :func:`late_change` says how much a curve still moved over its last
steps (has the run settled?). NaN entries (missing steps) are ignored throughout: the
values are taken in their order, missing points skipped. :func:`autocorrelation` is the exception:
it pairs only points logged the lag apart, never two points across a missing step.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

#: Default moving-average window as a fraction of the run length (smoothed R^2).
SMOOTH_WINDOW_FRAC: float = 0.1
#: Noise-variance estimators of :func:`noise_variance`.
FIRST_DIFFERENCE: str = "first_difference"
SECOND_DIFFERENCE: str = "second_difference"
#: Default significance level of :func:`has_trend`.
TREND_ALPHA: float = 0.01


def _pair(y, yhat) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=float).ravel()
    yhat = np.broadcast_to(np.asarray(yhat, dtype=float), np.shape(y)).ravel()
    ok = np.isfinite(y) & np.isfinite(yhat)
    return y[ok], yhat[ok]


def _constant(y: np.ndarray) -> bool:
    """Whether the finite values ``y`` are all equal.

    Compared value by value, not through a sum of squares about the mean: the mean of a
    constant 0.3 is not exactly 0.3 in floating point, so that sum is about 1e-30, not 0,
    and a ratio over it reads ``R^2 = -1e28`` or a noise ceiling of 1 instead of NaN.
    """
    return y.size > 0 and bool(np.all(y == y[0]))


def r2(y, yhat) -> float:
    """Coefficient of determination ``1 - SSE/SST`` over points where both are finite.

    Parameters
    ----------
    y
        Observations, shape ``(n,)``.
    yhat
        Fitted values, shape ``(n,)`` (or broadcastable).

    Returns
    -------
    float: ``<= 1`` (negative when worse than the mean); NaN with fewer than 2 points or a
    constant ``y``.
    """
    y, yhat = _pair(y, yhat)
    if y.size < 2 or _constant(y):
        return float("nan")
    sst = float(np.sum((y - y.mean()) ** 2))
    if sst == 0.0:
        return float("nan")
    return 1.0 - float(np.sum((y - yhat) ** 2)) / sst


def _check_method(method: str) -> None:
    """ValueError unless ``method`` names a noise estimator: checked before any early NaN
    return, so a misspelt method is refused on every input (a short or constant run returned
    NaN for it, where a longer one raised)."""
    if method not in (FIRST_DIFFERENCE, SECOND_DIFFERENCE):
        raise ValueError(
            f"unknown method {method!r}; expected {FIRST_DIFFERENCE!r} or {SECOND_DIFFERENCE!r}"
        )


def _steps_of(y: np.ndarray, steps) -> np.ndarray:
    """The steps of the values ``y`` (flat): ``steps`` checked (same size, increasing where
    both are finite), else the positions ``0 .. n-1``."""
    if steps is None:
        return np.arange(y.size, dtype=float)
    t = np.asarray(steps, dtype=float).ravel()
    if t.shape != y.shape:
        raise ValueError(f"y and steps must have the same size, got {y.size} and {t.size}")
    logged = t[np.isfinite(y)]
    if not (np.isfinite(logged).all() and (np.diff(logged) > 0).all()):
        raise ValueError("steps must be finite and increasing at the finite values of y")
    return t


def noise_variance(y, *, robust: bool = False, method: str = FIRST_DIFFERENCE, steps=None) -> float:
    """White-noise variance of ``y`` around a smooth trend, by differencing.

    Parameters
    ----------
    y
        Values in step order, shape ``(n,)``; missing points are skipped (differences of
        consecutive finite values).
    robust
        Use ``(1.4826 MAD)^2`` instead of the variance of the differences (insensitive to
        jumps and outliers).
    method
        ``"first_difference"`` (default): ``sigma^2 = Var[diff(y)] / 2``; a trend whose slope
        changes fast between points inflates it. ``"second_difference"`` (Gasser, Sroka and
        Jennen-Steinmetz 1986): pseudo-residuals ``r[n] = (y[n-1] + y[n+1])/2 - y[n]`` have
        mean 0 and variance ``1.5 sigma^2`` under any locally linear trend, so
        ``sigma^2 = mean(r^2) / 1.5``. On the public GRPO logs the two agree within ~5% on
        long noisy runs, while on short steep ones (26-51 logged points) first differences
        read 2-5 times higher (``benchmarks/law_fits_real_runs.py``).
    steps
        The step of each value of ``y`` (same shape), for the second differences: default its
        positions ``0 .. n-1``, i.e. ``y`` on its regular grid with NaN where a step was not
        logged. Where consecutive logged points are unevenly spaced (a missing step, an
        irregular log) the pseudo-residual is Gasser, Sroka and Jennen-Steinmetz's for an
        uneven design, ``r = a y[n-1] + b y[n+1] - y[n]`` with ``a, b`` the linear
        interpolation weights of ``y[n]`` between its neighbours (``a = b = 1/2`` on an even
        grid), and ``sigma^2 = mean(r^2 / (1 + a^2 + b^2))``: zero mean under any locally linear
        trend again. Taken at face value across a gap, ``(y[n-1] + y[n+1])/2 - y[n]`` read the
        trend's rise over the gap as noise. First differences ignore ``steps`` (consecutive
        finite values, as documented above).

    Returns
    -------
    float (reward units squared); NaN with fewer than 3 finite points.
    """
    _check_method(method)
    y = np.asarray(y, dtype=float).ravel()
    t = _steps_of(y, steps)
    ok = np.isfinite(y)
    y, t = y[ok], t[ok]
    if y.size < 3:
        return float("nan")
    if method == FIRST_DIFFERENCE:
        d, factor = np.diff(y), 2.0
        d = d - (np.median(d) if robust else np.mean(d))
    else:
        h = np.diff(t)
        a, b = h[1:] / (h[:-1] + h[1:]), h[:-1] / (h[:-1] + h[1:])  # weights of y[n-1], y[n+1]
        d, factor = (a * y[:-2] + b * y[2:] - y[1:-1]) / np.sqrt((1.0 + a**2 + b**2) / 1.5), 1.5
    if robust:
        mad = float(np.median(np.abs(d - np.median(d))))
        return (1.4826 * mad) ** 2 / factor
    if method == FIRST_DIFFERENCE:
        return float(np.sum(d**2) / (d.size - 1)) / factor
    return float(np.mean(d**2)) / factor


def noise_ceiling_r2(y, *, robust: bool = False, method: str = SECOND_DIFFERENCE, steps=None) -> float:
    """Estimated ``R^2`` of the true smooth curve on ``y``: ``1 - sigma^2 / Var[y]``.

    An estimate, not a bound: for white noise it is unbiased for the true curve's ``R^2``
    (unless clipped at 0), but ``sigma^2`` comes from the same few noisy points, so on a short
    noisy run its sampling sd is of the order of the value itself (147 points at noise sd 0.28:
    ceiling 0.16 +- 0.10, below the true curve's ``R^2`` in half of the runs;
    ``tests/test_metrics.py``), and a fit's in-sample ``R^2`` exceeds it about as often.

    ``sigma^2`` from :func:`noise_variance` (default: second-difference pseudo-residuals,
    which a steep rise does not inflate; ``method="first_difference"`` for the plain first
    differences; ``steps``, the values' steps, as there: a missing step is not read as
    noise). Clipped to ``[0, 1]``; NaN with fewer than 3 finite points or constant ``y``. The estimate assumes white step noise: noise that wanders slowly counts as signal,
    and anti-correlated step noise (lag-1 autocorrelation -0.1 to -0.2 in several public GRPO
    logs) reads as more noise, so the ceiling is low there and a fit can exceed it.
    """
    _check_method(method)
    y = np.asarray(y, dtype=float).ravel()
    t = _steps_of(y, steps)
    ok = np.isfinite(y)
    y, t = y[ok], t[ok]
    if y.size < 3 or _constant(y):
        return float("nan")
    total = float(np.var(y, ddof=1))
    if total == 0.0:
        return float("nan")
    noise = noise_variance(y, robust=robust, method=method, steps=t)
    return float(np.clip(1.0 - noise / total, 0.0, 1.0))


def moving_average(y, window_frac: float = SMOOTH_WINDOW_FRAC) -> np.ndarray:
    """Centred moving average with an odd window of ``max(3, window_frac * n_finite)`` points.

    Near the ends the window shrinks symmetrically (so the average stays centred). NaN
    entries are skipped (the average runs over the finite values in order) and stay NaN in
    the output. Shape as ``y``.
    """
    if not (np.isfinite(window_frac) and window_frac >= 0):
        # a negative share was taken as the smallest window, NaN and inf failed "cannot convert
        # float NaN to integer" and an OverflowError
        raise ValueError(f"window_frac must be a finite share >= 0 of the run, got {window_frac!r}")
    y = np.asarray(y, dtype=float)
    flat = y.ravel()
    ok = np.isfinite(flat)
    vals = flat[ok]
    out = np.full(flat.shape, np.nan)
    n = vals.size
    if n == 0:
        return out.reshape(y.shape)
    half = max(1, int(round(window_frac * n)) // 2)
    csum = np.concatenate([[0.0], np.cumsum(vals)])
    idx = np.arange(n)
    h = np.minimum(np.minimum(idx, n - 1 - idx), half)
    out[ok] = (csum[idx + h + 1] - csum[idx - h]) / (2 * h + 1)
    return out.reshape(y.shape)


def smoothed_r2(y, yhat, window_frac: float = SMOOTH_WINDOW_FRAC) -> float:
    """``R^2`` of the fitted curve against the centred moving average of the data.

    Parameters
    ----------
    y, yhat
        Observations and fitted values, shape ``(n,)``.
    window_frac
        Moving-average window as a fraction of the number of finite points (default 10%).

    Returns
    -------
    float: ``1 - sum (ma - yhat)^2 / sum (ma - mean ma)^2`` over points where ``y`` and
    ``yhat`` are finite; NaN when too few points or a constant ``y`` (whose moving average
    is flat up to the rounding of its running sums).
    """
    y = np.asarray(y, dtype=float).ravel()
    yhat = np.broadcast_to(np.asarray(yhat, dtype=float), y.shape).ravel()
    ok = np.isfinite(y) & np.isfinite(yhat)
    if _constant(y[ok]):
        return float("nan")
    return r2(moving_average(y[ok], window_frac), yhat[ok])


#: Fewest contiguous blocks of the trend test (a short log gets fewer than ``n_blocks``).
MIN_TREND_BLOCKS: int = 3
#: Points per block of the trend test on a log too short for ``n_blocks`` blocks of two:
#: three (more within-block degrees of freedom than pairs: power 0.875 against 0.74 on a
#: 12-point rise of 0.5 in noise of sd 0.05, at the same level).
SHORT_LOG_BLOCK_POINTS: int = 3
#: Fewest finite points the trend test tells anything from (:data:`MIN_TREND_BLOCKS` blocks
#: of :data:`SHORT_LOG_BLOCK_POINTS`): below it :func:`trend_test` returns ``(nan, nan)``.
MIN_TREND_POINTS: int = MIN_TREND_BLOCKS * SHORT_LOG_BLOCK_POINTS
#: A value of the trend test further than this many noise standard deviations from its
#: neighbours (see :func:`tame_wild_points`) is a wild point (a logging glitch, one
#: diverging batch) and is replaced by its neighbours' median before the test.
WILD_POINT_SD: float = 5.0
#: Neighbours on each side whose median a value is compared with (:func:`tame_wild_points`).
WILD_POINT_HALF_WINDOW: int = 2


def tame_wild_points(y, *, limit_sd: float = WILD_POINT_SD) -> np.ndarray:
    """``y`` (finite, in step order) with each wild point replaced by its neighbours' median.

    A value is wild when it lies more than ``limit_sd`` noise standard deviations from the
    median of the window of :data:`WILD_POINT_HALF_WINDOW` values each side of it and itself
    (the window shrinks symmetrically near the ends, so a steep but smooth rise or a step to a
    new level is never a wild point: only a value its neighbours on both sides disown). The two
    end values are kept: with neighbours on one side only, a glitch there cannot be told from a
    change of level (a reward that has jumped by the first logged step). The noise sd is the
    robust second-difference estimate of :func:`noise_variance` (a wild point does not inflate
    it, a locally linear trend does not read as noise). A series with no robust noise (at
    least half of its second differences zero: quantised or constant rewards) is returned as
    it is: there is no scale to call a value wild. Under Gaussian noise about 3 values in
    100,000 are replaced on a 200-point log (2 in 1,000 on a 12-point one, whose noise
    estimate is rough). Affine-equivariant: the same values are replaced whatever the reward's
    units.
    """
    y = np.asarray(y, dtype=float)
    n = y.size
    if n < 5:
        return y
    sd = float(np.sqrt(noise_variance(y, robust=True, method=SECOND_DIFFERENCE)))
    if not (np.isfinite(sd) and sd > 0.0):
        return y
    centre = np.empty(n - 2)  # of the inner values y[1:-1]
    for h in range(1, WILD_POINT_HALF_WINDOW + 1):
        # values with h neighbours each side and, for the largest h, every value further in
        last = h == WILD_POINT_HALF_WINDOW
        med = np.median(np.lib.stride_tricks.sliding_window_view(y, 2 * h + 1), axis=1)
        if last:
            centre[h - 1 : n - 1 - h] = med
        else:
            centre[h - 1], centre[n - 2 - h] = med[0], med[-1]
    out = y.copy()
    out[1:-1] = np.where(np.abs(y[1:-1] - centre) > limit_sd * sd, centre, y[1:-1])
    return out


def trend_test(t, y, n_blocks: int = 10) -> tuple[float, float]:
    """One-way ANOVA of ``y`` across ``n_blocks`` contiguous blocks of the run (in ``t`` order).

    Under "no trend" (a constant mean plus white noise) the statistic follows
    ``F(k - 1, n - k)`` with ``k`` the number of blocks. A log with fewer than ``2 n_blocks``
    finite points (a run logged every 25 steps) gets ``k = n // SHORT_LOG_BLOCK_POINTS``
    blocks, at least :data:`MIN_TREND_BLOCKS`; with fewer points (under 9) there is nothing
    to tell: ``(nan, nan)``. ``n_blocks``: a whole number ``>= MIN_TREND_BLOCKS`` (ValueError
    otherwise). A wild point (:func:`tame_wild_points`: more than :data:`WILD_POINT_SD` noise
    sds from its neighbours) is replaced by its neighbours' median first, so one logging
    glitch does not by itself decide the verdict. Returns ``(F, p_value)``. Autocorrelated noise
    (e.g. a stationary SDE) can also register as a trend: slow wander is visible structure.
    """
    if isinstance(n_blocks, bool) or int(n_blocks) != n_blocks or n_blocks < MIN_TREND_BLOCKS:
        # 1 or 2 blocks returned (nan, nan) on any run, read as "no trend"; 3.5 was split as 3
        raise ValueError(f"n_blocks must be a whole number >= {MIN_TREND_BLOCKS}, got {n_blocks!r}")
    n_blocks = int(n_blocks)
    t = np.asarray(t, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if t.shape != y.shape:
        raise ValueError(f"t and y must have the same shape, got {t.shape} and {y.shape}")
    ok = np.isfinite(t) & np.isfinite(y)
    order = np.argsort(t[ok], kind="stable")
    # one wild value decided the verdict: a clear rise read "no trend" (its within-block
    # variance blown up by the point), so the test runs on the values with wild points tamed
    vals = tame_wild_points(y[ok][order])
    if vals.size < 2 * n_blocks:
        n_blocks = vals.size // SHORT_LOG_BLOCK_POINTS
    if n_blocks < MIN_TREND_BLOCKS:
        return float("nan"), float("nan")
    blocks = np.array_split(vals, n_blocks)
    if all(np.ptp(b) == 0 for b in blocks):
        # no within-block spread: a constant run tells nothing, but blocks at different levels
        # (a noiseless 0 -> 1 switch on a block boundary) are a trend beyond any noise; both
        # read "no trend" (NaN), while one value moved by 0.01 gave p ~ 1e-241
        if np.ptp([b[0] for b in blocks]) == 0:
            return float("nan"), float("nan")
        return float("inf"), 0.0
    res = stats.f_oneway(*blocks)
    return float(res.statistic), float(res.pvalue)


def has_trend(t, y, *, alpha: float = TREND_ALPHA, n_blocks: int = 10) -> bool:
    """Is there a visible trend beyond noise? (block ANOVA of :func:`trend_test`, ``p < alpha``).

    False when there are too few finite points (see :func:`trend_test`) to tell.
    """
    _, p = trend_test(t, y, n_blocks=n_blocks)
    return bool(np.isfinite(p) and p < alpha)


#: Share of a run's finite points, at its end, over which :func:`late_change` measures the change.
LATE_FRACTION: float = 0.25
#: Fewest points :func:`late_change` fits a line to.
LATE_MIN_POINTS: int = 8


def logging_interval(steps) -> float:
    """The interval a run's steps were logged at: the most common difference between consecutive
    finite steps (the smallest of those as common; NaN with fewer than two distinct steps). A
    log with missing steps keeps its interval (the gaps are multiples of it); TRL's first logged
    step, 1 before 4, 8, 12 ... (differences 3, 4, 4, ...), does not set it."""
    t = np.asarray(steps, dtype=float).ravel()
    t = np.unique(t[np.isfinite(t)])
    if t.size < 2:
        return float("nan")
    diffs = np.round(np.diff(t), 9)  # float steps: 0.1 and 0.1000000001 are one interval
    values, counts = np.unique(diffs, return_counts=True)
    return float(values[np.argmax(counts)])


def _logged_in_step_order(x, steps) -> tuple[np.ndarray, np.ndarray]:
    """``(values, steps)`` of the finite values of ``x`` with a finite step, in step order;
    ``steps`` default the positions ``0 .. n-1`` (``x`` on its grid, NaN at a missing step)."""
    v = np.asarray(x, dtype=float).ravel()
    t = np.arange(v.size, dtype=float) if steps is None else np.asarray(steps, dtype=float).ravel()
    if t.shape != v.shape:
        raise ValueError(f"x and steps must have the same shape, got {v.shape} and {t.shape}")
    ok = np.isfinite(v) & np.isfinite(t)
    order = np.argsort(t[ok], kind="stable")
    return v[ok][order], t[ok][order]


def _lag_pairs(t: np.ndarray, interval: float, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """``(paired, j)`` for steps ``t`` in order: ``paired[i]`` when step ``t[i] + lag *
    interval`` is logged, at ``t[j[i]]`` (to a billionth of the interval)."""
    target = t + lag * interval
    j = np.minimum(np.searchsorted(t, target - 1e-9 * interval), t.size - 1)
    return np.isclose(t[j], target, rtol=0.0, atol=1e-9 * interval), j


def autocorrelation(x, lags=(1,), *, steps=None) -> np.ndarray:
    """Sample autocorrelation of the series ``x`` at each lag of ``lags`` (in logging intervals),
    pairing only points that are that many intervals apart, both logged.

    ``steps``: the step of each value of ``x`` (default: its positions ``0 .. n-1``, i.e. ``x`` on
    its regular grid with NaN where a step was not logged). The interval is
    :func:`logging_interval`; lag ``k`` pairs the finite values whose steps differ by ``k`` of
    it. On a series without missing steps this is the usual estimator ``sum_i v_i v_{i+k} /
    sum_i v_i^2`` (``v`` the values less their mean); with missing steps the sum over the pairs
    that are logged is scaled to the ``n - k`` pairs of a complete series of the same ``n``
    points (the amplitude-modulated estimator of series with missing values). Dropping the NaN
    first, as this did, paired the points on both sides of a gap as neighbours: a run of two
    stretches at different levels read as correlated across the gap. NaN at a lag no two points
    are apart by, and for a constant series.
    """
    v, t = _logged_in_step_order(x, steps)
    lags = tuple(int(k) for k in lags)
    out = np.full(len(lags), np.nan)
    n = v.size
    interval = logging_interval(t)
    if n < 2 or not np.isfinite(interval):
        return out
    v = v - v.mean()
    denom = float(np.sum(v * v))
    if not denom > 0:
        return out
    for i, lag in enumerate(lags):
        if not 1 <= lag < n:
            continue
        paired, j = _lag_pairs(t, interval, lag)
        m = int(paired.sum())
        if m:
            out[i] = (n - lag) / m * float(np.sum(v[paired] * v[j[paired]])) / denom
    return out


def autocorrelation_sample_size(x, *, steps=None) -> int:
    """The ``n`` of the white-noise band ``1.96 / sqrt(n)`` of :func:`autocorrelation`'s lag-1
    estimate of ``x`` (same ``steps``): its lag-1 pairs (finite points one logging interval
    apart) plus one, the length of a complete series with as many pairs; 0 with no pair.

    On a complete series of ``n`` points (``n - 1`` pairs) this is ``n``, Bartlett's
    ``Var(r_1) ~ 1 / n`` of the literature's band (Box & Jenkins). With missing steps the
    estimate rests on its pairs, not on its points: its spread under white noise grows as
    ``1 / pairs`` (the scaling to ``n - 1`` pairs leaves it so), and a band from the points
    was too narrow, flagging white residuals of a gappy log as a wander.
    """
    t = np.unique(_logged_in_step_order(x, steps)[1])
    interval = logging_interval(t)
    if t.size < 2 or not np.isfinite(interval):
        return 0
    pairs = int(_lag_pairs(t, interval, 1)[0].sum())
    return pairs + 1 if pairs else 0


def late_change(t, y, *, fraction: float = LATE_FRACTION, min_points: int = LATE_MIN_POINTS) -> tuple[float, float]:
    """How much a curve still moved over its last ``fraction`` of finite points, with a standard error.

    A straight line is fitted by least squares to the last ``max(ceil(fraction n), min_points)``
    finite points ``(t, y)`` (in ``t`` order); the change is its slope times the window's span
    (units of ``y``). The standard error of the slope is inflated for autocorrelated noise by
    ``sqrt((1 + rho) / (1 - rho))``, ``rho`` the lag-1 autocorrelation of the line's residuals
    (:func:`autocorrelation` at the points' steps: not across a missing step; 0 where no two
    points are one logging interval apart) (clipped to ``[0, 0.9]``): the seed-to-seed wander of a stochastic trajectory is slow, and
    read as white noise it made a settled run "still rising". Returns ``(change, se)``;
    ``(nan, nan)`` with fewer than ``min_points`` finite points, and ``se = 0`` for points exactly
    on a line.
    """
    t = np.asarray(t, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if t.shape != y.shape:
        raise ValueError(f"t and y must have the same shape, got {t.shape} and {y.shape}")
    if not 0 < fraction <= 1 or int(min_points) < 3:
        raise ValueError(f"need 0 < fraction <= 1 and min_points >= 3, got {fraction!r} and {min_points!r}")
    ok = np.isfinite(t) & np.isfinite(y)
    order = np.argsort(t[ok], kind="stable")
    t, y = t[ok][order], y[ok][order]
    if t.size < int(min_points):
        return float("nan"), float("nan")
    n = min(max(int(np.ceil(fraction * t.size)), int(min_points)), t.size)
    t, y = t[-n:], y[-n:]
    width = float(t[-1] - t[0])
    tc = t - t.mean()
    sxx = float(np.sum(tc**2))
    if not width > 0 or not sxx > 0:
        return float("nan"), float("nan")
    slope = float(np.sum(tc * (y - y.mean())) / sxx)
    resid = y - y.mean() - slope * tc
    ss = float(np.sum(resid**2))
    lag1 = float(autocorrelation(resid, (1,), steps=t)[0]) if ss > 0 else 0.0
    rho = float(np.clip(lag1, 0.0, 0.9)) if np.isfinite(lag1) else 0.0
    se = np.sqrt(ss / (n - 2) / sxx * (1 + rho) / (1 - rho))
    return slope * width, float(se * width)


__all__ = [
    "r2",
    "autocorrelation",
    "logging_interval",
    "late_change",
    "LATE_FRACTION",
    "LATE_MIN_POINTS",
    "noise_variance",
    "noise_ceiling_r2",
    "moving_average",
    "smoothed_r2",
    "trend_test",
    "has_trend",
    "SMOOTH_WINDOW_FRAC",
    "FIRST_DIFFERENCE",
    "SECOND_DIFFERENCE",
    "TREND_ALPHA",
    "MIN_TREND_BLOCKS",
    "SHORT_LOG_BLOCK_POINTS",
    "WILD_POINT_SD",
    "WILD_POINT_HALF_WINDOW",
    "tame_wild_points",
]
