"""`gradguard run` with an interpreter that has no torch says so in one line (not the script's traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path


def test_torch_missing_is_one_clear_line(tmp_path: Path) -> None:
    env_dir = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    bare = env_dir / "bin" / "python"
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint('unreachable')\n")
    r = subprocess.run([sys.executable, "-m", "gradguard", "run", "--python", str(bare), str(script)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip() == (f"gradguard run: torch is not installed in {bare}; use --python PATH (an interpreter "
                                "that has torch), or install torch there"), r.stderr
    r = subprocess.run([sys.executable, "-m", "gradguard", "run", "--format", "json", "--python", str(bare),
                        str(script)], capture_output=True, text=True, timeout=120)
    report = json.loads(r.stdout)
    assert report["status"] == "failed" and report["error"]["type"] == "TorchNotInstalled"
    assert "Traceback" not in r.stderr
