"""An in-place change, outside inference mode, to a view of a tensor made under ``torch.inference_mode()``."""
import torch

with torch.inference_mode():
    c = torch.ones(1, 2, 3)
out = c.view(-1)
out.add_(1)  # gg: culprit
