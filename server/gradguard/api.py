"""The analyzer's entry points: source text in, findings out. No torch import anywhere below this."""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import re
import stat
import sys
import tokenize
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from gradguard.config import Config, load_config
from gradguard.files import iter_python_files
from gradguard.gctune import between_files, fewer_collections
from gradguard.model import Finding, finding_from_dict, finding_to_dict, source_lines
from gradguard.project.cache import ResultCache

if TYPE_CHECKING:
    from gradguard.project import Project

NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
MAX_BYTES = 20_000_000  # files larger than this are skipped with a GG000 note, never crash


def decode_source(data: bytes) -> str:
    """Decode Python source bytes like the interpreter does (BOM, PEP 263 cookie); raise UnicodeDecodeError."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    text = data.decode(encoding)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def _gg000(path: str, line: int, col: int, message: str) -> Finding:
    return Finding(path=path, line=max(line, 1), column=max(col, 1), end_line=max(line, 1),
                   end_column=max(col, 1) + 1, code="GG000", severity="error", message=message)


def parse(source: str, path: str = "<string>") -> tuple[ast.Module | None, Finding | None]:
    try:
        return ast.parse(source, filename=path, type_comments=False), None
    except SyntaxError as e:
        line, col = _clamp(source, e.lineno or 1, e.offset or 1)
        msg = e.msg or "invalid syntax"
        return None, _gg000(path, line, col, f"could not parse: {msg} (gradguard skips this file until it parses)")
    except (RecursionError, MemoryError):
        return None, _gg000(path, 1, 1, "could not parse: the file is too deeply nested for the Python parser")
    except ValueError as e:  # e.g. source with NUL bytes
        return None, _gg000(path, 1, 1, f"could not parse: {e}")


def _clamp(source: str, line: int, col: int) -> tuple[int, int]:
    """A SyntaxError's position inside the file: its offset counts in the whole logical line (a backslash
    continuation can make it longer than the physical line), and "unexpected EOF" points past the last line."""
    lines = source_lines(source)
    if not lines:
        return 1, 1
    if line > len(lines):
        return len(lines), len(lines[-1]) + 1
    line = max(line, 1)
    return line, max(1, min(col, len(lines[line - 1]) + 1))


def noqa_codes(line_text: str) -> set[str] | None:
    """None: no noqa; empty set: bare ``# noqa`` (everything); else the listed codes."""
    m = NOQA_RE.search(line_text)
    if not m:
        return None
    codes = m.group("codes")
    if not codes:
        return set()
    return {c.upper() for c in re.split(r"[\s,]+", codes) if c}


def suppressed(f: Finding, lines: Sequence[str]) -> bool:
    if f.code == "GG000" or not (1 <= f.line <= len(lines)):
        return False
    codes = noqa_codes(lines[f.line - 1])
    return codes is not None and (not codes or f.code in codes or any(f.code.startswith(c) for c in codes))


def check_source(source: str | bytes, path: str = "<string>", config: Config | None = None,
                 fixes: bool = True, project: Project | None = None) -> list[Finding]:
    """Analyze one file's text. Never raises for bad input: problems become a GG000 finding.

    With a ``project``, imports are followed into the workspace and libraries (:mod:`gradguard.project`);
    findings are those in this file.
    """
    return check_text(source, path, config, fixes, project).findings


class FileResult:
    """One file's check: its findings, findings its context revealed in other files (by absolute path, without
    fixes), and the other modules its analysis read (absolute paths)."""

    __slots__ = ("deps", "elsewhere", "findings", "path")

    def __init__(self, path: str, findings: list[Finding], elsewhere: dict[str, list[Finding]] | None = None,
                 deps: list[str] | None = None):
        self.path = path
        self.findings = findings
        self.elsewhere = elsewhere or {}
        self.deps = deps or []


def _real_file(path: str) -> str:
    if not path or (path.startswith("<") and path.endswith(">")):
        return ""
    return os.path.normpath(os.path.abspath(path))


