"""Call summaries: what a call of a function does to the heap, recorded once per calling context and replayed.

A function called again with arguments of the same abstract shape (same requires-grad, view and leaf facts, the
same objects, the same saved-or-not state, the same grad mode) does the same thing. The first call is inlined and
its effect recorded relative to its arguments:

- which argument storages (a tensor argument, an element of a tuple argument, a parameter of a module argument)
  gained save records, or lost them because the callee wrote to them in place;
- which fresh tensors it created and saved, and what it returns: an argument (or a view of one), a fresh tensor,
  one of the module's parameters, a tuple of those.

Later calls in the same context replay that effect on their own arguments instead of running the body again, so a
block called in a loop nested in a loop costs one analysis, not eight. Hazards inside the callee were reported
when it ran (they depend only on the context, which is part of the key).

A call is not summarised (it is inlined every time) when its effect is not a function of its arguments alone:
it writes to an existing object (``__init__``, ``self.h = ...``), calls ``backward()`` or an optimizer step, or
returns an object it created.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from gradguard.analysis.core import AnalyzerCore
from gradguard.analysis.hazards import SaveRecord
from gradguard.analysis.state import State, StepEvent
from gradguard.analysis.values import (
    Alt,
    Bound,
    ClassV,
    Const,
    Func,
    FuncInfo,
    ModV,
    Obj,
    Params,
    Ref,
    Seq,
    Storage,
    T,
    UnknownT,
    Val,
    next_id,
    owner_key,
)

Path = tuple[Hashable, ...]
_MAX_KEY_ITEMS = 8


@dataclass(frozen=True)
class Summary:
    marker: int  # ids above this were created by the call
    stamp: int  # the analysis clock when the recorded call began
    paths: dict[Storage, Path]  # argument storages of the recorded call -> where they sit in the arguments
    added: tuple[tuple[Storage, tuple[SaveRecord, ...]], ...]
    removed: tuple[Storage, ...]
    result: Val
    arg_prov: frozenset[Any]  # provenance the recorded call's arguments carried (replaced on replay)
    steps: tuple[StepEvent, ...] = ()  # in-place parameter updates the call made (init functions, manual SGD)


NOT_SUMMARISED = object()


class _Unkeyable(Exception):
    pass


class Summaries(AnalyzerCore):
    # ------------------------------------------------------------------ keys
    def call_key(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State) -> Hashable | None:
        saved = st.heap.saved
        parts: list[Hashable] = [_fkey(fi), st.no_grad, st.autocast, st.allow_mutation]
        try:
            for v in pos:
                parts.append(self._vkey(v, saved, 0))
            for k in sorted(kw):
                parts.append((k, self._vkey(kw[k], saved, 0)))
        except _Unkeyable:
            return None  # a value without a stable description: inline every time
        return tuple(parts)

    def _vkey(self, v: Val, saved: dict[Storage, Any], depth: int) -> Hashable:
        if isinstance(v, T):
            return ("T", v.rg, v.leaf, v.view, v.maybe_tensor, v.maybe_tuple, len(v.storages),
                    any(s in saved for s in v.storages), any(s.param_of is not None for s in v.storages),
                    bool(v.prov), v.alias_of)
        if isinstance(v, Const):
            val = v.value
            return ("C", val if v.known and isinstance(val, (int, float, str, bool, type(None))) else "?")
        if isinstance(v, UnknownT):
            return "U"
        if isinstance(v, Seq):
            if v.items is not None and depth < 2:
                return ("S", v.kind, len(v.items),
                        tuple(self._vkey(x, saved, depth + 1) for x in v.items[:_MAX_KEY_ITEMS]))
            return ("S*", v.kind, self._vkey(v.elem, saved, depth + 1) if depth < 2 else None)
        if isinstance(v, Obj):
            return ("O", v.oid, self._obj_state(v, saved, depth))
        if isinstance(v, Bound):
            return ("B", _fkey(v.func), self._vkey(v.obj, saved, depth + 1) if depth < 2 else None)
        if isinstance(v, Func):
            return ("F", _fkey(v.info))
        if isinstance(v, ClassV):
            return ("K", v.info.mod.path if v.info.mod else "", v.info.node.lineno, v.info.node.col_offset)
        if isinstance(v, ModV):
            return ("M", v.ctx.path)
        if isinstance(v, Ref):
            return ("R", v.qual)
        if isinstance(v, Alt) and depth < 2:
            return ("A", tuple(self._vkey(x, saved, depth + 1) for x in v.alts))
        if isinstance(v, Params):
            return ("P", tuple(sorted(owner_key(o) for o in v.owners)))
        raise _Unkeyable

    def _obj_state(self, o: Obj, saved: dict[Storage, Any], depth: int) -> Hashable:
        """What a method may read of an object: its attributes, entries, flags, and whether its tensors are saved
        now. Tensors it holds are told apart by their storages' numbers (deterministic, unlike ``id()``)."""
        def akey(a: Val) -> Hashable:
            if isinstance(a, T):
                return ("T", tuple(sorted(s.sid for s in a.storages)), a.rg, a.view,
                        any(s in saved for s in a.storages))
            if isinstance(a, Obj):
                return ("O", a.oid, self._obj_state(a, saved, depth + 1)) if depth < 1 else ("O", a.oid)
            return self._vkey(a, saved, 2)

        attrs = tuple((k, akey(a)) for k, a in o.attrs.items())
        params = tuple((k, akey(p)) for k, p in o.params.items())
        ents = o.entries
        ekey = (len(ents.items) if isinstance(ents, Seq) and ents.items is not None else -1,
                len(ents.alts) if isinstance(ents, Alt) else 0)
        return (o.kind, o.training, o.inplace, ekey, attrs, params)

    # ------------------------------------------------------------------ recording
    @staticmethod
    def _arg_paths(pos: list[Val], kw: dict[str, Val]) -> dict[Storage, Path]:
        out: dict[Storage, Path] = {}

        def walk(v: Val, path: Path, depth: int) -> None:
            if isinstance(v, T):
                for i, s in enumerate(sorted(v.storages, key=lambda s: s.sid)):
                    out.setdefault(s, (*path, i))
            elif isinstance(v, Seq) and v.items is not None and depth < 2:
                for i, x in enumerate(v.items[:_MAX_KEY_ITEMS]):
                    walk(x, (*path, i), depth + 1)

        for i, v in enumerate(pos):
            walk(v, ("p", i), 0)
        for k, v in kw.items():
            walk(v, ("k", k), 0)
        return out

    def record(self, marker: int, stamp: int, pos: list[Val], kw: dict[str, Val],
               before: dict[Storage, tuple[SaveRecord, ...]], st: State, result: Val,
               steps_before: tuple[StepEvent, ...] = ()) -> Summary | None:
        steps = st.heap.steps
        if steps[:len(steps_before)] != steps_before:
            return None
        new_steps = steps[len(steps_before):]
        if any(isinstance(o, Obj) and o.oid > marker for e in new_steps for o in e.owners):
            return None
        after = st.heap.saved
        added: list[tuple[Storage, tuple[SaveRecord, ...]]] = []
        removed: list[Storage] = []
        for s, recs in after.items():
            old = before.get(s)
            if old is recs:
                continue
            if old is None:
                added.append((s, recs))
            elif recs[:len(old)] == old:
                added.append((s, recs[len(old):]))
            else:
                removed.append(s)
                added.append((s, recs))
        for s in before:
            if s not in after:
                removed.append(s)
        if not self._replayable(result, marker, 0):
            return None
        arg_prov: frozenset[Any] = frozenset()
        for v in [*pos, *kw.values()]:
            if isinstance(v, T):
                arg_prov |= v.prov
        return Summary(marker, stamp, self._arg_paths(pos, kw), tuple(added), tuple(removed), result, arg_prov,
                       new_steps)

    def _replayable(self, v: Val, marker: int, depth: int) -> bool:
        if isinstance(v, (T, Const, UnknownT, Ref)):
            return True
        if isinstance(v, Seq):
            if depth > 3:
                return False
            items = v.items if v.items is not None else (v.elem,)
            return all(self._replayable(x, marker, depth + 1) for x in items)
        if isinstance(v, Obj):
            return v.oid <= marker  # an object that existed before the call (``return self``)
        if isinstance(v, (Func, Bound, ClassV, ModV)):
            return True  # definitions: the same on every call
        return False

    # ------------------------------------------------------------------ replay
    def replay(self, s: Summary, pos: list[Val], kw: dict[str, Val], st: State) -> Val:
        now_paths = {p: st_ for st_, p in self._arg_paths(pos, kw).items()}
        mapping: dict[Storage, Storage] = {}

        def m(x: Storage) -> Storage:
            y = mapping.get(x)
            if y is not None:
                return y
            p = s.paths.get(x)
            if p is not None and p in now_paths:
                y = now_paths[p]
            elif x.sid > s.marker:
                y = Storage(x.desc, x.site, x.leaf, x.param_of)
            else:
                y = x
            mapping[x] = y
            return y

        saved = st.heap.saved
        for x in s.removed:
            saved.pop(m(x), None)
        for x, recs in s.added:
            y = m(x)
            saved[y] = (*saved.get(y, ()), *recs)
        if s.steps:
            st.heap.steps = (*st.heap.steps, *(
                StepEvent(self.stamp, frozenset(m(o) if isinstance(o, Storage) else o for o in e.owners),
                          e.site, e.stmt, e.op) for e in s.steps))
        prov: frozenset[Any] = frozenset()
        for v in [*pos, *kw.values()]:
            if isinstance(v, T):
                prov |= v.prov
        return self._map_value(s.result, m, s, prov, 0)

    def _map_value(self, v: Val, m: Any, s: Summary, prov: frozenset[Any], depth: int) -> Val:
        if isinstance(v, T):
            inner = frozenset((o, self.stamp if stamp >= s.stamp else stamp, c) for (o, stamp, c) in v.prov
                              if (o, stamp, c) not in s.arg_prov)
            return v.with_(storages=frozenset(m(x) for x in v.storages), prov=(prov | inner) if v.prov else v.prov)
        if isinstance(v, Seq):
            if v.items is not None:
                return Seq(tuple(self._map_value(x, m, s, prov, depth + 1) for x in v.items), None, v.kind)
            return Seq(None, self._map_value(v.elem, m, s, prov, depth + 1), v.kind)
        return v


