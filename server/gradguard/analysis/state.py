"""Flow-sensitive state: the environment of names and the heap of saved-for-backward facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradguard.analysis.hazards import SaveRecord, Site
from gradguard.analysis.values import Storage, T, UnknownT, Val, boolish, join_paths, recorded

_NO_TENSOR = T(frozenset())  # what an unknown value holds, for _split: nothing the analysis can write through


@dataclass(frozen=True)
class StepEvent:
    """Parameters changed in place (an optimizer step, a manual update). ``site``/``stmt`` are where the checked
    file makes it happen: the step itself, or the call of another module's function that steps (``inner``)."""

    stamp: int
    owners: frozenset[Any]
    site: Site
    stmt: Site
    op: str
    inner: Site | None = None
    # the statements of the checked file's functions that called into the one making the update, outermost first
    # (from the function the analysis started in): where a fix moves the update from
    calls: tuple[Site, ...] = ()
    # the graphs (owner, stamp) a backward had already freed on the path that made this update: it cannot have
    # changed what they saved for a backward still to come (a path where they are not freed did not make it)
    dead: frozenset[tuple[Any, int]] = frozenset()

    def updates(self, owner: Any) -> bool:
        """Does it change what ``owner`` (a module, or a parameter's storage) holds? A parameter read as one of a
        module's `.parameters()` belongs to that module, which a step on the module updates."""
        return owner in self.owners or (isinstance(owner, Storage) and owner.param_of is not None
                                        and owner.param_of in self.owners)


# Save records kept per storage: the first ones name the op in messages; a parameter used by hundreds of ops (or a
# loop body's records met again on each pass) must not make every join of the heap cost as much.
MAX_SAVES = 8


@dataclass
class Heap:
    saved: dict[Storage, tuple[SaveRecord, ...]] = field(default_factory=dict)
    steps: tuple[StepEvent, ...] = ()
    freed: frozenset[tuple[Any, int]] = frozenset()
    # the last in-place write to each storage: (statement stamp, site, op as users read it)
    wrote: dict[Storage, tuple[int, Site, str]] = field(default_factory=dict)
    # optimizers (and modules) whose gradients `zero_grad()` set to None since the last backward: their step
    # updates nothing (every torch optimizer skips a parameter whose `.grad` is None)
    cleared: frozenset[Any] = frozenset()

    def copy(self) -> Heap:
        return Heap(dict(self.saved), self.steps, self.freed, dict(self.wrote) if self.wrote else {}, self.cleared)

    def with_saved(self, more: dict[Storage, tuple[SaveRecord, ...]]) -> Heap:
        return Heap({**self.saved, **more}, self.steps, self.freed, dict(self.wrote) if self.wrote else {},
                    self.cleared)

    def join(self, other: Heap) -> Heap:
        if other is self:
            return self
        saved = dict(self.saved)
        for s, recs in other.saved.items():
            mine = saved.get(s)
            if mine is None:
                saved[s] = recs
            elif mine is not recs and recs != mine[:len(recs)]:
                have = set(mine)  # (records compare by value: a set, not a scan per record)
                extra = tuple(r for r in recs if r not in have)
                if extra:
                    saved[s] = (mine + extra)[:MAX_SAVES]
        if other.steps is self.steps or not other.steps:
            steps = self.steps
        else:
            mine_steps = set(self.steps)
            steps = self.steps + tuple(e for e in other.steps if e not in mine_steps)
        wrote = dict(self.wrote) if self.wrote else {}  # (written in place by mutate: never shared)
        if other.wrote and other.wrote is not self.wrote:
            for s, w in other.wrote.items():
                mine_w = wrote.get(s)
                if mine_w is None or w[0] > mine_w[0]:
                    wrote[s] = w
        return Heap(saved, steps, self.freed & other.freed, wrote, self.cleared & other.cleared)


@dataclass
class State:
    env: dict[str, Val]
    heap: Heap
    no_grad: bool = False
    autocast: bool = False
    allow_mutation: bool = False
    silent: bool = False  # a branch that only runs when autograd does not record (`if not x.requires_grad:`)
    inference: bool = False  # inside inference_mode (no_grad is set too)
    # Saves made here go through a saved-tensor pack hook (saved_tensors_hooks, save_on_cpu, a non-reentrant
    # checkpoint): torch unpacks what the hook kept without checking versions, so no later write makes them raise.
    packed: bool = False

    def copy(self) -> State:
        return State(dict(self.env), self.heap.copy(), self.no_grad, self.autocast, self.allow_mutation, self.silent,
                     self.inference, self.packed)

    def branch(self) -> State:
        return self.copy()


