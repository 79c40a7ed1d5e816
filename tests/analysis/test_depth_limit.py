"""At the call-depth limit (functions.MAX_DEPTH, lowered here so that a few lines reach it): a thin wrapper is
still followed, and an autograd.Function whose forward is not followed still gives a new tensor that requires
grad when an input does (norse's `threshold -> super_fn -> SuperSpike.apply`, six calls below a module's forward)."""

import pytest
from gradguard.analysis import functions
from gradguard.api import check_source

SOURCE = '''
import torch


class Spike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        out = (x > 0).float()
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (1 + x.abs()) ** 2


def spike_fn(x):
    return Spike.apply(x)


def encode(v, mask):
    z = spike_fn(v)
    out = torch.where(mask, torch.zeros_like(z), z)
    mask[z.bool()] = True
    return out


x = torch.randn(5, requires_grad=True)
encode(x, torch.zeros(5, dtype=torch.bool)).sum().backward()
'''


@pytest.fixture
def shallow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(functions, "MAX_DEPTH", 1)  # module code calls at depth 0: encode's own calls are at the limit


def test_thin_wrapper_followed_and_function_output_requires_grad_at_the_limit(shallow: None) -> None:
    found = [(f.code, f.line) for f in check_source(SOURCE, "deep.py", fixes=False)]
    assert ("GG103", 25) in found  # the where (line 24) saved `mask`, written on line 25


def test_a_non_thin_helper_at_the_limit_is_still_cut(shallow: None) -> None:
    src = SOURCE.replace("def spike_fn(x):\n    return Spike.apply(x)",
                         "def spike_fn(x):\n    x = x * 1.0\n    y = x + 0.0\n    return Spike.apply(y)")
    assert not [f for f in check_source(src, "deep.py", fixes=False) if f.code == "GG103"]