def check_text(source: str | bytes, path: str = "<string>", config: Config | None = None, fixes: bool = True,
               project: Project | None = None, incremental: bool = False) -> FileResult:
    """One file's check. ``incremental`` (the editor's re-checks of an edited file): keep its analysis in the
    ``project`` and, next time, re-run only the functions the edit can change (:mod:`gradguard.analysis.incremental`)."""
    with fewer_collections():
        return _check_text(source, path, config, fixes, project, incremental)


def _check_text(source: str | bytes, path: str, config: Config | None, fixes: bool,
                project: Project | None, incremental: bool = False) -> FileResult:
    config = config or Config()
    if isinstance(source, bytes):
        if len(source) > MAX_BYTES:
            return FileResult(path, [_gg000(path, 1, 1, f"skipped: file is larger than {MAX_BYTES // 1_000_000} MB")])
        try:
            source = decode_source(source)
        except (UnicodeDecodeError, LookupError) as e:
            reason = e.reason if isinstance(e, UnicodeDecodeError) else e
            return FileResult(path, [_gg000(path, 1, 1, "could not decode the file as Python source "
                                                        f"({e.__class__.__name__}: {reason})")])
    file = _real_file(path) if project is not None else ""
    tree: ast.Module | None = None
    if project is not None and file:
        sf = project.source(file)
        if sf is not None and sf.text == source:
            tree = sf.tree  # parsed once, shared with every analysis that imports this file
    err = None
    if tree is None:
        tree, err = parse(source, path)
    if tree is None:
        assert err is not None
        return FileResult(path, [err] if config.enabled("GG000", path) else [])
    from gradguard.analysis import analyze_file
    from gradguard.rules import findings_from_hazards

    lines = source_lines(source)  # numbered as ast numbers them (not str.splitlines)
    try:
        result = analyze_file(tree, source, path, project, file, incremental=incremental)
    except RecursionError:
        return FileResult(path, [_gg000(path, 1, 1, "skipped: the file is too deeply nested to analyze")])
    except Exception as exc:  # a bug in gradguard: say so on the file, never a traceback in the user's editor or CI
        if os.environ.get("GRADGUARD_DEBUG"):
            raise
        return FileResult(path, [_gg000(path, 1, 1, f"internal error while analyzing this file "
                                        f"({type(exc).__name__}: {exc}); no findings for it. Please report it "
                                        f"(GRADGUARD_DEBUG=1 shows the traceback)")])

    def lines_for(p: str) -> tuple[str, Sequence[str]]:
        if not p or p == file:
            return path, lines
        sf = project.source(p) if project is not None else None
        return p, (sf.lines if sf is not None else ())

    mine = [h for h in result.hazards if not h.site.path or h.site.path == file]
    if result.truncated is not None:
        note = _gg000(path, result.truncated, 1, "analysis incomplete: this file is too large or too deeply "
                      "nested to follow in full within the analysis budget; hazards from here on may be missed")
        note.severity = "info"
        extra_notes = [note]
    else:
        extra_notes = []
    enabled = [f for f in findings_from_hazards(mine, path, lines, lines_for) if config.enabled(f.code, path)]
    found = [f for f in enabled if not suppressed(f, lines)]
    for f in found:
        f.severity = config.severity_of(f.code, f.severity)
    if fixes and found:
        from gradguard.fixes import attach_fixes
        attach_fixes(found, source)
    if "#" in source and config.enabled("GG001", path):
        from gradguard.noqa import unused_noqa

        for f in unused_noqa(source, lines, enabled, path):
            f.severity = config.severity_of(f.code, f.severity)
            if not fixes:
                f.fixes = []
            found.append(f)
    found.extend(extra_notes)
    found.sort(key=Finding.sort_key)
    elsewhere: dict[str, list[Finding]] = {}
    if project is not None:
        by_path: dict[str, list[Any]] = {}
        for h in result.hazards:
            if h.site.path and h.site.path != file and not project.is_library(h.site.path):
                by_path.setdefault(h.site.path, []).append(h)
        for p, hs in sorted(by_path.items()):
            _, plines = lines_for(p)
            fs = [f for f in findings_from_hazards(hs, p, plines, lines_for)
                  if config.enabled(f.code, p) and not suppressed(f, plines)]
            for f in fs:
                f.severity = config.severity_of(f.code, f.severity)
            if fs:
                elsewhere[p] = sorted(fs, key=Finding.sort_key)
    return FileResult(path, found, elsewhere, result.deps)


