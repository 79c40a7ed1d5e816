"""The child side of ``gradguard run``: runs the user's script unchanged under a tracer, writes facts as JSON.

This file is executed BY PATH in the child interpreter (``python _child.py REPORT KIND TARGET [ARGS...]``), which
may be another Python than the one gradguard is installed in (``--python``): it imports only the standard library
and torch, never gradguard.

What it does, and why it cannot change what the program computes:

* anomaly detection (``check_nan=False`` unless asked): torch records, for every autograd node, the Python stack
  of the forward call that created it (and therefore saved its tensors); it computes nothing differently;
* a ``TorchDispatchMode`` that, for every ATen op whose schema marks an argument as written
  (``alias_info.is_write``: ``add_``, ``copy_``, ``out=``, ``_foreach_mul_``, the running stats of
  ``native_batch_norm`` ...), logs the storage written, its version counter BEFORE the write, the op and the
  user-code stack; it then calls the op unchanged (views share storage and version counter with their base, so a
  write through a view is logged against the same storage);
* a wrapper around ``torch.autograd.graph._engine_run_backward`` that, when backward raises torch's own
  version-counter error, walks the graph that failed, finds the saved tensor whose version moved (by reading the
  saved tensors with ``SavedTensor.data``, which does not unpack or check anything), and matches the logged writes
  that moved that version counter from the saved version to the current one. The exception is re-raised as is.

No saved-tensor hooks are used: under ``saved_tensors_hooks`` torch skips its version check (silent wrong
gradients) and ``torch.func`` refuses to run; here torch keeps doing its own check.

torch is not imported before the script imports it (an import hook installs the tracer right after the first
``import torch``), so environment variables the script sets before importing torch still take effect.
"""

from __future__ import annotations

import os
import sys

# Nothing next to the script (or in the working directory) may replace the tracer's own modules: a ``runpy.py``
# or ``json.py`` there must not run in its place.  Until main() hands sys.path over to the script, the tracer
# imports with only the absolute entries that are neither this file's directory, nor the working directory, nor
# '' (an empty PYTHONPATH component); everything it needs is imported here, up front.  main() then gives the
# script exactly the sys.path ``python script.py`` would have (its own directory first).
if __name__ == "__main__":
    _STARTUP_PATH: list[str] | None = list(sys.path)
    _cwd = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path[1:] if p and os.path.isabs(p) and os.path.realpath(p) != _cwd]
else:  # imported (tests): leave the importer's sys.path alone
    _STARTUP_PATH = None

import ast
import collections
import importlib.util
import json
import linecache
import re
import runpy
import signal
import sysconfig
import time
import traceback
import types
import warnings
import weakref
from typing import Any

_HERE = os.path.abspath(__file__)
_MAIN_PID = os.getpid()
_T0 = time.perf_counter()

# Frame kinds.
_SKIP, _LIB, _USER = 0, 1, 2
_KIND: dict[str, int] = {}
_INTERNAL_DIRS: list[str] = []
_STDLIB_DIRS: list[str] = []
_LIB_DIRS: list[str] = []
_USER_FILES: set[str] = set()

_LOG_MAX = 50_000
_log: collections.deque = collections.deque(maxlen=_LOG_MAX)
_stats = {"ops": 0, "writes": 0, "optimizer_steps_untraced": 0}
_RESTORED: set[str] = set()  # ops run with ADInplaceOrView re-enabled (see _needs_restore)
_incidents: list[dict[str, Any]] = []
_enabled = [True]
_tracer_state: dict[str, Any] = {"installed": False, "error": None}
_TORCH_DIR = ["\0"]
_SKIP_DYNAMO = [os.environ.get("GRADGUARD_SKIP_DYNAMO") == "1"]
_MODULE_SITES: Any = None  # weakref.WeakKeyDictionary: nn.Module -> frames of its construction

VERSION_RE = re.compile(
    r"\[(?P<type>[\w.]+) \[(?P<shape>[\d, ]*)\]\](?:, which is output (?P<nr>\d+) of (?P<node>[\w.:<>]+),)?"
    r" is at version (?P<actual>\d+); expected version (?P<expected>\d+) instead"
)
INPLACE_MSG = "modified by an inplace operation"
LEAF_MSG = "a leaf Variable that requires grad is being used in an in-place operation"
VIEW_LEAF_MSG = "a view of a leaf Variable that requires grad is being used in an in-place operation"
VIEW_MSG = "is a view and is being modified inplace"


# ----------------------------------------------------------------------------------------------------------------
# Frames: which are the user's, which a library's, which torch/stdlib internals (skipped).

def _init_dirs(torch_dir: str | None) -> None:
    internal = [os.path.dirname(_HERE) + os.sep]
    if torch_dir:
        internal.append(torch_dir.rstrip(os.sep) + os.sep)
        internal.append(os.path.realpath(torch_dir).rstrip(os.sep) + os.sep)
    paths = sysconfig.get_paths()
    std = []
    for key in ("stdlib", "platstdlib"):
        p = paths.get(key)
        if p:
            std += [p.rstrip(os.sep) + os.sep, os.path.realpath(p).rstrip(os.sep) + os.sep]
    lib = []
    for key in ("purelib", "platlib"):
        p = paths.get(key)
        if p:
            lib += [p.rstrip(os.sep) + os.sep, os.path.realpath(p).rstrip(os.sep) + os.sep]
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p):
            lib.append(p.rstrip(os.sep) + os.sep)
    _INTERNAL_DIRS[:] = internal
    _STDLIB_DIRS[:] = std
    _LIB_DIRS[:] = lib
    _KIND.clear()


def _under(path: str, real: str, dirs: list[str]) -> bool:
    return any(path.startswith(d) or real.startswith(d) for d in dirs)


def _classify(filename: str) -> int:
    k = _KIND.get(filename)
    if k is not None:
        return k
    if filename in _USER_FILES:
        k = _USER
    elif not filename or filename.startswith("<"):
        k = _SKIP
    else:
        path = os.path.abspath(filename)
        real = os.path.realpath(path)
        if real in _USER_FILES:
            k = _USER
        elif _under(path, real, _INTERNAL_DIRS):
            k = _SKIP
        elif _under(path, real, _LIB_DIRS) or f"{os.sep}site-packages{os.sep}" in path or (
            f"{os.sep}dist-packages{os.sep}" in path
        ):
            k = _LIB
        elif _under(path, real, _STDLIB_DIRS):
            k = _SKIP
        else:
            k = _USER
    _KIND[filename] = k
    return k


def _walk(f: Any, max_lib: int = 40) -> tuple:
    """Non-internal frames from ``f`` outwards up to and including the first user frame."""
    chain = []
    n = 0
    while f is not None and n < 200:
        code = f.f_code
        k = _KIND.get(code.co_filename)
        if k is None:
            k = _classify(code.co_filename)
        if k == _USER:
            chain.append((code, f.f_lineno, f.f_lasti, _USER))
            break
        if k == _LIB and len(chain) < max_lib:
            chain.append((code, f.f_lineno, f.f_lasti, _LIB))
        f = f.f_back
        n += 1
    return tuple(chain)


def _walk_write(f: Any) -> tuple[tuple, tuple, Any]:
    """Like _walk, plus the torch functions on the way (innermost first) and the in-place module (a
    ``nn.ReLU(inplace=True)``...) whose forward made the write, with the place it was constructed."""
    chain: list[tuple] = []
    via: list[str] = []
    module = None
    n = 0
    while f is not None and n < 200:
        code = f.f_code
        k = _KIND.get(code.co_filename)
        if k is None:
            k = _classify(code.co_filename)
        if k == _USER:
            chain.append((code, f.f_lineno, f.f_lasti, _USER))
            break
        if k == _LIB and len(chain) < 40:
            chain.append((code, f.f_lineno, f.f_lasti, _LIB))
        elif k == _SKIP and len(via) < 8 and code.co_filename.startswith(_TORCH_DIR[0]):
            via.append(code.co_filename[len(_TORCH_DIR[0]):].replace(os.sep, "/") + ":" + code.co_name)
            if module is None and code.co_name == "forward":
                try:
                    m = f.f_locals.get("self")
                    if getattr(m, "inplace", False) is True:
                        module = (type(m).__name__, _MODULE_SITES.get(m, ()))
                except Exception:
                    pass
        f = f.f_back
        n += 1
    return tuple(chain), tuple(via), module


