# torch: clean (reference for tests/fixtures/gg302/pos_stale_split_views_after_base_write.py, fixed by hand)
# Both halves come from one split; writing the base in place afterwards (even under no_grad) moves its version,
# and the next op with grad on that reads a half needs the view's graph rebuilt, which split's outputs refuse.
import torch

torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
h = x * 2
with torch.no_grad():
    h.clamp_(min=0)
top, bottom = h[:2], h[2:]  # the halves read after the clamp, as the views did
loss = (top * 3).sum()
loss.backward()
print("ok")
