"""``bayes-grpo simulate bandit`` and ``bayes-grpo sweep`` from the command line."""

from __future__ import annotations

import json
import math

import pytest

from bayes_grpo.bandit.experiments import runset_truth
from bayes_grpo.cli import main
from bayes_grpo.cli._common import parse_values
from bayes_grpo.runset import load_runset


def test_simulate_bandit_writes_a_run_set_with_every_combination(tmp_path, capsys):
    out = tmp_path / "runs.nc"
    rc = main(
        [
            "simulate",
            "bandit",
            "--k-ref",
            "0,3",
            "--group-size",
            "4,16",
            "--seeds",
            "2",
            "--steps",
            "25",
            "-o",
            str(out),
            "--json",
        ]
    )
    assert rc == 0
    info = json.loads(capsys.readouterr().out)
    assert info["runs"] == 8 and info["steps"] == 25
    ds = load_runset(out)
    assert sorted(set(ds.k_ref.values)) == [0.0, 3.0] and sorted(set(ds.group_size.values)) == [
        4.0,
        16.0,
    ]
    assert len(runset_truth(ds)) == 8


def test_sweep_prints_threshold_against_both_predictions_and_draws_the_phase_diagram(
    tmp_path, capsys
):
    png = tmp_path / "phase.png"
    argv = [
        "sweep",
        "--k-ref",
        "6:9",
        "--lr",
        "0.4",
        "--momentum",
        "0.5",
        "--no-clip",
        "--seeds",
        "3",
    ]
    rc = main(argv + ["--steps", "700", "--png", str(png), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    values = out["threshold"]["values"]
    assert values["exact_threshold_k_ref"] == 7 and values["closed_form_threshold_k_ref"] == 5
    assert abs(values["empirical_threshold_k_ref"] - 7) <= 1
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


def test_sweep_over_learning_rates_gives_the_phase_line(tmp_path, capsys):
    png = tmp_path / "phase2d.png"
    argv = ["sweep", "--k-ref", "6:12", "--lr", "0.3,0.4", "--momentum", "0.5", "--no-clip"]
    rc = main(argv + ["--seeds", "3", "--steps", "700", "--png", str(png), "--json"])
    assert rc == 0
    rows = {
        r["learning_rate"]: r for r in json.loads(capsys.readouterr().out)["threshold"]["table"]
    }
    assert rows[0.3]["exact_threshold_k_ref"] == 10 and rows[0.4]["exact_threshold_k_ref"] == 7
    for row in rows.values():
        assert abs(row["empirical_threshold_k_ref"] - row["exact_threshold_k_ref"]) <= 1
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bad_values_give_a_clean_error(tmp_path, capsys):
    rc = main(
        ["simulate", "bandit", "--group-size", "1", "--steps", "3", "-o", str(tmp_path / "x.nc")]
    )
    assert rc == 2
    assert "--group-size: needs group sizes >= 2" in capsys.readouterr().err
    with pytest.raises(ValueError):
        parse_values("0:0")


@pytest.mark.parametrize("value", ["inf", "nan", "1e400"])
@pytest.mark.parametrize("kind", ["bandit", "sde"])
def test_a_lag_that_is_not_a_whole_number_is_an_error_naming_its_flag(value, kind, tmp_path, capsys):
    # `simulate sde --k-ref inf` was an OverflowError traceback from int(inf); `--k-ref nan`
    # said "cannot convert float NaN to integer"
    out = tmp_path / "x.nc"
    assert main(["simulate", kind, "--k-ref", value, "--steps", "3", "-o", str(out)]) == 2
    assert f"--k-ref: expected integers, got '{value}'" in capsys.readouterr().err
    assert main(["simulate", kind, "--group-size", value, "--steps", "3", "-o", str(out)]) == 2
    assert f"--group-size: expected integers, got '{value}'" in capsys.readouterr().err
    assert main(["sweep", "--k-ref", value, "--steps", "3"]) == 2
    assert f"--k-ref: expected integers, got '{value}'" in capsys.readouterr().err
    assert not out.exists()


def test_a_setting_listed_twice_is_named_not_turned_into_duplicate_run_ids(tmp_path, capsys):
    # --lr 0.1,0.1 made two runs of one id per seed, refused with a long duplicate-id error
    with pytest.raises(ValueError, match=r"'0.1,0.2,0.1' lists 0.1 more than once"):
        parse_values("0.1,0.2,0.1")
    out = tmp_path / "x.nc"
    assert main(["simulate", "bandit", "--lr", "0.1,0.1", "--steps", "3", "-o", str(out)]) == 2
    assert "'0.1,0.1' lists 0.1 more than once" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        # IndexError traceback from rates[0]
        (["simulate", "bandit", "--lr", ""], "--lr: no values given"),
        (["simulate", "bandit", "--lr", " , "], "--lr: no values given"),
        (["simulate", "bandit", "--momentum", "0.1,x"], "--momentum: cannot read '0.1,x'"),
        (["simulate", "bandit", "--beta", ","], "--beta: no values given"),
        # "range() arg 3 must not be zero" / "invalid literal for int() with base 10: 'a'"
        (["simulate", "bandit", "--k-ref", "0:4:0"], "--k-ref: bad range '0:4:0'"),
        (["simulate", "bandit", "--k-ref", "a:3"], "--k-ref: bad range 'a:3'"),
        (["simulate", "bandit", "--group-size", "4,4"], "--group-size: '4,4' lists 4.0 more than once"),
        (["simulate", "sde", "--lr", ""], "--lr: no values given"),
        (["sweep", "--k-ref", "5:2"], "--k-ref: empty range '5:2'"),
        (["sweep", "--momentum", ""], "--momentum: no values given"),
        # named the simulator's parameters (momentum, beta, k_ref, group_size), not the options
        (["simulate", "bandit", "--momentum", "0.5,1"], "--momentum: needs momenta in [0, 1), got 1.0"),
        (["sweep", "--momentum", "1"], "--momentum: needs momenta in [0, 1), got 1.0"),
        (["simulate", "bandit", "--beta", "0"], "--beta: needs finite KL weights > 0"),
        (["sweep", "--beta", "inf"], "--beta: needs finite KL weights > 0"),
        (["simulate", "bandit", "--k-ref=-1,2"], "--k-ref: needs lags >= 0, got -1"),
        (["sweep", "--group-size", "1"], "--group-size: needs group sizes >= 2"),
        (["sweep", "--lr", "0.1,0"], "--lr: needs finite learning rates > 0, got 0.0"),
    ],
)
def test_a_bad_or_empty_list_is_an_error_naming_its_flag(argv, named, tmp_path, capsys):
    out = tmp_path / "x.nc"
    extra = ["-o", str(out)] if argv[0] == "simulate" else ["--no-progress"]
    assert main([*argv, "--steps", "3", "--seeds", "1", *extra]) == 2
    err = capsys.readouterr().err
    assert named in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        # RuntimeError traceback from torch.device
        (["--device", "tpu"], "unknown device 'tpu'"),
        # a NaN learning rate wrote runs whose reward is 0 from step 2 on; 0 and < 0 never learn
        (["--lr", "nan"], "--lr: needs finite learning rates > 0, got nan"),
        (["--lr", "0.1,-1"], "--lr: needs finite learning rates > 0, got -1.0"),
        # torch's allocation failure was a RuntimeError traceback
        (["--steps", "1000000000000"], "do not fit in memory"),
        # per-step tensors (runs x groups x G) and the truth's binomial sums failed in the
        # allocator: RuntimeError tracebacks
        (["--n-prompts", "10000000000000"], "groups of up to 8 actions per step do not fit in memory"),
        (["--group-size", "4,10000000000000"], "groups of up to 10000000000000 actions per step do not fit"),
    ],
)
def test_impossible_settings_are_named_before_any_run_is_written(tmp_path, capsys, extra, named):
    out = tmp_path / "x.nc"
    argv = ["simulate", "bandit", "--steps", "3", "--seeds", "1", *extra, "-o", str(out)]
    assert main(argv) == 2
    assert named in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("verb", [["simulate", "bandit"], ["sweep"]])
