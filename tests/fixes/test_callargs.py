"""The standard-library argument rewrite (used where libcst is not installed: the editor's bundled server) gives
libcst's output, character for character."""

from __future__ import annotations

import itertools

import pytest
from gradguard.fixes import arguments
from gradguard.fixes.callargs import rewrite_call

libcst = pytest.importorskip("libcst")

FUNCS = ["f", "(f)", "f(a)"]
ARGS = [
    ["x"], ["x", "inplace=True"], ["x", "out=b"], ["out=b"], ["True"], ["x", "True"], ["x", "y", "out=b", "alpha=2"],
    ["(x)", "out=(b)"], ["x[0]", "out=b[1:2]"], ["*xs", "out=b", "**kw"], ["'a,b'", "out=b"], ["g(x, y)", "out=h(b)"],
]
SEPS = [", ", " , ", ",\n    ", ",  # c\n    "]
ENDS = ["", ", ", "\n", ",\n", "  # d\n"]
STARTS = ["", " ", "\n    "]


def cases():
    for func, args, sep, end, start in itertools.product(FUNCS, ARGS, SEPS, ENDS, STARTS):
        if "#" in end and "\n" not in end:
            continue
        text = f"{func}({start}{sep.join(args)}{end})"
        for kw in ("out", "inplace"):
            yield text, kw, None
        for i in range(len(args)):
            yield text, None, i


def test_same_as_libcst() -> None:
    arguments._libcst.cache_clear()
    n = 0
    for text, kw, index in cases():
        for replace in (None, "False"):
            want = arguments._rewrite_call(text, kw, index, replace)
            got = rewrite_call(text, kw, index, replace)
            assert got == want, (text, kw, index, replace)
            n += want is not None
    assert n > 500


def test_without_libcst(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arguments, "_libcst", lambda: None)
    assert arguments._rewrite_call("F.relu(x, inplace=True)", "inplace") == "F.relu(x)"
    assert arguments._rewrite_call("nn.ReLU(True)", None, 0, "False") == "nn.ReLU(False)"
