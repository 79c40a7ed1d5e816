# torch: clean (reference for tests/fixtures/gg302/pos_nograd_view_used_after_base_write.py, fixed by hand)
# A "constant" target taken under no_grad as a slice of the model's output is a view of a tensor that requires
# grad. The output is then written in place (the last step is masked out); the next op with grad on
# that reads the view raises: "A view was created in no_grad mode and its base or another view of its base has
# been modified inplace with grad mode enabled".
import torch
import torch.nn as nn

torch.manual_seed(0)


class Forecaster(nn.Module):
    def __init__(self, dim=6, horizon=4):
        super().__init__()
        self.proj = nn.Linear(dim, horizon)

    def forward(self, x):
        return self.proj(x)


model = Forecaster()
x = torch.randn(5, 6)
pred = model(x)
pred[:, -1] = 0.0
anchor = pred[:, 0].detach()  # the column read after the write, as the view did, with no gradient
loss = ((pred - anchor.unsqueeze(1)) ** 2).mean()
loss.backward()
