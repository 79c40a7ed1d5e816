"""Contracts that are not about one in-place op: a custom Function's ``mark_dirty``, an inference tensor an op
saves, a backward after the ``allow_mutation_on_saved_tensors()`` block, overlapping and stale views."""

from __future__ import annotations

import ast
import re

from gradguard.fixes.context import Ctx, _char_col, _insert, _replace, _short, _sp
from gradguard.fixes.shared import _clone_in
from gradguard.model import Edit, Fix, Span


def _module_scope(ctx: Ctx, line: int) -> ast.AST | None:
    """The function (or module) whose body holds ``line``, from the whole file's tree (None: it does not parse,
    or the line is in a class body)."""
    from gradguard.fixes.scope import enclosing_scope

    found = enclosing_scope(ctx.source, ctx.lines, line)
    if found is None or found[1] != 0:
        return None
    return found[0]


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope``'s own body (not those of functions, lambdas or classes nested in it)."""
    out: list[ast.AST] = []
    stack = list(getattr(scope, "body", []))
    while stack:
        n = stack.pop()
        out.append(n)
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                stack.append(c)
    return out


def _span_of(ctx: Ctx, node: ast.AST) -> Span:
    ln, el = node.lineno, node.end_lineno  # type: ignore[attr-defined]
    return Span(ln, _char_col(ctx.lines[ln - 1], node.col_offset) + 1,  # type: ignore[attr-defined]
                el, _char_col(ctx.lines[el - 1], node.end_col_offset) + 1)  # type: ignore[attr-defined]


_SAME_VALUE_METHODS = frozenset({"clone", "contiguous", "detach"})


def _copy_of(node: ast.AST, name: str) -> bool:
    """``x.clone()``, ``x.detach().clone()``, ``x.contiguous()``, ``torch.clone(x)``: a tensor with ``x``'s values
    (and shape) that is not ``x`` itself."""
    if not isinstance(node, ast.Call):
        return False
    while isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _SAME_VALUE_METHODS and not node.args and all(
                k.arg == "memory_format" for k in node.keywords):
            node = f.value
        elif isinstance(f, ast.Attribute) and f.attr == "clone" and isinstance(f.value, ast.Name) and \
                f.value.id == "torch" and len(node.args) == 1 and not node.keywords:
            node = node.args[0]
        else:
            return False
    return isinstance(node, ast.Name) and node.id == name


def _dirty_returned(ctx: Ctx) -> list[Fix]:
    """``ctx.mark_dirty(x)`` ... ``return x.clone()``: return ``x`` itself (torch requires each input modified in
    place to be an output). Same values: the copy had ``x``'s values."""
    name = ctx.m.receiver
    scope = _module_scope(ctx, ctx.m.stmt.line)
    if not name.isidentifier() or not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    nodes = _own_nodes(scope)
    if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in nodes):
        return []  # `x` is rebound in the forward: which tensor it names at the return is not the input
    edits: list[Edit] = []
    for n in nodes:
        if isinstance(n, ast.Return) and n.value is not None:
            items = n.value.elts if isinstance(n.value, (ast.Tuple, ast.List)) else [n.value]
            edits += [_replace(_span_of(ctx, v), name) for v in items if _copy_of(v, name)]
    if not edits:
        return []
    return [Fix(f"Return `{name}` itself, not a copy (an input marked dirty must be an output of the forward)", True,
                tuple(sorted(edits, key=lambda e: (e.line, e.column))), kind="return-dirty-input")]


def _dirty_drop(ctx: Ctx) -> list[Fix]:
    """``ctx.mark_dirty(t)`` of a tensor the forward made (not an input): drop it (only inputs can be dirty; a
    tensor the forward allocated needs no marking). Forward values and gradients do not change."""
    st = ctx.stmt()
    if st is None:
        return []
    call = st.tree.value if isinstance(st.tree, ast.Expr) else None
    if not isinstance(call, ast.Call) or call.keywords or not isinstance(call.func, ast.Attribute) or \
            call.func.attr != "mark_dirty":
        return []
    keep = [a for a in call.args if st.source_of(a) != ctx.m.receiver]
    if len(keep) == len(call.args) or any(isinstance(a, ast.Starred) for a in call.args):
        return []
    title = f"Remove `{_short(ctx.m.receiver, 32)}` from mark_dirty (it is not an input of the Function)"
    if keep:
        text = f"{st.source_of(call.func)}({', '.join(st.source_of(a) for a in keep)})"
        return [Fix(title, True, (_replace(st.span_of(call), text),), kind="drop-mark-dirty")]
    sp = ctx.m.stmt
    if not ctx.own_lines(sp):
        return []
    scope = _module_scope(ctx, sp.line)
    body = next((b for b in _bodies(scope) if any(s.lineno == sp.line for s in b)), None) if scope else None
    if body is None:
        return []
    if len(body) == 1:
        return [Fix(title, True, (_replace(Span(sp.line, sp.column, sp.end_line, len(ctx.lines[sp.end_line - 1]) + 1),
                                           "pass"),), kind="drop-mark-dirty")]
    return [Fix(title, True, (Edit(sp.line, 1, sp.end_line + 1, 1, ""),), kind="drop-mark-dirty")]


