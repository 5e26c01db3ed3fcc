"""Thin adapter over the law fits of ``bayes_grpo.dynamics.lsq`` and ``bayes_grpo.metrics``.

The diagnostics need three things from a reward-like series: its saturation plateau and
time constant (single exponential, the overdamped limit), its damping ratio (the
damped-oscillator law), and whether it has a trend beyond noise. This module calls the
project's fitters and returns plain dicts; it does no fitting of its own. A fit that fails
returns None (the caller says so in its result).

Uncertainty of a fit (refitting every bootstrap replicate would cost seconds per run) is
the Gauss-Newton (Laplace) approximation at the optimum: ``cov = s^2 (J^T J)^-1`` with
``J`` the Jacobian of the fitted curve in the fitting parameters (central differences) and
``s^2`` the residual variance inflated by ``(1 + rho) / (1 - rho)`` for the lag-1
autocorrelation ``rho`` of the residuals (serially correlated noise carries less
information than white noise). Standard deviations are on the scale the fitter works on:
``plateau`` and ``initial_reward`` linear, ``tau``, ``zeta`` and ``w0`` logarithmic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from bayes_grpo.dynamics.trajectory import reward_trajectory, single_exponential, starts_late

_FIT_ERRORS = (
    RuntimeError,
    ValueError,
    FloatingPointError,
    KeyError,
    AttributeError,
    np.linalg.LinAlgError,
)


#: Eigenvalues of ``J^T J`` below this share of the largest are directions the curve does
#: not depend on (numpy's own pseudo-inverse cut-off).
NULL_RCOND = 1e-15
#: A parameter loading more than this on such a direction is not identified (sd = inf).
NULL_LOADING = 1e-6


def laplace_sd(
    curve: Callable[[np.ndarray], np.ndarray], theta: np.ndarray, residuals: np.ndarray
) -> np.ndarray:
    """Standard deviations of the fitting parameters ``theta`` (Gauss-Newton, see module doc).

    Parameters
    ----------
    curve
        ``curve(theta) -> fitted values (n,)``.
    theta
        Parameters at the optimum, shape ``(k,)``.
    residuals
        ``y - curve(theta)``, shape ``(n,)``.

    Returns
    -------
    numpy.ndarray
        ``(k,)``; ``inf`` for a parameter on a direction the curve does not depend on.
    """
    theta = np.asarray(theta, dtype=float)
    n, k = residuals.size, theta.size
    jac = np.empty((n, k))
    for j in range(k):
        h = 1e-6 * max(1.0, abs(theta[j]))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        jac[:, j] = (curve(up) - curve(down)) / (2 * h)
    r = residuals - residuals.mean()
    rho = float(np.sum(r[1:] * r[:-1]) / np.sum(r * r)) if n > 2 and np.sum(r * r) > 0 else 0.0
    inflation = float(np.clip((1 + rho) / (1 - rho), 1.0, 25.0)) if rho < 1 else 25.0
    s2 = float(np.sum(residuals**2)) / max(n - k, 1) * inflation
    info = jac.T @ jac
    # each parameter in units of its own column (the levels move the curve by 1 per unit, the
    # log time scales by the reward's scale): on rewards of order 1e-9 the raw J^T J spanned
    # 1e-18 and every log time scale read as a direction the curve ignores (sd inf)
    norm = np.sqrt(np.clip(np.diag(info), 0.0, None))
    ignored = ~(norm > 0.0)
    unit = np.where(ignored, 1.0, 1.0 / np.where(ignored, 1.0, norm))
    scaled = info * unit[:, None] * unit[None, :]
    cov = s2 * unit[:, None] * np.linalg.pinv(scaled, rcond=NULL_RCOND, hermitian=True) * unit[None, :]
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    # pinv gives a direction the curve does not depend on (zeta of a constant reward) zero
    # variance; the data say nothing there, so every parameter on it is unbounded
    eigval, eigvec = np.linalg.eigh(scaled)
    null = eigval <= NULL_RCOND * max(float(eigval.max()), 0.0)
    if null.any():
        sd[(np.abs(eigvec[:, null]) > NULL_LOADING).any(axis=1)] = np.inf
    sd[ignored] = np.inf
    return sd


def law_time(steps: np.ndarray) -> np.ndarray:
    """The laws' time at the logged ``steps`` (increasing): the steps themselves, or, for a log
    that starts late (``dynamics.trajectory.starts_late``: a resumed run, a step counter that
    did not start at 0), the steps since its first one.

    The laws start training (``R0``, zero velocity) at time 0; fitted at the raw steps of a
    log from step 1000 on they would have to draw 1000 steps nobody logged, and the fits
    fail or read nothing (a reward oscillation was missed at any such offset). Only the
    time origin moves: fitted curves are still given at the logged steps.
    """
    t = np.asarray(steps, dtype=float)
    return t - t[0] if starts_late(t) else t


#: The saturation fits made within :func:`fits_reused`, by series; None outside it.
_SATURATION_FITS: ContextVar[dict[tuple[bytes, bytes], dict[str, Any] | None] | None] = ContextVar(
    "saturation_fits", default=None
)


@contextlib.contextmanager
def fits_reused() -> Iterator[None]:
    """Within it, :func:`fit_saturation` fits a series once: a series it fitted already (the same
    steps and values) gets that fit again. ``diagnose`` runs its modes within it: policy
    concentration and the reward oscillation's BIC test fitted each run's reward twice."""
    token = _SATURATION_FITS.set({})
    try:
        yield
    finally:
        _SATURATION_FITS.reset(token)


def fit_saturation(steps: np.ndarray, values: np.ndarray) -> dict[str, Any] | None:
    """Single-exponential fit ``R(t) = p* - (p* - R0) exp(-t / tau)`` of a series (once per
    series within :func:`fits_reused`).

    Returns
    -------
    dict or None
        ``plateau``, ``initial_reward``, ``time_constant`` (steps), ``fitted`` (n,), ``sse``,
        ``plateau_sd`` and ``log_time_constant_sd`` (Gauss-Newton), ``bic``; None when the
        fit fails.
    """
    t = law_time(steps)
    y = np.asarray(values, dtype=float)
    made = _SATURATION_FITS.get()
    if made is None:
        return _fit_saturation(t, y)
    key = (t.tobytes(), y.tobytes())
    if key not in made:
        made[key] = _fit_saturation(t, y)
    fit = made[key]
    return None if fit is None else {**fit, "fitted": fit["fitted"].copy()}


def _fit_saturation(t: np.ndarray, y: np.ndarray) -> dict[str, Any] | None:
    """:func:`fit_saturation` at the laws' time ``t`` (``law_time``), without reuse."""
    from bayes_grpo.dynamics import lsq

    try:
        res = lsq.fit_single_exponential(t, y)
        p = res.params
        theta = np.array([p["plateau"], p["initial_reward"], np.log(p["tau"])])
        fitted = np.asarray(res.fitted, dtype=float)
        sd = laplace_sd(
            lambda th: np.asarray(single_exponential(t, th[0], th[1], np.exp(th[2]))),
            theta,
            y - fitted,
        )
    except _FIT_ERRORS:
        return None
    out = {
        "plateau": float(p["plateau"]),
        "initial_reward": float(p["initial_reward"]),
        "time_constant": float(p["tau"]),
        "fitted": fitted,
        "sse": float(res.sse),
        "plateau_sd": float(sd[0]),
        "log_time_constant_sd": float(sd[2]),
        "bic": float(res.bic),
    }
    if not (np.isfinite(out["plateau"]) and np.isfinite(out["time_constant"])):
        return None
    return out


