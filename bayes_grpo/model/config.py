"""Default model and sampler configurations (priors as data).

A configuration is a plain, JSON-serialisable ``dict``; the user's overrides are merged
into the defaults one level deep with ``|`` (see :func:`merge_config`), saved with every
fit, and hashed (:func:`config_hash`) so that a saved posterior can only be loaded with
the configuration it was fitted under.

Units. Priors on reward-valued quantities (plateau, initial reward, noise) are given in
units of the model's reward scale: the rewards of each LLM are standardised by their own
mean and standard deviation before fitting (:mod:`bayes_grpo.model.prepare`), so the
same defaults suit binary accuracies, sums of reward functions and game scores. Priors
on time are given relative to the run length ``T`` (the largest logged step of the
model's runs): the gain ``a = eta K`` of a model is centred on ``(1 - mu) / (f T)`` and
the natural frequency of the phenomenological form on ``1 / (f T)``, with
``f = time_scale.fraction``. All fitted quantities are reported back in reward units and
optimizer steps.
"""

from __future__ import annotations

import copy
import hashlib
import json
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from bayes_grpo.constants import MOMENTUM_CONVENTIONS

PARAMETERISATIONS: tuple[str, ...] = ("mechanistic", "phenomenological")
LIKELIHOODS: tuple[str, ...] = ("iid", "state_space")
INVARIANCES: tuple[str, ...] = ("shared", "by_group")
SAMPLERS: tuple[str, ...] = ("pymc", "nutpie")

#: Default priors (see the module docstring for units). Every entry is data, not code.
DEFAULT_MODEL_CONFIG: dict[str, Any] = {
    # p*_m ~ Normal(mean of the last 10% of the model's runs, sigma) [reward sd units]
    "plateau": {"sigma": 1.5},
    # R0_m ~ Normal(mean of the first 10% of the model's runs, sigma); run offsets
    # R0_r = R0_m + tau * z_r, tau ~ HalfNormal(run_sigma), z_r ~ Normal(0, 1) marginally and
    # summing to zero within each LLM (so R0_m is its runs' mean; a single run's R0 is R0_m)
    "initial_reward": {"sigma": 1.5, "run_sigma": 0.3},
    # Response time relative to run length: a_m centred on (1 - mu) / (fraction * T)
    # (mechanistic; its spread is log_stiffness's), the phenomenological w0_m on
    # 1 / (fraction * T), log-normal with sd log_sigma (natural log; phenomenological only).
    "time_scale": {"fraction": 0.25, "log_sigma": 1.5},
    # Mechanistic: log K_m ~ Normal(c + delta + beta * (log N_m - mean), s),
    # delta ~ Normal(0, mean_sigma), s ~ HalfNormal(between_models_sigma); "centred": False
    # samples log K_m = centre + s * z_m, z_m ~ Normal(0, 1) instead (better when the runs
    # say little about each model's stiffness, e.g. very short runs).
    "log_stiffness": {"mean_sigma": 1.5, "between_models_sigma": 1.0, "centred": True},
    # Curvature-scaling exponent beta (regression of log K on log model_size); used when
    # "enabled" and at least "min_models" models with known sizes (two different sizes at
    # least) are present: with fewer, beta and the between-model spread are not separable.
    "size_exponent": {"enabled": True, "mu": 0.0, "sigma": 1.0, "min_models": 3},
    # Phenomenological: log zeta_m ~ Normal(log_mu, log_sigma), times (when
    # "shape_information_weight") Jeffreys' density of the curve shape on the LLM's design,
    # sqrt(det I(log zeta, log w0)): far from critical damping many (zeta, w0) draw the same
    # curve, and without the weight those ridges outweigh the curves between them
    # (bayes_grpo/dynamics/identifiability.py).
    "damping_ratio": {"log_mu": 0.0, "log_sigma": 1.0, "shape_information_weight": True},
    # Noise: sigma_r^2 = D_m / G_r^alpha. iid: sigma is the per-step residual sd, with
    # log sigma at the reference G ~ Normal(log(first-difference noise), log_sigma).
    # state_space: D is the SDE noise intensity, centred so that the stationary sd
    # D / (2 G C K) matches the first-difference noise, log sd log_sigma; measurement
    # noise ~ HalfNormal(measurement_sigma x first-difference noise), at the reference G and
    # scaled per run by (G / G_ref)^(-e / 2), e = measurement_g_exponent: "alpha" (the
    # default: the logged reward is a mean over a fixed number of prompts x G completions, so
    # its sampling variance follows D's G^-alpha), a number (0: a fixed number of completions
    # per step, e.g. TRL's batch size counts completions, so the logged mean does not get
    # less noisy with G), or {"mu": ..., "sigma": ...}: e free, ~ Normal(mu, sigma)
    # (posterior variable "measurement_alpha").
    "noise": {"log_sigma": 1.5, "measurement_sigma": 1.5, "measurement_g_exponent": "alpha"},
    # alpha ~ Normal(mu, sigma) unless "fixed" is a number (theory: 1).
    "alpha": {"mu": 1.0, "sigma": 0.5, "fixed": None},
    # H1 of the G-invariance test: per (model, G) offsets (standardised reward units for
    # plateau and initial reward, natural-log units for stiffness/frequency and damping).
    "group_offset_sigma": 0.5,
    # "follow": with the i.i.d. likelihood, a run whose logged learning rate (metric "lr")
    # follows a schedule (warm-up, decay) is fitted with the law on that schedule, gain a m[n]
    # at rate eta m[n] (dynamics.trajectory.scheduled_error_trajectory): exact for the
    # recursion of SGD / Adam's momentum buffer (the bandit, simulations), but on the public
    # LLM logs it fitted no better than the constant-rate law, and its gradient costs about
    # 20x more (benchmarks/lr_clock.py, benchmarks/real_runs_fit.py --follow-schedules), so it
    # is off by default: the constant-rate law averages over the schedule. The state-space
    # likelihood takes the constant-rate law.
    "learning_rate_schedule": {"follow": False},
    # Values used for runs whose coordinate is unknown (NaN / ""); None = no default, so
    # the mechanistic form raises naming the runs. group_size None: a run of unknown G is taken at its
    # LLM's reference G (the geometric mean of its runs' known G; 1 when none is known).
    "hyperparameter_defaults": {
        "learning_rate": None,
        "momentum": None,
        "momentum_convention": None,
        "k_ref": None,
        "group_size": None,
    },
}

