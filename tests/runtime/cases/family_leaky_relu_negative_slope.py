"""In-place leaky_relu with a negative slope: torch only finds out in backward, the culprit is the in-place call."""
import torch
import torch.nn.functional as F

a = torch.tensor([-1.0, 1.0], requires_grad=True)
b = F.leaky_relu_(a.clone(), -0.5)  # gg: culprit
b.backward(torch.ones(2))
