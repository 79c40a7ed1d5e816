"""The data model shared by the analyzer, the fixes, the CLI and the language server.

Positions: ``line`` is 1-based; ``column`` is 1-based and counts Unicode code points (characters) of the
line, like ruff and like the JSON contract of ``gradguard check --format json``. ``end_column`` is exclusive
(1-based column of the first character after the range). The language server converts to 0-based UTF-16 (or
the negotiated encoding) at its boundary.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

_NEWLINE = re.compile(r"\r\n|\r|\n")
_LINE_END = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def source_lines(text: str) -> list[str]:
    """The lines of Python source as the tokenizer and ``ast`` number them: split at CR LF, CR or LF only.

    ``str.splitlines`` also splits at form feeds, ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``,
    which are not line ends in Python source (a form feed is whitespace, the others may sit in strings and
    comments): with it, every line after one of them is numbered differently from the finding. Like
    ``splitlines()``: no terminators, and no empty last line after a final newline."""
    parts = _NEWLINE.split(text)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def source_lines_keepends(text: str) -> list[str]:
    """:func:`source_lines` with each line's terminator kept (``splitlines(keepends=True)`` for Python source)."""
    parts = _LINE_END.split(text)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, column) up to (end_line, end_column) with ``text``."""

    line: int
    column: int
    end_line: int
    end_column: int
    text: str
    cell: int | None = None  # a notebook's cell (1-based) the position is in; None in a .py file

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.cell is None:
            del d["cell"]
        return d


@dataclass(frozen=True)
class Fix:
    title: str
    safe: bool
    edits: tuple[Edit, ...]
    preferred: bool = False
    kind: str = ""  # stable identifier of the fix family, e.g. "out-of-place", "remove-inplace", "noqa"

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "safe": self.safe,
            "preferred": self.preferred,
            "kind": self.kind,
            "edits": [e.to_json() for e in self.edits],
        }


@dataclass(frozen=True)
class Related:
    path: str
    line: int
    column: int
    message: str
    end_line: int = 0
    end_column: int = 0
    cell: int | None = None  # in a notebook: the cell the line is in

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "line": self.line, "column": self.column, "message": self.message}
        if self.cell is not None:
            d["cell"] = self.cell
        return d


@dataclass(frozen=True)
class Mutation:
    """What the in-place operation looks like in the source: what fix builders need.

    kind: one of
      "method"        x.add_(y) / torch.relu_(x) (``name`` = method or function name, ``receiver`` = x text)
      "augassign"     x += y (``name`` = the operator, e.g. "+=")
      "setitem"       x[i] = v
      "out"           torch.op(..., out=x)
      "inplace_kwarg" F.relu(x, inplace=True) / nn.ReLU(inplace=True) (the span is the keyword or the call)
      "module_ctor"   nn.ReLU(True) positional inplace flag in a constructor
      "carry"         h = h_next carried across loop iterations (GG201)
      "step"          optimizer.step() between forward and a later backward (GG202)
    ``stmt`` is the span of the whole statement holding the mutation; ``node`` the span of the expression.
    """

    kind: str
    node: Span
    stmt: Span
    name: str = ""
    receiver: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Finding:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    message: str
    severity: str = "warning"
    related: list[Related] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    mutation: Mutation | None = None
    # Facts behind the finding, for hover/explanations: which op saved which tensor, etc.
    facts: dict[str, Any] = field(default_factory=dict)
    cell: int | None = None  # in a notebook (``.ipynb``): the cell (1-based) ``line`` counts in

    @property
    def span(self) -> Span:
        return Span(self.line, self.column, self.end_line, self.end_column)

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    def to_json(self) -> dict[str, Any]:
        d = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "related": [r.to_json() for r in self.related],
            "fixes": [f.to_json() for f in self.fixes],
        }
        if self.cell is not None:
            d["cell"] = self.cell
        return d


def finding_to_dict(f: Finding) -> dict[str, Any]:
    """Everything a finding holds (the JSON output plus the facts fixes and hovers use), for the result cache."""
    d = f.to_json()
    d["related"] = [asdict(r) for r in f.related]
    d["fixes"] = [asdict(x) for x in f.fixes]
    d["facts"] = f.facts
    d["mutation"] = asdict(f.mutation) if f.mutation is not None else None
    return d


def finding_from_dict(d: dict[str, Any]) -> Finding:
    """The inverse of :func:`finding_to_dict` (raises KeyError/TypeError/ValueError on a malformed entry)."""
    m = d.get("mutation")
    mutation = None
    if m is not None:
        mutation = Mutation(kind=str(m["kind"]), node=Span(**m["node"]), stmt=Span(**m["stmt"]),
                            name=str(m.get("name", "")), receiver=str(m.get("receiver", "")),
                            extra=dict(m.get("extra") or {}))
    return Finding(
        path=str(d["path"]), line=int(d["line"]), column=int(d["column"]), end_line=int(d["end_line"]),
        end_column=int(d["end_column"]), code=str(d["code"]), message=str(d["message"]),
        severity=str(d.get("severity", "warning")),
        related=[Related(**r) for r in d.get("related") or []],
        fixes=[Fix(str(x["title"]), bool(x["safe"]), tuple(Edit(**e) for e in x["edits"]), bool(x.get("preferred")),
                   str(x.get("kind", ""))) for x in d.get("fixes") or []],
        mutation=mutation, facts=dict(d.get("facts") or {}), cell=d.get("cell"),
    )