def _split(va: T, vb: T, ha: Heap, hb: Heap, memo: dict[Storage, Storage],
           alt_saved: dict[Storage, tuple[SaveRecord, ...]], own: bool = True) -> T:
    """A name bound to storage s only on path A, where path B saved s with ops path A did not run (`if norm is not
    None: h = norm(h)`, norm saving h): on no single path does the name reach s with B's saves. The joined name
    gets a stand-in for s that carries only A's saves, so a later mutation through it is not blamed on B's.
    ``own=False`` (the passes of a loop, whose paths are successive iterations): only where A saved s not at all.
    """
    out = set()
    changed = False
    for s in va.storages:
        theirs = hb.saved.get(s) if s not in vb.storages else None
        mine = ha.saved.get(s, ())
        if theirs and theirs is not mine and (not mine if not own else any(r not in mine for r in theirs)):
            alt = memo.get(s)
            if alt is None:
                alt = memo[s] = Storage(s.desc, s.site, s.leaf, s.param_of)
                if mine:
                    alt_saved[alt] = mine
            out.add(alt)
            changed = True
        else:
            out.add(s)
    return va.with_(storages=frozenset(out)) if changed else va


def split_paths(vals: list[Val], heaps: list[Heap]) -> tuple[list[Val], dict[Storage, tuple[SaveRecord, ...]]]:
    """Values that several paths produced (a call run on each alternative of a Choice), each with its path's heap:
    each tensor value's storages carry only its own path's saves (see _split), and the stand-ins' saves."""
    alt_saved: dict[Storage, tuple[SaveRecord, ...]] = {}
    out = list(vals)
    for i, v in enumerate(out):
        if not isinstance(v, T):
            continue
        memo: dict[Storage, Storage] = {}  # (per path: each path's stand-in carries that path's saves)
        for j, w in enumerate(vals):
            if j != i and isinstance(w, T) and w.storages != v.storages:
                v = _split(v, w, heaps[i], heaps[j], memo, alt_saved)
        out[i] = v
    return out, alt_saved


def join_states(a: State | None, b: State | None, own: bool = False) -> State | None:
    """The state after two paths. ``own``: the arms of an if, each name keeping only its own path's saves (see
    _split); the passes of a loop and other joins keep the rule that a name is split only from saves its path
    never made."""
    if a is None:
        return b
    if b is None:
        return a
    env: dict[str, Val] = {}
    memo: dict[Storage, Storage] = {}
    alt_saved: dict[Storage, tuple[SaveRecord, ...]] = {}
    for k in a.env.keys() | b.env.keys():
        va, vb = a.env.get(k), b.env.get(k)
        if va is None:
            env[k] = vb  # type: ignore[assignment]
        elif vb is None or va is vb:
            env[k] = va
        else:
            if isinstance(va, T) and isinstance(vb, T) and va.storages != vb.storages:
                va = _split(va, vb, a.heap, b.heap, memo, alt_saved, own)
                vb = _split(vb, va, b.heap, a.heap, memo, alt_saved, own)
            elif own and isinstance(va, T) and isinstance(vb, UnknownT):
                # `if attn is not None: h = attn(h)` where the call gave an unknown value: the join keeps the
                # other path's h, which must not carry the saves attn made on this path
                va = _split(va, _NO_TENSOR, a.heap, b.heap, memo, alt_saved, own)
            elif own and isinstance(vb, T) and isinstance(va, UnknownT):
                vb = _split(vb, _NO_TENSOR, b.heap, a.heap, memo, alt_saved, own)
            elif a.silent != b.silent and boolish(va) and boolish(vb):
                # `recording = True` / `if not torch.is_grad_enabled(): recording = False`: while autograd records,
                # the value of the arm that can run then
                env[k] = recorded([vb if a.silent else va])
                continue
            env[k] = join_paths(va, vb)
    heap = a.heap.join(b.heap)
    if alt_saved:
        heap = heap.with_saved(alt_saved)
    return State(env, heap, a.no_grad, a.autocast, a.allow_mutation, a.silent and b.silent, a.inference, a.packed)
