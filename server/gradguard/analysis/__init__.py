"""The abstract interpreter: source tree -> facts about tensors -> hazards."""

from __future__ import annotations

import ast

from gradguard.analysis.hazards import Hazard


def analyze(tree: ast.Module, source: str, path: str) -> list[Hazard]:
    from gradguard.analysis.interp import Analyzer

    return Analyzer(tree, source, path).run()
