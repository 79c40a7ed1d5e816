"""Time against size for generated worst cases: is every curve linear?

    python benchmarks/bench_scaling.py [--quick] [--repeat N] [--max-seconds S] [--curve NAME ...]

For each shape (straight-line code, loop nests, branch chains, helper chains, long nn.Sequentials) it generates
files of growing size, times ``api.check_source(..., fixes=True)`` (CPU time, best of ``--repeat``), and times
``ast.parse`` of the same text as the anchor (the cost any tool pays to read the file). The slope of log(time)
against log(lines), fitted by least squares, says how the cost grows: 1 is linear, 2 quadratic. A curve is
"linear" when its slope is at most 1.25 (close to linear: allocation and cache effects), else SUPERLINEAR; the
ast.parse slope beside it shows what linear looks like on this machine. A point that takes longer than
``--max-seconds`` of CPU is stopped there and ends its curve (counted as that many seconds: the slope is then a
lower bound). The exit status is 1 when a curve is SUPERLINEAR.

CPU times, so the machine's load inflates them less than wall times; the load average is printed anyway.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from gradguard.api import check_source

LINEAR_SLOPE = 1.25

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def straight(n: int) -> str:
    """A function of n straight-line statements: tensors made, saved by ops, some modified in place."""
    body = ["def train_step():", "    x = torch.randn(8, 8, requires_grad=True)"]
    for i in range(n // 4):
        body += [f"    a{i} = x.exp()", f"    b{i} = a{i} * 2 + x", f"    b{i}.add_(1)", f"    a{i} += b{i}.sigmoid()"]
    body.append("    return x")
    return HEADER + "\n".join(body) + "\n"


def loop_nests(n: int) -> str:
    """n/6 loop nests, each three loops deep, with a carried state and an in-place update inside."""
    out = ["def train(model, opt, data):", "    h = torch.zeros(8)"]
    for i in range(n // 6):
        out += [f"    for e{i} in range(2):", f"        for b{i} in data:", f"            for s{i} in range(3):",
                f"                h = model(b{i}, h)", "                h.mul_(0.5)", "                h.sum().backward()"]
    out.append("    return h")
    return HEADER + "\n".join(out) + "\n"


def loop_depth(n: int) -> str:
    """One loop nest n deep (at most 90: Python allows 100 indentation levels)."""
    d = min(n, 90)
    out = ["def f(x, data):", "    h = x.exp()"]
    for i in range(d):
        out.append("    " * (i + 1) + f"for i{i} in data:")
    ind = "    " * (d + 1)
    out += [ind + "h = h * x", ind + "h.add_(1)", "    return h"]
    return HEADER + "\n".join(out) + "\n"


def branch_chains(n: int) -> str:
    """n/5 if/else statements in a row, each rebinding the same tensors differently."""
    out = ["def f(x, flags):", "    y = x.exp()", "    z = x"]
    for i in range(n // 5):
        out += [f"    if flags[{i}]:", "        y = y.sigmoid()", "    else:", "        z = y", "        y = y * 2"]
    out += ["    y.add_(1)", "    return y, z"]
    return HEADER + "\n".join(out) + "\n"


def helper_chains(n: int) -> str:
    """n/3 helpers, each calling the previous one (inlined by the analyzer), the last called from a forward."""
    out = ["def h0(x):", "    return x.exp()"]
    for i in range(1, n // 3):
        out += [f"def h{i}(x):", f"    return h{i - 1}(x).sigmoid() + x"]
    last = max(n // 3 - 1, 0)
    out += ["class M(nn.Module):", "    def forward(self, x):", f"        y = h{last}(x)", "        y.add_(1)",
            "        return y", "", "M()(torch.randn(3, requires_grad=True)).sum().backward()"]
    return HEADER + "\n".join(out) + "\n"


def sequential(n: int) -> str:
    """One nn.Sequential of n entries (Linear, Sigmoid, ReLU(inplace=True): a GG102 every third entry)."""
    entries = ("nn.Linear(8, 8),", "nn.Sigmoid(),", "nn.ReLU(inplace=True),")
    out = ["class M(nn.Module):", "    def __init__(self):", "        super().__init__()",
           "        self.net = nn.Sequential("]
    out += ["            " + entries[i % 3] for i in range(n)]
    out += ["        )", "", "    def forward(self, x):", "        return self.net(x)", "",
            "M()(torch.randn(2, 8)).sum().backward()"]
    return HEADER + "\n".join(out) + "\n"


CURVES: dict[str, tuple[Callable[[int], str], list[int]]] = {
    "straight-line": (straight, [500, 1000, 2000, 4000, 8000]),
    "loop nests": (loop_nests, [300, 600, 1200, 2400, 4800]),
    "loop depth": (loop_depth, [5, 10, 20, 40, 80]),
    "branch chains": (branch_chains, [250, 500, 1000, 2000, 4000]),
    "helper chains": (helper_chains, [60, 120, 240, 480, 960]),
    "nn.Sequential": (sequential, [125, 250, 500, 1000, 2000]),
}


class OverBudget(Exception):
    pass


def cpu(fn: Callable[[], object], repeat: int, limit: float = 0.0) -> float:
    """Best CPU time of ``repeat`` calls; with ``limit``, a call is stopped (OverBudget) after that much CPU."""
    best = math.inf
    for _ in range(repeat):
        if limit and hasattr(signal, "setitimer"):
            def alarm(signum: int, frame: object) -> None:
                raise OverBudget()

            old = signal.signal(signal.SIGPROF, alarm)
            signal.setitimer(signal.ITIMER_PROF, limit)
        # CPU clocks can tick coarsely (virtual machines): repeat a fast call until 0.2 s of CPU, take the mean.
        t0 = time.process_time()
        calls = 0
        try:
            while True:
                fn()
                calls += 1
                if time.process_time() - t0 >= 0.2:
                    break
        finally:
            if limit and hasattr(signal, "setitimer"):
                signal.setitimer(signal.ITIMER_PROF, 0)
                signal.signal(signal.SIGPROF, old)
        best = min(best, (time.process_time() - t0) / calls)
        if best > limit / 3 if limit else False:
            break  # slow enough: one measurement says it
    return best


def slope(xs: list[float], ys: list[float]) -> float:
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-6)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den if den else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the first three sizes of each curve")
    ap.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    ap.add_argument("--max-seconds", type=float, default=30.0, help="a point slower than this ends its curve")
    ap.add_argument("--curve", action="append", choices=list(CURVES), help="only these curves")
    args = ap.parse_args()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs); CPU seconds, best of "
          f"{args.repeat}; check_source with fixes")
    check_source(straight(40), "warm.py")  # imports and the knowledge table, outside the timings
    verdicts = []
    for name, (gen, sizes) in CURVES.items():
        if args.curve and name not in args.curve:
            continue
        sizes = sizes[:3] if args.quick else sizes
        print(f"\n{name}: {gen.__doc__}")
        print(f"  {'size':>6} {'lines':>7} {'findings':>8} {'gradguard ms':>13} {'ast.parse ms':>13} {'ratio':>7}")
        xs, gg, ap_ = [], [], []
        for n in sizes:
            src = gen(n)
            lines = src.count("\n")
            found: list[int] = []
            try:
                t = cpu(lambda src=src, name=name, found=found: found.append(len(check_source(src, f"{name}.py"))),
                        args.repeat, args.max_seconds)
            except OverBudget:
                print(f"  {n:>6} {lines:>7} {'?':>8} {f'> {args.max_seconds:.0f} s':>13}   (stopped: over budget)")
                xs.append(lines)
                gg.append(args.max_seconds)
                ap_.append(cpu(lambda src=src: ast.parse(src), args.repeat))
                break
            findings = found[0]
            p = cpu(lambda src=src: ast.parse(src), args.repeat)
            xs.append(lines)
            gg.append(t)
            ap_.append(p)
            print(f"  {n:>6} {lines:>7} {findings:>8} {t * 1000:>13.1f} {p * 1000:>13.2f} {t / max(p, 1e-9):>7.0f}")
        if len(xs) >= 2:
            # a stopped point is a lower bound: the slope it gives is a lower bound too
            s, sp = slope(xs, gg), slope(xs, ap_)
            verdict = "linear" if s <= LINEAR_SLOPE else "SUPERLINEAR"
            verdicts.append((name, s, sp, verdict))
            print(f"  log-log slope: gradguard {s:.2f}, ast.parse {sp:.2f} -> {verdict}")
    print("\nsummary (slope of log time vs log lines; 1 = linear):")
    for name, s, sp, verdict in verdicts:
        print(f"  {name:<15} gradguard {s:5.2f}   ast.parse {sp:5.2f}   {verdict}")
    return 0 if all(v == "linear" for *_, v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
