"""Every supported log format, written here by the tests, ingests into the same run set."""

import json
import pickle

import numpy as np
import pytest
import yaml

from bayes_grpo.runset import RUN_COORDS, load_runset, run_coords, runset_warnings, save_runset
from bayes_grpo.runset.ingest import INGEST_ATTR, load_runs, rejected_runs, runset_summary

N = 12
REWARD = [round(0.1 + 0.05 * i, 4) for i in range(N)]


def _trl_entry(step, reward, **extra):
    return {
        "step": step,
        "epoch": step / 100,
        "loss": 0.01,
        "grad_norm": 0.5,
        "learning_rate": 1e-6 * min(1.0, step / 3),
        "reward": reward,
        "reward_std": 0.2,
        "rewards/accuracy/mean": reward,
        "kl": 0.001 * step,
        "frac_reward_zero_std": 0.1,
        "clip_ratio/region_mean": 0.0,
        "entropy": 1.0 - 0.01 * step,
        **extra,
    }


def _trainer_state(log_history):
    return {"global_step": len(log_history), "logging_steps": 1, "log_history": log_history}


def _write_state(folder, n=N, rewards=REWARD, with_eval=True):
    folder.mkdir(parents=True, exist_ok=True)
    history = [_trl_entry(s + 1, rewards[s]) for s in range(n)]
    if with_eval:
        history.insert(5, {"step": 5, "epoch": 0.05, "eval_reward": 0.33, "eval_loss": 0.9})
        history.append({"step": n, "eval_reward": 0.44, "eval_loss": 0.8})
    history.append({"step": n, "train_runtime": 12.0, "train_loss": 0.01, "total_flos": 0.0})
    (folder / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    return folder / "trainer_state.json"


# ----------------------------------------------------------------------------- trainer_state


@pytest.mark.parametrize(
    ("schedule", "warned"),
    [
        (lambda s: 1e-6 * (1 - s / (N + 1)), True),  # TRL's default linear decay to 0
        (lambda s: 1e-6, False),  # constant
        (lambda s: 1e-6 * (1 - 0.2 * s / N), False),  # a mild decay (to 80% of the peak)
    ],
)
def test_a_learning_rate_schedule_is_reported_since_the_law_takes_the_rate_as_constant(tmp_path, schedule, warned):
    folder = tmp_path / "run"
    folder.mkdir()
    history = [_trl_entry(s, REWARD[s - 1], learning_rate=schedule(s)) for s in range(1, N + 1)]
    (folder / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    ds = load_runs([folder / "trainer_state.json"])
    notes = [w for w in runset_warnings(ds).get("run", []) if "follows a schedule" in w]
    assert bool(notes) is warned
    assert float(ds.learning_rate.sel(run="run")) == pytest.approx(schedule(1))  # the peak
    assert "lr" in ds  # the per-step rate is kept


@pytest.mark.parametrize(
    ("configured", "warned"),
    [
        (1e-6, True),  # the run logged 3e-6 throughout: a config of another run beside it
        (3e-6, False),
        (3.5e-6, True),  # 3e-6 throughout is the rate it trained at, no schedule's sampled peak
    ],
)
def test_a_logged_value_that_disagrees_with_the_config_is_warned_about(
    tmp_path, configured, warned
):
    # the README: "first source with a value wins; a disagreeing later source gives a warning";
    # what the run logged (learning rate, constants) was never compared with its config
    folder = tmp_path / "run"
    folder.mkdir()
    history = [_trl_entry(s, REWARD[s - 1], learning_rate=3e-6) for s in range(1, N + 1)]
    (folder / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    (folder / "training_args.json").write_text(json.dumps({"learning_rate": configured}))
    ds = load_runs([folder])
    assert float(ds.learning_rate.sel(run="run")) == configured  # the config still wins
    notes = [w for w in runset_warnings(ds).get("run", []) if "learning_rate:" in w]
    assert bool(notes) is warned
    if warned:
        assert f"gives {configured:g} but constant logged learning rate" in notes[0]


@pytest.mark.parametrize("manifest", [True, False])
def test_a_learning_rate_logged_constant_below_the_configured_one_is_warned_about(
    tmp_path, manifest
):
    # a rate logged as 1e-6 at every step against a configured 2e-6 passed without a word, as
    # a schedule's peak that the logging steps sampled short of; a schedule's may, a constant's
    # cannot
    folder = tmp_path / "run"
    folder.mkdir()
    rates = {"constant": lambda s: 1e-6, "decay": lambda s: 1.8e-6 * (1 - s / (2 * N))}
    for name, rate in rates.items():
        history = [_trl_entry(s, REWARD[s - 1], learning_rate=rate(s)) for s in range(1, N + 1)]
        (folder / name).mkdir()
        (folder / name / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
        if not manifest:
            (folder / name / "training_args.json").write_text(json.dumps({"learning_rate": 2e-6}))
    if manifest:
        (tmp_path / "runs.csv").write_text(
            "path,learning_rate\n" + "".join(f"run/{name},2e-6\n" for name in rates)
        )
        ds = load_runs(manifest=tmp_path / "runs.csv")
    else:
        ds = load_runs([folder])
    notes = {
        run: [w for w in ws if "learning_rate:" in w] for run, ws in runset_warnings(ds).items()
    }
    assert len(notes["constant"]) == 1
    assert "gives 2e-06 but constant logged learning rate 'learning_rate' gives 1e-06" in (
        notes["constant"][0]
    )
    assert notes.get("decay", []) == []  # a decay's first logged step is short of its peak
    assert float(ds.learning_rate.sel(run="constant")) == 2e-6  # the config still wins


def test_values_a_console_log_rounded_agree_with_the_config(tmp_path):
    # verl prints every value to 3 decimals (actor/kl_coef:0.000 for a kl_loss_coef of 1e-4),
    # TRL to 4 significant digits ('3.142e-06'): the rounding read as a config of another run
    run_dir = tmp_path / "verl_grpo"
    run_dir.mkdir()
    (run_dir / "verl.log").write_text(
        "\n".join(
            f"step:{s} - actor/kl_coef:0.000 - actor/lr:0.000 - critic/score/mean:{r:.3f}"
            for s, r in enumerate(REWARD, start=1)
        )
    )
    (run_dir / "config.yaml").write_text(
        "actor_rollout_ref:\n  actor: {use_kl_loss: true, kl_loss_coef: 0.0001}\n"
    )
    trl = tmp_path / "trl"
    trl.mkdir()
    history = [_trl_entry(s, REWARD[s - 1], learning_rate=3.142e-6) for s in range(1, N + 1)]
    (trl / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    (trl / "training_args.json").write_text(json.dumps({"learning_rate": 3.14159e-6}))
    ds = load_runs([tmp_path])
    assert run_coords(ds, "verl")["beta"] == 0.0001
    warned = [w for ws in runset_warnings(ds).values() for w in ws if " gives " in w]
    assert warned == []


@pytest.mark.parametrize(
    ("config", "policy"),
    [
        # a script's config with a tokenizer section of its own, ahead of the model's
        (
            "tokenizer:\n  _name_or_path: Qwen/Qwen2.5-7B-Instruct\n"
            "model:\n  _name_or_path: Qwen/Qwen2.5-0.5B-Instruct\n",
            "Qwen/Qwen2.5-0.5B-Instruct",
        ),
        # verl's reward model and critic (reward_model.model.path, critic.model.path) ahead of
        # the actor's actor_rollout_ref.model.path
        (
            "reward_model:\n  model: {path: Skywork/Skywork-Reward-Llama-3.1-8B}\n"
            "critic:\n  model: {path: Qwen/Qwen2.5-7B-Instruct}\n"
            "actor_rollout_ref:\n  model: {path: Qwen/Qwen2.5-0.5B-Instruct}\n",
            "Qwen/Qwen2.5-0.5B-Instruct",
        ),
        # a tokenizer's path alone names no model
        ("tokenizer:\n  _name_or_path: Qwen/Qwen2.5-7B-Instruct\n", ""),
    ],
)
def test_a_tokenizers_or_reward_models_path_never_becomes_the_runs_model(tmp_path, config, policy):
    # hyperparameter_key took the first key ending in a model alias ('._name_or_path',
    # '.model.path') in the config's order: the tokenizer's or the reward model's path
    run_dir = tmp_path / "verl_grpo"
    run_dir.mkdir()
    (run_dir / "verl.log").write_text(
        "\n".join(f"step:{s} - critic/score/mean:{r:.3f}" for s, r in enumerate(REWARD, start=1))
    )
    (run_dir / "config.yaml").write_text(config)
    assert run_coords(load_runs([tmp_path]), "verl")["model"] == policy


def test_trainer_state_reward_curve_and_eval_entries_go_to_eval_variables(tmp_path):
    path = _write_state(tmp_path / "run_a")
    ds = load_runs([path])
    assert list(ds.run.values) == ["run_a"]
    np.testing.assert_allclose(ds.reward.sel(run="run_a").values, REWARD)
    assert ds.eval_reward.sel(run="run_a", step=5) == 0.33
    assert ds.eval_reward.sel(run="run_a", step=N) == 0.44
    assert int(ds.eval_reward.notnull().sum()) == 2  # evaluation is not part of the training curve
    assert {
        "reward_std",
        "kl",
        "entropy",
        "grad_norm",
        "clip_ratio",
        "frac_reward_zero_std",
        "lr",
    } <= set(ds.data_vars)
    assert "train_runtime" not in ds.data_vars  # end-of-training summary is not a curve point
    assert run_coords(ds, "run_a")["source"].startswith("trainer_state:")


def test_output_dir_with_checkpoints_takes_the_latest_state(tmp_path):
    out = tmp_path / "out"
    _write_state(out / "checkpoint-5", n=5, rewards=REWARD, with_eval=False)
    _write_state(out / "checkpoint-12", n=12, with_eval=False)
    ds = load_runs([out])
    assert list(ds.run.values) == ["out"]
    assert int(ds.reward.notnull().sum()) == 12
    assert "checkpoint-12" in json.loads(ds.attrs[INGEST_ATTR])["out"]["file"]


def test_runner_metadata_beside_trainer_state_fills_every_coordinate(tmp_path):
    run_dir = tmp_path / "g4_s0"
    _write_state(run_dir)
    meta = {
        "schema": "bayes_grpo_run/1",
        "run_id": "g4-seed0",
        "model": "tiny-gpt2",
        "model_size": 100000,
        "group_size": 4,
        "learning_rate": 1e-3,
        "momentum": 0.9,
        "momentum_convention": "ema",
        "k_ref": 2,
        "beta": 0.04,
        "seed": 0,
        "prompts_per_step": 4,
        "completions_per_step": 16,
        "k_ref_mapping": {"steps_per_generation": 2},
    }
    (run_dir / "bayes_grpo_run.json").write_text(json.dumps(meta))
    ds = load_runs([tmp_path])
    # a run_id other than its folder's name: the folder was renamed since, and names the run
    coords = run_coords(ds, "g4_s0")
    assert any("names the run 'g4-seed0'" in w for w in runset_warnings(ds)["g4_s0"])
    for name in RUN_COORDS:
        if name != "source":
            assert coords[name] == meta[name], name


def test_a_manifest_that_renames_the_model_does_not_keep_another_models_size(tmp_path):
    # a manifest's model over a run folder whose runner metadata names another model kept that
    # model's size: the curvature regression read tiny-gpt2's 100000 parameters as Qwen's
    run_dir = tmp_path / "run"
    _write_state(run_dir)
    (run_dir / "bayes_grpo_run.json").write_text(json.dumps({"model": "tiny-gpt2", "model_size": 100000, "group_size": 4}))
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("path,run,model\nrun,A,Qwen/Qwen2.5-0.5B\n")
    ds = load_runs([], manifest=manifest)
    c = run_coords(ds, "A")
    assert c["model"] == "Qwen/Qwen2.5-0.5B" and not np.isfinite(float(c["model_size"]))
    assert c["group_size"] == 4  # the rest of the metadata still counts
    assert any("model_size" in w and "for model 'tiny-gpt2'" in w and "left unknown" in w for w in runset_warnings(ds)["A"])
    # the size given with the model is kept
    manifest.write_text("path,run,model,model_size\nrun,A,Qwen/Qwen2.5-0.5B,494000000\n")
    assert run_coords(load_runs([], manifest=manifest), "A")["model_size"] == 494000000
    # and the metadata's own size, where nothing renames its model
    alone = load_runs([run_dir])
    assert run_coords(alone, str(alone.run.values[0]))["model_size"] == 100000


def test_training_args_json_and_model_config_beside_the_log(tmp_path):
    run_dir = tmp_path / "runx"
    _write_state(run_dir / "checkpoint-12")
    args = {
        "num_generations": 8,
        "learning_rate": 5e-6,
        "beta": 0.0,
        "seed": 7,
        "optim": "sgd",
        "optim_args": "momentum=0.8",
        "num_iterations": 1,
        "gradient_accumulation_steps": 2,
        "steps_per_generation": 4,
    }
    (run_dir / "training_args.json").write_text(json.dumps(args))
    model = {
        "_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct",
        "model_type": "qwen2",
        "hidden_size": 896,
        "num_hidden_layers": 24,
        "vocab_size": 151936,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "intermediate_size": 4864,
        "hidden_act": "silu",
        "tie_word_embeddings": True,
    }
    (run_dir / "checkpoint-12" / "config.json").write_text(json.dumps(model))
    ds = load_runs([run_dir])
    c = run_coords(ds, "runx")
    assert (
        c["group_size"] == 8 and c["learning_rate"] == 5e-6 and c["beta"] == 0.0 and c["seed"] == 7
    )
    assert c["momentum"] == 0.8 and c["momentum_convention"] == "heavy_ball"
    assert c["k_ref"] == 2.0  # 1 iteration x 4 generation steps / 2 accumulation steps
    assert c["model"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert c["model_size"] == pytest.approx(494e6, rel=0.01)  # Qwen2.5-0.5B has 494M parameters


def test_a_gemma_3_configs_gated_mlp_is_counted_in_its_model_size(tmp_path):
    # Gemma 2/3 name the activation hidden_activation (google/gemma-3-1b-it's config.json has
    # no hidden_act): the gated MLP was counted as a plain one, 0.79B for the 1.0B model
    run_dir = tmp_path / "gemma"
    run_dir.mkdir()
    _write_state(run_dir)
    gemma = {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 1152,
        "intermediate_size": 6912,
        "num_attention_heads": 4,
        "num_hidden_layers": 26,
        "num_key_value_heads": 1,
        "vocab_size": 262144,
    }
    (run_dir / "config.json").write_text(json.dumps(gemma))
    size = run_coords(load_runs([run_dir]), "gemma")["model_size"]
    assert size == pytest.approx(999.9e6, rel=0.01)  # gemma-3-1b: 999,885,952 parameters


def test_a_mixture_of_experts_model_size_is_left_unknown_and_said(tmp_path):
    # one MLP a layer: gpt-oss-20b (21B parameters, 3.6B active per token) read as 2.4B, a size
    # the curvature regression on log model_size took for the model's
    run_dir = tmp_path / "oss"
    run_dir.mkdir()
    _write_state(run_dir)
    gpt_oss = {
        "_name_or_path": "openai/gpt-oss-20b",
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "hidden_act": "silu",
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "head_dim": 64,
        "num_attention_heads": 64,
        "num_hidden_layers": 24,
        "num_key_value_heads": 8,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "vocab_size": 201088,
        "tie_word_embeddings": False,
    }
    (run_dir / "config.json").write_text(json.dumps(gpt_oss))
    ds = load_runs([run_dir])
    coords = run_coords(ds, "oss")
    assert np.isnan(coords["model_size"]) and coords["model"] == "openai/gpt-oss-20b"
    (note,) = [w for w in runset_warnings(ds)["oss"] if "model_size" in w]
    assert "is a mixture of experts (num_local_experts = 32)" in note and "left unknown" in note
    # a manifest's size is the run's, without the note
    (tmp_path / "runs.csv").write_text("path,model_size\noss,2.1e10\n")
    ds = load_runs(manifest=tmp_path / "runs.csv")
    assert run_coords(ds, "oss")["model_size"] == 2.1e10
    assert not any("mixture of experts" in w for w in runset_warnings(ds).get("oss", []))


class _Bomb:
    def __reduce__(self):
        return (_explode, ())


def _explode():
    raise AssertionError("training_args.bin was unpickled")


def test_training_args_bin_never_runs_the_code_of_its_pickle(tmp_path):
    import zipfile

    run_dir = tmp_path / "r"
    _write_state(run_dir)
    # a bare pickle (not torch.save's zip): not read, and said so
    (run_dir / "training_args.bin").write_bytes(pickle.dumps(_Bomb()))
    ds = load_runs([run_dir])
    msgs = " ".join(runset_warnings(ds)["r"])
    assert "training_args.bin: not read (not a torch.save zip file" in msgs
    # the same pickle inside torch.save's zip layout is read with inert stand-ins: nothing runs
    with zipfile.ZipFile(run_dir / "training_args.bin", "w") as archive:
        archive.writestr("training_args/data.pkl", pickle.dumps(_Bomb()))
    ds = load_runs([run_dir])
    msgs = " ".join(runset_warnings(ds)["r"])
    assert "training_args.bin: not read (it holds no arguments object" in msgs


def test_the_trainers_training_args_bin_gives_the_runs_settings(tmp_path):
    # the Trainer's own layout: trainer_state.json and training_args.bin (torch.save of the
    # GRPOConfig), no JSON of the arguments: G, lr, beta, seed, Adam beta1 and K_ref are in it
    torch = pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    run_dir = tmp_path / "qwen-grpo"
    _write_state(run_dir)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        num_generations=8,
        learning_rate=1e-6,
        beta=0.04,
        per_device_train_batch_size=8,
        steps_per_generation=4,
        num_iterations=2,
        seed=7,
        report_to=[],
        use_cpu=True,
    )
    torch.save(args, run_dir / "training_args.bin")
    ds = load_runs([run_dir])
    c = run_coords(ds, "qwen-grpo")
    assert (c["group_size"], c["learning_rate"], c["beta"], c["seed"]) == (8, 1e-6, 0.04, 7)
    assert (c["momentum"], c["momentum_convention"], c["k_ref"]) == (0.9, "ema", 8)
    sources = json.loads(ds.attrs[INGEST_ATTR])["qwen-grpo"]["hyperparameter_sources"]
    assert "training_args.bin (read without running its code)" in sources["learning_rate"]


def test_a_checkpoints_training_args_bin_is_not_reported_when_the_run_folder_has_the_json(
    tmp_path,
):
    run_dir = tmp_path / "out"
    _write_state(run_dir / "checkpoint-12")
    (run_dir / "checkpoint-12" / "training_args.bin").write_bytes(b"not unpickled")
    (run_dir / "training_args.json").write_text(json.dumps({"num_generations": 8}))
    ds = load_runs([run_dir])
    assert run_coords(ds, "out")["group_size"] == 8
    assert not any("training_args.bin" in w for w in runset_warnings(ds).get("out", []))


# ----------------------------------------------------------------------------- CSV / JSONL


def test_csv_with_wandb_style_names(tmp_path):
    path = tmp_path / "wandb_run.csv"
    lines = ["Step,train/reward,train/kl,train/rewards/acc/mean,train/global_step,custom/thing"]
    lines += [f"{s + 1},{REWARD[s]},0.01,{REWARD[s]},{s + 1},{s}" for s in range(N)]
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    run = "wandb_run"
    np.testing.assert_allclose(ds.reward.sel(run=run).values, REWARD)
    assert {"kl", "rewards_acc_mean", "custom_thing"} <= set(ds.data_vars)  # unknown kept


def test_glob_patterns_are_expanded_like_the_shell_does(tmp_path, monkeypatch):
    # README's quick start: load_runs(["path/to/trl/output_dir", "exports/*.csv"])
    _write_state(tmp_path / "out" / "run_a")
    (tmp_path / "exports").mkdir()
    for name in ("b", "c"):
        lines = ["step,reward"] + [f"{s + 1},{REWARD[s]}" for s in range(N)]
        (tmp_path / "exports" / f"{name}.csv").write_text("\n".join(lines))
    (tmp_path / "exports" / "notes.txt").write_text("not a log")
    monkeypatch.chdir(tmp_path)
    ds = load_runs(["out/run_a", "exports/*.csv"])
    assert sorted(ds.run.values) == ["b", "c", "run_a"]
    with pytest.raises(FileNotFoundError, match=r"nothing\*\.csv: no file or directory matches"):
        load_runs(["nothing*.csv"])


def test_csv_with_verl_names(tmp_path):
    path = tmp_path / "verl.csv"
    lines = [
        "step,critic/score/mean,critic/rewards/mean,actor/entropy,actor/pg_clipfrac,val-core/gsm8k/acc/mean@1"
    ]
    lines += [
        f"{s},{REWARD[s]},{REWARD[s] - 0.01},1.0,0.1,{'' if s % 4 else 0.5}" for s in range(N)
    ]
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="verl").values, REWARD)
    assert {"entropy", "clip_ratio", "critic_rewards_mean", "eval_gsm8k_acc_mean_1"} <= set(
        ds.data_vars
    )
    assert json.loads(ds.attrs[INGEST_ATTR])["verl"]["reward_source"] == "critic/score/mean"


def test_wandb_long_export_with_several_runs_in_one_file(tmp_path):
    path = tmp_path / "sweep.csv"
    lines = ["run_name,metric,step,value"]
    for run in ("lr1e-6", "lr3e-6"):
        for s in range(N):
            lines.append(f"{run},train/reward,{s},{REWARD[s]}")
            lines.append(f"{run},train/entropy,{s},1.0")
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert sorted(ds.run.values) == ["lr1e-6", "lr3e-6"]
    assert ds.sizes["step"] == N


def test_a_long_exports_config_columns_give_each_runs_coordinates(tmp_path):
    # the columns beside run_name,metric,step,value (a run's config on every row) were dropped
    # unseen: G, the learning rate and the model left unknown, where a wide file reads them
    path = tmp_path / "sweep.csv"
    lines = ["run_name,metric,step,value,learning_rate,num_generations,model"]
    for run, lr, g in (("a", 1e-6, 4), ("b", 2e-6, 8)):
        for s in range(N):
            lines.append(f"{run},train/reward,{s},{REWARD[s]},{lr},{g},Qwen2.5-1.5B")
            lines.append(f"{run},train/entropy,{s},1.0,{lr},{g},Qwen2.5-1.5B")
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert run_coords(ds, "a")["group_size"] == 4
    assert run_coords(ds, "b")["group_size"] == 8
    assert run_coords(ds, "b")["learning_rate"] == pytest.approx(2e-6)
    assert {run_coords(ds, r)["model"] for r in ("a", "b")} == {"Qwen2.5-1.5B"}
    np.testing.assert_allclose(ds.reward.sel(run="a").values, REWARD)
    # a field repeated on each metric's row is logged once a step, not a repeated step
    assert not any("more than once" in w for ws in runset_warnings(ds).values() for w in ws)


def test_a_long_exports_time_of_each_row_is_no_repeated_step(tmp_path):
    # a TensorBoard export 'wall_time,tag,step,value': read as a field of the step (daa0564),
    # its per-row times made every step "logged more than once (a resumed run?)"
    path = tmp_path / "tb_export.csv"
    lines = ["wall_time,tag,step,value"]
    for s in range(N):
        lines.append(f"{1.7e9 + 2 * s:.3f},train/reward,{s},{REWARD[s]}")
        lines.append(f"{1.7e9 + 2 * s + 0.4:.3f},train/kl,{s},0.01")
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    warnings = runset_warnings(ds)["tb_export"]
    assert not any("more than once" in w for w in warnings)
    assert any("column ['wall_time'] holds several values at one step" in w for w in warnings)
    assert "wall_time" not in ds and "kl" in ds
    np.testing.assert_allclose(ds.reward.sel(run="tb_export").values, REWARD)


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_two_wandb_runs_of_one_display_name_stay_two_runs_told_apart_by_run_id(tmp_path, kind):
    path = tmp_path / f"sweep.{kind}"
    lines = ["run_id,run_name,metric,step,value"]
    for run_id, name, shift in (("a1", "grpo", 0.0), ("b2", "grpo", 0.5), ("c3", "other", 0.0)):
        if kind == "csv":
            lines += [f"{run_id},{name},train/reward,{s},{REWARD[s] + shift}" for s in range(N)]
        else:
            lines += [
                json.dumps({"run_id": run_id, "run_name": name, "step": s, "reward": r + shift})
                for s, r in enumerate(REWARD)
            ]
    path.write_text("\n".join(lines if kind == "csv" else lines[1:]))
    ds = load_runs([path])
    assert sorted(ds.run.values) == ["grpo_a1", "grpo_b2", "other"]
    np.testing.assert_allclose(ds.reward.sel(run="grpo_a1").values, REWARD)
    np.testing.assert_allclose(ds.reward.sel(run="grpo_b2").values, np.add(REWARD, 0.5))


def _wandb_panel(tmp_path, first: str, second: str):
    """A wandb panel export (Step, "<run> - train/reward" with its __MIN, a second run's reward at
    half the first's), loaded."""
    path = tmp_path / "panel.csv"
    lines = [f"Step,{first} - train/reward,{first} - train/reward__MIN,{second} - train/reward"]
    lines += [f"{s},{REWARD[s]},{REWARD[s]},{REWARD[s] / 2}" for s in range(N)]
    path.write_text("\n".join(lines))
    return load_runs([path])


def test_wandb_panel_export_splits_runs(tmp_path):
    ds = _wandb_panel(tmp_path, "runA", "runB")
    assert sorted(ds.run.values) == ["runA", "runB"]
    np.testing.assert_allclose(ds.reward.sel(run="runB").values, np.array(REWARD) / 2)


def test_jsonl_plain_and_typed_records(tmp_path):
    plain = tmp_path / "a" / "metrics.jsonl"
    plain.parent.mkdir()
    plain.write_text(
        "\n".join(json.dumps({"step": s, "reward": REWARD[s], "kl": 0.1}) for s in range(N))
    )
    typed = tmp_path / "b" / "metrics.jsonl"
    typed.parent.mkdir()
    rows = [{"type": "eval", "grpo_step": 0, "reward": 0.05, "accuracy": 0.05}]
    for s in range(1, N + 1):
        rows.append({"type": "rollout", "grpo_step": s, "reward": REWARD[s - 1], "group_size": 8.0})
        rows.append(
            {
                "type": "train",
                "grpo_step": s,
                "loss": 0.1,
                "kl_coef": 0.02,
                "learning_rate": 2e-5,
                "loss_type": "grpo",
            }
        )
    typed.write_text("\n".join(json.dumps(r) for r in rows))
    ds = load_runs([tmp_path])
    assert sorted(ds.run.values) == ["a", "b"]
    np.testing.assert_allclose(ds.reward.sel(run="b").dropna("step").values, REWARD)
    assert ds.eval_reward.sel(run="b", step=0) == 0.05
    c = run_coords(ds, "b")
    assert (c["group_size"], c["beta"], c["learning_rate"]) == (8.0, 0.02, 2e-5)  # logged constants
    assert any(
        "loss_type" in w for w in runset_warnings(ds)["b"]
    )  # text field reported, not a metric


def test_jsonl_nested_metrics_are_read_under_joined_names_and_lists_are_reported(tmp_path):
    path = tmp_path / "nested.jsonl"
    rows = [
        {"step": s, "train": {"reward": REWARD[s], "kl": 0.1}, "per_func": [0.5, 1.0]}
        for s in range(N)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="nested").values, REWARD)
    assert "kl" in ds.data_vars
    assert any("per_func" in w for w in runset_warnings(ds)["nested"])


# ----------------------------------------------------------------------------- TensorBoard


def test_tensorboard_event_file_with_grpo_config_text_summary(tmp_path):
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    logdir = tmp_path / "out" / "runs" / "Jan01_host"
    writer = torch_tb.SummaryWriter(str(logdir))
    args = {
        "output_dir": "out",
        "run_name": "tb-run",
        "num_generations": 16,
        "learning_rate": 1e-6,
        "beta": 0.04,
        "seed": 3,
        "adam_beta1": 0.85,
        "optim": "adamw_torch",
        "num_iterations": 2,
        "gradient_accumulation_steps": 4,
        "steps_per_generation": 4,
    }
    writer.add_text("args", json.dumps(args, indent=2))
    writer.add_text(
        "model_config",
        json.dumps(
            {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 100}
        ),
    )
    for s in range(1, N + 1):
        writer.add_scalar("train/reward", REWARD[s - 1], s)
        writer.add_scalar("train/kl", 0.01 * s, s)
    writer.add_scalar("eval/reward", 0.5, N)
    writer.close()
    ds = load_runs([tmp_path / "out"])
    assert list(ds.run.values) == ["tb-run"]
    np.testing.assert_allclose(ds.reward.sel(run="tb-run").values, REWARD)
    assert ds.eval_reward.sel(run="tb-run", step=N) == 0.5
    c = run_coords(ds, "tb-run")
    assert (c["group_size"], c["learning_rate"], c["beta"], c["seed"]) == (16, 1e-6, 0.04, 3)
    assert (c["momentum"], c["momentum_convention"], c["k_ref"]) == (0.85, "ema", 2.0)
    assert c["model"].startswith("gpt2-") and c["model_size"] > 0


def test_the_hparams_event_file_the_trainer_writes_beside_the_run_is_no_run(tmp_path):
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    logdir = tmp_path / "out" / "runs" / "Jan01_host"
    writer = torch_tb.SummaryWriter(str(logdir))
    args = {"run_name": "tb-run", "num_generations": 4, "learning_rate": 1e-6}
    writer.add_text("args", json.dumps(args))
    # what the HF TensorBoardCallback does at the start of training: a <time.time()>/ subfolder
    writer.add_hparams(args, metric_dict={})
    for s in range(1, N + 1):
        writer.add_scalar("train/reward", REWARD[s - 1], s)
    writer.close()
    assert len(list(logdir.glob("*/events.out.tfevents.*"))) == 1
    ds = load_runs([tmp_path / "out"], on_error="raise")
    assert list(ds.run.values) == ["tb-run"] and rejected_runs(ds) == {}
    assert run_coords(ds, "tb-run")["group_size"] == 4


def test_add_hparams_with_final_metrics_in_a_custom_loop_is_no_run(tmp_path):
    # writer.add_hparams(hparams, {"hparam/final_reward": r}) writes that metric at step 0 into
    # the <time>/ file: it was read as a run of one point and rejected (--strict: no ingest)
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    writer = torch_tb.SummaryWriter(str(tmp_path / "exp_g8"))
    for s in range(1, N + 1):
        writer.add_scalar("train/reward", REWARD[s - 1], s)
    writer.add_hparams({"lr": 1e-6, "group_size": 8}, {"hparam/final_reward": REWARD[-1]})
    writer.close()
    ds = load_runs([tmp_path], on_error="raise")
    assert list(ds.run.values) == ["exp_g8"] and rejected_runs(ds) == {}


def test_a_custom_loops_add_hparams_gives_its_hyperparameters(tmp_path):
    # the <time>/ file of add_hparams is no run, and it was not read at all: a loop that logs
    # its settings only there got none
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    writer = torch_tb.SummaryWriter(str(tmp_path / "exp"))
    for s in range(1, N + 1):
        writer.add_scalar("train/reward", REWARD[s - 1], s)
    hparams = {"lr": 1e-6, "group_size": 8, "beta": 0.04, "seed": 3, "model": "Qwen/Qwen2.5-0.5B"}
    writer.add_hparams(hparams, {})
    writer.close()
    c = run_coords(load_runs([tmp_path]), "exp")
    assert (c["learning_rate"], c["group_size"], c["beta"], c["seed"]) == (1e-6, 8, 0.04, 3)
    assert c["model"] == "Qwen/Qwen2.5-0.5B"


# ----------------------------------------------------------------------------- console


def _console_dict(step, reward, as_strings):
    d = {
        "loss": 0.0,
        "grad_norm": 0.2,
        "learning_rate": 1e-5,
        "reward": reward,
        "reward_std": 0.1,
        "kl": 0.0,
        "epoch": step / 1000,
    }
    return {k: (f"{v:.4g}" if as_strings else v) for k, v in d.items()}


def test_console_dicts_with_string_values_and_steps_from_the_progress_bar(tmp_path):
    lines = ["Loading weights: 100%|##| 427/427 [00:00<00:00]", "tokens {'eos_token_id': 1}"]
    stride, total = 5, 5 * N
    for s in range(1, total + 1):
        lines.append(f" {s}/{total} [00:0{s % 10}<00:10,  3.2s/it]")
        if s % stride == 0:
            lines.append(f" {s}/{total} [00:0{s % 10}<00:10,  3.2s/it]")
    dicts = [
        repr(_console_dict(i * stride, REWARD[i - 1], as_strings=True)) for i in range(1, N + 1)
    ]
    lines += dicts  # stdout chunk after stderr chunk, as buffering leaves them
    lines.append(repr({"train_runtime": 10.0, "train_steps_per_second": 6.0, "epoch": 0.06}))
    path = tmp_path / "train_seed1.log"
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert list(ds.step.values) == [stride * i for i in range(1, N + 1)]
    np.testing.assert_allclose(ds.reward.sel(run="train_seed1").values, REWARD, rtol=1e-3)


def test_console_dicts_without_any_step_information_are_numbered_with_a_warning(tmp_path):
    path = tmp_path / "job.out"
    path.write_text(
        "\n".join(repr(_console_dict(s, REWARD[s], as_strings=False)) for s in range(N))
    )
    ds = load_runs([path])
    assert list(ds.step.values) == list(range(1, N + 1))
    assert any("order of appearance" in w for w in runset_warnings(ds)["job"])


def test_console_dicts_without_steps_take_logging_steps_from_the_training_args_beside_them(
    tmp_path,
):
    path = tmp_path / "job.out"
    path.write_text(
        "\n".join(repr(_console_dict(s, REWARD[s], as_strings=False)) for s in range(N))
    )
    (tmp_path / "training_args.json").write_text(json.dumps({"logging_steps": 10}))
    ds = load_runs([path])
    assert list(ds.step.values) == list(range(10, 10 * N + 1, 10))
    assert any("logging_steps=10" in w for w in runset_warnings(ds)["job"])


# ----------------------------------------------------------------------------- manifest, ids


@pytest.mark.parametrize("kind", ["csv", "yaml"])
def test_manifest_sets_ids_and_coordinates_and_wins_over_the_logs(tmp_path, kind):
    _write_state(tmp_path / "logs_a" / "run")
    _write_state(tmp_path / "logs_b" / "run")
    (tmp_path / "logs_a" / "run" / "bayes_grpo_run.json").write_text(json.dumps({"group_size": 2}))
    rows = [
        {"path": "logs_a/run", "run": "A", "group_size": 4, "model": "m1", "learning_rate": 1e-6},
        {
            "path": "logs_b/run",
            "run": "B",
            "group_size": 16,
            "model": "m1",
            "momentum_convention": "ema",
        },
    ]
    manifest = tmp_path / f"manifest.{kind}"
    if kind == "csv":
        cols = ["path", "run", "group_size", "model", "learning_rate", "momentum_convention"]
        manifest.write_text(
            "\n".join([",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in rows])
        )
    else:
        manifest.write_text(yaml.safe_dump({"runs": rows}))
    ds = load_runs([], manifest=manifest)
    assert sorted(ds.run.values) == ["A", "B"]
    assert run_coords(ds, "A")["group_size"] == 4  # manifest over bayes_grpo_run.json
    assert any("group_size" in w and "gives 2" in w for w in runset_warnings(ds)["A"])
    assert run_coords(ds, "B")["momentum_convention"] == "ema"


def test_ids_are_unique_shortest_path_suffixes(tmp_path):
    for parent in ("exp1", "exp2"):
        _write_state(tmp_path / parent / "seed0")
    _write_state(tmp_path / "exp1" / "seed1")
    ds = load_runs([tmp_path])
    assert sorted(ds.run.values) == ["exp1/seed0", "exp2/seed0", "seed1"]


def test_two_logs_of_one_folder_are_told_apart_by_their_file_names_not_the_whole_path(tmp_path):
    # a TRL output folder with its trainer_state.json and the console log kept beside it: both
    # file names are generic, so every path suffix was alike and the ids became the absolute
    # path ('tmp/pytest-.../qwen-g8' and '...#2'), different on every machine
    folder = tmp_path / "qwen-g8"
    _write_state(folder)
    (folder / "train.log").write_text(
        "\n".join(repr(_console_dict(s, REWARD[s], as_strings=False)) for s in range(N))
    )
    _write_state(tmp_path / "qwen-g4")
    ds = load_runs([tmp_path])
    assert sorted(ds.run.values) == ["qwen-g4", "qwen-g8/train.log", "qwen-g8/trainer_state.json"]


def test_wandbs_own_debug_logs_in_an_output_folder_are_no_runs(tmp_path):
    # wandb's debug.log prints the run's config as a dict ("config: {'lr': 1e-06, ...}"), which
    # the folder search took for a console log: a run without a reward, rejected, and --strict
    # (on_error="raise") stopped the ingest of a plain TRL + wandb output folder
    out = tmp_path / "out"
    _write_state(out)
    logs = out / "wandb" / "run-20250301_100000-abc123" / "logs"
    logs.mkdir(parents=True)
    config_line = "config_cb None None {'lr': 1e-06, 'group_size': 8, 'epoch': 0}"
    for name in ("debug.log", "debug-internal.log"):
        (logs / name).write_text(f"2025-03-01 10:00:05,123 INFO MainThread:1 {config_line}\n")
    ds = load_runs([tmp_path], on_error="raise")
    assert list(ds.run.values) == ["out"] and rejected_runs(ds) == {}


def test_a_wandb_runs_console_output_is_named_by_its_run_folder_not_files(tmp_path):
    # wandb keeps a run's stdout as wandb/run-<date>-<id>/files/output.log: the id was 'files'
    # (verl's wandb run id is '<project>--<experiment>', dots and dashes included)
    for run_id in ("abc123", "verl_gsm8k--qwen2.5_3b"):
        files = tmp_path / "wandb" / f"run-20250301_100000-{run_id}" / "files"
        files.mkdir(parents=True)
        (files / "output.log").write_text(
            "\n".join(f"step:{s} - critic/score/mean:{r}" for s, r in enumerate(REWARD))
        )
    ds = load_runs([tmp_path])
    assert sorted(ds.run.values) == [
        "run-20250301_100000-abc123",
        "run-20250301_100000-verl_gsm8k--qwen2.5_3b",
    ]


def test_round_trip_keeps_coordinates_warnings_and_ingest_facts(tmp_path):
    path = tmp_path / "job.out"
    path.write_text(
        "\n".join(repr(_console_dict(s, REWARD[s], as_strings=False)) for s in range(N))
    )
    ds = load_runs([path])
    back = load_runset(save_runset(ds, tmp_path / "runs.nc"))
    assert back.attrs == ds.attrs
    assert runset_summary(back).equals(runset_summary(ds))


def test_hf_output_dir_reads_the_curve_from_trainer_state_and_hyperparameters_from_tensorboard(
    tmp_path,
):
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    out = tmp_path / "grpo-out"
    _write_state(out / "checkpoint-12")
    writer = torch_tb.SummaryWriter(str(out / "runs" / "Jan01_12-00-00_host"))
    writer.add_text("args", json.dumps({"num_generations": 4, "learning_rate": 3e-6, "beta": 0.0}))
    writer.add_scalar("train/reward", 0.0, 1)
    writer.close()
    ds = load_runs([out])
    assert list(ds.run.values) == ["grpo-out"]  # one run, not two
    np.testing.assert_allclose(ds.reward.sel(run="grpo-out").dropna("step").values, REWARD)
    c = run_coords(ds, "grpo-out")
    assert (c["group_size"], c["learning_rate"], c["beta"]) == (4, 3e-6, 0.0)


def test_a_reused_output_dir_takes_the_hyperparameters_of_its_latest_training(tmp_path):
    # the output folder of a script run in March and again in April keeps both runs/ folders
    # beside the April Trainer state; the April arguments were passed over for the March ones
    # ("Mar30_..." sorts after "Apr02_...")
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    out = tmp_path / "grpo-out"
    _write_state(out)
    for stamp, folder, lr in (
        (1711792800, "Mar30_10-00-00_host", 1e-6),
        (1712052000, "Apr02_10-00-00_host", 3e-6),
    ):
        writer = torch_tb.SummaryWriter(str(out / "runs" / folder))
        writer.add_text("args", json.dumps({"num_generations": 4, "learning_rate": lr}))
        writer.add_scalar("train/reward", 0.0, 1)
        writer.close()
        (event,) = (out / "runs" / folder).glob("events.out.tfevents.*")
        event.rename(event.with_name(f"events.out.tfevents.{stamp}.host.1.0"))  # its start time
    assert run_coords(load_runs([out]), "grpo-out")["learning_rate"] == 3e-6


def test_manifest_rows_pick_runs_of_a_multi_run_file_and_scale_console_steps(tmp_path):
    sweep = tmp_path / "sweep.csv"
    lines = ["run_name,metric,step,value"]
    lines += [f"{run},train/reward,{s},{REWARD[s]}" for run in ("a", "b") for s in range(N)]
    sweep.write_text("\n".join(lines))
    console = tmp_path / "job.out"
    console.write_text(
        "\n".join(repr(_console_dict(s, REWARD[s], as_strings=False)) for s in range(N))
    )
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        yaml.safe_dump(
            [
                {"path": "sweep.csv", "run_name": "b", "run": "arm-b", "learning_rate": 3e-6},
                {"path": "sweep.csv", "run_name": "zz", "run": "lost"},
                {"path": "job.out", "run": "console", "logging_steps": 10},
            ]
        )
    )
    with pytest.warns(UserWarning, match="not ingested"):
        ds = load_runs([], manifest=manifest)
    assert sorted(ds.run.values) == ["arm-b", "console"]
    assert run_coords(ds, "arm-b")["learning_rate"] == 3e-6
    assert list(ds.reward.sel(run="console").dropna("step").step.values) == [
        10 * (i + 1) for i in range(N)
    ]
    (info,) = rejected_runs(ds).values()
    assert "no run named 'zz'" in info["reason"] and "['a', 'b']" in info["reason"]


def test_console_dicts_of_numpy_scalars_are_read(tmp_path):
    # NumPy >= 2 prints {'reward': np.mean(r)} as {'reward': np.float64(0.1)}: literal_eval
    # refused every dict, and a folder search left the log out without a word
    path = tmp_path / "loop.log"
    path.write_text(
        "\n".join(
            f"{{'step': {s}, 'reward': np.float64({r}), 'kl': np.float32(0.01), 'n': np.int64(8)}}"
            for s, r in enumerate(REWARD)
        )
        + "\n{'step': 12, 'reward': np.float64(nan), 'kl': np.float32(0.01), 'n': np.int64(8)}\n"
    )
    ds = load_runs([tmp_path])
    np.testing.assert_allclose(ds.reward.sel(run="loop").values[:N], REWARD)
    assert np.isnan(ds.reward.sel(run="loop", step=12)) and float(ds.kl.max()) == 0.01


def test_a_console_log_whose_reward_is_accuracy_like_reads_as_its_jsonl_twin_does(tmp_path):
    # a custom loop printing {'step': 1, 'score': 0.4, 'acc': 0.5}: the same records as JSONL
    # ingested with 'score' as the reward, while the console log was "not a recognised log
    # format", even with --reward-key score
    records = [{"step": s + 1, "score": r, "acc": 0.5} for s, r in enumerate(REWARD)]
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "console").mkdir()
    (tmp_path / "jsonl" / "loop.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    (tmp_path / "console" / "loop.log").write_text("\n".join(str(r) for r in records))
    twin = load_runs([tmp_path / "jsonl"])
    for key in (None, "score"):
        ds = load_runs([tmp_path / "console"], reward_key=key)
        np.testing.assert_allclose(ds.reward.sel(run="loop").values, twin.reward.sel(run="loop").values)
        assert list(ds.step.values) == list(range(1, N + 1))


def test_verl_console_lines_ingest_with_their_steps(tmp_path):
    lines = ["(main_task pid=1) some banner"]
    lines += [
        f"(main_task pid=1) step:{s} - critic/score/mean:{REWARD[s - 1]} - actor/entropy:1.{s} - "
        f"val-core/gsm8k/reward/mean@1:{0.5 if s % 5 == 0 else 0.4}"
        for s in range(1, N + 1)
    ]
    path = tmp_path / "verl_run.log"
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="verl_run").values, REWARD)
    assert list(ds.step.values) == list(range(1, N + 1))
    assert {"entropy", "eval_gsm8k_reward_mean_1"} <= set(ds.data_vars)


def test_a_console_log_with_two_trainings_in_a_row_gives_two_runs(tmp_path):
    lines = []
    for seed in range(2):
        for s in range(1, N + 1):
            lines += [f" {s}/{N} [00:01<00:10]", f" {s}/{N} [00:01<00:10]"]
        lines += [
            repr(_console_dict(s, REWARD[s - 1] + seed, as_strings=False)) for s in range(1, N + 1)
        ]
    path = tmp_path / "two_seeds.log"
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert sorted(ds.run.values) == ["part1", "part2"]
    np.testing.assert_allclose(ds.reward.sel(run="part2").values, np.array(REWARD) + 1)
    assert list(ds.step.values) == list(range(1, N + 1))


def _resumed_console_lines(with_bar: bool) -> list[str]:
    """A training logged to step 8, resumed from its step-6 checkpoint (``tee -a``): steps 7-12.

    The first attempt's values at steps 7 and 8 are off by -1, so keeping them would show.
    """
    lines = []
    for s, shift in [(s, -1.0 if s > 6 else 0.0) for s in range(1, 9)] + [(s, 0.0) for s in range(7, N + 1)]:
        if with_bar:
            lines += [f" {s}/{N} [00:01<00:10]", f" {s}/{N} [00:01<00:10]"]
        lines.append(repr(_console_dict(s, REWARD[s - 1] + shift, as_strings=False)))
        if with_bar and s == 8 and shift:
            lines.append("Continuing training from checkpoint, will skip to saved global_step")
    return lines


@pytest.mark.parametrize("with_bar", [True, False])
def test_a_training_resumed_into_the_same_console_log_stays_one_run_with_the_later_values(tmp_path, with_bar):
    path = tmp_path / "resumed.log"
    path.write_text("\n".join(_resumed_console_lines(with_bar)))
    ds = load_runs([path])
    assert list(ds.run.values) == ["resumed"]  # not part1 + a fragment part2
    assert list(ds.step.values) == list(range(1, N + 1))
    np.testing.assert_allclose(ds.reward.sel(run="resumed").values, REWARD)
    assert any("2 steps logged more than once" in w for w in runset_warnings(ds)["resumed"])


def test_a_second_training_in_the_log_is_no_resume_even_after_an_evaluation_at_epoch_0(tmp_path):
    """An evaluation before training (epoch 0) and a second training that logs from a later epoch
    (logging every 2 steps: epochs not logged by the first training's later dicts at those values)
    are two runs; only a fall back to an epoch logged before, past the first, is a resume."""
    lines = [repr({"eval_loss": 1.0, "eval_reward": 0.1, "epoch": 0.0})]
    lines += [repr(_console_dict(s, REWARD[s - 1], as_strings=False)) for s in range(1, N + 1)]
    second = [dict(_console_dict(s, REWARD[s - 1] + 1, as_strings=False), epoch=s / 1000 + 0.0005) for s in range(2, N + 1, 2)]
    lines += [repr(d) for d in second]
    path = tmp_path / "two.log"
    path.write_text("\n".join(lines))
    ds = load_runs([path], min_points=5)
    assert sorted(ds.run.values) == ["part1", "part2"]
    np.testing.assert_allclose(ds.reward.sel(run="part1").dropna("step").values, REWARD)
    np.testing.assert_allclose(ds.reward.sel(run="part2").dropna("step").values, np.array(REWARD[1::2]) + 1)


def test_wandb_run_config_yaml_beside_its_output_log_gives_the_hyperparameters(tmp_path):
    files = tmp_path / "wandb" / "run-20260101_120000-abc123" / "files"
    files.mkdir(parents=True)
    lines = [
        str(_console_dict(s, REWARD[s - 1], as_strings=False) | {"step": s})
        for s in range(1, N + 1)
    ]
    (files / "output.log").write_text("\n".join(lines) + "\n")
    config = {
        "_wandb": {"value": {"cli_version": "0.19.8", "t": {"1": [1, 11]}}},
        "num_generations": {"value": 8},
        "learning_rate": {"value": 2e-6},
        "beta": {"value": 0.04, "desc": None},  # older wandb versions add desc
        "seed": {"value": 5},
        "adam_beta1": {"value": 0.9},
        "optim": {"value": "adamw_torch"},
        "num_iterations": {"value": 1},
        "gradient_accumulation_steps": {"value": 2},
        "steps_per_generation": {"value": 4},
    }
    (files / "config.yaml").write_text(yaml.safe_dump(config))
    ds = load_runs([tmp_path / "wandb"])
    c = run_coords(ds, str(ds.run.values[0]))
    assert (c["group_size"], c["learning_rate"], c["beta"], c["seed"]) == (8, 2e-6, 0.04, 5)
    assert (c["momentum"], c["momentum_convention"], c["k_ref"]) == (0.9, "ema", 2.0)


def test_the_wandb_callbacks_model_num_parameters_gives_the_model_size(tmp_path):
    # HF's WandbCallback adds "model/num_parameters" to the run config (a '/' where configs
    # flattened by ingest have '.'): the model size was unknown
    files = tmp_path / "wandb" / "run-20260101_120000-abc123" / "files"
    files.mkdir(parents=True)
    lines = [str(_console_dict(s, REWARD[s], as_strings=False) | {"step": s}) for s in range(N)]
    (files / "output.log").write_text("\n".join(lines) + "\n")
    config = {"_wandb": {"value": {}}, "model/num_parameters": {"value": 494032768}}
    (files / "config.yaml").write_text(yaml.safe_dump(config))
    ds = load_runs([tmp_path])
    assert run_coords(ds, str(ds.run.values[0]))["model_size"] == 494032768


def test_verl_config_yaml_beside_a_csv_gives_the_hyperparameters(tmp_path):
    run_dir = tmp_path / "verl_grpo"
    run_dir.mkdir()
    lines = ["step,critic/score/mean"] + [f"{s},{REWARD[s]}" for s in range(N)]
    (run_dir / "metrics.csv").write_text("\n".join(lines))
    (run_dir / "config.yaml").write_text(
        "actor_rollout_ref:\n"
        "  model: {path: Qwen/Qwen2.5-0.5B}\n"
        "  actor: {optim: {lr: 1e-6}, ppo_mini_batch_size: 64, ppo_epochs: 1}\n"
        "  rollout: {n: 5}\n"
        "algorithm: {kl_ctrl: {kl_coef: 0.001}}\n"
        "data: {train_batch_size: 256, seed: 1}\n"
    )
    ds = load_runs([run_dir])
    c = run_coords(ds, "verl_grpo")
    assert c["model"] == "Qwen/Qwen2.5-0.5B" and c["group_size"] == 5 and c["learning_rate"] == 1e-6
    assert c["beta"] == 0.001 and c["seed"] == 1
    assert c["k_ref"] == 4  # 256 prompts per rollout in mini-batches of 64: 4 optimizer steps


def test_a_trl_config_from_before_num_iterations_is_on_policy(tmp_path):
    # TRL < 0.16's GRPOConfig has num_generations but no num_iterations / steps_per_generation:
    # it generated at every step and trained on the completions once, K_ref 1
    run_dir = tmp_path / "old_trl"
    _write_state(run_dir)
    (run_dir / "training_args.json").write_text(
        json.dumps({"num_generations": 8, "learning_rate": 1e-6, "gradient_accumulation_steps": 4})
    )
    ds = load_runs([run_dir])
    assert run_coords(ds, "old_trl")["k_ref"] == 1
    sources = json.loads(ds.attrs[INGEST_ATTR])["old_trl"]["hyperparameter_sources"]
    assert "TRL < 0.16" in sources["k_ref"]


def test_a_verl_runs_hydra_config_gives_its_settings(tmp_path):
    # verl runs under Hydra: the job folder holds the console log and .hydra/config.yaml (the
    # resolved config), with Hydra's own hydra.yaml and overrides.yaml beside it
    job = tmp_path / "outputs" / "2025-03-01" / "10-00-00"
    (job / ".hydra").mkdir(parents=True)
    (job / "main_ppo.log").write_text(
        "\n".join(f"step:{s} - critic/score/mean:{r:.3f}" for s, r in enumerate(REWARD, start=1))
    )
    (job / ".hydra" / "config.yaml").write_text(
        "data: {train_batch_size: 128, seed: 3}\n"
        "actor_rollout_ref:\n"
        "  model: {path: Qwen/Qwen2.5-3B-Instruct}\n"
        "  actor: {optim: {lr: 1.0e-06}, ppo_mini_batch_size: 128, ppo_epochs: 1,\n"
        "          use_kl_loss: true, kl_loss_coef: 0.001}\n"
        "  rollout: {n: 8}\n"
        "algorithm: {adv_estimator: grpo, use_kl_in_reward: false}\n"
    )
    (job / ".hydra" / "hydra.yaml").write_text("hydra: {run: {dir: outputs}}\n")
    (job / ".hydra" / "overrides.yaml").write_text("- data.train_batch_size=128\n")
    ds = load_runs([tmp_path])
    assert ds.sizes["run"] == 1  # Hydra's own files are no runs
    c = run_coords(ds, str(ds.run.values[0]))
    assert c["model"] == "Qwen/Qwen2.5-3B-Instruct" and c["group_size"] == 8
    assert (c["learning_rate"], c["beta"], c["seed"], c["k_ref"]) == (1e-6, 0.001, 3, 1)


@pytest.mark.parametrize(("mini_batch", "k_ref"), [(64, 4), (256, 1)])
def test_a_verl_log_counts_rollout_iterations_and_is_stored_on_optimizer_steps(
    tmp_path, mini_batch, k_ref
):
    # verl logs one step per training iteration: a rollout of train_batch_size prompts, then
    # ppo_epochs * train_batch_size / ppo_mini_batch_size optimizer steps on it (K_ref). Its
    # iteration n is the rollout TRL logs at optimizer step (n - 1) K_ref + 1.
    run_dir = tmp_path / "verl_grpo"
    run_dir.mkdir()
    (run_dir / "verl.log").write_text(
        "\n".join(f"step:{s} - critic/score/mean:{r:.3f}" for s, r in enumerate(REWARD, start=1))
    )
    (run_dir / "config.yaml").write_text(
        f"actor_rollout_ref:\n  actor: {{ppo_mini_batch_size: {mini_batch}, ppo_epochs: 1}}\n"
        "data: {train_batch_size: 256}\n"
    )
    ds = load_runs([run_dir])
    run_id = str(ds.run.values[0])
    assert run_coords(ds, run_id)["k_ref"] == k_ref
    reward = ds.reward.sel(run=run_id).to_series().dropna()
    np.testing.assert_array_equal(reward.index, (np.arange(1, N + 1) - 1) * k_ref + 1)
    np.testing.assert_allclose(reward.values, np.round(REWARD, 3))
    notes = [w for w in runset_warnings(ds).get(run_id, []) if "rollout iterations" in w]
    assert len(notes) == (1 if k_ref > 1 else 0)
    # a TRL log of the same K_ref counts optimizer steps already: left as logged
    trl = tmp_path / "trl"
    trl.mkdir()
    history = [_trl_entry(s, REWARD[s - 1]) for s in range(1, N + 1)]
    (trl / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    (trl / "training_args.json").write_text(json.dumps({"num_iterations": k_ref}))
    trl_reward = load_runs([trl]).reward.isel(run=0).to_series().dropna()
    np.testing.assert_array_equal(trl_reward.index, np.arange(1, N + 1))


@pytest.mark.parametrize(
    ("switches", "beta"),
    [
        ("use_kl_loss: true, use_kl_in_reward: false", 0.01),  # verl's GRPO recipes
        ("use_kl_loss: false, use_kl_in_reward: true", 0.001),
        ("use_kl_loss: false, use_kl_in_reward: false", 0.0),  # no KL term at all
    ],
)
def test_verl_kl_weight_is_the_one_of_the_term_the_run_used(tmp_path, switches, beta):
    # verl keeps the loss's weight (actor.kl_loss_coef) apart from the reward penalty's
    # (algorithm.kl_ctrl.kl_coef, default 0.001); the alias kl_coef took the penalty's weight
    # though a GRPO run puts its KL term in the loss
    run_dir = tmp_path / "verl_grpo"
    run_dir.mkdir()
    lines = ["step,critic/score/mean"] + [f"{s},{REWARD[s]}" for s in range(N)]
    (run_dir / "metrics.csv").write_text("\n".join(lines))
    loss, reward = (part.split(": ")[1] for part in switches.split(", "))
    (run_dir / "config.yaml").write_text(
        f"actor_rollout_ref:\n  actor: {{use_kl_loss: {loss}, kl_loss_coef: 0.01}}\n"
        f"algorithm: {{use_kl_in_reward: {reward}, kl_ctrl: {{kl_coef: 0.001}}}}\n"
    )
    assert run_coords(load_runs([run_dir]), "verl_grpo")["beta"] == beta


def test_a_lora_checkpoint_names_its_base_model(tmp_path):
    # TRL + PEFT saves checkpoint-*/adapter_config.json and no config.json: the model was unknown
    checkpoint = tmp_path / "qwen-lora" / "checkpoint-12"
    _write_state(checkpoint)
    (checkpoint / "adapter_config.json").write_text(
        json.dumps(
            {"base_model_name_or_path": "Qwen/Qwen2.5-1.5B-Instruct", "peft_type": "LORA", "r": 16}
        )
    )
    ds = load_runs([tmp_path])
    assert list(ds.run.values) == ["qwen-lora"]
    assert run_coords(ds, "qwen-lora")["model"] == "Qwen/Qwen2.5-1.5B-Instruct"


def test_openrlhf_config_gives_the_model_lr_and_k_ref(tmp_path):
    # OpenRLHF's arguments (--pretrain, --actor_learning_rate; rollout_batch_size prompts x
    # n_samples_per_prompt samples in train batches of train_batch_size samples) gave no model,
    # no learning rate and no K_ref, and its logged 'actor_lr' was no learning-rate schedule
    run_dir = tmp_path / "qwen_grpo"
    run_dir.mkdir()
    lines = [
        json.dumps({"train/global_step": s, "train/reward": r, "train/actor_lr": 5e-7})
        for s, r in enumerate(REWARD, start=1)
    ]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    config = {
        "pretrain": "Qwen/Qwen2.5-1.5B-Instruct",
        "reward_pretrain": "OpenRLHF/rm",
        "actor_learning_rate": 5e-7,
        "critic_learning_rate": 9e-6,
        "n_samples_per_prompt": 8,
        "rollout_batch_size": 128,
        "train_batch_size": 256,
        "max_epochs": 1,
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    ds = load_runs([run_dir])
    c = run_coords(ds, "qwen_grpo")
    assert c["model"] == "Qwen/Qwen2.5-1.5B-Instruct"
    assert (c["learning_rate"], c["group_size"]) == (5e-7, 8)
    assert c["k_ref"] == 4  # 128 x 8 samples in batches of 256
    assert "lr" in ds


def test_adam_betas_without_an_optimizer_name_give_the_momentum_like_adam_beta1(tmp_path):
    run_dir = tmp_path / "betas_only"
    run_dir.mkdir()
    lines = ["step,critic/score/mean"] + [f"{s},{REWARD[s]}" for s in range(N)]
    (run_dir / "metrics.csv").write_text("\n".join(lines))
    (run_dir / "config.yaml").write_text("actor:\n  optim: {lr: 1e-6, betas: [0.9, 0.999]}\n")
    c = run_coords(load_runs([run_dir]), "betas_only")
    assert (c["momentum"], c["momentum_convention"]) == (0.9, "ema")


def test_console_evaluation_dicts_take_the_step_of_the_training_dict_before_them(tmp_path):
    lines = []
    for s in range(1, N + 1):
        lines += [f" {s}/{N} [00:01<00:10]", f" {s}/{N} [00:01<00:10]"]
    for s in range(1, N + 1):
        lines.append(repr(_console_dict(s, REWARD[s - 1], as_strings=False)))
        if s % 4 == 0:
            lines.append(repr({"eval_loss": 0.5, "eval_reward": s / 10, "epoch": s / 1000}))
    path = tmp_path / "with_eval.log"
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="with_eval").values, REWARD)
    evals = ds.eval_reward.sel(run="with_eval").dropna("step")
    assert list(evals.step.values) == [4, 8, 12] and np.allclose(evals.values, [0.4, 0.8, 1.2])
    assert runset_warnings(ds) == {}


def _write_a_run_its_resume_and_a_new_run(logdir, args: str | None = None) -> None:
    """Three SummaryWriter sessions into ``logdir``: steps 1-8, their resume 6-N, a new run 1-N
    (each with the Trainer's ``args`` text when given)."""
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    for steps in (range(1, 9), range(6, N + 1), range(1, N + 1)):
        writer = torch_tb.SummaryWriter(str(logdir))
        if args is not None:
            writer.add_text("args", args)
        for s in steps:
            writer.add_scalar("train/reward", REWARD[s - 1], s)
        writer.close()


def _assert_the_resume_is_joined_and_the_new_run_is_not(ds) -> None:
    assert ds.sizes["run"] == 2
    resumed = next(r for r in ds.run.values if runset_summary(ds).loc[r, "n_duplicate_steps"] == 3)
    np.testing.assert_allclose(ds.reward.sel(run=resumed).values, REWARD)
    assert any("read as one resumed run" in w for w in runset_warnings(ds)[resumed])


def test_event_files_of_a_resumed_training_are_joined_and_a_new_training_is_not(tmp_path):
    logdir = tmp_path / "logs"
    _write_a_run_its_resume_and_a_new_run(logdir, json.dumps({"run_name": "grpo", "num_generations": 4}))
    _assert_the_resume_is_joined_and_the_new_run_is_not(load_runs([logdir]))


def test_event_files_opened_within_one_second_are_joined_in_the_order_they_were_opened(tmp_path):
    # SummaryWriter names its files events.out.tfevents.<second>.<host>.<pid>.<counter>: within
    # one second, the ninth and tenth file of a process sorted as text put the resume first, so
    # it was not joined (flaky in this file's tests, by how many writers earlier tests opened)
    logdir = tmp_path / "logs"
    _write_a_run_its_resume_and_a_new_run(logdir)
    files = sorted(logdir.glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime_ns)
    for counter, event in zip((9, 10, 11), files):
        event.rename(logdir / f"events.out.tfevents.1700000000.host.1234.{counter}")
    _assert_the_resume_is_joined_and_the_new_run_is_not(load_runs([logdir]))


def test_a_training_resumed_into_a_new_hf_default_logging_folder_is_joined(tmp_path):
    # HF's default logging_dir is <output_dir>/runs/<%b%d_%H-%M-%S>_<host>, new at every start
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    runs = tmp_path / "out" / "runs"
    args = json.dumps({"run_name": "grpo", "num_generations": 4})
    starts = {"Jan01_10-00-00_host": range(1, 9), "Jan01_12-00-00_host": range(6, N + 1)}
    starts["Jan02_09-00-00_host"] = range(1, N + 1)  # a new training with the same name
    for folder, steps in starts.items():
        writer = torch_tb.SummaryWriter(str(runs / folder))
        writer.add_text("args", args)
        for s in steps:
            writer.add_scalar("train/reward", REWARD[s - 1], s)
        writer.close()
    ds = load_runs([tmp_path / "out"])
    assert ds.sizes["run"] == 2
    resumed = next(r for r in ds.run.values if runset_summary(ds).loc[r, "n_duplicate_steps"] == 3)
    np.testing.assert_allclose(ds.reward.sel(run=resumed).values, REWARD)
    assert any("read as one resumed run" in w for w in runset_warnings(ds)[resumed])


def test_wide_csv_with_a_wandb_name_column_keeps_each_run(tmp_path):
    # wandb exports name the run column "Name"; the runs used to be merged into one run,
    # the second run's values silently replacing the first's at every step
    rows = [f"{name},{s},{r + shift}" for name, shift in (("alpha", 0.0), ("beta", 0.5)) for s, r in enumerate(REWARD)]
    path = tmp_path / "export.csv"
    path.write_text("Name,Step,train/reward\n" + "\n".join(rows) + "\n")
    ds = load_runs([path])
    assert sorted(map(str, ds.run.values)) == ["alpha", "beta"]
    np.testing.assert_allclose(ds.reward.sel(run="alpha").values, REWARD)
    np.testing.assert_allclose(ds.reward.sel(run="beta").values, np.array(REWARD) + 0.5)
    assert not any("more than once" in w for ws in runset_warnings(ds).values() for w in ws)


def test_semicolon_separated_csv_is_read(tmp_path):
    # spreadsheet exports in many locales separate fields by ';'; this was "only one column"
    path = tmp_path / "sheet.csv"
    path.write_text("step;train/reward;kl\n" + "\n".join(f"{s};{r};0.01" for s, r in enumerate(REWARD)) + "\n")
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="sheet").values, REWARD)
    assert "kl" in ds


