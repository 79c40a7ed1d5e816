"""Turn the facts the child recorded into the report of ``gradguard run`` (JSON for tools, text for people).

Pure Python, no torch: the language server builds reports with it.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from gradguard.output import display_path
from gradguard.runtime._child import FAMILIES

SOURCE = "gradguard-run"

#: Pieces of torch's messages for the autograd in-place errors the doctor explains (a version-counter error in
#: backward, and every family raised at the in-place call).
AUTOGRAD_INPLACE_MESSAGES = ("modified by an inplace operation", *(piece for piece, _ in FAMILIES))

FIX = {
    "GG101": "make the in-place operation out of place (`x = x.mul(2)` instead of `x.mul_(2)`, `x = x + y` "
             "instead of `x += y`), or modify a `.clone()` of the tensor",
    "GG102": "drop `inplace=True` from this activation/dropout (out of place is the default)",
    "GG103": "do not assign into a tensor that backward still needs: assign into a `.clone()` "
             "(`out = x.clone(); out[...] = v`) or build the result out of place (`torch.cat`, `torch.where`)",
    "GG104": "let the op allocate its result instead of writing into an existing tensor with `out=` "
             "(`mask = torch.bernoulli(probs)`)",
    "GG202": "`optimizer.step()` updates the parameters in place, and a graph built before it still needs their "
             "old values: run every backward() of that graph before step(), or run the forward pass again after "
             "step(); for state carried across iterations (RNN hidden state, running targets), carry "
             "`state.detach()` into the next iteration",
    "GG301": "change a leaf that requires grad only under `with torch.no_grad():` (e.g. parameter clamping), "
             "or work on a copy (`x = x.clone()`) / an out-of-place result",
    "GG302": "views returned by unbind/split/chunk (or by a custom autograd.Function) cannot be modified in "
             "place: `.clone()` the view first, or compute the new value out of place",
    "GG305": "an expanded tensor's elements share memory: `.clone()` it where it is expanded before writing into "
             "it, or compute the new value out of place",
}

_INPLACE_ACTIVATION_FUNCS = re.compile(
    r"nn/functional\.py:(relu|relu_|leaky_relu|elu|selu|celu|hardtanh|relu6|rrelu|threshold|hardswish|hardsigmoid|"
    r"silu|mish|dropout|dropout1d|dropout2d|dropout3d|alpha_dropout|feature_alpha_dropout)$"
)




def _short(path: str) -> str:
    """site-packages/keras/src/x.py -> keras/src/x.py; otherwise a path relative to the cwd when inside it."""
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker):]
    return display_path(path)


def _op_from_node(node: str | None) -> str:
    if not node:
        return "?"
    name = re.sub(r"Backward\d*$", "", node)
    return name[:1].lower() + name[1:] if name else node


def _pick(frames: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The innermost user frame, else the innermost frame."""
    for f in frames:
        if f.get("kind") == "user":
            return f
    return frames[0] if frames else None


def _lib_frames(frames: list[dict[str, Any]], n: int = 3) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("kind") == "lib"][:n]


_SOURCES: dict[str, ast.Module | None] = {}


def _tree(path: str) -> ast.Module | None:
    if path not in _SOURCES:
        try:
            with open(path, encoding="utf-8") as fh:
                _SOURCES[path] = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            _SOURCES[path] = None
    return _SOURCES[path]


def _stmt_at(tree: ast.AST, line: int) -> ast.stmt | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def _scope_of(tree: ast.AST, line: int) -> ast.AST:
    best: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
            if isinstance(best, ast.Module) or node.lineno >= getattr(best, "lineno", 0):
                best = node
    return best


