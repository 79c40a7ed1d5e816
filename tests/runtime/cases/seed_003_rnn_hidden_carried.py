"""Seed 003: nn.RNN trained step by step, ``h_cur = h_next`` carried without detach, backward(retain_graph=True)
and an optimizer step per iteration: the next backward goes through the old graph, whose saved weights the
optimizer changed in place."""
import torch

torch.manual_seed(0)
rnn = torch.nn.RNN(input_size=1, hidden_size=1, num_layers=1)
train_set_x = torch.tensor([[[1]], [[2]], [[3]], [[4]], [[5]]], dtype=torch.float32)
train_set_y = torch.tensor([[[2]], [[4]], [[6]], [[8]], [[10]]], dtype=torch.float32)
h0 = torch.tensor([[0]], dtype=torch.float32)
h_cur = h0
loss = torch.nn.MSELoss()
opt = torch.optim.Adadelta(rnn.parameters(), lr=0.01)
for i in range(5):
    opt.zero_grad()
    train_output, h_next = rnn(train_set_x[i], h_cur)  # gg: saved
    rnn_loss = loss(train_output, train_set_y[i])
    rnn_loss.backward(retain_graph=True)
    opt.step()  # gg: culprit
    h_cur = h_next
