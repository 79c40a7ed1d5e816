"""The text a fix edits: the finding's statement, its tokens and spans, and checks that an edit still parses."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gradguard.fixes.scope import is_private_tensor
from gradguard.model import Edit, Finding, Fix, Mutation, Span, source_lines

ESCAPE_HATCH = "torch.autograd.graph.allow_mutation_on_saved_tensors()"

# In-place methods and their out-of-place forms (used for the other links of a chain like
# ``x.mul_(s).add_(m)``; the flagged op's own out-of-place name comes from the analyzer).
OUT_OF_PLACE = {n + "_": n for n in """
abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr asin asinh atan atan2 atanh baddbmm
bitwise_and bitwise_not bitwise_or bitwise_xor ceil clamp clamp_max clamp_min clip copysign cos cosh cumprod
cumsum deg2rad detach digamma div divide erf erfc erfinv exp exp2 expm1 fix float_power floor floor_divide fmod frac
hypot i0 index_add index_copy index_fill index_put lerp lgamma log log10 log1p log2 logical_and logical_not
logical_or logical_xor logit masked_fill masked_scatter mul multiply mvlgamma nan_to_num neg negative nextafter
pow rad2deg reciprocal relu remainder renorm round rsqrt scatter scatter_add scatter_reduce sgn sigmoid sign
sin sinc sinh sqrt square squeeze sub subtract t tan tanh transpose tril triu true_divide trunc unsqueeze
where xlogy hardtanh leaky_relu elu selu celu rrelu silu mish threshold hardsigmoid hardswish
""".split()}

_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.List, ast.Tuple, ast.Dict,
          ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp, ast.JoinedStr)


def _sp(v: Any) -> Span | None:
    """A span from the analyzer's extra dict ({line, column, end_line, end_column}) or a Span."""
    if v is None:
        return None
    if isinstance(v, Span):
        return v
    if isinstance(v, dict):
        try:
            return Span(int(v["line"]), int(v["column"]), int(v["end_line"]), int(v["end_column"]))
        except (KeyError, TypeError, ValueError):
            return None
    if all(hasattr(v, k) for k in ("line", "column", "end_line", "end_column")):
        return Span(v.line, v.column, v.end_line, v.end_column)
    return None


def _char_col(text: str, byte_col: int) -> int:
    return byte_col if text.isascii() else len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _replace(sp: Span, text: str) -> Edit:
    return Edit(sp.line, sp.column, sp.end_line, sp.end_column, text)


def _insert(line: int, col: int, text: str) -> Edit:
    return Edit(line, col, line, col, text)


def _paren(text: str, node: ast.AST | None) -> str:
    return text if isinstance(node, _ATOMS) else f"({text})"


def _short(text: str, limit: int = 48) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


