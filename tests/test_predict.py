"""Prediction for new hyperparameters: bands, milestones, regime, stop step, files, plots."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

from bayes_grpo.dynamics.coefficients import damping_ratio, oscillator_coefficients
from bayes_grpo.dynamics.trajectory import reward_trajectory, single_exponential
from bayes_grpo.predict.discrepancy import (
    DiscrepancyProfile,
    add_discrepancy,
    estimate_discrepancy,
    setting_labels,
)
from bayes_grpo.predict.predict import (
    choose_law,
    horizon_steps,
    load_prediction,
    plot_prediction,
    predict_from_draws,
    predict_run,
    recursion_trajectories,
    save_prediction,
    stability_probabilities,
    trajectories_from_draws,
)
from bayes_grpo.predict.summary import (
    attr_warnings,
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


def test_milestone_median_counts_the_draws_that_get_there_after_the_horizon():
    """Of 10 draws (time constants 5, 15 .. 95 steps, horizon 60 steps) 3 reach 90% of the
    rise and 1 reaches 99%: both medians lie beyond the horizon (None); the median over the
    reaching draws put the 99% milestone (step 24) before the 90% one (step 35)."""
    from bayes_grpo.predict.summary import summarise_draws

    steps = np.arange(0.0, 61.0)
    taus = np.linspace(5.0, 95.0, 10)
    curves = single_exponential(steps[None, :], 0.9, 0.1, taus[:, None])
    ones = np.ones(10)
    ds = summarise_draws(
        steps,
        curves,
        curves,
        plateau=0.9 * ones,
        initial_reward=0.1 * ones,
        zeta=2 * ones,
        damping=ones,
    )
    reached = dict(zip(ds["fraction"].values, ds["time_to_fraction_reached"].values))
    assert reached[0.9] == pytest.approx(0.3) and reached[0.99] == pytest.approx(0.1)
    assert np.isnan(ds["time_to_fraction_median"].values).all()
    assert all(v["median_step"] is None for v in summary_dict(ds)["time_to_fraction"].values())
    # every draw within the horizon: the plain median, growing with the fraction
    fast = curves[[0, 0]]
    ds = summarise_draws(
        steps,
        fast,
        fast,
        plateau=0.9 * ones[:2],
        initial_reward=0.1 * ones[:2],
        zeta=2 * ones[:2],
        damping=ones[:2],
    )
    expected = [np.ceil(-5.0 * np.log(1 - f)) for f in (0.9, 0.95, 0.99)]
    np.testing.assert_array_equal(ds["time_to_fraction_median"].values, expected)


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
    ds = predict_from_draws(draws, steps=1000, momentum=0.5, k_ref=2.0, seed=3, law="continuous")
    assert ds.attrs["law"] == "continuous" and ds.attrs["discrepancy"] == "off"
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


def test_a_posterior_with_some_unstable_draws_gives_the_mean_of_the_stable_runs_and_says_so():
    # mu = 0.5, L = 2: 85% of the draws rise (a = 0.05), 15% sit past the exact threshold
    # (a = 0.5) and grow without bound; their average is not a reward any run will log
    gains = np.r_[np.full(170, 0.05), np.full(30, 0.5)]
    ds = predict_from_draws(_draws(gains), steps=300, momentum=0.5, k_ref=2.0, seed=0)
    stable = predict_from_draws(_draws(gains[:170]), steps=300, momentum=0.5, k_ref=2.0, seed=0)
    assert ds.attrs["n_draws_diverging"] == 30
    assert ds.attrs["prob_unstable_exact"] == pytest.approx(0.15)
    assert np.allclose(ds["mean_mean"], stable["mean_mean"])
    assert float(ds["mean_mean"][-1]) == pytest.approx(0.8, abs=1e-3)
    assert ds.attrs["stop_step"] == stable.attrs["stop_step"] < 300
    assert np.allclose(ds["time_to_fraction_median"], stable["time_to_fraction_median"])
    # the median and the bands keep every draw: the 90% band shows the divergence
    assert np.allclose(ds["mean_median"], stable["mean_median"])  # 85% of the draws are one curve
    lo, hi = band(ds, kind="mean", hdi_prob=0.9)
    assert max(abs(lo[-1]), abs(hi[-1])) > 10.0
    out = summary_dict(ds)
    assert out["n_draws_diverging"] == 30 and abs(out["final_mean_reward"] - 0.8) < 1e-3
    assert any("30 of 200 posterior draws (15%) are unstable" in w for w in attr_warnings(ds))
    # no draw diverges: nothing said
    assert "n_draws_diverging" not in summary_dict(stable)
    assert not any("unstable at this setting" in w for w in attr_warnings(stable))


def test_between_the_two_thresholds_the_regime_is_the_recursions_damped_oscillation():
    # mu 0.5, L = 2: closed-form threshold a = 0.25, exact 0.2808. At a = 0.27 the continuum has
    # C_eff < 0 and called the setting "unstable" with probability 1, while the recursion the
    # prediction draws converges (no draw diverges): one prediction said both
    ds = predict_from_draws(_draws(np.full(100, 0.27), momentum=0.5, k_ref=2.0), steps=200, momentum=0.5, k_ref=2.0)
    assert ds.attrs["n_draws_diverging"] == 0 and ds.attrs["prob_unstable_exact"] == 0.0
    assert ds.attrs["prob_unstable_closed_form"] == 1.0  # the closed form's own criterion, as named
    assert ds.attrs["regime"] == "underdamped" and ds.attrs["regime_prob"] == 1.0
    # past the exact threshold the draws diverge and the regime is unstable
    past = predict_from_draws(_draws(np.full(100, 0.3), momentum=0.5, k_ref=2.0), steps=200, momentum=0.5, k_ref=2.0)
    assert past.attrs["regime"] == "unstable" and past.attrs["n_draws_diverging"] == 100
    # where every draw diverges there is no step to stop at (it read as the horizon's last step)
    assert np.isnan(past.attrs["stop_step"]), past.attrs["stop_step"]
    assert any("there is no stop step" in w for w in attr_warnings(past))
    # the continuous law keeps the continuum's criterion for both
    cont = predict_from_draws(
        _draws(np.full(100, 0.27), momentum=0.5, k_ref=2.0), steps=200, momentum=0.5, k_ref=2.0, law="continuous"
    )
    assert cont.attrs["regime"] == "unstable"
    # no mask: the continuum's labels, as before
    assert regime_probabilities(np.array([np.nan]), np.array([-0.04]))["unstable"] == 1.0
    assert regime_probabilities(np.array([np.nan]), np.array([-0.04]), np.array([False]))["underdamped"] == 1.0


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


def test_the_plots_legend_does_not_hide_the_logged_rewards():
    # `forecast runs.nc --run g4_k1_s0 --upto 24 --plot fc.png` of a TRL run whose reward rose
    # after the cut while the band stayed low: the legend, fixed at the lower right, covered the
    # logged rewards of steps 55-80, the ones the forecast is to be compared with
    draws = _draws(np.full(400, 0.003))
    ds = predict_from_draws(draws, steps=np.arange(0.0, 81.0), momentum=0.5, k_ref=2.0)
    steps = np.arange(0.0, 81.0)
    rewards = np.where(steps > 40, 0.2, np.nan)  # low, at the right: where the band is not
    fig = plot_prediction(ds, observed=(steps, rewards))
    fig.canvas.draw()
    ax = fig.axes[0]
    box = ax.get_legend().get_window_extent()
    ok = np.isfinite(rewards)
    points = ax.transData.transform(np.column_stack([steps[ok], rewards[ok]]))
    inside = (points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1)
    assert not inside.any(), f"{inside.sum()} logged rewards under the legend"


def test_the_plots_legend_stands_beside_the_axes_over_no_band_or_curve():
    # loc="best" weighs the logged points and lines, not the HDI bands: a legend inside the axes
    # stood over a band that spans the whole run (and over the steps where the legend fit best)
    import matplotlib.pyplot as plt

    draws = _draws(np.full(400, 0.003))
    ds = predict_from_draws(draws, steps=np.arange(0.0, 81.0), momentum=0.5, k_ref=2.0)
    steps = np.arange(0.0, 81.0)
    fig = plot_prediction(ds, observed=(steps, np.full(81, 0.3)), truth=(steps, np.full(81, 0.35)))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    box = ax.get_legend().get_window_extent(renderer)
    assert not box.overlaps(ax.get_window_extent(renderer)), (box, ax.get_window_extent(renderer))
    assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1), box
    assert ax.get_window_extent(renderer).width > 5 * fig.dpi  # the plot kept its width
    plt.close(fig)


def test_save_prediction_refuses_an_existing_file_unless_told_to_overwrite(tmp_path):
    ds = predict_from_draws(_draws(np.full(50, 0.003)), steps=np.arange(0.0, 30.0), momentum=0.5, k_ref=2.0)
    path = tmp_path / "pred.nc"
    path.write_bytes(b"the user's file")
    with pytest.raises(FileExistsError, match="pred.nc: already exists"):
        save_prediction(ds, path)
    assert path.read_bytes() == b"the user's file"
    xr.testing.assert_allclose(load_prediction(save_prediction(ds, path, overwrite=True))["mean_hdi"], ds["mean_hdi"])


def test_a_file_that_is_no_prediction_is_refused_on_load_and_by_the_report_before_sampling(
    tmp_path, capsys
):
    # `report FIT.nc --prediction runs.nc` (a run set, or the posterior itself) ended in a
    # KeyError traceback, after the invariance and comparison stages had sampled for minutes
    from bayes_grpo.cli import main
    from bayes_grpo.runset import runset_from_arrays, save_runset

    runs = save_runset(
        runset_from_arrays(["r"], np.arange(20), {"reward": np.linspace(0.2, 0.8, 20)[None]}),
        tmp_path / "runs.nc",
    )
    with pytest.raises(ValueError, match="not a prediction or forecast file"):
        load_prediction(runs)
    posterior = tmp_path / "not_even_a_posterior.nc"
    posterior.write_bytes(b"never read")
    argv = ["report", str(posterior), "-o", str(tmp_path / "r.html"), "--prediction", str(runs)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not a prediction or forecast file" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_a_fitted_model_or_a_run_set_given_as_a_prediction_is_named_so_with_what_gives_one(tmp_path, capsys):
    # `report models/tiny.nc --prediction models/bandit.nc` said the file "has no regime,
    # regime_prob, stop_step ...", not that it is a fit, from which `predict` makes the file
    from pathlib import Path

    from bayes_grpo.cli import main
    from bayes_grpo.runset import runset_from_arrays, save_runset

    fit = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    with pytest.raises(ValueError, match=r"it is a fitted model \(a posterior saved by `bayes-grpo fit`\): predict a setting from it \(`bayes-grpo predict FIT"):
        load_prediction(fit)
    runs = save_runset(
        runset_from_arrays(["r"], np.arange(20), {"reward": np.linspace(0.2, 0.8, 20)[None]}),
        tmp_path / "runs.nc",
    )
    with pytest.raises(ValueError, match=r"it is a run set \(written by `bayes-grpo ingest` or `simulate`\): forecast one of its runs"):
        load_prediction(runs)
    argv = ["report", str(fit), "-o", str(tmp_path / "r.html"), "--prediction", str(fit)]
    assert main(argv) == 2
    assert f"error: {fit}: not a prediction or forecast file" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
    # a netCDF file of neither kind: the attributes it lacks, as before
    other = tmp_path / "other.nc"
    xr.Dataset({"x": ("i", np.arange(3.0))}).to_netcdf(other, engine="h5netcdf")
    with pytest.raises(ValueError, match=r"it has no regime, regime_prob, stop_step \.\.\.$"):
        load_prediction(other)


def test_a_plot_or_a_folder_given_as_a_prediction_is_an_error_naming_it_not_a_traceback(tmp_path, capsys):
    # `report FIT.nc --prediction pred.png` (the --plot of predict beside its -o) and
    # `--prediction DIR` ended in h5py's OSError / IsADirectoryError traceback
    from bayes_grpo.cli import main

    png = tmp_path / "pred.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    folder = tmp_path / "preds"
    folder.mkdir()
    with pytest.raises(ValueError, match=r"pred\.png: not a netCDF prediction file"):
        load_prediction(png)
    with pytest.raises(ValueError, match=r"preds: is a folder, not a prediction file"):
        load_prediction(folder)
    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"never read")
    assert main(["report", str(posterior), "-o", str(tmp_path / "r.html"), "--prediction", str(png)]) == 2
    err = capsys.readouterr().err
    assert "pred.png: not a netCDF prediction file" in err and len(err.strip().splitlines()) == 1


def test_the_discrepancy_of_a_fit_of_runs_without_a_model_name_is_estimated():
    # `bayes-grpo predict fit.nc ...` of a fit of runs that name no LLM (CSV / JSONL exports;
    # the fit calls them UNKNOWN_MODEL) failed with "error: '' is not in list"
    import types

    from bayes_grpo.model.prepare import UNKNOWN_MODEL
    from bayes_grpo.predict.discrepancy import training_predictor_trajectories
    from bayes_grpo.runset import runset_from_arrays

    steps = np.arange(30)
    runs = runset_from_arrays(["a", "b"], steps, {"reward": np.tile(np.linspace(0.2, 0.8, 30), (2, 1))})
    shape = (1, 4)
    run_var = lambda v: (("chain", "draw", "run"), np.full((*shape, 2), v))  # noqa: E731
    post = xr.Dataset(
        {
            "plateau": (("chain", "draw", "model"), np.full((*shape, 1), 0.8)),
            "initial_reward_model": (("chain", "draw", "model"), np.full((*shape, 1), 0.2)),
            "M_eff": run_var(1.0), "C_eff": run_var(0.3), "K_eff": run_var(0.02),
        },
        coords={"model": [UNKNOWN_MODEL], "run": ["a", "b"]},
    )  # fmt: skip
    fitted = types.SimpleNamespace(idata=types.SimpleNamespace(posterior=post), runset=runs)
    curves, initial, plateau, used = training_predictor_trajectories(fitted, law="continuous")
    assert used == "continuous" and curves.shape == (2, 30)
    np.testing.assert_allclose(initial, 0.2)
    np.testing.assert_allclose(plateau, 0.8)
    assert curves[0, 0] == pytest.approx(0.2) and np.all(np.diff(curves[0]) > 0)


def test_a_training_runs_diverging_draws_do_not_widen_every_predictions_band():
    # a fit (100/100 draws, 2 chains) of TRL runs of the tiny model, Adam ones and one SGD run
    # at lr 0.3: one chain's gain made the SGD run's recursion diverge (to ~2e4 by step 80); the
    # training predictor's mean kept those draws, the discrepancy profile pooled over the LLM's
    # runs got sd ~1.4e4 rises, and `predict --k-ref 4` of an Adam setting (no diverging draw)
    # gave final_mean_reward_hdi_0.9 [-2322, 3038] for a reward in [0, 1]
    import types

    import pandas as pd

    from bayes_grpo.predict.discrepancy import (
        discrepancy_from_model,
        training_predictor_trajectories,
    )
    from bayes_grpo.runset import runset_from_arrays

    steps = np.arange(40)
    rise = 0.2 + 0.6 * (1 - 0.9 ** (steps + 1.0))
    meta = {r: {"model": "m", "momentum": 0.0, "k_ref": 1.0, "learning_rate": lr} for r, lr in (("a", 0.1), ("b", 0.3))}
    runs = runset_from_arrays(["a", "b"], steps, {"reward": np.tile(rise, (2, 1))}, meta)
    gains = np.array([[0.1, 0.3], [0.1, 0.3], [0.1, 0.3], [0.1, 2.5]])  # draw 4: run b diverges
    post = xr.Dataset(
        {
            "plateau": (("chain", "draw", "model"), np.full((1, 4, 1), 0.8)),
            "initial_reward_model": (("chain", "draw", "model"), np.full((1, 4, 1), 0.2)),
            "a": (("chain", "draw", "run"), gains[None]),
            "M_eff": (("chain", "draw", "run"), np.ones((1, 4, 2))),
            "C_eff": (("chain", "draw", "run"), np.where(gains[None] > 2, -0.1, 0.5)),
            "K_eff": (("chain", "draw", "run"), gains[None]),
            "sigma": (("chain", "draw", "run"), np.full((1, 4, 2), 0.01)),
        },
        coords={"model": ["m"], "run": ["a", "b"]},
    )
    fitted = types.SimpleNamespace(idata=types.SimpleNamespace(posterior=post), runset=runs)
    for law in ("recursion", "continuous"):
        curves, _, _, used = training_predictor_trajectories(fitted, law=law)
        assert used == law
        assert np.all((curves > 0.0) & (curves < 1.0)), (law, np.abs(curves).max())
    # the profile itself (the run summary the fit gives, here from the draws)
    summary = pd.DataFrame({"model": ["m", "m"], "sigma": [0.01, 0.01]}, index=["a", "b"])
    fitted.run_summary = lambda: summary
    profile = discrepancy_from_model(fitted, model="m", law="recursion")
    assert np.nanmax(profile.sd) < 1.0, profile.sd


def test_bands_asked_widest_first_are_summarised_and_scored_by_the_widest():
    # `forecast ... --hdi 0.95 0.5` (and predict alike) reported final_mean_reward_hdi_0.5 and
    # backtest_coverage_0.5 and drew only the 50% band: the last probability was taken as the
    # widest; `--hdi 0.9 0.9` made a duplicate hdi_prob coordinate
    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.predict.summary import summary_dict
    from bayes_grpo.runset import runset_from_arrays

    draws = _draws(np.random.default_rng(0).uniform(0.003, 0.005, 200))
    ds = predict_from_draws(draws, steps=40, momentum=0.5, k_ref=2.0, hdi_probs=(0.95, 0.5))
    np.testing.assert_array_equal(ds["hdi_prob"].values, [0.5, 0.95])
    assert "final_mean_reward_hdi_0.95" in summary_dict(ds)
    same = predict_from_draws(draws, steps=40, momentum=0.5, k_ref=2.0, hdi_probs=(0.9, 0.9))
    np.testing.assert_array_equal(same["hdi_prob"].values, [0.9])
    steps = np.arange(60)
    curves = 0.8 - 0.6 * np.exp(-steps[None] / np.array([[10.0], [12.0], [14.0]]))
    runs = runset_from_arrays(["a", "b", "c"], steps, {"reward": curves + 0.01 * np.sin(steps)})
    fc = forecast_in_runset(runs, "a", 20, hdi_probs=(0.8, 0.5), likelihood="iid", n_draws=100)
    assert "backtest_coverage_0.8" in fc.attrs and "backtest_coverage_0.5" not in fc.attrs


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


def _loop_recursion(a, mu, lag, obs_lag, n, p_star, r0):
    """The lagged heavy-ball recursion written out step by step (independent of the code)."""
    e = {m: r0 - p_star for m in range(-lag - 2, 1)}
    for k in range(n):
        e[k + 1] = e[k] + mu * (e[k] - e[k - 1]) - a * e[k - lag]
    return np.array([p_star + e[max(k - obs_lag, 0)] for k in range(n + 1)])


@pytest.mark.parametrize("lag,obs_lag,mu", [(0, 0, 0.0), (1, 1, 0.5), (6, 6, 0.5), (4, 0, 0.9)])
def test_recursion_law_is_the_exact_discrete_recursion_with_the_reward_logged_lag_steps_behind(
    lag, obs_lag, mu
):
    a = np.array([0.01, 0.02, 0.05])
    got = recursion_trajectories(
        a, mu, lag, np.arange(81.0), np.full(3, 0.8), np.full(3, 0.2), observation_lag=obs_lag
    )
    for i in range(3):
        want = _loop_recursion(a[i], mu, lag, obs_lag, 80, 0.8, 0.2)
        np.testing.assert_allclose(got[i], want, rtol=0, atol=1e-14)
    # the reward logged at step n <= L is the initial one: a pure delay of L steps
    np.testing.assert_allclose(got[:, : obs_lag + 1], 0.2, rtol=0, atol=1e-15)
    # explicit (sparse) steps are samples of the same trajectory
    sparse = recursion_trajectories(
        a,
        mu,
        lag,
        np.array([0.0, 7.0, 40.0]),
        np.full(3, 0.8),
        np.full(3, 0.2),
        observation_lag=obs_lag,
    )
    np.testing.assert_array_equal(sparse, got[:, [0, 7, 40]])


def test_auto_law_takes_the_recursion_where_it_is_defined_and_the_expansion_otherwise():
    steps = np.arange(10.0)
    assert (
        choose_law("auto", parameterisation="mechanistic", k_ref=6, steps=steps)[0] == "recursion"
    )
    law, why = choose_law("auto", parameterisation="mechanistic", k_ref=2.5, steps=steps)
    assert law == "continuous" and "not a whole number" in why
    law, why = choose_law("auto", parameterisation="phenomenological", k_ref=2, steps=steps)
    assert law == "continuous" and "no gain" in why
    law, why = choose_law("auto", parameterisation="mechanistic", k_ref=2, steps=steps + 0.5)
    assert law == "continuous" and "not integers" in why
    with pytest.raises(ValueError, match="not defined"):
        choose_law("recursion", parameterisation="mechanistic", k_ref=2.5, steps=steps)
    with pytest.raises(ValueError, match="unknown trajectory law"):
        choose_law("euler", parameterisation="mechanistic", k_ref=2, steps=steps)


def test_at_k_ref_6_the_expansion_rises_early_and_the_recursion_band_holds_the_delayed_truth():
    # truth: the exact recursion, reward logged K_ref steps behind (the bandit's layout)
    a_true, mu, lag = 0.03, 0.5, 6
    steps = np.arange(151.0)
    truth = _loop_recursion(a_true, mu, lag, lag, 150, 0.8, 0.2)
    draws = _draws(a_true * np.exp(0.03 * np.random.default_rng(2).standard_normal(2000)), k_ref=6)
    rec = predict_from_draws(draws, steps=steps, momentum=mu, k_ref=lag, seed=1)
    assert rec.attrs["law"] == "recursion" and rec.attrs["observation_lag"] == 6.0
    lo, hi = band(rec, kind="mean", hdi_prob=0.9)
    assert np.mean((truth >= lo - 1e-12) & (truth <= hi + 1e-12)) >= 0.95
    cont = predict_from_draws(draws, steps=steps, momentum=mu, k_ref=lag, law="continuous")
    clo, chi = band(cont, kind="mean", hdi_prob=0.9)
    assert np.mean((truth >= clo) & (truth <= chi)) < 0.6
    # the expansion reaches half of the rise several steps before the truth does
    half = lambda x: steps[np.argmax(x >= 0.5)]  # noqa: E731
    assert half(truth) - half(cont["mean_mean"].values) >= 4
    assert abs(half(truth) - half(rec["mean_mean"].values)) <= 1


def test_stability_comes_from_the_one_definition_in_checks():
    from bayes_grpo.checks.stability import stability_probabilities as checks_probabilities

    a = 0.1286 * np.exp(0.2 * np.random.default_rng(0).standard_normal(500))
    ours = stability_probabilities(a, 0.5, 5)
    theirs = checks_probabilities(a, momentum=0.5, k_ref=5)
    assert ours["prob_unstable_exact"] == theirs["p_unstable_exact"]
    assert ours["prob_unstable_closed_form"] == theirs["p_unstable_closed_form"]
    assert 0.3 < ours["prob_unstable_exact"] < 0.7  # a* = 0.1286 (DESIGN.md) is the median
    frac = stability_probabilities(a, 0.5, 2.5)
    assert np.isnan(frac["prob_unstable_exact"])
    assert frac["prob_unstable_closed_form"] == pytest.approx(np.mean(a * 2.5 >= 0.5))


def _replicated_runs(bump, *, n_settings=4, n_seeds=3, n=200, seed=0, phi=0.9, sd=0.03):
    """Runs of a single-exponential law plus a known misfit ``bump(u)`` and AR(1) noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    reward, fitted, labels = [], [], []
    for s in range(n_settings):
        tau = 15.0 + 10.0 * s
        f = single_exponential(t, 0.8, 0.2, tau)
        u = (f - 0.2) / 0.6
        for _ in range(n_seeds):
            eps = np.zeros(n)
            z = rng.standard_normal(n) * sd * np.sqrt(1 - phi**2)
            for k in range(1, n):
                eps[k] = phi * eps[k - 1] + z[k]
            reward.append(f + 0.6 * bump(u) + eps)
            fitted.append(f)
            labels.append(f"s{s}")
    k = len(labels)
    return np.array(reward), np.array(fitted), np.full(k, 0.2), np.full(k, 0.8), labels


