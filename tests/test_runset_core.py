"""The run-set data contract: construction, validation and a lossless netCDF round trip."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayes_grpo.runset import (
    RUN_COORDS,
    RunSetError,
    load_runset,
    make_runset,
    runset_warnings,
    save_runset,
)


def _frames():
    a = pd.DataFrame({"reward": [0.1, 0.2, 0.4], "kl": [0.0, 0.1, 0.2]}, index=[1, 2, 3])
    b = pd.DataFrame({"reward": [0.0, 0.5], "entropy": [2.0, 1.5]}, index=[2, 4])
    return {"a": a, "b": b}


def test_runs_of_different_length_are_padded_with_nan_on_the_union_of_steps():
    ds = make_runset(_frames(), {"a": {"group_size": 4, "model": "m"}, "b": {"group_size": 16}})
    assert ds.sizes == {"run": 2, "step": 4}
    assert list(ds.step.values) == [1, 2, 3, 4]
    assert np.isnan(ds.reward.sel(run="b", step=1))
    assert ds.entropy.sel(run="b", step=4) == 1.5
    assert ds.group_size.values.tolist() == [4.0, 16.0]
    assert ds.model.values.tolist() == ["m", ""]
    assert set(RUN_COORDS) <= set(ds.coords)


def test_netcdf_round_trip_keeps_every_coordinate_and_attribute(tmp_path):
    ds = make_runset(_frames(), {"a": {"learning_rate": 1e-3, "momentum_convention": "ema"}}, warnings={"a": ["x"]})
    path = save_runset(ds, tmp_path / "runs.nc")
    back = load_runset(path)
    xr.testing.assert_identical(ds, back)
    assert runset_warnings(back) == {"a": ["x"]}


def test_missing_reward_names_the_run_and_the_metrics_found():
    with pytest.raises(RunSetError, match=r"run 'a'.*\['kl'\]"):
        make_runset({"a": pd.DataFrame({"kl": [1.0]}, index=[1])})


def test_unknown_coordinate_is_rejected():
    with pytest.raises(RunSetError, match="unknown run coordinates"):
        make_runset(_frames(), {"a": {"G": 4}})


def test_written_files_get_the_umask_mode_not_the_temporary_0600(tmp_path):
    import os

    from bayes_grpo._io import write_text_atomic

    old = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "x.txt", "hello")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert path.read_text() == "hello"
