"""Remove or replace one argument of a call, keeping the rest of the text byte for byte: the standard library's
``tokenize`` does what ``libcst`` does in :func:`gradguard.fixes.arguments._rewrite_call`.

libcst's parser is a compiled extension, so the language server shipped inside the VS Code extension (pure Python,
any platform) runs without it: there, and wherever libcst is missing, fixes use this module. It reproduces
libcst's output (``tests/fixes/test_callargs.py`` compares the two): an argument is its value and its comma with the
whitespace around that; removing the last argument also drops the comma of
the one before it, unless the removed one had a trailing comma.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

_SKIP = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


@dataclass
class _Arg:
    start: int  # offset of the first character of the value
    value_end: int  # offset just after the value
    comma: int  # offset of its comma, -1 when none
    end: int  # offset where the next argument (or the closing parenthesis) starts
    eq: int = -1  # offset just after `=` for a keyword argument


def _offsets(text: str) -> list[int]:
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    return starts


def _arguments(text: str) -> tuple[int, list[_Arg]] | None:
    """(offset just after the call's opening parenthesis, its arguments) of the call ``text`` is."""
    if "\r" in text:
        return None
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in _SKIP]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    starts = _offsets(text)

    def off(pos: tuple[int, int]) -> int:
        return starts[pos[0] - 1] + pos[1]

    if not toks or toks[-1].string != ")":
        return None
    # the opening parenthesis that matches the final one
    depth = 0
    open_i = -1
    for i in range(len(toks) - 1, -1, -1):
        s = toks[i].string
        if toks[i].type == tokenize.OP and s in (")", "]", "}"):
            depth += 1
        elif toks[i].type == tokenize.OP and s in ("(", "[", "{"):
            depth -= 1
            if depth == 0:
                open_i = i
                break
    if open_i <= 0:
        return None
    lpar_end = off(toks[open_i].end)
    rpar = off(toks[-1].start)
    args: list[_Arg] = []
    depth = 0
    cur: list[tokenize.TokenInfo] = []
    eq = -1

    def close(comma_tok: tokenize.TokenInfo | None) -> None:
        if not cur:
            return
        args.append(_Arg(off(cur[0].start), off(cur[-1].end), off(comma_tok.start) if comma_tok else -1, -1, eq))

    for t in toks[open_i + 1:-1]:
        if t.type == tokenize.OP and t.string in ("(", "[", "{"):
            depth += 1
        elif t.type == tokenize.OP and t.string in (")", "]", "}"):
            depth -= 1
        if depth == 0 and t.type == tokenize.OP and t.string == ",":
            if not cur:
                return None
            close(t)
            cur, eq = [], -1
            continue
        if depth == 0 and t.type == tokenize.OP and t.string == "=" and len(cur) == 1 and eq < 0:
            eq = off(t.end)
        cur.append(t)
    close(None)
    for k, a in enumerate(args):
        a.end = args[k + 1].start if k + 1 < len(args) else rpar
    return lpar_end, args


def rewrite_call(text: str, keyword: str | None = None, index: int | None = None,
                 replace: str | None = None) -> str | None:
    """``text`` (a call) without the argument ``keyword=...`` (or the positional argument ``index``), or with its
    value replaced by ``replace``; None when the text is not such a call."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(node, ast.Call):
        return None
    got = _arguments(text)
    if got is None:
        return None
    lpar_end, args = got
    # Arguments in source order, as ast sees them: positional (and *star) then keywords (and **kw) interleaved.
    nodes: list[ast.expr | ast.keyword] = sorted([*node.args, *node.keywords],
                                                 key=lambda n: (n.lineno, n.col_offset))
    if len(nodes) != len(args):
        return None
    hit = -1
    for i, n in enumerate(nodes):
        if keyword is not None and isinstance(n, ast.keyword) and n.arg == keyword:
            hit = i
            break
        named = isinstance(n, ast.keyword) and n.arg is not None
        if index is not None and keyword is None and not named and i == index:
            hit = i
            break
    if hit < 0:
        return None
    a = args[hit]
    if replace is not None:
        vstart = a.start
        hn = nodes[hit]
        if isinstance(hn, ast.keyword) and hn.arg is not None:
            if a.eq < 0:
                return None
            vstart = a.eq
        else:
            vstart += len(text[vstart:a.value_end]) - len(text[vstart:a.value_end].lstrip("*"))
        while vstart < a.value_end and text[vstart] in " \t\\\n":
            vstart += 1
        return text[:vstart] + replace + text[a.value_end:]
    rest = args[:hit] + args[hit + 1:]
    pieces = [text[:lpar_end], text[lpar_end:args[0].start]]
    for k, b in enumerate(rest):
        if hit == len(args) - 1 and k == len(rest) - 1 and a.comma < 0:
            # the new last argument loses its comma (and what follows it), as libcst's MaybeSentinel.DEFAULT
            pieces.append(text[b.start:b.value_end])
        else:
            pieces.append(text[b.start:b.end])
    pieces.append(text[args[-1].end:])
    return "".join(pieces)
