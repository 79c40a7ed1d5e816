"""torch.compile'd model with an nn.LSTM (dynamo graph-breaks on it and runs it eagerly) carrying its state across
steps without detach: plainly the second step fails with "backward through the graph a second time". Under the
doctor it must fail the same way (the doctor's own frames are never compiled)."""
import torch

torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True)
        self.fc = torch.nn.Linear(16, 1)

    def forward(self, x, state):
        out, state = self.lstm(x, state)
        return self.fc(out[:, -1]), state


net = Net()
model = torch.compile(net)  # Inductor: what compiled our frames before
opt = torch.optim.SGD(net.parameters(), lr=0.1)
state = (torch.zeros(1, 4, 16), torch.zeros(1, 4, 16))
for step in range(3):
    x = torch.randn(4, 5, 8)
    y, state = model(x, state)
    loss = y.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, loss.item().hex())