def _position(code: Any, lasti: int, lineno: int) -> tuple[int, int, int, int]:
    """(line, col, end_line, end_col), 1-based, end exclusive; columns in characters."""
    try:
        pos = None
        if lasti >= 0 and hasattr(code, "co_positions"):
            for i, p in enumerate(code.co_positions()):
                if i == lasti // 2:
                    pos = p
                    break
        if pos and pos[0] == lineno and pos[2] is not None and pos[3] is not None:
            line = linecache.getline(code.co_filename, lineno)
            # co_positions gives UTF-8 byte offsets: convert to characters.
            b = line.encode("utf-8")
            col = len(b[: pos[2]].decode("utf-8", "replace")) + 1
            if pos[1] == lineno:
                end = len(b[: pos[3]].decode("utf-8", "replace")) + 1
                return lineno, col, lineno, end
            return lineno, col, lineno, len(line.rstrip("\r\n")) + 1
    except Exception:
        pass
    line = linecache.getline(code.co_filename, lineno)
    stripped = line.rstrip("\r\n")
    col = len(stripped) - len(stripped.lstrip()) + 1
    return lineno, col, lineno, len(stripped) + 1


def _frames_json(chain: tuple) -> list[dict[str, Any]]:
    out = []
    for code, lineno, lasti, kind in chain:
        line, col, end_line, end_col = _position(code, lasti, lineno)
        out.append({
            "path": os.path.abspath(code.co_filename), "line": line, "column": col, "end_line": end_line,
            "end_column": end_col, "func": code.co_name, "kind": "user" if kind == _USER else "lib",
            "code": linecache.getline(code.co_filename, lineno).strip(),
        })
    return out


_TB_LINE = re.compile(r'^\s*File "(?P<path>.*)", line (?P<line>\d+), in (?P<func>.*)$')


def _frames_from_formatted(stack: list[str]) -> list[dict[str, Any]]:
    """Frames (innermost first, internals dropped, up to the first user frame) from traceback.format_stack()."""
    parsed = []
    for entry in stack:
        lines = entry.splitlines()
        if not lines:
            continue
        m = _TB_LINE.match(lines[0])
        if not m:
            continue
        code = lines[1].strip() if len(lines) > 1 else ""
        parsed.append((m.group("path"), int(m.group("line")), m.group("func"), code))
    out: list[dict[str, Any]] = []
    for path, line, func, code in reversed(parsed):
        k = _classify(path)
        if k == _SKIP:
            continue
        src = linecache.getline(path, line)
        stripped = src.rstrip("\r\n")
        col = len(stripped) - len(stripped.lstrip()) + 1 if stripped else 1
        out.append({"path": os.path.abspath(path), "line": line, "column": col, "end_line": line,
                    "end_column": len(stripped) + 1 if stripped else col, "func": func,
                    "kind": "user" if k == _USER else "lib", "code": code or stripped.strip()})
        if k == _USER:
            break
        if len(out) >= 40:
            break
    return out


# ----------------------------------------------------------------------------------------------------------------
# The write log.

_WRITE_SPEC: dict[Any, tuple] = {}
# In-place ATen ops that return nothing and have no ADInplaceOrView kernel (``_foreach_add_``, ``_fused_adam_``...)
# rely on the ops their kernels call to bump version counters: torch's autograd kernel for them redispatches with
# ``AutoDispatchBelowAutograd`` (not ``...BelowADInplaceOrView``), so on CPU the ``add_`` calls that
# ``_foreach_add_`` loops over each bump one tensor's version. A dispatch mode sees the op below that point, and
# torch runs what the mode calls with every key above Python excluded, ADInplaceOrView included: those inner calls
# would bump nothing, and an in-place error would silently vanish. For exactly those ops the write log calls the op
# with ADInplaceOrView enabled again, the state torch's own kernel leaves it in. (Ops that return tensors are
# redispatched with ``...BelowADInplaceOrView`` by torch itself and run as the mode calls them.) The same holds for
# composite ops that reach the mode undecomposed, which happens under inference mode: their decomposition runs with
# ADInplaceOrView active without the doctor (a ``view_as`` made there is a view, with inference-mode view rules).
_RESTORE: dict[Any, bool] = {}


def _write_spec(func: Any) -> tuple:
    spec = []
    try:
        for i, a in enumerate(func._schema.arguments):
            ai = a.alias_info
            if ai is not None and ai.is_write:
                spec.append((i, a.name))
    except Exception:
        pass
    out = tuple(spec)
    _WRITE_SPEC[func] = out
    return out


def _needs_restore(torch: Any, func: Any, spec: tuple) -> bool:
    restore = False
    try:
        name = func.name()
        has = torch._C._dispatch_has_kernel_for_dispatch_key
        if has(name, "CompositeImplicitAutograd"):
            # Reaches the mode undecomposed only where autograd is switched off (inference mode): torch would run
            # the decomposition with ADInplaceOrView active (``view_as`` returns a view of its input there).
            restore = True
        elif spec and not len(func._schema.returns):
            restore = not has(name, "ADInplaceOrView")
    except Exception:
        restore = False
    _RESTORE[func] = restore
    return restore


def _log_one(torch: Any, t: Any, op: str, argname: str, frame: Any) -> None:
    try:
        key = t.untyped_storage().data_ptr()
        vb = t._version
    except Exception:  # inference tensors, tensors without storage, ...
        return
    _stats["writes"] += 1
    chain, via, module = _walk_write(frame)
    _log.append((key, vb, op, argname, tuple(t.shape), str(t.dtype), chain, via, module))


def _log_writes(torch: Any, func: Any, spec: tuple, args: tuple, kwargs: dict | None) -> None:
    frame = sys._getframe(2)
    op = func.overloadpacket.__name__
    for i, name in spec:
        if i < len(args):
            v = args[i]
        elif kwargs:
            v = kwargs.get(name)
        else:
            v = None
        if v is None:
            continue
        if isinstance(v, torch.Tensor):
            _log_one(torch, v, op, name, frame)
        elif isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, torch.Tensor):
                    _log_one(torch, x, op, name, frame)


def _writes_for(key: int, actual: int, expected: int) -> list[tuple]:
    """Logged writes that moved the version counter of storage ``key`` from ``expected`` to ``actual``, oldest
    first. Walks the log newest first; the writes since the save are the newest ones on that storage."""
    want = actual - 1
    found = []
    for ev in reversed(_log):
        if want < expected:
            break
        if ev[0] != key:
            continue
        if ev[1] == want:
            found.append(ev)
            want -= 1
    found.reverse()
    return found


# ----------------------------------------------------------------------------------------------------------------
# Diagnosis of a failed backward.

_SAVED_NAMES: dict[type, list[tuple[str, str]]] = {}


def _saved_names(node: Any) -> list[tuple[str, str]]:
    t = type(node)
    names = _SAVED_NAMES.get(t)
    if names is None:
        names = []
        for raw in dir(node):
            if raw.startswith("_raw_saved_"):
                pub = raw[4:]  # "_saved_x"
                if pub == "_saved_tensors" and not hasattr(t, pub):
                    pub = "saved_tensors"  # custom autograd.Function
                names.append((pub, raw))
        _SAVED_NAMES[t] = names
    return names


