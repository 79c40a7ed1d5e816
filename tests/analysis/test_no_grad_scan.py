"""Functions only reached from no_grad code run under no_grad (optimizer helpers, reparameterisation)."""

from __future__ import annotations

import textwrap

from gradguard.api import check_source
from gradguard.project.context_scan import no_grad_only

SRC = textwrap.dedent('''
    import torch

    class Opt:
        @torch.no_grad()
        def step(self, params):
            """Calls adam (the word adam in a docstring is not a reference)."""
            adam(
                params,
            )

    def adam(
        params,
        eps=1e-8,
    ):
        func = _single_adam
        func(params, eps)

    def _single_adam(params, eps):
        for p in params:
            denom = p.exp()
            denom.add_(eps)

    def reparam(m):
        w = m.weight.exp()
        w.add_(1)
        return w

    def fuse(model):
        with torch.no_grad():
            reparam(model)

    def used_with_grad(x):
        y = x.sigmoid()
        y.mul_(2)
        return y

    used_with_grad(torch.randn(3, requires_grad=True))
''')


def test_scan_finds_no_grad_only_functions() -> None:
    lines = SRC.splitlines()
    ng = no_grad_only(lines)
    names = {lines[n - 1].strip().split("(")[0].replace("def ", "") for n in ng}
    assert names == {"step", "adam", "_single_adam", "reparam"}, names


def test_only_the_grad_path_is_flagged() -> None:
    found = check_source(SRC, "opt.py", fixes=False)
    assert [(f.code, f.line) for f in found] == [("GG101", SRC.splitlines().index("    y.mul_(2)") + 1)]
