"""Proof by execution: apply the preferred fixes to each error case, run the result with torch, compare.

Cases: every error case of the corpus (../shared/corpus, read in place through manifest.json; reference = its
hand-fixed twin) and every error fixture of tests/fixtures (reference = the original script run under
``allow_mutation_on_saved_tensors()``, i.e. what its author meant). For each case:

1. findings -> ``fix_text(unsafe=True)`` -> re-check, to a fixpoint (at most ``ROUNDS`` rounds);
2. the fixed file must parse and re-checking it must not report what was fixed;
3. run it (tests/fixes/tracer.py): every backward must succeed;
4. where every applied fix is marked safe: the losses (forward outputs) and the leaf gradients of each
   backward call must equal the reference's within float tolerance.

``python tests/fixes/proof.py`` prints the table for the report.
"""

from __future__ import annotations

import ast
import difflib
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(HERE.parent))  # tests/shared_data.py, also when this runs as a script
from shared_data import CORPUS  # noqa: E402  (../shared next to the repository, or GRADGUARD_CORPUS)

TRACER = HERE / "tracer.py"
REFERENCES = HERE / "references"
# fixtures whose `_fixed` twin is their reference although the original runs under allow_mutation_on_saved_tensors:
# there it computes other values than the program the code means (the seed's two passes edit the ids and the mask
# the first pass saved; the run under the context manager gives the embedding another gradient)
TWIN_REFERENCES = frozenset({"seeds/s001_hierarchical_two_pass"})
ROUNDS = 4
RTOL, ATOL = 1e-4, 1e-5

Finder = Callable[[str, str], list]  # (source, path) -> findings with fixes attached


@dataclass
class Case:
    id: str
    path: Path
    reference: Path | None  # the hand-fixed twin; None: the original under allow_mutation_on_saved_tensors
    source: str = ""
    fixed: str = ""
    applied: list[tuple[str, str, bool, str]] = field(default_factory=list)  # (code, title, safe, kind)
    findings_before: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # findings still reported for what was fixed
    fixed_path: Path | None = None
    run: dict[str, Any] | None = None
    ref_run: dict[str, Any] | None = None
    twin_fallback: bool = True  # no reference twin: use a `_fixed` sibling when the original fails even so

    @property
    def changed(self) -> bool:
        return self.fixed != self.source

    @property
    def all_safe(self) -> bool:
        return bool(self.applied) and all(s for _, _, s, _ in self.applied)


def corpus_cases() -> list[Case]:
    manifest = CORPUS / "manifest.json"
    if not manifest.exists():
        return []
    out = []
    for e in json.loads(manifest.read_text()):
        if e.get("expected") != "error":
            continue
        twin = CORPUS / "cases" / f"{e['twin']}.py" if e.get("twin") else None
        out.append(Case(e["id"], CORPUS / e["file"], twin if twin and twin.exists() else None))
    return out


def fixture_cases() -> list[Case]:
    out = []
    for p in sorted(FIXTURES.rglob("*.py")):
        if "projects" in p.relative_to(FIXTURES).parts:
            continue  # multi-file projects (tests/test_fixture_projects.py)
        text = p.read_text(encoding="utf-8")
        if text.splitlines()[:1] == ["# torch: error"]:
            # reference: the original under allow_mutation_on_saved_tensors (a fixture's `_fixed` twin may be a
            # different program: it is only used when the original fails even so)
            # ... or a hand-fixed reference kept here, for fixtures that fail even under allow_mutation (leaf and
            # view errors are raised at the in-place call)
            ref = REFERENCES / f"{p.parent.name}__{p.name}"
            cid = f"{p.parent.name}/{p.stem}"
            if not ref.exists() and cid in TWIN_REFERENCES:
                ref = p.with_name(p.stem + "_fixed.py")  # its `_fixed` twin is the hand-fixed reference
            out.append(Case(cid, p, ref if ref.exists() else None))
    return out


def rule_example_cases(workdir: Path) -> list[Case]:
    """The INVALID examples of every rule's docs (written to ``workdir``; reference: allow_mutation run, or a
    hand-fixed one in references/ named ``rules__<code>_invalid_<i>.py``)."""
    from gradguard.rules import ALL_RULES

    workdir.mkdir(parents=True, exist_ok=True)
    out = []
    for r in ALL_RULES:
        for i, src in enumerate(r.INVALID):
            p = workdir / f"{r.code.lower()}_invalid_{i}.py"
            p.write_text(src.lstrip(), encoding="utf-8")
            ref = REFERENCES / f"rules__{p.name}"  # hand-fixed, for an example that fails even under allow_mutation
            out.append(Case(f"rules/{r.code}_INVALID_{i}", p, ref if ref.exists() else None))
    return out