def _find_broken(torch: Any, roots: Any, m: re.Match) -> list[dict[str, Any]]:
    nodes = []
    for r in roots if isinstance(roots, (list, tuple)) else (roots,):
        n = getattr(r, "grad_fn", None) if isinstance(r, torch.Tensor) else getattr(r, "node", None)
        if n is not None:
            nodes.append(n)
    seen: set[int] = set()
    keep = []
    broken: list[dict[str, Any]] = []
    target = m.group(0)
    while nodes and len(seen) < 300_000:
        node = nodes.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        for pub, raw in _saved_names(node):
            try:
                getattr(node, pub)
                continue
            except RuntimeError as e:
                m2 = VERSION_RE.search(str(e))
                if INPLACE_MSG not in str(e) or not m2:
                    continue
            except Exception:
                continue
            try:
                saved = getattr(node, raw)
            except Exception:
                continue
            items = saved if isinstance(saved, (list, tuple)) else [saved]
            shape = [int(x) for x in m2.group("shape").replace(" ", "").split(",") if x]
            for s in items:
                try:
                    t = s.data
                except Exception:
                    continue
                if not isinstance(t, torch.Tensor):
                    continue
                try:
                    if t._version != int(m2.group("actual")) or list(t.shape) != shape:
                        continue
                except Exception:
                    continue
                broken.append({"node": node, "attr": pub, "tensor": t, "m": m2, "exact": m2.group(0) == target})
                break
        try:
            nxt = node.next_functions
        except Exception:
            nxt = ()
        for child, _ in nxt:
            if child is not None and id(child) not in seen:
                nodes.append(child)
    broken.sort(key=lambda b: not b["exact"])
    return broken


def _describe_tensor(t: Any) -> dict[str, Any]:
    try:
        ttype = t.type()
    except Exception:
        ttype = str(t.dtype)
    return {"type": ttype, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "device": str(t.device)}


def _incident_from_backward(torch: Any, exc: BaseException, roots: Any, frame: Any) -> None:
    msg = str(exc)
    m = VERSION_RE.search(msg)
    if INPLACE_MSG not in msg or not m:
        return
    inc: dict[str, Any] = {
        "kind": "version", "exc_id": id(exc), "message": msg.split("\n")[0],
        "expected_version": int(m.group("expected")), "actual_version": int(m.group("actual")),
        "tensor": {"type": m.group("type"), "shape": [int(x) for x in m.group("shape").replace(" ", "").split(",") if x]},
        "output_of": m.group("node"), "backward_at": _frames_json(_walk(frame)),
        "saved_by": [], "writes": [], "node": None,
    }
    _exc_refs.append(exc)
    try:
        broken = _find_broken(torch, roots, m)
    except Exception as e:  # never let the doctor hide the user's error
        inc["note"] = f"graph walk failed: {type(e).__name__}: {e}"
        broken = []
    if broken:
        b = broken[0]
        node, t = b["node"], b["tensor"]
        inc["node"] = node.name() if hasattr(node, "name") else type(node).__name__
        inc["attr"] = b["attr"]
        inc["tensor"] = _describe_tensor(t)
        try:
            tb = node.metadata.get("traceback_") or []
        except Exception:
            tb = []
        inc["saved_by"] = _frames_from_formatted(list(tb))
        try:
            key = t.untyped_storage().data_ptr()
        except Exception:
            key = None
        expected, actual = int(b["m"].group("expected")), int(b["m"].group("actual"))
        if key is not None:
            for ev in _writes_for(key, actual, expected):
                _, vb, op, argname, shape, dtype, chain, via, module = ev
                w = {"op": op, "arg": argname, "version_before": vb, "shape": list(shape),
                     "dtype": dtype.replace("torch.", ""), "frames": _frames_json(chain), "via": list(via)}
                if module is not None:
                    w["module"] = {"type": module[0], "constructed_at": _frames_json(module[1])}
                inc["writes"].append(w)
        inc["others"] = len(broken) - 1
    else:
        _incident_from_versions(inc, m)
    _incidents.append(inc)


def _incident_from_versions(inc: dict[str, Any], m: re.Match) -> None:
    """The saved tensor is not reachable from the graph (an in-place op on a view saved its result, and that
    node now hides inside a CopySlices): find the storage from the write log instead, as the one whose logged
    writes moved a version counter from the expected version to the one torch found, preferring a tensor of the
    shape torch names. The node anomaly mode blames gives the saving op's stack."""
    expected, actual = int(m.group("expected")), int(m.group("actual"))
    shape = [int(x) for x in m.group("shape").replace(" ", "").split(",") if x]
    blamed = _last_anomaly[0] if _last_anomaly else None
    best: tuple | None = None
    tried: set[int] = set()
    for rank, ev in enumerate(reversed(_log)):
        if rank > 5000 or ev[1] != actual - 1 or ev[0] in tried:
            continue
        tried.add(ev[0])
        chain = _writes_for(ev[0], actual, expected)
        if len(chain) != actual - expected:
            continue
        score = (list(ev[4]) == shape, -rank)
        if best is None or score > best[0]:
            best = (score, ev[0], chain)
    if best is None:
        if blamed:
            inc["node"], inc["saved_by"] = blamed[0], blamed[1]
        return
    _, key, chain = best
    inc["inferred"] = "from the write log (the saved tensor is not reachable from the graph)"
    inc["tensor"] = {**inc["tensor"], "dtype": chain[-1][5].replace("torch.", "")}
    for ev in chain:
        _, vb, op, argname, shp, dtype, fchain, via, module = ev
        w = {"op": op, "arg": argname, "version_before": vb, "shape": list(shp),
             "dtype": dtype.replace("torch.", ""), "frames": _frames_json(fchain), "via": list(via)}
        if module is not None:
            w["module"] = {"type": module[0], "constructed_at": _frames_json(module[1])}
        inc["writes"].append(w)
    if blamed:
        inc["node"], inc["saved_by"] = blamed[0], blamed[1]
    if not blamed or "CopySlices" in blamed[0]:
        for ev in reversed(_log):  # the write that produced the saved version: an in-place op saving its result
            if ev[0] == key and ev[1] == expected - 1:
                inc["node"] = ev[2]
                if not blamed:
                    inc["saved_by"] = _frames_json(ev[6])
                break


_exc_refs: list[BaseException] = []

_LEAKY_NODES = ("LeakyReluBackward1", "RreluWithNoiseBackward1")


def _negative_slope(node: Any) -> float | None:
    try:
        if node.name() == "LeakyReluBackward1":
            return float(node._saved_negative_slope)
        if not node._saved_training:  # rrelu_ in eval: leaky_relu_ with the mean slope
            return (float(node._saved_lower) + float(node._saved_upper)) / 2
    except Exception:
        pass
    return None


def _leaky_relu_incident(torch: Any, exc: BaseException, roots: Any, frame: Any) -> None:
    """In-place leaky_relu_/rrelu_ with a negative slope cannot be differentiated; torch only finds out in
    backward. The node that failed says where the in-place call ran (anomaly mode recorded its forward stack)."""
    nodes = []
    for r in roots if isinstance(roots, (list, tuple)) else (roots,):
        n = getattr(r, "grad_fn", None) if isinstance(r, torch.Tensor) else getattr(r, "node", None)
        if n is not None:
            nodes.append(n)
    seen: set[int] = set()
    found = []
    while nodes and len(seen) < 300_000:
        node = nodes.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        try:
            name = node.name()
        except Exception:
            name = ""
        if name in _LEAKY_NODES:
            slope = _negative_slope(node)
            if slope is not None and slope < 0:
                found.append((node, name, slope))
        try:
            nxt = node.next_functions
        except Exception:
            nxt = ()
        for child, _ in nxt:
            if child is not None and id(child) not in seen:
                nodes.append(child)
    if not found:
        return
    node, name, slope = found[0]
    try:
        tb = list(node.metadata.get("traceback_") or [])
    except Exception:
        tb = []
    made = _frames_from_formatted(tb)
    op = "rrelu_" if name.startswith("Rrelu") else "leaky_relu_"
    inc: dict[str, Any] = {"kind": "leaky_relu", "exc_id": id(exc), "message": str(exc).split("\n")[0],
                           "raised_at": made, "backward_at": _frames_json(_walk(frame)), "origin": [],
                           "receiver": None, "op": op, "negative_slope": slope, "node": name}
    if made:
        user = next((f for f in made if f["kind"] == "user"), None)
        if user is not None:
            try:
                tree = ast.parse("".join(linecache.getlines(user["path"])))
                stmt = _stmt_at(tree, user["line"])
                cands = _inplace_receivers(stmt) if stmt is not None else []
                if cands:
                    inc["receiver"] = ast.unparse(cands[0][0])
                    inc["op"] = cands[0][1]
            except Exception:
                pass
    try:  # the logged write of that in-place call (for nn.LeakyReLU(inplace=True): where it was constructed)
        t = node._raw_saved_result.data
        key = t.untyped_storage().data_ptr()
        for ev in reversed(_log):
            if ev[0] == key and ev[2] in ("leaky_relu_", "rrelu_with_noise_"):
                _, vb, w_op, argname, shape, dtype, chain, via, module = ev
                w = {"op": w_op, "arg": argname, "version_before": vb, "shape": list(shape),
                     "dtype": dtype.replace("torch.", ""), "frames": _frames_json(chain), "via": list(via)}
                if module is not None:
                    w["module"] = {"type": module[0], "constructed_at": _frames_json(module[1])}
                inc["writes"] = [w]
                break
    except Exception:
        pass
    _exc_refs.append(exc)
    _incidents.append(inc)


