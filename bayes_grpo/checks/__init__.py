"""Checks: G-invariance, stability, posterior predictive checks and failure-mode diagnostics.

Every check follows one protocol (:class:`~bayes_grpo.checks.base.Check`) and returns one
result type (:class:`~bayes_grpo.checks.base.CheckResult`) that the report renders.
"""

from bayes_grpo.checks.base import Check, CheckResult

__all__ = ["Check", "CheckResult"]
