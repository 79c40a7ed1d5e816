# torch: clean (reference for GG305's INVALID example 0, fixed by hand)
import torch

w = torch.randn(4, 4, requires_grad=True)
prior = torch.randn(1, 4) @ w
scores = prior.expand(3, -1).clone()
scores.add_(torch.randn(3, 4) @ w)
scores.sum().backward()
