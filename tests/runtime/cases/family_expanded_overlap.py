"""An in-place op on an expanded tensor (several elements, one memory location)."""
import torch

w = torch.randn(1, 4, requires_grad=True)
scores = (w * 2).expand(3, -1)
scores.add_(torch.randn(3, 4))  # gg: culprit
