"""Bad input gets a clear error or warning naming the file, the run and the problem; nothing is dropped silently."""

import json

import numpy as np
import pytest

from bayes_grpo.runset import RunSetError, run_coords, runset_warnings
from bayes_grpo.runset.ingest import INGEST_ATTR, load_runs, rejected_runs, runset_summary
from bayes_grpo.runset.loaders import LogFormatError

N = 12


def _csv(path, rows, header="step,reward,kl"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header] + [",".join(map(str, r)) for r in rows]))
    return path


def _good(path, n=N):
    return _csv(path, [(s, 0.1 * s, 0.01) for s in range(n)])


def _state(path, n=N):
    path.parent.mkdir(parents=True, exist_ok=True)
    history = [{"step": s, "reward": 0.05 * s, "loss": 0.0} for s in range(1, n + 1)]
    path.write_text(json.dumps({"log_history": history}))
    return path


def _ingest(*paths, **kw):
    with pytest.warns(UserWarning, match="not ingested"):
        return load_runs(list(paths), **kw)


def test_truncated_json_is_rejected_naming_the_file_and_other_runs_are_kept(tmp_path):
    good = _good(tmp_path / "good.csv")
    bad = tmp_path / "bad" / "trainer_state.json"
    _state(bad)
    bad.write_text(bad.read_text()[:-40])  # cut mid-file, as a crashed writer leaves it
    ds = _ingest(good, bad)
    assert list(ds.run.values) == ["good"]
    ((source, info),) = rejected_runs(ds).items()
    assert (
        str(bad) in source and "unreadable JSON" in info["reason"] and "truncated" in info["reason"]
    )
    summary = runset_summary(ds)
    assert (
        summary.loc[summary.status == "rejected", "reason"]
        .str.contains(str(bad), regex=False)
        .all()
    )


def test_strict_mode_stops_at_the_first_bad_run(tmp_path):
    bad = tmp_path / "trainer_state.json"
    bad.write_text('{"log_history": [{"step": 1, "rew')
    with pytest.raises(RunSetError, match=r"trainer_state\.json.*unreadable JSON"):
        load_runs([_good(tmp_path / "g.csv"), bad], on_error="raise")


def test_a_log_without_any_reward_metric_lists_the_metrics_found(tmp_path):
    path = _csv(
        tmp_path / "noreward.csv", [(s, 0.1, 2.0) for s in range(N)], header="step,kl,grad_norm"
    )
    with pytest.raises(
        RunSetError, match=r"noreward\.csv.*no reward metric.*\['grad_norm', 'kl'\]"
    ):
        load_runs([path])


def test_non_numeric_values_become_nan_with_a_warning_naming_metric_step_and_example(tmp_path):
    rows = [(s, 0.1 * s, 0.01) for s in range(N)]
    rows[3] = (3, "oops", 0.01)
    ds = load_runs([_csv(tmp_path / "r.csv", rows)])
    assert np.isnan(ds.reward.sel(run="r", step=3))
    msg = " ".join(runset_warnings(ds)["r"])
    assert "r.csv" in msg and "'reward'" in msg and "'oops'" in msg and "step 3" in msg


def test_nan_and_inf_are_kept_as_nan_and_counted(tmp_path):
    rows = [(s, 0.1 * s) for s in range(N)]
    rows[2] = (2, "nan")
    rows[5] = (5, "inf")
    ds = load_runs([_csv(tmp_path / "r.csv", rows, header="step,reward")])
    assert np.isnan(ds.reward.sel(run="r", step=[2, 5])).all()
    assert 2 in ds.step.values and 5 in ds.step.values
    summary = runset_summary(ds)
    assert summary.loc["r", "n_nonfinite_reward"] == 2
    assert summary.loc["r", "n_steps"] == N - 2
    assert any("2 NaN/inf" in w for w in runset_warnings(ds)["r"])
    assert not any("non-numeric" in w for w in runset_warnings(ds)["r"])  # NaN is a number


def test_an_infinite_side_quantity_is_kept_as_nan_with_a_warning_saying_where(tmp_path):
    # HF's Trainer writes an overflowed grad norm as Infinity in trainer_state.json; ingest made
    # it NaN ("not logged") without a word, and the instability diagnostic then read a run whose
    # grad norm overflowed from step 20 on as one whose grad norm was not logged there
    history = [
        {"step": s, "reward": 0.1 * s, "grad_norm": float("inf") if s >= 20 else 0.3}
        for s in range(1, 31)
    ]
    path = tmp_path / "run" / "trainer_state.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"global_step": 30, "log_history": history}))  # Infinity
    ds = load_runs([path.parent])
    (run,) = [str(r) for r in ds.run.values]
    assert np.isnan(ds.grad_norm.sel(run=run, step=[20, 30])).all()
    assert any(
        "grad_norm: 11 infinite values (first at step 20) kept as NaN" in w
        for w in runset_warnings(ds).get(run, [])
    ), runset_warnings(ds)


def test_duplicated_steps_from_a_resumed_run_keep_the_last_value_and_are_counted(tmp_path):
    first = [(s, 0.1, 0.0) for s in range(0, 8)]
    resumed = [(s, 0.9, 0.0) for s in range(5, 15)]  # restarted from the step-5 checkpoint
    ds = load_runs([_csv(tmp_path / "resumed.csv", first + resumed)])
    r = ds.reward.sel(run="resumed")
    assert (
        float(r.sel(step=4)) == 0.1 and float(r.sel(step=5)) == 0.9 and float(r.sel(step=7)) == 0.9
    )
    assert runset_summary(ds).loc["resumed", "n_duplicate_steps"] == 3
    assert any("3 steps logged more than once" in w for w in runset_warnings(ds)["resumed"])
    assert any("a resumed run?" in w for w in runset_warnings(ds)["resumed"])


def test_steps_logged_twice_in_a_row_are_said_to_be_so_not_called_a_resumed_run(tmp_path):
    # garg's off_policy_full_sweep CSV logs its train metrics twice a step (rows of step 0, 0,
    # 1, 1, ...: two log calls per optimizer step; the steps never go back) and ingest called
    # each "logged more than once (a resumed run?)"
    rows = [(s, 0.1 * s, k) for s in range(N) for k in (0.01, 0.02)]
    ds = load_runs([_csv(tmp_path / "twice.csv", rows)])
    told = runset_warnings(ds)["twice"]
    note = [w for w in told if "logged more than once" in w]
    assert note and f"{N} steps logged more than once" in note[0], told
    assert "2 rows with the same step, one after the other" in note[0] and "resumed" not in note[0], note
    assert "'reward'" in note[0] and "'kl'" in note[0], note
    assert float(ds.kl.sel(run="twice", step=3)) == 0.02  # the last value logged, as before


def test_wandb_bookkeeping_columns_of_an_evaluation_row_are_no_repeated_step(tmp_path):
    # a wandb history export: the evaluation row shares train/global_step with the training row
    # but has its own _step, _runtime and _timestamp
    header = "_step,_runtime,_timestamp,train/global_step,train/reward,train/epoch,eval/reward"
    rows = []
    for s in range(1, N + 1):
        rows.append((len(rows), s, 1.7e9 + s, s, 0.05 * s, s / N, ""))
        if s % 4 == 0:
            rows.append((len(rows), s + 0.5, 1.7e9 + s + 0.5, s, "", s / N, 0.04 * s))
    ds = load_runs([_csv(tmp_path / "wandb_run.csv", rows, header=header)])
    assert float(ds.eval_reward.sel(run="wandb_run", step=8)) == pytest.approx(0.32)
    assert runset_summary(ds).loc["wandb_run", "n_duplicate_steps"] == 0
    assert not any("more than once" in w for w in runset_warnings(ds).get("wandb_run", []))


