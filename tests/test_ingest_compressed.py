"""Compressed logs (``log.csv.gz``, ``train.log.xz``, ``trainer_state.json.bz2``) ingest as the
logs they hold; those that cannot be read are rejected sources naming the file and why."""

import bz2
import gzip
import json
import lzma
import shlex
import shutil
import subprocess
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from bayes_grpo.runset import RunSetError, run_coords, runset_warnings
from bayes_grpo.runset.ingest import INGEST_ATTR, load_runs, rejected_runs, runset_summary
from bayes_grpo.runset.loaders import (
    DECOMPRESSORS,
    LogFormatError,
    choose_trainer_state,
    detect_format,
    load_file,
)

N = 12
REWARD = [round(0.1 + 0.05 * i, 4) for i in range(N)]
TINY_RUN = Path(__file__).resolve().parents[1] / "data" / "tiny" / "g4_p8_lr0.001_k1_adamw_s0"
COMPRESS = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".lzma": partial(lzma.compress, format=lzma.FORMAT_ALONE),  # LZMA Utils' legacy format
}


def _console_lines():
    return [
        "Loading weights: 100%|##| 427/427",
        *(
            repr({"loss": 0.1, "reward": r, "kl": 0.01, "epoch": (s + 1) / N})
            for s, r in enumerate(REWARD)
        ),
    ]


def _write_log(folder: Path, kind: str) -> Path:
    """One run's log of the given kind in ``folder`` (the run folder), plain."""
    folder.mkdir(parents=True, exist_ok=True)
    steps = range(1, N + 1)
    if kind == "trainer_state":  # the project's own runner output, with its sidecar beside it
        for f in TINY_RUN.iterdir():
            shutil.copy(f, folder / f.name)
        return folder / "trainer_state.json"
    if kind == "json_state":  # a Trainer state under another name: told by its content
        history = [{"step": s, "reward": r, "loss": 0.0} for s, r in zip(steps, REWARD)]
        path = folder / "state_copy.json"
        path.write_text(json.dumps({"global_step": N, "log_history": history}, indent=1))
        return path
    if kind == "csv":
        path = folder / "metrics.csv"
        path.write_text(
            "step,reward,kl\n" + "".join(f"{s},{r},0.01\n" for s, r in zip(steps, REWARD))
        )
        return path
    if kind == "tsv":
        path = folder / "metrics.tsv"
        path.write_text("step\treward\n" + "".join(f"{s}\t{r}\n" for s, r in zip(steps, REWARD)))
        return path
    if kind == "spaces":  # numpy.savetxt's default
        path = folder / "metrics.csv"
        path.write_text("# step reward\n" + "".join(f"{s} {r}\n" for s, r in zip(steps, REWARD)))
        return path
    if kind == "jsonl":
        path = folder / "metrics.jsonl"
        path.write_text(
            "".join(json.dumps({"step": s, "reward": r}) + "\n" for s, r in zip(steps, REWARD))
        )
        return path
    if kind == "json_lines":  # one object per line in a .json: told by its first characters
        path = folder / "history.json"
        path.write_text(
            "".join(json.dumps({"step": s, "reward": r}) + "\n" for s, r in zip(steps, REWARD))
        )
        return path
    if kind == "json_list":
        path = folder / "history.json"
        path.write_text(json.dumps([{"step": s, "reward": r} for s, r in zip(steps, REWARD)]))
        return path
    if kind == "console":
        path = folder / "train.log"
        path.write_text("\n".join(_console_lines()) + "\n")
        return path
    if (
        kind == "console_utf16"
    ):  # PowerShell's redirect: the byte-order mark is in the decompressed text
        path = folder / "train.log"
        path.write_text("\r\n".join(_console_lines()) + "\r\n", encoding="utf-16")
        return path
    raise AssertionError(kind)


def _compress(path: Path, suffix: str) -> Path:
    packed = path.with_name(path.name + suffix)
    packed.write_bytes(COMPRESS[suffix](path.read_bytes()))
    path.unlink()
    return packed


KINDS = [
    "trainer_state",
    "json_state",
    "csv",
    "tsv",
    "spaces",
    "jsonl",
    "json_lines",
    "json_list",
    "console",
    "console_utf16",
]


@pytest.mark.parametrize("suffix", list(COMPRESS))
@pytest.mark.parametrize("kind", KINDS)
def test_a_compressed_log_ingests_as_the_log_it_holds(tmp_path, kind, suffix):
    # a compressed log was not read at all ("a compressed log (.gz), not read; decompress it
    # first"), though archived runs are often kept so
    run = TINY_RUN.name
    plain_log = _write_log(tmp_path / "plain" / run, kind)
    packed_log = _compress(_write_log(tmp_path / "packed" / run, kind), suffix)
    assert detect_format(packed_log) == detect_format(plain_log) is not None
    for given in ("folder", "file"):
        plain = load_runs([tmp_path / "plain" if given == "folder" else plain_log])
        packed = load_runs([tmp_path / "packed" if given == "folder" else packed_log])
        assert list(packed.run.values) == list(plain.run.values), given
        # the same values under the same names, the run's source the file it came from
        xr.testing.assert_equal(packed.drop_vars("source"), plain.drop_vars("source"))
        fmt = str(plain.source.values[0]).split(":", 1)[0]
        assert list(packed.source.values) == [f"{fmt}:{packed_log}"]
        summary = runset_summary(packed)
        assert summary["status"].tolist() == ["ok"]
        # the warnings are the plain log's, naming the compressed file
        plain_notes = runset_warnings(plain)
        packed_notes = runset_warnings(packed)
        assert {
            r: [
                n.replace(str(packed_log), str(plain_log)).replace(
                    str(tmp_path / "packed"), str(tmp_path / "plain")
                )
                for n in notes
            ]
            for r, notes in packed_notes.items()
        } == plain_notes


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_compressed_trainer_states_of_checkpoints_stand_for_their_run(tmp_path, suffix):
    # an output folder of checkpoints archived with their states compressed: the latest
    # checkpoint's state is the run's, as trainer_state.json's would be
    out = tmp_path / "qwen_g8"
    for step in (4, N):
        ckpt = out / f"checkpoint-{step}"
        ckpt.mkdir(parents=True)
        history = [{"step": s, "reward": r} for s, r in zip(range(1, step + 1), REWARD)]
        state = ckpt / "trainer_state.json"
        state.write_text(json.dumps({"global_step": step, "log_history": history}))
        _compress(state, suffix)
    ds = load_runs([tmp_path])
    assert list(ds.run.values) == ["qwen_g8"]
    np.testing.assert_allclose(ds.reward.sel(run="qwen_g8").dropna("step"), REWARD)
    assert ds.source.values[0].endswith(f"checkpoint-{N}/trainer_state.json{suffix}")
    # given the output folder itself, the same
    (state, _notes) = choose_trainer_state(out)
    assert state == out / f"checkpoint-{N}" / f"trainer_state.json{suffix}"


