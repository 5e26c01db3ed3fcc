"""The demo flow end to end on a few shipped TRL runs, and its report in a real browser."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bayes_grpo.report import SECTION_KEYS

DATA = Path(__file__).resolve().parents[1] / "data" / "tiny"
RUNS = ["g4_p32_lr0.001_k1_adamw_s0", "g4_p32_lr0.001_k1_adamw_s2", "g16_p8_lr0.001_k1_adamw_s0", "g16_p8_lr0.001_k1_adamw_s1"]


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> Path:
    """Four runs of the shipped data (G = 4 and 16 at fixed completions) with their index."""
    if not all((DATA / r).is_dir() for r in RUNS):
        pytest.skip("shipped example runs not present")
    out = tmp_path_factory.mktemp("tiny")
    for r in RUNS:
        shutil.copytree(DATA / r, out / r)
    index = json.loads((DATA / "index.json").read_text())
    index["groups"] = {g: [r for r in runs if r in RUNS] for g, runs in index["groups"].items()}
    index["runs"] = {r: v for r, v in index["runs"].items() if r in RUNS} if isinstance(index.get("runs"), dict) else index.get("runs")
    (out / "index.json").write_text(json.dumps(index))
    return out


def test_runs_diagnosed_unstable_are_left_out_of_the_demo_fit():
    # the mode name must be one diagnose() reports, else the filter never fires
    from bayes_grpo.diagnostics import MODES
    from bayes_grpo.report.demo import EXCLUDING_MODES

    assert EXCLUDING_MODES and set(EXCLUDING_MODES) <= set(MODES)


@pytest.mark.slow
def test_run_demo_refuses_a_folder_holding_its_files_before_any_work(tmp_path, monkeypatch):
    # run_demo replaced runs.nc, posterior.nc, ... of an earlier demo (or the user's own files
    # of those names) by default, while `bayes-grpo demo` refuses them without --overwrite
    from bayes_grpo.report import demo

    out = tmp_path / "demo"
    out.mkdir()
    (out / "posterior.nc").write_bytes(b"the user's fit")

    def no_fitting(*args, **kwargs):
        raise AssertionError("the demo fitted before refusing")

    monkeypatch.setattr(demo, "fit_example_runs", no_fitting)
    with pytest.raises(FileExistsError, match=r"demo: already holds posterior.nc; pass overwrite=True"):
        demo.run_demo(out)
    assert (out / "posterior.nc").read_bytes() == b"the user's fit"
    with pytest.raises(AssertionError, match="fitted before refusing"):  # overwrite=True goes on
        demo.run_demo(out, overwrite=True)


def test_demo_goes_from_trl_logs_to_a_report_that_renders_in_chromium(small_data, tmp_path):
    from bayes_grpo.report.demo import DEMO_OUTPUTS, run_demo

    lines: list[str] = []
    result = run_demo(tmp_path / "demo", data_dir=small_data, fast=True, progress=lines.append)
    # g4 s2 (grad-norm growth) is diagnosed unstable: left out. g16 s1 was once called a
    # reward oscillation (its sigmoid rise drawn as half a period of an undamped oscillator
    # with its plateau mid-rise, 0.55); it rises to 0.9 and stays, and the process-noise check
    # rejects that oscillation (likelihood ratio 0.91 < 2.71): it is fitted
    assert sorted(result.fitted_runs) == sorted([RUNS[0], RUNS[2], RUNS[3]])
    assert set(result.excluded_runs) == {RUNS[1]}
    # exactly the files the CLI checks before the demo runs (DEMO_OUTPUTS), all written
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == sorted(DEMO_OUTPUTS)
    for name in DEMO_OUTPUTS:
        assert (tmp_path / "demo" / name).stat().st_size > 0
    assert [line[:5] for line in lines if line.startswith("[")] == [f"[{i}/7]" for i in range(1, 8)]
    html = result.report.read_text()
    for key in ("overview", "fit", "convergence", "posteriors", "invariance", "stability", "predictions", "diagnostics"):
        assert re.search(rf'data-section="{key}" data-available="yes"', html), key
    assert 'data-section="comparison" data-available="no"' in html  # the demo does not compare laws, and says so
    # ... and how to add the comparison to its fit (it sent the reader to `bayes-grpo compare`)
    assert f"bayes-grpo report {tmp_path / 'demo' / 'posterior.nc'} --compare` adds this section" in html

    from test_report import _chromium, open_in_chromium

    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    dom = open_in_chromium(result.report, tmp_path / "demo_report.png")
    total = int(re.search(r'data-images-total="(\d+)"', dom).group(1))
    assert total >= 10
    assert re.search(rf'data-images-rendered="{total}"', dom)
    for key in SECTION_KEYS:
        assert f'data-section="{key}"' in dom


def test_a_demo_of_missing_data_is_refused_without_making_its_output_folder(tmp_path, capsys):
    # `bayes-grpo demo --data nonexist --out d1` said "nonexist: example data not found" and
    # left an empty folder d1
    from bayes_grpo.cli import main

    out = tmp_path / "d1"
    assert main(["demo", "--fast", "--data", str(tmp_path / "nonexist"), "--out", str(out)]) == 2
    assert "nonexist: example data not found" in capsys.readouterr().err
    assert not out.exists()


def test_collapse_is_detected_in_runs_that_log_the_reward_on_some_steps_only():
    # K_ref > 1 runs have NaN rewards between generation steps; a NaN tail hid the collapse
    import numpy as np
    import pandas as pd

    from bayes_grpo.report.demo import _collapsed
    from bayes_grpo.runset import make_runset

    steps = np.arange(1, 61)
    rise_fall = np.where(steps < 30, steps / 30, 0.05)
    gappy = np.where(steps % 2 == 0, rise_fall, np.nan)
    runs = make_runset(
        {
            "gappy": pd.DataFrame({"reward": gappy}, index=steps),
            "rising": pd.DataFrame({"reward": steps / 60}, index=steps),
        },
        {"gappy": {"model": "m"}, "rising": {"model": "m"}},
    )
    assert _collapsed(runs, "gappy")
    assert not _collapsed(runs, "rising")


@pytest.mark.slow
def test_the_demo_fit_of_the_shipped_runs_converges_at_its_default_settings():
    """The full demo's fit (not --fast) reports no convergence problem: with 2 x 500 draws its
    R-hat on the run-level initial-reward offsets was 1.013-1.019 in three seeds of three."""
    if not (DATA / "index.json").exists():
        pytest.skip("shipped example runs not present")
    from bayes_grpo.report.demo import fit_example_runs

    # the demo's stages 1-3, which also make the shipped posterior models/tiny.nc
    fitted = fit_example_runs(DATA, progress=lambda line: None)
    assert fitted.convergence.passed, fitted.convergence.summary


def test_the_demo_counts_one_run_in_the_singular(tmp_path, monkeypatch):
    # on a data folder of one run the demo said "      1 runs", "[3/7] fit the mechanistic model
    # to 1 runs" and its report's subtitle "1 of 1 runs fitted"
    from types import SimpleNamespace

    from bayes_grpo.report import demo

    if not (DATA / RUNS[0]).is_dir():
        pytest.skip("shipped example runs not present")
    shutil.copytree(DATA / RUNS[0], tmp_path / "one" / RUNS[0])

    class Stop(Exception):
        pass

    def fit(runs):
        raise Stop

    lines: list[str] = []
    settings = SimpleNamespace(chains=2, fit_draws=100, fit=fit)
    with pytest.raises(Stop):
        demo.fit_example_runs(tmp_path / "one", settings=settings, progress=lines.append)
    assert "      1 run" in lines, lines
    assert "[3/3] fit the mechanistic model to 1 run (2 chains x 100 draws)" in lines, lines
    (tmp_path / "a").mkdir()
    (tmp_path / "abc").mkdir()
    _, written = _stubbed_demo_report(tmp_path / "a", monkeypatch, run_ids="a")
    assert written["subtitle"] == "1 of 1 run fitted; seed 0"
    _, written = _stubbed_demo_report(tmp_path / "abc", monkeypatch)
    assert written["subtitle"] == "1 of 3 runs fitted; seed 0"


def _stubbed_demo_report(tmp_path, monkeypatch, fit_warnings=(), argv=None, invariance_calls=None, run_ids="abc"):
    """The demo with its stages stubbed: (the HTML of its report, write_report's arguments);
    run by ``bayes-grpo demo ARGV`` when ``argv`` is given; ``invariance_calls`` (a list)
    receives the keyword arguments of the invariance test; ``run_ids``: the runs ingested, of
    which ``a`` is fitted."""
    from types import SimpleNamespace

    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    import bayes_grpo.checks.invariance as invariance
    import bayes_grpo.checks.stability as stability
    import bayes_grpo.model.core as core
    import bayes_grpo.predict.predict as predict
    import bayes_grpo.predict.result as result
    import bayes_grpo.report.build as build
    import bayes_grpo.runset as runset_pkg
    from bayes_grpo.checks.base import CheckResult
    from bayes_grpo.report import demo
    from bayes_grpo.runset import make_runset

    steps = np.arange(1, 41)
    meta = {"model": "tiny", "group_size": 4, "learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}
    runs = make_runset({r: pd.DataFrame({"reward": 0.8 - 0.7 * np.exp(-steps / (10.0 + i))}, index=steps) for i, r in enumerate(run_ids)}, {r: meta for r in run_ids})
    excluded = {"b": "diagnosed instability", "c": "not in the fitted groups g_fixed_completions/lr_ladder/k_ref_ladder"}
    excluded = {r: why for r, why in excluded.items() if r in run_ids}
    fit_set = runs.sel(run=["a"])
    model = SimpleNamespace(runset=fit_set, save=lambda path, overwrite=False: Path(path))
    passed = CheckResult("convergence", True, "stub")
    monkeypatch.setattr(demo, "fit_example_runs", lambda *a, **k: demo.ExampleFit(runs, [], fit_set, excluded, model, passed))
    monkeypatch.setattr(runset_pkg, "save_runset", lambda ds, path, overwrite=False: Path(path))
    seen = [] if invariance_calls is None else invariance_calls
    monkeypatch.setattr(invariance, "invariance_check", lambda *a, **k: seen.append(k) or CheckResult("g_invariance", None, "stub"))
    monkeypatch.setattr(stability, "phase_diagram", lambda *a, **k: CheckResult("phase_diagram", None, "stub", figures={"phase": plt.figure()}))
    monkeypatch.setattr(predict, "predict_run", lambda *a, **k: None)
    monkeypatch.setattr(predict, "save_prediction", lambda ds, path, overwrite=False: Path(path))
    monkeypatch.setattr(result, "prediction_result", lambda *a, **k: CheckResult("prediction", None, "stub"))
    monkeypatch.setattr(build, "ppc_results", lambda *a, **k: [CheckResult("ppc_trajectory_bands", True, "stub ppc")])
    written: dict = {}

    def write_report(path, *, verdicts=None, runset_notes=None, **kw):
        written.update(kw)
        results = {k: v for k, v in kw.items() if k not in ("title", "subtitle", "overwrite")}
        if verdicts is not None:  # as write_report fills them
            verdicts.extend(build.section_verdicts(build.build_sections(**results)))
        if runset_notes is not None:
            runset_notes.update(build.overview_notes(build.build_sections(**results)))
        return Path(path)

    monkeypatch.setattr(build, "write_report", write_report)
    monkeypatch.setattr(core, "fitted_model_warnings", lambda model, path: list(fit_warnings))
    if argv is not None:  # through the command line, which prints what it gives
        from bayes_grpo.cli import main

        assert main(["demo", "--data", str(tmp_path), "--out", str(tmp_path / "demo"), *argv]) == 0
    else:
        demo.run_demo(tmp_path / "demo", data_dir=tmp_path, progress=lambda line: None)
    results = {k: v for k, v in written.items() if k not in ("title", "subtitle", "overwrite")}
    html = build.render_html(build.build_sections(**results))
    plt.close("all")
    return html, written


def test_the_demo_tests_g_invariance_with_the_reward_bounds_of_its_fit(tmp_path, monkeypatch):
    # the demo fits its 0-1 rewards with bounds 0 1 (DemoSettings.reward_bounds), and its
    # invariance test fitted H0 and H1 without them: plateaus above 1 in the Bayes factor's models
    calls: list = []
    _stubbed_demo_report(tmp_path, monkeypatch, invariance_calls=calls)
    (kwargs,) = calls
    assert kwargs["reward_bounds"] == (0.0, 1.0)


def test_the_demo_report_has_the_posterior_predictive_checks_of_its_fit(tmp_path, monkeypatch):
    # `report posterior.nc` runs the posterior predictive checks (a second or two); the demo's
    # report of the same fit said nothing of them
    html, written = _stubbed_demo_report(tmp_path, monkeypatch)
    assert [r.summary for r in written["ppc"]] == ["stub ppc"]
    assert 'data-section="ppc" data-available="yes"' in html and "stub ppc" in html


def test_the_demo_report_says_why_each_run_was_left_out_of_the_fit(tmp_path, monkeypatch):
    # the demo's report listed the runs it left out as "not a run of the fit"; why (diagnosed
    # unstable, a collapse, outside the fitted groups) was in `demo --json` only
    html, _ = _stubbed_demo_report(tmp_path, monkeypatch)
    assert "b: left out of the fit: diagnosed instability" in html
    assert "c: left out of the fit: not in the fitted groups" in html
    assert "not a run of the fit" not in html


def test_the_demo_report_shows_the_warnings_of_its_fit_as_report_of_the_saved_fit_does(tmp_path, monkeypatch):
    # `report demo_output/posterior.nc` opens with "What is computed from this i.i.d. fit is too
    # confident." (the fit's load warnings); the demo's own report of that same fit did not
    note = "demo/posterior.nc: Residual lag-1 autocorrelation up to 0.78. What is computed from this i.i.d. fit is too confident."
    html, written = _stubbed_demo_report(tmp_path, monkeypatch, fit_warnings=[note])
    assert written["posterior_warnings"] == [note]
    assert f'<p class="warning">Warning of the saved fit: {note}</p>' in html


def test_demo_json_gives_the_fits_warnings_and_the_sections_verdicts_as_report_json_does(tmp_path, monkeypatch, capsys):
    # `report posterior.nc --json` prints report, posterior_warnings and sections; `demo --json`
    # printed the paths, runs, timings and headline only: the demo's fit warnings and what each
    # section of its report concludes needed the HTML to be opened
    note = "demo/posterior.nc: Residual lag-1 autocorrelation up to 0.78. What is computed from this i.i.d. fit is too confident."
    _stubbed_demo_report(tmp_path, monkeypatch, fit_warnings=[note], argv=["--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)  # stdout holds the JSON alone: the progress lines are on stderr
    assert "[7/7] write the report" in captured.err
    assert out["posterior_warnings"] == [note]
    keys = [section["key"] for section in out["sections"]]
    assert keys == list(SECTION_KEYS), keys
    # and the overview's warnings on the run set, as report --json gives them (none here)
    assert out["runset_notes"] == {"evaluation_reward": None, "ingest": [], "rejected": [], "runs": {}}
    assert {"report", "runs", "posterior", "fitted_runs", "excluded_runs", "timings_s", "headline"} <= set(out)


def test_demo_json_gives_every_file_the_demo_writes(tmp_path, monkeypatch, capsys):
    # `demo --help` says --json prints "the demo's files"; it gave report, runs and posterior,
    # not the phase diagram's PNG nor the saved prediction it writes beside them
    from bayes_grpo.report.demo import DEMO_OUTPUTS

    _stubbed_demo_report(tmp_path, monkeypatch, argv=["--json"])
    out = json.loads(capsys.readouterr().out)
    given = {Path(out[key]).name for key in ("report", "runs", "posterior", "phase", "prediction")}
    assert given == set(DEMO_OUTPUTS)
    assert Path(out["phase"]) == tmp_path / "demo" / "phase.png" and Path(out["phase"]).is_file()


def test_data_readme_names_the_runs_diagnose_flags_unstable_and_the_demo_leaves_out():
    # data/README said of the K_ref ladder "All four are stable ... the ladder does not reach the
    # instability", while diagnose flags K_ref 4 and 8 (clipping, grad norm) and the demo and
    # models/tiny.nc leave them out of the fit as "diagnosed unstable"
    from bayes_grpo.diagnostics import diagnose
    from bayes_grpo.report.demo import flagged_by_diagnosis
    from bayes_grpo.runset.ingest import load_runs

    ladder = [f"g16_p8_lr0.001_k{k}_adamw_s0" for k in (1, 2, 4, 8)]
    runs = load_runs([DATA / r for r in [*ladder, "g4_p32_lr0.001_k1_adamw_s2"]])
    results = diagnose(runs, modes="instability")
    flagged = flagged_by_diagnosis(results)
    assert sorted(flagged) == sorted([ladder[2], ladder[3], "g4_p32_lr0.001_k1_adamw_s2"])
    summary = {r.values["run"]: r.summary for r in results}
    clip = {r: float(re.search(r"clip ratio over 25% of the run = (\S+)\)", summary[r]).group(1)) for r in ladder[2:]}
    growth = {r: float(re.search(r"grad_norm: late/early median ratio = (\S+?)\)?[,;)]", summary[r]).group(1)) for r in (ladder[3], "g4_p32_lr0.001_k1_adamw_s2")}
    text = " ".join((DATA.parent / "README.md").read_text().split())
    assert (
        f"`bayes-grpo diagnose` flags `K_ref = 4` (sustained clipping, clip ratio {clip[ladder[2]]:.2g} over a quarter "
        f"of the run) and `K_ref = 8` (grad norm late/early {growth[ladder[3]]:.3g}x, clip ratio {clip[ladder[3]]:.3g}) "
        "as an instability, so the demo and `models/tiny.nc` leave both out of the fit, with "
        f"`g4_p32_lr0.001_k1_adamw_s2` (grad norm late/early {growth['g4_p32_lr0.001_k1_adamw_s2']:.2g}x)"
    ) in text
    assert "four are stable" not in text


def test_the_demo_draws_its_phase_diagram_and_prediction_at_the_most_common_setting_of_its_fitted_runs(tmp_path, monkeypatch):
    # the demo took the median momentum and the first run's convention: on `--data` runs of one
    # Adam run (beta1 0.9) and two SGD runs at 0.5 that was "momentum 0.5, ema", a setting no
    # run has, so its phase diagram marked no run (and the prediction was for that setting)
    from types import SimpleNamespace

    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    import bayes_grpo.checks.invariance as invariance
    import bayes_grpo.checks.stability as stability
    import bayes_grpo.model.core as core
    import bayes_grpo.predict.predict as predict
    import bayes_grpo.predict.result as result
    import bayes_grpo.report.build as build
    import bayes_grpo.runset as runset_pkg
    from bayes_grpo.checks.base import CheckResult
    from bayes_grpo.report import demo
    from bayes_grpo.runset import make_runset

    steps = np.arange(1, 41)
    settings = {"a": (0.9, "ema"), "b": (0.5, "heavy_ball"), "c": (0.5, "heavy_ball")}
    meta = {
        r: {"model": "tiny", "group_size": 4, "learning_rate": 1e-3, "momentum": m, "momentum_convention": c, "k_ref": 1}
        for r, (m, c) in settings.items()
    }
    runs = make_runset({r: pd.DataFrame({"reward": 0.8 - 0.7 * np.exp(-steps / 10.0)}, index=steps) for r in settings}, meta)
    model = SimpleNamespace(runset=runs, save=lambda path, overwrite=False: Path(path))
    passed = CheckResult("convergence", True, "stub")
    monkeypatch.setattr(demo, "fit_example_runs", lambda *a, **k: demo.ExampleFit(runs, [], runs, {}, model, passed))
    monkeypatch.setattr(runset_pkg, "save_runset", lambda ds, path, overwrite=False: Path(path))
    monkeypatch.setattr(invariance, "invariance_check", lambda *a, **k: CheckResult("g_invariance", None, "stub"))
    calls: dict = {}

    def phase_diagram(model, **kwargs):
        calls["phase"] = kwargs
        return CheckResult("phase_diagram", None, "stub", figures={"phase": plt.figure()})

    def predict_run(model, **kwargs):
        calls["predict"] = kwargs

    monkeypatch.setattr(stability, "phase_diagram", phase_diagram)
    monkeypatch.setattr(predict, "predict_run", predict_run)
    monkeypatch.setattr(predict, "save_prediction", lambda ds, path, overwrite=False: Path(path))
    monkeypatch.setattr(result, "prediction_result", lambda *a, **k: CheckResult("prediction", None, "stub"))
    monkeypatch.setattr(build, "write_report", lambda path, **kw: Path(path))
    monkeypatch.setattr(build, "ppc_results", lambda *a, **k: [])
    monkeypatch.setattr(core, "fitted_model_warnings", lambda model, path: [])
    demo.run_demo(tmp_path / "demo", data_dir=tmp_path, progress=lambda line: None)
    plt.close("all")
    assert (calls["phase"]["momentum"], calls["phase"]["momentum_convention"]) == (0.5, "heavy_ball")
    assert (calls["predict"]["momentum"], calls["predict"]["momentum_convention"]) == (0.5, "heavy_ball")


def test_the_demo_names_the_runs_it_flags_in_words_not_as_a_python_dict(tmp_path, monkeypatch):
    # `make demo` printed "flagged: {'g16_p8_lr0.001_k4_adamw_s0': 'instability', ...}"
    import pandas as pd

    import bayes_grpo.diagnostics as diagnostics_pkg
    import bayes_grpo.runset.ingest as ingest
    from bayes_grpo.checks.base import CheckResult
    from bayes_grpo.report import demo
    from bayes_grpo.runset import make_runset

    steps = list(range(1, 31))
    runs = make_runset(
        {r: pd.DataFrame({"reward": [0.02 * s for s in steps]}, index=steps) for r in ("a", "b")},
        {"a": {}, "b": {}},
    )
    flag = CheckResult("instability", False, "detected", values={"mode": "instability", "run": "a"})
    monkeypatch.setattr(ingest, "load_runs", lambda paths: runs)
    monkeypatch.setattr(diagnostics_pkg, "diagnose", lambda ds: [flag])

    class Stop(Exception):
        pass

    class Settings(demo.DemoSettings):
        def fit(self, fit_set):
            raise Stop

    lines: list[str] = []
    with pytest.raises(Stop):
        demo.fit_example_runs(tmp_path, settings=Settings(), progress=lines.append)  # no index.json
    (flagged,) = [line.strip() for line in lines if "flagged:" in line]
    assert flagged == "flagged: a (instability)", lines
    assert demo.flagged_text({}) == "none"
    with pytest.raises(ValueError, match=r"no healthy run left to fit \(flagged: a \(instability\), b \(instability\)\)"):
        demo.demo_fit_set(runs, {"a": "instability", "b": "instability"}, None, tmp_path)
