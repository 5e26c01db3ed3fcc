"""Shared test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
REAL_RUNS = REPO_ROOT.parent / "shared" / "real_runs"


@pytest.fixture(scope="session")
def real_runs_dir() -> Path:
    """The public GRPO logs in ../shared/real_runs; skips the test when absent."""
    if not REAL_RUNS.is_dir():
        pytest.skip(f"{REAL_RUNS} not present")
    return REAL_RUNS
