"""``gradguard knowledge --regenerate | --check [--device cpu|cuda] [--output PATH]``: build the table by running
torch.

For every callable in :mod:`gradguard.knowledge._specs` (plus every in-place ``Tensor.*_`` method torch
has) the probe calls it on small float32 inputs, once per tensor argument with ONLY that argument
requiring grad, under ``torch.autograd.graph.saved_tensors_hooks``; each packed tensor is identified by
storage identity. In-place methods the probe cannot call are filled from torch's ``derivatives.yaml``.
Modules are probed in training mode (the default mode of a fresh module). ``--device cuda`` runs the probe on
CUDA tensors too and records what differs there (see :mod:`gradguard.knowledge._cuda_facts`).

``--regenerate`` writes to the user's cache (``gradguard.knowledge.cached_table_path``) unless ``--output`` says
where; the packaged table is only rewritten by naming it (``make knowledge``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from gradguard.knowledge import TABLE_PATH


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def build_table(previous: str | None = TABLE_PATH, devices: tuple[str, ...] = ("cpu",)) -> dict[str, Any]:
    """The whole table (deterministic: sorted keys, no addresses, no timestamps).

    The entries are probed on CPU. With "cuda" in ``devices`` the same probe runs on CUDA tensors and every entry
    whose facts differ there gets a ``cuda`` overlay (``"source": "probe (cuda)"``). Without it, the CUDA overlays
    come from ``previous`` when a GPU probed them for this very torch version, else from torch's sources
    (:mod:`gradguard.knowledge._cuda_facts`, marked "not probed here").

    Facts this machine cannot probe (an op whose autocast kernel this CPU lacks) are taken from ``previous``
    (the table being regenerated), so the result does not depend on which CPU ran the probe.
    """
    import warnings

    import torch

    from gradguard.knowledge._build import build_entries
    from gradguard.knowledge._cuda_facts import derived_overlays, probed_overlays

    unknown = [d for d in devices if d not in ("cpu", "cuda")]
    if unknown:
        raise ValueError(f"unknown device {unknown[0]!r} (cpu, cuda)")
    if "cuda" in devices and not torch.cuda.is_available():
        raise RuntimeError("--device cuda needs a CUDA GPU and a CUDA build of torch (torch.cuda.is_available() is "
                           "False here)")
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ops = build_entries("cpu")
        cuda_ops = build_entries("cuda") if "cuda" in devices else None
    old: dict[str, Any] = {}
    if previous:
        try:
            with open(previous, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError, AttributeError):
            old = {}
    old_ops: dict[str, Any] = old.get("ops", {}) if isinstance(old, dict) else {}
    for name, entry in ops.items():
        if entry.pop("_autocast_unprobed", False):
            casts = (old_ops.get(name) or {}).get("autocast_casts")
            if casts:
                entry["autocast_casts"] = casts
    meta: dict[str, Any] = {"cpu": {"source": "probe", "torch_version": torch.__version__}}
    if cuda_ops is not None:
        overlays = probed_overlays(ops, cuda_ops)
        meta["cuda"] = {"source": "probe (cuda)", "torch_version": torch.__version__,
                        "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0)}
    else:
        old_cuda = (old.get("devices") or {}).get("cuda") if isinstance(old, dict) else None
        if (isinstance(old_cuda, dict) and old_cuda.get("source") == "probe (cuda)"
                and old_cuda.get("torch_version") == torch.__version__):
            overlays = {n: e["cuda"] for n, e in old_ops.items() if isinstance(e.get("cuda"), dict) and n in ops}
            meta["cuda"] = old_cuda
        else:
            overlays = derived_overlays(ops)
            meta["cuda"] = {"source": "derived from torch's derivatives.yaml and CUDA kernels (not probed here)",
                            "torch_version": None}
    for name, ov in overlays.items():
        ops[name]["cuda"] = ov
    return {"torch_version": torch.__version__, "probe_mode": "modules in training mode", "devices": meta,
            "ops": ops}


def _compare(path: str, data: dict[str, Any], text: str) -> int:
    try:
        with open(path, encoding="utf-8") as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    if old == text:
        print(f"{path}: up to date ({len(data['ops'])} callables, torch {data['torch_version']})")
        return 0
    try:
        old_data = json.loads(old) if old else {}
    except ValueError:
        old_data = {}
    old_ops = old_data.get("ops", {})
    new_ops = data["ops"]
    added = sorted(set(new_ops) - set(old_ops))
    removed = sorted(set(old_ops) - set(new_ops))
    changed = sorted(n for n in set(new_ops) & set(old_ops) if new_ops[n] != old_ops[n])
    for label, names in (("added", added), ("removed", removed), ("changed", changed)):
        if names:
            more = f" ... (+{len(names) - 30})" if len(names) > 30 else ""
            print(f"{label} ({len(names)}): {', '.join(names[:30])}{more}")
    for n in changed[:5]:
        print(f"  {n}: table {json.dumps(old_ops[n], sort_keys=True)}")
        print(f"  {n}: torch {json.dumps(new_ops[n], sort_keys=True)}")
    table_torch = old_data.get("torch_version")
    if table_torch and table_torch != data["torch_version"]:
        from gradguard.knowledge import cached_table_path

        print(f"{path}: generated with torch {table_torch}; the installed torch {data['torch_version']} differs "
              f"from it. `gradguard knowledge --regenerate` writes a table for torch {data['torch_version']} to "
              f"{cached_table_path(data['torch_version'])}, which the analysis then uses.", file=sys.stderr)
    else:
        print(f"{path}: differs from the installed torch {data['torch_version']}", file=sys.stderr)
    return 1


def main(output: str | None = None, check: bool = False, device: str = "cpu") -> int:
    """``--regenerate`` writes the table for the installed torch to ``output``, by default the user's cache
    (never into the package); ``--check`` compares the installed torch with ``output``, by default the table the
    analysis uses (the cached one for this torch, else the packaged one)."""
    try:
        import torch
    except ImportError:
        print("gradguard knowledge --regenerate needs torch installed", file=sys.stderr)
        return 2
    import time

    from gradguard.knowledge import cached_table_path, table_path

    devices = ("cpu", "cuda") if device in ("cuda", "all") else ("cpu",)
    if device not in ("cpu", "cuda", "all"):
        print(f"gradguard knowledge: unknown device {device!r} (cpu, cuda, all)", file=sys.stderr)
        return 2
    if check:
        path = output or table_path()
    else:
        path = output or cached_table_path(torch.__version__)
    previous = path if os.path.isfile(path) else TABLE_PATH
    t0 = time.perf_counter()
    try:
        data = build_table(previous, devices)
    except RuntimeError as e:
        print(f"gradguard knowledge: {e}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - t0
    text = _dump(data)
    if check:
        return _compare(path, data, text)
    tmp = path + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    where = "" if output else " (the analysis uses it from now on with this torch)"
    print(f"wrote {path}: {len(data['ops'])} callables from torch {data['torch_version']} on "
          f"{' and '.join(devices)} (probed in {elapsed:.1f} s){where}")
    return 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--output")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "all"])
    ns = ap.parse_args()
    raise SystemExit(main(ns.output, ns.check, ns.device))
