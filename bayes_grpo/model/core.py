"""``GRPODynamicsModel``: fit / predict / save / load in the manner of pymc-marketing's ModelBuilder.

>>> model = GRPODynamicsModel(parameterisation="mechanistic")          # doctest: +SKIP
>>> idata = model.fit(runset, draws=1000, tune=1000, chains=4)         # doctest: +SKIP
>>> model.convergence().passed, model.run_summary()                    # doctest: +SKIP
>>> model.save("models/fit.nc"); GRPODynamicsModel.load("models/fit.nc")  # doctest: +SKIP

The saved netCDF holds ``posterior``, ``sample_stats``, ``observed_data``,
``constant_data`` (each run's hyperparameters and the per-model reward scaling) and
``fit_data`` (the fitted run set itself), with the model and sampler configurations as
JSON attributes, a hash of them, the package version, and checksums of each group's arrays
(:func:`stored_data_checksums`). ``load`` rebuilds the model from those without refitting and
refuses a file whose hash or version does not match, or whose arrays were altered after it was
saved (a file saved before the checksums existed has none, and loads).
"""

from __future__ import annotations

import contextlib
import copy
import json
import numbers
import os
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from bayes_grpo import __version__
from bayes_grpo._arguments import checked_count, checked_seed
from bayes_grpo._io import NETCDF_SUFFIXES, check_suffix, read_named_netcdf, write_atomic
from bayes_grpo.checks.base import CheckResult, counted
from bayes_grpo.constants import HDI_PROB, RUN_DIM, STEP_DIM
from bayes_grpo.dynamics.coefficients import damping_ratio, effective_step, oscillator_coefficients
from bayes_grpo.dynamics.identifiability import shape_information_log_density
from bayes_grpo.dynamics.trajectory import reward_trajectory, scheduled_reward_trajectory
from bayes_grpo.model.config import (
    DEFAULT_MODEL_CONFIG,
    DEFAULT_RANGES,
    DEFAULT_SAMPLER_CONFIG,
    INVARIANCES,
    LIKELIHOODS,
    PARAMETERISATIONS,
    config_hash,
    measurement_g_exponent,
    merge_config,
    setting_in_range,
    unused_entries_note,
    validate_model_config,
    validate_sampler_config,
)
from bayes_grpo.model.convergence import ESS_MIN_PER_CHAIN, RHAT_MAX, convergence_check, run_r_hat
from bayes_grpo.model.prepare import (
    ModelData,
    convention_without_momentum,
    follows_schedule,
    group_label,
    measurement_batch_note,
    prepare_data,
    prior_centres,
    schedule_multipliers,
    size_regression_note,
)
from bayes_grpo.runset import REWARD_VAR, require_runs, validate_runset, with_added_coords
from bayes_grpo.runset.bounds import (
    bounded_value,
    check_reward_bounds,
    check_rewards_within,
    latent_value,
)
from bayes_grpo.runset.core import require_dataset
from bayes_grpo.runset.schema import readable_group_sizes

#: Attribute names written on the posterior group of a saved fit.
ATTR_PREFIX = "bayes_grpo_"
#: Group holding the fitted run set.
FIT_DATA_GROUP = "fit_data"
#: Draws used for posterior-mean trajectories in summaries (thinned for memory).
SUMMARY_DRAWS: int = 400


class UnusedModelSizeWarning(UserWarning):
    """``coefficient_draws(model_size=...)`` where the size does not enter the draws (a fitted
    LLM, whose curvature is its own, or a fit without the curvature regression on size)."""


def normalise_likelihood(name: str) -> str:
    """Accept ``state-space`` as a spelling of ``state_space``."""
    # anything but text is left to the caller's check ("unknown likelihood 1"): it was an
    # AttributeError ('int' object has no attribute 'replace')
    return name.replace("-", "_") if isinstance(name, str) else name


#: Prior draws per kept draw when the prior carries a potential that forward sampling ignores
#: (resampled by its weight; see ``GRPODynamicsModel.sample_prior_predictive``).
PRIOR_OVERSAMPLE: int = 10


#: The settings of a fit (the constructor's keywords besides the configs; ``settings``).
SETTING_NAMES: tuple[str, ...] = ("parameterisation", "likelihood", "invariance", "reward_bounds")
#: Settings a fit stores only when they are set (not None): a fit without them has the settings,
#: and so the configuration hash, it had before they existed (saved fits load unchanged).
OPTIONAL_SETTINGS: tuple[str, ...] = ("reward_bounds",)


