"""Fixed on save by editor.codeActionsOnSave {"source.fixAll.gradguard": "explicit"} (editor end-to-end fixture)."""

import torch

w = torch.randn(4, requires_grad=True)
y = torch.sigmoid(w)
y.mul_(2)  # hazard: GG101
y.sum().backward()
print("backward ok")
