"""The benchmarks' simulated run sets have the size their notes and the README quote.

``simulate_sde_runset(n_steps=T)`` logs steps ``0 .. T - 1`` (T points); before it logged
``0 .. T`` (T + 1), and a benchmark that asked for ``T - 1`` to get T points then got one
point short of what its figures are quoted for.
"""

from __future__ import annotations

import re


def test_bench_fit_data_is_12_runs_of_1000_logged_steps(load_script):
    # README ('12 runs x 1000 steps') and BENCH_FIT_NOTES.md quote the fit on this data; with
    # n_steps=999 it had 999 logged steps (0 .. 998) once n_steps counted logged steps
    ds = load_script("benchmarks/bench_fit.py").make_data()
    assert ds.sizes["run"] == 12
    assert ds.sizes["step"] == 1000
    assert list(ds["step"].values[[0, -1]]) == [0, 999]
    assert bool(ds["reward"].notnull().all())


def test_calibrate_invariance_refuses_to_resume_sets_of_other_step_counts(
    load_script, tmp_path, monkeypatch
):
    # the h0 file's sets were simulated with --n-steps 100 --log-every 4 when that logged 26
    # points (0 .. 100); the same command logs 25 now (0 .. 96), and a resumed run added its
    # sets beside the old ones and summarised them together without a word
    import json
    import sys

    import pytest

    script = load_script("benchmarks/calibrate_invariance.py")
    out = tmp_path / "h0.jsonl"
    out.write_text(
        json.dumps(
            {"kind": "h0", "index": 0, "n_steps": 26, "likelihood": "iid", "noise": "measurement"}
        )
        + "\n"
    )
    fitted = []

    def run_one(kind, index, args):  # no fit: the set it would fit, and a row to print
        fitted.append((kind, index))
        figures = ("log_bf01_bridge", "log_bf01_bridge_mc_error", "log_bf01_sd")
        return {
            "kind": kind,
            "index": index,
            "sd_in_support": True,
            "seconds": 0.0,
        } | dict.fromkeys((*figures, "log_bf01_sd_importance", "alpha_median"), 0.0)

    monkeypatch.setattr(script, "run_one", run_one)
    argv = ["calibrate_invariance.py", "--families", "h0", "--n-sets", "2", "--n-steps", "100"]
    monkeypatch.setattr(sys, "argv", [*argv, "--log-every", "4", "--out", str(out)])
    with pytest.raises(
        SystemExit,
        match=r"h0\.jsonl: holds sets of other settings \(set h0 0 has 26 "
        r"logged steps per run, these settings give 25\); use another --out",
    ):
        script.main()
    assert fitted == []
    # a row of these settings resumes: only set 1 is left to fit
    out.write_text(out.read_text().replace('"n_steps": 26', '"n_steps": 25'))
    monkeypatch.setattr(script, "summarise", lambda rows: {})
    monkeypatch.setattr(script, "write_text_atomic", lambda path, text: None)
    script.main()
    assert fitted == [("h0", 1)]


def test_calibrate_recovery_refuses_to_resume_rows_of_other_step_counts_or_model_versions(
    load_script, tmp_path, monkeypatch
):
    # state_space_v4.jsonl's rows are of 301-step runs (--steps 300 before n_steps counted
    # logged steps) and model version 4; its settings are those of today's command, which gives
    # 300 steps and fits version 8, and a resumed run summarised the old rows with its own
    import json
    import sys

    import pytest

    script = load_script("benchmarks/calibrate_recovery.py")
    settings = {"source": "sde", "steps": 300, "prompts": 64, "likelihood": "state_space",
                "draws": 500, "tune": 500, "chains": 2, "sampler": "pymc", "seed": 2026}  # fmt: skip
    version = script.GRPODynamicsModel.version
    fitted = []

    def fit_one(i, args, ds, llm, model_truth, runs, info, cache):  # no fit: a row to print
        fitted.append(i)
        return {"dataset": i, "seconds": 0.0, "info": info, "convergence": {}} | dict.fromkeys(script.TARGETS)

    monkeypatch.setattr(script, "fit_one", fit_one)
    monkeypatch.setattr(script, "summarise", lambda rows: {})
    out = tmp_path / "rows.jsonl"
    monkeypatch.setattr(sys, "argv", ["calibrate_recovery.py", "--n", "2", "--out", str(out)])

    def finished(info):
        row = {"dataset": 0, "seconds": 1.0, "info": {"measurement_sd_G1": 0.03} | info}
        out.write_text(json.dumps({"settings": settings, "row": row}) + "\n")

    for info, why in (
        ({"logged_steps": 301, "model_version": version}, "dataset 0 has logged steps per run 301, this command gives 300"),
        ({"logged_steps": 300, "model_version": "4"}, f"dataset 0 has model version '4', this command gives {version!r}"),
        ({}, "dataset 0 does not record its logged steps per run"),
    ):
        finished(info)
        with pytest.raises(SystemExit, match=re.escape(f"rows.jsonl: holds rows this command would not make ({why}")):
            script.main()
        assert fitted == []
    # a row of this command resumes: only dataset 1 is left to fit, and it records both
    finished({"logged_steps": 300, "model_version": version})
    script.main()
    assert fitted == [1]
    new = json.loads(out.read_text().splitlines()[-1])["row"]["info"]
    assert (new["logged_steps"], new["model_version"]) == (300, version)
