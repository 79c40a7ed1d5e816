"""Checking a huge document in a child process.

The analysis of a 10 MB file takes a minute, and parts of it are single C calls that hold the GIL for
seconds (``ast.parse`` alone): in a worker thread it would freeze the event loop and every other document's
check. In a child process it runs beside them, and a newer version of the document (or ``exit``) kills it at
once instead of waiting for a result nobody wants.

The child is ``python -I`` (no working directory, ``PYTHONPATH`` or user site on ``sys.path`` until it sets the
server's own ``sys.path``: nothing from the workspace is imported, see docs/lsp.md "Untrusted code"), started
in the server's package directory; it reads the server's ``sys.path``, then ``{text, path, config}``, as pickles
on stdin and writes the findings as a pickle on stdout.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from gradguard.config import Config
from gradguard.model import Finding

# Two pickles: sys.path first (plain strings), then the job, whose Config can only be unpickled once gradguard
# is importable from the server's own sys.path.
_BOOT = ("import pickle, sys\n"
         "sys.path[:] = pickle.load(sys.stdin.buffer)\n"
         "from gradguard.lsp.isolated import child_main\n"
         "child_main(pickle.load(sys.stdin.buffer))\n")


class Cancelled(Exception):
    """The check was superseded (or the server is exiting): its child was killed."""


def child_main(job: dict[str, Any]) -> None:
    from gradguard.api import check_source

    findings = check_source(job["text"], job["path"], job["config"], fixes=True)
    out = sys.stdout.buffer
    pickle.dump(findings, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()


def check_in_child(text: str, path: str, config: Config, cancelled: Callable[[], bool],
                   procs: set[subprocess.Popen[bytes]], lock: threading.Lock) -> list[Finding]:
    """``api.check_source(text, path, config)`` in a child process. Raises :class:`Cancelled` when
    ``cancelled()`` turns true while it runs (the child is killed), RuntimeError when the child fails. ``procs``
    holds the running children (under ``lock``) for the server to kill when it exits."""
    job = pickle.dumps(list(sys.path)) + pickle.dumps({"text": text, "path": path, "config": config},
                                                      protocol=pickle.HIGHEST_PROTOCOL)
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.Popen([sys.executable, "-I", "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=here)
    with lock:
        procs.add(proc)
    result: dict[str, Any] = {}

    def talk() -> None:
        try:
            result["out"], result["err"] = proc.communicate(job)
        except Exception as e:  # pragma: no cover - a broken pipe after a kill
            result["error"] = e

    t = threading.Thread(target=talk, name="gradguard-large-io", daemon=True)
    t.start()
    try:
        while t.is_alive():
            if cancelled():
                proc.kill()
                t.join(5)
                raise Cancelled()
            t.join(0.05)
    finally:
        with lock:
            procs.discard(proc)
        if proc.poll() is None:  # pragma: no cover - only after an error above
            proc.kill()
    if proc.returncode != 0 or "out" not in result:
        err = (result.get("err") or b"").decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"the child process checking {path} failed (exit {proc.returncode}): "
                           f"{err[-1] if err else result.get('error', 'no output')}")
    findings = pickle.loads(result["out"])
    return list(findings)
