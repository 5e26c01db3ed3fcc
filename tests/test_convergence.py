"""Convergence diagnostics name the problem: per variable, and per run when only some runs' chains disagree."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import xarray as xr

from bayes_grpo.model.convergence import RHAT_MAX, convergence_check, run_r_hat

CHAINS, DRAWS, RUNS = 4, 500, ["r0", "r1", "r2"]


def _idata(mode_shift: float) -> az.InferenceData:
    """Well-mixed draws, except run r2's zeta, whose chains sit in two modes ``mode_shift`` apart."""
    rng = np.random.default_rng(0)
    shape = (CHAINS, DRAWS, len(RUNS))
    zeta = 0.5 + 0.05 * rng.standard_normal(shape)
    zeta[2:, :, 2] += mode_shift  # chains 2 and 3: the other mode, on r2 only
    post = xr.Dataset(
        {
            "zeta": (("chain", "draw", "run"), zeta),
            "a": (("chain", "draw", "run"), 0.01 + 0.001 * rng.standard_normal(shape)),
            "noise_z": (("chain", "draw"), rng.standard_normal((CHAINS, DRAWS))),
        },
        coords={"chain": np.arange(CHAINS), "draw": np.arange(DRAWS), "run": RUNS},
    )
    stats = xr.Dataset(
        {
            "diverging": (("chain", "draw"), np.zeros((CHAINS, DRAWS), dtype=bool)),
            "energy": (("chain", "draw"), rng.standard_normal((CHAINS, DRAWS))),
            "tree_depth": (("chain", "draw"), np.full((CHAINS, DRAWS), 3)),
        },
        coords={"chain": np.arange(CHAINS), "draw": np.arange(DRAWS)},
    )
    return az.InferenceData(posterior=post, sample_stats=stats)


def test_a_well_mixed_posterior_passes_and_every_run_has_r_hat_near_one():
    idata = _idata(0.0)
    check = convergence_check(idata)
    assert check.passed, check.summary
    per_run = run_r_hat(idata.posterior)
    assert list(per_run.index) == RUNS and (per_run < RHAT_MAX).all()


def test_one_bimodal_run_is_named_and_the_others_are_cleared():
    idata = _idata(1.0)
    per_run = run_r_hat(idata.posterior)
    assert per_run["r2"] > 1.5 and (per_run[["r0", "r1"]] < RHAT_MAX).all()
    check = convergence_check(idata)
    assert not check.passed
    runs_line = [a for a in check.values["advice"] if "Per run" in a]
    assert runs_line and "1 of 3 runs: r2 (" in runs_line[0]
    assert "r0" not in runs_line[0] and "r1" not in runs_line[0]


def test_per_run_r_hat_needs_two_chains():
    idata = _idata(0.0)
    one = az.InferenceData(posterior=idata.posterior.isel(chain=[0]), sample_stats=idata.sample_stats.isel(chain=[0]))
    assert run_r_hat(one.posterior).isna().all()


def test_a_variable_constant_for_one_run_is_checked_on_the_others_without_numpy_warnings():
    # M_eff = (1 + mu)/2 of a run with k_ref = 0 is the same in every draw, while the lagged
    # runs' M_eff vary: arviz's R-hat divided 0 by 0 and warned into the output of `fit`
    idata = _idata(1.0)
    post = idata.posterior
    m_eff = 0.75 + 0.01 * post["a"].copy()
    m_eff[..., 0] = 0.75
    idata.posterior["M_eff"] = m_eff
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        check = convergence_check(idata)
        per_run = run_r_hat(idata.posterior)
    assert "M_eff" in check.table.index  # its other runs are still checked
    assert not check.passed and per_run["r2"] > 1.5 and (per_run[["r0", "r1"]] < RHAT_MAX).all()


def test_a_variable_of_tiny_values_is_checked_not_taken_for_a_constant():
    # the noise D of rewards on a 0-0.001 scale is ~1e-9: its chains disagreeing must be reported
    idata = _idata(0.0)
    rng = np.random.default_rng(1)
    d = 1e-9 * (1.0 + 0.1 * rng.standard_normal((CHAINS, DRAWS)))
    d[2:] *= 3.0  # chains 2 and 3 elsewhere
    idata.posterior["noise_d"] = (("chain", "draw"), d)
    check = convergence_check(idata)
    assert "noise_d" in check.table.index
    assert not check.passed and "noise_d" in check.summary


def test_a_misspelt_variable_is_refused_not_reported_converged():
    # convergence_check(var_names=["zta"]) checked nothing and said "Converged: R-hat <= nan"
    import pytest

    idata = _idata(1.0)
    for names, named in ((["zta"], "'zta'"), (["zeta", "zta"], "'zta'"), ([], "no posterior variable")):
        with pytest.raises(ValueError, match=named) as err:
            convergence_check(idata, var_names=names)
        assert "'zeta'" in str(err.value)  # the posterior's variables are listed
    assert not convergence_check(idata, var_names=["zeta"]).passed


