"""Startup: importing and building the server never imports torch."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest


def test_startup_does_not_import_torch(tmp_path):
    """Importing and building the server must not import torch (a real session is checked below too)."""
    code = ("import sys; from gradguard.lsp.server import build_server; build_server(); "
            "import gradguard.api, gradguard.lsp.hover; "
            "sys.exit(3 if 'torch' in sys.modules else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.asyncio
async def test_tcp_transport_and_non_python_documents(tmp_path):
    """`gradguard lsp --tcp HOST:PORT` serves LSP on a socket; documents in other languages are left alone."""
    import socket

    from lsp_helpers import GG101_SRC, HAS_ANALYZER, capabilities
    from lsprotocol import types as T
    from pygls.lsp.client import LanguageClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "gradguard", "lsp", "--tcp", f"127.0.0.1:{port}")
    client = LanguageClient("tcp-test", "1")
    published: list[T.PublishDiagnosticsParams] = []
    client.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(lambda params: published.append(params))
    try:
        for _ in range(200):
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.05)
        res = await asyncio.wait_for(client.initialize_async(T.InitializeParams(capabilities=capabilities())), 30)
        assert res.server_info.name == "gradguard"
        client.initialized(T.InitializedParams())
        toml = (tmp_path / "pyproject.toml").as_uri()
        py = (tmp_path / "m.py").as_uri()
        client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
            uri=toml, language_id="toml", version=1, text="[tool.gradguard]\nselect = [\n")))
        client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
            uri=py, language_id="python", version=1, text=GG101_SRC)))
        for _ in range(600):
            if any(p.uri == py for p in published):
                break
            await asyncio.sleep(0.05)
        assert [str(d.code) for p in published if p.uri == py for d in p.diagnostics] == (
            ["GG101"] if HAS_ANALYZER else [])
        assert [p for p in published if p.uri == toml] == []
        await asyncio.wait_for(client.shutdown_async(None), 10)
        client.exit(None)
        await asyncio.wait_for(proc.wait(), 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await asyncio.wait_for(client.stop(), 10)
