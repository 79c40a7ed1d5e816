# torch: clean (reference for tests/fixtures/gg305/pos_inplace_activation_on_broadcast_template.py, fixed by hand)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

embed = nn.Embedding(4, 16)
act = nn.SiLU(inplace=True)


def tokens(batch):
    """One learned token for the whole batch, broadcast over it and transposed: the transpose keeps the broadcast
    dimension, and the in-place SiLU writes into memory shared by every sample."""
    t = embed(torch.tensor([0])).expand(batch, -1).clone().t()
    return act(t)


out = tokens(3)
F.mse_loss(out, torch.zeros(16, 3)).backward()
