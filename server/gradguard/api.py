"""The analyzer's entry points: source text in, findings out. No torch import anywhere below this."""

from __future__ import annotations

import ast
import io
import os
import re
import sys
import tokenize
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor

from gradguard.config import Config, load_config
from gradguard.files import iter_python_files
from gradguard.model import Finding

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
        line = e.lineno or 1
        col = e.offset or 1
        msg = e.msg or "invalid syntax"
        return None, _gg000(path, line, col, f"could not parse: {msg} (gradguard skips this file until it parses)")
    except (RecursionError, MemoryError):
        return None, _gg000(path, 1, 1, "could not parse: the file is too deeply nested for the Python parser")
    except ValueError as e:  # e.g. source with NUL bytes
        return None, _gg000(path, 1, 1, f"could not parse: {e}")


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
                 fixes: bool = True) -> list[Finding]:
    """Analyze one file's text. Never raises for bad input: problems become a GG000 finding."""
    config = config or Config()
    if isinstance(source, bytes):
        if len(source) > MAX_BYTES:
            return [_gg000(path, 1, 1, f"skipped: file is larger than {MAX_BYTES // 1_000_000} MB")]
        try:
            source = decode_source(source)
        except (UnicodeDecodeError, LookupError) as e:
            return [_gg000(path, 1, 1, f"could not decode the file as Python source ({e.__class__.__name__}: {e.reason if isinstance(e, UnicodeDecodeError) else e})")]
    tree, err = parse(source, path)
    if tree is None:
        assert err is not None
        return [err] if config.enabled("GG000", path) else []
    from gradguard.analysis import analyze
    from gradguard.rules import findings_from_hazards

    lines = source.splitlines()
    try:
        hazards = analyze(tree, source, path)
    except RecursionError:
        return [_gg000(path, 1, 1, "skipped: the file is too deeply nested to analyze")]
    found = [f for f in findings_from_hazards(hazards, path, lines)
             if config.enabled(f.code, path) and not suppressed(f, lines)]
    for f in found:
        f.severity = config.severity_of(f.code, f.severity)
    if fixes and found:
        from gradguard.fixes import attach_fixes
        attach_fixes(found, source)
    found.sort(key=Finding.sort_key)
    return found


def check_file(path: str, config: Config | None = None, fixes: bool = True) -> list[Finding]:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        return [_gg000(path, 1, 1, f"could not read: {e.strerror or e}")]
    return check_source(data, path, config, fixes=fixes)


def _check_many(args: tuple[list[str], Config, bool]) -> list[Finding]:
    paths, config, fixes = args
    out: list[Finding] = []
    for p in paths:
        out.extend(check_file(p, config, fixes))
    return out


def check_paths(paths: Iterable[str], config: Config | None = None, jobs: int | None = None,
                fixes: bool = True) -> list[Finding]:
    """Check files and directories; files are spread over ``jobs`` processes (default: all cores)."""
    paths = list(paths)
    config = config or load_config(paths[0] if paths else ".")
    files = list(iter_python_files(paths, config))
    jobs = jobs or os.cpu_count() or 1
    results: list[Finding] = []
    if jobs <= 1 or len(files) < 8:
        results = _check_many((files, config, fixes))
    else:
        # Balance by size: big files first, dealt round-robin into ``jobs * 4`` chunks.
        sized = sorted(files, key=lambda p: -_size(p))
        nchunks = min(len(files), jobs * 4)
        chunks: list[list[str]] = [[] for _ in range(nchunks)]
        for i, p in enumerate(sized):
            chunks[i % nchunks].append(p)
        ctx = None
        if sys.platform.startswith("linux"):
            import multiprocessing
            ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as ex:
            for part in ex.map(_check_many, [(c, config, fixes) for c in chunks]):
                results.extend(part)
    results.sort(key=Finding.sort_key)
    return results


def _size(p: str) -> int:
    try:
        return os.path.getsize(p)
    except OSError:
        return 0
