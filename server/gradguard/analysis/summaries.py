"""Call summaries: what a call does, recorded once per calling context and replayed.

A function called again with arguments of the same abstract shape (same requires-grad, view and leaf facts, the
same objects in the same state, the same saved-or-not state, the same grad mode) does the same thing. The first
call is run (inlined) and its effect recorded relative to its arguments:

- which argument storages (a tensor argument, an element of a tuple argument) gained save records, or lost them
  because the callee wrote to them in place; which in-place parameter updates it made;
- what it returns: an argument or a view of one, a fresh tensor (with what saved it), a module or object it built
  (a factory such as ``create_conv2d(...)``, a constructor call), a tuple of those.

Later calls in the same context replay that effect on their own arguments, with fresh copies of whatever the
recorded call created, instead of running the body again: a block called in a loop nested in a loop, or a layer
built a hundred times, costs one analysis. Hazards inside the callee were reported when it ran (they depend only
on the context, which is part of the key).

A call is not summarised (it runs every time) when its effect is not a function of its arguments alone: it writes
to an object it did not create (``self.h = ...``, ``.eval()``), or calls ``backward()``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any

from gradguard.analysis.hazards import SaveRecord, Site
from gradguard.analysis.shared import MISS, Rec, Shape, SharedSummaries, args_prov
from gradguard.analysis.state import State, StepEvent
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
    next_id,
    outcomes,
    owner_key,
)

Path = tuple[Hashable, ...]
_MAX_KEY_ITEMS = 8
NOT_SUMMARISED = object()


class _Unkeyable(Exception):
    pass


@dataclass(frozen=True)
class Summary:
    marker: int  # ids above this were created by the recorded call (or belong to the snapshot below)
    stamp: int  # the analysis clock when the recorded call began
    paths: dict[Storage, Path]  # argument storages of the recorded call -> where they sit in the arguments
    added: tuple[tuple[Storage, tuple[SaveRecord, ...]], ...]
    removed: tuple[Storage, ...]
    steps: tuple[StepEvent, ...]  # in-place parameter updates (init functions, manual SGD)
    result: Val  # a snapshot: objects and storages the call created are private copies
    arg_prov: frozenset[Any]  # (owner, stamp) of the provenance the recorded call's arguments carried (replaced on
    # replay, whatever loop-carry tag the callee gave it)
    min_depth: int = 0  # a call inside hit the depth limit: the summary serves calls from this depth or deeper


def marker() -> int:
    """An id no object created so far has: everything with a larger id was created after this call."""
    return next_id()


def fkey(fi: FuncInfo) -> Hashable:
    node = fi.node
    return (fi.mod.path if fi.mod is not None else "", node.lineno, node.col_offset)


def fkey_class(ci: ClassInfo) -> Hashable:
    return (ci.mod.path if ci.mod is not None else "", ci.node.lineno, ci.node.col_offset)


class Cloner:
    """Copies the objects and storages a call created (ids above ``marker``), keeping shared ones.

    ``args`` maps storages of the recorded call's arguments to the storages at the same place in the arguments of
    the call being replayed (they were not created by the call, so they are otherwise kept as they are).
    """

    def __init__(self, marker: int, args: dict[Storage, Storage] | None = None,
                 restamp: tuple[frozenset[Any], int, int] | None = None):
        self.marker = marker
        self.args = args or {}
        # on replay: (the recorded arguments' (owner, stamp) pairs, now, when the recorded call began): tensors the
        # call left in objects lose the recorded arguments' provenance and are stamped now. (They do not take the
        # replayed arguments' in its place, as a result does: added to every tensor of every object a replay copies,
        # provenance sets grow with each replay, and timm's coat.py took minutes.)
        self.restamp = restamp
        self.in_obj = 0  # copying an object's contents (the result itself gets its provenance in Summaries.replay)
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

    def owner(self, o: Any) -> Any:
        return self.obj(o) if isinstance(o, Obj) else self.storage(o) if isinstance(o, Storage) else o

    def obj(self, o: Obj) -> Obj:
        if o.oid <= self.marker:
            return o
        c = self.omap.get(o)
        if c is not None:
            return c
        c = Obj(o.kind, o.qual, o.info)
        self.omap[o] = c
        self.in_obj += 1
        try:
            copy_contents(c, o, self.value, self.tensor)
        finally:
            self.in_obj -= 1
        return c

    def tensor(self, t: T) -> T:
        storages = frozenset(self.storage(s) for s in t.storages)
        if t.made and self.restamp is not None:
            t = t.with_(made=self.restamp[1])  # views the replayed call returns are made now
        if not t.prov:
            return t.with_(storages=storages)
        prov = t.prov
        if self.restamp is not None and self.in_obj:
            recorded, now, began = self.restamp
            prov = frozenset((o, now if st >= began else st, c) for (o, st, c) in prov if (o, st) not in recorded)
        return t.with_(storages=storages, prov=frozenset((self.owner(o), st, c) for (o, st, c) in prov))

    def value(self, v: Val, depth: int = 0) -> Val:
        if isinstance(v, T):
            return self.tensor(v)
        if depth > 8:
            return v
        if isinstance(v, Obj):
            return self.obj(v)
        if isinstance(v, Seq):
            if v.items is not None:
                return v.remap(tuple(self.value(x, depth + 1) for x in v.items))
            return Seq(None, self.value(v.elem, depth + 1), v.kind)
        if isinstance(v, Alt):
            return Alt(tuple(x for x in (self.value(a, depth + 1) for a in v.alts) if isinstance(x, Seq)))
        if isinstance(v, Choice):
            return Choice(tuple(self.value(a, depth + 1) for a in v.alts))
        if isinstance(v, Bound):
            return Bound(self.value(v.obj, depth + 1), v.func)
        if isinstance(v, Params):
            return Params(frozenset(self.owner(o) for o in v.owners))
        if isinstance(v, Partial):
            return Partial(self.value(v.func, depth + 1), tuple(self.value(x, depth + 1) for x in v.args),
                           tuple((k, self.value(x, depth + 1)) for k, x in v.kw), v.kw_sites)
        return v

    def step(self, e: StepEvent, stamp: int, entry: tuple[Site, Site] | None = None) -> StepEvent:
        owners = frozenset(self.owner(o) for o in e.owners)
        if entry is not None:
            return StepEvent(stamp, owners, entry[0], entry[1], e.op, e.inner or e.site, e.calls)
        return StepEvent(stamp, owners, e.site, e.stmt, e.op, e.inner, e.calls)


class Summaries(SharedSummaries):
    # ------------------------------------------------------------------ keys
    def call_key(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State) -> Hashable | None:
        saved = st.heap.saved
        # (a call inside `_unsafe_preserve_version_counter(t)` may write t unreported: not the same run as outside)
        parts: list[Hashable] = [fkey(fi), st.no_grad, st.autocast, st.allow_mutation, st.packed,
                                 bool(self.version_kept)]
        try:
            for v in pos:
                parts.append(self._vkey(v, saved, 0))
            for k in sorted(kw):
                parts.append((k, self._vkey(kw[k], saved, 0)))
        except _Unkeyable:
            return None  # a value without a stable description: run the call every time
        return tuple(parts)

    def _vkey(self, v: Val, saved: dict[Storage, Any], depth: int) -> Hashable:
        if isinstance(v, T):
            return ("T", v.rg, v.leaf, v.view, v.maybe_tensor, v.maybe_tuple, len(v.storages),
                    any(s in saved for s in v.storages), any(s.param_of is not None for s in v.storages),
                    bool(v.prov), v.alias_of, v.noncontig, v.cplx, v.f32, v.expanded is not None)
        if isinstance(v, Cond):
            return ("B", outcomes(v))  # (a flag that is False while autograd records is not any unknown flag)
        if isinstance(v, Const):
            val = v.value
            if isinstance(val, (int, float)) and not isinstance(val, bool):
                # Sizes, strides, rates: a call with other numbers builds the same kind of thing (the numbers
                # that select a branch, 0 and 1, are kept apart from the rest).
                return ("N", val if val in (0, 1) else "n") if v.known else ("N", "?")
            return ("C", val if v.known and isinstance(val, (str, bool, type(None))) else "?")
        if isinstance(v, UnknownT):
            return "U"
        if isinstance(v, Seq):
            if v.items is not None and depth < 2:
                return ("S", v.kind, v.keys, v.wkeys, len(v.items),
                        tuple(self._vkey(x, saved, depth + 1) for x in v.items[:_MAX_KEY_ITEMS]))
            return ("S*", v.kind, self._vkey(v.elem, saved, depth + 1) if depth < 2 else None)
        if isinstance(v, Obj):
            return ("O", v.oid, self._obj_state(v, saved, depth))
        if isinstance(v, Bound):
            return ("B", fkey(v.func), self._vkey(v.obj, saved, depth + 1) if depth < 2 else None)
        if isinstance(v, Func):
            # (a nested def is one function per closure: the wrappers one decorator made for two functions differ)
            return ("F", fkey(v.info), v.info if v.info.closure is not None else None)
        if isinstance(v, ClassV):
            return ("K", fkey_class(v.info))
        if isinstance(v, ModV):
            return ("M", v.ctx.path)
        if isinstance(v, Ref):
            return ("R", v.qual)
        if isinstance(v, Alt) and depth < 2:
            return ("A", tuple(self._vkey(x, saved, depth + 1) for x in v.alts))
        if isinstance(v, Choice):
            # instances of different classes (`DropPath(p) if p > 0 else nn.Identity()`), classes or functions a
            # factory picked by name: each alternative as an argument would be; deeper down, an instance is itself
            if depth < 2:
                return ("Ch", tuple(self._vkey(x, saved, depth + 1) for x in v.alts))
            return ("Ch", tuple(("O", x.oid) if isinstance(x, Obj) else self._vkey(x, saved, depth + 1)
                                for x in v.alts if not isinstance(x, Choice)))
        if isinstance(v, Params):
            return ("P", tuple(sorted(owner_key(o) for o in v.owners)))
        if isinstance(v, Partial) and depth < 2:
            return ("Pa", self._vkey(v.func, saved, depth + 1), tuple(self._vkey(x, saved, depth + 1) for x in v.args),
                    tuple((k, self._vkey(x, saved, depth + 1)) for k, x in v.kw))
        raise _Unkeyable

    def _obj_state(self, o: Obj, saved: dict[Storage, Any], depth: int) -> Hashable:
        """What a method may read of an object: its attributes, entries, flags, and whether its tensors are saved
        now. Tensors it holds are told apart by their storages' numbers (deterministic, unlike ``id()``)."""
        def akey(a: Val) -> Hashable:
            if isinstance(a, T):
                # (whether it carries a graph: a state tensor that a method reads, as `self.memory[n_id] = gru(..)`
                # left it, builds on the graph it holds)
                return ("T", tuple(sorted(s.sid for s in a.storages)), a.rg, a.view,
                        any(s in saved for s in a.storages), bool(a.prov))
            if isinstance(a, Obj):
                return ("O", a.oid, self._obj_state(a, saved, depth + 1)) if depth < 1 else ("O", a.oid)
            return self._vkey(a, saved, 2)

        attrs = tuple((k, akey(a)) for k, a in o.attrs.items())
        params = tuple((k, akey(p)) for k, p in o.params.items())
        ents = o.entries
        ekey = (len(ents.items) if isinstance(ents, Seq) and ents.items is not None else -1,
                len(ents.alts) if isinstance(ents, Alt) else 0)
        hooks = tuple(len(h.items) if isinstance(h, Seq) and h.items is not None else 0
                      for h in (o.cfg.get("forward_pre_hooks"), o.cfg.get("forward_hooks")))
        return (o.kind, o.training, o.inplace, ekey, attrs, params, "full_backward_hook" in o.cfg, hooks)

    # ------------------------------------------------------------------ recording
    def summarised(self, key: Hashable | None, pos: list[Val], kw: dict[str, Val], st: State,
                   run: Any, place: Hashable | None = None, depth: int = 0) -> Val:
        """Replay the summary of ``key`` if there is one; else ``run()`` the call, recording its summary.

        ``place``: the callee is another module's (its place, see :mod:`.shared`), called at frame ``depth``: the
        project's kept calls are tried before running it, and the run is kept for the other analyses."""
        known = self.summaries.get(key) if key is not None else None
        if isinstance(known, Summary) and depth < known.min_depth:
            known = None  # recorded deeper, where the depth limit cut it shorter than a call from here is
        if isinstance(known, Summary):
            self.reuse(("summary", key))
            if self.shared_recs:
                self.note_replayed(self.footprints.get(key), depth)
            return self.replay(known, pos, kw, st)
        if key is None or known is NOT_SUMMARISED:
            return run()  # type: ignore[no-any-return]
        shared = None
        if place is not None and self.project is not None:
            shared = self.shared_key(place, pos, kw, st)
            if shared is not None:
                got = self.shared_replay(shared[0], shared[1], pos, kw, st, depth)
                if got is not MISS:
                    return got  # type: ignore[no-any-return]
        return self.cached(("summary", key), lambda: self._summarise(key, pos, kw, st, run, shared, depth, place))

    def _summarise(self, key: Hashable, pos: list[Val], kw: dict[str, Val], st: State, run: Any,
                   shared: tuple[Hashable, Shape] | None = None, depth: int = 0, place: Any = None) -> Val:
        mark, stamp, backwards = marker(), self.stamp, self.backwards
        depth_calls = len(self.call_stmts)
        before, steps = dict(st.heap.saved), st.heap.steps
        rec: list[Any] = [mark, True, False, stamp]
        self.recording.append(rec)
        fp = Rec(depth, self.foreign_used, self.budget, len(self.active))  # what the run reads and needs (see .shared)
        if place is not None:
            fp.files.add(place[1][0] if place[0] == "new" else place[0])
        self.shared_recs.append(fp)
        tables = self.side_tables() if shared is not None else ()
        try:
            res = run()
        finally:
            self.recording.remove(rec)
            self.shared_recs.remove(fp)
        summary = None
        if rec[1] and self.backwards == backwards:
            summary = self.record(mark, stamp, pos, kw, before, steps, st, res, depth_calls)
            if summary is not None and rec[2]:
                summary = replace(summary, min_depth=depth)
        self.summaries[key] = summary if summary is not None else NOT_SUMMARISED
        if summary is not None:
            self.footprints[key] = fp
            if shared is not None and fp.ok and not summary.steps and tables == self.side_tables():
                self.shared_end(fp, shared[0], shared[1], pos, kw, res, before, st, stamp, mark)
        return res  # type: ignore[no-any-return]

    @staticmethod
    def _arg_paths(pos: list[Val], kw: dict[str, Val]) -> dict[Storage, Path]:
        out: dict[Storage, Path] = {}
        for i, v in enumerate(pos):
            _paths_walk(v, ("p", i), 0, out)
        for k, v in kw.items():
            _paths_walk(v, ("k", k), 0, out)
        return out

    def record(self, mark: int, stamp: int, pos: list[Val], kw: dict[str, Val],
               before: dict[Storage, tuple[SaveRecord, ...]], steps_before: tuple[StepEvent, ...], st: State,
               result: Val, depth_calls: int = 0) -> Summary | None:
        steps = st.heap.steps
        if steps[:len(steps_before)] != steps_before or not self._replayable(result, 0):
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
        # A private snapshot of what the call created: the caller goes on to change the originals.
        snap = Cloner(mark)
        arg_prov = frozenset((o, s_) for (o, s_, _c) in args_prov(pos, kw))
        return Summary(mark, stamp, self._arg_paths(pos, kw),
                       tuple((snap.storage(s), recs) for s, recs in added),
                       tuple(snap.storage(s) for s in removed),
                       # (a step keeps the calls made inside the recorded call; a replay puts its own in front)
                       tuple(replace(snap.step(e, e.stamp), calls=e.calls[depth_calls:])
                             for e in steps[len(steps_before):]),
                       snap.value(result), arg_prov)

    def _replayable(self, v: Val, depth: int) -> bool:
        if isinstance(v, (T, Const, UnknownT, Ref, Obj, Func, Bound, ClassV, ModV, Params, Partial)):
            return True
        if isinstance(v, Seq):
            if depth > 3:
                return False
            return all(self._replayable(x, depth + 1) for x in (v.items if v.items is not None else (v.elem,)))
        if isinstance(v, Choice):
            return all(self._replayable(x, depth + 1) for x in v.alts)
        return False

    # ------------------------------------------------------------------ replay
    def replay(self, s: Summary, pos: list[Val], kw: dict[str, Val], st: State) -> Val:
        now = {p: x for x, p in self._arg_paths(pos, kw).items()}
        cur = args_prov(pos, kw)
        c = Cloner(s.marker, {x: now[p] for x, p in s.paths.items() if p in now}, (s.arg_prov, self.stamp, s.stamp))
        saved = st.heap.saved
        for x in s.removed:
            saved.pop(c.storage(x), None)
        for x, recs in s.added:
            self.log_saves(saved, c.storage(x), recs)
        if s.steps:
            here = tuple(self.call_stmts)
            st.heap.steps = (*st.heap.steps, *(
                replace(c.step(e, self.stamp, entry), calls=here if entry is not None else here + e.calls)
                for e in s.steps for entry in (self.entry if (e.inner or e.site).path else None,)))
        out = self._with_prov(c.value(s.result), s, cur, 0)
        if cur:
            self._record_prov(s.result, out, s, cur, 0)
        return out

    def _record_prov(self, recorded: Val, now: Val, s: Summary, prov: frozenset[Any], depth: int) -> None:
        """A returned record's tensors (`return z, LIFState(z, v, i)`, a namedtuple or dataclass of tensors) that
        have a graph carry the replayed arguments' provenance, as a returned tensor does (a state carried across
        iterations keeps the graph it came from)."""
        if isinstance(recorded, Seq) and isinstance(now, Seq) and depth < 4 and recorded.items is not None \
                and now.items is not None and len(recorded.items) == len(now.items):
            for a, b in zip(recorded.items, now.items):
                self._record_prov(a, b, s, prov, depth + 1)
        elif isinstance(recorded, Obj) and isinstance(now, Obj) and now is not recorded and now.kind == "local" \
                and now.info is not None and now.info.record_fields() is not None:
            for k, was in recorded.attrs.items():
                got = now.attrs.get(k)
                if isinstance(was, T) and isinstance(got, T) and was.prov:  # (as a returned tensor with a graph, below)
                    now.attrs[k] = got.with_(prov=got.prov | prov)

    def _with_prov(self, v: Val, s: Summary, prov: frozenset[Any], depth: int) -> Val:
        """The result's provenance: the replayed arguments' instead of the recorded ones', and the callee's own
        entries (modules whose parameters it used) stamped now."""
        if isinstance(v, T):
            if not v.prov:
                return v
            inner = frozenset(((*self.graph_use(o)[:2], c) if stamp >= s.stamp else (o, stamp, c))
                              for (o, stamp, c) in v.prov if (o, stamp) not in s.arg_prov)
            return v.with_(prov=prov | inner)
        if isinstance(v, Seq) and depth < 4:
            if v.items is not None:
                return v.remap(tuple(self._with_prov(x, s, prov, depth + 1) for x in v.items))
            return Seq(None, self._with_prov(v.elem, s, prov, depth + 1), v.kind)
        return v


def _sid(s: Storage) -> int:
    return s.sid


def _paths_walk(v: Val, path: Path, depth: int, out: dict[Storage, Path]) -> None:
    # (module-level, not a recursive closure: see shared._prov_walk)
    if isinstance(v, T):
        for i, s in enumerate(sorted(v.storages, key=_sid)):
            out.setdefault(s, (*path, i))
    elif isinstance(v, Seq) and v.items is not None and depth < 2:
        for i, x in enumerate(v.items[:_MAX_KEY_ITEMS]):
            _paths_walk(x, (*path, i), depth + 1, out)
