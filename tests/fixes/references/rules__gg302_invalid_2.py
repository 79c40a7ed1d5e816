# torch: clean (reference for GG302's third INVALID example, fixed by hand)
import torch
import torch.nn as nn

w = nn.Parameter(torch.randn(3, 4))
opt = torch.optim.SGD([w], lr=0.1)
for _ in range(2):
    opt.zero_grad()
    w.norm(dim=1).sum().backward()  # the norm of every row of the current weight
    opt.step()
