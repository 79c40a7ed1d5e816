from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule, at


class OutArgOnSaved(Rule):
    code = "GG104"
    name = "out-argument-on-saved-tensor"
    summary = "`out=` writes into a tensor that an op saved for backward."
    why = """
`torch.op(..., out=t)` overwrites `t` in place and bumps its version. If an earlier op saved `t` (typically
a mask reused across loop iterations: `x = layer(x) * mask`), backward finds it changed.
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
""",)
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
""",)

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "saved" and h.form == "out"

    @classmethod
    def message(cls, h: Hazard) -> str:
        r = h.saves[0] if h.saves else None
        saved = f"{r.op} ({at(r.site, h)}) saved it for backward" if r else "it was saved for backward"
        return f"{h.op}(out={h.target}) overwrites `{h.target}`, but {saved}"
