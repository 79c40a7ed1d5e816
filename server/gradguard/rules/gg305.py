from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule


class InplaceOnExpanded(Rule):
    code = "GG305"
    name = "inplace-on-expanded-tensor"
    summary = ("In-place op on a tensor made by `expand()`, `expand_as()` or `broadcast_to()` (or a transpose or "
               "unsqueeze of one): several of its elements are one memory location. Or an in-place op that reads "
               "another slice of the tensor it writes, overlapping it (`x[1:] += x[:-1]`).")
    why = """
`x.expand(n, -1)` repeats a dimension of size 1 without copying: the new dimension has stride 0, so all its
elements are the same memory. An in-place op that writes the whole tensor (`x.add_(y)`, `x *= 2`,
`x.masked_fill_(m, 0)`, `x.scatter_(...)`, `F.relu(x, inplace=True)`, an `nn.SiLU(inplace=True)` layer, `out=x`)
would write each of those elements several times with different values, so torch refuses it at the call, in
any grad mode: *unsupported operation: more than one element of the written-to tensor refers to a single memory
location. Please clone() the tensor before performing the operation.* Transposing, permuting, squeezing or
unsqueezing such a tensor keeps the broadcast dimension, and the same write fails. (`x.expand(-1, -1)` broadcasts
nothing; `fill_` and `zero_` write one value into every element, which torch allows, and `masked_fill_` and
`index_fill_` only warn that this is deprecated.)

Item assignment: `x[:] = v` writes every element and fails the same way. `x[idx] = v` or `x[mask] = v`, with an
index tensor (advanced indexing, `index_put_`), only warns in forward, but when `x` requires grad its backward
raises the same error. An item assignment that selects one row, `x[0] = v`, may hold no repeated element, and is
not reported.

Overlapping slices: an elementwise in-place op (`add_`, `mul_`, `copy_`, `clamp_`, `+=`, item assignment...) that
reads another slice of the very tensor it writes, where the two overlap without being the same memory
(`x[1:] += x[:-1]`, `buf[:-1] = buf[1:]`, `h[:-1].add_(h[1:])`), is refused at the call too, in any grad mode:
*unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory
location*. The result would depend on the order in which elements are visited. Only slices of the first
dimension with constant bounds are judged (slices of a later dimension are strided, and torch does not check
those); disjoint slices (`x[:2]` and `x[2:]`) and the same slice (`x[1:].add_(x[1:])`) are fine.
"""
    fix = """
Clone the expanded tensor where it is made (`x = row.expand(n, -1).clone()`), so each element has its own memory
(the same values, differentiable), or rewrite the op out of place (`x = x + y`). For overlapping slices, clone
what is read (`x[1:] += x[:-1].clone()`): every element is then computed from the values before the write, as
the line reads.
"""
    INVALID = ("""
import torch

w = torch.randn(4, 4, requires_grad=True)
prior = torch.randn(1, 4) @ w
scores = prior.expand(3, -1)
scores.add_(torch.randn(3, 4) @ w)
scores.sum().backward()
""", """
import torch
import torch.nn.functional as F

w = torch.randn(6, 6, requires_grad=True)
row = torch.randn(1, 6) @ w
x = row.expand(6, 6)
y = F.silu(x, inplace=True)
y.sum().backward()
""", """
import torch

w = torch.randn(3, 3, requires_grad=True)
history = torch.zeros(4, 3)
history[:-1] = history[1:]
history[-1] = torch.randn(3)
(history @ w).sum().backward()
""")
    VALID = ("""
import torch

bias = torch.zeros(1, 4)
scores = bias.expand(3, -1).clone()
scores.add_(torch.randn(3, 4))
""", """
import torch

bias = torch.zeros(1, 4)
scores = bias.expand(3, -1) + torch.randn(3, 4)  # out of place: a new tensor
scores.mul_(2)
""", """
import torch

x = torch.randn(3, 4)
same = x.expand(-1, -1)  # nothing broadcast: the tensor itself, as a view
same.mul_(2)
""", """
import torch

history = torch.zeros(4, 3)
history[:-1] = history[1:].clone()  # read before the write
history[:2] += history[2:]  # disjoint halves
""")

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind in ("overlap", "overlap_read")

    @classmethod
    def message(cls, h: Hazard) -> str:
        if h.kind == "overlap_read":
            op = h.op if " " in h.op else f"`{h.op}`"
            return (f"{op} writes `{h.get('written_text')}` in place while reading `{h.get('read_text')}`, another "
                    f"slice of the same tensor that overlaps it: torch refuses the op (the result would depend on the "
                    f"order the elements are written)")
        es = h.get("expanded_site")
        where = f" (line {es.line})" if es is not None and getattr(es, "path", "") == h.site.path else ""
        if h.get("overlap_index") == "advanced":
            return (f"{h.op} with an index tensor writes in place into `{h.target}`, an expanded tensor{where} that "
                    f"requires grad: several of its elements are one memory location, and backward refuses the write")
        return (f"{h.op} writes in place into `{h.target}`, an expanded tensor{where}: several of its elements are "
                f"one memory location, and torch refuses the write")
