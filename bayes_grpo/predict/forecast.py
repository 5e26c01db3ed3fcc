"""Forecast a run in progress from its first steps, with earlier runs as the prior.

Design (how a posterior becomes a prior, and why it is fast)
-------------------------------------------------------------
The run is described by six unconstrained numbers

    u = (p*, R0, log w0, log zeta, log sigma, log onset)

(plateau, initial reward, natural frequency in rad/step, damping ratio, observation noise
sd, onset step ``t0``) and its mean reward is the closed-form oscillator trajectory with
``M = 1``, ``C = 2 zeta w0``, ``K_eff = w0^2`` and ``v0 = 0`` (the same curve as the
mechanistic ``(M_eff, C_eff, K_eff)``, which only fixes it up to the common scale of the
three coefficients), run on the clock ``tau = max(t - t0, 0)``: the reward is held at
``R0`` until the onset ``t0``. The onset is the delay before any learning signal: with a
binary reward and a policy that almost never succeeds, every group's rewards are equal,
the group-normalised advantages vanish and the update is ~0 for a run-dependent number of
steps (the tiny-model TRL runs sit flat for 50-150 steps); the oscillator has no such phase
(its slow start is quadratic, ``e'(0) = 0``), so without ``t0`` a flat prefix is read as the
approach to a low plateau. ``t0 -> 0`` is the plain oscillator; a prior with only the first
five coordinates (e.g. from the hierarchical model, which has no onset) gets
``log t0 ~ Normal(NO_ONSET_PRIOR)``, i.e. ``t0`` of about a step. Observations are
``y_t ~ Normal(p(t), sigma^2 h(p(t)))``: ``h = 1`` by default; for a bounded reward (an
accuracy in ``[0, 1]``: pass ``reward_bounds``) ``h`` is the binomial-like shape of
:func:`noise_shape` (sampling noise of a success rate is largest mid-range and small near
0 and 1), so a prefix logged near 0 does not set the noise of the rise, and one logged
mid-range does not set the noise at a plateau near 1; a reward exactly at a bound (no success
yet) is censored, ``P(latent <= lo)`` in place of a density (:func:`at_bounds`), and
forecast logged rewards are clipped to the bounds. For such a reward the oscillator runs on
the latent level of ``p*`` and ``R0`` (:func:`~bayes_grpo.runset.bounds.latent_value`, a
logistic map with slope 1 mid-range) and the mean reward is its image in the bounds
(:func:`mean_curve`): a success rate's fast rise flattens as it nears 1 instead of
overshooting it.

*Prior.* A Gaussian on ``u`` (five coordinates, or six with the onset):

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

import contextlib
import copy
import json
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from scipy import optimize, special, stats

from bayes_grpo._arguments import checked_seed
from bayes_grpo.checks.base import counted, share_percent
from bayes_grpo.constants import HDI_PROB, HEAVY_BALL, RUN_DIM, STEP_DIM
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.predict.summary import (
    DEFAULT_HDI_PROBS,
    LOGGED_REWARD_VAR,
    LOGGED_STEP_DIM,
    add_warnings,
    check_stop_threshold,
    checked_hdi_probs,
    checked_n_draws,
    milestones_of,
    summarise_draws,
)
from bayes_grpo.runset.bounds import (
    CENTRE_MARGIN,
    bounded_value,
    bounds_text,
    check_reward_bounds,
    check_rewards_within,
    latent_value,
    rewards_outside,
)

#: Names of the five unconstrained parameters of the oscillator, in order.
PARAM_NAMES: tuple[str, ...] = ("plateau", "initial_reward", "log_w0", "log_zeta", "log_sigma")
#: Name of the sixth (optional in a prior) coordinate: log of the onset step t0.
ONSET_NAME: str = "log_onset"
#: (mean, sd) of log t0 for a 5-coordinate prior (a model without onset): t0 ~ 1 step.
NO_ONSET_PRIOR: tuple[float, float] = (0.0, 1.0)
#: Default prior median of t0 as a share of the horizon (weak prior), and sd of log t0.
DEFAULT_ONSET_SHARE: float = 0.02
DEFAULT_ONSET_LOG_SD: float = 1.5
#: Noise-variance share left at the bounds of a bounded reward (h(lo) = h(hi)).
NOISE_FLOOR_SHARE: float = 0.05
#: Observation models of the forecast.
LIKELIHOODS: tuple[str, ...] = ("state_space", "iid")
#: Fewest logged rewards in a prefix before the forecast warns that its bands are mostly the prior.
FEW_PREFIX_POINTS = 10
#: Most points of the even part of a forecast grid (:func:`forecast_grid`): a horizon of up
#: to ``FORECAST_GRID_POINTS - 1`` steps is forecast at every step.
FORECAST_GRID_POINTS: int = 2001
#: Pareto k above which the importance-sampling posterior is flagged unreliable.
PARETO_K_WARN: float = 0.7
#: Smallest prior sd of log sigma in a prior built from earlier runs (see prior_from_runs).
RUN_PRIOR_LOG_SIGMA_SD: float = 0.5
#: Kernel centres and rounds of the adaptive importance sampling used when k > 0.7.
ADAPT_CENTRES: int = 64
ADAPT_ROUNDS: int = 3
#: Steps of the random-walk Metropolis ensemble that refines draws importance sampling could not
#: weight reliably (k > PARETO_K_WARN after the adaptive rounds), and the ensemble's size.
MCMC_STEPS: int = 300
MCMC_WALKERS: int = 1000
#: Degrees of freedom of the Student-t proposal.
PROPOSAL_DF: float = 4.0
#: Prior sd floor on each coordinate of u (keeps a too-confident population prior usable).
PRIOR_SD_FLOOR: np.ndarray = np.array([1e-3, 1e-3, 0.05, 0.05, 0.05, 0.1])
#: A posterior draw of a bounded fit whose plateau or R0 lies at a bound in float (its latent
#: level infinite) is taken this share of the range inside it (:func:`prior_from_draws`).
LATENT_MARGIN: float = 1e-9


class ForecastError(ValueError):
    """A forecast cannot be made (too few steps, degenerate data, bad prior)."""


class _FitBounds:
    """The type of :data:`FIT_BOUNDS` (one instance)."""

    def __repr__(self) -> str:
        return "FIT_BOUNDS"


#: ``reward_bounds`` not given to :func:`prior_from_posterior` / :func:`population_prior_for_run`:
#: the fit's own bounds (``GRPODynamicsModel.reward_bounds``, ``fit --reward-bounds``), none for
#: an unbounded fit or a prior from the other runs; to :func:`forecast_run` /
#: :class:`RunForecaster`: the bounds the prior was built in (:attr:`GaussianPrior.latent_bounds`,
#: a bounded fit's), none for another prior; None is "no bounds", given explicitly.
FIT_BOUNDS: Any = _FitBounds()


def prior_bounds(prior: object) -> tuple[float, float] | None:
    """The reward bounds a prior was built in: a :class:`GaussianPrior`'s or :class:`MixturePrior`'s
    ``latent_bounds`` (a bounded fit's prior, :func:`prior_from_posterior`; a prior from runs
    fitted with reward bounds, :func:`prior_from_runs`), else None. A forecast from such a prior
    without them (:func:`forecast_run` of models/tiny.nc's prior for
    g16_p8_lr0.0005_k1_adamw_s0 up to step 60) had its 90% band of the logged reward below 0 at
    65% of its steps, down to -0.37, on a success rate."""
    return getattr(prior, "latent_bounds", None)


def checked_bounds(reward_bounds: Any) -> tuple[float, float] | None:
    """The forecast's ``reward_bounds`` as ``(lo, hi)`` floats (None: none), checked by
    :func:`~bayes_grpo.runset.bounds.check_reward_bounds` as a :class:`ForecastError`: the one
    check of each entry point, before any work. ``(0, inf)`` put every mean at the lower bound,
    the noise at its floor share: 38% of a rising run's plateau draws fell below 0 and its 90%
    band at the horizon read [-0.54, 0.83] against [0.89, 0.99] without bounds, unsaid."""
    return check_reward_bounds(reward_bounds, error=ForecastError)


@dataclass(frozen=True)
class GaussianPrior:
    """Gaussian prior on ``u = (p*, R0, log w0, log zeta, log sigma[, log onset])``.

    Attributes
    ----------
    mean
        ``(5,)`` or ``(6,)`` (with the log onset step).
    cov
        ``(5, 5)`` or ``(6, 6)`` positive definite.
    source
        Where it came from, in words (stored in forecast outputs).
    latent_bounds
        ``(lo, hi)``: the mean and covariance of ``p*`` and ``R0`` are those of their latent
        levels (:func:`bayes_grpo.runset.bounds.latent_value`), whose images lie in ``(lo,
        hi)``: the prior of a fit with reward bounds (:func:`prior_from_posterior`), Gaussian
        where that fit's draws are (on the plateau's own level a Gaussian of draws near a bound
        put a share of its mass beyond it, and the forecast left those draws out). None (the
        default): of ``p*`` and ``R0`` themselves. :func:`fit_run` fits such a prior's
        coordinates on the latent level and gives its draws on the reward's.
    """

    mean: np.ndarray
    cov: np.ndarray
    source: str = ""
    latent_bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        mean = np.asarray(self.mean, dtype=float)
        cov = np.asarray(self.cov, dtype=float)
        dim = mean.shape[0] if mean.ndim == 1 else -1
        if dim not in (5, 6) or cov.shape != (dim, dim):
            raise ForecastError(
                f"prior needs mean (5,) and cov (5, 5), or (6,) and (6, 6) with the onset; "
                f"got {mean.shape}, {cov.shape}"
            )
        if not (np.isfinite(mean).all() and np.isfinite(cov).all()):
            raise ForecastError(f"prior from {self.source or 'caller'} has non-finite moments")
        cov = (cov + cov.T) / 2.0
        sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        floor = np.maximum(sd, PRIOR_SD_FLOOR[:dim])
        corr = cov / np.outer(np.where(sd > 0, sd, 1.0), np.where(sd > 0, sd, 1.0))
        np.fill_diagonal(corr, 1.0)
        corr = 0.98 * corr + 0.02 * np.eye(dim)  # shrink correlations: keeps cov well conditioned
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "cov", corr * np.outer(floor, floor))
        if self.latent_bounds is not None:
            object.__setattr__(self, "latent_bounds", tuple(float(b) for b in self.latent_bounds))

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov))

    def to_reward_levels(self, u: np.ndarray) -> np.ndarray:
        """``u`` (rows, or one vector) in this prior's coordinates with ``p*`` and ``R0`` as
        rewards (their images, :attr:`latent_bounds`); a copy, as it is without them."""
        out = np.array(u, dtype=float, copy=True)
        if self.latent_bounds is not None:
            lo, hi = self.latent_bounds
            out[..., :2] = bounded_value(out[..., :2], lo, hi)
        return out

    def from_reward_levels(self, u: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`to_reward_levels`; a reward at or beyond a bound is first moved
        :data:`~bayes_grpo.runset.bounds.CENTRE_MARGIN` of the range inside (a start from the data)."""
        out = np.array(u, dtype=float, copy=True)
        if self.latent_bounds is not None:
            lo, hi = self.latent_bounds
            out[..., :2] = latent_value(out[..., :2], lo, hi, margin=CENTRE_MARGIN)
        return out

    def level_means(self) -> np.ndarray:
        """The prior's ``p*`` and ``R0`` medians as rewards (the means' images: a Gaussian's
        median maps onto the median)."""
        return self.to_reward_levels(self.mean)[:2]

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws of ``u``, ``p*`` and ``R0`` as rewards."""
        return self.to_reward_levels(rng.multivariate_normal(self.mean, self.cov, size=n))

    def with_onset(self) -> GaussianPrior:
        """The 6-coordinate prior: a 5-coordinate one gets ``log t0 ~ NO_ONSET_PRIOR``."""
        if self.mean.size == 6:
            return self
        mean = np.append(self.mean, NO_ONSET_PRIOR[0])
        cov = np.zeros((6, 6))
        cov[:5, :5] = self.cov
        cov[5, 5] = NO_ONSET_PRIOR[1] ** 2
        return GaussianPrior(mean, cov, source=self.source, latent_bounds=self.latent_bounds)

    def to_dict(self) -> dict[str, object]:
        """``mean`` and ``sd`` of each coordinate; of a prior on the latent levels, those of
        ``p*`` and ``R0`` as rewards (of 4000 draws, seeded), with ``latent_bounds``."""
        return _prior_dict(self)


@dataclass(frozen=True)
class MixturePrior:
    """Mixture of Gaussians on the 6-coordinate ``u``: one component per earlier run.

    The population of runs as it is (several rise times, runs that never take off next to
    runs that do), not its mean and covariance: a kernel density estimate in ``u`` whose
    components are the earlier runs' fits (mode, Laplace covariance plus a bandwidth share of
    the between-run spread). Given a prefix, :func:`fit_run` weighs each component by how
    well it explains the prefix (Laplace evidence), so a flat prefix keeps every run that
    was still flat at that step in play, as far as the noise model lets it: a success rate flat
    at 0 shows the small sampling noise of a rate at its bound, which under constant noise (no
    ``reward_bounds``) is read as the run's ``sigma``; the runs that never rose share it, those
    that rose have the ``sigma`` of their rise (5-25 times larger there), so the prefix's
    evidence goes to the first and the forecast stays at the prefix's level. ``reward_bounds``
    shapes the noise by the level and keeps the runs that rose in play
    (``g16_p8_lr0.0005_k1_adamw_s0`` of ``data/tiny`` from step 60, i.i.d.: 90% coverage of the
    rest 0.06 without, 0.44 with).

    Attributes
    ----------
    means
        ``(J, 6)``.
    covs
        ``(J, 6, 6)`` positive definite.
    weights
        ``(J,)`` prior weights (normalised).
    source
        Where it came from, in words.
    latent_bounds
        ``(lo, hi)``: each component's ``p*`` and ``R0`` are on their latent levels
        (:func:`bayes_grpo.runset.bounds.latent_value`), whose images lie in ``(lo, hi)``, as
        :attr:`GaussianPrior.latent_bounds`: the prior of runs fitted with reward bounds
        (:func:`prior_from_runs`, each earlier run fitted on the latent levels), so every
        ``p*`` and ``R0`` it or a forecast from it draws lies inside them. On the levels
        themselves a component of a run whose plateau was near a bound put a share of its mass
        beyond it: forecasting each run of ``data/tiny`` from 30% of its steps with the other
        runs as the prior (``--reward-bounds 0 1 --likelihood iid``), up to 49% of the plateau
        draws lay outside [0, 1] (44% for ``g16_p8_lr0.001_k8_adamw_s0``; left out by the
        forecast) and most R0 draws below 0 for 14 of the 16 runs (kept: curves starting below
        0); 90% coverage of the rest 0.65 on average, 0.80 on the latent levels (state space:
        up to 56% of the draws left out, coverage 0.64 -> 0.72). None (the default): of ``p*``
        and ``R0`` themselves. :func:`fit_run` fits such a prior's coordinates on the latent
        level and gives its draws on the reward's; :attr:`mean`, :attr:`cov` and :attr:`sd` are
        the moments in the prior's own coordinates.
    """

    means: np.ndarray
    covs: np.ndarray
    weights: np.ndarray
    source: str = ""
    latent_bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        means = np.atleast_2d(np.asarray(self.means, dtype=float))
        covs = np.asarray(self.covs, dtype=float)
        weights = np.asarray(self.weights, dtype=float).reshape(-1)
        n = means.shape[0]
        if means.shape != (n, 6) or covs.shape != (n, 6, 6) or weights.shape != (n,):
            raise ForecastError(
                f"mixture prior needs means (J, 6), covs (J, 6, 6), weights (J,); got "
                f"{means.shape}, {covs.shape}, {weights.shape}"
            )
        if n < 1 or not (weights >= 0).all() or weights.sum() <= 0:
            raise ForecastError("mixture prior needs at least one component with weight > 0")
        if self.latent_bounds is not None:
            object.__setattr__(self, "latent_bounds", tuple(float(b) for b in self.latent_bounds))
        comps = [GaussianPrior(m, c, source=self.source) for m, c in zip(means, covs)]
        object.__setattr__(self, "means", np.array([c.mean for c in comps]))
        object.__setattr__(self, "covs", np.array([c.cov for c in comps]))
        object.__setattr__(self, "weights", weights / weights.sum())

    @property
    def components(self) -> list[GaussianPrior]:
        return [
            GaussianPrior(m, c, source=self.source, latent_bounds=self.latent_bounds)
            for m, c in zip(self.means, self.covs)
        ]

    @property
    def mean(self) -> np.ndarray:
        return self.weights @ self.means

    @property
    def cov(self) -> np.ndarray:
        d = self.means - self.mean
        return np.einsum("j,jab->ab", self.weights, self.covs) + np.einsum(
            "j,ja,jb->ab", self.weights, d, d
        )

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov))

    def to_reward_levels(self, u: np.ndarray) -> np.ndarray:
        """``u`` in this prior's coordinates with ``p*`` and ``R0`` as rewards
        (:meth:`GaussianPrior.to_reward_levels`)."""
        out = np.array(u, dtype=float, copy=True)
        if self.latent_bounds is not None:
            lo, hi = self.latent_bounds
            out[..., :2] = bounded_value(out[..., :2], lo, hi)
        return out

    def level_means(self) -> np.ndarray:
        """``(J, 2)``: each component's ``p*`` and ``R0`` medians as rewards."""
        return self.to_reward_levels(self.means)[:, :2]

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws of ``u`` (a component by weight, then its Gaussian), ``p*`` and ``R0`` as rewards."""
        comp = rng.choice(self.weights.size, size=n, p=self.weights)
        return self.to_reward_levels(_component_draws(rng, self.means, self.covs, comp))

    def logpdf(self, u: np.ndarray) -> np.ndarray:
        """Log density at rows ``u`` ``(n, 6)`` in this prior's coordinates (extra columns ignored)."""
        from scipy.special import logsumexp

        u = np.atleast_2d(u)[:, :6]
        parts = [
            np.log(w) + gaussian(m, c).logpdf(u).reshape(-1)
            for w, m, c in zip(self.weights, self.means, self.covs)
            if w > 0
        ]
        return logsumexp(np.array(parts), axis=0)

    def to_dict(self) -> dict[str, object]:
        """``mean`` and ``sd`` of each coordinate; of a prior on the latent levels, those of
        ``p*`` and ``R0`` as rewards (of 4000 draws, seeded), with ``latent_bounds``, as
        :meth:`GaussianPrior.to_dict`."""
        return _prior_dict(self, components=int(self.weights.size))


def _prior_dict(prior: GaussianPrior | MixturePrior, **fields: object) -> dict[str, object]:
    """``to_dict`` of either prior: ``mean`` and ``sd`` per coordinate (of a prior on the latent
    levels, ``p*`` and ``R0`` as rewards, from 4000 draws seeded 0, and its ``latent_bounds``),
    then ``fields``, then ``source``."""
    names = (*PARAM_NAMES, ONSET_NAME)
    mean, sd = prior.mean.copy(), prior.sd.copy()
    extra: dict[str, object] = {}
    if prior.latent_bounds is not None:
        levels = prior.draw(np.random.default_rng(0), 4000)[:, :2]
        mean[:2], sd[:2] = levels.mean(axis=0), levels.std(axis=0)
        extra = {"latent_bounds": list(prior.latent_bounds)}
    return {
        "mean": dict(zip(names, mean.tolist())),
        "sd": dict(zip(names, sd.tolist())),
        **fields,
        "source": prior.source,
        **extra,
    }


def mean_curve(
    u: np.ndarray, t: np.ndarray, bounds: tuple[float, float] | None = None
) -> np.ndarray:
    """Mean reward ``p(t)``, shape ``(n, len(t))``, for parameter rows ``u`` at steps ``t``.

    ``u`` is ``(n, 5)`` / ``(5,)`` (no onset) or has the log onset step in column 5 (further
    columns, e.g. the state-space ``logit rho``, are ignored): the oscillator runs on
    ``tau = max(t - t0, 0)`` and the reward is ``R0`` until ``t0``.

    ``bounds = (lo, hi)`` (a bounded reward, e.g. a success rate): the oscillator runs on the
    latent level (:func:`~bayes_grpo.runset.bounds.latent_value`, slope 1 mid-range) from
    ``latent(R0)`` to ``latent(p*)`` and the reward is its image
    (:func:`~bayes_grpo.runset.bounds.bounded_value`), so a fast rise flattens as it nears a
    bound and an underdamped swing past the plateau stays inside the bounds; ``p*`` and ``R0``
    are still the reward's levels (a level at a bound is taken :data:`LATENT_MARGIN` of the
    range inside it). On the reward's own level an overshoot of a success rate's plateau
    near 1 ran past 1, and the forecast, censored at 1, gave bands of zero width at 1 where the
    run was logged at 0.72-0.99 (``g16_p8_lr0.001_k1_adamw_s0`` of ``data/tiny`` from step
    150). Without bounds: the oscillator on the reward itself.
    """
    u = np.atleast_2d(u)
    # proposals far in the tails (importance sampling) overflow to inf: such rows get a
    # non-finite curve, which the likelihood maps to -inf (weight 0), without a warning
    with np.errstate(over="ignore", invalid="ignore"):
        w0 = np.exp(u[:, 2:3])
        zeta = np.exp(u[:, 3:4])
        tau = np.asarray(t, dtype=float)[None, :]
        if u.shape[1] > 5:
            tau = np.maximum(tau - np.exp(u[:, 5:6]), 0.0)
        plateau, r0 = (oscillator_level(u[:, j : j + 1], bounds) for j in (0, 1))
        level = reward_trajectory(tau, 1.0, 2.0 * zeta * w0, w0 * w0, plateau, r0)
        return level if bounds is None else bounded_value(level, float(bounds[0]), float(bounds[1]))


