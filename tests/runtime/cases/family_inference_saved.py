"""A tensor made under ``torch.inference_mode()`` used where autograd must save it."""
import torch

with torch.inference_mode():
    scale = torch.full((3,), 2.0)
w = torch.randn(3, requires_grad=True)
y = w * scale  # gg: culprit
