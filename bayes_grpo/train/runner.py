"""Run TRL's ``GRPOTrainer`` with the theory knobs and write an ingestible run directory.

A run directory holds TRL's ``trainer_state.json`` (one ``log_history`` entry per optimizer
step, with the callback's ``dynamics/*`` metrics) and ``bayes_grpo_run.json``, the run's
hyperparameters in the data-contract names (:func:`bayes_grpo.train.config.run_metadata`).
No weights or checkpoints are written unless ``save_model=True``. A training that fails or is
interrupted after its first optimizer step keeps the steps it logged (``trainer_state.json``)
and any checkpoints, with ``bayes_grpo_run.json`` saying ``"completed": false`` and
``"steps_done"``; a completed one has ``"completed": true``. What such a run kept is said in a
note of its exception (``exc.__notes__``), which ``bayes-grpo train`` prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bayes_grpo._io import atomic_path, write_text_atomic
from bayes_grpo.train.config import (
    CLI_OPTIONS,
    TINY_MODEL,
    TrainConfig,
    environment_in_error,
    grpo_config_kwargs,
    k_ref_mapping,
    launcher_env,
    run_metadata,
    validate_config,
)

#: Name of the sidecar metadata file written beside ``trainer_state.json``.
METADATA_FILE: str = "bayes_grpo_run.json"
#: TRL's per-step log file.
TRAINER_STATE_FILE: str = "trainer_state.json"
#: The model card TRL writes beside its checkpoints.
MODEL_CARD_FILE: str = "README.md"
#: Files ``save_model`` writes in the run directory (model config and weights, tokenizer,
#: training arguments); a user's file of such a name would be written over.
_MODEL_SAVE_FILE = re.compile(
    r"^(config\.json|generation_config\.json|training_args\.bin|special_tokens_map\.json|"
    r"added_tokens\.json|merges\.txt|vocab\.\w+|chat_template\.\w+|tokenizer[-.\w]*|"
    r"(model|pytorch_model|adapter_model)[-.\w]*\.(safetensors|bin)(\.index\.json)?)$"
)
#: The name the Trainer gives a checkpoint (``checkpoint-<step>``): it saves into such a folder and
#: removes older ones by ``save_total_limit``, whatever they hold.
_CHECKPOINT_NAME = re.compile(r"^checkpoint-\d+$")
#: Folder in a run directory where a run replacing another (``overwrite``) that saves checkpoints
#: holds the replaced run's ``checkpoint-*`` folders until it completes (then they go) or stops
#: (then they are put back).
REPLACED_CHECKPOINTS: str = ".bayes_grpo_replaced_checkpoints"
#: ``dataset`` recorded for a run given ``train_dataset`` (a ``datasets.Dataset``) without a name.
IN_MEMORY_DATASET: str = "<train_dataset>"


@dataclass(frozen=True)
class TrainResult:
    """What :func:`run_training` produced.

    Attributes
    ----------
    run_dir
        The run directory.
    metadata
        The contents of ``bayes_grpo_run.json``.
    wall_time_s
        Seconds spent in ``trainer.train()``.
    final_reward
        Mean of the last 10% of the finite logged rewards (at least one; NaN if none): with
        ``K_ref > 1`` TRL logs a reward on every ``K_ref``-th step only.
    final_reward_steps
        The first and last step of those rewards (``None`` if none logged).
    last_reward
        The last logged reward, at ``final_reward_steps[1]``: what ``bayes-grpo ingest`` shows as
        the run's ``r_last`` (NaN if none logged).
    """

    run_dir: Path
    metadata: dict[str, Any]
    wall_time_s: float
    final_reward: float
    final_reward_steps: tuple[int, int] | None = None
    last_reward: float = float("nan")


def check_reward_funcs(config: TrainConfig, reward_funcs: Sequence[Any] | None) -> None:
    """Raise ``ValueError`` when the task has no reward function, one is not callable/a model id,
    or the built-in next_digit reward cannot be earned within ``max_completion_length``."""
    if config.task == "custom" and not reward_funcs:
        raise ValueError(
            "missing reward function: task 'custom' needs reward_funcs (Python) or --reward "
            "module:function (CLI); built-in tasks 'next_digit' and 'gsm8k' bring their own"
        )
    for f in reward_funcs or ():
        if not (callable(f) or isinstance(f, str)):
            raise ValueError(f"reward function {f!r} is neither callable nor a reward-model name")
    check_reward_arguments(reward_funcs)
    if config.task == "next_digit" and not reward_funcs and config.max_completion_length == 1:
        # the reward asks for the digit and then the end-of-sequence token
        raise ValueError(
            "max_completion_length (--max-completion-length) = 1: the next_digit reward needs 2 "
            "tokens (the digit, then end of sequence); every completion would score 0"
        )


#: The keywords TRL 1.16 calls a reward function with, besides the prompt set's other columns
#: (``GRPOTrainer._calculate_rewards``).
TRL_REWARD_KEYWORDS: tuple[str, ...] = (
    "prompts",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
)


def check_reward_arguments(reward_funcs: Sequence[Any] | None, columns: Sequence[str] = ()) -> None:
    """Raise ``ValueError`` naming a reward function that cannot take the keywords TRL calls it
    with (:data:`TRL_REWARD_KEYWORDS` and the prompt set's ``columns`` but ``prompt``): TRL
    failed on it at the first step with a TypeError from inside its loop."""
    skip = {"prompt", "completion", "completion_ids"}
    passed = [*TRL_REWARD_KEYWORDS, *(c for c in columns if c not in skip)]
    for f in reward_funcs or ():
        if isinstance(f, str) or not callable(f):  # a reward model: TRL calls it on tokens
            continue
        try:
            signature = inspect.signature(f)
        except (TypeError, ValueError):  # a builtin without one: nothing to check
            continue
        try:
            signature.bind(**dict.fromkeys(passed))
        except TypeError as exc:
            raise ValueError(
                f"reward function {_reward_name(f)!r} cannot take the keywords TRL calls it with "
                f"({', '.join(passed)}): {exc}; give it a **kwargs parameter"
            ) from None


def check_threads(threads: int | None) -> None:
    """Raise ``ValueError`` unless ``threads`` (torch's CPU threads) is None or an integer >= 1."""
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ValueError(f"threads (--threads) must be an integer >= 1, got {threads!r}")


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``threads`` for the run (None: left as they are), and put back
    after it: a Python caller's later torch work keeps its own."""
    if threads is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _reward_name(f: Any) -> str:
    if isinstance(f, str):  # a reward model's Hub name or folder, as given
        return f
    return getattr(f, "__name__", None) or type(f).__name__


def check_output_dir(output_dir: Path, overwrite: bool, config: TrainConfig | None = None) -> None:
    """Raise ``FileExistsError`` when a run (``config``'s) may not be written into ``output_dir``.

    Refused without ``overwrite``: a folder that holds a run (``trainer_state.json``,
    ``bayes_grpo_run.json`` or a checkpoint, :func:`_is_checkpoint`: a log ingest would read),
    and one holding a file the run would write over: the model's files when it saves the model,
    TRL's model card ``README.md`` when it saves checkpoints. ``overwrite`` replaces the run
    there, and the files of those it wrote (:func:`_written_by_run_there`); a file the run would
    write over that it did not write is refused all the same. Other ``checkpoint-*`` entries (a
    user's ``checkpoint-notes/``) are no run's and are left alone, except that a run saving
    checkpoints refuses one named ``checkpoint-<step>`` that holds no ``trainer_state.json`` (a
    checkpoint cut short, or no checkpoint): the Trainer would write into it or remove it.
    """
    saves_model = config is not None and config.save_model
    saves_checkpoints = config is not None and _saves_checkpoints(config)
    if output_dir.exists() and not output_dir.is_dir():
        raise FileExistsError(f"{output_dir}: is a file, not a run directory; choose a folder path")
    under_file = next((p for p in output_dir.parents if p.exists() and not p.is_dir()), None)
    if under_file is not None:  # making the folder would fail: "[Errno 20] Not a directory"
        raise FileExistsError(
            f"{output_dir}: {under_file} is a file, not a folder a run directory can be made in; "
            "choose a folder path"
        )
    entries = sorted(output_dir.iterdir()) if output_dir.is_dir() else []
    if (output_dir / REPLACED_CHECKPOINTS).exists():
        # a replacing run killed outright (SIGKILL, a power cut) left the replaced run's
        # checkpoints there: a run now would bury them, and --overwrite remove them
        raise FileExistsError(
            f"{output_dir}: holds {REPLACED_CHECKPOINTS}/, the checkpoints of the run that a run "
            "with overwrite=True / --overwrite was replacing when it was killed; move them back "
            f"(mv {output_dir / REPLACED_CHECKPOINTS}/checkpoint-* {output_dir}/) or remove "
            "the folder, then train again"
        )
    held = [p.name for p in entries if p.name in (TRAINER_STATE_FILE, METADATA_FILE)]
    checkpoints = [p.name for p in entries if p.name not in held and _holds_run_log(p)]
    if len(checkpoints) > 1:
        held.append(f"{len(checkpoints)} checkpoint-* folders")
    else:
        held += checkpoints
    if held and not overwrite:
        partial = _partial_run(output_dir)
        if partial:
            raise FileExistsError(
                f"{output_dir}: already holds a run ({', '.join(held)}), {partial}; bayes-grpo "
                "train does not resume a run: pass overwrite=True / --overwrite to train it again "
                "from step 0 (the partial run is kept until the new one completes), or choose a "
                "new folder"
            )
        raise FileExistsError(
            f"{output_dir}: already holds a run ({', '.join(held)}); pass overwrite=True / --overwrite"
        )
    not_checkpoints = [
        p.name
        for p in entries
        if saves_checkpoints and _CHECKPOINT_NAME.match(p.name) and not _is_checkpoint(p)
    ]
    if not_checkpoints:
        # named as the Trainer names its checkpoints, it saves into them and rotates them away
        # by save_total_limit; neither a replaced run's (held, put back, removed) nor a user's
        raise FileExistsError(
            f"{output_dir}: holds {', '.join(not_checkpoints)}, which TRL's checkpoints would "
            f"write into or remove (save_total_limit), and "
            f"{'they hold' if len(not_checkpoints) > 1 else 'it holds'} no {TRAINER_STATE_FILE} "
            "(a checkpoint cut short, or not a checkpoint); move "
            f"{'them' if len(not_checkpoints) > 1 else 'it'} out or choose a new folder"
        )
    clash = [
        p.name
        for p in entries
        if (saves_model and _MODEL_SAVE_FILE.match(p.name))
        or (saves_checkpoints and p.name == MODEL_CARD_FILE)
    ]
    if overwrite:
        # overwrite replaces a run, not a user's files: TRL's model card wrote over a user's
        # README.md, and --save-model a user's config.json, that the replaced run had not written
        clash = [name for name in clash if not _written_by_run_there(output_dir, name, bool(held))]
    if clash:
        by_save = any(_MODEL_SAVE_FILE.match(name) for name in clash) and saves_model
        what = "saving the model (save_model / --save-model)" if by_save else "TRL's checkpoints"
        if overwrite:
            raise FileExistsError(
                f"{output_dir}: holds {', '.join(clash)}, which {what} would write over, and "
                f"{'the run there did not write' if held else 'no run there wrote'} "
                f"{'them' if len(clash) > 1 else 'it'}: overwrite=True / --overwrite replaces a "
                f"run, not other files; move {'them' if len(clash) > 1 else 'it'} out or choose a "
                "new folder"
            )
        raise FileExistsError(
            f"{output_dir}: holds {', '.join(clash)}, which {what} would write over; choose a new "
            "or empty folder, or pass overwrite=True / --overwrite"
        )


def _written_by_run_there(output_dir: Path, name: str, held: bool) -> bool:
    """Whether the file ``name`` of ``output_dir`` is one the run there (``held``: there is
    one) wrote: the model's files when its bayes_grpo_run.json says it saved its model, TRL's
    model card when it saved checkpoints (its recorded save_strategy, or, of a run with no
    readable config in bayes_grpo_run.json, a checkpoint beside the card). A link is never one
    the run wrote (TRL and ``save_pretrained`` write plain files): it is the user's, and the run
    would write through it over the file it points to."""
    if not held or (output_dir / name).is_symlink():
        return False
    if _MODEL_SAVE_FILE.match(name):
        return _saved_model(output_dir)
    try:
        meta = json.loads((output_dir / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = None
    config = meta.get("config") if isinstance(meta, dict) else None
    if not isinstance(config, dict):
        return any(_is_checkpoint(p) for p in output_dir.iterdir())
    extra = config.get("extra_grpo_args")
    return isinstance(extra, dict) and str(extra.get("save_strategy", "no")) != "no"


def _partial_run(output_dir: Path) -> str:
    """``one stopped after 56 of 300 steps ("completed": false)`` when the run directory's
    ``bayes_grpo_run.json`` says its training did not complete, else ``""``: the folder a user
    trains into again after a run was stopped, expecting it to go on."""
    try:
        meta = json.loads((output_dir / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(meta, dict) or meta.get("completed") is not False:
        return ""
    done, total = meta.get("steps_done"), meta.get("max_steps")
    if isinstance(done, int) and isinstance(total, int) and total > 0:
        return f'one stopped after {done} of {total} steps ("completed": false)'
    return 'one that did not complete ("completed": false)'


def _saves_checkpoints(config: TrainConfig) -> bool:
    """Whether the run saves checkpoints (``--grpo-arg save_strategy=...``; the runner's is "no")."""
    return str(config.extra_grpo_args.get("save_strategy", "no")) != "no"


def _hold_checkpoints(output_dir: Path, replaced: dict[Path, int]) -> Path | None:
    """Move the ``checkpoint-*`` folders of a run being replaced out of TRL's way, into
    ``output_dir/REPLACED_CHECKPOINTS``, and take them out of ``replaced``; return that folder
    (None when there were none).

    A replacing run that saves checkpoints wrote its own over the replaced run's of the same
    step (``checkpoint-2``) and removed the others by its ``save_total_limit`` (transformers
    rotates every ``checkpoint-*`` folder of the output folder): stopped before it completed,
    the run it was to leave as it was had lost them.
    """
    folders = sorted(p for p in replaced if p.is_dir() and _holds_run_log(p))
    if not folders:
        return None
    hold = output_dir / REPLACED_CHECKPOINTS
    hold.mkdir()
    for folder in folders:
        folder.rename(hold / folder.name)
        del replaced[folder]
    return hold


def _restore_checkpoints(output_dir: Path, hold: Path | None) -> None:
    """After a replacing run that saves checkpoints stopped before its log replaced the old
    one's: remove the checkpoints it wrote (it keeps nothing of its own; the replaced run's are
    in ``hold``, and an entry of a checkpoint's name that is not one was refused before the run,
    so every ``checkpoint-<step>`` folder of ``output_dir`` is this run's) and put the held ones
    back; other ``checkpoint-*`` entries (a user's) stay."""
    for path in output_dir.iterdir():
        if path.is_dir() and _CHECKPOINT_NAME.match(path.name):
            shutil.rmtree(path)
    if hold is None:
        return
    for folder in sorted(hold.iterdir()):
        folder.rename(output_dir / folder.name)
    hold.rmdir()


def _prepare_output_dir(
    output_dir: Path, overwrite: bool, config: TrainConfig | None = None
) -> list[Path]:
    """Make ``output_dir`` (and missing parents) once :func:`check_output_dir` allows it; return
    the directories made here, outermost first."""
    check_output_dir(output_dir, overwrite, config)
    missing = [d for d in (output_dir, *output_dir.parents) if not d.exists()][::-1]
    created = []
    for d in missing:  # one level at a time: a folder another process made meanwhile is not ours
        try:
            d.mkdir()
        except FileExistsError:
            continue
        created.append(d)
    output_dir.mkdir(parents=True, exist_ok=True)
    return created


def _remove_created(created: list[Path]) -> None:
    """Undo :func:`_prepare_output_dir` after a failed run: delete the folders it made, each
    only while empty.

    A run that failed (or was interrupted) after writing logs or checkpoints keeps them: a
    partial training log can still be ingested, and a checkpoint resumed. A folder that existed
    before is never touched. Errors here are dropped so that the run's own error is the one
    reported.
    """
    for d in reversed(created):
        try:
            d.rmdir()
        except OSError:
            break


def _load_model(config: TrainConfig, workdir: Path) -> tuple[Any, Any, str]:
    """Model, tokenizer and the ``model`` label; the tiny model is built in ``workdir``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bayes_grpo.train.tasks import error_reason
    from bayes_grpo.train.tiny import TINY_MODEL_LABEL, build_tiny_model

    if config.model == TINY_MODEL:
        path: str = str(build_tiny_model(workdir / "tiny_model", seed=config.seed))
        label = TINY_MODEL_LABEL
    else:
        local = Path(config.model).expanduser()
        path_like = config.model.startswith((".", "/", "~")) or config.model.count("/") > 1
        if path_like and not local.is_dir():  # a Hub name is "name" or "owner/name"
            raise FileNotFoundError(f"{config.model}: model directory not found")
        configs = ("config.json", "adapter_config.json")  # a model, or a PEFT adapter on one
        if local.is_dir() and not any((local / name).is_file() for name in configs):
            raise FileNotFoundError(
                f"{config.model}: not a model directory (no config.json); give a folder written "
                "by save_pretrained, or a Hub model name"
            )
        path = str(local) if local.is_dir() else config.model
        label = _model_label(local) if local.is_dir() else path
    # fp32 master weights (bf16 compute comes from TRL's bf16 autocast on GPU): a pure-bf16 copy
    # would round away updates smaller than ~4e-3 of a weight, i.e. most updates at lr ~1e-6.
    kwargs: dict[str, Any] = {"dtype": torch.float32}
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except (OSError, ValueError) as exc:
        # not on the Hub, no connection, gated, no weights, no usable tokenizer: transformers' words
        reason = error_reason(exc)
        raise FileNotFoundError(f"{config.model}: cannot load the model: {reason}") from exc
    if not tokenizer("next 1 =", add_special_tokens=False)["input_ids"]:
        # transformers builds an empty tokenizer for a model folder without tokenizer files: every
        # prompt would be zero tokens and generation fail deep inside TRL (IndexError)
        raise FileNotFoundError(
            f"{config.model}: the tokenizer loaded has no vocabulary (no tokenizer files beside "
            "the model?)"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer, label


#: A Hub model in the Hugging Face cache: ``.../models--<owner>--<name>/snapshots/<revision>``.
_HUB_CACHE_SNAPSHOT = re.compile(r"^models--(?P<repo>.+)$")


def _model_label(folder: Path) -> str:
    """The ``model`` coordinate of a local model folder: its name, or for a snapshot in the
    Hugging Face cache its Hub name ``owner/name`` (as the Hub name given directly gives), not
    the revision hash the snapshot folder is named after."""
    resolved = folder.resolve()
    cache = _HUB_CACHE_SNAPSHOT.match(resolved.parent.parent.name)
    if resolved.parent.name == "snapshots" and cache:
        return cache.group("repo").replace("--", "/")
    return _folder_name(folder)


def _folder_name(folder: Path) -> str:
    """The name of ``folder`` as given, also for ``.`` or ``..`` (whose ``Path.name`` is empty
    or ``..``): the last part of its absolute path, links not followed."""
    return Path(os.path.abspath(folder)).name


def _build_dataset_and_rewards(
    config: TrainConfig, tokenizer: Any, reward_funcs: Sequence[Any] | None, train_dataset: Any
) -> tuple[Any, list[Any]]:
    from datasets import Dataset

    from bayes_grpo.train import tasks, tiny

    if config.task == "next_digit":
        n = validate_config(config).n_prompts  # a fixed size (NEXT_DIGIT_PROMPTS), not by max_steps
        dataset = Dataset.from_list(tiny.next_digit_prompts(n, seed=config.seed))
        rewards = list(reward_funcs or [tiny.make_next_digit_reward(tokenizer)])
    elif config.task == "gsm8k":
        raw = (
            train_dataset
            if train_dataset is not None
            else tasks.load_prompt_dataset(
                config.dataset, config=config.dataset_config, split=config.dataset_split
            )
        )
        chat = getattr(tokenizer, "chat_template", None) is not None
        dataset = tasks.gsm8k_prompts(raw, chat=chat)
        if not reward_funcs:
            tasks.check_gold_answers(dataset, str(config.dataset))
        rewards = list(reward_funcs or [tasks.gsm8k_reward])
    else:
        dataset = (
            train_dataset
            if train_dataset is not None
            else tasks.load_prompt_dataset(
                config.dataset, config=config.dataset_config, split=config.dataset_split
            )
        )
        if dataset.column_names is not None and "prompt" not in dataset.column_names:
            raise ValueError(
                f"dataset {config.dataset!r} has no 'prompt' column; columns: {dataset.column_names}"
            )
        rewards = list(reward_funcs or [])
    return dataset, rewards


def _check_rollout_fits(dataset: Any, config: TrainConfig) -> None:
    """Raise ValueError when the prompt set holds fewer prompts than one rollout takes.

    TRL's sampler yields only whole rollouts of ``generation_batch_size / G`` prompts: from a
    smaller set it yields none, and transformers then stops "training" at step 0 without an
    error (a run directory of no steps, recorded as completed).
    """
    try:
        n = len(dataset)
    except TypeError:  # an iterable dataset: TRL repeats its stream, nothing to count
        return
    c = validate_config(config)
    need = k_ref_mapping(c)["generation_batch_size"] // c.group_size
    if n >= need:
        return
    via_spg = c.k_ref_via == "steps_per_generation" and c.k_ref > 1
    parts = f"prompts_per_step={c.prompts_per_step} (--prompts-per-step)" + (
        f" x k_ref={c.k_ref} (--k-ref)" if via_spg else ""
    )
    name = "the next_digit prompt set (n_prompts)" if c.task == "next_digit" else c.dataset
    raise ValueError(
        f"{name}: {n} prompt{'s' if n != 1 else ''}, fewer than the {need} prompts one rollout "
        f"takes ({parts}): TRL would train no step; give more prompts or fewer per step"
    )


def _check_context(
    model: Any,
    tokenizer: Any,
    dataset: Any,
    max_completion_length: int,
    name: str,
    dataset_name: str | None = None,
) -> None:
    """Raise ValueError when a (text) prompt plus the completion cannot fit the model's context,
    or when conversational prompts come to a model without a chat template (TRL failed on them
    at the first step, naming neither)."""
    if hasattr(dataset, "select"):
        sample = dataset.select(range(min(len(dataset), 256)))["prompt"]
    else:  # an IterableDataset (streamed): its first rows
        sample = [row["prompt"] for row in itertools.islice(dataset, 256)]
    chats = [p for p in sample if not isinstance(p, str)]
    if chats and getattr(tokenizer, "chat_template", None) is None:
        shown = repr(chats[0])
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ValueError(
            f"{dataset_name or 'the prompt set'}: conversational prompts ({shown}) but the model "
            f"{name} has no chat template to write them as text; give text prompts, or a model "
            "with a chat template"
        )
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(
        model.config, "n_positions", None
    )
    if not limit:
        return
    texts = [p for p in sample if isinstance(p, str)]
    if not texts:
        return
    longest = max(len(ids) for ids in tokenizer(texts)["input_ids"])
    if longest + max_completion_length > limit:
        raise ValueError(
            f"{name}: prompts of up to {longest} tokens plus max_completion_length="
            f"{max_completion_length} (--max-completion-length) exceed the model's context of "
            f"{limit} positions"
        )


def _final_reward(
    log_history: list[dict[str, Any]],
) -> tuple[float, tuple[int, int] | None, float]:
    """:class:`TrainResult`'s ``final_reward``, ``final_reward_steps`` and ``last_reward``, of
    the finite rewards logged (those ingest reads: a NaN or inf is not a point of the curve)."""
    logged = [
        (int(h["step"]), float(h["reward"]))
        for h in log_history
        if h.get("reward") is not None and "step" in h and math.isfinite(float(h["reward"]))
    ]
    if not logged:
        return float("nan"), None, float("nan")
    tail = logged[-max(1, len(logged) // 10) :]
    mean = sum(r for _, r in tail) / len(tail)
    return mean, (tail[0][0], tail[-1][0]), tail[-1][1]


def run_training(
    config: TrainConfig,
    output_dir: str | os.PathLike,
    *,
    reward_funcs: Sequence[Callable[..., list[float]] | str] | None = None,
    train_dataset: Any = None,
    overwrite: bool = False,
    threads: int | None = None,
    quiet: bool = True,
) -> TrainResult:
    """Train one GRPO run and write its run directory.

    Parameters
    ----------
    config
        Theory knobs (validated here, before anything is loaded).
    output_dir
        Run directory to create (refused if it already holds a run, unless ``overwrite``). When
        the run fails, the folders made here are removed again while empty (logs and
        checkpoints a failed or interrupted run wrote are kept); a folder that existed before is
        left as it was.
    reward_funcs
        TRL reward functions (``f(prompts, completions, **columns) -> list[float]``) or
        reward-model ids; required for ``task="custom"``, optional override otherwise.
    train_dataset
        A ``datasets.Dataset`` (or, task "custom", a streamed ``IterableDataset``) to use
        instead of loading ``config.dataset`` (gsm8k/custom tasks;
        ``config.dataset`` may then be left unset: the metadata records ``"<train_dataset>"``).
    overwrite
        Replace an existing run in ``output_dir``: kept until this run completes, then its log,
        metadata, ``checkpoint-*`` folders, saved model files and TRL's model card README.md
        (only one the run wrote and nobody edited since, :func:`_replaced_model_card`) are
        replaced or removed.
    threads
        ``torch.set_num_threads`` for CPU runs, >= 1, for the run only (None: leave torch's
        setting).
    quiet
        Drop transformers' console printing of every log entry.

    Returns
    -------
    TrainResult
    """
    if train_dataset is not None and config.task == "next_digit":
        raise ValueError(
            "train_dataset given with task 'next_digit', which generates its own prompts and "
            "would not read it; use task 'gsm8k' or 'custom' for a prompt set of your own"
        )
    if train_dataset is not None and not config.dataset:
        # the dataset is given, not named: record what it was (validation asks for a name)
        config = dataclasses.replace(config, dataset=IN_MEMORY_DATASET)
    config = validate_config(config)
    check_reward_funcs(config, reward_funcs)
    launcher_env()  # accelerate reads these as integers once training is set up
    check_threads(threads)
    # "~/runs/x" (Python, or a quoted command line) is the home folder's, as transformers takes
    # it for its own output_dir: otherwise TRL and this runner write to two folders
    output_dir = Path(output_dir).expanduser()
    created = _prepare_output_dir(output_dir, overwrite, config)
    try:
        with _torch_threads(threads):
            return _train_into(config, output_dir, reward_funcs, train_dataset, quiet)
    except BaseException:
        # a failed run leaves no empty folder behind (what it wrote, and a folder given, stay)
        _remove_created(created)
        raise


def _train_into(
    config: TrainConfig,
    output_dir: Path,
    reward_funcs: Sequence[Any] | None,
    train_dataset: Any,
    quiet: bool,
) -> TrainResult:
    """The body of :func:`run_training` once ``output_dir`` exists."""
    import torch
    import trl
    from transformers import PrinterCallback, ProgressCallback

    from bayes_grpo.train.callback import DynamicsDiagnosticsCallback

    kwargs = grpo_config_kwargs(config, str(output_dir))
    if config.device == "auto" and not _bf16_available():
        # TRL's bf16 default (True) is refused without a bf16 GPU: "auto" then trains in fp32
        kwargs.setdefault("bf16", False)

    with tempfile.TemporaryDirectory(prefix="bayes_grpo_train_") as tmp:
        # the model first: building GRPOConfig starts torch.distributed under a launcher, after
        # which transformers' save_pretrained writes on rank 0 only (the tiny model is built per rank)
        model, tokenizer, label = _load_model(config, Path(tmp))
        try:
            args = trl.GRPOConfig(**kwargs)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"TRL rejected the configuration for {output_dir}: {exc}"
                + environment_in_error(str(exc))
            ) from exc
        dataset, rewards = _build_dataset_and_rewards(
            config, tokenizer, reward_funcs, train_dataset
        )
        check_reward_arguments(rewards, getattr(dataset, "column_names", None) or ())
        _check_rollout_fits(dataset, config)
        _check_context(
            model, tokenizer, dataset, args.max_completion_length, config.model, config.dataset
        )
        model_size = sum(p.numel() for p in model.parameters())
        try:
            trainer = trl.GRPOTrainer(
                model=model,
                reward_funcs=rewards if len(rewards) > 1 else rewards[0],
                args=args,
                train_dataset=dataset,
                processing_class=tokenizer,
            )
        except ValueError as exc:  # accelerate's Accelerator refuses a bad ACCELERATE_* here
            named = environment_in_error(str(exc))
            if not named:
                raise
            raise ValueError(f"{exc}{named}") from exc
        launched = trainer.accelerator.num_processes
        if launched != config.num_processes:
            raise ValueError(
                f"{output_dir}: launched on {launched} process{'es' if launched != 1 else ''} but "
                f"num_processes={config.num_processes} ({CLI_OPTIONS['num_processes']}); "
                "prompts_per_step is split over num_processes, so set it to match"
            )
        if quiet:
            for cb in (PrinterCallback, ProgressCallback):
                trainer.remove_callback(cb)
        DynamicsDiagnosticsCallback.attach(trainer)

        metadata = run_metadata(config, model_label=label, model_size=model_size)
        metadata.update(
            {
                "run_id": _folder_name(output_dir),
                "reward_funcs": [_reward_name(f) for f in rewards],
                # TRL's settings that shape the update and that the runner leaves at TRL's
                # defaults, as the run used them (gradient clipping above all)
                "trl_settings": _trl_settings(args),
                # a seed's rewards move with torch's CPU threads (the order of float sums): what
                # reproducing the run needs besides its config and versions (--threads)
                "torch_threads": torch.get_num_threads(),
                "versions": {
                    "torch": torch.__version__,
                    "trl": trl.__version__,
                    "transformers": __import__("transformers").__version__,
                },
            }
        )
        before = set(output_dir.iterdir())
        # a run being replaced (overwrite) keeps its log and metadata until this one completes
        replacing = any(_holds_run_log(p) for p in before) or output_dir / METADATA_FILE in before
        # and then its checkpoints and saved model go: beside this run's metadata they would be
        # read (ingest, a resume, from_pretrained) as this run's
        saved_model = replacing and _saved_model(output_dir)
        replaced = {
            p: _written_at(p) for p in before if replacing and _replaced_artefact(p, saved_model)
        }
        if replacing and _replaced_model_card(output_dir, before):
            # its card goes too, unless this run writes its own (it saves checkpoints)
            card = output_dir / MODEL_CARD_FILE
            replaced[card] = _written_at(card)
        # the replaced run's checkpoints are out of TRL's way (its saves and rotation) until
        # this run completes: every checkpoint-* in the folder is then this run's
        holding = replacing and _saves_checkpoints(config) and trainer.is_world_process_zero()
        held = _hold_checkpoints(output_dir, replaced) if holding else None
        start = time.perf_counter()
        logged = False  # this run's log written over the folder's trainer_state.json
        try:
            trainer.train()
            wall = time.perf_counter() - start
            if trainer.state.global_step > 0:
                if trainer.is_world_process_zero():
                    _save_state(trainer, output_dir)
                logged = True
                if config.save_model:  # a large model takes a while: a SIGTERM may come here
                    trainer.save_model(str(output_dir))
        except BaseException as exc:
            # the checkpoints (or logs) a failed or interrupted training wrote are kept; without
            # the run's settings beside them they would ingest with G, lr, k_ref ... unknown.
            # The steps it logged are written as its trainer_state.json (TRL writes that file
            # only at the end: without checkpoints an interrupted run otherwise kept nothing).
            # What was kept is said in a note of the run's own error, which is the one raised.
            # A run being replaced whose log is already this run's is replaced (its settings
            # beside that log would be another run's).
            still_old = replacing and not logged
            exc.add_note(
                _keep_after_failure(trainer, config, output_dir, before, metadata, still_old)
            )
            try:  # the run's own error is the one raised
                if holding and still_old:
                    _restore_checkpoints(output_dir, held)
                if replacing and logged and trainer.is_world_process_zero():
                    _remove_replaced(replaced)
                    if held is not None:
                        shutil.rmtree(held)
            except OSError:
                pass
            raise
        if trainer.state.global_step == 0:
            # transformers ends a training whose data give no batch at step 0 without an error
            # (a streamed prompt set shorter than one rollout; a sized one is refused before)
            if holding:
                _restore_checkpoints(output_dir, held)
            need = k_ref_mapping(config)["generation_batch_size"] // config.group_size
            raise ValueError(
                f"{config.dataset or 'the prompt set'}: TRL trained no step; the prompts gave no "
                f"whole rollout of {need} prompts"
            )

    metadata.update({"completed": True, "wall_time_s": round(wall, 3)})
    if trainer.is_world_process_zero():
        _write_metadata(output_dir, metadata)
        _remove_replaced(replaced)
        if held is not None:
            shutil.rmtree(held)
    return TrainResult(output_dir, metadata, wall, *_final_reward(trainer.state.log_history))


#: ``GRPOConfig`` fields recorded in ``bayes_grpo_run.json`` as ``trl_settings``: what the update
#: does with the gradient and the loss beyond the theory's knobs (``max_grad_norm`` clips the
#: gradient: a run's grad norms above it are steps the law's gain does not see).
TRL_SETTINGS: tuple[str, ...] = (
    "max_grad_norm",
    "loss_type",
    "scale_rewards",
    "epsilon",
    "epsilon_high",
    "importance_sampling_level",
    "mask_truncated_completions",
    "temperature",
    "max_completion_length",
)


def _trl_settings(args: Any) -> dict[str, Any]:
    """The :data:`TRL_SETTINGS` the run's ``GRPOConfig`` holds, as JSON values."""
    out: dict[str, Any] = {}
    for name in TRL_SETTINGS:
        if hasattr(args, name):
            value = getattr(args, name)
            out[name] = value if isinstance(value, bool | int | float | str | None) else str(value)
    return out


def _bf16_available() -> bool:
    """Whether transformers accepts ``bf16=True`` without ``use_cpu`` (a bf16 GPU, or XLA)."""
    from transformers.utils import is_torch_bf16_gpu_available, is_torch_xla_available

    return bool(is_torch_bf16_gpu_available() or is_torch_xla_available())


def _replaced_artefact(path: Path, saved_model: bool) -> bool:
    """A checkpoint folder of a run that ``overwrite`` replaces, or (``saved_model``: its metadata
    says it saved its model) a file of that model."""
    if path.name == TRAINER_STATE_FILE:
        return False  # written again by the run
    model_file = saved_model and path.is_file() and _MODEL_SAVE_FILE.match(path.name)
    return _holds_run_log(path) or bool(model_file)


#: How TRL's model card (``trl/templates/lm_model_card.md``) is told from a user's README.md:
#: front matter tagged ``generated_from_trainer`` by ``library_name: transformers``, then its
#: title and the line naming TRL.
_TRL_CARD_FRONT = ("library_name: transformers", "- generated_from_trainer")
_TRL_CARD_BODY = (
    "\n# Model Card for ",
    "It has been trained using [TRL](https://github.com/huggingface/trl)",
)


def _replaced_model_card(output_dir: Path, before: set[Path]) -> bool:
    """Whether ``output_dir``'s README.md is the model card of the run being replaced, to go with
    its checkpoints (a run saving none writes no card: the old one described the old run).
    Only when that is sure: a plain file (not a link) that the run there wrote
    (:func:`_written_by_run_there`: it saved checkpoints), whose text is TRL's card
    (:data:`_TRL_CARD_FRONT`, :data:`_TRL_CARD_BODY`), and that is no newer than that run's log
    and metadata (``before``; TRL writes the card at each checkpoint, before them): a card
    edited since, or a user's README.md, stays."""
    card = output_dir / MODEL_CARD_FILE
    if card.is_symlink() or not card.is_file():
        return False
    if not _written_by_run_there(output_dir, MODEL_CARD_FILE, True):
        return False
    logs = [p for p in before if _holds_run_log(p) or p.name == METADATA_FILE]
    if not logs or card.stat().st_mtime_ns > max(_written_at(p) for p in logs):
        return False
    try:
        with card.open(encoding="utf-8") as f:
            text = f.read(1 << 16)
    except (OSError, UnicodeDecodeError):
        return False
    front, sep, body = text.removeprefix("---\n").partition("\n---\n")
    if not text.startswith("---\n") or not sep:
        return False
    lines = {line.strip() for line in front.splitlines()}
    return all(mark in lines for mark in _TRL_CARD_FRONT) and all(
        m in "\n" + body for m in _TRL_CARD_BODY
    )


def _saved_model(output_dir: Path) -> bool:
    """Whether the run in ``output_dir`` saved its model there (its bayes_grpo_run.json says so);
    files of such names are the user's otherwise."""
    try:
        meta = json.loads((output_dir / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    config = meta.get("config") if isinstance(meta, dict) else None
    return isinstance(config, dict) and config.get("save_model") is True


def _written_at(path: Path) -> int:
    """When ``path`` was last written: a checkpoint folder by its state file (a save into an
    existing folder writes its files over and leaves the folder's own time as it was)."""
    state = path / TRAINER_STATE_FILE
    return (state if state.is_file() else path).stat().st_mtime_ns


def _holds_run_log(path: Path) -> bool:
    """``trainer_state.json`` or a checkpoint (:func:`_is_checkpoint`): a log that ingest would
    read."""
    return path.name == TRAINER_STATE_FILE or _is_checkpoint(path)


def _is_checkpoint(path: Path) -> bool:
    """A checkpoint the Trainer wrote: a folder named ``checkpoint-<step>`` holding its
    ``trainer_state.json``. Another ``checkpoint-*`` entry (a user's ``checkpoint-notes/``, a
    file ``checkpoint-1``) is no run's: it does not make a folder hold a run, and a run replacing
    the one there (``overwrite``) leaves it alone."""
    return (
        path.is_dir()
        and bool(_CHECKPOINT_NAME.match(path.name))
        and (path / TRAINER_STATE_FILE).is_file()
    )


def _remove_replaced(replaced: dict[Path, int]) -> None:
    """Remove the replaced run's checkpoints and model files this run did not write again
    (``replaced``: each with the time it was written before the run)."""
    for path, mtime in replaced.items():
        if path.exists() and _written_at(path) == mtime:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _keep_after_failure(
    trainer: Any,
    config: TrainConfig,
    output_dir: Path,
    before: set[Path],
    metadata: dict[str, Any],
    replacing: bool,
) -> str:
    """After a failed or interrupted training: keep its log so far and its settings
    (:func:`_keep_partial_run`, on the main process, unless the run was to replace another);
    return what was kept, said for the user (a run stopped by SIGTERM exited without a word)."""
    done, total = trainer.state.global_step, config.max_steps
    steps = f"{done} of {total} step{'s' if total != 1 else ''}"
    if not trainer.is_world_process_zero():
        return f"{output_dir}: stopped after {steps}; the main process keeps the run's log"
    if replacing:
        own = "log and checkpoints are" if _saves_checkpoints(config) else "log is"
        return (
            f"{output_dir}: stopped after {steps}; the run it was to replace is left as it was "
            f"(this run's {own} not kept)"
        )
    try:
        written = _keep_partial_run(trainer, output_dir, before, metadata)
    except OSError as err:  # the run's own error is the one raised; this one is said
        return f"{output_dir}: stopped after {steps}; its log could not be kept: {err}"
    if not written:
        return f"{output_dir}: stopped after {steps}; nothing was kept"
    partial = f'{METADATA_FILE}, "completed": false'
    if done == 0:
        return (
            f"{output_dir}: stopped after {steps}; the run's settings ({partial}) are kept "
            f"beside what it wrote ({', '.join(written)})"
        )
    unsaved = " (the model it was saving may be incomplete)" if config.save_model else ""
    return (
        f"{output_dir}: stopped after {steps}; kept the steps logged ({TRAINER_STATE_FILE}) and "
        f"the run's settings ({partial}): `bayes-grpo ingest` reads it as a partial run{unsaved}"
    )


def _keep_partial_run(
    trainer: Any, output_dir: Path, before: set[Path], metadata: dict[str, Any]
) -> list[str]:
    """After a failed or interrupted training: its log so far, and its settings beside what it
    wrote. Returns the names of what the run wrote (none: no settings written either)."""
    if trainer.state.global_step > 0:
        _save_state(trainer, output_dir)
    written = sorted(p.name for p in set(output_dir.iterdir()) - before)
    if trainer.state.global_step > 0 and TRAINER_STATE_FILE not in written:
        written.append(TRAINER_STATE_FILE)  # written over a replaced run's
    if written:
        partial = {"completed": False, "steps_done": trainer.state.global_step}
        _write_metadata(output_dir, {**metadata, **partial})
    return written


def _save_state(trainer: Any, output_dir: Path) -> None:
    """``trainer.save_state()`` written atomically (transformers writes the file in place)."""
    with atomic_path(output_dir / TRAINER_STATE_FILE) as tmp:
        trainer.state.save_to_json(str(tmp))


def _write_metadata(output_dir: Path, metadata: dict[str, Any]) -> None:
    text = json.dumps(metadata, indent=2, default=str) + "\n"
    write_text_atomic(output_dir / METADATA_FILE, text)


def read_run_dir(run_dir: str | os.PathLike) -> tuple[Any, dict[str, Any]]:
    """Per-step metrics of a run directory as a DataFrame indexed by step, and its metadata.

    A minimal reader for this runner's own output (the general TRL loader lives in
    :mod:`bayes_grpo.runset`); columns keep TRL's names.
    """
    import pandas as pd

    run_dir = Path(run_dir)
    state_path, meta_path = run_dir / TRAINER_STATE_FILE, run_dir / METADATA_FILE
    for p in (state_path, meta_path):
        if not p.is_file():
            raise FileNotFoundError(f"{p}: missing (not a bayes-grpo train run directory)")
    state = json.loads(state_path.read_text(encoding="utf-8"))
    rows = [h for h in state.get("log_history", []) if "step" in h and "train_runtime" not in h]
    frame = pd.DataFrame(rows).groupby("step").last().sort_index()
    return frame, json.loads(meta_path.read_text(encoding="utf-8"))


__all__ = [
    "METADATA_FILE",
    "TRAINER_STATE_FILE",
    "TrainResult",
    "check_output_dir",
    "check_reward_arguments",
    "check_reward_funcs",
    "check_threads",
    "read_run_dir",
    "run_training",
]
