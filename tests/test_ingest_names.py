"""Source metric names map to documented canonical names, and the reward is chosen by the documented rule."""

import json

import pytest

from bayes_grpo.runset.names import (
    METRIC_ALIASES,
    NoRewardError,
    canonical_name,
    choose_reward,
    map_names,
    mapping_table,
    sanitise,
)


@pytest.mark.parametrize(
    ("source", "canonical"),
    [
        ("reward", "reward"),
        ("train/reward", "reward"),
        ("critic/score/mean", "reward"),
        ("train/reward_std", "reward_std"),
        ("frac_reward_zero_std", "frac_reward_zero_std"),
        ("train/kl", "kl"),
        # verl's KL to the reference when it is a penalty in the reward (use_kl_in_reward):
        # 'critic/kl' before verl 0.4, 'actor/reward_kl_penalty' since (ray_trainer.apply_kl_penalty)
        ("critic/kl", "kl"),
        ("actor/reward_kl_penalty", "kl"),
        # OpenRLHF's PPO/GRPO status (ppo_actor.training_step, logged as 'train/<key>')
        ("train/ppo_clip_ratio", "clip_ratio"),
        ("train/response_length", "completion_length"),
        ("train/policy_loss", "loss"),
        ("actor/entropy", "entropy"),
        # verl < 0.4 logged the mean token entropy as 'actor/entropy_loss' (dp_actor.update_policy)
        ("actor/entropy_loss", "entropy"),
        ("actor/grad_norm", "grad_norm"),
        ("clip_ratio/region_mean", "clip_ratio"),
        ("learning_rate", "lr"),  # the coordinate of that name holds the peak value
        ("completions/mean_length", "completion_length"),
        ("eval_reward", "eval_reward"),
        ("eval/reward", "eval_reward"),
        ("val-core/openai/gsm8k/reward/mean@1", "eval_openai_gsm8k_reward_mean_1"),
        ("eval_rewards/acc/mean", "eval_rewards_acc_mean"),
        # OpenRLHF logs its evaluation's 'eval_accuracy' as 'eval/eval_accuracy': one prefix
        ("eval/eval_accuracy", "eval_accuracy"),
        ("eval/eval_gsm8k_pass1", "eval_gsm8k_pass1"),
        ("clip_ratio/low_mean", "clip_ratio_low_mean"),
        ("train/rewards/format_reward/mean", "rewards_format_reward_mean"),
        ("seed", "seed_logged"),  # would collide with the run coordinate
        ("step", "step_logged"),
    ],
)
def test_source_names_map_to_the_documented_canonical_names(source, canonical):
    assert canonical_name(source) == canonical


@pytest.mark.parametrize(
    ("source", "own_name"),
    [
        # Stable-Baselines3 PPO (ppo.py: logger.record("train/approx_kl", ...)): old vs new policy
        ("train/approx_kl", "approx_kl"),
        ("approx_kl", "approx_kl"),
        # CleanRL (ppo.py: writer.add_scalar("losses/approx_kl", ...))
        ("losses/approx_kl", "losses_approx_kl"),
        # verl (core_algos.compute_policy_loss: ppo_kl = masked_mean(-negative_approx_kl))
        ("actor/ppo_kl", "actor_ppo_kl"),
        # OpenRLHF (ppo_actor.training_step: experience.info["ppo_kl"], logged as 'train/ppo_kl')
        ("train/ppo_kl", "ppo_kl"),
        # TRL PPO ('policy/approxkl_avg': "not the same as objective/kl")
        ("policy/approxkl_avg", "policy_approxkl_avg"),
    ],
)
def test_the_old_versus_new_policy_kl_is_never_read_as_the_kl_to_the_reference(source, own_name):
    # the run set's 'kl' is the KL to the reference model (what beta penalises); the PPO-style
    # KL between the behaviour and the current policy is ~0 on-policy and keeps its own name
    assert canonical_name(source) == own_name
    mapping = map_names(["reward", "kl", source])
    assert mapping.columns["kl"] == "kl"
    assert mapping.columns[source] == own_name


def test_a_batch_wide_score_std_is_not_read_as_the_within_group_reward_std():
    # verl forks log 'critic/score/std' as torch.std(sequence_score) over the whole batch (every
    # prompt's rollouts together); the run set's reward_std is TRL's mean within-group spread,
    # from which advantage degeneracy derives its zero-signal share: a batch spread across
    # prompts of different difficulty reads as spread within groups that have none
    assert canonical_name("critic/score/std") == "critic_score_std"
    mapping = map_names(["critic/score/mean", "critic/score/std"])
    assert mapping.columns["critic/score/std"] == "critic_score_std"
    assert "reward_std" not in mapping.columns.values()


