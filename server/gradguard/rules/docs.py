"""Render the rule documentation pages (docs/rules/GGxxx.md) from the rule classes: one source of truth.

    python -m gradguard.rules.docs [OUTDIR]     # write the pages (default: docs/rules)
"""

from __future__ import annotations

import os
import sys

from gradguard.rules import ALL_RULES


def index() -> str:
    lines = ["# gradguard rules", "", "| code | name | finds |", "|---|---|---|"]
    for r in ALL_RULES:
        lines.append(f"| [{r.code}]({r.code}.md) | `{r.name}` | {r.summary} |")
    lines.append("")
    return "\n".join(lines)


def pages() -> dict[str, str]:
    out = {f"{r.code}.md": r.markdown() for r in ALL_RULES}
    out["README.md"] = index()
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    outdir = argv[0] if argv else os.path.join("docs", "rules")
    os.makedirs(outdir, exist_ok=True)
    for name, text in pages().items():
        with open(os.path.join(outdir, name), "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {len(pages())} pages to {outdir}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