def fit_oscillator(steps: np.ndarray, values: np.ndarray) -> dict[str, Any] | None:
    """Damped-oscillator fit of a reward series (``lsq.fit_oscillator``, mass 1, ``v0 = 0``).

    Returns
    -------
    dict or None
        ``zeta`` (damping ratio), ``w0`` (rad/step), ``plateau``, ``initial_reward``,
        ``fitted`` (n,), ``sse``, ``bic``, ``log_zeta_sd`` (Gauss-Newton) and ``at_bounds``
        (parameters that ended on a search bound of ``lsq.fit_oscillator``: their values are
        bounds, not estimates); None when the fit fails.
    """
    from bayes_grpo.dynamics import lsq

    t = law_time(steps)
    y = np.asarray(values, dtype=float)
    try:
        res = lsq.fit_oscillator(t, y)
        p = res.params
        theta = np.array([p["plateau"], p["initial_reward"], np.log(p["zeta"]), np.log(p["w0"])])
        fitted = np.asarray(res.fitted, dtype=float)

        def curve(th):
            z, w = np.exp(th[2]), np.exp(th[3])
            return np.asarray(reward_trajectory(t, 1.0, 2.0 * z * w, w * w, th[0], th[1]))

        with np.errstate(all="ignore"):
            sd = laplace_sd(curve, theta, y - fitted)
    except _FIT_ERRORS:
        return None
    if not np.isfinite(p["zeta"]):
        return None
    return {
        "zeta": float(p["zeta"]),
        "w0": float(p["w0"]),
        "plateau": float(p["plateau"]),
        "initial_reward": float(p["initial_reward"]),
        "fitted": fitted,
        "sse": float(res.sse),
        "bic": float(res.bic),
        "log_zeta_sd": float(sd[2]),
        "at_bounds": [str(name) for name in res.at_bounds],
    }


