"""Callables outside torch's own op table, described by what they do to tensors and modules.

The probed table (saved_tensors.json) covers torch's ops and modules. These are the other things model code calls
all the time whose effect the analysis must know without reading their source:

- einops, whose functions are thin layers over torch shape ops: ``rearrange`` is ``reshape``/``permute`` (a view of
  its input wherever the data allows; a copy when it merges axes its permutation moved apart, ``b n (h d) -> (b h)
  n d``, except where all but one of them have size 1: see ``analysis.calls.rearrange_copies`` and
  ``analysis.common.sized_view_of``), ``unpack`` is ``split`` (several views of one tensor), ``pack`` is ``cat``,
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
    "einops.einsum", "einops.einops.einsum",
})
# torch.utils.checkpoint.checkpoint(fn, *args): fn(*args), run again in backward (activation checkpointing)
CHECKPOINT = frozenset({"torch.utils.checkpoint.checkpoint"})
CHECKPOINT_FLAGS = frozenset({"use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug"})
# torch.autograd.functional.jacobian(func, inputs, ...): func called on the inputs made differentiable. Each is
# `inp.detach().requires_grad_()`, a leaf that requires grad, or with create_graph=True and an input that requires
# grad, `inp.view_as(inp)`, a view of it; (name -> how many leading tensor arguments after func are its inputs:
# all of them, or the first)
AUTOGRAD_FUNCTIONAL = {
    "torch.autograd.functional.jacobian": 1, "torch.autograd.functional.hessian": 1,
    "torch.autograd.functional.vjp": 1, "torch.autograd.functional.jvp": 1,
    "torch.autograd.functional.vhp": 1, "torch.autograd.functional.hvp": 1,
}
# einops.pack(tensors, pattern): (a new tensor joining them, the list of their packed shapes)
PACK = frozenset({"einops.pack", "einops.packing.pack"})
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

# When a library's source cannot be read (not installed where the analysis looks), these of its names are torch's
# own classes under another name. mmcv's and mmengine's BaseModule and containers subclass nn.Module,
# nn.ModuleList, nn.Sequential and nn.ModuleDict and add only weight initialisation and logging; Lightning's
# LightningModule is an nn.Module. Read from source when the library is there.
ABSENT_ALIASES = {
    **{f"{mod}.{name}": target
       for mod in ("mmcv.runner", "mmcv.runner.base_module", "mmengine.model", "mmengine.model.base_module")
       for name, target in (("BaseModule", "torch.nn.Module"), ("ModuleList", "torch.nn.ModuleList"),
                            ("Sequential", "torch.nn.Sequential"), ("ModuleDict", "torch.nn.ModuleDict"))},
    **{f"{mod}.LightningModule": "torch.nn.Module"
       for mod in ("pytorch_lightning", "pytorch_lightning.core", "pytorch_lightning.core.lightning",
                   "pytorch_lightning.core.module", "lightning", "lightning.pytorch", "lightning.pytorch.core",
                   "lightning.pytorch.core.module")},
}


# libraries of data, images, plots and logs: what their calls make is never a model (see Calls.call_ref)
DATA_LIBRARIES = frozenset({
    "numpy", "np", "math", "scipy", "random", "json", "pickle", "os", "sys", "time", "logging", "re", "PIL", "cv2",
    "imageio", "skimage", "sklearn", "pandas", "matplotlib", "tqdm", "wandb", "tensorboardX", "h5py", "yaml",
    "argparse", "pathlib", "collections", "itertools", "functools", "datetime", "glob", "shutil", "csv",
    "string", "struct", "copy", "io", "subprocess", "multiprocessing", "threading", "socket", "hashlib", "base64",
    "librosa", "soundfile", "nltk", "spacy", "networkx", "sympy", "plotly", "seaborn", "mlflow", "omegaconf",
    "hydra", "lmdb", "zarr", "open3d", "trimesh", "gym", "gymnasium",
})

# importlib.import_module(name): the module of that name
IMPORT_MODULE = frozenset({"importlib.import_module"})


def absent_name(qual: str) -> str:
    """The name the analysis knows ``qual`` by when its library's source is not found (see ABSENT_ALIASES)."""
    return ABSENT_ALIASES.get(qual, qual)


