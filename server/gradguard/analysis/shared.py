"""Call summaries shared between the analyses of one project.

Each file is analysed on its own, and each analysis follows its imports into the same modules: in a whole-project
check of torch_geometric, 300 example and test files each build ``GCNConv`` and run its ``forward`` and
``MessagePassing.propagate``; in the editor, every re-check of ``train.py`` runs the model's blocks again. A call
into another module (a library, another workspace file) that touched nothing of the checked file is kept in the
project's store (:mod:`gradguard.project.shared_store`) and replayed by the next analysis that makes the same call.

**The key** names no object of one analysis: the callee's place (file, line), the grad mode, and the arguments'
*shape*, read like :meth:`Summaries.call_key` reads them but structurally: an object is its class, flags,
attributes, parameters and entries, walked in full (aliasing kept: the second visit of an object or storage is its
first visit's number). Two calls with the same key differ only in which objects and storages they are given,
so the numbers of the walk map one call's arguments onto the other's.

**What is kept** is what :class:`.summaries.Summary` keeps (save records gained and lost by the argument storages,
the result), with the arguments replaced by their numbers, and everything the call created copied. Classes and
functions the result holds (a module's class, a bound method) are kept by module and name, and found again in the
replaying analysis. A call is kept only when replaying it gives exactly what running it would:

- it reported nothing (hazards inside the callee belong to the analysis that ran it), took no optimizer step,
  called no ``backward()``, and changed no table of the analysis beyond the heap (custom Functions' backwards,
  ``.grad`` values, inference-mode spans, pack hooks, carried state);
- it ran no code of the checked file, and the result and records name no place in it;
- nothing in it was cut short by recursion, call depth or the budget for other modules' code; the replaying
  analysis must have at least the depth and budget the recorded call used (it is charged for them), and must not
  be inside any function the call ran.

The replaying analysis counts the files the recorded call read among its dependencies (the result cache and the
editor's invalidation see them), and refuses an entry whose call read the file it checks.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from gradguard.analysis.common import MAX_DEPTH
from gradguard.analysis.core import AnalyzerCore
from gradguard.analysis.hazards import SaveRecord, Site
from gradguard.analysis.state import State
from gradguard.analysis.values import (
    Alt,
    Bound,
    Choice,
    ClassInfo,
    ClassV,
    Cond,
    Const,
    Func,
    FuncInfo,
    ModV,
    Obj,
    Params,
    Partial,
    Ref,
    Seq,
    Storage,
    T,
    UnknownT,
    Val,
    copy_contents,
    owner_key,
)

MAX_SHAPE_NODES = 400  # arguments larger than this (a whole model passed in) are not described: no sharing
MISS = object()


class NotShared(Exception):
    pass


def place(path: str, node: Any) -> tuple[str, int, int]:
    if not path:
        raise NotShared  # code of the checked file: its place means another file in another analysis
    return (path, node.lineno, node.col_offset)


class Shape:
    """The arguments of a call, described without identities (see the module docstring)."""

    __slots__ = ("nodes", "objs", "saved", "storages", "tensors")

    def __init__(self, saved: dict[Storage, Any]):
        self.saved = saved
        self.storages: dict[Storage, int] = {}
        self.objs: dict[Obj, int] = {}
        self.tensors: dict[int, tuple[int, T]] = {}  # id -> (number, the tensor value itself)
        self.nodes = 0

    def key(self, v: Val) -> Hashable:
        self.nodes += 1
        if self.nodes > MAX_SHAPE_NODES:
            raise NotShared
        if isinstance(v, T):
            got = self.tensors.get(id(v))
            if got is not None:
                return ("t", got[0])
            self.tensors[id(v)] = (len(self.tensors), v)
            return ("T", v.rg, v.leaf, v.view, v.maybe_tensor, v.maybe_tuple, bool(v.prov), v.noncontig, v.cplx, v.f32,
                    v.expanded is not None,
                    tuple(self.storage(s) for s in sorted(v.storages, key=lambda s: s.sid)))
        if isinstance(v, Cond):
            raise NotShared
        if isinstance(v, Const):
            val = v.value
            if isinstance(val, (int, float)) and not isinstance(val, bool):
                return ("N", val if val in (0, 1) else "n") if v.known else ("N", "?")  # as Summaries._vkey
            return ("C", val if v.known and isinstance(val, (str, bool, type(None))) else "?")
        if isinstance(v, UnknownT):
            return "U"
        if isinstance(v, Seq):
            if v.items is not None:
                return ("S", v.kind, v.keys, v.wkeys, tuple(self.key(x) for x in v.items))
            return ("S*", v.kind, self.key(v.elem))
        if isinstance(v, Obj):
            got_o = self.objs.get(v)
            if got_o is not None:
                return ("o", got_o)
            self.objs[v] = len(self.objs)
            info = v.info
            return ("O", v.kind, v.qual, place(info.mod.path if info.mod else "", info.node) if info else None,
                    v.training, v.inplace, v.positional,
                    tuple((k, self.key(a)) for k, a in v.attrs.items()),
                    tuple((k, self.key(p)) for k, p in v.params.items()),
                    tuple((k, self.key(c)) for k, c in v.cfg.items()),
                    self.key(v.entries))
        if isinstance(v, Bound):
            return ("B", func_place(v.func), self.key(v.obj))
        if isinstance(v, Func):
            return ("F", func_place(v.info))
        if isinstance(v, ClassV):
            return ("K", class_place(v.info))
        if isinstance(v, ModV):
            return ("M", place(v.ctx.path, _MOD_NODE))
        if isinstance(v, Ref):
            return ("R", v.qual)
        if isinstance(v, Alt):
            return ("A", tuple(self.key(x) for x in v.alts))
        if isinstance(v, Choice):
            return ("Ch", tuple(self.key(x) for x in v.alts))
        if isinstance(v, Params):
            return ("P", tuple(self.key(o) if isinstance(o, Obj) else self.storage(o)
                               for o in sorted(v.owners, key=owner_key)))
        if isinstance(v, Partial):
            return ("Pa", self.key(v.func), tuple(self.key(x) for x in v.args), tuple((k, self.key(x)) for k, x in v.kw))
        raise NotShared

    def storage(self, s: Storage) -> Hashable:
        i = self.storages.get(s)
        if i is None:
            i = self.storages[s] = len(self.storages)
        return (i, s in self.saved, s.leaf, s.param_of is not None)


class _ModNode:
    lineno = 0
    col_offset = 0


_MOD_NODE = _ModNode()


def func_place(fi: FuncInfo) -> Hashable:
    if fi.closure is not None:
        raise NotShared  # a nested function: its closure is part of what it does
    return place(fi.mod.path if fi.mod is not None else "", fi.node)


def class_place(ci: ClassInfo) -> Hashable:
    return place(ci.mod.path if ci.mod is not None else "", ci.node)


# ---------------------------------------------------------------------------------------------- kept calls
@dataclass(frozen=True)
class ArgRef:
    """An argument of the recorded call, by its number in the walk of the arguments."""

    kind: str  # "s" storage | "o" object | "t" tensor value
    index: int


@dataclass(frozen=True)
class InfoRef:
    """A class or function the result holds, found again by module and name in the replaying analysis."""

    kind: str  # "class" | "func" | "method"
    module: Any  # resolver Module (project-wide); for "method", the InfoRef of its class
    name: str
    node: Any  # the definition (trees are shared by all analyses of the project)


@dataclass(frozen=True)
class SharedCall:
    added: tuple[tuple[Any, tuple[SaveRecord, ...]], ...]  # (ArgRef or private Storage, records)
    removed: tuple[Any, ...]
    result: Any  # packed (see Packer)
    depth: int  # deepest call attempted, relative to the call
    need: int  # most foreign-code statements the call needed at any point (see Functions.affordable)
    stmts: int  # statements it ran
    ran: frozenset[Any]  # the places of the functions it ran (the replaying analysis must not be inside one)
    files: frozenset[str]  # modules it read
    cut_depth: int | None  # calls deeper than MAX_DEPTH were left unknown: replayed only at this same depth


class Rec:
    """What a call being recorded for sharing did besides its effect on the heap."""

    __slots__ = ("active", "budget", "cut", "depth", "files", "need", "ok", "ran", "start_depth", "used")

    def __init__(self, depth: int, used: int, budget: int, active: int):
        self.ok = True
        self.cut = False  # a call was left unknown at MAX_DEPTH (the same start depth gives the same cut)
        self.active = active  # functions running when the call began (a recursion inside it is its own)
        self.start_depth = depth
        self.depth = 0
        self.used = used
        self.need = 0
        self.budget = budget
        self.ran: set[Any] = set()
        self.files: set[str] = set()


class Packer:
    """The recorded call's effect without the recording analysis' objects: arguments become ``ArgRef``s, what the
    call created is copied, classes and functions become ``InfoRef``s. Raises NotShared for anything else."""

    def __init__(self, shape: Shape, arg_prov: frozenset[Any], stamp: int, marker: int):
        self.shape = shape
        self.arg_prov = arg_prov
        self.stamp = stamp
        self.marker = marker
        self.smap: dict[Storage, Any] = {}
        self.omap: dict[Obj, Any] = {}

    def storage(self, s: Storage) -> Any:
        got = self.smap.get(s)
        if got is not None:
            return got
        i = self.shape.storages.get(s)
        if i is not None:
            got = ArgRef("s", i)
        elif s.sid > self.marker:
            self.site(s.site)
            got = self.smap[s] = Storage(s.desc, s.site, s.leaf)
            if s.param_of is not None:
                got.param_of = self.owner(s.param_of)
            return got
        else:
            raise NotShared  # something the call reached without being given it (a global tensor)
        self.smap[s] = got
        return got

    def owner(self, o: Any) -> Any:
        if isinstance(o, Obj):
            return self.obj(o)
        if isinstance(o, Storage):
            return self.storage(o)
        raise NotShared

    @staticmethod
    def site(s: Site | None) -> None:
        if s is not None and not s.path:
            raise NotShared

    def obj(self, o: Obj) -> Any:
        got = self.omap.get(o)
        if got is not None:
            return got
        i = self.shape.objs.get(o)
        if i is not None:
            self.omap[o] = ArgRef("o", i)
            return self.omap[o]
        if o.oid <= self.marker:
            raise NotShared
        c = Obj(o.kind, o.qual, None)
        self.omap[o] = c
        c.info = self.info(o.info) if o.info is not None else None  # type: ignore[assignment]
        self.site(o.ctor)
        self.site(o.kw_site)
        copy_contents(c, o, self.value, self.tensor)
        return c

    def info(self, info: ClassInfo | FuncInfo) -> InfoRef:
        mod = info.mod
        if mod is None or mod.is_root or mod.module is None or mod.source is None or mod.source.tree is None:
            raise NotShared
        body = mod.source.tree.body
        if isinstance(info, ClassInfo):
            if not any(n is info.node for n in body):
                raise NotShared
            return InfoRef("class", mod.module, info.name, info.node)
        if info.closure is not None:
            raise NotShared
        name = getattr(info.node, "name", "")
        if info.cls is not None:
            if info.cls.methods.get(name) is not info:
                raise NotShared
            return InfoRef("method", self.info(info.cls), name, info.node)
        if not any(n is info.node for n in body):
            raise NotShared
        return InfoRef("func", mod.module, name, info.node)

    def tensor(self, t: T) -> Any:
        got = self.shape.tensors.get(id(t))
        if got is not None and got[1] is t:
            return ArgRef("t", got[0])
        self.site(t.view_site)
        self.site(t.alias_site)
        storages = frozenset(self.storage(s) for s in t.storages)
        prov: list[tuple[Any, int, Any]] = [(None, -1, None)] if t.prov else []  # had provenance
        for p in t.prov:
            o, stamp, c = p
            if p in self.arg_prov:
                continue  # the recorded arguments' provenance: the replayed arguments' is put instead
            if c is not None or stamp < self.stamp:
                raise NotShared
            prov.append((self.owner(o), 0, None))
        return t.with_(storages=storages, prov=frozenset(prov))

    def value(self, v: Val, depth: int = 0) -> Any:
        if depth > 12:
            raise NotShared
        if isinstance(v, T):
            return self.tensor(v)
        if isinstance(v, (Const, UnknownT, Ref)):
            if isinstance(v, Cond):
                raise NotShared
            return v
        if isinstance(v, Obj):
            return self.obj(v)
        if isinstance(v, Seq):
            if v.items is not None:
                return v.remap(tuple(self.value(x, depth + 1) for x in v.items))
            return Seq(None, self.value(v.elem, depth + 1), v.kind)
        if isinstance(v, Alt):
            return Alt(tuple(self.value(a, depth + 1) for a in v.alts))
        if isinstance(v, Choice):
            return Choice(tuple(self.value(a, depth + 1) for a in v.alts))
        if isinstance(v, Bound):
            return Bound(self.value(v.obj, depth + 1), self.info(v.func))  # type: ignore[arg-type]
        if isinstance(v, Func):
            return Func(self.info(v.info))  # type: ignore[arg-type]
        if isinstance(v, ClassV):
            return ClassV(self.info(v.info))  # type: ignore[arg-type]
        if isinstance(v, ModV):
            if v.ctx.is_root or v.ctx.module is None:
                raise NotShared
            return ("module", v.ctx.module)
        if isinstance(v, Params):
            return Params(frozenset(self.owner(o) for o in v.owners))
        if isinstance(v, Partial):
            for _k, ks in v.kw_sites:
                self.site(ks)
            return Partial(self.value(v.func, depth + 1), tuple(self.value(x, depth + 1) for x in v.args),
                           tuple((k, self.value(x, depth + 1)) for k, x in v.kw), v.kw_sites)
        raise NotShared


class Unpacker:
    """A kept call's effect for the replaying analysis: its own arguments for the ``ArgRef``s, fresh copies of what
    the call created, its own classes and functions for the ``InfoRef``s (NotShared if one cannot be found)."""

    def __init__(self, an: SharedSummaries, shape: Shape, stamp: int, prov: frozenset[Any]):
        self.an = an
        self.slist = list(shape.storages)
        self.olist = list(shape.objs)
        self.tlist = [t for _i, t in sorted(shape.tensors.values(), key=lambda x: x[0])]
        self.stamp = stamp
        self.prov = prov
        self.smap: dict[int, Storage] = {}
        self.omap: dict[int, Obj] = {}
        self.imap: dict[int, Any] = {}

    def storage(self, s: Any) -> Storage:
        if isinstance(s, ArgRef):
            return self.slist[s.index]
        got = self.smap.get(id(s))
        if got is None:
            got = self.smap[id(s)] = Storage(s.desc, s.site, s.leaf)
            if s.param_of is not None:
                got.param_of = self.owner(s.param_of)
        return got

    def owner(self, o: Any) -> Any:
        if isinstance(o, ArgRef):
            return self.olist[o.index] if o.kind == "o" else self.slist[o.index]
        return self.obj(o) if isinstance(o, Obj) else self.storage(o)

    def obj(self, o: Any) -> Obj:
        if isinstance(o, ArgRef):
            return self.olist[o.index]
        got = self.omap.get(id(o))
        if got is not None:
            return got
        c = Obj(o.kind, o.qual, None)
        self.omap[id(o)] = c
        if o.info is not None:
            c.info = self.info(o.info)
        copy_contents(c, o, self.value, self.tensor)
        return c

    def info(self, r: InfoRef) -> Any:
        got = self.imap.get(id(r))
        if got is not None:
            return got
        if r.kind == "method":
            cls = self.info(r.module)
            found = cls.methods.get(r.name)
        else:
            ctx = self.an.ctx_of(r.module)
            if ctx.is_root:
                raise NotShared
            v = self.an.module_get(ctx, r.name)
            found = v.info if isinstance(v, (ClassV, Func)) else None
        if found is None or found.node is not r.node:
            raise NotShared
        self.imap[id(r)] = found
        return found

    def tensor(self, t: Any) -> T:
        if isinstance(t, ArgRef):
            x = self.tlist[t.index]
            return x.with_(prov=x.prov | self.prov) if x.prov else x  # as Summaries._with_prov
        storages = frozenset(self.storage(s) for s in t.storages)
        if t.made:
            t = t.with_(made=self.stamp)  # views the replayed call returns are made now
        if not t.prov:
            return t.with_(storages=storages)  # type: ignore[no-any-return]
        prov = frozenset((self.owner(o), self.stamp, None) for o, stamp, _c in t.prov if stamp >= 0)
        return t.with_(storages=storages, prov=self.prov | prov)  # type: ignore[no-any-return]

    def value(self, v: Any) -> Any:
        if isinstance(v, ArgRef):
            return self.tensor(v) if v.kind == "t" else self.obj(v) if v.kind == "o" else UnknownT()
        if isinstance(v, T):
            return self.tensor(v)
        if isinstance(v, Obj):
            return self.obj(v)
        if isinstance(v, Seq):
            if v.items is not None:
                return v.remap(tuple(self.value(x) for x in v.items))
            return Seq(None, self.value(v.elem), v.kind)
        if isinstance(v, Alt):
            return Alt(tuple(self.value(a) for a in v.alts))
        if isinstance(v, Choice):
            return Choice(tuple(self.value(a) for a in v.alts))
        if isinstance(v, Bound):
            return Bound(self.value(v.obj), self.info(v.func))  # type: ignore[arg-type]
        if isinstance(v, Func):
            return Func(self.info(v.info))  # type: ignore[arg-type]
        if isinstance(v, ClassV):
            return ClassV(self.info(v.info))  # type: ignore[arg-type]
        if isinstance(v, tuple) and v and v[0] == "module":
            ctx = self.an.ctx_of(v[1])
            if ctx.is_root:
                raise NotShared
            return ModV(ctx)
        if isinstance(v, Params):
            return Params(frozenset(self.owner(o) for o in v.owners))
        if isinstance(v, Partial):
            return Partial(self.value(v.func), tuple(self.value(x) for x in v.args),
                           tuple((k, self.value(x)) for k, x in v.kw), v.kw_sites)
        return v


class SharedSummaries(AnalyzerCore):

    def shared_key(self, place_key: Hashable, pos: list[Val], kw: dict[str, Val], st: State) -> tuple[Hashable, Shape] | None:
        shape = Shape(st.heap.saved)
        try:
            args = tuple(shape.key(v) for v in pos), tuple((k, shape.key(kw[k])) for k in sorted(kw))
        except NotShared:
            return None
        return (place_key, st.no_grad, st.autocast, st.allow_mutation, st.silent, st.inference, st.packed, self.quiet > 0,
                bool(self.version_kept), self.kb.device, args), shape

    def shared_replay(self, key: Hashable, shape: Shape, pos: list[Val], kw: dict[str, Val], st: State,
                      depth: int) -> Any:
        """The kept call's effect on these arguments, or MISS."""
        assert self.project is not None
        kept: SharedCall | None = self.project.shared.get(key)
        if kept is None:
            return MISS
        if (self.file in kept.files
                or (depth != kept.cut_depth if kept.cut_depth is not None else depth + kept.depth >= MAX_DEPTH)
                or self.foreign_used + kept.need > self.foreign_limit or self.budget <= kept.stmts + 1
                or any(self.place_of(fi) in kept.ran for fi in self.active)):
            return MISS
        un = Unpacker(self, shape, self.stamp, args_prov(pos, kw))
        try:
            removed = [un.storage(x) for x in kept.removed]
            added = [(un.storage(x), recs) for x, recs in kept.added]
            result = un.value(kept.result)
        except NotShared:
            return MISS
        saved = st.heap.saved
        for y in removed:
            saved.pop(y, None)
        for y, recs in added:
            self.log_saves(saved, y, recs)
        self.budget -= kept.stmts
        self.foreign_used += kept.stmts
        self.shared_files |= kept.files
        for r in self.shared_recs:  # a call being recorded that replays this one read what it read
            r.files |= kept.files
            r.ran |= kept.ran
            r.cut = r.cut or kept.cut_depth is not None
            r.depth = max(r.depth, depth - r.start_depth + kept.depth)
            r.need = max(r.need, self.foreign_used - r.used + kept.need - kept.stmts)
        return result

    @staticmethod
    def place_of(info: FuncInfo | ClassInfo) -> Hashable:
        """Where a function or class is defined, or None (the checked file's, or a closure)."""
        try:
            return class_place(info) if isinstance(info, ClassInfo) else func_place(info)
        except NotShared:
            return None

    def shared_end(self, rec: Rec, key: Hashable, shape: Shape, pos: list[Val], kw: dict[str, Val],
                   result: Val, before: dict[Storage, tuple[SaveRecord, ...]], st: State, stamp: int,
                   marker: int) -> None:
        """Keep the call just recorded, when replaying it gives what running it gave (see the module docstring)."""
        if self.file in rec.files:
            return
        if any(self.place_of(fi) in rec.ran for fi in self.active):
            return
        pk = Packer(shape, args_prov(pos, kw), stamp, marker)
        after = st.heap.saved
        try:
            added: list[tuple[Any, tuple[SaveRecord, ...]]] = []
            removed: list[Any] = []
            for s, recs in after.items():
                old = before.get(s)
                if old is recs:
                    continue
                if old is None:
                    new = recs
                elif recs[:len(old)] == old:
                    new = recs[len(old):]
                else:
                    removed.append(pk.storage(s))
                    new = recs
                for r in new:
                    pk.site(r.site)
                    pk.site(r.view)
                added.append((pk.storage(s), new))
            for s in before:
                if s not in after:
                    removed.append(pk.storage(s))
            packed = pk.value(result)
        except NotShared:
            return
        assert self.project is not None
        self.project.shared.put(key, frozenset(rec.files), SharedCall(
            tuple(added), tuple(removed), packed, rec.depth, rec.need, rec.budget - self.budget,
            frozenset(rec.ran), frozenset(rec.files), rec.start_depth if rec.cut else None))

    def side_tables(self) -> tuple[Any, ...]:
        """The analysis' tables that a kept call must leave alone (it reported nothing, changed nothing else)."""
        return (self.reported, self.backwards, len(self.grads), len(self.grad_reads), self.graph_grads,
                len(self.inference_spans), len(self.pack_inputs),
                len(self.bw_pending), len(self._bw_writes), len(self.carry_use), len(self.alias_stmt),
                self.fed_back, len(self.spent_writes))

    # ------------------------------------------------------------------ footprints
    def note_call(self, fi: FuncInfo, depth: int) -> None:
        """A call attempted while calls are recorded: the code it runs, the depth it needs."""
        place = self.place_of(fi)
        mod = fi.mod
        for r in self.shared_recs:
            if mod is None or mod.is_root:
                r.ok = False
            else:
                r.files.add(mod.path)
            r.ran.add(place)
            if depth - r.start_depth > r.depth:
                r.depth = depth - r.start_depth

    def note_cut(self, fi: FuncInfo | None = None, depth: bool = False) -> None:
        """A call left unknown: at MAX_DEPTH (``depth``), as a recursion into ``fi``, or beyond the budget. The
        same happens to a replay that starts at the same depth, inside a recursion of the call itself; a recursion
        into a function running outside the call, or the budget, might not cut a replay elsewhere."""
        for r in self.shared_recs:
            if depth:
                r.cut = True
            elif fi is None or fi not in self.active[r.active:]:
                r.ok = False

    def note_need(self, size: int) -> None:
        for r in self.shared_recs:
            need = self.foreign_used + size - r.used
            if need > r.need:
                r.need = need

    def note_module(self, path: str) -> None:
        """A module's names read while calls are recorded ("": the checked file's)."""
        for r in self.shared_recs:
            if path:
                r.files.add(path)
            else:
                r.ok = False

    def note_replayed(self, fp: Rec | None, depth: int) -> None:
        """A summary replayed while calls are recorded: they did what its recorded run did."""
        for r in self.shared_recs:
            if fp is None:
                r.ok = False
                continue
            r.ok = r.ok and fp.ok and (not fp.cut or depth == fp.start_depth)
            r.cut = r.cut or fp.cut
            r.files |= fp.files
            r.ran |= fp.ran
            r.depth = max(r.depth, depth - r.start_depth + fp.depth)
            r.need = max(r.need, self.foreign_used - r.used + fp.need)


