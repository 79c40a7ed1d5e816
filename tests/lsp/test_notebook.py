"""Notebook document sync: code cells analysed as one program, diagnostics mapped back to each cell."""

from __future__ import annotations

import asyncio

import pytest
from lsp_helpers import capabilities, codes, needs_analyzer, session, wait_for
from lsprotocol import types as T

pytestmark = [pytest.mark.asyncio, needs_analyzer]

CELLS = [
    (T.NotebookCellKind.Code, "%matplotlib inline\nimport torch\nx = torch.randn(3, requires_grad=True)\n"),
    (T.NotebookCellKind.Markup, "# exp saves its output"),
    (T.NotebookCellKind.Code, "y = x.exp()"),
    (T.NotebookCellKind.Code, "z = 2\ny += 1\ny.sum().backward()\n"),
]


async def test_notebook_cells_are_one_program(tmp_path):
    nb_uri = (tmp_path / "nb.ipynb").as_uri()
    cell_uris = [f"vscode-notebook-cell:{tmp_path}/nb.ipynb#c{i}" for i in range(len(CELLS))]
    async with session(caps=capabilities(notebooks=True)) as c:
        assert c.init_result.capabilities.notebook_document_sync is not None
        c.notebook_document_did_open(T.DidOpenNotebookDocumentParams(
            notebook_document=T.NotebookDocument(
                uri=nb_uri, notebook_type="jupyter-notebook", version=1,
                cells=[T.NotebookCell(kind=k, document=u) for (k, _), u in zip(CELLS, cell_uris)]),
            cell_text_documents=[
                T.TextDocumentItem(uri=u, language_id="python" if k == T.NotebookCellKind.Code else "markdown",
                                   version=1, text=t) for (k, t), u in zip(CELLS, cell_uris)]))
        last = cell_uris[3]
        await wait_for(lambda: codes(c.diagnostics.get(last, ())) == ["GG101"], what="GG101 in the last cell")
        (d,) = c.diagnostics[last]
        assert d.range.start.line == 1 and d.range.start.character == 0  # `y += 1` is line 2 of that cell
        (rel,) = d.related_information
        assert rel.location.uri == cell_uris[2] and rel.location.range.start.line == 0  # saved in cell 3
        for u in cell_uris[:3]:
            assert codes(c.diagnostics.get(u, ())) == []  # the magic line is not a syntax error
        # fixes are expressed in the cell's own coordinates
        fx = next(f for f in d.data["fixes"] if f["preferred"])
        assert all(e["uri"] == last and e["range"]["start"]["line"] == 1 for e in fx["edits"])
        # edit the last cell: `y += 1` -> `y = y + 1`
        c.notebook_document_did_change(T.DidChangeNotebookDocumentParams(
            notebook_document=T.VersionedNotebookDocumentIdentifier(uri=nb_uri, version=2),
            change=T.NotebookDocumentChangeEvent(cells=T.NotebookDocumentCellChanges(text_content=[
                T.NotebookDocumentCellContentChanges(
                    document=T.VersionedTextDocumentIdentifier(uri=last, version=2),
                    changes=[T.TextDocumentContentChangePartial(
                        range=T.Range(start=T.Position(line=1, character=2), end=T.Position(line=1, character=6)),
                        text="= y + 1")])]))))
        await wait_for(lambda: c.diagnostics.get(last) == (), what="cleared after the edit")
        # pull works per cell too
        rep = await c.text_document_diagnostic_async(T.DocumentDiagnosticParams(
            text_document=T.TextDocumentIdentifier(uri=last)))
        assert list(rep.items) == []
        # closing the notebook clears every cell
        c.notebook_document_did_change(T.DidChangeNotebookDocumentParams(
            notebook_document=T.VersionedNotebookDocumentIdentifier(uri=nb_uri, version=3),
            change=T.NotebookDocumentChangeEvent(cells=T.NotebookDocumentCellChanges(text_content=[
                T.NotebookDocumentCellContentChanges(
                    document=T.VersionedTextDocumentIdentifier(uri=last, version=3),
                    changes=[T.TextDocumentContentChangeWholeDocument(text=CELLS[3][1])])]))))
        await wait_for(lambda: codes(c.diagnostics.get(last, ())) == ["GG101"], what="GG101 again")
        c.notebook_document_did_close(T.DidCloseNotebookDocumentParams(
            notebook_document=T.NotebookDocumentIdentifier(uri=nb_uri),
            cell_text_documents=[T.TextDocumentIdentifier(uri=u) for u in cell_uris]))
        await wait_for(lambda: c.diagnostics.get(last) == (), what="cleared on close")


