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
from collections.abc import Mapping
from typing import Any

import numpy as np

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
    # Response time relative to run length: a_m centred on (1 - mu) / (fraction * T),
    # log-normal with sd log_sigma (natural log).
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
    # Values used for runs whose coordinate is unknown (NaN / ""); None = no default, so
    # the mechanistic form raises naming the runs. group_size None: unknown G -> G^alpha = 1.
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
    "sampler": "pymc",
    "random_seed": 0,
    "progressbar": True,
}


def merge_config(default: Mapping[str, Any], user: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge ``user`` into ``default``: top-level keys replace, dict values merge with ``|``.

    Unknown top-level keys raise ``ValueError`` (a typo must not silently fall back to a
    default prior).
    """
    out = copy.deepcopy(dict(default))
    for key, value in (user or {}).items():
        if key not in out:
            raise ValueError(f"unknown configuration key {key!r}; known keys: {sorted(out)}")
        if isinstance(out[key], dict) and isinstance(value, Mapping):
            unknown = set(value) - set(out[key])
            if unknown:
                raise ValueError(f"configuration {key!r}: unknown entries {sorted(unknown)}; known: {sorted(out[key])}")
            out[key] = out[key] | dict(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


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
    "config_hash",
]
