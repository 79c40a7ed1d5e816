"""Sample inputs for every in-place ``Tensor.*_`` method not written by hand, synthesized from ATen schemas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradguard.knowledge._engine import Spec, warnings_off
from gradguard.knowledge._signature import aten_schemas
from gradguard.knowledge._specs import B, L, R, _method

_SKIP = {"requires_grad_", "share_memory_", "retain_grad"}  # no data write: probed by hand


def inplace_method_names() -> list[str]:
    return sorted(n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_"))


def inplace_function_names() -> list[str]:
    return sorted(
        n for n in dir(torch) if n.endswith("_") and not n.startswith("_") and callable(getattr(torch, n, None))
    )


def _value(arg: Any, ints: bool) -> Callable[[], Any] | None:
    t = str(arg.type)
    name = arg.name
    if t == "Tensor":
        if name in ("index", "indices"):
            return lambda: torch.tensor([0, 1])
        if name == "mask":
            return lambda: B(4, 6)
        return (lambda: L(4, 6)) if ints else (lambda: R(4, 6))
    if t in ("number", "Scalar"):
        return (lambda: 1) if ints else (lambda: 0.5)
    if t == "float":
        return lambda: 0.5
    if t in ("int", "SymInt"):
        v = 1 if "dim" in name else 2
        return lambda: v
    if t in ("List[int]", "List[SymInt]", "int[]", "SymInt[]"):
        return lambda: [4, 6]
    if t == "bool":
        return lambda: False
    if t.startswith("Optional") or t.endswith("?"):
        return lambda: None
    return None


def _candidate(attr: str, schema: Any, ints: bool, kind: str = "method") -> Spec | None:
    pos: list[Callable[[], Any]] = []
    kw: dict[str, Callable[[], Any]] = {}
    for a in schema.arguments[1:]:
        if a.has_default_value():
            continue
        v = _value(a, ints)
        if v is None:
            return None
        if a.kwarg_only:
            kw[a.name] = v
        else:
            pos.append(v)

    def inputs() -> tuple[list[Any], dict[str, Any]]:
        first = L(4, 6) if ints else R(4, 6)
        return [first, *(f() for f in pos)], {k: f() for k, f in kw.items()}

    names = [a.name for a in schema.arguments if not a.kwarg_only]
    if kind == "function":
        names = ["input" if n == "self" else n for n in names]
        return Spec(
            name=f"torch.{attr}", kind="function", fn=getattr(torch, attr), inputs=inputs,
            names=names[: 1 + len(pos)], params=names, aten=attr, note="sample inputs synthesized from the ATen schema",
        )
    names = ["self", *names[1:]]
    return Spec(
        name=f"Tensor.{attr}", kind="method", fn=_method(attr), inputs=inputs, names=names[: 1 + len(pos)],
        params=names, aten=attr, note="sample inputs synthesized from the ATen schema",
    )


def synth_inplace_specs(known: set[str]) -> list[Spec]:
    out: list[Spec] = []
    todo = [("method", a) for a in inplace_method_names()] + [("function", a) for a in inplace_function_names()]
    for kind, attr in todo:
        name = f"Tensor.{attr}" if kind == "method" else f"torch.{attr}"
        if name in known or attr in _SKIP:
            continue
        chosen = None
        for schema, ints in [(s, i) for i in (False, True) for s in aten_schemas(attr)]:
            if not schema.arguments or str(schema.arguments[0].type) != "Tensor":
                continue
            spec = _candidate(attr, schema, ints, kind)
            if spec is None:
                continue
            a, k = spec.inputs()
            try:
                with warnings_off():
                    spec.fn(*a, **k)
            except Exception:
                continue
            chosen = spec
            break
        if chosen is None:
            # not callable from a schema: derivatives.yaml fills it (see _derivatives.py)
            f = _method(attr) if kind == "method" else getattr(torch, attr)
            # torch.* functions that cannot be called on dense tensors are left out; every Tensor.*_ stays
            chosen = Spec(name=name, kind=kind, fn=f, inputs=lambda: ([R(4, 6)], {}), aten=attr,
                          optional=kind == "function")
        out.append(chosen)
    return out
