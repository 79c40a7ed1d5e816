"""A custom Function marks a view input dirty and returns it twice."""
import torch


class DoubleInplace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x, x

    @staticmethod
    def backward(ctx, grad1, grad2):
        return grad1 * 2 + grad2 * 2


x = torch.randn(5, 5, dtype=torch.double, requires_grad=True)
a, b = DoubleInplace.apply(x.clone()[0])  # gg: culprit
