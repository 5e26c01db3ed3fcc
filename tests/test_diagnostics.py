"""Failure-mode diagnostics: each mode is detected on runs built to have it and not on healthy ones."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.diagnostics import (
    MODES,
    DiagnosticsConfig,
    advantage_degeneracy,
    binomial_mean_std,
    binomial_zero_spread,
    diagnose,
    diagnosis_table,
    instability,
    policy_concentration,
    relative_overshoot,
    reward_hacking,
    run_table,
    verdict_matrix,
    zero_spread_from_std,
)
from bayes_grpo.diagnostics._result import fmt_interval
from bayes_grpo.diagnostics._series import fall_fit_variance
from bayes_grpo.diagnostics.cases import CASES, group_logs, simulated_case
from bayes_grpo.diagnostics.degeneracy import whole_batch_size
from bayes_grpo.runset import make_runset

FAST = DiagnosticsConfig.from_mapping({"common": {"n_boot": 40, "figures": False}})


def _one(case: str, mode: str, config: DiagnosticsConfig = FAST, seed: int = 0, **kw):
    ds = simulated_case(case, seed=seed, **kw)
    (res,) = diagnose(ds, config=config, modes=[mode])
    return res


# --- the mathematics against an independent route (simulation) -------------------------------


@pytest.mark.parametrize("p, G", [(0.1, 4), (0.5, 8), (0.9, 8), (0.97, 16)])
def test_binomial_zero_spread_and_mean_std_match_simulated_groups(p, G):
    rng = np.random.default_rng(1)
    k = rng.binomial(G, p, size=400_000)
    sim_share = np.mean((k == 0) | (k == G))
    sim_std = np.mean(np.sqrt(k * (G - k) / (G * (G - 1))))
    assert binomial_zero_spread(p, G) == pytest.approx(sim_share, abs=4e-3)
    assert binomial_mean_std(p, G) == pytest.approx(sim_std, abs=2e-3)


def test_share_derived_from_reward_std_equals_binomial_share_for_homogeneous_prompts():
    p = np.array([0.2, 0.5, 0.8, 0.95])
    G = 8
    assert np.allclose(
        zero_spread_from_std(binomial_mean_std(p, G), p, G), binomial_zero_spread(p, G), atol=1e-12
    )
    assert np.all(zero_spread_from_std(np.zeros(4), p, G) == 1.0)


def test_share_derived_from_reward_std_tracks_logged_share_under_prompt_heterogeneity():
    rng = np.random.default_rng(2)
    logs = group_logs(np.full(300, 0.9), 8, 64, 1.5, rng)
    derived = zero_spread_from_std(logs["reward_std"].to_numpy(), logs["reward"].to_numpy(), 8)
    assert abs(derived.mean() - logs["frac_reward_zero_std"].mean()) < 0.08
    # and well above the homogeneous-prompt expectation, as the logged share is
    assert logs["frac_reward_zero_std"].mean() > binomial_zero_spread(0.9, 8) + 0.1


def test_relative_overshoot_of_underdamped_step_response():
    from bayes_grpo.dynamics.trajectory import reward_trajectory

    t = np.linspace(0, 200, 20001)
    for zeta in (0.1, 0.3, 0.6):
        w0 = 0.1
        r = reward_trajectory(t, 1.0, 2 * zeta * w0, w0**2, 1.0, 0.0)
        assert r.max() - 1.0 == pytest.approx(float(relative_overshoot(zeta)), rel=1e-3)
    assert relative_overshoot(1.2) == 0.0


# --- each mode on the case built for it, and not on the healthy run ---------------------------


def test_advantage_degeneracy_flagged_on_easy_task_with_onset_and_strength():
    res = _one("advantage_degeneracy", "advantage_degeneracy")
    assert res.passed is False and res.values["detected"] is True
    assert res.values["onset_step"] is not None and res.values["onset_step"] < 100
    st = res.values["strength"]
    assert st["lower"] <= st["value"] <= st["upper"] and st["value"] > 0.5
    assert res.values["evidence"]["final_share"] > 0.5


def test_a_degenerate_episode_that_ended_has_its_own_share_as_strength():
    # most groups without spread from step 70 to 129 of 200 (share 0.85), then signal again:
    # detected by the stretch, its strength was the mean share from step 70 to the end, 0.47,
    # under the flag level 0.5 it was detected above
    rng = np.random.default_rng(0)
    share = 0.15 + 0.03 * rng.standard_normal(200)
    share[70:130] = 0.85 + 0.03 * rng.standard_normal(60)
    frame = pd.DataFrame(
        {"reward": 0.5 + 0.02 * rng.standard_normal(200), "frac_reward_zero_std": share.clip(0, 1)},
        index=np.arange(200),
    )
    res = advantage_degeneracy(frame, run_id="mid", group_size=8, common=FAST.common)
    assert res.passed is False and res.values["onset_step"] == 70, res.summary
    st = res.values["strength"]
    assert st["value"] == pytest.approx(share[70:130].clip(0, 1).mean())
    assert st["lower"] > 0.5 and "(steps 70-129)" in st["name"]


def test_a_degenerate_episode_that_ended_has_its_onset_at_the_start_of_its_stretch():
    # data/tiny's g16_p8_lr0.0005_k1_adamw_s0: share above 0.5 over steps 1-94, then below, the
    # smoothed share back above 0.5 at the last two steps only; it read "share above 0.5 for 94
    # steps (31% of the run); ... from step 299" (the two last points, "sustained" to the end)
    rng = np.random.default_rng(0)
    share = 0.25 + 0.03 * rng.standard_normal(200)
    share[:70] = 0.85 + 0.03 * rng.standard_normal(70)
    share[-6:] = 0.9
    frame = pd.DataFrame(
        {"reward": 0.5 + 0.02 * rng.standard_normal(200), "frac_reward_zero_std": share.clip(0, 1)},
        index=np.arange(1, 201),
    )
    res = advantage_degeneracy(frame, run_id="early", group_size=8, common=FAST.common)
    assert res.passed is False and res.values["evidence"]["final_share"] < 0.5
    assert res.values["onset_step"] == 1, res.summary
    assert "(steps 1-70)" in res.values["strength"]["name"] and "from step 1" in res.summary


def test_a_zero_spread_share_that_tests_the_whole_batch_is_named_not_read_as_per_group():
    # TRL with scale_rewards='batch' logs frac_reward_zero_std from the batch's one std: 0 unless
    # the whole batch had one reward. A binary reward at 0.85 with G = 4 leaves about half the
    # groups all-equal (p^G + (1-p)^G = 0.52; prompts that differ leave more), and the run read
    # 'not detected: final-window zero-signal share 0.00 ... (binomial expectation 0.52)' with
    # nothing said about the contradiction
    rng = np.random.default_rng(0)
    n, G, groups = 200, 4, 16
    p = np.clip(0.85 + 0.02 * rng.standard_normal(n), 0, 1)
    k = rng.binomial(G, p[:, None], size=(n, groups))
    frame = pd.DataFrame(
        {"reward": k.mean(axis=1) / G, "frac_reward_zero_std": np.zeros(n)}, index=np.arange(n)
    )
    res = advantage_degeneracy(frame, run_id="batch", group_size=G, common=FAST.common)
    assert "frac_reward_zero_std is only ever 0 or 1, and 1 at 0 of 200 steps" in res.summary
    assert "scale_rewards='batch'" in res.values["evidence"]["share_not_per_group"]
    # the share per group of the same groups: read as it is, nothing to say
    frame["frac_reward_zero_std"] = ((k == 0) | (k == G)).mean(axis=1)
    res = advantage_degeneracy(frame, run_id="group", group_size=G, common=FAST.common)
    assert res.passed is False and "share_not_per_group" not in res.values["evidence"]
    # one prompt a step logs a true per-group share of 0 or 1, 1 as often as its group is
    # all-equal: read as it is
    one = ((k[:, 0] == 0) | (k[:, 0] == G)).astype(float)
    single = pd.DataFrame({"reward": k[:, 0] / G, "frac_reward_zero_std": one}, index=np.arange(n))
    res = advantage_degeneracy(single, run_id="one", group_size=G, common=FAST.common)
    assert "share_not_per_group" not in res.values["evidence"], res.summary
    # a reward stuck at 0 (every group all-equal, share 1 at every step) is no contradiction
    stuck = pd.DataFrame(
        {"reward": np.zeros(n), "frac_reward_zero_std": np.ones(n)}, index=np.arange(n)
    )
    res = advantage_degeneracy(stuck, run_id="stuck", group_size=G, common=FAST.common)
    assert res.passed is False and "share_not_per_group" not in res.values["evidence"]


def test_advantage_degeneracy_derived_from_reward_std_when_share_not_logged():
    res = _one("advantage_degeneracy_from_std", "advantage_degeneracy")
    assert res.passed is False
    assert res.values["evidence"]["share_source"] == "derived"
    assert "estimate" in res.summary


def test_a_derived_zero_spread_share_says_which_reward_range_it_assumed():
    # the range is inferred as (0, 1) when every reward lies in it: a -1..1 reward that stays
    # >= 0 was read on the wrong range (share 0.72 against 0.86 with the right one) in silence
    res = _one("advantage_degeneracy_from_std", "advantage_degeneracy")
    assert "range (0, 1) assumed from the rewards" in res.summary
    given = DiagnosticsConfig.from_mapping(FAST.to_dict() | {"degeneracy": {"reward_range": [0, 1]}})
    res = _one("advantage_degeneracy_from_std", "advantage_degeneracy", config=given)
    assert "assumed" not in res.summary


def test_a_derived_share_says_it_assumes_a_binary_reward_and_how_to_leave_it_out():
    # partial credit: each completion scores in (0, 1); no group has zero spread, but groups
    # spread less than binary ones of the same mean, so the share derived from reward_std is
    # high. It was "detected" from step 0 with only "(else set degeneracy.reward_range)" as
    # advice, a setting that changes nothing for such a reward
    rng = np.random.default_rng(1)
    t = np.arange(120)
    p = 0.3 + 0.3 * (1 - np.exp(-t / 18))
    scores = rng.beta(4 * p[:, None, None], 4 * (1 - p[:, None, None]), size=(t.size, 16, 8))
    frame = pd.DataFrame(
        {"reward": scores.mean(axis=(1, 2)), "reward_std": scores.std(axis=2, ddof=1).mean(axis=1)},
        index=t,
    )
    ds = make_runset({"partial": frame}, {"partial": {"group_size": 8}})
    (res,) = diagnose(ds, config=FAST, modes=["advantage_degeneracy"])
    assert res.values["evidence"]["share_source"] == "derived"
    assert "assuming a binary reward" in res.summary and "partial credit" in res.summary
    assert "--set degeneracy.reward_std_metrics=[]" in res.summary
    off = DiagnosticsConfig.from_assignments(["degeneracy.reward_std_metrics=[]"])
    (res,) = diagnose(ds, config=off, modes=["advantage_degeneracy"])
    assert res.passed is None and "degeneracy.reward_std_metrics is empty" in res.summary


def test_a_reward_std_over_the_whole_batch_is_not_read_as_the_mean_within_group_spread():
    # TRL 1.x logs reward_std as the std of every reward of the batch (nanstd(rewards), read in
    # the installed grpo_trainer.py), not the mean of the groups' stds (TRL 0.1x). A log of
    # reward and reward_std only (no frac_reward_zero_std: a W&B export of two columns) of
    # 16 prompts x G 4 with heterogeneous prompts, the share of all-equal groups 0.59 over the
    # last quarter, read "not detected: zero-signal share 0.30 <= 0.5", derived from that std.
    # The batch std of a binary reward is sqrt(N/(N-1) r (1-r)) at every step for one batch
    # size N: the derivation is refused, naming the metric and N
    rng = np.random.default_rng(0)
    t = np.arange(200)
    logs = group_logs(0.3 + 0.55 * (1 - np.exp(-t / 40)), 4, 16, 4.0, rng)
    assert logs["frac_reward_zero_std"].iloc[-50:].mean() > 0.55
    r = logs["reward"].to_numpy()
    batch_std = np.sqrt(64 / 63 * r * (1 - r))
    batch = make_runset(
        {"x": logs.drop(columns="frac_reward_zero_std").assign(reward_std=batch_std)},
        {"x": {"group_size": 4}},
    )
    (res,) = diagnose(batch, config=FAST, modes=["advantage_degeneracy"])
    assert res.passed is None, res.summary
    assert "reward_std is the std over the whole batch of about 64 rewards" in res.summary
    # the same run with the mean within-group spread still has its share derived (detected)
    grouped = make_runset({"x": logs.drop(columns="frac_reward_zero_std")}, {"x": {"group_size": 4}})
    (res,) = diagnose(grouped, config=FAST, modes=["advantage_degeneracy"])
    assert res.values["evidence"]["share_source"] == "derived" and res.passed is False, res.summary


def test_a_whole_batch_std_averaged_over_batches_is_not_read_as_a_healthy_within_group_spread():
    # TRL 1.x's reward_std (the std of the whole batch) logged every 4 steps is the mean of 4
    # batch stds: its ratio to r (1 - r) moves from step to step, so whole_batch_size does not
    # tell it. The groups (16 prompts x G 4, prompts that differ) were all-equal at 0.60 over the
    # last quarter; the share derived from that std read "not detected: 0.30", saying only that
    # it assumed a binary reward. It now says it read reward_std as the groups' own stds, and
    # that its share lies below the binomial expectation, where no such share stays
    rng = np.random.default_rng(0)
    k = 4
    t = np.arange(200 * k)
    logs = group_logs(0.3 + 0.55 * (1 - np.exp(-t / (40 * k))), 4, 16, 4.0, rng)
    r = logs["reward"].to_numpy()

    def block(x):
        return x.reshape(-1, k).mean(axis=1)

    assert block(logs["frac_reward_zero_std"].to_numpy())[-50:].mean() > 0.55
    frame = pd.DataFrame(
        {"reward": block(r), "reward_std": block(np.sqrt(64 / 63 * r * (1 - r)))},
        index=(np.arange(200) + 1) * k,
    )
    ds = make_runset({"x": frame}, {"x": {"group_size": 4}})
    (res,) = diagnose(ds, config=FAST, modes=["advantage_degeneracy"])
    assert "reward_std the mean of the groups' own stds" in res.summary
    assert "lies below 80% of the binomial expectation" in res.summary, res.summary
    assert "the verdict says nothing about the groups" in res.summary
    assert "derived_share_below_binomial" in res.values["evidence"]
    # the mean of the groups' own stds of the same run: its share is derived and read, no note
    grouped = make_runset({"x": logs.drop(columns="frac_reward_zero_std").iloc[::k]}, {"x": {"group_size": 4}})
    (res,) = diagnose(grouped, config=FAST, modes=["advantage_degeneracy"])
    assert res.passed is False and "derived_share_below_binomial" not in res.values["evidence"]


def test_a_batch_std_is_told_by_its_constant_ratio_to_the_binary_variance():
    rng = np.random.default_rng(0)
    r = np.clip(0.2 + 0.7 * (1 - np.exp(-np.arange(80) / 20)) + 0.02 * rng.standard_normal(80), 0, 1)
    n = 8 * 16
    assert whole_batch_size(np.sqrt(n / (n - 1) * r * (1 - r)), r) == n
    # logged to 4 decimals (a console log): still told, N only roughly (c - 1 = 1/127 is small)
    rounded = whole_batch_size(np.round(np.sqrt(n / (n - 1) * r * (1 - r)), 4), np.round(r, 4))
    assert rounded is not None and abs(rounded - n) <= 0.1 * n, rounded
    # the mean of 16 groups' stds of G = 16 homogeneous prompts sits near the batch std (ratio
    # ~0.95-1.02) but moves from step to step: not a batch std
    k = rng.binomial(16, r[:, None], size=(80, 16))
    group_mean = np.sqrt(k * (16 - k) / (16 * 15)).mean(axis=1)
    assert whole_batch_size(group_mean, k.mean(axis=1) / 16) is None


def test_a_run_whose_rewards_leave_the_configured_reward_range_is_not_read_on_it():
    # reward_range is one setting for every run of a run set; a healthy run logged on 0-100
    # (the healthy case's reward and reward_std times 100, share not logged) was read on
    # (0, 1): every success probability clipped to 1, share 1.00 "detected from step 0"
    ds = simulated_case("healthy", seed=0).drop_vars("frac_reward_zero_std")
    ds = ds.assign(reward=ds["reward"] * 100, reward_std=ds["reward_std"] * 100)
    given = DiagnosticsConfig.from_mapping(FAST.to_dict() | {"degeneracy": {"reward_range": [0, 1]}})
    (res,) = diagnose(ds, config=given, modes=["advantage_degeneracy"])
    assert res.passed is None, res.summary
    assert "leave degeneracy.reward_range (0, 1)" in res.summary
    given = DiagnosticsConfig.from_mapping(FAST.to_dict() | {"degeneracy": {"reward_range": [0, 100]}})
    (res,) = diagnose(ds, config=given, modes=["advantage_degeneracy"])
    assert res.passed is True, res.summary


def test_advantage_degeneracy_needs_group_size_to_derive_share():
    ds = simulated_case("advantage_degeneracy_from_std").assign_coords(group_size=("run", [np.nan]))
    (res,) = diagnose(ds, config=FAST, modes=["advantage_degeneracy"])
    assert res.passed is None and "group size" in res.summary


def test_a_zero_spread_share_not_found_is_named_when_the_derivation_cannot_stand_in():
    # --set degeneracy.zero_std_metrics=frac_reward_zero_sd (a typo) on a run that logs
    # reward_std but no G: the verdict read "not assessable: group size G unknown (needed to
    # derive the share from reward_std)", never naming the metric it looked for
    t = np.arange(60)
    frame = pd.DataFrame({"reward": 0.3 + 0.4 * t / 60, "reward_std": np.full(60, 0.4)}, index=t)
    ds = make_runset({"x": frame}, {"x": {}})
    typo = DiagnosticsConfig.from_mapping(
        FAST.to_dict() | {"degeneracy": {"zero_std_metrics": ["frac_reward_zero_sd"]}}
    )
    (res,) = diagnose(ds, config=typo, modes=["advantage_degeneracy"])
    assert res.passed is None
    assert "no zero-spread share (frac_reward_zero_sd) with >= 10 points" in res.summary, res.summary
    assert "group size G unknown" in res.summary


def test_a_group_of_one_completion_is_not_called_an_unknown_group_size():
    # G = 1 read "group size G unknown (needed to derive the share from reward_std)"
    ds = simulated_case("advantage_degeneracy_from_std").assign_coords(group_size=("run", [1.0]))
    (res,) = diagnose(ds, config=FAST, modes=["advantage_degeneracy"])
    assert res.passed is None and "G = 1 has no within-group std" in res.summary, res.summary
    assert "unknown" not in res.summary


def test_a_run_that_logs_no_group_size_is_read_at_the_g_its_fit_took_for_it():
    # `fit runs.nc --default group_size=8` then `diagnose runs.nc --posterior fit.nc`: advantage
    # degeneracy read "not assessable: group size G unknown (needed to derive the share from
    # reward_std)" although the fit knew G. Prior draws stand in for the posterior (the plumbing
    # of G is tested, not the sampler)
    import arviz as az

    from bayes_grpo.model import GRPODynamicsModel

    ds = simulated_case("advantage_degeneracy_from_std").assign_coords(group_size=("run", [np.nan]))
    fit = GRPODynamicsModel(
        model_config={"hyperparameter_defaults": {"group_size": 8}}, parameterisation="phenomenological"
    )
    fit.runset = ds
    fit.idata = az.InferenceData(posterior=fit.sample_prior_predictive(ds, samples=20, random_seed=1).prior)
    (res,) = diagnose(ds, config=FAST, posterior=fit, modes=["advantage_degeneracy"])
    assert res.passed is False, res.summary
    assert res.values["evidence"]["group_size"] == 8
    assert res.values["evidence"]["group_size_source"].startswith("the fit (its --default group_size")
    assert "G = 8 from the fit" in res.summary
    # a default given to diagnose does not overrule the G the run was fitted at: said in a warning
    with pytest.warns(UserWarning, match=r"the default group_size 4 is not used for 1 run .*G = 8"):
        (res,) = diagnose(ds, config=FAST, posterior=fit, modes=["advantage_degeneracy"], defaults={"group_size": 4})
    assert res.values["evidence"]["group_size"] == 8
    # a run the fit was not fitted to (other rewards under the same id) takes no G from it
    other = ds.copy(deep=True)
    other["reward"] = other["reward"] * 0.9
    with pytest.warns(UserWarning, match="not fitted to 1 run"):
        (res,) = diagnose(other, config=FAST, posterior=fit, modes=["advantage_degeneracy"])
    assert res.passed is None and "group size G unknown" in res.summary, res.summary


def test_a_default_group_size_reads_the_runs_that_log_none_at_it():
    # a user without a fit had no way to give G to diagnose: the run was not assessable
    ds = simulated_case("advantage_degeneracy_from_std").assign_coords(group_size=("run", [np.nan]))
    (res,) = diagnose(ds, config=FAST, modes=["advantage_degeneracy"], defaults={"group_size": 8})
    assert res.passed is False and res.values["evidence"]["group_size"] == 8, res.summary
    assert "G = 8 from the default given to diagnose (--default group_size)" in res.summary
    # a run that logs its G keeps it, and says so in its evidence only
    logged = simulated_case("advantage_degeneracy_from_std").assign_coords(group_size=("run", [16.0]))
    (res,) = diagnose(logged, config=FAST, modes=["advantage_degeneracy"], defaults={"group_size": 8})
    assert res.values["evidence"]["group_size"] == 16
    assert res.values["evidence"]["group_size_source"] == "the run set" and "G = 16 from" not in res.summary
    with pytest.raises(ValueError, match=r"group_size only .* got \['k_ref'\]"):
        diagnose(ds, config=FAST, modes=["advantage_degeneracy"], defaults={"k_ref": 1})
    for bad in (0, "eight"):
        with pytest.raises(ValueError, match="default group_size must be a finite number > 0"):
            diagnose(ds, config=FAST, modes=["advantage_degeneracy"], defaults={"group_size": bad})


def test_instability_growth_of_side_quantities_detected_with_onset_after_its_start():
    res = _one("instability_growth", "instability")
    assert res.passed is False
    # growth starts at 40% of the 200 steps; the onset is where it has grown by sqrt(3)
    assert 80 <= res.values["onset_step"] <= 150
    detected = {s["signal"] for s in res.values["evidence"]["signals"] if s["detected"]}
    assert {"growth of grad norm", "sustained clipping"} <= detected


def test_instability_reads_the_importance_ratios_that_bayes_grpo_train_logs():
    # the runner's callback logs dynamics/is_ratio_max (dynamics_is_ratio_max in a run set)
    # on every step because TRL does not; instability looked for other names only
    ds = simulated_case("instability_growth").rename(
        {"importance_ratio_max": "dynamics_is_ratio_max"}
    )
    (res,) = diagnose(ds, config=FAST, modes=["instability"])
    (ratio,) = [
        s for s in res.values["evidence"]["signals"] if s["signal"] == "growth of importance ratio"
    ]
    assert ratio["metric"] == "dynamics_is_ratio_max" and ratio["detected"]


@pytest.mark.parametrize("case", ["healthy", "policy_concentration", "advantage_degeneracy"])
def test_side_quantity_signals_quiet_on_runs_without_instability(case):
    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 40, "figures": False}, "instability": {"fit_oscillation": False}}
    )
    res = _one(case, "instability", config=cfg)
    assert res.passed is True, res.summary


@pytest.mark.parametrize("case", ["healthy", "instability_growth", "policy_concentration"])
def test_degeneracy_not_flagged_on_runs_with_signal(case):
    assert _one(case, "advantage_degeneracy").passed is True


def test_a_zero_spread_share_logged_as_a_percentage_is_not_read_as_every_group_degenerate():
    # 20 (for 20%) was clipped to 1: "advantage degeneracy detected: final-window share 1.00",
    # from step 0, on a run whose groups mostly carry signal
    ds = simulated_case("healthy", seed=2)
    pct = ds.assign(frac_reward_zero_std=100 * ds["frac_reward_zero_std"])
    (res,) = diagnose(pct, config=FAST, modes=["advantage_degeneracy"])
    assert res.passed is None, res.summary
    assert "frac_reward_zero_std runs from" in res.summary and "not a share" in res.summary
    (res,) = diagnose(ds, config=FAST, modes=["advantage_degeneracy"])
    assert res.passed is True, res.summary


def test_the_sentence_names_the_metric_it_read():
    # "advantage degeneracy detected: final-window share 0.84 > 0.5" and "entropy lost 50%"
    # did not say which logged metric they were (frac_reward_zero_std; a log's token_entropy)
    res = _one("advantage_degeneracy", "advantage_degeneracy")
    assert res.passed is False and "share (frac_reward_zero_std) 0." in res.summary, res.summary
    assert "(frac_reward_zero_std)" in _one("healthy", "advantage_degeneracy").summary
    ds = simulated_case("policy_concentration")
    ds = ds.rename({"entropy": "token_entropy"})
    drawn = DiagnosticsConfig.from_mapping({"common": {"n_boot": 20, "figures": True}})
    for case in (ds, simulated_case("healthy").rename({"entropy": "token_entropy"})):
        (res,) = diagnose(case, config=drawn, modes=["policy_concentration"])
        assert res.passed is not None and "entropy (token_entropy) " in res.summary, res.summary
        assert len(res.figures) == 1


@pytest.mark.parametrize(
    "setting",
    [
        {"group_size": 1}, {"n_prompts": 0}, {"eval_every": 0}, {"n_steps": 0},
        # NaN failed in int()'s "cannot convert float NaN to integer", inf in an OverflowError
        # and None in int()'s TypeError, naming none of them
        {"n_steps": float("nan")}, {"n_steps": float("inf")}, {"group_size": None},
    ],
)  # fmt: skip
def test_a_simulated_case_refuses_a_setting_it_cannot_simulate_naming_it(setting):
    # G = 1 or no prompt gave reward_std NaN at every step (numpy's "invalid value" warning),
    # an evaluation every 0 steps "slice step cannot be zero"
    (name,) = setting
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=f"simulated_case: {name} must be a whole number"):
            simulated_case("healthy", **setting)


@pytest.mark.parametrize("seed", [1.5, -1, True, None])
def test_a_simulated_case_refuses_a_seed_that_means_nothing_naming_it(seed):
    # the seed is recorded as the run's: 1.5 failed in NumPy's "SeedSequence expects int", -1 in
    # "expected non-negative integer", True was the seed 1 and None a fresh, unrecorded seed
    from bayes_grpo.diagnostics.cases import all_cases

    with pytest.raises(ValueError, match=rf"^seed must be a whole number >= 0 \(a random seed\), got {seed!r}"):
        simulated_case("healthy", seed=seed, n_steps=20)
    with pytest.raises(ValueError, match=rf"^seed must be a whole number >= 0 \(a random seed\), got {seed!r}"):
        all_cases(seed=seed, n_steps=20)
    same = simulated_case("healthy", seed=np.int64(2), n_steps=20)
    np.testing.assert_array_equal(same["reward"].values, simulated_case("healthy", seed=2, n_steps=20)["reward"].values)


def test_missing_metrics_give_not_assessable_never_a_silent_pass():
    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 20, "figures": False}, "instability": {"fit_oscillation": False}}
    )
    results = diagnose(simulated_case("healthy_reward_only"), config=cfg)
    assert [r.name for r in results] == list(MODES)
    for r in results:
        assert r.passed is None, r.summary
        assert r.values["detected"] is None and r.values["reason"]
        assert r.to_dict()["passed"] is None
    table = diagnosis_table(results)
    assert set(table["verdict"]) == {"not assessable"}


def test_too_short_run_is_not_assessable():
    ds = simulated_case("healthy", n_steps=8)
    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"figures": False}, "instability": {"fit_oscillation": False}}
    )
    for r in diagnose(
        ds, config=cfg, modes=["advantage_degeneracy", "instability", "policy_concentration"]
    ):
        assert r.passed is None


# --- thresholds are named and configurable -------------------------------------------------


def test_thresholds_configurable_and_change_the_verdict():
    strict = DiagnosticsConfig.from_assignments(
        [
            "degeneracy.flag_fraction=0.97",
            "degeneracy.min_duration_fraction=0.9",
            "common.n_boot=20",
            "common.figures=false",
        ]
    )
    assert strict.degeneracy.flag_fraction == 0.97 and strict.common.figures is False
    assert _one("advantage_degeneracy", "advantage_degeneracy", config=strict).passed is True


def test_a_reward_range_set_without_brackets_is_read_as_two_numbers():
    # `--set degeneracy.reward_range=-1,1` (a reward on -1..1) was kept as the string "-1,1",
    # whose characters the degeneracy test then read as numbers: "could not convert string
    # to float: '-'"
    for raw in ("-1,1", "[-1, 1]", " -1 , 1"):
        config = DiagnosticsConfig.from_assignments([f"degeneracy.reward_range={raw}"])
        assert config.degeneracy.reward_range == (-1.0, 1.0)
    ten = DiagnosticsConfig.from_assignments(["degeneracy.reward_range=0,10"])
    assert ten.degeneracy.reward_range == (0.0, 10.0)
    with pytest.raises(ValueError, match="degeneracy.reward_range: expected numbers"):
        DiagnosticsConfig.from_assignments(["degeneracy.reward_range=low,high"])


def test_unknown_config_names_raise():
    with pytest.raises(ValueError, match="unknown degeneracy settings"):
        DiagnosticsConfig.from_mapping({"degeneracy": {"flag_frac": 0.5}})
    with pytest.raises(ValueError, match="unknown diagnostics config section"):
        DiagnosticsConfig.from_mapping({"degenerate": {}})
    with pytest.raises(ValueError, match="SECTION.FIELD=VALUE"):
        DiagnosticsConfig.from_assignments(["flag_fraction=0.5"])
    assert json.dumps(DiagnosticsConfig().to_dict())


@pytest.mark.parametrize(
    "assignment, message",
    [
        # no replicate: diagnose died on an IndexError inside advantage_degeneracy
        ("common.n_boot=0", r"common.n_boot must lie in \[1, inf\); got 0"),
        # numpy's "Quantiles must be in the range [0, 1]", naming no setting
        ("common.interval_prob=2", r"common.interval_prob must lie in \(0, 1\)"),
        ("common.interval_prob=NaN", r"common.interval_prob must lie in \(0, 1\); got nan"),
        # int(1.5): the bootstrap ran with seed 1, as if asked for it
        ("common.seed=1.5", r"common.seed: expected an integer, got 1.5"),
        ("common.min_points=0", r"common.min_points must lie in \[1, inf\)"),
        ("common.smooth_fraction=0", r"common.smooth_fraction must lie in \(0, 1\]"),
        ("instability.growth_factor=0.5", r"instability.growth_factor must lie in \(1, inf\)"),
        ("degeneracy.std_ddof=2", r"degeneracy.std_ddof must lie in \[0, 1\]"),
        # TypeError tracebacks: 'int' object is not iterable, too many values to unpack
        ("degeneracy.reward_range=5", r"degeneracy.reward_range: expected two numbers"),
        ("degeneracy.reward_range=[0,1,2]", r"degeneracy.reward_range: expected two numbers"),
        ("degeneracy.reward_range=[1,0]", r"degeneracy.reward_range must have finite low < high"),
    ],
)
def test_a_setting_that_means_nothing_is_refused_naming_it(assignment, message):
    with pytest.raises(ValueError, match=message):
        DiagnosticsConfig.from_assignments([assignment])


def test_a_switch_given_a_number_other_than_0_or_1_is_refused_not_switched_on():
    # bool(2) and bool(0.5): {"instability": {"fit_oscillation": 2}} in a --config file, or
    # --set instability.process_noise_check=0.5, switched the setting on without a word
    for value in (2, 0.5, -1, [0]):
        with pytest.raises(ValueError, match="instability.fit_oscillation: expected true/false"):
            DiagnosticsConfig.from_mapping({"instability": {"fit_oscillation": value}})
    with pytest.raises(ValueError, match="process_noise_check: expected true/false, got 0.5"):
        DiagnosticsConfig.from_assignments(["instability.process_noise_check=0.5"])
    for value, expected in ((0, False), (1, True), (False, False), ("true", True)):
        cfg = DiagnosticsConfig.from_mapping({"instability": {"fit_oscillation": value}})
        assert cfg.instability.fit_oscillation is expected


def test_one_metric_name_given_as_a_number_is_a_name():
    # --set hacking.eval_metrics=5 (JSON reads 5 as a number) died on "'int' object is not iterable"
    assert DiagnosticsConfig.from_assignments(["hacking.eval_metrics=5"]).hacking.eval_metrics == ("5",)


def test_a_config_built_in_python_is_checked_too():
    from bayes_grpo.diagnostics.config import CommonConfig

    with pytest.raises(ValueError, match="common.n_boot must lie in"):
        CommonConfig(n_boot=0)
    with pytest.raises(ValueError, match="common.interval_prob must lie in"):
        dataclasses.replace(FAST.common, interval_prob=1.0)


def test_a_config_section_given_as_a_mapping_is_refused_saying_how_to_build_one():
    # DiagnosticsConfig(degeneracy={"flag_fraction": 0.6}) was taken, and diagnose() died in
    # "'dict' object has no attribute 'reward_range'"
    with pytest.raises(TypeError, match=r"DiagnosticsConfig degeneracy= takes a DegeneracyConfig, got dict; from a mapping: DiagnosticsConfig.from_mapping"):
        DiagnosticsConfig(degeneracy={"flag_fraction": 0.6})


def test_diagnose_takes_its_config_as_the_mapping_of_a_config_file_too():
    # diagnose(ds, config={"degeneracy": {...}}), the shape of `diagnose --config FILE` (and
    # model_config is a dict), died in "'dict' object has no attribute 'hacking'"
    ds = simulated_case("healthy_reward_only", seed=0)
    mapping = FAST.to_dict() | {"instability": {"fit_oscillation": False}}
    by_mapping = diagnose(ds, config=mapping, modes="advantage_degeneracy")
    by_config = diagnose(ds, config=DiagnosticsConfig.from_mapping(mapping), modes="advantage_degeneracy")
    assert [r.to_dict() for r in by_mapping] == [r.to_dict() for r in by_config]
    with pytest.raises(ValueError, match="unknown degeneracy settings"):
        diagnose(ds, config={"degeneracy": {"flag_frac": 0.5}})
    with pytest.raises(TypeError, match="config takes a DiagnosticsConfig or a mapping"):
        diagnose(ds, config=["degeneracy.flag_fraction=0.6"])


def test_one_mode_given_as_a_string_is_that_mode_and_results_come_in_mode_order():
    # run="x" is one run, but modes="instability" was read letter by letter: "unknown
    # diagnostic modes ['a', 'b', 'i', 'l', 'n', 's', 't', 'y']"; and modes given out of order
    # came back in that order, where the docstring promises MODES order
    ds = simulated_case("healthy_reward_only", seed=0)
    cfg = DiagnosticsConfig.from_mapping(FAST.to_dict() | {"instability": {"fit_oscillation": False}})
    (res,) = diagnose(ds, config=cfg, modes="advantage_degeneracy")
    assert res.name == "advantage_degeneracy"
    names = [r.name for r in diagnose(ds, config=cfg, modes=["instability", "reward_hacking"])]
    assert names == ["reward_hacking", "instability"]


def test_unknown_run_and_mode_raise():
    ds = simulated_case("healthy")
    with pytest.raises(ValueError, match="not in the run set"):
        diagnose(ds, run="nope", config=FAST)
    with pytest.raises(ValueError, match="unknown diagnostic modes"):
        diagnose(ds, config=FAST, modes=["hacking"])


def test_results_reproducible_from_seed():
    a = _one("advantage_degeneracy", "advantage_degeneracy").values["strength"]
    b = _one("advantage_degeneracy", "advantage_degeneracy").values["strength"]
    assert a == b


# --- posterior draws give the damping strength ------------------------------------------------


def test_posterior_negative_damping_detected_and_positive_damping_not():
    ds = simulated_case("healthy")
    rng = np.random.default_rng(0)
    unstable = {
        "healthy": {"C_eff": rng.normal(-0.3, 0.1, 400), "zeta": rng.normal(-0.2, 0.05, 400)}
    }
    stable = {"healthy": {"C_eff": rng.normal(0.9, 0.05, 400), "zeta": rng.normal(2.0, 0.2, 400)}}
    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 20, "figures": False}})
    (bad,) = diagnose(ds, config=cfg, posterior=unstable, modes=["instability"])
    (good,) = diagnose(ds, config=cfg, posterior=stable, modes=["instability"])
    assert bad.passed is False and bad.values["strength"]["source"] == "posterior"
    neg = next(s for s in bad.values["evidence"]["signals"] if s["signal"] == "negative damping")
    assert neg["value"] > 0.99
    assert good.passed is True
    assert good.values["posterior"] == "given draws"


def test_plateau_draws_give_expected_zero_spread_at_plateau():
    frame = run_table(simulated_case("advantage_degeneracy"), "advantage_degeneracy")
    res = advantage_degeneracy(
        frame, run_id="x", group_size=8, plateau_draws=np.full(100, 0.97), common=FAST.common
    )
    at = res.values["evidence"]["expected_share_at_plateau"]
    assert at["value"] == pytest.approx(binomial_zero_spread(0.97, 8))


def test_a_posterior_plateau_outside_the_binary_range_gives_no_expected_share():
    # models/tiny.nc's plateau (3.4, from runs that end before their plateau) on data/tiny's
    # success rates: --json gave "expected_share_at_plateau": 1.0 [1.0, 1.0] (p clipped to 1:
    # every group all-equal), a number for a success rate that no binary reward reaches;
    # policy_concentration already sets such a plateau aside
    frame = run_table(simulated_case("advantage_degeneracy"), "advantage_degeneracy")
    res = advantage_degeneracy(
        frame, run_id="x", group_size=8, plateau_draws=np.full(100, 3.4), common=FAST.common
    )
    ev = res.values["evidence"]
    assert "expected_share_at_plateau" not in ev
    assert "3.4 lies outside the binary reward's range [0, 1]" in ev["posterior_plateau_not_used"]
    # draws that straddle an end (a plateau near 1) are still read, each clipped to the range
    res = advantage_degeneracy(
        frame,
        run_id="x",
        group_size=8,
        plateau_draws=np.linspace(0.95, 1.01, 100),
        common=FAST.common,
    )
    assert res.values["evidence"]["expected_share_at_plateau"]["value"] > 0.5


def test_a_posterior_given_to_train_eval_decoupling_alone_is_said_to_be_unused():
    # --mode reward_hacking --posterior fit.nc: no word that the fit plays no part, and each
    # result's values["posterior"] named the draws it had not read
    ds = simulated_case("reward_hacking")
    draws = {"reward_hacking": {"zeta": np.full(50, 1.5), "plateau": np.full(50, 0.5)}}
    with pytest.warns(UserWarning, match="the posterior is not used: reward_hacking reads no"):
        (res,) = diagnose(ds, config=FAST, posterior=draws, modes=["reward_hacking"])
    assert "posterior" not in res.values
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hack, inst = diagnose(
            ds, config=FAST, posterior=draws, modes=["reward_hacking", "instability"]
        )
    assert hack.values["posterior"] == "not used by this mode"
    assert inst.values["posterior"] == "given draws"


def test_instability_function_reports_not_assessable_with_nothing_to_look_at():
    frame = run_table(simulated_case("healthy_reward_only"), "healthy_reward_only")
    cfg = DiagnosticsConfig.from_mapping({"instability": {"fit_oscillation": False}})
    res = instability(frame, run_id="r", config=cfg.instability, common=FAST.common)
    assert res.passed is None and "grad norm" in res.summary


def test_figures_are_drawn_when_asked():
    import matplotlib.pyplot as plt

    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 10, "figures": True}, "instability": {"fit_oscillation": False}}
    )
    results = diagnose(
        simulated_case("instability_growth"),
        config=cfg,
        modes=["advantage_degeneracy", "instability"],
    )
    for r in results:
        assert len(r.figures) == 1
        assert r.figures_as_png()
        for fig in r.figures.values():
            plt.close(fig)


def test_verdict_matrix_lists_every_case_and_mode():
    assert set(CASES) >= {
        "healthy",
        "reward_hacking",
        "advantage_degeneracy",
        "policy_concentration",
        "instability_growth",
        "instability_oscillation",
    }
    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 10, "figures": False}, "instability": {"fit_oscillation": False}}
    )
    res = diagnose(
        simulated_case("advantage_degeneracy"),
        config=cfg,
        modes=["advantage_degeneracy", "instability"],
    )
    m = verdict_matrix(res)
    assert m.loc["advantage_degeneracy", "advantage_degeneracy"] == "detected"
    assert m.loc["advantage_degeneracy", "instability"] == "-"


def test_no_results_make_an_empty_table_and_matrix_not_a_key_error():
    # diagnosis_table([]) (a run set without runs) died in set_index with a KeyError
    table = diagnosis_table([])
    assert table.empty
    assert table.index.names == ["run", "mode"]
    assert {"verdict", "onset_step", "strength", "lower", "upper"} <= set(table.columns)
    assert verdict_matrix([]).empty


@pytest.mark.parametrize(
    "case, mode, lever",
    [
        ("advantage_degeneracy", "advantage_degeneracy", "raise G"),
        ("instability_growth", "instability", "lower the learning rate"),
    ],
)
def test_a_detected_mode_says_what_to_try_and_a_quiet_one_does_not(case, mode, lever):
    # a detection stated its evidence and stopped: the user was left to guess the lever
    res = _one(case, mode)
    assert res.passed is False and lever in res.values["remedy"]
    assert res.summary.endswith(f"What to try: {res.values['remedy']}.")
    quiet = _one("healthy", mode)
    assert quiet.passed is True and quiet.values["remedy"] is None and "What to try" not in quiet.summary


# --- the modes that use the law fits (bayes_grpo.dynamics.lsq) --------------------------------


def test_reward_hacking_onset_is_a_logged_step_when_the_window_is_the_runs_last_quarter():
    # the evaluation rises steadily (never saturates early): the late window is the run's last
    # quarter, which starts between two steps; that point (152.25) was the onset step
    rng = np.random.default_rng(3)
    t = np.arange(204)  # evaluated at 0, 7, ..., 203: the last step too
    ev = np.full(t.size, np.nan)
    ev[::7] = 0.2 + 0.3 * t[::7] / t.size + 0.005 * rng.standard_normal(ev[::7].size)
    r = 0.2 + 0.3 * t / t.size + 0.6 * np.clip((t - 120) / 80, 0, None)
    frame = pd.DataFrame({"reward": r + 0.01 * rng.standard_normal(t.size), "eval_reward": ev}, t)
    res = reward_hacking(frame, run_id="late", common=FAST.common)
    assert res.passed is False, res.summary
    assert res.values["onset_step"] == 153 == res.values["evidence"]["window_start_step"]
    assert "after step 153 " in res.summary


@pytest.mark.parametrize("case", ["healthy", "healthy_noisy"])
def test_the_decoupling_interval_is_as_wide_as_its_spread_over_healthy_runs(case):
    # the 90% interval of d = gain_train - gain_eval resampled the moving median's residuals in
    # blocks as long as its window: a block of them sums to about 0, so the replicates lost the
    # noise's slow variation and the interval had 60-75% of the width the spread of d over
    # seeds calls for (30-step runs: healthy_noisy flagged as hacking in 7-12% of seeds)
    config = DiagnosticsConfig.from_mapping({"common": {"n_boot": 100, "figures": False}})
    d, half_width = [], []
    for seed in range(60):
        frame = run_table(simulated_case(case, seed=seed, n_steps=30, eval_every=1), case)
        st = reward_hacking(frame, run_id=case, config=config.hacking, common=config.common).values[
            "strength"
        ]
        d.append(st["value"])
        half_width.append((st["upper"] - st["lower"]) / 2)
    ratio = np.mean(half_width) / (1.645 * np.std(d, ddof=1))
    assert 0.9 < ratio < 1.4, ratio


def test_a_run_whose_reward_is_its_evaluation_metric_says_so_not_that_the_evaluation_is_missing(tmp_path):
    # a log with eval/reward and no training reward (the public garg_* logs): the ingest takes
    # eval/reward as the reward curve, and reward hacking read "not assessable: no evaluation
    # reward (..., eval/reward, ...) with >= 6 points", naming as missing the metric the log has
    from bayes_grpo.runset.ingest import load_runs

    steps = np.arange(0, 200, 8)
    pd.DataFrame(
        {"step": steps, "eval/reward": 0.7 - 0.6 * np.exp(-steps / 50), "train/entropy": 1.0 - steps / 400}
    ).to_csv(tmp_path / "evalonly.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the ingest's "no training reward"
        ds = load_runs(tmp_path / "evalonly.csv")
    (res,) = diagnose(ds, config=FAST, modes=["reward_hacking"])
    assert res.passed is None
    assert "the run's reward curve is its evaluation metric 'eval/reward'" in res.summary, res.summary
    assert "no evaluation reward" not in res.summary
    # a run set made without the ingest has no such record: the usual reason
    (res,) = diagnose(
        make_runset({"x": pd.DataFrame({"reward": 0.7 - 0.6 * np.exp(-steps / 50)}, index=steps)}, {"x": {}}),
        config=FAST,
        modes=["reward_hacking"],
    )
    assert "no evaluation reward" in res.summary


def test_reward_hacking_flagged_when_training_rises_while_evaluation_falls():
    res = _one("reward_hacking", "reward_hacking")
    assert res.passed is False, res.summary
    # the hacked component starts at 35% of 200 steps; evaluation saturates around then
    assert 30 <= res.values["onset_step"] <= 120
    ev = res.values["evidence"]
    assert ev["train_gain"] > 0.2 and ev["eval_gain"] < 0.05
    assert res.values["strength"]["lower"] > 0.1
    # same law on both rewards: the training plateau lies above the evaluation plateau
    assert ev["plateau_difference"]["lower"] > 0


def test_reward_hacking_with_an_evaluation_that_rises_and_falls_warns_nothing_from_numpy():
    # the training reward climbs in a straight line while the evaluation accuracy holds, then
    # falls: its single-exponential time constant has a log sd of hundreds, and exp() of the
    # interval's end printed numpy's "RuntimeWarning: overflow encountered in exp" (with the
    # source line) under every such `bayes-grpo diagnose` table
    from bayes_grpo.diagnostics import reward_hacking

    rng = np.random.default_rng(0)
    steps = np.arange(1, 201, dtype=float)
    ev = np.full(200, np.nan)
    at = np.arange(9, 200, 10)
    ev[at] = 0.5 + 0.02 * rng.standard_normal(at.size) - 0.2 * np.clip((steps[at] - 80) / 120, 0, 1)
    frame = pd.DataFrame(
        {"reward": 0.3 + 0.5 * steps / 200 + 0.03 * rng.standard_normal(200), "eval_accuracy": ev},
        index=pd.Index(steps, name="step"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = reward_hacking(frame, run_id="hacked", common=FAST.common)
    assert res.passed is False, res.summary
    ratio = res.values["evidence"]["time_constant_ratio"]
    assert ratio["lower"] <= ratio["value"] <= ratio["upper"] == np.inf


@pytest.mark.parametrize("case", ["healthy", "advantage_degeneracy", "instability_oscillation"])
def test_reward_hacking_not_flagged_when_train_and_eval_move_together(case):
    res = _one(case, "reward_hacking")
    assert res.passed is True, res.summary


def test_reward_hacking_not_assessable_when_eval_is_constant_but_for_one_value():
    """An evaluation accuracy of 0 at every evaluation but one: its raw range is not 0, but the
    range of its moving median (the scale the gains are measured on) is; the gain was NaN and
    the run read "not detected" with a NaN strength ("eval gain +nan%")."""
    steps = np.arange(0, 100, 5)
    ev = np.zeros(steps.size)
    ev[10] = 0.02
    frame = pd.DataFrame(
        {"reward": np.linspace(0.2, 0.8, steps.size), "eval_reward": ev}, index=steps
    )
    (res,) = diagnose(make_runset({"r": frame}), config=FAST, modes=["reward_hacking"])
    assert res.passed is None and res.values["detected"] is None, res.summary
    assert "evaluation reward constant apart from isolated values" in res.summary
    assert "nan" not in res.summary


def test_reward_hacking_compares_the_gains_only_where_the_evaluation_is_logged():
    # an evaluation logged up to step 150 of a 300-step run, rising with the training reward:
    # "train-eval decoupling detected: after step 126 the training reward gains 35% of its
    # range while the evaluation reward (eval_reward) saturates (+9%)", the training gain taken
    # up to step 299, the evaluation's up to step 150
    rng = np.random.default_rng(0)
    t = np.arange(300)
    p = 0.1 + 0.6 * (1 - np.exp(-t / 150))
    ev = np.full(300, np.nan)
    ev[:151:3] = 0.9 * p[:151:3] + 0.005 * rng.standard_normal(51)
    frame = pd.DataFrame({"reward": p + 0.02 * rng.standard_normal(300), "eval_reward": ev}, t)
    res = reward_hacking(frame, run_id="r", common=FAST.common)
    assert res.passed is True, res.summary
    assert res.values["evidence"]["train_points_after_last_eval_left_out"] == 149
    assert "149 points after the last evaluation (step 150) are left out" in res.summary


def test_reward_hacking_not_assessable_when_evaluation_goes_on_past_the_training_reward():
    """Evaluations logged after the training reward's last step put the late window where the
    training reward has no point: its gain was NaN and the run read "not detected" ("train gain
    +nan%")."""
    train = pd.DataFrame({"reward": np.linspace(0.2, 0.8, 30)}, index=np.arange(30))
    ev = pd.DataFrame({"eval_reward": np.linspace(0.1, 0.4, 8)}, index=np.arange(100, 108))
    frame = pd.concat([train, ev])
    (res,) = diagnose(make_runset({"r": frame}), config=FAST, modes=["reward_hacking"])
    assert res.passed is None and res.values["detected"] is None, res.summary
    assert "only 0 training-reward points after step" in res.summary
    assert "nan" not in res.summary


def test_policy_concentration_flagged_when_entropy_collapses_ahead_of_reward():
    res = _one("policy_concentration", "policy_concentration")
    assert res.passed is False, res.summary
    assert res.values["onset_step"] < 60
    assert res.values["evidence"]["progress_at_onset"] < 0.5
    assert res.values["strength"]["value"] > 0.5


@pytest.mark.parametrize("case", ["healthy", "reward_hacking", "instability_growth"])
def test_policy_concentration_not_flagged_when_entropy_follows_reward(case):
    res = _one(case, "policy_concentration")
    assert res.passed is True, res.summary


def _rose_before_its_entropy_fell(rng) -> pd.DataFrame:
    """200 steps of a reward that rises from 0.2 to its plateau 0.7 (time scale 10 steps) before
    the entropy falls to 0.4 of its start (time scale 60): no concentration."""
    t = np.arange(200)
    reward = 0.2 + 0.5 * (1 - np.exp(-t / 10)) + 0.02 * rng.standard_normal(200)
    entropy = (0.4 + 0.6 * np.exp(-t / 60)) * np.exp(0.02 * rng.standard_normal(200))
    return pd.DataFrame({"reward": reward, "entropy": entropy}, index=t)


def test_a_posterior_plateau_on_the_far_side_of_the_start_is_not_this_runs_plateau():
    # a run that rose to its plateau before the entropy fell (not concentration), given the
    # plateau draws of a posterior of other runs lying below its start: "policy concentration
    # detected: ... while the reward had covered -68% of its way to the plateau"
    rng = np.random.default_rng(0)
    frame = _rose_before_its_entropy_fell(rng)
    kw = {"run_id": "r", "config": FAST.concentration, "common": FAST.common}
    own = policy_concentration(frame, **kw)
    below = policy_concentration(frame, **kw, plateau_draws=rng.normal(0.1, 0.01, 400))
    assert own.passed is True and below.passed is True, below.summary
    assert below.values["strength"]["value"] == pytest.approx(own.values["strength"]["value"])
    assert "on the other side of the reward's start" in below.values["evidence"]["plateau_source"]
    near = policy_concentration(frame, **kw, plateau_draws=rng.normal(0.72, 0.01, 400))
    assert near.values["evidence"]["plateau_source"] == "posterior"


def test_a_posterior_plateau_no_success_rate_can_reach_is_not_this_runs_plateau():
    # models/tiny.nc's runs end before their plateau, which the fit puts at 3.44 on a 0-1
    # reward: with it, every one of them "had covered 3% of its way to the plateau" when its
    # entropy fell
    rng = np.random.default_rng(0)
    frame = _rose_before_its_entropy_fell(rng)
    assert frame["reward"].between(0, 1).all()
    kw = {"run_id": "r", "config": FAST.concentration, "common": FAST.common}
    own = policy_concentration(frame, **kw)
    beyond = policy_concentration(frame, **kw, plateau_draws=rng.normal(3.44, 0.3, 400))
    assert own.passed is True and beyond.passed is True, beyond.summary
    assert beyond.values["strength"]["value"] == pytest.approx(own.values["strength"]["value"])
    assert "lies outside [0, 1]" in beyond.values["evidence"]["plateau_source"]
    # a reward on another scale keeps the posterior's plateau
    scaled = frame.assign(reward=frame["reward"] * 3)
    far = policy_concentration(scaled, **kw, plateau_draws=rng.normal(2.2, 0.01, 400))
    assert far.values["evidence"]["plateau_source"] == "posterior"


def test_policy_concentration_flagged_when_entropy_collapses_and_reward_never_moves():
    rng = np.random.default_rng(5)
    steps = np.arange(150)
    frame = run_table(simulated_case("healthy", n_steps=150), "healthy")
    frame["reward"] = 0.3 + 0.03 * rng.standard_normal(150)
    frame["entropy"] = 1.0 * np.exp(-steps / 30.0) + 0.02 * rng.random(150)
    from bayes_grpo.diagnostics import policy_concentration

    res = policy_concentration(frame, run_id="flat", common=FAST.common)
    assert res.passed is False and res.values["evidence"]["reward_has_trend"] is False
    assert res.values["evidence"]["entropy_collapse"] is True


def test_policy_concentration_on_a_reward_without_trend_names_the_final_loss_as_its_strength():
    # data/tiny's g4_p8_lr0.001_k1_adamw_s1 (reward stuck at 0): the sentence said "the reward
    # has no trend ..., so only a collapse counts; final entropy loss 2%", while the table and
    # --json named the same number "relative entropy loss when the reward reaches 50% of its
    # rise", source "bootstrap + fitted plateau (Gauss-Newton)": no rise, no plateau was used
    from bayes_grpo.diagnostics import policy_concentration

    rng = np.random.default_rng(5)
    steps = np.arange(1, 201)
    frame = pd.DataFrame(
        {
            "reward": 0.3 + 0.03 * rng.standard_normal(200),
            "entropy": 2.0 - 0.2 * steps / 200 + 0.01 * rng.standard_normal(200),
        },
        index=steps,
    )
    res = policy_concentration(frame, run_id="flat", common=FAST.common)
    ev, st = res.values["evidence"], res.values["strength"]
    assert res.passed is True and ev["reward_has_trend"] is False
    assert st["name"].startswith("final relative entropy loss") and "rise" not in st["name"]
    assert st["source"] == "bootstrap", st
    assert st["value"] == pytest.approx(ev["final_entropy_drop"])
    assert st["lower"] <= st["value"] <= st["upper"]


def test_a_small_entropy_gain_keeps_its_sign_and_size_in_the_summary_and_the_table_names_its_unit():
    # a reward without trend whose entropy ended 0.5% above its start: the sentence read "final
    # entropy loss -1%" (twice the size, by rounding to a whole percent) while the table showed
    # "final entropy loss -0.005152", a fraction said nowhere to be one
    from bayes_grpo.checks.base import fraction_percent
    from bayes_grpo.diagnostics import policy_concentration

    rng = np.random.default_rng(5)
    steps = np.arange(1, 201)
    frame = pd.DataFrame(
        {"reward": 0.3 + 0.03 * rng.standard_normal(200), "entropy": 2.0 + 0.012 * steps / 200},
        index=steps,
    )
    res = policy_concentration(frame, run_id="flat", common=FAST.common)
    final = res.values["evidence"]["final_entropy_drop"]
    assert -0.006 < final < -0.005, final
    assert f"final entropy loss {fraction_percent(final)} <" in res.summary, res.summary
    assert fraction_percent(final) == f"{100 * final:.2f}%"  # -0.5x%: two significant digits
    rows = list(res.table.index)
    assert "final entropy loss (fraction of the start level)" in rows, rows
    assert "entropy loss at threshold (fraction of the start level)" in rows, rows
    assert "final progress (fraction of the rise)" in rows and "progress at entropy onset (fraction of the rise)" in rows, rows
    assert res.table.loc["final entropy loss (fraction of the start level)", "value"] == pytest.approx(final)


@pytest.mark.parametrize(
    ("value", "threshold", "text"),
    [(-0.005152, None, "-0.52%"), (0.4567, None, "46%"), (0.04567, None, "4.6%"), (0.0, None, "0%"),
     (1.0, None, "100%"), (0.8996, 0.9, "89.96%"), (0.9, 0.9, "90%"), (-0.00004, None, "-0.0040%")],
)
def test_a_fraction_is_written_as_a_percentage_of_two_significant_digits_on_its_side_of_a_threshold(value, threshold, text):
    from bayes_grpo.checks.base import fraction_percent

    assert fraction_percent(value, threshold=threshold) == text


def test_a_fitted_plateau_no_success_rate_reaches_is_not_the_way_to_progress():
    # data/tiny's g16_p8_lr0.001_k1_adamw_s0 (a slow start, rewards rising to 0.99): the single
    # exponential put the plateau at 2.43, sd 1.07, "bounded" by its interval, and the sentence
    # read "the reward had covered 4% of its way to the plateau"; the reward never got half way
    # to 2.43, so the strength was the run's final entropy loss. A posterior plateau outside
    # [0, 1] was already set aside for such a run; the fitted one is now too
    from pathlib import Path

    from bayes_grpo.diagnostics import policy_concentration
    from bayes_grpo.runset.ingest import load_runs

    run = "g16_p8_lr0.001_k1_adamw_s0"
    ds = load_runs([Path(__file__).resolve().parents[1] / "data" / "tiny" / run])
    res = policy_concentration(run_table(ds, run), run_id=run, common=FAST.common)
    ev, st = res.values["evidence"], res.values["strength"]
    assert ev["plateau"] > 1.0 and ev["progress_measured_to"] <= 1.0, ev
    assert "outside [0, 1]" in ev["plateau_source"] and "outside [0, 1]" in st["source"]
    assert res.passed is False and 0.08 < ev["progress_at_onset"] < 0.2, res.summary
    assert st["name"] == "relative entropy loss when the reward reaches 50% of its rise"
    assert st["value"] < ev["final_entropy_drop"]
    # the figure's line at that level says why too (it read "p* not bounded")
    drawn = dataclasses.replace(FAST.common, figures=True)
    (fig,) = policy_concentration(run_table(ds, run), run_id=run, common=drawn).figures.values()
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert "extreme logged reward (p* outside [0, 1])" in labels, labels


def test_an_entropy_loss_that_was_regained_is_not_said_never_to_have_happened():
    # the entropy at 30% of its start over steps 41-130 of 300, then back: "not detected:
    # entropy never lost 50% of its start level (final loss 2%); strength 0.703 ...", the
    # strength itself a loss of 70%
    from bayes_grpo.diagnostics import policy_concentration

    rng = np.random.default_rng(0)
    t = np.arange(1, 301.0)
    reward = 0.1 + 0.8 * (1 - np.exp(-t / 120)) + 0.02 * rng.standard_normal(300)
    entropy = np.full(300, 2.0)
    entropy[40:130] = 0.6
    entropy *= np.exp(0.03 * rng.standard_normal(300))
    frame = pd.DataFrame({"reward": reward, "entropy": entropy}, index=t)
    res = policy_concentration(frame, run_id="dip", common=FAST.common)
    assert res.passed is True and "never lost" not in res.summary
    assert "lost 50% of its start level over steps 41-130" in res.summary, res.summary
    assert "regained it: no sustained loss (final loss 2.4%)" in res.summary  # two significant digits


def _still_rising(entropy_time_scale: float | None) -> pd.DataFrame:
    """A log cut short: a success rate rising in a straight line from 0.2 to 0.6 over 300 steps
    (its single-exponential plateau not bounded by the log); the entropy falls in step with
    it by 60% (None), or by 80% within the first tens of steps."""
    rng = np.random.default_rng(3)
    steps = np.arange(1, 301, dtype=float)
    reward = 0.2 + 0.4 * steps / 300 + 0.03 * rng.standard_normal(300)
    if entropy_time_scale is None:
        entropy = 1.0 - 0.6 * steps / 300
    else:
        entropy = 0.2 + 0.8 * np.exp(-steps / entropy_time_scale)
    entropy = entropy * np.exp(0.03 * rng.standard_normal(300))
    return pd.DataFrame({"reward": reward, "entropy": entropy}, index=pd.Index(steps, name="step"))


def test_policy_concentration_not_flagged_on_a_reward_still_rising_with_the_entropy_in_step():
    # the single exponential put the plateau of this 0.2 -> 0.6 success rate at 1.5-200 (sd
    # larger still), so the entropy's halving at ~0.5 read as "the reward had covered 0% of its
    # way to the plateau": progress is measured to the highest logged reward when the fit does
    # not bound the plateau, a lower bound of the way covered
    from bayes_grpo.diagnostics import policy_concentration

    common = dataclasses.replace(FAST.common, figures=True)
    res = policy_concentration(_still_rising(None), run_id="cut-short", common=common)
    ev = res.values["evidence"]
    assert ev["plateau_bounded_by_run"] is False
    assert ev["progress_measured_to"] < 0.7 and ev["progress_at_onset"] > 0.5
    assert res.passed is True, res.summary
    # the figure's dashed level is the one the progress is measured to, inside the reward's
    # axis (the unbounded plateau squashed the reward curve)
    (fig,) = res.figures.values()
    reward_axis = fig.axes[1]
    (level,) = [line for line in reward_axis.get_lines() if line.get_linestyle() == "--"]
    assert level.get_ydata()[0] == pytest.approx(ev["progress_measured_to"])
    assert "not bounded" in level.get_label()


def test_policy_concentration_still_flagged_on_an_early_entropy_fall_of_a_reward_still_rising():
    from bayes_grpo.diagnostics import policy_concentration

    res = policy_concentration(_still_rising(20.0), run_id="early-fall", common=FAST.common)
    assert res.passed is False, res.summary
    assert res.values["evidence"]["premature_concentration"] is True
    assert "extreme logged level" in res.summary
    assert res.values["evidence"]["progress_at_onset"] < 0.3


def test_reward_oscillation_detected_and_damping_ratio_recovered():
    res = _one("instability_oscillation", "instability")
    assert res.passed is False, res.summary
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert osc["detected"] and osc["upper"] < 1.0
    assert osc["lower"] - 0.05 <= 0.15 <= osc["upper"] + 0.05  # truth zeta = 0.15
    assert res.values["onset_step"] is not None


def test_reward_oscillation_not_flagged_on_overdamped_run():
    res = _one("healthy", "instability")
    assert res.passed is True, res.summary
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert osc["value"] > 0.8  # truth zeta = 1.3


def test_reward_oscillation_reports_a_damping_ratio_the_run_does_not_bound_as_not_identified():
    """A slow rise seen only as a single exponential (the oscillator fit runs along the
    overdamped ridge) gets the interval [0, inf] and the reason, not a Gauss-Newton interval
    spanning hundreds of decades; it is never flagged."""
    rng = np.random.default_rng(3)
    frame = run_table(simulated_case("healthy", n_steps=40), "healthy")
    t = frame.index.to_numpy(dtype=float)  # steps
    frame["reward"] = 0.2 + 0.3 * (1 - np.exp(-t / 400.0)) + 0.01 * rng.standard_normal(len(frame))
    res = instability(frame, run_id="slow", common=FAST.common)
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert osc["zeta_not_identified_because"], osc
    assert osc["lower"] == 0.0 and osc["upper"] == np.inf and not osc["detected"]
    assert "zeta not identified by this run" in res.summary


def test_a_constant_reward_bounds_no_damping_ratio():
    """A constant reward does not depend on zeta at all: its interval is [0, inf] with the
    reason, not the zero-width [0.15, 0.15] that the pseudo-inverse's zero variance gave."""
    frame = run_table(simulated_case("healthy", n_steps=60), "healthy")
    frame["reward"] = 0.5
    res = instability(frame, run_id="flat", common=FAST.common)
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert (osc["lower"], osc["upper"]) == (0.0, np.inf) and not osc["detected"]
    assert "Jacobian is singular" in res.summary


def test_a_damping_ratio_the_run_does_not_identify_reads_not_identified_in_the_sentence():
    """diagnose --verbose printed the sentence 'reward oscillation damping ratio zeta (oscillator
    fit) = 0.001 [0, inf] (zeta not identified by this run: ...)' (data/tiny, 11 of 16 runs)
    while the table says 'not identified': a bound at 0 and an infinity read as numbers."""
    frame = run_table(simulated_case("healthy", n_steps=60), "healthy")
    frame["reward"] = 0.5
    res = instability(frame, run_id="flat", common=FAST.common)
    assert "[0, inf]" not in res.summary, res.summary
    assert "[not identified] (zeta not identified by this run" in res.summary, res.summary
    # a strength with such an interval, and one open end alone, which keeps its number
    st = {"value": 0.2, "lower": 0.0, "upper": np.inf, "interval_prob": 0.9, "source": "Gauss-Newton"}
    assert fmt_interval(st) == "0.2 [not identified] (90% Gauss-Newton)"
    assert fmt_interval(st | {"lower": 0.1}) == "0.2 [0.1, inf] (90% Gauss-Newton)"
    assert fmt_interval(st | {"upper": 0.5}) == "0.2 [0, 0.5] (90% Gauss-Newton)"


@pytest.mark.parametrize("level, n_steps", [(0.1, 200), (0.1, 1000), (0.7, 1000)])
def test_a_constant_reward_has_no_swing_and_no_fall(level, n_steps):
    """A reward constant over the run has sd 0 about its line in each window and falls by 0:
    the swing ratio is the both-zero 1 (without an interval), the collapse 0 sds. The float
    roundoff (1e-17) of the least-squares residuals and of the windows' cumulative-sum means was
    read as spreads and falls: at 0.1 over 1000 steps 'sd about a line, last 25% / central 25% =
    2.24 [...]' and 'fall from the best 25% window to the last, in within-window sds = 144'
    (579 at 0.7)."""
    frame = pd.DataFrame({"reward": np.full(n_steps, level)}, index=np.arange(1, n_steps + 1))
    res = instability(frame, run_id="flat", common=FAST.common)
    osc = _signal(res, "growing reward oscillation")
    assert (osc["central_sd"], osc["late_sd"], osc["value"]) == (0.0, 0.0, 1.0), res.summary
    assert np.isnan(osc["lower"]) and np.isnan(osc["upper"])
    assert "last 25% / central 25% = 1;" in res.summary
    fall = _signal(res, "reward collapse")
    assert (fall["value"], fall["within_window_sd"], fall["ends_below_its_start"]) == (
        0.0,
        0.0,
        False,
    ), res.summary


def test_an_overshoot_inside_a_gap_of_the_log_is_no_oscillation():
    """The same oscillating run is flagged when logged throughout, not when its reward is NaN
    over the overshoot and the next swings (steps 15-149): the fit can still draw a swing
    there, but the log shows none."""
    frame = run_table(
        simulated_case("instability_oscillation_mild"), "instability_oscillation_mild"
    )
    assert instability(frame, run_id="x", common=FAST.common).passed is False
    frame.loc[15:149, "reward"] = np.nan
    res = instability(frame, run_id="x", common=FAST.common)
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert res.passed is True and not osc["detected"], res.summary
    assert any("overshoot amplitude at the logged steps" in w for w in osc["not_credible_because"])


@pytest.mark.parametrize("seed", [0, 13])
def test_a_reward_that_wanders_about_an_overdamped_curve_is_no_oscillation(seed):
    """Process noise (the SDE's own fluctuations, correlated over tens of steps) makes a slow
    overdamped run (truth zeta 1.5) swing; the oscillator fitted under independent noise
    reads the swings as an underdamped law with a tight interval. Once the state-space law
    may explain them as noise, zeta >= 1 is not ruled out and nothing is flagged; without
    that check (the old behaviour) these runs were flagged."""
    ds = simulated_case("healthy_wandering", seed=seed)
    frame = run_table(ds, "healthy_wandering")
    res = instability(frame, run_id="w", common=FAST.common)
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert res.passed is True and not osc["detected"], res.summary
    assert any("with process noise" in w for w in osc["not_credible_because"]), osc
    assert osc["state_space_likelihood_ratio"] < 2.71
    unchecked = DiagnosticsConfig.from_mapping({"instability": {"process_noise_check": False}})
    old = instability(frame, run_id="w", config=unchecked.instability, common=FAST.common)
    assert old.passed is False, old.summary


def test_zeta_interval_of_a_wandering_run_is_open_above_when_process_noise_may_explain_the_swings():
    """The strength shown in the diagnosis table was the independent-noise interval, e.g.
    zeta 0.33 [0.19, 0.56] for a run whose truth is 1.6, next to a verdict that says
    zeta >= 1 is not ruled out; the interval at the stated probability reaches past 1."""
    frame = run_table(simulated_case("healthy_wandering", seed=0), "healthy_wandering")
    res = instability(frame, run_id="w", common=FAST.common)
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert any("with process noise" in w for w in osc["not_credible_because"]), osc
    assert osc["value"] < 1.0 and osc["upper"] == np.inf
    assert res.values["strength"]["upper"] == np.inf


def test_posterior_oscillation_read_from_a_wander_is_no_oscillation_unless_the_fit_had_process_noise():
    """An i.i.d. fit of a wandering overdamped run (truth zeta 1.5) draws zeta well below 1
    (a one-run phenomenological fit of such a run gave 0.33 for a truth of 1.6). Those draws
    must pass the same process-noise check as the least-squares fit (the old code flagged the
    run with P(zeta < 1) = 1); draws from a state-space fit are taken as they are, and a real
    oscillation with such draws is still flagged."""
    rng = np.random.default_rng(0)
    swings = {"zeta": rng.normal(0.33, 0.03, 400), "C_eff": rng.normal(0.05, 0.005, 400)}
    frame = run_table(simulated_case("healthy_wandering", seed=0), "healthy_wandering")
    res = instability(frame, run_id="w", common=FAST.common, posterior_draws=swings)
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert res.passed is True and not osc["detected"], res.summary
    assert any("with process noise" in w for w in osc["not_credible_because"]), osc
    assert "oscillation not credible" in res.summary
    trusted = instability(
        frame,
        run_id="w",
        common=FAST.common,
        posterior_draws=swings,
        posterior_with_process_noise=True,
    )
    assert trusted.passed is False, trusted.summary
    real = run_table(simulated_case("instability_oscillation"), "instability_oscillation")
    res = instability(real, run_id="o", common=FAST.common, posterior_draws=swings)
    assert res.passed is False, res.summary


def test_an_underdamped_posterior_not_flagged_says_why_and_what_zeta_measures():
    # posterior zeta about 0.85: P(zeta < 1) = 1, but an overshoot of 0.6%, below min_overshoot.
    # The sentence read "not detected: ... reward oscillation P(zeta < 1.0) 1 (posterior median
    # 0.849 ...)" and the table's row P(zeta < 1.0) 1 >= threshold 0.9, detected False, with no
    # reason: read as "oscillating with certainty, yet no instability". Both now give the reason
    # and say that zeta < 1 is an oscillating (stable) law and C_eff < 0 an unstable one
    rng = np.random.default_rng(0)
    t = np.arange(1, 201)
    frame = pd.DataFrame(
        {"reward": 0.2 + 0.6 * (1 - np.exp(-t / 30)) + 0.02 * rng.standard_normal(200)}, index=t
    )
    draws = {"zeta": rng.normal(0.85, 0.03, 2000), "C_eff": rng.normal(0.1, 0.01, 2000)}
    res = instability(
        frame, run_id="x", common=FAST.common, posterior_draws=draws, posterior_with_process_noise=True
    )
    assert res.passed is True
    assert "below instability.min_overshoot 0.05: no visible swing" in res.summary, res.summary
    assert "zeta < 1 says the law oscillates" in res.summary and "not that it is unstable" in res.summary
    assert "C_eff < 0 says the law is unstable" in res.summary
    note = res.table.loc["reward oscillation", "note"]
    assert "not that it is unstable" in note and "no visible swing" in note
    assert "unstable" in res.table.loc["negative damping", "note"]
    # --json carries the evidence, not the table: each signal's note is there too
    osc = next(s for s in res.to_dict()["values"]["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert osc["note"] == note
    # an overdamped posterior: nothing to explain, the sentence does not add it
    over = {"zeta": rng.normal(3.0, 0.1, 2000), "C_eff": rng.normal(0.1, 0.01, 2000)}
    res = instability(frame, run_id="x", common=FAST.common, posterior_draws=over)
    assert "The law's damping" not in res.summary


def test_a_damping_ratio_the_run_does_not_bound_gets_no_note_on_what_zeta_measures():
    # a flat, noisy reward: the least-squares zeta 0.001 with its interval opened to [0, inf]
    # (not identified) was followed by "The law's damping: zeta < 1 says the law oscillates ...",
    # as if the run had shown an underdamped law; only an interval below 1 says so
    rng = np.random.default_rng(0)
    t = np.arange(1, 159)
    frame = pd.DataFrame({"reward": 2.0 + 0.5 * rng.standard_normal(158)}, index=t)
    res = instability(frame, run_id="x", common=FAST.common)
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert osc["value"] < 1.0 and osc["upper"] == np.inf, osc
    assert "The law's damping" not in res.summary, res.summary


def test_an_instability_verdict_of_a_reward_oscillation_alone_says_it_is_the_law_oscillating():
    rng = np.random.default_rng(0)
    swings = {"zeta": rng.normal(0.33, 0.03, 400), "C_eff": rng.normal(0.05, 0.005, 400)}
    frame = run_table(simulated_case("healthy_wandering", seed=0), "healthy_wandering")
    res = instability(
        frame, run_id="w", common=FAST.common, posterior_draws=swings, posterior_with_process_noise=True
    )
    assert res.passed is False
    assert "Only a reward oscillation was detected: zeta < 1 says the law oscillates" in res.summary, res.summary
    assert "no signal of growth, divergence or negative damping came with it" in res.summary
    # its remedy is the oscillation's: it read "lower ... below the threshold eta K K_ref = 1 - mu
    # ..., and resume from a checkpoint before the onset", the instability's (noticed by diag7)
    assert res.values["remedy"].startswith("swings that settle are the law's underdamped regime")
    assert "resume from a checkpoint" not in res.summary and res.summary.endswith(f"What to try: {res.values['remedy']}.")


def test_diagnose_takes_the_draws_of_a_state_space_fit_as_they_are():
    from bayes_grpo.diagnostics._posterior import has_process_noise

    fake = _FakeFit(0.05, 0.33, 0.7)
    assert not has_process_noise(fake) and not has_process_noise({"r": {}})
    fake.likelihood = "state_space"
    assert has_process_noise(fake)


def test_an_oscillation_with_independent_noise_survives_the_process_noise_check():
    res = _one("instability_oscillation_mild", "instability")
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert res.passed is False and osc["detected"], res.summary
    assert osc["state_space_likelihood_ratio"] > 10.0 and osc["state_space_zeta"] < 0.7


def test_laplace_sd_is_infinite_for_a_parameter_the_curve_ignores():
    from bayes_grpo.diagnostics._fits import laplace_sd

    t = np.arange(20.0)
    rng = np.random.default_rng(0)
    sd = laplace_sd(lambda th: th[0] + th[1] * t + 0.0 * th[2], np.ones(3), rng.normal(size=20))
    assert np.all(np.isfinite(sd[:2])) and sd[2] == np.inf


@pytest.mark.parametrize(("factor", "offset"), [(1e-9, 0.0), (1e-3, 0.0), (1e4, 0.0), (-3.0, 1000.0)])
def test_law_fit_uncertainties_do_not_depend_on_the_reward_scale(factor, offset):
    # laplace_sd judged directions the curve ignores on the raw J^T J: with rewards of order
    # 1e-9 its level columns were 1e9 times its time-scale columns, so log_zeta_sd and
    # log_time_constant_sd read inf (the damping test then called zeta unbounded) and
    # plateau_sd was 13% off
    from bayes_grpo.diagnostics import _fits
    from bayes_grpo.dynamics.trajectory import reward_trajectory

    t = np.arange(200.0)
    y = reward_trajectory(t, 1.0, 2 * 0.4 * 0.05, 0.05**2, 0.8, 0.2)
    y = y + 0.02 * np.random.default_rng(0).standard_normal(t.size)
    moved = factor * y + offset
    osc, osc_moved = _fits.fit_oscillator(t, y), _fits.fit_oscillator(t, moved)
    sat, sat_moved = _fits.fit_saturation(t, y), _fits.fit_saturation(t, moved)
    assert osc_moved["log_zeta_sd"] == pytest.approx(osc["log_zeta_sd"], rel=1e-4)
    assert sat_moved["log_time_constant_sd"] == pytest.approx(sat["log_time_constant_sd"], rel=1e-4)
    assert sat_moved["plateau_sd"] == pytest.approx(abs(factor) * sat["plateau_sd"], rel=1e-4)


@pytest.mark.parametrize(
    "zeta, lo, hi, at_bounds, expected",
    [
        (0.3, 0.2, 0.45, [], (0.2, 0.45)),  # an ordinary interval stands
        (1e-3, 5e-4, 0.02, ["zeta"], (0.0, 0.02)),  # undamped: zeta may be smaller still
        (30.0, 10.0, 90.0, ["w0"], (10.0, np.inf)),  # overdamped ridge: no upper end
        (4.0, 1e-3, 1e4, [], (0.0, np.inf)),  # wider than the configured factor (1e4)
        (0.5, float("nan"), float("nan"), [], (0.0, np.inf)),  # no interval at all
    ],
)
def test_zeta_interval_opens_where_the_fit_does_not_bound_it(zeta, lo, hi, at_bounds, expected):
    from bayes_grpo.diagnostics.instability import zeta_interval_limits

    got_lo, got_hi, reasons = zeta_interval_limits(zeta, lo, hi, at_bounds, FAST.instability)
    assert (got_lo, got_hi) == expected
    assert bool(reasons) is (expected != (lo, hi))


# --- softmax-bandit runs: known instability, anchor and task difficulty ------------------------


@pytest.mark.parametrize(
    "case",
    [
        "bandit_healthy",
        "bandit_large_lr",
        "bandit_large_k_ref",
        "bandit_tiny_anchor",
        "bandit_easy_task",
    ],
)
def test_bandit_runs_show_exactly_the_modes_they_are_built_for(case):
    from bayes_grpo.diagnostics.cases import BANDIT_CASES, bandit_case

    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 30, "figures": False}, "instability": {"fit_oscillation": False}}
    )
    results = diagnose(bandit_case(case, seeds=1, seed=7), config=cfg)
    detected = {r.name for r in results if r.passed is False}
    assert detected == set(BANDIT_CASES[case][1]), [r.summary for r in results]
    assert (
        next(r for r in results if r.name == "reward_hacking").passed is None
    )  # no evaluation reward


