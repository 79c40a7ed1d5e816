"""Shared paths for the test-suite, as pytest fixtures.

Test modules do not ``import conftest`` (tests/lsp has its own conftest.py and the name would be ambiguous);
they ask for these fixtures instead, or import ``shared_data`` (tests/shared_data.py) for paths at collection.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from shared_data import CORPUS, SHARED, require

ROOT = Path(__file__).resolve().parent.parent

# An exception inside the analysis becomes a GG000 note for users; the suite wants the traceback instead.
os.environ.setdefault("GRADGUARD_DEBUG", "1")

collect_ignore = ["fixtures"]  # runnable user-like scripts, executed by test_fixtures_run.py, never collected


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` next to the repository (tests/shared_data.py); skips (fails under CI=true) when missing."""
    return require(SHARED, "../shared")


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The labelled corpus; skips (fails under CI=true) when missing."""
    require(CORPUS / "manifest.json", "the labelled corpus")
    return CORPUS


@pytest.fixture(scope="session")
def venv_python() -> str:
    """The interpreter running the tests (the venv's python under `make test`)."""
    return sys.executable