def _write_kind(path: str, line: int) -> tuple[str, str | None]:
    """('setitem'|'augassign'|'method'|'other', receiver name) of the statement at path:line."""
    tree = _tree(path)
    if tree is None:
        return "other", None
    stmt = _stmt_at(tree, line)
    if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Subscript) for t in stmt.targets):
        t = next(t for t in stmt.targets if isinstance(t, ast.Subscript))
        base: ast.expr = t
        while isinstance(base, ast.Subscript):
            base = base.value
        return "setitem", ast.unparse(base)
    if isinstance(stmt, ast.AugAssign):
        return "augassign", ast.unparse(stmt.target)
    return "other", None


def _alias_of(path: str, line: int, name: str) -> dict[str, Any] | None:
    """``out = x`` before ``out[...] = v``: the plain alias assignment that makes the write land in ``x``."""
    tree = _tree(path)
    if tree is None or not name.isidentifier():
        return None
    scope = _scope_of(tree, line)
    best = None
    for node in ast.walk(scope):
        if (isinstance(node, ast.Assign) and node.lineno < line and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name
                and isinstance(node.value, (ast.Name, ast.Attribute))):
            if best is None or node.lineno > best.lineno:
                best = node
    if best is None:
        return None
    return {"path": path, "line": best.lineno, "column": best.col_offset + 1, "end_line": best.end_lineno or best.lineno,
            "end_column": (best.end_col_offset or 0) + 1, "source": ast.unparse(best.value), "name": name}


def _code_for_write(w: dict[str, Any], frame: dict[str, Any] | None) -> str:
    via = w.get("via") or []
    if any(v.startswith("optim/") for v in via):
        return "GG202"
    if w.get("module") or any(_INPLACE_ACTIVATION_FUNCS.search(v) for v in via[:3]):
        return "GG102"
    if w.get("arg") == "out":
        return "GG104"
    if frame is not None:
        kind, _ = _write_kind(frame["path"], frame["line"])
        if kind == "setitem":
            return "GG103"
    return "GG101"


def _loc(f: dict[str, Any]) -> str:
    return f"{_short(f['path'])}:{f['line']}"


def _related(f: dict[str, Any], message: str) -> dict[str, Any]:
    return {"path": f["path"], "line": f["line"], "column": f.get("column", 1), "message": message}


def _diag(f: dict[str, Any], code: str, message: str, related: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "path": f["path"], "line": f["line"], "column": f.get("column", 1),
        "end_line": f.get("end_line", f["line"]), "end_column": f.get("end_column", f.get("column", 1) + 1),
        "code": code, "severity": "error", "message": message, "related": related, "fixes": [], "source": SOURCE,
    }


def _tensor_text(t: dict[str, Any]) -> str:
    shape = ", ".join(str(x) for x in t.get("shape", []))
    return f"{t.get('type') or t.get('dtype', 'tensor')} [{shape}]"


