"""Metric and hyperparameter names: from what the logs call them to the run set's canonical names.

Every loader hands its metrics over under their *source* names (``train/reward``,
``critic/score/mean``, ``rewards/accuracy_reward/mean``, ``eval_reward`` ...). This module
turns them into the run set's canonical variable names with one documented table
(:data:`METRIC_ALIASES`), keeps every metric it does not know under a sanitised version of
its own name (never dropped), and chooses which metric is *the* reward by the rule in
:func:`choose_reward`.

Canonical metric names (what downstream code may rely on)
---------------------------------------------------------
=========================  ==================================================================
canonical                  source names (first match wins when a log has several)
=========================  ==================================================================
``reward``                 ``reward`` (TRL), ``train/reward`` (wandb/TensorBoard), ``train_reward``,
                           ``critic/score/mean`` (verl), ``rollout/reward``, ``mean_reward``
``reward_std``             ``reward_std`` (TRL 0.1x: the mean over groups of each group's spread; TRL
                           1.x: the std over the whole batch, which ``diagnose`` tells apart and
                           does not derive a share from: ``degeneracy.whole_batch_size``). Never
                           ``critic/score/std`` (verl forks: ``torch.std`` over the whole batch, across
                           prompts), which keeps its own name
``frac_reward_zero_std``   ``frac_reward_zero_std`` (TRL)
``kl``                     ``kl`` (TRL, OpenRLHF), ``actor/kl_loss`` (verl), ``critic/kl`` and
                           ``actor/reward_kl_penalty`` (verl, KL in the reward), ``reference_kl``:
                           the KL to the *reference* model. Never the PPO-style KL between the
                           behaviour (old) policy and the current one within an update
                           (``approx_kl`` of Stable-Baselines3 / CleanRL, verl's ``actor/ppo_kl``,
                           OpenRLHF's ``ppo_kl``, TRL PPO's ``policy/approxkl_avg``): ~0
                           on-policy, it keeps its own name
``entropy``                ``entropy`` (TRL), ``actor/entropy`` (verl; ``actor/entropy_loss`` before
                           0.4), ``token_entropy``
``grad_norm``              ``grad_norm`` (TRL), ``actor/grad_norm`` (verl)
``clip_ratio``             ``clip_ratio/region_mean`` (TRL >= 0.20), ``clip_ratio`` (older TRL),
                           ``actor/pg_clipfrac`` (verl), ``ppo_clip_ratio`` (OpenRLHF),
                           ``clip_fraction``
``loss``                   ``loss`` (TRL), ``actor/pg_loss`` (verl), ``policy_loss`` (OpenRLHF)
``lr``                     ``learning_rate`` (the logged schedule; ``learning_rate`` itself is the
                           run coordinate holding the peak value), ``actor/lr`` (verl), ``lr``,
                           ``actor_lr`` (OpenRLHF)
``completion_length``      ``completions/mean_length`` (TRL), ``completion_length`` (older TRL),
                           ``response_length/mean`` (verl), ``response_length`` (OpenRLHF)
``epoch``                  ``epoch``
``eval_<name>``            any of the above (or any other metric) logged for evaluation:
                           ``eval_*`` (HF Trainer), ``eval/*``, ``val/*``, ``val-core/*``,
                           ``validation/*``, ``test/*`` (once: OpenRLHF's ``eval/eval_accuracy``
                           is ``eval_accuracy``)
=========================  ==================================================================

Names and prefixes are matched regardless of case (``Reward``, ``Train/Reward`` in a hand-made
or title-cased export). The training prefixes ``train/`` and ``training/`` are removed before
matching; ``train_<name>`` (PyTorch Lightning's ``train_kl``, ``train_entropy``) is ``<name>``'s
alias when ``<name>`` is one of the source names above (never the HF summary's ``train_runtime``,
``train_loss`` ...), and so is Lightning's per-step ``<name>_step`` (``train_reward_step``, beside
the per-epoch ``train_reward_epoch``, which keeps its name). Any other metric keeps its name with every character outside ``[A-Za-z0-9_]`` replaced by ``_``
(``clip_ratio/low_mean`` -> ``clip_ratio_low_mean``, ``rewards/format/mean`` ->
``rewards_format_mean``). A name that would collide with a dimension or run coordinate
(``step``, ``model``, ``beta`` ...) gets the suffix ``_logged``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bayes_grpo.runset.schema import REWARD_VAR, RUN_COORDS, RUN_DIM, STEP_DIM

#: Canonical name of the logged per-step learning rate (a schedule's values; the run's
#: ``learning_rate`` coordinate is one number).
LOGGED_LR_VAR: str = "lr"

#: Canonical metric name -> source names, in priority order (first present wins).
METRIC_ALIASES: dict[str, tuple[str, ...]] = {
    REWARD_VAR: ("reward", "train_reward", "critic/score/mean", "rollout/reward", "mean_reward"),
    # not 'critic/score/std' (verl forks' compute_data_metrics: torch.std(sequence_score), the
    # batch's spread across prompts, not within a group: advantage degeneracy derives its
    # zero-signal share from the within-group spread)
    "reward_std": ("reward_std",),
    "frac_reward_zero_std": ("frac_reward_zero_std",),
    # verl: 'actor/kl_loss' (the KL term of the loss), 'critic/kl' (< 0.4) or
    # 'actor/reward_kl_penalty' (the KL penalty in the reward, use_kl_in_reward); OpenRLHF's
    # 'kl' is the KL to the reference too (ppo_actor.py, from base_action_log_probs). Not
    # 'approx_kl' (stable_baselines3/ppo/ppo.py 'train/approx_kl', cleanrl/ppo.py
    # 'losses/approx_kl'), 'actor/ppo_kl' (verl core_algos.py), 'ppo_kl' (OpenRLHF) or
    # 'policy/approxkl_avg' (TRL PPO): the old-vs-current policy KL within an update.
    "kl": (
        "kl",
        "actor/kl_loss",
        "critic/kl",
        "actor/reward_kl_penalty",
        "reference_kl",
    ),
    # verl < 0.4: the mean token entropy as 'actor/entropy_loss' (its loss subtracts it)
    "entropy": ("entropy", "actor/entropy", "actor/entropy_loss", "token_entropy"),
    "grad_norm": ("grad_norm", "actor/grad_norm"),
    "clip_ratio": (
        "clip_ratio/region_mean",
        "clip_ratio",
        "actor/pg_clipfrac",
        "ppo_clip_ratio",  # OpenRLHF
        "clip_fraction",
    ),
    "loss": ("loss", "actor/pg_loss", "policy_loss"),  # last: OpenRLHF
    LOGGED_LR_VAR: ("learning_rate", "actor/lr", "lr", "actor_lr"),
    "completion_length": (
        "completions/mean_length",
        "completion_length",
        "response_length/mean",
        "response_length",  # OpenRLHF
    ),
    "epoch": ("epoch",),
}

#: Prefixes that mark a training metric (removed before matching).
TRAIN_PREFIXES: tuple[str, ...] = ("train/", "training/")
#: Prefixes that mark an evaluation metric (the canonical name becomes ``eval_<rest>``).
EVAL_PREFIXES: tuple[str, ...] = (
    "eval_",
    "eval/",
    "evaluation/",
    "val/",
    "val-core/",
    "val-aux/",
    "val_",
    "validation/",
    "test/",
)
#: Prefix of canonical evaluation variables.
EVAL_PREFIX: str = "eval_"

#: Names that end-of-run summaries use (HF Trainer's last log entry); not per-step metrics.
SUMMARY_KEYS: frozenset[str] = frozenset(
    {
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "total_flos",
        "train_loss",
    }
)
#: The summary names only the end-of-training summary writes. ``train_loss`` is also what custom
#: training loops call their per-step loss, so it is a summary value only beside one of these:
#: an entry (a step) with ``train_loss`` alone was dropped as a summary, its reward with it.
SUMMARY_MARKERS: frozenset[str] = SUMMARY_KEYS - {"train_loss"}


def is_summary_entry(keys: Iterable[str]) -> bool:
    """Whether one logged entry (its keys) is the end-of-training summary: it has a name of
    :data:`SUMMARY_MARKERS` (``train/train_runtime`` as a wandb export spells it too)."""
    return any(split_eval(str(k))[1] in SUMMARY_MARKERS for k in keys)


#: Values written with every log call rather than once per step: HF's ``epoch`` (repeated by its
#: evaluation and end-of-training logs) and wandb's bookkeeping columns. An evaluation logged at a
#: training step repeats them at that step, which is no repeated step (as a resumed run gives).
PER_LOG_CALL_KEYS: frozenset[str] = frozenset({"epoch", "_step", "_runtime", "_timestamp"})

#: Suffix given to a metric whose name collides with a dimension or run coordinate.
COLLISION_SUFFIX: str = "_logged"

_RESERVED = frozenset(RUN_COORDS) | {RUN_DIM, STEP_DIM}
_UNSAFE = re.compile(r"[^0-9A-Za-z_]+")
_SOURCE_TO_CANONICAL: dict[str, str] = {
    src: canon for canon, sources in METRIC_ALIASES.items() for src in sources
}
_PRIORITY: dict[str, int] = {
    src: i for sources in METRIC_ALIASES.values() for i, src in enumerate(sources)
}

# Per-reward-function means logged by TRL (``rewards/<func>/mean``; older TRL: ``rewards/<func>``).
_REWARD_FUNC = re.compile(r"^rewards/(?P<func>[^/]+)(?:/mean)?$", re.I)
_REWARD_FUNC_STD = re.compile(r"^rewards/[^/]+/std$", re.I)
# Accuracy-like training metrics (third step of the reward rule), in priority order.
_ACCURACY_LIKE: tuple[re.Pattern[str], ...] = (
    re.compile(r"(^|[/_])(score|scores)([/_]mean)?$", re.I),
    re.compile(
        r"(^|[/_])(accuracy|acc|answer_accuracy|success_rate|pass_rate|solve_rate)([/_]mean)?$",
        re.I,
    ),
    re.compile(r"(^|[/_])(rewards?)([/_]mean)?$", re.I),
)


def is_reward_like(name: str) -> bool:
    """Whether a metric name is accuracy-like (``score``, ``acc``, ``success_rate`` ...: step 4
    of :func:`choose_reward`), so that a log holding only such a metric still reads as a log."""
    bare = split_eval(name)[1]
    return not bare.endswith(("/std", "_std")) and any(p.search(bare) for p in _ACCURACY_LIKE)


def sanitise(name: str) -> str:
    """A netCDF-safe variable name: characters outside ``[A-Za-z0-9_]`` become ``_``.

    >>> sanitise("clip_ratio/low_mean")
    'clip_ratio_low_mean'
    """
    out = _UNSAFE.sub("_", str(name)).strip("_")
    if not out:
        out = "metric"
    if out[0].isdigit():
        out = f"m_{out}"
    return out


def split_eval(source: str) -> tuple[bool, str]:
    """``(is_eval, rest)``: whether ``source`` is an evaluation metric, and its name without the prefix."""
    low = source.lower()
    for prefix in EVAL_PREFIXES:
        if low.startswith(prefix) and len(source) > len(prefix):
            rest = source[len(prefix) :]
            # one evaluation, one prefix: OpenRLHF logs its 'eval_accuracy' as
            # 'eval/eval_accuracy', which became 'eval_eval_accuracy'
            again, inner = split_eval(rest)
            return True, inner if again else rest
    for prefix in TRAIN_PREFIXES:
        if low.startswith(prefix) and len(source) > len(prefix):
            return False, source[len(prefix) :]
    return False, source


#: The training prefix of an underscore-joined name (PyTorch Lightning's ``self.log("train_kl")``,
#: Keras-style histories), the counterpart of the evaluation prefix ``val_``.
TRAIN_UNDERSCORE_PREFIX: str = "train_"


#: Suffix PyTorch Lightning gives a metric logged both per step and per epoch
#: (``self.log("train_reward", on_step=True, on_epoch=True)`` writes ``train_reward_step`` and
#: ``train_reward_epoch``; ``_Metadata.forked_name``): the ``_step`` one is the per-step curve.
LIGHTNING_STEP_SUFFIX: str = "_step"


def _known_lower(low: str) -> str | None:
    """The canonical name of a lower-case source name, also as ``train_<name>``."""
    found = _SOURCE_TO_CANONICAL.get(low)
    if found is None and low.startswith(TRAIN_UNDERSCORE_PREFIX) and low not in SUMMARY_KEYS:
        found = _SOURCE_TO_CANONICAL.get(low[len(TRAIN_UNDERSCORE_PREFIX) :])
    return found


def _alias_of(name: str) -> str | None:
    """The canonical name ``name`` is a known source name of (exact, then regardless of case).

    ``train_<name>`` is ``<name>``'s when ``<name>`` is a known source name (``train_kl``,
    ``train_entropy``): only then, so the HF Trainer's summary names (``train_runtime``,
    ``train_loss``, :data:`SUMMARY_KEYS`) and other ``train_*`` metrics keep their own names.
    So is Lightning's per-step ``<name>_step`` (:data:`LIGHTNING_STEP_SUFFIX`: ``train_reward_step``,
    ``train_kl_step``); its per-epoch ``<name>_epoch`` keeps its own name.
    """
    found = _SOURCE_TO_CANONICAL.get(name) or _known_lower(name.lower())
    low = name.lower()
    if found is None and low.endswith(LIGHTNING_STEP_SUFFIX):
        found = _known_lower(low[: -len(LIGHTNING_STEP_SUFFIX)])
    return found


def _priority_of(name: str, default: int = 99) -> int:
    return _PRIORITY.get(name, _PRIORITY.get(name.lower(), default))


def canonical_name(source: str) -> str:
    """The canonical run-set variable name of one source metric name (see the module table).

    >>> canonical_name("train/reward"), canonical_name("eval_reward"), canonical_name("critic/score/mean")
    ('reward', 'eval_reward', 'reward')
    >>> canonical_name("train/rewards/format_reward/mean")
    'rewards_format_reward_mean'
    """
    is_eval, rest = split_eval(str(source))
    base = _alias_of(rest) or sanitise(rest)
    if is_eval:
        return EVAL_PREFIX + base
    if base in _RESERVED:
        base += COLLISION_SUFFIX
    return base


@dataclass(frozen=True)
class NameMapping:
    """How one run's source metric names map to run-set variables.

    Attributes
    ----------
    columns
        ``{source name: canonical variable}`` for every numeric source metric.
    reward_source
        The source name chosen as the reward.
    reward_rule
        Which step of the rule chose it (``"reward_key"``, ``"reward"``, ``"single rewards/*/mean"``,
        ``"accuracy-like"``, ``"evaluation fallback"``).
    notes
        Human-readable notes (renamings forced by collisions, a fallback to an evaluation metric).
    """

    columns: dict[str, str]
    reward_source: str
    reward_rule: str
    notes: tuple[str, ...] = ()


class NoRewardError(ValueError):
    """No metric of a run can serve as the reward (the message lists the metrics found)."""


#: How a message asks for the reward metric: the option, and the argument of ``load_runs``.
REWARD_KEY_ADVICE = "choose one with --reward-key (Python: reward_key=...)"


def choose_reward(
    sources: Sequence[str], reward_key: str | None = None
) -> tuple[str, str, list[str]]:
    """Choose which source metric is the reward curve.

    The rule, in order:

    1. ``reward_key`` if given: a source name, or a name of the same canonical name
       (``train/reward`` and ``reward`` both select TRL's ``reward`` and a wandb export's
       ``train/reward``; ``rewards/acc/mean`` selects ``train/rewards/acc/mean`` too).
    2. The total reward under a known name (``reward``, ``train/reward``, ``train_reward``,
       ``critic/score/mean`` ...; :data:`METRIC_ALIASES` ``["reward"]``, first present wins).
    3. The single per-function reward ``rewards/<func>/mean`` (or ``rewards/<func>``), when the log
       has exactly one reward function.
    4. An accuracy-like training metric (``score``, ``accuracy``, ``acc``, ``success_rate``,
       ``pass_rate`` ... then other names ending in ``reward``), when exactly one matches at the
       highest-priority pattern that matches at all.
    5. An evaluation reward or accuracy (``eval_reward``, ``eval/accuracy`` ...) chosen by steps 2-4
       among evaluation metrics, with a note saying so: a curve of held-out accuracy follows the
       same law but is not the training reward.

    Parameters
    ----------
    sources
        Source metric names of one run (numeric ones).
    reward_key
        Optional override.

    Returns
    -------
    (source, rule, notes)

    Raises
    ------
    NoRewardError
        When nothing qualifies, or when the choice is ambiguous; the message lists the metrics found.
    """
    sources = [str(s) for s in sources]
    found = f"metrics found: {sorted(sources)}"
    if reward_key is not None:
        if reward_key in sources:
            return reward_key, "reward_key", []
        # the key's own canonical name too: TRL's trainer_state logs 'rewards/acc/mean' where its
        # wandb or TensorBoard export logs 'train/rewards/acc/mean', and either spelling of the
        # key selects it in both (one key for every run of a mixed ingest)
        wanted = {reward_key, canonical_name(reward_key)}
        matches = [s for s in sources if canonical_name(s) in wanted]
        if len(matches) == 1:
            return matches[0], "reward_key", []
        if len(matches) > 1:
            raise NoRewardError(
                f"reward key {reward_key!r} matches several metrics {matches}; give the exact one"
            )
        raise NoRewardError(f"reward key {reward_key!r} not in the log; {found}")

    train = [s for s in sources if not split_eval(s)[0]]
    evals = [s for s in sources if split_eval(s)[0]]
    pick = _choose_among(train, strip=lambda s: split_eval(s)[1])
    if pick is not None:
        return pick[0], pick[1], []
    pick = _choose_among(evals, strip=lambda s: split_eval(s)[1])
    if pick is not None:
        note = (
            f"no training reward in the log; using the evaluation metric {pick[0]!r} as the reward "
            "curve (held-out accuracy, not the training reward)"
        )
        return pick[0], f"evaluation fallback ({pick[1]})", [note]
    raise NoRewardError(
        f"no reward metric (training or evaluation); {found}; {REWARD_KEY_ADVICE}"
    )


def _choose_among(sources: Sequence[str], strip) -> tuple[str, str] | None:
    """Steps 2-4 of :func:`choose_reward` on one pool of names (raises when ambiguous)."""
    bare = {s: strip(s) for s in sources}
    # 2. the total reward under a known name
    totals = [s for s, b in bare.items() if _alias_of(b) == REWARD_VAR]
    if totals:
        return min(totals, key=lambda s: (_priority_of(bare[s]), s != bare[s])), "reward"
    # 3. the single per-function reward
    funcs = [s for s, b in bare.items() if _REWARD_FUNC.match(b) and not _REWARD_FUNC_STD.match(b)]
    if len(funcs) == 1:
        return funcs[0], "single rewards/*/mean"
    if len(funcs) > 1:
        raise NoRewardError(
            f"several reward functions {sorted(funcs)} and no total reward; {REWARD_KEY_ADVICE}"
        )
    # 4. accuracy-like names
    for pattern in _ACCURACY_LIKE:
        hits = [
            s for s, b in bare.items() if pattern.search(b) and not b.endswith(("/std", "_std"))
        ]
        if len(hits) == 1:
            return hits[0], "accuracy-like"
        if len(hits) > 1:
            raise NoRewardError(
                f"several reward-like metrics {sorted(hits)}; {REWARD_KEY_ADVICE}"
            )
    return None


def map_names(sources: Iterable[str], reward_key: str | None = None) -> NameMapping:
    """Map one run's source metric names to run-set variables and choose its reward.

    Two source names that land on the same canonical name (``reward`` and ``train/reward`` in one
    log) are both kept: the higher-priority one under the canonical name, the other under its
    sanitised own name, with a note.
    """
    sources = list(dict.fromkeys(str(s) for s in sources))
    reward_source, rule, notes = choose_reward(sources, reward_key)
    notes = list(notes)
    columns: dict[str, str] = {reward_source: REWARD_VAR}
    #: variable -> the source name it holds (the note named the variable for the source: "'x'
    #: is 'x'", where 'completions/mean_length' held 'completion_length')
    taken = {REWARD_VAR: reward_source}

    def rank(s: str) -> tuple[int, int]:
        return (_priority_of(split_eval(s)[1]), sources.index(s))

    for src in sorted((s for s in sources if s != reward_source), key=rank):
        name = canonical_name(src)
        if name in taken:
            alt = sanitise(src)
            if alt in _RESERVED:
                alt += COLLISION_SUFFIX
            i = 2
            while alt in taken:
                alt = f"{sanitise(src)}_{i}"
                i += 1
            notes.append(f"metric {src!r} kept as {alt!r} ({name!r} is {taken[name]!r})")
            name = alt
        columns[src] = name
        taken[name] = src
    ordered = {s: columns[s] for s in sources}
    return NameMapping(ordered, reward_source, rule, tuple(notes))


# ---------------------------------------------------------------------------------------------
# Hyperparameters: source keys in configs (TRL GRPOConfig, HF TrainingArguments, verl, custom
# scripts, the project's runner metadata) -> run coordinates.
# ---------------------------------------------------------------------------------------------

#: Run coordinate -> config keys that carry it (matched on the last dotted component of a
#: flattened config, case-insensitively), in priority order.
HYPERPARAMETER_ALIASES: dict[str, tuple[str, ...]] = {
    "model": (
        "model",
        "model_name_or_path",
        "model_name",
        "base_model",
        "model_id",
        "model_path",
        "model.path",  # verl: actor_rollout_ref.model.path
        "pretrain",  # OpenRLHF: --pretrain
        "_name_or_path",
    ),
    "model_size": ("model_size", "num_parameters", "n_params", "num_params"),
    "group_size": (
        "group_size",
        "num_generations",
        "n_samples_per_prompt",
        "num_samples_per_prompt",
        "rollout.n",
    ),
    "learning_rate": ("learning_rate", "lr", "optim.lr", "actor_learning_rate"),  # last: OpenRLHF
    "momentum": ("momentum",),
    "momentum_convention": ("momentum_convention",),
    "k_ref": ("k_ref", "off_policy_lag", "optimizer_updates_per_rollout_batch"),
    "beta": (
        "beta",
        "kl_coef",
        "kl_beta",
        "init_kl_coef",
        "kl_loss_coef",
        "kl_penalty_coef",
        # verl's logged weight of the KL penalty in the reward: 'critic/kl_coeff' (< 0.4),
        # 'actor/reward_kl_penalty_coeff'
        "kl_coeff",
        "reward_kl_penalty_coeff",
    ),
    "seed": ("seed",),
    "completions_per_step": ("completions_per_step",),
}


#: Sections of a flattened config whose model-like keys name another model than the trained
#: policy: a tokenizer or processor (``tokenizer._name_or_path``, ``processing_class.
#: _name_or_path``), verl's ``reward_model.model.path`` and ``critic.model.path``, a reference
#: or teacher model. A ``model`` alias found under one of them is not the run's model.
NOT_THE_POLICY_SECTION = re.compile(
    r"(^|[./])(tokenizer|processor|processing_class|image_processor|feature_extractor"
    r"|reward_model|critic|ref|ref_model|reference_model|teacher|teacher_model)[^./]*[./]"
)


def hyperparameter_key(coord: str, config: Mapping[str, object]) -> str | None:
    """The key of ``config`` (flattened, dotted) that carries run coordinate ``coord``, if any.

    A key's last component may also follow a ``/``: the Hugging Face wandb callback adds
    ``model/num_parameters`` to the run's config (``wandb/run-*/files/config.yaml``). The
    ``model`` is never read under a tokenizer's, processor's, reward model's, critic's,
    reference's or teacher's section (:data:`NOT_THE_POLICY_SECTION`).
    """
    lowered = {str(k).lower(): str(k) for k in config}
    for alias in HYPERPARAMETER_ALIASES.get(coord, ()):
        if alias in lowered:
            return lowered[alias]
        for low, key in lowered.items():
            if low.endswith(("." + alias, "/" + alias)):
                section = low[: -len(alias)]
                if coord == "model" and NOT_THE_POLICY_SECTION.search(section):
                    continue
                return key
    return None


def mapping_table() -> list[dict[str, str]]:
    """The metric mapping as rows ``{"canonical", "sources"}`` (for docs and ``--help``)."""
    rows = [{"canonical": c, "sources": ", ".join(s)} for c, s in METRIC_ALIASES.items()]
    rows.append({"canonical": "eval_<name>", "sources": ", ".join(p + "*" for p in EVAL_PREFIXES)})
    return rows


__all__ = [
    "is_reward_like",
    "METRIC_ALIASES",
    "HYPERPARAMETER_ALIASES",
    "EVAL_PREFIXES",
    "TRAIN_PREFIXES",
    "EVAL_PREFIX",
    "SUMMARY_KEYS",
    "SUMMARY_MARKERS",
    "is_summary_entry",
    "PER_LOG_CALL_KEYS",
    "NameMapping",
    "NoRewardError",
    "sanitise",
    "split_eval",
    "canonical_name",
    "choose_reward",
    "map_names",
    "hyperparameter_key",
    "NOT_THE_POLICY_SECTION",
    "mapping_table",
]
