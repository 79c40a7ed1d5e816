"""Run a script under the runtime doctor and get the report: the API behind ``gradguard run`` and the language
server's ``gradguard.runFile`` command.

Importing this module does not import torch (the child process does). ``run_script`` is safe to call from a
worker thread: it uses no signals, no global state, and a fresh temporary directory per call.
"""

from __future__ import annotations

import codecs
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from gradguard.runtime.report import build_report

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_child.py")

#: How long the script gets to exit after SIGINT/SIGTERM before the whole process group is killed.
GRACE_S = 3.0


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _stop(proc: subprocess.Popen, first: int) -> None:
    """Send ``first`` to the script's process group, then SIGKILL the group if it is still there."""
    _kill_group(proc, first)
    try:
        proc.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc, signal.SIGKILL)  # the children (DataLoader workers...) too, even if the script exited
    try:
        proc.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        pass


def _pump(stream: IO[bytes], sink: Callable[[str], None], lock: threading.Lock) -> None:
    """Forward one stream to ``sink``: whole lines as they come (so that stdout and stderr interleave by line),
    and a pending partial line (a prompt, a progress bar) after 0.2 s of quiet."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    fd = stream.fileno()
    pending = ""

    def emit(text: str) -> None:
        if not text:
            return
        with lock:
            try:
                sink(text)
            except Exception:  # a broken callback must not kill the run
                pass

    while True:
        if pending:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                emit(pending)
                pending = ""
                continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        pending += dec.decode(chunk)
        cut = pending.rfind("\n") + 1
        if cut:
            emit(pending[:cut])
            pending = pending[cut:]
    emit(pending + dec.decode(b"", final=True))
    stream.close()


def run_script(
    path: str,
    args: Sequence[str] = (),
    python: str | None = None,
    timeout: float | None = None,
    cwd: str | None = None,
    on_output: Callable[[str], None] | None = None,
    *,
    module: bool = False,
    check_nan: bool = False,
    trace: bool = True,
    output: str = "callback",
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Run ``path`` (or, with ``module=True``, ``python -m path``) with ``args`` under the runtime doctor.

    Returns the report: ``{status: "error"|"clean"|"failed", exit_code, error: {type, message} | None,
    culprits: [{path, line, column, op, message, ...}], saved_by: [{path, line, op, ...}], diagnostics: [...]}``.

    - ``python``: the interpreter to run the script with (default: this one). It needs torch, not gradguard.
    - ``timeout``: seconds; the script and its child processes are stopped after it (status "failed").
    - ``cwd``: working directory of the script (default: the current one).
    - ``on_output``: called with the script's stdout and stderr text as it arrives (from reader threads, one call
      at a time). Without it the output is discarded (``output="callback"``); the CLI uses ``output="inherit"``
      (the script writes to this process's stdout/stderr) or ``output="stderr"`` (both to this stderr).
    - ``cancel``: set this event to stop the script (and its children) early; the report says "failed".
    """
    python = python or sys.executable
    if module:
        target = path
    else:
        target = os.path.abspath(os.path.join(cwd, path) if cwd and not os.path.isabs(path) else path)
    tmp = tempfile.mkdtemp(prefix="gradguard-run-")
    facts_path = os.path.join(tmp, "facts.json")
    env = dict(os.environ)
    env["GRADGUARD_RUN_CHECK_NAN"] = "1" if check_nan else "0"
    env["GRADGUARD_RUN_TRACE"] = "1" if trace else "0"
    cmd = [python, CHILD, facts_path, "module" if module else "path", target, *args]
    stdin: Any = None
    stdout: Any = None
    stderr: Any = None
    if output == "callback":
        stdin = subprocess.DEVNULL
        if on_output is not None:
            stdout = stderr = subprocess.PIPE
            env["PYTHONUNBUFFERED"] = "1"
        else:
            stdout = stderr = subprocess.DEVNULL
    elif output == "stderr":
        stdout = sys.stderr.fileno() if _has_fileno(sys.stderr) else subprocess.DEVNULL
    start = time.monotonic()
    timed_out = interrupted = False
    try:
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                                    start_new_session=True)
        except OSError as e:
            return build_report(None, exit_code=None, target=target, launch_error=f"cannot start {python}: {e}")
        pumps = []
        if stdout is subprocess.PIPE and on_output is not None:
            lock = threading.Lock()
            for s in (proc.stdout, proc.stderr):
                assert s is not None
                th = threading.Thread(target=_pump, args=(s, on_output, lock), daemon=True)
                th.start()
                pumps.append(th)
        deadline = None if timeout is None else start + timeout
        try:
            while True:
                step = 0.1 if cancel is not None else 1.0
                if deadline is not None:
                    step = max(0.0, min(step, deadline - time.monotonic()))
                try:
                    proc.wait(step)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out = True
                    _stop(proc, signal.SIGTERM)
                    break
                if cancel is not None and cancel.is_set():
                    interrupted = True
                    _stop(proc, signal.SIGINT)
                    break
        except KeyboardInterrupt:
            interrupted = True
            _stop(proc, signal.SIGINT)
        for th in pumps:
            th.join(5.0)
        elapsed = time.monotonic() - start
        facts = None
        try:
            with open(facts_path, encoding="utf-8") as fh:
                facts = json.load(fh)
        except (OSError, ValueError):
            facts = None
        return build_report(facts, exit_code=proc.returncode, target=target, timed_out=timed_out, timeout=timeout,
                            interrupted=interrupted, elapsed=elapsed)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):
        return False
