"""A foreach in-place op on a tensor that a later op saved: torch's CPU kernel is a loop of ``mul_`` calls and it is
those that bump the version counters. It fails plainly, so it must fail under the doctor, naming the line."""
import torch

a = torch.randn(4, requires_grad=True)
b = a * 1
c = torch.randn(4, requires_grad=True) * 1
loss_part = (b * b).sum()  # gg: saved
torch._foreach_mul_([b, c], 2.0)  # gg: culprit
loss_part.backward()
