"""Flow-sensitive state: the environment of names and the heap of saved-for-backward facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradguard.analysis.hazards import SaveRecord, Site
from gradguard.analysis.values import Storage, Val, join


@dataclass(frozen=True)
class StepEvent:
    stamp: int
    owners: frozenset[Any]
    site: Site
    stmt: Site
    op: str


@dataclass
class Heap:
    saved: dict[Storage, tuple[SaveRecord, ...]] = field(default_factory=dict)
    steps: tuple[StepEvent, ...] = ()
    freed: frozenset[tuple[Any, int]] = frozenset()

    def copy(self) -> Heap:
        return Heap(dict(self.saved), self.steps, self.freed)

    def join(self, other: Heap) -> Heap:
        if other is self:
            return self
        saved = dict(self.saved)
        for s, recs in other.saved.items():
            mine = saved.get(s)
            if mine is None:
                saved[s] = recs
            elif mine is not recs:
                saved[s] = mine + tuple(r for r in recs if r not in mine)
        steps = self.steps + tuple(e for e in other.steps if e not in self.steps)
        return Heap(saved, steps, self.freed & other.freed)


@dataclass
class State:
    env: dict[str, Val]
    heap: Heap
    no_grad: bool = False
    autocast: bool = False
    allow_mutation: bool = False

    def copy(self) -> State:
        return State(dict(self.env), self.heap.copy(), self.no_grad, self.autocast, self.allow_mutation)

    def branch(self) -> State:
        return self.copy()


def join_states(a: State | None, b: State | None) -> State | None:
    if a is None:
        return b
    if b is None:
        return a
    env: dict[str, Val] = {}
    for k in a.env.keys() | b.env.keys():
        va, vb = a.env.get(k), b.env.get(k)
        if va is None:
            env[k] = vb  # type: ignore[assignment]
        elif vb is None or va is vb:
            env[k] = va
        else:
            env[k] = join(va, vb)
    return State(env, a.heap.join(b.heap), a.no_grad, a.autocast, a.allow_mutation)