class _FakeFit:
    """Stands in for a fitted GRPODynamicsModel: only ``coefficient_draws`` (plumbing test)."""

    def __init__(self, c_eff: float, zeta: float, plateau: float):
        self.calls: list[dict] = []
        self.values = (c_eff, zeta, plateau)

    def coefficient_draws(self, **kwargs):
        import xarray as xr

        self.calls.append(kwargs)
        if kwargs["learning_rate"] is None:
            raise ValueError(
                "the mechanistic model needs ['learning_rate'] to give coefficients for a setting"
            )
        rng = np.random.default_rng(0)
        c, z, p = self.values
        dims = ("chain", "draw")
        return xr.Dataset(
            {
                "C_eff": (dims, rng.normal(c, 0.05, (2, 200))),
                "zeta": (dims, rng.normal(z, 0.05, (2, 200))),
                "plateau": (dims, rng.normal(p, 0.01, (2, 200))),
            }
        )


def test_posterior_model_is_evaluated_at_each_runs_hyperparameters():
    from bayes_grpo.diagnostics.cases import bandit_case

    ds = bandit_case("bandit_healthy", seeds=1, steps=120)
    fake = _FakeFit(-0.4, -0.2, 0.85)
    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": False}})
    (res,) = diagnose(ds, config=cfg, posterior=fake, modes=["instability"])
    call = fake.calls[0]
    assert (
        call["learning_rate"] == pytest.approx(0.1)
        and call["k_ref"] == 1
        and call["group_size"] == 8
    )
    assert call["momentum_convention"] == "heavy_ball"
    assert res.passed is False and "at the run's hyperparameters" in res.values["posterior"]
    # a run without the hyperparameters the model needs falls back to the least-squares fit, and
    # says so: in the result, and in a warning (it was only in the result's values)
    with pytest.warns(UserWarning, match=r"gave no draws for runs \['healthy'\] \(posterior not"):
        (res2,) = diagnose(
            simulated_case("healthy"), config=cfg, posterior=fake, modes=["instability"]
        )
    assert "posterior not evaluated" in res2.values["posterior"]
    assert any(s["source"] == "Gauss-Newton" for s in res2.values["evidence"]["signals"])



