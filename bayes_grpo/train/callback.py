"""A ``TrainerCallback`` that logs the per-step quantities the dynamics analysis needs.

Added to every step's log entry (and so to ``trainer_state.json``'s ``log_history``):

==================================  ==============================================================
``dynamics/is_ratio_mean|std|min|max``  importance ratios ``pi_theta / pi_old`` over completion
                                     tokens of the step (exactly 1 on-policy)
``dynamics/advantage_var``           variance of the group-normalised advantages of the rollout
                                     in use
``dynamics/frac_zero_spread_groups`` share of its groups whose G rewards are all equal (no signal)
``dynamics/policy_lag``              optimizer steps since that rollout was generated
                                     (``0 .. K_ref - 1``)
==================================  ==============================================================

TRL logs ``reward`` and ``frac_reward_zero_std`` only on steps where it generates; these are on
every step. The access to TRL internals lives in :mod:`bayes_grpo.train.adapter`.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from bayes_grpo.train.adapter import TRLInternalsAdapter


class DynamicsDiagnosticsCallback(TrainerCallback):
    """Collects importance-ratio stats, advantage variance, zero-spread share and policy lag.

    Examples
    --------
    >>> trainer = GRPOTrainer(...)                      # doctest: +SKIP
    >>> DynamicsDiagnosticsCallback.attach(trainer)     # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.adapter = TRLInternalsAdapter()
        self.last: dict[str, float] = {}

    @classmethod
    def attach(cls, trainer: Any) -> DynamicsDiagnosticsCallback:
        """Create the callback, install its adapter on ``trainer`` and register it; return it."""
        callback = cls()
        callback.adapter.install(trainer)
        trainer.add_callback(callback)
        return callback

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # Runs after the optimizer step and before the trainer logs it.
        if self.adapter.trainer is not None:
            self.last = self.adapter.flush()
        return control


__all__ = ["DynamicsDiagnosticsCallback"]
