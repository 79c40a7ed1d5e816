"""Libraries the checking interpreter does not have: what knowledge.libraries says of mmcv's ConvModule and of
the classes that are torch's under another name. Each snippet runs with torch against the small mmcv stand-in
of the ``absent_mmcv_layers`` fixture project, which the analysis never sees."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gradguard.api import check_source

RUNTIME = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "absent_mmcv_layers" / "runtime"

TEMPLATE = """
import torch
from mmcv.cnn import ConvModule, build_activation_layer
from mmcv.runner import BaseModule


class Head(BaseModule):
    def __init__(self):
        super().__init__()
        self.conv = ConvModule(3, 4, 3, padding=1{args})
        self.gate = torch.nn.Linear(5, 5)
        self.act = build_activation_layer({act})

    def forward(self, x):
        y = self.conv(x)
        y += 1
        return y.mean() + self.act(torch.sigmoid(self.gate(x))).mean()


Head()(torch.randn(2, 3, 5, 5, requires_grad=True)).backward()
"""

PLAIN_RELU = "dict(type='ReLU')"

# (id, ConvModule arguments, build_activation_layer's config, codes, torch outcome)
CASES = [
    ("default_act_is_relu_inplace", "", PLAIN_RELU, ["GG101"], "error"),
    ("relu_not_inplace", ", inplace=False", PLAIN_RELU, ["GG101"], "error"),
    ("sigmoid_saves_its_output", ", act_cfg=dict(type='Sigmoid')", PLAIN_RELU, ["GG101"], "error"),
    ("gelu_saves_its_input", ", act_cfg=dict(type='GELU')", PLAIN_RELU, [], "clean"),
    ("no_activation", ", act_cfg=None", PLAIN_RELU, [], "clean"),
    ("batchnorm_then_no_activation", ", norm_cfg=dict(type='BN'), act_cfg=None", PLAIN_RELU, [], "clean"),
    # build_activation_layer: the activation its config names, in place when the config says so (sigmoid saved
    # the gate's output, which an in-place ReLU then changes)
    ("built_relu_inplace", ", act_cfg=None", "dict(type='ReLU', inplace=True)", ["GG102"], "error"),
    ("built_leaky_relu_inplace", ", act_cfg=None", "dict(type='LeakyReLU', negative_slope=0.1, inplace=True)",
     ["GG102"], "error"),
    ("built_relu_out_of_place", ", act_cfg=None", "dict(type='ReLU')", [], "clean"),
    ("built_tanh", ", act_cfg=None", "dict(type='Tanh')", [], "clean"),
]


@pytest.mark.parametrize(("args", "act", "codes"), [c[1:4] for c in CASES], ids=[c[0] for c in CASES])
def test_conv_module_without_mmcv(args: str, act: str, codes: list[str]) -> None:
    src = TEMPLATE.format(args=args, act=act)
    assert sorted(f.code for f in check_source(src, "head.py")) == codes


@pytest.mark.torch
@pytest.mark.parametrize(("args", "act", "outcome"), [(c[1], c[2], c[4]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_conv_module_labels_match_torch(args: str, act: str, outcome: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(RUNTIME))
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(TEMPLATE.format(args=args, act=act))], capture_output=True,
                         text=True, timeout=120, env=env)
    if outcome == "error":
        assert "modified by an inplace operation" in run.stderr, run.stderr[-2000:]
    else:
        assert run.returncode == 0, run.stderr[-2000:]


def test_a_message_names_the_activation_and_its_line() -> None:
    found = check_source(TEMPLATE.format(args="", act=PLAIN_RELU), "head.py")
    assert len(found) == 1
    assert "the output of ConvModule's ReLU(inplace=True)" in found[0].message and "saved" in found[0].message
