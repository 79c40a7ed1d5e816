"""In-place methods and functions (``x.mul_(2)``, ``x.mul_(s).add_(m)``, ``torch.relu_(x)``, foreach ops,
``Module._apply``), and writes into one of several views (iterate by index, one view at a time)."""

from __future__ import annotations

import ast
import re

from gradguard.fixes.context import OUT_OF_PLACE, Ctx, Stmt, _char_col, _insert, _paren, _replace, _short, _sp
from gradguard.fixes.shared import (
    _assignable,
    _clone_before,
    _is_parameter_attr,
    _leaf_fixes,
    _no_grad_wrap,
    _pure,
    _root,
)
from gradguard.model import Edit, Fix, Span


def _chain(expr: ast.AST) -> tuple[list[ast.Call], ast.AST]:
    """``x.a_(..).b_(..)`` -> ([outer call, ..., inner call], x): the in-place method calls down to the root."""
    calls: list[ast.Call] = []
    node = expr
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr.endswith("_") and not node.func.attr.endswith("__"):
        calls.append(node)
        node = node.func.value
    return calls, node


def _attr_name_span(st: Stmt, call: ast.Call) -> Span:
    f = call.func
    assert isinstance(f, ast.Attribute)
    end = st.pos(f.end_lineno, f.end_col_offset)  # type: ignore[arg-type]
    return Span(end[0], end[1] - len(f.attr), end[0], end[1])


def _method(ctx: Ctx) -> list[Fix]:
    st = ctx.stmt()
    if st is None:
        return []
    call = st.find(_sp(ctx.ex.get("call_span")), ast.Call)
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return []
    code = ctx.f.code
    name = call.func.attr
    oop = ctx.ex.get("out_of_place") or OUT_OF_PLACE.get(name)
    fixes: list[Fix] = []
    tree = st.tree
    if any(isinstance(lam, ast.Lambda) and any(x is call for x in ast.walk(lam.body)) for lam in ast.walk(tree)):
        # inside a lambda (a pack hook, a map): no statement to add, so the call itself goes out of place
        return [f for f in _nested_method(ctx, st, call, oop) if ":=" not in f.title]
    # 1. The whole statement is an in-place chain on an assignable root: rebind the root.
    if isinstance(tree, ast.Expr):
        calls, root = _chain(tree.value)
        if call in calls and _assignable(root):
            fixes += _rebind_chain(ctx, st, calls, root, call, oop)
    else:
        fixes += _nested_method(ctx, st, call, oop)
    base = _root(call.func.value)
    if code in ("GG101",) and isinstance(call.func.value, (ast.Name, ast.Subscript, ast.Attribute)):
        fixes += _clone_before(ctx, base if isinstance(call.func.value, ast.Subscript) else call.func.value, st,
                               None, code)
    if code in ("GG301", "GG304"):
        fixes = _leaf_fixes(ctx, st, fixes, call.func.value)
    if code == "GG302" and isinstance(base, ast.Name):
        fixes += _index_instead_of_iterating(ctx, base.id)
    if code == "GG302":
        fixes += _nograd_view_write(ctx, st)
    return fixes


def _nograd_view_write(ctx: Ctx, st: Stmt) -> list[Fix]:
    """A view made under no_grad: write through it under no_grad too (as it was made; autograd does not record
    the write, which it could not do for that view anyway). One of several views of a parameter
    (`rnn.bias_hh_l0.chunk(4)[1].fill_(1)`, setting a gate's bias): an initialisation, done under no_grad as
    `nn.init` does."""
    kind = ctx.f.facts.get("kind")
    if kind == "view_multi" and ctx.f.mutation is not None and ctx.f.mutation.extra.get("of_leaf"):
        return _no_grad_wrap(ctx, st.span, "Write under `with torch.no_grad():` (it sets a parameter's values, as "
                                           "`nn.init` does; autograd does not record it)")
    if kind != "view_nograd":
        return []
    return _no_grad_wrap(ctx, st.span, "Write under `with torch.no_grad():`, as the view was made (autograd does not "
                                       "record the write)")


