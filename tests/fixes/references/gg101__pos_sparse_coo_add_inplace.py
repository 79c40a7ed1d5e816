# torch: clean
# Hand-fixed reference: allow_mutation_on_saved_tensors does not cover sparse tensors, so the reference is the
# out-of-place symmetrisation (what pytorch3d's fix did).
import warnings

import torch

warnings.simplefilter("ignore")  # sparse invariant checks
torch.manual_seed(0)

values = torch.rand(3, requires_grad=True) * 2
idx = torch.tensor([[0, 1, 2], [1, 2, 0]])
L = torch.sparse_coo_tensor(idx, values, (3, 3))
L = L + L.t()
torch.sparse.sum(L).backward()
