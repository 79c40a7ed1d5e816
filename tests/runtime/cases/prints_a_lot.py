"""Prints a lot, on both streams, while training a little: everything must come through, in order per stream."""
import sys

import torch

torch.manual_seed(0)
w = torch.zeros(3, requires_grad=True)
for i in range(20000):
    print(f"line {i}")
    if i % 1000 == 0:
        print(f"err {i}", file=sys.stderr)
        loss = (w - i).pow(2).sum()
        loss.backward()
print("done")