def test_a_log_with_both_kls_keeps_the_reference_kl_as_kl():
    # a custom GRPO loop logging both (ShibukiZero/assignment5-alignment's metrics.jsonl)
    mapping = map_names(["train_reward", "approx_kl", "reference_kl"])
    assert mapping.columns["reference_kl"] == "kl"
    assert mapping.columns["approx_kl"] == "approx_kl"


def test_unknown_metrics_are_kept_under_a_sanitised_name_not_dropped():
    mapping = map_names(["reward", "my metric/with spaces", "2nd/thing"])
    assert mapping.columns["my metric/with spaces"] == "my_metric_with_spaces"
    assert mapping.columns["2nd/thing"] == "m_2nd_thing"
    assert sanitise("a//b") == "a_b"


def test_reward_rule_prefers_the_trl_total_reward():
    src, rule, _ = choose_reward(["rewards/acc/mean", "rewards/fmt/mean", "reward", "accuracy"])
    assert (src, rule) == ("reward", "reward")
    assert choose_reward(["train/rewards/acc/mean", "train/reward"])[0] == "train/reward"
    assert choose_reward(["critic/score/mean", "critic/rewards/mean"])[0] == "critic/score/mean"


def test_reward_rule_takes_the_single_reward_function_when_there_is_no_total():
    src, rule, _ = choose_reward(["rewards/acc/mean", "rewards/acc/std", "kl"])
    assert (src, rule) == ("rewards/acc/mean", "single rewards/*/mean")


def test_several_reward_functions_without_a_total_are_ambiguous_and_say_so():
    with pytest.raises(NoRewardError, match=r"several reward functions.*reward_key"):
        choose_reward(["rewards/a/mean", "rewards/b/mean"])


def test_reward_rule_falls_back_to_accuracy_like_names():
    src, rule, _ = choose_reward(["loss", "train/accuracy", "kl"])
    assert (src, rule) == ("train/accuracy", "accuracy-like")


@pytest.mark.parametrize(
    "name", ["env/reward_mean", "objective/scores", "total_reward", "success_rate"]
)
def test_reward_like_names_of_other_trainers_are_found(name):
    assert choose_reward(["loss", name, "kl"])[0] == name


def test_names_in_another_case_map_and_choose_the_reward_like_their_lower_case_form():
    # a hand-made CSV ("Step,Reward,KL") or a title-cased export
    assert choose_reward(["Reward", "KL", "Entropy"])[:2] == ("Reward", "reward")
    assert choose_reward(["Train/Reward", "Eval/Reward"])[0] == "Train/Reward"
    assert choose_reward(["Accuracy", "Loss"])[:2] == ("Accuracy", "accuracy-like")
    assert [canonical_name(n) for n in ("KL", "Train/Entropy", "Eval/Reward")] == [
        "kl",
        "entropy",
        "eval_reward",
    ]


def test_evaluation_metric_is_the_last_resort_with_a_note():
    src, rule, notes = choose_reward(["eval/reward", "train/entropy"])
    assert src == "eval/reward" and rule.startswith("evaluation fallback")
    assert notes and "evaluation metric" in notes[0]


def test_no_reward_lists_the_metrics_found():
    with pytest.raises(NoRewardError, match=r"metrics found: \['grad_norm', 'kl'\]"):
        choose_reward(["kl", "grad_norm"])


def test_reward_key_overrides_the_rule_by_source_or_canonical_name():
    assert (
        choose_reward(["reward", "rewards/acc/mean"], "rewards/acc/mean")[0] == "rewards/acc/mean"
    )
    assert choose_reward(["train/reward", "x"], "reward")[0] == "train/reward"
    with pytest.raises(NoRewardError, match=r"'nope' not in the log"):
        choose_reward(["reward"], "nope")


def test_two_sources_of_one_canonical_name_are_both_kept():
    mapping = map_names(["train/reward", "reward", "kl"])
    assert mapping.columns["reward"] == "reward"  # TRL name has priority
    assert mapping.columns["train/reward"] == "train_reward"
    assert any("train/reward" in n for n in mapping.notes)
    assert len(set(mapping.columns.values())) == len(mapping.columns)


def test_a_name_collision_note_names_the_source_that_holds_the_variable():
    # TRL's 'completions/mean_length' beside an older 'completion_length' (a real log,
    # chaos_llama3.2_3b_multiagent_g4): the note read "('completion_length' is
    # 'completion_length')", naming the variable for the metric that holds it
    mapping = map_names(["reward", "completions/mean_length", "completion_length"])
    assert mapping.columns["completions/mean_length"] == "completion_length"
    assert mapping.notes == (
        "metric 'completion_length' kept as 'completion_length_2' "
        "('completion_length' is 'completions/mean_length')",
    )
    # the reward's own note is unchanged
    assert "('reward' is 'reward')" in map_names(["reward", "train/reward"]).notes[0]