def _stored_object(path: Path, attrs: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The JSON object a fit stores in its attribute ``bayes_grpo_<key>`` (written by
    ``_identity_attrs``); ``ValueError`` naming the file and the attribute when it is not JSON
    text or not an object (an altered file: ``[1, 2]`` was a TypeError, "argument after ** must
    be a mapping")."""
    name = ATTR_PREFIX + key
    text = attrs[name]
    try:
        value = json.loads(text) if isinstance(text, str | bytes) else text
    except ValueError as exc:
        raise ValueError(f"{path}: attribute {name} is not JSON text ({exc}); the file was altered: refit") from exc
    if not isinstance(value, dict):
        raise ValueError(
            f"{path}: attribute {name} must hold a JSON object {{key: value, ...}}, got {value!r:.80}; "
            "the file was altered: refit"
        )
    return value


#: The attribute of a saved fit's posterior that holds :func:`stored_data_checksums` of the file
#: as written (``{group: digest}`` as JSON); a fit saved before it existed has none, and loads.
DATA_CHECKSUMS_ATTR: str = ATTR_PREFIX + "data_checksums"


def stored_data_checksums(path: str | os.PathLike) -> dict[str, str]:
    """``{group: SHA-256 (first 16 hex digits)}`` of the arrays a saved fit's file stores in each
    group (its variables and coordinates, HDF5 datasets, by name: each by its name, dtype, shape
    and values, the bytes of a numeric array, the text of any other). The configuration hash
    (``id``) covers the settings and priors only: an edited posterior draw or fitted reward
    loaded without a word.

    Read with h5py, about 25 ms of CPU for a re-saved ``models/tiny.nc`` (2,000 draws of 8 runs,
    2,400 rewards; ``benchmarks/bench_fit_checksums.py``); through xarray's lazy arrays the same
    reads took 0.3 s."""
    import h5py

    with h5py.File(path, "r") as f:
        return _file_checksums(f)


def _file_checksums(f: Any) -> dict[str, str]:
    """:func:`stored_data_checksums` of the open h5py file ``f``: the arrays as they are in the
    file, each read once from the dataset object the walk of the file gives (looking each up again
    by name was a third of the time)."""
    import hashlib

    import h5py

    datasets: list[tuple[str, Any]] = []
    # visititems stops at the first callback that returns anything but None
    f.visititems(lambda name, obj: datasets.append((name, obj)) if isinstance(obj, h5py.Dataset) else None)
    digests: dict[str, Any] = {}
    for name, dataset in sorted(datasets, key=lambda item: item[0]):
        values = np.asarray(dataset[()])
        digest = digests.setdefault(name.partition("/")[0] if "/" in name else "", hashlib.sha256())
        numeric = values.dtype.kind in "biufcmM"
        # text by its characters: xarray writes a text array as variable-length strings
        # from objects and fixed-length ones from NumPy's '<U', which h5py reads as bytes
        kind = values.dtype.str if numeric else "text"
        digest.update(f"{name}\0{kind}\0{values.shape}\0".encode())
        if numeric:
            digest.update(np.ascontiguousarray(values).tobytes())
        else:
            text = (x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x) for x in values.ravel())
            digest.update("\0".join(text).encode("utf-8", "surrogateescape"))
    return {group: digest.hexdigest()[:16] for group, digest in digests.items()}


def _write_data_checksums(path: Path) -> None:
    """Store :func:`stored_data_checksums` of the fit just written to ``path`` in
    :data:`DATA_CHECKSUMS_ATTR` of its posterior group (an attribute: not among the arrays).

    One h5py handle reads the arrays and writes the attribute: a text attribute of a netCDF-4
    file is what h5netcdf writes through h5py itself (reopening the file with h5netcdf to write
    it cost as much again as the hashing)."""
    import h5py

    with h5py.File(path, "r+") as f:
        sums = json.dumps(_file_checksums(f), sort_keys=True)
        f["posterior"].attrs[DATA_CHECKSUMS_ATTR] = sums


def _check_data_checksums(path: Path, attrs: Mapping[str, Any]) -> None:
    """``ValueError`` naming ``path`` and the groups whose arrays no longer give the checksums
    stored at save (:data:`DATA_CHECKSUMS_ATTR`); a fit saved without them passes."""
    if DATA_CHECKSUMS_ATTR not in attrs:
        return
    stored = _stored_object(path, attrs, DATA_CHECKSUMS_ATTR.removeprefix(ATTR_PREFIX))
    actual = stored_data_checksums(path)
    changed = sorted(g for g in set(stored) | set(actual) if stored.get(g) != actual.get(g))
    if changed:
        raise ValueError(
            f"{path}: {'group' if len(changed) == 1 else 'groups'} {', '.join(map(repr, changed))} "
            f"altered after it was saved (the arrays no longer give the checksums in attribute "
            f"{DATA_CHECKSUMS_ATTR}): its draws or fitted data are not those of the fit: refit"
        )


def _other_bayes_grpo_file(path: Path) -> str | None:
    """What another bayes_grpo netCDF given where a fit belongs is (a run set, a prediction or
    forecast), in words; None when it is neither. The flat dataset is read, never the groups."""
    import xarray as xr

    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            kind = str(ds.attrs.get("kind", ""))
            names = set(ds.data_vars)
            dims = set(ds.dims)
    except Exception:  # noqa: BLE001 - anything unreadable is "neither"
        return None
    if kind in ("prediction", "forecast") or "mean_mean" in names:
        return f"a {kind or 'prediction'} file (written by `bayes-grpo predict` / `forecast`)"
    if "reward" in names and {RUN_DIM, STEP_DIM} <= dims:
        return "a run set (written by `bayes-grpo ingest` or `simulate`)"
    return None


#: Posterior variables of every fit, which a fitted model reads (summaries, coefficient draws).
_POSTERIOR_VARIABLES: tuple[str, ...] = (
    "plateau", "initial_reward_model", "initial_reward", "plateau_run",
    "a", "M_eff", "C_eff", "K_eff", "zeta", "alpha", "noise_d", "sigma",
)


def posterior_variables(parameterisation: str, likelihood: str) -> tuple[str, ...]:
    """The posterior variables :func:`bayes_grpo.model.builder.build_pymc_model` gives every fit of these settings and
    a fitted model reads (its summaries, ``coefficient_draws``): ``GRPODynamicsModel.load``
    refuses a saved fit without one of them (an altered file) rather than fail later on it.
    Here, not in the builder: loading a fit imports no PyMC."""
    own = ("log_stiffness", "log_stiffness_mean") if parameterisation == "mechanistic" else ("natural_frequency_model", "damping_ratio_model")
    return _POSTERIOR_VARIABLES + own + (("measurement_sd",) if likelihood == "state_space" else ())


class GRPODynamicsModel:
    """Hierarchical damped-oscillator model of GRPO reward curves (DESIGN.md section 3).

    Parameters
    ----------
    model_config
        Overrides of :data:`bayes_grpo.model.config.DEFAULT_MODEL_CONFIG` (merged one level deep).
    sampler_config
        Overrides of :data:`DEFAULT_SAMPLER_CONFIG`.
    parameterisation
        ``"mechanistic"`` (``M, C, K_eff`` from ``K_m`` and each run's learning rate,
        momentum, convention and ``k_ref``; predicts new hyperparameters) or
        ``"phenomenological"`` (free ``zeta, w0`` per model).
    likelihood
        ``"iid"`` Gaussian residuals around the closed-form trajectory (fast), or
        ``"state_space"``: exact Kalman likelihood of the SDE plus measurement noise.
    invariance
        ``"shared"`` (H0: one trajectory per model for every G) or ``"by_group"`` (H1:
        per (model, G) offsets of plateau, initial reward, stiffness/frequency, damping).
    reward_bounds
        ``(lo, hi)`` of a reward known to lie in that range (``(0, 1)`` for a success rate or
        accuracy), or None: every LLM's and run's plateau and initial reward then lie inside
        it (:mod:`bayes_grpo.runset.bounds`), and a logged reward outside it is refused naming
        its run, step and value.
    """

    _model_type = "GRPODynamicsModel"
    version = "8"  # 2: centred log K, regular-grid trajectory, size regression needs >= 3 models; 3: state-space measurement noise scales with G^-alpha; 4: run-level R0 offsets sum to zero within each LLM (none for a single run); 5: phenomenological prior weighted by the shape information (Jeffreys); 6: that weight's derivatives exact (were central differences); 7: the i.i.d. likelihood can follow a logged learning-rate schedule (config learning_rate_schedule.follow, off by default); 8: invariance="by_group" gives offsets only to the groups of LLMs at two or more known G

    def __init__(
        self,
        model_config: dict[str, Any] | None = None,
        sampler_config: dict[str, Any] | None = None,
        parameterisation: str = "mechanistic",
        likelihood: str = "iid",
        invariance: str = "shared",
        reward_bounds: tuple[float, float] | None = None,
    ) -> None:
        likelihood = normalise_likelihood(likelihood)
        self.reward_bounds = check_reward_bounds(reward_bounds)
        for value, allowed, what in (
            (parameterisation, PARAMETERISATIONS, "parameterisation"),
            (likelihood, LIKELIHOODS, "likelihood"),
            (invariance, INVARIANCES, "invariance"),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r}; expected one of {allowed}")
        self.model_config = merge_config(DEFAULT_MODEL_CONFIG, model_config)
        self.sampler_config = merge_config(DEFAULT_SAMPLER_CONFIG, sampler_config)
        validate_model_config(self.model_config)  # a bad value fails here, not at fit time
        if self.model_config["learning_rate_schedule"].get("follow") and likelihood == "state_space":
            # the state-space likelihood takes the constant-rate law: the request would be dropped
            raise ValueError(
                "configuration 'learning_rate_schedule.follow' is true, but only the i.i.d. likelihood "
                "follows logged learning-rate schedules; the state-space likelihood takes the "
                "constant-rate law (set follow to false, or use likelihood 'iid')"
            )
        measurement = [
            f"noise.{key}"
            for key in ("measurement_sigma", "measurement_g_exponent")
            if self.model_config["noise"].get(key) != DEFAULT_MODEL_CONFIG["noise"][key]
        ]
        if measurement and likelihood == "iid":
            # the i.i.d. likelihood has no measurement noise: the request would be dropped
            raise ValueError(
                f"configuration {', '.join(repr(m) for m in measurement)} set, but only the "
                "state-space likelihood has measurement noise; the i.i.d. likelihood's residual "
                "sd is the noise.log_sigma prior's (drop the entry, or use likelihood 'state-space')"
            )
        self.parameterisation = parameterisation
        self.likelihood = likelihood
        self.invariance = invariance
        self.model = None
        self.idata: az.InferenceData | None = None
        self.runset: xr.Dataset | None = None
        self.data: ModelData | None = None
        self.fit_seconds: float | None = None
        # the file this fit was loaded from (load), named first in coefficient_draws' refusals;
        # None for a fit made here (fit) and never saved
        self.source_path: Path | None = None

    # ------------------------------------------------------------------ identity
    @property
    def settings(self) -> dict[str, Any]:
        """The constructor's settings (:data:`SETTING_NAMES`), those of
        :data:`OPTIONAL_SETTINGS` only when set (``reward_bounds`` as ``[lo, hi]``)."""
        out: dict[str, Any] = {}
        for name in SETTING_NAMES:
            value = getattr(self, name)
            if name in OPTIONAL_SETTINGS and value is None:
                continue
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    def refit_settings(self, **sampler: int | None) -> dict[str, Any]:
        """Keyword arguments with which a check refits this fit's model on runs
        (:func:`~bayes_grpo.checks.invariance.invariance_check`,
        :func:`~bayes_grpo.checks.invariance.leave_one_g_out`): its model config (priors and
        ``fit --default`` hyperparameters), parameterisation, likelihood and reward bounds (H0
        and H1 of a fit with bounds 0 1 put plateaus above 1 without them), and its sampler's
        ``draws``, ``tune`` and ``chains``, each replaced by ``sampler``'s value where given
        (not None)."""
        config = dict(self.sampler_config) | {k: v for k, v in sampler.items() if v is not None}
        return {
            "model_config": self.model_config,
            "parameterisation": self.parameterisation,
            "likelihood": self.likelihood,
            "reward_bounds": self.reward_bounds,
            **{k: int(config[k]) for k in ("draws", "tune", "chains")},
        }

    @property
    def id(self) -> str:
        """Hash of the model config, the settings and the model version (not the sampler)."""
        return config_hash(self.model_config, self.settings, {"version": self.version})

    # ------------------------------------------------------------------ build
    def build_model(self, runset: xr.Dataset):
        """Build (and keep) the ``pm.Model`` for ``runset``."""
        from bayes_grpo.model.builder import build_pymc_model

        require_runs(validate_runset(runset), "fit")
        self.runset = runset
        self.data = self._prepare_data(runset)
        self.model = build_pymc_model(
            self.data,
            self.model_config,
            parameterisation=self.parameterisation,
            likelihood=self.likelihood,
            invariance=self.invariance,
            reward_bounds=self.reward_bounds,
        )
        return self.model

    def _prepare_data(self, runset: xr.Dataset) -> ModelData:
        """``prepare_data`` with the notes on this model's own settings (the curvature regression
        on model size, the state-space measurement batches): one place for a fit and for a saved
        fit loaded back, whose report and predictions lost them."""
        data = prepare_data(runset, self.model_config, self.parameterisation, self.likelihood)
        check_rewards_within(data.reward, data.run_ids, data.steps, self.reward_bounds)
        size_note = size_regression_note(data, self.model_config, self.parameterisation)
        if size_note is not None:
            data.notes.append(size_note)
        unused = unused_entries_note(self.model_config, self.parameterisation)
        if unused is not None:
            data.notes.append(unused)
        if self.likelihood == "state_space":
            note = measurement_batch_note(runset, self.model_config)
            if note is not None:
                data.notes.append(note)
        return data

    def sample_prior_predictive(self, runset: xr.Dataset, *, samples: int = 200, random_seed: int = 0) -> az.InferenceData:
        """Prior (and, for the iid likelihood, prior predictive) draws for ``runset``.

        PyMC's forward sampling ignores potentials; the phenomenological form's shape weight
        (``damping_shape_information``) is one, so there the prior is drawn
        :data:`PRIOR_OVERSAMPLE` times over and ``samples`` draws are resampled with weights
        ``exp(shape information)``: the draws are then from the prior the fit uses.

        On a fitted model the draws come from an unfitted copy of it (same configs and
        settings): the fit's run set, data and PyMC model stay those of the fit.
        """
        # before the model is built: -1 failed in NumPy naming no argument, 1.5 and True were taken
        checked_count(samples, "samples")
        checked_seed(random_seed, "random_seed")
        if self.idata is not None:
            return self._unfitted_copy().sample_prior_predictive(runset, samples=samples, random_seed=random_seed)
        import pymc as pm

        model = self.build_model(runset)
        from bayes_grpo.model.builder import SHAPE_WEIGHT_POTENTIAL

        weighted = SHAPE_WEIGHT_POTENTIAL in model.named_vars
        with model, warnings.catch_warnings():
            if weighted:
                warnings.filterwarnings("ignore", message=".*Potentials.*prior predictive.*")
            idata = pm.sample_prior_predictive(
                draws=samples * (PRIOR_OVERSAMPLE if weighted else 1), random_seed=random_seed
            )
        if not weighted:
            return idata
        prior = idata.prior
        log_w = shape_information_log_density(
            np.log(prior["damping_ratio_model"].values[0]),
            np.log(prior["natural_frequency_model"].values[0]),
            model["data_shape_t"].get_value()[None],
            model["data_shape_weight"].get_value()[None],
        ).sum(axis=-1)
        w = np.exp(log_w - log_w.max())
        pick = np.random.default_rng(random_seed).choice(w.size, size=samples, p=w / w.sum())
        out = idata.isel(draw=pick)
        for group in out.groups():
            if "draw" in out[group].dims:
                out[group] = out[group].assign_coords(draw=np.arange(samples))
        return out

    def prior_predictive_check(self, runset: xr.Dataset, *, samples: int = 200, random_seed: int = 0) -> CheckResult:
        """Do the priors cover the data? Fraction of observed rewards inside the 99% prior band.

        Uses the prior mean trajectories (plus per-step noise) at each observed step;
        passes when at least 90% of the observed rewards of every run fall inside the
        central 99% prior predictive interval, and reports the band width relative to the
        run's reward range for the central 90% band (priors should be wide but not absurd;
        the outer tails contain unstable gains, which the prior deliberately allows); NaN, and
        named in the summary, for a run of one reward level (no range to compare with).
        On a fitted model it checks an unfitted copy (the fit is left as it is).
        """
        if self.idata is not None:
            return self._unfitted_copy().prior_predictive_check(runset, samples=samples, random_seed=random_seed)
        prior = self.sample_prior_predictive(runset, samples=samples, random_seed=random_seed).prior
        data = self.data
        assert data is not None
        rng = np.random.default_rng(random_seed)
        rows = []
        for i, run in enumerate(data.run_ids):
            sel = data.obs_run == i
            y = data.reward[i, data.obs_step_idx[sel]]
            get = lambda v, run=run: prior[v].sel(run=run).values.reshape(-1, 1)  # noqa: E731
            law = self.fitted_run_law(get("M_eff"), get("C_eff"), get("K_eff"), get("plateau_run"), get("initial_reward"), runs=[i])
            mean = law[:, 0, data.obs_step_idx[sel]]
            draws = mean + rng.normal(size=mean.shape) * get("sigma")
            lo, lo90, hi90, hi = np.nanpercentile(draws, [0.5, 5.0, 95.0, 99.5], axis=0)
            inside = float(np.mean((y >= lo) & (y <= hi)))
            # width of the central 90% band: the 99% band's tails include the (deliberately
            # allowed) unstable gains, whose trajectories grow without bound
            # a run of one reward level has no range to measure the band by: NaN, not the width
            # over 1e-12 (5.7e14 "x the run's reward range" for a run solved from step 0)
            spread = float(np.ptp(y)) if y.size else 0.0
            width = float(np.median(hi90 - lo90) / spread) if spread > 0 else float("nan")
            rows.append({"run": run, "coverage_99": inside, "band_width_over_range": width})
        table = pd.DataFrame(rows).set_index("run")
        passed = bool((table["coverage_99"] >= 0.9).all())
        flat = [str(r) for r in table.index[table["band_width_over_range"].isna()]]
        summary = (
            f"Prior predictive 99% bands contain {table['coverage_99'].min():.0%}-{table['coverage_99'].max():.0%} of the observed rewards per run"
            + (f"; median 90% band width {table['band_width_over_range'].median():.1f}x the run's reward range" if len(flat) < len(table) else "")
            + (f" (runs {flat} with one reward level have no range: no width)" if flat else "")
            + "."
        )
        return CheckResult("prior_predictive", passed, summary, table=table, values={"min_coverage": float(table["coverage_99"].min())})

    def _unfitted_copy(self) -> GRPODynamicsModel:
        """A model of the same configs and settings with nothing built or fitted: building
        one for another run set (a prior predictive check) must not replace the run set, data
        and PyMC model that this fit's posterior belongs to."""
        return type(self)(
            model_config=copy.deepcopy(self.model_config), sampler_config=copy.deepcopy(self.sampler_config), **self.settings
        )

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        runset: xr.Dataset,
        *,
        draws: int | None = None,
        tune: int | None = None,
        chains: int | None = None,
        random_seed: int | None = None,
        sampler: str | None = None,
        progressbar: bool | None = None,
        target_accept: float | None = None,
        cores: int | None = None,
        max_treedepth: int | None = None,
    ) -> az.InferenceData:
        """Sample the posterior for ``runset``; returns (and keeps) the InferenceData.

        Keyword arguments override the sampler config (and are recorded in it).
        ``progressbar=False`` hides PyMC's progress messages too (its INFO lines: "Initializing
        NUTS ...", "Sampling 2 chains ..."), its warnings kept, unless its logger was given a
        level of the user's (:func:`progress_messages`). ``sampler="nutpie"`` uses nutpie (numba
        backend) when installed. Either sampler gives the same draws for the same ``random_seed``
        in any process (nutpie's model is compiled without fast-math: :func:`_sample_nutpie`).
        """
        overrides = {
            "draws": draws,
            "tune": tune,
            "chains": chains,
            "random_seed": random_seed,
            "sampler": sampler,
            "progressbar": progressbar,
            "target_accept": target_accept,
            "max_treedepth": max_treedepth,
        }
        sc = self.sampler_config | {k: v for k, v in overrides.items() if v is not None}
        validate_sampler_config(sc)  # before the model is built and compiled (and kept)
        if cores is not None:  # not a sampler-config entry: 0 failed in PyMC's ZeroDivisionError, -1 ran
            checked_count(cores, "cores")
        self.sampler_config = sc
        unsavable = _unsavable_attrs(require_dataset(runset))
        if unsavable:
            # the fit saves its run set (FIT_DATA_GROUP): such an attribute failed save() with
            # xarray's TypeError after the whole sampling
            raise ValueError(
                f"the run set's attributes {unsavable} cannot be saved with the fit (a netCDF attribute "
                "is text, a number or a list of them): store them as JSON text (json.dumps; "
                "runset.make_runset(attrs=...) does) or drop them before fitting"
            )
        model = self.build_model(runset)
        n_cores = cores if cores is not None else min(int(sc["chains"]), os.cpu_count() or 1)
        start = time.perf_counter()
        if sc["sampler"] == "nutpie":
            with _sampler_warnings_filtered(), progress_messages(bool(sc["progressbar"])):
                idata = _sample_nutpie(model, sc, n_cores)
        else:
            import pymc as pm

            with model, _sampler_warnings_filtered(), progress_messages(bool(sc["progressbar"])):
                idata = pm.sample(
                    draws=int(sc["draws"]),
                    tune=int(sc["tune"]),
                    chains=int(sc["chains"]),
                    cores=n_cores,
                    random_seed=int(sc["random_seed"]),
                    target_accept=float(sc["target_accept"]),
                    nuts={"max_treedepth": int(sc["max_treedepth"])},
                    init="jitter+adapt_full" if sc.get("mass_matrix", "diag") == "full" else "jitter+adapt_diag",
                    progressbar=bool(sc["progressbar"]),
                    compute_convergence_checks=False,
                )
        self.fit_seconds = time.perf_counter() - start
        self.idata = self._attach(idata)
        self.source_path = None  # refitted: no longer the fit of the file it was loaded from
        return self.idata

    def _attach(self, idata: az.InferenceData) -> az.InferenceData:
        """Add observed data, constant data, the run set and the identity attributes."""
        data = self.data
        assert data is not None and self.runset is not None
        keep = [g for g in ("posterior", "sample_stats") if hasattr(idata, g)]
        out = az.InferenceData(**{g: getattr(idata, g) for g in keep})
        obs = xr.Dataset(
            {REWARD_VAR: (("obs",), data.reward[data.obs_run, data.obs_step_idx])},
            coords={"obs": np.arange(len(data.obs_y)), "obs_run": ("obs", np.array(data.run_ids, dtype=object)[data.obs_run]), "obs_step": ("obs", data.obs_t)},
        )
        const = xr.Dataset(
            {
                "learning_rate": ((RUN_DIM,), data.learning_rate),
                "momentum": ((RUN_DIM,), data.momentum),
                "momentum_convention": ((RUN_DIM,), np.array(data.momentum_convention, dtype=object)),
                "k_ref": ((RUN_DIM,), data.k_ref),
                "group_size": ((RUN_DIM,), data.group_size),
                "eta_eff": ((RUN_DIM,), data.eta_eff),
                "reward_loc": (("model",), data.loc),
                "reward_scale": (("model",), data.scale),
                "run_length": (("model",), data.run_length),
            },
            coords={RUN_DIM: np.array(data.run_ids, dtype=object), "model": np.array(data.models, dtype=object)},
        )
        out.add_groups({"observed_data": obs, "constant_data": const})
        out.add_groups({FIT_DATA_GROUP: self.runset})
        attrs = self._identity_attrs()
        out.posterior.attrs.update(attrs)
        return out

    def _identity_attrs(self) -> dict[str, str]:
        return {
            ATTR_PREFIX + "model_type": self._model_type,
            ATTR_PREFIX + "model_version": self.version,
            ATTR_PREFIX + "package_version": __version__,
            ATTR_PREFIX + "model_config": json.dumps(self.model_config, sort_keys=True),
            ATTR_PREFIX + "sampler_config": json.dumps(self.sampler_config, sort_keys=True),
            ATTR_PREFIX + "settings": json.dumps(self.settings, sort_keys=True),
            ATTR_PREFIX + "id": self.id,
            ATTR_PREFIX + "fit_seconds": "" if self.fit_seconds is None else f"{self.fit_seconds:.3f}",
            ATTR_PREFIX + "notes": json.dumps(self.data.notes if self.data else []),
        }

    # ------------------------------------------------------------------ save / load
    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the fit to netCDF (atomically); see the module docstring for the contents.

        An existing ``path`` is replaced only with ``overwrite=True`` (``FileExistsError``
        otherwise, naming the path), as the command line replaces one only with ``--overwrite``;
        a ``path`` not named ``.nc`` / ``.nc4`` / ``.netcdf`` is refused (``ValueError``), as
        ``bayes-grpo fit -o`` refuses it.
        """
        check_suffix(path, "path", NETCDF_SUFFIXES, "netCDF")  # "fit.json" got netCDF bytes
        if self.idata is None:
            raise ValueError("nothing to save: call fit() first")
        idata = self.idata

        def write(tmp: Path) -> None:
            idata.to_netcdf(str(tmp), engine="h5netcdf")
            _write_data_checksums(Path(tmp))

        return write_atomic(path, write, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike) -> GRPODynamicsModel:
        """Rebuild a fitted model from a file written by :meth:`save` (no refitting).

        Raises
        ------
        FileNotFoundError
            No such file.
        ValueError
            Not a bayes_grpo fit, or its config hash or version does not match this code.
        """
        path = Path(path)
        fit_hint = "a fitted model is the file `bayes-grpo fit runs.nc -o models/NAME.nc` writes"
        idata = read_named_netcdf(
            path,
            lambda p: az.from_netcdf(str(p), engine="h5netcdf"),
            file_noun="fitted-model file",
            hint=fit_hint,
            not_netcdf="not a netCDF file",
            unreadable="not a readable InferenceData netCDF",
            catch=(Exception,),  # report any read failure with the path
        )
        idata.load() if hasattr(idata, "load") else None
        attrs = idata.posterior.attrs if hasattr(idata, "posterior") else {}
        if attrs.get(ATTR_PREFIX + "model_type") != cls._model_type:
            what = _other_bayes_grpo_file(path)
            if what is not None:
                raise ValueError(f"{path}: {what}, not a fitted model; {fit_hint}")
            raise ValueError(f"{path}: not a {cls._model_type} fit (attribute {ATTR_PREFIX}model_type missing)")
        if attrs.get(ATTR_PREFIX + "model_version") != cls.version or attrs.get(ATTR_PREFIX + "package_version") != __version__:
            raise ValueError(
                f"{path}: written by model version {attrs.get(ATTR_PREFIX + 'model_version')!r} / bayes-grpo "
                f"{attrs.get(ATTR_PREFIX + 'package_version')!r}; this is model version {cls.version!r} / bayes-grpo "
                f"{__version__!r}. Refit with this version."
            )
        missing = [ATTR_PREFIX + k for k in ("settings", "model_config", "sampler_config") if ATTR_PREFIX + k not in attrs]
        if missing:
            raise ValueError(f"{path}: attributes {missing} missing; the file was altered or is incomplete: refit")
        stored = {key: _stored_object(path, attrs, key) for key in ("settings", "model_config", "sampler_config")}
        # the settings are the constructor's keywords: an unknown one was a TypeError
        # ("__init__() got an unexpected keyword argument"), a non-text value an AttributeError
        unknown = sorted(set(stored["settings"]) - set(SETTING_NAMES), key=str)
        if unknown:
            raise ValueError(
                f"{path}: attribute {ATTR_PREFIX}settings has {counted(len(unknown), 'unknown field')} {unknown} (a fit's settings "
                f"are {', '.join(SETTING_NAMES)}); the file was altered: refit"
            )
        try:
            model = cls(**stored["settings"])
        except ValueError as exc:
            raise ValueError(f"{path}: attribute {ATTR_PREFIX}settings is refused ({exc}); the file was altered: refit") from exc
        try:
            model = cls(model_config=stored["model_config"], **stored["settings"])
        except ValueError as exc:  # e.g. a config entry of the wrong type, refused since
            raise ValueError(
                f"{path}: attribute {ATTR_PREFIX}model_config is refused ({exc}); refit with a valid --config"
            ) from exc
        try:
            # the hash leaves the sampler out: an altered entry ("max_treedepth": "x") loaded,
            # and convergence() failed on it later without naming the file
            model = cls(model_config=stored["model_config"], sampler_config=stored["sampler_config"], **stored["settings"])
            validate_sampler_config(model.sampler_config)
        except ValueError as exc:
            raise ValueError(f"{path}: attribute {ATTR_PREFIX}sampler_config is refused ({exc}); the file was altered: refit") from exc
        if model.id != attrs.get(ATTR_PREFIX + "id"):
            raise ValueError(f"{path}: configuration hash {attrs.get(ATTR_PREFIX + 'id')!r} does not match the stored configuration ({model.id!r}); the file was altered or written by different code")
        if not hasattr(idata, FIT_DATA_GROUP):
            raise ValueError(f"{path}: no {FIT_DATA_GROUP!r} group (the fitted run set); cannot rebuild the model")
        if not hasattr(idata, "sample_stats"):
            # convergence() then read no divergence, tree depth or energy, and a fit passed as
            # having "no divergences" without a word
            raise ValueError(
                f"{path}: no 'sample_stats' group (the sampler's divergences, tree depths and energies): "
                "its convergence cannot be checked; the file was altered or is incomplete: refit"
            )
        gone = [v for v in posterior_variables(model.parameterisation, model.likelihood) if v not in idata.posterior]
        if gone:
            # a posterior without 'zeta' loaded, and predict / summaries failed on it later with
            # a KeyError traceback naming no file
            raise ValueError(
                f"{path}: the posterior lacks the variables {gone} of a {model.parameterisation} "
                f"{model.likelihood} fit; the file was altered or is incomplete: refit"
            )
        runset = with_added_coords(getattr(idata, FIT_DATA_GROUP).load())
        for name in ("model", "momentum_convention", "source", RUN_DIM):
            if name in runset.coords:
                runset = runset.assign_coords({name: runset[name].values.astype(object)} if name == RUN_DIM else {name: (RUN_DIM, runset[name].values.astype(object))})
        model.runset = runset
        model.data = model._prepare_data(runset)
        fitted_runs = [str(r) for r in idata.posterior["run"].values] if "run" in idata.posterior.coords else []
        if fitted_runs != model.data.run_ids:
            # each run's draws are read by position in the run set: another run set's draws
            # would be put on these runs
            raise ValueError(
                f"{path}: the posterior's runs {fitted_runs} are not those of its {FIT_DATA_GROUP!r} group "
                f"{model.data.run_ids}; the file was altered or is incomplete: refit"
            )
        model.idata = idata
        model.source_path = path
        fs = attrs.get(ATTR_PREFIX + "fit_seconds", "")
        try:
            model.fit_seconds = float(fs) if fs else None
        except (TypeError, ValueError):  # was "could not convert string to float: 'abc'", no file
            raise ValueError(f"{path}: attribute {ATTR_PREFIX}fit_seconds is {fs!r}, not a number of seconds; the file was altered: refit") from None
        _check_data_checksums(path, attrs)
        return model

    # ------------------------------------------------------------------ results
    def _require_fit(self) -> az.InferenceData:
        if self.idata is None:
            raise ValueError("the model is not fitted: call fit() or load()")
        return self.idata

    def convergence(self, *, var_names: list[str] | None = None) -> CheckResult:
        """Convergence of the fit (R-hat, ESS, divergences, tree depth, E-BFMI) with advice; the
        tree depth is the fit's sampler config ``max_treedepth``."""
        depth = int(self.sampler_config.get("max_treedepth", DEFAULT_SAMPLER_CONFIG["max_treedepth"]))
        return convergence_check(
            self._require_fit(), var_names=var_names, max_treedepth=depth, prior_only=self.prior_only_variables()
        )

    def prior_only_variables(self) -> dict[str, str]:
        """``{variable: why}`` of the posterior variables that no data of this fit inform: the
        noise exponent ``alpha`` (and a free ``measurement_alpha``) when no LLM has runs at two
        known G, and the run offsets of the initial reward when every LLM has a single run
        (:func:`bayes_grpo.model.builder._run_offset_arrays`: such a run has no offset). They
        are drawn from their prior, and a short fit can fail its convergence check on them
        alone; :func:`~bayes_grpo.model.convergence.convergence_check` says so."""
        data = self.data
        post = self._require_fit().posterior
        if data is None:
            return {}
        out: dict[str, str] = {}
        if not _an_llm_at_two_known_g(data):
            for name in ("alpha", "measurement_alpha"):
                if name in post and post[name].values.std() > 0:  # a fixed alpha is a constant
                    out[name] = (
                        "no LLM has runs at two known G: how the noise scales with G is its prior, and "
                        "the noise D and bands at another G are drawn with it"
                    )
        if np.bincount(data.model_idx, minlength=data.n_models).max() < 2:
            out["initial_reward_run_z"] = "every LLM has one run, which has no initial-reward offset"
            out["initial_reward_run_sd"] = (
                "every LLM has one run: the spread of initial rewards between runs is its prior, and a "
                "new run's initial reward is drawn with it"
            )
        return {k: v for k, v in out.items() if k in post}

    def _thinned_posterior(self, max_draws: int = SUMMARY_DRAWS) -> xr.Dataset:
        post = self._require_fit().posterior
        n = post.sizes["chain"] * post.sizes["draw"]
        step = max(1, int(np.ceil(n / max_draws)))
        return post.isel(draw=slice(None, None, max(1, step // 1)))

    def fitted_trajectory_draws(self, max_draws: int = SUMMARY_DRAWS) -> xr.DataArray:
        """Posterior draws of each fitted run's mean trajectory on the run-set grid.

        Returns dims (sample, run, step), at most ``max_draws`` samples (thinned evenly).
        """
        post = self._thinned_posterior(max_draws)
        data = self.data
        assert data is not None
        get = lambda v: post[v].values  # (chain, draw, run)  # noqa: E731
        traj = self.fitted_run_law(get("M_eff"), get("C_eff"), get("K_eff"), get("plateau_run"), get("initial_reward"))
        traj = traj.reshape(-1, data.n_runs, len(data.steps))
        return xr.DataArray(
            traj,
            dims=("sample", RUN_DIM, STEP_DIM),
            coords={RUN_DIM: data.run_ids, STEP_DIM: self.runset[STEP_DIM].values},
            name="reward_mean",
        )

    def fitted_run_law(self, mass, damping, k_eff, plateau, initial_reward, runs=None) -> np.ndarray:
        """Mean reward of fitted runs on the run-set grid, by the law the likelihood uses.

        The coefficients (at each run's ``learning_rate``) have shape ``(..., n)``, the last
        axis the runs ``runs`` (indices into the fitted runs; default all). Runs on a followed
        learning-rate schedule (``data.lr_multiplier``) get the law on their schedule
        (:func:`bayes_grpo.dynamics.trajectory.scheduled_reward_trajectory`), the others the
        closed form. Returns ``(..., n, n_steps)``.
        """
        data = self.data
        assert data is not None
        idx = np.arange(data.n_runs) if runs is None else np.asarray(runs, dtype=int)
        values = [np.asarray(v, dtype=float) for v in (mass, damping, k_eff, plateau, initial_reward)]
        if data.lr_multiplier is None:
            col = [v[..., None] for v in values]
            return np.asarray(reward_trajectory(data.steps, *col), dtype=float)
        lag = data.k_ref[idx] if self.parameterisation == "mechanistic" else np.zeros(idx.size)
        with np.errstate(over="ignore", invalid="ignore"):
            out = scheduled_reward_trajectory(data.steps, data.lr_multiplier[idx], *values, lag=np.broadcast_to(lag, values[0].shape))
        return np.asarray(out, dtype=float)

    def run_law(self, runset: xr.Dataset, run: str, steps, mass, damping, k_eff, plateau, initial_reward, k_ref: float = 0.0) -> np.ndarray:
        """Mean reward of a run of ``runset`` at its ``steps`` (a subset of its grid), by the law
        this fit's likelihood uses (:func:`run_mean_reward`, on the run's logged schedule when
        the fit follows schedules: :func:`bayes_grpo.model.prepare.follows_schedule`).
        Coefficients (at the run's ``learning_rate``) shape ``(...)``, ``k_ref`` the run's lag
        (mechanistic form). Returns ``(..., len(steps))``.
        """
        return run_mean_reward(
            runset,
            run,
            steps,
            mass,
            damping,
            k_eff,
            plateau,
            initial_reward,
            follow=follows_schedule(self.model_config, self.likelihood),
            lag=float(k_ref) if self.parameterisation == "mechanistic" else 0.0,
        )

    def mean_trajectories(self) -> xr.DataArray:
        """Posterior mean of each run's mean trajectory on the run-set grid, dims (run, step)."""
        return self.fitted_trajectory_draws().mean("sample", skipna=True)

    @property
    def gain_column(self) -> str:
        """Name of the summaries' gain column: ``"a"`` (``eta K``, the learning rate times the
        curvature) in the mechanistic form, ``"w0_sq"`` (``w0^2`` per step^2, no learning rate
        enters) in the phenomenological one, whose posterior stores it under ``a`` too."""
        return "w0_sq" if self.parameterisation == "phenomenological" else "a"

    def coefficient_units(self) -> dict[str, str]:
        """The unit of each coefficient of the summaries, time in optimizer steps and the reward
        in its logged unit (DESIGN.md section 1, with ``delta = 1`` step: ``M_eff`` carries no
        unit, so ``C_eff`` is per step and ``K_eff`` and ``w0^2`` per step^2). ``D`` depends on
        the likelihood: i.i.d., ``sigma^2 = D / G^alpha`` is the per-step residual variance, so
        ``D`` is a variance (reward^2); state space, ``D`` is the intensity of the noise that
        drives ``M e'' + C e' + K e = sqrt(D / G^alpha) xi``, reward^2 per step^3 (its
        stationary variance ``D / (2 G C K)`` is in reward^2)."""
        return {
            "p_star": "reward",
            "a": "per step^2",
            "w0_sq": "per step^2",
            "M_eff": "dimensionless",
            "C_eff": "per step",
            "K_eff": "per step^2",
            "zeta": "dimensionless",
            "D": "reward^2 per step^3" if self.likelihood == "state_space" else "reward^2",
        }

    def units_note(self) -> str:
        """:meth:`coefficient_units` as one sentence, for ``fit`` and the report."""
        units = self.coefficient_units()
        named = ("p_star", self.gain_column, "M_eff", "C_eff", "K_eff", "zeta", "D")
        noise = (
            "the intensity of the noise sqrt(D / G^alpha) xi driving the oscillator"
            if self.likelihood == "state_space"
            else "sigma^2 G^alpha, the per-step residual variance at G = 1"
        )
        return (
            "units (time in optimizer steps, reward in its logged unit): "
            + "; ".join(f"{c} {units[c]}" for c in named)
            + f" ({noise})"
        )

    def run_summary(self) -> pd.DataFrame:
        """One row per run: posterior medians of ``p*, M_eff, C_eff, K_eff, zeta,`` the gain
        (:attr:`gain_column`) and ``D``,
        the 90% interval of ``zeta``, and R^2 of the posterior-mean trajectory: raw, the
        noise ceiling (``metrics.noise_ceiling_r2``: second-difference pseudo-residuals), smoothed (vs a centred moving average of
        10% of the run), whether the run has a visible trend (``bayes_grpo.metrics.has_trend``; None
        where its test cannot tell: too few points, or a constant reward), and
        ``r_hat``, the largest R-hat of the run's own variables
        (:func:`bayes_grpo.model.convergence.run_r_hat`).
        """
        post = self._require_fit().posterior
        data = self.data
        assert data is not None
        med = lambda v: post[v].median(("chain", "draw")).values  # noqa: E731
        q = (1 - HDI_PROB) / 2
        zeta = post["zeta"].values.reshape(-1, data.n_runs)
        frame = pd.DataFrame(
            {
                "model": [data.models[m] for m in data.model_idx],
                "group_size": readable_group_sizes(data.group_size),
                "learning_rate": data.learning_rate,
                "n_obs": np.bincount(data.obs_run, minlength=data.n_runs),
                "p_star": med("plateau_run"),
                "R0": med("initial_reward"),
                self.gain_column: med("a"),
                "M_eff": med("M_eff"),
                "C_eff": med("C_eff"),
                "K_eff": med("K_eff"),
                "zeta": med("zeta"),
                "zeta_lo": np.quantile(zeta, q, axis=0),
                "zeta_hi": np.quantile(zeta, 1 - q, axis=0),
                "D": med("noise_d")[data.model_idx],
                "sigma": med("sigma"),
            },
            index=pd.Index(data.run_ids, name=RUN_DIM),
        )
        mean = self.mean_trajectories().values
        r2_raw, ceiling, r2_smooth, trend = [], [], [], []
        try:
            from bayes_grpo import metrics
        except ImportError:  # pragma: no cover - metrics is part of the package
            metrics = None
        for i in range(data.n_runs):
            ok = np.isfinite(data.reward[i])
            y, yhat, t = data.reward[i][ok], mean[i][ok], data.steps[ok]
            if metrics is None:
                r2_raw.append(float("nan")), ceiling.append(float("nan")), r2_smooth.append(float("nan")), trend.append(None)
                continue
            r2_raw.append(float(metrics.r2(y, yhat)))
            ceiling.append(float(metrics.noise_ceiling_r2(y, steps=t)))
            r2_smooth.append(float(metrics.smoothed_r2(y, yhat)))
            # None where the trend test cannot tell (under 9 points, or a constant run): a 6-point
            # run rising 0.15 -> 0.78 read has_trend False, and fit named it as showing no trend
            _, p_trend = metrics.trend_test(t, y)
            trend.append(bool(p_trend < metrics.TREND_ALPHA) if np.isfinite(p_trend) else None)
        frame["r2_raw"] = r2_raw
        frame["r2_noise_ceiling"] = ceiling
        frame["r2_smoothed"] = r2_smooth
        frame["has_trend"] = trend
        frame["r_hat"] = run_r_hat(post).reindex(frame.index).values
        return frame

    def group_summary(self) -> pd.DataFrame:
        """Per (model, G): medians of the run summary's columns and the run count (``n_runs``).
        The R^2 columns are the medians over the group's runs with a visible trend (``has_trend``
        not False; their count ``n_runs_r2``), NaN when none has one: a flat run's R^2 (-125, -4095) measures its misfit against
        its noise alone, and beside one other run it made the group's median -62.

        In the mechanistic form a run's ``M_eff``, ``C_eff``, ``K_eff``, gain and ``zeta`` follow
        from its learning rate, momentum (and convention) and ``K_ref``: where the runs of one
        (model, G) differ in some of these (:meth:`mixed_settings`), the table has a column for
        each such setting and one row per (model, G) and its values, so that no median mixes two
        dynamical systems (a K_ref sweep at one G was one row, the medians of runs at K_ref 1
        and 4). The index stays (model, group_size): a split cell has one row per setting."""
        runs = self.run_summary()
        cols = ["p_star", self.gain_column, "M_eff", "C_eff", "K_eff", "zeta", "D", *R2_COLUMNS]
        r2 = list(R2_COLUMNS)
        runs = runs.copy()
        runs.loc[runs["has_trend"].map(lambda t: t is False).to_numpy(bool), r2] = np.nan
        split = self.mixed_settings(runs)
        for name in split:
            runs[name] = self._run_settings(runs)[name]
        keys = ["model", "group_size", *split]
        out = runs.groupby(keys, dropna=False, sort=True)[cols].median()
        out["n_runs"] = runs.groupby(keys, dropna=False, sort=True).size()
        # the runs behind the R^2 medians: a G of 3 runs, 1 flat, has R^2 medians of 2 runs,
        # which "the median of its runs' values (n_runs runs)" did not say
        trend = runs.assign(n_runs_r2=runs["has_trend"].map(lambda t: t is not False).astype(int))
        out["n_runs_r2"] = trend.groupby(keys, dropna=False, sort=True)["n_runs_r2"].sum()
        if split:
            # the settings as columns beside the (model, G) index, first: which system a row is
            out = out.reset_index(split)
            for name in split:
                if name in ("learning_rate", "momentum", "k_ref"):
                    out[name] = _readable_numbers(out[name].to_numpy(dtype=float))
            out = out[[*split, *[c for c in out.columns if c not in split]]]
        # grouping turns a G column holding NaN (unknown G) back into floats: 4 read as 4.0
        g = readable_group_sizes(out.index.get_level_values("group_size"))
        levels = [out.index.get_level_values("model"), pd.Index(g, dtype=g.dtype, name="group_size")]
        out.index = pd.MultiIndex.from_arrays(levels)
        return out

    def _run_settings(self, runs: pd.DataFrame) -> pd.DataFrame:
        """The settings (``MECHANISTIC_COORDS``) the fit took for each run of ``runs`` (the run
        summary, indexed by run id); no columns where they do not enter (the phenomenological
        form) or the fit's data does not hold these runs."""
        data = self.data
        if self.parameterisation != "mechanistic" or data is None or getattr(data, "learning_rate", None) is None:
            return pd.DataFrame(index=runs.index)
        ids = [str(r) for r in data.run_ids]
        if sorted(ids) != sorted(str(r) for r in runs.index):
            return pd.DataFrame(index=runs.index)
        frame = pd.DataFrame(
            {
                "learning_rate": np.asarray(data.learning_rate, dtype=float),
                "momentum": np.asarray(data.momentum, dtype=float),
                "momentum_convention": [str(c) for c in data.momentum_convention],
                "k_ref": np.asarray(data.k_ref, dtype=float),
            },
            index=pd.Index(ids, name=RUN_DIM),
        )
        return frame.reindex([str(r) for r in runs.index]).set_axis(runs.index)

    def mixed_settings(self, runs: pd.DataFrame | None = None) -> list[str]:
        """The settings (of learning_rate, momentum, momentum_convention, k_ref, in that order)
        in which the runs of some (model, G) of the fit differ, by which :meth:`group_summary`
        splits its rows; ``[]`` for the phenomenological form, in which they do not enter.
        ``runs``: the run summary (:meth:`run_summary`), computed when None."""
        runs = self.run_summary() if runs is None else runs
        settings = self._run_settings(runs)
        if settings.empty or not {"model", "group_size"} <= set(runs.columns):
            return []
        cells = runs[["model", "group_size"]].assign(group_size=runs["group_size"].astype(float))
        frame = pd.concat([cells, settings], axis=1)
        varying = frame.groupby(["model", "group_size"], dropna=False)[list(settings.columns)].nunique(dropna=False)
        return [name for name in settings.columns if (varying[name] > 1).any()]

    def noise_exponent_summary(self) -> dict[str, Any] | None:
        """Posterior of the noise exponent ``alpha`` (``sigma^2 = D / G^alpha``; theory 1) against
        the theory: median, central ``HDI_PROB`` interval and, when that interval excludes 1, a
        ``note`` saying what it means (else None). None when ``alpha`` is fixed or no LLM of the fit
        has runs at two known G (then only its prior speaks). The log density is not involved:
        this reads the draws."""
        post = self._require_fit().posterior
        data = self.data
        assert data is not None
        if self.model_config["alpha"].get("fixed") is not None or "alpha" not in post:
            return None
        if not _an_llm_at_two_known_g(data):
            return None
        x = np.asarray(post["alpha"].values, dtype=float).ravel()
        x = x[np.isfinite(x)]
        lo, hi = np.quantile(x, [(1 - HDI_PROB) / 2, (1 + HDI_PROB) / 2])
        out: dict[str, Any] = {"median": float(np.median(x)), "lo": float(lo), "hi": float(hi), "prob": HDI_PROB, "note": None}
        if lo <= 1.0 <= hi:
            return out
        interval = f"{out['median']:.3g} [{lo:.3g}, {hi:.3g}] ({HDI_PROB:.0%} interval)"
        if hi < 1.0:
            meaning = (
                "the per-step noise shrinks less with G than the theory's 1/G"
                + (" (it grows with G)" if hi < 0.0 else "")
                + ": noise that a larger group does not average away, e.g. logging or measurement "
                "noise of a fixed number of completions per step, or a law misfit that differs between G"
            )
        else:
            meaning = (
                "the per-step noise shrinks faster with G than the theory's 1/G, e.g. a law misfit "
                "or a wander about the curve that is larger at small G"
            )
        if self.likelihood == "iid":
            meaning += (
                "; with the i.i.d. likelihood the residual sd also carries each run's wander about its "
                "curve, whose variance D / (2 G C K) depends on the run's damping, which this sd "
                "ignores, so where G and the learning rate or K_ref change together alpha absorbs "
                "it"
            )
        out["note"] = (
            f"the noise exponent alpha (sigma^2 = D / G^alpha) is {interval}, which excludes the "
            f"theory's 1: {meaning}. Bands of the logged reward at another G follow the fitted alpha"
        )
        # a stuck chain gives a narrow interval anywhere (a 1-chain state-space fit, bulk ESS 1:
        # alpha 0.981 [0.981, 0.981]): say so rather than read it against the theory
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore")
            ess = float(az.ess(post["alpha"]).to_array().values.ravel()[0])
            rhat = float(az.rhat(post["alpha"]).to_array().values.ravel()[0]) if post.sizes["chain"] > 1 else 1.0
        ess_min = ESS_MIN_PER_CHAIN * post.sizes["chain"]
        if not (ess >= ess_min and rhat <= RHAT_MAX and np.ptp(x) > 0):  # arviz: a constant's ESS is n
            spread = f"R-hat {rhat:.3f}" if post.sizes["chain"] > 1 else "one chain"
            out["note"] = (
                f"alpha's draws have not converged (bulk ESS {ess:.0f}, {spread}; the fit's "
                f"convergence advice), so this is not yet evidence against the theory: {out['note']}"
            )
        return out

    # ------------------------------------------------------------------ new settings
    def coefficient_draws(
        self,
        *,
        learning_rate: float | None = None,
        momentum: float | None = None,
        momentum_convention: str | None = None,
        k_ref: float | None = None,
        group_size: float | None = None,
        model: str | None = None,
        model_size: float | None = None,
        random_seed: int = 0,
        run_offset: bool = True,
    ) -> xr.Dataset:
        """Posterior draws of the oscillator for a hyperparameter setting (a new run).

        Parameters
        ----------
        learning_rate, momentum, momentum_convention, k_ref
            The setting (mechanistic form; ignored by the phenomenological form, whose
            coefficients are those of ``model``).
        group_size
            ``G``; sets the noise ``sigma`` (and, under ``by_group``, picks the (model, G)
            offsets; an unseen G draws new offsets from their prior; a fitted G of an LLM
            the fit saw at one G only has none). ``None`` or NaN (a run
            whose G is unknown) is the LLM's reference G, the G the fit gave its runs of
            unknown G (under ``by_group``, their group's offsets).
        model
            An LLM of the fit; ``None`` is the fit's LLM when it has only one. Otherwise
            ``None`` (or an unknown name, mechanistic only) draws ``K`` from the population
            level (``log_stiffness_mean``, ``log_stiffness_sd``, ``size_exponent`` with
            ``model_size``); then reward-valued quantities
            (plateau, initial reward, D, sigma) are NaN, since each LLM has its own scale.
        model_size
            Parameters of a new LLM (a positive count; for the curvature-scaling regression).
            Where it does not enter the draws (``model`` is a fitted LLM and this is not its
            own size, or the fit has no regression of ``log K`` on ``log model_size``) an
            :class:`UnusedModelSizeWarning` says so and the attribute ``model_size_unused``
            gives the reason.
        random_seed
            Seed of every random draw made here (offsets of an unseen G or LLM, the new
            run's initial-reward offset); the same seed gives the same draws.
        run_offset
            A new run has no fitted run-level offset of its initial reward, so each
            posterior draw gets one, ``N(0, initial_reward_run_sd^2 (1 + 1/n))`` for an LLM
            fitted on ``n`` runs (``initial_reward_model`` is the mean of those runs' R0; in
            the LLM's standardised units, times its reward scale): ``initial_reward`` is
            then the predictive R0 of a new run, not the LLM-level mean
            ``initial_reward_model``. ``False`` gives the LLM-level mean.

        Returns
        -------
        xarray.Dataset
            dims (chain, draw); variables ``a, M_eff, C_eff, K_eff, zeta, plateau,
            initial_reward, noise_d, sigma, measurement_sd`` (the state-space measurement-noise
            sd at this ``G``, part of ``sigma``; 0 under the i.i.d. likelihood).

        Raises
        ------
        ValueError
            A setting it cannot give draws for; for a fit loaded from a file (:meth:`load`) the
            message starts with the file's path (`predict phen.nc --model nope` and `forecast
            --prior phen.nc` said "the phenomenological model has no population level ..."
            without naming phen.nc).
        """
        # a whole number: it is offset and recorded (-1 failed in NumPy naming no argument)
        checked_seed(random_seed, "random_seed", generator=False)
        try:
            return self._coefficient_draws(
                learning_rate=learning_rate,
                momentum=momentum,
                momentum_convention=momentum_convention,
                k_ref=k_ref,
                group_size=group_size,
                model=model,
                model_size=model_size,
                random_seed=random_seed,
                run_offset=run_offset,
            )
        except ValueError as exc:
            if self.source_path is not None and exc.args:
                exc.args = (f"{self.source_path}: {exc.args[0]}", *exc.args[1:])  # its type kept
            raise

    def _coefficient_draws(
        self,
        *,
        learning_rate: float | None,
        momentum: float | None,
        momentum_convention: str | None,
        k_ref: float | None,
        group_size: float | None,
        model: str | None,
        model_size: float | None,
        random_seed: int,
        run_offset: bool,
    ) -> xr.Dataset:
        """:meth:`coefficient_draws` without the saved fit's path in its refusals."""
        post = self._require_fit().posterior
        data = self.data
        assert data is not None
        # model_size too: a non-positive size for a fitted LLM (or a fit without the size
        # regression) was only "not used", as if it were a size
        for name, value in (("learning_rate", learning_rate), ("group_size", group_size), ("model_size", model_size)):
            # NaN stays "unknown" (a run without the value); a number must be a possible setting
            if value is not None and np.isfinite(float(value)) and not float(value) > 0:
                raise ValueError(f"{name} must be a positive number, got {float(value):g}")
        rng = np.random.default_rng(random_seed)
        shape = (post.sizes["chain"], post.sizes["draw"])
        between_prior = None  # a new LLM of a one-LLM fit: the prior scale of the spread of log K
        known = model is not None and model in data.models
        if model is None and data.n_models == 1:
            model, known = data.models[0], True
        gos = float(self.model_config["group_offset_sigma"])
        glabel = group_label(model, float("nan") if group_size is None else float(group_size)) if known else None
        # a fitted group of an LLM at one G (or of unknown G only) has no H1 offsets (model
        # version 8): it is on its LLM's trajectory, not a group to draw offsets for
        fitted_group = glabel in data.groups
        offset_groups = [str(g) for g in post["group"].values] if "group" in post.coords else []
        group_pos = offset_groups.index(glabel) if glabel in offset_groups else None

        def offset(name: str) -> np.ndarray:
            if self.invariance != "by_group" or not known:
                return np.zeros(shape)
            if group_pos is not None:
                return post[name].isel(group=group_pos).values
            if fitted_group:
                return np.zeros(shape)
            return gos * rng.normal(size=shape)

        if self.parameterisation == "mechanistic":
            if momentum_convention in (None, "") and momentum is not None and float(momentum) == 0.0:
                # at momentum 0 the conventions coincide: no convention is needed, as for a fitted
                # run (prepare.convention_without_momentum); it was refused as missing
                momentum_convention = str(convention_without_momentum([0.0], [""])[0])
            missing = [n for n, v in (("learning_rate", learning_rate), ("momentum", momentum), ("momentum_convention", momentum_convention), ("k_ref", k_ref)) if v is None]
            if missing:
                raise ValueError(f"the mechanistic model needs {missing} to give coefficients for a setting")
            for name, value in (("learning_rate", learning_rate), ("momentum", momentum), ("k_ref", k_ref)):
                # the CLI's argument types refuse these; here momentum 1.5 drew a trajectory of
                # -1e6 (with a RuntimeWarning), k_ref -1 one of a lag no run can have, NaN all-NaN draws
                v = float(value)
                if not np.isfinite(v):
                    raise ValueError(f"the mechanistic model needs a finite {name} to give coefficients for a setting; got {v:g}")
                if not setting_in_range(name, v):
                    raise ValueError(f"{name} {DEFAULT_RANGES[name]}; got {v:g}")
            if known:
                log_k = post["log_stiffness"].sel(model=model).values
            else:
                log_k = post["log_stiffness_mean"].values.copy()
                if "log_stiffness_sd" in post:
                    between_sd = post["log_stiffness_sd"].values
                else:
                    # a fit of one LLM has no spread of log K between LLMs (its population mean
                    # is that LLM's log K): a new LLM got exactly the fitted LLM's curvature, with
                    # its narrow band. Draw the spread from its prior, as the model has it.
                    spread = prior_centres(data, self.model_config, self.parameterisation)["log_k_spread"]
                    between_prior = max(float(self.model_config["log_stiffness"]["between_models_sigma"]), 2.0 * float(spread))
                    between_sd = np.abs(between_prior * rng.normal(size=shape))
                log_k = log_k + between_sd * rng.normal(size=shape)
                if "size_exponent" in post:
                    if model_size is None or not np.isfinite(model_size):
                        which = f"model {model!r} is not in the fit (its LLMs: {data.models}); " if model is not None else ""
                        raise ValueError(
                            f"{which}this fit regresses log K on log model_size: give model_size for a new model "
                            "(CLI: --model-size)"
                        )
                    if not float(model_size) > 0:
                        # log N of a non-positive count: NaN or -inf curvature, a flat or NaN "prediction"
                        raise ValueError(f"model_size must be a positive number of parameters, got {float(model_size):g}")
                    centre = prior_centres(data, self.model_config, self.parameterisation)["size_mean"]
                    log_k = log_k + post["size_exponent"].values * (np.log(model_size) - centre)
            log_k = log_k + offset("group_offset_log_stiffness")
            a = effective_step(float(learning_rate), float(momentum), momentum_convention) * np.exp(log_k)
            mass, damp, k_eff = oscillator_coefficients(a, float(momentum), float(k_ref))
            damp = damp * np.exp(offset("group_offset_log_damping"))
            mass = np.broadcast_to(mass, shape)
        else:
            if not known:
                raise ValueError(f"the phenomenological model has no population level: model must be one of {data.models}")
            w0 = post["natural_frequency_model"].sel(model=model).values * np.exp(offset("group_offset_log_frequency"))
            z = post["damping_ratio_model"].sel(model=model).values * np.exp(offset("group_offset_log_damping"))
            mass, damp, k_eff = np.ones(shape), 2.0 * z * w0, w0**2
            a = k_eff
        nan = np.full(shape, np.nan)
        if known:
            plateau = post["plateau"].sel(model=model).values
            r0 = post["initial_reward_model"].sel(model=model).values
            m = data.models.index(model)
            if self.reward_bounds is not None:
                # the offsets shift the latent levels, whose images lie in the bounds (runset.bounds)
                plateau, r0 = (latent_value(v, *self.reward_bounds) for v in (plateau, r0))
            if self.invariance == "by_group":
                plateau = plateau + data.scale[m] * offset("group_offset_plateau")
                r0 = r0 + data.scale[m] * offset("group_offset_initial_reward")
            if run_offset:
                n_runs = int(np.sum(np.asarray(data.model_idx) == m))
                r0 = r0 + data.scale[m] * _new_run_offset(post, random_seed, shape, n_runs)
            if self.reward_bounds is not None:
                plateau, r0 = (bounded_value(v, *self.reward_bounds) for v in (plateau, r0))
            noise_d = post["noise_d"].sel(model=model).values
            alpha = post["alpha"].values
            g_ref = prior_centres(data, self.model_config, self.parameterisation)["g_ref"][m]
            # an unknown G (None or NaN) is the LLM's reference G, as in the fit for its runs
            g = float(group_size) if group_size is not None and np.isfinite(float(group_size)) else g_ref
            if self.likelihood == "iid":
                sigma = np.sqrt(noise_d / g**alpha)
                meas = 0.0  # no measurement-noise term: sigma is all residual
            else:
                meas_exponent = measurement_g_exponent(self.model_config)
                meas_alpha = (
                    alpha
                    if meas_exponent == "alpha"
                    else post["measurement_alpha"].values
                    if meas_exponent == "free"
                    else meas_exponent
                )
                meas = post["measurement_sd"].sel(model=model).values * (g / g_ref) ** (-meas_alpha / 2.0)
                sigma = np.sqrt(noise_d / (g**alpha * 2.0 * np.abs(damp) * k_eff) + meas**2)
        else:
            plateau = r0 = noise_d = sigma = meas = nan
        dims = ("chain", "draw")
        coords = {"chain": post["chain"].values, "draw": post["draw"].values}
        out = xr.Dataset(
            {
                "a": (dims, np.broadcast_to(a, shape)),
                "M_eff": (dims, np.broadcast_to(mass, shape)),
                "C_eff": (dims, np.broadcast_to(damp, shape)),
                "K_eff": (dims, np.broadcast_to(k_eff, shape)),
                "zeta": (dims, np.broadcast_to(damping_ratio(mass, damp, k_eff), shape)),
                "plateau": (dims, np.broadcast_to(plateau, shape)),
                "initial_reward": (dims, np.broadcast_to(r0, shape)),
                "noise_d": (dims, np.broadcast_to(noise_d, shape)),
                "sigma": (dims, np.broadcast_to(sigma, shape)),
                "measurement_sd": (dims, np.broadcast_to(meas, shape)),
            },
            coords=coords,
        )
        out.attrs.update({"model": model or "", "parameterisation": self.parameterisation, "new_model": str(not known)})
        if known and self.reward_bounds is not None:
            # the reward the draws' levels are in (predict keeps its bands of the reward in them)
            out.attrs["reward_bounds"] = list(self.reward_bounds)
        if between_prior is not None:
            out.attrs["between_models_sd_prior"] = between_prior  # HalfNormal scale of the spread drawn
        if self.invariance == "by_group" and known and not fitted_group:
            out.attrs["new_group"] = glabel  # its offsets drawn from their prior, above
        if model_size is not None and np.isfinite(float(model_size)):
            # ignored silently before, while predict said "model_size = ... is not used"
            own = data.log_size[data.models.index(model)] if known else np.nan
            if known and float(model_size) > 0 and np.isclose(np.log(float(model_size)), own):
                unused = None  # the LLM's own size (a fitted run's settings, passed whole)
            elif known:
                unused = f"{model!r} is an LLM of the fit, whose curvature is its own"
            elif "size_exponent" not in post:
                unused = "this fit has no regression of the curvature on model size"
            else:
                unused = None
            if unused is not None:
                out.attrs["model_size_unused"] = unused
                warnings.warn(
                    f"model_size = {float(model_size):g} is not used: {unused}",
                    UnusedModelSizeWarning,
                    stacklevel=2,
                )
        return out

    def trajectory_draws(self, steps, **setting: Any) -> xr.DataArray:
        """Posterior draws of the mean reward trajectory at ``steps`` (optimizer steps, R0 at 0).

        ``setting`` are the keyword arguments of :meth:`coefficient_draws`, for an LLM of the fit
        (a new LLM has no reward scale: ``ValueError``). Returns dims (chain, draw, step).
        """
        t = np.asarray(steps, dtype=float)
        if t.ndim != 1 or not np.isfinite(t).all() or (t < 0).any():
            # the law starts at step 0 (R0): at -10 it was extrapolated backwards without a word, a
            # NaN or infinite step gave NaN or garbage, a 2-D array a broadcasting traceback
            bad = t[~(np.isfinite(t) & (t >= 0))] if t.ndim == 1 else None
            got = f"a {t.ndim}-D array" if t.ndim != 1 else f"{bad[0]:g}"
            raise ValueError(f"steps must be a 1-D array of finite optimizer steps >= 0 (R0 is at step 0); got {got}")
        if setting.get("model") is None and self.data is not None and self.data.n_models > 1:
            raise ValueError(
                f"the fit has several LLMs ({self.data.models}): name the one to predict with model=..."
            )
        c = self.coefficient_draws(**setting)
        if str(c.attrs.get("new_model")) == "True":
            # its plateau and R0 are NaN (each LLM has its own reward scale): every draw was NaN
            raise ValueError(
                f"model {setting.get('model')!r} is not an LLM of the fit (its LLMs: {self.data.models}): a new "
                "LLM has no reward scale here, so no reward trajectory; coefficient_draws gives its "
                "dynamics, and bayes_grpo.predict.predict_run (CLI predict --model) its normalised progress"
            )
        v = lambda n: c[n].values[..., None]  # noqa: E731
        traj = reward_trajectory(t[None, None, :], v("M_eff"), v("C_eff"), v("K_eff"), v("plateau"), v("initial_reward"))
        return xr.DataArray(traj, dims=("chain", "draw", STEP_DIM), coords={"chain": c["chain"].values, "draw": c["draw"].values, STEP_DIM: t}, name="reward_mean")

    def predict(self, steps, *, include_noise: bool = True, random_seed: int = 0, **setting: Any) -> xr.Dataset:
        """Posterior predictive of a run with the given setting at ``steps``.

        Returns a Dataset with ``reward_mean`` (chain, draw, step) and, when
        ``include_noise``, ``reward`` = mean + per-step Gaussian noise of sd ``sigma``
        (for the state-space likelihood ``sigma`` is the stationary marginal sd, so the
        band is right marginally but the noise is drawn independently across steps).
        """
        mean = self.trajectory_draws(steps, random_seed=random_seed, **setting)
        out = xr.Dataset({"reward_mean": mean})
        if include_noise:
            sigma = self.coefficient_draws(random_seed=random_seed, **setting)["sigma"].values[..., None]
            rng = np.random.default_rng(random_seed + 1)
            out["reward"] = mean + sigma * rng.normal(size=mean.shape)
        return out


def _an_llm_at_two_known_g(data: ModelData) -> bool:
    """Whether an LLM of the fit has runs at two known G: else the data say nothing of how the
    noise scales with G, and ``alpha`` is its prior (``noise_exponent_summary``,
    ``prior_only_variables``)."""
    return any(
        np.unique(data.group_size[(data.model_idx == m) & np.isfinite(data.group_size)]).size >= 2
        for m in range(data.n_models)
    )


#: Spawn key of the random stream of a new run's initial-reward offset (kept apart from the
#: stream of the group / LLM offsets, so those draws do not change with it).
_RUN_OFFSET_STREAM: int = 1


def run_mean_reward(
    runset: xr.Dataset, run: str, steps, mass, damping, k_eff, plateau, initial_reward, *, follow: bool, lag: float = 0.0
) -> np.ndarray:
    """Mean reward of run ``run`` of ``runset`` at its ``steps`` (a subset of the grid).

    On the run's logged learning-rate schedule when ``follow`` and the run has one
    (:func:`bayes_grpo.dynamics.trajectory.scheduled_reward_trajectory` with the multipliers of
    :func:`bayes_grpo.model.prepare.schedule_multipliers`; ``lag`` is the lag that moves ``M``
    and ``C`` with the rate, 0 in the phenomenological form), else the closed form.
    Coefficients at the run's ``learning_rate``, shape ``(...)``; returns ``(..., len(steps))``.
    """
    t = np.asarray(steps, dtype=float)
    values = [np.asarray(v, dtype=float) for v in (mass, damping, k_eff, plateau, initial_reward)]
    m = schedule_multipliers(runset, [str(run)], t) if follow else None
    if m is None or t.size == 0:
        return np.asarray(reward_trajectory(t, *(v[..., None] for v in values)), dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        out = scheduled_reward_trajectory(t, m[0], *values, lag=np.full(values[0].shape, float(lag)))
    return np.asarray(out, dtype=float)


def between_models_prior_note(draws: xr.Dataset, what: str = "bands") -> str | None:
    """The note that a new LLM's curvature spread rests on the prior, for draws of
    :meth:`GRPODynamicsModel.coefficient_draws` that drew it (attr ``between_models_sd_prior``: a
    new LLM of a fit of one LLM); None otherwise. ``what`` names what that spread widens (the
    prediction's bands, the stability intervals): said by ``predict``, ``stability --posterior``
    and ``phase-diagram``."""
    scale = getattr(draws, "attrs", {}).get("between_models_sd_prior")
    if scale is None:
        return None
    return (
        "the fit has one LLM, so how much the curvature K varies between LLMs is not "
        "identified: a new LLM's log K is the fitted LLM's plus a spread drawn from its "
        f"prior (half-normal, scale {float(scale):g}), which sets the width of the {what}"
    )


def load_fitted_model(path: str | os.PathLike) -> GRPODynamicsModel:
    """:meth:`GRPODynamicsModel.load`, for a fit that is about to be used (predictions,
    stability, diagnoses, forecast priors), with a ``UserWarning`` for what everything computed
    from its draws inherits: the convergence criteria the saved fit failed (R-hat, ESS,
    divergences, ...; :meth:`GRPODynamicsModel.convergence`, about a second on a typical fit),
    and, for an i.i.d. fit, residuals positively correlated in time (a reward that wanders
    about its curve: the intervals are too narrow; :func:`bayes_grpo.checks.ppc.iid_residual_check`,
    0.2 s for 6 runs of 300 steps)."""
    return _load_with_notes(path, stacklevel=3)[0]


def _load_with_notes(path: str | os.PathLike, *, stacklevel: int) -> tuple[GRPODynamicsModel, list[str]]:
    """The saved fit at ``path`` and the texts of :func:`fitted_model_warnings`, each warned as a
    ``UserWarning`` (``stacklevel`` from here): the one place :func:`load_fitted_model` and
    :func:`as_fitted_model` load a fit and make its warnings."""
    model = GRPODynamicsModel.load(path)
    notes = fitted_model_warnings(model, path)
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=stacklevel)
    return model, notes


def fitted_model_warnings(model: Any, path: str | os.PathLike) -> list[str]:
    """The warnings :func:`load_fitted_model` gives for ``model`` saved at ``path``: the
    convergence criteria it failed, and for an i.i.d. fit positively correlated residuals. Also
    the demo's, for its report of the fit it has just made and saved (as ``report`` of that file)."""
    from bayes_grpo.checks.ppc import iid_residual_check

    notes = []
    conv = model.convergence()
    if conv.passed is False:
        failed = conv.values.get("failed") or [conv.summary]
        # the convergence check's remedies, not one fixed one: more draws do not move a stuck chain
        remedies = conv.values.get("remedies") or ["more --tune/--draws"]
        notes.append(
            f"{os.fspath(path)}: the fit did not converge ({'; '.join(failed)}); what is computed "
            f"from it inherits that: refit with {', '.join(remedies)} (see its convergence advice)"
        )
    wander = iid_residual_check(model)
    if wander is not None and wander.passed is False:
        notes.append(f"{os.fspath(path)}: {wander.summary} What is computed from this i.i.d. fit is too confident.")
    return notes


def as_fitted_model(posterior: Any, *, error: type[Exception] = ValueError) -> tuple[Any, list[str]]:
    """The fitted model a verb works from, and the texts of the warnings of loading it.

    ``posterior`` is the path of a saved fit, loaded as by :func:`load_fitted_model` (a missing,
    folder or non-netCDF path is its error naming the file), whose warnings (the texts of
    :func:`fitted_model_warnings`: a fit that did not converge, an i.i.d. fit whose residuals
    wander) are warned as there and also returned, so that what is
    computed from the fit carries them (``predict``'s and ``forecast``'s attr
    ``posterior_warnings``, ``stability``'s and the phase diagram's
    ``values["posterior_warnings"]``); or a fitted model (anything with ``coefficient_draws``),
    taken as it is, with no notes (it was loaded, and warned, by the caller). Anything else is
    ``error``, the caller's own exception type (e.g. ``ForecastError``). The one loader of
    ``predict``, ``forecast``, ``stability``, ``phase-diagram``, the diagnoses and ``report``
    (``build_sections(posterior_warnings=...)``, at the top of the overview).
    """
    if isinstance(posterior, str | os.PathLike):
        # the texts of fitted_model_warnings, as warned: not whatever else warns while the file
        # is read (a library's UserWarning is not a warning of the fit)
        return _load_with_notes(posterior, stacklevel=3)
    if not hasattr(posterior, "coefficient_draws"):
        raise error(
            "expected the path of a saved fit or a fitted GRPODynamicsModel (with "
            f"coefficient_draws), got {type(posterior).__name__}"
        )
    return posterior, []


def _new_run_offset(post: xr.Dataset, random_seed: int, shape: tuple[int, int], n_runs: int) -> np.ndarray:
    """Standardised initial-reward offset of a new run of an LLM with ``n_runs`` fitted runs.

    The fitted runs' offsets sum to zero, so ``initial_reward_model`` is the mean of their
    ``n`` initial rewards, itself ``N(R0_population, tau^2 / n)``; a new run's ``R0`` is
    ``N(R0_population, tau^2)``, hence ``initial_reward_model + tau sqrt(1 + 1/n) z``, ``z ~
    N(0, 1)`` from a stream seeded by ``random_seed`` (``tau = initial_reward_run_sd``, one
    per posterior draw); zeros for a posterior without ``initial_reward_run_sd``.
    """
    if "initial_reward_run_sd" not in post:
        return np.zeros(shape)
    rng = np.random.default_rng(np.random.SeedSequence(int(random_seed), spawn_key=(_RUN_OFFSET_STREAM,)))
    tau = np.asarray(post["initial_reward_run_sd"].values, dtype=float).reshape(shape)
    return tau * np.sqrt(1.0 + 1.0 / max(int(n_runs), 1)) * rng.standard_normal(shape)


#: PyMC's logger, whose INFO lines ("Initializing NUTS using jitter+adapt_diag...",
#: "Multiprocess sampling (2 chains in 2 jobs)", "Sampling 2 chains ... took 67 seconds")
#: say what the sampler is doing, and whose WARNING lines say something is off.
PYMC_LOGGER = "pymc"


@contextlib.contextmanager
def pymc_messages_at(level: int) -> Iterator[None]:
    """PyMC's log lines (logger ``pymc`` and its children) below ``level`` held for the block.

    The one place the package quiets PyMC: ``logging.WARNING`` drops its progress messages and
    keeps its warnings (the CLI's :func:`bayes_grpo.cli._common.sampler_messages`),
    ``logging.CRITICAL + 1`` drops everything (``pm.sample_smc``, which has no ``quiet=``:
    :func:`bayes_grpo.checks.bayes_factor.quiet_pymc`)."""
    import logging

    import pymc  # noqa: F401  (its import sets the logger to INFO: done before the level is set here)

    logger = logging.getLogger(PYMC_LOGGER)
    before = logger.level
    logger.setLevel(max(before, level))
    try:
        yield
    finally:
        logger.setLevel(before)


def progress_messages(shown: bool) -> contextlib.AbstractContextManager[None]:
    """PyMC's progress messages (its INFO lines) as a fit's ``progressbar`` says, its warnings
    kept either way: ``GRPODynamicsModel.fit(progressbar=False)`` from Python still said
    "Initializing NUTS using jitter+adapt_diag...", "Sequential sampling (1 chains in 1 job)",
    "NUTS: [...]" and "Sampling 1 chain ... took 0 seconds" on stderr, which only the CLI held
    (:func:`bayes_grpo.cli._common.sampler_messages`). PyMC sets its logger to INFO, with a
    handler of its own, when it is imported into a program that configured no logging (the root
    logger without handlers); that is the only level held here. A program that configured
    logging (PyMC then leaves its logger unset, NOTSET) or gave the pymc logger a level of its
    own (DEBUG, to see the messages) is left as it is. Nothing is changed at import."""
    import logging

    import pymc  # noqa: F401  (its import sets the logger to INFO: read after it)

    if shown or logging.getLogger(PYMC_LOGGER).level != logging.INFO:
        return contextlib.nullcontext()
    return pymc_messages_at(logging.WARNING)


@contextlib.contextmanager
def _sampler_warnings_filtered() -> Iterator[None]:
    """Two warnings of the libraries a fit runs that say nothing about the fit, not printed.

    * PyMC's "RuntimeWarning: overflow encountered in dot" (``quadpotential.velocity_energy``,
      at the start of long or weakly identified fits): a leapfrog step past the oscillator's
      stability threshold, where the trajectory is kept finite (``GRID_STATE_BOUND``), so the
      log density is a huge finite misfit (~ -1e178 at log K 7.5 above a 3000-step run set's
      start) with a gradient as large; the momentum overflows in the kinetic energy and NUTS
      marks the transition divergent. Nothing is hidden: after tuning such transitions are the
      divergences, and a chain that stays there the stuck chains, of the convergence check; in
      tuning they are the step size being found.
    * PyTensor's "could not link to a BLAS installation ... severely degraded" (a pip install):
      the model's log densities hold no BLAS operation
      (``test_the_models_log_densities_need_no_blas``); the warning comes from a rewrite of
      PyTensor's sparse module that reads the BLAS flags while it matches ``z - alpha * x``
      (state-space and phenomenological fits printed it), not from anything the fit runs.

    Forked chains inherit the filters."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="overflow encountered in dot", category=RuntimeWarning, module=r"pymc\.step_methods"
        )
        warnings.filterwarnings(
            "ignore", message="PyTensor could not link to a BLAS installation", category=UserWarning, module=r"pytensor\."
        )
        yield


def _sample_nutpie(model, sc: dict[str, Any], cores: int) -> az.InferenceData:
    """Sample with nutpie (numba backend); deterministics are computed afterwards.

    Compilation, not sampling, dominates a nutpie fit of this model: numba's type inference
    on the log density and on the function that expands draws into every deterministic.
    Two measures halve it (40 s -> 19-22 s on the 12-run benchmark, ``benchmarks/bench_fit.py``):
    ``freeze_model=True`` turns the data containers and dimensions into compile-time
    constants, and only the free random variables are stored by nutpie; the deterministics
    (``M_eff``, ``zeta``, ``sigma``...) are then evaluated on the stored draws with one
    PyTensor C function (``pm.compute_deterministics``), whose compilation PyTensor caches.

    The model is compiled without numba's fast-math flags (PyTensor's default has them): with
    them LLVM may reassociate and approximate across the functions it compiles together, so a
    model compiled afresh and the same model loaded from PyTensor's compile cache drew
    different chains from one seed (a 4-run phenomenological fit: up to 3e-4 apart after 2 x 200
    iterations); without them the same seed gives the same draws in every process, cache
    cold or warm, whatever ``PYTHONHASHSEED``.
    """
    try:
        import nutpie
    except ImportError as exc:  # pragma: no cover - nutpie is an optional dependency
        raise ValueError("sampler='nutpie' needs nutpie installed (pip install 'bayes-grpo[nutpie]')") from exc
    import pymc as pm
    import pytensor

    free = [rv.name for rv in model.free_RVs]
    # PyMC cannot freeze a model whose variables carry an initial value (the builder starts
    # each LLM's curvature at its own centre): nutpie gets them as its initial points instead
    initial = {rv.name: v for rv, v in model.rvs_to_initial_values.items() if v is not None}
    saved = dict(model.rvs_to_initial_values)
    model.rvs_to_initial_values.update(dict.fromkeys(saved))
    try:
        with pytensor.config.change_flags(numba__fastmath=False):
            compiled = nutpie.compile_pymc_model(
                model, freeze_model=True, var_names=free, initial_points=initial or None
            )
    finally:
        model.rvs_to_initial_values.update(saved)
    idata = nutpie.sample(
        compiled,
        draws=int(sc["draws"]),
        tune=int(sc["tune"]),
        chains=int(sc["chains"]),
        cores=cores,
        seed=int(sc["random_seed"]),
        progress_bar=bool(sc["progressbar"]),
        target_accept=float(sc["target_accept"]),
        low_rank_modified_mass_matrix=sc.get("mass_matrix", "diag") == "full",
        maxdepth=int(sc["max_treedepth"]),
    )
    if model.deterministics:
        posterior = pm.compute_deterministics(idata.posterior, model=model, merge_dataset=True, progressbar=False)
        idata.posterior = posterior.assign_attrs(idata.posterior.attrs)
    idata.posterior = _without_transformed_values(idata.posterior, model)
    return idata


#: What a netCDF attribute may hold (xarray's own check when a dataset is written).
_NETCDF_ATTR_TYPES = (str, numbers.Number, np.ndarray, np.number, list, tuple, bytes)


def _unsavable_attrs(ds: xr.Dataset) -> list[str]:
    """The attributes of ``ds`` and of its variables that a netCDF file cannot hold (a dict,
    None, ...), each as ``"'name' (type)"`` or ``"'name' of 'variable' (type)"``."""
    bad = [f"{k!r} ({type(v).__name__})" for k, v in ds.attrs.items() if not isinstance(v, _NETCDF_ATTR_TYPES)]
    for name, var in ds.variables.items():
        bad += [
            f"{k!r} of {str(name)!r} ({type(v).__name__})"
            for k, v in var.attrs.items()
            if not isinstance(v, _NETCDF_ATTR_TYPES)
        ]
    return bad


def _without_transformed_values(posterior: xr.Dataset, model) -> xr.Dataset:
    """``posterior`` without the unconstrained values of transformed free variables (``x_log__``):
    nutpie stores them beside the variables themselves, PyMC does not, and a nutpie fit's
    convergence advice listed ``initial_reward_run_sd_log__`` beside ``initial_reward_run_sd``."""
    transformed = {
        model.rvs_to_values[rv].name for rv in model.free_RVs if model.rvs_to_transforms.get(rv) is not None
    }
    return posterior.drop_vars(sorted(transformed & set(map(str, posterior.data_vars))))


#: The R^2 columns of :meth:`GRPODynamicsModel.run_summary` and ``group_summary``.
R2_COLUMNS: tuple[str, ...] = ("r2_raw", "r2_noise_ceiling", "r2_smoothed")
#: What an R^2 reads, in a table for reading, where its run (or every run of its group) has no
#: visible trend (``has_trend`` False): the value is the misfit against the noise alone.
NO_TREND: str = "no trend"
#: Why a (model, G) group of :meth:`GRPODynamicsModel.group_summary` has no R^2 (``fit --json``).
NO_TREND_R2_REASON: str = (
    "no trend: no run of the group has a visible trend (has_trend False), so R^2 would weigh the "
    "curve's misfit against the noise alone and say nothing of the law"
)

#: What ``has_trend`` reads, in a table for reading, for a run of fewer logged points than the
#: trend test needs (:data:`bayes_grpo.metrics.MIN_TREND_POINTS`): ``run_summary`` has None
#: there, which read as an empty cell with no word why.
TOO_FEW_FOR_TREND: str = "too few points"


def too_short_for_trend(runs: pd.DataFrame) -> dict[str, int]:
    """The runs of the run summary ``runs`` whose ``has_trend`` is None because they have
    fewer logged points (``n_obs``) than the trend test needs, with their counts (a constant
    run, the test's other None, has its own note)."""
    from bayes_grpo.metrics import MIN_TREND_POINTS

    if not {"has_trend", "n_obs"} <= set(runs.columns):
        return {}
    return {
        str(r): int(n)
        for r, t, n in zip(runs.index, runs["has_trend"], runs["n_obs"])
        if t is None and n < MIN_TREND_POINTS
    }


def too_short_for_trend_note(runs: pd.DataFrame) -> str | None:
    """``fit``'s note on the runs too short for the trend test (:func:`too_short_for_trend`),
    None if there are none: their ``has_trend`` is blank (null in ``--json``) and was left
    unexplained."""
    from bayes_grpo.metrics import MIN_TREND_POINTS

    short = too_short_for_trend(runs)
    if not short:
        return None
    if len(short) == 1:
        ((run, n),) = short.items()
        named = f"run {run} has too few logged points ({n}) for the trend test, which needs {MIN_TREND_POINTS}"
    else:
        counts = ", ".join(f"{r} ({n})" for r, n in short.items())
        named = f"runs {counts} have too few logged points for the trend test, which needs {MIN_TREND_POINTS}"
    return f"{named}: has_trend is left blank (null in --json), neither a trend nor the lack of one"


def groups_without_trend(runs: pd.DataFrame, groups: pd.DataFrame) -> np.ndarray:
    """Per row of ``groups`` (``group_summary``, of the run summary ``runs``): whether none of
    the group's runs has a visible trend (every ``has_trend`` False), where ``group_summary``
    leaves the R^2 columns NaN. All False when ``runs`` has no ``has_trend`` column."""
    if "n_runs_r2" in groups.columns:
        # group_summary's count of the runs with a trend: rows split by setting included
        return (groups["n_runs_r2"].to_numpy() == 0).astype(bool)
    if "has_trend" not in runs.columns or not {"model", "group_size"} <= set(runs.columns):
        return np.zeros(len(groups), dtype=bool)
    # the same groupby of the same run summary as group_summary: the groups in its order
    flat = runs.groupby(["model", "group_size"], dropna=False)["has_trend"].agg(lambda t: all(v is False for v in t))
    if len(flat) != len(groups):
        return np.zeros(len(groups), dtype=bool)
    return flat.to_numpy(bool)


def _readable_numbers(values: np.ndarray) -> np.ndarray:
    """A setting column as people read it: integral values as ints (``K_ref 4``, not ``4.0``)
    when every value is integral, else the floats."""
    values = np.asarray(values, dtype=float)
    if np.isfinite(values).all() and all(v.is_integer() for v in values.tolist()):
        return values.astype(np.int64)
    return values


def per_group_text(split: Sequence[str]) -> str:
    """What a row of :meth:`GRPODynamicsModel.group_summary` is per, for a title: ``"model and
    G"``, or with the settings its rows are split by (:meth:`~GRPODynamicsModel.mixed_settings`)
    ``"model, G and k_ref"``, ``"model, G, learning_rate and k_ref"``."""
    names = ["model", "G", *split]
    return f"{', '.join(names[:-1])} and {names[-1]}"


def with_no_trend_r2(runs: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """``groups`` (``group_summary``) for reading: the R^2 of a group whose runs all lack a
    visible trend reads :data:`NO_TREND` instead of NaN (as ``fit`` and the report show it)."""
    flat = groups_without_trend(runs, groups)
    r2 = [c for c in R2_COLUMNS if c in groups.columns]
    if not flat.any() or not r2:
        return groups
    groups = groups.copy()
    groups[r2] = groups[r2].astype(object)
    groups.loc[flat, r2] = NO_TREND
    return groups


def size_exponent_summary(model) -> dict | None:
    """Posterior of the curvature-scaling exponent (``log K`` on ``log model_size``): median and
    central ``HDI_PROB`` interval, with the LLMs of known size; None when the fit has none."""
    post = model.idata.posterior
    if "size_exponent" not in post:
        return None
    x = np.asarray(post["size_exponent"].values, dtype=float).ravel()
    lo, hi = np.quantile(x, [(1 - HDI_PROB) / 2, (1 + HDI_PROB) / 2])
    sized = [m for m, s in zip(model.data.models, model.data.log_size) if np.isfinite(s)]
    return {"median": float(np.median(x)), "lo": float(lo), "hi": float(hi), "prob": HDI_PROB, "llms": sized}


__all__ = [
    "GRPODynamicsModel",
    "normalise_likelihood",
    "FIT_DATA_GROUP",
    "size_exponent_summary",
    "NO_TREND",
    "NO_TREND_R2_REASON",
    "TOO_FEW_FOR_TREND",
    "too_short_for_trend",
    "too_short_for_trend_note",
    "R2_COLUMNS",
    "groups_without_trend",
    "per_group_text",
    "with_no_trend_r2",
]
