"""Rule base: a code, docs (what, why backward breaks, example, fix) and runnable VALID/INVALID examples.

The examples are complete scripts: the test-suite runs each with torch (INVALID must raise the autograd
error, VALID must run backward clean) and checks the analyzer flags exactly the INVALID ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import ClassVar

from gradguard.analysis.hazards import Hazard, SaveRecord, Site
from gradguard.model import Finding, Mutation, Related, Span

LinesFor = Callable[[str], tuple[str, Sequence[str]]]


def char_col(lines: Sequence[str], line: int, byte_col: int) -> int:
    """0-based UTF-8 byte column -> 0-based character column."""
    if not (1 <= line <= len(lines)):
        return byte_col
    text = lines[line - 1]
    if text.isascii():
        return byte_col
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def span(lines: Sequence[str], s: Site) -> Span:
    return Span(s.line, char_col(lines, s.line, s.col) + 1, s.end_line, char_col(lines, s.end_line, s.end_col) + 1)


def span_dict(lines: Sequence[str], s: Site) -> dict[str, int]:
    sp = span(lines, s)
    return {"line": sp.line, "column": sp.column, "end_line": sp.end_line, "end_column": sp.end_column}


def at(site: Site, h: Hazard) -> str:
    """Where ``site`` is, as a message says it: "line 14", or "blocks.py:14" for a line in another file."""
    if site.path == h.site.path:
        return f"line {site.line}"
    name = os.path.basename(site.path) if site.path else "the checked file"
    return f"{name}:{site.line}"


def output_phrase(r: SaveRecord) -> str | None:
    """How a message names a saved tensor that is an op's output: "the output", "output 0" (one of several:
    `o, (h, c) = lstm(x)`, as torch's own message says it); None for a saved input."""
    if r.what == "its output":
        return "the output"
    if r.what.startswith("its output ["):
        return f"output {r.what[len('its output ['):-1]}"
    return None


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    why: ClassVar[str]
    fix: ClassVar[str]
    severity: ClassVar[str] = "warning"
    INVALID: ClassVar[Sequence[str]] = ()
    VALID: ClassVar[Sequence[str]] = ()

    @classmethod
    def docs_url(cls, base: str | None = None) -> str | None:
        """Where the rule's page is (:func:`gradguard.rules.docs.page_uri`)."""
        from gradguard.rules.docs import page_uri

        return page_uri(cls.code, base)

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        raise NotImplementedError

    @classmethod
    def message(cls, h: Hazard) -> str:
        raise NotImplementedError

    @classmethod
    def finding(cls, h: Hazard, path: str, lines: Sequence[str], lines_for: LinesFor | None = None) -> Finding:
        """The finding for ``h`` in ``path`` (whose text is ``lines``); ``lines_for(site_path)`` gives the display
        path and lines of another file that a related location (the op that saved the tensor) is in."""

        def where(site: Site) -> tuple[str, Sequence[str]]:
            if site.path == h.site.path:
                return path, lines
            if lines_for is not None:
                return lines_for(site.path)
            return site.path or path, ()

        sp = span(lines, h.site)
        related = []
        for r in h.saves:
            rp, rl = where(r.site)
            rs = span(rl, r.site)
            related.append(Related(rp, rs.line, rs.column, f"{r.op} saved {r.what} here", rs.end_line, rs.end_column))
            if r.view is not None and r.view != r.site:
                vp, vl = where(r.view)
                vs = span(vl, r.view)
                related.append(Related(vp, vs.line, vs.column, f"what {r.op} saved is a view of `{h.target}`, made here",
                                       vs.end_line, vs.end_column))
        for site, msg in h.related:
            rp, rl = where(site)
            rs = span(rl, site)
            related.append(Related(rp, rs.line, rs.column, msg, rs.end_line, rs.end_column))
        extra = {k: (span_dict(lines, v) if isinstance(v, Site) and v.path == h.site.path else v)
                 for k, v in h.extra if not (isinstance(v, Site) and v.path != h.site.path)}
        mut = Mutation(kind=h.form, node=sp, stmt=span(lines, h.stmt), name=h.op, receiver=h.target, extra=extra)
        facts = {
            "op": h.op, "target": h.target, "kind": h.kind,
            "saves": [{"op": r.op, "what": r.what, "line": r.site.line, "op_name": r.op_name,
                       "same_file": r.site.path == h.site.path} for r in h.saves],
        }
        return Finding(path=path, line=sp.line, column=sp.column, end_line=sp.end_line, end_column=sp.end_column,
                       code=cls.code, message=cls.message(h), severity=cls.severity, related=related,
                       mutation=mut, facts=facts)

    @classmethod
    def markdown(cls) -> str:
        parts = [f"# {cls.code}: {cls.name}", "", cls.summary, "", "## Why backward breaks", "", cls.why.strip(), ""]
        if cls.INVALID:
            parts += ["## Example", "", "```python", cls.INVALID[0].strip(), "```", ""]
        parts += ["## Fix", "", cls.fix.strip(), ""]
        if cls.VALID:
            parts += ["## Not flagged", "", "```python", cls.VALID[0].strip(), "```", ""]
        return "\n".join(parts)


def saver_phrase(h: Hazard) -> str:
    if not h.saves:
        return "a tensor saved for backward"
    r = h.saves[0]
    more = f" (and {len(h.saves) - 1} more)" if len(h.saves) > 1 else ""
    return f"{r.what} of {r.op} ({at(r.site, h)}){more}" if r.what.startswith("the output") else \
        f"a tensor that {r.op} ({at(r.site, h)}) saved for backward{more}"
