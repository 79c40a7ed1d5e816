# torch: clean (reference for tests/fixtures/gg302/pos_mark_dirty_view_of_own_buffer.py, fixed by hand)
import torch

torch.manual_seed(0)


class PadWrite(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        buf = x.new_zeros(x.shape[0] + 2)
        buf[: x.shape[0]] = x  # a buffer the forward allocated: nothing to mark dirty
        return buf[: x.shape[0]]

    @staticmethod
    def backward(ctx, grad):
        return grad


w = torch.randn(6, requires_grad=True)
out = PadWrite.apply(w * 1.5)
out.sum().backward()
