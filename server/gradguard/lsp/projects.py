"""The language server's project model: one warm :class:`gradguard.project.Project` per workspace, the open buffers
as its overlays, and who depends on whom.

Threading: a ``Project`` is not thread-safe, so every analysis that uses one runs on one thread, the
:class:`Lane` (a single worker with a priority queue: the edited document first, then the documents that depend on
it, then background work). The event loop never touches a project: it records what changed (buffer texts, files
changed on disk) in :class:`ProjectModel` under a lock, and the lane applies those changes to each project at the
start of its next job (:meth:`ProjectModel.project_for`).
"""

from __future__ import annotations

import concurrent.futures
import gc
import heapq
import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gradguard.project import Project

MAX_PROJECTS = 4  # warm projects kept (least recently used dropped): one per workspace / config root / interpreter

# Priorities on the lane (lower runs first).
EDITED = 0  # the document that changed, was opened or saved; pulls
DEPENDENT = 1  # a document re-checked because something it imports changed
BACKGROUND = 2  # gradguard.checkWorkspace
HOUSEKEEPING = 9  # garbage collection between checks


class Lane:
    """One worker thread running jobs by priority, then in submission order. ``submit`` returns a
    ``concurrent.futures.Future``; cancelled futures are skipped. It also collects garbage between jobs
    (:meth:`_collect`)."""

    def __init__(self, name: str = "gradguard-project") -> None:
        self._queue: list[tuple[int, int, concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]]] = []
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._closed = False
        self._since_young = 0  # jobs since the last collection
        self._since_full = 0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, priority: int = EDITED) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._cv:
            if self._closed:
                raise RuntimeError("the lane is shut down")
            heapq.heappush(self._queue, (priority, next(self._seq), fut, fn, args))
            self._cv.notify()
        return fut

    def shutdown(self) -> None:
        with self._cv:
            self._closed = True
            for _, _, fut, _, _ in self._queue:
                fut.cancel()
            self._queue.clear()
            self._cv.notify()

    def _next(self) -> tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]] | None:
        """The next job; None when it is time to collect garbage. Returns only at shutdown otherwise."""
        with self._cv:
            while True:
                if self._closed:
                    raise SystemExit
                if self._queue and self._since_young < 8:
                    _, _, fut, fn, args = heapq.heappop(self._queue)
                    return fut, fn, args
                if self._queue:
                    return None  # a long run of jobs (a workspace check): collect between them all the same
                if self._since_young:
                    # Idle after a check: let the event loop publish its result first, then collect.
                    if not self._cv.wait(0.05) and not self._queue and not self._closed:
                        return None
                    continue
                if not self._cv.wait(30.0) and gc.get_count()[0] > 10_000:
                    return None  # idle for long while the event loop allocated: collect that too

    def _loop(self) -> None:
        while True:
            try:
                job = self._next()
            except SystemExit:
                return
            if job is None:
                self._collect()
                continue
            fut, fn, args = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # handed to whoever waits for it
                fut.set_exception(e)
            self._since_young += 1

    def _collect(self) -> None:
        """The server runs with automatic garbage collection off (:func:`manual_gc`): a collection in the middle of a
        check traversed every tree the warm projects hold, and showed as the p95 of the edit latency. The lane
        collects instead, between checks: the young generations after each (about 10 ms for a 5,000-line file),
        everything every 20 collections (about 40 ms)."""
        self._since_young = 0
        self._since_full += 1
        if self._since_full >= 20:
            self._since_full = 0
            gc.collect()
        else:
            gc.collect(1)


def manual_gc() -> None:
    """Automatic collection off: the lane collects between checks (:meth:`Lane._collect`)."""
    gc.disable()


@dataclass
class _Entry:
    project: Project
    overlays: dict[str, str] = field(default_factory=dict)  # what this project has been given
    dirty: set[str] = field(default_factory=set)  # files changed on disk since its last sync
    python: str | None = None


