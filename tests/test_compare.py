"""Law comparison: the four laws' curves, data preparation, and a small real PyMC comparison."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.dynamics.coefficients import oscillator_coefficients
from bayes_grpo.dynamics.trajectory import logistic, reward_trajectory, single_exponential
from bayes_grpo.predict.compare import LAWS, _law_curve, law_applicable, prepare_runs
from bayes_grpo.runset import make_runset


def _runset(n_runs=2, n_steps=80, momentum=0.5, k_ref=4.0, a=0.01, noise=0.02, seed=0, known=True):
    rng = np.random.default_rng(seed)
    steps = np.arange(n_steps)
    m, c, k = oscillator_coefficients(a, momentum, k_ref)
    curves, meta = {}, {}
    for i in range(n_runs):
        mean = reward_trajectory(steps.astype(float), m, c, k, 0.8, 0.2)
        curves[f"r{i}"] = pd.DataFrame(
            {"reward": mean + noise * rng.standard_normal(n_steps)}, index=steps
        )
        meta[f"r{i}"] = {"momentum": momentum, "k_ref": k_ref} if known else {}
    return make_runset(curves, meta)


def test_each_law_draws_its_closed_form():
    data = prepare_runs(_runset())
    t = np.linspace(0, 79, 50)
    runs = np.zeros(50, dtype=int)
    p = {
        "plateau": np.array([0.7, 0]),
        "initial_reward": np.array([0.1, 0]),
        "tau": np.array([20.0, 1]),
        "rate": np.array([0.2, 1]),
        "midpoint": np.array([30.0, 1]),
        "w0": np.array([0.05, 1]),
        "zeta": np.array([0.7, 1]),
        "a": np.array([0.01, 1]),
    }
    np.testing.assert_allclose(
        _law_curve("single_exp", t, p, data, runs), single_exponential(t, 0.7, 0.1, 20.0)
    )
    np.testing.assert_allclose(
        _law_curve("logistic", t, p, data, runs), logistic(t, 0.7, 0.1, 0.2, 30.0)
    )
    np.testing.assert_allclose(
        _law_curve("oscillator_phenomenological", t, p, data, runs),
        reward_trajectory(t, 1.0, 0.07, 0.0025, 0.7, 0.1),
    )
    m, c, k = oscillator_coefficients(0.01, 0.5, 4.0)
    np.testing.assert_allclose(
        _law_curve("oscillator_mechanistic", t, p, data, runs),
        reward_trajectory(t, m, c, k, 0.7, 0.1),
    )


def test_prepare_runs_standardises_and_truncates_for_leave_future_out():
    ds = _runset(n_steps=100)
    full = prepare_runs(ds)
    train = prepare_runs(ds, upto_fraction=0.7)
    assert full.obs_z.size == 200 and train.obs_z.size == 140
    assert train.obs_t.max() == 69
    np.testing.assert_allclose(
        [full.obs_z[full.obs_run == i].mean() for i in range(2)], 0.0, atol=1e-12
    )


def test_mechanistic_law_needs_momentum_and_k_ref():
    data = prepare_runs(_runset(known=False))
    assert "momentum / k_ref unknown" in law_applicable("oscillator_mechanistic", data)
    assert law_applicable("single_exp", data) is None
    with pytest.raises(ValueError, match="fewer than 9"):
        prepare_runs(_runset(n_steps=6))


def test_the_mechanistic_law_skipped_for_unknown_settings_points_to_compare_default():
    # "oscillator_mechanistic skipped: momentum / k_ref unknown for runs [...]" did not say how
    # to give them, as fit's refusal does (--default NAME=VALUE)
    reason = law_applicable("oscillator_mechanistic", prepare_runs(_runset(known=False)))
    assert "['r0', 'r1']" in reason
    assert "(CLI: --default momentum=VALUE --default k_ref=VALUE)" in reason
    assert "hyperparameter_defaults={'momentum': ..., 'k_ref': ...}" in reason
    only_lag = prepare_runs(_runset(known=False), hyperparameter_defaults={"momentum": 0.5})
    reason = law_applicable("oscillator_mechanistic", only_lag)
    assert "(CLI: --default k_ref=VALUE)" in reason and "momentum=VALUE" not in reason


def test_the_hyperparameter_defaults_of_fit_give_the_mechanistic_law_its_momentum_and_lag(monkeypatch, capsys):
    # `fit --default momentum=0.5 --default k_ref=4` fitted such runs, but compare (and
    # report --compare of that fit) skipped the mechanistic law: it had no --default
    from bayes_grpo.cli import main

    data = prepare_runs(_runset(known=False), hyperparameter_defaults={"momentum": 0.5, "k_ref": 4.0})
    assert law_applicable("oscillator_mechanistic", data) is None
    np.testing.assert_array_equal(data.momentum, [0.5, 0.5])
    known = prepare_runs(_runset(momentum=0.9), hyperparameter_defaults={"momentum": 0.5})
    np.testing.assert_array_equal(known.momentum, [0.9, 0.9])  # a known value is kept
    seen = {}
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: _runset(known=False))
    monkeypatch.setattr(
        "bayes_grpo.predict.compare.compare_laws",
        lambda ds, **kw: seen.update(kw) or (_ for _ in ()).throw(ValueError("stop here")),
    )
    main(["compare", "runs.nc", "--default", "momentum=0.5", "--default", "k_ref=4"])
    assert seen["hyperparameter_defaults"] == {"momentum": 0.5, "k_ref": 4.0}


@pytest.mark.parametrize("key", ["group_size", "learning_rate", "momentum_convention"])
def test_compare_default_takes_only_the_settings_a_law_reads(key, monkeypatch, capsys):
    # `compare runs.nc --default group_size=8` was taken and did nothing: the laws read momentum
    # and k_ref only (the mechanistic law's mass and damping; its gain a is fitted per run)
    import bayes_grpo.predict.compare as compare
    from bayes_grpo.cli import main

    monkeypatch.setattr(compare, "compare_laws", lambda *a, **kw: pytest.fail("compared"))
    value = "ema" if key == "momentum_convention" else "8"
    with pytest.raises(SystemExit) as exc:
        main(["compare", "runs.nc", "--default", f"{key}={value}"])
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert (
        "argument --default: --default key must be one of ('momentum', 'k_ref') (the only settings "
        f"a law reads), got {key!r}"
    ) in err, err


def test_a_run_set_no_law_can_be_fitted_to_is_an_error_naming_its_file(tmp_path, capsys):
    # `bayes-grpo compare single.nc --laws oscillator_mechanistic` said "error: no law could be
    # fitted: ..." and `forecast runs.nc --run r0 --upto 0` "error: run 'r0' has 0 rewards up
    # to step 0; need at least 3": neither named the run set they refused
    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    path = save_runset(_runset(known=False), tmp_path / "unknown_mu.nc")
    assert main(["compare", str(path), "--laws", "oscillator_mechanistic"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: no law could be fitted" in err and "momentum / k_ref unknown" in err
    assert main(["forecast", str(path), "--run", "r0", "--upto", "0"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: run 'r0' has 1 reward up to step 0; need at least 3" in err


@pytest.mark.slow
def test_oscillator_beats_single_exponential_on_a_slow_start_by_leave_future_out():
    from bayes_grpo.predict.compare import compare_laws

    ds = _runset(n_runs=2, n_steps=70, noise=0.015, seed=3)
    res = compare_laws(
        ds, laws=["oscillator_phenomenological", "single_exp"], draws=150, tune=150, chains=2
    )
    assert set(res.loo.index) == {"oscillator_phenomenological", "single_exp"}
    assert "n_pareto_k_high" in res.loo
    # the slow start is what a single exponential cannot draw: both LOO and LFO see it
    assert res.loo.index[0] == "oscillator_phenomenological"
    assert (
        res.lfo.loc["oscillator_phenomenological", "lfo_elpd"]
        > res.lfo.loc["single_exp", "lfo_elpd"]
    )
    assert res.per_run["r2"].between(0.8, 1.0).all()
    d = res.to_check_result().to_dict()
    assert d["values"]["lfo_winner"] == "oscillator_phenomenological"
    assert set(LAWS) >= set(res.per_run["law"])


def test_compare_help_lists_every_law_and_the_cli_accepts_exactly_them(capsys):
    from bayes_grpo.cli import main
    from bayes_grpo.cli.predict import COMPARE_LAWS

    assert COMPARE_LAWS == LAWS
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(law in text for law in LAWS)
    with pytest.raises(SystemExit) as exc:
        main(["compare", "runs.nc", "--laws", "single_exponential"])
    assert exc.value.code == 2 and "invalid choice: 'single_exponential'" in capsys.readouterr().err


def test_a_law_whose_chains_disagree_is_named_and_not_ranked_silently():
    import arviz as az

    from bayes_grpo.predict.compare import _convergence_failures, convergence_note

    rng = np.random.default_rng(0)
    good = az.from_dict(posterior={"rate": rng.normal(0.0, 1.0, (2, 400))})
    bad = az.from_dict(posterior={"rate": rng.normal(0.0, 1.0, (2, 400)) + np.array([[0.0], [5.0]])})
    assert _convergence_failures("logistic", good, good) == [] and convergence_note([]) is None
    failures = _convergence_failures("logistic", good, bad)
    assert len(failures) == 1 and failures[0].startswith("logistic leave-future-out fit (R-hat")
    assert convergence_note(failures).startswith("This fit did not converge, so its figures are unreliable")


def test_a_non_converged_law_is_named_with_the_criterion_that_failed():
    # a fit whose R-hat, bulk ESS and divergences all passed but that failed on another
    # criterion was noted as "did not converge (max R-hat 1.007, min bulk ESS 282,
    # 0 divergences)": three passing figures and no reason
    import arviz as az

    from bayes_grpo.predict.compare import _convergence_failures

    rng = np.random.default_rng(0)
    good = az.from_dict(posterior={"rate": rng.normal(0.0, 1.0, (2, 400))})
    deep = az.from_dict(
        posterior={"rate": rng.normal(0.0, 1.0, (2, 400))},
        sample_stats={"reached_max_treedepth": np.ones((2, 400), dtype=bool)},
    )
    (note,) = _convergence_failures("single_exp", deep, good)
    assert note.startswith("single_exp fit (")
    assert "800 transitions at the maximum tree depth 10" in note
    assert "R-hat" not in note and "divergen" not in note


def test_the_comparison_summary_states_the_pareto_k_warning_once():
    from bayes_grpo.predict.compare import ComparisonResult

    loo = pd.DataFrame({"elpd_loo": [1.0, 0.5], "n_pareto_k_high": [3, 1]}, index=["logistic", "single_exp"])
    lfo = pd.DataFrame({"lfo_elpd": [2.0, 1.0]}, index=["logistic", "single_exp"])
    note = "PSIS-LOO: 4 observation(s) with Pareto k > 0.7 across laws (see n_pareto_k_high): LOO is unreliable there."
    res = ComparisonResult(loo=loo, lfo=lfo, per_run=pd.DataFrame(columns=["run", "law", "lfo_elpd", "r2"]), notes=[note])
    assert res.to_check_result().summary.count("Pareto k") == 1


def test_a_run_without_a_trend_is_won_by_no_law():
    # a flat run was given a "best law" by noise, beside the runs a law does explain
    from bayes_grpo.predict.compare import NO_TREND, ComparisonResult

    per_run = pd.DataFrame(
        {
            "run": ["rise", "rise", "flat", "flat"],
            "law": ["logistic", "single_exp", "logistic", "single_exp"],
            "lfo_elpd": [3.0, 1.0, -2.0, -1.0],
            "r2": [0.9, 0.8, 0.01, 0.02],
            "has_trend": [True, True, False, False],
        }
    )
    lfo = pd.DataFrame({"lfo_elpd": [1.0, 0.0]}, index=["logistic", "single_exp"])
    res = ComparisonResult(loo=lfo, lfo=lfo, per_run=per_run, notes=[])
    winners = res.per_run_winners().set_index("run")
    assert winners.loc["rise", "best_lfo"] == "logistic" and winners.loc["rise", "best_r2"] == "logistic"
    assert winners.loc["flat", "best_lfo"] == NO_TREND == winners.loc["flat", "best_r2"]


def test_steps_before_zero_are_refused_as_in_fit():
    # every law starts at t = 0; negative steps were compared without a word
    ds = _runset(n_steps=20)
    ds = ds.assign_coords(step=ds["step"] - 10)
    with pytest.raises(ValueError, match="steps must be >= 0"):
        prepare_runs(ds)


def test_the_refusal_of_steps_before_zero_names_the_runs_logged_there():
    # "steps must be >= 0 (...); found -10" named no run: in a run set of many, which one?
    ds = _runset(n_runs=3, n_steps=20)
    ds = ds.assign_coords(step=ds["step"] - 2)
    ds["reward"].loc[{"run": "r1", "step": [-2, -1]}] = np.nan
    with pytest.raises(ValueError, match=r"found -2 \(runs with rewards there: \['r0', 'r2'\]\)"):
        prepare_runs(ds)


@pytest.mark.slow
def test_a_late_starting_or_constant_run_is_named_in_the_comparison():
    # a run logged from step 1e6 is the flat tail of every law (R^2 ~ 0 for all four), a
    # constant run tells no law from another: the comparison ranked them without a word
    from bayes_grpo.predict.compare import compare_laws

    ds = _runset(n_runs=2, n_steps=30)
    ds = ds.assign_coords(step=ds["step"] + 10**6)
    ds["reward"][1] = 0.5
    res = compare_laws(ds, laws=["single_exp"], draws=20, tune=20, chains=1)
    summary = res.to_check_result().summary
    assert "r0 (from step 1000000 to 1000029)" in summary and "start late" in summary, summary
    assert "r1" in summary and "constant reward" in summary, summary


def _fake_single_exp_fits(monkeypatch) -> list[str]:
    """Replace ``compare.fit_law`` by draws of the right shapes (no sampling); returns the laws fitted."""
    import arviz as az

    import bayes_grpo.predict.compare as compare

    fitted: list[str] = []

    def fake_fit(law, data, **kw):
        fitted.append(law)
        rng = np.random.default_rng(len(fitted))
        n = data.n_runs
        post = {
            "plateau": np.tile(data.late, (1, 20, 1)),
            "initial_reward": np.tile(data.early, (1, 20, 1)),
            "sigma": np.ones((1, 20, n)),
            "tau": np.full((1, 20, n), 10.0),
        }
        loglik = {"y": -0.5 - rng.random((1, 20, data.obs_z.size))}
        return az.from_dict(posterior=post, log_likelihood=loglik)

    monkeypatch.setattr(compare, "fit_law", fake_fit)
    return fitted


def test_the_progress_of_a_comparison_of_one_run_counts_it_in_the_singular(monkeypatch):
    # `compare` of one run printed "single_exp: fit 1 of 1 (1 runs)"
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    lines: list[str] = []
    compare.compare_laws(_runset(n_runs=1, n_steps=30), laws=["single_exp"], draws=20, chains=1, progress=lines.append)
    assert "single_exp: fit 1 of 1 (1 run)" in lines, lines
    lines.clear()
    compare.compare_laws(_runset(n_runs=2, n_steps=30), laws=["single_exp"], draws=20, chains=1, progress=lines.append)
    assert "single_exp: fit 1 of 1 (2 runs)" in lines, lines


def test_the_python_api_refuses_a_law_named_twice_as_the_cli_does(monkeypatch):
    # `compare --laws single_exp single_exp` is refused ("lists single_exp more than once"), while
    # compare_laws(laws=["single_exp", "single_exp"]) dropped the repeat quietly (and before that
    # fitted it twice and summed its leave-future-out elpd twice)
    import bayes_grpo.predict.compare as compare

    fitted = _fake_single_exp_fits(monkeypatch)
    with pytest.raises(ValueError) as exc:
        compare.compare_laws(_runset(n_steps=30), laws=["single_exp", "logistic", "single_exp"], draws=20, chains=1)
    assert str(exc.value) == "laws: ['single_exp', 'logistic', 'single_exp'] lists single_exp more than once"
    assert fitted == []  # refused before any fit


def test_compare_laws_takes_one_law_named_as_a_string_and_refuses_an_empty_list(monkeypatch):
    # laws="single_exp" was read letter by letter ("unknown law 's'"), laws=[] said "no law could
    # be fitted: " with no reason
    import bayes_grpo.predict.compare as compare

    fitted = _fake_single_exp_fits(monkeypatch)
    res = compare.compare_laws(_runset(n_steps=30), laws="single_exp", draws=20, chains=1)
    assert fitted == ["single_exp", "single_exp"]  # the full fit and the leave-future-out fit
    assert list(res.lfo.index) == ["single_exp"]
    with pytest.raises(ValueError, match=r"^laws: no law given; expected one or more of \('oscillator_mechanistic'"):
        compare.compare_laws(_runset(n_steps=30), laws=[], draws=20, chains=1)


def test_one_chain_says_that_convergence_was_not_checked(monkeypatch):
    # with --chains 1 the table's max_rhat read NaN and no convergence note was possible, silently
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's "All-NaN slice" reached the user
        res = compare.compare_laws(_runset(n_steps=30), laws=["single_exp"], draws=20, chains=1)
    assert np.isnan(res.loo.loc["single_exp", "max_rhat"])
    assert "With one chain R-hat cannot be computed" in res.to_check_result().summary


def test_an_rmse_averaged_over_runs_of_very_different_scales_is_said_to_be_set_by_the_largest():
    # lfo_rmse_mean read 16965 for runs of scale 1e-6 and 1e6, without a word
    from bayes_grpo.predict.compare import rmse_scale_note

    t = np.arange(20.0)
    small, big = 1e-6 * (1 - np.exp(-t / 5)), 1e6 * (1 - np.exp(-t / 5))
    note = rmse_scale_note(["tiny", "huge"], np.stack([small, big]))
    assert note is not None and "tiny" in note and "huge" in note and "set by the runs of the largest scale" in note
    assert rmse_scale_note(["a", "b"], np.stack([small * 1e6, big * 1e-6 * 5])) is None  # ranges 1 and 5
    assert rmse_scale_note(["a"], small[None]) is None


def test_the_text_output_gives_the_r2_of_each_law_on_each_run(monkeypatch, capsys):
    # `bayes-grpo compare runs.nc` printed the median R^2 per law and the best law per run, but
    # not the R^2 per run of each law (only --json had them)
    from bayes_grpo.cli import main

    _fake_single_exp_fits(monkeypatch)
    runset = _runset(n_runs=3, n_steps=30)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: runset)
    assert main(["compare", "runs.nc", "--laws", "single_exp", "--chains", "1"]) == 0
    out = capsys.readouterr().out
    block = out.split("R^2 per run")[1].split("best law per run")[0]
    rows = {line.split()[0]: line.split()[1:] for line in block.strip().splitlines()[2:]}
    assert list(rows) == ["r0", "r1", "r2"] and all(len(v) == 1 for v in rows.values())
    from bayes_grpo.predict.compare import compare_laws

    res = compare_laws(runset, laws=["single_exp"], draws=20, chains=1)
    for run, (value,) in rows.items():
        assert float(value) == pytest.approx(res.per_run.set_index("run").loc[run, "r2"], abs=1e-5)


def test_a_run_set_without_any_trend_is_not_said_to_prefer_a_law(monkeypatch):
    # two flat noisy runs: per_run_winners said "none (no trend)" for both, while the summary
    # read "Leave-future-out (last 30% of each run) prefers logistic; PSIS-LOO prefers logistic."
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    rng = np.random.default_rng(0)
    steps = np.arange(40)
    flat = make_runset({f"f{i}": pd.DataFrame({"reward": 0.5 + 0.02 * rng.standard_normal(40)}, index=steps) for i in range(2)}, {})
    res = compare.compare_laws(flat, laws=["single_exp"], draws=20, chains=1)
    assert set(res.per_run_winners()["best_lfo"]) == {compare.NO_TREND}
    summary = res.to_check_result().summary
    assert "prefers" not in summary and summary.startswith("No run has a visible trend")
    rising = compare.compare_laws(_runset(n_steps=30), laws=["single_exp"], draws=20, chains=1)
    # (one law fitted: no preference either way; see the test of a comparison of one law)
    assert rising.to_check_result().summary.startswith("Only single_exp was fitted: no law to compare it with")


def test_runs_without_a_trend_do_not_decide_the_leave_future_out_winner(monkeypatch):
    # the totals summed every run's held-out elpd: four flat runs, each drawn 1 nat better by
    # the single exponential, outvoted the one rising run the logistic drew 2 nats better, and
    # the summary read "prefers single_exp" while per_run_winners gave the flat runs to no law
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    runset = _runset(n_runs=5, n_steps=30)
    flat = ["r1", "r2", "r3", "r4"]
    elpd = {("logistic", "r0"): 12.0, ("single_exp", "r0"): 10.0}  # the run with a trend
    elpd |= {(law, r): (5.0 if law == "single_exp" else 4.0) for r in flat for law in ("logistic", "single_exp")}

    def r2_table(law, data, mean):
        return [{"run": r, "law": law, "r2": 0.5, "smoothed_r2": 0.5, "has_trend": r not in flat} for r in data.run_ids]

    def lfo_scores(law, idata_train, data, train):
        return [{"run": r, "law": law, "lfo_elpd": elpd[law, r], "lfo_rmse": 0.1, "n_held_out": 9} for r in data.run_ids]

    monkeypatch.setattr(compare, "_r2_table", r2_table)
    monkeypatch.setattr(compare, "_lfo_scores", lfo_scores)
    monkeypatch.setattr(compare, "curve_draws", lambda idata, law, data, steps: (np.zeros((1, data.n_runs, steps.size)), None))
    res = compare.compare_laws(runset, laws=["single_exp", "logistic"], draws=20, chains=1)
    assert res.winner("lfo") == "logistic"
    assert res.lfo.loc["logistic", "lfo_elpd"] == 12.0 and res.lfo.loc["single_exp", "lfo_elpd"] == 10.0
    assert res.lfo.loc["single_exp", "lfo_elpd_all_runs"] == 30.0  # nothing hidden: every run's sum
    assert (res.lfo["n_lfo_runs"] == 1).all()
    summary = res.to_check_result().summary
    assert "4 without one left out: r1, r2, r3, r4) prefers logistic" in summary, summary
    assert set(res.per_run_winners().set_index("run").loc[flat, "best_lfo"]) == {compare.NO_TREND}


def test_a_run_too_short_to_compare_is_left_out_and_named_not_the_whole_run_set(monkeypatch):
    # `compare` refused a whole run set because one run had fewer than 8 rewards
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    ds = _runset(n_runs=3, n_steps=30)
    ds["reward"].loc[{"run": "r1", "step": list(range(6, 30))}] = np.nan  # 6 rewards left
    res = compare.compare_laws(ds, laws=["single_exp"], draws=20, chains=1)
    assert sorted(res.per_run["run"]) == ["r0", "r2"]
    assert "1 run left out, with fewer than 9 finite rewards" in res.to_check_result().summary
    assert ": r1." in res.to_check_result().summary
    with pytest.raises(ValueError, match="fewer than 9"):  # nothing left: still an error
        compare.compare_laws(ds.sel(run=["r1"]), laws=["single_exp"], draws=20, chains=1)


def _fit_with_an_outlier(spike_of):
    """A stand-in for ``compare.fit_law``: every observation fits alike except the one that
    ``spike_of(data)`` picks (an index into the observations), whose Pareto k is far above 0.7."""
    import arviz as az

    def fit(law, data, **kw):
        rng = np.random.default_rng(0)
        n = data.n_runs
        post = {
            "plateau": np.tile(data.late, (1, 200, 1)),
            "initial_reward": np.tile(data.early, (1, 200, 1)),
            "sigma": np.ones((1, 200, n)),
            "tau": np.full((1, 200, n), 10.0),
        }
        loglik = -0.5 - 0.01 * rng.random((1, 200, data.obs_z.size))
        loglik[0, :, spike_of(data)] = -0.5 - 20 * rng.standard_exponential(200) ** 2
        return az.from_dict(posterior=post, log_likelihood={"y": loglik})

    return fit


def test_the_pareto_k_warning_names_the_law_and_the_run_of_each_unreliable_point(monkeypatch):
    # `compare outlier.nc` (one run with a reward spike) said only "PSIS-LOO: 4 observation(s)
    # with Pareto k > 0.7 across laws (see n_pareto_k_high)": neither the laws nor the run
    import bayes_grpo.predict.compare as compare

    fourth_of_r1 = _fit_with_an_outlier(lambda data: np.flatnonzero(data.obs_run == 1)[3])
    monkeypatch.setattr(compare, "fit_law", fourth_of_r1)
    res = compare.compare_laws(_runset(n_runs=3, n_steps=30), laws=["single_exp"], draws=200, chains=1)
    assert res.per_run.set_index("run")["n_pareto_k_high"].to_dict() == {"r0": 0, "r1": 1, "r2": 0}
    summary = res.to_check_result().summary
    assert summary.count("Pareto k") == 1
    assert "PSIS-LOO: 1 observation with Pareto k > 0.7 across laws (single_exp: r1 1;" in summary, summary


def test_the_pareto_k_warning_names_the_steps_of_the_unreliable_points(monkeypatch):
    # `compare one.nc` said "PSIS-LOO: 2 observation(s) with Pareto k > 0.7 across laws
    # (oscillator_phenomenological: only 1; single_exp: only 1 ...)": the run, not the point, so
    # the user had to search the run for the outlier LOO cannot judge
    import bayes_grpo.predict.compare as compare

    step_7_of_r1 = _fit_with_an_outlier(lambda data: np.flatnonzero((data.obs_run == 1) & (data.obs_t == 7)))
    monkeypatch.setattr(compare, "fit_law", step_7_of_r1)
    res = compare.compare_laws(_runset(n_runs=3, n_steps=30), laws=["single_exp"], draws=200, chains=1)
    assert res.per_run.set_index("run")["pareto_k_high_steps"].to_dict() == {"r0": [], "r1": [7], "r2": []}
    summary = res.to_check_result().summary
    assert "LOO is unreliable there. Where: single_exp, run r1: step 7." in summary, summary


def test_the_count_of_high_pareto_k_points_is_an_integer_in_the_table_and_the_json(monkeypatch, capsys):
    # `compare --json` gave "n_pareto_k_high": 2.0 and the text table 2.0: the per-law LOO rows
    # were put in a frame by column and transposed, which made the count a float column
    import json

    from bayes_grpo.cli import main

    _fake_single_exp_fits(monkeypatch)
    runset = _runset(n_runs=2, n_steps=30)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: runset)
    assert main(["compare", "runs.nc", "--laws", "single_exp", "--chains", "1", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["loo"]
    assert isinstance(row["n_pareto_k_high"], int), row


def test_one_posterior_draw_is_refused_with_an_error_not_a_traceback(monkeypatch, capsys):
    # `compare runs.nc --draws 1 --chains 1` sampled every law, then az.loo's Pareto smoothing
    # ended in "IndexError: index -2 is out of bounds for axis 0 with size 1" (a traceback)
    import bayes_grpo.predict.compare as compare
    from bayes_grpo.cli import main

    fitted = _fake_single_exp_fits(monkeypatch)
    with pytest.raises(ValueError, match="PSIS-LOO needs at least 2 posterior draws"):
        compare.compare_laws(_runset(n_steps=30), laws=["single_exp"], draws=1, chains=1)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: _runset(n_steps=30))
    assert main(["compare", "runs.nc", "--laws", "single_exp", "--draws", "1", "--chains", "1"]) != 0
    assert "--draws 1 --chains 1: PSIS-LOO needs at least 2 posterior draws" in capsys.readouterr().err
    assert fitted == []  # refused before any sampling


def test_a_momentum_of_one_is_refused_as_fit_refuses_it_not_a_sampling_traceback(monkeypatch, capsys):
    # `compare runs.nc --laws oscillator_mechanistic --default momentum=1 --default k_ref=1`
    # ended in a PyMC SamplingError traceback (the prior of a is centred on log(1 - mu) = -inf);
    # `fit` refuses the same flag with a message naming it
    import bayes_grpo.predict.compare as compare
    from bayes_grpo.cli import main

    fitted = _fake_single_exp_fits(monkeypatch)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: _runset(known=False, n_steps=30))
    argv = ["compare", "runs.nc", "--laws", "oscillator_mechanistic", "--default", "momentum=1", "--default", "k_ref=1"]
    assert main(argv) != 0 and fitted == []
    assert "'hyperparameter_defaults.momentum' (--default momentum=...) must be in [0, 1); got 1.0" in capsys.readouterr().err
    # a run set whose own momentum is 1: the mechanistic law is skipped, naming the runs
    reason = law_applicable("oscillator_mechanistic", prepare_runs(_runset(momentum=1.0, n_steps=30)))
    assert reason == "momentum must be in [0, 1); runs ['r0 (1)', 'r1 (1)']"
    res = compare.compare_laws(_runset(momentum=1.0, n_steps=30), laws=["oscillator_mechanistic", "single_exp"], draws=20, chains=1)
    assert fitted == ["single_exp", "single_exp"]
    assert "oscillator_mechanistic skipped: momentum must be in [0, 1)" in res.to_check_result().summary


def test_a_negative_seed_is_refused_naming_the_flag(monkeypatch, capsys):
    # `compare runs.nc --seed -1` got as far as PyMC and said "runs.nc: Setting random_seed = -1
    # is not allowed. Pass `None` to not specify a seed." (a Python argument, and the file blamed)
    from bayes_grpo.cli import main

    fitted = _fake_single_exp_fits(monkeypatch)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: _runset(n_steps=30))
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "runs.nc", "--laws", "single_exp", "--seed", "-1"])
    assert exit_.value.code == 2 and fitted == []
    assert "argument --seed: must be 0 or more, got '-1'" in capsys.readouterr().err



def test_the_summary_states_the_share_held_out_that_was_used_and_a_share_outside_0_1_is_refused(monkeypatch):
    # compare_laws(..., lfo_fraction=0.2) held out the last 20% of each run, but the summary
    # read "Leave-future-out (last 30% of each run)"; lfo_fraction=0 ended in a KeyError
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    res = compare.compare_laws(_runset(n_steps=30), laws=["single_exp"], draws=20, chains=1, lfo_fraction=0.2)
    assert (res.per_run["n_held_out"] == 6).all()
    # one law fitted: its sentence states the share too (no preference: nothing to compare)
    summary = res.to_check_result().summary
    assert "on the last 20% of each run" in summary and "30%" not in summary, summary
    two = compare.ComparisonResult(
        loo=pd.DataFrame({"elpd_loo": [2.0, 1.0]}, index=["single_exp", "logistic"]),
        lfo=pd.DataFrame({"lfo_elpd": [2.0, 1.0]}, index=pd.Index(["single_exp", "logistic"], name="law")),
        per_run=res.per_run,
        lfo_fraction=res.lfo_fraction,
    )
    assert two.to_check_result().summary.startswith("Leave-future-out (last 20% of each run) prefers single_exp")
    for bad in (0.0, 1.0):
        with pytest.raises(ValueError, match="lfo_fraction must lie strictly between 0 and 1"):
            compare.compare_laws(_runset(n_steps=30), laws=["single_exp"], draws=20, chains=1, lfo_fraction=bad)


def test_the_summary_says_by_how_much_each_winner_leads():
    # `compare mixed.nc` read "Leave-future-out ... prefers oscillator_mechanistic; PSIS-LOO
    # prefers oscillator_phenomenological" for leads of 0.27 nats (452.76 against single_exp's
    # 452.49) and 9.5 +- 5.1 nats: the words were the same for a tie as for a clear win
    from bayes_grpo.predict.compare import ComparisonResult

    lfo = pd.DataFrame(
        {"lfo_elpd": [452.76, 452.49, 424.5]}, index=["oscillator_mechanistic", "single_exp", "logistic"]
    )
    loo = pd.DataFrame(
        {"elpd_loo": [-67.9, -77.4, -98.2], "elpd_diff": [0.0, 9.47, 30.3], "dse": [0.0, 5.1, 6.1]},
        index=["oscillator_phenomenological", "oscillator_mechanistic", "logistic"],
    )
    per_run = pd.DataFrame({"run": ["r"] * 3, "law": list(lfo.index), "lfo_elpd": lfo["lfo_elpd"], "r2": 0.9, "has_trend": True})
    summary = ComparisonResult(loo=loo, lfo=lfo, per_run=per_run).to_check_result().summary
    assert "prefers oscillator_mechanistic (by 0.27 nats over single_exp)" in summary, summary
    assert "PSIS-LOO prefers oscillator_phenomenological (by 9.47 ± 5.1 nats over oscillator_mechanistic)." in summary
    one = ComparisonResult(loo=loo.iloc[:1], lfo=lfo.iloc[:1], per_run=per_run.iloc[:1]).to_check_result().summary
    assert one.startswith("Leave-future-out (last 30% of each run) prefers oscillator_mechanistic; PSIS-LOO")


def test_a_run_too_short_to_test_for_a_trend_is_left_out_not_said_to_have_none(monkeypatch):
    # a run of 8 rewards rising from 0.1 to 0.8 in noise 0.01 was compared, and reported "1
    # without one left out: eight" / best law "none (no trend)": the trend test cannot tell
    # under 9 points (3 blocks of 3), so compare's minimum of 8 let in runs it always calls flat
    import bayes_grpo.predict.compare as compare
    from bayes_grpo import metrics

    _fake_single_exp_fits(monkeypatch)
    rng = np.random.default_rng(0)
    t, t8 = np.arange(40), np.arange(8)
    runs = make_runset(
        {
            "long": pd.DataFrame({"reward": 0.8 - 0.6 * np.exp(-t / 10) + rng.normal(0, 0.02, 40)}, index=t),
            "eight": pd.DataFrame({"reward": 0.1 + 0.1 * t8 + rng.normal(0, 0.01, 8)}, index=t8),
        },
        {},
    )
    assert np.isnan(metrics.trend_test(t8, runs["reward"].sel(run="eight").values[:8])[1])
    res = compare.compare_laws(runs, laws=["single_exp"], draws=20, chains=1)
    assert list(res.per_run["run"]) == ["long"]
    summary = res.to_check_result().summary
    assert "without one left out" not in summary
    assert "1 run left out, with fewer than 9 finite rewards (too few to fit, to test for a trend" in summary
    assert summary.count("eight") == 1


def test_a_loo_lead_within_its_standard_error_is_said_to_be_a_tie_not_a_preference():
    # `compare one.nc --draws 100 --tune 100` (one oscillator run) read "PSIS-LOO prefers
    # oscillator_phenomenological (by 0.302 ± 0.53 nats over oscillator_mechanistic)": a lead
    # within its own standard error, stated as a preference
    from bayes_grpo.predict.compare import ComparisonResult

    laws = ["oscillator_phenomenological", "oscillator_mechanistic", "single_exp", "logistic"]
    loo = pd.DataFrame(
        {"elpd_loo": [55.78, 55.48, 54.35, 53.67], "elpd_diff": [0.0, 0.302, 1.44, 2.12], "dse": [0.0, 0.53, 1.16, 1.97]},
        index=laws,
    )
    lfo = pd.DataFrame({"lfo_elpd": [63.9, 63.2, 60.8, 54.8]}, index=laws)
    per_run = pd.DataFrame({"run": ["r"] * 4, "law": laws, "lfo_elpd": lfo["lfo_elpd"].to_numpy(), "r2": 0.98, "has_trend": True})
    check = ComparisonResult(loo=loo, lfo=lfo, per_run=per_run).to_check_result()
    assert "PSIS-LOO prefers" not in check.summary, check.summary
    assert (
        "PSIS-LOO cannot tell oscillator_phenomenological from oscillator_mechanistic: oscillator_phenomenological "
        "leads by 0.302 ± 0.53 nats over oscillator_mechanistic, within one standard error of the difference."
    ) in check.summary
    assert check.values["loo_within_se_of_winner"] == ["oscillator_mechanistic"]
    # a later law within its (larger) standard error is named, the lead over the second stays a preference
    loo.loc["oscillator_mechanistic", "dse"] = 0.2
    loo.loc["logistic", "dse"] = 2.5
    summary = ComparisonResult(loo=loo, lfo=lfo, per_run=per_run).to_check_result().summary
    assert (
        "PSIS-LOO prefers oscillator_phenomenological (by 0.302 ± 0.2 nats over oscillator_mechanistic), "
        "but cannot tell it from logistic (within one standard error)."
    ) in summary, summary


def test_the_leave_future_out_lead_has_a_paired_standard_error_and_a_lead_within_it_is_a_tie():
    # `compare one.nc --draws 100 --tune 100` read "Leave-future-out ... prefers
    # oscillator_mechanistic (by 0.77 nats over oscillator_phenomenological)" with no standard
    # error: a lead of 0.77 nats over 24 held-out points that swing by more either way
    from bayes_grpo.predict.compare import ComparisonResult, lfo_differences, lfo_totals

    rng = np.random.default_rng(0)
    a = rng.normal(2.0, 0.5, 24)
    pointwise = {
        "oscillator_mechanistic": {"r": a},
        "oscillator_phenomenological": {"r": a - (0.03 + 0.5 * np.tile([1.0, -1.0], 12))},  # 0.72 ± 2.4
        "logistic": {"r": a - 1.0 - rng.normal(0.0, 0.1, 24)},
    }
    per_run = pd.DataFrame(
        [{"run": "r", "law": law, "lfo_elpd": float(v["r"].sum()), "lfo_rmse": 0.1, "r2": 0.9, "smoothed_r2": 0.9, "has_trend": True} for law, v in pointwise.items()]
    )
    lfo = lfo_totals(per_run)
    lfo = lfo.join(lfo_differences(pointwise, lfo))
    diff = a - pointwise["oscillator_phenomenological"]["r"]
    lead = lfo.loc["oscillator_mechanistic", "lfo_elpd"] - lfo.loc["oscillator_phenomenological", "lfo_elpd"]
    assert lfo.index[0] == "oscillator_mechanistic" and lfo.loc["oscillator_mechanistic", "lfo_dse"] == 0.0
    np.testing.assert_allclose(lfo.loc["oscillator_phenomenological", "lfo_elpd_diff"], lead)
    np.testing.assert_allclose(lfo.loc["oscillator_phenomenological", "lfo_dse"], np.sqrt(24 * np.var(diff)))
    assert lfo.loc["logistic", "lfo_elpd_diff"] > lfo.loc["logistic", "lfo_dse"]
    loo = pd.DataFrame({"elpd_loo": [1.0, -20.0, -40.0], "elpd_diff": [0.0, 21.0, 41.0], "dse": [0.0, 2.0, 3.0]}, index=list(pointwise))
    check = ComparisonResult(loo=loo, lfo=lfo, per_run=per_run).to_check_result()
    se = lfo.loc["oscillator_phenomenological", "lfo_dse"]
    assert (
        f"Leave-future-out (last 30% of each run) cannot tell oscillator_mechanistic from oscillator_phenomenological: "
        f"oscillator_mechanistic leads by {lead:.3g} ± {se:.2g} nats over oscillator_phenomenological, within one "
        "standard error of the difference;"
    ) in check.summary, check.summary
    assert check.values["lfo_within_se_of_winner"] == ["oscillator_phenomenological"]
    assert "PSIS-LOO prefers oscillator_mechanistic (by 21 ± 2 nats over oscillator_phenomenological)." in check.summary


def test_a_run_won_within_the_standard_error_names_the_laws_it_cannot_be_told_from(monkeypatch):
    # `compare sexp.nc` (two single-exponential runs): "best law per run" gave e0 to
    # oscillator_mechanistic by 0.007 nats of held-out elpd, a win in the table the numbers do not make
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    runset = _runset(n_runs=2, n_steps=30)
    base = np.linspace(1.0, 2.0, 9)
    swing = 0.5 * np.tile([1.0, -1.0], 5)[:9]
    lpd = {
        ("single_exp", "r0"): base + 1.0,  # r0: single_exp clearly ahead of logistic
        ("logistic", "r0"): base,
        ("single_exp", "r1"): base + 0.01 + swing,  # r1: 0.09 nats ahead, swinging by 0.5
        ("logistic", "r1"): base,
    }

    def lfo_scores(law, idata_train, data, train):
        return [
            {"run": r, "law": law, "lfo_elpd": float(lpd[law, r].sum()), "lfo_rmse": 0.1, "n_held_out": 9, "_lfo_lpd": lpd[law, r]}
            for r in data.run_ids
        ]

    def r2_table(law, data, mean):
        return [{"run": r, "law": law, "r2": 0.5, "smoothed_r2": 0.5, "has_trend": True} for r in data.run_ids]

    monkeypatch.setattr(compare, "_lfo_scores", lfo_scores)
    monkeypatch.setattr(compare, "_r2_table", r2_table)
    monkeypatch.setattr(compare, "curve_draws", lambda idata, law, data, steps: (np.zeros((1, data.n_runs, steps.size)), None))
    res = compare.compare_laws(runset, laws=["single_exp", "logistic"], draws=20, chains=1)
    winners = res.per_run_winners().set_index("run")
    assert winners.loc["r0", "best_lfo"] == "single_exp" and winners.loc["r0", "lfo_within_se"] == ""
    assert winners.loc["r1", "best_lfo"] == "single_exp" and winners.loc["r1", "lfo_within_se"] == "logistic"
    r1 = res.per_run.set_index(["run", "law"]).loc[("r1", "logistic")]
    np.testing.assert_allclose(r1["lfo_elpd_diff"], (0.01 + swing).sum())
    np.testing.assert_allclose(r1["lfo_dse"], np.sqrt(9 * np.var(0.01 + swing)))


def test_the_text_output_says_in_which_units_each_elpd_is(monkeypatch, capsys):
    # `compare pct.nc` (rewards on 0-100) printed elpd_loo +99.6 and lfo_elpd -104.3 for the same
    # runs, side by side and unitless: LOO is on each run's standardised reward, LFO in reward units
    from bayes_grpo.cli import main

    _fake_single_exp_fits(monkeypatch)
    runset = _runset(n_runs=2, n_steps=30)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: runset)
    assert main(["compare", "runs.nc", "--laws", "single_exp", "--chains", "1"]) == 0
    out = capsys.readouterr().out
    assert "PSIS-LOO (az.compare; elpd of each run's standardised reward (reward - mean) / sd" in out
    assert "leave-future-out (last 30% of each run; elpd of the reward in its own units) and R^2" in out


def test_a_run_whose_best_r2_is_within_the_standard_error_names_the_laws_it_cannot_be_told_from(monkeypatch):
    # best_r2 had no tie rule: on r1 single_exp and logistic miss the data by noise of the same
    # size, and whichever was ahead by a hair (or first in law order, when level) was "best",
    # while the leave-future-out verdicts of the same table name such ties
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    runset = _runset(n_runs=2, n_steps=30)
    rng = np.random.default_rng(3)
    misses = {
        ("single_exp", 0): 0.01 * rng.standard_normal(30),  # r0: single_exp fits, logistic does not
        ("logistic", 0): 0.6 * rng.standard_normal(30),
        ("single_exp", 1): 0.3 * rng.standard_normal(30),  # r1: both miss by as much
        ("logistic", 1): 0.3 * rng.standard_normal(30),
    }

    def curves(idata, law, data, steps, **kw):
        z = np.nan_to_num((data.reward - data.loc[:, None]) / data.scale[:, None])
        mean = np.stack([z[i] + misses[law, i] for i in range(data.n_runs)])[None]
        return mean, np.ones((1, data.n_runs))

    monkeypatch.setattr(compare, "curve_draws", curves)
    res = compare.compare_laws(runset, laws=["single_exp", "logistic"], draws=20, chains=1)
    winners = res.per_run_winners().set_index("run")
    assert winners.loc["r0", "best_r2"] == "single_exp" and winners.loc["r0", "r2_within_se"] == ""
    assert winners.loc["r1", "r2_within_se"] == ({"single_exp", "logistic"} - {winners.loc["r1", "best_r2"]}).pop()
    # the difference is that of the R^2s, its standard error that of the paired squared errors
    pr = res.per_run.set_index(["run", "law"])
    y = runset["reward"].sel(run="r1").values
    best, other = winners.loc["r1", "best_r2"], winners.loc["r1", "r2_within_se"]
    np.testing.assert_allclose(pr.loc[("r1", other), "r2_diff"], pr.loc[("r1", best), "r2"] - pr.loc[("r1", other), "r2"])
    scale = float(np.std(y))
    d = ((scale * misses[other, 1]) ** 2 - (scale * misses[best, 1]) ** 2) / np.sum((y - y.mean()) ** 2)
    np.testing.assert_allclose(pr.loc[("r1", other), "r2_dse"], np.sqrt(30 * np.var(d)))
    assert pr.loc[("r1", best), "r2_diff"] == 0.0


def test_the_comparison_table_lists_the_laws_in_the_leave_future_out_ranking():
    # the report's (and --json's) table joined lfo and loo with an outer join, which sorted the
    # laws by name: logistic first, whichever law won
    from bayes_grpo.predict.compare import ComparisonResult

    lfo = pd.DataFrame({"lfo_elpd": [10.0, 8.0, 3.0]}, index=pd.Index(["single_exp", "oscillator_phenomenological", "logistic"], name="law"))
    loo = pd.DataFrame({"elpd_loo": [5.0, 4.0, 1.0], "elpd_diff": [0.0, 1.0, 4.0]}, index=["oscillator_phenomenological", "single_exp", "logistic"])
    per_run = pd.DataFrame([{"run": "r", "law": law, "lfo_elpd": v, "r2": 0.9, "has_trend": True} for law, v in lfo["lfo_elpd"].items()])
    check = ComparisonResult(loo=loo, lfo=lfo, per_run=per_run).to_check_result()
    assert list(check.table.index) == ["single_exp", "oscillator_phenomenological", "logistic"]
    assert check.table.loc["single_exp", "elpd_loo"] == 4.0
    assert [row["law"] for row in check.to_dict()["table"]] == list(check.table.index)


def test_a_comparison_of_one_fitted_law_states_no_preference(monkeypatch):
    # `compare --laws oscillator_mechanistic single_exp` on runs without momentum / k_ref fitted
    # single_exp alone and read "Leave-future-out (last 30% of each run) prefers single_exp;
    # PSIS-LOO prefers single_exp.": a preference over no other law
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    res = compare.compare_laws(
        _runset(n_steps=30, known=False), laws=["oscillator_mechanistic", "single_exp"], draws=20, chains=1
    )
    summary = res.to_check_result().summary
    assert "prefers" not in summary, summary
    elpd = res.lfo.loc["single_exp", "lfo_elpd"]
    assert summary.startswith(
        f"Only single_exp was fitted: no law to compare it with, so no preference (leave-future-out elpd {elpd:.4g} "
        "on the last 30% of each run; PSIS-LOO elpd "
    ), summary
    assert "oscillator_mechanistic skipped: momentum / k_ref unknown" in summary


def test_the_rmse_scale_note_reads_the_runs_that_the_rmse_average_holds(monkeypatch):
    # `compare mixed.nc` (a 0-1 run, a 0-100 run and a flat run of range 0.09) noted "The runs'
    # reward ranges differ by 763x (flat 0.0854, pct 65.1)": the flat run has no trend and is
    # not in lfo_rmse_mean; two trend runs of like ranges beside it got the note for nothing
    import bayes_grpo.predict.compare as compare

    _fake_single_exp_fits(monkeypatch)
    rng = np.random.default_rng(0)
    steps = np.arange(40)
    rise = 0.8 - 0.6 * np.exp(-steps / 8.0)
    curves = {
        "a": pd.DataFrame({"reward": rise + 0.01 * rng.standard_normal(40)}, index=steps),
        "b": pd.DataFrame({"reward": 2.0 * rise + 0.01 * rng.standard_normal(40)}, index=steps),
        "flat": pd.DataFrame({"reward": 0.4 + 0.005 * rng.standard_normal(40)}, index=steps),
    }
    res = compare.compare_laws(make_runset(curves, {}), laws=["single_exp"], draws=20, chains=1)
    assert compare.no_trend_runs(res.per_run) == ["flat"]
    assert not any("reward ranges differ" in n for n in res.notes), res.notes
    curves["b"] = pd.DataFrame({"reward": 100.0 * rise + 0.5 * rng.standard_normal(40)}, index=steps)
    res = compare.compare_laws(make_runset(curves, {}), laws=["single_exp"], draws=20, chains=1)
    (note,) = [n for n in res.notes if "reward ranges differ" in n]
    assert "(a 0.609, b 59.1)" in note and "flat" not in note, note


def _fake_fits_whose_chains_disagree(monkeypatch) -> list[dict]:
    """Replace ``compare.fit_law`` by two-chain draws (no sampling) of every law's variables, one
    of them with chains that disagree (R-hat far above 1.01); returns each call's keywords."""
    import arviz as az

    import bayes_grpo.predict.compare as compare

    calls: list[dict] = []

    def fake_fit(law, data, **kw):
        calls.append(kw)
        rng = np.random.default_rng(len(calls))
        n, shape = data.n_runs, (2, 50, data.n_runs)
        post = {
            "plateau": np.tile(data.late, (2, 50, 1)) + 0.01 * rng.standard_normal(shape),
            "initial_reward": np.tile(data.early, (2, 50, 1)) + 0.01 * rng.standard_normal(shape),
            "sigma": np.exp(0.01 * rng.standard_normal(shape)),
            "tau": 10.0 + 0.1 * rng.standard_normal(shape),
            "rate": 0.2 + 0.01 * rng.standard_normal(shape),
            "midpoint": 10.0 + 0.1 * rng.standard_normal(shape),
            "apart": rng.normal(0.0, 1.0, (2, 50)) + np.array([[0.0], [5.0]]),
        }
        loglik = {"y": -0.5 - rng.random((2, 50, data.obs_z.size))}
        assert n == data.late.size
        return az.from_dict(posterior=post, log_likelihood=loglik)

    monkeypatch.setattr(compare, "fit_law", fake_fit)
    return calls