# mmcv's ConvModule (read from source when mmcv is installed): conv, then norm, then the activation built from
# ``act_cfg`` (default ``dict(type='ReLU')``, with ``inplace=True`` for the types that take it). Its output is the
# activation's output, which ReLU and its kin save for backward. Signature order: in_channels, out_channels,
# kernel_size, stride, padding, dilation, groups, bias, conv_cfg, norm_cfg, act_cfg, inplace, with_spectral_norm,
# padding_mode, order.
CONV_ACT_MODULES = frozenset({
    "mmcv.cnn.ConvModule", "mmcv.cnn.bricks.ConvModule", "mmcv.cnn.bricks.conv_module.ConvModule",
})
CONV_ACT_ARG_INDEX = {"act_cfg": 10, "inplace": 11, "order": 14}
CONV_ACT_DEFAULT = "ReLU"
# act_cfg ``type`` -> torch module; the types mmcv builds without ``inplace``
ACT_TYPES = {
    "ReLU": "torch.nn.ReLU", "LeakyReLU": "torch.nn.LeakyReLU", "ReLU6": "torch.nn.ReLU6", "ELU": "torch.nn.ELU",
    "PReLU": "torch.nn.PReLU", "Sigmoid": "torch.nn.Sigmoid", "Tanh": "torch.nn.Tanh", "GELU": "torch.nn.GELU",
    "SiLU": "torch.nn.SiLU", "Swish": "torch.nn.SiLU", "Hardswish": "torch.nn.Hardswish",
    "HSwish": "torch.nn.Hardswish", "Hardsigmoid": "torch.nn.Hardsigmoid",
}
ACT_WITHOUT_INPLACE = frozenset({"Tanh", "PReLU", "Sigmoid", "HSigmoid", "Swish", "GELU"})
# mmcv's build_activation_layer(cfg): the torch module ACT_TYPES names, built with cfg's other entries
BUILD_ACTIVATION = frozenset({
    "mmcv.cnn.build_activation_layer", "mmcv.cnn.bricks.build_activation_layer",
    "mmcv.cnn.bricks.activation.build_activation_layer",
})

# return (a handle to) their first argument, the module itself
RETURNS_FIRST_ARG = frozenset({
    "torch.nn.utils.weight_norm", "torch.nn.utils.spectral_norm",
    "torch.nn.utils.remove_weight_norm", "torch.nn.utils.remove_spectral_norm",
    "torch.nn.utils.weight_norm.weight_norm", "torch.nn.utils.spectral_norm.spectral_norm",
    "torch.nn.utils.parametrizations.weight_norm", "torch.nn.utils.parametrizations.spectral_norm",
    "torch.nn.utils.parametrizations.orthogonal", "torch.nn.utils.parametrize.register_parametrization",
    "torch.compile", "torch.jit.script", "torch.jit.trace", "torch.nn.SyncBatchNorm.convert_sync_batchnorm",
})

# make a module's weight a function of its original (see Calls.parametrize)
PARAMETRIZE = frozenset({
    "torch.nn.utils.weight_norm", "torch.nn.utils.spectral_norm",
    "torch.nn.utils.weight_norm.weight_norm", "torch.nn.utils.spectral_norm.spectral_norm",
    "torch.nn.utils.parametrizations.weight_norm", "torch.nn.utils.parametrizations.spectral_norm",
    "torch.nn.utils.parametrizations.orthogonal", "torch.nn.utils.parametrize.register_parametrization",
})

# torch.nn.utils.prune: `prune.l1_unstructured(module, "weight", amount)` keeps the parameter as `weight_orig`, a
# buffer `weight_mask`, and recomputes `weight = weight_orig * weight_mask` before each forward (a hook); it returns
# the module
PRUNE = frozenset(f"torch.nn.utils.prune.{f}" for f in (
    "random_unstructured", "l1_unstructured", "random_structured", "ln_structured", "custom_from_mask", "identity"))

