"""Calls into functions and methods of the analysed code: inlined with the caller's values."""

from __future__ import annotations

import ast

from gradguard.analysis.common import (
    MAX_DEPTH,
    Budget,
    Frame,
    storages_of,
)
from gradguard.analysis.state import Heap, State
from gradguard.analysis.summaries import NOT_SUMMARISED, Summaries, Summary, marker
from gradguard.analysis.values import (
    NONE,
    UNKNOWN,
    FuncInfo,
    Seq,
    Storage,
    Val,
    join,
)


class Functions(Summaries):
    # local functions -------------------------------------------------------------------
    def call_func(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
                  n: ast.AST | None) -> Val:
        if fi in self.active or fr.depth >= MAX_DEPTH or self.quiet:
            return UNKNOWN
        key = self.call_key(fi, pos, kw, st)
        known = self.summaries.get(key) if key is not None else None
        if isinstance(known, Summary):
            return self.replay(known, pos, kw, st)
        if known is NOT_SUMMARISED or key is None:
            return self.inline(fi, pos, kw, st, fr)
        mark, stamp, epoch, backwards = marker(), self.stamp, self.epoch, self.backwards
        before = dict(st.heap.saved)
        steps = st.heap.steps
        res = self.inline(fi, pos, kw, st, fr)
        summary = None
        if self.epoch == epoch and self.backwards == backwards:
            summary = self.record(mark, stamp, pos, kw, before, st, res, steps)
        self.summaries[key] = summary if summary is not None else NOT_SUMMARISED
        return res

    def inline(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
               defaults_only: bool = False) -> Val:
        node = fi.node
        a = node.args
        env: dict[str, Val] = {}
        params = [*a.posonlyargs, *a.args]
        defaults = self._defaults(fi)
        i = 0
        for p in params:
            if i < len(pos):
                env[p.arg] = pos[i]
                i += 1
            elif p.arg in kw:
                env[p.arg] = kw[p.arg]
            else:
                env[p.arg] = defaults.get(p.arg, UNKNOWN)
        if a.vararg:
            rest = pos[i:]
            env[a.vararg.arg] = Seq.of(rest, "tuple")
        for p in a.kwonlyargs:
            env[p.arg] = kw.get(p.arg, defaults.get(p.arg, UNKNOWN))
        if a.kwarg:
            env[a.kwarg.arg] = UNKNOWN
        self_obj = pos[0] if fi.cls is not None and pos and not fi.is_static else None
        first_sid = Storage("marker").sid
        callee = State(env, st.heap, st.no_grad or fi.no_grad or self.ng_only(fi), st.autocast,
                       st.allow_mutation)
        cfr = Frame(fi, fr.depth + 1, self_obj)
        self.active.append(fi)
        saved_stmt, saved_mod = self.cur_stmt, self.mod
        if fi.mod is not None:
            self.mod = fi.mod
        try:
            if isinstance(node, ast.Lambda):
                return self.ev(node.body, callee, cfr)
            end = self.exec_block(node.body, callee, cfr)
        except Budget:
            raise
        finally:
            self.active.pop()
            self.cur_stmt, self.mod = saved_stmt, saved_mod
        paths: list[tuple[Val, Heap]] = [(v, rs.heap) for v, rs in cfr.returns]
        if end is not None:
            paths.append((NONE, end.heap))
        if not paths:
            return UNKNOWN
        result: Val = paths[0][0]
        for v, _h in paths[1:]:
            result = NONE if result is NONE and v is NONE else (v if result is NONE else result if v is NONE
                                                                 else join(result, v))
        if len(paths) == 1:
            st.heap = paths[0][1]
            return result
        returned = [storages_of(v) for v, _h in paths]
        any_returned: set[Storage] = set().union(*returned)
        heap: Heap | None = None
        for (_v, h), mine in zip(paths, returned):
            trimmed = Heap({s: r for s, r in h.saved.items()
                            if s.sid <= first_sid or s in mine or s not in any_returned}, h.steps, h.freed)
            heap = trimmed if heap is None else heap.join(trimmed)
        assert heap is not None
        st.heap = heap
        return result
