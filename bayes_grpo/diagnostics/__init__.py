"""Failure-mode diagnostics of GRPO runs (DESIGN.md section 4).

A reward curve alone conflates four failure modes; the side quantities GRPO runs log
separate them. Each mode is a function of one run's metrics returning a
:class:`~bayes_grpo.checks.base.CheckResult` (detected / not detected / not assessable,
onset step, strength with an interval, evidence numbers and a figure):

- :func:`reward_hacking`: train-eval decoupling (``hacking.py``);
- :func:`advantage_degeneracy`: groups with zero reward spread (``degeneracy.py``);
- :func:`policy_concentration`: entropy collapse ahead of the reward (``concentration.py``);
- :func:`instability`: growing side quantities, oscillation, negative damping (``instability.py``).

:func:`diagnose` runs them on a run set; thresholds live in :class:`DiagnosticsConfig`.
"""

from bayes_grpo.diagnostics.concentration import policy_concentration
from bayes_grpo.diagnostics.config import (
    CommonConfig,
    ConcentrationConfig,
    DegeneracyConfig,
    DiagnosticsConfig,
    HackingConfig,
    InstabilityConfig,
)
from bayes_grpo.diagnostics.core import (
    MODES,
    detected_runs,
    diagnose,
    diagnosis_table,
    run_table,
    verdict_matrix,
)
from bayes_grpo.diagnostics.degeneracy import (
    advantage_degeneracy,
    binomial_mean_std,
    binomial_zero_spread,
    zero_spread_from_std,
)
from bayes_grpo.diagnostics.hacking import reward_hacking
from bayes_grpo.diagnostics.instability import instability, relative_overshoot

__all__ = [
    "MODES",
    "CommonConfig",
    "ConcentrationConfig",
    "DegeneracyConfig",
    "DiagnosticsConfig",
    "HackingConfig",
    "InstabilityConfig",
    "advantage_degeneracy",
    "binomial_mean_std",
    "binomial_zero_spread",
    "detected_runs",
    "diagnose",
    "diagnosis_table",
    "instability",
    "policy_concentration",
    "relative_overshoot",
    "reward_hacking",
    "run_table",
    "verdict_matrix",
    "zero_spread_from_std",
]