@pytest.mark.parametrize("sep", [" ", "   ", "\t "])
@pytest.mark.parametrize("comment", ["", "# ", "#"])
def test_a_csv_whose_columns_are_separated_by_spaces_is_read_and_said(tmp_path, sep, comment):
    # numpy.savetxt's default (its header after '# ') and console tables pasted to a .csv: the
    # header 'step reward kl' was one text column and the run was rejected as "no numeric
    # metrics in the log"
    path = tmp_path / "spaced.csv"
    path.write_text(comment + sep.join(["step", "reward", "kl"]) + "\n" + "\n".join(f"{s}{sep}{r}{sep}0.01" for s, r in enumerate(REWARD)) + "\n")
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="spaced").values, REWARD)
    assert "kl" in ds
    assert any("separated by spaces" in w for w in runset_warnings(ds)["spaced"])


def test_numpy_savetxt_with_its_header_is_read_as_written(tmp_path):
    path = tmp_path / "saved.csv"
    np.savetxt(path, np.column_stack([np.arange(len(REWARD)), REWARD, np.full(len(REWARD), 0.01)]), header="step reward kl")
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="saved").values, REWARD)
    np.testing.assert_allclose(ds.kl.sel(run="saved").values, 0.01)


def test_a_single_column_named_with_a_space_stays_one_column(tmp_path):
    path = tmp_path / "rewards.csv"
    path.write_text("mean reward\n" + "\n".join(map(str, REWARD)) + "\n")
    ds = load_runs([path], reward_key="mean reward")
    np.testing.assert_allclose(ds.reward.sel(run="rewards").dropna("step").values, REWARD)