def test_a_variable_with_non_finite_draws_is_reported_not_left_out():
    # a variable with one overflowing draw was skipped as if it were a constant, and a fit whose
    # other variables mixed read "Converged"
    idata = _idata(0.0)
    zeta = idata.posterior["zeta"].values.copy()
    zeta[1, 7, 0] = np.inf
    zeta[3, 9, 2] = np.nan
    idata.posterior["zeta"] = (("chain", "draw", "run"), zeta)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        check = convergence_check(idata)
    assert not check.passed
    assert check.values["nonfinite_draws"] == {"zeta": 2}
    assert "zeta (2 of 6000 values)" in check.summary
    assert "zeta" in check.table.index  # its finite elements (run r1) are still checked
    assert np.isfinite(check.table.loc["zeta", "r_hat"])


def test_a_fit_failing_only_on_variables_no_data_inform_says_so():
    """A single-run, single-G fit (`fit single.nc --draws 100 --tune 100 --chains 2`) failed its
    check on alpha (one G), initial_reward_run_z and _sd (one run per LLM) among others, and the
    advice read "chains disagree; ... check multimodality" for variables that are their prior
    alone. The advice now names them and what their failure means; the check still fails."""
    rng = np.random.default_rng(1)
    idata = _idata(0.0)
    alpha = rng.standard_normal((CHAINS, DRAWS))
    alpha[2:] += 0.5  # the prior-only variable's chains apart
    idata.posterior["alpha"] = (("chain", "draw"), alpha)
    why = {"alpha": "no LLM has runs at two known G"}
    check = convergence_check(idata, prior_only=why)
    assert not check.passed and any(f.startswith("R-hat") for f in check.values["failed"])
    (line,) = [a for a in check.values["advice"] if "no data of this fit inform" in a]
    assert "inform alpha (no LLM has runs at two known G)" in line, line
    assert "every variable the data inform passes R-hat and ESS" in line, line
    # a data-informed variable failing too: said, not cleared
    zeta = idata.posterior["zeta"].values.copy()
    zeta[2:, :, 2] += 1.0
    idata.posterior["zeta"] = (("chain", "draw", "run"), zeta)
    (line,) = [a for a in convergence_check(idata, prior_only=why).values["advice"] if "no data of this fit inform" in a]
    assert "variables the data inform fail as well" in line, line
    assert not [a for a in convergence_check(idata).values["advice"] if "no data of this fit inform" in a]


def test_a_single_run_single_g_fit_names_its_prior_only_variables():
    """GRPODynamicsModel.prior_only_variables: alpha with one G per LLM, the initial-reward run
    offsets with one run per LLM; none with two G and two runs."""
    import pandas as pd

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.runset import make_runset

    def fitted(group_sizes):
        steps = np.arange(40)
        curves = {f"r{i}": pd.DataFrame({"reward": 0.2 + 0.5 * (1 - np.exp(-steps / (8.0 + i)))}, index=steps) for i in range(len(group_sizes))}
        meta = {f"r{i}": {"model": "m", "group_size": g} for i, g in enumerate(group_sizes)}
        model = GRPODynamicsModel(parameterisation="phenomenological")
        model.runset = make_runset(curves, meta)
        model.data = model._prepare_data(model.runset)
        names = ["alpha", "initial_reward_run_z", "initial_reward_run_sd"]
        model.idata = az.InferenceData(
            posterior=xr.Dataset({n: (("chain", "draw"), np.random.default_rng(0).standard_normal((2, 50))) for n in names})
        )
        return model.prior_only_variables()

    single = fitted([8])
    assert sorted(single) == ["alpha", "initial_reward_run_sd", "initial_reward_run_z"], single
    assert "two known G" in single["alpha"] and "one run" in single["initial_reward_run_z"]
    assert sorted(fitted([8, 8])) == ["alpha"]
    assert fitted([4, 8]) == {}


