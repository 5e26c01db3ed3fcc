"""Stability, phase diagram and PPCs from a real (small) fit of GRPODynamicsModel.

One session-scoped NUTS fit on a simulated run set with known truth (few draws: this is a
plumbing-and-sanity test; the statistical calibration lives in benchmarks/).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from bayes_grpo.checks.ppc import ppc_checks
from bayes_grpo.checks.stability import phase_diagram, stability_from_posterior
from bayes_grpo.cli import main
from bayes_grpo.dynamics.simulate import simulate_sde_runset
from bayes_grpo.dynamics.stability import critical_k_ref

MODEL = {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 0.0}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    from bayes_grpo.model import GRPODynamicsModel

    ds = simulate_sde_runset(
        models={"sim": MODEL},
        group_sizes=(4, 16),
        learning_rates=(1e-3, 2e-3),
        momentum=0.9,
        convention="ema",
        k_refs=(1,),
        n_seeds=1,
        n_steps=120,
        log_every=3,
        measurement_sd=0.06,
        measurement_g_exponent=1.0,
        random_seed=5,
    )
    m = GRPODynamicsModel()
    m.fit(ds, draws=100, tune=150, chains=2, cores=1, random_seed=1, progressbar=False)
    path = tmp_path_factory.mktemp("post") / "fit.nc"
    m.save(path)
    return m, path


def test_posterior_stability_brackets_the_true_setting(fitted):
    m, path = fitted
    # True gain at lr 1e-3, EMA 0.9: a = 1e-3 * 0.1 * 40 = 0.004; critical K_ref (exact) is large.
    true_crit = float(critical_k_ref(0.004 * 5, 0.9, method="exact"))  # lr 5e-3
    res = stability_from_posterior(
        path, learning_rate=5e-3, momentum=0.9, momentum_convention="ema", k_ref=1
    )
    v = res.values
    assert res.passed is True and v["p_unstable_exact"] < 0.1
    assert v["critical_k_ref_exact_lo"] <= true_crit <= v["critical_k_ref_exact_hi"]
    assert abs(np.log(v["gain_median"] / 0.02)) < 0.1  # the curvature is recovered to 10%
    assert res.values["model"] == "sim"
    # A far larger step is unstable with high posterior probability.
    big = stability_from_posterior(
        m, learning_rate=0.5, momentum=0.9, momentum_convention="ema", k_ref=4
    )
    assert big.passed is False and big.values["p_unstable_exact"] > 0.9


def test_phase_diagram_marks_the_fitted_runs_as_stable(fitted, tmp_path):
    m, path = fitted
    res = phase_diagram(m, momentum=0.9, momentum_convention="ema", k_refs=range(0, 9))
    assert res.passed is True  # every fitted run was stable
    assert np.asarray(res.values["p_unstable_exact"]).shape == (40, 9)
    out = tmp_path / "phase.png"
    assert main(["phase-diagram", str(path), "-o", str(out), "--k-ref-max", "8", "--json"]) == 0
    assert out.stat().st_size > 10_000


def test_stability_cli_posterior_mode(fitted, capsys):
    _, path = fitted
    code = main(
        [
            "stability",
            "--posterior",
            str(path),
            "--lr",
            "5e-3",
            "--momentum",
            "0.9",
            "--convention",
            "ema",
            "--k-ref",
            "1",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "stability" and out["values"]["p_unstable_exact"] < 0.1


def test_ppc_per_g_on_a_correctly_specified_fit(fitted):
    m, _ = fitted
    bands, acf, var = ppc_checks(m)
    assert set(bands.table.index.get_level_values("G")) == {4.0, 16.0}
    assert bands.passed is True
    assert var.table is not None and len(var.table) == 2


def test_a_posterior_that_did_not_converge_is_used_with_a_warning(fitted, tmp_path, capsys):
    """predict, stability, diagnose and forecast used a saved fit whatever its convergence;
    now loading one for use names the failed criteria, and the CLI prints it on one line."""
    import copy

    m, path = fitted
    bad = copy.deepcopy(m)
    post = bad.idata.posterior
    name = "plateau_model" if "plateau_model" in post else next(iter(post.data_vars))
    shifted = post[name].values.copy()
    shifted[1] += 10.0 * float(np.std(shifted)) + 1.0  # the second chain elsewhere: R-hat >> 1.01
    post[name] = (post[name].dims, shifted)
    bad_path = bad.save(tmp_path / "unconverged.nc")
    args = ["--lr", "5e-3", "--momentum", "0.9", "--convention", "ema", "--k-ref", "1", "--json"]
    assert main(["stability", "--posterior", str(bad_path), *args]) == 0
    err = capsys.readouterr().err
    assert f"bayes-grpo stability: warning: {bad_path}: the fit did not converge (R-hat" in err
    assert "UserWarning" not in err  # one line, not Python's warning format
    assert main(["stability", "--posterior", str(path), *args]) == 0
    assert ("did not converge" in capsys.readouterr().err) is (m.convergence().passed is False)


def test_posterior_mode_takes_a_long_lag_and_refuses_one_for_its_own_reason(fitted, capsys):
    # `stability --posterior ... --k-ref 100001` was refused because "the spectral radius of the
    # exact criterion needs the dominant roots of a degree K_ref + 1 polynomial", which posterior
    # mode does not compute there (its exact verdict is by the threshold); the limit it has is
    # that of a whole number of steps in a float (2^53)
    _, path = fitted
    args = ["stability", "--posterior", str(path), "--lr", "5e-3", "--momentum", "0.9", "--convention", "ema"]
    assert main([*args, "--k-ref", "1000000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["values"]["p_unstable_exact"] == 1.0 and out["passed"] is False
    assert main([*args, "--k-ref", "1e16"]) == 2
    err = capsys.readouterr().err
    assert "--k-ref 1e+16 is too large: the exact criterion needs a whole number of steps" in err
    assert "spectral radius" not in err
    # point mode, which prints the spectral radius, keeps its limit and its reason
    assert main(["stability", "--eta-k", "0.01", "--k-ref", "1000000"]) == 2
    assert "the spectral radius of the exact criterion needs the dominant roots" in capsys.readouterr().err


def test_a_negative_model_size_is_refused_even_where_the_size_would_not_be_used(fitted, capsys):
    # `stability --posterior ... --model-size -5` on the fitted LLM said only that the size "is
    # not used" (the LLM's curvature is its own), as if -5 were a size
    m, path = fitted
    setting = dict(learning_rate=5e-3, momentum=0.9, momentum_convention="ema", k_ref=1)
    with pytest.raises(ValueError, match="model_size must be a positive number, got -5"):
        stability_from_posterior(m, model="sim", model_size=-5, **setting)
    with pytest.raises(ValueError, match="model_size must be a positive number, got 0"):
        phase_diagram(m, momentum=0.9, momentum_convention="ema", k_refs=[0, 1], model_size=0)
    from bayes_grpo.cli import build_parser

    args = ["--lr", "5e-3", "--momentum", "0.9", "--convention", "ema", "--k-ref", "1", "--model-size", "-5"]
    for argv in (
        ["stability", "--posterior", str(path), *args],
        ["phase-diagram", str(path), "--model-size", "-5"],
        ["predict", str(path), *args],
    ):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
        err = capsys.readouterr().err
        assert "argument --model-size: must be above 0, got '-5'" in err and "not used" not in err