def _rebind_chain(ctx: Ctx, st: Stmt, calls: list[ast.Call], root: ast.AST, flagged: ast.Call,
                  oop: str | None) -> list[Fix]:
    code = ctx.f.code
    if code in ("GG301", "GG304") and _is_parameter_attr(ctx, root):
        return []  # a Parameter attribute cannot be rebound to a plain tensor
    if code == "GG101" and isinstance(root, ast.Attribute) and _is_parameter_attr(ctx, root):
        return []
    rtext = st.source_of(root)
    edits: list[Edit] = [_insert(st.span.line, st.span.column, f"{rtext} = ")]
    inner = calls[-1]
    for c in calls:
        assert isinstance(c.func, ast.Attribute)
        new = oop if c is flagged and oop else OUT_OF_PLACE.get(c.func.attr)
        if new:
            edits.append(_replace(_attr_name_span(st, c), new))
        elif c is inner:
            rsp = st.span_of(root)
            edits.append(_insert(rsp.end_line, rsp.end_column, ".clone()"))
        # an in-place op further out now acts on a new tensor: leave it
    old = _short(st.text)
    from gradguard.fixes import apply_edits

    shifted = [Edit(e.line - st.span.line + 1, e.column - (st.span.column - 1 if e.line == st.span.line else 0),
                    e.end_line - st.span.line + 1,
                    e.end_column - (st.span.column - 1 if e.end_line == st.span.line else 0), e.text)
               for e in edits]
    preview = _short(apply_edits(st.text, shifted))
    safe = isinstance(root, ast.Name) and code in ("GG101",) and ctx.private(root.id) and \
        ctx.f.mutation is not None and not ctx.ex.get("is_view")
    note = " (the tensor it views is no longer modified)" if code == "GG302" else ""
    return [Fix(f"Rewrite `{old}` as `{preview}`{note}", safe, tuple(edits), kind="out-of-place")]


def _nested_method(ctx: Ctx, st: Stmt, call: ast.Call, oop: str | None) -> list[Fix]:
    """The in-place call is part of a larger expression: ``return x.clamp_(0, 1)``, ``y = f(x.mul_(2))``."""
    assert isinstance(call.func, ast.Attribute)
    recv = call.func.value
    csp = st.span_of(call)
    name_sp = _attr_name_span(st, call)
    fixes: list[Fix] = []
    plain: list[Edit] = []
    if oop:
        plain.append(_replace(name_sp, oop))
    else:
        rsp = st.span_of(recv)
        plain.append(_insert(rsp.end_line, rsp.end_column, ".clone()"))
    ctext = _short(st.source_of(call))
    newname = oop or f"clone().{call.func.attr}"
    if isinstance(recv, ast.Name) and not isinstance(st.tree, ast.Return):
        # keep the rebinding: (x := x.mul(2))
        walrus = [_insert(csp.line, csp.column, f"({recv.id} := "), *plain, _insert(csp.end_line, csp.end_column, ")")]
        fixes.append(Fix(f"Rewrite `{ctext}` as `({recv.id} := {recv.id}.{newname}(...))`",
                         ctx.f.code == "GG101" and ctx.private(recv.id), tuple(walrus), kind="out-of-place"))
    rtext = st.source_of(recv)
    safe = isinstance(recv, ast.Name) and isinstance(st.tree, ast.Return) and ctx.f.code == "GG101" and \
        ctx.private(recv.id)
    fixes.append(Fix(f"Use out-of-place `{rtext}.{newname}(...)` (`{_short(rtext, 24)}` itself is no longer modified)",
                     safe, tuple(plain), kind="out-of-place"))
    return fixes


def _function(ctx: Ctx) -> list[Fix]:
    st = ctx.stmt()
    if st is None:
        return []
    call = st.find(_sp(ctx.ex.get("call_span")), ast.Call)
    arg = st.find(_sp(ctx.ex.get("arg_span")))
    if not isinstance(call, ast.Call) or arg is None:
        return []
    oop = ctx.ex.get("out_of_place_func")
    fsp = st.span_of(call.func)
    func_text = st.source_of(call.func)
    atext = st.source_of(arg)
    edits_inner: list[Edit]
    if oop:
        edits_inner = [_replace(fsp, oop)]
        new_call = f"{oop}({atext}, ...)" if len(call.args) + len(call.keywords) > 1 else f"{oop}({atext})"
    else:
        asp = st.span_of(arg)
        edits_inner = [_insert(asp.end_line, asp.end_column, ".clone()")]
        new_call = f"{func_text}({atext}.clone(), ...)"
    code = ctx.f.code
    fixes: list[Fix] = []
    csp = st.span_of(call)
    if isinstance(st.tree, ast.Expr) and st.tree.value is call and _assignable(arg):
        if not (code in ("GG301", "GG304", "GG101") and _is_parameter_attr(ctx, arg)):
            safe = isinstance(arg, ast.Name) and code == "GG101" and ctx.private(arg.id)
            fixes.append(Fix(f"Rewrite `{_short(st.text)}` as `{atext} = {new_call}`", safe,
                             (_insert(st.span.line, st.span.column, f"{atext} = "), *edits_inner),
                             kind="out-of-place"))
    else:
        if isinstance(arg, ast.Name) and not isinstance(st.tree, ast.Return):
            fixes.append(Fix(f"Rewrite `{_short(st.source_of(call))}` as `({atext} := {new_call})`",
                             code == "GG101" and ctx.private(arg.id),
                             (_insert(csp.line, csp.column, f"({atext} := "), *edits_inner,
                              _insert(csp.end_line, csp.end_column, ")")), kind="out-of-place"))
        safe = isinstance(arg, ast.Name) and isinstance(st.tree, ast.Return) and code == "GG101" and \
            ctx.private(arg.id)
        fixes.append(Fix(f"Use out-of-place `{new_call}` (`{_short(atext, 24)}` itself is no longer modified)",
                         safe, tuple(edits_inner), kind="out-of-place"))
    if code in ("GG301", "GG304"):
        fixes = _leaf_fixes(ctx, st, fixes, arg)
    return fixes


