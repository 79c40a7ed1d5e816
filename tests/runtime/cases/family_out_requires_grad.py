"""``out=`` with inputs that require grad."""
import torch

a = torch.randn(2, 2, requires_grad=True)
b = torch.randn(2, 2, requires_grad=True)
x = torch.zeros_like(a)
torch.mul(a, b, out=x)  # gg: culprit