#: Grid of the state-space damping test: damping ratios, natural frequencies (as multiples
#: of 1 / span) and process-noise shares; refined twice around the best rows.
STATE_SPACE_ZETAS = np.geomspace(0.02, 50.0, 33)
STATE_SPACE_W0_SPANS = (0.3, 1000.0)
STATE_SPACE_N_W0 = 40
STATE_SPACE_RHOS = np.array([1e-4, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 0.995])
STATE_SPACE_REFINEMENTS = 2


def _refine(t, y, best, z_step, w_step, lo_zeta):
    """Best ``(loglik, zeta, w0, rho)`` from the grid row ``best`` (same layout) on local grids
    of half the step each time (log steps ``z_step``, ``w_step``; zeta kept >= ``lo_zeta``),
    ``STATE_SPACE_REFINEMENTS`` times."""
    from bayes_grpo.predict.statespace import damping_profile

    for _ in range(STATE_SPACE_REFINEMENTS):
        z_step, w_step = z_step / 2.0, w_step / 2.0
        offsets = np.arange(-2, 3)
        zs = np.unique(np.maximum(best[1] * np.exp(z_step * offsets), lo_zeta))
        ws = best[2] * np.exp(w_step * offsets)
        rs = 1.0 / (1.0 + np.exp(-(np.log(best[3] / (1.0 - best[3])) + 0.5 * offsets)))
        ll = damping_profile(t, y, zetas=zs, w0s=ws, rhos=rs)["loglik"]
        i, j, k = np.unravel_index(int(np.argmax(ll)), ll.shape)
        if ll[i, j, k] > best[0]:
            best = (float(ll[i, j, k]), float(zs[i]), float(ws[j]), float(rs[k]))
    return best


def state_space_damping_test(
    steps: np.ndarray, values: np.ndarray, zeta_threshold: float, *, null_fit: bool = False
) -> dict[str, Any] | None:
    """Is a damping ratio below ``zeta_threshold`` supported once the reward may wander?

    Fits the state-space law (:func:`bayes_grpo.predict.statespace.damping_profile`: the
    SDE's process noise, which moves the run through its own dynamics, plus measurement
    noise) by maximum likelihood on a grid refined around its best rows, once over all
    damping ratios and once over ``zeta >= zeta_threshold``. A reward that wanders about a
    slow, overdamped curve (process noise logged at intervals over which it does not
    decorrelate) has swings an oscillator fits under independent noise; here the swings
    can be noise, and an oscillation is supported only if no overdamped law with process
    noise comes close. How close is too close is :func:`state_space_null_pvalue`'s question.

    Returns
    -------
    dict or None
        ``likelihood_ratio`` (twice the log-likelihood gain of the best fit over the best
        with ``zeta >= zeta_threshold``; 0 when the best is there), ``zeta`` and
        ``process_noise_share`` of the best fit, and with ``null_fit`` also ``null_fit``: the
        best law with ``zeta >= zeta_threshold`` (``zeta``, ``w0``, ``process_noise_share``,
        ``plateau``, ``initial_reward``, ``noise_sd``, ``t`` the law's times and ``y`` the
        rewards it was fitted to), what :func:`state_space_null_pvalue` simulates from; None
        when the series is too short or the fits fail.
    """
    t = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    ok = np.isfinite(t) & np.isfinite(y)
    t, y = t[ok], y[ok]
    if t.size < 5 or np.ptp(y) == 0:
        return None
    order = np.argsort(t, kind="stable")
    t, y = t[order], y[order]
    t = law_time(t - min(float(t[0]), 0.0))
    test = _state_space_lr(t, y, zeta_threshold)
    if test is not None and not null_fit:
        test.pop("null_fit")
    return test


