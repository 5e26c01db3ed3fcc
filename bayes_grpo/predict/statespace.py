"""State-space (Kalman) likelihood and forecast of one run, vectorised over parameter rows.

The run's error ``e = p - p*`` follows the SDE ``e'' + C e' + K e = sqrt(q) xi`` (``M = 1``,
``C = 2 zeta w0``, ``K = w0^2``) from ``e(0) = R0 - p*``, ``e'(0) = 0``, and is logged with
measurement noise: ``y = p* + e + eps``, ``eps ~ N(0, r^2)``. The noise is parameterised by
the total stationary sd ``sigma`` of ``y`` around the mean trajectory and the share
``rho`` of its variance that is process noise (``sigma^2 rho`` the stationary variance of
``e``, ``r^2 = sigma^2 (1 - rho)``), so ``sigma`` means the same as in the i.i.d. model and
``rho -> 0`` recovers it. Parameter rows are ``v = (p*, R0, log w0, log zeta, log sigma,
log onset, logit rho)``.

Onset: before step ``t0 = exp(log onset)`` the run is held at ``(R0 - p*, 0)`` (no learning
signal yet: the dynamics run on the clock ``tau = max(t - t0, 0)``, so an interval before the
onset has the identity transition and no process noise); see
:func:`bayes_grpo.predict.forecast.mean_curve`.

Bounded rewards: with ``bounds = (lo, hi)`` (e.g. an accuracy in ``[0, 1]``) the state lives
on the latent level of :func:`bayes_grpo.predict.forecast.mean_curve` (``e = z - latent(p*)``)
and the logged reward is its image in the bounds plus measurement noise, ``y = g(z) + eps``
(``g`` = :func:`~bayes_grpo.runset.bounds.bounded_value`, slope 1 mid-range); the filter
linearises ``g`` at each predicted state (extended Kalman filter: exact without bounds). The
process noise is the latent level's (its effect on the reward shrinks near a bound through
``g``'s slope), the measurement variance is multiplied by ``h(m(t))``
(:func:`bayes_grpo.predict.forecast.noise_shape`, a binomial-like ``(m - lo)(hi - m)`` shape
normalised to 1 mid-range), so ``sigma`` is the stationary sd mid-range. A logged reward at a
bound is censored (:func:`bayes_grpo.predict.forecast.at_bounds`): it contributes the
probability that the latent reward lies beyond the bound, and the state is updated with the
moments of the truncated latent reward (assumed-density filtering: exact without process
noise, an approximation with it); simulated logged rewards are clipped to the bounds.

Why: with process noise a run wanders around its mean trajectory with a correlation time
of order ``C / K``; the i.i.d. likelihood then reads the wander as signal, and its forecast
bands, set by the noise seen in the prefix (smaller than the stationary noise, since the
variance of ``e`` grows from 0), are too narrow. The Kalman forecast continues the run
from its filtered state and lets the variance grow to the stationary value.

Transition: exact (``bayes_grpo.model.kalman.transition``); process noise over an interval
from the Lyapunov identity ``Q = P - Phi P Phi^T`` with the stationary covariance
``P = diag(v_p, v_p w0^2)`` (stable rows only, which this parameterisation guarantees).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from bayes_grpo.dynamics.lsq import standardise_rewards
from bayes_grpo.model.kalman import transition
from bayes_grpo.runset.bounds import bounded_value

#: Prior sd of ``logit rho`` (centred on rho = 1/2) appended to the 5-parameter prior.
RHO_PRIOR_SD: float = 1.5


#: Column of ``logit rho`` in the parameter rows.
RHO_COL: int = 6


def _unpack(v: np.ndarray):
    v = np.atleast_2d(v)
    if v.shape[1] != RHO_COL + 1:
        raise ValueError(
            f"state-space rows need {RHO_COL + 1} columns (p*, R0, log w0, log zeta, log sigma, "
            f"log onset, logit rho); got {v.shape[1]}"
        )
    plateau, r0 = v[:, 0], v[:, 1]
    w0, zeta, sigma = np.exp(v[:, 2]), np.exp(v[:, 3]), np.exp(v[:, 4])
    rho = 1.0 / (1.0 + np.exp(-v[:, RHO_COL]))
    var_p = sigma**2 * rho
    r2 = sigma**2 * (1.0 - rho)
    return plateau, r0, w0, zeta, var_p, r2


def _phi_q(dt: np.ndarray, w0: np.ndarray, zeta: np.ndarray, var_p: np.ndarray):
    """Transition and process-noise entries for intervals ``dt`` (broadcast ``(n, k)``)."""
    damping = (2.0 * zeta * w0)[:, None]
    k_eff = (w0 * w0)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        f11, f12, f21, f22 = transition(dt, 1.0, damping, k_eff)
    p11 = var_p[:, None]
    p22 = (var_p * w0 * w0)[:, None]
    q11 = np.maximum(p11 - (f11 * f11 * p11 + f12 * f12 * p22), 0.0)
    q12 = -(f11 * f21 * p11 + f12 * f22 * p22)
    q22 = np.maximum(p22 - (f21 * f21 * p11 + f22 * f22 * p22), 0.0)
    return (f11, f12, f21, f22), (q11, q12, q22)


def _clock(v: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Dynamics clock ``tau = max(t - t0, 0)`` per row, shape ``(n, len(t))``."""
    onset = np.exp(np.atleast_2d(v)[:, 5:6])
    return np.maximum(np.asarray(t, dtype=float)[None, :] - onset, 0.0)