def test_steps_going_backwards_are_reported_and_ordered(tmp_path):
    rows = [(s, 0.1 * s, 0.0) for s in (0, 1, 2, 3, 9, 10, 11, 4, 5, 6, 7, 8)]
    ds = load_runs([_csv(tmp_path / "shuffled.csv", rows)])
    assert list(ds.step.values) == list(range(12))
    np.testing.assert_allclose(ds.reward.sel(run="shuffled").values, 0.1 * np.arange(12))
    msgs = runset_warnings(ds)["shuffled"]
    assert any("backwards 1 time" in w and "step 4 logged after step 11" in w for w in msgs)
    assert json.loads(ds.attrs[INGEST_ATTR])["shuffled"]["n_backward_steps"] == 1


def test_runs_shorter_than_min_points_are_rejected_with_the_reason(tmp_path):
    short = _good(tmp_path / "short.csv", n=6)
    ds = _ingest(_good(tmp_path / "long.csv"), short)
    reason = rejected_runs(ds)[str(short)]["reason"]
    assert (
        "run 'short'" in reason
        and "only 6 finite reward values" in reason
        and "minimum of 10" in reason
        and "--min-points" in reason  # the way to let a short run in is named
    )
    assert list(load_runs([short], min_points=5).run.values) == ["short"]


def test_two_manifest_rows_with_the_same_run_id_are_an_error_naming_the_rows(tmp_path):
    _good(tmp_path / "a.csv")
    _good(tmp_path / "b.csv")
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,run\na.csv,same\nb.csv,same\n")
    with pytest.raises(
        LogFormatError, match=r"m\.csv: run id used by more than one row: \{'same': \[1, 2\]\}"
    ):
        load_runs([], manifest=manifest)


@pytest.mark.parametrize(
    "rows",
    [
        "a.csv,one,4\na.csv,two,8\n",  # one log, two ids
        "a.csv,,4\nsub/../a.csv,,8\n",  # one log, spelt two ways
        "sweep.csv,one,4,x\nsweep.csv,two,8,x\n",  # one run of a multi-run file
    ],
)
def test_two_manifest_rows_about_one_run_are_an_error_naming_the_rows(tmp_path, rows):
    # the second row was dropped without a word: its id and its G=8 gone, the run kept G=4
    _good(tmp_path / "a.csv")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sweep.csv").write_text(
        "run_name,step,reward\n"
        + "".join(f"{name},{s},{0.1 * s}\n" for name in "xy" for s in range(N))
    )
    manifest = tmp_path / "m.csv"
    header = "path,run,group_size" + (",run_name" if "sweep" in rows else "")
    manifest.write_text(f"{header}\n{rows}")
    with pytest.raises(LogFormatError, match=r"m\.csv: rows 1 and 2 are both about the run .*csv"):
        load_runs([], manifest=manifest)
    # rows about two runs of one file are two runs
    manifest.write_text("path,run,group_size,run_name\nsweep.csv,one,4,x\nsweep.csv,two,8,y\n")
    assert sorted(load_runs([], manifest=manifest).run.values) == ["one", "two"]


@pytest.mark.parametrize("steps", ["abc", "-5", "0", "2.5"])
def test_a_manifest_logging_steps_that_is_no_stride_is_an_error_naming_the_row(tmp_path, steps):
    # 'abc' stopped the ingest with "could not convert string to float: 'abc'" (no file, no
    # row); -5 numbered a console log's dicts -5, -10 ...; 2.5 became 2 without a word
    _good(tmp_path / "a.csv")
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"path,run,logging_steps\na.csv,a,{steps}\n")
    with pytest.raises(
        LogFormatError,
        match=rf"m\.csv row 1: logging_steps must be a whole number >= 1, got '{steps}'",
    ):
        load_runs([], manifest=manifest)


def test_two_runs_that_would_get_the_same_id_are_told_apart(tmp_path):
    _good(tmp_path / "x" / "run.csv")
    _good(tmp_path / "y" / "run.csv")
    ds = load_runs([tmp_path / "x" / "run.csv", tmp_path / "y" / "run.csv"])
    assert sorted(ds.run.values) == ["x/run", "y/run"]


def test_the_states_of_two_checkpoints_of_one_run_are_named_by_their_checkpoints(tmp_path):
    # both were named by their whole absolute path, the second with '#2': the checkpoint
    # folders (generic parts) and the file names (both trainer_state.json) were all that differ
    early = _state(tmp_path / "qwen" / "checkpoint-5" / "trainer_state.json", n=N)
    late = _state(tmp_path / "qwen" / "checkpoint-10" / "trainer_state.json", n=N + 5)
    ds = load_runs([early, late])
    assert sorted(ds.run.values) == ["checkpoint-10", "checkpoint-5"]
    assert int(ds.reward.sel(run="checkpoint-10").notnull().sum()) == N + 5


def test_a_saved_run_set_given_to_load_runs_is_named_as_one(tmp_path):
    # the CLI re-reads a saved run set given to ingest; load_runs called it "not a recognised
    # log format", which sent a user looking for a format it lacked
    from bayes_grpo.runset import save_runset

    saved = save_runset(load_runs([_good(tmp_path / "a.csv")]), tmp_path / "runs.nc")
    with pytest.raises(RunSetError, match=r"runs\.nc: a netCDF file \(a saved run set\?\), not a log"):
        load_runs([saved], on_error="raise")


def test_the_same_file_given_twice_is_read_once(tmp_path):
    path = _good(tmp_path / "r.csv")
    assert list(load_runs([path, path, tmp_path]).run.values) == ["r"]


@pytest.mark.parametrize(
    "text",
    [
        "path;group_size;learning_rate\na.csv;4;1,5e-6\n",  # a spreadsheet's export
        "path,group_size,learning_rate\na.csv,4,1.5e-6,\n",  # rows ending with a comma
    ],
)
def test_a_manifest_is_read_as_a_csv_log_is(tmp_path, text):
    # the semicolon manifest was one column 'path;group_size;learning_rate' ("unknown
    # column"); the trailing comma made the path '4' ("path 4 does not exist")
    _good(tmp_path / "a.csv")
    manifest = tmp_path / "m.csv"
    manifest.write_text(text)
    coords = run_coords(load_runs([], manifest=manifest), "a")
    assert coords["group_size"] == 4 and coords["learning_rate"] == pytest.approx(1.5e-6)


@pytest.mark.parametrize("name", ["m.yaml", "m.csv"])
@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_a_manifest_is_read_in_the_encodings_a_log_is(tmp_path, name, encoding):
    # a YAML manifest written by Windows PowerShell 5 (Out-File: UTF-16 with a byte-order mark)
    # was "unreadable manifest ('utf-8' codec can't decode byte 0xff in position 0 ...)", where
    # a CSV manifest or a log of that encoding was read
    _good(tmp_path / "a.csv")
    manifest = tmp_path / name
    if name.endswith(".yaml"):
        text = "- path: a.csv\n  run: r1\n  group_size: 4\n"
    else:
        text = "path,run,group_size\na.csv,r1,4\n"
    manifest.write_text(text.replace("\n", "\r\n"), encoding=encoding)
    ds = load_runs([], manifest=manifest)
    assert list(ds.run.values) == ["r1"] and run_coords(ds, "r1")["group_size"] == 4


def test_manifest_rows_pointing_at_missing_paths_are_reported(tmp_path):
    _good(tmp_path / "there.csv")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "- {path: there.csv, group_size: 4}\n- {path: gone/trainer_state.json, run: lost}\n"
    )
    ds = _ingest(manifest=manifest)
    assert list(ds.run.values) == ["there"]
    info = rejected_runs(ds)[f"{manifest} row 2"]
    assert info["run"] == "lost" and "does not exist" in info["reason"] and "gone" in info["reason"]


