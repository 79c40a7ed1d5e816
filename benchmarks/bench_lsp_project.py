"""Language server, whole project: editing an open model file -> the open training script's diagnostics; peak memory
on a large workspace. Real LSP traffic over stdio (the client of benchmarks/bench_lsp.py).

    .venv/bin/python benchmarks/bench_lsp_project.py [--edits 20] [--model-lines 2000] [--workspace DIR]
                                                     [--open 20] [--no-check-workspace] [--skip-memory]
                                                     [--skip-latency]

1. Cross-file latency. Two workspaces, both with ``train.py`` and the edited model file open:
   - ``flat``: ``models.py`` is real timm model code (``--model-lines``, as bench_lsp.py cuts it) with a ``Block``
     appended whose last layer each edit switches between ``nn.ReLU()`` (saves its output: ``train.py``'s
     ``out += 1`` is a GG101) and ``nn.BatchNorm2d(ch)`` (nothing saved: no finding). Every edit must flip what
     ``train.py`` shows; the count of edits that did is printed.
   - ``timm``: a copy of the installed timm package is the workspace; ``train.py`` builds ``resnet50`` and edits its
     output in place; each edit appends a comment to a line of the open ``timm/models/resnet.py``.
   Latency: didChange of the model file sent -> publishDiagnostics for ``train.py`` received, p50/p95 over
   ``--edits`` edits, with the default debounce (100 ms, included) and with ``debounceMs: 0``. The anchors are
   measured in the same run: the model file's own publishDiagnostics after the same edits (the single-file round
   trip), and ``ast.parse`` of the model file and ``train.py`` (median of 20).

2. Memory. The workspace is ``--workspace`` (default: the installed transformers' ``models/`` tree, else the timm
   package copy). ``--open`` files of it are opened (the largest ``modeling_*.py`` / model files), then
   ``gradguard.checkWorkspace`` checks every file. Printed: the server's RSS after initialize, after the opens,
   and its peak (VmHWM) at the end; anchor: ``ast.parse`` of every file of the workspace, time (one pass). Huge
   files (over 1 M characters) are checked in child processes whose memory is not the server's (none in either
   tree).

Nothing is asserted: figures are printed (docs/lsp.md quotes them).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import glob
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lsp import Client, cpu_ms, model_text, open_doc, pct, start, stop

BLOCK = """

class Block(nn.Module):
    def __init__(self, ch=4):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.conv(x))
"""
ACTS = ("        self.act = nn.ReLU()", "        self.act = nn.BatchNorm2d(ch)")

TRAIN_FLAT = """import torch
import torch.nn as nn

from models import Block


def main():
    stem, block = nn.Conv2d(3, 4, 1), Block(4)
    opt = torch.optim.SGD([*stem.parameters(), *block.parameters()], lr=0.1)
    for _ in range(10):
        x = torch.randn(8, 3, 16, 16)
        out = block(stem(x))
        out += 1
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""

