"""Assignments: ``x += y``, ``x[i] = v``, and writes into a leaf tensor (GG301)."""

from __future__ import annotations

import ast
import re

from gradguard.fixes.context import _ATOMS, Ctx, _insert, _paren, _short, _sp
from gradguard.fixes.methods import _index_instead_of_iterating, _nograd_view_write
from gradguard.fixes.shared import _assignable, _clone_before, _is_parameter_attr, _leaf_fixes, _root
from gradguard.model import Edit, Fix, Span


def _augassign(ctx: Ctx) -> list[Fix]:
    st = ctx.stmt()
    if st is None or not isinstance(st.tree, ast.AugAssign):
        return []
    node = st.tree
    target, value = node.target, node.value
    code = ctx.f.code
    fixes: list[Fix] = []
    ttext = st.source_of(target)
    vtext_full = st.source_of(value)
    # (read twice by the rewrite: an item of a list, `feats[i - 1]`, whose index calls nothing)
    list_item = bool(ctx.ex.get("list_item")) and isinstance(target, ast.Subscript) and not any(
        isinstance(x, (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)) for x in ast.walk(target))
    if (_assignable(target) or list_item) and not (
            code in ("GG301", "GG304", "GG101") and _is_parameter_attr(ctx, target)):
        tsp, vsp = st.span_of(target), st.span_of(value)
        between = ctx.text(Span(tsp.end_line, tsp.end_column, vsp.line, vsp.column))
        op = ctx.ex.get("op") or (ctx.m.name[:-1] if ctx.m.name.endswith("=") else "")
        m = re.search(re.escape(op) + "=", between) if op else None
        if m:
            off = m.start()
            # position of the operator: between starts at the end of the target
            pre = between[:off]
            if "\n" in pre:
                ol = tsp.end_line + pre.count("\n")
                oc = len(pre.rsplit("\n", 1)[1]) + 1
            else:
                ol, oc = tsp.end_line, tsp.end_column + off
            edits: list[Edit] = [Edit(ol, oc, ol, oc + len(op) + 1, f"= {ttext} {op}")]
            if not isinstance(value, _ATOMS):
                edits += [_insert(vsp.line, vsp.column, "("), _insert(vsp.end_line, vsp.end_column, ")")]
            safe = isinstance(target, ast.Name) and code == "GG101" and ctx.private(target.id)
            shown = _paren(_short(vtext_full, 32), value)
            fixes.append(Fix(f"Rewrite `{ttext} {op}= {_short(vtext_full, 32)}` as `{ttext} = {ttext} {op} {shown}`",
                             safe, tuple(edits), kind="out-of-place"))
    if code in ("GG101", "GG103") and isinstance(target, ast.Subscript):
        if not list_item:  # (an item of a list: the rewrite above puts a new tensor in it)
            fixes += _clone_before(ctx, _root(target), st, value, code)
    elif code == "GG101" and isinstance(target, ast.Name):
        fixes += _clone_before(ctx, target, st, None, code)
    if code in ("GG301", "GG304"):
        fixes = _leaf_fixes(ctx, st, fixes, target)
    if code == "GG302" and isinstance(_root(target), ast.Name):
        fixes += _index_instead_of_iterating(ctx, _root(target).id)  # type: ignore[attr-defined]
    if code == "GG302":
        fixes += _nograd_view_write(ctx, st)
    return fixes


# -----------------------------------------------------------------------------------------------------------
# x[i] = v
# -----------------------------------------------------------------------------------------------------------

def _setitem(ctx: Ctx) -> list[Fix]:
    st = ctx.stmt()
    fixes: list[Fix] = []
    alias_site = _sp(ctx.ex.get("alias_site"))
    if alias_site is not None:
        vtext = ctx.text(alias_site)
        try:
            vnode: ast.AST | None = ast.parse(vtext.strip(), mode="eval").body
        except SyntaxError:
            vnode = None
        if vnode is not None:
            edits: tuple[Edit, ...]
            if isinstance(vnode, _ATOMS):
                edits = (_insert(alias_site.end_line, alias_site.end_column, ".clone()"),)
            else:
                edits = (_insert(alias_site.line, alias_site.column, "("),
                         _insert(alias_site.end_line, alias_site.end_column, ").clone()"))
            alias = ctx.ex.get("alias_of") or _short(vtext, 24)
            fixes.append(Fix(f"Clone `{alias}` where it is aliased (line {alias_site.line}): "
                             f"`{_paren(_short(vtext, 24), vnode)}.clone()`", False, edits, kind="clone"))
    if st is not None and ((isinstance(st.tree, ast.Assign) and len(st.tree.targets) == 1)
                           or isinstance(st.tree, ast.AugAssign)):
        # (`x[idx] += v` with advanced indexing writes `x[idx] = x[idx] + v` back: an item assignment too)
        tgt = st.tree.targets[0] if isinstance(st.tree, ast.Assign) else st.tree.target
        if isinstance(tgt, ast.Subscript):
            fixes += _clone_before(ctx, _indexed(tgt), st, st.tree.value, ctx.f.code)
        elif isinstance(tgt, (ast.Tuple, ast.List)) and tgt.elts and all(isinstance(e, ast.Subscript) for e in tgt.elts):
            # `q[:, 1:], k[:, 1:] = rotate(q[:, 1:], k[:, 1:])`: q and k may view one tensor, whose version every
            # write bumps: each target is cloned, after the value is computed from the originals
            bases: list[ast.AST] = [_indexed(e) for e in tgt.elts if isinstance(e, ast.Subscript)]
            fixes += _clone_before(ctx, bases, st, st.tree.value, ctx.f.code)
    return fixes


def _indexed(tgt: ast.Subscript) -> ast.expr:
    """The tensor an item assignment writes into: `x` of `x[i][j] = v`, `model[0].mask` of `model[0].mask[0] =
    v` (not `model`: indexing a container of modules is no tensor write)."""
    base = tgt.value
    while isinstance(base, ast.Subscript):
        base = base.value
    return base if isinstance(base, ast.Name) else tgt.value