def _version_incident(inc: dict[str, Any], out: dict[str, Any]) -> None:
    saver = _op_from_node(inc.get("node") or inc.get("output_of"))
    tensor = _tensor_text(inc.get("tensor", {}))
    exp, act = inc.get("expected_version"), inc.get("actual_version")
    saved_frames = inc.get("saved_by") or []
    saved = _pick(saved_frames)
    if saved is not None:
        out["saved_by"].append({"path": saved["path"], "line": saved["line"], "column": saved.get("column", 1),
                                "op": saver, "node": inc.get("node"), "frames": saved_frames})
    backward_at = _pick(inc.get("backward_at") or [])
    seen: dict[tuple, dict[str, Any]] = {}
    for w in inc.get("writes") or []:
        frames = w.get("frames") or []
        f = _pick(frames)
        if f is None:
            continue
        code = _code_for_write(w, f)
        op = w.get("op", "?")
        vb = w.get("version_before", 0)
        msg = (f"`{op}` modifies in place the {tensor} that `{saver}` saved for backward "
               f"(version {vb} -> {vb + 1}; backward needs version {exp})")
        targets = [f]
        mod = w.get("module")
        if mod and mod.get("constructed_at"):
            c = _pick(mod["constructed_at"])
            if c is not None:
                targets.insert(0, c)
        related = []
        if mod and targets[0] is not f:
            related.append(_related(f, f"{mod['type']}(inplace=True) is called here"))
        for lf in _lib_frames(frames):
            related.append(_related(lf, f"the in-place `{op}` happens inside {_short(lf['path'])}:{lf['line']}: "
                                        f"{lf.get('code', '')}"))
        if saved is not None:
            related.append(_related(saved, f"`{saver}` saved the tensor for backward here"))
            for lf in _lib_frames(saved_frames, 2):
                related.append(_related(lf, f"saved inside {_short(lf['path'])}:{lf['line']}: {lf.get('code', '')}"))
        if backward_at is not None:
            related.append(_related(backward_at, "backward() failed here"))
        if code == "GG103" and f.get("kind") == "user":
            _, recv = _write_kind(f["path"], f["line"])
            alias = _alias_of(f["path"], f["line"], recv) if recv else None
            if alias is not None:
                targets.append({**alias, "kind": "user", "alias": True})
        for i, t in enumerate(targets):
            key = (t["path"], t["line"], op)
            if key in seen:
                continue
            if t.get("alias"):
                m = (f"`{t['name']} = {t['source']}` makes `{t['name']}` the same tensor as `{t['source']}`: the "
                     f"`{op}` below modifies the {tensor} that `{saver}` saved for backward; use "
                     f"`{t['name']} = {t['source']}.clone()`")
            elif i == 0 and mod and t is not f:
                m = (f"{mod['type']}(inplace=True) overwrites its input, the {tensor} that `{saver}` saved for "
                     f"backward (version {vb} -> {vb + 1}; backward needs version {exp})")
            else:
                m = msg
            entry = {"path": t["path"], "line": t["line"], "column": t.get("column", 1),
                     "end_line": t.get("end_line", t["line"]), "end_column": t.get("end_column", 1),
                     "op": op, "code": code, "message": m, "frames": frames if t is f else [t]}
            seen[key] = entry
            out["culprits"].append(entry)
            out["diagnostics"].append(_diag(t, code, f"{m}. Fix: {FIX[code]}.", related))
    inc_summary = {"kind": "version", "tensor": inc.get("tensor"), "expected_version": exp, "actual_version": act,
                   "saved_by_op": saver, "node": inc.get("node")}
    out["incidents"].append(inc_summary)


# Errors raised at the in-place call (and leaky_relu_, which torch only catches in backward): the family's rule
# code and fix. The families are the child's (gradguard.runtime._child.FAMILIES).
FAMILY_CODE = {
    "leaf": "GG301", "view_of_leaf": "GG301", "dirty_leaf": "GG301", "resize": "GG301",
    "view": "GG302", "custom_view": "GG302", "no_grad_view": "GG302", "inference_view": "GG302",
    "detach_view": "GG302", "dirty_view": "GG302", "inference": "GG302", "inference_saved": "GG302",
    "out": "GG104", "pack_hook": "GG101", "dirty_unreturned": "GG101", "leaky_relu": "GG102",
    "base_modified": "GG302", "overlap": "GG305",
}

