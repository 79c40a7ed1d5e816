"""Training loops: state carried across iterations (GG201) and ``optimizer.step()`` between a forward and a
later backward (GG202)."""

from __future__ import annotations

import ast
import re

from gradguard.fixes.context import _ATOMS, ESCAPE_HATCH, Ctx, _char_col, _insert, _paren, _replace, _short, _sp
from gradguard.fixes.shared import _escape_hatch
from gradguard.model import Edit, Fix, Span


def _carry(ctx: Ctx) -> list[Fix]:
    """Detach the carried state once the iteration is done with it: ``h = h.detach()`` at the end of the block
    holding the carry (detaching where it is assigned would also cut the current iteration's gradient when the
    state feeds this iteration's loss). When the carry is the block's last statement, detach the value."""
    carry = _sp(ctx.ex.get("carry_stmt_span")) or ctx.m.stmt
    vsp = _sp(ctx.ex.get("value_span"))
    name = ctx.m.receiver
    if not all(p.isidentifier() for p in name.split(".")) or not (1 <= carry.line <= carry.end_line <= len(ctx.lines)):
        return []
    record = ctx.ex.get("record")
    if record == "record":
        return []  # a dataclass of tensors: no one expression detaches it
    tuple_state = "LSTM" in ctx.source
    detached = f"tuple(s.detach() for s in {name})" if tuple_state else f"{name}.detach()"
    if record == "tuple":
        # a namedtuple of tensors (`LIFState(z, v, i)`): the same record type, each field detached
        detached = f"type({name})(*(s.detach() for s in {name}))"
    ind = ctx.indent(carry.line)
    last = carry.end_line
    for j in range(carry.end_line + 1, len(ctx.lines) + 1):
        t = ctx.lines[j - 1]
        if not t.strip():
            continue
        if len(t) - len(t.lstrip()) < len(ind):
            break
        last = j
    fixes: list[Fix] = []
    ends_block = re.match(r"(return|raise|break|continue)\b", ctx.lines[last - 1].strip())
    if ends_block and vsp is not None:
        # nothing runs after the block's last statement: detach the previous state where it is read
        if record == "tuple":
            return _detach_at_use(ctx, vsp, name, tuple_state, f"None if {name} is None else {detached}")
        return _detach_at_use(ctx, vsp, name, tuple_state)
    if vsp is not None and last == carry.end_line and ctx.starts_line(carry) and record is None:
        fixes += _detach_value(ctx, vsp, name, tuple_state)
    if ctx.starts_line(carry):
        # at the end of the block's last line (the line after it is blank or dedented: an edit there would be
        # checked as part of whatever statement follows the block)
        edit = _insert(last, len(ctx.lines[last - 1]) + 1, f"{ctx.nl}{ind}{name} = {detached}")
        fixes.append(Fix(f"Detach `{name}` at the end of the iteration: `{name} = {detached}` (truncates "
                         "backprop through time)", False, (edit,), kind="detach"))
    if vsp is not None and last != carry.end_line and record is None:
        fixes += _detach_value(ctx, vsp, name, tuple_state)
    return fixes


def _detach_at_use(ctx: Ctx, vsp: Span, name: str, tuple_state: bool, whole: str | None = None) -> list[Fix]:
    """``h = cell(x, h)`` -> ``h = cell(x, h.detach())``: the previous iteration's state enters detached. ``whole``:
    the expression that replaces each read instead (a namedtuple's, ``None if state is None else
    type(state)(*(s.detach() for s in state))``, each of its tensors detached)."""
    if tuple_state and whole is None:
        return []
    vtext = ctx.text(vsp)
    try:
        vnode = ast.parse(vtext, mode="eval").body
    except SyntaxError:
        return []
    tlines = vtext.split("\n")
    first = ctx.lines[vsp.line - 1][vsp.column - 1:]

    def at(lineno: int, col: int) -> tuple[int, int]:
        return vsp.line + lineno - 1, (vsp.column + _char_col(first, col)) if lineno == 1 else \
            _char_col(tlines[lineno - 1], col) + 1

    edits = []
    for n in ast.walk(vnode):
        if isinstance(n, (ast.Name, ast.Attribute)) and ast.get_source_segment(vtext, n) == name:
            end = at(n.end_lineno or n.lineno, n.end_col_offset or 0)
            edits.append(_insert(*end, ".detach()") if whole is None else
                         Edit(*at(n.lineno, n.col_offset), *end, whole))
    if not edits:
        return []
    shown = f"{name}.detach()" if whole is None else _short(whole, 40)
    return [Fix(f"Detach the previous state where it is read: `{shown}` (truncates backprop through time)", False,
                tuple(edits), kind="detach")]


