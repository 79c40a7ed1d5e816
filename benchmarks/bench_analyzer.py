"""How fast is the analyzer? Prints figures; asserts nothing.

    .venv/bin/python benchmarks/bench_analyzer.py [--quick] [--no-torchfix] [--profile-top N]

Over the same files in one run (timm's model code from `pip install --no-deps timm`, plus a generated
5,000-line model file), lines/second for:
  - `ast.parse` and `libcst.parse_module` (the floors every Python linter sits on),
  - gradguard `api.check_source` in one process (with and without fixes),
  - `gradguard check` over the tree with all cores (a subprocess, start-up included),
  - TorchFix 0.7.0 (its flake8 checker, in one process). TorchFix needs libcst < 1.6 while the dev venv pins
    libcst 1.9, so it cannot live in requirements/*.txt (make setup installs those with -c constraints.txt);
    this script installs it with its own libcst 1.5.0, --no-deps (no torch), into .venv/bench-torchfix and
    runs it in a subprocess.
Then the median time of analysing one ~3,000-line file in process, with and without fixes, and where the
time goes (cProfile, top functions by own time).
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import importlib.util
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TORCHFIX_REQS = ("torchfix==0.7.0", "libcst==1.5.0")
TORCHFIX_DIR = ROOT / ".venv" / "bench-torchfix"
ONE_FILE = "models/efficientnet.py"  # 3,005 lines in timm 1.0.31

Files = list[tuple[str, str]]  # (path, source)


def timm_dir() -> Path:
    spec = importlib.util.find_spec("timm")  # finds the package without importing it (timm imports torch)
    if spec is None or spec.origin is None:
        sys.exit("timm is not installed: make setup (it runs pip install --no-deps timm==1.0.31)")
    return Path(spec.origin).parent


def generate_model_file(min_lines: int = 5000) -> str:
    """Many nn.Module classes: conv/bn/relu stacks, residual adds, heads; plausible model-zoo code."""
    parts = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", ""]
    i = 0
    while sum(p.count("\n") + 1 for p in parts) < min_lines:
        act = ("nn.ReLU(inplace=True)", "nn.SiLU(inplace=True)", "nn.GELU()", "nn.Hardswish(inplace=True)")[i % 4]
        parts.append(textwrap.dedent(f"""\
            class Block{i}(nn.Module):
                \"\"\"Residual block {i}: conv -> bn -> act, twice, with an optional projection.\"\"\"

                def __init__(self, cin, cout, stride=1, drop=0.1):
                    super().__init__()
                    self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
                    self.bn1 = nn.BatchNorm2d(cout)
                    self.act1 = {act}
                    self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
                    self.bn2 = nn.BatchNorm2d(cout)
                    self.act2 = {act}
                    self.stack = nn.Sequential(
                        nn.Conv2d(cout, cout, 1, bias=False),
                        nn.BatchNorm2d(cout),
                        {act},
                        nn.Conv2d(cout, cout, 3, padding=1, groups=cout, bias=False),
                        nn.BatchNorm2d(cout),
                    )
                    self.proj = None
                    if stride != 1 or cin != cout:
                        self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                    self.drop = drop

                def forward(self, x):
                    shortcut = x if self.proj is None else self.proj(x)
                    out = self.act1(self.bn1(self.conv1(x)))
                    out = self.bn2(self.conv2(out))
                    out = out + self.stack(out)
                    out += shortcut
                    out = self.act2(out)
                    if self.training and self.drop > 0:
                        out = F.dropout(out, p=self.drop, training=self.training)
                    return out


            class Head{i}(nn.Module):
                def __init__(self, dim, num_classes=1000):
                    super().__init__()
                    self.norm = nn.LayerNorm(dim)
                    self.fc = nn.Linear(dim, num_classes)

                def forward(self, x):
                    x = x.mean((2, 3))
                    x = self.norm(x)
                    logits = self.fc(x)
                    return logits.softmax(-1)


            def stage{i}(cin, cout, depth):
                blocks = [Block{i}(cin, cout, stride=2)]
                for _ in range(depth - 1):
                    blocks.append(Block{i}(cout, cout))
                return nn.Sequential(*blocks)


            """))
        i += 1
    return "\n".join(parts)


def count_lines(files: Files) -> int:
    return sum(len(src.splitlines()) for _, src in files)


def rate(lines: int, secs: float, cpu: float | None = None) -> str:
    """Wall-clock lines/s; with ``cpu``, also lines per CPU-second (steadier on a busy machine)."""
    out = f"{lines / secs:>10,.0f} lines/s  ({secs:7.2f} s)"
    if cpu:
        out += f"  {lines / cpu:>9,.0f} lines/cpu-s"
    return out


def timed(fn, files: Files) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) to run ``fn(source, path)`` over every file."""
    t, c = time.perf_counter(), time.process_time()
    for path, src in files:
        fn(src, path)
    return time.perf_counter() - t, time.process_time() - c


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def ensure_torchfix() -> bool:
    if (TORCHFIX_DIR / "torchfix").is_dir():
        return True
    print(f"  installing {' '.join(TORCHFIX_REQS)} (--no-deps) into {TORCHFIX_DIR} ...", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(TORCHFIX_DIR),
                           *TORCHFIX_REQS], capture_output=True, text=True)
    if proc.returncode != 0:
        print("  could not install TorchFix:", proc.stderr.strip().splitlines()[-1:])
        return False
    return True


