# torch: clean (reference for GG305's INVALID example 2, fixed by hand)
import torch

w = torch.randn(3, 3, requires_grad=True)
history = torch.zeros(4, 3)
history[:-1] = history[1:].clone()
history[-1] = torch.randn(3)
(history @ w).sum().backward()
