"""Arguments that make a call write in place: ``out=x`` and ``inplace=True`` (on a functional call, a module
constructor or an ``nn.Sequential`` entry)."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from typing import Any

from gradguard.fixes.context import Ctx, _char_col, _insert, _replace, _short, _sp
from gradguard.fixes.shared import _assignable
from gradguard.model import Fix, Span


@lru_cache(maxsize=1)
def _libcst() -> Any:
    """libcst, or None when it is not installed (the editor's bundled server runs without it: then the
    standard-library twin :func:`gradguard.fixes.callargs.rewrite_call` does the same edit)."""
    try:
        import libcst
    except ImportError:
        import logging

        logging.getLogger("gradguard.fixes").info(
            "libcst is not installed: argument removal in fixes uses the tokenize-based rewrite")
        return None
    return libcst


@lru_cache(maxsize=1)
def _drop_arg_class() -> Any:
    cst = _libcst()

    class DropArg(cst.CSTTransformer):  # type: ignore[misc, name-defined]
        def __init__(self, keyword: str | None = None, index: int | None = None, replace: str | None = None) -> None:
            super().__init__()
            self.keyword, self.index, self.replace = keyword, index, replace
            self.done = False
            self.depth = 0

        def visit_Call(self, node: Any) -> bool:
            self.depth += 1
            return self.depth == 1

        def leave_Call(self, original: Any, updated: Any) -> Any:
            self.depth -= 1
            if self.depth != 0:
                return updated
            args = list(updated.args)
            for i, a in enumerate(args):
                hit = (self.keyword is not None and a.keyword is not None and a.keyword.value == self.keyword) or \
                      (self.index is not None and a.keyword is None and i == self.index)
                if not hit:
                    continue
                self.done = True
                if self.replace is not None:
                    args[i] = a.with_changes(value=cst.parse_expression(self.replace))
                    return updated.with_changes(args=args)
                del args[i]
                if args and i == len(args):  # removed the last argument: drop the trailing comma it relied on
                    last = args[-1]
                    keep_trailing = isinstance(a.comma, cst.Comma)
                    args[-1] = last.with_changes(comma=last.comma if keep_trailing else cst.MaybeSentinel.DEFAULT)
                return updated.with_changes(args=args)
            return updated

    return DropArg


def _rewrite_call(text: str, keyword: str | None = None, index: int | None = None,
                  replace: str | None = None) -> str | None:
    cst = _libcst()
    if cst is None:
        from gradguard.fixes.callargs import rewrite_call

        return rewrite_call(text, keyword, index, replace)
    try:
        expr = cst.parse_expression(text)
    except Exception:
        return None
    t = _drop_arg_class()(keyword, index, replace)
    new = expr.visit(t)
    if not t.done or not isinstance(new, cst.BaseExpression):
        return None
    return str(cst.Module(body=[]).code_for_node(new))


def _out(ctx: Ctx) -> list[Fix]:
    st = ctx.stmt()
    if st is None:
        return []
    call = st.find(_sp(ctx.ex.get("call_span")), ast.Call)
    if not isinstance(call, ast.Call):
        return []
    kw = next((k for k in call.keywords if k.arg == "out"), None)
    if kw is None or not _assignable(kw.value):
        return []
    target = st.source_of(kw.value)
    csp = st.span_of(call)
    new_call = _rewrite_call(ctx.text(csp), keyword="out")
    if new_call is None:
        return []
    code = ctx.f.code
    safe = isinstance(kw.value, ast.Name) and ctx.private(kw.value.id)
    tree = st.tree
    if isinstance(tree, ast.Expr) and tree.value is call:
        edits = (_insert(st.span.line, st.span.column, f"{target} = "), _replace(csp, new_call))
        return [Fix(f"Assign the result instead of writing into `{target}`: `{target} = {_short(new_call, 40)}`",
                    safe and code == "GG104", edits, kind="out-of-place")]
    if isinstance(tree, ast.Assign) and tree.value is call and len(tree.targets) == 1:
        edits = (_insert(csp.line, csp.column, f"{target} = "), _replace(csp, new_call))
        return [Fix(f"Assign the result instead of writing into `{target}`", safe and code == "GG104", edits,
                    kind="out-of-place")]
    return []


# -----------------------------------------------------------------------------------------------------------
# inplace=True (functional call, module constructor, nn.Sequential entry)
# -----------------------------------------------------------------------------------------------------------

def _inplace_flag(ctx: Ctx) -> list[Fix]:
    ctor = _sp(ctx.ex.get("ctor_span"))
    kw = _sp(ctx.ex.get("kw_span"))
    if kw is not None and (ctor is None or not _span_within(kw, ctor)):
        return _inplace_attribute(ctx, kw)
    if ctor is None or kw is None or not (1 <= ctor.line <= ctor.end_line <= len(ctx.lines)):
        return []
    ctext = ctx.text(ctor)
    try:
        cnode = ast.parse(ctext, mode="eval").body
    except SyntaxError:
        return []
    if not isinstance(cnode, ast.Call):
        return []
    positional = bool(ctx.ex.get("positional"))
    index: int | None = None
    if positional:
        # which positional argument is the flag: match by position in the call text
        rel = _rel_offset(ctx, ctor, kw)
        for i, a in enumerate(cnode.args):
            a_off = _node_offset(ctext, a)
            if a_off == rel and kw != ctor:
                index = i
        if index is None:  # the span did not single out the flag: the last positional literal True
            trues = [i for i, a in enumerate(cnode.args) if isinstance(a, ast.Constant) and a.value is True]
            if not trues:
                return []
            index = trues[-1]
    else:
        if not any(k.arg == "inplace" for k in cnode.keywords):
            return []
    fname = ast.get_source_segment(ctext, cnode.func) or "the call"
    safe = _inplace_removal_safe(ctx, ctor, cnode)
    fixes: list[Fix] = []
    is_last = positional and index == len(cnode.args) - 1 and not cnode.keywords
    if not positional or is_last:
        new = _rewrite_call(ctext, keyword=None if positional else "inplace", index=index)
        if new is not None:
            what = "`inplace=True`" if not positional else "the positional `inplace` flag"
            fixes.append(Fix(f"Remove {what} from `{_short(fname, 32)}(...)`", safe, (_replace(ctor, new),),
                             kind="remove-inplace"))
    new = _rewrite_call(ctext, keyword=None if positional else "inplace", index=index, replace="False")
    if new is not None:
        fixes.append(Fix(f"Set `inplace=False` in `{_short(fname, 32)}(...)`", safe, (_replace(ctor, new),),
                         kind="remove-inplace"))
    return fixes


def _inplace_attribute(ctx: Ctx, kw: Span) -> list[Fix]:
    """The flag was switched on after construction (`m.inplace = True`, ``kw`` the value): switch it off there."""
    if not (1 <= kw.line == kw.end_line <= len(ctx.lines)) or ctx.text(kw) != "True":
        return []
    safe = ctx.m.kind == "module_call" and _inplace_removal_safe(ctx, kw)
    return [Fix(f"Set the `inplace` flag to False where it is switched on (line {kw.line})", safe,
                (_replace(kw, "False"),), kind="remove-inplace")]


def _span_within(inner: Span, outer: Span) -> bool:
    return (outer.line, outer.column) <= (inner.line, inner.column) and \
        (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)


def _rel_offset(ctx: Ctx, outer: Span, inner: Span) -> int:
    pre = ctx.text(Span(outer.line, outer.column, inner.line, inner.column))
    return len(pre)


def _node_offset(text: str, node: ast.AST) -> int:
    lines = text.split("\n")
    ln, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
    return sum(len(x) + 1 for x in lines[: ln - 1]) + _char_col(lines[ln - 1], col)


def _inplace_removal_safe(ctx: Ctx, ctor: Span, cnode: ast.Call | None = None) -> bool:
    """Dropping the flag keeps forward values when nobody else can see the overwritten input."""
    kind = ctx.m.kind
    if kind == "module_entry":
        before = "\n".join([*ctx.lines[max(0, ctor.line - 6):ctor.line - 1],
                            ctx.lines[ctor.line - 1][:ctor.column - 1]])
        before = re.sub(r"#[^\n]*", "", before).rstrip()
        # the first entry (of the Sequential, or of the list it is built from) overwrites the Sequential's own
        # input, which its caller may read afterwards (a block's shortcut)
        return not before.endswith(("Sequential(", "[", "("))
    st = ctx.stmt()
    if kind == "inplace_kwarg":
        if cnode is None:
            return False
        arg0: ast.AST | None = cnode.args[0] if cnode.args else next(
            (k.value for k in cnode.keywords if k.arg in ("input", "x")), None)
    else:  # module_call: the call site is the statement
        if st is None:
            return False
        call = st.find(ctx.m.node, ast.Call)
        arg0 = call.args[0] if isinstance(call, ast.Call) and call.args else None
    if arg0 is None:
        return False
    if not isinstance(arg0, ast.Name):
        return not isinstance(arg0, (ast.Attribute, ast.Subscript))  # a temporary
    if st is not None and isinstance(st.tree, ast.Assign) and len(st.tree.targets) == 1 and \
            isinstance(st.tree.targets[0], ast.Name) and st.tree.targets[0].id == arg0.id:
        return ctx.private(arg0.id) or _rebinding_only(ctx, arg0.id)
    return False


def _rebinding_only(ctx: Ctx, name: str) -> bool:
    """``h = act(h)`` where ``h`` is not a parameter and has no alias: the old ``h`` is unreachable after."""
    from gradguard.fixes.scope import enclosing_scope

    found = enclosing_scope(ctx.source, ctx.lines, ctx.m.stmt.line)
    if found is None:
        return False
    scope, _ = found
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = scope.args
        if any(p.arg == name for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]):
            return False
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id == name:
            return False
    return True