def test_runs_a_posterior_was_not_fitted_to_are_named_a_few_per_reason():
    # report --runs / diagnose --posterior with an unrelated run set of 50 runs printed one
    # warning line of about 9,000 characters naming every run with its reason
    from bayes_grpo.diagnostics.core import runs_by_reason

    why = {f"run-{i}": "not a run of the fit" for i in range(50)} | {"x": "rewards differ"}
    text = runs_by_reason(why)
    assert text == "not a run of the fit: run-0, run-1, run-2, run-3, run-4 and 45 more; rewards differ: x"


def test_a_hyperparameter_the_run_does_not_log_takes_the_fits_default_for_it():
    # fit --default learning_rate=... fitted the runs that log no learning rate at that
    # value; diagnose --posterior on the same run set asked the fit about those runs with no
    # learning rate, got "needs ['learning_rate']" and fell back to the least-squares fit for
    # every run (the report's diagnostics alike), said only in the JSON's "posterior" field
    fake = _FakeFit(-0.4, -0.2, 0.85)
    fake.model_config = {"hyperparameter_defaults": {"learning_rate": 0.05, "k_ref": None}}
    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": False}})
    (res,) = diagnose(simulated_case("healthy"), config=cfg, posterior=fake, modes=["instability"])
    assert fake.calls[0]["learning_rate"] == pytest.approx(0.05)
    assert "learning_rate 0.05: the fit's default" in res.values["posterior"], res.values["posterior"]
    assert any(s["source"] == "posterior" for s in res.values["evidence"]["signals"])


