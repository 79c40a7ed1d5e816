# torch: clean (reference for tests/fixtures/gg302/pos_full_backward_hooks_added_by_recursive_method.py, fixed by hand)
# The ReLU after the hooked norm is out of place: nothing writes into BackwardHookFunction's views.
# An explainer hooks every leaf module of a model with a method that calls itself on each child (as shap's
# DeepExplainer walks the tree). Each hooked module's output comes back through BackwardHookFunction, a view made
# inside a custom Function, and the next layer, a ReLU(inplace=True), writes into it.
import torch
import torch.nn as nn

torch.manual_seed(0)


class HookWalkBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.norm = nn.BatchNorm2d(ch)
        self.relu = nn.ReLU()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv(self.relu(self.norm(x)))


class HookWalkNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block = HookWalkBlock(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        x = self.block(self.stem(x))
        return self.head(x.mean((2, 3)))


class LeafHooker:
    def __init__(self, backward_hook):
        self.backward_hook = backward_hook
        self.handles = []

    def add_handles(self, module):
        children = list(module.children())
        if children:
            for child in children:
                self.add_handles(child)
        else:
            self.handles.append(module.register_full_backward_hook(self.backward_hook))


def keep_grad(module, grad_input, grad_output):
    return grad_input


model = HookWalkNet().eval()
hooker = LeafHooker(keep_grad)
hooker.add_handles(model)
out = model(torch.randn(2, 3, 6, 6))
out[:, 0].sum().backward()
for h in hooker.handles:
    h.remove()