def _open(c, tmp_path):
    nb_uri = (tmp_path / "nb.ipynb").as_uri()
    cell_uris = [f"vscode-notebook-cell:{tmp_path}/nb.ipynb#c{i}" for i in range(len(CELLS))]
    c.notebook_document_did_open(T.DidOpenNotebookDocumentParams(
        notebook_document=T.NotebookDocument(
            uri=nb_uri, notebook_type="jupyter-notebook", version=1,
            cells=[T.NotebookCell(kind=k, document=u) for (k, _), u in zip(CELLS, cell_uris)]),
        cell_text_documents=[
            T.TextDocumentItem(uri=u, language_id="python" if k == T.NotebookCellKind.Code else "markdown",
                               version=1, text=t) for (k, t), u in zip(CELLS, cell_uris)]))
    return nb_uri, cell_uris


async def pull(c, uri):
    rep = await c.text_document_diagnostic_async(T.DocumentDiagnosticParams(
        text_document=T.TextDocumentIdentifier(uri=uri)))
    return list(rep.items)


async def test_notebook_cells_one_diagnostics_model_for_pull_clients(tmp_path):
    """A client that pulls gets cell diagnostics only by pull: a push as well would show every finding twice."""
    async with session(caps=capabilities(pull=True, notebooks=True)) as c:
        nb_uri, cell_uris = _open(c, tmp_path)
        last = cell_uris[3]
        (d,) = await pull(c, last)
        assert d.code == "GG101" and d.range.start.line == 1
        for u in cell_uris[:3]:
            assert await pull(c, u) == []
        # an edit in cell 3 changes what cell 4 shows: the server asks the client to pull again
        before = c.diagnostic_refresh_count
        c.notebook_document_did_change(T.DidChangeNotebookDocumentParams(
            notebook_document=T.VersionedNotebookDocumentIdentifier(uri=nb_uri, version=2),
            change=T.NotebookDocumentChangeEvent(cells=T.NotebookDocumentCellChanges(text_content=[
                T.NotebookDocumentCellContentChanges(
                    document=T.VersionedTextDocumentIdentifier(uri=cell_uris[2], version=2),
                    changes=[T.TextDocumentContentChangeWholeDocument(text="y = x * 2")])]))))
        assert await pull(c, cell_uris[2]) == []  # what the client pulls for the changed cell
        await wait_for(lambda: c.diagnostic_refresh_count > before, what="workspace/diagnostic/refresh")
        assert await pull(c, last) == []
        await asyncio.sleep(0.3)
        assert not [p for p in c.published if p.uri in cell_uris], "cell diagnostics pushed to a pull client"


async def test_notebook_messages_and_related_locations_name_the_cell(tmp_path):
    async with session(caps=capabilities(notebooks=True)) as c:
        _, cell_uris = _open(c, tmp_path)
        last = cell_uris[3]
        await wait_for(lambda: codes(c.diagnostics.get(last, ())) == ["GG101"], what="GG101 in the last cell")
        (d,) = c.diagnostics[last]
        # "exp (line 3)" of the combined program is line 1 of cell 3 (cells counted as the notebook shows them)
        assert "(cell 3, line 1)" in d.message and "line 3" not in d.message.replace("cell 3, line 1", "")
        assert "`" not in d.message
        (rel,) = d.related_information
        assert rel.location.uri == cell_uris[2] and rel.location.range.start.line == 0
        # the hover: saved in cell 3, modified here, in this cell's lines
        h = await c.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=last), position=T.Position(line=1, character=1)))
        md = h.contents.value
        assert "**saved** cell 3, line 1" in md and "`y = x.exp()`" in md
        assert "**modified** line 2" in md and "`y += 1`" in md
