"""Prediction milestones: first crossing, settling, their medians, and the shares they print."""

from __future__ import annotations

import json

import numpy as np

from bayes_grpo.checks.base import share_percent
from bayes_grpo.predict.summary import summarise_draws, summary_dict


def test_a_share_is_printed_to_the_decimals_that_keep_it_within_a_tenth_of_itself():
    # 1 of 2000 draws read "0.1%": 0.05% rounded up to twice itself
    assert share_percent(1, 2000) == "0.05%"
    assert share_percent(1, 6000) == "0.017%"  # "0.02%" is a fifth too much
    assert share_percent(3, 2000) == "0.15%"
    assert share_percent(1997, 2000) == "99.85%"  # 0.15% left, not 0.1% or 0.2%
    # as before: the fewest decimals where they are enough
    assert share_percent(3, 1000) == "0.3%" and share_percent(1999, 2000) == "99.95%"
    assert share_percent(1, 3) == "33%" and share_percent(1, 8) == "12%"
    assert share_percent(0, 10) == "0%" and share_percent(10, 10) == "100%"


def _summary(curves: np.ndarray, steps: np.ndarray) -> tuple:
    n = curves.shape[0]
    ds = summarise_draws(
        steps,
        curves,
        curves,
        plateau=np.ones(n),
        initial_reward=np.zeros(n),
        zeta=np.full(n, 0.3),
        damping=np.full(n, 0.1),
    )
    return ds, summary_dict(ds)


def test_an_oscillating_prediction_gives_its_settling_step_beside_its_first_crossing():
    # the mean trajectory of an underdamped draw crosses 90% of its rise at step 9, swings back
    # below it (steps 20-24) and above 110% (steps 30-34) and stays within 10% of p* from step 35:
    # "time_to_fraction 90%: step 9" was all a user got for "when is it done"
    steps = np.arange(60.0)
    curve = np.clip(steps / 10.0, 0.0, 0.95)
    curve[20:25] = 0.85
    curve[30:35] = 1.15
    curve[35:] = 1.02
    curves = np.stack([curve, curve + 1e-6])
    ds, out = _summary(curves, steps)
    assert out["time_to_fraction"]["90%"]["median_step"] == 9
    assert out["time_to_settle"]["90%"] == {"median_step": 35, "prob_reached_within_horizon": 1.0}
    # 95%: within 5% of p* from step 35 (1.02) too; 99%: never within 1% of p*
    assert out["time_to_settle"]["95%"]["median_step"] == 35
    assert out["time_to_settle"]["99%"] == {"median_step": None, "prob_reached_within_horizon": 0.0}
    # the report's milestone table has both
    from bayes_grpo.predict.result import prediction_result

    table = prediction_result(ds).table
    assert table.loc["90% of the rise", "median step"] == 9
    assert table.loc["within 10% of the rise of p* from then on", "median step"] == 35
    # a monotone approach settles where it first crosses
    ramp = np.stack([np.minimum(steps / 20.0, 1.0)] * 2)
    _, mono = _summary(ramp, steps)
    for key in ("90%", "95%", "99%"):
        assert mono["time_to_settle"][key] == mono["time_to_fraction"][key]
    # a draw outside the band at the horizon's end has not settled within the horizon
    late = np.stack([curve, np.r_[curve[:-1], 0.5]])
    _, part = _summary(late, steps)
    assert part["time_to_settle"]["90%"]["prob_reached_within_horizon"] == 0.5


def test_a_median_milestone_is_a_step_of_the_grid_by_which_half_the_draws_get_there():
    # 4 draws crossing 90% at steps 30, 37, 38, 45: the median read 37.5, a step no run has;
    # now the first step by which at least half of the draws have got there, 37
    steps = np.arange(80.0)
    curves = np.stack([np.minimum(steps / (c / 0.9), 1.0) for c in (30.0, 37.0, 38.0, 45.0)])
    ds, out = _summary(curves, steps)
    assert out["time_to_fraction"]["90%"]["median_step"] == 37
    assert float(ds["time_to_fraction_median"].sel(fraction=0.9)) == 37.0
    # exactly half of the draws within the horizon: the median is that step, not "beyond"
    half = np.stack([curves[0], curves[1], np.full(80, 0.5), np.full(80, 0.5)])
    half[2:, 0] = 0.0
    _, out = _summary(half, steps)
    assert out["time_to_fraction"]["90%"] == {"median_step": 37, "prob_reached_within_horizon": 0.5}


