"""Simulators with known truth: the exact discrete recursion and the exact-discretised SDE.

* :func:`simulate_recursion`: the lagged heavy-ball recursion of DESIGN.md section 1,
  ``e[n+1] - e[n] = mu (e[n] - e[n-1]) - a e[n-L] + noise``, vectorised over runs.
* :func:`simulate_sde`: the linear SDE ``M e'' + C e' + K_eff e = sqrt(D/G) xi(t)``
  sampled *exactly* on any time grid (no Euler error): the state ``x = (e, e')`` obeys
  ``x(t+h) = Phi(h) x(t) + w``, ``w ~ N(0, Q(h))`` with ``Phi = expm(A h)`` and
  ``Q = int_0^h expm(A s) b b^T expm(A s)^T ds`` (Van Loan's block exponential),
  ``A = [[0, 1], [-K/M, -C/M]]``, ``b = [0, sqrt(D/G)/M]``. Vectorised over runs.
* :func:`simulate_sde_runset`: many runs (models, group sizes, hyperparameters, seeds) as a
  run set in the data contract, with the generating truth in ``ds.attrs["truth"]`` (JSON,
  format described in :func:`simulate_sde_runset`), for calibrating fits and checks.

Everything is reproducible from a seed (``numpy.random.Generator`` or an integer).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy.linalg import expm

from bayes_grpo._arguments import checked_seed, whole_count
from bayes_grpo.checks.base import counted
from bayes_grpo.constants import EMA, MOMENTUM_CONVENTIONS
from bayes_grpo.dynamics.coefficients import (
    damping_ratio,
    effective_step,
    oscillator_coefficients,
    stationary_variance,
)
from bayes_grpo.dynamics.schedule import check_multipliers
from bayes_grpo.dynamics.stability import (
    closed_form_marginal,
    closed_form_regime,
    closed_form_stable,
    exact_stable,
    spectral_radius,
)
from bayes_grpo.dynamics.trust_region import unclipped_share

#: Format tag of ``ds.attrs["truth"]`` written by :func:`simulate_sde_runset`.
TRUTH_FORMAT: str = "bayes_grpo.sde_truth/1"
#: Dataset attribute holding the truth JSON.
TRUTH_ATTR: str = "truth"


def physical_memory() -> int | None:
    """This machine's memory in bytes (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def check_fits_in_memory(
    n_runs: int, n_points: int, *, bytes_per_point: int, bytes_per_run: int, points: str = "steps"
) -> None:
    """``ValueError`` before a simulator builds anything when ``n_runs`` runs of ``n_points``
    values each (``bytes_per_point`` a value over all its arrays, ``bytes_per_run`` a run's records
    in Python and in the run set) exceed this machine's memory (:func:`physical_memory`; no check
    where the system does not say). Used by :func:`simulate_sde_runset` and the bandit simulator:
    ``--seeds 100000000`` spent minutes building every run's setting in Python on its way to
    exhausting the memory, ``simulate sde --steps 1e12`` was a MemoryError traceback. ``points``
    names the values in the message."""
    need = int(n_runs) * (max(int(n_points), 0) * int(bytes_per_point) + int(bytes_per_run))
    memory = physical_memory()
    if memory is not None and need > memory:
        raise ValueError(
            f"{counted(n_runs, 'run')} x {n_points} {points} do not fit in memory (about {need / 1e9:.3g} GB for "
            f"their values and records; this machine has {memory / 1e9:.3g} GB); use fewer steps, "
            "seeds or settings"
        )


