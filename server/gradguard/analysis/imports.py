"""Imports: names from other modules of the project and from libraries, resolved through the project index.

``import``/``from ... import`` bind what the imported module defines: its classes and functions (analysed with
that module's own globals and source lines when called), its module-level instances, its submodules. What the
project cannot resolve (torch itself, a module not on the search path, a compiled one) stays a reference by name,
as before: torch names are understood through the knowledge table.
"""

from __future__ import annotations

import ast
import builtins
import re
import string

from gradguard.analysis.common import MAX_DEPTH, Frame
from gradguard.analysis.core import AnalyzerCore
from gradguard.analysis.namespace import ModuleCtx
from gradguard.analysis.state import Heap, State
from gradguard.analysis.values import UNKNOWN, Const, ModV, Ref, Val, choice
from gradguard.knowledge.libraries import absent_name
from gradguard.project.resolver import Module
from gradguard.project.sources import top_level_names

MIN_NAME_TEXT = 3  # constant characters a name made at run time must have to be looked up by what fits it
MAX_NAME_FITS = 4  # top-level names that may fit it; with more, the name is not told

_BUILTINS = frozenset(dir(builtins))


class Imports(AnalyzerCore):
    def s_Import(self, s: ast.Import, st: State, fr: Frame) -> State:
        for a in s.names:
            if a.asname:
                st.env[a.asname] = self.module_value(a.name)
            else:
                top = a.name.split(".")[0]
                st.env[top] = self.module_value(top)
        return st

    def s_ImportFrom(self, s: ast.ImportFrom, st: State, fr: Frame) -> State:
        mod = self.from_module(s)
        for a in s.names:
            self.bind_from(s, a, mod, st)
        return st

    # ------------------------------------------------------------------ resolution
    def importer(self) -> str:
        """The absolute path of the module whose code runs now ("" when the checked text has no file)."""
        return self.mod.path or self.file

    def module_value(self, name: str) -> Val:
        m = self.project.find_module(name, self.importer()) if self.project is not None else None
        return ModV(self.ctx_of(m)) if m is not None else Ref(absent_name(name))

    def from_module(self, s: ast.ImportFrom) -> Module | None:
        if self.project is None:
            return None
        if s.level:
            return self.project.find_relative(self.importer(), s.level, s.module)
        return self.project.find_module(s.module or "", self.importer())

    def bind_from(self, s: ast.ImportFrom, a: ast.alias, mod: Module | None, st: State) -> None:
        if a.name == "*":
            if mod is not None:
                self.mod.stars.append(self.ctx_of(mod))
            return
        name = a.asname or a.name
        if mod is None:
            st.env[name] = UNKNOWN if s.level else Ref(absent_name(f"{s.module}.{a.name}" if s.module else a.name))
            return
        v = self.module_get(self.ctx_of(mod), a.name)
        if v is None:
            v = UNKNOWN if s.level else Ref(absent_name(f"{s.module}.{a.name}"))
        st.env[name] = v

    def ctx_of(self, m: Module) -> ModuleCtx:
        if m.source is not None and self.file and m.source.path == self.file:
            return self.root  # an import cycle back to the checked file
        key = m.source.path if m.source is not None else (m.dirs[0] if m.dirs else m.name)
        if self.shared_recs and m.source is not None:
            self.note_module(key)
        ctx = self.loaded.get(key)
        if ctx is None:
            ctx = ModuleCtx(m.source.path if m.source is not None else key,
                            m.source.lines if m.source is not None else [], m)
            self.loaded[key] = ctx
        return ctx

    # ------------------------------------------------------------------ names looked up by a string
    def dynamic_global(self, arg: ast.expr, v: Val, fr: Frame) -> Val | None:
        """``eval("Encoder{}".format(kind))``, ``globals()[name + "_parser"]``: a registry that picks a top-level
        class or function of the running module by a name made at run time (``arg``, whose value is ``v``). A name
        that is known is looked up; a name built around constant text is one of the module's names that fit it,
        when at most a few do (``EncoderBurgess`` for ``"Encoder{}"``). None when the name cannot be told."""
        mod = fr.func.mod if fr.func is not None and fr.func.mod is not None else self.mod
        if isinstance(v, Const) and v.known and isinstance(v.value, str):
            return self.module_get(mod, v.value) if v.value.isidentifier() else None
        pattern = _name_pattern(arg)
        if pattern is None or sum(len(p) for p in pattern if p is not None) < MIN_NAME_TEXT:
            return None
        rx = re.compile("".join(re.escape(p) if p is not None else r"\w*" for p in pattern))
        fits = sorted(n for n in self._top_level_names(mod) if rx.fullmatch(n))
        if not fits or len(fits) > MAX_NAME_FITS:
            return None
        vals = [got for n in fits if (got := self.module_get(mod, n)) is not None]
        return choice(vals) if vals else None

    def _top_level_names(self, mod: ModuleCtx) -> set[str]:
        src = mod.source
        if src is not None:
            return set(src.bindings)
        return top_level_names(self.tree) if mod.is_root else set()

    # ------------------------------------------------------------------ names of other modules
    def module_get(self, mod: ModuleCtx, name: str) -> Val | None:
        """``mod.name``: evaluated on first use from the statements that bind it; None when ``mod`` has no such name."""
        if self.reach_names is not None and mod.is_root:
            self.reach_names.add(name)
        if self.shared_recs:
            self.note_module(mod.path)
        v = mod.env.get(name)
        if v is not None:
            return v
        if name in mod.evaluating:
            return UNKNOWN
        if mod.is_root:
            mod.evaluating.add(name)
            try:
                return self._from_stars(mod, name)
            finally:
                mod.evaluating.discard(name)
        src = mod.source
        bindings = src.bindings.get(name) if src is not None else None
        mod.evaluating.add(name)
        if not bindings:
            try:
                # A package's submodule first: finding that a name is not bound by ``from .x import *`` in a
                # package's __init__ (transformers: 546 of them under TYPE_CHECKING, each star-importing its
                # modeling files) reads every module they lead to.
                v = self._submodule(mod, name) or self._from_stars(mod, name)
            finally:
                mod.evaluating.discard(name)
            if v is not None:
                mod.env[name] = v
            return v
        saved = (self.mod, self.cur_stmt)
        self.mod = mod
        self.quiet += 1
        st = State(mod.env, Heap())
        fr = Frame(None, MAX_DEPTH - 2)
        try:
            for b in bindings:
                if b.alias is not None:
                    if isinstance(b.stmt, ast.ImportFrom):
                        self.bind_from(b.stmt, b.alias, self.from_module(b.stmt), st)
                    elif b.alias.asname:
                        st.env[name] = self.module_value(b.alias.name)
                    else:
                        st.env[name] = self.module_value(b.alias.name.split(".")[0])
                else:
                    self.exec_stmt(b.stmt, st, fr)
        finally:
            self.mod, self.cur_stmt = saved
            self.quiet -= 1
            mod.evaluating.discard(name)
        v = mod.env.get(name)
        if v is None:
            v = mod.env[name] = UNKNOWN
        return v

    def _from_stars(self, mod: ModuleCtx, name: str) -> Val | None:
        if name.startswith("_") or name in _BUILTINS:
            # A builtin (``globals``, ``len``) is looked up here before it is taken for the builtin: walking the star
            # imports for it read every module a package's __init__ star-imports (2,188 for transformers/models).
            return None
        stars = list(mod.stars)
        src = mod.source
        if src is not None and not mod.is_root:
            for stmt in src.star_imports:
                m = self.from_module(stmt) if mod is self.mod else self._from_module_of(mod, stmt)
                if m is not None:
                    stars.append(self.ctx_of(m))
        for star in stars:
            if star is mod:
                continue
            v = self.module_get(star, name)
            if v is not None:
                return v
        return None

    def _from_module_of(self, mod: ModuleCtx, stmt: ast.ImportFrom) -> Module | None:
        saved = self.mod
        self.mod = mod
        try:
            return self.from_module(stmt)
        finally:
            self.mod = saved

    def _submodule(self, mod: ModuleCtx, name: str) -> Val | None:
        m = mod.module
        if self.project is None or m is None or not m.dirs:
            return None
        sub = self.project.submodule(m, name)
        return ModV(self.ctx_of(sub)) if sub is not None else None


_ANY = None  # a part of a name made at run time that is not known


def _name_pattern(e: ast.expr) -> list[str | None] | None:
    """The parts of a string expression: constant text, or _ANY for what is made at run time. None when it is
    not built from constant text by formatting or concatenation."""
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return [e.value]
    if isinstance(e, ast.JoinedStr):
        out: list[str | None] = []
        for v in e.values:
            out.extend([v.value] if isinstance(v, ast.Constant) and isinstance(v.value, str) else [_ANY])
        return out
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        left, right = _name_pattern(e.left), _name_pattern(e.right)
        return [*(left if left is not None else [_ANY]), *(right if right is not None else [_ANY])] \
            if left is not None or right is not None else None
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "format" \
            and isinstance(e.func.value, ast.Constant) and isinstance(e.func.value.value, str):
        try:
            parsed = list(string.Formatter().parse(e.func.value.value))
        except ValueError:
            return None
        out = []
        for text, field, _spec, _conv in parsed:
            if text:
                out.append(text)
            if field is not None:
                out.append(_ANY)
        return out
    return None
