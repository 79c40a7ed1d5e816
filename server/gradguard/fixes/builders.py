"""Fix builders: one finding (with its ``Mutation``) in, ranked fixes out.

Only the statement(s) a fix touches are parsed: with ``ast`` to locate tokens (minimal edits that keep
comments and formatting) and with ``libcst`` where arguments are removed from a call (``out=``,
``inplace=True``), so commas and comments inside the call survive. Every fix is checked to leave the touched
statements parseable. ``safe`` means the fixed code computes the same forward values as the intended code;
see docs/fixes.md for what each family promises.

Each family of fixes lives in its own module (``methods``, ``assignments``, ``arguments``, ``loops``,
``contracts``), on top of ``context`` (the text a fix edits) and ``shared`` (pieces several families use); this
module picks the builder for a finding and ranks what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from gradguard.fixes.arguments import _inplace_flag, _out
from gradguard.fixes.assignments import _augassign, _setitem
from gradguard.fixes.context import Ctx
from gradguard.fixes.contracts import (
    _am_outside,
    _dirty_drop,
    _dirty_returned,
    _inference_saved,
    _inference_stats,
    _overlap,
    _overlap_read,
)
from gradguard.fixes.loops import _carry, _step
from gradguard.fixes.methods import _apply_view_arg, _foreach, _function, _method, _stale_views
from gradguard.fixes.shared import _clone_at_use, _escape_hatch
from gradguard.model import Edit, Finding, Fix

_KIND_BUILDERS: dict[str, Callable[[Ctx], list[Fix]]] = {
    "inference_stats": _inference_stats,
    "overlap": _overlap,
    "overlap_read": _overlap_read,
    "dirty_not_returned": _dirty_returned,
    "dirty_not_input": _dirty_drop,
    "inference_saved": _inference_saved,
    "am_outside": _am_outside,
    "view_stale": _stale_views,
}


_BUILDERS: dict[str, Callable[[Ctx], list[Fix]]] = {
    "foreach": _foreach,
    "apply": _apply_view_arg,
    "method": _method,
    "function": _function,
    "augassign": _augassign,
    "setitem": _setitem,
    "out": _out,
    "inplace_kwarg": _inplace_flag,
    "module_entry": _inplace_flag,
    "module_call": _inplace_flag,
    "module_ctor": _inplace_flag,
    "carry": _carry,
    "step": _step,
}

_NEVER_DETACH = ("GG101", "GG102", "GG103", "GG104", "GG105", "GG106")
_AS_SAVED = ("GG106",)
_NO_ORIGINAL_VALUES = ("out_rg", "neg_slope")


def build_fixes(finding: Finding, source: str, lines: Sequence[str]) -> list[Fix]:
    """The fixes for one finding, best first; exactly one (the first) is preferred. Never raises."""
    m = finding.mutation
    if m is None:
        return []
    by_kind = _KIND_BUILDERS.get(str(finding.facts.get("kind")))
    builder = by_kind or _BUILDERS.get(m.kind)
    if builder is None:
        return []
    # an index tensor saved by indexing is fixed as any saved tensor is
    if finding.code in _AS_SAVED:
        finding_as = replace(finding, code="GG103" if m.kind == "setitem" else "GG101")
    else:
        finding_as = finding
    ctx = Ctx(finding_as, source, lines)
    try:
        fixes = builder(ctx)
        if finding.code in _NEVER_DETACH and by_kind is None:
            fixes += _clone_at_use(ctx)
            if not any(f.kind in ("out-of-place", "remove-inplace", "clone-at-use") for f in fixes):
                fixes += _escape_hatch(ctx)
        fixes = [f for f in fixes if f.edits and ctx.parses_after(f)]
        # a safe fix (same forward values) beats an unsafe one; otherwise keep the builder's order
        fixes.sort(key=lambda f: not f.safe)
    except Exception:  # a builder bug must never break the diagnostics: no fix rather than no finding
        return []
    if finding.code in _NEVER_DETACH:
        fixes = [f for f in fixes if f.kind != "detach"]
    if finding.facts.get("kind") in _NO_ORIGINAL_VALUES:
        # the original never computes its values (out= with grad raises at the call; leaky_relu_ with a negative
        # slope in backward, even under allow_mutation): "same values as the original" cannot be claimed
        fixes = [Fix(f.title, False, f.edits, f.preferred, f.kind) for f in fixes]
    out: list[Fix] = []
    seen: set[tuple[Edit, ...]] = set()
    for f in fixes:
        if f.edits in seen:
            continue
        seen.add(f.edits)
        out.append(Fix(f.title, f.safe, f.edits, not out, f.kind))
    return out
