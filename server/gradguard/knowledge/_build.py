"""Turn probe runs into table entries (see the schema in :mod:`gradguard.knowledge`)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch

from gradguard.knowledge import _engine as E
from gradguard.knowledge._engine import Spec, _seed
from gradguard.knowledge._signature import builtin_params, python_params


def _params(spec: Spec, sample_args: list[Any], sample_kwargs: dict[str, Any]) -> list[str]:
    if spec.params is not None:
        return list(spec.params)
    if spec.kind == "module":
        m = spec.fn()
        init = python_params(type(m).__init__) or []
        return [p for p in init if p not in ("self", "args")]
    target: Any = spec.fn
    if spec.kind == "method":
        target = getattr(torch.Tensor, spec.aten or spec.name.split(".", 1)[1], None)
    ps: list[str] | None = None
    if inspect.isfunction(target) or inspect.ismethod(target):
        ps = python_params(target)
        if ps and ps[0] == "args":
            # torch.nn.functional.max_pool2d & co. dispatch on return_indices: read the real signature
            real = getattr(inspect.getmodule(target), f"{target.__name__}_with_indices", None)
            ps = python_params(real) if real is not None else ps
    if ps is None:
        ps = builtin_params(str(spec.aten or getattr(spec.fn, "__name__", "")), sample_args, sample_kwargs, spec.kind)
    if ps is None:
        ps = []
    if spec.kind == "method":
        # the receiver is the schema's ``self`` (not always its first argument: where(condition, self, other))
        ps = ["self", *[p for p in ps if p != "self"]] if "self" in ps else ["self", *ps[1:]]
    return ps


def _arg_names(spec: Spec, params: list[str], n: int) -> list[str]:
    if spec.names is not None:
        return list(spec.names)
    if spec.kind == "module":
        m = spec.fn()
        fwd = python_params(m.forward) or []
        base = [p for p in fwd if p != "self"]
    else:
        base = list(params)
    return [base[i] if i < len(base) else f"arg{i}" for i in range(n)]


def _ordered(names: set[str], order: list[str]) -> list[str]:
    return [n for n in order if n in names] + sorted(names - set(order))


def probe_spec(spec: Spec) -> dict[str, Any]:
    _seed()
    sample_args, sample_kwargs = spec.inputs()
    params = _params(spec, sample_args, sample_kwargs)
    arg_names = _arg_names(spec, params, len(sample_args))
    plain = E.materialize(spec, arg_names, set())
    tensor_args = [n for n in arg_names if n in plain.named] + [k for k in sample_kwargs if k in plain.named]
    float_args = []
    for n in tensor_args:
        v = plain.named[n]
        vs = v if isinstance(v, list) else [v]
        if vs and all(t.is_floating_point() or t.is_complex() for t in vs) and not spec.grad_params:
            float_args.append(n)
    own = [f"self.{p}" for p, _ in plain.module.named_parameters()] if plain.module is not None else []
    # a tensor given to the constructor that the module keeps as a buffer (the very same tensor object)
    buffers = sorted(b for b, _ in plain.module.named_buffers() if b in params) if plain.module is not None else []
    sources = float_args + own
    entry: dict[str, Any] = {"kind": spec.kind, "args": tensor_args, "params": params, "source": "probe"}
    if spec.note:
        entry["note"] = spec.note
    if spec.attribute:
        entry["attribute"] = True
    if buffers:
        entry["buffers"] = buffers

    base = E.run(spec, arg_names, set())
    if base.error and sources:
        base = E.run(spec, arg_names, set(sources))  # e.g. retain_grad needs a tensor requiring grad
    if base.error:
        entry["error"] = base.error
        entry["source"] = "failed"
        return entry
    mutated = set(base.mutated)
    if base.silent:
        entry["writes_without_version_bump"] = sorted(base.silent)
    saves: dict[str, list[str]] = {}
    saves_output: list[str] = []
    out_idx: set[int] = set()
    internal = False
    grad_out = False  # does any output require grad when an input does?
    grad_from: list[str] = []  # the inputs whose requiring grad makes an output require grad
    grad_idx: set[int] = set()  # which outputs of a tuple require grad (topk: the values, never the indices)
    not_implemented = True  # every output that requires grad hangs on a NotImplemented node (binomial)
    for src in sources:
        r = E.run(spec, arg_names, {src})
        if r.error:
            if "not differentiable with respect to" in r.error:
                entry.setdefault("non_differentiable", []).append(src)
            elif "require" in r.error and "grad" in r.error:
                entry.setdefault("rejects_requires_grad", []).append(src)
            else:
                entry.setdefault("errors", {})[src] = r.error
            continue
        mutated |= r.mutated
        if any(t.requires_grad for t in E.flatten_tensors(r.output)):
            grad_out = True
            grad_from.append(src)
            grad_idx |= {i for i, t in enumerate(E.flatten_tensors(r.output)) if t.requires_grad}
            not_implemented &= all(type(t.grad_fn).__name__ == "NotImplemented"
                                   for t in E.flatten_tensors(r.output) if t.requires_grad)
        for name in r.saved:
            saves.setdefault(name, []).append(src)
        if r.saved_outputs:
            saves_output.append(src)
            out_idx |= r.saved_outputs
        internal = internal or r.internal > 0
    entry["saves"] = {k: v for k, v in sorted(saves.items())}
    entry["saves_output"] = saves_output
    if float_args and not grad_out and E.flatten_tensors(base.output) and "non_differentiable" not in entry \
            and "errors" not in entry:
        # zeros_like, new_empty, argmax, bernoulli: the result never requires grad, whatever the inputs
        entry["output_requires_grad"] = False
    elif grad_out and spec.kind != "module" and set(grad_from) != set(tensor_args) and "errors" not in entry:
        # expand_as(other), type_as(other): `other` gives a shape or a dtype, not a value the result depends on.
        # scatter_add_(dim, index, src), gather, embedding: the index is an integer tensor, which torch never lets
        # require grad; the result's grad comes from the others alone
        entry["grad_from"] = [a for a in grad_from if a in float_args]
    if grad_out and not_implemented and "errors" not in entry:
        # binomial, floor_divide: the result requires grad, but its backward raises "the derivative for ... is
        # not implemented" before it reaches anything the inputs were computed from
        entry["backward_not_implemented"] = True
    if spec.kind != "module" and len(float_args) >= 2:
        when_number = _number_variants(spec, arg_names, float_args, saves, saves_output)
        if when_number:
            entry["when_number"] = when_number
    outs = E.flatten_tensors(base.output)
    if isinstance(base.output, (tuple, list)):
        entry["returns_tuple"] = True  # unpacking the result gives its outputs, not views of one tensor
        entry["n_outputs"] = len(base.output)
        if grad_idx and len(grad_idx) < len(outs):
            entry["grad_output_indices"] = sorted(grad_idx)  # the others are integer outputs (indices)
    if out_idx and not isinstance(base.output, torch.Tensor) and len(outs) > 1:
        entry["saved_output_indices"] = sorted(out_idx)
    if internal:
        entry["saves_internal"] = True
    arg_mut = [n for n in tensor_args if n in mutated]
    if spec.grad_params:
        arg_mut = []  # clip_grad_*: writes .grad, not the parameters' data
    if arg_mut:
        entry["mutates"] = arg_mut
    buf_mut = sorted(n for n in mutated if n.startswith("self."))
    if buf_mut:
        entry["mutates_state"] = buf_mut
    if spec.grad_params:
        entry["mutates_grad"] = tensor_args
    view_of, returns_arg, shares = E.view_relation(spec, arg_names)
    if shares:
        entry["shares_storage_of"] = shares
    if view_of:
        entry["view_of"] = view_of
    if returns_arg:
        entry["returns_arg"] = returns_arg
        if returns_arg not in arg_mut and not spec.grad_params and not spec.name.endswith("_"):
            # x.contiguous(), x.float(), nn.Identity: the very same tensor (same storage and version counter)
            entry["view_of"] = returns_arg
    if float_args and E.multi_output_view(spec, arg_names, set(float_args)):
        entry["multi_output_view"] = True
    if arg_mut and E.runs_under_no_grad(spec, arg_names, arg_mut):
        entry["no_grad"] = True
    if spec.kind == "function" and E.accepts_out(spec, arg_names):
        entry["accepts_out"] = True
    if sources and E.DEVICE[0] == "cpu":  # the table's autocast facts are CPU bfloat16 autocast
        ac = E.run(spec, arg_names, set(sources), autocast=True)
        casts = ac.casts - ac.saved  # a cast copy is saved and the float32 original is not
        if ac.error:
            # This CPU cannot run the op under bf16 autocast (oneDNN LSTM kernels need AVX-512): the probe
            # learns nothing here, and build_table keeps what a machine that could run it recorded.
            entry["_autocast_unprobed"] = True
        elif casts:
            entry["autocast_casts"] = _ordered(casts, sources)
    if spec.kind == "module" or spec.train_kwarg:
        ev_mut: set[str] = set()
        ev_saves: dict[str, list[str]] = {}
        ev_out: list[str] = []
        ev_internal = False
        for src in sources or [""]:
            r = E.run(spec, arg_names, {src} if src else set(), train=False)
            ev_mut |= {n for n in r.mutated if n in tensor_args}
            for name in r.saved:
                ev_saves.setdefault(name, []).append(src)
            if r.saved_outputs:
                ev_out.append(src)
            ev_internal = ev_internal or r.internal > 0
        tr_saves = bool(saves or saves_output or internal)
        ev_any = bool(ev_mut or ev_saves or ev_out or ev_internal)
        if (arg_mut or tr_saves) and not ev_any:
            entry["train_only"] = True
        elif ev_saves != saves or ev_out != saves_output or sorted(ev_mut) != sorted(arg_mut):
            # what changes in eval mode / training=False (e.g. BatchNorm saves no batch statistics)
            entry["eval"] = {
                "saves": dict(sorted(ev_saves.items())),
                "saves_output": ev_out,
                "mutates": [n for n in tensor_args if n in ev_mut],
            }
        if spec.train_kwarg:
            entry["train_kwarg"] = spec.train_kwarg
            default = _default(spec.fn, spec.train_kwarg)
            if default is not None:
                entry["train_kwarg_default"] = default
    if "inplace" in params:
        entry["inplace_kwarg"] = "inplace"
    if len(set(params)) != len(params) or len(set(tensor_args)) != len(tensor_args):
        entry["warning"] = "duplicate parameter names"
    return entry


def _saves_with(spec: Spec, arg_names: list[str], sources: list[str]) -> tuple[dict[str, list[str]], list[str]] | None:
    saves: dict[str, list[str]] = {}
    out: list[str] = []
    for src in sources:
        r = E.run(spec, arg_names, {src})
        if r.error:
            return None
        for name in r.saved:
            saves.setdefault(name, []).append(src)
        if r.saved_outputs:
            out.append(src)
    return dict(sorted(saves.items())), out


def _number_variants(
    spec: Spec, arg_names: list[str], float_args: list[str], saves: dict[str, list[str]], saves_output: list[str]
) -> dict[str, Any]:
    """What is saved when a tensor argument is a Python number instead (``x * 2``, ``x.pow(2)``), measured.

    ``differs`` marks the cases that cannot be read off the tensor case by dropping that argument
    (``x.pow(t)`` saves the result, ``x.pow(2)`` does not)."""
    out: dict[str, Any] = {}
    for arg in float_args:
        if arg not in arg_names or (arg == "self" and spec.kind == "method"):
            continue
        i = arg_names.index(arg)
        inputs = spec.inputs

        def num_inputs(inputs: Any = inputs, i: int = i) -> tuple[list[Any], dict[str, Any]]:
            a, k = inputs()
            a = list(a)
            a[i] = 2.0
            return a, k

        variant = dataclasses.replace(spec, inputs=num_inputs)
        rest = [a for a in float_args if a != arg]
        got = _saves_with(variant, arg_names, rest)
        if got is None:
            continue
        want = (
            {k: [c for c in v if c != arg] for k, v in saves.items() if k != arg},
            [c for c in saves_output if c != arg],
        )
        want = ({k: v for k, v in want[0].items() if v}, want[1])
        out[arg] = {"saves": got[0], "saves_output": got[1]}
        if got != want:
            out[arg]["differs"] = True  # not what the tensor case says with `arg` left out (pow)
    return out


def _default(fn: Any, name: str) -> Any:
    try:
        p = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):
        return None
    return None if p is None or p.default is inspect.Parameter.empty else p.default


def inplace_variant(spec: Spec) -> Spec:
    if spec.kind == "module":
        factory = spec.fn

        def make() -> Any:
            m = factory()
            m.inplace = True
            return m

        return dataclasses.replace(spec, name=f"{spec.name}[inplace=True]", fn=make, variant=("inplace", True))
    inputs = spec.inputs

    def inp() -> tuple[list[Any], dict[str, Any]]:
        a, k = inputs()
        return a, {**k, "inplace": True}

    return dataclasses.replace(spec, name=f"{spec.name}[inplace=True]", inputs=inp, variant=("inplace", True))


def _out_of_place(name: str, table: dict[str, Any]) -> str | None:
    cands = []
    if name.endswith("[inplace=True]"):
        cands.append(name[: -len("[inplace=True]")])
    elif name.startswith("operator.i") and name not in ("operator.invert", "operator.index"):
        cands.append("operator." + name[len("operator.i") :])
    elif name.endswith("_") and not name.endswith("__"):
        cands.append(name[:-1])
    for c in cands:
        if c in table:
            return c
    return None


def out_of_place_specs(specs: list[Spec]) -> list[Spec]:
    """``Tensor.X`` / ``torch.X`` for every probed in-place ``X_`` whose out-of-place form is not listed yet,
    called on the same sample inputs."""
    from gradguard.knowledge._specs import _method

    known = {s.name for s in specs}
    out = []
    for s in specs:
        if s.variant is not None or not s.name.endswith("_") or s.name.endswith("__"):
            continue
        base = s.name[:-1]
        owner, attr = base.split(".", 1) if base.count(".") == 1 else ("", "")
        if base in known or owner not in ("Tensor", "torch") or attr.endswith("_"):
            continue
        if owner == "Tensor" and callable(getattr(torch.Tensor, attr, None)):
            fn = _method(attr)
        elif owner == "torch" and callable(getattr(torch, attr, None)):
            fn = getattr(torch, attr)
        else:
            continue
        note = f"sample inputs of {s.name}" if s.note else None
        out.append(dataclasses.replace(s, name=base, fn=fn, aten=attr, note=note, optional=True))
        known.add(base)
    return out


# Ops that torch 2.0 removed, which older research code still calls (`evals, evecs = a.symeig(eigenvectors=True)`):
# they cannot be probed, but their backward saved what their successor's does, with the arguments renamed
# (old name -> (successor, kind, {successor's argument: old argument}, old parameters)). What old torch saved is in
# its derivatives.yaml: `symeig_backward(grads, self, eigenvectors, upper, eigenvalues, eigenvectors_return)`.
_REMOVED: dict[str, tuple[str, str, dict[str, str], tuple[str, ...]]] = {
    "torch.symeig": ("torch.linalg.eigh", "function", {"input": "input"}, ("input", "eigenvectors", "upper")),
    "Tensor.symeig": ("torch.linalg.eigh", "method", {"input": "self"}, ("self", "eigenvectors", "upper")),
}


def _add_removed(table: dict[str, Any]) -> None:
    """Entries for the ops in ``_REMOVED`` that this torch no longer runs, made from their successors'."""
    for name, (succ, kind, rename, params) in _REMOVED.items():
        base = table.get(succ)
        if base is None or table.get(name, {}).get("source") == "probe":
            continue
        entry = {k: _renamed(v, rename) for k, v in base.items() if k not in ("accepts_out", "cuda", "autocast_casts")}
        entry.update(kind=kind, params=list(params), source=f"removed in torch 2.0: as {succ} (not probed)")
        table[name] = entry


