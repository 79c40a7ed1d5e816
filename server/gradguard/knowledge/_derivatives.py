"""Read torch's own ``torchgen/packaged/autograd/derivatives.yaml`` (shipped inside the torch wheel).

Used to fill entries the probe could not call, and to cross-check probed entries: for each differentiable
input X of an ATen op, the tensors its backward formula references (other than through metadata such as
``.sym_sizes()`` or ``.scalar_type()``) are saved when X requires grad; ``result`` is the output.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

_META = (
    "sym_sizes", "sizes", "size", "sym_size", "options", "scalar_type", "dim", "numel", "sym_numel",
    "strides", "sym_strides", "layout", "device", "dtype", "is_conj", "is_neg", "is_complex",
    "is_floating_point", "defined", "sym_storage_offset", "storage_offset", "requires_grad", "is_contiguous",
    "suggest_memory_format", "is_sparse", "is_mkldnn",
)
_NONDIFF = {"non_differentiable", "not_implemented", "auto_element_wise", "auto_linear"}


def yaml_path() -> str | None:
    try:
        import torchgen
    except ImportError:
        return None
    p = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "autograd", "derivatives.yaml")
    return p if os.path.exists(p) else None


def parse_derivatives(text: str) -> list[dict[str, Any]]:
    """The subset of YAML derivatives.yaml uses: ``- name: SIG`` items of ``  key: formula`` entries.

    Formulas may continue on deeper-indented lines and may be quoted; nested mappings (``dispatch:``) are
    kept as raw text. No PyYAML needed (torch does not depend on it).
    """
    items: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    key: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line.startswith("- name:"):
            cur = {"name": line[len("- name:") :].strip()}
            items.append(cur)
            key = "name"
            continue
        if cur is None:
            continue
        m = re.match(r"^  ([A-Za-z_][\w, ]*):(.*)$", line)
        if m and not line.startswith("   "):
            key = m.group(1).strip()
            cur[key] = m.group(2).strip()
        elif key is not None:
            cur[key] = f"{cur[key]} {stripped}".strip()
    for it in items:
        for k, v in it.items():
            if isinstance(v, str) and len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
                it[k] = v[1:-1]
    return items


@lru_cache(maxsize=1)
def load_derivatives() -> dict[str, list[dict[str, Any]]]:
    """ATen base name (``mul``, ``leaky_relu_``) -> its overload entries (``name`` + formulas)."""
    p = yaml_path()
    if p is None:
        return {}
    with open(p, encoding="utf-8") as f:
        data = parse_derivatives(f.read())
    out: dict[str, list[dict[str, Any]]] = {}
    for item in data:
        sig = item.get("name", "")
        base = sig.split("(", 1)[0].split(".", 1)[0]
        out.setdefault(base, []).append(item)
    return out


def _arg_names(sig: str) -> list[str]:
    inner = sig.split("(", 1)[1].rsplit(")", 1)[0].split(") ->")[0]
    names = []
    for part in inner.split(","):
        part = part.strip()
        if not part or part == "*":
            continue
        decl = part.split("=", 1)[0].strip()
        names.append(decl.split()[-1])
    return names


def _tensor_args(sig: str) -> list[str]:
    inner = sig.split("(", 1)[1].split(") ->")[0]
    out = []
    for part in inner.split(","):
        decl = part.split("=", 1)[0].strip()
        bits = decl.split()
        if len(bits) >= 2 and bits[0].startswith("Tensor") and "[]" not in bits[0]:
            out.append(bits[-1])
    return out


def saves_from_formulas(item: dict[str, Any]) -> tuple[dict[str, list[str]], list[str]]:
    """({arg: [inputs whose grad formula references arg]}, [inputs whose formula references result])."""
    sig = item["name"]
    tensors = _tensor_args(sig)
    saves: dict[str, list[str]] = {}
    out: list[str] = []
    for key, formula in item.items():
        if key in ("name", "dispatch", "output_differentiability", "result") or not isinstance(formula, str):
            continue
        inputs = [k.strip() for k in key.split(",")]
        if formula.strip() in _NONDIFF:
            continue
        for var in [*tensors, "result"]:
            refs = re.finditer(rf"(?<![\w.]){re.escape(var)}(?!\w)(\s*\.\s*(\w+))?", formula)
            used = any(m.group(2) is None or m.group(2) not in _META for m in refs)
            if not used:
                continue
            for inp in inputs:
                if inp not in tensors:
                    continue
                if var == "result":
                    if inp not in out:
                        out.append(inp)
                else:
                    lst = saves.setdefault(var, [])
                    if inp not in lst:
                        lst.append(inp)
    return saves, out


def _lookup(op: str, n_tensors: int | None = None) -> dict[str, Any] | None:
    items = load_derivatives().get(op)
    if not items:
        return None
    for it in items:
        if n_tensors is None or len(_tensor_args(it["name"])) == n_tensors:
            return it
    return items[0]


def _renamer(function: bool) -> Any:
    def ren(n: str) -> str:
        return "input" if function and n == "self" else n

    return ren


def cross_check(entry: dict[str, Any], item: dict[str, Any]) -> str:
    """"agrees" when the probed saves equal what the formulas reference, else "differs"."""
    saves, saves_output = saves_from_formulas(item)
    ren = _renamer(entry.get("kind") == "function")
    want = {(ren(k), ren(c)) for k, v in saves.items() for c in v}
    got = {(k, c) for k, v in entry.get("saves", {}).items() for c in v}
    want_out = {ren(c) for c in saves_output}
    got_out = set(entry.get("saves_output", []))
    return "agrees" if want == got and want_out == got_out else "differs"


def fill_from_derivatives(table: dict[str, Any]) -> None:
    """Fill failed in-place method entries; record a derivatives.yaml cross-check on probed ATen entries."""
    db = load_derivatives()
    if not db:
        return
    for name, entry in table.items():
        if not name.startswith(("Tensor.", "torch.")) or "[" in name:
            continue
        attr = name.split(".", 1)[1]
        if entry.get("source") == "failed":
            if not attr.endswith("_"):
                continue
            item = _lookup(attr) or _lookup(attr[:-1])
            if item is None:
                continue
            saves, saves_output = saves_from_formulas(item)
            names = _arg_names(item["name"])
            tensors = _tensor_args(item["name"])
            ren = _renamer(entry.get("kind") == "function")
            entry.update(
                source="derivatives.yaml",
                args=[ren(t) for t in tensors],
                params=[ren(n) for n in names],
                saves={ren(k): [ren(c) for c in v] for k, v in saves.items()},
                saves_output=[ren(c) for c in saves_output],
                mutates=[ren("self")] if "self" in tensors else [],
                derivatives=item["name"],
            )
            entry.pop("errors", None)
            entry["probe_error"] = entry.pop("error", None)
            continue
        if entry.get("source") != "probe":
            continue
        if attr.endswith("_") or entry.get("kind") not in ("function", "method"):
            continue  # in-place forms save a copy of ``self`` that the formulas call ``self``
        items = db.get(attr, [])
        n = len(entry.get("args", []))
        match = [it for it in items if len(_tensor_args(it["name"])) == n]
        if len(match) != 1:
            continue  # no formula, or several overloads: nothing unambiguous to compare with
        entry["derivatives"] = match[0]["name"]
        entry["derivatives_check"] = cross_check(entry, match[0])
