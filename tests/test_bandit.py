"""Softmax-bandit GRPO: the exact reduction behaves as the reduced-order model says."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from bayes_grpo.bandit import LOGGED_METRICS, fixed_point, simulate_bandit
from bayes_grpo.bandit.experiments import (
    convergence_status,
    g_invariance_check,
    measure_stiffness,
    overshoot_table,
    runset_truth,
    sweep_k_ref,
    threshold_check,
    transition_check,
)
from bayes_grpo.bandit.mean_field import (
    ADVANTAGES,
    expected_update,
    group_advantages,
    loo_fixed_point_closed_form,
    theta_stiffness,
)
from bayes_grpo.bandit.simulator import simulate_bandit_arrays
from bayes_grpo.runset import RUN_COORDS, load_runset, save_runset

# ----------------------------------------------------------------------------- data contract


def test_bandit_run_set_follows_the_data_contract_and_logs_grpo_metrics(tmp_path):
    ds = simulate_bandit(
        k_ref=[0, 3], group_size=[4, 8], learning_rate=0.2, momentum=0.5, seeds=2, steps=40
    )
    assert ds.sizes == {"run": 8, "step": 40}
    for name in RUN_COORDS:
        assert name in ds.coords
    assert set(ds["model"].values) == {"softmax-bandit"}
    assert set(ds["source"].values) == {"bandit"}
    assert sorted(set(ds["k_ref"].values)) == [0.0, 3.0]
    assert sorted(set(ds["group_size"].values)) == [4.0, 8.0]
    # 16 prompts (the default) x G completions per step: a fixed prompt budget
    np.testing.assert_array_equal(ds["completions_per_step"].values, 16 * ds["group_size"].values)
    assert sorted(set(ds["seed"].values)) == [0.0, 1.0]
    assert set(ds["momentum_convention"].values) == {"heavy_ball"}
    for metric in LOGGED_METRICS:
        assert metric in ds.data_vars and np.isfinite(ds[metric].values).all(), metric
    assert ((ds.reward >= 0) & (ds.reward <= 1)).all()
    assert ((ds.frac_reward_zero_std >= 0) & (ds.frac_reward_zero_std <= 1)).all()
    assert (ds.entropy <= math.log(2) + 1e-12).all() and (ds.kl >= 0).all()
    # step 0 is the start: the rollouts come from the initial (= reference) policy
    assert np.allclose(ds.expected_reward.isel(step=0), 0.5)
    assert np.allclose(ds.kl.isel(step=0), 0.0) and np.allclose(
        ds.entropy.isel(step=0), math.log(2)
    )
    truth = runset_truth(ds)
    assert set(truth) == {str(r) for r in ds.run.values}
    one = truth[str(ds.run.values[0])]
    for key in (
        "plateau",
        "stiffness",
        "a",
        "M_eff",
        "C_eff",
        "K_eff",
        "zeta",
        "noise_d",
        "spectral_radius",
    ):
        assert key in one
    assert one["a"] == pytest.approx(0.2 * one["stiffness"])
    path = save_runset(ds, tmp_path / "bandit.nc")
    back = load_runset(path)
    assert runset_truth(back) == truth
    np.testing.assert_array_equal(back.reward.values, ds.reward.values)


def test_ema_convention_uses_step_eta_one_minus_mu():
    ds = simulate_bandit(
        momentum=0.9, momentum_convention="ema", learning_rate=0.5, seeds=1, steps=5
    )
    one = next(iter(runset_truth(ds).values()))
    assert one["a"] == pytest.approx(0.5 * 0.1 * one["stiffness"])


def test_same_seed_reproduces_runs_exactly_and_another_seed_does_not():
    kw = dict(k_ref=[0, 5], group_size=4, seeds=3, steps=60, learning_rate=0.3)
    a, b = simulate_bandit(seed=5, **kw), simulate_bandit(seed=5, **kw)
    c = simulate_bandit(seed=6, **kw)
    for metric in LOGGED_METRICS:
        np.testing.assert_array_equal(a[metric].values, b[metric].values)
    assert not np.array_equal(a.reward.values, c.reward.values)


@pytest.mark.parametrize(
    "bad",
    [dict(group_size=1), dict(k_ref=-1), dict(momentum=1.0), dict(advantage="x"), dict(beta=0.0)],
)
def test_bad_settings_raise_clear_errors(bad):
    with pytest.raises(ValueError):
        simulate_bandit(seeds=1, steps=3, **bad)


@pytest.mark.parametrize("beta", [0.0, -1.0, math.nan, math.inf])
def test_a_beta_without_an_interior_plateau_is_refused_before_the_simulation_runs(beta):
    # it was checked only by the truth, after every step had run; the arrays ran silently
    kw = dict(k_ref=np.array([1]), group_size=np.array([4]), learning_rate=np.array([0.1]))
    kw.update(momentum=np.array([0.0]), p_init=np.array([0.5]), steps=3)
    with pytest.raises(ValueError, match="beta must be finite numbers > 0"):
        simulate_bandit_arrays(beta=np.array([beta]), **kw)
    with pytest.raises(ValueError, match="beta must be finite numbers > 0"):
        simulate_bandit(beta=[1.0, beta], seeds=1, steps=3)


@pytest.mark.parametrize("seed", [1.5, True, math.nan, "3", None])
def test_the_batched_simulator_refuses_a_seed_that_is_no_whole_number_naming_it(seed):
    # int(seed) ran seed=1.5 as the seed 1 and True as 1 without a word; NaN failed "cannot
    # convert float NaN to integer" and None in int()'s TypeError, naming no argument
    kw = dict(k_ref=np.array([1]), group_size=np.array([4]), learning_rate=np.array([0.1]))
    kw.update(momentum=np.array([0.0]), beta=np.array([1.0]), p_init=np.array([0.5]), steps=3)
    with pytest.raises(ValueError, match=r"^seed must be a whole number"):
        simulate_bandit_arrays(seed=seed, **kw)
    # a whole number of any type seeds it as before, the same draws
    same = [simulate_bandit_arrays(seed=s, **kw)["reward"] for s in (3, np.int64(3), 3.0)]
    for other in same[1:]:
        np.testing.assert_array_equal(other, same[0])


def test_a_seed_too_large_for_a_float_is_refused_by_the_simulators_range_naming_it_not_by_an_overflow():
    # the whole-number test took math.isfinite of the seed, which cannot convert 10**400 to a float:
    # Python's "OverflowError: int too large to convert to float" named no argument
    kw = dict(k_ref=np.array([1]), group_size=np.array([4]), learning_rate=np.array([0.1]))
    kw.update(momentum=np.array([0.0]), beta=np.array([1.0]), p_init=np.array([0.5]), steps=3)
    with pytest.raises(ValueError, match=r"^seed must be a whole number in \[0, 2\*\*63\), got 1000"):
        simulate_bandit_arrays(seed=10**400, **kw)


@pytest.mark.parametrize(("name", "value"), [("steps", 2.5), ("steps", True), ("n_prompts", 2.5)])
def test_the_batched_simulator_refuses_a_count_that_is_no_whole_number_naming_it(name, value):
    # steps=2.5 failed in torch.empty's TypeError naming no argument; steps=True ran one step and
    # n_prompts=2.5 two prompts without a word
    kw = dict(k_ref=np.array([1]), group_size=np.array([4]), learning_rate=np.array([0.1]))
    kw.update(momentum=np.array([0.0]), beta=np.array([1.0]), p_init=np.array([0.5]), steps=3)
    with pytest.raises(ValueError, match=rf"^{name} must be a whole number, got {value!r}"):
        simulate_bandit_arrays(**{**kw, name: value})


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"group_size": 4.5}, "group_size must be a whole number, got 4.5"),
        ({"n_prompts": 1.5}, "n_prompts must be a whole number, got 1.5"),
        ({"n_prompts": True}, "n_prompts must be a whole number, got True"),
        ({"n_prompts": 0}, "n_prompts must be >= 1, got 0"),
    ],
)
def test_the_fixed_point_refuses_a_group_size_or_prompt_count_that_is_no_whole_number(setting, message):
    # int() took group_size=4.5 for G = 4 and n_prompts=1.5 or True for one prompt, giving their
    # plateau and noise without a word; n_prompts=0 failed in a ZeroDivisionError
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        fixed_point(**{"group_size": 4, "beta": 1.0, **setting})
    assert fixed_point(group_size=4.0, beta=1.0, n_prompts=np.int64(16)) == fixed_point(group_size=4, beta=1.0)


@pytest.mark.parametrize("k", [1.5, True])
def test_a_k_ref_sweep_refuses_a_lag_that_is_no_whole_number_naming_it(k):
    # int(k) swept K_ref = 1.5 (and True) as 1 without a word; [1, 1.5] failed "k_ref lists 1
    # more than once", a value not given
    with pytest.raises(ValueError, match=rf"^k_refs must be a whole number, got {k!r}"):
        sweep_k_ref([0, k], seeds=1, steps=40, progress=False)


def test_settings_that_differ_in_the_seventh_digit_get_their_own_runs():
    # their run ids were formatted with ":g" (6 digits): "duplicate run ids", after the runs
    ds = simulate_bandit(learning_rate=[0.1, 0.1000001], beta=[1.0, 1.0000001], seeds=1, steps=3)
    assert ds.sizes["run"] == 4
    assert "bandit/K_ref=1/G=8/lr=0.1000001/mu=0/beta=1.0000001/seed=0" in ds["run"].values
    assert "bandit/K_ref=1/G=8/lr=0.1/mu=0/beta=1/seed=0" in ds["run"].values


# ----------------------------------------------------------------------------- zero-std groups


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"learning_rate": [0.1, 0.1]}, "learning_rate lists 0.1 more than once"),
        ({"k_ref": [1, 1.0]}, "k_ref lists 1 more than once"),
        ({"group_size": [4, 8, 4]}, "group_size lists 4 more than once"),
    ],
)
def test_a_setting_listed_twice_is_refused_before_the_simulation_runs(kwargs, message, monkeypatch):
    # it ran the whole simulation, then failed "run set has duplicate run ids: [...]" naming no
    # setting (simulate_sde_runset and the command line refuse it first, naming the list)
    import bayes_grpo.bandit.simulator as sim

    def no_simulation(**kw):
        raise AssertionError("simulated before the settings were checked")

    monkeypatch.setattr(sim, "simulate_bandit_arrays", no_simulation)
    with pytest.raises(ValueError, match=re.escape(message)):
        simulate_bandit(seeds=1, steps=5, **kwargs)


@pytest.mark.parametrize("advantage", ADVANTAGES)
def test_zero_std_groups_get_zero_advantage(advantage):
    G = torch.tensor(8.0, dtype=torch.float64)
    k = torch.tensor([0.0, 8.0], dtype=torch.float64)
    p = torch.tensor(0.7, dtype=torch.float64)
    a1, a0 = group_advantages(k, G, p, advantage, batch_std=torch.tensor(0.4, dtype=torch.float64))
    assert float(a0[0]) == 0.0  # all failures: the failures' advantage is 0
    assert float(a1[1]) == 0.0  # all successes: the successes' advantage is 0


def test_all_zero_std_steps_leave_only_the_anchor_gradient():
    # policy almost surely fails: every group is all-zero, so the policy gradient is exactly 0
    ds = simulate_bandit(
        p_init=1e-9, p_ref=0.3, beta=0.7, group_size=4, seeds=2, steps=3, advantage="group"
    )
    assert np.all(ds.frac_reward_zero_std.values == 1.0)
    assert np.all(ds.reward_std.values == 0.0)
    p = ds.expected_reward.values
    np.testing.assert_allclose(ds.grad_norm.values, 0.7 * np.abs(p - 0.3), rtol=1e-12)


# ----------------------------------------------------------------------------- stiffness


def test_measured_stiffness_matches_the_analytic_jacobian():
    for beta, p_ref in [(1.0, 0.5), (2.0, 0.2), (0.5, 0.3)]:
        fp = fixed_point(group_size=8, beta=beta, p_ref=p_ref, advantage="loo")
        p_star, k_star = loo_fixed_point_closed_form(beta, p_ref)
        assert fp.plateau == pytest.approx(p_star, abs=1e-12)
        assert fp.stiffness == pytest.approx(k_star, rel=1e-9)
        assert theta_stiffness(fp) == pytest.approx(fp.stiffness, rel=1e-9)


def test_the_mean_field_defaults_to_the_estimator_the_simulator_uses():
    # README: advantage="loo" is the default estimator, and fixed_point(...) gives the exact p*, K
    # of the bandit; fixed_point and expected_update defaulted to TRL's "group" estimator while
    # simulate_bandit, measure_stiffness and sweep_k_ref default to "loo", so
    # fixed_point(group_size=8, beta=1.0) read p* 0.808 for runs that settle at 0.854
    ds = simulate_bandit(group_size=8, beta=1.0, seeds=1, steps=2)
    (truth,) = runset_truth(ds).values()
    fp = fixed_point(group_size=8, beta=1.0)
    assert fp.advantage == json.loads(ds.attrs["truth"])["settings"]["advantage"]
    assert fp.plateau == pytest.approx(truth["plateau"], rel=1e-12)
    assert fp.stiffness == pytest.approx(truth["stiffness"], rel=1e-12)
    theta = torch.tensor(math.log(fp.plateau / (1 - fp.plateau)), dtype=torch.float64)
    assert abs(float(expected_update(theta, group_size=8, beta=1.0))) < 1e-10


@pytest.mark.parametrize("advantage", ADVANTAGES)
def test_stiffness_is_the_derivative_of_the_expected_update(advantage):
    fp = fixed_point(group_size=4, beta=1.0, advantage=advantage, n_prompts=4)
    theta = math.log(fp.plateau / (1 - fp.plateau))
    h = 1e-6

    def g(x):
        t = torch.tensor(x, dtype=torch.float64)
        return float(expected_update(t, group_size=4, beta=1.0, advantage=advantage, n_prompts=4))

    assert abs(g(theta)) < 1e-10
    assert -(g(theta + h) - g(theta - h)) / (2 * h) == pytest.approx(fp.stiffness, rel=1e-6)
    assert 0.0 < fp.plateau < 1.0 and fp.stiffness > 0


@pytest.mark.parametrize("anchor", ["kl", "k3"])
def test_batch_advantage_noise_is_that_of_the_sampled_step(anchor):
    # the groups share the batch std, which cancels much of their summed gradient's
    # fluctuation: D treated them as independent (std at its B G -> infinity value) and was
    # 2.3x too large (a simulation's stationary variance was 0.45x the truth's)
    G, B, beta = 4, 8, 1.0
    fp = fixed_point(group_size=G, beta=beta, advantage="batch", n_prompts=B, anchor=anchor)
    p, N = fp.plateau, B * G
    k = np.random.default_rng(0).binomial(G, p, size=(200_000, B))
    K = k.sum(1)
    pg = (k * (G - k)).sum(1) / (B * G * G) / (np.sqrt(K * (N - K) / (N * (N - 1))) + 1e-4)
    c1, c0 = (1 - 0.5 / p) * (1 - p), -(1 - 0.5 / (1 - p)) * p
    anc = p - 0.5 if anchor == "kl" else (K * c1 + (N - K) * c0) / N
    var_g = np.var(pg - beta * anc)
    predicted = fp.noise_d_per_eta2 / (G * (p * (1 - p)) ** 2)
    assert predicted == pytest.approx(var_g, rel=0.02)


def test_relaxation_experiment_agrees_with_the_jacobian():
    jac = measure_stiffness(group_size=8, advantage="group")
    rel = measure_stiffness(
        group_size=8, advantage="group", method="relaxation", seeds=96, n_prompts=64, steps=100
    )
    assert "relaxation" in rel.method and "jacobian" in jac.method
    assert abs(rel.stiffness - jac.stiffness) <= 4 * rel.standard_error + 0.02 * jac.stiffness


def test_simulated_plateau_and_stationary_variance_match_the_truth():
    ds = simulate_bandit(k_ref=0, group_size=8, learning_rate=0.2, seeds=12, steps=1000, seed=2)
    one = next(iter(runset_truth(ds).values()))
    tail = ds.expected_reward.isel(step=slice(300, None)).values
    se = tail.mean(1).std(ddof=1) / math.sqrt(tail.shape[0])
    assert abs(tail.mean() - one["plateau"]) < 5 * se + 1e-3
    ratio = tail.var(axis=1, ddof=1).mean() / one["stationary_var"]
    assert 0.75 < ratio < 1.3  # continuum D/(2 G C K_eff) vs the discrete process, a = 0.05


def test_a_setting_on_the_closed_form_boundary_has_an_unstable_continuum_in_its_truth():
    # lr 0.2 x K 0.25, mu 0.5, K_ref 10: C_eff = 0 (1.1e-14 after rounding K). The truth read
    # "underdamped" with a stationary variance of 2.3e9 where the sweep's closed-form threshold
    # (threshold_check: 10) and `stability` call the setting unstable
    from bayes_grpo.bandit.simulator import bandit_truth
    from bayes_grpo.dynamics.stability import critical_k_ref

    t = bandit_truth(
        group_size=8, learning_rate=0.2, momentum=0.5, momentum_convention="heavy_ball", k_ref=10, beta=1.0
    )
    assert critical_k_ref(t["a"], 0.5, method="closed_form") == 10
    assert t["regime"] == "unstable" and t["stationary_var"] is None
    assert t["regime_exact"] == "underdamped"  # the recursion still converges there


# ----------------------------------------------------------------------------- dynamics


def test_threshold_matches_the_exact_discrete_boundary():
    # a = 0.4 * 0.25 = 0.1, mu = 0.5: exact threshold K_ref = 7, closed form 5
    ds = simulate_bandit(
        k_ref=list(range(3, 11)),
        learning_rate=0.4,
        momentum=0.5,
        seeds=6,
        steps=1000,
        clip_eps=math.inf,
        seed=1,
    )
    res = threshold_check(ds)
    assert res.values["exact_threshold_k_ref"] == 7
    assert res.values["closed_form_threshold_k_ref"] == 5
    assert res.passed, res.summary
    assert abs(res.values["empirical_threshold_k_ref"] - 7) <= 1


def test_a_sweep_that_never_crosses_the_threshold_says_so_and_gives_no_verdict():
    # a = 0.1, mu = 0.5: exact threshold K_ref = 7, beyond the swept lags 1-3
    ds = simulate_bandit(
        k_ref=[1, 2, 3], learning_rate=0.4, momentum=0.5, seeds=4, steps=400, clip_eps=math.inf, seed=1
    )
    res = threshold_check(ds)
    assert math.isnan(res.values["empirical_threshold_k_ref"]) and res.passed is None
    assert "Runs converge at every K_ref swept (1-3" in res.summary
    assert "predicted threshold lies outside the sweep" in res.summary and "nan" not in res.summary


def test_runs_started_at_their_plateau_are_not_judged_by_their_own_noise():
    # a = 0.5 * 0.25 = 0.125, mu = 0.5: exact threshold K_ref = 6. Started at p_init = 0.85
    # (p* = 0.8536) the initial error is 0.004, below the sampling noise of the expected
    # reward: every stable run counted as not converged and the threshold read K_ref = 0.
    ds = simulate_bandit(
        k_ref=[0, 2, 7], learning_rate=0.5, momentum=0.5, seeds=3, steps=400,
        p_init=0.85, clip_eps=math.inf, seed=1,
    )
    status = convergence_status(ds).groupby("k_ref")["converged"].mean()
    assert status[0] == 1.0 and status[2] == 1.0, status
    assert status[7] == 0.0, status


def test_a_sweep_that_starts_past_the_threshold_says_so_and_gives_no_verdict():
    # a = 0.1, mu = 0.5: exact threshold K_ref = 7, below the swept lags 12-13; it read
    # "Runs stop converging at K_ref = 12" and failed the prediction
    ds = simulate_bandit(
        k_ref=[12, 13], learning_rate=0.4, momentum=0.5, seeds=3, steps=400, clip_eps=math.inf, seed=1
    )
    res = threshold_check(ds)
    assert res.values["empirical_threshold_k_ref"] == 12 and res.passed is None, res.summary
    assert "already at the first K_ref swept (12" in res.summary


def test_a_threshold_at_k_ref_zero_says_the_closed_form_is_late_not_conservative_by_minus_one():
    # a = 2.5 >= 2 (1 + mu): unstable already without lag, where C_eff = 1 - mu > 0 at every gain.
    # The summary read "closed form (1-mu)/a = 0.40 -> 1 (conservative by -1 steps)", and the phase
    # line "the closed form is early by -1 steps (median)"
    from bayes_grpo.bandit.experiments import phase_diagram_check

    ds = simulate_bandit(k_ref=[0, 1, 2], learning_rate=[10.0, 12.0], momentum=0.0, seeds=2, steps=100, clip_eps=math.inf)
    one = threshold_check(ds.isel(run=ds["learning_rate"].values == 10.0))
    assert one.values["exact_threshold_k_ref"] == 0 and one.values["closed_form_threshold_k_ref"] == 1
    assert "conservative by -1" not in one.summary
    assert "(1 step late: without lag the closed form sees no instability, C_eff = 1 - mu > 0 at every gain)" in one.summary
    line = phase_diagram_check(ds)
    assert "early by -1" not in line.summary
    assert "the closed form is late by 1 step (median)" in line.summary


def test_a_closed_form_one_lag_early_says_one_step():
    # `stability --eta-k 0.05 --momentum 0.9 --k-ref 2`: closed-form critical K_ref 2, exact 3; a
    # sweep of that setting read "(conservative by 1 steps)", its phase line "early by 1 steps"
    from bayes_grpo.bandit.experiments import _closed_form_lead
    from bayes_grpo.checks.base import counted

    assert _closed_form_lead(1.0) == "conservative by 1 step"
    assert _closed_form_lead(3.0) == "conservative by 3 steps"
    assert _closed_form_lead(-1.0).startswith("1 step late:")
    assert counted(1_000_000, "step") == "1000000 steps" and counted(0.5, "step") == "0.5 steps"


def test_full_importance_reweighting_removes_the_lag():
    # same setting, K_ref = 12 > exact threshold 7: diverges with the gradient at the
    # behaviour policy, converges when the clipped surrogate is differentiated at the current one
    kw = dict(
        k_ref=12, learning_rate=0.4, momentum=0.5, seeds=3, steps=800, clip_eps=math.inf, seed=3
    )
    lagged = convergence_status(simulate_bandit(gradient="behaviour", **kw))
    reweighted = convergence_status(simulate_bandit(gradient="importance", **kw))
    assert not lagged["converged"].any()
    assert reweighted["converged"].all()


def test_a_sweep_with_full_importance_reweighting_gets_no_lagged_verdict():
    # the K_ref predictions are the lagged mean field's; these runs converge past them, and
    # the check read that as a failed prediction (passed False) instead of one that does not apply
    ds = simulate_bandit(
        k_ref=[0, 12], learning_rate=0.4, momentum=0.5, seeds=2, steps=300,
        clip_eps=math.inf, gradient="importance", seed=3,
    )
    for res in (threshold_check(ds), transition_check(ds)):
        assert res.passed is None and "No verdict" in res.summary, res.summary


def test_mean_trajectory_overshoots_only_below_critical_damping():
    # a = 0.025, mu = 0.5: zeta(K_ref=2) = 1.59 (overdamped), zeta(K_ref=15) = 0.21
    ds = simulate_bandit(
        k_ref=[2, 15], learning_rate=0.1, momentum=0.5, seeds=32, n_prompts=128, steps=400, seed=4
    )
    table = overshoot_table(ds)
    z = table["overshoot"] / table["overshoot_se"]
    assert z.loc[2] < 5 and z.loc[15] > 5


def test_mean_trajectory_is_invariant_in_group_size_and_the_test_has_power():
    kw = dict(
        k_ref=2, momentum=0.5, learning_rate=0.1, group_size=[4, 16], seeds=20, steps=500, seed=8
    )
    invariant = g_invariance_check(simulate_bandit(advantage="loo", **kw), blocks=5)
    assert invariant.passed, invariant.summary
    assert (
        invariant.values["variance_ci_low"]
        < invariant.values["predicted_variance_ratio"]
        < invariant.values["variance_ci_high"] + 0.5
    )
    # TRL's group-std normalisation makes the drift depend on G: the same test must reject
    trl = g_invariance_check(simulate_bandit(advantage="group", **kw), blocks=5)
    assert not trl.passed and trl.values["test_p_value"] < 1e-6
    plateaus = json.loads(json.dumps(trl.values["plateau_by_g"]))
    assert plateaus["16"] > plateaus["4"]


def test_a_plateau_out_of_float_reach_is_refused_before_the_simulation():
    # beta = 1e-7 puts p* within 1e-12 of 1: the whole simulation ran (5.9 s for 512 runs x
    # 3000 steps), then the truth said "no interior fixed point of the expected update"
    def step(_):
        raise AssertionError("the simulation ran")

    with pytest.raises(ValueError, match=r"p\* lies within 1e-12 of 1 \(beta = 1e-07 is too small"):
        simulate_bandit(beta=[1.0, 1e-7], seeds=1, steps=5, progress=step)
    # a beta the simulator refuses keeps the simulator's message
    with pytest.raises(ValueError, match="beta must be finite numbers > 0"):
        simulate_bandit(beta=[1.0, 0.0], seeds=1, steps=5, progress=step)


@pytest.mark.parametrize("steps", [1, 2])
def test_runs_too_short_to_judge_are_named_not_a_crash(steps):
    # `sweep --steps 2 --transition`: "attempt to get argmax of an empty sequence" from the
    # overshoot; `--steps 1`: a "Mean of empty slice" warning and a threshold verdict
    ds = simulate_bandit(k_ref=[0, 1], seeds=2, steps=steps)
    runs = "runs of 1 step" if steps == 1 else f"runs of {steps} steps"  # not "1 steps"
    with pytest.raises(ValueError, match=f"{runs} are too short to judge convergence"):
        convergence_status(ds)
    with pytest.raises(ValueError, match=f"{runs} are too short for an overshoot"):
        overshoot_table(ds)
    assert len(overshoot_table(simulate_bandit(k_ref=[0, 1], seeds=2, steps=3))) == 2


def test_g_invariance_refuses_runs_of_several_settings():
    # K_ref 0 and 6 were pooled into each group size: "equal within Monte Carlo error ... 24
    # and 24 seeds", with the predicted variance ratio of K_ref = 0 alone (4.04; 4.23 at 6)
    ds = simulate_bandit(
        k_ref=[0, 6], group_size=[4, 16], learning_rate=0.3, momentum=0.5, seeds=6, steps=40
    )
    with pytest.raises(ValueError, match=r"several values of 'k_ref': \[0.0, 6.0\]"):
        g_invariance_check(ds, blocks=2)
    one = g_invariance_check(ds.isel(run=(ds["k_ref"] == 6).values), blocks=2)
    assert one.values["test_n_a"] == 6


def test_bandit_run_set_is_identical_to_one_built_by_make_runset():
    import pandas as pd
    import xarray as xr

    from bayes_grpo.runset import make_runset, run_coords

    ds = simulate_bandit(
        k_ref=[0, 1, 2], group_size=[4, 8], seeds=2, steps=20
    )  # 12 runs, assembled from arrays
    assert ds.sizes["run"] > 8
    index = pd.RangeIndex(20, name="step")
    curves = {
        str(r): pd.DataFrame({m: ds[m].values[i] for m in LOGGED_METRICS}, index=index)
        for i, r in enumerate(ds.run.values)
    }
    meta = {
        str(r): {
            k: v
            for k, v in run_coords(ds, str(r)).items()
            if not (isinstance(v, float) and math.isnan(v))
        }
        for r in ds.run.values
    }
    xr.testing.assert_identical(ds, make_runset(curves, meta, attrs={"truth": ds.attrs["truth"]}))


def test_the_phase_heatmap_title_gives_the_measured_stiffness_under_ema_momentum():
    # EMA momentum: a = eta (1 - beta1) K, so a / eta is (1 - beta1) K = 0.025, not K = 0.25
    from bayes_grpo.bandit.experiments import phase_diagram_figure

    ds = simulate_bandit(
        k_ref=[0, 1, 2],
        learning_rate=[0.5, 1.0],
        momentum=0.9,
        momentum_convention="ema",
        seeds=2,
        steps=300,
        clip_eps=math.inf,
        seed=0,
    )
    stiffness = next(iter(runset_truth(ds).values()))["stiffness"]
    assert stiffness == pytest.approx(0.25, rel=1e-6)
    fig = phase_diagram_figure(ds)
    try:
        title = fig.axes[0].get_title()
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    assert f"K = {stiffness:.3g}" in title, title


def test_the_closed_form_threshold_is_written_with_the_gain_it_used_under_ema_momentum():
    # EMA momentum: a = eta (1 - beta1) K = 0.025 and the closed form is (1 - mu)/a = 4; the
    # text said (1-mu)/(eta K), which is 0.4 here
    from bayes_grpo.bandit.experiments import phase_diagram_figure

    ds = simulate_bandit(
        k_ref=[2, 3, 4, 5, 6],
        learning_rate=1.0,
        momentum=0.9,
        momentum_convention="ema",
        seeds=2,
        steps=300,
        clip_eps=math.inf,
        seed=0,
    )
    res = threshold_check(ds)
    assert res.values["closed_form_threshold_k_ref"] == 4
    assert "closed form (1-mu)/a = 4.00 -> 4" in res.summary, res.summary
    assert "eta K)" not in res.summary
    fig = phase_diagram_figure(ds, threshold=res)
    try:
        title = fig.axes[0].get_title()
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    assert "a = eta_eff K = 0.025" in title, title


def test_the_sweep_figure_colours_each_k_ref_as_its_colour_bar_reads_on_an_uneven_grid():
    # lags 0, 1, 2, 10: the K_ref = 2 curve was coloured by its index (2 of 3), which the
    # colour bar (0 to 10) reads as K_ref 6.7
    import matplotlib.pyplot as plt

    from bayes_grpo.bandit.experiments import phase_diagram_figure

    lags = [0, 1, 2, 10]
    ds = simulate_bandit(
        k_ref=lags, learning_rate=0.1, momentum=0.5, seeds=2, steps=300, clip_eps=math.inf, seed=0
    )
    fig = phase_diagram_figure(ds)
    try:
        ax0 = fig.axes[0]
        colours = [line.get_color() for line in ax0.get_lines()]
        cmap = plt.get_cmap("viridis")
        for lag, colour in zip(lags, colours, strict=True):
            assert np.allclose(colour, cmap(lag / max(lags))), (lag, colour)
    finally:
        plt.close(fig)


def test_a_setting_oscillatory_already_without_lag_reports_no_zeta_crossing():
    # a = 0.1, mu = 0.5: zeta(K_ref = 0) = 0.92 < 1 and zeta falls with K_ref, so it crosses 1 at
    # no K_ref >= 0; the summary said "crosses 1 at K_ref = 0.00" and the figure drew a line there
    ds = simulate_bandit(
        k_ref=[0, 1, 2], learning_rate=0.4, momentum=0.5, seeds=2, steps=200, clip_eps=math.inf, seed=0
    )
    res = transition_check(ds)
    assert res.table.loc[0, "zeta"] < 1
    assert math.isnan(res.values["zeta_crossing_k_ref"])
    assert "crosses 1" not in res.summary
    assert "zeta computed from the measured K is below 1 already at K_ref = 0" in res.summary, res.summary


def test_a_transition_sweep_without_overshoot_or_zeta_below_one_says_so_without_nan():
    # a = 0.025, mu = 0.5, K_ref 0-2: zeta >= 1.6 and no overshoot; the summary read "first
    # overshoots its plateau (> 5 SE) at K_ref = nan; ... (first integer K_ref with zeta < 1: nan)"
    ds = simulate_bandit(
        k_ref=[0, 1, 2], learning_rate=0.1, momentum=0.5, seeds=2, steps=200, clip_eps=math.inf, seed=0
    )
    res = transition_check(ds)
    assert res.passed is None
    assert "nan" not in res.summary, res.summary
    assert "No K_ref swept (0-2) overshoots its plateau" in res.summary
    assert "no K_ref swept has zeta < 1" in res.summary


def test_the_linear_overshoot_of_a_monotone_approach_is_zero_not_its_remaining_deficit():
    # lr 0.2, mu 0.5, K_ref 0: the noise-free recursion approaches p* without crossing it (both
    # roots real and positive), and `sweep --transition` printed linear_overshoot -2.6e-22 (the
    # error left at the last step, with its sign flipped) where there is no overshoot
    ds = simulate_bandit(
        k_ref=[0, 4], learning_rate=0.2, momentum=0.5, seeds=2, steps=300, clip_eps=math.inf, seed=0
    )
    lin = transition_check(ds).table["linear_overshoot"]
    assert lin.loc[0] == 0.0
    assert lin.loc[4] > 0.02  # an oscillating one keeps its overshoot


def test_a_sweep_of_one_k_ref_over_several_learning_rates_draws_its_column():
    # `sweep --k-ref 5 --lr 0.1,0.2 --png phase.png` wrote an empty heat map: shading="nearest"
    # gives a single K_ref a column of zero width
    from matplotlib.collections import QuadMesh

    from bayes_grpo.bandit.experiments import phase_diagram_figure, sweep_k_ref

    ds = sweep_k_ref([5], seeds=2, steps=60, learning_rate=[0.1, 0.2], progress=False)
    fig = phase_diagram_figure(ds)
    mesh = next(c for c in fig.axes[0].collections if isinstance(c, QuadMesh))
    xy = mesh.get_coordinates()
    assert xy[..., 0].min() == pytest.approx(4.5) and xy[..., 0].max() == pytest.approx(5.5)
    assert xy[..., 1].max() - xy[..., 1].min() == pytest.approx(2.0)  # one row per learning rate


def test_a_threshold_read_late_past_a_persistent_oscillation_says_why():
    # `sweep` at its defaults (lr 0.1, mu 0.5, 3000 steps) read 32 against the exact 30 and said
    # only that: the runs at 30 and 31 hold a deviation of ~10-20% of the error scale that does
    # not grow (the unstable mode saturated, flat to 9000 steps), which the rule counts as
    # converged below 25%
    import pandas as pd

    from bayes_grpo.bandit.experiments import _persistent_oscillation_note, sweep_k_ref

    res = threshold_check(sweep_k_ref([30, 31, 32], seeds=8, steps=3000, progress=False))
    assert res.passed is False and res.values["empirical_threshold_k_ref"] == 32
    note = res.values["late_threshold_note"]
    assert note in res.summary and "(K_ref 30-31) the runs neither settle nor grow" in note
    assert "only when it grows 1.5x or exceeds 25%" in note
    # runs whose deviation grows there, or settles, are no such case
    growing = pd.DataFrame({"k_ref": [30.0, 31.0], "tail_rms": [0.2, 0.2], "mid_rms": [0.1, 0.1], "scale": [1.0, 1.0]})
    assert _persistent_oscillation_note(growing, 30.0, 32.0, {}) == ""
    settled = growing.assign(tail_rms=[0.01, 0.01], mid_rms=[0.02, 0.02])
    assert _persistent_oscillation_note(settled, 30.0, 32.0, {}) == ""
    assert _persistent_oscillation_note(growing.assign(tail_rms=[0.1, 0.1]), 30.0, 31.0, {}) == ""  # within one step


def test_a_phase_line_says_which_learning_rate_reads_its_threshold_late():
    # `sweep --lr 0.1,0.2 ...` failed the phase line at lr 0.1 (32 for an exact 30) and gave
    # threshold_check's reason for one learning rate nowhere
    from bayes_grpo.bandit.experiments import phase_diagram_check, sweep_k_ref

    ds = sweep_k_ref([30, 31, 32], seeds=8, steps=3000, learning_rate=[0.1, 0.2], progress=False)
    res = phase_diagram_check(ds)
    assert res.values["late_learning_rates"] == ["0.1"]
    assert "At learning rate 0.1 the empirical threshold reads late" in res.summary


def test_a_call_of_forty_thousand_runs_takes_seconds_not_minutes():
    # DESIGN.md: a sweep of thousands of runs takes seconds on a CPU. The run set's duplicate-id
    # check counted every id through the whole list (quadratic): 39 s for 20000 runs of 2 steps,
    # 80000 runs not done in 5 minutes; these 40000 take about 3 s
    import time

    start = time.perf_counter()
    ds = simulate_bandit(seeds=40000, steps=1)
    assert ds.sizes["run"] == 40000
    assert time.perf_counter() - start < 15


def test_a_tiny_learning_rate_keeps_its_gain_in_the_threshold_check():
    # the gains were compared after rounding to 14 decimals: lr 1e-14 (a = 2.5e-15) became a = 0
    # and `sweep --lr 1e-14` a ZeroDivisionError traceback
    ds = sweep_k_ref([0, 1], seeds=1, steps=20, learning_rate=1e-14, progress=False)
    truth = runset_truth(ds)
    res = threshold_check(ds)
    assert res.values["a"] == truth[str(ds.run.values[0])]["a"] > 0
    assert res.passed is None and res.values["threshold_determined"] is False


def test_a_learning_rate_whose_noise_overflows_is_refused_before_the_simulation():
    # `simulate bandit --lr 1e300` simulated every step and then failed in the truth, D = eta^2 D_1,
    # with an OverflowError traceback
    steps = []
    with pytest.raises(ValueError, match=r"learning rate 1e\+300 at group size 8, beta 1 gives .* noise D = inf"):
        simulate_bandit(learning_rate=[0.1, 1e300], seeds=1, steps=5, progress=steps.append)
    assert steps == []
    truth = runset_truth(simulate_bandit(learning_rate=1e150, seeds=1, steps=2))
    assert all(math.isfinite(run["noise_d"]) for run in truth.values())


def test_a_lag_whose_truth_cannot_be_computed_is_refused_before_the_simulation():
    # `simulate bandit --k-ref 1e8` simulated every step, holding a history of K_ref + 1 policies
    # per run (800 MB a run), and only then failed in the truth's spectral radius
    from bayes_grpo.dynamics.stability import MAX_ROOT_LAG

    steps = []
    with pytest.raises(ValueError, match=rf"K_ref = 100000000: the characteristic roots .* beyond K_ref = {MAX_ROOT_LAG}"):
        simulate_bandit(k_ref=[1, 10**8], seeds=1, steps=5, progress=steps.append)
    assert steps == []


def test_runs_that_cannot_fit_in_memory_are_refused_before_anything_is_built(monkeypatch):
    # `simulate bandit --seeds 100000000 --steps 5` spent minutes building a Python list of every
    # run's setting on its way to exhausting the memory; the allocation check came after it
    import bayes_grpo.dynamics.simulate as simulate

    monkeypatch.setattr(simulate, "physical_memory", lambda: 10**6)  # a 1 MB machine
    steps = []
    with pytest.raises(ValueError, match=r"1000 runs x 10 steps do not fit in memory .* this machine has 0.001 GB"):
        simulate_bandit(seeds=1000, steps=10, progress=steps.append)
    assert steps == []
    assert simulate_bandit(seeds=1, steps=10).sizes["run"] == 1


def test_a_kl_weight_whose_noise_is_no_number_is_refused_naming_beta():
    # beta 1e300 gives a NaN noise D (its fixed point sits within rounding of p_ref); the refusal
    # told only to use a smaller learning rate, and before it the sweep printed a table of NaN
    with pytest.raises(ValueError, match=r"beta 1e\+300 gives .* noise D = nan.* or KL weight beta"):
        simulate_bandit(beta=1e300, seeds=1, steps=5)


@pytest.mark.parametrize(("name", "value"), [("steps", 2.5), ("seeds", 1.5), ("n_prompts", 4.2), ("steps", float("nan"))])
def test_a_count_that_is_not_a_whole_number_is_refused_not_truncated(name, value):
    # steps=2.5 ran 2 steps and seeds=1.5 one seed without a word (the SDE simulator refuses them)
    with pytest.raises(ValueError, match=rf"{name} must be a whole number, got {value!r}"):
        simulate_bandit(**{"seeds": 1, "steps": 3, name: value})
    assert simulate_bandit(seeds=1.0, steps=3.0, n_prompts=np.int64(2)).sizes["step"] == 3


def test_the_sweeps_progress_bar_counts_its_runs_at_every_learning_rate(monkeypatch):
    # `sweep_k_ref([5], seeds=2, learning_rate=[0.1, 0.2])` simulates 4 runs; its bar said
    # "bandit sweep (2 runs)", the runs of one learning rate, and "(1 runs)" for one
    from bayes_grpo.bandit import experiments

    labels = []

    class Bar:
        def __init__(self, total, desc):
            labels.append(desc)

        def close(self):
            pass

    monkeypatch.setattr(experiments, "StepBar", Bar)
    monkeypatch.setattr(experiments, "simulate_bandit", lambda **kwargs: None)
    experiments.sweep_k_ref([5], seeds=2, steps=60, learning_rate=[0.1, 0.2])
    experiments.sweep_k_ref([5], seeds=1, steps=60)
    assert labels == ["bandit sweep (4 runs)", "bandit sweep (1 run)"]
