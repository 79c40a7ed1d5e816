# torch: clean (reference for GG303's INVALID example 1, fixed by hand)
import torch

backbone = torch.nn.Linear(4, 4)
head = torch.nn.Linear(4, 1)
with torch.inference_mode():
    feats = backbone(torch.randn(2, 4))
feats = feats.clone()
head(feats).sum().backward()
