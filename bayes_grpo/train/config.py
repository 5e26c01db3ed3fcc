"""Theory knobs of a GRPO run and their mapping onto TRL's ``GRPOConfig``.

The damped-oscillator law (DESIGN.md section 1) is written in terms of a few knobs: group size
``G``, learning rate ``eta``, momentum ``mu`` (and its convention), off-policy lag / refresh
interval ``K_ref``, KL weight ``beta``. :class:`TrainConfig` holds a run's settings under those
names; :func:`grpo_config_kwargs` translates them to TRL 1.16 ``GRPOConfig`` arguments, and
:func:`run_metadata` writes them back under the data-contract coordinate names.

How ``K_ref`` maps onto TRL
---------------------------
TRL counts *micro-steps* (one ``training_step`` call on ``per_device_train_batch_size``
completions). It generates one *generation batch* every
``steps_per_generation * num_iterations`` micro-steps, splits it into ``steps_per_generation``
slices and walks through the slices ``num_iterations`` times; the optimizer steps every
``gradient_accumulation_steps`` micro-steps. Hence the number of optimizer steps that reuse one
rollout is

    K_ref = steps_per_generation * num_iterations / gradient_accumulation_steps

and the policy that generated a batch is ``0 .. K_ref - 1`` optimizer steps old when the batch is
used (the callback logs this as ``dynamics/policy_lag``). Two ways to get a given ``K_ref``:

- ``k_ref_via="steps_per_generation"`` (default): ``steps_per_generation = K_ref * GA``,
  ``num_iterations = 1``. One rollout of ``K_ref x prompts_per_step`` prompts is generated
  (advantages normalised within each prompt's group of G), shuffled, and each optimizer step
  uses a fresh slice of ``prompts_per_step x G`` of its completions (no sample is used twice;
  the data are just stale). The slices are drawn at random, not group by group: a prompt's G
  completions are spread over the ``K_ref`` steps (TRL's ``shuffle_sequence_dict``).
- ``k_ref_via="num_iterations"``: ``steps_per_generation = GA``, ``num_iterations = K_ref``.
  One rollout of ``prompts_per_step`` prompts is reused for ``K_ref`` optimizer steps (PPO-style
  epochs, GRPO paper's ``mu``).

With ``K_ref = 1`` both give TRL's on-policy default (importance ratios identically 1).
``prompts_per_step`` is always the number of prompts in *one optimizer step*, summed over
processes: ``per_device_train_batch_size = prompts_per_step * G / (num_processes * GA)``.

Momentum conventions: ``optimizer="adamw"`` uses Adam's ``beta1 = momentum`` (EMA convention,
``momentum_convention="ema"``); ``optimizer="sgd"`` uses ``torch.optim.SGD(momentum=...)``
through TRL's ``optim="sgd"`` and ``optim_args`` (heavy-ball convention,
``v <- mu v + g; theta <- theta - eta v``).

The KL anchor: ``beta`` is TRL's KL weight; ``ref_model_sync_steps`` (when set) turns on TRL's
reference-model sync (TR-DPO) every that many steps with mixing ``ref_model_mixup_alpha``
(1.0 = hard copy of the policy into the reference).
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import re
import typing
from dataclasses import dataclass, field
from typing import Any

from bayes_grpo.constants import EMA, HEAVY_BALL
from bayes_grpo.train.tasks import check_dataset_file

#: Optimizers the runner knows, with TRL/transformers ``optim`` name and momentum convention.
OPTIMIZERS: dict[str, tuple[str, str]] = {
    "adamw": ("adamw_torch", EMA),
    "sgd": ("sgd", HEAVY_BALL),
}
#: Ways of realising K_ref in TRL (see module docstring).
K_REF_VIA: tuple[str, ...] = ("steps_per_generation", "num_iterations")
#: Tasks with a built-in dataset and reward; "custom" needs a dataset and reward functions.
TASKS: tuple[str, ...] = ("next_digit", "gsm8k", "custom")
#: Prompts per optimizer step when neither ``prompts_per_step`` nor ``completions_per_step`` is
#: given (a default for one of the two would contradict the other when that one is given).
DEFAULT_PROMPTS_PER_STEP: int = 8
#: Scheduler names taken without importing transformers (any other is checked against its list).
COMMON_LR_SCHEDULERS: frozenset[str] = frozenset(
    {"constant", "constant_with_warmup", "linear", "cosine", "cosine_with_min_lr"}
)
#: Schedulers transformers builds from the warm-up and the step count alone (any other, or one
#: given ``lr_scheduler_kwargs``, is built once on a dummy optimizer when the run is validated).
PLAIN_LR_SCHEDULERS: frozenset[str] = frozenset(
    {"constant", "constant_with_warmup", "linear", "cosine"}
)
#: Schedulers that step on evaluation metrics: transformers refuses them without an evaluation,
#: and the runner evaluates nothing.
EVAL_LR_SCHEDULERS: frozenset[str] = frozenset({"reduce_lr_on_plateau", "greedy"})
#: Largest seed: transformers' set_seed seeds numpy's legacy generator, which takes 32 bits.
MAX_SEED: int = 2**32 - 1
#: The ``bayes-grpo train`` option of each :class:`TrainConfig` field that has one: an error names
#: the field and its option (``group_size (G, --group-size)``), the one a command-line user typed.
CLI_OPTIONS: dict[str, str] = {
    "model": "--model",
    "task": "--task",
    "dataset": "--dataset",
    "dataset_config": "--dataset-config",
    "dataset_split": "--dataset-split",
    "group_size": "--group-size",
    "prompts_per_step": "--prompts-per-step",
    "completions_per_step": "--completions-per-step",
    "learning_rate": "--lr",
    "lr_scheduler": "--lr-scheduler",
    "warmup_steps": "--warmup-steps",
    "optimizer": "--optimizer",
    "momentum": "--momentum",
    "adam_beta2": "--adam-beta2",
    "weight_decay": "--weight-decay",
    "k_ref": "--k-ref",
    "k_ref_via": "--k-ref-via",
    "beta": "--beta",
    "ref_model_sync_steps": "--ref-sync-steps",
    "ref_model_mixup_alpha": "--ref-mixup-alpha",
    "seed": "--seed",
    "max_steps": "--steps",
    "max_completion_length": "--max-completion-length",
    "temperature": "--temperature",
    "epsilon": "--epsilon",
    "gradient_accumulation_steps": "--gradient-accumulation-steps",
    "num_processes": "--num-processes",
    "device": "--device",
    "save_model": "--save-model",
    "extra_grpo_args": "--grpo-arg",
}
#: Size of the next_digit task's generated prompt set when ``n_prompts`` is not given (or one
#: rollout's prompts, when more). Fixed, not sized by ``max_steps``: TRL's sampler shuffles the
#: set by its size and the seed, so a set sized by the run's length gave a longer run with the
#: same seed other prompts from its first step; with a fixed size a shorter run is the start of a
#: longer one (on the constant schedule). Later epochs reshuffle it (only 10 prompts differ).
NEXT_DIGIT_PROMPTS: int = 1024
#: Reference-sync mixing weight when ``ref_model_mixup_alpha`` is not given (1: a hard copy).
DEFAULT_REF_MIXUP_ALPHA: float = 1.0
#: Adam's beta2 when ``adam_beta2`` is not given (``optimizer="adamw"``; transformers' default).
DEFAULT_ADAM_BETA2: float = 0.999
#: ``model`` value that builds the tiny offline model.
TINY_MODEL: str = "tiny"
#: GRPOConfig arguments set from :class:`TrainConfig` fields: ``extra_grpo_args`` may not
#: override them (the run's metadata records the field, so an override would be a setting the
#: metadata says the run had and TRL did not use).
MAPPED_GRPO_ARGS: frozenset[str] = frozenset(
    {
        "num_generations",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "steps_per_generation",
        "num_iterations",
        "generation_batch_size",
        "learning_rate",
        "optim",
        "optim_args",
        "adam_beta1",
        "beta",
        "seed",
        "data_seed",
        "max_steps",
        "lr_scheduler_type",
        "warmup_steps",
        "weight_decay",
        "adam_beta2",
        "temperature",
        "epsilon",
        "max_completion_length",
        "sync_ref_model",
        "ref_model_sync_steps",
        "ref_model_mixup_alpha",
        "output_dir",
        "logging_strategy",
        "logging_steps",
    }
)


@dataclass
class TrainConfig:
    """Settings of one GRPO run, named as in the theory (DESIGN.md section 1).

    Attributes
    ----------
    model
        ``"tiny"`` (offline 2-layer GPT-2 of about 0.1M parameters, built and discarded), a Hub
        model name, or a local model directory.
    task
        ``"next_digit"`` (toy task, needs no download), ``"gsm8k"`` (GSM8K-style dataset with a
        numeric answer checker), or ``"custom"`` (dataset and reward functions given by caller).
    dataset, dataset_config, dataset_split
        Hub name or local path of the prompt dataset (gsm8k/custom tasks).
    group_size
        ``G``: completions per prompt (TRL ``num_generations``), at least 2.
    prompts_per_step
        Prompts per optimizer step, all processes together. Give this or ``completions_per_step``
        (neither: :data:`DEFAULT_PROMPTS_PER_STEP`).
    completions_per_step
        Completions per optimizer step (``prompts_per_step * G``); must be a multiple of ``G``.
    learning_rate
        Peak learning rate ``eta``.
    lr_scheduler, warmup_steps
        TRL/transformers scheduler name (``"constant"`` keeps ``eta`` fixed, as the theory does).
    optimizer
        ``"adamw"`` (momentum = Adam beta1, EMA convention) or ``"sgd"`` (heavy-ball momentum).
    momentum
        ``mu`` in ``[0, 1)``.
    adam_beta2
        Adam's second-moment rate, ``optimizer="adamw"`` only (``None``:
        :data:`DEFAULT_ADAM_BETA2`); SGD has none, and a value other than that default is refused
        with ``optimizer="sgd"`` (the run's metadata would record a rate the run did not use).
    weight_decay
        Weight decay (both optimizers).
    k_ref, k_ref_via
        Off-policy lag / refresh interval and how it is realised in TRL (module docstring).
    beta
        KL weight (0 = no reference model).
    ref_model_sync_steps, ref_model_mixup_alpha
        Reference-model sync interval (``None`` = never) and mixing weight (with a sync only;
        ``None``: :data:`DEFAULT_REF_MIXUP_ALPHA`, a hard copy; a weight other than that without
        a sync is refused: nothing would use it).
    seed, max_steps
        Random seed (model init for the tiny model, sampling, data order) and optimizer steps.
    max_completion_length, temperature, epsilon
        Generation length (tokens), sampling temperature, PPO clip range.
    gradient_accumulation_steps, num_processes
        Micro-batching and the number of processes (GPUs) the batch is split over.
    device
        ``"cpu"`` (``use_cpu=True, bf16=False``) or ``"auto"`` (GPU with bf16 when present).
    n_prompts
        Size of the generated prompt set of the toy task (default: :data:`NEXT_DIGIT_PROMPTS`,
        or one rollout's prompts when more; whatever ``max_steps`` is); next_digit only.
    save_model
        Save final weights in the run directory (off: run directories hold logs only).
    extra_grpo_args
        Further ``GRPOConfig`` arguments (not the ones in :data:`MAPPED_GRPO_ARGS`).
    """

    model: str = TINY_MODEL
    task: str = "next_digit"
    dataset: str | None = None
    dataset_config: str | None = None
    dataset_split: str = "train"
    group_size: int = 16
    prompts_per_step: int | None = None
    completions_per_step: int | None = None
    learning_rate: float = 1e-3
    lr_scheduler: str = "constant"
    warmup_steps: int = 0
    optimizer: str = "adamw"
    momentum: float = 0.9
    adam_beta2: float | None = None
    weight_decay: float = 0.0
    k_ref: int = 1
    k_ref_via: str = "steps_per_generation"
    beta: float = 0.0
    ref_model_sync_steps: int | None = None
    ref_model_mixup_alpha: float | None = None
    seed: int = 0
    max_steps: int = 300
    max_completion_length: int | None = None
    temperature: float = 1.0
    epsilon: float = 0.2
    gradient_accumulation_steps: int = 1
    num_processes: int = 1
    device: str = "cpu"
    n_prompts: int | None = None
    save_model: bool = False
    extra_grpo_args: dict[str, Any] = field(default_factory=dict)

    def resolved(self) -> TrainConfig:
        """A validated copy with ``prompts_per_step``/``completions_per_step`` both filled.

        Raises
        ------
        ValueError
            Naming the setting and the problem, before anything is trained or loaded.
        """
        return validate_config(self)

    def to_dict(self) -> dict[str, Any]:
        """All settings as a JSON-serialisable dict."""
        return dataclasses.asdict(self)


def setting_name(field: str, meaning: str | None = None) -> str:
    """``field`` as errors name it: with its meaning and its command-line option, e.g.
    ``setting_name("group_size", "G")`` is ``"group_size (G, --group-size)"``."""
    parts = [p for p in (meaning, CLI_OPTIONS.get(field)) if p]
    return f"{field} ({', '.join(parts)})" if parts else field


def _check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    # numbers.Integral: numpy integers of a sweep too (returned as int, for the JSON metadata)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum}, got {value!r}")
    return int(value)


def _check_float(
    name: str, value: object, lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False
) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    bad = not math.isfinite(x) or x < lo or x > hi or (lo_open and x == lo) or (hi_open and x == hi)
    if bad:
        lb, rb = ("(" if lo_open else "["), (")" if hi_open else "]")
        raise ValueError(f"{name} must lie in {lb}{lo}, {hi}{rb}, got {value!r}")
    return x


def validate_config(config: TrainConfig) -> TrainConfig:
    """Check a :class:`TrainConfig` and fill the derived batch sizes; return a new config.

    Every problem that would otherwise surface inside TRL (or hours into a run) is raised here
    as a ``ValueError`` that names the setting: group size not dividing the batch, a batch that
    does not split over processes and accumulation steps, an unknown optimizer or task, a
    missing dataset, momentum outside ``[0, 1)``, and so on.
    """
    c = dataclasses.replace(config, extra_grpo_args=dict(config.extra_grpo_args))
    if not isinstance(c.model, str) or not c.model:
        raise ValueError(
            f"{setting_name('model')} must be 'tiny', a Hub model name or a local model directory"
        )
    if c.model != TINY_MODEL and os.path.isfile(os.path.expanduser(c.model)):
        # it was "model directory not found" (or, named without a slash, looked for on the Hub)
        raise ValueError(
            f"{setting_name('model')} {c.model}: a file, not a model directory; give a folder "
            "written by save_pretrained, or a Hub model name"
        )
    if c.optimizer not in OPTIMIZERS:
        raise ValueError(
            f"unknown optimizer {c.optimizer!r} ({CLI_OPTIONS['optimizer']}); known: {sorted(OPTIMIZERS)}"
        )
    if c.task not in TASKS:
        raise ValueError(f"unknown task {c.task!r} ({CLI_OPTIONS['task']}); known: {list(TASKS)}")
    if c.k_ref_via not in K_REF_VIA:
        raise ValueError(
            f"unknown k_ref_via {c.k_ref_via!r} ({CLI_OPTIONS['k_ref_via']}); known: {list(K_REF_VIA)}"
        )
    if c.device not in ("cpu", "auto"):
        raise ValueError(f"{setting_name('device')} must be 'cpu' or 'auto', got {c.device!r}")
    if c.lr_scheduler not in COMMON_LR_SCHEDULERS:
        known = _lr_scheduler_names()
        if known and c.lr_scheduler not in known:
            raise ValueError(
                f"unknown lr_scheduler (--lr-scheduler) {c.lr_scheduler!r}; transformers knows {known}"
            )
    G = c.group_size = _check_int(setting_name("group_size", "G"), c.group_size, 2)
    c.k_ref = _check_int(setting_name("k_ref"), c.k_ref, 1)
    c.max_steps = _check_int(setting_name("max_steps"), c.max_steps, 1)
    c.seed = _check_int(setting_name("seed"), c.seed, 0, MAX_SEED)
    c.warmup_steps = _check_int(setting_name("warmup_steps"), c.warmup_steps, 0)
    if c.warmup_steps >= c.max_steps:
        # the rate would never reach learning_rate, which the run's metadata records as its rate
        from bayes_grpo.checks.base import counted  # numpy and pandas: not for every config

        raise ValueError(
            f"warmup_steps (--warmup-steps) = {c.warmup_steps} is not below the run's "
            f"{counted(c.max_steps, 'step')} (--steps): the learning rate would never reach "
            f"learning_rate = {c.learning_rate}, which the run records as its rate"
        )
    ga = c.gradient_accumulation_steps = _check_int(
        setting_name("gradient_accumulation_steps"), c.gradient_accumulation_steps, 1
    )
    world = c.num_processes = _check_int(setting_name("num_processes"), c.num_processes, 1)
    c.learning_rate = _check_float(
        setting_name("learning_rate"), c.learning_rate, 0.0, math.inf, lo_open=True, hi_open=True
    )
    c.momentum = _check_float(setting_name("momentum"), c.momentum, 0.0, 1.0, hi_open=True)
    if c.optimizer == "adamw":
        beta2 = DEFAULT_ADAM_BETA2 if c.adam_beta2 is None else c.adam_beta2
        c.adam_beta2 = _check_float(setting_name("adam_beta2"), beta2, 0.0, 1.0, hi_open=True)
    elif c.adam_beta2 is None or (
        # the default a run of an older version recorded for an SGD run (unused): not a setting
        not isinstance(c.adam_beta2, str) and c.adam_beta2 == DEFAULT_ADAM_BETA2
    ):
        c.adam_beta2 = None
    else:
        raise ValueError(
            f"{setting_name('adam_beta2')} = {c.adam_beta2!r} is Adam's; optimizer "
            f"{c.optimizer!r} ({CLI_OPTIONS['optimizer']} {c.optimizer}) has no beta2 and would "
            "not use it; leave it unset, or train with adamw"
        )
    c.weight_decay = _check_float(
        setting_name("weight_decay"), c.weight_decay, 0.0, math.inf, hi_open=True
    )
    c.beta = _check_float(setting_name("beta", "KL weight"), c.beta, 0.0, math.inf, hi_open=True)
    c.temperature = _check_float(
        setting_name("temperature"), c.temperature, 0.0, math.inf, lo_open=True, hi_open=True
    )
    c.epsilon = _check_float(
        setting_name("epsilon", "clip range"), c.epsilon, 0.0, math.inf, lo_open=True, hi_open=True
    )
    alpha = c.ref_model_mixup_alpha
    if c.ref_model_sync_steps is None:
        # the default an earlier version recorded for a run without a sync (unused): not a setting
        if alpha is not None and (isinstance(alpha, str) or alpha != DEFAULT_REF_MIXUP_ALPHA):
            raise ValueError(
                f"{setting_name('ref_model_mixup_alpha')} = {alpha!r} without a reference sync "
                f"({CLI_OPTIONS['ref_model_sync_steps']}): nothing would use it"
            )
        c.ref_model_mixup_alpha = None
    else:
        c.ref_model_mixup_alpha = _check_float(
            setting_name("ref_model_mixup_alpha"),
            DEFAULT_REF_MIXUP_ALPHA if alpha is None else alpha,
            0.0,
            1.0,
            lo_open=True,
        )
    if c.ref_model_sync_steps is not None:
        c.ref_model_sync_steps = _check_int(
            setting_name("ref_model_sync_steps"), c.ref_model_sync_steps, 1
        )
        if c.beta == 0.0:
            raise ValueError(
                f"{setting_name('ref_model_sync_steps')} is set but beta = 0 (--beta): there is no "
                "reference model to sync"
            )
    if c.max_completion_length is not None:
        c.max_completion_length = _check_int(
            setting_name("max_completion_length"), c.max_completion_length, 1
        )
    if c.n_prompts is not None:
        c.n_prompts = _check_int("n_prompts", c.n_prompts, 1)
        if c.task != "next_digit":
            raise ValueError(
                f"n_prompts = {c.n_prompts} is the size of the next_digit task's generated prompt "
                f"set; task {c.task!r} takes its prompts from its dataset (--dataset)"
            )

    if c.prompts_per_step is None and c.completions_per_step is None:
        c.prompts_per_step = DEFAULT_PROMPTS_PER_STEP
    if c.completions_per_step is not None:
        n = _check_int(setting_name("completions_per_step"), c.completions_per_step, 1)
        if n % G:
            raise ValueError(
                f"group size G={G} does not divide the batch of {n} completions per step: every "
                f"prompt needs G completions, so completions_per_step (--completions-per-step) "
                f"must be a multiple of G (--group-size)"
                f" (e.g. {max(1, n // G) * G} or {(n // G + 1) * G})"
            )
        if c.prompts_per_step is not None and c.prompts_per_step * G != n:
            raise ValueError(
                f"prompts_per_step={c.prompts_per_step} (--prompts-per-step) x G={G} = "
                f"{c.prompts_per_step * G} contradicts completions_per_step={n} "
                "(--completions-per-step); give one of the two"
            )
        c.prompts_per_step = n // G
    c.prompts_per_step = _check_int(setting_name("prompts_per_step"), c.prompts_per_step, 1)
    c.completions_per_step = c.prompts_per_step * G
    if c.task == "next_digit" and c.n_prompts is None:
        rollout = c.prompts_per_step * (c.k_ref if c.k_ref_via == "steps_per_generation" else 1)
        c.n_prompts = max(NEXT_DIGIT_PROMPTS, rollout)
    if c.completions_per_step % (world * ga):
        raise ValueError(
            f"the batch of {c.completions_per_step} completions per step ({c.prompts_per_step} prompts x "
            f"G={G}) does not split over num_processes={world} (--num-processes) x "
            f"gradient_accumulation_steps={ga} (--gradient-accumulation-steps)"
        )

    if c.task in ("gsm8k", "custom") and not c.dataset:
        raise ValueError(f"task {c.task!r} needs a dataset (--dataset: a Hub name or a local path)")
    if c.task == "next_digit" and c.dataset:
        raise ValueError(
            "task 'next_digit' generates its own prompts; do not pass a dataset (--dataset)"
        )
    if c.dataset:
        check_dataset_file(c.dataset, c.dataset_split, c.dataset_config)
    else:
        given = [
            setting_name(name)
            for name, unset in (("dataset_config", None), ("dataset_split", "train"))
            if getattr(c, name) != unset
        ]
        if given:  # the next_digit task's prompts are generated: nothing would read them
            raise ValueError(
                f"{' and '.join(given)} given without a dataset (--dataset): task {c.task!r} "
                "generates its own prompts"
            )
    clash = sorted(set(c.extra_grpo_args) & MAPPED_GRPO_ARGS)
    if clash:
        raise ValueError(
            f"extra_grpo_args may not set {clash}: they are derived from the run's settings "
            "(group_size, prompts_per_step, k_ref, learning_rate, lr_scheduler, warmup_steps, "
            "optimizer, momentum, beta, temperature, ...); set those instead"
        )
    if "num_train_epochs" in c.extra_grpo_args:
        raise ValueError(
            "extra_grpo_args (--grpo-arg) num_train_epochs: the run trains max_steps (--steps) "
            f"= {c.max_steps} optimizer steps, which transformers takes over num_train_epochs; "
            "give the length as --steps"
        )
    if "resume_from_checkpoint" in c.extra_grpo_args:
        raise ValueError(
            "extra_grpo_args (--grpo-arg) resume_from_checkpoint: transformers' Trainer does not "
            "read it (it is for training scripts) and bayes-grpo train does not resume: the run "
            "would train again from step 0"
        )
    unknown, trl_version = _unknown_grpo_args(c.extra_grpo_args)
    if unknown:
        raise ValueError(
            f"extra_grpo_args (--grpo-arg) {unknown}: not arguments of trl.GRPOConfig "
            f"(TRL {trl_version})"
        )
    mistyped = _text_for_a_number(c.extra_grpo_args)
    if mistyped:
        name, kind = next(iter(mistyped.items()))
        raise ValueError(
            f"extra_grpo_args (--grpo-arg) {name}={c.extra_grpo_args[name]!r}: trl.GRPOConfig "
            f"takes {kind} there, not text; give a JSON value (--grpo-arg takes JSON: "
            "1.0, true, false, null)"
        )
    _check_device_args(c)
    _check_lr_scheduler(c)
    return c


#: ``--grpo-arg`` settings that ``device`` decides, and the value each device gives (``None``:
#: the device leaves it to TRL): ``cpu`` trains on the CPU in fp32, ``auto`` on a GPU when
#: present (bf16 when it has it, or ``fp16`` / ``bf16=false`` given here).
DEVICE_GRPO_ARGS: dict[str, dict[str, bool | None]] = {
    "cpu": {"use_cpu": True, "bf16": False, "fp16": False},
    "auto": {"use_cpu": False, "bf16": None, "fp16": None},
}


def _check_device_args(c: TrainConfig) -> None:
    """Raise ValueError when a ``--grpo-arg`` contradicts ``device``.

    ``--grpo-arg`` was applied after the device's settings: ``--device cpu --grpo-arg
    use_cpu=false`` trained on a GPU where there was one, ``bf16=true`` / ``fp16=true`` in half
    precision, and ``--device auto --grpo-arg use_cpu=true`` on the CPU, each run recording the
    device it did not have.
    """
    wanted = DEVICE_GRPO_ARGS[c.device]
    for name, value in c.extra_grpo_args.items():
        if name not in wanted or wanted[name] is None:
            continue
        # null is the library's default: TRL's bf16 is then ``not fp16`` (true), the others false
        if (bool(value) if value is not None else name == "bf16") == wanted[name]:
            continue
        other = "auto" if c.device == "cpu" else "cpu"
        means = (
            "trains on the CPU in fp32 (use_cpu=true, bf16=false, fp16=false)"
            if c.device == "cpu"
            else "trains on a GPU when there is one"
        )
        raise ValueError(
            f"extra_grpo_args (--grpo-arg) {name}={json.dumps(value)} contradicts device "
            f"({CLI_OPTIONS['device']}) {c.device!r}, which {means}; give "
            f"{CLI_OPTIONS['device']} {other} instead"
            + (f" (with {name}={json.dumps(value)})" if name != "use_cpu" else "")
        )


def _check_lr_scheduler(c: TrainConfig) -> None:
    """Raise ValueError when transformers cannot build the run's scheduler as configured.

    transformers builds it when training starts, after the model is loaded: a scheduler that
    needs ``lr_scheduler_kwargs`` (``warmup_stable_decay``: ``num_decay_steps``;
    ``cosine_with_min_lr``: ``min_lr`` or ``min_lr_rate``) failed there, ``warmup_stable_decay``
    with a TypeError and a traceback; one that steps on evaluation metrics is refused by TRL.
    """
    name = c.lr_scheduler
    if name in EVAL_LR_SCHEDULERS:
        raise ValueError(
            f"lr_scheduler (--lr-scheduler) {name!r} steps on evaluation metrics; bayes-grpo "
            "train runs no evaluation"
        )
    kwargs = c.extra_grpo_args.get("lr_scheduler_kwargs")
    if name in PLAIN_LR_SCHEDULERS and not kwargs:
        return
    if isinstance(kwargs, str):  # transformers takes a JSON string too
        try:
            kwargs = json.loads(kwargs)
        except ValueError:
            raise ValueError(
                f"extra_grpo_args (--grpo-arg) lr_scheduler_kwargs: not a JSON object: {kwargs!r}"
            ) from None
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ValueError(
            f"extra_grpo_args (--grpo-arg) lr_scheduler_kwargs must be a dict, got {kwargs!r}"
        )
    try:
        import torch
        from transformers.optimization import get_scheduler
    except ImportError:  # without the train extra the run fails on importing them
        return
    name = trl_lr_scheduler(c)  # as grpo_config_kwargs gives it to TRL
    dummy = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    try:
        get_scheduler(
            name,
            dummy,
            num_warmup_steps=c.warmup_steps,
            num_training_steps=c.max_steps,
            scheduler_specific_kwargs=dict(kwargs or {}),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"lr_scheduler (--lr-scheduler) {c.lr_scheduler!r} with lr_scheduler_kwargs "
            f"{kwargs or {}} (--grpo-arg lr_scheduler_kwargs={{...}}): transformers cannot build "
            f"it: {exc}"
        ) from None


def _lr_scheduler_names() -> list[str]:
    """transformers' scheduler names (none without transformers: the run then fails on importing
    it)."""
    try:
        from transformers.trainer_utils import SchedulerType
    except ImportError:
        return []
    return [s.value for s in SchedulerType]


def _unknown_grpo_args(names: Any) -> tuple[list[str], str]:
    """The names in ``names`` that ``trl.GRPOConfig`` does not take, and TRL's version.

    None without TRL: the configuration imports without the train extra (a run then fails on
    importing TRL); TRL is imported only when there are names to check.
    """
    if not names:
        return [], ""
    try:
        import trl
    except ImportError:
        return [], ""
    fields = {f.name for f in dataclasses.fields(trl.GRPOConfig) if f.init}
    return sorted(set(names) - fields), str(trl.__version__)


def _text_for_a_number(args: Any) -> dict[str, str]:
    """The ``trl.GRPOConfig`` arguments in ``args`` given as text where the field takes only
    numbers or booleans (``--grpo-arg max_grad_norm=None`` is the text ``"None"``: not JSON).

    Neither TRL nor transformers checks these types; the text then fails inside the training,
    after the model is loaded, as a TypeError (``'>' not supported between 'str' and 'int'``).
    Returns ``{name: "a number" | "true or false"}``; empty without TRL.
    """
    texts = [name for name, value in (args or {}).items() if isinstance(value, str)]
    if not texts:
        return {}
    try:
        import trl
    except ImportError:
        return {}
    types = {f.name: f.type for f in dataclasses.fields(trl.GRPOConfig) if f.init}
    out = {}
    for name in texts:
        kinds = set(typing.get_args(types.get(name)) or (types.get(name),)) - {type(None)}
        if kinds == {bool}:
            out[name] = "true or false"
        elif kinds and kinds <= {int, float}:
            out[name] = "a number"
    return out


#: Environment variables a launcher (accelerate, torchrun) sets and that accelerate and
#: torch.distributed read as integers: ``WORLD_SIZE`` is also the default ``num_processes``.
LAUNCHER_ENV: tuple[str, ...] = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def launcher_env(environ: typing.Mapping[str, str] | None = None) -> dict[str, int]:
    """The :data:`LAUNCHER_ENV` variables set in ``environ`` (default ``os.environ``), as integers.

    Raises
    ------
    ValueError
        Naming the variable and its value when one is not an integer (or ``WORLD_SIZE`` /
        ``LOCAL_WORLD_SIZE`` is below 1): accelerate failed on it with "invalid literal for int()
        with base 10: 'abc'", named nowhere.
    """
    environ = os.environ if environ is None else environ
    out = {}
    for name in LAUNCHER_ENV:
        if name not in environ:
            continue
        text = environ[name]
        try:
            value = int(text)
        except ValueError:
            value = None
        sizes = name.endswith("WORLD_SIZE")
        if value is None or (sizes and value < 1):
            what = "a number of processes, an integer >= 1" if sizes else "an integer"
            raise ValueError(
                f"environment variable {name}={text!r}: a launcher (accelerate, torchrun) sets it "
                f"to {what}; unset it, or set it right"
            )
        out[name] = value
    return out


def environment_in_error(message: str, environ: typing.Mapping[str, str] | None = None) -> str:
    """`` (from the environment: NAME='value')`` for the accelerate / launcher variables whose
    value the error ``message`` quotes, else ``""``.

    accelerate reads its settings from ``ACCELERATE_*`` variables (what ``accelerate launch``
    sets) and refuses a bad one in its own words, naming the value but not the variable
    (``ACCELERATE_USE_CPU=maybe``: "invalid truth value 'maybe'"). The value is looked for as a
    whole word, in any case (``'ZZZ' is not a valid DynamoBackend`` for ``zzz``).
    """
    environ = os.environ if environ is None else environ
    named = []
    for name, value in sorted(environ.items()):
        if not (name.startswith("ACCELERATE_") or name in LAUNCHER_ENV) or len(value) < 2:
            continue
        if re.search(rf"(?<!\w){re.escape(value)}(?!\w)", message, flags=re.IGNORECASE):
            named.append(f"{name}={value!r}")
    return f" (from the environment: {', '.join(named)})" if named else ""


def k_ref_mapping(config: TrainConfig) -> dict[str, Any]:
    """The TRL settings that realise ``config.k_ref`` (see the module docstring).

    Returns
    -------
    dict
        ``steps_per_generation``, ``num_iterations``, ``gradient_accumulation_steps``,
        ``per_device_train_batch_size`` (completions), ``generation_batch_size`` (completions,
        all processes), ``via`` and the identity ``k_ref = spg * num_iterations / GA``.
    """
    c = validate_config(config)
    ga, world = c.gradient_accumulation_steps, c.num_processes
    if c.k_ref_via == "steps_per_generation":
        spg, iters = c.k_ref * ga, 1
    else:
        spg, iters = ga, c.k_ref
    per_device = c.completions_per_step // (world * ga)
    assert spg * iters // ga == c.k_ref
    return {
        "via": c.k_ref_via,
        "steps_per_generation": spg,
        "num_iterations": iters,
        "gradient_accumulation_steps": ga,
        "per_device_train_batch_size": per_device,
        "generation_batch_size": per_device * world * spg,
        "identity": "k_ref = steps_per_generation * num_iterations / gradient_accumulation_steps",
    }


def trl_lr_scheduler(config: TrainConfig) -> str:
    """The scheduler name TRL is given (``lr_scheduler_type``): ``config.lr_scheduler``, but
    ``"constant_with_warmup"`` for ``"constant"`` with a warm-up (transformers' ``"constant"``
    ignores ``warmup_steps``; ``constant_with_warmup`` is the name ``predict --lr-schedule``
    gives it: constant after the warm-up)."""
    if config.lr_scheduler == "constant" and config.warmup_steps:
        return "constant_with_warmup"
    return config.lr_scheduler


def grpo_config_kwargs(config: TrainConfig, output_dir: str) -> dict[str, Any]:
    """Keyword arguments of ``trl.GRPOConfig`` for ``config`` (validated first).

    Parameters
    ----------
    config
        The run's theory knobs.
    output_dir
        The run directory (TRL writes ``trainer_state.json`` there).

    Returns
    -------
    dict
        Ready for ``GRPOConfig(**kwargs)``; CPU runs get ``use_cpu=True, bf16=False``; gradient
        checkpointing is off; dropout is disabled; ``logging_strategy="steps"``, ``logging_steps=1``;
        no checkpoints are saved.
    """
    c = validate_config(config)
    m = k_ref_mapping(c)
    optim, _ = OPTIMIZERS[c.optimizer]
    kwargs: dict[str, Any] = {
        "output_dir": str(output_dir),
        "num_generations": c.group_size,
        "per_device_train_batch_size": m["per_device_train_batch_size"],
        "gradient_accumulation_steps": m["gradient_accumulation_steps"],
        "steps_per_generation": m["steps_per_generation"],
        "num_iterations": m["num_iterations"],
        "learning_rate": c.learning_rate,
        "lr_scheduler_type": trl_lr_scheduler(c),
        "warmup_steps": c.warmup_steps,
        "weight_decay": c.weight_decay,
        "optim": optim,
        "beta": c.beta,
        "seed": c.seed,
        "data_seed": c.seed,
        "max_steps": c.max_steps,
        "temperature": c.temperature,
        "epsilon": c.epsilon,
        # one log entry per optimizer step: "epoch" or "no" would average the steps' rewards into
        # one entry (the end-of-training summary), read as a single point
        "logging_strategy": "steps",
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "disable_tqdm": True,
        "activation_checkpointing": False,  # TRL defaults gradient_checkpointing (its alias) to True
        "disable_dropout": True,
    }
    if c.optimizer == "adamw":
        kwargs["adam_beta1"] = c.momentum
        kwargs["adam_beta2"] = c.adam_beta2
    else:
        kwargs["optim_args"] = f"momentum={c.momentum!r}"
    if c.max_completion_length is not None:
        kwargs["max_completion_length"] = c.max_completion_length
    elif c.task == "next_digit":
        kwargs["max_completion_length"] = 4
    if c.ref_model_sync_steps is not None:
        kwargs["sync_ref_model"] = True
        kwargs["ref_model_sync_steps"] = c.ref_model_sync_steps
        kwargs["ref_model_mixup_alpha"] = c.ref_model_mixup_alpha
    if c.device == "cpu":
        kwargs["use_cpu"] = True
        kwargs["bf16"] = False
    extra = dict(c.extra_grpo_args)
    if "gradient_checkpointing" in extra and "activation_checkpointing" not in extra:
        # the deprecated alias: transformers reads it only when activation_checkpointing is unset,
        # and it is set (off) here, so gradient_checkpointing=true was dropped without a word
        extra["activation_checkpointing"] = extra.pop("gradient_checkpointing")
    kwargs.update(extra)
    return kwargs


def run_metadata(config: TrainConfig, *, model_label: str, model_size: int) -> dict[str, Any]:
    """The sidecar metadata of a run (``bayes_grpo_run.json``) in data-contract names.

    Parameters
    ----------
    config
        The run's settings.
    model_label
        The ``model`` coordinate (Hub name, directory name or, for a snapshot of the Hugging Face
        cache, its Hub name; ``"tiny-gpt2"`` for the tiny model).
    model_size
        Number of model parameters.

    Returns
    -------
    dict
        Keys ``model, model_size, group_size, learning_rate, momentum, momentum_convention,
        k_ref, beta, seed`` (the run coordinates of DESIGN.md section 5), ``completions_per_step``
        (the run-set coordinate: completions averaged into one logged reward, i.e. the rollout of
        ``k_ref_mapping["generation_batch_size"]`` completions) and extras
        (``prompts_per_step``, ``optimizer``, ``lr_scheduler`` as TRL ran it and
        ``warmup_steps``, ``k_ref_mapping``, ...).
    """
    c = validate_config(config)
    _, convention = OPTIMIZERS[c.optimizer]
    m = k_ref_mapping(c)
    return {
        "schema": "bayes_grpo_run/1",
        # data-contract coordinates
        "model": model_label,
        "model_size": int(model_size),
        "group_size": c.group_size,
        "learning_rate": c.learning_rate,
        "momentum": c.momentum,
        "momentum_convention": convention,
        "k_ref": c.k_ref,
        "beta": c.beta,
        "seed": c.seed,
        # completions averaged into one logged reward: TRL logs the mean over a whole rollout
        # (generation batch, all processes), K_ref optimizer steps' worth of prompts with
        # k_ref_via="steps_per_generation" (config["completions_per_step"]: one optimizer step)
        "completions_per_step": m["generation_batch_size"],
        # extras
        "prompts_per_step": c.prompts_per_step,
        "optimizer": c.optimizer,
        # the schedule TRL ran: "constant" with a warm-up is transformers' constant_with_warmup
        "lr_scheduler": trl_lr_scheduler(c),
        "warmup_steps": c.warmup_steps,
        "max_steps": c.max_steps,
        "task": c.task,
        "dataset": c.dataset,
        "k_ref_mapping": m,
        "ref_model_sync_steps": c.ref_model_sync_steps,
        "ref_model_mixup_alpha": c.ref_model_mixup_alpha if c.ref_model_sync_steps else None,
        "config": c.to_dict(),
    }


__all__ = [
    "CLI_OPTIONS",
    "DEFAULT_ADAM_BETA2",
    "DEFAULT_PROMPTS_PER_STEP",
    "DEFAULT_REF_MIXUP_ALPHA",
    "K_REF_VIA",
    "NEXT_DIGIT_PROMPTS",
    "OPTIMIZERS",
    "TASKS",
    "TINY_MODEL",
    "TrainConfig",
    "environment_in_error",
    "grpo_config_kwargs",
    "k_ref_mapping",
    "launcher_env",
    "run_metadata",
    "setting_name",
    "validate_config",
]