def _wrap_engine(torch: Any) -> None:
    import torch.autograd as ta
    import torch.autograd.graph as tg

    orig = tg._engine_run_backward

    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

    def _engine_run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            _last_anomaly.clear()
            mode = _tracer_state.get("mode")
            if mode is not None and _get_current_dispatch_mode() is mode:
                # The backward pass itself runs without the write log (half the ops, none of the user's writes).
                with _pop_mode_temporarily():
                    return orig(t_outputs, *args, **kwargs)
            return orig(t_outputs, *args, **kwargs)
        except RuntimeError as exc:
            if _enabled[0]:
                text = str(exc)
                try:
                    if INPLACE_MSG in text:
                        _incident_from_backward(torch, exc, t_outputs, sys._getframe(1))
                    elif family_of(text) == "leaky_relu":
                        _leaky_relu_incident(torch, exc, t_outputs, sys._getframe(1))
                except Exception:
                    pass
            raise

    _engine_run_backward.__wrapped__ = orig  # type: ignore[attr-defined]
    tg._engine_run_backward = _engine_run_backward
    if getattr(ta, "_engine_run_backward", None) is orig:
        ta._engine_run_backward = _engine_run_backward


# ----------------------------------------------------------------------------------------------------------------
# Errors raised at the in-place call itself (a leaf, a view, an inference tensor, out=, a custom Function's
# mark_dirty, a pack hook...): explained from the traceback of the uncaught exception, the script's frame and the
# write log.

# (a piece of torch's message, the family), most specific first. report.py names and fixes each family.
FAMILIES: tuple[tuple[str, str], ...] = (
    ("its base or another view of its base has been modified inplace", "base_modified"),
    ("created inside a custom Function", "custom_view"),
    ("a view of a leaf Variable that requires grad is being used in an in-place operation", "view_of_leaf"),
    ("a leaf Variable that requires grad is being used in an in-place operation", "leaf"),
    ("a leaf Variable that requires grad has been used in an in-place operation", "dirty_leaf"),
    ("created in no_grad mode and is being modified inplace", "no_grad_view"),
    ("created in inference mode and is being modified inplace", "inference_view"),
    ("is a view and is being modified inplace", "view"),
    ("If your Function modifies inplace an input that is a view of another Tensor", "dirty_view"),
    ("marked as dirty during the forward method were not returned as output", "dirty_unreturned"),
    ("functions with out=... arguments don't support automatic differentiation", "out"),
    ("A saved tensor pack hook is modifying its input in place", "pack_hook"),
    ("Inplace update to inference tensor outside InferenceMode", "inference"),
    ("Inference tensors cannot be saved for backward", "inference_saved"),
    ("Can't detach views in-place", "detach_view"),
    ("cannot resize variables that require grad", "resize"),
    ("In-place leakyReLu backward calculation is triggered with a negative slope", "leaky_relu"),
    ("more than one element of the written-to tensor refers to a single memory location", "overlap"),
)


def family_of(message: str) -> str | None:
    for piece, kind in FAMILIES:
        if piece in message:
            return kind
    return None


def _stmt_at(tree: ast.AST, line: int) -> ast.stmt | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.lineno >= best.lineno and (node.end_lineno or 0) <= (best.end_lineno or 0)):
                best = node
    return best


_AUG = {"Add": "+=", "Sub": "-=", "Mult": "*=", "Div": "/=", "FloorDiv": "//=", "Mod": "%=", "Pow": "**=",
        "MatMult": "@=", "BitAnd": "&=", "BitOr": "|=", "BitXor": "^=", "LShift": "<<=", "RShift": ">>="}


def _inplace_receivers(stmt: ast.AST, kind: str = "") -> list[tuple[ast.expr, str, ast.AST]]:
    """(receiver expression, op text, node) of the in-place operations in one statement (for ``out``: the
    ``out=`` targets; for a custom Function's mark_dirty: the tensors passed to ``X.apply``)."""
    out: list[tuple[ast.expr, str, ast.AST]] = []
    if kind == "out":
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "out":
                        out.append((kw.value, f"{ast.unparse(node.func)}(out=...)", node))
        return out
    if kind.startswith("dirty_"):
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "apply":
                for a in node.args:
                    out.append((a, ast.unparse(node.func), node))
        return out
    if isinstance(stmt, ast.AugAssign):
        out.append((stmt.target, _AUG.get(type(stmt.op).__name__, "augmented assignment"), stmt))
    if isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            if isinstance(t, ast.Subscript):
                out.append((t.value, "__setitem__", t))
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr.endswith("_") and not f.attr.endswith("__"):
                owner = (_root_name(f.value) or "").split(".")[0]
                if owner in ("torch", "F", "nn", "functional"):
                    if node.args:  # torch.relu_(x), F.leaky_relu_(x), torch.nn.functional.relu_(x)
                        out.append((node.args[0], ast.unparse(f), node))
                else:
                    out.append((f.value, f.attr, node))
            elif isinstance(f, ast.Name) and f.id.endswith("_") and not f.id.endswith("__") and node.args:
                out.append((node.args[0], f.id, node))  # from torch import relu_
            for kw in node.keywords:
                if kw.arg == "inplace" and isinstance(kw.value, ast.Constant) and kw.value.value is True and node.args:
                    out.append((node.args[0], ast.unparse(f), node))
    return out


def _safe_eval(expr: ast.expr, frame: Any) -> Any:
    """Evaluate a name, attribute chain or constant subscript of a list/tuple/dict in ``frame``; nothing that can
    run user code (no calls, no ``__getitem__`` of other types, no properties beyond plain attribute access)."""
    if isinstance(expr, ast.Name):
        for ns in (frame.f_locals, frame.f_globals, frame.f_builtins):
            if expr.id in ns:
                return ns[expr.id]
        raise LookupError(expr.id)
    if isinstance(expr, ast.Attribute):
        return getattr(_safe_eval(expr.value, frame), expr.attr)
    if isinstance(expr, ast.Subscript):
        base = _safe_eval(expr.value, frame)
        if not isinstance(base, (list, tuple, dict)):
            raise LookupError("subscript")
        idx = expr.slice
        key = idx.value if isinstance(idx, ast.Constant) else _safe_eval(idx, frame)
        if not isinstance(key, (int, str)):
            raise LookupError("subscript")
        return base[key]  # type: ignore[index]
    raise LookupError("unsupported")


def _root_name(expr: ast.expr) -> str | None:
    """``out`` for ``out[0]``, ``self.h`` for ``self.h[1]``; None for calls and other expressions."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, (ast.Name, ast.Attribute)):
        try:
            text = ast.unparse(expr)
        except Exception:
            return None
        return text if re.fullmatch(r"[\w.]+", text) else None
    return None


def _walk_scope(scope: ast.AST) -> list[ast.AST]:
    """The nodes of one scope: a function's body or the module's, without nested functions and classes."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _scopes_at(tree: ast.AST, line: int) -> list[ast.AST]:
    """The function scopes holding ``line``, innermost first, then the module."""
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    funcs.sort(key=lambda n: n.lineno, reverse=True)
    return [*funcs, tree]


