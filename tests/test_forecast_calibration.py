"""Band calibration of a forecast from backtests of the other runs (CLI and Python, one path)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.predict import (
    BandCalibration,
    apply_band_calibration,
    backtest_required_scales,
    calibrate_for_run,
    calibration_from_backtests,
    forecast_in_runset,
    forecast_run,
)
from bayes_grpo.predict.forecast import ForecastError, mean_curve
from bayes_grpo.predict.predict import load_prediction
from bayes_grpo.predict.summary import band
from bayes_grpo.runset import make_runset, save_runset

UPTO = 35.0
FAST = dict(likelihood="iid", n_draws=300)


def _wandering_runs(n_runs=5, n_steps=110, seed=3, rho=0.9, sd=0.03):
    """Oscillator runs with AR(1) noise (lag-1 correlation ``rho``): i.i.d. bands are too narrow."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n_steps)
    curves = {}
    for i in range(n_runs):
        u = np.array([0.8 + 0.02 * rng.standard_normal(), 0.2, np.log(0.06), np.log(0.8), np.log(sd)])
        noise = np.zeros(n_steps)
        e = rng.standard_normal(n_steps) * sd * np.sqrt(1 - rho**2)
        noise[0] = sd * rng.standard_normal()
        for s in range(1, n_steps):
            noise[s] = rho * noise[s - 1] + e[s]
        y = mean_curve(u, steps.astype(float))[0] + noise
        curves[f"r{i}"] = pd.DataFrame({"reward": y}, index=pd.Index(steps, name="step"))
    return make_runset(curves=curves, meta={k: {"model": "m"} for k in curves})


@pytest.fixture(scope="module")
def runset():
    return _wandering_runs()


def test_cli_forecast_calibrate_gives_the_python_result(runset, tmp_path, capsys):
    from bayes_grpo.cli import main

    py = forecast_in_runset(runset, "r0", UPTO, calibrate=True, seed=1, **FAST)
    path = save_runset(runset, tmp_path / "runs.nc")
    rc = main(
        ["forecast", str(path), "--run", "r0", "--upto", str(UPTO), "--likelihood", "iid",
         "--calibrate", "--seed", "1", "--json", "-o", str(tmp_path / "fc.nc")]
    )  # fmt: skip
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    # the CLI draws 1000 posterior draws; with the same n_draws the numbers are the same
    cli_same = forecast_in_runset(runset, "r0", UPTO, calibrate=True, seed=1, likelihood="iid")
    assert out["band_scale"] == json.loads(cli_same.attrs["band_scale"])
    assert out["backtest_coverage_0.9"] == pytest.approx(cli_same.attrs["backtest_coverage_0.9"])
    assert out["calibration_runs"] == 4  # every other run
    assert set(out["band_scale"]) == {"0.5", "0.9"}
    saved = load_prediction(tmp_path / "fc.nc")
    np.testing.assert_allclose(saved["obs_hdi"].values, cli_same["obs_hdi"].values)
    # the fast Python forecast is calibrated the same way (its own backtests)
    assert json.loads(py.attrs["calibration"])["n_runs"] == 4


def test_calibration_widens_too_narrow_iid_bands_and_raises_coverage(runset):
    raw = forecast_in_runset(runset, "r2", UPTO, **FAST)
    cal = forecast_in_runset(runset, "r2", UPTO, calibrate=True, **FAST)
    scales = json.loads(cal.attrs["band_scale"])
    assert scales["0.9"] > 1.2  # AR(1) noise, i.i.d. bands: too narrow on the other runs
    assert cal.attrs["backtest_coverage_raw_0.9"] == pytest.approx(raw.attrs["backtest_coverage_0.9"])
    assert cal.attrs["backtest_coverage_0.9"] > raw.attrs["backtest_coverage_0.9"]
    # the forecast's own raw coverage on its future is as poor as the backtests said
    assert json.loads(cal.attrs["calibration"])["raw_coverage"]["0.9"] < 0.8
    # the mean band and the point forecast are untouched
    np.testing.assert_allclose(cal["mean_hdi"].values, raw["mean_hdi"].values)
    np.testing.assert_allclose(cal["mean_mean"].values, raw["mean_mean"].values)
    np.testing.assert_allclose(cal["obs_hdi_raw"].values, raw["obs_hdi"].values)


