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


def text(findings: Sequence[Finding], fixable: int | None = None) -> str:
    """``fixable``: how many findings ``--fix`` really removes (the CLI verifies it by re-checking); None: count
    the findings that have a safe preferred fix other than a ``# noqa``, unverified."""
    out = []
    for f in findings:
        out.append(f"{display_path(f.path)}:{f.line}:{f.column}: {f.code} {f.message}")
    if findings:
        if fixable is None:
            from gradguard.fixes import applicable_fix

            fixable = sum(1 for f in findings if applicable_fix(f) is not None)
        nfix = fixable
        tail = f" ({nfix} fixable with `gradguard check --fix`)" if nfix else ""
        out.append(f"Found {len(findings)} problem{'s' if len(findings) != 1 else ''}{tail}.")
    return "\n".join(out)


def as_json(findings: Sequence[Finding]) -> str:
    return json.dumps([f.to_json() for f in findings], indent=2, ensure_ascii=False)


def github(findings: Sequence[Finding]) -> str:
    def esc(s: str) -> str:
        return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    lines = []
    for f in findings:
        level = "error" if f.severity == "error" else "warning" if f.severity == "warning" else "notice"
        lines.append(
            f"::{level} title=gradguard ({f.code}),file={display_path(f.path)},line={f.line},col={f.column},"
            f"endLine={f.end_line},endColumn={f.end_column}::{esc(f.code + ' ' + f.message)}"
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
        rules.append({
            "id": code,
            "name": r.name if r else code,
            "shortDescription": {"text": r.summary if r else "could not analyze"},
            "helpUri": r.docs_url() if r else "",
        })
    results = []
    for f in findings:
        level = {"error": "error", "warning": "warning"}.get(f.severity, "note")
        results.append({
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
            "tool": {"driver": {"name": "gradguard", "version": __version__,
                                "informationUri": "https://github.com/gradguard/gradguard", "rules": rules}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


FORMATS = {"text": text, "json": as_json, "sarif": sarif, "github": github}