@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        # the simulator's messages named its parameters (p_init, clip_eps, seeds, n_prompts),
        # the sweep's "steps must be >= 1" not --steps; a huge --seed was "Overflow when
        # unpacking long long", a negative one a run labelled seed=-1
        ("--p-init", "1.5", "argument --p-init: must lie strictly between 0 and 1"),
        ("--p-ref", "0", "argument --p-ref: must lie strictly between 0 and 1"),
        # a clip range <= 0 masks every sample: runs that never move, written without a word
        ("--clip-eps", "-1", "argument --clip-eps: must be > 0"),
        ("--clip-eps", "nan", "argument --clip-eps: must be > 0"),
        ("--steps", "0", "argument --steps: must be at least 1"),
        ("--seeds", "0", "argument --seeds: must be at least 1"),
        ("--n-prompts", "0", "argument --n-prompts: must be at least 1"),
        ("--seed", "-1", "argument --seed: must be 0 or more"),
    ],
)
def test_an_impossible_scalar_setting_is_an_error_naming_its_flag(verb, flag, value, named, tmp_path, capsys):
    out = tmp_path / "x.nc"
    with pytest.raises(SystemExit) as exc:
        main([*verb, "--k-ref", "0:2", "--steps", "3", "--seeds", "1", flag, value, "-o", str(out)])
    assert exc.value.code == 2
    assert named in capsys.readouterr().err
    assert not out.exists()


