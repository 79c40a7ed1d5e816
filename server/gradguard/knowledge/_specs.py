"""The callables the table covers, each with small sample inputs (float32 CPU).

Shapes: (4, 6) for most ops, (2, 3, 4, 4) for convolution / normalization / pooling; int64 tensors for
indices and targets, bool tensors for masks. Every tensor here is a template: the engine copies it per run.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from gradguard.knowledge._engine import Inputs, Spec


class Unavailable(AttributeError):
    """The installed torch has no such callable (an older torch): its entry is left out of the table."""


class _Missing:
    """Stands for a callable the installed torch lacks; calling it raises :class:`Unavailable`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = name.rsplit(".", 1)[-1]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise Unavailable(f"{self.name} is not in torch {torch.__version__}")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self.name}.{attr}")


class _Lenient:
    """A torch namespace whose missing attributes are :class:`_Missing` instead of errors, so that the probe runs
    on every torch the package accepts (``nn.RMSNorm`` and ``F.rms_norm`` only exist from torch 2.4)."""

    def __init__(self, module: Any, name: str) -> None:
        self._module = module
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        try:
            return getattr(self._module, attr)
        except AttributeError:
            return _Missing(f"{self._name}.{attr}")


def missing(spec: Spec) -> bool:
    return isinstance(spec.fn, _Missing)


F: Any = _Lenient(torch.nn.functional, "torch.nn.functional")
nn: Any = _Lenient(torch.nn, "torch.nn")


def R(*shape: int) -> torch.Tensor:
    """Floats in (0.1, 0.9): inside the domain of log, sqrt, acos, atanh, logit..."""
    return torch.rand(*shape) * 0.8 + 0.1


def N(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def L(*shape: int, high: int = 4) -> torch.Tensor:
    return torch.randint(0, high, shape)


def B(*shape: int) -> torch.Tensor:
    return torch.rand(*shape) > 0.5


def _in(*args: Any, **kwargs: Any) -> Inputs:
    """Inputs from factories: each positional may be a zero-argument callable producing a value."""

    def make() -> tuple[list[Any], dict[str, Any]]:
        a = [v() if callable(v) else v for v in args]
        k = {n: (v() if callable(v) else v) for n, v in kwargs.items()}
        return a, k

    return make


def x46() -> torch.Tensor:
    return N(4, 6)


def p46() -> torch.Tensor:
    return R(4, 6)


def c46() -> torch.Tensor:
    """Complex samples (spectral layers, FFT features)."""
    return torch.randn(4, 6, dtype=torch.complex64)


def img() -> torch.Tensor:
    return N(2, 3, 4, 4)


def seq() -> torch.Tensor:
    return N(2, 3, 6)


def fn(name: str, f: Callable[..., Any], inputs: Inputs, **kw: Any) -> Spec:
    return Spec(name=name, kind="function", fn=f, inputs=inputs, **kw)


def _method(attr: str) -> Callable[..., Any]:
    def call(self: Any, *a: Any, **k: Any) -> Any:
        return getattr(self, attr)(*a, **k)

    call.__name__ = attr
    return call


def meth(attr: str, inputs: Inputs, **kw: Any) -> Spec:
    kw.setdefault("aten", attr)
    return Spec(name=f"Tensor.{attr}", kind="method", fn=_method(attr), inputs=inputs, **kw)


def op(name: str, f: Callable[..., Any], inputs: Inputs, names: list[str]) -> Spec:
    return Spec(name=f"operator.{name}", kind="operator", fn=f, inputs=inputs, names=names, params=names)


def mod(name: str, factory: Callable[[], nn.Module], inputs: Inputs, **kw: Any) -> Spec:
    return Spec(name=f"torch.nn.{name}", kind="module", fn=factory, inputs=inputs, **kw)


UNARY = [
    "exp", "log", "sigmoid", "tanh", "relu", "sin", "cos", "tan", "sqrt", "rsqrt", "abs", "erf", "erfc",
    "erfinv", "exp2", "expm1", "log2", "log10", "log1p", "reciprocal", "square", "neg", "asin", "acos",
    "atan", "sinh", "cosh", "asinh", "atanh", "ceil", "floor", "round", "trunc", "frac", "sign", "sgn",
    "lgamma", "digamma", "logit", "i0", "sinc", "deg2rad", "rad2deg", "nan_to_num", "fix", "negative",
    "arcsin", "arccos", "arctan", "absolute", "positive", "conj_physical", "arcsinh", "arctanh",
    "acosh", "arccosh",
]
BINARY = [
    "add", "sub", "mul", "div", "pow", "atan2", "maximum", "minimum", "fmod", "remainder", "hypot",
    "copysign", "true_divide", "floor_divide", "xlogy", "logaddexp", "logaddexp2", "fmax", "fmin",
    "subtract", "multiply", "divide", "arctan2", "float_power", "nextafter", "ldexp", "heaviside",
]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "greater_equal", "less_equal", "not_equal"]


def _unary_specs() -> list[Spec]:
    out: list[Spec] = []
    for n in UNARY:
        inp = _in(p46)
        if hasattr(torch, n):
            out.append(fn(f"torch.{n}", getattr(torch, n), inp, aten=n))
        if hasattr(torch, n + "_"):
            out.append(fn(f"torch.{n}_", getattr(torch, n + "_"), inp, aten=n + "_"))
        if hasattr(torch.Tensor, n):
            out.append(meth(n, inp))
        if hasattr(torch.Tensor, n + "_"):
            out.append(meth(n + "_", inp))
    return out


def _binary_specs() -> list[Spec]:
    out: list[Spec] = []
    for n in BINARY + COMPARE:
        inp = _in(p46, p46)
        if hasattr(torch, n):
            out.append(fn(f"torch.{n}", getattr(torch, n), inp, aten=n))
        if hasattr(torch.Tensor, n):
            out.append(meth(n, inp))
        if hasattr(torch.Tensor, n + "_"):
            out.append(meth(n + "_", inp))
    return out


def _operator_specs() -> list[Spec]:
    bin_names = ["self", "other"]
    out = []
    for n in ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lt", "le", "gt", "ge", "eq", "ne"]:
        f = getattr(operator, n)
        inp = _in(lambda: R(6, 6), lambda: R(6, 6)) if n == "matmul" else _in(p46, p46)
        out.append(op(n, f, inp, bin_names))
        if n in ("lt", "le", "gt", "ge", "eq", "ne"):
            continue
        fi = getattr(operator, "i" + n)
        out.append(op("i" + n, fi, inp, bin_names))
    for n in ["and_", "or_", "xor"]:
        out.append(op(n, getattr(operator, n), _in(lambda: B(4, 6), lambda: B(4, 6)), bin_names))
        inn = "i" + n.rstrip("_")
        out.append(op(inn, getattr(operator, inn), _in(lambda: B(4, 6), lambda: B(4, 6)), bin_names))
    for n in ["lshift", "rshift"]:
        out.append(op(n, getattr(operator, n), _in(lambda: L(4, 6), lambda: L(4, 6)), bin_names))
        out.append(op("i" + n, getattr(operator, "i" + n), _in(lambda: L(4, 6), lambda: L(4, 6)), bin_names))
    out.append(op("neg", operator.neg, _in(p46), ["self"]))
    out.append(op("pos", operator.pos, _in(p46), ["self"]))
    out.append(op("abs", operator.abs, _in(p46), ["self"]))
    out.append(op("invert", operator.invert, _in(lambda: B(4, 6)), ["self"]))
    out.append(op("getitem", operator.getitem, _in(p46, 1), ["self", "key"]))
    out.append(
        Spec(
            name="operator.getitem[key=Tensor]", kind="operator", fn=operator.getitem,
            inputs=_in(p46, lambda: torch.tensor([0, 2])), names=["self", "key"], params=["self", "key"],
            note="advanced indexing with an index tensor: a copy, not a view",
        )
    )
    out.append(
        Spec(
            name="operator.getitem[key=mask]", kind="operator", fn=operator.getitem,
            inputs=_in(p46, lambda: B(4, 6)), names=["self", "key"], params=["self", "key"],
            note="boolean-mask indexing: a copy, not a view",
        )
    )
    out.append(op("setitem", operator.setitem, _in(p46, 1, lambda: R(6)), ["self", "key", "value"]))
    for key, make, note in [
        ("Tensor", lambda: torch.tensor([0, 2]), "x[index_tensor] = v: index_put_"),
        ("mask", lambda: B(4, 6), "x[bool_mask] = v: index_put_ with a mask"),
    ]:
        out.append(
            Spec(
                name=f"operator.setitem[key={key}]", kind="operator", fn=operator.setitem,
                inputs=_in(p46, make, lambda: R(1)), names=["self", "key", "value"],
                params=["self", "key", "value"], note=note,
            )
        )
    return out


