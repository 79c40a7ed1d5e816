from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule


class CarriedState(Rule):
    code = "GG201"
    name = "state-carried-across-iterations"
    summary = ("Recurrent state carried into the next loop iteration without `.detach()` while backward and "
               "`optimizer.step()` run every iteration.")
    why = """
`h = h_next` keeps the graph of the previous iteration attached to `h`. The next iteration's `backward()`
walks back into that old graph (that is why `retain_graph=True` seemed necessary), whose ops saved the
parameters that `optimizer.step()` has since updated in place: the version check fails. Even without the
error, gradients would flow through every previous batch (truncated BPTT was intended). State kept on an object
is carried the same way: `self.h = cell(x, self.h)`, or a memory buffer written with a graph
(`self.memory[n_id] = gru(msg, self.memory[n_id])`, a temporal graph network's memory) and read in the next
iteration.
"""
    fix = """
Detach the carried state: `h = h_next.detach()` (for an LSTM, `h = tuple(s.detach() for s in h_next)`). Then
`retain_graph=True` is no longer needed. For a memory kept on a module, detach it once the step is done
(`self.memory.detach_()`, as pyg's TGN example does with `memory.detach()`).
"""
    INVALID = ("""
import torch

rnn = torch.nn.RNN(input_size=1, hidden_size=1, num_layers=1)
xs = torch.randn(5, 1, 1)
ys = torch.randn(5, 1, 1)
h_cur = torch.zeros(1, 1)
opt = torch.optim.SGD(rnn.parameters(), lr=0.01)
for i in range(5):
    opt.zero_grad()
    out, h_next = rnn(xs[i], h_cur)
    loss = ((out - ys[i]) ** 2).mean()
    loss.backward(retain_graph=True)
    opt.step()
    h_cur = h_next
""",)
    VALID = ("""
import torch

rnn = torch.nn.RNN(input_size=1, hidden_size=1, num_layers=1)
xs = torch.randn(5, 1, 1)
ys = torch.randn(5, 1, 1)
h_cur = torch.zeros(1, 1)
opt = torch.optim.SGD(rnn.parameters(), lr=0.01)
for i in range(5):
    opt.zero_grad()
    out, h_next = rnn(xs[i], h_cur)
    loss = ((out - ys[i]) ** 2).mean()
    loss.backward()
    opt.step()
    h_cur = h_next.detach()
""",)

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "carry"

    @classmethod
    def message(cls, h: Hazard) -> str:
        bw = h.get("backward_line")
        carry = h.get("carry_stmt_span")
        at = f" (line {carry.line})" if carry is not None else ""
        return (f"{h.op} updates parameters in place that the previous iteration's graph saved; that graph is "
                f"carried into the next iteration by `{h.target}`{at} without .detach(), so backward (line {bw}) "
                "finds them changed")
