"""``nn.LeakyReLU(negative_slope < 0, inplace=True)``: the culprit is where the module is built (and called)."""
import torch
import torch.nn as nn

act = nn.LeakyReLU(-0.1, inplace=True)  # gg: culprit
x = torch.randn(4, requires_grad=True)
y = act(x * 2)
y.sum().backward()
