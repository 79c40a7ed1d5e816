import torch

torch.manual_seed(0)

weights = torch.randn(4, 3, requires_grad=True)
scores = weights * 2
with torch.inference_mode():
    flat = scores.view(-1).detach()
scores.mul_(0.5)
print(flat.grad_fn)
scores.sum().backward()