def test_fits_that_did_not_converge_are_said_once_with_the_laws_they_concern(monkeypatch):
    # `compare` gave one sentence per fit that did not converge, each ending "its figures are
    # unreliable; rerun with more --draws/--tune.": four times for two laws
    import bayes_grpo.predict.compare as compare

    _fake_fits_whose_chains_disagree(monkeypatch)
    res = compare.compare_laws(_runset(n_steps=30), laws=["single_exp", "logistic"], draws=50, chains=2)
    summary = res.to_check_result().summary
    assert summary.count("did not converge") == 1 and summary.count("rerun with more --draws/--tune") == 1, summary
    (note,) = [n for n in res.notes if "did not converge" in n]
    for fit in ("single_exp fit (", "single_exp leave-future-out fit (", "logistic fit (", "logistic leave-future-out fit ("):
        assert fit in note, note


def test_compare_shows_its_sampling_progress_as_fit_does_and_hides_it_with_no_progress_or_json(monkeypatch, capsys):
    # `compare` printed PyMC's lines for each of its fits ("Initializing NUTS ...", "Sampling 2
    # chains ... took 12 seconds", "Only 60 samples per chain ...") under --json too, and had no
    # --no-progress: it now follows fit's rule (progress unless --no-progress or --json), with a
    # line naming the law before each fit
    from bayes_grpo.cli import main

    calls = _fake_fits_whose_chains_disagree(monkeypatch)
    runset = _runset(n_steps=30)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: runset)
    argv = ["compare", "runs.nc", "--laws", "single_exp", "--draws", "50"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "bayes-grpo compare: single_exp: fit 1 of 1" in err and "single_exp: leave-future-out fit 1 of 1" in err, err
    assert [kw["progressbar"] for kw in calls] == [True, True]
    for flag in ("--no-progress", "--json"):
        calls.clear()
        assert main([*argv, flag]) == 0
        captured = capsys.readouterr()
        assert "bayes-grpo compare: single_exp" not in captured.err, (flag, captured.err)
        assert [kw["progressbar"] for kw in calls] == [False, False], flag


def test_the_best_law_per_run_table_is_indexed_by_run_names(monkeypatch, capsys):
    # `bayes-grpo compare runs.nc` printed the best law per run with rows 0, 1, 2 and the run
    # names in a column beside them, unlike the R^2 per run table above it (rows named by run)
    from bayes_grpo.cli import main

    _fake_single_exp_fits(monkeypatch)
    runset = _runset(n_runs=3, n_steps=30)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: runset)
    assert main(["compare", "runs.nc", "--laws", "single_exp", "--chains", "1"]) == 0
    block = capsys.readouterr().out.split("best law per run")[1]
    lines = block.strip().splitlines()
    assert lines[0].split()[0] == "best_lfo"
    assert [line.split()[0] for line in lines[1:]] == ["r0", "r1", "r2"]


