"""PPO clipping in the prediction law: GRPO's trust region slows a run whose policy moves more
than the clip range within K_ref steps, which the linear law of the paper does not see."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from bayes_grpo.dynamics.simulate import continue_recursion, simulate_recursion
from bayes_grpo.dynamics.trust_region import check_clip_range, format_clip_range, unclipped_share
from bayes_grpo.predict.predict import (
    check_success_rate_runs,
    predict_from_draws,
    recursion_trajectories,
)
from bayes_grpo.predict.result import prediction_result
from bayes_grpo.predict.summary import attr_warnings
from tests.test_predict import _draws


def test_clipping_masks_successes_past_one_plus_eps_and_failures_below_one_minus_eps():
    r = (0.2, 0.2)
    # inside the range: the whole gradient
    assert unclipped_share(0.55, 0.5, r) == pytest.approx(1.0)
    # successes' ratio 0.62 / 0.5 = 1.24 > 1.2: their share 1 - p_b = 0.5 is masked; failures'
    # ratio 0.38 / 0.5 = 0.76 < 0.8: theirs too: nothing moves
    assert unclipped_share(0.62, 0.5, r) == pytest.approx(0.0)
    # early in a rise from 0.3: successes 0.37 / 0.3 = 1.23 masked, failures 0.63 / 0.7 = 0.9 kept
    assert unclipped_share(0.37, 0.3, r) == pytest.approx(0.3)
    # late: successes 0.9 / 0.8 = 1.125 kept, failures 0.1 / 0.2 = 0.5 masked
    assert unclipped_share(0.9, 0.8, r) == pytest.approx(0.2)
    # a falling policy is not clipped: the surrogate only stops moves in the advantages' direction
    assert unclipped_share(0.3, 0.6, r) == pytest.approx(1.0)
    # an asymmetric range (DAPO's clip-higher): 1.24 < 1 + 0.28 keeps the successes
    assert unclipped_share(0.62, 0.5, (0.2, 0.28)) == pytest.approx(0.5)
    assert unclipped_share(0.62, 0.5, None) == 1.0
    np.testing.assert_array_equal(np.isnan(unclipped_share([np.nan, 0.5], 0.5, r)), [True, False])


def test_a_clip_range_is_a_positive_number_and_inf_or_none_is_no_clipping():
    assert check_clip_range(None) is None
    assert check_clip_range(float("inf")) is None
    assert check_clip_range(0.2) == (0.2, 0.2)
    assert check_clip_range(0.2, 0.28) == (0.2, 0.28)
    assert format_clip_range((0.2, 0.2)) == "0.2" and format_clip_range((0.2, 0.28)) == "[0.2, 0.28]"
    for bad in (0, -0.1, float("nan"), "wide"):
        with pytest.raises(ValueError, match="clip_epsilon must be"):
            check_clip_range(bad)
    with pytest.raises(ValueError, match="clip_epsilon_high must be"):
        check_clip_range(0.2, 0)
    with pytest.raises(ValueError, match="needs clip_epsilon"):
        check_clip_range(None, 0.28)


def _loop_clipped_recursion(a, mu, lag, n, p_star, r0, eps):
    """The clipped recursion written out step by step (independent of the code): the gradient
    term scaled by the successes' share 1 - p_b unless their ratio p/p_b exceeds 1 + eps, plus
    the failures' share p_b unless their ratio (1-p)/(1-p_b) is below 1 - eps."""
    e = {m: r0 - p_star for m in range(-lag - 2, 1)}
    for k in range(n):
        p, pb = p_star + e[k], p_star + e[k - lag]
        share = (1 - pb) * (p / pb <= 1 + eps) + pb * ((1 - p) / (1 - pb) >= 1 - eps)
        e[k + 1] = e[k] + mu * (e[k] - e[k - 1]) - a * e[k - lag] * share
    return np.array([p_star + e[k] for k in range(n + 1)])


