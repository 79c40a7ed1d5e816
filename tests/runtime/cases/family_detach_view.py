"""``detach_()`` on a view."""
import torch

x = torch.randn(4, requires_grad=True).clone()
view = x.narrow(0, 1, 2)
view.detach_()  # gg: culprit
