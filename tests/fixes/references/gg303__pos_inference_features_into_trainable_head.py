# torch: clean (reference for tests/fixtures/gg303/pos_inference_features_into_trainable_head.py, fixed by hand)
import torch
import torch.nn as nn

torch.manual_seed(0)

backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32))
head = nn.Linear(32, 4)
opt = torch.optim.SGD(head.parameters(), lr=0.1)

x = torch.randn(8, 16)
y = torch.randint(0, 4, (8,))
with torch.inference_mode():
    feats = backbone(x)
feats = feats.clone()  # a normal tensor, made outside inference_mode
logits = head(feats)
loss = nn.functional.cross_entropy(logits, y)
loss.backward()
opt.step()