def test_csv_of_a_single_reward_column_is_numbered_by_row(tmp_path):
    # a bare column of rewards (no step) was rejected as "only one column"
    path = tmp_path / "rewards.csv"
    path.write_text("reward\n" + "\n".join(map(str, REWARD)) + "\n")
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="rewards").dropna("step").values, REWARD)
    assert any("numbered 1.." in w for w in runset_warnings(ds)["rewards"])


@pytest.mark.parametrize("suffix, text", [(".csv", "reward,loss\n0.5,1.0\n"), (".jsonl", '{"reward": 0.5}\n')])
def test_a_log_of_one_row_without_steps_says_its_one_row_was_numbered(tmp_path, capsys, suffix, text):
    # the note read "the 1 rows were numbered 1..1 by order" (in ingest's error, as the run is
    # too short)
    from bayes_grpo.cli import main

    path = tmp_path / f"one{suffix}"
    path.write_text(text)
    assert main(["ingest", str(path), "-o", str(tmp_path / "one.nc")]) == 2
    err = capsys.readouterr().err
    assert f"no step column in one{suffix}; the 1 row was numbered 1 by order" in err, err
    assert "rows were" not in err and "1..1" not in err, err


def test_a_log_without_a_finite_reward_says_so_not_to_lower_the_minimum(tmp_path, capsys):
    # `ingest --min-points 1` of a log whose rewards are all infinite or NaN said "fewer than
    # the minimum of 1 points", then "only 0 finite reward values in 'reward', fewer than the
    # minimum of 1 point (lower it with min_points=, or `bayes-grpo ingest --min-points N`)",
    # though no minimum keeps a run without a reward
    from bayes_grpo.cli import main

    path = tmp_path / "nan.csv"
    path.write_text("step,reward,loss\n1,inf,0.5\n2,nan,0.4\n")
    for extra in (["--min-points", "1"], []):
        assert main(["ingest", str(path), "-o", str(tmp_path / "nan.nc"), *extra]) == 2
        err = capsys.readouterr().err
        assert f"{path}: no finite reward value in 'reward' (2 NaN/inf values)" in err, err
        assert "lower it" not in err and "minimum of" not in err, err


