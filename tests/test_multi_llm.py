"""Run sets of several LLMs: model sizes, the curvature regression on log model_size, and the
questions asked of a new LLM (stability, phase diagram, prediction, report)."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_grpo.dynamics.simulate import simulate_sde_runset
from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG
from bayes_grpo.model.prepare import prepare_data
from bayes_grpo.runset import RunSetError

SIZES = {"Qwen/Qwen2.5-0.5B": 0.5e9, "llm 1.5B": 1.5e9, "llm-7B ü": 7e9}


def _models(sizes=SIZES, gamma=0.5):
    """Simulator specs whose curvature follows K = 20 (N / 1.5e9)^gamma."""
    return {
        name: {
            "stiffness": 20.0 * (size / 1.5e9) ** gamma,
            "plateau": 0.5 + 0.1 * i,
            "initial_reward": 0.1,
            "noise_d": 2e-5,
            "model_size": size,
        }
        for i, (name, size) in enumerate(sizes.items())
    }


def _runset(sizes=SIZES, **kw):
    settings = dict(
        group_sizes=(8,), learning_rates=(1e-3,), momentum=0.5, convention="heavy_ball",
        n_seeds=1, n_steps=120, log_every=2, random_seed=3,
    ) | kw
    return simulate_sde_runset(models=_models(sizes), **settings)


def test_one_llm_name_with_two_model_sizes_is_an_error_naming_the_runs():
    ds = _runset()
    # the 0.5B and 1.5B runs carry one name: the fit took the median of their sizes, silently
    names = np.array([str(m) for m in ds["model"].values], dtype=object)
    names[names == "llm 1.5B"] = "Qwen/Qwen2.5-0.5B"
    ds = ds.assign_coords(model=("run", names))
    runs = [str(r) for r, m in zip(ds["run"].values, names) if m == "Qwen/Qwen2.5-0.5B"]
    with pytest.raises(RunSetError, match="different model_size") as err:
        prepare_data(ds, DEFAULT_MODEL_CONFIG, "mechanistic")
    assert all(f"{r} (" in str(err.value) for r in runs)
    assert "'Qwen/Qwen2.5-0.5B'" in str(err.value)
    # a run that does not know its size does not contradict the others
    sizes = np.asarray(ds["model_size"].values, dtype=float).copy()
    sizes[names == "Qwen/Qwen2.5-0.5B"] = [0.5e9, np.nan]
    data = prepare_data(ds.assign_coords(model_size=("run", sizes)), DEFAULT_MODEL_CONFIG, "mechanistic")
    assert data.log_size[data.models.index("Qwen/Qwen2.5-0.5B")] == pytest.approx(np.log(0.5e9))