def _cut(data: bytes) -> bytes:
    return data[: len(data) * 2 // 3]


def test_a_corrupt_or_truncated_compressed_log_is_a_rejected_source_naming_the_file(tmp_path):
    good = tmp_path / "runs" / "good" / "metrics.csv"
    _write_log(good.parent, "csv")
    bad = tmp_path / "runs" / "bad"
    bad.mkdir(parents=True)
    rows = "step,reward\n" + "".join(f"{s},{0.001 * s}\n" for s in range(1, 5001))
    cut_csv = bad / "log.csv.gz"
    cut_csv.write_bytes(_cut(gzip.compress(rows.encode())))  # a copy interrupted
    garbage = bad / "train.log.gz"
    garbage.write_bytes(b"step,reward\n1,0.5\n")  # named .gz, not gzip
    # a console log cut after a long preamble: no metric dict in what can be read, so the sniff
    # finds none; it is still no readable archive, not a file without a log
    preamble = "".join(f"loading shard {i} of 4000\n" for i in range(4000))
    lines = preamble + "\n".join(_console_lines()) + "\n"
    cut_log = bad / "console.log.xz"
    cut_log.write_bytes(_cut(lzma.compress(lines.encode())))
    cut_state = bad / "trainer_state.json.bz2"
    history = [{"step": s, "reward": 0.001 * s} for s in range(1, 2001)]
    cut_state.write_bytes(_cut(bz2.compress(json.dumps({"log_history": history}).encode())))
    with pytest.warns(UserWarning, match="not ingested"):
        ds = load_runs([tmp_path / "runs"])
    assert list(ds.run.values) == ["good"]
    rejected = rejected_runs(ds)
    assert sorted(rejected) == sorted(map(str, [cut_csv, garbage, cut_log, cut_state]))
    for path, kind in [(cut_csv, "gzip"), (garbage, "gzip"), (cut_log, "xz"), (cut_state, "bzip2")]:
        reason = rejected[str(path)]["reason"]
        assert reason.startswith(f"{path}: not a readable {kind} file, corrupt or cut short ("), (
            reason
        )
    assert (
        "Compressed file ended before the end-of-stream marker was reached"
        in rejected[str(cut_csv)]["reason"]
    )
    for path in (cut_csv, garbage, cut_log, cut_state):  # given as a file, with --strict
        with pytest.raises(RunSetError, match=f"{path}: not a readable"):
            load_runs([path], on_error="raise")


@pytest.mark.parametrize("kind", ["trainer_state", "csv"])
def test_a_legacy_lzma_log_ingests_to_the_run_set_of_the_plain_log(tmp_path, kind):
    # a .lzma log (LZMA Utils' format, FORMAT_ALONE) was refused, "decompress it first (unlzma
    # -k ...)", though the standard library's lzma module reads it
    plain_log = _write_log(tmp_path / "plain" / "run_a", kind)
    packed_log = tmp_path / "packed" / "run_a" / (plain_log.name + ".lzma")
    shutil.copytree(plain_log.parent, packed_log.parent)
    packed_log.with_suffix("").unlink()
    packed_log.write_bytes(lzma.compress(plain_log.read_bytes(), format=lzma.FORMAT_ALONE))
    assert packed_log.read_bytes()[:1] == b"\x5d"  # the legacy header, not xz's \xfd7zXZ
    for given in ("folder", "file"):
        plain = load_runs([plain_log.parent.parent if given == "folder" else plain_log])
        packed = load_runs([packed_log.parent.parent if given == "folder" else packed_log])
        assert rejected_runs(packed) == {} and list(packed.run.values) == list(plain.run.values)
        xr.testing.assert_equal(packed.drop_vars("source"), plain.drop_vars("source"))
        assert str(packed.source.values[0]).endswith(f":{packed_log}")
    # one cut short is a rejected source naming the file, as a .xz one is
    packed_log.write_bytes(_cut(packed_log.read_bytes()))
    with pytest.raises(RunSetError) as err:
        load_runs([packed_log], on_error="raise")
    assert f"{packed_log}: not a readable lzma file, corrupt or cut short (" in str(err.value)


@pytest.mark.skipif(
    any(shutil.which(c) is None for c in ("bash", "lzcat")), reason="no bash, lzcat"
)
def test_the_join_command_of_rotated_lzma_pieces_decompresses_them_with_lzcat(tmp_path):
    # a .lzma piece is read here, so it is a piece of its log: the join command needs a command
    # that writes its text (lzcat), as zcat does a .gz piece's
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    (run / "train.log.2.lzma").write_bytes(COMPRESS[".lzma"](_dicts(range(1, N + 1)).encode()))
    (run / "train.log.1").write_text(_dicts(range(N + 1, 2 * N + 1)))
    (run / "train.log").write_text(_dicts(range(2 * N + 1, 3 * N + 1)))
    with pytest.warns(UserWarning, match="2 runs not ingested"):
        ds = load_runs([tmp_path / "runs"])
    reason = rejected_runs(ds)[str(run / "train.log.2.lzma")]["reason"]
    q = shlex.quote
    joined = run / "train.joined.log"
    join = (
        f"{{ lzcat {q(str(run / 'train.log.2.lzma'))}; cat {q(str(run / 'train.log.1'))} "
        f"{q(str(run / 'train.log'))}; }} > {q(str(joined))}"
    )
    assert f"into one log, {join}, and ingest that file" in reason, reason
    subprocess.run(["bash", "-c", join], check=True)
    np.testing.assert_allclose(
        load_runs([joined]).reward.isel(run=0).dropna("step"),
        [0.01 * s for s in range(1, 3 * N + 1)],
    )


def test_a_log_beside_its_compressed_copy_are_both_read_as_one_training_read_twice(tmp_path):
    # the folder's log.csv.gz was a rejected source beside the log.csv it copies; read, the two
    # are told apart by their file names and named in each other's warnings
    run = tmp_path / "qwen_g4"
    plain = _write_log(run, "csv")
    (run / "metrics.csv.gz").write_bytes(gzip.compress(plain.read_bytes()))
    ds = load_runs([tmp_path])
    assert sorted(ds.run.values) == ["qwen_g4/metrics.csv", "qwen_g4/metrics.csv.gz"]
    warned = runset_warnings(ds)
    for run_id, other in [
        ("qwen_g4/metrics.csv", "qwen_g4/metrics.csv.gz"),
        ("qwen_g4/metrics.csv.gz", "qwen_g4/metrics.csv"),
    ]:
        assert any(
            f"the same rewards as run {other!r}" in w and "one training read twice" in w
            for w in warned[run_id]
        )


@pytest.mark.parametrize(
    ("name", "what", "command"),
    [
        pytest.param(
            "metrics.jsonl.zst",
            "log (.zst)",
            "unzstd",
            marks=pytest.mark.skipif(
                ".zst" in DECOMPRESSORS, reason="the zstandard module reads .zst here"
            ),
        ),
        ("events.out.tfevents.1700000000.host.1.0.gz", "TensorBoard event file (.gz)", "gunzip -k"),
        (
            "events.out.tfevents.1700000000.host.1.0.lzma",
            "TensorBoard event file (.lzma)",
            "unlzma -k",
        ),
    ],
)
def test_a_compressed_log_not_read_here_is_a_rejected_source_saying_how_to_read_it(
    tmp_path, name, what, command
):
    # zstd without the zstandard module; an event file, which TensorBoard reads as it lies on disk
    # (a compressed one was read as one and rejected as "a damaged record header")
    _write_log(tmp_path / "runs" / "plain", "csv")
    packed = tmp_path / "runs" / "packed" / name
    packed.parent.mkdir(parents=True)
    packed.write_bytes(gzip.compress(b"\x00" * 64))
    with pytest.warns(UserWarning, match="not ingested"):
        ds = load_runs([tmp_path / "runs"])
    assert list(ds.run.values) == ["plain"]
    ((source, info),) = rejected_runs(ds).items()
    assert source == str(packed)
    inner = name.rsplit(".", 1)[0]
    assert info["reason"] == (
        f"{packed}: a compressed {what}, not read; decompress it first ({command} "
        f"{shlex.quote(str(packed))}) and ingest the {inner} it gives"
        # zstd is read with the zstandard module; an event file is read by no module compressed
        + (
            ", or install the zstandard module (pip install zstandard), which reads it as it is"
            if name.endswith(".zst")
            else ""
        )
    )
    with pytest.raises(RunSetError, match="a compressed .*decompress it first"):  # given as a file
        load_runs([packed], on_error="raise")


def test_a_zstd_log_is_read_where_the_zstandard_module_is_installed(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    plain = _write_log(tmp_path / "plain" / "qwen", "jsonl")
    packed = tmp_path / "packed" / "qwen" / "metrics.jsonl.zst"
    packed.parent.mkdir(parents=True)
    packed.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    a, b = load_runs([tmp_path / "plain"]), load_runs([tmp_path / "packed"])
    xr.testing.assert_equal(a.drop_vars("source"), b.drop_vars("source"))
    packed.write_bytes(b"not zstd")
    with pytest.raises(
        RunSetError, match=f"{packed}: not a readable zstd file, corrupt or cut short"
    ):
        load_runs([packed], on_error="raise")


def _write_trl_run(folder: Path) -> None:
    """A TRL run folder: its Trainer state, GRPOConfig and the model's config."""
    folder.mkdir(parents=True)
    history = [{"step": s, "reward": r, "loss": 0.0} for s, r in zip(range(1, N + 1), REWARD)]
    (folder / "trainer_state.json").write_text(
        json.dumps({"global_step": N, "log_history": history})
    )
    args = {"num_generations": 8, "learning_rate": 1e-6, "beta": 0.04, "seed": 3, "adam_beta1": 0.9}
    (folder / "training_args.json").write_text(json.dumps(args))
    model = {
        "model_type": "qwen2",
        "_name_or_path": "Qwen/Qwen2.5-0.5B",
        "architectures": ["Qwen2ForCausalLM"],
    }
    (folder / "config.json").write_text(json.dumps(model))


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_a_run_folder_compressed_file_by_file_keeps_its_hyperparameters(tmp_path, suffix):
    # `gzip -r run/` compresses the configs beside the log too: the run's state was read, its
    # G, beta, seed, momentum and model lost without a word (only the logged learning rate left)
    _write_trl_run(tmp_path / "plain" / "qwen_run")
    shutil.copytree(tmp_path / "plain", tmp_path / "packed")
    for f in list((tmp_path / "packed" / "qwen_run").iterdir()):
        _compress(f, suffix)
    plain, packed = load_runs([tmp_path / "plain"]), load_runs([tmp_path / "packed"])
    assert list(packed.run.values) == list(plain.run.values) == ["qwen_run"]
    xr.testing.assert_equal(packed.drop_vars("source"), plain.drop_vars("source"))
    coords = run_coords(packed, "qwen_run")
    assert coords["group_size"] == 8 and coords["beta"] == 0.04 and coords["seed"] == 3
    assert coords["momentum"] == 0.9 and coords["model"] == "Qwen/Qwen2.5-0.5B"
    assert not rejected_runs(packed)  # the compressed configs are no logs


def test_a_corrupt_compressed_config_is_named_in_the_runs_warnings(tmp_path):
    run = tmp_path / "qwen_run"
    _write_trl_run(run)
    (run / "training_args.json").unlink()
    (run / "training_args.json.gz").write_bytes(_cut(gzip.compress(b'{"num_generations": 8}' * 50)))
    ds = load_runs([tmp_path])
    notes = runset_warnings(ds)["qwen_run"]
    assert any(
        f"{run / 'training_args.json.gz'}: not read (EOFError: Compressed file ended" in n
        for n in notes
    ), notes


@pytest.mark.parametrize("name", ["config.yaml", "training_args.json", "config.json"])
def test_a_config_beside_its_compressed_copy_follows_the_trainer_states_rule(tmp_path, name):
    # the plain config won silently: cut short or corrupt, it was 'not read' and its readable
    # compressed copy beside it was never tried (G, beta, model lost); readable, the copy beside
    # it was left out without a word. A Trainer state's copies were already read so.
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "reward": r}) + "\n" for s, r in zip(range(1, N + 1), REWARD)
        )
    )
    if name == "config.json":
        content = {"model_type": "qwen2", "_name_or_path": "Qwen/Qwen2.5-0.5B"}
        coord, value = "model", "Qwen/Qwen2.5-0.5B"
    else:
        content = {"num_generations": 8, "beta": 0.04}
        coord, value = "group_size", 8
    text = json.dumps(content)
    (run / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
    (run / name).write_text(text[: len(text) // 2] if name.endswith(".json") else "a: [1\nb: 2\n")
    ds = load_runs([tmp_path / "runs"])
    assert run_coords(ds, "run_a")[coord] == value
    (note,) = [n for n in runset_warnings(ds)["run_a"] if str(run / name) in n]
    assert note.startswith(f"{run / 'metrics.jsonl'}: {run / name}: not read (")
    assert note.endswith(f"; passed over for {run / name}.gz, a copy beside it")
    # a readable plain config is read, and its copy named as not read
    (run / name).write_text(text.replace("8", "4").replace("0.5B", "1.5B"))
    ds = load_runs([tmp_path / "runs"])
    assert run_coords(ds, "run_a")[coord] == (4 if coord == "group_size" else "Qwen/Qwen2.5-1.5B")
    assert [n for n in runset_warnings(ds)["run_a"] if str(run / name) in n] == [
        f"{run / 'metrics.jsonl'}: read {run / name}; {run / name}.gz beside it is not read (a "
        f"compressed copy, or another config: remove {run / name} to read it)"
    ]


def _pickled_args(**args) -> bytes:
    """A training_args.bin as torch.save lays it out (a zip holding */data.pkl) of ``args``."""
    import io
    import pickle
    import types
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("training_args/data.pkl", pickle.dumps(types.SimpleNamespace(**args)))
    return buffer.getvalue()


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_a_compressed_training_args_bin_is_read_as_the_plain_one(tmp_path, suffix):
    # `gzip -r` of a Trainer's output folder: training_args.bin.gz (often the only record of the
    # run's G, learning rate and seed) was left out without a word, where the plain one is read
    run = tmp_path / "runs" / "run_a"
    _write_log(run, "jsonl")
    packed = run / f"training_args.bin{suffix}"
    packed.write_bytes(COMPRESS[suffix](_pickled_args(num_generations=8, seed=3)))
    ds = load_runs([tmp_path / "runs"])
    assert rejected_runs(ds) == {}
    coords = run_coords(ds, "run_a")
    assert (coords["group_size"], coords["seed"]) == (8, 3)
    sources = json.loads(ds.attrs[INGEST_ATTR])["run_a"]["hyperparameter_sources"]
    assert sources["group_size"].startswith(f"{packed} (read without running its code)")
    # one cut short is named as not read, as the plain one that cannot be read is
    packed.write_bytes(_cut(COMPRESS[suffix](_pickled_args(num_generations=8) * 20)))
    ds = load_runs([tmp_path / "runs"])
    assert np.isnan(run_coords(ds, "run_a")["group_size"])
    (note,) = [n for n in runset_warnings(ds)["run_a"] if "training_args.bin" in n]
    assert f"{packed}: not read (" in note
    assert note.endswith(
        "; export the arguments with args.to_json_string() to training_args.json or use a manifest"
    )


@pytest.mark.parametrize("name", ["training_args.json", "config.yaml", "training_args.bin"])
def test_a_zstd_config_not_read_here_is_named_in_the_runs_warnings_not_a_run(
    tmp_path, monkeypatch, name
):
    # without zstandard, training_args.json.zst was a rejected run ('a compressed log (.zst) ...
    # ingest the training_args.json it gives', a config, which ingest does not read as a log);
    # config.yaml.zst and training_args.bin.zst were left out without a word
    monkeypatch.delitem(DECOMPRESSORS, ".zst", raising=False)  # as without zstandard
    run = tmp_path / "runs" / "run_a"
    _write_log(run, "jsonl")
    packed = run / f"{name}.zst"
    packed.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(200)))
    ds = load_runs([tmp_path / "runs"])
    assert rejected_runs(ds) == {}
    assert list(ds.run.values) == ["run_a"]
    (note,) = [n for n in runset_warnings(ds)["run_a"] if str(packed) in n]
    assert (
        f"{packed}: not read (compressed with zstd, which the zstandard module reads: pip " in note
    )
    assert f"install zstandard; or decompress it, unzstd {shlex.quote(str(packed))})" in note
    # beside a readable plain copy, which is read, it is named alike
    if name == "training_args.json":
        (run / name).write_text(json.dumps({"num_generations": 8}))
        ds = load_runs([tmp_path / "runs"])
        assert run_coords(ds, "run_a")["group_size"] == 8
        assert [n for n in runset_warnings(ds)["run_a"] if str(packed) in n] == [note]


def test_wandbs_own_debug_logs_compressed_are_no_runs(tmp_path):
    # wandb's debug.log prints the run's config as a dict with an 'epoch'; compressed with the
    # run (debug.log.gz), it was taken for a console log: a run without a reward, rejected, and
    # --strict stopped the ingest (the plain debug.log is passed over)
    out = tmp_path / "out"
    _write_log(out, "trainer_state")
    logs = out / "wandb" / "run-20250301_100000-abc123" / "logs"
    logs.mkdir(parents=True)
    config_line = "config_cb None None {'lr': 1e-06, 'group_size': 8, 'epoch': 0}"
    line = f"2025-03-01 10:00:05,123 INFO MainThread:1 {config_line}\n"
    for name in ("debug.log.gz", "debug-internal.log.gz"):
        (logs / name).write_bytes(gzip.compress(line.encode()))
    ds = load_runs([tmp_path], on_error="raise")
    assert list(ds.run.values) == ["out"] and rejected_runs(ds) == {}


def test_a_trainer_state_beside_its_compressed_copy_names_the_copy_not_read(tmp_path):
    # the plain state was read and the compressed one left out without a word, though here it
    # holds the longer training (24 steps against 12)
    run = tmp_path / "runs" / "run_a"
    ckpt = run / f"checkpoint-{N}"
    ckpt.mkdir(parents=True)
    for folder, steps in ((run, N), (ckpt, N)):
        history = [{"step": s, "reward": 0.1 * s} for s in range(1, steps + 1)]
        (folder / "trainer_state.json").write_text(
            json.dumps({"global_step": steps, "log_history": history})
        )
    longer = [{"step": s, "reward": 0.1 * s} for s in range(1, 2 * N + 1)]
    packed = json.dumps({"global_step": 2 * N, "log_history": longer}).encode()
    (run / "trainer_state.json.gz").write_bytes(gzip.compress(packed))
    ds = load_runs([tmp_path / "runs"])
    assert list(ds.source.values) == [f"trainer_state:{run / 'trainer_state.json'}"]
    assert runset_warnings(ds)["run_a"] == [
        f"{run / 'trainer_state.json'}: read trainer_state.json; trainer_state.json.gz beside "
        "it is not read (a compressed copy, or another state: give trainer_state.json.gz to "
        "read it)"
    ]
    # a checkpoint's state alike, where the checkpoint's is the run's
    (run / "trainer_state.json").unlink()
    (run / "trainer_state.json.gz").unlink()
    (ckpt / "trainer_state.json.xz").write_bytes(lzma.compress(packed))
    state, notes = choose_trainer_state(run)
    assert state == ckpt / "trainer_state.json"
    assert notes == [
        f"read checkpoint-{N}/trainer_state.json; checkpoint-{N}/trainer_state.json.xz beside "
        f"it is not read (a compressed copy, or another state: give "
        f"checkpoint-{N}/trainer_state.json.xz to read it)"
    ]
    # one state alone: no note
    (ckpt / "trainer_state.json.xz").unlink()
    assert choose_trainer_state(run) == (ckpt / "trainer_state.json", [])


def test_a_zstd_checkpoint_state_not_read_here_is_named(tmp_path, monkeypatch):
    # without zstandard, an output folder whose checkpoint holds trainer_state.json.zst was "no
    # log of a known format found here", and beside an older readable checkpoint the older one
    # was read without a word of the later state
    monkeypatch.delitem(DECOMPRESSORS, ".zst", raising=False)  # as without zstandard
    out = tmp_path / "runs" / "out"
    packed = out / "checkpoint-12" / "trainer_state.json.zst"
    packed.parent.mkdir(parents=True)
    packed.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(200)))
    unzstd = f"unzstd {shlex.quote(str(packed))}"
    for given in (tmp_path / "runs", out):
        with pytest.raises(RunSetError) as err:
            load_runs([given])
        assert str(err.value) == (
            f"no run could be ingested: {packed}: a compressed log (.zst), not read; decompress "
            f"it first ({unzstd}) and ingest the trainer_state.json it gives, or install the "
            "zstandard module (pip install zstandard), which reads it as it is"
        )
    why = (
        f"{packed}: not read (compressed with zstd, which the zstandard module reads: pip install "
        f"zstandard; or decompress it, {unzstd})"
    )
    older = out / "checkpoint-6"
    _write_log(older, "json_state").rename(older / "trainer_state.json")
    ds = load_runs([tmp_path / "runs"])
    assert list(ds.source.values) == [f"trainer_state:{older / 'trainer_state.json'}"]
    (note,) = [n for n in runset_warnings(ds)["out"] if str(packed) in n]
    assert why in note and "passed over for checkpoint-6/trainer_state.json" in note


