"""What torch saves for backward, per callable: generated from the installed torch, loaded without torch.

The table ``saved_tensors.json`` (next to this file) is produced by ``gradguard knowledge --regenerate``
(:mod:`gradguard.knowledge.probe`), which runs every callable under
``torch.autograd.graph.saved_tensors_hooks`` and reads torch's own ``derivatives.yaml``. The analyzer only
reads the JSON: linting never imports torch.

Entry names:
  ``torch.exp``                     torch functions
  ``Tensor.exp`` / ``Tensor.exp_``  Tensor methods (first argument is ``self``)
  ``operator.add``                  Python operators on tensors (``x + y``; ``operator.iadd`` is ``x += y``,
                                    ``operator.getitem`` is ``x[i]``, ``operator.setitem`` is ``x[i] = v``)
  ``torch.nn.functional.relu``      functionals
  ``torch.nn.ReLU``                 modules (``args`` are the forward arguments; own parameters are named
                                    ``self.weight`` etc. and always count as requiring grad)
  ``NAME[inplace=True]``            the variant of NAME with that keyword (functionals and modules)

Each entry (all keys optional but ``kind``):
  kind              "function" | "method" | "operator" | "module"
  args              tensor arguments in positional order (for modules: forward arguments)
  params            all parameter names in positional order (to bind positional arguments); for modules the
                    constructor parameters
  saves             {arg: [args]}: ``arg`` is saved for backward when any of the listed args requires grad
  saves_output      [args]: the output is saved when any of the listed args requires grad ([] = never)
  view_of           the output is a view of this arg (shares its storage and version counter)
  multi_output_view true when the output is a sequence of views made by one multi-output op (unbind, split..)
  mutates           args written in place by this call
  inplace_kwarg     the keyword that turns on the in-place form (its variant is ``NAME[inplace=True]``)
  out_of_place      for in-place forms: the out-of-place counterpart's entry name
  accepts_out       the function takes ``out=``
  train_only        the mutation/saving described happens only in training mode (dropout)
  no_grad           the callable runs under no_grad internally (nn.init.*): in-place on leaves is allowed
  autocast_casts    args that CPU autocast (bfloat16) replaces by a cast copy before saving
  when_number       {arg: {saves, saves_output, differs}}: what is saved when ``arg`` is a Python number
  train_kwarg_default  default of the ``training`` flag of functional dropouts
  returns_tuple     the callable returns a tuple of tensors (topk, sort, max(dim), LSTM): unpacking is not unbinding
  grad_output_indices  of such a tuple, the outputs that can require grad (topk: [0]; integer indices never do)
  buffers           modules: constructor tensors kept as buffers (the loss modules' ``weight``, ``pos_weight``):
                    ``self.weight`` in ``saves`` is the tensor passed as ``weight=``, nothing when none was
  cuda              what differs on CUDA (an overlay of the fields above, with its ``source``): cuDNN RNNs save
                    their output, fused RMSNorm saves its weight, ``.cpu()`` copies. See ``devices`` at the top level
                    for whether CUDA facts were probed or derived from torch's sources.

Devices: the entries hold the CPU facts; ``Knowledge(device=None)`` (what the analysis uses unless it knows the
device) merges every device's overlay in, so that a tensor saved on any device the code may run on counts as
saved. Versions: the packaged table is exact for the torch it was generated with (``torch_version``);
``gradguard knowledge --regenerate`` writes a table for the installed torch to the user's cache
(:func:`cached_table_path`), and :func:`load` prefers it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

TABLE_PATH = os.path.join(os.path.dirname(__file__), "saved_tensors.json")


@dataclass(frozen=True)
class OpInfo:
    name: str
    kind: str
    args: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    saves: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    saves_output: tuple[str, ...] = ()
    view_of: str | None = None
    multi_output_view: bool = False
    mutates: tuple[str, ...] = ()
    inplace_kwarg: str | None = None
    out_of_place: str | None = None
    accepts_out: bool = False
    train_only: bool = False
    no_grad: bool = False
    autocast_casts: tuple[str, ...] = ()
    # arg -> (saves, saves_output) when that argument is a Python number and it changes what is saved (x ** 2)
    when_number: Mapping[str, tuple[Mapping[str, tuple[str, ...]], tuple[str, ...]]] = field(default_factory=dict)
    train_kwarg_default: bool | None = None
    returns_tuple: bool = False
    output_requires_grad: bool = True  # False: the result never requires grad (zeros_like, argmax, new_empty)
    # the result requires grad, but backward through it raises "not implemented" (binomial, floor_divide)
    backward_not_implemented: bool = False
    n_outputs: int = 0  # for ops returning a tuple (max(dim): values, indices)
    grad_from: tuple[str, ...] | None = None  # the args whose grad the result inherits (None: all of them)
    # for callables returning a tuple: which elements are the saved output (max(dim): [1], the indices;
    # nn.LSTM: [0], the output sequence)
    saved_output_indices: tuple[int, ...] = ()
    # for callables returning a tuple: the elements that can require grad (topk: [0]; the indices never do).
    # Empty: all of them.
    grad_output_indices: tuple[int, ...] = ()
    # modules: buffers that hold a tensor given to the constructor (CrossEntropyLoss(weight=w) keeps ``w`` itself as
    # ``self.weight``); ``self.<name>`` in ``saves`` is that tensor, or nothing when none was given
    buffers: tuple[str, ...] = ()

    @staticmethod
    def from_json(name: str, d: Mapping[str, Any]) -> OpInfo:
        return OpInfo(
            name=name,
            kind=str(d.get("kind", "function")),
            args=tuple(d.get("args", ())),
            params=tuple(d.get("params", ())),
            saves={str(k): tuple(v) for k, v in (d.get("saves") or {}).items()},
            saves_output=tuple(d.get("saves_output", ())),
            view_of=d.get("view_of"),
            multi_output_view=bool(d.get("multi_output_view", False)),
            mutates=tuple(d.get("mutates", ())),
            inplace_kwarg=d.get("inplace_kwarg"),
            out_of_place=d.get("out_of_place"),
            accepts_out=bool(d.get("accepts_out", False)),
            train_only=bool(d.get("train_only", False)),
            no_grad=bool(d.get("no_grad", False)),
            autocast_casts=tuple(d.get("autocast_casts", ())),
            when_number={str(a): ({str(k): tuple(v) for k, v in (w.get("saves") or {}).items()},
                                  tuple(w.get("saves_output", ())))
                         for a, w in (d.get("when_number") or {}).items() if w.get("differs")},
            train_kwarg_default=d.get("train_kwarg_default"),
            returns_tuple=bool(d.get("returns_tuple", False)),
            output_requires_grad=bool(d.get("output_requires_grad", True)),
            backward_not_implemented=bool(d.get("backward_not_implemented", False)),
            n_outputs=int(d.get("n_outputs", 0)),
            grad_from=tuple(d["grad_from"]) if "grad_from" in d else None,
            saved_output_indices=tuple(int(i) for i in d.get("saved_output_indices") or ()),
            grad_output_indices=tuple(int(i) for i in d.get("grad_output_indices") or ()),
            buffers=tuple(d.get("buffers", ())),
        )

    def saved_args(self, requires_grad: Mapping[str, bool]) -> list[str]:
        """Args saved for backward given which args (may) require grad."""
        return [a for a, conds in self.saves.items() if any(requires_grad.get(c, False) for c in conds)]

    def output_saved(self, requires_grad: Mapping[str, bool]) -> bool:
        return any(requires_grad.get(c, False) for c in self.saves_output)

    @property
    def saves_anything(self) -> bool:
        return bool(self.saves_output) or any(self.saves.values())


def _union(into: list[str], more: Any) -> list[str]:
    for c in more or ():
        if c not in into:
            into.append(c)
    return into


def merge_devices(entry: Mapping[str, Any], overlays: Mapping[str, Mapping[str, Any]],
                  device: str | None) -> dict[str, Any]:
    """One entry's facts for ``device``: the CPU facts (the entry itself) with that device's overlay applied; for
    ``device=None`` (not known statically) the union over every device: saved on any device counts as saved, a
    view on any device counts as a view, written on any device counts as written."""
    out = {k: v for k, v in entry.items() if k not in overlays}
    if device == "cpu" or not overlays:
        return out
    if device is not None:
        ov = overlays.get(device)
        if ov:
            out.update({k: v for k, v in ov.items() if k != "source"})
        return out
    saves = {k: list(v) for k, v in (out.get("saves") or {}).items()}
    saves_output = list(out.get("saves_output") or [])
    indices = list(out.get("saved_output_indices") or [])
    mutates = list(out.get("mutates") or [])
    for ov in overlays.values():
        for arg, conds in (ov.get("saves") or {}).items():
            _union(saves.setdefault(arg, []), conds)
        _union(saves_output, ov.get("saves_output"))
        _union(indices, ov.get("saved_output_indices"))
        _union(mutates, ov.get("mutates"))
        if not out.get("view_of") and ov.get("view_of"):
            out["view_of"] = ov["view_of"]
        if ov.get("multi_output_view"):
            out["multi_output_view"] = True
    out["saves"], out["saves_output"] = saves, saves_output
    if indices:
        out["saved_output_indices"] = sorted(indices)
    if mutates:
        out["mutates"] = mutates
    return out


_LAZY_PREFIX = "torch.nn.Lazy"


class Knowledge:
    """The table, read for one device: ``device=None`` (the default: the device is not known statically) gives the
    union over every device the table has facts for; "cpu" or "cuda" give that device's facts."""

    def __init__(self, data: Mapping[str, Any], device: str | None = None, path: str | None = None):
        self.torch_version: str = str(data.get("torch_version", "?"))
        self.raw: Mapping[str, Any] = data.get("ops", {})
        self.devices: Mapping[str, Any] = data.get("devices") or {"cpu": {"source": "probe"}}
        self.device = device
        self.path = path
        self._cache: dict[str, OpInfo | None] = {}

    def entry(self, name: str, device: str | None = None) -> dict[str, Any] | None:
        """The raw facts of one entry for ``device`` (see :func:`merge_devices`)."""
        d = self.raw.get(name)
        if d is None:
            return None
        overlays = {dev: d[dev] for dev in self.devices if dev != "cpu" and isinstance(d.get(dev), Mapping)}
        return merge_devices(d, overlays, device)

    def get(self, name: str) -> OpInfo | None:
        try:
            return self._cache[name]
        except KeyError:
            d = self.entry(name, self.device)
            info = OpInfo.from_json(name, d) if d is not None else None
            if info is None and name.startswith(_LAZY_PREFIX):
                # `nn.LazyLinear(out_features)`, `nn.LazyConv2d(out_channels, 3)`: the module it becomes at its first
                # call, built without the size it infers then (its first parameter)
                base = self.get("torch.nn." + name[len(_LAZY_PREFIX):])
                if base is not None and base.kind == "module" and base.params:
                    info = dataclasses.replace(base, params=base.params[1:])
            self._cache[name] = info
            return info

    def __contains__(self, name: str) -> bool:
        return name in self.raw

    def names(self) -> list[str]:
        return sorted(self.raw)

    def variant(self, name: str, **flags: Any) -> OpInfo | None:
        """The entry for ``NAME[k=v]`` when that variant exists, else NAME itself."""
        for k, v in flags.items():
            hit = self.get(f"{name}[{k}={v!r}]") or self.get(f"{name}[{k}={v}]")
            if hit is not None:
                return hit
        return self.get(name)


