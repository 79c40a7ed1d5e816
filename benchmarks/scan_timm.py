"""What does gradguard say about real model-zoo code? Prints figures; asserts nothing.

    .venv/bin/python benchmarks/scan_timm.py [--path DIR] [--select CODES]

Runs `gradguard check --format json` over timm's model code (`pip install --no-deps timm`; the package's
`models/` and `layers/` by default), then prints findings per 10k lines grouped by code, and every finding as
`file:line: CODE message` (plus the line(s) it relates to), so false alarms can be studied: timm trains fine,
so nearly every finding here is one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path


def timm_dir() -> Path:
    spec = importlib.util.find_spec("timm")  # locate without importing (timm imports torch)
    if spec is None or spec.origin is None:
        sys.exit("timm is not installed: make setup (it runs pip install --no-deps timm==1.0.31)")
    return Path(spec.origin).parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", action="append", help="directories or files to scan (default: timm/models, timm/layers)")
    ap.add_argument("--select", help="passed to gradguard check --select")
    args = ap.parse_args()

    base = timm_dir()
    roots = [Path(p) for p in args.path] if args.path else [base / "models", base / "layers"]
    # Explicit file names: timm sits under .venv/, which the directory walk excludes by default.
    files = sorted({f for r in roots for f in ([r] if r.is_file() else r.rglob("*.py"))})
    lines = sum(len(f.read_text(encoding="utf-8", errors="replace").splitlines()) for f in files)
    gg = shutil.which("gradguard", path=str(Path(sys.executable).parent)) or "gradguard"
    cmd = [gg, "check", "--format", "json", "--exit-zero", "--no-fixes"]
    if args.select:
        cmd += ["--select", args.select]
    t = time.perf_counter()
    proc = subprocess.run([*cmd, *map(str, files)], capture_output=True, text=True)
    secs = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"gradguard check failed (exit {proc.returncode}): {proc.stderr[-1000:]}")
    findings = json.loads(proc.stdout or "[]")

    per_code = Counter(f["code"] for f in findings)
    per_file = Counter(f["path"] for f in findings)
    print(f"timm {version('timm')}: {len(files)} files, {lines:,} lines, scanned in {secs:.1f} s "
          f"({lines / secs:,.0f} lines/s, all cores)")
    print(f"findings: {len(findings)} = {len(findings) / lines * 10_000:.2f} per 10k lines")
    for code, n in sorted(per_code.items()):
        print(f"  {code}: {n:4d}  ({n / lines * 10_000:.2f} per 10k lines)")
    if per_file:
        print("files with most findings: " + ", ".join(f"{Path(p).name} ({n})" for p, n in per_file.most_common(8)))
    print()
    for f in sorted(findings, key=lambda f: (f["code"], f["path"], f["line"])):
        rel = Path(f["path"]).resolve()
        try:
            shown = rel.relative_to(base.parent)
        except ValueError:
            shown = rel
        print(f"{shown}:{f['line']}:{f['column']}: {f['code']} {f['message']}")
        for r in f.get("related") or []:
            print(f"    line {r['line']}: {r['message']}")


if __name__ == "__main__":
    main()
