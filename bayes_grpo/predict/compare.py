"""Compare reward laws on the same run set: LOO, leave-future-out and R^2 per run.

Four laws, each fitted with PyMC to every run of the run set in one model (parameters per
run, the same Gaussian observation noise per run, the same data-scaled weak priors), so
that the comparison is between laws and not between noise models or pooling schemes:

* ``oscillator_mechanistic``: the three-phase damped oscillator with ``M, C`` fixed by
  the gain ``a = eta K`` and the run's momentum and lag (``M = (1+mu)/2 + a L^2/2``,
  ``C = (1-mu) - a L``, ``K_eff = a``); free per run: ``p*, R0, a, sigma``. Needs every
  run's ``momentum`` and ``k_ref`` (else the law is skipped, with a note).
* ``oscillator_phenomenological``: the same curve with free ``w0, zeta`` per run
  (``p*, R0, w0, zeta, sigma``).
* ``single_exp``: ``p* - (p* - R0) exp(-t / tau)`` (the overdamped limit ``M -> 0``).
* ``logistic``: ``R0 + (p* - R0) / (1 + exp(-r (t - t_mid)))``.

Units: the PSIS-LOO elpd is that of each run's standardised reward (the likelihood is on ``z``),
the leave-future-out elpd that of the reward in its own units. The log density of a reward is
that of its ``z`` minus ``log sd``, the same for every law, so the differences between laws (and
their standard errors) read alike in both; the levels of the two do not compare.

Scores: PSIS-LOO (``az.loo`` / ``az.compare`` over every observed step, with the number of
Pareto ``k > 0.7`` observations surfaced: LOO over time-series points is optimistic and
those warnings say where it is not even reliable), leave-future-out (fit on the first 70%
of each run's steps, log predictive density and RMSE on the last 30%: the score that suits
forecasting), and the raw, noise-ceiling and smoothed ``R^2`` of each law's posterior-mean
curve per run. A run without a visible trend (:func:`bayes_grpo.metrics.has_trend`) is won by
no law (:data:`NO_TREND`) and is left out of the leave-future-out totals that pick the winner
(:func:`lfo_totals`; kept in ``lfo_elpd_all_runs``), as the fit and the report set such runs
apart: a law that draws its noise better is no evidence for the law.

Priors, in per-run standardised reward units (``z = (y - mean) / sd`` of the run) and run
length ``T``: ``p* ~ N(late, 1.5)``, ``R0 ~ N(early, 1.5)`` (means of the last / first 10%),
``log sigma ~ N(log first-difference noise, 1.5)``, time scales centred on ``T / 4`` with
log-sd 1.5 (``tau``, ``1 / w0``, ``1 / r``, ``(1 - mu) / a``), ``log zeta ~ N(0, 1)``,
``t_mid ~ N(T / 4, T / 2)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo import metrics
from bayes_grpo._arguments import checked_count, checked_seed
from bayes_grpo.checks.base import CheckResult, counted, refuse_repeats
from bayes_grpo.constants import RUN_DIM, STEP_DIM
from bayes_grpo.dynamics.trajectory import logistic, reward_trajectory, single_exponential
from bayes_grpo.runset import REWARD_VAR, require_runs
from bayes_grpo.runset.bounds import (
    CENTRE_MARGIN,
    bounded_value,
    bounds_text,
    check_reward_bounds,
    check_rewards_within,
    latent_value,
)

LAWS: tuple[str, ...] = (
    "oscillator_mechanistic",
    "oscillator_phenomenological",
    "single_exp",
    "logistic",
)
#: Fraction of each run's steps held out at the end for leave-future-out.
LFO_FRACTION: float = 0.3
#: Pareto k above which a LOO observation is flagged.
PARETO_K_WARN: float = 0.7
#: Prior log-sd of time scales and noise.
LOG_SD: float = 1.5
EDGE_FRACTION: float = 0.1


@dataclass
class RunData:
    """Observed rewards of a run set, flattened, with per-run scaling (no PyMC)."""

    run_ids: list[str]
    steps: np.ndarray  # (n_steps,)
    reward: np.ndarray  # (n_runs, n_steps), NaN where missing
    obs_run: np.ndarray  # (n_obs,)
    obs_step_idx: np.ndarray  # (n_obs,)
    obs_t: np.ndarray  # (n_obs,)
    obs_z: np.ndarray  # (n_obs,) standardised reward
    loc: np.ndarray  # (n_runs,)
    scale: np.ndarray  # (n_runs,)
    length: np.ndarray  # (n_runs,) last observed step
    early: np.ndarray  # (n_runs,) standardised
    late: np.ndarray
    noise: np.ndarray  # (n_runs,) standardised first-difference noise
    momentum: np.ndarray  # (n_runs,)
    k_ref: np.ndarray  # (n_runs,)
    bounds_z: np.ndarray | None = None  # (n_runs, 2) the reward bounds, standardised; None: unbounded

    @property
    def n_runs(self) -> int:
        return len(self.run_ids)


#: Fewest finite rewards a run needs to be compared (fitted, its last 30% held out, and tested
#: for a trend: :func:`bayes_grpo.metrics.trend_test` needs MIN_TREND_BLOCKS blocks of
#: SHORT_LOG_BLOCK_POINTS). With 8, a run of 8 rewards rising from 0.1 to 0.8 in noise 0.01
#: was reported "without a visible trend" and won by no law: the test cannot tell under 9.
MIN_COMPARE_POINTS: int = metrics.MIN_TREND_BLOCKS * metrics.SHORT_LOG_BLOCK_POINTS


def short_runs(run_ids: Sequence[str], reward: np.ndarray, min_points: int = MIN_COMPARE_POINTS) -> list[str]:
    """The runs of ``reward`` ``(n_runs, n_steps)`` with fewer than ``min_points`` finite rewards."""
    counts = np.isfinite(reward).sum(axis=1)
    return [str(r) for r, c in zip(run_ids, counts) if c < min_points]


def prepare_runs(
    ds: xr.Dataset,
    *,
    upto_fraction: float | None = None,
    min_points: int = MIN_COMPARE_POINTS,
    hyperparameter_defaults: Mapping[str, Any] | None = None,
    reward_bounds: tuple[float, float] | None = None,
) -> RunData:
    """Flatten a run set's rewards; ``upto_fraction`` keeps only the first part of each run.

    Runs with fewer than ``min_points`` finite rewards (after truncation) raise, naming them.
    ``hyperparameter_defaults`` (``momentum``, ``k_ref``) fill what a run does not know, as
    ``fit --default`` does. ``reward_bounds`` ``(lo, hi)``: kept, in each run's standardised
    units, for :func:`build_law_model`; a logged reward outside them is a ``RunSetError``
    naming run, step and value (:func:`bayes_grpo.runset.bounds.check_rewards_within`).
    """
    steps = ds[STEP_DIM].values.astype(float)
    reward = ds[REWARD_VAR].values.astype(float).copy()
    run_ids = [str(r) for r in ds[RUN_DIM].values]
    reward_bounds = check_reward_bounds(reward_bounds)
    check_rewards_within(reward, run_ids, steps, reward_bounds, without="compare without them")
    if (steps < 0).any():
        # every law starts at t = 0 (as in `fit`, which refuses them too); the message named no
        # run, so in a run set of many the user had to search for the ones logged from step < 0
        early = [r for r, row in zip(run_ids, reward) if np.isfinite(row[steps < 0]).any()]
        where = f"runs with rewards there: {early}" if early else "no run has a reward there"
        raise ValueError(f"steps must be >= 0 (t = optimizer step, R0 at t = 0); found {steps.min():g} ({where})")
    if upto_fraction is not None:
        for i in range(reward.shape[0]):
            idx = np.flatnonzero(np.isfinite(reward[i]))
            n_keep = int(round(upto_fraction * idx.size))
            reward[i, idx[n_keep:]] = np.nan
    short = short_runs(run_ids, reward, min_points)
    if short:
        raise ValueError(
            f"runs with fewer than {min_points} finite rewards cannot be compared: {short}"
        )
    loc = np.nanmean(reward, axis=1)
    scale = np.nanstd(reward, axis=1)
    scale = np.where(scale > 0, scale, 1.0)
    z = (reward - loc[:, None]) / scale[:, None]
    early, late, noise, length = [], [], [], []
    for i in range(len(run_ids)):
        zi = z[i][np.isfinite(z[i])]
        k = max(1, int(EDGE_FRACTION * zi.size))
        early.append(zi[:k].mean())
        late.append(zi[-k:].mean())
        noise.append(max(np.std(np.diff(zi)) / np.sqrt(2.0), 1e-3))
        length.append(steps[np.isfinite(z[i])].max())
    run_idx, step_idx = np.nonzero(np.isfinite(z))
    return RunData(
        run_ids=run_ids,
        steps=steps,
        reward=reward,
        obs_run=run_idx,
        obs_step_idx=step_idx,
        obs_t=steps[step_idx],
        obs_z=z[run_idx, step_idx],
        loc=loc,
        scale=scale,
        length=np.maximum(np.array(length), 1.0),
        early=np.array(early),
        late=np.array(late),
        noise=np.array(noise),
        momentum=_with_default(ds["momentum"].values, (hyperparameter_defaults or {}).get("momentum")),
        k_ref=_with_default(ds["k_ref"].values, (hyperparameter_defaults or {}).get("k_ref")),
        bounds_z=None
        if reward_bounds is None
        else (np.asarray(reward_bounds, dtype=float)[None, :] - loc[:, None]) / scale[:, None],
    )


def _with_default(values, default) -> np.ndarray:
    """``values`` as floats, the unknown (NaN) ones replaced by ``default`` when given."""
    out = np.asarray(values, dtype=float).copy()
    if default is not None:
        out[~np.isfinite(out)] = float(default)
    return out


def _law_curve(law: str, t, p: dict[str, Any], data: RunData, run_idx):
    """Standardised mean curve of ``law`` at ``t`` with per-run parameters ``p`` indexed by ``run_idx``."""
    plateau, r0 = p["plateau"][run_idx], p["initial_reward"][run_idx]
    if law == "single_exp":
        return single_exponential(t, plateau, r0, p["tau"][run_idx])
    if law == "logistic":
        return logistic(t, plateau, r0, p["rate"][run_idx], p["midpoint"][run_idx])
    if law == "oscillator_phenomenological":
        w0, zeta = p["w0"][run_idx], p["zeta"][run_idx]
        return reward_trajectory(t, 1.0, 2.0 * zeta * w0, w0 * w0, plateau, r0)
    if law == "oscillator_mechanistic":
        a = p["a"][run_idx]
        mu, lag = data.momentum[run_idx], data.k_ref[run_idx]
        mass = (1.0 + mu) / 2.0 + a * lag**2 / 2.0
        damping = (1.0 - mu) - a * lag
        return reward_trajectory(t, mass, damping, a, plateau, r0)
    raise ValueError(f"unknown law {law!r}; expected one of {LAWS}")


def checked_laws(laws: str | Sequence[str]) -> list[str]:
    """``laws`` as a list of the names in :data:`LAWS`, each once: a law named twice is refused
    as ``compare --laws`` refuses it (:func:`~bayes_grpo.checks.base.refuse_repeats`, the one
    rule; ``compare_laws`` dropped the repeat quietly, and before that fitted it twice and
    summed its leave-future-out elpd twice); an unknown name and an empty list are refused too
    (the latter was "no law could be fitted: " with no reason). One name as a string is that
    law (``laws="logistic"`` was read letter by letter: "unknown law 'l'")."""
    laws = [laws] if isinstance(laws, str) else list(laws)
    if not laws:
        raise ValueError(f"laws: no law given; expected one or more of {LAWS}")
    for law in laws:
        if law not in LAWS:
            raise ValueError(f"unknown law {law!r}; expected one of {LAWS}")
    refuse_repeats(laws, flag="laws")
    return laws


def law_applicable(law: str, data: RunData) -> str | None:
    """None if ``law`` can be fitted to ``data``, else the reason in words."""
    if law == "oscillator_mechanistic":
        from bayes_grpo.model.config import DEFAULT_RANGES, setting_in_range

        missing = [
            r
            for r, m, k in zip(data.run_ids, data.momentum, data.k_ref)
            if not (np.isfinite(m) and np.isfinite(k))
        ]
        if missing:
            # as fit's refusal (model.prepare), the way to give them: a bare "unknown" left the
            # user to find compare's own --default
            unknown = [
                name
                for name, values in (("momentum", data.momentum), ("k_ref", data.k_ref))
                if not np.isfinite(values).all()
            ]
            given = ", ".join(f"'{name}': ..." for name in unknown)
            flags = " ".join(f"--default {name}=VALUE" for name in unknown)
            return (
                f"momentum / k_ref unknown for runs {missing}; give a default with "
                f"hyperparameter_defaults={{{given}}} (CLI: {flags})"
            )
        # momentum 1 put log(0) in the prior of a (a PyMC SamplingError traceback), as fit refuses it
        for name, values in (("momentum", data.momentum), ("k_ref", data.k_ref)):
            bad = [f"{r} ({v:g})" for r, v, ok in zip(data.run_ids, values, setting_in_range(name, values)) if not ok]
            if bad:
                return f"{name} {DEFAULT_RANGES[name]}; runs {bad}"
    return None


def build_law_model(law: str, data: RunData):
    """PyMC model of ``law`` for every run of ``data`` (per-run parameters, Gaussian noise).

    With reward bounds (``data.bounds_z``) each run's plateau and initial reward are the images
    in the bounds of normal latent levels (:func:`bayes_grpo.runset.bounds.bounded_value`, as
    in ``fit --reward-bounds``), centred so that their medians are the data's late / early
    reward, as without bounds; the same for every law."""
    import pymc as pm

    reason = law_applicable(law, data)
    if reason:
        raise ValueError(f"law {law}: {reason}")
    coords = {RUN_DIM: data.run_ids, "obs": np.arange(data.obs_z.size)}
    T = data.length
    with pm.Model(coords=coords) as model:
        p: dict[str, Any] = {}
        for name, centre in (("plateau", data.late), ("initial_reward", data.early)):
            if data.bounds_z is None:
                p[name] = pm.Normal(name, centre, 1.5, dims=RUN_DIM)
            else:
                import pytensor.tensor as pt

                lo, hi = data.bounds_z[:, 0], data.bounds_z[:, 1]
                latent = pm.Normal(
                    f"{name}_latent", latent_value(centre, lo, hi, margin=CENTRE_MARGIN), 1.5, dims=RUN_DIM
                )
                p[name] = pm.Deterministic(name, bounded_value(latent, lo, hi, sigmoid=pt.sigmoid), dims=RUN_DIM)
        if law == "single_exp":
            p["tau"] = pm.LogNormal("tau", np.log(T / 4.0), LOG_SD, dims=RUN_DIM)
        elif law == "logistic":
            p["rate"] = pm.LogNormal("rate", np.log(4.0 / T), LOG_SD, dims=RUN_DIM)
            p["midpoint"] = pm.Normal("midpoint", T / 4.0, T / 2.0, dims=RUN_DIM)
        elif law == "oscillator_phenomenological":
            p["w0"] = pm.LogNormal("w0", np.log(4.0 / T), LOG_SD, dims=RUN_DIM)
            p["zeta"] = pm.LogNormal("zeta", 0.0, 1.0, dims=RUN_DIM)
        elif law == "oscillator_mechanistic":
            p["a"] = pm.LogNormal(
                "a", np.log((1.0 - data.momentum) * 4.0 / T), LOG_SD, dims=RUN_DIM
            )
        sigma = pm.LogNormal("sigma", np.log(data.noise), LOG_SD, dims=RUN_DIM)
        mu = _law_curve(law, data.obs_t, p, data, data.obs_run)
        pm.Normal("y", mu=mu, sigma=sigma[data.obs_run], observed=data.obs_z, dims="obs")
    return model


def fit_law(
    law: str,
    data: RunData,
    *,
    draws: int = 500,
    tune: int = 500,
    chains: int = 2,
    cores: int = 1,
    random_seed: int = 0,
    target_accept: float = 0.9,
    progressbar: bool = False,
):
    """Sample one law; returns InferenceData with the pointwise log likelihood.

    Without ``progressbar`` PyMC says nothing (``quiet``): its lines ("Initializing NUTS ...",
    "Sampling 2 chains ... took 12 seconds", "Only 60 samples per chain ...") came once per
    fit, eight times for the four laws, also under ``compare --json``."""
    import pymc as pm

    model = build_law_model(law, data)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=cores,
            random_seed=random_seed,
            target_accept=target_accept,
            progressbar=progressbar,
            quiet=not progressbar,
            idata_kwargs={"log_likelihood": True},
            compute_convergence_checks=False,
        )
    return idata


def _param_draws(idata, law: str) -> dict[str, np.ndarray]:
    names = {
        "single_exp": ["tau"],
        "logistic": ["rate", "midpoint"],
        "oscillator_phenomenological": ["w0", "zeta"],
        "oscillator_mechanistic": ["a"],
    }[law]
    post = idata.posterior
    out = {}
    for name in ["plateau", "initial_reward", "sigma", *names]:
        arr = post[name].values  # (chain, draw, run)
        out[name] = arr.reshape(-1, arr.shape[-1])
    return out


def curve_draws(
    idata, law: str, data: RunData, steps: np.ndarray, *, max_draws: int = 400
) -> tuple[np.ndarray, np.ndarray]:
    """Standardised mean-curve draws ``(n_draws, n_runs, n_steps)`` and sigma ``(n_draws, n_runs)``."""
    p = _param_draws(idata, law)
    n = p["plateau"].shape[0]
    sel = np.linspace(0, n - 1, min(n, max_draws)).astype(int)
    p = {k: v[sel] for k, v in p.items()}
    runs = np.arange(data.n_runs)
    t = np.asarray(steps, dtype=float)[None, None, :]
    # parameters (draw, run) -> (draw, run, 1) broadcast against t
    q = {k: v[:, :, None] for k, v in p.items()}
    with np.errstate(over="ignore", invalid="ignore"):
        mean = _law_curve(
            law, t, {k: _Indexer(v) for k, v in q.items()}, _broadcast_hyper(data), runs
        )
    return np.asarray(mean, dtype=float), p["sigma"]


class _Indexer:
    """Index the run axis (1) of a (draw, run, 1) array like a per-run vector."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr

    def __getitem__(self, idx):
        return self.arr[:, idx]


