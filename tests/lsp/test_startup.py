"""Startup: importing and building the server never imports torch."""

from __future__ import annotations

import subprocess
import sys


def test_startup_does_not_import_torch(tmp_path):
    """Importing and building the server must not import torch (a real session is checked below too)."""
    code = ("import sys; from gradguard.lsp.server import build_server; build_server(); "
            "import gradguard.api, gradguard.lsp.hover; "
            "sys.exit(3 if 'torch' in sys.modules else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
