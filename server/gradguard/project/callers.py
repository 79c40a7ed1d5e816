"""Where the workspace uses a name, and whether every use runs under ``torch.no_grad()``.

A function or module whose callers all sit inside ``with torch.no_grad():`` (or inside functions that only run
there), in its own file or in others, runs without autograd: pytorch3d's ``RayTracing`` module is only called as
``self.ray_tracer(...)`` under ``torch.no_grad()`` in ``sdf_renderer.py``, and the in-place writes in its
``forward`` break nothing. This index answers that from the text of the workspace's files (never of libraries:
their callers are the user's code), read with the scan that finds one file's no_grad-only functions
(:mod:`gradguard.project.context_scan`).

Only names used inside no_grad code somewhere are candidates, so only files that mention no_grad are scanned up
front; another file is scanned when its text contains a candidate asked about. Scans are kept per file and redone
when its text changes (an edit in the editor re-scans one file, not the workspace).

The same index answers the opposite question for :mod:`.grad_uses`: which names' call results the workspace
differentiates (``energy = evaluate_energy(...)``, ``energy.backward()``), so that such a function runs with grad on
and inputs that may require it, wherever it is defined.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

from gradguard.project.context_scan import (
    NO_GRAD_BLOCK,
    NO_GRAD_DECORATOR,
    NO_GRAD_DEF,
    ContextScan,
    called_names,
    opens_context,
    scan_contexts,
)
from gradguard.project.grad_uses import ArgShape, differentiated_names, mentions_sink

if TYPE_CHECKING:
    from collections.abc import Iterable

    from gradguard.project.resolver import Project
    from gradguard.project.sources import SourceFile

_WORDS = re.compile(r"\w+")
_TOP_DEF = re.compile(r"^(?:(?:async\s+)?def|class)\s+(\w+)", re.M)
_FROM_IMPORT = re.compile(r"^from\s+(\w+)\s+import\s+(\([^)]*\)|[^\n]*)", re.M)
MAX_FILES = 2_000  # a larger workspace is not indexed: its functions keep the contexts their own file shows
_MARKERS = ("no_grad", "inference_mode", "set_grad_enabled", "(ctx")  # ("(ctx": an autograd.Function's forward)


class _Entry:
    __slots__ = ("_called", "_froms", "_sinks", "_tops", "_words", "marked", "scan", "sf")

    def __init__(self, sf: SourceFile):
        self.sf = sf
        self.scan: ContextScan | None = None
        self._sinks: dict[str, frozenset[ArgShape]] | None = None
        self._words: frozenset[str] | None = None
        self._called: set[str] | None = None
        self._tops: set[str] | None = None
        self._froms: dict[str, list[str]] | None = None
        # opens a no_grad context (a block or a decorator): read up front for candidates. A file that only mentions
        # no_grad (a comment, a string) uses nothing inside it.
        self.marked = any(m in sf.text for m in _MARKERS) and opens_context(sf.lines, NO_GRAD_BLOCK,
                                                                            NO_GRAD_DECORATOR, NO_GRAD_DEF)

    def sinks(self) -> dict[str, frozenset[ArgShape]]:
        """The callee names whose results this file differentiates, with how it calls them (:mod:`.grad_uses`)."""
        if self._sinks is None:
            tree = self.sf.peek_tree() if mentions_sink(self.sf.text) else None
            self._sinks = differentiated_names(tree) if tree is not None else {}
        return self._sinks

    def uses(self, name: str) -> bool:
        """Does the file's text hold ``name`` as a word? (A set of its words, made on the first question.)"""
        if self._words is None:
            self._words = frozenset(map(sys.intern, _WORDS.findall(self.sf.text)))  # one string per word: ~25 kB a file
        return name in self._words

    def imported_from(self, name: str) -> list[str]:
        """The plain module names ``name`` is imported from at module level (``from model import Transducer``,
        ``from model import (\n Transducer,\n)``); a relative or dotted import is not one. (Read once per file.)"""
        if self._froms is None:
            self._froms = {}
            for m in _FROM_IMPORT.finditer(self.sf.text):
                for w in _WORDS.findall(m.group(2)):
                    self._froms.setdefault(w, []).append(m.group(1))
        return self._froms.get(name, [])

    def may_refer_to(self, name: str, module: str, bare: bool = True) -> bool:
        """Could the file's uses of ``name`` refer to a module-level function or class ``name`` of module
        ``module``: the bare name (imported by name), or ``module.name`` (through an alias of its module)?
        ``optax.lamb(...)`` is another library's function, ``obj.name(...)`` a method, ``def name(self)`` defines
        one: none of them is this module's. ``bare=False``: the file defines its own ``name``, which its bare uses
        refer to; only an import of it or a use through the module counts."""
        if not bare and module in self.imported_from(name):
            return True  # `from model import (\n    Model,\n)`
        text = self.sf.text
        mod = re.escape(module)
        # the names the module is bound to here: itself, `import pkg.tracer as tr`, `from pkg import tracer as tr`
        names = {module, *re.findall(rf"\b{mod}\s+as\s+(\w+)", text)}
        via = re.compile(rf"\b(?:{'|'.join(map(re.escape, names))})\s*$")
        for m in re.finditer(rf"(\.\s*)?\b{re.escape(name)}\b", text):
            before = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
            if m.group(1) is None:
                if bare and not re.search(r"\b(?:def|class)\s*$", before):
                    return True
                if not bare and "import" in before and re.search(rf"\bfrom\s+\S*\b{mod}\s+import\b", before):
                    return True
            elif via.search(before) or "import" in before:
                return True
        return False

    def defines_top(self, name: str) -> bool:
        """Does the file define a module-level function or class ``name`` (``def name(``, ``class name`` at column
        0)?"""
        if self._tops is None:
            self._tops = {m.group(1) for m in _TOP_DEF.finditer(self.sf.text)}
        return name in self._tops

    def called_outside(self) -> set[str]:
        """The names the file calls outside no_grad code (a file that opens no context: every call it makes)."""
        if self.scan is None and not self.marked:
            if self._called is None:
                self._called = called_names(self.sf.lines)
            return self._called
        return self.scanned().called_outside

    def scanned(self) -> ContextScan:
        if self.scan is None:
            self.scan = scan_contexts(self.sf.lines, NO_GRAD_BLOCK, NO_GRAD_DECORATOR, words=True, def_re=NO_GRAD_DEF)
        return self.scan


