"""The abstract interpreter: source tree -> facts about tensors -> hazards."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradguard.analysis.hazards import Hazard

if TYPE_CHECKING:
    from gradguard.project import Project


class Analysis:
    """What one file's analysis found: hazards (in this file, ``site.path == ""``, or in other modules it reached,
    by absolute path) and the absolute paths of the other modules it read."""

    __slots__ = ("deps", "hazards", "truncated")

    def __init__(self, hazards: list[Hazard], deps: list[str], truncated: int | None = None):
        self.hazards = hazards
        self.deps = deps
        self.truncated = truncated  # the line where the analysis ran out of budget (None: it did not)


def analyze(tree: ast.Module, source: str, path: str, project: Project | None = None, file: str = "") -> list[Hazard]:
    """Hazards of one file, in that file only (the single-file view)."""
    return [h for h in analyze_file(tree, source, path, project, file).hazards if not h.site.path]


def analyze_file(tree: ast.Module, source: str, path: str, project: Project | None = None,
                 file: str = "", incremental: bool = False) -> Analysis:
    """``incremental`` (the editor, with a project and a real file): start from the project's memo of this file's
    last analysis, re-running only what the edit can change, and leave a memo for the next one."""
    from gradguard.analysis.interp import Analyzer

    a = Analyzer(tree, source, path, project=project, file=file)
    record = incremental and project is not None and bool(file)
    generation = project.generation if project is not None else 0
    if record:
        assert project is not None
        a.memo_in = project.memo(file)
    hazards = a.run(record=record)
    deps = sorted({ctx.path for ctx in a.loaded.values() if ctx.source is not None}
                  | {p for p in a.context_deps if p != a.file} | set(a.reused_deps)
                  | {p for p in a.shared_files if p != a.file})
    if record and a.memo_out is not None:
        assert project is not None
        if a.truncated is None:
            a.memo_out.deps = tuple(deps)
            project.keep_memo(file, a.memo_out, generation)
        else:
            project.keep_memo(file, None, generation)
    truncated = a.truncated
    a.dispose()
    return Analysis(hazards, deps, truncated)
