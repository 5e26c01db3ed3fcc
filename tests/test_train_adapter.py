"""The TRL-internals adapter: policy lag schedule, group statistics, and TRL's private surface."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from bayes_grpo.train.adapter import (  # noqa: E402
    REQUIRED_INTERNALS,
    TRLInternalsAdapter,
    check_trainer_internals,
    group_stats,
    policy_lag,
)


@pytest.mark.parametrize(
    ("spg", "iters", "ga"), [(1, 1, 1), (4, 1, 1), (1, 4, 1), (2, 2, 1), (4, 1, 2), (2, 3, 2)]
)
def test_policy_lag_counts_optimizer_steps_since_the_rollout(spg, iters, ga):
    k_ref = spg * iters // ga
    micro = np.arange(spg * iters * 5)
    lags = np.array([policy_lag(int(s), spg, iters, ga) for s in micro])
    per_step = lags.reshape(-1, ga)
    assert (per_step == per_step[:, :1]).all(), "lag must be constant within one optimizer step"
    np.testing.assert_array_equal(per_step[:, 0], np.arange(len(per_step)) % k_ref)


def test_group_stats_of_binary_rewards():
    G = 4
    rewards = torch.tensor(
        [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float64
    )
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True)
    adv = ((rewards - mean) / (std + 1e-4)).reshape(-1)
    var, zero = group_stats(adv, G)
    assert zero == 0.5
    np.testing.assert_allclose(var, 0.5 * (G - 1) / G, rtol=1e-3)
    with pytest.raises(ValueError, match="groups of G=3"):
        group_stats(adv, 3)


def test_missing_trl_internals_are_named():
    class NotATrainer:
        _step = 0
        args = None

    with pytest.raises(RuntimeError, match="_compute_loss") as info:
        check_trainer_internals(NotATrainer())
    assert "args.steps_per_generation" in str(info.value)


def test_this_trl_grpo_trainer_has_every_internal_the_adapter_wraps(tmp_path):
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bayes_grpo.train.config import TrainConfig, grpo_config_kwargs
    from bayes_grpo.train.tiny import build_tiny_model, make_next_digit_reward, next_digit_prompts

    path = build_tiny_model(tmp_path / "m", seed=0)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    args = trl.GRPOConfig(
        **grpo_config_kwargs(
            TrainConfig(group_size=4, prompts_per_step=2, max_steps=1), str(tmp_path / "o")
        )
    )
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=make_next_digit_reward(tok),
        args=args,
        train_dataset=Dataset.from_list(next_digit_prompts(8)),
        processing_class=tok,
    )
    for name in REQUIRED_INTERNALS:
        assert hasattr(trainer, name), name
    adapter = TRLInternalsAdapter().install(trainer)
    assert trainer._bayes_grpo_adapter is adapter
    with pytest.raises(RuntimeError, match="already installed"):
        TRLInternalsAdapter().install(trainer)
    # flush publishes into TRL's own metric buffer (averaged and logged by GRPOTrainer.log)
    adapter._lag = 0
    assert adapter.flush() == {"dynamics/policy_lag": 0.0}
    assert trainer._metrics["train"]["dynamics/policy_lag"] == [0.0]