def test_a_constant_logged_momentum_is_the_runs_momentum_with_its_convention_left_unknown(tmp_path):
    # a CSV with a constant "momentum" column of 0 showed momentum "-" (unknown): the value
    # was kept only as the metric "momentum_logged"
    path = tmp_path / "sgd.csv"
    path.write_text("\n".join(["step,reward,momentum"] + [f"{s},{REWARD[s]},0" for s in range(N)]))
    ds = load_runs([path])
    c = run_coords(ds, "sgd")
    assert c["momentum"] == 0.0 and c["momentum_convention"] == ""
    why = json.loads(ds.attrs[INGEST_ATTR])["sgd"]["hyperparameter_sources"]["momentum"]
    assert why == "constant logged metric 'momentum'"
    # a momentum that changes along the run is no setting of it
    path.write_text("\n".join(["step,reward,momentum"] + [f"{s},{REWARD[s]},{s / 100}" for s in range(N)]))
    assert np.isnan(run_coords(load_runs([path]), "sgd")["momentum"])


def test_wandb_panel_export_of_runs_whose_names_hold_a_dash(tmp_path):
    # "<run> - <metric>" was split at the first " - ": runs "grpo - G8" and "grpo - G16" became
    # one run "grpo" with two rewards (rejected as ambiguous)
    path = tmp_path / "panel.csv"
    lines = [
        "Step,grpo - G8 - train/reward,grpo - G8 - train/reward__MIN,grpo - G16 - train/reward"
    ]
    lines += [f"{s},{REWARD[s]},{REWARD[s]},{REWARD[s] / 2}" for s in range(N)]
    path.write_text("\n".join(lines))
    ds = load_runs([path])
    assert sorted(ds.run.values) == ["grpo - G16", "grpo - G8"]
    np.testing.assert_allclose(ds.reward.sel(run="grpo - G16").values, np.array(REWARD) / 2)
    assert "reward__MIN" in ds.data_vars