FAMILY_FIX = {
    "view_of_leaf": "change the leaf only under `with torch.no_grad():`, or modify a copy (`v = v.clone()`) or "
                    "compute the new value out of place",
    "dirty_leaf": "pass the custom Function a copy (`Fn.apply(x.clone())`): a Function that modifies its input "
                  "in place (`ctx.mark_dirty`) cannot be given a leaf that requires grad",
    "resize": "resize a tensor that does not require grad (`y = x.detach().clone(); y.resize_(...)`), or build the "
              "new shape out of place (`torch.cat`, `x.reshape`)",
    "custom_view": "clone what the custom Function returns before modifying it in place "
                   "(`out = Fn.apply(x).clone()`), or return a new tensor from its forward instead of a view of an "
                   "input",
    "no_grad_view": "make the view and the in-place change under the same grad mode: both inside the `no_grad` "
                    "block (the change is not tracked) or both outside (it is), or modify a `.clone()` of the view",
    "inference_view": "make the view and the in-place change both inside `torch.inference_mode()` or both outside, "
                      "or modify a `.clone()` of the view",
    "detach_view": "detach out of place (`v = v.detach()`): a view cannot be detached in place",
    "dirty_view": "pass the custom Function an input that is not a view (`Fn.apply(x.clone())`), or make a Function "
                  "that modifies its input in place return only that one tensor",
    "inference": "modify a copy (`x = x.clone()`) outside inference mode, or do the in-place change inside "
                 "`torch.inference_mode()`; create tensors that you will change later under `torch.no_grad()` "
                 "instead of `inference_mode()`",
    "inference_saved": "use a copy (`x.clone()`) of the inference tensor in computations that autograd records, or "
                       "create it under `torch.no_grad()` instead of `torch.inference_mode()`",
    "out": "let the op allocate its result (`x = torch.mul(a, b)`): `out=` is not differentiable, so use it only "
           "under `torch.no_grad()` or with inputs that do not require grad",
    "pack_hook": "do not modify the tensor a saved-tensor pack hook receives: compute out of place "
                 "(`x = x + 1`) or pack a copy (`x.clone()`)",
    "dirty_unreturned": "return from forward every input passed to `ctx.mark_dirty`",
    "base_modified": "do not change the base of a view in place while the view is still used: make the view after "
                     "the change, or change a `.clone()` of the base; views made under `no_grad`/`inference_mode` or "
                     "returned by unbind/split/chunk cannot follow such changes",
    "overlap": "clone the expanded tensor where it is made (`x = row.expand(n, -1).clone()`), so that each element "
               "has its own memory, or compute the new value out of place",
    "leaky_relu": "use the out-of-place form (`F.leaky_relu(x, slope)`, `nn.LeakyReLU(slope)` without "
                  "`inplace=True`): the in-place form needs a non-negative slope, its backward reads the result",
}


def _where(f: dict[str, Any] | None) -> str:
    return f" (line {f['line']})" if f else ""


