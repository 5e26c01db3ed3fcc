"""Hyperparameters from files beside a log, and from configs inside logs.

Files looked for in the log's folder, and in its parent (and grandparent) when the log sits in
a ``checkpoint-*``, ``logs``, ``runs`` or ``tensorboard`` folder:

==============================  ===========================================================
file                            read as
==============================  ===========================================================
``bayes_grpo_run.json``         the project's TRL runner metadata: keys are the run-set
                                coordinate names themselves (highest priority of the sidecars)
``training_args.json/.yaml``,   training configuration (TRL ``GRPOConfig`` /
``grpo_config.*``, ``args.*``,  ``TrainingArguments`` as JSON/YAML, verl or custom configs;
``hparams.yaml``,               wandb's run config, ``{key: {value: ...}}``, is unwrapped)
``config.yaml``/``.yml``,
``.hydra/config.yaml`` (verl)
``config.json``                 the model config (``_name_or_path``, sizes) when it has
                                ``model_type``/``architectures``, else a training config
``adapter_config.json``         a LoRA (PEFT) adapter's: the base model's name, when no model
                                config was found (a LoRA run's checkpoints hold no ``config.json``)
``training_args.bin``           the Trainer's arguments (``torch.save``; compressed too), when
                                no other training config was found: read by
                                ``pickled_args.read_pickled_args``,
                                which runs none of the pickle's code (every class it names is an
                                inert stand-in); one that cannot be read is noted
==============================  ===========================================================

Each is read compressed too (``training_args.json.gz``, ``bayes_grpo_run.json.xz``: a run
archived with ``gzip -r``), where the plain file is not there or not readable; a copy not read
beside the one read is named (:func:`_read_config`, by a Trainer state's rule:
:func:`~bayes_grpo.runset.loaders._base.first_readable`).

:func:`coords_from_config` turns a flattened config into run coordinates: direct keys
(:data:`~bayes_grpo.runset.names.HYPERPARAMETER_ALIASES`), the optimizer's momentum and its
convention (Adam-family: ``adam_beta1``/``betas[0]``, convention ``ema``; SGD: ``momentum``,
convention ``heavy_ball``), and the off-policy lag ``k_ref`` as optimizer steps per rollout
batch (TRL: ``num_iterations * steps_per_generation / gradient_accumulation_steps``; verl:
``ppo_epochs * train_batch_size / ppo_mini_batch_size``; custom loops:
``epochs_per_rollout_batch * rollout_batch_size / train_batch_size``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from bayes_grpo.constants import EMA, HEAVY_BALL
from bayes_grpo.runset.loaders._base import (
    READ_ERRORS,
    LogFormatError,
    error_message,
    file_copies,
    first_readable,
    flatten,
    log_name,
    not_decompressed,
    open_log,
    unread_copies,
)
from bayes_grpo.runset.loaders.pickled_args import read_pickled_args
from bayes_grpo.runset.names import hyperparameter_key

RUNNER_METADATA = "bayes_grpo_run.json"
TRAINING_CONFIG_NAMES: tuple[str, ...] = (
    "training_args.json",
    "training_args.yaml",
    "training_args.yml",
    "grpo_config.json",
    "grpo_config.yaml",
    "grpo_config.yml",
    "args.json",
    "args.yaml",
    "hparams.yaml",
    "config.yaml",
    "config.yml",
)
#: The config Hydra saves in a job's output folder (verl's runs: ``outputs/<date>/<time>/`` holds
#: the console log ``main_ppo.log`` and ``.hydra/config.yaml``, the whole resolved config).
HYDRA_CONFIG = ".hydra/config.yaml"
MODEL_CONFIG_NAME = "config.json"
#: A PEFT (LoRA) adapter's config: the only place a LoRA run's folders name the base model
#: (``base_model_name_or_path``); its checkpoints hold no ``config.json``.
ADAPTER_CONFIG_NAME = "adapter_config.json"
PICKLED_ARGS = "training_args.bin"
#: Every file name this module reads (ingestion does not take them for logs).
SIDECAR_NAMES = frozenset(
    {RUNNER_METADATA, MODEL_CONFIG_NAME, ADAPTER_CONFIG_NAME, PICKLED_ARGS, *TRAINING_CONFIG_NAMES}
)
_GENERIC_DIR = re.compile(r"^(checkpoint-\d+|logs?|runs|tensorboard|tb|events)$", re.I)


class Sidecars:
    """Configs found beside one log: runner metadata, training config, model config."""

    def __init__(self) -> None:
        self.runner: dict[str, object] = {}
        self.runner_source = ""
        self.training: dict[str, object] = {}
        self.training_source = ""
        self.model: dict[str, object] = {}
        self.model_source = ""
        self.notes: list[str] = []


def search_dirs(log_path: Path) -> list[Path]:
    """The log's folder, then its parent and grandparent while the folder name is generic."""
    folder = log_path.parent if log_path.is_file() or not log_path.exists() else log_path
    dirs = [folder]
    while _GENERIC_DIR.match(dirs[-1].name) and len(dirs) < 3 and dirs[-1].parent != dirs[-1]:
        dirs.append(dirs[-1].parent)
    # runs/<date_host>/ (HF default logging_dir): the run folder sits one level further up
    if len(dirs) < 3 and dirs[-1].parent.name.lower() in {"runs", "logs"}:
        dirs.extend([dirs[-1].parent, dirs[-1].parent.parent])
    return dirs