@dataclass
class Stmt:
    """The statement holding the mutation: its text and ast, and positions mapped back to the file."""

    span: Span
    text: str
    tree: ast.stmt
    lines: Sequence[str]

    def pos(self, lineno: int, byte_col: int) -> tuple[int, int]:
        line = self.span.line + lineno - 1
        if lineno == 1:
            first = self.lines[line - 1][self.span.column - 1:]
            return line, self.span.column + _char_col(first, byte_col)
        return line, _char_col(self.lines[line - 1], byte_col) + 1

    def span_of(self, node: ast.AST) -> Span:
        a = self.pos(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        b = self.pos(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return Span(a[0], a[1], b[0], b[1])

    def source_of(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def find(self, sp: Span | None, kind: type = ast.AST) -> ast.AST | None:
        if sp is None:
            return None
        for n in ast.walk(self.tree):
            if isinstance(n, kind) and hasattr(n, "lineno") and self.span_of(n) == sp:
                return n
        return None


class Ctx:
    def __init__(self, finding: Finding, source: str, lines: Sequence[str]) -> None:
        self.f = finding
        self.m: Mutation = finding.mutation  # type: ignore[assignment]
        self.ex: dict[str, Any] = dict(self.m.extra or {})
        self.source = source
        self.lines = lines
        self.nl = "\r\n" if "\r\n" in source[:10000] else "\n"
        self._stmt: Stmt | None = None

    # -- text --------------------------------------------------------------------------------------------
    def text(self, sp: Span) -> str:
        if sp.line == sp.end_line:
            return self.lines[sp.line - 1][sp.column - 1:sp.end_column - 1]
        parts = [self.lines[sp.line - 1][sp.column - 1:]]
        parts += self.lines[sp.line:sp.end_line - 1]
        parts.append(self.lines[sp.end_line - 1][:sp.end_column - 1])
        return "\n".join(parts)

    def enclosing(self, line: int) -> Iterator[tuple[int, str]]:
        """The lines that open the blocks around ``line``, innermost first (by indentation): (line, stripped text)."""
        ind = len(self.indent(line))
        for j in range(line - 1, 0, -1):
            t = self.lines[j - 1]
            s = t.strip()
            if not s or s.startswith("#"):
                continue
            ti = len(t) - len(t.lstrip())
            if ti < ind:
                yield j, s
                ind = ti

    def indent(self, line: int) -> str:
        t = self.lines[line - 1]
        return t[: len(t) - len(t.lstrip())]

    def starts_line(self, sp: Span) -> bool:
        return not self.lines[sp.line - 1][: sp.column - 1].strip()

    def ends_line(self, sp: Span) -> bool:
        rest = self.lines[sp.end_line - 1][sp.end_column - 1:].strip()
        return not rest or rest.startswith("#")

    def own_lines(self, sp: Span) -> bool:
        return self.starts_line(sp) and self.ends_line(sp)

    def indent_unit(self, line: int) -> str:
        return "\t" if "\t" in self.indent(line) else "    "

    # -- the statement -----------------------------------------------------------------------------------
    def stmt(self) -> Stmt | None:
        if self._stmt is None:
            sp = self.m.stmt
            if not (1 <= sp.line <= sp.end_line <= len(self.lines)):
                return None
            text = self.text(sp)
            try:
                mod = ast.parse(text)
            except (SyntaxError, ValueError):
                return None
            if len(mod.body) != 1:
                return None
            self._stmt = Stmt(sp, text, mod.body[0], self.lines)
        return self._stmt

    def private(self, name: str) -> bool:
        return is_private_tensor(self.source, self.lines, self.m.stmt.line, name)

    # -- validation --------------------------------------------------------------------------------------
    def parses_after(self, fix: Fix) -> bool:
        """The lines the fix touches parse after the edits.

        Each group of adjacent edits is checked on the smallest run of whole statements holding it (from an
        index of the module's statements built once per file), so the cost does not grow with the distance
        between the edits and the finding's statement, nor with the size of the file. When that cannot decide
        (comment lines only, a region that does not dedent), the older check: the lines touched and the
        statement, a region that grows until the original parses, and as a last resort the whole file."""
        from gradguard.fixes import apply_edits

        if any(_indent_width(self.lines[e.line - 1]) >= DEEP_INDENT or _max_indent(e.text) >= DEEP_INDENT
               for e in fix.edits if 1 <= e.line <= len(self.lines)):
            # Near Python's limit of 100 indentation levels a region parsed on its own (dedented) cannot tell
            # whether one more level (the escape hatch's `with`) still fits: only the whole file can.
            return _parses_module(apply_edits(self.source, fix.edits))
        verdict = self._parses_by_statements(fix)
        if verdict is not None:
            return verdict
        return self._parses_by_growing(fix)

    def _parses_by_statements(self, fix: Fix) -> bool | None:
        from gradguard.fixes import apply_edits
        from gradguard.fixes.scope import statement_region

        edits = sorted(fix.edits, key=lambda e: (e.line, e.column))
        clusters: list[list[Edit]] = []
        for e in edits:
            if clusters and e.line <= max(x.end_line for x in clusters[-1]) + 1:
                clusters[-1].append(e)
            else:
                clusters.append([e])
        for group in clusters:
            a, b = min(e.line for e in group), max(e.end_line for e in group)
            if not (1 <= a <= b <= len(self.lines)):
                return None
            region = statement_region(self.source, a, b)
            if region is None:
                return None
            first, last, stmt = region
            if stmt is not None and self._slot_parses(stmt, group):
                continue  # an argument or element replaced by one expression: its statement still parses
            old = "\n".join(self.lines[first - 1:last]) + "\n"
            if _block_margin(old) is None or _statements(old) is None:
                return None
            shifted = [Edit(e.line - first + 1, e.column, e.end_line - first + 1, e.end_column, e.text)
                       for e in group]
            new = apply_edits(old, shifted)
            if _block_margin(new) != _block_margin(old):
                return None  # re-indented: only the whole file can say
            n = _statements(new)
            if n is None:
                return False
            if n == 0:
                return None  # emptied a block? only the whole file can say
        return True

    def _slot_parses(self, stmt: ast.stmt, group: list[Edit]) -> bool:
        """True when the edits lie inside one call argument / element of ``stmt`` and what that slot becomes
        is still one expression (checked on the slot's text alone: the cost does not grow with the statement,
        e.g. a Sequential of a thousand entries)."""
        from gradguard.fixes import apply_edits
        from gradguard.fixes.scope import expression_slot

        def byte_col(line: int, col: int) -> int:
            return len(self.lines[line - 1][: col - 1].encode("utf-8"))

        start = (group[0].line, byte_col(group[0].line, group[0].column))
        last = max(group, key=lambda e: (e.end_line, e.end_column))
        end = (last.end_line, byte_col(last.end_line, last.end_column))
        node = expression_slot(stmt, start, end)
        if node is None or node.end_lineno is None or node.end_col_offset is None:
            return False
        l1, l2 = node.lineno, node.end_lineno
        c1 = _char_col(self.lines[l1 - 1], node.col_offset)
        c2 = _char_col(self.lines[l2 - 1], node.end_col_offset)
        if l1 == l2:
            text = self.lines[l1 - 1][c1:c2]
        else:
            text = "\n".join([self.lines[l1 - 1][c1:], *self.lines[l1:l2 - 1], self.lines[l2 - 1][:c2]])
        shifted = [Edit(e.line - l1 + 1, e.column - (c1 if e.line == l1 else 0), e.end_line - l1 + 1,
                        e.end_column - (c1 if e.end_line == l1 else 0), e.text) for e in group]
        new = apply_edits(text, shifted)
        try:
            call = ast.parse(f"_(\n{new}\n,)", mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
        return (isinstance(call, ast.Call) and len(call.args) == 1 and not call.keywords
                and not isinstance(call.args[0], (ast.Starred, ast.NamedExpr)))

    def _parses_by_growing(self, fix: Fix) -> bool:
        from gradguard.fixes import apply_edits

        first0 = min([e.line for e in fix.edits] + [self.m.stmt.line])
        last0 = min(max([e.end_line for e in fix.edits] + [self.m.stmt.end_line]), len(self.lines))
        grow = 0
        while True:
            first, last = max(1, first0 - grow), min(len(self.lines), last0 + grow)
            old = "\n".join(self.lines[first - 1:last]) + "\n"
            if _parses(old):
                shifted = [Edit(e.line - first + 1, e.column, e.end_line - first + 1, e.end_column, e.text)
                           for e in fix.edits]
                return _parses(apply_edits(old, shifted))
            if first == 1 and last == len(self.lines):
                return _parses_module(apply_edits(self.source, fix.edits))
            grow = grow * 2 if grow else 1
            if grow > 256:
                return _parses_module(apply_edits(self.source, fix.edits))


DEEP_INDENT = 80  # characters of indentation: at one character per level, near the limit of 100 levels


def _indent_width(line: str) -> int:
    return len(line) - len(line.lstrip(" \t\f"))


def _max_indent(text: str) -> int:
    return max((_indent_width(ln) for ln in source_lines(text) if ln.strip()), default=0)


def _parses_module(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _block_margin(text: str) -> str | None:
    """The indentation of the first line that is code (None: none is)."""
    for ln in source_lines(text):
        st = ln.strip()
        if st and not st.startswith("#"):
            return ln[: len(ln) - len(ln.lstrip())]
    return None


@lru_cache(maxsize=256)
def _statements(text: str) -> int | None:
    """How many statements ``text`` holds once dedented (parsed alone, or as the body of an ``if``); None when
    it does not parse. Cached: every fix of one statement checks the same original text."""
    try:
        return len(ast.parse(textwrap.dedent(text)).body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        try:
            body = ast.parse("if True:\n" + textwrap.indent(textwrap.dedent(text), "    ")).body
            return len(body[0].body) if body and isinstance(body[0], ast.If) else None  # type: ignore[attr-defined]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def _parses(text: str) -> bool:
    try:
        ast.parse(textwrap.dedent(text))
        return True
    except (SyntaxError, ValueError):
        try:
            ast.parse("if True:\n" + textwrap.indent(textwrap.dedent(text), "    "))
            return True
        except (SyntaxError, ValueError):
            return False