def _fkey(fi: FuncInfo) -> Hashable:
    node = fi.node
    return (fi.mod.path if fi.mod is not None else "", node.lineno, node.col_offset)


def marker() -> int:
    """An id no object created so far has: everything with a larger id was created after this call."""
    return next_id()


class Cloner:
    """Copies the objects and storages a call created (ids above ``marker``), keeping shared ones.

    ``args`` maps storages of the recorded call's arguments to the storages at the same place in the arguments of
    the call being replayed (they were not created by the call, so they are otherwise kept as they are).
    """

    def __init__(self, marker: int, args: dict[Storage, Storage] | None = None):
        self.marker = marker
        self.args = args or {}
        self.smap: dict[Storage, Storage] = {}
        self.omap: dict[Obj, Obj] = {}

    def storage(self, s: Storage) -> Storage:
        y = self.smap.get(s)
        if y is not None:
            return y
        a = self.args.get(s)
        if a is not None:
            y = a
        elif s.sid > self.marker:
            owner = s.param_of
            y = Storage(s.desc, s.site, s.leaf, self.obj(owner) if isinstance(owner, Obj) else owner)
        else:
            y = s
        self.smap[s] = y
        return y

    def obj(self, o: Obj) -> Obj:
        if o.oid <= self.marker:
            return o
        c = self.omap.get(o)
        if c is not None:
            return c
        c = Obj(o.kind, o.qual, o.info)
        self.omap[o] = c
        c.ctor, c.kw_site, c.positional, c.inplace, c.training = o.ctor, o.kw_site, o.positional, o.inplace, o.training
        c.attrs = {k: self.value(v) for k, v in o.attrs.items()}
        c.params = {k: self.tensor(p) for k, p in o.params.items()}
        c.cfg = {k: self.value(v) for k, v in o.cfg.items()}
        c.entries = self.value(o.entries)
        return c

    def tensor(self, t: T) -> T:
        return t.with_(storages=frozenset(self.storage(s) for s in t.storages))

    def value(self, v: Val, depth: int = 0) -> Val:
        if depth > 6:
            return v
        if isinstance(v, T):
            return self.tensor(v)
        if isinstance(v, Obj):
            return self.obj(v)
        if isinstance(v, Seq):
            if v.items is not None:
                return Seq(tuple(self.value(x, depth + 1) for x in v.items), None, v.kind)
            return Seq(None, self.value(v.elem, depth + 1), v.kind)
        if isinstance(v, Alt):
            alts = tuple(self.value(x, depth + 1) for x in v.alts)
            return Alt(tuple(a for a in alts if isinstance(a, Seq)))
        if isinstance(v, Bound):
            return Bound(self.value(v.obj, depth + 1), v.func)
        if isinstance(v, Params):
            return Params(frozenset(self.obj(o) if isinstance(o, Obj) else self.storage(o) if isinstance(o, Storage)
                                    else o for o in v.owners))
        return v


