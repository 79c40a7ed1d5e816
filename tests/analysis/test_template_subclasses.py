"""A base class's method run on the subclasses that complete it: those overriding a method it calls on ``self``, or
one its constructor calls to build a part (``self.module = self.get_module()``)."""

from __future__ import annotations

from pathlib import Path

from gradguard.api import check_paths
from gradguard.config import Config

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "projects"


def _found(path: Path) -> list[tuple[str, int, str]]:
    found = check_paths([str(path)], Config(), jobs=1, fixes=False, project=True, cache=False)
    return [(Path(f.path).name, f.line, f.code) for f in found]


def test_a_part_the_constructor_asks_the_subclass_for_is_that_subclass_part() -> None:
    """rnn.py checked alone (as the editor checks the open file): RNNDecoder.forward's `self.module` is whatever
    `get_module()` builds, abstract in the base, an LSTM in LSTMDecoder; the shared forward then runs base.py's
    in-place Dropout on the LSTM's output. (main.py, which runs it, proves the label: tests/test_fixture_projects.py.)"""
    rnn = PROJECTS / "part_built_by_subclass_hook" / "rnn.py"
    line = next(i for i, text in enumerate(rnn.read_text().splitlines(), 1) if "expect: GG102" in text)
    assert _found(rnn) == [("rnn.py", line, "GG102")]


def test_the_same_part_with_an_out_of_place_dropout_is_clean() -> None:
    assert _found(PROJECTS / "part_built_by_subclass_hook_clean" / "rnn.py") == []
