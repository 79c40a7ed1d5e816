"""Notebook cells -> one program (in cell order) and the line map back to each cell."""

from __future__ import annotations

from collections.abc import Sequence

from gradguard.lsp.convert import Segment, split_lines

KEEP_CELL_MAGICS = ("%%time", "%%timeit", "%%capture")


def _blank_magics(lines: list[str]) -> list[str]:
    """IPython line magics and shell escapes become comments of the same length (columns stay put)."""
    out = []
    for ln in lines:
        s = ln.lstrip()
        if s.startswith(("%", "!")) or (s.endswith("?") and s[:-1].replace(".", "").isidentifier()):
            indent = len(ln) - len(s)
            out.append(ln[:indent] + "#" + s[1:])
        else:
            out.append(ln)
    return out


def assemble(cells: Sequence[tuple[str, str]]) -> tuple[str, list[Segment]]:
    """``cells``: (uri, text) of the code cells in order. Returns (program text, segments).

    Each cell contributes its lines followed by a line break; a cell with an unsupported cell magic
    (``%%bash`` ...) contributes comment lines only, so its line numbers still map.
    """
    parts: list[str] = []
    segments: list[Segment] = []
    line = 0
    for uri, text in cells:
        lines = split_lines(text)
        if lines and lines[-1] == "" and len(lines) > 1:
            lines = lines[:-1]  # a trailing newline does not make an extra line in the cell
        first = lines[0].strip() if lines else ""
        if first.startswith("%%") and not first.startswith(KEEP_CELL_MAGICS):
            lines = ["#" + ln[1:] if ln else ln for ln in lines]
        else:
            lines = _blank_magics(lines)
        segments.append(Segment(uri, line, len(lines)))
        parts.extend(lines)
        line += len(lines)
    return "\n".join(parts) + ("\n" if parts else ""), segments
