"""Re-analysing a file after an edit: only the functions whose analysis read what the edit changed.

A file's analysis is its module body plus one run per function and method (``Analyzer.standalone``). Each of
those runs reads some of the file's top-level statements (their *chunks*): the ones whose statements it executed,
the defs and classes whose names it looked up, and, through the analysis' caches (call summaries, default
instances, evaluated defaults), whatever the run that filled the cache read. The editor keeps a :class:`FileMemo`
per open file: the chunks' texts, and per function run the hazards it reported and the chunks it read.

On the next check of that file, a function run is replayed from the memo, its hazards moved to the lines its
chunk now has, when none of the chunks it read changed. Everything else runs:

- the module body (it binds the names every run reads);
- every run that read an edited chunk;
- all of them when a top-level statement that is not a def or class changed (an import, a global, a script),
  when defs or classes were added, removed or renamed, when what runs under ``no_grad`` moved in an unchanged
  def (a caller was edited), when the file's kind changed (it stopped or started building graphs), or when any
  other file of the project changed since the memo was taken.

Results are the same as a full run's (``tests/analysis/test_incremental.py`` compares them over edits of real
model files); the CLI never uses a memo, each of its files is analysed once.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field, replace
from typing import Any

from gradguard.analysis.hazards import Hazard, SaveRecord, Site

EntryKey = tuple[int, int, str]  # (chunk index, line within the chunk, function name)


@dataclass(frozen=True)
class Chunk:
    """One top-level statement: its lines (decorators included) and its text, which identifies it across edits."""

    start: int
    end: int
    text: str
    kind: str  # "def" | "class" | "other"
    name: str  # the def's or class's name ("" for other statements)


def chunks_of(tree: ast.Module, lines: list[str]) -> list[Chunk]:
    out = []
    for s in tree.body:
        start = min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))])
        end = s.end_lineno or s.lineno
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind, name = "def", s.name
        elif isinstance(s, ast.ClassDef):
            kind, name = "class", s.name
        else:
            kind, name = "other", ""
        out.append(Chunk(start, end, "\n".join(lines[start - 1:end]), kind, name))
    return out


@dataclass
class Entry:
    """One function run of the last analysis: what it reported and which chunks it read."""

    hazards: tuple[Hazard, ...]
    reach: frozenset[int]


@dataclass
class FileMemo:
    chunks: list[Chunk]
    kind_key: Any  # facts about the whole file the runs depend on (see Analyzer.file_facts)
    ng_rel: dict[int, frozenset[int]]  # chunk -> lines (relative to its start) that only run under no_grad
    generation: int  # the project's generation when it was taken
    entries: dict[EntryKey, Entry] = field(default_factory=dict)
    deps: tuple[str, ...] = ()
    context_deps: tuple[str, ...] = ()


class Plan:
    """How the last memo maps onto the new text: which chunks are unchanged and where they moved."""

    def __init__(self, old: FileMemo, new: list[Chunk]):
        self.old = old
        self.new = new
        o, n = old.chunks, new
        pre = 0
        while pre < len(o) and pre < len(n) and o[pre].text == n[pre].text:
            pre += 1
        suf = 0
        while suf < len(o) - pre and suf < len(n) - pre and o[-1 - suf].text == n[-1 - suf].text:
            suf += 1
        self.new_to_old: dict[int, int] = {i: i for i in range(pre)}
        for k in range(1, suf + 1):
            self.new_to_old[len(n) - k] = len(o) - k
        self.old_to_new = {v: k for k, v in self.new_to_old.items()}
        changed_old = [o[i] for i in range(len(o)) if i not in self.old_to_new]
        changed_new = [n[i] for i in range(len(n)) if i not in self.new_to_old]
        # Only defs and classes changed, keeping their names: the module's names bind the same things.
        self.usable = all(c.kind != "other" for c in changed_old + changed_new) and \
            sorted((c.kind, c.name) for c in changed_old) == sorted((c.kind, c.name) for c in changed_new)
        self._starts = [c.start for c in o]

    def old_key(self, key: EntryKey) -> EntryKey | None:
        i = self.new_to_old.get(key[0])
        return None if i is None else (i, key[1], key[2])

    def reusable(self, key: EntryKey) -> Entry | None:
        ok = self.old_key(key)
        e = self.old.entries.get(ok) if ok is not None else None
        if e is None or not all(r in self.old_to_new for r in e.reach):
            return None
        return e

    def moved(self, e: Entry, file: str) -> tuple[tuple[Hazard, ...], frozenset[int]] | None:
        """The entry's hazards with their lines in the new text (None when a line falls outside its chunks)."""
        try:
            hs = tuple(_shift(h, self._line, file) for h in e.hazards)
        except _Outside:
            return None
        return hs, frozenset(self.old_to_new[r] for r in e.reach)

    def _line(self, line: int) -> int:
        i = bisect.bisect_right(self._starts, line) - 1
        if i < 0 or line > self.old.chunks[i].end or i not in self.old_to_new:
            raise _Outside
        return line + self.new[self.old_to_new[i]].start - self.old.chunks[i].start


class _Outside(Exception):
    pass


def _shift(v: Any, line: Any, file: str) -> Any:
    if isinstance(v, Site):
        if v.path and v.path != file:
            return v
        a = line(v.line)
        return replace(v, line=a, end_line=a + (v.end_line - v.line))
    if isinstance(v, SaveRecord):
        return replace(v, site=_shift(v.site, line, file), view=_shift(v.view, line, file))
    if isinstance(v, Hazard):
        return replace(v, site=_shift(v.site, line, file), stmt=_shift(v.stmt, line, file),
                       saves=_shift(v.saves, line, file), related=_shift(v.related, line, file),
                       extra=_shift(v.extra, line, file))
    if isinstance(v, tuple):
        if len(v) == 2 and isinstance(v[0], str) and v[0].endswith("_line") and isinstance(v[1], int):
            return v[0], line(v[1])  # ("backward_line", 42)
        return tuple(_shift(x, line, file) for x in v)
    if isinstance(v, list):
        return [_shift(x, line, file) for x in v]
    return v


def chunk_index(chunks: list[Chunk]) -> tuple[list[int], dict[str, list[int]]]:
    """(chunk starts for bisecting a line, def/class name -> chunks binding it)."""
    names: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        if c.name:
            names.setdefault(c.name, []).append(i)
    return [c.start for c in chunks], names


def reach_chunks(chunks: list[Chunk], starts: list[int], names: dict[str, list[int]], lines: set[int],
                 read: set[str]) -> frozenset[int]:
    out: set[int] = set()
    for ln in lines:
        i = bisect.bisect_right(starts, ln) - 1
        if i >= 0 and ln <= chunks[i].end:
            out.add(i)
    for nm in read:
        out.update(names.get(nm, ()))
    return frozenset(out)
