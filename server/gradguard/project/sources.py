"""Source files as the project sees them: text, a content hash, the parsed tree and the top-level bindings.

Everything here is derived from the text alone (no execution), computed lazily and kept for as long as the text
does not change, so one parse serves every analysis in the process that reaches the module.
"""

from __future__ import annotations

import ast
import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

from gradguard.model import source_lines

MAX_MODULE_BYTES = 4_000_000  # larger modules (generated tables) are opaque: nothing in them is followed


@dataclass(frozen=True)
class Binding:
    """A top-level statement that binds a name. ``alias`` is the ``ast.alias`` for import statements."""

    stmt: ast.stmt
    alias: ast.alias | None = None


@dataclass(eq=False)
class SourceFile:
    """One Python module on disk or in an editor buffer."""

    path: str  # absolute, normalised
    text: str
    name: str = ""  # dotted module name when known ("pkg.models.blocks"), else ""
    is_package: bool = False  # an ``__init__.py``
    library: bool = False  # found on the interpreter's search path (site-packages), not in the workspace
    digest: str = ""
    _tree: ast.Module | None = None
    _parsed: bool = False
    _bindings: dict[str, list[Binding]] | None = None
    _stars: list[ast.ImportFrom] | None = None
    _lines: list[str] | None = None
    _ng_only: set[int] | None = None
    _am_only: set[int] | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.digest:
            self.digest = hashlib.blake2b(self.text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path)

    @property
    def is_ascii(self) -> bool:
        return self.text.isascii()

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = source_lines(self.text)
        return self._lines

    @property
    def tree(self) -> ast.Module | None:
        """The parsed module, or None when it does not parse (such a module is opaque)."""
        if not self._parsed:
            self._parsed = True
            self._tree = self._parse()
        return self._tree

    def peek_tree(self) -> ast.Module | None:
        """The parsed module for one look (a workspace index's scan): the kept tree when there is one, else a
        parse that is not kept, so that indexing a large workspace does not hold every file's tree."""
        return self._tree if self._parsed else self._parse()

    def _parse(self) -> ast.Module | None:
        if len(self.text) > MAX_MODULE_BYTES:
            return None
        try:
            return ast.parse(self.text, filename=self.path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None

    @property
    def bindings(self) -> dict[str, list[Binding]]:
        """Top-level name -> the statements that bind it, in source order.

        Statements nested in top-level ``if``/``try``/``with`` blocks count (``try: import x except: x = None``,
        ``if TYPE_CHECKING: from .a import B``); ``if __name__ == "__main__":`` blocks do not.
        """
        if self._bindings is None:
            self._index()
        assert self._bindings is not None
        return self._bindings

    @property
    def star_imports(self) -> list[ast.ImportFrom]:
        if self._stars is None:
            self._index()
        assert self._stars is not None
        return self._stars

    def _index(self) -> None:
        out: dict[str, list[Binding]] = {}
        stars: list[ast.ImportFrom] = []
        tree = self.tree
        if tree is not None:
            _collect(tree.body, out, stars)
        self._bindings, self._stars = out, stars


def top_level_names(tree: ast.Module) -> set[str]:
    """The names a module's top level binds (as :attr:`SourceFile.bindings` counts them)."""
    out: dict[str, list[Binding]] = {}
    _collect(tree.body, out, [])
    return set(out)


def _is_main_guard(test: ast.expr) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


def _targets(t: ast.expr) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _targets(e)]
    if isinstance(t, ast.Starred):
        return _targets(t.value)
    return []


_TRY: tuple[type, ...] = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)


def _collect(body: list[ast.stmt], out: dict[str, list[Binding]], stars: list[ast.ImportFrom]) -> None:
    for s in body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(s.name, []).append(Binding(s))
        elif isinstance(s, ast.Import):
            for a in s.names:
                name = a.asname or a.name.split(".")[0]
                out.setdefault(name, []).append(Binding(s, a))
        elif isinstance(s, ast.ImportFrom):
            for a in s.names:
                if a.name == "*":
                    stars.append(s)
                else:
                    out.setdefault(a.asname or a.name, []).append(Binding(s, a))
        elif isinstance(s, ast.Assign):
            for t in s.targets:
                for n in _targets(t):
                    out.setdefault(n, []).append(Binding(s))
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            for n in _targets(s.target):
                out.setdefault(n, []).append(Binding(s))
        elif isinstance(s, ast.If):
            if _is_main_guard(s.test):
                continue
            _collect(s.body, out, stars)
            _collect(s.orelse, out, stars)
        elif isinstance(s, _TRY):
            tr: Any = s  # ast.Try or ast.TryStar (3.11+): the same fields
            _collect(tr.body, out, stars)
            for h in tr.handlers:
                _collect(h.body, out, stars)
            _collect(tr.orelse, out, stars)
            _collect(tr.finalbody, out, stars)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            _collect(s.body, out, stars)


def read_source(path: str) -> str | None:
    """The text of a regular ``.py`` file as the interpreter would decode it; None if it cannot be read."""
    import io
    import stat
    import tokenize

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MODULE_BYTES:
            return None
        with open(path, "rb") as f:
            data = f.read(MAX_MODULE_BYTES + 1)
    except OSError:
        return None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None
    return text[1:] if text.startswith("\ufeff") else text
