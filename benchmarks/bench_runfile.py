"""Where the time of Run File goes, on a 7-line script that fails in backward. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/bench_runfile.py [--repeat N] [--python PATH]

Each line is the median wall time of N runs of one command, in its own process, so that the differences between
lines are what each step adds:

  - the interpreter starting (`python -c pass`), the anchor nothing can go below;
  - `import torch`;
  - the script run plainly (`python script.py`: start, torch, the model, the failing backward, the traceback);
  - the script under anomaly mode alone (what `torch.autograd.set_detect_anomaly(True)` costs by itself);
  - `gradguard run` (the doctor: gradguard's CLI, the child interpreter, anomaly mode, the write log, the report);
  - the same through the language server's `gradguard.runFile` command, as the editor runs it (initialize,
    open the file, execute the command, wait for the result).

What is ours is the doctor's line minus the plain run's; the rest is Python and torch.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SCRIPT = textwrap.dedent("""\
    import torch

    x = torch.randn(8, 4, requires_grad=True)
    w = torch.randn(4, 4, requires_grad=True)
    y = torch.sigmoid(x @ w)
    y.mul_(2)
    y.sum().backward()
""")

ANOMALY = "import runpy, sys, torch; torch.autograd.set_detect_anomaly(True); runpy.run_path(sys.argv[1], run_name='__main__')"


def timed(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


async def via_lsp(python: str, script: Path) -> float:
    from lsprotocol import types as T
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("bench", "1")
    await client.start_io(python, "-m", "gradguard", "lsp")
    t = time.perf_counter()
    await client.initialize_async(T.InitializeParams(capabilities=T.ClientCapabilities(),
                                                     root_uri=script.parent.as_uri()))
    client.initialized(T.InitializedParams())
    uri = script.as_uri()
    client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=script.read_text())))
    await client.workspace_execute_command_async(T.ExecuteCommandParams(command="gradguard.runFile",
                                                                        arguments=[uri]))
    dt = time.perf_counter() - t
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    logging.getLogger("pygls").setLevel(logging.ERROR)  # (the client ignores the server's log notifications)
    py = args.python
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores (figures above the core count are noise)")
    with tempfile.TemporaryDirectory(prefix="gg-runfile-") as tmp:
        script = Path(tmp) / "fail_run.py"
        script.write_text(SCRIPT, encoding="utf-8")
        gg = [py, "-m", "gradguard", "run", "--format", "json", str(script)]
        rows = [
            ("interpreter start (python -c pass)", timed([py, "-c", "pass"], args.repeat)),
            ("import torch", timed([py, "-c", "import torch"], args.repeat)),
            ("plain run (python fail_run.py)", timed([py, str(script)], args.repeat)),
            ("anomaly mode alone", timed([py, "-c", ANOMALY, str(script)], args.repeat)),
            ("gradguard run (the doctor)", timed(gg, args.repeat)),
        ]
        lsp = [asyncio.run(via_lsp(py, script)) for _ in range(args.repeat)]
        rows.append(("gradguard.runFile via the language server", statistics.median(lsp)))
        width = max(len(r[0]) for r in rows)
        for name, secs in rows:
            print(f"  {name:<{width}}  {secs * 1000:8.0f} ms")
        plain = rows[2][1]
        doctor = rows[4][1]
        print(f"  {'ours (doctor - plain run)':<{width}}  {(doctor - plain) * 1000:8.0f} ms")


if __name__ == "__main__":
    main()