def test_the_notes_of_a_zstd_checkpoint_state_give_zstd_as_the_reason_and_how_to_read_it(
    tmp_path, monkeypatch
):
    # a .zst checkpoint passed over was guessed "(a checkpoint being saved while the run goes
    # on?)" though the reason was zstd; and a run folder's own state older than a checkpoint's
    # .zst said "give checkpoint-12/trainer_state.json.zst to read them", which fails so too
    monkeypatch.delitem(DECOMPRESSORS, ".zst", raising=False)  # as without zstandard
    out = tmp_path / "runs" / "out"
    packed = out / "checkpoint-12" / "trainer_state.json.zst"
    packed.parent.mkdir(parents=True)
    packed.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(200)))
    why = (
        "compressed with zstd, which the zstandard module reads: pip install zstandard; or "
        f"decompress it, unzstd {shlex.quote(str(packed))}"
    )
    older = out / "checkpoint-6"
    _write_log(older, "json_state").rename(older / "trainer_state.json")
    (note,) = [n for n in runset_warnings(load_runs([out]))["out"] if str(packed) in n]
    assert note.endswith(
        f"{packed}: not read ({why}); passed over for checkpoint-6/trainer_state.json, the "
        "latest readable state"
    ), note
    # a checkpoint cut short is still a save going on, beside the zstd one
    cut = out / "checkpoint-9" / "trainer_state.json"
    cut.parent.mkdir()
    cut.write_text('{"log_history": [')
    notes = [n for n in runset_warnings(load_runs([out]))["out"] if "passed over" in n]
    assert [n.endswith("(a checkpoint being saved while the run goes on?)") for n in notes] == [
        False,
        True,
    ], notes
    # the run folder's own state ends before the .zst checkpoint
    shutil.rmtree(older)
    shutil.rmtree(cut.parent)
    history = [{"step": s, "reward": 0.1 * s} for s in range(1, 7)]
    (out / "trainer_state.json").write_text(json.dumps({"global_step": 6, "log_history": history}))
    ds = load_runs([out], min_points=5)  # its 6 points kept
    (note,) = [n for n in runset_warnings(ds)["out"] if "is later" in n]
    assert note.endswith(
        "but checkpoint-12/trainer_state.json.zst is later (a training resumed after "
        "trainer_state.json was written?); its later steps are not read: it is not read here "
        f"({why}), then give checkpoint-12 to read them"
    ), note


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "console", "trainer_state"])
def test_a_format_given_for_a_compressed_log_not_read_here_refuses_it_saying_how(
    tmp_path, monkeypatch, fmt
):
    # load_file(path, fmt=...) read a .zst's compressed bytes as that format's text: "cannot read
    # the file ('utf-8' codec can't decode byte 0xb5 ...)", or for a console log "no Trainer
    # metric dicts ... found"; without fmt it said how to decompress it
    monkeypatch.delitem(DECOMPRESSORS, ".zst", raising=False)  # as without zstandard
    packed = tmp_path / "metrics.jsonl.zst"
    packed.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(200)))
    refusal = (
        f"{packed}: a compressed log (.zst), not read; decompress it first (unzstd "
        f"{shlex.quote(str(packed))}) and ingest the metrics.jsonl it gives, or install the "
        "zstandard module (pip install zstandard), which reads it as it is"
    )
    for given in (None, fmt):
        with pytest.raises(LogFormatError) as err:
            load_file(packed, given)
        assert str(err.value) == refusal
    # an event file is read as it lies on disk: a compressed one given as one is refused alike
    events = tmp_path / "events.out.tfevents.1700000000.host.1.0.gz"
    events.write_bytes(gzip.compress(b"\x00" * 64))
    with pytest.raises(LogFormatError, match=r"a compressed TensorBoard event file \(\.gz\), not "):
        load_file(events, "tensorboard")
    # a compressed log read here is read with the format given
    plain = _write_log(tmp_path / "run", "jsonl")
    assert load_file(_compress(plain, ".gz"), "jsonl")[0].records["value"].tolist() == REWARD