def test_a_run_without_momentum_needs_no_convention_to_be_asked_of_the_fit():
    # `fit runs.nc --default momentum=0 --default k_ref=1` fitted runs that log neither momentum
    # nor its convention (none is needed at momentum 0); `diagnose runs.nc --posterior fit.nc`
    # then asked the fit with no convention, got "needs ['momentum_convention']" and fell back
    # to the least-squares fit for every run, with a warning
    class NeedsConvention(_FakeFit):
        def coefficient_draws(self, **kwargs):
            if kwargs["momentum_convention"] is None:
                raise ValueError("the mechanistic model needs ['momentum_convention'] to give coefficients")
            return super().coefficient_draws(**kwargs)

    ds = simulated_case("healthy")
    ds = ds.assign_coords(
        momentum=("run", np.full(ds.sizes["run"], np.nan)),
        momentum_convention=("run", np.full(ds.sizes["run"], "", dtype=object)),
    )
    fake = NeedsConvention(-0.4, -0.2, 0.85)
    fake.model_config = {"hyperparameter_defaults": {"learning_rate": 0.05, "momentum": 0.0, "k_ref": 1}}
    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": False}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "gave no draws" warning
        (res,) = diagnose(ds, config=cfg, posterior=fake, modes=["instability"])
    assert fake.calls[0]["momentum"] == 0.0 and fake.calls[0]["momentum_convention"] == "heavy_ball"
    assert any(s["source"] == "posterior" for s in res.values["evidence"]["signals"])


