"""The findings the analyzer should report on the corpus error cases (manifest culprit lines), built by hand
(handmade.make): proves the fix builders on real code independently of the analyzer."""

from __future__ import annotations

from typing import Any

from handmade import make

# case id -> [(line, code, mutation kind, extra arguments for make)]
EXPECTED: dict[str, list[tuple[int, str, str, dict[str, Any]]]] = {
    "pos_002": [(21, "GG102", "module_entry", {})],
    "pos_005": [(30, "GG102", "module_call", {"ctor_line": 25})],
    "pos_008": [(13, "GG102", "module_entry", {})],
    "pos_012": [(48, "GG101", "augassign", {}), (49, "GG101", "augassign", {}), (50, "GG101", "augassign", {})],
    "pos_015": [(27, "GG101", "augassign", {}), (28, "GG101", "augassign", {})],
    "pos_018": [(6, "GG103", "setitem", {})],
    "pos_022": [(11, "GG101", "method", {})],
    "pos_026": [(11, "GG302", "method", {})],
    "pos_029": [(19, "GG302", "method", {})],
    "pos_032": [(24, "GG302", "augassign", {})],
    "pos_035": [(6, "GG301", "augassign", {})],
    "pos_040": [(8, "GG101", "method", {})],
    "pos_042": [(41, "GG103", "setitem", {"alias_line": 40})],
    "pos_044": [(44, "GG202", "step", {"backward_line": 51})],
    "pos_047": [(41, "GG202", "step", {"backward_line": 45})],
    "pos_052": [(30, "GG201", "carry", {})],
    "pos_055": [(15, "GG301", "method", {})],
    "pos_058": [(19, "GG101", "method", {})],
    "pos_060": [(22, "GG101", "augassign", {})],
    "pos_063": [(8, "GG101", "augassign", {})],
    "pos_065": [(22, "GG101", "augassign", {})],
    "pos_066": [(12, "GG104", "out", {})],
}


def handmade_finder(originals: dict[str, str]):
    """A finder that reports EXPECTED on each original text (and nothing once the text changed)."""
    from gradguard.fixes import attach_fixes

    def find(source: str, path: str) -> list:
        cid = next((k for k, v in originals.items() if v == path), None)
        if cid is None or cid not in EXPECTED or source != open(path, encoding="utf-8").read():
            return []
        fs = [make(source, line, code, kind, **dict(kw)) for line, code, kind, kw in EXPECTED[cid]]
        attach_fixes(fs, source)
        return fs

    return find
