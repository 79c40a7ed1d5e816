"""Run one callable under ``saved_tensors_hooks`` and report what it saved, mutated and aliased.

Imported only by :mod:`gradguard.knowledge.probe` (it needs torch). Every tensor argument is a fresh copy
per run; each packed tensor is identified by STORAGE identity against the arguments, the module's own
parameters/buffers and the outputs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

Inputs = Callable[[], tuple[list[Any], dict[str, Any]]]


@dataclass
class Spec:
    """How to call one table entry on sample inputs."""

    name: str
    kind: str  # function | method | operator | module
    fn: Callable[..., Any]  # the callable; for modules: a factory returning the module
    inputs: Inputs  # sample (args, kwargs); tensors in them are templates, copied for every run
    names: list[str] | None = None  # names of the positional args (None: derive from the signature)
    params: list[str] | None = None  # all positional parameter names (None: derive)
    variant: tuple[str, Any] | None = None  # ("inplace", True) for NAME[inplace=True]
    train_kwarg: str | None = None  # functionals: keyword that selects training mode ("training")
    grad_params: bool = False  # list-of-tensor args are leaves with .grad filled (clip_grad_*)
    aten: str | None = None  # ATen operator name for the signature / derivatives.yaml
    note: str | None = None
    attribute: bool = False  # a property (x.T, x.data), not a call
    optional: bool = False  # derived spec: left out of the table when it cannot be called


@dataclass
class RunResult:
    saved: set[str] = field(default_factory=set)  # arg / "self.param" names saved
    saved_outputs: set[int] = field(default_factory=set)
    internal: int = 0  # saved tensors that are none of the above (buffers like mean/rstd, masks)
    mutated: set[str] = field(default_factory=set)
    casts: set[str] = field(default_factory=set)  # autocast: args whose bf16 copy was saved
    silent: set[str] = field(default_factory=set)  # data changed, version counter did not (BN running stats)
    output: Any = None
    named: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


#: The device the probe runs on ("cpu" or "cuda"); set by build_entries.
DEVICE = ["cpu"]


def _seed() -> None:
    """Seed the CPU generator only: torch.manual_seed also queues lazy CUDA/XPU/MTIA seeding, which records
    a Python stack trace per call (slow under pytest's deep stacks)."""
    torch.default_generator.manual_seed(0)


def _storage(t: torch.Tensor) -> int | None:
    try:
        if t.layout != torch.strided or t.numel() == 0:
            return None
        return int(t.untyped_storage().data_ptr())
    except Exception:
        return None


def flatten_tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        out: list[torch.Tensor] = []
        for o in obj:
            out.extend(flatten_tensors(o))
        return out
    return []


def _copy(template: torch.Tensor, requires_grad: bool, leaf: bool = False) -> torch.Tensor:
    t = template.detach().clone().to(DEVICE[0])
    if requires_grad and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_(True)
        if not leaf:
            t = t.clone()  # a non-leaf: in-place ops on it are legal
    return t


@dataclass
class Call:
    """One materialized call: the tensors passed, by name."""

    args: list[Any]
    kwargs: dict[str, Any]
    named: dict[str, Any]  # name -> tensor or list of tensors
    module: torch.nn.Module | None


def materialize(
    spec: Spec,
    arg_names: list[str],
    sources: set[str],
    train: bool = True,
    leaf_args: set[str] | None = None,
) -> Call:
    leaf_args = leaf_args or set()
    _seed()
    args, kwargs = spec.inputs()
    named: dict[str, Any] = {}

    def conv(v: Any, name: str) -> Any:
        if isinstance(v, torch.Tensor):
            t = _copy(v, name in sources, leaf=name in leaf_args)
            named[name] = t
            return t
        if isinstance(v, (list, tuple)) and v and all(isinstance(e, torch.Tensor) for e in v):
            if spec.grad_params:
                ts = []
                for e in v:
                    p = e.detach().clone().to(DEVICE[0]).requires_grad_(True)
                    p.grad = torch.ones_like(p) * 3.0
                    ts.append(p)
            else:
                ts = [_copy(e, name in sources, leaf=name in leaf_args) for e in v]
            named[name] = ts
            return tuple(ts) if isinstance(v, tuple) else ts
        return v

    new_args = [conv(a, arg_names[i] if i < len(arg_names) else f"arg{i}") for i, a in enumerate(args)]
    new_kwargs = {k: conv(v, k) for k, v in kwargs.items()}
    module = None
    if spec.kind == "module":
        _seed()
        module = spec.fn()
        module.to(DEVICE[0])
        module.train(train)
        for pname, p in module.named_parameters():
            p.requires_grad_(f"self.{pname}" in sources)
    elif spec.train_kwarg is not None:
        new_kwargs[spec.train_kwarg] = train
    return Call(new_args, new_kwargs, named, module)


def invoke(spec: Spec, call: Call) -> Any:
    if call.module is not None:
        return call.module(*call.args, **call.kwargs)
    return spec.fn(*call.args, **call.kwargs)


def _candidates(call: Call) -> Iterator[tuple[str, torch.Tensor]]:
    for name, v in call.named.items():
        if isinstance(v, torch.Tensor):
            yield name, v
        else:
            for e in v:
                yield name, e
    if call.module is not None:
        for pname, p in call.module.named_parameters():
            yield f"self.{pname}", p
        for bname, b in call.module.named_buffers():
            yield f"self.{bname}", b


def _versions(call: Call) -> dict[str, list[int]]:
    vs: dict[str, list[int]] = {}
    for name, t in _candidates(call):
        vs.setdefault(name, []).append(t._version)
    return vs


def run(
    spec: Spec,
    arg_names: list[str],
    sources: set[str],
    train: bool = True,
    autocast: bool = False,
) -> RunResult:
    """Call once with exactly ``sources`` requiring grad; classify every saved tensor."""
    call = materialize(spec, arg_names, sources, train)
    packed: list[tuple[torch.Tensor, int]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        packed.append((t, t._version))
        return t

    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    before = _versions(call)
    snapshot = [(n, c.detach().clone()) for n, c in _candidates(call)] if not sources else []
    res = RunResult(named=call.named)
    ctx = torch.autocast(DEVICE[0], dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    try:
        with ctx, torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = invoke(spec, call)
    except Exception as e:  # reported by the caller
        res.error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
        return res
    res.output = out
    after = _versions(call)
    for name, vs in after.items():
        if vs != before.get(name):
            res.mutated.add(name)
    for (name, old), (_, now) in zip(snapshot, _candidates(call)):
        if name in res.mutated or old.shape != now.shape or old.dtype != now.dtype:
            continue
        same = torch.equal(old, now.detach()) or (
            old.is_floating_point() and torch.allclose(old, now.detach(), rtol=0, atol=0, equal_nan=True)
        )
        if not same:
            res.silent.add(name)
    outs = flatten_tensors(out)
    cands = list(_candidates(call))
    for t, ver in packed:
        sp = _storage(t)
        hits: list[tuple[str, torch.Tensor]] = []
        if sp is not None:
            hits = [(n, c) for n, c in cands if _storage(c) == sp]
            out_hits = [i for i, o in enumerate(outs) if _storage(o) == sp]
        else:
            # a sparse tensor has no single storage: it is saved as the very tensor object
            hits = [(n, c) for n, c in cands if c is t]
            out_hits = [i for i, o in enumerate(outs) if o is t]
        if hits and out_hits:
            # the output aliases an argument: an in-place op, or an op returning a view/its input.
            name = hits[0][0]
            pre = before.get(name, [0])[0]
            if name in res.mutated and ver > pre:
                res.saved_outputs.add(out_hits[0])
            else:
                res.saved.add(name)
        elif hits:
            res.saved.add(hits[0][0])
        elif out_hits:
            res.saved_outputs.add(out_hits[0])
        else:
            res.internal += 1
            if autocast and t.dtype == torch.bfloat16:
                # the cast copy may be saved as a view of itself (F.linear saves weight.t()): compare the
                # multiset of values, which identifies the source among random sample tensors
                tv = t.detach().flatten().sort().values
                for n, c in cands:
                    if c.dtype != torch.float32 or c.numel() != t.numel():
                        continue
                    if torch.equal(c.detach().to(torch.bfloat16).flatten().sort().values, tv):
                        res.casts.add(n)
                        break
    return res


def view_relation(spec: Spec, arg_names: list[str]) -> tuple[str | None, str | None, str | None]:
    """(view_of, returns_arg, shares_storage_of) of the output with respect to the tensor args.

    view_of: shares storage and version counter; returns_arg: the very same tensor; shares_storage_of:
    shares storage but has its own version counter (``x.data``: writes through it are invisible to autograd).
    """
    call = materialize(spec, arg_names, set())
    try:
        out = invoke(spec, call)
    except Exception:
        return None, None, None
    if not isinstance(out, torch.Tensor):
        return None, None, None
    so = _storage(out)
    if so is None:
        return None, None, None
    for name, v in call.named.items():
        if not isinstance(v, torch.Tensor) or _storage(v) != so:
            continue
        if out is v:
            return None, name, None
        before = out._version
        torch.autograd.graph.increment_version(v)
        if out._version != before:
            return name, None, None
        return None, None, name
    return None, None, None


def multi_output_view(spec: Spec, arg_names: list[str], sources: set[str]) -> bool:
    """In-place on output[0] of a multi-output view op raises the "multiple views" error."""
    call = materialize(spec, arg_names, sources)
    try:
        out = invoke(spec, call)
    except Exception:
        return False
    if isinstance(out, torch.Tensor):
        return False
    try:
        outs = list(out)
    except TypeError:
        return False
    if len(outs) < 2 or not all(isinstance(o, torch.Tensor) for o in outs):
        return False
    try:
        outs[0].mul_(2)
    except RuntimeError as e:
        return "multiple views" in str(e)
    return False


def runs_under_no_grad(spec: Spec, arg_names: list[str], mutated: list[str]) -> bool:
    """An in-place write on a leaf requiring grad does not raise: the callable uses no_grad internally."""
    leafs = {m for m in mutated if not m.startswith("self.")}
    if not leafs:
        return False
    call = materialize(spec, arg_names, leafs, leaf_args=leafs)
    if not any(isinstance(call.named.get(n), torch.Tensor) and call.named[n].requires_grad for n in leafs):
        return False
    try:
        invoke(spec, call)
    except RuntimeError:
        return False
    return True


def accepts_out(spec: Spec, arg_names: list[str]) -> bool:
    if spec.kind not in ("function",) or spec.variant is not None:
        return False
    call = materialize(spec, arg_names, set())
    try:
        out = invoke(spec, call)
    except Exception:
        return False
    if isinstance(out, torch.Tensor):
        target: Any = torch.empty_like(out)
    elif isinstance(out, tuple) and out and all(isinstance(o, torch.Tensor) for o in out):
        target = tuple(torch.empty_like(o) for o in out)
    else:
        return False
    call = materialize(spec, arg_names, set())
    try:
        with warnings_off():
            spec.fn(*call.args, **call.kwargs, out=target)
    except Exception:
        return False
    return True


@contextlib.contextmanager
def warnings_off() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
