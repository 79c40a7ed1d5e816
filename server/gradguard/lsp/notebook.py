"""Notebook cells -> one program (in cell order) and the line map back to each cell (:mod:`gradguard.notebook`
does the work; this adds the LSP segments)."""

from __future__ import annotations

from collections.abc import Sequence

from gradguard.lsp.convert import Segment
from gradguard.notebook import KEEP_CELL_MAGICS
from gradguard.notebook import assemble as _assemble

__all__ = ["KEEP_CELL_MAGICS", "assemble"]


def assemble(cells: Sequence[tuple[str, str]], numbers: Sequence[int] = ()) -> tuple[str, list[Segment]]:
    """``cells``: (uri, text) of the code cells in order; ``numbers``: their cell numbers in the notebook (1-based,
    every cell counted). Returns (program text, segments)."""
    text, segs = _assemble(cells)
    nums = list(numbers) or list(range(1, len(segs) + 1))
    return text, [Segment(uri, first, count, n) for (uri, first, count), n in zip(segs, nums)]