def _fn_specs() -> list[Spec]:
    mm = _in(lambda: R(4, 6), lambda: R(6, 5))
    out = [
        fn("torch.matmul", torch.matmul, mm, aten="matmul"),
        fn("torch.mm", torch.mm, mm, aten="mm"),
        fn("torch.bmm", torch.bmm, _in(lambda: R(2, 4, 6), lambda: R(2, 6, 5)), aten="bmm"),
        fn("torch.mv", torch.mv, _in(p46, lambda: R(6)), aten="mv"),
        fn("torch.dot", torch.dot, _in(lambda: R(6), lambda: R(6)), aten="dot"),
        fn("torch.outer", torch.outer, _in(lambda: R(4), lambda: R(6)), aten="outer"),
        fn("torch.addmm", torch.addmm, _in(lambda: R(4, 5), lambda: R(4, 6), lambda: R(6, 5)), aten="addmm"),
        fn("torch.baddbmm", torch.baddbmm, _in(lambda: R(2, 4, 5), lambda: R(2, 4, 6), lambda: R(2, 6, 5)), aten="baddbmm"),
        fn("torch.einsum", torch.einsum, _in("ij,jk->ik", lambda: R(4, 6), lambda: R(6, 5)), names=["equation", "operand0", "operand1"], params=["equation", "operand0", "operand1", "operand2", "operand3"], note="operands are variadic (*operands); numbered here"),
        fn("torch.cat", torch.cat, _in(lambda: [R(4, 6), R(4, 6)]), aten="cat"),
        fn("torch.concat", torch.concat, _in(lambda: [R(4, 6), R(4, 6)]), aten="concat"),
        fn("torch.stack", torch.stack, _in(lambda: [R(4, 6), R(4, 6)]), aten="stack"),
        # sparse tensors: the constructor's backward reads the tensor it built (an in-place add to it breaks it)
        fn("torch.sparse_coo_tensor", torch.sparse_coo_tensor,
           _in(lambda: torch.tensor([[0, 1, 2], [1, 2, 0]]), lambda: R(3), (3, 3)), names=["indices", "values", "size"],
           params=["indices", "values", "size"], aten="sparse_coo_tensor.indices_size"),
        fn("torch.hstack", torch.hstack, _in(lambda: [R(4, 6), R(4, 6)]), aten="hstack"),
        fn("torch.vstack", torch.vstack, _in(lambda: [R(4, 6), R(4, 6)]), aten="vstack"),
        fn("torch.softmax", torch.softmax, _in(p46, 1), aten="softmax"),
        fn("torch.log_softmax", torch.log_softmax, _in(p46, 1), aten="log_softmax"),
        fn("torch.sum", torch.sum, _in(p46), aten="sum"),
        fn("torch.mean", torch.mean, _in(p46), aten="mean"),
        fn("torch.prod", torch.prod, _in(p46), aten="prod"),
        fn("torch.cumsum", torch.cumsum, _in(p46, 1), aten="cumsum"),
        fn("torch.cumprod", torch.cumprod, _in(p46, 1), aten="cumprod"),
        fn("torch.logsumexp", torch.logsumexp, _in(p46, 1), aten="logsumexp"),
        fn("torch.std", torch.std, _in(p46), aten="std"),
        fn("torch.var", torch.var, _in(p46), aten="var"),
        fn("torch.norm", torch.norm, _in(p46), params=["input", "p", "dim", "keepdim", "out", "dtype"]),
        fn("torch.dist", torch.dist, _in(p46, p46), aten="dist"),
        fn("torch.clamp", torch.clamp, _in(p46, 0.3, 0.7), aten="clamp"),
        fn("torch.clamp_", torch.clamp_, _in(p46, 0.3, 0.7), aten="clamp_"),
        fn("torch.clip_", torch.clip_, _in(p46, 0.3, 0.7), aten="clip_"),
        fn("torch.addmv_", torch.addmv_, _in(lambda: R(4), p46, lambda: R(6)), aten="addmv_"),
        fn("torch.as_strided_", torch.as_strided_, _in(p46, (2, 2), (1, 1)), aten="as_strided_"),
        fn("torch.as_strided", torch.as_strided, _in(p46, (2, 2), (1, 1)), aten="as_strided"),
        fn("torch.index_put_", torch.index_put_, _in(p46, lambda: (torch.tensor([0, 2]),), lambda: R(2, 6)), aten="index_put_"),
        fn("torch.index_put", torch.index_put, _in(p46, lambda: (torch.tensor([0, 2]),), lambda: R(2, 6)), aten="index_put"),
        fn("torch.clip", torch.clip, _in(p46, 0.3, 0.7), aten="clip"),
        fn("torch.where", torch.where, _in(lambda: B(4, 6), p46, p46), aten="where"),
        fn("torch.masked_fill", torch.masked_fill, _in(p46, lambda: B(4, 6), 0.0), aten="masked_fill"),
        fn("torch.gather", torch.gather, _in(p46, 1, lambda: L(4, 6, high=6)), aten="gather"),
        fn("torch.index_select", torch.index_select, _in(p46, 1, lambda: torch.tensor([0, 2])), aten="index_select"),
        fn("torch.bernoulli", torch.bernoulli, _in(p46), aten="bernoulli"),
        fn("torch.max", torch.max, _in(p46), aten="max"),
        fn("torch.max[dim]", torch.max, _in(p46, 1), aten="max"),
        fn("torch.min", torch.min, _in(p46), aten="min"),
        fn("torch.min[dim]", torch.min, _in(p46, 1), aten="min"),
        fn("torch.amax", torch.amax, _in(p46, 1), aten="amax"),
        fn("torch.amin", torch.amin, _in(p46, 1), aten="amin"),
        fn("torch.argmax", torch.argmax, _in(p46), aten="argmax"),
        fn("torch.sort", torch.sort, _in(p46), aten="sort"),
        fn("torch.topk", torch.topk, _in(p46, 2), aten="topk"),
        fn("torch.median", torch.median, _in(p46), aten="median"),
        fn("torch.median[dim]", torch.median, _in(p46, 1), aten="median"),
        fn("torch.kthvalue", torch.kthvalue, _in(p46, 2), aten="kthvalue"),
        fn("torch.mode", torch.mode, _in(p46), aten="mode"),
        fn("torch.cummax", torch.cummax, _in(p46, 1), aten="cummax"),
        fn("torch.cummin", torch.cummin, _in(p46, 1), aten="cummin"),
        fn("torch.lerp", torch.lerp, _in(p46, p46, p46), aten="lerp"),
        fn("torch.addcmul", torch.addcmul, _in(p46, p46, p46), aten="addcmul"),
        fn("torch.addcdiv", torch.addcdiv, _in(p46, p46, p46), aten="addcdiv"),
        fn("torch.tril", torch.tril, _in(p46), aten="tril"),
        fn("torch.triu", torch.triu, _in(p46), aten="triu"),
        fn("torch.flip", torch.flip, _in(p46, [0]), aten="flip"),
        fn("torch.roll", torch.roll, _in(p46, 1, 1), aten="roll"),
        fn("torch.cdist", torch.cdist, _in(p46, p46), params=["x1", "x2", "p", "compute_mode"]),
        fn("torch.trace", torch.trace, _in(lambda: R(6, 6)), aten="trace"),
        fn("torch.diag", torch.diag, _in(lambda: R(6)), aten="diag"),
        fn("torch.det", torch.det, _in(lambda: R(4, 4) + torch.eye(4)), aten="det"),
        fn("torch.inverse", torch.inverse, _in(lambda: R(4, 4) + torch.eye(4) * 4), aten="inverse"),
        fn("torch.relu", torch.relu, _in(x46), aten="relu"),
        fn("torch.relu_", torch.relu_, _in(x46), aten="relu_"),
        fn("torch.sigmoid_", torch.sigmoid_, _in(x46), aten="sigmoid_"),
        fn("torch.tanh_", torch.tanh_, _in(x46), aten="tanh_"),
        fn("torch.selu", torch.selu, _in(x46), aten="selu"),
        fn("torch.selu_", torch.selu_, _in(x46), aten="selu_"),
        fn("torch.celu", torch.celu, _in(x46), aten="celu"),
        fn("torch.celu_", torch.celu_, _in(x46), aten="celu_"),
        fn("torch.dropout", torch.dropout, _in(x46, 0.5, True), aten="dropout"),
        fn("torch.dropout_", torch.dropout_, _in(x46, 0.5, True), aten="dropout_"),
        fn("torch.flatten", torch.flatten, _in(img), aten="flatten"),
        fn("torch.reshape", torch.reshape, _in(p46, (6, 4)), aten="reshape"),
        fn("torch.transpose", torch.transpose, _in(p46, 0, 1), aten="transpose"),
        fn("torch.t", torch.t, _in(p46), aten="t"),
        fn("torch.permute", torch.permute, _in(p46, (1, 0)), aten="permute"),
        fn("torch.squeeze", torch.squeeze, _in(lambda: R(4, 1, 6)), aten="squeeze"),
        fn("torch.unsqueeze", torch.unsqueeze, _in(p46, 0), aten="unsqueeze"),
        fn("torch.narrow", torch.narrow, _in(p46, 1, 0, 2), aten="narrow"),
        fn("torch.select", torch.select, _in(p46, 0, 1), aten="select"),
        fn("torch.diagonal", torch.diagonal, _in(p46), aten="diagonal"),
        fn("torch.movedim", torch.movedim, _in(p46, 0, 1), aten="movedim"),
        fn("torch.split", torch.split, _in(p46, 2), params=["tensor", "split_size_or_sections", "dim"]),
        fn("torch.chunk", torch.chunk, _in(p46, 2), aten="chunk"),
        fn("torch.unbind", torch.unbind, _in(p46), aten="unbind"),
        fn("torch.tensor_split", torch.tensor_split, _in(p46, 2), aten="tensor_split"),
        fn("torch.split_with_sizes", torch.split_with_sizes, _in(p46, [2, 2]), aten="split_with_sizes"),
        fn("torch.unsafe_split", torch.unsafe_split, _in(p46, 2), aten="unsafe_split"),
        fn("torch.unsafe_chunk", torch.unsafe_chunk, _in(p46, 2), aten="unsafe_chunk"),
        fn("torch.hsplit", torch.hsplit, _in(p46, 2), aten="hsplit"),
        fn("torch.vsplit", torch.vsplit, _in(p46, 2), aten="vsplit"),
        fn("torch.var_mean", torch.var_mean, _in(p46), aten="var_mean"),
        fn("torch.std_mean", torch.std_mean, _in(p46), aten="std_mean"),
        fn("torch.aminmax", torch.aminmax, _in(p46), aten="aminmax"),
        fn("torch.frexp", torch.frexp, _in(p46), aten="frexp"),
        fn("torch.meshgrid", torch.meshgrid, _in(lambda: R(4), lambda: R(6)), params=["tensors", "indexing"]),
        fn("torch.broadcast_tensors", torch.broadcast_tensors, _in(lambda: R(4, 1), lambda: R(6)),
           params=["tensors"]),
        fn("torch.svd", torch.svd, _in(p46), aten="svd"),
        fn("torch.linalg.svd", torch.linalg.svd, _in(p46), aten="linalg_svd"),
        fn("torch.linalg.qr", torch.linalg.qr, _in(p46), aten="linalg_qr"),
        fn("torch.linalg.eigh", torch.linalg.eigh, _in(lambda: (lambda m: m @ m.T)(R(4, 4))), aten="linalg_eigh"),
        fn("torch.linalg.slogdet", torch.linalg.slogdet, _in(lambda: R(4, 4) + torch.eye(4)), aten="linalg_slogdet"),
        fn("torch.slogdet", torch.slogdet, _in(lambda: R(4, 4) + torch.eye(4)), aten="slogdet"),
        fn("torch.linalg.norm", torch.linalg.norm, _in(p46), params=["A", "ord", "dim", "keepdim", "out", "dtype"]),
        fn("torch.linalg.vector_norm", torch.linalg.vector_norm, _in(p46),
           params=["x", "ord", "dim", "keepdim", "out", "dtype"]),
        fn("torch.linalg.matrix_norm", torch.linalg.matrix_norm, _in(p46),
           params=["A", "ord", "dim", "keepdim", "out", "dtype"]),
        fn("torch.linalg.inv", torch.linalg.inv, _in(lambda: R(4, 4) + torch.eye(4) * 4), aten="linalg_inv"),
        fn("torch.linalg.det", torch.linalg.det, _in(lambda: R(4, 4) + torch.eye(4)), aten="linalg_det"),
        fn("torch.linalg.solve", torch.linalg.solve, _in(lambda: R(4, 4) + torch.eye(4) * 4, lambda: R(4, 6)),
           aten="linalg_solve"),
        fn("torch.linalg.cholesky", torch.linalg.cholesky, _in(lambda: (lambda m: m @ m.T + torch.eye(4))(R(4, 4))),
           aten="linalg_cholesky"),
        fn("torch.linalg.pinv", torch.linalg.pinv, _in(p46), aten="linalg_pinv"),
        fn("torch.linalg.cross", torch.linalg.cross, _in(lambda: R(4, 3), lambda: R(4, 3)), aten="linalg_cross"),
        fn("torch.linalg.vecdot", torch.linalg.vecdot, _in(p46, p46), params=["x", "y", "dim", "out"]),
        fn("torch.linalg.matrix_exp", torch.linalg.matrix_exp, _in(lambda: R(4, 4)), aten="linalg_matrix_exp"),
        fn("torch.linalg.matrix_power", torch.linalg.matrix_power, _in(lambda: R(4, 4), 3),
           aten="linalg_matrix_power"),
        fn("torch.linalg.svdvals", torch.linalg.svdvals, _in(p46), aten="linalg_svdvals"),
        fn("torch.linalg.eigvalsh", torch.linalg.eigvalsh, _in(lambda: (lambda m: m @ m.T)(R(4, 4))),
           aten="linalg_eigvalsh"),
        fn("torch.linalg.solve_triangular", torch.linalg.solve_triangular,
           _in(lambda: torch.triu(R(4, 4)) + torch.eye(4), lambda: R(4, 6), upper=True),
           params=["A", "B", "upper", "left", "unitriangular", "out"]),
        fn("torch.linalg.multi_dot", torch.linalg.multi_dot, _in(lambda: [R(4, 6), R(6, 4)]), params=["tensors", "out"]),
        fn("torch.cross", torch.cross, _in(lambda: R(4, 3), lambda: R(4, 3), dim=1), aten="cross"),
        fn("torch.pinverse", torch.pinverse, _in(p46), aten="pinverse"),
        fn("torch.matrix_exp", torch.matrix_exp, _in(lambda: R(4, 4)), aten="matrix_exp"),
        fn("torch.matrix_power", torch.matrix_power, _in(lambda: R(4, 4), 3), aten="matrix_power"),
        fn("torch.logdet", torch.logdet, _in(lambda: (lambda m: m @ m.T + torch.eye(4))(R(4, 4))), aten="logdet"),
        fn("torch.kron", torch.kron, _in(lambda: R(2, 3), lambda: R(3, 2)), aten="kron"),
        fn("torch.vdot", torch.vdot, _in(lambda: R(4), lambda: R(4)), aten="vdot"),
        fn("torch.inner", torch.inner, _in(p46, p46), aten="inner"),
        fn("torch.tensordot", torch.tensordot, _in(p46, lambda: R(6, 4), dims=1), params=["a", "b", "dims", "out"]),
        fn("torch.renorm", torch.renorm, _in(p46, 2, 0, 1.0), aten="renorm"),
        fn("torch.diag_embed", torch.diag_embed, _in(p46), aten="diag_embed"),
        fn("torch.quantile", torch.quantile, _in(p46, 0.5), aten="quantile"),
        fn("torch.cholesky", torch.cholesky, _in(lambda: (lambda m: m @ m.T + torch.eye(4))(R(4, 4))), aten="cholesky"),
        fn("torch.broadcast_to", torch.broadcast_to, _in(lambda: R(1, 6), (4, 6)), aten="broadcast_to"),
        fn("torch.take_along_dim", torch.take_along_dim, _in(p46, lambda: L(4, 2, high=6), dim=1), aten="take_along_dim"),
        fn("torch.diff", torch.diff, _in(p46), aten="diff"),
        fn("torch.nansum", torch.nansum, _in(p46), aten="nansum"),
        fn("torch.nanmean", torch.nanmean, _in(p46), aten="nanmean"),
        fn("torch.swapaxes", torch.swapaxes, _in(p46, 0, 1), aten="swapaxes"),
        fn("torch.moveaxis", torch.moveaxis, _in(p46, 0, 1), aten="moveaxis"),
        fn("torch.qr", torch.qr, _in(p46), aten="qr"),
        fn("torch.ger", torch.ger, _in(lambda: R(4), lambda: R(6)), aten="ger"),
        fn("torch.rot90", torch.rot90, _in(p46), aten="rot90"),
        fn("torch.fliplr", torch.fliplr, _in(p46), aten="fliplr"),
        fn("torch.flipud", torch.flipud, _in(p46), aten="flipud"),
        fn("torch.block_diag", torch.block_diag, _in(lambda: R(2, 2), lambda: R(3, 3)), aten="block_diag"),
        fn("torch.trapezoid", torch.trapezoid, _in(p46), aten="trapezoid"),
        fn("torch.cartesian_prod", torch.cartesian_prod, _in(lambda: R(3), lambda: R(2)), aten="cartesian_prod"),
        fn("torch.atleast_2d", torch.atleast_2d, _in(lambda: R(4)), aten="atleast_2d"),
        fn("torch.ravel", torch.ravel, _in(p46), aten="ravel"),
        fn("torch.take", torch.take, _in(p46, lambda: L(3, high=24)), aten="take"),
        fn("torch.msort", torch.msort, _in(p46), aten="msort"),
        fn("torch.logcumsumexp", torch.logcumsumexp, _in(p46, 1), aten="logcumsumexp"),
        fn("torch.special.logit", torch.special.logit, _in(p46), aten="logit"),
        fn("torch.special.xlogy", torch.special.xlogy, _in(p46, p46), aten="xlogy"),
        fn("torch.special.entr", torch.special.entr, _in(p46), params=["input", "out"]),
        fn("torch.special.erfcx", torch.special.erfcx, _in(p46), params=["input", "out"]),
        fn("torch.special.log_ndtr", torch.special.log_ndtr, _in(p46), params=["input", "out"]),
        fn("torch.special.ndtr", torch.special.ndtr, _in(p46), params=["input", "out"]),
        fn("torch.special.i0e", torch.special.i0e, _in(p46), params=["input", "out"]),
        fn("torch.special.i1e", torch.special.i1e, _in(p46), params=["input", "out"]),
        fn("torch.concatenate", torch.concatenate, _in(lambda: [R(4, 6), R(4, 6)]), params=["tensors", "dim", "out"]),
        fn("torch.detach", torch.detach, _in(p46), aten="detach"),
        fn("torch.clone", torch.clone, _in(p46), aten="clone"),
        fn("torch.square_", torch.square_, _in(p46), aten="square_"),
        fn("torch.addmv", torch.addmv, _in(lambda: R(4), p46, lambda: R(6)), aten="addmv"),
        fn("torch.cosine_similarity", torch.cosine_similarity, _in(p46, p46), aten="cosine_similarity"),
        fn("torch.layer_norm", torch.layer_norm, _in(p46, [6]), aten="layer_norm"),
        fn("torch.conv2d", torch.conv2d, _in(img, lambda: N(5, 3, 3, 3)), aten="conv2d"),
        fn("torch.index_add", torch.index_add, _in(p46, 1, lambda: torch.tensor([0, 2]), lambda: R(4, 2)), aten="index_add"),
        fn("torch.scatter", torch.scatter, _in(p46, 1, lambda: L(4, 2, high=6), lambda: R(4, 2)), aten="scatter"),
        fn("torch.scatter_add", torch.scatter_add, _in(p46, 1, lambda: L(4, 2, high=6), lambda: R(4, 2)), aten="scatter_add"),
        fn("torch.masked_select", torch.masked_select, _in(p46, lambda: B(4, 6)), aten="masked_select"),
        fn("torch.repeat_interleave", torch.repeat_interleave, _in(p46, 2), aten="repeat_interleave"),
        fn("torch.tile", torch.tile, _in(p46, (2, 1)), aten="tile"),
        fn("torch.all", torch.all, _in(lambda: B(4, 6)), aten="all"),
        fn("torch.any", torch.any, _in(lambda: B(4, 6)), aten="any"),
        fn("torch.isnan", torch.isnan, _in(p46), aten="isnan"),
        fn("torch.isfinite", torch.isfinite, _in(p46), aten="isfinite"),
        *(fn(f"torch.{name}", getattr(torch, name), _in(p46), aten=name)
          for name in ("isinf", "isposinf", "isneginf", "signbit", "isreal", "nonzero", "argwhere", "count_nonzero")),
        fn("torch.isclose", torch.isclose, _in(p46, p46), aten="isclose"),
        fn("torch.zeros_like", torch.zeros_like, _in(p46), aten="zeros_like"),
        fn("torch.ones_like", torch.ones_like, _in(p46), aten="ones_like"),
        fn("torch.rand_like", torch.rand_like, _in(p46), aten="rand_like"),
        fn("torch.randn_like", torch.randn_like, _in(p46), aten="randn_like"),
        fn("torch.full_like", torch.full_like, _in(p46, 1.0), aten="full_like"),
        fn("torch.empty_like", torch.empty_like, _in(p46), aten="empty_like"),
        fn("torch.multinomial", torch.multinomial, _in(p46, 2), aten="multinomial"),
        fn("torch.binomial", torch.binomial, _in(lambda: torch.full((4, 6), 5.0), p46), aten="binomial"),
        fn("torch.poisson", torch.poisson, _in(p46), aten="poisson"),
    ]
    return out


