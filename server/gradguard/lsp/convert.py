"""Model positions (1-based lines, 1-based character columns, end exclusive) <-> LSP positions.

LSP positions are 0-based lines and 0-based columns counted in the negotiated encoding's code units
(UTF-16 by default, UTF-8 or UTF-32). Lines are split like LSP does: on ``\\r\\n``, ``\\r`` and ``\\n`` only.
A :class:`Mapper` also maps the lines of an analysed program back to the documents they came from (one text
document, or the cells of a notebook analysed as one program).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types as T
from pygls.uris import to_fs_path

from gradguard.model import Edit, Finding, Fix

SOURCE = "gradguard"  # the diagnostics' source
RUN_SOURCE = "gradguard-run"  # gradguard.runFile's (the runtime doctor's) diagnostics
FIX_ALL_KIND = "source.fixAll.gradguard"
REQUEST_FAILED = -32803
MAX_CHARS = 20_000_000  # documents over this are not checked (GG000)
LARGE_CHARS = 1_000_000  # documents over this are checked in a child process (gradguard.lsp.isolated), one at a time

LINE_RE = re.compile(r"\r\n|\r|\n")

SEVERITY = {
    "error": T.DiagnosticSeverity.Error,
    "warning": T.DiagnosticSeverity.Warning,
    "info": T.DiagnosticSeverity.Information,
    "information": T.DiagnosticSeverity.Information,
    "hint": T.DiagnosticSeverity.Hint,
}


def uri_path(uri: str) -> str | None:
    """The file system path of a ``file:`` uri (None for any other scheme)."""
    try:
        return to_fs_path(uri) if uri.startswith("file:") else None
    except Exception:
        return None


def split_lines(text: str) -> list[str]:
    """Lines as LSP counts them (no terminators); ``""`` is one empty line, ``"a\\n"`` is ``["a", ""]``."""
    return LINE_RE.split(text)


def units(s: str, encoding: str) -> int:
    """Length of ``s`` in code units of ``encoding`` ("utf-16", "utf-8" or "utf-32")."""
    if s.isascii() or encoding == "utf-32":
        return len(s)
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def char_index(s: str, n_units: int, encoding: str) -> int:
    """Character index in ``s`` of the position ``n_units`` code units in (clamped to the line)."""
    if n_units <= 0:
        return 0
    if s.isascii() or encoding == "utf-32":
        return min(n_units, len(s))
    seen = 0
    for i, c in enumerate(s):
        if seen >= n_units:
            return i
        o = ord(c)
        if encoding == "utf-8":
            seen += 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4
        else:
            seen += 2 if o > 0xFFFF else 1
    return len(s)


@dataclass(frozen=True)
class Segment:
    """Lines ``first`` .. ``first + count - 1`` (0-based) of the analysed program belong to ``uri``; ``cell`` is its
    number in a notebook (1-based, every cell counted, as ``gradguard check`` prints it), 0 for a text document."""

    uri: str
    first: int
    count: int
    cell: int = 0


@dataclass
class Mapper:
    lines: Sequence[str]
    encoding: str
    segments: Sequence[Segment]
    _starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._starts = [s.first for s in self.segments]

    @staticmethod
    def single(uri: str, lines: Sequence[str], encoding: str) -> Mapper:
        return Mapper(lines, encoding, [Segment(uri, 0, len(lines))])

    def segment_of(self, line0: int) -> Segment | None:
        best = None
        for s in self.segments:
            if s.first <= line0 < s.first + max(s.count, 1):
                return s
            if s.first <= line0:
                best = s
        return best

    @property
    def notebook(self) -> bool:
        return any(s.cell for s in self.segments)

    def locate(self, line1: int) -> tuple[Segment | None, int]:
        """Program line (1-based) -> (its segment, line in that segment, 1-based)."""
        seg = self.segment_of(max(line1 - 1, 0))
        return seg, (line1 - seg.first if seg is not None else line1)

    def relabel(self, text: str, own: Segment | None) -> str:
        """In a notebook, "line 14" of the combined program as the cells read it ("line 2", "cell 3, line 1")."""
        if not self.notebook or "line" not in text:
            return text
        from gradguard.notebook import relabel

        return relabel(text, self.locate, own, lambda seg: f"cell {seg.cell}" if seg is not None else "a cell")

    def segment_for_uri(self, uri: str) -> Segment | None:
        for s in self.segments:
            if s.uri == uri:
                return s
        return None

    def _clamp(self, line1: int, col1: int) -> tuple[int, int]:
        """Clamp to a valid (0-based line, 0-based char col) of the program."""
        if not self.lines:
            return 0, 0
        line0 = line1 - 1
        if line0 < 0:
            return 0, 0
        if line0 >= len(self.lines):
            last = len(self.lines) - 1
            return last, len(self.lines[last])
        return line0, max(0, min(col1 - 1, len(self.lines[line0])))

    def position(self, line1: int, col1: int) -> tuple[Segment | None, T.Position]:
        line0, c = self._clamp(line1, col1)
        seg = self.segment_of(line0)
        text = self.lines[line0] if line0 < len(self.lines) else ""
        local = line0 - seg.first if seg else line0
        if seg is not None and local >= seg.count > 0:  # past the end of the last segment
            local = seg.count - 1
            text = self.lines[seg.first + local]
            c = len(text)
        return seg, T.Position(line=max(local, 0), character=units(text[:c], self.encoding))

    def range(self, line1: int, col1: int, end_line1: int, end_col1: int) -> tuple[str, T.Range] | None:
        seg, start = self.position(line1, col1)
        if seg is None:
            return None
        if (end_line1, end_col1) < (line1, col1):
            end_line1, end_col1 = line1, col1
        seg2, end = self.position(end_line1, end_col1)
        if seg2 != seg:  # crosses a cell boundary: clip to the end of the first cell
            last = seg.first + max(seg.count, 1) - 1
            text = self.lines[last] if last < len(self.lines) else ""
            end = T.Position(line=last - seg.first, character=units(text, self.encoding))
        return seg.uri, T.Range(start=start, end=end)

    def to_model(self, uri: str, pos: T.Position) -> tuple[int, int] | None:
        """LSP position in document ``uri`` -> (1-based line, 1-based char column) of the program."""
        seg = self.segment_for_uri(uri)
        if seg is None:
            return None
        line0 = seg.first + max(pos.line, 0)
        if line0 >= len(self.lines) or pos.line >= max(seg.count, 1):
            return None
        return line0 + 1, char_index(self.lines[line0], pos.character, self.encoding) + 1


@dataclass
class LspFix:
    fix: Fix
    edits: list[tuple[str, T.TextEdit]]  # (uri, edit)

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.fix.title, "safe": self.fix.safe, "preferred": self.fix.preferred, "kind": self.fix.kind,
            "edits": [{"uri": u, "range": _range_json(e.range), "newText": e.new_text} for u, e in self.edits],
        }

    def workspace_edit(self) -> T.WorkspaceEdit:
        changes: dict[str, list[T.TextEdit]] = {}
        for u, e in self.edits:
            changes.setdefault(u, []).append(e)
        return T.WorkspaceEdit(changes=changes)


def _range_json(r: T.Range) -> dict[str, Any]:
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}


def map_edit(mapper: Mapper, e: Edit) -> tuple[str, T.TextEdit] | None:
    # An edit may end at (last line + 1, 1), i.e. just past a trailing line break.
    got = mapper.range(e.line, e.column, e.end_line, e.end_column)
    if got is None:
        return None
    s1, _ = mapper.position(e.line, e.column)
    s2, _ = mapper.position(e.end_line, e.end_column)
    if s1 != s2:
        return None  # an edit spanning two notebook cells cannot be expressed
    uri, rng = got
    return uri, T.TextEdit(range=rng, new_text=e.text)


def map_fix(mapper: Mapper, fix: Fix) -> LspFix | None:
    edits = []
    for e in fix.edits:
        m = map_edit(mapper, e)
        if m is None:
            return None
        edits.append(m)
    return LspFix(fix, edits)


@dataclass
class Entry:
    """One finding as published: where, the diagnostic, the finding and its fixes in LSP terms."""

    uri: str
    diagnostic: T.Diagnostic
    finding: Finding
    fixes: list[LspFix]


_DOCS_BASE: list[str] = [""]


def set_docs_base(url: str | None) -> None:
    """The ``docsBaseUrl`` setting: where rule links point ("" = the installed version's pages)."""
    _DOCS_BASE[0] = url or ""


def docs_href(code: str) -> str | None:
    from gradguard.rules.docs import page_uri

    try:
        return page_uri(code, _DOCS_BASE[0] or None)
    except Exception:  # never fail a diagnostic over a link
        return None


_TICKS = re.compile(r"`([^`\n]*)`")


def plain(text: str) -> str:
    """Text for places that show it literally (diagnostic messages): `code` becomes "code"."""
    return _TICKS.sub(r'"\1"', text) if "`" in text else text


def action_title(code: str, title: str, kind: str = "") -> str:
    """A quick fix as menus show it: ``gradguard (GG102): remove inplace=True from nn.ReLU(...)``, short, no
    backticks (a parenthesised remark or a ``: preview`` tail goes when the title is long)."""
    if kind == "noqa":
        return f"gradguard ({code}): suppress on this line (# noqa: {code})"
    t = title.replace("`", "")
    limit = 64
    if len(t) > limit:
        t = re.sub(r"\s*\([^()]*\)$", "", t)
    if len(t) > limit and ": " in t:
        t = t.split(": ", 1)[0]
    if len(t) > limit:
        t = t[:limit - 1].rstrip() + "…"
    if t[:1].isupper() and not t[1:2].isupper():
        t = t[0].lower() + t[1:]
    return f"gradguard ({code}): {t}"


def related_location(mapper: Mapper, path_uri: dict[str, str], r: Any, main_path: str) -> T.Location | None:
    end_line = r.end_line or r.line
    end_col = r.end_column or r.column + 1
    if r.path == main_path or not r.path:
        got = mapper.range(r.line, r.column, end_line, end_col)
        if got is None:
            return None
        return T.Location(uri=got[0], range=got[1])
    # Another file (runtime traces): character columns are the best we know without its text.
    uri = path_uri.get(r.path)
    if uri is None:
        from pygls.uris import from_fs_path

        uri = from_fs_path(r.path) or r.path
    p0 = T.Position(line=max(r.line - 1, 0), character=max(r.column - 1, 0))
    p1 = T.Position(line=max(end_line - 1, 0), character=max(end_col - 1, 0))
    return T.Location(uri=uri, range=T.Range(start=p0, end=p1))


def to_entry(f: Finding, mapper: Mapper, version: int | None, source: str = "gradguard",
             severity_override: str | None = None) -> Entry | None:
    got = mapper.range(f.line, f.column, f.end_line, f.end_column)
    if got is None:
        return None
    uri, rng = got
    own = mapper.segment_for_uri(uri) if mapper.notebook else None
    fixes = [lf for lf in (map_fix(mapper, x) for x in f.fixes) if lf is not None]
    if own is not None:  # notebook: line numbers in titles as the cells read them
        fixes = [LspFix(Fix(mapper.relabel(lf.fix.title, own), lf.fix.safe, lf.fix.edits, lf.fix.preferred,
                            lf.fix.kind), lf.edits) for lf in fixes]
    related = []
    for r in f.related:
        loc = related_location(mapper, {}, r, f.path)
        if loc is not None:
            related.append(T.DiagnosticRelatedInformation(location=loc, message=plain(mapper.relabel(r.message, own))))
    href = docs_href(f.code)
    sev = SEVERITY.get((severity_override or f.severity or "warning").lower(), T.DiagnosticSeverity.Warning)
    diag = T.Diagnostic(
        range=rng,
        message=plain(mapper.relabel(f.message, own)),
        severity=sev,
        code=f.code,
        code_description=T.CodeDescription(href=href) if href else None,
        source=source,
        related_information=related or None,
        data={"uri": uri, "version": version, "fixes": [x.to_json() for x in fixes]},
    )
    return Entry(uri, diag, f, fixes)
