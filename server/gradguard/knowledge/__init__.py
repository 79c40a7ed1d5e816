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
"""

from __future__ import annotations

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
        )

    def saved_args(self, requires_grad: Mapping[str, bool]) -> list[str]:
        """Args saved for backward given which args (may) require grad."""
        return [a for a, conds in self.saves.items() if any(requires_grad.get(c, False) for c in conds)]

    def output_saved(self, requires_grad: Mapping[str, bool]) -> bool:
        return any(requires_grad.get(c, False) for c in self.saves_output)

    @property
    def saves_anything(self) -> bool:
        return bool(self.saves_output) or any(self.saves.values())


class Knowledge:
    def __init__(self, data: Mapping[str, Any]):
        self.torch_version: str = str(data.get("torch_version", "?"))
        self.raw: Mapping[str, Any] = data.get("ops", {})
        self._cache: dict[str, OpInfo | None] = {}

    def get(self, name: str) -> OpInfo | None:
        try:
            return self._cache[name]
        except KeyError:
            d = self.raw.get(name)
            info = OpInfo.from_json(name, d) if d is not None else None
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


@lru_cache(maxsize=4)
def load(path: str = TABLE_PATH) -> Knowledge:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        data = {"torch_version": "missing", "ops": {}}
    return Knowledge(data)
