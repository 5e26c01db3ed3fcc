"""Bayes-factor machinery: SMC marginal likelihoods and Savage–Dickey density ratios.

Two independent routes to the Bayes factor ``BF01 = p(y | H0) / p(y | H1)`` of a nested
point hypothesis ``H0: delta = 0`` inside ``H1: delta ~ prior``:

* **SMC evidence.** ``pm.sample_smc`` tempers from the prior to the posterior; the
  product of the normalising constants of the incremental weights estimates the
  marginal likelihood ``p(y | H)``. Each chain is an independent estimate. We combine
  the chains by averaging their *evidences* (log-mean-exp of the per-chain log
  evidences; each chain's evidence estimate is unbiased, its log is not), and report the
  spread across chains as the Monte Carlo error: ``sd(log Z_c) / sqrt(n_chains)`` for
  the combined estimate. PyMC stores one value per tempering stage, padded with NaN
  (object arrays, ragged across chains); the final finite value of each chain is its
  log evidence.
* **Savage–Dickey.** When the nuisance prior of ``H1`` conditional on ``delta = 0``
  equals the prior of ``H0`` (true when ``delta`` is a priori independent of the
  nuisance parameters), ``BF01 = p(delta = 0 | y, H1) / p(delta = 0 | H1)``. The prior
  density at 0 is analytic for the Normal offset priors we use (or estimated from prior
  draws); the posterior density at 0 is estimated from posterior draws of ``delta``
  (shape ``(n_draws, d)``) by a multivariate Gaussian fit (default; works in several
  dimensions and is exact when the posterior is Gaussian, which it is asymptotically)
  or by a Gaussian kernel density estimate (Scott's bandwidth; reliable only for
  ``d <= 2`` and when 0 is not far in the tails). Its Monte Carlo error is the
  spread of the estimate across chains (batch means).

Both are tested against the analytic Bayes factor of a conjugate Normal model
(``tests/test_invariance_bayes_factor.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import logsumexp

#: Posterior-density estimators for Savage–Dickey.
DENSITY_METHODS: tuple[str, ...] = ("gaussian", "kde")


@dataclass
class Evidence:
    """Log marginal likelihood of one model from SMC.

    Attributes
    ----------
    log_ml
        Combined log evidence (log-mean-exp over chains).
    mc_error
        Monte Carlo standard error of ``log_ml``: ``sd(per_chain) / sqrt(n_chains)``
        (NaN with a single chain).
    per_chain
        Final log evidence of each chain, shape ``(n_chains,)``.
    idata
        The SMC InferenceData (posterior draws included), or None.
    """

    log_ml: float
    mc_error: float
    per_chain: np.ndarray
    idata: Any = field(default=None, repr=False)


def final_log_marginal_likelihood(sample_stats_values: Any) -> np.ndarray:
    """Final log evidence of each SMC chain from ``sample_stats["log_marginal_likelihood"]``.

    PyMC stores one value per tempering stage. When all chains ran the same number of
    stages the array has shape ``(chain, stage)`` (NaN-padded floats); when the stage
    counts differ it is *ragged*: an object array of shape ``(1, chain)`` whose elements
    are the per-chain lists of stage values. Both layouts are handled.

    Parameters
    ----------
    sample_stats_values
        The values of that variable.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_chains,)``: for each chain the last finite value; NaN when a chain has
        none.
    """
    values = np.asarray(sample_stats_values, dtype=object)
    if values.ndim == 0:
        values = values.reshape(1, 1)
    flat = list(values.ravel())
    if any(isinstance(x, list | tuple | np.ndarray) for x in flat):
        chains = flat  # ragged layout: one sequence per chain
    elif values.ndim == 1:
        chains = [values]
    else:
        chains = list(values.reshape(values.shape[0], -1))
    out = np.full(len(chains), np.nan)
    for c, chain in enumerate(chains):
        seq = _flatten_floats(chain)
        finite = seq[np.isfinite(seq)]
        if finite.size:
            out[c] = finite[-1]
    return out


def _flatten_floats(obj: Any) -> np.ndarray:
    items: list[float] = []

    def walk(x: Any) -> None:
        if isinstance(x, list | tuple | np.ndarray):
            for y in np.asarray(x, dtype=object).ravel():
                walk(y)
        elif x is None:
            items.append(np.nan)
        else:
            try:
                items.append(float(x))
            except (TypeError, ValueError):
                items.append(np.nan)

    walk(obj)
    return np.asarray(items, dtype=float)


def combine_chain_evidence(per_chain: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """``(log_ml, mc_error)`` from per-chain log evidences (NaN chains dropped).

    ``log_ml`` is the log of the mean evidence; ``mc_error = sd / sqrt(n)`` of the
    per-chain log evidences (NaN with fewer than two finite chains).
    """
    arr = np.asarray(per_chain, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        raise ValueError("SMC produced no finite log marginal likelihood in any chain")
    log_ml = float(logsumexp(arr) - np.log(arr.size))
    mc_error = float(np.std(arr, ddof=1) / np.sqrt(arr.size)) if arr.size > 1 else float("nan")
    return log_ml, mc_error


def smc_evidence(
    model: Any,
    *,
    draws: int = 1000,
    chains: int = 4,
    random_seed: int | None = 0,
    progressbar: bool = False,
    **smc_kwargs: Any,
) -> Evidence:
    """Log marginal likelihood of a PyMC model by sequential Monte Carlo.

    Parameters
    ----------
    model
        A ``pm.Model``.
    draws
        Particles per chain.
    chains
        Independent SMC runs (at least 2 to get a Monte Carlo error).
    random_seed
        Seed for reproducibility.
    smc_kwargs
        Passed to ``pm.sample_smc`` (e.g. ``threshold``, ``correlation_threshold``).
    """
    import pymc as pm

    if chains < 1 or draws < 2:
        raise ValueError(
            f"SMC needs chains >= 1 and draws >= 2, got chains={chains}, draws={draws}"
        )
    with model:
        idata = pm.sample_smc(
            draws=draws,
            chains=chains,
            cores=1,
            random_seed=random_seed,
            progressbar=progressbar,
            compute_convergence_checks=False,
            **smc_kwargs,
        )
    per_chain = final_log_marginal_likelihood(idata.sample_stats["log_marginal_likelihood"].values)
    log_ml, mc_error = combine_chain_evidence(per_chain)
    return Evidence(log_ml=log_ml, mc_error=mc_error, per_chain=per_chain, idata=idata)


def log_bf01_from_evidence(h0: Evidence, h1: Evidence) -> tuple[float, float]:
    """``(log BF01, Monte Carlo error)`` from the two evidences (errors add in quadrature)."""
    err = (
        float(np.hypot(h0.mc_error, h1.mc_error))
        if np.isfinite(h0.mc_error + h1.mc_error)
        else float("nan")
    )
    return h0.log_ml - h1.log_ml, err


def log_density_at(
    samples: np.ndarray, point: np.ndarray | None = None, *, method: str = "gaussian"
) -> float:
    """Log density of the distribution of ``samples`` at ``point`` (default: the origin).

    Parameters
    ----------
    samples
        Shape ``(n_draws,)`` or ``(n_draws, d)``.
    point
        Shape ``(d,)``; zeros by default.
    method
        ``"gaussian"`` (multivariate normal fit, mean and covariance of the draws) or
        ``"kde"`` (Gaussian kernel density estimate, Scott's bandwidth).
    """
    x = np.asarray(samples, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"samples must have shape (n_draws, d), got {x.shape}")
    x = x[np.all(np.isfinite(x), axis=1)]
    n, d = x.shape
    if n <= d + 1:
        raise ValueError(
            f"need more than d + 1 = {d + 1} finite draws to estimate a density, got {n}"
        )
    p = np.zeros(d) if point is None else np.asarray(point, dtype=float).reshape(d)
    if method == "gaussian":
        mean = x.mean(axis=0)
        cov = np.atleast_2d(np.cov(x, rowvar=False, ddof=1))
        return float(stats.multivariate_normal(mean=mean, cov=cov, allow_singular=False).logpdf(p))
    if method == "kde":
        kde = stats.gaussian_kde(x.T)
        return float(kde.logpdf(p[:, None])[0])
    raise ValueError(f"unknown density method {method!r}; expected one of {DENSITY_METHODS}")


def zero_in_support(samples: np.ndarray, *, min_beyond: int = 10) -> bool:
    """Whether the origin lies inside the bulk of ``samples`` (shape ``(n, d)``).

    True when the squared Mahalanobis distance of 0 from the draws' mean is below the
    chi-square quantile with ``min_beyond`` expected draws beyond it.
    """
    x = np.asarray(samples, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    x = x[np.all(np.isfinite(x), axis=1)]
    n, d = x.shape
    mean = x.mean(axis=0)
    cov = np.atleast_2d(np.cov(x, rowvar=False, ddof=1))
    m2 = float(mean @ np.linalg.solve(cov, mean))
    return bool(m2 < stats.chi2.ppf(max(1.0 - min_beyond / n, 0.5), d))


def normal_log_density_at_zero(scales: Sequence[float] | np.ndarray) -> float:
    """Log density at 0 of independent zero-mean Normal priors with the given scales."""
    s = np.asarray(scales, dtype=float).ravel()
    if np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"prior scales must be finite and positive, got {s}")
    return float(np.sum(stats.norm.logpdf(0.0, loc=0.0, scale=s)))


@dataclass
class SavageDickey:
    """Savage–Dickey log BF01 with its pieces.

    Attributes
    ----------
    log_bf01
        ``log p(delta=0 | y) - log p(delta=0)``.
    mc_error
        Spread of the estimate across chains (sd / sqrt(n_chains)); NaN with one chain.
    log_posterior_density
        ``log p(delta=0 | y)`` (all draws pooled).
    log_prior_density
        ``log p(delta=0)``.
    dim
        Number of offsets tested jointly.
    method
        Density estimator used.
    in_support
        Whether 0 lies inside the bulk of the posterior draws (squared Mahalanobis
        distance below the chi-square quantile that leaves 10 draws beyond it). When
        False the density at 0 is an extrapolation: the Gaussian fit is then only as good
        as the Gaussian shape of the posterior tail, and a KDE is meaningless. Only the
        sign and the order of magnitude of the Bayes factor should be read then.
    """

    log_bf01: float
    mc_error: float
    log_posterior_density: float
    log_prior_density: float
    dim: int
    method: str
    in_support: bool = True


def savage_dickey(
    posterior_draws: np.ndarray,
    *,
    log_prior_density: float | None = None,
    prior_draws: np.ndarray | None = None,
    method: str = "gaussian",
) -> SavageDickey:
    """Savage–Dickey density ratio for ``H0: delta = 0`` nested in ``H1``.

    Parameters
    ----------
    posterior_draws
        Draws of the offsets under ``H1``: shape ``(chain, draw, d)``, ``(n_draws, d)`` or
        ``(n_draws,)``. With a chain dimension the Monte Carlo error is the spread of the
        per-chain estimates.
    log_prior_density
        Analytic ``log p(delta = 0 | H1)`` (e.g. :func:`normal_log_density_at_zero`).
    prior_draws
        Alternatively, prior draws of ``delta`` (same trailing shape); the prior density
        at 0 is then estimated with the same ``method``.
    method
        ``"gaussian"`` or ``"kde"`` (see :func:`log_density_at`).
    """
    x = np.asarray(posterior_draws, dtype=float)
    if x.ndim == 3:
        per_chain_draws = list(x)
        pooled = x.reshape(-1, x.shape[-1])
    elif x.ndim in (1, 2):
        pooled = x if x.ndim == 2 else x[:, None]
        per_chain_draws = []
    else:
        raise ValueError(f"posterior draws must have 1 to 3 dims, got shape {x.shape}")
    if log_prior_density is None:
        if prior_draws is None:
            raise ValueError("give log_prior_density or prior_draws")
        pr = np.asarray(prior_draws, dtype=float)
        log_prior_density = log_density_at(pr.reshape(-1, pooled.shape[1]), method=method)
    log_post = log_density_at(pooled, method=method)
    per_chain = [
        log_density_at(c, method=method) for c in per_chain_draws if len(c) > c.shape[-1] + 1
    ]
    mc_error = (
        float(np.std(per_chain, ddof=1) / np.sqrt(len(per_chain)))
        if len(per_chain) > 1
        else float("nan")
    )
    return SavageDickey(
        in_support=zero_in_support(pooled),
        log_bf01=log_post - float(log_prior_density),
        mc_error=mc_error,
        log_posterior_density=log_post,
        log_prior_density=float(log_prior_density),
        dim=pooled.shape[1],
        method=method,
    )


def bayes_factor_words(log_bf01: float) -> str:
    """Jeffreys-style words for the evidence (natural-log Bayes factor in favour of H0)."""
    if not np.isfinite(log_bf01):
        return "not assessable"
    bf = abs(log_bf01)
    side = "H0 (invariance)" if log_bf01 > 0 else "H1 (G-dependence)"
    if bf < np.log(3):
        return "inconclusive (|BF| < 3)"
    if bf < np.log(10):
        return f"moderate evidence for {side}"
    if bf < np.log(100):
        return f"strong evidence for {side}"
    return f"decisive evidence for {side}"


__all__ = [
    "DENSITY_METHODS",
    "Evidence",
    "SavageDickey",
    "final_log_marginal_likelihood",
    "combine_chain_evidence",
    "smc_evidence",
    "log_bf01_from_evidence",
    "log_density_at",
    "normal_log_density_at_zero",
    "zero_in_support",
    "savage_dickey",
    "bayes_factor_words",
]
