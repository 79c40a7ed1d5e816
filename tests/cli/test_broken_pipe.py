"""Output into a pipe whose reader has gone (`gradguard rule GG000 | head -1`) ends the command quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SERVER = str(Path(__file__).resolve().parents[2] / "server")


@pytest.mark.parametrize("args", [["rule", "GG000"], ["rule"], ["check", "hazard.py"]])
def test_closed_stdout_exits_without_traceback(args: list[str], tmp_path: Path) -> None:
    (tmp_path / "hazard.py").write_text("import torch\nx = torch.randn(3, requires_grad=True)\ny = x.exp()\ny += 1\n")
    read_end, write_end = os.pipe()
    os.close(read_end)  # no reader from the start: the first write that reaches the pipe fails with EPIPE
    try:
        r = subprocess.run([sys.executable, "-m", "gradguard", *args], stdout=write_end, stderr=subprocess.PIPE,
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": SERVER}, timeout=60)
    finally:
        os.close(write_end)
    assert r.stderr.decode() == ""
    assert r.returncode == 1


def test_head_reads_the_first_line(tmp_path: Path) -> None:
    cmd = f"{sys.executable} -m gradguard rule GG000 | head -1"
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": SERVER}, timeout=60)
    assert r.stdout.startswith("# GG000")
    assert r.stderr == ""