class CallerIndex:
    def __init__(self, project: Project):
        self.project = project
        self._files: list[str] | None = None
        self._entries: dict[str, _Entry] = {}
        self._generation = -1
        self._candidates: set[str] = set()  # names used inside no_grad code somewhere
        self._marked: set[str] = set()  # the files that mention no_grad (their scans give the candidates)
        self._answers: dict[tuple[str, bool, str], bool] = {}
        self._witnesses: dict[tuple[str, bool, str], list[str]] = {}
        self._differentiated: dict[str, list[str]] = {}  # callee name -> the files that differentiate its results
        self._differentiated_calls: dict[str, frozenset[ArgShape]] = {}  # callee name -> how those files call it
        self._outside: dict[tuple[str, str, bool], list[str]] = {}  # (name, asking file, top-level) -> a caller with grad
        # (name, asking file, top-level) -> the files passed over for defining a module-level `name` of their own
        self._siblings: dict[tuple[str, str, bool], list[str]] = {}

    def files(self) -> list[str]:
        if self._files is None:
            from gradguard.config import Config
            from gradguard.files import iter_python_files

            roots = [r for r in self.project.search.roots if os.path.isdir(r)]
            out: list[str] = []
            for p in iter_python_files(roots, Config()):
                out.append(os.path.normpath(os.path.abspath(p)))
                if len(out) > MAX_FILES:
                    out = []
                    break
            self._files = out
        return self._files

    def changed(self, paths: Iterable[str]) -> None:
        """Files changed, were created or deleted: a new or vanished file means listing the workspace again."""
        if self._files is None:
            return
        known = set(self._files)
        if any((p in known) != os.path.isfile(p) for p in paths):
            self._files = None

    def _refresh(self) -> None:
        if self._generation == self.project.generation:
            return
        self._generation = self.project.generation
        self._answers.clear()
        self._witnesses.clear()
        self._outside.clear()
        self._siblings.clear()
        entries: dict[str, _Entry] = {}
        changed = False
        sinks_changed = False
        for path in self.files():
            sf = self.project.source(path)
            if sf is None or sf.library:
                continue
            e = self._entries.get(path)
            if e is None or e.sf is not sf:
                old, e = e, _Entry(sf)
                changed = changed or e.marked or path in self._marked
                # (an edit that leaves a file's differentiated names as they were keeps the table: keystrokes)
                sinks_changed = sinks_changed or old is None or old._sinks != e.sinks()
            entries[path] = e
        changed = changed or len(entries) != len(self._entries)
        sinks_changed = sinks_changed or len(entries) != len(self._entries)
        self._entries = entries
        if sinks_changed:
            diff: dict[str, list[str]] = {}
            calls: dict[str, frozenset[ArgShape]] = {}
            for path, e in entries.items():
                for name, shapes in e.sinks().items():
                    diff.setdefault(name, []).append(path)
                    calls[name] = calls.get(name, frozenset()) | shapes
            self._differentiated, self._differentiated_calls = diff, calls
        if changed:  # an edit that does not touch a file mentioning no_grad leaves the candidates as they were
            cands: set[str] = set()
            self._marked = set()
            for path, e in entries.items():
                if e.marked:
                    self._marked.add(path)
                    scan = e.scanned()
                    cands |= scan.inside
                    cands.update(cls for var, cls in scan.bound if var in scan.inside)
            self._candidates = cands

    def only_under_no_grad(self, name: str, is_class: bool, home: str = "") -> bool:
        """Is every use of ``name`` in the workspace inside no_grad code, with at least one use? For a class
        (``is_class``), a name bound to an instance of it (``self.tracer = Cls(...)``, ``tracer: Cls``) counts as
        its use: that name must be used only under no_grad in its file. ``home``: the file that defines ``name``
        at module level; another file that defines a module-level class or function of that name itself uses its
        own (sibling scripts each with their own `Model` or `train`), not this one."""
        self._refresh()
        if name not in self._candidates:
            return False
        key = (name, is_class, home)
        got = self._answers.get(key)
        if got is None:
            got = self._answers[key] = self._decide(name, is_class, home)
        return got

    def differentiated(self, name: str) -> list[str]:
        """The workspace files where a result of a call to ``name`` reaches ``backward()`` or
        ``torch.autograd.grad`` (:mod:`.grad_uses`); empty when none does. They are the answer's witnesses."""
        self._refresh()
        return self._differentiated.get(name, [])

    def differentiated_calls(self, name: str) -> frozenset[ArgShape]:
        """How the calls of ``name`` whose results the workspace differentiates are made (their positional argument
        counts and keywords, :func:`.grad_uses.arg_shape`); empty when none is."""
        self._refresh()
        return self._differentiated_calls.get(name, frozenset())

    def ng_only_of(self, path: str, lines: list[str]) -> set[int] | None:
        """The defs of ``path`` that only run under no_grad by its own text (no seeds, no vetoes), when the index
        has already scanned that file with these very lines; None otherwise."""
        e = self._entries.get(path)
        if e is None or e.scan is None or e.sf.lines != lines:
            return None
        return e.scan.ng_only

    def mentioned_elsewhere(self, name: str, skip: str) -> bool:
        """Does a workspace file other than ``skip`` hold ``name`` as a word (an import of it, a subclass, a
        call)? A file that defines its own module-level ``name`` (sibling scripts, each with its `Model`) means its
        own, unless it imports ``name`` from ``skip``'s module or reads it through that module."""
        self._refresh()
        return any(path != skip and e.uses(name) and (not e.defines_top(name) or e.may_refer_to(name, _stem(skip), bare=False))
                   for path, e in self._entries.items())

    def used_outside(self, name: str, skip: str, top_level: bool = False) -> list[str]:
        """A workspace file other than ``skip`` that calls ``name`` (``name(...)``, ``obj.name(...)``) outside no_grad
        code, or none: a function its own file only calls under no_grad may be called with grad on from another. (A
        variable of that name is not a call of it.) ``top_level``: ``name`` is a module-level function of ``skip``;
        a file that defines a module-level function of that name itself calls its own (sibling example scripts each
        with their own `adam` or `train`), not this one.

        One such file is a witness enough: the answer stands while that file is unchanged, whatever the others do
        (an edit to the witness is a change to a dependency, and asks again). So the search stops at the first file
        found, and common names (``step``, ``update``) do not read every file that uses them. ``skip`` (the asking
        file, which its own analysis reads) is not read: in the editor it is the file being typed in."""
        self._refresh()
        key = (name, skip, top_level)
        got = self._outside.get(key)
        if got is None:
            got = []
            passed: list[str] = []
            for path, e in self._entries.items():
                if path != skip and e.uses(name) and name in e.called_outside():
                    if top_level and e.defines_top(name):
                        passed.append(path)
                        continue
                    if top_level and not e.may_refer_to(name, _stem(skip)):
                        continue  # (only `optax.lamb(...)`: not this module's `lamb`)
                    got.append(path)
                    break
            self._outside[key] = got
            self._siblings[key] = passed
        return list(got)

    def siblings(self, name: str, skip: str, top_level: bool = False) -> list[str]:
        """The files ``used_outside`` passed over because they define a module-level ``name`` of their own: while
        no caller with grad is found they are part of the answer (one that drops its own ``def`` now calls the
        asking file's function), so the editor re-checks the asking file when one of them changes."""
        return list(self._siblings.get((name, skip, top_level), ()))

    def witnesses(self, name: str, is_class: bool, home: str = "") -> list[str]:
        """The files whose uses made ``name`` no_grad-only: a change to one of them can change the answer (the
        result cache and the editor's re-checks count them among the asking file's dependencies)."""
        return self._witnesses.get((name, is_class, home), [])

    def _sibling_defines(self, path: str, name: str, home: str) -> bool:
        """Does ``path`` import ``name`` from a module beside it (``from model import Transducer``) that defines its
        own ``name`` and is not ``home``? Then its uses are of that one (a recipe directory with its own model.py)."""
        e = self._entries.get(path)
        if e is None:
            return False
        here = os.path.dirname(path)
        for mod in e.imported_from(name):
            sib = os.path.join(here, mod + ".py")
            if sib == home:
                return False
            other = self._entries.get(sib)
            if other is not None and other.defines_top(name):
                return True
        return False

    def _decide(self, name: str, is_class: bool, home: str = "") -> bool:
        used = False
        seen: list[str] = []
        self._witnesses[(name, is_class, home)] = seen
        for path, e in self._entries.items():
            if not e.uses(name):
                continue
            seen.append(path)  # (a file passed over for its own definition is a witness too: it may drop it)
            if home and path != home and (e.defines_top(name) or self._sibling_defines(path, name, home)):
                continue
            scan = e.scanned()
            if name in scan.outside and not (home and not e.may_refer_to(name, _stem(home))):
                return False
            used = used or name in scan.inside
            if is_class:
                for var, cls in scan.bound:
                    if cls != name:
                        continue
                    if var in scan.outside:
                        return False
                    used = used or var in scan.inside
        return used


def _stem(path: str) -> str:
    """The module name a file is imported as (its last part)."""
    return os.path.splitext(os.path.basename(path))[0]
