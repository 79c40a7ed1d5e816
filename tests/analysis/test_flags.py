"""Flags a function tests twice: which tests read the same flag, and when a body is analysed once per value.

Labels are proven by running tests/fixtures/gg101/*flag_tested_twice*; here the syntactic part."""

from __future__ import annotations

import ast
import textwrap

from gradguard.analysis.flags import MAX_SPLIT_STATEMENTS, correlated_flag, flag_test


def _test(src: str) -> object:
    return flag_test(ast.parse(src, mode="eval").body)


def _fn(src: str) -> ast.FunctionDef:
    node = ast.parse(textwrap.dedent(src)).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def test_flag_tests() -> None:
    assert _test("self.residual") == (("bool", "self.residual"), True)
    assert _test("not not residual") == (("bool", "residual"), True)
    assert _test("not self.training") == (("bool", "self.training"), False)
    assert _test("mask is None") == (("none", "mask"), True)
    assert _test("mask is not None") == (("none", "mask"), False)
    assert _test("not mask is not None") == (("none", "mask"), True)
    assert _test("x > 0") is None
    assert _test("self.a.b") is None  # only a name or one attribute of a name
    assert _test("exists(mask)") is None


def test_split_on_the_first_flag_tested_twice() -> None:
    fn = _fn("""
        def forward(self, x, mask=None):
            if mask is not None:
                x = x * mask
            if self.pre_norm:
                x = self.norm(x)
            if self.pre_norm:
                return x
            if mask is None:
                return x
            return x + 1
    """)
    split = correlated_flag(fn)
    assert split is not None and split._gg_split == ("none", "mask")  # type: ignore[attr-defined]
    assert split.body is fn.body and split.orelse is fn.body
    assert correlated_flag(fn) is split  # cached on the tree


def test_no_split_when_the_flag_changes_or_is_tested_once() -> None:
    assigned = _fn("""
        def forward(self, x, scale=None):
            if scale is None:
                scale = 1.0
            if scale is None:
                return x
            return x * scale
    """)
    assert correlated_flag(assigned) is None
    attr_set = _fn("""
        def step(self, x):
            if self.first:
                self.first = False
            if self.first:
                return x
            return x + 1
    """)
    assert correlated_flag(attr_set) is None
    once = _fn("""
        def forward(self, x):
            if self.residual:
                return x + 1
            return x
    """)
    assert correlated_flag(once) is None


def test_no_split_of_a_long_body() -> None:
    filler = "\n".join(f"    y{i} = x + {i}" for i in range(MAX_SPLIT_STATEMENTS))
    fn = _fn(f"def f(x, flag):\n    if flag:\n        x = x + 1\n{filler}\n    if flag:\n        x = x + 2\n    return x\n")
    assert correlated_flag(fn) is None