def _unbind_call(call: ast.Call) -> tuple[ast.expr | None, int | None]:
    """``x.unbind()``, ``x.unbind(d)``, ``x.unbind(dim=d)``, ``torch.unbind(x, d)`` with a literal ``d >= 0``: (x, d)."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr != "unbind":
        return None, None
    args = list(call.args)
    if isinstance(f.value, ast.Name) and f.value.id == "torch":
        if not args:
            return None, None
        target: ast.expr = args.pop(0)
    else:
        target = f.value
    dims = [*args, *(k.value for k in call.keywords if k.arg == "dim")]
    if len(dims) + len([k for k in call.keywords if k.arg != "dim"]) > 1 or \
            any(k.arg != "dim" for k in call.keywords):
        return None, None
    if not dims:
        return target, 0
    d = dims[0]
    if isinstance(d, ast.Constant) and isinstance(d.value, int) and not isinstance(d.value, bool) and d.value >= 0:
        return target, d.value
    return None, None


def _free_index(used: set[str]) -> str | None:
    """A name for a comprehension's index that the code around does not use."""
    return next((v for v in ("i", "j", "k", "idx", "_i", "_row") if v not in used), None)


def _index_instead_of_iterating(ctx: Ctx, name: str) -> list[Fix]:
    """``for row in rows: row.mul_(2)``: iterating a tensor unbinds it (views that cannot be modified in
    place). Iterating over ``rows[i]`` (one single view each) keeps the write-through to ``rows``:
    ``for row in (rows[i] for i in range(len(rows))):``. Also inside ``zip(...)`` and ``enumerate(...)``."""
    view_op = str(ctx.ex.get("view_op", ""))
    if "iterating" not in view_op and not view_op.startswith("unbind"):
        return []
    hdr = 0
    for j, s in ctx.enclosing(ctx.m.stmt.line):
        if re.match(r"(async\s+)?for\b", s):
            hdr = j
            break
        if re.match(r"(async\s+)?def\b|class\b", s):
            return []
    if not hdr:
        return []
    text = ctx.lines[hdr - 1]
    lead = len(text) - len(text.lstrip())
    header = text.strip()
    try:
        node = ast.parse(header + "\n    pass\n").body[0]
    except SyntaxError:
        return []
    if not isinstance(node, ast.For):
        return []
    iterable: ast.AST | None = None
    if isinstance(node.target, ast.Name) and node.target.id == name:
        iterable = node.iter
    elif isinstance(node.target, ast.Tuple) and isinstance(node.iter, ast.Call) and \
            isinstance(node.iter.func, ast.Name):
        pos = next((k for k, e in enumerate(node.target.elts) if isinstance(e, ast.Name) and e.id == name), None)
        if pos is not None and node.iter.func.id == "zip" and pos < len(node.iter.args):
            iterable = node.iter.args[pos]
        elif pos == 1 and node.iter.func.id == "enumerate" and node.iter.args:
            iterable = node.iter.args[0]
    dim, span_node = 0, iterable
    if isinstance(iterable, ast.Call):
        # ``rows.unbind(d)`` / ``torch.unbind(rows, d)``: the same views, one call for all of them
        unbound, dim_arg = _unbind_call(iterable)
        if unbound is None or dim_arg is None:
            return []
        iterable, dim = unbound, dim_arg
    if iterable is None or not _pure(iterable) or not isinstance(iterable, (ast.Name, ast.Attribute, ast.Subscript)):
        return []
    ttext = ast.get_source_segment(header, iterable) or ""
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}  # the loop's own names too, for clarity
    idx = _free_index(used)
    if idx is None:
        return []
    one = f"{ttext}[{idx}]" if dim == 0 else f"{ttext}.select({dim}, {idx})"
    new = f"({one} for {idx} in range({f'len({ttext})' if dim == 0 else f'{ttext}.shape[{dim}]'}))"
    assert isinstance(span_node, ast.expr)
    col = lead + _char_col(header, span_node.col_offset) + 1
    end = lead + _char_col(header, span_node.end_col_offset or 0) + 1
    return [Fix(f"Iterate over `{one}` (views that may be modified in place) instead of unbinding "
                f"`{_short(ttext, 24)}`", True, (Edit(hdr, col, hdr, end, new),), kind="index-views")]


