"""Client settings (initializationOptions / didChangeConfiguration) and how they merge with pyproject.toml.

Precedence (documented in docs/lsp.md): defaults < ``[tool.gradguard]`` < editor settings, where the
editor's ``select``/``ignore``/``severity`` only fill in what the table leaves unset unless
``configurationPreference`` is ``"editorFirst"`` (editor wins) or ``"editorOnly"`` (the table is ignored).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gradguard.config import (
    SEVERITIES,
    Config,
    ConfigError,
    bad_pattern,
    check_codes,
    find_pyproject,
    parse_table,
    read_table,
)

PREFERENCES = ("filesystemFirst", "editorFirst", "editorOnly")


@dataclass(frozen=True)
class Settings:
    enable: bool = True
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    severity: tuple[tuple[str, str], ...] = ()
    run: str = "onType"
    debounce_ms: int = 100
    exclude: tuple[str, ...] = ()
    configuration_preference: str = "filesystemFirst"
    log_file: str | None = None
    log_level: str = "info"
    run_timeout: float = 120.0
    #: The Python whose site-packages imports are resolved in (None: [tool.gradguard] python in a trusted
    #: workspace, else the interpreter running the server). Asked with ``-I -S``: no code of the workspace runs.
    interpreter: str | None = None
    #: What the client said of the workspace: True/False, or None when it said nothing (no trust model). False
    #: refuses gradguard.runFile (it runs the user's code) and sticks for the server's lifetime.
    workspace_trusted: bool | None = None
    #: Where rule links point: "" = the installed version's pages; else a base URL ("{code}" is replaced).
    docs_base_url: str = ""


def _codes(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [c for c in v.replace(" ", ",").split(",") if c]
    return check_codes(v)  # the same check as [tool.gradguard] select/ignore (known codes only): ValueError


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client object (flat, or under a "gradguard" key). Returns (settings, warnings)."""
    s = base or Settings()
    warnings: list[str] = []
    if isinstance(raw, dict) and isinstance(raw.get("gradguard"), dict):
        raw = raw["gradguard"]
    if raw is None:
        return s, warnings
    if not isinstance(raw, dict):
        return s, [f"settings must be an object, got {type(raw).__name__}"]
    kw: dict[str, Any] = {}

    def bad(key: str, why: str) -> None:
        warnings.append(f"setting {key!r} ignored: {why}")

    for key, value in raw.items():
        try:
            if key == "enable":
                if not isinstance(value, bool):
                    raise TypeError("expected true or false")
                kw["enable"] = value
            elif key in ("select", "ignore"):
                kw[key] = None if value is None else _codes(value)
            elif key == "severity":
                if not isinstance(value, dict):
                    raise TypeError("expected an object code -> severity")
                sev = []
                for code, level in value.items():
                    lv = str(level).lower()
                    lv = "info" if lv == "information" else lv
                    if lv not in SEVERITIES:
                        raise ValueError(f"unknown severity {level!r} for {code}")
                    sev.append((_codes([code])[0], lv))
                kw["severity"] = tuple(sev)
            elif key in ("run", "lintOnChange"):
                if key == "lintOnChange":
                    if not isinstance(value, bool):
                        raise TypeError("expected true or false")
                    value = "onType" if value else "onSave"
                if value not in ("onType", "onSave"):
                    raise ValueError("expected 'onType' or 'onSave'")
                kw["run"] = value
            elif key == "debounceMs":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise TypeError("expected a number of milliseconds >= 0")
                kw["debounce_ms"] = int(value)
            elif key == "exclude":
                if isinstance(value, str):
                    value = [value]
                if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
                    raise TypeError("expected a list of patterns")
                bad_ones = [x for x in value if bad_pattern(x)]
                if bad_ones:
                    raise ValueError(f"{bad_ones[0]!r} is not a valid gitignore-style pattern")
                kw["exclude"] = tuple(value)
            elif key == "configurationPreference":
                if value not in PREFERENCES:
                    raise ValueError(f"expected one of {', '.join(PREFERENCES)}")
                kw["configuration_preference"] = value
            elif key == "logFile":
                if value is not None and not isinstance(value, str):
                    raise TypeError("expected a path")
                kw["log_file"] = value or None
            elif key == "logLevel":
                if str(value).lower() not in ("error", "warning", "info", "debug"):
                    raise ValueError("expected error, warning, info or debug")
                kw["log_level"] = str(value).lower()
            elif key == "workspaceTrusted":
                if not isinstance(value, bool):
                    raise TypeError("expected true or false")
                if value and s.workspace_trusted is False:
                    # Only a new server (a client that grants trust restarts it, as VS Code's does) is trusted:
                    # no later settings object, e.g. one read from a workspace's own config file, lifts it.
                    raise ValueError("the workspace was reported untrusted; restart the server once it is trusted")
                kw["workspace_trusted"] = value
            elif key == "interpreter":
                if isinstance(value, list) and value and isinstance(value[0], str):
                    value = value[0]  # the Python tools extensions' shape: [path, ...args]
                if value is not None and not isinstance(value, str):
                    raise TypeError("expected the path of a Python interpreter")
                kw["interpreter"] = (value or "").strip() or None
            elif key == "docsBaseUrl":
                if value is not None and not isinstance(value, str):
                    raise TypeError("expected a URL")
                kw["docs_base_url"] = (value or "").strip()
            elif key == "runTimeout":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                    raise TypeError("expected a number of seconds > 0")
                kw["run_timeout"] = float(value)
        except (TypeError, ValueError) as e:
            bad(key, str(e))
    from dataclasses import replace

    return replace(s, **kw), warnings


