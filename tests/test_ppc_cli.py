"""``bayes-grpo ppc``: the posterior predictive checks of a saved fit on the command line."""

from __future__ import annotations

import functools
import json
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from bayes_grpo.checks.base import CheckResult
from bayes_grpo.cli import main

TINY = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"


def test_the_ppc_verb_prints_the_band_coverage_of_each_g_of_a_saved_fit(capsys):
    assert main(["ppc", str(TINY)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    # the band check's verdict and sentence, with the coverage of each G of the fit (4 and 16)
    assert re.search(r"\[ppc_trajectory_bands\] (pass|flagged): 90% posterior predictive bands cover \d+% \(G=16\), \d+% \(G=4\)", out), out
    band_table = out.split("[ppc_trajectory_bands]", 1)[1].split("[ppc_residual_autocorrelation]", 1)[0]
    assert "coverage" in band_table and re.search(r"tiny-gpt2\s+16\s+6\s+\d+\s+0\.\d+", band_table), band_table
    assert re.search(r"\n\s+4\s+2\s+\d+\s+0\.\d+", band_table), band_table
    # the other two checks, each with its verdict
    assert re.search(r"\[ppc_residual_autocorrelation\] (pass|flagged|not assessable): Residual lag-1", out), out
    assert re.search(r"\[stationary_variance\] not assessable: Not assessable for an i\.i\.d\. fit", out), out
    # the saved fit's own warnings, as every verb that loads a fit gives them
    assert f"bayes-grpo ppc: warning: {TINY}: Residual lag-1 autocorrelation" in captured.err


def test_ppc_json_parses_and_gives_each_check_the_fits_warnings_and_the_figures_written(tmp_path, capsys):
    figures = tmp_path / "figs"
    assert main(["ppc", str(TINY), "--json", "--figures", str(figures)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["posterior"] == str(TINY) and out["runs"] is None
    assert any("Residual lag-1 autocorrelation" in w for w in out["posterior_warnings"]), out["posterior_warnings"]
    results = {r["name"]: r for r in out["results"]}
    assert list(results) == ["ppc_trajectory_bands", "ppc_residual_autocorrelation", "stationary_variance"]
    bands = results["ppc_trajectory_bands"]
    assert {row["G"]: row["n_runs"] for row in bands["table"]} == {16: 6, 4: 2}
    assert all(0.0 <= row["coverage"] <= 1.0 for row in bands["table"])
    # one PNG per LLM and G, named after its figure, listed beside its check
    assert sorted(Path(f).name for f in bands["figures"]) == ["tiny-gpt2_G16_bands.png", "tiny-gpt2_G4_bands.png"]
    assert all(Path(f).read_bytes().startswith(b"\x89PNG") for f in bands["figures"])
    assert results["stationary_variance"]["figures"] == []
    # a second run refuses to replace them without --overwrite
    assert main(["ppc", str(TINY), "--json", "--figures", str(figures)]) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err


def test_ppc_runs_checks_the_runs_of_that_run_set_and_names_it_for_runs_of_another_llm(tmp_path, capsys):
    from bayes_grpo.model.core import as_fitted_model
    from bayes_grpo.runset import save_runset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the fit's own (the verb's tests read them)
        fitted, _ = as_fitted_model(TINY)
    g4 = fitted.runset.isel(run=[i for i, g in enumerate(fitted.runset["group_size"].values) if g == 4])
    save_runset(g4, tmp_path / "g4.nc")
    assert main(["ppc", str(TINY), "--runs", str(tmp_path / "g4.nc"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == str(tmp_path / "g4.nc")
    assert [(row["G"], row["n_runs"]) for row in out["results"][0]["table"]] == [(4, 2)]
    # runs of an LLM the fit does not know: an error naming the file, the run and the LLM (it was
    # a ZeroDivisionError traceback for this bounded fit)
    save_runset(g4.assign_coords(model=("run", ["other", "other"])), tmp_path / "other.nc")
    assert main(["ppc", str(TINY), "--runs", str(tmp_path / "other.nc")]) == 2
    err = capsys.readouterr().err
    assert f"bayes-grpo ppc: error: {tmp_path / 'other.nc'}: run g4_p32_lr0.001_k1_adamw_s0: LLM 'other' is not one of the fit's ('tiny-gpt2')" in err, err


@pytest.mark.parametrize("kind", ["missing", "not netcdf"])
def test_a_bad_posterior_path_is_an_error_naming_the_file(tmp_path, capsys, kind):
    path = tmp_path / "fit.nc"
    if kind == "not netcdf":
        path.write_text("not a fit")
    assert main(["ppc", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayes-grpo ppc: error: ") and str(path) in err, err
    assert "Traceback" not in err


def _stubbed_fit(monkeypatch, calls):
    """A stand-in saved fit and checks: ``calls`` receives each stage's keyword arguments."""
    import bayes_grpo.checks.invariance as invariance
    import bayes_grpo.checks.ppc as ppc
    import bayes_grpo.model.core as core

    fit = SimpleNamespace(
        runset="the fitted runs",
        parameterisation="mechanistic",
        likelihood="state_space",
        model_config={"hyperparameter_defaults": {"momentum": 0.9}},
        sampler_config={"draws": 1000, "tune": 800, "chains": 4},
        reward_bounds=(0.0, 1.0),
    )
    # the real model's choice of the refit's settings, from the stand-in's attributes
    fit.refit_settings = functools.partial(core.GRPODynamicsModel.refit_settings, fit)
    monkeypatch.setattr(core, "as_fitted_model", lambda path: (fit, ["a warning of the fit"]))
    def fake_ppc(fitted, runset=None, **kw):
        calls["ppc"] = kw
        return []

    monkeypatch.setattr(ppc, "ppc_checks", fake_ppc)

    def fake_logo(runset, **kw):
        calls["leave_one_g_out"] = (runset, kw)
        return CheckResult("leave_one_g_out", True, "stub leave one G out")

    monkeypatch.setattr(invariance, "leave_one_g_out", fake_logo)
    return fit


def test_leave_one_g_out_refits_with_the_fits_own_model_and_sampler_settings(tmp_path, monkeypatch, capsys):
    calls: dict = {}
    fit = _stubbed_fit(monkeypatch, calls)
    assert main(["ppc", str(tmp_path / "fit.nc"), "--leave-one-g-out", "--draws", "300", "--seed", "3"]) == 0
    runset, kw = calls["leave_one_g_out"]
    assert runset == "the fitted runs"
    assert kw["model_config"] is fit.model_config and kw["reward_bounds"] == (0.0, 1.0)
    assert (kw["parameterisation"], kw["likelihood"]) == ("mechanistic", "state_space")
    # --draws given, the others the fit's own
    assert (kw["draws"], kw["tune"], kw["chains"], kw["random_seed"]) == (300, 800, 4, 3)
    assert calls["ppc"] == {"seed": 3}
    assert "[leave_one_g_out] pass: stub leave one G out" in capsys.readouterr().out
    # its fits say what they fit on stderr, as `invariance`'s do, not under --no-progress or --json
    kw["progress"]("m: fit 1 of 2")
    assert capsys.readouterr().err == "bayes-grpo ppc: m: fit 1 of 2\n"
    for quiet in ("--no-progress", "--json"):
        assert main(["ppc", str(tmp_path / "fit.nc"), "--leave-one-g-out", quiet]) == 0
        assert calls["leave_one_g_out"][1]["progress"] is None, quiet


def test_sampler_settings_without_leave_one_g_out_are_named_as_unused(tmp_path, monkeypatch, capsys):
    calls: dict = {}
    _stubbed_fit(monkeypatch, calls)
    assert main(["ppc", str(tmp_path / "fit.nc"), "--draws", "300", "--chains", "1"]) == 0
    err = capsys.readouterr().err
    assert "bayes-grpo ppc: warning: --draws, --chains set the fits of --leave-one-g-out, which was not asked: not used" in err
    assert "leave_one_g_out" not in calls


def test_a_figures_folder_that_is_a_file_is_refused_before_the_fit_is_read(tmp_path, monkeypatch, capsys):
    import bayes_grpo.model.core as core

    monkeypatch.setattr(core, "as_fitted_model", lambda path: pytest.fail("the fit was read"))
    (tmp_path / "figs").write_text("a file")
    assert main(["ppc", str(TINY), "--figures", str(tmp_path / "figs")]) == 2
    assert f"bayes-grpo ppc: error: {tmp_path / 'figs'}: --figures is a file; give a folder" in capsys.readouterr().err
