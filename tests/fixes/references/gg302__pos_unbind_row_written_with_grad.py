# torch: clean (reference for tests/fixtures/gg302/pos_unbind_row_written_with_grad.py, fixed by hand)
import torch

torch.manual_seed(0)

pred = torch.randn(3, 4, requires_grad=True) * 2
buf = torch.zeros(3, 4)
for i in range(buf.shape[0]):
    buf[i].copy_(pred[i])  # one view at a time: the buffer joins the graph through each row
buf.sum().backward()
