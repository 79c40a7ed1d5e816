"""A clean training run (CNN with BatchNorm, a safe in-place ReLU, dropout, an LSTM, Adam, CPU autocast) that
prints its losses and a hash of its gradients and parameters bit for bit: the doctor must not change them."""
import hashlib

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.lstm = nn.LSTM(8, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.conv2(x)
        x = F.relu(x, inplace=True)  # safe: conv2 does not need its output, relu saves its own
        x = self.drop(F.max_pool2d(x, 2))
        seq = x.flatten(2).transpose(1, 2)  # (batch, 16 positions, 8 channels)
        out, _ = self.lstm(seq)
        return self.fc(out[:, -1])


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
digest = hashlib.sha256()
for step in range(4):
    x = torch.randn(4, 1, 8, 8)
    y = torch.randint(0, 3, (4,))
    if step == 3:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
    else:
        loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        digest.update(p.grad.numpy().tobytes())
    opt.step()
    print(f"step {step} loss {loss.item().hex()}")
for p in model.parameters():
    digest.update(p.detach().numpy().tobytes())
print("digest", digest.hexdigest())
