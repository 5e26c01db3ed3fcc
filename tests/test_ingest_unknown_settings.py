"""Runs whose G or model no log, config or manifest gives: the ingest says once that a manifest
gives them (console logs print neither; nor do most CSV / JSONL exports)."""

import json
import warnings

import pytest

from bayes_grpo.cli import main
from bayes_grpo.runset import run_coords
from bayes_grpo.runset.ingest import load_runs, unknown_settings_note

N = 12


def _console(folder, *, name="train.log"):
    folder.mkdir(parents=True)
    dicts = (repr({"loss": 0.1, "reward": 0.05 * s, "epoch": s / N}) for s in range(1, N + 1))
    (folder / name).write_text("Loading weights\n" + "\n".join(dicts) + "\n")
    return folder / name


def _runs(tmp_path):
    """Two console logs without configs, one beside a config giving G, and a CSV log."""
    root = tmp_path / "runs"
    _console(root / "qwen35_a")
    _console(root / "qwen35_b")
    _console(root / "with_config")
    (root / "with_config" / "training_args.json").write_text(json.dumps({"num_generations": 8}))
    (root / "csv_run").mkdir()
    (root / "csv_run" / "metrics.csv").write_text(
        "step,reward\n" + "".join(f"{s},{0.05 * s}\n" for s in range(1, N + 1))
    )
    return root


def test_console_logs_without_g_or_model_get_one_note_naming_the_manifest(tmp_path):
    # the Qwen3.5 console logs of real_runs were ingested with G and model empty, and nothing
    # said that a manifest gives them (invariance, the noise law and degeneracy need G)
    root = _runs(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_runs([root])
    notes = [str(w.message) for w in caught if "manifest" in str(w.message)]
    assert len(notes) == 1, notes  # once per ingest, not once per run
    note = notes[0]
    assert note == unknown_settings_note(ds)
    assert note.startswith(
        "G and model unknown for 3 runs (csv_run, qwen35_a, qwen35_b); model unknown for 1 run "
        "(with_config): "
    )
    assert "a console log prints neither" in note
    for words in ("--manifest", "manifest=", "path, run, group_size, model", "README.md"):
        assert words in note, words
    assert run_coords(ds, "with_config")["group_size"] == 8
    # a manifest giving G to one of them leaves the other named
    manifest = tmp_path / "runs.csv"
    manifest.write_text(f"path,run,group_size\n{root / 'qwen35_a' / 'train.log'},qwen35_a,4\n")
    ds = load_runs([root], manifest=manifest)
    assert run_coords(ds, "qwen35_a")["group_size"] == 4
    assert unknown_settings_note(ds).startswith(
        "G and model unknown for 2 runs (csv_run, qwen35_b); model unknown for 2 runs "
        "(qwen35_a, with_config): "
    )


def test_the_cli_prints_the_note_once_and_gives_it_in_json(tmp_path, capsys):
    root = _runs(tmp_path)
    out = tmp_path / "runs.nc"
    assert main(["ingest", str(root), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("G and model unknown for 3 runs (csv_run, qwen35_a, qwen35_b)") == 1
    assert "\nnote: G and model unknown" in text
    assert main(["ingest", str(root), "-o", str(out), "--overwrite", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    (note,) = payload["notes"]
    assert note.startswith("G and model unknown for 3 runs")
    # a run set of runs that know their G and model: no notes
    (root / "with_config" / "training_args.json").write_text(
        json.dumps({"num_generations": 8, "model_name_or_path": "Qwen/Qwen3.5-9B"})
    )
    assert main(["ingest", str(root / "with_config"), "-o", str(out), "--overwrite", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []


@pytest.mark.parametrize("name", ["train.log", "train.log.gz"])
def test_the_note_names_a_console_log_however_it_is_stored(tmp_path, name):
    import gzip

    log = _console(tmp_path / "run_a")
    if name.endswith(".gz"):
        log.with_name(name).write_bytes(gzip.compress(log.read_bytes()))
        log.unlink()
    ds = load_runs([tmp_path / "run_a"])
    assert unknown_settings_note(ds).startswith("G and model unknown for 1 run (run_a): ")


def _trainer_state(folder, **args):
    folder.mkdir(parents=True)
    history = [{"step": s, "reward": 0.05 * s, "loss": 0.1} for s in range(1, N + 1)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    if args:
        (folder / "training_args.json").write_text(json.dumps(args))


def test_every_format_without_g_or_model_is_named_and_the_note_says_which_is_unknown(tmp_path):
    # only console logs were named: real_runs' Trainer states without training_args.bin
    # (wordle-grpo, srinath...), stage1's JSONL, lr_sweep_* / off_policy_* CSV exports were
    # ingested with G and model empty without a word, and G known without a model (or the
    # reverse) was never named
    root = tmp_path / "runs"
    _trainer_state(root / "state_bare")
    _trainer_state(root / "state_g", num_generations=8)
    _trainer_state(root / "state_model", model_name_or_path="Qwen/Qwen2.5-0.5B")
    _trainer_state(root / "state_both", num_generations=8, model_name_or_path="Qwen/Qwen2.5-0.5B")
    (root / "jsonl_run").mkdir()
    (root / "jsonl_run" / "log.jsonl").write_text(
        "".join(json.dumps({"step": s, "reward": 0.05 * s}) + "\n" for s in range(1, N + 1))
    )
    ds = load_runs([root])
    note = unknown_settings_note(ds)
    assert note.startswith(
        "G and model unknown for 2 runs (state_bare, jsonl_run); G unknown for 1 run "
        "(state_model); model unknown for 1 run (state_g): no log, config beside the log or "
        "manifest row gave them; give them in a manifest ("
    ), note
    assert "state_both" not in note and "console" not in note
    # one kind of setting unknown: "it"
    ds = load_runs([root / "state_g", root / "state_both"])
    assert unknown_settings_note(ds).startswith(
        "model unknown for 1 run (state_g): no log, config beside the log or manifest row gave "
        "it; give it in a manifest ("
    )
    ds = load_runs([root / "state_model"])
    assert unknown_settings_note(ds).startswith("G unknown for 1 run (state_model): ")


def test_many_runs_are_named_by_the_first_few_and_their_count(tmp_path):
    root = tmp_path / "runs"
    for i in range(7):
        _console(root / f"run_{i}")
    note = unknown_settings_note(load_runs([root]))
    assert note.startswith(
        "G and model unknown for 7 runs (run_0, run_1, run_2, run_3, run_4, ... (7 in all)): "
    ), note
    assert "run_5" not in note


@pytest.mark.real_runs
def test_the_real_runs_of_every_format_without_g_or_model_are_named(real_runs_dir):
    # 17 of real_runs/native lack both (7 console logs, 2 Trainer states, a JSONL, 7 CSV
    # exports), final_on_policy_... (JSONL beside a config giving G 8) its model
    ds = load_runs([real_runs_dir / "native"])
    note = unknown_settings_note(ds)
    assert note.startswith("G and model unknown for 17 runs (wordle-grpo, ")
    assert "; model unknown for 1 run (final_on_policy_lr4e-5_400_full_eval): " in note
