"""The abstract interpreter over the stdlib ``ast``.

It executes a module abstractly: module-level code first (inlining calls into local functions and classes,
so a hazard that spans a caller and a callee is seen with the caller's tensors), then every function and
method on its own with unknown arguments. Tensors carry may-alias storages; the heap records, per storage,
which op saved it for backward; an in-place op on a storage with live saves is a hazard. Loops run twice
(the second iteration sees the first's state), branches are joined (a hazard on any path counts).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from gradguard.analysis.hazards import Hazard, SaveRecord, Site
from gradguard.analysis.state import Heap, State, StepEvent, join_states
from gradguard.analysis.values import (
    MAYBE,
    NO,
    NONE,
    UNKNOWN,
    UNKNOWN_NUM,
    YES,
    Alt,
    Bound,
    ClassInfo,
    ClassV,
    Const,
    Func,
    FuncInfo,
    Method,
    Obj,
    Params,
    Ref,
    Seq,
    Storage,
    Super,
    T,
    Val,
    fresh,
    join,
    seq_elem,
)
from gradguard.knowledge import Knowledge, OpInfo, load

MAX_DEPTH = 6
STANDALONE_DEPTH = 3  # a function analysed on its own inlines 3 levels of callees (they are analysed on their own too)
BUDGET = 400_000  # abstract statement executions per file: analysis always terminates quickly

BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul", ast.BitAnd: "and_", ast.BitOr: "or_",
    ast.BitXor: "xor", ast.LShift: "lshift", ast.RShift: "rshift",
}
OPSYM = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
}
NO_GRAD_CTX = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad")
ENABLE_GRAD_CTX = ("torch.enable_grad", "torch.autograd.enable_grad")
AUTOCAST_CTX = ("torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast")
ALLOW_MUT_CTX = ("torch.autograd.graph.allow_mutation_on_saved_tensors",)
CONTAINER_MODULES = {"torch.nn.Sequential": "sequential", "torch.nn.ModuleList": "modulelist",
                     "torch.nn.ModuleDict": "moduledict", "torch.nn.ParameterList": "modulelist"}
PARAMETER = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
FUNCTION_BASES = ("torch.autograd.Function", "torch.autograd.function.Function")


class Budget(Exception):
    pass


class Loop:
    __slots__ = ("breaks", "carried", "continues", "node")

    def __init__(self, carried: set[str], node: ast.AST):
        self.node = node
        self.carried = carried
        self.breaks: list[State] = []
        self.continues: list[State] = []


class Frame:
    __slots__ = ("cls", "depth", "func", "loops", "returns", "self_obj")

    def __init__(self, func: FuncInfo | None, depth: int, self_obj: Val | None = None):
        self.func = func
        self.cls = func.cls if func else None
        self.depth = depth
        self.loops: list[Loop] = []
        self.returns: list[tuple[Val, State]] = []
        self.self_obj = self_obj


def _is_true(v: Val | None) -> bool:
    return isinstance(v, Const) and v.known and v.value is True


def _is_false(v: Val | None) -> bool:
    return isinstance(v, Const) and v.known and v.value is False


def _carried_names(body: list[ast.stmt]) -> set[str]:
    """Names read in a loop body before being written in it (live-in) and written in it: loop-carried."""
    written: set[str] = set()
    live_in: set[str] = set()
    for stmt in body:
        loads: list[str] = []
        stores: list[str] = []
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name):
                (loads if isinstance(node.ctx, ast.Load) else stores).append(node.id)
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            loads.append(stmt.target.id)
        for name in loads:
            if name not in written:
                live_in.add(name)
        written.update(stores)
    return written & live_in


class Analyzer:
    def __init__(self, tree: ast.Module, source: str, path: str, kb: Knowledge | None = None):
        self.tree = tree
        self.path = path
        self.kb = kb or load()
        self.lines_b = [ln.encode("utf-8") for ln in source.splitlines()] if not source.isascii() else None
        self.lines = source.splitlines()
        self.hazards: dict[tuple[Any, ...], Hazard] = {}
        self.globals: dict[str, Val] = {}
        self.stamp = 0
        self.budget = BUDGET
        self.active: list[FuncInfo] = []
        self.functions: list[FuncInfo] = []
        self.classes: list[ClassInfo] = []
        self.default_instances: dict[int, Obj] = {}
        self.loop_carried: dict[int, set[str]] = {}
        self.cur_stmt: ast.stmt | None = None
        self.active_loops: list[ast.AST] = []
        self.alias_stmt: dict[Site, Site] = {}
        self._ng_only: set[int] | None = None
        self._graph_file: bool | None = None

    # ------------------------------------------------------------------ driver
    def run(self) -> list[Hazard]:
        st = State({}, Heap())
        fr = Frame(None, 0)
        try:
            self.exec_block(self.tree.body, st, fr, module=True)
        except Budget:
            pass
        for fi in list(self.functions):
            self.budget = max(self.budget, 20_000)
            try:
                self.standalone(fi)
            except Budget:
                continue
        return sorted(self.hazards.values(), key=lambda h: (h.site.line, h.site.col))

    def module_like(self, cls: ClassInfo) -> bool:
        """An nn.Module (or autograd.Function): a torch base, or a `forward` of its own or of a local base."""
        for c in cls.mro():
            if "forward" in c.methods:
                return True
            for b in c.bases:
                if isinstance(b, Ref) and b.qual.startswith("torch."):
                    return True
        return False

    @property
    def graph_file(self) -> bool:
        """Does this file build or train autograd graphs (modules, Functions, backward, parameters, optimizers)?"""
        if self._graph_file is None:
            self._graph_file = any(self.module_like(c) for c in self.classes) or any(
                k in ln for ln in self.lines for k in _GRAPH_MARKERS)
        return self._graph_file

    def ng_only(self, fi: FuncInfo) -> bool:
        if self._ng_only is None:
            src_has = any(("no_grad" in ln or "inference_mode" in ln or "set_grad_enabled" in ln) for ln in self.lines)
            self._ng_only = _no_grad_only(self.lines) if src_has else set()
        node = fi.node
        return not isinstance(node, ast.Lambda) and node.lineno in self._ng_only

    def standalone(self, fi: FuncInfo) -> None:
        node = fi.node
        if isinstance(node, ast.Lambda):
            return
        env: dict[str, Val] = {}
        self_obj: Val | None = None
        args = node.args
        params = [*args.posonlyargs, *args.args]
        defaults = self._defaults(fi)
        if fi.cls is not None and not fi.is_static and params:
            first = params[0].arg
            if fi.is_classmethod:
                env[first] = ClassV(fi.cls)
            elif self._is_function_class(fi.cls):
                ctx = Obj("ctx")
                env[first] = ctx
            else:
                self_obj = self.default_instance(fi.cls) if node.name != "__init__" else Obj("local", fi.cls.name, fi.cls)
                env[first] = self_obj
            params = params[1:]
        module_like = fi.cls is not None and self.module_like(fi.cls)
        tensor_params = module_like and node.name in ("forward", "backward")
        # Methods of plain classes (datasets, transforms, samplers, optimizers) handle data, not graph tensors;
        # so do free functions of a file with no graph in sight (no module, Function, backward, Parameter).
        if fi.cls is not None:
            param_rg = MAYBE if module_like else NO
        else:
            param_rg = MAYBE if self.graph_file else NO
        for p in params + list(args.kwonlyargs):
            is_tensor = _annotated_tensor(p.annotation) or (tensor_params and p.annotation is None)
            rg = NO if _INT_NAME.search(p.arg) else param_rg  # token ids, labels, masks, indices: integer tensors
            env[p.arg] = defaults.get(p.arg) or fresh(p.arg, rg=rg, maybe_tensor=not is_tensor)
        if args.vararg:
            env[args.vararg.arg] = Seq(None, UNKNOWN, "tuple")
        if args.kwarg:
            env[args.kwarg.arg] = UNKNOWN
        no_grad = fi.no_grad or self.ng_only(fi) or (
            fi.cls is not None and self._is_function_class(fi.cls) and node.name == "forward")
        st = State(env, Heap(), no_grad=no_grad)
        fr = Frame(fi, STANDALONE_DEPTH, self_obj)
        self.active.append(fi)
        try:
            self.exec_block(node.body, st, fr)
        finally:
            self.active.pop()

    def _defaults(self, fi: FuncInfo) -> dict[str, Val]:
        node = fi.node
        out: dict[str, Val] = {}
        a = node.args
        pos = [*a.posonlyargs, *a.args]
        for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
            out[p.arg] = self.const_of(d)
        for p, kd in zip(a.kwonlyargs, a.kw_defaults):
            if kd is not None:
                out[p.arg] = self.const_of(kd)
        return out

    def const_of(self, node: ast.expr) -> Val:
        if isinstance(node, ast.Constant):
            return Const(node.value)
        return UNKNOWN_NUM

    def default_instance(self, cls: ClassInfo) -> Obj:
        key = id(cls)
        obj = self.default_instances.get(key)
        if obj is None:
            obj = Obj("local", cls.name, cls)
            obj.training = True  # analysed as trained: eval-only paths are checked where a caller calls .eval()
            self.default_instances[key] = obj
            init = cls.find_method("__init__")
            if init is not None:
                st = State({}, Heap())
                self.inline(init, [obj], {}, st, Frame(None, MAX_DEPTH - 3), defaults_only=True)
        return obj

    # ------------------------------------------------------------------ hazards
    def site(self, node: Any) -> Site:
        return Site.of(node)

    def text(self, node: ast.AST | None) -> str:
        if node is None or not hasattr(node, "lineno"):
            return ""
        ln, col, eln, ecol = node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0  # type: ignore[attr-defined]
        if self.lines_b is None:
            if ln == eln:
                return self.lines[ln - 1][col:ecol] if ln <= len(self.lines) else ""
            parts = [self.lines[ln - 1][col:], *self.lines[ln:eln - 1], self.lines[eln - 1][:ecol]]
            return "\n".join(parts)
        if ln == eln:
            return self.lines_b[ln - 1][col:ecol].decode("utf-8", "replace")
        parts_b = [self.lines_b[ln - 1][col:], *self.lines_b[ln:eln - 1], self.lines_b[eln - 1][:ecol]]
        return b"\n".join(parts_b).decode("utf-8", "replace")

    def report(self, h: Hazard) -> None:
        k = h.key()
        if k not in self.hazards:
            self.hazards[k] = h

    def stmt_site(self) -> Site:
        return Site.of(self.cur_stmt) if self.cur_stmt is not None else Site(1, 0, 1, 1)

    def mutate(self, val: Val, st: State, *, form: str, node: ast.AST, op: str, target: str,
               extra: tuple[tuple[str, Any], ...] = (), no_grad_op: bool = False,
               site: Site | None = None, related: tuple[tuple[Site, str], ...] = ()) -> None:
        if not isinstance(val, T):
            return
        site = site or self.site(node)
        stmt = self.stmt_site()
        grad_on = not (st.no_grad or no_grad_op)
        if val.leaf and val.rg == YES and grad_on:
            origin = next((s.desc for s in val.storages if s.leaf and s.desc), "")
            self.report(Hazard("leaf", form, site, stmt, op, target, related=related,
                               extra=(*extra, ("leaf_origin", origin), ("is_view", val.view is not None))))
            return
        if val.view == "multi" and val.rg >= MAYBE and grad_on and not val.maybe_tensor:
            self.report(Hazard("view_multi", form, site, stmt, op, target, related=related,
                               extra=(*extra, ("view_op", val.view_op))))
            return
        if val.view == "nograd" and grad_on:
            self.report(Hazard("view_nograd", form, site, stmt, op, target, related=related,
                               extra=(*extra, ("view_op", val.view_op))))
            return
        saved = st.heap.saved
        recs: list[SaveRecord] = []
        for s in val.storages:
            for r in saved.get(s, ()):
                if r not in recs:
                    recs.append(r)
        param_update = st.no_grad and any(s.param_of is not None for s in val.storages)
        if recs and not st.allow_mutation and not param_update:
            ex = extra
            if val.alias_of and form == "setitem" and val.alias_site is not None:
                # `out = x; out[i] = v`: the alias is where a copy was meant; report there, point at the write.
                ex = (*ex, ("alias_of", val.alias_of), ("alias_site", val.alias_site))
                related = ((site, f"{op} into `{target}` modifies `{val.alias_of}` here"), *related)
                site = self.alias_stmt.get(val.alias_site, site)
            self.report(Hazard("saved", form, site, stmt, op, target, tuple(recs), related, ex))
        for s in val.storages:
            saved.pop(s, None)
        owners = frozenset(s.param_of for s in val.storages if s.param_of is not None)
        if owners and not st.allow_mutation:  # under allow_mutation_on_saved_tensors torch keeps a copy
            st.heap.steps = (*st.heap.steps, StepEvent(self.stamp, owners, site, stmt, f"in-place update of `{target}`"))

    def save(self, val: Val, st: State, rec: SaveRecord) -> None:
        if not isinstance(val, T):
            return
        saved = st.heap.saved
        for s in val.storages:
            saved[s] = (*saved.get(s, ()), rec)

    # ------------------------------------------------------------------ statements
    def exec_block(self, stmts: Iterable[ast.stmt], st: State | None, fr: Frame, module: bool = False) -> State | None:
        for s in stmts:
            if st is None:
                return None
            st = self.exec_stmt(s, st, fr)
            if module and st is not None:
                self.globals = st.env
        return st

    def exec_stmt(self, s: ast.stmt, st: State, fr: Frame) -> State | None:
        self.budget -= 1
        if self.budget <= 0:
            raise Budget()
        self.stamp += 1
        prev = self.cur_stmt
        self.cur_stmt = s
        try:
            m = getattr(self, "s_" + s.__class__.__name__, None)
            if m is None:
                return st
            return m(s, st, fr)  # type: ignore[no-any-return]
        finally:
            self.cur_stmt = prev

    def s_Expr(self, s: ast.Expr, st: State, fr: Frame) -> State:
        self.ev(s.value, st, fr)
        return st

    def s_Pass(self, s: ast.stmt, st: State, fr: Frame) -> State:
        return st

    def s_Assign(self, s: ast.Assign, st: State, fr: Frame) -> State:
        v = self.ev(s.value, st, fr)
        for t in s.targets:
            self.assign(t, v, st, fr, s)
        return st

    def s_AnnAssign(self, s: ast.AnnAssign, st: State, fr: Frame) -> State:
        if s.value is not None:
            v = self.ev(s.value, st, fr)
            self.assign(s.target, v, st, fr, s)
        return st

    def s_AugAssign(self, s: ast.AugAssign, st: State, fr: Frame) -> State:
        rhs = self.ev(s.value, st, fr)
        cur = self.ev(s.target, st, fr)
        opname = BINOPS.get(type(s.op), "add")
        sym = OPSYM.get(type(s.op), "+") + "="
        if isinstance(cur, T) and not (isinstance(rhs, Seq)):
            info = self.kb.get(f"operator.i{opname.rstrip('_')}") or self.kb.get(f"operator.i{opname}")
            tgt = self.text(s.target)
            extra = (("target_span", Site.of(s.target)), ("value_span", Site.of(s.value)),
                     ("op", OPSYM.get(type(s.op), "+")))
            if info is not None:
                out = self.apply(info, [cur, rhs], {}, s, st, fr, display=sym, form="augassign", target_text=tgt,
                                 extra=extra)
            else:
                self.mutate(cur, st, form="augassign", node=s, op=sym, target=tgt, extra=extra)
                out = cur
            if isinstance(s.target, ast.Name):
                st.env[s.target.id] = out if isinstance(out, T) else cur
            return st
        # Python values: x = x op v
        nv = self.binop(cur, rhs, s.op, s, st, fr)
        if isinstance(s.target, (ast.Name, ast.Attribute)):
            self.assign(s.target, nv, st, fr, s)
        return st

    def assign(self, t: ast.expr, v: Val, st: State, fr: Frame, stmt: ast.stmt) -> None:
        if isinstance(t, ast.Name):
            if isinstance(v, T) and fr.loops and t.id in fr.loops[-1].carried and v.prov \
                    and isinstance(stmt, ast.Assign):
                carry: tuple[Site, str, Site, object] = (Site.of(stmt), t.id, Site.of(stmt.value), fr.loops[-1].node)
                v = v.with_(prov=frozenset((o, s, c or carry) for (o, s, c) in v.prov))
            if isinstance(v, T) and isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) \
                    and fr.func is not None:
                v = v.with_(alias_of=stmt.value.id, alias_site=Site.of(stmt.value))
                self.alias_stmt[Site.of(stmt.value)] = Site.of(stmt)
            st.env[t.id] = v
        elif isinstance(t, (ast.Tuple, ast.List)):
            elts = t.elts
            star = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), None)
            if isinstance(v, Seq) and v.items is not None and star is None and len(v.items) == len(elts):
                for e, item in zip(elts, v.items):
                    self.assign(e, item, st, fr, stmt)
                return
            for i, e in enumerate(elts):
                if isinstance(e, ast.Starred):
                    self.assign(e.value, Seq(None, self.elem(v, stmt), "list"), st, fr, stmt)
                elif isinstance(v, Seq) and v.items is not None and star is None and i < len(v.items):
                    self.assign(e, v.items[i], st, fr, stmt)
                else:
                    self.assign(e, self.elem(v, stmt), st, fr, stmt)
        elif isinstance(t, ast.Attribute) and t.attr == "requires_grad":
            cur = self.ev(t.value, st, fr)
            if isinstance(cur, T) and isinstance(v, Const) and v.known:
                new = cur.with_(rg=YES if v.value else NO)
                if isinstance(t.value, ast.Name):
                    st.env[t.value.id] = new
                elif isinstance(t.value, ast.Attribute):
                    owner = self.ev(t.value.value, st, fr)
                    if isinstance(owner, Obj):
                        if t.value.attr in owner.params:
                            owner.params[t.value.attr] = new
                        else:
                            owner.attrs[t.value.attr] = new
        elif isinstance(t, ast.Attribute):
            obj = self.ev(t.value, st, fr)
            if isinstance(obj, Obj):
                if t.attr in ("data", "grad"):
                    return
                if isinstance(v, T) and v.prov and isinstance(stmt, ast.Assign) and _reads_attr(stmt.value, t):
                    # state kept on the module and fed back into the next call (self.h = cell(x, self.h))
                    acarry: tuple[Site, str, Site, object] = (Site.of(stmt), self.text(t), Site.of(stmt.value),
                                                              "attribute")
                    v = v.with_(prov=frozenset((o, s_, c or acarry) for (o, s_, c) in v.prov))
                obj.attrs[t.attr] = v
        elif isinstance(t, ast.Subscript):
            base = self.ev(t.value, st, fr)
            self.ev_nograd(t.slice, st, fr)
            if isinstance(base, T) and not base.maybe_tensor:
                info = self.kb.get("operator.setitem")
                tgt = self.text(t.value)
                extra = (("target_span", Site.of(t)), ("base_span", Site.of(t.value)))
                self.mutate(base, st, form="setitem", node=t, op="item assignment", target=tgt, extra=extra)
                if info is not None and not st.no_grad:
                    rg = {"self": base.rg >= MAYBE, "value": isinstance(v, T) and v.rg >= MAYBE}
                    for a in info.saved_args(rg):
                        if a == "value" and isinstance(v, T):
                            self.save(v, st, SaveRecord("item assignment", "the assigned value", Site.of(stmt),
                                                        info.name))
            elif isinstance(base, Seq) and isinstance(t.value, ast.Name):
                st.env[t.value.id] = join(base, Seq(None, v, base.kind)) if base.items is None else \
                    Seq(base.items, join(base.elem, v), base.kind)
        elif isinstance(t, ast.Starred):
            self.assign(t.value, v, st, fr, stmt)

    def s_Delete(self, s: ast.Delete, st: State, fr: Frame) -> State:
        for t in s.targets:
            if isinstance(t, ast.Name):
                st.env.pop(t.id, None)
        return st

    def s_Return(self, s: ast.Return, st: State, fr: Frame) -> None:
        v = self.ev(s.value, st, fr) if s.value is not None else NONE
        fr.returns.append((v, st))
        return None

    def s_Raise(self, s: ast.Raise, st: State, fr: Frame) -> None:
        if s.exc is not None:
            self.ev(s.exc, st, fr)
        return None

    def s_Break(self, s: ast.Break, st: State, fr: Frame) -> None:
        if fr.loops:
            fr.loops[-1].breaks.append(st)
        return None

    def s_Continue(self, s: ast.Continue, st: State, fr: Frame) -> None:
        if fr.loops:
            fr.loops[-1].continues.append(st)
        return None

    def s_Assert(self, s: ast.Assert, st: State, fr: Frame) -> State:
        self.ev(s.test, st, fr)
        return st

    def s_Global(self, s: ast.stmt, st: State, fr: Frame) -> State:
        return st

    s_Nonlocal = s_Global

    def s_Import(self, s: ast.Import, st: State, fr: Frame) -> State:
        for a in s.names:
            if a.asname:
                st.env[a.asname] = Ref(a.name)
            else:
                top = a.name.split(".")[0]
                st.env[top] = Ref(top)
        return st

    def s_ImportFrom(self, s: ast.ImportFrom, st: State, fr: Frame) -> State:
        mod = s.module or ""
        if s.level:
            for a in s.names:
                st.env[a.asname or a.name] = UNKNOWN
            return st
        for a in s.names:
            if a.name == "*":
                continue
            st.env[a.asname or a.name] = Ref(f"{mod}.{a.name}" if mod else a.name)
        return st

    def s_FunctionDef(self, s: ast.FunctionDef | ast.AsyncFunctionDef, st: State, fr: Frame) -> State:
        fi = FuncInfo(s, s.name, cls=None, closure=dict(st.env) if fr.func is not None else None)
        for d in s.decorator_list:
            q = self.qual_of(d.func if isinstance(d, ast.Call) else d, st, fr)
            if q in NO_GRAD_CTX:
                fi.no_grad = True
        st.env[s.name] = Func(fi)
        if fr.func is None and fr.depth == 0:
            self.functions.append(fi)
        return st

    s_AsyncFunctionDef = s_FunctionDef

    def s_ClassDef(self, s: ast.ClassDef, st: State, fr: Frame) -> State:
        ci = ClassInfo(s, s.name, bases=[self.ev(b, st, fr) for b in s.bases])
        for b in s.body:
            if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fi = FuncInfo(b, f"{s.name}.{b.name}", cls=ci)
                for d in b.decorator_list:
                    dn = d.id if isinstance(d, ast.Name) else (d.attr if isinstance(d, ast.Attribute) else "")
                    if dn == "staticmethod":
                        fi.is_static = True
                    elif dn == "classmethod":
                        fi.is_classmethod = True
                    q = self.qual_of(d.func if isinstance(d, ast.Call) else d, st, fr)
                    if q in NO_GRAD_CTX:
                        fi.no_grad = True
                ci.methods[b.name] = fi
                if fr.depth == 0 and fr.func is None:
                    self.functions.append(fi)
            elif isinstance(b, ast.Assign):
                for t in b.targets:
                    if isinstance(t, ast.Name):
                        ci.attrs[t.id] = self.const_of(b.value) if isinstance(b.value, ast.Constant) else UNKNOWN
        st.env[s.name] = ClassV(ci)
        self.classes.append(ci)
        return st

    def s_If(self, s: ast.If, st: State, fr: Frame) -> State | None:
        test = self.ev(s.test, st, fr)
        if _is_true(test):
            return self.exec_block(s.body, st, fr)
        if _is_false(test) or (isinstance(test, Const) and test.known and test.value is None):
            return self.exec_block(s.orelse, st, fr)
        a = self.exec_block(s.body, st.branch(), fr)
        b = self.exec_block(s.orelse, st, fr) if s.orelse else st
        return join_states(a, b)

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While, st: State, fr: Frame, bind: Any) -> State | None:
        carried = self.loop_carried.get(id(node))
        if carried is None:
            carried = _carried_names(node.body)
            self.loop_carried[id(node)] = carried
        loop = Loop(carried, node)
        fr.loops.append(loop)
        self.active_loops.append(node)
        try:
            entry = st.branch()
            cur: State | None = entry
            exits: State | None = st
            for _ in range(2):
                if cur is None:
                    break
                body_in = cur.branch()
                bind(body_in)
                out = self.exec_block(node.body, body_in, fr)
                for c in loop.continues:
                    out = join_states(out, c)
                loop.continues.clear()
                exits = join_states(exits, out)
                cur = out  # the next iteration sees this one's state
        finally:
            fr.loops.pop()
            self.active_loops.pop()
        for b in loop.breaks:
            exits = join_states(exits, b)
        if node.orelse and exits is not None:
            exits = self.exec_block(node.orelse, exits, fr)
        return exits

    def s_For(self, s: ast.For | ast.AsyncFor, st: State, fr: Frame) -> State | None:
        it = self.ev(s.iter, st, fr)
        el = self.elem(it, s.iter)

        def bind(state: State) -> None:
            self.assign(s.target, el, state, fr, s)

        return self._loop(s, st, fr, bind)

    s_AsyncFor = s_For

    def s_While(self, s: ast.While, st: State, fr: Frame) -> State | None:
        self.ev(s.test, st, fr)
        return self._loop(s, st, fr, lambda state: self.ev(s.test, state, fr))

    def s_With(self, s: ast.With | ast.AsyncWith, st: State, fr: Frame) -> State | None:
        saved_flags = (st.no_grad, st.autocast, st.allow_mutation)
        for item in s.items:
            q = self.qual_of(item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr,
                             st, fr)
            if q in NO_GRAD_CTX:
                st.no_grad = True
            elif q in ENABLE_GRAD_CTX:
                st.no_grad = False
            elif q == "torch.set_grad_enabled" and isinstance(item.context_expr, ast.Call) and item.context_expr.args:
                flag = self.ev(item.context_expr.args[0], st, fr)
                if _is_false(flag):
                    st.no_grad = True
                elif _is_true(flag):
                    st.no_grad = False
            elif q in AUTOCAST_CTX:
                enabled = next((k.value for k in item.context_expr.keywords if k.arg == "enabled"), None) \
                    if isinstance(item.context_expr, ast.Call) else None
                if enabled is None or not (isinstance(enabled, ast.Constant) and enabled.value is False):
                    st.autocast = True
            elif q in ALLOW_MUT_CTX:
                st.allow_mutation = True
            else:
                v = self.ev(item.context_expr, st, fr)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, UNKNOWN if not isinstance(v, T) else v, st, fr, s)
        out = self.exec_block(s.body, st, fr)
        if out is not None:
            out.no_grad, out.autocast, out.allow_mutation = saved_flags
        # paths that returned inside keep their flags only for their own returns
        return out

    s_AsyncWith = s_With

    def s_Try(self, s: ast.Try, st: State, fr: Frame) -> State | None:
        start = st.branch()
        body = self.exec_block(s.body, st, fr)
        if body is not None and s.orelse:
            body = self.exec_block(s.orelse, body, fr)
        out = body
        for h in s.handlers:
            hs = join_states(start.branch(), body.branch() if body is not None else None)
            if hs is None:
                continue
            if h.name:
                hs.env[h.name] = UNKNOWN
            out = join_states(out, self.exec_block(h.body, hs, fr))
        if s.finalbody:
            if out is None:
                self.exec_block(s.finalbody, start.branch(), fr)
                return None
            out = self.exec_block(s.finalbody, out, fr)
        return out

    s_TryStar = s_Try

    def s_Match(self, s: Any, st: State, fr: Frame) -> State | None:
        self.ev(s.subject, st, fr)
        out: State | None = None
        for case in s.cases:
            out = join_states(out, self.exec_block(case.body, st.branch(), fr))
        return join_states(out, st)

    # ------------------------------------------------------------------ names & refs
    def lookup(self, name: str, st: State, fr: Frame) -> Val:
        v = st.env.get(name)
        if v is not None:
            return v
        if fr.func is not None and fr.func.closure is not None:
            v = fr.func.closure.get(name)
            if v is not None:
                return v
        v = self.globals.get(name)
        if v is not None:
            return v
        return Ref("builtins." + name)

    def qual_of(self, node: ast.expr, st: State, fr: Frame) -> str:
        """Qualified name of a dotted expression without side effects ('' when not an import reference)."""
        if isinstance(node, ast.Name):
            v = self.lookup(node.id, st, fr)
            return v.qual if isinstance(v, Ref) else ""
        if isinstance(node, ast.Attribute):
            base = self.qual_of(node.value, st, fr)
            return f"{base}.{node.attr}" if base else ""
        return ""

    def canon(self, qual: str) -> str:
        """Map aliases of torch names onto the table's names (torch.nn.modules.activation.ReLU -> torch.nn.ReLU)."""
        if qual in self.kb:
            return qual
        if qual.startswith("torch.nn.modules.") or qual.startswith("torch.nn.functional."):
            cand = "torch.nn." + qual.rsplit(".", 1)[-1]
            if cand in self.kb:
                return cand
        if qual.startswith("torch.functional."):
            cand = "torch." + qual.rsplit(".", 1)[-1]
            if cand in self.kb:
                return cand
        if qual.startswith("torch.Tensor."):
            cand = "Tensor." + qual[len("torch.Tensor."):]
            if cand in self.kb:
                return cand
        if qual.startswith("torch.special.") or qual.startswith("torch.linalg."):
            return qual
        return qual

    # ------------------------------------------------------------------ expressions
    def ev(self, node: ast.expr | None, st: State, fr: Frame) -> Val:
        if node is None:
            return NONE
        m = getattr(self, "e_" + node.__class__.__name__, None)
        if m is None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.ev(child, st, fr)
            return UNKNOWN
        return m(node, st, fr)  # type: ignore[no-any-return]

    def e_Constant(self, n: ast.Constant, st: State, fr: Frame) -> Val:
        return Const(n.value)

    def e_Name(self, n: ast.Name, st: State, fr: Frame) -> Val:
        return self.lookup(n.id, st, fr)

    def e_Tuple(self, n: ast.Tuple | ast.List | ast.Set, st: State, fr: Frame) -> Val:
        items: list[Val] = []
        unknown_len = False
        for e in n.elts:
            if isinstance(e, ast.Starred):
                v = self.ev(e.value, st, fr)
                if isinstance(v, Seq) and v.items is not None:
                    items.extend(v.items)
                else:
                    unknown_len = True
                    items.append(self.elem(v, e))
            else:
                items.append(self.ev(e, st, fr))
        kind = "tuple" if isinstance(n, ast.Tuple) else "list"
        s = Seq.of(items, kind)
        return Seq(None, s.elem, kind) if unknown_len else s

    e_List = e_Tuple
    e_Set = e_Tuple

    def e_Dict(self, n: ast.Dict, st: State, fr: Frame) -> Val:
        if len(n.keys) > 8:  # configuration tables: nothing autograd-relevant, costly to interpret
            return UNKNOWN
        vals = []
        for k, v in zip(n.keys, n.values):
            if k is not None:
                self.ev(k, st, fr)
            vals.append(self.ev(v, st, fr))
        return Seq.of(vals, "dict")

    def e_JoinedStr(self, n: ast.JoinedStr, st: State, fr: Frame) -> Val:
        for v in n.values:
            self.ev(v, st, fr)
        return Const("", known=False)

    def e_FormattedValue(self, n: ast.FormattedValue, st: State, fr: Frame) -> Val:
        self.ev(n.value, st, fr)
        return UNKNOWN_NUM

    def e_Starred(self, n: ast.Starred, st: State, fr: Frame) -> Val:
        return self.ev(n.value, st, fr)

    def e_NamedExpr(self, n: ast.NamedExpr, st: State, fr: Frame) -> Val:
        v = self.ev(n.value, st, fr)
        if isinstance(n.target, ast.Name):
            st.env[n.target.id] = v
        return v

    def e_Lambda(self, n: ast.Lambda, st: State, fr: Frame) -> Val:
        return Func(FuncInfo(n, "<lambda>", closure=dict(st.env)))

    def e_IfExp(self, n: ast.IfExp, st: State, fr: Frame) -> Val:
        test = self.ev(n.test, st, fr)
        if _is_true(test):
            return self.ev(n.body, st, fr)
        if _is_false(test):
            return self.ev(n.orelse, st, fr)
        return join(self.ev(n.body, st, fr), self.ev(n.orelse, st, fr))

    def e_BoolOp(self, n: ast.BoolOp, st: State, fr: Frame) -> Val:
        out: Val | None = None
        for v in n.values:
            x = self.ev(v, st, fr)
            out = x if out is None else join(out, x)
        return out or UNKNOWN

    def ev_nograd(self, node: ast.expr, st: State, fr: Frame) -> Val:
        """Evaluate what only feeds a comparison or an index: no gradient flows back through it, so what its ops
        save is never unpacked by backward."""
        flag = st.no_grad
        st.no_grad = True
        try:
            return self.ev(node, st, fr)
        finally:
            st.no_grad = flag

    def e_Compare(self, n: ast.Compare, st: State, fr: Frame) -> Val:
        vals = [self.ev_nograd(n.left, st, fr), *(self.ev_nograd(c, st, fr) for c in n.comparators)]
        if any(isinstance(v, T) for v in vals):
            return fresh("comparison", rg=NO)
        return UNKNOWN_NUM

    def e_UnaryOp(self, n: ast.UnaryOp, st: State, fr: Frame) -> Val:
        v = self.ev(n.operand, st, fr)
        if isinstance(v, T):
            name = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert", ast.Not: "not_"}.get(type(n.op), "neg")
            if isinstance(n.op, ast.Not):
                return UNKNOWN_NUM
            info = self.kb.get(f"operator.{name}")
            if info is not None:
                return self.apply(info, [v], {}, n, st, fr, display=f"unary {name}")
            return self.new_tensor([v], st, "neg")
        if isinstance(v, Const) and v.known and isinstance(n.op, ast.Not):
            return Const(not v.value)
        if isinstance(v, Const) and v.known and isinstance(n.op, ast.USub) and isinstance(v.value, (int, float)):
            return Const(-v.value)
        return UNKNOWN_NUM

    def e_BinOp(self, n: ast.BinOp, st: State, fr: Frame) -> Val:
        a = self.ev(n.left, st, fr)
        b = self.ev(n.right, st, fr)
        return self.binop(a, b, n.op, n, st, fr)

    def binop(self, a: Val, b: Val, op: ast.operator, n: ast.AST, st: State, fr: Frame) -> Val:
        def real(v: Val) -> bool:
            return isinstance(v, T) and not v.maybe_tensor

        if isinstance(a, Seq) and isinstance(op, (ast.Mult, ast.Add)) and not real(b):
            pass  # list arithmetic ([x] * n, a + b), below
        elif isinstance(b, Seq) and isinstance(op, ast.Mult) and not real(a):
            return Seq(None, b.elem, b.kind)  # n * [x]
        elif isinstance(a, T) or isinstance(b, T):
            name = BINOPS.get(type(op), "add")
            info = self.kb.get(f"operator.{name}")
            if info is not None:
                return self.apply(info, [a, b], {}, n, st, fr, display=OPSYM.get(type(op), name))
            return self.new_tensor([a, b], st, name)
        if isinstance(a, Params) and isinstance(b, Params):
            return Params(a.owners | b.owners)
        if isinstance(a, Seq) and isinstance(b, Seq) and isinstance(op, ast.Add):
            if a.items is not None and b.items is not None:
                return Seq.of(a.items + b.items, a.kind)
            return Seq(None, join(a.elem, b.elem), a.kind)
        if isinstance(a, Seq) and isinstance(op, ast.Mult):
            return Seq(None, a.elem, a.kind)  # [x] * n
        if isinstance(a, Const) and isinstance(b, Const) and a.known and b.known:
            try:
                return Const(_fold(op, a.value, b.value))
            except Exception:
                return UNKNOWN_NUM
        return UNKNOWN_NUM

    def e_Subscript(self, n: ast.Subscript, st: State, fr: Frame) -> Val:
        base = self.ev(n.value, st, fr)
        idx = self.ev_nograd(n.slice, st, fr) if not isinstance(n.slice, ast.Constant) else Const(n.slice.value)
        if isinstance(base, T) and base.maybe_tensor:
            return fresh("element", rg=base.rg, maybe_tensor=True)
        if isinstance(base, T):
            if self._advanced_index(n.slice, idx):
                out = self.new_tensor([base], st, "index")
                return out
            view = "multi" if base.view == "multi" else ("nograd" if st.no_grad and base.rg >= MAYBE else (
                "nograd" if base.view == "nograd" else "view"))
            return T(base.storages, rg=NO if st.no_grad else base.rg, leaf=base.leaf, view=view,
                     view_op=base.view_op or "indexing", maybe_tensor=base.maybe_tensor, prov=base.prov,
                     alias_of=base.alias_of, alias_site=base.alias_site, origin="indexing")
        if isinstance(base, Seq):
            if base.items is not None and isinstance(idx, Const) and idx.known and isinstance(idx.value, int):
                try:
                    return base.items[idx.value]
                except IndexError:
                    return base.elem
            if isinstance(n.slice, ast.Slice):
                if base.items is not None and all(
                        x is None or isinstance(x, ast.Constant) for x in (n.slice.lower, n.slice.upper, n.slice.step)):
                    lo = n.slice.lower.value if isinstance(n.slice.lower, ast.Constant) else None
                    hi = n.slice.upper.value if isinstance(n.slice.upper, ast.Constant) else None
                    sp = n.slice.step.value if isinstance(n.slice.step, ast.Constant) else None
                    try:
                        return Seq.of(base.items[lo:hi:sp], base.kind)  # type: ignore[misc,index]
                    except (TypeError, ValueError):
                        pass
                return Seq(None, base.elem, base.kind)
            return base.elem
        if isinstance(base, Alt):
            return seq_elem(base)
        if isinstance(base, Obj) and base.kind in ("sequential", "modulelist", "moduledict"):
            if isinstance(n.slice, ast.Slice):
                o = Obj("sequential", "torch.nn.Sequential")
                o.entries = Seq(None, seq_elem(base.entries))
                return o
            ents = base.entries
            if isinstance(ents, Seq) and ents.items is not None and isinstance(idx, Const) and idx.known \
                    and isinstance(idx.value, int):
                try:
                    return ents.items[idx.value]
                except IndexError:
                    pass
            return seq_elem(ents)
        return UNKNOWN

    def _advanced_index(self, sl: ast.expr, idx: Val) -> bool:
        if isinstance(idx, T):
            return True
        if isinstance(sl, (ast.List, ast.ListComp)):
            return True
        if isinstance(sl, ast.Tuple):
            return any(isinstance(e, (ast.List, ast.ListComp)) for e in sl.elts) or \
                (isinstance(idx, Seq) and idx.items is not None and any(isinstance(x, T) for x in idx.items))
        return False

    def e_Slice(self, n: ast.Slice, st: State, fr: Frame) -> Val:
        for x in (n.lower, n.upper, n.step):
            if x is not None:
                self.ev(x, st, fr)
        return UNKNOWN_NUM

    def e_Attribute(self, n: ast.Attribute, st: State, fr: Frame) -> Val:
        base = self.ev(n.value, st, fr)
        return self.getattr(base, n.attr, n, st)

    def getattr(self, base: Val, attr: str, n: ast.AST | None, st: State) -> Val:
        if isinstance(base, Ref):
            return Ref(f"{base.qual}.{attr}")
        if isinstance(base, T):
            if attr == "data":
                return fresh("`.data`", rg=NO)
            if attr in ("T", "mT", "H", "mH", "real", "imag"):
                info = self.kb.get(f"Tensor.{attr}") or self.kb.get("Tensor.t")
                return T(base.storages, rg=base.rg, leaf=base.leaf,
                         view="multi" if base.view == "multi" else "view", view_op=attr, prov=base.prov) \
                    if info is not None or attr in ("T", "mT") else UNKNOWN
            if attr in ("grad",):
                return fresh("`.grad`", rg=NO)
            if attr in ("shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "is_cuda"):
                return UNKNOWN_NUM
            return Method(base, attr, n)
        if isinstance(base, Obj):
            if attr in base.attrs:
                return base.attrs[attr]
            if base.kind == "torch":
                if attr in ("weight", "bias") or attr.startswith("weight_") or attr.startswith("bias_"):
                    return self.module_param(base, attr)
                if attr == "training":
                    return Const(base.training is not False) if base.training is not None else UNKNOWN_NUM
                return Method(base, attr, n)
            if base.kind == "local" and base.info is not None:
                if attr == "training":
                    return Const(base.training) if base.training is not None else UNKNOWN_NUM
                fi = base.info.find_method(attr)
                if fi is not None:
                    if isinstance(fi.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                            (isinstance(d, ast.Name) and d.id == "property") for d in fi.node.decorator_list):
                        return self.call_func(fi, [base], {}, st, Frame(None, 1), n)
                    if fi.is_static:
                        return Func(fi)
                    if fi.is_classmethod:
                        return Bound(ClassV(base.info), fi)
                    return Bound(base, fi)
                ca = base.info.class_attr(attr)
                if ca is not None:
                    return ca
                if attr in ("weight", "bias") and base.info.torch_bases():
                    return self.module_param(base, attr)
            return Method(base, attr, n)
        if isinstance(base, ClassV):
            fi = base.info.find_method(attr)
            if fi is not None:
                return Bound(base, fi) if fi.is_classmethod else Func(fi)
            ca = base.info.class_attr(attr)
            if ca is not None:
                return ca
            return Method(base, attr, n)
        if isinstance(base, Super):
            return Method(base, attr, n)
        if isinstance(base, (Seq, Alt, Params)):
            return Method(base, attr, n)
        return UNKNOWN

    def module_param(self, obj: Obj, name: str) -> T:
        p = obj.params.get(name)
        if p is None:
            label = f"`{obj.qual.rsplit('.', 1)[-1]}.{name}`" if obj.qual else f"`{name}`"
            s = Storage(f"{label} is a parameter", obj.ctor, leaf=True, param_of=obj)
            p = T(frozenset({s}), rg=YES, leaf=True, origin=name)
            obj.params[name] = p
        return p

    # comprehensions ---------------------------------------------------------
    def _comp(self, n: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, st: State, fr: Frame,
              elt: ast.expr) -> Val:
        inner = State(dict(st.env), st.heap, st.no_grad, st.autocast, st.allow_mutation)
        for g in n.generators:
            it = self.ev(g.iter, inner, fr)
            self.assign(g.target, self.elem(it, g.iter), inner, fr, self.cur_stmt or ast.Pass())
            for cond in g.ifs:
                self.ev(cond, inner, fr)
        v = self.ev(elt, inner, fr)
        st.heap = inner.heap
        return Seq(None, v, "list")

    def e_ListComp(self, n: ast.ListComp, st: State, fr: Frame) -> Val:
        return self._comp(n, st, fr, n.elt)

    e_SetComp = e_ListComp
    e_GeneratorExp = e_ListComp

    def e_DictComp(self, n: ast.DictComp, st: State, fr: Frame) -> Val:
        self._comp(n, st, fr, n.key)
        return UNKNOWN

    def e_Await(self, n: ast.Await, st: State, fr: Frame) -> Val:
        self.ev(n.value, st, fr)
        return UNKNOWN

    e_Yield = e_Await
    e_YieldFrom = e_Await

    # iteration ----------------------------------------------------------------
    def elem(self, v: Val, node: ast.AST | None) -> Val:
        if isinstance(v, T):
            if v.maybe_tuple:
                return T(frozenset({Storage("element")}), rg=v.rg, prov=v.prov, maybe_tuple=True, origin="element")
            if v.maybe_tensor:
                return fresh("element", rg=v.rg, maybe_tensor=True)
            return T(v.storages, rg=v.rg, leaf=v.leaf, view="multi", view_op="iterating a tensor (unbind)",
                     prov=v.prov, origin="iteration")
        if isinstance(v, (Seq, Alt)):
            return seq_elem(v)
        if isinstance(v, Obj) and v.kind in ("sequential", "modulelist", "moduledict"):
            return seq_elem(v.entries)
        if isinstance(v, Params):
            return self.params_elem(v)
        return UNKNOWN

    def params_elem(self, p: Params) -> T:
        storages = set()
        for o in p.owners:
            if isinstance(o, Storage):
                storages.add(o)
            elif isinstance(o, Obj):
                storages.add(Storage("a parameter from `.parameters()`", None, leaf=True, param_of=o))
        if not storages:
            storages.add(Storage("a parameter", None, leaf=True))
        return T(frozenset(storages), rg=YES, leaf=True, origin="parameter")

    # ------------------------------------------------------------------ calls
    def e_Call(self, n: ast.Call, st: State, fr: Frame) -> Val:
        if isinstance(n.func, ast.Attribute):
            if n.func.attr in _NONDIFF_METHODS and not n.args:
                # x.item(), x.tolist(), x.numpy(): the value leaves autograd; what computed x never reaches a loss
                self.ev_nograd(n.func.value, st, fr)
                return UNKNOWN_NUM
            recv = self.ev(n.func.value, st, fr)
            fv = self.getattr(recv, n.func.attr, n.func, st)
        else:
            fv = self.ev(n.func, st, fr)
            if isinstance(fv, Ref) and fv.qual in _NONDIFF_BUILTINS:
                for a in n.args:
                    self.ev_nograd(a.value if isinstance(a, ast.Starred) else a, st, fr)
                for k in n.keywords:
                    self.ev_nograd(k.value, st, fr)
                return self.call_builtin(fv.qual[9:], [], {}, n, st, fr) if fv.qual != "builtins.print" else NONE
        pos: list[Val] = []
        for a in n.args:
            if isinstance(a, ast.Starred):
                v = self.ev(a.value, st, fr)
                if isinstance(v, Seq) and v.items is not None:
                    pos.extend(v.items)
                elif isinstance(v, Alt):
                    pos.append(Seq(None, v, "staralt"))  # alternatives, expanded by container constructors
                else:
                    pos.append(Seq(None, self.elem(v, a), "star"))
            else:
                pos.append(self.ev(a, st, fr))
        kw: dict[str, Val] = {}
        for k in n.keywords:
            v = self.ev(k.value, st, fr)
            if k.arg is not None:
                kw[k.arg] = v
        return self.call(fv, pos, kw, n, st, fr)

    def call(self, fv: Val, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame) -> Val:
        if isinstance(fv, Ref):
            return self.call_ref(self.canon(fv.qual), fv.qual, pos, kw, n, st, fr)
        if isinstance(fv, Method):
            return self.call_method(fv, pos, kw, n, st, fr)
        if isinstance(fv, Func):
            return self.call_func(fv.info, pos, kw, st, fr, n)
        if isinstance(fv, Bound):
            return self.call_func(fv.func, [fv.obj, *pos], kw, st, fr, n)
        if isinstance(fv, ClassV):
            return self.instantiate(fv.info, pos, kw, n, st, fr)
        if isinstance(fv, Obj):
            return self.call_obj(fv, pos, kw, n, st, fr, in_seq=None)
        self._out_kw(kw, n, st, "call")
        return UNKNOWN

    def _out_kw(self, kw: dict[str, Val], n: ast.Call, st: State, op: str) -> Val | None:
        out = kw.get("out")
        if isinstance(out, T):
            kwnode = next((k for k in n.keywords if k.arg == "out"), None)
            tgt = self.text(kwnode.value) if kwnode else "out"
            self.mutate(out, st, form="out", node=n, op=op, target=tgt,
                        extra=(("out_kw_span", Site.of(kwnode) if kwnode else Site.of(n)), ("call_span", Site.of(n)),
                               ("standalone", self._standalone(n))))
            return out
        return None

    def _standalone(self, n: ast.AST) -> bool:
        s = self.cur_stmt
        return isinstance(s, ast.Expr) and s.value is n

    def call_ref(self, qual: str, raw: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                 fr: Frame) -> Val:
        kb = self.kb
        if raw.startswith("builtins."):
            return self.call_builtin(raw[9:], pos, kw, n, st, fr)
        if qual in PARAMETER:
            rg = NO if _is_false(kw.get("requires_grad", pos[1] if len(pos) > 1 else None)) else YES
            return T(frozenset({Storage("an nn.Parameter", Site.of(n), leaf=rg == YES)}), rg=rg, leaf=rg == YES,
                     origin="nn.Parameter")
        if qual in CONTAINER_MODULES:
            o = Obj(CONTAINER_MODULES[qual], qual)
            o.training = True
            o.ctor = Site.of(n)
            o.entries = self._entries(pos)
            return o
        if qual.startswith("torch.optim.") and qual.rsplit(".", 1)[-1][:1].isupper() \
                and ".lr_scheduler" not in qual:
            o = Obj("optimizer", qual)
            params = kw.get("params", pos[0] if pos else UNKNOWN)
            o.cfg["owners"] = Params(self.owners_of(params))
            return o
        if qual in ("torch.autograd.backward",):
            if pos:
                self.backward(pos[0], kw, n, st)
            return NONE
        if qual in ("torch.autograd.grad",):
            if pos:
                self.backward(pos[0], {"retain_graph": kw.get("retain_graph", Const(False))}, n, st)
            return Seq(None, fresh("grad", rg=NO), "tuple")
        if qual in NO_GRAD_CTX or qual in AUTOCAST_CTX or qual in ENABLE_GRAD_CTX:
            return UNKNOWN
        info = kb.get(qual)
        if info is not None:
            if info.kind == "module":
                return self.construct_module(info, pos, kw, n)
            return self.apply(info, pos, kw, n, st, fr, display=raw.rsplit(".", 1)[-1])
        out = self._out_kw(kw, n, st, raw.rsplit(".", 1)[-1])
        if out is not None:
            return out
        if qual.startswith("torch.") and not qual.startswith("torch.nn.") and qual.rsplit(".", 1)[-1][:1].islower():
            rg = YES if _is_true(kw.get("requires_grad")) else NO
            if rg == YES:
                return T(frozenset({Storage(f"created with requires_grad=True ({raw.rsplit('.', 1)[-1]})",
                                            Site.of(n), leaf=True)}), rg=YES, leaf=True, origin=raw)
            real = [v for v in (*pos, *kw.values()) if not (isinstance(v, T) and v.maybe_tensor)]
            return self.new_tensor(real, st, raw.rsplit(".", 1)[-1], min_rg=rg)
        return UNKNOWN

    def _entries(self, pos: list[Val]) -> Val:
        """Entries of nn.Sequential(*args) / ModuleList(list): a Seq, or Alt when lists were built differently."""
        if len(pos) == 1 and isinstance(pos[0], (Seq, Alt)) and not (
                isinstance(pos[0], Seq) and pos[0].kind in ("star", "staralt")):
            return pos[0]
        alts: list[tuple[Val, ...]] = [()]
        unknown = False
        for p in pos:
            if isinstance(p, Seq) and p.kind == "staralt" and isinstance(p.elem, Alt):
                alts = [a + tuple(sq.items or (sq.elem,)) for a in alts for sq in p.elem.alts][:8]
            elif isinstance(p, Seq) and p.kind == "star":
                unknown = True
                alts = [(*a, p.elem) for a in alts]
            else:
                alts = [(*a, p) for a in alts]
        seqs = [Seq.of(a) for a in alts]
        if unknown:
            return Seq(None, seqs[0].elem)
        if len(seqs) == 1:
            return seqs[0]
        return Alt(tuple(seqs)) if len(seqs) <= 6 else Seq(None, seqs[0].elem)

    def owners_of(self, v: Val) -> frozenset[Any]:
        if isinstance(v, Params):
            return v.owners
        if isinstance(v, T):
            return frozenset(s for s in v.storages if s.leaf)
        if isinstance(v, Seq):
            out: set[Any] = set()
            for x in (v.items or (v.elem,)):
                out |= self.owners_of(x)
            return frozenset(out)
        if isinstance(v, Obj):
            return self.reach(v)
        return frozenset()

    def reach(self, obj: Obj) -> frozenset[Any]:
        out: set[Any] = set()
        stack: list[Val] = [obj]
        while stack:
            o = stack.pop()
            if isinstance(o, Obj):
                if o in out:
                    continue
                out.add(o)
                for p in o.params.values():
                    out |= {s for s in p.storages}
                for a in o.attrs.values():
                    stack.append(a)
                ents = o.entries
                if isinstance(ents, Seq):
                    stack.extend(ents.items or (ents.elem,))
                elif isinstance(ents, Alt):
                    for s in ents.alts:
                        stack.extend(s.items or (s.elem,))
            elif isinstance(o, T):
                out |= {s for s in o.storages if s.leaf}
            elif isinstance(o, Seq):
                stack.extend(o.items or (o.elem,))
        return frozenset(out)

    def call_builtin(self, name: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                     fr: Frame) -> Val:
        if name == "range":
            return Seq(None, UNKNOWN_NUM)
        if name == "isinstance" and len(pos) == 2:
            return self.isinstance(pos[0], pos[1])
        if name in ("len", "isinstance", "hasattr", "int", "float", "bool", "str", "print", "id", "type", "abs",
                    "round", "repr", "callable", "issubclass", "hash", "format"):
            return UNKNOWN_NUM
        if name == "enumerate" and pos:
            return Seq(None, Seq.of([UNKNOWN_NUM, self.elem(pos[0], n)], "tuple"))
        if name == "zip":
            return Seq(None, Seq.of([self.elem(p, n) for p in pos], "tuple"))
        if name in ("list", "tuple", "reversed", "sorted", "iter", "set"):
            if not pos:
                return Seq((), UNKNOWN, "list" if name != "tuple" else "tuple")
            v = pos[0]
            if isinstance(v, Params):
                return v
            if isinstance(v, Seq):
                return v if name in ("list", "tuple") else Seq(None, v.elem, v.kind)
            if isinstance(v, Alt):
                return v
            return Seq(None, self.elem(v, n))
        if name == "super":
            obj = fr.self_obj
            if obj is None and fr.func is not None:
                obj = None
            return Super(obj or UNKNOWN, fr.cls)
        if name == "getattr" and len(pos) >= 2 and isinstance(pos[1], Const) and isinstance(pos[1].value, str):
            return self.getattr(pos[0], pos[1].value, n, st)
        if name in ("sum", "min", "max") and pos:
            el = self.elem(pos[0], n) if len(pos) == 1 else join(pos[0], pos[1])
            if isinstance(el, T):
                return self.new_tensor([el], st, name).with_(maybe_tensor=el.maybe_tensor)
            return UNKNOWN_NUM
        if name == "next" and pos:
            return self.elem(pos[0], n)
        if name == "map" and len(pos) >= 2:
            return Seq(None, UNKNOWN)
        return UNKNOWN

    def isinstance(self, v: Val, cls: Val) -> Val:
        classes = list(cls.items) if isinstance(cls, Seq) and cls.items is not None else [cls]
        answers = []
        for c in classes:
            if isinstance(c, Ref):
                q = self.canon(c.qual)
                if isinstance(v, T) and q in ("torch.Tensor", "Tensor"):
                    answers.append(True)
                elif isinstance(v, Obj) and v.kind == "torch" and v.qual:
                    cinfo = self.kb.get(q)
                    if q == v.qual:
                        answers.append(True)
                    elif cinfo is not None and cinfo.kind == "module":
                        answers.append(False)  # two different concrete torch modules
                    else:
                        return UNKNOWN_NUM
                elif isinstance(v, Obj) and v.kind == "local" and q == "torch.nn.Module":
                    answers.append(True)
                else:
                    return UNKNOWN_NUM
            elif isinstance(c, ClassV) and isinstance(v, Obj):
                if v.info is not None:
                    answers.append(c.info in v.info.mro())
                elif v.kind == "torch":
                    answers.append(False)
                else:
                    return UNKNOWN_NUM
            else:
                return UNKNOWN_NUM
        return Const(any(answers))

    def new_tensor(self, inputs: list[Val], st: State, desc: str, min_rg: int = NO) -> T:
        rg = min_rg
        prov: frozenset[Any] = frozenset()
        for v in inputs:
            if isinstance(v, T):
                rg = max(rg, v.rg)
                prov |= v.prov
            else:
                r, p = _tensor_facts(v, real_only=True)  # a list of Python numbers is not a graph
                if r:
                    rg = max(rg, MAYBE)
                prov |= p
        if st.no_grad:
            rg, prov = NO, frozenset()
        return T(frozenset({Storage(desc)}), rg=rg, prov=prov, origin=desc)

    # apply a knowledge entry ----------------------------------------------------
    def bind(self, info: OpInfo, pos: list[Val], kw: dict[str, Val]) -> dict[str, Val]:
        names = info.args if info.kind == "module" else (info.params or info.args)
        bound: dict[str, Val] = {}
        for i, v in enumerate(pos):
            if i < len(names):
                bound[names[i]] = v
        for k, v in kw.items():
            bound[k] = v
        return bound

    def apply(self, info: OpInfo, pos: list[Val], kw: dict[str, Val], n: ast.AST, st: State, fr: Frame, *,
              display: str, form: str = "", target_text: str = "", extra: tuple[tuple[str, Any], ...] = (),
              module: Obj | None = None, in_seq: Obj | None = None, receiver_node: ast.AST | None = None) -> Val:
        kb = self.kb
        bound = self.bind(info, pos, kw)
        if "dim" in bound or (info.kind in ("function", "method") and len(pos) >= (3 if info.kind == "method" else 2)
                              and not isinstance(pos[-1], T)):
            short = info.name.split(".", 1)[1] if info.name.startswith("Tensor.") else None
            var = kb.get(f"{info.name}[dim]") or (kb.get(f"torch.{short}[dim]") if short else None)
            if var is not None:
                info = var
                bound = self.bind(info, pos, kw)
        # inplace=True on a functional: switch to its in-place variant
        if info.inplace_kwarg and module is None and _is_true(bound.get(info.inplace_kwarg)):
            var = kb.get(f"{info.name}[{info.inplace_kwarg}=True]")
            if var is not None:
                kwnode = next((k for k in getattr(n, "keywords", []) if k.arg == info.inplace_kwarg), None)
                kwsite = Site.of(kwnode) if kwnode is not None else Site.of(n)
                extra = (*extra, ("kw_span", kwsite), ("ctor_span", Site.of(n)), ("positional", kwnode is None))
                form = form or "inplace_kwarg"
                display = f"{display}(inplace=True)"
                info = var
                bound = self.bind(info, pos, kw)
        for arg, (wsaves, wout) in info.when_number.items():
            if arg in bound and not isinstance(bound[arg], T):
                info = dataclasses.replace(info, saves=wsaves, saves_output=wout)
        if info.train_only:
            drop_p = bound.get("p", module.cfg.get("p") if module is not None else None)
            if isinstance(drop_p, Const) and drop_p.known and drop_p.value == 0:
                return self._first_tensor(info, bound)
            training = bound.get("training")
            if module is not None:
                if module.training is False:
                    return self._first_tensor(info, bound)
            elif _is_false(training) or (training is None and info.train_kwarg_default is False):
                return self._first_tensor(info, bound)
        if module is not None:
            for a in info.saves:
                if a.startswith("self."):
                    bound.setdefault(a, self.module_param(module, a[5:]))
            for conds in info.saves.values():
                for c in conds:
                    if c.startswith("self."):
                        bound.setdefault(c, self.module_param(module, c[5:]))
        rgmap: dict[str, bool] = {}
        prov: frozenset[Any] = frozenset()
        only_maybe = False
        if info.kind == "operator":
            # An unknown value (a parameter of a plain function) in arithmetic is as likely a Python number as a
            # tensor: it proves nothing, requires no grad and is not saved, unless every operand is unknown.
            ts = [v for v in bound.values() if isinstance(v, T)]
            only_maybe = bool(ts) and all(v.maybe_tensor for v in ts)
            if not only_maybe:
                bound = {k: (UNKNOWN_NUM if isinstance(v, T) and v.maybe_tensor and k not in info.mutates else v)
                         for k, v in bound.items()}
        for name, v in bound.items():
            r, pr = _tensor_facts(v)
            rgmap[name] = r
            prov |= pr
        any_rg = any(rgmap.values())
        grad_on = not st.no_grad and not info.no_grad
        if module is not None and grad_on:
            prov = prov | {(module, self.stamp, None)}
        # 1. in-place writes
        mutated: T | None = None
        for m in info.mutates:
            mv = bound.get(m)
            if isinstance(mv, T):
                tgt = target_text or self._arg_text(n, info, m, receiver_node)
                f = form or ("method" if info.kind == "method" else "function")
                ex = extra
                if f == "method" and isinstance(n, ast.Call):
                    ex = (*ex, ("receiver_span", Site.of(receiver_node) if receiver_node is not None else Site.of(n)),
                          ("call_span", Site.of(n)), ("out_of_place", (info.out_of_place or "").rsplit(".", 1)[-1] or None),
                          ("standalone", self._standalone(n)))
                elif f == "function" and isinstance(n, ast.Call):
                    argnode = self._arg_node(n, info, m)
                    ex = (*ex, ("func_text", self.text(n.func)),
                          ("out_of_place_func", info.out_of_place.replace("Tensor.", "torch.") if info.out_of_place else None),
                          ("arg_span", Site.of(argnode) if argnode is not None else Site.of(n)),
                          ("call_span", Site.of(n)), ("standalone", self._standalone(n)))
                site = None
                related: tuple[tuple[Site, str], ...] = ()
                if in_seq is not None and module is not None and module.ctor is not None:
                    site = module.ctor
                    f = "module_entry"
                    ex = (*ex, ("kw_span", module.kw_site or module.ctor), ("ctor_span", module.ctor),
                          ("positional", module.positional))
                elif module is not None:
                    f = "module_call"
                    ex = (*ex, ("kw_span", module.kw_site or module.ctor), ("ctor_span", module.ctor),
                          ("positional", module.positional))
                    if module.ctor is not None:
                        related = ((module.ctor, f"{display} was created with inplace=True here"),)
                self.mutate(mv, st, form=f, node=n, op=display, target=tgt, extra=ex, no_grad_op=info.no_grad,
                            site=site, related=related)
                if mutated is None:
                    mutated = mv
        out_t = self._out_kw(kw, n, st, display) if isinstance(n, ast.Call) else None
        # 2. saves
        site = Site.of(n)
        if module is not None and in_seq is not None and module.ctor is not None:
            site = module.ctor
        if grad_on and any_rg:
            for a in info.saved_args(rgmap):
                for sv in _tensors_in(bound.get(a)):
                    if info.kind == "operator" and sv.maybe_tensor:
                        continue
                    if st.autocast and a in info.autocast_casts:
                        continue
                    if a.startswith("self."):
                        what = f"its {a[5:]}"
                    else:
                        argtext = self._arg_text(n, info, a, receiver_node) if in_seq is None else ""
                        what = f"its input `{argtext}`" if argtext and len(argtext) <= 40 else "its input"
                    self.save(sv, st, SaveRecord(display, what, site, info.name))
                    if sv.leaf:
                        prov |= {(s, self.stamp, None) for s in sv.storages if s.leaf}
        # 3. the result
        out_rg = YES if any_rg and grad_on else NO
        if mutated is not None:
            res: Val = mutated.with_(rg=max(mutated.rg, out_rg) if grad_on else mutated.rg, prov=mutated.prov | prov)
        elif out_t is not None:
            res = out_t
        elif (view_arg := info.view_of or (info.args[0] if info.multi_output_view and info.args else None)) \
                and isinstance(bound.get(view_arg), T):
            base = bound[view_arg]
            assert isinstance(base, T)
            if info.name in ("Tensor.detach", "torch.detach"):
                return T(base.storages, rg=NO, origin="detach")
            if info.multi_output_view:
                view = "multi"
            elif st.no_grad and base.rg >= MAYBE:
                view = "nograd"
            elif base.view in ("multi", "nograd"):
                view = base.view
            else:
                view = "view"
            vt = T(base.storages, rg=out_rg if grad_on else NO, leaf=base.leaf, view=view,
                   view_op=f"{display}()" if info.multi_output_view else base.view_op or display,
                   prov=prov, alias_of=base.alias_of, alias_site=base.alias_site, origin=display)
            if info.multi_output_view:
                return Seq(None, vt, "tuple")
            res = vt
        else:
            # Ops that return tuples (topk, sort, max(dim), LSTM): unpacking yields their outputs, not views.
            if only_maybe:
                out_rg = max((v.rg for v in bound.values() if isinstance(v, T)), default=NO)
            res = T(frozenset({Storage(display)}), rg=out_rg, prov=prov, origin=display,
                    maybe_tuple=info.returns_tuple, maybe_tensor=only_maybe)
            if only_maybe:
                return res
        if grad_on and any_rg and info.saves_output and info.output_saved(rgmap) and isinstance(res, T):
            self.save(res, st, SaveRecord(display, "its output", site, info.name))
        return res

    def _first_tensor(self, info: OpInfo, bound: dict[str, Val]) -> Val:
        for a in info.args:
            v = bound.get(a)
            if isinstance(v, T):
                return v
        return UNKNOWN

    def _arg_node(self, n: ast.AST, info: OpInfo, name: str) -> ast.expr | None:
        if not isinstance(n, ast.Call):
            return None
        for k in n.keywords:
            if k.arg == name:
                return k.value
        names = list(info.args if info.kind == "module" else (info.params or info.args))
        if info.kind == "method":
            if name == "self" and isinstance(n.func, ast.Attribute):
                return n.func.value
            names = names[1:] if names and names[0] == "self" else names
        if name in names:
            i = names.index(name)
            if i < len(n.args) and not isinstance(n.args[i], ast.Starred):
                return n.args[i]
        return None

    def _arg_text(self, n: ast.AST, info: OpInfo, name: str, receiver_node: ast.AST | None) -> str:
        if name == "self" and receiver_node is not None:
            return self.text(receiver_node)
        if isinstance(n, ast.BinOp):
            return self.text(n.left if name == (info.args[0] if info.args else "self") else n.right)
        if isinstance(n, ast.AugAssign):
            return self.text(n.target)
        node = self._arg_node(n, info, name)
        return self.text(node) if node is not None else ""

    # method calls -------------------------------------------------------------------
    def call_method(self, m: Method, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame) -> Val:
        recv, name = m.recv, m.name
        recv_node = n.func.value if isinstance(n.func, ast.Attribute) else None
        if isinstance(recv, T):
            if name == "backward":
                self.backward(recv, kw, n, st)
                return NONE
            if name == "detach":
                return T(recv.storages, rg=NO, origin="detach")
            if name == "requires_grad_":
                flag = pos[0] if pos else kw.get("requires_grad", Const(True))
                if _is_false(flag):
                    return recv.with_(rg=NO, leaf=False)
                leaf = recv.view is None and not recv.prov
                storages = frozenset(Storage(f"made a leaf with requires_grad_() ({s.desc})", s.site, leaf=leaf)
                                     for s in recv.storages) if leaf else recv.storages
                return recv.with_(rg=YES, leaf=leaf, storages=storages)
            if name in ("size", "dim", "numel", "item", "tolist", "stride", "data_ptr", "element_size", "nelement",
                        "is_contiguous", "get_device", "numpy"):
                return UNKNOWN_NUM
            info = self.kb.get(f"Tensor.{name}")
            if info is not None:
                return self.apply(info, [recv, *pos], kw, n, st, fr, display=name, receiver_node=recv_node)
            out = self._out_kw(kw, n, st, name)
            return out if out is not None else UNKNOWN
        if isinstance(recv, Obj):
            return self.obj_method(recv, name, pos, kw, n, st, fr)
        if isinstance(recv, Super):
            return self.super_method(recv, name, pos, kw, n, st, fr)
        if isinstance(recv, ClassV):
            if name == "apply" and self._is_function_class(recv.info):
                return self.autograd_apply(recv.info, pos, kw, n, st, fr)
            return UNKNOWN
        if isinstance(recv, Seq) and name in ("append", "extend", "insert") and isinstance(n.func, ast.Attribute):
            new: Val
            if name == "append" and pos:
                new = Seq.of((*recv.items, pos[0]), recv.kind) if recv.items is not None else \
                    Seq(None, join(recv.elem, pos[0]), recv.kind)
            elif name == "extend" and pos:
                other = pos[0]
                if isinstance(other, Seq) and other.items is not None and recv.items is not None:
                    new = Seq.of((*recv.items, *other.items), recv.kind)
                else:
                    new = Seq(None, join(recv.elem, self.elem(other, n)), recv.kind)
            else:
                new = Seq(None, join(recv.elem, pos[-1]) if pos else recv.elem, recv.kind)
            self._rebind(n.func.value, new, st, fr)
            return NONE
        if isinstance(recv, Alt) and name in ("append", "extend") and isinstance(n.func, ast.Attribute) and pos:
            alts = []
            for s in recv.alts:
                if name == "append":
                    alts.append(Seq.of((*(s.items or ()), pos[0]), s.kind))
                else:
                    other = pos[0]
                    alts.append(Seq.of((*(s.items or ()), *(other.items or ())), s.kind)
                                if isinstance(other, Seq) and other.items is not None else Seq(None, s.elem))
            nv: Val = alts[0]
            for a in alts[1:]:
                nv = join(nv, a)
            self._rebind(n.func.value, nv, st, fr)
            return NONE
        if isinstance(recv, Seq) and name == "pop":
            return recv.elem
        if isinstance(recv, (Seq, Alt)) and name in ("index", "count"):
            return UNKNOWN_NUM
        if isinstance(recv, Ref):
            return UNKNOWN
        return UNKNOWN

    def _rebind(self, target: ast.expr, v: Val, st: State, fr: Frame) -> None:
        if isinstance(target, ast.Name):
            st.env[target.id] = v
        elif isinstance(target, ast.Attribute):
            obj = self.ev(target.value, st, fr)
            if isinstance(obj, Obj):
                obj.attrs[target.attr] = v

    def obj_method(self, o: Obj, name: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                   fr: Frame) -> Val:
        if o.kind == "optimizer":
            if name == "step" and not st.allow_mutation:  # allow_mutation_on_saved_tensors keeps copies
                owners = o.cfg.get("owners")
                own = owners.owners if isinstance(owners, Params) else frozenset()
                stmt = self.stmt_site()
                st.heap.steps = (*st.heap.steps, StepEvent(self.stamp, own, Site.of(n), stmt,
                                                           f"{self.text(n.func)}()"))
            return NONE
        if o.kind == "ctx":
            if name == "save_for_backward":
                o.attrs.setdefault("__saved__", Seq((), UNKNOWN))
                cur = o.attrs["__saved__"]
                o.attrs["__saved__"] = Seq.of((*(cur.items or ()), *pos)) if isinstance(cur, Seq) else Seq.of(pos)
                return NONE
            return UNKNOWN
        if name in ("eval", "train"):
            flag = True if name == "train" else False
            if name == "train" and pos and isinstance(pos[0], Const) and pos[0].known:
                flag = bool(pos[0].value)
            for x in self.reach(o):
                if isinstance(x, Obj):
                    x.training = flag
            return o
        if name in ("parameters", "named_parameters", "modules", "children"):
            return Params(self.reach(o)) if name == "parameters" else Seq(None, UNKNOWN)
        if name in ("to", "cuda", "cpu", "float", "double", "half", "bfloat16", "requires_grad_", "type"):
            return o
        if name == "forward":
            return self.call_obj(o, pos, kw, n, st, fr, in_seq=None)
        if name == "register_buffer" and len(pos) >= 2 and isinstance(pos[0], Const):
            o.attrs[str(pos[0].value)] = pos[1]
            return NONE
        if name == "register_parameter" and len(pos) >= 2 and isinstance(pos[0], Const):
            o.attrs[str(pos[0].value)] = pos[1]
            return NONE
        if name == "add_module" and len(pos) >= 2 and isinstance(pos[0], Const):
            o.attrs[str(pos[0].value)] = pos[1]
            if o.kind == "sequential":
                ents = o.entries
                if isinstance(ents, Seq) and ents.items is not None:
                    o.entries = Seq.of((*ents.items, pos[1]))
            return NONE
        if o.kind in ("sequential", "modulelist") and name in ("append", "extend", "insert") and pos:
            ents = o.entries
            if name == "append" and isinstance(ents, Seq) and ents.items is not None:
                o.entries = Seq.of((*ents.items, pos[0]))
            elif name == "extend" and isinstance(ents, Seq) and ents.items is not None and isinstance(pos[0], Seq) \
                    and pos[0].items is not None:
                o.entries = Seq.of((*ents.items, *pos[0].items))
            else:
                o.entries = Seq(None, join(seq_elem(ents), self.elem(pos[-1], n)))
            return NONE
        if o.kind == "local" and o.info is not None:
            fi = o.info.find_method(name)
            if fi is not None:
                return self.call_func(fi, [o, *pos], kw, st, fr, n)
            if o.info.torch_bases() and name in ("zero_grad", "apply", "load_state_dict", "state_dict"):
                return UNKNOWN
        if name in ("zero_grad", "apply", "load_state_dict", "state_dict", "named_modules", "register_forward_hook"):
            return UNKNOWN
        return UNKNOWN

    def super_method(self, sup: Super, name: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                     fr: Frame) -> Val:
        obj = sup.obj
        cls = sup.cls
        if cls is None or not isinstance(obj, Obj):
            return UNKNOWN
        # the next class in the MRO that defines it
        mro = cls.mro()
        for c in mro[1:]:
            if name in c.methods:
                return self.call_func(c.methods[name], [obj, *pos], kw, st, fr, n)
        tb = cls.torch_bases()
        if name == "__init__":
            if "torch.nn.Sequential" in tb:
                obj.entries = self._entries(pos)
                obj.kind = "local"
            else:
                self.init_torch_base(obj, cls, pos, kw, n)
            return NONE
        if name == "forward":
            tbase = self.torch_base(cls)
            if tbase is not None:
                return self.call_torch_base(obj, *tbase, pos, kw, n, st, fr)
            if "torch.nn.Sequential" in tb and pos:
                return self.run_sequential(obj, pos[0], n, st, fr)
        return UNKNOWN

    # modules -----------------------------------------------------------------------
    def construct_module(self, info: OpInfo, pos: list[Val], kw: dict[str, Val], n: ast.AST) -> Obj:
        o = Obj("torch", info.name)
        o.training = True
        o.ctor = Site.of(n)
        if info.inplace_kwarg:
            params = list(info.params)
            flag: Val | None = kw.get(info.inplace_kwarg)
            kwnode = next((k for k in getattr(n, "keywords", []) if k.arg == info.inplace_kwarg), None)
            if flag is not None and kwnode is not None:
                o.kw_site = Site.of(kwnode)
            elif info.inplace_kwarg in params:
                i = params.index(info.inplace_kwarg)
                if i < len(pos) and isinstance(n, ast.Call) and i < len(n.args):
                    flag = pos[i]
                    o.kw_site = Site.of(n.args[i])
                    o.positional = True
            o.inplace = _is_true(flag)
        bound = dict(zip(info.params, pos))
        bound.update(kw)
        o.cfg = bound
        return o

    def call_obj(self, o: Obj, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame,
                 in_seq: Obj | None) -> Val:
        if o.kind == "torch":
            info = self.kb.get(o.qual)
            if info is None:
                return self.new_tensor(pos, st, o.qual, min_rg=YES).with_(maybe_tuple=True)
            if o.inplace and info.inplace_kwarg:
                info = self.kb.get(f"{info.name}[{info.inplace_kwarg}=True]") or info
            short = o.qual.rsplit(".", 1)[-1]
            display = f"{short}(inplace=True)" if o.inplace else short
            return self.apply(info, pos, kw, n, st, fr, display=display, module=o, in_seq=in_seq)
        if o.kind in ("sequential",):
            if not pos:
                return UNKNOWN
            return self.run_sequential(o, pos[0], n, st, fr)
        if o.kind == "local" and o.info is not None:
            fwd = o.info.find_method("forward")
            if fwd is not None:
                res = self.call_func(fwd, [o, *pos], kw, st, fr, n)
                if isinstance(res, T) and not st.no_grad:
                    res = res.with_(prov=res.prov | {(o, self.stamp, None)})
                return res
            tb = o.info.torch_bases()
            if "torch.nn.Sequential" in tb and pos:
                return self.run_sequential(o, pos[0], n, st, fr)
            tbase = self.torch_base(o.info)
            if tbase is not None:
                return self.call_torch_base(o, *tbase, pos, kw, n, st, fr, in_seq=in_seq)
        return UNKNOWN

    def run_sequential(self, o: Obj, x: Val, n: ast.Call, st: State, fr: Frame) -> Val:
        ents = o.entries
        alts = ents.alts if isinstance(ents, Alt) else (ents,) if isinstance(ents, Seq) else ()
        if not alts:
            return UNKNOWN
        results: list[tuple[Val, Heap]] = []
        base_heap = st.heap
        for s in alts:
            st.heap = base_heap.copy() if len(alts) > 1 else base_heap
            cur = x
            items = s.items if s.items is not None else (s.elem, s.elem)
            for m in items:
                if isinstance(m, Seq) and m.kind == "tuple" and m.items and len(m.items) == 2:  # OrderedDict pairs
                    m = m.items[1]
                if isinstance(m, Obj):
                    cur = self.call_obj(m, [cur], {}, n, st, fr, in_seq=o if m.kind == "torch" else None)
                elif isinstance(m, (Func, Bound)):
                    cur = self.call(m, [cur], {}, n, st, fr)
                else:
                    cur = self.new_tensor([cur], st, "module", min_rg=MAYBE) if isinstance(cur, T) else UNKNOWN
            results.append((cur, st.heap))
        if len(results) == 1:
            return results[0][0]
        heap = results[0][1]
        out = results[0][0]
        for v, h in results[1:]:
            heap = heap.join(h)
            out = join(out, v)
        st.heap = heap
        return out

    def instantiate(self, ci: ClassInfo, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                    fr: Frame) -> Val:
        if self._is_function_class(ci):
            return UNKNOWN
        tb = ci.torch_bases()
        o = Obj("local", ci.name, ci)
        o.training = True
        o.ctor = Site.of(n)
        init = ci.find_method("__init__")
        if init is not None:
            self.call_func(init, [o, *pos], kw, st, fr, n)
        elif "torch.nn.Sequential" in tb:
            o.entries = self._entries(pos)
        else:
            self.init_torch_base(o, ci, pos, kw, n)
        return o

    # subclasses of torch modules (class MyConv(nn.Conv3d)) ------------------------------------------------
    def torch_base(self, cls: ClassInfo) -> tuple[str, OpInfo] | None:
        for b in cls.torch_bases():
            info = self.kb.get(self.canon(b))
            if info is not None:
                return b, info
        return None

    def init_torch_base(self, obj: Obj, cls: ClassInfo, pos: list[Val], kw: dict[str, Val], n: ast.AST) -> None:
        """The torch base's constructor: remember its in-place flag."""
        tbase = self.torch_base(cls)
        if tbase is not None:
            m = self.construct_module(tbase[1], pos, kw, n)
            obj.inplace, obj.kw_site, obj.positional = m.inplace, m.kw_site, m.positional

    def call_torch_base(self, obj: Obj, base: str, info: OpInfo, pos: list[Val], kw: dict[str, Val], n: ast.Call,
                        st: State, fr: Frame, in_seq: Obj | None = None) -> Val:
        if obj.inplace and info.inplace_kwarg:
            info = self.kb.get(f"{info.name}[{info.inplace_kwarg}=True]") or info
        return self.apply(info, pos, kw, n, st, fr, display=base.rsplit(".", 1)[-1], module=obj, in_seq=in_seq)

    def _is_function_class(self, ci: ClassInfo) -> bool:
        return any(b in FUNCTION_BASES for b in ci.torch_bases())

    def autograd_apply(self, ci: ClassInfo, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                       fr: Frame) -> Val:
        fwd = ci.find_method("forward")
        if fwd is None:
            return UNKNOWN
        ctx = Obj("ctx")
        saved_flag = st.no_grad
        st.no_grad = True
        try:
            res = self.call_func(fwd, [ctx, *pos], kw, st, fr, n)
        finally:
            st.no_grad = saved_flag
        rg = YES if any(isinstance(v, T) and v.rg >= MAYBE for v in pos) and not st.no_grad else NO
        prov: frozenset[Any] = frozenset()
        for v in pos:
            if isinstance(v, T):
                prov |= v.prov

        def fix(v: Val) -> Val:
            if isinstance(v, T):
                return v.with_(rg=rg, prov=prov, view=None, leaf=False)
            if isinstance(v, Seq) and v.items is not None:
                return Seq.of([fix(x) for x in v.items], v.kind)
            return v

        res = fix(res)
        saved = ctx.attrs.get("__saved__")
        if rg and isinstance(saved, Seq):
            display = f"{ci.name}.apply"
            for v in saved.items or ():
                if isinstance(v, T):
                    self.save(v, st, SaveRecord(display, "a tensor via ctx.save_for_backward", Site.of(n),
                                                f"{ci.name}.forward"))
        return res

    # local functions -------------------------------------------------------------------
    def call_func(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
                  n: ast.AST | None) -> Val:
        if fi in self.active or fr.depth >= MAX_DEPTH:
            return UNKNOWN
        return self.inline(fi, pos, kw, st, fr)

    def inline(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
               defaults_only: bool = False) -> Val:
        node = fi.node
        a = node.args
        env: dict[str, Val] = {}
        params = [*a.posonlyargs, *a.args]
        defaults = self._defaults(fi)
        i = 0
        for p in params:
            if i < len(pos):
                env[p.arg] = pos[i]
                i += 1
            elif p.arg in kw:
                env[p.arg] = kw[p.arg]
            else:
                env[p.arg] = defaults.get(p.arg, UNKNOWN)
        if a.vararg:
            rest = pos[i:]
            env[a.vararg.arg] = Seq.of(rest, "tuple")
        for p in a.kwonlyargs:
            env[p.arg] = kw.get(p.arg, defaults.get(p.arg, UNKNOWN))
        if a.kwarg:
            env[a.kwarg.arg] = UNKNOWN
        self_obj = pos[0] if fi.cls is not None and pos and not fi.is_static else None
        first_sid = Storage("marker").sid
        callee = State(env, st.heap, st.no_grad or fi.no_grad or self.ng_only(fi), st.autocast,
                       st.allow_mutation)
        cfr = Frame(fi, fr.depth + 1, self_obj)
        self.active.append(fi)
        saved_stmt = self.cur_stmt
        try:
            if isinstance(node, ast.Lambda):
                return self.ev(node.body, callee, cfr)
            end = self.exec_block(node.body, callee, cfr)
        except Budget:
            raise
        finally:
            self.active.pop()
            self.cur_stmt = saved_stmt
        paths: list[tuple[Val, Heap]] = [(v, rs.heap) for v, rs in cfr.returns]
        if end is not None:
            paths.append((NONE, end.heap))
        if not paths:
            return UNKNOWN
        result: Val = paths[0][0]
        for v, _h in paths[1:]:
            result = NONE if result is NONE and v is NONE else (v if result is NONE else result if v is NONE
                                                                 else join(result, v))
        if len(paths) == 1:
            st.heap = paths[0][1]
            return result
        returned = [_storages_of(v) for v, _h in paths]
        any_returned: set[Storage] = set().union(*returned)
        heap: Heap | None = None
        for (_v, h), mine in zip(paths, returned):
            trimmed = Heap({s: r for s, r in h.saved.items()
                            if s.sid <= first_sid or s in mine or s not in any_returned}, h.steps, h.freed)
            heap = trimmed if heap is None else heap.join(trimmed)
        assert heap is not None
        st.heap = heap
        return result

    # backward -------------------------------------------------------------------------
    def backward(self, y: Val, kw: dict[str, Val], n: ast.AST, st: State) -> None:
        if not isinstance(y, T):
            return
        heap = st.heap
        retain = _is_true(kw.get("retain_graph")) or _is_true(kw.get("create_graph"))
        for owner, stamp, carry in sorted(y.prov, key=lambda p: (p[1], p[2] is None)):
            if (owner, stamp) in heap.freed:
                continue
            ev = next((e for e in heap.steps if owner in e.owners and e.stamp > stamp), None)
            if ev is None:
                continue
            bw_stmt = self.stmt_site()
            if carry is not None and (carry[3] in self.active_loops or (carry[3] == "attribute" and self.active_loops)):
                csite, cname, vsite, _loop = carry
                # The in-place op is the step; the fix (.detach()) goes where the state is carried.
                self.report(Hazard("carry", "carry", ev.site, ev.stmt, ev.op, cname,
                                   related=((csite, f"`{cname}` carries the previous iteration's graph here"),
                                            (bw_stmt, "backward reaches the previous iteration's graph here")),
                                   extra=(("value_span", vsite), ("carry_stmt_span", csite),
                                          ("step_line", ev.site.line), ("backward_line", bw_stmt.line))))
            else:
                self.report(Hazard("step", "step", ev.site, ev.stmt, ev.op, "",
                                   related=((bw_stmt, "this backward goes through the graph built before the step"),),
                                   extra=(("step_stmt_span", ev.stmt), ("backward_line", bw_stmt.line),
                                          ("backward_stmt_span", bw_stmt))))
            break
        if not retain:
            heap.freed = heap.freed | {(o, s) for (o, s, _c) in y.prov}
            heap.saved = {}


_NG_NAMES = ("no_grad", "inference_mode")
_NONDIFF_METHODS = ("item", "tolist", "numpy")
_NONDIFF_BUILTINS = ("builtins.print", "builtins.float", "builtins.int", "builtins.bool", "builtins.str",
                     "builtins.format", "builtins.repr")
_GRAPH_MARKERS = (".backward(", "requires_grad", "Parameter(", "torch.optim", "autograd", "nn.Module", "forward(")
_INT_NAME = re.compile(r"(^|_)(ids|labels?|mask|masks|indices|index|idx|positions?)$")


_DEF_RE = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")
_WITH_NG_RE = re.compile(r"^(\s*)(?:async\s+)?with\b.*\b(?:no_grad|inference_mode|set_grad_enabled\(\s*False)")
_DECO_NG_RE = re.compile(r"^\s*@.*\b(?:no_grad|inference_mode)\b")
_WORD_RE = re.compile(r"[A-Za-z_]\w*")
_STR_RE = re.compile(r"([\'\"])(?:\\.|(?!\1).)*\1")


def _no_grad_only(lines: list[str]) -> set[int]:
    """Functions (by the line of their ``def``) only ever referenced from no_grad code: they run under no_grad.

    A function is no-grad-only when it is decorated with no_grad, or when every reference to its name in the
    file (a call, or passing it around) sits inside a ``with torch.no_grad()`` block or inside another
    no-grad-only function. Optimizer helpers (``_single_tensor_adamw``) and reparameterisation code qualify.
    Works on the text (indentation delimits blocks): a fraction of the cost of walking the tree.
    """
    defs: dict[str, list[int]] = {}
    decorated: set[int] = set()
    fn_of: list[int] = [0] * (len(lines) + 2)  # innermost enclosing def line of each line (0: module level)
    ng_of: list[bool] = [False] * (len(lines) + 2)
    stack: list[tuple[int, str, int]] = []  # (indent, kind, def line) of open blocks
    deco_ng = False
    depth = 0  # open brackets: continuation lines (a multi-line signature's closing `):`) are not blocks
    for no, text in enumerate(lines, 1):
        stripped = text.lstrip()
        cont = depth > 0
        if stripped and not stripped.startswith("#"):
            code = _STR_RE.sub("''", stripped).split("#", 1)[0]
            depth = max(0, depth + sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}"))
        if cont or not stripped or stripped.startswith("#"):
            fn_of[no] = next((d for _i, k, d in reversed(stack) if k == "def"), 0)
            ng_of[no] = any(k == "ng" for _i, k, _d in stack)
            continue
        indent = len(text) - len(stripped)
        while stack and indent <= stack[-1][0]:
            stack.pop()
        fn_of[no] = next((d for _i, k, d in reversed(stack) if k == "def"), 0)
        ng_of[no] = any(k == "ng" for _i, k, _d in stack)
        if stripped.startswith("@"):
            deco_ng = deco_ng or bool(_DECO_NG_RE.match(text))
            continue
        m = _DEF_RE.match(text)
        if m:
            defs.setdefault(m.group(2), []).append(no)
            if deco_ng:
                decorated.add(no)
            stack.append((indent, "def", no))
        elif _WITH_NG_RE.match(text):
            stack.append((indent, "ng", 0))
        deco_ng = False
    refs: dict[str, list[tuple[bool, int]]] = {}
    in_doc = ""
    for no, text in enumerate(lines, 1):
        code = text
        if in_doc:  # inside a triple-quoted string: skip up to its end
            end = code.find(in_doc)
            if end < 0:
                continue
            code, in_doc = code[end + 3:], ""
        for q in ('"""', "'''"):
            while q in code:
                a = code.find(q)
                b = code.find(q, a + 3)
                if b < 0:
                    code, in_doc = code[:a], q
                    break
                code = code[:a] + code[b + 3:]
        code = _STR_RE.sub("''", code).split("#", 1)[0]
        for w in _WORD_RE.findall(code):
            if w in defs and no not in defs[w]:
                refs.setdefault(w, []).append((ng_of[no], fn_of[no]))
    ng_only: set[int] = set(decorated)
    changed = True
    while changed:
        changed = False
        for name, nodes in defs.items():
            rs = refs.get(name)
            if not rs:
                continue
            if all(ng or (fn and (fn in ng_only or fn in nodes)) for ng, fn in rs) and any(
                    ng or (fn and fn in ng_only and fn not in nodes) for ng, fn in rs):
                for n in nodes:
                    if n not in ng_only:
                        ng_only.add(n)
                        changed = True
    return ng_only


def _annotated_tensor(ann: ast.expr | None) -> bool:
    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        return ann.value.split("[")[0].rsplit(".", 1)[-1] == "Tensor"
    if isinstance(ann, ast.Subscript):  # Optional[Tensor], Union[Tensor, None] (not list[Tensor])
        head = ann.value.attr if isinstance(ann.value, ast.Attribute) else getattr(ann.value, "id", "")
        if head == "Optional":
            return _annotated_tensor(ann.slice)
        if head == "Union" and isinstance(ann.slice, ast.Tuple):
            return any(_annotated_tensor(e) for e in ann.slice.elts)
        return False
    if isinstance(ann, ast.BinOp):  # Tensor | None
        return _annotated_tensor(ann.left) or _annotated_tensor(ann.right)
    name = ann.attr if isinstance(ann, ast.Attribute) else ann.id if isinstance(ann, ast.Name) else ""
    return name == "Tensor"


def _reads_attr(value: ast.expr, target: ast.Attribute) -> bool:
    want = ast.dump(target.value)
    return any(isinstance(x, ast.Attribute) and x.attr == target.attr and ast.dump(x.value) == want
               for x in ast.walk(value))


def _tensors_in(v: Val | None, depth: int = 0) -> list[T]:
    if isinstance(v, T):
        return [v]
    if depth < 2 and isinstance(v, Seq) and v.items is not None:
        out: list[T] = []
        for x in v.items:
            out.extend(_tensors_in(x, depth + 1))
        return out
    return []


def _storages_of(v: Val, depth: int = 0) -> set[Storage]:
    if isinstance(v, T):
        return set(v.storages)
    if depth < 3 and isinstance(v, Seq):
        out: set[Storage] = set()
        for x in (v.items if v.items is not None else (v.elem,)):
            out |= _storages_of(x, depth + 1)
        return out
    return set()


def _tensor_facts(v: Val, depth: int = 0, real_only: bool = False) -> tuple[bool, frozenset[Any]]:
    """(may require grad, provenance) of a value that may be a tensor or a sequence of tensors."""
    if isinstance(v, T):
        if real_only and v.maybe_tensor:
            return False, frozenset()
        return v.rg >= MAYBE, v.prov
    if depth < 3 and isinstance(v, (Seq, Alt)):
        rg = False
        prov: frozenset[Any] = frozenset()
        seqs = v.alts if isinstance(v, Alt) else (v,)
        for s in seqs:
            for x in (s.items if s.items is not None else (s.elem,)):
                r, p = _tensor_facts(x, depth + 1, real_only)
                rg = rg or r
                prov |= p
        return rg, prov
    return False, frozenset()


def _fold(op: ast.operator, a: Any, b: Any) -> Any:
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.Div):
        return a / b
    if isinstance(op, ast.FloorDiv):
        return a // b
    if isinstance(op, ast.Pow):
        return a ** b if abs(b) < 64 else None
    if isinstance(op, ast.Mod):
        return a % b
    return None
