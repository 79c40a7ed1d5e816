"""A write into a saved tensor whose saving op no backward can reach is harmless (analysis/reach.py).

The clean and error cases that torch decides are fixtures (gg103/neg_accuracy_of_thresholded_predictions.py,
gg103/pos_prediction_used_by_loss_before_threshold.py, ...). These check the other side: when the saving op's result
leaves the function in a way the test cannot follow, the write is still reported."""

from __future__ import annotations

import ast
import textwrap

import pytest
from gradguard.analysis.reach import _dim_given
from gradguard.api import check_source

HEAD = textwrap.dedent("""
    import torch
    import torch.nn.functional as F

""")

# each body: `pred` is the sigmoid's output (saved by it), then written in place; `loss` does not use it
LEAVES = {
    "stored on an object from outside": """
        def step(trainer, out, y):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            trainer.last = pred
            pred[pred > 0.5] = 1
            loss.backward()
    """,
    "returned": """
        def step(out, y):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            loss.backward()
            return pred
    """,
    "read by a nested function": """
        def step(out, y):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            def closure():
                return pred.sum()
            loss.backward()
            return closure
    """,
    "given to a helper that keeps it": """
        SEEN = []

        def aux(p):
            SEEN.append(p)
            return 0

        def step(out, y):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            aux(pred)
            loss.backward()
    """,
    "kept by a parameter's method": """
        def step(out, y, meter):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            meter.update(pred)
            loss.backward()
    """,
    "given to a backward of a library": """
        def step(out, y, accelerator):
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            loss = F.mse_loss(out, y)
            accelerator.backward(loss + pred.sum())
    """,
    "kept on the module by forward": """
        class Head(torch.nn.Module):
            def forward(self, out):
                pred = torch.sigmoid(out)
                pred[pred > 0.5] = 1
                self.pred = pred
                return out.sum()
    """,
    "through a local alias of a buffer from outside": """
        def forward(out, cache):
            pred = torch.sigmoid(out)
            keep = cache.items
            keep.append(pred)
            pred[pred > 0.5] = 1
            return out.sum()
    """,
    "given to a function of the project": """
        from trainer_utils import remember

        def step(out, y):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            remember(pred)
            loss.backward()
    """,
    "differentiated by autograd.grad": """
        from torch.autograd import grad

        def step(out, y, x):
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            loss = F.mse_loss(out, y)
            g = grad(loss + pred.sum(), x)
            print(g)
    """,
    "given to an inner function that keeps it": """
        def step(out, y):
            seen = []
            def keep(p):
                seen.append(p)
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            keep(pred)
            (loss + torch.stack(seen).sum()).backward()
    """,
    "sampled from, the samples differentiated": """
        def step(out, y):
            probs = torch.exp(out).clamp_(0.0, 1.0)
            draws = torch.bernoulli(probs)
            loss = F.mse_loss(out, y)
            (loss + draws.sum()).backward()
    """,
    "added in place into a tensor handed in": """
        def step(out, y, total):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            total += pred
            loss.backward()
    """,
    "given to a method of an object handed in": """
        def step(out, y, history):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            history.log(pred)
            loss.backward()
    """,
    "read by a lambda": """
        def step(out, y):
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            extra = lambda: pred.sum()
            (F.mse_loss(out, y) + extra()).backward()
    """,
}


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_write_is_reported_when_the_saved_result_may_reach_a_backward(name: str) -> None:
    src = HEAD + textwrap.dedent(LEAVES[name])
    found = [f for f in check_source(src) if f.code in ("GG101", "GG103")]
    assert found, name


UNREACHED = {
    "a helper calling tensor methods of its arguments": """
        def clamp01(x, lo=0.0, hi=1.0):
            return x.clamp(lo, hi)

        def overlap(a, b):
            return clamp01(a - b).prod(-1)

        def step(out, y, boxes):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            keep = overlap(pred, boxes) > 0.3
            loss.backward()
            return keep
    """,
    "a metric function of the module": """
        def accuracy(p, target):
            hits = (p > 0.5) == target
            return hits.float().mean()

        def step(out, y):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            acc = accuracy(pred, y)
            loss.backward()
            return acc
    """,
    "comparisons and item": """
        def step(out, y, log):
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            acc = (pred == y).float().mean().item()
            log.append(acc)
            print(f"acc {acc:.3f}")
            loss.backward()
    """,
    "a local list of detached values": """
        def step(out, y):
            seen = []
            loss = F.mse_loss(out, y)
            pred = torch.sigmoid(out)
            pred[pred > 0.5] = 1
            seen.append(pred.detach())
            loss.backward()
            return [s.argmax() for s in seen]
    """,
}


@pytest.mark.parametrize("name", sorted(UNREACHED))
def test_write_is_silent_when_no_backward_reaches_the_saving_op(name: str) -> None:
    src = HEAD + textwrap.dedent(UNREACHED[name])
    assert not [f for f in check_source(src) if f.code in ("GG101", "GG103")], name


def test_only_a_reduction_over_a_dim_returns_indices() -> None:
    def call(src: str) -> ast.Call:
        node = ast.parse(src).body[0]
        assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
        return node.value

    assert _dim_given(call("x.max(1)")) and _dim_given(call("torch.max(x, -1)")) and _dim_given(call("x.min(dim=d)"))
    assert not _dim_given(call("torch.max(a, b)")) and not _dim_given(call("x.max()"))