def _rms(x):
    return float(np.sqrt(np.mean(np.square(x))))


def test_discrepancy_is_near_zero_when_the_law_is_right_even_with_autocorrelated_noise():
    y, f, r0, ps, labels = _replicated_runs(lambda u: 0.0 * u)
    prof = estimate_discrepancy(y, f, r0, ps, labels)
    assert "between-run" in prof.noise_method
    # AR(1) noise of sd 0.03 (0.05 of the rise): the seed-mean residual alone reads as a
    # misfit of ~0.05/sqrt(3); the between-seed correction removes most of it
    naive = _rms((y - f).reshape(4, 3, -1).mean(axis=1) / 0.6)
    assert naive > 0.025
    assert _rms(prof.sd) < 0.015


def test_discrepancy_recovers_a_known_misfit_of_the_law():
    bump = lambda u: 0.05 * np.sin(np.pi * np.clip(u, 0, 1))  # noqa: E731
    y, f, r0, ps, labels = _replicated_runs(bump, n_seeds=4, seed=1)
    prof = estimate_discrepancy(y, f, r0, ps, labels)
    centres = 0.5 * (prof.edges[1:] + prof.edges[:-1])
    # the profile follows |bump| (rise units) through the rise (rms of |bump| is 0.036)
    assert _rms(prof.sd - np.abs(bump(centres))) < 0.015
    assert prof.sd[4:6].min() > 0.035  # the misfit peaks mid-rise, and is seen there
    assert prof.n_settings == 4 and prof.n_runs == 16


def test_discrepancy_without_replicates_uses_the_fit_noise_and_says_so():
    y, f, r0, ps, labels = _replicated_runs(lambda u: 0.0 * u, n_seeds=1, phi=0.0)
    prof = estimate_discrepancy(y, f, r0, ps, labels, noise_sd=np.full(len(labels), 0.03))
    assert "i.i.d." in prof.noise_method
    assert _rms(prof.sd) < 0.025  # against 0.05 (noise sd in rise units) uncorrected
    with pytest.raises(ValueError, match="cannot separate noise"):
        estimate_discrepancy(y, f, r0, ps, labels)


