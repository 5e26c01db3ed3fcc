"""benchmarks/real_runs_clock.py: the raw-steps fit against the learning-rate-clock fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.runset import make_runset
from bayes_grpo.runset.clock import clock_runset, clock_time, clocked_runs


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/real_runs_clock.py")


def test_skips_cleanly_without_the_public_logs(script, tmp_path, capsys):
    out = tmp_path / "out.json"
    assert script.main(["--real-runs", str(tmp_path / "absent"), "--json", str(out)]) == 0
    assert "skipped" in capsys.readouterr().out
    assert not out.exists()


def test_a_run_that_follows_the_law_on_the_clock(script):
    """Warm-up then linear decay to 0; the reward is the first-order law in clock time, still rising
    when the rate runs out: the clock fits read the plateau, the raw-steps fit reads the stall."""
    steps = np.arange(1, 201)
    eta = 1e-4
    lr = eta * np.where(steps <= 10, (steps - 1) / 10, (200 - steps) / 190)
    tau = clock_time(steps, lr, eta)
    y = 0.8 - 0.6 * np.exp(-tau / 60.0) + 0.02 * np.random.default_rng(0).standard_normal(200)
    ds = make_runset(
        {"r": pd.DataFrame({"reward": y, "lr": lr}, index=steps)}, {"r": {"learning_rate": eta}}
    )
    clocked = clock_runset(ds)
    res = script.analyse_run(ds, clocked, "r", clocked_runs(clocked)["r"], controls=False)
    truth = 0.8
    raw, clock, unbinned = res["raw_fit"], res["clock_fit"], res["tau_fit"]
    assert abs(raw["plateau"] - truth) > 0.08  # the stall read as the plateau
    assert abs(clock["plateau"] - truth) < 0.06
    assert abs(unbinned["plateau"] - truth) < 0.06
    assert res["n_raw"] == 200 and res["held_out"]["train_points"] == 140
    # the last 30% of the steps lie on the decayed tail: about a tenth of the clock span
    assert 0.08 < res["tail_clock_share"] < 0.12
    # every fit is scored on the raw points, and all three are close to the noise ceiling there
    for fit in (raw, clock, unbinned):
        assert fit["r2"] > 0.97