def _dicts(steps) -> str:
    return "".join(
        repr({"loss": 0.1, "reward": 0.01 * s, "epoch": s / (3 * N)}) + "\n" for s in steps
    )


def test_rotated_pieces_of_a_log_are_rejected_sources_saying_how_to_join_them(tmp_path):
    # train.log.1 and train.log.2.gz (logrotate, RotatingFileHandler) were left out without a
    # word: the run was train.log's last 12 dicts only, numbered from step 1
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    (run / "train.log.2.gz").write_bytes(gzip.compress(_dicts(range(1, N + 1)).encode()))
    (run / "train.log.1").write_text(_dicts(range(N + 1, 2 * N + 1)))
    (run / "train.log").write_text(_dicts(range(2 * N + 1, 3 * N + 1)))
    (run / "notes.txt.1").write_text("no metrics in this one\n")  # a rotated file of no log
    # numbered files of no log's name (data shards) are no pieces, nor read through for metrics
    (run / "shard.00001").write_text(_dicts(range(1, N + 1)))
    with pytest.warns(UserWarning, match="2 runs not ingested"):
        ds = load_runs([tmp_path / "runs"])
    assert list(ds.run.values) == ["run_a"]
    rejected = rejected_runs(ds)
    assert sorted(rejected) == [str(run / "train.log.1"), str(run / "train.log.2.gz")]
    joined = run / "train.joined.log"

    def q(path: Path) -> str:
        return shlex.quote(str(path))

    join = (
        f"{{ zcat {q(run / 'train.log.2.gz')}; cat {q(run / 'train.log.1')} {q(run / 'train.log')}; }}"
        f" > {q(joined)}"
    )
    for piece, info in rejected.items():
        assert info["reason"] == (
            f"{piece}: a rotated piece of train.log (logrotate, Python's RotatingFileHandler: the "
            "highest number is the oldest), not read as a run of its own; join the pieces oldest "
            f"first (train.log.2.gz, train.log.1, train.log) into one log, {join}, and ingest "
            "that file (not the folder, whose pieces would be read again)"
        )
    with pytest.raises(RunSetError, match="a rotated piece of train.log"):  # given as a file
        load_runs([run / "train.log.1"], on_error="raise")
    # the command said gives the whole training, in order
    if shutil.which("zcat") is None or shutil.which("bash") is None:
        pytest.skip("no zcat / bash to run the join command")
    subprocess.run(["bash", "-c", join], check=True)
    whole = load_runs([joined])
    np.testing.assert_allclose(
        whole.reward.isel(run=0).dropna("step"), [0.01 * s for s in range(1, 3 * N + 1)]
    )