def test_calibration_never_reads_the_run_it_calibrates(runset):
    kw = dict(upto=UPTO, prior_for=None, hdi_probs=(0.9,), **FAST)
    base = calibrate_for_run(runset, "r0", **kw)
    changed = runset.copy(deep=True)
    changed["reward"].loc[{"run": "r0", "step": slice(UPTO + 1, None)}] += 0.5
    assert calibrate_for_run(changed, "r0", **kw).scales == base.scales
    # another run's future does reach it
    changed["reward"].loc[{"run": "r1", "step": slice(UPTO + 1, None)}] += 0.5
    assert calibrate_for_run(changed, "r0", **kw).scales[0.9] > base.scales[0.9]
    assert "r0" not in base.runs and len(base.runs) == 4


def test_applied_scale_acts_after_the_prefix_about_the_band_midpoint(runset):
    t = runset["step"].values.astype(float)
    y = runset["reward"].sel(run="r0").values
    ds = forecast_run(t[t <= UPTO], y[t <= UPTO], t, hdi_probs=(0.5, 0.9), **FAST)
    cal = BandCalibration(scales={0.9: 2.0}, runs=("a", "b"))
    out = apply_band_calibration(ds, cal)
    lo, hi = band(ds, kind="obs", hdi_prob=0.9)
    clo, chi = band(out, kind="obs", hdi_prob=0.9)
    after = t > UPTO
    np.testing.assert_allclose((chi - clo)[after], 2.0 * (hi - lo)[after])
    np.testing.assert_allclose((chi + clo)[after], (hi + lo)[after])
    np.testing.assert_allclose(clo[~after], lo[~after])
    # a band without a scale (0.5 here) is left as it was
    np.testing.assert_allclose(band(out, kind="obs", hdi_prob=0.5), band(ds, kind="obs", hdi_prob=0.5))
    assert json.loads(out.attrs["band_scale"]) == {"0.9": 2.0}


def test_backtests_by_fraction_and_by_step_agree_on_equal_length_runs(runset):
    """The evaluation backtests by prefix fraction, the CLI by step: the same prefix gives the
    same required scales."""
    ids = ["r1", "r2", "r3"]
    t = runset["step"].values
    n = int(round(0.3 * t.size))
    by_frac = backtest_required_scales(runset, ids, prior_for=None, fraction=0.3, seeds=[5, 6, 7], **FAST)
    by_step = backtest_required_scales(runset, ids, prior_for=None, upto=float(t[n - 1]), seeds=[5, 6, 7], **FAST)
    for rid in ids:
        np.testing.assert_allclose(by_frac[rid][0.9], by_step[rid][0.9])
    cal = calibration_from_backtests(by_frac, (0.9,))
    assert cal.runs == tuple(ids)
    with pytest.raises(ValueError, match="at least 2"):
        calibration_from_backtests({"r1": by_frac["r1"]}, (0.9,))


def test_leave_one_out_evaluation_calibrates_each_run_as_the_cli_does(runset):
    """The evaluation's leave-one-out scheme gives each run the band scale that
    ``bayes-grpo forecast --calibrate`` would give it, and never reads that run's steps."""
    from bayes_grpo.predict.evaluate import evaluate_forecasts

    n_prefix = round(0.3 * runset.sizes["step"])  # 33 steps: 0..32
    kw = dict(fractions=(0.3,), calibrate=True, calibration_scheme="leave_one_out", seed=2, **FAST)
    table = evaluate_forecasts(runset, runs=["r0", "r3"], **kw).set_index("run")
    cli = calibrate_for_run(runset, "r0", upto=float(n_prefix - 1), prior_for=None, seed=2, **FAST)
    assert table.loc["r0", "band_scale"] == pytest.approx(cli.scales[0.9])
    changed = runset.copy(deep=True)
    changed["reward"].loc[{"run": "r0", "step": slice(n_prefix, None)}] += 0.5
    table2 = evaluate_forecasts(changed, runs=["r0", "r3"], **kw).set_index("run")
    assert table2.loc["r0", "band_scale"] == pytest.approx(table.loc["r0", "band_scale"])
    assert table2.loc["r3", "band_scale"] != pytest.approx(table.loc["r3", "band_scale"])
    with pytest.raises(ValueError, match="calibration_scheme"):
        evaluate_forecasts(runset, runs=["r0"], **{**kw, "calibration_scheme": "halves"})