def _state_space_lr(t: np.ndarray, y: np.ndarray, zeta_threshold: float) -> dict[str, Any] | None:
    """:func:`state_space_damping_test` on a cleaned series (finite, sorted, law time)."""
    from bayes_grpo.predict.statespace import damping_profile

    (fit,) = _state_space_fits(t, y[None, :], zeta_threshold)
    if fit is None:
        return None
    top, above = fit
    _, z0, w0, rho0 = above
    try:
        at = damping_profile(t, y, zetas=[z0], w0s=[w0], rhos=[rho0])
    except _FIT_ERRORS:
        return None
    return {
        "likelihood_ratio": float(max(2.0 * (top[0] - above[0]), 0.0)),
        "zeta": float(top[1]),
        "process_noise_share": float(top[3]),
        "null_fit": {
            "zeta": z0,
            "w0": w0,
            "process_noise_share": rho0,
            "plateau": float(at["plateau"].ravel()[0]),
            "initial_reward": float(at["initial_reward"].ravel()[0]),
            "noise_sd": float(at["noise_sd"].ravel()[0]),
            "t": t,
            "y": y,
        },
    }


def _state_space_fits(t: np.ndarray, ys: np.ndarray, zeta_threshold: float) -> list:
    """Best ``(loglik, zeta, w0, rho)`` over all damping ratios and over ``zeta >=
    zeta_threshold`` of each series ``ys`` (``(m, n)``, cleaned, at the times ``t``): one
    pass of the grid for all of them, then each refined on its own. Returns ``(best, best
    above)`` per series (None where the fits fail)."""
    from bayes_grpo.predict.statespace import damping_profile

    span = float(t[-1]) if t[-1] > 0 else 1.0
    gaps = np.diff(t)
    gaps = gaps[gaps > 0]
    dt_min = float(gaps.min()) if gaps.size else 1.0
    w0s = np.geomspace(
        STATE_SPACE_W0_SPANS[0] / span,
        max(min(20.0 / dt_min, STATE_SPACE_W0_SPANS[1] / span), 2.0 * STATE_SPACE_W0_SPANS[0] / span),
        STATE_SPACE_N_W0,
    )
    zetas = np.unique(np.append(STATE_SPACE_ZETAS, zeta_threshold))
    try:
        lls = damping_profile(t, ys, zetas=zetas, w0s=w0s, rhos=STATE_SPACE_RHOS)["loglik"]
    except _FIT_ERRORS:
        return [None] * ys.shape[0]
    z_step = float(np.log(STATE_SPACE_ZETAS[1] / STATE_SPACE_ZETAS[0]))
    w_step = float(np.log(w0s[1] / w0s[0]))
    out = []
    for y, ll in zip(ys, lls):
        best = {}
        for region, mask in (("all", np.ones(zetas.size, bool)), ("above", zetas >= zeta_threshold)):
            sub = np.where(mask[:, None, None], ll, -np.inf)
            if not np.isfinite(sub).any():
                break
            i, j, k = np.unravel_index(int(np.argmax(sub)), sub.shape)
            row = (float(sub[i, j, k]), float(zetas[i]), float(w0s[j]), float(STATE_SPACE_RHOS[k]))
            lo = zeta_threshold if region == "above" else 0.0
            try:
                best[region] = _refine(t, y, row, z_step, w_step, lo)
            except _FIT_ERRORS:
                break
        out.append((max(best["all"], best["above"]), best["above"]) if len(best) == 2 else None)
    return out


