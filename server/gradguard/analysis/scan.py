"""A text scan for functions that only ever run under a context (``torch.no_grad()``,
``allow_mutation_on_saved_tensors()``): cheaper than walking the tree."""

from __future__ import annotations

import re

_DEF_RE = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")


_WITH_NG_RE = re.compile(r"^(\s*)(?:async\s+)?with\b.*\b(?:no_grad|inference_mode|set_grad_enabled\(\s*False)")


_DECO_NG_RE = re.compile(r"^\s*@.*\b(?:no_grad|inference_mode)\b")


_WITH_AM_RE = re.compile(r"^(\s*)(?:async\s+)?with\b.*\ballow_mutation_on_saved_tensors\b")


_NEVER_RE = re.compile(r"(?!)")


_WORD_RE = re.compile(r"[A-Za-z_]\w*")


_STR_RE = re.compile(r"([\'\"])(?:\\.|(?!\1).)*\1")


def no_grad_only(lines: list[str]) -> set[int]:
    """Functions (by the line of their ``def``) only ever referenced from no_grad code: they run under no_grad.
    See ``context_only``."""
    return context_only(lines, _WITH_NG_RE, _DECO_NG_RE)


def allow_mutation_only(lines: list[str]) -> set[int]:
    """Functions only ever referenced inside ``with torch.autograd.graph.allow_mutation_on_saved_tensors():``."""
    return context_only(lines, _WITH_AM_RE, _NEVER_RE)


def context_only(lines: list[str], with_re: re.Pattern[str], deco_re: re.Pattern[str]) -> set[int]:
    """Functions (by the line of their ``def``) only ever referenced from code under a context: they run under it.

    A function is no-grad-only when it is decorated with no_grad, or when every reference to its name in the
    file (a call, or passing it around) sits inside a ``with torch.no_grad()`` block or inside another
    no-grad-only function. Optimizer helpers (``_single_tensor_adamw``) and reparameterisation code qualify.
    Works on the text (indentation delimits blocks): a fraction of the cost of walking the tree.
    """
    if not any(with_re.match(ln) or deco_re.match(ln) for ln in lines if "with" in ln or "@" in ln):
        return set()  # no block and no decorator opens the context: nothing runs only under it
    defs: dict[str, list[int]] = {}
    decorated: set[int] = set()
    fn_of: list[int] = [0] * (len(lines) + 2)  # innermost enclosing def line of each line (0: module level)
    ng_of: list[bool] = [False] * (len(lines) + 2)
    stack: list[tuple[int, str, int]] = []  # (indent, kind, def line) of open blocks
    cur_fn, cur_ng = 0, False  # the innermost def around the current line, and whether a context block is open
    deco_ng = False
    depth = 0  # open brackets: continuation lines (a multi-line signature's closing `):`) are not blocks
    for no, text in enumerate(lines, 1):
        stripped = text.lstrip()
        cont = depth > 0
        if stripped and not stripped.startswith("#"):
            code = _STR_RE.sub("''", stripped).split("#", 1)[0]
            depth = max(0, depth + sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}"))
        if cont or not stripped or stripped.startswith("#"):
            fn_of[no], ng_of[no] = cur_fn, cur_ng
            continue
        indent = len(text) - len(stripped)
        if stack and indent <= stack[-1][0]:
            while stack and indent <= stack[-1][0]:
                stack.pop()
            cur_fn = next((d for _i, k, d in reversed(stack) if k == "def"), 0)
            cur_ng = any(k == "ng" for _i, k, _d in stack)
        fn_of[no], ng_of[no] = cur_fn, cur_ng
        if stripped.startswith("@"):
            deco_ng = deco_ng or bool(deco_re.match(text))
            continue
        m = _DEF_RE.match(text)
        if m:
            defs.setdefault(m.group(2), []).append(no)
            if deco_ng:
                decorated.add(no)
            stack.append((indent, "def", no))
            cur_fn = no
        elif with_re.match(text):
            stack.append((indent, "ng", 0))
            cur_ng = True
        deco_ng = False
    refs: dict[str, list[tuple[bool, int]]] = {}
    in_doc = ""
    for no, text in enumerate(lines, 1):
        code = text
        if in_doc:  # inside a triple-quoted string: skip up to its end
            end = code.find(in_doc)
            if end < 0:
                continue
            code, in_doc = code[end + 3:], ""
        for q in ('"""', "'''"):
            while q in code:
                a = code.find(q)
                b = code.find(q, a + 3)
                if b < 0:
                    code, in_doc = code[:a], q
                    break
                code = code[:a] + code[b + 3:]
        code = _STR_RE.sub("''", code).split("#", 1)[0]
        for w in _WORD_RE.findall(code):
            if w in defs and no not in defs[w]:
                refs.setdefault(w, []).append((ng_of[no], fn_of[no]))
    ng_only: set[int] = set(decorated)
    changed = True
    while changed:
        changed = False
        for name, nodes in defs.items():
            rs = refs.get(name)
            if not rs:
                continue
            if all(ng or (fn and (fn in ng_only or fn in nodes)) for ng, fn in rs) and any(
                    ng or (fn and fn in ng_only and fn not in nodes) for ng, fn in rs):
                for n in nodes:
                    if n not in ng_only:
                        ng_only.add(n)
                        changed = True
    return ng_only