def test_a_calibration_short_of_backtests_names_the_runs_it_could_not_use_and_why():
    # the error said only "needs at least 2 backtested runs, got 1": a run outside
    # --reward-bounds or without steps after --upto was left out unseen
    steps = np.arange(80)
    rise = 0.8 - 0.6 * np.exp(-steps / 15.0) + 0.01 * np.sin(steps)
    curves = {
        "r0": pd.DataFrame({"reward": rise}, index=pd.Index(steps, name="step")),
        "r1": pd.DataFrame({"reward": rise + 0.01}, index=pd.Index(steps, name="step")),
        "short": pd.DataFrame({"reward": rise[:30]}, index=pd.Index(steps[:30], name="step")),
        "scaled": pd.DataFrame({"reward": 5.0 * rise}, index=pd.Index(steps, name="step")),
    }
    rs = make_runset(curves=curves, meta={k: {"model": "m"} for k in curves})
    with pytest.raises(ForecastError) as info:
        calibrate_for_run(rs, "r0", upto=UPTO, prior_for=None, reward_bounds=(0.0, 1.0), **FAST)
    msg = str(info.value)
    assert "needs at least 2 backtested runs, got 1" in msg and "run 'r0'" in msg
    assert "'short': no logged step after the prefix" in msg
    assert "'scaled': logged outside the reward bounds [0, 1] (another reward)" in msg


def test_a_run_logged_outside_the_reward_bounds_is_left_out_of_the_calibration_as_of_the_prior():
    # beside 4 runs of a success rate, a run inside [0, 1] up to --upto 30 and rising to 1.8 after
    # it (another reward, which the run-based prior leaves out and names) was backtested against
    # bands kept in [0, 1]: `forecast --calibrate --reward-bounds 0 1` of rate0 had its 90% band
    # scale 0.88 without that run, 5.82 with it
    steps = np.arange(120)
    rng = np.random.default_rng(0)

    def rate(tau, top):
        return np.clip(0.05 + (top - 0.05) * (1.0 - np.exp(-steps / tau)) + 0.03 * rng.standard_normal(steps.size), 0, 1)

    curves = {f"rate{i}": pd.DataFrame({"reward": rate(15.0 + 3 * i, 0.8 + 0.03 * i)}, index=steps) for i in range(5)}
    rise = 1.8 * (1 - np.exp(-np.maximum(steps - 20, 0) / 30.0)) + 0.01 * np.sin(steps)
    other = {**curves, "wordle": pd.DataFrame({"reward": np.where(steps <= 30, np.clip(rise, 0, 1), rise)}, index=steps)}
    kw = dict(reward_bounds=(0.0, 1.0), calibrate=True, likelihood="iid", n_draws=300, check_instability=False, seed=0)
    alone = forecast_in_runset(make_runset(curves, {}), "rate0", 30, **kw)
    beside = forecast_in_runset(make_runset(other, {}), "rate0", 30, **kw)
    assert json.loads(beside.attrs["calibration"])["runs"] == ["rate1", "rate2", "rate3", "rate4"]
    assert beside.attrs["band_scale"] == alone.attrs["band_scale"]
    skipped = {}
    backtest_required_scales(make_runset(other, {}), ["wordle"], prior_for=None, upto=30, reward_bounds=(0.0, 1.0), skipped=skipped, **FAST)
    assert skipped == {"wordle": "logged outside the reward bounds [0, 1] (another reward)"}


def test_a_calibrated_band_of_a_bounded_reward_stays_within_its_bounds(runset):
    # `forecast ... --calibrate --reward-bounds 0 1`: the band scaled about its midpoint went past
    # the bounds (a success rate above 1), while the raw bands, of clipped draws, stay inside
    t = runset["step"].values.astype(float)
    y = runset["reward"].sel(run="r0").values
    ds = forecast_run(t[t <= UPTO], y[t <= UPTO], t, hdi_probs=(0.9,), reward_bounds=(0.0, 1.0), **FAST)
    out = apply_band_calibration(ds, BandCalibration(scales={0.9: 4.0}, runs=("a", "b")))
    lo, hi = band(out, kind="obs", hdi_prob=0.9)
    assert lo.min() >= 0.0 and hi.max() <= 1.0
    assert (hi - lo)[t > UPTO].mean() > (np.subtract(*band(ds, kind="obs", hdi_prob=0.9)[::-1]))[t > UPTO].mean()