def _detach_value(ctx: Ctx, vsp: Span, target: str, tuple_state: bool) -> list[Fix]:
    vtext = ctx.text(vsp)
    try:
        vnode = ast.parse(vtext.strip(), mode="eval").body
    except SyntaxError:
        return []
    stmt = _sp(ctx.ex.get("carry_stmt_span")) or ctx.m.stmt
    whole = ctx.text(stmt)
    try:
        snode = ast.parse(whole).body[0]
    except (SyntaxError, IndexError):
        return []
    if not (isinstance(snode, ast.Assign) and len(snode.targets) == 1 and isinstance(snode.targets[0], ast.Name)):
        return []
    if isinstance(vnode, ast.Tuple) and vnode.elts and "\n" not in vtext:
        parts = [_paren(ast.get_source_segment(vtext.strip(), e) or "", e) + ".detach()" for e in vnode.elts]
        inner = ", ".join(parts)
        new = f"({inner})" if vtext.strip().startswith("(") else inner
        return [Fix(f"Detach each carried tensor: `{target} = {_short(new, 40)}`", False, (_replace(vsp, new),),
                    kind="detach")]
    if tuple_state:
        new = f"tuple(s.detach() for s in {vtext})"
        return [Fix(f"Detach the carried state: `{target} = {_short(new, 40)}`", False, (_replace(vsp, new),),
                    kind="detach")]
    if isinstance(vnode, _ATOMS):
        edits: tuple[Edit, ...] = (_insert(vsp.end_line, vsp.end_column, ".detach()"),)
        shown = f"{vtext}.detach()"
    else:
        edits = (_insert(vsp.line, vsp.column, "("), _insert(vsp.end_line, vsp.end_column, ").detach()"))
        shown = f"({vtext}).detach()"
    return [Fix(f"Detach the carried state: `{target} = {_short(shown, 40)}` (truncates backprop through time)",
                False, edits, kind="detach")]


# -----------------------------------------------------------------------------------------------------------
# GG202: optimizer.step() between a forward and a later backward
# -----------------------------------------------------------------------------------------------------------

def _step(ctx: Ctx) -> list[Fix]:
    """Move the parameter update after the later backward. When the update sits inside a block (``with
    torch.no_grad(): for p in ...: p -= ...``), the whole statement of the backward's block holding it moves."""
    step = _sp(ctx.ex.get("step_stmt_span")) or ctx.m.stmt
    bw = _sp(ctx.ex.get("backward_stmt_span"))
    fixes: list[Fix] = []
    if bw is not None and not _same_scope(ctx, step.line, bw.line):
        return []  # the update runs inside a function called before the backward: moving its line breaks the file
    if bw is not None and bw.line > step.end_line and ctx.own_lines(bw) and ctx.starts_line(step):
        bind = ctx.indent(bw.line)
        first, last = step.line, step.end_line
        # climb to the statement of the backward's block that holds the step
        while len(ctx.indent(first)) > len(bind):
            first -= 1
            while first >= 1 and (not ctx.lines[first - 1].strip() or ctx.lines[first - 1].lstrip().startswith("#")):
                first -= 1
            if first < 1:
                return []
        if ctx.indent(first) != bind:
            return []
        # ... and down to its last line
        for j in range(last + 1, bw.line):
            t = ctx.lines[j - 1]
            if t.strip() and len(t) - len(t.lstrip()) <= len(bind) and not t.strip().startswith((")", "]", "}")):
                break
            if t.strip():
                last = j
        if first < step.line:
            # the block must not hold anything but the update: else moving it moves more than the step
            body = [ctx.lines[j - 1].strip() for j in range(first, last + 1) if ctx.lines[j - 1].strip()]
            if any(".backward(" in b for b in body):
                return []
        block = ctx.lines[first - 1:last]
        nl = ctx.nl
        stext = _short(ctx.text(step), 32)
        where = f"lines {first}-{last}" if last > first else f"line {first}"
        edits: list[Edit] = [Edit(first, 1, last + 1, 1, "")]
        if bw.end_line < len(ctx.lines):
            edits.append(_insert(bw.end_line + 1, 1, nl.join(block) + nl))
        else:
            end_col = len(ctx.lines[bw.end_line - 1]) + 1
            edits.append(_insert(bw.end_line, end_col, nl + nl.join(block)))
        title = f"Move `{stext}` after the backward at line {bw.line}" if first == step.line else \
            f"Move the update ({where}, with `{stext}`) after the backward at line {bw.line}"
        fixes.append(Fix(title, False, tuple(edits), kind="reorder-step"))
    if bw is not None and bw.line > step.line:
        fixes += _escape_hatch(ctx, end_line=bw.end_line)
    elif bw is not None:
        fixes += _loop_escape_hatch(ctx, step, bw)
    return fixes