def test_a_live_tensorboard_log_beyond_the_latest_checkpoint_state_is_named(tmp_path):
    # a run still training: the curve is read from the latest checkpoint's state, and the event
    # file beside it (read for the hyperparameters) already logs later steps, left out unsaid
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    out = tmp_path / "grpo-out"
    _write_state(out / "checkpoint-12", with_eval=False)
    writer = torch_tb.SummaryWriter(str(out / "runs" / "Jan01_12-00-00_host"))
    for step in range(1, N + 6):
        writer.add_scalar("train/reward", 0.5, step)
    writer.close()
    ds = load_runs([out])
    (note,) = [w for w in runset_warnings(ds)["grpo-out"] if "TensorBoard file" in w]
    assert f"up to step {N + 5}" in note and f"last step {N}" in note and "events.out" in note


def test_event_files_of_a_resumed_custom_loop_without_a_run_name_are_joined(tmp_path):
    # a plain SummaryWriter (no Trainer arguments, so no run name) opens a new file at every
    # start: a resumed loop gave a run and a mid-training fragment, fitted as a run of its own
    logdir = tmp_path / "tb"
    _write_a_run_its_resume_and_a_new_run(logdir)
    _assert_the_resume_is_joined_and_the_new_run_is_not(load_runs([logdir]))


def test_tensorboard_runs_in_their_own_folders_are_named_by_the_folder(tmp_path):
    # an event file's name is a time stamp: runs in tb/G4_seed1/ and tb/G8_seed1/ were given ids
    # "events-<stamp>" that do not say which run is which
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    for folder, shift in (("G4_seed1", 0.0), ("G8_seed1", 0.5)):
        writer = torch_tb.SummaryWriter(str(tmp_path / "tb" / folder))
        for s in range(N):
            writer.add_scalar("train/reward", REWARD[s] + shift, s)
        writer.close()
    ds = load_runs([tmp_path / "tb"])
    assert sorted(ds.run.values) == ["G4_seed1", "G8_seed1"]
    np.testing.assert_allclose(ds.reward.sel(run="G8_seed1").values, np.add(REWARD, 0.5))


def test_add_scalars_curves_are_read_with_their_run_not_as_runs(tmp_path):
    # SummaryWriter.add_scalars("reward", {"train": ..., "eval": ...}) writes each curve into a
    # file of its own in reward_train/ and reward_eval/: they were read as two runs (the
    # evaluation curve as a run's training reward) and the run itself was rejected
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    writer = torch_tb.SummaryWriter(str(tmp_path / "tb" / "myrun"))
    for s in range(N):
        writer.add_scalar("loss", 1.0 / (s + 1), s)
        writer.add_scalars("reward", {"train": REWARD[s], "eval": REWARD[s] / 2}, s)
        writer.add_scalars("kl/stats", {"mean": 0.1, "max": 0.3}, s)
    writer.close()
    ds = load_runs([tmp_path / "tb"])
    assert list(ds.run.values) == ["myrun"] and not rejected_runs(ds)
    np.testing.assert_allclose(ds.reward.sel(run="myrun").values, REWARD)
    np.testing.assert_allclose(ds.eval_reward.sel(run="myrun").values, np.array(REWARD) / 2)
    assert {"kl_stats_mean", "kl_stats_max", "loss"} <= set(ds.data_vars)
    assert any("add_scalars curves" in w for w in runset_warnings(ds)["myrun"])


def test_a_second_training_one_logging_step_off_in_the_same_folder_is_not_joined(tmp_path):
    # without a run name, a later first step is what marks a resume; a second training that
    # logs from step 1 where the first logged from step 0 is no resume
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    logdir = tmp_path / "tb"
    for steps, shift in ((range(0, N), 0.0), (range(1, N + 1), 0.5)):
        writer = torch_tb.SummaryWriter(str(logdir))
        for s in steps:
            writer.add_scalar("train/reward", REWARD[s % N] + shift, s)
        writer.close()
    ds = load_runs([logdir])
    assert ds.sizes["run"] == 2
    assert not any("resumed run" in w for ws in runset_warnings(ds).values() for w in ws)


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_a_second_step_key_is_kept_as_a_metric_in_jsonl_as_in_csv(tmp_path, suffix):
    # {"step": 3, "global_step": 12, ...} (a loop counting rollouts and optimizer steps): the
    # CSV kept global_step as a metric, the JSONL dropped it without a word
    path = tmp_path / f"loop.{suffix}"
    rows = [{"step": s, "global_step": 4 * s, "reward": r} for s, r in enumerate(REWARD)]
    if suffix == "jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        path.write_text(
            "step,global_step,reward\n"
            + "".join(f"{s},{4 * s},{r}\n" for s, r in enumerate(REWARD))
        )
    ds = load_runs([path])
    np.testing.assert_allclose(ds.global_step.sel(run="loop").values, 4 * np.arange(N))


