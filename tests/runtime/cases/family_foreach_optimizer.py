"""``SGD(foreach=True)`` steps between the forward pass and a second backward through the same graph: the foreach
update bumps the weight's version, which the second ``model(h)`` saved. The culprit is the ``step()`` line."""
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=True)
x = torch.randn(2, 4, requires_grad=True)
h = torch.tanh(model(x))
loss1 = h.sum()
loss2 = model(h).sum()  # gg: saved
loss1.backward(retain_graph=True)
opt.step()  # gg: culprit
loss2.backward()
