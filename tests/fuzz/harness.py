"""The properties every input must keep, and the inputs: mutants of real files and generated programs.

Properties (:func:`check_properties`), for any bytes or text:
  * no exception escapes ``api.check_source``;
  * every finding (and its related locations, and its fixes' edits) lies inside the file;
  * the check finishes within a CPU budget (a hang is a CPU-time alarm, see :func:`cpu_limit`);
  * when the input parses, every fix leaves a file that still parses.

``python tests/fuzz/sweep.py`` runs the long crash sweep (model zoos and their mutants); `make fuzz` runs it and
the long hypothesis runs.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import random
import signal
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from gradguard.api import check_source, decode_source
from gradguard.fixes import apply_edits
from gradguard.model import Finding, source_lines

ROOT = Path(__file__).resolve().parents[2]


class CpuBudgetExceeded(Exception):
    pass


@contextlib.contextmanager
def cpu_limit(seconds: float) -> Iterator[None]:
    """Raise CpuBudgetExceeded in the main thread once this process has used ``seconds`` more CPU."""
    if not hasattr(signal, "setitimer") or seconds <= 0:
        yield
        return

    def alarm(signum: int, frame: object) -> None:
        raise CpuBudgetExceeded(f"over {seconds:.0f} s of CPU")

    old = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def budget_for(data: bytes | str) -> float:
    """CPU seconds a file may take: 5 s, plus 2 s per 1,000 lines (timm checks at ~10,000 lines/s)."""
    n = data.count(b"\n" if isinstance(data, bytes) else "\n")
    return 5.0 + 2.0 * n / 1000


def _text_of(data: bytes | str) -> str | None:
    if isinstance(data, str):
        return data
    try:
        return decode_source(data)
    except (UnicodeDecodeError, LookupError):
        return None


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _inside(lines: list[str], line: int, col: int, allow_eof: bool = False) -> bool:
    n = len(lines)
    if allow_eof and line == n + 1:
        return col >= 1
    if not 1 <= line <= n:
        return False
    return 1 <= col <= len(lines[line - 1]) + 1


def check_properties(data: bytes | str, name: str = "fuzz.py", budget: float | None = None) -> list[str]:
    """The properties' violations for one input (empty: all hold)."""
    problems: list[str] = []
    budget = budget_for(data) if budget is None else budget
    t0 = time.process_time()
    try:
        with cpu_limit(budget * 2):  # the hard stop; the budget itself is checked below
            findings: list[Finding] = check_source(data, name)
    except CpuBudgetExceeded as e:
        return [f"hang: {e}"]
    except Exception:
        return ["crash: " + traceback.format_exc(limit=-6)]
    spent = time.process_time() - t0
    if spent > budget:
        problems.append(f"slow: {spent:.1f} s of CPU (budget {budget:.1f} s)")
    text = _text_of(data)
    if text is None:
        if any(f.code != "GG000" for f in findings):
            problems.append("findings other than GG000 in a file that does not decode")
        return problems
    lines = source_lines(text)
    parsed = _parses(text)
    for f in findings:
        where = f"{f.code} at {f.line}:{f.column}-{f.end_line}:{f.end_column}"
        gg000 = f.code == "GG000"
        if not _inside(lines, f.line, f.column, allow_eof=gg000) or \
                (not gg000 and not _inside(lines, f.end_line, f.end_column)) or \
                (f.end_line, f.end_column) < (f.line, f.column):
            problems.append(f"outside the file ({len(lines)} lines): {where}")
        for r in f.related:
            if r.path in ("", name) and not _inside(lines, r.line, r.column):
                problems.append(f"related outside the file: {where} -> {r.line}:{r.column}")
        for fix in f.fixes:
            for e in fix.edits:
                if not (_inside(lines, e.line, e.column, allow_eof=True)
                        and _inside(lines, e.end_line, e.end_column, allow_eof=True)):
                    problems.append(f"fix edit outside the file: {where}: {fix.title}: {e}")
            if parsed and not _parses(apply_edits(text, fix.edits)):
                problems.append(f"fix does not parse: {where}: {fix.title}")
    if parsed and any(f.code == "GG000" and "could not parse" in f.message for f in findings):
        problems.append("GG000 'could not parse' for a file that parses")
    return problems


