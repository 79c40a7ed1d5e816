# torch: clean (reference for tests/fixtures/gg302/pos_full_backward_hook_output_into_inplace_relu.py, fixed by hand)
# The ReLU next to the hooked layer is out of place: nothing writes into BackwardHookFunction's views.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
grads = []
model[0].register_full_backward_hook(lambda m, grad_in, grad_out: grads.append(grad_out[0]))
x = torch.randn(1, 3, 8, 8)
model(x).sum().backward()