TORCHFIX_RUNNER = r"""
import json, sys, time
from torchfix.torchfix import TorchChecker
paths = json.load(sys.stdin)
sources = [open(p, encoding="utf-8").read() for p in paths]
t, c = time.perf_counter(), time.process_time()
found = 0
for src in sources:
    found += sum(1 for _ in TorchChecker(None, src.splitlines(True)).run())
print(json.dumps({"seconds": time.perf_counter() - t, "cpu": time.process_time() - c, "violations": found}))
"""


def bench_torchfix(files: Files) -> dict | None:
    if not ensure_torchfix():
        return None
    env = dict(os.environ, PYTHONPATH=str(TORCHFIX_DIR))
    proc = subprocess.run([sys.executable, "-c", TORCHFIX_RUNNER], input=json.dumps([p for p, _ in files]),
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print("  TorchFix failed:", proc.stderr.strip()[-500:])
        return None
    return json.loads(proc.stdout)


def project_figures(api: Any, tree: Path, lines: int, files: Files) -> None:
    """Whole-project mode in one process (imports followed across the package and into site-packages): a cold
    result cache, then a warm one, each next to ast.parse over the same files measured right before it."""
    from gradguard.config import Config

    print()
    print("whole project, one process (check_paths, imports followed), result cache in the tree")
    for label in ("cold cache", "warm cache"):
        t_parse, _ = timed(lambda s, p: ast.parse(s, p), files)
        config = Config()
        t, c = time.perf_counter(), time.process_time()
        found = api.check_paths([str(tree)], config, jobs=1, fixes=False, project=True, cache=True)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        print(f"  {label:<10} {rate(lines, dt, dc)}  = {dt / t_parse:5.2f}x ast.parse ({t_parse:.2f} s, same run)"
              f"  [{len(found)} findings]")
    shutil.rmtree(tree / ".gradguard_cache", ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="timm/layers only (14k lines) instead of all of timm")
    ap.add_argument("--no-torchfix", action="store_true")
    ap.add_argument("--repeat", type=int, default=9, help="runs for the one-file median")
    ap.add_argument("--profile-top", type=int, default=15)
    args = ap.parse_args()

    import libcst
    from gradguard import api

    src_root = timm_dir()
    with tempfile.TemporaryDirectory(prefix="gg-bench-") as tmp:
        # A copy outside the repository: the timm in .venv sits under .gitignore'd / default-excluded dirs.
        tree = Path(tmp) / "tree"
        shutil.copytree(src_root / "layers" if args.quick else src_root, tree / "timm",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (tree / "generated_models.py").write_text(generate_model_file(), encoding="utf-8")
        files: Files = [(str(p), p.read_text(encoding="utf-8")) for p in sorted(tree.rglob("*.py"))]
        lines = count_lines(files)
        gen_lines = len((tree / "generated_models.py").read_text().splitlines())
        print(f"files: {len(files)} ({lines:,} lines: timm {version('timm')} "
              f"{'layers' if args.quick else 'package'} + generated model file of {gen_lines:,} lines); "
              f"{os.cpu_count()} cores; python {sys.version.split()[0]}")
        print()
        print("throughput over the same files")
        print(f"  ast.parse                          {rate(lines, *timed(lambda s, p: ast.parse(s, p), files))}")
        print(f"  libcst.parse_module ({version('libcst')})        "
              f"{rate(lines, *timed(lambda s, p: libcst.parse_module(s), files))}")
        t_fix, c_fix = timed(lambda s, p: api.check_source(s, p), files)
        print(f"  gradguard check_source, 1 process  {rate(lines, t_fix, c_fix)}")
        counts: list[int] = []
        t_nofix, c_nofix = timed(lambda s, p: counts.append(len(api.check_source(s, p, fixes=False))), files)
        print(f"    (fixes=False)                    {rate(lines, t_nofix, c_nofix)}")
        gg = shutil.which("gradguard", path=str(Path(sys.executable).parent)) or "gradguard"
        t, c = time.perf_counter(), children_cpu()
        proc = subprocess.run([gg, "check", "--format", "json", "--exit-zero", str(tree)], capture_output=True,
                              text=True)
        t_cli, c_cli = time.perf_counter() - t, children_cpu() - c
        n_cli = len(json.loads(proc.stdout)) if proc.returncode == 0 and proc.stdout.strip() else -1
        print(f"  gradguard check, all cores (CLI)   {rate(lines, t_cli, c_cli)}  [{n_cli} findings, exit {proc.returncode}]")
        findings = sum(counts)
        if not args.no_torchfix:
            tf = bench_torchfix(files)
            if tf:
                print(f"  TorchFix 0.7.0 (flake8 checker)    {rate(lines, tf['seconds'], tf['cpu'])}  "
                      f"[{tf['violations']} violations]")
                print(f"  gradguard / TorchFix, 1 process    {tf['seconds'] / t_fix:10.1f}x wall, "
                      f"{tf['cpu'] / c_fix:.1f}x CPU")
        print(f"  (gradguard findings in process: {findings})")
        project_figures(api, tree, lines, files)

        print()
        one = tree / "timm" / ONE_FILE
        if not one.exists():  # --quick: the largest file of the copy
            one = max(tree.rglob("*.py"), key=lambda p: len(p.read_text().splitlines()))
        src = one.read_text(encoding="utf-8")
        n = len(src.splitlines())
        print(f"one file in process: {one.relative_to(tree)} ({n:,} lines), median of {args.repeat}")
        for label, kw in (("check_source", {}), ("check_source(fixes=False)", {"fixes": False})):
            times, cpus = [], []
            for _ in range(args.repeat):
                t, c = time.perf_counter(), time.process_time()
                api.check_source(src, str(one), **kw)
                times.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
            print(f"  {label:28s} {statistics.median(times) * 1000:8.1f} ms  (min {min(times) * 1000:.1f} ms; "
                  f"CPU median {statistics.median(cpus) * 1000:.1f} ms)")
        t = time.perf_counter()
        for _ in range(args.repeat):
            ast.parse(src)
        print(f"  {'ast.parse':28s} {(time.perf_counter() - t) / args.repeat * 1000:8.1f} ms")

        print()
        print(f"where the time goes: check_source over all files, 1 process, top {args.profile_top} by own time")
        prof = cProfile.Profile()
        prof.enable()
        for p, s in files:
            api.check_source(s, p)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).strip_dirs().sort_stats("tottime").print_stats(args.profile_top)
        print("\n".join(line for line in out.getvalue().splitlines()[4:] if line.strip()))


if __name__ == "__main__":
    main()
