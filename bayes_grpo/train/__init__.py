"""Produce real GRPO runs with TRL: theory knobs in, an ingestible run directory out.

Needs the ``train`` extra (torch, transformers, trl, datasets). The configuration and its mapping
onto TRL (:mod:`bayes_grpo.train.config`) import without it; the runner, callback and tiny model
import torch lazily.
"""

from bayes_grpo.train.config import (
    K_REF_VIA,
    OPTIMIZERS,
    TASKS,
    TrainConfig,
    grpo_config_kwargs,
    k_ref_mapping,
    run_metadata,
    validate_config,
)

__all__ = [
    "K_REF_VIA",
    "OPTIMIZERS",
    "TASKS",
    "TrainConfig",
    "grpo_config_kwargs",
    "k_ref_mapping",
    "run_metadata",
    "run_training",
    "validate_config",
    "read_run_dir",
    "TrainResult",
    "METADATA_FILE",
]


def __getattr__(name: str):
    if name in ("run_training", "read_run_dir", "TrainResult", "METADATA_FILE"):
        from bayes_grpo.train import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'bayes_grpo.train' has no attribute {name!r}")
