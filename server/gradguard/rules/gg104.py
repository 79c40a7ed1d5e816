from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule, at


class OutArgOnSaved(Rule):
    code = "GG104"
    name = "out-argument-on-saved-tensor"
    summary = ("`out=` writes into a tensor that an op saved for backward, or is given inputs that require grad "
               "(out= variants have no derivative).")
    why = """
`torch.op(..., out=t)` overwrites `t` in place and bumps its version. If an earlier op saved `t` (typically
a mask reused across loop iterations: `x = layer(x) * mask`), backward finds it changed.

The `out=` variants of ops are not differentiable at all: `torch.mul(a, b, out=x)` with `a` requiring grad
raises *mul(): functions with out=... arguments don't support automatic differentiation, but one of the
arguments requires grad* at the call, whatever `x` is.
"""
    fix = """
Drop `out=` and assign the result: `torch.bernoulli(p, out=mask)` becomes `mask = torch.bernoulli(p)`.
"""
    INVALID = ("""
import torch

layer = torch.nn.Linear(4, 4)
mask = torch.empty(2, 4)
x = torch.randn(2, 4)
outs = []
for step in range(2):
    torch.bernoulli(torch.full((2, 4), 0.5), out=mask)
    x = layer(x) * mask
    outs.append(x)
torch.stack(outs).sum().backward()
""", """
import torch

a = torch.randn(2, 2, requires_grad=True)
b = torch.randn(2, 2, requires_grad=True)
x = torch.zeros_like(a)
torch.mul(a, b, out=x)
x.sum().backward()
""")
    VALID = ("""
import torch

layer = torch.nn.Linear(4, 4)
x = torch.randn(2, 4)
outs = []
for step in range(2):
    mask = torch.bernoulli(torch.full((2, 4), 0.5))
    x = layer(x) * mask
    outs.append(x)
torch.stack(outs).sum().backward()
""", """
import torch

a = torch.randn(2, 2, requires_grad=True)
b = torch.randn(2, 2, requires_grad=True)
x = torch.mul(a, b)
x.sum().backward()
""")

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return (h.kind == "saved" and h.form == "out") or h.kind == "out_rg"

    @classmethod
    def message(cls, h: Hazard) -> str:
        if h.kind == "out_rg":
            return (f"{h.op}(out={h.target}) cannot be differentiated: `{h.get('input')}` requires grad, and "
                    f"ops with out= have no backward")
        r = h.saves[0] if h.saves else None
        saved = f"{r.op} ({at(r.site, h)}) saved it for backward" if r else "it was saved for backward"
        return f"{h.op}(out={h.target}) overwrites `{h.target}`, but {saved}"