def _find_assignment(tree: ast.AST, text: str, before: int) -> ast.AST | None:
    """The last statement before line ``before`` that assigns ``text`` (a name or attribute chain), in the
    innermost scope that has one."""
    for scope in _scopes_at(tree, before):
        best: ast.AST | None = None
        for node in _walk_scope(scope):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets = [node.target]
            elif isinstance(node, ast.For):
                targets = [node.target]
            elif isinstance(node, ast.With):
                targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, (ast.Name, ast.Attribute)) and ast.unparse(sub) == text:
                        line = getattr(node, "lineno", None)
                        if line is not None and line < before and (best is None or line > getattr(best, "lineno", 0)):
                            best = node
        if best is not None:
            return best
    return None


_GRAD_OFF = re.compile(r"\b(no_grad|inference_mode|set_grad_enabled\s*\(\s*False)")


def _grad_block(tree: ast.AST, line: int) -> str | None:
    """'no_grad' / 'inference_mode' when line ``line`` runs inside such a ``with`` block (innermost wins)."""
    found: tuple[int, str] | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.body:
            if not (node.body[0].lineno <= line <= (node.end_lineno or node.lineno)):
                continue
            for item in node.items:
                text = ast.unparse(item.context_expr)
                m = _GRAD_OFF.search(text)
                if m and (found is None or node.lineno > found[0]):
                    mode = "inference_mode" if "inference_mode" in text else "no_grad"
                    if "inference_mode" in text and re.search(r"inference_mode\s*\(\s*(mode\s*=\s*)?False", text):
                        continue
                    found = (node.lineno, mode)
    return found[1] if found else None


def _src_frame(path: str, line: int, func: str = "<module>") -> dict[str, Any]:
    code_line = linecache.getline(path, line)
    stripped = code_line.rstrip("\r\n")
    return {"path": os.path.abspath(path), "line": line, "column": len(stripped) - len(stripped.lstrip()) + 1,
            "end_line": line, "end_column": len(stripped) + 1, "func": func, "kind": "user",
            "code": stripped.strip()}


def _name_of(val: Any, frame: Any) -> str | None:
    """A name under which ``frame`` holds this very object (locals first, then module globals)."""
    try:
        for ns in (frame.f_locals, frame.f_globals):
            for k, v in ns.items():
                if v is val and not k.startswith("__"):
                    return k
    except Exception:
        pass
    return None


def _assignment_origin(tree: ast.AST, path: str, text: str | None, line: int, func: str) -> dict[str, Any] | None:
    """Where ``text`` was last assigned before ``line``, and whether that ran under no_grad / inference_mode."""
    if not text:
        return None
    node = _find_assignment(tree, text, line)
    if node is None:
        return None
    fr = _src_frame(path, getattr(node, "lineno", line), func)
    block = _grad_block(tree, getattr(node, "lineno", line))
    if block:
        fr["under"] = block
    return fr


def _tensor_facts(torch: Any, val: Any, frame: Any, tree: ast.AST | None, path: str, line: int,
                  text: str | None) -> dict[str, Any]:
    """What the doctor can tell about the tensor an in-place op was applied to: leaf, parameter, inference
    tensor, view (of which base, made where), and where it came from."""
    facts: dict[str, Any] = {"tensor": _describe_tensor(val)}
    t = facts["tensor"]
    for key, get in (("is_leaf", lambda: val.is_leaf), ("requires_grad", lambda: val.requires_grad),
                     ("inference", lambda: val.is_inference()), ("is_view", lambda: val._is_view())):
        try:
            t[key] = bool(get())
        except Exception:
            pass
    facts["is_parameter"] = isinstance(val, torch.nn.Parameter)
    func = frame.f_code.co_name
    origin: list[dict[str, Any]] = []
    try:
        gf = val.grad_fn
    except Exception:
        gf = None
    if gf is not None:
        facts["view_of"] = gf.name()
        try:
            origin = _frames_from_formatted(list(gf.metadata.get("traceback_") or []))
        except Exception:
            origin = []
    if not origin and tree is not None:
        o = _assignment_origin(tree, path, text, line, func)
        if o is not None:
            origin = [o]
    elif origin and tree is not None and text:
        o = _assignment_origin(tree, path, text, line, func)
        if o is not None and o.get("under"):
            origin[0] = {**origin[0], "under": o["under"]}
    facts["origin"] = origin
    try:
        base = val._base
    except Exception:
        base = None
    if base is not None:
        bname = _name_of(base, frame)
        b: dict[str, Any] = {"name": bname, "tensor": _describe_tensor(base)}
        try:
            b["tensor"]["is_leaf"] = bool(base.is_leaf)
            b["tensor"]["requires_grad"] = bool(base.requires_grad)
            b["tensor"]["inference"] = bool(base.is_inference())
        except Exception:
            pass
        if tree is not None and bname:
            o = _assignment_origin(tree, path, bname, line, func)
            if o is not None:
                b["origin"] = [o]
        facts["base"] = b
    return facts


def _newest_user_write() -> dict[str, Any] | None:
    """The most recent logged write made from the user's code (a pack hook's ``x += 1``)."""
    for ev in reversed(_log):
        chain = ev[6]
        if chain and chain[-1][3] == _USER:
            _, vb, op, argname, shape, dtype, chain, via, _module = ev
            return {"op": op, "arg": argname, "version_before": vb, "shape": list(shape),
                    "dtype": dtype.replace("torch.", ""), "frames": _frames_json(chain), "via": list(via)}
    return None


def _function_sites(cls: Any, needle: str) -> list[dict[str, Any]]:
    """Lines of ``cls.forward`` that contain ``needle`` (``mark_dirty``), as frames."""
    try:
        fwd = cls.forward
        code = getattr(fwd, "__code__", None) or getattr(getattr(fwd, "__func__", None), "__code__", None)
        if code is None:
            return []
        path = code.co_filename
        out = []
        lines = linecache.getlines(path)
        end = max((ln for _, _, ln in code.co_lines() if ln), default=code.co_firstlineno)
        for ln in range(code.co_firstlineno, min(end, len(lines)) + 1):
            if needle in lines[ln - 1]:
                out.append(_src_frame(path, ln, "forward"))
        return out
    except Exception:
        return []


def _forward_incident(torch: Any, exc: BaseException, tb: Any) -> None:
    msg = str(exc)
    kind = family_of(msg)
    if kind is None or kind == "leaky_relu":  # leaky_relu: explained from the graph when backward raises
        return
    frames = []
    t = tb
    while t is not None:
        frames.append(t)
        t = t.tb_next
    chain = []
    user_tb = None
    for t in reversed(frames):
        code = t.tb_frame.f_code
        k = _classify(code.co_filename)
        if k == _SKIP:
            continue
        chain.append((code, t.tb_lineno, t.tb_lasti, k))
        if k == _USER:
            user_tb = t
            break
    inc: dict[str, Any] = {"kind": kind, "exc_id": id(exc), "message": msg.split("\n")[0],
                           "raised_at": _frames_json(tuple(chain)), "origin": [], "receiver": None, "op": None}
    m = re.search(r"Output (\d+) of (\w+) is a view", msg)
    if m:
        inc["view_of"] = m.group(2)
        inc["output_nr"] = int(m.group(1))
    _exc_refs.append(exc)
    if kind == "pack_hook":
        w = _newest_user_write()
        if w is not None:
            inc["writes"] = [w]
            inc["op"] = w["op"]
    target_tb = user_tb or (frames[-1] if frames else None)
    if target_tb is not None:
        fr = target_tb.tb_frame
        path = fr.f_code.co_filename
        try:
            src = "".join(linecache.getlines(path))
            tree = ast.parse(src)
        except Exception:
            tree = None
        try:
            _explain_receiver(torch, inc, kind, fr, target_tb, tree, path)
        except Exception:
            pass
    _incidents.append(inc)


def _loaded_tensors(torch: Any, stmt: ast.AST, fr: Any) -> Any:
    """(node, tensor) for each name or attribute the statement reads that holds a tensor in frame ``fr``."""
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
            try:
                v = _safe_eval(node, fr)
            except Exception:
                continue
            if isinstance(v, torch.Tensor):
                yield node, v


