"""Fixes: computed with the diagnostics (an editor quick-fix is a lookup), applied as minimal text edits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gradguard.model import Edit, Finding, Fix, source_lines, source_lines_keepends


def _offsets(lines: Sequence[str]) -> list[int]:
    out = [0]
    for ln in lines:
        out.append(out[-1] + len(ln))
    return out


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits (1-based line/column in characters, end exclusive)."""
    lines = source_lines_keepends(text)
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


def applicable_fix(f: Finding, unsafe: bool = False) -> Fix | None:
    """The fix ``--fix`` would try for ``f``: its preferred one, when safe (or ``unsafe``), never a noqa."""
    fix = next((x for x in f.fixes if x.preferred), None)
    if fix is None or (not fix.safe and not unsafe) or fix.kind == "noqa" or not fix.edits:
        return None
    return fix


def _choose(findings: Sequence[Finding], unsafe: bool, rejected: set[int] | None = None) -> list[tuple[Finding, Fix]]:
    chosen: list[tuple[Finding, Fix]] = []
    edits: list[Edit] = []
    for i, f in enumerate(findings):
        fix = applicable_fix(f, unsafe)
        if fix is None or (rejected and i in rejected):
            continue
        if any(_overlaps(e, c) for e in fix.edits for c in edits):
            continue
        edits.extend(fix.edits)
        chosen.append((f, fix))
    return chosen


def fix_text(text: str, findings: Sequence[Finding], unsafe: bool = False) -> tuple[str, int]:
    """Apply each finding's preferred fix (safe ones only unless ``unsafe``); skip fixes that would overlap.

    Unverified: what ``--fix`` applies is :func:`fix_until_stable`."""
    chosen = _choose(findings, unsafe)
    return apply_edits(text, [e for _, fx in chosen for e in fx.edits]), len(chosen)


def _new_lines(edits: Sequence[Edit], first: int, last: int) -> tuple[int, int]:
    """Where old lines ``first..last`` are once ``edits`` are applied (widened over an edit that straddles them)."""
    before = sum(e.text.count("\n") - (e.end_line - e.line) for e in edits if e.end_line < first)
    through = sum(e.text.count("\n") - (e.end_line - e.line) for e in edits if e.line <= last)
    a = first + before
    return a, max(a, last + through)


def _persists(f: Finding, edits: Sequence[Edit], after: Sequence[Finding]) -> bool:
    """Does the re-check of the fixed text still report ``f`` (its code, on the lines ``f`` has become)?"""
    a, b = _new_lines(edits, f.line, f.end_line)
    return any(g.code == f.code and g.line <= b and g.end_line >= a for g in after)


@dataclass
class FixOutcome:
    text: str  # the fixed text; the input itself when nothing applies or the fixes never settle
    fixed: int = 0  # how many of the input's findings the applied fixes remove
    rounds: int = 0
    settled: bool = True  # False: each round found more to fix; nothing is applied (a second run would differ)
    rejected: list[Finding] = field(default_factory=list)  # fixes that leave their finding: never applied


def verify_round(text: str, findings: Sequence[Finding], recheck: Callable[[str], Sequence[Finding]],
                 unsafe: bool = False) -> tuple[list[tuple[Finding, Fix]], str, list[Finding], list[Finding]]:
    """One round of :func:`fix_until_stable`: the preferred fixes that hold together (each one's finding is gone
    when ``recheck`` looks at the result), the text with them applied, the findings ``recheck`` reports there,
    and the findings whose fix was withdrawn."""
    rejected: set[int] = set()
    while True:
        chosen = _choose(findings, unsafe, rejected)
        if not chosen:
            return [], text, list(findings), [findings[i] for i in sorted(rejected)]
        edits = [e for _, fx in chosen for e in fx.edits]
        new = apply_edits(text, edits)
        after = list(recheck(new))
        if any(g.code == "GG000" for g in after) and not any(g.code == "GG000" for g in findings):
            # the fixes together break the file: none of them
            rejected.update(i for i, f in enumerate(findings) if applicable_fix(f, unsafe) is not None)
            continue
        failed = {id(f) for f, _ in chosen if _persists(f, edits, after)}
        if not failed:
            return chosen, new, after, [findings[i] for i in sorted(rejected)]
        rejected.update(i for i, f in enumerate(findings) if id(f) in failed)


def fix_until_stable(text: str, findings: Sequence[Finding], recheck: Callable[[str], Sequence[Finding]],
                     unsafe: bool = False, max_rounds: int = 6) -> FixOutcome:
    """What ``gradguard check --fix`` applies: verified, idempotent fixes.

    Each round applies the preferred fixes (safe ones, and unsafe ones with ``unsafe``), re-checks the result with
    ``recheck`` and withdraws every fix whose finding is still reported there (a fix that does not fix is never
    applied), until the survivors all hold. Rounds repeat on the fixed text (a fix may reveal or make another
    finding) until one applies nothing: the result is a fixpoint, so a second ``--fix`` changes nothing. When the
    rounds do not settle within ``max_rounds``, nothing is applied at all (``settled`` is False)."""
    cur, cur_findings = text, list(findings)
    fixed_first = 0
    rejected_first: list[Finding] = []
    for rnd in range(max_rounds + 1):
        chosen, new, after, rejected = verify_round(cur, cur_findings, recheck, unsafe)
        if rnd == 0:
            fixed_first, rejected_first = len(chosen), rejected
        if not chosen:
            return FixOutcome(cur, fixed_first, rnd, True, rejected_first)
        cur, cur_findings = new, after
    return FixOutcome(text, 0, max_rounds, False, rejected_first)


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

    lines = source_lines(source)
    for f in findings:
        fixes: list[Fix] = build_fixes(f, source, lines)
        nq = noqa_fix(f, lines)
        if nq:
            fixes.append(nq)
        if fixes and not any(x.preferred for x in fixes):
            first = fixes[0]
            fixes[0] = Fix(first.title, first.safe, first.edits, True, first.kind)
        f.fixes = fixes
