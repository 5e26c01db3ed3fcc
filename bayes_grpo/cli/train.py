"""``bayes-grpo train``: run TRL's GRPOTrainer with the theory knobs and write a run directory."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import sys
from typing import Any

from bayes_grpo.checks.base import counted
from bayes_grpo.cli._common import RawWrappedDescriptionFormatter, add_json_flag, print_json
from bayes_grpo.train.config import (
    DEFAULT_ADAM_BETA2,
    DEFAULT_PROMPTS_PER_STEP,
    DEFAULT_REF_MIXUP_ALPHA,
    K_REF_VIA,
    OPTIMIZERS,
    TASKS,
    TINY_MODEL,
    TrainConfig,
    grpo_config_kwargs,
    k_ref_mapping,
    launcher_env,
    validate_config,
)

_EPILOG = """\
K_ref mapping (TRL 1.16): K_ref = steps_per_generation * num_iterations / gradient_accumulation_steps
optimizer steps reuse one rollout. --k-ref-via steps_per_generation (default) generates one rollout of
K_ref x prompts-per-step prompts and gives each optimizer step a fresh random slice of its completions
(prompts-per-step x G, a prompt's group spread over the K_ref steps); --k-ref-via num_iterations
reuses one rollout of prompts-per-step prompts K_ref times. Momentum: Adam beta1 (--optimizer adamw,
convention "ema") or SGD heavy-ball momentum (--optimizer sgd, optim="sgd", optim_args="momentum=mu").

Output: RUN_DIR/trainer_state.json (TRL, one log entry per step, plus dynamics/* metrics) and
RUN_DIR/bayes_grpo_run.json (hyperparameters in the run-set coordinate names); no weights unless
--save-model. Ingest with `bayes-grpo ingest RUN_DIR` / bayes_grpo.runset.ingest.load_runs.

Examples:
  bayes-grpo train runs/g16_s0 --group-size 16 --prompts-per-step 8 --lr 1e-3 --steps 300 --seed 0
  bayes-grpo train runs/k4 --k-ref 4 --dry-run --json
  accelerate launch --num_processes 4 -m bayes_grpo train runs/qwen --model Qwen/Qwen2.5-0.5B-Instruct \\
      --task gsm8k --dataset openai/gsm8k --dataset-config main --device auto --lr 1e-6 --group-size 8 \\
      --prompts-per-step 16 --max-completion-length 256
"""


def _parse_grpo_arg(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--grpo-arg expects KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def _import_reward(spec: str) -> Any:
    if ":" not in spec:
        raise ValueError(f"--reward expects module:function, got {spec!r}")
    module_name, func_name = spec.split(":", 1)
    # a module in the current folder, as `python -m bayes_grpo` and `accelerate launch -m` find
    # it; the `bayes-grpo` console script does not put the current folder on the path
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--reward {spec}: cannot import module {module_name!r} ({exc})") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ValueError(f"--reward {spec}: module {module_name!r} has no callable {func_name!r}")
    return func


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Build the :class:`TrainConfig` from parsed command-line arguments."""
    num_processes = args.num_processes
    launched = launcher_env()  # a malformed launcher variable is named, --num-processes or not
    if num_processes is None:  # --num-processes 0 is refused by the validation, not replaced
        num_processes = launched.get("WORLD_SIZE", 1)
    return TrainConfig(
        model=args.model,
        task=args.task,
        dataset=args.dataset,
        dataset_config=args.dataset_config,
        dataset_split=args.dataset_split,
        group_size=args.group_size,
        prompts_per_step=args.prompts_per_step,
        completions_per_step=args.completions_per_step,
        learning_rate=args.learning_rate,
        lr_scheduler=args.lr_scheduler,
        warmup_steps=args.warmup_steps,
        optimizer=args.optimizer,
        momentum=args.momentum,
        adam_beta2=args.adam_beta2,
        weight_decay=args.weight_decay,
        k_ref=args.k_ref,
        k_ref_via=args.k_ref_via,
        beta=args.beta,
        ref_model_sync_steps=args.ref_sync_steps,
        ref_model_mixup_alpha=args.ref_mixup_alpha,
        seed=args.seed,
        max_steps=args.steps,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
        epsilon=args.epsilon,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        num_processes=num_processes,
        device=args.device,
        save_model=args.save_model,
        extra_grpo_args=dict(args.grpo_arg or []),
    )


def _cmd_train(args: argparse.Namespace) -> int:
    config = validate_config(config_from_args(args))
    rewards = [_import_reward(spec) for spec in args.reward or []]
    if args.dry_run:
        from pathlib import Path

        from bayes_grpo.train.runner import check_output_dir, check_reward_funcs, check_threads

        check_reward_funcs(config, rewards)
        check_threads(args.threads)
        plan = {
            "run_dir": args.run_dir,
            "config": config.to_dict(),
            "k_ref_mapping": k_ref_mapping(config),
            "grpo_config": grpo_config_kwargs(config, args.run_dir),
        }
        try:  # said, not raised: a sweep's dry run goes over runs that already exist
            check_output_dir(Path(args.run_dir).expanduser(), args.overwrite, config)
        except FileExistsError as exc:
            plan["run_dir_problem"] = str(exc)
        if args.json:
            print_json(plan)
        else:
            print(f"run {args.run_dir}: nothing trained (--dry-run)")
            for key, value in plan["grpo_config"].items():
                print(f"  GRPOConfig.{key} = {value!r}")
            print(f"  {plan['k_ref_mapping']['identity']}")
            if "run_dir_problem" in plan:
                print(f"  note: the run would stop here: {plan['run_dir_problem']}")
        return 0

    from bayes_grpo.train.runner import run_training

    if args.quiet_libs:
        _quiet_libraries()
    try:
        with _terminate_as_exit():
            result = run_training(
                config,
                args.run_dir,
                reward_funcs=rewards or None,
                overwrite=args.overwrite,
                threads=args.threads,
            )
    except (_Terminated, KeyboardInterrupt) as stop:
        # said before the exit (143, or 130 for a Ctrl-C, whose traceback through transformers
        # and TRL is left out): the run stopped, and what of it was kept
        by = "SIGTERM" if isinstance(stop, _Terminated) else "SIGINT (Ctrl-C)"
        notes = getattr(stop, "__notes__", None) or [
            f"{args.run_dir}: stopped before training began; nothing of the run was written"
        ]
        for note in notes:
            print(f"bayes-grpo train: stopped by {by}: {note}", file=sys.stderr)
        if isinstance(stop, KeyboardInterrupt):
            raise _Terminated(128 + signal.SIGINT) from None
        raise
    from bayes_grpo.train.runner import read_run_dir

    try:
        logged = read_run_dir(result.run_dir)[0]
    except (FileNotFoundError, ValueError):
        # the run's summary below does not depend on its log; a run_training that wrote none
        # (a stand-in in the summary's tests) has no rewards for this warning to read
        logged = None
    flat = constant_reward_warning(logged, result.metadata)
    if flat:
        # a run whose every group scored alike (all 0 at a learning rate the tiny model does not
        # learn at) read as a finished run, "final reward 0.000", and went on to ingest and fit
        print(f"bayes-grpo train: warning: {result.run_dir}: {flat}", file=sys.stderr)
    summary = {
        "run_dir": str(result.run_dir),
        "warnings": [flat] if flat else [],
        "wall_time_s": result.wall_time_s,
        "final_reward": result.final_reward,
        "final_reward_steps": result.final_reward_steps,
        "last_reward": result.last_reward,
        "metadata": result.metadata,
    }
    if args.json:
        print_json(summary)
    else:
        print(_summary_line(result))
    return 0


def constant_reward_warning(frame: Any, metadata: dict[str, Any]) -> str | None:
    """The warning on a run whose logged reward is the same at every step ("" -> None): every
    group of G completions scored alike, so GRPO's group-relative advantages were 0 and the
    policy had no signal; its curve has no dynamics for `fit` (which notes such runs)."""
    import numpy as np

    if "reward" not in getattr(frame, "columns", ()):
        return None
    reward = np.asarray(frame["reward"], dtype=float)
    reward = reward[np.isfinite(reward)]
    if reward.size < 2 or not np.all(reward == reward[0]):
        return None
    g = metadata.get("group_size", "G")
    return (
        f"the reward was {reward[0]:g} at every one of the {reward.size} logged steps: no group of "
        f"{g} completions had any spread in reward, so every advantage was 0 and the policy had "
        "no signal to learn from; the run has no dynamics to fit. Try more steps, a larger "
        "--group-size or --prompts-per-step, or another --lr"
    )


def _summary_line(result: Any) -> str:
    """The line a completed run is said in: its settings and its final reward."""
    m = result.metadata
    return (
        f"{result.run_dir}: {counted(m['max_steps'], 'step')} of {m['model']} ({m['model_size']} parameters), "
        f"G={m['group_size']}, {m['prompts_per_step']} prompts/step, lr={m['learning_rate']}"
        f"{_schedule_text(m)}, "
        f"{m['optimizer']} momentum={m['momentum']} ({m['momentum_convention']}), k_ref={m['k_ref']}, "
        f"beta={m['beta']}, seed={m['seed']}: {_final_reward_text(result)}, "
        f"{result.wall_time_s:.1f} s"
    )


def _schedule_text(metadata: dict[str, Any]) -> str:
    """`` (linear schedule, 20 warm-up steps)`` for a run whose rate is not constant: its peak
    rate alone read as the rate of the whole run."""
    schedule = metadata.get("lr_scheduler", "constant")
    warmup = metadata.get("warmup_steps") or 0
    if schedule == "constant" and not warmup:
        return ""
    parts = [f"peak, {schedule} schedule"] + ([counted(warmup, "warm-up step")] if warmup else [])
    return f" ({', '.join(parts)})"


def _final_reward_text(result: Any) -> str:
    """The run's final reward, said as what it is: the mean of the last rewards logged, beside
    the last one (ingest's ``r_last``), which it was taken for."""
    steps = result.final_reward_steps
    if steps is None:
        return "no reward logged"
    first, last = steps
    if first == last:
        return f"final reward {result.final_reward:.3f} (logged at step {last})"
    return (
        f"final reward {result.final_reward:.3f} (mean of the rewards logged at steps "
        f"{first}..{last}; the last, ingest's r_last: {result.last_reward:.3f})"
    )


class _Terminated(SystemExit):
    """The ``SystemExit(143)`` of a SIGTERM while training (:func:`_terminate_as_exit`), or the
    ``SystemExit(130)`` a Ctrl-C ends the command with once what the run kept is said."""


@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM (a scheduler's preemption, ``kill``, ``timeout``) as ``SystemExit(143)`` while
    training: Python's default action ends the process on the spot, leaving the run directory
    empty; as an exception the runner keeps the steps logged so far, marked as not completed,
    and says so in a note of the exception, which the command prints."""

    def terminate(signum, frame):
        raise _Terminated(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread: leave the handling as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _quiet_libraries() -> None:
    import warnings

    import datasets
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    # the prompt dataset's ("Generating train split", "Map") and its logged errors, which the
    # error of the run says in one line
    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="run GRPO (TRL) with the theory's knobs and write an ingestible run directory",
        description=(
            "Run TRL's GRPOTrainer on a causal LM and a prompt set with a binary verifiable reward. "
            "The knobs are named as in the theory: group size G, learning rate, momentum (and its "
            "convention), off-policy lag K_ref, KL weight beta, prompts per step, seed. The default is "
            "the offline tiny model on the 'next digit' toy task (no download, about 23 s for 300 steps "
            "on an idle CPU core)."
        ),
        epilog=_EPILOG,
        formatter_class=RawWrappedDescriptionFormatter,
    )
    p.add_argument(
        "run_dir", help="run directory to write (trainer_state.json + bayes_grpo_run.json)"
    )
    g = p.add_argument_group("model and task")
    g.add_argument(
        "--model",
        default=TINY_MODEL,
        help=f"'{TINY_MODEL}' (offline 2-layer GPT-2, ~0.1M parameters), a Hub name or a local "
        "model directory (default %(default)s)",
    )
    g.add_argument(
        "--task",
        choices=TASKS,
        default="next_digit",
        help="next_digit (toy, offline), gsm8k (GSM8K-style dataset, numeric answer checker), "
        "custom (dataset with a 'prompt' column plus --reward) (default %(default)s)",
    )
    g.add_argument(
        "--dataset",
        help="Hub name or local path (.json/.jsonl/.csv/.parquet or folder) of the prompts",
    )
    g.add_argument(
        "--dataset-config",
        help="configuration of a Hub dataset or dataset folder (e.g. 'main' for openai/gsm8k); "
        "a dataset file has none",
    )
    g.add_argument("--dataset-split", default="train", help="dataset split (default %(default)s)")
    g.add_argument(
        "--reward",
        action="append",
        metavar="MODULE:FUNCTION",
        help="reward function in TRL's convention, importable as module:function (repeatable; "
        "required for --task custom)",
    )
    g.add_argument(
        "--max-completion-length",
        type=int,
        help="tokens generated per completion (default 4 for next_digit, TRL's 512 otherwise)",
    )
    g.add_argument(
        "--temperature", type=float, default=1.0, help="sampling temperature (default %(default)s)"
    )
    g.add_argument(
        "--epsilon", type=float, default=0.2, help="PPO clip range (default %(default)s)"
    )
    k = p.add_argument_group("theory knobs")
    k.add_argument(
        "--group-size",
        "-G",
        type=int,
        default=16,
        help="G, completions per prompt (default %(default)s)",
    )
    k.add_argument(
        "--prompts-per-step",
        type=int,
        help="prompts per optimizer step, all processes together (default "
        f"{DEFAULT_PROMPTS_PER_STEP} when --completions-per-step is not given)",
    )
    k.add_argument(
        "--completions-per-step",
        type=int,
        help="completions per optimizer step (prompts x G); must be a multiple of G",
    )
    k.add_argument(
        "--learning-rate",
        "--lr",
        type=float,
        default=1e-3,
        help="peak learning rate eta (default %(default)s)",
    )
    k.add_argument(
        "--lr-scheduler",
        default="constant",
        help="transformers scheduler name (default %(default)s; the fitted law assumes a constant "
        "rate; `predict --lr-schedule` predicts a run on linear, cosine or constant with --warmup-steps)",
    )
    k.add_argument(
        "--warmup-steps", type=int, default=0, help="scheduler warm-up steps (default %(default)s)"
    )
    k.add_argument(
        "--optimizer",
        choices=sorted(OPTIMIZERS),
        default="adamw",
        help="adamw (momentum = beta1, EMA convention) or sgd (heavy-ball momentum) (default %(default)s)",
    )
    k.add_argument(
        "--momentum", type=float, default=0.9, help="mu in [0, 1) (default %(default)s)"
    )
    k.add_argument(
        "--adam-beta2",
        type=float,
        help=f"Adam beta2, --optimizer adamw only (default {DEFAULT_ADAM_BETA2})",
    )
    k.add_argument(
        "--weight-decay", type=float, default=0.0, help="weight decay (default %(default)s)"
    )
    k.add_argument(
        "--k-ref",
        type=int,
        default=1,
        help="K_ref, optimizer steps per rollout (default %(default)s)",
    )
    k.add_argument(
        "--k-ref-via",
        choices=K_REF_VIA,
        default="steps_per_generation",
        help="how K_ref is realised in TRL (see below) (default %(default)s)",
    )
    k.add_argument(
        "--beta",
        type=float,
        default=0.0,
        help="KL weight (default %(default)s = no reference model)",
    )
    k.add_argument(
        "--ref-sync-steps",
        type=int,
        help="sync the reference model every N steps (TRL sync_ref_model; needs beta > 0)",
    )
    k.add_argument(
        "--ref-mixup-alpha",
        type=float,
        help="reference sync mixing weight, 1 = hard copy; with --ref-sync-steps only (default "
        f"{DEFAULT_REF_MIXUP_ALPHA})",
    )
    k.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    k.add_argument("--steps", type=int, default=300, help="optimizer steps (default %(default)s)")
    r = p.add_argument_group("execution")
    r.add_argument(
        "--device",
        choices=("cpu", "auto"),
        default="cpu",
        help="cpu (use_cpu, no bf16) or auto (GPU with bf16 when present) (default %(default)s)",
    )
    r.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    r.add_argument(
        "--gradient-accumulation-steps",
        type=int,
        default=1,
        help="micro-batches per step (default %(default)s)",
    )
    r.add_argument(
        "--num-processes",
        type=int,
        help="processes the batch is split over (default: $WORLD_SIZE set by accelerate, else 1)",
    )
    r.add_argument(
        "--grpo-arg",
        action="append",
        type=_parse_grpo_arg,
        metavar="KEY=VALUE",
        help='extra trl.GRPOConfig argument (JSON value), e.g. loss_type="grpo" (repeatable); '
        "not one set by an option above",
    )
    r.add_argument(
        "--save-model", action="store_true", help="also save the final weights in the run directory"
    )
    r.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a run already in RUN_DIR: once this one completes, the old run's "
        "checkpoints (checkpoint-<step>/ with a trainer_state.json), saved model and TRL model "
        "card README.md (one it wrote, unedited) go too; "
        "other files stay, and one this run would "
        "write over that the old run did not write (a README.md with checkpoints, a config.json "
        "with --save-model) is refused",
    )
    r.add_argument(
        "--dry-run", action="store_true", help="validate and print the TRL settings; train nothing"
    )
    r.add_argument(
        "--verbose-libs",
        dest="quiet_libs",
        action="store_false",
        help="keep transformers' and datasets' warnings and progress bars",
    )
    add_json_flag(p)
    p.set_defaults(func=_cmd_train)
