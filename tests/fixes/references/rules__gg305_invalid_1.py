# torch: clean (reference for GG305's INVALID example 1, fixed by hand)
import torch
import torch.nn.functional as F

w = torch.randn(6, 6, requires_grad=True)
row = torch.randn(1, 6) @ w
x = row.expand(6, 6).clone()
y = F.silu(x, inplace=True)
y.sum().backward()