def _rng(seed) -> np.random.Generator:
    """The generator of ``rng`` (a Generator or a seed, :func:`checked_seed`)."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(checked_seed(seed, "rng"))


# ----------------------------------------------------------------------------- recursion


def simulate_recursion(
    a,
    momentum,
    k_ref,
    n_steps: int,
    e0=1.0,
    noise_sd=0.0,
    rng: np.random.Generator | int | None = None,
    lr_multipliers=None,
    clip_range: tuple[float, float] | None = None,
    plateau=None,
) -> np.ndarray:
    """Simulate the exact discrete lagged heavy-ball recursion for many runs at once.

    ``e[n+1] = e[n] + mu (e[n] - e[n-1]) - a e[n-L] + noise_sd * eps[n]``,
    ``eps ~ N(0, 1)`` i.i.d., started at rest: ``e[n] = e0`` for all ``n <= 0`` (so the
    initial velocity is 0 and the lagged gradient sees ``e0`` until ``n >= L``).

    On a learning-rate schedule (``lr_multipliers`` ``m``, update ``n`` at rate ``eta m[n]``)
    the momentum buffer is kept apart from the rate, as in torch's SGD and Adam:
    ``w[n] = mu w[n-1] - a e[n-L]``, ``e[n+1] = e[n] + m[n] w[n]`` (``w[-1] = 0``), which is
    the recursion above when every ``m[n] = 1``. The noise is gradient noise: on a schedule it
    joins the buffer, ``w[n] = mu w[n-1] - a e[n-L] + noise_sd eps[n]``, so it moves the error at
    the rate of its update (not at all at rate 0), and with every ``m[n] = 1`` the noisy
    recursions are the same too.

    Parameters
    ----------
    a
        Gain ``eta K`` per run, shape ``(n_runs,)`` or scalar.
    momentum
        Heavy-ball ``mu`` per run (for EMA momentum pass ``mu = b1`` and ``a = eta (1-b1) K``).
    k_ref
        Integer lag ``L >= 0`` per run (optimizer steps).
    n_steps
        Number of updates; the output has ``n_steps + 1`` columns (``e[0] .. e[n_steps]``).
    e0
        Initial error ``R0 - p*`` per run.
    noise_sd
        Standard deviation of the additive update noise per step, per run.
    rng
        Generator or seed (only used when some ``noise_sd > 0``).
    lr_multipliers
        Optional ``(>= n_steps,)`` multipliers ``lr[n] / eta`` of the nominal rate per update
        (:func:`bayes_grpo.dynamics.schedule.lr_multipliers`), shared by all runs; None: a
        constant rate.
    clip_range, plateau
        PPO clipping of a success-rate reward: ``(eps_low, eps_high)``
        (:func:`bayes_grpo.dynamics.trust_region.check_clip_range`) and the plateau ``p*`` per
        run (the reward is ``p* + e``, a success probability); the gradient term ``-a e[n-L]``
        is scaled by :func:`bayes_grpo.dynamics.trust_region.unclipped_share` of ``p* + e[n]``
        and ``p* + e[n-L]``. None: the linear law.

    Returns
    -------
    numpy.ndarray, shape ``(n_runs, n_steps + 1)``: the error per run and step.
    """
    a, mu, lag, e0, sd = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(x, dtype=float)) for x in (a, momentum, k_ref, e0, noise_sd))
    )
    # a NaN or infinite lag passed this check (NaN compares False) and ran as a gradient that
    # never left e0, without a word
    if not np.all(np.isfinite(lag)) or np.any(np.abs(lag - np.round(lag)) > 1e-9) or np.any(lag < 0):
        raise ValueError(f"k_ref must be a non-negative integer per run, got {np.unique(lag)[:5]}")
    # 3.5 failed "'float' object cannot be interpreted as an integer", naming nothing
    n_steps = whole_count(n_steps, "n_steps")
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    lag = np.round(lag).astype(np.int64)
    n_runs = a.size
    gen = _rng(rng)
    out = np.empty((n_runs, n_steps + 1))
    out[:, 0] = e0
    scale = None if lr_multipliers is None else check_multipliers(lr_multipliers, n_steps)
    level = _clip_level(clip_range, plateau, n_runs)
    _advance_recursion(out, 0, a, mu, lag, np.zeros(n_runs), scale, sd, gen, clip_range, level)
    return out


def _clip_level(clip_range, plateau, n_runs: int) -> np.ndarray | None:
    """The plateau ``p*`` per run that the clip's success probabilities ``p* + e`` need, or
    None without clipping."""
    if clip_range is None:
        return None
    if plateau is None:
        raise ValueError("clip_range needs the plateau p* of each run (the reward is p* + e)")
    return np.broadcast_to(np.asarray(plateau, dtype=float).reshape(-1), (n_runs,))


def continue_recursion(
    err: np.ndarray,
    a,
    momentum,
    k_ref,
    n_steps: int,
    *,
    velocity: np.ndarray | None = None,
    lr_multipliers=None,
    clip_range: tuple[float, float] | None = None,
    plateau=None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`simulate_recursion` (without noise) continued from its output ``err`` up to
    ``n_steps`` updates, with the same numbers as simulating from step 0 at once.

    ``err``: ``(n_runs, n_done + 1)`` errors ``e[0] .. e[n_done]`` already simulated (the
    recursion resumes from its last ``L + 1`` columns); ``velocity``: the momentum buffer
    ``w[n_done - 1]`` on a schedule (returned by the previous call; None: 0, as at step 0).
    Returns ``(out, velocity)``: ``out`` ``(n_runs, n_steps + 1)``, its first columns ``err``,
    and the buffer to continue from (what ``predict``'s look past the horizon extends, rather than
    simulating from step 0 at every look). ``clip_range``, ``plateau``: as in :func:`simulate_recursion`.
    """
    err = np.asarray(err, dtype=float)
    a, mu, lag = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(x, dtype=float)) for x in (a, momentum, k_ref))
    )
    n_runs, n_done = err.shape[0], err.shape[1] - 1
    if n_steps < n_done:
        raise ValueError(f"n_steps {n_steps} is below the {n_done} updates already simulated")
    lag = np.round(np.broadcast_to(lag, (n_runs,))).astype(np.int64)
    a, mu = np.broadcast_to(a, (n_runs,)), np.broadcast_to(mu, (n_runs,))
    out = np.empty((n_runs, n_steps + 1))
    out[:, : n_done + 1] = err
    scale = None if lr_multipliers is None else check_multipliers(lr_multipliers, n_steps)
    w = np.zeros(n_runs) if velocity is None else np.asarray(velocity, dtype=float).copy()
    level = _clip_level(clip_range, plateau, n_runs)
    w = _advance_recursion(out, n_done, a, mu, lag, w, scale, np.zeros(n_runs), None, clip_range, level)
    return out, w