def test_manifest_with_an_unknown_column_names_the_row(tmp_path):
    _good(tmp_path / "a.csv")
    (tmp_path / "m.csv").write_text("path,group_szie\na.csv,4\n")
    with pytest.raises(LogFormatError, match=r"m\.csv row 1: unknown column \['group_szie'\]"):
        load_runs([], manifest=tmp_path / "m.csv")


def test_non_integer_steps_reject_the_run(tmp_path):
    path = _csv(tmp_path / "frac.csv", [(s + 0.5, 0.1, 0.0) for s in range(N)])
    with pytest.raises(RunSetError, match=r"frac\.csv.*steps must be integers"):
        load_runs([path])


def test_truncated_last_jsonl_line_is_skipped_with_a_note(tmp_path):
    path = tmp_path / "m.jsonl"
    lines = [json.dumps({"step": s, "reward": 0.1 * s}) for s in range(N)]
    path.write_text("\n".join(lines) + '\n{"step": 12, "rew')
    ds = load_runs([path])
    assert ds.sizes["step"] == N
    assert any("last line (13) is truncated JSON" in w for w in runset_warnings(ds)["m"])


@pytest.mark.parametrize("cut", ["last", "inside"])
def test_a_jsonl_files_unreadable_lines_are_said_once_with_its_name(tmp_path, cut):
    # the loader's note began with the file's name and the run's warning with its label again:
    # "<path>/m.jsonl: m.jsonl: last line (13) is truncated JSON; skipped"
    path = tmp_path / "m.jsonl"
    lines = [json.dumps({"step": s, "reward": 0.1 * s}) for s in range(N)]
    if cut == "inside":
        lines[3] = lines[3][:-5]
    path.write_text("\n".join(lines) + ("\n{\"step\": 12, \"rew" if cut == "last" else "\n"))
    ds = load_runs([path])
    said = [w for w in runset_warnings(ds)["m"] if "JSON" in w]
    expected = (
        f"{path}: last line (13) is truncated JSON; skipped"
        if cut == "last"
        else f"{path}: 1 unreadable JSON line skipped (lines [4])"
    )
    assert said == [expected]


def test_a_console_logs_metric_dict_cut_short_at_its_end_is_said(tmp_path):
    # a run still writing its stdout: the cut dict was left out without a word, where a JSONL
    # log's cut last line is named
    path = tmp_path / "grpo.log"
    lines = [
        f"{{'loss': 0.01, 'reward': {0.1 * s:.2f}, 'epoch': {s / 100:.2f}}}" for s in range(1, N + 1)
    ]
    path.write_text("\n".join([*lines, "{'loss': 0.01, 'rew"]))
    ds = load_runs([path])
    assert int(ds.reward.sel(run="grpo").notnull().sum()) == N
    assert any(
        "the last line ({'loss': 0.01, 'rew) is a metric dict cut short" in w
        for w in runset_warnings(ds)["grpo"]
    )
    path.write_text("\n".join([*lines, "Training finished {'a': 1}."]))  # no dict cut short
    assert not any("cut short" in w for w in runset_warnings(load_runs([path]))["grpo"])


def test_corrupt_tensorboard_file_is_rejected_not_fatal(tmp_path):
    bad = tmp_path / "tb" / "events.out.tfevents.123.host"
    bad.parent.mkdir()
    bad.write_bytes(b"\x00garbage" * 10)
    ds = _ingest(_good(tmp_path / "ok.csv"), bad)
    assert list(ds.run.values) == ["ok"]
    assert "events.out.tfevents.123.host" in next(iter(rejected_runs(ds)))


def test_a_path_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_runs([tmp_path / "nowhere"])


def test_when_every_run_is_bad_the_error_lists_each_reason(tmp_path):
    a = _good(tmp_path / "a.csv", n=3)
    b = _csv(tmp_path / "b.csv", [(s, 1.0) for s in range(N)], header="step,kl")
    with pytest.raises(
        RunSetError, match=r"no run could be ingested: .*a\.csv.*only 3.*b\.csv.*no reward metric"
    ):
        load_runs([a, b])


def test_bare_nan_and_inf_in_console_dicts_are_read_and_counted(tmp_path):
    lines = [repr({"loss": 0.1, "reward": 0.1 * s, "epoch": s / 100}) for s in range(N)]
    lines[4] = "{'loss': nan, 'reward': nan, 'epoch': 0.04}"
    lines[6] = "{'loss': 0.1, 'reward': -inf, 'epoch': 0.06}"
    path = tmp_path / "stdout.txt"
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert ds.sizes["step"] == N  # no dict lost
    assert runset_summary(ds)["n_nonfinite_reward"].iloc[0] == 2


def test_nan_logged_in_json_is_counted_and_null_means_not_logged(tmp_path):
    history = [{"step": s, "reward": 0.05 * s, "kl": None} for s in range(1, N + 1)]
    history[3]["reward"] = float("nan")  # json writes NaN, json reads it back as a float
    path = tmp_path / "run" / "trainer_state.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"log_history": history}))
    ds = load_runs([path])
    assert runset_summary(ds).loc["run", "n_nonfinite_reward"] == 1
    assert not any("non-numeric" in w for w in runset_warnings(ds)["run"])  # a NaN float is a number
    assert "kl" not in ds.data_vars  # null throughout: never logged


def test_hyperparameters_outside_their_range_are_left_unknown_with_a_warning(tmp_path):
    # a negative G or learning rate, a momentum >= 1 used to reach the run set (and the fit) as data
    _good(tmp_path / "r.csv")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "- {path: r.csv, run: r, group_size: -4, learning_rate: -1.0, momentum: 1.5, k_ref: -2,"
        " beta: 0.04, seed: 3}\n"
    )
    ds = load_runs([], manifest=manifest)
    for coord in ("group_size", "learning_rate", "momentum", "k_ref"):
        assert np.isnan(float(ds[coord].sel(run="r")))
    assert float(ds["beta"].sel(run="r")) == 0.04 and float(ds["seed"].sel(run="r")) == 3
    text = " ".join(runset_warnings(ds)["r"])
    assert "group_size = -4" in text and "momentum = 1.5" in text and "m.yaml row 1" in text
    assert "r.csv" in text and text.count("left unknown") == 4


def test_non_integer_steps_at_large_step_numbers_reject_the_run(tmp_path):
    # np.allclose's relative tolerance read 100000.3 as 100000 and dropped the "repeated" steps
    path = _csv(tmp_path / "late.csv", [(100000 + 0.3 * s, 0.1, 0.0) for s in range(N)])
    with pytest.raises(RunSetError, match=r"late\.csv.*steps must be integers \(found 100000\.3\)"):
        load_runs([path])


def test_float_steps_that_are_integers_are_kept(tmp_path):
    path = _csv(tmp_path / "f.csv", [(f"{s}.0", 0.1 * s, 0.0) for s in range(1000, 1000 + N)])
    ds = load_runs([path])
    assert list(ds.step.values) == list(range(1000, 1000 + N))


@pytest.mark.parametrize("text", ["[]", "[1, 2, 3]"])
def test_a_json_list_without_per_step_objects_is_rejected_not_fatal(tmp_path, text):
    # a folder's unrelated `results.json` holding [] raised KeyError('run_name') and stopped
    # the whole ingest
    bad = tmp_path / "results.json"
    bad.write_text(text)
    ds = _ingest(_good(tmp_path / "ok.csv"), bad)
    assert list(ds.run.values) == ["ok"]
    ((source, info),) = rejected_runs(ds).items()
    assert "results.json" in source and "no per-step objects" in info["reason"]


