"""``gradguard run [--format text|json] [--timeout S] [--python PATH] (SCRIPT | -m MODULE) [ARGS...]``."""

from __future__ import annotations

import argparse
import json
import sys

USAGE = "gradguard run [--format text|json] [--timeout S] [--python PATH] [--check-nan] (SCRIPT | -m MODULE) [ARGS...]"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gradguard run", usage=USAGE,
        description="Run a script under the runtime doctor: anomaly mode plus a tracer that names the line that "
                    "saved a tensor for backward and the line that modified it in place.",
    )
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: the script's output, then the explanation on stderr; json: the report on stdout "
                        "(the script's own stdout goes to stderr)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="stop the script after S seconds")
    p.add_argument("--python", default=None, metavar="PATH", help="interpreter to run the script with "
                                                                   "(default: this one; it needs torch)")
    p.add_argument("--check-nan", action="store_true", help="anomaly mode also checks backward for NaN")
    p.add_argument("--no-trace", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("-m", dest="module", default=None, metavar="MODULE", help="run a module, like python -m")
    return p


def _split(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """Options before the script belong to gradguard; everything from the script on belongs to the script."""
    opts: list[str] = []
    i = 0
    takes_value = {"--format", "--timeout", "--python"}
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a == "-m":
            if i + 1 >= len(argv):
                opts.append(a)
                return opts, None, []
            opts += [a, argv[i + 1]]
            return opts, None, argv[i + 2:]
        if a.startswith("-") and a != "-":
            opts.append(a)
            if a in takes_value and i + 1 < len(argv):
                opts.append(argv[i + 1])
                i += 1
            i += 1
            continue
        break
    if i < len(argv):
        return opts, argv[i], argv[i + 1:]
    return opts, None, []


def main(argv: list[str]) -> int:
    opts, script, rest = _split(list(argv))
    p = _parser()
    ns = p.parse_args(opts)
    if script is None and ns.module is None:
        p.print_usage(sys.stderr)
        print("gradguard run: error: give a script to run (or -m MODULE)", file=sys.stderr)
        return 2
    if ns.timeout is not None and ns.timeout <= 0:
        print("gradguard run: error: --timeout must be positive", file=sys.stderr)
        return 2
    if script is not None:
        import os

        if not os.path.exists(script):
            print(f"gradguard run: error: {script}: no such file", file=sys.stderr)
            return 2
    from gradguard.runtime.api import run_script
    from gradguard.runtime.report import format_text

    sys.stdout.flush()
    report = run_script(
        ns.module or script or "", rest, python=ns.python, timeout=ns.timeout, module=ns.module is not None,
        check_nan=ns.check_nan, trace=not ns.no_trace, output="stderr" if ns.format == "json" else "inherit",
    )
    if ns.format == "json":
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        text = format_text(report)
        if text:
            sys.stderr.write("\n" + text + "\n")
            sys.stderr.flush()
    err = report.get("error") or {}
    if err.get("type") == "Timeout":
        return 124
    if err.get("type") == "KeyboardInterrupt":
        return 130
    if err.get("type") == "LaunchError":
        return 2
    code = report.get("exit_code")
    if isinstance(code, int):
        return code if code >= 0 else 128 - code
    return 1
