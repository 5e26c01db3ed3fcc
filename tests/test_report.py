"""The HTML report: every section present, absent inputs said, images embedded, renders in a browser."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from bayes_grpo.checks.base import CheckResult
from bayes_grpo.report import SECTION_KEYS, build_sections, render_html, write_report
from bayes_grpo.report.sections import render_check
from bayes_grpo.runset import make_runset


def _runset():
    steps = np.arange(1, 41)
    curves, meta = {}, {}
    for i, g in enumerate([4, 4, 16]):
        r = 0.8 - 0.7 * np.exp(-steps / 10.0) + 0.01 * np.sin(steps + i)
        curves[f"run{i}"] = pd.DataFrame({"reward": r}, index=steps)
        meta[f"run{i}"] = {"model": "tiny", "group_size": g, "learning_rate": 1e-3, "seed": i}
    return make_runset(curves, meta)


def _check(name, passed):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    return CheckResult(name, passed, f"summary of {name} <b>escaped</b>", table=pd.DataFrame({"x": [1.0, np.nan]}), figures={f"{name} figure": fig})


def test_every_section_is_present_and_absent_inputs_say_so():
    sections = build_sections(runset=_runset(), diagnostics=[_check("advantage_degeneracy", False), _check("instability", None)])
    assert [s.key for s in sections] == list(SECTION_KEYS)
    available = {s.key: s.available for s in sections}
    assert available["overview"] and available["diagnostics"]
    assert not available["fit"] and not available["invariance"]
    html = render_html(sections)
    for key in SECTION_KEYS:
        assert f'data-section="{key}"' in html
    assert html.count("Not in this report:") == sum(not v for v in available.values())
    assert "&lt;b&gt;escaped&lt;/b&gt;" in html  # user text is escaped, not injected
    assert "not assessable" in html and "flagged" in html
    assert "http://" not in html and "https://" not in html  # self-contained: nothing fetched


def test_a_prediction_dataset_and_a_law_comparison_go_into_the_report_as_the_python_api_returns_them():
    # the README: write_report(path, ..., predictions=..., comparison=...) "with results you
    # already have"; predictions=predict_run(...) (an xarray.Dataset) ended in a RecursionError
    # (iterated as its variable names, each name as its characters), and compare_laws' result
    # in "object is not iterable"
    from types import SimpleNamespace

    from bayes_grpo.predict import forecast_run

    t = np.arange(0.0, 31.0)
    y = 0.8 - 0.6 * np.exp(-t / 8.0) + 0.01 * np.sin(t)
    forecast = forecast_run(t, y, np.arange(0.0, 61.0), likelihood="iid", n_draws=200)
    comparison = SimpleNamespace(to_check_result=lambda: _check("law comparison", None))
    sections = {s.key: s for s in build_sections(runset=_runset(), predictions=forecast, comparison=comparison)}
    assert sections["predictions"].available and sections["comparison"].available
    assert sections["predictions"].blocks and sections["comparison"].blocks
    with pytest.raises(TypeError, match="got pandas.*DataFrame"):
        build_sections(diagnostics=pd.DataFrame({"run": ["a"], "verdict": ["detected"]}))


def test_the_overview_of_a_report_without_a_fit_does_not_call_its_runs_fitted():
    # write_report(path, runset=runs) (no model) opened with "All runs in the fitted run set"
    (overview,) = [s for s in build_sections(runset=_runset()) if s.key == "overview"]
    assert overview.intro.startswith("All runs in the run set: ")


def test_runs_of_no_model_name_are_not_counted_as_a_model_and_no_subtitle_leaves_no_separator():
    # the overview said "2 model(s)" for one named LLM and runs without a name, and a report
    # without a subtitle ended its header line in a stray "·"
    runs = _runset()
    runs = runs.assign_coords(model=("run", np.array(["tiny", "", "tiny"], dtype=object)))
    (overview,) = [s for s in build_sections(runset=runs) if s.key == "overview"]
    text = " ".join(str(b.content) for b in overview.blocks if b.kind == "text")
    assert "3 runs, 1 model (1 run of unknown model)," in text, text
    html = render_html(build_sections(runset=_runset()))
    header = re.search(r"<p>bayes_grpo .*?</p>", html).group(0)
    assert not re.search(r"&middot;\s*</p>", header), header
    assert "&middot; my subtitle</p>" in render_html(build_sections(runset=_runset()), subtitle="my subtitle")


def test_an_llm_of_unknown_name_has_one_name_in_the_overview_figure_the_fit_figure_and_the_fit_tables():
    # one page called it "(model unknown)" (overview panels), "?" (fit panels) and
    # "unknown-model" (the fit's tables, the checks): now UNKNOWN_MODEL everywhere
    from types import SimpleNamespace

    from bayes_grpo.model.prepare import UNKNOWN_MODEL, run_llm_names
    from bayes_grpo.report.model_sections import _labels
    from bayes_grpo.report.sections import _curves_figure

    runs = _runset().assign_coords(model=("run", np.array(["tiny", "", ""], dtype=object)))
    summary = pd.DataFrame({"model": ["tiny", "", ""], "G": [4.0, 4.0, 16.0]}, index=pd.Index(runs["run"].values, name="run"))
    fig = _curves_figure(runs, summary)
    titles = sorted(ax.get_title() for ax in fig.axes if ax.has_data())
    plt.close(fig)
    assert titles == ["tiny  G=4", f"{UNKNOWN_MODEL}  G=16", f"{UNKNOWN_MODEL}  G=4"], titles
    labels = _labels(SimpleNamespace(runset=runs, data=None))
    assert labels == ["tiny G=4 | run0", f"{UNKNOWN_MODEL} G=4 | run1", f"{UNKNOWN_MODEL} G=16 | run2"], labels
    assert list(run_llm_names(runs)) == ["tiny", UNKNOWN_MODEL, UNKNOWN_MODEL]
    from bayes_grpo.runset.schema import model_text  # the one helper the figures name it by

    assert model_text("") == UNKNOWN_MODEL and model_text("tiny") == "tiny"


def test_the_overviews_table_counts_the_rewards_a_run_logged_not_its_steps():
    # a run logged every 3rd step (real logs, ingest --every 3) read "steps 134" beside "first
    # step 1" and "last step 400": the column counted logged rewards under the name of steps
    from bayes_grpo.report.sections import overview_section

    steps = np.arange(1, 401)
    reward = pd.Series(0.8 - 0.6 * np.exp(-steps / 80.0), index=steps).where(steps % 3 == 1)
    runs = make_runset({"sparse": pd.DataFrame({"reward": reward}, index=steps)}, {"sparse": {"model": "m", "group_size": 4}})
    html = render_html([overview_section(runs, fitted=False)])
    table = html.split('data-section="overview"')[1].split("</table>")[0]
    header = re.findall(r'<th(?: class="text")?>([^<]*)</th>', table.split("<tbody>")[0])
    cells = re.findall(r'<td(?: class="text")?>([^<]*)</td>', table.split("<tbody>")[1])
    assert "steps" not in header and header[1:6] == ["model", "G", "rewards logged", "first step", "last step"], header
    assert cells[2:5] == ["134", "1", "400"], cells
    plt.close("all")


def test_the_law_comparison_intro_names_the_four_laws_it_compares():
    # the intro said "the three-phase oscillator against the single exponential and the logistic
    # law" above a table of four laws (the oscillator mechanistic and phenomenological)
    from bayes_grpo.predict.compare import LAWS

    (section,) = [s for s in build_sections(runset=_runset()) if s.key == "comparison"]
    assert set(LAWS) == {"oscillator_mechanistic", "oscillator_phenomenological", "single_exp", "logistic"}
    for word in ("oscillator (mechanistic and phenomenological", "single exponential", "logistic"):
        assert word in section.intro, section.intro


def test_report_is_written_atomically_with_embedded_images(tmp_path):
    path = write_report(tmp_path / "report.html", runset=_runset(), diagnostics=[_check("d", True)])
    html = path.read_text()
    assert len(re.findall(r'src="data:image/png;base64,', html)) == 2
    assert not list(tmp_path.glob(".*tmp"))


def test_the_report_writers_refuse_an_existing_file_unless_told_to_overwrite(tmp_path, monkeypatch):
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.report.build import report_from_posterior

    path = tmp_path / "report.html"
    path.write_text("the user's notes")
    with pytest.raises(FileExistsError, match="report.html: already exists"):
        write_report(path, runset=_runset())
    assert path.read_text() == "the user's notes"
    assert "<html" in write_report(path, runset=_runset(), overwrite=True).read_text()
    path.write_text("the user's notes")

    def no_loading(*args, **kwargs):
        raise AssertionError("refused only after loading the posterior and running the stages")

    monkeypatch.setattr(GRPODynamicsModel, "load", no_loading)
    with pytest.raises(FileExistsError, match="report.html: already exists"):
        report_from_posterior(tmp_path / "fit.nc", path)
    assert path.read_text() == "the user's notes"
    # an input is never the output, overwrite or not (`bayes-grpo report fit.nc -o fit.nc --overwrite`
    # is refused): report_from_posterior(fit, fit, overwrite=True) replaced the fit with the HTML
    fit, prediction = tmp_path / "fit.nc", tmp_path / "pred.nc"
    fit.write_bytes(b"the user's fit")
    prediction.write_bytes(b"the user's prediction")
    with pytest.raises(FileExistsError, match="fit.nc: is the posterior file"):
        report_from_posterior(fit, tmp_path / "." / "fit.nc", overwrite=True)
    with pytest.raises(FileExistsError, match="pred.nc: is the prediction file"):
        report_from_posterior(fit, prediction, predictions=[prediction], overwrite=True)
    assert fit.read_bytes() == b"the user's fit" and prediction.read_bytes() == b"the user's prediction"



@pytest.mark.parametrize("name", ["r.txt", "r.png", "report"])
def test_the_python_report_writers_refuse_a_file_not_named_html_as_the_cli_does(tmp_path, monkeypatch, capsys, name):
    # report_from_posterior(fit, "r.txt") and write_report("r.txt", ...) wrote an HTML page under
    # any extension, while `bayes-grpo report -o r.txt` was refused; now the same words, before work
    from bayes_grpo.cli import main
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.report.build import report_from_posterior

    def no_loading(*args, **kwargs):
        raise AssertionError("refused only after loading the posterior and running the stages")

    monkeypatch.setattr(GRPODynamicsModel, "load", no_loading)
    out = tmp_path / name
    words = f"{out}: {{}} writes an HTML page; name the file .html or .htm (got {out.suffix or 'no extension'})"
    with pytest.raises(ValueError) as err:
        report_from_posterior(tmp_path / "fit.nc", out)
    assert str(err.value) == words.format("output")
    with pytest.raises(ValueError) as err:
        write_report(out, runset=_runset())
    assert str(err.value) == words.format("path")
    tiny = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    assert main(["report", str(tiny), "-o", str(out), "--no-diagnose", "--no-stability"]) == 2
    assert words.format("--output") in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    # .htm and an upper-case extension are HTML pages
    assert write_report(tmp_path / "r.HTM", runset=_runset()).is_file()


def test_report_from_posterior_refuses_a_folder_before_any_work_and_does_not_offer_overwrite(tmp_path, monkeypatch):
    # report_from_posterior(fit, "a_folder") said "a_folder: already exists; refusing to overwrite it
    # (overwrite=True replaces it)", and with overwrite=True it loaded the fit and ran every stage
    # before the atomic writer refused the folder ("not a regular file"): the README's writers
    # refuse a path holding no regular file, and report_from_posterior refuses before the work
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.report.build import report_from_posterior

    def no_loading(*args, **kwargs):
        raise AssertionError("refused only after loading the posterior and running the stages")

    monkeypatch.setattr(GRPODynamicsModel, "load", no_loading)
    folder = tmp_path / "reports"
    folder.mkdir()
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="reports: exists and is not a regular file") as err:
            report_from_posterior(tmp_path / "fit.nc", folder, overwrite=overwrite)
        assert "overwrite=True replaces it" not in str(err.value)
    assert folder.is_dir() and list(folder.iterdir()) == []
    # run_demo likewise: a folder where it writes report.html ran the whole demo (minutes) first
    from bayes_grpo.report.demo import run_demo

    (tmp_path / "demo" / "report.html").mkdir(parents=True)
    (tmp_path / "no_runs").mkdir()
    with pytest.raises(FileExistsError, match="report.html: exists and is not a regular file"):
        run_demo(tmp_path / "demo", data_dir=tmp_path / "no_runs", overwrite=True)

def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def open_in_chromium(html_path, screenshot_path, width=None):
    """Load the report in headless Chromium; return the DOM after load scripts ran (at a
    window ``width`` px wide when given, else Chromium's default 800 x 600)."""
    exe = _chromium()
    # a private profile: two Chromiums on one profile (tests on two workers) would hand the
    # page to each other or refuse to start
    profile = Path(screenshot_path).parent / f"{Path(screenshot_path).stem}-chromium-profile"
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--user-data-dir={profile}", "--virtual-time-budget=5000"]
    size = [f"--window-size={width},2000"] if width else []
    dom = subprocess.run(common + size + ["--dump-dom", html_path.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    subprocess.run(common + [f"--screenshot={screenshot_path}", "--window-size=1280,3000", html_path.as_uri()], capture_output=True, timeout=120, check=True)
    return dom


@pytest.mark.browser
def test_report_renders_every_section_and_image_in_headless_chromium(tmp_path):
    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    path = write_report(tmp_path / "report.html", runset=_runset(), diagnostics=[_check("d", True), _check("e", False)])
    dom = open_in_chromium(path, tmp_path / "report.png")
    total = int(re.search(r'data-images-total="(\d+)"', dom).group(1))
    rendered = int(re.search(r'data-images-rendered="(\d+)"', dom).group(1))
    assert total == 3 and rendered == total
    assert 'data-rendered="no"' not in dom
    for key in SECTION_KEYS:
        assert f'data-section="{key}"' in dom
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_report_tables_leave_missing_values_blank_not_none_or_nan():
    # diagnostics tables carry None for an onset that does not apply; the report printed "None"
    from bayes_grpo.report.sections import table_html

    frame = pd.DataFrame({"mode": ["instability"], "onset_step": [None], "strength": [np.nan]}, dtype=object)
    html = table_html(frame)
    assert "None" not in html and "nan" not in html.lower() and "instability" in html
    # nor in the row labels: the report's residual-autocorrelation table of runs of unknown G
    # (grouped by model and G) had a row "NaN"
    index = pd.MultiIndex.from_tuples([("m", np.nan), ("m", 8.0)], names=["model", "G"])
    html = table_html(pd.DataFrame({"acf_lag1": [0.17, 0.42]}, index=index))
    assert "nan" not in html.lower() and "<th>8</th>" in html and "0.42" in html, html
    html = table_html(pd.DataFrame({"x": [1.0, 2.0]}, index=pd.Index([np.nan, 4.0], name="G")))
    assert "nan" not in html.lower(), html


def test_a_table_row_of_unknown_g_names_its_g_as_the_figures_and_summaries_do():
    # the PPC's coverage table (index model, G) of real runs of unknown G had a blank G beside
    # its summary's "(unknown-model, G=?)" and the figure titled "unknown-model, G=?"; the
    # fit's tables read "?" there
    from bayes_grpo.report.sections import table_html

    index = pd.MultiIndex.from_tuples([("unknown-model", np.nan), ("unknown-model", 8.0)], names=["model", "G"])
    body = table_html(pd.DataFrame({"coverage": [0.9527, 1.0]}, index=index)).split("<tbody>")[1]
    rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    assert [re.findall(r'<th(?: class="text")?>([^<]*)</th>', row) for row in rows] == [["unknown-model", "?"], ["unknown-model", "8"]], body
    body = table_html(pd.DataFrame({"x": [1.0, 2.0]}, index=pd.Index([np.nan, 4.0], name="group_size"))).split("<tbody>")[1]
    assert re.findall(r'<th(?: class="text")?>([^<]*)</th>', body) == ["?", "4"], body
    # a level of another name keeps a blank for a missing label
    body = table_html(pd.DataFrame({"x": [1.0]}, index=pd.Index([np.nan], name="step"))).split("<tbody>")[1]
    assert re.findall(r'<th(?: class="text")?>([^<]*)</th>', body) == [""], body


@pytest.mark.browser
def test_a_table_wider_than_the_page_scrolls_inside_its_section(tmp_path):
    """A per-run table with many columns (22 real runs) must not spill out of the section box."""
    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    wide = pd.DataFrame({f"a long column name {i}": [1.234567, 2.345678] for i in range(40)})
    path = write_report(tmp_path / "report.html", runset=_runset(), diagnostics=[CheckResult("wide", True, "wide table", table=wide)])
    dom = open_in_chromium(path, tmp_path / "report.png")
    assert re.search(r'data-sections-overflowing="0"', dom), re.search(r'data-sections-overflowing="\d+"', dom)


def _split_group_table():
    """The fit's table per model and G of a K_ref x learning-rate sweep at one G (models/bandit.nc):
    one (model, G) cell split into a row per setting, 14 numeric columns."""
    index = pd.MultiIndex.from_tuples([("softmax-bandit", 8)] * 6, names=["model", "group_size"])
    columns = ["learning_rate", "k_ref", "p_star", "a", "M_eff", "C_eff", "K_eff", "zeta", "D", "r2_raw", "r2_noise_ceiling", "r2_smoothed", "n_runs", "n_runs_r2"]
    values = np.tile([0.05, 1, 0.8524, 0.0158, 0.7579, 0.4842, 0.0158, 2.213, 0.009731, 0.8573, 0.8621, 0.9917, 2, 2], (6, 1))
    return pd.DataFrame(values, index=index, columns=columns)


def test_every_row_of_a_table_indexed_by_model_and_g_gives_its_model_and_g_in_their_own_columns():
    # pandas drew the model once for its rows (rowspan): in the rows below, the G was the row's
    # first cell, styled as the model's (left-aligned) while the first row's G was right-aligned
    from bayes_grpo.report.sections import table_html

    html = table_html(_split_group_table())
    body = html.split("<tbody>")[1]
    rows = body.split("<tr>")[1:]
    assert "rowspan" not in body and len(rows) == 6
    assert all(row.count("<th") == 2 and "<th>softmax-bandit</th>" in row for row in rows), body


@pytest.mark.browser
def test_the_fits_table_per_model_and_g_split_by_setting_fits_a_laptop_wide_page_without_a_scroll(tmp_path):
    # at 1366 px the table of models/bandit.nc (a cell split by learning rate and K_ref) was 99 px
    # wider than its section: n_runs and n_runs_r2 were behind a horizontal scroll, the G column
    # alone 12 em wide (the width meant for a run id) and the page held at 1200 px
    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    check = CheckResult("groups", True, "per model and G", table=_split_group_table())
    path = write_report(tmp_path / "report.html", runset=_runset(), diagnostics=[check])
    dom = open_in_chromium(path, tmp_path / "report.png", width=1366)
    assert re.search(r'data-tables-scrolling="0"', dom), re.search(r'data-tables-scrolling="\d+"', dom)


@pytest.mark.browser
def test_paragraphs_keep_a_readable_measure_on_a_wide_page_while_tables_take_its_full_width(tmp_path):
    # at the page's 1400 px cap a paragraph ran to ~170 characters a line; the prose is now held
    # to 80ch, and a wide table (the fit's table per model and G) still fits without a scroll
    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    long_summary = " ".join(["The reward rose and settled at its plateau within the window."] * 12)
    check = CheckResult("groups", True, long_summary, table=_split_group_table())
    path = write_report(tmp_path / "report.html", runset=_runset(), diagnostics=[check])
    dom = open_in_chromium(path, tmp_path / "report.png", width=1600)
    content = int(re.search(r'data-content-width="(\d+)"', dom).group(1))
    prose = int(re.search(r'data-widest-prose="(\d+)"', dom).group(1))
    assert content >= 1300, content  # the page at its cap
    assert 0 < prose < 0.7 * content, (prose, content)
    assert re.search(r'data-tables-scrolling="0"', dom), re.search(r'data-tables-scrolling="\d+"', dom)


def test_fit_section_names_the_noise_ceiling_method_the_metric_uses():
    # the fit section said the noise ceiling came "from first differences"; the metric's
    # default has been second-difference pseudo-residuals
    import inspect

    from bayes_grpo import metrics
    from bayes_grpo.report.model_sections import FIT_INTRO

    default = inspect.signature(metrics.noise_ceiling_r2).parameters["method"].default
    assert default == metrics.SECOND_DIFFERENCE
    assert "second-difference" in FIT_INTRO and "first differences" not in FIT_INTRO


def test_per_run_fit_panels_have_axis_labels_and_titles_that_do_not_overlap():
    # the panel titles ("model G=4 | <run id>") ran into each other for run ids as long as the
    # bandit's or a sweep's, and the panels had no axis labels (no step or reward unit)
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.report.model_sections import _fit_figure
    from bayes_grpo.runset import runset_from_arrays

    steps = np.arange(40)
    ids = [f"bandit/K_ref=1/G={g}/lr=0.1/mu=0.5/beta=1/seed={s}" for g in (4, 16) for s in (0, 1)]
    reward = 0.8 - 0.3 * np.exp(-steps / 10.0) + np.zeros((len(ids), 1))
    meta = {r: {"model": "softmax-bandit", "group_size": g} for r, g in zip(ids, [4, 4, 16, 16])}
    runs = runset_from_arrays(ids, steps, {"reward": reward}, meta)
    draws = xr.DataArray(np.broadcast_to(reward, (5, *reward.shape)), dims=("sample", "run", "step"))
    fig = _fit_figure(SimpleNamespace(runset=runs, fitted_trajectory_draws=lambda: draws))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.has_data()]
    assert len(axes) == len(ids)
    for ax in axes:
        assert ax.get_xlabel() == "optimizer step" and ax.get_ylabel() == "reward"
    boxes = [ax.title.get_window_extent(renderer) for ax in axes]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)
    plt.close(fig)


def test_overview_panels_keep_their_width_and_legends_when_a_run_id_is_very_long():
    # a run id of 166 characters ("run with spaces xxx...") made its legend wider than the
    # whole figure: tight_layout squeezed every panel of the overview to a sliver
    import warnings

    from bayes_grpo.report.sections import _curves_figure, short_labels

    steps = np.arange(1, 41)
    ids = ["run with spaces " + "x" * 150, "short", "other " + "y" * 120 + " seed 1", "other " + "y" * 120 + " seed 2"]
    curves = {r: pd.DataFrame({"reward": 0.8 - 0.7 * np.exp(-steps / 10.0)}, index=steps) for r in ids}
    runs = make_runset(curves, {r: {"model": "m", "group_size": g} for r, g in zip(ids, [4, 16, 8, 8])})
    summary = pd.DataFrame({"model": "m", "G": [4.0, 16.0, 8.0, 8.0]}, index=pd.Index(ids, name="run"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Tight layout not applied"
        fig = _curves_figure(runs, summary)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.has_data()]
    assert len(axes) == 3
    for ax in axes:
        box = ax.get_window_extent(renderer)
        assert box.width > 2 * fig.dpi  # inches of plot, not a sliver
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.width <= box.width
    (labels,) = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in axes if ax.get_title().endswith("G=8")]
    assert len(set(labels)) == 2 and all(label.endswith(("seed 1", "seed 2")) for label in labels)
    assert short_labels(["a" * 50, "a" * 50]) == ["a" * 18 + "..." + "a" * 19, "a" * 18 + "..." + "a" * 19 + " #1"]
    plt.close(fig)


def test_the_overview_legends_stand_under_their_panels_and_cover_no_curve():
    # matplotlib's automatic placement ("best") put a panel's legend inside its axes, where a
    # sweep of 20 runs coloured by lr covered the rewards it was meant to explain
    from bayes_grpo.report.sections import _curves_figure

    steps = np.arange(1, 61)
    lrs = [1e-6, 2e-6, 5e-6, 1e-5, 2e-5] * 4
    ids = [f"lr_sweep_{i}" for i in range(20)] + ["a", "b"]
    curves = {r: pd.DataFrame({"reward": 0.9 - 0.8 * np.exp(-steps / (4.0 + 2 * i % 7))}, index=steps) for i, r in enumerate(ids)}
    groups = [8] * 20 + [4, 4]
    runs = make_runset(curves, {r: {"model": "m", "group_size": g} for r, g in zip(ids, groups)})
    summary = pd.DataFrame({"model": "m", "G": [float(g) for g in groups], "lr": lrs + [np.nan, np.nan]}, index=pd.Index(ids, name="run"))
    fig = _curves_figure(runs, summary)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.has_data()]
    assert len(axes) == 2
    (sweep,) = [ax for ax in axes if ax.get_legend().get_title().get_text() == "20 runs"]
    assert len(sweep.get_legend().get_texts()) == 5
    for ax in axes:
        box = ax.get_window_extent(renderer)
        legend = ax.get_legend().get_window_extent(renderer)
        assert not legend.overlaps(box), (ax.get_title(), legend, box)
        assert legend.y1 <= ax.xaxis.label.get_window_extent(renderer).y0  # under the x label, not over it
        assert legend.width <= box.width and box.width > 2 * fig.dpi
        assert fig.bbox.contains(legend.x0, legend.y0) and fig.bbox.contains(legend.x1, legend.y1)
    plt.close(fig)