@dataclass(frozen=True)
class Template:
    """An object as its constructor left it, for the next construction with the same arguments."""

    marker: int
    obj: Obj
    paths: dict[Storage, Path]
    added: tuple[tuple[Storage, tuple[SaveRecord, ...]], ...]
    removed: tuple[Storage, ...]
    steps: tuple[StepEvent, ...] = ()


class Templates(Summaries):
    def make_template(self, o: Obj, mark: int, pos: list[Val], kw: dict[str, Val],
                      before: dict[Storage, tuple[SaveRecord, ...]], st: State,
                      steps_before: tuple[StepEvent, ...]) -> Template | None:
        diff = self.record(mark, self.stamp, pos, kw, before, st, NONE_RESULT, steps_before)
        if diff is None:
            return None
        snap = Cloner(mark)
        copy = snap.obj(o)
        added = tuple((snap.storage(s), recs) for s, recs in diff.added)
        removed = tuple(snap.storage(s) for s in diff.removed)
        steps = tuple(StepEvent(e.stamp, frozenset(snap.obj(x) if isinstance(x, Obj) else snap.storage(x)
                                                   if isinstance(x, Storage) else x for x in e.owners),
                                e.site, e.stmt, e.op) for e in diff.steps)
        return Template(mark, copy, diff.paths, added, removed, steps)

    def from_template(self, tpl: Template, pos: list[Val], kw: dict[str, Val], st: State) -> Obj:
        now = {p: s for s, p in self._arg_paths(pos, kw).items()}
        args = {s: now[p] for s, p in tpl.paths.items() if p in now}
        c = Cloner(tpl.marker, args)
        o = c.obj(tpl.obj)
        saved = st.heap.saved
        for x in tpl.removed:
            saved.pop(c.storage(x), None)
        for x, recs in tpl.added:
            y = c.storage(x)
            saved[y] = (*saved.get(y, ()), *recs)
        if tpl.steps:
            st.heap.steps = (*st.heap.steps, *(
                StepEvent(self.stamp, frozenset(c.obj(x) if isinstance(x, Obj) else c.storage(x)
                                                if isinstance(x, Storage) else x for x in e.owners),
                          e.site, e.stmt, e.op) for e in tpl.steps))
        return o


NONE_RESULT = Const(None)