def args_prov(pos: list[Val], kw: dict[str, Val]) -> frozenset[Any]:
    """The provenance a call's arguments carry, tensors in lists and tuples included (``self.jk(xs)``): what a
    replay puts in place of the recorded arguments'."""
    out: set[Any] = set()
    for v in (*pos, *kw.values()):
        _prov_walk(v, 0, out)
    return frozenset(out)


def _prov_walk(v: Val, depth: int, out: set[Any]) -> None:
    # (a module-level function, not a recursive closure: a closure that calls itself is a reference cycle, left for
    # the cyclic collector on every call)
    if isinstance(v, T):
        out.update(v.prov)
    elif isinstance(v, Seq) and depth < 2:
        for x in (v.items if v.items is not None else (v.elem,))[:16]:
            _prov_walk(x, depth + 1, out)
    elif isinstance(v, Alt) and depth < 2:  # a list built differently on two paths
        for x in v.alts[:8]:
            _prov_walk(x, depth, out)
    elif isinstance(v, Obj) and depth < 2 and v.kind == "local" and v.info is not None \
            and v.info.record_fields() is not None:  # a namedtuple or dataclass of tensors (`LIFState(z, v, i)`)
        for x in list(v.attrs.values())[:16]:
            _prov_walk(x, depth + 1, out)