def _advance_recursion(out, start, a, mu, lag, velocity, scale, sd, gen, clip_range=None, level=None) -> np.ndarray:
    """Fill ``out[:, start + 1 :]`` by the recursion from ``out[:, : start + 1]`` (the one loop of
    :func:`simulate_recursion` and :func:`continue_recursion`); returns the momentum buffer. With
    ``clip_range`` the gradient term is scaled by the share PPO clipping leaves
    (:func:`bayes_grpo.dynamics.trust_region.unclipped_share`, success probabilities ``level + e``)."""
    n_runs = out.shape[0]
    rows = np.arange(n_runs)
    noisy = np.any(sd > 0)
    prev = out[:, max(start - 1, 0)]  # e[n-1]; e[-1] = e0
    for n in range(start, out.shape[1] - 1):
        cur = out[:, n]
        lagged = out[rows, np.maximum(n - lag, 0)]  # e[m] = e0 for m <= 0
        force = a * lagged
        if clip_range is not None:
            force = force * unclipped_share(level + cur, level + lagged, clip_range)
        kick = sd * gen.standard_normal(n_runs) if noisy else 0.0
        if scale is None:
            nxt = cur + mu * (cur - prev) - force + kick
        else:
            # the noise is the gradient's: it joins the buffer, as it joins the increment that
            # mu carries on above (added to e[n+1] outside it, the stationary variance at mu 0.9
            # was 1/19 of the recursion's on a constant schedule of ones)
            velocity = mu * velocity - force + kick
            nxt = cur + scale[n] * velocity
        out[:, n + 1] = nxt
        prev = cur
    return velocity


# ----------------------------------------------------------------------------- SDE


def sde_transition(mass, damping, k_eff, noise_d, group_size, h):
    """Exact one-interval transition of the oscillator SDE, batched over runs.

    Parameters
    ----------
    mass, damping, k_eff
        ``M_eff > 0``, ``C_eff``, ``K_eff`` per run, shape ``(n_runs,)`` (broadcast).
    noise_d, group_size
        Noise scale ``D`` and group size ``G``: the force is ``sqrt(D/G) xi``.
    h
        Interval length in optimizer steps (scalar, ``>= 0``).

    Returns
    -------
    (Phi, Q): arrays of shape ``(n_runs, 2, 2)``; ``x(t+h) = Phi x(t) + N(0, Q)`` for the
    state ``x = (e, e')``.
    """
    m, c, k, d, g = np.broadcast_arrays(
        *(
            np.atleast_1d(np.asarray(x, dtype=float))
            for x in (mass, damping, k_eff, noise_d, group_size)
        )
    )
    if np.any(m <= 0):
        raise ValueError("mass M_eff must be > 0")
    if not (np.isfinite(float(h)) and float(h) >= 0):
        # h < 0 gave a 'covariance' with negative variances, h = inf an OverflowError
        raise ValueError(f"interval h must be a finite number of steps >= 0, got {h!r}")
    n = m.size
    a_mat = np.zeros((n, 2, 2))
    a_mat[:, 0, 1] = 1.0
    a_mat[:, 1, 0] = -k / m
    a_mat[:, 1, 1] = -c / m
    q_c = np.zeros((n, 2, 2))
    q_c[:, 1, 1] = (d / g) / m**2
    # Van Loan: expm([[-A, Qc], [0, A^T]] h) = [[., F12], [0, F22]]; Phi = F22^T, Q = Phi F12.
    # exp(-A h) grows like exp(h C/M): past a few e-folds Phi F12 is a difference of huge
    # numbers (h = 1000 gave Q ~ -6e22 for a true 5e-6), so take the interval h / 2^s with
    # ||A|| h / 2^s <= 1 and double it s times: Q(2h) = Q(h) + Phi(h) Q(h) Phi(h)^T.
    rate = float(np.abs(a_mat).sum(axis=2).max()) * float(h)
    halvings = int(np.ceil(np.log2(rate))) if rate > 1.0 else 0
    block = np.zeros((n, 4, 4))
    block[:, :2, :2] = -a_mat
    block[:, :2, 2:] = q_c
    block[:, 2:, 2:] = np.swapaxes(a_mat, 1, 2)
    f = expm(block * (float(h) / 2.0**halvings))
    phi = np.swapaxes(f[:, 2:, 2:], 1, 2)
    q = phi @ f[:, :2, 2:]
    for _ in range(halvings):
        q = q + phi @ q @ np.swapaxes(phi, 1, 2)
        phi = phi @ phi
    q = 0.5 * (q + np.swapaxes(q, 1, 2))
    return phi, q


