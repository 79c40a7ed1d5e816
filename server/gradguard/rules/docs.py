"""Render the rule documentation pages (docs/rules/GGxxx.md) from the rule classes: one source of truth.

    python -m gradguard.rules.docs [OUTDIR]     # write the pages (default: docs/rules)

Where a rule's link points (:func:`page_uri`): ``$GRADGUARD_DOCS_URL`` or the language server's ``docsBaseUrl``
setting when set (``https://example.org/rules/`` + ``GG101.md``, or a URL with ``{code}`` in it); else the page
rendered from the installed package into the user's cache (``file://.../gradguard/docs/<version>/GG101.md``), so
the link always opens the documentation of the gradguard that reported the finding.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path

from gradguard.rules import ALL_RULES
from gradguard.rules.meta import META


def index() -> str:
    lines = ["# gradguard rules", "", "| code | name | finds |", "|---|---|---|"]
    for r in sorted(ALL_RULES, key=lambda r: r.code):  # (ALL_RULES is in matching order)
        lines.append(f"| [{r.code}]({r.code}.md) | `{r.name}` | {r.summary} |")
    lines += ["", "Not hazards:", "", "| code | name | reports |", "|---|---|---|"]
    for m in META.values():
        lines.append(f"| [{m.code}]({m.code}.md) | `{m.name}` | {m.summary} |")
    lines.append("")
    return "\n".join(lines)


def pages() -> dict[str, str]:
    out = {f"{r.code}.md": r.markdown() for r in ALL_RULES}
    out.update({f"{m.code}.md": m.markdown() for m in META.values()})
    out["README.md"] = index()
    return out


def _cache_dir() -> str:
    explicit = os.environ.get("GRADGUARD_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gradguard")


@lru_cache(maxsize=1)
def local_pages() -> Path | None:
    """The rule pages of this version, written once into the user's cache; None when that is not writable."""
    from gradguard import __version__

    d = Path(_cache_dir(), "docs", __version__)
    try:
        d.mkdir(parents=True, exist_ok=True)
        for name, text in pages().items():
            f = d / name
            if not f.is_file() or f.read_text(encoding="utf-8") != text:
                tmp = f.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, f)
    except OSError:
        return None
    return d


def page_uri(code: str, base: str | None = None) -> str | None:
    """The link to ``code``'s page (see the module docstring); None when there is none."""
    base = base or os.environ.get("GRADGUARD_DOCS_URL", "")
    if base:
        return base.replace("{code}", code) if "{code}" in base else base.rstrip("/") + f"/{code}.md"
    d = local_pages()
    return (d / f"{code}.md").as_uri() if d is not None else None


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
