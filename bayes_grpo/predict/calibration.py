"""Split-conformal calibration of forecast bands from backtests of other runs.

A forecast's band of the logged reward is only as good as its model: on runs whose mean the
oscillator misses, or whose noise it does not have, the 90% band covers less (the tiny TRL
runs: 0.56-0.66), on others more. Calibration measures this on runs whose future is known
and rescales the band of a new forecast accordingly, without ever reading the steps of the
run it calibrates:

1. **backtests** (:func:`backtest_required_scales`): each calibration run is forecast from
   its own prefix (the same prefix fraction, or the same last observed step, as the run to
   be forecast), with a prior built without it, exactly as that run will be; on its steps
   after the prefix, :func:`bayes_grpo.predict.forecast.required_band_scale` is the factor
   by which each band must be scaled about its midpoint to contain the logged reward;
2. **band scale** (:func:`calibration_from_backtests`): per band probability ``p``, the
   smallest ``kappa`` with which the run-averaged coverage of the scaled backtest bands is at
   least ``p`` (:func:`bayes_grpo.predict.forecast.calibrated_band_scale`; every run weighs
   the same, whatever its length);
3. **applied** (:func:`apply_band_calibration`): the forecast's band of the logged reward is
   scaled by ``kappa`` about its midpoint at the steps after the prefix (the steps before it
   are observed, not forecast). The band of the mean trajectory, the point forecast,
   milestones, regime and stop step are unchanged.

Two users, one code path:

* ``bayes-grpo forecast --calibrate`` and :func:`bayes_grpo.predict.forecast.forecast_in_runset`
  (``calibrate=True``) through :func:`calibrate_for_run`: the calibration runs are all the
  other runs of the run set, backtested at the same ``--upto`` step, each with a prior from
  the runs other than itself and the run being forecast;
* :func:`bayes_grpo.predict.evaluate.evaluate_forecasts` (``calibrate=True``), where every
  run is both forecast and calibration run: the runs are split in two alternating halves,
  the backtests of one half (priors from within that half) calibrate the runs of the other.

It assumes the run is exchangeable with the calibration runs (the same kind of run, the
same prefix); it needs at least two backtested runs.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from bayes_grpo._arguments import checked_probability, checked_seed
from bayes_grpo.checks.base import counted
from bayes_grpo.constants import HDI_PROB, RUN_DIM, STEP_DIM
from bayes_grpo.predict.forecast import (
    ForecastError,
    GaussianPrior,
    MixturePrior,
    calibrated_band_scale,
    censor,
    forecast_band,
    forecast_run,
    required_band_scale,
    run_series,
    scale_band,
)
from bayes_grpo.runset.bounds import bounds_text, rewards_outside

#: ``(run_id, runset) -> prior`` for forecasting ``run_id`` from the runs of ``runset``.
PriorFor = Callable[[str, xr.Dataset], GaussianPrior | MixturePrior | None]
#: Fewest prefix steps a backtest (or an evaluated forecast) is made from.
MIN_PREFIX_STEPS: int = 5
#: Seed offset of the calibration backtests of ``calibrate_for_run`` (kept apart from the
#: forecast's own seed).
BACKTEST_SEED_OFFSET: int = 7919


def backtest_seed(seed: int, run_id: str) -> int:
    """The seed of the calibration backtest of ``run_id``: ``seed + BACKTEST_SEED_OFFSET`` plus
    a number from the run's id, so a run's backtest does not depend on where it stands in the
    run set (it was ``+ i`` for the ``i``-th other run)."""
    # a whole number >= 0, as the forecast's own seed: -1 (or True, 2.7) gave a valid offset seed
    return int(checked_seed(seed, generator=False)) + BACKTEST_SEED_OFFSET + zlib.crc32(str(run_id).encode("utf-8")) % 2**20


def prefix_length(
    t: np.ndarray, *, fraction: float | None = None, upto: float | None = None
) -> int:
    """Number of leading observed steps in the prefix: ``round(fraction * len(t))`` steps, or
    the steps ``<= upto`` (exactly one of the two)."""
    if (fraction is None) == (upto is None):
        raise ValueError("give exactly one of fraction and upto")
    t = np.asarray(t, dtype=float)
    if fraction is not None:
        return int(round(float(fraction) * t.size))
    return int(np.sum(t <= float(upto)))


def backtest_required_scales(
    runset: xr.Dataset,
    run_ids: Sequence[str],
    *,
    prior_for: PriorFor | None,
    fraction: float | None = None,
    upto: float | None = None,
    horizon: float | None = None,
    hdi_probs: Sequence[float] = (HDI_PROB,),
    seeds: Sequence[int] | None = None,
    n_draws: int = 1000,
    likelihood: str = "state_space",
    reward_bounds: tuple[float, float] | None = None,
    skipped: dict[str, str] | None = None,
) -> dict[str, dict[float, np.ndarray]]:
    """Backtest runs of ``runset`` from a prefix; per run and band, the required scales.

    Each run of ``run_ids`` is forecast from its prefix (``fraction`` of its observed steps,
    or its steps up to ``upto``) with ``prior_for(run_id, runset)`` (None: the weak default
    prior) and scored on its observed steps after the prefix (up to ``horizon`` if given):
    ``{run_id: {p: required_band_scale over those steps}}`` for each ``p`` in ``hdi_probs``.
    Runs with fewer than :data:`MIN_PREFIX_STEPS` prefix steps, no step after it, a logged
    reward outside ``reward_bounds`` (another reward, as the run-based prior leaves such runs
    out: :func:`~bayes_grpo.predict.forecast.population_prior_for_run`) or a failed forecast
    are left out; ``skipped``, when given, is filled with
    ``{run_id: why}`` for each of them. ``seeds``: one forecast seed per run (default 0, 1, ...).
    """
    out: dict[str, dict[float, np.ndarray]] = {}
    left_out = skipped if skipped is not None else {}
    for i, run_id in enumerate(run_ids):
        t, y = run_series(runset, run_id)
        if reward_bounds is not None and rewards_outside(y, reward_bounds).any():
            # scored on its steps past the bounds against bands kept inside them, such a run took
            # the band scale with it: beside 4 runs of a success rate, one rising to 1.8 after
            # --upto 30 moved the 90% band scale 0.88 -> 5.82
            left_out[str(run_id)] = f"logged outside the reward bounds {bounds_text(reward_bounds)} (another reward)"
            continue
        n = prefix_length(t, fraction=fraction, upto=upto)
        future = np.arange(t.size) >= n
        if horizon is not None:
            future &= t <= float(horizon)
        if n < MIN_PREFIX_STEPS:
            left_out[str(run_id)] = f"{counted(n, 'step')} in the prefix, fewer than {MIN_PREFIX_STEPS}"
            continue
        if not future.any():
            left_out[str(run_id)] = "no logged step after the prefix to score"
            continue
        prior = prior_for(run_id, runset) if prior_for is not None else None
        seed = int(seeds[i]) if seeds is not None else i
        tf, yf = t[future], y[future]
        try:
            ds = forecast_run(
                t[:n],
                y[:n],
                tf,
                prior=prior,
                hdi_probs=tuple(hdi_probs),
                rng=seed,
                n_draws=n_draws,
                likelihood=likelihood,
                reward_bounds=reward_bounds,
            )
        except ForecastError as exc:
            left_out[str(run_id)] = f"its forecast failed ({exc})"
            continue
        out[str(run_id)] = {
            float(p): required_band_scale(yf, *forecast_band(ds, tf, kind="obs", hdi_prob=p))
            for p in hdi_probs
        }
    return out


@dataclass(frozen=True)
class BandCalibration:
    """Band scale per band probability, from backtests of calibration runs.

    ``scales``: ``{p: kappa}``; ``raw_coverage``: ``{p: run-averaged coverage of the
    unscaled p-band on the backtests}``; ``runs``: the backtested runs; ``prefix``: how the
    backtests' prefix was set (e.g. ``"upto step 60"``); ``left_out``: ``{run_id: why}`` of the
    calibration runs that could not be backtested (:func:`backtest_required_scales`' ``skipped``),
    said when the calibration succeeds too (`forecast --calibrate` said "calibration_runs: 14"
    of 15 other runs, and named the one left out only when too few were left).
    """

    scales: dict[float, float]
    runs: tuple[str, ...]
    raw_coverage: dict[float, float] = field(default_factory=dict)
    prefix: str = ""
    left_out: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "band_scale": {f"{p:g}": k for p, k in self.scales.items()},
            "raw_coverage": {f"{p:g}": c for p, c in self.raw_coverage.items()},
            "n_runs": len(self.runs),
            "runs": list(self.runs),
            "prefix": self.prefix,
            "n_left_out": len(self.left_out),
            "left_out": dict(self.left_out),
        }


def _run_coverage(required: np.ndarray, kappa: float = 1.0) -> float:
    r = np.asarray(required, dtype=float)
    r = r[~np.isnan(r)]
    return float(np.mean(r <= kappa)) if r.size else float("nan")


def calibration_from_backtests(
    required: Mapping[str, Mapping[float, np.ndarray]],
    hdi_probs: Sequence[float] = (HDI_PROB,),
    *,
    prefix: str = "",
    left_out: Mapping[str, str] | None = None,
) -> BandCalibration:
    """:class:`BandCalibration` from :func:`backtest_required_scales` output (``left_out``: its
    ``skipped``, the runs it could not backtest and why).

    Raises :class:`~bayes_grpo.predict.forecast.ForecastError` with fewer than two
    backtested runs.
    """
    scales, raw = {}, {}
    for p in hdi_probs:
        per_run = [r[float(p)] for r in required.values() if float(p) in r]
        scales[float(p)] = calibrated_band_scale(per_run, prob=float(p))
        raw[float(p)] = float(np.nanmean([_run_coverage(r) for r in per_run]))
    return BandCalibration(
        scales=scales, runs=tuple(required), raw_coverage=raw, prefix=prefix, left_out=dict(left_out or {})
    )


def calibrate_for_run(
    runset: xr.Dataset,
    run_id: str,
    *,
    upto: float | None = None,
    fraction: float | None = None,
    prior_for: PriorFor | None,
    horizon: float | None = None,
    hdi_probs: Sequence[float] = (HDI_PROB,),
    seed: int = 0,
    n_draws: int = 1000,
    likelihood: str = "state_space",
    reward_bounds: tuple[float, float] | None = None,
) -> BandCalibration:
    """Band calibration for forecasting ``run_id`` from its steps up to ``upto`` (the CLI) or
    from the first ``fraction`` of its steps (the evaluation; exactly one of the two).

    ``run_id`` is removed from the run set first (none of its steps reach the calibration);
    every other run is backtested from the same prefix of its own steps, scored up to
    ``horizon``, with the prior ``prior_for(other_run, runset_without_run_id)`` (the same
    rule as the run's own prior), seed :func:`backtest_seed` of its id.
    """
    if fraction is not None:  # 1.5 backtested no run, then said each had "no logged step after the prefix"
        checked_probability(fraction, "fraction")
    rest = runset.drop_sel({RUN_DIM: [run_id]})
    ids = [str(r) for r in rest[RUN_DIM].values]
    skipped: dict[str, str] = {}
    required = backtest_required_scales(
        rest,
        ids,
        prior_for=prior_for,
        upto=upto,
        fraction=fraction,
        horizon=horizon,
        hdi_probs=hdi_probs,
        seeds=[backtest_seed(seed, rid) for rid in ids],
        n_draws=n_draws,
        likelihood=likelihood,
        reward_bounds=reward_bounds,
        skipped=skipped,
    )
    prefix = f"upto step {float(upto):g}" if upto is not None else f"first {float(fraction):.0%} of each run"
    try:
        return calibration_from_backtests(required, hdi_probs, prefix=prefix, left_out=skipped)
    except ForecastError as exc:
        why = "; ".join(f"{rid!r}: {reason}" for rid, reason in skipped.items())
        raise ForecastError(
            f"{exc} to calibrate the bands of run {run_id!r} ({prefix}); of the other "
            f"{counted(len(ids), 'run')}, {len(skipped)} could not be backtested"
            + (f": {why}" if why else "")
        ) from None


def apply_band_calibration(ds: xr.Dataset, calibration: BandCalibration) -> xr.Dataset:
    """The forecast ``ds`` with its logged-reward bands scaled by the calibration.

    Each ``obs_hdi`` band whose probability has a scale is scaled by it about its midpoint at
    the steps after ``attrs["upto_step"]`` (all steps when absent), and kept within the
    forecast's reward bounds (``attrs["reward_bounds"]``), where the logged reward lies; the
    unscaled bands stay as ``obs_hdi_raw``; attrs ``band_scale`` (JSON ``{p: kappa}``) and
    ``calibration``.
    """
    out = ds.copy(deep=True)
    hdi = out["obs_hdi"].values.copy()
    steps = out[STEP_DIM].values.astype(float)
    upto = float(out.attrs.get("upto_step", -np.inf))
    after = steps > upto
    bounds = out.attrs.get("reward_bounds", "none")
    bounds = None if bounds in (None, "none") else json.loads(bounds) if isinstance(bounds, str) else bounds
    used = {}
    for i, p in enumerate(out["hdi_prob"].values):
        match = [k for k in calibration.scales if abs(k - float(p)) < 1e-9]
        if not match:
            continue
        kappa = calibration.scales[match[0]]
        lo, hi = scale_band(hdi[i, after, 0], hdi[i, after, 1], kappa)
        if bounds is not None:
            # `--calibrate --reward-bounds 0 1`: a band scaled by kappa 2 reached 1.05 for a
            # success rate (the uncalibrated bands are of clipped draws, inside the bounds)
            lo, hi = censor(lo, bounds), censor(hi, bounds)
        hdi[i, after, 0], hdi[i, after, 1] = lo, hi
        used[f"{float(p):g}"] = kappa
    out["obs_hdi_raw"] = ds["obs_hdi"].copy()
    out["obs_hdi"] = (ds["obs_hdi"].dims, hdi)
    out.attrs["band_scale"] = json.dumps(used)
    out.attrs["calibration"] = json.dumps(calibration.to_dict())
    return out


__all__ = [
    "BACKTEST_SEED_OFFSET",
    "backtest_seed",
    "MIN_PREFIX_STEPS",
    "BandCalibration",
    "PriorFor",
    "apply_band_calibration",
    "backtest_required_scales",
    "calibrate_for_run",
    "calibration_from_backtests",
    "prefix_length",
    "run_series",
]