def test_rank_plot_titles_do_not_run_into_the_x_labels_of_the_row_above():
    # with two LLMs each variable's title is two lines ("plateau" / the LLM's name): they ran into
    # the "Rank (all chains)" labels of the row above in the report's convergence section
    import arviz as az

    from bayes_grpo.report.model_sections import _rank_figure

    rng = np.random.default_rng(0)
    idata = az.from_dict(
        posterior={n: rng.normal(size=(2, 100, 2)) for n in ("noise_d", "plateau")} | {"alpha": rng.normal(size=(2, 100))},
        coords={"model": ["Qwen & <b>Co</b>", "Llama 8B"]},
        dims={"noise_d": ["model"], "plateau": ["model"]},
    )
    fig = _rank_figure(idata, ["alpha", "noise_d", "plateau"])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.has_data()]
    assert len(axes) == 5
    for a in axes:
        for b in axes:
            if a is not b:
                assert not a.title.get_window_extent(renderer).overlaps(b.xaxis.label.get_window_extent(renderer))
    plt.close(fig)


def _stub_report_stages(monkeypatch):
    """Stand-ins for the loaded fit and the sampled stages of report_from_posterior; returns
    the keyword arguments each stage was called with."""
    from types import SimpleNamespace

    import bayes_grpo.checks.invariance as invariance
    import bayes_grpo.checks.ppc as ppc
    import bayes_grpo.model as model_pkg
    import bayes_grpo.predict.compare as compare
    import bayes_grpo.report.build as build

    calls: dict = {}
    fit = SimpleNamespace(
        runset=_runset(),
        parameterisation="mechanistic",
        likelihood="state_space",
        model_config={"group_offset_sigma": 0.3, "hyperparameter_defaults": {"momentum": 0.9}},
        sampler_config={"draws": 1000, "tune": 1000, "chains": 4, "target_accept": 0.9},
        convergence=lambda: CheckResult("convergence", True, "Converged"),
        reward_bounds=(0.0, 1.0),
    )
    # the real model's choice of the refit's settings, from the stand-in's attributes
    fit.refit_settings = functools.partial(model_pkg.GRPODynamicsModel.refit_settings, fit)
    monkeypatch.setattr(model_pkg.GRPODynamicsModel, "load", classmethod(lambda cls, path: fit))

    def fake_invariance(runset, **kw):
        calls["invariance"] = kw
        return CheckResult("g_invariance", None, "stub")

    def fake_compare(runset, **kw):
        calls["compare"] = kw
        return SimpleNamespace(to_check_result=lambda: CheckResult("law_comparison", None, "stub"))

    def fake_ppc(fitted, runset=None, **kw):
        calls["ppc"] = kw
        return [CheckResult("ppc_trajectory_bands", True, "stub bands"), CheckResult("stationary_variance", None, "stub")]

    monkeypatch.setattr(invariance, "invariance_check", fake_invariance)
    monkeypatch.setattr(compare, "compare_laws", fake_compare)
    monkeypatch.setattr(ppc, "ppc_checks", fake_ppc)
    monkeypatch.setattr(build, "write_report", lambda path, **kw: Path(path))
    return calls


def test_a_report_whose_runs_the_invariance_test_refuses_says_why_in_its_section_and_keeps_the_rest(
    tmp_path, monkeypatch
):
    # report --invariance on a fit whose G groups also differ in a setting its law does not
    # follow: the test's refusal (before it samples) ended the whole report
    import bayes_grpo.checks.invariance as invariance
    import bayes_grpo.report.build as build
    from bayes_grpo.runset import RunSetError

    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    _stub_report_stages(monkeypatch)
    written = {}
    monkeypatch.setattr(build, "write_report", lambda path, **kw: written.update(kw) or Path(path))

    def refused(runset, **kw):
        raise RunSetError("the G-invariance test compares an LLM's group sizes, but its runs at different G also differ in k_ref")

    monkeypatch.setattr(invariance, "invariance_check", refused)
    with pytest.warns(UserWarning, match="the G-invariance section is left out: not testable on the fit's runs: the G-invariance test"):
        build.report_from_posterior(
            posterior, tmp_path / "r.html", invariance=True, diagnose=False, stability=False
        )
    assert "invariance" not in written or written["invariance"] is None
    assert written["absent_reasons"]["invariance"].startswith("not testable on the fit's runs: the G-invariance test")
    assert written["ppc"] is not None  # the rest of the report is made