def _shape(v: np.ndarray, t: np.ndarray, bounds) -> np.ndarray:
    """Noise-variance multiplier ``h(m(t))`` per row and step (ones without bounds)."""
    from bayes_grpo.predict.forecast import mean_curve, noise_shape

    if bounds is None:
        return np.ones((np.atleast_2d(v).shape[0], np.size(t)))
    return noise_shape(mean_curve(v, t, bounds), bounds)


def _observed(level: np.ndarray, bounds) -> tuple[np.ndarray, np.ndarray]:
    """The mean reward at the state's ``level`` and its slope ``d reward / d level``: the level
    and 1 without bounds; its image in the bounds and ``4 x (1 - x)`` with them (``x`` the
    image's share of the range: slope 1 mid-range)."""
    if bounds is None:
        return level, np.ones_like(level)
    lo, hi = float(bounds[0]), float(bounds[1])
    reward = bounded_value(level, lo, hi)
    x = (reward - lo) / (hi - lo)
    return reward, 4.0 * x * (1.0 - x)


def _censored_update(gap: np.ndarray, s: np.ndarray, *, upper: bool):
    """Log-probability and truncated moments of a latent reward censored at a bound.

    ``gap`` = bound minus the predicted reward (per row), ``s`` its predictive variance.
    Returns ``((log P, mean shift), variance)``: ``log P(latent <= bound)`` (``>=`` for the
    upper bound), the mean of the truncated latent reward minus the predicted one, and its
    variance (the inverse Mills ratio formulas of the truncated normal).
    """
    sd = np.sqrt(s)
    alpha = gap / sd if not upper else -gap / sd
    log_p = special.log_ndtr(alpha)
    mills = np.exp(-0.5 * alpha * alpha - 0.5 * np.log(2 * np.pi) - log_p)
    shift = -sd * mills if not upper else sd * mills
    var = s * np.clip(1.0 - alpha * mills - mills * mills, 0.0, 1.0)
    return (log_p, shift), var