def _broadcast_hyper(data: RunData) -> RunData:
    out = RunData(**{k: getattr(data, k) for k in data.__dataclass_fields__})
    out.momentum = data.momentum[:, None]
    out.k_ref = data.k_ref[:, None]
    return out


def _r2_table(law: str, data: RunData, mean_curve: np.ndarray) -> list[dict[str, Any]]:
    rows = []
    for i, run_id in enumerate(data.run_ids):
        ok = np.isfinite(data.reward[i])
        y = data.reward[i][ok]
        yhat = (mean_curve[i] * data.scale[i] + data.loc[i])[ok]
        t = data.steps[ok]
        r2 = metrics.r2(y, yhat)
        rows.append(
            {
                "run": run_id,
                "law": law,
                "r2": r2,
                "noise_ceiling_r2": metrics.noise_ceiling_r2(y, steps=t),
                "smoothed_r2": metrics.smoothed_r2(y, yhat),
                "has_trend": bool(metrics.has_trend(t, y)),
                # each point's -(y - yhat)^2 / SST (they sum to R^2 - 1), for the standard error
                # of a difference of R^2 between laws (_with_run_r2_differences)
                "_r2_point": -((y - yhat) ** 2) / np.sum((y - y.mean()) ** 2) if np.isfinite(r2) else None,
            }
        )
    return rows