def _read_mapping(path: Path) -> dict[str, object]:
    """A config file's mapping (compressed too: ``training_args.json.gz``)."""
    with open_log(path) as fh:
        text = fh.read()
    data = json.loads(text) if Path(log_name(path)).suffix == ".json" else yaml.safe_load(text)
    if not isinstance(data, Mapping):
        raise ValueError("not a mapping of keys to values")
    return unwrap_wandb_config(data)


def _read_config(
    folder: Path, name: str
) -> tuple[tuple[Path, dict[str, object]] | None, list[str]]:
    """``(path, mapping)`` of the config ``folder/name`` or, where it is not readable, of its
    readable compressed copy (``config.yaml.gz``), and notes: the copies not readable, and those
    not read (:func:`~bayes_grpo.runset.loaders._base.first_readable`, a Trainer state's rule);
    None when the folder holds no readable copy.

    The plain config won silently: corrupt, it was "not read" and the copy beside it never
    tried; readable, the copy was left out without a word."""
    copies, unread = file_copies(folder, name), _not_decompressed(folder, name)
    if not copies:
        return None, unread
    path, data, notes, errors = first_readable(
        copies,
        _config_mapping,
        other="another config",
        to_read="remove {read} to read it",
    )
    return ((path, data), notes + unread) if data is not None else (None, errors + unread)


def _not_decompressed(folder: Path, name: str) -> list[str]:
    """Notes of the copies of ``folder/name`` compressed by a program not read here
    (``config.yaml.zst`` without ``zstandard``: :func:`~bayes_grpo.runset.loaders._base.
    not_decompressed`): left out without a word, or a ``training_args.json.zst`` taken for a log
    and rejected as a run, "ingest the training_args.json it gives"."""
    return [f"{path}: not read ({not_decompressed(path)})" for path in unread_copies(folder, name)]


def _config_mapping(path: Path) -> dict[str, object]:
    """:func:`_read_mapping`, its errors a :class:`LogFormatError` naming the file."""
    try:
        return _read_mapping(path)
    except (*READ_ERRORS, ValueError, yaml.YAMLError) as exc:
        why = f"{type(exc).__name__}: {error_message(exc)}"
        raise LogFormatError(f"{path}: not read ({why})") from exc


#: wandb's own entries of a run config, not hyperparameters.
_WANDB_OWN_KEYS = frozenset({"_wandb", "wandb_version"})


