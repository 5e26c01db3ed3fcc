"""The one place that touches TRL's private ``GRPOTrainer`` internals (TRL 1.16).

TRL does not log, on CPU, the per-step quantities the dynamics need (importance-ratio
statistics, advantage variance, share of zero-spread groups, policy lag). They are read here by
wrapping three private methods of a live trainer and publishing the values through its private
metric buffer, so that they are averaged and logged exactly like TRL's own metrics (into
``trainer_state.json``, TensorBoard, wandb):

- ``_generate_and_score_completions`` : its output holds the group-normalised ``advantages`` of
  the generation batch in group order (G consecutive completions per prompt).
- ``_compute_loss`` / ``_get_per_token_logps_and_entropies`` : the first log-probability call
  inside ``_compute_loss`` is the current policy on the micro-batch; with the micro-batch's
  ``old_per_token_logps`` (``None`` when TRL knows the data are on-policy) it gives the
  importance ratios ``exp(logp - logp_old)`` over completion tokens.
- ``_step`` (micro-step counter), ``args.steps_per_generation``, ``num_iterations``,
  ``args.gradient_accumulation_steps`` : the policy lag of the batch in use, in optimizer steps.
- ``_metrics["train"]`` : the buffer TRL's ``log`` averages and clears.

If TRL renames any of these, :func:`check_trainer_internals` fails with a message naming what
is missing (tested in ``tests/test_train_adapter.py``), before any training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: Private attributes of GRPOTrainer this adapter relies on.
REQUIRED_INTERNALS: tuple[str, ...] = (
    "_generate_and_score_completions",
    "_compute_loss",
    "_get_per_token_logps_and_entropies",
    "_step",
    "_metrics",
    "num_iterations",
    "num_generations",
)
#: Prefix of the metrics this adapter adds to the logs.
PREFIX: str = "dynamics/"
METRIC_NAMES: tuple[str, ...] = tuple(
    PREFIX + n
    for n in (
        "is_ratio_mean",
        "is_ratio_std",
        "is_ratio_min",
        "is_ratio_max",
        "advantage_var",
        "frac_zero_spread_groups",
        "policy_lag",
    )
)


def check_trainer_internals(trainer: Any) -> None:
    """Raise ``RuntimeError`` naming every private attribute of ``trainer`` the adapter needs but lacks."""
    missing = [name for name in REQUIRED_INTERNALS if not hasattr(trainer, name)]
    args = getattr(trainer, "args", None)
    for name in ("steps_per_generation", "gradient_accumulation_steps"):
        if args is None or not hasattr(args, name):
            missing.append(f"args.{name}")
    if missing:
        raise RuntimeError(
            f"this TRL version's GRPOTrainer lacks {missing}; bayes_grpo.train.adapter was written for "
            "TRL 1.16 and needs updating"
        )


def policy_lag(
    micro_step: int, steps_per_generation: int, num_iterations: int, grad_accum: int
) -> int:
    """Optimizer steps between the policy that generated a micro-batch and the one training on it.

    Parameters
    ----------
    micro_step
        TRL's micro-step counter before the current micro-step (0-based).
    steps_per_generation, num_iterations, grad_accum
        TRL settings; a rollout is generated every ``steps_per_generation * num_iterations``
        micro-steps and the optimizer steps every ``grad_accum`` micro-steps.

    Returns
    -------
    int
        ``0 .. K_ref - 1`` with ``K_ref = steps_per_generation * num_iterations / grad_accum``.
    """
    every = steps_per_generation * num_iterations
    generated_at = micro_step - micro_step % every
    return micro_step // grad_accum - generated_at // grad_accum


def group_stats(advantages: Any, group_size: int) -> tuple[float, float]:
    """Advantage variance and share of zero-spread groups of one generation batch.

    Parameters
    ----------
    advantages
        Tensor or array, shape ``(n_groups * G,)``, G consecutive completions per prompt.
    group_size
        ``G``.

    Returns
    -------
    (float, float)
        Population variance of all advantages; share of groups whose advantages are all 0
        (a group with zero reward spread has zero advantage for every member under TRL's
        default ``multi_objective_aggregation="sum_then_normalize"``; with
        ``"normalize_then_sum"`` advantages are batch-normalised and this share reads 0).
    """
    import torch

    adv = torch.as_tensor(advantages, dtype=torch.float64).reshape(-1)
    if adv.numel() == 0 or adv.numel() % group_size:
        raise ValueError(f"{adv.numel()} advantages do not form groups of G={group_size}")
    var = float(adv.var(unbiased=False))
    zero = (adv.reshape(-1, group_size) == 0).all(dim=1).double().mean()
    return var, float(zero)


@dataclass
class _RatioAccumulator:
    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    lo: float = math.inf
    hi: float = -math.inf

    def add(self, ratios: Any) -> None:
        r = ratios.detach().double().reshape(-1)
        if r.numel() == 0:
            return
        self.n += int(r.numel())
        self.total += float(r.sum())
        self.total_sq += float((r * r).sum())
        self.lo = min(self.lo, float(r.min()))
        self.hi = max(self.hi, float(r.max()))

    def stats(self) -> dict[str, float]:
        if self.n == 0:
            return {}
        mean = self.total / self.n
        var = max(self.total_sq / self.n - mean * mean, 0.0)
        return {
            "is_ratio_mean": mean,
            "is_ratio_std": math.sqrt(var),
            "is_ratio_min": self.lo,
            "is_ratio_max": self.hi,
        }


@dataclass
class TRLInternalsAdapter:
    """Wraps a live ``GRPOTrainer`` to collect per-step dynamics quantities.

    Use :meth:`install` once after building the trainer; call :meth:`flush` at the end of each
    optimizer step (the callback does) to move the step's values into TRL's metric buffer.
    """

    trainer: Any = None
    _ratios: _RatioAccumulator = field(default_factory=_RatioAccumulator)
    _lag: int | None = None
    _gen_stats: tuple[float, float] | None = None
    _capture: bool = False
    _captured_logps: Any = None

    def install(self, trainer: Any) -> TRLInternalsAdapter:
        """Wrap ``trainer``'s private methods (idempotent per trainer); returns self."""
        check_trainer_internals(trainer)
        if getattr(trainer, "_bayes_grpo_adapter", None) is not None:
            raise RuntimeError("a bayes_grpo adapter is already installed on this trainer")
        self.trainer = trainer
        orig_generate = trainer._generate_and_score_completions
        orig_loss = trainer._compute_loss
        orig_logps = trainer._get_per_token_logps_and_entropies

        def generate_and_score(*args: Any, **kwargs: Any) -> Any:
            out = orig_generate(*args, **kwargs)
            if trainer.model.training:
                adv = out["advantages"]
                if adv.dim() > 1:  # (B, T) advantages of subclasses: use the sequence mean
                    adv = adv.mean(dim=1)
                adv = trainer.accelerator.gather(adv.detach())
                self._gen_stats = group_stats(adv.cpu(), trainer.num_generations)
            return out

        def logps_and_entropies(*args: Any, **kwargs: Any) -> Any:
            out = orig_logps(*args, **kwargs)
            if self._capture and self._captured_logps is None:
                self._captured_logps = out[0].detach()
            return out

        def compute_loss(model: Any, inputs: Any) -> Any:
            args = trainer.args
            self._lag = policy_lag(
                trainer._step,
                args.steps_per_generation,
                trainer.num_iterations,
                args.gradient_accumulation_steps,
            )
            self._capture, self._captured_logps = True, None
            try:
                loss = orig_loss(model, inputs)
            finally:
                self._capture = False
            logps = self._captured_logps
            self._captured_logps = None
            if logps is not None:
                old = inputs.get("old_per_token_logps")
                mask = inputs["completion_mask"].bool()
                ratio = (logps - old).exp() if old is not None else logps.new_ones(logps.shape)
                self._ratios.add(ratio[mask])
            return loss

        trainer._generate_and_score_completions = generate_and_score
        trainer._get_per_token_logps_and_entropies = logps_and_entropies
        trainer._compute_loss = compute_loss
        trainer._bayes_grpo_adapter = self
        return self

    def step_metrics(self) -> dict[str, float]:
        """This optimizer step's values under :data:`METRIC_NAMES` (and reset the ratio stats)."""
        out = {PREFIX + k: v for k, v in self._ratios.stats().items()}
        self._ratios = _RatioAccumulator()
        if self._gen_stats is not None:
            out[PREFIX + "advantage_var"], out[PREFIX + "frac_zero_spread_groups"] = self._gen_stats
        if self._lag is not None:
            out[PREFIX + "policy_lag"] = float(self._lag)
        return out

    def flush(self) -> dict[str, float]:
        """Append this step's values to TRL's train metric buffer; return them."""
        metrics = self.step_metrics()
        buffer = self.trainer._metrics["train"]
        for name, value in metrics.items():
            buffer[name].append(value)
        return metrics


__all__ = [
    "METRIC_NAMES",
    "REQUIRED_INTERNALS",
    "TRLInternalsAdapter",
    "check_trainer_internals",
    "group_stats",
    "policy_lag",
]
