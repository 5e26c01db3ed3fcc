"""TensorBoard event files, read with tensorboard's own ``EventAccumulator``.

Scalars (``train/reward``, ``train/kl`` ...) become records under their tag names; TF2-style
scalar tensors are read too. Text summaries that hold a JSON object are read as configs:
the Hugging Face ``TensorBoardCallback`` writes the training arguments (for TRL, the whole
``GRPOConfig``: ``num_generations``, ``learning_rate``, ``beta``, ``seed`` ...) as
``args/text_summary`` and the model config as ``model_config/text_summary``.

Each event file is one run. A resumed run that wrote into the same file repeats steps, which
ingestion resolves by keeping the last value; events are not purged on restart here
(``purge_orphaned_data=False``) so that the repeats can be counted and reported. A resumed run
that started a new file in the same folder, or in a new HF default ``runs/<date>_<host>`` folder
(same ``run_name``, later first step), is joined to its first file by
:func:`bayes_grpo.runset.ingest.load_runs`.

The Hugging Face ``TensorBoardCallback`` also calls ``SummaryWriter.add_hparams`` at the start of
training, which writes a second event file into a ``<time.time()>`` folder inside the run's
logging folder: the training arguments again (hparams plugin data) and no scalars. That file is
no run (:func:`is_hparams_companion`); discovery leaves it out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_grpo.runset.loaders._base import LogFormatError, RawRun, flatten

PREFIX = "events.out.tfevents"
#: Folder name ``add_hparams`` gives its event file by default: ``str(time.time())``.
_HPARAMS_FOLDER = re.compile(r"^\d+\.\d+$")


def is_event_file(path: Path) -> bool:
    return path.is_file() and path.name.startswith(PREFIX)


def is_hparams_companion(path: Path) -> bool:
    """Whether an event file is the one ``add_hparams`` wrote beside a run's own, not a run.

    That is: it lies in a ``<time.time()>`` folder (``1712345678.123``) whose parent holds an
    event file, and it holds hyperparameters (hparams plugin data) and no scalar summaries.
    """
    path = Path(path)
    if not (is_event_file(path) and _HPARAMS_FOLDER.match(path.parent.name)):
        return False
    if not any(is_event_file(p) for p in path.parent.parent.glob(PREFIX + "*")):
        return False
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    try:
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
    except Exception:  # an unreadable file is reported when it is read as a run
        return False
    try:
        has_hparams = bool(acc.PluginTagToContent("hparams"))
    except KeyError:  # no summary of the hparams plugin
        return False
    return has_hparams and not acc.Tags().get("scalars")


def _text_of(event) -> str | None:
    proto = event.tensor_proto
    if proto.string_val:
        value = proto.string_val[0]
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return None


def load_tensorboard(path: str | Path) -> list[RawRun]:
    """Read one run from a TensorBoard event file.

    Returns
    -------
    list[RawRun]
        One run; ``config`` holds the flattened training arguments found in a text summary and
        ``model_config`` the model config, when present.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    path = Path(path)
    try:
        acc = EventAccumulator(
            str(path), size_guidance={"scalars": 0, "tensors": 0}, purge_orphaned_data=False
        )
        acc.Reload()
    except Exception as exc:  # the reader raises many types on corrupt files
        raise LogFormatError(f"{path}: not a readable TensorBoard event file ({exc})") from exc
    tags = acc.Tags()
    steps: list[int] = []
    metrics: list[str] = []
    values: list[float] = []
    for tag in tags.get("scalars", []):
        for event in acc.Scalars(tag):
            steps.append(event.step)
            metrics.append(tag)
            values.append(float(event.value))
    config: dict[str, object] = {}
    model_config: dict[str, object] = {}
    config_source = ""
    notes: list[str] = []
    for tag in tags.get("tensors", []):
        events = acc.Tensors(tag)
        if not events:
            continue
        text = _text_of(events[-1])
        if text is None:
            arr = tensor_util.make_ndarray(events[0].tensor_proto)
            if arr.ndim == 0 and np.issubdtype(arr.dtype, np.number):
                for event in events:
                    steps.append(event.step)
                    metrics.append(tag)
                    values.append(float(tensor_util.make_ndarray(event.tensor_proto)))
            continue
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            notes.append(f"text summary {tag!r} is not JSON; not read as a config")
            continue
        if not isinstance(parsed, dict):
            continue
        stem = tag.split("/")[0]
        if stem == "model_config" or "model_type" in parsed or "architectures" in parsed:
            model_config.update(flatten(parsed))
        else:
            config.update(flatten(parsed))
            config_source = f"TensorBoard text summary {tag!r}"
    if not metrics:
        raise LogFormatError(f"{path}: no scalar summaries in the event file (tags: {tags})")
    records = pd.DataFrame({"step": steps, "metric": metrics, "value": values})
    hint = config.get("run_name")
    if not isinstance(hint, str) or not hint or hint == config.get("output_dir") or "/" in hint:
        hint = None
    run = RawRun(
        path=path,
        fmt="tensorboard",
        records=records,
        name_hint=hint,
        config=config,
        config_source=config_source,
        model_config=model_config,
        notes=notes,
    )
    return [run]
