"""Atomic file writing: every file bayes_grpo writes goes through here.

A file is written to a temporary sibling and moved into place with ``os.replace``,
so a crash never leaves a half-written file and an existing file is replaced whole. A
writer told not to overwrite moves it into place with a hard link instead, which fails
when the path exists: a file that appeared there while the result was being computed is
refused, not replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: File extensions of the netCDF files bayes_grpo writes and reads (run sets, fits, predictions).
NETCDF_SUFFIXES: tuple[str, ...] = (".nc", ".nc4", ".netcdf")

#: File extensions of the HTML pages bayes_grpo writes (reports).
HTML_SUFFIXES: tuple[str, ...] = (".html", ".htm")


def check_suffix(path: object, option: str, suffixes: tuple[str, ...], what: str) -> None:
    """``ValueError`` naming ``option`` (a CLI flag or a Python argument) when ``path``'s
    extension is none of ``suffixes``: the one check of the CLI's outputs and the Python writers
    (``report_from_posterior``, ``write_report``, and of netCDF ``save_runset``,
    ``GRPODynamicsModel.save``, ``save_prediction``), whose ``"r.txt"`` got an HTML page (and
    ``"runs.csv"`` netCDF bytes) while ``bayes-grpo report -o r.txt`` was refused."""
    ext = Path(str(path)).suffix.lower()
    if ext not in suffixes:
        raise ValueError(
            f"{path}: {option} writes {what}; name the file {' or '.join(suffixes)} "
            f"(got {ext or 'no extension'})"
        )


def refuse_non_regular_file(path: str | os.PathLike) -> None:
    """Raise ``FileExistsError`` when ``path`` exists and is no regular file (a folder, a device,
    a pipe), which no writer replaces, ``overwrite`` or not; for writers that check their output
    before long work (``report_from_posterior``), as :func:`atomic_path` does before writing."""
    dest = Path(path)
    if dest.exists() and not dest.is_file():
        # os.replace puts a file in place of a device or a pipe: `report fit.nc -o /dev/null
        # --overwrite` run as root replaced /dev/null with the report
        raise FileExistsError(
            f"{dest}: exists and is not a regular file (a folder, a device such as /dev/null, a pipe); "
            "refusing to replace it"
        )


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success move it onto ``path``.

    Parameters
    ----------
    path
        Destination file.
    overwrite
        If False and ``path`` exists, raise ``FileExistsError`` before writing anything, and
        again at the end if a file appeared at ``path`` meanwhile (that file is kept).
    """
    dest = Path(path)
    refuse_non_regular_file(dest)
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
        if overwrite:
            os.replace(tmp, dest)
        else:
            _move_without_replacing(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


#: ``os.link`` errors of a file system without hard links (FAT, some network and FUSE mounts).
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}


def _move_without_replacing(tmp: Path, dest: Path) -> None:
    """Move ``tmp`` onto ``dest``, failing with ``FileExistsError`` if ``dest`` exists.

    ``os.link`` refuses an existing name atomically (a check followed by ``os.replace``
    replaces a file made in between). Where hard links are not supported, the name is
    claimed with ``O_CREAT | O_EXCL`` (also atomic) and the result moved onto that claim.
    """
    try:
        os.link(tmp, dest)
    except FileExistsError:
        raise FileExistsError(
            f"{dest}: appeared while the output was being computed; refusing to overwrite it"
        ) from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        try:
            os.close(os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            raise FileExistsError(
                f"{dest}: appeared while the output was being computed; refusing to overwrite it"
            ) from None
        os.replace(tmp, dest)
        return
    tmp.unlink()


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


def load_netcdf_dataset(path: Path):
    """The netCDF dataset at ``path`` (h5netcdf), read into memory and the file closed."""
    import xarray as xr  # the writers above need no xarray

    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


def read_named_netcdf(
    path: str | os.PathLike,
    read: Callable[[Path], T],
    *,
    file_noun: str,
    hint: str,
    not_netcdf: str,
    unreadable: str,
    error: type[Exception] = ValueError,
    catch: tuple[type[BaseException], ...] = (OSError,),
) -> T:
    """``read(path)`` of a netCDF file a user named, with one error that says what went wrong.

    ``FileNotFoundError`` "no such ``file_noun``"; ``error`` for a folder ("is a folder, not a
    ``file_noun``; ``hint``"), and when ``read`` raises one of ``catch``: "``not_netcdf``;
    ``hint``" for a file without the HDF5 signature (a log, a plot given in its place), else
    "``unreadable`` (the reader's message)". Shared by the readers of run sets, fitted models
    and predictions.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such {file_noun}")
    if path.is_dir():
        raise error(f"{path}: is a folder, not a {file_noun}; {hint}")
    try:
        return read(path)
    except catch as exc:
        if not is_hdf5_file(path):
            raise error(f"{path}: {not_netcdf}; {hint}") from exc
        raise error(f"{path}: {unreadable} ({exc})") from exc
