"""Which functions' results the workspace differentiates: names whose call results reach ``backward()``.

A function whose result some code differentiates runs with autograd on, and its tensor arguments may require
grad, wherever it is defined: smee's ``evaluate_harmonic_angle_energy(conformer, atom_indices, parameters)`` lives
in a file with no module, parameter or ``backward`` in sight, but its tests call ``energy.backward()`` on what it
returns, and users differentiate it with respect to the conformer to get forces. Its standalone analysis then
treats its parameters as a module's ``forward`` treats its inputs (they may require grad), not as data.

The scan reads one file's syntax, scope by scope (the module and each function, in source order, twice so that a
loop's later assignments reach its earlier uses), and follows names through assignments:

- ``v = f(...)``, ``v = a.f(...) + g(x)``, ``v += h(...)``: ``v`` comes from ``f`` (or ``a.f``), ``g``, ``h`` and
  from whatever ``x`` came from; ``fn = f`` makes ``fn(...)`` come from ``f``;
- a sink differentiates what its operand came from: ``X.backward()`` (and the arguments of
  ``accelerator.backward(X)``), ``torch.autograd.grad(X, ...)``, ``torch.autograd.backward(X)``, ``grad(X, ...)``
  where ``grad`` is imported from ``torch.autograd``, Lightning's ``self.manual_backward(X)``.

Names, not objects: a function is differentiated when a call of a callee by its name (the last part of a dotted
callee) reaches a sink somewhere in the workspace. Only files whose text mentions a sink are read.

Each differentiated name comes with the shapes of those calls (how many positional arguments, which keywords):
the parameters no such call passes keep what they are without the witness. torch_scatter's tests differentiate
``scatter_logsumexp(src, index)``; its ``out=None`` is never passed there, so it is no tensor that requires grad.
A name that reaches a sink without a call of it (``fn = f``), or a call that unpacks (``f(*args)``), passes
anything (:data:`ANY_ARGS`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

SINK_MARKERS = (".backward(", "autograd.grad(", "autograd.backward(", "manual_backward(")

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

ArgShape = tuple[int, frozenset[str]]  # a call's positional argument count and keyword names
ANY_ARGS: ArgShape = (-1, frozenset())  # a call that may pass every parameter


def arg_shape(call: ast.Call) -> ArgShape:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return ANY_ARGS
    return len(call.args), frozenset(k.arg for k in call.keywords if k.arg is not None)


def passes(shapes: frozenset[ArgShape], index: int, name: str) -> bool:
    """Does one of the calls ``shapes`` pass the parameter ``name``, the ``index``-th positional one (-1: keyword
    only)?"""
    return any(s == ANY_ARGS or 0 <= index < s[0] or name in s[1] for s in shapes)


def mentions_sink(text: str) -> bool:
    """Can the file hold a sink? (A text test: files that cannot are not parsed.)"""
    return any(m in text for m in SINK_MARKERS) or ("grad(" in text and "torch.autograd" in text)


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope``'s body in source order, not entering nested functions, lambdas or classes."""
    body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, _SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(n))))


def _dotted(e: ast.expr) -> str | None:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        head = _dotted(e.value)
        return f"{head}.{e.attr}" if head is not None else None
    return None


def _callee(e: ast.expr) -> str | None:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        return e.attr
    return None


Source = tuple[str, ArgShape]  # a callee name and how it was called


class _Scope:
    def __init__(self, grad_names: frozenset[str]):
        self.origins: dict[str, set[Source]] = {}
        self.grad_names = grad_names  # names `grad` was imported as from torch.autograd

    def sources(self, e: ast.expr) -> set[Source]:
        """The callees whose results ``e`` may hold or be computed from, with the shapes of their calls."""
        out: set[Source] = set()
        stack: list[ast.AST] = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, (ast.Lambda, *_SCOPES)):
                continue
            if isinstance(n, ast.Call):
                name = _callee(n.func)
                if name is not None:
                    out.add((name, arg_shape(n)))
                    # (`fn = f; fn(x)`: `fn`'s origins are `f` as a name, with any arguments)
                    out |= self.origins.get(_dotted(n.func) or "", set())
            elif isinstance(n, (ast.Name, ast.Attribute)):
                key = _dotted(n)
                if key is not None and key in self.origins:
                    out |= self.origins[key]
            stack.extend(ast.iter_child_nodes(n))
        return out

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        src = self.sources(value)
        if isinstance(value, (ast.Name, ast.Attribute)):  # `fn = f`: calling `fn` calls `f`, with any arguments
            name = _callee(value)
            if name is not None:
                src.add((name, ANY_ARGS))
        for t in _targets(target):
            key = _dotted(t)
            if key is not None:
                self.origins.setdefault(key, set()).update(src)

    def sink_operands(self, call: ast.Call) -> list[ast.expr]:
        f = call.func
        args = [*call.args, *(k.value for k in call.keywords if k.arg in (None, "outputs", "tensors", "loss"))]
        if isinstance(f, ast.Attribute):
            if f.attr == "backward":
                dotted = _dotted(f.value) or ""
                return args if dotted.endswith("autograd") else [f.value, *args]
            if f.attr == "manual_backward":
                return args[:1]
            if f.attr == "grad" and (_dotted(f.value) or "").endswith("autograd"):
                return args[:1]
        elif isinstance(f, ast.Name) and f.id in self.grad_names:
            return args[:1]
        return []


def _targets(t: ast.expr) -> Iterator[ast.expr]:
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _targets(e)
    elif isinstance(t, ast.Starred):
        yield from _targets(t.value)
    else:
        yield t


def differentiated_names(tree: ast.Module) -> dict[str, frozenset[ArgShape]]:
    """The callee names in ``tree`` whose call results reach a sink, each with the shapes of those calls (see the
    module docstring)."""
    grad_names = frozenset(a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                           and n.module == "torch.autograd" for a in n.names if a.name == "grad")
    out: dict[str, set[ArgShape]] = {}
    scopes: list[ast.AST] = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                                               ast.AsyncFunctionDef)))]
    for scope in scopes:
        nodes = list(_own_nodes(scope))
        sc = _Scope(grad_names)
        for _ in range(2):
            for n in nodes:
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        sc.bind(t, n.value)
                elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                    sc.bind(n.target, n.value)
                elif isinstance(n, ast.NamedExpr):
                    sc.bind(n.target, n.value)
        for n in nodes:
            if isinstance(n, ast.Call):
                for e in sc.sink_operands(n):
                    for name, shape in sc.sources(e):
                        out.setdefault(name, set()).add(shape)
    return {name: frozenset(shapes) for name, shapes in out.items()}
