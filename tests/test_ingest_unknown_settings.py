"""Console logs print neither G nor the model: the ingest says once that a manifest gives them."""

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
    assert note.startswith("G and model unknown for 2 runs read from console logs (qwen35_a, ")
    assert "qwen35_b)" in note and "with_config" not in note and "csv_run" not in note
    for words in ("--manifest", "manifest=", "path, run, group_size, model", "README.md"):
        assert words in note, words
    assert run_coords(ds, "with_config")["group_size"] == 8
    # a manifest giving G to one of them leaves the other named
    manifest = tmp_path / "runs.csv"
    manifest.write_text(f"path,run,group_size\n{root / 'qwen35_a' / 'train.log'},qwen35_a,4\n")
    ds = load_runs([root], manifest=manifest)
    assert run_coords(ds, "qwen35_a")["group_size"] == 4
    assert unknown_settings_note(ds).startswith(
        "G and model unknown for 1 run read from console logs (qwen35_b): "
    )
    # none to name: no note, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_runs([root / "with_config", root / "csv_run"])
    assert unknown_settings_note(ds) is None


def test_the_cli_prints_the_note_once_and_gives_it_in_json(tmp_path, capsys):
    root = _runs(tmp_path)
    out = tmp_path / "runs.nc"
    assert main(["ingest", str(root), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("G and model unknown for 2 runs read from console logs") == 1
    assert "\nnote: G and model unknown" in text
    assert main(["ingest", str(root), "-o", str(out), "--overwrite", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    (note,) = payload["notes"]
    assert note.startswith("G and model unknown for 2 runs read from console logs")
    # a run set of runs that know their G: no notes
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
    assert unknown_settings_note(ds).startswith("G and model unknown for 1 run read from console")
