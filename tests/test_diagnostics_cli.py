"""``bayes-grpo diagnose``: the command line over the same diagnostics, and the real public logs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bayes_grpo.cli import main
from bayes_grpo.cli._common import number_text
from bayes_grpo.diagnostics import DiagnosticsConfig, diagnose
from bayes_grpo.diagnostics.cases import simulated_case
from bayes_grpo.runset import concat_runsets, load_runset, save_runset


@pytest.fixture(scope="module")
def runset_path(tmp_path_factory):
    ds = concat_runsets(
        [
            simulated_case("advantage_degeneracy", seed=3),
            simulated_case("healthy_reward_only", seed=4),
        ]
    )
    path = tmp_path_factory.mktemp("diag") / "runs.nc"
    save_runset(ds, path)
    return path


def test_cli_json_matches_python_api(runset_path, capsys):
    args = [
        "diagnose",
        str(runset_path),
        "--json",
        "--mode",
        "advantage_degeneracy",
        "--set",
        "common.n_boot=20",
        "--set",
        "instability.fit_oscillation=false",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["common"]["n_boot"] == 20
    by_run = {r["values"]["run"]: r for r in out["results"]}
    assert by_run["advantage_degeneracy"]["passed"] is False
    assert by_run["advantage_degeneracy"]["values"]["detected"] is True
    assert by_run["healthy_reward_only"]["passed"] is None
    from bayes_grpo.runset import load_runset

    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 20, "figures": False}})
    (api,) = diagnose(
        load_runset(runset_path),
        run="advantage_degeneracy",
        config=cfg,
        modes=["advantage_degeneracy"],
    )
    assert api.values["strength"]["value"] == pytest.approx(
        by_run["advantage_degeneracy"]["values"]["strength"]["value"]
    )


def test_cli_table_one_run_and_figures(runset_path, tmp_path, capsys):
    figs = tmp_path / "figs"
    args = [
        "diagnose",
        str(runset_path),
        "--run",
        "advantage_degeneracy",
        "--mode",
        "advantage_degeneracy",
        "--figures",
        str(figs),
        "--set",
        "common.n_boot=10",
        "--verbose",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "detected" in out and "healthy_reward_only" not in out
    # the title counts the one run diagnosed in the singular (it said "(1 runs)")
    assert f"failure-mode diagnostics of {runset_path} (1 run)" in out
    assert f"wrote 1 figure to {figs}" in out
    assert (figs / "advantage_degeneracy__advantage_degeneracy.png").stat().st_size > 1000


def test_a_run_and_mode_named_twice_are_diagnosed_once(runset_path, tmp_path, capsys):
    # --run a --run a gave every row twice, and with --figures stopped on "given as both
    # --figures and --figures; choose two paths", a path the user never gave twice
    figs = tmp_path / "figs"
    args = ["diagnose", str(runset_path), "--json", "--set", "common.n_boot=10"]
    args += ["--run", "advantage_degeneracy"] * 2 + ["--mode", "advantage_degeneracy"] * 2
    assert main([*args, "--figures", str(figs)]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert [(r["values"]["run"], r["name"]) for r in out["results"]] == [
        ("advantage_degeneracy", "advantage_degeneracy")
    ]
    assert (figs / "advantage_degeneracy__advantage_degeneracy.png").is_file()


def test_cli_bad_input_gives_clean_error(runset_path, tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "missing.nc")]) == 2
    assert "no such run-set file" in capsys.readouterr().err
    assert main(["diagnose", str(runset_path), "--set", "degeneracy.nope=1"]) == 2
    assert "unknown degeneracy settings" in capsys.readouterr().err
    assert main(["diagnose", str(runset_path), "--run", "nope"]) == 2
    # the file named too, as forecast names it (it said "run 'nope' not in the run set" alone)
    assert f"{runset_path}: run 'nope' not in the run set" in capsys.readouterr().err


def test_a_run_set_without_runs_is_a_clean_error_not_a_traceback(tmp_path, capsys):
    # the table of no result died in a KeyError traceback; --json printed an empty list
    path = tmp_path / "empty.nc"
    save_runset(simulated_case("healthy", n_steps=30).isel(run=slice(0, 0)), path)
    for extra in ([], ["--json"]):
        assert main(["diagnose", str(path), *extra]) == 2
        captured = capsys.readouterr()
        assert "holds no runs" in captured.err
        assert "Traceback" not in captured.err


def test_cli_help_lists_every_mode(capsys):
    with pytest.raises(SystemExit):
        main(["diagnose", "--help"])
    text = capsys.readouterr().out
    for mode in (
        "reward_hacking",
        "advantage_degeneracy",
        "policy_concentration",
        "instability",
        "--posterior",
        "--json",
    ):
        assert mode in text


def test_cli_help_names_every_instability_signal(capsys):
    # the help listed "growth of grad_norm / importance ratio / clip ratio, reward oscillation,
    # negative damping": no KL, spikes, reward divergence or collapse, and the clip ratio is
    # judged by its level, not its growth
    with pytest.raises(SystemExit):
        main(["diagnose", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for signal in ("KL", "spikes", "sustained clipping", "diverges", "collapses after rising"):
        assert signal in text, signal


@pytest.mark.real_runs
def test_real_logs_diagnosed_without_silent_passes(real_runs_dir):
    """Every real run gets a verdict or a reason; a TRL run whose groups are mostly all-correct is flagged."""
    from bayes_grpo.runset.ingest import load_runs

    files = [
        real_runs_dir / "csv" / f"{name}.csv"
        for name in (
            "sun_q25_7bi_g4_vanilla_s42",
            "alex_q25_0.5b_wordle_g4_run2",
            "duruoli_llama3.1_8b_quantqa_g4",
        )
    ]
    ds = load_runs(files)
    # the oscillator fit (about a second per run) is exercised on simulated runs; skipped here
    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 20, "figures": False}, "instability": {"fit_oscillation": False}}
    )
    results = diagnose(ds, config=cfg)
    assert len(results) == 4 * ds.sizes["run"]
    for r in results:
        assert r.passed in (True, False, None)
        if r.passed is None:
            assert r.values["reason"]
    by = {(r.values["run"], r.name): r for r in results}
    # frac_reward_zero_std of this run stays between 0.7 and 1.0: most groups carry no signal
    sun = by[("sun_q25_7bi_g4_vanilla_s42", "advantage_degeneracy")]
    assert sun.passed is False and sun.values["evidence"]["final_share"] > 0.5
    # no evaluation reward in these logs: decoupling cannot be assessed
    assert all(by[(run, "reward_hacking")].passed is None for run in map(str, ds["run"].values))
    # the duruoli log has no entropy: concentration is not assessable there
    assert by[("duruoli_llama3.1_8b_quantqa_g4", "policy_concentration")].passed is None
    assert np.isfinite(
        by[("alex_q25_0.5b_wordle_g4_run2", "advantage_degeneracy")].values["evidence"][
            "final_share"
        ]
    )


def test_results_render_in_the_html_report(tmp_path):
    from bayes_grpo.report.build import write_report

    ds = simulated_case("advantage_degeneracy", seed=1)
    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 10}, "instability": {"fit_oscillation": False}}
    )
    results = diagnose(
        ds, config=cfg, modes=["advantage_degeneracy", "reward_hacking", "instability"]
    )
    html = write_report(tmp_path / "r.html", runset=ds, diagnostics=results).read_text(
        encoding="utf-8"
    )
    assert "advantage degeneracy: advantage_degeneracy" in html
    assert "not detected" in html and "detected" in html
    assert html.count("data:image/png;base64") >= 3  # overview + one evidence figure per result


def test_cli_config_file_then_set_overrides(runset_path, tmp_path, capsys):
    cfg = tmp_path / "thresholds.json"
    cfg.write_text(
        json.dumps(
            {
                "degeneracy": {"flag_fraction": 0.99, "min_duration_fraction": 0.99},
                "common": {"n_boot": 10},
            }
        )
    )
    args = [
        "diagnose",
        str(runset_path),
        "--json",
        "--mode",
        "advantage_degeneracy",
        "--config",
        str(cfg),
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["degeneracy"]["flag_fraction"] == 0.99
    by_run = {r["values"]["run"]: r for r in out["results"]}
    assert by_run["advantage_degeneracy"]["passed"] is True  # the stricter threshold clears it
    assert (
        main(
            [
                *args,
                "--set",
                "degeneracy.flag_fraction=0.5",
                "--set",
                "degeneracy.min_duration_fraction=0.25",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert {r["values"]["run"]: r for r in out["results"]}["advantage_degeneracy"][
        "passed"
    ] is False
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["diagnose", str(runset_path), "--config", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_cli_config_file_that_is_not_an_object_is_a_clean_error(runset_path, tmp_path, capsys):
    # a JSON list / string, or a section that is not an object, crashed with AttributeError /
    # TypeError tracebacks
    for text, named in (
        ("[1, 2]", "must hold a JSON object"),
        ('"hello"', "must hold a JSON object"),
        ('{"instability": 3}', "section 'instability' is an object"),
    ):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        assert main(["diagnose", str(runset_path), "--config", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("bayes-grpo diagnose: error: ") and named in err, err


@pytest.mark.parametrize(
    "text, extra",
    [('{"common": 3}', []), ('{"degeneracy": [1]}', ["--set", "degeneracy.flag_fraction=0.6"])],
)
def test_a_config_section_the_command_adds_to_that_is_not_an_object_is_a_clean_error(
    runset_path, tmp_path, capsys, text, extra
):
    # the command writes common.figures (from --figures) and each --set into the file's
    # sections before checking them: {"common": 3} died in "TypeError: 'int' object does not
    # support item assignment", and a --set into a list section likewise
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert main(["diagnose", str(runset_path), "--config", str(bad), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayes-grpo diagnose: error: ") and "is an object" in err, err


def test_runs_whose_ids_make_one_figure_name_get_a_figure_each(tmp_path, capsys):
    # 'a/b' and 'a_b' both wrote a_b__<mode>.png: the command stopped on "given as both
    # --figures and --figures; choose two paths", paths the user never chose
    case = simulated_case("advantage_degeneracy", seed=3)
    ds = concat_runsets(
        [
            case.assign_coords(run=np.array(["a/b"], dtype=object)),
            case.assign_coords(run=np.array(["a_b"], dtype=object)),
        ]
    )
    path = tmp_path / "runs.nc"
    save_runset(ds, path)
    figs = tmp_path / "figs"
    args = ["diagnose", str(path), "--mode", "advantage_degeneracy", "--figures", str(figs)]
    assert main([*args, "--set", "common.n_boot=10"]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in figs.iterdir()) == [
        "a_b-2__advantage_degeneracy.png",
        "a_b__advantage_degeneracy.png",
    ]
    assert "wrote 2 figures to" in capsys.readouterr().out
    # which file is whose: --json named no figure, and the '-2' could be either run
    args += ["--set", "common.n_boot=10", "--overwrite", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["values"]["run"]: r["figure"] for r in out["results"]} == {
        "a/b": str(figs / "a_b__advantage_degeneracy.png"),
        "a_b": str(figs / "a_b-2__advantage_degeneracy.png"),
    }


def test_onset_steps_are_whole_steps_in_the_json_and_the_reports_tables(tmp_path, capsys):
    # a run logged from step 12000 whose grad norm grows from step 12120: --json said
    # "onset_step": 12120.0 and the HTML report's signal table 1.212e+04
    import pandas as pd

    from bayes_grpo.report.sections import table_html
    from bayes_grpo.runset import make_runset

    rng = np.random.default_rng(5)
    n = 200
    grad = 0.3 * np.exp(0.1 * rng.standard_normal(n))
    grad[120:] *= 8
    reward = 0.2 + 0.5 * (1 - np.exp(-np.arange(n) / 20)) + 0.02 * rng.standard_normal(n)
    frame = pd.DataFrame({"reward": reward, "grad_norm": grad}, index=12000 + np.arange(n))
    path = tmp_path / "late.nc"
    save_runset(make_runset({"late": frame}), path)
    args = ["diagnose", str(path), "--json", "--mode", "instability", "--set", "common.n_boot=10"]
    assert main([*args, "--set", "instability.fit_oscillation=false"]) == 0
    (res,) = json.loads(capsys.readouterr().out)["results"]
    assert res["values"]["onset_step"] == 12120 and isinstance(res["values"]["onset_step"], int)
    growth = res["values"]["evidence"]["signals"][0]
    assert growth["signal"] == "growth of grad norm" and isinstance(growth["onset_step"], int)
    cfg = DiagnosticsConfig.from_mapping(
        {"common": {"n_boot": 10}, "instability": {"fit_oscillation": False}}
    )
    (api,) = diagnose(make_runset({"late": frame}), config=cfg, modes=["instability"])
    html = table_html(api.table)
    assert "<td>12120</td>" in html and "e+04" not in html


def test_figures_asked_for_with_the_option_are_written_whatever_the_config_file_says(
    runset_path, tmp_path, capsys
):
    # {"common": {"figures": false}} in --config (or --set common.figures=false) made
    # --figures DIR write nothing, without a word
    cfg = tmp_path / "thresholds.json"
    cfg.write_text(json.dumps({"common": {"figures": False, "n_boot": 10}}))
    figs = tmp_path / "figs"
    args = ["diagnose", str(runset_path), "--run", "advantage_degeneracy", "--config", str(cfg)]
    args += ["--mode", "advantage_degeneracy", "--figures", str(figs)]
    assert main(args) == 0, capsys.readouterr().err
    assert (figs / "advantage_degeneracy__advantage_degeneracy.png").is_file()
    assert main([*args, "--set", "common.figures=false", "--overwrite"]) == 0
    assert (figs / "advantage_degeneracy__advantage_degeneracy.png").is_file()


def test_the_printed_table_puts_the_reasons_a_mode_is_not_assessable_under_it(runset_path, capsys):
    # a not-assessable result's reason (hundreds of characters) sat in the strength column and
    # stretched every row of the table past the terminal; a missing onset printed "None"
    assert main(["diagnose", str(runset_path), "--set", "common.n_boot=10", "--set", "instability.fit_oscillation=false"]) == 0
    out = capsys.readouterr().out
    table, _, notes = out.partition("\n\n")
    assert "None" not in table
    from bayes_grpo.runset import load_runset

    cfg = DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": False}, "instability": {"fit_oscillation": False}})
    unassessable = [r for r in diagnose(load_runset(runset_path), config=cfg) if r.passed is None]
    assert unassessable
    for i, r in enumerate(unassessable, start=1):
        assert r.values["reason"] not in table
        assert f"see [{i}]" in table
        assert f"[{i}] {r.values['run']} / {r.name} not assessable: {r.values['reason']}" in notes


def test_diagnose_json_gives_the_warnings_of_the_fit_given_as_posterior(tmp_path, capsys, monkeypatch):
    # `diagnose runs.nc --posterior fit.nc --json` printed the fit's warnings (it did not
    # converge, ...) on stderr only, where predict / stability / phase-diagram / report --json
    # give them as posterior_warnings
    from pathlib import Path

    import bayes_grpo.model.core as core
    from bayes_grpo.model import GRPODynamicsModel

    fit = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    if not fit.exists():
        pytest.skip("models/bandit.nc not present")
    runs = save_runset(GRPODynamicsModel.load(fit).runset, tmp_path / "runs.nc")
    note = f"{fit}: the fit did not converge"
    monkeypatch.setattr(core, "fitted_model_warnings", lambda model, path: [note])
    argv = ["diagnose", str(runs), "--posterior", str(fit), "--mode", "reward_hacking", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["posterior_warnings"] == [note]
    assert "the fit did not converge" in captured.err  # warned as before
    assert main(["diagnose", str(runs), "--mode", "reward_hacking", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["posterior_warnings"] == []


def test_the_printed_table_says_a_damping_ratio_the_run_does_not_bound_is_not_identified(tmp_path, capsys):
    # a constant reward bounds no zeta: its interval [0, inf] printed as "0.000000 inf" beside
    # the other rows' six decimals, which read as a bound at 0 and an overflow
    flat = simulated_case("healthy", n_steps=60)
    flat["reward"] = flat["reward"].where(np.isnan(flat["reward"]), 0.5)
    path = tmp_path / "flat.nc"
    save_runset(concat_runsets([flat, simulated_case("advantage_degeneracy", seed=3)]), path)
    assert main(["diagnose", str(path), "--mode", "instability", "--set", "common.n_boot=10"]) == 0
    table = capsys.readouterr().out.partition("\n\n")[0]
    rows = {line.split()[0]: line for line in table.splitlines()[3:]}
    assert "not identified" in rows["healthy"] and " inf" not in rows["healthy"], table
    assert "0.000000" not in rows["healthy"], table
    # an identified interval keeps its numbers, to number_text's six significant digits
    (res,) = diagnose(
        load_runset(path), run="advantage_degeneracy", modes="instability",
        config=DiagnosticsConfig.from_mapping({"common": {"n_boot": 10, "figures": False}}),
    )
    st = res.values["strength"]
    assert np.isfinite(st["upper"]) and st["lower"] > 0
    for key in ("value", "lower", "upper"):
        assert number_text(st[key]) in rows["advantage_degeneracy"], (key, table)
    assert "not identified" not in rows["advantage_degeneracy"]


def test_diagnose_takes_a_default_group_size_for_the_runs_that_log_none(tmp_path, capsys):
    # `fit` had --default group_size=G, `diagnose` none: a run set without G left advantage
    # degeneracy not assessable from reward_std whatever the user knew
    ds = simulated_case("advantage_degeneracy_from_std").assign_coords(group_size=("run", [np.nan]))
    runs = save_runset(ds, tmp_path / "runs.nc")
    argv = ["diagnose", str(runs), "--mode", "advantage_degeneracy", "--set", "common.n_boot=20", "--json"]
    assert main([*argv, "--default", "group_size=8"]) == 0
    (res,) = json.loads(capsys.readouterr().out)["results"]
    assert res["passed"] is False and res["values"]["evidence"]["group_size"] == 8
    assert "--default group_size" in res["values"]["evidence"]["group_size_source"]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--default", "k_ref=1"])
    assert exit_.value.code == 2
    assert "--default key must be one of ('group_size',)" in capsys.readouterr().err
