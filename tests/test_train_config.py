"""Theory knobs -> TRL settings, run metadata, and clear errors for bad configurations."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bayes_grpo.cli import main as cli_main
from bayes_grpo.runset.schema import RUN_COORDS
from bayes_grpo.train.config import (
    TrainConfig,
    grpo_config_kwargs,
    k_ref_mapping,
    run_metadata,
    validate_config,
)


@pytest.mark.parametrize("k_ref", [1, 2, 4, 8])
@pytest.mark.parametrize("via", ["steps_per_generation", "num_iterations"])
@pytest.mark.parametrize("ga", [1, 2])
def test_k_ref_is_optimizer_steps_per_rollout(k_ref, via, ga):
    cfg = TrainConfig(
        k_ref=k_ref, k_ref_via=via, gradient_accumulation_steps=ga, prompts_per_step=8, group_size=4
    )
    m = k_ref_mapping(cfg)
    assert (
        m["steps_per_generation"] * m["num_iterations"] / m["gradient_accumulation_steps"] == k_ref
    )
    # one optimizer step always sees prompts_per_step x G completions, whatever K_ref is
    assert m["per_device_train_batch_size"] * m["gradient_accumulation_steps"] == 8 * 4
    if via == "steps_per_generation":
        # fresh prompts each step: a rollout holds K_ref steps' worth of prompts
        assert m["num_iterations"] == 1 and m["generation_batch_size"] == 32 * k_ref
    else:
        # the same rollout is reused K_ref times
        assert m["num_iterations"] == k_ref and m["generation_batch_size"] == 32


def test_trl_derives_the_same_batches_from_the_mapped_config(tmp_path):
    trl = pytest.importorskip("trl")
    cfg = TrainConfig(k_ref=4, group_size=4, completions_per_step=32, optimizer="sgd", momentum=0.8)
    kwargs = grpo_config_kwargs(cfg, str(tmp_path))
    args = trl.GRPOConfig(**kwargs)
    m = k_ref_mapping(cfg)
    assert args.generation_batch_size == m["generation_batch_size"] == 128
    assert args.steps_per_generation == 4 and args.num_iterations == 1
    assert args.num_generations == 4 and args.per_device_train_batch_size == 32
    assert args.optim == "sgd" and args.optim_args == "momentum=0.8"
    assert args.use_cpu and not args.bf16 and args.logging_steps == 1
    assert not args.activation_checkpointing and not args.gradient_checkpointing


def test_adam_momentum_is_beta1_with_ema_convention_and_sgd_is_heavy_ball():
    adam = grpo_config_kwargs(TrainConfig(momentum=0.7), "out")
    assert adam["optim"] == "adamw_torch" and adam["adam_beta1"] == 0.7 and "optim_args" not in adam
    meta_adam = run_metadata(TrainConfig(momentum=0.7), model_label="m", model_size=10)
    meta_sgd = run_metadata(
        TrainConfig(optimizer="sgd", momentum=0.5), model_label="m", model_size=10
    )
    assert (meta_adam["momentum"], meta_adam["momentum_convention"]) == (0.7, "ema")
    assert (meta_sgd["momentum"], meta_sgd["momentum_convention"]) == (0.5, "heavy_ball")


def test_metadata_carries_every_run_coordinate_under_its_contract_name():
    cfg = TrainConfig(
        group_size=4, prompts_per_step=32, learning_rate=3e-3, k_ref=2, beta=0.04, seed=7
    )
    meta = run_metadata(cfg, model_label="tiny-gpt2", model_size=123)
    coords = set(RUN_COORDS) - {"source"}  # the loader sets source
    assert coords <= set(meta)
    assert all(meta[c] not in (None, "") for c in coords)
    assert (
        meta["group_size"] == 4
        and meta["k_ref"] == 2
        and meta["beta"] == 0.04
        and meta["seed"] == 7
    )
    assert meta["prompts_per_step"] == 32 and meta["config"]["completions_per_step"] == 128
    json.dumps(meta)  # serialisable


def test_kl_reference_sync_maps_to_trl_sync_ref_model():
    kw = grpo_config_kwargs(TrainConfig(beta=0.04, ref_model_sync_steps=50), "out")
    assert (
        kw["sync_ref_model"]
        and kw["ref_model_sync_steps"] == 50
        and kw["ref_model_mixup_alpha"] == 1.0
    )
    assert "sync_ref_model" not in grpo_config_kwargs(TrainConfig(beta=0.04), "out")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"group_size": 16, "prompts_per_step": None, "completions_per_step": 100},
            "does not divide the batch",
        ),
        ({"optimizer": "lion"}, "unknown optimizer 'lion'"),
        ({"group_size": 1}, "group_size"),
        ({"momentum": 1.0}, "momentum"),
        ({"k_ref": 0}, "k_ref"),
        ({"learning_rate": -1e-3}, "learning_rate"),
        ({"num_processes": 3}, "does not split over num_processes=3"),
        ({"task": "gsm8k"}, "needs a dataset"),
        ({"ref_model_sync_steps": 10}, "beta = 0"),
        ({"extra_grpo_args": {"num_generations": 4}}, "may not set ['num_generations']"),
        ({"prompts_per_step": 4, "completions_per_step": 32}, "contradicts"),
    ],
)
def test_bad_configurations_fail_before_training_with_a_clear_error(changes, message):
    with pytest.raises(ValueError, match=None) as info:
        TrainConfig(**changes).resolved()
    assert message in str(info.value)


def test_missing_reward_function_fails_before_anything_is_loaded(tmp_path):
    from bayes_grpo.train.runner import run_training

    out = tmp_path / "run"
    with pytest.raises(ValueError, match="missing reward function"):
        run_training(TrainConfig(task="custom", dataset="prompts.jsonl"), out)
    assert not out.exists()


def test_cli_reports_bad_configurations_as_one_error_line(capsys):
    assert cli_main(["train", "out", "-G", "16", "--completions-per-step", "100", "--dry-run"]) == 2
    assert "G=16 does not divide the batch of 100 completions" in capsys.readouterr().err
    assert cli_main(["train", "out", "--task", "custom", "--dataset", "p.jsonl", "--dry-run"]) == 2
    assert "missing reward function" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["train", "out", "--optimizer", "lion"])
    assert "invalid choice: 'lion'" in capsys.readouterr().err


def test_cli_dry_run_prints_the_trl_settings_as_json(capsys):
    assert (
        cli_main(
            [
                "train",
                "out",
                "--k-ref",
                "4",
                "-G",
                "4",
                "--prompts-per-step",
                "32",
                "--dry-run",
                "--json",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    assert plan["grpo_config"]["steps_per_generation"] == 4
    assert plan["grpo_config"]["per_device_train_batch_size"] == 128
    assert plan["k_ref_mapping"]["generation_batch_size"] == 512


def test_gpu_script_dry_run_maps_each_group_size_at_fixed_completions(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "run_real_model_gpu.sh"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DRY_RUN": "1",
        "G_LIST": "4 16",
        "COMPLETIONS": "64",
        "NUM_GPUS": "2",
        "OUT": str(tmp_path),
    }
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "GRPOConfig.num_generations = 4" in out and "GRPOConfig.num_generations = 16" in out
    # 64 completions per step over 2 GPUs: 32 per device whatever G is
    assert out.count("GRPOConfig.per_device_train_batch_size = 32") == 2
    assert not any(tmp_path.iterdir())  # nothing trained or written


def test_gpu_script_runs_without_the_virtualenv_on_path(tmp_path):
    # README runs `scripts/run_real_model_gpu.sh` as is; with the venv not activated a bare
    # `python` lacks bayes_grpo, so the script must find the repository's venv (or $PYTHON).
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV")}
    env.update({"PATH": "/usr/bin:/bin", "DRY_RUN": "1", "G_LIST": "8", "OUT": str(tmp_path)})
    if not (repo / ".venv" / "bin" / "python").exists():
        env["PYTHON"] = sys.executable
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "run_real_model_gpu.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "GRPOConfig.num_generations = 8" in done.stdout


def test_completions_per_step_alone_sets_the_batch_in_python_as_on_the_command_line():
    # TrainConfig(group_size=4, completions_per_step=16) failed with "prompts_per_step=8 x G=4
    # = 32 contradicts completions_per_step=16": the dataclass default of the other knob
    from bayes_grpo.cli import build_parser
    from bayes_grpo.cli.train import config_from_args

    c = TrainConfig(group_size=4, completions_per_step=16).resolved()
    assert (c.prompts_per_step, c.completions_per_step) == (4, 16)
    from bayes_grpo.train.config import DEFAULT_PROMPTS_PER_STEP

    assert TrainConfig(group_size=4).resolved().prompts_per_step == DEFAULT_PROMPTS_PER_STEP
    args = build_parser().parse_args(["train", "out", "-G", "4", "--completions-per-step", "16"])
    assert config_from_args(args).resolved().prompts_per_step == 4
    args = build_parser().parse_args(["train", "out", "-G", "4"])
    assert config_from_args(args).resolved().completions_per_step == 4 * DEFAULT_PROMPTS_PER_STEP


@pytest.mark.parametrize(
    "key",
    [
        "lr_scheduler_type",
        "warmup_steps",
        "weight_decay",
        "adam_beta2",
        "temperature",
        "epsilon",
        "max_completion_length",
        "data_seed",
    ],
)
def test_extra_grpo_args_may_not_override_a_setting_the_run_metadata_records(key):
    # extra_grpo_args={"lr_scheduler_type": "cosine"} trained on a cosine schedule while
    # bayes_grpo_run.json said lr_scheduler "constant": a setting recorded that TRL did not use
    with pytest.raises(ValueError, match=rf"may not set \['{key}'\]"):
        TrainConfig(extra_grpo_args={key: 1}).resolved()


@pytest.mark.parametrize("strategy", ["epoch", "no"])
def test_a_logging_strategy_other_than_every_step_is_refused(strategy):
    # --grpo-arg logging_strategy="no" trained, and trainer_state.json held one entry, the
    # end-of-training summary with the reward averaged over all steps, read as a single point
    with pytest.raises(ValueError, match=r"may not set \['logging_strategy'\]"):
        TrainConfig(extra_grpo_args={"logging_strategy": strategy}).resolved()
    assert grpo_config_kwargs(TrainConfig(), "out")["logging_strategy"] == "steps"


@pytest.mark.parametrize(
    ("scheduler", "needs"),
    [
        ("warmup_stable_decay", "num_decay_steps"),
        ("cosine_with_min_lr", "min_lr"),
        ("reduce_lr_on_plateau", "evaluation"),
    ],
)
def test_a_scheduler_transformers_cannot_build_is_refused_before_the_model_is_loaded(
    scheduler, needs, capsys
):
    # --lr-scheduler warmup_stable_decay passed the dry run, loaded the model and then ended in
    # a TypeError traceback when transformers built the scheduler (get_wsd_schedule() missing
    # 'num_decay_steps'); cosine_with_min_lr and reduce_lr_on_plateau failed there too
    argv = ["train", "out", "--lr-scheduler", scheduler, "--steps", "10", "--dry-run"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "--lr-scheduler" in err and needs in err and len(err.strip().splitlines()) == 1


def test_a_scheduler_given_its_kwargs_is_taken():
    for scheduler, kwargs in (
        ("warmup_stable_decay", {"num_decay_steps": 3}),
        ("cosine_with_min_lr", '{"min_lr_rate": 0.1}'),  # a JSON string, as transformers takes
    ):
        extra = {"lr_scheduler_kwargs": kwargs}
        cfg = TrainConfig(lr_scheduler=scheduler, max_steps=10, extra_grpo_args=extra)
        assert grpo_config_kwargs(cfg, "out")["lr_scheduler_kwargs"] == kwargs


@pytest.mark.parametrize(
    ("arg", "kind"), [("max_grad_norm=None", "a number"), ("torch_compile=True", "true or false")]
)
def test_a_grpo_arg_given_as_text_for_a_number_is_one_error_line(arg, kind, capsys):
    # --grpo-arg max_grad_norm=None (not JSON: the text "None") passed the dry run, loaded the
    # model and ended in a TypeError traceback in the training ('>' not supported between
    # instances of 'str' and 'int')
    assert cli_main(["train", "out", "--grpo-arg", arg, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert arg.split("=")[0] in err and kind in err and len(err.strip().splitlines()) == 1
    cfg = TrainConfig(extra_grpo_args={"max_grad_norm": None, "loss_type": "grpo"})
    assert grpo_config_kwargs(cfg, "out")["max_grad_norm"] is None


def test_a_next_digit_run_of_one_token_completions_is_refused(capsys):
    # --max-completion-length 1 trained a next_digit run whose every completion scored 0: the
    # reward asks for the digit and the end-of-sequence token
    argv = ["train", "out", "--max-completion-length", "1", "--dry-run"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "--max-completion-length" in err and "2 tokens" in err
    assert cli_main([*argv[:3], "2", "--dry-run"]) == 0


def test_a_split_asked_of_a_dataset_file_is_refused_not_ignored(tmp_path, capsys):
    # --dataset-split test with a .jsonl file trained on the whole file (datasets reads a file as
    # its one split, "train") while bayes_grpo_run.json recorded dataset_split "test"
    data = tmp_path / "gsm.jsonl"
    data.write_text(json.dumps({"question": "next 1 =", "answer": "#### 2"}), encoding="utf-8")
    argv = ["train", "out", "--task", "gsm8k", "--dataset", str(data), "--dry-run"]
    assert cli_main([*argv, "--dataset-split", "test"]) == 2
    assert "--dataset-split" in capsys.readouterr().err
    assert cli_main(argv) == 0


def test_num_processes_zero_is_refused_not_replaced_by_the_launchers_count(capsys):
    # --num-processes 0 was taken as "not given" and became $WORLD_SIZE (else 1) without a word
    assert cli_main(["train", "out", "--num-processes", "0", "--dry-run"]) == 2
    assert (
        "num_processes (--num-processes) must be an integer >= 1, got 0" in capsys.readouterr().err
    )


def test_numpy_numbers_of_a_sweep_are_taken_and_written_as_json_numbers():
    # a sweep `for G in np.array([4, 8])` was refused ("got np.int64(4)"), and a learning rate or
    # momentum given as np.float32 passed but went into bayes_grpo_run.json as a string "0.001"
    np = pytest.importorskip("numpy")
    cfg = TrainConfig(
        group_size=np.int64(4),
        prompts_per_step=np.int32(2),
        k_ref=np.int64(2),
        learning_rate=np.float32(1e-3),
        momentum=np.float32(0.5),
    )
    meta = json.loads(json.dumps(run_metadata(cfg, model_label="m", model_size=1), default=str))
    for key in ("group_size", "k_ref", "learning_rate", "momentum", "completions_per_step"):
        assert isinstance(meta[key], int | float) and not isinstance(meta[key], bool), key
    assert meta["group_size"] == 4 and meta["completions_per_step"] == 16
    assert meta["learning_rate"] == float(np.float32(1e-3)) and meta["momentum"] == 0.5
    assert grpo_config_kwargs(cfg, "runs/x")["num_generations"] == 4


def test_an_unknown_grpo_arg_fails_the_dry_run_as_it_fails_the_run(capsys):
    # `train runs/x --dry-run --grpo-arg foo=1` printed the plan (exit 0); the run itself then
    # failed with "TRL rejected the configuration ... unexpected keyword argument 'foo'"
    pytest.importorskip("trl")
    assert cli_main(["train", "runs/x", "--dry-run", "--grpo-arg", "foo=1"]) == 2
    err = capsys.readouterr().err
    assert "extra_grpo_args (--grpo-arg) ['foo']: not arguments of trl.GRPOConfig" in err
    assert (
        cli_main(["train", "runs/x", "--dry-run", "--grpo-arg", 'loss_type="grpo"', "--json"]) == 0
    )
    assert '"loss_type": "grpo"' in capsys.readouterr().out


def test_dry_run_shows_the_dropout_setting_the_run_trains_with(capsys):
    # the runner added disable_dropout=True to GRPOConfig after grpo_config_kwargs, so
    # `train --dry-run` did not show it (and --grpo-arg disable_dropout=false looked unset)
    assert cli_main(["train", "runs/x", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["grpo_config"]["disable_dropout"] is True
    args = ["train", "runs/x", "--dry-run", "--json", "--grpo-arg", "disable_dropout=false"]
    assert cli_main(args) == 0
    assert json.loads(capsys.readouterr().out)["grpo_config"]["disable_dropout"] is False


def test_dry_run_says_when_the_run_directory_would_be_refused(tmp_path, capsys):
    # `train DIR --dry-run` over a folder holding a run printed the plan with no word; the run
    # itself then stopped at once with "already holds a run"
    held = tmp_path / "held"
    held.mkdir()
    (held / "bayes_grpo_run.json").write_text("{}")
    assert cli_main(["train", str(held), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert (
        f"note: the run would stop here: {held}: already holds a run (bayes_grpo_run.json)" in out
    )
    assert cli_main(["train", str(held), "--dry-run", "--overwrite", "--json"]) == 0
    assert "run_dir_problem" not in json.loads(capsys.readouterr().out)
    assert cli_main(["train", str(tmp_path / "new"), "--dry-run", "--json"]) == 0
    assert "run_dir_problem" not in json.loads(capsys.readouterr().out)
    assert not (tmp_path / "new").exists()


def test_a_misspelt_scheduler_fails_the_dry_run_as_it_fails_the_run(capsys):
    # `train runs/x --dry-run --lr-scheduler cosin` printed the plan (exit 0); the run then
    # failed after loading the model: "TRL rejected the configuration ... cosin is not a valid
    # SchedulerType"
    pytest.importorskip("transformers")
    assert cli_main(["train", "runs/x", "--dry-run", "--lr-scheduler", "cosin"]) == 2
    err = capsys.readouterr().err
    assert "unknown lr_scheduler (--lr-scheduler) 'cosin'; transformers knows [" in err
    assert "'cosine'" in err and len(err.strip().splitlines()) == 1
    assert cli_main(["train", "runs/x", "--dry-run", "--lr-scheduler", "inverse_sqrt"]) == 0


def test_a_seed_beyond_32_bits_is_refused_naming_the_seed(capsys):
    # `train runs/x --seed 4294967296` loaded the model, then stopped with numpy's "Seed must be
    # between 0 and 2**32 - 1" (transformers' set_seed), naming no option
    assert cli_main(["train", "runs/x", "--dry-run", "--seed", str(2**32)]) == 2
    assert (
        "seed (--seed) must be an integer <= 4294967295, got 4294967296" in capsys.readouterr().err
    )
    assert cli_main(["train", "runs/x", "--dry-run", "--seed", str(2**32 - 1)]) == 0


def test_resume_from_checkpoint_as_a_grpo_arg_is_refused_not_ignored(capsys):
    # `--grpo-arg resume_from_checkpoint="runs/x/checkpoint-6"` was printed by --dry-run as a
    # GRPOConfig setting, and the run trained from step 0: the Trainer never reads that field
    args = [
        "train",
        "runs/x",
        "--dry-run",
        "--grpo-arg",
        'resume_from_checkpoint="runs/x/checkpoint-6"',
    ]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "resume_from_checkpoint: transformers' Trainer does not read it" in err
    assert "would train again from step 0" in err and len(err.strip().splitlines()) == 1


def test_cli_sets_the_clip_range_weight_decay_and_adam_beta2_through_their_own_options(capsys):
    argv = ["train", "out", "--epsilon", "0.3", "--weight-decay", "0.01", "--adam-beta2", "0.99"]
    assert cli_main([*argv, "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["grpo_config"]["epsilon"] == 0.3 == plan["config"]["epsilon"]
    assert plan["grpo_config"]["weight_decay"] == 0.01 == plan["config"]["weight_decay"]
    assert plan["grpo_config"]["adam_beta2"] == 0.99 == plan["config"]["adam_beta2"]
    assert cli_main(["train", "out", "--grpo-arg", "epsilon=0.3", "--dry-run"]) == 2
    assert "may not set ['epsilon']" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("via", "averaged"), [("steps_per_generation", 3 * 64), ("num_iterations", 64)]
)
def test_completions_per_step_coordinate_counts_the_completions_of_one_logged_reward(via, averaged):
    # TRL logs the mean reward of a whole rollout: with k_ref_via="steps_per_generation" that is
    # K_ref optimizer steps' worth of completions, but the metadata said one step's (64)
    cfg = TrainConfig(group_size=4, prompts_per_step=16, k_ref=3, k_ref_via=via, num_processes=2)
    meta = run_metadata(cfg, model_label="m", model_size=10)
    assert (
        meta["completions_per_step"] == averaged == meta["k_ref_mapping"]["generation_batch_size"]
    )
    assert meta["config"]["completions_per_step"] == 64


def test_a_warm_up_on_the_constant_schedule_is_trained_with(tmp_path):
    # lr_scheduler="constant" (the default) with warmup_steps=5 trained at the full rate from
    # the first step: transformers' "constant" ignores warmup_steps, and the run's metadata
    # recorded a warm-up that TRL did not use
    import torch
    from transformers import get_scheduler

    kwargs = grpo_config_kwargs(TrainConfig(warmup_steps=5, learning_rate=0.1), str(tmp_path))
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=kwargs["learning_rate"])
    sched = get_scheduler(
        kwargs["lr_scheduler_type"],
        opt,
        num_warmup_steps=kwargs["warmup_steps"],
        num_training_steps=20,
    )
    rates = []
    for _ in range(8):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert rates == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.1, 0.1])
    assert grpo_config_kwargs(TrainConfig(), str(tmp_path))["lr_scheduler_type"] == "constant"


def test_gpu_script_trains_an_interrupted_run_again_and_skips_a_completed_one(tmp_path):
    # an interrupted run leaves bayes_grpo_run.json ("completed": false) beside its checkpoints;
    # the script took that file alone for a finished run and skipped it
    import os
    import subprocess
    from pathlib import Path

    launcher = tmp_path / "python"  # stands in for the Python the script launches: prints its argv
    launcher.write_text('#!/bin/sh\necho "LAUNCHED $*"\n')
    launcher.chmod(0o755)
    out = tmp_path / "out"
    interrupted = out / "Qwen2.5-0.5B-Instruct_g4_c64_lr1e-6_k1_s0"
    finished = out / "Qwen2.5-0.5B-Instruct_g8_c64_lr1e-6_k1_s0"
    # an interrupted run also keeps the steps it logged as trainer_state.json: the script took
    # that file and the metadata together for a finished run
    for run, completed in ((interrupted, "false"), (finished, "true")):
        run.mkdir(parents=True)
        (run / "bayes_grpo_run.json").write_text(f'{{\n  "completed": {completed}\n}}\n')
        (run / "trainer_state.json").write_text("{}")
    env = {**os.environ, "PYTHON": str(launcher), "NUM_GPUS": "1", "OUT": str(out)}
    script = Path(__file__).resolve().parents[1] / "scripts" / "run_real_model_gpu.sh"
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    launched = [line for line in done.stdout.splitlines() if line.startswith("LAUNCHED")]
    assert len(launched) == 1 and f"train {interrupted} " in launched[0]
    assert launched[0].endswith("--overwrite")
    assert f"{finished}: exists, skipped" in done.stdout


def test_reward_module_in_the_current_folder_is_found_by_the_console_script(
    tmp_path, monkeypatch, capsys
):
    # `bayes-grpo train --reward myrewards:fn` with myrewards.py in the current folder failed
    # with "cannot import module": the console script, unlike `python -m`, has no "" on sys.path
    import os
    import sys

    (tmp_path / "bg_qa_rewards.py").write_text(
        "def always_one(prompts, completions, **kw):\n    return [1.0] * len(completions)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    monkeypatch.delitem(sys.modules, "bg_qa_rewards", raising=False)
    argv = ["train", "out", "--task", "custom", "--dataset", "p.jsonl", "--dry-run"]
    assert cli_main([*argv, "--reward", "bg_qa_rewards:always_one"]) == 0, capsys.readouterr().err


def test_a_warm_up_as_long_as_the_run_is_refused_naming_both_flags():
    # the rate would never reach learning_rate, which the run's metadata records as its rate
    with pytest.raises(ValueError, match=r"--warmup-steps.*12.*--steps.*learning_rate = 0.001"):
        validate_config(TrainConfig(max_steps=12, warmup_steps=12, learning_rate=1e-3))
    validate_config(TrainConfig(max_steps=12, warmup_steps=11, learning_rate=1e-3))
    # a one-step run: "is not below the run's 1 steps"
    with pytest.raises(ValueError, match=r"is not below the run's 1 step \(--steps\)"):
        validate_config(TrainConfig(max_steps=1, warmup_steps=1, learning_rate=1e-3))


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["-G", "1"], "--group-size"),
        (["--steps", "0"], "--steps"),
        (["--lr", "0"], "--lr"),
        (["--k-ref", "0"], "--k-ref"),
        (["--momentum", "1"], "--momentum"),
        (["--seed", "-1"], "--seed"),
        (["--beta", "-0.1"], "--beta"),
        (["--beta", "0.1", "--ref-sync-steps", "0"], "--ref-sync-steps"),
        (["--ref-sync-steps", "5"], "--beta"),
        (["--beta", "0.1", "--ref-sync-steps", "5", "--ref-mixup-alpha", "0"], "--ref-mixup-alpha"),
        (["--temperature", "0"], "--temperature"),
        (["--epsilon", "0"], "--epsilon"),
        (["--weight-decay", "-1"], "--weight-decay"),
        (["--adam-beta2", "1"], "--adam-beta2"),
        (["--gradient-accumulation-steps", "0"], "--gradient-accumulation-steps"),
        (["--gradient-accumulation-steps", "3"], "--gradient-accumulation-steps"),
        (["--max-completion-length", "0"], "--max-completion-length"),
        (["--prompts-per-step", "0"], "--prompts-per-step"),
        (["--completions-per-step", "0"], "--completions-per-step"),
        (
            ["-G", "4", "--prompts-per-step", "2", "--completions-per-step", "16"],
            "--completions-per-step",
        ),
        (["--task", "gsm8k"], "--dataset"),
    ],
)
def test_a_bad_setting_given_on_the_command_line_is_named_by_its_option(argv, option, capsys):
    assert cli_main(["train", "out", *argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert option in err and len(err.strip().splitlines()) == 1, err


def test_every_option_an_error_names_is_an_option_of_the_train_command():
    import dataclasses

    from bayes_grpo.cli import build_parser
    from bayes_grpo.train.config import CLI_OPTIONS

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    options = {s for action in train._actions for s in action.option_strings}
    assert set(CLI_OPTIONS.values()) <= options
    # every setting has its option, but the toy task's prompt-set size (Python only)
    assert set(CLI_OPTIONS) == {f.name for f in dataclasses.fields(TrainConfig)} - {"n_prompts"}


def test_adam_beta2_with_sgd_is_refused_not_recorded_as_a_setting_the_run_did_not_use(capsys):
    argv = ["train", "out", "--optimizer", "sgd", "--adam-beta2", "0.5", "--dry-run"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "--adam-beta2" in err and "'sgd'" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(ValueError, match="adam_beta2"):
        TrainConfig(optimizer="sgd", adam_beta2=0.5).resolved()
    # not given: SGD records none, Adam its default
    sgd = run_metadata(TrainConfig(optimizer="sgd"), model_label="m", model_size=1)
    assert sgd["config"]["adam_beta2"] is None
    assert "adam_beta2" not in grpo_config_kwargs(TrainConfig(optimizer="sgd"), "out")
    assert TrainConfig().resolved().adam_beta2 == 0.999
    assert grpo_config_kwargs(TrainConfig(), "out")["adam_beta2"] == 0.999
    # the unused default an SGD run's metadata of an earlier version holds is taken (as none)
    assert TrainConfig(optimizer="sgd", adam_beta2=0.999).resolved().adam_beta2 is None


def test_a_configuration_asked_of_a_dataset_file_is_refused_not_ignored(tmp_path, capsys):
    # --dataset-config main with a .jsonl file trained on the file (datasets reads a file without
    # a configuration) while bayes_grpo_run.json recorded dataset_config "main"
    data = tmp_path / "gsm.jsonl"
    data.write_text(json.dumps({"question": "next 1 =", "answer": "#### 2"}), encoding="utf-8")
    argv = ["train", "out", "--task", "gsm8k", "--dataset", str(data), "--dry-run"]
    assert cli_main([*argv, "--dataset-config", "main"]) == 2
    err = capsys.readouterr().err
    assert "--dataset-config" in err and "one file" in err and len(err.strip().splitlines()) == 1
    assert cli_main(argv) == 0
    # the toy task reads no dataset: a configuration or split for it is refused too
    for option, value in (("--dataset-config", "main"), ("--dataset-split", "test")):
        assert cli_main(["train", "out", option, value, "--dry-run"]) == 2
        assert option in capsys.readouterr().err


def test_gpu_script_passes_a_dataset_configuration_for_the_hub_gsm8k_only(tmp_path):
    # the script passed --dataset-config main whatever DATASET was: with a dataset file (its own
    # usage example, DATASET=/data/gsm8k.jsonl) the run is refused
    import os
    import subprocess
    from pathlib import Path

    launcher = tmp_path / "python"  # stands in for the Python the script launches: prints its argv
    launcher.write_text('#!/bin/sh\necho "LAUNCHED $*"\n')
    launcher.chmod(0o755)
    script = Path(__file__).resolve().parents[1] / "scripts" / "run_real_model_gpu.sh"

    def launched(**env_vars):
        env = {k: v for k, v in os.environ.items() if k not in ("DATASET", "DATASET_CONFIG")}
        env.update(PYTHON=str(launcher), NUM_GPUS="1", G_LIST="8", OUT=str(tmp_path / "o"))
        done = subprocess.run(
            ["bash", str(script)], env={**env, **env_vars}, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if line.startswith("LAUNCHED")][0]

    assert "--dataset openai/gsm8k " in launched() and "--dataset-config main" in launched()
    assert "--dataset-config" not in launched(DATASET="/data/gsm8k.jsonl")
    assert "--dataset-config socratic" in launched(DATASET="/data/gsm8k", DATASET_CONFIG="socratic")
    assert "--dataset-config" not in launched(DATASET_CONFIG="")


def test_the_next_digit_prompt_set_does_not_grow_with_the_run_length():
    from bayes_grpo.train.config import NEXT_DIGIT_PROMPTS

    sizes = {validate_config(TrainConfig(max_steps=n)).n_prompts for n in (1, 300, 5000)}
    assert sizes == {NEXT_DIGIT_PROMPTS}
    # at least one rollout: K_ref x prompts with steps_per_generation
    big = TrainConfig(group_size=2, prompts_per_step=512, k_ref=4, max_steps=3)
    assert validate_config(big).n_prompts == 2048
    # a size for a task that reads its prompts from a dataset would be unused: refused
    with pytest.raises(ValueError, match="n_prompts = 5 is the size of the next_digit"):
        TrainConfig(task="gsm8k", dataset="d.jsonl", n_prompts=5).resolved()


def test_gradient_checkpointing_given_as_a_grpo_arg_is_trained_with_not_dropped(tmp_path):
    # the runner sets activation_checkpointing off (TRL's default is on); transformers reads the
    # deprecated alias gradient_checkpointing only when that is unset: the user's true was dropped
    trl = pytest.importorskip("trl")
    for value in (True, False):
        cfg = TrainConfig(extra_grpo_args={"gradient_checkpointing": value})
        args = trl.GRPOConfig(**grpo_config_kwargs(cfg, str(tmp_path)))
        assert args.activation_checkpointing is value and args.gradient_checkpointing is value
    args = trl.GRPOConfig(**grpo_config_kwargs(TrainConfig(), str(tmp_path)))
    assert args.activation_checkpointing is False


def test_num_train_epochs_as_a_grpo_arg_is_refused_not_ignored(capsys):
    # transformers trains max_steps (always set, from --steps) and ignores num_train_epochs: a run
    # asked for one epoch trained 300 steps
    assert cli_main(["train", "out", "--grpo-arg", "num_train_epochs=1", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "num_train_epochs" in err and "--steps" in err and len(err.strip().splitlines()) == 1


def test_a_mixing_weight_without_a_reference_sync_is_refused_not_recorded(capsys):
    # --ref-mixup-alpha 0.5 without --ref-sync-steps trained without a sync and recorded
    # config.ref_model_mixup_alpha = 0.5 in bayes_grpo_run.json
    assert cli_main(["train", "out", "--beta", "0.1", "--ref-mixup-alpha", "0.5", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--ref-mixup-alpha" in err and "--ref-sync-steps" in err
    assert len(err.strip().splitlines()) == 1
    meta = run_metadata(TrainConfig(beta=0.1), model_label="m", model_size=1)
    assert meta["config"]["ref_model_mixup_alpha"] is None is meta["ref_model_mixup_alpha"]
    synced = TrainConfig(beta=0.1, ref_model_sync_steps=8)
    assert grpo_config_kwargs(synced, "out")["ref_model_mixup_alpha"] == 1.0
    alpha = dataclasses.replace(synced, ref_model_mixup_alpha=0.5)
    assert grpo_config_kwargs(alpha, "out")["ref_model_mixup_alpha"] == 0.5
    # the unused default a run's metadata of an earlier version holds is taken (as none)
    assert TrainConfig(ref_model_mixup_alpha=1.0).resolved().ref_model_mixup_alpha is None


@pytest.mark.parametrize(
    ("device", "arg"),
    [
        ("cpu", "use_cpu=false"),
        ("cpu", "bf16=true"),
        ("cpu", "fp16=true"),
        ("auto", "use_cpu=true"),
    ],
)
def test_a_grpo_arg_that_contradicts_the_device_is_refused_naming_both(device, arg, capsys):
    # --device cpu --grpo-arg use_cpu=false trained on a GPU where there was one (bf16=true in
    # half precision; --device auto --grpo-arg use_cpu=true on the CPU) while the run recorded
    # the device it was given: --grpo-arg was applied over the device's settings without a word
    assert cli_main(["train", "out", "--device", device, "--grpo-arg", arg, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"--grpo-arg) {arg} contradicts device (--device) {device!r}" in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(ValueError, match="contradicts device"):
        key, value = arg.split("=")
        validate_config(TrainConfig(device=device, extra_grpo_args={key: json.loads(value)}))
    # what agrees with the device is taken: fp32 on a GPU, the CPU's own settings
    for agreed in ({"bf16": False}, {"use_cpu": device == "cpu"}):
        assert validate_config(TrainConfig(device=device, extra_grpo_args=agreed))


@pytest.mark.parametrize(
    ("env", "value"), [("WORLD_SIZE", "abc"), ("WORLD_SIZE", "0"), ("LOCAL_RANK", "x1")]
)
def test_a_malformed_launcher_variable_is_named_with_its_value(
    env, value, capsys, monkeypatch, tmp_path
):
    # WORLD_SIZE=abc was "error: invalid literal for int() with base 10: 'abc'" (and, with
    # --num-processes given, "TRL rejected the configuration" for the same words from accelerate);
    # WORLD_SIZE=0 was blamed on --num-processes, which was not given
    monkeypatch.setenv(env, value)
    argv = ["train", "out", "--dry-run"]
    for extra in ([], ["--num-processes", "1"]):
        assert cli_main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert f"environment variable {env}={value!r}" in err and "--num-processes" not in err
    from bayes_grpo.train.runner import run_training

    with pytest.raises(ValueError, match=f"environment variable {env}="):
        run_training(TrainConfig(max_steps=1), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv(env, "2")
    assert cli_main([*argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["config"]["num_processes"] == (2 if env == "WORLD_SIZE" else 1)


def test_bf16_null_on_the_cpu_is_refused_as_trls_default_of_bf16(capsys):
    # --device cpu --grpo-arg bf16=null passed (null is falsy) and put bf16=None over the CPU's
    # bf16=False: TRL's GRPOConfig reads None as `not fp16`, and the run trained in bf16
    assert cli_main(["train", "out", "--grpo-arg", "bf16=null", "--dry-run"]) == 2
    assert "bf16=null contradicts device (--device) 'cpu'" in capsys.readouterr().err
    assert validate_config(TrainConfig(device="cpu", extra_grpo_args={"fp16": None}))
    assert validate_config(TrainConfig(device="auto", extra_grpo_args={"bf16": None}))


def test_trains_summary_line_says_a_one_step_run_in_the_singular(tmp_path, monkeypatch, capsys):
    # `train out --steps 1` ended "out: 1 steps of tiny-gpt2 ..."
    from types import SimpleNamespace

    import bayes_grpo.train.runner as runner

    def one_step(config, run_dir, **kwargs):
        meta = {
            "max_steps": config.max_steps, "model": "tiny-gpt2", "model_size": 1000, "group_size": 4,
            "prompts_per_step": 8, "learning_rate": 1e-3, "optimizer": "adamw", "momentum": 0.9,
            "momentum_convention": "ema", "k_ref": 1, "beta": 0.0, "seed": 0,
        }  # fmt: skip
        return SimpleNamespace(
            run_dir=run_dir, wall_time_s=1.0, final_reward=0.5, final_reward_steps=(1, 1), last_reward=0.5, metadata=meta
        )

    monkeypatch.setattr(runner, "run_training", one_step)
    assert cli_main(["train", str(tmp_path / "one"), "--steps", "1"]) == 0
    assert f"{tmp_path / 'one'}: 1 step of tiny-gpt2 (1000 parameters)" in capsys.readouterr().out
    assert cli_main(["train", str(tmp_path / "two"), "--steps", "2"]) == 0
    assert ": 2 steps of tiny-gpt2" in capsys.readouterr().out


def test_a_runs_learning_rate_schedule_is_recorded_as_trained_and_said_beside_its_rate(
    monkeypatch, capsys
):
    # `train out --lr-scheduler linear --warmup-steps 20` ended "..., lr=0.001, adamw ...", as a
    # run at a constant 0.001, and bayes_grpo_run.json recorded "lr_scheduler": "constant" for a
    # warm-up that TRL ran as constant_with_warmup, the warm-up itself only inside "config"
    from types import SimpleNamespace

    import bayes_grpo.train.runner as runner

    warm = run_metadata(TrainConfig(warmup_steps=5), model_label="m", model_size=1)
    assert warm["lr_scheduler"] == "constant_with_warmup" and warm["warmup_steps"] == 5
    assert warm["config"]["lr_scheduler"] == "constant"  # as given
    plain = run_metadata(TrainConfig(), model_label="m", model_size=1)
    assert (plain["lr_scheduler"], plain["warmup_steps"]) == ("constant", 0)

    def trained(config, run_dir, **kwargs):
        meta = run_metadata(config, model_label="tiny-gpt2", model_size=1000)
        return SimpleNamespace(
            run_dir=run_dir, wall_time_s=1.0, final_reward=0.5, final_reward_steps=(1, 1),
            last_reward=0.5, metadata=meta,
        )  # fmt: skip

    monkeypatch.setattr(runner, "run_training", trained)
    assert cli_main(["train", "out", "--lr-scheduler", "linear", "--warmup-steps", "20"]) == 0
    assert "lr=0.001 (peak, linear schedule, 20 warm-up steps), adamw" in capsys.readouterr().out
    assert cli_main(["train", "out", "--warmup-steps", "1"]) == 0
    said = capsys.readouterr().out
    assert "lr=0.001 (peak, constant_with_warmup schedule, 1 warm-up step)," in said
    assert cli_main(["train", "out"]) == 0
    assert "lr=0.001, adamw momentum=0.9" in capsys.readouterr().out


def test_a_file_given_as_the_model_or_as_a_dataset_of_no_format_read_is_named_so_before_loading(
    tmp_path, capsys
):
    # `train out --model runs.nc` said "runs.nc: model directory not found" (or, named without
    # a slash, looked for it on the Hub), `--dataset prompts.txt` "dataset path not found" once
    # the model was loaded: both files exist, and the dry run passed them
    weights = tmp_path / "model.safetensors"
    weights.write_text("x")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("next 1 =\n")
    not_a_model = r"model \(--model\) .*model\.safetensors: a file, not a model directory"
    with pytest.raises(ValueError, match=not_a_model):
        validate_config(TrainConfig(model=str(weights)))
    no_format = r"prompts\.txt: a file of no dataset format read here \(\.json, \.jsonl, \.csv"
    with pytest.raises(ValueError, match=r"dataset \(--dataset\) .*" + no_format):
        validate_config(TrainConfig(task="custom", dataset=str(prompts)))
    assert cli_main(["train", "out", "--model", str(weights), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "a file, not a model directory" in err and len(err.strip().splitlines()) == 1
    argv = ["train", "out", "--task", "gsm8k", "--dataset", str(prompts), "--dry-run"]
    assert cli_main(argv) == 2
    assert "prompts.txt: a file of no dataset format" in capsys.readouterr().err
