"""`bayes-grpo ingest` prints the runs (table or JSON), writes the run set, and reports rejected runs."""

import json

import pytest

from bayes_grpo.cli import main
from bayes_grpo.runset import load_runset


def _csv(path, n):
    path.write_text(
        "\n".join(["step,train/reward,train/kl"] + [f"{s},{0.1 * s},0.0" for s in range(n)])
    )
    return path


def test_help_documents_formats_reward_rule_and_manifest(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["ingest", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for word in (
        "--manifest",
        "--reward-key",
        "--min-points",
        "--json",
        "--strict",
        "trainer_state.json",
        "tfevents",
        "rewards/<func>/mean",
        "logging_steps",
    ):
        assert word in text


def test_help_names_every_column_a_manifest_takes(capsys):
    # the manifest reads every run coordinate, but `ingest --help` listed them up to `seed`, not
    # `completions_per_step`, which the README names as a manifest column (the budget the runs had)
    from bayes_grpo.runset.loaders.manifest import COORD_COLUMNS

    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    text = capsys.readouterr().out
    manifest = text.split("manifest (CSV/YAML):", 1)[1].split("examples:", 1)[0]
    for column in ("path", "run", "run_name", "reward_key", "logging_steps", *COORD_COLUMNS):
        assert column in manifest.replace(",", " ").replace(".", " ").split(), column


def test_help_names_the_verl_and_openrlhf_logs_ingest_reads(capsys):
    # the README lists verl's console lines ('step:N - key:value') and its file logger's JSONL,
    # and the move of verl/OpenRLHF rollout iterations onto optimizer steps; `ingest --help`
    # named the console reader as the Trainer's dicts only and said nothing of the steps
    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "verl's 'step:N - key:value' lines" in text
    assert "verl's file logger" in text
    assert "rollout iteration" in text


def _two_runs(tmp_path):
    """A good run and one too short to keep, plus the output path."""
    good, tiny = _csv(tmp_path / "good.csv", 12), _csv(tmp_path / "tiny.csv", 3)
    return [str(good), str(tiny), "-o", str(tmp_path / "runs.nc")]


def test_table_lists_runs_warnings_and_rejections(tmp_path, capsys):
    assert main(["ingest", *_two_runs(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "1 run ingested" in text and "good" in text  # in the singular (it said "1 run(s)")
    assert "1 run rejected" in text and "tiny.csv" in text and "only 3 finite reward" in text
    assert list(load_runset(tmp_path / "runs.nc").run.values) == ["good"]


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_minimum_of_no_points_is_refused_naming_the_option(tmp_path, capsys, value):
    # the README: settings that mean nothing are refused naming the option; this one said
    # "min_points must be at least 1, got 0", the Python argument's name
    with pytest.raises(SystemExit) as exc:
        main(["ingest", *_two_runs(tmp_path), "--min-points", value])
    assert exc.value.code == 2
    assert "--min-points" in capsys.readouterr().err
    assert not (tmp_path / "runs.nc").exists()


def test_an_ambiguous_reward_asks_for_the_option_that_resolves_it(tmp_path, capsys):
    # the README: "Ambiguity (several reward functions, no total) is an error asking for
    # --reward-key"; the command line said "choose one with reward_key" (load_runs' argument)
    log = tmp_path / "two.csv"
    log.write_text(
        "\n".join(["step,rewards/a/mean,rewards/b/mean"] + [f"{s},{0.1 * s},0.5" for s in range(12)])
    )
    assert main(["ingest", str(log), "-o", str(tmp_path / "runs.nc")]) == 2
    err = capsys.readouterr().err
    assert "several reward functions" in err and "--reward-key" in err
    args = ["ingest", str(log), "--reward-key", "rewards/a/mean", "-o", str(tmp_path / "runs.nc")]
    assert main(args) == 0


def test_json_output_has_every_run_including_rejected(tmp_path, capsys):
    assert main(["ingest", *_two_runs(tmp_path), "--min-points", "5", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["n_runs"] == 1 and payload["n_rejected"] == 1
    runs = {r["run"]: r for r in payload["runs"]}
    assert runs["good"]["status"] == "ok" and runs["good"]["n_steps"] == 12
    assert isinstance(runs["good"]["n_steps"], int) and set(runs["tiny"]) == {
        "run",
        "status",
        "source",
        "reason",
    }
    assert runs["good"]["reward_source"] == "train/reward" and runs["good"]["warnings"] == []
    assert runs["tiny"]["status"] == "rejected" and "minimum of 5" in runs["tiny"]["reason"]


def test_json_says_which_n_steps_is_the_step_axis_and_which_a_runs_logged_points(
    tmp_path, capsys
):
    # the top-level 'n_steps' is the step axis (union over runs), a run's 'n_steps' its logged
    # points: a run logged every 10 steps showed 12 beside a top-level 102, with nothing to say so
    (tmp_path / "sparse.csv").write_text(
        "\n".join(["step,train/reward"] + [f"{10 * i},{0.01 * i}" for i in range(12)])
    )
    _csv(tmp_path / "dense.csv", 101)
    out = str(tmp_path / "runs.nc")
    assert main(["ingest", str(tmp_path), "-o", out, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    runs = {r["run"]: r for r in payload["runs"]}
    assert payload["n_steps"] == payload["step_axis_length"] == load_runset(out).sizes["step"]
    assert payload["step_axis_length"] == 102  # 0..100, then 110
    assert runs["sparse"]["n_points"] == runs["sparse"]["n_steps"] == 12  # key kept
    assert (runs["sparse"]["first_step"], runs["sparse"]["last_step"]) == (0, 110)
    assert runs["dense"]["n_points"] == 101
    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "step_axis_length" in help_text and "n_points" in help_text


def test_json_gives_counts_such_as_g_k_ref_and_seed_as_integers(tmp_path, capsys):
    log = _csv(tmp_path / "good.csv", 12)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        f"- {{path: {log.name}, run: a, group_size: 8, k_ref: 2, seed: 3, learning_rate: 1.0e-6}}\n"
    )
    out = str(tmp_path / "runs.nc")
    assert main(["ingest", "--manifest", str(manifest), "-o", out, "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert (run["group_size"], run["k_ref"], run["seed"]) == (8, 2, 3)
    assert all(isinstance(run[k], int) for k in ("group_size", "k_ref", "seed"))
    assert run["learning_rate"] == 1.0e-6


def test_strict_and_empty_invocations_fail_cleanly(tmp_path, capsys):
    good, tiny = _csv(tmp_path / "good.csv", 12), _csv(tmp_path / "tiny.csv", 3)
    assert main(["ingest", str(good), str(tiny), "-o", str(tmp_path / "x.nc"), "--strict"]) == 2
    assert "error:" in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()
    assert main(["ingest", "-o", str(tmp_path / "y.nc")]) == 2
    assert "give at least one PATH or --manifest" in capsys.readouterr().err


def test_a_rejected_manifest_row_is_printed_with_its_run_id(tmp_path, capsys):
    # the reason of a missing path names only the manifest row; the table line named no run
    _csv(tmp_path / "good.csv", 12)
    manifest = tmp_path / "m.yaml"
    manifest.write_text("- {path: good.csv, run: kept}\n- {path: gone.csv, run: ghost}\n")
    assert main(["ingest", "--manifest", str(manifest), "-o", str(tmp_path / "runs.nc")]) == 0
    text = capsys.readouterr().out
    assert "run 'ghost': " in text and "m.yaml row 2: path" in text and "does not exist" in text


def test_a_manifest_inside_the_log_folder_is_not_read_as_a_log(tmp_path, capsys):
    # `ingest runs --manifest runs/manifest.csv` also read the manifest as a CSV log and listed
    # it as a rejected run ("no reward metric")
    runs = tmp_path / "runs"
    runs.mkdir()
    _csv(runs / "a.csv", 12)
    _csv(runs / "b.csv", 12)
    manifest = runs / "manifest.csv"
    manifest.write_text("path,run,group_size\na.csv,a,4\nb.csv,b,16\n")
    out = tmp_path / "runs.nc"
    assert main(["ingest", str(runs), "--manifest", str(manifest), "-o", str(out), "--strict"]) == 0
    assert "rejected" not in capsys.readouterr().out  # --strict fails on a rejected file, too
    ds = load_runset(out)
    assert sorted(ds["run"].values.tolist()) == ["a", "b"]
    assert sorted(ds["group_size"].values.tolist()) == [4.0, 16.0]


def test_an_output_that_is_a_log_inside_an_input_folder_is_refused_even_with_overwrite(
    tmp_path, capsys
):
    # `ingest runs -o runs/a/trainer_state.json --overwrite` replaced run a's TRL log with the
    # netCDF run set: only the folder was compared with the output, not the files read in it
    run_dir = tmp_path / "runs" / "a"
    run_dir.mkdir(parents=True)
    state = run_dir / "trainer_state.json"
    state.write_text(
        json.dumps({"log_history": [{"step": s, "reward": 0.05 * s} for s in range(1, 13)]})
    )
    sidecar = run_dir / "bayes_grpo_run.json"
    sidecar.write_text(json.dumps({"group_size": 4, "learning_rate": 1e-3}))
    before = {p: p.read_bytes() for p in (state, sidecar)}
    for target in (state, sidecar):
        assert main(["ingest", str(tmp_path / "runs"), "-o", str(target), "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert "replace the input" in err and len(err.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in before} == before
    # a new file inside the input folder is still fine
    assert main(["ingest", str(tmp_path / "runs"), "-o", str(tmp_path / "runs" / "all.nc")]) == 0
    assert load_runset(tmp_path / "runs" / "all.nc").sizes["run"] == 1


def test_an_output_that_is_a_log_the_manifest_names_is_refused_even_with_overwrite(tmp_path, capsys):
    # QA flow: `ingest --manifest runs.yaml -o wandb_export.csv --overwrite` replaced the W&B
    # export the manifest names (and a run folder's log) with the netCDF run set: only the
    # PATHs and the manifest itself were compared with the output
    runs = tmp_path / "runs"
    state = runs / "a" / "trainer_state.json"
    state.parent.mkdir(parents=True)
    _csv(runs / "export.csv", 12)
    state.write_text(json.dumps({"log_history": [{"step": s, "reward": 0.05 * s} for s in range(1, 13)]}))
    manifest = tmp_path / "runs.yaml"
    manifest.write_text("- {path: runs/export.csv, run: e}\n- {path: runs/a, run: a}\n")
    before = {p: p.read_bytes() for p in (runs / "export.csv", state)}
    for target in before:
        assert main(["ingest", "--manifest", str(manifest), "-o", str(target), "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert "replace the input" in err and str(target) in err
    assert {p: p.read_bytes() for p in before} == before
    assert main(["ingest", "--manifest", str(manifest), "-o", str(runs / "all.nc")]) == 0
    assert sorted(load_runset(runs / "all.nc")["run"].values.tolist()) == ["a", "e"]


def test_the_table_shows_the_completions_each_logged_reward_averages(tmp_path, capsys):
    """The batch behind each logged mean (it sets the measurement noise) is in the table, not only the JSON."""
    log = _csv(tmp_path / "good.csv", 12)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"- {{path: {log.name}, run: a, model: m1, group_size: 8, completions_per_step: 64}}\n")
    assert main(["ingest", "--manifest", str(manifest), "-o", str(tmp_path / "runs.nc")]) == 0
    header, row = [line.split() for line in capsys.readouterr().out.splitlines()[1:4:2]]
    assert row[header.index("per_step") + 1] == "64"  # +1: the row starts with the run id


def test_the_table_counts_logged_points_and_names_the_steps_they_span(tmp_path, capsys):
    # a run logged every 10 steps over 300 steps showed "steps 30": the column counts the
    # reward's logged points, and the steps they cover were nowhere in the table
    log = tmp_path / "sparse.csv"
    log.write_text(
        "\n".join(["step,train/reward"] + [f"{s},{0.001 * s}" for s in range(10, 301, 10)])
    )
    assert main(["ingest", str(log), "-o", str(tmp_path / "runs.nc")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "r_first" in line).split()
    row = next(line for line in lines if line.startswith("sparse")).split()
    assert "points" in header and "steps" in header, header
    at = header.index("points")
    assert header[at + 1] == "steps", header
    assert "30 10..300" in " ".join(row), row


def test_the_python_summary_and_the_json_count_a_runs_points_under_one_name(tmp_path, capsys):
    # the JSON's per-run 'n_points' came from the command line alone; runset_summary (the
    # Python side of the same table) had only 'n_steps'
    from bayes_grpo.runset.ingest import load_runs, runset_summary

    (tmp_path / "sparse.csv").write_text(
        "\n".join(["step,train/reward"] + [f"{10 * i},{0.01 * i}" for i in range(12)])
    )
    summary = runset_summary(load_runs([tmp_path / "sparse.csv"]))
    assert summary.loc["sparse", "n_points"] == summary.loc["sparse", "n_steps"] == 12
    assert main(["ingest", str(tmp_path / "sparse.csv"), "-o", str(tmp_path / "r.nc"), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["n_points"] == 12 and isinstance(run["n_points"], int)


def test_the_table_marks_an_unknown_model_and_convention_as_unknown_like_the_other_columns(tmp_path, capsys):
    # a log without a model or momentum convention left those cells blank, while every other
    # unknown (G, lr, mu, k_ref, ...) read "-": the row's columns shifted when read by eye or split
    log = tmp_path / "plain.csv"
    log.write_text("\n".join(["step,reward"] + [f"{s},{0.01 * s}" for s in range(20)]))
    assert main(["ingest", str(log), "-o", str(tmp_path / "runs.nc")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "r_first" in line).split()
    row = next(line for line in lines if line.startswith("plain")).split()
    assert len(row) == len(header) + 1, (header, row)  # +1: the run id
    cells = dict(zip(header, row[1:]))
    assert cells["model"] == "-" and cells["conv"] == "-", cells
