"""Records of tensors (``collections.namedtuple``, ``typing.NamedTuple``, dataclasses) carried across iterations.

The label of the shape is proven by running it: tests/fixtures/gg201/pos_namedtuple_state_carried_over_step.py
(error) and neg_namedtuple_state_detached_between_chunks.py (clean). Here: every spelling of the record class that
Python accepts makes the same class, so the finding stays where it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gradguard.api import check_source

ROOT = Path(__file__).resolve().parents[2]
POS = ROOT / "tests" / "fixtures" / "gg201" / "pos_namedtuple_state_carried_over_step.py"
NEG = ROOT / "tests" / "fixtures" / "gg201" / "neg_namedtuple_state_detached_between_chunks.py"
DEFINITION = 'CellState = namedtuple("CellState", ["z", "v"])\n'


def findings(text: str) -> set[tuple[int, str]]:
    return {(f.line, f.code) for f in check_source(text, "cell.py")}


def step_line(text: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if "optimizer.step()" in ln)


@pytest.mark.parametrize("definition", [
    'CellState = namedtuple("CellState", "z v")\n',
    'CellState = namedtuple("CellState", "z, v")\n',
    'CellState = namedtuple("CellState", ("z", "v"), defaults=(None,))\n',
    'CellState = typing.NamedTuple("CellState", [("z", torch.Tensor), ("v", torch.Tensor)])\n',
    "@dataclasses.dataclass\nclass CellState:\n    z: torch.Tensor\n    v: torch.Tensor\n",
    "class CellState(typing.NamedTuple):\n    z: torch.Tensor\n    v: torch.Tensor\n",
])
def test_every_spelling_of_the_record_carries_the_graph(definition: str) -> None:
    text = POS.read_text(encoding="utf-8")
    assert DEFINITION in text
    text = text.replace("import torch\n", "import dataclasses\nimport typing\n\nimport torch\n", 1)
    text = text.replace(DEFINITION, definition)
    assert findings(text) == {(step_line(text), "GG201")}


def test_the_state_detached_between_chunks_is_clean() -> None:
    assert findings(NEG.read_text(encoding="utf-8")) == set()


def test_an_unknown_field_list_makes_no_record() -> None:
    text = POS.read_text(encoding="utf-8").replace(DEFINITION, 'CellState = namedtuple("CellState", FIELDS)\n')
    assert findings(text) == set()  # (the state is then unknown, as any call of an unknown class's result)
