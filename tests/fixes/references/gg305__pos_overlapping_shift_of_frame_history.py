# torch: clean (reference for tests/fixtures/gg305/pos_overlapping_shift_of_frame_history.py, fixed by hand)
# The shift reads a copy of the rows it moves: each row takes the values from before the write.
# A rolling history of observations shifts itself one row up in place: the rows it reads (history[1:]) overlap
# the rows it writes (history[:-1]) in one storage, and torch refuses the write, in any grad mode.
import torch
import torch.nn as nn

torch.manual_seed(0)


class ObservationHistory:
    def __init__(self, length, dim):
        self.history = torch.zeros(length, dim)

    def push(self, obs):
        self.history[:-1] = self.history[1:].clone()
        self.history[-1] = obs
        return self.history.flatten()


policy = nn.Linear(4 * 3, 2)
memory = ObservationHistory(4, 3)
for _ in range(3):
    state = memory.push(torch.randn(3))
    loss = policy(state).pow(2).sum()
    loss.backward()
print(policy.weight.grad.sum().item())
