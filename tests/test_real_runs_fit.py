"""The least-squares baseline of benchmarks/real_runs_fit.py (the mechanistic law)."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_grpo.dynamics.coefficients import oscillator_coefficients
from bayes_grpo.dynamics.trajectory import reward_trajectory


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/real_runs_fit.py")


@pytest.mark.parametrize("a_true", [4e-4, 3e-3, 0.05])  # overdamped, near critical, oscillatory (mu = 0.9, L = 1)
def test_lsq_mechanistic_recovers_gain(script, a_true):
    rng = np.random.default_rng(0)
    t = np.arange(1.0, 301.0)
    m, c, k = oscillator_coefficients(a_true, script.MOMENTUM, script.K_REF)
    truth = reward_trajectory(t, m, c, k, 0.8, 0.2)
    y = truth + rng.normal(0.0, 0.02, t.size)
    y[::7] = np.nan  # missing points are skipped
    fitted, a_hat = script.lsq_mechanistic(t, y)
    ok = np.isfinite(y)
    assert fitted.shape == (ok.sum(),)
    assert abs(np.log(a_hat / a_true)) < 0.1
    # a least-squares fit: no worse than the true curve on the data it saw
    assert np.sum((fitted - y[ok]) ** 2) <= np.sum((truth[ok] - y[ok]) ** 2)


def test_lsq_mechanistic_finds_the_global_minimum(script):
    """On a noisy flat run (many local minima in a) the fit is no worse than a brute-force grid."""
    rng = np.random.default_rng(3)
    t = np.arange(1.0, 201.0)
    y = 0.5 + rng.normal(0.0, 0.1, t.size)
    fitted, _ = script.lsq_mechanistic(t, y)
    best = np.inf
    for a in np.geomspace(1e-6, 1.0, 5000):
        m, c, k = oscillator_coefficients(a, script.MOMENTUM, script.K_REF)
        g = reward_trajectory(t, m, c, k, 0.0, 1.0)
        design = np.column_stack([1.0 - g, g])
        if np.all(np.isfinite(design)):
            coef, *_ = np.linalg.lstsq(design, y, rcond=None)
            best = min(best, float(np.sum((design @ coef - y) ** 2)))
    assert np.sum((fitted - y) ** 2) <= best * (1 + 1e-9)


@pytest.mark.slow
def test_the_script_runs_a_phenomenological_fit_end_to_end(script, tmp_path, monkeypatch):
    """The script fits a run set laid out as ../shared/real_runs (sources.json + csv/) and writes
    its JSON; a phenomenological fit's run summary has ``w0_sq`` where the mechanistic one has
    ``a`` (the script read ``a`` from both and raised KeyError after the phenomenological fit)."""
    parameterisation = "phenomenological"
    import json
    import sys

    import pandas as pd

    rng = np.random.default_rng(1)
    t = np.arange(1.0, 41.0)
    sources = []
    (tmp_path / "csv").mkdir()
    for i, (p, r0) in enumerate([(0.8, 0.2), (0.6, 0.1)]):
        m, c, k = oscillator_coefficients(3e-3 * (i + 1), script.MOMENTUM, script.K_REF)
        y = reward_trajectory(t, m, c, k, p, r0) + rng.normal(0.0, 0.03, t.size)
        pd.DataFrame({"step": t.astype(int), "reward": y}).to_csv(tmp_path / "csv" / f"run{i}.csv", index=False)
        sources.append({"short_id": f"run{i}", "G": "4", "learning_rate": 1e-6})
    (tmp_path / "sources.json").write_text(json.dumps(sources))
    out = tmp_path / "out.json"
    argv = ["real_runs_fit.py", "--real-runs", str(tmp_path), "--parameterisations", parameterisation,
            "--draws", "30", "--tune", "30", "--chains", "1", "--json", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    rows = json.loads(out.read_text())[parameterisation]["runs"]
    assert [r["run"] for r in rows] == ["run0", "run1"]
    assert all(np.isfinite(r["w0_sq"]) and r["w0_sq"] > 0 for r in rows)


def test_follow_schedules_gives_the_model_the_schedules_as_it_gives_the_least_squares_fit(script):
    """``--follow-schedules`` fitted least squares on each run's schedule but the model at a
    constant rate (its config never set ``learning_rate_schedule.follow``): the comparison was
    of two different laws."""
    assert script.model_config_of(True, {})["learning_rate_schedule"] == {"follow": True}
    assert "learning_rate_schedule" not in script.model_config_of(False, {})
    assert script.model_config_of(True, {"alpha": {"fixed": 0.5}})["alpha"] == {"fixed": 0.5}


def test_the_gap_diagnostics_are_refused_on_fits_that_follow_the_schedules(script, monkeypatch, capsys):
    """``--diagnose`` draws each posterior draw's constant-rate curve: with
    ``--follow-schedules`` it scored the curves of another law than the one fitted."""
    monkeypatch.setattr("sys.argv", ["real_runs_fit.py", "--diagnose", "--follow-schedules"])
    with pytest.raises(SystemExit) as exc:
        script.main()
    assert exc.value.code == 2
    assert "--diagnose draws constant-rate curves" in capsys.readouterr().err
