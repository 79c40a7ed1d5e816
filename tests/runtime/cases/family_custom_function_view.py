"""A custom Function returns a view of its input; changing that view in place is forbidden."""
import torch


class MyFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp):
        return inp.view_as(inp)

    @staticmethod
    def backward(ctx, grad):
        return grad


a = torch.rand(1, 2)
b = torch.rand(1, requires_grad=True)
view_a = MyFn.apply(a)
view_a.copy_(b)  # gg: culprit
