"""``training_args.bin``: the Trainer's arguments, read without running the pickle's code.

The Hugging Face Trainer saves its arguments (``TrainingArguments``, TRL's ``GRPOConfig``) with
``torch.save(args, "training_args.bin")`` in the output folder and every checkpoint; it is often
the only place a run's group size, learning rate, KL weight, ``K_ref`` settings and seed are
written. Unpickling it normally imports and runs whatever the pickle names, which a log reader
must never do. Here every class the pickle names is replaced by an inert stand-in
(:class:`Standin`: it records the arguments and state it is given and runs nothing), the
recommended way of restricting an unpickler (Python's ``pickle`` documentation, "Restricting
Globals"); tensors (persistent ids) become None. What comes back is the arguments object's
state: a dict of plain values, enums as their values.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

from bayes_grpo.runset.loaders._base import READ_ERRORS, open_bytes, unreadable


class Standin:
    """Stands for any class or function a pickle names: keeps its arguments and state."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _InertUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        # every global is a fresh inert class named after it: nothing is imported or called
        return type(name, (Standin,), {"__module__": f"standin.{module}"})

    def persistent_load(self, pid: Any) -> None:
        return None  # a tensor's storage: not needed for the arguments


def plain(value: Any) -> Any:
    """``value`` with stand-ins made plain: an enum member (a class called with one plain
    value) is that value, another object its state (a dict) or its class name."""
    if isinstance(value, Standin):
        if value.state is None and len(value.args) == 1 and not isinstance(value.args[0], Standin):
            return plain(value.args[0])
        if isinstance(value.state, dict):
            return plain(value.state)
        return type(value).__name__
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def read_pickled_args(path: str | Path) -> dict[str, Any]:
    """The state of the arguments object ``torch.save`` wrote to ``path`` (a zip holding
    ``*/data.pkl``; compressed too, ``training_args.bin.gz``), as plain values.

    Raises
    ------
    ValueError
        A file that cannot be read (a compressed copy corrupt or cut short), not a
        ``torch.save`` zip file, no ``data.pkl`` in it, a pickle that cannot be read, or
        one that holds no object with a state of named values.
    """
    path = Path(path)
    try:  # a compressed copy (training_args.bin.gz) decompressed whole: a zip is read by seeking
        with open_bytes(path) as fh:
            content = io.BytesIO(fh.read())
    except READ_ERRORS as exc:
        raise ValueError(str(unreadable(path, exc)).removeprefix(f"{path}: ")) from exc
    try:
        with zipfile.ZipFile(content) as archive:
            names = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if not names:
                raise ValueError("no data.pkl in it (not a torch.save file)")
            data = archive.read(names[0])
    except zipfile.BadZipFile as exc:
        raise ValueError("not a torch.save zip file (an older torch's format?)") from exc
    try:
        obj = _InertUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # any malformed pickle: its own exception types vary
        raise ValueError(f"its pickle could not be read ({type(exc).__name__}: {exc})") from exc
    state = plain(obj)
    if not isinstance(state, dict) or not state:
        raise ValueError("it holds no arguments object (no state of named values)")
    return state


__all__ = ["Standin", "plain", "read_pickled_args"]
