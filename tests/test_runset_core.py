"""The run-set data contract: construction, validation and a lossless netCDF round trip."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayes_grpo.runset import (
    RUN_COORDS,
    RunSetError,
    load_runset,
    make_runset,
    runset_warnings,
    save_runset,
)


def _frames():
    a = pd.DataFrame({"reward": [0.1, 0.2, 0.4], "kl": [0.0, 0.1, 0.2]}, index=[1, 2, 3])
    b = pd.DataFrame({"reward": [0.0, 0.5], "entropy": [2.0, 1.5]}, index=[2, 4])
    return {"a": a, "b": b}


def test_runs_of_different_length_are_padded_with_nan_on_the_union_of_steps():
    ds = make_runset(_frames(), {"a": {"group_size": 4, "model": "m"}, "b": {"group_size": 16}})
    assert ds.sizes == {"run": 2, "step": 4}
    assert list(ds.step.values) == [1, 2, 3, 4]
    assert np.isnan(ds.reward.sel(run="b", step=1))
    assert ds.entropy.sel(run="b", step=4) == 1.5
    assert ds.group_size.values.tolist() == [4.0, 16.0]
    assert ds.model.values.tolist() == ["m", ""]
    assert set(RUN_COORDS) <= set(ds.coords)


def test_netcdf_round_trip_keeps_every_coordinate_and_attribute(tmp_path):
    ds = make_runset(_frames(), {"a": {"learning_rate": 1e-3, "momentum_convention": "ema"}}, warnings={"a": ["x"]})
    path = save_runset(ds, tmp_path / "runs.nc")
    back = load_runset(path)
    xr.testing.assert_identical(ds, back)
    assert runset_warnings(back) == {"a": ["x"]}


def test_save_runset_refuses_an_existing_file_unless_told_to_overwrite(tmp_path):
    # the Python writers replaced an existing file by default while the CLI refused one
    ds = make_runset(_frames())
    path = tmp_path / "runs.nc"
    path.write_bytes(b"the user's file")
    with pytest.raises(FileExistsError, match="runs.nc: already exists"):
        save_runset(ds, path)
    assert path.read_bytes() == b"the user's file"
    xr.testing.assert_identical(load_runset(save_runset(ds, path, overwrite=True)), ds)


def test_missing_reward_names_the_run_and_the_metrics_found():
    with pytest.raises(RunSetError, match=r"run 'a'.*\['kl'\]"):
        make_runset({"a": pd.DataFrame({"kl": [1.0]}, index=[1])})


def test_unknown_coordinate_is_rejected():
    with pytest.raises(RunSetError, match="unknown run coordinates"):
        make_runset(_frames(), {"a": {"G": 4}})


def test_written_files_get_the_umask_mode_not_the_temporary_0600(tmp_path):
    import os

    from bayes_grpo._io import write_text_atomic

    old = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "x.txt", "hello")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert path.read_text() == "hello"


def test_a_writer_that_must_not_overwrite_refuses_a_file_made_during_the_write(tmp_path, monkeypatch):
    # atomic_path(overwrite=False) checked the path before writing, then os.replace'd the
    # result onto it: a file made there in between was replaced
    import errno
    import os

    from bayes_grpo._io import write_atomic

    dest = tmp_path / "out.nc"

    def slow_writer(tmp):
        tmp.write_text("ours")
        dest.write_text("theirs")  # another process wins the race

    with pytest.raises(FileExistsError, match="out.nc: appeared while"):
        write_atomic(dest, slow_writer, overwrite=False)
    assert dest.read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["out.nc"]  # no temporary file left behind
    assert write_atomic(tmp_path / "new.txt", lambda tmp: tmp.write_text("x"), overwrite=False).read_text() == "x"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    def no_hard_links(src, dst):  # FAT, some network mounts
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_hard_links)
    dest.unlink()
    with pytest.raises(FileExistsError, match="out.nc: appeared while"):
        write_atomic(dest, slow_writer, overwrite=False)
    assert dest.read_text() == "theirs"
    written = write_atomic(tmp_path / "fallback.txt", lambda tmp: tmp.write_text("y"), overwrite=False)
    assert written.read_text() == "y"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fallback.txt", "new.txt", "out.nc"]


def test_combined_run_sets_keep_every_runs_truth_and_name_what_they_drop():
    # concat_runsets dropped `truth` silently (xarray's drop_conflicts) once the inputs' differed
    import json
    import warnings

    from bayes_grpo.dynamics.simulate import simulate_sde_runset, truth_frame
    from bayes_grpo.runset import concat_runsets

    model = {"m": {"stiffness": 400.0, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 1e-12}}
    kw = dict(models=model, learning_rates=(1e-4,), n_seeds=1, n_steps=30)
    a = simulate_sde_runset(group_sizes=(4,), random_seed=1, **kw)
    b = simulate_sde_runset(group_sizes=(16,), random_seed=2, **kw)
    with pytest.warns(UserWarning, match="disagree on") as record:
        both = concat_runsets([a, b])
    message = str(record[0].message)
    assert "truth.settings.group_sizes" in message and "truth.settings.random_seed" in message
    truth = truth_frame(both)
    assert truth.index.tolist() == [*a.run.values, *b.run.values]
    assert truth["plateau"].tolist() == [*truth_frame(a)["plateau"], *truth_frame(b)["plateau"]]
    settings = json.loads(both.attrs["truth"])["settings"]
    assert settings["momentum"] == 0.9 and "random_seed" not in settings
    # run sets that agree on their attributes combine without a word
    c = a.assign_coords(run=["other"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = concat_runsets([a, c])
    assert same.attrs["truth"] == a.attrs["truth"]


def test_combined_ingests_keep_each_runs_provenance_and_name_a_setting_they_differ_on():
    import json
    from pathlib import Path

    from bayes_grpo.runset import concat_runsets
    from bayes_grpo.runset.ingest import INGEST_ATTR, load_runs, runset_summary

    tiny = Path(__file__).resolve().parents[1] / "data" / "tiny"
    a = load_runs([tiny / "g4_p8_lr0.001_k1_adamw_s0"], min_points=10)
    b = load_runs([tiny / "g16_p8_lr0.001_k1_adamw_s0"], min_points=5)
    with pytest.warns(UserWarning, match="disagree on min_points;"):
        both = concat_runsets([a, b])
    facts = json.loads(both.attrs[INGEST_ATTR])
    assert facts == json.loads(a.attrs[INGEST_ATTR]) | json.loads(b.attrs[INGEST_ATTR])
    assert "min_points" not in both.attrs
    summary = runset_summary(both)
    assert summary["reward_source"].tolist() == ["reward", "reward"]


def test_a_folder_or_a_training_log_given_as_a_run_set_says_to_ingest_it_first(tmp_path):
    # `bayes-grpo fit data/tiny` printed h5py's "Unable to synchronously open file (file read
    # failed: ... errno = 21, error message = 'Is a directory' ...)"
    from bayes_grpo.runset import RunSetError

    with pytest.raises(RunSetError, match=r"is a folder, not a run-set file; .*bayes-grpo ingest"):
        load_runset(tmp_path)
    log = tmp_path / "trainer_state.json"
    log.write_text('{"log_history": []}')
    with pytest.raises(RunSetError, match=r"not a netCDF run set \(a training log\?\); .*ingest"):
        load_runset(log)
    broken = tmp_path / "broken.nc"
    broken.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)  # HDF5 signature, truncated file
    with pytest.raises(RunSetError, match="not a readable netCDF run set"):
        load_runset(broken)


def test_a_run_set_saved_before_completions_per_step_joined_the_contract_still_loads(tmp_path):
    # the coordinate was added after schema version 1: an older file lacks it and must read
    # as "unknown", not be refused as breaking the contract
    from bayes_grpo.runset import load_runset, make_runset, save_runset

    ds = make_runset({"a": pd.DataFrame({"reward": [0.1, 0.2, 0.3]}, index=[1, 2, 3])}, {})
    old = ds.drop_vars("completions_per_step")
    path = tmp_path / "old.nc"
    old.to_netcdf(path, engine="h5netcdf")
    assert "completions_per_step" not in xr.open_dataset(path, engine="h5netcdf").coords
    back = load_runset(path)
    assert np.isnan(back["completions_per_step"].values).all()
    save_runset(back, tmp_path / "again.nc")


def test_a_fitted_model_given_as_a_run_set_is_named_as_such(tmp_path, capsys):
    # `bayes-grpo invariance models/fit.nc` (or compare, diagnose, forecast) died with
    # KeyError "No variable named 'run'" from load_runset's coordinate conversion
    import arviz as az

    from bayes_grpo.cli import main
    from bayes_grpo.runset import RunSetError

    path = tmp_path / "fit.nc"
    az.from_dict(posterior={"zeta": np.ones((1, 5))}).to_netcdf(str(path), engine="h5netcdf")
    with pytest.raises(RunSetError, match=r"fit.nc: run set lacks dims .*a fitted model"):
        load_runset(path)
    assert main(["invariance", str(path)]) == 2
    assert "it is a fitted model (a posterior saved by `bayes-grpo fit`)" in capsys.readouterr().err


@pytest.mark.parametrize("attrs, kind", [({"kind": "prediction"}, "prediction"), ({"upto_step": 30.0}, "forecast")])
def test_a_prediction_or_forecast_given_as_a_run_set_is_named_as_such(tmp_path, attrs, kind):
    # `bayes-grpo ingest pred.nc` (or fit) said only "run set lacks dims ['run']"
    from bayes_grpo.runset import RunSetError

    path = tmp_path / "pred.nc"
    xr.Dataset({"mean_mean": ("step", np.zeros(3))}, attrs=attrs).to_netcdf(path, engine="h5netcdf")
    with pytest.raises(RunSetError, match=rf"pred.nc: run set lacks dims .*it is a {kind} \(written by `bayes-grpo"):
        load_runset(path)


def test_values_a_run_set_cannot_keep_are_said_not_silently_made_missing():
    # make_runset turned +-inf and text rewards into NaN, which fit, compare and diagnose read
    # as "not logged"; the ingest said so for its own logs, a run set built in Python did not
    from bayes_grpo.runset import make_runset, runset_warnings

    frame = pd.DataFrame({"reward": [0.1, np.inf, 0.3, "x", -np.inf], "kl": [0.0] * 5}, index=[1, 2, 3, 4, 5])
    with pytest.warns(UserWarning) as caught:
        ds = make_runset({"a": frame, "b": pd.DataFrame({"reward": [0.1, 0.2]}, index=[1, 2])})
    said = " ".join(str(w.message) for w in caught)
    assert "run 'a': reward: 1 value that is not a number (e.g. 'x') kept as NaN" in said
    assert "run 'a': reward: 2 infinite values (first at step 2) kept as NaN" in said
    assert "'b'" not in said
    notes = runset_warnings(ds)
    assert len(notes["a"]) == 2 and "b" not in notes
    assert np.isnan(ds["reward"].sel(run="a").values[[1, 3, 4]]).all()


def test_a_group_size_reads_in_labels_as_given_and_unknown_as_a_question_mark():
    from bayes_grpo.runset.schema import group_size_text

    assert [group_size_text(g) for g in (4.0, 4.5, 16, float("nan"))] == ["4", "4.5", "16", "?"]


# ------------------------------------------------------------------ a run set of no run


def _no_runs():
    from bayes_grpo.diagnostics.cases import simulated_case

    # what a filter that matched no run leaves (it can be saved and read back)
    return simulated_case("healthy", n_steps=30).isel(run=slice(0, 0))


def test_every_stage_that_works_on_runs_refuses_a_run_set_of_no_run_in_its_own_words(tmp_path):
    # a fit said "every run has a constant reward ()", the law comparison died in a
    # ZeroDivisionError, the diagnostics returned [] and the G-invariance test "no model was
    # run at two or more group sizes ()", the predictive checks "runs too short", the report a
    # KeyError traceback
    from bayes_grpo.checks.invariance import invariance_check
    from bayes_grpo.checks.ppc import ppc_checks
    from bayes_grpo.diagnostics import diagnose
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.predict.compare import compare_laws
    from bayes_grpo.report.build import report_from_posterior

    empty = _no_runs()
    tiny = "models/tiny.nc"
    calls = {
        "fit": lambda: GRPODynamicsModel().fit(empty, draws=10, tune=10, chains=1),
        "compare": lambda: compare_laws(empty, draws=10, tune=10, chains=1),
        "diagnose": lambda: diagnose(empty),
        "test": lambda: invariance_check(empty, draws=10, tune=10),
        "check": lambda: ppc_checks(GRPODynamicsModel.load(tiny), empty),
        "report on": lambda: report_from_posterior(tiny, tmp_path / "r.html", runset=empty),
    }
    for doing, call in calls.items():
        with pytest.raises(RunSetError, match=f"the run set holds no runs: nothing to {doing}$"):
            call()
    assert not (tmp_path / "r.html").exists()


def test_diagnose_refuses_a_selection_of_no_run_rather_than_answering_nothing():
    from bayes_grpo.diagnostics import diagnose
    from bayes_grpo.diagnostics.cases import simulated_case

    with pytest.raises(RunSetError, match=r"run=\[\] names no run: nothing to diagnose"):
        diagnose(simulated_case("healthy", n_steps=30), run=[])


@pytest.mark.parametrize(
    "argv",
    [
        ["fit", "{runs}", "-o", "{tmp}/fit.nc", "--draws", "10", "--tune", "10", "--chains", "1"],
        ["compare", "{runs}", "--draws", "10", "--tune", "10"],
        ["invariance", "{runs}"],
        ["ppc", "models/tiny.nc", "--runs", "{runs}"],
        ["report", "models/tiny.nc", "--runs", "{runs}", "-o", "{tmp}/r.html"],
    ],
    ids=lambda argv: argv[0],
)
def test_the_command_line_names_the_run_set_file_of_no_run_and_shows_no_traceback(argv, tmp_path, capsys):
    from bayes_grpo.cli import main

    runs = save_runset(_no_runs(), tmp_path / "empty.nc")
    args = [a.format(runs=runs, tmp=tmp_path) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"error: {runs}: the run set holds no runs: nothing to" in err
    assert "Traceback" not in err


def test_a_path_given_where_the_python_api_takes_a_run_set_says_how_to_read_it(tmp_path):
    # fit("runs.nc") died in "'str' object has no attribute 'attrs'", diagnose in "... 'dims'",
    # compare_laws and forecast_in_runset in "string indices must be integers"
    from bayes_grpo.checks.invariance import invariance_check
    from bayes_grpo.checks.ppc import ppc_checks
    from bayes_grpo.diagnostics import diagnose
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.predict import forecast_in_runset
    from bayes_grpo.predict.compare import compare_laws
    from bayes_grpo.report.build import report_from_posterior

    path = str(tmp_path / "runs.nc")
    calls = [
        lambda: GRPODynamicsModel().fit(path, draws=10, tune=10, chains=1),
        lambda: compare_laws(path, draws=10, tune=10, chains=1),
        lambda: diagnose(path),
        lambda: forecast_in_runset(path, "r0", 20),
        lambda: invariance_check(path, draws=10, tune=10),
        lambda: ppc_checks(GRPODynamicsModel.load("models/tiny.nc"), path),
        lambda: report_from_posterior("models/tiny.nc", tmp_path / "r.html", runset=path),
    ]
    words = (
        rf"expected a run set \(an xarray.Dataset\), got str '{path}': read a saved run set with "
        r"bayes_grpo.runset.load_runset\(path\), logs with bayes_grpo.runset.ingest.load_runs"
    )
    for call in calls:
        with pytest.raises(TypeError, match=words):
            call()
    with pytest.raises(TypeError, match="got DataFrame: read a saved run set"):
        diagnose(pd.DataFrame({"reward": [0.1, 0.2]}))