@pytest.mark.parametrize("layout", ["logging.jsonl", "console"])
def test_ms_swift_logs_take_their_steps_from_global_step_max_steps(tmp_path, layout):
    # ms-swift writes its step as 'global_step/max_steps': '10/60' (logging.jsonl and the printed
    # dicts): it was a text field, and the records were numbered 1, 2, 3 ... by order, its
    # evaluation records counted as training steps
    records = []
    for i, r in enumerate(REWARD, start=1):
        records.append({"loss": 0.1, "reward": r, "global_step/max_steps": f"{5 * i}/60"})
        if i % 4 == 0:
            records.append({"eval_reward": 0.5, "global_step/max_steps": f"{5 * i}/60"})
    path = tmp_path / ("logging.jsonl" if layout == "logging.jsonl" else "train.log")
    if layout == "logging.jsonl":
        path.write_text("".join(json.dumps(rec) + "\n" for rec in records))
    else:
        path.write_text("".join(repr(rec) + "\n" for rec in records))
    ds = load_runs([path])
    run = str(ds.run.values[0])
    assert run == tmp_path.name  # ms-swift's file name names nothing; its folder does
    reward = ds.reward.sel(run=run).dropna("step")
    assert list(reward.step.values) == list(range(5, 5 * N + 1, 5))
    np.testing.assert_allclose(reward.values, REWARD)
    assert list(ds.eval_reward.sel(run=run).dropna("step").step.values) == [20, 40, 60]


def test_the_row_index_pandas_writes_is_no_metric_and_makes_no_repeated_step(tmp_path):
    # pd.DataFrame(trainer.state.log_history).to_csv("log.csv"): the unnamed first column
    # numbers the rows, so the evaluation rows sharing a training step made it "logged more
    # than once (a resumed run?)", and the row numbers became a metric 'Unnamed_0'
    import pandas as pd

    history = [_trl_entry(s + 1, REWARD[s]) for s in range(N)]
    history.insert(6, {"step": 6, "epoch": 0.06, "eval_reward": 0.3, "eval_loss": 0.9})
    path = tmp_path / "history.csv"
    pd.DataFrame(history).to_csv(path)
    ds = load_runs([path])
    run = str(ds.run.values[0])
    assert runset_summary(ds).loc[run, "n_duplicate_steps"] == 0
    assert "Unnamed_0" not in ds and ds.eval_reward.sel(run=run, step=6) == 0.3
    np.testing.assert_allclose(ds.reward.sel(run=run).values, REWARD)


