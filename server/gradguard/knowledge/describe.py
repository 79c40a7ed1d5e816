"""Human-readable text for one table entry (``gradguard knowledge NAME``, LSP hover / showKnowledge)."""

from __future__ import annotations

from typing import Any

from gradguard.knowledge import Knowledge, OpInfo

_PREFIXES = ("", "torch.", "Tensor.", "torch.nn.functional.", "torch.nn.", "torch.nn.init.", "operator.")
_ALIASES = {"F.": "torch.nn.functional.", "nn.init.": "torch.nn.init.", "nn.": "torch.nn.", "torch.Tensor.": "Tensor."}


def resolve(kb: Knowledge, name: str) -> str | None:
    """The table key for ``name``: exact, an alias (``F.relu``, ``nn.ReLU``), or a unique short name."""
    if name in kb:
        return name
    for short, full in _ALIASES.items():
        if name.startswith(short) and full + name[len(short) :] in kb:
            return full + name[len(short) :]
    for p in _PREFIXES:
        if p + name in kb:
            return p + name
    return None


def _conds(conds: tuple[str, ...], args: tuple[str, ...]) -> str:
    if set(conds) >= {a for a in args if not a.startswith("self.")} and len(conds) > 1:
        return "whenever any input requires grad"
    return "when " + " or ".join(f"`{c}`" for c in conds) + " requires grad"


def describe(kb: Knowledge, name: str) -> str | None:
    key = resolve(kb, name)
    if key is None:
        return None
    info = kb.get(key)
    if info is None:
        return None
    raw: dict[str, Any] = dict(kb.raw.get(key) or {})
    return _text(info, raw, kb)


def _text(info: OpInfo, raw: dict[str, Any], kb: Knowledge) -> str:
    lines = [f"{info.name}  ({info.kind}; torch {kb.torch_version}; source: {raw.get('source', '?')})"]
    if info.params:
        lines.append(f"  signature: ({', '.join(info.params)})")
    if raw.get("error"):
        lines.append(f"  could not be probed: {raw['error']}")
    saved_any = False
    for arg, conds in info.saves.items():
        if conds:
            saved_any = True
            lines.append(f"  saves `{arg}` for backward {_conds(conds, info.args)}")
    if info.saves_output:
        saved_any = True
        idx = info.saved_output_indices
        which = "the output" if not idx else "output " + ", ".join(f"[{i}]" for i in idx)
        lines.append(f"  saves {which} for backward {_conds(info.saves_output, info.args)}")
    for arg, alt in (raw.get("when_number") or {}).items():
        what = [f"`{a}`" for a, c in alt.get("saves", {}).items() if c]
        if alt.get("saves_output"):
            what.append("the output")
        lines.append(f"  when `{arg}` is a Python number it saves {', '.join(what) if what else 'nothing'} instead")
    if raw.get("saves_internal"):
        lines.append("  also saves internal tensors of its own (statistics, masks, copies): not visible to your code")
    if not saved_any and "saves" in raw:
        lines.append("  saves none of its inputs or outputs: modifying them in place afterwards is safe for it")
    if saved_any:
        lines.append(
            "  => modifying a saved tensor in place before backward() raises "
            '"one of the variables needed for gradient computation has been modified by an inplace operation"'
        )
    if info.mutates:
        lines.append(f"  writes in place into: {', '.join(f'`{m}`' for m in info.mutates)}")
        if info.out_of_place:
            lines.append(f"  out-of-place form: {info.out_of_place}")
    if raw.get("mutates_grad"):
        lines.append(f"  writes into the .grad of {', '.join(raw['mutates_grad'])} (not their data)")
    if raw.get("writes_without_version_bump"):
        lines.append(
            "  changes the data of " + ", ".join(raw["writes_without_version_bump"])
            + " without bumping the version counter (autograd does not notice)"
        )
    if raw.get("mutates_state"):
        lines.append(f"  updates module state in place: {', '.join(raw['mutates_state'])}")
    if info.view_of:
        lines.append(f"  returns a view of `{info.view_of}` (shares its storage and version counter)")
    if raw.get("shares_storage_of"):
        lines.append(
            f"  shares the storage of `{raw['shares_storage_of']}` but not its version counter: in-place writes "
            "through it are not seen by autograd"
        )
    if raw.get("returns_arg"):
        lines.append(f"  returns `{raw['returns_arg']}` itself (same tensor)")
    if info.multi_output_view:
        lines.append(
            "  returns several views of one tensor: modifying any of them in place raises "
            '"... is a view and is being modified inplace" when the input requires grad'
        )
    if info.inplace_kwarg:
        lines.append(f"  `{info.inplace_kwarg}=True` makes it write into its input (see {info.name}[{info.inplace_kwarg}=True])")
    if info.no_grad:
        lines.append("  runs under torch.no_grad(): allowed on leaf tensors that require grad (e.g. parameters)")
    if raw.get("eval"):
        ev = raw["eval"]
        saved = [a for a, c in ev.get("saves", {}).items() if c] + (["the output"] if ev.get("saves_output") else [])
        lines.append(f"  in eval mode it saves: {', '.join(saved) or 'nothing'}")
    if raw.get("attribute"):
        lines.append("  an attribute (no call)")
    if info.train_only:
        lines.append("  only in training mode (module.train() / training=True); a no-op for autograd in eval mode")
    if raw.get("train_kwarg_default") is not None:
        lines.append(f"  `{raw.get('train_kwarg')}` defaults to {raw['train_kwarg_default']}")
    if info.autocast_casts:
        lines.append(
            "  under CPU autocast (bfloat16) saves a cast copy of: " + ", ".join(f"`{a}`" for a in info.autocast_casts)
        )
    if info.accepts_out:
        lines.append("  accepts out=: writing into a tensor saved for backward is an in-place modification")
    if raw.get("non_differentiable"):
        lines.append(f"  not differentiable w.r.t.: {', '.join(raw['non_differentiable'])}")
    if raw.get("note"):
        lines.append(f"  note: {raw['note']}")
    ov = raw.get("cuda")
    if isinstance(ov, dict):
        parts = [f"saves `{a}` {_conds(tuple(c), info.args)}" for a, c in (ov.get("saves") or {}).items() if c]
        if ov.get("saves_output"):
            ov_idx = ov.get("saved_output_indices")
            which = "the output" if not ov_idx else "output " + ", ".join(f"[{i}]" for i in ov_idx)
            parts.append(f"saves {which} {_conds(tuple(ov['saves_output']), info.args)}")
        if "view_of" in ov and not ov["view_of"]:
            parts.append("returns a new tensor (a copy), not a view")
        lines.append(f"  on CUDA: {'; '.join(parts) or 'differs'} [{ov.get('source', '?')}]; the facts above hold "
                     "on any device (saved on one device counts as saved)")
    return "\n".join(lines)
