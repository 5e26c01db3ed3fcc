"""Shared test fixtures, and the settings that let the suite run on two workers (pytest-xdist)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The public GRPO logs: ../shared/real_runs beside the repository, or where BAYES_GRPO_REAL_RUNS
#: points (a checkout elsewhere, e.g. a git worktree, has no ../shared; the tests skip without them).
REAL_RUNS = Path(os.environ.get("BAYES_GRPO_REAL_RUNS") or REPO_ROOT.parent / "shared" / "real_runs")


def _private_compiledir_per_worker() -> None:
    """Give each xdist worker its own PyTensor compile cache (set before PyTensor is imported).

    Two processes compiling into one cache take turns on its lock; a folder per worker keeps
    them from waiting on each other. A shared cache was tried (2026-12-07): on three files with
    many common models it saved 30% of CPU, but the whole suite on CI took 1766 s against 1499
    s with a cache per worker (compile-heavy tests 2-4x slower: the Kalman gradient 33 -> 100
    s, the real-runs script 35 -> 157 s), each worker waiting while the other compiled. A ``base_compiledir`` the user set is kept as the parent;
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


#: Files whose tests take longest (last CI run, 2 workers, tests 1499 s: the demo's end-to-end
#: test 262 s and its default-settings fit 124 s; notebook 02 188 s, 01 78 s, 04 67 s). The
#: next longest tests are in files with ``slow`` tests (test_model_fit's nutpie test 96 s,
#: test_scheduled_trajectory 91 s, test_model_bounds 82 s, test_predict 62 s, test_compare's
#: leave-future-out 58 s). Only an ordering hint: a file missing here just runs in the next group.
LONGEST_FILES: tuple[str, ...] = ("test_demo.py", "test_notebooks.py")


def pytest_collection_modifyitems(config, items):
    """Order the suite longest first: the files in LONGEST_FILES, then files holding slow tests,
    then the rest, each file's tests kept together and in their order.

    With two workers (``-n 2 --dist worksteal``) xdist hands the first half of this list to
    one worker and the second half to the other; a worker that runs dry steals the back half
    of the other's queue. So the long tests at the head start at once and short ones fill the
    end: when a notebook started last, one worker idled for six minutes (26.6 min in all, 20
    min with this order). Files stay contiguous in the list, so a module-scoped fixture is
    built once per worker that runs part of its file (twice at most).
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item) -> tuple[int, int]:
        name = item.path.name
        if name in LONGEST_FILES:
            return 0, LONGEST_FILES.index(name)
        return (1 if item.path in slow_files else 2), 0

    items.sort(key=rank)


@pytest.fixture(scope="session")
def real_runs_dir() -> Path:
    """The public GRPO logs (:data:`REAL_RUNS`); skips the test when absent."""
    if not REAL_RUNS.is_dir():
        pytest.skip(f"{REAL_RUNS} not present")
    return REAL_RUNS


def _load_script(relative_path: str):
    """A repository script (``benchmarks/x.py``, ``scripts/y.py``) imported as a module."""
    import importlib.util

    path = REPO_ROOT / relative_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_script():
    """``load_script("benchmarks/real_runs_fit.py")``: the script as a module, for its tests."""
    return _load_script


@pytest.fixture(autouse=True)
def _close_figures_after_each_test():
    """Close the figures a test left open (plotting functions return them to the caller), so a
    worker does not accumulate them across tests."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
