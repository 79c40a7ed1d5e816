"""einops.rearrange: a view of its input, or a copy (calls.rearrange_copies). The answers are checked against torch
where torch is installed: a view shares its input's storage."""

from __future__ import annotations

import math

import pytest
from gradguard.analysis.calls import rearrange_copies

PATTERNS = {
    "b n (h d) -> (b h) n d": True,  # permute, then merge b with h: a copy
    "b h n d -> b n (h d)": True,
    "b h w c -> b (w h) c": True,
    "b n (h d) -> b h n d": False,  # split, then permute: a view
    "b (h d) x y -> b h (x y) d": False,
    "b c h w -> b (c h w)": False,
    "b n d -> (b n) d": False,
    "... (h d) -> ... h d": False,
}


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_rearrange_pattern(pattern: str) -> None:
    assert rearrange_copies(pattern) is PATTERNS[pattern]


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_rearrange_pattern_against_torch(pattern: str) -> None:
    torch = pytest.importorskip("torch")
    einops = pytest.importorskip("einops")
    sizes = {"h": 2, "d": 3, "x": 2, "y": 2}
    dims: list[int] = []
    group: list[int] | None = None
    for tok in pattern.split("->")[0].replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
            group = []
        elif tok == ")":
            assert group is not None
            dims.append(math.prod(group))
            group = None
        else:
            (group if group is not None else dims).append(2 if tok == "..." else sizes.get(tok, 4))
    x = torch.randn(*dims)
    known = {k: v for k, v in sizes.items() if k in pattern}
    out = einops.rearrange(x, pattern, **known)
    assert (out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()) is PATTERNS[pattern]