def test_the_calibration_of_a_run_does_not_depend_on_the_order_of_the_other_runs(runset):
    # each backtest was seeded seed + offset + its position among the other runs: the same run
    # set in another order gave r0 another band scale (2.53 against 2.60 at 50% here), and the
    # run-based prior took its mixture components in run-set order (mean band moved by 0.013)
    kw = dict(calibrate=True, seed=1, **FAST)
    ids = [str(r) for r in runset["run"].values]
    a = forecast_in_runset(runset, "r0", UPTO, **kw)
    b = forecast_in_runset(runset.sel(run=[ids[0], *ids[:0:-1]]), "r0", UPTO, **kw)
    scale_a, scale_b = json.loads(a.attrs["band_scale"]), json.loads(b.attrs["band_scale"])
    assert scale_a.keys() == scale_b.keys()
    for p in scale_a:
        assert scale_a[p] == pytest.approx(scale_b[p], rel=1e-9), p
    np.testing.assert_allclose(a["obs_hdi"].values, b["obs_hdi"].values, rtol=1e-9)


def test_a_backtest_prefix_too_short_is_left_out_counting_its_steps_in_words():
    # the reason read "1 step(s) in the prefix, fewer than 5"
    from bayes_grpo.predict.calibration import MIN_PREFIX_STEPS, backtest_required_scales

    steps = np.arange(20)
    frames = {r: pd.DataFrame({"reward": 0.2 + 0.01 * steps}, index=steps) for r in ("a", "b")}
    ds = make_runset(frames)
    skipped: dict[str, str] = {}
    out = backtest_required_scales(ds, ["a"], prior_for=None, fraction=0.05, skipped=skipped)
    assert out == {} and skipped == {"a": f"1 step in the prefix, fewer than {MIN_PREFIX_STEPS}"}
    backtest_required_scales(ds, ["b"], prior_for=None, fraction=0.1, skipped=skipped)
    assert skipped["b"] == f"2 steps in the prefix, fewer than {MIN_PREFIX_STEPS}"


def test_a_successful_calibration_names_the_runs_it_left_out_and_why(runset, tmp_path, capsys):
    # `forecast tiny_runs.nc --run g16_p8_lr0.001_k1_adamw_s0 --upto 20 --calibrate` said
    # "calibration_runs: 14" of the 15 other runs, and which one was left out (the K_ref 8 run,
    # 3 steps up to step 20) and why only when the calibration failed for too few
    from bayes_grpo.cli import main

    steps = runset["step"].values
    y = runset["reward"].sel(run="r1").values
    short = pd.DataFrame({"reward": y[:30]}, index=pd.Index(steps[:30], name="step"))  # ends before the prefix's end
    sparse = pd.DataFrame({"reward": y[::10]}, index=pd.Index(steps[::10], name="step"))  # 4 steps up to UPTO
    curves = {
        str(r): pd.DataFrame({"reward": runset["reward"].sel(run=r).values}, index=pd.Index(steps, name="step"))
        for r in runset["run"].values
    }
    rs = make_runset(curves={**curves, "short": short, "sparse": sparse}, meta={k: {"model": "m"} for k in [*curves, "short", "sparse"]})
    cal = calibrate_for_run(rs, "r0", upto=UPTO, prior_for=None, hdi_probs=(0.9,), **FAST)
    assert cal.runs == ("r1", "r2", "r3", "r4")
    assert cal.left_out == {
        "short": "no logged step after the prefix to score",
        "sparse": "4 steps in the prefix, fewer than 5",
    }
    said = cal.to_dict()
    assert said["n_left_out"] == 2 and said["left_out"] == cal.left_out and said["n_runs"] == 4
    assert calibrate_for_run(runset, "r0", upto=UPTO, prior_for=None, hdi_probs=(0.9,), **FAST).left_out == {}
    path = save_runset(rs, tmp_path / "runs.nc")
    argv = ["forecast", str(path), "--run", "r0", "--upto", str(UPTO), "--likelihood", "iid", "--calibrate"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calibration_runs"] == 4 and out["calibration_left_out"] == cal.left_out
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "calibration_left_out:\n  short: no logged step after the prefix to score\n  sparse: 4 steps in the prefix" in text
