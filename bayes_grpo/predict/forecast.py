"""Forecast a run in progress from its first steps, with earlier runs as the prior.

Design (how a posterior becomes a prior, and why it is fast)
-------------------------------------------------------------
The run is described by five unconstrained numbers

    u = (p*, R0, log w0, log zeta, log sigma)

(plateau, initial reward, natural frequency in rad/step, damping ratio, observation noise
sd) and its mean reward is the closed-form oscillator trajectory with ``M = 1``,
``C = 2 zeta w0``, ``K_eff = w0^2`` and ``v0 = 0`` (the same curve as the mechanistic
``(M_eff, C_eff, K_eff)``, which only fixes it up to the common scale of the three
coefficients). Observations are ``y_t ~ Normal(p(t), sigma)``.

*Prior.* A Gaussian on ``u``:

* from a fitted posterior (:func:`prior_from_posterior`): the hierarchical model's
  ``coefficient_draws`` for the new run's hyperparameters (a run of an already fitted
  LLM, or a new LLM through the population level) are mapped to ``u`` draw by draw, and
  their mean and covariance are the prior (moment matching on the unconstrained scale);
* from earlier runs directly (:func:`prior_from_runs`): each earlier run is fitted alone
  (the same Laplace fit as below, weak prior) and the prior is the spread of their fitted
  ``u`` plus their mean posterior covariance (an empirical-Bayes population);
* weak and data-scaled (:func:`default_prior`) when nothing else is given.

*Posterior of the run given its prefix.* Laplace approximation (mode of the log
posterior by L-BFGS from several starts, covariance from the finite-difference Hessian)
used as the proposal of importance sampling (multivariate Student-t, 4 degrees of
freedom), with Pareto-smoothed weights (PSIS, ``arviz.psislw``): the draws are exact
posterior draws up to the importance weights, and the Pareto ``k`` says when the
approximation is not to be trusted (``k > 0.7``). One forecast costs a few tens of
milliseconds for runs of a few hundred steps; :class:`RunForecaster` warm-starts the
optimiser from the previous mode as steps arrive.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from scipy import optimize, stats

from bayes_grpo.constants import HDI_PROB, STEP_DIM
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.predict.summary import DEFAULT_HDI_PROBS, summarise_draws

#: Names of the five unconstrained parameters, in order.
PARAM_NAMES: tuple[str, ...] = ("plateau", "initial_reward", "log_w0", "log_zeta", "log_sigma")
#: Observation models of the forecast.
LIKELIHOODS: tuple[str, ...] = ("state_space", "iid")
#: Pareto k above which the importance-sampling posterior is flagged unreliable.
PARETO_K_WARN: float = 0.7
#: Smallest prior sd of log sigma in a prior built from earlier runs (see prior_from_runs).
RUN_PRIOR_LOG_SIGMA_SD: float = 0.5
#: Degrees of freedom of the Student-t proposal.
PROPOSAL_DF: float = 4.0
#: Prior sd floor on each coordinate of u (keeps a too-confident population prior usable).
PRIOR_SD_FLOOR: np.ndarray = np.array([1e-3, 1e-3, 0.05, 0.05, 0.05])


class ForecastError(ValueError):
    """A forecast cannot be made (too few steps, degenerate data, bad prior)."""


@dataclass(frozen=True)
class GaussianPrior:
    """Gaussian prior on ``u = (p*, R0, log w0, log zeta, log sigma)``.

    Attributes
    ----------
    mean
        ``(5,)``.
    cov
        ``(5, 5)`` positive definite.
    source
        Where it came from, in words (stored in forecast outputs).
    """

    mean: np.ndarray
    cov: np.ndarray
    source: str = ""

    def __post_init__(self) -> None:
        mean = np.asarray(self.mean, dtype=float)
        cov = np.asarray(self.cov, dtype=float)
        if mean.shape != (5,) or cov.shape != (5, 5):
            raise ForecastError(
                f"prior needs mean (5,) and cov (5, 5); got {mean.shape}, {cov.shape}"
            )
        if not (np.isfinite(mean).all() and np.isfinite(cov).all()):
            raise ForecastError(f"prior from {self.source or 'caller'} has non-finite moments")
        cov = (cov + cov.T) / 2.0
        sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        floor = np.maximum(sd, PRIOR_SD_FLOOR)
        corr = cov / np.outer(np.where(sd > 0, sd, 1.0), np.where(sd > 0, sd, 1.0))
        np.fill_diagonal(corr, 1.0)
        corr = 0.98 * corr + 0.02 * np.eye(5)  # shrink correlations: keeps cov well conditioned
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "cov", corr * np.outer(floor, floor))

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov))

    def to_dict(self) -> dict[str, object]:
        return {
            "mean": dict(zip(PARAM_NAMES, self.mean.tolist())),
            "sd": dict(zip(PARAM_NAMES, self.sd.tolist())),
            "source": self.source,
        }


def mean_curve(u: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Mean reward ``p(t)`` for parameter rows ``u`` (``(n, 5)`` or ``(5,)``) at steps ``t``."""
    u = np.atleast_2d(u)
    w0 = np.exp(u[:, 2:3])
    zeta = np.exp(u[:, 3:4])
    with np.errstate(over="ignore", invalid="ignore"):
        return reward_trajectory(
            np.asarray(t, dtype=float)[None, :], 1.0, 2.0 * zeta * w0, w0 * w0, u[:, 0:1], u[:, 1:2]
        )