def _lfo_scores(
    law: str, idata_train, data_full: RunData, data_train: RunData
) -> list[dict[str, Any]]:
    """Log predictive density and RMSE of the held-out end of each run (original units)."""
    from scipy.special import logsumexp

    mean, sigma = curve_draws(idata_train, law, data_train, data_full.steps)
    rows = []
    for i, run_id in enumerate(data_full.run_ids):
        held = np.isfinite(data_full.reward[i]) & ~np.isfinite(data_train.reward[i])
        if not held.any():
            continue
        y = data_full.reward[i][held]
        # train-scale parameters: curves are in the training run's standardised units
        mu = mean[:, i, held] * data_train.scale[i] + data_train.loc[i]
        sd = sigma[:, i, None] * data_train.scale[i]
        logp = -0.5 * ((y[None] - mu) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)
        lpd = logsumexp(logp, axis=0) - np.log(logp.shape[0])
        point = mu.mean(axis=0)
        rows.append(
            {
                "run": run_id,
                "law": law,
                "lfo_elpd": float(lpd.sum()),
                "lfo_elpd_per_step": float(lpd.mean()),
                "lfo_rmse": float(np.sqrt(np.mean((y - point) ** 2))),
                "n_held_out": int(held.sum()),
                # pointwise, for the standard error of a difference between laws (lfo_differences)
                "_lfo_lpd": lpd,
            }
        )
    return rows