def test_predict_prints_the_settling_milestones_and_says_what_each_one_is(tmp_path, capsys):
    from bayes_grpo.cli import main

    setting = ["--lr", "0.1", "--momentum", "0.5", "--k-ref", "6", "--group-size", "8", "--steps", "60"]
    assert main(["predict", "models/bandit.nc", *setting, "--no-discrepancy"]) == 0
    out = capsys.readouterr().out
    assert "time_to_fraction (steps to 90/95/99% of the rise p* - R0):" in out
    assert "time_to_settle (first step after which it stays within 10/5/1% of the rise of p*):" in out
    assert main(["predict", "models/bandit.nc", *setting, "--no-discrepancy", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # what each milestone is read on names the settling ones too (it named time_to_fraction only)
    assert "time_to_settle" in data["milestones_of"] and "policy_time_to_settle" in data["milestones_of"]
    for key in ("time_to_fraction", "time_to_settle"):
        for milestone in data[key].values():
            step = milestone["median_step"]
            assert step is None or isinstance(step, int)
    for key in data["time_to_fraction"]:
        first, settle = data["time_to_fraction"][key]["median_step"], data["time_to_settle"][key]["median_step"]
        if first is not None and settle is not None:
            assert settle >= first


def test_the_median_critical_k_ref_is_a_lag_of_the_draws():
    # half of the draws unstable from K_ref 7, half from 9: "critical K_ref (exact) = 8", a lag
    # at which no more draws are unstable than at 7 (the mean of the two middle draws); now 7, the
    # first K_ref at which at least half of the draws are unstable
    from bayes_grpo.checks.stability import stability_probabilities
    from bayes_grpo.dynamics.stability import critical_k_ref

    gains = np.array([0.1, 0.1, 0.08, 0.08])
    assert critical_k_ref(gains, 0.5, method="exact").tolist() == [7, 7, 9, 9]
    values = stability_probabilities(gains, momentum=0.5, k_ref=1)
    assert values["critical_k_ref_exact_median"] == 7
    assert values["critical_k_ref_closed_form_median"] == 5  # lags 5, 5, 7, 7


def test_a_draw_that_enters_the_band_only_at_the_horizons_last_step_has_not_settled_within_it():
    # `predict models/bandit.nc --lr 0.1 --momentum 0.5 --k-ref 6 --group-size 8 --steps 30` read
    # "time_to_settle 99%: median step 30" (the horizon's last step; with --steps 60 it is 52):
    # a draw inside the band at the last step only shows nothing of staying there
    from bayes_grpo.predict.summary import settling_step

    steps = np.arange(31.0)
    ramp = np.minimum(steps / 30.0, 1.0)  # 99% of the rise first at step 30, the last
    swing = np.r_[np.full(29, 0.5), 1.0, 1.0]  # enters at step 29, still inside at 30
    out = settling_step(np.stack([ramp, swing]), steps, np.ones(2), np.zeros(2), 0.99)
    assert np.isnan(out[0]) and out[1] == 29.0
    # a draw inside the band at every step is settled from step 0, even on a one-step grid
    assert settling_step(np.ones((1, 1)), np.zeros(1), np.ones(1), np.zeros(1), 0.9).tolist() == [0.0]
    _, summary = _summary(np.stack([ramp, ramp + 1e-9]), steps)
    assert summary["time_to_settle"]["99%"] == {"median_step": None, "prob_reached_within_horizon": 0.0}
    assert summary["time_to_fraction"]["99%"]["median_step"] == 30  # a first crossing is one


def test_predict_says_a_settling_step_at_the_horizons_end_is_beyond_it(capsys):
    from bayes_grpo.cli import main

    setting = ["--lr", "0.1", "--momentum", "0.5", "--k-ref", "6", "--group-size", "8", "--no-discrepancy"]
    assert main(["predict", "models/bandit.nc", *setting, "--steps", "30", "--json"]) == 0
    short = json.loads(capsys.readouterr().out)
    assert short["time_to_settle"]["99%"]["median_step"] is None  # read 30, the last step
    assert main(["predict", "models/bandit.nc", *setting, "--steps", "60", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_to_settle"]["99%"]["median_step"] > 30
