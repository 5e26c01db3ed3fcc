"""Shared test fixtures, and the settings that let the suite run on two workers (pytest-xdist)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
REAL_RUNS = REPO_ROOT.parent / "shared" / "real_runs"


def _private_compiledir_per_worker() -> None:
    """Give each xdist worker its own PyTensor compile cache (set before PyTensor is imported).

    Two processes compiling into one cache take turns on its lock; a folder per worker keeps
    them from waiting on each other. A ``base_compiledir`` the user set is kept as the parent;
    subprocesses (notebook kernels, CLI runs) inherit the variable and so the folder.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    flags = os.environ.get("PYTENSOR_FLAGS", "")
    match = re.search(r"base_compiledir=([^,]+)", flags)
    parent = match.group(1) if match else str(Path.home() / ".pytensor")
    own = f"base_compiledir={parent.rstrip('/')}/xdist_{worker}"
    if match:
        flags = flags[: match.start()] + own + flags[match.end() :]
    else:
        flags = ",".join(part for part in (flags, own) if part)
    os.environ["PYTENSOR_FLAGS"] = flags


_private_compiledir_per_worker()


def pytest_collection_modifyitems(config, items):
    """Run the files that hold slow tests first, each file's tests kept together in order.

    With two workers the suite takes about half its serial time only if the long tests (a
    notebook, the demo: several minutes each) do not start last; files stay contiguous so
    module-scoped fixtures are built once.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(scope="session")
def real_runs_dir() -> Path:
    """The public GRPO logs in ../shared/real_runs; skips the test when absent."""
    if not REAL_RUNS.is_dir():
        pytest.skip(f"{REAL_RUNS} not present")
    return REAL_RUNS
