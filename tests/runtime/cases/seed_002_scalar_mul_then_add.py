"""Seed 002: the article's example, ``y = x * 2; y += 1``. It does NOT fail on current torch: multiplying by a
Python scalar saves nothing that ``y += 1`` could invalidate. The doctor must say "clean"."""
import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x * 2
y += 1
z = torch.sum(y)
z.backward()
print(x.grad)