def check_file(path: str, config: Config | None = None, fixes: bool = True,
               project: Project | None = None) -> list[Finding]:
    return _check_file(path, config, fixes, project).findings


def _check_file(path: str, config: Config | None, fixes: bool, project: Project | None) -> FileResult:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return FileResult(path, [_gg000(path, 1, 1, "skipped: not a regular file")])
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        return FileResult(path, [_gg000(path, 1, 1, f"could not read: {e.strerror or e}")])
    return check_text(data, path, config, fixes=fixes, project=project)


_FORKED: tuple[Config, bool, Project | None, ResultCache | None] | None = None  # see check_paths


def _check_forked(paths: list[str]) -> list[FileResult]:
    assert _FORKED is not None
    return _check_many((paths, *_FORKED))


def _check_many(args: tuple[list[str], Config, bool, Project | None, ResultCache | None]) -> list[FileResult]:
    paths, config, fixes, project, cache = args
    out = []
    with fewer_collections():
        for p in paths:
            r = _cached_check(p, config, fixes, project, cache) if cache is not None and project is not None else None
            out.append(r if r is not None else _check_file(p, config, fixes, project))
            between_files()
    return out


def _cached_check(path: str, config: Config, fixes: bool, project: Project, cache: ResultCache) -> FileResult | None:
    """The file's result from the cache when its text and its dependencies' are unchanged; else check it and store
    the result (None when the file cannot be read as a source: the plain path reports why)."""
    sf = project.source(path)
    if sf is None:
        return None

    def dep_digest(p: str) -> str | None:
        d = project.source(p)
        return d.digest if d is not None else None

    stored = cache.get(path, sf.digest, dep_digest)
    if stored is not None:
        try:
            return FileResult(path, [finding_from_dict(f) for f in stored["findings"]],
                              {str(k): [finding_from_dict(f) for f in v] for k, v in stored["elsewhere"].items()},
                              [str(d) for d in stored["deps"]])
        except (KeyError, TypeError, ValueError, AttributeError):
            pass  # an entry from elsewhere or damaged: check again
    r = _check_file(path, config, fixes, project)
    deps = {}
    for d in r.deps:
        dd = dep_digest(d)
        if dd is None:
            return r
        deps[d] = dd
    cache.put(path, sf.digest, deps, {"findings": [finding_to_dict(f) for f in r.findings],
                                      "elsewhere": {k: [finding_to_dict(f) for f in v] for k, v in r.elsewhere.items()},
                                      "deps": r.deps})
    return r


def check_paths(paths: Iterable[str], config: Config | None = None, jobs: int | None = None,
                fixes: bool = True, project: Project | bool | None = True, python: str | None = None,
                cache: bool | ResultCache = False) -> list[Finding]:
    """Check files and directories; files are spread over ``jobs`` processes (default: all cores).

    ``project=True`` (the default) follows imports through a project built around ``paths`` (workspace roots,
    ``src``, the site-packages of ``python``); ``project=False`` checks each file on its own. ``cache=True`` keeps
    results in ``.gradguard_cache/`` at the workspace root (:mod:`gradguard.project.cache`).
    """
    paths = list(paths)
    config = config or load_config(paths[0] if paths else ".")
    files = list(iter_python_files(paths, config))
    owned = project is True  # the run's own project, closed when it ends
    if project is True:
        project = project_for(paths, config, python)
    elif project is False:
        project = None
    store: ResultCache | None = None
    if isinstance(cache, ResultCache):
        store = cache
    elif cache and project is not None:
        store = result_cache(project, config, fixes)
    jobs = jobs or os.cpu_count() or 1
    results: list[FileResult] = []
    if jobs <= 1 or len(files) < 8:
        with fewer_collections():
            results = _check_many((files, config, fixes, project, store))
            if owned:
                # What the run read (every tree, the calls kept for later files) goes by reference counting
                # before the collector is back on: otherwise its first collection scans all of it once more, only
                # to find it still alive (half of that collection's 1 s at the end of a check of timm).
                assert project is not None and not isinstance(project, bool)
                if store is not None:
                    store.prune()
                    store = None
                project.close()
                project = None
    else:
        # Balance by size: big files first, dealt round-robin into ``jobs * 4`` chunks.
        sized = sorted(files, key=lambda p: -_size(p))
        nchunks = min(len(files), jobs * 4)
        chunks: list[list[str]] = [[] for _ in range(nchunks)]
        for i, p in enumerate(sized):
            chunks[i % nchunks].append(p)
        if sys.platform.startswith("linux"):
            import multiprocessing

            # Forked workers inherit the run's project instead of unpickling a copy per chunk: each keeps one
            # project (its parsed sources, the calls kept for later files) across the chunks it checks.
            global _FORKED
            _FORKED = (config, fixes, project, store)
            try:
                with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as ex:
                    for part in ex.map(_check_forked, chunks):
                        results.extend(part)
            finally:
                _FORKED = None
        else:
            with ProcessPoolExecutor(max_workers=jobs) as ex:
                for part in ex.map(_check_many, [(c, config, fixes, project, store) for c in chunks]):
                    results.extend(part)
    if store is not None:
        store.prune()
    return merge_results(results, fixes)