def test_a_json_integer_beyond_the_float_range_is_an_infinite_value_not_a_crash(tmp_path):
    # float(10**400) raised OverflowError out of the whole ingest
    path = tmp_path / "m.jsonl"
    lines = [json.dumps({"step": s, "reward": 0.1 * s}) for s in range(N)]
    lines[5] = f'{{"step": 5, "reward": {10**400}}}'
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert ds.sizes["step"] == N
    assert np.isnan(float(ds["reward"].sel(run="m", step=5)))
    assert runset_summary(ds)["n_nonfinite_reward"].iloc[0] == 1


def test_boolean_steps_are_no_step_numbers(tmp_path):
    # `"step": true` raised TypeError (numpy boolean subtract) out of the whole ingest
    path = tmp_path / "b.jsonl"
    path.write_text("\n".join(json.dumps({"step": bool(s % 2), "reward": 0.1}) for s in range(N)))
    with pytest.raises(RunSetError, match=r"b\.jsonl: no usable step numbers"):
        load_runs([path])


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_rows_of_a_multi_run_csv_with_an_empty_run_name_are_reported_not_dropped(tmp_path, layout):
    # pandas groupby left the unnamed rows out: 10 of 20 rows vanished and the ingest said "ok"
    if layout == "wide":
        rows = [("a", s, 0.1 * s) for s in range(N)] + [("", s, 0.05 * s) for s in range(N)]
        path = _csv(tmp_path / "runs.csv", rows, header="run,step,reward")
    else:
        rows = [("a", s, "reward", 0.1 * s) for s in range(N)]
        rows += [("", s, "reward", 0.05 * s) for s in range(N)]
        path = _csv(tmp_path / "runs.csv", rows, header="run_name,step,metric,value")
    ds = _ingest(path)
    assert list(ds.run.values) == ["a"]
    assert float(ds["reward"].isel(run=0).sel(step=N - 1)) == pytest.approx(0.1 * (N - 1))
    ((source, info),) = rejected_runs(ds).items()
    assert "runs.csv" in source
    assert f"{N} rows with an empty" in info["reason"]
    assert f"(lines {N + 2}, {N + 3}, " in info["reason"]
    assert "belong to none of the file's 1 run;" in info["reason"]


def test_a_run_column_left_empty_on_every_row_makes_the_file_one_run(tmp_path):
    path = _csv(tmp_path / "one.csv", [("", s, 0.1 * s) for s in range(N)], header="run,step,reward")
    ds = load_runs([path])
    assert list(ds.run.values) == ["one"] and ds.sizes["step"] == N
    assert not rejected_runs(ds)


def test_jsonl_records_without_a_run_name_beside_two_named_runs_are_reported(tmp_path):
    # a record without "run" made the old loader merge both runs into one (steps logged twice)
    lines = [json.dumps({"run": r, "step": s, "reward": 0.1 * s}) for r in "ab" for s in range(N)]
    lines.append(json.dumps({"step": N, "reward": 0.5}))
    path = tmp_path / "mix.jsonl"
    path.write_text("\n".join(lines))
    ds = _ingest(path)
    assert sorted(ds.run.values) == ["a", "b"]
    ((source, info),) = rejected_runs(ds).items()
    # one record in the singular (it said "1 record(s) ... (record number(s) 41) belong")
    assert "mix.jsonl" in source
    assert f"(record number {2 * N + 1}) belongs to none of the file's 2 runs;" in info["reason"]
    with pytest.raises(RunSetError, match=r"mix\.jsonl: 1 record with an empty 'run'"):
        load_runs([path], on_error="raise")


def test_a_jsonl_header_record_naming_the_run_keeps_the_step_records(tmp_path):
    path = tmp_path / "hdr.jsonl"
    lines = [json.dumps({"name": "my-run"})]
    lines += [json.dumps({"step": s, "reward": 0.1 * s}) for s in range(N)]
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert ds.sizes["step"] == N and not rejected_runs(ds)
    # the run is the one the header names (it was named after the file, 'hdr')
    assert any(
        "read as part of the file's one run 'my-run'" in w for w in runset_warnings(ds)["my-run"]
    )


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_file_of_one_named_run_is_named_by_it_in_every_format(tmp_path, kind):
    # a CSV with run_name 'my-run' on every row was the run 'my-run'; the same JSONL was the
    # run 'log' (its file), the name it logs dropped without a word
    path = tmp_path / f"log.{kind}"
    if kind == "csv":
        rows = ["run_name,step,reward", *(f"my-run,{s},{0.1 * s}" for s in range(N))]
    else:
        rows = [json.dumps({"run_name": "my-run", "step": s, "reward": 0.1 * s}) for s in range(N)]
    path.write_text("\n".join(rows))
    ds = load_runs([path])
    assert list(ds.run.values) == ["my-run"]
    assert json.loads(ds.attrs[INGEST_ATTR])["my-run"]["run_name"] == "my-run"


@pytest.mark.parametrize("sep", [",", ";"])
def test_rows_ending_with_a_separator_the_header_lacks_keep_their_columns(tmp_path, sep):
    # pandas took each row's first field for its index: 'step' held the rewards, 'reward' the
    # KL, and the run was rejected as "steps must be integers (found 0.1)"
    path = tmp_path / "trailing.csv"
    rows = [f"step{sep}reward{sep}kl", *(f"{s}{sep}{0.1 * s:.1f}{sep}0{sep}" for s in range(N))]
    path.write_text("\n".join(rows).replace(".", "," if sep == ";" else "."))
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="trailing").values, [0.1 * s for s in range(N)])
    np.testing.assert_allclose(ds.kl.sel(run="trailing").values, 0.0)
    assert list(ds.step.values) == list(range(N))
    assert any("end with a separator" in w for w in runset_warnings(ds)["trailing"])


def test_rows_with_values_in_fields_the_header_does_not_name_are_an_error_naming_the_file(
    tmp_path,
):
    path = tmp_path / "extra.csv"
    path.write_text("\n".join(["step,reward", *(f"{s},{0.1 * s},7" for s in range(N))]))
    with pytest.raises(RunSetError, match=r"extra\.csv: its rows have more fields than the 2"):
        load_runs([path], on_error="raise")


@pytest.mark.parametrize("column", ["value", "__step"])
def test_a_metric_named_like_the_readers_own_columns_is_read(tmp_path, column):
    # 'step,value' (a one-metric export) stopped the whole ingest, every other log with it,
    # with pandas' "value_name (value) cannot match an element in the DataFrame columns";
    # '__step' with "cannot insert __step, already exists": neither named the file
    path = tmp_path / "one.csv"
    path.write_text("\n".join([f"step,{column},kl", *(f"{s},{0.1 * s},0.01" for s in range(N))]))
    ds = load_runs([path], reward_key=column)
    np.testing.assert_allclose(ds.reward.sel(run="one").values, [0.1 * s for s in range(N)])
    np.testing.assert_allclose(ds.kl.sel(run="one").values, 0.01)
    # without the key it is a run without a reward, beside the others
    ds = load_runs([path, _good(tmp_path / "other.csv")])
    assert list(ds.run.values) == ["other"]
    assert "no reward metric" in rejected_runs(ds)[f"{path}"]["reason"]


def test_a_semicolon_export_with_decimal_commas_is_read_as_numbers_and_says_so(tmp_path):
    # spreadsheets in many locales write "0,25"; the run was rejected as "no numeric metrics"
    path = tmp_path / "semi.csv"
    rows = [f"{s};{0.1 * s:.2f};0,01".replace(".", ",") for s in range(N)]
    path.write_text("\n".join(["step;reward;kl", *rows]))
    ds = load_runs([path])
    np.testing.assert_allclose(ds["reward"].sel(run="semi").values, 0.1 * np.arange(N), atol=1e-9)
    assert any("written with a decimal comma" in w for w in runset_warnings(ds)["semi"])


