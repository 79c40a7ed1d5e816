"""``gradguard lsp``: the language server (pygls). A thin adapter: analysis is ``gradguard.api.check_source``.

Design (docs/lsp.md has the contract):
  * one :class:`Unit` per open text document or notebook (whose code cells are analysed as one program);
  * every change bumps the unit's ``generation``; a run snapshots (text, version, generation), analyses it in
    a worker thread (never on the event loop) and its result is dropped unless the generation is still
    current when it finishes; runs not yet started when superseded are skipped;
  * push (publishDiagnostics) for clients without pull support, pull (textDocument/diagnostic) always.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from lsprotocol import types as T
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from gradguard import __version__
from gradguard.lsp.actions import CodeActions
from gradguard.lsp.commands import Commands
from gradguard.lsp.convert import (
    FIX_ALL_KIND,
    LARGE_CHARS,
    MAX_CHARS,
    Entry,
    Mapper,
    Segment,
    split_lines,
    to_entry,
    uri_path,
)
from gradguard.lsp.projects import DEPENDENT, EDITED, Lane, ProjectModel, manual_gc, norm
from gradguard.lsp.settings import ConfigCache, Settings, effective_config, excluded, parse_settings
from gradguard.model import Finding

log = logging.getLogger("gradguard.lsp")

COMMANDS = ("gradguard.fixAll", "gradguard.runFile", "gradguard.showKnowledge", "gradguard.checkWorkspace",
            "gradguard.clearRunDiagnostics", "gradguard.cancelRun", "gradguard.debugInfo")
INVALID_REQUEST = -32600
PARSE_ERROR = -32700
PYTHON_LANGUAGES = ("python", "py", "python3")


@dataclass
class Result:
    version: int | None
    generation: int
    lines: list[str]
    mapper: Mapper
    findings: list[Finding]  # what the entries show (after keeping last-good ones on a syntax error)
    entries: list[Entry]
    parse_ok: bool
    error: bool = False
    text: str = ""  # what was checked, and how: for verifying the fix-all edit on demand
    path: str = ""
    config: Any = None
    verified: set[int] | None = None  # ids of the findings whose preferred safe fix holds (None: not yet known)
    project: Any = None  # the project it was checked in (None: a file on its own)
    deps: list[str] = field(default_factory=list)  # other modules its analysis read (absolute paths)
    # findings its context revealed in other files: path -> (that file's text as analysed, findings with fixes)
    elsewhere: dict[str, tuple[str, list[Finding]]] = field(default_factory=dict)


@dataclass
class Unit:
    key: str  # text document uri or notebook uri
    notebook: bool = False
    generation: int = 0
    task: asyncio.Task[Any] | None = None
    result: Result | None = None
    last_good: Result | None = None
    published: set[str] = field(default_factory=set)
    running: concurrent.futures.Future[Any] | None = None  # the analysis of this unit in a worker thread now
    last_change: float = float("-inf")  # loop time of the last didChange (speculative start, see on_did_change)


@dataclass
class Snapshot:
    text: str
    version: int | None
    path: str | None
    segments: list[Segment]
    folders: tuple[str, ...] = ()  # the workspace folders (import roots) when it was taken


class _InvalidRequest:
    """A request whose params could not be deserialized: answered with InvalidParams instead of silence."""

    def __init__(self, msg_id: Any, method: str, error: Exception) -> None:
        self.id = msg_id
        self.method = method
        self.error = error


class GradguardProtocol(LanguageServerProtocol):
    def structure_message(self, data: Any) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data and "jsonrpc" in data:
                return _InvalidRequest(data["id"], str(data["method"]), exc)
            raise

    def handle_message(self, message: Any) -> Any:
        method = getattr(message, "method", None)
        if self._shutdown and method != T.EXIT:
            # LSP: after `shutdown`, every request but `exit` is answered with InvalidRequest (pygls drops them,
            # leaving the client waiting); notifications are dropped.
            if method is not None and getattr(message, "id", None) is not None:
                self._send_response(message.id, None, JsonRpcException(
                    "the server is shutting down: no request but exit is served after shutdown",
                    code=INVALID_REQUEST).to_response_error())
            return None
        if isinstance(message, _InvalidRequest):
            log.warning("invalid params for %s (request %r)", message.method, message.id)
            self._send_response(message.id, None,
                                JsonRpcInvalidParams(f"invalid params for {message.method}").to_response_error())
            return None
        return super().handle_message(message)


class GradguardLanguageServer(LanguageServer):
    controller: Controller

    # pygls' reader goes deaf after one malformed frame (see gradguard.lsp.framing): both transports read
    # through a FrameReader that resynchronises instead.
    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        from pygls.io_ import StdoutWriter

        from gradguard.lsp.framing import FrameReader, run_async

        self._stop_event = stop = threading.Event()
        source = stdin or sys.stdin.buffer
        read_chunk = getattr(source, "read1", None) or source.read
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

        async def main() -> None:
            loop = asyncio.get_running_loop()
            reader = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gradguard-stdin")

            async def read() -> bytes:
                return await loop.run_in_executor(reader, read_chunk, 65536)

            frames = FrameReader(read, self.controller.bad_input)
            try:
                await run_async(stop, frames, self.protocol, self.report_server_error)
            finally:
                reader.shutdown(wait=False)

        try:
            asyncio.run(main())
        except BrokenPipeError:
            log.error("the connection to the client is lost: exiting")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        from gradguard.lsp.framing import FrameReader, run_async

        self._stop_event = stop = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)  # type: ignore[arg-type]

            async def read() -> bytes:
                return await reader.read(65536)

            await run_async(stop, FrameReader(read, self.controller.bad_input), self.protocol,
                            self.report_server_error)
            self.shutdown()

        async def serve() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            async with self._server:
                await self._server.serve_forever()

        try:
            asyncio.run(serve())
        except asyncio.CancelledError:
            pass

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Never pop up dialogs for internal errors: log them (window/logMessage + log file).
        try:
            self.controller.log_error(f"could not handle a message ({getattr(source, '__name__', source)}): {error}")
        except Exception:  # pragma: no cover - never let error reporting fail
            log.exception("failed to report an error")


def _encoding_name(enc: Any) -> str:
    v = str(getattr(enc, "value", enc) or "utf-16").lower()
    return v if v in ("utf-8", "utf-16", "utf-32") else "utf-16"


def _elsewhere_key(v: tuple[str, list[Finding]] | None) -> Any:
    if v is None:
        return None
    text, fs = v
    return len(text), hash(text), tuple((f.code, f.line, f.column, f.message) for f in fs)


def _with_fixes(elsewhere: dict[str, list[Finding]], project: Any) -> dict[str, tuple[str, list[Finding]]]:
    """Findings revealed in other files, with the text they refer to and their fixes (as ``merge_results`` does)."""
    from gradguard.fixes import attach_fixes

    out = {}
    for p, fs in elsewhere.items():
        sf = project.source(p)
        if sf is None:
            continue
        try:
            attach_fixes(fs, sf.text)
        except Exception:  # pragma: no cover - a fix bug must not cost the diagnostics
            log.debug("attach_fixes failed for %s", p, exc_info=True)
        out[p] = (sf.text, fs)
    return out


def _touched_lines(f: Finding) -> set[int]:
    out = set(range(f.line, max(f.end_line, f.line) + 1))
    for r in f.related:
        out.update(range(r.line, max(r.end_line or r.line, r.line) + 1))
    for x in f.fixes:
        for e in x.edits:
            out.update(range(e.line, max(e.end_line, e.line) + 1))
    return out


class Controller:
    """All server state and behaviour; ``ls`` is the pygls server it is attached to."""

    def __init__(self, ls: GradguardLanguageServer) -> None:
        self.ls = ls
        self.settings = Settings()
        self.units: dict[str, Unit] = {}
        self.configs = ConfigCache()
        self.run_entries: dict[str, dict[str, list[Entry]]] = {}  # script uri -> target uri -> entries
        self.run_generation = 0
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="gradguard-check")
        # Documents over LARGE_CHARS are checked in a lane of their own, so that a huge file (a 10 MB one takes
        # a minute) never holds the workers every other document needs.
        self.large_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gradguard-large")
        # Every other check runs on the lane, the one thread that may touch the warm projects (gradguard.lsp.projects):
        # by priority, the edited document first.
        self.lane = Lane()
        self.model = ProjectModel(self.log_warning)
        self.cross_generation = 0  # bumped when findings revealed in one document by another's analysis change
        self._refresh_pending: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pull = False
        self.refresh_support = False
        self.progress_support = False
        self.apply_edit_support = True
        self.disabled_support = False
        self.log_handler: logging.Handler | None = None
        self._logged: set[str] = set()
        self._shown: set[str] = set()  # configuration problems already notified
        self._bad_inputs = 0
        self.children: set[Any] = set()  # child processes checking huge documents (gradguard.lsp.isolated)
        self.exiting = False
        self.runs_active = 0  # gradguard.runFile scripts running now
        self.lock = threading.Lock()
        self.cancel_runs = threading.Event()  # set at shutdown: stops scripts started by gradguard.runFile
        self.run_cancels: dict[threading.Event, str] = {}  # one per gradguard.runFile in progress -> its uri
        self._nb_sigs: dict[str, dict[str, list[tuple[Any, ...]]]] = {}  # notebook -> what each cell showed
        self.actions = CodeActions(self)  # codeAction, fix-all and hover (gradguard.lsp.actions)
        self.commands = Commands(self)  # workspace/executeCommand (gradguard.lsp.commands)

    # ----------------------------------------------------------------------------------------------- logging
    def send_log(self, level: T.MessageType, message: str, show: bool = False) -> None:
        def send() -> None:
            try:
                self.ls.window_log_message(T.LogMessageParams(type=level, message=message))
                if show:
                    self.ls.window_show_message(T.ShowMessageParams(type=level, message=message))
            except Exception:  # pragma: no cover - the transport may be gone
                pass

        loop = self.loop
        if loop is None:
            return
        if threading.current_thread() is threading.main_thread() and _running_loop() is loop:
            send()
        else:
            loop.call_soon_threadsafe(send)

    def log_info(self, message: str) -> None:
        log.info(message)
        if self.settings.log_level in ("info", "debug"):
            self.send_log(T.MessageType.Info, message)

    def log_warning(self, message: str) -> None:
        log.warning(message)
        if self.settings.log_level != "error":
            self.send_log(T.MessageType.Warning, message)

    def log_error(self, message: str, once: bool = False) -> None:
        if once:
            with self.lock:
                if message in self._logged:
                    log.debug(message)
                    return
                self._logged.add(message)
        log.error(message)
        self.send_log(T.MessageType.Error, message)

    def settings_problems(self, warnings: list[str]) -> None:
        """Bad editor settings: a log line each, and one notification for all (those values keep their default)."""
        for w in warnings:
            self.log_warning(w)
        if warnings:
            head = warnings[0] if len(warnings) == 1 else f"{len(warnings)} settings ignored: " + "; ".join(warnings)
            self._send_show(T.MessageType.Warning, f"gradguard: {head} (the default is used)")

    def config_problems(self) -> None:
        """A pyproject.toml that does not load: one notification and one log line per distinct problem; that
        file's directory is linted with the default configuration meanwhile."""
        for msg in list(self.configs.errors.values()):
            with self.lock:
                if msg in self._shown:
                    continue
                self._shown.add(msg)
            text = f"gradguard: {msg} (linting with the default configuration until it is fixed)"
            log.error(text)
            self.send_log(T.MessageType.Error, text, show=True)

    def _send_show(self, level: T.MessageType, message: str) -> None:
        def send() -> None:
            try:
                self.ls.window_show_message(T.ShowMessageParams(type=level, message=message))
            except Exception:  # pragma: no cover - the transport may be gone
                pass

        if self.loop is None:
            return
        if threading.current_thread() is threading.main_thread() and _running_loop() is self.loop:
            send()
        else:
            self.loop.call_soon_threadsafe(send)

    def configure_logging(self) -> None:
        from gradguard.lsp.convert import set_docs_base

        set_docs_base(self.settings.docs_base_url)
        level = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO,
                 "debug": logging.DEBUG}[self.settings.log_level]
        log.setLevel(level)
        # pygls logs every message body at INFO: keep it quiet unless debugging.
        logging.getLogger("pygls").setLevel(logging.DEBUG if level == logging.DEBUG else logging.WARNING)
        path = self.settings.log_file
        if self.log_handler is not None and getattr(self.log_handler, "baseFilename", None) != \
                (os.path.abspath(path) if path else None):
            logging.getLogger().removeHandler(self.log_handler)
            self.log_handler.close()
            self.log_handler = None
        if path and self.log_handler is None:
            try:
                h = logging.FileHandler(path, encoding="utf-8")
            except OSError as e:
                self.log_warning(f"cannot open log file {path}: {e}")
                return
            h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logging.getLogger().addHandler(h)
            self.log_handler = h
        if self.log_handler is not None:
            self.log_handler.setLevel(level)
            if logging.getLogger().level > level or logging.getLogger().level == logging.NOTSET:
                logging.getLogger().setLevel(level)

    # ----------------------------------------------------------------------------------------- lifecycle
    def on_initialize(self, params: T.InitializeParams) -> None:
        self.loop = _running_loop()
        caps = params.capabilities
        self.pull = bool(caps.text_document and caps.text_document.diagnostic is not None)
        ws = caps.workspace
        self.refresh_support = bool(ws and ws.diagnostics and ws.diagnostics.refresh_support)
        self.apply_edit_support = bool(ws and ws.apply_edit) if ws is not None else False
        self.progress_support = bool(caps.window and caps.window.work_done_progress)
        ca = caps.text_document.code_action if caps.text_document else None
        self.disabled_support = bool(ca and ca.disabled_support)
        self.settings, warnings = parse_settings(params.initialization_options, self.settings)
        self.configure_logging()
        self.settings_problems(warnings)

    async def on_initialized(self, params: T.InitializedParams) -> None:
        self.loop = _running_loop()
        caps = self.ls.client_capabilities
        ws = caps.workspace
        if ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration:
            # pyproject.toml: the configuration; Python files: what open documents import (project model).
            reg = T.Registration(
                id="gradguard-pyproject-watcher",
                method=T.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=T.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[T.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                              T.FileSystemWatcher(glob_pattern="**/*.py")]),
            )
            try:
                await self.ls.client_register_capability_async(T.RegistrationParams(registrations=[reg]))
            except Exception as e:
                self.log_warning(f"could not register the file watchers: {e}")
        trust = {True: "trusted", False: "untrusted: gradguard.runFile refused", None: "trust not reported"}
        self.log_info(f"gradguard {__version__} language server ready "
                      f"(position encoding {self.encoding}, {'pull' if self.pull else 'push'} diagnostics; "
                      f"workspace {trust[self.settings.workspace_trusted]})")

    def bad_input(self, data: bytes, why: str) -> None:
        """Malformed input the reader skipped to resynchronise: logged (the first 20 times), and a request it
        still names by id is answered with ParseError so that the client does not wait for it forever."""
        from gradguard.lsp.framing import request_id

        self._bad_inputs += 1
        if self._bad_inputs <= 20:
            more = " (further malformed input is not reported)" if self._bad_inputs == 20 else ""
            self.log_error(f"gradguard: skipped {len(data)} bytes of malformed input ({why}): {data[:80]!r}; "
                           f"reading on from the next message{more}")
        msg_id = request_id(data)
        if msg_id is not None:
            try:
                self.ls.protocol._send_response(msg_id, None, JsonRpcException(
                    f"could not read this request: {why}", code=PARSE_ERROR).to_response_error())
            except Exception:  # pragma: no cover - the transport may be gone
                pass

    def on_exit(self, *args: Any) -> None:
        """``exit``: 0 after ``shutdown``, else 1 (LSP), at once: no waiting for a check still running in a worker
        thread (Python cannot interrupt it, and a normal interpreter exit would join it)."""
        exit_now(0 if getattr(self.ls.protocol, "_shutdown", False) else 1, self)

    def on_shutdown(self, params: Any) -> None:
        self.exiting = True  # checks of huge documents in child processes stop (their children are killed)
        self.cancel_runs.set()
        with self.lock:
            for ev in self.run_cancels:
                ev.set()
        for u in self.units.values():
            if u.task is not None:
                u.task.cancel()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.large_pool.shutdown(wait=False, cancel_futures=True)
        self.lane.shutdown()

    @property
    def encoding(self) -> str:
        try:
            return _encoding_name(self.ls.workspace.position_encoding)
        except RuntimeError:
            return "utf-16"

    # ------------------------------------------------------------------------------------------ documents
    def text_doc(self, uri: str) -> Any:
        try:
            docs = self.ls.workspace.text_documents
            # pygls keys documents by the unquoted URI; VS Code sends notebook cells (`...#W0sZmlsZQ%3D%3D`)
            # and paths with spaces percent-encoded.
            return docs.get(uri) or docs.get(unquote(uri))
        except RuntimeError:
            return None

    def unit_for(self, uri: str) -> Unit | None:
        """The unit that shows diagnostics for ``uri`` (a text document, or a cell of a notebook)."""
        u = self.units.get(uri)
        if u is not None:
            return u
        try:
            nb = self.ls.workspace.get_notebook_document(cell_uri=uri)
        except RuntimeError:
            return None
        if nb is not None:
            return self.units.get(nb.uri)
        return None

    def snapshot(self, u: Unit) -> Snapshot | None:
        if not u.notebook:
            doc = self.text_doc(u.key)
            if doc is None:
                return None
            text = doc._source if doc._source is not None else ""
            return Snapshot(text, doc.version, uri_path(u.key), [], self.workspace_folders())
        nb = self.ls.workspace.get_notebook_document(notebook_uri=u.key)
        if nb is None:
            return None
        from gradguard.lsp.notebook import assemble

        cells = []
        numbers = []
        for number, cell in enumerate(nb.cells, 1):
            if cell.kind != T.NotebookCellKind.Code:
                continue
            doc = self.text_doc(cell.document)
            if doc is None or (doc.language_id or "python").lower() not in PYTHON_LANGUAGES:
                continue
            cells.append((cell.document, doc._source or ""))
            numbers.append(number)
        text, segments = assemble(cells, numbers)
        return Snapshot(text, nb.version, uri_path(u.key), segments, self.workspace_folders())

    def current_version(self, u: Unit) -> int | None:
        if u.notebook:
            nb = self.ls.workspace.get_notebook_document(notebook_uri=u.key)
            return nb.version if nb is not None else None
        doc = self.text_doc(u.key)
        return doc.version if doc is not None else None

    def on_did_open(self, params: T.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        if self.unit_for(uri) is not None and uri not in self.units:
            return  # a notebook cell: handled by the notebook
        lang = (params.text_document.language_id or "").lower()
        if lang not in PYTHON_LANGUAGES and not (lang == "" and uri.endswith((".py", ".pyi"))):
            return  # not Python: not ours (a client may send every open file)
        u = self.units.setdefault(uri, Unit(uri))
        self.buffer_changed(u)
        self.schedule(u, 0.0)
        self.schedule_dependents(u, 0.0)

    def on_did_change(self, params: T.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        self.clear_run_for(uri)
        u = self.units.get(uri)
        if u is None:
            return
        self.buffer_changed(u)
        if self.settings.run == "onType":
            delay, hold = self.debounce(u)
            self.schedule(u, delay, hold=hold)
            self.schedule_dependents(u, delay, hold)
        else:
            self.supersede(u)

    def on_did_save(self, params: T.DidSaveTextDocumentParams) -> None:
        u = self.unit_for(params.text_document.uri)
        if u is not None:
            self.schedule(u, 0.0)
            if self.settings.run != "onType":  # on type, they were re-checked after the edit already
                self.schedule_dependents(u, 0.0)

    def on_did_close(self, params: T.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        u = self.units.pop(uri, None)
        if u is not None:
            self.supersede(u)
            for p in u.published | {uri}:
                self.publish_uri(p, [], None)
            self.unit_closed(u)

    def on_notebook_open(self, params: T.DidOpenNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        u = self.units.setdefault(uri, Unit(uri, notebook=True))
        u.notebook = True
        self.schedule(u, 0.0)

    def on_notebook_change(self, params: T.DidChangeNotebookDocumentParams) -> None:
        u = self.units.get(params.notebook_document.uri)
        if u is None:
            return
        cells = params.change.cells
        if cells and cells.text_content:
            for tc in cells.text_content:
                self.clear_run_for(tc.document.uri)
        if self.settings.run == "onType":
            self.schedule(u, self.settings.debounce_ms / 1000.0)
        else:
            self.supersede(u)

    def on_notebook_save(self, params: T.DidSaveNotebookDocumentParams) -> None:
        u = self.units.get(params.notebook_document.uri)
        if u is not None:
            self.schedule(u, 0.0)

    def on_notebook_close(self, params: T.DidCloseNotebookDocumentParams) -> None:
        u = self.units.pop(params.notebook_document.uri, None)
        if u is None:
            return
        self.supersede(u)
        uris = set(u.published) | {c.uri for c in params.cell_text_documents}
        for p in uris:
            self.publish_uri(p, [], None)
        self.unit_closed(u)

    # ---------------------------------------------------------------------------------------- scheduling
    def supersede(self, u: Unit) -> None:
        u.generation += 1
        if u.task is not None and not u.task.done():
            u.task.cancel()
        u.task = None

    def schedule(self, u: Unit, delay: float, priority: int = EDITED, hold: float = 0.0) -> None:
        """(Re)start the check of ``u`` after ``delay`` seconds; supersedes any pending or running check. Its result
        is published no earlier than loop time ``hold`` (0: as soon as it is ready)."""
        self.supersede(u)
        if self.pull:
            # Pull clients ask when they want diagnostics (notebook cells too: one model per client capability,
            # never both, or every finding shows twice); only refresh when results change behind their back.
            return
        u.task = asyncio.ensure_future(self._run(u, u.generation, delay, publish=True, priority=priority, hold=hold))

    async def _run(self, u: Unit, gen: int, delay: float, publish: bool, priority: int = EDITED,
                   hold: float = 0.0) -> Result | None:
        if delay > 0:
            await asyncio.sleep(delay)
        # One analysis per unit at a time: a run already inside the analyzer cannot be interrupted, so a newer
        # one waits for it rather than taking a second worker for the same document.
        while u.running is not None and not u.running.done():
            await asyncio.wait({asyncio.wrap_future(u.running)})
        if u.generation != gen or self.units.get(u.key) is not u:
            return None
        snap = self.snapshot(u)
        if snap is None:
            return None
        try:
            if len(snap.text) > LARGE_CHARS:
                cf = self.large_pool.submit(self._work, u, snap, gen)
            else:
                cf = self.lane.submit(self._work, u, snap, gen, priority=priority)
        except RuntimeError:  # the pool is shut down: the server is exiting
            return None
        u.running = cf
        await asyncio.wait({asyncio.wrap_future(cf)})
        if cf.cancelled() or cf.exception() is not None:
            return None
        res = cf.result()
        if res is None or u.generation != gen or self.units.get(u.key) is not u:
            return None  # superseded while running: stale, never published
        if res.version != self.current_version(u):
            return None
        previous = u.result
        u.result = res
        if res.parse_ok and not res.error:
            u.last_good = res
        self.result_arrived(u, previous)
        wait = hold - asyncio.get_running_loop().time() if hold else 0.0
        if wait > 0:
            await asyncio.sleep(wait)  # speculative start: published once the debounce has passed
            if u.generation != gen or self.units.get(u.key) is not u:
                return None  # a newer edit inside the debounce: this version is never published
        if publish:
            self.publish(u)
        return res

    # ------------------------------------------------------------------------------------- project model
    def workspace_folders(self) -> tuple[str, ...]:
        """The workspace folders (else the root), absolute: the first import roots of every project."""
        try:
            folders = [f for f in (uri_path(w.uri) for w in self.ls.workspace.folders.values()) if f]
            if not folders and self.ls.workspace.root_path:
                folders = [self.ls.workspace.root_path]
        except RuntimeError:
            return ()
        return tuple(norm(f) for f in folders)

    def buffer_changed(self, u: Unit) -> None:
        """An open text document is an overlay of the project: other files' analyses read it instead of the disk."""
        path = None if u.notebook else uri_path(u.key)
        doc = self.text_doc(u.key) if path else None
        if path and doc is not None:
            self.model.set_overlay(path, doc._source or "")

    def debounce(self, u: Unit) -> tuple[float, float]:
        """(delay before the check starts, loop time before which its result is not published) for a didChange.

        The debounce holds diagnostics back until ``debounceMs`` after the last keystroke; the check itself starts
        at once when the document had been quiet that long (a lone edit: its result is published after
        max(debounce, analysis) instead of debounce + analysis), else after the debounce (inside a burst of
        keystrokes, as before). Either way no version superseded within the debounce window is published."""
        d = self.settings.debounce_ms / 1000.0
        now = asyncio.get_running_loop().time()
        quiet = now - u.last_change >= d
        u.last_change = now
        if d <= 0:
            return 0.0, 0.0
        return (0.0, now + d) if quiet else (d, 0.0)

    def schedule_dependents(self, u: Unit, delay: float, hold: float = 0.0) -> None:
        path = None if u.notebook else uri_path(u.key)
        if path:
            # Held a little longer than the edited document: its own diagnostics are published first.
            self.recheck_dependents([path], delay, exclude=u, hold=hold + 0.001 if hold else 0.0)

    def recheck_dependents(self, paths: list[str], delay: float, exclude: Unit | None = None,
                           everyone: bool = False, hold: float = 0.0) -> None:
        """Re-check the open documents whose last analysis read one of ``paths`` (all of them with ``everyone``),
        after the edited document (lower priority on the lane). Pull clients are asked to pull again."""
        keys: set[str] = set()
        for p in paths:
            keys.update(self.model.dependents(p))
        refresh = False
        for v in list(self.units.values()):
            if v is exclude or not (everyone or v.key in keys):
                continue
            if self.pull and not v.notebook:
                self.supersede(v)  # its next pull checks it again
                refresh = True
            else:
                self.schedule(v, delay, priority=DEPENDENT, hold=hold)
        if refresh:
            self.refresh_soon(delay)

    def refresh_soon(self, delay: float) -> None:
        """One ``workspace/diagnostic/refresh`` after ``delay`` (coalesced), for clients that support it."""
        if not self.refresh_support or (self._refresh_pending is not None and not self._refresh_pending.done()):
            return

        async def later() -> None:
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                self.ls.workspace_diagnostic_refresh(None)
            except Exception as e:  # pragma: no cover - transport errors
                log.warning("diagnostic refresh failed: %s", e)

        self._refresh_pending = asyncio.ensure_future(later())

    def result_arrived(self, u: Unit, previous: Result | None) -> None:
        """Record what the new result read (reverse dependencies); when the findings it revealed in other open
        documents changed, show them there."""
        self.model.record(u.key, u.result.deps if u.result is not None else [])
        old = previous.elsewhere if previous is not None else {}
        new = u.result.elsewhere if u.result is not None else {}
        changed = {p for p in set(old) | set(new) if _elsewhere_key(old.get(p)) != _elsewhere_key(new.get(p))}
        if changed:
            self.elsewhere_changed(changed)

    def unit_closed(self, u: Unit) -> None:
        self.model.forget(u.key)
        path = None if u.notebook else uri_path(u.key)
        if path:
            self.model.clear_overlay(path)  # the file on disk again, for the documents that import it
            self.recheck_dependents([path], self.settings.debounce_ms / 1000.0)
        if u.result is not None and u.result.elsewhere:
            self.elsewhere_changed(set(u.result.elsewhere))

    def elsewhere_changed(self, paths: set[str]) -> None:
        self.cross_generation += 1
        for v in list(self.units.values()):
            r = v.result
            if v.notebook or r is None or not r.path or norm(r.path) not in paths:
                continue
            if self.pull:
                self.refresh_soon(0.0)
            elif r.version == self.current_version(v):
                self.publish(v)

    def elsewhere_entries(self, u: Unit | None) -> list[Entry]:
        """Findings in ``u`` that other open documents' analyses revealed (``FileResult.elsewhere``), for the text
        ``u`` has now, without those ``u``'s own analysis reports (same code, line and column)."""
        r = u.result if u is not None else None
        if u is None or r is None or u.notebook or not r.path or not self.settings.enable:
            return []
        path = norm(r.path)
        have = {(f.code, f.line, f.column) for f in r.findings}
        out: list[Entry] = []
        for v in self.units.values():
            got = v.result.elsewhere.get(path) if v is not u and v.result is not None else None
            if got is None or not (got[0] is r.text or got[0] == r.text):
                continue
            for f in got[1]:
                k = (f.code, f.line, f.column)
                if k in have:
                    continue
                have.add(k)
                e = to_entry(f, r.mapper, r.version)
                if e is not None:
                    out.append(e)
        return out

    def project_for(self, snap: Snapshot, config: Any) -> Any:
        """Runs on the lane: the warm project a document on disk is checked in (None for untitled documents)."""
        if not snap.path:
            return None
        try:
            return self.model.project_for(list(snap.folders) or [os.path.dirname(snap.path)], config,
                                          self.interpreter_for(config))
        except Exception as e:  # never lose the diagnostics for it: check the file on its own
            self.log_error(f"gradguard: could not set up the project for {snap.path}: {e}", once=True)
            return None

    def interpreter_for(self, config: Any) -> str | None:
        """The interpreter whose site-packages imports resolve in: the editor's ``interpreter`` setting, else
        ``[tool.gradguard] python`` when the client reported the workspace trusted (it is a program the server
        runs, with -I -S), else None (the interpreter running the server)."""
        interpreter = self.settings.interpreter
        if not interpreter and config.python:
            if self.settings.workspace_trusted is True:
                interpreter = config.python
            else:
                msg = (f"gradguard: [tool.gradguard] python = {config.python!r} is not used: the workspace is not "
                       "known to be trusted (set the editor's interpreter setting instead)")
                with self.lock:
                    fresh = msg not in self._shown
                    self._shown.add(msg)
                if fresh:
                    self.log_warning(msg)
        return interpreter

    def config_for(self, path: str | None) -> Any:
        root = None
        try:
            root = self.ls.workspace.root_path
        except RuntimeError:
            pass
        table, table_root = self.configs.table_for(path, root)
        if self.configs.errors:
            self.config_problems()
        return effective_config(self.settings, table, table_root or (root or "")), root

    def _work(self, u: Unit, snap: Snapshot, gen: int) -> Result | None:
        """Runs in a worker thread: analyse one snapshot. Never raises."""
        if u.generation != gen:
            return None  # superseded before it started: cancelled
        lines = split_lines(snap.text)
        segments = snap.segments or [Segment(u.key, 0, len(lines))]
        mapper = Mapper(lines, self.encoding, segments)
        empty = Result(snap.version, gen, lines, mapper, [], [], True)
        try:
            if not self.settings.enable:
                return empty
            config, root = self.config_for(snap.path)
            if excluded(snap.path, config, root):
                return empty
            path = snap.path or u.key
            project = None
            deps: list[str] = []
            elsewhere: dict[str, tuple[str, list[Finding]]] = {}
            if len(snap.text) > MAX_CHARS:
                from gradguard.model import Finding as F

                findings = [F(path, 1, 1, 1, 2, "GG000", f"skipped: file is larger than {MAX_CHARS // 1_000_000} "
                              "million characters", severity="info")]
            elif len(snap.text) > LARGE_CHARS:
                from gradguard.lsp.isolated import Cancelled, check_in_child

                t0 = time.perf_counter()
                try:
                    findings = check_in_child(snap.text, path, config, lambda: u.generation != gen or self.exiting,
                                              self.children, self.lock)
                except Cancelled:
                    return None
                log.debug("checked %s v%s (%d lines) in a child process: %d findings in %.1f ms", u.key,
                          snap.version, len(lines), len(findings), (time.perf_counter() - t0) * 1000)
            else:
                from gradguard.api import check_text

                t0 = time.perf_counter()
                project = self.project_for(snap, config)
                checked = check_text(snap.text, path, config, fixes=True, project=project, incremental=True)
                findings, deps = checked.findings, checked.deps
                if project is not None:
                    elsewhere = _with_fixes(checked.elsewhere, project)
                log.debug("checked %s v%s (%d lines): %d findings in %.1f ms (%d modules read)", u.key, snap.version,
                          len(lines), len(findings), (time.perf_counter() - t0) * 1000, len(deps))
            parse_ok = not any(f.code == "GG000" for f in findings)
            shown = list(findings)
            last = u.last_good
            if not parse_ok and last is not None and self.settings.enable:
                # Syntax error mid-typing: keep the last good findings whose lines read exactly the same.
                for f in last.findings:
                    if f.code == "GG000" or not config.enabled(f.code, path):
                        continue
                    touched = _touched_lines(f)
                    if all(1 <= ln <= len(lines) and ln <= len(last.lines) and lines[ln - 1] == last.lines[ln - 1]
                           for ln in touched):
                        shown.append(f)
            entries = [e for e in (to_entry(f, mapper, snap.version) for f in shown) if e is not None]
            return Result(snap.version, gen, lines, mapper, shown, entries, parse_ok, text=snap.text, path=path,
                          config=config, project=project, deps=deps, elsewhere=elsewhere)
        except Exception as e:  # an analyzer bug: log it, this document gets no diagnostics
            import traceback

            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            self.log_error(f"gradguard: internal error while checking {u.key}: {detail}", once=True)
            log.debug("traceback", exc_info=True)
            empty.error = True
            return empty

    async def ensure_result(self, u: Unit) -> Result | None:
        """The result for the unit's current text (runs a check now if none is pending)."""
        for _ in range(100):
            if self.units.get(u.key) is not u:
                return None
            version = self.current_version(u)
            r = u.result
            if r is not None and r.version == version and r.generation == u.generation:
                return r
            if self.settings.run == "onSave" and r is not None and (u.task is None or u.task.done()):
                return r  # on-save mode: the last result until the next save
            if u.task is None or u.task.done():
                u.task = asyncio.ensure_future(self._run(u, u.generation, 0.0, publish=True))
            await asyncio.wait({u.task})
        return u.result

    # ---------------------------------------------------------------------------------------- publishing
    def diagnostics_for(self, uri: str, u: Unit | None) -> list[T.Diagnostic]:
        static: list[Entry] = []
        if u is not None and u.result is not None and self.settings.enable:
            static = [e for e in u.result.entries if e.uri == uri]
            static += [e for e in self.elsewhere_entries(u) if e.uri == uri]
        run = [e for per_target in self.run_entries.values() for e in per_target.get(uri, [])]
        if not run:
            return [e.diagnostic for e in static]
        from gradguard.lsp.runfile import merge

        return merge(static, run)  # one diagnostic per line: Run File confirms a static finding

    def publish_uri(self, uri: str, diags: list[T.Diagnostic], version: int | None) -> None:
        try:
            self.ls.text_document_publish_diagnostics(
                T.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version))
        except Exception as e:  # pragma: no cover - transport errors
            log.warning("publish failed: %s", e)

    def publish(self, u: Unit) -> None:
        if u.result is None:
            return
        if self.pull:
            if u.notebook:
                self.notebook_changed(u)
            return
        uris = [s.uri for s in u.result.mapper.segments]
        version = u.result.version if not u.notebook else None
        for uri in uris:
            self.publish_uri(uri, self.diagnostics_for(uri, u), version)
        for gone in u.published - set(uris):
            self.publish_uri(gone, [], None)
        u.published = set(uris)

    def refresh_all(self, delay: float = 0.0) -> None:
        """Results may change without a text change (config, pyproject, enable): recheck everything."""
        for u in list(self.units.values()):
            self.schedule(u, delay)
        if self.pull and self.refresh_support:
            try:
                self.ls.workspace_diagnostic_refresh(None)
            except Exception as e:  # pragma: no cover
                log.warning("diagnostic refresh failed: %s", e)

    def notebook_changed(self, u: Unit) -> None:
        """Pull clients: a notebook's cells are analysed together, so an edit in one cell can change what another
        cell shows; when it did, ask the client to pull again (workspace/diagnostic/refresh)."""
        if u.result is None or not self.refresh_support:
            return
        sig: dict[str, list[tuple[Any, ...]]] = {}
        for e in u.result.entries:
            r = e.diagnostic.range
            sig.setdefault(e.uri, []).append((r.start.line, r.start.character, str(e.diagnostic.code),
                                              e.diagnostic.message))
        before = self._nb_sigs.get(u.key)
        self._nb_sigs[u.key] = sig
        if before is not None and before != sig:
            try:
                self.ls.workspace_diagnostic_refresh(None)
            except Exception as e:  # pragma: no cover
                log.warning("diagnostic refresh failed: %s", e)

    def result_id(self, u: Unit | None, uri: str) -> str:
        v = u.result.version if u is not None and u.result is not None else None
        g = u.result.generation if u is not None and u.result is not None else 0
        return f"{v}:{g}:{self.run_generation}:{self.cross_generation}:{int(self.settings.enable)}"

    async def on_pull(self, params: T.DocumentDiagnosticParams) -> T.DocumentDiagnosticReport:
        uri = params.text_document.uri
        u = self.unit_for(uri)
        if u is not None:
            await self.ensure_result(u)
            u = self.unit_for(uri)
        rid = self.result_id(u, uri)
        if params.previous_result_id is not None and params.previous_result_id == rid:
            return T.RelatedUnchangedDocumentDiagnosticReport(result_id=rid)
        return T.RelatedFullDocumentDiagnosticReport(items=self.diagnostics_for(uri, u), result_id=rid)

    # ------------------------------------------------------------------------------------ configuration
    async def on_did_change_configuration(self, params: T.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if raw is None or (isinstance(raw, dict) and not raw):
            caps = self.ls.client_capabilities.workspace
            if caps is not None and caps.configuration:
                try:
                    got = await self.ls.workspace_configuration_async(
                        T.ConfigurationParams(items=[T.ConfigurationItem(section="gradguard")]))
                    raw = got[0] if got else None
                except Exception as e:
                    self.log_warning(f"workspace/configuration failed: {e}")
                    raw = None
        self.settings, warnings = parse_settings(raw, self.settings)
        self.configure_logging()
        self.settings_problems(warnings)
        self.configs.clear()
        self.model.forget_roots()
        self.refresh_all()

    def on_did_change_watched_files(self, params: T.DidChangeWatchedFilesParams) -> None:
        config_changed = False
        changed: list[str] = []
        created_or_deleted = False
        for ch in params.changes or []:
            if ch.uri.endswith("pyproject.toml"):
                config_changed = True
            elif ch.type in (T.FileChangeType.Changed, T.FileChangeType.Deleted):
                self.clear_run_for(ch.uri)
            path = uri_path(ch.uri)
            if path and not ch.uri.endswith("pyproject.toml") and not self.model.has_overlay(path):
                changed.append(path)  # an open buffer wins over its file on disk: nothing changes for it
                created_or_deleted |= ch.type != T.FileChangeType.Changed
        if config_changed:
            self.configs.clear()
            self.model.forget_roots()
            self.model.changed_on_disk(changed)  # every document is checked again: with these files read anew
            with self.lock:
                self._shown.clear()  # a pyproject.toml that is still wrong after an edit says so again
            self.refresh_all()
        elif changed:
            self.files_changed_on_disk(changed, created_or_deleted)

    def files_changed_on_disk(self, paths: list[str], created_or_deleted: bool) -> None:
        """Python files changed on disk: the projects forget them, and the open documents that read them are
        checked again (every open document when a file appeared or disappeared: an import may now resolve
        elsewhere)."""
        unreadable = self.model.changed_on_disk(paths)
        self.recheck_dependents(paths, self.settings.debounce_ms / 1000.0, everyone=created_or_deleted or unreadable)

    def clear_run_for(self, uri: str) -> None:
        changed = False
        for per_target in self.run_entries.values():
            if per_target.pop(uri, None):
                changed = True
        if changed:
            self.run_generation += 1
            if self.unit_for(uri) is None:
                self.publish_uri(uri, [], None)

    def publish_all_for(self, uri: str) -> None:
        u = self.unit_for(uri)
        if u is not None:
            if self.pull:
                if self.refresh_support:
                    self.ls.workspace_diagnostic_refresh(None)
                return
            self.publish_uri(uri, self.diagnostics_for(uri, u), u.result.version if u.result and not u.notebook
                              else None)
        else:
            self.publish_uri(uri, self.diagnostics_for(uri, None), None)


def exit_now(code: int, controller: Controller | None = None) -> None:
    """Leave the process now: stop scripts started by gradguard.runFile (they get up to a second), flush the
    log, and ``os._exit`` (a normal exit would wait for analyses still running in worker threads)."""
    if controller is not None:
        controller.exiting = True
        controller.cancel_runs.set()
        for ev in list(controller.run_cancels):
            ev.set()
        with controller.lock:
            children = list(controller.children)
        for p in children:
            try:
                p.kill()
            except OSError:  # pragma: no cover - already gone
                pass
        end = time.monotonic() + 1.0
        while controller.runs_active and time.monotonic() < end:
            time.sleep(0.02)
    log.info("exiting with code %d", code)
    try:
        sys.stderr.flush()
        logging.shutdown()
    finally:
        os._exit(code)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def build_server() -> GradguardLanguageServer:
    ls = GradguardLanguageServer(
        "gradguard", __version__,
        text_document_sync_kind=T.TextDocumentSyncKind.Incremental,
        notebook_document_sync=T.NotebookDocumentSyncOptions(
            notebook_selector=[T.NotebookDocumentFilterWithCells(
                notebook="*", cells=[T.NotebookCellLanguage(language="python")])],
            save=True),
        protocol_cls=GradguardProtocol,
        max_workers=4,
    )
    c = Controller(ls)
    ls.controller = c

    def plain(fn: Callable[..., Any]) -> Callable[..., Any]:
        # pygls tags handlers with attributes, which bound methods cannot carry: wrap them.
        if asyncio.iscoroutinefunction(fn):
            async def ahandler(*args: Any) -> Any:
                return await fn(*args)
            return ahandler

        def handler(*args: Any) -> Any:
            return fn(*args)
        return handler

    def reg(method: str, fn: Callable[..., Any], options: Any = None) -> None:
        ls.feature(method, options)(plain(fn))

    reg(T.INITIALIZE, c.on_initialize)
    reg(T.INITIALIZED, c.on_initialized)
    reg(T.SHUTDOWN, c.on_shutdown)
    reg(T.EXIT, c.on_exit)
    reg(T.TEXT_DOCUMENT_DID_OPEN, c.on_did_open)
    reg(T.TEXT_DOCUMENT_DID_CHANGE, c.on_did_change)
    reg(T.TEXT_DOCUMENT_DID_SAVE, c.on_did_save, T.SaveOptions(include_text=False))
    reg(T.TEXT_DOCUMENT_DID_CLOSE, c.on_did_close)
    reg(T.NOTEBOOK_DOCUMENT_DID_OPEN, c.on_notebook_open)
    reg(T.NOTEBOOK_DOCUMENT_DID_CHANGE, c.on_notebook_change)
    reg(T.NOTEBOOK_DOCUMENT_DID_SAVE, c.on_notebook_save)
    reg(T.NOTEBOOK_DOCUMENT_DID_CLOSE, c.on_notebook_close)
    reg(T.TEXT_DOCUMENT_DIAGNOSTIC, c.on_pull,
        T.DiagnosticOptions(identifier="gradguard", inter_file_dependencies=True, workspace_diagnostics=False))
    reg(T.TEXT_DOCUMENT_CODE_ACTION, c.actions.on_code_action,
        T.CodeActionOptions(code_action_kinds=[T.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=False))
    reg(T.TEXT_DOCUMENT_HOVER, c.actions.on_hover)
    reg(T.WORKSPACE_DID_CHANGE_CONFIGURATION, c.on_did_change_configuration)
    reg(T.WORKSPACE_DID_CHANGE_WATCHED_FILES, c.on_did_change_watched_files)
    ls.command("gradguard.fixAll")(plain(c.commands.cmd_fix_all))
    ls.command("gradguard.runFile")(plain(c.commands.cmd_run_file))
    ls.command("gradguard.showKnowledge")(plain(c.commands.cmd_show_knowledge))
    ls.command("gradguard.checkWorkspace")(plain(c.commands.cmd_check_workspace))
    ls.command("gradguard.clearRunDiagnostics")(plain(c.commands.cmd_clear_run))
    ls.command("gradguard.cancelRun")(plain(c.commands.cmd_cancel_run))
    ls.command("gradguard.debugInfo")(plain(c.commands.cmd_debug_info))
    return ls


def _prewarm() -> None:
    """Import the analyzer and load the knowledge table while the client is still handshaking."""
    try:
        from gradguard.api import check_source

        check_source("import torch\nx = torch.zeros(1)\ny = x.exp()\n", "<prewarm>", fixes=True)
    except Exception:  # the first real check reports any problem
        log.debug("prewarm failed", exc_info=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gradguard lsp", description="Start the gradguard language server.")
    p.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    p.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead of stdio")
    p.add_argument("--log-file", help="append the server log to this file")
    p.add_argument("--log-level", choices=["error", "warning", "info", "debug"], default=None)
    p.add_argument("--untrusted", action="store_true",
                   help="the workspace is untrusted: refuse gradguard.runFile (like workspaceTrusted: false)")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="gradguard-lsp %(levelname)s %(name)s: %(message)s")
    for h in logging.getLogger().handlers:
        h.setLevel(logging.DEBUG if args.log_level == "debug" and not args.log_file else logging.WARNING)
    ls = build_server()
    c = ls.controller
    overrides: dict[str, Any] = {}
    if args.log_file:
        overrides["logFile"] = args.log_file
    if args.log_level:
        overrides["logLevel"] = args.log_level
    if args.untrusted:
        overrides["workspaceTrusted"] = False
    c.settings, _ = parse_settings(overrides, c.settings)
    c.configure_logging()
    threading.Thread(target=_prewarm, name="gradguard-prewarm", daemon=True).start()
    # The long-lived objects made so far (modules, lsprotocol's converters) never die: keep them out of the
    # collector's scans; and no automatic collection at all: one landing in the middle of an edit showed up as the
    # p95 of the didChange -> publishDiagnostics latency. The lane collects between checks instead.
    gc.freeze()
    manual_gc()  # the lane collects between checks (gradguard.lsp.projects.Lane)
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        try:
            port_n = int(port)
        except ValueError:
            print(f"gradguard lsp: --tcp expects HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        ls.start_tcp(host or "127.0.0.1", port_n)
        exit_now(0 if ls.protocol._shutdown else 1, c)
    # Anything the analyzer (or a library) prints must not corrupt the protocol stream.
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr
    ls.start_io(sys.stdin.buffer, stdout)
    # End of input (the client went away): exit now, without waiting for a check still running.
    exit_now(0 if ls.protocol._shutdown else 1, c)
    return 0
