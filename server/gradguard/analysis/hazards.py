"""What the abstract interpreter reports: hazards, with the facts that explain them.

Positions here are AST positions: 1-based lines and 0-based UTF-8 byte columns. Rules convert them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Site:
    """A source range. ``path`` is "" for the file being checked, else the absolute path of another module."""

    line: int
    col: int
    end_line: int
    end_col: int
    path: str = ""

    @staticmethod
    def of(node: Any, path: str = "") -> Site:
        return Site(node.lineno, node.col_offset, getattr(node, "end_lineno", None) or node.lineno,
                    getattr(node, "end_col_offset", None) or node.col_offset + 1, path)


@dataclass(frozen=True)
class SaveRecord:
    """An op saved a tensor for backward: ``op`` (display name) saved ``what`` at ``site``."""

    op: str
    what: str  # "its output", "its input", "argument `other`", "weight"
    site: Site
    op_name: str = ""  # knowledge entry name, e.g. "torch.nn.functional.relu"
    view: Site | None = None  # the tensor saved was a view of the written one, made here
    arg: str = ""  # the op's argument that was saved ("index", "indices", "self"), where known


@dataclass(frozen=True)
class Hazard:
    kind: str  # "saved" | "leaf" | "view_multi" | "view_nograd" | "view_fn" | "dirty_view" | "inference"
    #            | "pack_hook" | "neg_slope" | "out_rg" | "carry" | "step"
    form: str  # "method" | "function" | "augassign" | "setitem" | "out" | "inplace_kwarg" | "module_call"
    #            | "module_entry" | "foreach" | "apply" | "carry" | "step"
    site: Site  # where the diagnostic goes
    stmt: Site  # the statement holding it
    op: str  # the mutating op as users read it: "add_", "+=", "dropout(inplace=True)", "optimizer.step()"
    target: str  # source text of the mutated expression (or carried name)
    saves: tuple[SaveRecord, ...] = ()
    related: tuple[tuple[Site, str], ...] = ()
    extra: tuple[tuple[str, Any], ...] = field(default=())

    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.form, self.site.path, self.site.line, self.site.col)

    def anchored(self, file: str) -> Hazard:
        """This hazard with the checked file's sites (path "") given ``file`` as their path: for a hazard that is
        reported in another module, whose messages must name the file a line is in."""
        def fix(s: Any) -> Any:
            if isinstance(s, Site) and not s.path:
                return replace(s, path=file)
            return s

        saves = tuple(replace(r, site=fix(r.site), view=fix(r.view)) for r in self.saves)
        related = tuple((fix(s), m) for s, m in self.related)
        extra = tuple((k, fix(v)) for k, v in self.extra)
        return replace(self, stmt=fix(self.stmt), saves=saves, related=related, extra=extra)

    def get(self, k: str, default: Any = None) -> Any:
        for kk, v in self.extra:
            if kk == k:
                return v
        return default
