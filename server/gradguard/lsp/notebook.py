"""Notebook cells -> one program (in cell order) and the line map back to each cell (:mod:`gradguard.notebook`
does the work; this adds the LSP segments)."""

from __future__ import annotations

from collections.abc import Sequence

from gradguard.lsp.convert import Segment
from gradguard.notebook import KEEP_CELL_MAGICS
from gradguard.notebook import assemble as _assemble

__all__ = ["KEEP_CELL_MAGICS", "assemble"]


def assemble(cells: Sequence[tuple[str, str]]) -> tuple[str, list[Segment]]:
    """``cells``: (uri, text) of the code cells in order. Returns (program text, segments)."""
    text, segs = _assemble(cells)
    return text, [Segment(uri, first, count) for uri, first, count in segs]
