"""Where the data shared between checkouts lives, for every test that needs it (import it, or use the
``shared_dir``/``corpus_dir`` fixtures of tests/conftest.py).

``../shared`` (the labelled corpus, seeds, wild cases) sits next to the repository: next to this checkout, or,
for a git worktree elsewhere, next to the main checkout it belongs to. ``GRADGUARD_SHARED`` (or
``GRADGUARD_CORPUS`` for the corpus alone) overrides. When it is missing, :func:`require` skips the test with a
reason that ``pytest -ra`` prints in the summary, and fails it in CI (``CI=true``): CI must not pass by skipping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _main_checkout(root: Path) -> Path | None:
    """The main checkout of a git worktree (its ``.git`` is a file ``gitdir: <main>/.git/worktrees/<name>``)."""
    git = root / ".git"
    if not git.is_file():
        return None
    try:
        line = git.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line.split(":", 1)[1].strip())
    if not gitdir.is_absolute():
        gitdir = (root / gitdir).resolve()
    common = gitdir.parent.parent if gitdir.parent.name == "worktrees" else None
    return common.parent if common is not None and common.name == ".git" else None


def _find_shared() -> Path:
    env = os.environ.get("GRADGUARD_SHARED")
    if env:
        return Path(env)
    here = ROOT.parent / "shared"
    if here.is_dir():
        return here
    main = _main_checkout(ROOT)
    if main is not None and (main.parent / "shared").is_dir():
        return main.parent / "shared"
    return here


SHARED = _find_shared()
CORPUS = Path(os.environ.get("GRADGUARD_CORPUS") or SHARED / "corpus")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def require(path: Path, what: str = "") -> Path:
    """``path`` when it exists; otherwise skip (fail under ``CI=true``) saying what is missing and where."""
    if path.exists():
        return path
    msg = (f"{what or path.name} is not available: {path} does not exist (../shared next to the repository; "
           "set GRADGUARD_SHARED or GRADGUARD_CORPUS)")
    if in_ci():
        pytest.fail(f"{msg}; CI (CI=true) needs it", pytrace=False)
    pytest.skip(msg)
    raise AssertionError("unreachable")  # pragma: no cover


def corpus_manifest() -> Path:
    return require(CORPUS / "manifest.json", "the labelled corpus")
