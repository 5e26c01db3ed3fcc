"""Prediction for new hyperparameters: bands, milestones, regime, stop step, files, plots."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from bayes_grpo.dynamics.coefficients import damping_ratio, oscillator_coefficients
from bayes_grpo.dynamics.trajectory import reward_trajectory, single_exponential
from bayes_grpo.predict.predict import (
    horizon_steps,
    load_prediction,
    plot_prediction,
    predict_from_draws,
    save_prediction,
)
from bayes_grpo.predict.summary import (
    band,
    expected_remaining_gain,
    first_passage,
    hdi_bounds,
    regime_probabilities,
    stop_step,
    summary_dict,
)


def _draws(a, momentum=0.5, k_ref=2.0, plateau=0.8, r0=0.2, sigma=0.02, n_chain=2):
    """Coefficient draws shaped like GRPODynamicsModel.coefficient_draws (chain, draw)."""
    a = np.asarray(a, dtype=float).reshape(n_chain, -1)
    m, c, k = oscillator_coefficients(a, momentum, k_ref)
    shape = a.shape
    full = lambda v: np.broadcast_to(np.asarray(v, dtype=float), shape)  # noqa: E731
    data = {
        "a": a,
        "M_eff": m,
        "C_eff": c,
        "K_eff": k,
        "zeta": damping_ratio(m, c, k),
        "plateau": full(plateau),
        "initial_reward": full(r0),
        "noise_d": full(0.0),
        "sigma": full(sigma),
    }
    return xr.Dataset({name: (("chain", "draw"), np.array(v)) for name, v in data.items()})


def test_hdi_of_normal_draws_is_plus_minus_1_645_sd():
    x = np.random.default_rng(0).standard_normal((200_000, 2)) * np.array([1.0, 3.0])
    lo, hi = hdi_bounds(x, 0.9)
    np.testing.assert_allclose(hi, 1.645 * np.array([1.0, 3.0]), rtol=0.02)
    np.testing.assert_allclose(lo, -1.645 * np.array([1.0, 3.0]), rtol=0.02)


def test_time_to_fraction_of_the_rise_matches_the_single_exponential_closed_form():
    tau = 37.0
    steps = np.arange(0.0, 1001.0)
    curve = single_exponential(steps, 0.9, 0.1, tau)[None, :]
    for f in (0.9, 0.95, 0.99):
        got = first_passage(curve, steps, np.array([0.9]), np.array([0.1]), f)[0]
        assert got == np.ceil(-tau * np.log(1 - f))


def test_remaining_gain_and_stop_step():
    steps = np.arange(0.0, 500.0)
    curve = single_exponential(steps, 1.0, 0.0, 50.0)[None, :]
    gain = expected_remaining_gain(curve, np.array([1.0]))
    np.testing.assert_allclose(gain, np.exp(-steps / 50.0), rtol=1e-9)
    assert stop_step(steps, gain, 0.01) == np.ceil(50.0 * np.log(100.0))
    assert np.isnan(stop_step(steps, gain, 1e-9))  # never within the horizon
    # an overshooting (underdamped) draw: the gain is counted to the future peak, not p*
    under = reward_trajectory(steps, 1.0, 0.02, 0.01, 1.0, 0.0)[None, :]
    g = expected_remaining_gain(under, np.array([1.0]))
    peak = np.argmax(under[0])
    assert g[0] == pytest.approx(under[0, peak] - under[0, 0])


def test_regime_probabilities_add_to_one_and_classify():
    p = regime_probabilities(np.array([0.5, 0.99, 2.0, 3.0]), np.array([0.1, 0.1, 0.1, -0.1]))
    assert p == {"overdamped": 0.25, "critical": 0.25, "underdamped": 0.25, "unstable": 0.25}


def test_prediction_bands_contain_the_true_trajectory_of_the_setting():
    rng = np.random.default_rng(1)
    a_true = 0.004
    draws = _draws(a_true * np.exp(0.1 * rng.standard_normal(2000)))
    ds = predict_from_draws(draws, steps=1000, momentum=0.5, k_ref=2.0, seed=3)
    m, c, k = oscillator_coefficients(a_true, 0.5, 2.0)
    truth = reward_trajectory(ds["step"].values, m, c, k, 0.8, 0.2)
    lo, hi = band(ds, kind="mean", hdi_prob=0.9)
    assert np.mean((truth >= lo - 1e-12) & (truth <= hi + 1e-12)) == 1.0
    # observed-reward band: mean uncertainty and noise add in quadrature (both ~Gaussian here)
    olo, ohi = band(ds, kind="obs", hdi_prob=0.9)
    assert (ohi - olo)[-1] == pytest.approx(np.hypot((hi - lo)[-1], 2 * 1.645 * 0.02), abs=0.004)
    zeta = damping_ratio(m, c, k)
    assert ds.attrs["regime"] == ("underdamped" if zeta < 1 else "overdamped")
    assert ds.attrs["prob_unstable_closed_form"] == 0.0
    # stop when 1% of the 0.6 rise is left: about C/K ln(100) steps for this overdamped setting
    true_stop = ds["step"].values[np.argmax(0.8 - truth < 0.006)]
    assert abs(ds.attrs["stop_step"] - true_stop) < 0.1 * true_stop
    s = summary_dict(ds)
    assert set(s["time_to_fraction"]) == {"90%", "95%", "99%"}


def test_an_unstable_setting_is_reported_unstable_by_both_criteria():
    # mu = 0.5, L = 5: closed-form threshold a* = 0.1, exact a* = 0.1286; take a = 0.2
    draws = _draws(
        np.full(200, 0.2) * np.exp(0.01 * np.random.default_rng(0).standard_normal(200)),
        momentum=0.5,
        k_ref=5.0,
    )
    ds = predict_from_draws(draws, steps=30, momentum=0.5, k_ref=5.0)
    assert ds.attrs["prob_unstable_closed_form"] == 1.0
    assert ds.attrs["prob_unstable_exact"] == 1.0
    assert ds.attrs["regime"] == "unstable"


def test_prediction_round_trips_through_netcdf_and_plots(tmp_path):
    draws = _draws(np.full(400, 0.003))
    ds = predict_from_draws(draws, steps=np.arange(0.0, 300.0, 2.0), momentum=0.5, k_ref=2.0)
    path = save_prediction(ds, tmp_path / "pred.nc")
    back = load_prediction(path)
    xr.testing.assert_allclose(back["mean_hdi"], ds["mean_hdi"])
    assert back.attrs["regime"] == ds.attrs["regime"]
    fig = plot_prediction(back, observed=(np.arange(10.0), np.full(10, 0.2)))
    fig.savefig(tmp_path / "pred.png")
    assert (tmp_path / "pred.png").stat().st_size > 1000


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="at least 1 step"):
        horizon_steps(0)
    with pytest.raises(ValueError, match="lack"):
        predict_from_draws(
            xr.Dataset({"a": (("chain", "draw"), np.ones((1, 3)))}),
            steps=10,
            momentum=0.0,
            k_ref=1.0,
        )


def _small_runset(n_runs=3, n_steps=120, seed=0):
    import pandas as pd

    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(seed)
    steps = np.arange(n_steps)
    m, c, k = oscillator_coefficients(0.01, 0.5, 4.0)
    curves, meta = {}, {}
    for i in range(n_runs):
        mean = reward_trajectory(steps.astype(float), m, c, k, 0.8, 0.2)
        curves[f"r{i}"] = pd.DataFrame(
            {"reward": mean + 0.02 * rng.standard_normal(n_steps)}, index=steps
        )
        meta[f"r{i}"] = {
            "model": "toy",
            "momentum": 0.5,
            "k_ref": 4.0,
            "learning_rate": 0.01,
            "momentum_convention": "heavy_ball",
            "group_size": 8.0,
        }
    return make_runset(curves, meta)


def test_cli_forecast_backtests_the_rest_of_the_run(tmp_path, capsys):
    import json

    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    path = save_runset(_small_runset(), tmp_path / "runs.nc")
    rc = main(
        [
            "forecast",
            str(path),
            "--run",
            "r1",
            "--upto",
            "40",
            "--likelihood",
            "iid",
            "--json",
            "-o",
            str(tmp_path / "fc.nc"),
            "--plot",
            str(tmp_path / "fc.png"),
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prior"].startswith("2 other runs of the same LLM")
    assert out["backtest_steps"] == 79
    assert out["backtest_coverage_0.9"] >= 0.8
    assert out["backtest_rmse"] < 0.04
    assert (tmp_path / "fc.png").exists() and load_prediction(tmp_path / "fc.nc").attrs[
        "upto_step"
    ] == 40.0
    assert main(["forecast", str(path), "--run", "nope", "--upto", "40"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_predict_and_forecast_from_a_fitted_posterior(tmp_path, capsys):
    import json

    from bayes_grpo.cli import main
    from bayes_grpo.model import GRPODynamicsModel

    ds = _small_runset(n_runs=2, n_steps=60)
    model = GRPODynamicsModel()
    model.fit(ds, draws=60, tune=60, chains=2, progressbar=False, cores=1, random_seed=1)
    path = model.save(tmp_path / "toy.nc")
    rc = main(
        [
            "predict",
            str(path),
            "--lr",
            "0.01",
            "--momentum",
            "0.5",
            "--k-ref",
            "6",
            "--group-size",
            "8",
            "--steps",
            "80",
            "--model",
            "toy",
            "--json",
            "-o",
            str(tmp_path / "p.nc"),
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prob_unstable_closed_form"] == 0.0  # a L = 0.06 < 1 - mu = 0.5
    assert set(out["regime_probability"]) == {"overdamped", "critical", "underdamped", "unstable"}
    assert 0.6 < out["final_mean_reward"] < 1.0
    from bayes_grpo.runset import save_runset

    runs = save_runset(ds, tmp_path / "runs.nc")
    rc = main(
        [
            "forecast",
            str(runs),
            "--run",
            "r0",
            "--upto",
            "20",
            "--prior",
            str(path),
            "--likelihood",
            "iid",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prior"].startswith("posterior")
