"""GG001: ``# noqa`` comments that suppress nothing (ruff's RUF100). Off unless selected by its full code
(``--extend-select GG001``, or ``GG001`` in ``select``): ``select = ["GG"]`` does not turn it on."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

from gradguard.model import Edit, Finding, Fix

CODE = "GG001"
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)


def _comments(source: str) -> list[tuple[int, int, str]]:
    """(line, 0-based column, text) of every comment token (a ``# noqa`` inside a string is not one)."""
    out = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(source).readline):
            if t.type == tokenize.COMMENT:
                out.append((t.start[0], t.start[1], t.string))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return out


def _matches(code: str, listed: str) -> bool:
    return code == listed or code.startswith(listed)


def unused_noqa(source: str, lines: Sequence[str], findings: Sequence[Finding], path: str) -> list[Finding]:
    """A GG001 finding for each ``# noqa`` comment (or each code in it) that matches none of ``findings`` (the
    findings of the enabled rules on that line, before suppression), with a fix that removes what is unused."""
    by_line: dict[int, list[str]] = {}
    for f in findings:
        by_line.setdefault(f.line, []).append(f.code)
    out = []
    for line, col, text in _comments(source):
        m = _NOQA.search(text)
        if m is None or line > len(lines):
            continue
        here = by_line.get(line, [])
        start = col + m.start() + 1  # 1-based character column of "#"
        end = col + m.end() + 1
        codes = m.group("codes")
        if not codes:
            if here:
                continue
            unused: list[str] = []
            message = "unused `noqa` directive (nothing to suppress on this line)"
            keep = ""
        else:
            listed = [c.upper() for c in re.split(r"[\s,]+", codes) if c]
            unused = [c for c in listed if not any(_matches(h, c) for h in here)]
            if not unused:
                continue
            used = [c for c in listed if c not in unused]
            message = f"unused `noqa` directive (unused: {', '.join(unused)})"
            keep = f"# noqa: {', '.join(used)}" if used else ""
        if keep:
            edit = Edit(line, start, line, end, keep)
            title = f"Remove unused {', '.join(unused)} from the `noqa` comment"
        else:
            # the whole directive, with the spaces before it when nothing else follows on the line
            rest = lines[line - 1][end - 1:].strip()
            cut = start
            while not rest and cut > 1 and lines[line - 1][cut - 2] in " \t":
                cut -= 1
            edit = Edit(line, cut, line, end if rest or end > len(lines[line - 1]) else len(lines[line - 1]) + 1, "")
            title = "Remove the unused `noqa` comment"
        out.append(Finding(path=path, line=line, column=start, end_line=line, end_column=end, code=CODE,
                           message=message, severity="warning",
                           fixes=[Fix(title, True, (edit,), preferred=True, kind="remove-noqa")]))
    return out