def _convergence_failures(law: str, idata, idata_train) -> list[str]:
    """``"LAW fit (what failed)"`` per fit of ``law`` (full run set, leave-future-out prefix)
    that did not converge (:func:`~bayes_grpo.model.convergence.convergence_check`), for
    :func:`convergence_note`."""
    from bayes_grpo.model.convergence import convergence_check

    failures = []
    for what, fitted in (("fit", idata), ("leave-future-out fit", idata_train)):
        check = convergence_check(fitted)
        if check.passed is False and fitted.posterior.sizes["chain"] > 1:
            # the criteria that failed: R-hat, bulk ESS and divergences could all pass while
            # tail ESS, tree depth or E-BFMI failed, and the note then gave no reason
            failures.append(f"{law} {what} ({', '.join(check.values['failed'])})")
    return failures


def convergence_note(failures: Sequence[str]) -> str | None:
    """One sentence naming every fit that did not converge (:func:`_convergence_failures`), or None.

    The figures of a law whose chains disagree or diverged are not comparable; the comparison
    says so instead of ranking them silently. Said once with the fits it concerns: one sentence
    per fit repeated "its figures are unreliable; rerun with more --draws/--tune" up to eight
    times."""
    if not failures:
        return None
    return (
        f"{'These fits' if len(failures) > 1 else 'This fit'} did not converge, so "
        f"{'their' if len(failures) > 1 else 'its'} figures are unreliable (rerun with more "
        f"--draws/--tune): {'; '.join(failures)}."
    )


