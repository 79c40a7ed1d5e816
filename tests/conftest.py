"""Shared paths for the test-suite, as pytest fixtures.

Test modules do not ``import conftest`` (tests/lsp has its own conftest.py and the name would be ambiguous);
they ask for these fixtures instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The labelled corpus lives next to the repository in the development setup (GRADGUARD_CORPUS overrides).
CORPUS = Path(os.environ.get("GRADGUARD_CORPUS", ROOT.parent / "shared" / "corpus"))

collect_ignore = ["fixtures"]  # runnable user-like scripts, executed by test_fixtures_run.py, never collected


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return CORPUS


@pytest.fixture(scope="session")
def venv_python() -> str:
    """The interpreter running the tests (the venv's python under `make test`)."""
    return sys.executable
