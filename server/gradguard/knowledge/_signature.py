"""Parameter names of torch callables: inspect.signature for Python code, the ATen schema for builtins."""

from __future__ import annotations

import inspect
from typing import Any

import torch


def _is_tensorish(v: Any) -> bool:
    return isinstance(v, torch.Tensor) or (
        isinstance(v, (list, tuple)) and bool(v) and all(isinstance(e, torch.Tensor) for e in v)
    )


def aten_schemas(op: str) -> list[Any]:
    try:
        return list(torch._C._jit_get_schemas_for_operator(f"aten::{op}"))
    except Exception:
        return []


def pick_schema(op: str, args: list[Any], kwargs: dict[str, Any]) -> Any | None:
    """The ATen overload the sample call binds to (by positional count and Tensor-vs-scalar types)."""
    best = None
    for s in aten_schemas(op):
        pos = [a for a in s.arguments if not a.kwarg_only]
        kwo = {a.name for a in s.arguments if a.kwarg_only}
        if "out" in kwo:
            continue
        names = {a.name for a in s.arguments}
        if len(args) > len(pos):
            # Python varargs (x.view(6, 4)): keep the overload with the most positionals as a fallback
            if best is None or len(pos) > len([a for a in best.arguments if not a.kwarg_only]):
                best = s
            continue
        required = [a for a in pos if not a.has_default_value()]
        if len(args) < len(required):
            continue
        ok = True
        for a, v in zip(pos, args):
            t = str(a.type)
            tens = t.startswith("Tensor") and "[]" not in t
            tlist = (t.startswith("Tensor") and "[]" in t) or t.startswith("List[Tensor")
            if isinstance(v, torch.Tensor) != tens and not (tlist and _is_tensorish(v)):
                ok = False
                break
        if ok and all(k in names or k == "self" for k in kwargs):
            return s
        if best is None:
            best = s
    return best


def python_params(fn: Any) -> list[str] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    out = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            out.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            out.append(p.name)
            break
    return out


def builtin_params(op: str, args: list[Any], kwargs: dict[str, Any], kind: str) -> list[str] | None:
    """Positional parameter names from the ATen schema; torch.* functions call ``self`` ``input``."""
    s = pick_schema(op, args, kwargs)
    if s is None:
        return None
    names = [a.name for a in s.arguments if not a.kwarg_only]
    if kind == "function":
        names = ["input" if n == "self" else n for n in names]
    return names
