"""Fixes: computed with the diagnostics (an editor quick-fix is a lookup), applied as minimal text edits."""

from __future__ import annotations

from collections.abc import Sequence

from gradguard.model import Edit, Finding, Fix


def _offsets(lines: Sequence[str]) -> list[int]:
    out = [0]
    for ln in lines:
        out.append(out[-1] + len(ln))
    return out


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits (1-based line/column in characters, end exclusive)."""
    lines = text.splitlines(keepends=True)
    starts = _offsets(lines)

    def off(line: int, col: int) -> int:
        if line > len(lines):
            return len(text)
        return starts[line - 1] + col - 1

    out = text
    for e in sorted(edits, key=lambda e: (e.line, e.column, e.end_line, e.end_column), reverse=True):
        a, b = off(e.line, e.column), off(e.end_line, e.end_column)
        out = out[:a] + e.text + out[b:]
    return out


def _overlaps(a: Edit, b: Edit) -> bool:
    return not ((a.end_line, a.end_column) <= (b.line, b.column) or (b.end_line, b.end_column) <= (a.line, a.column))


def fix_text(text: str, findings: Sequence[Finding], unsafe: bool = False) -> tuple[str, int]:
    """Apply each finding's preferred fix (safe ones only unless ``unsafe``); skip fixes that would overlap."""
    chosen: list[Edit] = []
    applied = 0
    for f in findings:
        fix = next((x for x in f.fixes if x.preferred), None)
        if fix is None or (not fix.safe and not unsafe) or fix.kind == "noqa":
            continue
        if any(_overlaps(e, c) for e in fix.edits for c in chosen):
            continue
        chosen.extend(fix.edits)
        applied += 1
    return apply_edits(text, chosen), applied


def noqa_fix(f: Finding, lines: Sequence[str]) -> Fix | None:
    if not (1 <= f.line <= len(lines)):
        return None
    text = lines[f.line - 1]
    from gradguard.api import NOQA_RE

    m = NOQA_RE.search(text)
    end = len(text) + 1
    if m and m.group("codes"):
        new = f"{m.group(0)}, {f.code}"
        return Fix(f"Suppress {f.code} on this line", True,
                   (Edit(f.line, m.start() + 1, f.line, m.end() + 1, new),), kind="noqa")
    if m:
        return None  # a bare noqa already suppresses everything
    stripped = text.rstrip()
    return Fix(f"Suppress {f.code} on this line", True,
               (Edit(f.line, len(stripped) + 1, f.line, end, f"  # noqa: {f.code}"),), kind="noqa")


def attach_fixes(findings: Sequence[Finding], source: str) -> None:
    """Compute every finding's fixes (ranked, exactly one preferred), plus the suppression fix last."""
    from gradguard.fixes.builders import build_fixes

    lines = source.splitlines()
    for f in findings:
        fixes: list[Fix] = build_fixes(f, source, lines)
        nq = noqa_fix(f, lines)
        if nq:
            fixes.append(nq)
        if fixes and not any(x.preferred for x in fixes):
            first = fixes[0]
            fixes[0] = Fix(first.title, first.safe, first.edits, True, first.kind)
        f.fixes = fixes
