"""The rules: one module each, with code, docs and runnable VALID/INVALID examples."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gradguard.analysis.hazards import Hazard
from gradguard.model import Finding
from gradguard.rules.base import LinesFor, Rule
from gradguard.rules.gg101 import InplaceOnSaved
from gradguard.rules.gg102 import InplaceActivationOnSaved
from gradguard.rules.gg103 import SetitemOnSaved
from gradguard.rules.gg104 import OutArgOnSaved
from gradguard.rules.gg105 import SavedTensorModifiedInBackward
from gradguard.rules.gg106 import InplaceOnSavedIndex
from gradguard.rules.gg201 import CarriedState
from gradguard.rules.gg202 import StepBetweenBackward
from gradguard.rules.gg301 import InplaceOnLeaf
from gradguard.rules.gg302 import InplaceOnSpecialView
from gradguard.rules.gg303 import InplaceOnInferenceTensor
from gradguard.rules.gg304 import ParameterUpdateOutsideNoGrad
from gradguard.rules.gg305 import InplaceOnExpanded

ALL_RULES: tuple[type[Rule], ...] = (
    InplaceOnSavedIndex, InplaceOnSaved, InplaceActivationOnSaved, SetitemOnSaved, OutArgOnSaved, SavedTensorModifiedInBackward,
    CarriedState, StepBetweenBackward, ParameterUpdateOutsideNoGrad, InplaceOnLeaf, InplaceOnSpecialView, InplaceOnInferenceTensor,
    InplaceOnExpanded,
)
BY_CODE = {r.code: r for r in ALL_RULES}


def rule_for(h: Hazard) -> type[Rule] | None:
    for r in ALL_RULES:
        if r.matches(h):
            return r
    return None


def findings_from_hazards(hazards: Iterable[Hazard], path: str, lines: Sequence[str],
                          lines_for: LinesFor | None = None) -> list[Finding]:
    out: list[Finding] = []
    seen: set[tuple[str, int, int]] = set()
    for h in hazards:
        r = rule_for(h)
        if r is None:
            continue
        key = (r.code, h.site.line, h.site.col)
        if key in seen:
            continue
        seen.add(key)
        out.append(r.finding(h, path, lines, lines_for))
    return out