@dataclass
class ComparisonResult:
    """Outcome of :func:`compare_laws`."""

    loo: pd.DataFrame  # az.compare table (+ pareto-k counts)
    lfo: pd.DataFrame  # per law: summed held-out elpd and mean RMSE
    per_run: pd.DataFrame  # per (run, law): R^2s, LFO scores, Pareto-k counts
    notes: list[str] = field(default_factory=list)
    idatas: dict[str, Any] = field(default_factory=dict)
    lfo_fraction: float = LFO_FRACTION  # the share of each run held out, as compare_laws used it

    def winner(self, criterion: str = "lfo") -> str:
        if criterion == "loo":
            return str(self.loo.index[0])
        return str(self.lfo["lfo_elpd"].idxmax())

    def per_run_winners(self) -> pd.DataFrame:
        """For each run: the law with the best LFO elpd and with the best raw R^2; for a run
        without a visible trend (:func:`bayes_grpo.metrics.has_trend`) :data:`NO_TREND`, since
        no law explains it and one of them winning by noise says nothing of the laws.
        ``lfo_within_se``: the laws whose held-out elpd on the run is within one standard error
        of the best law's (``per_run`` ``lfo_elpd_diff`` / ``lfo_dse``), which it does not beat;
        ``r2_within_se``: the same for ``best_r2`` (``per_run`` ``r2_diff`` / ``r2_dse``, from the
        paired points' squared errors)."""
        pr = self.per_run
        out = []
        for run_id, grp in pr.groupby("run", sort=False):
            row = {"run": run_id}
            trend = bool(grp["has_trend"].iloc[0]) if "has_trend" in grp else None
            if grp["lfo_elpd"].notna().any():
                row["best_lfo"] = NO_TREND if trend is False else grp.loc[grp["lfo_elpd"].idxmax(), "law"]
                if "lfo_dse" in grp:
                    # a run's best law by 0.007 nats read as a win: name the laws within one SE of it
                    rest = grp[(grp["law"] != row["best_lfo"]) & within_one_se(grp["lfo_elpd_diff"], grp["lfo_dse"])]
                    row["lfo_within_se"] = "" if trend is False else ", ".join(map(str, rest["law"]))
            if grp["r2"].notna().any():
                row["best_r2"] = NO_TREND if trend is False else grp.loc[grp["r2"].idxmax(), "law"]
                if "r2_dse" in grp:
                    # best_r2 had no tie rule: a law ahead by 0.0004 of R^2 (or level with another,
                    # the first in law order then named) read as the run's best, as lfo once did
                    rest = grp[(grp["law"] != row["best_r2"]) & within_one_se(grp["r2_diff"], grp["r2_dse"])]
                    row["r2_within_se"] = "" if trend is False else ", ".join(map(str, rest["law"]))
            row["has_trend"] = trend
            out.append(row)
        return pd.DataFrame(out)

    def r2_by_run(self, column: str = "r2") -> pd.DataFrame:
        """``column`` of :attr:`per_run` (``r2``, ``noise_ceiling_r2``, ``smoothed_r2``) as a
        table with a row per run (run-set order) and a column per fitted law."""
        pr = self.per_run
        laws = list(dict.fromkeys(pr["law"]))
        table = pr.pivot(index="run", columns="law", values=column)
        return table.reindex(index=list(dict.fromkeys(pr["run"])), columns=laws)

    def margins(self) -> tuple[str, str]:
        """How far ahead each winner is, in words: the leave-future-out elpd over the next law,
        and the PSIS-LOO ``elpd_diff`` (with its standard error ``dse``) of the next law; ``""``
        with one law. 'prefers X' read the same for a lead of 0.3 nats out of 450 as for 100."""
        lfo, loo = "", ""
        totals = self.lfo["lfo_elpd"].dropna().sort_values(ascending=False)
        if len(totals) > 1:
            se = self.lfo["lfo_dse"].get(totals.index[1], np.nan) if "lfo_dse" in self.lfo else np.nan
            dse = f" ± {se:.2g}" if np.isfinite(se) else ""
            lfo = f" (by {totals.iloc[0] - totals.iloc[1]:.3g}{dse} nats over {totals.index[1]})"
        if len(self.loo) > 1 and "elpd_diff" in self.loo:
            second = self.loo.iloc[1]
            dse = f" ± {second['dse']:.2g}" if "dse" in self.loo and np.isfinite(second["dse"]) else ""
            loo = f" (by {second['elpd_diff']:.3g}{dse} nats over {self.loo.index[1]})"
        return lfo, loo

    def ties(self, criterion: str = "loo") -> list[str]:
        """The laws whose elpd difference to the best law is within its standard error, best
        first: ``criterion`` ``"loo"`` (PSIS-LOO ``elpd_diff`` / ``dse``) or ``"lfo"``
        (``lfo_elpd_diff`` / ``lfo_dse``); the criterion cannot tell them from the winner."""
        if criterion == "loo":
            table, diff, se = self.loo, "elpd_diff", "dse"
        else:
            table, diff, se = self.lfo.sort_values("lfo_elpd", ascending=False), "lfo_elpd_diff", "lfo_dse"
        if len(table) < 2 or diff not in table or se not in table:
            return []
        rest = table.iloc[1:]
        tied = within_one_se(rest[diff], rest[se])
        return [str(law) for law in rest.index[tied]]

    def _prefers(self, criterion: str, best: str, by: str) -> str:
        """'prefers X (by ...)', or that the criterion cannot tell X from the laws within one
        standard error of it (:meth:`ties`): 'prefers X (by 0.302 ± 0.53 nats over Y)' stated a
        preference the numbers do not make."""
        tied = self.ties(criterion)
        table = self.loo if criterion == "loo" else self.lfo.sort_values("lfo_elpd", ascending=False)
        if tied and tied[0] == str(table.index[1]):
            return (
                f"cannot tell {best} from {', '.join(tied)}: {best} leads {by.strip()[1:-1]}, "
                "within one standard error of the difference"
            )
        if tied:
            return f"prefers {best}{by}, but cannot tell it from {', '.join(tied)} (within one standard error)"
        return f"prefers {best}{by}"

    def table(self) -> pd.DataFrame:
        """:attr:`lfo` and :attr:`loo` side by side, a row per law in the leave-future-out
        ranking (then any law without one): the outer join sorted the laws by name, so the
        report's table and --json's began with logistic whichever law won."""
        joined = self.lfo.join(self.loo, how="outer")
        order = [*self.lfo.index, *(law for law in joined.index if law not in self.lfo.index)]
        return joined.reindex(order)

    def to_check_result(self) -> CheckResult:
        lfo_best = self.winner("lfo")
        loo_best = self.winner("loo")
        lfo_by, loo_by = self.margins()
        loo_says = self._prefers("loo", loo_best, loo_by)
        lfo_says = self._prefers("lfo", lfo_best, lfo_by)
        summary = (
            f"Leave-future-out (last {self.lfo_fraction:.0%} of each run) {lfo_says}; "
            f"PSIS-LOO {loo_says}."
        )
        trend = self.per_run["has_trend"] if "has_trend" in self.per_run else None
        flat = no_trend_runs(self.per_run)
        if flat and trend is not None and trend.astype(bool).any():
            # the totals that pick the leave-future-out winner are those of the runs with a trend
            summary = (
                f"Leave-future-out (last {self.lfo_fraction:.0%} of each run, summed over the runs with a "
                f"visible trend; {len(flat)} without one left out: {', '.join(flat)}) "
                f"{lfo_says}; PSIS-LOO (every run) {loo_says}."
            )
        fitted = list(dict.fromkeys([*self.lfo.index, *self.loo.index]))
        if len(fitted) == 1:
            # `compare --laws single_exp`, or every other law skipped (the mechanistic one without
            # momentum / k_ref): "prefers single_exp" stated a preference over no other law
            elpd = self.loo["elpd_loo"].iloc[0] if "elpd_loo" in self.loo and len(self.loo) else np.nan
            lfo_elpd = self.lfo["lfo_elpd"].iloc[0] if "lfo_elpd" in self.lfo and len(self.lfo) else np.nan
            summary = (
                f"Only {fitted[0]} was fitted: no law to compare it with, so no preference "
                f"(leave-future-out elpd {lfo_elpd:.4g} on the last {self.lfo_fraction:.0%} "
                f"of each run{', summed over the runs with a visible trend' if flat and trend is not None and trend.astype(bool).any() else ''}; "
                f"PSIS-LOO elpd {elpd:.4g})."
            )
        if trend is not None and len(trend) and not trend.astype(bool).any():
            # every run is won by NO_TREND in per_run_winners; the summary named a preferred law
            summary = (
                f"No run has a visible trend: no law explains these runs, and the best scores "
                f"(leave-future-out: {lfo_best}; PSIS-LOO: {loo_best}) are noise, not a preference."
            )
        if self.notes:
            summary += " " + " ".join(self.notes)
        return CheckResult(
            name="law_comparison",
            passed=None,
            summary=summary,
            table=self.table(),
            values={
                "lfo_winner": lfo_best,
                "loo_winner": loo_best,
                "loo_within_se_of_winner": self.ties("loo"),
                "lfo_within_se_of_winner": self.ties("lfo"),
                "per_run": self.per_run.to_dict(orient="records"),
                "per_run_winners": self.per_run_winners().to_dict(orient="records"),
                "notes": self.notes,
            },
        )


def within_one_se(diff, se) -> np.ndarray:
    """Where a law's score behind the best law (``diff``, >= 0) is within the standard error
    ``se`` of that difference: the criterion cannot tell the two apart. The one tie rule of
    :meth:`ComparisonResult.ties` and :meth:`ComparisonResult.per_run_winners` (elpd and R^2)."""
    diff, se = np.asarray(diff, dtype=float), np.asarray(se, dtype=float)
    return np.isfinite(se) & (diff <= se)