def test_discrepancy_term_widens_the_mean_band_by_its_sd_times_the_rise():
    draws = _draws(np.full(4000, 0.004))
    prof = DiscrepancyProfile(
        edges=np.linspace(0, 1, 11),
        sd=np.full(10, 0.02),
        n_points=np.ones(10, int),
        n_settings=1,
        n_runs=2,
        noise_method="test",
    )
    ds = predict_from_draws(draws, steps=300, momentum=0.5, k_ref=2.0, discrepancy=prof, seed=0)
    lo, hi = band(ds, kind="mean", hdi_prob=0.9)
    # all draws share one trajectory: the band is the discrepancy alone, +-1.645 * 0.02 * 0.6
    np.testing.assert_allclose((hi - lo)[1:], 2 * 1.645 * 0.02 * 0.6, rtol=0.08)
    assert ds.attrs["discrepancy_sd_max"] == pytest.approx(0.02)
    # milestones and the posterior mean come from the law alone
    plain = predict_from_draws(draws, steps=300, momentum=0.5, k_ref=2.0, seed=0)
    np.testing.assert_allclose(ds["mean_mean"], plain["mean_mean"])
    np.testing.assert_allclose(ds["time_to_fraction_median"], plain["time_to_fraction_median"])
    u = add_discrepancy(np.zeros((2, 3)), np.zeros(2), np.ones(2), prof, np.random.default_rng(0))
    assert u.shape == (2, 3)