def _step_major(*arrays: np.ndarray) -> list[np.ndarray]:
    """``(rows, steps)`` arrays as contiguous ``(steps, rows)`` copies (broadcast first)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    return [np.ascontiguousarray(np.broadcast_to(a, shape).T) for a in arrays]


def _predicted_covariance(a, b, c, d, p11, p12, p22, q11, q12, q22):
    """The state's covariance one step on, ``Phi P Phi^T + Q`` (``Phi = [[a, b], [c, d]]``;
    each argument one value per row): the filter's prediction and the forecast's propagation."""
    return (
        a * a * p11 + 2 * a * b * p12 + b * b * p22 + q11,
        a * c * p11 + (a * d + b * c) * p12 + b * d * p22 + q12,
        c * c * p11 + 2 * c * d * p12 + d * d * p22 + q22,
    )


def kalman_filter(v: np.ndarray, t: np.ndarray, y: np.ndarray, bounds=None):
    """Log-likelihood of ``y`` at steps ``t`` for each row of ``v``, and the filtered state.

    ``bounds``: ``(lo, hi)`` of a bounded reward (the state on the latent level, the
    measurement variance scaled by ``h(m(t))``: see the module's docstring) or None (constant
    noise). Returns ``(loglik (n,), x (n, 2), P (n, 3) as (P11, P12, P22))``
    at the last step.
    """
    from bayes_grpo.predict.forecast import at_bounds, oscillator_level

    v = np.atleast_2d(v)
    plateau, r0, w0, zeta, var_p, r2 = _unpack(v)
    t = np.asarray(t, dtype=float)
    y = np.asarray(y, dtype=float)
    low, high = at_bounds(y, bounds)
    tau = _clock(v, t)
    dts = np.diff(np.concatenate([np.zeros((v.shape[0], 1)), tau], axis=1), axis=1)
    (f11, f12, f21, f22), (q11, q12, q22) = _phi_q(dts, w0, zeta, var_p)
    h = _shape(v, t, bounds)
    # the loop reads one step of every row: step-major copies make each read contiguous (the
    # same values; a column of a (rows, steps) array was a strided read of thousands of rows)
    f11, f12, f21, f22, q11, q12, q22, h = _step_major(f11, f12, f21, f22, q11, q12, q22, h)
    n = v.shape[0]
    level = oscillator_level(plateau, bounds)
    x1, x2 = oscillator_level(r0, bounds) - level, np.zeros(n)
    p11, p12, p22 = np.zeros(n), np.zeros(n), np.zeros(n)
    ll = np.zeros(n)
    np_err = np.errstate(all="ignore")
    np_err.__enter__()
    for i in range(t.size):
        a, b, c, d = f11[i], f12[i], f21[i], f22[i]
        x1, x2 = a * x1 + b * x2, c * x1 + d * x2
        n11, n12, n22 = _predicted_covariance(a, b, c, d, p11, p12, p22, q11[i], q12[i], q22[i])
        # the logged reward's prediction: the state's image and its slope there (extended
        # Kalman filter on a bounded reward; exact, slope 1, without bounds)
        predicted, slope = _observed(level + x1, bounds)
        s = np.maximum(slope * slope * n11 + h[i] * r2, 1e-300)
        k1, k2 = slope * n11 / s, slope * n12 / s
        if low[i] or high[i]:
            # censored at a bound: the probability of the latent reward beyond it, and the
            # state conditioned on the truncated latent reward (moments matched)
            shift, kept = _censored_update(y[i] - predicted, s, upper=bool(high[i]))
            ll += shift[0]
            x1, x2 = x1 + k1 * shift[1], x2 + k2 * shift[1]
            gain = s - kept
        else:
            innov = y[i] - predicted
            ll += -0.5 * (np.log(2 * np.pi * s) + innov * innov / s)
            x1, x2 = x1 + k1 * innov, x2 + k2 * innov
            gain = s
        p11, p12, p22 = n11 - k1 * k1 * gain, n12 - k1 * k2 * gain, n22 - k2 * k2 * gain
    np_err.__exit__(None, None, None)
    ll = np.where(np.isfinite(ll), ll, -np.inf)
    return ll, np.column_stack([x1, x2]), np.column_stack([p11, p12, p22])


def log_lik(v: np.ndarray, t: np.ndarray, y: np.ndarray, bounds=None) -> np.ndarray:
    """State-space log-likelihood per parameter row."""
    return kalman_filter(v, t, y, bounds)[0]


#: Gauss-Hermite nodes of :func:`expected_logged` (the expectation over the state's level).
EXPECTATION_NODES: int = 9


def expected_logged(level: np.ndarray, level_sd: np.ndarray, meas_sd: np.ndarray, bounds) -> np.ndarray:
    """The mean of the logged reward when the state's level is ``N(level, level_sd^2)`` and the
    measurement adds noise of sd ``meas_sd`` (elementwise): ``level`` without bounds; with
    them the mean of the censored image, ``E[clip(g(L) + eps, lo, hi)]`` (``g`` the map into the
    bounds), by Gauss-Hermite quadrature over ``L`` of the closed-form censored mean given ``L``
    (:func:`~bayes_grpo.predict.forecast.censored_mean`): the point forecast of a bounded reward,
    which the simulated logged rewards (censored) average to."""
    from bayes_grpo.predict.forecast import censored_mean

    if bounds is None:
        return np.asarray(level, dtype=float).copy()
    nodes, weights = np.polynomial.hermite_e.hermegauss(EXPECTATION_NODES)
    weights = weights / weights.sum()
    out = np.zeros(np.broadcast(level, level_sd, meas_sd).shape)
    for node, weight in zip(nodes, weights):
        image = _observed(level + node * level_sd, bounds)[0]
        out += weight * censored_mean(image, meas_sd, bounds)
    return out


def forecast_paths(
    v: np.ndarray,
    t: np.ndarray,
    y: np.ndarray,
    future: np.ndarray,
    rng: np.random.Generator,
    bounds=None,
):
    """Simulate the logged reward at ``future`` steps (all after ``t[-1]``) for each row.

    Returns ``(obs (n, k), point (n, k))``: one sampled path per row (filtered state drawn,
    SDE propagated exactly, measurement noise added) and the row's conditional mean of the
    logged reward: ``p* + E[e(t) | prefix]``, and with ``bounds`` the mean of the censored
    image of the state (:func:`expected_logged` over the state's conditional distribution and
    the measurement noise), as ``obs`` is censored: the latent mean alone, beyond a bound, put
    the point forecast of a success rate at 1.37 (``g16_p8_lr0.001_k1_adamw_s0`` of
    ``data/tiny`` from step 150 with the run-based prior).
    """
    from bayes_grpo.predict.forecast import censor, oscillator_level

    v = np.atleast_2d(v)
    plateau, _, w0, zeta, var_p, r2 = _unpack(v)
    level = oscillator_level(plateau, bounds)
    _, x, p = kalman_filter(v, t, y, bounds)
    n = v.shape[0]
    # draw the filtered state
    l11 = np.sqrt(np.maximum(p[:, 0], 0.0))
    l21 = np.where(l11 > 0, p[:, 1] / np.where(l11 > 0, l11, 1.0), 0.0)
    l22 = np.sqrt(np.maximum(p[:, 2] - l21 * l21, 0.0))
    z1, z2 = rng.standard_normal(n), rng.standard_normal(n)
    s1, s2 = x[:, 0] + l11 * z1, x[:, 1] + l21 * z1 + l22 * z2
    m1, m2 = x[:, 0].copy(), x[:, 1].copy()
    # the conditional covariance of the state, propagated as the mean is
    p11, p12, p22 = p[:, 0].copy(), p[:, 1].copy(), p[:, 2].copy()
    future = np.asarray(future, dtype=float)
    tau = _clock(v, np.concatenate([[t[-1]], future]))
    dts = np.diff(tau, axis=1)
    (f11, f12, f21, f22), (q11, q12, q22) = _phi_q(dts, w0, zeta, var_p)
    h = _shape(v, future, bounds)
    f11, f12, f21, f22, q11, q12, q22, h = _step_major(f11, f12, f21, f22, q11, q12, q22, h)
    obs = np.empty((future.size, n))  # step-major, as the loop writes them; rows-major returned
    point = np.empty((future.size, n))
    r = np.sqrt(r2)
    c11, c21, c22 = np.sqrt(q11), np.zeros_like(q11), np.zeros_like(q11)
    np.divide(q12, c11, out=c21, where=c11 > 0)
    c22 = np.sqrt(np.maximum(q22 - c21 * c21, 0.0))
    for k in range(future.size):
        a, b, c, d = f11[k], f12[k], f21[k], f22[k]
        z1, z2 = rng.standard_normal(n), rng.standard_normal(n)
        s1, s2 = a * s1 + b * s2 + c11[k] * z1, c * s1 + d * s2 + c21[k] * z1 + c22[k] * z2
        m1, m2 = a * m1 + b * m2, c * m1 + d * m2
        p11, p12, p22 = _predicted_covariance(a, b, c, d, p11, p12, p22, q11[k], q12[k], q22[k])
        meas_sd = r * np.sqrt(h[k])
        obs[k] = censor(_observed(level + s1, bounds)[0] + meas_sd * rng.standard_normal(n), bounds)
        point[k] = expected_logged(level + m1, np.sqrt(np.maximum(p11, 0.0)), meas_sd, bounds)
    return np.ascontiguousarray(obs.T), np.ascontiguousarray(point.T)


#: Largest number of (grid row, distinct logging interval) cells one pass of
#: :func:`damping_profile` holds (a regular log has one or two distinct intervals).
PROFILE_CHUNK_CELLS: int = 2_000_000


def _profile_rows(t, y, zeta, w0, rho):
    """Profile log-likelihood per grid row ``(zeta, w0, rho)`` (each ``(k,)``) of each series
    ``y`` (``(m, n)``), with the plateau and initial reward at their generalised-least-squares
    values and ``sigma`` at its maximum-likelihood value; returns ``(loglik, plateau, r0,
    sigma)`` each ``(m, k)``.

    The filter is linear in the data and in the initial state, and its gains do not depend
    on ``p*, R0, sigma``: one pass filters ``m + 2`` channels (the data; a constant 1; the
    initial state ``(1, 0)`` with no data) whose innovations combine linearly.
    """
    k = zeta.size
    var_p, r2 = rho, 1.0 - rho  # sigma = 1; the likelihood is profiled over sigma below
    # one transition per distinct interval (a regular log has one or two), indexed per step
    dts, which = np.unique(np.diff(np.concatenate([[0.0], t])), return_inverse=True)
    (f11, f12, f21, f22), (q11, q12, q22) = _phi_q(np.repeat(dts[None, :], k, axis=0), w0, zeta, var_p)
    y = np.atleast_2d(y)
    m = y.shape[0]
    # state per channel: x[c] = (position, velocity), channels data (m) / constant / initial
    x1 = np.zeros((m + 2, k))
    x2 = np.zeros((m + 2, k))
    x1[m + 1] = 1.0
    p11, p12, p22 = np.zeros(k), np.zeros(k), np.zeros(k)
    data = np.zeros((m + 2, 1))
    data[m, 0] = 1.0
    sum_log_s = np.zeros(k)
    # weighted normal equations of innov = a - X theta, X = [b + c, -c], theta = (p*, R0)
    saa, sau, sac = (np.zeros((m, k)) for _ in range(3))
    suu, suc, scc = (np.zeros(k) for _ in range(3))
    with np.errstate(all="ignore"):
        for i, j in enumerate(which):
            a, b, c, d = f11[:, j], f12[:, j], f21[:, j], f22[:, j]
            x1, x2 = a * x1 + b * x2, c * x1 + d * x2
            n11 = a * a * p11 + 2 * a * b * p12 + b * b * p22 + q11[:, j]
            n12 = a * c * p11 + (a * d + b * c) * p12 + b * d * p22 + q12[:, j]
            n22 = c * c * p11 + 2 * c * d * p12 + d * d * p22 + q22[:, j]
            s_i = np.maximum(n11 + r2, 1e-300)
            data[:m, 0] = y[:, i]
            innov = data - x1
            k1, k2 = n11 / s_i, n12 / s_i
            x1, x2 = x1 + k1 * innov, x2 + k2 * innov
            p11, p12, p22 = n11 - k1 * n11, n12 - k1 * n12, n22 - k2 * n12
            sum_log_s += np.log(s_i)
            ia, u, ic = innov[:m], innov[m] + innov[m + 1], innov[m + 1]
            saa += ia * ia / s_i
            sau += ia * u / s_i
            sac += ia * ic / s_i
            suu += u * u / s_i
            suc += u * ic / s_i
            scc += ic * ic / s_i
        # theta = argmin sum (a - u p* + c R0)^2 / s: normal equations in (p*, R0)
        det = suu * scc - suc * suc
        plateau = (sau * scc - sac * suc) / det
        r0 = (sau * suc - sac * suu) / det
        q = saa - 2 * plateau * sau + 2 * r0 * sac + plateau**2 * suu - 2 * plateau * r0 * suc + r0**2 * scc
        n = t.size
        loglik = -0.5 * (n * np.log(2 * np.pi * np.maximum(q, 1e-300) / n) + sum_log_s + n)
        sigma = np.sqrt(np.maximum(q, 0.0) / n)
    ok = np.isfinite(loglik) & np.isfinite(plateau) & np.isfinite(r0) & (det > 0)
    return np.where(ok, loglik, -np.inf), plateau, r0, sigma


def damping_profile(
    t: np.ndarray,
    y: np.ndarray,
    *,
    zetas: np.ndarray,
    w0s: np.ndarray,
    rhos: np.ndarray,
) -> dict[str, np.ndarray]:
    """Maximum state-space log-likelihood of a run on a grid of ``(zeta, w0, rho)``.

    The state-space model of the module docstring (process noise that moves the run through
    its own dynamics plus measurement noise, no onset, no reward bounds) with ``p*``, ``R0``
    and ``sigma`` profiled out exactly per grid row. Used to ask whether a damping ratio is
    supported once the reward may wander about its trajectory.

    Parameters
    ----------
    t, y
        Steps (from the start of training, increasing) and rewards, shape ``(n,)``, finite;
        ``y`` may also be ``(m, n)``, ``m`` series logged at the same steps (one filter pass
        serves them all: its gains do not depend on the data).
    zetas, w0s, rhos
        Grid of damping ratios, natural frequencies (rad/step) and process-noise shares of
        the variance (in ``(0, 1)``); every combination is evaluated.

    Returns
    -------
    dict
        ``loglik`` of shape ``(len(zetas), len(w0s), len(rhos))`` and ``plateau``,
        ``initial_reward``, ``noise_sd`` (the profiled values; ``noise_sd`` is ``sigma``, the
        total stationary sd) of the same shape; ``(m, ...)`` for ``m`` series.
    """
    t = np.asarray(t, dtype=float)
    y = np.asarray(y, dtype=float)
    many = y.ndim == 2
    ys = y if many else y[None, :]
    # the filter runs on the standardised rewards: its sums of squares expand the quadratic
    # in (p*, R0), which on a reward of 1000 plus changes of 1e-3 cancelled to noise
    # (zeta 0.48 and process-noise share 0.001 for the 0.38 and 0.08 of the same run at 0)
    parts = [standardise_rewards(row) for row in ys]
    z = np.stack([part[0] for part in parts])
    loc = np.array([part[1] for part in parts])[:, None]
    unit = np.array([part[2] for part in parts])[:, None]
    zg, wg, rg = np.meshgrid(
        np.asarray(zetas, float), np.asarray(w0s, float), np.asarray(rhos, float), indexing="ij"
    )
    shape = zg.shape
    zf, wf, rf = zg.ravel(), wg.ravel(), rg.ravel()
    out = [np.empty((z.shape[0], zf.size)) for _ in range(4)]
    distinct = np.unique(np.diff(np.concatenate([[0.0], t]))).size
    chunk = max(1, PROFILE_CHUNK_CELLS // max(distinct, z.shape[0] + 2))
    for start in range(0, zf.size, chunk):
        sl = slice(start, start + chunk)
        for dest, part in zip(out, _profile_rows(t, z, zf[sl], wf[sl], rf[sl])):
            dest[:, sl] = part
    result = {
        "loglik": out[0] - t.size * np.log(unit),
        "plateau": loc + unit * out[1],
        "initial_reward": loc + unit * out[2],
        "noise_sd": unit * out[3],
    }
    return {
        key: value.reshape((z.shape[0], *shape) if many else shape) for key, value in result.items()
    }


__all__ = [
    "RHO_COL",
    "RHO_PRIOR_SD",
    "damping_profile",
    "forecast_paths",
    "kalman_filter",
    "log_lik",
]
