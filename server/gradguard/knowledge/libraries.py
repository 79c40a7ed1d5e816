"""Callables outside torch's own op table, described by what they do to tensors and modules.

The probed table (saved_tensors.json) covers torch's ops and modules. These are the other things model code calls
all the time whose effect the analysis must know without reading their source:

- einops, whose functions are thin layers over torch shape ops: ``rearrange`` is ``reshape``/``permute`` (a view of
  its input wherever the data allows), ``unpack`` is ``split`` (several views of one tensor), ``pack`` is ``cat``,
  ``einsum`` is ``torch.einsum`` with the pattern last, ``repeat``/``reduce`` make new tensors;
- torch utilities that hand back the module they were given (``weight_norm``, ``spectral_norm``,
  ``torch.compile``, ``torch.jit.script``) or wrap it (``DataParallel``, ``DistributedDataParallel``: calling the
  wrapper calls the module, ``.module`` is the module);
- ``copy.deepcopy`` (a separate copy with its own parameters: an EMA or target network) and ``functools.partial``.

Names are the qualified names code imports them by; ``einops.einops.*`` is where the functions are defined.
"""

from __future__ import annotations

# einops: a view of the first argument where the data allows (reshape/permute/squeeze semantics)
VIEW_OF_FIRST = frozenset({
    "einops.rearrange", "einops.einops.rearrange",
})
# a new tensor computed from the tensor arguments (no alias)
NEW_FROM_TENSORS = frozenset({
    "einops.repeat", "einops.einops.repeat", "einops.reduce", "einops.einops.reduce",
    "einops.einsum", "einops.einops.einsum", "einops.pack", "einops.packing.pack",
})
# like torch.split: the returned tensors are several views of one tensor
SPLIT_VIEWS = frozenset({"einops.unpack", "einops.packing.unpack"})
# einops.einsum(x, y, "pattern"): torch.einsum("pattern", x, y)
EINSUM_PATTERN_LAST = frozenset({"einops.einsum", "einops.einops.einsum"})

# nn.Module layers from einops: what calling one does to its input
LIBRARY_MODULES = {
    "einops.layers.torch.Rearrange": "view",
    "einops.layers.torch.Reduce": "new",
    "einops.layers.torch.EinMix": "new",
}

# return (a handle to) their first argument, the module itself
RETURNS_FIRST_ARG = frozenset({
    "torch.nn.utils.weight_norm", "torch.nn.utils.spectral_norm",
    "torch.nn.utils.remove_weight_norm", "torch.nn.utils.remove_spectral_norm",
    "torch.nn.utils.weight_norm.weight_norm", "torch.nn.utils.spectral_norm.spectral_norm",
    "torch.nn.utils.parametrizations.weight_norm", "torch.nn.utils.parametrizations.spectral_norm",
    "torch.nn.utils.parametrizations.orthogonal", "torch.nn.utils.parametrize.register_parametrization",
    "torch.compile", "torch.jit.script", "torch.jit.trace", "torch.nn.SyncBatchNorm.convert_sync_batchnorm",
})

# wrap a module: calling the wrapper calls it, `.module` is it
WRAPPERS = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
})

# torch.distributions: a distribution is built from tensors; what it computes (log_prob, entropy, rsample, mean,
# ...) is a new tensor that depends on them, and sample() one that does not (it is not differentiable).
DISTRIBUTIONS_PREFIX = "torch.distributions."
NOT_DIFFERENTIABLE_METHODS = frozenset({"sample", "sample_n", "enumerate_support", "support"})

DEEPCOPY = frozenset({"copy.deepcopy"})
PARTIAL = frozenset({"functools.partial"})

# Packages the analysis never reads the source of: what it needs of them is above.
UNREAD_PACKAGES = frozenset({"einops"})
