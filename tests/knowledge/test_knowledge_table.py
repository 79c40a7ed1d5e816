"""The checked-in saved-tensors table: regenerated from the installed torch, and its key facts re-measured.

Every fact the analyzer relies on is asserted twice: against the JSON, and by running torch here with a
small independent harness (``saved_storages``), so a wrong table or a wrong probe both fail.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from gradguard.knowledge import TABLE_PATH, Knowledge, load

torch = pytest.importorskip("torch")
F = torch.nn.functional
nn = torch.nn


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    with open(TABLE_PATH, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def kb() -> Knowledge:
    return load()


@pytest.fixture(scope="module")
def regenerated() -> dict[str, Any]:
    from gradguard.knowledge.probe import build_table

    threads = torch.get_num_threads()
    try:
        return build_table()
    finally:
        torch.set_num_threads(threads)


# --- an independent harness -------------------------------------------------------------------------


def _ptr(t: Any) -> int:
    return int(t.untyped_storage().data_ptr())


def saved_storages(fn: Any) -> tuple[Any, list[tuple[int, int, Any]]]:
    """Run ``fn()`` under saved_tensors_hooks: (its result, [(storage ptr, version at pack, dtype)])."""
    packed: list[tuple[int, int, Any]] = []

    def pack(t: Any) -> Any:
        packed.append((_ptr(t), t._version, t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, packed


def ptrs(packed: list[tuple[int, int, Any]]) -> set[int]:
    return {p for p, _, _ in packed}


def nonleaf(*shape: int) -> Any:
    return torch.randn(*shape, requires_grad=True).clone()


# --- regeneration ---------------------------------------------------------------------------------------


@pytest.mark.torch
def test_checked_in_table_matches_installed_torch(regenerated: dict[str, Any]) -> None:
    from gradguard.knowledge.probe import _dump

    with open(TABLE_PATH, encoding="utf-8") as f:
        checked_in = f.read()
    if regenerated["torch_version"] != json.loads(checked_in)["torch_version"]:
        pytest.skip(f"table was generated from another torch ({regenerated['torch_version']} installed)")
    fresh = _dump(regenerated)
    if fresh != checked_in:
        old = json.loads(checked_in)["ops"]
        new = regenerated["ops"]
        changed = sorted(n for n in set(old) | set(new) if old.get(n) != new.get(n))
        pytest.fail(f"saved_tensors.json is stale; run `gradguard knowledge --regenerate`. Changed: {changed[:20]}")


@pytest.mark.torch
def test_check_mode_reports_up_to_date_and_stale(
    tmp_path: Any, regenerated: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gradguard.knowledge import probe

    monkeypatch.setattr(probe, "build_table", lambda *a, **k: regenerated)
    out = tmp_path / "t.json"
    assert probe.main(output=str(out), check=False) == 0
    assert probe.main(output=str(out), check=True) == 0
    data = json.loads(out.read_text())
    data["ops"]["torch.exp"]["saves_output"] = []
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    assert probe.main(output=str(out), check=True) == 1
    assert "torch.exp" in capsys.readouterr().out


def test_table_shape(raw: dict[str, Any]) -> None:
    ops = raw["ops"]
    assert raw["torch_version"].startswith("2.")
    assert len(ops) >= 300
    for name, e in ops.items():
        assert e["kind"] in ("function", "method", "operator", "module"), name
        assert "source" in e, name
        for arg, conds in e.get("saves", {}).items():
            assert arg in e["args"] or arg.startswith("self."), (name, arg)
            for c in conds:
                assert c in e["args"] or c.startswith("self."), (name, c)
        for m in e.get("mutates", []):
            assert m in e["args"], (name, m)
        if e.get("out_of_place"):
            assert e["out_of_place"] in ops, name
    # deterministic serialization: sorted keys, no addresses
    text = open(TABLE_PATH, encoding="utf-8").read()
    assert "0x" not in text
    assert json.dumps(raw, indent=1, sort_keys=True) + "\n" == text


def test_coverage_of_required_names(raw: dict[str, Any]) -> None:
    ops = raw["ops"]
    required = [
        *(f"operator.{n}" for n in ("add", "iadd", "mul", "imul", "truediv", "itruediv", "sub", "isub", "pow",
                                    "ipow", "matmul", "neg", "getitem", "setitem")),
        "torch.relu_", "torch.sigmoid_", "torch.clamp_", "torch.einsum", "torch.cat", "torch.stack",
        "torch.where", "torch.bernoulli", "torch.topk", "Tensor.unflatten", "Tensor.type_as", "Tensor.to",
        "torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.one_hot",
        "torch.nn.MultiheadAttention", "torch.nn.LSTMCell", "torch.nn.EmbeddingBag",
        "torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_", "torch.nn.init.kaiming_normal_",
        "torch.nn.ReLU[inplace=True]", "torch.nn.Dropout[inplace=True]", "torch.nn.functional.relu[inplace=True]",
    ]
    missing = [n for n in required if n not in ops]
    assert not missing
    # every in-place Tensor method torch has
    inplace = [n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_")]
    assert [n for n in inplace if f"Tensor.{n}" not in ops] == []
    probed = [n for n in inplace if ops[f"Tensor.{n}"]["source"] == "probe"]
    assert len(probed) >= len(inplace) - 5
    for n in probed:
        e = ops[f"Tensor.{n}"]
        if e.get("mutates") and n[:-1] and f"Tensor.{n[:-1]}" in ops:
            assert e.get("out_of_place") == f"Tensor.{n[:-1]}", n


# --- key facts: the JSON, then torch itself --------------------------------------------------------------


@pytest.mark.torch
def test_relu_saves_output_not_input(kb: Knowledge) -> None:
    for name in ("torch.relu", "torch.nn.functional.relu", "torch.nn.ReLU", "Tensor.relu"):
        info = kb.get(name)
        assert info is not None and info.saves_output and not any(info.saves.values()), name
    x = nonleaf(4, 6)
    y, packed = saved_storages(lambda: F.relu(x))
    assert ptrs(packed) == {_ptr(y)} and _ptr(x) not in ptrs(packed)


@pytest.mark.torch
def test_inplace_relu_mutates_input_and_saves_output(kb: Knowledge) -> None:
    for name, arg in (("torch.nn.functional.relu[inplace=True]", "input"), ("torch.nn.ReLU[inplace=True]", "input"),
                      ("Tensor.relu_", "self"), ("torch.relu_", "input")):
        info = kb.get(name)
        assert info is not None and info.mutates == (arg,) and info.saves_output == (arg,), name
    assert kb.variant("torch.nn.functional.relu", inplace=True) is kb.get("torch.nn.functional.relu[inplace=True]")
    x = nonleaf(4, 6)
    v0 = x._version
    y, packed = saved_storages(lambda: F.relu(x, inplace=True))
    assert y is x and x._version > v0
    assert [(p, v) for p, v, _ in packed] == [(_ptr(x), x._version)]  # the output (x after the write)


@pytest.mark.torch
def test_leaky_relu_saves_input_but_inplace_saves_output(kb: Knowledge) -> None:
    lr = kb.get("torch.nn.functional.leaky_relu")
    lri = kb.get("torch.nn.functional.leaky_relu[inplace=True]")
    assert lr is not None and lri is not None
    assert lr.saves == {"input": ("input",)} and not lr.saves_output
    assert lri.saves_output == ("input",) and lri.mutates == ("input",) and not any(lri.saves.values())
    m = kb.get("torch.nn.LeakyReLU")
    assert m is not None and m.inplace_kwarg == "inplace" and "negative_slope" in m.params
    x = nonleaf(4, 6)
    y, packed = saved_storages(lambda: F.leaky_relu(x, 0.2))
    assert ptrs(packed) == {_ptr(x)} and _ptr(y) != _ptr(x)
    x2 = nonleaf(4, 6)
    v0 = x2._version
    _, packed2 = saved_storages(lambda: F.leaky_relu(x2, 0.2, inplace=True))
    assert [(p, v > v0) for p, v, _ in packed2] == [(_ptr(x2), True)]


@pytest.mark.torch
@pytest.mark.parametrize("fn", ["sigmoid", "exp", "tanh"])
def test_sigmoid_exp_tanh_save_output(kb: Knowledge, fn: str) -> None:
    for name in (f"torch.{fn}", f"Tensor.{fn}"):
        info = kb.get(name)
        assert info is not None and info.saves_output and not any(info.saves.values()), name
    x = nonleaf(4, 6)
    y, packed = saved_storages(lambda: getattr(torch, fn)(x))
    assert ptrs(packed) == {_ptr(y)}


@pytest.mark.torch
def test_mul_conditional_both_ways(kb: Knowledge, raw: dict[str, Any]) -> None:
    for name in ("operator.mul", "Tensor.mul"):
        info = kb.get(name)
        assert info is not None and info.saves == {"self": ("other",), "other": ("self",)}, name
        assert info.saved_args({"self": True}) == ["other"]
        assert info.saved_args({"other": True}) == ["self"]
    assert kb.get("torch.mul").saves == {"input": ("other",), "other": ("input",)}  # type: ignore[union-attr]
    assert raw["ops"]["operator.mul"]["when_number"]["other"] == {"saves": {}, "saves_output": []}
    a = torch.randn(4, 6, requires_grad=True)
    b = torch.randn(4, 6)
    _, packed = saved_storages(lambda: a * b)
    assert ptrs(packed) == {_ptr(b)}
    _, packed = saved_storages(lambda: b * a)
    assert ptrs(packed) == {_ptr(b)}
    _, packed = saved_storages(lambda: a * 2)  # a Python number: nothing saved
    assert packed == []


@pytest.mark.torch
def test_linear_saves_input_and_weight(kb: Knowledge) -> None:
    info = kb.get("torch.nn.Linear")
    assert info is not None and info.args == ("input",)
    assert set(info.saves) == {"input", "self.weight"}
    assert info.saved_args({"self.weight": True}) == ["input"]
    assert info.params[:3] == ("in_features", "out_features", "bias")
    m = nn.Linear(6, 5)
    x = nonleaf(4, 6)
    y, packed = saved_storages(lambda: m(x))
    assert ptrs(packed) == {_ptr(x), _ptr(m.weight)} and _ptr(y) not in ptrs(packed)
    # input not requiring grad: still saved, because the weight requires grad
    x2 = torch.randn(4, 6)
    _, packed = saved_storages(lambda: m(x2))
    assert _ptr(x2) in ptrs(packed)


@pytest.mark.torch
@pytest.mark.parametrize(("lazy", "base"), [("LazyLinear", "Linear"), ("LazyConv2d", "Conv2d"),
                                            ("LazyBatchNorm1d", "BatchNorm1d")])
def test_lazy_module_is_what_it_becomes(kb: Knowledge, lazy: str, base: str) -> None:
    # a lazy module becomes its base class at the first call; its constructor lacks the size it infers then
    info, plain = kb.get(f"torch.nn.{lazy}"), kb.get(f"torch.nn.{base}")
    assert info is not None and plain is not None
    assert info.name == plain.name and info.saves == plain.saves and info.params == plain.params[1:]
    m = getattr(nn, lazy)(*([5] if base != "BatchNorm1d" else []), **({"kernel_size": 3} if base == "Conv2d" else {}))
    m(torch.randn(2, 3, 6, 6) if base == "Conv2d" else torch.randn(4, 3))
    assert type(m) is getattr(nn, base)
    assert kb.get("torch.nn.LazyNothing") is None


@pytest.mark.torch
def test_conv2d_saves_input_and_weight_not_output(kb: Knowledge) -> None:
    info = kb.get("torch.nn.Conv2d")
    assert info is not None and {"input", "self.weight"} <= set(info.saves) and not info.saves_output
    m = nn.Conv2d(3, 5, 3)
    x = nonleaf(2, 3, 4, 4)
    y, packed = saved_storages(lambda: m(x))
    assert {_ptr(x), _ptr(m.weight)} <= ptrs(packed) and _ptr(y) not in ptrs(packed)


@pytest.mark.torch
def test_batchnorm2d_saves_input_not_output(kb: Knowledge, raw: dict[str, Any]) -> None:
    info = kb.get("torch.nn.BatchNorm2d")
    assert info is not None and "input" in info.saves and not info.saves_output
    assert "training" in raw["probe_mode"]
    m = nn.BatchNorm2d(3)  # a fresh module is in training mode
    x = nonleaf(2, 3, 4, 4)
    y, packed = saved_storages(lambda: m(x))
    assert _ptr(x) in ptrs(packed) and _ptr(y) not in ptrs(packed)


@pytest.mark.torch
def test_layernorm_saves_input(kb: Knowledge) -> None:
    info = kb.get("torch.nn.LayerNorm")
    assert info is not None and info.saved_args({"input": True})[:1] == ["input"]
    m = nn.LayerNorm(6)
    x = nonleaf(4, 6)
    _, packed = saved_storages(lambda: m(x))
    assert _ptr(x) in ptrs(packed)


@pytest.mark.torch
def test_inplace_dropout_mutates_only_in_training(kb: Knowledge) -> None:
    for name in ("torch.nn.Dropout[inplace=True]", "torch.nn.functional.dropout[inplace=True]"):
        info = kb.get(name)
        assert info is not None and info.mutates == ("input",) and info.train_only, name
    assert kb.get("torch.nn.Dropout").inplace_kwarg == "inplace"  # type: ignore[union-attr]
    m = nn.Dropout(0.5, inplace=True)
    x = nonleaf(4, 6)
    v0 = x._version
    m(x)
    assert x._version > v0
    m.eval()
    v1 = x._version
    m(x)
    assert x._version == v1


@pytest.mark.torch
@pytest.mark.parametrize("name,call", [
    ("Tensor.chunk", lambda t: t.chunk(2)),
    ("Tensor.split", lambda t: t.split(2)),
    ("Tensor.unbind", lambda t: t.unbind()),
    ("torch.unbind", torch.unbind),
    ("Tensor.__iter__", lambda t: list(t)),
])
def test_multi_output_views(kb: Knowledge, name: str, call: Any) -> None:
    info = kb.get(name)
    assert info is not None and info.multi_output_view, name
    parts = call(nonleaf(4, 6))
    with pytest.raises(RuntimeError, match="multiple views"):
        parts[0].mul_(2)


@pytest.mark.torch
@pytest.mark.parametrize("name,call", [
    ("Tensor.transpose", lambda t: t.transpose(0, 1)),
    ("Tensor.view", lambda t: t.view(6, 4)),
    ("Tensor.detach", lambda t: t.detach()),
    ("Tensor.t", lambda t: t.t()),
    ("operator.getitem", lambda t: t[1]),
    ("Tensor.contiguous", lambda t: t.contiguous()),
])
def test_views_share_version_counter(kb: Knowledge, name: str, call: Any) -> None:
    info = kb.get(name)
    assert info is not None and info.view_of == "self", name
    x = torch.randn(4, 6)
    y = call(x)
    v = y._version
    x.add_(1)
    assert y._version > v


def cplx(*shape: int) -> Any:
    return torch.randn(*shape, dtype=torch.complex64)


@pytest.mark.torch
@pytest.mark.parametrize("name,arg,make,call", [
    ("Tensor.conj", "self", lambda: cplx(4, 6), lambda t: t.conj()),
    ("torch.conj", "input", lambda: cplx(4, 6), torch.conj),
    ("torch.view_as_real", "input", lambda: cplx(4, 6), torch.view_as_real),
    ("torch.view_as_complex", "input", lambda: torch.randn(4, 6, 2), torch.view_as_complex),
    ("torch.real", "input", lambda: cplx(4, 6), torch.real),
    ("torch.imag", "input", lambda: cplx(4, 6), torch.imag),
])
def test_complex_views_share_version_counter(kb: Knowledge, name: str, arg: str, make: Any, call: Any) -> None:
    info = kb.get(name)
    assert info is not None and info.view_of == arg, name
    x = make()
    y = call(x)
    v = y._version
    x.mul_(2)
    assert y._version > v


@pytest.mark.torch
def test_complex_saves(kb: Knowledge) -> None:
    """abs/angle of a complex tensor save it; a real-to-complex FFT saves its real input, the inverse saves
    nothing; conj_physical is only the same tensor for a real input, which the table cannot see."""
    for name, arg in (("torch.angle", "input"), ("Tensor.angle", "self"), ("torch.fft.rfft", "input"),
                      ("torch.fft.rfft2", "input")):
        info = kb.get(name)
        assert info is not None and arg in info.saves, name
    for name in ("torch.fft.irfft", "torch.fft.fft", "torch.fft.ifft2"):
        info = kb.get(name)
        assert info is not None and not info.saves and not info.saves_output, name
    c = cplx(4, 6).requires_grad_()
    _, packed = saved_storages(lambda: torch.angle(c))
    assert _ptr(c) in ptrs(packed)
    x = nonleaf(4, 6)
    _, packed = saved_storages(lambda: torch.fft.rfft(x))
    assert _ptr(x) in ptrs(packed)
    spec = torch.fft.rfft(x)
    _, packed = saved_storages(lambda: torch.fft.irfft(spec))
    assert not packed
    assert torch.conj_physical(spec) is not spec and torch.conj_physical(x) is x


@pytest.mark.torch
def test_not_views(kb: Knowledge) -> None:
    for name in ("Tensor.clone", "torch.nn.functional.relu", "operator.getitem[key=Tensor]"):
        info = kb.get(name)
        assert info is not None and info.view_of is None, name


@pytest.mark.torch
def test_requires_grad_and_friends_do_not_mutate(kb: Knowledge) -> None:
    for name in ("Tensor.requires_grad_", "Tensor.retain_grad", "Tensor.share_memory_"):
        info = kb.get(name)
        assert info is not None and info.mutates == (), name
    x = torch.randn(3)
    v = x._version
    x.requires_grad_()
    assert x._version == v


@pytest.mark.torch
def test_init_normal_is_no_grad_and_mutates(kb: Knowledge) -> None:
    info = kb.get("torch.nn.init.normal_")
    assert info is not None and info.no_grad and info.mutates == ("tensor",)
    assert kb.get("Tensor.normal_").no_grad is False  # type: ignore[union-attr]
    w = torch.empty(4, 6, requires_grad=True)
    v = w._version
    nn.init.normal_(w)  # would raise "a leaf Variable that requires grad..." without no_grad
    assert w._version > v
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.normal_()


@pytest.mark.torch
def test_clip_grad_norm_writes_grad_not_params(kb: Knowledge, raw: dict[str, Any]) -> None:
    info = kb.get("torch.nn.utils.clip_grad_norm_")
    assert info is not None and info.mutates == ()
    assert raw["ops"]["torch.nn.utils.clip_grad_norm_"]["mutates_grad"] == ["parameters"]
    p = torch.randn(4, requires_grad=True)
    p.grad = torch.full((4,), 10.0)
    v = p._version
    nn.utils.clip_grad_norm_([p], 1.0)
    assert p._version == v and p.grad.norm() <= 1.0 + 1e-5


@pytest.mark.torch
def test_linear_autocast_casts(kb: Knowledge) -> None:
    info = kb.get("torch.nn.functional.linear")
    assert info is not None and info.autocast_casts == ("input", "weight")
    assert "input" in kb.get("torch.nn.Linear").autocast_casts  # type: ignore[union-attr]
    x = nonleaf(4, 6)
    w = torch.randn(5, 6, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, packed = saved_storages(lambda: F.linear(x, w))
    assert _ptr(x) not in ptrs(packed) and _ptr(w) not in ptrs(packed)
    assert [dt for _, _, dt in packed] == [torch.bfloat16, torch.bfloat16]
    # so an in-place update of the float32 weight after the forward pass does not break backward
    out = None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = F.linear(x, w)
    with torch.no_grad():
        w.mul_(2)
    out.float().sum().backward()


@pytest.mark.torch
def test_operators_and_out_of_place(kb: Knowledge) -> None:
    assert kb.get("operator.iadd").mutates == ("self",)  # type: ignore[union-attr]
    assert kb.get("operator.iadd").out_of_place == "operator.add"  # type: ignore[union-attr]
    assert kb.get("operator.setitem").mutates == ("self",)  # type: ignore[union-attr]
    assert kb.get("Tensor.add_").out_of_place == "Tensor.add"  # type: ignore[union-attr]
    assert kb.get("torch.relu_").out_of_place == "torch.relu"  # type: ignore[union-attr]
    assert kb.get("operator.neg").mutates == ()  # type: ignore[union-attr]
    x = nonleaf(4, 6)
    v = x._version
    x += 1
    assert x._version > v


@pytest.mark.torch
def test_accepts_out(kb: Knowledge) -> None:
    assert kb.get("torch.exp").accepts_out  # type: ignore[union-attr]
    assert not kb.get("torch.nn.functional.relu").accepts_out  # type: ignore[union-attr]
    torch.exp(torch.randn(3), out=torch.empty(3))
    with pytest.raises(TypeError):
        F.relu(torch.randn(3), out=torch.empty(3))  # type: ignore[call-arg]


@pytest.mark.torch
def test_rnn_modules(kb: Knowledge) -> None:
    for name in ("torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN"):
        info = kb.get(name)
        assert info is not None and info.args == ("input", "hx"), name
        assert info.params[:2] == ("input_size", "hidden_size"), name
    assert kb.get("torch.nn.MultiheadAttention").args == ("query", "key", "value")  # type: ignore[union-attr]


@pytest.mark.torch
def test_pow_with_number_exponent_saves_input_only(raw: dict[str, Any]) -> None:
    e = raw["ops"]["Tensor.pow"]
    assert e["saves_output"]  # tensor exponent: the result is saved too
    assert e["when_number"]["exponent"] == {"saves": {"self": ["self"]}, "saves_output": [], "differs": True}
    x = nonleaf(4)
    y, packed = saved_storages(lambda: x.pow(2))
    assert ptrs(packed) == {_ptr(x)} and _ptr(y) not in ptrs(packed)
    t = torch.full((4,), 2.0)
    y2, packed2 = saved_storages(lambda: x.pow(t))
    assert _ptr(y2) in ptrs(packed2)


@pytest.mark.torch
def test_data_shares_storage_not_version(raw: dict[str, Any]) -> None:
    e = raw["ops"]["Tensor.data"]
    assert e.get("shares_storage_of") == "self" and "view_of" not in e and e.get("attribute")
    x = torch.randn(4)
    d = x.data
    v = d._version
    x.add_(1)
    assert d._version == v and _ptr(d) == _ptr(x)


@pytest.mark.torch
def test_batchnorm_running_stats_change_without_version_bump(raw: dict[str, Any]) -> None:
    e = raw["ops"]["torch.nn.BatchNorm2d"]
    assert e["writes_without_version_bump"] == ["self.running_mean", "self.running_var"]
    m = nn.BatchNorm2d(3)
    v = m.running_mean._version
    before = m.running_mean.clone()
    m(torch.randn(2, 3, 4, 4))
    assert m.running_mean._version == v and not torch.equal(before, m.running_mean)


@pytest.mark.torch
def test_graph_cutting_ops(kb: Knowledge) -> None:
    """The two ways an op ends what backward can reach: a result that never requires grad (argmax, multinomial)
    and one whose backward is not implemented (binomial, floor division). Confirmed on torch itself."""
    for name in ("torch.argmax", "Tensor.argmax", "torch.multinomial"):
        info = kb.get(name)
        assert info is not None and not info.output_requires_grad, name
    for name in ("torch.binomial", "torch.floor_divide", "operator.floordiv"):
        info = kb.get(name)
        assert info is not None and info.backward_not_implemented and info.output_requires_grad, name
    for name in ("torch.bernoulli", "torch.poisson", "torch.round", "torch.true_divide"):
        info = kb.get(name)  # zero gradients, but backward goes on through them to what their inputs came from
        assert info is not None and not info.backward_not_implemented and info.output_requires_grad, name
    p = nonleaf(4, 6).sigmoid()
    assert type(torch.binomial(torch.full((4, 6), 5.0), p).grad_fn).__name__ == "NotImplemented"
    assert type((p // 0.3).grad_fn).__name__ == "NotImplemented"
    assert not torch.multinomial(p, 1).requires_grad
    assert type(torch.bernoulli(p).grad_fn).__name__ == "BernoulliBackward0"


@pytest.mark.torch
def test_removed_symeig_saves_as_its_successor(kb: Knowledge) -> None:
    """torch 2.0 removed symeig, which older research code calls; its backward saved both outputs (derivatives.yaml:
    ``symeig_backward(grads, self, eigenvectors, upper, eigenvalues, eigenvectors_return)``), as linalg.eigh's does,
    which is measured here. The entry is named with the old parameters."""
    a = torch.randn(4, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="removed"):
        a.symeig(eigenvectors=True)
    x = nonleaf(4, 4).double()
    (evals, evecs), packed = saved_storages(lambda: torch.linalg.eigh(x @ x.mT))
    assert {_ptr(evals), _ptr(evecs)} <= ptrs(packed)
    for name, arg in (("torch.symeig", "input"), ("Tensor.symeig", "self")):
        info = kb.get(name)
        assert info is not None and info.saves_output == (arg,) and info.saved_output_indices == (0, 1), name
        assert info.params[:2] == (arg, "eigenvectors"), name


@pytest.mark.torch
@pytest.mark.parametrize(("name", "index", "grad_args"), [
    ("Tensor.scatter_add_", "index", ("self", "src")),
    ("Tensor.index_add_", "index", ("self", "source")),
    ("torch.gather", "index", ("input",)),
    ("torch.nn.functional.embedding", "input", ("weight",)),
    ("Tensor.masked_fill_", "mask", ("self",)),
    ("torch.where", "condition", ("input", "other")),
])
def test_integer_and_mask_arguments_give_the_result_no_grad(kb: Knowledge, name: str, index: str,
                                                             grad_args: tuple[str, ...]) -> None:
    """An index, mask or condition is an integer or bool tensor, which torch never lets require grad: the result's
    grad comes from the other tensors alone (pyg's WLConv histogram, `ones_like(index).scatter_add_(0, index, ...)`
    with an index computed from the input, requires no grad)."""
    with pytest.raises(RuntimeError, match="floating point"):
        torch.zeros(3, dtype=torch.long).requires_grad_()
    info = kb.get(name)
    assert info is not None and info.grad_from is not None, name
    assert index not in info.grad_from and set(grad_args) <= set(info.grad_from), (name, info.grad_from)