def unwrap_wandb_config(data: Mapping[str, object]) -> dict[str, object]:
    """A config's values; wandb's run config (``wandb/run-*/files/config.yaml``) wraps each one.

    wandb writes every key as ``{value: ..., desc: ...}`` (``desc`` in older versions) beside its
    own ``_wandb`` entry; that layout gives ``{key: value}`` without wandb's entries. Any other
    mapping is returned as it is.

    >>> unwrap_wandb_config({"_wandb": {"value": {}}, "learning_rate": {"value": 1e-6, "desc": None}})
    {'learning_rate': 1e-06}
    """
    entries = {k: v for k, v in data.items() if k not in _WANDB_OWN_KEYS}
    wrapped = all(
        isinstance(v, Mapping) and "value" in v and set(v) <= {"value", "desc"}
        for v in entries.values()
    )
    if entries and wrapped and (_WANDB_OWN_KEYS & set(data) or len(entries) > 1):
        return {k: v["value"] for k, v in entries.items()}
    return dict(data)


def find_sidecars(log_path: str | Path) -> Sidecars:
    """Read the config files beside ``log_path`` (the nearest folder wins for each kind)."""
    found = Sidecars()
    pickled: list[Path] = []
    for folder in search_dirs(Path(log_path)):
        candidates = [(RUNNER_METADATA, "runner"), (MODEL_CONFIG_NAME, "model")]
        candidates += [(name, "training") for name in TRAINING_CONFIG_NAMES]
        candidates.append((HYDRA_CONFIG, "training"))
        for name, kind in candidates:
            data, notes = _read_config(folder, name) if not getattr(found, kind) else (None, [])
            found.notes += notes
            if data is None:
                continue
            path, data = data
            if kind == "model" and not ({"model_type", "architectures"} & set(data)):
                kind = "training" if not found.training else ""
            if not kind:
                continue
            setattr(found, kind, flatten(data))
            setattr(found, f"{kind}_source", str(path))
        adapter, notes = (None, []) if found.model else _read_config(folder, ADAPTER_CONFIG_NAME)
        found.notes += notes
        if adapter is not None:
            base = adapter[1].get("base_model_name_or_path")
            if isinstance(base, str) and base:
                found.model, found.model_source = {"_name_or_path": base}, str(adapter[0])
        copies, unread = file_copies(folder, PICKLED_ARGS), _not_decompressed(folder, PICKLED_ARGS)
        if copies or unread:  # training_args.bin.gz too
            pickled.append((copies, unread))
    # read only when no readable config was found in any folder searched (a checkpoint's
    # training_args.bin beside the run folder's training_args.json loses nothing)
    if pickled and not found.training and not found.runner:
        copies, unread = pickled[0]
        path, args, notes, errors = (
            first_readable(
                copies,
                _pickled_mapping,
                other="other arguments",
                to_read="remove {read} to read it",
            )
            if copies
            else (None, None, [], [])
        )
        found.notes += (notes if args is not None else errors) + unread
        if args is not None:
            found.training = flatten(args)
            found.training_source = f"{path} (read without running its code)"
    return found


def _pickled_mapping(path: Path) -> dict[str, object]:
    """:func:`~bayes_grpo.runset.loaders.pickled_args.read_pickled_args`, its errors a
    :class:`LogFormatError` naming the file and another way to give the arguments."""
    try:
        return read_pickled_args(path)
    except ValueError as exc:
        raise LogFormatError(
            f"{path}: not read ({exc}); export the arguments with args.to_json_string() to "
            "training_args.json or use a manifest"
        ) from exc


