"""Flags a function tests more than once: ``if self.return_intermediate:`` ... ``if self.return_intermediate:``.

Joining the two arms of each ``if`` on its own would pair the first test's true arm with the second test's false
arm, a path no run takes (the norm applied on one, its input returned on the other). When a function tests the
same flag twice or more, and nothing in the function assigns it, its body is analysed once with the flag true and
once with it false, and every test of that flag inside takes the arm the path assumed. One flag per function
(the first one tested), and only in bodies of at most MAX_SPLIT_STATEMENTS statements, so a body runs at most
twice and the cost stays close to what the joined analysis costs (a long function's statement budget is spent
as before).

A flag is a name or an attribute (``residual``, ``self.use_norm``), possibly negated, or such a name compared with
None (``mask is None``, ``mask is not None``).
"""

from __future__ import annotations

import ast

MAX_SPLIT_STATEMENTS = 50

FlagKey = tuple[str, str]  # ("bool" | "none", the flag's text)


def flag_test(test: ast.expr) -> tuple[FlagKey, bool] | None:
    """The flag a test reads, and whether the test is true when the flag is (truthy / None)."""
    pol = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, pol = test.operand, not pol
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot)) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        text = _flag_text(test.left)
        if text is None:
            return None
        return ("none", text), pol if isinstance(test.ops[0], ast.Is) else not pol
    text = _flag_text(test)
    return (("bool", text), pol) if text is not None else None


def _flag_text(e: ast.expr) -> str | None:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        return f"{e.value.id}.{e.attr}"
    return None


def cached_flag_test(s: ast.If) -> tuple[FlagKey, bool] | None:
    got: tuple[FlagKey, bool] | bool | None = getattr(s, "_gg_flag", False)
    if got is False:
        got = flag_test(s.test)
        s._gg_flag = got  # type: ignore[attr-defined]  # cached on the tree it describes
    return got if isinstance(got, tuple) else None


def correlated_flag(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.If | None:
    """An ``if`` over the function's whole body on the first flag it tests twice (see the module docstring), or
    None. Cached on the function's tree."""
    got: ast.If | bool | None = getattr(fn, "_gg_split", False)
    if got is not False:
        return got if isinstance(got, ast.If) else None
    fn._gg_split = None  # type: ignore[union-attr]
    # statements only (most functions have no flag tested twice: their expressions are never walked)
    counts: dict[FlagKey, int] = {}
    first: dict[FlagKey, ast.expr] = {}
    size = 0
    todo: list[list[ast.stmt]] = [fn.body]
    while todo:
        for st in todo.pop():
            size += 1
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(st, ast.If):
                ft = cached_flag_test(st)
                if ft is not None:
                    first.setdefault(ft[0], st.test)
                    counts[ft[0]] = counts.get(ft[0], 0) + 1
            for field in ("body", "orelse", "finalbody"):
                block = getattr(st, field, None)
                if block:
                    todo.append(block)
            for h in getattr(st, "handlers", ()):
                todo.append(h.body)
            for c in getattr(st, "cases", ()):
                todo.append(c.body)
    if size > MAX_SPLIT_STATEMENTS or not any(c >= 2 for c in counts.values()):
        return None
    assigned: set[str] = set()  # (stores inside nested functions count too: that only splits less often)
    for n in ast.walk(fn):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            text = _flag_text(n)
            if text is not None:
                assigned.add(text)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            assigned.update(n.names)
    order = sorted(first, key=lambda k: (first[k].lineno, first[k].col_offset))
    for key in order:
        if counts[key] >= 2 and key[1] not in assigned:
            test = first[key]
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test = test.operand  # the flag itself: the split's true arm is "truthy" (or "is None")
            if key[0] == "none" and isinstance(test, ast.Compare):
                test = ast.Compare(left=test.left, ops=[ast.Is()], comparators=[ast.Constant(None)])
                ast.copy_location(test, first[key])
                ast.fix_missing_locations(test)
            split = ast.If(test=test, body=fn.body, orelse=fn.body)
            ast.copy_location(split, fn.body[0])
            split._gg_flag = (key, True)  # type: ignore[attr-defined]
            split._gg_split = key  # type: ignore[attr-defined]
            fn._gg_split = split  # type: ignore[union-attr]
            return split
    return None
