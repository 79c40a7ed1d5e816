"""Pieces several fix families use: a clone before the statement that saves, a clone at the use, the
``allow_mutation_on_saved_tensors`` escape hatch."""

from __future__ import annotations

import ast
import re

from gradguard.fixes.context import ESCAPE_HATCH, Ctx, Stmt, _char_col, _insert, _replace, _short, _sp
from gradguard.model import Fix, Span


def _root(node: ast.AST) -> ast.AST:
    """``x`` for ``x``, ``x.a``, ``x[i]``, ``x.a[i].b``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _assignable(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) or (isinstance(node, ast.Attribute) and isinstance(_root(node), ast.Name))


def _is_parameter_attr(ctx: Ctx, node: ast.AST) -> bool:
    """``self.weight``-like attributes that hold an ``nn.Parameter``: assigning a plain tensor to them fails."""
    if not isinstance(node, ast.Attribute) or ctx.ex.get("plain_tensor"):
        return False  # (the analysis knows the tensor written is no parameter: a loss's class weights)
    attr = node.attr
    if attr in ("weight", "bias") or attr.endswith(("_weight", "_bias")):
        return True
    pat = re.compile(r"self\." + re.escape(attr) + r"\s*=\s*(?:torch\.)?(?:nn\.)?Parameter\(|"
                     r"register_parameter\(\s*['\"]" + re.escape(attr) + "['\"]")
    return bool(pat.search(ctx.source))


def _in_no_grad(ctx: Ctx) -> bool:
    """Is the statement inside a ``with torch.no_grad():`` block (found by indentation)?"""
    for _j, s in ctx.enclosing(ctx.m.stmt.line):
        if re.match(r"with\b.*\bno_grad\(\)", s) or re.match(r"with\b.*\binference_mode\(", s):
            return True
        if re.match(r"(async\s+)?def\b|class\b", s):
            return False
    return False


def _clone_before(ctx: Ctx, base: ast.AST | list[ast.AST], st: Stmt, rhs: ast.AST | None, code: str) -> list[Fix]:
    """``x = x.clone()`` on the line before the statement (hoisting the right-hand side first when it reads
    ``x``, so the value is computed from the original tensor and the clone is what gets modified). ``base``: the
    tensor to clone, or several (the targets of one tuple assignment), each cloned once."""
    bases = base if isinstance(base, list) else [base]
    if not ctx.starts_line(st.span) or any(not _assignable(b) or (
            isinstance(b, ast.Attribute) and _is_parameter_attr(ctx, b)) for b in bases):
        return []
    texts = list(dict.fromkeys(st.source_of(b) for b in bases))
    ind = ctx.indent(st.span.line)
    nl = ctx.nl
    roots = {r.id for r in map(_root, bases) if isinstance(r, ast.Name)}
    safe = all(isinstance(b, ast.Name) and ctx.private(b.id) for b in bases) and code in (
        "GG101", "GG102", "GG103", "GG104")
    reads_base = rhs is not None and any(isinstance(n, ast.Name) and n.id in roots for n in ast.walk(rhs))
    clones = "".join(f"{ind}{t} = {t}.clone(){nl}" for t in texts)
    named = " and ".join(f"`{t}`" for t in texts)
    if not reads_base:
        what = f"`{texts[0]} = {texts[0]}.clone()`" if len(texts) == 1 else "each"
        return [Fix(f"Clone {named} before modifying {'it' if len(texts) == 1 else 'them'} ({what})", safe,
                    (_insert(st.span.line, 1, clones),), kind="clone")]
    assert rhs is not None
    tmp = _fresh_name(ctx, "value")
    rhs_sp = st.span_of(rhs)
    rhs_text = ctx.text(rhs_sp)
    edits = (
        _insert(st.span.line, 1, f"{ind}{tmp} = {rhs_text}{nl}{clones}"),
        _replace(rhs_sp, tmp),
    )
    return [Fix(f"Compute the value first, then clone {named} before assigning into "
                f"{'it' if len(texts) == 1 else 'them'}", safe, edits, kind="clone")]


def _fresh_name(ctx: Ctx, base: str) -> str:
    name = base
    i = 1
    while re.search(r"\b" + name + r"\b", ctx.source):
        i += 1
        name = f"{base}{i}"
    return name


def _escape_hatch(ctx: Ctx, end_line: int | None = None) -> list[Fix]:
    """Wrap the statements from the op that saved the tensor through the backward in
    ``with torch.autograd.graph.allow_mutation_on_saved_tensors():`` (forward and backward must both run under
    it). Only offered when they are consecutive statements of one block."""
    if not re.search(r"^\s*import torch\b", ctx.source, re.M):
        return []
    st = ctx.m.stmt
    ind = ctx.indent(st.line)
    save_lines = [int(s.get("line", 0)) for s in ctx.f.facts.get("saves", [])
                  if s.get("line") and s.get("same_file", True)]
    start = min([*save_lines, st.line])
    if not (1 <= start <= len(ctx.lines)) or ctx.indent(start) != ind:
        return []
    if end_line is None:
        for j in range(st.end_line + 1, len(ctx.lines) + 1):
            t = ctx.lines[j - 1]
            if not t.strip() or t.strip().startswith("#"):
                continue
            if len(t) - len(t.lstrip()) < len(ind):
                return []
            if ".backward(" in t or "autograd.backward(" in t:
                end_line = j
                break
        if end_line is None:
            return []
    # extend to the end of the backward statement (a call may span lines)
    while end_line < len(ctx.lines) and ctx.lines[end_line].strip() and \
            len(ctx.lines[end_line]) - len(ctx.lines[end_line].lstrip()) > len(ind):
        end_line += 1
    for j in range(start, end_line + 1):
        t = ctx.lines[j - 1]
        if t.strip() and not t.startswith(ind):
            return []
    unit = ctx.indent_unit(st.line)
    edits = [_insert(start, 1, f"{ind}with {ESCAPE_HATCH}:{ctx.nl}{unit}")]
    edits += [_insert(j, 1, unit) for j in range(start + 1, end_line + 1) if ctx.lines[j - 1].strip()]
    return [Fix("Run forward and backward under `allow_mutation_on_saved_tensors()` (keeps a copy of "
                "each saved tensor that is modified)", False, tuple(edits), kind="allow-mutation")]


_SAVED_MSG = re.compile(r"saved (?:its |the )?(?:input|inputs|argument|operand|other)s? `([^`]+)`")
_PURE = (ast.Name, ast.Attribute, ast.Subscript)


def _pure(node: ast.AST) -> bool:
    return all(isinstance(n, (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Slice, ast.Tuple,
                              ast.Load, ast.UnaryOp, ast.USub, ast.Index if hasattr(ast, "Index") else ast.Slice))
               for n in ast.walk(node))


def _clone_at_use(ctx: Ctx) -> list[Fix]:
    """Clone the tensor where the op that saves it uses it: ``F.linear(x, w)`` -> ``F.linear(x, w.clone())``.
    The op then saves a private copy; the later in-place change still happens and every forward value and
    gradient is what the code meant (what ``allow_mutation_on_saved_tensors`` would compute): safe."""
    fixes: list[Fix] = []
    for r in ctx.f.related:
        if not _SAVE_NOTE.search(r.message):
            continue
        mm = _SAVED_MSG.search(r.message)
        if mm:
            saved = " ".join(mm.group(1).split())
        elif re.search(r"saved its input here", r.message) and ctx.m.receiver:
            saved = " ".join(ctx.m.receiver.split())  # a module call: its input is its (first) argument
        else:
            saved = ""
        got = _clone_in(ctx, Span(r.line, r.column, r.end_line, r.end_column), saved, r.message.split(" saved", 1)[0]) \
            if saved and r.end_line and r.path == ctx.f.path else []
        if not got:
            # a save no clone at its use covers (an op that saved its output, one in another file, which a fix of
            # this file cannot edit): the write still trips it, so cloning the others fixes nothing
            return []
        fixes += got
    if len(fixes) > 1:  # every save needs its copy: one fix that makes them all
        edits = tuple(dict.fromkeys(e for f in fixes for e in f.edits))
        lines = ", ".join(str(ln) for ln in sorted({e.line for e in edits}))
        return [Fix(f"Clone the saved tensors where the ops that save them use them (lines {lines})", True, edits,
                    kind="clone-at-use")]
    return fixes


_SAVE_NOTE = re.compile(r" saved .* here$")


_VIEW_METHODS = frozenset({"t", "T", "mT", "transpose", "permute", "view", "view_as", "reshape", "unsqueeze", "squeeze",
                           "expand", "expand_as", "flatten", "narrow", "select", "unflatten", "movedim"})


def _view_base(n: ast.AST) -> ast.AST | None:
    """``w`` for ``w`` and for a chain of view methods on it (``w.t()``, ``w.view(-1, d).transpose(0, 1)``)."""
    while isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _VIEW_METHODS:
        n = n.func.value
    return n if isinstance(n, _PURE) else None


def _clone_in(ctx: Ctx, sp: Span, saved: str, op: str) -> list[Fix]:
    """``saved`` (a name, attribute or subscript) cloned where it occurs inside the expression at ``sp``."""
    if not (1 <= sp.line <= sp.end_line <= len(ctx.lines)):
        return []
    text = ctx.text(sp)
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return []
    hits: list[ast.AST] = []
    stack: list[ast.AST] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (*_PURE, ast.Call)) and " ".join((ast.get_source_segment(text, n) or "").split()) == saved:
            # the tensor itself, or a view of it the op saved (`w.t()`, `w.transpose(0, 1)`): clone the tensor
            base = _view_base(n)
            if base is not None and _pure(base):
                hits.append(base)
            continue
        stack.extend(ast.iter_child_nodes(n))
    if not hits:
        return []
    first = ctx.lines[sp.line - 1][sp.column - 1:]
    tlines = text.split("\n")
    edits = []
    for h in hits:
        el, ec = h.end_lineno, h.end_col_offset  # type: ignore[attr-defined]
        line = sp.line + el - 1
        col = (sp.column + _char_col(first, ec)) if el == 1 else _char_col(tlines[el - 1], ec) + 1
        edits.append(_insert(line, col, ".clone()"))
    return [Fix(f"Clone `{_short(saved, 32)}` where {op} uses it (line {sp.line}): `{_short(saved, 32)}.clone()`",
                True, tuple(edits), kind="clone-at-use")]


# -----------------------------------------------------------------------------------------------------------
# GG301: leaf tensors (used by the in-place method and assignment fixes)
# -----------------------------------------------------------------------------------------------------------

def _leaf_fixes(ctx: Ctx, st: Stmt, fixes: list[Fix], target: ast.AST) -> list[Fix]:
    """Out of place (changes what is a leaf, so unsafe), or ``with torch.no_grad():`` for a parameter update."""
    fixes = [Fix(f.title + " (the leaf itself is no longer modified)", False, f.edits, False, f.kind)
             if f.kind == "out-of-place" else f for f in fixes]
    text = st.text
    update = ".grad" in text or _is_parameter_attr(ctx, target) or (
        isinstance(target, ast.Attribute) and not fixes)
    wrap: list[Fix] = []
    loop = _sp(ctx.f.mutation.extra.get("param_loop")) if ctx.f.mutation is not None else None
    if loop is not None:
        # GG304: the whole update loop runs under no_grad, as an optimizer's step does
        wrap += _no_grad_wrap(ctx, loop, "Run the update loop under `with torch.no_grad():` (as optimizer.step() does)")
        update = True
    wrap += _no_grad_wrap(ctx, st.span, "Wrap the update in `with torch.no_grad():` (autograd does not record it)")
    return wrap + fixes if update else fixes + wrap


def _no_grad_wrap(ctx: Ctx, sp: Span, title: str) -> list[Fix]:
    """The lines of ``sp`` (whole lines only) under ``with torch.no_grad():``, unless they already are."""
    if not ctx.own_lines(sp) or _in_no_grad(ctx) or not re.search(r"^\s*import torch\b", ctx.source, re.M):
        return []
    ind = ctx.indent(sp.line)
    unit = ctx.indent_unit(sp.line)
    edits = [_insert(sp.line, 1, f"{ind}with torch.no_grad():{ctx.nl}{unit}")]
    edits += [_insert(j, 1, unit) for j in range(sp.line + 1, sp.end_line + 1) if ctx.lines[j - 1].strip()]
    return [Fix(title, False, tuple(edits), kind="no-grad")]

