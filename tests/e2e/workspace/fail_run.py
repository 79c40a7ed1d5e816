"""Fails in backward() at run time: the in-place multiply happens in another module (scaling.py)."""

import torch
from scaling import scale_

w = torch.randn(5, requires_grad=True)
y = w.sigmoid()
scale_(y, 2)
y.sum().backward()
print("unreachable")
