"""Run scripts with torch under a tracer; print one JSON object {path: result}.

For every ``Tensor.backward`` call the tracer records the tensor it was called on (the loss: a forward output)
and, after the call, the ``.grad`` of every leaf of that graph (the ``AccumulateGrad`` nodes' variables:
input tensors and module parameters). Each script runs as ``__main__`` in a forked child (torch is imported
once), with its own seed handling (the cases call ``torch.manual_seed``).

    python tracer.py OUT.json SCRIPT...

A script given as ``@allow-mutation:PATH`` runs under ``torch.autograd.graph.allow_mutation_on_saved_tensors()``: autograd
then keeps the original of every saved tensor that is modified in place, which is what the author of a
saved-tensor mutation meant. That run is the reference for fixtures that have no hand-fixed twin.
"""

from __future__ import annotations

import json
import os
import random
import runpy
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

import torch

MAX_NUMEL = 200_000


def _values(t: torch.Tensor) -> dict[str, Any]:
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    flat = t.double().flatten()
    if flat.numel() > MAX_NUMEL:
        flat = flat[:MAX_NUMEL]
    return {"shape": list(t.shape), "values": flat.tolist()}


def _leaves(t: torch.Tensor) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    seen: set[int] = set()
    keep: list[Any] = []
    stack = [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        keep.append(fn)
        var = getattr(fn, "variable", None)
        if isinstance(var, torch.Tensor):
            out.append(var)
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return out


def install(records: list[dict[str, Any]]) -> None:
    original = torch.Tensor.backward

    def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        rec: dict[str, Any] = {"loss": _values(self)}
        leaves = _leaves(self) if self.grad_fn is not None else []
        result = original(self, *args, **kwargs)
        grads = [_values(v.grad) for v in leaves if v.grad is not None]
        rec["grads"] = grads
        records.append(rec)
        return result

    torch.Tensor.backward = backward  # type: ignore[method-assign]


def run_one(path: str, allow_mutation: bool, out_file: str) -> None:
    records: list[dict[str, Any]] = []
    install(records)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    signal.alarm(120)
    os.chdir(os.path.dirname(os.path.abspath(path)))
    sys.argv = [path]
    result: dict[str, Any] = {"ok": True, "error": "", "records": records}
    torch.manual_seed(0)  # scripts that do not seed still compare run to run
    random.seed(0)
    try:
        if allow_mutation:
            with torch.autograd.graph.allow_mutation_on_saved_tensors():
                runpy.run_path(path, run_name="__main__")
        else:
            runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            result.update(ok=False, error=f"SystemExit({e.code})")
    except BaseException as e:  # report whatever the script raised
        result.update(ok=False, error=f"{type(e).__name__}: {e}".splitlines()[0][:500],
                      traceback=traceback.format_exc()[-3000:])
    with open(out_file, "w") as fh:
        json.dump(result, fh)


def warm_up() -> None:
    """Trigger torch's lazy imports once in the parent, so that each forked child does not redo them. One
    intra-op thread: a child forked after an OpenMP pool started would deadlock in its first parallel op."""
    torch.set_num_threads(1)
    import torch.nn as nn
    import torch.nn.functional as F

    m = nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(inplace=True), nn.Dropout2d(0.1),
                      nn.Flatten(), nn.Linear(8, 4), nn.LayerNorm(4), nn.ELU(), nn.Dropout())
    rnns = [nn.LSTM(4, 4), nn.GRU(4, 4), nn.RNN(4, 4), nn.GRUCell(4, 4), nn.LSTMCell(4, 4)]
    x = torch.randn(1, 2, 2, 2, requires_grad=True)
    h = m(x)
    for r in rnns:
        out = r(h)
        h = h + (out[0] if isinstance(out, tuple) else out).reshape(h.shape)
    loss = F.cross_entropy(h, torch.zeros(1, dtype=torch.long)) + F.mse_loss(h, torch.zeros_like(h))
    emb = nn.Embedding(3, 4)
    loss = loss + emb(torch.tensor([1])).sum()
    loss.backward()
    for opt in (torch.optim.SGD, torch.optim.Adam, torch.optim.RMSprop):
        opt(m.parameters(), lr=0.1).step()
    with torch.autograd.graph.allow_mutation_on_saved_tensors():
        y = torch.randn(3, requires_grad=True).exp()
        y.add_(1)
        y.sum().backward()


ALLOW = "@allow-mutation:"


def main(argv: list[str]) -> int:
    out_path, scripts = argv[0], argv[1:]
    warm_up()
    results: dict[str, Any] = {}
    for key in scripts:
        allow = key.startswith(ALLOW)
        path = key[len(ALLOW):] if allow else key
        fd, tmp = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            try:
                run_one(path, allow, tmp)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        try:
            with open(tmp) as fh:
                results[key] = json.load(fh)
        except (OSError, ValueError):
            results[key] = {"ok": False, "error": f"child died (status {status})", "records": []}
        results[key]["seconds"] = round(time.perf_counter() - t0, 3)
        os.unlink(tmp)
    with open(out_path, "w") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
