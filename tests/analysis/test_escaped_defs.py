"""Defs of the code's own that escape to a library: a closure returned in a transform object, a function handed to
``torch.utils._pytree.tree_map``. The library calls them with what it computes (the leaves of a pytree), which the
analysis rarely knows; they also run on their own, with arguments that may require grad.

The label of the shape is proven by running it: tests/fixtures/projects/helper_behind_return (error) and
helper_behind_return_clean (clean), where the same update is reached through a helper.
"""

from __future__ import annotations

import textwrap

from gradguard.api import check_source

TRANSFORM = textwrap.dedent('''
    """Differentiable optimizer transforms over pytrees of tensors (no module, backward or script here)."""
    from typing import Callable, NamedTuple

    import torch
    from torch.utils import _pytree as pytree


    class Transform(NamedTuple):
        init: Callable
        update: Callable


    def _bias_correction(moment, decay, count):
        def f(t):
            return t.div(1 - decay ** count)

        return pytree.tree_map(f, moment)


    def scale_by_rms(decay=0.9, eps=1e-8, moment_requires_grad=False):
        def init_fn(params):
            return pytree.tree_map(lambda t: torch.zeros_like(t, requires_grad=moment_requires_grad), params)

        def update_fn(updates, nu, count):
            nu_hat = _bias_correction(nu, decay, count)

            def f(g, n):
                return g.div(n.sqrt().add_(eps)) if g is not None else None

            return pytree.tree_map(f, updates, nu_hat)

        return Transform(init_fn, update_fn)
''')


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_a_def_mapped_by_a_library_over_a_pytree_is_analysed() -> None:
    found = {(f.line, f.code) for f in check_source(TRANSFORM, "transform.py")}
    assert found == {(line_of(TRANSFORM, "n.sqrt().add_(eps)"), "GG101")}


def test_the_out_of_place_update_is_clean() -> None:
    clean = TRANSFORM.replace("n.sqrt().add_(eps)", "n.sqrt().add(eps)")
    assert list(check_source(clean, "transform.py")) == []
