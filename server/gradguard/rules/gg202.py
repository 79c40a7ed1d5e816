from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule, at


class StepBetweenBackward(Rule):
    code = "GG202"
    name = "optimizer-step-before-backward"
    summary = ("`optimizer.step()` updates parameters in place between a forward pass and a later backward "
               "through the same graph.")
    why = """
Layers save their weights for backward (`Linear` keeps `weight` to compute the input's gradient).
`optimizer.step()` updates those weights in place. A second `backward()` through a graph built before the
step (multi-loss training with `retain_graph=True`, GAN/VAE/actor-critic updates that reuse an earlier
forward, a tensor computed once in `__init__`) finds the saved weights changed.

A step right after `zero_grad()` (no backward in between) updates nothing: the gradients are None and torch's
optimizers skip such parameters (with `zero_grad(set_to_none=False)` they are zeros, and the step writes). A
fused optimizer (`fused=True`) writes without moving the version counters: torch raises nothing, and the later
backward silently reads the new weights.
"""
    fix = """
Call every `backward()` that needs the old graph before the `step()` (compute all losses first, step last), or
cut the stale part out of the later loss with `.detach()` when no gradient should flow through it.
"""
    INVALID = ("""
import torch
import torch.nn as nn

value_model = nn.Sequential(nn.Linear(4, 8), nn.ELU(), nn.Linear(8, 1))
opt = torch.optim.Adam(value_model.parameters(), lr=1e-3)
values = value_model(torch.randn(6, 4))
value_loss = values.pow(2).mean()
opt.zero_grad()
value_loss.backward(retain_graph=True)
opt.step()
action_loss = -values.mean()
action_loss.backward()
""",)
    VALID = ("""
import torch
import torch.nn as nn

value_model = nn.Sequential(nn.Linear(4, 8), nn.ELU(), nn.Linear(8, 1))
opt = torch.optim.Adam(value_model.parameters(), lr=1e-3)
values = value_model(torch.randn(6, 4))
value_loss = values.pow(2).mean()
opt.zero_grad()
value_loss.backward(retain_graph=True)
action_loss = -values.mean()
action_loss.backward()
opt.step()
""",)

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "step"

    @classmethod
    def message(cls, h: Hazard) -> str:
        inner = next((s for s, m in h.related if m == "the backward runs here"), None)
        where = at(inner, h) if inner is not None else f"line {h.get('backward_line')}"
        step = next((s for s, m in h.related if m == f"{h.op} runs here"), None)
        op = f"{h.op} ({at(step, h)})" if step is not None and step.path != h.site.path else h.op
        r = h.saves[0] if h.saves else None
        saved = f"; {r.op} ({at(r.site, h)}) saved them" if r else ""
        return (f"{op} updates parameters in place, but the backward at {where} goes through a graph built "
                f"before it{saved}")
