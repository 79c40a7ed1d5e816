"""``gradguard knowledge --regenerate | --check``: build saved_tensors.json by running torch.

For every callable in :mod:`gradguard.knowledge._specs` (plus every in-place ``Tensor.*_`` method torch
has) the probe calls it on small float32 CPU inputs, once per tensor argument with ONLY that argument
requiring grad, under ``torch.autograd.graph.saved_tensors_hooks``; each packed tensor is identified by
storage identity. In-place methods the probe cannot call are filled from torch's ``derivatives.yaml``.
Modules are probed in training mode (the default mode of a fresh module).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from gradguard.knowledge import TABLE_PATH


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def build_table(previous: str | None = TABLE_PATH) -> dict[str, Any]:
    """The whole table (deterministic: sorted keys, no addresses, no timestamps).

    Facts this machine cannot probe (an op whose autocast kernel this CPU lacks) are taken from ``previous``
    (the table being regenerated), so the result does not depend on which CPU ran the probe.
    """
    import warnings

    import torch

    from gradguard.knowledge._build import build_entries

    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ops = build_entries()
    old_ops: dict[str, Any] = {}
    if previous:
        try:
            with open(previous, encoding="utf-8") as f:
                old_ops = json.load(f).get("ops", {})
        except (OSError, ValueError, AttributeError):
            old_ops = {}
    for name, entry in ops.items():
        if entry.pop("_autocast_unprobed", False):
            casts = (old_ops.get(name) or {}).get("autocast_casts")
            if casts:
                entry["autocast_casts"] = casts
    return {"torch_version": torch.__version__, "probe_mode": "modules in training mode", "ops": ops}


def main(output: str | None = None, check: bool = False) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        print("gradguard knowledge --regenerate needs torch installed", file=sys.stderr)
        return 2
    import time

    t0 = time.perf_counter()
    data = build_table(output or TABLE_PATH)
    elapsed = time.perf_counter() - t0
    text = _dump(data)
    if check:
        path = output or TABLE_PATH
        try:
            with open(path, encoding="utf-8") as f:
                old = f.read()
        except FileNotFoundError:
            old = ""
        if old == text:
            print(f"{path}: up to date ({len(data['ops'])} callables, torch {data['torch_version']})")
            return 0
        try:
            old_ops = json.loads(old).get("ops", {}) if old else {}
        except ValueError:
            old_ops = {}
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
        print(f"{path}: differs from the installed torch {data['torch_version']}", file=sys.stderr)
        return 1
    path = output or TABLE_PATH
    tmp = path + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    print(f"wrote {path}: {len(data['ops'])} callables from torch {data['torch_version']} (probed in {elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--output")
    ap.add_argument("--check", action="store_true")
    ns = ap.parse_args()
    raise SystemExit(main(ns.output, ns.check))