def _forward_message(inc: dict[str, Any]) -> str:
    kind = inc["kind"]
    op = inc.get("op") or "the in-place op"
    recv = f"`{inc['receiver']}`" if inc.get("receiver") else "a tensor"
    origin = _pick(inc.get("origin") or [])
    base = inc.get("base") or {}
    bname = f"`{base['name']}`" if base.get("name") else "another tensor"
    bor = _pick(base.get("origin") or [])
    under = (origin or {}).get("under") or (bor or {}).get("under")
    if kind == "leaf":
        what = "an nn.Parameter" if inc.get("is_parameter") else "a leaf tensor that requires grad"
        return f"`{op}` modifies {recv} in place, {what}, outside `torch.no_grad()`"
    if kind == "view_of_leaf":
        return (f"`{op}` modifies {recv} in place, a view of {bname}{_where(bor)}, a leaf tensor that requires grad, "
                "outside `torch.no_grad()`")
    if kind == "view":
        src = f"`{_op_from_node(inc.get('view_of'))}`" if inc.get("view_of") else "an op returning several views"
        return (f"`{op}` modifies {recv} in place, one of the views returned by {src}{_where(origin)}: autograd "
                "cannot rebase a view that shares its base with other outputs")
    if kind == "custom_view":
        return (f"`{op}` modifies {recv} in place, a view returned by a custom autograd.Function{_where(origin)}: "
                "the in-place change would bypass that Function's own backward")
    if kind == "no_grad_view":
        return (f"`{op}` modifies {recv} in place with grad mode on, a view of {bname} that was made under "
                f"`torch.no_grad()`{_where(origin)}")
    if kind == "inference_view":
        return (f"`{op}` modifies {recv} in place outside inference mode, a view made under "
                f"`torch.inference_mode()`{_where(origin)}")
    if kind == "inference":
        made = bor if base else origin
        of = f", a view of {bname}," if base else ""
        where = f" created under `torch.inference_mode()`{_where(made)}" if under == "inference_mode" or not made \
            else f" created{_where(made)}"
        return f"`{op}` modifies {recv} in place outside inference mode: it is an inference tensor{of}{where}"
    if kind == "inference_saved":
        made = bor or origin
        at = f" at line {made['line']}" if made else ""
        return (f"{recv} is an inference tensor (created{at}"
                f"{' under `torch.inference_mode()`' if under == 'inference_mode' else ''}): autograd cannot save it "
                "for backward")
    if kind == "out":
        grads = inc.get("requires_grad_args") or []
        why = f"{', '.join(f'`{g}`' for g in grads)} require{'s' if len(grads) == 1 else ''} grad" if grads \
            else "an argument requires grad"
        return f"`{op}` writes its result into {recv}, but {why}: results written with `out=` are not differentiable"
    if kind == "pack_hook":
        return f"`{op}` modifies in place the tensor a saved-tensor pack hook received"
    if kind == "base_modified":
        src = (f"a view made under `torch.{under}()`" if under else
               f"one of the views returned by `{_op_from_node(inc['view_of'])}`" if inc.get("view_of") else "a view")
        raised_at = _pick(inc.get("raised_at") or [])
        used = f" (line {raised_at['line']})" if raised_at else ""
        return (f"`{op}` modifies in place the base of {recv}, {src}{_where(origin)}; {recv} is used "
                f"afterwards{used}, which torch forbids")
    if kind == "detach_view":
        return f"`detach_` on {recv}, a view of {bname}{_where(bor)}: views cannot be detached in place"
    if kind == "resize":
        return f"`resize_` on {recv}, a tensor that requires grad"
    if kind == "overlap":
        return (f"`{op}` writes in place into {recv}, whose elements share memory (an expanded tensor"
                f"{_where(origin)}): torch refuses to write several values into one location")
    fn = f"`{inc['function']}`" if inc.get("function") else "a custom autograd.Function"
    if kind == "dirty_view":
        return (f"{fn} modifies its input {recv} in place (`ctx.mark_dirty`), a view of {bname}, and returns more "
                "than one tensor")
    if kind == "dirty_leaf":
        return f"{fn} modifies its input {recv} in place (`ctx.mark_dirty`), a leaf tensor that requires grad"
    if kind == "dirty_unreturned":
        return f"{fn} marks an input dirty (`ctx.mark_dirty`) but does not return it"
    if kind == "leaky_relu":
        slope = inc.get("negative_slope")
        s = f" {slope:g}" if isinstance(slope, (int, float)) else ""
        return (f"`{op}` runs in place with the negative slope{s}: its backward reads the result and cannot tell "
                "the signs of the input from it")
    return f"`{op}` modifies {recv} in place"


