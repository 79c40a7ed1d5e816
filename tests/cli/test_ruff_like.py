"""`gradguard check` speaks like ruff: summaries, --statistics, --show-fixes, --quiet, --extend-select,
--output-format, --exit-non-zero-on-fix, unused noqa (GG001), `gradguard rule GG000`, and Jupyter notebooks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HAZARD = textwrap.dedent("""\
    import torch

    x = torch.randn(3, requires_grad=True)
    y = x.exp()
    y += 1
    z = x * 2
    z += 1  # noqa: GG101
    w = x * 3  # noqa
    y.sum().backward()
""")
CLEAN = "import torch\n\nx = torch.randn(3, requires_grad=True)\ny = x * 2\ny += 1\n"


def notebook(cells: list[tuple[str, str]], language: str = "python") -> str:
    return json.dumps({
        "cells": [{"cell_type": kind, "metadata": {}, "source": src.splitlines(keepends=True),
                   **({"outputs": [], "execution_count": None} if kind == "code" else {})} for kind, src in cells],
        "metadata": {"kernelspec": {"language": language, "name": "k"}}, "nbformat": 4, "nbformat_minor": 5})


NB = notebook([
    ("code", "%matplotlib inline\nimport torch\nx = torch.randn(3, requires_grad=True)\n"),
    ("markdown", "# exp saves its output"),
    ("code", "y = x.exp()"),
    ("code", "z = 2\ny += 1\ny.sum().backward()\n"),
])


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradguard", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture()
def proj(tmp_path: Path) -> Path:
    (tmp_path / "bad.py").write_text(HAZARD)
    (tmp_path / "good.py").write_text(CLEAN)
    return tmp_path


def test_summaries(proj: Path) -> None:
    r = run(["check", "good.py"], proj)
    assert (r.returncode, r.stdout) == (0, "All checks passed! (1 file checked)\n"), r.stderr
    (proj / "empty").mkdir()
    r = run(["check", "empty"], proj)
    assert r.returncode == 0 and r.stdout == "All checks passed! (0 files checked)\n"
    assert "warning: no Python files or notebooks found under empty" in r.stderr
    r = run(["check", "bad.py"], proj)
    assert r.stdout.splitlines()[-1] == "Found 1 problem (1 fixable with `gradguard check --fix`)."
    # --quiet: the findings only
    assert run(["check", "-q", "bad.py"], proj).stdout.splitlines() == [r.stdout.splitlines()[0]]
    assert run(["check", "--quiet", "good.py"], proj).stdout == ""
    # machine formats never get a summary
    assert json.loads(run(["check", "--format", "json", "good.py"], proj).stdout) == []


def test_output_format_is_format(proj: Path) -> None:
    a = run(["check", "--output-format", "json", "bad.py"], proj)
    b = run(["check", "--format", "json", "bad.py"], proj)
    assert a.returncode == b.returncode == 1 and a.stdout == b.stdout and json.loads(a.stdout)
    assert run(["check", "--output-format", "nope", "bad.py"], proj).returncode == 2


def test_statistics(proj: Path) -> None:
    (proj / "bad2.py").write_text(HAZARD)
    r = run(["check", "--statistics", "."], proj)
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == "2  GG101  [*] inplace-on-saved-tensor"
    data = json.loads(run(["check", "--statistics", "--format", "json", "."], proj).stdout)
    assert data == [{"code": "GG101", "name": "inplace-on-saved-tensor", "count": 2, "fixable": True}]


def test_show_fixes(proj: Path) -> None:
    out = run(["check", "--show-fixes", "bad.py"], proj).stdout.splitlines()
    assert out[1] == "    fix (safe): Rewrite `y += 1` as `y = y + 1`"
    r = run(["check", "--fix", "--show-fixes", "bad.py"], proj)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["Fixed 1 problem:", "- bad.py:", "    1 x GG101 (inplace-on-saved-tensor)",
                                     "All checks passed! (1 file checked)"]


def test_exit_non_zero_on_fix(proj: Path) -> None:
    assert run(["check", "--fix", "--exit-non-zero-on-fix", "bad.py"], proj).returncode == 1
    assert run(["check", "--fix", "--exit-non-zero-on-fix", "bad.py"], proj).returncode == 0  # nothing left to fix
    assert run(["check", "--fix", "--exit-non-zero-on-fix", "good.py"], proj).returncode == 0


def test_unused_noqa(proj: Path) -> None:
    # off by default, and a prefix does not turn it on
    assert [d["code"] for d in json.loads(run(["check", "--format", "json", "bad.py"], proj).stdout)] == ["GG101"]
    assert run(["check", "--select", "GG0,GG1", "--format", "json", "bad.py"], proj).stdout.count("GG001") == 0
    data = json.loads(run(["check", "--extend-select", "GG001", "--format", "json", "bad.py"], proj).stdout)
    got = [(d["code"], d["line"], d["column"], d["message"]) for d in data]
    assert got == [("GG101", 5, 1, "`y +=` modifies `y` in place, but it is the output of exp (line 4), which exp "
                                   "saved for backward"),
                   ("GG001", 7, 9, "unused `noqa` directive (unused: GG101)"),
                   ("GG001", 8, 12, "unused `noqa` directive (nothing to suppress on this line)")]
    # a noqa that suppresses something is not reported; one in a string is not a comment
    (proj / "used.py").write_text(HAZARD.replace("y += 1", "y += 1  # noqa: GG101, GG102").replace(
        "w = x * 3  # noqa", "s = '# noqa'"))
    data = json.loads(run(["check", "--extend-select", "GG001", "--format", "json", "used.py"], proj).stdout)
    assert [(d["line"], d["message"]) for d in data] == [(5, "unused `noqa` directive (unused: GG102)"),
                                                         (7, "unused `noqa` directive (unused: GG101)")]
    # --fix removes what is unused
    r = run(["check", "--extend-select", "GG001", "--fix", "used.py"], proj)
    assert r.returncode == 0, r.stdout
    text = (proj / "used.py").read_text()
    assert "y += 1  # noqa: GG101\n" in text and "z += 1\n" in text and "s = '# noqa'" in text
    # in [tool.gradguard], through extend-select
    (proj / "pyproject.toml").write_text('[tool.gradguard]\nextend-select = ["GG001"]\n')
    assert run(["check", "--format", "json", "bad.py"], proj).stdout.count('"GG001"') == 2
    (proj / "pyproject.toml").write_text('[tool.gradguard]\nextend-select = ["GG9"]\n')
    r = run(["check", "bad.py"], proj)
    assert r.returncode == 2 and "extend-select: unknown rule code 'GG9'" in r.stderr


def test_unknown_codes_are_usage_errors(proj: Path) -> None:
    for flag in ("--select", "--ignore", "--extend-select"):
        r = run(["check", flag, "GG999", "bad.py"], proj)
        assert r.returncode == 2 and f"gradguard: error: {flag}: unknown rule code 'GG999'" in r.stderr


def test_rule_pages(proj: Path) -> None:
    for code, name in (("GG000", "file-not-analyzed"), ("GG001", "unused-noqa"), ("GG101", "inplace-on-saved")):
        r = run(["rule", code.lower()], proj)
        assert r.returncode == 0 and r.stdout.startswith(f"# {code}: {name}"), r.stdout
    listing = run(["rule"], proj).stdout
    assert listing.startswith("GG000  file-not-analyzed") and "GG001  unused-noqa" in listing
    assert run(["rule", "GG999"], proj).returncode == 2


def test_notebooks(proj: Path) -> None:
    (proj / "nb.ipynb").write_text(NB)
    r = run(["check", "nb.ipynb"], proj)
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == ("nb.ipynb:cell 4:2:1: GG101 `y +=` modifies `y` in place, but it is the output "
                                        "of exp (cell 3, line 1), which exp saved for backward")
    (d,) = json.loads(run(["check", "--format", "json", "nb.ipynb"], proj).stdout)
    assert (d["cell"], d["line"], d["column"]) == (4, 2, 1)
    assert d["related"][0]["cell"] == 3 and d["related"][0]["line"] == 1
    pref = next(f for f in d["fixes"] if f["preferred"])
    assert pref["edits"] == [{"line": 2, "column": 3, "end_line": 2, "end_column": 5, "text": "= y +", "cell": 4}]
    # directories: notebooks are found next to .py files; the summary counts them
    r = run(["check", "--format", "json", "."], proj)
    assert sorted({Path(x["path"]).name for x in json.loads(r.stdout)}) == ["bad.py", "nb.ipynb"]
    (proj / "bad.py").unlink()
    assert run(["check", "--ignore", "GG1", "."], proj).stdout == "All checks passed! (2 files checked)\n"
    # --fix leaves notebooks alone and says so
    before = (proj / "nb.ipynb").read_text()
    r = run(["check", "--fix", "nb.ipynb"], proj)
    assert r.returncode == 1 and "fixes are not applied to notebooks" in r.stderr
    assert (proj / "nb.ipynb").read_text() == before
    # suppression comments work in cells; other kernels are skipped; broken JSON is a GG000
    (proj / "nb.ipynb").write_text(NB.replace("y += 1", "y += 1  # noqa: GG101"))
    assert run(["check", "nb.ipynb"], proj).returncode == 0
    (proj / "r.ipynb").write_text(notebook([("code", "x <- 1\n")], language="R"))
    assert run(["check", "r.ipynb"], proj).returncode == 0
    (proj / "broken.ipynb").write_text("{not json")
    r = run(["check", "broken.ipynb"], proj)
    assert r.returncode == 1 and "broken.ipynb:1:1: GG000 not a Jupyter notebook (invalid JSON" in r.stdout
    (proj / "syntax.ipynb").write_text(notebook([("code", "x = 1\n"), ("code", "def f(:\n")]))
    assert run(["check", "syntax.ipynb"], proj).stdout.startswith("syntax.ipynb:cell 2:1:")


def test_github_format_is_as_documented(proj: Path) -> None:
    gh = run(["check", "--format", "github", "bad.py"], proj).stdout
    assert gh.strip() == ("::warning title=gradguard (GG101),file=bad.py,line=5,col=1,endLine=5,endColumn=7::GG101 "
                          "`y +=` modifies `y` in place, but it is the output of exp (line 4), which exp saved for "
                          "backward")
    docs = (Path(__file__).resolve().parents[2] / "docs" / "editors.md").read_text()
    assert "::warning title=gradguard (GGxxx),file=PATH,line=L,col=C,endLine=L2,endColumn=C2::GGxxx message" in docs
