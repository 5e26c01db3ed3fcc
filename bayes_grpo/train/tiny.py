"""A tiny offline causal LM and the toy "next digit" task (nothing is downloaded).

The model is a 2-layer GPT-2 of about 0.1M parameters with random initialisation, built from a
config; its tokenizer is a word-level tokenizer made with the ``tokenizers`` library. Both are
saved to a directory and loaded back by path, exactly like a Hub model, so the runner has one
code path for tiny and real models.

Task: the prompt ``"next d ="`` (``d`` a digit) asks for ``(d + 1) % 10``. The reward is 1 when
the completion's first token is the id of the right digit and its second token is the
end-of-sequence id, else 0; it is checked on token ids, not on decoded text. With random
initialisation the chance of a correct completion is about ``1 / V^2`` (``V`` the vocabulary
size), so the reward starts near 0, stays there while most groups have zero spread (a slow
start), rises, and saturates near 1: the three phases of the damped-oscillator law.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

#: Special tokens of the tiny tokenizer.
PAD, BOS, EOS, UNK = "[PAD]", "[BOS]", "[EOS]", "[UNK]"
DIGITS: tuple[str, ...] = tuple(str(d) for d in range(10))
#: Words of the prompt ``"next d ="``.
PROMPT_WORDS: tuple[str, ...] = ("next", "=")
#: Name written in the metadata for the task.
TASK_NAME: str = "next_digit"
#: Label of the tiny model in the run metadata (``model`` coordinate).
TINY_MODEL_LABEL: str = "tiny-gpt2"
#: Marker file identifying a directory written by :func:`build_tiny_model`.
TINY_MARKER: str = "bayes_grpo_tiny.json"


def tiny_vocabulary(n_filler: int = 22) -> list[str]:
    """Token strings of the tiny vocabulary: specials, prompt words, digits, ``n_filler`` fillers.

    Parameters
    ----------
    n_filler
        Number of distractor tokens ``w0, w1, ...`` (they make a correct random completion
        rarer: the vocabulary size is ``16 + n_filler``).
    """
    if n_filler < 0:
        raise ValueError(f"n_filler must be >= 0, got {n_filler}")
    return [PAD, BOS, EOS, UNK, *PROMPT_WORDS, *DIGITS, *(f"w{i}" for i in range(n_filler))]


def build_tiny_model(
    path: str | os.PathLike,
    *,
    seed: int = 0,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 2,
    n_filler: int = 22,
    n_positions: int = 16,
) -> Path:
    """Create a randomly initialised tiny GPT-2 and its tokenizer, saved in ``path``.

    Parameters
    ----------
    path
        Directory to write (``config.json``, weights, tokenizer files, marker file).
    seed
        Seed of the random initialisation (torch).
    n_layer, n_embd, n_head, n_positions
        GPT-2 shape; the defaults give about 0.1M parameters.
    n_filler
        Distractor tokens in the vocabulary (see :func:`tiny_vocabulary`).

    Returns
    -------
    pathlib.Path
        ``path``, loadable with ``AutoModelForCausalLM.from_pretrained`` and
        ``AutoTokenizer.from_pretrained``.
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = tiny_vocabulary(n_filler)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=UNK
    )
    fast.padding_side = "left"
    fast.save_pretrained(path)

    config = GPT2Config(
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        vocab_size=len(vocab),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=vocab.index(BOS),
        eos_token_id=vocab.index(EOS),
        pad_token_id=vocab.index(PAD),
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.bos_token_id = config.bos_token_id
    model.save_pretrained(path)
    n_params = sum(p.numel() for p in model.parameters())
    marker = {
        "label": TINY_MODEL_LABEL,
        "seed": seed,
        "n_params": n_params,
        "vocab_size": len(vocab),
        "n_layer": n_layer,
        "n_embd": n_embd,
        "n_head": n_head,
    }
    (path / TINY_MARKER).write_text(json.dumps(marker, indent=2), encoding="utf-8")
    return path


def next_digit_prompts(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` prompts ``"next d ="`` with their answers, digits drawn uniformly from ``seed``.

    Returns
    -------
    list of dict
        Rows ``{"prompt": "next 3 =", "answer": "4"}``.
    """
    if n < 1:
        raise ValueError(f"need at least one prompt, got n={n}")
    rng = np.random.default_rng(seed)
    digits = rng.integers(0, 10, size=n)
    return [{"prompt": f"next {d} =", "answer": str((d + 1) % 10)} for d in digits]


def make_next_digit_reward(tokenizer: Any):
    """The task's binary reward, checked on token ids.

    Parameters
    ----------
    tokenizer
        The tiny tokenizer (to look up the digit and end-of-sequence ids).

    Returns
    -------
    callable
        ``reward(prompts, completions, completion_ids, answer, **kw) -> list[float]`` in TRL's
        reward-function convention: 1.0 when ``completion_ids`` starts ``[id(answer), eos]``
        (what follows, e.g. padding, ignored), else 0.0. The tokens are read as generated: a
        pad token sampled before the end of sequence is a wrong token (dropping pad ids scored
        ``[pad, id(answer), eos]``, and nothing where the pad is the end of sequence).
    """
    digit_ids = {d: tokenizer.convert_tokens_to_ids(d) for d in DIGITS}
    eos_id = tokenizer.eos_token_id

    def next_digit_reward(prompts, completions, completion_ids, answer, **kwargs) -> list[float]:
        out = []
        for ids, ans in zip(completion_ids, answer):
            first = [int(i) for i in list(ids)[:2]]
            out.append(1.0 if first == [digit_ids[str(ans)], eos_id] else 0.0)
        return out

    return next_digit_reward


def is_tiny_model_dir(path: str | os.PathLike) -> bool:
    """True when ``path`` is a directory written by :func:`build_tiny_model`."""
    return (Path(path) / TINY_MARKER).is_file()


__all__ = [
    "TASK_NAME",
    "TINY_MODEL_LABEL",
    "build_tiny_model",
    "is_tiny_model_dir",
    "make_next_digit_reward",
    "next_digit_prompts",
    "tiny_vocabulary",
]
