"""Pages for the codes that are not hazard rules: GG000 (a file gradguard could not analyse) and GG001 (an unused
``# noqa``). ``gradguard rule GG000`` prints them like the rules' pages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetaCode:
    code: str
    name: str
    summary: str
    page: str

    def markdown(self) -> str:
        return f"# {self.code}: {self.name}\n\n{self.summary}\n\n{self.page.strip()}\n"


GG000 = MetaCode("GG000", "file-not-analyzed", "The file could not be parsed, decoded or read, or its analysis stopped "
                 "early; the run goes on with the other files.", """
## When

- *could not parse*: a syntax error (while typing, the language server keeps the last good findings on the lines
  that did not change); the message is Python's own, at its position.
- *could not decode*: the bytes are not valid in the file's encoding (UTF-8 unless a PEP 263 cookie says otherwise).
- *skipped*: not a regular file (a FIFO named `x.py`), larger than 20 MB, or nested too deeply to analyse.
- *analysis incomplete* (severity info): the file is too large or too deeply nested to follow in full within the
  analysis budget; hazards after that line may be missed.
- in a notebook: the `.ipynb` file is not valid JSON or has no `cells` list.

## What to do

Fix the syntax error or the encoding; the other cases need no action. GG000 cannot be disabled (`select`/`ignore`
do not apply to it), since a file that was not checked should never look clean. `# noqa` does not apply either.
""")

GG001 = MetaCode("GG001", "unused-noqa", "A `# noqa` comment that suppresses nothing on its line (or lists codes "
                 "that are not reported there).", """
## When

Only when selected by its full code: `gradguard check --extend-select GG001`, or `select = ["GG", "GG001"]` in
`[tool.gradguard]` (`select = ["GG"]` alone does not turn it on). A bare `# noqa` is unused when no enabled rule
reports anything on its line; `# noqa: GG101, GG102` is reported with the codes that match nothing there.

## Example

```python
y = x * 2
y += 1  # noqa: GG101   <- x * 2 saved nothing: nothing to suppress
```

## Fix

Remove the comment, or the unused codes from it (a safe fix: `gradguard check --extend-select GG001 --fix`).
""")

META = {m.code: m for m in (GG000, GG001)}
