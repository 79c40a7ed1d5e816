# torch: clean (reference for tests/fixtures/gg302/pos_stale_rows_after_row_written.py, fixed by hand)
# Iterating a tensor unbinds it once, before the first row: writing row 0 back moves the version of every row,
# and reading row 1 with grad on then raises.
import torch

torch.manual_seed(0)
x = torch.randn(3, 4, requires_grad=True) * 1.0
x = x * 2  # every row doubled, out of place
x.sum().backward()
print("ok")