def _sample_2d(q: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Draws ``N(0, q)`` for a batch of 2x2 covariances (robust to rank deficiency)."""
    z = gen.standard_normal((q.shape[0], 2))
    q11 = np.maximum(q[:, 0, 0], 0.0)
    s11 = np.sqrt(q11)
    l21 = np.divide(q[:, 1, 0], s11, out=np.zeros_like(s11), where=s11 > 0)
    s22 = np.sqrt(np.maximum(q[:, 1, 1] - l21**2, 0.0))
    return np.stack([s11 * z[:, 0], l21 * z[:, 0] + s22 * z[:, 1]], axis=1)


def simulate_sde(
    mass,
    damping,
    k_eff,
    noise_d,
    group_size,
    t,
    e0=1.0,
    v0=0.0,
    rng: np.random.Generator | int | None = None,
    *,
    return_velocity: bool = False,
):
    """Exact sample paths of ``M e'' + C e' + K_eff e = sqrt(D/G) xi(t)`` on a time grid.

    Parameters
    ----------
    mass, damping, k_eff
        ``M_eff > 0``, ``C_eff``, ``K_eff`` per run, shape ``(n_runs,)`` or scalar.
    noise_d
        ``D`` per run (reward units^2 per step, times G); 0 gives the deterministic
        closed-form trajectory.
    group_size
        ``G`` per run; the noise temperature is ``D/G``.
    t
        Increasing times in optimizer steps, shape ``(n_times,)``, shared by all runs
        (any spacing; ``t[0]`` is the time of the initial state).
    e0, v0
        Initial error ``R0 - p*`` and velocity ``e'(t[0])`` per run.
    rng
        Generator or seed.
    return_velocity
        Also return ``e'``.

    Returns
    -------
    ``e`` of shape ``(n_runs, n_times)`` (and ``e'`` of the same shape if requested).
    """
    t = np.asarray(t, dtype=float).ravel()
    if t.size == 0:
        raise ValueError("t must contain at least one time")
    if not np.all(np.isfinite(t)):
        # a NaN time made every later value NaN without a word, an infinite one failed
        # 'cannot convert float infinity to integer'
        first = int(np.argmin(np.isfinite(t)))
        raise ValueError(f"t must be finite; time {first} is {t[first]}")
    if np.any(np.diff(t) < 0):
        raise ValueError("t must be non-decreasing")
    m, c, k, d, g, x0, y0 = np.broadcast_arrays(
        *(
            np.atleast_1d(np.asarray(x, dtype=float))
            for x in (mass, damping, k_eff, noise_d, group_size, e0, v0)
        )
    )
    gen = _rng(rng)
    n_runs = m.size
    state = np.stack([x0, y0], axis=1)
    e = np.empty((n_runs, t.size))
    v = np.empty((n_runs, t.size))
    e[:, 0], v[:, 0] = state[:, 0], state[:, 1]
    cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    noisy = np.any(d > 0)
    for i, h in enumerate(np.diff(t)):
        key = round(float(h), 12)
        if key not in cache:
            cache[key] = sde_transition(m, c, k, d, g, h)
        phi, q = cache[key]
        state = np.einsum("rij,rj->ri", phi, state)
        if noisy:
            state = state + _sample_2d(q, gen)
        e[:, i + 1], v[:, i + 1] = state[:, 0], state[:, 1]
    return (e, v) if return_velocity else e


def stationary_covariance(mass, damping, k_eff, noise_d, group_size):
    """Stationary covariance of ``(e, e')`` for a stable oscillator (``C, K_eff > 0``).

    ``Var[e] = D / (2 G C K_eff)``, ``Var[e'] = D / (2 G C M)``, ``Cov = 0``.
    Returns an array of shape ``(n_runs, 2, 2)``.
    """
    m, c, k, d, g = np.broadcast_arrays(
        *(
            np.atleast_1d(np.asarray(x, dtype=float))
            for x in (mass, damping, k_eff, noise_d, group_size)
        )
    )
    out = np.zeros((m.size, 2, 2))
    out[:, 0, 0] = stationary_variance(d, g, c, k)
    out[:, 1, 1] = d / (2.0 * g * c * m)
    return out


# ----------------------------------------------------------------------------- run sets

#: Default models for :func:`simulate_sde_runset` (gain ``a = eta_eff * stiffness``).
DEFAULT_MODELS: dict[str, dict[str, float]] = {
    "sim-small": {
        "stiffness": 40.0,
        "plateau": 0.7,
        "initial_reward": 0.2,
        "noise_d": 4e-6,
        "model_size": 5e8,
    },
    "sim-large": {
        "stiffness": 80.0,
        "plateau": 0.8,
        "initial_reward": 0.3,
        "noise_d": 4e-6,
        "model_size": 1.5e9,
    },
}
_MODEL_KEYS = {"stiffness", "plateau", "initial_reward", "noise_d", "model_size"}


#: The smallest group size of a simulated GRPO run set (:func:`simulate_sde_runset`, ``simulate
#: sde``; the bandit's too): a group std needs two samples, and at G = 1 GRPO's group-normalised
#: advantage is 0 for every completion. The SDE's own functions (:func:`simulate_sde`,
#: :func:`sde_transition`) take any G > 0: there G only divides the noise temperature, and
#: ``noise_d`` is D at G = 1.
MIN_GROUP_SIZE: int = 2


def simulate_sde_runset(
    *,
    models: Mapping[str, Mapping[str, float]] | None = None,
    group_sizes: Sequence[int] = (4, 16),
    learning_rates: Sequence[float] = (1e-3,),
    momentum: float = 0.9,
    convention: str = EMA,
    k_refs: Sequence[int] = (1,),
    n_seeds: int = 2,
    n_steps: int = 300,
    log_every: int = 1,
    measurement_sd: float = 0.0,
    measurement_g_exponent: float = 0.0,
    run_sd: Mapping[str, float] | None = None,
    group_effects: Mapping[float, Mapping[str, float]] | None = None,
    noise_g_exponent: float = 1.0,
    ragged: float = 0.0,
    missing_frac: float = 0.0,
    allow_unstable: bool = False,
    random_seed: int = 0,
) -> xr.Dataset:
    """Simulate a run set from the oscillator SDE with known truth.

    One run per combination of model x group size x learning rate x ``k_ref`` x seed.
    Per run: ``a = eta_eff K_m`` (``eta_eff = eta`` for heavy-ball, ``eta (1 - mu)`` for
    EMA), ``(M, C, K_eff)`` from :func:`~bayes_grpo.dynamics.oscillator_coefficients`, the
    SDE ``M e'' + C e' + K_eff e = sqrt(D_m/G) xi`` sampled exactly from ``e(0) = R0 - p*``,
    ``e'(0) = 0``, and ``reward = p* + e + eps`` with measurement noise
    ``eps ~ N(0, (measurement_sd * G^(-measurement_g_exponent/2))^2)``.

    Parameters
    ----------
    models
        ``{name: {"stiffness": K, "plateau": p*, "initial_reward": R0, "noise_d": D,
        "model_size": N}}`` (``model_size`` optional); default :data:`DEFAULT_MODELS`.
    group_sizes, learning_rates, k_refs
        Values crossed into runs (``k_ref`` integer lags in optimizer steps; group sizes
        ``>=`` :data:`MIN_GROUP_SIZE`, 2: at G = 1 GRPO does not learn).
    momentum, convention
        Momentum (``mu`` or Adam ``beta1``) and its convention, shared by all runs.
    n_seeds
        Replicate runs per setting (coordinate ``seed`` = 0 .. n_seeds-1).
    n_steps
        Length of the longest run in optimizer steps: it logs steps ``0 .. n_steps - 1``, as
        the bandit simulator's runs of ``steps`` (step ``n`` is the reward before the ``n``-th
        update; ``n_steps`` rows, as a log of that many steps has).
    log_every
        Steps between logged points (steps ``0, k, 2k, ... <= n_steps - 1``; the SDE is still
        exact). The grid stays regular: the last step ``n_steps - 1`` is logged when it is on it
        (an evenly spaced log keeps a fit on its fast path,
        :func:`~bayes_grpo.model.builder.regular_grid`).
    measurement_sd, measurement_g_exponent
        Observation noise sd at ``G = 1`` and its exponent: sd ``= measurement_sd *
        G^(-exponent/2)`` (exponent 1 with ``noise_d = 0`` gives exactly the i.i.d.
        likelihood ``sigma^2 = D/G``).
    run_sd
        Run-level random offsets (normal sd) on ``"plateau"`` and ``"initial_reward"``;
        default none.
    group_effects
        Departures from G-invariance (the truth of ``H1``), e.g.
        ``{16: {"plateau": 0.05, "initial_reward": 0.0, "stiffness_factor": 1.5}}``: runs
        with that group size get the plateau / initial reward shifted and the stiffness
        multiplied (each key a group size of ``group_sizes``). Default none (the mean
        trajectory is G-invariant, ``H0``).
    noise_g_exponent
        ``alpha`` in the process-noise temperature ``D / G^alpha`` (theory: 1).
    ragged
        Fraction in ``[0, 1)``: each run's length ``L`` (steps ``0 .. L - 1`` logged, the
        truth's ``n_steps``) is drawn uniformly in ``((1 - ragged) n_steps, n_steps]`` (runs padded
        with NaN; a run cut short ends at its last logged step below ``L``, on the
        ``log_every`` grid).
    missing_frac
        Fraction in ``[0, 1)`` of logged points (other than step 0) dropped at random.
    allow_unstable
        Unless True, a setting not stable by the closed form (``C_eff <= 0``, or 0 up to rounding:
        :func:`~bayes_grpo.dynamics.stability.closed_form_stable`) or not exactly stable raises
        ValueError.
    random_seed
        Seed of everything random here: one stream for the whole call, so a run's draws depend on
        every setting of the call (the same run id from two calls with other models, group sizes,
        learning rates, ``k_refs`` or ``n_seeds`` holds other draws, and is no replicate to merge);
        the same call reproduces every run exactly.

    Returns
    -------
    xarray.Dataset
        A run set (:func:`~bayes_grpo.runset.make_runset`) with ``reward`` and
        ``true_mean_reward`` (the noise-free closed-form mean ``p* + e_mean(t)``), per-run
        coordinates filled in, ``source = "simulate:sde"``, and ``attrs["truth"]``: a JSON
        string ``{"format": TRUTH_FORMAT, "settings": {...arguments...}, "models":
        {name: {stiffness, plateau, initial_reward, noise_d, model_size}}, "runs": {run_id:
        {model, group_size, learning_rate, momentum, momentum_convention, k_ref, seed, stiffness, a,
        M_eff, C_eff, K_eff, zeta, w0, regime, spectral_radius, plateau, initial_reward,
        noise_d, stationary_var (``D / (2 G^alpha C K_eff)``), measurement_sd, n_steps}}}``;
        ``models`` holds the base values before ``group_effects``. Read it with
        :func:`runset_truth`.
    """
    from bayes_grpo.runset import make_runset  # run sets are built at the edge

    models = dict(DEFAULT_MODELS if models is None else models)
    check_models(models)
    if convention not in MOMENTUM_CONVENTIONS:
        raise ValueError(
            f"unknown momentum convention {convention!r}; expected one of {MOMENTUM_CONVENTIONS}"
        )
    try:
        mu = float(momentum)
    except (TypeError, ValueError):
        mu = float("nan")
    if not 0.0 <= mu < 1.0:
        # NaN read 'unstable (C_eff=nan, ...); pass allow_unstable=True', and with it wrote NaN
        # rewards; a negative momentum was simulated (the command line takes [0, 1) only)
        raise ValueError(f"momentum must be a finite number in [0, 1), got {momentum!r}")
    if not 0.0 <= ragged < 1.0 or not 0.0 <= missing_frac < 1.0:
        raise ValueError("ragged and missing_frac must lie in [0, 1)")
    # G = 0 wrote NaN rewards, a negative G or D a noise-free run (the negative variance clipped
    # to 0) with a negative stationary variance in its truth, a NaN learning rate 'is unstable'
    for label, values, low in (
        ("group size", group_sizes, "positive"),
        ("learning rate", learning_rates, "positive"),
        ("measurement_sd", [measurement_sd], "non-negative"),
        ("measurement_g_exponent", [measurement_g_exponent], None),
        ("noise_g_exponent", [noise_g_exponent], None),
    ):
        _check_values(label, values, low)
    small = [float(x) for x in group_sizes if float(x) < MIN_GROUP_SIZE]
    if small:
        # G = 1 was simulated as a run that learns, labelled group_size 1: in GRPO a group of one
        # completion has advantage 0 (its reward minus the group mean), the policy does not move,
        # and the bandit (the exact reduction) refuses it; the law's drift does not know that
        raise ValueError(
            f"group size must be >= {MIN_GROUP_SIZE} (a group std needs two samples: at G = 1 every "
            f"completion's advantage is 0 and GRPO does not learn, which the law cannot draw), "
            f"got {', '.join(f'{g:g}' for g in small)}"
        )
    # recorded in the truth as int(random_seed): -1 failed in NumPy naming no argument, True was 1
    checked_seed(random_seed, "random_seed", generator=False)
    # n_steps=10.5 logged steps 0 .. 11 and wrote n_steps 10 in the truth; n_seeds=1.5 failed
    # "'float' object cannot be interpreted as an integer"
    n_steps, log_every, n_seeds = (
        whole_count(value, label)
        for label, value in (("n_steps", n_steps), ("log_every", log_every), ("n_seeds", n_seeds))
    )
    if n_steps < 1 or log_every < 1 or n_seeds < 1:
        raise ValueError("n_steps, log_every and n_seeds must be >= 1")
    if n_steps > 1 and log_every >= n_steps:  # every run would be its step 0 alone
        raise ValueError(
            f"log_every ({log_every}) is not below n_steps ({n_steps}): only step 0 would be logged"
        )
    run_sd = dict(run_sd or {})
    if set(run_sd) - {"plateau", "initial_reward"}:
        raise ValueError(
            f"run_sd keys must be 'plateau' and/or 'initial_reward', got {sorted(run_sd)}"
        )
    for key, value in run_sd.items():  # a NaN sd made every reward NaN
        _check_values(f"run_sd[{key!r}]", [value], "non-negative")
    lists = (("group_sizes", group_sizes), ("learning_rates", learning_rates), ("k_refs", k_refs))
    for label, values in lists:
        if len(values) == 0:  # was "zero-size array to reduction operation maximum ..."
            raise ValueError(f"{label} must hold at least one value")
    # about 10 kB a run (its frame, coordinates and truth) and 80 B a logged point (measured: 9 kB
    # a run at 10000 runs of 10 steps)
    # steps 0, k, 2k, ... <= n_steps - 1 (n_steps T logged 0 .. T before: T + 1 rows, the bandit's
    # T). The run's last step is not added off the grid: a fit of an evenly spaced log evaluates
    # the law at O(sqrt(n)) points (error_trajectory_on_grid), of an uneven one at every point
    n_points = (n_steps - 1) // log_every + 1
    check_fits_in_memory(
        len(models) * len(group_sizes) * len(learning_rates) * len(k_refs) * n_seeds,
        n_points,
        bytes_per_point=80,
        bytes_per_run=10_000,
        points="logged steps",
    )
    gen = np.random.default_rng(random_seed)

    combos = list(itertools.product(models, group_sizes, learning_rates, k_refs, range(n_seeds)))
    n_runs = len(combos)
    name = np.array([c[0] for c in combos], dtype=object)
    g = np.array([c[1] for c in combos], dtype=float)
    lr = np.array([c[2] for c in combos], dtype=float)
    lag = np.array([c[3] for c in combos], dtype=float)
    spec = {key: np.array([float(models[n].get(key, np.nan)) for n in name]) for key in _MODEL_KEYS}
    effects = {float(k): dict(v) for k, v in (group_effects or {}).items()}
    shift = {"plateau": np.zeros(n_runs), "initial_reward": np.zeros(n_runs)}
    for gv, eff in effects.items():
        unknown = set(eff) - {"plateau", "initial_reward", "stiffness_factor"}
        if unknown:
            raise ValueError(
                f"group_effects[{gv:g}]: unknown keys {sorted(unknown)}; "
                "expected plateau, initial_reward, stiffness_factor"
            )
        if not np.any(g == gv):
            # it was applied to no run, without a word (a group size mistyped)
            raise ValueError(
                f"group_effects[{gv:g}]: no run has group size {gv:g} "
                f"(group_sizes {[float(x) for x in group_sizes]})"
            )
        for key, value in eff.items():
            low = "positive" if key == "stiffness_factor" else None
            _check_values(f"group_effects[{gv:g}][{key!r}]", [value], low)
        sel = g == gv
        spec["stiffness"] = np.where(
            sel, spec["stiffness"] * eff.get("stiffness_factor", 1.0), spec["stiffness"]
        )
        for key in shift:
            shift[key] = np.where(sel, eff.get(key, 0.0), shift[key])
    a = np.asarray(effective_step(lr, momentum, convention)) * spec["stiffness"]
    mass, damping, k_eff = oscillator_coefficients(a, momentum, lag)
    radius = spectral_radius(a, momentum, lag)
    # C_eff within rounding of 0 (a K_ref = 1 - mu exactly) is marginal, as closed_form_stable and
    # `stability` say: C_eff = 1.1e-16 was simulated with a truth of "underdamped", zeta 7e-17 and
    # a stationary variance of 1e11, while the same boundary rounded to -2.8e-17 was refused
    stable_cf = closed_form_stable(a, momentum, lag)
    stable_exact = exact_stable(a, momentum, lag)
    bad = ~stable_cf | ~stable_exact
    if np.any(bad) and not allow_unstable:
        i = int(np.flatnonzero(bad)[0])
        # a stiffness <= 0 read "unstable (C_eff=0.1, spectral radius=1.000000)": a positive
        # damping and a radius of 1, with nothing to say that the gain was the cause; and
        # "unstable (C_eff=-0.004, spectral radius=0.996337)" named no criterion, with a radius
        # that reads stable
        why = (
            f"the gain a = eta_eff K = {a[i]:.4g} has no restoring force (stiffness "
            f"{spec['stiffness'][i]:g} must be > 0)"
            if not a[i] > 0
            else (
                f"closed form: C_eff = {damping[i]:.4g}"
                f"{' (0 up to rounding)' if closed_form_marginal(a[i], momentum, lag[i]) else ''}, "
                f"not > 0: the SDE does not settle; exact: "
                f"spectral radius {radius[i]:.6f}{' >= 1' if not stable_exact[i] else ''}"
                if not stable_cf[i]
                else f"exact: spectral radius {radius[i]:.6f} >= 1"
            )
        )
        raise ValueError(
            f"setting model={name[i]!r}, lr={lr[i]:g}, k_ref={lag[i]:g} is unstable ({why}); pass "
            "allow_unstable=True (on the command line --allow-unstable)"
        )
    plateau = (
        spec["plateau"]
        + shift["plateau"]
        + run_sd.get("plateau", 0.0) * gen.standard_normal(n_runs)
    )
    r0 = (
        spec["initial_reward"]
        + shift["initial_reward"]
        + run_sd.get("initial_reward", 0.0) * gen.standard_normal(n_runs)
    )
    g_noise = g**noise_g_exponent  # the SDE is forced at temperature D / G^alpha
    t = np.arange(0, n_steps, log_every, dtype=float)
    e = simulate_sde(
        mass, damping, k_eff, spec["noise_d"], g_noise, t, e0=r0 - plateau, v0=0.0, rng=gen
    )
    from bayes_grpo.dynamics.trajectory import reward_trajectory

    mean = reward_trajectory(
        t[None, :], mass[:, None], damping[:, None], k_eff[:, None], plateau[:, None], r0[:, None]
    )
    meas = measurement_sd * g ** (-measurement_g_exponent / 2.0)
    reward = plateau[:, None] + e + meas[:, None] * gen.standard_normal(e.shape)
    lengths = np.full(n_runs, n_steps, dtype=float)
    if ragged > 0:
        # a run of L steps ends at step L - 1, in [(1 - ragged) T, T - 1] as before
        lengths = np.floor(gen.uniform((1.0 - ragged) * n_steps, n_steps, size=n_runs)) + 1.0
    keep = t[None, :] < lengths[:, None]
    if missing_frac > 0:
        drop = gen.uniform(size=e.shape) < missing_frac
        drop[:, 0] = False
        keep &= ~drop
    with np.errstate(invalid="ignore", divide="ignore"):
        zeta = np.where(stable_cf, damping_ratio(mass, damping, k_eff), np.nan)
        w0 = np.sqrt(k_eff / mass)
        stat_var = np.where(
            stable_cf, stationary_variance(spec["noise_d"], g_noise, damping, k_eff), np.inf
        )
    regime = closed_form_regime(a, momentum, lag)

    curves: dict[str, pd.DataFrame] = {}
    meta: dict[str, dict[str, Any]] = {}
    runs_truth: dict[str, dict[str, Any]] = {}
    steps = t.astype(np.int64)
    run_ids = [
        f"{m}-G{_label(gi)}-lr{_label(lri)}-k{_label(li)}-s{si}" for m, gi, lri, li, si in combos
    ]
    if len(set(run_ids)) < n_runs:
        # one name per run: a repeated value (or two that printed alike in the name) wrote one
        # run over the other, and the run set came out with fewer runs than asked, without a word
        dup = next(r for r in run_ids if run_ids.count(r) > 1)
        raise ValueError(
            f"two settings give the same run id {dup!r}: a value is repeated in group_sizes, "
            "learning_rates or k_refs"
        )
    for i, (mname, gi, lri, li, si) in enumerate(combos):
        run_id = run_ids[i]
        cols = keep[i]
        curves[run_id] = pd.DataFrame(
            {"reward": reward[i, cols], "true_mean_reward": mean[i, cols]},
            index=pd.Index(steps[cols], name="step"),
        )
        meta[run_id] = {
            "model": mname,
            "model_size": spec["model_size"][i],
            "group_size": gi,
            "learning_rate": lri,
            "momentum": momentum,
            "momentum_convention": convention,
            "k_ref": li,
            "seed": si,
            "source": "simulate:sde",
        }
        runs_truth[run_id] = {
            "model": mname,
            "group_size": float(gi),
            "learning_rate": float(lri),
            "momentum": float(momentum),
            "momentum_convention": convention,
            "k_ref": float(li),
            "seed": int(si),
            "stiffness": float(spec["stiffness"][i]),
            "a": float(a[i]),
            "M_eff": float(mass[i]),
            "C_eff": float(damping[i]),
            "K_eff": float(k_eff[i]),
            "zeta": _num(zeta[i]),
            "w0": _num(w0[i]),
            "regime": str(regime[i]),
            "spectral_radius": float(radius[i]),
            "plateau": float(plateau[i]),
            "initial_reward": float(r0[i]),
            "noise_d": float(spec["noise_d"][i]),
            "stationary_var": _num(stat_var[i]),
            "measurement_sd": float(meas[i]),
            "n_steps": int(lengths[i]),
        }
    settings = {
        "group_sizes": [float(x) for x in group_sizes],
        "learning_rates": [float(x) for x in learning_rates],
        "momentum": float(momentum),
        "convention": convention,
        "k_refs": [float(x) for x in k_refs],
        "n_seeds": int(n_seeds),
        "n_steps": int(n_steps),
        "log_every": int(log_every),
        "measurement_sd": float(measurement_sd),
        "measurement_g_exponent": float(measurement_g_exponent),
        "run_sd": {k: float(v) for k, v in run_sd.items()},
        "ragged": float(ragged),
        "missing_frac": float(missing_frac),
        "random_seed": int(random_seed),
        "group_effects": {
            f"{k:g}": {kk: float(vv) for kk, vv in v.items()} for k, v in effects.items()
        },
        "noise_g_exponent": float(noise_g_exponent),
    }
    truth = {
        "format": TRUTH_FORMAT,
        "settings": settings,
        "models": {n: {k: float(v) for k, v in s.items()} for n, s in models.items()},
        "runs": runs_truth,
    }
    return make_runset(curves, meta, attrs={TRUTH_ATTR: json.dumps(truth)})


def _check_values(label: str, values, low: str | None) -> None:
    """``ValueError`` naming ``label`` unless every value is a finite number, and ``low`` is
    ``"positive"`` (``> 0``), ``"non-negative"`` (``>= 0``) or None."""
    for value in values:
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{label} must be a number, got {value!r}") from None
        if not np.isfinite(x) or (low == "positive" and x <= 0) or (low == "non-negative" and x < 0):
            raise ValueError(f"{label} must be a finite{'' if low is None else ' ' + low} number, got {value!r}")


def check_models(models: Mapping[str, Mapping[str, float]]) -> None:
    """Refuse a model specification of :func:`simulate_sde_runset` that means nothing.

    Each model needs a name (not blank), ``stiffness``, ``plateau``, ``initial_reward`` and
    ``noise_d`` (and may have ``model_size``), all finite numbers, ``noise_d >= 0`` (a variance:
    a negative one was clipped to a noise-free run whose truth had a negative stationary
    variance) and ``model_size > 0``. ``ValueError`` naming the model and the key.
    """
    if not models:
        raise ValueError("models must name at least one model")
    for name, spec in models.items():
        if not str(name).strip():
            # '' was simulated as runs '-G4-lr0.001-k1-s0', of a model the fit reads as unknown
            raise ValueError(
                f"model {name!r}: an LLM needs a name (the runs' model, the start of their ids)"
            )
        missing = {"stiffness", "plateau", "initial_reward", "noise_d"} - set(spec)
        unknown = set(spec) - _MODEL_KEYS
        if missing or unknown:
            raise ValueError(
                f"model {name!r}: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}"
            )
        for key in sorted(spec):
            low = {"noise_d": "non-negative", "model_size": "positive"}.get(key)
            _check_values(f"model {name!r}: {key}", [spec[key]], low)


def _label(x) -> str:
    """``x`` as it is written in a run id: ``:g`` (``0.001``, ``4``), or every digit needed
    where ``:g`` would round it (``0.0010000001``: two learning rates got one name)."""
    short = f"{float(x):g}"
    return short if float(short) == float(x) else repr(float(x))


def _num(x: float) -> float | None:
    """JSON-safe float (None for NaN / inf)."""
    x = float(x)
    return x if np.isfinite(x) else None


def runset_truth(ds: xr.Dataset) -> dict[str, Any]:
    """The truth written by :func:`simulate_sde_runset` (``ds.attrs["truth"]`` parsed).

    Raises ValueError when the run set carries no truth (e.g. real logs).
    """
    raw = ds.attrs.get(TRUTH_ATTR)
    if raw is None:
        raise ValueError("run set has no 'truth' attribute (not made by simulate_sde_runset)")
    truth = json.loads(raw) if isinstance(raw, str) else dict(raw)
    if truth.get("format") != TRUTH_FORMAT:
        raise ValueError(f"unknown truth format {truth.get('format')!r}; expected {TRUTH_FORMAT!r}")
    return truth


def truth_frame(ds: xr.Dataset) -> pd.DataFrame:
    """Per-run truth as a DataFrame indexed by run id (the runs present in ``ds``)."""
    runs = runset_truth(ds)["runs"]
    frame = pd.DataFrame.from_dict(runs, orient="index")
    frame.index.name = "run"
    present = [str(r) for r in ds["run"].values]
    return frame.loc[[r for r in present if r in frame.index]]


__all__ = [
    "TRUTH_FORMAT",
    "TRUTH_ATTR",
    "DEFAULT_MODELS",
    "simulate_recursion",
    "continue_recursion",
    "sde_transition",
    "simulate_sde",
    "stationary_covariance",
    "simulate_sde_runset",
    "check_models",
    "check_fits_in_memory",
    "physical_memory",
    "runset_truth",
    "truth_frame",
]
