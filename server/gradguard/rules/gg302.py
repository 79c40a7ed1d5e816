from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule


class InplaceOnSpecialView(Rule):
    code = "GG302"
    name = "inplace-on-multi-output-view"
    summary = ("In-place op on a view returned by a multi-output view op (`unbind`, `split`, `chunk`, iterating "
               "a tensor) or on a view made under `no_grad`.")
    why = """
`q, k, v = x.chunk(3)`, `x.unbind(0)`, `x.split(n)` and `for row in x` return views produced by one autograd
node with several outputs; autograd cannot rebase such a node when one view changes in place, so torch
raises *Output 0 of UnbindBackward0 is a view and is being modified inplace* at the call. Likewise a view
created under `no_grad` of a tensor that requires grad cannot be modified in place once grad mode is back on.
"""
    fix = """
Rewrite out of place (`q = q * scale`, `h = h.squeeze(0)`), or `.clone()` the view before modifying it.
"""
    INVALID = ("""
import torch

x = torch.randn(4, 6, requires_grad=True) * 1.0
q, k, v = x.chunk(3, dim=-1)
q *= 0.5
(q + k + v).sum().backward()
""",)
    VALID = ("""
import torch

x = torch.randn(4, 6, requires_grad=True) * 1.0
q, k, v = x.chunk(3, dim=-1)
q = q * 0.5
(q + k + v).sum().backward()
""",)

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind in ("view_multi", "view_nograd")

    @classmethod
    def message(cls, h: Hazard) -> str:
        src = h.get("view_op") or "a multi-output view op"
        if h.kind == "view_nograd":
            return f"{h.op} modifies `{h.target}` in place, but it is a view made under no_grad ({src}) of a tensor that requires grad"
        return f"{h.op} modifies `{h.target}` in place, but it is one of several views returned by {src}"
