"""Turn the facts the child recorded into the report of ``gradguard run`` (JSON for tools, text for people).

Pure Python, no torch: the language server builds reports with it.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from gradguard.output import display_path

SOURCE = "gradguard-run"

AUTOGRAD_INPLACE_MESSAGES = (
    "modified by an inplace operation",
    "a leaf Variable that requires grad is being used in an in-place operation",
    "is a view and is being modified inplace",
)

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


def _forward_incident(inc: dict[str, Any], out: dict[str, Any]) -> None:
    kind = inc["kind"]
    code = "GG302" if kind == "view" else "GG301"
    raised = inc.get("raised_at") or []
    f = _pick(raised)
    if f is None:
        return
    op = inc.get("op") or "in-place op"
    recv = inc.get("receiver") or "the tensor"
    origin = _pick(inc.get("origin") or [])
    if kind == "leaf":
        what = "an nn.Parameter" if inc.get("is_parameter") else "a leaf tensor that requires grad"
        msg = f"`{op}` modifies `{recv}` in place, {what}, outside `torch.no_grad()`"
    elif kind == "view_of_leaf":
        msg = f"`{op}` modifies `{recv}` in place, a view of a leaf tensor that requires grad"
    else:
        src = f"`{_op_from_node(inc.get('view_of'))}`" if inc.get("view_of") else "an op returning several views"
        msg = f"`{op}` modifies `{recv}` in place, a view returned by {src} that autograd cannot rebase"
    related = []
    if origin is not None:
        related.append(_related(origin, f"`{recv}` comes from here"))
        if kind == "view":
            out["saved_by"].append({"path": origin["path"], "line": origin["line"],
                                    "column": origin.get("column", 1),
                                    "op": _op_from_node(inc.get("view_of")), "frames": inc.get("origin") or []})
    for lf in _lib_frames(raised):
        related.append(_related(lf, f"raised inside {_short(lf['path'])}:{lf['line']}: {lf.get('code', '')}"))
    out["culprits"].append({"path": f["path"], "line": f["line"], "column": f.get("column", 1),
                            "end_line": f.get("end_line", f["line"]), "end_column": f.get("end_column", 1),
                            "op": op, "code": code, "message": msg, "frames": raised})
    out["diagnostics"].append(_diag(f, code, f"{msg}. Fix: {FIX[code]}.", related))
    out["incidents"].append({"kind": kind, "tensor": inc.get("tensor"), "receiver": inc.get("receiver"),
                             "origin": origin})


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
        if traced and "overhead_estimate_s" in stats:
            extra += (f"; estimated doctor overhead {stats['overhead_estimate_s']:.2f} s "
                      f"({stats.get('per_op_us_doctor', 0):.0f} vs {stats.get('per_op_us_plain', 0):.0f} us per op)")
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
                lines.append(f"  tensor      `{inc.get('receiver')}`: {_tensor_text(tf)}")
            if inc.get("origin"):
                lines.append(f"  comes from  {_loc(inc['origin'])}: {inc['origin'].get('code', '')}")
    for c in report.get("culprits") or []:
        lines.append(f"  changed by  `{c['op']}` at {_loc(c)} [{c['code']}]")
        lines.append(f"                {c['message']}")
        for lf in _lib_frames(c.get("frames") or []):
            lines.append(f"                inside {_loc(lf)}: {lf.get('code', '')}")
    if not report.get("culprits"):
        lines.append("  changed by  (not found: the in-place write was not seen by the tracer)")
    codes = []
    for c in report.get("culprits") or []:
        if c["code"] not in codes:
            codes.append(c["code"])
    for code in codes:
        lines.append(f"  fix ({code}): {FIX[code]}")
    for c in report.get("culprits") or []:
        lib = _lib_frames(c.get("frames") or [], 1)
        if lib:
            pkg = _short(lib[0]["path"]).split("/")[0]
            lines.append(f"  note: the in-place write happens inside {pkg} ({_loc(lib[0])}), called from your line "
                         f"{_loc(c)}: change how you call it there (e.g. pass a copy, or avoid the option that keeps "
                         f"state), or report it to {pkg}")
            break
    return "\n".join(lines)
