"""Diagnostics end to end over stdio: push, pull, incremental sync, close, save, debounce, staleness."""

from __future__ import annotations

import asyncio
import os

import pytest
from lsp_helpers import (
    CLEAN_SRC,
    GG101_SRC,
    capabilities,
    codes,
    edit,
    full_change,
    needs_analyzer,
    open_doc,
    session,
    wait_for,
    wait_published,
)
from lsprotocol import types as T

pytestmark = pytest.mark.asyncio


@needs_analyzer
async def test_session_without_torch_and_capabilities(tmp_path):
    # A `torch` that kills the process when imported: the whole session must never import it.
    poison = tmp_path / "poison"
    (poison / "torch").mkdir(parents=True)
    (poison / "torch" / "__init__.py").write_text("import os\nos._exit(17)\n")
    env = dict(os.environ, PYTHONPATH=str(poison) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    async with session(env=env) as c:
        caps = c.init_result.capabilities
        assert caps.position_encoding == "utf-16"
        assert caps.text_document_sync.change == T.TextDocumentSyncKind.Incremental
        assert caps.text_document_sync.save is not None
        assert caps.diagnostic_provider.identifier == "gradguard"
        assert caps.hover_provider
        assert set(caps.code_action_provider.code_action_kinds) == {"quickfix", "source.fixAll.gradguard"}
        assert set(caps.execute_command_provider.commands) >= {
            "gradguard.fixAll", "gradguard.runFile", "gradguard.showKnowledge"}
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC)
        p = await wait_published(c, uri)
        assert codes(p.diagnostics) == ["GG101"]
        hover = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=3, character=1)))
        assert hover is not None
        acts = await c.text_document_code_action_async(T.CodeActionParams(
            text_document=T.TextDocumentIdentifier(uri=uri), range=p.diagnostics[0].range,
            context=T.CodeActionContext(diagnostics=list(p.diagnostics))))
        assert acts


@needs_analyzer
async def test_push_diagnostic_fields(tmp_path):
    from gradguard.rules import BY_CODE

    async with session(init={"severity": {"GG101": "error"}}) as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC, version=7)
        p = await wait_published(c, uri)
        assert p.version == 7
        (d,) = p.diagnostics
        assert d.code == "GG101" and d.source == "gradguard"
        assert d.severity == T.DiagnosticSeverity.Error
        assert d.code_description.href == BY_CODE["GG101"].docs_url()
        # the mutating expression `y += 1` on line 4 (0-based 3)
        assert d.range.start.line == 3 and d.range.start.character == 0 and d.range.end.line == 3
        assert d.range.end.character >= 4
        (rel,) = d.related_information
        assert rel.location.uri == uri and rel.location.range.start.line == 2
        assert "exp" in rel.message and "saved" in rel.message
        fixes = d.data["fixes"]
        assert fixes and sum(1 for f in fixes if f["preferred"]) == 1
        assert any(f["kind"] == "noqa" for f in fixes)
        assert all(e["uri"] == uri for f in fixes for e in f["edits"])


@needs_analyzer
async def test_incremental_sync(tmp_path):
    async with session(init={"debounceMs": 0}) as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, CLEAN_SRC)
        p = await wait_published(c, uri)
        assert p.diagnostics == ()
        n = len(c.published)
        # "y = y + 1" -> "y += 1": replace columns 2..9 of line 3 by "+= 1"
        edit(c, uri, 2, 3, 2, 3, 9, "+= 1")
        p = await wait_published(c, uri, n, lambda p: p.version == 2)
        assert codes(p.diagnostics) == ["GG101"]
        assert p.diagnostics[0].range.start.line == 3
        # insert two lines at the top: the diagnostic moves down with the text
        n = len(c.published)
        edit(c, uri, 3, 0, 0, 0, 0, "# a\n# b\n")
        p = await wait_published(c, uri, n, lambda p: p.version == 3)
        assert codes(p.diagnostics) == ["GG101"] and p.diagnostics[0].range.start.line == 5
        n = len(c.published)
        edit(c, uri, 4, 5, 2, 5, 6, "= y + 1")
        p = await wait_published(c, uri, n, lambda p: p.version == 4)
        assert p.diagnostics == ()


@needs_analyzer
async def test_pull_diagnostics(tmp_path):
    async with session(caps=capabilities(pull=True)) as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC)
        ident = T.TextDocumentIdentifier(uri=uri)
        rep = await c.text_document_diagnostic_async(T.DocumentDiagnosticParams(text_document=ident))
        assert rep.kind == "full" and codes(rep.items) == ["GG101"]
        assert rep.items[0].related_information
        again = await c.text_document_diagnostic_async(
            T.DocumentDiagnosticParams(text_document=ident, previous_result_id=rep.result_id))
        assert again.kind == "unchanged" and again.result_id == rep.result_id
        full_change(c, uri, CLEAN_SRC, 2)
        rep2 = await c.text_document_diagnostic_async(
            T.DocumentDiagnosticParams(text_document=ident, previous_result_id=rep.result_id))
        assert rep2.kind == "full" and list(rep2.items) == [] and rep2.result_id != rep.result_id
        # a pull client gets no pushes for text documents (no duplicates in VS Code)
        await asyncio.sleep(0.3)
        assert [p for p in c.published if p.uri == uri and p.diagnostics] == []
        # configuration changes make the server ask for a re-pull
        before = c.diagnostic_refresh_count
        c.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"select": ["GG3"]}))
        await wait_for(lambda: c.diagnostic_refresh_count > before, what="workspace/diagnostic/refresh")