def test_a_run_without_a_model_name_is_asked_of_the_fits_llm_of_such_runs():
    # the fit calls runs that name no LLM UNKNOWN_MODEL; diagnose --posterior asked the fit for
    # no LLM, which beside a named LLM is the population level, not the LLM the run was fitted as
    import types

    from bayes_grpo.model.prepare import UNKNOWN_MODEL

    ds = simulated_case("healthy")
    ds = ds.assign_coords(model=("run", np.full(ds.sizes["run"], "", dtype=object)))
    fake = _FakeFit(-0.4, -0.2, 0.85)
    fake.model_config = {"hyperparameter_defaults": {"learning_rate": 0.05}}
    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": False}})
    fake.data = types.SimpleNamespace(models=["qwen", UNKNOWN_MODEL])
    diagnose(ds, config=cfg, posterior=fake, modes=["instability"])
    assert fake.calls[-1]["model"] == UNKNOWN_MODEL
    fake.data = types.SimpleNamespace(models=["qwen", "llama"])
    diagnose(ds, config=cfg, posterior=fake, modes=["instability"])
    assert fake.calls[-1]["model"] is None  # a fit without such runs: a new LLM, as before


def test_a_posterior_not_fitted_to_the_runs_is_named_with_a_warning():
    # a fit of another run set (other run ids, another LLM, or the same ids with other
    # rewards) was applied without a word: its draws are a prediction, not a fit of the run
    import types

    from bayes_grpo.diagnostics.cases import bandit_case

    ds = bandit_case("bandit_healthy", seeds=1, steps=120)
    run = str(ds["run"].values[0])
    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": False}})
    fake = _FakeFit(0.4, 1.5, 0.85)
    fake.data = types.SimpleNamespace(models=[str(ds["model"].values[0])])
    fake.runset = ds
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (res,) = diagnose(ds, config=cfg, posterior=fake, modes=["instability"])  # its own fit: no warning
    assert "prediction" not in res.values["posterior"]
    other = ds.copy(deep=True)
    other["reward"] = other["reward"] + 0.1
    fake.runset = other
    with pytest.warns(UserWarning, match=re.escape("not fitted to 1 run of this run set") + ".*rewards differ.*: " + re.escape(run)):
        (res,) = diagnose(ds, config=cfg, posterior=fake, modes=["instability"])
    assert "the fit's prediction" in res.values["posterior"]
    fake.runset = other.assign_coords(run=["elsewhere"])
    fake.data.models = ["another-llm"]
    fake.parameterisation = "mechanistic"
    with pytest.warns(UserWarning, match="not a run of the fit.*not in the fit .its LLMs: \\['another-llm'\\]., so drawn from the population level"):
        diagnose(ds, config=cfg, posterior=fake, modes=["instability"])
    fake.parameterisation = "phenomenological"  # it has no population level
    with pytest.warns(UserWarning, match="its LLMs: \\['another-llm'\\]\\): \\S+\\): where the posterior"):
        diagnose(ds, config=cfg, posterior=fake, modes=["instability"])


def test_a_diverging_reward_is_instability_even_where_no_fitted_law_can_draw_it():
    # an SDE run past the threshold (C_eff < 0) whose reward swings from -8 to ~1e5 was "not
    # detected": the least-squares law keeps C_eff > 0 and ended on its zeta bound
    from bayes_grpo.dynamics.simulate import simulate_sde_runset, truth_frame

    ds = simulate_sde_runset(
        models={"m": {"stiffness": 1.0, "plateau": -2.0, "initial_reward": -8.0, "noise_d": 1e-3}},
        group_sizes=[8],
        learning_rates=[0.05, 0.4],
        momentum=0.0,
        convention="heavy_ball",
        k_refs=[4],
        n_seeds=1,
        n_steps=150,
        measurement_sd=0.05,
        allow_unstable=True,
        random_seed=3,
    )
    truth = truth_frame(ds)["regime"].to_dict()
    results = {r.values["run"]: r for r in diagnose(ds, config=FAST, modes=["instability"])}
    for run, regime in truth.items():
        assert (results[run].passed is False) == (regime == "unstable"), (run, regime)
    (bad,) = [run for run, regime in truth.items() if regime == "unstable"]
    div = next(
        s for s in results[bad].values["evidence"]["signals"] if s["signal"] == "reward divergence"
    )
    assert div["detected"] and div["beyond_earlier_range_on_both_sides"] and div["value"] >= 3
    assert 0 < results[bad].values["onset_step"] <= 150
    # a late take-off (flat, then a rise in the last quarter) spans more than 3x the earlier
    # range too, but on one side only: not a divergence
    steps = np.arange(200)
    rng = np.random.default_rng(0)
    rise = 0.02 + 0.7 / (1 + np.exp(-(steps - 175) / 5.0)) + 0.01 * rng.standard_normal(200)
    frame = pd.DataFrame({"reward": rise}, index=pd.Index(steps, name="step"))
    res = instability(frame, run_id="late", config=FAST.instability, common=FAST.common)
    div = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward divergence")
    assert div["value"] >= 3 and not div["detected"]