def _explain_receiver(torch: Any, inc: dict[str, Any], kind: str, fr: Any, target_tb: Any, tree: ast.AST | None,
                      path: str) -> None:
    if tree is None:
        return
    line = target_tb.tb_lineno
    stmt = _stmt_at(tree, line)
    if stmt is None:
        return
    if kind == "base_modified":
        # a view used on this line whose base was changed in place since: the culprit is that write
        for node, v in _loaded_tensors(torch, stmt, fr):
            if v._is_view():
                inc["receiver"] = ast.unparse(node)
                inc.update(_tensor_facts(torch, v, fr, tree, path, line, inc["receiver"]))
                try:
                    key = v.untyped_storage().data_ptr()
                except Exception:
                    return
                for ev in reversed(_log):
                    if ev[0] == key and ev[6] and ev[6][-1][3] == _USER:
                        _, vb, op, argname, shape, dtype, chain, via, _module = ev
                        inc["writes"] = [{"op": op, "arg": argname, "version_before": vb, "shape": list(shape),
                                          "dtype": dtype.replace("torch.", ""), "frames": _frames_json(chain),
                                          "via": list(via)}]
                        inc["op"] = op
                        break
                return
        return
    if kind == "inference_saved":
        # which of the names on that line holds an inference tensor
        for node, v in _loaded_tensors(torch, stmt, fr):
            if v.is_inference():
                inc["receiver"] = ast.unparse(node)
                inc.update(_tensor_facts(torch, v, fr, tree, path, line, inc["receiver"]))
                return
        return
    cands = _inplace_receivers(stmt, kind)
    _, col, _, _ = _position(fr.f_code, target_tb.tb_lasti, line)

    # Prefer the innermost in-place op whose span holds the failing instruction, then one whose receiver can be
    # looked up (a name, an attribute, a list item) and is a tensor.
    def _rank(c: tuple) -> tuple:
        node = c[2]
        lo = getattr(node, "col_offset", 0) + 1
        hi = getattr(node, "end_col_offset", 0) + 1
        same_line = getattr(node, "lineno", 0) == line
        holds = same_line and lo <= col <= hi
        return (not holds, hi - lo)

    evaluated = []
    for c in sorted(cands, key=_rank):
        try:
            v = _safe_eval(c[0], fr)
        except Exception:
            v = None
        evaluated.append((c, v))
    evaluated.sort(key=lambda cv: not isinstance(cv[1], torch.Tensor))  # stable: keeps the span order
    for (expr, op, node), val in evaluated:
        if val is not None and not isinstance(val, torch.Tensor):
            continue
        inc["receiver"] = ast.unparse(expr)
        if not inc.get("op"):
            inc["op"] = op
        text = _root_name(expr)
        if val is not None:
            inc.update(_tensor_facts(torch, val, fr, tree, path, line, text))
        else:
            o = _assignment_origin(tree, path, text, line, fr.f_code.co_name)
            if o is not None:
                inc["origin"] = [o]
            if isinstance(expr, ast.Subscript):  # a[:2].add_(1): a view of `a`, made on this line
                try:
                    b = _safe_eval(expr.value, fr)
                except Exception:
                    b = None
                if isinstance(b, torch.Tensor):
                    bname = _root_name(expr.value)
                    base: dict[str, Any] = {"name": bname, "tensor": _describe_tensor(b)}
                    bo = _assignment_origin(tree, path, bname, line, fr.f_code.co_name)
                    if bo is not None:
                        base["origin"] = [bo]
                    inc["base"] = base
                    inc["origin"] = [_src_frame(path, line, fr.f_code.co_name)]
        if kind == "out" and isinstance(node, ast.Call):
            grads = []
            for a in [*node.args, *[k.value for k in node.keywords]]:
                try:
                    v = _safe_eval(a, fr)
                except Exception:
                    continue
                if isinstance(v, torch.Tensor) and v.requires_grad:
                    grads.append(ast.unparse(a))
            inc["requires_grad_args"] = grads
        if kind.startswith("dirty_") and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            try:
                cls = _safe_eval(node.func.value, fr)
                inc["function"] = getattr(cls, "__name__", None)
                inc["dirty_at"] = _function_sites(cls, "mark_dirty")
            except Exception:
                pass
        break


# ----------------------------------------------------------------------------------------------------------------
# Installing the tracer.

