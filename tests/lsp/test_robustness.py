"""The server never dies: syntax errors mid-typing, odd files, deleted files, garbage, internal errors."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from lsp_helpers import (
    GG101_SRC,
    codes,
    edit,
    full_change,
    needs_analyzer,
    open_doc,
    server_env,
    session,
    wait_for,
    wait_published,
)
from lsprotocol import types as T
from pygls.exceptions import JsonRpcException

pytestmark = [pytest.mark.asyncio, needs_analyzer]


async def alive(c, tmp_path, name="alive.py"):
    uri = (tmp_path / name).as_uri()
    open_doc(c, uri, GG101_SRC)
    p = await wait_published(c, uri)
    assert codes(p.diagnostics) == ["GG101"]


async def test_syntax_error_mid_typing_keeps_last_good(tmp_path):
    async with session(init={"debounceMs": 0}) as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC)
        await wait_published(c, uri, pred=lambda p: bool(p.diagnostics))
        n = len(c.published)
        edit(c, uri, 2, 5, 0, 5, 0, "z = (\n")  # typing a new line at the end: does not parse
        p = await wait_published(c, uri, n, lambda p: p.version == 2)
        assert sorted(codes(p.diagnostics)) == ["GG000", "GG101"]  # GG000 + the last good GG101 (unchanged lines)
        gg000 = next(d for d in p.diagnostics if d.code == "GG000")
        assert gg000.range.start.line == 5 and gg000.severity == T.DiagnosticSeverity.Error
        # while still broken, edit the flagged line: the kept diagnostic is dropped, not shown at a wrong place
        edit(c, uri, 3, 3, 5, 3, 6, "2")
        p = await wait_published(c, uri, n, lambda p: p.version == 3)
        assert codes(p.diagnostics) == ["GG000"]
        edit(c, uri, 4, 5, 5, 5, 5, "1)")  # parses again: everything recomputed
        p = await wait_published(c, uri, n, lambda p: p.version == 4)
        assert codes(p.diagnostics) == ["GG101"]


async def test_empty_huge_binary_and_nested_files(tmp_path):
    async with session(init={"debounceMs": 0}) as c:
        cases = {
            "empty.py": "",
            "nul.py": "x = 1\x00\n",
            "surrogates.py": "s = '\udcff\ufffd'\nimport torch\n",
            "parens.py": "x = " + "(" * 300 + "1" + ")" * 300 + "\n",
            "lists.py": "x = " + "[" * 150 + "]" * 150 + "\n",
            "chain.py": "x = 1" + " + 1" * 30000 + "\n",
            "deep_blocks.py": "".join("    " * i + "if x:\n" for i in range(99)) + "    " * 99 + "pass\n",
            "huge.py": "a = 1\n" * 30_000 + "import torch\nx = torch.randn(3, requires_grad=True)\ny = x.exp()\ny += 1\n",
        }
        for name, text in cases.items():
            open_doc(c, (tmp_path / name).as_uri(), text)
        got = {}
        for name in cases:
            p = await wait_published(c, (tmp_path / name).as_uri(), timeout=60)
            got[name] = codes(p.diagnostics)
        assert got["empty.py"] == []
        assert got["nul.py"] == ["GG000"]
        assert got["parens.py"] == ["GG000"]
        assert got["huge.py"] == ["GG101"]
        assert set(got["chain.py"]) <= {"GG000"} and got["lists.py"] == [] and got["deep_blocks.py"] == []
        await alive(c, tmp_path)


async def test_file_deleted_while_open(tmp_path):
    f = tmp_path / "gone.py"
    f.write_text(GG101_SRC)
    async with session(root=tmp_path, init={"debounceMs": 0}) as c:
        uri = f.as_uri()
        open_doc(c, uri, GG101_SRC)
        await wait_published(c, uri)
        os.remove(f)
        c.workspace_did_change_watched_files(T.DidChangeWatchedFilesParams(changes=[
            T.FileEvent(uri=uri, type=T.FileChangeType.Deleted)]))
        n = len(c.published)
        c.text_document_did_save(T.DidSaveTextDocumentParams(text_document=T.TextDocumentIdentifier(uri=uri)))
        full_change(c, uri, GG101_SRC + "# still editing\n", 2)
        p = await wait_published(c, uri, n, lambda p: p.version == 2)
        assert codes(p.diagnostics) == ["GG101"]  # the buffer is what counts
        os.rmdir(tmp_path) if not any(tmp_path.iterdir()) else None
        full_change(c, uri, GG101_SRC + "# dir gone\n", 3)
        p = await wait_published(c, uri, n, lambda p: p.version == 3)
        assert codes(p.diagnostics) == ["GG101"]


_ids = iter(range(1, 1_000_000))


async def raw_send(c, message: dict) -> None:
    """Write one framed JSON-RPC message to the server as is (the client library would refuse garbage)."""
    body = json.dumps(message).encode()
    c._server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await c._server.stdin.drain()


async def raw_request(c, method: str, params) -> object:
    msg_id = f"raw-{next(_ids)}"
    fut = asyncio.get_running_loop().create_future()
    c.protocol._request_futures[msg_id] = fut
    await raw_send(c, {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(fut, 10)


async def test_garbage_and_invalid_params(tmp_path):
    async with session() as c:
        # requests with invalid params get an error response (not silence), the server lives on
        with pytest.raises(JsonRpcException, match=r"(?i)invalid"):
            await raw_request(c, "textDocument/hover", {"textDocument": 5})
        with pytest.raises(JsonRpcException, match=r"(?i)invalid"):
            await raw_request(c, "textDocument/codeAction", {"range": "everything"})
        with pytest.raises(JsonRpcException, match=r"(?i)invalid"):
            await raw_request(c, "textDocument/diagnostic", None)
        with pytest.raises(JsonRpcException, match=r"(?i)method not found"):
            await raw_request(c, "gradguard/doesNotExist", {})
        with pytest.raises(JsonRpcException, match=r"(?i)not defined"):
            await c.workspace_execute_command_async(T.ExecuteCommandParams(command="gradguard.nope", arguments=[]))
        with pytest.raises(JsonRpcException, match="expected"):
            await c.workspace_execute_command_async(T.ExecuteCommandParams(command="gradguard.fixAll", arguments=[7]))
        # notifications with nonsense
        for method, params in [
            ("textDocument/didOpen", {"textDocument": {"uri": 3}}),
            ("textDocument/didChange", {"textDocument": {"uri": "file:///nowhere.py", "version": 2},
                                        "contentChanges": [{"text": "x"}]}),
            ("textDocument/didChange", {"textDocument": {"uri": "file:///nowhere.py", "version": 3},
                                        "contentChanges": [{"range": {"start": {"line": -4}}, "text": 1}]}),
            ("textDocument/didClose", {"textDocument": {"uri": "file:///never-opened.py"}}),
            ("workspace/didChangeConfiguration", {"settings": [1, 2, 3]}),
            ("workspace/didChangeWatchedFiles", {"changes": "all"}),
            ("notebookDocument/didChange", {"notebookDocument": {"uri": "file:///nb.ipynb", "version": 1},
                                            "change": {}}),
            ("$/unknownNotification", {"x": 1}),
        ]:
            await raw_send(c, {"jsonrpc": "2.0", "method": method, "params": params})
        # bytes that are not JSON at all, and a frame without a method
        c._server.stdin.write(b"Content-Length: 9\r\n\r\n{garbage}")
        await raw_send(c, {"jsonrpc": "2.0", "params": {}})
        # requests about documents the server does not know
        h = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri="file:///nowhere.py"), position=T.Position(line=0, character=0)))
        assert h is None
        acts = await c.text_document_code_action_async(T.CodeActionParams(
            text_document=T.TextDocumentIdentifier(uri="file:///nowhere.py"),
            range=T.Range(start=T.Position(line=9, character=9), end=T.Position(line=9, character=9)),
            context=T.CodeActionContext(diagnostics=[])))
        assert not acts
        # positions far outside the document
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC)
        await wait_published(c, uri)
        h = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=10_000, character=10_000)))
        assert h is None
        assert c._server.returncode is None
        await alive(c, tmp_path)


async def test_internal_error_is_logged_and_document_gets_nothing(tmp_path):
    # A sitecustomize that makes the analyzer crash on one magic file (an analyzer bug, simulated).
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import gradguard.api as api\n"
        "_orig = api.check_text\n"
        "def check_text(source, path='<string>', *a, **k):\n"
        "    if 'BOOM' in source:\n"
        "        raise RuntimeError('simulated analyzer bug')\n"
        "    return _orig(source, path, *a, **k)\n"
        "api.check_text = check_text\n")
    log_file = tmp_path / "server.log"
    async with session(env=server_env(str(hook)), init={"logFile": str(log_file), "debounceMs": 0}) as c:
        uri = (tmp_path / "boom.py").as_uri()
        open_doc(c, uri, GG101_SRC + "# BOOM\n")
        p = await wait_published(c, uri)
        assert p.diagnostics == ()
        msg = await wait_for(lambda: next((m for m in c.log_messages if "simulated analyzer bug" in m.message), None),
                             what="the error in window/logMessage")
        assert msg.type == T.MessageType.Error
        await wait_for(lambda: log_file.exists() and "simulated analyzer bug" in log_file.read_text(),
                       what="the error in the log file")
        await alive(c, tmp_path)
        n = len(c.published)
        full_change(c, uri, GG101_SRC, 2)  # the bug no longer triggers: diagnostics come back
        p = await wait_published(c, uri, n, lambda p: p.version == 2)
        assert codes(p.diagnostics) == ["GG101"]