def test_report_sampler_options_reach_the_law_comparison_and_the_invariance_test(
    tmp_path, monkeypatch, capsys
):
    # `report --compare` sampled the law comparison with 500 draws / 500 tune whatever was asked
    from bayes_grpo.cli import main

    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    base = ["report", str(posterior), "-o", str(tmp_path / "r.html"), "--no-diagnose"]
    base += ["--no-stability", "--compare", "--invariance"]
    calls = _stub_report_stages(monkeypatch)
    assert main([*base, "--draws", "40", "--tune", "30", "--chains", "1", "--seed", "7"]) == 0
    # the fit's `--default` and `--reward-bounds`, also for compare
    fit_defaults = {"hyperparameter_defaults": {"momentum": 0.9}, "reward_bounds": (0.0, 1.0)}
    assert calls["compare"] == {"random_seed": 7, "draws": 40, "tune": 30, "chains": 1, **fit_defaults}
    inv = calls["invariance"]
    assert (inv["draws"], inv["tune"], inv["chains"], inv["random_seed"]) == (40, 30, 1, 7)
    # not given: the comparison keeps compare_laws' defaults, the invariance test the fit's own
    calls.clear()
    assert main([*base, "--tune", "30"]) == 0
    assert calls["compare"] == {"random_seed": 0, "tune": 30, **fit_defaults}
    inv = calls["invariance"]
    assert (inv["draws"], inv["tune"], inv["chains"]) == (1000, 30, 4)
    # and the fit's model: a fit made with `--default momentum=0.9` on runs without momentum
    # made `report --invariance` fail ("needs 'momentum' for every run"); its priors and
    # likelihood were the defaults' whatever the fit had used
    assert inv["model_config"]["hyperparameter_defaults"] == {"momentum": 0.9}
    assert inv["model_config"]["group_offset_sigma"] == 0.3 and inv["likelihood"] == "state_space"
    # and its reward bounds: H0 and H1 of a fit with bounds 0 1 were fitted without them
    assert inv["reward_bounds"] == (0.0, 1.0)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in (("--draws", "500"), ("--tune", "500"), ("--chains", "2")):
        assert f"{flag} " in text and f"{default} for --compare" in text


def test_fit_section_carries_the_notes_the_fit_printed_about_the_data():
    # 'bayes-grpo fit' printed its notes on the data (a run that starts late, a constant
    # reward); the report, the place a reader looks, left them out
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.report.model_sections import fit_section

    runs = _runset()
    draws = xr.DataArray(
        np.broadcast_to(runs["reward"].values, (3, *runs["reward"].shape)),
        dims=("sample", "run", "step"),
    )
    note = "runs ['run2 (0.5 at all 40 logged steps)'] have a constant reward: check the log"
    model = SimpleNamespace(
        runset=runs,
        settings={"parameterisation": "mechanistic"},
        run_summary=lambda: pd.DataFrame({"model": ["tiny"]}, index=["run0"]),
        group_summary=lambda: pd.DataFrame({"p_star": [0.8]}),
        fitted_trajectory_draws=lambda: draws,
        data=SimpleNamespace(notes=[note]),
    )
    texts = [b.content for b in fit_section(model).blocks if b.kind == "text"]
    assert any(note in t for t in texts), texts
    # and fit's note on a noise exponent whose posterior excludes the theory's 1
    alpha = "the noise exponent alpha (sigma^2 = D / G^alpha) is -1.02 [-1.1, -0.937] (90% interval), which excludes the theory's 1"
    model.noise_exponent_summary = lambda: {"median": -1.02, "note": alpha}
    texts = [b.content for b in fit_section(model).blocks if b.kind == "text"]
    assert any(alpha in t for t in texts), texts
    plt.close("all")


def test_fit_figure_caption_says_when_it_draws_only_some_of_the_runs(monkeypatch):
    # a fit of 50 runs drew 24 panels (MAX_RUN_PANELS) under the caption of all of them: 26 runs
    # left out of the figure without a word
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.report import model_sections

    monkeypatch.setattr(model_sections, "MAX_RUN_PANELS", 2)
    runs = _runset()  # 3 runs
    draws = xr.DataArray(
        np.broadcast_to(runs["reward"].values, (3, *runs["reward"].shape)), dims=("sample", "run", "step")
    )
    model = SimpleNamespace(
        runset=runs,
        settings={"parameterisation": "mechanistic"},
        run_summary=lambda: pd.DataFrame({"model": ["tiny"] * 3}, index=["run0", "run1", "run2"]),
        group_summary=lambda: pd.DataFrame({"p_star": [0.8]}),
        fitted_trajectory_draws=lambda: draws,
        data=SimpleNamespace(notes=[]),
    )
    (image,) = [b for b in model_sections.fit_section(model).blocks if b.kind == "image"]
    assert "The first 2 of the 3 runs (the table above lists every run)." in image.caption, image.caption
    monkeypatch.setattr(model_sections, "MAX_RUN_PANELS", 3)
    (image,) = [b for b in model_sections.fit_section(model).blocks if b.kind == "image"]
    assert "The first" not in image.caption
    plt.close("all")


