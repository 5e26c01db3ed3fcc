"""`bayes-grpo fit` writes a loadable posterior and prints a per-(model, G) summary."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from bayes_grpo.cli import main
from bayes_grpo.dynamics.simulate import simulate_sde_runset
from bayes_grpo.model import GRPODynamicsModel
from bayes_grpo.runset import save_runset


@pytest.fixture(scope="module")
def runs_file(tmp_path_factory):
    ds = simulate_sde_runset(
        models={"m": {"stiffness": 400.0, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 1e-12}},
        group_sizes=(4, 16),
        learning_rates=(1e-4,),
        n_seeds=1,
        n_steps=120,
        measurement_sd=0.08,
        measurement_g_exponent=1.0,
        random_seed=5,
    )
    return save_runset(ds, tmp_path_factory.mktemp("runs") / "runs.nc")


def test_fit_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = capsys.readouterr().out
    for flag in ("--parameterisation", "--likelihood", "--draws", "--tune", "--chains", "--seed", "--sampler", "--json", "--default"):
        assert flag in text


def test_fit_missing_file_is_a_clean_error(tmp_path, capsys):
    assert main(["fit", str(tmp_path / "nope.nc"), "-o", str(tmp_path / "out.nc")]) == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[1, 2]", "must hold a JSON object"),
        ('"hello"', "must hold a JSON object"),
        ('{"plateau": 3}', "'plateau' is an object"),
        ('{"plateau": {"sigma": "wide"}}', "'plateau.sigma' must be a finite number"),
        ('{"hyperparameter_defaults": 5}', "'hyperparameter_defaults' is an object"),
    ],
)
def test_fit_config_file_of_the_wrong_shape_is_a_clean_error_naming_the_file(runs_file, tmp_path, capsys, text, named):
    # these raised AttributeError / TypeError / NotImplementedError tracebacks
    cfg = tmp_path / "cfg.json"
    cfg.write_text(text)
    out = tmp_path / "fit.nc"
    assert main(["fit", str(runs_file), "-o", str(out), "--config", str(cfg), "--draws", "5", "--tune", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayes-grpo fit: error: ") and str(cfg) in err and named in err, err
    assert not out.exists()


def test_fit_config_file_that_is_not_utf8_names_the_file(runs_file, tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_bytes(b"\xff\xfe{}")
    assert main(["fit", str(runs_file), "-o", str(tmp_path / "fit.nc"), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert str(cfg) in err and "not UTF-8" in err, err


def test_a_run_set_the_model_cannot_take_is_an_error_naming_the_file(runs_file, tmp_path, capsys):
    # "needs 'learning_rate' for every run; unknown for runs [...]" named the runs and the
    # problem but not the file they came from (nor did the by-group refusal of a run set at one G)
    ds = xr.load_dataset(runs_file)
    no_lr = save_runset(ds.assign_coords(learning_rate=("run", np.full(ds.sizes["run"], np.nan))), tmp_path / "no_lr.nc")
    one_g = save_runset(ds.assign_coords(group_size=("run", np.full(ds.sizes["run"], 8.0))), tmp_path / "one_g.nc")
    for path, extra, named in (
        (no_lr, [], "needs 'learning_rate' for every run"),
        (one_g, ["--invariance", "by-group"], "needs an LLM run at two or more known group sizes"),
    ):
        out = tmp_path / f"fit_{path.stem}.nc"
        assert main(["fit", str(path), "-o", str(out), "--draws", "5", "--tune", "5", *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"bayes-grpo fit: error: {path}: ") and named in err, err
        assert not out.exists()
    assert main(["invariance", str(no_lr), "--draws", "5", "--tune", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bayes-grpo invariance: error: {no_lr}: ") and "'learning_rate'" in err, err


@pytest.mark.slow
def test_fit_cli_writes_a_loadable_posterior_and_json_summary(runs_file, tmp_path, capsys):
    out = tmp_path / "models" / "fit.nc"
    code = main(["fit", str(runs_file), "-o", str(out), "--draws", "60", "--tune", "60", "--chains", "2", "--seed", "1", "--json"])
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["output"] == str(out)
    assert {"convergence", "groups", "runs"} <= set(payload)
    assert len(payload["groups"]) == 2  # (m, G=4), (m, G=16)
    # G reads as an integer in the JSON and in the printed table ("4", not "4.0")
    sizes = [g["group_size"] for g in payload["groups"] + payload["runs"]]
    assert sorted(set(sizes)) == [4, 16] and all(type(g) is int for g in sizes)
    assert {"p_star", "M_eff", "C_eff", "K_eff", "zeta", "D", "r2_raw", "r2_smoothed"} <= set(payload["groups"][0])
    loaded = GRPODynamicsModel.load(out)
    assert loaded.parameterisation == "mechanistic"
    table = loaded.group_summary()
    assert all(type(g) is int for g in table.index.get_level_values("group_size").tolist())
    assert not re.search(r"(?<![\d.])(4|16)\.0(?!\d)", table.to_string()), table.to_string()
    # refuses to overwrite without --overwrite
    assert main(["fit", str(runs_file), "-o", str(out), "--draws", "10", "--tune", "10"]) == 2



def test_a_phenomenological_fit_names_its_gain_w0_sq_not_the_learning_rate_gain(runs_file, tmp_path, capsys, monkeypatch):
    # the table printed an "a" column (eta K, learning rate x curvature) for a fit in which no
    # learning rate enters: the phenomenological posterior stores w0^2 under that name. Prior
    # draws stand in for the posterior (the naming is what is tested, not the sampler).
    import arviz as az

    from bayes_grpo.runset import load_runset

    def fake_fit(self, runset, **kw):
        prior = self.sample_prior_predictive(runset, samples=20, random_seed=1).prior
        self.idata = az.InferenceData(posterior=prior)
        self.fit_seconds = 0.0
        return self.idata

    monkeypatch.setattr(GRPODynamicsModel, "fit", fake_fit)
    monkeypatch.setattr(GRPODynamicsModel, "save", lambda self, path, overwrite=False: path)
    model = GRPODynamicsModel(parameterisation="phenomenological")
    model.fit(load_runset(runs_file))
    assert model.gain_column == "w0_sq" and GRPODynamicsModel().gain_column == "a"
    assert "w0_sq" in model.run_summary() and "a" not in model.run_summary()
    assert "w0_sq" in model.group_summary() and "a" not in model.group_summary()
    monkeypatch.setattr(GRPODynamicsModel, "convergence", lambda self: type("C", (), {"passed": True, "summary": "stub"})())
    assert main(["fit", str(runs_file), "-o", str(tmp_path / "p.nc"), "--parameterisation", "phenomenological"]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if "p_star" in line)
    assert "w0_sq" in header and not re.search(r"\ba\b", header), header
    assert "learning rate and K_ref do not enter" in text


def test_fit_json_and_no_progress_hide_pymcs_progress_messages_but_keep_its_warnings(
    runs_file, tmp_path, capsys, caplog, monkeypatch
):
    # `fit --json` and `fit --no-progress` printed PyMC's "Initializing NUTS using
    # jitter+adapt_diag...", "Sampling 2 chains ..." on stderr. Prior draws stand in for the
    # posterior; the stand-in fit logs through PyMC's loggers as pm.sample does
    import logging

    import arviz as az

    def fake_fit(self, runset, **kw):
        log = logging.getLogger("pymc.sampling.mcmc")
        log.info("Sampling 2 chains for 5 tune and 5 draw iterations")
        log.warning("Only 5 samples per chain.")
        self.idata = az.InferenceData(posterior=self.sample_prior_predictive(runset, samples=20, random_seed=1).prior)
        self.fit_seconds = 0.0
        return self.idata

    monkeypatch.setattr(GRPODynamicsModel, "fit", fake_fit)
    monkeypatch.setattr(GRPODynamicsModel, "save", lambda self, path, overwrite=False: path)
    caplog.set_level(logging.DEBUG)
    for flags, shown in (([], True), (["--no-progress"], False), (["--json"], False)):
        caplog.clear()
        assert main(["fit", str(runs_file), "-o", str(tmp_path / "f.nc"), *flags]) == 0
        capsys.readouterr()
        pymc_lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("pymc")]
        assert (logging.WARNING, "Only 5 samples per chain.") in pymc_lines, (flags, pymc_lines)
        infos = [m for level, m in pymc_lines if level < logging.WARNING]
        assert bool(infos) is shown, (flags, infos)
    assert logging.getLogger("pymc").getEffectiveLevel() <= logging.INFO  # restored after the fit


def test_fit_strict_exits_non_zero_when_the_fit_did_not_converge_and_still_writes_it(runs_file, tmp_path, capsys, monkeypatch):
    # an unconverged fit exited 0 like a converged one: a script or pipeline could not tell them
    # apart without parsing the text. Prior draws stand in for the posterior (one chain: R-hat
    # cannot be assessed, so the real convergence check fails)
    import arviz as az

    def fake_fit(self, runset, **kw):
        self.idata = az.InferenceData(posterior=self.sample_prior_predictive(runset, samples=20, random_seed=1).prior)
        self.fit_seconds = 0.0
        return self.idata

    written = []
    monkeypatch.setattr(GRPODynamicsModel, "fit", fake_fit)
    monkeypatch.setattr(GRPODynamicsModel, "save", lambda self, path, overwrite=False: written.append(path) or path)
    out = tmp_path / "f.nc"
    assert main(["fit", str(runs_file), "-o", str(out), "--strict"]) == 3
    err = capsys.readouterr().err
    assert "--strict: the fit did not converge (fewer than 2 chains" in err and str(out) in err
    assert written == [out]  # written either way
    assert main(["fit", str(runs_file), "-o", str(out), "--strict", "--json"]) == 3
    from bayes_grpo.checks import ppc
    from bayes_grpo.checks.base import CheckResult

    wander = "Residual lag-1 autocorrelation up to 0.84 (the largest in size beyond its white-noise band)."
    monkeypatch.setattr(ppc, "iid_residual_check", lambda model: CheckResult("ppc_residual_autocorrelation", False, wander))
    assert main(["fit", str(runs_file), "-o", str(out)]) == 0  # without --strict: a warning, status 0
    # said once, without a label repeating the summary's own first word: it read "convergence:
    # PROBLEMS: Convergence problems: ...", then "convergence: Convergence problems: ..." and
    # "residuals: Residual lag-1 ..."
    lines = capsys.readouterr().out.splitlines()
    (line,) = [t for t in lines if t.startswith("Convergence problems")]
    assert line.startswith("Convergence problems: R-hat needs at least 2 chains") and "PROBLEMS" not in line
    assert not [t for t in lines if t.startswith(("convergence:", "residuals:"))]
    assert wander in lines
    passed = type("C", (), {"passed": True, "summary": "stub", "values": {}, "to_dict": lambda self: {}})()
    monkeypatch.setattr(GRPODynamicsModel, "convergence", lambda self: passed)
    assert main(["fit", str(runs_file), "-o", str(out), "--strict"]) == 0


def test_a_folder_or_a_log_given_as_the_posterior_says_what_file_is_expected(tmp_path, capsys):
    # `bayes-grpo predict data/tiny ...` printed h5py's "Unable to synchronously open file
    # (file read failed: ... errno = 21, error message = 'Is a directory' ...)"
    setting = ["--lr", "1e-3", "--momentum", "0.9", "--k-ref", "1", "--group-size", "8", "--steps", "20"]
    assert main(["predict", str(tmp_path), *setting]) == 2
    assert "is a folder, not a fitted-model file; a fitted model is the file `bayes-grpo fit" in capsys.readouterr().err
    log = tmp_path / "trainer_state.json"
    log.write_text('{"log_history": []}')
    with pytest.raises(ValueError, match=r"not a netCDF file; a fitted model is the file"):
        GRPODynamicsModel.load(log)
    # a prediction or a run set given where the fit belongs said only "attribute
    # bayes_grpo_model_type missing"
    from bayes_grpo.predict.predict import predict_from_draws, save_prediction

    a = np.full((2, 50), 0.01)
    draws = xr.Dataset({k: (("chain", "draw"), v) for k, v in {
        "a": a, "M_eff": a * 0 + 0.75, "C_eff": a * 0 + 0.5, "K_eff": a, "zeta": a * 0 + 2.9,
        "plateau": a * 0 + 0.8, "initial_reward": a * 0 + 0.2, "noise_d": a * 0, "sigma": a * 0 + 0.02}.items()})  # fmt: skip
    pred = save_prediction(predict_from_draws(draws, steps=20, momentum=0.5, k_ref=1.0), tmp_path / "pred.nc")
    with pytest.raises(ValueError, match=r"pred.nc: a prediction file \(written by `bayes-grpo predict` / `forecast`\), not a fitted model; a fitted model is"):
        GRPODynamicsModel.load(pred)
    runs = save_runset(simulate_sde_runset(n_seeds=1, group_sizes=(4,), n_steps=20), tmp_path / "runs.nc")
    with pytest.raises(ValueError, match=r"runs.nc: a run set \(written by `bayes-grpo ingest` or `simulate`\), not a fitted model"):
        GRPODynamicsModel.load(runs)


def _fit_from_prior_draws(monkeypatch, samples: int = 20, adjust=None):
    """`bayes-grpo fit` without sampling, for tests of what it prints: prior draws (seed 1) stand
    in for the posterior (``adjust(model, prior)`` may change them), `save` writes nothing and
    the convergence check passes."""
    import arviz as az

    def fake_fit(self, runset, **kw):
        self.runset = runset
        prior = self.sample_prior_predictive(runset, samples=samples, random_seed=1).prior
        self.idata = az.InferenceData(posterior=prior if adjust is None else adjust(self, prior))
        self.fit_seconds = 0.0
        return self.idata

    monkeypatch.setattr(GRPODynamicsModel, "fit", fake_fit)
    monkeypatch.setattr(GRPODynamicsModel, "save", lambda self, path, overwrite=False: path)
    monkeypatch.setattr(GRPODynamicsModel, "convergence", lambda self: type("C", (), {"passed": True, "summary": "stub", "to_dict": lambda s: {}})())


def test_a_run_too_short_for_the_trend_test_is_said_to_be_so_in_fits_notes_and_the_reports_table(tmp_path, capsys, monkeypatch):
    """A run of 4 logged points: the trend test cannot tell (it needs 9), has_trend is None,
    and the report's per-run table showed an empty cell, `fit` nothing: now both say why."""
    import pandas as pd

    from bayes_grpo.report.model_sections import fit_section
    from bayes_grpo.runset import make_runset

    steps = np.arange(1, 61)
    curves = {
        "long": pd.DataFrame({"reward": 0.8 - 0.6 * np.exp(-steps / 15.0) + 0.01 * np.sin(steps)}, index=steps),
        "short": pd.DataFrame({"reward": [0.2, 0.35, 0.5, 0.6]}, index=steps[:4]),
    }
    settings = {"model": "m", "group_size": 8, "learning_rate": 1e-4, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}
    ds = make_runset(curves, {r: settings for r in curves})
    path = save_runset(ds, tmp_path / "runs.nc")
    _fit_from_prior_draws(monkeypatch)
    model = GRPODynamicsModel()
    model.fit(ds)
    runs = model.run_summary()
    assert runs.loc["short", "has_trend"] is None and runs.loc["long", "has_trend"] is not None
    section = fit_section(model)
    per_run = [b.content for b in section.blocks if b.kind == "table"][-1]
    assert ">too few points</td>" in per_run, per_run
    said = " ".join(b.content for b in section.blocks if b.kind == "text")
    assert "short (4 points)" in said and "the trend test needs 9" in said, said
    assert main(["fit", str(path), "-o", str(tmp_path / "f.nc")]) == 0
    out = capsys.readouterr().out
    assert "note: run short has too few logged points (4) for the trend test, which needs 9" in out, out
    assert main(["fit", str(path), "-o", str(tmp_path / "f.nc"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert any("run short has too few logged points (4)" in n for n in payload["notes"]), payload["notes"]
    assert [r["has_trend"] for r in payload["runs"] if r["run"] == "short"] == [None]


def _wandering_runs():
    """Two runs (G 4 and 16) whose reward wanders about its curve: strong process noise,
    stationary sd about 20% of the rise, little measurement noise."""
    return simulate_sde_runset(
        models={"m": {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-5}},
        n_seeds=1,
        n_steps=200,
        measurement_sd=0.01,
        random_seed=3,
    )


def test_an_iid_fit_of_a_wandering_reward_says_its_residuals_are_correlated(tmp_path, capsys, monkeypatch):
    # a reward with strong process noise (stationary sd about 20% of the rise) fitted with the
    # i.i.d. likelihood gave zeta 0.952 [0.923, 0.986] for a truth of 0.778, and `fit` printed
    # no word of the residuals' autocorrelation (0.98 at lag 1). Prior draws stand in for the
    # posterior (the message is what is tested, not the sampler).
    ds = _wandering_runs()
    runs = save_runset(ds, tmp_path / "wander.nc")

    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc")]) == 0
    text = capsys.readouterr().out
    line = next((x for x in text.splitlines() if x.startswith("Residual lag-1 autocorrelation")), "")
    assert "correlated in time" in line and "state_space" in line, text
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["residual_autocorrelation"]["passed"] is False


def test_an_iid_fit_of_a_wandering_reward_warns_when_it_is_loaded_for_use(tmp_path, monkeypatch):
    # predict and stability from such a fit gave, e.g., critical K_ref 50 [47, 54] for a truth
    # of 33 without a word; loading it for use (model.load_fitted_model) now says why. Prior
    # draws stand in for the posterior, as above.
    import arviz as az

    from bayes_grpo.model import load_fitted_model

    ds = _wandering_runs()
    model = GRPODynamicsModel()
    model.runset = ds
    model.idata = az.InferenceData(posterior=model.sample_prior_predictive(ds, samples=20, random_seed=1).prior)
    monkeypatch.setattr(GRPODynamicsModel, "load", classmethod(lambda cls, path: model))
    monkeypatch.setattr(GRPODynamicsModel, "convergence", lambda self: type("C", (), {"passed": True})())
    with pytest.warns(UserWarning, match="Residuals are correlated in time") as record:
        assert load_fitted_model(tmp_path / "f.nc") is model
    assert "too confident" in str(record[0].message)
    # said as a sentence, with the command that refits (it read "the stationary fluctuations of
    # the SDE are; fit with likelihood='state_space' for honest uncertainties")
    said = str(record[0].message)
    assert "correlated in time, as the SDE's stationary fluctuations are;" in said, said
    assert "(`bayes-grpo fit --likelihood state_space`)" in said, said


def test_fit_names_the_runs_the_instability_diagnostic_flags_before_sampling(tmp_path, capsys, monkeypatch):
    # a run at lr 6 on the softmax bandit (far past the threshold: it clips on every refresh and
    # its bounded reward swings) went into the fit like any other run, without a word
    from bayes_grpo.cli.fit import flagged_unstable_runs
    from bayes_grpo.diagnostics.cases import bandit_case, simulated_case
    from bayes_grpo.runset import concat_runsets

    ds = concat_runsets([bandit_case("bandit_large_lr", steps=150), bandit_case("bandit_healthy", steps=150)])
    runs = save_runset(ds, tmp_path / "sweep.nc")

    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc")]) == 0
    err = capsys.readouterr().err
    assert "note: run 'bandit_large_lr/seed0' is flagged by the instability diagnostic (sustained clipping" in err, err
    assert "bandit_healthy" not in err
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert list(payload["flagged_unstable"]) == ["bandit_large_lr/seed0"]
    # a damped reward oscillation is the law's own underdamped regime: not a reason for a note
    assert flagged_unstable_runs(simulated_case("instability_oscillation")) == {}


def test_a_noise_exponent_whose_interval_excludes_the_theorys_1_is_said_by_fit(runs_file, tmp_path, capsys, monkeypatch):
    # the shipped models/tiny.nc had alpha -1.02 [-1.1, -0.94] (-0.59 with reward bounds; noise growing with G against the
    # theory's 1/G) and neither fit nor predict said so. Prior draws stand in for the posterior,
    # with alpha set to the tiny fit's; an interval that holds 1, a fixed alpha and the shipped
    # one-G bandit fit (alpha not identified) say nothing.
    from pathlib import Path

    from bayes_grpo.runset import load_runset

    centre = {"value": -1.0}

    def set_alpha(model, prior):
        if "alpha" in prior and model.model_config["alpha"].get("fixed") is None:
            noise = np.random.default_rng(0).normal(0.0, centre.get("sd", 0.05), prior["alpha"].shape)
            if centre.get("walk"):  # a stuck chain: tiny steps of a random walk
                noise = np.cumsum(noise, axis=-1)
            prior["alpha"] = prior["alpha"] * 0 + centre["value"] + noise
        return prior

    _fit_from_prior_draws(monkeypatch, samples=300, adjust=set_alpha)
    assert main(["fit", str(runs_file), "-o", str(tmp_path / "a.nc")]) == 0
    text = capsys.readouterr().out
    # one line, the note with the interval (the interval line and the note were two lines)
    # and the label once: "noise exponent: the noise exponent alpha ..." said it twice
    assert re.search(r"noise exponent: alpha \(sigma\^2 = D / G\^alpha\) is -1\S* \[-1\.\d+, -0\.9\d*\] \(90% interval\)", text), text
    assert text.count("noise exponent") == 1, text
    assert "excludes the theory's 1" in text and "(it grows with G)" in text and "not converged" not in text
    assert main(["fit", str(runs_file), "-o", str(tmp_path / "b.nc"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["noise_exponent"]["hi"] < 0 and "excludes the theory's 1" in payload["noise_exponent"]["note"]
    centre["value"] = 1.0
    model = GRPODynamicsModel()
    model.fit(load_runset(runs_file))
    summary = model.noise_exponent_summary()
    assert summary["lo"] < 1 < summary["hi"] and summary["note"] is None
    fixed = GRPODynamicsModel(model_config={"alpha": {"fixed": 1.0}})
    fixed.fit(load_runset(runs_file))
    assert fixed.noise_exponent_summary() is None
    one_g = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    assert one_g.noise_exponent_summary() is None
    # a stuck chain gives a narrow interval anywhere (a 1-chain state-space fit, bulk ESS 1: alpha
    # 0.981 [0.981, 0.981]): not read against the theory without saying so
    centre.update(value=0.981, sd=1e-5, walk=True)
    model.fit(load_runset(runs_file))
    stuck = model.noise_exponent_summary()["note"]
    assert stuck.startswith("alpha's draws have not converged (bulk ESS") and "one chain" in stuck


def test_fit_prints_the_noise_exponent_on_one_line(runs_file, tmp_path, capsys, monkeypatch):
    # `fit` printed "noise exponent: sigma^2 = D / G^alpha, alpha = -1.02 [...]" and, three lines
    # further down, "noise exponent: ... the noise exponent alpha ... is -1.02 [...]": the same
    # interval twice under one label; an interval that holds 1 is its own line, as before
    centre = {"value": -1.0}

    def set_alpha(model, prior):
        noise = np.random.default_rng(0).normal(0.0, 0.05, prior["alpha"].shape)
        prior["alpha"] = prior["alpha"] * 0 + centre["value"] + noise
        return prior

    _fit_from_prior_draws(monkeypatch, samples=300, adjust=set_alpha)
    assert main(["fit", str(runs_file), "-o", str(tmp_path / "a.nc")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "noise exponent" in line]
    assert len(lines) == 1 and "excludes the theory's 1" in lines[0], lines
    centre["value"] = 1.0
    assert main(["fit", str(runs_file), "-o", str(tmp_path / "b.nc")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "noise exponent" in line]
    assert len(lines) == 1 and re.search(r"alpha = [01]\.\d+ \[0\.9\d*, 1\.\d+\] \(90% interval; theory 1\)", lines[0]), lines


def test_fit_says_the_units_of_its_coefficients_in_text_and_json(runs_file, tmp_path, capsys, monkeypatch):
    # the table of M_eff, C_eff, K_eff and D carried no unit (D of an i.i.d. fit is a variance,
    # of a state-space fit a noise intensity per step^3)
    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(runs_file), "-o", str(tmp_path / "a.nc")]) == 0
    text = capsys.readouterr().out
    assert "units (time in optimizer steps, reward in its logged unit): p_star reward; a per step^2; " \
        "M_eff dimensionless; C_eff per step; K_eff per step^2; zeta dimensionless; D reward^2 (" in text, text
    assert main(["fit", str(runs_file), "-o", str(tmp_path / "b.nc"), "--json", "--likelihood", "state_space"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["units"]["D"] == "reward^2 per step^3" and payload["units"]["K_eff"] == "per step^2"


def _fit_json_beside_a_run_of_unknown_g(runs_file, tmp_path, capsys, monkeypatch) -> dict:
    """``fit --json`` of the run set plus a copy of its first run at an unknown G."""
    ds = xr.load_dataset(runs_file)
    third = ds.isel(run=[0]).assign_coords(run=["unknown-g"], group_size=("run", [np.nan]))
    runs = save_runset(xr.concat([ds, third], dim="run"), tmp_path / "with_unknown_g.nc")
    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc"), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_json_groups_give_g_as_an_integer_also_beside_a_group_of_unknown_g(runs_file, tmp_path, capsys, monkeypatch):
    # with one run of unknown G, `fit --json` gave the groups' G as 4.0 and 16.0 (the runs' as 4
    # and 16, the printed table 4 and 16): reset_index made the G level floats around its NaN
    payload = _fit_json_beside_a_run_of_unknown_g(runs_file, tmp_path, capsys, monkeypatch)
    for rows in (payload["groups"], payload["runs"]):
        sizes = [row["group_size"] for row in rows]
        assert len(sizes) == 3 and None in sizes, sizes
        assert sorted(g for g in sizes if g is not None) == [4, 16] and all(type(g) is int for g in sizes if g is not None), sizes


def test_the_printed_table_gives_an_unknown_g_as_a_question_mark_not_nan(runs_file, tmp_path, capsys, monkeypatch):
    # `fit` of runs of unknown G printed the group row as "unknown-model NaN" (G read as a
    # number), where every label and message shows an unknown G as "?" (group_size_text)
    ds = xr.load_dataset(runs_file)
    third = ds.isel(run=[0]).assign_coords(run=["unknown-g"], group_size=("run", [np.nan]))
    runs = save_runset(xr.concat([ds, third], dim="run"), tmp_path / "with_unknown_g.nc")
    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc")]) == 0
    table = capsys.readouterr().out.split("posterior medians per model and G")[1].split("\nunits")[0]
    lines = table.strip().splitlines()
    n_columns = len(lines[1].split())  # the header after the label: p_star ... n_runs_r2
    sizes = [line.split()[-n_columns - 1] for line in lines[3:]]  # G, then the columns
    assert sorted(sizes) == ["16", "4", "?"], table


def test_the_json_residual_autocorrelation_table_gives_g_as_an_integer_beside_an_unknown_g(runs_file, tmp_path, capsys, monkeypatch):
    # with one run of unknown G, `fit --json`'s residual_autocorrelation table gave the known G
    # as 4.0 and 16.0 (the groups' and runs' as 4 and 16): CheckResult.to_dict's reset_index made
    # the table's G level floats around its NaN
    payload = _fit_json_beside_a_run_of_unknown_g(runs_file, tmp_path, capsys, monkeypatch)
    rows = payload["residual_autocorrelation"]["table"]
    sizes = [row["G"] for row in rows]
    assert None in sizes and sorted(g for g in sizes if g is not None) == [4, 16], sizes
    assert all(type(g) is int for g in sizes if g is not None), sizes


def test_a_wrong_default_beside_a_config_file_is_put_down_to_the_default_not_the_file(runs_file, tmp_path, capsys):
    # `fit runs.nc --config c.json --default momentum=1.5` said "c.json: configuration
    # 'hyperparameter_defaults.momentum' ... must be in [0, 1)" of a file that holds no momentum
    cfg = tmp_path / "c.json"
    cfg.write_text('{"plateau": {"sigma": 1.0}}')
    out = tmp_path / "fit.nc"
    assert main(["fit", str(runs_file), "-o", str(out), "--config", str(cfg), "--default", "momentum=1.5"]) == 2
    err = capsys.readouterr().err
    assert "(--default momentum=...) must be in [0, 1); got 1.5" in err and str(cfg) not in err, err
    cfg.write_text('{"hyperparameter_defaults": {"momentum": 1.5}}')  # the file's own entry: the file
    assert main(["fit", str(runs_file), "-o", str(out), "--config", str(cfg), "--default", "k_ref=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bayes-grpo fit: error: {cfg}: ") and "must be in [0, 1); got 1.5" in err, err
    assert not out.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_default_that_is_no_finite_number_is_an_argument_error_naming_default(runs_file, tmp_path, capsys, value):
    # `--default k_ref=nan` passed the argument type and was refused later as "configuration
    # 'hyperparameter_defaults.k_ref' must be null (no default) or a number; got nan"
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(runs_file), "-o", str(tmp_path / "fit.nc"), "--default", f"k_ref={value}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--default k_ref: must be a finite number, got '{value}'" in err, err


def test_the_maximum_tree_depth_the_convergence_advice_says_to_raise_can_be_raised(runs_file, tmp_path, capsys, monkeypatch):
    # "44 transitions hit the maximum tree depth 10: ... raise max_treedepth or reparameterise"
    # advised what neither `fit` nor the sampler config could do: NUTS always ran at depth 10
    import pymc as pm

    from bayes_grpo.model.convergence import convergence_check

    class Sampled(Exception):
        pass

    def sample(**kw):
        raise Sampled(kw)

    monkeypatch.setattr(pm, "sample", sample)
    with pytest.raises(Sampled) as got:
        main(["fit", str(runs_file), "-o", str(tmp_path / "f.nc"), "--max-treedepth", "12", "--draws", "5", "--tune", "5"])
    assert got.value.args[0]["nuts"] == {"max_treedepth": 12}
    with pytest.raises(Sampled) as got:  # the default: PyMC's own 10
        main(["fit", str(runs_file), "-o", str(tmp_path / "f.nc"), "--draws", "5", "--tune", "5"])
    assert got.value.args[0]["nuts"] == {"max_treedepth": 10}
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    assert "--max-treedepth" in capsys.readouterr().out
    # the fit's convergence check counts and names the depth it was sampled at
    import arviz as az

    rng = np.random.default_rng(0)
    stats = {"reached_max_treedepth": (("chain", "draw"), np.ones((2, 300), dtype=bool))}
    idata = az.InferenceData(
        posterior=xr.Dataset({"x": (("chain", "draw"), rng.standard_normal((2, 300)))}), sample_stats=xr.Dataset(stats)
    )
    model = GRPODynamicsModel(sampler_config={"max_treedepth": 12})
    model.idata = idata
    assert "600 transitions at the maximum tree depth 12" in model.convergence().values["failed"]
    assert "maximum tree depth 10" in convergence_check(idata).values["failed"][0]


def test_a_default_given_twice_with_two_values_is_an_argument_error(runs_file, tmp_path, capsys):
    # `fit runs.nc --default k_ref=1 --default k_ref=2` fitted at k_ref 2 without a word of the 1
    from bayes_grpo.cli import build_parser

    with pytest.raises(SystemExit) as exc:
        main(["fit", str(runs_file), "-o", str(tmp_path / "fit.nc"), "--default", "k_ref=1", "--default", "k_ref=2"])
    assert exc.value.code == 2
    assert "k_ref given twice (1 and 2); give each KEY once" in capsys.readouterr().err
    args = build_parser().parse_args(["fit", "runs.nc", "-o", "f.nc", "--default", "k_ref=1", "--default", "momentum=0.5", "--default", "k_ref=1"])
    assert dict(args.defaults) == {"k_ref": 1.0, "momentum": 0.5}  # the same value twice is one setting
    assert build_parser().parse_args(["fit", "runs.nc", "-o", "f.nc"]).defaults == []


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ('{"plateau": {"sigma": 1}, "plateau": {"sigma": 3}}', "key ['plateau']"),
        ('{"noise": {"log_sigma": 1, "log_sigma": 2}}', "key ['log_sigma']"),
        # two keys in the plural (it said "the key(s)" for one and for two)
        ('{"a": 1, "b": 2, "a": 3, "b": 4}', "keys ['a', 'b']"),
    ],
)
def test_a_config_file_giving_a_key_twice_is_refused_naming_the_key(runs_file, tmp_path, capsys, text, keys):
    # json.loads kept the last of two equal keys: `fit --config` with a pasted second "plateau"
    # entry fitted at sigma 3 without a word of the 1
    from bayes_grpo.cli._common import read_json_object

    cfg = tmp_path / "cfg.json"
    cfg.write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"{cfg}: --config gives the {keys} twice in one object; keep one")):
        read_json_object(cfg)
    out = tmp_path / "fit.nc"
    assert main(["fit", str(runs_file), "-o", str(out), "--config", str(cfg)]) == 2
    assert f"{cfg}: --config gives the {keys} twice" in capsys.readouterr().err
    assert not out.exists()
    cfg.write_text('{"plateau": {"sigma": 1}, "initial_reward": {"sigma": 1}}')  # one key per object
    assert read_json_object(cfg) == {"plateau": {"sigma": 1}, "initial_reward": {"sigma": 1}}


def test_the_noise_exponent_note_gives_r_hat_to_the_digits_of_the_convergence_check(monkeypatch):
    # alpha's R-hat 1.0123 (over the check's 1.01) was written "R-hat 1.01" in the note that said
    # its draws had not converged, as if at the threshold
    from pathlib import Path

    import arviz as az

    model = GRPODynamicsModel.load(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    assert model.noise_exponent_summary()["note"].startswith("the noise exponent alpha")  # converged
    monkeypatch.setattr(az, "rhat", lambda data, **kw: xr.Dataset({"alpha": 1.0123}))
    note = model.noise_exponent_summary()["note"]
    assert note.startswith("alpha's draws have not converged (bulk ESS ") and ", R-hat 1.012;" in note, note


def _rising_and_flat_runs() -> dict:
    """A run rising 2 -> 7 on a 0-10 scale (noise 0.2) and a flat noisy one (5 +- 0.3), 150 steps."""
    import pandas as pd

    rng = np.random.default_rng(0)
    steps = np.arange(0, 150)
    rise = 2.0 + 5.0 * (1.0 - np.exp(-steps / 20.0))
    return {
        "rising": pd.DataFrame({"reward": rise + rng.normal(0, 0.2, steps.size)}, index=steps),
        "flat": pd.DataFrame({"reward": 5.0 + rng.normal(0, 0.3, steps.size)}, index=steps),
    }


def test_fit_names_a_run_without_a_visible_trend_in_its_text_and_json(tmp_path, capsys, monkeypatch):
    """A flat, noisy run (an LLM's G = 2 run that never moved, reward 5 +- 0.3 on a 0-10 scale)
    went into `fit` beside the LLM's rising runs without a word: raw R^2 -133, and the LLM's
    noise D 22 against 1.6 and 5.1 for the other LLMs (its misfit counted as noise). The report
    and `compare` name such runs; `fit` now does too (stdout and JSON `notes`), a constant run
    keeping its own note only. Prior draws stand in for the posterior."""
    import pandas as pd

    from bayes_grpo.runset import make_runset

    curves = _rising_and_flat_runs()
    curves["solved"] = pd.DataFrame({"reward": np.full(150, 7.0)}, index=np.arange(0, 150))
    hp = {"model": "m", "learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}
    runs = save_runset(make_runset(curves, {k: {**hp, "group_size": g} for k, g in zip(curves, (8, 2, 32))}), tmp_path / "r.nc")

    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc")]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "no visible trend" in x]
    assert len(lines) == 1 and lines[0].startswith("note: runs ['flat'] show no visible trend"), lines
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc"), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert sum("no visible trend" in n for n in notes) == 1 and any("['flat']" in n for n in notes), notes


def test_a_run_too_short_for_the_trend_test_is_not_named_as_showing_no_trend(tmp_path, capsys, monkeypatch):
    """A run logged at 6 steps rising 0.15 -> 0.78 beside longer runs: `fit` said "runs [...]
    show no visible trend ... the law has no rise to fit there ... leave them out", since
    has_trend is False where the trend test has too few points (under 9) to tell. Its
    has_trend is now None (not assessable) and the note leaves it out. Prior draws stand in
    for the posterior."""
    import pandas as pd

    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(0)
    rise = lambda t: 0.15 + 0.65 * (1.0 - np.exp(-t / 25.0))  # noqa: E731
    long_steps = np.array([0, 5, 10, 20, 40, 60, 80, 100, 130, 160, 200])
    short_steps = long_steps[:6]
    curves = {
        "long": pd.DataFrame({"reward": rise(long_steps) + rng.normal(0, 0.01, long_steps.size)}, index=long_steps),
        "short": pd.DataFrame({"reward": rise(short_steps) + rng.normal(0, 0.01, short_steps.size)}, index=short_steps),
    }
    hp = {"model": "m", "learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1, "group_size": 8}
    runs = save_runset(make_runset(curves, {k: hp for k in curves}), tmp_path / "r.nc")
    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert not any("no visible trend" in n for n in payload["notes"]), payload["notes"]
    trend = {row["run"]: row["has_trend"] for row in payload["runs"]}
    assert trend == {"long": True, "short": None}, trend


def test_fit_help_says_the_same_seed_gives_the_same_draws(capsys):
    # `fit --help` said only "random seed"; then, for nutpie, "only under the same PYTHONHASHSEED",
    # which was not the cause (the test below)
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "random seed: the same seed gives the same draws, with either sampler" in text, text
    assert "PYTHONHASHSEED" not in text, text


@pytest.mark.slow
def test_a_nutpie_fit_draws_the_same_from_one_seed_whether_its_code_is_compiled_afresh_or_read_from_the_cache(
    tmp_path,
):
    """`fit --sampler nutpie --seed 0` in a fresh compile cache and again with the cache warm
    drew different chains (numba's fast-math flags let LLVM reassociate differently in code
    compiled afresh and in code loaded from PyTensor's cache: up to 3e-4 apart after 2 x 200
    iterations of this fit), and the README blamed PYTHONHASHSEED. Two processes of different
    hash seeds, the first compiling the model and the second reading it from the cache, now
    draw the same, bit for bit."""
    pytest.importorskip("nutpie")
    runs = tmp_path / "runs.nc"
    env = dict(os.environ, PYTENSOR_FLAGS=f"base_compiledir={tmp_path / 'compiled'}")
    command = [sys.executable, "-m", "bayes_grpo"]
    subprocess.run([*command, "simulate", "sde", "-o", str(runs)], env=env, check=True, capture_output=True)
    posteriors = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"fit_{hash_seed}.nc"
        fit = [*command, "fit", str(runs), "-o", str(out), "--parameterisation", "phenomenological"]
        fit += ["--sampler", "nutpie", "--draws", "50", "--tune", "50", "--chains", "2", "--seed", "0", "--no-progress"]
        subprocess.run(fit, env=env | {"PYTHONHASHSEED": hash_seed}, check=True, capture_output=True)
        with xr.open_dataset(out, group="posterior") as posterior:
            posteriors.append(posterior.load())
    first, second = posteriors
    assert list(first.data_vars) == list(second.data_vars)
    for name in first.data_vars:
        np.testing.assert_array_equal(first[name].values, second[name].values, err_msg=name)


def test_a_group_whose_runs_all_lack_a_trend_reads_no_trend_for_its_r2_not_nan(tmp_path, capsys, monkeypatch):
    """`fit` printed NaN for the R^2 of a (model, G) group whose every run is flat (group_summary
    leaves them NaN; the report says "no trend"), and --json gave null without a reason. The
    text table now reads "no trend" there and --json a null R^2 with ``r2_note`` saying why.
    Prior draws stand in for the posterior."""

    from bayes_grpo.runset import make_runset

    curves = _rising_and_flat_runs()
    hp = {"model": "m", "learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}
    runs = save_runset(make_runset(curves, {k: {**hp, "group_size": g} for k, g in zip(curves, (8, 2))}), tmp_path / "r.nc")
    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc")]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(x for x in lines if re.match(r"^m\s+2\s", x) or re.match(r"^\s+2\s", x))
    assert "NaN" not in row and row.count("no trend") == 3, row
    assert main(["fit", str(runs), "-o", str(tmp_path / "f.nc"), "--json"]) == 0
    groups = {g["group_size"]: g for g in json.loads(capsys.readouterr().out)["groups"]}
    assert groups[2]["r2_raw"] is None and groups[2]["r2_smoothed"] is None, groups[2]
    assert groups[2]["r2_note"].startswith("no trend"), groups[2]
    assert groups[8]["r2_note"] is None and groups[8]["r2_raw"] is not None, groups[8]


def _k_ref_sweep(tmp_path, *, learning_rates, n_steps):
    """A saved run set of one LLM at G 8: a run per K_ref (1, 4) and learning rate."""
    ds = simulate_sde_runset(
        models={"m": {"stiffness": 400.0, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 1e-12}},
        group_sizes=(8,),
        learning_rates=learning_rates,
        k_refs=(1, 4),
        n_seeds=1,
        n_steps=n_steps,
        measurement_sd=0.05,
        random_seed=2,
    )
    return save_runset(ds, tmp_path / "sweep.nc")


def test_the_table_per_model_and_g_splits_a_g_whose_runs_differ_in_k_ref(tmp_path, capsys, monkeypatch):
    """A K_ref sweep at one G was one row of `fit`'s table (and of --json's groups, and of the
    report's): the medians of M_eff, C_eff and zeta of runs at K_ref 1 and 4, two dynamical
    systems, as if they were one. Now a (model, G) whose runs differ in a setting the
    coefficients depend on has a row per value, with that setting as a column (a key in
    --json). Prior draws stand in for the posterior."""
    from bayes_grpo.runset import load_runset

    path = _k_ref_sweep(tmp_path, learning_rates=(1e-4,), n_steps=60)
    _fit_from_prior_draws(monkeypatch)
    model = GRPODynamicsModel()
    model.fit(load_runset(path))
    runs = model.run_summary()
    groups = model.group_summary()
    assert len(groups) == 2 and groups["k_ref"].tolist() == [1, 4], groups
    assert model.mixed_settings() == ["k_ref"]
    by_k_ref = dict(zip(model.data.k_ref.tolist(), runs["C_eff"].tolist()))
    assert groups["C_eff"].tolist() == [by_k_ref[1.0], by_k_ref[4.0]]  # each row its own run's
    assert groups["n_runs"].tolist() == [1, 1]
    from bayes_grpo.report.model_sections import fit_section

    said = " ".join(b.content for b in fit_section(model).blocks if b.kind == "text")
    assert "The runs of one model and G differ in k_ref" in said, said
    assert main(["fit", str(path), "-o", str(tmp_path / "f.nc")]) == 0
    out = capsys.readouterr().out
    assert "posterior medians per model, G and k_ref" in out and "differ in k_ref" in out, out
    assert main(["fit", str(path), "-o", str(tmp_path / "f.nc"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["groups_split_by"] == ["k_ref"]
    assert [(g["group_size"], g["k_ref"]) for g in payload["groups"]] == [(8, 1), (8, 4)]
    # runs alike in their settings keep one row per (model, G), and no setting column
    model = GRPODynamicsModel()
    model.fit(load_runset(path).isel(run=[0]))
    assert model.mixed_settings() == [] and "k_ref" not in model.group_summary().columns


def test_the_table_split_by_two_settings_is_titled_by_both_in_fit_and_in_the_report(tmp_path, capsys, monkeypatch):
    """A learning-rate x K_ref sweep at one G (models/bandit.nc): fit titled its table 'per model,
    G and learning_rate and k_ref', and the report's heading over the same rows read 'Per model
    and G'. Prior draws stand in for the posterior."""
    from bayes_grpo.report.model_sections import fit_section
    from bayes_grpo.runset import load_runset

    path = _k_ref_sweep(tmp_path, learning_rates=(1e-4, 2e-4), n_steps=40)
    _fit_from_prior_draws(monkeypatch)
    assert main(["fit", str(path), "-o", str(tmp_path / "f.nc")]) == 0
    out = capsys.readouterr().out
    assert "posterior medians per model, G, learning_rate and k_ref (" in out, out
    model = GRPODynamicsModel()
    model.fit(load_runset(path))
    assert model.mixed_settings() == ["learning_rate", "k_ref"]
    headings = [b.content for b in fit_section(model).blocks if b.kind == "heading"]
    assert "Per model, G, learning_rate and k_ref" in headings, headings
    assert "Per model and G" not in headings
    # a fit whose (model, G) cells are not split keeps its heading
    model = GRPODynamicsModel()
    model.fit(load_runset(path).isel(run=[0]))
    assert "Per model and G" in [b.content for b in fit_section(model).blocks if b.kind == "heading"]
