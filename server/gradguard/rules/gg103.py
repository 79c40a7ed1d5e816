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
build the new tensor out of place (`torch.cat`, `torch.where`, `index_put`).
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
""",)

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