@pytest.mark.parametrize("lag,mu", [(6, 0.5), (2, 0.9), (0, 0.5)])
def test_the_clipped_recursion_is_the_bandits_masking_written_out(lag, mu):
    a = np.array([0.02, 0.05, 0.1])
    steps = np.arange(81.0)
    ps, r0 = np.full(3, 0.6), np.full(3, 0.3)
    got = recursion_trajectories(a, mu, lag, steps, ps, r0, observation_lag=0, clip_range=(0.2, 0.2))
    assert 0 < got.min() and got.max() < 1  # success rates throughout (the loop takes no bounds)
    for i in range(3):
        want = _loop_clipped_recursion(a[i], mu, lag, 80, 0.6, 0.3, 0.2)
        np.testing.assert_allclose(got[i], want, rtol=0, atol=1e-13)
    linear = recursion_trajectories(a, mu, lag, steps, ps, r0, observation_lag=0)
    if lag == 0:  # no lag, no stale policy: the ratios are 1 and nothing is clipped
        np.testing.assert_array_equal(got, linear)
    else:  # the fast draws are slowed
        assert np.any(np.abs(got - linear) > 1e-3)
    # an infinite range is the linear law
    wide = recursion_trajectories(a, mu, lag, steps, ps, r0, observation_lag=0, clip_range=(np.inf, np.inf))
    np.testing.assert_array_equal(wide, linear)


def test_a_clipped_recursion_resumed_in_pieces_gives_the_numbers_of_one_go():
    rng = np.random.default_rng(0)
    a, e0 = rng.uniform(0.02, 0.2, 5), rng.uniform(-0.5, -0.2, 5)
    ps = np.full(5, 0.8)
    kw = {"clip_range": (0.2, 0.2), "plateau": ps}
    whole = simulate_recursion(a, 0.5, 4, 90, e0=e0, **kw)
    part, w = continue_recursion(e0[:, None], a, 0.5, 4, 7, **kw)
    part, w = continue_recursion(part, a, 0.5, 4, 90, velocity=w, **kw)
    np.testing.assert_array_equal(part, whole)
    with pytest.raises(ValueError, match="needs the plateau"):
        simulate_recursion(a, 0.5, 4, 10, e0=e0, clip_range=(0.2, 0.2))


def test_with_ppo_clipping_at_a_long_lag_the_clipped_law_follows_the_bandit_closer_than_the_linear_law():
    # the softmax bandit at K_ref 6 (momentum 0.5, lr 0.1, clip 0.2): clipping masks nearly every
    # sample at the first burst of the rise; the exact law's gain and plateau from its truth
    from bayes_grpo.bandit import simulate_bandit

    held = simulate_bandit(k_ref=6, learning_rate=0.1, seeds=128, seed=3, momentum=0.5, group_size=8, steps=120)
    assert float(held["clip_ratio"].mean("run").max()) > 0.9
    truth = held["expected_reward"].values.mean(axis=0)
    law = next(iter(json.loads(held.attrs["truth"])["runs"].values()))
    args = (np.array([law["a"]]), 0.5, 6, np.arange(120.0), np.array([law["plateau"]]), np.array([0.5]))
    linear = recursion_trajectories(*args)[0]  # the logged reward: K_ref steps behind, as the bandit logs it
    clipped = recursion_trajectories(*args, clip_range=(0.2, 0.2))[0]
    rmse = lambda x: float(np.sqrt(np.mean((x - truth) ** 2)))  # noqa: E731
    # measured: 0.0088 (linear) against 0.0064 (clipped) for 128 and 256 seeds, three seeds
    assert rmse(clipped) < 0.8 * rmse(linear)


def test_a_prediction_records_its_clip_range_and_says_when_it_cannot_use_it():
    draws = _draws(np.full(400, 0.05), k_ref=6, plateau=0.85, r0=0.3)
    steps = np.arange(101.0)
    clipped = predict_from_draws(draws, steps=steps, momentum=0.5, k_ref=6, clip_range=(0.2, 0.2))
    linear = predict_from_draws(draws, steps=steps, momentum=0.5, k_ref=6)
    assert json.loads(clipped.attrs["clip_range"]) == [0.2, 0.2] and linear.attrs["clip_range"] == "off"
    # the clip slows the rise: the mean lies below the linear law's during it, and both settle at p*
    gap = clipped["mean_mean"].values - linear["mean_mean"].values
    assert gap.min() < -0.01 and abs(gap[-1]) < 1e-3
    # the milestones and the policy's (K_ref steps ahead) come from the same clipped law
    assert float(clipped["time_to_fraction_median"].sel(fraction=0.9)) > float(
        linear["time_to_fraction_median"].sel(fraction=0.9)
    )
    np.testing.assert_array_equal(
        clipped["policy_time_to_fraction_median"].values + 6, clipped["time_to_fraction_median"].values
    )
    assert "by the recursion law with PPO clip range 0.2;" in prediction_result(clipped).summary
    assert "clip range" not in prediction_result(linear).summary
    cont = predict_from_draws(draws, steps=steps, momentum=0.5, k_ref=6, law="continuous", clip_range=(0.2, 0.2))
    assert cont.attrs["clip_range"] == "off"
    assert any("clip range 0.2 is not used: the continuous law" in w for w in attr_warnings(cont))
    new_llm = _draws(np.full(400, 0.05), k_ref=6, plateau=np.nan, r0=np.nan)
    norm = predict_from_draws(new_llm, steps=steps, momentum=0.5, k_ref=6, clip_range=(0.2, 0.2))
    assert norm.attrs["clip_range"] == "off"
    assert any("normalised progress, not a success rate" in w for w in attr_warnings(norm))