def test_jsonl_runs_told_apart_by_an_integer_run_id(tmp_path):
    # {"run_id": 17, ...}: only text was taken for a run label, so the two runs of the file
    # merged into one, the second replacing the first at every step (a CSV reads ids as text)
    path = tmp_path / "sweep.jsonl"
    rows = [
        {"run_id": rid, "step": s, "reward": REWARD[s] + shift}
        for rid, shift in ((17, 0.0), (18, 0.5))
        for s in range(N)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    ds = load_runs([path])
    assert sorted(ds.run.values) == ["17", "18"]
    np.testing.assert_allclose(ds.reward.sel(run="17").values, REWARD)
    np.testing.assert_allclose(ds.reward.sel(run="18").values, np.add(REWARD, 0.5))


def test_wandb_panel_export_of_two_runs_with_one_display_name_keeps_both(tmp_path):
    # wandb display names need not be unique: the panel export repeats "<run> - <metric>";
    # the second run's curves became extra metrics (reward_1) of the first, without a word
    ds = _wandb_panel(tmp_path, "grpo", "grpo")
    assert sorted(ds.run.values) == ["grpo", "grpo#2"]
    np.testing.assert_allclose(ds.reward.sel(run="grpo#2").values, np.array(REWARD) / 2)
    assert "reward_1" not in ds.data_vars
    assert any("'grpo - train/reward' (2x)" in w for w in runset_warnings(ds)["grpo#2"])


def test_one_training_read_twice_is_named_in_both_runs_and_kept(tmp_path):
    # a trainer_state.json and the console log of the same training beside it: two runs with one
    # curve, which a fit would count twice; the console prints 4 significant digits
    run_dir = tmp_path / "qwen-g8"
    run_dir.mkdir()
    rising = [0.1 + 0.6 * (1 - np.exp(-s / 8)) + 0.01 * np.sin(s) for s in range(1, 31)]
    history = [_trl_entry(s, rising[s - 1]) for s in range(1, 31)]
    (run_dir / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    (run_dir / "train.log").write_text(
        "\n".join(f"{{'loss': 0.01, 'reward': {r:.4g}, 'step': {s}}}" for s, r in enumerate(rising, 1))
    )
    # another seed of the same setting, and a run stuck at 0 twice: not the same training
    other = tmp_path / "qwen-g8-seed1"
    other.mkdir()
    history = [_trl_entry(s, rising[s - 1] + 0.02 * np.cos(3 * s)) for s in range(1, 31)]
    (other / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    for name in ("flat_a", "flat_b"):
        (tmp_path / name).mkdir()
        history = [_trl_entry(s, 0.0) for s in range(1, 31)]
        (tmp_path / name / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    ds = load_runs([tmp_path])
    assert ds.sizes["run"] == 5  # nothing dropped
    notes = {run: [w for w in ws if "read twice" in w] for run, ws in runset_warnings(ds).items()}
    twice = sorted(run for run, ws in notes.items() if ws)
    assert len(twice) == 2 and all(run.startswith("qwen-g8/") for run in twice), notes
    assert twice[1] in notes[twice[0]][0] and "30 steps" in notes[twice[0]][0]


def test_a_verl_run_with_the_kl_in_the_reward_logs_its_kl_and_beta(tmp_path):
    # verl with use_kl_in_reward (and no KL loss) logs the KL to the reference as 'critic/kl'
    # and its weight as 'critic/kl_coeff' (verl < 0.4; since then 'actor/reward_kl_penalty' and
    # 'actor/reward_kl_penalty_coeff'): the KL was kept as 'critic_kl', no 'kl', no beta
    for kl_name, coef_name in (
        ("critic/kl", "critic/kl_coeff"),
        ("actor/reward_kl_penalty", "actor/reward_kl_penalty_coeff"),
    ):
        path = tmp_path / f"{kl_name.split('/')[0]}.log"
        path.write_text(
            "\n".join(
                f"(main_task pid=7) step:{s} - critic/score/mean:{r:.3f} - "
                f"{kl_name}:{0.001 * s:.3f} - {coef_name}:0.001 - critic/rewards/mean:{r:.3f}"
                for s, r in enumerate(REWARD, start=1)
            )
        )
        ds = load_runs([path])
        run = path.stem
        np.testing.assert_allclose(ds.kl.sel(run=run).values, [0.001 * s for s in range(1, N + 1)])
        assert run_coords(ds, run)["beta"] == 0.001


def test_a_verl_file_logger_jsonl_keeps_the_metric_names_it_wraps(tmp_path):
    # verl's file logger (trainer.logger=['file'], utils/tracking.py FileLogger) writes one
    # line {"step": N, "data": {metrics}} per step: every metric was read as 'data/<name>', so
    # entropy, KL, clip ratio, grad norm and response length were no canonical variables and
    # the reward was found only as an 'accuracy-like' name
    path = tmp_path / "qwen_grpo.jsonl"
    lines = []
    for s, r in enumerate(REWARD, start=1):
        data = {
            "actor/entropy": 0.5,
            "actor/kl_loss": 0.001 * s,
            "actor/pg_clipfrac": 0.002,
            "actor/grad_norm": 0.3,
            "critic/score/mean": r,
            "response_length/mean": 300.0 + s,
            "training/global_step": s,
        }
        lines.append(json.dumps({"step": s, "data": data}))
    path.write_text("\n".join(lines) + "\n")
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="qwen_grpo").values, REWARD)
    assert {"entropy", "kl", "clip_ratio", "grad_norm", "completion_length"} <= set(ds.data_vars)
    assert json.loads(ds.attrs[INGEST_ATTR])["qwen_grpo"]["reward_source"] == "critic/score/mean"


@pytest.mark.parametrize("wrapper", ["data", "metrics"])
def test_a_jsonl_step_inside_the_wrapped_metrics_is_the_records_step(tmp_path, wrapper):
    # {"time": ..., "data": {"step": 5, "reward": ...}}: the step inside the wrapper was read
    # as a metric and the records numbered 1, 2, 3 ... by order ("no step column"), the run
    # five times too fast
    path = tmp_path / "wrapped.jsonl"
    lines = [
        json.dumps({"time": 1000.0 + s, wrapper: {"step": 5 * s, "reward": r}})
        for s, r in enumerate(REWARD, start=1)
    ]
    path.write_text("\n".join(lines) + "\n")
    ds = load_runs([path])
    assert list(ds.step.values) == [5 * s for s in range(1, N + 1)]
    np.testing.assert_allclose(ds.reward.sel(run="wrapped").values, REWARD)
    assert not any("by order" in w for w in runset_warnings(ds).get("wrapped", []))


def test_a_file_logger_jsonl_with_keys_beside_its_data_keeps_the_metric_names_it_wraps(tmp_path):
    # verl's file logger writes {"step": N, "data": {...}} (tracking.FileLogger); a logger that
    # adds a time stamp or wall time beside them (a fork's, a wrapper script's) left every
    # metric as 'data/<name>': no KL, no entropy, the reward found only as 'accuracy-like'
    path = tmp_path / "metrics.jsonl"
    lines = [
        json.dumps(
            {
                "step": s,
                "timestamp": f"2025-01-01T00:00:{s:02d}",
                "wall_time": 1000.0 + s,
                "data": {"critic/score/mean": r, "actor/kl_loss": 0.001 * s, "actor/entropy": 0.5},
            }
        )
        for s, r in enumerate(REWARD, start=1)
    ]
    path.write_text("\n".join(lines) + "\n")
    ds = load_runs([path])
    assert {"reward", "kl", "entropy", "wall_time"} <= set(ds.data_vars)
    (facts,) = json.loads(ds.attrs[INGEST_ATTR]).values()
    assert facts["reward_source"] == "critic/score/mean" and facts["reward_rule"] == "reward"
    # a name both beside and inside the wrapper: the record is read as it is (no value lost)
    clash = tmp_path / "clash.jsonl"
    clash.write_text(
        "\n".join(
            json.dumps({"step": s, "reward": r, "data": {"reward": r, "kl": 0.1}})
            for s, r in enumerate(REWARD, start=1)
        )
        + "\n"
    )
    ds = load_runs([clash])
    assert {"reward", "data_reward", "data_kl"} <= set(ds.data_vars)


def test_an_openrlhf_log_gives_its_clip_ratio_length_and_kl(tmp_path):
    # OpenRLHF logs its PPO/GRPO status as 'train/<key>' (ppo_trainer.save_logs_and_checkpoints):
    # 'ppo_clip_ratio', 'response_length' and 'policy_loss' were kept under their own names, so
    # the run set had no clip ratio, completion length or loss
    path = tmp_path / "openrlhf.jsonl"
    lines = [
        json.dumps(
            {
                "train/global_step": s,
                "train/reward": r,
                "train/kl": 0.001 * s,
                "train/ppo_clip_ratio": 0.01,
                "train/response_length": 250.0 + s,
                "train/policy_loss": -0.02,
                "train/actor_lr": 5e-7,
            }
        )
        for s, r in enumerate(REWARD, start=1)
    ]
    path.write_text("\n".join(lines) + "\n")
    ds = load_runs([path])
    assert {"kl", "clip_ratio", "completion_length", "loss", "lr"} <= set(ds.data_vars)
    np.testing.assert_allclose(ds.completion_length.sel(run="openrlhf").values[:2], [251.0, 252.0])


def test_verl_console_lines_of_numpy_scalars_are_read(tmp_path):
    # verl >= 0.4 prints each value with pprint.pformat (utils/logger/aggregate_logger.py
    # concat_dict_to_str): its actor metrics are np.mean results, printed 'np.float64(0.47)'
    # under NumPy 2, and entropy, KL and clip ratio were dropped as text fields
    path = tmp_path / "verl_np.log"
    path.write_text(
        "\n".join(
            f"(TaskRunner pid=9) step:{s} - actor/entropy:np.float64({1.0 - 0.01 * s!r}) - "
            f"actor/kl_loss:np.float64({0.001 * s!r}) - actor/pg_clipfrac:np.float32(0.002) - "
            f"critic/score/mean:{r!r}"
            for s, r in enumerate(REWARD, start=1)
        )
    )
    ds = load_runs([path]).sel(run="verl_np")
    steps = np.arange(1, N + 1)
    np.testing.assert_allclose(ds.entropy.values, 1.0 - 0.01 * steps)
    np.testing.assert_allclose(ds.kl.values, 0.001 * steps)
    assert np.allclose(ds.clip_ratio.values, 0.002)
    assert not any("text fields" in w for ws in runset_warnings(ds).values() for w in ws)


def test_a_verl_evaluation_is_stored_after_the_updates_of_its_iteration(tmp_path):
    # verl validates at the end of iteration n, after its k_ref updates (ray_trainer.fit:
    # update_actor, then _validate, then logger.log(step=global_steps)), as TRL evaluates at
    # optimizer step s the policy after s updates; the validation was stored with the rollout
    # at (n - 1) k_ref + 1, k_ref - 1 steps before the policy it measured. Before training
    # (step 0) it stays at 0.
    run_dir = tmp_path / "verl_grpo"
    run_dir.mkdir()
    lines = ["step:0 - val-core/gsm8k/reward/mean@1:0.100"]
    for s, r in enumerate(REWARD, start=1):
        lines.append(f"step:{s} - critic/score/mean:{r:.3f}")
        if s % 4 == 0:
            lines[-1] += f" - val-core/gsm8k/reward/mean@1:{r + 0.05:.3f}"
    (run_dir / "verl.log").write_text("\n".join(lines))
    (run_dir / "config.yaml").write_text(
        "actor_rollout_ref:\n  actor: {ppo_mini_batch_size: 64, ppo_epochs: 1}\n"
        "data: {train_batch_size: 256}\n"
    )
    ds = load_runs([run_dir])
    evals = ds.eval_gsm8k_reward_mean_1.isel(run=0).to_series().dropna()
    np.testing.assert_array_equal(evals.index, [0, 16, 32, 48])
    np.testing.assert_allclose(evals.values[1:], np.round(np.array(REWARD)[[3, 7, 11]] + 0.05, 3))
    reward = ds.reward.isel(run=0).to_series().dropna()
    np.testing.assert_array_equal(reward.index, (np.arange(1, N + 1) - 1) * 4 + 1)
    # a log of validations only: the reward is that evaluation, stored after the updates too
    only_val = tmp_path / "verl_val"
    only_val.mkdir()
    (only_val / "verl.log").write_text(
        "\n".join(f"step:{s} - val-core/gsm8k/reward/mean@1:{r:.3f}" for s, r in enumerate(REWARD, 1))
    )
    (only_val / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    val = load_runs([only_val], reward_key="val-core/gsm8k/reward/mean@1")
    val = val.reward.isel(run=0).to_series().dropna()
    np.testing.assert_array_equal(val.index, np.arange(1, N + 1) * 4)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_manifest_logging_steps_spaces_the_rows_of_a_log_without_steps(tmp_path, suffix):
    # a CSV or JSONL export without a step column is numbered by row; the manifest's
    # logging_steps (documented for logs without step numbers) was used for console logs only
    # and silently ignored here: a log written every 5 steps was read as one every step
    path = tmp_path / f"rewards{suffix}"
    if suffix == ".csv":
        path.write_text("reward\n" + "\n".join(map(str, REWARD)))
    else:
        path.write_text("\n".join(json.dumps({"reward": r}) for r in REWARD))
    (tmp_path / "runs.yaml").write_text(f"- {{path: rewards{suffix}, run: r, logging_steps: 5}}\n")
    ds = load_runs([], manifest=tmp_path / "runs.yaml")
    np.testing.assert_array_equal(ds.step.values, 5 * np.arange(1, N + 1))
    np.testing.assert_allclose(ds.reward.sel(run="r").values, REWARD)
    assert any("logging_steps=5" in w for w in runset_warnings(ds)["r"])


@pytest.mark.parametrize("kind", ["trainer", "verl"])
def test_a_console_log_whose_metrics_start_after_a_long_preamble_is_a_log(tmp_path, kind):
    # a log's first metric line may come after megabytes of start-up output (model loading,
    # vLLM / Ray / NCCL messages of every rank); the format sniff read the first 2 MB only, so
    # such a log was 'not a recognised log format' and, in a folder, skipped without a word
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    preamble = "".join(
        f"(WorkerDict pid=42) INFO [model_runner.py:1234] loading weight shard {i} of the model\n"
        for i in range(40_000)
    )
    assert len(preamble) > 3_000_000
    if kind == "trainer":
        lines = [str({"loss": 0.01, "reward": r, "epoch": s / N}) for s, r in enumerate(REWARD, 1)]
    else:
        lines = [f"step:{s} - critic/score/mean:{r}" for s, r in enumerate(REWARD, start=1)]
    (run_dir / "train.log").write_text(preamble + "\n".join(lines) + "\n")
    ds = load_runs([tmp_path])
    np.testing.assert_allclose(ds.reward.sel(run="run").values, REWARD)


def test_a_verl_log_without_its_config_says_its_steps_are_rollout_iterations(tmp_path):
    # without verl's config k_ref is unknown and the rollout iterations stay as logged; the run
    # set said nothing of it, so its steps read as optimizer steps, k_ref - 1 in k_ref too few
    path = tmp_path / "verl.log"
    path.write_text(
        "\n".join(
            f"step:{s} - critic/score/mean:{r:.3f} - actor/pg_loss:0.01"
            for s, r in enumerate(REWARD, start=1)
        )
    )
    notes = runset_warnings(load_runs([path]))["verl"]
    assert any("per rollout iteration" in w and "k_ref" in w for w in notes)
    # a TRL log counts optimizer steps: nothing to say
    trl = tmp_path / "trl"
    trl.mkdir()
    history = [_trl_entry(s, REWARD[s - 1]) for s in range(1, N + 1)]
    (trl / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    trl_notes = runset_warnings(load_runs([trl])).get("trl", [])
    assert not any("rollout iteration" in w for w in trl_notes)


def test_a_manifest_logging_steps_the_log_does_not_need_is_said_to_be_unused(tmp_path):
    # a log that carries its step numbers takes them, whatever logging_steps the manifest row
    # gives: the row's value was dropped without a word, the user left believing it applied
    path = tmp_path / "metrics.csv"
    path.write_text("step,reward\n" + "\n".join(f"{s},{r}" for s, r in enumerate(REWARD, 1)))
    (tmp_path / "runs.yaml").write_text("- {path: metrics.csv, run: r, logging_steps: 5}\n")
    ds = load_runs([], manifest=tmp_path / "runs.yaml")
    np.testing.assert_array_equal(ds.step.values, np.arange(1, N + 1))
    assert any("logging_steps=5" in w and "not used" in w for w in runset_warnings(ds)["r"])


def test_a_verl_log_with_printed_score_dicts_reads_its_step_lines(tmp_path):
    # a custom reward function that prints its per-sample result ({'score': 1.0, 'acc': True})
    # made the console reader take those dicts for the Trainer's metric dicts and ignore verl's
    # 'step:N - ...' lines: 24 per-sample scores of 0 and 1, numbered by order, were the curve
    lines = []
    for s, r in enumerate(REWARD, start=1):
        lines += [f"(WorkerDict pid=5) {{'score': {j}.0, 'acc': {bool(j)}}}" for j in range(2)]
        lines.append(f"(TaskRunner pid=1) step:{s} - critic/score/mean:{r} - actor/entropy:0.5")
    path = tmp_path / "verl.log"
    path.write_text("\n".join(lines) + "\n")
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="verl").values, REWARD)
    np.testing.assert_array_equal(ds.step.values, np.arange(1, N + 1))
    notes = runset_warnings(ds)["verl"]
    assert any("24 printed dicts" in w and "not read" in w for w in notes)


def test_dicts_a_reward_function_prints_in_a_trainer_log_are_not_steps(tmp_path):
    # the Trainer's logs carry 'epoch' (and its training logs 'learning_rate'); a reward
    # function printing {'reward': 1.0, 'answer': '42'} per completion added those dicts to the
    # curve: 36 'steps' of 0/1 rewards numbered by order, and the progress bar no longer matched
    lines = []
    for s, r in enumerate(REWARD, start=1):
        lines.append(f" {s}/{N} [00:{s:02d}<00:10,  1.00it/s]")
        lines += [f"{{'reward': {j}.0, 'answer': '42'}}" for j in range(2)]
        lines.append(str({"loss": 0.0, "learning_rate": 1e-6, "reward": r, "epoch": s / N}))
    path = tmp_path / "qwen.log"
    path.write_text("\n".join(lines) + "\n")
    ds = load_runs([path])
    np.testing.assert_allclose(ds.reward.sel(run="qwen").values, REWARD)
    np.testing.assert_array_equal(ds.step.values, np.arange(1, N + 1))
    notes = runset_warnings(ds)["qwen"]
    assert any("24 printed dicts" in w and "not read" in w for w in notes)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_evaluation_rows_stepped_by_their_own_global_step_are_kept(tmp_path, suffix):
    # OpenRLHF logs its evaluations as {'eval/<metric>': ..., 'eval/global_step': n}
    # (loggers.WandbLogger.log_eval), its training as 'train/...' with 'train/global_step': in a
    # wandb history export the evaluation rows have no 'train/global_step', and their values were
    # skipped as 'without a numeric step'
    rows = []
    for s, r in enumerate(REWARD, start=1):
        rows.append({"train/global_step": s, "train/reward": r})
        if s % 4 == 0:
            rows.append({"eval/global_step": s, "eval/eval_accuracy": r + 0.05})
    path = tmp_path / f"openrlhf{suffix}"
    if suffix == ".csv":
        cols = ["_step", "train/global_step", "train/reward"]
        cols += ["eval/global_step", "eval/eval_accuracy"]
        lines = [",".join(cols)] + [
            ",".join(str(row.get(c, i if c == "_step" else "")) for c in cols)
            for i, row in enumerate(rows)
        ]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    ds = load_runs([path]).sel(run="openrlhf")
    np.testing.assert_allclose(ds.reward.values, REWARD)
    evals = ds.eval_accuracy.to_series().dropna()
    np.testing.assert_array_equal(evals.index, [4, 8, 12])
    np.testing.assert_allclose(evals.values, np.array(REWARD)[[3, 7, 11]] + 0.05)


def _wandb_export(tmp_path, config_columns: str, runs: dict[str, str], step_column: str = "step"):
    """``load_runs`` of a W&B export ``wandb_export.csv``: columns ``Name,<step_column>,train/reward,
    <config_columns>``, each run logging ``REWARD`` with its config cells ``runs[run]`` on every row."""
    rows = [f"Name,{step_column},train/reward,{config_columns}"]
    for run, cells in runs.items():
        rows += [f"{run},{s},{r},{cells}" for s, r in enumerate(REWARD, start=1)]
    path = tmp_path / "wandb_export.csv"
    path.write_text("\n".join(rows) + "\n")
    return load_runs([path])


def test_a_csvs_constant_optimizer_column_gives_the_momentum_convention(tmp_path):
    """QA flow: a W&B export of SGD runs with its config columns optimizer=SGD and momentum=0.9
    ingested with momentum 0.9 and the convention unknown ("text fields not kept as metrics:
    ['optimizer']"), and `fit` refused the runs for want of momentum_convention, while the same
    optimizer in a config.yaml beside the log gave heavy_ball."""
    ds = _wandb_export(
        tmp_path, "momentum,optimizer", {"sgd_run": "0.9,SGD", "adam_run": "0.9,adamw_torch", "other": "0.9,rmsprop"}
    )
    assert (run_coords(ds, "sgd_run")["momentum"], run_coords(ds, "sgd_run")["momentum_convention"]) == (0.9, "heavy_ball")
    assert run_coords(ds, "adam_run")["momentum_convention"] == "ema"
    sources = json.loads(ds.attrs[INGEST_ATTR])["sgd_run"]["hyperparameter_sources"]
    assert sources["momentum_convention"] == "constant text column 'optimizer' of wandb_export.csv"
    assert not any("text fields not kept" in w for w in runset_warnings(ds)["sgd_run"])
    # an optimizer of no known convention leaves it unknown, and its column is named as not kept
    assert run_coords(ds, "other")["momentum_convention"] == ""
    assert any("text fields not kept as metrics: ['optimizer']" in w for w in runset_warnings(ds)["other"])


def test_a_csvs_constant_adam_beta1_column_is_the_runs_momentum_as_in_a_config(tmp_path):
    # a W&B export's config columns optim=adamw_torch, adam_beta1=0.9 (the Trainer's argument
    # names) gave the convention ema and left the momentum unknown; in a training_args.json
    # beside the log the same two give momentum 0.9, ema
    ds = _wandb_export(tmp_path, "optim,adam_beta1", {"adam": "adamw_torch,0.9", "plain": ",0.9", "sgd": "sgd,0.9"})
    for run in ("adam", "plain"):  # no optimizer named: Adam's beta1 is Adam's, as in a config
        coords = run_coords(ds, run)
        assert (coords["momentum"], coords["momentum_convention"]) == (0.9, "ema")
    sources = json.loads(ds.attrs[INGEST_ATTR])["adam"]["hyperparameter_sources"]
    assert sources["momentum"] == "constant logged metric 'adam_beta1' (Adam beta1)"
    # the Trainer's arguments carry adam_beta1 whatever the optimizer: an SGD run's momentum
    # stays unknown without a momentum column (deliberately, as before)
    assert run_coords(ds, "sgd")["momentum_convention"] == "heavy_ball"
    assert np.isnan(run_coords(ds, "sgd")["momentum"])


def test_a_csvs_constant_model_and_convention_columns_are_the_runs_attributes(tmp_path):
    # a W&B export with its config columns: the text columns model and momentum_convention
    # were dropped ("text fields not kept as metrics") and the run's model left unknown
    ds = _wandb_export(
        tmp_path, "model,momentum_convention,optimizer", {"a": "Qwen/Qwen2.5-0.5B,ema,adamw", "b": "Qwen/Qwen2.5-7B,ema,adamw"}
    )
    assert run_coords(ds, "a")["model"] == "Qwen/Qwen2.5-0.5B"
    assert run_coords(ds, "b")["model"] == "Qwen/Qwen2.5-7B"
    assert run_coords(ds, "a")["momentum_convention"] == "ema"
    sources = json.loads(ds.attrs[INGEST_ATTR])["a"]["hyperparameter_sources"]
    assert sources["model"] == "constant text column 'model' of wandb_export.csv"
    # a text column that is no run attribute is still named as not kept
    assert any("text fields not kept as metrics: ['optimizer']" in w for w in runset_warnings(ds)["a"])
    # a manifest's value comes first; the column that disagrees is named with both values
    manifest = tmp_path / "runs.csv"
    manifest.write_text("path,run_name,run,model\nwandb_export.csv,a,a,Qwen/Qwen2.5-1.5B\n")
    ds = load_runs(manifest=manifest)
    assert run_coords(ds, "a")["model"] == "Qwen/Qwen2.5-1.5B"
    (warning,) = [w for w in runset_warnings(ds)["a"] if w.count("model") > 1]
    assert "runs.csv" in warning and "constant text column 'model' of wandb_export.csv" in warning
    assert "'Qwen/Qwen2.5-0.5B'" in warning


def test_a_model_column_of_two_values_one_after_the_other_is_no_run_attribute(tmp_path):
    rows = ["step,reward,model"]
    rows += [f"{s},{r},{'base' if s < 6 else 'sft'}" for s, r in enumerate(REWARD, start=1)]
    path = tmp_path / "qwen.csv"
    path.write_text("\n".join(rows) + "\n")
    ds = load_runs([path])
    assert run_coords(ds, "qwen")["model"] == ""
    assert any("text fields not kept as metrics: ['model']" in w for w in runset_warnings(ds)["qwen"])


def test_a_kl_coefficient_printed_as_zero_to_three_decimals_is_warned_of(tmp_path):
    # older verl printed every value to 3 decimals ('actor/kl_coef:0.000' for a kl_loss_coef
    # of 1e-4): the run's beta read 0 without a word
    def write(path, coef, fmt):
        path.write_text(
            "\n".join(
                f"(main_task pid=7) step:{s} - critic/score/mean:{fmt(r)} - "
                f"actor/kl_loss:{fmt(0.001 * s)} - actor/kl_coef:{coef} - actor/entropy:0.512"
                for s, r in enumerate(REWARD, start=1)
            )
            + "\n"
        )

    rounded = tmp_path / "rounded.log"
    write(rounded, "0.000", lambda v: f"{v:.3f}")
    ds = load_runs([rounded])
    assert run_coords(ds, "rounded")["beta"] == 0.0
    (warning,) = [w for w in runset_warnings(ds)["rounded"] if "beta = 0" in w]
    assert "'actor/kl_coef'" in warning and "3 decimals" in warning and "manifest" in warning
    # a beta the manifest gives is kept, without the warning
    manifest = tmp_path / "runs.csv"
    manifest.write_text("path,run,beta\nrounded.log,rounded,0.0001\n")
    ds = load_runs(manifest=manifest)
    assert run_coords(ds, "rounded")["beta"] == 0.0001
    assert not [w for w in runset_warnings(ds)["rounded"] if "beta = 0" in w]
    # a log of full values that logs a coefficient of 0 means 0
    full = tmp_path / "full.log"
    write(full, "0.0", lambda v: repr(v + 1e-7))
    ds = load_runs([full])
    assert run_coords(ds, "full")["beta"] == 0.0
    assert not [w for w in runset_warnings(ds)["full"] if "beta = 0" in w]


def test_a_csvs_constant_parameter_count_and_budget_columns_are_the_runs_attributes(tmp_path):
    # a W&B export's config columns: the HF wandb callback's model/num_parameters and a
    # completions_per_step column were kept as metrics, model_size and the budget left unknown
    ds = _wandb_export(
        tmp_path, "model/num_parameters,completions_per_step", {"a": "494032768,64"}, step_column="train/global_step"
    )
    coords = run_coords(ds, "a")
    assert coords["model_size"] == 494032768 and coords["completions_per_step"] == 64
    sources = json.loads(ds.attrs[INGEST_ATTR])["a"]["hyperparameter_sources"]
    assert sources["model_size"] == "constant logged metric 'model/num_parameters'"


def test_a_table_of_several_models_without_a_run_column_is_a_run_per_model(tmp_path):
    # model,step,reward comparing two models was read as one run that starts over at step 1:
    # the second model's rewards replaced the first's at every step, the model left unknown
    rows = ["model,step,reward"]
    for model, offset in (("Qwen/Qwen2.5-0.5B", 0.0), ("Qwen/Qwen2.5-7B", 0.2)):
        rows += [f"{model},{s},{r + offset}" for s, r in enumerate(REWARD, start=1)]
    path = tmp_path / "compare.csv"
    path.write_text("\n".join(rows) + "\n")
    ds = load_runs([path])
    assert ds.sizes["run"] == 2
    by_model = {str(ds.model.sel(run=r).values): r for r in ds.run.values}
    np.testing.assert_allclose(ds.reward.sel(run=by_model["Qwen/Qwen2.5-0.5B"]).values, REWARD)
    np.testing.assert_allclose(
        ds.reward.sel(run=by_model["Qwen/Qwen2.5-7B"]).values, np.add(REWARD, 0.2)
    )
    assert not any("logged more than once" in w for ws in runset_warnings(ds).values() for w in ws)
    # a JSONL file alike
    lines = [
        json.dumps({"model": model, "step": s, "reward": r + offset})
        for model, offset in (("Qwen/Qwen2.5-0.5B", 0.0), ("Qwen/Qwen2.5-7B", 0.2))
        for s, r in enumerate(REWARD, start=1)
    ]
    (tmp_path / "compare.jsonl").write_text("\n".join(lines) + "\n")
    ds = load_runs([tmp_path / "compare.jsonl"])
    assert sorted(map(str, ds.model.values)) == ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-7B"]
    assert not any("logged more than once" in w for ws in runset_warnings(ds).values() for w in ws)
    # one model throughout: one run, named as before (its file), the model its attribute
    one = tmp_path / "single.csv"
    one.write_text("\n".join(rows[: N + 1]) + "\n")
    ds = load_runs([one])
    assert list(ds.run.values) == ["single"]
    assert run_coords(ds, "single")["model"] == "Qwen/Qwen2.5-0.5B"


def test_a_manifests_momentum_convention_is_read_whatever_its_case_and_separator(tmp_path):
    for name in ("a", "b", "c"):
        _write_state(tmp_path / name)
    (tmp_path / "m.csv").write_text(
        "path,run,momentum,momentum_convention\n"
        "a,A,0.9,EMA\nb,B,0.9,Heavy-Ball\nc,C,0.9,nesterov\n"
    )
    ds = load_runs([], manifest=tmp_path / "m.csv")
    assert run_coords(ds, "A")["momentum_convention"] == "ema"
    assert run_coords(ds, "B")["momentum_convention"] == "heavy_ball"
    assert run_coords(ds, "C")["momentum_convention"] == ""  # no convention this package knows
    assert any("'nesterov'" in w and "left unknown" in w for w in runset_warnings(ds)["C"])


@pytest.mark.parametrize("damage", ["none", "cut", "byte"])
def test_an_event_file_cut_short_or_damaged_says_what_was_not_read(tmp_path, damage):
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    writer = torch_tb.SummaryWriter(str(tmp_path / "run"))
    for s in range(1, 41):
        writer.add_scalar("train/reward", 0.01 * s, s)
    writer.close()
    (path,) = (tmp_path / "run").glob("events.out.tfevents.*")
    data = path.read_bytes()
    if damage == "cut":  # a crash or a full disk mid-write; a live run's file looks the same
        path.write_bytes(data[:-30])
    elif damage == "byte":  # one byte of a record in the middle: TensorBoard stops there
        path.write_bytes(data[:600] + bytes([data[600] ^ 0xFF]) + data[601:])
    ds = load_runs([path])
    notes = [w for w in runset_warnings(ds).get("run", []) if "event file" in w]
    n_read = int(ds.reward.notnull().sum())
    if damage == "none":
        assert n_read == 40 and notes == []
    elif damage == "cut":
        (note,) = notes
        assert n_read == 39 and "ends in a partial record" in note and "records before it were read, the last 20 bytes were not" in note
    else:
        (note,) = notes
        assert n_read < 20 and "has a damaged record at byte" in note


def test_gpt2s_learned_positions_are_counted_in_its_model_size():
    # the tiny GPT-2 of `bayes-grpo train` (2 layers, n_embd 64, 16 positions) has 101,760 weights
    # (103,552 with norms and biases); its wpe table of 16 x 64 was left out: 100,736
    from bayes_grpo.runset.loaders.sidecar import estimate_parameters

    tiny = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": 16, "vocab_size": 38,
            "activation_function": "gelu_new"}  # fmt: skip
    assert estimate_parameters(tiny) == 101760.0
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "vocab_size": 50257}
    assert estimate_parameters(gpt2) == pytest.approx(124.4e6, rel=0.01)  # gpt2: 124,439,808 parameters
    # rotary positions are no weights (GPT-J names n_positions beside its rotary_dim)
    assert estimate_parameters({**gpt2, "rotary_dim": 64}) == estimate_parameters(gpt2) - 1024 * 768