# ------------------------------------------------------------------------------------------------------------
# Which table: one regenerated for the installed torch (in the user's cache) when there is one, else the packaged
# table. Linting never imports torch: the installed version comes from the package metadata.

def cache_dir() -> str:
    """``$GRADGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/gradguard``, else ``~/.cache/gradguard``."""
    explicit = os.environ.get("GRADGUARD_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gradguard")


def installed_torch_version() -> str | None:
    """The installed torch's version, from its package metadata (torch is not imported)."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    try:
        return version("torch")
    except PackageNotFoundError:
        return None
    except Exception:
        return None


def cached_table_path(torch_version: str) -> str:
    """Where ``gradguard knowledge --regenerate`` writes the table for ``torch_version``."""
    safe = "".join(c if c.isalnum() or c in ".+-_" else "_" for c in torch_version)
    return os.path.join(cache_dir(), "knowledge", f"torch-{safe}.json")


def table_path() -> str:
    """The table the analysis uses: the cached one for the installed torch if it exists, else the packaged one."""
    if os.environ.get("GRADGUARD_KNOWLEDGE"):
        return os.environ["GRADGUARD_KNOWLEDGE"]
    v = installed_torch_version()
    if v:
        cached = cached_table_path(v)
        if os.path.isfile(cached):
            return cached
    return TABLE_PATH


@lru_cache(maxsize=8)
def _load(path: str, device: str | None) -> Knowledge:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        data = {"torch_version": "missing", "ops": {}}
    except (OSError, ValueError):  # an unreadable cached table: fall back to the packaged one
        if path == TABLE_PATH:
            raise
        return _load(TABLE_PATH, device)
    return Knowledge(data, device=device, path=path)


_resolved: dict[str, str] = {}


def load(path: str | None = None, device: str | None = None) -> Knowledge:
    """The table (``path`` or :func:`table_path`, resolved once per process), read for ``device`` (None: the
    union over devices)."""
    if path is None:
        path = _resolved.get("path")
        if path is None:
            path = _resolved["path"] = table_path()
    return _load(path, device)


def _cache_clear() -> None:
    _resolved.clear()
    _load.cache_clear()


load.cache_clear = _cache_clear  # type: ignore[attr-defined]
