"""A new run's initial reward carries the run-level offset: ``coefficient_draws`` draws it.

No sampling: a ``GRPODynamicsModel`` gets prepared data for a small simulated run set and a
hand-made posterior (the variables ``coefficient_draws`` reads), so the spread of the
predictive ``R0`` can be compared with what the model says it must be.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest
import xarray as xr

from bayes_grpo.dynamics.simulate import simulate_sde_runset
from bayes_grpo.model import GRPODynamicsModel
from bayes_grpo.model.prepare import prepare_data

CHAINS, DRAWS = 4, 2500
SETTING = dict(learning_rate=1e-4, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=4)


def _fitted_stand_in(r0_model: np.ndarray, run_sd: np.ndarray) -> GRPODynamicsModel:
    """A model whose posterior has the given LLM-level R0 and run-level sd draws (chain, draw)."""
    runset = simulate_sde_runset(
        models={"m": {"stiffness": 400.0, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 1e-12, "model_size": 1e9}},
        group_sizes=(4,),
        learning_rates=(1e-4, 2e-4),
        momentum=0.9,
        convention="ema",
        n_seeds=1,
        n_steps=40,
        measurement_sd=0.05,
        random_seed=0,
    )
    model = GRPODynamicsModel()
    model.runset = runset
    model.data = prepare_data(runset, model.model_config, model.parameterisation)
    rng = np.random.default_rng(5)
    shape = (CHAINS, DRAWS)

    def per_model(x: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
        return ("chain", "draw", "model"), np.asarray(x, dtype=float).reshape(*shape, 1)

    post = xr.Dataset(
        {
            "log_stiffness": per_model(np.log(400.0) + 0.05 * rng.standard_normal(shape)),
            "plateau": per_model(0.75 + 0.01 * rng.standard_normal(shape)),
            "initial_reward_model": per_model(r0_model),
            "noise_d": per_model(np.full(shape, 1e-4)),
            "alpha": (("chain", "draw"), np.ones(shape)),
            "initial_reward_run_sd": (("chain", "draw"), run_sd),
        },
        coords={"chain": np.arange(CHAINS), "draw": np.arange(DRAWS), "model": ["m"]},
    )
    model.idata = az.InferenceData(posterior=post)
    return model


def test_a_new_runs_initial_reward_spread_includes_the_run_level_sd():
    shape = (CHAINS, DRAWS)
    rng = np.random.default_rng(1)
    r0_model = 0.15 + 0.01 * rng.standard_normal(shape)  # LLM-level uncertainty, sd 0.01
    run_sd = np.abs(0.2 + 0.05 * rng.standard_normal(shape))  # standardised units
    model = _fitted_stand_in(r0_model, run_sd)
    scale = float(model.data.scale[0])
    assert scale != 1.0  # the offset is in standardised units: the scale must enter

    new = model.coefficient_draws(**SETTING, random_seed=7)
    r0 = new["initial_reward"].values
    offset = r0 - r0_model
    # per draw, the offset is N(0, scale * initial_reward_run_sd * sqrt(1 + 1/n)) for an LLM
    # fitted on n runs (initial_reward_model is their mean): standardised it is N(0, 1)
    n_runs = model.runset.sizes["run"]
    assert n_runs == 2
    run_sd = run_sd * np.sqrt(1.0 + 1.0 / n_runs)
    z = (offset / (scale * run_sd)).ravel()
    assert abs(z.mean()) < 4 / np.sqrt(z.size)
    assert abs(z.std() - 1.0) < 0.03
    # so the predictive spread of R0 is the LLM-level spread plus the run-level one
    expected_sd = np.sqrt(r0_model.var() + scale**2 * np.mean(run_sd**2))
    assert r0.std() == pytest.approx(expected_sd, rel=0.03)
    assert r0.std() > 3 * r0_model.std()

    # the LLM-level mean on request; nothing else changes with the offset
    mean_only = model.coefficient_draws(**SETTING, random_seed=7, run_offset=False)
    np.testing.assert_array_equal(mean_only["initial_reward"].values, r0_model)
    for name in ("a", "M_eff", "C_eff", "K_eff", "plateau", "sigma"):
        np.testing.assert_array_equal(new[name].values, mean_only[name].values)


def test_the_new_run_offset_is_reproducible_by_seed():
    shape = (CHAINS, DRAWS)
    model = _fitted_stand_in(np.full(shape, 0.15), np.full(shape, 0.2))
    first = model.coefficient_draws(**SETTING, random_seed=3)["initial_reward"].values
    again = model.coefficient_draws(**SETTING, random_seed=3)["initial_reward"].values
    other = model.coefficient_draws(**SETTING, random_seed=4)["initial_reward"].values
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)
    # trajectories start at the same new-run R0 (trajectory_draws passes the seed through)
    traj = model.trajectory_draws(np.arange(5), **SETTING, random_seed=3)
    np.testing.assert_allclose(traj.isel(step=0).values, first)


def test_an_unknown_group_size_gives_the_noise_of_the_llms_reference_g_not_nan():
    # the fit gives a run of unknown G the LLM's reference G; coefficient_draws (forecast
    # priors, predict) took G = NaN at its word and returned sigma = NaN in every draw
    shape = (CHAINS, DRAWS)
    model = _fitted_stand_in(np.full(shape, 0.15), np.full(shape, 0.2))
    setting = {k: v for k, v in SETTING.items() if k != "group_size"}
    unknown = model.coefficient_draws(**setting, group_size=float("nan"), random_seed=3)
    reference = model.coefficient_draws(**setting, group_size=None, random_seed=3)
    assert np.isfinite(unknown["sigma"].values).all()
    np.testing.assert_array_equal(unknown["sigma"].values, reference["sigma"].values)


def test_a_run_of_unknown_group_size_is_forecast_from_the_posterior_its_fit_gave():
    # the fit takes such a run (G = the LLM's reference G); forecast --prior refused it
    # ("lacks ['group_size']") and coefficient_draws gave it sigma = NaN
    from bayes_grpo.predict.forecast import population_prior_for_run

    shape = (CHAINS, DRAWS)
    model = _fitted_stand_in(np.full(shape, 0.15), np.full(shape, 0.2))
    runset = model.runset.copy()
    run = str(runset["run"].values[0])
    runset["group_size"] = runset["group_size"].where(runset["run"] != run)
    prior, _ = population_prior_for_run(runset, run, posterior=model)
    assert np.isfinite(prior.mean).all() and np.isfinite(prior.cov).all()