def test_a_decimal_comma_in_a_run_name_is_kept_as_written(tmp_path):
    path = tmp_path / "semi.csv"
    rows = [f"lr 1,5;{s};{0.1 * s:.2f}".replace("0.", "0,") for s in range(N)]
    rows += [f"lr 2,5;{s};{0.1 * s:.2f}".replace("0.", "0,") for s in range(N)]
    path.write_text("\n".join(["run;step;reward", *rows]))
    ds = load_runs([path])
    assert sorted(ds.run.values) == ["lr 1,5", "lr 2,5"]


def test_steps_too_large_to_tell_apart_are_an_error_naming_the_run(tmp_path):
    # steps 2**70 + 0, 1, 2, ... wrapped in the int64 cast to one step: "only 1 finite reward"
    path = _csv(tmp_path / "big.csv", [(2**70 + s, 0.1 * s, 0.0) for s in range(N)])
    with pytest.raises(RunSetError, match=r"big\.csv: step .* is beyond 2\*\*53"):
        load_runs([path])


def test_a_run_folder_linked_into_the_scanned_folder_is_read(tmp_path):
    # runs kept on other storage and linked into an experiment folder were skipped without a word
    _good(tmp_path / "storage" / "run_a" / "metrics.csv")
    exp = tmp_path / "exp"
    _good(exp / "run_b" / "metrics.csv")
    (exp / "run_a").symlink_to(tmp_path / "storage" / "run_a", target_is_directory=True)
    (exp / "run_b" / "up").symlink_to(exp, target_is_directory=True)  # a loop is read once
    (exp / "latest").symlink_to(exp / "run_b", target_is_directory=True)  # a second way in
    ds = load_runs([exp])
    assert sorted(ds.run.values) == ["run_a", "run_b"]


def test_a_linked_run_folder_is_named_by_its_link_not_its_target(tmp_path):
    # runs/qwen-g8 -> /scratch/job_8812/output: the id came from the resolved path ('job_8812';
    # 'output' is generic), not from the name the user gave the run
    for job, name in (("job_8812", "qwen-g8"), ("job_8813", "qwen-g4")):
        _state(tmp_path / "scratch" / job / "output" / "trainer_state.json")
        runs = tmp_path / "runs"
        runs.mkdir(exist_ok=True)
        (runs / name).symlink_to(tmp_path / "scratch" / job / "output", target_is_directory=True)
    assert sorted(load_runs([tmp_path / "runs"]).run.values) == ["qwen-g4", "qwen-g8"]


@pytest.mark.parametrize("layout", ["jsonl", "json list", "trainer_state", "training_args"])
def test_a_byte_order_mark_before_json_is_read_as_utf8(tmp_path, layout):
    # Windows tools write UTF-8 with a byte-order mark: the JSONL file lost its first record as
    # "unreadable", a JSON list was no log, a trainer_state.json and a training config beside the
    # log were "corrupt"
    bom = "\ufeff"
    records = [{"step": s, "reward": 0.1 * s} for s in range(1, N + 1)]
    if layout == "jsonl":
        path = tmp_path / "m.jsonl"
        text = "\n".join(json.dumps(r) for r in records)
    elif layout == "json list":
        path, text = tmp_path / "m.json", json.dumps(records)
    elif layout == "trainer_state":
        path, text = tmp_path / "trainer_state.json", json.dumps({"log_history": records})
    else:
        path = _state(tmp_path / "run" / "trainer_state.json")
        text = path.read_text()
        args = {"num_generations": 8, "learning_rate": 1e-6}
        (path.parent / "training_args.json").write_text(bom + json.dumps(args), encoding="utf-8")
    path.write_text(bom + text, encoding="utf-8")
    ds = load_runs([path])
    (run,) = ds.run.values
    assert ds.reward.sel(run=run).dropna("step").sizes["step"] == N
    assert not any("unreadable" in w or "not read" in w for w in runset_warnings(ds).get(run, []))
    if layout == "training_args":
        assert float(ds.group_size.sel(run=run)) == 8


@pytest.mark.parametrize("layout", ["trainer_state", "console", "jsonl"])
def test_a_per_step_train_loss_is_a_metric_not_an_end_of_training_summary(tmp_path, layout):
    # train_loss is also a summary name of the HF Trainer; every entry that had it was dropped as
    # the summary (a trainer_state or console log: "no per-step entries", the reward with it), and
    # in a JSONL log the per-step losses vanished without a word
    entries = [{"step": s, "reward": 0.05 * s, "train_loss": 1.0 / s} for s in range(1, N + 1)]
    summary = {"step": N, "train_runtime": 9.0, "train_steps_per_second": 1.3, "train_loss": 0.4}
    if layout == "trainer_state":
        path = tmp_path / "trainer_state.json"
        path.write_text(json.dumps({"log_history": [*entries, summary]}))
    elif layout == "console":
        path = tmp_path / "train.log"
        lines = [repr({k: v for k, v in e.items() if k != "step"}) for e in [*entries, summary]]
        path.write_text("\n".join(lines) + "\n")
    else:
        path = tmp_path / "metrics.jsonl"
        path.write_text("\n".join(json.dumps(e) for e in entries))
    ds = load_runs([path])
    (run,) = ds.run.values
    assert int(ds.reward.sel(run=run).notnull().sum()) == N
    np.testing.assert_allclose(
        ds.train_loss.sel(run=run).dropna("step"), [1.0 / s for s in range(1, N + 1)]
    )
    assert "train_runtime" not in ds.data_vars


def test_a_checkpoint_state_being_written_falls_back_to_the_previous_checkpoint(tmp_path):
    # a run still training: the latest checkpoint's trainer_state.json is written as it is saved;
    # cut short, it rejected the whole run although the checkpoint before it was readable
    out = tmp_path / "out"
    _state(out / "checkpoint-12" / "trainer_state.json", n=N)
    latest = _state(out / "checkpoint-15" / "trainer_state.json", n=N + 3)
    latest.write_text(latest.read_text()[:-25])
    ds = load_runs([out])
    assert list(ds.run.values) == ["out"] and not rejected_runs(ds)
    assert int(ds.reward.sel(run="out").notnull().sum()) == N
    (note,) = [w for w in runset_warnings(ds)["out"] if "passed over" in w]
    assert "checkpoint-15" in note and "unreadable JSON" in note and "checkpoint-12" in note


def test_a_checkpoint_folder_given_is_that_checkpoint_only(tmp_path):
    # discovery took a checkpoint's state for its run folder, the folder above the one given:
    # `ingest out/checkpoint-12` read checkpoint-15 as well, two runs where one was asked for
    out = tmp_path / "out"
    _state(out / "checkpoint-12" / "trainer_state.json", n=N)
    _state(out / "checkpoint-15" / "trainer_state.json", n=N + 3)
    ds = load_runs([out / "checkpoint-12"])
    assert ds.sizes["run"] == 1
    assert int(ds.reward.notnull().sum()) == N
    (run,) = ds.run.values
    assert "checkpoint-12" in json.loads(ds.attrs[INGEST_ATTR])[run]["file"]


