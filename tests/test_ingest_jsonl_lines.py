"""A JSONL log is read a line at a time: not held whole beside its lines, its lines the file's."""

import gzip
import json
import tracemalloc

import pytest

from bayes_grpo.runset.loaders import LogFormatError, load_jsonl
from bayes_grpo.runset.loaders.tabular import _read_json_lines


def _write(path, n_steps, n_metrics=40):
    with path.open("w") as fh:
        for s in range(1, n_steps + 1):
            fh.write(json.dumps({"step": s, **{f"m{k}": 0.123456789 for k in range(n_metrics)}}))
            fh.write("\n")


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_jsonl_log_is_not_held_whole_beside_its_objects(tmp_path, suffix):
    # the whole text and its list of lines were held beside the objects: a 100 MB log peaked at
    # 724 MB for 420 MB of objects; here, 4 MB: about 11 MB over the objects, now about none
    path = tmp_path / "metrics.jsonl"
    _write(path, 4000)
    size = path.stat().st_size
    if suffix:
        path = path.with_name(path.name + suffix)
        path.write_bytes(gzip.compress((tmp_path / "metrics.jsonl").read_bytes()))
    tracemalloc.start()
    try:
        objects, notes = _read_json_lines(path)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(objects) == 4000 and notes == []
    assert peak - held < size / 4, (peak - held, size)


def test_the_lines_of_a_jsonl_log_are_the_files_lines(tmp_path):
    # a U+2028 or U+0085 written raw inside a string (json.dumps(ensure_ascii=False): a logged
    # completion) split the record under str.splitlines: '2 unreadable JSON lines skipped
    # (lines [2, 3])', its step lost, and the line numbers after it off by one
    path = tmp_path / "metrics.jsonl"
    records = [{"step": s, "reward": 0.1 * s} for s in range(1, 6)]
    records[1]["sample"] = "first\u2028second\x85third"
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    lines.insert(3, "{not json")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    objects, notes = _read_json_lines(path)
    assert [o["step"] for o in objects] == [1, 2, 3, 4, 5]
    assert objects[1]["sample"] == "first\u2028second\x85third"
    assert notes == ["1 unreadable JSON line skipped (lines [4])"]
    # a cut last line, blank lines and Windows line ends: the numbers as the file's
    path.write_bytes(
        b'{"step": 1, "reward": 0.1}\r\n\r\n{"step": 2, "reward": 0.2}\r\n{"step": 3, "re'
    )
    assert _read_json_lines(path)[1] == ["last line (4) is truncated JSON; skipped"]
    # a JSON list, an empty file and a file of no object as they were
    path.write_text(json.dumps(records))
    assert [o["step"] for o in _read_json_lines(path)[0]] == [1, 2, 3, 4, 5]
    path.write_text("\n  \n")
    with pytest.raises(LogFormatError, match=r"metrics.jsonl: empty file \(nothing logged yet"):
        load_jsonl(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(LogFormatError, match=r"a JSON list of 2 items with no per-step objects"):
        load_jsonl(path)
    path.write_text("1\n2\n")
    with pytest.raises(LogFormatError, match=r"no JSON objects \(unreadable .*: \[1, 2\]\)"):
        load_jsonl(path)
    path.write_bytes(b'{"step": 1, "reward": 0.1}\n{"step": 2, "reward": \xff}\n')
    with pytest.raises(LogFormatError, match="metrics.jsonl: cannot read the file .*utf-8"):
        load_jsonl(path)