def test_mapping_table_documents_every_canonical_name():
    rows = mapping_table()
    assert {r["canonical"] for r in rows} >= set(METRIC_ALIASES)


def test_reward_key_with_or_without_the_train_prefix_selects_the_metric_in_every_format():
    # TRL's trainer_state logs 'rewards/acc/mean', its wandb/TensorBoard export
    # 'train/rewards/acc/mean': one --reward-key must select it in both (a mixed ingest); the
    # TRL spelling of the key was "not in the log" of the export, and 'train/reward' was not in
    # a trainer_state that logs 'reward'
    trainer_state = ["reward", "rewards/acc/mean", "rewards/fmt/mean"]
    export = ["train/reward", "train/rewards/acc/mean", "train/rewards/fmt/mean"]
    for key in ("rewards/acc/mean", "train/rewards/acc/mean"):
        assert choose_reward(trainer_state, key)[0] == "rewards/acc/mean"
        assert choose_reward(export, key)[0] == "train/rewards/acc/mean"
    assert choose_reward(["reward", "kl"], "train/reward")[0] == "reward"
    assert choose_reward(["eval/reward", "train/reward"], "eval_reward")[0] == "eval/reward"
    with pytest.raises(NoRewardError, match="several metrics"):
        choose_reward(["reward", "train/reward"], "train_reward")


def test_lightning_train_underscore_names_of_known_metrics_are_those_metrics(tmp_path):
    # PyTorch Lightning's self.log("train_kl") / ("train_entropy") (its CSVLogger's
    # metrics.csv), beside val_* (already evaluation metrics): the KL and entropy were kept as
    # train_kl / train_entropy, so diagnose's instability and concentration checks found none
    from bayes_grpo.runset.ingest import load_runs

    assert canonical_name("train_kl") == "kl" and canonical_name("Train_Entropy") == "entropy"
    assert canonical_name("train_grad_norm") == "grad_norm"
    # no bare train_ prefix rule: the HF summary's names and unknown names keep their own
    for name in ("train_runtime", "train_loss", "train_samples_per_second", "train_foo"):
        assert canonical_name(name) == name
    # the canonical name's own source comes first; the train_ one is kept beside it
    assert map_names(["reward", "kl", "train_kl"]).columns == {
        "reward": "reward",
        "kl": "kl",
        "train_kl": "train_kl",
    }
    rows = ["step,epoch,train_reward,train_kl,train_entropy,val_reward"]
    rows += [
        f"{s},0,{0.1 + 0.02 * s:.3f},{0.001 * s:.4f},{1.0 - 0.01 * s:.3f},"
        + (f"{0.1 + 0.015 * s:.3f}" if s % 5 == 0 else "")
        for s in range(1, 31)
    ]
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    ds = load_runs([path])
    assert {"reward", "kl", "entropy", "eval_reward"} <= set(ds.data_vars)
    assert float(ds.kl.isel(run=0).sel(step=10)) == pytest.approx(0.01)


def test_lightnings_per_step_names_of_a_metric_logged_per_step_and_epoch_are_that_metric(tmp_path):
    # self.log("train_reward", on_step=True, on_epoch=True) writes train_reward_step and
    # train_reward_epoch (Lightning's _Metadata.forked_name): no reward was found but the
    # 4-point val_reward, and the run was rejected as too short
    from bayes_grpo.runset.ingest import INGEST_ATTR, load_runs

    assert canonical_name("train_reward_step") == "reward"
    assert canonical_name("train_kl_step") == "kl"
    assert canonical_name("train_reward_epoch") == "train_reward_epoch"
    rows = ["epoch,step,train_reward_step,train_kl_step,train_reward_epoch,val_reward"]
    for s in range(1, 41):
        rows.append(f"0,{s},{0.1 + 0.01 * s:.3f},{0.001 * s:.4f},,")
        if s % 10 == 0:
            rows.append(f"{s // 10},{s},,,{0.1 + 0.01 * s:.3f},{0.2 + 0.005 * s:.3f}")
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    ds = load_runs([path])
    (facts,) = json.loads(ds.attrs[INGEST_ATTR]).values()
    assert facts["reward_source"] == "train_reward_step" and facts["reward_rule"] == "reward"
    assert {"reward", "kl", "eval_reward", "train_reward_epoch"} <= set(ds.data_vars)
    assert int(ds.reward.notnull().sum()) == 40