def rule_example_ids() -> list[str]:
    from gradguard.rules import ALL_RULES

    return [f"rules/{r.code}_INVALID_{i}" for r in ALL_RULES for i in range(len(r.INVALID))]


def analyzer_finder(source: str, path: str) -> list:
    from gradguard.api import check_source

    return check_source(source, path)


def _line_map(old: str, new: str) -> dict[int, int]:
    m: dict[int, int] = {}
    sm = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            for k in range(i2 - i1):
                m[i1 + k + 1] = j1 + k + 1
    return m


def fix_to_fixpoint(case: Case, finder: Finder = analyzer_finder) -> None:
    from gradguard.fixes import fix_text

    src = case.path.read_text(encoding="utf-8")
    case.source = src
    fixed_keys: list[tuple[str, int]] = []
    findings = finder(src, str(case.path))
    case.findings_before = [f"{f.code}@{f.line}" for f in findings]
    for _ in range(ROUNDS):
        chosen = []
        for f in findings:
            pref = next((x for x in f.fixes if x.preferred), None)
            if pref is not None and pref.kind != "noqa":
                chosen.append((f, pref))
        new, applied = fix_text(src, findings, unsafe=True)
        if not applied or new == src:
            break
        # which of them fix_text took (it skips overlapping ones): those whose edits are all visible in new
        lm = _line_map(src, new)
        took = _applied(src, chosen)
        for f, pref in took:
            case.applied.append((f.code, pref.title, pref.safe, pref.kind))
        fixed_keys = [(c, lm.get(ln, -1)) for c, ln in fixed_keys] + [(f.code, lm.get(f.line, -1)) for f, _ in took]
        src = new
        findings = finder(src, str(case.path))
    case.fixed = src
    remaining = {(f.code, f.line) for f in findings}
    case.left = [f"{c}@{ln}" for c, ln in fixed_keys if (c, ln) in remaining]


def _applied(src: str, chosen: list) -> list:
    """Replicates fix_text's choice (first come, skip overlaps) to know which fixes it applied."""
    from gradguard.fixes import _overlaps

    taken: list = []
    edits: list = []
    for f, fix in chosen:
        if any(_overlaps(e, c) for e in fix.edits for c in edits):
            continue
        edits.extend(fix.edits)
        taken.append((f, fix))
    return taken


ALLOW = "@allow-mutation:"


def run_traced(keys: Sequence[str], jobs: int = 2) -> dict[str, Any]:
    """Run scripts under the tracer in ``jobs`` worker processes (torch imported once per worker). A key is a
    path, or ``@allow-mutation:PATH`` to run it under ``allow_mutation_on_saved_tensors()``."""
    keys = list(dict.fromkeys(keys))
    if not keys:
        return {}
    chunks = [keys[i::jobs] for i in range(jobs) if keys[i::jobs]]

    def one(chunk: list[str]) -> dict[str, Any]:
        fd, out = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            proc = subprocess.run([sys.executable, str(TRACER), out, *chunk], capture_output=True, text=True,
                                  timeout=900)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-2000:])
            return json.loads(Path(out).read_text())
        finally:
            os.unlink(out)

    merged: dict[str, Any] = {}
    with ThreadPoolExecutor(len(chunks)) as ex:
        for part in ex.map(one, chunks):
            merged.update(part)
    return merged


def _ref_key(c: Case) -> str:
    return str(c.reference) if c.reference is not None else ALLOW + str(c.path)


def _alt_key(c: Case) -> str | None:
    twin = c.path.with_name(c.path.stem + "_fixed.py")
    return str(twin) if c.reference is None and c.twin_fallback and twin.exists() else None


def prepare(cases: list[Case], workdir: Path, finder: Finder = analyzer_finder) -> list[Case]:
    """Fix every case to a fixpoint and write the fixed file under ``workdir``."""
    for c in cases:
        fix_to_fixpoint(c, finder)
        d = workdir / c.id.replace("/", "__")
        d.mkdir(parents=True, exist_ok=True)
        c.fixed_path = d / c.path.name
        c.fixed_path.write_text(c.fixed, encoding="utf-8")
    return cases