def paired_difference(best: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """The summed pointwise difference ``best - other`` of two laws' scores on the same points,
    and its standard error ``sqrt(n var(diff))`` (``az.compare``'s ``dse``)."""
    diff = np.asarray(best, dtype=float) - np.asarray(other, dtype=float)
    return float(diff.sum()), float(np.sqrt(diff.size * np.var(diff)))


#: What :meth:`ComparisonResult.per_run_winners` names as a run's best law when the run has no
#: visible trend.
NO_TREND = "none (no trend)"


def no_trend_runs(per_run: pd.DataFrame) -> list[str]:
    """The runs of a per-(run, law) table whose ``has_trend`` is False, in table order."""
    if "has_trend" not in per_run or per_run.empty:
        return []
    flags = per_run.groupby("run", sort=False)["has_trend"].first()
    return [str(r) for r, t in flags.items() if t is not None and not bool(t)]


def lfo_totals(per_run: pd.DataFrame) -> pd.DataFrame:
    """Per law: the leave-future-out elpd summed (``lfo_elpd``) and RMSE averaged
    (``lfo_rmse_mean``) over the runs with a visible trend, best first.

    A run without one (:func:`no_trend_runs`) is won by no law (:data:`NO_TREND`) and does not
    count towards the winner; it is kept in ``lfo_elpd_all_runs`` (the sum over every run).
    When no run has a trend the totals are over every run (the summary then says the scores
    are noise). The ``R^2`` medians are over every run. ``n_lfo_runs``: runs summed.
    """
    flat = set(no_trend_runs(per_run))
    scored = per_run[~per_run["run"].astype(str).isin(flat)] if flat else per_run
    if scored.empty:
        scored = per_run
    totals = scored.groupby("law").agg(
        lfo_elpd=("lfo_elpd", "sum"),
        lfo_rmse_mean=("lfo_rmse", "mean"),
        n_lfo_runs=("lfo_elpd", "count"),
    )
    every = per_run.groupby("law").agg(
        lfo_elpd_all_runs=("lfo_elpd", "sum"),
        r2_median=("r2", "median"),
        smoothed_r2_median=("smoothed_r2", "median"),
    )
    return totals.join(every, how="outer").sort_values("lfo_elpd", ascending=False)

def lfo_differences(
    pointwise: Mapping[str, Mapping[str, np.ndarray]], totals: pd.DataFrame, flat: Sequence[str] = ()
) -> pd.DataFrame:
    """Per law: ``lfo_elpd_diff``, the leave-future-out elpd of the best law of ``totals`` minus
    this law's, and ``lfo_dse``, its standard error from the paired held-out points
    (``sqrt(n var(diff))``, as ``az.compare``'s ``dse``), over the runs :func:`lfo_totals` sums
    (those not in ``flat``, or every run when all are). ``pointwise``: law -> run -> the log
    predictive density of each held-out point (the same points for every law)."""
    cols = ["lfo_elpd_diff", "lfo_dse"]
    if totals.empty or not pointwise:
        return pd.DataFrame(columns=cols, dtype=float)
    best = str(totals["lfo_elpd"].idxmax())
    runs = list(pointwise.get(best, {}))
    scored = [r for r in runs if r not in set(flat)] or runs
    out = {}
    for law, by_run in pointwise.items():
        if law == best:
            out[law] = (0.0, 0.0)
            continue
        pairs = [(pointwise[best][r], by_run.get(r)) for r in scored]
        if not pairs or any(a is None or b is None for a, b in pairs):
            out[law] = (np.nan, np.nan)  # a run without its pointwise scores: no paired difference
            continue
        out[law] = paired_difference(np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs]))
    return pd.DataFrame.from_dict(out, orient="index", columns=cols)


def _with_run_lfo_differences(per_run: pd.DataFrame, pointwise: Mapping[str, Mapping[str, np.ndarray]]) -> pd.DataFrame:
    """``per_run`` with ``lfo_elpd_diff`` / ``lfo_dse``: each law's leave-future-out elpd behind
    the run's best law and its standard error (:func:`lfo_differences` on the run alone), so that
    :meth:`ComparisonResult.per_run_winners` can tell a run's winner from a tie."""
    if per_run.empty or "lfo_elpd" not in per_run or not pointwise:
        return per_run
    parts = []
    for run, grp in per_run.groupby("run", sort=False):
        totals = grp.set_index("law")[["lfo_elpd"]].dropna()
        if totals.empty:
            continue
        run_points = {law: {run: by_run.get(run)} for law, by_run in pointwise.items() if law in totals.index}
        parts.append(lfo_differences(run_points, totals).assign(run=run).rename_axis("law").reset_index())
    if not parts:
        return per_run
    return per_run.merge(pd.concat(parts, ignore_index=True), on=["run", "law"], how="left")


def _with_run_r2_differences(per_run: pd.DataFrame, pointwise: Mapping[str, Mapping[str, np.ndarray | None]]) -> pd.DataFrame:
    """``per_run`` with ``r2_diff`` / ``r2_dse``: each law's R^2 behind the run's best R^2 and
    its standard error from the paired points (:func:`paired_difference` of each point's
    ``-(y - yhat)^2 / SST``), so that :meth:`ComparisonResult.per_run_winners` can tell a run's
    best R^2 from a tie. NaN where a law's points are missing (no R^2)."""
    if per_run.empty or "r2" not in per_run or not pointwise:
        return per_run
    rows = []
    for run, grp in per_run.groupby("run", sort=False):
        scored = grp.dropna(subset=["r2"])
        if scored.empty:
            continue
        best = str(scored.loc[scored["r2"].idxmax(), "law"])
        best_points = pointwise.get(best, {}).get(run)
        for law in grp["law"]:
            points = pointwise.get(law, {}).get(run)
            if best_points is None or points is None:
                diff = (np.nan, np.nan)
            else:
                diff = paired_difference(best_points, points)
            rows.append({"run": run, "law": law, "r2_diff": diff[0], "r2_dse": diff[1]})
    if not rows:
        return per_run
    return per_run.merge(pd.DataFrame(rows), on=["run", "law"], how="left")


