"""A custom Function modifies its input in place (``ctx.mark_dirty``) and is given a leaf that requires grad."""
import torch


class AddOne(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


w = torch.randn(3, requires_grad=True)
out = AddOne.apply(w)  # gg: culprit
