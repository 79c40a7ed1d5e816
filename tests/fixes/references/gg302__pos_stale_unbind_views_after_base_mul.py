# torch: clean (reference for tests/fixtures/gg302/pos_stale_unbind_views_after_base_mul.py, fixed by hand)
# Each slice is its own single view (base[i]), which torch can rebuild after the base is scaled in place.
import torch

torch.manual_seed(0)
stacked = torch.randn(3, 4, 4, requires_grad=True)
base = stacked.clone()
x, y, z = (base[i] for i in range(3))
base.mul_(2)
total = x + y + z
total.backward(torch.ones(4, 4))
print(stacked.grad.sum().item())