def pareto_k_note(per_run: pd.DataFrame) -> str | None:
    """The PSIS-LOO warning of a per-(run, law) table: how many observations have Pareto
    ``k > PARETO_K_WARN``, and of which law on which run (None when there are none)."""
    if "n_pareto_k_high" not in per_run or per_run.empty:
        return None
    high = per_run[per_run["n_pareto_k_high"].fillna(0) > 0]
    if high.empty:
        return None
    # the count alone (and n_pareto_k_high per law) did not say which run's points LOO cannot
    # judge: an outlier step of one run, or a law that misfits one run's shape
    where = "; ".join(
        f"{law}: " + ", ".join(f"{run} {int(n)}" for run, n in zip(grp["run"], grp["n_pareto_k_high"]))
        for law, grp in high.groupby("law", sort=False)
    )
    note = (
        f"PSIS-LOO: {counted(int(high['n_pareto_k_high'].sum()), 'observation')} with Pareto k > {PARETO_K_WARN} "
        f"across laws ({where}; law: run count): LOO is unreliable there."
    )
    if "pareto_k_high_steps" in high:
        steps = "; ".join(
            f"{law}, run {run}: step{'s' if len(ts) > 1 else ''} "
            + ", ".join(f"{t:g}" for t in list(ts)[:PARETO_K_STEPS_SHOWN])
            + (f" (+{len(ts) - PARETO_K_STEPS_SHOWN} more)" if len(ts) > PARETO_K_STEPS_SHOWN else "")
            for law, run, ts in zip(high["law"], high["run"], high["pareto_k_high_steps"])
            if isinstance(ts, (list, tuple, np.ndarray)) and len(ts)
        )
        if steps:
            note += f" Where: {steps}."
    return note


#: Steps of high Pareto k named per (law, run) in :func:`pareto_k_note` (the rest are counted).
PARETO_K_STEPS_SHOWN: int = 8


def _step_value(t: float) -> int | float:
    """A step as an int when it is whole (``12``, not ``12.0``, in the note and --json)."""
    return int(t) if float(t).is_integer() else float(t)


#: Ratio of the largest to the smallest run reward range beyond which ``lfo_rmse_mean``
#: (an average in reward units) is said to be set by the runs of the largest scale.
RMSE_SCALE_RATIO = 10.0


def rmse_scale_note(run_ids: Sequence[str], reward: np.ndarray) -> str | None:
    """A note when the runs' reward ranges differ by more than :data:`RMSE_SCALE_RATIO`:
    ``lfo_rmse_mean`` averages each law's RMSE in reward units over runs, so it then says
    little but about the runs of the largest scale (per-run RMSEs are in ``per_run``)."""
    ranges = np.array([np.ptp(r[np.isfinite(r)]) if np.isfinite(r).sum() >= 2 else np.nan for r in np.asarray(reward, dtype=float)])
    ok = np.isfinite(ranges) & (ranges > 0)
    if ok.sum() < 2:
        return None
    lo, hi = int(np.argmin(np.where(ok, ranges, np.inf))), int(np.argmax(np.where(ok, ranges, -np.inf)))
    if ranges[hi] <= RMSE_SCALE_RATIO * ranges[lo]:
        return None
    return (
        f"The runs' reward ranges differ by {ranges[hi] / ranges[lo]:.3g}x ({run_ids[lo]} {ranges[lo]:.3g}, "
        f"{run_ids[hi]} {ranges[hi]:.3g}): lfo_rmse_mean averages RMSE in reward units, so it is set by "
        "the runs of the largest scale; compare the laws per run (per_run) or by elpd."
    )


