"""Joining the states of two paths (the arms of an if): a name's storages carry only the saves of the paths on
which the name holds them."""

from __future__ import annotations

from gradguard.analysis.hazards import SaveRecord, Site
from gradguard.analysis.state import Heap, State, join_states
from gradguard.analysis.values import Storage, T


def _rec(op: str, line: int) -> SaveRecord:
    return SaveRecord(op, "its input", Site(line, 1, line, 2))


def _saves(st: State, name: str) -> list[list[str]]:
    v = st.env[name]
    assert isinstance(v, T)
    return sorted([r.op for r in st.heap.saved.get(s, ())] for s in v.storages)


def test_a_save_made_only_on_the_path_that_rebinds_the_name_does_not_follow_the_name() -> None:
    # h = conv(x)                     (conv saved x, not h; sigmoid saved h: both paths)
    # if norm is not None: h = norm(h)  (norm saved the old h, on that path only)
    old, new = Storage("sigmoid"), Storage("norm")
    common = _rec("sigmoid", 3)
    normed = State({"h": T(frozenset({new}))}, Heap({old: (common, _rec("LayerNorm", 5))}))
    plain = State({"h": T(frozenset({old}))}, Heap({old: (common,)}))
    for a, b in ((normed, plain), (plain, normed)):
        out = join_states(a, b, own=True)
        assert out is not None
        assert _saves(out, "h") == [[], ["sigmoid"]]  # the old h keeps its own path's save, not LayerNorm's
        # the heap still knows the old tensor as LayerNorm saved it, for any other name that holds it
        assert [r.op for r in out.heap.saved[old]] == ["sigmoid", "LayerNorm"]
        # two passes of a loop are successive iterations, not alternatives: the next pass's saves stay
        loop = join_states(a, b)
        assert loop is not None and _saves(loop, "h") == [[], ["sigmoid", "LayerNorm"]]


def test_a_save_made_on_both_paths_follows_the_name() -> None:
    s, t = Storage("a"), Storage("b")
    rec = _rec("relu", 2)
    a = State({"h": T(frozenset({s}))}, Heap({s: (rec,)}))
    b = State({"h": T(frozenset({t}))}, Heap({s: (rec,)}))
    out = join_states(a, b)
    assert out is not None
    assert _saves(out, "h") == [[], ["relu"]]
    assert s in out.env["h"].storages  # type: ignore[union-attr]


def test_the_other_arm_gave_an_unknown_value() -> None:
    # if attn is not None: h = attn(h)   (attn saved h, then its result is unknown: the analysis was cut there)
    from gradguard.analysis.values import UNKNOWN

    old = Storage("resnet output")
    ran = State({"h": UNKNOWN}, Heap({old: (_rec("GroupNorm", 7),)}))
    skipped = State({"h": T(frozenset({old}))}, Heap({}))
    for a, b in ((ran, skipped), (skipped, ran)):
        out = join_states(a, b, own=True)
        assert out is not None and _saves(out, "h") == [[]]  # not GroupNorm's: it ran on the other path only