def test_a_checkpoint_later_than_the_run_folders_own_state_is_named(tmp_path):
    # a training resumed after its final trainer_state.json was written: the later steps are only
    # in the checkpoint, and the folder's own (older) state was read without a word
    run = tmp_path / "run"
    _state(run / "trainer_state.json", n=N)
    later = _state(run / "checkpoint-20" / "trainer_state.json", n=20)
    for path, n in ((run / "trainer_state.json", N), (later, 20)):
        state = json.loads(path.read_text())
        path.write_text(json.dumps({"global_step": n, **state}))
    ds = load_runs([run])
    (note,) = [w for w in runset_warnings(ds)["run"] if "is later" in w]
    assert f"ends at step {N}" in note and "checkpoint-20/trainer_state.json" in note


def test_a_rejected_run_says_what_reading_it_noted(tmp_path):
    # steps written with thousands separators ("1,000") have no numeric step: the run fell short
    # of min_points, and the reason gave only the count, not the skipped values behind it
    path = tmp_path / "sep.csv"
    path.write_text("step,reward\n" + "".join(f'"{100 * s:,}",0.5\n' for s in range(1, 31)))
    with pytest.raises(RunSetError) as info:
        load_runs([path])
    message = str(info.value)
    assert "only 9 finite reward values" in message
    assert "21 values without a numeric step skipped" in message
    assert "(e.g. step '1,000', metric 'reward')" in message  # which steps, not only how many


@pytest.mark.parametrize("name", ["metrics.jsonl", "metrics.csv", "trainer_state.json"])
def test_an_empty_log_is_rejected_as_empty(tmp_path, name):
    # a run that has not logged yet: the reasons were "no JSON objects (... lines: [])",
    # "No columns to parse from file" and "unreadable JSON (truncated: Expecting value ...)"
    empty = tmp_path / "new" / name
    empty.parent.mkdir()
    empty.write_text("\n")
    ds = _ingest(_good(tmp_path / "ok.csv"), empty)
    ((source, info),) = rejected_runs(ds).items()
    assert str(empty) in info["reason"] and "empty file" in info["reason"]


def test_a_trainer_state_cut_in_a_string_is_called_truncated(tmp_path):
    path = _state(tmp_path / "trainer_state.json")
    text = path.read_text()
    path.write_text(text[: text.rindex('"reward"') + 4])  # the file ends inside a key
    with pytest.raises(RunSetError, match=r"unreadable JSON \(truncated"):
        load_runs([path])


@pytest.mark.parametrize("name", ["trainer_state.json", "metrics.json"])
def test_a_json_file_cut_short_is_called_truncated_and_placed_once(tmp_path, name):
    # a JSON list of per-step objects being written said "unreadable JSON (Unterminated string
    # starting at at line 1)": not that it was cut short, and "at" twice (the Trainer state too)
    path = tmp_path / name
    entries = [{"step": s, "reward": 0.1 * s} for s in range(1, N + 1)]
    text = json.dumps({"log_history": entries} if name == "trainer_state.json" else entries)
    path.write_text(text[: text.rindex('"reward"') + 4])  # the file ends inside a key
    with pytest.raises(RunSetError) as info:
        load_runs([path], on_error="raise")
    message = str(info.value)
    assert f"{name}: unreadable JSON (truncated: Unterminated string starting at line 1, column" in message
    assert "at at" not in message


