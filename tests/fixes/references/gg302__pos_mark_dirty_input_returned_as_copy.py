# torch: clean (reference for tests/fixtures/gg302/pos_mark_dirty_input_returned_as_copy.py, fixed by hand)
import torch

torch.manual_seed(0)


class ClampInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        x.clamp_(lo, hi)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x  # the dirty input itself

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x.abs() < 1).to(grad.dtype), None, None


w = torch.randn(8, requires_grad=True)
h = w * 2
y = ClampInPlace.apply(h, -1.0, 1.0)
y.sum().backward()