def test_instability_figure_labels_say_what_each_side_curve_is_divided_by():
    # a clip ratio that starts at 0 was drawn divided by its maximum but labelled
    # "clip_ratio / early median (x0)", with its level statistic passed off as a ratio
    frame = run_table(simulated_case("instability_growth"), "instability_growth")
    frame["clip_ratio"] = np.where(np.arange(len(frame)) < len(frame) // 2, 0.0, 0.2)
    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 10, "figures": True}, "instability": {"fit_oscillation": False}}
    )
    res = instability(frame, run_id="r", config=cfg.instability, common=cfg.common)
    (fig,) = res.figures.values()
    labels = fig.axes[1].get_legend_handles_labels()[1]
    clip = next(label for label in labels if label.startswith("clip_ratio"))
    growth = next(label for label in labels if label.startswith("grad_norm"))
    assert "early median" not in clip and "its maximum" in clip and "clip ratio over" in clip
    assert "/ early median" in growth and "late/early x" in growth


def test_the_instability_figures_legends_stand_beside_the_axes_and_cover_no_data():
    # matplotlib's automatic placement put the reward's legend inside the axes, over the logged
    # points of a run whose reward fills them (the instability_growth case), and the side
    # quantities' legend over their curves
    frame = run_table(simulated_case("instability_growth"), "instability_growth")
    frame["clip_ratio"] = np.where(np.arange(len(frame)) < len(frame) // 2, 0.0, 0.2)
    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": True}})
    res = instability(frame, run_id="r", config=cfg.instability, common=cfg.common)
    (fig,) = res.figures.values()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 2  # the reward's (with the oscillator fit) and the side quantities'
    figure_box = fig.bbox
    for ax, legend in legends:
        box = legend.get_window_extent(renderer)
        assert not box.overlaps(ax.get_window_extent(renderer)), (ax.get_ylabel(), box, ax.get_window_extent(renderer))
        # and wholly on the figure (not cut off at its edge)
        assert box.x0 >= figure_box.x0 and box.x1 <= figure_box.x1 and box.y0 >= figure_box.y0 and box.y1 <= figure_box.y1, box


def test_the_decoupling_figures_legend_stands_beside_the_axes_and_covers_no_data():
    # loc="best" put the legend inside the axes, where the two rewards (each scaled to its
    # range, so filling the axes from 0 to 1) and the shaded late window run under it
    frame = run_table(simulated_case("reward_hacking"), "reward_hacking")
    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": True}})
    res = reward_hacking(frame, run_id="r", config=cfg.hacking, common=cfg.common)
    (fig,) = res.figures.values()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    (ax,) = fig.axes
    box = ax.get_legend().get_window_extent(renderer)
    assert not box.overlaps(ax.get_window_extent(renderer)), (box, ax.get_window_extent(renderer))
    assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1), box
    assert ax.get_window_extent(renderer).width > 4 * fig.dpi  # the plot kept its width


def test_one_clipped_step_near_the_start_of_a_short_run_is_not_sustained_clipping():
    # a K_ref = 8 bandit run clips once, at its first refresh (step 8). The clipping
    # statistic took shrinking windows at the ends: the first step's window of 19 points
    # averaged 1/19 = 0.053 >= 0.05, the episode was "detected", and its onset search
    # (centred window mean and the step itself at the level) found no step: IndexError.
    steps = np.arange(150)
    rng = np.random.default_rng(0)
    reward = 0.5 + 0.3 * (1 - np.exp(-steps / 20.0)) + 0.02 * rng.standard_normal(150)
    clip = np.zeros(150)
    clip[8] = 1.0
    frame = pd.DataFrame({"reward": reward, "clip_ratio": clip}, index=pd.Index(steps, name="step"))
    res = instability(frame, run_id="one_clip", config=FAST.instability, common=FAST.common)
    sig = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "sustained clipping")
    assert not sig["detected"] and sig["value"] == pytest.approx(1 / 37)


def test_a_clipping_episode_is_dated_at_its_first_clipped_step():
    steps = np.arange(150)
    rng = np.random.default_rng(1)
    reward = 0.5 + 0.3 * (1 - np.exp(-steps / 20.0)) + 0.02 * rng.standard_normal(150)
    clip = np.where((steps >= 90) & (steps % 3 == 0), 0.4, 0.0)  # bursts every 3rd step from 90
    frame = pd.DataFrame({"reward": reward, "clip_ratio": clip}, index=pd.Index(steps, name="step"))
    res = instability(frame, run_id="episode", config=FAST.instability, common=FAST.common)
    sig = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "sustained clipping")
    assert sig["detected"] and sig["onset_step"] == 90
    assert sig["value"] == pytest.approx(0.4 * 13 / 37, abs=0.4 / 37)


def test_a_log_whose_step_counter_starts_late_is_diagnosed_as_from_its_first_step():
    # the laws start training at step 0: fitted at the raw steps of a log from step 5000 on
    # (a resumed run, a global step counter), the oscillator read a zeta of 0.01 with an
    # open interval and a clear oscillation (zeta 0.15) was "not detected"
    ds = simulated_case("instability_oscillation", seed=0)
    (base,) = diagnose(ds, config=FAST, modes=["instability"])
    (late,) = diagnose(ds.assign_coords(step=ds["step"] + 5000), config=FAST, modes=["instability"])
    assert base.passed is False and late.passed is False, late.summary
    zeta = [r.values["strength"]["value"] for r in (base, late)]
    assert zeta[1] == pytest.approx(zeta[0], rel=0.05)
    assert late.values["onset_step"] == pytest.approx(base.values["onset_step"] + 5000, abs=2)


def test_a_lone_burst_before_a_clipping_episode_does_not_date_it():
    # clipping from step 220 on; before it, a healthy run with two lone bursts (steps 150 and
    # 175). The first window (75 steps) whose mean reaches 5% starts before the episode, and
    # its first step at the level was the burst at 175: "from step 175", 45 steps early
    steps = np.arange(300)
    rng = np.random.default_rng(2)
    reward = 0.5 + 0.3 * (1 - np.exp(-steps / 20.0)) + 0.02 * rng.standard_normal(300)
    clip = np.abs(0.005 * rng.standard_normal(300))
    clip[[150, 175]] = 0.08
    clip[220:] = 0.15 + 0.02 * rng.standard_normal(80)
    frame = pd.DataFrame({"reward": reward, "clip_ratio": clip}, index=pd.Index(steps, name="step"))
    res = instability(frame, run_id="late_episode", config=FAST.instability, common=FAST.common)
    sig = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "sustained clipping")
    assert sig["detected"] and sig["onset_step"] == 220
    assert res.values["onset_step"] == 220, res.summary


def test_an_evaluation_reward_under_another_name_is_named_with_the_setting_that_reads_it():
    # an evaluation reward under a name of its own (eval_math_exact_match; verl's
    # val-core/<data>/reward/mean@1 was the example until the lookup found it by its shape:
    # test_verls_validation_reward_of_one_data_set_is_the_evaluation_reward); the result said
    # "no evaluation reward", naming only the names it looked for, while the run had one
    steps = np.arange(1, 301)
    rng = np.random.default_rng(0)
    rise = 1 - np.exp(-steps / 40.0)
    val = np.where(steps % 10 == 0, 0.15 + 0.4 * rise, np.nan)
    frame = pd.DataFrame(
        {
            "reward": 0.2 + 0.5 * rise + 0.03 * rng.standard_normal(300),
            "eval_math_exact_match": val,
            "eval_loss": np.where(steps % 10 == 0, 1.0, np.nan),  # no reward: not offered
            "eval_runtime": np.where(steps % 10 == 0, 3.0, np.nan),
            "eval_reward": np.where(steps % 100 == 0, 0.5, np.nan),  # 3 points: too rarely
        },
        index=pd.Index(steps, name="step"),
    )
    res = reward_hacking(frame, run_id="verl", config=FAST.hacking, common=FAST.common)
    assert res.passed is None
    assert "the run logs ['eval_math_exact_match']" in res.summary, res.summary
    assert "--set hacking.eval_metrics=eval_math_exact_match" in res.summary
    assert "logged too rarely: eval_reward (3)" in res.summary
    named = DiagnosticsConfig.from_assignments(
        ["hacking.eval_metrics=eval_math_exact_match", "common.figures=false"]
    )
    res = reward_hacking(frame, run_id="verl", config=named.hacking, common=named.common)
    assert res.passed is True, res.summary


def _verl_validation_frame(columns: dict[str, float]) -> pd.DataFrame:
    """A verl run (training reward rising on) with validation curves ``{name: plateau}``
    every 10 steps, saturating early: a decoupling when read against the training reward."""
    steps = np.arange(1, 301)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"reward": 0.2 + 0.6 * steps / 300 + 0.02 * rng.standard_normal(300)},
        index=pd.Index(steps, name="step"),
    )
    for name, plateau in columns.items():
        rise = 1 - np.exp(-steps / 15.0)
        frame[name] = np.where(steps % 10 == 0, 0.1 + (plateau - 0.1) * rise, np.nan)
    return frame


def test_verls_validation_reward_of_one_data_set_is_the_evaluation_reward():
    # verl logs its validation reward as val-core/<data_source>/<acc|reward>/mean@<N>
    # (ray_trainer._validate), ingested as eval_<data_source>_reward_mean_<N>: diagnose said
    # "no evaluation reward" until the user named it with --set hacking.eval_metrics=...
    # The acc curve is verl's core one beside reward, the largest N too; a std is no reward.
    frame = _verl_validation_frame(
        {
            "eval_openai_gsm8k_acc_mean_4": 0.5,
            "eval_openai_gsm8k_reward_mean_4": 0.9,
            "eval_openai_gsm8k_acc_mean_1": 0.9,
            "eval_openai_gsm8k_reward_std_4": 0.2,
        }
    )
    res = reward_hacking(frame, run_id="verl", config=FAST.hacking, common=FAST.common)
    assert res.values["evidence"]["eval_metric"] == "eval_openai_gsm8k_acc_mean_4", res.summary
    assert res.passed is False, res.summary
    # verl before 0.3: val/test_score/<data_source>
    frame = _verl_validation_frame({"eval_test_score_openai_gsm8k": 0.5})
    res = reward_hacking(frame, run_id="verl", config=FAST.hacking, common=FAST.common)
    assert res.values["evidence"]["eval_metric"] == "eval_test_score_openai_gsm8k", res.summary


def test_verls_validation_reward_logged_through_mlflow_is_the_evaluation_reward():
    # verl's MLflow logger writes '@' as '_at_' (tracking._MlflowLoggingAdapter): an MLflow
    # export's val-core/openai/gsm8k/reward/mean_at_1 was not found
    frame = _verl_validation_frame({"eval_openai_gsm8k_reward_mean_at_1": 0.5})
    res = reward_hacking(frame, run_id="verl", config=FAST.hacking, common=FAST.common)
    assert res.values["evidence"]["eval_metric"] == "eval_openai_gsm8k_reward_mean_at_1", res.summary


def test_a_lightning_val_acc_is_the_evaluation_reward(tmp_path):
    # PyTorch Lightning's self.log("val_acc") is ingested as eval_acc, which the lookup did not
    # know (eval_accuracy, eval_score ... only): "no evaluation reward"
    from bayes_grpo.runset.core import run_frame
    from bayes_grpo.runset.ingest import load_runs

    frame = _verl_validation_frame({"val_acc": 0.5}).rename(columns={"reward": "train_reward"})
    path = tmp_path / "metrics.csv"
    frame.to_csv(path)
    ds = load_runs([path])
    assert "eval_acc" in ds
    (run,) = map(str, ds.run.values)
    res = reward_hacking(run_frame(ds, run), run_id=run, config=FAST.hacking, common=FAST.common)
    assert res.values["evidence"]["eval_metric"] == "eval_acc", res.summary


def test_verls_validation_rewards_of_several_data_sets_are_named_and_their_spread_is_not():
    # two validation sets: which one is "the" evaluation is the user's choice, named with the
    # setting; an evaluation metric the user names is the only one read (no verl fallback)
    frame = _verl_validation_frame(
        {"eval_openai_gsm8k_reward_mean_1": 0.5, "eval_math500_reward_mean_1": 0.5}
    )
    res = reward_hacking(frame, run_id="verl", config=FAST.hacking, common=FAST.common)
    assert res.passed is None
    assert "eval_openai_gsm8k_reward_mean_1" in res.summary, res.summary
    assert "eval_math500_reward_mean_1" in res.summary
    # verl's val-aux std@N, first in the run set, was the setting offered first
    frame.insert(1, "eval_openai_gsm8k_reward_std_4", frame["eval_math500_reward_mean_1"])
    res = reward_hacking(frame, run_id="verl", config=FAST.hacking, common=FAST.common)
    assert "eval_metrics=eval_openai_gsm8k_reward_mean_1`" in res.summary, res.summary
    assert "reward_std_4" not in res.summary
    named = DiagnosticsConfig.from_assignments(["hacking.eval_metrics=eval_other", "common.figures=false"])
    one = _verl_validation_frame({"eval_openai_gsm8k_reward_mean_1": 0.5})
    res = reward_hacking(one, run_id="verl", config=named.hacking, common=named.common)
    assert res.passed is None, res.summary


def test_a_side_quantity_that_grew_but_stopped_growing_says_why_it_is_not_detected():
    # `bayes-grpo diagnose` on the shipped g16_p8_lr0.0005 run printed "not detected: growth of
    # grad norm late/early median ratio 6.97 [6, 8.54]" under a rule of ">= 3x": the growth
    # must also go on at the end (a ramp-up while the reward takes off, then a plateau), and
    # the sentence did not say that this is what failed
    steps = np.arange(200)
    rng = np.random.default_rng(0)
    grad = 0.1 + 2.0 / (1 + np.exp(-(steps - 60) / 8.0)) - 0.6 * (steps > 150)
    frame = pd.DataFrame(
        {"reward": 0.8 - 0.7 * np.exp(-steps / 40.0) + 0.01 * rng.standard_normal(200),
         "grad_norm": grad * np.exp(0.05 * rng.standard_normal(200))},
        index=pd.Index(steps, name="step"),
    )
    cfg = dataclasses.replace(FAST.instability, fit_oscillation=False)
    res = instability(frame, run_id="ramp", config=cfg, common=FAST.common)
    (growth,) = [s for s in res.values["evidence"]["signals"] if s["signal"] == "growth of grad norm"]
    assert growth["value"] >= 3 and growth["lower"] > 1 and not growth["still_growing_at_end"]
    assert res.passed is not False
    assert "no longer growing at the end" in res.summary
    # a growth that goes on is detected and needs no such remark
    frame["grad_norm"] = 0.1 + np.linspace(0.0, 2.0, 200)
    res = instability(frame, run_id="grows", config=cfg, common=FAST.common)
    assert res.passed is False and "no longer growing" not in res.summary


