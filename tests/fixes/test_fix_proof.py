"""Proof by execution (torch): every error case of the corpus and every error fixture, fixed by gradguard's
preferred fixes (to a fixpoint), parses, no longer reports what was fixed, runs backward successfully, and -
where every applied fix is marked safe - computes the same losses and leaf gradients as the reference.

Two sources of findings: the analyzer (``check_source``), and the findings built by hand for the corpus
culprit lines (corpus_findings.py), which prove the builders independently of the analyzer.
"""

from __future__ import annotations

from pathlib import Path

import proof
import pytest
from corpus_findings import EXPECTED, handmade_finder
from shared_data import corpus_manifest

pytestmark = pytest.mark.torch

# Error cases the preferred fixes do not fix, and why (see docs/fixes.md): none at present. A case added here
# is expected to fail (xfail), with its reason.
KNOWN_UNFIXED: dict[str, str] = {}

ANALYZER_CASES = proof.corpus_cases() + proof.fixture_cases()
RULE_EXAMPLES = proof.rule_example_ids()
HANDMADE_CASES = [c for c in proof.corpus_cases() if c.id in EXPECTED]


def hatch_finder(source: str, path: str) -> list:
    """The analyzer's findings on the original file, each offering only the escape hatch (when it applies)."""
    from gradguard.fixes.context import Ctx
    from gradguard.fixes.shared import _escape_hatch
    from gradguard.model import Fix

    if source != Path(path).read_text(encoding="utf-8"):
        return []
    out = []
    lines = source.splitlines()
    for f in proof.analyzer_finder(source, path):
        if f.code in ("GG101", "GG102", "GG103", "GG104") and f.mutation is not None:
            hatch = _escape_hatch(Ctx(f, source, lines))
            f.fixes = [Fix(h.title, h.safe, h.edits, True, h.kind) for h in hatch[:1]]
            out.append(f)
    return out


@pytest.fixture(scope="module")
def proven(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, proof.Case]]:
    work = tmp_path_factory.mktemp("fixed")
    analyzer = [proof.Case(c.id, c.path, c.reference) for c in ANALYZER_CASES]
    analyzer += proof.rule_example_cases(work / "rules")
    handmade = [proof.Case(c.id, c.path, c.reference) for c in HANDMADE_CASES]
    # the escape hatch, applied alone; its reference is always the original under the same context manager
    hatch = [proof.Case("hatch:" + c.id, c.path, None, twin_fallback=False) for c in ANALYZER_CASES]
    proof.prepare(analyzer, work / "analyzer")
    proof.prepare(handmade, work / "handmade", handmade_finder({c.id: str(c.path) for c in handmade}))
    proof.prepare(hatch, work / "hatch", hatch_finder)
    hatch = [c for c in hatch if c.changed]
    proof.execute(analyzer + handmade + hatch)
    print("\n" + proof.report(analyzer))
    return {"analyzer": {c.id: c for c in analyzer}, "handmade": {c.id: c for c in handmade},
            "hatch": {c.id: c for c in hatch}}


def test_escape_hatch_runs_and_keeps_every_value(proven: dict[str, dict[str, proof.Case]]) -> None:
    """Wrapping saver..backward in allow_mutation_on_saved_tensors() (where it applies) makes backward succeed
    with exactly the values the original means."""
    # (where even the original fails under the context manager, e.g. a custom Function returning a view of its
    # input, the hatch cannot help: those are not counted)
    cases = [c for c in proven["hatch"].values() if c.ref_run and c.ref_run["ok"]]
    assert len(cases) >= 5, [c.id for c in cases]
    print(f"\nescape hatch applied alone: {len(cases)} cases, e.g. {[c.id for c in cases[:6]]}")
    for c in cases:
        assert proof.parses(c.fixed), c.id
        assert c.run is not None and c.run["ok"] and c.run["records"], (c.id, c.run and c.run.get("error"), c.fixed)
        same, why = proof.same_as_reference(c)
        assert same, (c.id, why)


def check_case(c: proof.Case) -> None:
    assert c.changed, f"{c.id}: no fix applied (findings: {c.findings_before})"
    assert proof.parses(c.fixed), f"{c.id}: the fixed file does not parse"
    assert not c.left, f"{c.id}: re-checking still reports what was fixed: {c.left}"
    assert c.run is not None
    assert c.run["ok"], f"{c.id}: the fixed file fails: {c.run.get('error')}\n{c.fixed}"
    assert c.run["records"], f"{c.id}: the fixed file ran no backward"
    if c.all_safe and c.ref_run and c.ref_run["ok"]:  # (no reference: a leaf/view fixture without a twin)
        same, why = proof.same_as_reference(c)
        assert same, f"{c.id}: fixes marked safe changed the results: {why}\n{c.applied}"


@pytest.mark.parametrize("cid", [c.id for c in ANALYZER_CASES] + RULE_EXAMPLES)
def test_analyzer_findings_fixed_and_proven(cid: str, proven: dict[str, dict[str, proof.Case]]) -> None:
    c = proven["analyzer"][cid]
    if cid in KNOWN_UNFIXED:
        pytest.xfail(KNOWN_UNFIXED[cid])
    if not c.findings_before:
        pytest.skip(f"{cid}: the analyzer reports nothing here (nothing to fix)")
    check_case(c)


@pytest.mark.parametrize("cid", [c.id for c in HANDMADE_CASES])
def test_handmade_corpus_findings_fixed_and_proven(cid: str, proven: dict[str, dict[str, proof.Case]]) -> None:
    check_case(proven["handmade"][cid])


def test_reference_runs_are_real(proven: dict[str, dict[str, proof.Case]]) -> None:
    """The harness itself: references ran and recorded gradients, and an unfixed error case fails."""
    cases = list(proven["handmade"].values())
    if not cases:
        corpus_manifest()  # skips, saying where it looked (fails under CI=true)
    assert all(c.ref_run and c.ref_run["ok"] and c.ref_run["records"] for c in cases)
    assert any(g["values"] for c in cases for r in c.ref_run["records"] for g in r["grads"])  # type: ignore[index]
    broken = proof.run_traced([str(cases[0].path)], jobs=1)[str(cases[0].path)]
    assert not broken["ok"] and "inplace" in broken["error"]


def test_safe_fixes_are_compared(proven: dict[str, dict[str, proof.Case]]) -> None:
    """Enough cases are fixed by safe fixes alone for the value comparison to mean something, and every
    safely fixed case has a reference to compare with."""
    safe = [c for c in proven["analyzer"].values() if c.all_safe and c.run and c.run["ok"]]
    assert len(safe) >= 10, [c.id for c in safe]
    assert all(c.ref_run and c.ref_run["ok"] for c in safe), \
        [c.id for c in safe if not (c.ref_run and c.ref_run["ok"])]


def test_comparison_detects_a_changed_gradient(tmp_path: Path, proven: dict[str, dict[str, proof.Case]]) -> None:
    c = next((c for c in proven["analyzer"].values() if c.all_safe and c.run and c.run["ok"]), None)
    if c is None:
        pytest.skip("no safely fixed case")
    assert c.run is not None
    tampered = proof.Case(c.id, c.path, c.reference, run={"ok": True, "records": [
        {"loss": r["loss"], "grads": [dict(g, values=[v + 1.0 for v in g["values"]]) for g in r["grads"]]}
        for r in c.run["records"]]}, ref_run=c.ref_run)
    assert not proof.same_as_reference(tampered)[0]