def oscillator_level(reward: np.ndarray, bounds: tuple[float, float] | None) -> np.ndarray:
    """A reward level (``p*``, ``R0``) on the level the forecast's oscillator runs on
    (:func:`mean_curve`, the state space's state): the reward itself without ``bounds``; its
    latent level with them (:func:`~bayes_grpo.runset.bounds.latent_value`, a level at a bound
    taken :data:`LATENT_MARGIN` of the range inside it)."""
    if bounds is None:
        return reward
    return latent_value(reward, float(bounds[0]), float(bounds[1]), margin=LATENT_MARGIN)


def kept_curve(
    u: np.ndarray, bounds: tuple[float, float] | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`mean_curve` of the rows ``u`` at any steps, each step's column computed once and
    kept: the continuation of a forecast's look past the horizon, shared by the logged reward's
    look (steps ``t``) and the policy's (``t + lag``), which asks mostly the same steps again
    (both followed lightly damped draws to the cell budget, 2e7 cells each). The same numbers as
    :func:`mean_curve` (elementwise in the steps)."""
    kept: list[np.ndarray] = []  # the arrays computed, (n, k) each
    where: dict[float, tuple[int, int]] = {}  # step -> (array, column)

    def at(steps: np.ndarray) -> np.ndarray:
        steps = np.asarray(steps, dtype=float).reshape(-1)
        wanted = steps.tolist()
        new = [s for s in dict.fromkeys(wanted) if s not in where]
        if new:
            kept.append(mean_curve(u, np.array(new), bounds))
            where.update((s, (len(kept) - 1, j)) for j, s in enumerate(new))
        out = np.empty((np.atleast_2d(u).shape[0], steps.size))
        i = 0
        while i < steps.size:  # runs of consecutive columns of one array, copied at once
            b, j = where[wanted[i]]
            k = i + 1
            while k < steps.size and where[wanted[k]] == (b, j + k - i):
                k += 1
            out[:, i:k] = kept[b][:, j : j + k - i]
            i = k
        return out

    return at


def noise_shape(m: np.ndarray, bounds: tuple[float, float] | None) -> np.ndarray:
    """Observation-variance multiplier ``h(m)`` at mean reward ``m`` (same shape as ``m``).

    Without ``bounds``: 1. With ``bounds = (lo, hi)`` (a reward known to lie in ``[lo, hi]``,
    e.g. a success rate): ``h = f + (1 - f) 4 x (1 - x)``, ``x = (m - lo) / (hi - lo)``
    clipped to ``[0, 1]``, ``f = NOISE_FLOOR_SHARE``: the binomial variance shape, 1
    mid-range, ``f`` at the bounds (kept above 0: a mean curve at a bound still has some
    spread around it), so ``sigma`` is the noise sd mid-range. ``bounds`` as
    :func:`~bayes_grpo.runset.bounds.check_reward_bounds` gives them: the forecast's entry points
    check them once, before any work (:func:`checked_bounds`).
    """
    m = np.asarray(m, dtype=float)
    if bounds is None:
        return np.ones_like(m)
    lo, hi = (float(b) for b in bounds)
    x = np.clip((m - lo) / (hi - lo), 0.0, 1.0)
    x = np.where(np.isfinite(x), x, 0.5)
    return NOISE_FLOOR_SHARE + (1.0 - NOISE_FLOOR_SHARE) * 4.0 * x * (1.0 - x)


#: A logged reward within this share of the range from a bound lies at the bound (censored).
AT_BOUND_TOLERANCE: float = 1e-9


def at_bounds(
    y: np.ndarray, bounds: tuple[float, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the rewards at the lower and at the upper bound (all False without bounds).

    A bounded reward (a success rate) that sits at a bound is a censored observation: the
    run's latent reward (mean plus noise) lies at or beyond the bound, so it contributes the
    probability of that, not a density. Without this, a prefix of exact zeros (a hard task
    before the first success) is fitted by a curve at 0 with the noise sd shrinking to 0: a
    likelihood without bound, a degenerate posterior and a band of zero width.
    """
    y = np.asarray(y, dtype=float)
    if bounds is None:
        none = np.zeros(y.shape, dtype=bool)
        return none, none
    lo, hi = (float(b) for b in bounds)
    tol = AT_BOUND_TOLERANCE * (hi - lo)
    return y <= lo + tol, y >= hi - tol


def censor(values: np.ndarray, bounds: tuple[float, float] | None) -> np.ndarray:
    """Simulated logged rewards as the logger reports them: clipped to ``bounds`` (if any)."""
    return values if bounds is None else np.clip(values, float(bounds[0]), float(bounds[1]))


def censored_mean(mean: np.ndarray, sd: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    """``E[clip(X, lo, hi)]`` of ``X ~ N(mean, sd^2)`` (elementwise; ``sd`` 0: the clipped mean):
    ``lo Phi(a) + hi (1 - Phi(b)) + mean (Phi(b) - Phi(a)) + sd (phi(a) - phi(b))``,
    ``a = (lo - mean) / sd``, ``b = (hi - mean) / sd``: the mean of :func:`censor` of such
    rewards, the point forecast of a bounded reward (i.i.d. and state space)."""
    lo, hi = (float(x) for x in bounds)
    mean, sd = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(sd, dtype=float))
    safe = np.where(sd > 0, sd, 1.0)
    a, b = (lo - mean) / safe, (hi - mean) / safe
    cdf_a, cdf_b = stats.norm.cdf(a), stats.norm.cdf(b)
    value = lo * cdf_a + hi * (1.0 - cdf_b) + mean * (cdf_b - cdf_a) + sd * (stats.norm.pdf(a) - stats.norm.pdf(b))
    return np.where(sd > 0, value, np.clip(mean, lo, hi))


def _log_lik(
    u: np.ndarray, t: np.ndarray, y: np.ndarray, bounds: tuple[float, float] | None = None
) -> np.ndarray:
    """i.i.d. log-likelihood per row of ``u``: Gaussian densities, and at a reward bound the
    censored probability ``P(latent beyond the bound)`` (:func:`at_bounds`)."""
    u = np.atleast_2d(u)
    mu = mean_curve(u, t, bounds)
    log_sd = u[:, 4:5] + 0.5 * np.log(noise_shape(mu, bounds))
    sd = np.exp(log_sd)
    z = (y[None, :] - mu) / sd
    point = -0.5 * z * z - log_sd - 0.5 * np.log(2 * np.pi)
    low, high = at_bounds(y, bounds)
    if low.any() or high.any():
        # the censored probabilities at the steps logged at a bound only (elementwise: the
        # same values as over every step, at a share of the cost of log_ndtr)
        lo, hi = (float(b) for b in bounds)
        for at, diff in ((low, lambda mu, sd: (lo - mu) / sd), (high, lambda mu, sd: (mu - hi) / sd)):
            if at.any():
                point[:, at] = special.log_ndtr(diff(mu[:, at], sd[:, at]))
    ll = np.sum(point, axis=1)
    return np.where(np.isfinite(ll), ll, -np.inf)


def gaussian(mean: np.ndarray, cov: np.ndarray):
    """``scipy.stats.multivariate_normal(mean, cov)`` given ``cov`` by its Cholesky factor.

    Given the matrix itself, scipy treats an eigenvalue below ``~2e-10`` of the largest as 0
    and refuses the matrix: the weak prior of a flat run at a reward of 200 (level sds at the
    1e-3 floor, 1e-5 in the forecast's unit of 100, beside log-scale sds of order 1) is
    positive definite but was refused, and the forecast ended in a LinAlgError.
    """
    factor = np.linalg.cholesky((np.asarray(cov, dtype=float) + np.asarray(cov, dtype=float).T) / 2)
    return stats.multivariate_normal(mean, stats.Covariance.from_cholesky(factor))


def _log_prior(u: np.ndarray, prior: GaussianPrior) -> np.ndarray:
    return gaussian(prior.mean, prior.cov).logpdf(np.atleast_2d(u)).reshape(-1)


def _paired(
    t: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(t, y)`` as flat float arrays of one length (a ForecastError otherwise: zipped, a step
    without its reward was dropped unsaid), each finite reward at a finite step (a
    ForecastError otherwise: it was left out unsaid; an entry with neither is padding)."""
    t = np.asarray(t, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if t.shape != y.shape:
        raise ForecastError(
            f"{counted(t.size, 'step')} and {counted(y.size, 'reward')}: one reward per step is needed"
        )
    stepless = np.flatnonzero(~np.isfinite(t) & np.isfinite(y))
    if stepless.size:
        i = int(stepless[0])
        raise ForecastError(
            f"{counted(stepless.size, 'reward')} at a step that is not finite (e.g. reward {y[i]:g} "
            f"at position {i}, step {t[i]:g}): each reward needs its optimizer step"
        )
    return t, y


def logged_points(
    t: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A run's logged ``(steps, rewards)`` as every forecast step reads them: the steps with a
    finite step and reward (a NaN reward: not logged), in step order, a step given more than
    once at the last reward given for it (as ingest keeps a resumed run's).

    The one place the prefix goes into the model (:func:`forecast_run`, :class:`RunForecaster`,
    :func:`fit_run`, :func:`default_prior`, :func:`prior_from_runs`, :func:`prior_conflict_note`,
    :func:`run_series`): each masked the NaN steps by hand and only the forecaster sorted them, so
    ``forecast_run`` of steps out of order gave the state-space filter negative intervals (and
    the weak prior its first and last tenth by position) and another forecast than the forecaster
    of the same steps.
    """
    steps, rewards, _ = _last_per_step(*_paired(t, y))
    return steps, rewards


def _last_per_step(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`logged_points` of arrays already paired (:func:`_paired`), and the steps given
    more than once with a finite reward, each once in step order (the one computation of
    :func:`forecast_run`, which pairs ``t`` and ``y`` once for both)."""
    ok = np.isfinite(t) & np.isfinite(y)
    t, y = t[ok], y[ok]
    # the last entry of each step: unique's first index in the reversed arrays (sorted by step)
    steps, last, times = np.unique(t[::-1], return_index=True, return_counts=True)
    return steps, y[::-1][last], steps[times > 1]


def _repeated_note(steps: np.ndarray, run: object = None) -> str | None:
    """The warning of a prefix that gives some steps more than once (:func:`_last_per_step`),
    naming the run (where :func:`forecast_run`'s ``attrs`` name it) and the steps; None where
    there are none. It read "5 steps given more than once (a resumed run?): ...", a question
    naming neither."""
    if not steps.size:
        return None
    return (
        f"{f'run {run!r}: ' if run is not None else ''}{counted(steps.size, 'step')} given more than "
        f"once ({_steps_named(steps)}; e.g. a log followed by its resumed "
        "run, which repeats the steps after its checkpoint): the forecast kept the last reward given "
        "for each, as ingest does"
    )


def _steps_without_reward(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The finite steps of paired ``(t, y)`` given with no finite reward at any of their entries
    (a NaN reward: not logged), in step order: the steps :func:`logged_points` leaves out."""
    finite = np.isfinite(t)
    return np.setdiff1d(t[finite & ~np.isfinite(y)], t[finite & np.isfinite(y)])


def _unlogged_note(steps: np.ndarray) -> str | None:
    """The warning of a prefix some of whose steps came without a finite reward
    (:func:`_steps_without_reward`), None where there are none: :func:`forecast_run` and
    :meth:`RunForecaster.update` left them out unsaid (the forecaster even when an earlier
    update had given their reward)."""
    if not steps.size:
        return None
    return (
        f"{counted(steps.size, 'step')} given without a finite reward (NaN: not logged) "
        f"{'is' if steps.size == 1 else 'are'} left out of the forecast ({_steps_named(steps)})"
    )


def _steps_named(steps: np.ndarray) -> str:
    """``"step 39"`` / ``"steps 1, 2, 3, 4, 5, ..."``: the first five of ``steps`` for a note."""
    shown = ", ".join(f"{s:g}" for s in steps[:5]) + (", ..." if steps.size > 5 else "")
    return f"{'step' if steps.size == 1 else 'steps'} {shown}"


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
    """Weak, data-scaled prior (6 coordinates) for a run with no earlier runs to learn from.

    ``p*`` centred on the last tenth of the prefix with sd of twice the prefix's range,
    ``R0`` on its first tenth, ``w0`` centred on ``4 / horizon`` (a rise spread over the
    run; ``horizon`` defaults to the last step seen) with a factor ~e^1.5 either way,
    ``zeta`` centred on 1 (sd 1 in log), ``sigma`` on the first-difference noise (sd 1 in log),
    the onset ``t0`` on ``DEFAULT_ONSET_SHARE * horizon`` (sd ``DEFAULT_ONSET_LOG_SD`` in log).

    Built in the rewards' own frame (:func:`reward_frame`: origin and unit) and carried back, so
    that the sd floor :data:`PRIOR_SD_FLOOR` on the plateau and R0 is a share of the reward's size:
    the same run logged x1e-3 (or with an offset of 100) gets the same prior scaled (shifted), not
    one whose level sds sit at an absolute 1e-3 (or 1e-3 of the unit 100).
    """
    # a step without a reward (NaN: not logged) says nothing, as in fit_run; kept, it made every
    # moment NaN ("prior from default ... has non-finite moments" for one missing reward)
    t, y = logged_points(t, y)
    if y.size < 3:
        raise ForecastError(f"need at least 3 observed steps for a forecast, got {y.size}")
    origin, unit = reward_frame(y)
    y = (y - origin) / unit
    noise, span = _data_scale(y)
    k = max(1, y.size // 10)
    horizon = float(horizon if horizon is not None else max(t.max(), 1.0))
    mean = np.array(
        [
            y[-k:].mean(),
            y[:k].mean(),
            np.log(4.0 / max(horizon, 1.0)),
            0.0,
            np.log(noise),
            np.log(max(DEFAULT_ONSET_SHARE * horizon, 1e-3)),
        ]
    )
    sd = np.array(
        [2.0 * span + 2.0 * noise, span + 2.0 * noise, 1.5, 1.0, 1.0, DEFAULT_ONSET_LOG_SD]
    )
    prior = GaussianPrior(mean, np.diag(sd**2), source="default (weak, scaled to the prefix)")
    return rescale_prior(prior, unit, shift=origin)


#: Indices in ``u`` of the reward-valued coordinates (plateau, R0, log sigma): the run's
#: reward scale, which does not carry over between LLMs (or tasks); the rest are dynamics.
LEVEL_COORDS: tuple[int, ...] = (0, 1, 4)


def with_levels_from(
    prior: GaussianPrior | MixturePrior, levels: GaussianPrior, *, source: str | None = None
) -> GaussianPrior | MixturePrior:
    """``prior``'s dynamics (``log w0``, ``log zeta``, the onset) with ``levels``' plateau, R0, noise.

    The reward-valued coordinates (:data:`LEVEL_COORDS`) take ``levels``' mean and covariance
    block and become independent of the dynamics; the dynamics keep ``prior``'s marginal
    (per component of a mixture). Used where the dynamics are learnt from runs whose reward
    scale need not be the run's own: a new LLM of a fitted posterior, runs of other LLMs.

    Built in the frame of ``levels``' rewards (:func:`reward_frame`) and carried back, as
    :func:`default_prior` is: the sd floor :data:`PRIOR_SD_FLOOR` the new prior gets is then a share
    of the reward's size, and ``levels`` of a run logged x1e-3 keep their sds, not 1e-3.

    A ``prior`` on the latent levels (``latent_bounds``: a run-based prior fitted with reward
    bounds) takes ``levels`` on the same latent levels (:func:`on_latent_levels`, when they are on
    the rewards' own), and the result keeps its ``latent_bounds``.
    """
    if prior.latent_bounds is not None and levels.latent_bounds is None:
        levels = on_latent_levels(levels, prior.latent_bounds)
    if prior.latent_bounds != levels.latent_bounds:
        raise ForecastError(
            f"the prior's latent bounds {prior.latent_bounds} are not those of the levels {levels.latent_bounds}"
        )
    origin, unit = reward_frame(levels.mean[:2])
    if unit != 1.0 or origin != 0.0:
        into = -origin / unit
        return rescale_prior(
            with_levels_from(
                rescale_prior(prior, 1.0 / unit, shift=into),
                rescale_prior(levels, 1.0 / unit, shift=into),
                source=source,
            ),
            unit,
            shift=origin,
        )
    lv = list(LEVEL_COORDS)

    def swap(mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, cov = np.array(mean, dtype=float), np.array(cov, dtype=float)
        mean[lv] = levels.mean[lv]
        cov[lv, :] = 0.0
        cov[:, lv] = 0.0
        cov[np.ix_(lv, lv)] = levels.cov[np.ix_(lv, lv)]
        return mean, cov

    label = prior.source if source is None else source
    if isinstance(prior, MixturePrior):
        parts = [swap(m, c) for m, c in zip(prior.means, prior.covs)]
        return MixturePrior(
            np.array([m for m, _ in parts]),
            np.array([c for _, c in parts]),
            prior.weights,
            source=label,
            latent_bounds=prior.latent_bounds,
        )
    mean, cov = swap(prior.mean, prior.cov)
    return GaussianPrior(mean, cov, source=label, latent_bounds=prior.latent_bounds)


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
    u_draws: np.ndarray,
    *,
    source: str = "posterior draws",
    inflate: float = 1.0,
    latent_bounds: tuple[float, float] | None = None,
) -> GaussianPrior:
    """Moment-matched Gaussian prior from ``(n, 5)`` or ``(n, 6)`` draws of ``u`` (NaN rows ignored).

    ``inflate`` multiplies the covariance (>1 to hedge against a population that is too
    narrow for the new run). ``latent_bounds`` ``(lo, hi)``: the draws' ``p*`` and ``R0`` lie
    in them (a fit with reward bounds); the moments are those of their latent levels
    (:attr:`GaussianPrior.latent_bounds`), so the prior keeps the draws' shape near a bound
    and none of its mass lies beyond it. A draw at a bound in float (its latent level
    infinite) is moved :data:`LATENT_MARGIN` of the range inside.
    """
    u = np.asarray(u_draws, dtype=float)
    if latent_bounds is not None:
        lo, hi = (float(b) for b in latent_bounds)
        u = np.array(u, copy=True)
        u[:, :2] = latent_value(u[:, :2], lo, hi, margin=LATENT_MARGIN)
    u = u[np.isfinite(u).all(axis=1)]
    if u.shape[0] < 10:
        raise ForecastError(
            f"{source}: only {u.shape[0]} usable (stable, finite) draws; cannot form a prior"
        )
    # moments in the reward's frame (reward_frame), scaled back as they are: the prior's sd floor on
    # the plateau and R0 is then a share of the reward's size, not 1e-3 in whatever unit it is logged
    origin, unit = reward_frame(u[:, :2])
    u = rescale_u(u, 1.0 / unit, shift=-origin / unit)
    bounds = None if latent_bounds is None else ((lo - origin) / unit, (hi - origin) / unit)
    prior = GaussianPrior(u.mean(axis=0), inflate * np.cov(u, rowvar=False), source=source, latent_bounds=bounds)
    return rescale_prior(prior, unit, shift=origin)


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
    label: str | None = None,
    reward_bounds: tuple[float, float] | None = FIT_BOUNDS,
) -> GaussianPrior:
    """Prior for a new run from a fitted hierarchical model (a model object or a saved file).

    Uses ``GRPODynamicsModel.coefficient_draws`` for the run's hyperparameters: for a model
    already fitted that LLM's curvature posterior, for a new one the population level. A
    new LLM has no reward scale in the fit (plateau, R0 and noise are NaN): then the
    dynamics (``log w0, log zeta``) come from the posterior and the reward-valued
    coordinates from ``fallback`` (e.g. :func:`default_prior` of the run's prefix).
    ``label``: how the prior's source names the posterior (default: its path, or the
    model's type when a model object is given). ``reward_bounds``: the forecast's, by default
    (:data:`FIT_BOUNDS`, not given) the fit's own (``GRPODynamicsModel.reward_bounds``, ``fit
    --reward-bounds``); when they are the fit's, the prior is Gaussian on the latent levels of
    ``p*`` and ``R0`` (:func:`prior_from_draws`'s ``latent_bounds``), as the fit's draws are:
    on the levels themselves, a bounded fit's plateau near 1 (``models/tiny.nc``) gave a prior
    of which the forecast left 19-20% of its draws out, above 1. None (or other bounds than
    the fit's): on ``p*`` and ``R0`` themselves (a run logged outside the fit's bounds, which
    :func:`forecast_in_runset` forecasts without them). A bounded forecast runs the oscillator on
    the latent level (:func:`mean_curve`) while the fit's curve lies on the reward's own: the
    prior's ``w0`` and ``zeta`` are the fit's, close mid-range (the map's slope is 1 there), a
    rougher guide for a rise across most of the range, which the prefix corrects.
    """
    from bayes_grpo.model.core import as_fitted_model  # lazy: the model area is heavy to import

    if reward_bounds is not FIT_BOUNDS:
        reward_bounds = checked_bounds(reward_bounds)
    fitted, _ = as_fitted_model(posterior, error=ForecastError)
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
    if label is None:
        label = str(posterior) if isinstance(posterior, str | os.PathLike) else type(posterior).__name__
    label = f"posterior {label}"
    if draws.attrs.get("new_model") == "True" and model is not None:
        which = f"{model} not in the fit, population level"
    elif draws.attrs.get("model"):
        # the LLM whose coefficients these are: for model=None a fit of one LLM gives that LLM
        which = str(draws.attrs["model"])
    else:
        which = model or "new, population level"
    source = f"{label} (model={which})"
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
        # the hierarchical model has no onset: 5 coordinates (fit_run adds t0 ~ 1 step)
        return with_levels_from(
            prior_from_draws(u, source=source, inflate=inflate),
            fallback,
            source=source + " dynamics; reward scale from the prefix",
        )
    fit_bounds = getattr(fitted, "reward_bounds", None)
    if reward_bounds is FIT_BOUNDS:
        # not given: the fit's own (a Python call without them gave the Gaussian on the levels of
        # models/tiny.nc's p* near 1: 14.5% of the prior's p* above 1, 32% of its R0 below 0)
        reward_bounds = fit_bounds
    same = reward_bounds is not None and fit_bounds is not None and tuple(map(float, reward_bounds)) == tuple(map(float, fit_bounds))
    return prior_from_draws(u, source=source, inflate=inflate, latent_bounds=fit_bounds if same else None)


_BLAS_CONTROLLER: Any = None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS (OpenBLAS, MKL) on one thread within the block, its thread count restored after.

    A forecast's linear algebra is on small matrices (6 x 6 factors against a few thousand
    rows: the mixture prior's densities, the proposals'), where BLAS's threads cost more than
    they share: on the 2-core machine beside other work, each triangular solve of the
    mixture's log density took 11.5 ms on two threads and 0.18 ms on one, a sixth of a
    forecast. The values are the same (the threads split the rows, not a row's sums); the
    limit is process-wide while the block runs (``threadpoolctl``, a dependency of PyMC)."""
    global _BLAS_CONTROLLER
    if _BLAS_CONTROLLER is None:  # after scipy's import: its own OpenBLAS is found too
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER = ThreadpoolController()
    with _BLAS_CONTROLLER.limit(limits=1, user_api="blas"):
        yield


#: Prior weight of the robust (weak) component of a run-based mixture prior
#: (:func:`prior_from_runs`): 0.1-0.2 is the usual range of a robust meta-analytic-predictive prior.
ROBUST_WEIGHT: float = 0.15


#: The kinds of run-based prior (:func:`prior_from_runs`' ``kind``, ``prior_kind`` elsewhere).
PRIOR_KINDS = ("mixture", "gaussian")


def check_prior_kind(kind: str) -> str:
    """``kind``, refused (:class:`ForecastError`) unless one of :data:`PRIOR_KINDS`."""
    if kind not in PRIOR_KINDS:
        raise ForecastError(f"unknown prior kind {kind!r}; expected one of {PRIOR_KINDS}")
    return kind


@one_blas_thread()
def prior_from_runs(
    runs: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    source: str = "earlier runs",
    horizon: float | None = None,
    reward_bounds: tuple[float, float] | None = None,
    kind: str = "mixture",
    retime: Sequence[tuple[Mapping[str, object], Mapping[str, object]] | None] | None = None,
    robust_weight: float = ROBUST_WEIGHT,
) -> GaussianPrior | MixturePrior:
    """Empirical-Bayes prior (6 coordinates) from earlier complete runs ``[(t, y), ...]``.

    ``kind="mixture"`` (default): a :class:`MixturePrior` with one component per run (its
    mode; its Laplace covariance plus ``h^2`` times the robust between-run covariance,
    ``h`` Silverman's bandwidth factor), sharing ``1 - robust_weight``, and a robust component
    of weight ``robust_weight`` (0 leaves it out): centred on the population's centre, as wide
    as the weak data-scaled prior (:func:`default_prior`) of each earlier run (the median of
    their variances, independent coordinates). A robust meta-analytic-predictive prior
    (Schmidli et al., 2014, Biometrics 70: 1023): when the run's prefix conflicts with every
    earlier run (a plateau above all of theirs, a slower rise) the evidence moves to the
    robust component and the forecast follows the prefix; when it does not, the component
    keeps a small weight and the forecast is the population's. Measured on SDE runs forecast
    from 20% and 30% of their steps with six runs of another setting as the prior
    (``benchmarks/results/FORECAST_NOTES.md``, 2026-12-07): 90% band coverage of a run whose
    plateau is 0.8 where the earlier runs' is 0.5 0.29 -> 0.83; runs like the earlier ones
    0.947 -> 0.949. ``kind="gaussian"``: one Gaussian, as follows.

    Each run is fitted alone under :func:`default_prior` (i.i.d. likelihood, with the onset
    and the noise shape of ``reward_bounds``; with ``reward_bounds`` on the latent levels of ``p*``
    and ``R0``, :func:`on_latent_levels`, and the prior is then on them too: its
    ``latent_bounds`` are ``reward_bounds``, so every plateau and R0 it or a forecast from it
    draws lies inside them); the prior mean is the median of their modes
    and the covariance the (winsorised, :func:`_robust_moments`) spread of the modes plus
    the median Laplace covariance (between-run plus within-run uncertainty): the
    population's spread of plateaus, rise rates and onset steps, not a point. Needs at
    least 2 runs.

    ``retime`` (one entry per run, or None): ``(source, target)`` settings (mappings of
    ``learning_rate``, ``momentum``, ``k_ref``, ``momentum_convention``) that carry each run's
    fitted rise rate and damping to the setting of the run to be forecast
    (:func:`bayes_grpo.dynamics.coefficients.retime_oscillator`: same LLM, so the same
    curvature, the gain scaling with the effective step); an entry None, or a run the
    target would make unstable, is taken as it is. The onset step is kept: a dead time from
    the lag (the bandit logs rollouts ``K_ref`` steps old) does not move with the learning
    rate, a take-off does, and the run coordinates do not tell them apart (moving it with the
    slow time scale was measured: better on the tiny TRL runs at a 10% prefix, worse on the
    bandit). The Laplace covariances are kept (the map is close to a shift in
    ``(log w0, log zeta)``).
    """
    from bayes_grpo.dynamics.coefficients import retime_oscillator

    reward_bounds = checked_bounds(reward_bounds)
    check_prior_kind(kind)  # before a fit per run, not after them
    if not 0.0 <= robust_weight < 1.0:
        raise ForecastError(f"robust_weight must be in [0, 1), got {robust_weight!r}")
    if retime is not None and len(retime) != len(runs):
        raise ValueError(f"retime must have one entry per run ({len(runs)}), got {len(retime)}")
    # built in the runs' own reward unit and scaled back: the bandwidth, the clip of unidentified
    # directions and the robust spread mix reward-valued and unit-free coordinates, so in reward
    # units they gave runs logged on 0-10 another prior than the same runs on 0-1
    rewards = [np.asarray(y, dtype=float) for _, y in runs]
    origin, unit = reward_frame(np.concatenate(rewards)) if rewards else (0.0, 1.0)
    bounds = (
        None
        if reward_bounds is None
        else ((reward_bounds[0] - origin) / unit, (reward_bounds[1] - origin) / unit)
    )
    modes, covs = [], []
    fitted_runs = []  # (t, y) of the runs fitted, in the prior's unit
    n_retimed = 0
    for i, (t, y) in enumerate(runs):
        t, y = logged_points(t, (np.asarray(y, dtype=float) - origin) / unit)
        if y.size < 3:
            continue
        mode, cov = _laplace_fit_cached(t, y, horizon, bounds)
        fitted_runs.append((t, y))
        settings = None if retime is None else retime[i]
        if settings is not None:
            w0, zeta = retime_oscillator(np.exp(mode[2]), np.exp(mode[3]), *settings)
            if np.isfinite(w0) and np.isfinite(zeta) and w0 > 0.0 and zeta > 0.0:
                mode = mode.copy()  # the cached mode is shared
                mode[2], mode[3] = np.log(w0), np.log(zeta)
                n_retimed += 1
        modes.append(mode)
        covs.append(cov)
    if len(modes) < 2:
        raise ForecastError(
            f"{source}: need at least 2 earlier runs with 3+ finite steps, got {len(modes)}"
        )
    modes_arr = np.array(modes)
    centre, between = _robust_moments(modes_arr)
    within = np.median(np.array(covs), axis=0)
    evals, evecs = np.linalg.eigh((within + within.T) / 2.0)
    within = (evecs * np.clip(evals, 0.0, None)) @ evecs.T
    cov = between + within
    # The runs are fitted with i.i.d. residuals, whose sd underestimates the total
    # stationary sd when the run wanders (process noise is partly absorbed by the curve):
    # keep the log-sigma prior at least RUN_PRIOR_LOG_SIGMA_SD wide so the data can raise it.
    sd = np.sqrt(np.diag(cov))
    widen = max(RUN_PRIOR_LOG_SIGMA_SD / sd[4], 1.0)
    cov[4, :] *= widen
    cov[:, 4] *= widen
    # the runs fitted, when some given were left out ("7 other runs of the same LLM (7 runs, ..."
    # said the count twice)
    fitted = "" if len(modes) == len(runs) else f"{len(modes)} of {len(runs)} fitted, "
    label = f"{source} ({fitted}empirical Bayes"
    if n_retimed:
        label += f", {n_retimed} re-timed to this run's hyperparameters"
    if kind == "gaussian":
        return rescale_prior(GaussianPrior(centre, cov, source=label + ")", latent_bounds=bounds), unit, shift=origin)
    n, dim = modes_arr.shape
    h2 = ((4.0 / (dim + 2.0)) ** (1.0 / (dim + 4.0)) * n ** (-1.0 / (dim + 4.0))) ** 2
    # at most MAX_MIXTURE_COMPONENTS components (evenly spaced over the runs: each costs a
    # Laplace fit per forecast); the bandwidth and the between-run spread use every run
    pick = np.unique(np.linspace(0, n - 1, min(n, MAX_MIXTURE_COMPONENTS)).round().astype(int))
    modes_arr = modes_arr[pick]
    covs = [covs[i] for i in pick]
    comp_covs = []
    for c in covs:
        ev, evec = np.linalg.eigh((c + c.T) / 2.0)
        ev = np.clip(
            ev, 0.0, np.diag(cov).max()
        )  # an unidentified direction: no wider than the population
        comp_covs.append((evec * ev) @ evec.T + h2 * between)
    comp_covs_arr = np.array(comp_covs)
    comp_covs_arr[:, 4, 4] = np.maximum(comp_covs_arr[:, 4, 4], RUN_PRIOR_LOG_SIGMA_SD**2)
    weights = np.full(len(pick), 1.0 / len(pick))
    robust = ""
    if robust_weight > 0.0:
        # the robust component: as wide as the weak prior of each earlier run (the median of
        # their variances; no narrower than the population's spread), centred on the population
        modes_arr = np.vstack([modes_arr, centre])
        weak_vars = [np.diag(default_prior(t, y, horizon=horizon).cov) for t, y in fitted_runs]
        robust_cov = np.diag(np.maximum(np.median(np.array(weak_vars), axis=0), np.diag(cov)))
        comp_covs_arr = np.concatenate([comp_covs_arr, robust_cov[None]])
        weights = np.append(weights * (1.0 - robust_weight), robust_weight)
        robust = f" and a weak component of weight {robust_weight:g}"
    return rescale_prior(
        MixturePrior(
            modes_arr,
            comp_covs_arr,
            weights,
            source=label + f", mixture of {len(pick)}{robust})",
            latent_bounds=bounds,
        ),
        unit,
        shift=origin,
    )


#: Most components of a run-based mixture prior.
MAX_MIXTURE_COMPONENTS: int = 12
#: Modes further than this many robust sd from the median are pulled in to it (prior_from_runs).
ROBUST_CLIP_SD: float = 2.5


def _robust_moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median and winsorised covariance of ``(n, d)`` rows.

    Single-run fits that the data do not pin down (a run that never leaves its start: its
    rise rate and damping are free) land far out; each coordinate is clipped at
    ``median +- ROBUST_CLIP_SD * 1.4826 MAD`` (the MAD floored at ``PRIOR_SD_FLOOR``) before
    the covariance is taken, so such runs still count, at the edge of the population.
    """
    centre = np.median(x, axis=0)
    mad = 1.4826 * np.median(np.abs(x - centre), axis=0)
    half = ROBUST_CLIP_SD * np.maximum(mad, PRIOR_SD_FLOOR[: x.shape[1]])
    clipped = np.clip(x, centre - half, centre + half)
    return centre, np.cov(clipped, rowvar=False)


_LAPLACE_CACHE: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}


def _laplace_fit_cached(
    t: np.ndarray,
    y: np.ndarray,
    horizon: float | None,
    reward_bounds: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mode and Laplace covariance of one complete run under the weak prior (memoised:
    leave-one-out priors over a run set refit the same runs many times).

    With ``reward_bounds`` the run is fitted on the latent levels of ``p*`` and ``R0`` (the weak
    prior carried there, :func:`on_latent_levels`), and the mode and covariance are those of the
    latent levels, as the components of a :class:`MixturePrior` with ``latent_bounds`` are."""
    bounds = None if reward_bounds is None else tuple(float(b) for b in reward_bounds)
    key = (t.tobytes(), y.tobytes(), horizon, bounds)
    if key not in _LAPLACE_CACHE:
        if len(_LAPLACE_CACHE) > 4096:
            _LAPLACE_CACHE.clear()
        weak = default_prior(t, y, horizon=horizon)
        post = fit_run(
            t,
            y,
            weak if bounds is None else on_latent_levels(weak, bounds),
            n_draws=10,
            n_proposal=200,
            rng=0,
            likelihood="iid",
            reward_bounds=bounds,
            adapt=False,  # only the mode and the Laplace covariance are used
        )
        if bounds is None:
            _LAPLACE_CACHE[key] = (post.mode, post.cov)
        else:
            _LAPLACE_CACHE[key] = (post.latent_mode, post.latent_cov)
    return _LAPLACE_CACHE[key]


def on_latent_levels(prior: GaussianPrior, bounds: tuple[float, float]) -> GaussianPrior:
    """``prior`` (on ``p*`` and ``R0`` themselves) carried onto their latent levels in ``bounds``
    (:attr:`GaussianPrior.latent_bounds`), as the bounded hierarchical model sets its priors
    (:mod:`bayes_grpo.runset.bounds`): each level's centre is :func:`latent_value` of its mean,
    moved :data:`CENTRE_MARGIN` of the range inside the bounds, so the prior's median is that
    mean; the covariance is kept (the map has slope 1 mid-range). For the weak prior of a run
    fitted with reward bounds (:func:`prior_from_runs`) and the reward levels a run-based
    prior of other LLMs takes from the prefix (:func:`with_levels_from`)."""
    lo, hi = (float(b) for b in bounds)
    mean = np.array(prior.mean, dtype=float, copy=True)
    mean[:2] = latent_value(mean[:2], lo, hi, margin=CENTRE_MARGIN)
    # the moments carried as they are (made anew, the prior would floor its sds once more in
    # another unit, as rescale_prior says)
    out = copy.copy(prior)
    object.__setattr__(out, "mean", mean)
    object.__setattr__(out, "latent_bounds", (lo, hi))
    return out


def phenomenological_setting_note(posterior: Any, coords: Mapping[str, Any], llm: str | None) -> str:
    """A note when a run's learning rate, momentum or ``K_ref`` is none of those of the runs a
    phenomenological fit learnt its LLM's damping ratio and frequency from ("" otherwise).

    That form has no learning rate in it: its ``zeta`` and ``w0`` are the fitted runs' own, so
    as a prior for a run at another setting it carries their dynamics over unchanged (a run at
    twice the learning rate is expected to rise as slowly as they did); the mechanistic form
    carries them to the run's setting.
    """
    fitted = getattr(posterior, "runset", None)
    if fitted is None or RUN_DIM not in getattr(fitted, "dims", {}):
        return ""
    mine = None  # the fit's runs of this LLM; all of them when it has none
    if "model" in fitted.coords and llm is not None:
        of_llm = np.asarray(fitted["model"].values, dtype=str) == str(llm)
        mine = of_llm if of_llm.any() else None
    differ = []
    for coord in ("learning_rate", "momentum", "k_ref"):
        if coord not in fitted.coords:
            continue
        value = float(coords.get(coord, np.nan))
        seen = np.asarray(fitted[coord].values, dtype=float)
        seen = seen[mine] if mine is not None else seen
        seen = np.unique(seen[np.isfinite(seen)])
        if np.isfinite(value) and seen.size and not np.isclose(seen, value, rtol=1e-6, atol=0.0).any():
            differ.append(f"{coord} {value:g} (fitted runs: {', '.join(f'{v:g}' for v in seen[:5])})")
    if not differ:
        return ""
    return (
        f"this run's {'; '.join(differ)}: the phenomenological fit's damping ratio and frequency are "
        "its fitted runs' own, and it carries their dynamics over unchanged to another setting "
        "(a mechanistic fit carries them to this run's)"
    )


@contextlib.contextmanager
def _model_size_notes() -> Iterator[list[str]]:
    """The fit's "model_size = ... is not used: ..." warnings of the block, as notes of the run's
    prior (a list filled when the block ends); other warnings pass on. ``forecast --prior`` of a
    run whose size the fit cannot use printed that bare line on stderr, naming no run, and it
    was in neither the forecast's warnings nor its --json."""
    from bayes_grpo.model.core import UnusedModelSizeWarning

    notes: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnusedModelSizeWarning)
            yield notes
    finally:
        for w in caught:
            if issubclass(w.category, UnusedModelSizeWarning):
                notes.append(f"the run's {w.message}")
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def population_prior_for_run(
    runset: xr.Dataset,
    run_id: str,
    *,
    posterior: object | None = None,
    use_runs: bool = True,
    prefix: tuple[np.ndarray, np.ndarray] | None = None,
    horizon: float | None = None,
    same_model_only: bool = False,
    reward_bounds: tuple[float, float] | None = FIT_BOUNDS,
    prior_kind: str = "mixture",
    retime: bool = True,
    posterior_label: str | None = None,
) -> tuple[GaussianPrior | MixturePrior | None, str]:
    """The prior for forecasting ``run_id`` of a run set, and a note on how it was chosen.

    With ``posterior`` (fitted model or file): :func:`prior_from_posterior` at the run's
    hyperparameters (an unknown G is the LLM's reference G, as in the fit), for its LLM if
    that LLM is in the fit, else for a new LLM. Otherwise,
    when ``use_runs``: :func:`prior_from_runs` on the other runs (those of the same LLM if
    there are at least two, else all others). Otherwise None (the weak default prior).
    ``prefix`` (the run's observed ``(t, y)``) supplies the reward scale when the
    posterior's LLM is new to the fit; ``horizon`` is the last step to be forecast (it sets
    the weak prior of ``prefix`` only: the other runs are fitted on the run set's span).
    ``same_model_only``: never pool runs of other LLMs. When they are pooled (fewer than two
    runs of the same LLM), only their dynamics are: the plateau, R0 and noise of the prior
    come from :func:`default_prior` of ``prefix`` (:func:`with_levels_from`), since other LLMs'
    rewards may have another scale (another task, another reward function).
    ``reward_bounds``: those of :func:`prior_from_posterior` for a ``posterior`` (by default,
    :data:`FIT_BOUNDS`, the fit's own; None: none), else the noise shape of a bounded reward
    for the run-based prior's fits (none by default);
    ``prior_kind``: ``"mixture"`` (one component per other run) or ``"gaussian"``.
    ``retime`` (default True): the other runs of the same LLM are carried to this run's
    learning rate, momentum and ``K_ref`` (:func:`retime_settings`) before they form the
    prior, so a run at twice the learning rate is expected to rise faster than the runs it
    learns from; runs of other LLMs (another curvature) are taken as they are.
    ``posterior_label``: how the prior's source names a ``posterior`` given as a loaded model
    (default: its path when a file is given).
    """
    from bayes_grpo.runset import REWARD_VAR, run_coords

    if reward_bounds is not FIT_BOUNDS:
        reward_bounds = checked_bounds(reward_bounds)
    # here, not in prior_from_runs alone: its refusal is caught below as a run-based prior that
    # failed, and prior_kind="gauss" forecast from the weak prior with a note
    check_prior_kind(prior_kind)
    coords = run_coords(runset, run_id)
    if posterior is not None:
        label = str(posterior) if isinstance(posterior, str | os.PathLike) else posterior_label
        from bayes_grpo.model.core import as_fitted_model  # lazy: the model area is heavy to import

        posterior, _ = as_fitted_model(posterior, error=ForecastError)  # once: the setting depends on the fit
        taken: list[str] = []
        kw = _posterior_setting(posterior, coords, run_id, taken=taken)
        # `forecast --prior fit.nc` of a run that logs no learning rate forecast it at the fit's
        # `--default learning_rate` and said nothing, where `fit` notes each setting it takes so
        if getattr(posterior, "parameterisation", "mechanistic") == "phenomenological":
            taken = [n for n in taken if n.startswith("group_size=")]  # the others are not used there
        defaulted = (
            f"run {run_id!r} does not log {', '.join(n.split('=')[0] for n in taken)}: the prior is the "
            f"fit's prediction at its defaults (fit --default) {', '.join(taken)}"
            if taken
            else ""
        )
        size = coords["model_size"] if np.isfinite(coords["model_size"]) else None
        fallback = None
        if prefix is not None:
            fallback = default_prior(prefix[0], prefix[1], horizon=horizon)
        llm = str(coords["model"]) or None
        fitted_llms = [str(m) for m in getattr(getattr(posterior, "data", None), "models", None) or []]
        if llm is None:
            from bayes_grpo.model.prepare import UNKNOWN_MODEL

            # the fit calls runs without a model name UNKNOWN_MODEL: such a run of the fit was
            # given the population level (`forecast --prior fit.nc` of a CSV export said
            # "model=new, population level")
            llm = UNKNOWN_MODEL if UNKNOWN_MODEL in fitted_llms else None
        note = ""
        if llm is not None and fitted_llms and llm not in fitted_llms:
            # `forecast tiny.nc --prior bandit.nc` read "model=tiny-gpt2" as if the fit knew it
            note = (
                f"LLM {llm!r} is not in the fit (its LLMs: {fitted_llms}): the prior's dynamics are "
                "the fit's population level at this run's hyperparameters"
            )
        note = "; ".join(n for n in (note, defaulted) if n)
        if llm in fitted_llms and not np.isfinite(float(kw["group_size"])):
            # the noise of a fitted LLM's prior depends on G; `fit` says how it takes a run of unknown
            # G (model.prepare), `forecast --prior` of such a run said nothing
            unknown_g = (
                f"the group_size of run {run_id!r} is unknown: the prior's noise is taken at its LLM's "
                "reference G (the geometric mean of its fitted runs' known G), as the fit takes its "
                "runs of unknown G"
            )
            note = "; ".join(n for n in (note, unknown_g) if n)
        if getattr(posterior, "parameterisation", "mechanistic") == "phenomenological":
            unseen = phenomenological_setting_note(posterior, coords, llm)
            note = "; ".join(n for n in (note, unseen) if n)
        elif llm in fitted_llms:
            # one curvature K for the LLM's Adam and SGD runs: the fit's note, as predict repeats it
            from bayes_grpo.model.prepare import mixed_optimizer_start

            mixed = [n for n in posterior.data.notes if n.startswith(mixed_optimizer_start(llm))]
            note = "; ".join(n for n in (note, *mixed) if n)
        if getattr(posterior, "parameterisation", "mechanistic") != "phenomenological":
            # the prior is the fit's prediction at this run's setting: where `predict` warns that
            # it leaves the fitted runs' range, so does the forecast (`--prior tiny.nc` of the
            # K_ref 8 run, fitted K_ref 1-2, said nothing)
            from bayes_grpo.predict.predict import fitted_range_warnings

            outside = fitted_range_warnings(
                posterior,
                model=llm,
                learning_rate=float(kw["learning_rate"]),
                momentum=float(kw["momentum"]),
                k_ref=float(kw["k_ref"]),
                momentum_convention=str(kw["momentum_convention"]) if "momentum_convention" in kw else None,
                discrepancy_note=False,  # predict's band has a law-discrepancy term, this prior not
            )
            if outside:
                outside_note = f"the prior is the fit's prediction at this run's setting ({'; '.join(outside)})"
                note = "; ".join(n for n in (note, outside_note) if n)
        try:
            with _model_size_notes() as unused:
                prior = prior_from_posterior(
                    posterior,
                    model=llm,
                    model_size=size,
                    fallback=fallback,
                    label=label,
                    reward_bounds=reward_bounds,
                    **kw,
                )
            return prior, "; ".join(n for n in (note, *unused) if n)
        except (ValueError, KeyError) as exc:
            if getattr(posterior, "parameterisation", "mechanistic") == "phenomenological":
                # its coefficient_draws(model=None) gives the fit's only LLM, plateau and noise
                # included: `forecast tiny.nc --prior pheno.nc` forecast a tiny-gpt2 run with
                # another LLM's posterior and said "used the population level"
                # the fit is named here once: a saved fit's refusal starts with its file
                # (GRPODynamicsModel.coefficient_draws), which read "fit phen.nc has no prior
                # (phen.nc: the phenomenological model ...)"
                source = getattr(posterior, "source_path", None)
                reason = str(exc)
                if source is not None and reason.startswith(f"{source}: "):
                    reason = reason[len(f"{source}: ") :]
                    label = label or str(source)
                raise ForecastError(
                    f"run {run_id!r} is of LLM {coords['model']!r}, for which the phenomenological "
                    f"fit{' ' + label if label else ''} has no prior ({reason}); use a mechanistic fit "
                    "(its population level), a fit of this LLM, or no --prior (the run-based prior)"
                ) from None
            with _model_size_notes() as unused:
                prior = prior_from_posterior(
                    posterior, model=None, model_size=size, fallback=fallback, label=label, reward_bounds=reward_bounds, **kw
                )
            return (
                prior,
                "; ".join(
                    [f"LLM {coords['model']!r} not usable in the fit ({exc}); prior: {prior.source}", *unused]
                ),
            )
    if not use_runs:
        return None, ""
    if reward_bounds is FIT_BOUNDS:
        reward_bounds = None  # no fit: the run-based prior's noise is constant unless told bounds
    # in the order of their ids, not of the run set: the mixture's components (and the draws
    # the seed gives them) were in run-set order, so reordering the run set moved the forecast
    others = sorted(str(r) for r in runset["run"].values if str(r) != run_id)
    outside = []
    if reward_bounds is not None:
        # a run logged outside the bounds is of another reward: it is left out, named. Its rewards
        # failed the bounds check of the prior's fits and took the whole run-based prior with them
        # (`forecast real.nc --run sun_q35_9b_g2_rho1.0_s43 --upto 60 --reward-bounds 0 1`: weak
        # prior, "run-based prior failed (observed rewards lie outside the reward bounds [0, 1]
        # (min 0.05, max 1.8)...)", naming no run, beside the runs of rewards in [0, 1])
        outside = [r for r in others if rewards_outside(runset[REWARD_VAR].sel(run=r).values, reward_bounds).any()]
        others = [r for r in others if r not in outside]
    left_out = (
        f"{counted(len(outside), 'other run')} left out of the prior, logged outside the reward "
        f"bounds {bounds_text(reward_bounds)} (another reward): "
        + ", ".join(outside)
        if outside
        else ""
    )

    def noted(text: str) -> str:
        return "; ".join(n for n in (left_out, text) if n)

    # an unknown LLM ("") is nobody's same LLM: runs without a model name may be any LLMs
    same = [
        r
        for r in others
        if coords["model"] and str(runset["model"].sel(run=r).values) == coords["model"]
    ]
    chosen = same if (len(same) >= 2 or same_model_only) else others
    if len(chosen) < 2:
        if same_model_only and not coords["model"]:
            return None, noted("the run's LLM is unknown, so no run is of the same LLM: weak default prior")
        return None, noted("fewer than 2 other runs: weak default prior")
    steps = runset["step"].values.astype(float)
    runs = [(steps, runset[REWARD_VAR].sel(run=r).values.astype(float)) for r in chosen]
    pairs = None
    if retime and chosen is same:
        pairs = [retime_settings(run_coords(runset, r), coords) for r in chosen]
    try:
        prior = prior_from_runs(
            runs,
            source=counted(len(chosen), "other run") + (" of the same LLM" if chosen is same else ""),
            # the other runs' logs are fitted on the run set's span, whatever horizon is asked
            # of this run's forecast: with `--horizon 10000` on 400-step runs every fit stayed
            # at its weak prior's mode (a rise spread over thousands of steps, onset at 200)
            # and the forecast of steps 61..400 went flat (backtest RMSE 0.07 -> 0.35 at 1e6)
            horizon=float(steps.max()),
            reward_bounds=reward_bounds,
            kind=prior_kind,
            retime=pairs,
        )
    except ForecastError as exc:
        return None, noted(f"run-based prior failed ({exc}); weak default prior")
    if chosen is not same and prefix is not None:
        # other LLMs (or LLMs not named): their dynamics inform this run, their reward scale not
        prior = with_levels_from(
            prior,
            default_prior(prefix[0], prefix[1], horizon=horizon),
            source=prior.source + " (dynamics only; plateau, R0 and noise scaled to the prefix)",
        )
    return prior, left_out


def retime_settings(
    source: Mapping[str, object], target: Mapping[str, object]
) -> tuple[dict[str, object], dict[str, object]] | None:
    """The ``(source, target)`` settings that carry a run of an LLM to another run's setting.

    ``source`` and ``target`` are run coordinates (:func:`bayes_grpo.runset.run_coords`).
    Needs a known, positive learning rate in both. Momentum, ``K_ref`` and the momentum
    convention must each be known in both or unknown in both; unknown in both, they are
    taken to be equal (momentum 0, no lag, heavy-ball: then only the learning-rate ratio
    acts, ``w0`` scaling as its square root). Runs of different momentum conventions are not
    compared: an EMA run (Adam's ``beta1``) and a heavy-ball run (SGD) differ in optimizer,
    and Adam's per-parameter normalisation changes the curvature a learning rate acts on,
    which the run coordinates do not record. Returns None when the runs cannot be compared
    (e.g. one run's learning rate unknown) or are at the same setting (nothing to do).
    """

    def number(coords: Mapping[str, object], name: str) -> float:
        value = coords.get(name, float("nan"))
        return float(value) if value is not None and value != "" else float("nan")

    lr_s, lr_t = number(source, "learning_rate"), number(target, "learning_rate")
    if not (np.isfinite(lr_s) and np.isfinite(lr_t) and lr_s > 0.0 and lr_t > 0.0):
        return None
    pair: tuple[dict[str, object], dict[str, object]] = (
        {"learning_rate": lr_s},
        {"learning_rate": lr_t},
    )
    for name, unknown in (("momentum", 0.0), ("k_ref", 0.0)):
        s_val, t_val = number(source, name), number(target, name)
        if np.isfinite(s_val) != np.isfinite(t_val):
            return None
        pair[0][name] = s_val if np.isfinite(s_val) else unknown
        pair[1][name] = t_val if np.isfinite(t_val) else unknown
    s_conv = str(source.get("momentum_convention") or "")
    t_conv = str(target.get("momentum_convention") or "")
    if bool(s_conv) != bool(t_conv) and (pair[0]["momentum"] or pair[1]["momentum"]):
        return None
    if s_conv and t_conv and s_conv != t_conv:
        return None  # Adam-like (EMA) against SGD-like (heavy-ball): another preconditioner
    pair[0]["momentum_convention"] = s_conv or t_conv or HEAVY_BALL
    pair[1]["momentum_convention"] = t_conv or s_conv or HEAVY_BALL
    if pair[0] == pair[1]:
        return None
    return pair


def run_series(
    runset: xr.Dataset, run_id: str, var: str = "reward"
) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of one run, steps with a finite value only, in step order
    (:func:`logged_points`)."""
    vals = np.asarray(runset[var].sel({RUN_DIM: run_id}).values, dtype=float)
    return logged_points(runset[STEP_DIM].values, vals)


def forecast_grid(
    horizon: float,
    logged_steps: Sequence[float] | np.ndarray = (),
    *,
    max_points: int = FORECAST_GRID_POINTS,
) -> np.ndarray:
    """Steps a forecast up to ``horizon`` is evaluated at: bounded, not one per step.

    A horizon of fewer than ``max_points`` steps gets every step ``0, 1, ..., floor(horizon)``
    (the grid of an ordinary run, unchanged). A longer one gets ``max_points`` evenly spaced
    steps from 0 to ``floor(horizon)`` (rounded to whole steps) together with every
    ``logged_steps`` in ``[0, horizon]``, so the bands are exact at the steps a backtest scores
    (:func:`forecast_band` interpolates only between grid steps). The size is at most
    ``max_points`` plus the number of logged steps within the horizon, whatever the horizon
    in steps: the mean trajectory is closed-form and the state-space forecast propagates
    exactly over intervals of any length, so neither needs a step-by-step grid. Milestones
    (``time_to_fraction_*``) and the stop step are the first *grid* steps that qualify, i.e.
    at grid resolution (``floor(horizon) / (max_points - 1)`` steps on the even part; one
    step on the per-step grid), not interpolated.
    """
    if max_points < 2:
        raise ValueError(f"max_points must be at least 2, got {max_points}")
    end = float(np.floor(float(horizon)))
    if end + 1.0 <= max_points:
        return np.arange(0.0, float(horizon) + 1.0)
    even = np.round(np.linspace(0.0, end, max_points))
    logged = np.asarray(logged_steps, dtype=float).ravel()
    logged = logged[np.isfinite(logged) & (logged >= 0.0) & (logged <= float(horizon))]
    return np.unique(np.concatenate([even, logged]))


def run_observation_lag(runset: xr.Dataset, run_id: str) -> float:
    """Steps by which run ``run_id``'s logged reward trails its policy, from its ``source`` and
    ``k_ref`` (:func:`bayes_grpo.predict.predict.observation_lag_of`: 1 for a training log, 0
    for the SDE simulator, ``k_ref`` for the bandit); NaN where that rule needs a ``k_ref`` the
    run set does not give (the forecast then gives no policy milestones)."""
    from bayes_grpo.predict.predict import observation_lag_of
    from bayes_grpo.runset import run_coords

    coords = run_coords(runset, run_id)
    return observation_lag_of(str(coords["source"]), float(coords["k_ref"]))


def forecast_in_runset(
    runset: xr.Dataset,
    run_id: str,
    upto: float,
    *,
    posterior: object | None = None,
    use_runs: bool = True,
    same_model_only: bool = False,
    prior_kind: str = "mixture",
    reward_bounds: tuple[float, float] | None = None,
    likelihood: str = "state_space",
    horizon: float | None = None,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    seed: int = 0,
    n_draws: int = 1000,
    calibrate: bool = False,
    check_instability: bool = True,
    retime: bool = True,
) -> xr.Dataset:
    """Forecast run ``run_id`` of a run set from its steps up to ``upto`` (``bayes-grpo forecast``).

    The prior is :func:`population_prior_for_run` (``posterior``, else the other runs when
    ``use_runs``, else the weak default; with ``retime``, the default, the other runs of the
    same LLM are first carried to this run's learning rate, momentum and ``K_ref``); the
    forecast covers steps ``0..horizon`` (default:
    the run's last logged step, or ``2 * upto`` when the run ends at ``upto``; a shorter run
    beside longer ones is not forecast to their end), at the
    steps of :func:`forecast_grid` (every step for a horizon under
    :data:`FORECAST_GRID_POINTS` steps; else an even grid plus the run's logged steps, so
    milestones and the stop step are at grid resolution and the backtest is exact).

    ``calibrate``: scale the bands of the logged reward by the split-conformal band scale
    from backtests of the *other* runs of the run set at the same ``upto``, each forecast as
    this run is (same prior rule, built without it and without ``run_id``; scored up to
    ``horizon``): :func:`bayes_grpo.predict.calibration.calibrate_for_run` and
    :func:`~bayes_grpo.predict.calibration.apply_band_calibration`, the code the forecast
    evaluation calibrates with. Needs at least two other runs with 5+ steps up to ``upto``
    and some after it (else :class:`ForecastError`).

    When the run set holds steps of ``run_id`` after ``upto`` (up to ``horizon``), the
    forecast is scored on them: attrs ``backtest_coverage_<p>`` (the widest band; with
    ``calibrate`` also ``backtest_coverage_raw_<p>``), ``backtest_rmse``, ``backtest_steps``.
    Other attrs: ``run``, ``prior_source``, ``prior_note``, and with ``calibrate``
    ``band_scale`` and ``calibration`` (JSON).

    ``reward_bounds`` None with a ``posterior`` fitted with reward bounds
    (``GRPODynamicsModel.reward_bounds``, ``fit --reward-bounds``): the fit's bounds, when the
    run's rewards lie in them (``prior_note`` says which).

    ``check_instability``: put the run's steps up to ``upto`` (reward and side metrics:
    grad norm, clip ratio, importance ratio) through the instability diagnostic
    (:func:`bayes_grpo.diagnostics.instability`, default thresholds). The forecast's law
    is a stable oscillator (``zeta > 0``), so it cannot draw a run that is diverging or
    clipping its way through the updates; when the diagnostic detects instability the
    forecast says so in its warnings, and attr ``prefix_instability`` (JSON, see
    :func:`prefix_instability`) holds the evidence either way. A damped oscillation and a
    growing grad norm do not count (see there).

    A run whose reward is constant up to ``upto`` (a run solved from step 0) has no dynamics
    to fit: its warnings say so, in the words of ``fit``'s note
    (:func:`bayes_grpo.model.prepare.constant_reward_note`); nor any noise, which is then the
    prior's (:func:`noise_held_at_prior`).
    """
    from bayes_grpo.dynamics.trajectory import starts_late
    from bayes_grpo.model.prepare import constant_reward, constant_reward_note
    from bayes_grpo.runset import REWARD_VAR, RunSetError
    from bayes_grpo.runset.core import require_dataset

    reward_bounds = checked_bounds(reward_bounds)
    runs = [str(r) for r in require_dataset(runset)["run"].values]
    if run_id not in runs:
        raise RunSetError(f"no run {run_id!r}; runs: {runs}")
    try:
        check_stop_threshold(stop_threshold)
        # before the other runs' priors are built and backtested, not after
        hdi_probs, n_draws = checked_hdi_probs(hdi_probs), checked_n_draws(n_draws)
        checked_seed(seed)
    except ValueError as exc:
        raise ForecastError(str(exc)) from None
    for name, value in (("upto", upto), ("horizon", horizon)):
        # a NaN upto said the run "has 0 rewards up to step nan", an infinite horizon that the
        # weak prior "has non-finite moments" (the CLI's --upto and --horizon are refused so)
        if value is not None and not np.isfinite(float(value)):
            raise ForecastError(f"{name} {float(value):g} is not a step: give a finite optimizer step")
    t_all, y_all = run_series(runset, run_id, REWARD_VAR)
    if reward_bounds is not None:
        check_rewards_within(y_all, [run_id], t_all, reward_bounds, error=ForecastError, without="forecast without them")
    seen = t_all <= upto
    if seen.sum() < 3:
        raise ForecastError(
            f"run {run_id!r} has {counted(int(seen.sum()), 'reward')} up to step {upto:g}; need at least 3"
        )
    last = float(t_all.max())
    late_upto = None
    if upto > last:
        # a forecast "from step 5000" of a log that ends at 300 is one from step 300: say so,
        # and count the default horizon from the step the data reach
        late_upto = (
            f"--upto {float(upto):g} is past the last logged step {last:g} of run {run_id!r}: "
            f"the forecast starts from step {last:g}"
        )
        upto = last
    else:
        late_upto = _upto_in_a_gap(t_all, upto, run_id)
    if horizon is None:
        horizon = last if last > upto else 2.0 * float(upto)
    elif not float(horizon) > float(upto):
        raise ForecastError(
            f"horizon {float(horizon):g} is not after the last observed step {float(upto):g} "
            f"of run {run_id!r}: there is nothing to forecast (give a horizon past --upto)"
        )
    grid = forecast_grid(float(horizon), t_all)
    posterior_label, posterior_notes = None, []
    if isinstance(posterior, str | os.PathLike):
        # once: with `calibrate` a prior is built for every other run, and each load of the
        # file read it again and repeated its warnings (`forecast --prior F --calibrate` on 6
        # runs printed F's convergence and residual warnings 6 times)
        posterior_label = str(posterior)
        from bayes_grpo.model.core import as_fitted_model  # lazy: the model area is heavy to import

        posterior, posterior_notes = as_fitted_model(posterior, error=ForecastError)
    bounds_note = ""
    if reward_bounds is None and getattr(posterior, "reward_bounds", None) is not None:
        # a fit with reward bounds (fit --reward-bounds) says the reward lies in them: its
        # plateau draws do, and a forecast from it without them drew noise past them
        fit_bounds = tuple(posterior.reward_bounds)
        text = bounds_text(fit_bounds)
        outside = np.flatnonzero(rewards_outside(y_all, fit_bounds))
        if outside.size == 0:
            reward_bounds, bounds_note = fit_bounds, f"reward bounds {text} taken from the fit"
        else:
            # another reward than the fit's: forecast without bounds rather than refuse bounds
            # the user did not give; the run's first reward outside, as the check names it
            first = outside[0]
            count = f", {outside.size} rewards outside" if outside.size > 1 else ""
            bounds_note = (
                f"the fit's reward bounds {text} are not this run's ({STEP_DIM} {t_all[first]:g}: "
                f"{y_all[first]:.6g}{count}): forecast without bounds"
            )

    def prior_rule(rid: str, rs: xr.Dataset) -> tuple[GaussianPrior | MixturePrior | None, str]:
        t_r, y_r = run_series(rs, rid, REWARD_VAR)
        ok = t_r <= upto
        # the bounds decided above, given explicitly: None for a run logged outside the fit's
        # bounds is "no bounds" (the prior on p* and R0 themselves), not "the fit's"
        return population_prior_for_run(
            rs,
            rid,
            posterior=posterior,
            use_runs=use_runs,
            prefix=(t_r[ok], y_r[ok]),
            horizon=float(horizon),
            same_model_only=same_model_only,
            reward_bounds=reward_bounds,
            prior_kind=prior_kind,
            retime=retime,
            posterior_label=posterior_label,
        )

    prior, note = prior_rule(run_id, runset)
    note = "; ".join(n for n in (bounds_note, note) if n)
    fc = forecast_run(
        t_all[seen],
        y_all[seen],
        grid,
        prior=prior,
        observation_lag=run_observation_lag(runset, run_id),
        hdi_probs=hdi_probs,
        stop_threshold=stop_threshold,
        n_draws=n_draws,
        rng=seed,
        likelihood=likelihood,
        reward_bounds=reward_bounds,
        attrs={
            "run": run_id,
            # the saved fit's own warnings (did not converge, an i.i.d. fit too confident), as
            # predict keeps them: `forecast --prior F --json` had them on stderr only
            **({"posterior_warnings": json.dumps(posterior_notes)} if posterior is not None else {}),
            "prior_note": note,
            "prior_source": prior.source
            if prior is not None
            else "default (weak, scaled to the prefix)",
        },
    )
    raw = fc
    if calibrate:
        from bayes_grpo.predict.calibration import apply_band_calibration, calibrate_for_run

        cal = calibrate_for_run(
            runset,
            run_id,
            upto=float(upto),
            prior_for=lambda rid, rs: prior_rule(rid, rs)[0],
            horizon=float(horizon),
            hdi_probs=hdi_probs,
            seed=seed,
            n_draws=n_draws,
            likelihood=likelihood,
            reward_bounds=reward_bounds,
        )
        fc = apply_band_calibration(fc, cal)
    notes = [late_upto] if late_upto is not None else []
    # the prefix's end as the output's upto_step gives it: the last logged step at or before
    # --upto (`--upto 150` of a run logged at odd steps saw 149; the notes said "up to step 150")
    seen_to = float(t_all[seen].max())
    if starts_late(t_all[seen]):
        # fit and compare say this of such runs (model.prepare.shape_notes); a forecast of a log
        # resumed at step 1000 said only that its importance sampling was unreliable (90%
        # coverage 0.09 of its own later steps)
        notes.append(
            f"run {run_id!r} starts late (first logged step {t_all[0]:g}, last seen {seen_to:g}): "
            "the forecast's law puts the start of training (R0, zero velocity) at step 0 and "
            "draws the steps before the first logged one; if the log does start at the start of "
            "training (a step counter offset), number its steps from 0"
        )
    if constant_reward(y_all[seen]):
        level, n_seen = y_all[seen][0], int(seen.sum())
        label = f"{run_id} ({level:g} at all {n_seen} logged steps up to step {seen_to:g})"
        notes.append(constant_reward_note([label], forecast=True))
    if check_instability:
        found = prefix_instability(runset, run_id, upto)
        fc.attrs["prefix_instability"] = json.dumps(found)
        if found["detected"]:
            onset = found["onset_step"]
            notes.append(
                f"the instability diagnostic flags the steps up to {seen_to:g} "
                f"({'; '.join(found['signals'])}"
                + (f", from step {onset:g}" if onset is not None else "")
                + "): this forecast's law is a stable oscillator and cannot draw an unstable "
                "run, so if the instability is real its bands, regime and stop step do not "
                "describe this run (evidence: `bayes-grpo diagnose`)"
            )
    if reward_bounds is None:
        unbounded = unbounded_rate_note(fc, runset[REWARD_VAR].values)
        if unbounded:
            notes.append(unbounded)
    n_fitted = fitted_rewards_after(posterior, runset, run_id, upto) if posterior is not None else 0
    if n_fitted and (~seen & (t_all <= horizon)).any():
        # `forecast runs.nc --run B-s0 --upto 40 --prior fit.nc`, fit.nc fitted to runs.nc:
        # backtest_rmse 0.024 against 0.055 with the run-based prior, and nothing said why
        notes.append(
            f"the posterior prior{' ' + posterior_label if posterior_label else ''} was fitted to {counted(n_fitted, 'reward')} of run "
            f"{run_id!r} after step {seen_to:g}: it has seen the steps this forecast is scored "
            "on, so the backtest_* figures are in-sample, not a test of the forecast (refit "
            "without them, or use the run-based prior)"
        )
    if calibrate and posterior is not None:
        # the band scale is set by backtests of the other runs from this --prior: runs the fit
        # saw after `upto` are backtested in-sample, so their bands look good enough and kappa
        # comes out too small (`forecast tiny.nc --run R --prior models/tiny.nc --calibrate`)
        cal_runs = json.loads(fc.attrs["calibration"])["runs"]
        seen_by_fit = [r for r in cal_runs if fitted_rewards_after(posterior, runset, r, upto)]
        if seen_by_fit:
            notes.append(
                f"the posterior prior{' ' + posterior_label if posterior_label else ''} was fitted to "
                f"the steps after {float(upto):g} of {len(seen_by_fit)} of the {len(cal_runs)} "
                f"calibration runs ({', '.join(seen_by_fit)}): their backtests are in-sample, so "
                "the band scale may come out too small (calibrate with a fit without those steps, or "
                "without --prior)"
            )
    add_warnings(fc, notes)
    # the run's logged rewards (prefix and, where logged, the rest) travel with the forecast,
    # so its file draws them wherever it is plotted (the report had the bands only)
    fc[LOGGED_REWARD_VAR] = xr.DataArray(
        y_all, dims=LOGGED_STEP_DIM, coords={LOGGED_STEP_DIM: t_all},
        attrs={"long_name": f"reward logged by run {run_id} (the forecast saw the steps up to upto_step)"},
    )  # fmt: skip
    rest = ~seen & (t_all <= horizon)
    if rest.any():
        prob = (
            HDI_PROB if any(abs(p - HDI_PROB) < 1e-9 for p in hdi_probs) else float(max(hdi_probs))
        )
        lo, hi = forecast_band(fc, t_all[rest], kind="obs", hdi_prob=prob)
        # the point forecast, as benchmarks/evaluate_forecasts.py scores it: the expected logged
        # reward, which continues the run's own state (state space) and is censored at reward
        # bounds; the mean trajectory (the law's, from the start) scored 0.324 where the point
        # scores 0.136 (g16_p8_lr0.001_k1_adamw_s0 of data/tiny from step 150, bounds 0 1)
        point = np.interp(t_all[rest], fc[STEP_DIM].values, fc["point_forecast"].values)
        fc.attrs[f"backtest_coverage_{prob:g}"] = coverage(y_all[rest], lo, hi)
        if calibrate:
            rlo, rhi = forecast_band(raw, t_all[rest], kind="obs", hdi_prob=prob)
            fc.attrs[f"backtest_coverage_raw_{prob:g}"] = coverage(y_all[rest], rlo, rhi)
        fc.attrs["backtest_rmse"] = float(np.sqrt(np.mean((y_all[rest] - point) ** 2)))
        fc.attrs["backtest_steps"] = int(rest.sum())
    return fc


#: How far (reward units) a forecast's band may leave ``[0, 1]`` before
#: :func:`unbounded_rate_note` names the missing reward bounds.
RATE_BAND_SLACK: float = 1e-3


def unbounded_rate_note(fc: xr.Dataset, rewards: np.ndarray) -> str | None:
    """A warning for a forecast made without reward bounds whose widest band of the logged
    reward leaves ``[0, 1]`` (by more than :data:`RATE_BAND_SLACK`) where every reward of the
    run set (``rewards``, any shape, NaN: not logged) lies in it: a success rate, whose bounds
    the forecast did not know. A run of such a reward flat at 0 was forecast 90% bands from
    -0.03 to 1.18 with nothing said of the bounds; ``--reward-bounds 0 1`` keeps them inside
    (:func:`noise_shape`, :func:`censor`). None otherwise."""
    from bayes_grpo.predict.summary import band

    values = np.asarray(rewards, dtype=float)
    values = values[np.isfinite(values)]
    if not values.size or values.min() < 0.0 or values.max() > 1.0:
        return None
    prob = float(np.max(fc["hdi_prob"].values))
    lo, hi = band(fc, kind="obs", hdi_prob=prob)
    low, high = float(np.nanmin(lo)), float(np.nanmax(hi))
    if not (low < -RATE_BAND_SLACK or high > 1.0 + RATE_BAND_SLACK):
        return None
    return (
        f"no reward bounds were given, so the forecast takes the reward as unbounded with constant "
        f"noise: its {prob:.0%} band of the logged reward reaches [{low:.3g}, {high:.3g}], outside "
        "[0, 1], where every reward of the run set lies (a success rate or accuracy?); if the "
        "reward is bounded, forecast with --reward-bounds 0 1 (reward_bounds=(0, 1)): noise "
        "largest mid-range, logged rewards kept in the bounds"
    )


def _upto_in_a_gap(t: np.ndarray, upto: float, run_id: str) -> str | None:
    """A note when ``upto`` falls in a gap of the run's log: its last logged step before
    ``upto`` is further back than twice the log's usual interval (the median spacing), so the
    forecast starts there, not at ``upto``. A run logging every ``K_ref`` steps is no gap."""
    t = np.sort(np.asarray(t, dtype=float))
    seen = t[t <= upto]
    if seen.size < 2 or t.size < 3:
        return None
    usual = float(np.median(np.diff(t)))
    if upto - seen[-1] > 2.0 * usual:
        return (
            f"--upto {float(upto):g} falls in a gap of the log of run {run_id!r} (last logged step "
            f"before it: {seen[-1]:g}, usual interval {usual:g}): the forecast starts from step "
            f"{seen[-1]:g}"
        )
    return None


def fitted_rewards_after(posterior: object, runset: xr.Dataset, run_id: str, upto: float) -> int:
    """How many of run ``run_id``'s rewards after step ``upto`` the fitted model ``posterior``
    was fitted to: its fitted run set's rewards of that run id after ``upto`` that equal the
    run set's (0 for a model without its run set, or that has no such run)."""
    from bayes_grpo.runset import REWARD_VAR

    fitted = getattr(posterior, "runset", None)
    if fitted is None or run_id not in [str(r) for r in fitted["run"].values]:
        return 0
    theirs = fitted[REWARD_VAR].sel(run=run_id).astype(float)
    mine = runset[REWARD_VAR].sel(run=run_id).astype(float)
    theirs, mine = xr.align(theirs, mine, join="inner")
    later = theirs["step"].values.astype(float) > float(upto)
    same = np.isclose(theirs.values, mine.values, rtol=1e-6, atol=0.0)
    return int((later & same).sum())


def prefix_instability(runset: xr.Dataset, run_id: str, upto: float) -> dict[str, object]:
    """The instability diagnostic on run ``run_id``'s logged steps up to ``upto``.

    Only signals the forecast's stable law cannot draw count: a damped reward oscillation is
    its underdamped regime (``WITHIN_THE_LAW``), and the grad norm's growth over a prefix that
    holds the take-off is the growing share of groups with signal (``TAKE_OFF_CONFOUNDED``).

    Returns ``{"detected": bool | None, "onset_step": float | None, "signals": [...],
    "diagnostic": str}``: ``signals`` are the counted detected signals (``"sustained
    clipping (clip_ratio: ... 0.36)"``, ...); ``detected`` is None when the prefix cannot be
    assessed (too few points); ``onset_step`` is the earliest onset of the counted signals;
    ``diagnostic`` is the diagnostic's own sentence (all its signals); ``set_aside`` the detected
    signals the forecast does not count, each with why (a reward oscillation: the law draws it; a
    growing grad norm: confounded with the reward's take-off).
    """
    from bayes_grpo.diagnostics import DiagnosticsConfig, instability, run_table
    from bayes_grpo.diagnostics.instability import (
        TAKE_OFF_CONFOUNDED,
        WITHIN_THE_LAW,
        detected_signals,
    )

    config = DiagnosticsConfig.from_mapping({"common": {"figures": False}})
    frame = run_table(runset, run_id)
    frame = frame.loc[frame.index <= upto]
    res = instability(frame, run_id=run_id, config=config.instability, common=config.common)
    signals, onset = detected_signals(res, leave_out=WITHIN_THE_LAW + TAKE_OFF_CONFOUNDED)
    every, _ = detected_signals(res, leave_out=())
    # the diagnostic's sentence can read "instability detected: growth of grad norm" beside
    # detected False: say which of its signals the forecast does not count, and why
    why = {name: "the law draws it" for name in WITHIN_THE_LAW} | {
        name: "confounded with the reward's take-off" for name in TAKE_OFF_CONFOUNDED
    }
    set_aside = [
        f"{text}: {why[name]}" for text in every if text not in signals for name in why if text.startswith(name)
    ]
    return {
        "detected": None if res.passed is None else bool(signals),
        "onset_step": onset,
        "signals": signals,
        "set_aside": set_aside,
        "diagnostic": res.summary,
    }


#: The run's hyperparameters a mechanistic posterior needs for its coefficients.
SETTING_COORDS: tuple[str, ...] = ("learning_rate", "momentum", "momentum_convention", "k_ref")


def _posterior_setting(
    fitted: object, coords: dict[str, object], run_id: str, *, taken: list[str] | None = None
) -> dict[str, object]:
    """The keyword arguments of :func:`prior_from_posterior` for a run of a run set.

    Each hyperparameter is the run's, else the fit's default for unknown values
    (``hyperparameter_defaults``, ``fit --default``), as the fit resolved its own runs. A
    phenomenological fit does not use them (its coefficients are its LLM's), so a run that
    lacks them is still forecast; a mechanistic fit needs all four. An unknown G (NaN) is
    the LLM's reference G, as the fit takes it for such runs. ``taken``, when given, receives
    ``"name=value"`` of each setting taken from the fit's defaults.
    """
    from bayes_grpo.model.prepare import convention_without_momentum

    config = getattr(fitted, "model_config", None) or {}
    defaults = config.get("hyperparameter_defaults") or {}
    kw: dict[str, object] = {"group_size": coords["group_size"]}
    if not np.isfinite(float(coords["group_size"])) and defaults.get("group_size") is not None:
        # the fit took such a run at its default G (fit --default group_size=8), not at a reference G
        kw["group_size"] = float(defaults["group_size"])
        if taken is not None:
            taken.append(f"group_size={kw['group_size']:g}")
    missing = []
    for name in SETTING_COORDS:
        value = coords[name]
        if name == "momentum_convention" and not value:  # none needed without momentum, as in the fit
            momentum = kw["momentum"] if np.isfinite(kw["momentum"]) else np.nan
            value = str(convention_without_momentum([momentum], [""])[0])
        known = bool(value) if name == "momentum_convention" else bool(np.isfinite(value))
        if not known and defaults.get(name) is not None:
            value, known = defaults[name], True
            if taken is not None:
                taken.append(f"{name}={value if name == 'momentum_convention' else f'{float(value):g}'}")
        if not known:
            missing.append(name)
        kw[name] = str(value) if name == "momentum_convention" else float(value)
    if missing and getattr(fitted, "parameterisation", "mechanistic") == "mechanistic":
        raise ForecastError(
            f"run {run_id!r} lacks {missing}; a posterior prior needs the run's hyperparameters (set them in the run set or use the run-based prior)"
        )
    return kw


# --------------------------------------------------------------------------- Laplace + IS


@dataclass
class RunPosterior:
    """Importance-sampled posterior of one run's ``u`` given its observed steps."""

    draws: np.ndarray  # (n_draws, 6) (+ logit rho for state space), equally weighted
    mode: np.ndarray  # (6,) or (7,)
    cov: np.ndarray  # Laplace covariance
    pareto_k: float
    ess: float
    n_obs: int
    log_post_mode: float
    warnings: list[str] = field(default_factory=list)
    likelihood: str = "iid"
    reward_bounds: tuple[float, float] | None = None
    method: str = "laplace_psis"  # "mixture_laplace_psis", or "adaptive_is_<rounds>"
    t: np.ndarray = field(default_factory=lambda: np.zeros(0))  # observed steps
    y: np.ndarray = field(default_factory=lambda: np.zeros(0))  # observed rewards
    # why the forecast has no stop step (a constant prefix whose prior knows no rise either)
    no_stop_reason: str | None = None
    # of a prior on the latent levels (latent_bounds): the mode and Laplace covariance in its
    # coordinates (p* and R0 latent), where mode and cov above are as rewards; None otherwise
    latent_mode: np.ndarray | None = None
    latent_cov: np.ndarray | None = None


def _negative_log_posterior(loglik, t: np.ndarray, y: np.ndarray, mean: np.ndarray, prec: np.ndarray):
    """``(value, rows)``: the negative log posterior of one parameter vector under ``loglik``
    (rows -> log-likelihood per row) and the Gaussian prior ``(mean, prec)``, up to a constant
    (1e300 where not finite), and the same of each row of a matrix in one likelihood call (the
    ``f`` and ``rows`` of :func:`_numeric_hessian`): the Laplace fits' objective, a Gaussian
    prior's and each mixture component's."""

    def value(u: np.ndarray, ll: float | None = None) -> float:
        d = u - mean
        with np.errstate(all="ignore"):
            val = float(-(loglik(u[None, :], t, y)[0] if ll is None else ll) + 0.5 * d @ prec @ d)
        return val if np.isfinite(val) else 1e300

    def rows(u: np.ndarray) -> list[float]:
        with np.errstate(all="ignore"):
            ll = loglik(u, t, y)
        return [value(p, v) for p, v in zip(u, ll)]

    return value, rows


def _numeric_hessian(f, x: np.ndarray, h: np.ndarray, rows=None) -> np.ndarray:
    """Central-difference Hessian of ``f`` at ``x`` (steps ``h``).

    ``rows``, when given, is ``f`` of many points at once (``(k, d)`` to ``(k,)``, each row's
    value ``f``'s of that row): every point of the differences is then evaluated in one call,
    the same values as one ``f`` call per point (73 of them in 6 dimensions) at a share of the
    cost.
    """
    n = x.size
    hess = np.empty((n, n))
    # the points in the order the differences read them: x, then per (i, j) x +- ei (+- ej)
    points = [x]
    for i in range(n):
        for j in range(i, n):
            ei = np.zeros(n)
            ej = np.zeros(n)
            ei[i] = h[i]
            ej[j] = h[j]
            if i == j:
                points += [x + ei, x - ei]
            else:
                points += [x + ei + ej, x + ei - ej, x - ei + ej, x - ei - ej]
    values = iter(rows(np.array(points)) if rows is not None else [f(p) for p in points])
    f0 = next(values)
    for i in range(n):
        for j in range(i, n):
            if i == j:
                val = (next(values) - 2 * f0 + next(values)) / h[i] ** 2
            else:
                val = (next(values) - next(values) - next(values) + next(values)) / (4 * h[i] * h[j])
            hess[i, j] = hess[j, i] = val
    return hess


def _starts(
    prior: GaussianPrior, t: np.ndarray, y: np.ndarray, warm: np.ndarray | None
) -> list[np.ndarray]:
    """Starting points of the mode search in ``prior``'s coordinates (a start from the data, or
    ``warm``, a previous mode, has its ``p*`` and ``R0`` as rewards: taken to the prior's latent
    levels where it has them, :meth:`GaussianPrior.from_reward_levels`)."""
    starts = [prior.mean.copy()]
    if warm is not None:
        starts.append(prior.from_reward_levels(np.asarray(warm, dtype=float)))
    noise, span = _data_scale(y)
    k = max(1, y.size // 10)
    tmax = max(float(t.max()), 1.0)
    for w_scale, zeta in ((4.0, 1.5), (8.0, 0.5), (2.0, 3.0)):
        s = prior.mean.copy()
        s[:2] = prior.from_reward_levels(np.array([y[-k:].mean(), y[:k].mean()]))
        s[2] = np.log(w_scale / tmax)
        s[3] = np.log(zeta)
        s[4] = np.log(noise)
        starts.append(s)
    # a late onset: the last step at which the prefix is still near its start
    moved = np.abs(y - y[:k].mean()) > 0.25 * max(span, 1e-12)
    if moved.any() and np.argmax(moved) > 0:
        s = prior.mean.copy()
        s[5] = np.log(max(float(t[max(np.argmax(moved) - 1, 0)]), 1e-3))
        starts.append(s)
    return starts


@one_blas_thread()
def fit_run(
    t: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    prior: GaussianPrior | MixturePrior,
    *,
    n_draws: int = 1000,
    n_proposal: int = 4000,
    rng: np.random.Generator | int | None = 0,
    warm_start: np.ndarray | None = None,
    likelihood: str = "state_space",
    reward_bounds: tuple[float, float] | None = FIT_BOUNDS,
    adapt: bool = True,
) -> RunPosterior:
    """Posterior of one run's ``u`` given observed ``(t, y)``: Laplace proposal + PSIS,
    refined by adaptive importance sampling when the Pareto ``k`` exceeds 0.7.

    Parameters
    ----------
    t, y
        Observed steps and rewards (NaN rewards are dropped), at least 3.
    prior
        :class:`GaussianPrior` on ``u`` (a 5-coordinate one is completed with
        ``log t0 ~ NO_ONSET_PRIOR``).
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
    reward_bounds
        ``(lo, hi)`` of a bounded reward: noise variance shaped by :func:`noise_shape`.
        None: constant noise. Not given (:data:`FIT_BOUNDS`): the prior's
        (:func:`prior_bounds`), as in :func:`forecast_run`.
    adapt
        When the importance weights are unreliable (Pareto ``k > 0.7``), refine the proposal
        by adaptive importance sampling (:func:`_adaptive_is`; ``method`` of the result says
        which was used). False keeps the flagged importance-sampling draws.
    """

    bounds = checked_bounds(prior_bounds(prior) if reward_bounds is FIT_BOUNDS else reward_bounds)
    n_draws = checked_n_draws(n_draws)
    rng = np.random.default_rng(checked_seed(rng, "rng"))
    t, y = logged_points(t, y)
    if y.size < 3:
        raise ForecastError(f"need at least 3 observed steps with a finite reward, got {y.size}")
    if likelihood not in LIKELIHOODS:
        raise ForecastError(f"unknown likelihood {likelihood!r}; expected one of {LIKELIHOODS}")
    if bounds is not None:
        check_rewards_within(y, None, t, bounds, error=ForecastError, without="forecast without them")
    # the numerics (optimiser steps, the Laplace covariance's conditioning, the proposals) work
    # in the reward's own unit, so that a reward logged on 0-10 is forecast as the same reward
    # on 0-1 (the bands, means and milestones of one are the other's times 10), and from the
    # reward's own origin, so that a reward logged with an offset (100 + the success rate) is
    # forecast as the same reward without it (reward_frame)
    origin, unit = _fit_frame(y, prior)
    into = -origin / unit
    post = _fit_run_in_unit(
        t,
        (y - origin) / unit,
        rescale_prior(prior, 1.0 / unit, shift=into),
        n_draws=n_draws,
        n_proposal=n_proposal,
        rng=rng,
        warm_start=None if warm_start is None else rescale_u(warm_start, 1.0 / unit, shift=into),
        likelihood=likelihood,
        bounds=None if bounds is None else ((bounds[0] - origin) / unit, (bounds[1] - origin) / unit),
        adapt=adapt,
    )
    post.draws = rescale_u(post.draws, unit, shift=origin)
    post.mode = rescale_u(post.mode, unit, shift=origin)
    levels = _level_scales(post.cov.shape[0], unit)
    post.cov = post.cov * np.outer(levels, levels)
    if post.latent_mode is not None:
        post.latent_mode = rescale_u(post.latent_mode, unit, shift=origin)
        post.latent_cov = post.latent_cov * np.outer(levels, levels)
    # the log density of the rewards, the plateau and R0 in the rewards' own units (Jacobian)
    post.log_post_mode -= (y.size + 2) * float(np.log(unit))
    post.t, post.y, post.reward_bounds = t, y, bounds
    return post


def reward_unit(values: np.ndarray) -> float:
    """The reward unit a forecast's numerics work in: the power of ten nearest the largest size
    of ``values`` (rewards, and a prior's plateaus and initial rewards; 1 when all are 0).

    Rewards multiplied by a power of ten (a success rate logged as a percentage, a 0-10 score)
    are then fitted in the same numbers, and their forecast is the same forecast scaled; a
    reward of order 1 is fitted as it is (unit 1)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    size = float(np.max(np.abs(values))) if values.size else 0.0
    return float(10.0 ** np.round(np.log10(size))) if size > 0.0 else 1.0


#: A reward whose middle lies more than this many times its spread from 0 is fitted from an
#: origin near it (:func:`reward_origin`); nearer, from 0, as it is logged.
ORIGIN_SPREADS: float = 10.0


def reward_origin(values: np.ndarray) -> float:
    """The origin a forecast's numerics measure rewards ``values`` from: 0, unless their middle
    lies more than :data:`ORIGIN_SPREADS` spreads (max - min) from 0 (a reward logged with an
    offset, 100 + a success rate), then the middle rounded to the power of ten at or below the
    spread.

    From 0 a reward of 99.5-100.6 was fitted in the unit 100 (:func:`reward_unit`), where the
    prior's sd floor on the plateau and R0 (:data:`PRIOR_SD_FLOOR`, 1e-3 in the unit) is 0.1,
    a tenth of the run's rise; the same run logged without the offset had a floor of 1e-3.
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0.0
    lo, hi = float(values.min()), float(values.max())
    spread, middle = hi - lo, (hi + lo) / 2.0
    if not spread > 0.0 or abs(middle) <= ORIGIN_SPREADS * spread:
        return 0.0
    step = float(10.0 ** np.floor(np.log10(spread)))
    return float(step * np.round(middle / step))


def reward_frame(values: np.ndarray) -> tuple[float, float]:
    """``(origin, unit)``: a forecast fits ``(reward - origin) / unit`` (:func:`reward_origin`,
    then :func:`reward_unit` of the rewards from that origin)."""
    values = np.asarray(values, dtype=float)
    origin = reward_origin(values)
    return origin, reward_unit(values - origin)


def _fit_frame(y: np.ndarray, prior: GaussianPrior | MixturePrior) -> tuple[float, float]:
    """The origin and unit :func:`fit_run` fits rewards ``y`` with ``prior`` in
    (:func:`reward_frame` of the rewards and the prior's levels)."""
    levels_of_prior = prior.level_means()
    return reward_frame(np.concatenate([np.asarray(y, dtype=float), np.ravel(levels_of_prior)]))


def _level_scales(dim: int, unit: float) -> np.ndarray:
    """Per-coordinate factors of ``u`` under a reward unit ``unit``: ``p*`` and ``R0`` scale
    with it, ``log sigma`` shifts by ``log unit`` (no factor), the dynamics are unit-free."""
    scales = np.ones(dim)
    scales[:2] = unit
    return scales


def rescale_u(u: np.ndarray, factor: float, *, shift: float = 0.0) -> np.ndarray:
    """``u`` (rows, or one vector) of a run whose rewards are multiplied by ``factor``, then
    shifted by ``shift`` (the plateau and R0 move with it; the noise and dynamics do not)."""
    out = np.array(u, dtype=float, copy=True)
    out[..., :2] = out[..., :2] * factor + shift
    out[..., 4] += np.log(factor)
    return out


def rescale_prior(
    prior: GaussianPrior | MixturePrior, factor: float, *, shift: float = 0.0
) -> GaussianPrior | MixturePrior:
    """``prior`` for the run's rewards multiplied by ``factor``, then shifted by ``shift``
    (:func:`rescale_u`).

    The moments are carried over as they are: made anew, the prior would floor its sds and
    shrink its correlations once more (:class:`GaussianPrior`), and a forecast in another
    unit would rest on another prior."""
    if factor == 1.0 and shift == 0.0:
        return prior
    out = object.__new__(type(prior))
    if isinstance(prior, MixturePrior):
        levels = _level_scales(prior.covs.shape[-1], factor)
        moments = {
            "means": rescale_u(prior.means, factor, shift=shift),
            "covs": prior.covs * np.outer(levels, levels),
            "weights": prior.weights,
        }
    else:
        levels = _level_scales(prior.cov.shape[0], factor)
        moments = {
            "mean": rescale_u(prior.mean, factor, shift=shift),
            "cov": prior.cov * np.outer(levels, levels),
        }
    # the latent level is carried as the reward is (bounded_value commutes with it)
    moments["latent_bounds"] = (
        None if prior.latent_bounds is None else tuple(b * factor + shift for b in prior.latent_bounds)
    )
    for name, value in {**moments, "source": prior.source}.items():
        object.__setattr__(out, name, value)
    return out


def _fit_run_in_unit(
    t: np.ndarray,
    y: np.ndarray,
    prior: GaussianPrior | MixturePrior,
    *,
    n_draws: int,
    n_proposal: int,
    rng: np.random.Generator,
    warm_start: np.ndarray | None,
    likelihood: str,
    bounds: tuple[float, float] | None,
    adapt: bool,
) -> RunPosterior:
    """:func:`fit_run` of checked rewards ``y`` and ``prior`` in the reward's frame (:func:`reward_frame`)."""
    if isinstance(prior, MixturePrior):
        return _fit_mixture(t, y, prior, n_draws, n_proposal, rng, likelihood, bounds, adapt)
    prior = prior.with_onset()
    # the search, Laplace proposal and importance sampling run in the prior's coordinates (a
    # bounded fit's prior: p* and R0 on their latent levels); the likelihood reads the rewards
    levels = prior.to_reward_levels
    starts = _starts(prior, t, y, None if warm_start is None else np.asarray(warm_start)[:6])
    _, span = _data_scale(y)
    steps6 = np.array([1e-3 * span, 1e-3 * span, 1e-3, 1e-3, 1e-3, 1e-3])
    mean6, prec6 = prior.mean, np.linalg.inv(prior.cov)

    def iid_loglik(u: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _log_lik(levels(u), t, y, bounds)

    mode, fun = _optimise(iid_loglik, mean6, prec6, t, y, starts)
    if likelihood == "iid":
        mean, prec, loglik, steps = mean6, prec6, iid_loglik, steps6
    else:
        from bayes_grpo.predict import statespace

        def loglik(u: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
            return statespace.log_lik(levels(u), t, y, bounds)

        mean = np.append(mean6, 0.0)
        prec = np.zeros((7, 7))
        prec[:6, :6] = prec6
        prec[6, 6] = 1.0 / statespace.RHO_PRIOR_SD**2
        steps = np.append(steps6, 1e-3)
        ss_starts = [np.append(mode, 0.0), np.append(mode, -2.0), np.append(mean6, 0.0)]
        if warm_start is not None and np.size(warm_start) == 7:
            ss_starts.append(prior.from_reward_levels(np.asarray(warm_start, dtype=float)))
        mode, fun = _optimise(loglik, mean, prec, t, y, ss_starts)
    cov_prior = np.linalg.inv(prec)

    notes: list[str] = []
    neg_log_post, neg_log_post_rows = _negative_log_posterior(loglik, t, y, mean, prec)
    hess = _numeric_hessian(neg_log_post, mode, h=steps, rows=neg_log_post_rows)
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
    prior_dist = gaussian(mean, cov_prior)
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
        res = _psis(loglik(prop, t, y) + prior_dist.logpdf(prop) - proposal.logpdf(prop))
        if res is not None and (best_is is None or res[2] < best_is[2]):
            best_is = (prop[res[0]], res[1], res[2])
        if best_is is not None and best_is[2] <= PARETO_K_WARN:
            break

    def log_post_rows(u: np.ndarray) -> np.ndarray:
        return loglik(u, t, y) + prior_dist.logpdf(u)

    draws, k, ess, method = _resample(
        best_is, log_post_rows, rng, n_proposal, n_draws, adapt, "laplace_psis", notes
    )
    log_post_mode = -float(fun)
    latent_mode, latent_cov = None, None
    if prior.latent_bounds is not None:
        latent_mode, latent_cov = mode, cov
        draws, mode, cov, slope = _as_rewards(prior, draws, mode, cov)
        log_post_mode -= float(np.sum(np.log(slope[:2])))
    return RunPosterior(
        draws=draws,
        method=method,
        mode=mode,
        cov=cov,
        pareto_k=k,
        ess=ess,
        n_obs=int(y.size),
        log_post_mode=log_post_mode,
        warnings=notes,
        likelihood=likelihood,
        reward_bounds=bounds,
        t=t,
        y=y,
        latent_mode=latent_mode,
        latent_cov=latent_cov,
    )


def _as_rewards(
    prior: GaussianPrior | MixturePrior, draws: np.ndarray, mode: np.ndarray, cov: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A fit's draws, mode and Laplace covariance in the coordinates of a prior on the latent
    levels (:attr:`GaussianPrior.latent_bounds`, :attr:`MixturePrior.latent_bounds`) as rewards:
    the covariance by the map's slope at the mode (d reward / d latent = 4 x (1 - x), x the
    reward's place in the range). Returns ``(draws, mode, cov, slope)``."""
    lo, hi = prior.latent_bounds
    x = (prior.to_reward_levels(mode)[:2] - lo) / (hi - lo)
    slope = np.ones(mode.size)
    slope[:2] = 4.0 * x * (1.0 - x)
    return prior.to_reward_levels(draws), prior.to_reward_levels(mode), cov * np.outer(slope, slope), slope


def _fit_mixture(
    t: np.ndarray,
    y: np.ndarray,
    prior: MixturePrior,
    n_draws: int,
    n_proposal: int,
    rng: np.random.Generator,
    likelihood: str,
    bounds: tuple[float, float] | None,
    adapt: bool,
) -> RunPosterior:
    """Posterior under a :class:`MixturePrior`: per-component Laplace fits (i.i.d.
    likelihood: cheap) give each component's mode, covariance and evidence; a mixture of
    Student-t proposals weighted by the evidence; importance weights against the exact
    target (the chosen likelihood and the full mixture prior), PSIS; adaptive IS when
    the Pareto k says the proposal does not fit. All of it in the prior's coordinates (a prior
    on the latent levels, :attr:`MixturePrior.latent_bounds`: ``p*`` and ``R0`` latent, as
    :func:`_fit_run_in_unit` fits a :class:`GaussianPrior`'s); the likelihood reads the rewards,
    and the draws, mode and covariance are given as rewards."""
    from scipy.special import logsumexp

    _, span = _data_scale(y)
    steps6 = np.array([1e-3 * span, 1e-3 * span, 1e-3, 1e-3, 1e-3, 1e-3])
    levels = prior.to_reward_levels

    def iid_loglik(u: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _log_lik(levels(u), t, y, bounds)

    modes, lap_covs, log_z = [], [], []
    for w, comp in zip(prior.weights, prior.components):
        prec = np.linalg.inv(comp.cov)
        starts = [comp.mean.copy()]
        mode, fun = _optimise(iid_loglik, comp.mean, prec, t, y, starts)

        nlp, nlp_rows = _negative_log_posterior(iid_loglik, t, y, comp.mean, prec)
        hess = _numeric_hessian(nlp, mode, h=steps6, rows=nlp_rows)
        hess = (hess + hess.T) / 2
        if not np.isfinite(hess).all() or np.abs(hess).max() > 1e200:
            hess = prec.copy()
        evals, evecs = np.linalg.eigh(hess)
        floor = 1.0 / np.max(np.diag(comp.cov))
        evals = np.clip(np.nan_to_num(evals, nan=floor), floor, floor * 1e8)
        cov = (evecs / evals) @ evecs.T
        _, logdet_prior = np.linalg.slogdet(comp.cov)
        modes.append(mode)
        lap_covs.append((cov + cov.T) / 2)
        log_z.append(np.log(w) - fun - 0.5 * logdet_prior + 0.5 * np.sum(np.log(1.0 / evals)))
    log_z_arr = np.array(log_z)
    post_w = np.exp(log_z_arr - logsumexp(log_z_arr))
    keep = np.flatnonzero(post_w > 1e-3 * post_w.max())
    comp_w = post_w[keep] / post_w[keep].sum()
    if likelihood == "iid":
        locs = [modes[j] for j in keep]
        shapes = [lap_covs[j] for j in keep]

        def log_prior_rows(u: np.ndarray) -> np.ndarray:
            return prior.logpdf(u)

        loglik = iid_loglik
    else:
        from bayes_grpo.predict import statespace

        rho_sd = statespace.RHO_PRIOR_SD
        locs = [np.append(modes[j], 0.0) for j in keep]
        shapes = []
        for j in keep:
            c = np.zeros((7, 7))
            c[:6, :6] = lap_covs[j]
            c[6, 6] = rho_sd**2
            shapes.append(c)

        def log_prior_rows(u: np.ndarray) -> np.ndarray:
            return prior.logpdf(u) + stats.norm(0.0, rho_sd).logpdf(np.atleast_2d(u)[:, 6])

        def loglik(u: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
            return statespace.log_lik(levels(u), t, y, bounds)

    notes: list[str] = []
    best = None
    for widen in (1.5, 3.0):
        dists = [
            stats.multivariate_t(loc=m, shape=c * widen**2, df=PROPOSAL_DF, allow_singular=True)
            for m, c in zip(locs, shapes)
        ]
        counts = rng.multinomial(n_proposal, comp_w)
        prop = np.vstack(
            [np.atleast_2d(d.rvs(size=k, random_state=rng)) for d, k in zip(dists, counts) if k]
        )
        log_q = logsumexp(
            np.array([np.log(w) + d.logpdf(prop) for w, d in zip(comp_w, dists)]), axis=0
        )
        with np.errstate(all="ignore"):
            res = _psis(loglik(prop, t, y) + log_prior_rows(prop) - log_q)
        if res is not None and (best is None or res[2] < best[2]):
            best = (prop[res[0]], res[1], res[2])
        if best is not None and best[2] <= PARETO_K_WARN:
            break

    def log_post_rows(u: np.ndarray) -> np.ndarray:
        return loglik(u, t, y) + log_prior_rows(u)

    draws, k, ess, method = _resample(
        best, log_post_rows, rng, n_proposal, n_draws, adapt, "mixture_laplace_psis", notes
    )
    best_j = int(np.argmax(post_w))
    mode = locs[int(np.argmax(comp_w))]
    cov = shapes[int(np.argmax(comp_w))]
    latent_mode, latent_cov = None, None
    if prior.latent_bounds is not None:
        latent_mode, latent_cov = mode, cov
        draws, mode, cov, _ = _as_rewards(prior, draws, mode, cov)
    return RunPosterior(
        draws=draws,
        method=method,
        mode=mode,
        cov=cov,
        pareto_k=k,
        ess=ess,
        n_obs=int(y.size),
        log_post_mode=float(log_z_arr[best_j]),
        warnings=notes,
        likelihood=likelihood,
        reward_bounds=bounds,
        t=t,
        y=y,
        latent_mode=latent_mode,
        latent_cov=latent_cov,
    )


def _psis(logw: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """``(finite mask, Pareto-smoothed log weights of the finite draws, k)``; None when
    fewer than 10 draws have a finite weight."""
    import arviz as az

    finite = np.isfinite(logw)
    if finite.sum() < 10:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lw, k = az.psislw(logw[finite].copy())
    return finite, lw, float(np.asarray(k))


def _resample(
    best: tuple[np.ndarray, np.ndarray, float] | None,
    log_post_rows,
    rng: np.random.Generator,
    n_proposal: int,
    n_draws: int,
    adapt: bool,
    method: str,
    notes: list[str],
) -> tuple[np.ndarray, float, float, str]:
    """Equally weighted draws from weighted ones ``(draws, log weights, k)``, with adaptive
    importance sampling first when ``k > PARETO_K_WARN`` (and ``adapt``).

    Returns ``(draws, k, ESS, method)``; appends a note when ``k`` stays above the threshold.
    """
    if best is None:
        raise ForecastError(
            "importance sampling failed: almost every proposal draw has zero posterior density"
        )
    cand, lw, k = best
    if k > PARETO_K_WARN and adapt:
        # The proposal does not fit (curved or multimodal posterior: typically an onset
        # that the prefix only bounds from below)
        cand, lw, k, rounds = _adaptive_is(log_post_rows, cand, lw, k, rng, n_proposal)
        method = f"adaptive_is_{rounds}"
    weights = np.exp(lw - np.max(lw))
    weights /= weights.sum()
    ess = float(1.0 / np.sum(weights**2))
    if k > PARETO_K_WARN and adapt:
        # the weights rest on a handful of draws (a posterior concentrated far from Gaussian, e.g.
        # a long prefix under the state-space likelihood: k rose from 0.5 at 10 steps to 2.1 at
        # 120 on a simulated run): let a Metropolis ensemble started from them walk to the posterior
        refined = _metropolis_ensemble(log_post_rows, cand, weights, rng)
        if refined is not None:
            walkers, acceptance = refined
            draws = walkers[rng.choice(walkers.shape[0], size=n_draws, replace=walkers.shape[0] < n_draws)]
            return draws, float("nan"), float(walkers.shape[0]), f"{method}+metropolis_{MCMC_STEPS} (acceptance {acceptance:.2f})"
    if k > PARETO_K_WARN:
        notes.append(
            f"importance sampling unreliable: Pareto k = {k:.2f} > {PARETO_K_WARN} (ESS {ess:.0f}); "
            "the posterior is far from Gaussian (multimodal or prior-data conflict), and the "
            "bands, the regime and its probability rest on about "
            f"{counted(int(round(max(ess, 1.0))), 'distinct draw')} (the Metropolis refinement "
            "did not move: acceptance below 5%): do not read a regime probability near 1 as "
            "certainty; check the bands with --calibrate"
        )
    draws = cand[rng.choice(cand.shape[0], size=n_draws, replace=True, p=weights)]
    return draws, k, ess, method


def _weighted_cov(draws: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Covariance ``(d, d)`` of draws ``(n, d)`` under normalised weights ``(n,)``."""
    dev = draws - weights @ draws
    return (dev * weights[:, None]).T @ dev


def _metropolis_ensemble(
    log_target, draws: np.ndarray, weights: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, float] | None:
    """:data:`MCMC_WALKERS` random-walk Metropolis chains run :data:`MCMC_STEPS` steps from the
    weighted draws; returns ``(final states, mean acceptance)``, or None when it cannot start
    or its acceptance falls below 5% (the caller then keeps the importance weights, flagged).

    Each walker starts at a draw resampled by weight and moves with a Gaussian step of the
    weighted draws' covariance times ``2.38^2 / d`` (the optimal random-walk scale), shrunk by
    half whenever fewer than 15% of the moves of the last 20 steps were accepted. The final
    states are the draws: after hundreds of steps each walker has forgotten its start.
    """
    dim = draws.shape[1]
    cov = _weighted_cov(draws, weights) + 1e-12 * np.eye(dim)
    try:
        chol = np.linalg.cholesky(cov * 2.38**2 / dim)
    except np.linalg.LinAlgError:
        return None
    x = draws[rng.choice(draws.shape[0], size=MCMC_WALKERS, p=weights)]
    with np.errstate(all="ignore"):
        lp = log_target(x)
    if not np.isfinite(lp).any():
        return None
    accepted, recent, scale = 0, 0, 1.0
    for step in range(1, MCMC_STEPS + 1):
        prop = x + scale * (rng.standard_normal(x.shape) @ chol.T)
        with np.errstate(all="ignore"):
            lp_prop = log_target(prop)
        take = np.log(rng.random(MCMC_WALKERS)) < np.where(np.isfinite(lp_prop), lp_prop - lp, -np.inf)
        x[take], lp[take] = prop[take], lp_prop[take]
        accepted += int(take.sum())
        recent += int(take.sum())
        if step % 20 == 0:
            if recent < 0.15 * 20 * MCMC_WALKERS and step <= MCMC_STEPS // 2:
                scale *= 0.5
            recent = 0
    acceptance = accepted / (MCMC_STEPS * MCMC_WALKERS)
    if acceptance < 0.05 or not np.isfinite(lp).all():
        return None
    return x, acceptance


def _adaptive_is(
    log_target,
    draws: np.ndarray,
    log_weights: np.ndarray,
    k: float,
    rng: np.random.Generator,
    n_proposal: int,
    *,
    n_centres: int = ADAPT_CENTRES,
    max_rounds: int = ADAPT_ROUNDS,
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Adaptive importance sampling (population Monte Carlo) from weighted draws.

    Each round draws ``n_centres`` centres from the current weighted draws and proposes from
    the equal mixture of Student-t kernels around them, with the weighted covariance of the
    draws times Silverman's bandwidth factor as the kernel shape: a proposal that follows a
    curved or multimodal posterior, which one Gaussian cannot. The weights are exact
    (target / mixture density), Pareto-smoothed. Stops when ``k <= PARETO_K_WARN`` or after
    ``max_rounds``; returns the round with the smallest ``k``:
    ``(draws, PSIS log weights, k, rounds run)``.
    """
    from scipy.special import gammaln, logsumexp

    best = (draws, log_weights, k)
    dim = draws.shape[1]
    df = PROPOSAL_DF
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        w = np.exp(best[1] - np.max(best[1]))
        w /= w.sum()
        cov_w = _weighted_cov(best[0], w)
        h2 = ((4.0 / (dim + 2.0)) ** (1.0 / (dim + 4.0)) * n_centres ** (-1.0 / (dim + 4.0))) ** 2
        shape = h2 * cov_w + 1e-12 * np.eye(dim)
        try:
            chol = np.linalg.cholesky(shape)
        except np.linalg.LinAlgError:
            break
        centres = best[0][rng.choice(best[0].shape[0], size=n_centres, p=w)]
        pick = rng.integers(0, n_centres, n_proposal)
        z = rng.standard_normal((n_proposal, dim))
        g = np.sqrt(rng.chisquare(df, n_proposal) / df)
        prop = centres[pick] + (z @ chol.T) / g[:, None]
        # log density of the t mixture: shared shape, so one triangular solve per pair
        diff = prop[:, None, :] - centres[None, :, :]
        sol = np.linalg.solve(chol, diff.reshape(-1, dim).T).T.reshape(diff.shape)
        maha = np.sum(sol * sol, axis=-1)
        log_norm = (
            gammaln((df + dim) / 2.0)
            - gammaln(df / 2.0)
            - 0.5 * dim * np.log(df * np.pi)
            - np.sum(np.log(np.diag(chol)))
        )
        log_kern = log_norm - 0.5 * (df + dim) * np.log1p(maha / df)
        log_q = logsumexp(log_kern, axis=1) - np.log(n_centres)
        with np.errstate(all="ignore"):
            res = _psis(log_target(prop) - log_q)
        if res is None:
            continue
        if res[2] < best[2]:
            best = (prop[res[0]], res[1], res[2])
        if best[2] <= PARETO_K_WARN:
            break
    return best[0], best[1], best[2], rounds


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


def draws_in_bounds(post: RunPosterior, notes: list[str]) -> np.ndarray:
    """The posterior draws a bounded forecast reads, ``(S, d)``: each plateau and start inside
    ``post.reward_bounds`` (the draws themselves without bounds).

    A reward logged in ``[lo, hi]`` has its plateau there, so the posterior is truncated to it
    (the draws are equally weighted); when every draw lies beyond the bound the prefix is logged
    at (:func:`at_prefix_bound`) the plateau is taken at that bound; an ``R0`` beyond a bound
    is taken at it. What was changed is said in ``notes`` (appended to); a posterior with no
    plateau the bounds allow raises :class:`ForecastError`.
    """
    u = post.draws
    if post.reward_bounds is None:
        return u
    # the mean curves stay inside (mean_curve with the bounds), the logged rewards, curve plus
    # noise, are clipped (censor)
    lo, hi = post.reward_bounds
    inside = (u[:, 0] >= lo) & (u[:, 0] <= hi)
    beyond = at_prefix_bound(u[:, 0], post.y, post.reward_bounds) if not inside.any() else None
    if beyond is not None:
        # every draw beyond the bound the prefix is logged at: the data hold the reward at
        # that bound and the likelihood cannot tell a plateau beyond it from one at it (the
        # mean curve of either is the bound's, mean_curve); the truncated posterior is the
        # plateau at the bound. Left out, as a plateau the prior puts outside, a state-space
        # forecast of 100 steps logged at 1 had no draw and told to check the bounds [0, 1].
        u = u.copy()
        u[:, 0] = beyond
        notes.append(
            f"every posterior draw put the plateau beyond the reward bound {beyond:g}, where the "
            f"prefix is logged (its last reward at it): the plateau is taken at {beyond:g} (a "
            "plateau beyond a bound gives the mean curve of one at it)"
        )
        inside[:] = True
    if not inside.any():
        # `forecast tiny.nc --run R --upto 60 --prior models/tiny.nc --reward-bounds 0 1` (that
        # fit's plateau 3.45) said "check the bounds" of a success rate's right bounds
        q5, q95 = np.quantile(u[:, 0], [0.05, 0.95])
        raise ForecastError(
            f"every posterior draw puts the plateau outside the reward bounds [{lo:g}, {hi:g}] "
            f"(90% of them between {q5:.3g} and {q95:.3g}): the prefix and the prior say nothing "
            "the bounds allow; check the bounds and the prior's plateau (a prior from a fit or "
            "runs of another reward scale?), or forecast without them"
        )
    if not inside.all():
        # a count, and a share with as few decimals as keep it off 0% and 100%: 3 of 1000
        # read "0% of the posterior draws ... were left out"
        n_out = int((~inside).sum())
        share_text = share_percent(n_out, inside.size)
        notes.append(
            f"{n_out} of the {inside.size} posterior draws ({share_text}) "
            f"put the plateau outside the reward bounds [{lo:g}, {hi:g}] and were left out (a "
            "reward in the bounds has its plateau in them)"
        )
        u = u[inside]
    # an R0 beyond a bound starts the curve at the bound (mean_curve, and the state space's
    # oscillator_level, take it there: the same curves), so the rise p* - R0 of the
    # milestones and the stop step is counted from there: a prefix at 0 before its rise
    # left R0 free below 0, and draws at R0 -0.4, p* 0.8 put "90% of the rise" at 0.68
    u = u.copy()
    u[:, 1] = np.clip(u[:, 1], lo, hi)
    return u


@one_blas_thread()
def forecast_from_posterior(
    post: RunPosterior,
    steps: Sequence[float] | np.ndarray,
    *,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    rng: np.random.Generator | int | None = 0,
    attrs: Mapping[str, object] | None = None,
    observation_lag: float = 0.0,
) -> xr.Dataset:
    """Bands, milestones, regime and stop step at ``steps`` from a :class:`RunPosterior`.

    ``observation_lag``: steps by which the run's logged reward trails its policy
    (:func:`bayes_grpo.predict.predict.observation_lag_of`). The forecast's curve is the
    logged reward's; when the lag is above 0 the policy's milestones and stop step
    (``policy_*``) are read on the same curve ``observation_lag`` steps ahead, as ``predict``
    gives them, since a run stopped at a step keeps that step's policy.
    """
    rng = np.random.default_rng(checked_seed(rng, "rng"))
    steps = np.asarray(steps, dtype=float)
    notes = list(post.warnings)
    u = draws_in_bounds(post, notes)
    bounds = post.reward_bounds
    mean = mean_curve(u, steps, bounds)
    lag = float(observation_lag) if np.isfinite(observation_lag) else 0.0
    policy = mean_curve(u, steps + lag, bounds) if lag > 0 else None
    sd = np.exp(u[:, 4:5]) * np.sqrt(noise_shape(mean, post.reward_bounds))
    obs = censor(mean + sd * rng.standard_normal(mean.shape), post.reward_bounds)
    # the point forecast is each draw's expected logged reward: with bounds the logged reward
    # is censored, so its mean is E[clip(mean + sd Z)], not the curve (a curve near 1 with
    # noise clipped at 1 logs below it on average)
    point = mean.copy() if post.reward_bounds is None else censored_mean(mean, sd, post.reward_bounds)
    if post.likelihood == "state_space" and post.t.size:
        from bayes_grpo.predict import statespace

        future = steps > post.t.max()
        if future.any():
            obs[:, future], point[:, future] = statespace.forecast_paths(
                u, post.t, post.y, steps[future], rng, post.reward_bounds
            )
    w0, zeta = np.exp(u[:, 2]), np.exp(u[:, 3])
    params = {
        "plateau": u[:, 0],
        "initial_reward": u[:, 1],
        "w0": w0,
        "zeta": zeta,
        "sigma": np.exp(u[:, 4]),
    }
    if u.shape[1] >= 6:
        params["onset"] = np.exp(u[:, 5])
    if u.shape[1] == 7:
        params["process_share"] = 1.0 / (1.0 + np.exp(-u[:, 6]))
    all_attrs = {
        # predict's key for the same numbers (final_mean_reward, its band): a forecast is of the
        # run's own logged reward; its --json had no "units" where predict's had
        "units": "reward",
        "likelihood": post.likelihood,
        "sampler": post.method,
        "reward_bounds": "none" if post.reward_bounds is None else list(post.reward_bounds),
        "pareto_k": post.pareto_k,
        "ess": post.ess,
        "n_observed": post.n_obs,
        "warnings": notes,
        "observation_lag": lag,
        "milestones_of": milestones_of(lag),
    }
    all_attrs.update(attrs or {})
    # past the horizon the policy's look asks the logged reward's steps again, lag steps on
    curve = kept_curve(u, bounds) if policy is not None else (lambda later: mean_curve(u, later, bounds))
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
        policy_draws=policy,
        no_stop_reason=post.no_stop_reason,
        # the expected remaining gain follows the draws' curves past the horizon until they
        # settle, so the stop step does not move with the horizon
        continuation=curve,
        policy_continuation=None if policy is None else (lambda later: curve(later + lag)),
    )


#: Share of a prefix's logged rewards outside the prior's predictive range beyond which the
#: forecast says that the prior contradicts the run (:func:`prior_conflict_note`).
PRIOR_CONFLICT_SHARE: float = 0.25
#: Probability of the prior predictive range of :func:`prior_conflict_note`.
PRIOR_CONFLICT_RANGE: float = 0.998


@one_blas_thread()
def prior_conflict_note(
    prior: GaussianPrior | MixturePrior,
    t: np.ndarray,
    y: np.ndarray,
    reward_bounds: tuple[float, float] | None = FIT_BOUNDS,
    n_draws: int = 2000,
) -> str | None:
    """A warning when the prefix ``(t, y)`` contradicts ``prior``: more than
    :data:`PRIOR_CONFLICT_SHARE` of its logged rewards lie outside the prior predictive's
    central :data:`PRIOR_CONFLICT_RANGE` range at their steps (i.i.d. noise of sd ``sigma``,
    shaped and censored by ``reward_bounds``: not given (:data:`FIT_BOUNDS`), those the prior was
    built in (:func:`prior_bounds`), as :func:`forecast_run` takes them; None: none).

    A prior from runs or a fit on another reward scale (a success rate against a score out of
    100), another task or another LLM can pin the plateau and R0 so tightly that the prefix
    moves only the noise: the forecast then stays at the prior's levels with bands that do not
    hold the run, and the importance sampling is reliable (small Pareto k), so nothing else
    says so. Seeded on its own: the forecast's draws do not change.
    """
    # the default was None, where every other entry takes the prior's own bounds: a bounded fit's
    # prior checked with constant, uncensored noise (see the test of the default)
    reward_bounds = checked_bounds(prior_bounds(prior) if reward_bounds is FIT_BOUNDS else reward_bounds)
    rng = np.random.default_rng(0)
    t, y = logged_points(t, y)
    if y.size < 3:
        return None
    u = (prior if isinstance(prior, MixturePrior) else prior.with_onset()).draw(rng, n_draws)
    mean = mean_curve(u, t, reward_bounds)
    with np.errstate(over="ignore", invalid="ignore"):
        sd = np.exp(u[:, 4:5]) * np.sqrt(noise_shape(mean, reward_bounds))
        pred = censor(mean + sd * rng.standard_normal(mean.shape), reward_bounds)
    pred = np.where(np.isfinite(pred), pred, np.nan)
    tail = (1.0 - PRIOR_CONFLICT_RANGE) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lo, hi = np.nanquantile(pred, [tail, 1.0 - tail], axis=0)
    outside = (y < lo) | (y > hi)
    if not outside.mean() > PRIOR_CONFLICT_SHARE:
        return None
    return (
        f"{int(outside.sum())} of the {counted(y.size, 'logged reward')} up to step {t.max():g} "
        f"{'lies' if int(outside.sum()) == 1 else 'lie'} outside "
        f"the prior's {PRIOR_CONFLICT_RANGE:.1%} predictive range at their steps (e.g. step "
        f"{t[outside][0]:g}: {y[outside][0]:.4g} against [{lo[outside][0]:.4g}, {hi[outside][0]:.4g}]): "
        f"the prior ({prior.source or 'given'}) contradicts this run (another reward scale, task "
        "or LLM?), and its plateau and R0 may hold the forecast away from the run; check the "
        "prior, or forecast without it"
    )


def _component_draws(
    rng: np.random.Generator, means: np.ndarray, covs: np.ndarray, comp: np.ndarray
) -> np.ndarray:
    """One draw of component ``comp[i]`` per row: the draws of
    ``[rng.multivariate_normal(means[j], covs[j]) for j in comp]`` (the same normals, the same
    factor of each covariance, the same product per row), with each component's factor
    computed once, not once per draw (an SVD and a check of each covariance per draw were a
    tenth of a warm forecast)."""
    factors = {}
    for j in np.unique(comp):
        cov = covs[j]
        u, s, vh = np.linalg.svd(cov)
        if not np.allclose(np.dot(vh.T * s, vh), cov, rtol=1e-8, atol=1e-8):
            warnings.warn("covariance is not symmetric positive-semidefinite.", RuntimeWarning, stacklevel=3)
        factors[j] = (u * np.sqrt(s)).T
    dim = means.shape[1]
    z = rng.standard_normal((comp.size, dim))
    out = np.empty((comp.size, dim))
    for i, j in enumerate(comp):
        x = np.dot(z[i : i + 1], factors[j])
        x += means[j]
        out[i] = x[0]
    return out


def _prefix_wander_note(post: RunPosterior) -> str | None:
    """A warning when the prefix residuals of an i.i.d. forecast are correlated in time.

    The residuals are the logged rewards minus the posterior-median mean curve at the logged
    steps. A reward that wanders about its curve (the SDE's process noise) leaves a lag-1
    autocorrelation beyond the white-noise band ``WHITE_NOISE_Z / sqrt(n)``; the i.i.d. bands
    then read the wander as signal and are too narrow. None when the residuals look white,
    the prefix is too short to tell, or its reward is constant (a run solved from step 0:
    its residuals are the curve's mirror image, not a wander).
    """
    from bayes_grpo.checks.ppc import white_noise_band
    from bayes_grpo.metrics import autocorrelation, autocorrelation_sample_size
    from bayes_grpo.model.prepare import constant_reward

    if post.t.size <= FEW_PREFIX_POINTS or constant_reward(post.y):
        return None
    resid = post.y - np.median(mean_curve(post.draws, post.t, post.reward_bounds), axis=0)
    lag1 = float(autocorrelation(resid, (1,), steps=post.t)[0])  # not across a missing step
    # n of the band: the lag-1 pairs (plus one) the estimate rests on, not the points
    band = white_noise_band(autocorrelation_sample_size(resid, steps=post.t))
    if not np.isfinite(lag1) or lag1 <= band:
        return None
    return (
        f"the prefix residuals are correlated in time (lag-1 autocorrelation {lag1:.2f} > "
        f"{band:.2f}): the reward wanders about its curve, which the i.i.d. bands take for "
        "signal, so they are too narrow; use --likelihood state_space"
    )


def forecast_run(
    t: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    horizon_steps: Sequence[float] | np.ndarray,
    *,
    prior: GaussianPrior | MixturePrior | None = None,
    hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
    stop_threshold: float | None = None,
    n_draws: int = 1000,
    likelihood: str = "state_space",
    rng: np.random.Generator | int | None = 0,
    attrs: Mapping[str, object] | None = None,
    reward_bounds: tuple[float, float] | None = FIT_BOUNDS,
    observation_lag: float = 0.0,
) -> xr.Dataset:
    """Forecast a run from its observed prefix ``(t, y)`` over ``horizon_steps``.

    ``reward_bounds``: ``(lo, hi)`` of a bounded reward (e.g. ``(0, 1)`` for a success
    rate), which shapes the noise (:func:`noise_shape`); None for constant noise. Not given
    (:data:`FIT_BOUNDS`): those of a prior built in bounds (:attr:`GaussianPrior.latent_bounds`,
    :func:`prior_from_posterior`; :attr:`MixturePrior.latent_bounds`, :func:`prior_from_runs`),
    else none.
    ``observation_lag``: steps by which the logged reward trails the policy (the policy's
    milestones and stop step, :func:`forecast_from_posterior`).

    Returns the dataset of :func:`bayes_grpo.predict.summary.summarise_draws` (bands of the
    mean trajectory and of the observed reward, milestones, regime, stop step) with the
    attributes ``pareto_k``, ``ess``, ``n_observed``, ``upto_step``, ``prior`` and ``warnings``.

    Cost grows with ``len(horizon_steps)`` (draws x steps arrays): for a long horizon pass
    :func:`forecast_grid` (bounded) rather than every step.
    """
    reward_bounds = checked_bounds(prior_bounds(prior) if reward_bounds is FIT_BOUNDS else reward_bounds)
    hdi_probs, n_draws = checked_hdi_probs(hdi_probs), checked_n_draws(n_draws)  # before the fit
    rng = np.random.default_rng(checked_seed(rng, "rng"))
    # the prefix, paired once: the steps with a reward (NaN: not logged) in step order, a step
    # given twice at its last reward (logged_points), and the steps given without one
    t, y = _paired(t, y)
    unlogged = _steps_without_reward(t, y)
    t, y, repeated = _last_per_step(t, y)
    horizon_steps = checked_horizon_steps(horizon_steps)
    given = prior is not None
    if prior is None:
        prior = default_prior(t, y, horizon=float(horizon_steps.max()))
    post = _fit_prefix(
        t, y, prior, given, n_draws=n_draws, rng=rng, likelihood=likelihood, reward_bounds=reward_bounds
    )
    repeated_note = _repeated_note(repeated, (attrs or {}).get("run"))
    if repeated_note:
        post.warnings.append(repeated_note)
    unlogged_note = _unlogged_note(unlogged)
    if unlogged_note:
        post.warnings.append(unlogged_note)
    extra = {"upto_step": float(np.nanmax(t)), "prior": prior.to_dict()}
    extra.update(attrs or {})
    return forecast_from_posterior(
        post,
        horizon_steps,
        hdi_probs=hdi_probs,
        stop_threshold=stop_threshold,
        rng=rng,
        attrs=extra,
        observation_lag=observation_lag,
    )


def checked_horizon_steps(horizon_steps: Sequence[float] | np.ndarray) -> np.ndarray:
    """The steps a forecast is asked for, as floats; refused (:class:`ForecastError`) when there
    are none or one is not finite. An empty horizon died in NumPy's "zero-size array to
    reduction operation maximum", a NaN or infinite step in "prior from default (weak, scaled to
    the prefix) has non-finite moments" (the weak prior spreads the rise over the horizon)."""
    steps = np.asarray(horizon_steps, dtype=float).ravel()
    if steps.size == 0:
        raise ForecastError("horizon_steps is empty: give the steps to forecast, e.g. range(301)")
    bad = steps[~np.isfinite(steps)]
    if bad.size:
        raise ForecastError(
            f"horizon_steps holds {counted(bad.size, 'step')} that {'is' if bad.size == 1 else 'are'} "
            f"not a finite number ({bad[0]:g}): each is an optimizer step to forecast"
        )
    return steps


def _prior_rise(prior: GaussianPrior | MixturePrior) -> float:
    """How large a rise ``|p* - R0|`` the prior allows: the gap of its plateau and initial
    reward means plus its plateau sd (reward units), the sd only where it is above the floor
    :data:`PRIOR_SD_FLOOR` that every prior gets (an absolute 1e-3 whatever the reward's scale: a
    weak prior of rewards logged x1e-3 allowed a rise five times their size by the floor alone).
    A prior whose levels are a constant prefix's (:func:`default_prior`, or :func:`with_levels_from`
    it) allows none beyond the prefix's span."""
    mean, sd = np.asarray(prior.mean, dtype=float), np.asarray(prior.sd, dtype=float)
    spread = float(sd[0]) if sd[0] > PRIOR_SD_FLOOR[0] * (1.0 + 1e-6) else 0.0
    if prior.latent_bounds is not None:
        # on the latent level: the gap of the medians (a mixture's: of its draws' means) as
        # rewards, the plateau's spread as its draws' (the latent sd overstates it near a bound)
        draws = prior.draw(np.random.default_rng(0), 4000)
        levels = prior.level_means() if isinstance(prior, GaussianPrior) else draws[:, :2].mean(axis=0)
        spread = float(np.std(draws[:, 0])) if spread > 0.0 else 0.0
        return float(abs(levels[0] - levels[1]) + spread)
    return float(abs(mean[0] - mean[1]) + spread)


def _fit_prefix(
    t: np.ndarray,
    y: np.ndarray,
    prior: GaussianPrior,
    given: bool,
    *,
    n_draws: int,
    rng: np.random.Generator,
    likelihood: str,
    reward_bounds: tuple[float, float] | None,
    warm_start: np.ndarray | None = None,
) -> RunPosterior:
    """:func:`fit_run` of a prefix with the forecast's notes on it (a prior the prefix
    conflicts with, when ``given``; too few rewards; an i.i.d. fit of a wandering reward):
    the one fit of :func:`forecast_run` and :class:`RunForecaster`, so that the same prefix
    and seed give the same forecast by either.

    A constant prefix (a run still at 0, or solved from step 0) shows no noise: its likelihood
    grows without bound as the noise sd goes to 0, and the fit took sd 1e-5 from the other
    runs' prior (90% bands 6e-5 wide, covering 6% of the run's later steps). With a ``given``
    prior the noise is then the prior's (:func:`noise_held_at_prior`)."""
    from bayes_grpo.model.prepare import constant_reward

    flat = constant_reward(y)
    fit_prior = noise_held_at_prior(prior) if given and flat else prior
    post = fit_run(
        t,
        y,
        fit_prior,
        n_draws=n_draws,
        rng=rng,
        warm_start=warm_start,
        likelihood=likelihood,
        reward_bounds=reward_bounds,
    )
    if not given and _every_plateau_beyond(post, fit_prior):
        # the weak prior on the plateau's own level, the latent law (mean_curve) flat in a
        # plateau beyond a bound: a rise from 0 to 0.9 (data/tiny's g16_p8_lr0.002_k1_adamw_s0
        # up to step 150, --no-population --reward-bounds 0 1) put every draw's plateau at
        # 1.07-3.58, which the forecast leaves out, and it refused. Refitted with that prior on
        # the latent levels, as prior_from_runs fits its weak prior in bounds
        lo, hi = post.reward_bounds
        post = fit_run(
            t,
            y,
            on_latent_levels(fit_prior, post.reward_bounds),
            n_draws=n_draws,
            rng=rng,
            likelihood=likelihood,
            reward_bounds=reward_bounds,
        )
        post.warnings.append(
            f"the weak prior on the plateau's own level left every posterior draw's plateau outside "
            f"the reward bounds [{lo:g}, {hi:g}]; the run was refitted with it on the latent levels "
            "of p* and R0, whose images lie in the bounds"
        )
    conflict = prior_conflict_note(prior, t, y, reward_bounds) if given else None
    if conflict:
        post.warnings.append(conflict)
    if flat and not np.exp(prior.mean[PARAM_NAMES.index("log_sigma")]) > 10.0 * _data_scale(y)[0]:
        # the weak prior's noise (and that of a prior whose levels are the prefix's, with_levels_from)
        # is the prefix's own: none. `forecast --no-population` of a run at 0 gave bands 4e-6 wide
        post.warnings.append(
            f"the rewards up to step {float(np.nanmax(t)):g} are constant and the prior "
            f"({prior.source or 'given'}) knows no noise either: the bands of the logged reward are "
            "those of a run without noise (about 0 wide), not the noise the run will show once it "
            "moves; forecast with a prior that has it (the other runs of its LLM, or --prior)"
        )
    origin, unit = _fit_frame(y, prior)
    if flat and not _prior_rise(prior) / unit > 10.0 * max(
        _data_scale((y - origin) / unit)[1], float(PRIOR_SD_FLOOR[0])
    ):
        # `forecast --no-population` of a run at 0 before its rise recommended stop step 0 ("the
        # threshold is at least the whole expected remaining gain: give a smaller gain"): the
        # prefix, flat, says nothing of a rise, and neither does a prior whose levels are its own.
        # Compared in the unit the fit works in (the sd floor is one there): rewards logged x1e-3
        # with a prior that knows a rise of 7e-4 were told it knows none
        post.no_stop_reason = (
            f"the rewards up to step {float(np.nanmax(t)):g} are constant and the prior "
            f"({prior.source or 'given'}) knows no rise either: the prefix carries no information "
            "on the rise p* - R0, so the forecast carries its level on and there is no stop step "
            "(not 'stop now'); forecast with a prior that knows the rise (the other runs of its "
            "LLM, or --prior), or once the run moves"
        )
    if post.n_obs < FEW_PREFIX_POINTS:
        post.warnings.append(
            f"only {counted(post.n_obs, 'logged reward')} up to step {float(np.nanmax(t)):g} (fewer than "
            f"{FEW_PREFIX_POINTS}) for six unknowns: the bands are mostly the prior's; wait for "
            "more steps, or check them with --calibrate"
        )
    if likelihood == "iid":
        wander = _prefix_wander_note(post)
        if wander:
            post.warnings.append(wander)
    return post


def at_prefix_bound(
    plateau: np.ndarray, y: np.ndarray, bounds: tuple[float, float]
) -> float | None:
    """The reward bound beyond which every ``plateau`` draw lies when the prefix ``y``'s last
    logged reward sits at it (:func:`at_bounds`), else None: draws a bounded forecast takes at
    that bound (:func:`forecast_from_posterior`) rather than leave out as the prior's plateau
    outside the bounds."""
    lo, hi = (float(b) for b in bounds)
    y = np.asarray(y, dtype=float)
    y = y[np.isfinite(y)]
    if y.size == 0 or plateau.size == 0:
        return None
    low, high = at_bounds(y[-1:], bounds)
    if high[0] and bool(np.all(plateau > hi)):
        return hi
    if low[0] and bool(np.all(plateau < lo)):
        return lo
    return None


def _every_plateau_beyond(post: RunPosterior, prior: GaussianPrior | MixturePrior) -> bool:
    """Whether a bounded fit with a Gaussian prior on the plateau's own level (no
    ``latent_bounds``) put every draw's plateau outside the bounds, not at a bound its prefix is
    logged at (:func:`at_prefix_bound`): draws :func:`forecast_from_posterior` would all leave out."""
    if post.reward_bounds is None or not isinstance(prior, GaussianPrior) or prior.latent_bounds is not None:
        return False
    lo, hi = post.reward_bounds
    plateau = post.draws[:, 0]
    inside = (plateau >= lo) & (plateau <= hi)
    return not inside.any() and at_prefix_bound(plateau, post.y, post.reward_bounds) is None


def noise_held_at_prior(prior: GaussianPrior | MixturePrior) -> GaussianPrior | MixturePrior:
    """``prior`` with its log noise sd held at its mean (a mixture's: every component at the
    mixture's mean, since the components of runs that were flat too would carry their own
    near-zero noise), sd :data:`PRIOR_SD_FLOOR` there, uncorrelated with the rest. For a prefix
    that carries no information on the noise (a constant reward, :func:`_fit_prefix`)."""
    i = PARAM_NAMES.index("log_sigma")

    def hold(cov: np.ndarray) -> np.ndarray:
        cov = np.array(cov, dtype=float)
        cov[i, :] = 0.0
        cov[:, i] = 0.0
        cov[i, i] = PRIOR_SD_FLOOR[i] ** 2
        return cov

    if isinstance(prior, MixturePrior):
        means = np.array(prior.means, dtype=float)
        means[:, i] = prior.mean[i]
        covs = np.array([hold(c) for c in prior.covs])
        return MixturePrior(means, covs, prior.weights, source=prior.source, latent_bounds=prior.latent_bounds)
    return GaussianPrior(prior.mean, hold(prior.cov), source=prior.source, latent_bounds=prior.latent_bounds)


class RunForecaster:
    """Forecast that is updated as the steps of a run arrive.

    >>> fc = RunForecaster(prior, horizon_steps=np.arange(500))   # doctest: +SKIP
    >>> fc.update(steps_so_far, rewards_so_far); ds = fc.forecast()  # doctest: +SKIP

    Each :meth:`update` refits the run's posterior on every step seen so far (the prior
    stays the population prior, so nothing is counted twice), warm-starting from the
    previous mode. ``horizon_steps``: the steps forecast at; for a long horizon use
    :func:`forecast_grid` (bounded) rather than every step. ``observation_lag``: steps by which
    the logged reward trails the policy (:func:`run_observation_lag`; the policy's milestones and
    stop step, as :func:`forecast_from_posterior`). After an update, :meth:`forecast`
    gives what :func:`forecast_run` gives for the steps seen so far with ``rng=seed``
    (one random stream from ``seed`` through the fit and the forecast draws);
    ``reward_bounds`` as there.
    """

    def __init__(
        self,
        prior: GaussianPrior | MixturePrior | None,
        horizon_steps: Sequence[float] | np.ndarray,
        *,
        hdi_probs: Sequence[float] = DEFAULT_HDI_PROBS,
        stop_threshold: float | None = None,
        n_draws: int = 1000,
        seed: int = 0,
        likelihood: str = "state_space",
        reward_bounds: tuple[float, float] | None = FIT_BOUNDS,
        observation_lag: float = 0.0,
    ) -> None:
        self.prior = prior
        self.observation_lag = observation_lag
        self.likelihood = likelihood
        # not given: a bounded fit's prior's bounds, as forecast_run takes them
        self.reward_bounds = checked_bounds(prior_bounds(prior) if reward_bounds is FIT_BOUNDS else reward_bounds)
        self.horizon_steps = checked_horizon_steps(horizon_steps)
        self.hdi_probs = tuple(checked_hdi_probs(hdi_probs))
        self.stop_threshold = stop_threshold
        self.n_draws = checked_n_draws(n_draws)
        self.seed = checked_seed(seed)  # not at the first update
        self._t = np.empty(0)
        self._y = np.empty(0)
        self._rng: np.random.Generator | None = None  # the stream after the last fit
        self.posterior: RunPosterior | None = None
        self.history: list[dict[str, object]] = []

    def update(
        self, t: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
    ) -> RunPosterior:
        """Add observed steps (new steps appended, repeated steps overwritten by their new finite
        reward; a NaN reward, not logged, keeps the reward given before) and refit."""
        t, y = _paired(t, y)
        merged = dict(zip(self._t.tolist(), self._y.tolist()))
        for step, reward in zip(t.tolist(), y.tolist()):
            # as forecast_run of the steps given so far keeps a step's last finite reward: a NaN
            # overwrote it, and the step, logged before, was left out unsaid
            if np.isfinite(step) and (np.isfinite(reward) or step not in merged):
                merged[step] = reward
        order = sorted(merged)
        self._t = np.array(order)
        self._y = np.array([merged[s] for s in order])
        # the prefix as forecast_run takes it: steps with a reward (NaN: not logged); the merged
        # steps are paired already (and given once each)
        t, y, _ = _last_per_step(self._t, self._y)
        prior = self.prior or default_prior(t, y, horizon=float(self.horizon_steps.max()))
        warm = self.posterior.mode if self.posterior is not None else None
        # seeded as forecast_run(rng=seed) (the fit had seed + number of steps, the forecast
        # draws seed: another forecast than forecast_run's for the same prefix and seed)
        rng = np.random.default_rng(self.seed)
        self.posterior = _fit_prefix(
            t,
            y,
            prior,
            self.prior is not None,
            n_draws=self.n_draws,
            rng=rng,
            likelihood=self.likelihood,
            reward_bounds=self.reward_bounds,
            warm_start=warm,
        )
        unlogged_note = _unlogged_note(_steps_without_reward(self._t, self._y))
        if unlogged_note:
            self.posterior.warnings.append(unlogged_note)
        self._rng = rng
        self._prior_used = prior
        return self.posterior

    def _upto(self) -> float:
        """The last step seen with a reward (a step whose reward is NaN was not logged)."""
        return float(self._t[np.isfinite(self._y)].max())

    def forecast(self) -> xr.Dataset:
        """Forecast dataset from the current posterior (see :func:`forecast_run`)."""
        if self.posterior is None:
            raise ForecastError("no steps observed yet; call update() first")
        ds = forecast_from_posterior(
            self.posterior,
            self.horizon_steps,
            hdi_probs=self.hdi_probs,
            stop_threshold=self.stop_threshold,
            rng=copy.deepcopy(self._rng),  # the fit's stream, as forecast_run; each call alike
            attrs={"upto_step": self._upto(), "prior": self._prior_used.to_dict()},
            observation_lag=self.observation_lag,
        )
        self.history.append(
            {
                "upto_step": self._upto(),
                "stop_step": ds.attrs["stop_step"],
                "policy_stop_step": ds.attrs.get("policy_stop_step", ds.attrs["stop_step"]),
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


def required_band_scale(y: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Per step, the factor by which the band ``[lower, upper]`` must be scaled about its
    midpoint to contain ``y`` (``|y - mid| / half-width``; NaN where ``y`` is NaN).

    NaN too where the band has collapsed onto ``y`` (zero width, ``y`` its midpoint: a forecast
    held at a reward bound, e.g. a success rate still at 0): any scale covers it, so it says
    nothing of the scale. Counted as 0, such steps set the scale: three tiny runs stuck at 0 gave
    the calibrated 50% band a scale of 0 (98.5% of one run's steps), a band of no width for a run
    that moves. A collapsed band that misses ``y`` is inf (no scale covers it), as before.
    """
    y = np.asarray(y, dtype=float)
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(y - mid) / half
    r = np.where((half <= 0) & (np.abs(y - mid) == 0), np.nan, r)
    return np.where(np.isfinite(y), r, np.nan)


def calibrated_band_scale(required: Sequence[np.ndarray], prob: float = HDI_PROB) -> float:
    """Band scale from earlier runs' backtests (split-conformal, runs weighted equally).

    ``required`` holds, for each calibration run, :func:`required_band_scale` over the steps
    after its prefix (forecast the same way as the run to be forecast). Returns the smallest
    ``kappa`` with which the run-averaged coverage of the scaled bands is at least ``prob``:
    > 1 widens bands that were too narrow for these runs (a misspecified mean, noise the
    model does not have), < 1 narrows bands that were too wide.
    """
    vals, wts = [], []
    for r in required:
        r = np.asarray(r, dtype=float)
        r = r[~np.isnan(r)]
        if r.size:
            vals.append(r)
            wts.append(np.full(r.size, 1.0 / r.size))
    if len(vals) < 2:
        raise ForecastError(f"band calibration needs at least 2 backtested runs, got {len(vals)}")
    v = np.concatenate(vals)
    w = np.concatenate(wts) / len(vals)
    order = np.argsort(v)
    cum = np.cumsum(w[order])
    i = int(np.searchsorted(cum, prob - 1e-12))
    return float(v[order][min(i, v.size - 1)])


def scale_band(lower: np.ndarray, upper: np.ndarray, kappa: float) -> tuple[np.ndarray, np.ndarray]:
    """The band ``[lower, upper]`` scaled by ``kappa`` about its midpoint."""
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
    return mid - kappa * half, mid + kappa * half


def forecast_band(
    ds: xr.Dataset, steps: np.ndarray, *, kind: str = "obs", hdi_prob: float = HDI_PROB
) -> tuple[np.ndarray, np.ndarray]:
    """Band of a forecast dataset interpolated at ``steps`` (exact at its own steps)."""
    from bayes_grpo.predict.summary import band

    lo, hi = band(ds, kind=kind, hdi_prob=hdi_prob)
    grid = ds[STEP_DIM].values
    return np.interp(steps, grid, lo), np.interp(steps, grid, hi)


__all__ = [
    "FORECAST_GRID_POINTS",
    "NOISE_FLOOR_SHARE",
    "NO_ONSET_PRIOR",
    "ONSET_NAME",
    "PARAM_NAMES",
    "FIT_BOUNDS",
    "ROBUST_WEIGHT",
    "ForecastError",
    "GaussianPrior",
    "MixturePrior",
    "RunPosterior",
    "RunForecaster",
    "calibrated_band_scale",
    "checked_bounds",
    "checked_horizon_steps",
    "check_prior_kind",
    "PRIOR_KINDS",
    "prior_bounds",
    "coverage",
    "default_prior",
    "draws_in_bounds",
    "fit_run",
    "forecast_band",
    "forecast_from_posterior",
    "forecast_grid",
    "forecast_in_runset",
    "forecast_run",
    "logged_points",
    "run_series",
    "mean_curve",
    "noise_shape",
    "prior_from_draws",
    "prior_from_posterior",
    "prior_from_runs",
    "prior_conflict_note",
    "phenomenological_setting_note",
    "population_prior_for_run",
    "retime_settings",
    "required_band_scale",
    "scale_band",
    "u_from_coefficients",
    "unbounded_rate_note",
]