def _plateau_run(n: int = 300, seed: int = 0, noise: float = 0.02) -> pd.DataFrame:
    """A healthy run built here, not by the package: the reward rises to 0.7 with white noise,
    the grad norm holds its level."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    reward = 0.7 - 0.5 * np.exp(-steps / (0.1 * n)) + noise * rng.standard_normal(n)
    grad_norm = 0.3 * np.exp(0.2 * rng.standard_normal(n))
    return pd.DataFrame(
        {"reward": reward, "grad_norm": grad_norm}, index=pd.Index(steps, name="step")
    )


def _signal(res, name: str) -> dict:
    return next(s for s in res.values["evidence"]["signals"] if s["signal"] == name)


def test_a_kl_that_runs_away_is_instability_and_one_that_builds_up_is_not():
    # a KL to the reference that grew 20-50x over the last half was "not detected": the mode
    # never read the kl column. It starts at 0, so its build-up (here saturating, or a random
    # walk's linear drift) is measured from the central window, not from the first
    cfg = dataclasses.replace(FAST.instability, fit_oscillation=False)
    n = 300
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(1)
    jitter = np.exp(0.25 * rng.standard_normal(n))
    anchored = 0.02 * (1 - np.exp(-steps / 90.0)) * jitter  # levels off
    blow_up = np.exp(8 * np.clip(steps / n - 0.5, 0, None))  # e^4 over the second half
    for kl, runaway in (
        (anchored, False),
        (0.02 * steps / n * jitter, False),  # beta = 0: drifts like t
        # a steady drift from the reference (KL quadratic in the distance) from 15% of the run
        (0.02 * np.clip(steps / n - 0.15, 0, None) ** 2 * jitter + 1e-4, False),
        (anchored * blow_up, True),
    ):
        frame = _plateau_run(n).assign(kl=kl)
        res = instability(frame, run_id="r", config=cfg, common=FAST.common)
        growth = _signal(res, "growth of KL")
        assert growth["detected"] is runaway and res.passed is (not runaway), res.summary
        assert growth["reference_window"] == "central"
        if runaway:
            assert growth["value"] > 10 and 150 < res.values["onset_step"] < 260, res.summary
            assert "growth of KL (kl: late/central median ratio" in res.summary
        else:
            assert growth["value"] < 5


def test_a_kl_estimate_below_zero_is_kept_and_a_runaway_from_its_noise_is_instability():
    # a k1 KL estimate (mean of log pi - log pi_ref: OpenRLHF's default kl_estimator, verl's
    # in-reward kl_penalty 'kl') scatters about a small KL, below 0 at many steps. Those steps
    # were dropped as "no signal": the central level became the positive half of the noise
    # (0.7 sd instead of 0.2 sd) and a KL that ran away 10x from it read 2.4-3.1x, not
    # detected. A KL at its noise, or drifting steadily, is still no runaway
    cfg = dataclasses.replace(FAST.instability, fit_oscillation=False)
    n = 300
    steps = np.arange(1, n + 1)
    for seed in range(3):
        noise = 1e-3 * np.random.default_rng(seed).standard_normal(n)
        for kl, runaway in (
            (2e-4 * np.exp(6 * np.clip(steps / n - 0.5, 0, None)) + noise, True),
            (2e-4 + noise, False),
            (2e-4 + 0.004 * np.clip(steps / n - 0.15, 0, None) ** 2 + noise, False),
        ):
            res = instability(
                _plateau_run(n).assign(kl=kl), run_id="r", config=cfg, common=FAST.common
            )
            growth = _signal(res, "growth of KL")
            assert growth["detected"] is runaway, (seed, res.summary)
            assert np.isfinite(growth["value"]) and growth["value"] > 0
            if runaway:
                assert growth["value"] > 5 and 150 < res.values["onset_step"] < 260, res.summary


def test_a_reward_swing_that_grows_at_the_plateau_is_instability():
    # a swing that grows from 0 to +-0.2 over the second half (period 30 steps, noise 0.05 a
    # step, nothing else logged out of line) was "not detected": the divergence test compares
    # the last quarter with everything before it, whose range holds the whole rise
    for seed in range(3):
        frame = _plateau_run(400, seed=seed, noise=0.05)
        steps = frame.index.to_numpy()
        amp = 0.2 * np.clip((steps - 200) / 200, 0, None)
        frame["reward"] += amp * np.sin(2 * np.pi * steps / 30)
        res = instability(frame, run_id="r", config=FAST.instability, common=FAST.common)
        osc = _signal(res, "growing reward oscillation")
        assert res.passed is False and osc["detected"], res.summary
        assert osc["value"] >= 3 and osc["lower"] > 1 and osc["beyond_central_range_on_both_sides"]
        assert 250 <= osc["onset_step"] <= 400
        assert not _signal(res, "reward divergence")["detected"]
    # the same run without the swing, and one with a stationary wander about its plateau
    for seed in range(3):
        quiet = _plateau_run(400, seed=seed, noise=0.05)
        wander = np.zeros(400)
        rng = np.random.default_rng(10 + seed)
        for i in range(1, 400):
            wander[i] = 0.95 * wander[i - 1] + 0.03 * rng.standard_normal()
        for frame in (quiet, quiet.assign(reward=quiet["reward"] + wander)):
            res = instability(frame, run_id="r", config=FAST.instability, common=FAST.common)
            assert not _signal(res, "growing reward oscillation")["detected"], res.summary


def test_a_clip_ratio_logged_as_a_percentage_is_left_out_not_read_as_sustained_clipping():
    # 2 (for 2% of tokens clipped) was "instability detected: sustained clipping (clip_ratio:
    # largest mean clip ratio over 25% of the run 2.05)"
    frame = _plateau_run(200, seed=0)
    rng = np.random.default_rng(0)
    frame["clip_ratio"] = 2.0 * np.exp(0.2 * rng.standard_normal(200))
    res = instability(frame, run_id="r", config=FAST.instability, common=FAST.common)
    assert res.passed is True, res.summary
    assert "clip_ratio runs from" in res.summary and "not a share" in res.summary
    assert not any(s["metric"] == "clip_ratio" for s in res.values["evidence"]["signals"])
    frame["clip_ratio"] /= 100  # as a fraction: read, and quiet
    res = instability(frame, run_id="r", config=FAST.instability, common=FAST.common)
    assert _signal(res, "sustained clipping")["detected"] is False


def test_a_kl_logged_as_zero_at_every_step_is_named_not_called_not_logged():
    # a run without a KL term (beta = 0) that logs kl = 0.0 at every step was listed among the
    # side quantities "not logged" ('none of ... KL (kl) logged with >= 10 points'): it is
    # logged, and what is true is that it holds no KL signal
    cfg = dataclasses.replace(FAST.instability, fit_oscillation=False)
    frame = _plateau_run(200).assign(kl=0.0)
    res = instability(frame, run_id="r", config=cfg, common=FAST.common)
    assert "KL" not in res.values["evidence"]["not_logged"]
    assert "kl is 0 at all 200 logged steps" in res.summary and "no KL signal" in res.summary
    assert not any(s["signal"] == "growth of KL" for s in res.values["evidence"]["signals"])
    alone = instability(frame[["kl"]], run_id="r", config=cfg, common=FAST.common)
    assert alone.passed is None
    assert "KL (kl)" not in alone.summary and "kl is 0 at all 200 logged steps" in alone.summary
    # a KL not logged at all is still "not logged"
    res = instability(_plateau_run(200), run_id="r", config=cfg, common=FAST.common)
    assert "KL" in res.values["evidence"]["not_logged"] and "kl is 0" not in res.summary


def test_a_quiet_instability_verdict_names_the_side_quantities_it_could_not_read():
    # a run that logs its reward only read "not detected: reward oscillation ...; reward
    # collapse ..." (healthy_reward_only), silent on grad norm, importance ratio, clipping and
    # KL, none of which it logs: a verdict of the reward alone read as one of all of them
    res = _one("healthy_reward_only", "instability")
    assert res.passed is True
    assert "Not logged, so not assessed: grad norm (grad_norm, actor_grad_norm)" in res.summary, res.summary
    assert "KL (kl)" in res.summary and "clip ratio (" in res.summary
    # a run that logs all but the KL names the KL alone
    res = _one("healthy", "instability")
    assert res.passed is True and res.summary.endswith("Not logged, so not assessed: KL (kl)."), res.summary


def test_a_grad_norm_that_stops_being_finite_before_the_last_window_is_named():
    # a grad norm that became inf from step 151 of 200 (kept as NaN by the run set) read "not
    # detected: growth of grad norm late/early median ratio 1.05": its "last 25%" was the steps
    # up to 150, and nothing said that the metric had stopped while the reward went on
    rng = np.random.default_rng(0)
    t = np.arange(1, 201)
    reward = 0.2 + 0.6 * (1 - np.exp(-t / 40)) + 0.03 * rng.standard_normal(200)
    grad = np.where(t > 150, np.inf, 1.0 + 0.1 * rng.standard_normal(200))
    frame = pd.DataFrame({"reward": reward, "grad_norm": grad}, index=t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the run set's "kept as NaN"
        ds = make_runset({"g": frame}, {"g": {}})
    (res,) = diagnose(ds, config=FAST, modes=["instability"])
    assert "grad_norm has no finite value after step 150 while the reward goes on to step 200" in res.summary
    assert res.values["evidence"]["ends_early"]
    # logged to the end: nothing to say
    (res,) = diagnose(
        make_runset({"g": frame.assign(grad_norm=1.0 + 0.1 * rng.standard_normal(200))}, {"g": {}}),
        config=FAST,
        modes=["instability"],
    )
    assert "no finite value after" not in res.summary and not res.values["evidence"]["ends_early"]


def test_trls_vllm_sampling_ratio_is_not_read_as_the_ppo_importance_ratio():
    # TRL's sampling/importance_sampling_ratio/max is exp(old_logp - vLLM sampler logp), capped
    # at vllm_importance_sampling_cap (2): the engines' mismatch, not pi_theta / pi_old. It was
    # read as the importance ratio: a mismatch growing 30x read as 'growth of importance ratio
    # late/early median ratio 1 [1, 1]', not detected, and could never be (the max sits at the cap)
    cfg = dataclasses.replace(FAST.instability, fit_oscillation=False)
    n = 200
    rng = np.random.default_rng(0)
    mismatch = np.exp(0.3 * rng.standard_normal(n) + np.linspace(0.5, 4.0, n))
    frame = _plateau_run(n).assign(
        sampling_importance_sampling_ratio_max=np.minimum(mismatch, 2.0),
        sampling_importance_sampling_ratio_mean=1.0 + 0.01 * rng.standard_normal(n),
    )
    res = instability(frame, run_id="r", config=cfg, common=FAST.common)
    signals = res.values["evidence"]["signals"]
    assert not any(s["metric"].startswith("sampling_importance") for s in signals)
    assert "importance ratio" in res.values["evidence"]["not_logged"]
    assert "sampling_importance_sampling_ratio_max is logged but not read" in res.summary
    assert "not the PPO ratio pi_theta / pi_old" in res.summary
    # the PPO ratio, where logged beside it, is read and the sampler's needs no word
    frame["importance_ratio_max"] = 1.2 * np.exp(0.1 * rng.standard_normal(n))
    res = instability(frame, run_id="r", config=cfg, common=FAST.common)
    assert _signal(res, "growth of importance ratio")["metric"] == "importance_ratio_max"
    assert "sampling_importance" not in res.summary


def test_a_growing_reward_swing_is_dated_at_a_logged_step():
    # the onset was the mean step of the first block of 10 points out of range: 275.5, a step
    # no run has; it is the block's first step
    frame = _plateau_run(400, seed=0, noise=0.05)
    steps = frame.index.to_numpy()
    frame["reward"] += 0.2 * np.clip((steps - 200) / 200, 0, None) * np.sin(2 * np.pi * steps / 30)
    res = instability(frame, run_id="r", config=FAST.instability, common=FAST.common)
    osc = _signal(res, "growing reward oscillation")
    assert osc["detected"] and osc["onset_step"] in set(steps.tolist()), osc["onset_step"]
    assert 250 <= osc["onset_step"] <= 400


def test_a_reward_that_collapses_after_rising_is_instability_not_only_degeneracy():
    # a reward that rose to 0.7 and fell to 0.01 in a few steps at step 180 (grad norm at its
    # level throughout) was "not detected" as instability: no side quantity grew, no law fits it
    n = 300
    frame = _plateau_run(n, noise=0.03)
    steps = frame.index.to_numpy()
    frame["reward"] = np.where(
        steps > 180, 0.01 + 0.005 * np.abs(frame["reward"] - 0.7), frame["reward"]
    )
    res = instability(frame, run_id="r", config=FAST.instability, common=FAST.common)
    col = _signal(res, "reward collapse")
    assert res.passed is False and col["detected"] and col["ends_below_its_start"], res.summary
    assert col["value"] >= 3 and col["rise_in_within_window_sds"] >= 3
    assert 180 <= res.values["onset_step"] <= 190, res.summary
    # a healthy run whose reward eases down by 15% of its rise after the peak, and a flat run
    eased = _plateau_run(n, noise=0.03)
    eased["reward"] -= 0.15 * 0.5 * np.clip((steps - 120) / 180, 0, None)
    flat = _plateau_run(n, noise=0.03)
    flat["reward"] = 0.3 + 0.03 * np.random.default_rng(5).standard_normal(n)
    for frame in (eased, flat):
        res = instability(frame, run_id="r", config=FAST.instability, common=FAST.common)
        assert not _signal(res, "reward collapse")["detected"], res.summary


@pytest.mark.parametrize("collapse_at", [230, 250, 270])
def test_a_reward_that_collapses_inside_the_last_quarter_is_instability(collapse_at):
    # a run stopped soon after its collapse (the fall at step 240 of 300, inside the last
    # quarter) read "no collapse": the last window's sd held the fall itself, so the rise
    # measured 1.3 of those sds against the 3 the rule asks for
    n = 300
    frame = _plateau_run(n, noise=0.03)
    steps = frame.index.to_numpy()
    frame["reward"] = np.where(
        steps > collapse_at, 0.05 + 0.01 * np.random.default_rng(3).standard_normal(n), frame["reward"]
    )
    res = instability(frame, run_id="r", config=FAST.instability, common=FAST.common)
    col = _signal(res, "reward collapse")
    assert res.passed is False and col["detected"], res.summary
    assert col["value"] >= 3 and col["rise_in_within_window_sds"] >= 3
    assert collapse_at <= col["onset_step"] <= collapse_at + 10, col["onset_step"]


def test_the_spread_about_a_fall_is_the_noise_not_the_fall():
    rng = np.random.default_rng(0)
    noise = 0.05 * rng.standard_normal(400)
    stepped = np.where(np.arange(400) < 150, 0.8, 0.1) + noise
    assert np.sqrt(fall_fit_variance(stepped)) == pytest.approx(0.05, rel=0.1)
    assert np.sqrt(np.var(stepped, ddof=1)) > 0.3
    # a rise is no fall: its spread stays the plain variance
    assert fall_fit_variance(stepped[::-1]) == pytest.approx(np.var(stepped, ddof=1))
    # without a step: about the noise (the best split takes a little of it), and at most the
    # plain variance times (n - 1) / (n - 2)
    flat = 0.5 + noise
    assert fall_fit_variance(flat) == pytest.approx(np.var(flat, ddof=1), rel=0.1)
    assert fall_fit_variance(flat) <= np.var(flat, ddof=1) * 399 / 398
    # too few points for two segments of 3: the plain variance
    assert fall_fit_variance(flat[:5]) == pytest.approx(np.var(flat[:5], ddof=1))


def test_a_run_of_one_reward_function_is_not_told_to_compare_its_reward_with_itself():
    # `bayes-grpo train` logs its one reward function as rewards/next_digit_reward/mean and as the
    # total reward; diagnose said "if one scores correctness, the total reward can be compared with
    # it ... --set hacking.eval_metrics=rewards_next_digit_reward_mean": the reward with itself
    steps = np.arange(1, 201)
    reward = np.clip(steps / 150, 0, 1) * 0.7
    frame = pd.DataFrame(
        {"reward": reward, "rewards_next_digit_reward_mean": reward.copy()}, index=pd.Index(steps, name="step")
    )
    res = reward_hacking(frame, run_id="tiny", config=FAST.hacking, common=FAST.common)
    assert res.passed is None
    assert "hacking.eval_metrics=rewards_next_digit_reward_mean" not in res.summary, res.summary
    assert "rewards_next_digit_reward_mean is the total reward itself" in res.summary, res.summary
    # a second component that differs is still named (the first, equal to the total, is not)
    frame["rewards_accuracy_reward_mean"] = reward * 0.5
    res = reward_hacking(frame, run_id="tiny", config=FAST.hacking, common=FAST.common)
    assert "training reward components ['rewards_accuracy_reward_mean']" in res.summary, res.summary


def test_a_run_without_an_evaluation_names_its_reward_components_and_not_metrics_it_never_logged():
    # a TRL run whose total reward is format + accuracy (rewards/<name>/mean) and which logs no
    # evaluation read "logged too rarely: eval_accuracy (0)" (a column another run of the set
    # has) and nothing on the components, with which the proxy gaming shows
    steps = np.arange(1, 301)
    rng = np.random.default_rng(0)
    accuracy = np.where(steps < 150, 0.2 + 0.4 * steps / 150, 0.6 - 0.2 * (steps - 150) / 150)
    accuracy = accuracy + 0.02 * rng.standard_normal(300)
    fmt = np.clip(steps / 100, 0, 1) * 0.5 + np.clip((steps - 150) / 150, 0, 1) * 0.9
    frame = pd.DataFrame(
        {
            "reward": fmt + accuracy,
            "rewards_accuracy_reward_mean": accuracy,
            "rewards_format_reward_mean": fmt,
            "eval_accuracy": np.nan,
        },
        index=pd.Index(steps, name="step"),
    )
    res = reward_hacking(frame, run_id="trl", config=FAST.hacking, common=FAST.common)
    assert res.passed is None
    assert "logged too rarely" not in res.summary, res.summary
    assert "training reward components ['rewards_accuracy_reward_mean', " in res.summary
    assert "--set hacking.eval_metrics=rewards_accuracy_reward_mean" in res.summary
    named = DiagnosticsConfig.from_assignments(
        ["hacking.eval_metrics=rewards_accuracy_reward_mean", "common.figures=false"]
    )
    res = reward_hacking(frame, run_id="trl", config=named.hacking, common=named.common)
    assert res.passed is False, res.summary


def test_the_interval_of_a_clip_ratio_stays_within_0_and_1():
    # three clipped steps in 300: the bootstrap replicates, shifted to the estimate, gave the
    # largest windowed clip ratio an interval "[-0.00222, 0.0129]", below any share
    cfg = dataclasses.replace(FAST.instability, fit_oscillation=False)
    frame = _plateau_run(300)
    rng = np.random.default_rng(7)
    clip = np.zeros(300)
    clipped = rng.integers(0, 300, 3)
    clip[clipped] = rng.uniform(0.2, 0.5, 3)
    frame["clip_ratio"] = clip
    sig = _signal(instability(frame, run_id="r", config=cfg, common=FAST.common), "sustained clipping")
    assert 0.0 <= sig["lower"] <= sig["value"] <= sig["upper"] <= 1.0, sig


def test_grad_norm_spikes_that_grow_more_frequent_are_instability():
    # a grad norm whose spikes (20-60x its level) go from 1 in 100 steps to 1 in 4 over the run
    # was "not detected": the medians of the growth statistic do not see spikes at all
    n = 300
    cfg = dataclasses.replace(FAST.instability, fit_oscillation=False)
    frame = _plateau_run(n)
    steps = frame.index.to_numpy()
    rng = np.random.default_rng(3)
    rate = 0.01 + 0.25 * np.clip((steps - 150) / 150, 0, None)
    spikes = rng.random(n) < rate
    frame["grad_norm"] *= np.where(spikes, rng.uniform(20, 60, n), 1.0)
    res = instability(frame, run_id="r", config=cfg, common=FAST.common)
    sig = _signal(res, "more frequent grad norm spikes")
    assert res.passed is False and sig["detected"] and sig["value"] <= 0.01, res.summary
    assert not _signal(res, "growth of grad norm")["detected"]
    assert 150 < res.values["onset_step"] < 300
    # the statistic's name and its value apart ("... in the last 25% vs the first 0.0297" read
    # as one phrase)
    assert f"in the last 25% vs the first = {sig['value']:.3g}" in res.summary, res.summary
    # heavy-tailed but stationary spikes (1 in 20 steps throughout), and a grad norm that
    # falls to a hundredth late in the run with its ordinary jitter: no growing spikes
    steady = _plateau_run(n)
    steady["grad_norm"] = np.where(rng.random(n) < 0.05, 30.0, 1.0) * steady["grad_norm"]
    falling = _plateau_run(n)
    jitter = np.exp(0.5 * rng.standard_normal(n))
    falling["grad_norm"] *= np.where(steps > 200, 0.01, 1.0) * jitter
    for frame in (steady, falling):
        res = instability(frame, run_id="r", config=cfg, common=FAST.common)
        assert not _signal(res, "more frequent grad norm spikes")["detected"], res.summary


def test_a_short_wandering_run_past_the_chi_square_quantile_is_no_oscillation():
    """On 30 logged points of a reward wandering about an overdamped curve (truth zeta 1.5)
    the state-space likelihood ratio reached the chi-square(1) 90% quantile 2.71 in 19 of
    100 seeds (5% nominal, one-sided): the old check flagged this run (ratio 8.2, zeta 0.29)
    as a reward oscillation. Runs simulated from the best law with zeta >= 1 reach its ratio
    too, so the parametric bootstrap leaves zeta >= 1 open."""
    frame = run_table(
        simulated_case("healthy_wandering", seed=300026, n_steps=30), "healthy_wandering"
    )
    res = instability(frame, run_id="w", common=FAST.common)
    osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert res.passed is True and not osc["detected"], res.summary
    assert osc["state_space_likelihood_ratio"] > 2.71
    assert osc["state_space_bootstrap_p_value"] > 0.05
    assert any("parametric bootstrap" in w for w in osc["not_credible_because"]), osc
    assert osc["upper"] == np.inf
    again = instability(frame, run_id="w", common=FAST.common)
    osc2 = next(s for s in again.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
    assert osc2["state_space_bootstrap_p_value"] == osc["state_space_bootstrap_p_value"]


def test_a_short_real_oscillation_passes_the_process_noise_bootstrap():
    """The bootstrap only removes alarms the null law explains: an oscillating run (truth
    zeta 0.15) of 30 and 60 logged points is still flagged, no simulated replicate reaching
    its likelihood ratio."""
    for n_steps in (30, 60):
        frame = run_table(
            simulated_case("instability_oscillation", seed=0, n_steps=n_steps),
            "instability_oscillation",
        )
        res = instability(frame, run_id="o", common=FAST.common)
        osc = next(s for s in res.values["evidence"]["signals"] if s["signal"] == "reward oscillation")
        assert res.passed is False and osc["detected"], res.summary
        assert osc["state_space_bootstrap_p_value"] == pytest.approx(1 / 20)


def test_the_damping_profile_gives_the_noise_sd_that_maximises_the_kalman_likelihood():
    from bayes_grpo.predict.statespace import damping_profile, log_lik

    rng = np.random.default_rng(3)
    t = np.arange(40.0)
    y = 0.5 - 0.3 * np.exp(-t / 8.0) + 0.05 * rng.standard_normal(t.size)
    prof = damping_profile(t, y, zetas=[1.3], w0s=[0.15], rhos=[0.4])
    sd = float(prof["noise_sd"].ravel()[0])
    row = [prof["plateau"].ravel()[0], prof["initial_reward"].ravel()[0], np.log(0.15),
           np.log(1.3), np.log(sd), -30.0, np.log(0.4 / 0.6)]
    lls = [float(log_lik(np.array([row[:4] + [row[4] + d] + row[5:]]), t, y)[0]) for d in (-0.01, 0.0, 0.01)]
    assert lls[1] > max(lls[0], lls[2])
    assert lls[1] == pytest.approx(float(prof["loglik"].ravel()[0]), rel=1e-9)


def test_the_damping_profile_of_several_series_is_each_series_profile():
    """The bootstrap of the state-space damping test filters its replicates in one pass."""
    from bayes_grpo.predict.statespace import damping_profile

    rng = np.random.default_rng(4)
    t = np.arange(0.0, 60.0, 2.0)
    ys = 0.5 - 0.3 * np.exp(-t / 8.0) + 0.05 * rng.standard_normal((3, t.size))
    ys[2] *= 1000.0
    grid = {"zetas": [0.3, 1.0, 2.0], "w0s": [0.05, 0.2], "rhos": [0.01, 0.5, 0.9]}
    many = damping_profile(t, ys, **grid)
    for i, y in enumerate(ys):
        one = damping_profile(t, y, **grid)
        for key in ("loglik", "plateau", "initial_reward", "noise_sd"):
            np.testing.assert_allclose(many[key][i], one[key], rtol=1e-10)


def test_the_series_bootstrap_varies_a_window_mean_as_much_as_the_noise_does():
    """Blocks as long as the smoothing window (residuals about the moving median, which sum to
    about 0 over it) gave the mean of the last quarter of 200 white-noise points a bootstrap sd
    of 0.66 of its true 1/sqrt(50); the growth ratios, clip-ratio windows and zero-signal shares
    built on it had 90% intervals of 55-77% of their spread over seeds (200 steps, `healthy`).
    With the hacking decoupling's residuals and blocks (residual_bootstrap_parts) it is 0.91."""
    from bayes_grpo.diagnostics._series import bootstrap

    rng = np.random.default_rng(0)
    sds = []
    for _ in range(20):
        y = rng.standard_normal(200)
        boot = bootstrap(
            y,
            lambda v: v[150:].mean(),
            smooth_fraction=0.1,
            block_fraction=0.1,
            n_boot=400,
            rng=rng,
        )
        sds.append(np.std(boot))
    assert 0.8 < np.median(sds) * np.sqrt(50) < 1.2


