"""Nothing next to the script (or in the working directory) replaces the runtime doctor's own modules, while the
script itself still runs as ``python script.py`` would: its directory first on sys.path. No torch needed."""

from __future__ import annotations

import os
from pathlib import Path

from gradguard.runtime.api import run_script

# Modules the tracer imports (several of them only after the script has run: runpy, traceback, signal...).
SHADOWS = ("runpy", "traceback", "json", "ast", "weakref", "signal", "linecache", "sysconfig", "re")


def test_script_dir_and_cwd_cannot_replace_the_tracer(tmp_path: Path, monkeypatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    markers = tmp_path / "markers"
    markers.mkdir()
    for name in SHADOWS:
        (ws / f"{name}.py").write_text(
            f"import os\nopen(os.path.join({str(markers)!r}, {name!r}), 'w').close()\n")
    (ws / "helper.py").write_text("VALUE = 'the script directory comes first'\n")
    (ws / "script.py").write_text(
        "import sys, helper\n"
        "print('script ran;', helper.VALUE, ';', sys.path[0])\n"
        "raise ValueError('boom')\n")
    # An empty PYTHONPATH component puts the working directory (here: the script's) on sys.path too.
    monkeypatch.setenv("PYTHONPATH", os.pathsep + os.environ.get("PYTHONPATH", ""))
    out: list[str] = []
    rep = run_script(str(ws / "script.py"), cwd=str(ws), on_output=out.append, timeout=60)
    text = "".join(out)
    assert "script ran; the script directory comes first ; " + str(ws) in text, text
    assert rep["exit_code"] == 1 and rep["error"]["type"] == "ValueError", rep
    assert "ValueError: boom" in text  # printed by the (real) traceback module
    assert sorted(os.listdir(markers)) == [], text
