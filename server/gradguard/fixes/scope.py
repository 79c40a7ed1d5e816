"""Just enough scope analysis to decide whether a rewrite is *safe* (keeps every forward value).

Rewriting ``x.mul_(2)`` as ``x = x.mul(2)`` (or cloning ``x`` before an item assignment) changes which tensor
the name ``x`` points at; the old tensor is no longer modified. That keeps every forward value exactly when no
one else can observe the old tensor: ``x`` is a local of the enclosing function (not a parameter, not global),
every binding of ``x`` makes a new tensor (a call that is not a view op, arithmetic), and ``x`` is never
aliased (``y = x``, stored in a container, appended to a list). Only the enclosing function is parsed (with
``ast``, found by indentation), or the module when the statement is at module level.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence
from functools import lru_cache

# Methods/functions whose result may share storage (or be the same tensor): binding a name to their result
# makes an alias, not a new tensor.
VIEW_OPS = frozenset("""
view view_as reshape reshape_as t T mT mH H transpose permute squeeze unsqueeze expand expand_as narrow select
detach detach_ flatten unflatten unbind chunk split tensor_split split_with_sizes hsplit vsplit dsplit contiguous
as_strided diagonal movedim moveaxis swapaxes swapdims real imag unfold to type type_as float double half bfloat16
int long bool cpu cuda data requires_grad_ broadcast_to view_as_real view_as_complex indices values
values_as_tensor alias squeeze_copy identity Identity __getitem__ get getattr
""".split())

_DEF_RE = re.compile(r"(?:async\s+)?def\b")
_CLASS_RE = re.compile(r"class\b")


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


@lru_cache(maxsize=4)
def parse_module(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


@lru_cache(maxsize=64)
def _parse_chunk(chunk: str) -> ast.Module | None:
    try:
        return ast.parse(chunk)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def enclosing_scope(source: str, lines: Sequence[str], line: int) -> tuple[ast.AST, int] | None:
    """(scope node, line offset) of the function holding ``line``, or of the module. None in a class body."""
    if not (1 <= line <= len(lines)):
        return None
    ind = _indent(lines[line - 1])
    def_line = 0
    i = line - 1
    while i >= 1 and ind > 0:
        t = lines[i - 1]
        s = t.lstrip()
        if s and not s.startswith("#") and _indent(t) < ind:
            if _DEF_RE.match(s):
                def_line = i
                break
            if _CLASS_RE.match(s):
                return None
            ind = _indent(t)
        i -= 1
    if not def_line:
        mod = parse_module(source)
        return (mod, 0) if mod is not None else None
    def_ind = _indent(lines[def_line - 1])
    end = def_line
    for j in range(def_line + 1, len(lines) + 1):
        t = lines[j - 1]
        s = t.strip()
        if s and not s.startswith("#") and _indent(t) <= def_ind and not s.startswith(")"):
            break
        end = j
    chunk = textwrap.dedent("\n".join(lines[def_line - 1:end]))
    tree = _parse_chunk(chunk)
    if tree is None or not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        mod = parse_module(source)
        if mod is None:
            return None
        best: ast.AST = mod
        for node in ast.walk(mod):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (
                    node.end_lineno or node.lineno) and node.lineno >= getattr(best, "lineno", 0):
                best = node
        return best, 0
    return tree.body[0], def_line - 1


def makes_new_tensor(node: ast.AST | None) -> bool:
    """Does evaluating ``node`` produce a tensor no other name refers to?"""
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(node, ast.IfExp):
        return makes_new_tensor(node.body) and makes_new_tensor(node.orelse)
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if not name or name in VIEW_OPS:
            return False
        if name.endswith("_") and not name.endswith("__"):
            return False  # in-place ops return their (existing) receiver
        return not (name in ("Parameter",) or name.startswith("register_"))
    return False


def _names_in(target: ast.AST) -> list[ast.Name]:
    return [n for n in ast.walk(target) if isinstance(n, ast.Name)]


@lru_cache(maxsize=64)
def _scope_nodes(scope: ast.AST) -> tuple[ast.AST, ...]:
    """Every node of ``scope`` except the bodies of nested functions, lambdas and classes (cached: the scope
    trees come from cached parses, so each is walked once however many findings it holds)."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(n))
    return tuple(out)


_STORE_CALLS = frozenset({"append", "extend", "insert", "add", "setdefault", "update", "register_buffer",
                          "put", "push", "appendleft"})


def is_private_tensor(source: str, lines: Sequence[str], line: int, name: str) -> bool:
    """True when rebinding ``name`` at ``line`` cannot change what any other name or caller sees."""
    found = enclosing_scope(source, lines, line)
    if found is None:
        return False
    scope, offset = found
    rel = line - offset  # the mutation's line in the scope's own numbering
    # Aliases made after the mutation do not matter (they see the rebound name), unless a loop brings them back
    # before it: the danger zone is everything before the mutation plus every loop that holds it.
    loops = [(n.lineno, n.end_lineno or n.lineno) for n in _scope_nodes(scope)
             if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and n.lineno <= rel <= (n.end_lineno or n.lineno)]

    def before(n: ast.AST) -> bool:
        ln = getattr(n, "lineno", 0)
        return ln < rel or any(a <= ln <= b for a, b in loops)

    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = scope.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
        if a.vararg:
            params.append(a.vararg)
        if a.kwarg:
            params.append(a.kwarg)
        if any(p.arg == name for p in params):
            return False
    bindings = 0
    for n in _scope_nodes(scope):
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return False
        if isinstance(n, ast.Assign):
            hit = [t for t in n.targets if any(x.id == name for x in _names_in(t) if isinstance(x.ctx, ast.Store))]
            if hit:
                if len(n.targets) > 1 or not isinstance(hit[0], ast.Name) or not makes_new_tensor(n.value):
                    return False
                bindings += 1
            if isinstance(n.value, ast.Name) and n.value.id == name and before(n):
                return False  # y = x: an alias
        elif isinstance(n, (ast.AnnAssign,)):
            if isinstance(n.target, ast.Name) and n.target.id == name:
                if not makes_new_tensor(n.value):
                    return False
                bindings += 1
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            if any(x.id == name for x in _names_in(n.target)):
                return False
        elif isinstance(n, ast.withitem):
            if n.optional_vars is not None and any(x.id == name for x in _names_in(n.optional_vars)):
                return False
        elif isinstance(n, ast.NamedExpr):
            if n.target.id == name and not makes_new_tensor(n.value):
                return False
        elif isinstance(n, (ast.List, ast.Tuple, ast.Set)) and isinstance(getattr(n, "ctx", ast.Load()), ast.Load):
            if any(isinstance(e, ast.Name) and e.id == name for e in n.elts) and before(n):
                return False  # stored in a container
        elif isinstance(n, ast.Dict):
            if any(isinstance(e, ast.Name) and e.id == name for e in n.values) and before(n):
                return False
        elif isinstance(n, (ast.Yield, ast.YieldFrom)):
            if isinstance(n.value, ast.Name) and n.value.id == name and before(n):
                return False
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _STORE_CALLS:
            if any(isinstance(e, ast.Name) and e.id == name for e in n.args) and before(n):
                return False
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            if any((al.asname or al.name) == name for al in n.names):
                return False
    return bindings > 0