@needs_analyzer
async def test_close_clears(tmp_path):
    async with session() as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, GG101_SRC)
        await wait_published(c, uri, pred=lambda p: bool(p.diagnostics))
        n = len(c.published)
        c.text_document_did_close(T.DidCloseTextDocumentParams(text_document=T.TextDocumentIdentifier(uri=uri)))
        p = await wait_published(c, uri, n)
        assert p.diagnostics == ()


@needs_analyzer
async def test_on_save_mode_and_save_recheck(tmp_path):
    async with session(init={"run": "onSave"}) as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, CLEAN_SRC)
        await wait_published(c, uri)
        n = len(c.published)
        full_change(c, uri, GG101_SRC, 2)
        await asyncio.sleep(0.5)
        assert [p for p in c.published[n:] if p.uri == uri] == []  # nothing while typing
        c.text_document_did_save(T.DidSaveTextDocumentParams(text_document=T.TextDocumentIdentifier(uri=uri)))
        p = await wait_published(c, uri, n)
        assert p.version == 2 and codes(p.diagnostics) == ["GG101"]


@needs_analyzer
async def test_debounce_publishes_only_the_last_version(tmp_path):
    async with session(init={"debounceMs": 1000}) as c:
        uri = (tmp_path / "m.py").as_uri()
        open_doc(c, uri, CLEAN_SRC)
        await wait_published(c, uri)
        n = len(c.published)
        for v in range(2, 12):  # ten keystrokes well inside the debounce window
            full_change(c, uri, (GG101_SRC if v % 2 else CLEAN_SRC) + "#" * v + "\n", v)
            await asyncio.sleep(0.01)
        p = await wait_published(c, uri, n)
        await asyncio.sleep(1.2)
        mine = [q for q in c.published[n:] if q.uri == uri]
        assert [q.version for q in mine] == [11], "superseded versions must never be published"
        assert codes(p.diagnostics) == ["GG101"]


@needs_analyzer
async def test_rapid_edits_final_diagnostics_match_final_text(tmp_path):
    """500 incremental edits, no debounce: every publish matches its own version's text; the last is final."""
    from gradguard.api import check_source

    async with session(init={"debounceMs": 0}) as c:
        uri = (tmp_path / "m.py").as_uri()
        lines = CLEAN_SRC.splitlines(True)
        text = "".join(lines)
        open_doc(c, uri, text)
        texts = {1: text}
        version = 1
        for i in range(500):
            version += 1
            # toggle line 3 between `y = y + 1` and `y += 1`, and grow a comment at the end
            cur = text.splitlines(True)
            if i % 3 == 0:
                new3 = "y += 1\n" if cur[3] == "y = y + 1\n" else "y = y + 1\n"
                edit(c, uri, version, 3, 0, 4, 0, new3)
                cur[3] = new3
            else:
                end = len(cur)
                edit(c, uri, version, end, 0, end, 0, f"# {i}\n")
                cur.append(f"# {i}\n")
            text = "".join(cur)
            texts[version] = text
            if i % 50 == 0:
                await asyncio.sleep(0)  # let the transport breathe, like a real client
        final = await wait_published(c, uri, pred=lambda p: p.version == version, timeout=60)
        expect = [(f.code, f.line - 1) for f in check_source(text, "m.py")]
        assert [(d.code, d.range.start.line) for d in final.diagnostics] == expect
        assert expect == [("GG101", 3)] if "y += 1" in text else expect == []
        for p in c.published:
            if p.uri == uri:  # no stale result: each publish is right for the text of its version
                want = [(f.code, f.line - 1) for f in check_source(texts[p.version], "m.py")]
                assert [(d.code, d.range.start.line) for d in p.diagnostics] == want, p.version


@needs_analyzer
async def test_analysis_runs_off_the_event_loop(tmp_path):
    """While a big file is being analysed, the server still answers requests at once."""
    async with session(init={"debounceMs": 0}) as c:
        big = (tmp_path / "big.py").as_uri()
        open_doc(c, big, "a = 1\n" * 60_000 + GG101_SRC)
        await asyncio.sleep(0.1)  # the check has started
        h = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=(tmp_path / "other.py").as_uri()),
            position=T.Position(line=0, character=0)))
        assert h is None
        assert not any(p.uri == big for p in c.published), "answered only after the analysis finished"
        p = await wait_published(c, big, timeout=60)
        assert codes(p.diagnostics) == ["GG101"]