def install(check_nan: bool = False) -> Any:
    """Turn on anomaly mode, the write log and the backward wrapper in this process. Returns the dispatch mode."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    global _MODULE_SITES

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    _init_dirs(torch_dir)
    _TORCH_DIR[0] = torch_dir + os.sep
    torch.autograd.set_detect_anomaly(True, check_nan=check_nan)
    _wrap_engine(torch)
    _MODULE_SITES = weakref.WeakKeyDictionary()
    sites = _MODULE_SITES
    orig_init = torch.nn.Module.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        try:
            sites[self] = _walk(sys._getframe(1))
        except Exception:
            pass

    __init__.__wrapped__ = orig_init  # type: ignore[attr-defined]
    __init__.__doc__ = orig_init.__doc__
    __init__.__qualname__ = orig_init.__qualname__
    torch.nn.Module.__init__ = __init__  # type: ignore[method-assign]
    stats = _stats
    spec_cache = _WRITE_SPEC
    enabled = _enabled

    try:
        inplace_key = torch._C.DispatchKey.ADInplaceOrView
        set_excluded: Any = torch._C._SetExcludeDispatchKeyGuard
    except Exception:  # an older torch without these: ops run as the mode calls them
        set_excluded = None
    op_cache: dict[Any, tuple] = {}

    def op_info(func: Any) -> tuple:
        spec = spec_cache.get(func)
        if spec is None:
            spec = _write_spec(func)
        restore = _needs_restore(torch, func, spec) and set_excluded is not None
        if restore:
            _RESTORED.add(str(func.name()).replace("aten::", ""))
        info = (spec, restore)
        op_cache[func] = info
        return info

    class GradguardWriteLog(TorchDispatchMode):
        # Higher-order operators (flex_attention, cond, ...) pass through and run as without the mode.
        supports_higher_order_operators = True

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # No torch._dynamo.disable wrapper (it costs per op, and imports dynamo): the code object is marked
            # "skip, recursively" for dynamo instead (_skip_dynamo), which is what that wrapper does.
            return _SKIP_DYNAMO[0]

        @classmethod
        def ignore_compile_internals(cls) -> bool:  # torch.compile compiles as without the mode (same kernels)
            return True

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            stats["ops"] += 1
            info = op_cache.get(func)
            if info is None:
                info = op_info(func)
            if info[0] and enabled[0]:
                try:
                    _log_writes(torch, func, info[0], args, kwargs)
                except Exception:
                    pass
            if info[1]:
                with set_excluded(inplace_key, False):
                    if kwargs:
                        return func(*args, **kwargs)
                    return func(*args)
            if kwargs:
                return func(*args, **kwargs)
            return func(*args)

    mode = GradguardWriteLog()
    mode.__enter__()
    _clean_anomaly_warnings()

    def _in_child() -> None:  # forked DataLoader workers: stop logging (they never run backward)
        enabled[0] = False

    os.register_at_fork(after_in_child=_in_child)
    _suspend_in_optimizer_steps(torch, mode)
    _plain_reshapes(torch, mode)
    _tracer_state["dynamo_skip"] = _skip_dynamo(GradguardWriteLog.__torch_dispatch__.__code__)
    _tracer_state["installed"] = True
    _tracer_state["mode"] = mode
    return mode


# Python entry points whose ATen decomposition asks ``isTensorSubclassLike``, which is true for every tensor while
# any dispatch mode is active: ``reshape`` of a non-contiguous tensor that can be viewed then returns a ``view``
# (``ViewBackward0``) instead of an ``_reshape_alias`` (``ReshapeAliasBackward0``), and torch's error messages name
# that node ("Output 0 of ReshapeAlias is a view..."). None of them writes, so they run below the write log.
_RESHAPES: tuple[tuple[str, str], ...] = (
    ("Tensor", "reshape"),
    ("Tensor", "reshape_as"),
    ("Tensor", "flatten"),
    ("torch", "reshape"),
    ("torch", "flatten"),
)


def _plain_reshapes(torch: Any, mode: Any) -> None:
    """Run the reshape family as without the doctor: with the write log popped for the call."""
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily
    except Exception:
        return
    compiler = getattr(torch, "compiler", None)
    compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    def wrap(orig: Any) -> Any:
        def plain(*args: Any, **kwargs: Any) -> Any:
            if compiling() or _get_current_dispatch_mode() is not mode:
                return orig(*args, **kwargs)
            with _pop_mode_temporarily():
                return orig(*args, **kwargs)

        plain.__wrapped__ = orig  # type: ignore[attr-defined]
        plain.__doc__ = getattr(orig, "__doc__", None)
        plain.__name__ = getattr(orig, "__name__", "reshape")
        plain.__qualname__ = getattr(orig, "__qualname__", plain.__name__)
        return plain

    for owner_name, attr in _RESHAPES:
        owner = torch.Tensor if owner_name == "Tensor" else torch
        orig = getattr(owner, attr, None)
        if orig is None or hasattr(orig, "__wrapped__"):
            continue
        try:
            setattr(owner, attr, wrap(orig))
        except Exception:
            pass


def _suspend_in_optimizer_steps(torch: Any, mode: Any) -> None:
    """``optimizer.step()`` runs without the write log; the versions of the parameters (and their grads) before
    and after it stand in for its writes.

    An optimizer step is hundreds of small ATen ops (Adam: about fifteen per parameter) and no autograd nodes, so
    under the write log it would cost more than the whole forward pass under anomaly mode. Only one fact about it
    matters to the diagnosis: which tensors a graph may have saved (parameters, their views, their grads) moved
    from which version to which, and from which line. Without the mode the step runs exactly as without the
    doctor. Steps given a closure (LBFGS: the closure runs forward and backward) stay traced."""
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode, _push_mode
    except Exception:
        return
    compiler = getattr(torch, "compiler", None)
    compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
    pending: list[Any] = []

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        if compiling():
            return None
        try:
            caller = sys._getframe(1)
            if pending and pending[-1] is not None:
                outer = pending[-1][4]
                f: Any = caller
                while f is not None and f is not outer:
                    f = f.f_back
                if f is not None:  # a step inside a step (Lookahead...): the outer one already runs untraced
                    pending.append(None)
                    return None
                if _get_current_dispatch_mode() is not mode:
                    _push_mode(mode)  # an earlier step raised before its post hook: trace again
                pending.clear()
            rec = None
            closure = len(args) > 1 or (kwargs or {}).get("closure") is not None
            if _enabled[0] and not closure and _get_current_dispatch_mode() is mode:
                before = []
                for group in opt.param_groups:
                    for p in group["params"]:
                        if isinstance(p, torch.Tensor):
                            before.append((p, p._version))
                            g = p.grad
                            if g is not None:
                                before.append((g, g._version))
                chain, via, _ = _walk_write(caller)
                _pop_mode()
                rec = (before, chain, via, f"{type(opt).__name__}.step", caller)
            pending.append(rec)
        except Exception:
            pass
        return None

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        if compiling():
            return
        try:
            rec = pending.pop() if pending else None
            if rec is None:
                return
            if _get_current_dispatch_mode() is not mode:
                _push_mode(mode)
            before, chain, via, op, _caller = rec
            _stats["optimizer_steps_untraced"] += 1
            for t, v0 in before:
                v1 = t._version
                if v1 == v0:
                    continue
                key = t.untyped_storage().data_ptr()
                shape, dtype = tuple(t.shape), str(t.dtype)
                for v in range(v0, v1):
                    _stats["writes"] += 1
                    _log.append((key, v, op, "param", shape, dtype, chain, via, None))
        except Exception:
            pass

    register_optimizer_step_pre_hook(pre)
    register_optimizer_step_post_hook(post)


def _own_codes() -> list[Any]:
    """Every code object defined in this file (functions, methods, closures, nested functions)."""
    out: list[Any] = []
    seen: set[int] = set()

    def add(code: Any) -> None:
        if id(code) in seen or getattr(code, "co_filename", None) != _HERE:
            return
        seen.add(id(code))
        out.append(code)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                add(c)

    for v in list(globals().values()):
        if isinstance(v, types.FunctionType):
            add(v.__code__)
        elif isinstance(v, type):
            for m in vars(v).values():
                f = getattr(m, "__func__", m)
                if isinstance(f, types.FunctionType):
                    add(f.__code__)
    return out


def _skip_dynamo(dispatch_code: Any) -> str:
    """Tell torch.compile never to compile the doctor's own frames.

    Without the doctor these frames do not exist; when a compiled function falls back to eager (a graph break),
    dynamo would otherwise try to compile them as user code: the write log's ``__torch_dispatch__`` would be
    compiled around each ATen op (an ``nn.LSTM`` then runs as an Inductor kernel and fails in
    ``assert_size_stride``). The dispatch frame is skipped with everything it calls (what
    ``torch._dynamo.disable(recursive=True)`` does, at no per-op cost); the other frames (the backward wrapper,
    the ``nn.Module.__init__`` wrapper, warnings) only themselves, so that what they call is treated as without
    the doctor."""
    try:
        from torch._C._dynamo import eval_frame as ef

        skip_all = ef._FrameExecStrategy(ef._FrameAction.SKIP, ef._FrameAction.SKIP)
        skip_one = ef._FrameExecStrategy(ef._FrameAction.SKIP, ef._FrameAction.DEFAULT)
        for code in _own_codes():
            ef.set_code_exec_strategy(code, skip_all if code is dispatch_code else skip_one)
        return "code-exec-strategy"
    except Exception:
        pass
    try:  # older torch: skip each frame (not what it calls)
        from torch._C._dynamo.eval_frame import skip_code  # type: ignore[attr-defined]

        for code in _own_codes():
            skip_code(code)
        return "skip-code"
    except Exception:
        return "none"


def _clean_anomaly_text(text: str) -> str:
    """Drop this file's and runpy's frames from the forward traceback anomaly mode prints."""
    out: list[str] = []
    skipping = False
    for line in text.split("\n"):
        m = _TB_LINE.match(line)
        if m:
            skipping = m.group("path") == _HERE or m.group("path").startswith("<frozen runpy")
        elif skipping and not line.startswith("    "):
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out)


_ANOMALY_RE = re.compile(r"Error detected in (?P<node>[\w:<>.]+)\. Traceback of forward call that caused the error:")
_last_anomaly: list[tuple[str, list[dict[str, Any]]]] = []


def _note_anomaly(text: str) -> None:
    """Keep the node anomaly mode blames for a failed backward, with its forward stack (the node is not always
    reachable from the graph: an in-place op on a view hides inside a CopySlices node)."""
    m = _ANOMALY_RE.search(text)
    if not m:
        return
    entries: list[str] = []
    for ln in text[m.end():].split("\n"):
        if _TB_LINE.match(ln):
            entries.append(ln + "\n")
        elif entries and ln.startswith("    "):
            entries[-1] += ln + "\n"
    _last_anomaly[:] = [(m.group("node"), _frames_from_formatted(entries))]


def _clean_anomaly_warnings() -> None:
    orig = warnings.showwarning

    def showwarning(message: Any, category: Any, filename: Any, lineno: Any, file: Any = None,
                    line: Any = None) -> Any:
        try:
            if isinstance(message, Warning) and "Traceback of forward call" in str(message):
                _note_anomaly(str(message))
                message = category(_clean_anomaly_text(str(message)))
        except Exception:
            pass
        return orig(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning


class _TorchImportHook:
    """Installs the tracer right after the script's first ``import torch`` finishes."""

    def __init__(self, check_nan: bool) -> None:
        self.check_nan = check_nan
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec("torch")
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        hook = self

        class _Loader:
            def __getattr__(self, name: str) -> Any:  # get_filename, is_package, resource readers...
                return getattr(loader, name)

            def create_module(self, s: Any) -> Any:
                return loader.create_module(s)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                hook.remove()
                try:
                    install(hook.check_nan)
                except Exception as e:  # the script runs anyway, untraced
                    _tracer_state["error"] = f"{type(e).__name__}: {e}"

        spec.loader = _Loader()  # type: ignore[assignment]
        return spec

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


