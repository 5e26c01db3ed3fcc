"""Prompt datasets and binary verifiable rewards for the runner.

- ``next_digit``: the offline toy task (:mod:`bayes_grpo.train.tiny`).
- ``gsm8k``: a GSM8K-style dataset (columns ``question`` and ``answer``, the gold answer after
  ``####``) from the Hub or a local file/directory, with a numeric answer checker.
- ``custom``: any dataset with a ``prompt`` column; the caller supplies reward functions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: Instruction appended to each GSM8K question.
GSM8K_INSTRUCTION: str = (
    "Solve the problem step by step, then give the final answer as '#### <number>'."
)

#: Dataset files by suffix, with the ``datasets`` builder that reads them (one split: "train").
DATASET_FILE_FORMATS: dict[str, str] = {
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}

#: A number as written in an answer: commas only as thousands separators (``1,234``, not the
#: list ``1,2,3``, which read as 123 and was rewarded against a gold 123), a decimal part, ``.5``.
_NUMBER_TEXT = r"-?(?:\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_NUMBER = re.compile(_NUMBER_TEXT)
#: The number after ``####``, also written ``#### $18``, ``#### **42**`` or ``#### +7`` (without
#: them the checker read the last number of the text after it instead).
_FINAL = re.compile(rf"####[\s*$+]*({_NUMBER_TEXT})")


def _to_number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def extract_final_number(text: str) -> float | None:
    """The answer a GSM8K-style completion gives: the number after ``####``, else the last number.

    Returns None when the text holds no number.
    """
    final = _FINAL.findall(text)
    if final:
        return _to_number(final[-1])
    numbers = _NUMBER.findall(text)
    return _to_number(numbers[-1]) if numbers else None


def gold_answer(answer: str) -> float:
    """The gold number of a GSM8K ``answer`` field (text after ``####``, or the field itself)."""
    value = extract_final_number(str(answer))
    if value is None:
        raise ValueError(f"GSM8K answer has no number: {answer!r}")
    return value


def _completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def gsm8k_reward(
    prompts: list[Any], completions: list[Any], answer: list[str], **kwargs: Any
) -> list[float]:
    """Binary reward: 1.0 when the completion's final number equals the gold answer (to 1e-6)."""
    out = []
    for completion, gold in zip(completions, answer):
        got = extract_final_number(_completion_text(completion))
        want = gold_answer(gold)
        out.append(
            1.0 if got is not None and abs(got - want) <= 1e-6 * max(1.0, abs(want)) else 0.0
        )
    return out


def error_reason(exc: BaseException) -> str:
    """The first line of a library's error (its class name when it says nothing), to be said
    after our own words: a model or dataset that cannot be loaded. A first line that ends in a
    colon introduces what follows (transformers' "Couldn't instantiate the backend tokenizer from
    one of:" and its list): the lines are then said together, on one line."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if lines[0].endswith(":") and len(lines) > 1:
        return " ".join(lines)
    return lines[0].rstrip(": ")


def load_prompt_dataset(
    source: str,
    *,
    config: str | None = None,
    split: str = "train",
) -> Any:
    """Load a dataset from the Hub (name) or disk (a ``.json/.jsonl/.csv/.parquet`` file or a folder).

    Raises
    ------
    FileNotFoundError
        A path-like source that does not exist; one ``datasets`` cannot find or reach (not on
        the Hub, no connection, a folder without data files), naming ``source``.
    ValueError
        One ``datasets`` cannot read (a malformed file, an unknown split or configuration),
        naming ``source`` and what is wrong.
    """
    import datasets

    path = Path(source).expanduser()
    suffix = path.suffix.lower()
    if suffix in DATASET_FILE_FORMATS:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: dataset file not found")
        check_dataset_file(source, split, config)
        return _loaded(
            source,
            datasets.load_dataset,
            DATASET_FILE_FORMATS[suffix],
            data_files=str(path),
            split="train",
        )
    if path.is_dir():
        if (path / "dataset_info.json").is_file() or (path / "state.json").is_file():
            if config is not None:
                raise ValueError(
                    f"dataset_config (--dataset-config) {config!r}: {source} is a dataset saved "
                    "by save_to_disk, which has no configurations; leave it unset"
                )
            ds = _loaded(source, datasets.load_from_disk, str(path))
            if isinstance(ds, datasets.DatasetDict):
                return _loaded(source, ds.__getitem__, split)
            return ds
        return _loaded(source, datasets.load_dataset, str(path), config, split=split)
    if source.startswith((".", "/", "~")) or source.count("/") > 1:
        raise FileNotFoundError(f"{source}: dataset path not found")
    return _loaded(source, datasets.load_dataset, source, config, split=split)


def _loaded(source: str, load: Any, *args: Any, **kwargs: Any) -> Any:
    """``load(*args, **kwargs)`` of ``datasets``, its errors said as :func:`load_prompt_dataset`'s."""
    from datasets.exceptions import DatasetGenerationError

    try:
        return load(*args, **kwargs)
    except (OSError, ValueError, DatasetGenerationError) as exc:
        # a file datasets cannot parse: "An error occurred while generating the dataset", the
        # parser's words (the line, the problem) in the error under it
        said = exc.__cause__ if isinstance(exc, DatasetGenerationError) and exc.__cause__ else exc
        kind = FileNotFoundError if isinstance(exc, OSError) else ValueError
        raise kind(f"{source}: cannot load the dataset: {error_reason(said)}") from exc


def check_dataset_file(source: str, split: str, config: str | None = None) -> None:
    """Raise ``ValueError`` when a split other than "train", or a configuration, is asked of a
    dataset file, or when ``source`` is a file of no format in :data:`DATASET_FILE_FORMATS`.

    A ``.json/.jsonl/.csv/.parquet`` file is one split, which ``datasets`` calls "train", of no
    named configuration: the run would train on the whole file while its metadata recorded the
    split or configuration asked for.
    """
    path = Path(source).expanduser()
    if path.suffix.lower() not in DATASET_FILE_FORMATS:
        if path.is_file():
            # loaded as a folder or a Hub name, it was "dataset path not found", after the model
            raise ValueError(
                f"dataset (--dataset) {source}: a file of no dataset format read here "
                f"({', '.join(DATASET_FILE_FORMATS)}); give such a file, a dataset folder or a "
                "Hub dataset name"
            )
        return
    if config is not None:
        raise ValueError(
            f"dataset_config (--dataset-config) {config!r}: {source} is one file, which has no "
            "configurations; leave it unset (a configuration is a Hub dataset's, e.g. 'main' of "
            "openai/gsm8k, or a dataset folder's)"
        )
    if split != "train":
        raise ValueError(
            f"dataset_split (--dataset-split) {split!r}: {source} is one file, one split; give "
            "the file of that split, or a Hub dataset or dataset folder with splits"
        )


def check_gold_answers(dataset: Any, source: str) -> None:
    """Raise ``ValueError`` naming ``source`` and the rows whose ``answer`` holds no number.

    :func:`gsm8k_reward` reads the gold number of every completion's row; a row without one
    would otherwise fail the training when it is first drawn, hours in on a large set.
    """
    bad = [
        i for i, answer in enumerate(dataset["answer"]) if extract_final_number(str(answer)) is None
    ]
    if bad:
        from bayes_grpo.checks.base import counted  # numpy and pandas: only for this message

        first = dataset[bad[0]]["answer"]
        raise ValueError(
            f"{source}: {counted(len(bad), 'row')} {'has' if len(bad) == 1 else 'have'} an 'answer' "
            "with no number for the gsm8k reward "
            f"(first: row {bad[0]}, {first!r}); give the gold answer as '#### <number>'"
        )


def gsm8k_prompts(dataset: Any, *, chat: bool) -> Any:
    """Map a GSM8K-style dataset to TRL's ``prompt`` column (plus ``answer`` for the reward).

    Parameters
    ----------
    dataset
        ``datasets.Dataset`` with ``question`` (or ``prompt``) and ``answer`` columns.
    chat
        Conversational prompts (``[{"role": "user", ...}]``) for models with a chat template.
    """
    cols = set(dataset.column_names)
    qcol = "question" if "question" in cols else "prompt" if "prompt" in cols else None
    if qcol is None or "answer" not in cols:
        raise ValueError(
            f"a GSM8K-style dataset needs 'question' (or 'prompt') and 'answer' columns; it has {sorted(cols)}"
        )

    def to_prompt(row: dict[str, Any]) -> dict[str, Any]:
        text = f"{row[qcol]}\n{GSM8K_INSTRUCTION}"
        prompt = [{"role": "user", "content": text}] if chat else text + "\n"
        return {"prompt": prompt, "answer": str(row["answer"])}

    drop = [c for c in dataset.column_names if c not in ("answer",)]
    return dataset.map(to_prompt, remove_columns=drop)


__all__ = [
    "DATASET_FILE_FORMATS",
    "GSM8K_INSTRUCTION",
    "check_dataset_file",
    "check_gold_answers",
    "error_reason",
    "extract_final_number",
    "gold_answer",
    "gsm8k_prompts",
    "gsm8k_reward",
    "load_prompt_dataset",
]
