"""Run sets: GRPO reward curves and side metrics of many runs in one ``xarray.Dataset``."""

from bayes_grpo.runset.core import (
    RunSetError,
    concat_runsets,
    load_runset,
    make_runset,
    require_runs,
    run_coords,
    run_frame,
    runset_from_arrays,
    runset_warnings,
    save_runset,
    validate_runset,
    with_added_coords,
)
from bayes_grpo.runset.schema import REWARD_VAR, RUN_COORDS

__all__ = [
    "REWARD_VAR",
    "RUN_COORDS",
    "RunSetError",
    "concat_runsets",
    "load_runset",
    "make_runset",
    "require_runs",
    "run_coords",
    "run_frame",
    "runset_from_arrays",
    "runset_warnings",
    "save_runset",
    "validate_runset",
    "with_added_coords",
]
