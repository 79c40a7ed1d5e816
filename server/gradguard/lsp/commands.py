"""``workspace/executeCommand``: gradguard.fixAll, runFile (the runtime doctor, never in an untrusted workspace),
cancelRun, clearRunDiagnostics, checkWorkspace, showKnowledge and debugInfo, with their work-done progress. State
(documents, run results, the lane) lives on the :class:`~gradguard.lsp.server.Controller`."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from lsprotocol import types as T
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.uris import from_fs_path, to_fs_path

from gradguard import __version__
from gradguard.lsp.convert import (
    LARGE_CHARS,
    MAX_CHARS,
    REQUEST_FAILED,
    RUN_SOURCE,
    Entry,
    Mapper,
    split_lines,
    to_entry,
    uri_path,
)
from gradguard.lsp.projects import BACKGROUND, norm
from gradguard.lsp.settings import excluded
from gradguard.model import Finding, Related

if TYPE_CHECKING:
    from gradguard.lsp.server import Controller


class Commands:
    """The ``gradguard.*`` commands of the :class:`Controller` they are built with."""

    def __init__(self, c: Controller) -> None:
        self.c = c
        self._tokens = itertools.count(1)  # work-done progress tokens

    @staticmethod
    def _uri_arg(args: tuple[Any, ...], cmd: str) -> tuple[str, dict[str, Any]]:
        if not args:
            raise JsonRpcInvalidParams(f"{cmd}: expected a document uri argument")
        a = args[0]
        if isinstance(a, str):
            return a, {}
        if isinstance(a, dict) and isinstance(a.get("uri"), str):
            return a["uri"], a
        raise JsonRpcInvalidParams(f"{cmd}: expected a uri string or {{\"uri\": ...}}, got {type(a).__name__}")

    async def cmd_fix_all(self, *args: Any) -> dict[str, Any]:
        uri, _ = self._uri_arg(args, "gradguard.fixAll")
        u = self.c.unit_for(uri)
        if u is None:
            raise JsonRpcException(f"gradguard.fixAll: {uri} is not open", code=REQUEST_FAILED)
        await self.c.ensure_result(u)
        edit, n, skipped = await self.c.actions.fix_all_plan(u)
        why = {"skipped": "; ".join(lg for _, lg in skipped)} if skipped else {}  # what it left out, and why
        if edit is None:
            return {"applied": 0, **why}
        res = await self.c.ls.workspace_apply_edit_async(
            T.ApplyWorkspaceEditParams(edit=edit, label="gradguard: fix all"))
        return {"applied": n if getattr(res, "applied", False) else 0, **why}

    async def cmd_show_knowledge(self, *args: Any) -> dict[str, Any]:
        if not args or not isinstance(args[0], str) or not args[0].strip():
            raise JsonRpcInvalidParams("gradguard.showKnowledge: expected a callable name, e.g. \"torch.exp\"")
        name = args[0].strip()
        try:
            from gradguard.knowledge import load
            from gradguard.knowledge.describe import describe
        except ImportError as e:
            raise JsonRpcException(f"gradguard.showKnowledge is not available: {e}", code=REQUEST_FAILED) from e

        def work() -> str | None:
            return describe(load(), name)

        text = await asyncio.get_running_loop().run_in_executor(self.c.pool, work)
        md = None if text is None else f"```text\n{text.rstrip()}\n```\n"
        return {"name": name, "text": text, "markdown": md}

    async def _progress_begin(self, title: str) -> str | None:
        if not self.c.progress_support:
            return None
        token = f"gradguard-{next(self._tokens)}"
        try:
            await self.c.ls.work_done_progress.create_async(token)
            self.c.ls.work_done_progress.begin(token, T.WorkDoneProgressBegin(title=title, percentage=0))
            return token
        except Exception as e:
            self.c.log_warning(f"progress not available: {e}")
            return None

    def _progress_report(self, token: str | None, message: str, pct: int | None = None) -> None:
        if token is None:
            return

        def send() -> None:
            try:
                self.c.ls.work_done_progress.report(token, T.WorkDoneProgressReport(message=message, percentage=pct))
            except Exception:  # pragma: no cover
                pass

        if self.c.loop is not None:
            self.c.loop.call_soon_threadsafe(send)

    def _progress_end(self, token: str | None, message: str) -> None:
        if token is not None:
            try:
                self.c.ls.work_done_progress.end(token, T.WorkDoneProgressEnd(message=message))
            except Exception:  # pragma: no cover
                pass

    def _lines_of(self, uri: str, path: str) -> list[str]:
        doc = self.c.text_doc(uri)
        if doc is not None and doc._source is not None:
            return split_lines(doc._source)
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return split_lines(fh.read())
        except OSError:
            return [""]

    async def cmd_run_file(self, *args: Any) -> dict[str, Any]:
        if self.c.settings.workspace_trusted is False:
            # Running the file runs the user's code: never in a workspace the client reported untrusted.
            msg = ("gradguard.runFile refused: the workspace is not trusted (the client sent workspaceTrusted: "
                   "false); it runs your code, so trust the workspace first")
            self.c.log_warning(msg)
            raise JsonRpcException(msg, code=REQUEST_FAILED)
        uri, opts = self._uri_arg(args, "gradguard.runFile")
        path = uri_path(uri)
        if path is None:
            raise JsonRpcException(f"gradguard.runFile: {uri} is not a file on disk (save it first)",
                                   code=REQUEST_FAILED)
        if not os.path.isfile(path):
            raise JsonRpcException(f"gradguard.runFile: {path} does not exist", code=REQUEST_FAILED)
        try:
            from gradguard.runtime.api import run_script
        except ImportError as e:
            raise JsonRpcException(f"gradguard.runFile is not available: the runtime doctor is not installed ({e})",
                                   code=REQUEST_FAILED) from e
        script_args = [str(a) for a in opts.get("args", []) or []] if isinstance(opts.get("args", []), list) else []
        timeout = opts.get("timeout", self.c.settings.run_timeout)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            timeout = self.c.settings.run_timeout
        # A client that shows its own progress (with Cancel: gradguard.cancelRun) passes "progress": false.
        token = await self._progress_begin(f"gradguard: running {os.path.basename(path)}") \
            if opts.get("progress", True) is not False else None
        lines_seen = [0]

        def on_output(chunk: Any) -> None:
            text = chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else str(chunk)
            for ln in text.splitlines():
                lines_seen[0] += 1
                self.c.send_log(T.MessageType.Log, f"[run {os.path.basename(path)}] {ln}")
            self._progress_report(token, f"{lines_seen[0]} lines of output")

        kwargs: dict[str, Any] = {}
        try:
            params = inspect.signature(run_script).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        cancel = threading.Event()  # gradguard.cancelRun, or shutdown
        if self.c.cancel_runs.is_set():
            cancel.set()
        for key, value in (("args", script_args), ("timeout", float(timeout)), ("on_output", on_output),
                           ("cwd", os.path.dirname(path)), ("cancel", cancel)):
            if key in params:
                kwargs[key] = value
        started = time.monotonic()

        def run() -> Any:
            with self.c.lock:
                self.c.runs_active += 1
                self.c.run_cancels[cancel] = uri
            try:
                return run_script(path, **kwargs)
            finally:
                with self.c.lock:
                    self.c.runs_active -= 1
                    self.c.run_cancels.pop(cancel, None)

        try:
            result = await asyncio.get_running_loop().run_in_executor(None, run)
        except Exception as e:
            self._progress_end(token, "failed")
            raise JsonRpcException(f"gradguard.runFile failed: {type(e).__name__}: {e}", code=REQUEST_FAILED) from e
        if not isinstance(result, dict):
            self._progress_end(token, "failed")
            raise JsonRpcException("gradguard.runFile: the runtime returned no result", code=REQUEST_FAILED)
        err = result.get("error")
        from gradguard.lsp.runfile import report_text

        # The script's own traceback is already in the log (its stderr): the report adds the two lines it lacks.
        report = report_text(result, path, time.monotonic() - started)
        self.c.send_log(T.MessageType.Info if result.get("status") == "clean" else T.MessageType.Error,
                       f"gradguard run: {report}")
        entries_by_target = self._run_entries(uri, path, result.get("diagnostics") or [])
        old = self.c.run_entries.pop(uri, {})
        self.c.run_entries[uri] = entries_by_target
        self.c.run_generation += 1
        for target in set(old) | set(entries_by_target):
            self.c.publish_all_for(target)
        n = sum(len(v) for v in entries_by_target.values())
        self._progress_end(token, f"{result.get('status', 'done')}: {n} problem{'s' if n != 1 else ''} "
                                  f"({time.monotonic() - started:.1f} s)")
        return {"status": result.get("status"), "ok": result.get("status") == "clean",
                "exit_code": result.get("exit_code"), "returncode": result.get("exit_code"), "error": err,
                "diagnostics": n, "culprits": result.get("culprits", []), "saved_by": result.get("saved_by", []),
                "report": report, "stats": result.get("stats", {})}

    async def cmd_cancel_run(self, *args: Any) -> dict[str, Any]:
        """Stop the gradguard.runFile of ``[uri]`` (every run without an argument): the script and its children."""
        uri = args[0] if args and isinstance(args[0], str) else (args[0].get("uri") if args and isinstance(
            args[0], dict) else None)
        with self.c.lock:
            hits = [ev for ev, u in self.c.run_cancels.items() if uri is None or u == uri]
        for ev in hits:
            ev.set()
        return {"cancelled": len(hits)}

    async def cmd_debug_info(self, *args: Any) -> dict[str, Any]:
        """What this server is: version, interpreter, where gradguard and its dependencies come from, its mode."""
        import importlib.util
        import platform

        def where(mod: str) -> str | None:
            try:
                spec = importlib.util.find_spec(mod)
            except (ImportError, ValueError):
                return None
            return os.path.dirname(spec.origin) if spec is not None and spec.origin else None

        from gradguard.knowledge import installed_torch_version

        return {
            "gradguard": __version__, "location": where("gradguard"), "python": sys.executable,
            "python_version": platform.python_version(),
            "flags": {"isolated": bool(sys.flags.isolated), "safe_path": bool(getattr(sys.flags, "safe_path", 0))},
            "pygls": where("pygls"), "libcst": where("libcst"), "torch": installed_torch_version(),
            "diagnostics": "pull" if self.c.pull else "push", "position_encoding": self.c.encoding,
            "documents": len(self.c.units), "workspace_trusted": self.c.settings.workspace_trusted,
            "log_level": self.c.settings.log_level, "runs_active": self.c.runs_active,
        }

    def _run_entries(self, script_uri: str, script_path: str, diags: list[Any]) -> dict[str, list[Entry]]:
        out: dict[str, list[Entry]] = {}
        mappers: dict[str, tuple[str, Mapper]] = {}
        for d in diags:
            try:
                p = str(d.get("path") or script_path)
                f = Finding(
                    path=p, line=int(d["line"]), column=int(d.get("column", 1)),
                    end_line=int(d.get("end_line", d["line"])), end_column=int(d.get("end_column", 0)) or 10_000,
                    code=str(d.get("code", "GG100")), message=str(d.get("message", "")),
                    severity=str(d.get("severity", "error")),
                    related=[Related(str(r.get("path") or p), int(r["line"]), int(r.get("column", 1)),
                                     str(r.get("message", "")), int(r.get("end_line", 0) or r["line"]),
                                     int(r.get("end_column", 0) or 10_000))
                             for r in d.get("related", []) or []],
                    facts={"static_code": d.get("static_code")} if d.get("static_code") else {},
                )
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                self.c.log_warning(f"gradguard.runFile: skipped a malformed diagnostic ({e})")
                continue
            if p not in mappers:
                target = script_uri if os.path.abspath(p) == os.path.abspath(script_path) else (from_fs_path(p) or p)
                mappers[p] = (target, Mapper.single(target, self._lines_of(target, p), self.c.encoding))
            target, mapper = mappers[p]
            entry = to_entry(f, mapper, None, source=RUN_SOURCE)
            if entry is not None:
                out.setdefault(entry.uri, []).append(entry)
        return out

    async def cmd_clear_run(self, *args: Any) -> dict[str, Any]:
        targets: set[str] = set()
        if args and isinstance(args[0], str):
            targets.add(args[0])
        else:
            for per in self.c.run_entries.values():
                targets.update(per)
        for t in targets:
            self.c.clear_run_for(t)
            self.c.publish_all_for(t)
        return {"cleared": len(targets)}

    async def cmd_check_workspace(self, *args: Any) -> dict[str, Any]:
        try:
            folders = [f for f in (to_fs_path(w.uri) for w in self.c.ls.workspace.folders.values()) if f]
            if not folders and self.c.ls.workspace.root_path:
                folders = [self.c.ls.workspace.root_path]
        except RuntimeError:
            folders = []
        if not folders:
            raise JsonRpcException("gradguard.checkWorkspace: no workspace folder", code=REQUEST_FAILED)
        token = await self._progress_begin("gradguard: checking the workspace")
        from gradguard.api import check_text
        from gradguard.files import iter_python_files

        roots = tuple(norm(f) for f in folders)
        scratch: list[Any] = [None, 0]  # a project for this check only (renewed every 200 files), files done with it

        def listing() -> list[str]:
            config0, _ = self.c.config_for(os.path.join(folders[0], "x.py"))
            return list(iter_python_files(folders, config0))

        def check_one(p: str, uri: str) -> tuple[str, list[Entry]] | None:
            """One file, on the lane at background priority: an edited document's check goes first."""
            if self.c.exiting:
                return None
            with open(p, "rb") as fh:
                data = fh.read()
            config, root = self.c.config_for(p)
            if excluded(p, config, root):
                return None
            findings = None
            if LARGE_CHARS < len(data) <= MAX_CHARS:  # a huge file: in a child process, as open ones
                from gradguard.api import decode_source
                from gradguard.lsp.isolated import check_in_child

                try:
                    decoded = decode_source(data)
                except (UnicodeDecodeError, LookupError):
                    pass  # check_text says so (GG000)
                else:
                    findings = check_in_child(decoded, p, config, lambda: self.c.exiting, self.c.children, self.c.lock)
            if findings is None:
                if scratch[0] is None or scratch[1] >= 200:
                    scratch[0], scratch[1] = None, 0
                    try:
                        scratch[0] = self.c.model.scratch(list(roots) or [os.path.dirname(p)], config,
                                                        self.c.interpreter_for(config))
                    except Exception as e:  # check the files on their own
                        self.c.log_error(f"gradguard: could not set up the project for {p}: {e}", once=True)
                scratch[1] += 1
                findings = check_text(data, p, config, fixes=True, project=scratch[0]).findings
            text = data.decode("utf-8", "replace")
            mapper = Mapper.single(uri, split_lines(text), self.c.encoding)
            return uri, [e for e in (to_entry(f, mapper, None) for f in findings) if e]

        loop = asyncio.get_running_loop()
        files = await loop.run_in_executor(self.c.pool, listing)
        results: list[tuple[str, list[Entry]]] = []
        for i, p in enumerate(files):
            uri = from_fs_path(p) or p
            if self.c.unit_for(uri) is not None:
                continue
            self._progress_report(token, os.path.relpath(p, folders[0]), int(100 * i / max(len(files), 1)))
            try:
                got = await asyncio.wrap_future(self.c.lane.submit(check_one, p, uri, priority=BACKGROUND))
            except RuntimeError:  # shutting down
                break
            except Exception as e:
                self.c.log_error(f"gradguard: internal error while checking {p}: {e}")
                continue
            if got is not None:
                results.append(got)
        n = 0
        for uri, entries in results:
            n += len(entries)
            self.c.publish_uri(uri, [e.diagnostic for e in entries], None)
        self._progress_end(token, f"{n} problems in {len(results)} files")
        return {"files": len(results), "findings": n}
