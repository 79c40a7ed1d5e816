# torch: clean (reference for tests/fixtures/gg302/pos_transform_object_iterates_channels.py, fixed by hand)
import torch
import torch.nn as nn

torch.manual_seed(0)


class Normalize:
    """A torchvision-style transform object, applied here to an image that requires grad (an adversarial attack)."""

    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, img):
        for i, (m, s) in enumerate(zip(self.mean, self.std)):
            img[i].sub_(m).div_(s)
        return img


net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.LazyLinear(2))
image = torch.rand(3, 8, 8)
delta = torch.zeros_like(image, requires_grad=True)
x = Normalize([0.5] * 3, [0.25] * 3)(image + delta)
loss = net(x.unsqueeze(0)).sum()
loss.backward()
