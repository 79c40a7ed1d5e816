# torch: clean (reference for tests/fixtures/gg102/pos_loss_module_inserted_before_inplace_relu.py, fixed by hand)
# The ReLU is out of place: the features the style loss saved keep their values.
# The neural style transfer recipe: walk a feature extractor's layers, copy each into a new Sequential under a
# name made with str.format, and insert a loss module after the chosen convolutions. The style loss computes a
# Gram matrix (mm saves the features) and passes the features on; the next layer, ReLU(inplace=True), overwrites
# them.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class GramStyleLoss(nn.Module):
    def __init__(self, target):
        super().__init__()
        self.target = target.detach()

    def forward(self, features):
        flat = features.view(features.size(1), -1)
        self.loss = F.mse_loss(torch.mm(flat, flat.t()), self.target)
        return features


extractor = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1))
model = nn.Sequential()
style_losses = []
i = 0
for layer in extractor.children():
    if isinstance(layer, nn.Conv2d):
        i += 1
        name = "conv_{}".format(i)
    else:
        name = "relu_{}".format(i)
    model.add_module(name, layer)
    if name in ("conv_1",):
        style_loss = GramStyleLoss(torch.zeros(8, 8))
        model.add_module("style_loss_{}".format(i), style_loss)
        style_losses.append(style_loss)

image = torch.rand(1, 3, 8, 8, requires_grad=True)
model(image)
sum(s.loss for s in style_losses).backward()
