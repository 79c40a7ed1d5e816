"""pytest-lsp helpers: start `gradguard lsp` as a real subprocess and talk LSP to it over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parents[2]

HAS_ANALYZER = importlib.util.find_spec("gradguard.analysis.interp") is not None
needs_analyzer = pytest.mark.skipif(not HAS_ANALYZER, reason="the analyzer (gradguard.analysis.interp) has not landed")

# A GG101 once the analyzer exists: exp saved its output (line 3), `y += 1` modifies it in place (line 4).
GG101_SRC = "import torch\nx = torch.randn(3, requires_grad=True)\ny = x.exp()\ny += 1\ny.sum().backward()\n"
CLEAN_SRC = "import torch\nx = torch.randn(3, requires_grad=True)\ny = x.exp()\ny = y + 1\ny.sum().backward()\n"


class Client(LanguageClient):
    """The pytest-lsp client, plus a full history of publishDiagnostics and answers to server requests."""

    published: list[T.PublishDiagnosticsParams]
    applied_edits: list[T.ApplyWorkspaceEditParams]
    registrations: list[T.RegistrationParams]


def _make_client() -> Client:
    from pygls.protocol import default_converter

    client = Client(converter_factory=default_converter)
    client.published = []
    client.applied_edits = []
    client.registrations = []

    def publish(c: Client, params: T.PublishDiagnosticsParams) -> None:
        c.published.append(params)
        c.diagnostics[params.uri] = params.diagnostics

    def apply_edit(c: Client, params: T.ApplyWorkspaceEditParams) -> T.ApplyWorkspaceEditResult:
        c.applied_edits.append(params)
        return T.ApplyWorkspaceEditResult(applied=True)

    def register(c: Client, params: T.RegistrationParams) -> None:
        c.registrations.append(params)

    features = dict(DEFAULT_CLIENT_FEATURES)
    features[T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    features[T.WORKSPACE_APPLY_EDIT] = apply_edit
    features[T.CLIENT_REGISTER_CAPABILITY] = register
    register_lsp_features(client, features)
    return client


def capabilities(pull: bool = False, encodings: list[str] | None = None, notebooks: bool = False,
                 progress: bool = True) -> T.ClientCapabilities:
    td = T.TextDocumentClientCapabilities(
        synchronization=T.TextDocumentSyncClientCapabilities(did_save=True),
        publish_diagnostics=T.PublishDiagnosticsClientCapabilities(related_information=True, version_support=True),
        diagnostic=T.DiagnosticClientCapabilities(related_document_support=False) if pull else None,
        code_action=T.CodeActionClientCapabilities(
            code_action_literal_support=T.ClientCodeActionLiteralOptions(
                code_action_kind=T.ClientCodeActionKindOptions(value_set=[
                    T.CodeActionKind.QuickFix, T.CodeActionKind.Source, T.CodeActionKind.SourceFixAll])),
            is_preferred_support=True),
        hover=T.HoverClientCapabilities(content_format=[T.MarkupKind.Markdown, T.MarkupKind.PlainText]),
    )
    return T.ClientCapabilities(
        text_document=td,
        workspace=T.WorkspaceClientCapabilities(
            apply_edit=True, configuration=True,
            did_change_watched_files=T.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True),
            diagnostics=T.DiagnosticWorkspaceClientCapabilities(refresh_support=True) if pull else None,
            execute_command=T.ExecuteCommandClientCapabilities()),
        window=T.WindowClientCapabilities(work_done_progress=progress),
        general=T.GeneralClientCapabilities(position_encodings=encodings) if encodings else None,
        notebook_document=T.NotebookDocumentClientCapabilities(
            synchronization=T.NotebookDocumentSyncClientCapabilities()) if notebooks else None,
    )


def server_env(extra_pythonpath: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if extra_pythonpath:
        env["PYTHONPATH"] = extra_pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return env


@contextlib.asynccontextmanager
async def session(caps: T.ClientCapabilities | None = None, init: Any = None, root: Path | None = None,
                  env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> AsyncIterator[Client]:
    config = ClientServerConfig([sys.executable, "-m", "gradguard", "lsp", *args],
                                client_factory=_make_client, server_env=env or server_env())
    client: Client = await config.start()  # type: ignore[assignment]
    try:
        root_uri = root.as_uri() if root else None
        folders = [T.WorkspaceFolder(uri=root_uri, name="ws")] if root_uri else None
        result = await client.initialize_session(T.InitializeParams(
            capabilities=caps or capabilities(), initialization_options=init, root_uri=root_uri,
            workspace_folders=folders))
        client.init_result = result  # type: ignore[attr-defined]
        yield client
        await asyncio.wait_for(client.shutdown_session(), 10)
    finally:
        server = getattr(client, "_server", None)
        if server is not None and server.returncode is None:
            server.kill()  # a failed test must not leave the server (and the test run) hanging
        await asyncio.wait_for(client.stop(), 10)


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(T.DidOpenTextDocumentParams(
        text_document=T.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))


def full_change(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[T.TextDocumentContentChangeWholeDocument(text=text)]))


def edit(client: LanguageClient, uri: str, version: int, line: int, char: int, end_line: int, end_char: int,
         text: str) -> None:
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[T.TextDocumentContentChangePartial(
            range=T.Range(start=T.Position(line=line, character=char), end=T.Position(line=end_line, character=end_char)),
            text=text)]))


async def wait_for(pred: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def wait_published(client: Client, uri: str, since: int = 0, pred: Callable[[T.PublishDiagnosticsParams], bool]
                         | None = None, timeout: float = 15.0) -> T.PublishDiagnosticsParams:
    def find() -> T.PublishDiagnosticsParams | None:
        for p in client.published[since:]:
            if p.uri == uri and (pred is None or pred(p)):
                return p
        return None

    return await wait_for(find, timeout, f"publishDiagnostics for {uri}")


def codes(diags: Any) -> list[str]:
    return [str(d.code) for d in diags]