@pytest.mark.skipif(any(shutil.which(c) is None for c in ("bash", "zcat")), reason="no bash, zcat")
def test_the_join_command_of_rotated_pieces_takes_their_compressed_current_log(tmp_path):
    # a run folder compressed with gzip -r holds train.log.gz beside train.log.2.gz, train.log.1.gz:
    # the join command left train.log.gz out (it looked for train.log only), and the log it
    # gave lacked the training's last steps
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    for name, steps in (
        ("train.log.2.gz", range(1, N + 1)),
        ("train.log.1.gz", range(N + 1, 2 * N + 1)),
        ("train.log.gz", range(2 * N + 1, 3 * N + 1)),
    ):
        (run / name).write_bytes(gzip.compress(_dicts(steps).encode()))
    with pytest.warns(UserWarning, match="2 runs not ingested"):
        ds = load_runs([tmp_path / "runs"])
    assert list(ds.source.values) == [f"console:{run / 'train.log.gz'}"]
    reason = rejected_runs(ds)[str(run / "train.log.1.gz")]["reason"]
    joined = run / "train.joined.log"
    pieces = " ".join(shlex.quote(str(run / n)) for n in ("train.log.2.gz", "train.log.1.gz"))
    join = f"zcat {pieces} {shlex.quote(str(run / 'train.log.gz'))} > {shlex.quote(str(joined))}"
    assert (
        f"join the pieces oldest first (train.log.2.gz, train.log.1.gz, train.log.gz) into one "
        f"log, {join}, and ingest that file"
    ) in reason
    subprocess.run(["bash", "-c", join], check=True)
    np.testing.assert_allclose(
        load_runs([joined]).reward.isel(run=0).dropna("step"),
        [0.01 * s for s in range(1, 3 * N + 1)],
    )


@pytest.mark.parametrize("unread", ["train.log.1", "other.log.gz"])
def test_a_manifest_rows_folder_with_a_file_not_read_beside_its_log_is_that_run(tmp_path, unread):
    # a rotated piece or a corrupt compressed log (files the folder search names as rejected
    # sources) beside the row's log made the row "hold 2 logs
    # [...]; point the row at one", and the run was not ingested at all
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    (run / "train.log").write_text(_dicts(range(1, N + 1)))
    if unread == "train.log.1":
        (run / unread).write_text(_dicts(range(1, N + 1)))
    else:
        (run / unread).write_bytes(b"\x1f\x8b not gzip")  # corrupt: no log to find in it
    manifest = tmp_path / "runs.csv"
    manifest.write_text(f"path,run,group_size\n{run},mine,8\n")
    with pytest.warns(UserWarning, match="1 run not ingested"):
        ds = load_runs([], manifest=manifest)
    assert list(ds.run.values) == ["mine"]
    assert run_coords(ds, "mine")["group_size"] == 8
    ((source, info),) = rejected_runs(ds).items()
    assert source == str(run / unread) and info["run"] is None
    (run / "train.log").unlink()
    if unread == "train.log.1":  # a piece alone is read as its log, the row's run
        ds = load_runs([], manifest=manifest)
        assert list(ds.source.values) == [f"console:{run / unread}"]
        assert list(ds.run.values) == ["mine"]
        return
    # a folder of nothing else: the row's run is the one rejected
    with pytest.raises(RunSetError, match=f"no run could be ingested: {run / unread}: "):
        load_runs([], manifest=manifest)


