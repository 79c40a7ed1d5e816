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
_stats = {"ops": 0, "writes": 0}
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
    _incidents.append(inc)


_exc_refs: list[BaseException] = []


def _wrap_engine(torch: Any) -> None:
    import torch.autograd as ta
    import torch.autograd.graph as tg

    orig = tg._engine_run_backward

    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

    def _engine_run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            mode = _tracer_state.get("mode")
            if mode is not None and _get_current_dispatch_mode() is mode:
                # The backward pass itself runs without the write log (half the ops, none of the user's writes).
                with _pop_mode_temporarily():
                    return orig(t_outputs, *args, **kwargs)
            return orig(t_outputs, *args, **kwargs)
        except RuntimeError as exc:
            if _enabled[0] and INPLACE_MSG in str(exc):
                try:
                    _incident_from_backward(torch, exc, t_outputs, sys._getframe(1))
                except Exception:
                    pass
            raise

    _engine_run_backward.__wrapped__ = orig  # type: ignore[attr-defined]
    tg._engine_run_backward = _engine_run_backward
    if getattr(ta, "_engine_run_backward", None) is orig:
        ta._engine_run_backward = _engine_run_backward


# ----------------------------------------------------------------------------------------------------------------
# Forward-time errors (leaf / view modified in place): explained from the traceback of the uncaught exception.

def _stmt_at(tree: ast.AST, line: int) -> ast.stmt | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.lineno >= best.lineno and (node.end_lineno or 0) <= (best.end_lineno or 0)):
                best = node
    return best


_AUG = {"Add": "+=", "Sub": "-=", "Mult": "*=", "Div": "/=", "FloorDiv": "//=", "Mod": "%=", "Pow": "**=",
        "MatMult": "@=", "BitAnd": "&=", "BitOr": "|=", "BitXor": "^=", "LShift": "<<=", "RShift": ">>="}


def _inplace_receivers(stmt: ast.stmt) -> list[tuple[ast.expr, str, ast.AST]]:
    """(receiver expression, op text, node) of the in-place operations in one statement."""
    out: list[tuple[ast.expr, str, ast.AST]] = []
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
                out.append((f.value, f.attr, node))
            for kw in node.keywords:
                if kw.arg == "inplace" and isinstance(kw.value, ast.Constant) and kw.value.value is True and node.args:
                    out.append((node.args[0], ast.unparse(f), node))
    return out


def _safe_eval(expr: ast.expr, frame: Any) -> Any:
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


def _find_assignment(tree: ast.AST, text: str, before: int) -> int | None:
    best = None
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets = [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, (ast.Name, ast.Attribute)) and ast.unparse(sub) == text:
                    line = getattr(node, "lineno", None) or getattr(t, "lineno", None)
                    if line is not None and line < before and (best is None or line > best):
                        best = line
    return best