def _single_views(expr: ast.expr, src: str, taken: set[str]) -> tuple[str, str] | None:
    """The same views as ``expr`` makes, each its own single-output view (one ``select`` or ``narrow`` per
    piece), as (comprehension body and loop, what it replaces): ``list(w)`` / ``w.unbind(0)`` ->
    ``w[i] for i in range(len(w))``; ``x.split(n, d)`` -> ``x.narrow(d, i, min(n, x.shape[d] - i)) for i in
    range(0, x.shape[d], n)``; ``x.chunk(n, d)`` the same with the chunk size ``-(-x.shape[d] // n)``. None for
    anything else (a list of sizes, a computed dimension, an operand that is not a plain name)."""
    def seg(n: ast.AST) -> str:
        return ast.get_source_segment(src, n) or ""

    def pieces(base: ast.expr, dim: int) -> tuple[str, str] | None:
        if not _pure(base) or not isinstance(base, (ast.Name, ast.Attribute, ast.Subscript)):
            return None
        b = seg(base)
        i = _free_index(taken | {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)})
        if i is None:
            return None
        if dim == 0:
            return f"{b}[{i}]", f"for {i} in range(len({b}))"
        return f"{b}.select({dim}, {i})", f"for {i} in range({b}.shape[{dim}])"

    if isinstance(expr, (ast.Name, ast.Attribute, ast.Subscript)):
        return pieces(expr, 0)  # `for row in rows`: iterating unbinds dimension 0
    if not isinstance(expr, ast.Call):
        return None
    f = expr.func
    if isinstance(f, ast.Name) and f.id in ("list", "tuple", "iter") and len(expr.args) == 1 and not expr.keywords:
        return pieces(expr.args[0], 0)
    unbound, dim = _unbind_call(expr)
    if unbound is not None and dim is not None:
        return pieces(unbound, dim)
    if isinstance(f, ast.Attribute) and f.attr in ("split", "chunk") and not (
            isinstance(f.value, ast.Name) and f.value.id == "torch") and 1 <= len(expr.args) <= 2:
        base = f.value
        size = expr.args[0]
        dims = [*expr.args[1:], *(k.value for k in expr.keywords if k.arg == "dim")]
        if any(k.arg not in ("dim", "split_size", "split_size_or_sections", "chunks") for k in expr.keywords) or \
                len(dims) > 1 or isinstance(size, (ast.List, ast.Tuple)):
            return None
        d = dims[0] if dims else ast.Constant(0)
        if not (isinstance(d, ast.Constant) and isinstance(d.value, int) and not isinstance(d.value, bool)
                and d.value >= 0) or not _pure(base) or not isinstance(size, (ast.Name, ast.Constant, ast.Attribute)):
            return None
        if isinstance(size, ast.Constant) and not (isinstance(size.value, int) and not isinstance(size.value, bool)):
            return None
        b, n, dim_ = seg(base), seg(size), d.value
        i = _free_index(taken | {x.id for x in ast.walk(expr) if isinstance(x, ast.Name)})
        if i is None:
            return None
        length = f"{b}.shape[{dim_}]"
        step = n if f.attr == "split" else f"-(-{length} // {n})"
        return (f"{b}.narrow({dim_}, {i}, min({step}, {length} - {i}))", f"for {i} in range(0, {length}, {step})")
    return None


