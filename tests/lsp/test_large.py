"""A 10 MB document does not starve the others: it is checked in a child process (one at a time, killed when
a newer version or exit comes), while other documents keep being served by the worker threads."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from lsp_helpers import GG101_SRC, codes, edit, needs_analyzer, open_doc, session, wait_published

pytestmark = [pytest.mark.asyncio, needs_analyzer]

BIG = GG101_SRC + "".join(f"v{i} = torch.randn(3) * {i}  # filler line to make the file ten megabytes long\n"
                          for i in range(140_000))


def children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


async def test_a_huge_document_does_not_starve_the_others(tmp_path):
    assert len(BIG) > 10_000_000
    seen: set[int] = set()
    async with session(init={"debounceMs": 0}) as c:
        server_pid = c._server.pid
        big = (tmp_path / "big.py").as_uri()
        open_doc(c, big, BIG)
        for v in range(2, 5):  # edits while it is being checked: the stale checks are killed, not queued
            await asyncio.sleep(0.3)
            edit(c, big, v, 0, 0, 0, 0, "# edit\n")
        for i in range(5):
            uri = (tmp_path / f"small{i}.py").as_uri()
            t0 = time.monotonic()
            open_doc(c, uri, GG101_SRC)
            p = await wait_published(c, uri, timeout=30)
            assert codes(p.diagnostics) == ["GG101"]
            assert time.monotonic() - t0 < 3.0, f"small document {i} waited {time.monotonic() - t0:.1f} s"
            if sys.platform.startswith("linux"):
                python_children = [p for p in children_of(server_pid) if "python" in _cmdline(p)]
                assert len(python_children) <= 1, python_children  # one check of the huge file at a time
                seen.update(python_children)
        if os.environ.get("GRADGUARD_SWEEP") == "full":  # the result itself (a minute of CPU): `make sweep`
            p = await wait_published(c, big, pred=lambda p: p.version == 4, timeout=600)
            assert "GG101" in codes(p.diagnostics)
    # shutdown + exit: the child checking the huge file is gone too
    assert seen or not sys.platform.startswith("linux")
    end = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in seen) and time.monotonic() < end:
        await asyncio.sleep(0.05)
    assert not [p for p in seen if Path(f"/proc/{p}").exists()]


def _cmdline(pid: int) -> str:
    """A process's command line; "" for one that ended since it was listed (a killed stale check)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
