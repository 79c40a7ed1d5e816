# torch: clean (reference for tests/fixtures/gg101/pos_inplace_inside_reentrant_checkpoint.py, fixed by hand)
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


# Reentrant checkpointing runs the block again with grad on in backward, and backpropagates through that run:
# there tanh saves its output, which the scaling then modifies in place.
class GatedBlockReentrant(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.scale = 0.5

    def _gated(self, x):
        h = torch.tanh(self.fc(x))
        h = h * self.scale
        return h

    def forward(self, x):
        return checkpoint(self._gated, x, use_reentrant=True)


block = GatedBlockReentrant()
out = block(torch.randn(4, 8, requires_grad=True))
out.sum().backward()
print(block.fc.weight.grad.shape)