def _num(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _get(config: Mapping[str, object], *names: str) -> tuple[str, object] | tuple[None, None]:
    lowered = {str(k).lower(): k for k in config}
    for name in names:
        if name in lowered:
            key = lowered[name]
            return str(key), config[key]
        for low, key in lowered.items():
            if low.endswith("." + name):
                return str(key), config[key]
    return None, None


def _beta1(b1: object, betas: object) -> float | None:
    """Adam's beta1 from ``adam_beta1``/``beta1`` or the first of ``betas`` (None when neither)."""
    if _num(b1) is not None:
        return _num(b1)
    if isinstance(betas, list | tuple) and betas:
        return _num(betas[0])
    return None


#: Names a config (or a W&B export's config column) gives the optimizer under.
OPTIMIZER_KEYS: tuple[str, ...] = ("optim", "optimizer", "optimizer.name", "optim.name", "optimizer_type")


def optimizer_convention(name: object) -> str | None:
    """The momentum convention of an optimizer named ``name`` (``sgd...``: heavy ball; ``adam...``,
    ``lion...``: Adam's beta1, ema); None for any other name or a value that is no text."""
    low = name.lower() if isinstance(name, str) else ""
    if "sgd" in low:
        return HEAVY_BALL
    if "adam" in low or "lion" in low:
        return EMA
    return None


def _optimizer_momentum(config: Mapping[str, object]) -> tuple[dict[str, object], dict[str, str]]:
    values: dict[str, object] = {}
    why: dict[str, str] = {}
    opt_key, opt = _get(config, *OPTIMIZER_KEYS)
    opt_name = str(opt).lower() if isinstance(opt, str) else ""
    b1_key, b1 = _get(config, "adam_beta1", "beta1")
    betas_key, betas = _get(config, "betas", "adam_betas")
    mom_key, mom = _get(config, "momentum")
    if optimizer_convention(opt_name) == HEAVY_BALL:
        values["momentum_convention"] = HEAVY_BALL
        why["momentum_convention"] = f"{opt_key}={opt}"
        if _num(mom) is not None:
            values["momentum"], why["momentum"] = _num(mom), str(mom_key)
        else:
            args_key, args = _get(config, "optim_args")
            match = re.search(r"momentum\s*=\s*([0-9.eE+-]+)", str(args or ""))
            values["momentum"] = float(match.group(1)) if match else 0.0
            why["momentum"] = (
                f"{args_key}" if match else f"{opt_key}={opt} (torch SGD default momentum 0)"
            )
    elif optimizer_convention(opt_name) == EMA or (not opt_name and _beta1(b1, betas) is not None):
        values["momentum_convention"] = EMA
        b1_src = b1_key if _num(b1) is not None else f"{betas_key}[0]"
        why["momentum_convention"] = f"{opt_key}={opt}" if opt_key else f"{b1_src} (Adam beta1)"
        if _num(b1) is not None:
            values["momentum"], why["momentum"] = _num(b1), str(b1_key)
        elif isinstance(betas, list | tuple) and betas and _num(betas[0]) is not None:
            values["momentum"], why["momentum"] = _num(betas[0]), f"{betas_key}[0]"
    elif _num(mom) is not None:
        values["momentum"], why["momentum"] = _num(mom), str(mom_key)
    return values, why


#: How ``k_ref`` is read from a verl and an OpenRLHF config: optimizer steps per rollout
#: iteration, the unit these frameworks log their steps in (``ingest.ITERATION_STEP_SOURCES``).
VERL_K_REF: str = "ppo_epochs*train_batch_size/ppo_mini_batch_size"
OPENRLHF_K_REF: str = "max_epochs*rollout_batch_size*n_samples_per_prompt/train_batch_size"


def _k_ref(config: Mapping[str, object]) -> tuple[float | None, str]:
    key, value = _get(config, "num_iterations")
    spg_key, spg = _get(config, "steps_per_generation")
    ga_key, ga = _get(config, "gradient_accumulation_steps")
    if key is not None or spg_key is not None:
        n_it = _num(value) or 1.0
        ga_n = _num(ga) or 1.0
        spg_n = _num(spg) or ga_n
        return n_it * spg_n / ga_n, (
            f"num_iterations*steps_per_generation/gradient_accumulation_steps = {n_it:g}*{spg_n:g}/{ga_n:g}"
        )
    ep_key, ep = _get(config, "ppo_epochs")
    mb_key, mb = _get(config, "ppo_mini_batch_size")
    tb_key, tb = _get(config, "data.train_batch_size", "train_batch_size")
    if ep_key is not None and _num(mb) and _num(tb):
        return (_num(ep) or 1.0) * _num(tb) / _num(
            mb
        ), VERL_K_REF
    er_key, er = _get(config, "epochs_per_rollout_batch")
    rb_key, rb = _get(config, "rollout_batch_size")
    if er_key is not None and _num(rb) and _num(tb):
        return (_num(er) or 1.0) * _num(rb) / _num(tb), (
            "epochs_per_rollout_batch*rollout_batch_size/train_batch_size"
        )
    # OpenRLHF: rollout_batch_size prompts x n_samples_per_prompt samples, trained in batches of
    # train_batch_size samples, max_epochs times
    ns_key, ns = _get(config, "n_samples_per_prompt")
    me_key, me = _get(config, "max_epochs")
    if ns_key is not None and _num(ns) and _num(rb) and _num(tb):
        return (_num(me) or 1.0) * _num(rb) * _num(ns) / _num(tb), OPENRLHF_K_REF
    # TRL's GRPOConfig before 0.16 had neither num_iterations nor steps_per_generation: it
    # generated at every optimizer step and trained on those completions once (on-policy)
    ng_key, _ng = _get(config, "num_generations")
    if ng_key is not None:
        return 1.0, "num_generations without num_iterations or steps_per_generation (TRL < 0.16: on-policy)"
    return None, ""


def _flag(value: object) -> bool | None:
    """A config switch (YAML ``true``, a command-line override's ``"True"``), None when not one."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return True if text in {"true", "1"} else False if text in {"false", "0"} else None


def _kl_weight(config: Mapping[str, object]) -> tuple[float | None, str]:
    """The KL weight of a config that says where its KL term goes (verl's ``use_kl_loss`` and
    ``use_kl_in_reward``), else None (the plain aliases decide).

    verl keeps two weights: ``actor.kl_loss_coef`` for the KL term in the loss (its GRPO
    recipes, ``use_kl_loss: true``) and ``algorithm.kl_ctrl.kl_coef`` for a KL penalty in the
    reward (``use_kl_in_reward``; before that switch existed, whenever the loss had none). The
    alias ``kl_coef`` found the reward's weight first, the default 0.001, whatever the loss used.
    """
    loss_key, in_loss = _get(config, "use_kl_loss")
    if loss_key is None or _flag(in_loss) is None:
        return None, ""
    if _flag(in_loss):
        key, coef = _get(config, "kl_loss_coef")
        return (
            (_num(coef), f"{key} ({loss_key}={in_loss})") if _num(coef) is not None else (None, "")
        )
    reward_key, in_reward = _get(config, "use_kl_in_reward")
    if _flag(in_reward) is False:
        return 0.0, f"{loss_key}={in_loss}, {reward_key}={in_reward}: no KL term"
    return None, ""


#: Keys giving the experts per layer of a mixture-of-experts model config (Mixtral, GPT-OSS:
#: ``num_local_experts``; Qwen-MoE, OLMoE: ``num_experts``; DeepSeek: ``n_routed_experts``).
MOE_EXPERT_KEYS: tuple[str, ...] = ("num_local_experts", "num_experts", "n_routed_experts")


def experts_of(model_config: Mapping[str, object]) -> tuple[str, float] | None:
    """``(key, experts per layer)`` of a mixture-of-experts model config, else None."""
    for key in MOE_EXPERT_KEYS:
        n = _num(model_config.get(key))
        if n is not None and n > 1:
            return key, n
    return None


def estimate_parameters(model_config: Mapping[str, object]) -> float | None:
    """Parameter count of a decoder-only transformer from its config (Llama/Qwen/GPT-2 style).

    Counts embeddings (and an untied output head; GPT-2's learned positions), attention (with
    grouped KV heads) and a gated (3-matrix) or plain (2-matrix) MLP per layer; norms and biases
    are ignored (< 0.1%; about 2% of a tiny 0.1M model). None
    for a mixture of experts (:func:`experts_of`): one MLP a layer counted gpt-oss-20b (21B
    parameters, 3.6B active per token) as 2.4B, and which count the size means is no config's.
    """
    if experts_of(model_config) is not None:
        return None
    h = _num(model_config.get("hidden_size", model_config.get("n_embd")))
    n_layers = _num(model_config.get("num_hidden_layers", model_config.get("n_layer")))
    vocab = _num(model_config.get("vocab_size"))
    if not (h and n_layers and vocab):
        return None
    heads = _num(model_config.get("num_attention_heads", model_config.get("n_head"))) or 1.0
    kv_heads = _num(model_config.get("num_key_value_heads")) or heads
    head_dim = _num(model_config.get("head_dim")) or h / heads
    inter = _num(model_config.get("intermediate_size", model_config.get("n_inner"))) or 4 * h
    # Gemma 2/3 name it hidden_activation (Gemma 3's config.json has no hidden_act): its gated
    # MLP was counted as a plain one, gemma-3-1b at 0.79B instead of its 1.0B
    act = next(
        (
            model_config[k]
            for k in ("hidden_act", "hidden_activation", "activation_function")
            if model_config.get(k)
        ),
        "",
    )
    gated = (
        str(act).lower()
        in {
            "silu",
            "swiglu",
            "gelu_pytorch_tanh",
            "geglu",
        }
        and "n_embd" not in model_config
    )
    attn = 2 * h * heads * head_dim + 2 * h * kv_heads * head_dim
    mlp = (3 if gated else 2) * h * inter
    tied = bool(model_config.get("tie_word_embeddings", True))
    # GPT-2's learned absolute positions (n_positions x n_embd, its wpe table); rotary models name
    # no n_positions, or carry rotary settings beside it (GPT-J): the tiny GPT-2 of `train` read
    # 100736 for its 101760 weights (103552 with norms and biases)
    rotary = any(k in model_config for k in ("rotary_dim", "rotary_pct", "rope_theta", "rope_scaling"))
    positions = 0.0 if rotary else (_num(model_config.get("n_positions")) or 0.0)
    return float(n_layers * (attn + mlp) + vocab * h * (1 if tied else 2) + positions * h)


def coords_from_config(
    config: Mapping[str, object], source: str
) -> tuple[dict[str, object], dict[str, str]]:
    """Run coordinates carried by one flattened config.

    Returns
    -------
    (values, provenance)
        ``{coordinate: value}`` and ``{coordinate: "source: key"}``.
    """
    values: dict[str, object] = {}
    why: dict[str, str] = {}
    for coord in (
        "model",
        "model_size",
        "group_size",
        "learning_rate",
        "beta",
        "seed",
        "k_ref",
        "momentum",
        "momentum_convention",
        "completions_per_step",
    ):
        key = hyperparameter_key(coord, config)
        if key is None or config[key] is None or config[key] == "":
            continue
        value = config[key]
        if coord in {"model", "momentum_convention"}:
            if not isinstance(value, str):
                continue
        elif _num(value) is None:
            continue
        else:
            value = _num(value)
        values[coord], why[coord] = value, key
    kl, kl_why = _kl_weight(config)
    if kl is not None:
        values["beta"], why["beta"] = kl, kl_why
    if "momentum" not in values or "momentum_convention" not in values:
        mom, mom_why = _optimizer_momentum(config)
        for coord, value in mom.items():
            if coord not in values:
                values[coord], why[coord] = value, mom_why[coord]
    if "k_ref" not in values:
        k_ref, k_why = _k_ref(config)
        if k_ref is not None:
            values["k_ref"], why["k_ref"] = k_ref, k_why
    return values, {c: f"{source}: {w}" for c, w in why.items()}


def coords_from_model_config(
    model_config: Mapping[str, object], source: str
) -> tuple[dict[str, object], dict[str, str]]:
    """``model`` and ``model_size`` from a model config (name or an estimated parameter count)."""
    values: dict[str, object] = {}
    why: dict[str, str] = {}
    for key in ("_name_or_path", "name_or_path"):
        name = model_config.get(key)
        if isinstance(name, str) and name:
            values["model"], why["model"] = name, f"{source}: {key}"
            break
    size = estimate_parameters(model_config)
    if size is not None:
        values["model_size"], why["model_size"] = size, f"{source}: estimated from layer sizes"
        if "model" not in values and isinstance(model_config.get("model_type"), str):
            values["model"] = f"{model_config['model_type']}-{_human(size)}"
            why["model"] = f"{source}: model_type and estimated size (no model name in the log)"
    return values, why


def _human(n: float) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"
