"""TensorBoard event files, read with tensorboard's own ``EventAccumulator``.

Scalars (``train/reward``, ``train/kl`` ...) become records under their tag names; TF2-style
scalar tensors are read too. Text summaries that hold a JSON object are read as configs:
the Hugging Face ``TensorBoardCallback`` writes the training arguments (for TRL, the whole
``GRPOConfig``: ``num_generations``, ``learning_rate``, ``beta``, ``seed`` ...) as
``args/text_summary`` and the model config as ``model_config/text_summary``.

An event file cut short (a crash, a full disk, a live run still writing it) or damaged is read
up to that place, as TensorBoard reads it, and the run's notes say where it stopped
(:func:`damaged_records_note`); TensorBoard itself says nothing.

Each event file is one run. A resumed run that wrote into the same file repeats steps, which
ingestion resolves by keeping the last value; events are not purged on restart here
(``purge_orphaned_data=False``) so that the repeats can be counted and reported. A resumed run
that started a new file in the same folder, or in a new HF default ``runs/<date>_<host>`` folder
(same ``run_name``, later first step), is joined to its first file by
:func:`bayes_grpo.runset.ingest.load_runs`.

The Hugging Face ``TensorBoardCallback`` also calls ``SummaryWriter.add_hparams`` at the start of
training, which writes a second event file into a ``<time.time()>`` folder inside the run's
logging folder: the training arguments again (hparams plugin data) and no scalars. That file is
no run (:func:`is_hparams_companion`); discovery leaves it out. A custom loop's
``add_hparams`` writes the same file, and it may be the only place its settings are logged: a run
whose file carries no ``args`` text reads its hyperparameters from it (:func:`_companion_hparams`).

``SummaryWriter.add_scalars("reward", {"train": r, "eval": e}, step)`` writes each curve into an
event file of its own, in a subfolder ``reward_train/``, ``reward_eval/`` of the run's folder, under
the tag ``reward``. Those files are parts of the run whose event file lies in that folder (the one
of the same writer, by host and process in the file name), not runs:
:func:`add_scalars_parts` finds them, the run's file reads them, under ``train/reward``,
``eval/reward`` (record-type keys, as in JSONL logs) or ``<tag>/<key>``, and discovery leaves them
out (:func:`is_add_scalars_part`). Read as runs, an evaluation curve was a run's training reward.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_grpo.checks.base import counted
from bayes_grpo.runset.loaders._base import LogFormatError, RawRun, compression_suffix, flatten
from bayes_grpo.runset.loaders.tabular import EVAL_TYPES, TRAIN_TYPES

PREFIX = "events.out.tfevents"
#: Folder name ``add_hparams`` gives its event file by default: ``str(time.time())``.
_HPARAMS_FOLDER = re.compile(r"^\d+\.\d+$")


def is_event_file(path: Path) -> bool:
    """Whether a file is a TensorBoard event file, as it lies on disk: a compressed one
    (``events.out.tfevents.*.gz``) is not read (it is a rejected source saying how to read it,
    :func:`~bayes_grpo.runset.loaders.compressed_log_error`); read as one, it was rejected for
    "a damaged record header"."""
    return path.is_file() and path.name.startswith(PREFIX) and compression_suffix(path) is None


def is_hparams_companion(path: Path) -> bool:
    """Whether an event file is the one ``add_hparams`` wrote beside a run's own, not a run.

    That is: it lies in a ``<time.time()>`` folder (``1712345678.123``) whose parent holds an
    event file, and it holds hyperparameters (hparams plugin data) and no curve: no scalar,
    or one value per scalar, the ``metric_dict`` that ``add_hparams(hparams, metric_dict)``
    writes at step 0 (a custom loop's final metrics: read as a run of one point, it was
    rejected, and ``--strict`` stopped the ingest).
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
    return has_hparams and all(len(acc.Scalars(t)) <= 1 for t in acc.Tags().get("scalars", []))


