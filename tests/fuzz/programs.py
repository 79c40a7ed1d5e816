"""A hypothesis strategy for torch-shaped Python: the statements the analyzer models (tensor creation, ops that
save tensors, in-place ops, views, blocks, functions, modules, optimizers, backward), combined at random.
Grammar-based generators (hypothesmith) reach the parser's corners; these reach the analyzer's."""

from __future__ import annotations

from hypothesis import strategies as st

NAMES = ("x", "y", "z", "h", "w", "out", "a", "b")
OPS = ("exp()", "sigmoid()", "tanh()", "relu()", "sin()", "clone()", "detach()", "t()", "view(-1)", "[0]",
       "pow(2)", "softmax(-1)", "unsqueeze(0)", "transpose(0, 1)", "reshape(-1)", "abs()", "float()", "T")
INPLACE = ("add_(1)", "mul_(2)", "relu_()", "zero_()", "clamp_(0, 1)", "sigmoid_()", "copy_(x)",
           "fill_diagonal_(0)", "requires_grad_()", "exp_()", "masked_fill_(x > 0, 0)")
BINOPS = ("+", "*", "-", "/", "@")
AUG = ("+=", "-=", "*=", "/=")


@st.composite
def _simple(draw: st.DrawFn) -> str:
    n, m, k = (draw(st.sampled_from(NAMES)) for _ in range(3))
    forms = [
        f"{n} = torch.randn(3, 3, requires_grad={draw(st.booleans())})",
        f"{n} = {m}.{draw(st.sampled_from(OPS))}",
        f"{n} = {m} {draw(st.sampled_from(BINOPS))} {k}",
        f"{n}.{draw(st.sampled_from(INPLACE))}",
        f"{n} {draw(st.sampled_from(AUG))} {m}",
        f"{n}[0] = {m}[1]",
        f"{n}[..., :2] += {m}",
        f"torch.exp({m}, out={n})",
        f"{n} = F.relu({m}, inplace=True)",
        f"{n} = nn.ReLU(inplace=True)({m})",
        f"{n} = F.dropout({m}, 0.5, True, True)",
        f"{n}.sum().backward()",
        f"{n}.backward(retain_graph=True)",
        "opt.step()",
        "opt.zero_grad()",
        f"{n}, {m} = {k}.chunk(2)",
        f"{n} = model({m})",
        f"{n} = torch.cat([{m}, {k}])",
        f"{n} = [{m}, {k}]",
        f"{n}.append({m})" if n != m else "pass",
        f"{n} = {m} if {k} is not None else {n}",
        f"{n} = torch.utils.checkpoint.checkpoint(model, {m})",
        f"del {n}",
        "return x" if draw(st.booleans()) else "break",
        f"{n} = Fn.apply({m})",
        f"{n}.data.{draw(st.sampled_from(INPLACE))}",
        f"{n}.grad.{draw(st.sampled_from(INPLACE))}",
        f"{n} = {m}.detach().requires_grad_()",
    ]
    return draw(st.sampled_from(forms))


@st.composite
def _block(draw: st.DrawFn, depth: int) -> list[str]:
    out: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        if depth > 0 and draw(st.integers(0, 3)) == 0:
            n = draw(st.sampled_from(NAMES))
            head = draw(st.sampled_from([
                "with torch.no_grad():", "with torch.enable_grad():", "for i in range(3):", f"for r in {n}:",
                f"for r in {n}.unbind(0):", "while True:", f"if {n} is None:", "else:", "try:", "def f(x, y=None):",
                "def forward(self, x):", "with torch.autograd.graph.allow_mutation_on_saved_tensors():",
                "with torch.autocast('cpu'):", "async def g(x):", "lambda_ = lambda t: t.add_(1)",
            ]))
            body = draw(_block(depth - 1))
            out.append(head)
            if head.endswith(":"):
                out.extend("    " + ln for ln in body)
            if head == "try:":
                out.append("except Exception:")
                out.append("    pass")
        else:
            out.append(draw(_simple()))
    return out


@st.composite
def torch_programs(draw: st.DrawFn) -> str:
    header = [
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        "class Fn(torch.autograd.Function):",
        "    @staticmethod",
        "    def forward(ctx, x):",
        "        ctx.save_for_backward(x)",
        "        return x.exp()",
        "",
        "class M(nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        f"        self.net = nn.Sequential(nn.Linear(3, 3), nn.{draw(st.sampled_from(['ReLU', 'Sigmoid', 'Tanh']))}"
        f"(), nn.ReLU(inplace={draw(st.booleans())}))",
        "",
        "    def forward(self, x):",
        *("        " + ln for ln in draw(_block(2))),
        "        return self.net(x)",
        "",
        "model = M()",
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
        "x = torch.randn(3, 3, requires_grad=True)",
    ]
    body = draw(_block(3))
    # lines that are not valid at module level make a SyntaxError: fine (GG000 is a result too), but keep most valid
    body = [ln for ln in body if ln.strip() not in ("return x", "break")] if draw(st.booleans()) else body
    return "\n".join(header + body) + "\n"
