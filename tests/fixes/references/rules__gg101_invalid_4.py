# torch: clean (reference for GG101's INVALID example 4, fixed by hand)
import torch

w = torch.randn(3, requires_grad=True)
with torch.autograd.graph.allow_mutation_on_saved_tensors():
    h = w * 1.0
    y = h.exp()
    h.add_(1)
    y.sum().backward()
