from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule, at


class SavedTensorModifiedInBackward(Rule):
    code = "GG105"
    name = "saved-tensor-modified-in-backward"
    summary = "A custom `autograd.Function.backward` writes in place into a tensor from `ctx.saved_tensors`."
    why = """
`ctx.saved_tensors` gives back the very tensors `save_for_backward` kept (often the caller's own input), not
copies. Writing into one in `backward` bumps its version counter. The graph still holds it: a second backward
through a graph kept with `retain_graph=True` unpacks it again and raises *one of the variables needed for
gradient computation has been modified by an inplace operation ... is at version 1; expected version 0*, and so
does any op created before the Function that saved the same tensor (its backward runs after the Function's).
The caller's tensor silently changes too. A function of the same module that `backward` hands the saved
tensors to (a fused kernel's stand-in computing the gradients into their storage) counts as `backward` itself.
"""
    fix = """
Compute out of place in `backward`: `x = x.mul(2)` instead of `x.mul_(2)` (or `x = x.clone()` once before the
in-place ops). The saved tensor keeps its value.
"""
    INVALID = ("""
import torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        x.mul_(2)
        return grad * x


x = torch.randn(3, requires_grad=True)
y = Square.apply(x).sum()
y.backward(retain_graph=True)
y.backward()
""",)
    VALID = ("""
import torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        x = x.mul(2)
        return grad * x


x = torch.randn(3, requires_grad=True)
y = Square.apply(x).sum()
y.backward(retain_graph=True)
y.backward()
""",)

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "backward_write"

    @classmethod
    def message(cls, h: Hazard) -> str:
        fn = h.saves[-1].op if h.saves else "the Function"
        others = [r for r in h.saves[:-1]]
        if others:
            r = others[0]
            why = f"{r.op} ({at(r.site, h)}) saved it too and runs its backward later"
        else:
            why = "the graph is kept (retain_graph) and its next backward unpacks it again"
        return (f"{h.op} modifies `{h.target}` in place in backward, but it is a tensor {fn} saved with "
                f"ctx.save_for_backward: {why}")
