"""Fixes for findings that are not about one in-place op: a custom Function's ``mark_dirty`` contract, an
inference tensor an op saves, ``backward()`` after the ``allow_mutation_on_saved_tensors()`` block, and a
parameter update inside a helper. The analyzer finds them (no torch here); the fixtures that prove the fixes by
running them are in tests/fixtures (tests/fixes/test_fix_proof.py)."""

from __future__ import annotations

import ast
import textwrap

from gradguard import api
from gradguard.fixes import apply_edits
from gradguard.model import Finding, Fix


def d(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


def one(src: str, code: str) -> tuple[Finding, Fix | None]:
    found = [f for f in api.check_source(src, "snippet.py") if f.code == code]
    assert len(found) == 1, found
    f = found[0]
    fixes = [x for x in f.fixes if x.kind != "noqa"]
    for x in fixes:
        assert ast.parse(apply_edits(src, x.edits)), x
    return f, next((x for x in fixes if x.preferred), None)


FN = """
import torch


class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
{body}

    @staticmethod
    def backward(ctx, g, *rest):
        return g, None


w = torch.randn(4, requires_grad=True)
out = Clamp.apply(w * 2, torch.ones(4))
"""


def fn(body: str) -> str:
    return FN.lstrip("\n").format(body=textwrap.indent(d(body), " " * 8))


def test_a_dirty_input_returned_as_a_copy_is_returned_itself_in_every_return() -> None:
    src = fn("""
        x.clamp_(-1, 1)
        ctx.mark_dirty(x)
        if y.sum() > 0:
            return x.detach().clone(), y * 2  # keep me
        return torch.clone(x), y
        """)
    f, fix = one(src, "GG302")
    assert f.facts["kind"] == "dirty_not_returned" and fix is not None and fix.safe
    new = apply_edits(src, fix.edits).splitlines()
    assert "            return x, y * 2  # keep me" in new and "        return x, y" in new


def test_a_dirty_input_rebound_in_the_forward_is_not_rewritten() -> None:
    src = fn("""
        x.clamp_(-1, 1)
        ctx.mark_dirty(x)
        x = x * 2
        return x.clone()
        """)
    f, fix = one(src, "GG302")
    assert f.facts["kind"] == "dirty_not_returned" and fix is None


def test_mark_dirty_of_a_view_the_forward_made_loses_that_argument_only() -> None:
    src = fn("""
        buf = x.new_zeros(6)
        head = buf[:4]
        head.copy_(x)
        x.mul_(2)
        ctx.mark_dirty(x, head)
        return x, head
        """)
    f, fix = one(src, "GG302")
    assert f.facts["kind"] == "dirty_not_input" and fix is not None and fix.safe
    assert "        ctx.mark_dirty(x)" in apply_edits(src, fix.edits).splitlines()


def test_mark_dirty_alone_in_its_block_becomes_pass() -> None:
    src = fn("""
        buf = x.new_zeros(6)
        head = buf[:4]
        head.copy_(x)
        if y.sum() > 0:
            ctx.mark_dirty(head)
        return head
        """)
    f, fix = one(src, "GG302")
    assert f.facts["kind"] == "dirty_not_input" and fix is not None
    new = apply_edits(src, fix.edits).splitlines()
    assert "            pass" in new and not any("mark_dirty" in ln for ln in new)


def test_an_inference_tensor_is_cloned_where_the_op_saves_it() -> None:
    src = d("""
        import torch

        backbone = torch.nn.Linear(4, 4)
        head = torch.nn.Linear(4, 1)
        with torch.inference_mode():
            feats = backbone(torch.randn(2, 4))
        out = head(feats) + 1
        out.sum().backward()
        """)
    f, fix = one(src, "GG303")
    assert f.facts["kind"] == "inference_saved" and fix is not None and fix.safe and fix.kind == "clone-at-use"
    assert "out = head(feats.clone()) + 1" in apply_edits(src, fix.edits).splitlines()


AM = """
import torch

w = torch.randn(3, requires_grad=True)
with torch.autograd.graph.allow_mutation_on_saved_tensors():
    h = w * 1.0
    y = h.exp()
    h.add_(1)
{between}
y.sum().backward()  # after the block
print(w.grad)
"""


def test_backward_after_the_allow_mutation_block_moves_into_it_with_what_is_between() -> None:
    src = AM.lstrip("\n").format(between="z = y * 2\n\n# a comment")
    f, fix = one(src, "GG101")
    assert f.facts["kind"] == "am_outside" and fix is not None and fix.safe and fix.kind == "extend-block"
    new = apply_edits(src, fix.edits).splitlines()
    assert new[7:12] == ["    z = y * 2", "", "    # a comment", "    y.sum().backward()  # after the block",
                         "print(w.grad)"]


def test_a_string_spanning_lines_between_the_block_and_the_backward_is_left_alone() -> None:
    src = AM.lstrip("\n").format(between='note = """two\nlines"""')
    f, fix = one(src, "GG101")
    assert f.facts["kind"] == "am_outside" and fix is None


def test_a_step_inside_a_helper_moves_the_call_that_runs_it() -> None:
    """The update runs in a function called between forward and backward: the fix moves the statement of the
    caller that runs it (here the whole `with` block holding the call), never the helper's own line."""
    src = d("""
        import torch


        def update(p):
            return p.add_(1.0)


        m = torch.nn.Linear(4, 3)
        y = m.weight.mul(m.weight)
        with torch.no_grad():
            update(m.weight)
        y.sum().backward()
        print(m.weight.grad)
        """)
    f, fix = one(src, "GG202")
    assert f.line == 5
    assert any(r.line == 11 and "inside the call" in r.message for r in f.related), f.related
    assert fix is not None and fix.kind == "reorder-step"
    new = apply_edits(src, fix.edits).splitlines()
    assert new[3:5] == ["def update(p):", "    return p.add_(1.0)"]
    assert new[9:13] == ["y.sum().backward()", "with torch.no_grad():", "    update(m.weight)", "print(m.weight.grad)"]


def test_a_step_two_calls_deep_moves_the_outer_call() -> None:
    src = d("""
        import torch


        def clip(p):
            p.clamp_(-1, 1)


        def post_step(model):
            with torch.no_grad():
                clip(model.weight)


        m = torch.nn.Linear(4, 3)
        y = torch.tanh(m(torch.randn(2, 4, requires_grad=True)))  # linear saves the weight for the input grad
        post_step(m)
        y.sum().backward()
        """)
    _f, fix = one(src, "GG202")
    assert fix is not None and fix.kind == "reorder-step"
    new = apply_edits(src, fix.edits).splitlines()
    assert new[-2:] == ["y.sum().backward()", "post_step(m)"]


def test_a_step_replayed_from_a_summary_moves_the_call_that_replays_it(monkeypatch) -> None:
    """The second call of the helper is not run again (its first run's summary is replayed): the update it
    replays still knows the call it was made through."""
    from gradguard.analysis.summaries import Summaries

    replays = []
    real = Summaries.replay

    def counting(self, s, *a, **k):
        replays.append(s)
        return real(self, s, *a, **k)

    monkeypatch.setattr(Summaries, "replay", counting)
    src = d("""
        import torch


        def upd(p):
            with torch.no_grad():
                p.add_(1.0)


        m = torch.nn.Linear(4, 3)
        y0 = m.weight.mul(m.weight)  # a graph nobody differentiates
        upd(m.weight)
        y2 = m.weight.mul(m.weight)
        upd(m.weight)
        y2.sum().backward()
        """)
    f, fix = one(src, "GG202")
    assert len(replays) == 1 and replays[0].steps, "the second call replays the first one's summary"
    assert any(r.line == 13 and "inside the call" in r.message for r in f.related), f.related
    assert fix is not None and fix.kind == "reorder-step"
    new = apply_edits(src, fix.edits).splitlines()
    assert new[-2:] == ["y2.sum().backward()", "upd(m.weight)"]