def _bodies(scope: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list of ``scope``'s own code (its body, and those of its if/for/while/with/try/match)."""
    from gradguard.fixes.scope import _sub_blocks

    out: list[list[ast.stmt]] = []
    todo: list[list[ast.stmt]] = [getattr(scope, "body", [])]
    while todo:
        b = todo.pop()
        out.append(b)
        todo.extend(sub for s in b if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    for sub in _sub_blocks(s))
    return out


_QUOTED = re.compile(r"`([^`]+)`")


def _inference_saved(ctx: Ctx) -> list[Fix]:
    """An op saves an inference tensor: give it a copy made outside inference_mode (``head(feats.clone())``), a
    normal tensor with the same values."""
    mm = _QUOTED.search(str(ctx.ex.get("what") or ""))
    if mm is None:
        return []
    saved = " ".join(mm.group(1).split())
    op = ctx.m.name or "the op"
    return [Fix(f.title.replace(" uses it", " uses it, a normal tensor instead of an inference one"), f.safe, f.edits,
                kind=f.kind) for f in _clone_in(ctx, ctx.m.node, saved, op)]


def _am_outside(ctx: Ctx) -> list[Fix]:
    """``backward()`` after the ``allow_mutation_on_saved_tensors()`` block whose graph saved tensors: extend the
    block down to the backward (the statements in between are indented into it). The context only changes what
    an in-place write to a saved tensor does (it keeps a copy), so every value is the same."""
    sp = ctx.m.stmt
    scope = _module_scope(ctx, sp.line)
    if scope is None:
        return []
    body = next((b for b in _bodies(scope) if any(s.lineno == sp.line for s in b)), None)
    if body is None:
        return []
    i = next(k for k, s in enumerate(body) if s.lineno == sp.line)
    j = next((k for k in range(i - 1, -1, -1) if isinstance(body[k], (ast.With, ast.AsyncWith)) and any(
        "allow_mutation_on_saved_tensors" in (ast.get_source_segment(ctx.source, it.context_expr) or "")
        for it in body[k].items)), None)  # type: ignore[attr-defined]
    if j is None:
        return []
    block = body[j]
    first, last = block.end_lineno + 1, body[i].end_lineno  # type: ignore[operator]
    if last is None or any(isinstance(n, (ast.Constant, ast.JoinedStr)) and isinstance(getattr(n, "value", ""), str)
                           and n.lineno != n.end_lineno for k in range(j + 1, i + 1) for n in ast.walk(body[k])):
        return []  # a string spanning lines would change if its lines were indented
    unit = ctx.indent_unit(block.lineno)
    edits = tuple(_insert(ln, 1, unit) for ln in range(first, last + 1) if ctx.lines[ln - 1].strip())
    if not edits:
        return []
    return [Fix(f"Move the backward into the `allow_mutation_on_saved_tensors()` block (line {block.lineno}): "
                f"its saved copies exist only while the block runs", True, edits, kind="extend-block")]


def _overlap(ctx: Ctx) -> list[Fix]:
    """A write into an expanded tensor: ``.clone()`` it where it is expanded, so each element has its own memory.
    The clone holds the same values the expanded tensor showed, and it is differentiable: what the code computes,
    forward and backward, is what it meant; only the write no longer lands in the one shared element."""
    es = _sp(ctx.ex.get("expanded_site"))
    if es is None or es.line != es.end_line:
        return []
    return [Fix("Clone the expanded tensor where it is made, so that each element has its own memory", True,
                (_insert(es.end_line, es.end_column, ".clone()"),), kind="clone-expanded")]


def _overlap_read(ctx: Ctx) -> list[Fix]:
    """An in-place op that reads a slice of the tensor it writes, overlapping it (``x[1:] += x[:-1]``): clone what
    it reads. Every element is then computed from the values before the write, which is what the line says (and
    what NumPy does with overlapping operands)."""
    rs = _sp(ctx.ex.get("read_span"))
    if rs is None or rs.line != rs.end_line:
        return []
    return [Fix(f"Clone what is read: `{_short(ctx.text(rs), 32)}.clone()` (the values before the write)", True,
                (_insert(rs.end_line, rs.end_column, ".clone()"),), kind="clone-read")]


def _inference_stats(ctx: Ctx) -> list[Fix]:
    """A normalization layer built inside ``inference_mode()`` and trained: build it under ``no_grad()`` instead (the
    ``with`` around its constructor), so its running statistics are ordinary buffers. Everything made in that block
    becomes an ordinary tensor too: the values are the same, but which tensors are inference tensors is not, so the
    fix is not marked safe."""
    cs = _sp(ctx.ex.get("ctor_span"))
    if cs is None:
        return []
    try:
        tree = ast.parse(ctx.source)
    except (SyntaxError, ValueError):
        return []
    block = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.lineno < cs.line <= (node.end_lineno or 0):
            for it in node.items:
                e = it.context_expr
                if isinstance(e, ast.Call) and not e.args and not e.keywords and \
                        isinstance(e.func, (ast.Attribute, ast.Name)) and \
                        (e.func.attr if isinstance(e.func, ast.Attribute) else e.func.id) == "inference_mode":
                    if block is None or node.lineno > block[0].lineno:
                        block = (node, e)
    if block is None:
        return []
    func = block[1].func
    line = ctx.lines[func.lineno - 1]
    end = _char_col(line, func.end_col_offset or 0)
    start = end - len("inference_mode")
    return [Fix("Build the layer under `no_grad()` instead of `inference_mode()`, so that its running statistics are "
                "ordinary buffers that training may update", False,
                (Edit(func.lineno, start + 1, func.lineno, end + 1, "no_grad"),), kind="no-grad-block")]