def _method_specs() -> list[Spec]:
    out: list[Spec] = [
        meth("matmul", _in(lambda: R(4, 6), lambda: R(6, 5))),
        meth("mm", _in(lambda: R(4, 6), lambda: R(6, 5))),
        meth("bmm", _in(lambda: R(2, 4, 6), lambda: R(2, 6, 5))),
        meth("sum", _in(p46)),
        meth("mean", _in(p46)),
        meth("prod", _in(p46)),
        meth("cumsum", _in(p46, 1)),
        meth("cumsum_", _in(p46, 1)),
        meth("cumprod", _in(p46, 1)),
        meth("std", _in(p46)),
        meth("var", _in(p46)),
        meth("norm", _in(p46), params=["self", "p", "dim", "keepdim", "dtype"]),
        meth("inverse", _in(lambda: R(4, 4) + torch.eye(4) * 4)),
        meth("det", _in(lambda: R(4, 4) + torch.eye(4))),
        meth("logdet", _in(lambda: (lambda m: m @ m.T + torch.eye(4))(R(4, 4)))),
        meth("pinverse", _in(p46)),
        meth("matrix_exp", _in(lambda: R(4, 4))),
        meth("matrix_power", _in(lambda: R(4, 4), 3)),
        meth("cross", _in(lambda: R(4, 3), lambda: R(4, 3), dim=1)),
        meth("kron", _in(lambda: R(2, 3), lambda: R(3, 2))),
        meth("inner", _in(p46, p46)),
        meth("renorm", _in(p46, 2, 0, 1.0)),
        meth("diag_embed", _in(p46)),
        meth("quantile", _in(p46, 0.5)),
        meth("cholesky", _in(lambda: (lambda m: m @ m.T + torch.eye(4))(R(4, 4)))),
        meth("broadcast_to", _in(lambda: R(1, 6), (4, 6))),
        meth("take_along_dim", _in(p46, lambda: L(4, 2, high=6), dim=1)),
        meth("diff", _in(p46)),
        meth("nansum", _in(p46)),
        meth("nanmean", _in(p46)),
        meth("moveaxis", _in(p46, 0, 1)),
        meth("qr", _in(p46)),
        meth("ger", _in(lambda: R(4), lambda: R(6))),
        meth("rot90", _in(p46)),
        meth("fliplr", _in(p46)),
        meth("flipud", _in(p46)),
        meth("ravel", _in(p46)),
        meth("take", _in(p46, lambda: L(3, high=24))),
        meth("median", _in(p46)),
        meth("msort", _in(p46)),
        meth("mv", _in(p46, lambda: R(6))),
        meth("dot", _in(lambda: R(4), lambda: R(4))),
        meth("amin", _in(p46)),
        meth("trace", _in(lambda: R(6, 6))),
        meth("tile", _in(p46, (2, 1))),
        meth("repeat_interleave", _in(p46, 2)),
        meth("outer", _in(lambda: R(4), lambda: R(6))),
        meth("diag", _in(lambda: R(6))),
        meth("vdot", _in(lambda: R(4), lambda: R(4))),
        meth("logcumsumexp", _in(p46, 1)),
        meth("softmax", _in(p46, 1)),
        meth("log_softmax", _in(p46, 1)),
        meth("clamp", _in(p46, 0.3, 0.7)),
        meth("clamp_", _in(p46, 0.3, 0.7)),
        meth("clamp_min", _in(p46, 0.3)),
        meth("clamp_min_", _in(p46, 0.3)),
        meth("clamp_max", _in(p46, 0.3)),
        meth("clamp_max_", _in(p46, 0.3)),
        meth("clip", _in(p46, 0.3, 0.7)),
        meth("clip_", _in(p46, 0.3, 0.7)),
        meth("masked_fill", _in(p46, lambda: B(4, 6), 0.0)),
        meth("masked_fill_", _in(p46, lambda: B(4, 6), 0.0)),
        meth("masked_scatter_", _in(p46, lambda: B(4, 6), p46)),
        meth("gather", _in(p46, 1, lambda: L(4, 6, high=6))),
        meth("index_select", _in(p46, 1, lambda: torch.tensor([0, 2]))),
        meth("index_add_", _in(p46, 1, lambda: torch.tensor([0, 2]), lambda: R(4, 2))),
        meth("index_copy_", _in(p46, 1, lambda: torch.tensor([0, 2]), lambda: R(4, 2))),
        meth("index_fill_", _in(p46, 1, lambda: torch.tensor([0, 2]), 0.5)),
        meth("index_put_", _in(p46, lambda: (torch.tensor([0, 2]),), lambda: R(2, 6))),
        meth("index_reduce_", _in(p46, 1, lambda: torch.tensor([0, 2]), lambda: R(4, 2), "prod")),
        meth("scatter_", _in(p46, 1, lambda: L(4, 2, high=6), lambda: R(4, 2))),
        meth("scatter_add_", _in(p46, 1, lambda: L(4, 2, high=6), lambda: R(4, 2))),
        meth("scatter_reduce_", _in(p46, 1, lambda: L(4, 2, high=6), lambda: R(4, 2), "sum")),
        meth("put_", _in(p46, lambda: torch.tensor([0, 2]), lambda: R(2))),
        meth("masked_scatter", _in(p46, lambda: B(4, 6), p46)),
        meth("bernoulli", _in(p46)),
        meth("bernoulli_", _in(p46, 0.5)),
        meth("max", _in(p46)),
        meth("min", _in(p46)),
        meth("sort", _in(p46)),
        meth("topk", _in(p46, 2)),
        meth("kthvalue", _in(p46, 2)),
        meth("mode", _in(p46)),
        meth("cummax", _in(p46, 1)),
        meth("cummin", _in(p46, 1)),
        meth("argmax", _in(p46)),
        meth("lerp_", _in(p46, p46, p46)),
        meth("addcmul_", _in(p46, p46, p46)),
        meth("addcdiv_", _in(p46, p46, p46)),
        meth("addmm_", _in(lambda: R(4, 5), lambda: R(4, 6), lambda: R(6, 5))),
        meth("addbmm_", _in(lambda: R(4, 5), lambda: R(2, 4, 6), lambda: R(2, 6, 5))),
        meth("addmv_", _in(lambda: R(4), p46, lambda: R(6))),
        meth("addr_", _in(p46, lambda: R(4), lambda: R(6))),
        meth("map2_", _in(p46, p46, p46, lambda: (lambda a, b, c: a + b + c))),
        meth("baddbmm_", _in(lambda: R(2, 4, 5), lambda: R(2, 4, 6), lambda: R(2, 6, 5))),
        meth("tril_", _in(p46)),
        meth("triu_", _in(p46)),
        meth("fill_", _in(p46, 0.5)),
        meth("zero_", _in(p46)),
        meth("copy_", _in(p46, p46)),
        meth("uniform_", _in(p46)),
        meth("normal_", _in(p46)),
        meth("exponential_", _in(p46)),
        meth("geometric_", _in(p46, 0.5)),
        meth("cauchy_", _in(p46)),
        meth("log_normal_", _in(p46)),
        meth("random_", _in(p46)),
        meth("fill_diagonal_", _in(lambda: R(6, 6), 0.5)),
        meth("renorm_", _in(p46, 2, 0, 1.0)),
        meth("squeeze_", _in(lambda: R(4, 1, 6))),
        meth("unsqueeze_", _in(p46, 0)),
        meth("t_", _in(p46)),
        meth("transpose_", _in(p46, 0, 1)),
        meth("resize_", _in(p46, (4, 6))),
        meth("resize_as_", _in(p46, p46)),
        meth("set_", _in(p46, p46)),
        meth("detach_", _in(p46)),
        meth("requires_grad_", _in(p46)),
        meth("share_memory_", _in(p46)),
        meth("retain_grad", _in(p46)),
        meth("apply_", _in(p46, lambda: (lambda v: v * 2))),
        meth("map_", _in(p46, p46, lambda: (lambda a, b: a + b))),
        meth("pow_", _in(p46, 2.0)),
        meth("float_power_", _in(lambda: R(4, 6).double(), 2.0)),
        meth("relu", _in(x46)),
        meth("relu_", _in(x46)),
        meth("sigmoid", _in(x46)),
        meth("sigmoid_", _in(x46)),
        meth("tanh", _in(x46)),
        meth("tanh_", _in(x46)),
        # views and copies
        meth("view", _in(p46, 6, 4)),
        meth("view_as", _in(p46, lambda: R(6, 4))),
        meth("reshape", _in(p46, 6, 4)),
        meth("reshape_as", _in(p46, lambda: R(6, 4))),
        meth("t", _in(p46)),
        meth("transpose", _in(p46, 0, 1)),
        meth("permute", _in(p46, 1, 0)),
        meth("expand", _in(lambda: R(1, 6), 4, 6)),
        meth("expand_as", _in(lambda: R(1, 6), p46)),
        meth("unsqueeze", _in(p46, 0)),
        meth("squeeze", _in(lambda: R(4, 1, 6))),
        meth("narrow", _in(p46, 1, 0, 2)),
        meth("select", _in(p46, 0, 1)),
        meth("detach", _in(p46)),
        meth("diagonal", _in(p46)),
        meth("unfold", _in(p46, 1, 2, 2)),
        meth("flatten", _in(img)),
        meth("unflatten", _in(p46, 1, (2, 3)), params=["self", "dim", "sizes"]),
        meth("movedim", _in(p46, 0, 1)),
        meth("split", _in(p46, 2), params=["self", "split_size", "dim"]),
        meth("chunk", _in(p46, 2)),
        meth("unbind", _in(p46)),
        meth("tensor_split", _in(p46, 2)),
        meth("split_with_sizes", _in(p46, [2, 2])),
        meth("unsafe_split", _in(p46, 2)),
        meth("unsafe_chunk", _in(p46, 2)),
        meth("hsplit", _in(p46, 2)),
        meth("vsplit", _in(p46, 2)),
        meth("aminmax", _in(p46)),
        meth("frexp", _in(p46)),
        meth("slogdet", _in(lambda: R(4, 4) + torch.eye(4))),
        meth("svd", _in(p46)),
        meth("contiguous", _in(p46)),
        meth("clone", _in(p46)),
        meth("float", _in(p46)),
        meth("double", _in(p46)),
        meth("half", _in(p46)),
        meth("bfloat16", _in(p46)),
        meth("long", _in(p46)),
        meth("int", _in(p46)),
        meth("bool", _in(p46)),
        meth("to", _in(p46, torch.float64)),
        meth("type", _in(p46, torch.float64)),
        meth("type_as", _in(p46, lambda: R(2).double())),
        meth("cpu", _in(p46)),
        meth("repeat", _in(p46, 2, 1)),
        meth("flip", _in(p46, [0])),
        meth("roll", _in(p46, 1, 1)),
        meth("masked_select", _in(p46, lambda: B(4, 6))),
        meth("index_add", _in(p46, 1, lambda: torch.tensor([0, 2]), lambda: R(4, 2))),
        meth("scatter", _in(p46, 1, lambda: L(4, 2, high=6), lambda: R(4, 2))),
        meth("scatter_add", _in(p46, 1, lambda: L(4, 2, high=6), lambda: R(4, 2))),
        meth("index_put", _in(p46, lambda: (torch.tensor([0, 2]),), lambda: R(2, 6))),
        meth("index_fill", _in(p46, 1, lambda: torch.tensor([0, 2]), 0.5)),
        meth("index_copy", _in(p46, 1, lambda: torch.tensor([0, 2]), lambda: R(4, 2))),
        meth("lerp", _in(p46, p46, p46)),
        meth("addcmul", _in(p46, p46, p46)),
        meth("addcdiv", _in(p46, p46, p46)),
        meth("addmm", _in(lambda: R(4, 5), lambda: R(4, 6), lambda: R(6, 5))),
        meth("tril", _in(p46)),
        meth("triu", _in(p46)),
        meth("new_zeros", _in(p46, (2, 2))),
        meth("new_ones", _in(p46, (2, 2))),
        meth("new_empty", _in(p46, (2, 2))),
        meth("new_full", _in(p46, (2, 2), 1.0)),
        meth("new_tensor", _in(p46, lambda: [1.0, 2.0])),
        meth("zero_", _in(p46)),
        meth("item", _in(lambda: R(1))),
        meth("tolist", _in(p46)),
        meth("numpy", _in(p46)),
        meth("logsumexp", _in(p46, 1)),
        meth("amax", _in(p46, 1)),
        meth("square", _in(p46)),
        meth("abs", _in(p46)),
        meth("all", _in(lambda: B(4, 6))),
        # predicates and index finders: masks and indices that never require grad (`x[~x.isnan()]` indexes with a
        # tensor, which copies)
        *(meth(name, _in(p46)) for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit",
                                            "isreal", "nonzero", "argwhere", "count_nonzero")),
        meth("isclose", _in(p46, p46)),
        meth("any", _in(lambda: B(4, 6))),
        meth("masked_fill", _in(p46, lambda: B(4, 6), 0.0)),
        meth("where", _in(p46, lambda: B(4, 6), p46)),
        meth("data_ptr", _in(p46)),
        meth("dim", _in(p46)),
        meth("size", _in(p46)),
        meth("numel", _in(p46)),
        meth("cumsum", _in(p46, 1)),
        meth("nan_to_num_", _in(p46)),
        meth("as_strided", _in(p46, (2, 2), (1, 1))),
        meth("as_strided_", _in(p46, (2, 2), (1, 1))),
        meth("swapaxes", _in(p46, 0, 1)),
        meth("swapaxes_", _in(p46, 0, 1)),
        meth("swapdims_", _in(p46, 0, 1)),
    ]
    for attr, note in [
        ("T", "attribute: the transpose, a view"),
        ("mT", "attribute: batched matrix transpose, a view"),
        ("H", "attribute: conjugate transpose (a view for real tensors)"),
        ("data", "attribute: shares storage but NOT the version counter: writes through .data are invisible to "
                 "autograd (no error, silently wrong gradients)"),
    ]:
        out.append(
            Spec(
                name=f"Tensor.{attr}", kind="method", fn=lambda self, attr=attr: getattr(self, attr),
                inputs=_in(p46), names=["self"], params=["self"], note=note, attribute=True,
            )
        )
    out.append(
        Spec(
            name="Tensor.__iter__", kind="method", fn=lambda self: list(iter(self)), inputs=_in(p46),
            names=["self"], params=["self"], note="iterating a tensor unbinds it along dim 0",
        )
    )
    return out


