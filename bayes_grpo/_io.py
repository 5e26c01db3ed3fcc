"""Atomic file writing: every file bayes_grpo writes goes through here.

A file is written to a temporary sibling and moved into place with ``os.replace``,
so a crash never leaves a half-written file and an existing file is replaced whole.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success move it onto ``path``.

    Parameters
    ----------
    path
        Destination file.
    overwrite
        If False and ``path`` exists, raise ``FileExistsError`` before writing anything.
    """
    dest = Path(path)
    if not overwrite and dest.exists():
        raise FileExistsError(f"{dest}: already exists; refusing to overwrite it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        if tmp.exists():  # mkstemp makes 0600 files: give the result the usual umask mode
            os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, writer: Callable[[Path], None], *, overwrite: bool = True) -> Path:
    """Call ``writer(tmp_path)`` and move the result onto ``path`` atomically."""
    with atomic_path(path, overwrite=overwrite) as tmp:
        writer(tmp)
    return Path(path)


def write_text_atomic(path: str | os.PathLike, text: str, *, overwrite: bool = True) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), overwrite=overwrite)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, overwrite: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return write_atomic(path, lambda tmp: tmp.write_bytes(data), overwrite=overwrite)


#: First bytes of every HDF5 (netCDF-4) file.
HDF5_SIGNATURE: bytes = b"\x89HDF\r\n\x1a\n"


def is_hdf5_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` starts with the HDF5 signature (what a netCDF file of this package is)."""
    with open(path, "rb") as fh:
        return fh.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE
