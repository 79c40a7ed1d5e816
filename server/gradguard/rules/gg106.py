from gradguard.analysis.hazards import Hazard, SaveRecord
from gradguard.rules.base import Rule, at

# Arguments that are index tensors (int64, or a bool mask for indexing) in torch's signatures: `gather`,
# `scatter`, `index_select`, `index_add`, `take_along_dim`, `x[idx]` (indices); `embedding` and
# `nn.Embedding` take their indices as `input`.
_INDEX_ARGS = frozenset({"index", "indices", "offsets"})
_INDEX_INPUT_OPS = ("embedding", "Embedding", "EmbeddingBag", "embedding_bag", "one_hot")


def is_index(r: SaveRecord) -> bool:
    if r.arg in _INDEX_ARGS:
        return True
    return r.arg == "input" and any(r.op_name.endswith(op) for op in _INDEX_INPUT_OPS)


class InplaceOnSavedIndex(Rule):
    code = "GG106"
    name = "inplace-on-saved-index"
    summary = "In-place write to an index tensor (`x[idx]`, `gather`, `index_select`, `nn.Embedding` ids) that the " \
              "indexing op saved for backward."
    why = """
Indexing ops keep their index tensor to route the gradient back: `x[idx]` and `x[mask]` (IndexBackward0
scatters the gradient to the rows `idx` names), `gather` / `scatter` / `index_select` / `index_add`, and
`nn.Embedding` (its backward adds each row's gradient into the embedding rows the ids name). The index does not
require grad, but it is still saved, with its version: shifting, clamping or zeroing it in place afterwards
(`idx += 1`, `ids.clamp_(max=n)`, `mask.fill_(False)`) makes backward raise *one of the variables needed for
gradient computation has been modified by an inplace operation: [torch.LongTensor ...]*.
"""
    fix = """
Compute the new indices out of place (`idx = idx + 1`, `ids = ids.clamp(max=n)`), or index with a copy
(`x[idx.clone()]`) when the indices must change in place later.
"""
    INVALID = ("""
import torch

x = torch.randn(5, 3, requires_grad=True)
idx = torch.tensor([0, 2])
rows = x[idx]
idx += 1
rows.sum().backward()
""", """
import torch
import torch.nn as nn

emb = nn.Embedding(10, 4)
ids = torch.tensor([1, 2, 8])
out = emb(ids)
ids.clamp_(max=5)
out.sum().backward()
""")
    VALID = ("""
import torch

x = torch.randn(5, 3, requires_grad=True)
idx = torch.tensor([0, 2])
rows = x[idx]
idx = idx + 1
rows.sum().backward()
""",)

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind == "saved" and bool(h.saves) and all(is_index(r) for r in h.saves)

    @classmethod
    def message(cls, h: Hazard) -> str:
        r = h.saves[0]
        more = f" (and {len(h.saves) - 1} more)" if len(h.saves) > 1 else ""
        return (f"{h.op} modifies `{h.target}` in place, but it is the index tensor that {r.op} "
                f"({at(r.site, h)}) saved to route the gradient back{more}")
