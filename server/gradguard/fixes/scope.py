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
import bisect
import re
import textwrap
from collections.abc import Sequence
from functools import lru_cache

from gradguard.analysis.common import scope_nodes
from gradguard.model import source_lines

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


@lru_cache(maxsize=4)
def _owners(source: str) -> tuple[ast.Module, list[ast.AST | None]] | None:
    """The parsed module and, per line (1-based), the innermost function or class whose body holds it (None:
    module level). Built once per source text, so finding a finding's scope costs O(1) instead of a walk up
    the whole function for every finding."""
    mod = parse_module(source)
    if mod is None:
        return None
    nlines = len(source_lines(source)) + 2
    owner: list[ast.AST | None] = [None] * (nlines + 1)
    # ast.walk is breadth-first: an enclosing def is filled before the defs nested in it, which then override.
    for node in ast.walk(mod):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            start = node.body[0].lineno
            end = min(node.end_lineno or start, nlines)
            for ln in range(start, end + 1):
                owner[ln] = node
    return mod, owner


def enclosing_scope(source: str, lines: Sequence[str], line: int) -> tuple[ast.AST, int] | None:
    """(scope node, line offset) of the function holding ``line``, or of the module. None in a class body."""
    if not (1 <= line <= len(lines)):
        return None
    idx = _owners(source)
    if idx is not None:
        mod, owner = idx
        node = owner[line] if line < len(owner) else None
        if node is None:
            return mod, 0
        if isinstance(node, ast.ClassDef):
            return None
        return node, 0
    return _enclosing_scope_by_indent(source, lines, line)


def _enclosing_scope_by_indent(source: str, lines: Sequence[str], line: int) -> tuple[ast.AST, int] | None:
    """The same for a source that does not parse as a whole: the function is found by indentation and parsed
    on its own."""
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
        return None
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


# Every node of a scope except the bodies of nested functions, lambdas and classes (cached: the scope trees come
# from cached parses, so each is walked once however many findings it holds).
_scope_nodes = lru_cache(maxsize=64)(scope_nodes)


_STORE_CALLS = frozenset({"append", "extend", "insert", "add", "setdefault", "update", "register_buffer",
                          "put", "push", "appendleft"})


class _NameFacts:
    __slots__ = ("aliases", "bindings", "never")

    def __init__(self) -> None:
        self.never = False  # a binding that is not a new tensor, a loop/with target, global, import...
        self.bindings = 0  # bindings to a new tensor
        self.aliases: list[int] = []  # lines where it is aliased: y = x, [x], {k: x}, yield x, .append(x)


