"""A view made under ``torch.inference_mode()`` whose base is then changed in place in normal mode: torch raises when
the view is used. (``view_as`` reaches a dispatch mode undecomposed under inference mode; the doctor must keep it a
view, or the error would vanish.)"""
import torch

s = torch.ones(1, 2, 3, requires_grad=True)
a = s.clone()
with torch.inference_mode():
    view_out = a.view_as(a)
a.mul_(2)  # gg: culprit
print(view_out.sum())
