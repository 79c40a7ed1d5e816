# torch: clean (reference for tests/fixtures/gg101/pos_allow_mutation_backward_after_block.py, fixed by hand)
import torch
import torch.nn as nn

torch.manual_seed(0)

net = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
x = torch.randn(4, 8)
with torch.autograd.graph.allow_mutation_on_saved_tensors():
    feats = net(x)
    loss = feats.pow(2).mean()
    feats.div_(feats.norm(dim=1, keepdim=True))
    loss.backward()  # while the block's saved copies still exist