def _functional_specs() -> list[Spec]:
    acts: list[tuple[str, Inputs]] = [
        ("relu", _in(x46)), ("relu6", _in(x46)), ("leaky_relu", _in(x46, 0.2)), ("elu", _in(x46)),
        ("selu", _in(x46)), ("celu", _in(x46)), ("gelu", _in(x46)), ("silu", _in(x46)), ("mish", _in(x46)),
        ("hardswish", _in(x46)), ("hardsigmoid", _in(x46)), ("hardtanh", _in(x46)), ("softplus", _in(x46)),
        ("sigmoid", _in(x46)), ("tanh", _in(x46)), ("threshold", _in(x46, 0.1, 0.0)), ("rrelu", _in(x46)),
        ("glu", _in(x46)), ("logsigmoid", _in(x46)), ("softmax", _in(x46, 1)), ("log_softmax", _in(x46, 1)),
        ("softmin", _in(x46, 1)), ("softsign", _in(x46)), ("tanhshrink", _in(x46)),
        ("softshrink", _in(x46)), ("hardshrink", _in(x46)), ("gumbel_softmax", _in(x46)),
        ("prelu", _in(x46, lambda: torch.tensor([0.25]))),
        ("relu_", _in(x46)), ("elu_", _in(x46)), ("leaky_relu_", _in(x46, 0.2)), ("hardtanh_", _in(x46)),
        ("threshold_", _in(x46, 0.1, 0.0)), ("rrelu_", _in(x46)), ("celu_", _in(x46)), ("selu_", _in(x46)),
    ]
    out: list[Spec] = []
    for n, inp in acts:
        f = getattr(F, n)
        out.append(fn(f"torch.nn.functional.{n}", f, inp))
    for n in ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]:
        shape: Callable[[], torch.Tensor] = {
            "dropout1d": seq, "dropout2d": img, "dropout3d": lambda: N(2, 3, 2, 4, 4), "feature_alpha_dropout": img,
        }.get(n, x46)
        out.append(fn(f"torch.nn.functional.{n}", getattr(F, n), _in(shape, 0.5), train_kwarg="training"))
    F_ = "torch.nn.functional."
    out += [
        fn(F_ + "linear", F.linear, _in(p46, lambda: R(5, 6), lambda: R(5))),
        fn(F_ + "bilinear", F.bilinear, _in(p46, lambda: R(4, 5), lambda: R(3, 6, 5), lambda: R(3))),
        fn(F_ + "conv1d", F.conv1d, _in(seq, lambda: N(5, 3, 3), lambda: N(5))),
        fn(F_ + "conv2d", F.conv2d, _in(img, lambda: N(5, 3, 3, 3), lambda: N(5))),
        fn(F_ + "conv3d", F.conv3d, _in(lambda: N(2, 3, 3, 4, 4), lambda: N(5, 3, 3, 3, 3), lambda: N(5))),
        fn(F_ + "conv_transpose1d", F.conv_transpose1d, _in(seq, lambda: N(3, 5, 3), lambda: N(5))),
        fn(F_ + "conv_transpose2d", F.conv_transpose2d, _in(img, lambda: N(3, 5, 3, 3), lambda: N(5))),
        fn(F_ + "conv_transpose3d", F.conv_transpose3d, _in(lambda: N(2, 3, 3, 4, 4), lambda: N(3, 5, 3, 3, 3), lambda: N(5))),
        fn(F_ + "batch_norm", F.batch_norm, _in(img, lambda: torch.zeros(3), lambda: torch.ones(3), lambda: R(3), lambda: R(3)), train_kwarg="training"),
        fn(F_ + "layer_norm", F.layer_norm, _in(p46, [6], lambda: R(6), lambda: R(6))),
        fn(F_ + "group_norm", F.group_norm, _in(lambda: N(2, 4, 4, 4), 2, lambda: R(4), lambda: R(4))),
        fn(F_ + "instance_norm", F.instance_norm, _in(img, None, None, lambda: R(3), lambda: R(3))),
        fn(F_ + "local_response_norm", F.local_response_norm, _in(img, 2)),
        fn(F_ + "rms_norm", F.rms_norm, _in(p46, [6], lambda: R(6))),
        fn(F_ + "normalize", F.normalize, _in(p46)),
        fn(F_ + "embedding", F.embedding, _in(lambda: L(4, 3, high=10), lambda: N(10, 5))),
        fn(F_ + "embedding_bag", F.embedding_bag, _in(lambda: L(4, 3, high=10), lambda: N(10, 5))),
        # the optional tensors (per-sample weights, class weights) are saved too: probe them where they are passed
        fn(F_ + "embedding_bag[per_sample_weights]", F.embedding_bag,
           _in(lambda: L(4, 3, high=10), lambda: N(10, 5), mode="sum", per_sample_weights=lambda: R(4, 3))),
        fn(F_ + "one_hot", F.one_hot, _in(lambda: L(4, 3, high=5), 5)),
        fn(F_ + "interpolate", F.interpolate, lambda: ([N(2, 3, 4, 4)], {"scale_factor": 2})),
        fn(F_ + "interpolate[mode='bilinear']", F.interpolate, lambda: ([N(2, 3, 4, 4)], {"scale_factor": 2, "mode": "bilinear"})),
        fn(F_ + "upsample", F.upsample, lambda: ([N(2, 3, 4, 4)], {"scale_factor": 2})),
        fn(F_ + "pad", F.pad, _in(img, (1, 1))),
        fn(F_ + "pad[mode='reflect']", F.pad, lambda: ([N(2, 3, 4, 4), (1, 1, 1, 1)], {"mode": "reflect"})),
        fn(F_ + "avg_pool1d", F.avg_pool1d, _in(seq, 2)),
        fn(F_ + "avg_pool2d", F.avg_pool2d, _in(img, 2)),
        fn(F_ + "avg_pool3d", F.avg_pool3d, _in(lambda: N(2, 3, 4, 4, 4), 2)),
        fn(F_ + "max_pool1d", F.max_pool1d, _in(seq, 2)),
        fn(F_ + "max_pool2d", F.max_pool2d, _in(img, 2)),
        fn(F_ + "max_pool3d", F.max_pool3d, _in(lambda: N(2, 3, 4, 4, 4), 2)),
        fn(F_ + "lp_pool2d", F.lp_pool2d, _in(lambda: R(2, 3, 4, 4), 2.0, 2)),
        fn(F_ + "adaptive_avg_pool1d", F.adaptive_avg_pool1d, _in(seq, 2)),
        fn(F_ + "adaptive_avg_pool2d", F.adaptive_avg_pool2d, _in(img, 2)),
        fn(F_ + "adaptive_avg_pool3d", F.adaptive_avg_pool3d, _in(lambda: N(2, 3, 4, 4, 4), 2)),
        # a global average (every output size 1) is computed as a mean, which keeps no tensor
        fn(F_ + "adaptive_avg_pool1d[output_size=1]", F.adaptive_avg_pool1d, _in(seq, 1)),
        fn(F_ + "adaptive_avg_pool2d[output_size=1]", F.adaptive_avg_pool2d, _in(img, 1)),
        fn(F_ + "adaptive_avg_pool3d[output_size=1]", F.adaptive_avg_pool3d, _in(lambda: N(2, 3, 4, 4, 4), 1)),
        fn(F_ + "adaptive_max_pool1d", F.adaptive_max_pool1d, _in(seq, 2)),
        fn(F_ + "adaptive_max_pool2d", F.adaptive_max_pool2d, _in(img, 2)),
        fn(F_ + "adaptive_max_pool3d", F.adaptive_max_pool3d, _in(lambda: N(2, 3, 4, 4, 4), 2)),
        fn(F_ + "pixel_shuffle", F.pixel_shuffle, _in(lambda: N(2, 4, 3, 3), 2)),
        fn(F_ + "unfold", F.unfold, _in(img, 2)),
        fn(F_ + "fold", F.fold, _in(lambda: N(2, 12, 9), 4, 2)),
        fn(F_ + "cross_entropy", F.cross_entropy, _in(x46, lambda: L(4, high=6), weight=lambda: R(6))),
        fn(F_ + "nll_loss", F.nll_loss, _in(lambda: torch.log_softmax(N(4, 6), 1), lambda: L(4, high=6), weight=lambda: R(6))),
        fn(F_ + "mse_loss", F.mse_loss, _in(p46, p46)),
        fn(F_ + "l1_loss", F.l1_loss, _in(p46, p46)),
        fn(F_ + "smooth_l1_loss", F.smooth_l1_loss, _in(p46, p46)),
        fn(F_ + "huber_loss", F.huber_loss, _in(p46, p46)),
        fn(F_ + "binary_cross_entropy", F.binary_cross_entropy, _in(p46, p46, weight=p46)),
        fn(F_ + "binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits, _in(x46, p46, weight=p46, pos_weight=lambda: R(6))),
        fn(F_ + "kl_div", F.kl_div, _in(lambda: torch.log(R(4, 6)), p46)),
        fn(F_ + "poisson_nll_loss", F.poisson_nll_loss, _in(p46, p46)),
        fn(F_ + "cosine_embedding_loss", F.cosine_embedding_loss, _in(p46, p46, lambda: torch.ones(4))),
        fn(F_ + "margin_ranking_loss", F.margin_ranking_loss, _in(lambda: R(4), lambda: R(4), lambda: torch.ones(4))),
        fn(F_ + "triplet_margin_loss", F.triplet_margin_loss, _in(p46, p46, p46)),
        fn(F_ + "soft_margin_loss", F.soft_margin_loss, _in(p46, lambda: torch.ones(4, 6))),
        fn(F_ + "multi_margin_loss", F.multi_margin_loss, _in(x46, lambda: L(4, high=6))),
        fn(F_ + "hinge_embedding_loss", F.hinge_embedding_loss, _in(p46, lambda: torch.ones(4, 6))),
        fn(F_ + "gaussian_nll_loss", F.gaussian_nll_loss, _in(p46, p46, p46)),
        fn(F_ + "cosine_similarity", F.cosine_similarity, _in(p46, p46)),
        fn(F_ + "pairwise_distance", F.pairwise_distance, _in(p46, p46)),
        fn(F_ + "pdist", F.pdist, _in(p46)),
        fn(F_ + "scaled_dot_product_attention", F.scaled_dot_product_attention, _in(lambda: N(2, 4, 6), lambda: N(2, 4, 6), lambda: N(2, 4, 6))),
        fn(F_ + "grid_sample", F.grid_sample, lambda: ([N(2, 3, 4, 4), torch.rand(2, 3, 3, 2) * 2 - 1], {"align_corners": False})),
        fn(F_ + "affine_grid", F.affine_grid, lambda: ([N(2, 2, 3), [2, 3, 4, 4]], {"align_corners": False})),
    ]
    return out


RNN_PARAMS = ["input_size", "hidden_size", "num_layers", "nonlinearity", "bias", "batch_first", "dropout", "bidirectional"]

GATED_PARAMS = [p for p in RNN_PARAMS if p != "nonlinearity"]


def _module_specs() -> list[Spec]:
    acts: list[tuple[str, Callable[[], nn.Module]]] = [
        ("ReLU", nn.ReLU), ("ReLU6", nn.ReLU6), ("LeakyReLU", lambda: nn.LeakyReLU(0.2)), ("ELU", nn.ELU),
        ("SELU", nn.SELU), ("CELU", nn.CELU), ("GELU", nn.GELU), ("SiLU", nn.SiLU), ("Mish", nn.Mish),
        ("Hardswish", nn.Hardswish), ("Hardsigmoid", nn.Hardsigmoid), ("Hardtanh", nn.Hardtanh),
        ("Sigmoid", nn.Sigmoid), ("Tanh", nn.Tanh), ("Softplus", nn.Softplus),
        ("Softmax", lambda: nn.Softmax(dim=1)), ("LogSoftmax", lambda: nn.LogSoftmax(dim=1)),
        ("Softmin", lambda: nn.Softmin(dim=1)), ("PReLU", nn.PReLU), ("Threshold", lambda: nn.Threshold(0.1, 0.0)),
        ("RReLU", nn.RReLU), ("GLU", nn.GLU), ("LogSigmoid", nn.LogSigmoid), ("Softsign", nn.Softsign),
        ("Tanhshrink", nn.Tanhshrink), ("Softshrink", nn.Softshrink), ("Hardshrink", nn.Hardshrink),
        ("Identity", nn.Identity),
    ]
    out = [mod(n, f, _in(x46)) for n, f in acts]
    i5 = _in(lambda: N(2, 3, 4, 4, 4))
    out += [
        mod("Linear", lambda: nn.Linear(6, 5), _in(x46)),
        mod("Bilinear", lambda: nn.Bilinear(6, 5, 3), _in(x46, lambda: N(4, 5))),
        mod("Conv1d", lambda: nn.Conv1d(3, 5, 3), _in(seq)),
        mod("Conv2d", lambda: nn.Conv2d(3, 5, 3), _in(img)),
        mod("Conv3d", lambda: nn.Conv3d(3, 5, 3), i5),
        mod("ConvTranspose1d", lambda: nn.ConvTranspose1d(3, 5, 3), _in(seq)),
        mod("ConvTranspose2d", lambda: nn.ConvTranspose2d(3, 5, 3), _in(img)),
        mod("ConvTranspose3d", lambda: nn.ConvTranspose3d(3, 5, 3), i5),
        mod("BatchNorm1d", lambda: nn.BatchNorm1d(3), _in(seq)),
        mod("BatchNorm2d", lambda: nn.BatchNorm2d(3), _in(img)),
        mod("BatchNorm3d", lambda: nn.BatchNorm3d(3), i5),
        mod("LayerNorm", lambda: nn.LayerNorm(6), _in(x46)),
        mod("RMSNorm", lambda: nn.RMSNorm(6), _in(x46)),
        mod("GroupNorm", lambda: nn.GroupNorm(1, 3), _in(img)),
        mod("InstanceNorm1d", lambda: nn.InstanceNorm1d(3, affine=True), _in(seq)),
        mod("InstanceNorm2d", lambda: nn.InstanceNorm2d(3, affine=True), _in(img)),
        mod("InstanceNorm3d", lambda: nn.InstanceNorm3d(3, affine=True), i5),
        mod("LocalResponseNorm", lambda: nn.LocalResponseNorm(2), _in(img)),
        mod("Embedding", lambda: nn.Embedding(10, 5), _in(lambda: L(4, 3, high=10))),
        mod("EmbeddingBag", lambda: nn.EmbeddingBag(10, 5), _in(lambda: L(4, 3, high=10))),
        mod("EmbeddingBag[per_sample_weights]", lambda: nn.EmbeddingBag(10, 5, mode="sum"),
            _in(lambda: L(4, 3, high=10), per_sample_weights=lambda: R(4, 3))),
        mod("Dropout", lambda: nn.Dropout(0.5), _in(x46)),
        mod("Dropout1d", lambda: nn.Dropout1d(0.5), _in(seq)),
        mod("Dropout2d", lambda: nn.Dropout2d(0.5), _in(img)),
        mod("Dropout3d", lambda: nn.Dropout3d(0.5), i5),
        mod("AlphaDropout", lambda: nn.AlphaDropout(0.5), _in(x46)),
        mod("FeatureAlphaDropout", lambda: nn.FeatureAlphaDropout(0.5), _in(img)),
        mod("RNN", lambda: nn.RNN(6, 5), _in(seq, lambda: N(1, 3, 5)), params=RNN_PARAMS),
        mod("LSTM", lambda: nn.LSTM(6, 5), _in(seq, lambda: (N(1, 3, 5), N(1, 3, 5))), params=[*GATED_PARAMS, "proj_size"]),
        mod("GRU", lambda: nn.GRU(6, 5), _in(seq, lambda: N(1, 3, 5)), params=GATED_PARAMS),
        mod("RNNCell", lambda: nn.RNNCell(6, 5), _in(x46, lambda: N(4, 5))),
        mod("LSTMCell", lambda: nn.LSTMCell(6, 5), _in(x46, lambda: (N(4, 5), N(4, 5)))),
        mod("GRUCell", lambda: nn.GRUCell(6, 5), _in(x46, lambda: N(4, 5))),
        mod("MultiheadAttention", lambda: nn.MultiheadAttention(6, 2), _in(seq, seq, seq)),
        mod("MaxPool1d", lambda: nn.MaxPool1d(2), _in(seq)),
        mod("MaxPool2d", lambda: nn.MaxPool2d(2), _in(img)),
        mod("MaxPool3d", lambda: nn.MaxPool3d(2), i5),
        mod("AvgPool1d", lambda: nn.AvgPool1d(2), _in(seq)),
        mod("AvgPool2d", lambda: nn.AvgPool2d(2), _in(img)),
        mod("AvgPool3d", lambda: nn.AvgPool3d(2), i5),
        mod("AdaptiveAvgPool1d", lambda: nn.AdaptiveAvgPool1d(2), _in(seq)),
        mod("AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d(2), _in(img)),
        mod("AdaptiveAvgPool3d", lambda: nn.AdaptiveAvgPool3d(2), i5),
        mod("AdaptiveAvgPool1d[output_size=1]", lambda: nn.AdaptiveAvgPool1d(1), _in(seq)),
        mod("AdaptiveAvgPool2d[output_size=1]", lambda: nn.AdaptiveAvgPool2d(1), _in(img)),
        mod("AdaptiveAvgPool3d[output_size=1]", lambda: nn.AdaptiveAvgPool3d(1), i5),
        mod("AdaptiveMaxPool1d", lambda: nn.AdaptiveMaxPool1d(2), _in(seq)),
        mod("AdaptiveMaxPool2d", lambda: nn.AdaptiveMaxPool2d(2), _in(img)),
        mod("AdaptiveMaxPool3d", lambda: nn.AdaptiveMaxPool3d(2), i5),
        mod("LPPool2d", lambda: nn.LPPool2d(2.0, 2), _in(lambda: R(2, 3, 4, 4))),
        mod("Upsample", lambda: nn.Upsample(scale_factor=2), _in(img)),
        mod("UpsamplingNearest2d", lambda: nn.UpsamplingNearest2d(scale_factor=2), _in(img)),
        mod("UpsamplingBilinear2d", lambda: nn.UpsamplingBilinear2d(scale_factor=2), _in(img)),
        mod("PixelShuffle", lambda: nn.PixelShuffle(2), _in(lambda: N(2, 4, 3, 3))),
        mod("Flatten", nn.Flatten, _in(img)),
        mod("Unflatten", lambda: nn.Unflatten(1, (2, 3)), _in(x46)),
        mod("ZeroPad2d", lambda: nn.ZeroPad2d(1), _in(img)),
        mod("ReflectionPad2d", lambda: nn.ReflectionPad2d(1), _in(img)),
        mod("CrossEntropyLoss", lambda: nn.CrossEntropyLoss(weight=R(6)), _in(x46, lambda: L(4, high=6))),
        mod("NLLLoss", lambda: nn.NLLLoss(weight=R(6)), _in(lambda: torch.log_softmax(N(4, 6), 1), lambda: L(4, high=6))),
        mod("MSELoss", nn.MSELoss, _in(p46, p46)),
        mod("L1Loss", nn.L1Loss, _in(p46, p46)),
        mod("SmoothL1Loss", nn.SmoothL1Loss, _in(p46, p46)),
        mod("HuberLoss", nn.HuberLoss, _in(p46, p46)),
        mod("BCELoss", lambda: nn.BCELoss(weight=R(4, 6)), _in(p46, p46)),
        mod("BCEWithLogitsLoss", lambda: nn.BCEWithLogitsLoss(weight=R(4, 6), pos_weight=R(6)), _in(x46, p46)),
        mod("KLDivLoss", lambda: nn.KLDivLoss(reduction="batchmean"), _in(lambda: torch.log(R(4, 6)), p46)),
        mod("CosineSimilarity", nn.CosineSimilarity, _in(p46, p46)),
        mod("PairwiseDistance", nn.PairwiseDistance, _in(p46, p46)),
        mod("TransformerEncoderLayer", lambda: nn.TransformerEncoderLayer(6, 2, 8, dropout=0.0), _in(seq)),
    ]
    return out


def _init_specs() -> list[Spec]:
    out = []
    for n in [
        "normal_", "uniform_", "constant_", "ones_", "zeros_", "eye_", "dirac_", "xavier_uniform_",
        "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_", "sparse_",
    ]:
        f = getattr(nn.init, n)
        extra: list[Any] = {"constant_": [0.5], "sparse_": [0.5]}.get(n, [])
        shape = (lambda: N(3, 3, 3)) if n == "dirac_" else (lambda: N(4, 6))
        out.append(fn(f"torch.nn.init.{n}", f, _in(shape, *extra)))
    out.append(
        fn("torch.nn.utils.clip_grad_norm_", nn.utils.clip_grad_norm_, _in(lambda: [N(4, 6), N(6)], 1.0), grad_params=True)
    )
    out.append(
        fn("torch.nn.utils.clip_grad_value_", nn.utils.clip_grad_value_, _in(lambda: [N(4, 6), N(6)], 0.1), grad_params=True)
    )
    return out


def _complex_specs() -> list[Spec]:
    """Complex tensors: ``conj()``, ``real``/``imag`` and ``view_as_real``/``view_as_complex`` are views (a write
    through them reaches the base), ``abs``/``angle`` save their input, the FFTs are linear and save nothing."""
    out = [
        fn("torch.conj", torch.conj, _in(c46), aten="conj"),
        meth("conj", _in(c46)),
        fn("torch.view_as_real", torch.view_as_real, _in(c46), aten="view_as_real"),
        fn("torch.view_as_complex", torch.view_as_complex, _in(lambda: N(4, 6, 2)), aten="view_as_complex"),
        fn("torch.real", torch.real, _in(c46), aten="real"),
        fn("torch.imag", torch.imag, _in(c46), aten="imag"),
        fn("torch.angle", torch.angle, _in(c46), aten="angle"),
        meth("angle", _in(c46)),
        fn("torch.polar", torch.polar, _in(p46, x46), aten="polar"),
        fn("torch.complex", torch.complex, _in(x46, x46), aten="complex"),
    ]
    # A transform of a real input saves it (the real-to-complex kernel); of a complex one, nothing. fft and its
    # kin take either, and their input's dtype is rarely known: they are probed on complex inputs, so that no save
    # is assumed that may not happen; rfft and ihfft only take real ones.
    for name in ("rfft", "rfft2", "rfftn", "ihfft", "fftshift", "ifftshift"):
        out.append(fn(f"torch.fft.{name}", getattr(torch.fft, name), _in(x46), aten=f"fft_{name}"))
    for name in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "irfft", "irfft2", "irfftn", "hfft"):
        out.append(fn(f"torch.fft.{name}", getattr(torch.fft, name), _in(c46), aten=f"fft_{name}"))
    return out


# functionals and modules with an ``inplace`` parameter get a NAME[inplace=True] variant (added by probe.py)
def all_specs() -> list[Spec]:
    specs = (
        _operator_specs() + _fn_specs() + _method_specs() + _functional_specs() + _module_specs()
        + _init_specs() + _unary_specs() + _binary_specs() + _complex_specs()
    )
    seen: set[str] = set()
    out = []
    for s in specs:
        if s.name in seen or missing(s):
            continue
        seen.add(s.name)
        out.append(s)
    return out
