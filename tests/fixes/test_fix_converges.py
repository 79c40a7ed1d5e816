"""`--fix` converges: a fix that leaves its finding is never applied, a second `--fix` changes nothing, every
result parses, and "N fixable" counts exactly what `--fix` removes.

Over every corpus case and a sample of timm 1.0.31 (the whole tree with ``GRADGUARD_SWEEP=full``, which
``make sweep`` sets), each file copied alone into a temporary directory, through the real CLI (in process).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest
from gradguard.cli import main
from gradguard.fixes import fix_until_stable
from gradguard.model import Edit, Finding, Fix
from shared_data import CORPUS, corpus_manifest

FULL = os.environ.get("GRADGUARD_SWEEP", "") == "full"


def timm_files() -> list[Path]:
    spec = importlib.util.find_spec("timm")  # without importing timm (it imports torch)
    if spec is None or spec.origin is None:
        return []
    return sorted(Path(spec.origin).parent.rglob("*.py"))


TIMM = timm_files()
# The default run: the timm files with findings at the time of writing, and every 25th file.
TIMM_SAMPLE = sorted({p for p in TIMM if p.name in ("fasternet.py", "_helpers.py")} | set(TIMM[::25]))
CORPUS_FILES = sorted((CORPUS / "cases").glob("*.py"))


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def report(path: Path) -> tuple[int, int]:
    """(problems, fixable) as the text report says."""
    _, out, err = cli("check", "--exit-zero", str(path))
    assert "Traceback" not in err, err
    m = re.search(r"^Found (\d+) problems?(?: \((\d+) fixable with `gradguard check --fix`\))?\.$", out, re.M)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (0, 0)


def converges(src: Path, tmp_path: Path, unsafe: bool) -> None:
    target = tmp_path / src.name
    shutil.copyfile(src, target)
    original = target.read_bytes()
    before, fixable = report(target)
    if not before:
        return  # nothing reported: --fix has nothing to do
    flags = ["--unsafe-fixes"] if unsafe else []
    cli("check", "--fix", "--exit-zero", *flags, str(target))
    first = target.read_bytes()
    try:
        ast.parse(original)
    except SyntaxError:
        assert first == original
    else:
        ast.parse(first)  # every result parses
    cli("check", "--fix", "--exit-zero", *flags, str(target))
    assert target.read_bytes() == first, f"{src.name}: a second --fix changed the file"
    after, fixable_after = report(target)
    assert fixable_after == 0, f"{src.name}: still {fixable_after} fixable after --fix"
    if not unsafe:
        # everything counted as fixable was removed (fixes may reveal findings; none here at the time of writing)
        assert after <= before - fixable, (src.name, before, fixable, after)
        assert (first != original) == (fixable > 0), (src.name, fixable)


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("src", CORPUS_FILES, ids=[p.stem for p in CORPUS_FILES])
def test_fix_converges_on_the_corpus(src: Path, unsafe: bool, tmp_path: Path) -> None:
    converges(src, tmp_path, unsafe)


def test_the_corpus_is_there() -> None:
    corpus_manifest()
    assert len(CORPUS_FILES) >= 40


TIMM_FILES = TIMM if FULL else TIMM_SAMPLE


@pytest.mark.parametrize("src", TIMM_FILES, ids=[str(p.relative_to(p.parents[1])) for p in TIMM_FILES])
def test_fix_converges_on_timm(src: Path, tmp_path: Path) -> None:
    converges(src, tmp_path, unsafe=True)


def test_timm_is_installed() -> None:
    assert TIMM, "timm is not installed (make setup installs timm==1.0.31)"


# ------------------------------------------------------------------------------------ fix_until_stable alone
def _finding(line: int, fix_text: str, code: str = "GG101") -> Finding:
    return Finding("m.py", line, 1, line, 2, code, "m", fixes=[Fix("t", True, (Edit(line, 1, line, 2, fix_text),),
                                                                    True, "out-of-place")])


def test_a_fix_that_keeps_its_finding_is_not_applied() -> None:
    text = "a\nb\n"
    findings = [_finding(1, "A"), _finding(2, "B")]

    def recheck(new: str) -> list[Finding]:  # B is reported whatever happens to line 2
        return [_finding(2, "B")] if new.splitlines()[1] in ("b", "B") else []

    out = fix_until_stable(text, findings, recheck)
    assert out.text == "A\nb\n" and out.fixed == 1 and out.settled and [f.line for f in out.rejected] == [2]
    again = fix_until_stable(out.text, recheck(out.text), recheck)
    assert again.text == out.text and again.fixed == 0  # idempotent


def test_fixes_that_never_settle_apply_nothing() -> None:
    def recheck(new: str) -> list[Finding]:  # every fix makes another finding (another code) on a new line
        n = new.count("\n")
        return [_finding(n, "x\nz", "GG101" if n % 2 else "GG102")]

    out = fix_until_stable("a\n", [_finding(1, "x\nz")], recheck, max_rounds=3)
    assert not out.settled and out.text == "a\n" and out.fixed == 0


def test_fixes_that_break_the_file_are_not_applied() -> None:
    def recheck(new: str) -> list[Finding]:
        return [Finding("m.py", 1, 1, 1, 2, "GG000", "could not parse")]

    out = fix_until_stable("a\n", [_finding(1, "(")], recheck)
    assert out.text == "a\n" and out.fixed == 0


def test_the_transformers_detr_pattern_does_not_grow_clones(tmp_path: Path) -> None:
    """transformers' conditional_detr shape: a false positive the analyzer keeps reporting whatever is cloned;
    the clone-at-use fix used to be applied again on every run (`relu(layer(x.clone().clone()))`)."""
    src = tmp_path / "detr.py"
    src.write_text(textwrap.dedent("""\
        import torch
        from torch import nn


        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(12))  # too long to unroll

            def forward(self, x):
                for i, layer in enumerate(self.layers):
                    x = nn.functional.relu(layer(x)) if i < 11 else layer(x)
                return x


        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.bbox = Head()

            def forward(self, hs, ref):
                tmp = self.bbox(hs)
                boxes = [tmp]
                tmp[..., :2] += ref
                return tmp.sigmoid(), boxes


        out, _ = Detector()(torch.randn(2, 8, requires_grad=True), torch.rand(2, 2))
        out.sum().backward()
    """))
    before, _fixable = report(src)
    for _ in range(2):
        cli("check", "--fix", "--unsafe-fixes", str(src))
        assert ".clone().clone()" not in src.read_text()
    fixed_once = src.read_text()
    cli("check", "--fix", "--unsafe-fixes", str(src))
    assert src.read_text() == fixed_once
    # whatever the fixes add, they add once: no line gains a second copy
    assert before
    assert all(line.count(".clone()") <= 1 for line in fixed_once.splitlines())
