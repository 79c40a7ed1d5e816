"""A view made under ``no_grad``; its base is then changed in place with grad mode on, and the view is used."""
import torch

s = torch.ones(2, 3, requires_grad=True)
a = s.clone()
with torch.no_grad():
    row = a[0]
a.mul_(2)  # gg: culprit
print(row.grad_fn)
