"""Reading and writing overlapping parts of one tensor in a single in-place op (``x[1:] += x[:-1]``).

An elementwise in-place op (``add_``, ``copy_``, ``+=``, item assignment...) checks its inputs against what it
writes: when an input and the written tensor lie in one storage, both dense, and their memory ranges overlap
without being the same, torch refuses the op at the call, in any grad mode (*unsupported operation: some elements
of the input tensor and the written-to tensor refer to a single memory location*). Only what the text shows is
judged: two basic slices of the first dimension of one tensor, with constant bounds (``buf[:-1]`` and
``buf[1:]``). Slices of other dimensions are strided, and torch does not check those.
"""

from __future__ import annotations

import ast

# elementwise in-place methods (TensorIterator ops), all of which check their inputs against the output, measured
CHECKED_METHODS = frozenset({
    "add_", "sub_", "mul_", "div_", "true_divide_", "floor_divide_", "pow_", "lerp_", "addcmul_", "addcdiv_",
    "atan2_", "fmod_", "remainder_", "hypot_", "clamp_", "clamp_min_", "clamp_max_", "copysign_", "xlogy_",
    "copy_", "subtract_", "multiply_", "divide_", "float_power_", "maximum_", "minimum_", "fmax_", "fmin_",
    "bitwise_and_", "bitwise_or_", "bitwise_xor_", "logical_and_", "logical_or_", "logical_xor_",
    "eq_", "ne_", "lt_", "le_", "gt_", "ge_", "nextafter_",
})

_LARGE = 1 << 40  # the length of the sliced dimension, unknown: taken larger than any bound the code writes


def _bound(node: ast.expr | None, default: int) -> int | None:
    if node is None:
        return default
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value if node.value >= 0 else _LARGE + node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return _LARGE - node.operand.value
    return None


def _first_dim_range(node: ast.AST) -> tuple[int, int] | None:
    """``x[a:b]`` (or ``x[a:b, :]``, ``x[a:b, ...]``): the range of the first dimension it takes, or None."""
    if not isinstance(node, ast.Subscript):
        return None
    sl = node.slice
    rest: list[ast.expr] = []
    if isinstance(sl, ast.Tuple) and sl.elts:
        rest = list(sl.elts[1:])
        sl = sl.elts[0]
    if not isinstance(sl, ast.Slice) or (sl.step is not None and _bound(sl.step, 1) != 1):
        return None
    for r in rest:
        full = isinstance(r, ast.Slice) and r.lower is None and r.upper is None and r.step is None
        if not (full or (isinstance(r, ast.Constant) and r.value is Ellipsis)):
            return None
    lo, hi = _bound(sl.lower, 0), _bound(sl.upper, _LARGE)
    if lo is None or hi is None:
        return None
    return lo, hi


def partial_overlap(written: ast.AST, read: ast.AST) -> bool:
    """Do ``written`` and ``read`` slice one tensor (the same name or attribute) into ranges of its first dimension
    that overlap without being the same?"""
    if not (isinstance(written, ast.Subscript) and isinstance(read, ast.Subscript)):
        return False
    if not isinstance(written.value, (ast.Name, ast.Attribute)) or ast.dump(written.value) != ast.dump(read.value):
        return False
    a, b = _first_dim_range(written), _first_dim_range(read)
    if a is None or b is None or a == b:
        return False
    return max(a[0], b[0]) < min(a[1], b[1])
