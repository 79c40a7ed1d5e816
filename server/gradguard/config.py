"""Configuration: ``[tool.gradguard]`` in pyproject.toml, merged with command-line / editor settings.

Keys (the schema is :data:`SCHEMA`, the one place that says what each key accepts):
``select``, ``ignore`` (lists of codes or prefixes, e.g. "GG1"), ``per-file-ignores`` (glob -> codes),
``exclude`` (gitignore-style patterns, added to the defaults), ``severity`` (code -> error|warning|info|hint),
``src`` (directories imports are resolved from, relative to the pyproject.toml; default ``[".", "src"]``),
``python`` (the interpreter whose site-packages imports are resolved in).

A value of the wrong type, an unknown key, an unknown rule code or a pyproject.toml that cannot be read or
parsed raises :class:`ConfigError` (the CLI prints it and exits 2, like ruff); nothing is silently ignored.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "node_modules", "build", "dist",
    ".mypy_cache", ".ruff_cache", ".pytest_cache", "*.egg-info", "site-packages", ".gradguard_cache",
)
SEVERITIES = ("error", "warning", "info", "hint")
#: Codes that run only when selected by their full code (``--extend-select GG001``), never through a prefix.
OPT_IN = ("GG001",)


class ConfigError(ValueError):
    """A configuration problem, worded for one line: ``SOURCE: [tool.gradguard] KEY: what was expected``."""

    def __init__(self, message: str, source: str = "", key: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.key = key

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        if self.key.startswith("-"):  # a command-line flag
            return f"{where}{self.key}: {self.message}"
        if self.key:
            return f"{where}[tool.gradguard] {self.key}: {self.message}"
        return f"{where}{self.message}"


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ("GG",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    severity: tuple[tuple[str, str], ...] = ()
    root: str = ""  # directory of the pyproject.toml the config came from ("" = none)
    src: tuple[str, ...] = (".", "src")  # import roots, relative to ``root`` (like ruff's ``src``)
    python: str = ""  # interpreter whose site-packages imports resolve in ("" = the one running gradguard)

    def enabled(self, code: str, path: str | None = None) -> bool:
        if code == "GG000":
            return True  # parse failures are always reported
        if code in OPT_IN:
            if code not in self.select:
                return False
        elif not any(code.startswith(s) for s in self.select if s):
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


# ------------------------------------------------------------------------------------------------- the schema
class _Bad(ValueError):
    """A value does not fit its key; the message says what was expected."""


@lru_cache(maxsize=1)
def known_codes() -> tuple[str, ...]:
    """Every rule code (GG000 for files that do not parse, GG001 for unused ``# noqa``, then the rules)."""
    from gradguard.rules import ALL_RULES

    return ("GG000", "GG001", *sorted(r.code for r in ALL_RULES))


def is_code_or_prefix(code: str) -> bool:
    """``GG``, a group such as ``GG1``, or a code such as ``GG101``: a prefix (at least "GG") of a real code."""
    return len(code) >= 2 and any(c.startswith(code) for c in known_codes())


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, (int, float, list)) else type(value).__name__


def check_codes(value: Any, what: str = "a list of rule codes") -> tuple[str, ...]:
    """A list of rule codes or prefixes (``["GG1", "GG301"]``), upper-cased. Raises ValueError saying why."""
    if not isinstance(value, (list, tuple)):
        raise _Bad(f"expected {what} such as [\"GG1\", \"GG301\"], got {_show(value)}")
    out = []
    for v in value:
        if not isinstance(v, str):
            raise _Bad(f"expected {what}, got {_show(v)} in the list")
        code = v.strip().upper()
        if not is_code_or_prefix(code):
            raise _Bad(f"unknown rule code {v!r} (expected GG, a group GG0-GG3, or a code: "
                       f"{', '.join(known_codes())})")
        out.append(code)
    return tuple(out)


def _select(value: Any) -> tuple[str, ...]:
    codes = check_codes(value)
    if not codes:
        raise _Bad("expected at least one rule code (an empty list would turn every rule off)")
    return codes


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _Bad(f"expected {what}, got {_show(value)}")
    return tuple(value)


def _exclude(value: Any) -> tuple[str, ...]:
    patterns = _strings(value, "a list of gitignore-style patterns such as [\"generated/\"]")
    for p in patterns:
        if bad_pattern(p):
            raise _Bad(f"{p!r} is not a valid gitignore-style pattern")
    return patterns


