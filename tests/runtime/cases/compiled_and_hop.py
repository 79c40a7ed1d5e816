"""torch.compile (fullgraph), a higher-order op (torch.cond) and torch.func under the doctor: they must run,
unchanged (torch.func refuses to run under saved-tensor hooks, which is one reason the doctor uses none)."""
import torch

torch.manual_seed(0)
lin = torch.nn.Linear(8, 8)


@torch.compile(backend="eager", fullgraph=True)
def f(x):
    return torch.relu(lin(x)).sin()


x = torch.randn(4, 8)
y = f(x)
y.sum().backward()
r = torch.cond(torch.tensor(True), lambda t: t.sin(), lambda t: t.cos(), (torch.randn(3),))
g = torch.func.grad(lambda t: (t.sin() * t).sum())(torch.linspace(0, 1, 5))
print("compiled", y.sum().item().hex(), lin.weight.grad.sum().item().hex(), r.sum().item().hex())
print("func", g.sum().item().hex())