def _forward_incident(inc: dict[str, Any], out: dict[str, Any]) -> None:
    kind = inc["kind"]
    code = FAMILY_CODE.get(kind, "GG301")
    fix = FAMILY_FIX.get(kind) or FIX[code]
    raised = inc.get("raised_at") or []
    f = _pick(raised)
    writes = inc.get("writes") or []
    wframes = (writes[0].get("frames") or []) if writes else []
    if kind in ("pack_hook", "base_modified") and _pick(wframes) is not None:
        f, raised = _pick(wframes), wframes  # the write (in the hook, on the base), not the line that raised
    if f is None:
        return
    op = inc.get("op") or "in-place op"
    recv = inc.get("receiver") or "the tensor"
    origin = _pick(inc.get("origin") or [])
    msg = _forward_message(inc)
    related = []
    if kind in ("pack_hook", "base_modified"):
        at = _pick(inc.get("raised_at") or [])
        if at is not None and at is not f:
            what = "torch saved the tensor (and called the pack hook) here" if kind == "pack_hook" else \
                "the view is used here (torch raised)"
            related.append(_related(at, what))
    elif kind == "leaky_relu":
        at = _pick(inc.get("backward_at") or [])
        if at is not None:
            related.append(_related(at, "backward() failed here"))
    if origin is not None:
        related.append(_related(origin, f"`{recv}` comes from here"))
        if kind in ("view", "custom_view", "no_grad_view", "inference_view"):
            out["saved_by"].append({"path": origin["path"], "line": origin["line"],
                                    "column": origin.get("column", 1),
                                    "op": _op_from_node(inc.get("view_of")) if inc.get("view_of") else "view",
                                    "frames": inc.get("origin") or []})
    base = inc.get("base") or {}
    bor = _pick(base.get("origin") or [])
    if bor is not None and (origin is None or bor["line"] != origin["line"]):
        related.append(_related(bor, f"`{base.get('name') or 'its base'}` (the base of the view) comes from here"))
    for s in inc.get("dirty_at") or []:
        related.append(_related(s, "the Function marks its input dirty here"))
    for lf in _lib_frames(raised):
        related.append(_related(lf, f"raised inside {_short(lf['path'])}:{lf['line']}: {lf.get('code', '')}"))
    targets = [f]
    mod = writes[0].get("module") if writes else None
    if kind == "leaky_relu" and mod and mod.get("constructed_at"):
        c = _pick(mod["constructed_at"])
        if c is not None:
            targets.insert(0, c)
            related.insert(0, _related(f, f"{mod['type']}(inplace=True) is called here"))
    for t in targets:
        m = msg
        if t is not f:
            m = f"{mod['type']}(inplace=True) is constructed here: {msg}"  # type: ignore[index]
        out["culprits"].append({"path": t["path"], "line": t["line"], "column": t.get("column", 1),
                                "end_line": t.get("end_line", t["line"]), "end_column": t.get("end_column", 1),
                                "op": op, "code": code, "message": m, "fix": fix, "family": kind,
                                "frames": raised if t is f else [t]})
        out["diagnostics"].append(_diag(t, code, f"{m}. Fix: {fix}.", related))
    out["incidents"].append({"kind": kind, "tensor": inc.get("tensor"), "receiver": inc.get("receiver"),
                             "origin": origin, "base": {"name": base.get("name"), "tensor": base.get("tensor"),
                                                        "origin": bor} if base else None})


def attach_static_fixes(diagnostics: list[dict[str, Any]]) -> None:
    """Give each runtime diagnostic the fixes ``gradguard check`` computes for the same line (same rule first), so
    that an editor can offer them as quick fixes. Best effort: the report never depends on it."""
    by_path: dict[str, list[dict[str, Any]]] = {}
    for d in diagnostics:
        if os.path.isfile(d["path"]) and "site-packages" not in d["path"] and "dist-packages" not in d["path"]:
            by_path.setdefault(d["path"], []).append(d)
    if not by_path:
        return
    try:
        from gradguard.api import check_file
        from gradguard.config import Config
    except Exception:
        return
    for path, diags in by_path.items():
        try:
            found = check_file(path, Config(), fixes=True)
        except Exception:
            continue
        for d in diags:
            same_line = [f for f in found if f.line == d["line"] and f.fixes]
            same_line.sort(key=lambda f: f.code != d["code"])
            if same_line:
                d["fixes"] = [x.to_json() for x in same_line[0].fixes]
                d["static_code"] = same_line[0].code