def test_a_chain_stuck_at_a_far_lower_log_density_is_named_and_not_told_to_draw_more():
    # a fit of TRL runs of one LLM by Adam (lr 4e-3) and SGD (lr 0.3), 2 chains: chain 0 sat at
    # log density -3e14 (step size 4e-10; chain 1 at +833) and the check said only "chains
    # disagree; increase tune/draws", which would not have moved it
    idata = _idata(0.0)
    rng = np.random.default_rng(1)
    lp = 800.0 + 5.0 * rng.standard_normal((CHAINS, DRAWS))
    assert "stuck_chains" in convergence_check(idata).values
    idata.sample_stats["lp"] = (("chain", "draw"), lp)
    assert convergence_check(idata).passed  # mixing chains: a few nats apart
    lp[1] = -3.17e14 + rng.standard_normal(DRAWS)
    idata.sample_stats["lp"] = (("chain", "draw"), lp)
    check = convergence_check(idata)
    assert not check.passed
    assert list(check.values["stuck_chains"]) == ["1"]
    # one chain named in the singular (it said "chain(s) 1" and "Chain(s) 1 (-3.17e+14)")
    assert any(f.startswith("1 chain (1) stuck") for f in check.values["failed"]), check.values["failed"]
    assert "1 chain (1) stuck where the log density is far below that of chain 0" in check.summary
    assert "(median log density per chain: 0: 8" in check.summary and "; 1: -3.17e+14)" in check.summary
    assert "will not help" in check.summary and "(s)" not in check.summary
    # nutpie calls it logp
    stats = idata.sample_stats.rename({"lp": "logp"})
    assert list(convergence_check(az.InferenceData(posterior=idata.posterior, sample_stats=stats)).values["stuck_chains"]) == ["1"]


def test_a_posterior_without_sampler_statistics_is_not_said_to_have_no_divergences():
    # a posterior alone (no sample_stats: divergences never recorded) passed as "Converged: ...,
    # no divergences", and its values counted 0 divergences
    idata = _idata(0.0)
    check = convergence_check(az.InferenceData(posterior=idata.posterior))
    assert "no divergences" not in check.summary
    assert "divergences, tree depth and E-BFMI not checked (no sampler statistics)" in check.summary
    assert check.values["divergences"] is None
    recorded = convergence_check(idata)
    assert "no divergences" in recorded.summary and recorded.values["divergences"] == 0


def test_one_divergence_or_one_transition_at_the_tree_depth_is_counted_in_the_singular():
    # a fit with one divergence read "1 divergent transitions: raise target_accept ..." and one
    # transition at the tree depth "1 transitions hit the maximum tree depth 3"
    idata = _idata(0.0)
    stats = idata.sample_stats
    diverging = np.zeros((CHAINS, DRAWS), dtype=bool)
    diverging[0, 7] = True
    depth = np.full((CHAINS, DRAWS), 3)
    depth[1, 9] = 10
    idata.sample_stats = stats.assign(diverging=(("chain", "draw"), diverging), tree_depth=(("chain", "draw"), depth))
    check = convergence_check(idata, max_treedepth=10)
    assert not check.passed
    assert "1 divergent transition" in check.values["failed"]
    assert "1 transition at the maximum tree depth 10" in check.values["failed"]
    assert "1 divergent transition: raise target_accept" in check.summary, check.summary
    assert "1 transition hits the maximum tree depth 10:" in check.summary, check.summary
    assert "transitions" not in check.summary, check.summary
    # two of each: the plural, as before
    diverging[2, 3] = True
    depth[2, 4] = 10
    idata.sample_stats = stats.assign(diverging=(("chain", "draw"), diverging), tree_depth=(("chain", "draw"), depth))
    check = convergence_check(idata, max_treedepth=10)
    assert "2 divergent transitions: raise" in check.summary and "2 transitions hit the maximum" in check.summary


def test_the_load_warning_of_a_fit_takes_the_remedy_its_convergence_check_gives(tmp_path):
    # the warning of loading a saved fit that did not converge said "refit with more
    # --tune/--draws" whatever failed, also of a fit with a chain stuck at a far lower log
    # density, of which the convergence advice says "more tune/draws will not help"
    from bayes_grpo.model.core import fitted_model_warnings

    class Fit:
        likelihood = "state_space"  # no i.i.d. residual check

        def __init__(self, idata):
            self.idata = idata

        def convergence(self):
            return convergence_check(self.idata)

    path = tmp_path / "fit.nc"
    disagree = _idata(1.0)  # R-hat fails, no chain stuck
    [note] = fitted_model_warnings(Fit(disagree), path)
    assert note.startswith(f"{path}: the fit did not converge (R-hat") and "refit with more --tune/--draws" in note, note
    stuck = _idata(1.0)
    lp = 800.0 + 5.0 * np.random.default_rng(1).standard_normal((CHAINS, DRAWS))
    lp[1] = -3.17e14
    stuck.sample_stats["lp"] = (("chain", "draw"), lp)
    check = convergence_check(stuck)
    assert any("stuck" in f for f in check.values["failed"]) and any("R-hat" in f for f in check.values["failed"])
    [note] = fitted_model_warnings(Fit(stuck), path)
    assert "stuck at a far lower log density" in note and "another --seed" in note, note
    assert "refit with more --tune/--draws" not in note, note