def _hparams_of(path: Path) -> dict[str, object]:
    """The hyperparameters ``add_hparams`` wrote into one event file (``{name: value}``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        content = acc.PluginTagToContent("hparams")
    except Exception:  # no hparams data, or an unreadable file: nothing to read
        return {}
    values: dict[str, object] = {}
    for data in content.values():
        try:
            parsed = plugin_data_pb2.HParamsPluginData.FromString(data)
        except Exception:  # not the hparams plugin's message
            continue
        if parsed.HasField("session_start_info"):
            for name, value in parsed.session_start_info.hparams.items():
                kind = value.WhichOneof("kind")
                if kind is not None:
                    values[str(name)] = getattr(value, kind)
    return values


def _companion_hparams(path: Path) -> tuple[dict[str, object], str]:
    """Hyperparameters of the run whose event file is ``path`` from the ``add_hparams`` file its
    writer put in a ``<time>/`` subfolder, and where they came from (``({}, "")`` when none).

    A custom loop's ``writer.add_hparams({"lr": 1e-6, "group_size": 8, ...}, metrics)`` is the
    only place its hyperparameters are logged; the file was passed over as no run, unread.
    """
    folder = path.parent
    candidates = [
        p
        for sub in sorted(folder.iterdir())
        if sub.is_dir() and _HPARAMS_FOLDER.match(sub.name)
        for p in sorted(sub.glob(PREFIX + "*"))
        if is_event_file(p)
    ]
    own = [p for p in candidates if _writer_of(p) == _writer_of(path)]
    for companion in reversed(own or (candidates if len(candidates) == 1 else [])):
        values = _hparams_of(companion)
        if values:
            return values, f"TensorBoard add_hparams file {companion}"
    return {}, ""


def _writer_of(path: Path) -> str:
    """The writer an event file came from: ``events.out.tfevents.<time>.<host>.<pid>.<n>`` ->
    ``<host>.<pid>`` (``add_scalars`` files share it with their run's file)."""
    rest = path.name[len(PREFIX) :].lstrip(".").split(".", 1)[-1]
    return rest.rsplit(".", 1)[0]


def _scalar_tags(path: Path) -> list[str] | None:
    """The scalar tags of an event file (None when unreadable)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    try:
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
    except Exception:  # an unreadable file is reported when it is read as a run
        return None
    return list(acc.Tags().get("scalars", []))


def _add_scalars_key(path: Path) -> str | None:
    """The ``add_scalars`` key of an event file in a ``<tag>_<key>/`` folder (every scalar tag of
    the file with ``/`` as ``_`` followed by ``_<key>`` is the folder's name), else None."""
    folder = path.parent.name
    tags = _scalar_tags(path) if "_" in folder else None
    if not tags:
        return None
    keys = {folder[len(t.replace("/", "_")) + 1 :] for t in tags}
    if len(keys) != 1 or not all(folder.startswith(t.replace("/", "_") + "_") for t in tags):
        return None
    key = keys.pop()
    return key or None


def _main_event_file(part: Path) -> Path | None:
    """The event file in the folder above ``part`` that ``part``'s writer wrote (the only one
    there when none matches by writer), else None."""
    mains = sorted(p for p in part.parent.parent.glob(PREFIX + "*") if is_event_file(p))
    same = [p for p in mains if _writer_of(p) == _writer_of(part)]
    if len(same) == 1:
        return same[0]
    return mains[0] if len(mains) == 1 and not same else None


def add_scalars_owner(path: Path) -> Path | None:
    """The run's event file when ``path`` is one curve of its ``add_scalars``, else None."""
    path = Path(path)
    if not is_event_file(path):
        return None
    main = _main_event_file(path)
    return main if main is not None and _add_scalars_key(path) is not None else None


def add_scalars_parts(path: Path) -> list[tuple[Path, str]]:
    """The ``add_scalars`` event files of the run whose event file is ``path``, with their keys."""
    path = Path(path)
    parts = []
    for sub in sorted(p for p in path.parent.iterdir() if p.is_dir()):
        for part in sorted(sub.glob(PREFIX + "*")):
            key = _add_scalars_key(part) if is_event_file(part) else None
            if key is not None and _main_event_file(part) == path:
                parts.append((part, key))
    return parts


def _part_metric(tag: str, key: str) -> str:
    """The metric name of tag ``tag`` under ``add_scalars`` key ``key``."""
    if key.lower() in EVAL_TYPES:
        return f"eval/{tag}"
    if key.lower() in TRAIN_TYPES:
        return f"train/{tag}"
    return f"{tag}/{key}"


def _text_of(event) -> str | None:
    proto = event.tensor_proto
    if proto.string_val:
        value = proto.string_val[0]
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return None


def damaged_records_note(path: Path) -> str | None:
    """Where an event file stops being whole, or None when every record is whole.

    An event file is a sequence of TFRecords (an 8-byte length, its masked CRC32C, the data, the
    data's masked CRC32C). TensorBoard's reader stops at the first record that is cut short or
    fails a check, and says so only at debug level: a file cut by a crash or a full disk, or
    still being written by a live run, lost its tail without a word, and one damaged byte in
    the middle lost every value after it. This walks the records with the same checks to find
    that place (about a third of the reader's own time).
    """
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    data = memoryview(path.read_bytes())
    size = len(data)
    offset = n_records = 0
    while offset < size:
        if offset + 12 > size:
            problem = "ends in a partial record header"
            break
        (length,) = struct.unpack_from("<Q", data, offset)
        (header_crc,) = struct.unpack_from("<I", data, offset + 8)
        if masked_crc32c(bytes(data[offset : offset + 8])) != header_crc:
            problem = "has a damaged record header"
            break
        end = offset + 12 + length
        if end + 4 > size:
            problem = "ends in a partial record (a run still writing it, or a file cut short)"
            break
        (data_crc,) = struct.unpack_from("<I", data, end)
        if masked_crc32c(bytes(data[offset + 12 : end])) != data_crc:
            problem = "has a damaged record"
            break
        offset = end + 4
        n_records += 1
    else:
        return None
    return (
        f"event file {problem} at byte {offset} of {size}: the {counted(n_records, 'record')} before it "
        f"{'was' if n_records == 1 else 'were'} read, the last {counted(size - offset, 'byte')} "
        f"{'was' if size - offset == 1 else 'were'} not"
    )


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
    notes: list[str] = [note for note in [damaged_records_note(path)] if note]
    read_parts: list[str] = []
    for part, key in add_scalars_parts(path):
        try:
            part_acc = EventAccumulator(
                str(part), size_guidance={"scalars": 0, "tensors": 0}, purge_orphaned_data=False
            )
            part_acc.Reload()
        except Exception as exc:  # the reader raises many types on corrupt files
            notes.append(f"add_scalars curve {part} not read ({exc})")
            continue
        damaged = damaged_records_note(part)
        if damaged:
            notes.append(f"add_scalars curve {part}: {damaged}")
        names = []
        for tag in part_acc.Tags().get("scalars", []):
            names.append(_part_metric(tag, key))
            for event in part_acc.Scalars(tag):
                steps.append(event.step)
                metrics.append(names[-1])
                values.append(float(event.value))
        read_parts.append(f"{part.parent.name}/ as {', '.join(map(repr, names))}")
    if read_parts:
        notes.append(f"add_scalars curves read with this run: {'; '.join(read_parts)}")
    config: dict[str, object] = {}
    model_config: dict[str, object] = {}
    config_source = ""
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
    if not config:
        config, config_source = _companion_hparams(path)
    if not metrics:
        # the reader's whole tag table ({'images': [], 'audio': [], ..., 'graph': False}) said
        # nothing of a file it could not read at all, a damaged one (that the damage note says)
        held = {kind: names for kind, names in tags.items() if names}
        damaged = damaged_records_note(path)
        raise LogFormatError(
            f"{path}: no scalar summaries in the event file "
            f"({f'it holds {held}' if held else 'nothing read from it'})"
            + (f"; the {damaged}" if damaged else "")
        )
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
