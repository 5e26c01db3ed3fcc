"""The hierarchical PyMC model of GRPO runs (DESIGN.md section 3): configs, builder, fit/save/load."""

from bayes_grpo.model.config import (
    DEFAULT_MODEL_CONFIG,
    DEFAULT_SAMPLER_CONFIG,
    config_hash,
    merge_config,
)
from bayes_grpo.model.convergence import convergence_check
from bayes_grpo.model.core import (
    FIT_DATA_GROUP,
    GRPODynamicsModel,
    UnusedModelSizeWarning,
    as_fitted_model,
    load_fitted_model,
)

__all__ = [
    "GRPODynamicsModel",
    "UnusedModelSizeWarning",
    "as_fitted_model",
    "load_fitted_model",
    "DEFAULT_MODEL_CONFIG",
    "DEFAULT_SAMPLER_CONFIG",
    "FIT_DATA_GROUP",
    "config_hash",
    "merge_config",
    "convergence_check",
]