def test_a_clip_range_is_refused_for_runs_whose_reward_is_no_success_rate():
    steps = np.arange(5.0)
    runset = xr.Dataset(
        {"reward": (("run", "step"), np.array([[0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 1.5, 2.0, 2.5, 2.4]]))},
        coords={"run": ["rate", "score"], "step": steps, "model": ("run", ["llm-a", "llm-b"])},
    )
    check_success_rate_runs(runset, model="llm-a")  # its runs' rewards lie in [0, 1]
    with pytest.raises(ValueError, match=r"rewards in \[0.5, 2.5\] \(1 run outside \[0, 1\], e.g. 'score'\)"):
        check_success_rate_runs(runset, model="llm-b")
    # a success rate one rounding step above 1 (a mean of weighted 0/1 rewards) is a success rate,
    # as for reward bounds (runset.bounds.BOUND_TOLERANCE); it was refused as 'no success rate'
    rounded = runset.assign(reward=runset["reward"].copy(data=[[0.0, 0.5, 1 + 1e-12, 1.0, -1e-13], [0.5, 1.5, 2.0, 2.5, 2.4]]))
    check_success_rate_runs(rounded, model="llm-a")


def test_cli_predict_takes_the_clip_range_by_its_flags(tmp_path, capsys):
    from pathlib import Path

    from bayes_grpo.cli import main

    tiny = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    base = ["predict", str(tiny), "--lr", "0.002", "--momentum", "0.9", "--momentum-convention", "ema",
            "--k-ref", "2", "--group-size", "16", "--steps", "100"]  # fmt: skip
    for bad in ("0", "-0.2", "nan"):
        with pytest.raises(SystemExit):
            main([*base, "--clip-epsilon", bad])
        assert "--clip-epsilon" in capsys.readouterr().err
    rc = main([*base, "--clip-epsilon-high", "0.28", "--json"])
    assert rc != 0 and "--clip-epsilon-high 0.28 needs --clip-epsilon (the lower bound" in capsys.readouterr().err
    assert main([*base, "--clip-epsilon", "0.2", "--clip-epsilon-high", "0.28", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["clip_range"] == [0.2, 0.28] and out["law"] == "recursion"
    assert main([*base]) == 0
    assert "clip_range: off" in capsys.readouterr().out.splitlines()
    assert main([*base, "--clip-epsilon", "0.2"]) == 0
    assert "clip_range: [0.2, 0.2]" in capsys.readouterr().out.splitlines()


def test_the_discrepancy_term_measures_the_clipped_law_on_the_training_runs_when_a_range_is_given():
    # the band's misfit term is that of the predictor used: with a clip range, the training runs
    # are simulated with it too (taken to have run with it)
    from pathlib import Path

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.predict.discrepancy import (
        discrepancy_from_model,
        training_predictor_trajectories,
    )

    fitted = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    linear = training_predictor_trajectories(fitted, law="recursion", max_draws=40)[0]
    clipped = training_predictor_trajectories(fitted, law="recursion", max_draws=40, clip_range=(0.01, 0.01))[0]
    assert np.nanmax(np.abs(clipped - linear)) > 1e-3
    profile = discrepancy_from_model(fitted, law="recursion", clip_range=(0.01, 0.01))
    assert profile.to_dict()["clip_range"] == [0.01, 0.01]
    assert "clip_range" not in discrepancy_from_model(fitted, law="recursion").to_dict()


def test_a_prediction_without_a_clip_range_warns_where_its_policy_outruns_trls_default_clip():
    from bayes_grpo.dynamics.trust_region import largest_move
    from bayes_grpo.predict.predict import unclipped_move_note

    assert largest_move([0.5, 0.5, 0.62, 0.7], 2) == (pytest.approx(0.4), 3)  # 0.7 / 0.5 - 1
    assert largest_move([0.8, 0.9], 1) == (pytest.approx(0.5), 1)  # failures 0.2 -> 0.1
    assert largest_move([0.5, 0.9], 0) == (0.0, 0)
    steps = np.arange(101.0)
    runset = xr.Dataset({"reward": (("run", "step"), np.full((1, 3), 0.5))}, coords={"run": ["r"], "step": np.arange(3.0)})
    fast = predict_from_draws(_draws(np.full(400, 0.05), k_ref=6, plateau=0.85, r0=0.3), steps=steps, momentum=0.5, k_ref=6)
    note = unclipped_move_note(runset, model=None, prediction=fast, k_ref=6)
    assert note is not None and "within K_ref = 6 steps" in note and "--clip-epsilon" in note
    slow = predict_from_draws(_draws(np.full(400, 0.002), k_ref=6, plateau=0.85, r0=0.3), steps=steps, momentum=0.5, k_ref=6)
    assert unclipped_move_note(runset, model=None, prediction=slow, k_ref=6) is None
    # under the continuous law (`--law continuous`) --clip-epsilon alone is not used: the advice
    # names the recursion too, and following it clips without a "not used" warning
    cont = predict_from_draws(_draws(np.full(400, 0.02), k_ref=6, plateau=0.85, r0=0.3), steps=steps, momentum=0.5,
                              k_ref=6, law="continuous")  # fmt: skip
    advice = unclipped_move_note(runset, model=None, prediction=cont, k_ref=6)
    assert advice is not None and "(--law recursion --clip-epsilon, predict_run(law='recursion', clip_epsilon=...))" in advice
    assert "(--clip-epsilon, predict_run(clip_epsilon=...))" in note
    # rewards that are no success rate: nothing to say
    scores = runset.assign(reward=runset["reward"] * 4)
    assert unclipped_move_note(scores, model=None, prediction=fast, k_ref=6) is None


def test_predict_of_the_shipped_bandit_at_k_ref_6_warns_of_clipping_until_given_the_runs_clip_range(capsys):
    from pathlib import Path

    from bayes_grpo.cli import main

    bandit = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    base = ["predict", str(bandit), "--lr", "0.1", "--momentum", "0.5", "--k-ref", "6", "--group-size", "8",
            "--steps", "60", "--json"]  # fmt: skip
    assert main(base) == 0
    linear = json.loads(capsys.readouterr().out)
    assert any("more than a PPO clip range of 0.2 (TRL's default)" in w for w in linear["warnings"])
    assert main([*base, "--clip-epsilon", "0.2"]) == 0
    clipped = json.loads(capsys.readouterr().out)
    assert not any("PPO clip range" in w for w in clipped["warnings"])
    # the clipped rise is slower: 90% of the rise later on the logged reward
    assert clipped["time_to_fraction"]["90%"]["median_step"] > linear["time_to_fraction"]["90%"]["median_step"]


def test_a_clipped_prediction_names_the_draws_whose_plateau_is_no_success_rate():
    # models/tiny.nc at lr 0.002, K_ref 2: every draw's plateau p* is near 3.4 (its runs end far
    # below it) and 58% of the initial rewards lie below 0; the policy moves at most ~10% within K_ref steps,
    # yet --clip-epsilon 0.2 moved the final mean from 1.55 to 1.46 without a word: the clip's
    # ratios are taken at probabilities held at the edges of [0, 1] where the law crosses 1
    steps = np.arange(301.0)
    beyond = _draws(np.full(400, 0.001), k_ref=2, plateau=3.0, r0=0.1)
    linear = predict_from_draws(beyond, steps=steps, momentum=0.5, k_ref=2)
    clipped = predict_from_draws(beyond, steps=steps, momentum=0.5, k_ref=2, clip_range=(0.2, 0.2))
    # the gap is the edge's, not the policy's: nothing moves by 20% within 2 steps before it crosses 1
    crossing = int(np.argmax(linear["mean_mean"].values > 0.9))
    np.testing.assert_allclose(clipped["mean_mean"].values[:crossing], linear["mean_mean"].values[:crossing], rtol=1e-9)
    assert abs(float(clipped["mean_mean"][-1] - linear["mean_mean"][-1])) > 0.01
    notes = [w for w in attr_warnings(clipped) if "reads the reward p* + e as a success probability" in w]
    assert len(notes) == 1 and "the plateau p* of 400 of 400 draws (100%; median 3)" in notes[0]
    assert "initial reward" not in notes[0] and "draws (100%; median 3) lies outside" in notes[0]  # R0 0.1 is a success rate
    assert not any("success probability" in w for w in attr_warnings(linear))
    # draws of success rates: no such note
    inside = predict_from_draws(_draws(np.full(400, 0.05), k_ref=6, plateau=0.85, r0=0.3), steps=steps,
                                momentum=0.5, k_ref=6, clip_range=(0.2, 0.2))  # fmt: skip
    assert not any("success probability" in w for w in attr_warnings(inside))
    below = predict_from_draws(_draws(np.full(400, 0.05), k_ref=6, plateau=0.85, r0=-0.1), steps=steps,
                               momentum=0.5, k_ref=6, clip_range=(0.2, 0.2))  # fmt: skip
    assert any("the initial reward R0 of 400 of 400 draws (100%; median -0.1)" in w for w in attr_warnings(below))


def test_unstable_draws_that_the_clip_caps_in_a_limit_cycle_are_said_to_swing_not_to_diverge():
    # the shipped bandit at lr 0.5, K_ref 6 with --clip-epsilon 0.2: every draw is unstable, the
    # clipped law swings 0.07 peak to peak about p* (the bandit itself 0.08) and ends at 0.875,
    # yet the prediction said "the trajectories diverge" and "(the draws diverge: no stable run to stop)"
    from bayes_grpo.cli.predict import _remaining_gain_note

    steps = np.arange(301.0)
    capped = _draws(np.full(400, 0.15), k_ref=6, plateau=0.85, r0=0.5)
    clipped = predict_from_draws(capped, steps=steps, momentum=0.5, k_ref=6, clip_range=(0.2, 0.2))
    assert clipped.attrs["n_draws_diverging"] == 400 and clipped.attrs["n_draws_swinging"] == 400
    tail = clipped["mean_mean"].values[-100:]
    assert 0.02 < np.ptp(tail) < 0.2 and abs(tail.mean() - 0.85) < 0.05  # bounded, about p*
    notes = [w for w in attr_warnings(clipped) if "unstable at this setting" in w]
    assert len(notes) == 1 and "swing about p* without settling" in notes[0] and "diverge" not in notes[0]
    assert "describe no settled run" in notes[0] and np.isnan(clipped.attrs["stop_step"])
    assert _remaining_gain_note(clipped) == " (the draws swing without settling: no settled run to stop)"
    # the linear law's unstable draws do diverge, and say so
    linear = predict_from_draws(capped, steps=steps, momentum=0.5, k_ref=6)
    assert "n_draws_swinging" not in linear.attrs
    assert any("the trajectories diverge, so the means" in w for w in attr_warnings(linear))
    assert _remaining_gain_note(linear) == " (the draws diverge: no stable run to stop)"
    # a gain the clip does not cap diverges under it too; a mix says which is which
    mixed = _draws(np.r_[np.full(200, 0.15), np.full(200, 1.0)], k_ref=6, plateau=0.85, r0=0.5)
    both = predict_from_draws(mixed, steps=steps, momentum=0.5, k_ref=6, clip_range=(0.2, 0.2))
    assert both.attrs["n_draws_swinging"] == 200
    assert any("their trajectories diverge, or (200 of them) swing about p*" in w for w in attr_warnings(both))
    assert _remaining_gain_note(both) == " (the draws diverge or swing without settling: no settled run to stop)"


def test_draws_without_a_reward_scale_are_normalised_progress_by_one_rule_and_not_clipped():
    # every initial reward NaN (plateau known): trajectories_from_draws drew normalised progress,
    # while predict_from_draws clipped it as if a success rate and called its units "reward"
    draws = _draws(np.full(200, 0.05), k_ref=6, plateau=0.85, r0=np.nan)
    pred = predict_from_draws(draws, steps=np.arange(61.0), momentum=0.5, k_ref=6, clip_range=(0.2, 0.2))
    assert pred.attrs["units"].startswith("normalised progress")
    assert pred.attrs["clip_range"] == "off"
    assert any("normalised progress, not a success rate" in w for w in attr_warnings(pred))


def test_unclipped_move_note_prints_a_move_just_past_the_range_above_it():
    # a move of 0.2024 was printed "moves by 20% ..., more than a PPO clip range of 0.2"
    from bayes_grpo.predict.predict import unclipped_move_note

    mean = np.r_[np.full(5, 0.5), np.full(6, 0.6012)]
    ds = xr.Dataset({"mean_mean": ("step", mean)}, coords={"step": np.arange(11.0)})
    note = unclipped_move_note(None, model=None, prediction=ds, k_ref=4)
    assert note.startswith("the predicted success rate moves by 20.2% within K_ref = 4 steps"), note