#: Replicates of the parametric bootstrap of the state-space damping test: the smallest
#: count for which a Monte Carlo test at 5% (no replicate reaching the run's ratio) exists.
STATE_SPACE_BOOT: int = 19
#: Replicates filtered in one pass (the test stops after a batch once it is decided).
STATE_SPACE_BOOT_BATCH: int = 10


def state_space_null_pvalue(
    test: dict[str, Any],
    zeta_threshold: float,
    alpha: float,
    rng: np.random.Generator,
    n_boot: int = STATE_SPACE_BOOT,
) -> dict[str, Any]:
    """Monte Carlo p-value of a state-space damping test's likelihood ratio under its null.

    The ratio's chi-square(1) calibration fails on a short run: the null's process-noise
    share and damping ratio sit on or near their bounds and a handful of wander bumps is all
    the run shows; a reward wandering about an overdamped curve (zeta 1.5, 30-60 logged
    points, ``diagnostics.cases`` ``healthy_wandering``) reached the 90% quantile 2.71 in
    19% of runs, not 5%. Here ``n_boot`` series are simulated from the test's ``null_fit``
    (the SDE from ``R0`` at rest with its process noise, plus its measurement noise, at the
    run's logged times), each is tested the same way, and the p-value is
    ``(1 + replicates whose ratio reaches the run's) / (1 + n_boot)`` (a Monte Carlo test,
    exact at any ``n_boot`` when the null fit is the truth). Replicates stop once more than
    ``alpha (1 + n_boot) - 1`` reach the run's ratio: the p-value is then above ``alpha``
    whatever the rest give (its value is then a lower bound).

    Returns
    -------
    dict
        ``p_value``, ``replicates`` (run), ``reaching`` (how many reached the run's ratio).
    """
    from bayes_grpo.dynamics.simulate import simulate_sde, stationary_covariance

    null = test["null_fit"]
    t, lr = null["t"], float(test["likelihood_ratio"])
    w0, zeta, rho, sigma = null["w0"], null["zeta"], null["process_noise_share"], null["noise_sd"]
    damping, k_eff = 2.0 * zeta * w0, w0 * w0
    unit_var = float(np.squeeze(stationary_covariance(1.0, damping, k_eff, 1.0, 1.0))[0, 0])
    noise_d = sigma**2 * rho / unit_var
    # the law starts at rest at time 0; a log from a later step sees it from there
    grid = t if t[0] == 0 else np.concatenate([[0.0], t])
    e = simulate_sde(
        1.0, damping, k_eff, np.full(n_boot, noise_d), 1.0, grid,
        e0=null["initial_reward"] - null["plateau"], rng=rng,
    )[:, grid.size - t.size :]
    sims = null["plateau"] + e + sigma * np.sqrt(1.0 - rho) * rng.standard_normal(e.shape)
    allowed = int(np.floor(alpha * (1 + n_boot) + 1e-9)) - 1
    reaching = done = 0
    # the replicates in batches (one filter pass per batch); a batch that decides the test
    # ends it, so a run the null law explains costs a few replicates
    for start in range(0, n_boot, STATE_SPACE_BOOT_BATCH):
        batch = sims[start : start + STATE_SPACE_BOOT_BATCH]
        for fit in _state_space_fits(t, batch, zeta_threshold):
            done += 1
            if fit is not None and 2.0 * (fit[0][0] - fit[1][0]) >= lr:
                reaching += 1
        if reaching > allowed:
            break
    return {"p_value": (1 + reaching) / (1 + n_boot), "replicates": done, "reaching": reaching}


def noise_sd(values: np.ndarray) -> float:
    """White-noise standard deviation from first differences (``bayes_grpo.metrics.noise_variance``, robust)."""
    from bayes_grpo.metrics import noise_variance

    return float(np.sqrt(noise_variance(np.asarray(values, dtype=float), robust=True)))


def has_trend(steps: np.ndarray, values: np.ndarray) -> bool:
    """Whether the series has a visible trend beyond noise (``bayes_grpo.metrics.has_trend``)."""
    from bayes_grpo.metrics import has_trend as _has_trend

    return bool(_has_trend(np.asarray(steps, dtype=float), np.asarray(values, dtype=float)))
