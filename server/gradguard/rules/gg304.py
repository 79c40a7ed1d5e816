from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule, at


class ParameterUpdateOutsideNoGrad(Rule):
    code = "GG304"
    name = "parameter-update-outside-no-grad"
    summary = "A hand-written update loop over a module's parameters (`for p in model.parameters(): p -= ...`) " \
              "outside `torch.no_grad()`."
    why = """
Iterating `model.parameters()` (or `named_parameters()`, or an optimizer's `param_groups`) yields the
parameters themselves: leaf tensors that require grad. Autograd would have to record an in-place update of a
leaf as part of a graph that starts at that leaf, which it cannot do, so the first `p.add_(...)` or `p -= ...`
raises *a leaf Variable that requires grad is being used in an in-place operation* at the update itself.
Optimizers do the same update under `torch.no_grad()` (`optimizer.step()` is decorated with it).
"""
    fix = """
Run the whole update loop under `with torch.no_grad():` (what `torch.optim.SGD` does), or use an optimizer.
Writing to `p.data` also works but hides the update from autograd's version checks.
"""
    INVALID = ("""
import torch
import torch.nn as nn

model = nn.Linear(3, 1)
loss = model(torch.randn(8, 3)).pow(2).mean()
loss.backward()
for p in model.parameters():
    p.add_(p.grad, alpha=-0.1)
""", """
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(8, 3)).sum().backward()
for group in opt.param_groups:
    for p in group["params"]:
        p -= group["lr"] * p.grad
""")
    VALID = ("""
import torch
import torch.nn as nn

model = nn.Linear(3, 1)
loss = model(torch.randn(8, 3)).pow(2).mean()
loss.backward()
with torch.no_grad():
    for p in model.parameters():
        p.add_(p.grad, alpha=-0.1)
""", """
import torch
import torch.nn as nn

model = nn.Linear(3, 1)
model(torch.randn(8, 3)).pow(2).mean().backward()
for name, p in model.named_parameters():
    p.grad.mul_(0.5)
""")

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "leaf" and h.get("param_loop") is not None

    @classmethod
    def message(cls, h: Hazard) -> str:
        loop = h.get("param_loop")
        where = f" ({at(loop, h)})" if loop is not None else ""
        origin = h.get("leaf_origin")
        what = f"; {origin}" if origin else ""
        return (f"{h.op} updates `{h.target}` in place outside torch.no_grad(), but the loop{where} yields "
                f"parameters: leaf tensors that require grad{what}")
