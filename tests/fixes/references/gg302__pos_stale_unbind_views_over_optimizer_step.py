# torch: clean (reference for tests/fixtures/gg302/pos_stale_unbind_views_over_optimizer_step.py, fixed by hand)
# The rows of a weight are unbound once and kept; the optimizer updates the weight in place, and on the next
# step torch must rebuild the graph of those rows, which it cannot do for the outputs of one multi-output op.
import torch
import torch.nn as nn

torch.manual_seed(0)


class Prototypes(nn.Module):
    def __init__(self, n=3, dim=4):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, dim))

    def forward(self, x):
        # the distances to every row at once, from the current weight
        return (x[:, None, :] - self.weight[None]).pow(2).sum(-1)


model = Prototypes()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for _ in range(2):
    opt.zero_grad()
    model(x).mean().backward()
    opt.step()
print("ok")
