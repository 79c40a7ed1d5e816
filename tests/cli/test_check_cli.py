"""The `gradguard check` contract other tools depend on: exit codes, formats, config, suppression, robustness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gradguard.api import check_source
from gradguard.cli import main

HAZARD = textwrap.dedent("""\
    import torch

    x = torch.randn(3, requires_grad=True)
    y = x.exp()
    y += 1
    y.sum().backward()
""")
CLEAN = textwrap.dedent("""\
    import torch

    x = torch.randn(3, requires_grad=True)
    y = x * 2
    y += 1
    y.sum().backward()
""")


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradguard", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture()
def proj(tmp_path: Path) -> Path:
    (tmp_path / "bad.py").write_text(HAZARD)
    (tmp_path / "good.py").write_text(CLEAN)
    return tmp_path


def test_exit_codes(proj: Path) -> None:
    assert run(["check", "bad.py"], proj).returncode == 1
    assert run(["check", "good.py"], proj).returncode == 0
    assert run(["check", "--exit-zero", "bad.py"], proj).returncode == 0
    assert run(["check", "--format", "nope", "bad.py"], proj).returncode == 2
    assert run(["check", "missing.py"], proj).returncode == 2


def test_text_names_both_lines(proj: Path) -> None:
    out = run(["check", "bad.py"], proj).stdout
    assert "bad.py:5:1: GG101" in out
    assert "exp (line 4)" in out


def test_json_shape(proj: Path) -> None:
    data = json.loads(run(["check", "--format", "json", "."], proj).stdout)
    assert isinstance(data, list) and len(data) == 1
    d = data[0]
    assert set(d) >= {"path", "line", "column", "end_line", "end_column", "code", "severity", "message", "related",
                      "fixes"}
    assert (d["line"], d["column"], d["code"]) == (5, 1, "GG101")
    assert d["related"][0]["line"] == 4 and "exp" in d["related"][0]["message"]
    for f in d["fixes"]:
        assert set(f) >= {"title", "safe", "edits"}
        for e in f["edits"]:
            assert set(e) >= {"line", "column", "end_line", "end_column", "text"}


def test_sarif_and_github(proj: Path) -> None:
    sarif = json.loads(run(["check", "--format", "sarif", "bad.py"], proj).stdout)
    res = sarif["runs"][0]["results"][0]
    assert res["ruleId"] == "GG101"
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == 5
    gh = run(["check", "--format", "github", "bad.py"], proj).stdout
    assert gh.startswith("::warning title=gradguard (GG101),file=bad.py,line=5,col=1")


def test_select_ignore_and_pyproject(proj: Path) -> None:
    assert run(["check", "--ignore", "GG101", "bad.py"], proj).returncode == 0
    assert run(["check", "--select", "GG2", "bad.py"], proj).returncode == 0
    assert run(["check", "--select", "GG1", "bad.py"], proj).returncode == 1
    (proj / "pyproject.toml").write_text('[tool.gradguard]\nignore = ["GG101"]\n')
    assert run(["check", "bad.py"], proj).returncode == 0
    (proj / "pyproject.toml").write_text('[tool.gradguard]\nper-file-ignores = { "bad.py" = ["GG1"] }\n')
    assert run(["check", "."], proj).returncode == 0
    (proj / "pyproject.toml").write_text('[tool.gradguard]\nexclude = ["bad.py"]\n')
    assert run(["check", "."], proj).returncode == 0


def test_noqa(proj: Path) -> None:
    src = HAZARD.replace("y += 1", "y += 1  # noqa: GG101")
    assert check_source(src, "x.py") == []
    assert check_source(HAZARD.replace("y += 1", "y += 1  # noqa"), "x.py") == []
    assert [f.code for f in check_source(HAZARD.replace("y += 1", "y += 1  # noqa: GG102"), "x.py")] == ["GG101"]


def test_gitignore_respected(proj: Path) -> None:
    sub = proj / "gen"
    sub.mkdir()
    (sub / "bad2.py").write_text(HAZARD)
    (proj / ".git").mkdir()
    (proj / ".gitignore").write_text("gen/\nbad.py\n")
    data = json.loads(run(["check", "--format", "json", "."], proj).stdout)
    assert data == []
    # a file named explicitly is always checked
    assert run(["check", "bad.py"], proj).returncode == 1


def test_syntax_error_is_gg000_and_run_goes_on(proj: Path) -> None:
    (proj / "broken.py").write_text("def f(:\n    pass\n")
    data = json.loads(run(["check", "--format", "json", "."], proj).stdout)
    codes = sorted((Path(d["path"]).name, d["code"]) for d in data)
    assert codes == [("bad.py", "GG101"), ("broken.py", "GG000")]
    assert "could not parse" in next(d["message"] for d in data if d["code"] == "GG000")


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage\x00", b"# -*- coding: latin-1 -*-\nx = '\xe9'\n",
                                     b"\xef\xbb\xbfimport torch\n", "x = ('é' + '中文')\n".encode()])
def test_odd_bytes_never_crash(content: bytes) -> None:
    out = check_source(content, "odd.py")
    assert all(f.code == "GG000" for f in out)


def test_deep_nesting_and_huge_file() -> None:
    deep = "x = " + "(" * 300 + "1" + ")" * 300 + "\n"
    assert all(f.code == "GG000" for f in check_source(deep, "deep.py"))
    deep_calls = "import torch\nx = " + "torch.exp(" * 150 + "torch.randn(3)" + ")" * 150 + "\n"
    check_source(deep_calls, "deep2.py")
    huge = HAZARD + "\n".join(f"v{i} = torch.randn(3) * {i}" for i in range(30_000)) + "\n"
    out = check_source(huge, "huge.py")
    assert [f.code for f in out] == ["GG101"]


def test_parallel_equals_serial(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"m{i}.py").write_text(HAZARD if i % 3 == 0 else CLEAN)
    from gradguard.api import check_paths
    from gradguard.config import Config

    serial = [f.to_json() for f in check_paths([str(tmp_path)], Config(), jobs=1)]
    parallel = [f.to_json() for f in check_paths([str(tmp_path)], Config(), jobs=2)]
    assert serial == parallel and len(serial) == 7


def test_fix_and_diff(proj: Path) -> None:
    diff = run(["check", "--diff", "bad.py"], proj)
    assert "-y += 1" in diff.stdout and "+y = y + 1" in diff.stdout
    assert (proj / "bad.py").read_text() == HAZARD  # --diff writes nothing
    fixed = run(["check", "--fix", "bad.py"], proj)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "y = y + 1" in (proj / "bad.py").read_text()


def test_main_in_process_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    with pytest.raises(SystemExit) as e:
        main(["check", "--bogus"])
    assert e.value.code == 2


def test_rule_docs_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule"]) == 0
    assert "GG302" in capsys.readouterr().out
    assert main(["rule", "GG102"]) == 0
    out = capsys.readouterr().out
    assert "## Why backward breaks" in out and "inplace=True" in out
    assert main(["rule", "GG999"]) == 2


def test_entry_points_exist() -> None:
    """The console script (installed next to the interpreter) and `python -m gradguard` both work."""
    exe = Path(sys.executable).parent / "gradguard"
    assert exe.exists(), f"console script missing: {exe}"
    for cmd in ([str(exe), "--version"], [sys.executable, "-m", "gradguard", "--version"]):
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
        assert r.returncode == 0 and "gradguard" in r.stdout, (cmd, r.stderr)


@pytest.mark.parametrize(("table", "expected"), [
    ("select = 5", "[tool.gradguard] select: expected a list of rule codes"),
    ('select = "GG1"', "[tool.gradguard] select: expected a list of rule codes"),
    ('select = ["GG999"]', "[tool.gradguard] select: unknown rule code 'GG999'"),
    ("select = []", "[tool.gradguard] select: expected at least one rule code"),
    ('ignore = ["XYZ"]', "[tool.gradguard] ignore: unknown rule code 'XYZ'"),
    ('per-file-ignores = "x"', "[tool.gradguard] per-file-ignores: expected a table"),
    ('per-file-ignores = { "a.py" = ["GG7"] }', "[tool.gradguard] per-file-ignores: 'a.py': unknown rule code"),
    ("exclude = 5", "[tool.gradguard] exclude: expected a list of gitignore-style patterns"),
    ('exclude = "gen/*.py"', "[tool.gradguard] exclude: expected a list of gitignore-style patterns"),
    ('exclude = ["!"]', "[tool.gradguard] exclude: '!' is not a valid gitignore-style pattern"),
    ('severity = "x"', "[tool.gradguard] severity: expected a table"),
    ('severity = { GG1 = "loud" }', "[tool.gradguard] severity: GG1: expected one of error, warning, info, hint"),
    ('severity = { XX1 = "error" }', "[tool.gradguard] severity: unknown rule code 'XX1'"),
    ('src = "src"', "[tool.gradguard] src: expected a list of directories"),
    ("python = 3", "[tool.gradguard] python: expected the path of a Python interpreter"),
    ("selct = []", "[tool.gradguard] selct: unknown key"),
    ("", None),  # the control: a valid (empty) table
])
def test_bad_config_is_one_line_and_exit_2(proj: Path, table: str, expected: str | None) -> None:
    (proj / "pyproject.toml").write_text(f"[tool.gradguard]\n{table}\n")
    r = run(["check", "."], proj)
    if expected is None:
        assert r.returncode == 1 and not r.stderr
        return
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr  # one line, no traceback
    assert r.stderr.startswith("gradguard: error: pyproject.toml: ") and expected in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize(("content", "expected"), [
    (b"[tool.gradguard\n", "pyproject.toml: could not parse: "),
    (b"tool = 5\n", "pyproject.toml: [tool] must be a table, got 5"),
    (b"[tool]\ngradguard = 5\n", "pyproject.toml: [tool.gradguard] must be a table, got 5"),
    (b"[tool.gradguard]\n# caf\xe9\n", "pyproject.toml: could not read: not valid UTF-8 (byte 0xe9 on line 2)"),
])
def test_unreadable_pyproject_is_an_error(proj: Path, content: bytes, expected: str) -> None:
    (proj / "pyproject.toml").write_bytes(content)
    r = run(["check", "bad.py"], proj)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and expected in r.stderr, r.stderr


def test_pyproject_without_our_table_is_fine(proj: Path) -> None:
    (proj / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.ruff]\nline-length = 5\n')
    assert run(["check", "bad.py"], proj).returncode == 1


@pytest.mark.parametrize(("flags", "expected"), [
    (["--select", "XYZ"], "gradguard: error: --select: unknown rule code 'XYZ'"),
    (["--select", "GG999"], "gradguard: error: --select: unknown rule code 'GG999'"),
    (["--select", ","], "gradguard: error: --select: expected at least one rule code"),
    (["--ignore", "GG1,NOPE"], "gradguard: error: --ignore: unknown rule code 'NOPE'"),
])
def test_bad_flags_exit_2(proj: Path, flags: list[str], expected: str) -> None:
    r = run(["check", *flags, "bad.py"], proj)
    assert r.returncode == 2 and r.stderr.strip() == r.stderr.strip().splitlines()[0] and expected in r.stderr


def test_codes_accept_groups_and_lower_case(proj: Path) -> None:
    assert run(["check", "--select", "gg1", "bad.py"], proj).returncode == 1
    assert run(["check", "--select", "GG10,GG3", "bad.py"], proj).returncode == 1
    assert run(["check", "--ignore", "GG101", "bad.py"], proj).returncode == 0
    (proj / "pyproject.toml").write_text('[tool.gradguard]\nselect = ["GG"]\nsrc = ["."]\nseverity = { GG101 = "Error" }\n')
    r = run(["check", "--format", "json", "bad.py"], proj)
    assert r.returncode == 1 and json.loads(r.stdout)[0]["severity"] == "error"


def test_bad_gitignore_line_is_skipped_as_git_does(proj: Path) -> None:
    (proj / ".git").mkdir()
    (proj / "gen").mkdir()
    (proj / "gen" / "bad2.py").write_text(HAZARD)
    (proj / ".gitignore").write_text("!\n\\\ngen/\n")  # two lines git cannot use, then one it can
    r = run(["check", "--format", "json", "."], proj)
    assert r.returncode == 1, r.stderr
    assert [Path(d["path"]).name for d in json.loads(r.stdout)] == ["bad.py"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_named_py_never_blocks(proj: Path) -> None:
    """A FIFO named *.py blocks any reader until a writer comes: the walk skips it, a named one gets GG000."""
    os.mkfifo(proj / "pipe.py")
    sub = proj / "pkg"
    sub.mkdir()
    os.mkfifo(sub / "also.py")
    os.symlink(sub / "also.py", proj / "link.py")
    r = run(["check", "--format", "json", "."], proj)  # times out (an exception) if it blocks
    assert r.returncode == 1, r.stderr
    assert sorted(Path(d["path"]).name for d in json.loads(r.stdout)) == ["bad.py"]
    r = run(["check", "--format", "json", "pipe.py", "bad.py"], proj)
    got = sorted((Path(d["path"]).name, d["code"], d["message"]) for d in json.loads(r.stdout))
    assert got[0][:2] == ("bad.py", "GG101")
    assert got[1] == ("pipe.py", "GG000", "skipped: not a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_in_process_api(tmp_path: Path) -> None:
    import threading

    from gradguard.api import check_file
    from gradguard.config import Config
    from gradguard.files import iter_python_files

    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_text(CLEAN)
    out: list = []
    t = threading.Thread(target=lambda: out.append((list(iter_python_files([str(tmp_path)], Config())),
                                                    check_file(str(tmp_path / "pipe.py")))), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "blocked on the FIFO"
    files, findings = out[0]
    assert [Path(f).name for f in files] == ["ok.py"]
    assert [(f.code, f.message) for f in findings] == [("GG000", "skipped: not a regular file")]


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x1c", "\x0c"])
def test_lines_are_numbered_as_python_numbers_them(sep: str) -> None:
    """str.splitlines() also splits at these, Python does not: the noqa, the columns and the fixes of every line
    after one must still be those of the finding's own line."""
    src = HAZARD.replace("import torch\n", f"import torch\ns = '{sep}'  # {sep}\n")
    (f,) = check_source(src, "x.py")
    assert (f.line, f.column, f.code) == (6, 1, "GG101")
    assert f.fixes[0].title == "Rewrite `y += 1` as `y = y + 1`"
    from gradguard.fixes import apply_edits

    assert "y = y + 1" in apply_edits(src, f.fixes[0].edits).split("\n")[5]
    assert check_source(src.replace("y += 1", "y += 1  # noqa: GG101"), "x.py") == []
