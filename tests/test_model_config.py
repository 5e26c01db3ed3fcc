"""Model configs are data: merged with |, validated, hashed; run sets are prepared without dropping runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG, config_hash, merge_config
from bayes_grpo.model.prepare import prepare_data
from bayes_grpo.runset import RunSetError, make_runset


def _runset(meta_overrides=None, lengths=(50, 30)):
    curves, meta = {}, {}
    for i, n in enumerate(lengths):
        steps = np.arange(0, n)
        curves[f"r{i}"] = pd.DataFrame({"reward": 0.1 + 0.5 * (1 - np.exp(-steps / 10.0))}, index=steps)
        meta[f"r{i}"] = {"model": "m", "group_size": 4, "learning_rate": 1e-3, "momentum": 0.9, "momentum_convention": "ema", "k_ref": 1}
        meta[f"r{i}"].update((meta_overrides or {}).get(f"r{i}", {}))
    return make_runset(curves, meta)


def test_user_config_merges_into_defaults_one_level_deep():
    cfg = merge_config(DEFAULT_MODEL_CONFIG, {"alpha": {"fixed": 1.0}})
    assert cfg["alpha"] == {"mu": 1.0, "sigma": 0.5, "fixed": 1.0}
    assert cfg["plateau"] == DEFAULT_MODEL_CONFIG["plateau"]
    assert DEFAULT_MODEL_CONFIG["alpha"]["fixed"] is None  # defaults untouched


def test_unknown_config_keys_are_rejected():
    with pytest.raises(ValueError, match="unknown configuration key"):
        merge_config(DEFAULT_MODEL_CONFIG, {"plateu": {"sigma": 1}})
    with pytest.raises(ValueError, match="unknown entries"):
        merge_config(DEFAULT_MODEL_CONFIG, {"alpha": {"fix": 1}})


def test_config_hash_changes_with_any_prior():
    a = config_hash(DEFAULT_MODEL_CONFIG)
    assert a == config_hash(merge_config(DEFAULT_MODEL_CONFIG, {}))
    assert a != config_hash(merge_config(DEFAULT_MODEL_CONFIG, {"plateau": {"sigma": 1.4}}))


def test_mechanistic_form_names_runs_with_unknown_hyperparameters():
    ds = _runset({"r1": {"learning_rate": np.nan}})
    with pytest.raises(RunSetError, match=r"learning_rate.*\['r1'\]"):
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    cfg = merge_config(DEFAULT_MODEL_CONFIG, {"hyperparameter_defaults": {"learning_rate": 2e-3}})
    data = prepare_data(ds, cfg, "mechanistic")
    np.testing.assert_allclose(data.learning_rate, [1e-3, 2e-3])
    np.testing.assert_allclose(data.eta_eff, [1e-4, 2e-4])  # EMA: eta (1 - beta1)
    prepare_data(ds, DEFAULT_MODEL_CONFIG, "phenomenological")  # does not need them


def test_ragged_runs_and_gaps_are_masked_not_dropped():
    ds = _runset(lengths=(50, 30))
    ds["reward"][0, 10:15] = np.nan
    data = prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    assert data.n_runs == 2
    assert np.bincount(data.obs_run).tolist() == [45, 30]
    assert np.all(np.isfinite(data.obs_y))


def test_runs_with_almost_no_data_are_an_error_naming_them():
    ds = _runset(lengths=(50, 30))
    ds["reward"][1, 2:] = np.nan
    with pytest.raises(RunSetError, match=r"\['r1'\]"):
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")


def test_invalid_momentum_is_an_error():
    ds = _runset({"r0": {"momentum": 1.2}})
    with pytest.raises(RunSetError, match="invalid momentum"):
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
