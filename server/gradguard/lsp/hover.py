"""Hover text for one finding: the line that saved the tensor, the line that modified it, the fix, then why."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import Any

from gradguard.lsp.convert import docs_href
from gradguard.model import Edit, Finding, Fix


def _snippet(lines: Sequence[str], fix: Fix) -> tuple[str, str] | None:
    """(before, after) text of the lines the fix touches."""
    if not fix.edits:
        return None
    from gradguard.fixes import apply_edits

    first = min(e.line for e in fix.edits)
    last = max(e.end_line if e.end_column > 1 or e.end_line == e.line else e.end_line - 1 for e in fix.edits)
    first = max(first, 1)
    last = min(max(last, first), len(lines))
    if first > len(lines):
        return None
    before = "\n".join(lines[first - 1:last]) + "\n"
    shifted = [Edit(e.line - first + 1, e.column, e.end_line - first + 1, e.end_column, e.text) for e in fix.edits]
    try:
        after = apply_edits(before, shifted)
    except Exception:  # pragma: no cover - defensive: never fail a hover
        return None
    return before.rstrip("\n"), after.rstrip("\n")


def _fence(code: str) -> str:
    ticks = "```"
    while ticks in code:
        ticks += "`"
    return f"{ticks}python\n{code}\n{ticks}"


def _uncommented(line: str) -> str:
    """A source line without its comment: the user's trailing remarks are not quoted back."""
    import io
    import tokenize

    if "#" not in line:
        return line.rstrip()
    cut = len(line)
    try:
        for t in tokenize.generate_tokens(io.StringIO(line.strip()).readline):
            if t.type == tokenize.COMMENT:
                cut = len(line) - len(line.lstrip()) + t.start[1]
                break
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return line[:cut].rstrip()


def _code(line: str) -> str:
    """A source line without its comment and indentation."""
    return _uncommented(line).strip()


def _sentences(text: str, n: int) -> str:
    flat = " ".join(text.split())
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z`*])", flat)
    return " ".join(parts[:n])


def hover_markdown(f: Finding, lines: Sequence[str], mapper: Any = None, uri: str | None = None) -> str:
    """Leads with the two lines (saved here, modified here) and the fix; then why backward breaks, briefly; the
    message itself is already in the diagnostic, so it is not repeated."""
    from gradguard.rules import BY_CODE

    rule = BY_CODE.get(f.code)
    own = mapper.segment_for_uri(uri) if mapper is not None and uri is not None and mapper.notebook else None

    def at(ln: int) -> str:
        text = f"line {ln}"
        return mapper.relabel(text, own) if own is not None else text

    def code_of(ln: Any) -> str:
        return _code(lines[ln - 1]) if isinstance(ln, int) and 1 <= ln <= len(lines) else ""

    href = docs_href(f.code)
    name = rule.name if rule is not None else f.code
    head = f"**gradguard {f.code}** · " + (f"[{name}]({href})" if href else name)
    out = [head, ""]
    saves = f.facts.get("saves") or []
    for sv in saves:
        ln = sv.get("line")
        where = at(ln) if isinstance(ln, int) and sv.get("same_file", True) else "another file"
        src = code_of(ln) if sv.get("same_file", True) else ""
        out.append(f"- **saved** {where}: `{sv.get('op', 'an op')}` keeps {sv.get('what', 'a tensor')} for backward"
                   + (f" — `{src}`" if src else ""))
    if not saves:
        for r in f.related:
            out.append(f"- {at(r.line)}: {r.message}")
    target = f.facts.get("target") or (f.mutation.receiver if f.mutation else "")
    op = f.facts.get("op") or (f.mutation.name if f.mutation else "")
    what = f"changes `{target}` in place" if target else "changes it in place"
    via = f" (`{op}`)" if op and op not in (target,) else ""
    src = code_of(f.line)
    out.append(f"- **modified** {at(f.line)}: {what}{via}" + (f" — `{src}`" if src else ""))
    out.append("")
    fix = next((x for x in f.fixes if x.preferred and x.kind != "noqa"), None) or \
        next((x for x in f.fixes if x.kind != "noqa"), None)
    if fix is not None:
        title = mapper.relabel(fix.title, own) if own is not None else fix.title
        out += [f"**Fix** ({'safe' if fix.safe else 'unsafe: review it'}): {title}", ""]
        snip = _snippet(lines, fix)
        if snip is not None:
            after = "\n".join(_uncommented(x) for x in snip[1].splitlines())
            out += [_fence(textwrap.dedent(after)), ""]
    elif rule is not None:
        out += [f"**Fix**: {_sentences(rule.fix, 2)}", ""]
    if rule is not None:
        out += ["---", "", f"*Why backward breaks:* {_sentences(rule.why, 2)}"]
    return "\n".join(out).rstrip() + "\n"