def _per_file_ignores(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise _Bad(f"expected a table of glob -> list of rule codes such as {{ \"tests/*\" = [\"GG301\"] }}, "
                   f"got {_show(value)}")
    out = []
    for glob, codes in value.items():
        try:
            out.append((str(glob), check_codes(codes)))
        except _Bad as e:
            raise _Bad(f"{glob!r}: {e}") from None
    return tuple(out)


def _severity(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _Bad(f"expected a table of rule code -> one of {', '.join(SEVERITIES)} such as "
                   f"{{ GG1 = \"error\" }}, got {_show(value)}")
    out = []
    for code, level in value.items():
        (c,) = check_codes([code])
        if not isinstance(level, str) or level.lower() not in SEVERITIES:
            raise _Bad(f"{code}: expected one of {', '.join(SEVERITIES)}, got {_show(level)}")
        out.append((c, level.lower()))
    return tuple(out)


def _src(value: Any) -> tuple[str, ...]:
    return _strings(value, "a list of directories such as [\".\", \"src\"]")


def _python(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad(f"expected the path of a Python interpreter, got {_show(value)}")
    return value


@dataclass(frozen=True)
class Key:
    field: str  # the Config field it sets
    parse: Callable[[Any], Any]


#: ``[tool.gradguard]`` key -> what it sets and how its value is checked.
SCHEMA: dict[str, Key] = {
    "select": Key("select", _select),
    "extend-select": Key("extend_select", check_codes),  # added to select (GG001 needs it: see config.OPT_IN)
    "ignore": Key("ignore", check_codes),
    "per-file-ignores": Key("per_file_ignores", _per_file_ignores),
    "per_file_ignores": Key("per_file_ignores", _per_file_ignores),
    "exclude": Key("exclude", _exclude),
    "severity": Key("severity", _severity),
    "src": Key("src", _src),
    "python": Key("python", _python),
}


def bad_pattern(pattern: str) -> bool:
    """True when a gitignore-style pattern does not compile (git skips such a .gitignore line)."""
    from gradguard.files import pattern_factory

    try:
        pattern_factory()(pattern)
    except (ValueError, TypeError):
        return True
    return False


def parse_table(table: Any, root: str = "", source: str = "") -> Config:
    """A Config from a ``[tool.gradguard]`` table; raises :class:`ConfigError` naming ``source`` and the key."""
    if not isinstance(table, dict):
        raise ConfigError(f"[tool.gradguard] must be a table, got {_show(table)}", source)
    kw: dict[str, Any] = {}
    for key, value in table.items():
        spec = SCHEMA.get(key)
        if spec is None:
            raise ConfigError(f"unknown key (expected one of: {', '.join(k for k in SCHEMA if '_' not in k)})",
                              source, str(key))
        try:
            kw[spec.field] = spec.parse(value)
        except _Bad as e:
            raise ConfigError(str(e), source, key) from None
    extend = kw.pop("extend_select", ())
    if extend:
        kw["select"] = (*kw.get("select", Config.select), *extend)
    py = kw.get("python")
    if py and root and not os.path.isabs(py) and ("/" in py or os.sep in py):
        kw["python"] = os.path.normpath(os.path.join(root, py))
    return Config(root=root, **kw)


def check_cli_codes(flag: str, value: str | None) -> tuple[str, ...] | None:
    """``--select``/``--ignore`` values (comma-separated); raises :class:`ConfigError` naming the flag."""
    if value is None:
        return None
    codes = [c.strip() for c in value.split(",") if c.strip()]
    try:
        return _select(codes) if flag == "--select" else check_codes(codes)
    except _Bad as e:
        raise ConfigError(str(e), key=flag) from None


def find_pyproject(start: str | os.PathLike[str]) -> Path | None:
    p = Path(start).resolve()
    if p.is_file():
        p = p.parent
    for d in (p, *p.parents):
        cand = d / "pyproject.toml"
        if cand.is_file():
            return cand
    return None


def read_table(pp: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``[tool.gradguard]`` table of a pyproject.toml (None when it has none); raises :class:`ConfigError`
    when the file cannot be read, is not UTF-8, does not parse, or ``tool``/``tool.gradguard`` is not a table."""
    source = str(pp)
    try:
        with open(pp, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ConfigError(f"could not read: {e.strerror or e}", source) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise ConfigError(f"could not read: not valid UTF-8 (byte 0x{raw[e.start]:02x} on line {line})",
                          source) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"could not parse: {e}", source) from None
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"[tool] must be a table, got {_show(tool)}", source)
    if "gradguard" not in tool:
        return None
    table = tool["gradguard"]
    if not isinstance(table, dict):
        raise ConfigError(f"[tool.gradguard] must be a table, got {_show(table)}", source)
    return table


def load_config(start: str | os.PathLike[str] = ".") -> Config:
    """Config from the nearest pyproject.toml (defaults when it has no [tool.gradguard] table, or there is none).

    Raises :class:`ConfigError` for a pyproject.toml that cannot be read or parsed, or a bad table.
    """
    pp = find_pyproject(start)
    if pp is None:
        return Config()
    table = read_table(pp)
    if table is None:
        return Config(root=str(pp.parent))
    return parse_table(table, root=str(pp.parent), source=str(pp))


@dataclass
class FileSet:
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
