"""The editor end-to-end fixture's labels are true: checked by running the code with torch.

tests/e2e/workspace/model.py marks its hazard lines with ``# hazard: GGxxx``.  Each hazard alone breaks
backward() (the other one rewritten out of place), the file with both rewritten runs backward clean (so the
conv -> bn -> ReLU(inplace=True) stack is safe), and fail_run.py fails at run time.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch

WS = Path(__file__).parent / "workspace"
VERSION_ERROR = "modified by an inplace operation"
# The hand-written out-of-place rewrite of each labelled line.
REWRITES = {"GG102": ("F.relu(g, inplace=True)", "F.relu(g)"), "GG101": ("e += 1", "e = e + 1")}
# The op whose saved output each hazard overwrites, as torch names it in the error.
SAVER = {"GG102": "Sigmoid", "GG101": "Exp"}


def labels(text: str) -> dict[str, int]:
    out = {}
    for i, line in enumerate(text.splitlines(), 1):
        m = re.search(r"# hazard: (GG\d{3})", line)
        if m:
            out[m.group(1)] = i
    return out


def run(text: str, tmp_path: Path, name: str = "model.py") -> subprocess.CompletedProcess[str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=WS)


def rewrite(text: str, codes: list[str]) -> str:
    lines = text.splitlines(keepends=True)
    for code in codes:
        i = labels(text)[code] - 1
        old, new = REWRITES[code]
        assert old in lines[i], (code, lines[i])
        lines[i] = lines[i].replace(old, new)
    return "".join(lines)


def test_labels_present() -> None:
    assert set(labels((WS / "model.py").read_text())) == {"GG101", "GG102"}


@pytest.mark.parametrize("hazard", ["GG101", "GG102"])
def test_each_hazard_alone_breaks_backward(hazard: str, tmp_path: Path) -> None:
    text = (WS / "model.py").read_text()
    others = [c for c in REWRITES if c != hazard]
    r = run(rewrite(text, others), tmp_path)
    assert r.returncode != 0
    assert VERSION_ERROR in r.stderr and f"output 0 of {SAVER[hazard]}" in r.stderr, r.stderr[-800:]


def test_both_rewritten_runs_clean(tmp_path: Path) -> None:
    text = (WS / "model.py").read_text()
    r = run(rewrite(text, list(REWRITES)), tmp_path)
    assert r.returncode == 0, r.stderr[-800:]
    assert "backward ok" in r.stdout


def test_fail_run_fails_at_run_time() -> None:
    r = subprocess.run([sys.executable, "fail_run.py"], capture_output=True, text=True, timeout=120, cwd=WS)
    assert r.returncode != 0
    assert VERSION_ERROR in r.stderr and "output 0 of Sigmoid" in r.stderr


def test_on_save_fixture_fails_and_its_rewrite_runs_clean(tmp_path: Path) -> None:
    text = (WS / "on_save.py").read_text()
    assert list(labels(text)) == ["GG101"]
    r = run(text, tmp_path, "on_save.py")
    assert r.returncode != 0 and VERSION_ERROR in r.stderr and "output 0 of Sigmoid" in r.stderr
    r = run(text.replace("y.mul_(2)", "y = y.mul(2)"), tmp_path, "on_save.py")
    assert r.returncode == 0 and "backward ok" in r.stdout, r.stderr[-800:]


def test_notebook_cells_in_order_fail_at_the_labelled_cell(tmp_path: Path) -> None:
    import json

    cells = [c for c in json.loads((WS / "notebook.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in cells]
    assert [bool(labels(s)) for s in sources] == [False, True]
    r = run("\n".join(sources) + "\n", tmp_path, "nb.py")
    assert r.returncode != 0 and VERSION_ERROR in r.stderr and "output 0 of Exp" in r.stderr
    r = run(sources[0] + "\n", tmp_path, "nb.py")
    assert r.returncode == 0, r.stderr[-800:]