def test_setting_labels_group_runs_with_equal_hyperparameters():
    coords = {"model": ["m", "m", "m"], "k_ref": [1.0, 1.0, 2.0], "learning_rate": [0.1, 0.1, 0.1]}
    labels = setting_labels(coords, 3)
    assert labels[0] == labels[1] != labels[2]


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
    assert isinstance(out["warnings"], list)  # a JSON list, not the attrs' JSON text
    assert out["prefix_instability"] == {"detected": False, "onset_step": None, "signals": []}
    # the unit of final_mean_reward and its band, under predict's key (forecast had none)
    assert out["units"] == "reward"
    assert (tmp_path / "fc.png").exists() and load_prediction(tmp_path / "fc.nc").attrs[
        "upto_step"
    ] == 40.0
    assert main(["forecast", str(path), "--run", "nope", "--upto", "40"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_a_forecast_file_carries_the_runs_logged_rewards_and_its_plot_draws_them(tmp_path):
    # the report's forecast figure drew the bands only: the file had no logged data to draw
    import matplotlib.pyplot as plt

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.predict.result import prediction_result

    runs = _small_runset()
    fc = forecast_in_runset(runs, "r1", 40, likelihood="iid")
    saved = load_prediction(save_prediction(fc, tmp_path / "fc.nc"))
    logged = runs["reward"].sel(run="r1")
    assert np.array_equal(saved["logged_step"].values, runs["step"].values)
    assert np.allclose(saved["logged_reward"].values, logged.values)
    fig = plot_prediction(saved)
    (dots,) = [line for line in fig.axes[0].lines if line.get_label() == "logged reward"]
    assert np.allclose(dots.get_ydata(), logged.values)
    res = prediction_result(saved, title="r1")
    (figure,) = res.figures.values()
    assert any(line.get_label() == "logged reward" for line in figure.axes[0].lines)
    plt.close("all")


def test_cli_forecast_prints_each_warning_as_its_own_line_not_json_text(tmp_path, capsys):
    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    path = save_runset(_small_runset(), tmp_path / "runs.nc")
    # 9 rewards up to step 8: fewer than 10 for six unknowns, a warning of the forecast
    assert main(["forecast", str(path), "--run", "r1", "--upto", "8", "--likelihood", "iid"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert any("logged rewards up to step 8" in line for line in err)
    # it was printed as the attrs' JSON text: 'warning: ["only 9 logged rewards ..."]'
    assert all(line.startswith("bayes-grpo forecast: warning: ") for line in err), err
    assert not any('["' in line for line in err), err


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
    # runs of no known source are training logs: step s logs the policy before its update
    assert out["observation_lag"] == 1.0 and "training logs" in out["observation_lag_reason"]
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


def test_the_logged_reward_trails_the_policy_as_the_runs_source_logs_it():
    # predict read every fitted run's reward K_ref steps behind its policy, the bandit's
    # convention: an SDE simulation (the current policy's reward) or a TRL log (step s: the
    # rollouts of the policy before update s; K_ref 8 logs only the generating steps) was
    # predicted K_ref - 1 steps late
    import pandas as pd

    from bayes_grpo.predict.predict import default_observation_lag, observation_lag_of
    from bayes_grpo.runset import make_runset

    assert observation_lag_of("bandit", 6.0) == 6.0
    assert observation_lag_of("simulate:sde", 6.0) == 0.0
    assert observation_lag_of("trainer_state:/runs/a/trainer_state.json", 6.0) == 1.0
    steps = np.arange(5)
    curve = pd.DataFrame({"reward": np.linspace(0.2, 0.5, 5)}, index=steps)
    meta = {
        "b0": {"model": "bandit-llm", "source": "bandit"},
        "b1": {"model": "bandit-llm", "source": "bandit"},
        "t0": {"model": "qwen", "source": "trainer_state:/runs/t0/trainer_state.json"},
        "t1": {"model": "qwen", "source": "tensorboard:/runs/t1"},
        "s0": {"model": "qwen", "source": "simulate:sde"},
    }
    runs = make_runset({r: curve for r in meta}, meta)
    lag, why = default_observation_lag(runs, model="bandit-llm", k_ref=6.0)
    assert lag == 6.0 and "bandit" in why
    lag, why = default_observation_lag(runs, model="qwen", k_ref=6.0)
    assert lag == 1.0 and "training logs" in why and "mix" in why
    lag, why = default_observation_lag(runs.sel(run=["s0"]), model=None, k_ref=6.0)
    assert lag == 0.0 and "simulated" in why
    lag, why = default_observation_lag(None, model=None, k_ref=6.0)
    assert lag == 6.0 and "unknown" in why


def test_prediction_result_names_the_setting_the_law_and_the_band_terms():
    from bayes_grpo.predict.result import prediction_result

    draws = _draws(np.full(200, 0.004))
    ds = predict_from_draws(
        draws,
        steps=200,
        momentum=0.5,
        k_ref=2.0,
        attrs={
            "settings": '{"learning_rate": 0.1, "k_ref": 2.0, "group_size": 8.0, "model": "toy"}'
        },
    )
    res = prediction_result(ds)
    # the loop over the count coordinates reused `name`: the result was called
    # "completions_per_step", and a report entry without a title read "completions per step"
    assert res.name == "prediction" and res.values["title"] == "prediction"
    assert "learning_rate=0.1" in res.summary and "k_ref=2," in res.summary
    assert "group_size=8:" in res.summary  # G and K_ref read as integers, not 8.0, 2.0
    assert "recursion law" in res.summary and "parameter uncertainty only" in res.summary
    assert res.passed is None



def test_a_law_discrepancy_estimated_at_zero_is_not_said_as_up_to_0_of_the_rise():
    # the discrepancy profile is floored at 0: where the law's misfit on the training runs is
    # within their noise its largest sd is 0, and the summary read "band includes the law's
    # misfit on the training runs (up to 0 of the rise, 1 sd)"
    from bayes_grpo.predict.result import prediction_result

    ds = predict_from_draws(_draws(np.full(200, 0.004)), steps=200, momentum=0.5, k_ref=2.0)
    ds.attrs["discrepancy_sd_max"] = 0.0
    summary = prediction_result(ds).summary
    assert "up to 0 of the rise" not in summary, summary
    assert "within their noise" in summary and "parameter uncertainty only" in summary, summary
    ds.attrs["discrepancy_sd_max"] = 0.0123
    assert "(up to 0.0123 of the rise, 1 sd)" in prediction_result(ds).summary


def test_prediction_result_of_a_forecast_names_the_run_and_the_cut():
    # a forecast has no hyperparameter settings: its report entry began ": regime ..."
    import matplotlib.pyplot as plt

    from bayes_grpo.predict.forecast import forecast_run
    from bayes_grpo.predict.result import prediction_result

    t = np.arange(0.0, 60.0)
    y = 0.8 - 0.7 * np.exp(-t / 20.0) + 0.01 * np.sin(t)
    ds = forecast_run(
        t, y, np.arange(0.0, 120.0), n_draws=200, likelihood="iid", attrs={"run": "my-run"}
    )
    summary = prediction_result(ds).summary
    assert summary.startswith("forecast of run my-run from its steps up to 59: regime "), summary
    del ds.attrs["run"]
    assert prediction_result(ds).summary.startswith("forecast of a run from its steps up to 59: ")
    plt.close("all")


def test_the_report_entry_of_a_forecast_carries_its_warnings_and_backtest_as_the_cli_does():
    # `report fit.nc --prediction fc.nc` of `forecast --upto 130` on a 100-step run showed the
    # regime and stop step without "--upto 130 is past the last logged step 100" (printed by
    # the CLI), and never the backtest RMSE / coverage `forecast --json` gives
    import matplotlib.pyplot as plt
    import pandas as pd

    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.predict.result import prediction_result
    from bayes_grpo.predict.summary import attr_warnings
    from bayes_grpo.runset import make_runset

    steps = np.arange(40.0)
    reward = 0.8 - 0.6 * np.exp(-steps / 10.0) + 0.01 * np.random.default_rng(0).normal(size=40)
    runset = make_runset({"r": pd.DataFrame({"reward": reward}, index=steps.astype(int))}, {})
    late = forecast_in_runset(runset, "r", 60, likelihood="iid", n_draws=100, seed=0)
    (note,) = attr_warnings(late)
    assert "past the last logged step 39" in note
    assert note in prediction_result(late).summary
    cut = forecast_in_runset(runset, "r", 20, likelihood="iid", n_draws=100, seed=0)
    summary = prediction_result(cut).summary
    assert (
        f"Backtest on the {cut.attrs['backtest_steps']} later logged steps: "
        f"RMSE {cut.attrs['backtest_rmse']:.3g}, 0.9 band coverage {cut.attrs['backtest_coverage_0.9']:.3g}."
    ) in summary, summary
    assert cut.attrs["backtest_steps"] == 19
    plt.close("all")


def test_cli_predict_refuses_impossible_settings_and_names_a_new_llm_and_its_units(
    tmp_path, capsys
):
    # a learning rate <= 0 or G = 0 gave a prediction (or a divide-by-zero warning and a
    # message about diverging runs); an LLM name not in the fit was taken as a new LLM and its
    # normalised-progress numbers were printed as if they were rewards
    import json

    from bayes_grpo.cli import main
    from bayes_grpo.model import GRPODynamicsModel

    model = GRPODynamicsModel()
    model.fit(
        _small_runset(n_runs=2, n_steps=40), draws=30, tune=30, chains=1, progressbar=False, cores=1
    )
    path = str(model.save(tmp_path / "toy.nc"))
    setting = ["--momentum", "0.5", "--k-ref", "4", "--steps", "30"]
    # since 2026-12-05 argparse refuses them by their option, before the posterior is read
    for bad, what in (
        (["--lr", "-0.01", "--group-size", "8"], "--lr"),
        (["--lr", "0.01", "--group-size", "0"], "--group-size"),
    ):
        with pytest.raises(SystemExit) as done:
            main(["predict", path, *bad, *setting])
        assert done.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {what}" in err and "must be above 0" in err and "Traceback" not in err
        stability = ["stability", "--posterior", path, *bad[:2], "--momentum", "0.5"]
        stability += ["--convention", "heavy_ball", "--k-ref", "4"]
        if what == "--lr":
            with pytest.raises(SystemExit) as done:
                main(stability)
            assert done.value.code == 2 and "argument --lr: must be above 0" in capsys.readouterr().err
        else:
            assert main(stability) == 0
        capsys.readouterr()
    # G = 1 (no group to be relative to) and G = 2.5 gave bands from the noise law D / G^alpha
    for g in ("1", "2.5"):
        assert main(["predict", path, "--lr", "0.01", "--group-size", g, *setting]) == 2
        err = capsys.readouterr().err
        assert "group_size must be a whole number of completions per prompt >= 2" in err and g in err
    assert main(["predict", path, "--lr", "0.01", "--group-size", "8", *setting, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["units"] == "reward"
    assert (
        main(
            [
                "predict",
                path,
                "--lr",
                "0.01",
                "--group-size",
                "8",
                *setting,
                "--model",
                "tyo",
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["units"].startswith("normalised progress")
    assert "model 'tyo' is not in the fit (its LLMs: ['toy'])" in out["warnings"][0]
    assert "'tyo' is not in the fit" in captured.err
    # --model-size was dropped without a word when the fit has no size regression (a size, not
    # -1 as here before: a non-positive size is refused now, used or not)
    assert main(["predict", path, "--lr", "0.01", "--group-size", "8", *setting, "--model-size", "5e8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "model_size = 5e+08 is not used: the prediction is for 'toy', an LLM of the fit" in out["warnings"]
    args = ["--lr", "0.01", "--group-size", "8", *setting, "--model", "tyo", "--model-size", "1e9", "--json"]
    assert main(["predict", path, *args]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "model_size = 1e+09 is not used: this fit has no regression of the curvature on model size" in out["warnings"]


def test_a_phenomenological_fit_gives_no_stability_for_a_setting_it_cannot_see():
    # its K_eff = w0^2 was read as the gain a = eta K: stability --posterior gave the same
    # answer for lr 0.01 and lr 5, and predict printed P(unstable) = 1 beside "underdamped"
    from bayes_grpo.checks.stability import phase_diagram, stability_from_posterior

    phen = _draws(np.full(40, 0.005), momentum=0.0, k_ref=1.0)
    phen.attrs["parameterisation"] = "phenomenological"

    class Fitted:
        runset = None

        def coefficient_draws(self, **kwargs):
            return phen

    setting = dict(momentum=0.9, momentum_convention="heavy_ball", k_ref=30)
    with pytest.raises(ValueError, match="needs a mechanistic fit; this one is phenomenological"):
        stability_from_posterior(Fitted(), learning_rate=5.0, **setting)
    with pytest.raises(ValueError, match="needs a mechanistic fit"):
        phase_diagram(Fitted(), momentum=0.9, momentum_convention="heavy_ball")
    ds = predict_run(
        Fitted(),
        learning_rate=5.0,
        momentum=0.9,
        k_ref=30,
        group_size=8,
        steps=40,
        discrepancy=False,
    )
    assert np.isnan(ds.attrs["prob_unstable_closed_form"])
    assert np.isnan(ds.attrs["prob_unstable_exact"])
    assert "phenomenological fit" in attr_warnings(ds)[0]
    # a mechanistic draw set still gets its probabilities
    mech = predict_from_draws(_draws(np.full(40, 0.005)), steps=40, momentum=0.5, k_ref=2.0)
    assert mech.attrs["prob_unstable_closed_form"] == 0.0


def test_a_fractional_k_ref_says_why_the_exact_instability_probability_is_nan():
    # `predict --k-ref 2.5` printed "prob_unstable_exact: nan" with no warning saying why
    mech = _draws(np.full(40, 0.005), momentum=0.5, k_ref=2.5)

    class Fitted:
        runset = None

        def coefficient_draws(self, **kwargs):
            return mech

    setting = dict(learning_rate=0.01, momentum=0.5, group_size=8, steps=40, discrepancy=False)
    ds = predict_run(Fitted(), k_ref=2.5, **setting)
    assert np.isnan(ds.attrs["prob_unstable_exact"]) and ds.attrs["prob_unstable_closed_form"] == 0.0
    assert any("K_ref = 2.5 is not a whole number" in w and "NaN" in w for w in attr_warnings(ds))
    # the sentence ended "...; P(unstable, closed form) is", as if cut off
    note = next(w for w in attr_warnings(ds) if "K_ref = 2.5 is not a whole number" in w)
    assert note.endswith("P(unstable, closed form) is given"), note
    whole = predict_run(Fitted(), k_ref=2.0, **setting)
    assert not any("whole number" in w for w in attr_warnings(whole))


def test_a_long_horizon_thins_the_draws_instead_of_running_out_of_memory(monkeypatch):
    # 4000 draws x 1e5 steps took ~27 GB (68 bytes per draw and step at the peak): a 24 GB
    # machine was killed. Now the draws are thinned evenly, with a warning, and a horizon that
    # would need fewer than MIN_PREDICTION_DRAWS draws is a clear error.
    import bayes_grpo.predict.predict as pp
    from bayes_grpo.predict.summary import attr_warnings

    monkeypatch.setattr(pp, "MAX_TRAJECTORY_CELLS", 50_000)  # the same rule, at test size
    monkeypatch.setattr(pp, "MIN_PREDICTION_DRAWS", 50)
    draws = _draws(np.random.default_rng(0).uniform(0.003, 0.005, 1000))
    short = predict_from_draws(draws, steps=40, momentum=0.5, k_ref=2.0)
    assert not attr_warnings(short)
    long = predict_from_draws(draws, steps=100, momentum=0.5, k_ref=2.0, attrs={"warnings": '["given"]'})
    # as many as the budget holds (50000 // 101 = 495, i.e. 247 in each of the 2 chains: 494),
    # where a stride of 3 kept 334
    assert long.attrs["n_draws"] == 494
    notes = attr_warnings(long)
    assert notes[0] == "given" and "494 of the 1000 posterior draws, evenly spaced" in notes[1], notes
    # 300 draws where 200 fit: a stride of 2 kept 150, under the minimum; now 200
    monkeypatch.setattr(pp, "MIN_PREDICTION_DRAWS", 200)
    few = _draws(np.random.default_rng(1).uniform(0.003, 0.005, 300))
    thinned = predict_from_draws(few, steps=249, momentum=0.5, k_ref=2.0)
    assert thinned.attrs["n_draws"] == 200
    with pytest.raises(ValueError, match="too long to predict step by step"):
        predict_from_draws(draws, steps=1000, momentum=0.5, k_ref=2.0)


def test_a_horizon_too_long_for_any_draws_is_refused_before_its_grid_is_made(tmp_path, capsys):
    # `bayes-grpo predict fit.nc ... --steps 100000000000` ended in numpy's "Unable to allocate
    # 745. GiB" traceback: horizon_steps made the grid 0..T before thin_for_horizon's refusal
    from bayes_grpo.cli import main

    with pytest.raises(ValueError, match="too long to predict step by step"):
        horizon_steps(10**11)
    assert horizon_steps(40).size == 41
    argv = ["predict", str(tmp_path / "fit.nc"), "--lr", "0.1", "--momentum", "0", "--k-ref", "1"]
    assert main([*argv, "--group-size", "8", "--steps", str(10**11)]) == 2
    err = capsys.readouterr().err
    assert "too long to predict step by step" in err and "at most 249999 steps" in err


def test_a_prediction_that_climbs_past_every_logged_reward_says_the_plateau_is_not_pinned():
    # the demo's fit of the tiny TRL runs (0-1 success rate, p* ~ 3.4) predicted a mean reward
    # of 2.06 at step 300 and no warning said that no run had ever logged more than 1
    import pandas as pd

    from bayes_grpo.predict.predict import beyond_logged_rewards_warning
    from bayes_grpo.runset import make_runset

    steps = np.arange(50)
    curves = {
        "a": pd.DataFrame({"reward": np.linspace(0.0, 0.9, 50)}, index=steps),
        "b": pd.DataFrame({"reward": np.linspace(0.1, 1.0, 50)}, index=steps),
        "other": pd.DataFrame({"reward": np.linspace(0.0, 9.0, 50)}, index=steps),
    }
    meta = {"a": {"model": "m"}, "b": {"model": "m"}, "other": {"model": "big"}}
    rs = make_runset(curves, meta)
    plateau = np.full((2, 50), 3.4)
    msg = beyond_logged_rewards_warning(rs, model="m", mean_trajectory=np.linspace(0, 2.06, 30), plateau=plateau)
    assert msg is not None and "reaches 2.06" in msg and "[0, 1]" in msg and "p* = 3.4" in msg
    # within the logged range (and its noise margin of a tenth of it): nothing to say
    assert beyond_logged_rewards_warning(rs, model="m", mean_trajectory=np.linspace(0, 1.05, 30), plateau=plateau) is None
    # below the range too; and a new LLM (reward-valued draws NaN) is not judged
    assert "reaches -0.5" in beyond_logged_rewards_warning(rs, model="m", mean_trajectory=np.linspace(-0.5, 0.5, 9), plateau=plateau)
    assert beyond_logged_rewards_warning(rs, model=None, mean_trajectory=np.linspace(0, 2, 9), plateau=np.full(4, np.nan)) is None
    # the other LLM's rewards do not widen this one's range
    assert beyond_logged_rewards_warning(rs, model="big", mean_trajectory=np.linspace(0, 8, 9), plateau=plateau) is None


@pytest.mark.parametrize("flag", ["--lr", "--momentum", "--k-ref", "--group-size"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_setting_that_is_not_a_finite_number_is_refused_by_name(flag, value, capsys):
    # --group-size nan was blamed on "the posterior puts its mass on diverging runs", and
    # --lr nan on "no finite gain draws", after the posterior had been read
    from bayes_grpo.cli import main

    argv = {"--lr": "0.1", "--momentum": "0", "--k-ref": "1", "--group-size": "4"}
    argv[flag] = value
    args = ["predict", "missing.nc", "--steps", "10"] + [f"{k}={v}" for k, v in argv.items()]
    with pytest.raises(SystemExit):
        main(args)
    err = capsys.readouterr().err
    assert flag in err and f"must be a finite number, got '{value}'" in err


@pytest.mark.parametrize(
    ("flag", "value", "need"),
    [("--lr", "0", "above 0"), ("--lr", "-1", "above 0"), ("--group-size", "0", "above 0"),
     ("--group-size", "-3", "above 0"), ("--k-ref", "-1", "0 or more"),
     # was "observation_lag must be a whole number of steps >= 0, got -2.0"
     ("--observation-lag", "-2", "0 or more")],
)
def test_a_setting_out_of_its_range_is_refused_by_its_flag_before_the_posterior_is_read(flag, value, need, capsys):
    # `predict models/tiny.nc --lr -1 ...` read the posterior, printed its warnings, and then said
    # "learning_rate must be a positive number" (`--group-size 0`: "group_size must be ...",
    # `--k-ref -1`: "k_ref must be a finite lag >= 0"), naming a Python parameter, not the option
    from bayes_grpo.cli import main

    argv = {"--lr": "0.1", "--momentum": "0", "--k-ref": "1", "--group-size": "4"}
    argv[flag] = value
    with pytest.raises(SystemExit) as done:
        main(["predict", "missing.nc", "--steps", "10", *[f"{k}={v}" for k, v in argv.items()]])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and f"must be {need}, got '{value}'" in err, err


@pytest.mark.parametrize("value", ["1", "1.5", "-0.2"])
def test_a_momentum_out_of_range_is_refused_by_its_flag(value, capsys):
    # `predict fit.nc --momentum 1` said "stability thresholds assume 0 <= momentum < 1" after
    # reading the posterior, naming no flag
    from bayes_grpo.cli import main

    args = ["predict", "missing.nc", "--lr", "0.1", "--k-ref", "1", "--group-size", "4", "--steps", "10"]
    with pytest.raises(SystemExit):
        main([*args, f"--momentum={value}"])
    err = capsys.readouterr().err
    assert "argument --momentum: must lie in [0, 1)" in err and value in err


@pytest.mark.parametrize("verb", ["predict", "forecast"])
@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_a_stop_threshold_that_is_no_gain_is_refused_by_its_flag(verb, value, capsys):
    # the README names "a negative --stop-threshold" among the settings refused naming the
    # option; `predict models/tiny.nc ... --stop-threshold -1` read the posterior first and then
    # said "stop threshold must be a positive, finite reward gain", naming no option
    from bayes_grpo.cli import main

    setting = ["--lr", "0.1", "--momentum", "0", "--k-ref", "1", "--group-size", "4", "--steps", "10"]
    args = ["predict", "missing.nc", *setting] if verb == "predict" else ["forecast", "missing.nc", "--run", "r", "--upto", "5"]
    with pytest.raises(SystemExit) as done:
        main([*args, f"--stop-threshold={value}"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "argument --stop-threshold: must" in err and value in err


def test_the_remaining_gain_has_no_drop_at_the_last_step_and_puts_no_stop_step_there():
    # `forecast tiny.nc --run g16_p8_lr0.001_k1_adamw_s1 --upto 100.5`: expected remaining gain
    # 0.038 at step 299 (4.5x the threshold), -0.040 at step 300, so stop_step 300: draws above
    # their plateau at the horizon counted p* - p(T) < 0 there, and ~0 one step before
    steps = np.arange(0.0, 101.0)
    rising = single_exponential(steps, 1.0, 0.0, 400.0)  # far from its plateau at step 100
    above = 1.3 - 0.0005 * steps  # above its plateau 1.0, coming down slowly
    gain = expected_remaining_gain(np.stack([rising, above]), np.array([1.0, 1.0]))
    assert gain[-1] == pytest.approx((1.0 - rising[-1]) / 2.0)
    assert abs(gain[-1] - gain[-2]) < 0.01  # no jump at the horizon
    assert np.isnan(stop_step(steps, gain, 0.05))  # still 0.39 to gain: no stop within the horizon


def test_a_stop_step_that_answers_nothing_asked_says_why():
    # `--stop-threshold 5` on a 0-1 reward gave stop_step 0 without a word (the threshold exceeds
    # the whole rise); a forecast of a run already on its plateau gave a stop step before the
    # forecast's own last logged step, read as advice for the future
    ds = predict_from_draws(_draws(np.full(40, 0.05)), steps=200, momentum=0.5, k_ref=2.0, stop_threshold=5.0)
    assert ds.attrs["stop_step"] == 0.0
    assert any("at least the whole expected remaining gain from step 0" in w for w in attr_warnings(ds))
    assert not any("stop threshold" in w for w in attr_warnings(
        predict_from_draws(_draws(np.full(40, 0.05)), steps=200, momentum=0.5, k_ref=2.0)))
    from bayes_grpo.predict.forecast import forecast_run

    rng = np.random.default_rng(3)
    t = np.arange(0.0, 301.0)
    y = single_exponential(t, 0.8, 0.2, 20.0) + 0.01 * rng.standard_normal(t.size)
    fc = forecast_run(t, y, np.arange(0.0, 401.0), likelihood="iid", n_draws=300, rng=0)
    assert fc.attrs["stop_step"] <= 300
    notes = [w for w in attr_warnings(fc) if "at or before the last logged step 300" in w]
    assert len(notes) == 1 and f"stop step {fc.attrs['stop_step']:g}" in notes[0]


def test_a_new_llm_from_a_fit_of_one_llm_carries_the_prior_spread_of_the_curvature_between_llms():
    # `predict models/bandit.nc --model newllm` gave the fitted LLM's own curvature, as if every
    # LLM had it: a 90% band of the progress at step 150 of [0.975, 1.025] and log a spread 0.02
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=60, discrepancy=False)
    own = predict_run(path, **setting)
    new = predict_run(path, model="newllm", **setting)
    sd_own = float(np.std(np.log(own["param_a"].values)))
    sd_new = float(np.std(np.log(new["param_a"].values)))
    assert sd_own < 0.1
    # HalfNormal(1) spread times N(0, 1): sd 1 on log K (0.8 to 1.2 over 2000 draws)
    assert 0.8 < sd_new < 1.2
    assert abs(float(np.median(np.log(new["param_a"].values))) - float(np.median(np.log(own["param_a"].values)))) < 0.15
    assert new.attrs["units"].startswith("normalised progress")
    notes = attr_warnings(new)
    assert any("the fit has one LLM" in n and "half-normal, scale 1" in n for n in notes)
    assert not any("the fit has one LLM" in n for n in attr_warnings(own))
    # seeded: the same call gives the same draws
    again = predict_run(path, model="newllm", **setting)
    np.testing.assert_array_equal(again["param_a"].values, new["param_a"].values)


def test_a_new_llms_prediction_says_its_logged_reward_band_has_no_noise_and_plots_its_units():
    # a new LLM's noise scale is unknown like its reward scale: its "logged reward" band was the
    # mean's at every G without a word, G = 64 was said to carry the fitted runs' noise, and the
    # plot's axis read "reward" for a normalised progress
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, steps=40, discrepancy=False, model="newllm")
    small, large = (predict_run(path, group_size=g, **setting) for g in (2, 64))
    np.testing.assert_array_equal(small["obs_hdi"].values, large["obs_hdi"].values)
    np.testing.assert_array_equal(small["obs_hdi"].values, small["mean_hdi"].values)
    notes = attr_warnings(large)
    assert "the band of the logged reward has no noise in it" in notes[0]
    assert not any("group size G = 64" in n for n in notes)
    assert plot_prediction(large).axes[0].get_ylabel() == "normalised progress (R - R0)/(p* - R0)"
    own = predict_run(path, group_size=8, **{**setting, "model": None})
    assert plot_prediction(own).axes[0].get_ylabel() == "reward"


def test_a_stop_threshold_for_a_new_llm_is_said_to_be_read_as_a_share_of_the_rise():
    # --stop-threshold is in reward units; a new LLM's prediction has none, and 0.05 was read as
    # 5% of the rise without a word
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=40, discrepancy=False)
    new = predict_run(path, model="newllm", stop_threshold=0.05, **setting)
    assert new.attrs["stop_threshold"] == 0.05
    assert any("stop threshold 0.05 is read in this prediction's units, normalised progress" in n for n in attr_warnings(new))
    for quiet in (predict_run(path, model="newllm", **setting), predict_run(path, stop_threshold=0.05, **setting)):
        assert not any("is read in this prediction's units" in n for n in attr_warnings(quiet))


def test_an_empty_model_name_is_refused_not_predicted_as_a_new_llm(capsys):
    # `predict ... --model "$LLM"` with LLM unset predicted a new LLM named '' in normalised progress
    from pathlib import Path

    from bayes_grpo.cli import main

    path = str(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    args = ["predict", path, "--lr", "0.1", "--momentum", "0.5", "--k-ref", "2", "--group-size", "8", "--steps", "20"]
    for empty in ("", "  "):
        assert main([*args, "--model", empty]) == 2
        err = capsys.readouterr().err
        assert "model is an empty name" in err and "Traceback" not in err


def test_the_seed_reaches_every_random_draw_of_a_prediction():
    # --seed moved only the noise: the new run's R0 offsets and a new LLM's curvature were drawn
    # with seed 0 whatever it was, so the band of the mean was the same at every seed
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=20, discrepancy=False)
    for model, var in ((None, "param_initial_reward"), ("newllm", "param_a")):
        first, other, again = (predict_run(path, model=model, seed=s, **setting) for s in (0, 1, 0))
        assert not np.array_equal(first[var].values, other[var].values)
        assert not np.array_equal(first["mean_hdi"].values, other["mean_hdi"].values)
        np.testing.assert_array_equal(first["mean_hdi"].values, again["mean_hdi"].values)


def test_a_new_llms_name_close_to_a_fitted_one_is_asked_about():
    # `--model Softmax-Bandit` of a fit of 'softmax-bandit' gave a normalised-progress prediction
    # of a new LLM; the warning listed the LLMs but did not point at the near miss
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=20, discrepancy=False)
    for typo in ("Softmax-Bandit", "softmax bandit", "SOFTMAX-BANDIT"):
        note = attr_warnings(predict_run(path, model=typo, **setting))[0]
        assert f"model {typo!r} is not in the fit (its LLMs: ['softmax-bandit']); did you mean 'softmax-bandit'?" in note
    assert "did you mean" not in attr_warnings(predict_run(path, model="qwen", **setting))[0]


def test_a_prediction_for_an_llm_fitted_on_adam_and_sgd_runs_repeats_the_fits_note():
    # the fit's one curvature K of an LLM with Adam and SGD runs is a compromise that predict
    # carried to a new setting without a word
    from pathlib import Path

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.prepare import prepare_data

    fitted = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=30, discrepancy=False)
    assert not any("two optimizers" in n for n in attr_warnings(predict_run(fitted, **setting)))
    runs = [str(r) for r in fitted.runset["run"].values]
    conv = np.array(["ema"] + ["heavy_ball"] * (len(runs) - 1), dtype=object)
    fitted.runset = fitted.runset.assign_coords(momentum_convention=("run", conv))
    fitted.data = prepare_data(fitted.runset, fitted.model_config, fitted.parameterisation, fitted.likelihood)
    (note,) = [n for n in attr_warnings(predict_run(fitted, **setting)) if "two optimizers" in n]
    assert f"(Adam) ['{runs[0]}']" in note and runs[1] in note and fitted.data.models[0] in note


def test_a_prediction_for_an_llm_fitted_on_adam_and_sgd_runs_says_which_optimizer_it_is_for():
    # `predict fit.nc --lr 4e-3 --momentum 0.9 --k-ref 4 ...` of an LLM fitted on AdamW runs and
    # one SGD run (TRL runs of the tiny model) took the default heavy_ball for what was an Adam
    # setting: the warning on a convention the fitted runs do not have cannot fire with both
    from pathlib import Path

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.prepare import prepare_data

    fitted = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    runs = [str(r) for r in fitted.runset["run"].values]
    conv = np.array(["ema"] + ["heavy_ball"] * (len(runs) - 1), dtype=object)
    fitted.runset = fitted.runset.assign_coords(momentum_convention=("run", conv))
    fitted.data = prepare_data(fitted.runset, fitted.model_config, fitted.parameterisation, fitted.likelihood)
    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=30, discrepancy=False)
    (note,) = [n for n in attr_warnings(predict_run(fitted, **setting)) if "two optimizers" in n]
    assert "takes momentum 0.5 in the heavy_ball convention (SGD's heavy-ball momentum" in note
    (note,) = [
        n for n in attr_warnings(predict_run(fitted, momentum_convention="ema", **setting)) if "two optimizers" in n
    ]
    assert "takes momentum 0.5 in the ema convention (Adam's beta1" in note


def test_a_prediction_from_a_fit_whose_noise_exponent_excludes_1_says_so():
    # models/tiny.nc: alpha -0.59 [-0.68, -0.50] (-1.02 [-1.1, -0.94] before its refit with reward
    # bounds), the logged-reward band at any G scaled by it, and predict said nothing; the one-G
    # bandit fit (alpha not identified) says nothing
    from pathlib import Path

    models = Path(__file__).resolve().parents[1] / "models"
    tiny = predict_run(models / "tiny.nc", learning_rate=0.001, momentum=0.9, momentum_convention="ema",
                       k_ref=1, group_size=16, steps=30, discrepancy=False)
    (note,) = [n for n in attr_warnings(tiny) if "noise exponent" in n]
    assert "-0.59 [-0.682, -0.496] (90% interval), which excludes the theory's 1" in note
    bandit = predict_run(models / "bandit.nc", learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=30, discrepancy=False)
    assert not any("noise exponent" in n for n in attr_warnings(bandit))


def test_a_prediction_whose_logged_reward_trails_the_policy_gives_the_policys_milestones_and_stop_step_too(tmp_path):
    # at K_ref 6, bandit.nc's prediction reported stop step 34 and 90% of the rise at step 25,
    # both read on the logged reward, which trails the policy by 6 steps (28 and 19 on the
    # policy), and nothing said which; a run stopped at a step keeps that step's policy
    from bayes_grpo.predict.result import prediction_result

    a_true, mu, lag = 0.03, 0.5, 6
    steps = np.arange(151.0)
    draws = _draws(a_true * np.exp(0.03 * np.random.default_rng(2).standard_normal(400)), k_ref=lag)
    ds = predict_from_draws(draws, steps=steps, momentum=mu, k_ref=lag, seed=1)
    policy = _loop_recursion(a_true, mu, lag, 0, 150, 0.8, 0.2)
    logged = _loop_recursion(a_true, mu, lag, lag, 150, 0.8, 0.2)
    first = lambda x: steps[np.argmax((x - 0.2) / 0.6 >= 0.9)]  # noqa: E731
    assert first(logged) - first(policy) == lag
    logged_90 = float(ds["time_to_fraction_median"].sel(fraction=0.9))
    policy_90 = float(ds["policy_time_to_fraction_median"].sel(fraction=0.9))
    assert abs(logged_90 - first(logged)) <= 1 and policy_90 == logged_90 - lag
    assert ds.attrs["policy_stop_step"] == ds.attrs["stop_step"] - lag
    assert "the logged reward, 6 steps behind the policy" in ds.attrs["milestones_of"]
    numbers = summary_dict(ds)
    assert numbers["policy_stop_step"] == ds.attrs["policy_stop_step"] and numbers["stop_step"] == ds.attrs["stop_step"]
    assert numbers["policy_time_to_fraction"]["90%"]["median_step"] == policy_90
    assert numbers["time_to_fraction"]["90%"]["median_step"] == logged_90  # the key keeps its meaning
    result = prediction_result(ds)
    assert f"recommended stop step: {ds.attrs['policy_stop_step']:.0f} for the policy ({ds.attrs['stop_step']:.0f} on the logged reward, 6 steps behind it)" in result.summary
    assert "90% of the rise (policy)" in result.table.index and "90% of the rise (logged reward)" in result.table.index
    path = save_prediction(ds, tmp_path / "p.nc")
    assert load_prediction(path).attrs["policy_stop_step"] == ds.attrs["policy_stop_step"]
    # no lag: the logged reward is the policy's, one set of milestones, and it says so
    same = predict_from_draws(draws, steps=steps, momentum=mu, k_ref=lag, observation_lag=0, seed=1)
    assert "policy_stop_step" not in same.attrs and "policy_stop_step" not in summary_dict(same)
    assert "which is the policy's" in same.attrs["milestones_of"]
    assert float(same["time_to_fraction_median"].sel(fraction=0.9)) == policy_90


def test_cli_predict_says_which_llm_it_predicts_and_whether_from_its_posterior(tmp_path, capsys):
    # `predict models/bandit.nc ...` printed bands and milestones without naming the LLM they
    # are of, and its .nc recorded "model": "" in its settings (the report's entry too)
    import json
    from pathlib import Path

    import matplotlib.pyplot as plt
    import xarray as xr

    from bayes_grpo.cli import main
    from bayes_grpo.predict.result import prediction_result

    path = str(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    setting = ["--lr", "0.1", "--momentum", "0.5", "--k-ref", "2", "--group-size", "8", "--steps", "20"]
    out_nc = tmp_path / "p.nc"
    assert main(["predict", path, *setting, "--json", "-o", str(out_nc)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prediction_for"] == f"LLM 'softmax-bandit' of the fit: its posterior in {path}"
    with xr.open_dataset(out_nc) as ds:
        settings = json.loads(ds.attrs["settings"])
        assert settings["model"] == "softmax-bandit" and settings["new_model"] is False
        assert prediction_result(ds.load()).summary.startswith("model=softmax-bandit, learning_rate=0.1")
    assert main(["predict", path, *setting, "--model", "other-llm"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == (
        f"prediction_for: a new LLM 'other-llm', not in the fit: the population level of {path}"
    )
    plt.close("all")


def test_an_observation_lag_the_continuous_law_cannot_use_is_named_not_dropped():
    # `predict models/bandit.nc ... --law continuous --observation-lag 3` (and `--k-ref 2.5
    # --observation-lag 3`, where auto takes the continuous law) gave the policy's bands and
    # milestones with no warning, the lag given dropped; a lag past the horizon was said to make
    # every logged reward R0, which the continuous law does not do
    from pathlib import Path

    from bayes_grpo.predict.summary import attr_warnings

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    setting = dict(learning_rate=0.1, momentum=0.5, group_size=8, steps=20, discrepancy=False)
    for law, k_ref, why in (("continuous", 2, "(asked for)"), ("auto", 2.5, "K_ref = 2.5 is not a whole")):
        ds = predict_run(path, law=law, k_ref=k_ref, observation_lag=30, **setting)
        assert ds.attrs["law"] == "continuous" and "observation_lag" not in ds.attrs
        notes = attr_warnings(ds)
        (note,) = [n for n in notes if n.startswith("observation lag 30 is not used: the continuous law")]
        assert why in note
        assert not any("initial policy" in n for n in notes)
    with pytest.raises(ValueError, match="observation_lag must be a whole number of steps >= 0, got -1"):
        predict_run(path, law="continuous", k_ref=2, observation_lag=-1, **setting)
    # under the recursion the lag is used, and past the horizon it says so
    notes = attr_warnings(predict_run(path, law="recursion", k_ref=2, observation_lag=30, **setting))
    assert not any("is not used" in n for n in notes)
    assert any("every logged reward of the horizon is that of the initial policy" in n for n in notes)


def test_cli_predict_names_the_steps_flag_of_a_horizon_below_one_step(capsys):
    # `predict models/bandit.nc ... --steps 0` said "horizon must be at least 1 step, got 0",
    # naming no flag
    from bayes_grpo.cli import main

    args = ["predict", "missing.nc", "--lr", "0.1", "--momentum", "0.5", "--k-ref", "2", "--group-size", "8"]
    for steps in ("0", "-5"):
        with pytest.raises(SystemExit):
            main([*args, "--steps", steps])
        assert f"argument --steps: must be at least 1, got '{steps}'" in capsys.readouterr().err


def test_predict_run_names_the_steps_argument_of_a_horizon_below_one_step():
    # predict_run(steps=0) said "horizon must be at least 1 step, got 0", naming no argument
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    for steps in (0, -5):
        with pytest.raises(ValueError, match=rf"^steps={steps}: horizon must be at least 1 step"):
            predict_run(path, learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=steps)


@pytest.mark.parametrize("steps", [float("nan"), float("inf"), 150.5])
def test_predict_run_refuses_a_horizon_that_is_not_a_whole_number_of_steps(steps):
    # steps=nan died in "cannot convert float NaN to integer", inf in an OverflowError, and
    # 150.5 was predicted to step 150 without a word
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    with pytest.raises(ValueError, match=rf"^steps={steps}: the horizon must be a whole number of steps \(at least 1\)"):
        predict_run(path, learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=steps)


@pytest.mark.parametrize(
    "hdi, words",
    [((), r"hdi_probs is empty"), ((0.9, 0.0), r"hdi_probs must be probabilities in \(0, 1\), got 0.0")],
)
def test_predict_run_refuses_no_band_or_a_band_probability_outside_0_1_before_the_work(hdi, words):
    # hdi_probs=() died in NumPy's "need at least one array to stack" after every draw was run
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    with pytest.raises(ValueError, match=rf"^{words}"):
        predict_run(path, learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=50, hdi_probs=hdi)


def test_predict_run_refuses_a_grid_of_steps_with_an_infinite_one():
    from bayes_grpo.predict.predict import horizon_steps

    with pytest.raises(ValueError, match=r"increasing non-negative \(finite\) optimizer steps"):
        horizon_steps([0.0, 10.0, float("inf")])
    assert horizon_steps(150.0).tolist() == list(range(151))  # a whole number given as a float


def test_a_prediction_plot_is_titled_by_the_setting_it_predicts_not_by_its_regime_alone():
    # two `predict --plot` files of two settings were both titled "overdamped (p=1.00)"
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    ds = predict_run(path, learning_rate=0.1, momentum=0.5, k_ref=6, group_size=8, steps=40, discrepancy=False)
    title = plot_prediction(ds).axes[0].get_title()
    assert "lr 0.1" in title and "momentum 0.5 (heavy_ball)" in title
    assert "K_ref 6" in title and "G 8" in title
    assert ds.attrs["regime"] in title
    # a title the caller gives is kept as given
    assert plot_prediction(ds, title="mine").axes[0].get_title() == "mine"


def test_a_forecast_plot_is_titled_by_its_run_and_the_step_it_forecasts_from():
    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.predict.forecast import forecast_in_runset
    from bayes_grpo.predict.predict import default_plot_title

    runs = simulate_sde_runset(group_sizes=(16,), n_seeds=1, n_steps=60, random_seed=3)
    run_id = str(runs["run"].values[0])
    fc = forecast_in_runset(runs, run_id, upto=30, n_draws=200, seed=0)
    assert default_plot_title(fc).startswith(f"run {run_id}, forecast from step 30")


def test_an_overshoot_past_the_logged_rewards_is_not_blamed_on_an_unpinned_plateau():
    """`predict fit.nc --lr 1e-3 --momentum 0.9 --k-ref 1 ...` (Adam runs, heavy-ball
    convention: a 10x gain) of an LLM whose runs reached their plateau 6.89 [6.88, 6.91] on a
    0-10 reward predicted a mean of 9.93, and the warning said the plateau "is not pinned by runs
    that end before approaching it": it was pinned, among the logged rewards [1.75, 8.85]; the
    excursion is the underdamped trajectory's overshoot."""
    import pandas as pd

    from bayes_grpo.predict.predict import beyond_logged_rewards_warning
    from bayes_grpo.runset import make_runset

    steps = np.arange(50)
    curves = {k: pd.DataFrame({"reward": 2.0 + 5.0 * (1 - np.exp(-steps / (8.0 + i)))}, index=steps) for i, k in enumerate("ab")}
    rs = make_runset(curves, {k: {"model": "m"} for k in curves})
    overshoot = 6.9 + 3.0 * np.exp(-steps / 20.0) * np.sin(steps / 5.0)
    msg = beyond_logged_rewards_warning(rs, model="m", mean_trajectory=overshoot, plateau=np.full(40, 6.9))
    assert msg is not None and "reaches 8.98" in msg
    assert "not pinned" not in msg and "lies among them" in msg and "overshoot" in msg, msg
    # a plateau beyond the logged rewards is still the unpinned one
    msg = beyond_logged_rewards_warning(rs, model="m", mean_trajectory=np.linspace(2, 9.5, 50), plateau=np.full(40, 12.0))
    assert msg is not None and "not pinned" in msg


def test_a_stop_step_only_the_horizons_last_step_gives_says_so():
    """`predict models/bandit.nc --lr 0.1 --momentum 0.5 --k-ref 24 --group-size 8 --steps 150`
    gave stop_step 150 without a word (--steps 100 and 200: none within the horizon): the
    stable draws rise past their plateau at the horizon, where the gain counts nothing
    beyond it (0.022 one step before, 0 at step 150)."""
    from bayes_grpo.predict.summary import summarise_draws

    steps = np.arange(0.0, 11.0)
    rising = np.stack([0.12 * steps, 0.11 * steps])  # above their plateau 1.0, still rising
    ones = np.ones(2)
    kw = dict(initial_reward=0 * ones, zeta=0.5 * ones, damping=ones, stop_threshold=0.05)
    ds = summarise_draws(steps, rising, rising, plateau=ones, **kw)
    assert ds.attrs["stop_step"] == 10.0
    notes = [w for w in attr_warnings(ds) if "the horizon's last step" in w]
    assert len(notes) == 1 and "stop step 10 " in notes[0], attr_warnings(ds)
    # a run that settles well before the horizon: no such note
    settled = single_exponential(steps[None, :], 1.0, 0.0, 1.0) * ones[:, None]
    ds = summarise_draws(steps, settled, settled, plateau=ones, **kw)
    assert ds.attrs["stop_step"] < 10 and not any("last step" in w for w in attr_warnings(ds))


def test_a_forecast_plot_title_of_a_long_run_id_fits_in_the_figure():
    """`forecast bandit_runs.nc --run 'bandit/K_ref=2/G=8/lr=0.1/mu=0.5/beta=1/seed=0' --upto 30
    --plot fc.png` cut its title at the figure's right edge ("... overdamped (p=0.78"): run,
    step and regime were one line; the regime now has its own, as in a prediction's title."""
    from bayes_grpo.predict.summary import summarise_draws

    steps = np.arange(0.0, 61.0)
    curves = np.stack([0.9 - 0.8 * np.exp(-steps / tau) for tau in (10.0, 12.0, 14.0)])
    ones = np.ones(3)
    run_id = "bandit/K_ref=2/G=8/lr=0.1/mu=0.5/beta=1/seed=0"
    ds = summarise_draws(
        steps, curves, curves, plateau=0.9 * ones, initial_reward=0.1 * ones, zeta=2 * ones,
        damping=ones, attrs={"run": run_id, "upto_step": 30.0},
    )
    fig = plot_prediction(ds)
    fig.canvas.draw()
    title = fig.axes[0].title
    assert title.get_window_extent().x1 <= fig.bbox.x1 and title.get_window_extent().x0 >= fig.bbox.x0
    assert title.get_text().startswith(f"run {run_id}, forecast from step 30")
    assert title.get_text().endswith("\noverdamped (p=1.00)")


def test_predict_json_carries_the_saved_fits_own_warnings(tmp_path, capsys):
    """`predict models/tiny.nc ... --json` printed `"warnings": []` while stderr said the i.i.d.
    fit is too confident (load_fitted_model's warning): a script reading the JSON never saw it.
    The prediction now carries the fit's warnings (attr and JSON `posterior_warnings`); stderr
    says it once, as before."""
    import json
    from pathlib import Path

    from bayes_grpo.cli import main
    from bayes_grpo.predict.predict import load_prediction

    path = str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    out_nc = tmp_path / "p.nc"
    args = ["predict", path, "--lr", "0.001", "--momentum", "0.9", "--convention", "ema", "--k-ref", "1"]
    args += ["--group-size", "16", "--steps", "30", "--no-discrepancy", "--json", "-o", str(out_nc)]
    assert main(args) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    (note,) = [w for w in out["posterior_warnings"] if "too confident" in w]
    assert note.startswith(path)
    assert captured.err.count("too confident") == 1
    saved = load_prediction(out_nc)
    assert json.loads(saved.attrs["posterior_warnings"]) == out["posterior_warnings"]


def test_the_stop_step_does_not_move_with_the_horizon_once_the_horizon_reaches_it():
    """`predict models/bandit.nc --lr 0.1 --momentum 0.5 --k-ref 16 --group-size 8` gave stop step
    198 at --steps 200 and 344 at --steps 400: the expected remaining gain counted the lightly
    damped draws' swings only up to the horizon (and a draw at a peak near the horizon's end had
    nothing left). The draws are now followed past the horizon until they settle."""
    from bayes_grpo.predict.summary import summarise_draws

    # lightly damped draws: zeta 0.05 at w0 0.1, a swing decaying as exp(-0.005 t)
    zetas = np.array([0.045, 0.05, 0.055])
    ones = np.ones(3)

    def curves(t):
        t = np.asarray(t, dtype=float)
        return reward_trajectory(t[None, :], 1.0, 2 * zetas[:, None] * 0.1, 0.01, 1.0, 0.0)

    stops = {}
    for horizon in (600, 1200, 2000):
        steps = np.arange(0.0, horizon + 1.0)
        mean = curves(steps)
        ds = summarise_draws(
            steps, mean, mean, plateau=ones, initial_reward=0 * ones, zeta=zetas, damping=0.2 * zetas,
            stop_threshold=0.01, continuation=curves,
        )  # fmt: skip
        stops[horizon] = ds.attrs["stop_step"]
        assert np.all(ds["expected_remaining_gain"].values >= 0)
    assert stops[1200] == stops[2000] and 600 < stops[1200] < 1200, stops
    assert np.isnan(stops[600]), stops  # the stop step lies past this horizon: none within it


def test_a_bandit_prediction_stop_step_is_the_same_at_a_longer_horizon():
    # the command of the symptom: 198 at --steps 200 (the swings past step 200 uncounted), 344 at 400
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    kw = dict(learning_rate=0.1, momentum=0.5, k_ref=16, group_size=8, discrepancy=False)
    short = predict_run(path, steps=200, **kw)
    long = predict_run(path, steps=400, **kw)
    longer = predict_run(path, steps=600, **kw)
    assert np.isnan(short.attrs["stop_step"]), short.attrs["stop_step"]
    assert 200 < long.attrs["stop_step"] == longer.attrs["stop_step"] < 400
    assert long.attrs["policy_stop_step"] == longer.attrs["policy_stop_step"]
    np.testing.assert_allclose(
        short["expected_remaining_gain"].values, long["expected_remaining_gain"].values[:201]
    )


def test_the_expected_remaining_gain_is_never_negative():
    # a draw above its plateau and falling back had p(later) - p(now) < 0 before the last step,
    # while the last step was 0: stopping at once is a choice, so nothing left is 0, never less
    steps = np.arange(0.0, 51.0)
    above = 1.3 - 0.004 * steps  # above its plateau 1.0, coming down
    gain = expected_remaining_gain(above[None, :], np.array([1.0]))
    np.testing.assert_array_equal(gain, 0.0)
    beyond = expected_remaining_gain(above[None, :], np.array([1.0]), np.array([1.25]))
    assert np.all(beyond >= 0) and beyond[0] == 0.0 and beyond[-1] == pytest.approx(1.25 - above[-1])


def test_the_discrepancy_sd_printed_by_predict_says_it_is_a_share_of_the_rise(capsys):
    # `predict models/bandit.nc ...` printed "discrepancy_sd_max: 0.0898" just after "units:
    # reward", so it read as 0.09 reward; it is 0.09 of the rise p* - R0 (0.033 reward there)
    import json
    from pathlib import Path

    from bayes_grpo.cli import main

    path = str(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    args = ["predict", path, "--lr", "0.1", "--momentum", "0.5", "--k-ref", "2", "--group-size", "8", "--steps", "30"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    (i,) = [i for i, line in enumerate(lines) if line.startswith("discrepancy_sd_max:")]
    assert lines[i + 1].startswith("discrepancy_sd_max_units: share of the rise p* - R0")
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "share of the rise" in out["discrepancy_sd_max_units"] and out["units"] == "reward"


def test_a_discrepancy_estimated_at_zero_is_said_to_be_within_the_noise_by_predict(capsys, monkeypatch):
    # where the law's misfit on the training runs is within their noise the profile is floored
    # at 0, and `predict` printed "discrepancy_sd_max: 0.0" (a misfit measured to be nothing, or
    # a rounding?) while the report's summary says what it means
    import json
    from pathlib import Path

    import bayes_grpo.predict.discrepancy as discrepancy
    from bayes_grpo.cli import main

    real = discrepancy.discrepancy_from_model

    def floored(*args, **kwargs):
        profile = real(*args, **kwargs)
        profile.sd = np.zeros_like(profile.sd)
        return profile

    monkeypatch.setattr(discrepancy, "discrepancy_from_model", floored)
    path = str(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    args = ["predict", path, "--lr", "0.1", "--momentum", "0.5", "--k-ref", "2", "--group-size", "8", "--steps", "30"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    (i,) = [i for i, line in enumerate(lines) if line.startswith("discrepancy_sd_max:")]
    assert lines[i + 2].startswith("discrepancy_note: estimated at 0 (floored)"), lines[i : i + 3]
    assert "within their noise" in lines[i + 2] and "parameter uncertainty only" in lines[i + 2]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["discrepancy_sd_max"] == 0.0 and "within their noise" in out["discrepancy_note"]
    monkeypatch.setattr(discrepancy, "discrepancy_from_model", real)  # a measured misfit: no note
    assert main([*args, "--json"]) == 0
    assert "discrepancy_note" not in json.loads(capsys.readouterr().out)


def test_predicts_text_output_prints_each_warning_on_its_own_line_not_a_python_list(capsys):
    # `predict models/bandit.nc --k-ref 6 ...` printed `warnings: ["extrapolation: K_ref = 6 is
    # outside the fitted runs' range [1, 4]", ...]`, a Python list whose quotes changed with each
    # note's apostrophes, and `posterior_warnings: []`
    import json
    from pathlib import Path

    from bayes_grpo.cli import main

    path = str(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    args = ["predict", path, "--lr", "0.1", "--momentum", "0.5", "--k-ref", "6", "--group-size", "8", "--steps", "30"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    i = lines.index("warnings:")
    assert lines[i + 1] == "  - extrapolation: K_ref = 6 is outside the fitted runs' range [1, 4]", lines[i : i + 3]
    assert "posterior_warnings: none" in lines
    assert not any(line.startswith(("warnings: [", "posterior_warnings: [")) for line in lines)
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["warnings"][0].startswith("extrapolation: K_ref = 6") and out["posterior_warnings"] == []


def test_draws_still_swinging_past_the_look_are_named_only_for_a_stop_step_they_can_move(monkeypatch):
    # a quarter of the draws barely damped: followed to the cell budget they still swing, and past
    # it count their plateau; that can move a stop step within the horizon later (said), not a
    # stop step beyond it (a forecast of the run at 0 said it twice, of no consequence)
    import bayes_grpo.predict.summary as summary

    monkeypatch.setattr(summary, "MAX_BEYOND_CELLS", 2_000_000)
    zetas = np.r_[np.full(50, 0.0005), np.full(150, 0.05)]
    ones = np.ones(zetas.size)

    def curves(t):
        t = np.asarray(t, dtype=float)
        return reward_trajectory(t[None, :], 1.0, 2 * zetas[:, None] * 0.1, 0.01, 1.0, 0.0)

    steps = np.arange(0.0, 1501.0)
    kw = dict(plateau=ones, initial_reward=0 * ones, zeta=zetas, damping=0.2 * zetas, continuation=curves)
    loose = summary.summarise_draws(steps, curves(steps), curves(steps), stop_threshold=0.5, **kw)
    assert np.isfinite(loose.attrs["stop_step"])
    (note,) = [w for w in attr_warnings(loose) if "still swing" in w]
    assert note.startswith(f"the stop step {loose.attrs['stop_step']:g} counts the draws' gain up to step")
    tight = summary.summarise_draws(steps, curves(steps), curves(steps), stop_threshold=0.01, **kw)
    assert np.isnan(tight.attrs["stop_step"]) and not any("still swing" in w for w in attr_warnings(tight))


def test_the_look_past_the_horizon_ends_once_the_stop_step_is_past_the_horizon_anyway():
    # `predict models/tiny.nc --steps 300` (a slow approach to a far plateau, gain 1.9 at step 300)
    # followed its draws to the cell budget, 19 s instead of 7, for a stop step that lies past the
    # horizon whatever comes later: the look ends at once there
    from bayes_grpo.predict.summary import summarise_draws

    calls = []

    def curves(t):
        calls.append(len(t))
        t = np.asarray(t, dtype=float)
        return single_exponential(t[None, :], 1.0, 0.0, np.array([[3000.0], [4000.0]]))

    steps = np.arange(0.0, 301.0)
    ones = np.ones(2)
    ds = summarise_draws(
        steps, curves(steps), curves(steps), plateau=ones, initial_reward=0 * ones, zeta=2 * ones, damping=ones,
        continuation=curves,
    )  # fmt: skip
    assert np.isnan(ds.attrs["stop_step"]) and len(calls) == 3  # the grid twice, then one look


def test_predict_and_forecast_json_carry_the_gain_past_the_horizon_and_why_there_is_no_stop_step(tmp_path, capsys):
    # `expected_remaining_gain_after` and `no_stop_step` were .nc attrs and text only: `--json`
    # could not tell a stop step past the horizon from one nothing says anything of
    import json
    from pathlib import Path

    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    argv = ["predict", str(path), "--lr", "0.1", "--momentum", "0.5", "--k-ref", "16", "--group-size", "8"]
    assert main([*argv, "--steps", "200", "--no-discrepancy", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stop_step"] is None
    assert out["expected_remaining_gain_after"] >= out["stop_threshold"] > 0
    assert out["policy_expected_remaining_gain_after"] >= 0
    assert "no_stop_step" not in out
    # a constant prefix with the weak prior: no stop step, and the JSON says why
    import pandas as pd

    from bayes_grpo.runset import make_runset

    meta = {"model": "toy", "momentum": 0.5, "k_ref": 4.0, "learning_rate": 0.01,
            "momentum_convention": "heavy_ball", "group_size": 8.0}  # fmt: skip
    runs = make_runset({"flat": pd.DataFrame({"reward": np.zeros(60)}, index=np.arange(60))}, {"flat": meta})
    saved = save_runset(runs, tmp_path / "flat.nc")
    assert main(["forecast", str(saved), "--run", "flat", "--upto", "10",
                 "--likelihood", "iid", "--no-population", "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["stop_step"] is None and "knows no rise" in out["no_stop_step"], out
    assert "expected_remaining_gain_after" not in out


def test_the_look_past_the_horizon_resumes_the_recursion_and_skips_diverging_draws(monkeypatch):
    # each look past the horizon re-simulated the recursion from step 0, for the logged reward
    # and the policy apart, diverging draws included; it now resumes from the errors simulated so
    # far, shared by both, with the same stop step and gains as simulating from step 0
    from pathlib import Path

    from bayes_grpo.dynamics import simulate
    from bayes_grpo.dynamics.simulate import continue_recursion, simulate_recursion
    from bayes_grpo.predict import predict as predict_module

    models = Path(__file__).resolve().parents[1] / "models"
    cases = [
        ("tiny.nc", dict(learning_rate=0.002, momentum=0.9, momentum_convention="ema", k_ref=2, group_size=16, steps=300)),
        ("bandit.nc", dict(learning_rate=0.1, momentum=0.5, k_ref=16, group_size=8, steps=400)),
        ("bandit.nc", dict(learning_rate=0.27, momentum=0.5, k_ref=8, group_size=8, steps=100)),  # 1122 of 2000 diverge
    ]
    for name, kw in cases:
        simulated: list[tuple[int, int]] = []  # (draws, updates) of each continuation

        def counting(err, a, *args, simulated=simulated, **kwargs):
            out, w = continue_recursion(err, a, *args, **kwargs)
            simulated.append((out.shape[0], out.shape[1] - err.shape[1]))
            return out, w

        monkeypatch.setattr(predict_module, "continue_recursion", counting)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            new = predict_run(models / name, discrepancy=False, **kw)
        monkeypatch.undo()

        def from_step_0(traj, *, law, momentum, k_ref, observation_lag=None, lr_multipliers=None, **_):
            # the old continuation: the recursion from step 0 at every look, every draw
            def at(steps):
                return predict_module.recursion_trajectories(
                    traj["a"], momentum, k_ref, steps, traj["plateau"], traj["initial_reward"],
                    observation_lag=observation_lag,
                )  # fmt: skip

            return at

        monkeypatch.setattr(predict_module, "continued_trajectories", from_step_0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            old = predict_run(models / name, discrepancy=False, **kw)
        monkeypatch.undo()
        for key in ("stop_step", "policy_stop_step", "expected_remaining_gain_after", "policy_expected_remaining_gain_after"):
            np.testing.assert_array_equal(new.attrs.get(key), old.attrs.get(key), err_msg=f"{name} {key}")
        for var in ("expected_remaining_gain", "policy_expected_remaining_gain"):
            np.testing.assert_array_equal(new[var].values, old[var].values, err_msg=f"{name} {var}")
        n_diverging = int(new.attrs["n_draws_diverging"])
        assert simulated, name
        # each update simulated once, for the stable draws only
        assert {d for d, _ in simulated} == {int(new.attrs["n_draws"]) - n_diverging}, (name, simulated)
    assert n_diverging > 0  # the last case has diverging draws to skip
    # resumed in pieces (with a schedule's momentum buffer): the numbers of one go from step 0
    rng = np.random.default_rng(0)
    a, e0 = rng.uniform(0.01, 0.2, 5), rng.uniform(-1, 0, 5)
    rates = np.linspace(1.0, 0.1, 90)
    whole = simulate_recursion(a, 0.8, 3, 90, e0=e0, lr_multipliers=rates)
    part, w = continue_recursion(e0[:, None], a, 0.8, 3, 7, lr_multipliers=rates[:7])
    part, w = continue_recursion(part, a, 0.8, 3, 90, velocity=w, lr_multipliers=rates)
    np.testing.assert_array_equal(part, whole)
    assert simulate.continue_recursion is continue_recursion


def test_the_first_look_past_a_long_horizon_stays_within_the_cell_budget():
    # a forecast a million steps out (100 draws) followed its draws over a first look as long as
    # the horizon: 1e8 (draw, step) cells, 0.8 GB and a minute, before the budget was checked
    from bayes_grpo.predict.summary import MAX_BEYOND_CELLS, best_beyond_horizon

    plateau, initial = np.full(100, 0.8), np.full(100, 0.2)
    looked = []

    def continuation(steps):
        looked.append(steps.size)
        return np.broadcast_to(plateau[:, None], (plateau.size, steps.size))

    best, gain_after, reached, moving = best_beyond_horizon(continuation, 1e6, plateau, initial)
    assert max(looked) * plateau.size <= MAX_BEYOND_CELLS, looked
    assert np.allclose(best, 0.8) and gain_after == 0.0 and moving == 0.0


def test_a_fits_load_warnings_are_the_texts_of_fitted_model_warnings_not_whatever_else_warned(monkeypatch):
    # as_fitted_model caught every UserWarning raised while load_fitted_model ran and returned
    # them as the fit's warnings (posterior_warnings of predict / forecast / stability / report),
    # while fitted_model_warnings made the same texts a second way: a library's UserWarning while
    # the file was read became a "warning of the saved fit". One place now makes and warns them
    import warnings

    import bayes_grpo.model.core as core

    fit = object()

    def load(cls, path):
        warnings.warn("h5netcdf: some library's note on reading", UserWarning, stacklevel=2)
        return fit

    monkeypatch.setattr(core.GRPODynamicsModel, "load", classmethod(load))
    monkeypatch.setattr(core, "fitted_model_warnings", lambda model, path: [f"{path}: the fit did not converge"])
    with pytest.warns(UserWarning) as seen:
        model, notes = core.as_fitted_model("fit.nc")
    assert model is fit and notes == ["fit.nc: the fit did not converge"]
    shown = [str(w.message) for w in seen]
    assert "fit.nc: the fit did not converge" in shown and any("h5netcdf" in s for s in shown)  # both still warned
    with pytest.warns(UserWarning) as seen:
        assert core.load_fitted_model("fit.nc") is fit
    assert "fit.nc: the fit did not converge" in [str(w.message) for w in seen]


def test_the_prediction_benchmarks_record_the_packages_stop_step_with_what_it_rests_on(load_script):
    # benchmarks/validate_prediction.py's summary.json kept pred.attrs["stop_step"] alone (and
    # validate_schedule_prediction.py float() of it): no threshold, nothing of the look past the
    # horizon the stop step has rested on since best_beyond_horizon, not the policy's stop step
    # beside the logged reward's, and a prediction with no stop step wrote NaN, which is not JSON.
    # Both now record summary_dict's stop-step numbers (stop_step_scores), as `predict --json` does
    import inspect
    import json

    validate = load_script("benchmarks/validate_prediction.py")
    schedule = load_script("benchmarks/validate_schedule_prediction.py")
    rising = predict_from_draws(_draws(np.full(100, 0.05)), steps=300, momentum=0.5, k_ref=2.0, law="recursion")
    scores = validate.stop_step_scores(rising)
    expected = summary_dict(rising)
    assert np.isfinite(rising.attrs["stop_step"]) and "policy_stop_step" in rising.attrs  # the logged reward trails
    for key in ("stop_step", "stop_threshold", "policy_stop_step"):
        assert scores[key] == expected[key] == rising.attrs[key], key
    early = predict_from_draws(_draws(np.full(100, 0.05)), steps=10, momentum=0.5, k_ref=2.0, law="recursion")
    assert np.isnan(early.attrs["stop_step"])  # still rising at the horizon: past it by more than the threshold
    scores = validate.stop_step_scores(early)
    assert scores["stop_step"] is None and scores["policy_stop_step"] is None
    assert scores["expected_remaining_gain_after"] == pytest.approx(early.attrs["expected_remaining_gain_after"])
    json.dumps(scores, allow_nan=False)  # valid JSON
    for script in (validate, schedule):
        assert "**stop_step_scores(pred)" in inspect.getsource(script.main)


def test_a_prediction_from_a_saved_fit_does_not_import_pymc():
    # `predict models/tiny.nc ...` imported PyMC (and PyTensor), ~2 s of its run on a small fit,
    # only for two NumPy functions of builder.py that loading the fit (size_regression_note) and
    # coefficient_draws (prior_centres) called: a prediction reads posterior draws, it builds no
    # model. They are in model/prepare.py now (benchmarks/bench_predict_load.py: before / after)
    import subprocess
    import sys
    from pathlib import Path

    tiny = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    code = (
        "import sys, warnings; warnings.simplefilter('ignore');"
        "from bayes_grpo.predict.predict import predict_run;"
        f"ds = predict_run({str(tiny)!r}, learning_rate=0.002, momentum=0.9, momentum_convention='ema',"
        " k_ref=2, group_size=16, steps=50);"
        "print(sorted(m for m in ('pymc', 'pytensor') if m in sys.modules), ds.attrs['regime'])"
    )
    # run in the checkout under test (python -c puts the working folder first on the path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tiny.parents[1])
    assert done.stdout.split("]")[0] == "[", done.stdout


def test_the_steps_of_a_prediction_summary_are_whole_numbers_where_they_are_steps():
    # `predict` printed 'stop_step: 34.0', 'final_step: 300.0' and medians '25.0'
    pred = predict_from_draws(_draws(np.full(200, 0.05), k_ref=2), steps=100, momentum=0.5, k_ref=2)
    out = summary_dict(pred)
    assert isinstance(out["stop_step"], int) and isinstance(out["final_step"], int) and out["final_step"] == 100
    medians = [v["median_step"] for v in out["time_to_fraction"].values() if v["median_step"] is not None]
    assert medians and all(isinstance(m, int) for m in medians)  # every draw alike: whole medians


def _profile(sd):
    sd = np.asarray(sd, dtype=float)
    return DiscrepancyProfile(
        edges=np.linspace(0, 1, sd.size + 1),
        sd=sd,
        n_points=np.ones(sd.size, int),
        n_settings=1,
        n_runs=2,
        noise_method="test",
    )


def test_discrepancy_sd_runs_linearly_between_the_bin_centres():
    prof = _profile([0.01, 0.03, 0.02, 0.05])  # bin centres 0.125, 0.375, 0.625, 0.875
    np.testing.assert_allclose(prof.sd_at(np.array([0.125, 0.375, 0.625, 0.875])), prof.sd)
    # halfway between two centres, halfway between their values (a step function jumped there)
    np.testing.assert_allclose(prof.sd_at(np.array([0.25, 0.5, 0.75])), [0.02, 0.025, 0.035])
    # flat beyond the outer centres; an overshoot past the plateau folds back; NaN: the largest
    np.testing.assert_allclose(prof.sd_at(np.array([-0.5, 0.05, 0.95, 1.1, np.nan])), [0.01, 0.01, 0.05, 0.05, 0.05])


def test_discrepancy_draws_are_smooth_in_step_with_the_profile_as_their_marginal_sd():
    # the term was drawn independently at every step: each draw's mean trajectory zig-zagged by
    # its sd from one step to the next, and the band edges of the mean with it (mean |second
    # difference| of the shipped bandit prediction's 90% band 5x that without the term)
    steps = np.arange(301.0)
    n = 4000
    rise = np.linspace(0.5, 1.5, n)[:, None]
    mean = 0.2 + rise * (1.0 - np.exp(-steps / 60.0))[None, :]
    prof = _profile([0.02, 0.06, 0.04, 0.01])
    out = add_discrepancy(mean, np.full(n, 0.2), 0.2 + rise[:, 0], prof, np.random.default_rng(0))
    term = out - mean
    scale = prof.sd_at((mean - 0.2) / rise) * rise  # each draw's sd at each step
    # one standard normal per draw: the term is its sd profile times a constant
    ratio = term / scale
    np.testing.assert_allclose(ratio, ratio[:, :1] * np.ones_like(ratio), rtol=1e-9, atol=1e-12)
    # smooth: a step's second difference is a small share of the term's size
    assert np.mean(np.abs(np.diff(term, n=2, axis=1))) < 0.01 * np.mean(np.abs(term))
    # the marginal at every step is N(0, scale^2): sd within Monte Carlo error of 4000 draws
    np.testing.assert_allclose(np.std(ratio, axis=0), 1.0, atol=0.035)
    assert abs(float(np.mean(ratio[:, 0]))) < 0.05


def test_mean_band_with_the_discrepancy_term_has_smooth_edges():
    draws = _draws(np.random.default_rng(3).lognormal(np.log(0.004), 0.1, 4000))
    prof = _profile(np.linspace(0.05, 0.01, 10))
    kw = dict(steps=300, momentum=0.5, k_ref=2.0, seed=0)
    lo, hi = band(predict_from_draws(draws, discrepancy=prof, **kw), kind="mean", hdi_prob=0.9)
    lo0, hi0 = band(predict_from_draws(draws, **kw), kind="mean", hdi_prob=0.9)
    width = np.mean(hi - lo)
    assert width > 1.2 * np.mean(hi0 - lo0)  # the term widens the band ...
    # ... without making its edges zig-zag: mean |second difference| of an edge 7% of the band's
    # width with the term drawn afresh at every step, 1.2% with one normal per draw (what is
    # left is the HDI's choice of draws moving between them, 0.2% without the term)
    jag = np.mean(np.abs(np.diff(hi, n=2)) + np.abs(np.diff(lo, n=2)))
    assert jag < 0.02 * width


def test_discrepancy_term_is_independent_of_draws_made_from_the_same_seed():
    # predict seeds coefficient_draws (a new LLM's log K offsets: default_rng(seed).normal) and
    # the discrepancy with one seed: one normal per draw from that rng was the draw's own offset,
    # so the term grew with the draw's curvature (correlation 0.996 here)
    seed = 3
    log_a = np.log(0.004) + 0.1 * np.random.default_rng(seed).normal(size=4000)
    draws = _draws(np.exp(log_a))
    prof = _profile(np.full(10, 0.03))
    traj = trajectories_from_draws(
        draws, np.arange(301.0), rng=np.random.default_rng(seed), law="recursion",
        momentum=0.5, k_ref=2.0, discrepancy=prof,
    )  # fmt: skip
    z = (traj["band"] - traj["mean"])[:, 50]
    assert abs(np.corrcoef(z, log_a)[0, 1]) < 0.1


def test_discrepancy_band_does_not_move_with_the_seed():
    # one normal per draw: a random sample of them set the width of every step's band at once
    # (0.9 band of the mean 4% narrower at one seed of the bandit validation); the normal's
    # quantiles, shuffled, give each seed the same band where the draws share one trajectory
    draws = _draws(np.full(4000, 0.004))
    prof = _profile(np.full(10, 0.02))
    widths = []
    for seed in (0, 1, 2):
        lo, hi = band(predict_from_draws(draws, steps=100, momentum=0.5, k_ref=2.0, discrepancy=prof, seed=seed), kind="mean", hdi_prob=0.9)
        widths.append(hi - lo)
    np.testing.assert_allclose(widths[1], widths[0], rtol=1e-9)
    np.testing.assert_allclose(widths[2], widths[0], rtol=1e-9)
    np.testing.assert_allclose(widths[0][1:], 2 * 1.645 * 0.02 * 0.6, rtol=0.005)


def test_a_few_diverging_draws_are_not_called_zero_percent():
    # 1 of 2000 draws diverging was "1 of 2000 posterior draws (0%) are unstable"
    gains = np.r_[np.full(1999, 0.05), np.full(1, 0.5)]
    ds = predict_from_draws(_draws(gains), steps=100, momentum=0.5, k_ref=2.0, seed=0)
    assert ds.attrs["n_draws_diverging"] == 1
    note = next(w for w in attr_warnings(ds) if "unstable at this setting" in w)
    assert note.startswith("1 of 2000 posterior draws (0.") and "(0%)" not in note, note


def test_a_saved_fit_whose_draws_are_refused_is_named_by_its_path():
    # `predict phen.nc --model nope` said "error: the phenomenological model has no population
    # level: model must be one of [...]" (GRPODynamicsModel.coefficient_draws) without naming
    # the saved fit; predict_run named it by a re-wrap of its own, and `forecast --prior phen.nc`
    # (prior_from_posterior, its twin) still did not. The loaded fit keeps its path and
    # coefficient_draws names it in its own refusals, for every caller.
    from pathlib import Path

    from bayes_grpo.model.core import GRPODynamicsModel
    from bayes_grpo.predict.forecast import prior_from_posterior

    path = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    setting = dict(learning_rate=1e-3, momentum=0.9, momentum_convention="nope", k_ref=1, group_size=16)
    refused = r"^\S*tiny\.nc: unknown momentum convention 'nope'"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the fit's own load warnings
        for given in (str(path), path):
            with pytest.raises(ValueError, match=refused):
                predict_run(given, steps=40, **setting)
            with pytest.raises(ValueError, match=refused):
                prior_from_posterior(given, **setting)
        fitted = GRPODynamicsModel.load(path)
    assert fitted.source_path == path
    with pytest.raises(ValueError, match=refused):
        fitted.coefficient_draws(**setting)
    fitted.source_path = None  # a fit made in this process, never saved: no file to name
    with pytest.raises(ValueError, match=r"^unknown momentum convention 'nope'"):
        fitted.coefficient_draws(**setting)
    with pytest.raises(ValueError, match=r"^unknown momentum convention 'nope'"):
        predict_run(fitted, steps=40, **setting)
    with pytest.raises(ValueError, match=r"^the mechanistic model needs \['momentum_convention'\]"):
        fitted.coefficient_draws(learning_rate=1e-3, momentum=0.9, k_ref=1)


def test_the_mean_trajectory_predicted_from_a_fit_with_reward_bounds_stays_in_them(tmp_path, capsys):
    """`predict models/tiny.nc --lr 0.008 --k-ref 8 ...` (a fit with reward bounds 0 1) gave a
    mean trajectory up to 1.077 for a success rate, above its own band, which was censored at 1:
    the underdamped draws' curves past the bound. The mean trajectory of a bounded fit is the
    law censored at the bounds, as its band and the forecast's mean are."""
    from pathlib import Path

    from bayes_grpo.cli import main
    from bayes_grpo.predict.predict import load_prediction

    path = str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    out_nc = tmp_path / "p.nc"
    args = ["predict", path, "--lr", "0.008", "--momentum", "0.9", "--convention", "ema", "--k-ref", "8"]
    args += ["--group-size", "16", "--steps", "300", "--json", "-o", str(out_nc)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the i.i.d. fit's own warning
        assert main(args) == 0
    capsys.readouterr()
    ds = load_prediction(out_nc)
    assert float(ds["mean_mean"].max()) <= 1.0
    assert float(ds["mean_hdi"].max()) <= 1.0


def test_a_horizon_over_which_every_unstable_draw_overflows_is_refused_naming_the_step():
    # `predict fit.nc --lr 0.05 --momentum 0 --k-ref 3 --steps 3000`, every draw unstable: at 1000
    # steps the diverging means came with the unstable-setting warning, at 3000 the trajectories
    # overflowed and the summary failed with NumPy's "overflow encountered in divide" and "fewer
    # than 2 finite trajectory draws", not saying that it was the horizon
    import re

    draws = _draws(np.full(200, 2.0), momentum=0.0, k_ref=3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match=r"200 of 200 posterior draws are unstable .* overflow from step (\d+) on") as err:
            predict_from_draws(draws, steps=3000, momentum=0.0, k_ref=3.0)
    step = int(re.search(r"overflow from step (\d+)", str(err.value)).group(1))
    assert 100 < step < 3000 and f"--steps below {step}" in str(err.value)
    shorter = predict_from_draws(draws, steps=step - 50, momentum=0.0, k_ref=3.0)
    assert shorter.attrs["n_draws_diverging"] == 200
    # predict_run's law-discrepancy term of such draws: their progress overflows, which NumPy said
    # ("overflow encountered in divide") before the refusal
    huge = np.array([[0.2, 1e300, 1.7e308], [0.2, 0.5, 0.8]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = add_discrepancy(huge, np.array([0.2, 0.2]), np.array([0.8, 0.8]), _profile([0.01, 0.02]), np.random.default_rng(0))
    assert np.isfinite(out[1]).all()


@pytest.mark.parametrize("bad", [-1, 2.5, np.random.default_rng(0)], ids=["negative", "fraction", "generator"])
def test_a_seed_numpy_cannot_take_is_refused_naming_the_argument_before_the_fit_is_read(bad, tmp_path):
    # predict_run(seed=-1) loaded the fit, then failed in NumPy's "expected non-negative integer"
    # naming no argument; a Generator failed in int() (the fit's draws offset the seed)
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    setting = dict(learning_rate=0.1, momentum=0.5, k_ref=2, group_size=8, steps=20, discrepancy=False)
    words = r"^seed must be a whole number >= 0 \(a random seed\), got "
    with pytest.raises(ValueError, match=words):
        predict_run(path, seed=bad, **setting)
    with pytest.raises(ValueError, match=words):
        predict_run(tmp_path / "no_such_fit.nc", seed=bad, **setting)  # before the file is read
