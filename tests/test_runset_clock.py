"""The learning-rate clock: a run on a schedule, re-counted in steps at its nominal rate,
is a run at a constant rate, which is what the law (constant gain eta K) describes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.dynamics.coefficients import oscillator_coefficients
from bayes_grpo.dynamics.simulate import simulate_recursion
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG
from bayes_grpo.model.prepare import prepare_data
from bayes_grpo.runset import RunSetError, make_runset, runset_warnings
from bayes_grpo.runset.clock import CLOCK_ATTR, clock_runset, clock_time, clocked_runs


def test_the_clock_is_the_integral_of_the_rate_in_units_of_the_nominal_rate():
    steps = np.arange(0, 11, dtype=float)
    np.testing.assert_allclose(clock_time(steps, np.full(11, 2e-4), 2e-4), steps)
    # a linear warm-up from 0 to the nominal rate over 10 steps: tau = t^2 / 20
    np.testing.assert_allclose(clock_time(steps, 2e-5 * steps, 2e-4), steps**2 / 20)
    # logged every 5 steps from step 5, one gap: the rate is linear between logged steps and
    # its first value before them
    sparse = np.array([5.0, 10.0, 15.0])
    np.testing.assert_allclose(clock_time(sparse, [1e-4, np.nan, 0.0], 1e-4), [5.0, 8.75, 10.0])
    with pytest.raises(ValueError, match="positive"):
        clock_time(steps, np.ones(11), 0.0)


def _linear_recursion(a_peak, shape, mu=0.9, lag=2, r0=0.1, pstar=0.8):
    """Mean reward at steps 0 .. T-1 of the recursion on the schedule ``shape`` (rate
    ``a_peak shape[n]`` at update n, the momentum buffer apart from the rate, as torch's SGD)."""
    return pstar + simulate_recursion(a_peak, mu, lag, shape.size - 1, e0=r0 - pstar, lr_multipliers=shape)[0]


@pytest.mark.parametrize("mu, clock_bound", [(0.0, 1.0), (0.5, 3.0)])
def test_a_run_on_a_warm_up_and_decay_schedule_is_on_the_clock_a_run_at_its_constant_rate(mu, clock_bound):
    """The constant-gain law with the true gain misses a run on a schedule by 30-60x its miss
    of the same run at a constant rate on raw steps. On the clock, without inertia, it misses
    it no more than that run (measured 0.55x); with momentum 0.5 within 3x (measured 2.3x: the
    momentum buffer's memory is counted in optimizer steps, not on the clock). The
    constant-rate run is left as it was."""
    T, w, eta, k, lag = 300, 30, 0.02, 0.5, 1
    n = np.arange(T)
    shape = np.where(n < w, (n + 1) / w, (T - n) / (T - w))
    scheduled = pd.DataFrame({"reward": _linear_recursion(eta * k, shape, mu, lag), "lr": eta * shape}, index=n)
    constant = pd.DataFrame({"reward": _linear_recursion(eta * k, np.ones(T), mu, lag), "lr": np.full(T, eta)}, index=n)
    meta = {r: dict(model="m", learning_rate=eta, momentum=mu, momentum_convention="heavy_ball", k_ref=lag) for r in ("scheduled", "constant")}
    ds = make_runset({"scheduled": scheduled, "constant": constant}, meta)
    clocked = clock_runset(ds)

    mass, damping, k_eff = oscillator_coefficients(eta * k, mu, lag)

    def law_misfit(ds, run):
        """RMS distance of the run's rewards from the law with the true gain, p* and R0."""
        y = ds["reward"].sel(run=run)
        y = y[np.isfinite(y.values)]
        curve = reward_trajectory(y["step"].values.astype(float), mass, damping, k_eff, 0.8, 0.1)
        return float(np.sqrt(np.mean((curve - y.values) ** 2)))

    floor = law_misfit(ds, "constant")  # the continuous law against the discrete recursion
    assert law_misfit(ds, "scheduled") > 10 * floor
    assert law_misfit(clocked, "scheduled") < clock_bound * floor
    assert law_misfit(clocked, "constant") == floor
    facts = clocked_runs(clocked)
    assert list(facts) == ["scheduled"] and facts["scheduled"]["steps"] == [0, T - 1]
    assert facts["scheduled"]["clock_steps"][1] == pytest.approx(np.sum(shape[:-1]), abs=1.0)
    assert any("re-timed on the learning-rate clock" in w for w in runset_warnings(clocked)["scheduled"])
    # the fit's schedule note names the scheduled run on raw steps, and nothing on the clock
    notes = lambda d: [x for x in prepare_data(d, DEFAULT_MODEL_CONFIG, "mechanistic").notes if "learning-rate schedule" in x]  # noqa: E731
    assert "scheduled (lr" in notes(ds)[0] and "--lr-clock" in notes(ds)[0]
    assert notes(clocked) == []


def test_re_timing_needs_a_logged_schedule_and_happens_once():
    n = np.arange(50)
    flat = make_runset({"r": pd.DataFrame({"reward": np.linspace(0, 1, 50), "lr": np.full(50, 1e-4)}, index=n)}, {"r": {"learning_rate": 1e-4}})
    with pytest.raises(RunSetError, match="nothing to re-time"):
        clock_runset(flat)
    with pytest.raises(RunSetError, match="no logged learning rate"):
        clock_runset(flat.drop_vars("lr"))
    decay = make_runset({"r": pd.DataFrame({"reward": np.linspace(0, 1, 50), "lr": 1e-4 * (1 - n / 50)}, index=n)}, {"r": {}})
    once = clock_runset(decay)
    # no learning_rate coordinate: the logged peak is the nominal rate
    assert json.loads(once.attrs[CLOCK_ATTR])["r"]["nominal_from"] == "the logged peak"
    with pytest.raises(RunSetError, match="already"):
        clock_runset(once)


def test_cli_ingest_re_times_scheduled_runs_with_lr_clock(tmp_path, capsys):
    from bayes_grpo.cli import main
    from bayes_grpo.runset import load_runset

    n = np.arange(100)
    rows = ["step,train/reward,train/learning_rate"] + [f"{s},{0.5 * s / 100:.4f},{1e-4 * (1 - s / 100):.3e}" for s in n]
    (tmp_path / "decay.csv").write_text("\n".join(rows))
    out = tmp_path / "runs.nc"
    assert main(["ingest", str(tmp_path / "decay.csv"), "-o", str(out), "--lr-clock"]) == 0
    assert "re-timed on the learning-rate clock" in capsys.readouterr().out
    ds = load_runset(out)
    assert "decay" in clocked_runs(ds) and int(ds["step"].max()) < 60  # 100 decaying steps: ~50 at the peak rate


@pytest.mark.parametrize("saved_first", [False, True])
def test_a_re_timed_run_is_not_told_its_fit_averages_over_the_schedule(tmp_path, capsys, saved_first):
    # ingest --lr-clock printed, for the run it re-timed, both "follows a schedule ...: ... read
    # its fit as an average over the schedule" and "re-timed on the learning-rate clock", and
    # the run set kept both: on the clock the fit is of the run at its constant rate
    from bayes_grpo.cli import main
    from bayes_grpo.runset import load_runset

    n = np.arange(100)
    rows = ["step,train/reward,train/learning_rate"] + [f"{s},{0.5 * s / 100:.4f},{1e-4 * (1 - s / 100):.3e}" for s in n]
    (tmp_path / "decay.csv").write_text("\n".join(rows))
    flat = ["step,train/reward,train/learning_rate"] + [f"{s},{0.5 * s / 100:.4f},1e-4" for s in n]
    (tmp_path / "flat.csv").write_text("\n".join(flat))
    logs = [str(tmp_path / "decay.csv"), str(tmp_path / "flat.csv")]
    out = tmp_path / "clocked.nc"
    if saved_first:
        assert main(["ingest", *logs, "-o", str(tmp_path / "raw.nc")]) == 0
        assert any("average over the schedule" in w for w in runset_warnings(load_runset(tmp_path / "raw.nc"))["decay"])
        logs = [str(tmp_path / "raw.nc")]
    capsys.readouterr()
    assert main(["ingest", *logs, "-o", str(out), "--lr-clock"]) == 0
    printed = capsys.readouterr().out
    assert "re-timed on the learning-rate clock" in printed and "average over the schedule" not in printed
    warned = runset_warnings(load_runset(out))["decay"]
    assert any("re-timed on the learning-rate clock" in w for w in warned)
    assert not any("average over the schedule" in w for w in warned)


def test_cli_ingest_re_reads_a_saved_run_set_to_re_time_it(tmp_path, capsys):
    # re-timing a run set saved without --lr-clock needed Python (clock_runset(load_runset(...)))
    from bayes_grpo.cli import main
    from bayes_grpo.runset import load_runset

    raw = tmp_path / "raw.nc"
    assert main(["simulate", "bandit", "--k-ref", "2", "--lr", "0.1", "--seeds", "2", "--steps", "60",
                 "--lr-schedule", "linear", "--warmup-steps", "6", "-o", str(raw)]) == 0  # fmt: skip
    capsys.readouterr()
    clocked = tmp_path / "clocked.nc"
    assert main(["ingest", str(raw), "--lr-clock", "-o", str(clocked)]) == 0
    assert "re-timed on the learning-rate clock" in capsys.readouterr().out
    ds = load_runset(clocked)
    assert len(clocked_runs(ds)) == 2 and int(ds["step"].max()) == 30  # sum of the rates: 30.3 steps at 0.1
    plain = tmp_path / "plain.nc"
    assert main(["ingest", str(raw), "-o", str(plain)]) == 0  # without the flag: re-read as it is
    np.testing.assert_array_equal(load_runset(plain)["reward"].values, load_runset(raw)["reward"].values)
    capsys.readouterr()
    assert main(["ingest", str(raw), str(plain), "-o", str(tmp_path / "both.nc")]) != 0
    assert "raw.nc: a saved run set is re-read alone" in capsys.readouterr().err
    assert main(["ingest", str(clocked), "--lr-clock", "-o", str(tmp_path / "twice.nc")]) != 0
    assert "clocked.nc: the run set is on the learning-rate clock already" in capsys.readouterr().err


def test_cli_ingest_names_the_inputs_a_saved_run_set_is_not_merged_with(tmp_path, capsys):
    # the same run set given twice was reported as merged with ['--manifest']
    from bayes_grpo.cli import main

    raw = tmp_path / "raw.nc"
    assert main(["simulate", "bandit", "--k-ref", "1", "--seeds", "1", "--steps", "20", "-o", str(raw)]) == 0
    capsys.readouterr()
    assert main(["ingest", str(raw), str(raw), "-o", str(tmp_path / "x.nc")]) != 0
    err = capsys.readouterr().err
    assert f"ingest does not merge it with other inputs (['{raw}'])" in err and "--manifest" not in err
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,run\nraw.nc,a\n")
    assert main(["ingest", str(raw), "--manifest", str(manifest), "-o", str(tmp_path / "x.nc")]) != 0
    assert f"(['--manifest {manifest}'])" in capsys.readouterr().err


def test_cli_ingest_refuses_min_points_on_a_saved_run_set_rather_than_ignoring_it(tmp_path, capsys):
    # --reward-key and --strict were refused on a run set re-read as it is; --min-points 500 was
    # silently ignored and every 20-step run kept
    from bayes_grpo.cli import main

    raw = tmp_path / "raw.nc"
    assert main(["simulate", "bandit", "--k-ref", "1", "--seeds", "1", "--steps", "20", "-o", str(raw)]) == 0
    capsys.readouterr()
    assert main(["ingest", str(raw), "--min-points", "500", "-o", str(tmp_path / "x.nc")]) != 0
    assert "raw.nc: --min-points applies to logs, not to a saved run set" in capsys.readouterr().err
    assert main(["ingest", str(raw), "-o", str(tmp_path / "x.nc")]) == 0


def test_cli_ingest_re_times_a_run_set_that_ingest_itself_saved(tmp_path, capsys):
    # README: "a run set saved without it is re-timed by `bayes-grpo ingest runs.nc --lr-clock -o
    # clocked.nc`"; on a run set written by ingest (not a simulator) it crashed with "TypeError:
    # Object of type int64 is not JSON serializable": the saved attribute min_points came back
    # from netCDF as a NumPy integer, which runset_from_arrays passed to json.dumps
    from bayes_grpo.cli import main
    from bayes_grpo.runset import load_runset

    n = np.arange(100)
    rows = ["step,train/reward,train/learning_rate"] + [f"{s},{0.5 * s / 100:.4f},{1e-4 * (1 - s / 100):.3e}" for s in n]
    (tmp_path / "decay.csv").write_text("\n".join(rows))
    raw = tmp_path / "runs.nc"
    assert main(["ingest", str(tmp_path / "decay.csv"), "-o", str(raw)]) == 0
    clocked = tmp_path / "clocked.nc"
    assert main(["ingest", str(raw), "--lr-clock", "-o", str(clocked)]) == 0
    assert "re-timed on the learning-rate clock" in capsys.readouterr().out
    ds = load_runset(clocked)
    assert "decay" in clocked_runs(ds) and int(ds["step"].max()) < 60
    assert int(ds.attrs["min_points"]) == 10  # ingest's attributes kept as they were


def test_a_run_too_short_on_the_clock_is_refused_counting_its_clock_steps_in_words():
    # it said "only 1 clock step(s) have a reward"
    n = np.arange(10)
    frame = pd.DataFrame({"reward": 0.1 + 0.05 * n, "lr": 1e-4 * (n + 1)}, index=n)

    def runset(nominal):
        meta = dict(model="m", learning_rate=nominal, momentum=0.0, momentum_convention="heavy_ball", k_ref=1)
        return make_runset({"r": frame}, {"r": meta})

    with pytest.raises(RunSetError, match=r"run 'r': on the learning-rate clock only 1 clock step has a reward \(lr"):
        clock_runset(runset(1.0))
    with pytest.raises(RunSetError, match=r"only 2 clock steps have a reward \(lr"):
        clock_runset(runset(0.005))
