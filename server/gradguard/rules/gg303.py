from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule


class InplaceOnInferenceTensor(Rule):
    code = "GG303"
    name = "inplace-on-inference-tensor"
    summary = "In-place op, outside `inference_mode`, on a tensor made inside it (or on a view of one)."
    why = """
Tensors created under `torch.inference_mode()` are inference tensors: they have no version counter and no
autograd metadata, which is what makes inference mode fast. Outside the block torch refuses to modify them
in place (*Inplace update to inference tensor outside InferenceMode is not allowed*), with or without
`no_grad`, because nothing could tell a graph that saved them that they changed. A view of an inference tensor
is one too.
"""
    fix = """
Rewrite the update out of place (`out = out.add(1)`), `.clone()` the tensor once outside the block to get a
normal tensor, or do the in-place update inside `inference_mode` (or use `no_grad` instead of `inference_mode`
where the results are modified later).
"""
    INVALID = ("""
import torch

model = torch.nn.Linear(4, 4)
head = torch.nn.Linear(4, 1)
with torch.inference_mode():
    feats = model(torch.randn(2, 4))
feats.div_(feats.norm(dim=1, keepdim=True))
head(feats).sum().backward()
""",)
    VALID = ("""
import torch

model = torch.nn.Linear(4, 4)
with torch.inference_mode():
    feats = model(torch.randn(2, 4))
    feats.div_(feats.norm(dim=1, keepdim=True))
""", """
import torch

model = torch.nn.Linear(4, 4)
with torch.no_grad():
    feats = model(torch.randn(2, 4))
feats.div_(feats.norm(dim=1, keepdim=True))
""")

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "inference"

    @classmethod
    def message(cls, h: Hazard) -> str:
        return (f"{h.op} modifies `{h.target}` in place outside inference_mode, but it is an inference tensor "
                f"(made inside inference_mode)")
