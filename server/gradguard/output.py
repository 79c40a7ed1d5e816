"""Output formats of ``gradguard check``: text, json, sarif, github."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from gradguard import __version__
from gradguard.model import Finding


def display_path(path: str) -> str:
    """A path as users read it: relative to the working directory when below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def location(f: Finding) -> str:
    """``path:line:col``, or ``path:cell N:line:col`` in a notebook (as ruff prints it)."""
    cell = f"cell {f.cell}:" if f.cell is not None else ""
    return f"{display_path(f.path)}:{cell}{f.line}:{f.column}"


def rule_name(code: str) -> str:
    from gradguard.rules import BY_CODE
    from gradguard.rules.meta import META

    r = BY_CODE.get(code)
    if r is not None:
        return r.name
    m = META.get(code)
    return m.name if m is not None else code


def text(findings: Sequence[Finding], fixable: int | None = None, summary: bool = True,
         show_fixes: bool = False) -> str:
    """``fixable``: how many findings ``--fix`` really removes (the CLI verifies it by re-checking); None: count
    the findings that have a safe preferred fix other than a ``# noqa``, unverified. ``show_fixes``: each finding
    is followed by its preferred fix."""
    out = []
    for f in findings:
        out.append(f"{location(f)}: {f.code} {f.message}")
        if show_fixes:
            fx = next((x for x in f.fixes if x.preferred and x.kind != "noqa"), None)
            if fx is not None:
                out.append(f"    fix ({'safe' if fx.safe else 'unsafe: --unsafe-fixes'}): {fx.title}")
    if findings and summary:
        if fixable is None:
            from gradguard.fixes import applicable_fix

            fixable = sum(1 for f in findings if applicable_fix(f) is not None)
        nfix = fixable
        tail = f" ({nfix} fixable with `gradguard check --fix`)" if nfix else ""
        out.append(f"Found {len(findings)} problem{'s' if len(findings) != 1 else ''}{tail}.")
    return "\n".join(out)


def statistics(findings: Sequence[Finding], as_json: bool = False) -> str:
    """Counts per code, most frequent first (``--statistics``); ``[*]``: some finding has a safe fix."""
    from gradguard.fixes import applicable_fix

    counts: dict[str, list[int]] = {}
    for f in findings:
        c = counts.setdefault(f.code, [0, 0])
        c[0] += 1
        c[1] += applicable_fix(f) is not None
    rows = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))
    if as_json:
        return json.dumps([{"code": code, "name": rule_name(code), "count": n, "fixable": fx > 0}
                           for code, (n, fx) in rows], indent=2)
    width = max((len(str(n)) for _, (n, _) in rows), default=1)
    return "\n".join(f"{n:>{width}}  {code}  {'[*]' if fx else '   '} {rule_name(code)}" for code, (n, fx) in rows)


def as_json(findings: Sequence[Finding]) -> str:
    return json.dumps([f.to_json() for f in findings], indent=2, ensure_ascii=False)


def github(findings: Sequence[Finding]) -> str:
    def esc(s: str) -> str:
        return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    lines = []
    for f in findings:
        level = "error" if f.severity == "error" else "warning" if f.severity == "warning" else "notice"
        cell = f"cell {f.cell}: " if f.cell is not None else ""
        lines.append(
            f"::{level} title=gradguard ({f.code}),file={display_path(f.path)},line={f.line},col={f.column},"
            f"endLine={f.end_line},endColumn={f.end_column}::{esc(cell + f.code + ' ' + f.message)}"
        )
    return "\n".join(lines)


def sarif(findings: Sequence[Finding]) -> str:
    from gradguard.rules import ALL_RULES

    used = sorted({f.code for f in findings})
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    by_code = {r.code: r for r in ALL_RULES}
    for code in used:
        r = by_code.get(code)
        index[code] = len(rules)
        from gradguard.rules.meta import META

        page = r.markdown() if r else META[code].markdown() if code in META else ""
        entry: dict[str, Any] = {
            "id": code,
            "name": rule_name(code),
            "shortDescription": {"text": r.summary if r else META[code].summary if code in META else code},
            "help": {"text": page, "markdown": page},
        }
        if os.environ.get("GRADGUARD_DOCS_URL"):
            from gradguard.rules.docs import page_uri

            entry["helpUri"] = page_uri(code)
        rules.append(entry)
    results = []
    for f in findings:
        level = {"error": "error", "warning": "warning"}.get(f.severity, "note")
        extra: dict[str, Any] = {"properties": {"cell": f.cell}} if f.cell is not None else {}
        results.append({**extra,
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": level,
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": display_path(f.path).replace(os.sep, "/")},
                "region": {"startLine": f.line, "startColumn": f.column,
                           "endLine": f.end_line, "endColumn": f.end_column},
            }}],
            "relatedLocations": [{
                "id": i,
                "message": {"text": r.message},
                "physicalLocation": {"artifactLocation": {"uri": display_path(r.path).replace(os.sep, "/")},
                                     "region": {"startLine": r.line, "startColumn": r.column}},
            } for i, r in enumerate(f.related)],
        })
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "gradguard", "version": __version__, "rules": rules}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


FORMATS = {"text": text, "json": as_json, "sarif": sarif, "github": github}