class _ScopeFacts:
    """What :func:`is_private_tensor` needs of one scope, for every name at once: one walk per scope, however
    many findings it holds."""

    def __init__(self, scope: ast.AST) -> None:
        self.params: set[str] = set()
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = scope.args
            self.params = {p.arg for p in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            if args.vararg:
                self.params.add(args.vararg.arg)
            if args.kwarg:
                self.params.add(args.kwarg.arg)
        self.names: dict[str, _NameFacts] = {}
        loops: list[tuple[int, int]] = []
        for n in _scope_nodes(scope):
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
                loops.append((n.lineno, n.end_lineno or n.lineno))
            self._visit(n)
        for f in self.names.values():
            f.aliases.sort()
        # The outermost loops (disjoint, sorted): every loop holding a line lies inside the outermost one.
        self.loops: list[tuple[int, int]] = []
        for a, b in sorted(loops, key=lambda x: (x[0], -x[1])):
            if self.loops and a <= self.loops[-1][1]:
                continue
            self.loops.append((a, b))
        self._loop_starts = [a for a, _ in self.loops]

    def _f(self, name: str) -> _NameFacts:
        f = self.names.get(name)
        if f is None:
            f = self.names[name] = _NameFacts()
        return f

    def _visit(self, n: ast.AST) -> None:
        line = getattr(n, "lineno", 0)
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                self._f(name).never = True
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                for name in {x.id for x in _names_in(t) if isinstance(x.ctx, ast.Store)}:
                    f = self._f(name)
                    if len(n.targets) > 1 or not isinstance(t, ast.Name) or not makes_new_tensor(n.value):
                        f.never = True
                    else:
                        f.bindings += 1
            if isinstance(n.value, ast.Name):
                self._f(n.value.id).aliases.append(line)
        elif isinstance(n, ast.AnnAssign):
            if isinstance(n.target, ast.Name):
                f = self._f(n.target.id)
                if not makes_new_tensor(n.value):
                    f.never = True
                else:
                    f.bindings += 1
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            for x in _names_in(n.target):
                self._f(x.id).never = True
        elif isinstance(n, ast.withitem):
            if n.optional_vars is not None:
                for x in _names_in(n.optional_vars):
                    self._f(x.id).never = True
        elif isinstance(n, ast.NamedExpr):
            if not makes_new_tensor(n.value):
                self._f(n.target.id).never = True
        elif isinstance(n, (ast.List, ast.Tuple, ast.Set)) and isinstance(getattr(n, "ctx", ast.Load()), ast.Load):
            for e in n.elts:
                if isinstance(e, ast.Name):
                    self._f(e.id).aliases.append(line)  # stored in a container
        elif isinstance(n, ast.Dict):
            for e in n.values:
                if isinstance(e, ast.Name):
                    self._f(e.id).aliases.append(line)
        elif isinstance(n, (ast.Yield, ast.YieldFrom)):
            if isinstance(n.value, ast.Name):
                self._f(n.value.id).aliases.append(line)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _STORE_CALLS:
            for e in n.args:
                if isinstance(e, ast.Name):
                    self._f(e.id).aliases.append(line)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for al in n.names:
                self._f(al.asname or al.name).never = True

    def private(self, name: str, rel: int) -> bool:
        if name in self.params:
            return False
        f = self.names.get(name)
        if f is None or f.never:
            return False
        # Aliases made after the mutation do not matter (they see the rebound name), unless a loop brings them
        # back before it: the danger zone is everything before the mutation plus every loop that holds it.
        if f.aliases and f.aliases[0] < rel:
            return False
        i = bisect.bisect_right(self._loop_starts, rel) - 1
        if i >= 0 and self.loops[i][0] <= rel <= self.loops[i][1]:
            a, b = self.loops[i]
            j = bisect.bisect_left(f.aliases, a)
            if j < len(f.aliases) and f.aliases[j] <= b:
                return False
        return f.bindings > 0


@lru_cache(maxsize=64)
def _scope_facts(scope: ast.AST) -> _ScopeFacts:
    return _ScopeFacts(scope)


def is_private_tensor(source: str, lines: Sequence[str], line: int, name: str) -> bool:
    """True when rebinding ``name`` at ``line`` cannot change what any other name or caller sees.

    ``name`` must be a local (not a parameter, not global), every binding of it must make a new tensor, and it
    must not be aliased before ``line`` or inside a loop holding ``line``."""
    found = enclosing_scope(source, lines, line)
    if found is None:
        return False
    scope, offset = found
    return _scope_facts(scope).private(name, line - offset)


def _stmt_start(s: ast.stmt) -> int:
    decos = getattr(s, "decorator_list", None) or []
    return min([s.lineno, *(d.lineno for d in decos)])


def _sub_blocks(s: ast.stmt) -> list[list[ast.stmt]]:
    out = [b for b in (getattr(s, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list) and b]
    for h in getattr(s, "handlers", None) or []:
        if h.body:
            out.append(h.body)
    for c in getattr(s, "cases", None) or []:
        if c.body:
            out.append(c.body)
    return out


class _StmtIndex:
    """Per source: for each block (a list of sibling statements), their first and last lines, for bisection."""

    def __init__(self, mod: ast.Module) -> None:
        self.mod = mod
        self._spans: dict[int, tuple[list[int], list[int]]] = {}

    def spans(self, block: list[ast.stmt]) -> tuple[list[int], list[int]]:
        got = self._spans.get(id(block))
        if got is None:
            got = self._spans[id(block)] = ([_stmt_start(s) for s in block],
                                            [s.end_lineno or s.lineno for s in block])
        return got


@lru_cache(maxsize=4)
def _stmt_index(source: str) -> _StmtIndex | None:
    mod = parse_module(source)
    return _StmtIndex(mod) if mod is not None else None


def statement_region(source: str, first: int, last: int) -> tuple[int, int, ast.stmt | None] | None:
    """The smallest run of whole sibling statements (first line, last line, the statement when it is one) that
    covers lines ``first..last``: replacing it with text that parses on its own (at the same indentation) keeps
    the module parseable. None when the lines hold no statement (blank lines, comments) or the source does not
    parse."""
    idx = _stmt_index(source)
    if idx is None:
        return None
    block: list[ast.stmt] = idx.mod.body
    while block:
        starts, ends = idx.spans(block)
        i = bisect.bisect_left(ends, first)
        j = bisect.bisect_right(starts, last)
        if i >= j:
            return None
        if j - i > 1:
            return starts[i], ends[j - 1], None
        s = block[i]
        for sub in _sub_blocks(s):
            sub_starts, sub_ends = idx.spans(sub)
            if sub_starts[0] <= first and last <= sub_ends[-1]:
                block = sub
                break
        else:
            return starts[i], ends[i], s
    return None


def _slots(node: ast.AST) -> list[ast.expr]:
    """The children of ``node`` that sit in a comma-separated slot (a call argument or keyword value, an element
    of a list/tuple/set, a dict value): any single expression may replace them."""
    if isinstance(node, ast.Call):
        return list(node.args)
    if isinstance(node, ast.keyword):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return list(node.elts)
    if isinstance(node, ast.Dict):
        return list(node.values)
    return []


@lru_cache(maxsize=4096)
def _children(node: ast.AST) -> tuple[list[tuple[int, int]], list[ast.expr | ast.keyword], frozenset[int]]:
    """The expression children of ``node`` sorted by position (start positions, the nodes), and the ids of those
    that sit in a slot: cached, so a call with thousands of arguments is scanned once, not once per fix."""
    kids = sorted((c for c in ast.iter_child_nodes(node) if isinstance(c, (ast.expr, ast.keyword))),
                  key=lambda c: (c.lineno, c.col_offset))
    return [(c.lineno, c.col_offset) for c in kids], kids, frozenset(id(x) for x in _slots(node))


def expression_slot(stmt: ast.stmt, start: tuple[int, int], end: tuple[int, int]) -> ast.expr | None:
    """The smallest expression in a comma-separated slot (see :func:`_slots`) of ``stmt`` whose span holds
    ``start..end`` (line, UTF-8 byte column), outside any f-string. None if there is none."""
    best: ast.expr | None = None
    node: ast.AST = stmt
    while True:
        if isinstance(node, ast.JoinedStr):
            return None  # a replacement inside an f-string may clash with its quotes
        starts, kids, slots = _children(node)
        i = bisect.bisect_right(starts, start) - 1
        nxt = None
        if i >= 0:
            child = kids[i]
            if end <= (child.end_lineno, child.end_col_offset):  # type: ignore[attr-defined]
                nxt = child
        if nxt is None:
            return best
        if id(nxt) in slots and isinstance(nxt, ast.expr) and not isinstance(nxt, ast.Starred):
            best = nxt
        node = nxt
