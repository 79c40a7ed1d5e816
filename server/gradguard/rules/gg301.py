from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule


class InplaceOnLeaf(Rule):
    code = "GG301"
    name = "inplace-on-leaf"
    summary = "In-place op on a leaf tensor that requires grad (a parameter, `requires_grad=True`) outside `torch.no_grad()`."
    why = """
A leaf that requires grad is where gradients accumulate; autograd cannot record an in-place change to it, so
torch raises *a leaf Variable that requires grad is being used in an in-place operation* right at the call
(for a view of a leaf: *a view of a leaf Variable that requires grad is being used in an in-place operation*).
A cast that has nothing to do returns the leaf itself, not a copy: `.to(device)` on the device the tensor is
already on (the CPU, for `torch.tensor(0.0, requires_grad=True)` made without a device), `.float()` of a float32
tensor. `requires_grad_()` makes a leaf of whatever it is called on, a batch from a data loader included (as a
gradient penalty does with the real images): an augmentation that then writes into the batch raises.
"""
    fix = """
Update parameters under `with torch.no_grad():` (what optimizers do), or compute a new tensor out of place
(`w = self.weight.clamp(min=0)` and use `w`).
"""
    INVALID = ("""
import torch

c = torch.randn(4, 3, requires_grad=True)
c += 1
(c * c).sum().backward()
""",)
    VALID = ("""
import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
with torch.no_grad():
    x += 1
(x * x).sum().backward()
""",)

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "leaf"

    @classmethod
    def message(cls, h: Hazard) -> str:
        origin = h.get("leaf_origin")
        where = f" ({origin})" if origin else ""
        view = "a view of " if h.get("is_view") else ""
        same = h.get("same_tensor")
        how = f"; {same}" if same else ""
        return f"{h.op} modifies `{h.target}` in place, but it is {view}a leaf tensor that requires grad{where}{how}"