def _forward_incident(torch: Any, exc: BaseException, tb: Any) -> None:
    msg = str(exc)
    if LEAF_MSG in msg or VIEW_LEAF_MSG in msg:
        kind = "leaf" if LEAF_MSG in msg and VIEW_LEAF_MSG not in msg else "view_of_leaf"
    elif VIEW_MSG in msg:
        kind = "view"
    else:
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
    _exc_refs.append(exc)
    target_tb = user_tb or (frames[-1] if frames else None)
    if target_tb is not None:
        fr = target_tb.tb_frame
        path = fr.f_code.co_filename
        try:
            src = "".join(linecache.getlines(path))
            tree = ast.parse(src)
            stmt = _stmt_at(tree, target_tb.tb_lineno)
            cands = _inplace_receivers(stmt) if stmt is not None else []
            _, col, _, _ = _position(fr.f_code, target_tb.tb_lasti, target_tb.tb_lineno)
            # Prefer the innermost in-place op whose span holds the failing instruction, then one whose receiver
            # can be looked up (a name, an attribute, a list item) and is a tensor.
            def _rank(c: tuple) -> tuple:
                node = c[2]
                lo = getattr(node, "col_offset", 0) + 1
                hi = getattr(node, "end_col_offset", 0) + 1
                same_line = getattr(node, "lineno", 0) == target_tb.tb_lineno
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
            for (expr, op, _node), val in evaluated:
                if val is not None and not isinstance(val, torch.Tensor):
                    continue
                inc["receiver"] = ast.unparse(expr)
                inc["op"] = op
                if val is not None:
                    inc["tensor"] = _describe_tensor(val)
                    inc["tensor"]["is_leaf"] = bool(val.is_leaf)
                    inc["tensor"]["requires_grad"] = bool(val.requires_grad)
                    inc["is_parameter"] = isinstance(val, torch.nn.Parameter)
                    gf = val.grad_fn
                    if gf is not None:
                        inc["view_of"] = gf.name()
                        try:
                            inc["origin"] = _frames_from_formatted(list(gf.metadata.get("traceback_") or []))
                        except Exception:
                            pass
                if not inc["origin"]:
                    line = _find_assignment(tree, inc["receiver"], target_tb.tb_lineno)
                    if line is not None:
                        code_line = linecache.getline(path, line)
                        stripped = code_line.rstrip("\r\n")
                        inc["origin"] = [{"path": os.path.abspath(path), "line": line,
                                          "column": len(stripped) - len(stripped.lstrip()) + 1, "end_line": line,
                                          "end_column": len(stripped) + 1, "func": fr.f_code.co_name,
                                          "kind": "user", "code": stripped.strip()}]
                break
        except Exception:
            pass
    _incidents.append(inc)


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

    class GradguardWriteLog(TorchDispatchMode):
        # Higher-order operators (flex_attention, cond, ...) pass through and run as without the mode.
        supports_higher_order_operators = True

        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # no torch._dynamo.disable wrapper: it costs per op (and an import)
            return _SKIP_DYNAMO[0]

        @classmethod
        def ignore_compile_internals(cls) -> bool:  # torch.compile compiles as without the mode (same kernels)
            return True

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            stats["ops"] += 1
            spec = spec_cache.get(func)
            if spec is None:
                spec = _write_spec(func)
            if spec and enabled[0]:
                try:
                    _log_writes(torch, func, spec, args, kwargs)
                except Exception:
                    pass
            if kwargs:
                return func(*args, **kwargs)
            return func(*args)

    mode = GradguardWriteLog()
    mode.__enter__()
    _clean_anomaly_warnings()

    def _in_child() -> None:  # forked DataLoader workers: stop logging (they never run backward)
        enabled[0] = False

    os.register_at_fork(after_in_child=_in_child)
    _tracer_state["installed"] = True
    _tracer_state["mode"] = mode
    return mode


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


def _clean_anomaly_warnings() -> None:
    orig = warnings.showwarning

    def showwarning(message: Any, category: Any, filename: Any, lineno: Any, file: Any = None,
                    line: Any = None) -> Any:
        try:
            if isinstance(message, Warning) and "Traceback of forward call" in str(message):
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


def _calibrate(torch: Any, ops: int, depth: int = 12, n: int = 40) -> dict[str, Any]:
    """Estimate what the doctor cost this run: the per-op time of a small autograd op with the doctor on (anomaly
    mode + write log) and off, at a typical stack depth, times the number of ops the script ran."""
    from torch.utils._python_dispatch import _disable_current_modes

    x = torch.zeros(4, requires_grad=True)

    def timed(level: int) -> float:
        if level:
            return timed(level - 1)
        t0 = time.perf_counter()
        for _ in range(n):
            x * 2
        return (time.perf_counter() - t0) / n

    timed(depth)
    on = min(timed(depth) for _ in range(3))
    check_nan = torch.is_anomaly_check_nan_enabled()
    try:
        with _disable_current_modes():
            torch.autograd.set_detect_anomaly(False)
            off = min(timed(depth) for _ in range(3))
    finally:
        torch.autograd.set_detect_anomaly(True, check_nan=check_nan)
    per_op = max(0.0, on - off)
    return {"per_op_us_plain": round(off * 1e6, 2), "per_op_us_doctor": round(on * 1e6, 2),
            "overhead_estimate_s": round(per_op * ops, 3)}


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
    counted = dict(_stats)
    if _tracer_state["installed"] and os.getpid() == _MAIN_PID:
        try:
            calib = _calibrate(sys.modules["torch"], _stats["ops"])
        except Exception:
            calib = {}
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
