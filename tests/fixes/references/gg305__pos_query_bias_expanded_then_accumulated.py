# torch: clean (reference for tests/fixtures/gg305/pos_query_bias_expanded_then_accumulated.py, fixed by hand)
import torch
import torch.nn as nn

torch.manual_seed(0)


class Scorer(nn.Module):
    """Attention logits that start from a per-key prior computed from the keys, broadcast over the queries with
    expand() (no copy: every query row is the same memory), then accumulate each head's scores in place: torch
    refuses the first add_."""

    def __init__(self, dim=8, keys=5, heads=2):
        super().__init__()
        self.prior = nn.Linear(dim, 1)
        self.q = nn.Linear(dim, dim * heads)
        self.k = nn.Parameter(torch.randn(keys, dim))
        self.heads = heads

    def forward(self, x):
        scores = self.prior(self.k).t().expand(x.size(0), -1).clone()
        for q in self.q(x).chunk(self.heads, dim=-1):
            scores.add_(q @ self.k.t())
        return scores.softmax(-1)


Scorer()(torch.randn(4, 8)).sum().backward()
