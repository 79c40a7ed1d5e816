# torch: clean (reference for tests/fixtures/gg101/pos_buffers_synced_before_each_forward.py, fixed by hand)
# The multiplication uses a copy of the buffer: the next copy into the buffer leaves the saved copy alone.
# A wrapper copies reference values into every buffer of its module before each forward (what DDP's
# broadcast_buffers does). The module multiplies by its buffer, and the multiplication saves it; two forwards
# before one backward mean the second copy overwrites what the first forward saved.
import torch
import torch.nn as nn

torch.manual_seed(0)


class ScaledHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.register_buffer("scale", torch.ones(1, 4))

    def forward(self, z):
        return (self.lin(z) * self.scale.clone()).sum()


class SyncBuffers(nn.Module):
    def __init__(self, module, reference):
        super().__init__()
        self.module = module
        self.reference = reference

    def forward(self, *inputs):
        with torch.no_grad():
            for name, buf in self.module.named_buffers():
                buf.copy_(self.reference[name])
        return self.module(*inputs)


model = SyncBuffers(ScaledHead(), {"scale": torch.full((1, 4), 0.5)})
first = model(torch.randn(3, 8))
second = model(torch.randn(3, 8))
(first + second).backward()
print(model.module.lin.weight.grad.sum().item())