def _stale_views(ctx: Ctx) -> list[Fix]:
    """Views of one multi-output op (``list(w)``, ``w.unbind(0)``, ``x.split(n)``) used after the tensor they view
    was modified in place: make each piece its own single-output view (``w[i]``, ``x.narrow(...)``) where they are
    made. Those views see the modified values, as the originals did, and torch can rebuild their graph: same
    forward values, and backward runs."""
    vs = _sp(ctx.ex.get("view_site"))
    if vs is None:
        return []
    if ctx.ex.get("nograd"):
        # a view made with grad off, meant as a constant: `.detach()` it where it is made. The detached tensor still
        # views the same memory (the same values, after the write too) and never required grad: same forward, same
        # gradients, and nothing left for torch to refuse.
        if vs.line != vs.end_line:
            return []
        return [Fix("Detach the view where it is made (the same values; it never required grad)", True,
                    (_insert(vs.end_line, vs.end_column, ".detach()"),), kind="detach-view")]
    text = ctx.text(vs)
    try:
        expr = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return []
    taken = set(re.findall(r"[A-Za-z_]\w*", " ".join(ctx.lines[vs.line - 1:vs.end_line])))  # the loop's names too
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "enumerate" and \
            expr.args and vs.line == vs.end_line and text == text.strip():
        # `for i, row in enumerate(rows)`: the rows are the views; enumerate the single views instead
        arg = expr.args[0]
        got = _single_views(arg, text, taken)
        if got is None:
            return []
        sp = Span(vs.line, vs.column + _char_col(text, arg.col_offset), vs.line,
                  vs.column + _char_col(text, arg.end_col_offset or 0))
        return [Fix(f"Make each view on its own (`{_short(got[0], 32)}`), which torch can rebuild after the in-place "
                    f"change", True, (Edit(sp.line, sp.column, sp.end_line, sp.end_column, f"({got[0]} {got[1]})"),),
                    kind="index-views")]
    got = _single_views(expr, text.strip(), taken)
    if got is None:
        return []
    body, loop = got
    is_call = isinstance(expr, ast.Call)
    tuple_call = isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "tuple"
    new = f"tuple({body} {loop})" if tuple_call else f"[{body} {loop}]" if is_call else f"({body} {loop})"
    return [Fix(f"Make each view on its own (`{_short(body, 32)}`), which torch can rebuild after the in-place "
                f"change, instead of `{_short(text.strip(), 28)}`", True,
                (Edit(vs.line, vs.column, vs.end_line, vs.end_column, new),), kind="index-views")]


def _foreach(ctx: Ctx) -> list[Fix]:
    """``torch._foreach_add_(ys, 1.0)`` as a statement: ``ys = torch._foreach_add(ys, 1.0)`` (a new list; the
    tensors that were saved keep their values)."""
    st = ctx.stmt()
    if st is None or not isinstance(st.tree, ast.Expr):
        return []
    call = st.find(_sp(ctx.ex.get("call_span")), ast.Call)
    if not isinstance(call, ast.Call) or call is not st.tree.value or not call.args:
        return []
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr.startswith("_foreach_") and func.attr.endswith("_")):
        return []
    first = call.args[0]
    if not isinstance(first, (ast.Name, ast.Attribute)):
        return []
    text = st.source_of(first)
    name_sp = _attr_name_span(st, call)
    edits = (_insert(st.span.line, st.span.column, f"{text} = "), _replace(name_sp, func.attr[:-1]))
    fixes = [Fix(f"Rewrite as `{text} = ...{func.attr[:-1]}(...)` (a new list; the saved tensors keep their values)",
                 False, edits, kind="out-of-place")]
    if ctx.f.code in ("GG301", "GG304"):
        fixes = _leaf_fixes(ctx, st, fixes, first)
    return fixes


def _apply_view_arg(ctx: Ctx) -> list[Fix]:
    """``Fn.apply(base[:, 0])`` whose Function mark_dirty's that view and returns several tensors, or
    ``Fn.apply(w)`` on a leaf that requires grad: pass a copy (``base[:, 0].clone()``, ``w.clone()``), which is
    neither a view nor a leaf (``base`` / ``w`` itself is then no longer modified)."""
    st = ctx.stmt()
    if st is None:
        return []
    arg = st.find(_sp(ctx.ex.get("arg_span")))
    if arg is None:
        return []
    asp = st.span_of(arg)
    text = _paren(st.source_of(arg), arg)
    edits: list[Edit] = []
    if text != st.source_of(arg):
        edits.append(_insert(asp.line, asp.column, "("))
        edits.append(_insert(asp.end_line, asp.end_column, ").clone()"))
    else:
        edits.append(_insert(asp.end_line, asp.end_column, ".clone()"))
    why = "the tensor it views is no longer modified" if ctx.ex.get("is_view", True) else \
        f"`{_short(st.source_of(arg), 32)}` itself is no longer modified; its gradient flows through the copy"
    return [Fix(f"Pass a copy: `{_short(st.source_of(arg), 32)}.clone()` ({why})", False, tuple(edits),
                kind="out-of-place")]