def execute(cases: list[Case]) -> list[Case]:
    """Run the fixed files and the references (one batch: two worker processes)."""
    keys = [str(c.fixed_path) for c in cases if c.fixed_path and c.changed] + [_ref_key(c) for c in cases]
    keys += [k for k in map(_alt_key, cases) if k]
    runs = run_traced(keys)
    for c in cases:
        if c.fixed_path is not None and c.changed:
            c.run = runs.get(str(c.fixed_path))
        c.ref_run = runs.get(_ref_key(c))
        alt = _alt_key(c)
        if alt and not (c.ref_run and c.ref_run["ok"]):
            c.ref_run = runs.get(alt)  # the original fails even under allow_mutation: its twin, if any
    return cases


def prove(cases: list[Case], workdir: Path, finder: Finder = analyzer_finder) -> list[Case]:
    return execute(prepare(cases, workdir, finder))


def parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except SyntaxError:
        return False


def backward_ok(c: Case) -> bool:
    return bool(c.run and c.run["ok"] and c.run["records"])


def _close(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["shape"] != b["shape"] or len(a["values"]) != len(b["values"]):
        return False
    for x, y in zip(a["values"], b["values"]):
        if math.isnan(x) and math.isnan(y):
            continue
        if not abs(x - y) <= ATOL + RTOL * abs(y):
            return False
    return True


def same_as_reference(c: Case) -> tuple[bool, str]:
    """Losses and leaf gradients of every backward call equal the reference's (gradients matched as a
    multiset by shape and value: graph traversal order may differ between two spellings of the same code)."""
    if not (c.run and c.ref_run and c.ref_run["ok"]):
        return False, "no reference run" if not (c.ref_run and c.ref_run["ok"]) else "fixed run failed"
    ra, rb = c.run["records"], c.ref_run["records"]
    if len(ra) != len(rb):
        return False, f"{len(ra)} backward calls vs {len(rb)} in the reference"
    for i, (a, b) in enumerate(zip(ra, rb)):
        if not _close(a["loss"], b["loss"]):
            return False, f"backward #{i + 1}: loss differs"
        pool = list(b["grads"])
        for g in a["grads"]:
            k = next((j for j, h in enumerate(pool) if _close(g, h)), None)
            if k is None:
                return False, f"backward #{i + 1}: a leaf gradient {g['shape']} differs"
            pool.pop(k)
        if pool:
            return False, f"backward #{i + 1}: {len(pool)} reference leaf gradients missing"
    return True, ""


def report(cases: list[Case]) -> str:
    rows = []
    fixed = 0
    for c in cases:
        ok = c.changed and parses(c.fixed) and backward_ok(c) and not c.left
        same, why = same_as_reference(c) if backward_ok(c) else (False, "")
        fixed += ok
        kinds = ",".join(sorted({k for _, _, _, k in c.applied})) or "-"
        safety = "safe" if c.all_safe else "unsafe" if c.applied else "-"
        status = "FIXED" if ok else "not fixed"
        if not c.changed:
            detail = "no fix applied (findings: " + (" ".join(c.findings_before) or "none") + ")"
        elif not backward_ok(c):
            detail = "fixed file fails: " + ((c.run or {}).get("error") or "no backward ran")[:90]
        else:
            detail = "matches reference" if same else f"differs from reference: {why}"
        rows.append(f"{c.id:40s} {status:9s} {safety:6s} {kinds:28s} {detail}")
    rows.append(f"\n{fixed}/{len(cases)} fixed automatically (backward succeeds after the preferred fixes)")
    return "\n".join(rows)


def main() -> int:
    sys.path.insert(0, str(ROOT / "server"))
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    with tempfile.TemporaryDirectory() as tmp:
        cases = (corpus_cases() if which in ("all", "corpus") else []) + \
            (fixture_cases() if which in ("all", "fixtures") else []) + \
            (rule_example_cases(Path(tmp) / "rules") if which in ("all", "rules") else [])
        prove(cases, Path(tmp))
        print(report(cases))
        if "-v" in sys.argv:
            for c in cases:
                if c.changed:
                    print(f"\n=== {c.id}")
                    sys.stdout.writelines(difflib.unified_diff(
                        c.source.splitlines(True), c.fixed.splitlines(True), n=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
