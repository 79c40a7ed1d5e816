# torch: clean (reference for tests/fixtures/gg101/pos_codebook_updated_after_distances_used.py, fixed by hand)
# The distances use a copy of the codebook: the EMA update no longer changes what the matmul saved.
# A VQ-VAE quantizer with an EMA codebook whose commitment term uses the distances themselves (the values of
# `(-dist).max(1)`): backward goes through the matmul that saved the codebook, which the EMA update then changed
# in place.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class EmaCodebookValues(nn.Module):
    def __init__(self, dim, n_embed, decay=0.99):
        super().__init__()
        self.dim, self.decay = dim, decay
        self.register_buffer("embed", torch.randn(dim, n_embed))

    def lookup(self, idx):
        return F.embedding(idx, self.embed.transpose(0, 1))

    def forward(self, x):
        flat = x.reshape(-1, self.dim)
        dist = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.embed.clone() + self.embed.pow(2).sum(0, keepdim=True)
        nearest, idx = (-dist).max(1)
        quantized = self.lookup(idx)
        if self.training:
            with torch.no_grad():
                self.embed.mul_(self.decay).add_(flat.mean(0, keepdim=True).t(), alpha=1 - self.decay)
        return x + (quantized - x).detach(), -nearest.mean()


encoder = nn.Linear(6, 4)
codebook = EmaCodebookValues(4, 8)
z, commitment = codebook(encoder(torch.randn(5, 6)))
(z.pow(2).mean() + commitment).backward()
