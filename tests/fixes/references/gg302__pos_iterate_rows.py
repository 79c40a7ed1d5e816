# torch: clean (reference for tests/fixtures/gg302/pos_iterate_rows.py, fixed by hand)
import torch

torch.manual_seed(0)

w = torch.randn(3, 4, requires_grad=True)
rows = w * 1.0
rows = rows * 2.0  # every row doubled, out of place
rows.sum().backward()