@pytest.mark.parametrize("given", ["file", "folder"])
def test_json_lines_in_a_json_file_with_records_longer_than_4_kb_are_read(tmp_path, given):
    # a '.json' file of one object per line was told from a single JSON object by a second
    # '{' line in its first 4096 characters: a logger writing a few hundred metrics a step
    # (verl's actor/*, critic/*, timing/*) writes lines of 5 KB, and such a file was "not a
    # recognised log format", or in a folder passed over without a word
    path = tmp_path / "run" / "metrics.json"
    path.parent.mkdir()
    lines = [
        json.dumps({"step": s, "reward": r, **{f"actor/metric_{i:03d}": 0.5 for i in range(200)}})
        for s, r in enumerate(REWARD, start=1)
    ]
    assert len(lines[0]) > 4096
    path.write_text("\n".join(lines) + "\n")
    ds = load_runs([path if given == "file" else tmp_path])
    assert ds.sizes["run"] == 1
    np.testing.assert_allclose(ds.reward.values[0], REWARD)


def test_one_json_object_on_a_single_line_is_not_read_as_json_lines(tmp_path):
    # the long-line reading of a '.json' file keeps a compact config (one object, one line)
    # out of the logs
    from bayes_grpo.runset.loaders import detect_format

    path = tmp_path / "settings.json"
    path.write_text(json.dumps({f"key_{i}": i for i in range(1000)}) + "\n")
    assert detect_format(path) is None


def test_a_sweep_of_hundreds_of_runs_that_start_alike_finds_only_the_run_read_twice():
    # same_training_twice compared every two runs that start alike with pandas' index
    # intersection and .loc, 1 ms a pair: 600 runs whose reward is 0 for their first steps
    # (a stalled start) took 84 s (the CLI test of 600 such runs read through a pipe: 62 s on CI);
    # the table comparison finds the same pairs (the time: benchmarks/bench_ingest_repeats.py)
    import pandas as pd

    from bayes_grpo.runset.ingest import same_training_twice
    from bayes_grpo.runset.schema import REWARD_VAR

    steps = np.arange(1, 51)
    rise = np.clip(steps - 5, 0, None)
    curves = {f"run{k:03d}": pd.DataFrame({REWARD_VAR: (0.3 + 0.001 * k) * (1 - np.exp(-rise / 5.0))}, index=steps) for k in range(600)}
    curves["run000_console"] = curves["run000"].round(4).iloc[::2]  # its console log: 25 steps, 4 digits
    notes = same_training_twice(curves)
    assert sorted(notes) == ["run000", "run000_console"]
    assert notes["run000"] == [
        "the same rewards as run 'run000_console' at all 25 steps both logged: one training read twice? "
        "(a fit would count it twice; ingest only one of them, e.g. with a manifest)"
    ]


def test_a_stopped_run_and_its_rerun_with_the_same_seed_are_said_so_not_one_training_read_twice(tmp_path):
    # `train runs/a` stopped at step 20 (completed false), then `train runs/b` with the same seed
    # to the end: the two were said to have "the same rewards ... one training read twice?"
    meta = {"model": "tiny-gpt2", "group_size": 4, "seed": 0, "max_steps": 40}
    rewards = [round(0.1 + 0.01 * i, 4) for i in range(40)]
    _write_state(tmp_path / "a", n=20, rewards=rewards, with_eval=False)
    (tmp_path / "a" / "bayes_grpo_run.json").write_text(json.dumps(meta | {"completed": False, "steps_done": 20}))
    _write_state(tmp_path / "b", n=40, rewards=rewards, with_eval=False)
    (tmp_path / "b" / "bayes_grpo_run.json").write_text(json.dumps(meta | {"completed": True, "steps_done": 40}))
    warned = runset_warnings(load_runs([tmp_path]))
    (stopped,) = [w for w in warned["a"] if "same rewards" in w]
    (rerun,) = [w for w in warned["b"] if "same rewards" in w]
    assert "the same rewards at all 20 steps this partial run (\"completed\": false) logged as the first 20 logged steps of run 'b'" in stopped
    assert "its first 20 logged steps have the same rewards as run 'a', a partial run" in rerun
    for said in (stopped, rerun):
        assert "a stopped run and its rerun with the same seed?" in said and "read twice" not in said
        assert "ingest only one of them, e.g. the complete run 'b', with a manifest" in said
    # both complete (a log read twice): as before
    (tmp_path / "a" / "bayes_grpo_run.json").write_text(json.dumps(meta | {"completed": True}))
    warned = runset_warnings(load_runs([tmp_path]))
    assert any("one training read twice?" in w for w in warned["a"]) and not any("rerun" in w for w in warned["b"])


def test_a_run_stopped_twice_and_its_rerun_are_said_so_not_one_training_read_more_than_once(tmp_path):
    # `train runs/a` stopped at step 20, `train runs/a2` with the same seed stopped at 30, then
    # `train runs/b` to the end: the "stopped run and its rerun" wording held only for two runs,
    # so these three were said to be "one training read more than once?"
    meta = {"model": "tiny-gpt2", "group_size": 4, "seed": 0, "max_steps": 40}
    rewards = [round(0.1 + 0.01 * i, 4) for i in range(40)]
    for name, n, completed in (("a", 20, False), ("a2", 30, False), ("b", 40, True)):
        _write_state(tmp_path / name, n=n, rewards=rewards, with_eval=False)
        (tmp_path / name / "bayes_grpo_run.json").write_text(json.dumps(meta | {"completed": completed, "steps_done": n}))
    warned = runset_warnings(load_runs([tmp_path]))
    (first,) = [w for w in warned["a"] if "same rewards" in w]
    (second,) = [w for w in warned["a2"] if "same rewards" in w]
    (rerun,) = [w for w in warned["b"] if "same rewards" in w]
    assert "the same rewards at all 20 steps this partial run (\"completed\": false) logged as the first 20 logged steps of run 'b' (the partial run 'a2' logged the same rewards as far as it ran)" in first
    assert "at all 30 steps this partial run (\"completed\": false) logged as the first 30 logged steps of run 'b' (the partial run 'a' logged the same rewards as far as it ran)" in second
    assert "its first logged steps have the same rewards as 2 partial runs (\"completed\": false): 'a' at all 20 steps, 'a2' at all 30 steps" in rerun
    for said in (first, second, rerun):
        assert "a run stopped twice and rerun with the same seed?" in said and "read" not in said
        assert "a fit would count those steps more than once" in said
        assert "ingest only one of them, e.g. the complete run 'b', with a manifest" in said
    # a second complete run among them (a log read twice as well): the read-more-than-once note
    _write_state(tmp_path / "c", n=40, rewards=rewards, with_eval=False)
    (tmp_path / "c" / "bayes_grpo_run.json").write_text(json.dumps(meta | {"completed": True}))
    warned = runset_warnings(load_runs([tmp_path]))
    assert all(any("read more than once?" in w for w in warned[r]) for r in ("a", "a2", "b", "c"))
    assert not any("rerun" in w for r in ("a", "a2", "b", "c") for w in warned[r])


def test_a_run_repeated_in_many_others_gets_one_read_twice_note_naming_a_few():
    # 600 identical runs (the CLI test's sweep) gave every run 599 read-twice lines, one a match
    import pandas as pd

    from bayes_grpo.runset.ingest import same_training_twice
    from bayes_grpo.runset.schema import REWARD_VAR

    steps = np.arange(1, 31)
    curve = pd.DataFrame({REWARD_VAR: 0.8 - 0.6 * np.exp(-steps / 8.0)}, index=steps)
    notes = same_training_twice({f"r{k}": curve for k in range(5)} | {"three_steps_less": curve.iloc[:-3]})
    assert all(len(ws) == 1 for ws in notes.values()) and len(notes) == 6
    assert notes["r0"][0].startswith(
        "the same rewards as 5 other runs ('r1' at all 30 steps, 'r2' at all 30 steps, 'r3' at all 30 "
        "steps, and 2 more) at every step both logged: one training read more than once?"
    )
    assert "'r0' at all 27 steps" in notes["three_steps_less"][0]


def test_a_log_given_twice_is_read_once_and_says_so(tmp_path):
    # a folder and a file inside it (or one path twice) named one log twice: it was read once
    # without a word
    run_dir = tmp_path / "qwen-g8"
    run_dir.mkdir()
    history = [_trl_entry(s, 0.1 + 0.6 * (1 - np.exp(-s / 8))) for s in range(1, 31)]
    (run_dir / "trainer_state.json").write_text(json.dumps(_trainer_state(history)))
    ds = load_runs([tmp_path, run_dir / "trainer_state.json"])
    assert ds.sizes["run"] == 1
    notes = [w for ws in runset_warnings(ds).values() for w in ws if "given more than once" in w]
    assert len(notes) == 1 and notes[0].endswith(
        f"given more than once ({str(tmp_path)!r}, then {str(run_dir / 'trainer_state.json')!r}): read once"
    )
    # given once: nothing to say
    assert not any("given more than once" in w for ws in runset_warnings(load_runs([tmp_path])).values() for w in ws)
