"""A view made under ``no_grad`` and changed in place with grad mode on (torch raises at the in-place call)."""
import torch

inp = torch.rand(2, requires_grad=True).clone()
with torch.set_grad_enabled(False):
    out = inp.unbind()
out[0].add_(1)  # gg: culprit
