"""The public GRPO logs in ../shared/real_runs ingest, in their native formats and as CSV, and agree."""

import json
import warnings

import numpy as np
import pytest
import xarray as xr

from bayes_grpo.runset import load_runset, run_coords, save_runset
from bayes_grpo.runset.ingest import INGEST_ATTR, load_runs, rejected_runs, runset_summary

pytestmark = pytest.mark.real_runs


@pytest.fixture(scope="module")
def sources(real_runs_dir):
    return json.loads((real_runs_dir / "sources.json").read_text())


@pytest.fixture(scope="module")
def native(real_runs_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return load_runs([real_runs_dir / "native"])


@pytest.fixture(scope="module")
def csv_runs(real_runs_dir):
    return load_runs([real_runs_dir / "csv"])


def test_every_csv_export_ingests_with_the_documented_reward_column(
    csv_runs, sources, real_runs_dir
):
    expected = {s["short_id"]: s["csv_reward_column"] for s in sources}
    assert sorted(csv_runs.run.values) == sorted(
        p.stem for p in (real_runs_dir / "csv").glob("*.csv")
    )
    facts = json.loads(csv_runs.attrs[INGEST_ATTR])
    for run_id, reward_column in expected.items():
        assert facts[run_id]["reward_source"] == reward_column, run_id
        assert facts[run_id]["n_reward"] == next(
            s["n_logged_steps"] for s in sources if s["short_id"] == run_id
        )


def test_every_native_log_file_yields_runs_and_rejections_are_explained(native, real_runs_dir):
    files = [p for p in (real_runs_dir / "native").rglob("*") if p.is_file()]
    facts = json.loads(native.attrs[INGEST_ATTR])
    read = {f["file"] for f in facts.values()}
    assert {str(p) for p in files} == read
    for info in rejected_runs(native).values():  # two sweep arms with 4 evaluation points each
        assert "fewer than the minimum of 10 points" in info["reason"]
    assert len(rejected_runs(native)) == 2
    assert native.sizes["run"] == 22


def test_native_curves_equal_the_csv_conversions(native, csv_runs, sources, real_runs_dir):
    facts = json.loads(native.attrs[INGEST_ATTR])
    compared = 0
    for src in sources:
        path = real_runs_dir / "native" / src["repo"].replace("/", "__") / src["path"]
        if not path.is_file():
            continue  # notebook progress tables have no native file
        candidates = [r for r, f in facts.items() if f["file"] == str(path)]
        assert candidates, src["short_id"]
        want = csv_runs.reward.sel(run=src["short_id"]).dropna("step")
        matches = []
        for run_id in candidates:
            got = native.reward.sel(run=run_id).dropna("step")
            if list(got.step.values) == list(want.step.values) and np.allclose(
                got, want, rtol=1e-6
            ):
                matches.append(run_id)
        assert len(matches) == 1, (src["short_id"], candidates)
        compared += 1
    assert compared == 21


def test_native_run_set_round_trips_through_netcdf_identically(native, tmp_path):
    back = load_runset(save_runset(native, tmp_path / "native.nc"))
    xr.testing.assert_identical(native, back)


def test_hyperparameters_read_from_native_logs_match_the_recorded_settings(native, sources):
    by_id = {s["short_id"]: s for s in sources}
    tb = {
        "wordle-grpo-rtx4070-20260106-165138": "alex_q25_0.5b_wordle_g4_run1",
        "wordle-grpo-rtx4070-20260108-154512": "alex_q25_3b_wordle_g12",
    }
    for run_id, short in tb.items():
        c = run_coords(native, run_id)
        assert c["group_size"] == by_id[short]["G"]
        assert c["learning_rate"] == by_id[short]["learning_rate"]
        assert c["momentum_convention"] == "ema" and c["momentum"] == 0.9
    shibuki = run_coords(native, "final_on_policy_lr4e-5_400_full_eval")
    assert shibuki["group_size"] == 8 and shibuki["learning_rate"] == 4e-5 and shibuki["k_ref"] == 1
    summary = runset_summary(native)
    assert (summary.loc[summary.status == "ok", "n_steps"] >= 10).all()


def test_the_native_logs_gzipped_ingest_as_the_originals(native, real_runs_dir, tmp_path):
    # archived runs are often kept gzipped: every text log of native/ compressed (the event files,
    # which TensorBoard reads as they lie, left as they are) gives the same run set; before,
    # the 13 compressed logs were rejected ("decompress it first") and the two checkpoints'
    # trainer_state.json.gz were not found, leaving the 4 TensorBoard runs of 22
    import gzip
    import shutil

    copy = tmp_path / "native"
    shutil.copytree(real_runs_dir / "native", copy)
    packed = 0
    for path in sorted(p for p in copy.rglob("*") if p.is_file()):
        if not path.name.startswith("events.out.tfevents"):
            path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
            path.unlink()
            packed += 1
    assert packed == 13
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        gzipped = load_runs([copy])
    assert list(gzipped.run.values) == list(native.run.values)
    xr.testing.assert_equal(gzipped.drop_vars("source"), native.drop_vars("source"))
    assert len(rejected_runs(gzipped)) == len(rejected_runs(native)) == 2
    original = {f["file"] for f in json.loads(native.attrs[INGEST_ATTR]).values()}
    read = {f["file"] for f in json.loads(gzipped.attrs[INGEST_ATTR]).values()}
    assert {
        f.replace(str(copy), str(real_runs_dir / "native")).removesuffix(".gz") for f in read
    } == original
