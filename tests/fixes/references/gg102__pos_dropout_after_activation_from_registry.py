# torch: clean (reference for tests/fixtures/gg102/pos_dropout_after_activation_from_registry.py, fixed by hand)
# The dropout is out of place: the ReLU's saved output keeps its values.
# A block picks its activation by name from a registry of layer classes (keys are module constants) and builds it
# with inplace=True inside an OrderedDict Sequential; a Dropout2d(inplace=True) follows it. With a dropout rate
# above its default of 0, the dropout overwrites the ReLU's output, which the ReLU saved.
from collections import OrderedDict

import torch
import torch.nn as nn

torch.manual_seed(0)
ACT_RELU = "relu"
ACT_ELU = "elu"
ACT_NONE = "none"


def activation_class(name):
    registry = {ACT_RELU: nn.ReLU, ACT_ELU: nn.ELU, ACT_NONE: nn.Identity}
    return registry[name.lower()]


def norm_act(channels, activation=ACT_RELU, inplace=True):
    act = activation_class(activation)(inplace=inplace)
    return nn.Sequential(OrderedDict([("bn", nn.BatchNorm2d(channels)), (activation, act)]))


class BottleneckWithDropout(nn.Module):
    def __init__(self, in_channels, out_channels, dropout=0.0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.norm_act = norm_act(out_channels)
        self.drop = nn.Dropout2d(dropout)

    def forward(self, x):
        return self.drop(self.norm_act(self.conv(x)))


BottleneckWithDropout(3, 4, dropout=0.2)(torch.randn(2, 3, 6, 6)).sum().backward()
