"""What does computing fixes with the diagnostics cost? Prints figures; asserts nothing.

    .venv/bin/python benchmarks/bench_fixes.py [--repeat N]

Two file sets:
  - timm's model and layer code (``pip install --no-deps timm``: real model-zoo code, few findings),
  - the error cases of ../shared/corpus and the error fixtures of tests/fixtures (every file has findings).
For each: ``api.check_source(..., fixes=False)`` vs ``fixes=True`` (best of N runs per file, summed), the
number of findings and fixes, and the cost of building the fixes per finding (``attach_fixes`` alone).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

from gradguard.api import check_source  # noqa: E402
from gradguard.fixes import attach_fixes  # noqa: E402

CORPUS = Path(os.environ.get("GRADGUARD_CORPUS", ROOT.parent / "shared" / "corpus"))


def timm_files() -> list[Path]:
    spec = importlib.util.find_spec("timm")  # without importing timm (it imports torch)
    if spec is None or spec.origin is None:
        return []
    base = Path(spec.origin).parent
    return sorted((base / "models").glob("*.py")) + sorted((base / "layers").glob("*.py"))


def error_files() -> list[Path]:
    out: list[Path] = []
    manifest = CORPUS / "manifest.json"
    if manifest.exists():
        out += [CORPUS / e["file"] for e in json.loads(manifest.read_text()) if e.get("expected") == "error"]
    for p in sorted((ROOT / "tests" / "fixtures").rglob("*.py")):
        if p.read_text(encoding="utf-8").startswith("# torch: error"):
            out.append(p)
    return out


def hazard_file(n: int = 120) -> str:
    """A large model file with several hazards per class (sigmoid+clamp_, exp+=, dropout(inplace) after
    sigmoid in a multi-line Sequential, setitem into softmax output, out= into a saved mask)."""
    parts = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", ""]
    for i in range(n):
        parts.append(f"""
class Block{i}(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gate = nn.Sequential(
            nn.Linear(dim, dim),
            nn.Sigmoid(),
            nn.Dropout(0.1, inplace=True),  # overwrites the sigmoid output
        )
        self.mask = torch.empty(2, dim)

    def forward(self, x):
        p = torch.sigmoid(self.fc(x))
        p.clamp_(1e-4, 1 - 1e-4)
        e = p.exp()
        e += 1
        s = torch.softmax(e, dim=-1)
        s[:, 0] = 0.0
        h = self.gate(s) * self.mask
        torch.bernoulli(torch.full_like(h, 0.5), out=self.mask)
        return h
""")
    return "\n".join(parts)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench(name: str, files: list[Path] | list[tuple[str, str]], repeat: int) -> None:
    if not files:
        print(f"{name}: no files (timm not installed? make setup)")
        return
    sources = [f if isinstance(f, tuple) else (str(f), f.read_text(encoding="utf-8")) for f in files]
    lines = sum(s.count("\n") + 1 for _, s in sources)
    t_without = t_with = 0.0
    n_findings = n_fixes = 0
    per_finding: list[float] = []
    for path, src in sources:
        t_without += best(lambda: check_source(src, path, fixes=False), repeat)  # noqa: B023
        t_with += best(lambda: check_source(src, path, fixes=True), repeat)  # noqa: B023
        found = check_source(src, path, fixes=False)
        if found:
            t = best(lambda: attach_fixes(found, src), repeat)  # noqa: B023
            per_finding.append(t / len(found))
            n_findings += len(found)
            n_fixes += sum(len(f.fixes) for f in found)
    print(f"\n{name}: {len(files)} files, {lines:,} lines, {n_findings} findings, {n_fixes} fixes offered")
    print(f"  check_source without fixes: {t_without * 1000:9.1f} ms  ({lines / t_without:,.0f} lines/s)")
    print(f"  check_source with fixes:    {t_with * 1000:9.1f} ms  ({lines / t_with:,.0f} lines/s)")
    print(f"  overhead of fixes:          {(t_with - t_without) * 1000:9.1f} ms  "
          f"({(t_with / t_without - 1) * 100:+.1f}%)")
    if per_finding:
        print(f"  building the fixes of one finding: median {statistics.median(per_finding) * 1000:.2f} ms, "
              f"max {max(per_finding) * 1000:.2f} ms (per-file mean over its findings)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    bench("timm models + layers", timm_files(), args.repeat)
    bench("corpus error cases + error fixtures", error_files(), args.repeat)
    bench("generated file with hazards in every class", [("hazards.py", hazard_file())], args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