#: Default sampler settings.
DEFAULT_SAMPLER_CONFIG: dict[str, Any] = {
    "draws": 1000,
    "tune": 1000,
    "chains": 4,
    "target_accept": 0.9,
    # "diag": diagonal mass matrix adaptation; "full": dense (PyMC) / low-rank-modified
    # (nutpie) adaptation, which removes the correlations between plateau, initial reward
    # and stiffness that a trajectory fit has.
    "mass_matrix": "diag",
    # NUTS's largest trajectory tree (2^depth leapfrog steps a draw): transitions that reach it
    # fail the convergence check, whose advice is to raise it
    "max_treedepth": 10,
    "sampler": "pymc",
    "random_seed": 0,
    "progressbar": True,
}


def merge_config(default: Mapping[str, Any], user: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge ``user`` into ``default``: top-level keys replace, dict values merge with ``|``.

    Unknown top-level keys raise ``ValueError`` (a typo must not silently fall back to a
    default prior).
    """
    if user is not None and not isinstance(user, Mapping):
        raise ValueError(
            f"a configuration is an object {{key: value, ...}}; got {type(user).__name__} {user!r:.80}"
        )
    out = copy.deepcopy(dict(default))
    for key, value in (user or {}).items():
        if key not in out:
            raise ValueError(f"unknown configuration key {key!r}; known keys: {sorted(out)}")
        if isinstance(out[key], dict) and not isinstance(value, Mapping):
            raise ValueError(
                f"configuration {key!r} is an object with entries {sorted(out[key])}; got {value!r:.80}"
            )
        if isinstance(out[key], dict):
            unknown = set(value) - set(out[key])
            if unknown:
                raise ValueError(f"configuration {key!r}: unknown entries {sorted(unknown)}; known: {sorted(out[key])}")
            out[key] = out[key] | dict(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


#: Model-config entries that must be a number > 0 (prior scales and the time-scale fraction).
POSITIVE_ENTRIES: tuple[str, ...] = (
    "plateau.sigma",
    "initial_reward.sigma",
    "initial_reward.run_sigma",
    "time_scale.fraction",
    "time_scale.log_sigma",
    "log_stiffness.mean_sigma",
    "log_stiffness.between_models_sigma",
    "size_exponent.sigma",
    "damping_ratio.log_sigma",
    "noise.log_sigma",
    "noise.measurement_sigma",
    "alpha.sigma",
    "group_offset_sigma",
)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and bool(np.isfinite(value))


#: What each run setting must be: a ``hyperparameter_defaults`` value, and a run's own value
#: when ``prepare_data`` reads it (:func:`setting_in_range`).
DEFAULT_RANGES: dict[str, str] = {
    "learning_rate": "must be > 0",
    "momentum": "must be in [0, 1)",
    "k_ref": "must be >= 0",
    "group_size": "must be > 0",
    "momentum_convention": f"must be one of {MOMENTUM_CONVENTIONS}",
}


def setting_in_range(key: str, value: Any) -> Any:
    """Whether ``value`` is a setting a run can have (:data:`DEFAULT_RANGES`): a string for
    ``momentum_convention``, else a number or an array of them (then elementwise)."""
    if key == "momentum_convention":
        return value in MOMENTUM_CONVENTIONS
    x = np.asarray(value, dtype=float)
    if key == "momentum":
        return (x >= 0.0) & (x < 1.0)
    if key == "k_ref":
        return x >= 0.0
    return x > 0.0


def validate_model_config(config: Mapping[str, Any]) -> None:
    """Refuse a merged model configuration whose entries have the wrong type, before any work.

    An entry whose default is a number must be a finite number (a string such as ``"1"`` or
    ``"wide"`` failed deep in PyTensor, or was taken as a number without a word), those in
    :data:`POSITIVE_ENTRIES` > 0; one whose default is ``true``/``false`` must be a boolean (the
    string ``"no"`` read as true); ``alpha.fixed`` is null or a number; ``size_exponent.min_models``
    a whole number; each ``hyperparameter_defaults`` value null or a number (a string for
    ``momentum_convention``) in its :data:`DEFAULT_RANGES`; ``noise.measurement_g_exponent`` as
    :func:`measurement_g_exponent` reads it. Raises ``ValueError`` naming the entry and the value.
    """

    def entries(cfg: Mapping[str, Any], default: Mapping[str, Any], prefix: str = ""):
        for key, value in cfg.items():
            if isinstance(default.get(key), dict) and isinstance(value, Mapping):
                yield from entries(value, default[key], f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", value, default.get(key)

    measurement_g_exponent(config)  # its own three forms, checked where they are read
    for name, value, default in entries(config, DEFAULT_MODEL_CONFIG):
        if name == "noise.measurement_g_exponent":
            continue
        if name.startswith("hyperparameter_defaults."):
            text_ok = name.endswith("momentum_convention") and isinstance(value, str)
            if value is not None and not text_ok and not _is_number(value):
                raise ValueError(
                    f"configuration {name!r} must be null (no default) or a "
                    f"{'string' if name.endswith('momentum_convention') else 'number'}; got {value!r}"
                )
            key = name.split(".", 1)[1]
            if value is not None and not setting_in_range(key, value):
                # refused whether or not a run lacks the setting (prepare_data refuses it, naming
                # runs, only when one does: --default momentum=1.5 passed unnoticed otherwise)
                raise ValueError(f"configuration {name!r} (--default {key}=...) {DEFAULT_RANGES[key]}; got {value!r}")
        elif name == "alpha.fixed":
            if value is not None and not _is_number(value):
                raise ValueError(f"configuration 'alpha.fixed' must be null (alpha free) or a number; got {value!r}")
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"configuration {name!r} must be true or false; got {value!r}")
        elif _is_number(default):
            if not _is_number(value):
                raise ValueError(f"configuration {name!r} must be a finite number; got {value!r}")
            if name in POSITIVE_ENTRIES and value <= 0:
                raise ValueError(f"configuration {name!r} is a scale and must be > 0; got {value!r}")
            if name == "size_exponent.min_models" and (value != int(value) or value < 1):
                raise ValueError(f"configuration {name!r} must be a whole number >= 1; got {value!r}")


#: What each sampler-config entry must be (:func:`validate_sampler_config`).
MASS_MATRICES: tuple[str, ...] = ("diag", "full")


def validate_sampler_config(config: Mapping[str, Any]) -> None:
    """Refuse a merged sampler configuration that cannot be sampled as it says, before any
    work: ``draws``, ``chains`` and ``max_treedepth`` whole numbers >= 1, ``tune`` and ``random_seed`` whole numbers
    >= 0, ``target_accept`` strictly between 0 and 1, ``mass_matrix`` one of
    :data:`MASS_MATRICES` (``"dense"`` was sampled with the diagonal one without a word),
    ``sampler`` one of :data:`SAMPLERS`, ``progressbar`` true or false (the command line's
    argument types refuse the same). Raises ``ValueError`` naming the entry and the value."""
    for key, least in (("draws", 1), ("chains", 1), ("tune", 0), ("random_seed", 0), ("max_treedepth", 1)):
        value = config[key]
        if not (_is_number(value) and float(value).is_integer() and value >= least):
            raise ValueError(f"sampler configuration {key!r} must be a whole number >= {least}; got {value!r}")
    value = config["target_accept"]
    if not (_is_number(value) and 0.0 < value < 1.0):
        raise ValueError(f"sampler configuration 'target_accept' must lie strictly between 0 and 1; got {value!r}")
    for key, allowed in (("mass_matrix", MASS_MATRICES), ("sampler", SAMPLERS)):
        if config[key] not in allowed:
            raise ValueError(f"unknown {key.replace('_', ' ')} {config[key]!r}; expected one of {allowed}")
    if not isinstance(config["progressbar"], bool):
        raise ValueError(f"sampler configuration 'progressbar' must be true or false; got {config['progressbar']!r}")


#: Model-config entries that only one parameterisation reads: a section, or one entry of it.
PARAMETERISATION_ENTRIES: dict[str, tuple[str, ...]] = {
    "mechanistic": ("log_stiffness", "size_exponent"),
    "phenomenological": ("damping_ratio", "time_scale.log_sigma"),
}


def unused_entries(config: Mapping[str, Any], parameterisation: str) -> list[str]:
    """The entries of the merged ``config`` set away from their defaults that ``parameterisation``
    does not read (:data:`PARAMETERISATION_ENTRIES` of the other form), as ``"section.key"``."""
    out = []
    for form, names in PARAMETERISATION_ENTRIES.items():
        if form == parameterisation:
            continue
        for name in names:
            section, _, key = name.partition(".")
            keys = [key] if key else list(DEFAULT_MODEL_CONFIG[section])
            out += [f"{section}.{k}" for k in keys if config[section].get(k) != DEFAULT_MODEL_CONFIG[section][k]]
    return out


def unused_entries_note(config: Mapping[str, Any], parameterisation: str) -> str | None:
    """The note on :func:`unused_entries` (a fit's notes), or None: a prior set for the other
    parameterisation leaves this fit's priors as they were, which the user should hear."""
    unused = unused_entries(config, parameterisation)
    if not unused:
        return None
    reads = (
        "the prior of each LLM's gain is that of log K (log_stiffness; size_exponent for its "
        "regression on model size), not time_scale.log_sigma or damping_ratio"
        if parameterisation == "mechanistic"
        else "each LLM's damping ratio and frequency have the priors damping_ratio and "
        "time_scale.log_sigma; it has no curvature K (log_stiffness, size_exponent)"
    )
    them = "it" if len(unused) == 1 else "them"
    return (
        f"configuration {', '.join(repr(u) for u in unused)} set, but the {parameterisation} form "
        f"does not read {them} ({reads}): the fit's priors are as without {them}"
    )


def measurement_g_exponent(config: Mapping[str, Any]) -> str | float:
    """How the state-space measurement noise scales with G: ``"alpha"`` (as the SDE noise),
    ``"free"`` (its own exponent, ``config["noise"]["measurement_g_exponent"] = {"mu", "sigma"}``)
    or a fixed number. Raises ``ValueError`` on anything else."""
    value = config["noise"].get("measurement_g_exponent", "alpha")
    if value is None or value == "alpha":
        return "alpha"
    if isinstance(value, Mapping):
        if set(value) != {"mu", "sigma"} or not all(
            isinstance(value[k], int | float) and np.isfinite(value[k]) for k in value
        ) or value["sigma"] <= 0:
            raise ValueError(
                f"configuration 'noise.measurement_g_exponent': a free exponent is "
                f"{{'mu': number, 'sigma': number > 0}}, got {value!r}"
            )
        return "free"
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ValueError(
            "configuration 'noise.measurement_g_exponent' must be 'alpha', a number (e.g. 0 for a "
            f"fixed number of completions per step) or {{'mu': ..., 'sigma': ...}}; got {value!r}"
        )
    return float(value)


def config_hash(*configs: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of the canonical JSON of ``configs``."""
    text = json.dumps([dict(c) for c in configs], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


__all__ = [
    "DEFAULT_MODEL_CONFIG",
    "DEFAULT_SAMPLER_CONFIG",
    "PARAMETERISATIONS",
    "LIKELIHOODS",
    "INVARIANCES",
    "SAMPLERS",
    "merge_config",
    "validate_model_config",
    "validate_sampler_config",
    "setting_in_range",
    "unused_entries",
    "unused_entries_note",
    "config_hash",
]
