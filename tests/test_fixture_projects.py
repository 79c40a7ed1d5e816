"""Multi-file fixture projects: the analyzer follows imports, and torch proves each project's label.

Each folder in tests/fixtures/projects/ is a small project whose ``main.py`` starts with ``# torch: error`` or
``# torch: clean``. It runs as ``python main.py`` from the folder (siblings importable, as for a script); folders
listed in an optional ``site.txt`` (one per line, relative) are put on the path the way site-packages would be, and
are given to the analysis as the interpreter's search path (a library the project imports, not part of it).
Folders listed in ``runtime.txt`` are on the path only when the project runs: a library the checking interpreter
does not have, which the analysis must neither read nor need (it falls back to what it knows of the library).
``# expect: GGnnn`` markers in any file of the project (library folders excluded) are what ``gradguard check`` on
the folder must report, exactly: a finding in another file than the mutation's is a bug, and so is a missing one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gradguard.api import check_paths
from gradguard.config import Config
from gradguard.project import Project, SearchPath, workspace_roots
from test_fixtures_run import INPLACE_ERRORS

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "tests" / "fixtures" / "projects"
CASES = sorted(p for p in PROJECTS.iterdir() if (p / "main.py").is_file())
EXPECT_RE = re.compile(r"#\s*expect:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)\s*$")


def site_dirs(case: Path, listing: str = "site.txt") -> list[Path]:
    f = case / listing
    if not f.is_file():
        return []
    return [case / line.strip() for line in f.read_text().splitlines() if line.strip()]


def runtime_dirs(case: Path) -> list[Path]:
    return site_dirs(case, "runtime.txt")


def label(case: Path) -> str:
    first = (case / "main.py").read_text(encoding="utf-8").splitlines()[0].strip()
    assert first in ("# torch: error", "# torch: clean"), f"{case.name}/main.py: first line must be the label"
    return first.split(":", 1)[1].strip()


def expected(case: Path) -> set[tuple[str, int, str]]:
    out: set[tuple[str, int, str]] = set()
    libs = [d.resolve() for d in (*site_dirs(case), *runtime_dirs(case))]
    for f in sorted(case.rglob("*.py")):
        if any(f.resolve().is_relative_to(d) for d in libs):
            continue
        for no, text in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            m = EXPECT_RE.search(text)
            if m:
                out.update((f.relative_to(case).as_posix(), no, c.strip()) for c in m.group(1).split(","))
    return out


def test_there_are_project_fixtures() -> None:
    labels = [label(c) for c in CASES]
    assert labels.count("error") >= 4 and labels.count("clean") >= 4


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_project_findings_match_markers(case: Path) -> None:
    libs = site_dirs(case)
    project = Project(SearchPath(roots=workspace_roots([str(case)]), site=[str(d.resolve()) for d in libs]))
    for d in runtime_dirs(case):
        for pkg in sorted(p.name for p in d.iterdir() if (p / "__init__.py").is_file()):
            assert project.find_module(pkg, str(case / "main.py")) is None, f"{case.name}: {pkg} must not resolve"
    cwd = os.getcwd()
    os.chdir(case)
    try:
        found = check_paths(["."], Config(exclude=tuple(f"{d.resolve().relative_to(case).as_posix()}/"
                                                        for d in (*libs, *runtime_dirs(case))
                                                        if d.resolve().is_relative_to(case))),
                            jobs=1, fixes=True, project=project)
    finally:
        os.chdir(cwd)
    got = {(Path(f.path).as_posix().removeprefix("./"), f.line, f.code) for f in found}
    want = expected(case)
    detail = "\n".join(f"  {f.path}:{f.line} {f.code} {f.message}" for f in found)
    assert got == want, f"{case.name}: missing {sorted(want - got)}, unexpected {sorted(got - want)}\n{detail}"
    if label(case) == "error":
        assert want, f"{case.name}: an error project needs '# expect:' markers"
    else:
        assert not want, f"{case.name}: a clean project has no markers"


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_project_label_matches_torch(case: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(d) for d in (*site_dirs(case), *runtime_dirs(case))))
    proc = subprocess.run([sys.executable, "main.py"], cwd=case, capture_output=True, text=True, timeout=300,
                          env=env)
    if label(case) == "error":
        assert proc.returncode != 0, f"{case.name} is labelled error but ran clean"
        assert any(m in proc.stderr for m in INPLACE_ERRORS), f"{case.name}: not an in-place error:\n{proc.stderr}"
    else:
        assert proc.returncode == 0, f"{case.name} is labelled clean but failed:\n{proc.stderr[-3000:]}"
