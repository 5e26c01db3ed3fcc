"""Stability of GRPO dynamics: the closed-form criterion and the exact discrete one.

The linearised GRPO update with heavy-ball momentum ``mu``, gain ``a = eta K`` and a lag of
``L = K_ref`` optimizer steps is the recursion (DESIGN.md section 1)

    e[n+1] - e[n] = mu (e[n] - e[n-1]) - a e[n-L]

Two stability criteria are offered and every public function says which one it uses:

* **closed form** (the paper's threshold): the continuum damping
  ``C_eff = (1 - mu) - a L`` is positive, i.e. ``a L < 1 - mu``; threshold
  ``a* = (1 - mu) / L``. It is exact at ``L = 1`` and conservative beyond.
* **exact**: every root of the characteristic polynomial
  ``P(z) = z^(L-1) (z - 1)(z - mu) + a`` lies strictly inside the unit circle, i.e. the
  spectral radius of the recursion's companion matrix is ``< 1``.

Conventions
-----------
``momentum`` is the heavy-ball ``mu`` of the recursion; for EMA momentum (Adam's beta1)
pass ``a = eta (1 - b1) K`` (see :func:`bayes_grpo.dynamics.gain`). The thresholds assume
``0 <= mu < 1`` (the usual range); the spectral radius itself is defined for any ``mu``.

``L = 0`` (no lag: the gradient is taken at the current iterate) is the ordinary heavy-ball
method: the characteristic polynomial is ``(z - 1)(z - mu) + a z`` (the same formula
multiplied by ``z``), its exact threshold is ``a* = 2 (1 + mu)``, while the closed form
``C_eff = 1 - mu > 0`` never predicts instability (closed-form threshold ``+inf``).

The exact criterion needs an integer lag: ``k_ref`` values that are not integers (beyond a
1e-9 tolerance) raise ``ValueError``; the closed form accepts any real ``L >= 0``.

A value of ``a`` exactly on a threshold (spectral radius 1, or ``C_eff = 0``) is marginal
and counted as *not* stable; ``a <= 0`` (no restoring force) is not stable either. The
closed form counts ``C_eff`` as zero when it is within a relative ``1e-9``
(:data:`CLOSED_FORM_RTOL`) of the terms it is the difference of, ``1 - mu`` and ``a L``:
a gain that is a boundary value up to floating-point rounding (``a = 0.2 x
0.24999999999999437``, ``mu = 0.5``, ``L = 10``) is marginal, as it is in exact arithmetic.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import xarray as xr

from bayes_grpo.constants import HEAVY_BALL
from bayes_grpo.dynamics.coefficients import (
    damping_ratio,
    effective_step,
    oscillator_coefficients,
)

#: Regime labels returned by :func:`classify_regime`.
OVERDAMPED: str = "overdamped"
CRITICAL: str = "critical"
UNDERDAMPED: str = "underdamped"
UNSTABLE: str = "unstable"
REGIMES: tuple[str, ...] = (OVERDAMPED, CRITICAL, UNDERDAMPED, UNSTABLE)

#: Names of the two stability criteria (used in outputs that say which one a number uses).
CLOSED_FORM: str = "closed_form"
EXACT: str = "exact"
CRITERIA: tuple[str, ...] = (CLOSED_FORM, EXACT)

#: Largest number of matrix entries handled by one batched eigenvalue call (memory bound).
_MAX_BATCH_ENTRIES: int = 2_000_000
#: Largest lag at which ``exact_threshold(method="auto")`` bisects on eigenvalues.
AUTO_BISECTION_MAX_LAG: int = 128
#: Largest lag whose companion matrix is built (``L + 1`` rows: 134 MB and minutes at this lag,
#: memory ``~ L^2``, time ``~ L^3``; ``K_ref = 1e8`` asked numpy for 71 PiB, a ``MemoryError``
#: traceback). Settings with ``0 <= mu < 1`` and ``a > 0`` beyond :data:`WINDING_MIN_LAG` need
#: no companion matrix (:func:`_dominant_roots`), up to :data:`MAX_ROOT_LAG`.
MAX_EIGEN_LAG: int = 4096
#: Lags beyond which the dominant characteristic roots of a setting with ``0 <= mu < 1`` and
#: ``a > 0`` (all that the spectral radius and the recursion's regime need) come from an
#: argument-principle root count (:func:`_roots_inside`, time ``~ L``) instead of the
#: companion eigenvalues (time ``~ L^3``: ~17 s at ``K_ref = 2000``, ~0.3 s by the count).
WINDING_MIN_LAG: int = 256
#: Largest lag whose spectral radius and regime are computed (by the root count: ~10 s a setting
#: at this lag). Beyond it :func:`spectral_radius` and :func:`recursion_regime` raise
#: ``ValueError``; the exact verdict, threshold and critical ``K_ref`` (:func:`exact_stable`,
#: :func:`exact_threshold`, :func:`critical_k_ref`) use the boundary locus and hold at any lag.
MAX_ROOT_LAG: int = 100_000
#: Tolerance on ``k_ref`` being an integer for the exact criterion.
_INTEGER_TOL: float = 1e-9
#: Relative tolerance of the closed-form criterion: ``C_eff = (1 - mu) - a L`` counts as 0
#: (marginal, not stable) when ``|C_eff| <= CLOSED_FORM_RTOL * max(1 - mu, a L)``.
CLOSED_FORM_RTOL: float = 1e-9


# ----------------------------------------------------------------------------- closed form


def closed_form_stable(a, momentum, k_ref):
    """Closed-form (paper) stability: ``C_eff = (1 - mu) - a L > 0`` and ``a > 0``.

    Parameters
    ----------
    a
        Gain ``eta K`` (dimensionless, per optimizer step); any shape.
    momentum
        Heavy-ball momentum ``mu``; broadcast against ``a``.
    k_ref
        Lag ``L`` in optimizer steps (any real ``>= 0``); broadcast.

    Returns
    -------
    numpy.ndarray of bool (broadcast shape); NaN inputs give False. ``C_eff`` within a
    relative :data:`CLOSED_FORM_RTOL` of zero (``|C_eff| <= rtol max(1 - mu, a L)``: a
    boundary value up to rounding) is marginal, so not stable.
    """
    a, damping, tolerance = _damping_and_rounding(a, momentum, k_ref)
    with np.errstate(invalid="ignore"):
        return np.asarray((damping > tolerance) & (a > 0))


def closed_form_marginal(a, momentum, k_ref):
    """Is ``C_eff = (1 - mu) - a L`` zero up to rounding (the setting on the closed-form threshold)?

    True where ``|C_eff| <= CLOSED_FORM_RTOL max(1 - mu, a L)``, the rule by which
    :func:`closed_form_stable` calls such a setting marginal: a text shows that ``C_eff`` as 0
    (``stability`` printed ``C_eff = -2.77556e-17`` at ``a = 0.05, mu = 0.9, L = 2``). NumPy
    bool array of the broadcast shape; NaN inputs give False.
    """
    _, damping, tolerance = _damping_and_rounding(a, momentum, k_ref)
    with np.errstate(invalid="ignore"):
        return np.asarray(np.abs(damping) <= tolerance)


def _damping_and_rounding(a, momentum, k_ref):
    """``(a, C_eff, tolerance)`` broadcast: ``C_eff`` and the rounding within which it is 0,
    :data:`CLOSED_FORM_RTOL` times the larger of the terms it is the difference of."""
    a, mu, lag = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (a, momentum, k_ref)))
    with np.errstate(over="ignore"):  # only C_eff is used; M_eff (a L^2) overflows at huge L
        _, damping, _ = oscillator_coefficients(a, mu, lag)
    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.maximum(np.abs(1.0 - mu), np.abs(a * lag))
    return a, damping, CLOSED_FORM_RTOL * scale


def closed_form_threshold(momentum, k_ref):
    """Closed-form threshold gain ``a* = (1 - mu) / L`` (``+inf`` at ``L = 0``).

    Parameters
    ----------
    momentum
        Heavy-ball momentum ``mu``.
    k_ref
        Lag ``L >= 0`` in optimizer steps (real values allowed).

    Returns
    -------
    numpy.ndarray of float: stable (closed form) iff ``0 < a < a*``.
    """
    mu, lag = np.broadcast_arrays(np.asarray(momentum, dtype=float), np.asarray(k_ref, dtype=float))
    if np.any(lag < 0):
        raise ValueError(f"k_ref must be >= 0, got {np.min(lag)}")
    with np.errstate(divide="ignore"):
        return np.where(lag > 0, (1.0 - mu) / np.where(lag > 0, lag, 1.0), np.inf)


# ----------------------------------------------------------------------------- exact


def _integer_lags(k_ref) -> np.ndarray:
    lags = _whole_lags(k_ref)
    if np.any(lags >= 2.0**63):
        # the cast wrapped them to -2**63: "k_ref must be >= 0, got -9.223372036854776e+18"
        raise ValueError(
            f"K_ref = {np.max(lags):g}: the characteristic roots of the exact criterion are not "
            f"computed beyond K_ref = {MAX_ROOT_LAG} (the exact verdict, threshold a* and critical "
            "K_ref, by the boundary locus, are)"
        )
    return lags.astype(np.int64)


def is_whole(x) -> bool:
    """Whether every value of ``x`` (scalar or array, e.g. steps) is a finite whole number
    (within :data:`_INTEGER_TOL`)."""
    arr = np.asarray(x, dtype=float)
    return bool(np.all(np.isfinite(arr)) and np.all(np.abs(arr - np.round(arr)) <= _INTEGER_TOL))


def is_whole_lag(k_ref: float) -> bool:
    """Whether ``k_ref`` is a finite whole number of steps (:func:`is_whole`): the lags the
    exact criterion is defined for."""
    return is_whole(float(k_ref))


def _whole_lags(k_ref) -> np.ndarray:
    """Validated integer lags as floats (rounded): the form for arithmetic, which also holds
    lags beyond int64 (the critical lag of a tiny gain, ``~ pi / (2 a)``, can exceed 2**63)."""
    lag = np.asarray(k_ref, dtype=float)
    finite = np.isfinite(lag)
    if np.any(lag[finite] < 0):
        raise ValueError(f"k_ref must be >= 0, got {np.min(lag[finite])}")
    bad = finite & (np.abs(lag - np.round(lag)) > _INTEGER_TOL)
    if np.any(bad):
        raise ValueError(
            # each value once: a lag broadcast against posterior draws repeated itself
            f"the exact stability criterion needs an integer lag k_ref; got {np.unique(lag[bad])[:5].tolist()} "
            "(the closed-form criterion accepts real values)"
        )
    if np.any(~finite):
        raise ValueError("k_ref must be finite for the exact stability criterion")
    return np.round(lag)


def characteristic_coefficients(a, momentum, k_ref: int) -> np.ndarray:
    """Monic coefficients of the characteristic polynomial of the lagged recursion.

    For ``L >= 1``: ``z^(L+1) - (1 + mu) z^L + mu z^(L-1) + a``; for ``L = 0``:
    ``z^2 - (1 + mu - a) z + mu``.

    Parameters
    ----------
    a, momentum
        1-D arrays of the same length ``B``.
    k_ref
        One integer lag ``L >= 0``.

    Returns
    -------
    numpy.ndarray, shape ``(B, n)`` with ``n = max(L, 1) + 1``: ``c[:, j]`` multiplies
    ``z^(n-1-j)`` (the leading 1 omitted).
    """
    a = np.asarray(a, dtype=float).ravel()
    mu = np.asarray(momentum, dtype=float).ravel()
    lag = int(k_ref)
    if lag == 0:
        return np.stack([a - 1.0 - mu, mu], axis=1)
    n = lag + 1
    c = np.zeros((a.size, n))
    c[:, 0] = -(1.0 + mu)
    c[:, 1] += mu
    c[:, n - 1] += a
    return c


def _reduce_roots_one_lag(a: np.ndarray, mu: np.ndarray, lag: int, reduce, fill) -> np.ndarray:
    """``reduce(roots)`` for many ``(a, mu)`` at one lag (batched companion eigenvalues).

    ``reduce`` maps the characteristic roots of a chunk of settings, shape ``(B, n)``
    complex, to one value per setting, shape ``(B,)``; ``fill`` where ``a`` or ``mu`` is NaN.
    """
    out = np.full(a.size, fill, dtype=object if isinstance(fill, str) else float)
    ok = np.isfinite(a) & np.isfinite(mu)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return out
    n = max(lag, 1) + 1  # rows of the companion matrix
    chunk = max(1, _MAX_BATCH_ENTRIES // (n * n))
    for start in range(0, idx.size, chunk):
        sel = slice(start, start + chunk)
        out[idx[sel]] = reduce(_characteristic_roots(a[idx][sel], mu[idx][sel], lag))
    return out


def _characteristic_roots(a: np.ndarray, mu: np.ndarray, lag: int) -> np.ndarray:
    """The characteristic roots of settings ``(a, mu)`` (1-D, finite) at one lag, shape
    ``(B, n)`` complex, or, beyond :data:`WINDING_MIN_LAG`, where every ``0 <= mu < 1`` and
    ``a > 0``, the dominant roots only (:func:`_dominant_roots`: the largest modulus and the
    regime are those of all roots). The eigenvalues of the companion matrices (no bound on
    ``B``; callers chunk) up to :data:`MAX_EIGEN_LAG`; ``ValueError`` beyond what can be
    computed."""
    if lag > WINDING_MIN_LAG and np.all((mu >= 0) & (mu < 1) & (a > 0)):
        if lag > MAX_ROOT_LAG:
            raise ValueError(
                f"K_ref = {lag}: the characteristic roots of the exact criterion (the dominant ones, "
                f"found in time ~ K_ref) are not computed for a K_ref too large beyond K_ref = "
                f"{MAX_ROOT_LAG}; the spectral radius and the recursion's regime are not available there, while the exact verdict, threshold "
                "a* and critical K_ref (boundary locus) are"
            )
        # once per distinct setting (the runs of a simulation share theirs across seeds and G)
        pairs, inverse = np.unique(np.stack([a, mu], axis=1), axis=0, return_inverse=True)
        roots = np.stack([_dominant_roots(float(x), float(m), lag) for x, m in pairs])
        return roots[np.ravel(inverse)]
    if lag > MAX_EIGEN_LAG:
        raise ValueError(
            f"K_ref = {lag}: the characteristic roots of the exact criterion are the eigenvalues of "
            f"a {lag + 1} x {lag + 1} companion matrix, too large beyond K_ref = {MAX_EIGEN_LAG} "
            "(memory grows as K_ref^2, time as K_ref^3) for a momentum outside [0, 1) or a gain "
            "<= 0; the spectral radius and the recursion's regime are not available there, while "
            "the exact verdict, threshold a* and critical K_ref (boundary locus) are"
        )
    c = characteristic_coefficients(a, mu, lag)
    n = c.shape[1]
    companion = np.broadcast_to(np.eye(n, k=-1), (c.shape[0], n, n)).copy()
    companion[:, 0, :] = -c
    return np.linalg.eigvals(companion)


# Long lags: the dominant roots by the argument principle. On the circle |z| = r write
# P(z) = g(z) + a, g(z) = z^(L-1) (z - 1)(z - mu). The number of roots inside is the winding of
# g + a around 0, i.e. the signed number of times g crosses the ray (-inf, -a): points where
# arg g = pi (mod 2 pi) and |g| > a. arg g(r e^{i theta}) is smooth on [0, pi] with at most two
# turning points (its derivative times |z - 1|^2 |z - mu|^2 is a quadratic in sin^2(theta/2)),
# so on each monotone piece every level pi (2k + 1) is met once, found by bisection; the lower
# half circle mirrors the upper one. The count is exact up to rounding at a circle through a
# root, so a bisection on r gives the spectral radius to rounding.


def _log_abs_g(r: float, s, mu: float, lag: int):
    """``log |g(r e^{i theta})|`` with ``s = sin^2(theta / 2)`` (no overflow, no cancellation)."""
    d1 = (r - 1.0) ** 2 + 4.0 * r * s  # |z - 1|^2
    d2 = (r - mu) ** 2 + 4.0 * r * mu * s  # |z - mu|^2
    return (lag - 1) * math.log(r) + 0.5 * np.log(d1) + 0.5 * np.log(d2)


def _phase(theta, r: float, mu: float, lag: int):
    """The continuous ``arg g(r e^{i theta})`` for ``theta`` in ``[0, pi]``."""
    s = np.sin(0.5 * theta) ** 2
    im = r * np.sin(theta)
    # r cos(theta) - c as (r - c) - 2 r s: no cancellation near z = 1
    return (
        (lag - 1) * theta
        + np.arctan2(im, (r - 1.0) - 2.0 * r * s)
        + np.arctan2(im, (r - mu) - 2.0 * r * s)
    )


def _turning_points(r: float, mu: float, lag: int) -> list[float]:
    """The ``theta`` in ``(0, pi)`` where :func:`_phase` turns (at most two, sorted)."""
    # d arg(r e^{i theta} - c) / d theta = r (r - c + 2 c s) / ((r - c)^2 + 4 r c s)
    p1, q1, p2, q2 = (r - 1.0) ** 2, 4.0 * r, (r - mu) ** 2, 4.0 * r * mu
    u1, v1, u2, v2 = r * (r - 1.0), 2.0 * r, r * (r - mu), 2.0 * r * mu
    c2 = (lag - 1) * q1 * q2 + v1 * q2 + v2 * q1
    c1 = (lag - 1) * (p1 * q2 + p2 * q1) + u1 * q2 + v1 * p2 + u2 * q1 + v2 * p1
    c0 = (lag - 1) * p1 * p2 + u1 * p2 + u2 * p1
    roots: list[float] = []
    if c2 == 0.0:
        roots = [-c0 / c1] if c1 != 0.0 else []
    else:
        disc = c1 * c1 - 4.0 * c2 * c0
        if disc >= 0.0:
            q = -0.5 * (c1 + math.copysign(math.sqrt(disc), c1))
            roots = [q / c2] + ([c0 / q] if q != 0.0 else [])
    return sorted(2.0 * math.asin(math.sqrt(x)) for x in roots if 0.0 < x < 1.0)


def _crossings(r: float, a: float, mu: float, lag: int):
    """Where ``g(r e^{i theta})`` is real and negative, ``theta`` in ``[0, pi]``.

    Returns ``(theta, weight, margin)``: ``weight`` the crossing's signed share of the winding
    (``+-2``: it and its mirror image; ``+-1`` at ``theta = 0`` or ``pi``), ``margin`` =
    ``log |g| - log a`` (``> 0``: ``g + a`` crosses the negative real axis there).
    """
    if r == 1.0 or r == mu:  # the circle through a zero of g: any circle beside it counts alike
        r = math.nextafter(r, math.inf)
    ends = [0.0, *_turning_points(r, mu, lag), math.pi]
    phase = _phase(np.asarray(ends), r, mu, lag)
    # g is real at both ends: its arg is an exact multiple of pi there (arg(-r - c) = pi)
    phase[0] = math.pi * ((r < 1.0) + (r < mu))
    phase[-1] = math.pi * (lag + 1)
    thetas, weights = [], []
    for t0, t1, f0, f1 in zip(ends[:-1], ends[1:], phase[:-1], phase[1:]):
        lo_f, hi_f = min(f0, f1), max(f0, f1)
        # the levels pi (2k + 1) between the piece's end values (a margin of one each side,
        # then compared exactly: the ends are exact multiples of pi)
        k = np.arange(
            math.ceil((lo_f / math.pi - 1.0) / 2.0) - 1,
            math.floor((hi_f / math.pi - 1.0) / 2.0) + 2,
        )
        levels = math.pi * (2.0 * k + 1.0)
        levels = levels[(levels >= lo_f) & (levels <= hi_f)]
        if t1 <= t0 or levels.size == 0:
            continue
        rising = f1 > f0
        lo, hi = np.full(levels.size, t0), np.full(levels.size, t1)
        for _ in range(64):  # bisection in theta to rounding
            mid = 0.5 * (lo + hi)
            right = (_phase(mid, r, mu, lag) < levels) == rising
            lo, hi = np.where(right, mid, lo), np.where(right, hi, mid)
        theta = np.where(levels == f0, t0, np.where(levels == f1, t1, 0.5 * (lo + hi)))
        end = (theta == 0.0) | (theta == math.pi)
        thetas.append(theta)
        weights.append(np.where(end, 1, 2) * (1 if rising else -1))
    if not thetas:
        return np.zeros(0), np.zeros(0, dtype=int), np.zeros(0)
    theta = np.concatenate(thetas)
    margin = _log_abs_g(r, np.sin(0.5 * theta) ** 2, mu, lag) - math.log(a)
    return theta, np.concatenate(weights), margin


def _roots_inside(r: float, a: float, mu: float, lag: int) -> int:
    """How many characteristic roots lie inside ``|z| < r`` (``lag >= 1``, ``a > 0``)."""
    _, weight, margin = _crossings(r, a, mu, lag)
    return int(np.sum(weight * (margin > 0)))


def _dominant_roots(a: float, mu: float, lag: int) -> np.ndarray:
    """Roots of largest modulus of ``z^(L-1) (z - 1)(z - mu) + a`` (``0 <= mu < 1``, ``a > 0``,
    ``L >= 1``), four complex values, zero-padded: the dominant root (and its conjugate) and the
    real roots in ``(mu, 1)``, the only positive ones. Their largest modulus is the spectral
    radius and :func:`_regime_of_roots` of them is that of all roots.

    The spectral radius by bisection on ``r`` with :func:`_roots_inside` (exact up to rounding);
    the dominant root's argument is that of the crossing with the smallest ``|log |g| - log a|``
    on the circle just outside it; the real roots by bisection on the log-concave
    ``x^(L-1) (1 - x)(x - mu)`` of ``(mu, 1)``.
    """
    n = lag + 1
    lo = a ** (1.0 / n) * (1.0 - 1e-12)  # |product of the roots| = a: not all inside
    hi = 1.0 + max(1.0 + mu, a)  # Cauchy's bound: all inside
    if lag >= 2:  # Fujiwara's, far lower for a large gain (Cauchy's 1e300 overflowed (r - 1)^2)
        hi = min(hi, 2.0 * max(1.0 + mu, math.sqrt(mu), (0.5 * a) ** (1.0 / n)) * (1.0 + 1e-9))
    while True:
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if _roots_inside(mid, a, mu, lag) >= n:
            hi = mid
        else:
            lo = mid
    theta, _, margin = _crossings(hi, a, mu, lag)
    angle = float(theta[np.argmin(np.abs(margin))])
    out = np.zeros(4, dtype=complex)
    out[0], out[1] = hi * np.exp(1j * angle), hi * np.exp(-1j * angle)
    # real positive roots: x^(L-1) (1 - x)(x - mu) = a, unimodal on (mu, 1) with its top at the
    # root of (L + 1) x^2 - L (1 + mu) x + (L - 1) mu in (mu, 1)
    b = lag * (1.0 + mu)
    top = (b + math.sqrt(max(b * b - 4.0 * (lag + 1) * (lag - 1) * mu, 0.0))) / (2.0 * (lag + 1))

    def excess(x: float) -> float:
        return (lag - 1) * math.log(x) + math.log(1.0 - x) + math.log(x - mu) - math.log(a)

    if mu < top < 1.0 and excess(top) > 0.0:
        for k, (left, right, rising) in enumerate(((mu, top, True), (top, 1.0, False))):
            for _ in range(200):
                mid = 0.5 * (left + right)
                if not left < mid < right:
                    break
                if (excess(mid) < 0.0) == rising:
                    left = mid
                else:
                    right = mid
            out[2 + k] = 0.5 * (left + right)
        if angle == 0.0:  # the dominant root is the larger real one
            out[:] = out[3], out[2], 0.0, 0.0
    return out


def _radius_one_lag(a: np.ndarray, mu: np.ndarray, lag: int) -> np.ndarray:
    """Spectral radius for many ``(a, mu)`` at one lag (batched companion eigenvalues)."""
    return _reduce_roots_one_lag(a, mu, lag, lambda z: np.max(np.abs(z), axis=-1), np.nan)


def spectral_radius(a, momentum, k_ref):
    """Spectral radius of the lagged heavy-ball recursion (exact discrete criterion).

    The largest ``|z|`` over the roots of ``z^(L-1) (z - 1)(z - mu) + a = 0``, computed as
    the eigenvalues of the companion matrix, batched over all settings that share a lag; beyond
    :data:`WINDING_MIN_LAG` (``0 <= mu < 1``, ``a > 0``) by bisection on the number of roots
    inside a circle (argument principle, :func:`_dominant_roots`).

    Parameters
    ----------
    a
        Gain ``eta K``; any shape.
    momentum
        Heavy-ball momentum ``mu``; broadcast.
    k_ref
        Integer lag ``L >= 0`` (optimizer steps); broadcast. Non-integers raise ValueError.

    Returns
    -------
    numpy.ndarray of float (broadcast shape): ``< 1`` stable, ``> 1`` divergent; NaN where
    ``a`` or ``mu`` is NaN. Cost grows as ``L^3`` per setting up to :data:`WINDING_MIN_LAG`
    (0.01 s at ``L = 128``), as ``L`` beyond it (~0.1 s at ``L = 256``, ~0.4 s at ``L = 4096``).
    """
    return _per_lag(a, momentum, k_ref, _radius_one_lag)


def dominant_period(a, momentum, k_ref):
    """Period, in steps, of the lagged recursion's dominant mode (the root of largest modulus).

    ``2 pi / |arg z|`` of the dominant characteristic root ``z`` (the one whose modulus is
    :func:`spectral_radius`): the period of the oscillation that the error settles into (a
    stable recursion) or grows along (an unstable one); ``inf`` where the dominant root is
    real and positive (monotone), 2 where it is real and negative. Arguments and cost as
    :func:`spectral_radius`.
    """

    def period(z: np.ndarray) -> np.ndarray:
        first = np.take_along_axis(z, np.argmax(np.abs(z), axis=-1)[:, None], axis=-1)[:, 0]
        angle = np.abs(np.angle(first))
        scale = np.maximum(np.abs(first), np.finfo(float).tiny)
        angle = np.where(np.abs(first.imag) <= ROOT_RTOL * scale, np.where(first.real > 0, 0.0, np.pi), angle)
        out = np.full(angle.shape, np.inf)
        np.divide(2.0 * np.pi, angle, out=out, where=angle > 0)
        return out

    return _per_lag(
        a, momentum, k_ref, lambda a_, mu_, lag: _reduce_roots_one_lag(a_, mu_, lag, period, np.nan)
    )


def _per_lag(a, momentum, k_ref, one_lag) -> np.ndarray:
    """``one_lag(a, mu, L)`` over broadcast settings, grouped by their integer lag ``L``
    (:func:`_integer_lags`): the loop of :func:`spectral_radius` and :func:`dominant_period`."""
    a, mu, lag = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (a, momentum, k_ref)))
    lags = _integer_lags(lag)
    flat_a, flat_mu, flat_lag = a.ravel(), mu.ravel(), lags.ravel()
    out = np.empty(flat_a.size)
    for value in np.unique(flat_lag):
        sel = flat_lag == value
        out[sel] = one_lag(flat_a[sel], flat_mu[sel], int(value))
    return out.reshape(a.shape)


def exact_stable(a, momentum, k_ref, *, method: str = "threshold"):
    """Exact discrete stability: spectral radius ``< 1`` (NaN inputs give False).

    Parameters
    ----------
    a, momentum, k_ref
        As in :func:`spectral_radius` (integer ``k_ref``); broadcast.
    method
        ``"threshold"`` (default): ``0 < a < a*(mu, L)`` with the analytic
        :func:`boundary_locus_threshold`, valid because for ``0 <= mu < 1`` the stable set
        in ``a`` is exactly the interval ``(0, a*)`` (checked against eigenvalues in the
        tests); fast for many posterior draws. Settings with ``mu`` outside ``[0, 1)`` use
        the eigenvalues. ``"eigenvalues"``: spectral radius of the companion matrix.

    Returns
    -------
    numpy.ndarray of bool, broadcast shape.
    """
    if method not in ("threshold", "eigenvalues"):
        raise ValueError(f"unknown method {method!r}; expected 'threshold' or 'eigenvalues'")
    a, mu, lag = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (a, momentum, k_ref)))
    # whole lags as floats: the boundary locus takes any (an int64 cast wrapped lags >= 2**63)
    lags = _whole_lags(lag)
    out = np.zeros(a.shape, dtype=bool)
    in_range = np.isfinite(mu) & (mu >= 0) & (mu < 1) & np.isfinite(a)
    fast = in_range if method == "threshold" else np.zeros(a.shape, dtype=bool)
    if np.any(fast):
        with np.errstate(over="ignore"):
            thr = boundary_locus_threshold(mu[fast], lags[fast])
        out[fast] = (a[fast] > 0) & (a[fast] < thr)
    slow = ~fast
    if np.any(slow):
        with np.errstate(invalid="ignore"):
            out[slow] = spectral_radius(a[slow], mu[slow], _integer_lags(lags[slow])) < 1.0
    return out


def _check_momentum_range(mu: np.ndarray) -> None:
    finite = mu[np.isfinite(mu)]
    if finite.size and (np.any(finite < 0) or np.any(finite >= 1)):
        raise ValueError(
            f"stability thresholds assume 0 <= momentum < 1; got values in [{finite.min()}, {finite.max()}]"
        )


def boundary_locus_threshold(momentum, k_ref):
    """Exact threshold gain ``a*`` by the boundary locus (analytic route, fast for any ``L``).

    A root crosses the unit circle at ``z = exp(i theta)`` when ``a = -P0(z)`` is real and
    positive, ``P0(z) = z^(L-1) (z - 1)(z - mu)``. With ``arg(z - 1) = (theta + pi)/2`` and
    ``phi(theta) = arg(z - mu)``, the first crossing (``0 <= mu < 1``) is the unique root
    ``theta1`` in ``(0, pi]`` of ``(L - 1/2) theta + phi(theta) = pi/2`` (the left side
    increases in ``theta``), and ``|P0|`` increases along the circle, so

        a* = |P0(exp(i theta1))| = 2 sin(theta1 / 2) sqrt(1 - 2 mu cos(theta1) + mu^2).

    For ``mu = 0`` this gives ``a* = 2 sin(pi / (2 (2L + 1)))``, so ``a* L -> pi/2``.
    Same arguments and result as :func:`exact_threshold`.
    """
    mu, lag = np.broadcast_arrays(np.asarray(momentum, dtype=float), np.asarray(k_ref, dtype=float))
    lags = _whole_lags(lag)
    _check_momentum_range(mu)
    lo = np.zeros(mu.shape)
    # phi >= 0 on the upper half circle, so theta1 <= pi / (2L - 1): a bracket that keeps 80
    # halvings at machine precision relative to theta1 for any lag (from pi, 80 halvings
    # resolve theta1 only for L up to ~1e23)
    hi = math.pi / np.maximum(2.0 * lags - 1.0, 1.0)
    for _ in range(80):  # bisection in theta to machine precision
        mid = 0.5 * (lo + hi)
        g = (lags - 0.5) * mid + np.arctan2(np.sin(mid), np.cos(mid) - mu) - 0.5 * math.pi
        lo = np.where(g < 0, mid, lo)
        hi = np.where(g < 0, hi, mid)
    theta = 0.5 * (lo + hi)
    theta = np.where(lags == 0, math.pi, theta)
    out = 2.0 * np.sin(theta / 2.0) * np.sqrt(1.0 - 2.0 * mu * np.cos(theta) + mu * mu)
    return np.where(np.isfinite(mu), out, np.nan)


def exact_threshold(momentum, k_ref, *, method: str = "auto", rtol: float = 1e-12):
    """Exact threshold gain ``a*``: the smallest ``a > 0`` with spectral radius 1.

    Parameters
    ----------
    momentum
        Heavy-ball momentum ``mu`` in ``[0, 1)``.
    k_ref
        Integer lag ``L >= 0``; broadcast against ``momentum``.
    method
        ``"bisection"``: bisection on the spectral radius of the companion matrix
        (vectorised over settings that share a lag). The stable set in ``a`` is the interval
        ``(0, a*)``: at ``a = 0+`` the root ``z = 1`` moves inside the unit circle
        (``dz/da = -1/(1 - mu)``). Bracket ``(0, 1]`` for ``L >= 1`` (the product of the
        roots has modulus ``a``); ``L = 0`` gives ``2 (1 + mu)`` directly. Cost ``~ L^3``
        per bisection step.
        ``"boundary_locus"``: the analytic route of :func:`boundary_locus_threshold`.
        ``"auto"`` (default): bisection for ``L <= 128``, boundary locus beyond (the two
        agree to ~1e-12 where both are run; see the tests).
    rtol
        Relative width of the final bisection bracket.

    Returns
    -------
    numpy.ndarray of float (broadcast shape). Reference values (DESIGN.md): ``mu=0, L=1``: 1;
    ``mu=0, L=2``: 0.6180; ``mu=0.5, L=5``: 0.1286; ``mu=0.9, L=10``: 0.01139.
    """
    if method not in ("auto", "bisection", "boundary_locus"):
        raise ValueError(
            f"unknown method {method!r}; expected 'auto', 'bisection' or 'boundary_locus'"
        )
    mu, lag = np.broadcast_arrays(np.asarray(momentum, dtype=float), np.asarray(k_ref, dtype=float))
    lags = _integer_lags(lag)
    _check_momentum_range(mu)
    if method == "boundary_locus":
        return boundary_locus_threshold(mu, lags)
    flat_mu, flat_lag = mu.ravel(), lags.ravel()
    out = np.full(flat_mu.size, np.nan)
    for value in np.unique(flat_lag):
        sel = np.flatnonzero((flat_lag == value) & np.isfinite(flat_mu))
        if sel.size == 0:
            continue
        m = flat_mu[sel]
        if value == 0:
            out[sel] = 2.0 * (1.0 + m)
            continue
        if method == "auto" and value > AUTO_BISECTION_MAX_LAG:
            out[sel] = boundary_locus_threshold(m, value)
            continue
        lo = np.zeros(sel.size)  # stable in the limit a -> 0+
        hi = np.ones(sel.size)  # |product of roots| = a = 1: not stable
        n_iter = int(math.ceil(math.log2(1.0 / rtol))) + 2
        for _ in range(n_iter):
            mid = 0.5 * (lo + hi)
            stable = _radius_one_lag(mid, m, int(value)) < 1.0
            lo = np.where(stable, mid, lo)
            hi = np.where(stable, hi, mid)
            if np.all(hi - lo <= rtol * hi):
                break
        out[sel] = 0.5 * (lo + hi)
    return out.reshape(mu.shape)


# ----------------------------------------------------------------------------- regimes

#: Relative tolerance of :func:`recursion_regime` on the dominant roots: a root whose imaginary
#: part is within ``ROOT_RTOL`` of the spectral radius counts as real, and two real dominant
#: roots that close are a double root (critical damping). The eigenvalues of a double root
#: split by about the square root of machine epsilon (~1e-8), so the tolerance sits above that.
ROOT_RTOL: float = 1e-6


def _regime_of_roots(roots: np.ndarray) -> np.ndarray:
    """Regime of stable recursions from their characteristic roots, shape ``(B, n)`` complex.

    The dominant root (largest modulus) sets how the error decays in the long run: complex
    (a pair) or real and negative (sign alternating every step) is an oscillation
    (``"underdamped"``); real and positive is a monotone decay (``"overdamped"``), or
    ``"critical"`` when the next root is the same real root (a double root).
    """
    mod = np.abs(roots)
    order = np.argsort(-mod, axis=-1, kind="stable")
    ranked = np.take_along_axis(roots, order, axis=-1)
    first = ranked[:, 0]
    scale = np.maximum(mod.max(axis=-1), np.finfo(float).tiny)
    real = np.abs(first.imag) <= ROOT_RTOL * scale
    out = np.full(first.shape, UNDERDAMPED, dtype=object)
    monotone = real & (first.real > 0)
    out[monotone] = OVERDAMPED
    if ranked.shape[1] > 1:
        double = monotone & (np.abs(ranked[:, 1] - first) <= ROOT_RTOL * scale)
        out[double] = CRITICAL
    return out


def recursion_regime(a, momentum, k_ref):
    """Regime of the discrete lagged recursion (exact criterion), from its characteristic roots.

    The recursion ``e[n+1] - e[n] = mu (e[n] - e[n-1]) - a e[n-L]`` that the continuum
    oscillator approximates: ``"unstable"`` where it is not stable by
    :func:`exact_stable` (spectral radius ``>= 1``, the same verdict as ``stable_exact``);
    otherwise the regime of its dominant root (:func:`_regime_of_roots`): ``"underdamped"``
    (a complex or negative dominant root: the error oscillates as it decays),
    ``"overdamped"`` (a real positive one: it decays monotonically in the long run) or
    ``"critical"`` (a double real root, within :data:`ROOT_RTOL`). It differs from
    :func:`classify_regime` of the continuum coefficients between the two thresholds (the
    continuum's ``C_eff <= 0`` is unstable, the recursion still converges, oscillating),
    near ``zeta = 1`` at long lags, and at ``K_ref = 0`` (the recursion can overshoot or
    diverge where the continuum does not).

    Parameters
    ----------
    a, momentum, k_ref
        As in :func:`spectral_radius` (integer ``k_ref``); broadcast.

    Returns
    -------
    ``str`` for scalar inputs, else a numpy array of ``str`` (broadcast shape); ``""`` where an
    input is NaN. Cost as :func:`spectral_radius`.
    """
    a, mu, lag = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (a, momentum, k_ref)))
    lags = _integer_lags(lag)
    flat_a, flat_mu, flat_lag = a.ravel(), mu.ravel(), lags.ravel()
    out = np.full(flat_a.size, "", dtype=object)
    finite = np.isfinite(flat_a) & np.isfinite(flat_mu)
    stable = finite & exact_stable(flat_a, flat_mu, flat_lag)
    out[finite & ~stable] = UNSTABLE
    for value in np.unique(flat_lag[stable]):
        sel = stable & (flat_lag == value)
        out[sel] = _reduce_roots_one_lag(flat_a[sel], flat_mu[sel], int(value), _regime_of_roots, "")
    out = out.reshape(a.shape)
    if out.ndim == 0:
        return str(out[()])
    return out.astype(str)


def classify_regime(mass, damping, k_eff, *, rtol: float = 1e-9):
    """Regime of the continuum oscillator ``M e'' + C e' + K_eff e = 0`` (closed-form criterion).

    Parameters
    ----------
    mass, damping, k_eff
        ``M_eff``, ``C_eff``, ``K_eff``; broadcast.
    rtol
        ``|zeta - 1| <= rtol`` counts as critical damping.

    Returns
    -------
    ``str`` for scalar inputs, else a numpy array of ``str`` (broadcast shape):
    ``"unstable"`` when ``C_eff <= 0``, ``K_eff <= 0`` or ``M_eff <= 0`` (no decay to the
    plateau: the closed-form criterion), ``"critical"`` when ``zeta = 1`` within ``rtol``,
    ``"overdamped"`` when ``zeta > 1``, ``"underdamped"`` (oscillatory) when ``zeta < 1``;
    ``""`` where an input is NaN.
    """
    m, c, k = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (mass, damping, k_eff)))
    out = np.full(m.shape, "", dtype=object)
    finite = np.isfinite(m) & np.isfinite(c) & np.isfinite(k)
    unstable = finite & ((c <= 0) | (k <= 0) | (m <= 0))
    ok = finite & ~unstable
    zeta = np.full(m.shape, np.nan)
    zeta[ok] = damping_ratio(m[ok], c[ok], k[ok])
    out[unstable] = UNSTABLE
    out[ok & (np.abs(zeta - 1.0) <= rtol)] = CRITICAL
    out[ok & (zeta > 1.0 + rtol)] = OVERDAMPED
    out[ok & (zeta < 1.0 - rtol)] = UNDERDAMPED
    if out.ndim == 0:
        return str(out[()])
    return out.astype(str)


def closed_form_regime(a, momentum, k_ref):
    """Regime of a setting's continuum oscillator by the closed-form criterion.

    :func:`classify_regime` of its coefficients ``oscillator_coefficients(a, mu, L)`` where the
    setting is :func:`closed_form_stable`, ``"unstable"`` where it is not. ``classify_regime``
    reads ``C_eff <= 0`` off the coefficients as rounded, so a setting on the threshold
    (``a L = 1 - mu`` exactly, ``C_eff = 1.1e-16`` after rounding) read "underdamped" with
    ``zeta = 7e-17`` where ``closed_form_stable`` (and every threshold) calls it marginal, so not
    stable. The one rule for the summary, the phase grid and the simulators' truths.

    Arguments broadcast (``k_ref`` any real ``>= 0``); returns ``str`` for scalar inputs, else
    an array of ``str``; ``""`` where an input is NaN.
    """
    a, mu, lag = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (a, momentum, k_ref)))
    with np.errstate(over="ignore", invalid="ignore"):
        mass, damping, k_eff = oscillator_coefficients(a, mu, lag)
        out = np.asarray(classify_regime(mass, damping, k_eff), dtype=object)
    out[(out != "") & ~closed_form_stable(a, mu, lag)] = UNSTABLE
    if out.ndim == 0:
        return str(out[()])
    return out.astype(str)


def critical_k_ref(a, momentum, method: str = EXACT):
    """The first integer lag ``K_ref`` at which a setting stops being stable.

    Parameters
    ----------
    a
        Gain ``eta K`` (> 0); any shape.
    momentum
        Heavy-ball momentum ``mu`` in ``[0, 1)``; broadcast.
    method
        ``"exact"``: smallest integer ``L`` with spectral radius ``>= 1``, i.e. with
        ``a >= a*(L)`` (``a*`` decreases with ``L``, so all larger lags are unstable too;
        found by binary search over ``L`` with the analytic boundary-locus threshold, which
        agrees with eigenvalue bisection to ~1e-10 relative, so it is fast for thousands
        of posterior draws). ``"closed_form"``: smallest integer ``L`` with ``C_eff <= 0``, i.e.
        ``ceil((1 - mu)/a)``, with ``C_eff`` within a relative :data:`CLOSED_FORM_RTOL` of 0
        counted as 0 (so ``(1 - mu)/a`` an integer up to rounding gives that integer), in
        agreement with :func:`closed_form_stable`.

    Returns
    -------
    numpy.ndarray of float holding integers (broadcast shape); 0 where ``a <= 0`` or
    (exact) ``a >= 2(1 + mu)``; ``inf`` where the critical lag is beyond the largest float
    (a gain below about ``pi (1 - mu) / (2 x 1.8e308)``, exact; ``(1 - mu) / 1.8e308``,
    closed form); NaN for NaN inputs. Stable for ``K_ref`` below this value.
    """
    a, mu = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(momentum, dtype=float))
    _check_momentum_range(mu)
    out = np.full(a.shape, np.nan)
    finite = np.isfinite(a) & np.isfinite(mu)
    nonpos = finite & (a <= 0)
    out[nonpos] = 0.0
    pos = finite & (a > 0)
    if method == CLOSED_FORM:
        av, mv = a[pos], mu[pos]
        with np.errstate(over="ignore"):  # (1 - mu)/a beyond the floats: inf, said below
            lag = np.ceil((1.0 - mv) / av)
        # Make the rounding agree with closed_form_stable exactly at ties (C_eff ~ 0).
        lag = np.where(closed_form_stable(av, mv, lag), lag + 1.0, lag)
        lag = np.where(
            (lag > 0) & ~closed_form_stable(av, mv, np.maximum(lag - 1.0, 0.0)), lag - 1.0, lag
        )
        out[pos] = lag
        return out
    if method != EXACT:
        raise ValueError(f"unknown stability method {method!r}; expected one of {CRITERIA}")
    av, mv = a[pos], mu[pos]
    # Smallest integer L with a >= a*(L); a*(L) decreases in L. Upper bound from the boundary
    # locus: a*(L) <= pi (1 + mu) / (2L - 1), so every L >= hi is unstable.
    # Beyond 2**53 (a gain below ~3e-16) floats no longer hold every integer: ``mid + 1`` can
    # equal ``mid``, so a search that moves neither bound stops there, within the float spacing.
    # A gain under ~1.7e-308 made this bound inf, and the search passed an infinite lag to the
    # boundary locus ("k_ref must be finite for the exact stability criterion"). The bound is
    # clipped to the largest float, and a gain whose critical lag lies beyond it (a*(L) ->
    # pi (1 - mu) / (2 L) for long lags, so a < pi (1 - mu) / (2 x 1.8e308)) gets inf.
    top = sys.float_info.max
    with np.errstate(over="ignore"):
        hi = np.minimum(np.ceil((math.pi * (1.0 + mv) / av + 1.0) / 2.0) + 1.0, top)
    beyond = av < 0.5 * math.pi * (1.0 - mv) / top
    hi[beyond] = 0.0
    lo = np.zeros(av.size)
    active = lo < hi
    while np.any(active):
        mid = lo + np.floor(0.5 * (hi - lo))  # lo + hi overflowed near the largest float
        stable = np.ones(av.size, dtype=bool)
        with np.errstate(over="ignore"):
            stable[active] = av[active] < boundary_locus_threshold(mv[active], mid[active])
        new_lo = np.where(active & stable, mid + 1.0, lo)
        new_hi = np.where(active & ~stable, mid, hi)
        active = (new_lo < new_hi) & ((new_lo != lo) | (new_hi != hi))
        lo, hi = new_lo, new_hi
    lo[beyond] = np.inf
    out[pos] = lo
    return out


#: Why a critical ``K_ref`` is infinite: :func:`critical_k_ref` finds no unstable lag a float holds.
NO_CRITICAL_K_REF: str = (
    f"no lag below the largest float ({sys.float_info.max:.3g}) is unstable at this gain: "
    "the gain is too small for a finite critical K_ref"
)


def infinite_value_notes(values: dict[str, object]) -> dict[str, str]:
    """Why the infinite numbers of a stability summary are infinite (JSON writes them null).

    ``{"critical_k_ref_note": ...}`` when a ``critical_k_ref*`` value is infinite
    (:data:`NO_CRITICAL_K_REF`), ``{"threshold_a_closed_form_note": ...}`` when the closed-form
    threshold is (``K_ref = 0``); each note names the keys it is about. ``{}`` when none is.
    """

    def infinite(key: str) -> bool:
        value = values.get(key)
        return isinstance(value, (int, float, np.floating)) and math.isinf(float(value))

    out: dict[str, str] = {}
    lags = [k for k in values if k.startswith("critical_k_ref") and not k.endswith("_note") and infinite(k)]
    if lags:
        out["critical_k_ref_note"] = f"{', '.join(lags)} infinite (null in JSON): {NO_CRITICAL_K_REF}"
    if infinite("threshold_a_closed_form"):
        out["threshold_a_closed_form_note"] = (
            "threshold_a_closed_form infinite (null in JSON): no closed-form threshold at K_ref 0, "
            "where C_eff = 1 - mu > 0 at every gain"
        )
    return out


def stability_summary(a: float, momentum: float, k_ref: float) -> dict[str, object]:
    """Everything about one setting, with the criterion behind each number.

    Parameters
    ----------
    a
        Gain ``eta_eff K > 0`` (for EMA momentum ``eta (1 - b1) K``).
    momentum
        Heavy-ball ``mu`` in ``[0, 1)``.
    k_ref
        Lag ``L >= 0`` in optimizer steps (the exact criterion needs an integer; otherwise
        its entries are None and ``note`` says why).

    Returns
    -------
    dict with ``a``, ``momentum``, ``k_ref``, ``M_eff``, ``C_eff``, ``K_eff``, ``zeta``
    (None when ``C_eff <= 0`` or ``K_eff <= 0``; ``C_eff`` within a relative
    :data:`CLOSED_FORM_RTOL` of 0 counts as 0, as in :func:`closed_form_stable`), ``regime``
    (continuum coefficients; ``"unstable"`` whenever ``stable_closed_form`` is False),
    ``regime_exact`` (the discrete recursion's, :func:`recursion_regime`), ``stable_closed_form``, ``stable_exact``, ``spectral_radius``,
    ``threshold_a_closed_form``, ``threshold_a_exact``, ``critical_k_ref_closed_form``,
    ``critical_k_ref_exact`` (first unstable integer ``K_ref`` at this ``a``), ``note``; and
    where a number is infinite, why (:func:`infinite_value_notes`: ``critical_k_ref_note``,
    ``threshold_a_closed_form_note``).
    """
    a, mu, lag = float(a), float(momentum), float(k_ref)
    if not (a > 0):
        raise ValueError(
            f"the gain a = eta K = {a:g} must be a positive number (learning rate times the "
            "reward's curvature); a zero or negative gain has no restoring force"
        )
    if not (math.isfinite(a) and math.isfinite(mu) and math.isfinite(lag)):
        raise ValueError(f"a, momentum and k_ref must be finite, got {a}, {mu}, {lag}")
    if lag < 0:
        raise ValueError(f"k_ref must be >= 0, got {lag}")
    _check_momentum_range(np.asarray([mu]))
    mass, damping, k_eff = (float(v) for v in oscillator_coefficients(a, mu, lag))
    # C_eff within rounding of 0 is marginal, so not stable (closed_form_stable); the regime and
    # zeta follow that verdict (C_eff = 1.1e-16 at a 0.3, mu 0.1, K_ref 3 read "underdamped")
    stable_closed_form = bool(closed_form_stable(a, mu, lag))
    zeta = float(damping_ratio(mass, damping, k_eff)) if stable_closed_form and k_eff > 0 else None
    integer = is_whole_lag(lag)
    out: dict[str, object] = {
        "a": a,
        "momentum": mu,
        "k_ref": lag,
        "M_eff": mass,
        "C_eff": damping,
        "K_eff": k_eff,
        "zeta": zeta,
        "regime": closed_form_regime(a, mu, lag),
        "regime_exact": None,
        "stable_closed_form": stable_closed_form,
        "threshold_a_closed_form": float(closed_form_threshold(mu, lag)),
        "critical_k_ref_closed_form": float(critical_k_ref(a, mu, method=CLOSED_FORM)),
        "critical_k_ref_exact": float(critical_k_ref(a, mu, method=EXACT)),
        "stable_exact": None,
        "spectral_radius": None,
        "threshold_a_exact": None,
        "note": "",
    }
    if integer:
        # the verdict by the threshold, as critical_k_ref: a radius within 1e-16 of 1 (a gain
        # below ~1e-16) rounds to 1.0 and would read as unstable
        out["stable_exact"] = bool(exact_stable(a, mu, round(lag)))
        out["threshold_a_exact"] = float(exact_threshold(mu, round(lag)))
        if round(lag) <= MAX_ROOT_LAG:
            # one set of roots for both (companion eigenvalues, or beyond WINDING_MIN_LAG the
            # dominant roots by the root count: ~17 s vs ~0.3 s at K_ref = 2000)
            roots = _characteristic_roots(np.array([a]), np.array([mu]), round(lag))
            out["spectral_radius"] = float(np.max(np.abs(roots)))
            # recursion_regime's rule: unstable by the verdict, else the dominant root's regime
            out["regime_exact"] = str(_regime_of_roots(roots)[0]) if out["stable_exact"] else UNSTABLE
        else:  # the roots cannot be computed (MemoryError / hours): the verdict still can
            out["regime_exact"] = UNSTABLE if not out["stable_exact"] else None
            out["note"] = (
                f"K_ref above {MAX_ROOT_LAG}: the spectral radius and the recursion's regime "
                "(dominant roots of a degree K_ref + 1 polynomial) are not computed; the exact verdict and "
                "threshold are the boundary locus's"
            )
    else:
        out["note"] = (
            "the exact discrete criterion needs an integer K_ref; only the closed form applies"
        )
    # --json writes an infinity null: the note says which and why (they were null without a word)
    out.update(infinite_value_notes(out))
    return out


# ----------------------------------------------------------------------------- phase grid


def phase_grid(
    stiffness, momentum, learning_rates, k_refs, convention: str = HEAVY_BALL
) -> xr.Dataset:
    """Stability and regime over a grid of learning rates and lags (for phase diagrams).

    Parameters
    ----------
    stiffness
        Curvature ``K`` (scalar; gain is ``a = eta_eff K``).
    momentum
        Momentum ``mu`` (heavy-ball) or Adam ``beta1`` (EMA), scalar, in ``[0, 1)``.
    learning_rates
        1-D array of learning rates ``eta`` (> 0).
    k_refs
        1-D array of integer lags ``L >= 0``.
    convention
        ``"heavy_ball"`` or ``"ema"`` (EMA uses ``eta_eff = eta (1 - b1)``).

    Returns
    -------
    xarray.Dataset with dims ``(learning_rate, k_ref)`` and variables ``a``, ``M_eff``,
    ``C_eff``, ``K_eff``, ``zeta`` (NaN where not :func:`closed_form_stable`: ``C_eff <= 0``,
    or 0 up to rounding), ``regime`` (str, continuum coefficients: :func:`closed_form_regime`),
    ``regime_exact`` (str, the discrete recursion's: :func:`recursion_regime`),
    ``closed_form_stable``, ``exact_stable`` (bool), ``spectral_radius``; and, per
    ``k_ref``, ``closed_form_threshold_lr`` and ``exact_threshold_lr``, the learning rates at
    which each criterion puts the boundary. Attributes record ``stiffness``, ``momentum``
    and ``convention``.
    """
    lrs = np.asarray(learning_rates, dtype=float).ravel()
    lags = np.asarray(k_refs, dtype=float).ravel()
    if lrs.size == 0 or lags.size == 0:
        raise ValueError("phase_grid needs at least one learning rate and one k_ref")
    mu = float(momentum)
    eff = np.asarray(effective_step(lrs, mu, convention), dtype=float)
    a = (eff * float(stiffness))[:, None] * np.ones((1, lags.size))
    lag2 = np.broadcast_to(lags[None, :], a.shape)
    mass, damping, k_eff = oscillator_coefficients(a, mu, lag2)
    stable_cf = closed_form_stable(a, mu, lag2)
    with np.errstate(invalid="ignore", divide="ignore"):
        zeta = np.where(stable_cf, damping_ratio(mass, damping, np.abs(k_eff)), np.nan)
    radius = spectral_radius(a, mu, lag2)
    per_lr = float(effective_step(1.0, mu, convention)) * float(stiffness)  # gain per unit eta
    dims = ("learning_rate", "k_ref")
    ds = xr.Dataset(
        {
            "a": (dims, a),
            "M_eff": (dims, mass),
            "C_eff": (dims, damping),
            "K_eff": (dims, np.asarray(k_eff, dtype=float)),
            "zeta": (dims, zeta),
            "regime": (dims, closed_form_regime(a, mu, lag2)),
            "regime_exact": (dims, recursion_regime(a, mu, lag2)),
            "closed_form_stable": (dims, stable_cf),
            # the verdict of stability_summary and recursion_regime (a radius within 1e-16 of 1,
            # a gain below ~1e-16, rounds to 1.0)
            "exact_stable": (dims, exact_stable(a, mu, lag2)),
            "spectral_radius": (dims, radius),
            "closed_form_threshold_lr": (("k_ref",), closed_form_threshold(mu, lags) / per_lr),
            "exact_threshold_lr": (("k_ref",), exact_threshold(mu, lags) / per_lr),
        },
        coords={"learning_rate": lrs, "k_ref": lags},
    )
    ds.attrs.update(stiffness=float(stiffness), momentum=mu, convention=convention)
    return ds


__all__ = [
    "CLOSED_FORM_RTOL",
    "REGIMES",
    "CRITERIA",
    "closed_form_stable",
    "closed_form_marginal",
    "closed_form_threshold",
    "characteristic_coefficients",
    "spectral_radius",
    "dominant_period",
    "exact_stable",
    "exact_threshold",
    "boundary_locus_threshold",
    "classify_regime",
    "closed_form_regime",
    "recursion_regime",
    "critical_k_ref",
    "stability_summary",
    "phase_grid",
]
