"""Jupyter notebooks: the Python code cells, analysed as one program in cell order, and the way back from a line
of that program to a cell. Shared by ``gradguard check`` (``.ipynb`` files) and the language server (notebook
documents); no LSP import here.

Cells are numbered as the notebook shows them: 1-based, counting every cell (markdown cells too), the way ruff
prints ``notebook.ipynb:cell 3:2:5``.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gradguard.model import Edit, Finding, Fix

KEEP_CELL_MAGICS = ("%%time", "%%timeit", "%%capture")
_LINES = re.compile(r"\r\n|\r|\n")


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


def assemble(cells: Sequence[tuple[Any, str]]) -> tuple[str, list[tuple[Any, int, int]]]:
    """``cells``: (key, text) of the code cells in order. Returns (program text, [(key, first line (0-based),
    line count)]).

    Each cell contributes its lines followed by a line break; a cell with an unsupported cell magic
    (``%%bash`` ...) contributes comment lines only, so its line numbers still map.
    """
    parts: list[str] = []
    segments: list[tuple[Any, int, int]] = []
    line = 0
    for key, text in cells:
        lines = _LINES.split(text)
        if lines and lines[-1] == "" and len(lines) > 1:
            lines = lines[:-1]  # a trailing newline does not make an extra line in the cell
        first = lines[0].strip() if lines else ""
        if first.startswith("%%") and not first.startswith(KEEP_CELL_MAGICS):
            lines = ["#" + ln[1:] if ln else ln for ln in lines]
        else:
            lines = _blank_magics(lines)
        segments.append((key, line, len(lines)))
        parts.extend(lines)
        line += len(lines)
    return "\n".join(parts) + ("\n" if parts else ""), segments


class NotebookError(ValueError):
    """The file is not a notebook we can read (not JSON, not nbformat 4)."""


@dataclass
class Notebook:
    path: str
    cells: list[tuple[int, str]]  # (cell number, source) of the Python code cells
    text: str  # the program
    starts: list[int]  # 1-based first program line of each code cell
    counts: list[int]

    def locate(self, line: int) -> tuple[int, int]:
        """Program line (1-based) -> (cell number, line in that cell, 1-based)."""
        i = max(bisect.bisect_right(self.starts, line) - 1, 0)
        if not self.cells:
            return 1, line
        local = line - self.starts[i] + 1
        return self.cells[i][0], max(1, min(local, max(self.counts[i], 1)))


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(str(s) for s in src)
    return str(src)


def is_python(nb: dict[str, Any]) -> bool:
    meta = nb.get("metadata") or {}
    lang = ((meta.get("language_info") or {}).get("name") or (meta.get("kernelspec") or {}).get("language")
            or "python")
    return str(lang).lower() in ("python", "python3", "ipython", "ipython3")


def read(path: str, data: bytes | None = None) -> Notebook | None:
    """The notebook's Python program; None when it is not a Python notebook. Raises NotebookError/OSError."""
    if data is None:
        with open(path, "rb") as fh:
            data = fh.read()
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as e:
        raise NotebookError(f"not a Jupyter notebook (invalid JSON: {e})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError("not a Jupyter notebook (no \"cells\" list; nbformat 4 is supported)")
    if not is_python(nb):
        return None
    cells = [(i, _source(c)) for i, c in enumerate(nb["cells"], 1)
             if isinstance(c, dict) and c.get("cell_type") == "code"]
    text, segments = assemble(cells)
    return Notebook(path, cells, text, [first + 1 for _, first, _ in segments], [n for _, _, n in segments])


_LINE_REF = re.compile(r"\b(lines?) (\d+)(?:-(\d+))?\b")


def relabel(text: str, locate: Callable[[int], tuple[Any, int]], own: Any, name: Callable[[Any], str]) -> str:
    """Rewrite "line 14" / "lines 3-7" (lines of the combined program) as the notebook reads them: "line 2" in the
    cell ``own``, "cell 3, line 2" in another (``name(cell)`` says how a cell is called)."""

    def sub(m: re.Match[str]) -> str:
        first = int(m.group(2))
        cell, local = locate(first)
        where = "" if cell == own else f"{name(cell)}, "
        if m.group(3) is None:
            return f"{where}line {local}"
        cell2, local2 = locate(int(m.group(3)))
        if cell2 != cell:
            return f"{where}line {local} to {name(cell2)}, line {local2}"
        return f"{where}lines {local}-{local2}"

    return _LINE_REF.sub(sub, text)


def to_cells(f: Finding, nb: Notebook) -> Finding:
    """A finding on the combined program -> the same finding in cell coordinates (``cell`` set; messages, related
    locations and fix edits in the cell they fall in; a fix whose edit spans two cells is dropped)."""
    cell, line = nb.locate(f.line)
    cell_end, end_line = nb.locate(f.end_line)
    if cell_end != cell:
        end_line, end_col = line, f.column + 1
    else:
        end_col = f.end_column

    def name(c: Any) -> str:
        return f"cell {c}"

    def text(s: str) -> str:
        return relabel(s, nb.locate, cell, name)

    related = []
    for r in f.related:
        rc, rl = nb.locate(r.line) if (not r.path or r.path == f.path) else (None, r.line)
        related.append(replace(r, line=rl, end_line=nb.locate(r.end_line)[1] if r.end_line and rc else r.end_line,
                               message=text(r.message), cell=rc))
    fixes = []
    for x in f.fixes:
        edits: list[Edit] = []
        for e in x.edits:
            c1, l1 = nb.locate(e.line)
            c2, l2 = nb.locate(e.end_line)
            if c1 != c2 and not (e.end_column == 1 and nb.locate(e.end_line - 1)[0] == c1):
                edits = []
                break
            if c1 != c2:  # ends just past the last line of the cell
                l2 = nb.locate(e.end_line - 1)[1] + 1
            edits.append(Edit(l1, e.column, l2, e.end_column, e.text, cell=c1))
        if edits:
            fixes.append(Fix(text(x.title), x.safe, tuple(edits), x.preferred, x.kind))
    return replace(f, line=line, end_line=end_line, end_column=end_col, message=text(f.message), related=related,
                   fixes=fixes, cell=cell)


def gg000(path: str, message: str) -> Finding:
    return Finding(path=path, line=1, column=1, end_line=1, end_column=2, code="GG000", severity="error",
                   message=message)




def check_notebook(path: str, config: Any = None, fixes: bool = True) -> list[Finding]:
    """``gradguard check`` of one ``.ipynb``: its Python code cells as one program, findings in cell coordinates."""
    from gradguard.api import MAX_BYTES, check_text

    try:
        import os

        if os.path.getsize(path) > MAX_BYTES:
            return [gg000(path, f"skipped: file is larger than {MAX_BYTES // 1_000_000} MB")]
        nb = read(path)
    except OSError as e:
        return [gg000(path, f"could not read: {e.strerror or e}")]
    except NotebookError as e:
        return [gg000(path, str(e))]
    if nb is None:
        return []  # not a Python notebook
    result = check_text(nb.text, path, config, fixes=fixes)
    return sorted((to_cells(f, nb) for f in result.findings), key=Finding.sort_key)