def build_report(
    facts: dict[str, Any] | None,
    *,
    exit_code: int | None,
    target: str,
    timed_out: bool = False,
    timeout: float | None = None,
    interrupted: bool = False,
    elapsed: float | None = None,
    launch_error: str | None = None,
    static_fixes: bool = True,
) -> dict[str, Any]:
    out: dict[str, Any] = {"status": "failed", "exit_code": exit_code, "error": None, "culprits": [],
                           "saved_by": [], "diagnostics": [], "incidents": [], "target": target, "stats": {}}
    if facts:
        out["stats"] = dict(facts.get("stats") or {})
    if elapsed is not None:
        out["stats"]["wall_s"] = round(elapsed, 3)
    if launch_error:
        out["error"] = {"type": "LaunchError", "message": launch_error}
        return out
    if timed_out:
        out["error"] = {"type": "Timeout", "message": f"the script did not finish within {timeout:g} s and was "
                                                      "stopped (with its child processes)"}
    elif interrupted:
        out["error"] = {"type": "KeyboardInterrupt", "message": "interrupted; the script and its child processes "
                                                                "were stopped"}
    exc = (facts or {}).get("exception")
    incidents = (facts or {}).get("incidents") or []
    relevant = [i for i in incidents if i.get("uncaught")]
    if not relevant and exit_code not in (0, None) and not timed_out and not interrupted:
        relevant = incidents[-1:]
    if relevant and not timed_out and not interrupted:
        out["status"] = "error"
        inc = relevant[0]
        if exc and inc.get("uncaught"):
            out["error"] = {"type": exc["type"], "message": exc["message"]}
        else:
            out["error"] = {"type": "RuntimeError", "message": inc.get("message", "")}
        for i in relevant:
            if i["kind"] == "version":
                _version_incident(i, out)
            else:
                _forward_incident(i, out)
        if static_fixes:
            attach_static_fixes(out["diagnostics"])
    elif timed_out or interrupted:
        out["status"] = "failed"
    elif exc and any(m in exc.get("message", "") for m in AUTOGRAD_INPLACE_MESSAGES):
        out["status"] = "error"  # the tracer could not explain it (not traced, or the write was not seen)
        out["error"] = {"type": exc["type"], "message": exc["message"]}
        out["traceback"] = exc.get("frames") or []
    elif exit_code == 0:
        out["status"] = "clean"
        caught = [i for i in incidents if not i.get("uncaught")]
        if caught:
            out["caught_errors"] = [i.get("message", "") for i in caught]
    else:
        out["status"] = "failed"
        if exc:
            out["error"] = {"type": exc["type"], "message": exc["message"]}
            out["traceback"] = exc.get("frames") or []
        elif facts is None:
            out["error"] = {"type": "ChildDied", "message": f"the script's process ended with status {exit_code} "
                                                            "before gradguard could record anything"}
        else:
            out["error"] = {"type": "SystemExit", "message": f"the script exited with status {exit_code}"}
    return out