def _log_lik(u: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
    u = np.atleast_2d(u)
    mu = mean_curve(u, t)
    sigma = np.exp(u[:, 4:5])
    z = (y[None, :] - mu) / sigma
    ll = -0.5 * np.sum(z * z, axis=1) - y.size * (u[:, 4] + 0.5 * np.log(2 * np.pi))
    return np.where(np.isfinite(ll), ll, -np.inf)


def _log_prior(u: np.ndarray, prior: GaussianPrior) -> np.ndarray:
    return stats.multivariate_normal(prior.mean, prior.cov).logpdf(np.atleast_2d(u)).reshape(-1)


def _data_scale(y: np.ndarray) -> tuple[float, float]:
    """(typical noise sd from first differences, range of a smoothed curve)."""
    y = np.asarray(y, dtype=float)
    diffs = np.diff(y)
    noise = float(np.std(diffs) / np.sqrt(2.0)) if diffs.size > 1 else 0.0
    span = float(np.ptp(y)) if y.size > 1 else 0.0
    scale = max(span, noise, 1e-6 * max(1.0, float(np.abs(y).max(initial=0.0))), 1e-9)
    return max(noise, scale * 1e-3), scale


def default_prior(
    t: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    horizon: float | None = None,
) -> GaussianPrior:
    """Weak, data-scaled prior for a run with no earlier runs to learn from.

    ``p*`` centred on the last tenth of the prefix with sd of twice the prefix's range,
    ``R0`` on its first tenth, ``w0`` centred on ``4 / horizon`` (a rise spread over the
    run; ``horizon`` defaults to the last step seen) with a factor ~e^1.5 either way,
    ``zeta`` centred on 1 (sd 1 in log), ``sigma`` on the first-difference noise (sd 1 in log).
    """
    t = np.asarray(t, dtype=float)
    y = np.asarray(y, dtype=float)
    if y.size < 3:
        raise ForecastError(f"need at least 3 observed steps for a forecast, got {y.size}")
    noise, span = _data_scale(y)
    k = max(1, y.size // 10)
    horizon = float(horizon if horizon is not None else max(t.max(), 1.0))
    mean = np.array(
        [y[-k:].mean(), y[:k].mean(), np.log(4.0 / max(horizon, 1.0)), 0.0, np.log(noise)]
    )
    sd = np.array([2.0 * span + 2.0 * noise, span + 2.0 * noise, 1.5, 1.0, 1.0])
    return GaussianPrior(mean, np.diag(sd**2), source="default (weak, scaled to the prefix)")


def u_from_coefficients(
    plateau: np.ndarray,
    initial_reward: np.ndarray,
    mass: np.ndarray,
    damping: np.ndarray,
    k_eff: np.ndarray,
    sigma: np.ndarray,
) -> np.ndarray:
    """Map oscillator draws ``(p*, R0, M, C, K_eff, sigma)`` to ``u`` rows ``(n, 5)``.

    Draws with ``C <= 0`` or non-positive ``K_eff``/``M`` (unstable or degenerate) have no
    ``log zeta`` and are dropped (NaN rows).
    """
    mass, damping, k_eff = (np.asarray(v, dtype=float) for v in (mass, damping, k_eff))
    with np.errstate(invalid="ignore", divide="ignore"):
        w0 = np.sqrt(k_eff / mass)
        zeta = damping / (2.0 * np.sqrt(mass * k_eff))
        u = np.column_stack([plateau, initial_reward, np.log(w0), np.log(zeta), np.log(sigma)])
    u[~np.isfinite(u).all(axis=1)] = np.nan
    return u


def prior_from_draws(
    u_draws: np.ndarray, *, source: str = "posterior draws", inflate: float = 1.0
) -> GaussianPrior:
    """Moment-matched Gaussian prior from ``(n, 5)`` draws of ``u`` (NaN rows ignored).

    ``inflate`` multiplies the covariance (>1 to hedge against a population that is too
    narrow for the new run).
    """
    u = np.asarray(u_draws, dtype=float)
    u = u[np.isfinite(u).all(axis=1)]
    if u.shape[0] < 10:
        raise ForecastError(
            f"{source}: only {u.shape[0]} usable (stable, finite) draws; cannot form a prior"
        )
    return GaussianPrior(u.mean(axis=0), inflate * np.cov(u, rowvar=False), source=source)


def prior_from_posterior(
    posterior: object,
    *,
    learning_rate: float,
    momentum: float,
    momentum_convention: str,
    k_ref: float,
    group_size: float,
    model: str | None = None,
    model_size: float | None = None,
    inflate: float = 1.0,
    fallback: GaussianPrior | None = None,
) -> GaussianPrior:
    """Prior for a new run from a fitted hierarchical model (a model object or a saved file).

    Uses ``GRPODynamicsModel.coefficient_draws`` for the run's hyperparameters: for a model
    already fitted that LLM's curvature posterior, for a new one the population level. A
    new LLM has no reward scale in the fit (plateau, R0 and noise are NaN): then the
    dynamics (``log w0, log zeta``) come from the posterior and the reward-valued
    coordinates from ``fallback`` (e.g. :func:`default_prior` of the run's prefix).
    """
    fitted = _load_model(posterior)
    draws = fitted.coefficient_draws(
        learning_rate=learning_rate,
        momentum=momentum,
        momentum_convention=momentum_convention,
        k_ref=k_ref,
        group_size=group_size,
        model=model,
        model_size=model_size,
    )
    flat = {
        name: np.asarray(draws[name].values, dtype=float).reshape(-1)
        for name in ("plateau", "initial_reward", "M_eff", "C_eff", "K_eff", "sigma")
    }
    u = u_from_coefficients(
        flat["plateau"],
        flat["initial_reward"],
        flat["M_eff"],
        flat["C_eff"],
        flat["K_eff"],
        flat["sigma"],
    )
    label = f"posterior {posterior if isinstance(posterior, str | os.PathLike) else type(posterior).__name__}"
    source = f"{label} (model={model or 'new, population level'})"
    if not np.isfinite(flat["plateau"]).any():
        if fallback is None:
            raise ForecastError(
                f"{source}: a new LLM has no reward scale in the fit; give a fallback prior for plateau, R0 and noise"
            )

        u = np.column_stack(
            [
                np.full(len(u), fallback.mean[0]),
                np.full(len(u), fallback.mean[1]),
                np.log(np.sqrt(flat["K_eff"] / flat["M_eff"])),
                np.log(flat["C_eff"] / (2.0 * np.sqrt(flat["M_eff"] * flat["K_eff"]))),
                np.full(len(u), fallback.mean[4]),
            ]
        )
        dyn = prior_from_draws(u, source=source, inflate=inflate)
        mean = fallback.mean.copy()
        mean[2:4] = dyn.mean[2:4]
        cov = fallback.cov.copy()
        cov[2:4, :] = 0.0
        cov[:, 2:4] = 0.0
        cov[2:4, 2:4] = dyn.cov[2:4, 2:4]
        return GaussianPrior(mean, cov, source=source + " dynamics; reward scale from the prefix")
    return prior_from_draws(u, source=source, inflate=inflate)


def prior_from_runs(
    runs: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    source: str = "earlier runs",
    horizon: float | None = None,
) -> GaussianPrior:
    """Empirical-Bayes prior from earlier complete runs ``[(t, y), ...]``.

    Each run is fitted alone under :func:`default_prior`; the prior mean is the mean of
    their modes and the covariance the spread of the modes plus their mean Laplace
    covariance (between-run plus within-run uncertainty). Needs at least 2 runs.
    """
    modes, covs = [], []
    for t, y in runs:
        t = np.asarray(t, dtype=float)
        y = np.asarray(y, dtype=float)
        ok = np.isfinite(t) & np.isfinite(y)
        if ok.sum() < 3:
            continue
        mode, cov = _laplace_fit_cached(t[ok], y[ok], horizon)
        modes.append(mode)
        covs.append(cov)
    if len(modes) < 2:
        raise ForecastError(
            f"{source}: need at least 2 earlier runs with 3+ finite steps, got {len(modes)}"
        )
    modes_arr = np.array(modes)
    cov = np.cov(modes_arr, rowvar=False) + np.mean(covs, axis=0)
    # The runs are fitted with i.i.d. residuals, whose sd underestimates the total
    # stationary sd when the run wanders (process noise is partly absorbed by the curve):
    # keep the log-sigma prior at least RUN_PRIOR_LOG_SIGMA_SD wide so the data can raise it.
    sd = np.sqrt(np.diag(cov))
    widen = max(RUN_PRIOR_LOG_SIGMA_SD / sd[4], 1.0)
    cov[4, :] *= widen
    cov[:, 4] *= widen
    return GaussianPrior(
        modes_arr.mean(axis=0), cov, source=f"{source} ({len(modes)} runs, empirical Bayes)"
    )


_LAPLACE_CACHE: dict[tuple[bytes, bytes, float | None], tuple[np.ndarray, np.ndarray]] = {}


def _laplace_fit_cached(
    t: np.ndarray, y: np.ndarray, horizon: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Mode and Laplace covariance of one complete run under the weak prior (memoised:
    leave-one-out priors over a run set refit the same runs many times)."""
    key = (t.tobytes(), y.tobytes(), horizon)
    if key not in _LAPLACE_CACHE:
        if len(_LAPLACE_CACHE) > 4096:
            _LAPLACE_CACHE.clear()
        post = fit_run(
            t,
            y,
            default_prior(t, y, horizon=horizon),
            n_draws=10,
            n_proposal=200,
            rng=0,
            likelihood="iid",
        )
        _LAPLACE_CACHE[key] = (post.mode, post.cov)
    return _LAPLACE_CACHE[key]


def population_prior_for_run(
    runset: xr.Dataset,
    run_id: str,
    *,
    posterior: object | None = None,
    use_runs: bool = True,
    prefix: tuple[np.ndarray, np.ndarray] | None = None,
    horizon: float | None = None,
    same_model_only: bool = False,
) -> tuple[GaussianPrior | None, str]:
    """The prior for forecasting ``run_id`` of a run set, and a note on how it was chosen.

    With ``posterior`` (fitted model or file): :func:`prior_from_posterior` at the run's
    hyperparameters, for its LLM if that LLM is in the fit, else for a new LLM. Otherwise,
    when ``use_runs``: :func:`prior_from_runs` on the other runs (those of the same LLM if
    there are at least two, else all others). Otherwise None (the weak default prior).
    ``prefix`` (the run's observed ``(t, y)``) supplies the reward scale when the
    posterior's LLM is new to the fit; ``horizon`` is the last step to be forecast.
    ``same_model_only``: never pool runs of other LLMs (their reward scales may differ).
    """
    from bayes_grpo.runset import REWARD_VAR, run_coords

    coords = run_coords(runset, run_id)
    if posterior is not None:
        needed = ["learning_rate", "momentum", "k_ref", "group_size"]
        missing = [k for k in needed if not np.isfinite(coords[k])]
        if missing or not coords["momentum_convention"]:
            missing += [] if coords["momentum_convention"] else ["momentum_convention"]
            raise ForecastError(
                f"run {run_id!r} lacks {missing}; a posterior prior needs the run's hyperparameters (set them in the run set or use the run-based prior)"
            )
        kw = {k: coords[k] for k in needed}
        kw["momentum_convention"] = str(coords["momentum_convention"])
        size = coords["model_size"] if np.isfinite(coords["model_size"]) else None
        fallback = None
        if prefix is not None:
            fallback = default_prior(prefix[0], prefix[1], horizon=horizon)
        try:
            prior = prior_from_posterior(
                posterior,
                model=str(coords["model"]) or None,
                model_size=size,
                fallback=fallback,
                **kw,
            )
            return prior, ""
        except (ValueError, KeyError) as exc:
            prior = prior_from_posterior(
                posterior, model=None, model_size=size, fallback=fallback, **kw
            )
            return (
                prior,
                f"LLM {coords['model']!r} not usable in the fit ({exc}); used the population level",
            )
    if not use_runs:
        return None, ""
    others = [str(r) for r in runset["run"].values if str(r) != run_id]
    same = [r for r in others if str(runset["model"].sel(run=r).values) == coords["model"]]
    chosen = same if (len(same) >= 2 or same_model_only) else others
    if len(chosen) < 2:
        return None, "fewer than 2 other runs: weak default prior"
    steps = runset["step"].values.astype(float)
    runs = [(steps, runset[REWARD_VAR].sel(run=r).values.astype(float)) for r in chosen]
    try:
        prior = prior_from_runs(
            runs,
            source=f"{len(chosen)} other runs" + (" of the same LLM" if chosen is same else ""),
            horizon=float(steps.max()) if horizon is None else horizon,
        )
    except ForecastError as exc:
        return None, f"run-based prior failed ({exc}); weak default prior"
    return prior, ""


def _load_model(posterior: object) -> object:
    if isinstance(posterior, str | os.PathLike):
        from bayes_grpo.model import GRPODynamicsModel  # lazy: the model area is heavy to import

        return GRPODynamicsModel.load(posterior)
    if not hasattr(posterior, "coefficient_draws"):
        raise ForecastError(
            f"{type(posterior).__name__} is neither a posterior file nor a fitted model with coefficient_draws"
        )
    return posterior


# --------------------------------------------------------------------------- Laplace + IS


@dataclass
class RunPosterior:
    """Importance-sampled posterior of one run's ``u`` given its observed steps."""

    draws: np.ndarray  # (n_draws, 5), equally weighted (resampled)
    mode: np.ndarray  # (5,)
    cov: np.ndarray  # (5, 5) Laplace covariance
    pareto_k: float
    ess: float
    n_obs: int
    log_post_mode: float
    warnings: list[str] = field(default_factory=list)
    likelihood: str = "iid"
    t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # observed steps
    y: np.ndarray = field(default_factory=lambda: np.zeros(0))  # observed rewards


def _numeric_hessian(f, x: np.ndarray, h: np.ndarray) -> np.ndarray:
    n = x.size
    hess = np.empty((n, n))
    f0 = f(x)
    for i in range(n):
        for j in range(i, n):
            ei = np.zeros(n)
            ej = np.zeros(n)
            ei[i] = h[i]
            ej[j] = h[j]
            if i == j:
                val = (f(x + ei) - 2 * f0 + f(x - ei)) / h[i] ** 2
            else:
                val = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (
                    4 * h[i] * h[j]
                )
            hess[i, j] = hess[j, i] = val
    return hess


def _starts(
    prior: GaussianPrior, t: np.ndarray, y: np.ndarray, warm: np.ndarray | None
) -> list[np.ndarray]:
    starts = [prior.mean.copy()]
    if warm is not None:
        starts.append(np.asarray(warm, dtype=float))
    noise, span = _data_scale(y)
    k = max(1, y.size // 10)
    tmax = max(float(t.max()), 1.0)
    for w_scale, zeta in ((4.0, 1.5), (8.0, 0.5), (2.0, 3.0)):
        s = prior.mean.copy()
        s[0] = y[-k:].mean()
        s[1] = y[:k].mean()
        s[2] = np.log(w_scale / tmax)
        s[3] = np.log(zeta)
        s[4] = np.log(noise)
        starts.append(s)
    return starts


def fit_run(
    t: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    prior: GaussianPrior,
    *,
    n_draws: int = 1000,
    n_proposal: int = 4000,
    rng: np.random.Generator | int | None = 0,
    warm_start: np.ndarray | None = None,
    likelihood: str = "state_space",
) -> RunPosterior:
    """Posterior of one run's ``u`` given observed ``(t, y)``: Laplace proposal + PSIS.

    Parameters
    ----------
    t, y
        Observed steps and rewards (NaN rewards are dropped), at least 3.
    prior
        :class:`GaussianPrior` on ``u``.
    n_draws
        Equally weighted draws returned (resampled from the weighted proposal draws).
    n_proposal
        Proposal draws for importance sampling.
    rng
        Generator or seed.
    warm_start
        Previous mode, tried as an extra optimiser start.
    likelihood
        ``"state_space"`` (default: SDE + measurement noise, Kalman filter; rows get a 6th
        coordinate ``logit rho``, :mod:`bayes_grpo.predict.statespace`) or ``"iid"``
        (independent Gaussian residuals around the mean trajectory).
    """
    import arviz as az

    rng = np.random.default_rng(rng)
    t = np.asarray(t, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(t) & np.isfinite(y)
    t, y = t[ok], y[ok]
    if y.size < 3:
        raise ForecastError(f"need at least 3 observed steps with a finite reward, got {y.size}")
    if likelihood not in LIKELIHOODS:
        raise ForecastError(f"unknown likelihood {likelihood!r}; expected one of {LIKELIHOODS}")
    starts = _starts(prior, t, y, None if warm_start is None else np.asarray(warm_start)[:5])
    _, span = _data_scale(y)
    steps5 = np.array([1e-3 * span, 1e-3 * span, 1e-3, 1e-3, 1e-3])
    mean5, prec5 = prior.mean, np.linalg.inv(prior.cov)
    mode, fun = _optimise(_log_lik, mean5, prec5, t, y, starts)
    if likelihood == "iid":
        mean, prec, loglik, steps = mean5, prec5, _log_lik, steps5
    else:
        from bayes_grpo.predict import statespace

        mean = np.append(mean5, 0.0)
        prec = np.zeros((6, 6))
        prec[:5, :5] = prec5
        prec[5, 5] = 1.0 / statespace.RHO_PRIOR_SD**2
        loglik = statespace.log_lik
        steps = np.append(steps5, 1e-3)
        ss_starts = [np.append(mode, 0.0), np.append(mode, -2.0), np.append(mean5, 0.0)]
        if warm_start is not None and np.size(warm_start) == 6:
            ss_starts.append(np.asarray(warm_start, dtype=float))
        mode, fun = _optimise(loglik, mean, prec, t, y, ss_starts)
    cov_prior = np.linalg.inv(prec)

    def neg_log_post(u: np.ndarray) -> float:
        d = u - mean
        with np.errstate(all="ignore"):
            val = float(-loglik(u[None, :], t, y)[0] + 0.5 * d @ prec @ d)
        return val if np.isfinite(val) else 1e300

    notes: list[str] = []
    hess = _numeric_hessian(neg_log_post, mode, h=steps)
    hess = (hess + hess.T) / 2
    if not np.isfinite(hess).all() or np.abs(hess).max() > 1e200:
        notes.append("the Hessian at the mode is not finite; the prior covariance is the proposal")
        hess = prec.copy()
    evals, evecs = np.linalg.eigh(hess)
    floor = 1.0 / np.max(np.diag(cov_prior))
    # keep the proposal well conditioned (condition number <= 1e10)
    evals = np.clip(np.nan_to_num(evals, nan=floor), floor * 1e-3, floor * 1e7)
    cov = (evecs / evals) @ evecs.T
    cov = (cov + cov.T) / 2
    prior_dist = stats.multivariate_normal(mean, cov_prior)
    # Student-t proposal around the mode; widened when the Pareto k says it is too narrow.
    best_is = None
    for widen in (1.0, 2.0, 4.0):
        try:
            proposal = stats.multivariate_t(
                loc=mode, shape=cov * widen**2, df=PROPOSAL_DF, seed=rng
            )
        except (np.linalg.LinAlgError, ValueError):
            if "the Laplace covariance is degenerate" not in notes:
                notes.append(
                    "the Laplace covariance is degenerate; the prior covariance is the proposal"
                )
            cov = cov_prior.copy()
            proposal = stats.multivariate_t(
                loc=mode, shape=cov * widen**2, df=PROPOSAL_DF, seed=rng, allow_singular=True
            )
        prop = np.atleast_2d(proposal.rvs(size=n_proposal))
        logw = loglik(prop, t, y) + prior_dist.logpdf(prop) - proposal.logpdf(prop)
        finite = np.isfinite(logw)
        if finite.sum() < 10:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lw, k = az.psislw(logw[finite].copy())
        k = float(np.asarray(k))
        if best_is is None or k < best_is[3]:
            best_is = (prop, finite, lw, k)
        if k <= PARETO_K_WARN:
            break
    if best_is is None:
        raise ForecastError(
            "importance sampling failed: almost every proposal draw has zero posterior density"
        )
    prop, finite, lw, k = best_is
    weights = np.zeros(n_proposal)
    weights[finite] = np.exp(lw - np.max(lw))
    weights /= weights.sum()
    ess = float(1.0 / np.sum(weights**2))
    if k > PARETO_K_WARN:
        notes.append(
            f"importance sampling unreliable: Pareto k = {k:.2f} > {PARETO_K_WARN} (ESS {ess:.0f}); "
            "the posterior is far from Gaussian (multimodal or prior-data conflict)"
        )
    idx = rng.choice(n_proposal, size=n_draws, replace=True, p=weights)
    return RunPosterior(
        draws=prop[idx],
        mode=mode,
        cov=cov,
        pareto_k=k,
        ess=ess,
        n_obs=int(y.size),
        log_post_mode=-float(fun),
        warnings=notes,
        likelihood=likelihood,
        t=t,
        y=y,
    )


def _optimise(
    loglik, mean: np.ndarray, prec: np.ndarray, t: np.ndarray, y: np.ndarray, starts
) -> tuple[np.ndarray, float]:
    """Mode of ``loglik + Gaussian prior`` by BFGS from several starts (batched FD gradient)."""
    dim = mean.size
    eye = np.eye(dim) * 1e-6

    def rows_value(u: np.ndarray) -> np.ndarray:
        d = np.atleast_2d(u) - mean
        val = -loglik(u, t, y) + 0.5 * np.einsum("ni,ij,nj->n", d, prec, d)
        return np.where(np.isfinite(val), val, 1e300)

    def value_and_grad(u: np.ndarray) -> tuple[float, np.ndarray]:
        # one batched evaluation: the point and central differences in each coordinate
        vals = rows_value(np.vstack([u, u + eye, u - eye]))
        return float(vals[0]), (vals[1 : dim + 1] - vals[dim + 1 :]) / 2e-6

    best = None
    for s0 in starts:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            res = optimize.minimize(
                value_and_grad, s0, jac=True, method="BFGS", options={"gtol": 1e-6, "maxiter": 400}
            )
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    return best.x, float(best.fun)


def forecast_from_posterior(
    post: RunPosterior,
    steps: Sequence[float] | np.ndarray,
    *,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    rng: np.random.Generator | int | None = 0,
    attrs: Mapping[str, object] | None = None,
) -> xr.Dataset:
    """Bands, milestones, regime and stop step at ``steps`` from a :class:`RunPosterior`."""
    rng = np.random.default_rng(rng)
    steps = np.asarray(steps, dtype=float)
    u = post.draws
    mean = mean_curve(u, steps)
    sigma = np.exp(u[:, 4:5])
    obs = mean + sigma * rng.standard_normal(mean.shape)
    point = mean.copy()
    if post.likelihood == "state_space" and post.t.size:
        from bayes_grpo.predict import statespace

        future = steps > post.t.max()
        if future.any():
            obs[:, future], point[:, future] = statespace.forecast_paths(
                u, post.t, post.y, steps[future], rng
            )
    w0, zeta = np.exp(u[:, 2]), np.exp(u[:, 3])
    params = {
        "plateau": u[:, 0],
        "initial_reward": u[:, 1],
        "w0": w0,
        "zeta": zeta,
        "sigma": np.exp(u[:, 4]),
    }
    if u.shape[1] == 6:
        params["process_share"] = 1.0 / (1.0 + np.exp(-u[:, 5]))
    all_attrs = {
        "likelihood": post.likelihood,
        "pareto_k": post.pareto_k,
        "ess": post.ess,
        "n_observed": post.n_obs,
        "warnings": post.warnings,
    }
    all_attrs.update(attrs or {})
    return summarise_draws(
        steps,
        mean,
        obs,
        plateau=u[:, 0],
        initial_reward=u[:, 1],
        zeta=zeta,
        damping=2 * zeta * w0,
        hdi_probs=hdi_probs,
        stop_threshold=stop_threshold,
        parameters=params,
        attrs=all_attrs,
        point_draws=point,
    )


def forecast_run(
    t: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    horizon_steps: Sequence[float] | np.ndarray,
    *,
    prior: GaussianPrior | None = None,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    n_draws: int = 1000,
    likelihood: str = "state_space",
    rng: np.random.Generator | int | None = 0,
    attrs: Mapping[str, object] | None = None,
) -> xr.Dataset:
    """Forecast a run from its observed prefix ``(t, y)`` over ``horizon_steps``.

    Returns the dataset of :func:`bayes_grpo.predict.summary.summarise_draws` (bands of the
    mean trajectory and of the observed reward, milestones, regime, stop step) with the
    attributes ``pareto_k``, ``ess``, ``n_observed``, ``upto_step``, ``prior`` and ``warnings``.
    """
    rng = np.random.default_rng(rng)
    t = np.asarray(t, dtype=float)
    horizon_steps = np.asarray(horizon_steps, dtype=float)
    if prior is None:
        prior = default_prior(t, y, horizon=float(horizon_steps.max()))
    post = fit_run(t, y, prior, n_draws=n_draws, rng=rng, likelihood=likelihood)
    extra = {"upto_step": float(np.nanmax(t)), "prior": prior.to_dict()}
    extra.update(attrs or {})
    return forecast_from_posterior(
        post,
        horizon_steps,
        hdi_probs=hdi_probs,
        stop_threshold=stop_threshold,
        rng=rng,
        attrs=extra,
    )


class RunForecaster:
    """Forecast that is updated as the steps of a run arrive.

    >>> fc = RunForecaster(prior, horizon_steps=np.arange(500))   # doctest: +SKIP
    >>> fc.update(steps_so_far, rewards_so_far); ds = fc.forecast()  # doctest: +SKIP

    Each :meth:`update` refits the run's posterior on every step seen so far (the prior
    stays the population prior, so nothing is counted twice), warm-starting from the
    previous mode.
    """

    def __init__(
        self,
        prior: GaussianPrior | None,
        horizon_steps: Sequence[float] | np.ndarray,
        *,
        hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
        stop_threshold: float | None = None,
        n_draws: int = 1000,
        seed: int = 0,
        likelihood: str = "state_space",
    ) -> None:
        self.prior = prior
        self.likelihood = likelihood
        self.horizon_steps = np.asarray(horizon_steps, dtype=float)
        self.hdi_probs = tuple(hdi_probs)
        self.stop_threshold = stop_threshold
        self.n_draws = n_draws
        self.seed = seed
        self._t = np.empty(0)
        self._y = np.empty(0)
        self.posterior: RunPosterior | None = None
        self.history: list[dict[str, object]] = []

    def update(
        self, t: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
    ) -> RunPosterior:
        """Add observed steps (new steps appended, repeated steps overwritten) and refit."""
        t = np.asarray(t, dtype=float)
        y = np.asarray(y, dtype=float)
        merged = dict(zip(self._t.tolist(), self._y.tolist()))
        merged.update(zip(t.tolist(), y.tolist()))
        order = sorted(merged)
        self._t = np.array(order)
        self._y = np.array([merged[s] for s in order])
        prior = self.prior or default_prior(
            self._t, self._y, horizon=float(self.horizon_steps.max())
        )
        warm = self.posterior.mode if self.posterior is not None else None
        self.posterior = fit_run(
            self._t,
            self._y,
            prior,
            n_draws=self.n_draws,
            rng=self.seed + len(self._t),
            warm_start=warm,
            likelihood=self.likelihood,
        )
        self._prior_used = prior
        return self.posterior

    def forecast(self) -> xr.Dataset:
        """Forecast dataset from the current posterior (see :func:`forecast_run`)."""
        if self.posterior is None:
            raise ForecastError("no steps observed yet; call update() first")
        ds = forecast_from_posterior(
            self.posterior,
            self.horizon_steps,
            hdi_probs=self.hdi_probs,
            stop_threshold=self.stop_threshold,
            rng=self.seed,
            attrs={"upto_step": float(self._t.max()), "prior": self._prior_used.to_dict()},
        )
        self.history.append(
            {
                "upto_step": float(self._t.max()),
                "stop_step": ds.attrs["stop_step"],
                "regime": ds.attrs["regime"],
                "pareto_k": ds.attrs["pareto_k"],
            }
        )
        return ds


def coverage(y: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Fraction of finite ``y`` inside ``[lower, upper]`` (NaN when none is finite)."""
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(y)
    if not ok.any():
        return float("nan")
    return float(np.mean((y[ok] >= np.asarray(lower)[ok]) & (y[ok] <= np.asarray(upper)[ok])))


def forecast_band(
    ds: xr.Dataset, steps: np.ndarray, *, kind: str = "obs", hdi_prob: float = HDI_PROB
) -> tuple[np.ndarray, np.ndarray]:
    """Band of a forecast dataset interpolated at ``steps`` (exact at its own steps)."""
    from bayes_grpo.predict.summary import band

    lo, hi = band(ds, kind=kind, hdi_prob=hdi_prob)
    grid = ds[STEP_DIM].values
    return np.interp(steps, grid, lo), np.interp(steps, grid, hi)


__all__ = [
    "PARAM_NAMES",
    "ForecastError",
    "GaussianPrior",
    "RunPosterior",
    "RunForecaster",
    "coverage",
    "default_prior",
    "fit_run",
    "forecast_band",
    "forecast_from_posterior",
    "forecast_run",
    "mean_curve",
    "prior_from_draws",
    "prior_from_posterior",
    "prior_from_runs",
    "population_prior_for_run",
    "u_from_coefficients",
]
