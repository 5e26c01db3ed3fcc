"""Thinning a run set for fits of long runs: each run keeps its first logged reward and every
n-th after it, exactly as logged, and says what it kept; a fit of long runs says how to thin."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.cli import main
from bayes_grpo.model.builder import regular_grid
from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG
from bayes_grpo.model.prepare import prepare_data
from bayes_grpo.runset import RunSetError, load_runset, make_runset, runset_warnings, save_runset
from bayes_grpo.runset.thin import (
    LONG_RUN_POINTS,
    THIN_ATTR,
    kept_positions,
    suggested_every,
    thin_runset,
    thinned,
    thinned_values_text,
    thinning_note,
)

META = dict(model="m", group_size=4, learning_rate=1e-6, momentum=0.9, momentum_convention="ema", k_ref=1)


def _runs(n_steps=101, start=1, every_b=5):
    """Run 'a' logs every step from ``start``; run 'b' every ``every_b`` steps from ``start``, with
    an evaluation reward every 20 of its steps."""
    rng = np.random.default_rng(0)
    a_steps = np.arange(start, start + n_steps)
    a = pd.DataFrame({"reward": 0.8 - 0.6 * np.exp(-a_steps / 30) + rng.normal(0, 0.03, a_steps.size),
                      "kl": rng.random(a_steps.size)}, index=a_steps)
    b_steps = a_steps[::every_b]
    b = pd.DataFrame({"reward": 0.7 - 0.5 * np.exp(-b_steps / 30) + rng.normal(0, 0.03, b_steps.size)}, index=b_steps)
    b["eval_reward"] = np.where((b_steps - start) % 20 == 0, 0.5, np.nan)
    return make_runset({"a": a, "b": b}, {"a": META, "b": {**META, "group_size": 16}})


def test_each_run_keeps_its_first_logged_reward_and_every_nth_after_it_as_logged():
    ds = _runs()
    out = thin_runset(ds, 10)
    a = out["reward"].sel(run="a").dropna("step")
    np.testing.assert_array_equal(a["step"].values, np.arange(1, 102, 10))
    np.testing.assert_array_equal(a.values, ds["reward"].sel(run="a", step=a["step"]).values)
    np.testing.assert_array_equal(
        out["kl"].sel(run="a").dropna("step").values, ds["kl"].sel(run="a", step=a["step"]).values
    )
    # run b logs every 5 steps: it keeps every 10th of its own points (steps 1, 51, 101), not
    # the steps of a's grid that it never logged
    b = out["reward"].sel(run="b").dropna("step")
    np.testing.assert_array_equal(b["step"].values, [1, 51, 101])
    # the coordinates are the runs' own
    assert out["group_size"].sel(run="b").item() == 16 and out["model"].sel(run="a").item() == "m"


def test_thinning_says_per_run_what_it_kept_and_records_it():
    out = thin_runset(_runs(), 10)
    facts = thinned(out)
    assert facts["every"] == 10
    assert facts["runs"]["a"]["logged_points"] == 101 and facts["runs"]["a"]["kept_points"] == 11
    assert facts["runs"]["b"]["values"]["eval_reward"] == [6, 2]  # steps 1, 21, ..., 101 logged; 1 and 101 kept
    warns = runset_warnings(out)
    assert "11 of 101 rewards kept (steps 1-101)" in warns["a"][-1] and "kl 11 of 101" in warns["a"][-1]
    assert "eval_reward 2 of 6" in warns["b"][-1]
    assert thinning_note(out).startswith("the run set was thinned to every 10th logged point")


def test_a_thinning_warning_counts_a_large_group_of_metrics_instead_of_naming_each():
    # a TRL run logs ~15 side metrics: 'clip_ratio_high_max 60 of 300, clip_ratio_high_mean 60 of
    # 300, ...' filled a screen per run (ingest data/tiny --every 5)
    counts = {f"m{i}": [300, 60] for i in range(14)} | {"eval": [6, 2], "kl": [300, 300], "none": [0, 0]}
    assert thinned_values_text(counts) == "60 of 300 for each of 14 metrics (m0, m1, ...), eval 2 of 6"
    assert thinned_values_text({"a": [10, 2], "b": [10, 2]}) == "a 2 of 10, b 2 of 10"
    assert thinned_values_text({"kl": [5, 5]}) == ""


def test_every_one_keeps_every_point():
    ds = _runs()
    out = thin_runset(ds, 1)
    np.testing.assert_array_equal(out["reward"].values, ds["reward"].values)
    assert thinned(out)["every"] == 1


def test_a_run_left_with_fewer_than_three_rewards_is_refused_by_name():
    with pytest.raises(RunSetError, match=r"run 'b': every 50th of its 21 logged rewards leaves 1"):
        thin_runset(_runs(), 50)


@pytest.mark.parametrize("every", [0, -2, 2.5, True])
def test_every_must_be_a_positive_whole_number(every):
    with pytest.raises(ValueError, match="positive whole number"):
        thin_runset(_runs(), every)


def test_a_thinned_run_set_is_not_thinned_twice():
    with pytest.raises(RunSetError, match="thinned already"):
        thin_runset(thin_runset(_runs(), 2), 2)


def test_the_thinned_grid_is_regular_so_the_fit_takes_its_fast_path_at_a_tenth_of_the_points():
    # one logging grid for every run (the usual log): the kept steps are that grid's every n-th,
    # a regular grid again, which the fit's trajectory evaluates by its regular-grid recursion
    ds = make_runset({r: pd.DataFrame({"reward": np.linspace(0.1, 0.8, 3000) + 0.01 * np.sin(np.arange(3000))},
                                      index=np.arange(1, 3001)) for r in ("s0", "s1")}, {"s0": META, "s1": META})
    full = prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    thin = prepare_data(thin_runset(ds, 10), DEFAULT_MODEL_CONFIG, "mechanistic")
    assert full.steps.size == 3000 and thin.steps.size == 300
    assert regular_grid(thin.steps) == (1.0, 10.0)
    # the fit on all 3000 points suggests thinning; the fit on the thinned set says what it saw
    long = [n for n in full.notes if "the longest run logs" in n]
    assert len(long) == 1 and "the longest run logs 3000 rewards (6000 in all)" in long[0]
    assert f"--every {suggested_every(3000)} " in long[0] and suggested_every(3000) == 3
    assert any("thinned to every 10th" in n for n in thin.notes)
    assert not any("the longest run logs" in n for n in thin.notes)


def test_runs_of_at_most_the_threshold_get_no_suggestion():
    ds = make_runset({"s": pd.DataFrame({"reward": np.linspace(0.1, 0.8, LONG_RUN_POINTS)})}, {"s": META})
    assert thinning_note(ds) is None


def test_kept_positions_and_suggested_every_are_the_stated_arithmetic():
    np.testing.assert_array_equal(kept_positions(7, 3), [0, 3, 6])
    assert suggested_every(1000) == 1 and suggested_every(1001) == 2 and suggested_every(10001) == 11


def test_cli_ingest_thins_a_saved_run_set_and_says_what_it_kept(tmp_path, capsys):
    raw = tmp_path / "runs.nc"
    save_runset(_runs(), raw)
    out = tmp_path / "thin.nc"
    assert main(["ingest", str(raw), "--every", "10", "-o", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    rec = {r["run"]: r for r in printed["runs"]}
    assert any("11 of 101 rewards kept" in w for w in rec["a"]["warnings"])
    back = load_runset(out)  # the record survives the round trip
    assert thinned(back)["every"] == 10 and THIN_ATTR in back.attrs
    # thinning it again is refused naming the file; a too-large --every names the file and the run
    assert main(["ingest", str(out), "--every", "2", "-o", str(tmp_path / "again.nc")]) != 0
    err = capsys.readouterr().err
    assert str(out) in err and "thinned already" in err
    assert main(["ingest", str(raw), "--every", "50", "-o", str(tmp_path / "few.nc")]) != 0
    err = capsys.readouterr().err
    assert str(raw) in err and "--every 50" in err and "run 'b'" in err
    assert not (tmp_path / "few.nc").exists() and not (tmp_path / "again.nc").exists()


def test_fit_says_how_to_thin_long_runs_before_it_samples(tmp_path, monkeypatch, capsys):
    # the note came with the fit's other notes, after the sampling it warns of (49 minutes on
    # 8 runs x 10 001 steps)
    from bayes_grpo.model import GRPODynamicsModel

    ds = make_runset({r: pd.DataFrame({"reward": np.linspace(0.1, 0.8, 2500)}, index=np.arange(1, 2501))
                      for r in ("s0", "s1")}, {"s0": META, "s1": {**META, "group_size": 16}})
    path = tmp_path / "long.nc"
    save_runset(ds, path)

    def no_sampling(self, *args, **kwargs):
        raise RuntimeError("sampling started")

    monkeypatch.setattr(GRPODynamicsModel, "fit", no_sampling)
    with pytest.raises(RuntimeError, match="sampling started"):
        main(["fit", str(path), "-o", str(tmp_path / "fit.nc")])
    err = capsys.readouterr().err
    assert "bayes-grpo fit: note: the longest run logs 2500 rewards" in err and "--every 3 " in err
    # a thinned run set gets no such note
    save_runset(thin_runset(ds, 3), tmp_path / "thin.nc")
    with pytest.raises(RuntimeError, match="sampling started"):
        main(["fit", str(tmp_path / "thin.nc"), "-o", str(tmp_path / "fit.nc")])
    assert "the longest run logs" not in capsys.readouterr().err


def test_cli_ingest_thins_a_run_set_that_ingest_itself_saved(tmp_path, capsys):
    # README: "`bayes-grpo ingest runs.nc --every 10 -o thinned.nc`"; on a run set written by
    # ingest it crashed with "TypeError: Object of type int64 is not JSON serializable" (the
    # attribute min_points read back from netCDF as a NumPy integer)
    rows = ["step,train/reward"] + [f"{s},{0.8 - 0.6 * np.exp(-s / 30):.4f}" for s in range(1, 102)]
    (tmp_path / "run.csv").write_text("\n".join(rows))
    raw = tmp_path / "runs.nc"
    assert main(["ingest", str(tmp_path / "run.csv"), "-o", str(raw)]) == 0
    out = tmp_path / "thin.nc"
    assert main(["ingest", str(raw), "--every", "10", "-o", str(out)]) == 0
    back = load_runset(out)
    assert thinned(back)["every"] == 10 and int(back["reward"].notnull().sum()) == 11
    assert int(back.attrs["min_points"]) == 10


def test_the_thinning_messages_write_the_ordinal_in_english():
    # `ingest ... --every 3` said "thinned to every 3-th logged point" (and 1-th, 2-th, 21-th)
    from bayes_grpo.runset.thin import ordinal

    assert [ordinal(n) for n in (1, 2, 3, 4, 10, 11, 12, 13, 21, 22, 23, 101, 111, 112)] == [
        "1st", "2nd", "3rd", "4th", "10th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th", "112th",
    ]  # fmt: skip
    thin = thin_runset(_runs(), 3)
    notes = [w for ws in runset_warnings(thin).values() for w in ws]
    assert any("thinned to every 3rd logged point" in w for w in notes), notes
    assert not any("-th" in w for w in notes)
    with pytest.raises(RunSetError, match="thinned already \\(every 3rd point"):
        thin_runset(thin, 2)
    with pytest.raises(RunSetError, match="every 22nd of its"):
        thin_runset(_runs(), 22)
