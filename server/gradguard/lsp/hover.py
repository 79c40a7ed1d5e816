"""Hover text for one finding: what saved what where, why backward breaks, the fix as before/after."""

from __future__ import annotations

from collections.abc import Sequence

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


def hover_markdown(f: Finding, lines: Sequence[str]) -> str:
    from gradguard.rules import BY_CODE

    rule = BY_CODE.get(f.code)
    title = f"{f.code} {rule.name}" if rule is not None else f.code
    out = [f"**gradguard {title}**", "", f.message, ""]
    line_text = lines[f.line - 1].strip() if 1 <= f.line <= len(lines) else ""
    saves = f.facts.get("saves") or []
    if saves or f.related:
        out.append("**What happens here**")
        out.append("")
        for s in saves:
            op = s.get("op", "an op")
            what = s.get("what", "a tensor")
            ln = s.get("line")
            where = f"line {ln}" if ln else "an earlier line"
            src = lines[ln - 1].strip() if isinstance(ln, int) and 1 <= ln <= len(lines) else ""
            out.append(f"- {where}: `{op}` saved {what} for backward" + (f" (`{src}`)" if src else ""))
        if not saves:
            for r in f.related:
                out.append(f"- line {r.line}: {r.message}")
        target = f.facts.get("target") or (f.mutation.receiver if f.mutation else "")
        op = f.facts.get("op") or (f.mutation.name if f.mutation else "")
        mutated = f"`{target}`" if target else "it"
        via = f" with `{op}`" if op else ""
        out.append(f"- line {f.line}: `{line_text}` modifies {mutated} in place{via}, which bumps its version "
                   "counter")
        if f.code.startswith(("GG1", "GG2")) or saves:
            out.append("- `backward()` then finds the saved tensor at a newer version and raises *one of the "
                       "variables needed for gradient computation has been modified by an inplace operation*")
        out.append("")
    if rule is not None:
        out += ["**Why backward breaks**", "", " ".join(rule.why.split()), ""]
    fix = next((x for x in f.fixes if x.preferred and x.kind != "noqa"), None) or \
        next((x for x in f.fixes if x.kind != "noqa"), None)
    if fix is not None:
        out += [f"**Fix** ({'safe' if fix.safe else 'review: may change behaviour'}): {fix.title}", ""]
        snip = _snippet(lines, fix)
        if snip is not None:
            out += ["Before:", "", _fence(snip[0]), "", "After:", "", _fence(snip[1]), ""]
    elif rule is not None:
        out += ["**Fix**", "", " ".join(rule.fix.split()), ""]
    if rule is not None:
        out.append(f"[{f.code} documentation]({rule.docs_url()})")
    return "\n".join(out).rstrip() + "\n"