def format_text(report: dict[str, Any]) -> str:
    """The report for people (printed on stderr after the script's own output)."""
    lines: list[str] = []
    status = report["status"]
    stats = report.get("stats") or {}
    if status == "clean":
        t = f"{stats.get('wall_s', stats.get('elapsed_s', 0)):.2f} s"
        traced = stats.get("traced")
        extra = (f"; traced {stats.get('ops', 0)} ATen ops, {stats.get('writes', 0)} in-place writes under anomaly "
                 "mode" if traced else "; the script never imported torch, nothing was traced")
        if traced and isinstance(stats.get("overhead_estimate_s"), (int, float)):
            extra += (f"; estimated doctor overhead {stats['overhead_estimate_s']:.2f} s "
                      f"({stats.get('per_op_us_doctor', 0):.0f} vs {stats.get('per_op_us_plain', 0):.0f} us per op)")
        elif traced and stats.get("overhead_note"):
            extra += f"; doctor overhead {stats['overhead_note']}"
        if traced and stats.get("optimizer_steps_untraced"):
            extra += (f"; {stats['optimizer_steps_untraced']} optimizer step(s) ran untraced, their writes read from "
                      "version counters")
        lines.append(f"gradguard run: clean: the script finished without autograd in-place errors ({t}{extra}).")
        if report.get("caught_errors"):
            lines.append(f"  note: the script caught {len(report['caught_errors'])} autograd in-place error(s) itself.")
        return "\n".join(lines)
    if status == "failed":
        err = report.get("error") or {}
        kind = err.get("type", "?")
        if kind in ("Timeout", "KeyboardInterrupt"):
            lines.append(f"gradguard run: stopped ({kind}): {err.get('message', '')}")
        elif kind == "LaunchError":
            lines.append(f"gradguard run: could not start the script: {err.get('message', '')}")
        elif kind == "TorchNotInstalled":
            return ""  # the child has said it, in one line, instead of the script's traceback
        elif kind == "ChildDied":
            lines.append(f"gradguard run: failed: {err.get('message', '')}")
        else:
            lines.append(f"gradguard run: failed ({kind}), but not with an autograd in-place error: nothing for "
                         "the doctor to explain (the script's own traceback is above).")
        return "\n".join(lines)
    err = report.get("error") or {}
    lines.append("gradguard run: the script failed with an autograd in-place error")
    lines.append(f"  {err.get('type', 'RuntimeError')}: {err.get('message', '').split(' Hint:')[0]}")
    for inc in report.get("incidents") or []:
        lines.append("")
        if inc["kind"] == "version":
            tv: dict[str, Any] = inc.get("tensor") or {}
            lines.append(f"  tensor      {_tensor_text(tv)} (dtype {tv.get('dtype', '?')}), "
                         f"expected version {inc.get('expected_version')}, found {inc.get('actual_version')}")
            for s in report.get("saved_by") or []:
                lines.append(f"  saved by    `{s['op']}` at {_loc(s)}")
                for lf in _lib_frames(s.get("frames") or []):
                    lines.append(f"                inside {_loc(lf)}: {lf.get('code', '')}")
        else:
            tf: dict[str, Any] = inc.get("tensor") or {}
            if tf:
                notes = [w for w, k in (("leaf", "is_leaf"), ("requires grad", "requires_grad"),
                                        ("inference tensor", "inference"), ("view", "is_view")) if tf.get(k)]
                extra = f" ({', '.join(notes)})" if notes else ""
                lines.append(f"  tensor      `{inc.get('receiver')}`: {_tensor_text(tf)}{extra}")
            if inc.get("origin"):
                under = inc["origin"].get("under")
                u = f" [under {under}]" if under else ""
                lines.append(f"  comes from  {_loc(inc['origin'])}: {inc['origin'].get('code', '')}{u}")
            base = inc.get("base") or {}
            if base:
                bo = base.get("origin")
                where = f" from {_loc(bo)}: {bo.get('code', '')}" if bo else ""
                lines.append(f"  view of     `{base.get('name') or '?'}`{where}")
    for c in report.get("culprits") or []:
        label = "raised by  " if c.get("family") else "changed by "
        lines.append(f"  {label} `{c['op']}` at {_loc(c)} [{c['code']}]")
        lines.append(f"                {c['message']}")
        for lf in _lib_frames(c.get("frames") or []):
            lines.append(f"                inside {_loc(lf)}: {lf.get('code', '')}")
    if not report.get("culprits"):
        lines.append("  changed by  (not found: the in-place write was not seen by the tracer)")
    fixes: list[tuple[str, str]] = []
    for c in report.get("culprits") or []:
        item = (c["code"], c.get("fix") or FIX[c["code"]])
        if item not in fixes:
            fixes.append(item)
    for code, text in fixes:
        lines.append(f"  fix ({code}): {text}")
    for c in report.get("culprits") or []:
        lib = _lib_frames(c.get("frames") or [], 1)
        if lib:
            pkg = _short(lib[0]["path"]).split("/")[0]
            lines.append(f"  note: the in-place write happens inside {pkg} ({_loc(lib[0])}), called from your line "
                         f"{_loc(c)}: change how you call it there (e.g. pass a copy, or avoid the option that keeps "
                         f"state), or report it to {pkg}")
            break
    return "\n".join(lines)
