"""Softmax-bandit GRPO: the exact reduction of the reduced-order model (DESIGN.md section 2).

``simulate_bandit`` runs many seeds and settings in one batched torch program and returns a
run set; ``fixed_point`` / ``measure_stiffness`` give the known truth (``p*``, ``K``, ``D``);
``sweep_k_ref`` and the analyses in :mod:`bayes_grpo.bandit.experiments` reproduce the
transition, stability-threshold and G-invariance results.
"""

from bayes_grpo.bandit.mean_field import (
    ADVANTAGES,
    ANCHORS,
    FixedPoint,
    expected_update,
    fixed_point,
)
from bayes_grpo.bandit.simulator import (
    BANDIT_MODEL,
    LOGGED_METRICS,
    bandit_truth,
    simulate_bandit,
)

__all__ = [
    "ADVANTAGES",
    "ANCHORS",
    "BANDIT_MODEL",
    "FixedPoint",
    "LOGGED_METRICS",
    "bandit_truth",
    "expected_update",
    "fixed_point",
    "simulate_bandit",
]