# ------------------------------------------------------------------------------------------------- mutants
MUTATIONS = ("none", "truncate", "delete_lines", "nest_blocks", "nest_parens", "nul", "invalid_utf8", "crlf", "cr_only",
             "bom", "surrogate", "line_separators", "swap_lines", "flip_bytes", "tabs", "duplicate_block")


def mutate(data: bytes, kind: str, rnd: random.Random) -> bytes | str:
    """One mutant of ``data`` (bytes of a real source file). ``surrogate`` gives text (lone surrogates cannot be
    encoded); everything else gives bytes."""
    lines = data.split(b"\n")
    if kind == "none":  # the file itself: the crash sweep over the zoo
        return data
    if kind == "truncate":
        return data[:rnd.randrange(len(data) + 1)]
    if kind == "delete_lines":
        for _ in range(rnd.randint(1, 5)):
            if lines:
                del lines[rnd.randrange(len(lines))]
        return b"\n".join(lines)
    if kind == "nest_blocks":
        depth = rnd.choice([10, 40, 99, 101, 200])
        body = [b"    " * depth + ln if ln.strip() else ln for ln in lines]
        head = [b"    " * i + b"if True:" for i in range(depth)]
        return b"\n".join(head + body)
    if kind == "nest_parens":
        depth = rnd.choice([50, 180, 250, 1000, 5000])
        at = rnd.randrange(len(lines) + 1)
        expr = rnd.choice([b"(" * depth + b"1" + b")" * depth, b"[" * depth + b"]" * depth,
                           b"x = " + b"f(" * depth + b"y" + b")" * depth, b"x = 1" + b" + 1" * depth * 4,
                           b"x = " + b"-" * depth + b"1", b"x = " + b"{" * depth + b"}" * depth])
        lines.insert(at, expr)
        return b"\n".join(lines)
    if kind == "nul":
        out = bytearray(data)
        for _ in range(rnd.randint(1, 3)):
            out.insert(rnd.randrange(len(out) + 1), 0)
        return bytes(out)
    if kind == "invalid_utf8":
        out = bytearray(data)
        out[rnd.randrange(len(out) + 1):0] = rnd.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])
        return bytes(out)
    if kind == "crlf":
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    if kind == "cr_only":
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "surrogate":
        text = data.decode("utf-8", "replace")
        at = rnd.randrange(len(text) + 1)
        return text[:at] + rnd.choice(["\udcff", "\ud800", "'\udfff'", "# \udc80\n"]) + text[at:]
    if kind == "line_separators":
        text = data.decode("utf-8", "replace")
        tl = text.split("\n")
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(tl))
            tl[i] = tl[i] + rnd.choice(["  # \u2028 sep", "  # \x0c", "  # \x85", "  # \x1c\x1d\x1e", "  # \u2029"])
        return "\n".join(tl).encode("utf-8")
    if kind == "swap_lines":
        if len(lines) > 2:
            i, j = rnd.randrange(len(lines)), rnd.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    if kind == "flip_bytes":
        out = bytearray(data)
        for _ in range(rnd.randint(1, 8)):
            if out:
                out[rnd.randrange(len(out))] = rnd.randrange(256)
        return bytes(out)
    if kind == "tabs":
        return data.replace(b"    ", b"\t", rnd.randint(1, 50))
    if kind == "duplicate_block":
        if len(lines) > 4:
            i = rnd.randrange(len(lines) - 2)
            j = min(len(lines), i + rnd.randint(2, 40))
            lines[j:j] = lines[i:j]
        return b"\n".join(lines)
    raise ValueError(kind)


def timm_files() -> list[Path]:
    spec = importlib.util.find_spec("timm")  # without importing timm (it imports torch)
    if spec is None or spec.origin is None:
        return []
    return sorted(Path(spec.origin).parent.rglob("*.py"))


def zoo_files() -> list[Path]:
    """Real model code: timm, the fixtures, and (when ../shared is there) the corpus and the wild cases."""
    from shared_data import SHARED

    out = [*timm_files(), *sorted((ROOT / "tests" / "fixtures").rglob("*.py"))]
    for sub in ("corpus/cases", "wild"):
        d = SHARED / sub
        if d.is_dir():
            out.extend(sorted(d.rglob("*.py")))
    return out
