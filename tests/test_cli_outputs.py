"""Command-line outputs never replace the command's own inputs (a typo must not destroy data)."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_grpo.cli import main


def _csv(path, n=15):
    steps = np.arange(n)
    rows = "\n".join(f"{s},{0.1 + 0.5 * (1 - np.exp(-s / 4)):.4f}" for s in steps)
    path.write_text("step,reward\n" + rows + "\n")
    return path


def _runset(tmp_path):
    out = tmp_path / "runs.nc"
    assert main(["ingest", str(_csv(tmp_path / "a.csv")), str(_csv(tmp_path / "b.csv")), "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize(
    "argv",
    [
        ["forecast", "{runs}", "--run", "a", "--upto", "8", "-o", "{runs}"],
        ["forecast", "{runs}", "--run", "a", "--upto", "8", "--plot", "{runs}"],
        ["fit", "{runs}", "-o", "{runs}", "--overwrite"],
        ["predict", "{runs}", "--lr", "1", "--momentum", "0", "--k-ref", "1", "--group-size", "4",
         "--steps", "5", "-o", "{runs}"],
        ["phase-diagram", "{runs}", "-o", "{runs}"],
        ["report", "{runs}", "-o", "{runs}"],
        ["ingest", "{csv}", "-o", "{csv}"],
    ],
)
def test_output_onto_an_input_is_refused_and_the_input_is_untouched(tmp_path, capsys, argv):
    runs = _runset(tmp_path)
    csv = tmp_path / "a.csv"
    before = {p: p.read_bytes() for p in (runs, csv)}
    capsys.readouterr()
    argv = [a.format(runs=runs, csv=csv) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "would replace the input" in err and str(argv[-1 if argv[-1] != "--overwrite" else -2]) in err
    assert {p: p.read_bytes() for p in (runs, csv)} == before


def test_two_outputs_on_one_path_are_refused(tmp_path, capsys):
    runs = _runset(tmp_path)
    out = tmp_path / "fc.nc"
    argv = ["forecast", str(runs), "--run", "a", "--upto", "8", "-o", str(out), "--plot", str(out)]
    assert main(argv) == 2
    assert "given as both --output and --plot" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["fit", "r.nc", "-o", "f.nc", "--likelihood", "state_space"], "likelihood", "state-space"),
        (["fit", "r.nc", "-o", "f.nc", "--invariance", "by_group"], "invariance", "by-group"),
        (["invariance", "r.nc", "--likelihood", "state-space"], "likelihood", "state_space"),
        (["forecast", "r.nc", "--run", "a", "--upto", "5", "--likelihood", "state-space"], "likelihood", "state_space"),
    ],
)
def test_either_spelling_of_a_choice_is_accepted_by_every_verb(argv, dest, value):
    # fit took only state-space, invariance and forecast only state_space (README uses both)
    from bayes_grpo.cli import build_parser

    assert getattr(build_parser().parse_args(argv), dest) == value
