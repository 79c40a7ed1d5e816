"""Language server latency: didChange -> publishDiagnostics, gradguard vs ruff server, same client, same run.

    .venv/bin/python benchmarks/bench_lsp.py [--edits 30] [--sizes 1000,5000] [--cold 3] [--no-ruff] [--cold-only]

Files: real model code, whole timm model files concatenated (``from __future__`` lines dropped) and cut at
the last top-level statement ending before the target line count. Each of the ``--edits`` incremental edits
appends a comment to a different line in the middle of the file (so the file stays valid); the client waits
for that version's publishDiagnostics before sending the next edit. gradguard runs twice: with its default
debounce (what an editor gets, and what the target compares with ruff) and with ``debounceMs: 0`` (the check
alone); ruff has no debounce. Cold start: process spawn -> initialize ->
didOpen -> first publishDiagnostics, median of ``--cold`` runs, also for the VS Code extension's bundled server
(bundled/libs run through client/launcher/launch.py with ``-I``, as the editor starts it).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as T
from pygls.lsp.client import LanguageClient
from pygls.protocol import LanguageServerProtocol

ROOT = Path(__file__).resolve().parent.parent


def timm_dir() -> str:
    import importlib.util

    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("timm is not installed (make setup installs timm==1.0.31)")
    return os.path.join(next(iter(spec.submodule_search_locations)), "models")


def model_text(n_lines: int) -> str:
    files = sorted(glob.glob(os.path.join(timm_dir(), "*.py")))
    parts: list[str] = []
    total = 0
    for f in files:
        text = Path(f).read_text(encoding="utf-8")
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("from __future__"))
        parts.append(text + "\n")
        total += text.count("\n") + 1
        if total >= n_lines + 200:
            break
    src = "".join(parts)
    ends = [node.end_lineno or 0 for node in ast.parse(src).body]
    end = min(ends, key=lambda e: abs(e - n_lines))  # the top-level statement boundary nearest the target
    return "\n".join(src.splitlines()[:end]) + "\n"


class LenientProtocol(LanguageServerProtocol):
    """Keeps initialize results as plain JSON: ruff announces notebook options lsprotocol cannot structure."""

    def get_result_type(self, method: str) -> Any:
        return None if method == T.INITIALIZE else super().get_result_type(method)


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("bench-lsp", "1", protocol_cls=LenientProtocol)
        self.arrivals: list[tuple[float, str, int | None, int]] = []
        self.event = asyncio.Event()
        self.stderr_task: asyncio.Future[None] | None = None

        @self.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _publish(params: T.PublishDiagnosticsParams) -> None:
            self.arrivals.append((time.perf_counter(), params.uri, params.version, len(params.diagnostics)))
            self.event.set()

        @self.feature(T.WINDOW_LOG_MESSAGE)
        def _log(params: T.LogMessageParams) -> None:
            pass

        @self.feature(T.WORKSPACE_CONFIGURATION)
        def _configuration(params: T.ConfigurationParams) -> list[Any]:
            return [None for _ in params.items]

        @self.feature(T.CLIENT_REGISTER_CAPABILITY)
        def _register(params: T.RegistrationParams) -> None:
            return None

    async def wait_publish(self, uri: str, since: int, timeout: float = 120.0) -> tuple[float, int]:
        end = time.perf_counter() + timeout
        while True:
            for t, u, _v, n in self.arrivals[since:]:
                if u == uri:
                    return t, n
            self.event.clear()
            left = end - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no publishDiagnostics for {uri}")
            try:
                await asyncio.wait_for(self.event.wait(), left)
            except asyncio.TimeoutError:
                pass


def caps() -> T.ClientCapabilities:
    return T.ClientCapabilities(
        text_document=T.TextDocumentClientCapabilities(
            synchronization=T.TextDocumentSyncClientCapabilities(did_save=True),
            publish_diagnostics=T.PublishDiagnosticsClientCapabilities(version_support=True,
                                                                       related_information=True)),
        window=T.WindowClientCapabilities(work_done_progress=False),
    )


async def drain(stream: Any) -> None:
    while stream is not None and await stream.readline():
        pass


async def start(cmd: list[str], init: Any, root: Path) -> Client:
    c = Client()
    await c.start_io(cmd[0], *cmd[1:], cwd=str(root))
    assert c._server is not None
    c.stderr_task = asyncio.ensure_future(drain(c._server.stderr))
    await c.initialize_async(T.InitializeParams(
        capabilities=caps(), process_id=os.getpid(), root_uri=root.as_uri(), initialization_options=init,
        workspace_folders=[T.WorkspaceFolder(uri=root.as_uri(), name="bench")]))
    c.initialized(T.InitializedParams())
    return c


async def stop(c: Client) -> None:
    try:
        await asyncio.wait_for(c.shutdown_async(None), 10)
        c.exit(None)
    except Exception:
        pass
    if c._server is not None and c._server.returncode is None:
        try:
            await asyncio.wait_for(c._server.wait(), 5)
        except asyncio.TimeoutError:
            c._server.kill()
    try:
        await asyncio.wait_for(c.stop(), 5)
    except Exception:
        pass


def open_doc(c: Client, uri: str, text: str) -> None:
    c.text_document_did_open(T.DidOpenTextDocumentParams(
        text_document=T.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))


async def latency(cmd: list[str], init: Any, root: Path, text: str, edits: int) -> tuple[list[float], int, float]:
    """(latencies ms, diagnostics in the last publish, server CPU ms per edit)."""
    c = await start(cmd, init, root)
    try:
        path = root / f"model_{len(text.splitlines())}.py"
        path.write_text(text, encoding="utf-8")
        uri = path.as_uri()
        open_doc(c, uri, text)
        _, n_diags = await c.wait_publish(uri, 0)
        lines = text.splitlines()
        mid = len(lines) // 2
        out = []
        pid = c._server.pid if c._server is not None else -1
        cpu0 = cpu_ms(pid)
        for i in range(edits):
            line = mid + i
            col = len(lines[line])
            since = len(c.arrivals)
            t0 = time.perf_counter()
            c.text_document_did_change(T.DidChangeTextDocumentParams(
                text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                content_changes=[T.TextDocumentContentChangePartial(
                    range=T.Range(start=T.Position(line=line, character=col), end=T.Position(line=line, character=col)),
                    text=f"  # edit {i}")]))
            t1, n_diags = await c.wait_publish(uri, since)
            out.append((t1 - t0) * 1000)
        return out, n_diags, (cpu_ms(pid) - cpu0) / max(edits, 1)
    finally:
        await stop(c)


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from /proc (nan elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


async def cold_start(cmd: list[str], init: Any, root: Path, text: str) -> tuple[float, float]:
    """(wall ms, server CPU ms) from spawn to the first publishDiagnostics."""
    t0 = time.perf_counter()
    c = await start(cmd, init, root)
    try:
        path = root / "cold.py"
        path.write_text(text, encoding="utf-8")
        open_doc(c, path.as_uri(), text)
        t1, _ = await c.wait_publish(path.as_uri(), 0)
        cpu = cpu_ms(c._server.pid) if c._server is not None else float("nan")
        return (t1 - t0) * 1000, cpu
    finally:
        await stop(c)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    k = max(0, min(len(s) - 1, round(q * (len(s) - 1))))
    return s[k]


async def main_async(args: argparse.Namespace) -> None:
    py = sys.executable
    servers: list[tuple[str, list[str], Any]] = [
        # The editor's experience: the default debounce (100 ms; the check starts at once and is published when the
        # debounce has passed, so an edit costs max(debounce, check)). The target is measured on this row.
        ("gradguard lsp (default debounce)", [py, "-m", "gradguard", "lsp"], None),
        ("gradguard lsp (debounceMs 0)", [py, "-m", "gradguard", "lsp"], {"debounceMs": 0}),
    ]
    # What VS Code starts: the VSIX's bundled server (bundled/libs, `make vsix`) through the launcher, with -I and
    # a plain interpreter (a system Python with nothing installed does the same). Cold start only.
    root_dir = Path(__file__).resolve().parents[1]
    libs, launcher = root_dir / "bundled" / "libs", root_dir / "client" / "launcher" / "launch.py"
    bundled = [("VS Code bundled server", [py, "-I", str(launcher), "--libs", str(libs), "lsp"],
                {"debounceMs": 0})] if (libs / "gradguard").is_dir() and launcher.is_file() else []
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not args.no_ruff and os.path.exists(ruff):
        servers.append(("ruff server (default rules)", [ruff, "server"], None))
        servers.append(("ruff server (select=ALL)", [ruff, "server"], {"settings": {"lint": {"select": ["ALL"]}}}))
    sizes = [int(s) for s in args.sizes.split(",")]
    texts = {n: model_text(n) for n in sizes}
    print(f"timm model code from {timm_dir()}")
    for n, t in texts.items():
        print(f"  target {n} lines -> {len(t.splitlines())} lines, {len(t)} characters")
    print(f"{args.edits} incremental edits per file; latency = didChange sent -> publishDiagnostics received (ms); "
          "cpu/edit = server CPU time (user+sys) per edit, ms")
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print(f"{'server':34s} {'lines':>6s} {'diags':>6s} {'p50':>8s} {'p95':>8s} {'max':>8s} {'cpu/edit':>9s}")
    with tempfile.TemporaryDirectory(prefix="bench-lsp-") as d:
        root = Path(d)
        for name, cmd, init in servers if not args.cold_only else []:
            for n in sizes:
                lat, nd, cpu = await latency(cmd, init, root, texts[n], args.edits)
                print(f"{name:34s} {len(texts[n].splitlines()):6d} {nd:6d} {pct(lat, 0.5):8.1f} {pct(lat, 0.95):8.1f} "
                      f"{max(lat):8.1f} {cpu:9.1f}", flush=True)
        print(f"\ncold start: spawn -> initialize -> didOpen -> first publishDiagnostics "
              f"({len(texts[sizes[0]].splitlines())}-line file), median of {args.cold} (ms); server CPU time "
              "until then (user+sys, less sensitive to a loaded machine)")
        print(f"{'server':30s} {'wall':>8s} {'cpu':>8s}")
        for name, cmd, init in servers + bundled:
            runs = [await cold_start(cmd, init, root, texts[sizes[0]]) for _ in range(args.cold)]
            wall = [r[0] for r in runs]
            cpu = [r[1] for r in runs]
            print(f"{name:30s} {statistics.median(wall):8.0f} {statistics.median(cpu):8.0f}   "
                  f"(wall runs: {', '.join(f'{r:.0f}' for r in wall)})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=30)
    ap.add_argument("--sizes", default="1000,5000")
    ap.add_argument("--cold", type=int, default=3)
    ap.add_argument("--no-ruff", action="store_true")
    ap.add_argument("--cold-only", action="store_true", help="only the cold start (the editor's first diagnostics)")
    args = ap.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
