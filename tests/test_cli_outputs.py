"""Command-line outputs never replace the command's own inputs (a typo must not destroy data)."""

from __future__ import annotations

from pathlib import Path

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


# ----------------------------------------------------------------------------- existing outputs


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["ingest", "{csv}", "-o", "{old}"], "--output"),
        (["fit", "{runs}", "-o", "{old}"], "--output"),
        (["predict", "{runs}", "--lr", "1", "--momentum", "0", "--k-ref", "1", "--group-size", "4",
          "--steps", "5", "-o", "{old}"], "--output"),
        (["predict", "{runs}", "--lr", "1", "--momentum", "0", "--k-ref", "1", "--group-size", "4",
          "--steps", "5", "--plot", "{old}"], "--plot"),
        (["forecast", "{runs}", "--run", "a", "--upto", "8", "-o", "{old}"], "--output"),
        (["forecast", "{runs}", "--run", "a", "--upto", "8", "--plot", "{old}"], "--plot"),
        (["phase-diagram", "{runs}", "-o", "{old}"], "--output"),
        (["report", "{runs}", "-o", "{old}"], "--output"),
        (["simulate", "bandit", "--steps", "5", "--seeds", "1", "-o", "{old}"], "--output"),
        (["sweep", "--k-ref", "0:2", "--steps", "5", "--seeds", "1", "--png", "{old}"], "--png"),
        (["sweep", "--k-ref", "0:2", "--steps", "5", "--seeds", "1", "-o", "{old}"], "--output"),
    ],
)
def test_an_existing_output_file_is_refused_without_overwrite_and_left_untouched(
    tmp_path, capsys, argv, option
):
    runs = _runset(tmp_path)
    old = tmp_path / "precious.dat"
    old.write_bytes(b"the user's file")
    capsys.readouterr()
    argv = [a.format(runs=runs, csv=tmp_path / "a.csv", old=old) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(old) in err and f"{option} already exists; pass --overwrite" in err
    assert old.read_bytes() == b"the user's file"


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("ingest", ["ingest", "{csv}", "-o", "{late}.nc"]),
        ("sde", ["simulate", "sde", "--steps", "10", "--seeds", "1", "-o", "{late}.nc"]),
        ("bandit", ["simulate", "bandit", "--steps", "5", "--seeds", "1", "-o", "{late}.nc"]),
        ("bandit", ["sweep", "--k-ref", "0:2", "--steps", "5", "--seeds", "1", "-o", "{late}.nc"]),
        ("bandit", ["sweep", "--k-ref", "0:2", "--steps", "5", "--seeds", "1", "--png", "{late}.png"]),
        ("predict", ["forecast", "{runs}", "--run", "a", "--upto", "8", "-o", "{late}.nc"]),
        ("phase_diagram", ["phase-diagram", "{tiny}", "-o", "{late}.png", "--n-lr", "5"]),
        ("report", ["report", "{tiny}", "-o", "{late}.html", "--no-diagnose", "--no-stability"]),
    ],
)
def test_a_file_that_appears_at_the_output_during_the_run_is_not_replaced(
    tmp_path, capsys, monkeypatch, module, argv
):
    # the output was checked before the work and then moved into place with os.replace: a
    # file created at that path while the command ran was silently replaced
    import importlib

    runs = _runset(tmp_path)
    # each output named with the extension of what its option writes (netCDF, figure, HTML)
    suffix = next(a for a in argv if a.startswith("{late}")).removeprefix("{late}")
    late = tmp_path / f"late{suffix}"
    cli = importlib.import_module(f"bayes_grpo.cli.{module}")
    checked = cli.check_output_paths

    def check_then_someone_writes(*args, **kwargs):
        checked(*args, **kwargs)
        late.write_bytes(b"written by someone else meanwhile")

    monkeypatch.setattr(cli, "check_output_paths", check_then_someone_writes)
    capsys.readouterr()
    tiny = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    argv = [a.format(runs=runs, csv=tmp_path / "a.csv", late=tmp_path / "late", tiny=tiny) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(late) in err and "refusing to overwrite" in err
    assert late.read_bytes() == b"written by someone else meanwhile"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.csv", "b.csv", late.name, "runs.nc"])  # no temporary left


def test_overwrite_replaces_an_existing_output(tmp_path, capsys):
    runs = _runset(tmp_path)
    before = runs.read_bytes()
    assert main(["ingest", str(tmp_path / "a.csv"), "-o", str(runs)]) == 2
    assert runs.read_bytes() == before
    assert main(["ingest", str(tmp_path / "a.csv"), "-o", str(runs), "--overwrite"]) == 0
    from bayes_grpo.runset import load_runset

    assert load_runset(runs).sizes["run"] == 1  # the two-run set was replaced by the one-run set


def test_an_output_that_is_a_folder_is_refused_even_with_overwrite(tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["ingest", str(_csv(tmp_path / "a.csv")), "-o", str(folder), "--overwrite"]) == 2
    assert "is an existing folder" in capsys.readouterr().err


def test_an_output_that_is_a_device_or_a_pipe_is_refused_even_with_overwrite_and_kept(tmp_path, capsys):
    # `report fit.nc -o /dev/full --overwrite` (run as root) wrote the report and replaced the
    # device /dev/full with it: the atomic writer's os.replace puts a file in place of whatever
    # is at the path. A pipe stands in for the device here (no root needed to make one)
    import os
    import stat

    from bayes_grpo._io import write_text_atomic

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    assert main(["ingest", str(_csv(tmp_path / "a.csv")), "-o", str(pipe), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "--output is not a regular file" in err and "Traceback" not in err, err
    with pytest.raises(FileExistsError, match="is not a regular file"):
        write_text_atomic(pipe, "text", overwrite=True)  # the writer itself, for the Python API
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pipe.")] == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")
def test_an_output_that_is_the_terminals_or_a_pipes_fd_is_named_as_no_regular_file(tmp_path, capsys):
    # `ingest runs.csv -o /dev/stdout` (stdout a pipe) resolved the path to
    # /proc/<pid>/fd/pipe:[N], a name of no file, and was refused as "--output cannot be written:
    # the folder /proc/<pid>/fd is not writable (No such file or directory)"
    import os

    read_end, write_end = os.pipe()
    try:
        path = f"/dev/fd/{write_end}" if Path("/dev/fd").is_dir() else f"/proc/self/fd/{write_end}"
        assert main(["ingest", str(_csv(tmp_path / "a.csv")), "-o", path, "--overwrite"]) == 2
    finally:
        os.close(read_end)
        os.close(write_end)
    err = capsys.readouterr().err
    assert f"{path}: --output is not a regular file" in err and "not writable" not in err, err


def test_demo_refuses_a_folder_holding_its_files_before_any_work(tmp_path, capsys):
    from bayes_grpo.report.demo import DEMO_OUTPUTS

    out = tmp_path / "demo"
    out.mkdir()
    (out / DEMO_OUTPUTS[-1]).write_text("an older report")
    (out / "notes.txt").write_text("unrelated")
    assert main(["demo", "--out", str(out), "--fast"]) == 2
    assert f"{out / DEMO_OUTPUTS[-1]}: --out already exists" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == sorted([DEMO_OUTPUTS[-1], "notes.txt"])
    assert (out / DEMO_OUTPUTS[-1]).read_text() == "an older report"


def test_diagnose_checks_every_figure_name_before_writing_any(tmp_path, capsys):
    runs = _runset(tmp_path)
    figs = tmp_path / "figs"
    assert main(["diagnose", str(runs), "--figures", str(figs)]) == 0
    written = {p.name: p.read_bytes() for p in figs.iterdir()}
    assert len(written) >= 2
    victim = sorted(written)[-1]
    (figs / victim).write_bytes(b"edited by hand")
    for p in figs.iterdir():
        if p.name != victim:
            p.unlink()
    capsys.readouterr()
    assert main(["diagnose", str(runs), "--figures", str(figs)]) == 2
    assert "--figures already exists; pass --overwrite" in capsys.readouterr().err
    assert [p.name for p in figs.iterdir()] == [victim]  # nothing written before the refusal
    assert main(["diagnose", str(runs), "--figures", str(figs), "--overwrite"]) == 0
    assert {p.name for p in figs.iterdir()} == set(written)


def _exponential_rise_summary(low: float, high: float):
    """``summarise_draws`` of 100 draws of a rise 0.2 -> 0.8 over 50 steps, time constant uniform on
    ``[low, high]`` steps; returns it and ``(steps, mean draws, the generator)`` for more draws."""
    from bayes_grpo.predict.summary import summarise_draws

    rng = np.random.default_rng(0)
    steps = np.arange(50.0)
    tau = rng.uniform(low, high, 100)[:, None]
    mean = 0.8 - 0.6 * np.exp(-steps / tau)
    ds = summarise_draws(
        steps, mean, mean + 0.01 * rng.standard_normal(mean.shape),
        plateau=np.full(100, 0.8), initial_reward=np.full(100, 0.2),
        zeta=np.full(100, 3.0), damping=np.full(100, 1.0),
    )  # fmt: skip
    return ds, (steps, mean, rng)


def test_a_stop_step_beyond_the_horizon_is_printed_as_such_with_the_gain_left(capsys):
    """A run still rising at the horizon has no stop step: the text output says so and how
    much gain is still expected, instead of printing ``nan``."""
    import argparse

    from bayes_grpo.cli.predict import _emit
    from bayes_grpo.predict.summary import summarise_draws

    ds, (steps, mean, rng) = _exponential_rise_summary(low=200.0, high=300.0)  # far slower than the horizon
    assert not np.isfinite(float(ds.attrs["stop_step"]))
    _emit(ds, argparse.Namespace(output=None, plot=None, json=False))
    out = capsys.readouterr().out
    gain = float(ds["expected_remaining_gain"].values[-1])
    assert f"stop_step: none within the horizon (expected remaining gain at step 49: {gain:.3g})" in out
    assert "nan" not in out.split("stop_step:")[1].splitlines()[0]
    # the policy's stop step beside it (a logged reward that trails the policy) is printed alike
    ds = summarise_draws(
        steps, mean, mean + 0.01 * rng.standard_normal(mean.shape),
        plateau=np.full(100, 0.8), initial_reward=np.full(100, 0.2),
        zeta=np.full(100, 3.0), damping=np.full(100, 1.0), policy_draws=mean,
    )  # fmt: skip
    _emit(ds, argparse.Namespace(output=None, plot=None, json=False))
    out = capsys.readouterr().out
    assert f"policy_stop_step: none within the horizon (expected remaining gain at step 49: {gain:.3g})" in out
    # "90%" of what: the text output says, as the README does for the JSON keys
    assert "\ntime_to_fraction (steps to 90/95/99% of the rise p* - R0):\n  90%:" in out
    assert "\npolicy_time_to_fraction (steps to 90/95/99% of the rise p* - R0):\n" in out


def test_a_milestone_beyond_the_horizon_is_printed_in_words_not_as_a_python_dict(capsys):
    """`predict` / `forecast` printed each milestone as Python writes the JSON's dict,
    "99%: {'median_step': None, 'prob_reached_within_horizon': 0.496}": None (JSON null)
    is a median beyond the horizon, which the text did not say."""
    import argparse

    from bayes_grpo.cli.predict import _emit

    # 90% of the rise within 50 steps, 99% for some draws only
    ds, _ = _exponential_rise_summary(low=8.0, high=16.0)
    _emit(ds, argparse.Namespace(output=None, plot=None, json=False))
    block = capsys.readouterr().out.split("time_to_fraction (steps to 90/95/99% of the rise p* - R0):\n")[1]
    rows = dict(line.strip().split(": ", 1) for line in block.splitlines()[:3])
    assert "{" not in "".join(rows.values()) and "None" not in "".join(rows.values()), rows
    assert rows["99%"].startswith("median beyond the horizon (reached within the horizon with probability "), rows
    assert rows["90%"] == "median step 30 (reached within the horizon with probability 1)", rows


def test_a_forecasts_prefix_instability_is_printed_in_words_not_as_python_values(capsys):
    """`forecast` printed its prefix check as Python writes it: "onset_step: None",
    "signals: []", or a Python list of the signals and a float step "onset_step: 85.0"."""
    import argparse

    from bayes_grpo.cli.predict import _emit

    ds, _ = _exponential_rise_summary(low=8.0, high=16.0)
    args = argparse.Namespace(output=None, plot=None, json=False)
    found = {"detected": True, "onset_step": 85.0, "signals": ["sustained clipping (a)", "reward divergence (b)"]}
    for prefix, expected in [
        (found, ["  detected: True", "  onset_step: 85", "  signals: sustained clipping (a); reward divergence (b)"]),
        ({"detected": False, "onset_step": None, "signals": []}, ["  detected: False", "  onset_step: none", "  signals: none"]),
        ({"detected": None, "onset_step": None, "signals": []}, ["  detected: not assessed (too few steps)"]),
    ]:
        _emit(ds, args, extra={"prefix_instability": prefix})
        block = capsys.readouterr().out.split("prefix_instability:\n")[1].splitlines()[:3]
        assert all(line in block for line in expected), block
        assert not any("None" in line or "[" in line for line in block), block


def test_the_observation_lag_is_printed_as_whole_steps(capsys):
    # `predict models/bandit.nc ... --k-ref 6` printed "observation_lag: 6.0" beside
    # "stop_step: 61" (the lag is K_ref steps, or 1 for a TRL log)
    import argparse
    import json

    from bayes_grpo.cli.predict import _emit

    ds, _ = _exponential_rise_summary(low=8.0, high=16.0)
    ds.attrs["observation_lag"] = 6.0
    _emit(ds, argparse.Namespace(output=None, plot=None, json=False))
    assert "\nobservation_lag: 6\n" in capsys.readouterr().out
    _emit(ds, argparse.Namespace(output=None, plot=None, json=True))
    lag = json.loads(capsys.readouterr().out)["observation_lag"]
    assert lag == 6 and isinstance(lag, int)
    ds.attrs["observation_lag"] = 0.5  # not a whole step: kept as it is
    _emit(ds, argparse.Namespace(output=None, plot=None, json=True))
    assert json.loads(capsys.readouterr().out)["observation_lag"] == 0.5


def test_predicts_text_prints_numbers_to_six_significant_digits_as_stability_does(capsys):
    # `predict models/tiny.nc ...` printed "stop_threshold: 0.009638012403187308",
    # "final_mean_reward_hdi_0.9: [0.0, 0.37647455645523464]" and "discrepancy_sd_max:
    # 0.29291291485906873", where `stability` prints 6 significant digits; the JSON keeps them all
    import argparse
    import json

    from bayes_grpo.cli._common import number_text, value_text
    from bayes_grpo.cli.predict import _emit

    assert number_text(0.009638012403187308) == "0.00963801" and number_text(None) == "n/a"
    assert value_text([0.0, 0.37647455645523464]) == "[0, 0.376475]"
    assert value_text(3) == 3 and value_text(True) is True and value_text("off") == "off"
    ds, _ = _exponential_rise_summary(low=8.0, high=16.0)
    ds.attrs["stop_threshold"] = 0.009638012403187308
    ds.attrs["discrepancy_sd_max"] = 0.29291291485906873
    _emit(ds, argparse.Namespace(output=None, plot=None, json=False))
    text = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines() if ": " in line)
    assert text["stop_threshold"] == "0.00963801" and text["discrepancy_sd_max"] == "0.292913"
    _emit(ds, argparse.Namespace(output=None, plot=None, json=True))
    out = json.loads(capsys.readouterr().out)
    assert out["stop_threshold"] == 0.009638012403187308  # every digit, for scripts
    for key in ("final_mean_reward", "expected_remaining_gain_after"):
        if key in out:
            assert text[key] == number_text(out[key]), key
    (hdi,) = [k for k in out if k.startswith("final_mean_reward_hdi_")]
    assert text[hdi] == f"[{number_text(out[hdi][0])}, {number_text(out[hdi][1])}]"
    assert text["  overdamped"] == number_text(out["regime_probability"]["overdamped"])


def test_a_setting_where_every_draw_diverges_has_no_stop_step_and_says_why(capsys):
    # `predict models/bandit.nc --lr 1.0 --k-ref 4`: every draw diverges, and the policy's stop
    # step read 150 of 150 (a diverging mean's remaining gain is 0 only at the horizon's end)
    import argparse

    from bayes_grpo.cli.predict import _emit
    from bayes_grpo.predict.summary import summarise_draws

    steps = np.arange(50.0)
    mean = 0.2 + 0.01 * np.exp(steps / 5.0)[None, :] * np.ones((100, 1))  # grows without bound
    ds = summarise_draws(
        steps, mean, mean, plateau=np.full(100, 0.8), initial_reward=np.full(100, 0.2),
        zeta=np.full(100, 0.1), damping=np.full(100, -1.0), policy_draws=mean,
        diverging=np.ones(100, dtype=bool),
    )  # fmt: skip
    assert np.isnan(ds.attrs["stop_step"]) and np.isnan(ds.attrs["policy_stop_step"])
    _emit(ds, argparse.Namespace(output=None, plot=None, json=False))
    out = capsys.readouterr().out
    assert "\nstop_step: none within the horizon (the draws diverge: no stable run to stop)" in out
    assert "\npolicy_stop_step: none within the horizon (the draws diverge: no stable run to stop)" in out


def test_an_output_below_a_file_is_refused_before_any_work(tmp_path, capsys):
    # `report fit.nc -o fit.nc/x.html` did all the work, then said "[Errno 17] File exists: 'fit.nc'"
    runs = _runset(tmp_path)
    capsys.readouterr()
    out = runs / "sub" / "x.png"
    assert main(["phase-diagram", str(tmp_path / "no-fit.nc"), "-o", str(out)]) == 2
    assert f"--output would be written inside {runs}, which is a file, not a folder" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a folder no one can create files in")
@pytest.mark.parametrize("verb", ["report", "phase-diagram"])
def test_an_output_in_a_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, verb):
    # `report fit.nc -o /proc/r.html` did 10 s of work (diagnostics, phase diagrams), then said
    # "error: [Errno 2] No such file or directory: '/proc/.r.html.oeowhoxe.tmp'", naming the
    # writer's temporary file; an unwritable folder (chmod 555, not root) gave a traceback
    out = Path("/proc") / "bayes_grpo_out" / "r.png"
    # the input does not exist either: the output is refused before anything is read
    assert main([verb, str(tmp_path / "no-fit.nc"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: --output cannot be written: the folder /proc is not writable" in err, err


@pytest.mark.parametrize(
    ("argv", "flag", "value", "says"),
    [
        (["compare", "runs.nc"], "--chains", "0", "must be at least 1"),
        (["compare", "runs.nc"], "--tune", "-1", "must be 0 or more"),
        (["compare", "runs.nc"], "--draws", "0", "must be at least 1"),
        (["fit", "runs.nc", "-o", "fit.nc"], "--chains", "0", "must be at least 1"),
        (["fit", "runs.nc", "-o", "fit.nc"], "--draws", "-5", "must be at least 1"),
        (["fit", "runs.nc", "-o", "fit.nc"], "--target-accept", "1.5", "must lie strictly between 0 and 1"),
        (["report", "fit.nc", "-o", "r.html"], "--chains", "0", "must be at least 1"),
        (["invariance", "runs.nc"], "--tune", "-3", "must be 0 or more"),
        (["compare", "runs.nc"], "--seed", "-1", "must be 0 or more"),
        (["fit", "runs.nc", "-o", "fit.nc"], "--seed", "-1", "must be 0 or more"),
        (["report", "fit.nc", "-o", "r.html", "--compare"], "--seed", "-1", "must be 0 or more"),
        (["demo"], "--seed", "-1", "must be 0 or more"),
        (["predict", "fit.nc", "--lr", "1", "--momentum", "0", "--k-ref", "1"], "--seed", "-1", "must be 0 or more"),
        (["forecast", "runs.nc", "--run", "a", "--upto", "60"], "--seed", "-1", "must be 0 or more"),
    ],
)
def test_sampler_settings_that_cannot_sample_are_refused_by_argparse(capsys, argv, flag, value, says):
    # compare --chains 0 and --tune -1 crashed PyMC with ZeroDivisionError tracebacks, --draws 0
    # failed after sampling with "Not enough samples to build a trace"; --seed -1 reached PyMC
    # ("Setting random_seed = -1 is not allowed. Pass `None` ...") or numpy ("error: expected
    # non-negative integer", forecast) without the flag's name
    with pytest.raises(SystemExit) as exc:
        main([*argv, flag, value])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"argument {flag}: {says}" in err, err


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["phase-diagram", "{runs}", "-o", "{out}"], "--output"),
        (["predict", "{runs}", "--lr", "1", "--momentum", "0", "--k-ref", "1", "--group-size", "4",
          "--steps", "5", "--plot", "{out}"], "--plot"),
        (["forecast", "{runs}", "--run", "a", "--upto", "8", "--plot", "{out}"], "--plot"),
        (["sweep", "--k-ref", "0:2", "--steps", "5", "--seeds", "1", "--png", "{out}"], "--png"),
    ],
)
def test_a_figure_whose_extension_names_no_figure_format_is_refused_before_any_work(tmp_path, capsys, argv, option):
    # phase-diagram -o x.txt wrote PNG bytes under .txt; predict --plot x.pdf PNG bytes under .pdf
    runs = _runset(tmp_path)
    out = tmp_path / "figure.txt"
    args = [a.format(runs=runs, out=out) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{option} writes a figure as png, svg, pdf by its extension; got .txt" in err
    assert not out.exists()


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    # `bayes-grpo ingest ... | head -1` printed a BrokenPipeError traceback from print_table
    import subprocess
    import sys

    rows = ["run_name,metric,step,value"]
    rows += [f"run{r:04d},train/reward,{s},{0.01 * s}" for r in range(600) for s in range(10)]
    (tmp_path / "runs.csv").write_text("\n".join(rows))  # a table of 600 rows: > a pipe's buffer
    cmd = [sys.executable, "-m", "bayes_grpo", "ingest", str(tmp_path / "runs.csv"), "-o", str(tmp_path / "o.nc")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err
    proc.stderr.close()


@pytest.mark.parametrize(
    ("argv", "dest"),
    [
        (["predict", "fit.nc", "--lr", "0.1", "--momentum", "0.5", "--k-ref", "2", "--group-size", "8", "--steps", "10"], "momentum_convention"),
        (["phase-diagram", "fit.nc", "-o", "p.png"], "momentum_convention"),
        (["stability", "--eta-k", "0.05", "--momentum", "0.9", "--k-ref", "1"], "convention"),
        (["simulate", "bandit", "-o", "r.nc"], "convention"),
    ],
)
@pytest.mark.parametrize("spelling", ["--convention", "--momentum-convention"])
def test_every_verb_that_takes_a_momentum_convention_takes_both_spellings(argv, dest, spelling):
    # predict and phase-diagram took --momentum-convention only, stability and simulate bandit
    # --convention only: `predict ... --convention ema` was "unrecognized arguments"
    from bayes_grpo.cli import build_parser

    args = build_parser().parse_args([*argv, spelling, "ema"])
    assert getattr(args, dest) == "ema"


@pytest.mark.parametrize("verb", [["forecast", "runs.nc", "--run", "r0", "--upto", "10"],
                                  ["predict", "fit.nc", "--lr", "0.1", "--momentum", "0", "--k-ref", "1",
                                   "--group-size", "8", "--steps", "50"]])  # fmt: skip
def test_an_hdi_probability_outside_0_1_is_refused_naming_the_option(verb, capsys):
    # `forecast tiny.nc --run R --upto 100 --hdi 1.5` forecast first (25 s) and then failed with
    # "HDI probability must be in (0, 1), got 1.5", naming no option (the files here do not exist:
    # the refusal comes before anything is read)
    with pytest.raises(SystemExit) as exc:
        main([*verb, "--hdi", "0.5", "1.5"])
    assert exc.value.code == 2
    assert "--hdi" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["ingest", "{csv}", "-o", "{out}.csv"], "netCDF"),
        (["fit", "{runs}", "-o", "{out}.json", "--draws", "10", "--tune", "10"], "netCDF"),
        (["forecast", "{runs}", "--run", "a", "--upto", "8", "-o", "{out}.png"], "netCDF"),
        (["predict", "{tiny}", "--lr", "1e-6", "--momentum", "0", "--k-ref", "1", "--group-size", "4",
          "--steps", "5", "-o", "{out}"], "netCDF"),
        (["simulate", "sde", "--steps", "10", "--seeds", "1", "-o", "{out}.csv"], "netCDF"),
        (["simulate", "bandit", "--steps", "5", "--seeds", "1", "-o", "{out}.txt"], "netCDF"),
        (["sweep", "--k-ref", "0:2", "--steps", "5", "--seeds", "1", "-o", "{out}.csv"], "netCDF"),
        (["report", "{tiny}", "-o", "{out}.png", "--no-diagnose", "--no-stability"], "an HTML page"),
    ],
)
def test_an_output_named_as_another_format_is_refused_before_any_work(tmp_path, capsys, argv, what):
    # `ingest logs -o runs.csv` wrote netCDF into runs.csv, which the next `ingest runs.csv`
    # read as a CSV log ("no reward metric")
    runs = _runset(tmp_path)
    tiny = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    argv = [a.format(runs=runs, csv=tmp_path / "a.csv", out=tmp_path / "out", tiny=tiny) for a in argv]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--output writes {what}; name the file" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "runs.nc"]  # nothing written
