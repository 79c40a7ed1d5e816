"""Build a Finding with its Mutation by hand from a real snippet (spans computed with ``ast``), the way the
analyzer reports it: lets the fix builders be tested independently of the analyzer."""

from __future__ import annotations

import ast
from typing import Any

from gradguard.fixes.context import OUT_OF_PLACE
from gradguard.model import Finding, Mutation, Span


def _span(lines: list[str], node: Any) -> dict[str, int]:
    def col(line: int, byte: int) -> int:
        return len(lines[line - 1].encode()[:byte].decode(errors="ignore")) + 1

    return {"line": node.lineno, "column": col(node.lineno, node.col_offset),
            "end_line": node.end_lineno, "end_column": col(node.end_lineno, node.end_col_offset)}


def _S(d: dict[str, int]) -> Span:
    return Span(d["line"], d["column"], d["end_line"], d["end_column"])


def stmt_at(tree: ast.Module, line: int) -> ast.stmt:
    best = None
    for n in ast.walk(tree):
        if isinstance(n, ast.stmt) and n.lineno == line and not isinstance(
                n, (ast.FunctionDef, ast.ClassDef, ast.For, ast.If, ast.With, ast.While)):
            best = n
    if best is None:
        for n in ast.walk(tree):
            if isinstance(n, ast.stmt) and n.lineno <= line <= (n.end_lineno or n.lineno) and not isinstance(
                    n, (ast.FunctionDef, ast.ClassDef, ast.For, ast.If, ast.With, ast.While, ast.Module)):
                best = n
    assert best is not None, f"no statement at line {line}"
    return best


def make(source: str, line: int, code: str, kind: str, name: str | None = None, **extra: Any) -> Finding:
    """A finding for the mutation of ``kind`` on ``line`` (``name`` picks the method/function when several)."""
    lines = source.splitlines()
    tree = ast.parse(source)
    st = stmt_at(tree, line)
    ex: dict[str, Any] = {}
    node: Any = st
    mname, recv = "", ""
    if kind == "method":
        calls = [c for c in ast.walk(st) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                 and c.func.attr.endswith("_") and c.lineno == line and (name is None or c.func.attr == name)]
        node = min(calls, key=lambda c: len(ast.unparse(c)))
        mname = node.func.attr
        recv = ast.unparse(node.func.value)
        ex = {"receiver_span": _span(lines, node.func.value), "call_span": _span(lines, node),
              "out_of_place": OUT_OF_PLACE.get(mname), "standalone": isinstance(st, ast.Expr) and st.value is node}
    elif kind == "function":
        node = next(c for c in ast.walk(st) if isinstance(c, ast.Call) and ast.unparse(c.func) == name)
        arg = node.args[0]
        mname = name.rsplit(".", 1)[-1]
        recv = ast.unparse(arg)
        oop = name[:-1] if name.endswith("_") else None
        ex = {"func_text": name, "out_of_place_func": oop, "arg_span": _span(lines, arg),
              "call_span": _span(lines, node), "standalone": isinstance(st, ast.Expr) and st.value is node}
    elif kind == "augassign":
        assert isinstance(st, ast.AugAssign)
        op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@",
              ast.FloorDiv: "//", ast.Mod: "%"}[type(st.op)]
        mname, recv = op + "=", ast.unparse(st.target)
        ex = {"target_span": _span(lines, st.target), "value_span": _span(lines, st.value), "op": op}
    elif kind == "setitem":
        assert isinstance(st, ast.Assign)
        tgt = st.targets[0]
        base = tgt.value
        recv = ast.unparse(base)
        ex = {"target_span": _span(lines, tgt), "base_span": _span(lines, base), "alias_of": None,
              "alias_site": None}
        if extra.get("alias_line"):
            a = stmt_at(tree, extra.pop("alias_line"))
            assert isinstance(a, ast.Assign)
            ex["alias_of"] = ast.unparse(a.value)
            ex["alias_site"] = _span(lines, a.value)
        node = tgt
    elif kind == "out":
        node = next(c for c in ast.walk(st) if isinstance(c, ast.Call) and any(k.arg == "out" for k in c.keywords))
        kw = next(k for k in node.keywords if k.arg == "out")
        recv = ast.unparse(kw.value)
        mname = ast.unparse(node.func)
        ex = {"out_kw_span": _span(lines, kw), "call_span": _span(lines, node),
              "standalone": isinstance(st, ast.Expr) and st.value is node}
    elif kind in ("inplace_kwarg", "module_entry", "module_call"):
        ctor_line = extra.pop("ctor_line", line)
        scope = tree if ctor_line != line or kind == "module_entry" else st
        cands = []
        for c in ast.walk(scope):
            if not isinstance(c, ast.Call) or c.lineno != ctor_line:
                continue
            k = next((k for k in c.keywords if k.arg == "inplace"), None)
            if k is not None:
                cands.append((c, k, False))
            elif c.args and isinstance(c.args[-1], ast.Constant) and c.args[-1].value is True:
                cands.append((c, c.args[-1], True))
        assert cands, f"no inplace flag on line {ctor_line}"
        ctor, flag, positional = cands[0]
        ex = {"kw_span": _span(lines, flag), "ctor_span": _span(lines, ctor), "positional": positional}
        mname = ast.unparse(ctor.func) + "(inplace=True)"
        if kind == "module_call":
            node = next(c for c in ast.walk(st) if isinstance(c, ast.Call))
        else:
            node = ctor
    elif kind == "carry":
        assert isinstance(st, ast.Assign)
        recv = ast.unparse(st.targets[0])
        ex = {"value_span": _span(lines, st.value)}
        node = st
    elif kind == "step":
        bl = extra.pop("backward_line")
        bst = stmt_at(tree, bl)
        ex = {"step_stmt_span": _span(lines, st), "backward_line": bl, "backward_stmt_span": _span(lines, bst)}
        mname = "optimizer.step()"
    ex.update(extra)
    sp = _S(_span(lines, node))
    mut = Mutation(kind=kind, node=sp, stmt=_S(_span(lines, st)), name=mname, receiver=recv, extra=ex)
    return Finding(path="<test>", line=sp.line, column=sp.column, end_line=sp.end_line, end_column=sp.end_column,
                   code=code, message="handmade", mutation=mut)
