"""An in-place op on a view saves its result (the view); then the base is written: the saving node hides inside
a CopySlices node, so the doctor finds the tensor from the write log."""
import torch

a = torch.rand(2, 3, requires_grad=True)
b = a.clone()
c = b[:]
c.exp_()  # gg: saved
b *= 2  # gg: culprit
c.sum().backward()