TRAIN_TIMM = """import torch

from timm.models.resnet import resnet50


def main():
    model = resnet50(num_classes=10)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(10):
        x = torch.randn(4, 3, 64, 64)
        feats = model.forward_features(x)
        feats += 1
        loss = model.forward_head(feats).logsumexp(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""


def package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return next(iter(spec.submodule_search_locations))


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return float("nan")


def parse_ms(texts: list[str], repeat: int = 20) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for t in texts:
            ast.parse(t)
        runs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(runs)


def edit(c: Client, uri: str, version: int, line: int, start_char: int, end_char: int, text: str) -> None:
    c.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[T.TextDocumentContentChangePartial(
            range=T.Range(start=T.Position(line=line, character=start_char),
                          end=T.Position(line=line, character=end_char)), text=text)]))


async def wait_version(c: Client, uri: str, since: int, version: int, timeout: float = 120.0) -> tuple[float, int]:
    """The first publishDiagnostics for ``uri`` after ``since`` with this version (train.py keeps version 1)."""
    end = time.perf_counter() + timeout
    while True:
        for t, u, v, n in c.arrivals[since:]:
            if u == uri and v == version:
                return t, n
        c.event.clear()
        left = end - time.perf_counter()
        if left <= 0:
            raise TimeoutError(f"no publishDiagnostics for {uri} version {version}")
        try:
            await asyncio.wait_for(c.event.wait(), left)
        except asyncio.TimeoutError:
            pass


async def cross_file(root: Path, model: Path, train: Path, toggle: bool, init: Any, edits: int) -> dict[str, Any]:
    """Edits of the open ``model`` -> publishDiagnostics for the open ``train``."""
    c = await start([sys.executable, "-m", "gradguard", "lsp"], init, root)
    try:
        m_uri, t_uri = model.as_uri(), train.as_uri()
        m_text, t_text = model.read_text(encoding="utf-8"), train.read_text(encoding="utf-8")
        open_doc(c, t_uri, t_text)
        _, first = await wait_version(c, t_uri, 0, 1)
        since = len(c.arrivals)
        open_doc(c, m_uri, m_text)
        await wait_version(c, m_uri, since, 1)
        try:  # opening the model file re-checks train.py too (the buffer may differ from the disk): let it land
            await wait_version(c, t_uri, since, 1, timeout=3.0)
        except TimeoutError:
            pass
        await asyncio.sleep(0.3)
        lines = m_text.splitlines()
        pid = c._server.pid if c._server is not None else -1
        own, dep, counts = [], [], [first]
        cpu0 = cpu_ms(pid)
        if toggle:
            act_line = len(lines) - 1 - lines[::-1].index(ACTS[0])  # Block's, the last one
        for i in range(edits):
            version = i + 2
            since = len(c.arrivals)
            t0 = time.perf_counter()
            if toggle:
                old, new = ACTS[i % 2], ACTS[(i + 1) % 2]
                edit(c, m_uri, version, act_line, 0, len(old), new)
            else:
                line = len(lines) // 2 + i
                edit(c, m_uri, version, line, len(lines[line]), len(lines[line]), f"  # edit {i}")
            t_own, _ = await wait_version(c, m_uri, since, version)
            t_dep, n = await wait_version(c, t_uri, since, 1)
            own.append((t_own - t0) * 1000)
            dep.append((t_dep - t0) * 1000)
            counts.append(n)
        cpu = (cpu_ms(pid) - cpu0) / max(edits, 1)
        ok = sum(1 for i in range(1, len(counts)) if (counts[i] != counts[0]) == (i % 2 == 1)) if toggle else None
        return {"own": own, "dep": dep, "cpu": cpu, "first": first, "flipped": ok,
                "order": sum(1 for a, b in zip(own, dep) if a <= b), "rss": rss_mb(pid, "VmHWM")}
    finally:
        await stop(c)


def flat_workspace(root: Path, n_lines: int) -> tuple[Path, Path]:
    root.mkdir()
    text = "import torch.nn as nn\n\n" + model_text(n_lines) + BLOCK
    (root / "models.py").write_text(text, encoding="utf-8")
    (root / "train.py").write_text(TRAIN_FLAT, encoding="utf-8")
    return root / "models.py", root / "train.py"


def timm_workspace(root: Path) -> tuple[Path, Path] | None:
    src = package_dir("timm")
    if src is None:
        return None
    shutil.copytree(src, root / "timm", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "train.py").write_text(TRAIN_TIMM, encoding="utf-8")
    return root / "timm" / "models" / "resnet.py", root / "train.py"


async def memory(ws: Path, n_open: int, check: bool) -> None:
    files = sorted(glob.glob(str(ws / "**" / "*.py"), recursive=True))
    texts = {}
    t0 = time.perf_counter()
    n_lines = 0
    for f in files:
        try:
            t = Path(f).read_text(encoding="utf-8")
            ast.parse(t)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        texts[f] = len(t)
        n_lines += t.count("\n")
    parse_s = time.perf_counter() - t0
    modeling = [f for f in texts if os.path.basename(f).startswith("modeling_")] or list(texts)
    to_open = sorted(modeling, key=lambda f: -texts[f])[:n_open]
    print(f"\nmemory: workspace {ws} ({len(files)} files, {n_lines} lines); reading + ast.parse of all of it: "
          f"{parse_s:.1f} s (anchor)")
    c = await start([sys.executable, "-m", "gradguard", "lsp"], None, ws)
    try:
        pid = c._server.pid if c._server is not None else -1
        await asyncio.sleep(1.0)  # the prewarm check
        base = rss_mb(pid)
        t0 = time.perf_counter()
        for f in to_open:
            since = len(c.arrivals)
            uri = Path(f).as_uri()
            open_doc(c, uri, Path(f).read_text(encoding="utf-8"))
            await wait_version(c, uri, since, 1, timeout=600)
        opened = time.perf_counter() - t0
        print(f"  server RSS after initialize: {base:.0f} MB")
        print(f"  after opening the {len(to_open)} largest model files one by one ({opened:.1f} s): "
              f"RSS {rss_mb(pid):.0f} MB, peak {rss_mb(pid, 'VmHWM'):.0f} MB")
        if check:
            t0 = time.perf_counter()
            got = await c.workspace_execute_command_async(T.ExecuteCommandParams(command="gradguard.checkWorkspace"))
            took = time.perf_counter() - t0
            print(f"  gradguard.checkWorkspace: {got} in {took:.0f} s ({took / max(parse_s, 1e-9):.1f}x the parse "
                  f"anchor): RSS {rss_mb(pid):.0f} MB, peak {rss_mb(pid, 'VmHWM'):.0f} MB")
        print(f"  peak RSS of the server (VmHWM): {rss_mb(pid, 'VmHWM'):.0f} MB (target: under 1024 MB)")
    finally:
        await stop(c)


async def main_async(args: argparse.Namespace) -> None:
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{args.edits} edits per run; latency = didChange of the model file sent -> publishDiagnostics received (ms); "
          "cpu/edit = server CPU time per edit (ms)\n")
    with tempfile.TemporaryDirectory(prefix="bench-lsp-project-") as d:
        cases = [("flat", *flat_workspace(Path(d) / "flat", args.model_lines), True)]
        timm = timm_workspace(Path(d) / "timm")
        if timm is not None:
            cases.append(("timm", *timm, False))
        if args.skip_latency:
            cases = []
        print(f"{'workspace':9s} {'model file':>10s} {'debounce':>8s} {'train.py p50':>12s} {'p95':>7s} {'max':>7s} "
              f"{'own p50':>8s} {'own p95':>8s} {'cpu/edit':>8s} {'parse':>6s}  notes")
        for name, model, train, toggle in cases:
            root = model.parent if name == "flat" else Path(d) / "timm"
            m_text = model.read_text(encoding="utf-8")
            anchor = parse_ms([m_text, train.read_text(encoding="utf-8")])
            for debounce in (None, 0):
                init = None if debounce is None else {"debounceMs": debounce}
                r = await cross_file(root, model, train, toggle, init, args.edits)
                notes = f"own first in {r['order']}/{args.edits}"
                if toggle:
                    notes += f"; train.py findings flipped as expected in {r['flipped']}/{args.edits}"
                else:
                    notes += f"; train.py findings: {r['first']}"
                print(f"{name:9s} {len(m_text.splitlines()):10d} {('100' if debounce is None else '0') + ' ms':>8s} "
                      f"{pct(r['dep'], 0.5):12.1f} {pct(r['dep'], 0.95):7.1f} {max(r['dep']):7.1f} "
                      f"{pct(r['own'], 0.5):8.1f} {pct(r['own'], 0.95):8.1f} {r['cpu']:8.1f} {anchor:6.1f}  {notes}",
                      flush=True)
        print("(own: the edited model file's own publishDiagnostics after the same edits, the single-file round trip; "
              "parse: ast.parse of the model file and train.py, ms, median of 20)")
        if args.skip_memory:
            return
        ws = Path(args.workspace) if args.workspace else None
        if ws is None:
            tr = package_dir("transformers")
            ws = Path(tr) / "models" if tr else Path(d) / "timm"
        await memory(ws, args.open, not args.no_check_workspace)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--model-lines", type=int, default=2000)
    ap.add_argument("--workspace", help="the large workspace for the memory figure (default: transformers/models)")
    ap.add_argument("--open", type=int, default=20, help="files of it opened before the workspace check")
    ap.add_argument("--no-check-workspace", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-latency", action="store_true")
    args = ap.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
