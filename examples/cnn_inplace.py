# torch: error
"""A small image classifier with two in-place hazards that only show up in backward().

Run it (`python examples/cnn_inplace.py`) and torch stops with "one of the variables needed for gradient
computation has been modified by an inplace operation", naming neither line. `gradguard check
examples/cnn_inplace.py` names both, and `--diff` shows the fixes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def conv_bn_relu(cin, cout, stride=1):
    # Safe: BatchNorm does not keep its output, so ReLU may overwrite it.
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class SmallCNN(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(conv_bn_relu(3, 16, 2), conv_bn_relu(16, 32, 2), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(32, 64),
            nn.ReLU(),
            nn.Dropout(0.2, inplace=True),  # expect: GG102
            nn.Linear(64, num_classes),
        )
        self.confidence = nn.Linear(32, 1)

    def forward(self, x):
        feats = self.features(x)
        logits = self.classifier(feats)
        conf = torch.sigmoid(self.confidence(feats.flatten(1)))
        conf.clamp_(1e-3, 1 - 1e-3)  # expect: GG101
        return logits, conf


model = SmallCNN()
images = torch.randn(4, 3, 32, 32)
labels = torch.randint(0, 10, (4,))
logits, conf = model(images)
loss = F.cross_entropy(logits, labels) - conf.log().mean()
loss.backward()
print("backward ran clean")