def result_cache(project: Project, config: Config, fixes: bool) -> ResultCache:
    """The result cache of a run: at the configuration's directory, else the first workspace root."""
    root = config.root or (project.search.roots[0] if project.search.roots else os.getcwd())
    context = {"config": repr(config), "search": project.search.key(), "fixes": fixes}
    return ResultCache(root, context)


def project_for(paths: Sequence[str], config: Config, python: str | None = None) -> Project:
    """The project ``check_paths`` follows imports through (workspace roots, ``src``, the site-packages of
    ``python``, else of ``[tool.gradguard] python``, else of the interpreter running gradguard)."""
    from gradguard.project import build_project

    return build_project(list(paths), config.root, config.src, python=python or config.python or None)


def fix_file(path: str, text: str, findings: Sequence[Finding], config: Config | None = None,
             unsafe: bool = False, project: Project | None = None) -> Any:
    """What ``--fix`` does to one file: :func:`gradguard.fixes.fix_until_stable`, re-checking with the same
    configuration and project. Returns its ``FixOutcome``."""
    from gradguard.fixes import fix_until_stable

    def recheck(new: str) -> list[Finding]:
        return check_text(new, path, config, fixes=True, project=project).findings

    return fix_until_stable(text, findings, recheck, unsafe=unsafe)


def merge_results(results: list[FileResult], fixes: bool = True) -> list[Finding]:
    """Each file's own findings, plus the findings other files' analyses revealed in it (deduplicated; the
    order of the inputs does not matter)."""
    results = sorted(results, key=lambda r: r.path)
    by_abs = {_real_file(r.path): r for r in results}
    out: list[Finding] = []
    for r in results:
        out.extend(r.findings)
    extra: dict[str, list[Finding]] = {}
    for r in results:
        for p, fs in r.elsewhere.items():
            target = by_abs.get(p)
            if target is None:
                continue  # only files that were checked get findings
            have = {(f.code, f.line, f.column) for f in target.findings}
            have |= {(f.code, f.line, f.column) for f in extra.get(p, [])}
            for f in fs:
                if (f.code, f.line, f.column) not in have:
                    have.add((f.code, f.line, f.column))
                    f.path = target.path
                    # (its own lines, named as its own findings name them)
                    f.related = [dataclasses.replace(rel, path=target.path) if rel.path == p else rel
                                 for rel in f.related]
                    extra.setdefault(p, []).append(f)
    for p, fs in extra.items():
        if fixes:
            from gradguard.fixes import attach_fixes
            from gradguard.project.sources import read_source

            text = read_source(p)
            if text is not None:
                attach_fixes(fs, text)
        out.extend(fs)
    out.sort(key=Finding.sort_key)
    return out


def _size(p: str) -> int:
    try:
        return os.path.getsize(p)
    except OSError:
        return 0
