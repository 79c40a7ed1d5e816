"""Identical input, byte-identical output: whatever the hash seed, ``-j``, or the order of the paths given.

CI diffs, SARIF baselines, caches and the editor all rely on it. Runs `gradguard check` as a subprocess (each
with its own PYTHONHASHSEED) on the corpus, the fixtures and a sample of timm 1.0.31; the whole timm tree with
``GRADGUARD_SWEEP=full`` (``make sweep``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from shared_data import CORPUS

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("GRADGUARD_SWEEP", "") == "full"


def timm_files() -> list[Path]:
    spec = importlib.util.find_spec("timm")  # without importing timm (it imports torch)
    if spec is None or spec.origin is None:
        return []
    return sorted(Path(spec.origin).parent.rglob("*.py"))


def files() -> list[str]:
    timm = timm_files()
    chosen = timm if FULL else sorted({p for p in timm if p.name in ("fasternet.py", "_helpers.py")} | set(timm[::20]))
    out = [*sorted((CORPUS / "cases").glob("*.py")), *single_file_fixtures(), *chosen]
    return [str(p) for p in out]


def single_file_fixtures() -> list[Path]:
    """The fixtures but the multi-file projects (tests/fixtures/projects: see the sibling-projects test below)."""
    fixtures = ROOT / "tests" / "fixtures"
    return [p for p in sorted(fixtures.rglob("*.py")) if "projects" not in p.relative_to(fixtures).parts]


def check(paths: list[str], seed: str, jobs: int, fmt: str = "json") -> bytes:
    # Named files (timm lives under site-packages, which the directory walk skips). --no-cache: every run analyses
    # (a cached result would make the later runs equal by construction), and nothing is written beside ../shared.
    env = {**os.environ, "PYTHONHASHSEED": seed}
    r = subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", "--exit-zero", "--format", fmt,
                        "-j", str(jobs),
                        *paths], cwd=ROOT, env=env, capture_output=True, timeout=1800)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return r.stdout


def test_same_bytes_for_any_seed_jobs_and_path_order() -> None:
    paths = files()
    assert len(paths) > 100
    base = check(paths, "0", 1)
    assert base.count(b'"code"') > 50  # enough findings for the comparison to mean something
    runs = {
        "seed 1, -j 2": check(paths, "1", 2),
        "seed 2, -j 1, paths reversed": check(list(reversed(paths)), "2", 1),
    }
    if FULL:
        runs["seed 3, -j 2, paths reversed"] = check(list(reversed(paths)), "3", 2)
        runs["seed random, -j 1"] = check(paths, "random", 1)
    for name, out in runs.items():
        assert out == base, f"{name}: output differs from seed 0, -j 1"


@pytest.mark.parametrize("fmt", ["text", "sarif"])
def test_other_formats_are_deterministic_too(fmt: str) -> None:
    paths = [str(p) for p in single_file_fixtures()]
    assert check(paths, "5", 1, fmt) == check(list(reversed(paths)), "6", 2, fmt)


def test_path_order_with_sibling_projects() -> None:
    """`import ops` in two sibling projects that each have an ops.py resolves to each script's own."""
    projects = ROOT / "tests" / "fixtures" / "projects"
    a, b = str(projects / "mutating_helper"), str(projects / "mutating_helper_clean")
    assert check([a, b], "0", 1, "text") == check([b, a], "0", 1, "text")
