"""Reading torch's derivatives.yaml without PyYAML, and what its formulas say is saved."""

from __future__ import annotations

import pytest
from gradguard.knowledge._derivatives import load_derivatives, parse_derivatives, saves_from_formulas

SAMPLE = '''
# comment
- name: mul.Tensor(Tensor self, Tensor other) -> Tensor
  self: mul_tensor_backward(grad, other, self.scalar_type())
  other: mul_tensor_backward(grad, self, other.scalar_type())
  result: other_t * self_p + self_t * other_p

- name: hardswish(Tensor self) -> Tensor
  self: hardswish_backward(grad, self)
  result: "auto_element_wise"

- name: lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor
  self: "weight.isComplex() ? grad * (1 - weight.conj())
         : grad * (1 - weight)"
  end: grad * weight.conj()
  weight: grad * (end - self).conj()
  dispatch:
    Default:
      self: grad
'''


def test_parse_subset() -> None:
    items = parse_derivatives(SAMPLE)
    assert [i["name"].split("(")[0] for i in items] == ["mul.Tensor", "hardswish", "lerp.Tensor"]
    assert items[1]["result"] == "auto_element_wise"
    assert items[2]["self"] == "weight.isComplex() ? grad * (1 - weight.conj()) : grad * (1 - weight)"
    assert saves_from_formulas(items[0]) == ({"other": ["self"], "self": ["other"]}, [])
    saves, out = saves_from_formulas(items[2])
    assert saves == {"weight": ["self", "end"], "end": ["weight"], "self": ["weight"]} and out == []


@pytest.mark.torch
def test_installed_yaml_is_read() -> None:
    pytest.importorskip("torchgen")
    db = load_derivatives()
    assert len(db) > 300
    relu = db["relu"][0]
    assert saves_from_formulas(relu) == ({}, ["self"])
    leaky = db["leaky_relu"][0]
    assert saves_from_formulas(leaky) == ({"self": ["self"]}, [])
