"""``bayes-grpo stability``: point mode prints both criteria and says which one each line
uses; --json is machine-readable; posterior mode checks its flags."""

import json

import pytest

from bayes_grpo.cli import build_parser, main


def test_point_mode_prints_every_quantity_with_its_criterion(capsys):
    assert main(["stability", "--eta-k", "0.0105", "--momentum", "0.9", "--k-ref", "10"]) == 0
    out = capsys.readouterr().out
    assert "closed form (C_eff > 0): NO" in out
    assert "exact (spectral radius" in out and "< 1): yes" in out
    for phrase in (
        "M_eff",
        "C_eff",
        "K_eff",
        "zeta",
        "threshold a*",
        "critical K_ref",
        "[continuum model]",
    ):
        assert phrase in out


def test_json_output_and_ema_gain(capsys):
    args = [
        "stability",
        "--eta-k",
        "0.05",
        "--momentum",
        "0.9",
        "--k-ref",
        "4",
        "--convention",
        "ema",
        "--json",
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"] == pytest.approx(0.005)
    assert data["regime"] == "underdamped" and data["stable_exact"] is True
    assert data["threshold_a_closed_form"] == pytest.approx(0.025)


def test_non_integer_lag_reports_closed_form_only(capsys):
    assert main(["stability", "--eta-k", "0.05", "--k-ref", "2.5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stable_exact"] is None and "integer" in data["note"]


def test_errors_are_clean(capsys):
    assert main(["stability"]) == 2
    assert "--eta-k" in capsys.readouterr().err
    assert main(["stability", "--posterior", "x.nc", "--lr", "1e-6"]) == 2
    assert "--momentum" in capsys.readouterr().err
    assert main(["stability", "--eta-k", "0.1", "--momentum", "1.2"]) == 2
    assert "momentum" in capsys.readouterr().err


def test_help_documents_both_modes_and_criteria():
    text = build_parser()._subparsers._group_actions[0].choices["stability"].format_help()
    for flag in (
        "--eta-k",
        "--momentum",
        "--k-ref",
        "--convention",
        "--posterior",
        "--lr",
        "--model",
        "--json",
    ):
        assert flag in text
    assert "closed form" in text and "spectral radius" in text


def test_posterior_mode_dispatches_to_the_checks_area(monkeypatch, capsys):
    import bayes_grpo.checks.stability as checks_stability
    from bayes_grpo.checks.base import CheckResult

    seen = {}

    def fake(path, **kwargs):
        seen.update(kwargs, path=path)
        return CheckResult(
            "stability", True, "stable with probability 0.97", values={"p_unstable_exact": 0.03}
        )

    monkeypatch.setattr(checks_stability, "stability_from_posterior", fake)
    args = ["stability", "--posterior", "fit.nc", "--lr", "1e-6", "--momentum", "0.9"]
    args += ["--k-ref", "2", "--convention", "ema", "--model", "m1", "--json"]
    assert main(args) == 0
    assert seen == {
        "path": "fit.nc",
        "learning_rate": 1e-6,
        "momentum": 0.9,
        "momentum_convention": "ema",
        "k_ref": 2.0,
        "model": "m1",
        "model_size": None,  # --model-size (a new LLM of a fit with the size regression), not given
    }
    assert json.loads(capsys.readouterr().out)["values"]["p_unstable_exact"] == 0.03


def test_a_model_size_given_with_a_fitted_llm_is_said_unused_whatever_its_name(monkeypatch, capsys):
    """`stability --posterior` told a fitted LLM from a new one by the label ending in
    "(population level)": a fitted LLM of that name took --model-size silently. The result
    now says which it is (``values["new_model"]``); the printed output is unchanged."""
    from types import SimpleNamespace

    import numpy as np
    import xarray as xr

    class Fitted:
        data = SimpleNamespace(models=["llm (population level)", "other"])

        def coefficient_draws(self, **kwargs):
            a = (("chain", "draw"), np.full((1, 50), 0.01))
            return xr.Dataset({"a": a}, attrs={"parameterisation": "mechanistic"})

    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda path, **kw: (Fitted(), []))
    args = ["stability", "--posterior", "fit.nc", "--lr", "1e-3", "--momentum", "0.5"]
    args += ["--k-ref", "4", "--convention", "heavy_ball", "--model-size", "3e9"]
    assert main([*args, "--model", "llm (population level)", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["values"]["new_model"] is False
    assert "--model-size 3e+09 is not used: 'llm (population level)' is a fitted LLM" in out.err
    assert main([*args, "--json"]) == 0  # a new model: its size is used
    out = capsys.readouterr()
    assert json.loads(out.out)["values"]["new_model"] is True and "not used" not in out.err


def test_the_posterior_table_leaves_a_probabilitys_interval_blank_not_nan(monkeypatch, capsys):
    # `stability --posterior models/tiny.nc ...` printed "P(unstable), exact ... 0.000000 NaN NaN":
    # a probability has no interval, and NaN reads as a number that failed to compute
    from types import SimpleNamespace

    import numpy as np
    import xarray as xr

    class Fitted:
        data = SimpleNamespace(models=["llm"])

        def coefficient_draws(self, **kwargs):
            a = (("chain", "draw"), np.random.default_rng(0).uniform(0.005, 0.015, (1, 50)))
            return xr.Dataset({"a": a}, attrs={"parameterisation": "mechanistic"})

    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda path, **kw: (Fitted(), []))
    args = ["stability", "--posterior", "fit.nc", "--lr", "1e-3", "--momentum", "0.5"]
    assert main([*args, "--k-ref", "4", "--convention", "heavy_ball"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("P(")]
    assert len(rows) == 4 and not any("NaN" in row for row in rows), rows
    assert main([*args, "--k-ref", "4", "--convention", "heavy_ball", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)["table"]  # the check's own table, unchanged
    assert table[0]["lo"] is None and table[0]["hi"] is None, table[0]


def test_a_k_ref_too_large_for_the_exact_criterion_is_a_clear_error(capsys):
    # K_ref = 100000 asked numpy for a 75 GiB companion matrix: a MemoryError traceback (the
    # dominant roots, found in time ~ K_ref, now take it; the bound is the next one)
    assert main(["stability", "--eta-k", "0.01", "--k-ref", "100001", "--json"]) == 2
    err = capsys.readouterr().err
    assert "--k-ref 100001 is too large" in err and "K_ref <= 100000" in err


@pytest.mark.parametrize("gain", ["-0.1", "0", "nan"])
def test_a_gain_that_is_not_positive_is_a_clear_error(gain, capsys):
    assert main(["stability", "--eta-k", gain, "--momentum", "0.9", "--k-ref", "2"]) == 2
    assert "must be a positive number" in capsys.readouterr().err


@pytest.mark.parametrize("gain", ["inf", "-inf", "nan", "0"])
def test_a_gain_that_is_no_positive_finite_number_names_the_option(gain, capsys):
    # --eta-k inf said "a, momentum and k_ref must be finite, got inf, 0.0, 1.0"
    for convention in ("heavy_ball", "ema"):
        args = ["stability", f"--eta-k={gain}", "--momentum", "0.5", "--convention", convention]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"--eta-k {gain}" in err and "positive number, and finite" in err


def test_without_a_lag_the_closed_form_has_no_threshold_and_says_why(capsys):
    """K_ref = 0: C_eff = 1 - mu > 0 for every gain, so the closed form has no threshold."""
    assert main(["stability", "--eta-k", "0.1", "--momentum", "0.5", "--k-ref", "0"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "closed form (1 - mu)/K_ref" in x)
    assert "none" in line and "inf" not in line
    assert "exact (spectral radius = 1): 3" in out  # 2 (1 + mu)


@pytest.mark.parametrize("momentum", ["1", "1.5", "-0.2"])
def test_a_momentum_out_of_range_is_named_as_such_with_ema(momentum, capsys):
    """`--eta-k 0.1 --momentum 1.5 --convention ema` said "the gain a = eta K = -0.05 must be a
    positive number": the EMA step eta (1 - beta1) was taken before the momentum was checked."""
    args = ["stability", "--eta-k", "0.1", "--momentum", momentum, "--convention", "ema"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--momentum {momentum}" in err and "[0, 1)" in err and "gain" not in err
    # posterior mode: a numpy RuntimeWarning, then "stability thresholds assume 0 <= momentum < 1"
    args = ["stability", "--posterior", "x.nc", "--lr", "1e-6", "--momentum", momentum]
    assert main([*args, "--convention", "ema", "--k-ref", "2"]) == 2
    err = capsys.readouterr().err
    assert f"--momentum {momentum} must be in [0, 1)" in err and "RuntimeWarning" not in err


@pytest.mark.parametrize(
    "flag, value", [("--lr", "nan"), ("--lr", "inf"), ("--k-ref", "nan"), ("--momentum", "nan")]
)
def test_a_setting_that_is_not_a_finite_number_is_refused_in_posterior_mode(flag, value, capsys):
    """`stability --posterior fit.nc --k-ref nan` answered "P(unstable) = 1.000 by the closed
    form" (C_eff NaN counted as unstable); --lr nan said "no finite gain draws"."""
    setting = {"--lr": "1e-3", "--k-ref": "2", "--momentum": "0.5"} | {flag: value}
    args = ["stability", "--posterior", "fit.nc", "--convention", "heavy_ball"]
    args += [x for kv in setting.items() for x in kv]
    with pytest.raises(SystemExit) as exc:  # argparse: before the posterior is read
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "finite" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--posterior", "missing.nc", "--lr", "-1", "--momentum", "0.9", "--convention", "ema", "--k-ref", "2"],
         "argument --lr: must be above 0, got '-1'"),
        (["--posterior", "missing.nc", "--lr", "1e-3", "--momentum", "0.9", "--convention", "ema", "--k-ref", "-2"],
         "argument --k-ref: must be 0 or more, got '-2'"),
        (["--eta-k", "0.01", "--momentum", "0.9", "--k-ref", "-2"], "argument --k-ref: must be 0 or more, got '-2'"),
    ],
)
def test_a_learning_rate_or_lag_out_of_range_is_refused_by_its_flag(args, message, capsys):
    # `stability --posterior models/tiny.nc --lr -1 ...` read the posterior, then said
    # "learning_rate must be a finite positive number" (and --k-ref -2 "k_ref must be >= 0"),
    # naming a Python parameter, not the option
    with pytest.raises(SystemExit) as done:
        main(["stability", *args])
    assert done.value.code == 2
    assert message in capsys.readouterr().err


def test_simulate_sde_writes_the_runs_python_makes_with_their_truth(tmp_path, capsys):
    """``bayes-grpo simulate sde`` is simulate_sde_runset on the command line: same runs, same
    numbers, the truth in the file; an existing output and a malformed --models are refused."""
    import numpy as np

    from bayes_grpo.dynamics.simulate import simulate_sde_runset, truth_frame
    from bayes_grpo.runset import load_runset

    out = tmp_path / "sde.nc"
    args = ["simulate", "sde", "--k-ref", "1,2", "--group-size", "4,16", "--seeds", "2"]
    args += ["--steps", "60", "--measurement-sd", "0.1", "--seed", "3", "-o", str(out)]
    assert main(args) == 0
    cli = load_runset(out)
    py = simulate_sde_runset(
        models={"sim": {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-6}},
        group_sizes=[4, 16],
        k_refs=[1, 2],
        n_seeds=2,
        n_steps=60,
        measurement_sd=0.1,
        random_seed=3,
    )
    assert list(cli["run"].values) == list(py["run"].values) and cli.sizes["run"] == 8
    np.testing.assert_array_equal(cli["reward"].values, py["reward"].values)
    assert set(truth_frame(cli)["zeta"].round(12)) == set(truth_frame(py)["zeta"].round(12))
    # refuses to replace the file without --overwrite
    assert main(args) == 2
    assert "--overwrite" in capsys.readouterr().err
    # several LLMs from a JSON file; a value that is not an object is named
    llms = tmp_path / "llms.json"
    llms.write_text(json.dumps({"a": {"stiffness": 20, "plateau": 0.8, "initial_reward": 0.1, "noise_d": 0}, "b": 3}))
    bad = ["simulate", "sde", "--models", str(llms), "-o", str(tmp_path / "two.nc")]
    assert main(bad) == 2
    assert "llms.json" in capsys.readouterr().err
    llms.write_text(json.dumps({"a": {"stiffness": 20, "plateau": 0.8, "initial_reward": 0.1, "noise_d": 0}}))
    assert main([*bad, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["models"] == ["a"]


def test_simulate_sde_names_its_flag_when_it_refuses_an_unstable_setting(tmp_path, capsys):
    # `simulate sde --lr 0.05 --k-ref 10` ended "...is unstable (...); pass allow_unstable=True",
    # the Python argument, where the README promises the option is named
    out = tmp_path / "u.nc"
    args = ["simulate", "sde", "--lr", "0.05", "--k-ref", "10", "--steps", "20", "-o", str(out)]
    assert main(args) == 2
    assert "--allow-unstable" in capsys.readouterr().err and not out.exists()
    assert main([*args, "--allow-unstable"]) == 0


def test_stability_posterior_needs_no_convention_at_momentum_zero(capsys):
    # at momentum 0 both conventions are one optimizer step (eta (1 - 0) = eta); the fit and
    # predict take it so, while `stability --posterior` asked for --convention
    from pathlib import Path

    fit = str(Path(__file__).resolve().parents[1] / "models" / "bandit.nc")
    setting = ["stability", "--posterior", fit, "--lr", "0.1", "--k-ref", "2"]
    assert main([*setting, "--momentum", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["values"]["momentum"] == 0
    assert main([*setting, "--momentum", "0.5"]) == 2  # here the convention sets the step
    assert "posterior mode needs --convention" in capsys.readouterr().err


@pytest.mark.parametrize("momentum_flag", [[], ["--momentum", "0"]])
def test_a_phase_diagram_at_momentum_zero_needs_no_convention(momentum_flag, monkeypatch, tmp_path, capsys):
    """Runs logged at momentum 0 with no convention (ingest leaves it unknown) made
    `phase-diagram fit.nc -o p.png` fail "give --momentum and --momentum-convention", where
    `stability --posterior` and predict take heavy ball (the conventions coincide at mu = 0)."""
    from types import SimpleNamespace

    import numpy as np
    import xarray as xr

    import bayes_grpo.checks.stability as checks_stability

    runs = xr.Dataset(
        coords={
            "run": ["r0", "r1"],
            "momentum": ("run", np.zeros(2)),
            "momentum_convention": ("run", np.array(["", ""], dtype=object)),
        }
    )
    seen = {}

    def fake(fitted, **kwargs):
        import matplotlib.pyplot as plt

        seen.update(kwargs)
        fig = plt.figure()
        table = __import__("pandas").DataFrame({"threshold_lr_median": [1.0]})
        return SimpleNamespace(figures={"phase diagram": fig}, summary="ok", table=table, to_dict=dict)

    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda path, **kw: (object(), []))
    monkeypatch.setattr(checks_stability, "fitted_runset", lambda fitted: runs)
    monkeypatch.setattr(checks_stability, "phase_diagram", fake)
    out = tmp_path / "p.png"
    assert main(["phase-diagram", "fit.nc", "-o", str(out), *momentum_flag]) == 0, capsys.readouterr().err
    assert seen["momentum"] == 0.0 and seen["momentum_convention"] == "heavy_ball"


def test_a_phase_diagram_takes_the_momentum_the_fit_gave_runs_that_logged_none(monkeypatch, tmp_path, capsys):
    """Runs fitted with `fit --default momentum=0.9 momentum_convention=ema` (none logged):
    `phase-diagram fit.nc` read the logged NaN and refused "give --momentum and
    --momentum-convention", while the diagram marks the runs at the fit's settings."""
    from types import SimpleNamespace

    import numpy as np
    import xarray as xr

    import bayes_grpo.checks.stability as checks_stability

    runs = xr.Dataset(
        coords={
            "run": ["r0", "r1"],
            "learning_rate": ("run", np.full(2, 1e-3)),
            "k_ref": ("run", np.ones(2)),
            "momentum": ("run", np.full(2, np.nan)),
            "momentum_convention": ("run", np.array(["", ""], dtype=object)),
        }
    )
    fitted = SimpleNamespace(
        runset=runs,
        data=SimpleNamespace(
            run_ids=["r1", "r0"],
            learning_rate=np.full(2, 1e-3),
            momentum=np.full(2, 0.9),
            momentum_convention=["ema", "ema"],
            k_ref=np.ones(2),
        ),
    )
    seen = {}

    def fake(fitted, **kwargs):
        import matplotlib.pyplot as plt

        seen.update(kwargs)
        table = __import__("pandas").DataFrame({"threshold_lr_median": [1.0]})
        return SimpleNamespace(figures={"phase diagram": plt.figure()}, summary="ok", table=table, to_dict=dict)

    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda path, **kw: (fitted, []))
    monkeypatch.setattr(checks_stability, "phase_diagram", fake)
    out = tmp_path / "p.png"
    assert main(["phase-diagram", "fit.nc", "-o", str(out)]) == 0, capsys.readouterr().err
    assert seen["momentum"] == 0.9 and seen["momentum_convention"] == "ema"


def test_simulate_sde_refuses_the_one_llm_options_beside_models(tmp_path, capsys):
    # `simulate sde --models llms.json --stiffness 80 --model foo` simulated the file's LLM at
    # its own stiffness, named as in the file, and ignored both options without a word
    llms = tmp_path / "llms.json"
    llms.write_text(json.dumps({"a": {"stiffness": 20, "plateau": 0.8, "initial_reward": 0.1, "noise_d": 0}}))
    out = tmp_path / "sde.nc"
    base = ["simulate", "sde", "--models", str(llms), "--steps", "5", "-o", str(out)]
    assert main([*base, "--stiffness", "80", "--model", "foo"]) == 2
    err = capsys.readouterr().err
    assert "--model, --stiffness describe the one LLM simulated without --models" in err
    assert not out.exists()
    assert main([*base, "--noise-d", "0"]) == 2  # also a value equal to the default
    assert "--noise-d describes" in capsys.readouterr().err
    # without --models the options still make the one LLM, with the documented defaults
    from bayes_grpo.dynamics.simulate import truth_frame
    from bayes_grpo.runset import load_runset

    assert main(["simulate", "sde", "--plateau", "0.9", "--steps", "5", "-o", str(out)]) == 0
    truth = truth_frame(load_runset(out))
    assert set(truth["model"]) == {"sim"} and set(truth["stiffness"]) == {40.0}
    assert set(truth["plateau"]) == {0.9} and set(truth["noise_d"]) == {4e-6}


def test_simulate_sde_refuses_a_logging_interval_longer_than_the_run(tmp_path, capsys):
    # `simulate sde --steps 20 --log-every 50` wrote "4 runs x 1 logged steps": step 0 alone
    from bayes_grpo.dynamics.simulate import simulate_sde_runset

    out = tmp_path / "sde.nc"
    assert main(["simulate", "sde", "--steps", "20", "--log-every", "50", "-o", str(out)]) == 2
    assert (
        "--log-every 50 is not below --steps 20: only step 0 would be logged"
        in capsys.readouterr().err
    )
    assert not out.exists()
    with pytest.raises(ValueError, match=r"log_every \(50\) is not below n_steps \(20\)"):
        simulate_sde_runset(n_steps=20, log_every=50)
    # a run of 20 steps logs 0 .. 19: every 20th step is step 0 alone, every 19th 0 and 19
    with pytest.raises(ValueError, match=r"log_every \(20\) is not below n_steps \(20\)"):
        simulate_sde_runset(n_steps=20, log_every=20)
    assert list(simulate_sde_runset(n_steps=20, log_every=19, n_seeds=1).step.values) == [0, 19]


def test_steps_means_one_thing_for_both_simulators_and_log_every_keeps_an_even_grid(tmp_path):
    # `simulate bandit --steps 20` logged steps 0..19 (20 rows) but `simulate sde --steps 20`
    # 0..20 (21 rows); `--log-every 7` logs 0, 7, 14: an even grid (the fit's fast path,
    # model.builder.regular_grid), the last step 19 not added off it
    from bayes_grpo.dynamics.simulate import simulate_sde_runset, truth_frame
    from bayes_grpo.runset import load_runset

    sde, bandit = tmp_path / "sde.nc", tmp_path / "bandit.nc"
    common = ["--steps", "20", "--seeds", "1", "--group-size", "4"]
    assert main(["simulate", "sde", *common, "-o", str(sde)]) == 0
    assert main(["simulate", "bandit", *common, "--no-progress", "-o", str(bandit)]) == 0
    logged = load_runset(sde)
    assert list(logged.step.values) == list(load_runset(bandit).step.values) == list(range(20))
    assert set(truth_frame(logged)["n_steps"]) == {20}
    assert main(["simulate", "sde", *common, "--log-every", "7", "-o", str(sde), "--overwrite"]) == 0
    assert list(load_runset(sde).step.values) == [0, 7, 14]
    from bayes_grpo.model.builder import regular_grid

    assert regular_grid(simulate_sde_runset(n_steps=150, log_every=4).step.values) == (0.0, 4.0)
    # a run cut short (--ragged) logs its steps 0 .. n_steps - 1, n_steps as its truth says
    ragged = simulate_sde_runset(n_steps=20, n_seeds=4, ragged=0.5, measurement_sd=0.1)
    last = ragged["reward"].notnull().cumsum("step").idxmax("step").values
    assert list(last) == list(truth_frame(ragged).loc[ragged.run.values, "n_steps"] - 1)
    assert min(last) >= 10 and max(last) <= 19


@pytest.mark.parametrize(
    ("flag", "value", "need"),
    [
        ("--lr", "nan", "finite learning rates > 0"),
        ("--lr", "0.001,-1", "finite learning rates > 0"),
        ("--group-size", "0", "group sizes >= 2 (a group std needs two samples)"),
        # G = 1 was simulated (a reward that rises at a G where GRPO does not learn), while
        # `simulate bandit --group-size 1` is refused
        ("--group-size", "4,1", "group sizes >= 2 (a group std needs two samples)"),
        ("--k-ref", "-1", "lags >= 0"),
    ],
)
def test_simulate_sde_names_the_list_option_that_holds_a_meaningless_setting(flag, value, need, tmp_path, capsys):
    # the README: "a NaN learning rate ... refused naming the option"; `simulate sde --lr nan`
    # said "learning rate must be a finite positive number, got nan" (and --k-ref -1 "k_ref must
    # be >= 0"), naming no option, where `simulate bandit --lr nan` names --lr
    out = tmp_path / "sde.nc"
    assert main(["simulate", "sde", flag, value, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{flag}: needs {need}, got" in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flag", "value", "need"),
    [
        ("--measurement-sd", "-1", "must be 0 or more"),
        ("--noise-d", "-1e-6", "must be 0 or more"),
        ("--ragged", "1", "must lie in [0, 1)"),
        ("--missing-frac", "-0.1", "must lie in [0, 1)"),
    ],
)
def test_simulate_sde_names_the_scalar_option_that_holds_a_meaningless_setting(flag, value, need, tmp_path, capsys):
    # they were refused by the simulator in its own words: "measurement_sd must be a finite
    # non-negative number", "ragged and missing_frac must lie in [0, 1)", "model 'sim': noise_d
    # must be ...", naming no option
    out = tmp_path / "sde.nc"
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "sde", f"{flag}={value}", "--steps", "5", "-o", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {need}, got '{value}'" in err, err
    assert not out.exists()


def test_simulate_sde_names_a_models_path_that_is_a_folder_or_missing(tmp_path, capsys):
    # `simulate sde --models DIR` ended in an IsADirectoryError traceback, and a missing file was
    # called "no such config file"
    out = tmp_path / "sde.nc"
    assert main(["simulate", "sde", "--models", str(tmp_path), "--steps", "5", "-o", str(out)]) == 2
    assert f"{tmp_path}: --models is a folder; give its JSON file" in capsys.readouterr().err
    missing = tmp_path / "llms.json"
    assert main(["simulate", "sde", "--models", str(missing), "--steps", "5", "-o", str(out)]) == 2
    assert f"{missing}: no such --models file" in capsys.readouterr().err
    assert not out.exists()


def test_the_point_summary_prints_the_radius_and_the_momentum_as_numbers_that_read_right(capsys):
    # --eta-k 1e300 printed the radius 1e150 with 150 digits; --eta-k 1e-20 printed
    # "spectral radius 1.00000000 < 1): yes" (1 - 2e-20 is 1.0 in floats; the verdict is a < a*);
    # --momentum 0.9999999 printed "mu = 1", outside [0, 1)
    assert main(["stability", "--eta-k", "1e300", "--momentum", "0.5"]) == 0
    assert "exact (spectral radius 1e+150 < 1): NO" in capsys.readouterr().out
    assert main(["stability", "--eta-k", "1e-20", "--momentum", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "exact (spectral radius < 1; here 1 to float precision, judged by a < a*): yes" in out
    assert main(["stability", "--eta-k", "1e-9", "--momentum", "0.5"]) == 0
    assert "exact (spectral radius 1 - 2e-09 < 1): yes" in capsys.readouterr().out
    assert main(["stability", "--eta-k", "0.1", "--momentum", "0.9999999", "--k-ref", "3"]) == 0
    assert "mu = 0.9999999 (heavy_ball)" in capsys.readouterr().out


def test_simulate_sde_says_that_a_run_id_from_another_call_is_no_replicate(capsys):
    # one random stream for the whole call: the same run id drawn beside other settings holds other
    # draws. `simulate bandit --help` said so, `simulate sde --help` said only "random seed"
    import numpy as np

    from bayes_grpo.dynamics.simulate import simulate_sde_runset

    alone = simulate_sde_runset(group_sizes=(4,), n_seeds=1, n_steps=20, measurement_sd=0.1)
    beside = simulate_sde_runset(group_sizes=(4, 16), n_seeds=1, n_steps=20, measurement_sd=0.1)
    run = str(alone.run.values[-1])  # the second LLM's run: its draws come after G = 16's
    assert run in beside.run.values
    assert not np.allclose(alone.reward.sel(run=run), beside.reward.sel(run=run))
    with pytest.raises(SystemExit):
        main(["simulate", "sde", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "is no replicate to merge" in help_text


def test_a_phase_diagram_defaults_to_the_most_common_setting_of_the_runs_of_its_llm(monkeypatch, tmp_path, capsys):
    """The default momentum and convention were each the most common of all fitted runs, apart:
    two Adam runs at beta1 0.9 beside SGD runs at 0.5, 0.3 and 0.1 gave momentum 0.9 with
    heavy_ball, a setting no run has (none marked), and `--model B` took LLM A's setting, its
    own runs "at another momentum"."""
    from types import SimpleNamespace

    import numpy as np
    import xarray as xr

    import bayes_grpo.checks.stability as checks_stability

    def fitted_with(settings, models):
        n = len(settings)
        runs = xr.Dataset(
            coords={
                "run": [f"r{i}" for i in range(n)],
                "model": ("run", np.array(models, dtype=object)),
                "learning_rate": ("run", np.full(n, 1e-3)),
                "k_ref": ("run", np.ones(n)),
                "momentum": ("run", np.array([m for m, _ in settings])),
                "momentum_convention": ("run", np.array([c for _, c in settings], dtype=object)),
            }
        )
        return SimpleNamespace(runset=runs, data=SimpleNamespace(models=sorted(set(models))))

    seen = {}

    def fake(fitted, **kwargs):
        import matplotlib.pyplot as plt

        seen.update(kwargs)
        table = __import__("pandas").DataFrame({"threshold_lr_median": [1.0]})
        return SimpleNamespace(figures={"phase diagram": plt.figure()}, summary="ok", table=table, to_dict=dict)

    monkeypatch.setattr(checks_stability, "phase_diagram", fake)
    sgd = [(0.5, "heavy_ball"), (0.3, "heavy_ball"), (0.1, "heavy_ball")]
    fitted = fitted_with([(0.9, "ema"), (0.9, "ema"), *sgd], ["A"] * 5)
    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda path, **kw: (fitted, []))
    assert main(["phase-diagram", "fit.nc", "-o", str(tmp_path / "p1.png")]) == 0, capsys.readouterr().err
    assert (seen["momentum"], seen["momentum_convention"]) == (0.9, "ema")
    # a given momentum takes the convention of the runs at it
    assert main(["phase-diagram", "fit.nc", "-o", str(tmp_path / "p2.png"), "--momentum", "0.3"]) == 0
    assert (seen["momentum"], seen["momentum_convention"]) == (0.3, "heavy_ball")
    # one no run has: the convention of the runs' most common setting, as before
    assert main(["phase-diagram", "fit.nc", "-o", str(tmp_path / "p4.png"), "--momentum", "0.7"]) == 0
    assert (seen["momentum"], seen["momentum_convention"]) == (0.7, "ema")
    # a fitted LLM's diagram: the setting of its own runs
    fitted = fitted_with([(0.9, "ema"), (0.9, "ema"), (0.9, "ema"), (0.5, "heavy_ball")], ["A", "A", "A", "B"])
    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda path, **kw: (fitted, []))
    assert main(["phase-diagram", "fit.nc", "-o", str(tmp_path / "p3.png"), "--model", "B"]) == 0
    assert (seen["momentum"], seen["momentum_convention"]) == (0.5, "heavy_ball") and seen["model"] == "B"
    capsys.readouterr()


def test_a_gain_at_the_threshold_reads_as_a_radius_of_1_not_below_it_and_unstable(capsys):
    # a = 1 - mu at K_ref 1 (the threshold eta K K_ref = 1 - mu itself, radius 1): the roots came
    # out 1 - 2.2e-16 and the line read "exact (spectral radius 1 - 2.22e-16 < 1): NO"
    assert main(["stability", "--eta-k", "0.1", "--momentum", "0.9", "--k-ref", "1"]) == 0
    out = capsys.readouterr().out
    assert "exact (spectral radius < 1; here 1 to float precision, judged by a < a*): NO" in out, out
    assert "closed form (C_eff > 0): NO" in out
    assert main(["stability", "--eta-k", "0.0999", "--momentum", "0.9", "--k-ref", "1"]) == 0
    assert "exact (spectral radius 0.99995000 < 1): yes" in capsys.readouterr().out


def test_a_setting_on_the_closed_form_threshold_says_why_its_positive_c_eff_is_not_stable(capsys):
    # a K_ref = 1 - mu exactly: C_eff = 1.1e-16 after rounding. The lines read "C_eff = 1.11022e-16"
    # and "closed form (C_eff > 0): NO" with nothing to say why
    assert main(["stability", "--eta-k", "0.3", "--momentum", "0.1", "--k-ref", "3"]) == 0
    out = capsys.readouterr().out
    assert "closed form (C_eff > 0): NO (C_eff is 0 up to rounding: the setting is on the threshold)" in out
    # the coefficient itself read "C_eff = 1.11022e-16"; rounded the other way (a 0.05, mu 0.9,
    # K_ref 2) "C_eff = -2.77556e-17", with no word on the threshold at all
    assert "C_eff = 0 (on the threshold, up to rounding), K_eff = 0.3" in out
    assert main(["stability", "--eta-k", "0.05", "--momentum", "0.9", "--k-ref", "2"]) == 0
    out = capsys.readouterr().out
    assert "C_eff = 0 (on the threshold, up to rounding), K_eff = 0.05" in out and "e-17" not in out
    assert "closed form (C_eff > 0): NO (C_eff is 0 up to rounding: the setting is on the threshold)" in out
    assert main(["stability", "--eta-k", "0.31", "--momentum", "0.1", "--k-ref", "3"]) == 0
    assert "closed form (C_eff > 0): NO\n" in capsys.readouterr().out  # C_eff -0.03: nothing to add