def _renamed(v: Any, rename: dict[str, str]) -> Any:
    """A table value with argument names renamed."""
    if isinstance(v, str):
        return rename.get(v, v)
    if isinstance(v, list):
        return [_renamed(x, rename) for x in v]
    if isinstance(v, dict):
        return {_renamed(k, rename): _renamed(x, rename) for k, x in v.items()}
    return v


def build_entries(device: str = "cpu") -> dict[str, Any]:
    """Probe every spec on ``device`` ("cpu" or "cuda")."""
    E.DEVICE[0] = device
    try:
        return _build_entries()
    finally:
        E.DEVICE[0] = "cpu"


def _build_entries() -> dict[str, Any]:
    from gradguard.knowledge._derivatives import fill_from_derivatives
    from gradguard.knowledge._specs import Unavailable, all_specs
    from gradguard.knowledge._synth import synth_inplace_specs

    specs = all_specs()
    known = {s.name for s in specs}
    specs += synth_inplace_specs(known)
    specs += out_of_place_specs(specs)
    table: dict[str, Any] = {}
    for spec in specs:
        try:
            entry = probe_spec(spec)
        except Unavailable:  # a module this torch does not have (nn.RMSNorm before 2.4)
            continue
        if spec.optional and entry.get("source") == "failed":
            continue
        table[spec.name] = entry
        if entry.get("inplace_kwarg") and spec.variant is None:
            v = inplace_variant(spec)
            ve = probe_spec(v)
            ve.pop("inplace_kwarg", None)
            table[v.name] = ve
    fill_from_derivatives(table)
    for name, entry in table.items():
        if entry.get("source") == "failed" and name.startswith("Tensor.") and name.endswith("_"):
            entry["mutates"] = ["self"]  # not callable on dense CPU tensors (sparse-only); by naming convention
            entry["source"] = "naming convention (not probed)"
    _add_removed(table)
    for name, entry in table.items():
        oop = _out_of_place(name, table)
        if oop and entry.get("mutates"):
            entry["out_of_place"] = oop
    return table