# wrap a module: calling the wrapper calls it, `.module` is it
# BackPACK's extend(module): registers a full backward hook on the module and on each of its submodules (it walks
# module.children()), and returns the module
HOOKS_EVERY_MODULE = frozenset({"backpack.extend"})

WRAPPERS = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
})

# torch.optim.swa_utils.AveragedModel(model): a deep copy of the model, called as it is; `update_parameters(model)`
# averages the model's parameters into the copy's, in place
AVERAGED_MODELS = frozenset({"torch.optim.swa_utils.AveragedModel"})

# torch.distributions: a distribution is built from tensors; what it computes (log_prob, entropy, rsample, mean,
# ...) is a new tensor that depends on them, and sample() one that does not (it is not differentiable).
DISTRIBUTIONS_PREFIX = "torch.distributions."
NOT_DIFFERENTIABLE_METHODS = frozenset({"sample", "sample_n", "enumerate_support", "support"})
# distributions whose rsample() returns the very tensor its backward reads: Dirichlet's sample is the output that
# its `_Dirichlet` Function saved, and Beta's a view of one (Gamma divides the saved standard sample by the rate:
# a new tensor)
SAMPLE_SAVING_DISTRIBUTIONS = frozenset(f"torch.distributions.{c}" for c in (
    "Dirichlet", "Beta", "dirichlet.Dirichlet", "beta.Beta"))

# torch's creation functions: a new tensor that does not require grad (unless requires_grad=True), whatever its
# arguments are (a fill value computed from a tensor is read as a number)
TORCH_FACTORIES = frozenset({
    "torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.empty_strided", "torch.arange", "torch.range",
    "torch.linspace", "torch.logspace", "torch.eye", "torch.rand", "torch.randn", "torch.randint", "torch.randperm",
    "torch.tensor", "torch.from_numpy", "torch.tril_indices", "torch.triu_indices", "torch.bernoulli",
    "torch.poisson", "torch.scalar_tensor", "torch.sparse_coo_tensor_unsafe", "torch.frombuffer",
})

# torch's functions that compute indices, counts or bins: never differentiable (no result requires grad), and with
# `return_inverse=True` / `return_counts=True` (unique) several results
INDEX_FUNCTIONS = frozenset({
    "torch.unique", "torch.unique_consecutive", "torch.nonzero", "torch.argwhere", "torch.searchsorted",
    "torch.bucketize", "torch.bincount", "torch.histc", "torch.histogram", "torch.count_nonzero",
})

# torch's legacy constructors: `torch.Tensor(3, 4)` and `torch.FloatTensor([1, 2])` make a new tensor (sizes, or a
# copy of the data given); `torch.Tensor(t)` of a tensor is an alias of it
LEGACY_TENSOR_CTORS = frozenset(
    f"torch.{cuda}{kind}Tensor" for cuda in ("", "cuda.")
    for kind in ("", "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool"))

# the pre-0.4 wrapper: `Variable(t)` is `t.detach()`, and `Variable(t, requires_grad=True)` a leaf that requires grad
VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

# torch functions that read back whatever was saved (a checkpoint dict, a state dict, a module, now and then a
# tensor): what they return is not known to be a tensor
TORCH_LOADERS = frozenset({
    "torch.load", "torch.hub.load", "torch.hub.load_state_dict_from_url", "torch.utils.model_zoo.load_url",
    "torch.jit.load",
})

# how the analysis names what a factory made (`buf = torch.zeros(n, d)`, `out = x.new_zeros(...)`, `*_like`): surely
# one tensor
NEW_TENSOR_ORIGINS = frozenset({q.rsplit(".", 1)[-1] for q in TORCH_FACTORIES} | {
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})

DEEPCOPY = frozenset({"copy.deepcopy"})
CHAIN = frozenset({"itertools.chain"})
PARTIAL = frozenset({"functools.partial"})

# Packages the analysis never reads the source of: what it needs of them is above.
UNREAD_PACKAGES = frozenset({"einops"})