# ----------------------------------------------------------------------------------------------------------------
# Running the script.

def _strip_tb(tb: Any, script: str | None) -> Any:
    """The traceback as Python would show it for the script run directly: without runpy, this file, or the
    backward wrapper."""
    frames = []
    t = tb
    while t is not None:
        frames.append(t)
        t = t.tb_next
    start = 0
    for i, t in enumerate(frames):
        fn = t.tb_frame.f_code.co_filename
        if (script and os.path.abspath(fn) == script) or (
            not script and fn != _HERE and "runpy" not in fn
        ):
            start = i
            break
    else:
        start = len(frames)
    kept = [t for t in frames[start:] if t.tb_frame.f_code.co_filename != _HERE]
    new = None
    for t in reversed(kept):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return new


def _exc_frames(tb: Any) -> list[dict[str, Any]]:
    out = []
    t = tb
    while t is not None:
        code = t.tb_frame.f_code
        line, col, end_line, end_col = _position(code, t.tb_lasti, t.tb_lineno)
        k = _classify(code.co_filename)
        out.append({"path": os.path.abspath(code.co_filename), "line": line, "column": col, "end_line": end_line,
                    "end_column": end_col, "func": code.co_name,
                    "kind": {_USER: "user", _LIB: "lib"}.get(k, "internal"),
                    "code": linecache.getline(code.co_filename, t.tb_lineno).strip()})
        t = t.tb_next
    return out[-60:]


def _calibrate(torch: Any, ops: int, depth: int = 12, n: int = 100, rounds: int = 5) -> dict[str, Any]:
    """Estimate what the doctor cost this run: the per-op time of a small autograd op with the doctor on (anomaly
    mode + write log) and off, at a typical stack depth (medians of interleaved rounds), times the number of ops
    the script ran.

    Not for CUDA runs: kernels run asynchronously there, so the host-side cost overlaps GPU work and the product
    says little about wall time (it swung between 9 and 20 s for one ResNet-18 run); it is reported as
    ``host_overhead_s`` with ``overhead_estimate_s`` left empty."""
    from torch.utils._python_dispatch import _disable_current_modes

    x = torch.zeros(4, requires_grad=True)

    def timed(level: int) -> float:
        if level:
            return timed(level - 1)
        t0 = time.perf_counter()
        for _ in range(n):
            x * 2
        return (time.perf_counter() - t0) / n

    check_nan = torch.is_anomaly_check_nan_enabled()
    on_t: list[float] = []
    off_t: list[float] = []
    timed(depth)
    for _ in range(rounds):
        on_t.append(timed(depth))
        try:
            with _disable_current_modes():
                torch.autograd.set_detect_anomaly(False)
                off_t.append(timed(depth))
        finally:
            torch.autograd.set_detect_anomaly(True, check_nan=check_nan)
    on, off = sorted(on_t)[rounds // 2], sorted(off_t)[rounds // 2]
    per_op = max(0.0, on - off)
    out: dict[str, Any] = {"per_op_us_plain": round(off * 1e6, 2), "per_op_us_doctor": round(on * 1e6, 2)}
    cuda = sys.modules.get("torch.cuda")
    try:
        used_cuda = bool(cuda is not None and cuda.is_initialized())
    except Exception:
        used_cuda = False
    if used_cuda:
        out["overhead_estimate_s"] = None
        out["host_overhead_s"] = round(per_op * ops, 3)
        out["overhead_note"] = ("not estimated for CUDA runs: kernels run asynchronously, so the doctor's host-side "
                                "cost overlaps GPU work; time a few steps with and without it instead")
    else:
        out["overhead_estimate_s"] = round(per_op * ops, 3)
    return out


def _write_facts(path: str, facts: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(facts, fh, default=str)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    report, kind, target, *args = argv
    check_nan = os.environ.pop("GRADGUARD_RUN_CHECK_NAN", "") == "1"
    trace = os.environ.pop("GRADGUARD_RUN_TRACE", "1") != "0"
    script = None
    if _STARTUP_PATH is not None:
        sys.path[:] = _STARTUP_PATH  # what `python script.py` has; [0] becomes the script's directory below
    if kind == "path":
        script = os.path.abspath(target)
        sys.argv = [target, *args]
        sys.path[0] = os.path.dirname(script)
        _USER_FILES.update({target, script, os.path.realpath(script)})
    else:
        sys.argv = [target, *args]  # runpy replaces argv[0] with the module's file
        sys.path[0] = os.getcwd()
    _init_dirs(None)
    if trace:
        if "torch" in sys.modules:
            install(check_nan)
        else:
            sys.meta_path.insert(0, _TorchImportHook(check_nan))  # type: ignore[arg-type]

    facts: dict[str, Any] = {"version": 1, "exception": None, "incidents": _incidents}
    code = 0
    uncaught: BaseException | None = None
    try:
        if kind == "path":
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        c = e.code
        if c is None:
            code = 0
        elif isinstance(c, int):
            code = c
        else:
            print(c, file=sys.stderr)
            code = 1
    except BaseException as e:  # reported, then printed like Python does
        uncaught = e
        code = 130 if isinstance(e, KeyboardInterrupt) else 1
        tb = _strip_tb(e.__traceback__, script)
        torch = sys.modules.get("torch")
        if torch is not None and _tracer_state["installed"]:
            try:
                if not any(i["exc_id"] == id(e) for i in _incidents):
                    _forward_incident(torch, e, e.__traceback__)
            except Exception:
                pass
        facts["exception"] = {"type": type(e).__name__, "module": type(e).__module__,
                              "message": str(e), "frames": _exc_frames(tb)}
        if isinstance(e, SyntaxError):
            facts["exception"]["frames"] = [{"path": os.path.abspath(e.filename or target), "line": e.lineno or 1,
                                             "column": e.offset or 1, "end_line": e.lineno or 1,
                                             "end_column": (e.offset or 1) + 1, "func": "<module>",
                                             "kind": "user", "code": (e.text or "").strip()}]
        try:
            sys.stdout.flush()
        except Exception:
            pass
        if isinstance(e, ModuleNotFoundError) and e.name == "torch" and "torch" not in sys.modules:
            # The doctor needs torch where the script runs: say so rather than show the script's traceback.
            msg = (f"torch is not installed in {sys.executable}; use --python PATH (an interpreter that has torch), "
                   "or install torch there")
            facts["exception"] = {"type": "TorchNotInstalled", "module": "gradguard", "message": msg,
                                  "frames": facts["exception"]["frames"]}
            print(f"gradguard run: {msg}", file=sys.stderr)
        else:
            try:
                e.__traceback__ = tb
                sys.excepthook(type(e), e, tb)
            except Exception:
                traceback.print_exception(type(e), e, tb)
    for inc in _incidents:
        inc["uncaught"] = uncaught is not None and inc.pop("exc_id", None) == id(uncaught)
        inc.pop("exc_id", None)
    facts["exit_code"] = code
    calib: dict[str, Any] = {}
    counted: dict[str, Any] = dict(_stats)
    if _tracer_state["installed"] and os.getpid() == _MAIN_PID:
        try:
            calib = _calibrate(sys.modules["torch"], _stats["ops"])
        except Exception:
            calib = {}
    if _RESTORED:
        counted["restored_ops"] = sorted(_RESTORED)
    facts["stats"] = {**counted, **calib, "elapsed_s": round(time.perf_counter() - _T0, 3),
                      "traced": bool(_tracer_state["installed"]), "tracer_error": _tracer_state["error"],
                      "torch": getattr(sys.modules.get("torch"), "__version__", None)}
    if os.getpid() == _MAIN_PID:
        try:
            _write_facts(report, facts)
        except Exception as e:
            print(f"gradguard run: could not write the report: {e}", file=sys.stderr)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    if isinstance(uncaught, KeyboardInterrupt):
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
