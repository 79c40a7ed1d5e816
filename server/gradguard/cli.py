"""Command line: ``gradguard check|run|lsp|knowledge|rule``."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from typing import Any

from gradguard import __version__


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gradguard", description=__doc__)
    p.add_argument("--version", action="version", version=f"gradguard {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("check", help="find in-place hazards that break backward() (.py files and notebooks)")
    c.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    c.add_argument("--format", "--output-format", dest="format", choices=["text", "json", "sarif", "github"],
                   default="text", help="output format (--output-format is the same option, as in ruff)")
    c.add_argument("--select", help="comma-separated codes or prefixes to enable (default: all)")
    c.add_argument("--extend-select", metavar="CODES",
                   help="comma-separated codes or prefixes to enable on top of --select/[tool.gradguard] select "
                        "(e.g. GG001: unused noqa comments)")
    c.add_argument("--ignore", help="comma-separated codes or prefixes to disable")
    c.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    c.add_argument("--exit-non-zero-on-fix", action="store_true",
                   help="with --fix: exit 1 when something was fixed, even if nothing is left")
    c.add_argument("--fix", action="store_true", help="apply the safe preferred fixes")
    c.add_argument("--unsafe-fixes", action="store_true", help="with --fix/--diff: also apply unsafe fixes")
    c.add_argument("--diff", action="store_true", help="print the fixes as a unified diff, write nothing")
    c.add_argument("--show-fixes", action="store_true",
                   help="list what --fix fixed; without --fix, show each finding's preferred fix")
    c.add_argument("--statistics", action="store_true", help="count the findings per rule instead of listing them")
    c.add_argument("-q", "--quiet", action="store_true", help="print the findings only (no summary lines)")
    c.add_argument("--jobs", "-j", type=int, default=0, help="worker processes (default: all cores)")
    c.add_argument("--no-fixes", action="store_true", help="do not compute fixes (faster; JSON has no fixes)")
    c.add_argument("--python", metavar="PATH",
                   help="the interpreter whose site-packages imports are followed into (default: [tool.gradguard] "
                        "python, else the one running gradguard); asked for its paths with -I -S, nothing runs")
    c.add_argument("--no-cache", action="store_true",
                   help="do not read or write results in .gradguard_cache/ at the workspace root")
    c.add_argument("--no-project", action="store_true",
                   help="check each file on its own, without following imports into other files")

    r = sub.add_parser("run", help="run a script under the runtime doctor", add_help=False)
    r.add_argument("rest", nargs=argparse.REMAINDER)

    lsp = sub.add_parser("lsp", help="start the language server", add_help=False)
    lsp.add_argument("rest", nargs=argparse.REMAINDER)

    k = sub.add_parser("knowledge", help="the table of what torch saves for backward")
    k.add_argument("--regenerate", action="store_true",
                   help="rebuild the table from the installed torch into the user's cache (the analysis then "
                        "uses it with this torch)")
    k.add_argument("--output", help="with --regenerate/--check: this table file instead of the cached one")
    k.add_argument("--check", action="store_true", help="exit 1 when the table in use differs from the installed torch")
    k.add_argument("--device", default="cpu", choices=["cpu", "cuda", "all"],
                   help="with --regenerate/--check: also probe on CUDA (cuda, all), which needs a GPU")
    k.add_argument("names", nargs="*", help="show what these callables save")

    ru = sub.add_parser("rule", help="explain a rule")
    ru.add_argument("code", nargs="?", help="e.g. GG101 (omit to list all rules)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The ``gradguard`` command. Output into a pipe that closed early (``gradguard rule GG000 | head``) ends it
    quietly, the way the Python docs' note on SIGPIPE recommends: no BrokenPipeError traceback."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # inside the try: a broken pipe often shows only when the buffer is flushed
        return code
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at devnull so that this fails no more.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:
        parser.print_help()
        return 2
    # Subcommands that own their argument parsing.
    if argv[0] == "run":
        from gradguard.runtime.cli import main as run_main
        return run_main(argv[1:])
    if argv[0] == "lsp":
        from gradguard.lsp.server import main as lsp_main
        return lsp_main(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "check":
        return cmd_check(args)
    if args.command == "knowledge":
        return cmd_knowledge(args)
    if args.command == "rule":
        return cmd_rule(args)
    parser.print_help()
    return 2


def cmd_check(args: argparse.Namespace) -> int:
    import os
    from collections import Counter

    from gradguard.api import check_paths, fix_file, project_for
    from gradguard.config import ConfigError, check_cli_codes, load_config
    from gradguard.files import NOTEBOOK_SUFFIX, iter_python_files
    from gradguard.model import source_lines_keepends
    from gradguard.notebook import check_notebook
    from gradguard.output import FORMATS, display_path, statistics
    from gradguard.output import text as text_output

    for p in args.paths:
        if not os.path.exists(p):
            print(f"gradguard: error: {p}: no such file or directory", file=sys.stderr)
            return 2
    try:
        select = check_cli_codes("--select", args.select)
        ignore = check_cli_codes("--ignore", args.ignore)
        extend = check_cli_codes("--extend-select", args.extend_select)
        config = load_config(args.paths[0]).with_overrides(select=select, ignore=ignore)
        if extend:
            config = config.with_overrides(select=(*config.select, *extend))
    except ConfigError as e:
        # A bad configuration is a usage error (exit 2, like ruff), never "findings" (1) nor a silent no-op.
        if e.source:
            e.source = display_path(e.source)
        print(f"gradguard: error: {e}", file=sys.stderr)
        return 2
    want_fixes = not args.no_fixes or args.fix or args.diff or args.show_fixes
    jobs = args.jobs or None
    if args.python:
        from gradguard.project.search_path import interpreter_paths

        probe = interpreter_paths(args.python)
        if probe.error:
            print(f"gradguard: error: --python: {probe.error}", file=sys.stderr)
            return 2
    files = list(iter_python_files(args.paths, config, notebooks=True))
    notebooks = [f for f in files if f.endswith(NOTEBOOK_SUFFIX)]
    py_paths = [p for p in args.paths if os.path.isdir(p) or not p.endswith(NOTEBOOK_SUFFIX)]
    project = None if args.no_project or not py_paths else project_for(py_paths, config, args.python)
    use_cache = project is not None and not args.no_cache

    def check_all(fixes: bool) -> list:
        found = check_paths(py_paths, config, jobs=jobs, fixes=fixes, project=project or False,
                            cache=use_cache) if py_paths else []
        for nb in notebooks:
            found.extend(check_notebook(nb, config, fixes=fixes))
        found.sort(key=lambda f: f.sort_key())
        return found

    findings = check_all(want_fixes)
    changed = 0
    fixed_codes: dict[str, Counter[str]] = {}
    if args.fix or args.diff:
        for path, fs in _by_path(findings).items():
            if path.endswith(NOTEBOOK_SUFFIX):
                if any(x.edits for f in fs for x in f.fixes if x.kind != "noqa"):
                    print(f"gradguard: {display_path(path)}: fixes are not applied to notebooks (use the quick fixes "
                          "in the editor)", file=sys.stderr)
                continue
            src = _read_source(path)
            if src is None:
                continue
            old, encoding = src
            outcome = fix_file(path, old, fs, config, unsafe=args.unsafe_fixes, project=project)
            if not outcome.settled:
                print(f"gradguard: {display_path(path)}: the fixes did not settle (each round found more to fix); "
                      "nothing applied", file=sys.stderr)
            new = outcome.text
            if new == old:
                continue
            changed += 1
            fixed_codes[path] = Counter(f.code for f in fs)
            if args.diff:
                sys.stdout.writelines(difflib.unified_diff(
                    source_lines_keepends(old), source_lines_keepends(new), fromfile=f"a/{path}",
                    tofile=f"b/{path}"))
            else:
                with open(path, "wb") as fh:
                    fh.write(new.encode(encoding))
                if project is not None:
                    project.invalidate([path])
        if args.diff:
            return 1 if changed and not args.exit_zero else 0
        # Re-check what was written: report what is left.
        findings = check_all(not args.no_fixes or args.show_fixes)
        for path, fs in _by_path(findings).items():
            if path in fixed_codes:
                fixed_codes[path] -= Counter(f.code for f in fs)
        if changed:
            print(f"gradguard: fixed {changed} file{'s' if changed != 1 else ''}", file=sys.stderr)
    if args.statistics:
        out = statistics(findings, as_json=args.format == "json")
        if out:
            print(out)
    elif args.format == "text":
        out = text_output(findings, fixable=_fixable(findings, config, project) if want_fixes else 0,
                          summary=not args.quiet, show_fixes=args.show_fixes and not args.fix)
        if out:
            print(out)
    else:
        out = FORMATS[args.format](findings)
        if out or args.format in ("json", "sarif"):
            print(out)
    if args.format == "text" and not args.quiet:
        if args.show_fixes and args.fix:
            _print_fixed(fixed_codes)
        if not files:
            print(f"gradguard: warning: no Python files or notebooks found under {', '.join(args.paths)}",
                  file=sys.stderr)
        if not findings:
            n = len(files)
            print(f"All checks passed! ({n} file{'s' if n != 1 else ''} checked)")
    if args.exit_non_zero_on_fix and changed:
        return 1
    return 1 if findings and not args.exit_zero else 0


def _print_fixed(fixed_codes: dict[str, Any]) -> None:
    from gradguard.output import display_path, rule_name

    total = sum(sum(c.values()) for c in fixed_codes.values())
    if not total:
        return
    print(f"Fixed {total} problem{'s' if total != 1 else ''}:")
    for path, counts in fixed_codes.items():
        if not +counts:
            continue
        print(f"- {display_path(path)}:")
        for code, n in sorted((+counts).items()):
            print(f"    {n} x {code} ({rule_name(code)})")


def _by_path(findings: list) -> dict[str, list]:
    by_path: dict[str, list] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    return dict(sorted(by_path.items()))


def _read_source(path: str) -> tuple[str, str] | None:
    """(text, encoding to write it back with) as the analyzer read it (PEP 263 cookie, BOM kept on write)."""
    import io
    import tokenize

    try:
        with open(path, "rb") as fh:
            data = fh.read()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
        return None
    return text.removeprefix("\ufeff"), encoding


def _fixable(findings: list, config: object, project: object) -> int:
    """How many findings ``--fix`` would really remove (verified by re-checking, as ``--fix`` does)."""
    from gradguard.api import fix_file
    from gradguard.fixes import applicable_fix

    n = 0
    for path, fs in _by_path(findings).items():
        if path.endswith(".ipynb") or not any(applicable_fix(f) for f in fs):
            continue
        src = _read_source(path)
        if src is not None:
            n += fix_file(path, src[0], fs, config, project=project).fixed  # type: ignore[arg-type]
    return n


def cmd_knowledge(args: argparse.Namespace) -> int:
    if args.regenerate or args.check:
        from gradguard.knowledge.probe import main as probe_main

        return probe_main(output=args.output, check=args.check, device=args.device)
    from gradguard.knowledge import TABLE_PATH, installed_torch_version, load

    kb = load()
    if not args.names:
        where = "packaged" if kb.path == TABLE_PATH else f"regenerated, {kb.path}"
        cuda = (kb.devices.get("cuda") or {}).get("source", "none")
        print(f"{len(kb.names())} callables, generated from torch {kb.torch_version} ({where}); CUDA facts: {cuda}")
        installed = installed_torch_version()
        if installed and installed != kb.torch_version:
            print(f"note: torch {installed} is installed; `gradguard knowledge --regenerate` builds a table for it")
        return 0
    from gradguard.knowledge.describe import describe

    rc = 0
    for n in args.names:
        text = describe(kb, n)
        if text is None:
            print(f"{n}: not in the table", file=sys.stderr)
            rc = 1
        else:
            print(text)
    return rc


def cmd_rule(args: argparse.Namespace) -> int:
    from gradguard.rules import ALL_RULES
    from gradguard.rules.meta import META

    if not args.code:
        for m in META.values():
            print(f"{m.code}  {m.name:32s} {m.summary}")
        for r in ALL_RULES:
            print(f"{r.code}  {r.name:32s} {r.summary}")
        return 0
    for r in ALL_RULES:
        if r.code == args.code.upper():
            print(r.markdown())
            return 0
    meta = META.get(args.code.upper())
    if meta is not None:
        print(meta.markdown())
        return 0
    print(f"gradguard: no rule {args.code}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
