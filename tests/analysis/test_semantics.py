"""Analyzer semantics that go beyond the rule fixtures, each claim checked by running the snippet with torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from gradguard.api import check_source

# a layer table looked up by name, as timm's get_act_layer does (two cases below share it)
_GET_ACT = """
        import torch
        import torch.nn as nn
        ACTS = dict(relu=nn.ReLU, gelu=nn.GELU, tanh=nn.Tanh, sigmoid=nn.Sigmoid, elu=nn.ELU, selu=nn.SELU,
                    celu=nn.CELU, silu=nn.SiLU, relu6=nn.ReLU6)
        def get_act(name):
            if not name:
                return None
            if not isinstance(name, str):
                return name
            return ACTS[name.strip().lower()]
"""

# (id, source, expected codes (sorted), torch outcome)
CASES = [
    ("dropout_p0_is_a_noop", """
        import torch
        import torch.nn.functional as F
        x = torch.randn(4, requires_grad=True)
        h = torch.sigmoid(x)
        h = F.dropout(h, p=0.0, training=True, inplace=True)
        h.sum().backward()
    """, [], "clean"),
    ("dropout_p_half_breaks", """
        import torch
        import torch.nn.functional as F
        torch.manual_seed(0)
        x = torch.randn(64, requires_grad=True)
        h = torch.sigmoid(x)
        h = F.dropout(h, p=0.5, training=True, inplace=True)
        h.sum().backward()
    """, ["GG102"], "error"),
    ("max_with_dim_saves_only_indices", """
        import torch
        x = torch.randn(3, 4, requires_grad=True) * 1.0
        m = torch.max(x, dim=-1, keepdim=True)[0]
        x.masked_fill_(x < 0, 0.0)
        (m.sum() + x.sum()).backward()
    """, [], "clean"),
    ("full_max_saves_its_input", """
        import torch
        x = torch.randn(3, 4, requires_grad=True) * 1.0
        m = x.max()
        x.masked_fill_(x < 0, 0.0)
        (m + x.sum()).backward()
    """, ["GG101"], "error"),
    ("topk_values_are_not_saved", """
        import torch
        x = torch.randn(3, 5, requires_grad=True)
        v, i = torch.topk(x, 2, dim=-1)
        v /= v.sum(dim=-1, keepdim=True)
        v.sum().backward()
    """, [], "clean"),
    ("pow_by_number_saves_base_only", """
        import torch
        x = torch.randn(3, requires_grad=True)
        y = x.exp()
        z = y ** 2
        y2 = z * 1.0
        z += 1
        (z.sum() + y2.sum()).backward()
    """, [], "clean"),
    ("comparison_only_use_builds_no_graph", """
        import torch
        x = torch.randn(3, 4, requires_grad=True)
        out = torch.sigmoid(x).clone()
        out[out.abs() < 0.5] = 0.0
        out.sum().backward()
    """, [], "clean"),
    ("branch_rebinding_is_path_aware", """
        import torch
        import random
        x = torch.randn(3, requires_grad=True)
        y = x * 1.0
        if random.random() > 2:
            z = torch.exp(y)
            y = y + 1
        else:
            z = y * 2
        y.add_(1)
        (y.sum() + z.sum()).backward()
    """, [], "clean"),
    ("ifexp_in_helper_keeps_hazard_on_its_path", """
        import torch
        def act(t, use_sigmoid):
            return torch.sigmoid(t) if use_sigmoid else t * 2
        x = torch.randn(3, requires_grad=True)
        y = act(x, True)
        y.mul_(2)
        y.sum().backward()
    """, ["GG101"], "error"),
    ("eval_mode_dropout_is_identity", """
        import torch
        import torch.nn as nn
        net = nn.Sequential(nn.Linear(3, 3), nn.Sigmoid(), nn.Dropout(0.5, inplace=True))
        net.eval()
        net(torch.randn(2, 3)).sum().backward()
    """, [], "clean"),
    ("requires_grad_toggle_around_copy", """
        import torch
        import torch.nn as nn
        layer = nn.Linear(3, 3)
        layer.weight.requires_grad = False
        layer.weight.copy_(torch.zeros(3, 3))
        layer.weight.requires_grad = True
        layer(torch.randn(2, 3)).sum().backward()
    """, [], "clean"),
    ("isinstance_selects_the_branch", """
        import torch
        import torch.nn as nn
        def fuse(conv, bn):
            if isinstance(bn, nn.BatchNorm2d):
                return conv.weight * 2
            return conv.weight
        conv, bn = nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2)
        k = fuse(conv, bn)
        k += 1
        k.sum().backward()
    """, [], "clean"),
    # `**kwargs` whose keys the call shows: a dict with exactly those entries
    ("kwargs_pop_takes_the_default", """
        import torch
        def head(x, **kw):
            act = kw.pop("act", torch.tanh)
            y = act(x)
            y.mul_(2)
            return y
        x = torch.randn(3, requires_grad=True)
        head(x, scale=1).sum().backward()
    """, ["GG101"], "error"),
    ("kwargs_pop_takes_the_passed_value", """
        import torch
        import torch.nn.functional as F
        def head(x, **kw):
            act = kw.pop("act", torch.tanh)
            y = act(x)
            y.mul_(2)
            return y
        x = torch.randn(3, requires_grad=True)
        head(x, act=F.gelu).sum().backward()
    """, [], "clean"),
    ("kwargs_entry_set_when_missing", """
        import torch
        import torch.nn as nn
        def build(**kw):
            if "inplace" not in kw:
                kw["inplace"] = True
            return nn.ReLU(**kw)
        x = torch.randn(3, requires_grad=True)
        h = torch.sigmoid(x)
        build()(h).sum().backward()
    """, ["GG102"], "error"),
    ("kwargs_handed_to_a_helper_that_changes_them", """
        import torch
        import torch.nn as nn
        def out_of_place(kw):
            kw["inplace"] = False
        def build(**kw):
            out_of_place(kw)
            return nn.ReLU(**kw)
        x = torch.randn(3, requires_grad=True)
        h = torch.sigmoid(x)
        build(inplace=True)(h).sum().backward()
    """, [], "clean"),
    ("module_attribute_is_not_none_is_decided", """
        import torch
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(4)

            def forward(self, x):
                h = torch.sigmoid(x)
                if self.norm is not None:
                    h = self.norm(h)
                h.mul_(2)
                return h

        Block()(torch.randn(2, 4, requires_grad=True)).sum().backward()
    """, [], "clean"),
    ("module_attribute_that_may_be_none_keeps_both_paths", """
        import torch
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, use_norm=True):
                super().__init__()
                self.norm = nn.LayerNorm(4) if use_norm else None

            def forward(self, x):
                h = torch.sigmoid(x)
                if self.norm is not None:
                    h = self.norm(h)
                h.mul_(2)
                return h

        Block(use_norm=False)(torch.randn(2, 4, requires_grad=True)).sum().backward()
    """, ["GG101"], "error"),
    # Picking layers by name: str methods on a known string, isinstance on a constant or a class, a class's
    # __name__, a class's truth value (timm's get_act_layer / get_norm_act_layer do all of these)
    ("act_table_lookup_by_lowered_name", _GET_ACT + """
        act = get_act(" ReLU ")(inplace=True)
        x = torch.randn(4, requires_grad=True)
        act(torch.sigmoid(x)).sum().backward()
    """, ["GG102"], "error"),
    ("act_class_passes_through_the_name_lookup", _GET_ACT + """
        act = get_act(nn.Tanh)()
        x = torch.randn(4, requires_grad=True)
        act(torch.sigmoid(x)).sum().backward()
    """, [], "clean"),
    ("norm_picked_by_class_name", """
        import torch
        import torch.nn as nn
        class BNReLU(nn.BatchNorm1d):
            def forward(self, x):
                return torch.relu_(super().forward(x))
        NORM_ACT = dict(batchnorm1d=BNReLU, layernorm=nn.LayerNorm)
        def norm_act(norm_layer):
            layer = NORM_ACT[norm_layer.__name__.lower()] if norm_layer else nn.Identity
            return layer
        x = torch.randn(3, 4, requires_grad=True)
        h = torch.sigmoid(x)
        y = norm_act(nn.BatchNorm1d)(4)(h * 1)
        y += 1
        y.sum().backward()
    """, ["GG101"], "error"),
    ("star_of_sequences_empty_on_every_path", """
        import torch
        import torch.nn as nn
        def bump(b, *scales):
            b.add_(1)
            return b * 2
        class Bump(nn.Module):
            def forward(self, x, flag=False):
                h = torch.sigmoid(x)
                if flag:
                    extra = ()
                else:
                    extra = []
                return bump(h, *extra)  # `*extra` gives no argument whichever arm ran
        x = torch.randn(3, requires_grad=True)
        Bump()(x).sum().backward()
    """, ["GG101"], "error"),
]


@pytest.mark.parametrize("name,src,codes,outcome", CASES, ids=[c[0] for c in CASES])
def test_analyzer_matches_torch(name: str, src: str, codes: list[str], outcome: str) -> None:
    src = textwrap.dedent(src).lstrip()
    got = sorted(f.code for f in check_source(src, f"{name}.py", fixes=False))
    assert got == codes, f"{name}: analyzer says {got}, expected {codes}"


@pytest.mark.torch
@pytest.mark.parametrize("name,src,codes,outcome", CASES, ids=[c[0] for c in CASES])
def test_label_is_what_torch_does(name: str, src: str, codes: list[str], outcome: str) -> None:
    src = textwrap.dedent(src).lstrip()
    r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    if outcome == "clean":
        assert r.returncode == 0, r.stderr[-2000:]
    else:
        assert r.returncode != 0 and ("inplace" in r.stderr or "in-place" in r.stderr), r.stderr[-2000:]