@pytest.mark.parametrize(
    ("current", "names"),
    [
        ("train.log", ("train.log-20261205.gz", "train.log-20261206")),  # logrotate's dateext
        ("train.log", ("train.log.2026-12-05", "train.log.2026-12-06")),  # TimedRotating..., daily
        ("metrics.jsonl", ("metrics.jsonl.2026-12-05_10-00", "metrics.jsonl.2026-12-05_11-00")),
    ],
)
def test_dated_pieces_of_a_log_are_rejected_sources_joined_earliest_first(tmp_path, current, names):
    # logrotate's dateext piece 'train.log-20261205' was read as a console log of its own (its
    # suffix '.log-20261205' starts with '.log'): one training became three runs, each numbered
    # from step 1; TimedRotatingFileHandler's pieces were left out without a word
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    texts = [_dicts(range(1 + i * N, 1 + (i + 1) * N)) for i in range(3)]
    if current.endswith(".jsonl"):
        texts = [
            "".join(
                json.dumps({"step": s, "reward": 0.01 * s}) + "\n"
                for s in range(i * N + 1, (i + 1) * N + 1)
            )
            for i in range(3)
        ]
    for name, text in zip((*reversed(names), current), reversed(texts)):
        # written newest first: the order is the names', not the files' times
        data = text.encode()
        (run / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.warns(UserWarning, match="2 runs not ingested"):
        ds = load_runs([tmp_path / "runs"])
    assert list(ds.run.values) == ["run_a"]
    assert list(ds.source.values)[0].endswith(f":{run / current}")
    rejected = rejected_runs(ds)
    assert sorted(rejected) == sorted(str(run / n) for n in names)
    for piece, info in rejected.items():
        assert info["reason"].startswith(
            f"{piece}: a rotated piece of {current} (logrotate's dateext, Python's "
            "TimedRotatingFileHandler: the earliest is the oldest), not read as a run of its own; "
            f"join the pieces oldest first ({names[0]}, {names[1]}, {current}) into one log, "
        )


@pytest.mark.parametrize("name", ["train.log.1", "train.log-20261205.gz", "metrics.jsonl.2"])
def test_a_rotated_piece_alone_is_read_as_its_log(tmp_path, name):
    # with no other piece nor its log beside it there is nothing to join: the piece is the log
    # (a numbered one was left out without a word)
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    text = _dicts(range(1, N + 1))
    if "jsonl" in name:
        text = "".join(json.dumps({"step": s, "reward": 0.01 * s}) + "\n" for s in range(1, N + 1))
    (run / name).write_bytes(
        gzip.compress(text.encode()) if name.endswith(".gz") else text.encode()
    )
    assert detect_format(run / name) == ("jsonl" if "jsonl" in name else "console")
    for given in (tmp_path / "runs", run / name):
        ds = load_runs([given])
        assert rejected_runs(ds) == {}
        np.testing.assert_allclose(
            ds.reward.isel(run=0).dropna("step"), [0.01 * s for s in range(1, N + 1)]
        )


@pytest.mark.parametrize(
    ("log", "piece"),
    [
        ("train.log", "train.log.1"),
        ("train.log", "train.log-20261205.gz"),
        ("qwen_g8.log", "qwen_g8.log.3"),
        ("metrics.jsonl", "metrics.jsonl.2"),
    ],
)
def test_a_rotated_piece_alone_is_named_as_its_log_would_be(tmp_path, log, piece):
    # read as its log, a piece alone was named by its own file name: run_a/train.log.1 was the run
    # 'train.log.1' where run_a/train.log is 'run_a', logs/qwen_g8.log.3 'qwen_g8.log.3'
    text = _dicts(range(1, N + 1))
    if "jsonl" in log:
        text = "".join(json.dumps({"step": s, "reward": 0.01 * s}) + "\n" for s in range(1, N + 1))
    ids = []
    for name, top in ((log, "plain"), (piece, "rotated")):
        folder = tmp_path / top / "run_a" / "logs"
        folder.mkdir(parents=True)
        data = text.encode()
        (folder / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        ids.append(
            [list(load_runs([given]).run.values) for given in (folder.parent, folder / name)]
        )
    assert ids[1] == ids[0]
    assert ids[0][0] == (["qwen_g8"] if log.startswith("qwen") else ["run_a"])


@pytest.mark.skipif(
    any(shutil.which(c) is None for c in ("bash", "tar", "gunzip")), reason="no bash, tar or gunzip"
)
def test_the_shell_commands_of_messages_quote_a_path_holding_a_quote(tmp_path):
    # the join, unpack and decompress commands put each path in single quotes by hand: in a
    # folder "bob's runs" the command copied from the message was a shell syntax error
    import tarfile

    top = tmp_path / "bob's runs"
    run = top / "run_a"
    run.mkdir(parents=True)
    (run / "train.log.1").write_text(_dicts(range(1, N + 1)))
    (run / "train.log").write_text(_dicts(range(N + 1, 2 * N + 1)))
    packed = top / "more.tar.gz"
    _write_log(tmp_path / "src" / "run_b", "csv")
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(tmp_path / "src" / "run_b", arcname="run_b")
    events = top / "tb" / "events.out.tfevents.1700000000.host.1.0.gz"
    events.parent.mkdir()
    events.write_bytes(gzip.compress(b"\x00" * 64))
    with pytest.warns(UserWarning, match="2 runs not ingested"):
        reasons = {k: v["reason"] for k, v in rejected_runs(load_runs([top])).items()}
    with pytest.raises(RunSetError) as err:  # an archive is named so when given as a file
        load_runs([packed])
    reasons[str(packed)] = str(err.value)

    def command(reason: str, before: str, after: str) -> str:
        assert before in reason and after in reason, reason
        return reason.split(before, 1)[1].rsplit(after, 1)[0]

    q = shlex.quote
    join = command(reasons[str(run / "train.log.1")], "into one log, ", ", and ingest that file")
    assert join == f"cat {q(str(run / 'train.log.1'))} {q(str(run / 'train.log'))} > " + q(
        str(run / "train.joined.log")
    )
    unpack = command(reasons[str(packed)], "unpack it first (", ") and ingest")
    assert unpack == f"tar -xzf {q(str(packed))} -C {q(str(top))}"
    decompress = command(reasons[str(events)], "decompress it first (", ") and ingest")
    assert decompress == f"gunzip -k {q(str(events))}"
    # each command as given runs (the unpacking from another folder: it unpacks beside the archive)
    (tmp_path / "elsewhere").mkdir()
    for cmd, cwd in ((join, top), (unpack, tmp_path / "elsewhere"), (decompress, top)):
        subprocess.run(["bash", "-c", cmd], check=True, cwd=cwd, capture_output=True)
    whole = load_runs([run / "train.joined.log"])
    np.testing.assert_allclose(
        whole.reward.isel(run=0).dropna("step"), [0.01 * s for s in range(1, 2 * N + 1)]
    )
    assert (top / "run_b" / "metrics.csv").is_file()
    assert events.with_suffix("").read_bytes() == b"\x00" * 64


def test_a_zstd_rotated_piece_not_read_here_says_how_to_read_it(tmp_path, monkeypatch):
    # zstandard is not installed in the project's environment: a .zst is not read there. A
    # rotated piece train.log.1.zst beside train.log was named 'a compressed log ... ingest the
    # train.log.1 it gives', itself a piece to join; no message said the zstandard module reads it
    monkeypatch.delitem(DECOMPRESSORS, ".zst", raising=False)  # as without zstandard
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    (run / "train.log").write_text(_dicts(range(N + 1, 2 * N + 1)))
    piece = run / "train.log.1.zst"
    piece.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(200)))
    with pytest.warns(UserWarning, match="1 run not ingested"):
        ds = load_runs([tmp_path / "runs"])
    assert list(ds.run.values) == ["run_a"]
    joined = run / "train.joined.log"
    assert rejected_runs(ds)[str(piece)]["reason"] == (
        f"{piece}: a rotated piece of train.log (logrotate, Python's RotatingFileHandler: the "
        "highest number is the oldest), not read as a run of its own; join the pieces oldest "
        f"first (train.log.1.zst, train.log) into one log, {{ zstdcat {piece}; cat "
        f"{run / 'train.log'}; }} > {joined}, and ingest that file (not the folder, whose pieces "
        "would be read again)"
    )
    # alone, the piece is its log: decompressed, or read with the zstandard module
    (run / "train.log").unlink()
    refusal = (
        f"{piece}: a compressed log (.zst), not read; decompress it first (unzstd {piece}) and "
        "ingest the train.log.1 it gives, or install the zstandard module (pip install "
        "zstandard), which reads it as it is"
    )
    with pytest.raises(RunSetError) as err:
        load_runs([tmp_path / "runs"])
    assert str(err.value) == f"no run could be ingested: {refusal}"
    for fmt in (None, "console", "jsonl"):
        with pytest.raises(LogFormatError) as err:
            load_file(piece, fmt)
        assert str(err.value) == refusal


def test_a_rotated_piece_alone_beside_a_trainer_state_is_named_as_its_log_would_be(tmp_path):
    # two logs of one folder keep their file names: the piece was 'qwen-g8/train.log.1' where the
    # log it was cut from is 'qwen-g8/train.log'
    ids = []
    for name in ("train.log", "train.log.1"):
        run = tmp_path / name / "qwen-g8"
        _write_log(run, "json_state").rename(run / "trainer_state.json")
        (run / name).write_text(_dicts(range(1, N + 1)))
        ids.append(sorted(load_runs([run.parent]).run.values))
    assert ids[1] == ids[0] == ["qwen-g8/train.log", "qwen-g8/trainer_state.json"]


@pytest.mark.parametrize("name", ["train.log.gz", "train.log.xz"])
def test_a_compressed_log_beside_a_trainer_state_is_named_as_the_log_inside(tmp_path, name):
    # two logs of one folder keep their file names: the compressed log was 'qwen-g8/train.log.gz'
    # where everywhere else (alone in its folder, its note, its format) it is the train.log inside
    pack = gzip.compress if name.endswith(".gz") else lzma.compress
    ids = []
    for log in ("train.log", name):
        run = tmp_path / log / "qwen-g8"
        _write_log(run, "json_state").rename(run / "trainer_state.json")
        data = _dicts(range(1, N + 1)).encode()
        (run / log).write_bytes(data if log == "train.log" else pack(data))
        ids.append(sorted(load_runs([run.parent]).run.values))
    assert ids[1] == ids[0] == ["qwen-g8/train.log", "qwen-g8/trainer_state.json"]
    # a log beside its own compressed copy: their file names still tell them apart
    run = tmp_path / name / "qwen-g8"
    (run / "train.log").write_text(_dicts(range(1, N + 1)))
    with pytest.warns(UserWarning):
        ds = load_runs([run.parent])
    assert sorted(ds.run.values) == sorted(
        [f"qwen-g8/{name}", "qwen-g8/train.log", "qwen-g8/trainer_state.json"]
    )