def test_laws_take_a_comma_list_as_simulate_and_sweep_take_their_lists(monkeypatch, capsys):
    # `bayes-grpo compare runs.nc --laws single_exp,logistic` was "argument --laws: invalid choice:
    # 'single_exp,logistic'" while `simulate sde --lr 1e-3,3e-3` takes comma lists: both forms now
    import bayes_grpo.predict.compare as compare
    from bayes_grpo.cli import main

    asked: list[list[str]] = []

    def fake_compare(runset, *, laws, **kw):
        asked.append(list(laws))
        raise ValueError("stop here")

    monkeypatch.setattr(compare, "compare_laws", fake_compare)
    monkeypatch.setattr("bayes_grpo.runset.load_runset", lambda path: _runset(n_runs=2, n_steps=30))
    for argv in (["single_exp,logistic"], ["single_exp", "logistic"], ["single_exp,", "logistic"]):
        main(["compare", "runs.nc", "--laws", *argv, "--no-progress"])
    assert asked == [["single_exp", "logistic"]] * 3
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["compare", "runs.nc", "--laws", "single_exp,single_exponential"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "argument --laws: invalid choice: 'single_exponential'" in err, err


def test_a_law_name_with_a_colon_is_an_unknown_law_not_a_bad_range(capsys):
    # `compare --laws single_exp:logistic` said "bad range 'single_exp:logistic'; use START:STOP
    # or START:STOP:STEP (whole numbers, STEP != 0)": parse_values read ranges of any kind
    from bayes_grpo.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["compare", "runs.nc", "--laws", "single_exp:logistic"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "argument --laws: invalid choice: 'single_exp:logistic'" in err, err
    assert "range" not in err, err


@pytest.mark.parametrize(
    "words, text",
    [
        (["single_exp", "single_exp"], "single_exp single_exp"),
        (["single_exp,single_exp"], "single_exp,single_exp"),
        (["single_exp,logistic", "single_exp"], "single_exp,logistic single_exp"),
    ],
)
def test_a_law_named_twice_is_refused_space_or_comma_separated(words, text, monkeypatch, capsys):
    # `--laws single_exp single_exp` was taken (compare_laws dropped the repeat quietly) while
    # `--laws single_exp,single_exp` was refused as "lists single_exp more than once"
    import bayes_grpo.predict.compare as compare
    from bayes_grpo.cli import main

    monkeypatch.setattr(compare, "compare_laws", lambda *a, **kw: pytest.fail("compared"))
    with pytest.raises(SystemExit) as exc:
        main(["compare", "runs.nc", "--laws", *words])
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert f"argument --laws: {text!r} lists single_exp more than once" in err, err
