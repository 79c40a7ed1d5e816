"""A module as one analysis sees it: its lines (for positions and source text) and its top-level names.

The checked file is the root module: its module-level code runs, statement by statement. Every other module the
analysis reaches through an import is loaded lazily, name by name: looking up ``Block`` in ``models/blocks.py``
evaluates only the statements that bind ``Block`` there (a ``class``, a ``def``, an import, an assignment).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gradguard.analysis.values import Val
    from gradguard.project.resolver import Module
    from gradguard.project.sources import SourceFile


class ModuleCtx:
    __slots__ = ("env", "evaluating", "lines", "lines_b", "module", "name", "path", "stars")

    def __init__(self, path: str, lines: list[str], module: Module | None = None, name: str = ""):
        self.path = path  # "" for the checked file, else the module's absolute path
        self.lines = lines
        self.lines_b: list[bytes] | None = None
        src = module.source if module is not None else None
        if not (src.is_ascii if src is not None else all(ln.isascii() for ln in lines)):
            self.lines_b = [ln.encode("utf-8") for ln in lines]
        self.module = module  # None for the checked file
        self.name = name or (module.name if module is not None else "")
        self.env: dict[str, Val] = {}
        self.evaluating: set[str] = set()
        self.stars: list[Any] = []  # modules whose public names `from m import *` brought in

    @property
    def source(self) -> SourceFile | None:
        return self.module.source if self.module is not None else None

    @property
    def is_root(self) -> bool:
        return self.module is None

    def text(self, node: ast.AST | None) -> str:
        """The source text of ``node`` (a node of this module's tree)."""
        if node is None or not hasattr(node, "lineno"):
            return ""
        ln, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
        eln, ecol = node.end_lineno or ln, node.end_col_offset or 0  # type: ignore[attr-defined]
        lines = self.lines
        if ln > len(lines) or eln > len(lines):
            return ""
        if self.lines_b is None:
            if ln == eln:
                return lines[ln - 1][col:ecol]
            return "\n".join([lines[ln - 1][col:], *lines[ln:eln - 1], lines[eln - 1][:ecol]])
        lb = self.lines_b
        if ln == eln:
            return lb[ln - 1][col:ecol].decode("utf-8", "replace")
        return b"\n".join([lb[ln - 1][col:], *lb[ln:eln - 1], lb[eln - 1][:ecol]]).decode("utf-8", "replace")
