"""A small CNN with two autograd in-place hazards and one safe in-place stack (editor end-to-end fixture).

Labels (checked by tests/e2e/test_fixture_labels.py with torch): the lines marked `# hazard: GGxxx` break
backward(); conv -> bn -> ReLU(inplace=True) is safe (BatchNorm does not save its output).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU(inplace=True)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.bn(self.conv(x)))
        g = torch.sigmoid(h)
        g = F.relu(g, inplace=True)  # hazard: GG102
        p = g.mean(dim=(2, 3))
        e = torch.exp(p)
        e += 1  # hazard: GG101
        return self.head(e)


if __name__ == "__main__":
    torch.manual_seed(0)
    net = Net()
    loss = net(torch.randn(2, 3, 6, 6)).sum()
    loss.backward()
    print("backward ok")