def norm(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


class ProjectModel:
    """Projects per (import roots, interpreter), the open buffers, and for each open unit the modules its last
    analysis read (its dependencies)."""

    def __init__(self, warn: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._overlays: dict[str, str] = {}  # path -> buffer text (event loop writes, lane reads under the lock)
        self._projects: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()  # lane only (+ the lock for dirty)
        self._roots: dict[tuple[Any, ...], list[str]] = {}
        self._warned: set[str] = set()
        self._warn = warn
        self.deps: dict[str, frozenset[str]] = {}  # unit key -> paths its last result read (event loop only)

    # ---------------------------------------------------------------- event loop side
    def set_overlay(self, path: str, text: str) -> None:
        with self._lock:
            self._overlays[norm(path)] = text

    def clear_overlay(self, path: str) -> None:
        with self._lock:
            self._overlays.pop(norm(path), None)

    def has_overlay(self, path: str) -> bool:
        with self._lock:
            return norm(path) in self._overlays

    def changed_on_disk(self, paths: Iterable[str]) -> bool:
        """Mark ``paths`` changed for every project. True when one of them could not be read before: no analysis
        lists it among what it read, so every open document may depend on it."""
        ps = {norm(p) for p in paths}
        with self._lock:
            unreadable = False
            for e in self._projects.values():
                e.dirty |= ps
                unreadable = unreadable or any(p in e.project.unreadable for p in ps)
        return unreadable

    def forget_roots(self) -> None:
        """A pyproject.toml or the settings changed: import roots and interpreters are looked up again."""
        with self._lock:
            self._roots.clear()

    def record(self, key: str, deps: Iterable[str]) -> None:
        self.deps[key] = frozenset(norm(d) for d in deps)

    def forget(self, key: str) -> None:
        self.deps.pop(key, None)

    def dependents(self, path: str) -> list[str]:
        p = norm(path)
        return [k for k, ds in self.deps.items() if p in ds]

    # ---------------------------------------------------------------- lane side
    def project_for(self, folders: list[str], config: Any, interpreter: str | None) -> Project:
        """The warm project for a file checked with ``config`` in a workspace with these ``folders``, brought up to
        date with the open buffers and the files changed on disk. Call on the lane only."""
        from gradguard.project import build_project
        from gradguard.project.search_path import interpreter_paths, workspace_roots

        python = os.path.expanduser(interpreter) if interpreter else None
        src = tuple(getattr(config, "src", ()) or ())
        rkey = (tuple(folders), config.root or "", src)
        with self._lock:
            roots = self._roots.get(rkey)
        if roots is None:
            roots = workspace_roots(list(folders), config.root or "", src)
            with self._lock:
                self._roots[rkey] = roots
        key = (tuple(roots), python or "")
        entry = self._projects.get(key)
        if entry is None:
            ip = interpreter_paths(python)
            if ip.error and self._warn is not None and ip.error not in self._warned:
                self._warned.add(ip.error)
                self._warn(f"gradguard: {ip.error}; imports are resolved in the workspace only")
            project = build_project(list(folders) or list(roots), config.root or "", src, python=python,
                                    use_site=not ip.error)
            entry = _Entry(project, python=python)
            with self._lock:  # the event loop iterates the projects (changed_on_disk)
                self._projects[key] = entry
                while len(self._projects) > MAX_PROJECTS:
                    self._projects.popitem(last=False)
        else:
            with self._lock:
                self._projects.move_to_end(key)
        self._sync(entry)
        return entry.project

    def scratch(self, folders: list[str], config: Any, interpreter: str | None) -> Project:
        """A new project like :meth:`project_for`'s, with the open buffers, kept by nobody: for checking the whole
        workspace without filling the warm projects with every module of it. Call on the lane only."""
        warm = self.project_for(folders, config, interpreter)
        p = Project(warm.search)
        with self._lock:
            overlays = dict(self._overlays)
        for path, text in overlays.items():
            p.set_overlay(path, text)
        return p

    def _sync(self, e: _Entry) -> None:
        with self._lock:
            overlays = dict(self._overlays)
            dirty, e.dirty = e.dirty, set()
        p = e.project
        for path in [q for q in e.overlays if q not in overlays]:
            del e.overlays[path]
            p.clear_overlay(path)
        for path, text in overlays.items():
            if e.overlays.get(path) is not text:
                e.overlays[path] = text
                p.set_overlay(path, text)
        dirty -= overlays.keys()  # an open buffer wins over the file on disk
        if dirty:
            p.invalidate(dirty)