@dataclass
class ConfigCache:
    """Reads ``[tool.gradguard]`` tables, cached per directory until a pyproject.toml changes.

    A pyproject.toml that cannot be read or parsed, or whose table does not fit the schema, counts as having no
    table (linting goes on with the defaults); its problem is kept in ``errors`` (pyproject path -> message, the
    same one line the CLI prints) for the server to show once.
    """

    _by_dir: dict[str, tuple[dict[str, Any] | None, str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def clear(self) -> None:
        self._by_dir.clear()
        self.errors.clear()

    def table_for(self, path: str | None, fallback_dir: str | None) -> tuple[dict[str, Any] | None, str]:
        """(the [tool.gradguard] table or None, the directory it applies from ("" if none))."""
        d = os.path.dirname(path) if path else (fallback_dir or "")
        if not d:
            return None, ""
        hit = self._by_dir.get(d)
        if hit is not None:
            return hit
        result: tuple[dict[str, Any] | None, str] = (None, "")
        try:
            pp = find_pyproject(d) if os.path.isdir(d) else None
        except OSError:
            pp = None
        if pp is not None:
            try:
                table = read_table(pp)
                if table is not None:
                    parse_table(table, root=str(pp.parent), source=str(pp))  # validate once, here
                result = (table, str(pp.parent))
            except ConfigError as e:
                self.errors[str(pp)] = str(e)
                result = (None, str(pp.parent))
        self._by_dir[d] = result
        return result


def effective_config(settings: Settings, table: dict[str, Any] | None, root: str) -> Config:
    """Merge the pyproject table (may be None) with the editor settings (see module docstring)."""
    pref = settings.configuration_preference
    use_table = table if (table is not None and pref != "editorOnly") else None
    base = parse_table(use_table, root=root) if use_table is not None else Config(root=root)
    editor_first = pref in ("editorFirst", "editorOnly")
    select, ignore = base.select, base.ignore
    if settings.select is not None and (editor_first or use_table is None or "select" not in use_table):
        select = settings.select or ("GG",)
    if settings.ignore is not None and (editor_first or use_table is None or "ignore" not in use_table):
        ignore = settings.ignore
    sev = dict(base.severity)
    for code, level in settings.severity:
        if editor_first or code not in sev:
            sev[code] = level
    exclude = tuple(base.exclude) + tuple(settings.exclude)
    if table is not None and pref == "editorOnly":
        exclude = tuple(str(x) for x in table.get("exclude", []) or []) + exclude
    return base.with_overrides(select=select, ignore=ignore, severity=tuple(sev.items()), exclude=exclude)


def excluded(path: str | None, config: Config, workspace_root: str | None) -> bool:
    """True when ``path`` matches the user's exclude patterns (table + editor; not the CLI defaults)."""
    if not path or not config.exclude:
        return False
    from gradguard.files import gitignore_spec

    spec = gitignore_spec(config.exclude)
    bases = [b for b in (config.root, workspace_root) if b]
    for base in bases:
        try:
            rel = os.path.relpath(os.path.abspath(path), base).replace(os.sep, "/")
        except ValueError:
            continue
        if not rel.startswith("../") and spec.match_file(rel):
            return True
    return spec.match_file(os.path.basename(path))
