"""Fix builders on real snippets, with findings built by hand (spans from ``ast``): exact rewrites, safe flags,
exactly one preferred fix, comments and formatting kept, the result parses. No torch, no analyzer."""

from __future__ import annotations

import ast
import textwrap

import pytest
from gradguard.fixes import apply_edits, attach_fixes, fix_text
from gradguard.model import Edit, Finding, Fix
from handmade import make


def fixes_for(src: str, line: int, code: str, kind: str, **kw) -> tuple[Finding, list[Fix]]:
    f = make(src, line, code, kind, **kw)
    attach_fixes([f], src)
    assert sum(x.preferred for x in f.fixes) == 1, f.fixes
    for x in f.fixes:
        assert ast.parse(apply_edits(src, x.edits)), x
    return f, f.fixes


def preferred(src: str, line: int, code: str, kind: str, **kw) -> tuple[str, Fix]:
    _, fixes = fixes_for(src, line, code, kind, **kw)
    fix = next(x for x in fixes if x.preferred)
    return apply_edits(src, fix.edits), fix


def d(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


# -- out of place --------------------------------------------------------------------------------------------

def test_augassign_becomes_assignment_and_is_safe_for_a_private_local() -> None:
    src = d("""
        import torch
        x = torch.randn(3, requires_grad=True)
        y = x.exp()
        y  +=  1  # keep me
        """)
    new, fix = preferred(src, 4, "GG101", "augassign")
    assert new.splitlines()[3] == "y  = y +  1  # keep me"
    assert fix.safe and fix.kind == "out-of-place"
    assert fix.title == "Rewrite `y += 1` as `y = y + 1`"


def test_augassign_parenthesizes_a_lower_precedence_value() -> None:
    src = d("""
        import torch
        def f(a, b):
            y = a.exp()
            y *= a + b
            return y
        """)
    new, fix = preferred(src, 4, "GG101", "augassign")
    assert "    y = y * (a + b)" in new.splitlines()
    assert fix.safe


def test_augassign_on_a_parameter_is_unsafe() -> None:
    src = d("""
        def forward(self, x):
            x += self.attn(self.ln_1(x))
            return x
        """)
    _, fixes = fixes_for(src, 2, "GG101", "augassign")
    oop = next(x for x in fixes if x.kind == "out-of-place")
    assert not oop.safe  # the caller's tensor is no longer modified


def test_augassign_on_an_alias_is_unsafe() -> None:
    src = d("""
        import torch
        a = torch.randn(3).exp()
        b = a
        b += 1
        """)
    _, fixes = fixes_for(src, 4, "GG101", "augassign")
    assert not next(x for x in fixes if x.kind == "out-of-place").safe


def test_method_standalone_and_multiline_call_keeps_comments() -> None:
    src = d("""
        import torch
        pred = torch.sigmoid(torch.randn(3))
        pred.clamp_(min=1e-4,  # lower
                    max=1 - 1e-4)
        """)
    new, fix = preferred(src, 3, "GG101", "method")
    assert new.splitlines()[2:4] == ["pred = pred.clamp(min=1e-4,  # lower", "            max=1 - 1e-4)"]
    assert fix.safe


def test_method_chain_rewrites_every_link() -> None:
    src = d("""
        def denorm(t):
            for channel in t:
                channel.mul_(2).add_(1)
        """)
    new, fix = preferred(src, 3, "GG302", "method")
    assert new.splitlines()[2] == "        channel = channel.mul(2).add(1)"
    assert not fix.safe  # a view: its base is no longer modified


def test_method_without_out_of_place_form_clones() -> None:
    src = d("""
        import torch
        w = torch.randn(3).exp()
        w.fill_diagonal_(0)
        """)
    new, _ = preferred(src, 3, "GG101", "method")
    assert new.splitlines()[2] == "w = w.clone().fill_diagonal_(0)"


def test_nested_method_in_return_is_replaced_in_place() -> None:
    src = d("""
        import torch
        def f(x):
            p = torch.sigmoid(x)
            return p.clamp_(0.1, 0.9)
        """)
    new, fix = preferred(src, 4, "GG101", "method")
    assert new.splitlines()[3] == "    return p.clamp(0.1, 0.9)"
    assert fix.safe


def test_nested_method_in_expression_keeps_the_rebinding() -> None:
    src = d("""
        import torch
        def f(x):
            p = torch.sigmoid(x)
            q = 2 * p.mul_(3)
            return p + q
        """)
    new, fix = preferred(src, 4, "GG101", "method")
    assert new.splitlines()[3] == "    q = 2 * (p := p.mul(3))"
    assert fix.safe


def test_nested_method_on_a_subscript_drops_the_mutation() -> None:
    src = d("""
        def f(hidden, n):
            hx = hidden.unbind(0)
            hx = [(hx[idx].squeeze_(0)) for idx in range(n)]
            return hx
        """)
    new, fix = preferred(src, 3, "GG302", "method")
    assert "hx = [(hx[idx].squeeze(0)) for idx in range(n)]" in new
    assert not fix.safe


def test_function_form() -> None:
    src = d("""
        import torch
        h = torch.exp(torch.randn(3))
        torch.relu_(h)
        """)
    new, fix = preferred(src, 3, "GG101", "function", name="torch.relu_")
    assert new.splitlines()[2] == "h = torch.relu(h)"
    assert fix.safe


def test_parameter_attribute_is_never_rebound() -> None:
    src = d("""
        import torch
        class M(torch.nn.Module):
            def forward(self, x):
                self.weight.clamp_(min=0)
                return x @ self.weight
        """)
    new, fix = preferred(src, 4, "GG301", "method")
    assert new.splitlines()[3:5] == ["        with torch.no_grad():", "            self.weight.clamp_(min=0)"]
    assert fix.kind == "no-grad" and not fix.safe


def test_leaf_out_of_place_is_unsafe() -> None:
    src = d("""
        import torch
        c = torch.randn(3, requires_grad=True)
        c += 1
        """)
    new, fix = preferred(src, 3, "GG301", "augassign")
    assert new.splitlines()[2] == "c = c + 1"
    assert not fix.safe


def test_leaf_parameter_update_prefers_no_grad() -> None:
    src = d("""
        import torch
        w = torch.randn(3, requires_grad=True)
        (w * w).sum().backward()
        w -= 0.1 * w.grad
        """)
    new, fix = preferred(src, 4, "GG301", "augassign")
    assert fix.kind == "no-grad"
    assert new.splitlines()[3:5] == ["with torch.no_grad():", "    w -= 0.1 * w.grad"]


# -- clone -----------------------------------------------------------------------------------------------------

def test_setitem_clone_before_hoists_a_value_that_reads_the_base() -> None:
    src = d("""
        import torch
        a = torch.tensor([1., 2.], requires_grad=True).clone()
        a[0] = a[1].sin()
        """)
    new, fix = preferred(src, 3, "GG103", "setitem")
    assert new.splitlines()[2:5] == ["value = a[1].sin()", "a = a.clone()", "a[0] = value"]
    assert fix.safe


def test_setitem_clone_before_when_value_does_not_read_the_base() -> None:
    src = d("""
        import torch
        def f(x, m):
            s = torch.softmax(x, -1)
            s[m] = 0.0
            return s
        """)
    new, fix = preferred(src, 4, "GG103", "setitem")
    assert new.splitlines()[3:5] == ["    s = s.clone()", "    s[m] = 0.0"]
    assert fix.safe


def test_setitem_through_an_alias_clones_at_the_alias() -> None:
    src = d("""
        def f(x):
            out = x
            out[:, :2] = x[:, 2:] * 2
            return out
        """)
    new, fix = preferred(src, 3, "GG103", "setitem", alias_line=2)
    assert new.splitlines()[1] == "    out = x.clone()"
    assert not fix.safe


def test_clone_at_the_point_of_use_is_safe_and_preferred_over_unsafe_rewrites() -> None:
    src = d("""
        import torch.nn.functional as F
        def forward(self, x):
            out = F.linear(x, self.weight)
            self.weight.div_(2)
            return out
        """)
    f = make(src, 4, "GG101", "method")
    from gradguard.model import Related
    f.related = [Related("<test>", 3, 11, "linear saved its input `self.weight` here", 3, 35)]
    attach_fixes([f], src)
    fix = next(x for x in f.fixes if x.preferred)
    assert fix.kind == "clone-at-use" and fix.safe
    assert apply_edits(src, fix.edits).splitlines()[2] == "    out = F.linear(x, self.weight.clone())"


# -- out= ------------------------------------------------------------------------------------------------------

def test_out_argument_becomes_an_assignment() -> None:
    src = d("""
        import torch
        mask = torch.empty(4, 6)
        for step in range(2):
            torch.bernoulli(torch.full((4, 6), 0.8), out=mask)
        """)
    new, fix = preferred(src, 4, "GG104", "out")
    assert new.splitlines()[3] == "    mask = torch.bernoulli(torch.full((4, 6), 0.8))"
    assert fix.safe


def test_out_argument_first_and_multiline() -> None:
    src = d("""
        import torch
        buf = torch.empty(3)
        torch.mul(
            torch.randn(3),  # a
            2.0,
            out=buf,  # b
        )
        """)
    new, _ = preferred(src, 3, "GG104", "out")
    assert ast.parse(new)
    assert "out=" not in new and "# a" in new and new.splitlines()[2].startswith("buf = torch.mul(")


# -- inplace=True ----------------------------------------------------------------------------------------------

def test_remove_inplace_keyword_in_sequential_entry() -> None:
    src = d("""
        import torch.nn as nn
        net = nn.Sequential(
            nn.Linear(4, 4),
            nn.Dropout(p=0.5, inplace=True),  # drop
            nn.Linear(4, 1),
        )
        """)
    new, fix = preferred(src, 4, "GG102", "module_entry")
    assert new.splitlines()[3] == "    nn.Dropout(p=0.5),  # drop"
    assert fix.safe
    _, fixes = fixes_for(src, 4, "GG102", "module_entry")
    alt = next(x for x in fixes if x.title.startswith("Set"))
    assert apply_edits(src, alt.edits).splitlines()[3] == "    nn.Dropout(p=0.5, inplace=False),  # drop"


def test_first_sequential_entry_is_unsafe() -> None:
    src = d("""
        import torch.nn as nn
        net = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(4, 1))
        """)
    _, fix = preferred(src, 2, "GG102", "module_entry")
    assert not fix.safe  # it overwrote the Sequential's own input


def test_positional_inplace_flag() -> None:
    src = d("""
        import torch.nn as nn
        net = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2, True), nn.Linear(32, 2))
        """)
    new, _ = preferred(src, 2, "GG102", "module_entry")
    assert "nn.LeakyReLU(0.2)," in new


def test_positional_flag_not_last_is_set_false() -> None:
    src = d("""
        import torch
        import torch.nn.functional as F
        h = torch.sigmoid(torch.randn(3, requires_grad=True))
        h = F.dropout(h, 0.5, True, True)
        """)
    f = make(src, 4, "GG102", "inplace_kwarg")
    ex = dict(f.mutation.extra)
    ex["kw_span"] = {"line": 4, "column": 28, "end_line": 4, "end_column": 32}  # the last True
    f.mutation.extra.update(ex)
    attach_fixes([f], src)
    fix = next(x for x in f.fixes if x.preferred)
    assert apply_edits(src, fix.edits).splitlines()[3] == "h = F.dropout(h, 0.5, True)"
    assert fix.safe  # h = f(h): the old h is unreachable afterwards


def test_module_call_edits_the_constructor_on_another_line() -> None:
    src = d("""
        import torch.nn as nn
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout2d(p=0.1, inplace=True)

            def forward(self, x):
                x = self.drop(x)
                return x
        """)
    new, _ = preferred(src, 8, "GG102", "module_call", ctor_line=5)
    assert new.splitlines()[4] == "        self.drop = nn.Dropout2d(p=0.1)"


# -- GG201 / GG202 ---------------------------------------------------------------------------------------------

def test_carry_detached_at_the_end_of_the_iteration() -> None:
    src = d("""
        for t in range(3):
            hidden = cell(x[t], hidden)
            loss = head(hidden).sum()
            loss.backward(retain_graph=True)
            opt.step()
        """)
    new, fix = preferred(src, 2, "GG201", "carry")
    assert new.splitlines()[-1] == "    hidden = hidden.detach()"
    assert not fix.safe


def test_carry_as_last_statement_detaches_the_value() -> None:
    src = d("""
        for t in range(3):
            loss.backward(retain_graph=True)
            state = next_state
        """)
    new, _ = preferred(src, 3, "GG201", "carry")
    assert new.splitlines()[2] == "    state = next_state.detach()"


def test_carry_of_an_lstm_state_detaches_each_tensor() -> None:
    src = d("""
        lstm = nn.LSTM(3, 4)
        for t in range(3):
            out, new_state = lstm(x, state)
            out.sum().backward(retain_graph=True)
            state = new_state
        """)
    new, _ = preferred(src, 5, "GG201", "carry")
    assert new.splitlines()[4] == "    state = tuple(s.detach() for s in new_state)"


def test_step_moves_after_the_later_backward() -> None:
    src = d("""
        loss_a.backward(retain_graph=True)
        opt.step()  # update
        loss_b.backward()
        print("done")
        """)
    new, fix = preferred(src, 2, "GG202", "step", backward_line=3)
    assert new.splitlines() == ["loss_a.backward(retain_graph=True)", "loss_b.backward()",
                                "opt.step()  # update", 'print("done")']
    assert not fix.safe


def test_step_inside_a_block_moves_the_whole_block() -> None:
    src = d("""
        import torch
        loss_a.backward(retain_graph=True)
        with torch.no_grad():
            for p in params:
                p -= 0.1 * p.grad
        loss_b.backward()
        """)
    new, _ = preferred(src, 5, "GG202", "step", backward_line=6)
    assert new.splitlines()[2:] == ["loss_b.backward()", "with torch.no_grad():", "    for p in params:",
                                    "        p -= 0.1 * p.grad"]


# -- policy ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("code", ["GG101", "GG102", "GG103", "GG104"])
def test_detach_is_never_offered_for_saved_tensor_mutations(code: str) -> None:
    src = d("""
        import torch
        x = torch.randn(3, requires_grad=True)
        y = x.exp()
        y += 1
        y.sum().backward()
        """)
    _, fixes = fixes_for(src, 4, code, "augassign")
    assert all(".detach()" not in e.text for x in fixes for e in x.edits)


def test_escape_hatch_when_nothing_local_applies() -> None:
    src = d("""
        import torch
        x = torch.randn(3, requires_grad=True)
        y = x.exp()
        y[0].zero_()
        y.sum().backward()
        print(x.grad)
        """)
    f = make(src, 4, "GG101", "method")
    f.facts = {"saves": [{"op": "exp", "what": "its output", "line": 3}]}
    attach_fixes([f], src)
    hatch = next(x for x in f.fixes if x.kind == "allow-mutation")
    assert apply_edits(src, hatch.edits).splitlines()[2:7] == [
        "with torch.autograd.graph.allow_mutation_on_saved_tensors():",
        "    y = x.exp()", "    y[0].zero_()", "    y.sum().backward()", "print(x.grad)"]


def test_fix_text_applies_safe_only_by_default_and_skips_noqa() -> None:
    src = d("""
        import torch
        def f(x):
            x += x.exp()
            return x
        """)
    f = make(src, 3, "GG101", "augassign")
    attach_fixes([f], src)
    new, n = fix_text(src, [f])
    assert n == 0 and new == src  # the preferred fix is unsafe: x is the caller's tensor
    new, n = fix_text(src, [f], unsafe=True)
    assert n == 1 and "x = x + x.exp()" in new


def test_crlf_and_unicode_columns() -> None:
    src = "import torch\r\nname_ä = 'é'; y = torch.randn(3).exp()\r\ny += 1  # ü\r\n"
    f = make(src.replace("\r\n", "\n"), 3, "GG101", "augassign")
    attach_fixes([f], src)
    fix = next(x for x in f.fixes if x.preferred)
    assert apply_edits(src, fix.edits) == "import torch\r\nname_ä = 'é'; y = torch.randn(3).exp()\r\ny = y + 1  # ü\r\n"


def test_builders_never_raise_on_inconsistent_spans() -> None:
    src = "import torch\nx = torch.randn(3)\nx += 1\n"
    f = make(src, 3, "GG101", "augassign")
    f.mutation.extra["target_span"] = {"line": 99, "column": 1, "end_line": 99, "end_column": 2}
    object.__setattr__(f.mutation, "stmt", f.mutation.stmt.__class__(50, 1, 50, 3))
    attach_fixes([f], src)
    assert [x.kind for x in f.fixes] == ["noqa"]


def test_edit_positions_are_exclusive_and_one_based() -> None:
    assert apply_edits("abc\ndef\n", [Edit(2, 2, 2, 3, "X")]) == "abc\ndXf\n"


def test_privacy_ignores_aliases_made_after_the_mutation_but_not_in_a_loop() -> None:
    from gradguard.fixes.scope import is_private_tensor

    after = d("""
        import torch
        def f(x):
            conf = torch.sigmoid(x)
            conf.clamp_(0.1, 0.9)
            return x, conf
        """)
    assert is_private_tensor(after, after.splitlines(), 4, "conf")
    looped = d("""
        import torch
        def f(x, n):
            outs = []
            for _ in range(n):
                h = torch.sigmoid(x)
                h.clamp_(0.1, 0.9)
                outs.append(h)
            return outs
        """)
    # conservative: a container store inside the loop holding the mutation counts, even though a new h is
    # bound each iteration before it is modified
    assert not is_private_tensor(looped, looped.splitlines(), 6, "h")
    aliased = d("""
        import torch
        def f(x, n):
            h = torch.sigmoid(x)
            for _ in range(n):
                keep = h
                h.clamp_(0.1, 0.9)
            return keep
        """)
    assert not is_private_tensor(aliased, aliased.splitlines(), 6, "h")
    view = "import torch\ny = torch.randn(3).exp()\nv = y.view(3)\nv.mul_(2)\n"
    assert not is_private_tensor(view, view.splitlines(), 4, "v")


def test_carry_in_a_block_ending_with_return_detaches_where_the_state_is_read() -> None:
    src = d("""
        class StreamingRNN:
            def forward(self, x):
                self.hidden = self.cell(x, self.hidden)
                return self.head(self.hidden)
        """)
    new, fix = preferred(src, 3, "GG201", "carry")
    assert new.splitlines()[2] == "        self.hidden = self.cell(x, self.hidden.detach())"
    assert not fix.safe


def test_iterating_a_tensor_becomes_indexing() -> None:
    src = d("""
        def denormalize(t, means, stds):
            for channel, mean, std in zip(t[0], means, stds):
                channel.mul_(std).add_(mean)
            return t
        """)
    new, fix = preferred(src, 3, "GG302", "method", view_op="iterating a tensor (unbind)")
    assert new.splitlines()[1] == "    for channel, mean, std in zip((t[0][i] for i in range(len(t[0]))), means, stds):"
    assert fix.safe and fix.kind == "index-views"


@pytest.mark.parametrize(("header", "want"), [
    ("for i, row in enumerate(buf.unbind(0)):", "for i, row in enumerate((buf[j] for j in range(len(buf)))):"),
    ("for row in torch.unbind(buf):", "for row in (buf[i] for i in range(len(buf))):"),
    ("for row in buf.unbind(dim=1):", "for row in (buf.select(1, i) for i in range(buf.shape[1])):"),
])
def test_unbinding_becomes_indexing(header: str, want: str) -> None:
    src = d(f"""
        def fill(buf, pred):
            {header}
                row.copy_(pred)
        """)
    new, fix = preferred(src, 3, "GG302", "method", view_op="unbind()")
    assert new.splitlines()[1].strip() == want
    assert fix.safe and fix.kind == "index-views"


def test_unbinding_along_a_computed_dim_is_not_rewritten() -> None:
    src = d("""
        def fill(buf, pred, d):
            for row in buf.unbind(d):
                row.copy_(pred)
        """)
    _, fixes = fixes_for(src, 3, "GG302", "method", view_op="unbind()")
    assert not [x for x in fixes if x.kind == "index-views"]


def test_loop_escape_hatch_wraps_the_script_part_of_the_module() -> None:
    src = d("""
        import torch
        import torch.nn as nn

        def helper():
            return 1

        model = nn.Linear(2, 2)
        feats = torch.tanh(model(torch.randn(3, 2)))
        for epoch in range(3):
            loss = feats.sum()
            loss.backward(retain_graph=True)
            opt.step()
        print("done")
        """)
    new, fix = preferred(src, 12, "GG202", "step", backward_line=11)
    assert fix.kind == "allow-mutation" and not fix.safe
    assert new.splitlines()[6:14] == [
        "with torch.autograd.graph.allow_mutation_on_saved_tensors():",
        "    model = nn.Linear(2, 2)", "    feats = torch.tanh(model(torch.randn(3, 2)))",
        "    for epoch in range(3):", "        loss = feats.sum()", "        loss.backward(retain_graph=True)",
        "        opt.step()", 'print("done")']