def _same_scope(ctx: Ctx, a: int, b: int) -> bool:
    """Lines ``a`` and ``b`` are in the same function's own body (or both at module level)."""
    from gradguard.fixes.scope import enclosing_scope

    sa, sb = enclosing_scope(ctx.source, ctx.lines, a), enclosing_scope(ctx.source, ctx.lines, b)
    return sa is not None and sb is not None and sa[0] is sb[0]


_SCRIPT_DEFS = re.compile(r"(import|from|def|class|async\s+def|@)\b|@")


def _loop_escape_hatch(ctx: Ctx, step: Span, bw: Span) -> list[Fix]:
    """``for ...: loss.backward(retain_graph=True); opt.step()`` where each backward goes through a graph built
    before the loop (or in ``__init__``): no local rewrite. Run the script part of the block - from the first
    statement after the imports and definitions through the end of the loop - under
    ``allow_mutation_on_saved_tensors()``: step() then keeps a copy of each saved parameter it modifies."""
    if not re.search(r"^\s*import torch\b", ctx.source, re.M):
        return []
    lines = ctx.lines
    # the outermost loop holding both the backward and the step (an episode loop around a step loop)
    ind = len(ctx.indent(bw.line))
    hdr = 0
    for j in range(bw.line - 1, 0, -1):
        t = lines[j - 1]
        st = t.strip()
        if not st or st.startswith("#"):
            continue
        ti = len(t) - len(t.lstrip())
        if ti < ind:
            if re.match(r"(async\s+)?def\b|class\b", st):
                return []
            if re.match(r"(async\s+)?(for|while)\b", st):
                hdr = j
            ind = ti
            if ti == 0:
                break
    if not hdr or step.line < hdr:
        return []
    base = ctx.indent(hdr)
    if base:  # only a loop at module level: the script part of a function body is not delimited this way
        return []
    end = hdr
    for j in range(hdr + 1, len(lines) + 1):
        t = lines[j - 1]
        if t.strip() and not t.startswith((" ", "\t")) and not t.strip().startswith((")", "]", "}", "#")):
            break
        if t.strip():
            end = j
    if end < step.end_line:
        return []
    # first top-level statement after the last top-level import/def/class before the loop
    start = 0
    in_def = False
    for j in range(1, hdr + 1):
        t = lines[j - 1]
        if not t.strip() or t.startswith((" ", "\t")) or t.strip().startswith((")", "]", "}", "#")):
            continue
        if _SCRIPT_DEFS.match(t):
            start, in_def = 0, True
        elif not start:
            start, in_def = j, False
    if not start or in_def:
        return []
    unit = ctx.indent_unit(step.line)
    edits = [_insert(start, 1, f"with {ESCAPE_HATCH}:{ctx.nl}{unit}")]
    edits += [_insert(j, 1, unit) for j in range(start + 1, end + 1) if lines[j - 1].strip()]
    return [Fix(f"Run lines {start}-{end} under `allow_mutation_on_saved_tensors()` (step() keeps a copy of each "
                "saved parameter it modifies; backward uses the pre-step values)", False, tuple(edits),
                kind="allow-mutation")]


