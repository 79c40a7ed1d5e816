"""Seed 004: a MobileNetV4-style backbone (conv-bn-relu blocks) with a custom head that applies
``F.dropout(..., inplace=True)`` to the pooled ReLU features: ReluBackward0 finds its saved output modified."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def conv_bn(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 8, 2)
        self.blocks = nn.Sequential(conv_bn(8, 16, 2), conv_bn(16, 32, 1))

    def forward(self, x):
        return self.blocks(self.stem(x))


class Classifier(nn.Module):
    def __init__(self, n_classes=4, drop_rate=0.2):
        super().__init__()
        self.backbone = Backbone()
        self.head = nn.Linear(32, 64)
        self.fc = nn.Linear(64, n_classes)
        self.drop_rate = drop_rate

    def forward(self, x):
        x = self.backbone(x).mean((2, 3))
        x = F.relu(self.head(x))  # gg: saved
        x = F.dropout(x, p=self.drop_rate, inplace=True, training=self.training)  # gg: culprit
        return self.fc(x)


model = Classifier()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
images = torch.randn(2, 3, 32, 32)
labels = torch.tensor([1, 3])
loss = F.cross_entropy(model(images), labels)
loss.backward()
opt.step()
