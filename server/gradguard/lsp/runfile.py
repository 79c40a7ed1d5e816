"""``gradguard.runFile`` presentation: the doctor's report as the editor's log shows it, and one diagnostic per line
when a runtime finding lands where a static one already is."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from lsprotocol import types as T

from gradguard.lsp.convert import Entry, plain


def _where(d: dict[str, Any]) -> str:
    """``/abs/path.py:LINE:COL``: editors' log views turn it into a link."""
    return f"{d.get('path', '?')}:{d.get('line', '?')}:{d.get('column', 1)}"


def _code_of(d: dict[str, Any]) -> str:
    for fr in d.get("frames") or []:
        if fr.get("path") == d.get("path") and fr.get("line") == d.get("line") and fr.get("code"):
            return str(fr["code"])
    return ""


def report_text(result: dict[str, Any], script: str, elapsed: float) -> str:
    """What the doctor found, in a few lines: the error, the line that saved the tensor and the line that modified
    it (each ``path:line:col``, then the code), the library frames between, and the fix."""
    name = os.path.basename(script)
    status = result.get("status")
    err = result.get("error") or {}
    took = f" ({elapsed:.1f} s)"
    if status == "clean":
        return f"{name} ran to the end without an in-place error{took}."
    if status != "error":
        kind = err.get("type") or "failed"
        if kind == "TorchNotInstalled":
            return f"{name}: {err.get('message', '')}"
        code = result.get("exit_code")
        detail = f": {err.get('message')}" if err.get("message") else ""
        return (f"{name} failed{took} ({kind}{detail}; exit code {code}), not with an autograd in-place error: "
                "nothing for the doctor to explain (the script's output is above).")
    lines = [f"{name} failed with an autograd in-place error{took}",
             f"  {err.get('type', 'RuntimeError')}: {str(err.get('message', '')).split('. Hint:')[0]}"]
    for s in result.get("saved_by") or []:
        code = _code_of(s)
        lines.append(f"  saved by    {s.get('op', '?'):<10} {_where(s)}" + (f"   {code}" if code else ""))
    for c in result.get("culprits") or []:
        code = _code_of(c)
        rule = f"  [{c['code']}]" if c.get("code") else ""
        lines.append(f"  changed by  {c.get('op', '?'):<10} {_where(c)}" + (f"   {code}" if code else "") + rule)
        for fr in (c.get("frames") or [])[1:]:
            lines.append(f"                inside {_where(fr)}   {fr.get('code', '')}")
        fix = c.get("fix") or next((str(d.get("message", "")).split("Fix: ", 1)[1] for d in result.get("diagnostics")
                                    or [] if d.get("line") == c.get("line") and "Fix: " in str(d.get("message"))), "")
        if fix:
            lines.append(f"  fix: {plain(str(fix))}")
    if not result.get("culprits"):
        lines.append("  the write that changed the saved tensor was not seen (a thread, a backward hook, or a compiled "
                     "graph); the saving op is above")
    for d in result.get("diagnostics") or []:
        for r in d.get("related") or []:
            if str(r.get("message", "")).startswith("backward"):
                lines.append(f"  backward()  {'failed':<10} {_where(r)}")
                break
        break
    return "\n".join(lines)


def merge(static: Sequence[Entry], run: Iterable[Entry]) -> list[T.Diagnostic]:
    """The static diagnostics and the run's, one per line: a runtime finding on a line that has a static finding
    (of the same rule, else of any) becomes part of it (message: confirmed by Run File; severity error; the run's
    related locations added) instead of a second squiggle worded differently."""
    out = [e.diagnostic for e in static]
    by_line: dict[tuple[str, int], int] = {}
    for i, e in enumerate(static):
        by_line.setdefault((str(e.diagnostic.code), e.diagnostic.range.start.line), i)
        by_line.setdefault(("", e.diagnostic.range.start.line), i)  # any rule: still the write on that line
    merged: set[int] = set()
    for e in run:
        d = e.diagnostic
        line = d.range.start.line
        static_code = str((e.finding.facts or {}).get("static_code") or d.code)
        i = next((by_line[k] for k in ((static_code, line), (str(d.code), line), ("", line)) if k in by_line), -1)
        if i in merged:
            continue  # the same line again (a loop): it is confirmed already
        if i < 0:
            out.append(d)
            continue
        base = out[i]
        related = list(base.related_information or [])
        seen = {(r.location.uri, r.location.range.start.line) for r in related}
        for r in d.related_information or []:
            if (r.location.uri, r.location.range.start.line) not in seen:
                related.append(r)
        merged.add(i)
        out[i] = T.Diagnostic(
            range=base.range, message=f"{base.message}. Run File confirmed it: backward() failed on this write",
            severity=T.DiagnosticSeverity.Error, code=base.code, code_description=base.code_description,
            source=base.source, related_information=related or None, tags=base.tags, data=base.data)
    return out