def test_a_folder_that_cannot_be_listed_is_reported(tmp_path, monkeypatch):
    # os.walk passes over a folder it cannot list (another user's run, no read permission)
    # unless told otherwise: its runs were left out without a word
    import os

    _good(tmp_path / "exp" / "mine" / "metrics.csv")
    _good(tmp_path / "exp" / "theirs" / "metrics.csv")
    locked = str(tmp_path / "exp" / "theirs")
    scandir = os.scandir

    def no_permission(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", no_permission)  # the tests may run as root
    ds = _ingest(tmp_path / "exp")
    assert list(ds.run.values) == ["mine"]
    ((source, info),) = rejected_runs(ds).items()
    assert source == locked and "Permission denied" in info["reason"]


def test_a_second_training_appended_to_a_log_is_named_as_such(tmp_path):
    # a script restarted from scratch appending to its metrics.jsonl: the second training
    # replaces the first at every step, which was reported only as "a resumed run?"
    path = tmp_path / "appended.jsonl"
    lines = [json.dumps({"step": s, "reward": 0.1 * s}) for s in range(1, N + 1)]
    lines += [json.dumps({"step": s, "reward": 0.5}) for s in range(1, N + 1)]
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert any("starts over at step 1 after step 12" in w for w in runset_warnings(ds)["appended"])
    # a resume from a checkpoint (back to a step past the start) is not a new start
    resumed = tmp_path / "resumed.jsonl"
    resumed.write_text(
        "\n".join(json.dumps({"step": s, "reward": 0.1}) for s in [*range(1, N + 1), *range(8, 15)])
    )
    ds = load_runs([resumed])
    assert not any("starts over" in w for w in runset_warnings(ds)["resumed"])
    # nor is a log written newest first
    newest_first = _csv(tmp_path / "desc.csv", [(s, 0.1, 0.0) for s in range(N, 0, -1)])
    ds = load_runs([newest_first])
    assert not any("starts over" in w for w in runset_warnings(ds)["desc"])


@pytest.mark.parametrize("name", ["train.log", "metrics.jsonl", "metrics.csv"])
def test_a_utf16_log_is_read(tmp_path, name):
    # Windows PowerShell 5 writes `python train.py > train.log` as UTF-16 with a byte-order mark:
    # the console log was no log at all (skipped in a folder), a JSONL or CSV "not readable"
    if name == "train.log":
        lines = [repr({"loss": 0.1, "reward": 0.05 * s, "epoch": s / N}) for s in range(1, N + 1)]
    elif name == "metrics.jsonl":
        lines = [json.dumps({"step": s, "reward": 0.05 * s}) for s in range(1, N + 1)]
    else:
        lines = ["step,reward", *(f"{s},{0.05 * s}" for s in range(1, N + 1))]
    run_dir = tmp_path / "win_run"
    run_dir.mkdir()
    (run_dir / name).write_text("\r\n".join(lines) + "\r\n", encoding="utf-16")
    ds = load_runs([run_dir])
    assert list(ds.run.values) == ["win_run"]
    np.testing.assert_allclose(
        ds.reward.sel(run="win_run").dropna("step"), [0.05 * s for s in range(1, N + 1)]
    )


def test_values_logged_at_negative_steps_are_skipped_and_said(tmp_path):
    # a pre-training evaluation logged at step -1: steps count from the start of training (0),
    # and compare refused a run set holding it; a log of negative steps only is rejected
    path = _csv(tmp_path / "pre_eval.csv", [(-1, 0.05, 0.0)] + [(s, 0.1 * s, 0.01) for s in range(N)])
    ds = load_runs([path])
    reward = ds.reward.sel(run="pre_eval").to_series().dropna()
    assert reward.index.min() == 0 and len(reward) == N
    notes = runset_warnings(ds)["pre_eval"]
    assert any("2 values at negative steps skipped (e.g. step -1" in w for w in notes), notes
    only = _csv(tmp_path / "only_negative.csv", [(s, 0.1, 0.0) for s in range(-N, 0)])
    with pytest.raises(RunSetError, match="only_negative.csv.*every step is negative"):
        load_runs([only])


def test_a_jump_in_the_step_numbers_between_rewards_is_warned_and_the_run_kept(tmp_path):
    # steps 0..29, then the log carries on at 3000 (renumbered on a resume, a mistyped step)
    jumped = _csv(tmp_path / "jumped.csv", [(s, 0.1, 0.01) for s in [*range(30), *range(3000, 3010)]])
    # every 10th step with one log call missing: an ordinary gap, no note
    sparse = _csv(tmp_path / "sparse.csv", [(s, 0.1, 0.01) for s in range(0, 500, 10) if s != 250])
    ds = load_runs([jumped, sparse])
    assert ds.reward.sel(run="jumped").notnull().sum() == 40  # kept as logged
    (note,) = [w for w in runset_warnings(ds)["jumped"] if "no reward logged" in w]
    assert "for 2971 steps, between step 29 and step 3000" in note and "1 step apart" in note
    assert not any("no reward logged" in w for w in runset_warnings(ds).get("sparse", []))


def test_log_history_items_that_are_not_metric_objects_are_counted_in_a_note(tmp_path):
    path = _state(tmp_path / "run" / "trainer_state.json")
    state = json.loads(path.read_text())
    state["log_history"][3:3] = [None, "step 4 crashed"]  # a hand-edited or corrupt history
    path.write_text(json.dumps(state))
    ds = load_runs([path])
    assert int(ds.reward.notnull().sum()) == N  # every metric entry still read
    (note,) = [w for w in runset_warnings(ds)["run"] if "log_history" in w]
    assert "2 items of 'log_history' are not {metric: value} objects" in note and "item 3, NoneType" in note and "skipped" in note


@pytest.mark.parametrize("name,text", [("m.csv", "path,run,group_size\n"), ("m.yaml", "runs: []\n")])
def test_a_manifest_without_rows_is_an_error_naming_it(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    with pytest.raises(LogFormatError, match=rf"{name}: the manifest lists no runs"):
        load_runs([], manifest=tmp_path / name)


def test_an_unknown_group_size_that_the_runs_name_suggests_is_hinted_not_taken(tmp_path):
    from bayes_grpo.runset.ingest import ingest_notes

    named = _good(tmp_path / "qwen_0.5b_g8_lr1e-6.csv")
    plain = _good(tmp_path / "qwen_3b_run1.csv")  # "3b", "run1": no group size
    both = _good(tmp_path / "g4_vs_g8.csv")  # two readings: no hint
    with pytest.warns(UserWarning, match="whose name reads like one"):
        ds = load_runs([named, plain, both])
    assert np.isnan(run_coords(ds, "qwen_0.5b_g8_lr1e-6")["group_size"])  # never read from a name
    (hint,) = [n for n in ingest_notes(ds) if "reads like one" in n]
    assert hint == (
        "group size G unknown for 1 run whose name reads like one (G = 8: qwen_0.5b_g8_lr1e-6): no log "
        "or config beside it gives G; if the name means it, give group_size in a manifest (or "
        "--default group_size=8 when fitting)"
    )
    # given in a manifest: nothing to hint
    (tmp_path / "m.csv").write_text(f"path,group_size\n{named.name},8\n")
    ds = load_runs([], manifest=tmp_path / "m.csv")
    assert not any("read like" in n or "reads like" in n for n in ingest_notes(ds))


def test_the_group_size_hint_of_many_runs_is_one_note_naming_them_by_the_g_they_read_like(tmp_path):
    # the hint was a warning of each run: the same words 22 times in the ingest of real_runs' CSV
    # exports, under "warnings:", beside the one note that said G was unknown for them all
    from bayes_grpo.runset.ingest import NOTES_ATTR, ingest_notes

    for name in ("a_g4_s1", "a_g4_s2", "b_g8", "c_gs8_x", "plain_run"):
        _good(tmp_path / f"{name}.csv")
    (tmp_path / "run_g16").mkdir()
    _good(tmp_path / "run_g16" / "metrics.csv")  # read from its folder's name
    with pytest.warns(UserWarning) as caught:
        ds = load_runs([tmp_path])
    assert not any("reads like" in w for ws in runset_warnings(ds).values() for w in ws)
    (hint,) = [n for n in ingest_notes(ds) if "read like" in n]
    assert hint == (
        "group size G unknown for 5 runs whose names read like one (G = 4: a_g4_s1, a_g4_s2; G = 8: "
        "b_g8, c_gs8_x; G = 16: run_g16): no log or config beside them gives G; if the names mean "
        "it, give group_size in a manifest"
    )
    assert [str(w.message) for w in caught].count(hint) == 1
    assert hint in json.loads(ds.attrs[NOTES_ATTR])


_ODD_FILES = {
    "repeated_header.csv": "step,reward,reward\n" + "".join(f"{s},{0.1 * s},0.5\n" for s in range(N)),
    "trailing.csv": "step,reward\n" + "".join(f"{s},{0.1 * s},\n" for s in range(N)),
    "commas.csv": "step;reward\n" + "".join(f"{s};0,{s + 10}\n" for s in range(N)),
    "pandas_index.csv": ",step,reward\n" + "".join(f"{s},{s},{0.1 * s}\n" for s in range(N)),
    "one_run.jsonl": "".join(
        json.dumps({"run_name": "one", "step": s, "reward": 0.1 * s} if s else {"step": s, "reward": 0.0}) + "\n"
        for s in range(N)
    ),
    "cut.log": "".join(f"{{'loss': 0.01, 'reward': {0.1 * s:.2f}}}\n" for s in range(1, N + 1)) + "{'loss': 0.0",
}


@pytest.mark.parametrize("name", sorted(_ODD_FILES))
def test_a_note_on_a_log_file_names_the_file_once(tmp_path, name):
    # the loaders began these notes with the file's name and the ingest prefixes every run's
    # warning with the run's label (its path): "[x] x.csv: x.csv: the header names 'reward' (2x)"
    path = tmp_path / name
    path.write_text(_ODD_FILES[name])
    ds = load_runs([path])
    (run,) = ds.run.values
    warned = runset_warnings(ds)[str(run)]
    assert warned  # each file has something to say
    assert all(w.startswith(str(path)) and w.count(name) == 1 for w in warned), warned


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_a_step_beyond_2_53_is_shown_as_the_log_wrote_it(tmp_path, suffix):
    # a JSONL log's step 2**60 + 1 was shown as "step np.int64(1152921504606846977) is beyond
    # 2**53": NumPy's repr, not the number the log holds
    path = tmp_path / f"big.{suffix}"
    steps = [2**60 + s for s in range(1, N + 1)]
    if suffix == "jsonl":
        path.write_text("".join(json.dumps({"step": s, "reward": 0.5}) + "\n" for s in steps))
    else:
        path.write_text("step,reward\n" + "".join(f"{s},0.5\n" for s in steps))
    with pytest.raises(RunSetError) as info:
        load_runs([path])
    message = str(info.value)
    assert "np." not in message
    assert f"step {2**60 + 1} is beyond 2**53" in message or f"step '{2**60 + 1}' is beyond 2**53" in message


def test_a_broken_yaml_config_beside_a_log_is_one_warning_line_naming_where(tmp_path):
    # the YAML parser's message spans lines (the line echoed, a caret under it): the warning
    # broke the one-warning-a-line list as "not read (ParserError: while parsing a flow
    # sequence\n  in \"<unicode string>\", line 1, column 13:\n    group_size: [4\n ..."
    run = tmp_path / "run"
    _good(run / "metrics.csv")
    (run / "config.yaml").write_text("group_size: [4\n")
    ds = load_runs([run])
    (note,) = [w for w in runset_warnings(ds)["run"] if "config.yaml" in w]
    assert "\n" not in note
    assert note.endswith(
        "config.yaml: not read (ParserError: while parsing a flow sequence, expected ',' or ']', "
        "but got '<stream end>' at line 2, column 1)"
    )


def test_a_broken_yaml_manifest_is_one_line_naming_where(tmp_path):
    _good(tmp_path / "a.csv")
    manifest = tmp_path / "m.yaml"
    manifest.write_text("- path: a.csv\n  group_size: [4\n")
    with pytest.raises(LogFormatError) as info:
        load_runs([], manifest=manifest)
    assert str(info.value) == (
        f"{manifest}: unreadable manifest (while parsing a flow sequence, expected ',' or ']', "
        "but got '<stream end>' at line 3, column 1)"
    )


def test_a_run_with_too_few_rewards_names_a_reward_metric_logged_at_more_steps(tmp_path):
    # 'reward' logged at 3 steps beside the one reward function's mean at every step: the run was
    # rejected for its 3 points, the curve it has unnamed
    path = tmp_path / "few.csv"
    rows = [f"{s},{0.5 if s < 3 else ''},{0.1 * s}" for s in range(N)]
    path.write_text("step,reward,rewards/acc/mean\n" + "\n".join(rows) + "\n")
    with pytest.raises(RunSetError) as info:
        load_runs([path])
    assert (
        f"only 3 finite reward values in 'reward', fewer than the minimum of 10 points (lower it "
        f"with min_points=, or `bayes-grpo ingest --min-points N`); 'rewards/acc/mean' has {N}: to "
        "use it, --reward-key rewards/acc/mean (Python: reward_key=...)"
    ) in str(info.value)
    ds = load_runs([path], reward_key="rewards/acc/mean")
    assert int(ds.reward.notnull().sum()) == N
    # nothing else to offer: the message is as it was
    path.write_text("step,reward\n" + "\n".join(f"{s},{0.5 if s < 3 else ''}" for s in range(N)) + "\n")
    with pytest.raises(RunSetError) as info:
        load_runs([path])
    assert str(info.value).endswith("`bayes-grpo ingest --min-points N`)")


def test_an_event_file_without_scalars_says_what_it_holds_or_that_it_is_damaged(tmp_path):
    # the rejection printed the reader's whole tag table, "(tags: {'images': [], 'audio': [],
    # 'histograms': [], 'scalars': [], ..., 'graph': False, ...})", for a file of 7 bytes of
    # garbage as for one holding only a histogram: nothing on what the file was
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    garbage = tmp_path / "bad" / "events.out.tfevents.1.host.1.0"
    garbage.parent.mkdir()
    garbage.write_bytes(b"garbage")
    with pytest.raises(RunSetError) as info:
        load_runs([garbage])
    message = str(info.value)
    assert "'audio': []" not in message
    assert (
        f"{garbage}: no scalar summaries in the event file (nothing read from it); the event file "
        "ends in a partial record header at byte 0 of 7"
    ) in message
    writer = torch_tb.SummaryWriter(str(tmp_path / "hist"))
    writer.add_histogram("weights", np.arange(10.0), 1)
    writer.close()
    (events,) = (tmp_path / "hist").glob("events.out.tfevents.*")
    with pytest.raises(RunSetError) as info:
        load_runs([events])
    held = "{'histograms': ['weights'], 'distributions': ['weights']}"
    assert f"{events}: no scalar summaries in the event file (it holds {held})" in str(info.value)


def test_a_csv_with_a_space_after_each_comma_reads_as_without(tmp_path):
    # 'step, reward, kl' (as people and numpy.savetxt(delimiter=", ") write): ' reward' was no
    # reward ("no reward metric; metrics found: [' kl', ' reward']"), the quoted model name with
    # a comma in it split in two, and a manifest's ' group_size' was an unknown column
    wide = tmp_path / "wide.csv"
    wide.write_text(
        "step, reward , kl, model\n" + "".join(f"{s}, {0.1 * s:.1f}, 0.01, \"qwen, 7b\"\n" for s in range(N))
    )
    ds = load_runs([wide])
    np.testing.assert_allclose(ds.reward.sel(run="wide").values, [0.1 * s for s in range(N)])
    assert "kl" in ds.data_vars and run_coords(ds, "wide")["model"] == "qwen, 7b"
    long = tmp_path / "long.csv"
    long.write_text(
        "run_name, metric, step, value\n" + "".join(f"a, reward, {s}, {0.1 * s:.1f}\n" for s in range(N))
    )
    assert list(load_runs([long]).run.values) == ["a"]
    manifest = tmp_path / "m.csv"
    manifest.write_text("path, run, group_size\nwide.csv, r1, 4\n")
    ds = load_runs([], manifest=manifest)
    assert list(ds.run.values) == ["r1"] and run_coords(ds, "r1")["group_size"] == 4


def test_a_compressed_file_that_is_no_log_stays_unread_without_a_word(tmp_path):
    # model weights, archives of checkpoints: no log by their names, so no rejected source
    _good(tmp_path / "runs" / "plain" / "log.csv")
    for name in ("model.safetensors.gz", "checkpoints.tar.gz", "notes.gz"):
        (tmp_path / "runs" / "plain" / name).write_bytes(b"\x1f\x8b")
    ds = load_runs([tmp_path / "runs"])
    assert list(ds.run.values) == ["plain"] and not rejected_runs(ds)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_step_left_empty_is_said_to_be_empty_not_nan(tmp_path, fmt):
    # an empty step cell (or a JSON null) was shown as "e.g. step nan"
    rows = [(s, 0.05 * s) for s in range(1, N + 1)]
    if fmt == "csv":
        path = tmp_path / "log.csv"
        path.write_text("step,reward\n" + "\n".join(f"{'' if s == 3 else s},{r}" for s, r in rows) + "\n")
    else:
        path = tmp_path / "log.jsonl"
        path.write_text("\n".join(json.dumps({"step": None if s == 3 else s, "reward": r}) for s, r in rows) + "\n")
    ds = load_runs([path])
    (message,) = [w for w in runset_warnings(ds)[str(ds.run.values[0])] if "without a numeric step" in w]
    assert "1 value without a numeric step skipped (e.g. step (empty), metric 'reward')" in message


def test_the_warning_of_rejected_runs_names_each_file_once(tmp_path):
    # load_runs' warning read "short.csv: run 'short': short.csv: only 3 finite reward value(s)
    # ..." and "empty: empty: no log of a known format found here": the source before a reason
    # that already starts with it
    good = _good(tmp_path / "good.csv")
    short = _good(tmp_path / "short.csv", n=3)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.warns(UserWarning, match="2 runs not ingested") as caught:
        load_runs([good, short, empty])
    (message,) = [str(w.message) for w in caught if "not ingested" in str(w.message)]
    lines = message.splitlines()[1:]
    assert len(lines) == 2, message
    assert message.count(str(short)) == 1 and message.count(str(empty)) == 1, message
    assert any("run 'short'" in line and "only 3 finite reward" in line for line in lines), message
    assert any("no log of a known format found here" in line for line in lines), message


def test_load_file_names_a_missing_file_or_a_folder_as_such(tmp_path):
    # load_file("runs/train.log") of a file not there said "not a recognised log format (formats:
    # ...)", as did a run folder given without a format: neither is about the format
    from bayes_grpo.runset.loaders import load_file

    missing = tmp_path / "train.log"
    with pytest.raises(LogFormatError) as err:
        load_file(missing)
    assert str(err.value) == f"{missing}: no such file or directory"
    folder = tmp_path / "run_a"
    folder.mkdir()
    with pytest.raises(LogFormatError) as err:
        load_file(folder)
    assert str(err.value) == (
        f"{folder}: a folder, not a log file; load_runs searches a folder for its logs "
        "(load_file reads a Trainer output folder with fmt='trainer_state')"
    )
    # a Trainer output folder is read with its format given
    (folder / "trainer_state.json").write_text(
        json.dumps({"log_history": [{"step": s, "reward": 0.1 * s} for s in range(1, 4)]})
    )
    (run,) = load_file(folder, "trainer_state")
    assert run.records["value"].tolist() == pytest.approx([0.1, 0.2, 0.3])
