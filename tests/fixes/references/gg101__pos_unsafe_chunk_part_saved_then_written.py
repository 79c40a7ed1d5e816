# torch: clean (reference for tests/fixtures/gg101/pos_unsafe_chunk_part_saved_then_written.py, fixed by hand)
# The multiplication uses a copy of the part; the in-place add leaves what it saved alone.
# The parts of torch.unsafe_chunk are tensors of their own; the multiplication saves the second one, and writing
# that very part in place afterwards breaks backward.
import torch

torch.manual_seed(0)
x = torch.randn(4, 6, requires_grad=True)
h = x * 2
first, second, third = torch.unsafe_chunk(h, 3, dim=1)
gated = first * second.clone()
second.add_(1.0)
(gated.sum() + third.sum()).backward()
print(x.grad.shape)
