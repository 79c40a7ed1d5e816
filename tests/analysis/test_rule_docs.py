"""docs/rules is generated from the rule classes; it must not drift."""

from __future__ import annotations

from pathlib import Path

from gradguard.rules import ALL_RULES
from gradguard.rules.docs import pages

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules"


def test_docs_in_sync() -> None:
    for name, text in pages().items():
        assert (DOCS / name).read_text(encoding="utf-8") == text, f"docs/rules/{name} is stale: python -m gradguard.rules.docs"


def test_every_rule_is_documented_with_examples() -> None:
    codes = [r.code for r in ALL_RULES]
    assert len(set(codes)) == len(codes)
    for r in ALL_RULES:
        assert r.summary and r.why.strip() and r.fix.strip()
        assert r.INVALID and r.VALID, f"{r.code} needs runnable INVALID and VALID examples"