def test_the_fit_of_a_short_run_is_dashed_past_its_last_logged_step():
    # a 20-step run beside 40-step runs had its band and mean drawn to step 40 as if fitted there
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.report.model_sections import _fit_figure

    runs = _runset()  # 3 runs
    reward = runs["reward"].values.copy()
    steps = runs["step"].values
    reward[0, steps > steps[len(steps) // 2]] = np.nan  # run0 ends half-way
    runs = runs.assign(reward=(runs["reward"].dims, reward))
    draws = xr.DataArray(
        np.broadcast_to(np.nan_to_num(reward, nan=0.5), (3, *reward.shape)), dims=("sample", "run", "step")
    )
    model = SimpleNamespace(runset=runs, fitted_trajectory_draws=lambda: draws, idata=None)
    model.run_summary = lambda: pd.DataFrame({"model": ["tiny"] * 3}, index=[str(r) for r in runs["run"].values])
    fig = _fit_figure(model)
    last = steps[np.isfinite(reward[0])].max()
    short, full = fig.axes[0], fig.axes[1]
    solid = [ln for ln in short.lines if ln.get_linestyle() == "-" and ln.get_color() == "C0"]
    dashed = [ln for ln in short.lines if ln.get_linestyle() == "--"]
    assert max(solid[0].get_xdata()) == last and len(dashed) == 1
    assert min(dashed[0].get_xdata()) == last and max(dashed[0].get_xdata()) == steps.max()
    assert not [ln for ln in full.lines if ln.get_linestyle() == "--"]  # a run logged to the end
    plt.close(fig)


def test_fit_section_of_an_iid_fit_says_when_the_reward_wanders_about_its_curve():
    # a reward with strong process noise (the SDE's own fluctuations, stationary sd about 20%
    # of the rise) leaves residuals correlated over tens of steps; the i.i.d. fit's intervals
    # are then too narrow, and the report showed them without a word (the residual
    # autocorrelation check existed in checks.ppc but no report section ran it)
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.dynamics.simulate import simulate_sde_runset, truth_frame
    from bayes_grpo.report.model_sections import fit_section

    runs = simulate_sde_runset(
        models={"m": {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-5}},
        n_seeds=1,
        n_steps=200,
        random_seed=3,
    )
    truth = truth_frame(runs)

    def coefficient_draws(*, group_size, **_):
        row = truth[truth["group_size"] == group_size].iloc[0]
        values = {
            "M_eff": row["M_eff"],
            "C_eff": row["C_eff"],
            "K_eff": row["K_eff"],
            "plateau": row["plateau"],
            "initial_reward": row["initial_reward"],
            "sigma": np.sqrt(row["stationary_var"]),
        }
        return xr.Dataset({k: (("chain", "draw"), np.full((1, 4), v)) for k, v in values.items()})

    draws = xr.DataArray(
        np.broadcast_to(runs["true_mean_reward"].values, (3, *runs["reward"].shape)),
        dims=("sample", "run", "step"),
    )

    def model(likelihood):
        return SimpleNamespace(
            runset=runs,
            likelihood=likelihood,
            settings={"likelihood": likelihood},
            run_summary=lambda: pd.DataFrame({"model": ["m"]}, index=["r"]),
            group_summary=lambda: pd.DataFrame({"p_star": [0.7]}),
            fitted_trajectory_draws=lambda: draws,
            coefficient_draws=coefficient_draws,
        )

    checks = [b.content for b in fit_section(model("iid")).blocks if b.kind == "check"]
    assert len(checks) == 1, checks
    assert "residual autocorrelation" in checks[0].title
    assert checks[0].badge == "flagged" and "state_space" in checks[0].summary
    # under the state-space likelihood correlated residuals are the model's own: no advice to switch
    assert not [b for b in fit_section(model("state_space")).blocks if b.kind == "check"]
    plt.close("all")


def test_an_iid_fit_with_alternating_step_noise_is_not_told_to_use_the_state_space_likelihood():
    # several public GRPO logs have lag-1 residual autocorrelation -0.1 to -0.2 (step noise
    # that alternates): outside the white-noise band, but no wander, and the state-space
    # likelihood (positively correlated process noise) is no remedy for it
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.checks.ppc import iid_residual_check
    from bayes_grpo.dynamics.simulate import simulate_sde_runset, truth_frame

    runs = simulate_sde_runset(
        models={"m": {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 0.0}},
        n_seeds=1,
        n_steps=400,
        random_seed=3,
    )
    truth = truth_frame(runs)
    rng = np.random.default_rng(0)
    white = rng.normal(0.0, 0.03, (runs.sizes["run"], runs.sizes["step"] + 1))
    # MA(1) step noise, lag-1 autocorrelation -0.6 / (1 + 0.36) = -0.44
    runs["reward"] = runs["true_mean_reward"] + (white[:, 1:] - 0.6 * white[:, :-1])

    def coefficient_draws(*, group_size, **_):
        row = truth[truth["group_size"] == group_size].iloc[0]
        values = {k: row[k] for k in ("M_eff", "C_eff", "K_eff", "plateau", "initial_reward")}
        values["sigma"] = 0.035
        return xr.Dataset({k: (("chain", "draw"), np.full((1, 4), v)) for k, v in values.items()})

    model = SimpleNamespace(runset=runs, likelihood="iid", coefficient_draws=coefficient_draws)
    res = iid_residual_check(model)
    assert res.table["acf_lag1"].max() < -0.3, res.table
    assert res.passed is True and "negative" in res.summary and "state_space" not in res.summary


def test_overview_of_a_run_set_the_fit_did_not_see_says_so_and_names_the_runs(monkeypatch):
    # `report fit.nc --runs other.nc` headed the other run set "All runs in the fitted run set"
    from types import SimpleNamespace

    import bayes_grpo.report.model_sections as model_sections

    absent = model_sections.model_sections(None)  # the fit's own sections are not under test
    monkeypatch.setattr(model_sections, "model_sections", lambda model: absent)
    fitted = _runset()
    fit = SimpleNamespace(runset=fitted, data=SimpleNamespace(models=["tiny"]), parameterisation="phenomenological")
    other = fitted.copy(deep=True)
    other["reward"][0] = other["reward"][0] + 0.05
    html = render_html(build_sections(model=fit, runset=other))
    assert "All runs in the fitted run set" not in html
    assert "not the fitted run set" in html and "run0: rewards differ from the fitted run" in html
    assert "run1:" not in html  # the same rewards: a run of the fit
    # the fitted run set itself (given again, or by default) reads as before
    for runs in (fitted.copy(deep=True), None):
        html = render_html(build_sections(model=fit, runset=runs))
        assert "All runs in the fitted run set" in html and "not fitted to" not in html
    plt.close("all")


def test_report_sampler_options_without_a_sampled_stage_are_named_as_unused(tmp_path, monkeypatch, capsys):
    # `report fit.nc --draws 40` (no --invariance, no --compare) dropped --draws without a word
    from bayes_grpo.cli import main

    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    _stub_report_stages(monkeypatch)
    base = ["report", str(posterior), "-o", str(tmp_path / "r.html"), "--no-diagnose", "--no-stability"]
    assert main([*base, "--draws", "40", "--chains", "1"]) == 0
    err = capsys.readouterr().err
    assert "bayes-grpo report: warning: --draws, --chains set the sampled stages" in err and "not used" in err, err
    assert main([*base, "--tune", "40"]) == 0  # one option in the singular (it said "set(s)")
    assert "bayes-grpo report: warning: --tune sets the sampled stages" in capsys.readouterr().err
    assert main([*base, "--draws", "40", "--compare"]) == 0
    assert "not used" not in capsys.readouterr().err


def test_the_overview_reads_group_sizes_as_given():
    # a fractional G (completions averaged over uneven groups) was truncated: 4.5 read as 4
    from types import SimpleNamespace

    from bayes_grpo.report.sections import overview_section

    ds = _runset()
    ds = ds.assign_coords(group_size=("run", np.array([4.0, 4.5, 16.0])))
    html = render_html([overview_section(ds)])
    assert "group sizes 4, 4.5 and 16." in html
    # and so do the overview's panel titles and the fit's run labels (G 4.5 read as 4: two panels "G=4")
    from bayes_grpo.report.model_sections import _labels
    from bayes_grpo.report.sections import _curves_figure

    summary = pd.DataFrame({"model": "tiny", "G": ds["group_size"].values}, index=pd.Index(ds["run"].values, name="run"))
    fig = _curves_figure(ds, summary)
    assert sorted(ax.get_title() for ax in fig.axes if ax.has_data()) == ["tiny  G=16", "tiny  G=4", "tiny  G=4.5"]
    plt.close(fig)
    assert _labels(SimpleNamespace(runset=ds)) == ["tiny G=4 | run0", "tiny G=4.5 | run1", "tiny G=16 | run2"]


def test_the_stability_section_of_a_phenomenological_fit_says_why_it_has_no_phase_diagram(monkeypatch):
    # `report phen.nc` said "no stability analysis was given (bayes-grpo phase-diagram, ...)",
    # pointing to a command that refuses a phenomenological fit
    from types import SimpleNamespace

    import bayes_grpo.report.model_sections as model_sections

    absent = model_sections.model_sections(None)  # the fit's own sections are not under test
    monkeypatch.setattr(model_sections, "model_sections", lambda model: absent)
    runs = _runset()
    for parameterisation, says in (
        ("phenomenological", "a phenomenological fit has no curvature K"),
        ("mechanistic", "no stability analysis was given"),
    ):
        fit = SimpleNamespace(runset=runs, data=SimpleNamespace(models=["tiny"]), parameterisation=parameterisation)
        (stability,) = [s for s in build_sections(model=fit) if s.key == "stability"]
        assert not stability.available and says in render_html([stability])


def test_run_ids_and_llm_names_with_dollar_signs_are_drawn_as_written_not_as_mathtext(tmp_path):
    # a run named "run_$LR_$G" (an unexpanded shell variable) stopped the report with matplotlib's
    # mathtext "ParseSyntaxException ... found end of text"; "Q $m$" was drawn as an italic m
    from types import SimpleNamespace

    import arviz as az
    import matplotlib.cbook as cbook
    import xarray as xr

    from bayes_grpo.diagnostics import diagnose
    from bayes_grpo.report.model_sections import _fit_figure, _rank_figure

    steps = np.arange(1, 41)
    ids = ["run_$LR_$G", "qwen_${LR}_${G}", "cost $5 vs $6"]
    curves = {r: pd.DataFrame({"reward": 0.8 - 0.7 * np.exp(-steps / 10.0) + 0.01 * np.sin(steps + i)}, index=steps) for i, r in enumerate(ids)}
    runs = make_runset(curves, {r: {"model": "Q $m$", "group_size": g, "learning_rate": 1e-3} for r, g in zip(ids, [4, 4, 16])})
    path = write_report(tmp_path / "r.html", runset=runs, diagnostics=diagnose(runs, modes=["instability"]))
    assert path.read_text().count("data:image/png;base64,") == 1 + len(ids)  # the overview and one per run

    def drawn_as_written(fig, texts):
        fig.canvas.draw()
        drawn = [t.get_text() for t in fig.findobj(matplotlib.text.Text) if "$" in t.get_text()]
        assert drawn and not [t for t in drawn if cbook.is_math_text(t)], drawn
        assert all(any(x in t.replace(r"\$", "$") for t in drawn) for x in texts), (texts, drawn)
        plt.close(fig)

    draws = xr.DataArray(np.broadcast_to(runs["reward"].values, (3, *runs["reward"].shape)), dims=("sample", "run", "step"))
    drawn_as_written(_fit_figure(SimpleNamespace(runset=runs, fitted_trajectory_draws=lambda: draws)), ids)
    idata = az.from_dict(
        posterior={"plateau": np.random.default_rng(0).normal(size=(2, 50, 2))},
        coords={"model": ["Q $m$", "run_$LR_$G"]},
        dims={"plateau": ["model"]},
    )
    drawn_as_written(_rank_figure(idata, ["plateau"]), ["Q $m$", "run_$LR_$G"])


def _fit_of_coefficient_scales(scale, seed=0):
    """A stand-in fit of _runset()'s 3 runs whose coefficients have the given scales, D ~2e-3."""
    from types import SimpleNamespace

    import arviz as az

    runs = _runset()
    rng = np.random.default_rng(seed)
    per_run = {v: s * (1 + 0.05 * rng.normal(size=(2, 50, 3))) for v, s in scale.items()}
    idata = az.from_dict(
        posterior=per_run | {"noise_d": 2e-3 * (1 + 0.05 * rng.normal(size=(2, 50, 1))), "alpha": -1 + 0.05 * rng.normal(size=(2, 50)), "plateau": 0.8 + 0.01 * rng.normal(size=(2, 50, 1))},
        coords={"run": [str(r) for r in runs["run"].values], "model": ["tiny"]},
        dims={v: ["run"] for v in scale} | {"noise_d": ["model"], "plateau": ["model"]},
    )
    return SimpleNamespace(runset=runs, idata=idata)


def test_each_coefficient_of_the_forest_plots_has_an_x_axis_of_its_own_scale(monkeypatch):
    # K_eff (~1e-4) and C_eff (~0.1) shared one x axis with zeta (~5): their intervals were a
    # column of dots at 0; so was D (~2e-3) beside alpha (~-1)
    import bayes_grpo.report.sections as sections
    from bayes_grpo.report.model_sections import posterior_section

    drawn = []
    monkeypatch.setattr(sections, "figure_to_base64", lambda fig: drawn.append(fig) or "")
    scale = {"M_eff": 0.95, "C_eff": 0.1, "K_eff": 1e-4, "zeta": 5.0}
    posterior_section(_fit_of_coefficient_scales(scale))
    assert len(drawn) == 2
    widths = {}
    for fig in drawn:
        for ax in fig.axes:
            names = [v for v in [*scale, "noise_d", "alpha"] if any(t.get_text().startswith(v) for t in ax.get_yticklabels())]
            if names:
                assert len(names) == 1, names  # one coefficient per panel
                lo, hi = ax.get_xlim()
                widths[names[0]] = hi - lo
        plt.close(fig)
    assert set(widths) == {*scale, "noise_d", "alpha"}
    for v, s in scale.items():  # each axis spans its own coefficient's spread, not zeta's
        assert widths[v] < 2 * s, (v, widths[v])
    assert widths["noise_d"] < 4e-3, widths["noise_d"]


def test_the_effective_sample_sizes_of_the_report_are_whole_draws():
    # the convergence table gave "bulk ESS 766.7" under a summary of "bulk ESS >= 767", and a
    # fit that did not converge "3.205" beside "bulk ESS 3 < 200"; the posterior table "477.6"
    import re as _re
    from types import SimpleNamespace

    import arviz as az

    from bayes_grpo.model.convergence import convergence_check
    from bayes_grpo.report.model_sections import convergence_section, posterior_section

    rng = np.random.default_rng(0)
    idata = az.from_dict(posterior={"alpha": rng.normal(size=(2, 200)), "noise_d": rng.normal(size=(2, 200))})
    conv = convergence_check(idata)
    assert not conv.table["ess_bulk"].map(float.is_integer).all()  # ArviZ's are fractional
    section = convergence_section(SimpleNamespace(idata=idata, convergence=lambda: conv))
    (check,) = [b.content for b in section.blocks if b.kind == "check"]
    fit = _fit_of_coefficient_scales({"zeta": 5.0})
    (summary,) = [b.content for b in posterior_section(fit).blocks if b.kind == "table"]
    plt.close("all")
    for html, n_rows in ((check.table_html, 2), (summary, 3)):
        header = _re.findall(r'<th(?: class="text")?>([^<]*)</th>', html.split("</thead>")[0])
        rows = [_re.findall(r'<td(?: class="text")?>([^<]*)</td>', row) for row in html.split("<tbody>")[1].split("</tr>")[:-1]]
        assert len(rows) == n_rows
        for name in ("ess_bulk", "ess_tail"):
            at = [h for h in header if h].index(name)
            assert all(_re.fullmatch(r"\d+", row[at]) for row in rows), (name, rows)
    assert not conv.table["ess_bulk"].map(float.is_integer).all()  # the check itself keeps ArviZ's (fit --json)


def test_the_posterior_summary_table_is_not_rounded_to_three_decimals():
    # az.summary's default rounding printed D (~2e-3) with sd 0 and its interval as 0.002 0.002,
    # and R-hat to two decimals: 1.004 and 1.012 (either side of the 1.01 criterion) both read 1.0
    import arviz as az

    from bayes_grpo.report.model_sections import posterior_section
    from bayes_grpo.report.sections import table_html

    fit = _fit_of_coefficient_scales({"zeta": 5.0})
    section = posterior_section(fit)
    plt.close("all")
    (table,) = [b.content for b in section.blocks if b.kind == "table"]
    want = az.summary(fit.idata, var_names=["alpha", "noise_d", "plateau"], hdi_prob=0.9, round_to="none")
    assert want.loc["noise_d[tiny]", "sd"] > 0
    # its effective sample sizes in whole draws (test_the_effective_sample_sizes_of_the_report_are_whole_draws)
    want = want.assign(ess_bulk=want["ess_bulk"].round(), ess_tail=want["ess_tail"].round())
    assert table == table_html(want)


def test_fit_section_names_the_settings_the_fit_took_from_its_defaults():
    # `fit runs.nc --default group_size=8 --default momentum=0.9 ...` on runs that log no G: the
    # report's tables showed G=8 for them as if logged, and nothing said it was assumed
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.report.model_sections import fit_section

    runs = _runset()
    runs = runs.assign_coords(
        group_size=("run", np.array([4.0, np.nan, np.nan])), momentum=("run", np.array([0.9, 0.9, np.nan])), k_ref=("run", np.ones(3))
    )
    draws = xr.DataArray(np.broadcast_to(runs["reward"].values, (3, *runs["reward"].shape)), dims=("sample", "run", "step"))
    # the note is the fit's own (model.prepare.default_settings_notes, among the data's notes,
    # which `fit` prints too); a mechanistic fit, since the phenomenological form uses no momentum
    from bayes_grpo.model.prepare import default_settings_notes

    defaults = {"group_size": 8, "momentum": 0.5, "k_ref": 1, "learning_rate": None}
    momentum = np.where(np.isnan(runs["momentum"].values), 0.5, runs["momentum"].values)
    model = SimpleNamespace(
        runset=runs,
        settings={"parameterisation": "mechanistic"},
        model_config={"hyperparameter_defaults": defaults},
        run_summary=lambda: pd.DataFrame({"model": ["tiny"] * 3}, index=["run0", "run1", "run2"]),
        group_summary=lambda: pd.DataFrame({"p_star": [0.8]}),
        fitted_trajectory_draws=lambda: draws,
        data=SimpleNamespace(notes=default_settings_notes(runs, defaults, "mechanistic", momentum=momentum)),
    )
    texts = [b.content for b in fit_section(model).blocks if b.kind == "text"]
    plt.close("all")
    (note,) = [t for t in texts if "hyperparameter_defaults" in t]
    assert "group_size=8 for runs ['run1', 'run2']" in note and "momentum=0.5 for runs ['run2']" in note, note
    assert "k_ref" not in note  # a default no run needed


def test_a_report_of_a_fit_that_did_not_converge_says_so_in_the_fit_and_stability_sections_and_on_stderr(tmp_path, monkeypatch, capsys):
    # `report bad.nc` (R-hat 3.1, bulk ESS 4) printed only "wrote r.html" where `phase-diagram bad.nc`
    # warns "the fit did not converge ...", and its phase diagram read "pass" with no word on it
    from types import SimpleNamespace

    import bayes_grpo.report.model_sections as model_sections
    from bayes_grpo.cli import main
    from bayes_grpo.report.sections import Section

    phase = CheckResult("phase_diagram", True, "0 of 3 observed runs sit where P(unstable) >= 0.5.")
    for passed in (False, True):
        convergence = Section(key="convergence", title="Convergence").check(CheckResult("convergence", passed, "R-hat 3.1"))
        monkeypatch.setattr(model_sections, "model_sections", lambda model, c=convergence: [Section("fit", "Fit per run"), c, Section("posteriors", "Posteriors")])
        fit = SimpleNamespace(runset=_runset(), idata=object(), parameterisation="mechanistic")
        sections = {s.key: s for s in build_sections(model=fit, stability=phase, ppc=_check("ppc_trajectory_bands", True))}
        assert ("did not converge" in sections["stability"].intro) is (not passed), sections["stability"].intro
        # the posterior predictive bands are those draws as well
        assert ("did not converge" in sections["ppc"].intro) is (not passed), sections["ppc"].intro
        # and so does the fit section, whose per-run R^2 and zeta are those draws too
        assert ("did not converge" in sections["fit"].intro) is (not passed), sections["fit"].intro
    monkeypatch.undo()
    _stub_report_stages(monkeypatch)
    import bayes_grpo.model as model_pkg

    fit = model_pkg.GRPODynamicsModel.load("x")
    fit.convergence = lambda: CheckResult("convergence", False, "R-hat 3.1", values={"failed": ["R-hat 3.104 > 1.01"]})
    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    assert main(["report", str(posterior), "-o", str(tmp_path / "r.html"), "--no-diagnose", "--no-stability"]) == 0
    err = capsys.readouterr().err
    assert "bayes-grpo report: warning:" in err and "the fit did not converge (R-hat 3.104 > 1.01)" in err, err


def test_the_report_draws_a_phase_diagram_for_each_momentum_setting_of_an_llm(tmp_path, monkeypatch):
    # one diagram per LLM at the median momentum of its runs: runs at 0.9 (Adam) and 0.5 (SGD)
    # gave a diagram at 0.7 where no run sits ("0 of 0 observed runs"), and each run was in none
    from types import SimpleNamespace

    import bayes_grpo.checks.stability as stability
    import bayes_grpo.model as model_pkg
    from bayes_grpo.report.build import report_from_posterior

    _stub_report_stages(monkeypatch)
    fit = model_pkg.GRPODynamicsModel.load("x")
    fit.data = SimpleNamespace(
        models=["tiny", "big"],
        model_idx=np.array([0, 0, 1]),
        momentum=np.array([0.9, 0.5, 0.9]),
        momentum_convention=np.array(["ema", "heavy_ball", "ema"], dtype=object),
    )
    drawn = []
    monkeypatch.setattr(stability, "phase_diagram", lambda fitted, **kw: drawn.append(kw) or CheckResult("phase_diagram", True, "stub"))
    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    report_from_posterior(posterior, tmp_path / "r.html", diagnose=False)
    # each diagram leaves "N fitted run(s) at another momentum" to the section's intro
    quiet = {"note_other_momenta": False}
    assert drawn == [
        {"momentum": 0.5, "momentum_convention": "heavy_ball", "model": "tiny"} | quiet,
        {"momentum": 0.9, "momentum_convention": "ema", "model": "tiny"} | quiet,
        {"momentum": 0.9, "momentum_convention": "ema", "model": "big"} | quiet,
    ]


def test_the_posterior_section_gives_the_curvature_scaling_exponent_that_fit_prints():
    # a fit that regresses log K on log model size: `fit` prints "size_exponent 0.321 [-0.0457,
    # 0.669]"; the report had it nowhere (not in the text, not in the summary table)
    from types import SimpleNamespace

    import arviz as az

    from bayes_grpo.model.core import size_exponent_summary
    from bayes_grpo.report.model_sections import posterior_section

    fit = _fit_of_coefficient_scales({"zeta": 5.0})
    draws = 0.3 + 0.1 * np.random.default_rng(1).normal(size=(2, 50))
    fit.idata = az.InferenceData(posterior=fit.idata.posterior.assign(size_exponent=(("chain", "draw"), draws)))
    fit.data = SimpleNamespace(models=["tiny"], log_size=np.array([np.log(1e9)]))
    section = posterior_section(fit)
    plt.close("all")
    s = size_exponent_summary(fit)
    texts = [b.content for b in section.blocks if b.kind == "text"]
    assert any(f"size_exponent {s['median']:.3g} [{s['lo']:.3g}, {s['hi']:.3g}]" in t and "['tiny']" in t for t in texts), texts
    (table,) = [b.content for b in section.blocks if b.kind == "table"]
    assert "<th>size_exponent</th>" in table


def test_an_overview_panel_of_many_runs_tells_them_apart_by_the_setting_they_differ_in():
    # a sweep of 12 runs at one G had one panel of 12 unnamed curves: no legend above 6 runs
    from bayes_grpo.report.sections import _curves_figure

    steps = np.arange(1, 31)
    k_refs = [1, 2, 4] * 4
    ids = [f"sweep_k{k}_s{i}" for i, k in enumerate(k_refs)]
    curves = {r: pd.DataFrame({"reward": 0.8 - 0.7 * np.exp(-steps / (5.0 * k))}, index=steps) for r, k in zip(ids, k_refs)}
    runs = make_runset(curves, {r: {"model": "m", "group_size": 8, "k_ref": k} for r, k in zip(ids, k_refs)})
    summary = pd.DataFrame({"model": "m", "G": 8.0, "k_ref": [float(k) for k in k_refs]}, index=pd.Index(ids, name="run"))
    fig = _curves_figure(runs, summary)
    (ax,) = [ax for ax in fig.axes if ax.has_data()]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["K_ref = 1", "K_ref = 2", "K_ref = 4"]
    colours = {tuple(line.get_color()) for line in ax.get_lines()}
    assert len(colours) == 3  # runs of one K_ref share a colour
    plt.close(fig)
    # nothing tells them apart: no legend, and the panel says where the ids are
    summary["k_ref"] = 1.0
    fig = _curves_figure(runs, summary)
    (ax,) = [ax for ax in fig.axes if ax.has_data()]
    assert ax.get_legend() is None
    assert any("12 runs (ids in the table)" in t.get_text() for t in ax.texts)
    plt.close(fig)


def test_a_figure_that_cannot_be_drawn_is_named_in_its_place_not_the_end_of_the_report():
    # a check's figure titled with an unexpanded shell variable ("run_$LR_$G": mathtext that does
    # not parse) stopped the whole report with matplotlib's ParseSyntaxException
    bad, ax = plt.subplots(figsize=(3, 2))
    ax.set_title("run_$LR_$G")
    result = _check("my_check", False)
    result.figures = {"bands of run_$LR_$G": bad, **result.figures}
    loose, ax = plt.subplots(figsize=(3, 2))
    ax.set_xlabel("run_$LR_$G")
    with pytest.warns(UserWarning) as caught:
        sections = build_sections(runset=_runset(), invariance=[result])
        sections[0] = sections[0].figure(loose, "overview of run_$LR_$G")
    said = [str(w.message) for w in caught if "Figure not drawn" in str(w.message)]
    assert len(said) == 2 and said[0].startswith("report: Figure not drawn (ValueError: LR_") and said[1].endswith("): overview of run_$LR_$G"), said
    html = render_html(sections)
    assert html.count('<p class="absent">Figure not drawn (ValueError') == 2, html
    assert "</p>" in html and "): bands of run_$LR_$G</p>" in html and "): overview of run_$LR_$G</p>" in html
    assert 'src="data:image/png;base64,"' not in html  # no empty image
    assert "my_check figure" in html  # the check's other figure is drawn
    assert not plt.fignum_exists(bad.number) and not plt.fignum_exists(loose.number)


def test_a_whole_number_in_a_float_column_of_a_report_table_is_written_whole():
    # the overview's "last step" column turned float beside a run without steps (NaN), and the
    # table printed step 12000 as 1.2e+04
    from bayes_grpo.report.sections import table_html

    frame = pd.DataFrame({"last step": [12000.0, np.nan, 150.0], "reward": [0.123456, 0.5, 2.0e7]})
    html = table_html(frame)
    assert "<td>12000</td>" in html and "<td>150</td>" in html
    assert "1.2e+04" not in html
    assert "<td>0.1235</td>" in html and "<td>2e+07</td>" in html  # other floats as before


def test_text_columns_of_a_report_table_are_aligned_left_and_numbers_right():
    # the instability signals' table right-aligned its "statistic" and "note" sentences as if
    # they were numbers (every td was text-align: right but the first)
    from importlib.resources import files

    from bayes_grpo.report.sections import table_html

    frame = pd.DataFrame(
        {
            "signal": ["growing swings", "sustained clipping"],
            "statistic": ["late/early x", "mean clip ratio"],
            "value": [2.5, 0.03],
            "onset_step": [120.0, np.nan],
            "r2": [0.9, "no trend"],  # a number column with a word in it stays a number column
            "note": ["beyond the noise", None],
        }
    ).set_index("signal")
    html = table_html(frame)
    header = html.split("<tbody>")[0]
    assert '<th class="text">statistic</th>' in header and '<th class="text">note</th>' in header, header
    assert "<th>value</th>" in header and "<th>r2</th>" in header
    rows = html.split("<tbody>")[1].split("</tr>")
    assert '<td class="text">late/early x</td>\n      <td>2.5</td>\n      <td>120</td>\n      <td>0.9</td>\n      <td class="text">beyond the noise</td>' in rows[0], rows[0]
    assert '<td class="text"></td>' in rows[1] and "<td>no trend</td>" in rows[1], rows[1]
    css = files("bayes_grpo.report").joinpath("templates/report.html").read_text()
    assert "table.data td.text, table.data th.text { text-align: left; }" in css


def test_a_missing_value_of_a_nullable_integer_column_is_blank_as_a_nan_is():
    # a check table with an Int64 column (a step count, missing for one row) was written
    # "<NA>" in the report, where a float column's NaN is blank (and --json writes null for both)
    from bayes_grpo.report.sections import table_html

    frame = pd.DataFrame({"onset": pd.array([12000, None], dtype="Int64"), "when": [pd.Timestamp("2026-01-02"), pd.NaT]})
    html = table_html(frame)
    assert "&lt;NA&gt;" not in html and "NaT" not in html, html
    assert "<td>12000</td>" in html and html.count("<td></td>") == 2


def test_the_report_shows_the_warnings_of_loading_the_fit_that_the_other_verbs_carry(tmp_path, monkeypatch):
    # `report tiny.nc` warned "... What is computed from this i.i.d. fit is too confident." on
    # stderr only (build.py loaded the fit by load_fitted_model, not as_fitted_model as predict /
    # stability / phase-diagram do, which carry it as posterior_warnings): the HTML, the thing
    # that is read and passed on, did not have it

    import bayes_grpo.model.core as core
    import bayes_grpo.report.build as build

    _stub_report_stages(monkeypatch)
    note = "fit.nc: Residual lag-1 autocorrelation up to 0.78. What is computed from this i.i.d. fit is too confident."

    # the texts of the fit's warnings, as loading it makes them (model.core._load_with_notes)
    monkeypatch.setattr(core, "fitted_model_warnings", lambda model, path: [note])
    written: dict = {}
    monkeypatch.setattr(build, "write_report", lambda path, **kw: written.update(kw) or Path(path))
    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    with pytest.warns(UserWarning, match="too confident"):  # still warned, as before
        build.report_from_posterior(posterior, tmp_path / "r.html", diagnose=False, stability=False)
    assert written["posterior_warnings"] == [note]
    kw = {k: v for k, v in written.items() if k not in ("title", "subtitle", "overwrite", "verdicts", "runset_notes")}
    html = render_html(build_sections(**kw))
    overview = html.split('data-section="overview"')[1].split("</section>")[0]
    assert f'<p class="warning">Warning of the saved fit: {note}</p>' in overview


def test_the_fit_tables_say_their_values_are_posterior_medians_and_what_the_interval_is():
    # the report's "Per model and G" and "Per run" tables gave D 0.04389 and the posterior
    # section's table D 0.04579 (its mean) with no word that the fit tables are medians (`fit`
    # titles the same table "posterior medians per model and G"), nor what zeta_lo / zeta_hi are
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.report.model_sections import fit_section

    runs = _runset()
    draws = xr.DataArray(np.broadcast_to(runs["reward"].values, (3, *runs["reward"].shape)), dims=("sample", "run", "step"))
    model = SimpleNamespace(
        runset=runs,
        settings={"parameterisation": "mechanistic"},
        run_summary=lambda: pd.DataFrame({"model": ["tiny"], "zeta_lo": [1.0]}, index=["run0"]),
        group_summary=lambda: pd.DataFrame({"p_star": [0.8]}),
        fitted_trajectory_draws=lambda: draws,
    )
    blocks = fit_section(model).blocks
    first_table = next(i for i, b in enumerate(blocks) if b.kind == "table")
    said = " ".join(b.content for b in blocks[:first_table] if b.kind == "text")
    assert "posterior medians" in said and "median of its runs" in said, said
    assert "central 90% interval of zeta" in said, said
    plt.close("all")


def test_the_rank_plots_of_a_fit_whose_r_hat_failed_show_the_variables_that_failed(monkeypatch):
    # a tiny fit flagged "R-hat 1.023 > 1.01 for [..., 'zeta', 'sigma']" had, under it, the rank
    # plots of alpha, noise_d, plateau and log_stiffness, whose R-hat was fine: uniform
    # histograms beside the "flagged" badge, the failing variables nowhere drawn
    from types import SimpleNamespace

    import arviz as az

    from bayes_grpo.model.convergence import convergence_check
    from bayes_grpo.report.model_sections import convergence_section

    rng = np.random.default_rng(0)
    shift = np.array([0.0, 0.0, 3.0])[None, None, :] * np.array([0.0, 1.0])[:, None, None]  # chain 1 off on run r2
    idata = az.from_dict(
        posterior={"alpha": rng.normal(size=(2, 200)), "sigma": rng.normal(size=(2, 200, 3)) + shift},
        coords={"run": ["r0", "r1", "r2"]},
        dims={"sigma": ["run"]},
    )
    model = SimpleNamespace(idata=idata, convergence=lambda: convergence_check(idata))
    assert model.convergence().passed is False
    import bayes_grpo.report.model_sections as model_sections

    drawn = []
    real = model_sections._rank_figure
    monkeypatch.setattr(model_sections, "_rank_figure", lambda idata, names: drawn.append(names) or real(idata, names))
    section = convergence_section(model)
    assert drawn == [["sigma[r2]"]], drawn
    caption = next(b.caption for b in section.blocks if b.kind == "image")
    assert "R-hat exceeds 1.01" in caption, caption
    # a fit that converged keeps the rank plots of the population-level variables
    ok = az.from_dict(posterior={"alpha": rng.normal(size=(2, 200)), "noise_d": rng.normal(size=(2, 200))})
    drawn.clear()
    convergence_section(SimpleNamespace(idata=ok, convergence=lambda: convergence_check(ok)))
    assert drawn == [["alpha", "noise_d"]], drawn
    # a long run id is cut in the panel's title (the table names it whole), a $ drawn as written
    long_id = "sweep_" + "x" * 80 + "_$LR_s2"
    drawn.clear()
    convergence_section(SimpleNamespace(idata=idata.assign_coords(run=["r0", "r1", long_id], groups="posterior"), convergence=lambda: convergence_check(idata)))
    (name,) = drawn[0]
    assert len(name) <= len("sigma[]") + 41 and name.startswith("sigma[sweep_") and name.endswith(r"_\$LR_s2]"), name
    plt.close("all")


def test_a_prediction_in_the_report_carries_the_warnings_of_the_fit_it_was_computed_from():
    # `predict FIT -o p.nc` keeps the fit's own warnings (an i.i.d. fit "too confident") in the
    # file's attr posterior_warnings; `report OTHER.nc --prediction p.nc` showed the prediction's
    # own warnings only, so the caveat of the fit behind its band was lost in the report
    import json

    from bayes_grpo.predict import forecast_run
    from bayes_grpo.predict.result import prediction_result

    t = np.arange(0.0, 31.0)
    y = 0.8 - 0.6 * np.exp(-t / 8.0) + 0.01 * np.sin(t)
    ds = forecast_run(t, y, np.arange(0.0, 61.0), likelihood="iid", n_draws=200)
    note = "b.nc: Residual lag-1 autocorrelation up to 0.78. What is computed from this i.i.d. fit is too confident."
    ds.attrs["posterior_warnings"] = json.dumps([note])
    summary = prediction_result(ds).summary
    assert f"Warning of the fit it was computed from: {note}" in summary, summary
    del ds.attrs["posterior_warnings"]
    assert "fit it was computed from" not in prediction_result(ds).summary
    plt.close("all")


def test_report_json_carries_the_fits_warnings_as_posterior_warnings_as_predict_does(tmp_path, monkeypatch, capsys):
    # `report fit.nc -o r.html --json` printed {"report": "r.html"} only: the saved fit's own
    # warnings (an i.i.d. fit too confident, a fit that did not converge), which predict /
    # stability / phase-diagram / forecast --prior give as posterior_warnings, were on stderr only
    import json

    import bayes_grpo.model.core as core
    from bayes_grpo.cli import main

    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    _stub_report_stages(monkeypatch)
    note = f"{posterior}: Residual lag-1 autocorrelation up to 0.78. What is computed from this i.i.d. fit is too confident."
    monkeypatch.setattr(core, "fitted_model_warnings", lambda model, path: [note])
    base = ["report", str(posterior), "-o", str(tmp_path / "r.html"), "--no-diagnose", "--no-stability", "--json"]
    assert main(base) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert "too confident" in captured.err  # still warned
    assert {k: out[k] for k in ("report", "posterior_warnings")} == {"report": str(tmp_path / "r.html"), "posterior_warnings": [note]}
    monkeypatch.setattr(core, "fitted_model_warnings", lambda model, path: [])
    assert main([*base, "--overwrite"]) == 0
    assert json.loads(capsys.readouterr().out)["posterior_warnings"] == []  # none: an empty list, as predict's


def test_two_phase_diagrams_in_one_report_are_captioned_by_their_llm_and_momentum():
    # a fit of two LLMs (or of one LLM at two momenta) gets one diagram per setting in the report:
    # both were titled and captioned "phase diagram", told apart only by their summaries
    from bayes_grpo.checks.stability import phase_diagram_from_draws

    draws = np.random.default_rng(0).lognormal(np.log(20.0), 0.1, 200)
    diagrams = [
        phase_diagram_from_draws(draws, momentum=mu, momentum_convention="ema", label=llm, k_refs=[0, 1, 2], n_learning_rates=6)
        for llm, mu in [("llm <A>", 0.9), ("llm <A>", 0.5), ("llm B", 0.9)]
    ]
    html = render_html(build_sections(runset=_runset(), stability=diagrams))
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html.split('data-section="stability"')[1].split("</section>")[0])
    titles = [caption.split(":")[0] for caption in captions]
    assert titles == [
        "phase diagram of llm &lt;A&gt; at momentum 0.9 (ema)",
        "phase diagram of llm &lt;A&gt; at momentum 0.5 (ema)",
        "phase diagram of llm B at momentum 0.9 (ema)",
    ], captions
    for title in titles:  # the check's heading names it too
        assert f"</span>{title}</h3>" in html


def test_the_phase_diagrams_caption_says_what_its_contours_dashed_line_and_crosses_are():
    # the caption only repeated the title: nothing said what the white 0.1 / 0.5 / 0.9 contours,
    # the red dashed closed-form line and the crosses (the fitted runs' settings) were
    from bayes_grpo.checks.stability import phase_diagram_from_draws

    draws = np.random.default_rng(0).lognormal(np.log(20.0), 0.1, 200)
    observed = pd.DataFrame({"learning_rate": [1e-3, 2e-3], "k_ref": [1, 2]})
    diagram = phase_diagram_from_draws(
        draws, momentum=0.9, momentum_convention="ema", k_refs=[0, 1, 2], n_learning_rates=6, observed=observed
    )
    html = render_html(build_sections(runset=_runset(), stability=[diagram]))
    (caption,) = re.findall(r"<figcaption>(.*?)</figcaption>", html.split('data-section="stability"')[1].split("</section>")[0])
    assert caption.startswith("phase diagram at momentum 0.9 (ema): "), caption
    for said in (
        "white contours at probability 0.1, 0.5 and 0.9",
        "red dashed line (left): where the closed-form criterion gives P(unstable) = 0.5",
        "orange crosses: the settings (learning rate, K_ref) of the observed runs (2)",
    ):
        assert said in caption, caption
    # no runs marked, no crosses said
    bare = phase_diagram_from_draws(draws, momentum=0.9, momentum_convention="ema", k_refs=[0, 1, 2], n_learning_rates=6)
    assert "crosses" not in render_check(bare).images[0][0]


def test_a_diagnostics_figure_caption_says_what_is_drawn_not_only_its_title():
    # "advantage degeneracy: run-a" over a figure of dots, lines, a dotted and a red vertical line
    from matplotlib.figure import Figure

    from bayes_grpo.diagnostics._result import assessed

    result = assessed(
        "advantage_degeneracy", "run-a", detected=True, summary="Ties.", onset_step=120.0,
        strength_=None, evidence={}, figure=Figure(figsize=(2, 1)),
    )
    ((caption, png),) = render_check(result).images
    assert png and caption.startswith("advantage degeneracy: run-a: the share of groups"), caption
    assert caption.endswith("; red vertical line: the onset step 120."), caption


def test_a_run_without_a_trend_shows_no_trend_for_its_r2_not_a_huge_negative_number():
    # a flat run's R^2 is its misfit over its noise alone: the per-run table printed r2_raw
    # -4095 and r2_smoothed -5.3e4 as if they judged the law
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.report.model_sections import fit_section

    runs = _runset()
    draws = xr.DataArray(np.broadcast_to(runs["reward"].values, (3, *runs["reward"].shape)), dims=("sample", "run", "step"))
    summary = pd.DataFrame(
        {
            "model": ["tiny"] * 3,
            "zeta": [0.8, 0.8, 0.8],
            "r2_raw": [0.95, -4095.0, 0.9],
            "r2_noise_ceiling": [0.98, 0.0, 0.97],
            "r2_smoothed": [0.97, -5.3e4, 0.96],
            "has_trend": [True, False, True],
        },
        index=pd.Index(["run0", "run1", "run2"], name="run"),
    )
    model = SimpleNamespace(
        runset=runs,
        settings={"parameterisation": "mechanistic"},
        run_summary=lambda: summary,
        group_summary=lambda: pd.DataFrame({"p_star": [0.8]}),
        fitted_trajectory_draws=lambda: draws,
    )
    blocks = fit_section(model).blocks
    per_run = [b.content for b in blocks if b.kind == "table"][-1]
    assert "-4095" not in per_run and "-5.3e+04" not in per_run and "-5.3e4" not in per_run, per_run
    row = per_run.split("<th>run1</th>")[1].split("</tr>")[0]
    assert row.count("<td>no trend</td>") == 3, row
    assert "<td>0.95</td>" in per_run and "<td>0.97</td>" in per_run  # the runs with a trend keep theirs
    said = " ".join(b.content for b in blocks if b.kind == "text")
    assert "Runs without a visible trend" in said and "run1" in said and '"no trend"' in said, said
    # a run without a visible trend can have a small positive R^2 (q05-g4-r3 of the public
    # wordle logs: raw 0.139, smoothed 0.52), which the text called "(large negative)"
    summary.loc["run1", ["r2_raw", "r2_smoothed"]] = [0.139, 0.52]
    said = " ".join(b.content for b in fit_section(model).blocks if b.kind == "text")
    assert "its (large negative) value" not in said and "large and negative where the run is flat" in said, said
    plt.close("all")


def test_the_report_gives_the_units_of_the_coefficients_and_of_d():
    # M_eff 0.95, C_eff 0.0999, K_eff 1.03e-4 and D 0.00235 were printed in the tables and on the
    # forest plots' axes with no unit anywhere (time in steps? D a variance or an intensity?)
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.core import load_fitted_model
    from bayes_grpo.report.model_sections import fit_section, posterior_section

    iid, ssm = GRPODynamicsModel(likelihood="iid"), GRPODynamicsModel(likelihood="state_space")
    assert iid.coefficient_units()["D"] == "reward^2" and ssm.coefficient_units()["D"] == "reward^2 per step^3"
    for model in (iid, ssm):
        units = model.coefficient_units()
        assert (units["M_eff"], units["C_eff"], units["K_eff"], units["zeta"]) == ("dimensionless", "per step", "per step^2", "dimensionless")
    with pytest.warns(UserWarning):  # the shipped fit's i.i.d. residuals wander: warned on loading
        tiny = load_fitted_model(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    said = " ".join(b.content for b in fit_section(tiny).blocks if b.kind == "text")
    assert "Units (time in optimizer steps, reward in its logged unit): p_star reward; a per step^2; M_eff dimensionless; " \
        "C_eff per step; K_eff per step^2; zeta dimensionless; D reward^2 (sigma^2 G^alpha" in said, said
    captions = [b.caption for b in posterior_section(tiny).blocks if b.kind == "image"]
    assert "(time in optimizer steps)" in captions[0] and captions[1].endswith("D in reward^2."), captions
    plt.close("all")


def test_report_json_gives_each_sections_verdicts_as_the_html_shows_them(tmp_path, monkeypatch, capsys):
    # `report fit.nc -o r.html --json` printed the path (and the fit's warnings) only: whether the
    # fit converged, G-invariance held or a run was flagged had to be read in the HTML, where
    # `fit --json` and `diagnose --json` give their verdicts
    import json

    import bayes_grpo.report.build as build
    from bayes_grpo.cli import main

    real_write_report = build.write_report
    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    _stub_report_stages(monkeypatch)
    monkeypatch.setattr(build, "write_report", real_write_report)
    base = ["report", str(posterior), "-o", str(tmp_path / "r.html"), "--no-diagnose", "--no-stability", "--invariance", "--json"]
    assert main(base) == 0
    sections = json.loads(capsys.readouterr().out)["sections"]
    assert [s["key"] for s in sections] == list(SECTION_KEYS)
    by_key = {s["key"]: s for s in sections}
    assert by_key["invariance"]["available"] and by_key["invariance"]["checks"] == [
        {"name": "g_invariance", "title": "g invariance", "verdict": "not assessable", "passed": None, "summary": "stub"}
    ]
    assert not by_key["diagnostics"]["available"] and "report --no-diagnose" in by_key["diagnostics"]["absent_reason"]
    assert by_key["overview"]["available"] and by_key["overview"]["checks"] == []
    # the same from the Python API: what write_report wrote, pass and flagged as the badges
    verdicts: list = []
    write_report(tmp_path / "w.html", runset=_runset(), diagnostics=[_check("d", True), _check("e", False)], verdicts=verdicts)
    (diagnostics,) = [s for s in verdicts if s["key"] == "diagnostics"]
    assert [(c["name"], c["verdict"], c["passed"]) for c in diagnostics["checks"]] == [("d", "pass", True), ("e", "flagged", False)]
    assert diagnostics["checks"][0]["summary"] == "summary of d <b>escaped</b>"  # the text, not its HTML
    plt.close("all")


def test_forest_plot_tick_labels_do_not_overlap_beside_long_run_labels():
    # run labels of 80 characters (the cut length) at ArviZ's 15 pt left each panel a 1.5 inch
    # strip where six x ticks of 0.95165 ran into each other ("0.951655170951 75")
    import xarray as xr

    from bayes_grpo.report.model_sections import _forest_figure
    from bayes_grpo.report.sections import LABEL_WIDTH, short_labels

    rng = np.random.default_rng(0)
    runs = short_labels([f'Qwen<2.5> & "tiny" G=4 | run_{"x" * 120}_seed{i}' for i in range(4)], 2 * LABEL_WIDTH)
    post = xr.Dataset(
        {"M_eff": (("chain", "draw", "run"), 0.9517 + 2e-5 * rng.standard_normal((2, 100, 4)))},
        coords={"run": runs},
    )
    fig = _forest_figure(post, ["M_eff"], width=11)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
    lo, hi = ax.get_xlim()
    inside = [b for b, t in zip(boxes, ax.get_xticks()) if lo <= t <= hi]
    assert len(inside) >= 2
    for left, right in zip(inside, inside[1:]):
        assert left.x1 < right.x0, [(b.x0, b.x1) for b in inside]
    plt.close(fig)


@pytest.mark.browser
def test_a_long_run_id_wraps_in_the_tables_instead_of_pushing_the_numbers_off_the_page(tmp_path):
    # a run id of 130 characters without a space was one line as wide as the page in every
    # table's row labels: each number of the run was beyond a horizontal scroll
    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    steps = np.arange(1, 41)
    long_id = "run_" + "x" * 120 + "_seed0"
    runs = make_runset(
        {long_id: pd.DataFrame({"reward": 0.8 - 0.7 * np.exp(-steps / 10.0)}, index=steps)},
        {long_id: {"model": "tiny", "group_size": 4}},
    )
    path = write_report(tmp_path / "report.html", runset=runs)
    dom = open_in_chromium(path, tmp_path / "report.png")
    widest = int(re.search(r'data-widest-row-label="(\d+)"', dom).group(1))
    assert 100 < widest < 400, widest
    assert long_id in dom  # whole, only wrapped


def test_the_overview_of_a_one_run_set_says_1_run():
    # a report of one run read "1 runs, 1 model(s), group sizes [4]."
    from bayes_grpo.report.sections import overview_section

    html = render_html([overview_section(_runset().isel(run=[0]))])
    assert "1 run, 1 model, group size 4." in html and "1 runs" not in html
    assert "3 runs, 1 model" in render_html([overview_section(_runset())])
    plt.close("all")


def test_the_per_model_and_g_r2_leaves_out_runs_without_a_trend():
    # a group of two runs, one flat (r2_raw -125), had the median -62 in `fit`'s table and the
    # report's "Per model and G": the flat run's R^2 measures nothing of the law
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.report.model_sections import fit_section

    summary = pd.DataFrame(
        {
            "model": ["tiny"] * 4,
            "group_size": [4, 4, 16, 16],
            "p_star": [0.8] * 4, "a": [1e-3] * 4, "M_eff": [0.95] * 4, "C_eff": [0.1] * 4, "K_eff": [1e-3] * 4,
            "zeta": [0.8] * 4, "D": [2e-3] * 4,
            "r2_raw": [0.95, -125.0, -300.0, -4095.0],
            "r2_noise_ceiling": [0.98, 0.0, 0.0, 0.0],
            "r2_smoothed": [0.97, -1392.0, -2000.0, -5.3e4],
            "has_trend": [True, False, False, False],
        },
        index=pd.Index(["run0", "run1", "run2", "run3"], name="run"),
    )
    model = GRPODynamicsModel()
    model.run_summary = lambda: summary
    groups = model.group_summary()
    assert groups.loc[("tiny", 4), "r2_raw"] == 0.95 and groups.loc[("tiny", 4), "r2_smoothed"] == 0.97
    assert np.isnan(groups.loc[("tiny", 16), "r2_raw"]) and groups.loc[("tiny", 16), "n_runs"] == 2
    # the R^2 of G 4 is of 1 of its 2 runs: the table says so (n_runs_r2), and its caption
    # ("the median of its runs' values (n_runs runs)") said it was of both
    assert groups.loc[("tiny", 4), "n_runs"] == 2 and groups.loc[("tiny", 4), "n_runs_r2"] == 1
    assert groups.loc[("tiny", 16), "n_runs_r2"] == 0
    assert groups.loc[("tiny", 16), "zeta"] == 0.8  # the other columns as before
    runs = _runset()
    draws = xr.DataArray(np.broadcast_to(runs["reward"].values, (3, *runs["reward"].shape)), dims=("sample", "run", "step"))
    shown = SimpleNamespace(
        runset=runs, settings={"parameterisation": "mechanistic"}, run_summary=lambda: summary,
        group_summary=model.group_summary, fitted_trajectory_draws=lambda: draws,
    )
    per_group = [b.content for b in fit_section(shown).blocks if b.kind == "table"][0]
    assert "-62" not in per_group and "-2.1e+04" not in per_group, per_group
    g16 = per_group.split("<th>16</th>")[1].split("</tr>")[0]
    assert g16.count("<td>no trend</td>") == 3, g16
    assert "n_runs_r2" in per_group
    said = " ".join(b.content for b in fit_section(shown).blocks if b.kind == "text")
    assert "its R^2 the median over its runs with a visible trend only (n_runs_r2 runs)" in said, said
    plt.close("all")


def test_an_absent_section_of_the_report_verb_names_the_report_option_that_adds_it(tmp_path, monkeypatch, capsys):
    # `bayes-grpo report fit.nc -o r.html` said "Not in this report: no invariance test was run
    # (bayes-grpo invariance, ...)" and "no law comparison was run (bayes-grpo compare)": those
    # verbs' results cannot be given to the report; its own --invariance / --compare run them
    import json

    import bayes_grpo.report.build as build
    from bayes_grpo.cli import main

    write_report = build.write_report
    _stub_report_stages(monkeypatch)
    monkeypatch.setattr(build, "write_report", write_report)  # the stages stubbed, the HTML written
    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    argv = ["report", str(posterior), "-o", str(tmp_path / "r.html"), "--no-diagnose", "--no-stability", "--json"]
    assert main(argv) == 0
    why = {s["key"]: s.get("absent_reason") for s in json.loads(capsys.readouterr().out)["sections"]}
    assert "report --invariance" in why["invariance"] and "bayes-grpo invariance" not in why["invariance"], why
    assert "report --compare" in why["comparison"] and "(bayes-grpo compare)" not in why["comparison"], why
    assert "--no-diagnose" in why["diagnostics"] and "--no-stability" in why["stability"], why
    assert "report --prediction" in why["predictions"], why
    html = (tmp_path / "r.html").read_text()
    assert "Not in this report: not asked: report --invariance" in html
    assert main([*argv[:3], str(tmp_path / "r2.html"), "--no-diagnose", "--no-stability", "--compare", "--json"]) == 0
    why = {s["key"]: s.get("absent_reason") for s in json.loads(capsys.readouterr().out)["sections"]}
    assert why["comparison"] is None and "report --invariance" in why["invariance"], why  # asked: in the report


def test_the_forest_plots_of_a_one_run_fit_name_the_run_and_the_llm():
    # ArviZ squeezes a dimension of length 1 away with its label: the report of a one-run fit
    # drew rows labelled "M_eff", "zeta" and "noise_d", naming neither the run nor the LLM
    import xarray as xr

    from bayes_grpo.report.model_sections import _forest_figure

    rng = np.random.default_rng(0)
    run = "sim G=16 | sim-G16-lr0.001-k1-s0"
    post = xr.Dataset(
        {
            "M_eff": (("chain", "draw", "run"), 0.95 + 1e-3 * rng.standard_normal((2, 50, 1))),
            "zeta": (("chain", "draw", "run"), 0.84 + 0.01 * rng.standard_normal((2, 50, 1))),
            "noise_d": (("chain", "draw", "model"), 2e-3 + 1e-4 * rng.standard_normal((2, 50, 1))),
            "alpha": (("chain", "draw"), 1.0 + 0.1 * rng.standard_normal((2, 50))),
        },
        coords={"run": [run], "model": ["sim"]},
    )
    fig = _forest_figure(post, ["M_eff", "zeta"], width=11)
    assert [[t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes] == [[f"M_eff[{run}]"], [f"zeta[{run}]"]]
    plt.close(fig)
    fig = _forest_figure(post, ["noise_d", "alpha"], width=7)
    assert [[t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes] == [["noise_d[sim]"], ["alpha"]]
    plt.close(fig)
    # two runs keep ArviZ's own labels
    two = xr.Dataset({"M_eff": (("chain", "draw", "run"), 0.95 + 1e-3 * rng.standard_normal((2, 50, 2)))}, coords={"run": ["a", "b"]})
    fig = _forest_figure(two, ["M_eff"], width=11)
    assert sorted(t.get_text() for t in fig.axes[0].get_yticklabels()) == ["M_eff[a]", "[b]"]
    plt.close(fig)


def test_the_forest_plot_of_a_narrow_posterior_reads_its_values_on_the_ticks_not_an_offset():
    # a one-run fit's M_eff (0.951743, sd 3e-6) was drawn on ticks "2 3 4 5 6" with an offset
    # "1e-5+9.517e-1" in the corner of the axis
    import xarray as xr

    from bayes_grpo.report.model_sections import _forest_figure

    rng = np.random.default_rng(0)
    post = xr.Dataset({"M_eff": (("chain", "draw", "run"), 0.951743 + 3e-6 * rng.standard_normal((2, 200, 1)))}, coords={"run": ["r"]})
    fig = _forest_figure(post, ["M_eff"], width=11)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.xaxis.get_offset_text().get_text() == ""
    lo, hi = ax.get_xlim()
    shown = [(t, float(label.get_text().replace("\N{MINUS SIGN}", "-"))) for t, label in zip(ax.get_xticks(), ax.get_xticklabels()) if lo <= t <= hi]
    assert len(shown) >= 2 and all(abs(v - t) < 1e-9 for t, v in shown), shown
    plt.close(fig)


def test_the_overview_counts_the_runs_of_unknown_g_instead_of_listing_no_group_size():
    # a fitted run set without G (fit --default group_size=8) read "2 runs, 1 model(s), group
    # sizes []."; one of known and unknown G listed the known ones as if they were all
    from bayes_grpo.report.sections import overview_section

    runs = _runset()
    unknown = runs.assign_coords(group_size=("run", [np.nan] * 3))
    assert "3 runs, 1 model, group size unknown for every run." in render_html([overview_section(unknown)])
    assert "1 run, 1 model, group size unknown." in render_html([overview_section(unknown.isel(run=[0]))])
    some = runs.assign_coords(group_size=("run", [4.0, np.nan, 16.0]))
    assert "3 runs, 1 model, group sizes 4 and 16 (1 run of unknown G)." in render_html([overview_section(some)])
    assert "group sizes 4 and 16." in render_html([overview_section(runs)])
    plt.close("all")


def test_the_overview_says_its_table_is_in_run_order_and_lists_the_group_sizes_as_text():
    # it said the runs were "grouped by model and group size G" over a table in the run set's
    # order, and printed the group sizes as a Python list ("group sizes [4, 16]")
    from bayes_grpo.report.sections import overview_section

    runs = _runset().assign_coords(group_size=("run", [16.0, 4.0, 16.0]))
    overview = overview_section(runs)
    assert "grouped" not in overview.intro and "one row per run in the run set's order" in overview.intro
    assert "a panel per model and group size G" in overview.intro
    html = render_html([overview])
    assert "3 runs, 1 model, group sizes 4 and 16." in html and "[" not in html.split("group sizes")[1][:12]
    table = next(b.content for b in overview.blocks if b.kind == "table")
    at = [table.index(f">{r}<") for r in runs["run"].values]
    assert at == sorted(at)  # the table is in the run set's order (G 16, 4, 16), as the intro says
    plt.close("all")


def test_the_overview_gives_each_runs_momentum_convention():
    # the overview of an SGD run (heavy-ball momentum 0.9) beside Adam runs (beta1 0.9, EMA) gave
    # both "momentum 0.9", which are steps a factor 1 / (1 - mu) apart
    from bayes_grpo.report.sections import overview_section

    runs = _runset().assign_coords(momentum=("run", [0.9, 0.9, 0.9]), momentum_convention=("run", ["ema", "heavy_ball", ""]))
    html = render_html([overview_section(runs)])
    table = re.search(r'<table class="dataframe data">.*?</table>', html, re.S).group(0)
    header = re.findall(r'<th(?: class="text")?>([^<]*)</th>', table.split("</thead>")[0])
    assert "convention" in header and header.index("convention") == header.index("momentum") + 1, header
    rows = {r: re.findall(r'<td(?: class="text")?>([^<]*)</td>', row) for r, row in re.findall(r"<th>(run\d)</th>(.*?)</tr>", table, re.S)}
    at = header.index("convention") - 1  # the first header cell is the row labels' (a th in each row)
    assert [rows[f"run{i}"][at] for i in range(3)] == ["ema", "heavy_ball", ""], rows
    plt.close("all")


def test_the_run_labels_of_a_fit_give_the_g_it_used_as_its_tables_do():
    # a fit of runs without G (`fit --default group_size=8`) titled its per-run panels and forest
    # rows "sim G=? | run" beside tables (run_summary) giving group_size 8
    from types import SimpleNamespace

    from bayes_grpo.report.model_sections import _labels

    ds = _runset().assign_coords(group_size=("run", [np.nan, np.nan, 16.0]))
    data = SimpleNamespace(run_ids=["run0", "run1", "run2"], group_size=np.array([8.0, 8.0, 16.0]))
    assert _labels(SimpleNamespace(runset=ds, data=data)) == ["tiny G=8 | run0", "tiny G=8 | run1", "tiny G=16 | run2"]
    # without the fit's data (or of other runs) the run set's own G, unknown as "?"
    assert _labels(SimpleNamespace(runset=ds)) == ["tiny G=? | run0", "tiny G=? | run1", "tiny G=16 | run2"]
    other = SimpleNamespace(run_ids=["x", "y", "z"], group_size=np.array([8.0, 8.0, 8.0]))
    assert _labels(SimpleNamespace(runset=ds, data=other))[0] == "tiny G=? | run0"


def test_the_overview_says_which_settings_the_fit_took_from_its_defaults_for_runs_that_log_none():
    # two public runs fitted with `fit --default group_size=4 --default momentum=0.9 ...`: the
    # report's overview read "group size unknown for every run" with blank G, momentum and K_ref
    # columns and a "(model unknown)  G=?" panel, while the fit per run below was at G = 4,
    # momentum 0.9 (ema), K_ref 1, with no word in the overview of where those came from
    from types import SimpleNamespace

    from bayes_grpo.report.build import fit_defaults_notes
    from bayes_grpo.report.sections import overview_section
    from bayes_grpo.runset import make_runset

    steps = np.arange(1, 31)
    runs = make_runset(
        {r: pd.DataFrame({"reward": np.linspace(0.2, 0.8, 30)}, index=steps) for r in ("a", "b")},
        {"a": {"learning_rate": 5e-5}, "b": {"learning_rate": 5e-5, "group_size": 8, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}},
    )
    model = SimpleNamespace(
        model_config={"hyperparameter_defaults": {"group_size": 4, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}},
        parameterisation="mechanistic",
        data=SimpleNamespace(run_ids=["b", "a"], momentum=np.array([0.9, 0.9])),
    )
    notes = fit_defaults_notes(model, runs)
    assert len(notes) == 1 and "group_size=4 for runs ['a']" in notes[0] and "'b'" not in notes[0], notes
    texts = [b.content for b in overview_section(runs, notes=notes).blocks if b.kind == "text"]
    assert any(t.startswith("Note: the table gives the settings as logged; settings the run set does not have") for t in texts), texts
    # a fit without defaults, or no fit: nothing to say
    assert fit_defaults_notes(SimpleNamespace(model_config={}, data=model.data), runs) == []
    assert fit_defaults_notes(None, runs) == []


def test_the_fit_tables_show_an_unknown_group_size_as_fit_prints_it():
    # a fit of runs that log no G: `fit` printed G "?" (cli/fit._g_as_text), the report's "Per
    # model and G" and "Per run" tables a blank G (a group without a G, beside figures labelled
    # "G=?"); one helper now, runset.schema.group_sizes_as_text, for both
    from types import SimpleNamespace

    import xarray as xr

    from bayes_grpo.report.model_sections import fit_section
    from bayes_grpo.runset.schema import group_sizes_as_text

    runs = _runset().assign_coords(group_size=("run", np.array([4.0, np.nan, 16.0])))
    draws = xr.DataArray(np.broadcast_to(runs["reward"].values, (3, *runs["reward"].shape)), dims=("sample", "run", "step"))
    per_run = pd.DataFrame(
        {"model": ["tiny"] * 3, "group_size": [4, np.nan, 16], "p_star": [0.8, 0.7, 0.9], "has_trend": [True] * 3},
        index=pd.Index(["run0", "run1", "run2"], name="run"),
    )
    groups = per_run.groupby(["model", "group_size"], dropna=False)[["p_star"]].median()
    model = SimpleNamespace(
        runset=runs,
        settings={"parameterisation": "mechanistic"},
        run_summary=lambda: per_run,
        group_summary=lambda: groups,
        fitted_trajectory_draws=lambda: draws,
        data=SimpleNamespace(notes=[]),
    )
    tables = [b.content for b in fit_section(model).blocks if b.kind == "table"]
    plt.close("all")
    by_group, by_run = tables[:2]
    assert "<th>?</th>" in by_group and "<th>4</th>" in by_group and "<th>16</th>" in by_group, by_group
    assert "<td>?</td>" in by_run and "<td>16</td>" in by_run, by_run
    # the helper: an index level, a column, or both; the values left alone
    text = group_sizes_as_text(groups)
    assert list(text.index.get_level_values("group_size")) == ["4", "16", "?"]
    assert list(text.index.get_level_values("model")) == ["tiny"] * 3 and text["p_star"].tolist() == groups["p_star"].tolist()
    assert group_sizes_as_text(per_run)["group_size"].tolist() == ["4", "?", "16"]
    assert per_run["group_size"].isna().sum() == 1  # a copy
    single = group_sizes_as_text(pd.DataFrame({"x": [1, 2]}, index=pd.Index([4.5, np.nan], name="group_size")))
    assert list(single.index) == ["4.5", "?"]


def test_the_report_of_a_saved_fit_has_its_posterior_predictive_checks_after_the_posteriors_unless_no_ppc(tmp_path, monkeypatch, capsys):
    # the posterior predictive checks (bands per G, residual autocorrelation, stationary variance)
    # were Python only: `bayes-grpo report` had no section for them
    import json

    import bayes_grpo.report.build as build
    from bayes_grpo.cli import main

    real_write_report = build.write_report
    calls = _stub_report_stages(monkeypatch)
    monkeypatch.setattr(build, "write_report", real_write_report)
    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    argv = ["report", str(posterior), "-o", str(tmp_path / "r.html"), "--no-diagnose", "--no-stability", "--seed", "5", "--json"]
    assert main(argv) == 0
    sections = json.loads(capsys.readouterr().out)["sections"]
    keys = [s["key"] for s in sections]
    assert keys.index("ppc") == keys.index("posteriors") + 1 and keys.index("invariance") == keys.index("ppc") + 1
    ppc = next(s for s in sections if s["key"] == "ppc")
    assert ppc["available"] and ppc["title"] == "Posterior predictive checks"
    assert [(c["name"], c["title"], c["verdict"]) for c in ppc["checks"]] == [
        ("ppc_trajectory_bands", "Predictive-band coverage per G", "pass"),
        ("stationary_variance", "Stationary variance at the plateau", "not assessable"),
    ]
    assert calls["ppc"] == {"seed": 5}  # the report's --seed
    calls.clear()
    assert main([*argv[:3], str(tmp_path / "r2.html"), *argv[4:], "--no-ppc"]) == 0
    ppc = next(s for s in json.loads(capsys.readouterr().out)["sections"] if s["key"] == "ppc")
    assert not ppc["available"] and "report --no-ppc" in ppc["absent_reason"], ppc
    assert "ppc" not in calls
    assert "Not in this report: left out by report --no-ppc" in (tmp_path / "r2.html").read_text()


def test_a_report_written_without_posterior_predictive_checks_says_how_to_add_them():
    sections = {s.key: s for s in build_sections(runset=_runset())}
    assert not sections["ppc"].available and "no fitted posterior was given" in sections["ppc"].absent_reason


@pytest.mark.browser
def test_the_ppc_section_of_the_shipped_fit_shows_a_band_figure_per_g_and_the_residual_check_once(tmp_path, capsys):
    # models/tiny.nc is an i.i.d. fit: its residual autocorrelation check is the fit section's
    # (the PPC section points there rather than repeat it); the band figures, one per G, render
    from bayes_grpo.cli import main

    tiny = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    path = tmp_path / "r.html"
    assert main(["report", str(tiny), "-o", str(path), "--no-diagnose", "--no-stability"]) == 0
    html = path.read_text()
    assert html.count('data-check="ppc_residual_autocorrelation"') == 1
    ppc = html.split('data-section="ppc"', 1)[1].split('data-section="invariance"', 1)[0]
    assert "Residual autocorrelation: under Fit per run above" in ppc
    assert "tiny-gpt2 G=16: 90% posterior predictive band of each run" in ppc and "tiny-gpt2 G=4: 90%" in ppc
    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    dom = open_in_chromium(path, tmp_path / "report.png")
    ppc = dom.split('data-section="ppc"', 1)[1].split('data-section="invariance"', 1)[0]
    assert ppc.startswith(' data-available="yes"')
    assert ppc.count('data-rendered="yes"') == 2 and 'data-rendered="no"' not in ppc


def test_posterior_predictive_checks_a_fit_cannot_give_are_not_assessable_in_the_report_not_a_failed_report():
    from types import SimpleNamespace

    from bayes_grpo.report.build import ppc_results

    def no_coefficients(**kw):
        raise ValueError("the mechanistic model needs a finite learning_rate; got nan")

    fit = SimpleNamespace(runset=_runset(), coefficient_draws=no_coefficients)
    (result,) = ppc_results(fit)
    assert result.passed is None and result.summary == "Not assessable: run run0: the mechanistic model needs a finite learning_rate; got nan"
    (section,) = [s for s in build_sections(runset=_runset(), ppc=[result]) if s.key == "ppc"]
    assert section.available and section.blocks[0].content.title == "Posterior predictive checks"


def _ingested_runs_of_unknown_g(tmp_path):
    """Two CSV logs ingested whose names read like G = 4 and that give neither G nor the model."""
    from bayes_grpo.runset.ingest import load_runs

    steps = np.arange(1, 31)
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(2):
        reward = 0.8 - 0.6 * np.exp(-steps / 8.0) + 0.01 * np.sin(steps + i)
        pd.DataFrame({"step": steps, "reward": reward}).to_csv(logs / f"sweep_g4_s{i}.csv", index=False)
    # and two sources not ingested: a run too short, a log compressed by a program not read here
    pd.DataFrame({"step": [1, 2], "reward": [0.1, 0.2]}).to_csv(logs / "short_g4.csv", index=False)
    (logs / "later_g4.csv.lz4").write_bytes(bytes(range(64)))
    with pytest.warns(UserWarning, match="unknown for 2 runs|not ingested"):  # the notes, the rejections
        return load_runs(logs)


def test_the_overview_shows_the_notes_of_the_ingest_that_read_the_run_set(tmp_path):
    # `bayes-grpo ingest` printed "note: group size G unknown for 2 runs whose names read like
    # one ..." and "note: G and model unknown for 2 runs ...; give them in a manifest"; the report
    # of those runs said none of it, so a reader of the report never learnt where G was missing
    from bayes_grpo.report.sections import overview_section
    from bayes_grpo.runset.ingest import ingest_notes

    runs = _ingested_runs_of_unknown_g(tmp_path)
    notes = ingest_notes(runs)
    assert len(notes) == 2, notes
    html = render_html([overview_section(runs, fitted=False)])
    overview = html.split('data-section="overview"')[1].split("</section>")[0]
    shown = re.findall(r'<p class="warning">Note of the ingest: ([^<]*)</p>', overview)
    assert shown == [n.replace("'", "&#39;") for n in notes], shown
    # and the sources not ingested, as load_runs warned them
    rejected = re.findall(r'<p class="warning">Not ingested: ([^<]*)</p>', overview)
    assert len(rejected) == 2, rejected
    assert any("short_g4.csv" in r and "only 2 finite reward values" in r for r in rejected), rejected
    assert any(r.startswith(f"{tmp_path / 'logs' / 'later_g4.csv.lz4'}: a log compressed with lz4") for r in rejected), rejected
    # under the counts, before the table
    assert overview.index("2 runs, 0 models") < overview.index("Note of the ingest") < overview.index("<table")
    # a run set no ingest read (simulated, make_runset) has no ingest to speak of
    assert "Note of the ingest" not in render_html([overview_section(_runset().assign_coords(model=("run", ["", "", ""])))])
    plt.close("all")


@pytest.mark.browser
def test_the_ingest_notes_of_the_overview_are_shown_in_headless_chromium(tmp_path):
    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    runs = _ingested_runs_of_unknown_g(tmp_path)
    path = write_report(tmp_path / "report.html", runset=runs)
    dom = open_in_chromium(path, tmp_path / "report.png")
    overview = dom.split('data-section="overview"')[1].split("</section>")[0]
    assert overview.count('<p class="warning">Note of the ingest: ') == 2, overview[:2000]
    assert overview.count('<p class="warning">Not ingested: ') == 2, overview[:2000]
    assert "whose names read like one (G = 4: sweep_g4_s0, sweep_g4_s1)" in overview
    assert 'data-sections-overflowing="0"' in dom


def _ingested_runs_with_notes_on_each(tmp_path):
    """Three CSV logs ingested: one without a training reward (its evaluation metric taken as the
    reward), one on a learning-rate schedule that also logs a text field (two notes), one the
    ingest says nothing of; with the per-run warnings ``bayes-grpo ingest`` prints."""
    from bayes_grpo.runset import runset_warnings
    from bayes_grpo.runset.ingest import load_runs

    steps = np.arange(1, 31)
    reward = 0.8 - 0.6 * np.exp(-steps / 8.0)
    logs = tmp_path / "logs"
    logs.mkdir()
    pd.DataFrame({"step": steps, "eval/reward": reward}).to_csv(logs / "held_out.csv", index=False)
    pd.DataFrame(
        {"step": steps, "reward": reward + 0.01 * np.sin(steps), "learning_rate": np.linspace(1e-6, 1e-5, 30), "phase": "warm"}
    ).to_csv(logs / "scheduled.csv", index=False)
    pd.DataFrame({"step": steps, "reward": reward + 0.01 * np.cos(steps)}).to_csv(logs / "quiet.csv", index=False)
    with pytest.warns(UserWarning, match="unknown for 3 runs"):  # G and model: a note of the run set
        runs = load_runs(logs)
    warned = runset_warnings(runs)
    assert sorted(warned) == ["held_out", "scheduled"] and len(warned["scheduled"]) == 2, warned
    return runs


def _notes_shown(html: str) -> list[tuple[str, str, str]]:
    """The rows (run, log, note) of the overview's table of notes on each run, as written."""
    import html as html_lib

    overview = html.split('data-section="overview"')[1].split("</section>")[0]
    if "Notes on each run" not in overview:
        return []
    table = overview.split("Notes on each run", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*</tr>", table, flags=re.S)
    return [tuple(html_lib.unescape(c) for c in row) for row in rows]


def test_the_overview_shows_each_note_the_ingest_made_on_a_run_with_its_log_named_once(tmp_path):
    # `bayes-grpo ingest` printed "held_out.csv: no training reward in the log; using the
    # evaluation metric 'eval/reward' as the reward curve (held-out accuracy, not the training
    # reward)"; the report showed the run set's notes and rejections but none of its notes on each
    # run, so its reader never learnt that a run's "reward" was a held-out evaluation metric
    from bayes_grpo.report.sections import overview_section
    from bayes_grpo.runset import runset_warnings

    runs = _ingested_runs_with_notes_on_each(tmp_path)
    html = render_html([overview_section(runs, fitted=False)])
    logs = tmp_path / "logs"
    shown = _notes_shown(html)
    # every note, in the order of the runs and of the notes; each run's log said on its first row
    expected = []
    for run_id in ("held_out", "scheduled"):
        log = str(logs / f"{run_id}.csv")
        for i, note in enumerate(runset_warnings(runs)[run_id]):
            assert note.startswith(f"{log}: ")
            expected.append((run_id if i == 0 else "", log if i == 0 else "", note.removeprefix(f"{log}: ")))
    assert shown == expected, shown
    assert any("follows a schedule (1e-06 to 1e-05)" in note for *_, note in shown)
    assert any("text fields not kept as metrics: ['phase']" in note for *_, note in shown)
    overview = html.split('data-section="overview"')[1].split("</section>")[0]
    assert "Notes on each run (3 notes on 2 runs)" in overview
    # below the table of runs, above the reward curves
    assert overview.index("<table") < overview.index("Notes on each run") < overview.index("<img")
    # the reward taken from an evaluation metric is also a warning under the counts, before the
    # run set's notes: it changes what every section says of that run's reward
    (first, *_) = re.findall(r'<p class="warning">([^<]*)</p>', overview)
    assert first.startswith("Reward from an evaluation metric: the log of 1 run has no training reward"), first
    assert "(&#39;eval/reward&#39; for held_out)" in first and "scheduled" not in first
    # a run set of only some of these runs (a fit of a subset keeps every run's warnings): only
    # its own runs' notes
    subset = render_html([overview_section(runs.sel(run=["scheduled", "quiet"]), fitted=False)])
    assert [row[0] for row in _notes_shown(subset)] == ["scheduled", ""]
    assert "Reward from an evaluation metric" not in subset


def test_the_table_of_notes_names_the_log_of_a_run_none_of_whose_notes_starts_with_it(tmp_path):
    # real logs ingested with --every 3: a run whose only note was "thinned to every 3rd logged
    # point ..." had a blank log beside runs with one, read as a run without a log
    from bayes_grpo.report.sections import overview_section, run_notes_table, run_set_notes
    from bayes_grpo.runset import runset_warnings
    from bayes_grpo.runset.thin import thin_runset

    runs = thin_runset(_ingested_runs_with_notes_on_each(tmp_path), 3)
    quiet_log = str(tmp_path / "logs" / "quiet.csv")
    (note,) = runset_warnings(runs)["quiet"]
    assert note.startswith("thinned to every 3rd logged point"), note
    table = run_notes_table(runs)
    assert table.loc[table["run"] == "quiet", "log"].tolist() == [quiet_log], table
    assert table.loc[table["run"] == "quiet", "note"].tolist() == [note]
    assert run_set_notes(runs)["runs"]["quiet"] == {"log": quiet_log, "notes": [note]}
    shown = _notes_shown(render_html([overview_section(runs, fitted=False)]))
    assert ("quiet", quiet_log, note) in shown, shown
    # a simulator's source is no log: a thinned simulated run's note stands without a log column
    simulated = runs.assign_coords(source=("run", np.array(["simulate:sde"] * 3, dtype=object)))
    assert "log" not in run_notes_table(simulated).columns
    plt.close("all")


def test_a_run_set_without_notes_on_its_runs_shows_no_table_of_them(tmp_path):
    from bayes_grpo.report.sections import overview_section

    runs = _ingested_runs_with_notes_on_each(tmp_path).sel(run=["quiet"])
    for runset in (runs, _runset()):
        html = render_html([overview_section(runset, fitted=False)])
        assert "Notes on each run" not in html and "Reward from an evaluation metric" not in html
        assert 'class="dataframe data notes"' not in html
    plt.close("all")


def test_notes_that_do_not_name_their_runs_log_are_shown_whole_without_a_log_column():
    # make_runset's own warnings (values kept as NaN) name no log: nothing is cut off them
    from bayes_grpo.report.sections import overview_section, run_notes_table

    steps = np.arange(1, 21)
    reward = 0.8 - 0.6 * np.exp(-steps / 8.0)
    curves = {"a": pd.DataFrame({"reward": reward, "kl": np.r_[np.inf, np.ones(19)]}, index=steps)}
    with pytest.warns(UserWarning, match="kept as NaN"):
        runs = make_runset(curves, {"a": {"model": "m", "group_size": 4}})
    table = run_notes_table(runs)
    assert list(table.columns) == ["run", "note"] and table["note"].str.contains("kept as NaN").all(), table
    html = render_html([overview_section(runs, fitted=False)])
    assert "What building the run set said of each run: read" in html
    assert "kept as NaN" in html.split("Notes on each run", 1)[1]


def test_report_json_gives_the_overviews_warnings_on_the_run_set_as_the_html_shows_them(tmp_path, monkeypatch, capsys):
    # `report fit.nc --json` printed the path, the fit's warnings and the sections' verdicts: none
    # of the overview's warnings (a run's reward read from an evaluation metric, the ingest's
    # notes on each run and on the run set, the sources not ingested), which only the HTML showed
    import json

    import bayes_grpo.model as model_pkg
    import bayes_grpo.report.build as build
    from bayes_grpo.cli import main
    from bayes_grpo.runset import runset_warnings
    from bayes_grpo.runset.ingest import ingest_notes

    real_write_report = build.write_report
    runs = _ingested_runs_with_notes_on_each(tmp_path)
    posterior = tmp_path / "fit.nc"
    posterior.write_bytes(b"stub")
    _stub_report_stages(monkeypatch)
    monkeypatch.setattr(build, "write_report", real_write_report)
    model_pkg.GRPODynamicsModel.load(posterior).runset = runs  # the fit of these runs
    html_path = tmp_path / "r.html"
    argv = ["report", str(posterior), "-o", str(html_path), "--no-diagnose", "--no-stability", "--no-ppc", "--json"]
    assert main(argv) == 0
    notes = json.loads(capsys.readouterr().out)["runset_notes"]
    logs = tmp_path / "logs"
    held_out = str(logs / "held_out.csv")
    assert notes["runs"]["held_out"] == {
        "log": held_out,
        "notes": [n.removeprefix(f"{held_out}: ") for n in runset_warnings(runs)["held_out"]],
    }
    assert any("using the evaluation metric 'eval/reward'" in n for n in notes["runs"]["held_out"]["notes"]), notes
    assert sorted(notes["runs"]) == ["held_out", "scheduled"] and len(notes["runs"]["scheduled"]["notes"]) == 2
    assert notes["evaluation_reward"].startswith("Reward from an evaluation metric: the log of 1 run has no training reward")
    assert notes["ingest"] == ingest_notes(runs) and len(notes["ingest"]) == 1 and notes["rejected"] == []
    # the same as the HTML written shows them: its table of notes on each run, its warnings
    html = html_path.read_text()
    shown = [note for *_, note in _notes_shown(html)]
    assert shown == [n for run in notes["runs"].values() for n in run["notes"]], shown
    for warning in [notes["evaluation_reward"], *(f"Note of the ingest: {n}" for n in notes["ingest"])]:
        assert warning.replace("'", "&#39;") in html
    # the sources not ingested, from the Python API; a report without a run set gives empty notes
    (tmp_path / "other").mkdir()
    of_unknown_g = _ingested_runs_of_unknown_g(tmp_path / "other")
    received: dict = {}
    write_report(tmp_path / "w.html", runset=of_unknown_g, runset_notes=received)
    assert len(received["rejected"]) == 2 and any("later_g4.csv.lz4" in r for r in received["rejected"]), received
    assert received["runs"] == {} and received["evaluation_reward"] is None
    received = {}
    write_report(tmp_path / "none.html", runset_notes=received)
    assert received == {"evaluation_reward": None, "ingest": [], "rejected": [], "runs": {}}
    plt.close("all")


def test_the_report_of_a_saved_fit_shows_the_notes_the_ingest_made_on_its_runs(tmp_path, monkeypatch):
    # the fit keeps its run set with its attributes (the group fit_data): `bayes-grpo report
    # models/X.nc` must show what the ingest said of each run, as the report of the run set does
    import warnings

    import arviz as az
    import pymc
    import xarray as xr

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.report.build import report_from_posterior
    from bayes_grpo.runset import runset_warnings

    runs = _ingested_runs_with_notes_on_each(tmp_path)
    settings = {"parameterisation": "phenomenological", "model_config": {"hyperparameter_defaults": {"group_size": 4}}}
    prior = GRPODynamicsModel(**settings).sample_prior_predictive(runs, samples=20, random_seed=1).prior
    n_chains, n_draws = prior.sizes["chain"], prior.sizes["draw"]
    stats = xr.Dataset(
        {
            "diverging": (("chain", "draw"), np.zeros((n_chains, n_draws), dtype=bool)),
            "energy": (("chain", "draw"), np.random.default_rng(0).standard_normal((n_chains, n_draws))),
            "tree_depth": (("chain", "draw"), np.full((n_chains, n_draws), 3)),
        },
        coords={"chain": prior.chain.values, "draw": prior.draw.values},
    )
    # a cheap "fit": the prior's draws as the posterior
    monkeypatch.setattr(pymc, "sample", lambda **kw: az.InferenceData(posterior=prior, sample_stats=stats))
    model = GRPODynamicsModel(**settings)
    model.fit(runs, draws=20, tune=20, chains=1, progressbar=False)
    saved = model.save(tmp_path / "fit.nc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # its prior draws did not converge
        path = report_from_posterior(saved, tmp_path / "r.html", diagnose=False, stability=False, ppc=False)
    html = path.read_text()
    shown = _notes_shown(html)
    assert len(shown) == 3 and [row[0] for row in shown] == ["held_out", "scheduled", ""], shown
    for note in (n for notes in runset_warnings(runs).values() for n in notes):
        assert any(note.endswith(f": {n}") for *_, n in shown), note
    assert "Reward from an evaluation metric: the log of 1 run has no training reward" in html


@pytest.mark.browser
def test_the_notes_on_each_run_are_shown_in_headless_chromium_within_the_page(tmp_path):
    if _chromium() is None:
        pytest.skip("chromium is not installed (make test installs it as root)")
    runs = _ingested_runs_with_notes_on_each(tmp_path)
    path = write_report(tmp_path / "report.html", runset=runs)
    dom = open_in_chromium(path, tmp_path / "report.png")
    assert len(_notes_shown(dom)) == 3
    overview = dom.split('data-section="overview"')[1].split("</section>")[0]
    assert '<p class="warning">Reward from an evaluation metric: ' in overview
    assert 'data-sections-overflowing="0"' in dom