def compare_laws(
    runset: xr.Dataset,
    *,
    laws: str | Sequence[str] = LAWS,
    draws: int = 500,
    tune: int = 500,
    chains: int = 2,
    cores: int = 1,
    random_seed: int = 0,
    lfo_fraction: float = LFO_FRACTION,
    hyperparameter_defaults: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    reward_bounds: tuple[float, float] | None = None,
) -> ComparisonResult:
    """Fit every law to the run set and compare them (module docstring).

    Parameters
    ----------
    runset
        Run set; runs with fewer than :data:`MIN_COMPARE_POINTS` finite rewards are left out
        with a note (all of them: ValueError).
    laws
        Subset of :data:`LAWS`, each named once (a repeat is refused, as ``compare --laws``
        refuses it: :func:`checked_laws`); ``oscillator_mechanistic`` is skipped with a note when
        momentum or k_ref is unknown for some run.
    draws, tune, chains, cores, random_seed
        NUTS settings, used for the full fits and for the leave-future-out fits.
    lfo_fraction
        Fraction of each run's steps held out at the end.
    hyperparameter_defaults
        ``momentum`` / ``k_ref`` for runs that do not know them (``fit --default``; a fit's
        ``model_config["hyperparameter_defaults"]``), so the mechanistic law is not skipped.
    progress
        Called with a line before each fit (``"single_exp: fit 1 of 4 ..."``), whose PyMC
        progress bar and messages are then shown; None (the default): every fit is quiet.
    reward_bounds
        ``(lo, hi)`` of a reward known to lie in them (``compare --reward-bounds 0 1``): every
        law's plateau and initial reward lie inside (:func:`build_law_model`), as in a fit with
        them; None (the default): unbounded, as before.
    """
    import arviz as az

    from bayes_grpo.model.config import DEFAULT_RANGES, setting_in_range
    from bayes_grpo.model.prepare import shape_notes

    # before any fit, naming the argument: chains=0 or random_seed=-1 failed in PyMC after the
    # runs were prepared, draws=1.5 was sampled as 1 draw
    draws, tune, chains, cores = (
        checked_count(draws, "draws"), checked_count(tune, "tune", 0), checked_count(chains, "chains"),
        checked_count(cores, "cores"),
    )
    checked_seed(random_seed, "random_seed")
    if not 0.0 < lfo_fraction < 1.0:
        # 0 held nothing out (a KeyError 'lfo_elpd'), 1 kept no prefix to fit
        raise ValueError(f"lfo_fraction must lie strictly between 0 and 1, got {lfo_fraction}")
    if draws * chains < 2:
        # az.loo's Pareto smoothing failed on one draw with an IndexError (a traceback)
        raise ValueError(
            f"draws x chains = {draws} x {chains}: PSIS-LOO needs at least 2 posterior draws"
        )
    for name, value in (hyperparameter_defaults or {}).items():
        if name in ("momentum", "k_ref") and value is not None and not setting_in_range(name, value):
            # the words of fit's refusal (model.config.validate_model_config)
            raise ValueError(
                f"configuration 'hyperparameter_defaults.{name}' (--default {name}=...) "
                f"{DEFAULT_RANGES[name]}; got {value}"
            )
    laws = checked_laws(laws)
    require_runs(runset, "compare")  # the step size of no law parameter was a ZeroDivisionError

    # a run too short to fit and to hold 30% of out is left out, named, not the whole run set
    short = short_runs(runset[RUN_DIM].values, runset[REWARD_VAR].values.astype(float))
    if short and len(short) < runset.sizes[RUN_DIM]:
        runset = runset.sel({RUN_DIM: [r for r in runset[RUN_DIM].values if str(r) not in short]})
    data = prepare_runs(runset, hyperparameter_defaults=hyperparameter_defaults, reward_bounds=reward_bounds)
    train = prepare_runs(
        runset,
        upto_fraction=1.0 - lfo_fraction,
        min_points=5,
        hyperparameter_defaults=hyperparameter_defaults,
        reward_bounds=reward_bounds,
    )
    # every law puts R0 at step 0: a run logged from step 1e6 is a flat tail of each curve
    # (R^2 ~ 0 for all four), a constant run has nothing to tell them apart
    notes: list[str] = [f"{n}." for n in shape_notes(data.run_ids, data.steps, data.reward)]
    if reward_bounds is not None:
        notes.append(
            f"Reward bounds {bounds_text(check_reward_bounds(reward_bounds))}: every law's plateau and initial "
            "reward lie inside them."
        )
    if short:
        notes.insert(
            0,
            f"{counted(len(short), 'run')} left out, with fewer than {MIN_COMPARE_POINTS} finite rewards (too "
            f"few to fit, to test for a trend and to hold the last {lfo_fraction:.0%} out): {', '.join(short)}.",
        )
    # over the runs lfo_rmse_mean averages (lfo_totals: those with a visible trend, or all when
    # none has one): a flat run of range 0.09 beside two trend runs of 0.6 and 65 was named as
    # the smallest scale of an average it is not in
    trend = [bool(metrics.has_trend(data.steps[np.isfinite(r)], r[np.isfinite(r)])) for r in data.reward]
    averaged = [i for i, t in enumerate(trend) if t] or list(range(data.n_runs))
    scale_note = rmse_scale_note([data.run_ids[i] for i in averaged], data.reward[averaged])
    if scale_note:
        notes.append(scale_note)
    idatas, per_run, loo_rows = {}, [], {}
    lfo_pointwise: dict[str, dict[str, np.ndarray]] = {}
    r2_pointwise: dict[str, dict[str, np.ndarray | None]] = {}
    kw = {
        "draws": draws,
        "tune": tune,
        "chains": chains,
        "cores": cores,
        "random_seed": random_seed,
    }
    failures: list[str] = []
    reasons = {law: law_applicable(law, data) for law in laws}
    fitted_laws = [law for law in laws if not reasons[law]]
    say = progress or (lambda line: None)
    kw["progressbar"] = progress is not None
    for law in laws:
        reason = reasons[law]
        if reason:
            notes.append(f"{law} skipped: {reason}.")
            continue
        number = f"{fitted_laws.index(law) + 1} of {len(fitted_laws)}"
        say(f"{law}: fit {number} ({counted(data.n_runs, 'run')})")
        idata = fit_law(law, data, **kw)
        idatas[law] = idata
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loo = az.loo(idata, pointwise=True)
        k = np.asarray(loo.pareto_k.values)
        rhat = az.rhat(idata).to_array().values
        loo_rows[law] = {
            "n_pareto_k_high": int((k > PARETO_K_WARN).sum()),
            # one chain: every R-hat is NaN (said in a note below), not numpy's All-NaN warning
            "max_rhat": float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("nan"),
        }
        mean, _ = curve_draws(idata, law, data, data.steps)
        rows = {r["run"]: r for r in _r2_table(law, data, mean.mean(axis=0))}
        for run_id, r in rows.items():
            r2_pointwise.setdefault(law, {})[run_id] = r.pop("_r2_point", None)
        for i, run_id in enumerate(data.run_ids):
            high = (data.obs_run == i) & (k > PARETO_K_WARN)
            rows[run_id]["n_pareto_k_high"] = int(high.sum())
            # which points: the count alone left the user to search the run for its outliers
            rows[run_id]["pareto_k_high_steps"] = [_step_value(t) for t in data.obs_t[high]]
        say(f"{law}: leave-future-out fit {number} (the first {1.0 - lfo_fraction:.0%} of each run)")
        idata_train = fit_law(law, train, **kw)
        failures.extend(_convergence_failures(law, idata, idata_train))
        for r in _lfo_scores(law, idata_train, data, train):
            lfo_pointwise.setdefault(law, {})[r["run"]] = r.pop("_lfo_lpd", None)
            rows[r["run"]].update({k2: v for k2, v in r.items() if k2 not in ("run", "law")})
        per_run.extend(rows.values())
    if not idatas:
        raise ValueError("no law could be fitted: " + " ".join(notes))
    unconverged = convergence_note(failures)
    if unconverged:
        notes.append(unconverged)
    if chains < 2:
        # _convergence_notes needs two chains: max_rhat read NaN and nothing said why
        notes.append(
            "With one chain R-hat cannot be computed (max_rhat NaN) and no fit's convergence was "
            "checked; use 2 or more chains."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = (
            az.compare(idatas, ic="loo")
            if len(idatas) > 1
            else pd.DataFrame(
                {"elpd_loo": [float(az.loo(next(iter(idatas.values()))).elpd_loo)]},
                index=list(idatas),
            )
        )
    # by row: a transposed frame made the count a float column ("3.0" in the table and --json)
    cmp = cmp.join(pd.DataFrame.from_dict(loo_rows, orient="index"))
    per_run_df = pd.DataFrame(per_run)
    k_note = pareto_k_note(per_run_df)
    if k_note:
        notes.append(k_note)
    lfo = lfo_totals(per_run_df)
    lfo = lfo.join(lfo_differences(lfo_pointwise, lfo, no_trend_runs(per_run_df)))
    per_run_df = _with_run_lfo_differences(per_run_df, lfo_pointwise)
    per_run_df = _with_run_r2_differences(per_run_df, r2_pointwise)
    return ComparisonResult(
        loo=cmp, lfo=lfo, per_run=per_run_df, notes=notes, idatas=idatas, lfo_fraction=lfo_fraction
    )


__all__ = [
    "LAWS",
    "rmse_scale_note",
    "ComparisonResult",
    "RunData",
    "build_law_model",
    "compare_laws",
    "convergence_note",
    "curve_draws",
    "fit_law",
    "checked_laws",
    "law_applicable",
    "lfo_differences",
    "lfo_totals",
    "no_trend_runs",
    "paired_difference",
    "pareto_k_note",
    "prepare_runs",
    "within_one_se",
]
