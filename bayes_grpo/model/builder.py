"""The PyMC model of DESIGN.md section 3 (both parameterisations, likelihoods, invariances).

Internally rewards are standardised per LLM (``y = (reward - loc_m) / scale_m``, see
:mod:`bayes_grpo.model.prepare`); every reported quantity (``plateau``,
``initial_reward``, ``noise_d``, ``sigma``) is a Deterministic in reward units, and the
iid likelihood is written on the raw rewards so ``observed_data`` holds the real curve.

Variables (dims in brackets):

- ``plateau`` [model], ``initial_reward_model`` [model] (the mean of its runs' initial
  rewards), ``initial_reward`` [run] (the LLM's plus ``initial_reward_run_sd`` times the
  run's ``initial_reward_run_z`` centred within its LLM, i.e. zero-sum offsets; a single
  run's initial reward is its LLM's); with ``reward_bounds`` each of them (and the ``by_group``
  offsets' results) is the image in the bounds of that unbounded level
  (:mod:`bayes_grpo.runset.bounds`), ``initial_reward_model`` then the image of the runs' mean
  latent level;
- mechanistic: ``log_stiffness`` [model] (``log K``), ``log_stiffness_mean``,
  ``log_stiffness_sd`` (population level, when several models), ``size_exponent``
  (regression of ``log K`` on ``log model_size``, when identifiable);
  phenomenological: ``natural_frequency_model`` and ``damping_ratio_model`` [model];
- per run: ``a`` (the gain ``eta K``; ``K_eff`` in the phenomenological form),
  ``M_eff``, ``C_eff``, ``K_eff``, ``zeta``, ``sigma`` (per-step observation sd);
- ``noise_d`` [model] (``D``; see the config docstring for its meaning under each
  likelihood), ``alpha``; state space: ``measurement_sd`` [model] (at the reference G; scaled by ``(G/G_ref)^(-e/2)`` per run, ``e`` = ``alpha`` by default, see :func:`measurement_g_exponent`; ``measurement_alpha`` when ``e`` is free);
- ``invariance="by_group"``: ``group_offset_plateau``, ``group_offset_initial_reward``
  (standardised reward units), ``group_offset_log_stiffness`` or
  ``group_offset_log_frequency``, and ``group_offset_log_damping`` [group], each
  ``group_offset_sigma * z`` with ``z ~ Normal(0, 1)``. The ``group`` dim holds only the
  (model, G) groups of LLMs at two or more known G (``ModelData.offset_groups``, model
  version 8); the runs of an LLM at one G, or of unknown G only, have no offsets (nothing
  of G-invariance is tested on them). With ``centred_offsets=True`` (how the G-invariance
  check samples ``H1``) an offset on a parameter with an LLM level (plateau, initial reward,
  ``log K`` or ``log w0``, ``log zeta``) is drawn through the group's own value
  ``<parameter>_by_group ~ Normal(LLM level, group_offset_sigma)``, the offset and its ``z``
  being deterministics of it: the same prior and likelihood (a linear change of variables of
  unit Jacobian), hence the same posterior and marginal likelihood, with no ridge between the
  LLM level and its groups' offsets (see :func:`_group_offset`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_grpo.dynamics.coefficients import damping_ratio, oscillator_coefficients
from bayes_grpo.dynamics.identifiability import padded_designs, shape_information_log_density
from bayes_grpo.dynamics.trajectory import (
    error_trajectory_on_grid,
    reward_trajectory,
    scheduled_error_trajectory,
)
from bayes_grpo.model.config import measurement_g_exponent
from bayes_grpo.model.kalman import kalman_loglik
from bayes_grpo.model.prepare import ModelData, group_model, prior_centres, size_regression_note
from bayes_grpo.runset.bounds import CENTRE_MARGIN, bounded_value, latent_value
from bayes_grpo.runset.core import RunSetError
from bayes_grpo.runset.schema import readable_group_size

#: Name of the phenomenological form's shape-information potential (the prior's Jeffreys weight;
#: ``GRPODynamicsModel.sample_prior_predictive`` resamples prior draws by it).
SHAPE_WEIGHT_POTENTIAL: str = "damping_shape_information"


def regular_grid(steps: np.ndarray, rtol: float = 1e-9) -> tuple[float, float] | None:
    """``(t0, dt)`` when ``steps`` (shape ``(n_steps,)``) is evenly spaced, else ``None``."""
    steps = np.asarray(steps, dtype=float)
    if steps.size < 2:
        return None
    diffs = np.diff(steps)
    dt = float(diffs[0])
    if dt <= 0 or not np.allclose(diffs, dt, rtol=rtol, atol=0.0):
        return None
    return float(steps[0]), dt


def build_pymc_model(
    data: ModelData,
    config: dict[str, Any],
    *,
    parameterisation: str = "mechanistic",
    likelihood: str = "iid",
    invariance: str = "shared",
    centred_offsets: bool = False,
    reward_bounds: tuple[float, float] | None = None,
) -> pm.Model:
    """Build the hierarchical PyMC model for prepared data (see the module docstring).

    ``reward_bounds`` ``(lo, hi)`` (reward units): the plateau and initial reward of every LLM,
    run and group are the images in ``(lo, hi)`` of the unbounded model's levels
    (:func:`bayes_grpo.runset.bounds.bounded_value`); None is the unbounded model, unchanged."""
    centres = prior_centres(data, config, parameterisation)
    by_group = invariance == "by_group"
    coords = {"run": data.run_ids, "model": data.models, "obs": np.arange(len(data.obs_y))}
    if by_group:
        if not data.offset_groups:
            raise RunSetError(
                "invariance='by_group' needs an LLM run at two or more known group sizes (only their "
                "groups get H1 offsets); the known G of each LLM's runs: "
                f"{ {m: sorted({readable_group_size(g) for g in data.group_g[data.group_model_idx == i] if np.isfinite(g)}) for i, m in enumerate(data.models)} }"
            )
        coords["group"] = data.offset_groups
    gos = float(config["group_offset_sigma"])

    with pm.Model(coords=coords) as model:
        # Every data-derived array enters as pm.Data (a shared variable), so models of the
        # same structure compile to the same C code whatever the data: PyTensor's module
        # cache then makes refits (tests, calibration, CLI) cheap.
        d = _data_containers(data, config, centres, parameterisation, likelihood, by_group, centred_offsets, reward_bounds)
        mi, gi = d["model_idx"], d.get("offset_idx")
        # --- plateau and initial reward (standardised units) -------------------------
        z_p = pm.Normal("plateau_z", 0.0, 1.0, dims="model")
        plateau_m = d["late"] + config["plateau"]["sigma"] * z_p
        z_r0 = pm.Normal("initial_reward_z", 0.0, 1.0, dims="model")
        r0_m = d["early"] + config["initial_reward"]["sigma"] * z_r0
        tau_r0 = pm.HalfNormal("initial_reward_run_sd", config["initial_reward"]["run_sigma"])
        z_r0_run = pm.Normal("initial_reward_run_z", 0.0, 1.0, dims="run")
        plateau_run = plateau_m[mi]
        # Run-level offsets sum to zero within each LLM (a per-LLM ZeroSumNormal: z_r is
        # N(0, 1) marginally), so R0_m is the mean of its runs' R0: otherwise R0_m and the
        # common part of its runs' offsets form a ridge that NUTS mixes slowly along (bulk
        # ESS ~20 for R0_m). A single-run LLM has no offset (factor 0).
        # each LLM's mean of z as a sum of products, not pt.dot: the dot became a Gemv, which
        # PyTensor runs in Python without a linked BLAS (and warns of on every fit from pip)
        llm_mean = (d["run_mean_matrix"] * z_r0_run[None, :]).sum(axis=1)
        z_centred = (z_r0_run - llm_mean[mi]) * d["run_offset_factor"]
        r0_run = r0_m[mi] + tau_r0 * z_centred
        if by_group:
            owner = d["offset_owner"] if centred_offsets else None
            plateau_run = plateau_run + _group_offset("group_offset_plateau", gos, gi, plateau_m, owner)
            r0_run = r0_run + _group_offset("group_offset_initial_reward", gos, gi, r0_m, owner)
        if reward_bounds is not None:
            # the levels above are latent (their priors, offsets and H1 offsets as without bounds):
            # each is mapped onto the bounds, here in standardised units (the map commutes with them)
            lo, hi = d["bound_lo"], d["bound_hi"]
            plateau_m, r0_m = (bounded_value(v, lo, hi, pt.sigmoid) for v in (plateau_m, r0_m))
            plateau_run, r0_run = (bounded_value(v, lo[mi], hi[mi], pt.sigmoid) for v in (plateau_run, r0_run))
        loc = d["loc"][mi]
        scale = d["scale"][mi]
        pm.Deterministic("plateau", d["loc"] + d["scale"] * plateau_m, dims="model")
        pm.Deterministic("initial_reward_model", d["loc"] + d["scale"] * r0_m, dims="model")
        pm.Deterministic("initial_reward", loc + scale * r0_run, dims="run")
        pm.Deterministic("plateau_run", loc + scale * plateau_run, dims="run")

        # --- dynamics --------------------------------------------------------------
        if parameterisation == "mechanistic":
            mass, damp, k_eff = _mechanistic(data, d, config, centres, by_group, gos, centred_offsets)
        else:
            mass, damp, k_eff = _phenomenological(data, d, config, by_group, gos, centred_offsets)
        pm.Deterministic("M_eff", mass, dims="run")
        pm.Deterministic("C_eff", damp, dims="run")
        pm.Deterministic("K_eff", k_eff, dims="run")
        pm.Deterministic("zeta", damping_ratio(mass, damp, k_eff), dims="run")

        # --- noise -----------------------------------------------------------------
        alpha_cfg = config["alpha"]
        if alpha_cfg.get("fixed") is not None:
            alpha = pm.Deterministic("alpha", pt.as_tensor_variable(float(alpha_cfg["fixed"])))
        else:
            alpha = pm.Normal("alpha", alpha_cfg["mu"], alpha_cfg["sigma"])
        g_factor = d["g_ratio"] ** (-alpha)  # (G_r / G_ref)^-alpha, 1 for unknown G
        log_sd = float(config["noise"]["log_sigma"])
        z_noise = pm.Normal("noise_z", 0.0, 1.0, dims="model")
        if likelihood == "iid":
            sigma_ref = d["noise_guess"] * pt.exp(log_sd * z_noise)  # per-step sd at G_ref
            d_m = sigma_ref**2 * d["g_ref"] ** alpha
            sigma_run = sigma_ref[mi] * pt.sqrt(g_factor)
        else:
            d_std = pt.exp(d["log_d0"] + log_sd * z_noise)  # at G_ref
            d_m = d_std * d["g_ref"] ** alpha
            q_run = d_std[mi] * g_factor
            # Measurement noise at G_ref, scaled by G^-e per run (measurement_g_exponent:
            # by default e = alpha, the logged reward being a mean over G completions of each
            # of a fixed number of prompts).
            meas = pm.HalfNormal("measurement_sd_z", 1.0, dims="model") * (config["noise"]["measurement_sigma"] * d["noise_guess"])
            pm.Deterministic("measurement_sd", meas * d["scale"], dims="model")
            meas_exponent = measurement_g_exponent(config)
            if meas_exponent == "alpha":
                meas_g_factor = g_factor
            elif meas_exponent == "free":
                spec = config["noise"]["measurement_g_exponent"]
                meas_g_factor = d["g_ratio"] ** (-pm.Normal("measurement_alpha", float(spec["mu"]), float(spec["sigma"])))
            else:
                meas_g_factor = d["g_ratio"] ** (-float(meas_exponent))
            meas_var_run = meas[mi] ** 2 * meas_g_factor
            stat_var = q_run / (2.0 * pt.abs(damp) * k_eff)
            sigma_run = pt.sqrt(stat_var + meas_var_run)
        pm.Deterministic("noise_d", d_m * d["scale"] ** 2, dims="model")
        pm.Deterministic("sigma", sigma_run * scale, dims="run")

        # --- likelihood ------------------------------------------------------------
        if likelihood == "iid":
            # Evaluate on the dense (run, step) grid by broadcasting (cheap gradients, no
            # per-observation gathers), then pick the observed entries with one flat index.
            col = lambda v: v[:, None]  # noqa: E731
            if "lr_multiplier" in d:
                # Runs on a logged schedule: the law on each run's rates, interval by interval
                # (prefix products of exact transitions; constant-rate runs have multiplier 1).
                err = scheduled_error_trajectory(data.steps, d["lr_multiplier"], mass, damp, k_eff, r0_run - plateau_run, d["schedule_lag"])
                mu = col(plateau_run) + err
            elif "grid_dt" in d:
                # Regular grid (the usual log; detected once, in _data_containers): baby-step
                # giant-step, O(sqrt T) transcendentals per run, same values as the closed form.
                err = error_trajectory_on_grid(len(data.steps), d["grid_dt"], mass, damp, k_eff, r0_run - plateau_run, 0.0, d["grid_t0"])
                mu = col(plateau_run) + err
            else:
                mu = reward_trajectory(d["steps"][None, :], col(mass), col(damp), col(k_eff), col(plateau_run), col(r0_run))
            mu_raw = col(loc) + col(scale) * mu
            sd_raw = col(scale * sigma_run) + pt.zeros_like(mu)
            flat = d["obs_flat"]
            pm.Normal("reward", mu=mu_raw.flatten()[flat], sigma=sd_raw.flatten()[flat], observed=d["obs_reward"], dims="obs")
        else:
            y_err = d["y_std"] - plateau_run[:, None]
            ll = kalman_loglik(
                y_err, d["mask"], None, mass, damp, k_eff, q_run, meas_var_run, r0_run - plateau_run,
                intervals=(d["dt_unique"], d["dt_index"]),
            )
            pm.Potential("reward_state_space", ll + d["jacobian"])
    model.bayes_grpo_centres = centres  # type: ignore[attr-defined]
    return model


def _data_containers(
    data: ModelData,
    config: dict[str, Any],
    centres: dict[str, Any],
    parameterisation: str,
    likelihood: str,
    by_group: bool = False,
    centred_offsets: bool = False,
    reward_bounds: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """``pm.Data`` for every data-derived array the graph uses (names prefixed ``data_``).

    With ``reward_bounds``: each LLM's bounds in its standardised units (``bound_lo``,
    ``bound_hi``), and the early / late guesses that centre the priors as latent levels whose
    images are those guesses (:func:`bayes_grpo.runset.bounds.latent_value`)."""
    mi = data.model_idx
    g_run = np.where(np.isfinite(data.group_size), data.group_size, centres["g_ref"][mi])
    arrays: dict[str, np.ndarray] = {
        "model_idx": mi,
        "late": data.late,
        "early": data.early,
        "loc": data.loc,
        "scale": data.scale,
        "noise_guess": data.noise_guess,
        "g_ref": centres["g_ref"],
        "g_ratio": g_run / centres["g_ref"][mi],
        "steps": data.steps,
        **_run_offset_arrays(mi, data.n_models),
    }
    if reward_bounds is not None:
        lo, hi = ((b - data.loc) / data.scale for b in reward_bounds)
        arrays |= {
            "bound_lo": lo,
            "bound_hi": hi,
            "late": latent_value(data.late, lo, hi, CENTRE_MARGIN),
            "early": latent_value(data.early, lo, hi, CENTRE_MARGIN),
        }
    if by_group:
        # each run's position in the offset groups; a run whose group has none points one past
        # the end, at the zero _group_offset appends
        offset_groups = data.offset_groups
        labels = [data.groups[g] for g in data.group_idx]
        arrays["offset_idx"] = np.array(
            [offset_groups.index(lab) if lab in offset_groups else len(offset_groups) for lab in labels], dtype=int
        )
        if centred_offsets:
            # the LLM of each offset group (the centred offsets' prior mean is its level)
            arrays["offset_owner"] = np.array([list(data.models).index(group_model(lab)) for lab in offset_groups], dtype=int)
    if parameterisation == "mechanistic":
        arrays |= {
            "eta_eff": data.eta_eff,
            "momentum": data.momentum,
            "k_ref": data.k_ref,
            "log_k_centre": np.asarray(centres["log_k_centre"]),
            "x_size": centres["x_size"],
            "log_k_sd_scale": np.asarray(max(config["log_stiffness"]["between_models_sigma"], 2.0 * centres["log_k_spread"])),
        }
    else:
        arrays["log_w0_guess"] = np.log(centres["w0"])
        if config["damping_ratio"].get("shape_information_weight"):
            arrays["shape_t"], arrays["shape_weight"] = _shape_designs(data)
    if likelihood == "iid" and data.lr_multiplier is not None:
        arrays["lr_multiplier"] = data.lr_multiplier
        # the lag that moves M and C with the rate: K_ref (mechanistic); none in the
        # phenomenological form, whose M and C are free of the rate
        arrays["schedule_lag"] = data.k_ref if parameterisation == "mechanistic" else np.zeros(data.n_runs)
    if likelihood == "iid":
        grid = regular_grid(data.steps)
        if grid is not None:
            arrays["grid_t0"], arrays["grid_dt"] = np.asarray(grid[0]), np.asarray(grid[1])
        arrays["obs_flat"] = data.obs_run * len(data.steps) + data.obs_step_idx
        arrays["obs_reward"] = data.reward[data.obs_run, data.obs_step_idx]
    else:
        from bayes_grpo.model.kalman import grid_intervals

        if parameterisation == "mechanistic":
            c0 = np.array([np.median(1.0 - data.momentum[mi == m]) for m in range(data.n_models)])
            k0 = centres["a0"]
        else:
            c0, k0 = 2.0 * centres["w0"], centres["w0"] ** 2
        y = (data.reward - data.loc[mi][:, None]) / data.scale[mi][:, None]
        mask = np.isfinite(y)
        unique_dt, index = grid_intervals(data.steps)
        arrays |= {
            "log_d0": np.log(2.0 * data.noise_guess**2 * c0 * k0),
            "y_std": np.where(mask, y, 0.0),
            "mask": mask.astype(float),
            "dt_unique": unique_dt,
            "dt_index": index,
            "jacobian": np.asarray(-float(np.sum(np.log(data.scale[mi]) * mask.sum(axis=1)))),
        }
    # Static shapes: PyTensor then drops its run-time broadcast checks (hundreds of tiny
    # nodes in the gradient); the compiled code is still shared across data values.
    shapes = {name: np.shape(value) for name, value in arrays.items()}
    if reward_bounds is not None and shapes["model_idx"] == (1,):
        # one run with reward bounds: a static model_idx of length 1 with the bounds' made
        # PyTensor 2.38's FusionOptimizer fail on the graph of the levels (KeyError:
        # data_bound_hi), which it logged as an ERROR with its traceback on every fit before
        # skipping that rewrite; a free length leaves every other fit's graph as it was
        shapes["model_idx"] = (None,)
    return {name: pm.Data(f"data_{name}", value, shape=shapes[name]) for name, value in arrays.items()}


def _group_offset(name: str, gos: float, offset_idx: Any, level: Any = None, owner: Any = None) -> Any:
    """Per-run ``H1`` offset: ``gos * z`` [group] (the deterministic ``name``, its ``z`` the free
    ``name + "_z"``) at each run's group, 0 for a run whose group has no offset (``offset_idx``
    one past the end).

    Centred (``owner``, each group's LLM, given with ``level`` [model]): the free variable is the
    group's value ``v ~ Normal(level[owner], gos)`` (named ``name`` less ``group_offset_`` plus
    ``_by_group``), the offset ``v - level[owner]`` and ``z`` its deterministics: the same joint
    prior. A group's value is what its runs pin down; as ``level + gos * z`` the level and the
    offsets of all its groups form a ridge (posterior correlations -0.96 to -0.998 on the demo's
    runs) that a diagonal mass matrix crosses only with trees of 512 leapfrog steps.
    """
    if owner is None:
        off = pm.Deterministic(name, gos * pm.Normal(f"{name}_z", 0, 1, dims="group"), dims="group")
    else:
        centre = level[owner]
        value = pm.Normal(name.replace("group_offset_", "") + "_by_group", centre, gos, dims="group")
        off = pm.Deterministic(name, value - centre, dims="group")
        pm.Deterministic(f"{name}_z", off / gos, dims="group")
    return pt.concatenate([off, pt.zeros((1,))])[offset_idx]


def _shape_designs(data) -> tuple[np.ndarray, np.ndarray]:
    """``(n_models, p)`` design times of each LLM (its runs' observed steps) and their weights."""
    finite = np.isfinite(data.reward)
    return padded_designs(data.steps[finite[data.model_idx == m].any(axis=0)] for m in range(data.n_models))


def _run_offset_arrays(model_idx: np.ndarray, n_models: int) -> dict[str, np.ndarray]:
    """Arrays of the per-LLM zero-sum run offsets.

    ``run_mean_matrix`` [model, run]: ``1 / n_m`` where run ``r`` belongs to LLM ``m`` (so
    ``matrix @ z`` is each LLM's mean of ``z``); ``run_offset_factor`` [run]:
    ``sqrt(n_m / (n_m - 1))`` (restores unit marginal variance after centring), 0 for an LLM
    with one run.
    """
    counts = np.bincount(model_idx, minlength=n_models).astype(float)
    matrix = np.zeros((n_models, model_idx.size))
    matrix[model_idx, np.arange(model_idx.size)] = 1.0 / counts[model_idx]
    n = counts[model_idx]
    factor = np.where(n >= 2, np.sqrt(n / np.maximum(n - 1.0, 1.0)), 0.0)
    return {"run_mean_matrix": matrix, "run_offset_factor": factor}


def _mechanistic(data, d, config, centres, by_group, gos, centred_offsets=False):
    """Per-run ``(M, C, K_eff)`` from ``log K_m`` and each run's hyperparameters."""
    ls = config["log_stiffness"]
    delta = pm.Normal("log_stiffness_delta", 0.0, 1.0)
    mean = pm.Deterministic("log_stiffness_mean", d["log_k_centre"] + ls["mean_sigma"] * delta)
    centre = mean + pt.zeros_like(d["late"])
    if centres["use_size"]:
        se = config["size_exponent"]
        beta = pm.Normal("size_exponent", se["mu"], se["sigma"])
        centre = centre + beta * d["x_size"]
    if data.n_models > 1:
        sd = pm.HalfNormal("log_stiffness_sd", d["log_k_sd_scale"])
        if ls["centred"]:
            # Whole runs pin each model's stiffness: the centred form avoids the funnel
            # that the non-centred one has between sd and z when the data are informative.
            # The sampler starts each model at its own data-derived centre (gain a0 at its runs'
            # typical step), not at the population mean: LLMs trained at steps decades apart
            # (Adam 1e-6 next to SGD 1e-2) put the mean's gain past the stability threshold for
            # some of them, where the trajectory explodes (log density ~ -1e54) and a chain stuck
            # there never leaves. Only the starting point: the prior is unchanged.
            own_centre = np.log(centres["a0"] / centres["eta_ref"])
            log_k = pm.Normal("log_stiffness", centre, sd, dims="model", initval=own_centre)
        else:
            z = pm.Normal("log_stiffness_z", 0.0, 1.0, dims="model")
            log_k = pm.Deterministic("log_stiffness", centre + sd * z, dims="model")
    else:
        log_k = pm.Deterministic("log_stiffness", centre, dims="model")
    log_k_run = log_k[d["model_idx"]]
    if by_group:
        owner = d["offset_owner"] if centred_offsets else None
        log_k_run = log_k_run + _group_offset("group_offset_log_stiffness", gos, d["offset_idx"], log_k, owner)
    a = pm.Deterministic("a", d["eta_eff"] * pt.exp(log_k_run), dims="run")
    mass, damp, k_eff = oscillator_coefficients(a, d["momentum"], d["k_ref"])
    if by_group:
        # no LLM level here (the damping follows from the momentum): no ridge, offsets as they are
        damp = damp * pt.exp(_group_offset("group_offset_log_damping", gos, d["offset_idx"]))
    return mass, damp, k_eff


def _phenomenological(data, d, config, by_group, gos, centred_offsets=False):
    """Per-run ``(M = 1, C = 2 zeta w0, K_eff = w0^2)`` from free per-model ``zeta, w0``."""
    ts = config["time_scale"]
    dr = config["damping_ratio"]
    log_w0 = d["log_w0_guess"] + ts["log_sigma"] * pm.Normal("log_frequency_z", 0.0, 1.0, dims="model")
    log_zeta = dr["log_mu"] + dr["log_sigma"] * pm.Normal("log_damping_ratio_z", 0.0, 1.0, dims="model")
    pm.Deterministic("natural_frequency_model", pt.exp(log_w0), dims="model")
    pm.Deterministic("damping_ratio_model", pt.exp(log_zeta), dims="model")
    if dr.get("shape_information_weight"):
        # Jeffreys' density of the curve shape on each LLM's design: the prior counts
        # distinguishable curves, not (log zeta, log w0) volume (dynamics/identifiability.py)
        pm.Potential(
            SHAPE_WEIGHT_POTENTIAL,
            shape_information_log_density(log_zeta, log_w0, d["shape_t"], d["shape_weight"]).sum(),
        )
    log_w0_run = log_w0[d["model_idx"]]
    log_zeta_run = log_zeta[d["model_idx"]]
    if by_group:
        owner = d["offset_owner"] if centred_offsets else None
        log_w0_run = log_w0_run + _group_offset("group_offset_log_frequency", gos, d["offset_idx"], log_w0, owner)
        log_zeta_run = log_zeta_run + _group_offset("group_offset_log_damping", gos, d["offset_idx"], log_zeta, owner)
    w0 = pt.exp(log_w0_run)
    k_eff = pm.Deterministic("a", w0**2, dims="run")
    mass = pt.ones_like(w0)
    damp = 2.0 * pt.exp(log_zeta_run) * w0
    return mass, damp, k_eff


__all__ = ["build_pymc_model", "prior_centres", "regular_grid", "size_regression_note"]