def test_an_archive_of_a_run_folder_or_a_folder_of_them_is_named_with_the_command_that_unpacks_it(tmp_path):
    # 'runs.tar.gz: not a recognised log format (formats: ...)' given as a file, and a folder of
    # archived runs 'no log of a known format found here': neither said they were archives
    import tarfile
    import zipfile

    run = tmp_path / "src" / "run_a"
    _write_log(run, "csv")
    packed = tmp_path / "archived"
    packed.mkdir()
    with tarfile.open(packed / "runs.tar.gz", "w:gz") as tar:
        tar.add(run, arcname="run_a")
    with zipfile.ZipFile(packed / "more.zip", "w") as z:
        z.write(run / "metrics.csv", "run_b/metrics.csv")
    with pytest.raises(RunSetError) as err:
        load_runs([packed / "runs.tar.gz"])
    assert str(err.value) == (
        f"no run could be ingested: {packed / 'runs.tar.gz'}: an archive of files (.tar.gz), not "
        f"a log; unpack it first (tar -xzf {shlex.quote(str(packed / 'runs.tar.gz'))} -C "
        f"{shlex.quote(str(packed))}) and ingest the folder it unpacks into, {packed}"
    )
    with pytest.raises(RunSetError) as err:
        load_runs([packed])
    # the folder's refusal gives the command too, ready to run (it said "unpack them first and
    # ingest the folders they give", naming no command, where every other refusal gives one)
    assert str(err.value) == (
        f"no run could be ingested: {packed}: no log of a known format found here; it holds 2 "
        "archives of files, not read (more.zip, runs.tar.gz): unpack each into its folder (unzip "
        f"{shlex.quote(str(packed / 'more.zip'))} -d {shlex.quote(str(packed))}, ...) and ingest "
        "again to read their logs"
    )
    # unpacked as said, the run is read
    with tarfile.open(packed / "runs.tar.gz") as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert list(load_runs([tmp_path / "unpacked"]).run.values) == ["run_a"]


@pytest.mark.parametrize("name", ["runs.tar.gz", "runs.zip", "runs.tar.lzma"])
def test_the_unpack_command_of_an_archive_unpacks_into_the_folder_it_says_to_ingest(tmp_path, name):
    # 'tar -xzf runs.tar.gz' / 'unzip runs.zip' unpacked into the folder the user ran them in,
    # and "ingest the folder it gives" did not say which: run from elsewhere, the folder beside
    # the archive held no log. A tar in the legacy lzma format was decompressed and read as one
    # log: "not a recognised log format", no word of the archive it is
    import io
    import tarfile
    import zipfile

    tool = "unzip" if name.endswith(".zip") else "tar"
    if shutil.which("bash") is None or shutil.which(tool) is None:
        pytest.skip(f"no bash or {tool}")
    if name.endswith(".lzma") and shutil.which("lzma") is None and shutil.which("xz") is None:
        pytest.skip("no lzma program for tar --lzma")
    run = tmp_path / "src" / "run_a"
    _write_log(run, "csv")
    packed = tmp_path / "archived" / name
    packed.parent.mkdir()
    if name.endswith(".zip"):
        with zipfile.ZipFile(packed, "w") as z:
            z.write(run / "metrics.csv", "run_a/metrics.csv")
    elif name.endswith(".lzma"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(run, arcname="run_a")
        packed.write_bytes(lzma.compress(buffer.getvalue(), format=lzma.FORMAT_ALONE))
    else:
        with tarfile.open(packed, "w:gz") as tar:
            tar.add(run, arcname="run_a")
    with pytest.raises(RunSetError) as err:
        load_runs([packed])
    reason = str(err.value)
    assert "an archive of files" in reason, reason
    unpack = reason.split("unpack it first (", 1)[1].split(") and ingest the folder it unpacks into, ")
    assert unpack[1] == str(packed.parent), reason
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["bash", "-c", unpack[0]], check=True, cwd=elsewhere, capture_output=True)
    assert list(elsewhere.iterdir()) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the archive beside the log it gave
        assert list(load_runs([unpack[1]]).run.values) == ["run_a"]


