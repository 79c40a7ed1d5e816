"""Fails for a reason that has nothing to do with autograd: the doctor passes the traceback through."""
import torch

x = torch.randn(3, 4)
w = torch.randn(5, 6, requires_grad=True)
print("before the error", flush=True)
y = x @ w  # shape mismatch: RuntimeError, not an in-place error