def test_a_seed_beyond_the_generator_and_the_seed_coordinate_is_refused(tmp_path, capsys):
    out = tmp_path / "x.nc"
    argv = ["simulate", "bandit", "--steps", "3", "--seeds", "2", "-o", str(out)]
    assert main([*argv, "--seed", str(2**70)]) == 2
    assert "seed must be a whole number in [0, 2**53 - seeds]" in capsys.readouterr().err
    assert not out.exists()
    # the largest seed whose two replicates keep distinct (float64) seed coordinates
    assert main([*argv, "--seed", str(2**53 - 2)]) == 0
    assert sorted(load_runset(out)["seed"].values.tolist()) == [2**53 - 2, 2**53 - 1]


@pytest.mark.parametrize("verb", [["simulate", "bandit"], ["sweep"]])
def test_a_clip_range_given_with_no_clip_is_refused_not_dropped(tmp_path, capsys, verb):
    # --no-clip won silently: the runs had no clipping although --clip-eps 0.1 was given
    out = tmp_path / "x.nc"
    argv = [*verb, "--k-ref", "0:2", "--steps", "3", "--seeds", "1", "--clip-eps", "0.1"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--no-clip", "-o", str(out)])
    assert exc.value.code == 2
    assert "argument --no-clip: not allowed with argument --clip-eps" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("argv", [["simulate", "bandit", "--help"], ["sweep", "--help"]])
def test_help_is_complete(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "--k-ref" in text and "--device" in text and "examples:" in text


def test_transition_with_several_rates_is_refused_before_the_sweep(monkeypatch, capsys):
    # `sweep --lr 0.1,0.2 --transition` ran the whole sweep (13 s at --k-ref 0:40 --seeds 32)
    # and only then said that --transition takes one learning rate
    import bayes_grpo.bandit.experiments as experiments

    def no_sweep(*args, **kwargs):
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(experiments, "sweep_k_ref", no_sweep)
    assert main(["sweep", "--lr", "0.1,0.2", "--transition", "--steps", "3", "--no-progress"]) == 2
    assert "--transition takes one learning rate" in capsys.readouterr().err


@pytest.mark.parametrize("steps", ["1", "2"])
def test_a_sweep_too_short_to_judge_convergence_is_refused_before_it_runs(steps, monkeypatch, capsys):
    # `sweep --steps 1` simulated every run (--k-ref 0:40 --seeds 32 by default) and only then
    # said "runs of 1 steps are too short to judge convergence"
    import bayes_grpo.bandit.experiments as experiments

    def no_simulation(*args, **kwargs):
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(experiments, "simulate_bandit", no_simulation)
    assert main(["sweep", "--steps", steps, "--no-progress"]) == 2
    err = capsys.readouterr().err
    runs = "runs of 1 step" if steps == "1" else f"runs of {steps} steps"  # not "1 steps"
    assert f"--steps {steps}: {runs} are too short to judge convergence" in err
    with pytest.raises(ValueError, match=f"{runs} are too short to judge convergence"):
        experiments.sweep_k_ref([0, 1], seeds=1, steps=int(steps), progress=False)


def test_the_sweep_table_prints_c_eff_at_the_closed_form_threshold_as_0(capsys):
    # lr 0.2, mu 0.5 (a = 0.05 from the measured K): at K_ref 10 C_eff = (1 - mu) - a K_ref is 0
    # up to rounding, and the table printed 1.121325e-14 beside a closed form that calls 10 unstable
    argv = ["sweep", "--k-ref", "9:12", "--lr", "0.2", "--momentum", "0.5", "--seeds", "2", "--steps", "100"]
    assert main([*argv, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "e-14" not in out and "closed form (1-mu)/a = 10.00 -> 10" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("10 "))
    assert float(row[-1]) == 0.0
    assert main([*argv, "--no-progress", "--json"]) == 0  # the JSON keeps the number computed
    records = json.loads(capsys.readouterr().out)["threshold"]["table"]
    assert 0 < abs(next(r["C_eff"] for r in records if r["k_ref"] == 10)) < 1e-12


def test_a_sweep_too_short_to_see_the_threshold_says_it_is_not_determined(capsys):
    # `sweep --steps 60` (a = 0.025, mu = 0.5, exact threshold 30) read "Runs stop converging at
    # K_ref = 18" and failed the prediction: 60 steps are shorter than the dominant mode's period
    # near the threshold (~125 steps) and its envelope there changes by under 1.5x in 600 steps,
    # so slowly decaying runs read as not converging and slowly growing ones as converged
    rc = main(["sweep", "--k-ref", "16:32", "--steps", "60", "--seeds", "4", "--no-progress", "--json"])
    assert rc == 0
    threshold = json.loads(capsys.readouterr().out)["threshold"]
    values = threshold["values"]
    assert values["exact_threshold_k_ref"] == 30 and values["empirical_threshold_k_ref"] < 29
    assert threshold["passed"] is None and values["threshold_determined"] is False
    summary = threshold["summary"]
    assert "Not determined: runs of 60 steps are too short" in summary
    assert "at K_ref 16-29, 31 (spectral radius" in summary and "Simulate at least 1174 steps (--steps)" in summary
    # the lags next to the threshold need what the recursion's growth rate says: 2 ln 1.5 / |ln rho|
    rows = {r["k_ref"]: r for r in threshold["table"]}
    for lag in (29, 31):
        rho = rows[lag]["spectral_radius"]
        assert rows[lag]["steps_to_resolve"] == pytest.approx(2 * math.log(1.5) / abs(math.log(rho)), rel=1e-9)
    # runs too short for any swept lag, far below the threshold: no failed prediction either
    assert main(["sweep", "--k-ref", "0:3", "--steps", "5", "--seeds", "2", "--no-progress", "--json"]) == 0
    threshold = json.loads(capsys.readouterr().out)["threshold"]
    assert threshold["values"]["empirical_threshold_k_ref"] == 0 and threshold["passed"] is None
    assert "Not determined: runs of 5 steps are too short" in threshold["summary"]


@pytest.mark.parametrize(
    ("flags", "shown"),
    [
        ([], True),
        (["--no-progress"], False),
        (["--json"], False),
        # the old opt-in flag still runs in scripts (and still shows the bar, even with --json)
        (["--progress"], True),
        (["--progress", "--json"], True),
        (["--progress", "--no-progress"], False),
    ],
)
def test_simulate_bandit_shows_its_progress_by_the_rule_of_fit_and_sweep(flags, shown, tmp_path, capsys):
    # `simulate bandit` showed a bar only when asked (--progress) and took no --no-progress, while
    # fit, compare and sweep show theirs on stderr unless told --no-progress or --json
    out = tmp_path / "runs.nc"
    assert main(["simulate", "bandit", "--steps", "7", "--seeds", "1", "-o", str(out), *flags]) == 0
    captured = capsys.readouterr()
    assert ("7/7" in captured.err) is shown, captured.err
    assert "7/7" not in captured.out
    if "--json" in flags:
        json.loads(captured.out)


@pytest.mark.parametrize(
    "argv", [["fit", "runs.nc", "-o", "f.nc"], ["compare", "runs.nc"], ["sweep"], ["simulate", "bandit", "-o", "r.nc"]]
)
def test_every_verb_that_shows_progress_hides_it_by_one_flag(argv):
    from bayes_grpo.cli import build_parser

    args = build_parser().parse_args([*argv, "--no-progress"])
    assert args.no_progress is True


@pytest.mark.parametrize("verb", [["simulate", "bandit", "-o", "{out}"], ["sweep"]])
def test_a_setting_refused_before_the_first_step_shows_no_progress_bar(verb, tmp_path, capsys):
    # the bar was drawn before the simulator's checks: an empty "0/5" bar above the error
    argv = [a.format(out=tmp_path / "runs.nc") for a in verb]
    assert main([*argv, "--k-ref", "100000000", "--steps", "5", "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "K_ref = 100000000: the characteristic roots" in err
    assert "0/5" not in err and "step/s" not in err, err


def test_the_simulators_say_one_run_of_one_step_in_the_singular(tmp_path, capsys):
    # `simulate bandit --steps 1 --seeds 1 --k-ref 1 --group-size 4` printed "wrote 1 run(s) x 1
    # steps", `simulate sde --steps 1` "wrote 1 run(s) x 1 logged steps"
    from bayes_grpo.checks.base import counted

    assert counted(1, "step") == "1 step" and counted(2, "step") == "2 steps"
    assert counted(0, "run") == "0 runs" and counted(1.0, "run") == "1 run"
    assert counted(3, "entry", "entries") == "3 entries"
    single = ["--seeds", "1", "--group-size", "4", "--steps", "1"]
    assert main(["simulate", "bandit", *single, "--k-ref", "1", "--no-progress", "-o", str(tmp_path / "b.nc")]) == 0
    assert f"wrote 1 run x 1 step to {tmp_path / 'b.nc'}" in capsys.readouterr().out
    assert main(["simulate", "sde", *single, "-o", str(tmp_path / "s.nc")]) == 0
    assert f"wrote 1 run x 1 logged step to {tmp_path / 's.nc'}" in capsys.readouterr().out
    assert main(["simulate", "sde", "--seeds", "1", "--group-size", "4,16", "--steps", "3", "-o", str(tmp_path / "t.nc")]) == 0
    assert "wrote 2 runs x 3 logged steps" in capsys.readouterr().out
