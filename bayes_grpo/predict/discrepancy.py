"""Law discrepancy: how far the fitted law's mean trajectory is from the data's, as a band term.

The posterior of the oscillator's parameters only knows parameter uncertainty: its band of the
mean trajectory is as narrow as the data pin the parameters down (a few thousandths of a
reward on bandit runs), even where the linear law itself does not describe the mean dynamics
(the softmax bandit is non-linear: its stiffness changes along the rise). This module
estimates the law's *structural misfit* on the training runs the posterior was fitted on,
and turns it into a term that widens the band of a predicted mean trajectory.

Estimator (training data only)
------------------------------
Work in the normalised progress ``u = (R - R0) / (p* - R0)`` of each training run (the
fitted ``R0`` and ``p*``), so the term is scale-free and transfers across LLMs and settings:

1. residual of each run against what the *predictor* says for that run's setting: the
   posterior-mean trajectory under the law the prediction uses (closed form or exact
   recursion), driven by the posterior's gain for the setting and the LLM-level ``p*`` and
   ``R0`` that a new run gets (not the run's own fitted offsets), ``r = (y - f) / (p* - R0)``;
2. runs with the same hyperparameters (model, learning rate, momentum and convention,
   ``K_ref``, group size, ``beta``) share one mean trajectory, so their *mean* residual
   ``rbar_g(t)`` estimates the law's misfit ``delta_g(t)`` for that setting, and its noise
   variance is estimated from the spread between those runs, ``s_g^2(t) / n_g`` (valid for
   noise that is autocorrelated in time, e.g. the seed-to-seed wander of a stochastic
   trajectory). A setting with a single run has no replicate: its noise variance is the
   pooled between-run variance of the replicated settings at the same progress, or the
   fit's i.i.d. noise ``sigma^2`` when no setting is replicated;
3. the discrepancy variance at progress ``u`` is the method-of-moments estimate
   ``d^2(u) = mean over (g, t) with u_g(t) in the bin of [rbar_g(t)^2 - s_g^2(t)/n_g]``,
   on :data:`PROGRESS_BINS` bins of the fitted folded progress ``v = 1 - |1 - u|`` (an
   overshoot past the plateau counts by its distance to it; finer bins near the plateau keep
   the approach apart from the long settled plateau), each bin pooled with :data:`SMOOTH_BINS`
   neighbours on each side (the misfit is smooth in progress; a bin the rise crosses in a
   few steps is otherwise noisy), then floored at 0.

A predicted draw whose mean trajectory is at progress ``u`` gets an added
``N(0, d^2(u) (p* - R0)^2)`` term, ``d`` linear between the bins' centres, with one standard
normal per draw (:func:`add_discrepancy`: the term is smooth in step, as a misfit of the law
is; the term widens pointwise bands; milestones, regime and stop step still come from the law
alone). The profile is estimated
from the fit's own data and nothing else; prediction targets never enter it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri

from bayes_grpo.predict.summary import rise_progress

#: Edges of the bins of folded progress ``v = 1 - |1 - u|`` (``u = (R - R0) / (p* - R0)``)
#: of the discrepancy profile: tenths of the rise, and finer near the plateau, so that the
#: approach to the plateau is not averaged with the (much longer) settled plateau.
PROGRESS_BINS: tuple[float, ...] = (
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 1.0,
)  # fmt: skip


def folded_progress(u: np.ndarray) -> np.ndarray:
    """``v = 1 - |1 - u|``: progress, with an overshoot past the plateau folded back.

    A trajectory at ``u = 1.05`` is as far from its plateau as one at ``u = 0.95``; the
    profile is indexed by that distance.
    """
    return 1.0 - np.abs(1.0 - np.asarray(u, dtype=float))


#: Bins on each side pooled into a bin's estimate (the profile is smoothed over progress).
SMOOTH_BINS: int = 1
#: Coordinates of a run that define "the same hyperparameters" (runs that share a mean).
SETTING_COORDS: tuple[str, ...] = (
    "model",
    "learning_rate",
    "momentum",
    "momentum_convention",
    "k_ref",
    "group_size",
    "beta",
)


@dataclass
class DiscrepancyProfile:
    """Discrepancy sd of the law as a function of normalised progress.

    Attributes
    ----------
    edges
        ``(n_bins + 1,)`` progress bin edges.
    sd
        ``(n_bins,)`` discrepancy sd in units of the rise ``p* - R0`` (NaN-free; bins
        without data take the nearest estimated bin's value).
    n_points
        ``(n_bins,)`` number of (setting, step) points behind each bin.
    n_settings, n_runs
        Training settings (distinct hyperparameters) and runs used.
    noise_method
        How the noise part was removed ("between-run spread", "pooled", "iid sigma").
    """

    edges: np.ndarray
    sd: np.ndarray
    n_points: np.ndarray
    n_settings: int
    n_runs: int
    noise_method: str
    extra: dict[str, Any] = field(default_factory=dict)

    def sd_at(self, progress: np.ndarray) -> np.ndarray:
        """Discrepancy sd (rise units) at progress values ``u`` (any shape; folded here).

        Linear between the bins' centres, where it takes the bins' values, and flat beyond the
        outer centres: read bin by bin it jumped at every edge, and a draw's term with it.
        Non-finite progress gets the largest sd.
        """
        u = folded_progress(progress)
        centres = 0.5 * (self.edges[:-1] + self.edges[1:])
        out = np.interp(np.where(np.isfinite(u), u, 0.0), centres, self.sd)
        return np.where(np.isfinite(u), out, np.max(self.sd))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (stored in prediction attributes)."""
        return {
            "progress_edges": [float(x) for x in self.edges],
            "sd_rise_units": [float(x) for x in self.sd],
            "n_points": [int(x) for x in self.n_points],
            "n_settings": self.n_settings,
            "n_runs": self.n_runs,
            "noise_method": self.noise_method,
            **self.extra,
        }


def setting_labels(coords: dict[str, Sequence[Any]], n_runs: int) -> list[str]:
    """One label per run from its hyperparameter coordinates (runs with equal labels share a mean)."""
    cols = [np.asarray(coords[c], dtype=object) for c in SETTING_COORDS if c in coords]
    if not cols:
        return [str(i) for i in range(n_runs)]
    return ["|".join(str(col[i]) for col in cols) for i in range(n_runs)]


def estimate_discrepancy(
    reward: np.ndarray,
    fitted: np.ndarray,
    initial: np.ndarray,
    plateau: np.ndarray,
    labels: Sequence[str],
    *,
    noise_sd: np.ndarray | None = None,
    edges: Sequence[float] = PROGRESS_BINS,
) -> DiscrepancyProfile:
    """Estimate the law-discrepancy profile from training runs (module docstring).

    Parameters
    ----------
    reward
        ``(n_runs, n_steps)`` logged rewards of the training runs (NaN where missing).
    fitted
        ``(n_runs, n_steps)`` posterior-mean fitted mean trajectories on the same grid.
    initial, plateau
        ``(n_runs,)`` fitted ``R0`` and ``p*`` per run (reward units).
    labels
        ``(n_runs,)`` setting label per run (:func:`setting_labels`).
    noise_sd
        ``(n_runs,)`` i.i.d. noise sd of the fit (reward units); used only when no setting
        has two runs.
    edges
        Progress bin edges.

    Returns
    -------
    DiscrepancyProfile
    """
    y = np.asarray(reward, dtype=float)
    f = np.asarray(fitted, dtype=float)
    if y.shape != f.shape or y.ndim != 2:
        raise ValueError(f"reward and fitted must be (n_runs, n_steps); got {y.shape}, {f.shape}")
    r0 = np.asarray(initial, dtype=float).reshape(-1)
    ps = np.asarray(plateau, dtype=float).reshape(-1)
    labels = list(labels)
    if not (len(labels) == r0.size == ps.size == y.shape[0]):
        raise ValueError("initial, plateau and labels need one entry per run")
    rise = ps - r0
    ok_run = np.isfinite(rise) & (np.abs(rise) > 0)
    if not ok_run.any():
        raise ValueError("no training run with a finite, non-zero fitted rise p* - R0")
    edges = np.asarray(edges, dtype=float)
    n_bins = edges.size - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        res = (y - f) / rise[:, None]
    prog = folded_progress(rise_progress(f, ps, r0))
    groups: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        if ok_run[i]:
            groups.setdefault(lab, []).append(i)
    # per setting: mean residual, its noise variance (NaN when unreplicated), progress
    means, noise_var, progress = [], [], []
    for idx in groups.values():
        rr = res[idx]
        n_obs = np.sum(np.isfinite(rr), axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            m = np.where(n_obs > 0, np.nansum(rr, axis=0) / np.maximum(n_obs, 1), np.nan)
            if len(idx) >= 2:
                dev = np.where(np.isfinite(rr), rr - m, 0.0)
                var = np.sum(dev**2, axis=0) / np.maximum(n_obs - 1, 1)
                v = np.where(n_obs >= 2, var / n_obs, np.nan)
            else:
                v = np.full(m.shape, np.nan)
        means.append(m)
        noise_var.append(v)
        progress.append(np.nanmean(prog[idx], axis=0))
    means_a, var_a, prog_a = np.array(means), np.array(noise_var), np.array(progress)
    bin_of = np.clip(np.searchsorted(edges, prog_a, side="right") - 1, 0, n_bins - 1)
    replicated = np.isfinite(var_a)
    if replicated.any():
        # pooled per-run noise variance (between-run variance, not divided by n) per bin, for
        # unreplicated settings
        n_rep = np.array([len(idx) for idx in groups.values()], dtype=float)[:, None]
        per_run_var = var_a * n_rep
        pooled = np.array(
            [
                np.nanmean(np.where(replicated & (bin_of == b), per_run_var, np.nan))
                if np.any(replicated & (bin_of == b))
                else np.nan
                for b in range(n_bins)
            ]
        )
        fallback = np.nanmean(per_run_var[replicated])
        pooled = np.where(np.isfinite(pooled), pooled, fallback)
        var_a = np.where(replicated, var_a, pooled[bin_of])
        method = "between-run spread of replicated settings" + (
            "" if replicated.all() else " (pooled for unreplicated settings)"
        )
    else:
        sd = np.asarray(noise_sd if noise_sd is not None else np.full(r0.size, np.nan), dtype=float)
        per_setting = np.array(
            [np.mean((sd[idx] / np.abs(rise[idx])) ** 2) for idx in groups.values()]
        )
        if not np.isfinite(per_setting).all():
            raise ValueError(
                "no replicated setting and no noise sd: cannot separate noise from law misfit"
            )
        var_a = np.broadcast_to(per_setting[:, None], means_a.shape)
        method = "i.i.d. noise sd of the fit (no replicated setting)"
    excess = means_a**2 - var_a
    valid = np.isfinite(excess) & np.isfinite(prog_a)
    n_points = np.array([int(np.sum(valid & (bin_of == b))) for b in range(n_bins)])
    sums = np.array([float(np.sum(excess[valid & (bin_of == b)])) for b in range(n_bins)])
    # the misfit is a smooth function of progress: pool each bin with its neighbours
    # (weighted by their points) before flooring, which steadies bins the rise crosses fast
    kernel = np.ones(2 * SMOOTH_BINS + 1)
    pooled_sum = np.convolve(sums, kernel, mode="same")
    pooled_n = np.convolve(n_points, kernel, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        d2 = np.where(pooled_n > 0, np.maximum(pooled_sum / pooled_n, 0.0), np.nan)
    if not np.isfinite(d2).any():
        raise ValueError("no training step with a finite residual to estimate the discrepancy from")
    filled = np.flatnonzero(np.isfinite(d2))
    for b in np.flatnonzero(~np.isfinite(d2)):
        d2[b] = d2[filled[np.argmin(np.abs(filled - b))]]
    return DiscrepancyProfile(
        edges=edges,
        sd=np.sqrt(d2),
        n_points=n_points,
        n_settings=len(groups),
        n_runs=int(ok_run.sum()),
        noise_method=method,
    )


def training_predictor_trajectories(
    fitted: Any,
    *,
    law: str = "recursion",
    max_draws: int = 200,
    clip_range: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """What the predictor would say for each training run's own setting.

    For every thinned posterior draw, the run's setting gives its gain ``a`` (and
    ``M_eff, C_eff, K_eff``); the plateau and initial reward are the *LLM-level* ones
    (``plateau``, ``initial_reward_model``), as for a new run, not the run's own fitted
    offsets. The trajectory follows ``law`` ("recursion": the lagged recursion with the
    logged reward as far behind as the run's source logs it,
    :func:`bayes_grpo.predict.predict.observation_lag_of`, as in
    :func:`bayes_grpo.predict.predict.recursion_trajectories`; "continuous": the closed
    form); the recursion falls back to the closed form when it is not defined for every run
    (non-integer ``K_ref`` or steps, unknown momentum). The posterior mean leaves out the draws
    that diverge at the run's setting (:func:`bayes_grpo.predict.predict.diverging_draws`), as
    a prediction's mean does: a few such draws of one run (e.g. an SGD run of an LLM fitted
    with Adam runs) made its mean trajectory thousands of rewards, and the profile, pooled over
    the LLM's runs, widened every prediction's band to thousands; a run whose every draw
    diverges has a NaN trajectory and gives the profile nothing. ``clip_range``: the PPO clip range
    the recursion simulates every training run with (that of the prediction: the training runs
    are taken to have run with it; :mod:`bayes_grpo.dynamics.trust_region`), None: the linear law.

    Returns
    -------
    (curves, initial, plateau, law_used): ``(n_runs, n_steps)`` posterior-mean trajectories
    on the run-set grid, ``(n_runs,)`` posterior-mean ``R0`` and ``p*`` of each run's LLM,
    and the law used.
    """
    from bayes_grpo.dynamics.stability import is_whole
    from bayes_grpo.dynamics.trajectory import reward_trajectory
    from bayes_grpo.model.prepare import follows_schedule, run_llm_names, update_multipliers
    from bayes_grpo.predict.predict import (
        diverging_draws,
        observation_lag_of,
        recursion_trajectories,
    )

    post = fitted.idata.posterior
    runset = fitted.runset
    run_ids = [str(r) for r in post["run"].values]
    steps = np.asarray(runset["step"].values, dtype=float)
    mu = np.asarray(runset["momentum"].sel(run=run_ids).values, dtype=float)
    lag = np.asarray(runset["k_ref"].sel(run=run_ids).values, dtype=float)
    # runs without a model name are the fit's LLM UNKNOWN_MODEL: `predict` of such a fit (CSV or
    # JSONL exports name none) failed with "'' is not in list"
    models = list(run_llm_names(runset.sel(run=run_ids)))
    n = post.sizes["chain"] * post.sizes["draw"]
    pick = np.unique(np.linspace(0, n - 1, min(max_draws, n)).round().astype(int))

    def flat(name: str, dim: str) -> np.ndarray:
        return post[name].transpose("chain", "draw", dim).values.reshape(n, -1)[pick]

    model_names = [str(m) for m in post["model"].values]
    col = [model_names.index(m) for m in models]
    ps = flat("plateau", "model")[:, col]
    r0 = flat("initial_reward_model", "model")[:, col]
    used = law
    if law == "recursion" and not (
        "a" in post
        and is_whole(steps)
        and steps.min() >= 0
        and is_whole(lag)
        and np.isfinite(mu).all()
    ):
        used = "continuous"
    out = np.empty((len(run_ids), steps.size))

    def stable_mean(traj: np.ndarray, diverging: np.ndarray) -> np.ndarray:
        keep = np.isfinite(traj) & ~np.asarray(diverging, dtype=bool).reshape(-1, 1)
        count = keep.sum(axis=0)
        total = np.where(keep, traj, 0.0).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    # a fit that follows its runs' logged learning-rate schedules predicts them on those schedules
    follow = hasattr(fitted, "model_config") and follows_schedule(fitted.model_config, getattr(fitted, "likelihood", "iid"))
    if used == "recursion":
        a = flat("a", "run")
        for i in range(len(run_ids)):
            rates = update_multipliers(runset, run_ids[i], int(steps.max())) if follow and steps.max() > 0 else None
            seen = observation_lag_of(str(runset["source"].sel(run=run_ids[i]).values), lag[i])
            traj = recursion_trajectories(
                a[:, i], mu[i], lag[i], steps, ps[:, i], r0[:, i], observation_lag=seen, lr_multipliers=rates,
                clip_range=clip_range,
            )
            out[i] = stable_mean(traj, diverging_draws(a[:, i], None, law="recursion", momentum=mu[i], k_ref=lag[i]))
    else:
        m, c, k = (flat(v, "run") for v in ("M_eff", "C_eff", "K_eff"))
        with np.errstate(over="ignore", invalid="ignore"):
            for i in range(len(run_ids)):
                if hasattr(fitted, "run_law"):
                    traj = fitted.run_law(runset, run_ids[i], steps, m[:, i], c[:, i], k[:, i], ps[:, i], r0[:, i], k_ref=lag[i])
                else:
                    traj = reward_trajectory(steps[None, :], m[:, i, None], c[:, i, None], k[:, i, None], ps[:, i, None], r0[:, i, None])
                out[i] = stable_mean(traj, c[:, i] <= 0.0)
    return out, r0.mean(axis=0), ps.mean(axis=0), used


def discrepancy_from_model(
    fitted: Any,
    *,
    model: str | None = None,
    law: str = "continuous",
    clip_range: tuple[float, float] | None = None,
) -> DiscrepancyProfile:
    """Discrepancy profile of a fitted ``GRPODynamicsModel`` from its own training runs.

    The misfit is that of the *predictor* on the training settings
    (:func:`training_predictor_trajectories`): the same ``law`` as the prediction, the
    posterior's gain for each run's setting, and the LLM-level plateau and initial reward a
    new run gets, so the run-to-run spread of the start and of the plateau counts as misfit
    too. Uses the runs of ``model`` when it is one of the fit's LLMs, else all runs
    (scale-free units make them comparable). ``clip_range``: the prediction's PPO clip range, with
    which the recursion simulates the training runs too (None: the linear law).
    """
    runset = getattr(fitted, "runset", None)
    if runset is None or getattr(fitted, "idata", None) is None:
        raise ValueError("the fitted model carries no run set to estimate a discrepancy from")
    curves, initial, plateau, used = training_predictor_trajectories(fitted, law=law, clip_range=clip_range)
    run_ids = [str(r) for r in fitted.idata.posterior["run"].values]
    summary = fitted.run_summary().loc[run_ids]
    keep = np.ones(len(run_ids), dtype=bool)
    if model is not None and model in set(summary["model"].astype(str)):
        keep = (summary["model"].astype(str) == model).to_numpy()
    reward = runset["reward"].sel(run=run_ids).transpose("run", "step").values
    coords = {c: runset[c].sel(run=run_ids).values for c in SETTING_COORDS if c in runset.coords}
    labels = setting_labels(coords, len(run_ids))
    profile = estimate_discrepancy(
        reward[keep],
        curves[keep],
        initial[keep],
        plateau[keep],
        [lab for lab, k in zip(labels, keep) if k],
        noise_sd=summary["sigma"].to_numpy(dtype=float)[keep],
    )
    profile.extra["runs_from_model"] = model if keep.sum() < len(run_ids) else "all"
    profile.extra["law"] = used
    if clip_range is not None and used == "recursion":
        profile.extra["clip_range"] = list(clip_range)
    return profile


def add_discrepancy(
    mean_draws: np.ndarray,
    initial: np.ndarray,
    plateau: np.ndarray,
    profile: DiscrepancyProfile,
    rng: np.random.Generator,
) -> np.ndarray:
    """Mean-trajectory draws plus the discrepancy term, ``(n_draws, n_steps)``.

    Each draw gets ``z d(u(t)) |p* - R0|``: one standard normal ``z`` for the whole draw, times
    the profile's sd (:meth:`DiscrepancyProfile.sd_at`, linear in progress) at its own progress
    ``u(t)``. At each step the term is ``N(0, (d(u) (p* - R0))^2)``, as when it was drawn
    afresh at every step, but a draw's term is smooth in step, as a law's misfit is: drawn per
    step, each draw zig-zagged by its sd from one step to the next, and the band edges with it
    (the shipped bandit's 90% band of the mean at ``--k-ref 2``: mean ``|second difference|``
    of its edges 0.0017, against 0.0003 without the term).

    The ``z`` are the normal's quantiles at ``(i + 1/2) / n`` shuffled (``n`` draws), so the
    band does not widen or narrow with the luck of one sample of ``n`` normals; their order comes
    from a stream spawned off ``rng`` (``rng.spawn``), not from ``rng``'s own:
    ``predict`` seeds ``rng`` and ``coefficient_draws`` (a new LLM's log K offsets, a new
    group's offsets) with one seed, so ``rng``'s first normals are those offsets', and ``z``
    drawn from them was the offset of its own draw: the term grew with the draw's curvature,
    widening the band by 40% at one step of a test with the marginal sd unchanged.
    """
    m = np.asarray(mean_draws, dtype=float)
    r0 = np.asarray(initial, dtype=float)
    ps = np.asarray(plateau, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging draw's progress overflows: its own
        scale = profile.sd_at(rise_progress(m, ps, r0)) * np.abs(ps - r0)[:, None]
    # the normal's quantiles at (i + 1/2) / n in a random order: one random sample of n normals
    # moved every step's band with it (the 90% band of the mean 4% narrower at one seed, 1% wider
    # at another), where draws afresh per step averaged over the steps
    order = rng.spawn(1)[0].permutation(m.shape[0])
    z = ndtri((order + 0.5) / m.shape[0])[:, None]
    return m + scale * z


__all__ = [
    "PROGRESS_BINS",
    "folded_progress",
    "SETTING_COORDS",
    "DiscrepancyProfile",
    "add_discrepancy",
    "discrepancy_from_model",
    "training_predictor_trajectories",
    "estimate_discrepancy",
    "setting_labels",
]