def test_archives_beside_logs_are_named_in_a_note_not_left_out_unsaid(tmp_path, capsys):
    # runs/ holding run_a/metrics.csv and more.tar.gz: the run read, the archive skipped
    # without a word (only a folder holding nothing but archives named them)
    import tarfile
    import zipfile

    from bayes_grpo.cli import main
    from bayes_grpo.runset.ingest import NOTES_ATTR, ingest_notes

    root = tmp_path / "runs"
    _write_log(root / "run_a", "csv")
    _write_log(tmp_path / "src" / "run_b", "csv")
    with tarfile.open(root / "more.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "src" / "run_b", arcname="run_b")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_runs([root])
    assert list(ds.run.values) == ["run_a"] and rejected_runs(ds) == {}
    note = (
        f"1 archive of files not read, beside the logs ingested ({root / 'more.tar.gz'}): unpack "
        f"it into its folder (tar -xzf {shlex.quote(str(root / 'more.tar.gz'))} -C "
        f"{shlex.quote(str(root))}) and ingest again to read its logs"
    )
    assert [str(w.message) for w in caught if "archive" in str(w.message)] == [note]
    assert ingest_notes(ds)[0] == note
    # two, one of them in a run folder, given through two paths: each named once
    with zipfile.ZipFile(root / "run_a" / "old.zip", "w") as z:
        z.write(tmp_path / "src" / "run_b" / "metrics.csv", "run_b/metrics.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_runs([root, root / "run_a"])
    (told,) = [str(w.message) for w in caught if "archive" in str(w.message)]
    assert told.startswith(
        f"2 archives of files not read, beside the logs ingested ({root / 'more.tar.gz'}, "
        f"{root / 'run_a' / 'old.zip'}): unpack each into its folder (tar -xzf "
    ), told
    assert told.endswith(", ...) and ingest again to read their logs")
    # the CLI prints it as a note, gives it in --json, and saves it with the run set
    out = tmp_path / "runs.nc"
    assert main(["ingest", str(root), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("\nnote: 2 archives of files not read, beside the logs ingested") == 1
    assert main(["ingest", str(root), "-o", str(out), "--overwrite", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert notes[0].startswith("2 archives of files not read") and len(notes) == 2  # + G, model
    from bayes_grpo.runset import load_runset

    assert NOTES_ATTR in load_runset(out).attrs
    # a folder of logs without archives: no such note, no attribute
    ds = load_runs([tmp_path / "src"])
    assert NOTES_ATTR not in ds.attrs and not any("archive" in n for n in ingest_notes(ds))


@pytest.mark.parametrize(
    "inside", ["checkpoint-10", "checkpoint-10/global_step10", "wandb/run-20261207_091500-abc123/files"]
)
def test_archives_in_a_checkpoint_or_wandb_folder_are_not_named_as_archives_of_runs(tmp_path, inside):
    # a run folder whose checkpoint-10/ (its model and optimizer state, no log) or wandb/ folder
    # (wandb's code and artifacts) held an archive had it named "1 archive of files not read,
    # beside the logs ingested ...: unpack it into its folder ... and ingest again to read its logs"
    import tarfile

    from bayes_grpo.runset.ingest import NOTES_ATTR

    root = tmp_path / "runs"
    _write_log(root / "run_a", "csv")
    (root / "run_a" / inside).mkdir(parents=True)
    with tarfile.open(root / "run_a" / inside / "extra.tar.gz", "w:gz") as tar:
        tar.add(root / "run_a" / "metrics.csv", arcname="metrics.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_runs([root])
    assert list(ds.run.values) == ["run_a"]
    assert not [str(w.message) for w in caught if "archive" in str(w.message)]
    assert not any("archive" in n for n in json.loads(ds.attrs.get(NOTES_ATTR, "[]")))
    # one beside them, in the run folder, is named (alone)
    shutil.copy(root / "run_a" / inside / "extra.tar.gz", root / "run_a" / "more.tar.gz")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_runs([root])
    (told,) = [str(w.message) for w in caught if "archive" in str(w.message)]
    assert told.startswith(f"1 archive of files not read, beside the logs ingested ({root / 'run_a' / 'more.tar.gz'})")
    # a folder holding no log but a checkpoint's archive: no log, and no archive of runs named
    (tmp_path / "empty" / "checkpoint-3").mkdir(parents=True)
    shutil.copy(root / "run_a" / "more.tar.gz", tmp_path / "empty" / "checkpoint-3" / "state.tar.gz")
    with pytest.raises(RunSetError) as err:
        load_runs([tmp_path / "empty"])
    assert str(err.value).endswith("no log of a known format found here"), str(err.value)


@pytest.mark.parametrize("where", ["run", "checkpoint"])
def test_a_trainer_state_cut_short_beside_a_readable_copy_reads_the_copy(tmp_path, where):
    # the plain state cut short (being written) was the run's error, or had the run read from
    # an older checkpoint, though its readable compressed copy lay beside it
    run = tmp_path / "runs" / "run_a"
    older, latest = run / "checkpoint-4", run / f"checkpoint-{N}"
    folder = run if where == "run" else latest
    for ckpt, steps in ((older, 4), (latest, N)):
        ckpt.mkdir(parents=True)
        history = [{"step": s, "reward": r} for s, r in zip(range(1, steps + 1), REWARD)]
        (ckpt / "trainer_state.json").write_text(
            json.dumps({"global_step": steps, "log_history": history})
        )
    whole = json.dumps(
        {
            "global_step": N,
            "log_history": [{"step": s, "reward": r} for s, r in zip(range(1, N + 1), REWARD)],
        }
    )
    (folder / "trainer_state.json").write_text(whole[: len(whole) // 2])
    (folder / "trainer_state.json.gz").write_bytes(gzip.compress(whole.encode()))
    shown = "" if where == "run" else f"checkpoint-{N}/"
    ds = load_runs([tmp_path / "runs"])
    assert list(ds.source.values) == [f"trainer_state:{folder / 'trainer_state.json.gz'}"]
    np.testing.assert_allclose(ds.reward.isel(run=0).dropna("step"), REWARD)
    (note,) = [n for n in runset_warnings(ds)["run_a"] if "passed over" in n]
    assert f"{folder / 'trainer_state.json'}: unreadable JSON (truncated: " in note
    assert note.endswith(f"; passed over for {shown}trainer_state.json.gz, a copy beside it")


@pytest.mark.parametrize("name", ["train.log.2.gz", "train.log-20261205.xz"])
def test_a_corrupt_compressed_rotated_piece_is_a_rejected_source_naming_it(tmp_path, name):
    # its text unreadable, it was no piece (no log found in it) and, its inner name 'train.log.2'
    # being of no log's suffix, not named as a corrupt archive either: left out without a word
    run = tmp_path / "runs" / "run_a"
    run.mkdir(parents=True)
    (run / "train.log").write_text(_dicts(range(1, N + 1)))
    (run / name).write_bytes(b"\x1f\x8b\x08 not compressed" if name.endswith(".gz") else b"junk")
    with pytest.warns(UserWarning, match="1 run not ingested"):
        ds = load_runs([tmp_path / "runs"])
    ((source, info),) = rejected_runs(ds).items()
    kind = {".gz": "gzip", ".xz": "xz"}[Path(name).suffix]
    assert source == str(run / name)
    assert info["reason"].startswith(
        f"{run / name}: not a readable {kind} file, corrupt or cut short ("
    )


READ_HERE = (
    "gzip (.gz), bzip2 (.bz2), xz (.xz), lzma (.lzma) or zstd (.zst, with the zstandard module)"
)


@pytest.mark.parametrize(
    ("name", "what", "command"),
    [
        ("run_a/trainer_state.json.lz4", "a log compressed with lz4 (.lz4)", "lz4 -dm"),
        ("run_b/checkpoint-5/trainer_state.json.lz4", "a log compressed with lz4 (.lz4)", "lz4 -dm"),
        ("metrics.csv.lz4", "a log compressed with lz4 (.lz4)", "lz4 -dm"),
        ("metrics.jsonl.br", "a log compressed with brotli (.br)", "brotli -d"),
        ("train.log.Z", "a log compressed with compress (.Z)", "gzip -dk"),
        ("train.err.lz", "a log compressed with lzip (.lz)", "lzip -dk"),
        ("metrics.tsv.lzo", "a log compressed with lzop (.lzo)", "lzop -d"),
        ("metrics.ndjson.sz", "a log compressed with snappy (.sz)", "snzip -dk"),
        (
            "events.out.tfevents.1700000000.host.1.0.lz4",
            "a TensorBoard event file compressed with lz4 (.lz4)",
            "lz4 -dm",
        ),
    ],
)
def test_a_log_compressed_by_a_program_not_read_here_is_named_with_the_command_that_decompresses_it(
    tmp_path, name, what, command
):
    # trainer_state.json.lz4, metrics.jsonl.br ... were left out without a word: beside other
    # logs nothing said they were not read, and a folder holding only one was "no log of a known
    # format found here"
    _write_log(tmp_path / "runs" / "plain", "csv")
    packed = tmp_path / "runs" / "packed" / name
    packed.parent.mkdir(parents=True)
    packed.write_bytes(b"\x04\x22\x4d\x18" + bytes(range(200)))
    inner = packed.name.rsplit(".", 1)[0]
    read = (
        "an event file is read as TensorBoard wrote it, uncompressed"
        if inner.startswith("events.out")
        else f"bayes_grpo reads logs compressed with {READ_HERE}"
    )
    reason = (
        f"{packed}: {what}, not read ({read}); decompress it first ({command} "
        f"{shlex.quote(str(packed))}) and ingest the {inner} it gives"
    )
    with pytest.warns(UserWarning, match="1 run not ingested"):
        ds = load_runs([tmp_path / "runs"])
    assert list(ds.run.values) == ["plain"]
    assert rejected_runs(ds) == {str(packed): {"run": None, "reason": reason}}
    # all a folder holds, or given as a file: refused with it
    for given in (packed.parent, packed):
        with pytest.raises(RunSetError) as err:
            load_runs([given])
        assert str(err.value) == f"no run could be ingested: {reason}"
    # load_file, a format given or not: its compressed bytes are no text of that format
    for fmt in (None, "tensorboard" if inner.startswith("events.out") else "csv"):
        with pytest.raises(LogFormatError) as err:
            load_file(packed, fmt)
        assert str(err.value) == reason


@pytest.mark.parametrize(
    "name",
    ["image.png.lz4", "model.safetensors.br", "weights.bin.Z", "notes.md.lzo", "data.lz4"],
)
def test_a_file_compressed_by_a_program_not_read_here_whose_name_is_no_logs_is_not_named(
    tmp_path, name
):
    # only what would have been read as a log is named: an image or a model's weights is none
    _write_log(tmp_path / "run_a", "trainer_state")  # G and model known: no note
    (tmp_path / "run_a" / name).write_bytes(bytes(range(64)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_runs([tmp_path], on_error="raise")
    assert list(ds.run.values) == ["run_a"] and rejected_runs(ds) == {}
    assert not any(name in w for w in runset_warnings(ds).get("run_a", []))


@pytest.mark.parametrize("name", ["config.json", "training_args.json", "config.yaml"])
def test_a_config_compressed_by_a_program_not_read_here_is_named_in_the_runs_warnings_not_a_run(
    tmp_path, name
):
    # config.yaml.lz4 beside a log was left out without a word; config.json.lz4 would have been
    # taken for a compressed log and rejected as a run
    run = tmp_path / "runs" / "run_a"
    _write_log(run, "jsonl")
    packed = run / f"{name}.lz4"
    packed.write_bytes(bytes(range(64)))
    ds = load_runs([tmp_path / "runs"])
    assert rejected_runs(ds) == {} and list(ds.run.values) == ["run_a"]
    (note,) = [n for n in runset_warnings(ds)["run_a"] if str(packed) in n]
    assert note.endswith(
        f"{packed}: not read (compressed with lz4, which bayes_grpo does not read (it reads "
        f"{READ_HERE}); decompress it, lz4 -dm {shlex.quote(str(packed))})"
    )


@pytest.mark.skipif(any(shutil.which(c) is None for c in ("bash", "lz4")), reason="no bash, lz4")
def test_the_command_that_decompresses_a_log_not_read_here_gives_the_log_it_names(tmp_path):
    plain = _write_log(tmp_path / "run's logs", "jsonl")
    packed = plain.with_name(plain.name + ".lz4")
    subprocess.run(["lz4", "-q", str(plain), str(packed)], check=True, capture_output=True)
    plain.unlink()
    with pytest.raises(RunSetError) as err:
        load_runs([packed])
    command = str(err.value).split("decompress it first (", 1)[1].split(") and ingest the ")[0]
    subprocess.run(["bash", "-c", command], check=True, cwd=tmp_path, capture_output=True)
    assert plain.is_file() and packed.is_file()  # the log it names, the compressed file kept
    assert load_file(plain)[0].records["value"].tolist() == REWARD


def test_a_rar_archive_beside_logs_is_named_with_the_command_that_unpacks_it(tmp_path):
    # runs.zip and runs.7z were named, runs.rar left out without a word
    _write_log(tmp_path / "runs" / "run_a", "csv")
    packed = tmp_path / "runs" / "more.rar"
    packed.write_bytes(b"Rar!\x1a\x07\x01\x00" + bytes(64))
    with pytest.warns(UserWarning, match="archive of files not read") as record:
        ds = load_runs([tmp_path / "runs"])
    assert list(ds.run.values) == ["run_a"]
    (note,) = [str(w.message) for w in record if "archive" in str(w.message)]
    assert f"(unrar x {packed} {packed.parent}/)" in note, note
