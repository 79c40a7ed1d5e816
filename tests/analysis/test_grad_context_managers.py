"""Which grad mode a ``@contextmanager`` generator sets for the block it guards, read from where it yields.

The analyzer's behaviour on such blocks is proven by running tests/fixtures/gg101/*contextmanager*; here the
reading itself, on the shapes libraries write (monai's ``eval_mode``, ultralytics' inference wrappers).
"""

from __future__ import annotations

import ast
import textwrap

import pytest
from gradguard.analysis.statements import _yields_in_grad_mode

CASES = {
    "no_grad_in_try": ("""
        try:
            with torch.no_grad():
                yield [n.eval() for n in nets]
        finally:
            pass
    """, True),
    "inference_mode": ("with torch.inference_mode():\n    yield", True),
    "inference_mode_off_then_no_grad": ("with torch.inference_mode(False), torch.no_grad():\n    yield", True),
    "inference_mode_off_only": ("with torch.inference_mode(False):\n    yield", None),
    "set_grad_enabled_false": ("with torch.set_grad_enabled(False):\n    yield", True),
    "enable_grad": ("with torch.enable_grad():\n    x = yield 1", False),
    "one_path_without": ("""
        if torch.is_grad_enabled():
            with torch.no_grad():
                yield
        else:
            yield
    """, None),
    "plain": ("yield", None),
    "nested_def_yields_are_its_own": ("""
        def inner():
            yield
        with torch.no_grad():
            yield inner
    """, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_mode_of_a_context_manager(name: str) -> None:
    body, expected = CASES[name]
    src = "@contextmanager\ndef cm(*nets):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert _yields_in_grad_mode(fn) is expected


def test_a_generator_that_is_not_a_context_manager_sets_nothing() -> None:
    fn = ast.parse("def gen():\n    with torch.no_grad():\n        yield 1\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert _yields_in_grad_mode(fn) is None
