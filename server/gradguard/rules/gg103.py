from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule, at


class SetitemOnSaved(Rule):
    code = "GG103"
    name = "setitem-on-saved-tensor"
    summary = "Item or slice assignment (`x[i] = v`) into a tensor that an op saved for backward, or a view of one."
    why = """
`x[i] = v` is an in-place `copy_`/`index_put_` on `x` (or on the view `x[i]`, which shares `x`'s version
counter). If any op saved `x` (or a view of it) for backward, the version check fails in `backward()`. A
common case is editing an input between two forward passes (`context[:, -3:] = extra` after the first
`bert(context)`), or aliasing an input (`out = x`) and then writing into `out`.
"""
    fix = """
Clone before writing (`x = x.clone()` on the line before, or `out = x.clone()` where the alias is made), or
build the new tensor out of place (`torch.cat`, `torch.where`, `index_put`). A write that no backward can reach
is not reported: gradguard follows where the saving op's result goes in the function (a training step's accuracy
thresholds `torch.sigmoid(out)` in place while the loss is taken from `out`).
"""
    INVALID = ("""
import torch

a = torch.tensor([1., 2.], requires_grad=True).clone()
a[0] = a[1].sin()  # sin saved a[1], a view of a
a.sum().backward()
""",)
    VALID = ("""
import torch

a = torch.tensor([1., 2.], requires_grad=True).clone()
a[0] = a[1] * 2  # mul by a constant saves nothing
a.sum().backward()
""", """
import torch
import torch.nn.functional as F

out = torch.randn(8, requires_grad=True)
y = (torch.rand(8) > 0.5).float()
loss = F.binary_cross_entropy_with_logits(out, y)
pred = torch.sigmoid(out)  # sigmoid saves pred...
pred[pred > 0.5] = 1  # ...but the loss never goes through sigmoid, and pred only feeds a comparison
acc = (pred == y).float().mean().item()
loss.backward()
""")

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "saved" and h.form == "setitem"

    @classmethod
    def message(cls, h: Hazard) -> str:
        r = h.saves[0] if h.saves else None
        via = h.get("alias_of")
        base = f"`{h.target}`" + (f" (an alias of `{via}`)" if via else "")
        op = h.op if h.op.endswith("item assignment") else "item assignment"
        if r is None:
            return f"{op} into {base} modifies a tensor saved for backward"
        return f"{op} into {base} modifies a tensor that {r.op} ({at(r.site, h)}) saved for backward"
