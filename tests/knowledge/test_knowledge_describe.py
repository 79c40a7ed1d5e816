"""describe(): the text behind `gradguard knowledge NAME` and the language server's hover."""

from __future__ import annotations

import subprocess
import sys

from gradguard.knowledge import Knowledge, load
from gradguard.knowledge._derivatives import saves_from_formulas
from gradguard.knowledge.describe import describe, resolve


def test_describe_relu_inplace() -> None:
    text = describe(load(), "torch.nn.functional.relu[inplace=True]")
    assert text is not None
    assert "saves the output for backward" in text
    assert "writes in place into: `input`" in text
    assert "out-of-place form: torch.nn.functional.relu" in text


def test_describe_linear_and_conditions() -> None:
    text = describe(load(), "nn.Linear")
    assert text is not None and text.startswith("torch.nn.Linear")
    assert "saves `input` for backward when `self.weight` requires grad" in text
    assert "autocast" in text


def test_describe_views_and_init() -> None:
    kb = load()
    assert "several views" in (describe(kb, "Tensor.chunk") or "")
    assert "returns a view of `self`" in (describe(kb, "Tensor.transpose") or "")
    init = describe(kb, "nn.init.normal_") or ""
    assert "torch.no_grad()" in init and "writes in place into: `tensor`" in init
    assert "only in training mode" in (describe(kb, "nn.Dropout[inplace=True]") or "")
    assert "saves none" in (describe(kb, "Tensor.add_") or "")


def test_describe_pow_number_exponent_and_data() -> None:
    kb = load()
    text = describe(kb, "Tensor.pow") or ""
    assert "when `exponent` is a Python number it saves `self` instead" in text
    assert "not its version counter" in (describe(kb, "Tensor.data") or "")


def test_resolve_aliases_and_unknown() -> None:
    kb = load()
    assert resolve(kb, "F.relu") == "torch.nn.functional.relu"
    assert resolve(kb, "torch.Tensor.add_") == "Tensor.add_"
    assert resolve(kb, "exp") == "torch.exp"
    assert describe(kb, "no.such.thing") is None


def test_describe_on_a_small_table() -> None:
    kb = Knowledge({"torch_version": "x", "ops": {"f": {"kind": "function", "args": ["a", "b"],
                                                         "saves": {"a": ["b"]}, "saves_output": [], "source": "probe"}}})
    text = describe(kb, "f") or ""
    assert "saves `a` for backward when `b` requires grad" in text
    assert "torch x" in text


def test_formula_references() -> None:
    item = {
        "name": "mul.Tensor(Tensor self, Tensor other) -> Tensor",
        "self": "mul_tensor_backward(grad, other, self.scalar_type())",
        "other": "mul_tensor_backward(grad, self, other.scalar_type())",
        "result": "other_t * self_p + self_t * other_p",
    }
    assert saves_from_formulas(item) == ({"other": ["self"], "self": ["other"]}, [])
    relu = {"name": "relu(Tensor self) -> Tensor", "self": "threshold_backward(grad, result, 0)",
            "result": "auto_element_wise"}
    assert saves_from_formulas(relu) == ({}, ["self"])
    sized = {"name": "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", "self": "grad.expand_symint(self.sym_sizes())"}
    assert saves_from_formulas(sized) == ({}, [])


def test_cli_knowledge_name() -> None:
    r = subprocess.run([sys.executable, "-m", "gradguard", "knowledge", "torch.exp", "F.leaky_relu"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "torch.exp" in r.stdout and "torch.nn.functional.leaky_relu" in r.stdout
    r = subprocess.run([sys.executable, "-m", "gradguard", "knowledge", "nope.nope"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "not in the table" in r.stderr
