"""Configuration: ``[tool.gradguard]`` in pyproject.toml, merged with command-line / editor settings.

Keys: ``select``, ``ignore`` (lists of codes or prefixes, e.g. "GG1"), ``per-file-ignores`` (glob -> codes),
``exclude`` (gitignore-style patterns, added to the defaults), ``severity`` (code -> error|warning|info|hint),
``src`` (directories imports are resolved from, relative to the pyproject.toml; default ``[".", "src"]``).
"""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "node_modules", "build", "dist",
    ".mypy_cache", ".ruff_cache", ".pytest_cache", "*.egg-info", "site-packages",
)


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ("GG",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    severity: tuple[tuple[str, str], ...] = ()
    root: str = ""  # directory of the pyproject.toml the config came from ("" = none)
    src: tuple[str, ...] = (".", "src")  # import roots, relative to ``root`` (like ruff's ``src``)

    def enabled(self, code: str, path: str | None = None) -> bool:
        if code == "GG000":
            return True  # parse failures are always reported
        if not any(code.startswith(s) for s in self.select if s):
            return False
        if any(code.startswith(i) for i in self.ignore if i):
            return False
        if path and self.per_file_ignores:
            rel = self.relpath(path)
            for pattern, codes in self.per_file_ignores:
                if _glob_match(rel, pattern) and any(code.startswith(c) for c in codes):
                    return False
        return True

    def severity_of(self, code: str, default: str) -> str:
        best = ""
        value = default
        for prefix, sev in self.severity:
            if code.startswith(prefix) and len(prefix) > len(best):
                best, value = prefix, sev
        return value

    def relpath(self, path: str) -> str:
        if self.root:
            try:
                return os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
            except ValueError:
                pass
        return path.replace(os.sep, "/")

    def with_overrides(self, **kw: Any) -> Config:
        clean = {k: v for k, v in kw.items() if v is not None}
        return replace(self, **clean)


def _glob_match(rel: str, pattern: str) -> bool:
    return fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(rel), pattern)


def _codes(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [v for v in value.replace(" ", ",").split(",")]
    return tuple(str(v).strip().upper() for v in value if str(v).strip())


def find_pyproject(start: str | os.PathLike[str]) -> Path | None:
    p = Path(start).resolve()
    if p.is_file():
        p = p.parent
    for d in (p, *p.parents):
        cand = d / "pyproject.toml"
        if cand.is_file():
            return cand
    return None


def parse_table(table: dict[str, Any], root: str = "") -> Config:
    pfi = table.get("per-file-ignores", table.get("per_file_ignores", {})) or {}
    sev = table.get("severity", {}) or {}
    return Config(
        select=_codes(table.get("select")) or ("GG",),
        ignore=_codes(table.get("ignore")),
        per_file_ignores=tuple((str(k), _codes(v)) for k, v in pfi.items()),
        exclude=tuple(str(x) for x in table.get("exclude", []) or []),
        severity=tuple((str(k).upper(), str(v).lower()) for k, v in sev.items()),
        root=root,
        src=tuple(str(x) for x in table.get("src", [".", "src"]) or []),
    )


def load_config(start: str | os.PathLike[str] = ".") -> Config:
    """Config from the nearest pyproject.toml with a [tool.gradguard] table (defaults otherwise)."""
    pp = find_pyproject(start)
    if pp is None:
        return Config()
    try:
        with open(pp, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return Config(root=str(pp.parent))
    table = data.get("tool", {}).get("gradguard")
    if not isinstance(table, dict):
        return Config(root=str(pp.parent))
    return parse_table(table, root=str(pp.parent))


@dataclass
class FileSet:
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
