# torch: clean (reference for tests/fixtures/gg302/pos_full_backward_hook_on_inplace_layer.py, fixed by hand)
# The ReLU next to the hooked layer is out of place: nothing writes into BackwardHookFunction's views.
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.conv(x))


block = Block()
block.act.register_full_backward_hook(lambda m, grad_in, grad_out: None)
block(torch.randn(1, 3, 8, 8)).sum().backward()