def test_degeneracy_at_group_size_two_says_the_group_size_itself_is_the_cause():
    # p^2 + (1-p)^2 >= 0.5 at every p: a G = 2 run of a binary reward read "detected" from its
    # first step with nothing said of why; at G = 4 the floor is 1/8 and nothing is added
    rng = np.random.default_rng(0)
    n, groups = 200, 64
    p = 0.2 + 0.5 * (1 - np.exp(-np.arange(n) / 40))
    for G, said in ((2, True), (4, False)):
        k = rng.binomial(G, p[:, None], size=(n, groups))
        frame = pd.DataFrame(
            {"reward": k.mean(axis=1) / G, "frac_reward_zero_std": ((k == 0) | (k == G)).mean(axis=1)},
            index=np.arange(n),
        )
        res = advantage_degeneracy(frame, run_id=f"g{G}", group_size=G, common=FAST.common)
        if said:
            assert res.passed is False
            assert "at G = 2 a binary reward leaves at least 0.50 of the groups" in res.summary
            assert "group_size_floor" in res.values["evidence"]
        else:
            assert "group_size_floor" not in res.values["evidence"] and "at G = 4" not in res.summary


def test_a_set_aside_plateau_is_named_so_in_the_table_beside_the_level_progress_is_measured_to():
    # the report's policy-concentration table of models/tiny.nc's g16_p8_lr0.0005_k1_adamw_s0
    # read "plateau p*  1282" under a summary "the reward had covered 25% of its way to 0.969,
    # its extreme logged level (the plateau is not bounded by the run)": the table gave the
    # fitted plateau the sentence and figure set aside, and not the level they used
    from bayes_grpo.diagnostics import policy_concentration

    res = policy_concentration(_still_rising(20.0), run_id="early-fall", common=FAST.common)
    ev = res.values["evidence"]
    assert ev["plateau_bounded_by_run"] is False and ev["progress_measured_to"] != ev["plateau"]
    values = res.table["value"]
    assert values["plateau p* (not bounded: set aside)"] == pytest.approx(ev["plateau"])
    assert values["progress measured to (extreme logged reward)"] == pytest.approx(ev["progress_measured_to"])
    assert "plateau p*" not in values.index
    # a plateau the run bounds keeps its one row
    rng = np.random.default_rng(0)
    t = np.arange(1, 301.0)
    reward = 0.1 + 0.8 * (1 - np.exp(-t / 40)) + 0.02 * rng.standard_normal(300)
    entropy = (0.2 + 0.8 * np.exp(-t / 15)) * np.exp(0.03 * rng.standard_normal(300))
    res = policy_concentration(pd.DataFrame({"reward": reward, "entropy": entropy}, index=t), run_id="b", common=FAST.common)
    assert res.values["evidence"]["plateau_bounded_by_run"] is True
    assert res.table["value"]["plateau p*"] == pytest.approx(res.values["evidence"]["plateau"])
    assert not any("progress measured to" in q for q in res.table.index)


def test_diagnose_fits_a_runs_reward_to_the_single_exponential_once(monkeypatch):
    """Policy concentration (its plateau) and the reward oscillation (its BIC gain over the
    single exponential) fitted the same reward series each: two fits per run, ~0.1 s each.
    Within ``diagnose`` the second reads the first; the results are those of fitting twice."""
    from bayes_grpo.dynamics import lsq

    ds = simulated_case("healthy")
    before = diagnose(ds, config=FAST)
    fitted: list[tuple[bytes, bytes]] = []
    real = lsq.fit_single_exponential

    def counted_fit(t, y, *args, **kwargs):
        fitted.append((np.asarray(t, dtype=float).tobytes(), np.asarray(y, dtype=float).tobytes()))
        return real(t, y, *args, **kwargs)

    monkeypatch.setattr(lsq, "fit_single_exponential", counted_fit)
    after = diagnose(ds, config=FAST)
    reward = ds["reward"].isel(run=0).to_numpy()
    assert len(fitted) == len(set(fitted)), "a series fitted twice"
    assert any(y == reward[np.isfinite(reward)].tobytes() for _, y in fitted)
    for a, b in zip(before, after, strict=True):
        assert (a.name, a.passed, a.summary) == (b.name, b.passed, b.summary)
        assert a.values.get("strength") == b.values.get("strength")


@pytest.mark.parametrize("other", ["eval_math_exact_match", "rewards_accuracy_reward_mean"])
def test_the_hint_to_name_an_evaluation_reward_names_the_command_that_takes_it(other):
    # the report's diagnostics section (`bayes-grpo report models/tiny.nc`) said "... with --set
    # hacking.eval_metrics=rewards_next_digit_reward_mean", an option `report` does not have:
    # only `bayes-grpo diagnose` takes --set
    steps = np.arange(1, 301)
    rise = 1 - np.exp(-steps / 40.0)
    frame = pd.DataFrame(
        {"reward": 0.2 + 0.5 * rise, other: 0.1 + 0.4 * rise},
        index=pd.Index(steps, name="step"),
    )
    res = reward_hacking(frame, run_id="r", config=FAST.hacking, common=FAST.common)
    assert res.passed is None
    assert f"`bayes-grpo diagnose --set hacking.eval_metrics={other}`" in res.summary, res.summary


def test_the_legend_of_a_figure_with_a_second_y_axis_is_drawn_above_the_data_of_both_axes():
    # the legend sat on the first axes, which the twin axis (the reward) is drawn over: the
    # reward's dots and line covered its entries (policy concentration, advantage degeneracy)
    import matplotlib.pyplot as plt

    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": True}})
    for mode in ("policy_concentration", "advantage_degeneracy"):
        (res,) = diagnose(simulated_case(mode), config=cfg, modes=[mode])
        (fig,) = res.figures.values()
        assert len(fig.axes) == 2, mode  # the side quantity and the reward on a twin axis
        with_legend = [ax for ax in fig.axes if ax.get_legend() is not None]
        # the axes drawn last (the twin) carries it, with the entries of both axes
        assert with_legend == [fig.axes[-1]], mode
        labels = [t.get_text() for t in with_legend[0].get_legend().get_texts()]
        assert "smoothed" in labels or "reward" in labels, labels
        plt.close(fig)


# --------------------------------------------------------------------------- figure captions
# The report captions each diagnostic figure by hand (report.sections.DIAGNOSTIC_FIGURES, plus
# figure_legend's onset line): each phrase a caption says is paired below with what the
# figure must hold for it, so a plot that changes a colour, a line style, an axis or a label
# fails here until its caption follows.


def _hex(color) -> str:
    from matplotlib.colors import to_hex

    return to_hex(color)


def _lines(ax, color, *, style=None, marker=None, label=None):
    """The lines of ``ax`` in ``color`` (a Matplotlib colour), of line style ``style`` ('None'
    for dots alone), with a marker (True), none (False) or any (None), whose label starts with
    ``label``."""
    out = []
    for line in ax.lines:
        if _hex(line.get_color()) != _hex(color):
            continue
        if style is not None and line.get_linestyle() != style:
            continue
        has_marker = line.get_marker() not in (None, "None", "", " ")
        if marker is not None and has_marker != marker:
            continue
        if label is not None and not str(line.get_label()).startswith(label):
            continue
        out.append(line)
    return out


def _vertical_at(ax, color, x) -> bool:
    return any(
        len(line.get_xdata()) == 2 and np.allclose(np.asarray(line.get_xdata(), dtype=float), x)
        for line in _lines(ax, color, style="-")
    )


def _horizontal(ax, color, style, label=None) -> bool:
    return any(
        len(line.get_ydata()) == 2 and np.ptp(np.asarray(line.get_ydata(), dtype=float)) == 0
        for line in _lines(ax, color, style=style, label=label)
    )


def _legend_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def _twin(fig):
    """The right axis of a figure of two axes that share a box (``twinx``), else None."""
    if len(fig.axes) == 2 and fig.axes[0].get_position().bounds == fig.axes[1].get_position().bounds:
        return fig.axes[1]
    return None


def _GREY(color) -> bool:
    """Whether ``color`` is a grey (red, green and blue alike)."""
    code = _hex(color)
    return code[1:3] == code[3:5] == code[5:7]


#: mode -> (the case drawn, [(a phrase of its caption, what the figure must hold for it)])
_CAPTION_CLAIMS = {
    "reward_hacking": ("reward_hacking", [
        ("the training reward (blue)", lambda f: _lines(f.axes[0], "C0", style="-", marker=False, label="training reward")),
        ("the evaluation reward (orange)", lambda f: _lines(f.axes[0], "C1", style="-", marker=False, label="evaluation")),
        ("each as a fraction of its own range", lambda f: "fraction of its range" in f.axes[0].get_ylabel()),
        ("logged values (dots)", lambda f: _lines(f.axes[0], "C0", style="None", marker=True) and _lines(f.axes[0], "C1", style="None", marker=True)),
        ("smoothed (lines)", lambda f: len(_lines(f.axes[0], "C0", style="-", marker=False)) + len(_lines(f.axes[0], "C1", style="-", marker=False)) == 2),
        ("the late window shaded grey", lambda f: any(p.get_label() == "late window" and _GREY(p.get_facecolor()) for p in f.axes[0].patches)),
    ]),
    "advantage_degeneracy": ("advantage_degeneracy", [
        ("the share of groups whose G rewards all tie", lambda f: f.axes[0].get_ylabel() == "share of groups with zero spread"),
        ("at each step (dots)", lambda f: _lines(f.axes[0], "C0", style="None", marker=True)),
        ("and smoothed (line)", lambda f: _lines(f.axes[0], "C0", style="-", marker=False, label="smoothed")),
        ("the binomial expectation p^G + (1-p)^G (green dashed)", lambda f: _lines(f.axes[0], "C2", style="--", label="binomial p^G + (1-p)^G")),
        ("the flag level (red dotted)", lambda f: _horizontal(f.axes[0], "C3", ":", label="flag level")),
        ("the reward (grey, right axis)", lambda f: _twin(f) is not None and _twin(f).get_ylabel() == "reward" and any(_GREY(line.get_color()) for line in _twin(f).lines)),
    ]),
    "policy_concentration": ("policy_concentration", [
        ("the entropy metric the left axis names (orange)", lambda f: _lines(f.axes[0], "C1", style="-", marker=False, label=f.axes[0].get_ylabel()) and "entropy" in f.axes[0].get_ylabel()),
        ("the reward (blue, right axis)", lambda f: _twin(f) is not None and _twin(f).get_ylabel() == "reward" and _lines(_twin(f), "C0", style="-", marker=False, label="reward")),
        ("logged values (dots)", lambda f: _lines(f.axes[0], "C1", style="None", marker=True) and _lines(_twin(f), "C0", style="None", marker=True)),
        ("and smoothed (lines)", lambda f: _lines(f.axes[0], "C1", style="-", marker=False) and _lines(_twin(f), "C0", style="-", marker=False)),
        ("dashed: the reward level the legend names", lambda f: any(line.get_label() in _legend_texts(f) for line in _lines(_twin(f), "C0", style="--"))),
    ]),
    "instability": ("instability_oscillation", [
        ("top: the reward (dots)", lambda f: _lines(f.axes[0], "C0", style="None", marker=True, label="reward")),
        ("the fitted damped oscillator (red)", lambda f: _lines(f.axes[0], "C3", style="-", label="oscillator fit")),
        ("bottom: the side quantities", lambda f: f.axes[1].get_ylabel() == "side quantity, relative" and f.axes[1].get_legend() is not None),
        ("relative to the level their legend names", lambda f: all(" / " in t.get_text() for t in f.axes[1].get_legend().get_texts())),
        ("(symmetric log scale)", lambda f: f.axes[1].get_yscale() == "symlog"),
    ]),
}


@pytest.mark.parametrize("mode", sorted(_CAPTION_CLAIMS))
def test_each_diagnostic_figure_draws_what_its_report_caption_says(mode):
    from bayes_grpo.diagnostics import diagnose
    from bayes_grpo.report.sections import DIAGNOSTIC_FIGURES, figure_legend

    assert set(_CAPTION_CLAIMS) == set(DIAGNOSTIC_FIGURES)  # a captioned mode without claims
    case, claims = _CAPTION_CLAIMS[mode]
    (result,) = diagnose(simulated_case(case), modes=mode)
    (fig,) = result.figures.values()
    caption = figure_legend(result)
    for phrase, holds in claims:
        assert phrase in caption, (phrase, caption)
        assert holds(fig), f"{mode}: the caption says {phrase!r}, which its figure does not draw"
    # the onset line the caption names: red, vertical, at the onset step, on every axis it spans
    onset = result.values["onset_step"]
    assert f"red vertical line: the onset step {onset:g}." in caption
    spans = fig.axes[:1] if _twin(fig) is not None else fig.axes
    assert all(_vertical_at(ax, "C3", onset) for ax in spans), mode
    # no other curve in the colour the caption gives the onset line (and red's other elements):
    # a red side quantity read as the onset or the oscillator
    named_red = {"flag level", "oscillator fit", "onset"}
    for ax in fig.axes:
        for line in _lines(ax, "C3"):
            label = str(line.get_label())
            vertical = len(line.get_xdata()) == 2 and np.ptp(np.asarray(line.get_xdata(), dtype=float)) == 0
            assert vertical or any(label.startswith(n) for n in named_red), f"{mode}: a red curve {label!r} the caption does not name"
