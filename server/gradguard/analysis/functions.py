"""Calls into functions and methods of the analysed code: inlined with the caller's values."""

from __future__ import annotations

import ast
from typing import Any

from gradguard.analysis.common import (
    FLAG_KEYWORDS,
    MAX_DEPTH,
    SMALL_FOREIGN,
    SMALL_FOREIGN_SLACK,
    Budget,
    Frame,
    storages_of,
    tensors_in,
)
from gradguard.analysis.hazards import Site
from gradguard.analysis.state import Heap, State, split_paths
from gradguard.analysis.summaries import Summaries, Summary
from gradguard.analysis.values import (
    NO,
    NONE,
    UNKNOWN,
    UNKNOWN_NUM,
    YES,
    Alt,
    ClassV,
    Const,
    Func,
    FuncInfo,
    Obj,
    Ref,
    Seq,
    Storage,
    T,
    Val,
    boolish,
    choice,
    fresh,
    join_paths,
    next_id,
    recorded,
)


class Functions(Summaries):
    # local functions -------------------------------------------------------------------
    def call_func(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
                  n: ast.AST | None) -> Val:
        got = self._call_func(fi, pos, kw, st, fr, n)
        if got is UNKNOWN and (same := self._typevar_identity(fi)) is not None:
            # `Dropout = basic_unit(nn.Dropout)`, `def basic_unit(cls: T) -> Union[T, Traceable]`: what the body
            # makes of its argument is past following (a class built with `type(...)`), but its signature says it
            # is the argument's kind: the class given
            i, name = same
            arg = pos[i] if i < len(pos) else kw.get(name)
            if isinstance(arg, (ClassV, Ref, Func)):
                return arg
        return got

    def _typevar_identity(self, fi: FuncInfo) -> tuple[int, str] | None:
        """The parameter a function is typed to return (``(cls: T, ...) -> T``, ``Union[T, Traceable]``, ``T |
        None``, with ``T = TypeVar("T")`` in its module): its index and name, else None. Cached on the tree."""
        node = fi.node
        got: Any = getattr(node, "_gg_tv", False)
        if got is not False:
            return got  # type: ignore[no-any-return]
        got = None
        returns = getattr(node, "returns", None)
        if returns is not None:
            names = _annotation_names(returns)
            a = node.args
            params = [*a.posonlyargs, *a.args]
            for i, p in enumerate(params):
                ann = p.annotation
                if isinstance(ann, ast.Name) and ann.id in names and self._is_typevar(fi, ann.id):
                    got = (i, p.arg)
                    break
        node._gg_tv = got  # type: ignore[union-attr]  # cached on the tree, which it describes
        return got  # type: ignore[no-any-return]

    def _is_typevar(self, fi: FuncInfo, name: str) -> bool:
        mod = fi.mod
        src = mod.source if mod is not None else None
        tree = self.tree if mod is None or mod.is_root else (src.tree if src is not None else None)
        for st_ in getattr(tree, "body", ()):
            if isinstance(st_, ast.Assign) and isinstance(st_.value, ast.Call) and any(
                    isinstance(t, ast.Name) and t.id == name for t in st_.targets):
                f = st_.value.func
                return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) == "TypeVar"
        return False

    def _call_func(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
                   n: ast.AST | None) -> Val:
        fed = self.fed_grad_off
        if fed is None or not st.no_grad or fed or not differentiates(fi.node):
            return self._call_func_in(fi, pos, kw, st, fr, n)
        # `total += train_step(x).item()`: only the number is kept, but the call runs as Python runs it, with the
        # grad mode around the expression, and its own backward goes through what it builds
        self.fed_grad_off = None
        st.no_grad = False
        try:
            return self._call_func_in(fi, pos, kw, st, fr, n)
        finally:
            st.no_grad = True
            self.fed_grad_off = fed

    def _call_func_in(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
                      n: ast.AST | None) -> Val:
        self.effects += 1
        caller = fr.func.mod if fr.func is not None else None
        if not (caller is not None and caller.source is not None and caller.source.library):
            # (a def of the code's own that a library calls, `pytree.tree_map(f, updates, nu)`, is given what the
            # library computes, which the analysis rarely knows: it still escapes, and runs on its own too)
            self.called_defs.add(fi.node)
        if self.script_calls is not None:
            # (a call the script makes with grad off, `with torch.no_grad(): evaluate(model, x)`, or while nothing
            # is reported, is not one that shows what the function does when trained: it still runs alone)
            known = not (st.no_grad or self.quiet) and all(
                not (isinstance(v, T) and v.maybe_tensor) and v is not UNKNOWN
                for v in (*pos[1 if fi.cls is not None and not fi.is_static else 0:], *kw.values()))
            self.script_calls[fi.node] = self.script_calls.get(fi.node, True) and known
        if self.shared_recs:
            self.note_call(fi, fr.depth)
        if self.quiet:
            return UNKNOWN
        # (a thin wrapper at the limit is still followed: it takes no level, and what it calls is cut as its caller's
        # calls would be; `super_fn(x, a)` that only returns `SuperSpike.apply(x, a)`)
        too_deep = fr.depth > MAX_DEPTH or (fr.depth == MAX_DEPTH and not thin(fi.node))
        if (fi in self.active and not self._descends(fi, pos)) or too_deep:
            if self.shared_recs:
                self.note_cut(fi, too_deep)
            if too_deep:
                self.cut_at_depth()
            return UNKNOWN
        key = self.call_key(fi, pos, kw, st)
        if key is not None and self.callee_grad_in(fi, pos, fr):
            key = (key, "grad_in")  # (an eval-mode forward whose inference branches autograd records: another run)
        if not self.affordable(fi) and not isinstance(self.summaries.get(key), Summary):
            self.unsummarised()
            return UNKNOWN
        place = self.place_of(fi) if fi.mod is not None and not fi.mod.is_root else None
        if n is not None:
            callee = self.text(n.func) if isinstance(n, ast.Call) else ""
            flag = next((k for k in n.keywords if k.arg in FLAG_KEYWORDS and isinstance(k.value, ast.Constant)
                         and k.value.value is True), None) if isinstance(n, ast.Call) else None
            self.call_chain.append((fi, self.site(n), callee or fi.qual,
                                    self.site(flag) if flag is not None else None, self.stmt_site()))
            local = self.entry is None and self.mod.is_root and (fi.mod is None or fi.mod.is_root)
            if local:
                self.call_stmts.append(self.stmt_site())
            try:
                return self._follow(fi, key, pos, kw, st, fr, n, place)
            finally:
                self.call_chain.pop()
                if local:
                    self.call_stmts.pop()
        return self._follow(fi, key, pos, kw, st, fr, n, place)

    def _descends(self, fi: FuncInfo, pos: list[Val]) -> bool:
        """A recursion that walks down a module tree (`for child in model.children(): add_hooks(child)`): the call is
        given a module that none of the running calls of ``fi`` was given. It is followed, a few levels deep, as
        Python runs it; any other recursion is cut."""
        obj = _first_module(_args(fi, pos))
        if obj is None:
            return False
        runs = [o for f, o in zip(self.active, self.active_objs) if f is fi]
        return len(runs) < MAX_RECURSION and all(o is not None and o is not obj for o in runs)

    def _follow(self, fi: FuncInfo, key: Any, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
                n: ast.AST | None, place: Any) -> Val:
        # The callee's own loops get at least two passes, however deep the caller's loops nest (its summary serves
        # calls from any nest, and a loop that carries a graph into its second pass must run that pass to show it);
        # the nest inside the callee stays bounded by MAX_LOOP_PRODUCT
        product = self.loop_product
        self.loop_product = min(product, 2)
        try:
            return self._follow_in(fi, key, pos, kw, st, fr, n, place)
        finally:
            self.loop_product = product

    def _follow_in(self, fi: FuncInfo, key: Any, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
                   n: ast.AST | None, place: Any) -> Val:
        if self.entry is None and self.mod.is_root and fi.mod is not None and not fi.mod.is_root and n is not None:
            self.entry = (self.site(n), self.stmt_site())
            self.entry_args = _arg_sites(self, n, pos, kw)
            try:
                return self.summarised(key, pos, kw, st, lambda: self.inline(fi, pos, kw, st, fr),  # type: ignore[no-any-return]
                                       place, fr.depth)
            finally:
                self.entry = None
                self.entry_args = ()
        return self.summarised(key, pos, kw, st, lambda: self.inline(fi, pos, kw, st, fr),  # type: ignore[no-any-return]
                               place, fr.depth)

    def callee_grad_in(self, fi: FuncInfo, pos: list[Val], fr: Frame) -> bool:
        """Does autograd record the call even where the callee's own code says it runs for inference (an eval-mode
        branch, see Statements.s_If)? When it is given an input that requires grad (an adversarial attack), or is
        called by a function that differentiates (Grad-CAM's `score = model(img)...; score.backward()`); a module's
        forward calling its parts passes on what it was given."""
        if fr.func is not None and fr.func.cls is not None and self.module_like(fr.func.cls):
            return fr.grad_in
        if fr.func is not None and differentiates(fr.func.node):
            return True
        first = 1 if fi.cls is not None and pos and not fi.is_static else 0
        return any(t.rg == YES and not t.maybe_tensor for v in pos[first:] for t in tensors_in(v))

    def affordable(self, fi: FuncInfo) -> bool:
        """Code of other modules is followed while the budget for it lasts (see common.FOREIGN_PER_FUNCTION)."""
        mod = fi.mod
        if mod is None or mod.is_root:
            return True
        size = body_size(fi.node)
        if self.shared_recs:
            self.note_need(size)
        if self.foreign_used + size <= self.foreign_limit or (
                size <= SMALL_FOREIGN and self.foreign_used + size <= self.foreign_limit + SMALL_FOREIGN_SLACK):
            return True
        if self.shared_recs:
            self.note_cut()
        return False

    def inline(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
               defaults_only: bool = False) -> Val:
        node = fi.node
        a = node.args
        env: dict[str, Val] = {}
        params = [*a.posonlyargs, *a.args]
        defaults = self._defaults(fi)
        widen = defaults_only or "**" in kw  # `**kwargs` passed on: a parameter left out may come from it
        pos, spread = _spread(pos)
        i = 0
        for p in params:
            if i < len(pos):
                env[p.arg] = pos[i]
                i += 1
            elif spread is not None and p.arg not in kw and p.arg not in defaults:
                env[p.arg] = spread  # `f(*pair)` of a sequence whose length is not known: each one an element
            elif p.arg in kw:
                env[p.arg] = kw[p.arg]
            else:
                d = defaults.get(p.arg, UNKNOWN)
                env[p.arg] = widen_default(d, p.annotation, p.arg) if widen else d
                if defaults_only and p.arg not in defaults:
                    # the stand-in instance's constructor argument nobody showed: an unknown value that code may
                    # use as an object (`self.qf = qf` ... `self.qf.parameters()`, `self.qf(obs)`: one object),
                    # or an instance of the module class it is annotated with (`models: list[ControlNet]`)
                    typed = self.annotated_module(p.annotation, fi)
                    env[p.arg] = typed if typed is not None else fresh(p.arg, rg=NO, maybe_tensor=True)
        if a.vararg:
            rest = pos[i:]
            env[a.vararg.arg] = Seq.of(rest, "tuple") if spread is None else Seq(None, choice([*rest, spread]), "tuple")
        for p in a.kwonlyargs:
            if p.arg in kw:
                env[p.arg] = kw[p.arg]
            else:
                d = defaults.get(p.arg, UNKNOWN)
                env[p.arg] = widen_default(d, p.annotation, p.arg) if widen else d
        if a.kwarg:
            # the keywords no parameter took, when the caller showed them all (no `**unknown` of its own)
            taken = {p.arg for p in params[:len(pos)]} | {p.arg for p in (*params[len(pos):], *a.kwonlyargs)
                                                          if p.arg in kw}
            env[a.kwarg.arg] = UNKNOWN if "**" in kw or defaults_only else Seq.keyed(
                {k: v for k, v in kw.items() if k not in taken})
        self_obj = pos[0] if fi.cls is not None and pos and not fi.is_static else None
        if (stub := stub_result(node)) is not None:
            return stub
        first_sid = Storage("marker").sid
        callee = State(env, st.heap, (st.no_grad or fi.no_grad or self.ng_only(fi)) and (
                           not fi.enable_grad or st.inference), st.autocast,
                       st.allow_mutation or self.am_only(fi), st.silent, st.inference or fi.inference, st.packed)
        opened = fi.inference and not st.inference
        cfr = Frame(fi, fr.depth + (0 if thin(node) else 1), self_obj)
        cfr.grad_in = self.callee_grad_in(fi, pos, fr)
        self.active.append(fi)
        self.active_objs.append(_first_module(_args(fi, pos)))
        saved_stmt, saved_mod = self.cur_stmt, self.mod
        if fi.mod is not None:
            self.mod = fi.mod
        try:
            if isinstance(node, ast.Lambda):
                return self.ev(node.body, callee, cfr)
            end = self.exec_body(node, callee, cfr)
        except Budget:
            raise
        finally:
            self.active.pop()
            self.active_objs.pop()
            self.cur_stmt, self.mod = saved_stmt, saved_mod
            if opened:
                self.inference_spans.append((first_sid, next_id()))
        paths: list[tuple[Val, Heap]] = [(v, rs.heap) for v, rs in cfr.returns]
        if end is not None:
            paths.append((NONE, end.heap))
        if not paths:
            return UNKNOWN
        if len(paths) == 1:
            st.heap = paths[0][1]
            return paths[0][0]
        # (each path's value carries only its own path's saves: `if self.se: return x * self.gate(x)` / `else:
        # return x` returns x on the path where the gate's conv did not save it; see state.split_paths)
        vals, alt_saved = split_paths([v for v, _h in paths], [h for _v, h in paths])
        result: Val = vals[0]
        for v in vals[1:]:
            result = NONE if result is NONE and v is NONE else (v if result is NONE else result if v is NONE
                                                                 else join_paths(result, v))
        silent = [rs.silent for _v, rs in cfr.returns] + ([end.silent] if end is not None else [])
        if any(silent) and not all(silent) and all(boolish(v) for v in vals):
            # `if not torch.is_grad_enabled(): return False` / `if x.requires_grad: return True`: while autograd
            # records, what the paths that can run then return
            result = recorded([v for v, quiet in zip(vals, silent) if not quiet])
        returned = [storages_of(v) for v, _h in paths]
        any_returned: set[Storage] = set().union(*returned)
        heap: Heap | None = None
        for (_v, h), mine in zip(paths, returned):
            trimmed = Heap({s: r for s, r in h.saved.items()
                            if s.sid <= first_sid or s in mine or s not in any_returned}, h.steps, h.freed, h.wrote,
                           h.cleared)
            heap = trimmed if heap is None else heap.join(trimmed)
        assert heap is not None
        st.heap = heap.with_saved(alt_saved) if alt_saved else heap
        return result


def differentiates(node: ast.AST) -> bool:
    """Does the function's own body (not the defs inside it) call `.backward()` or `torch.autograd.grad`?"""
    got = getattr(node, "_gg_differentiates", None)
    if got is None:
        got = False
        body = getattr(node, "body", None)
        todo: list[ast.AST] = list(body) if isinstance(body, list) else [body] if isinstance(body, ast.AST) else []
        # (a lambda's body is one expression)
        while todo and not got:
            x = todo.pop()
            if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and (
                    x.func.attr == "backward" or (x.func.attr == "grad" and isinstance(x.func.value, ast.Attribute)
                                                  and x.func.value.attr == "autograd")):
                got = True
            todo.extend(ast.iter_child_nodes(x))
        node._gg_differentiates = got  # type: ignore[attr-defined]
    return bool(got)


def _spread(pos: list[Val]) -> tuple[list[Val], Val | None]:
    """Positional arguments as a callee's parameters receive them. A ``*xs`` whose length is not known
    (``self.reparameterize(*self.encoder(x))``) ends what is known: the arguments before it, and what each later
    parameter may receive, an element of it (or an argument written after it)."""
    for i, v in enumerate(pos):
        if isinstance(v, Seq) and v.kind in ("star", "staralt"):
            if v.kind == "staralt" and isinstance(v.elem, Alt):
                elems = [x for sq in v.elem.alts for x in (sq.items if sq.items is not None else (sq.elem,))]
                if not elems:  # `*()` on every path: it gives no argument
                    rest, spread = _spread(pos[i + 1:])
                    return pos[:i] + rest, spread
            else:
                elems = [v.elem]
            for w in pos[i + 1:]:
                if isinstance(w, Seq) and w.kind in ("star", "staralt"):
                    elems.append(UNKNOWN)
                else:
                    elems.append(w)
            return pos[:i], choice(elems)
    return pos, None


def _annotation_names(ann: ast.expr) -> set[str]:
    """The plain names a return annotation allows: ``T``, ``Union[T, X]``, ``Optional[T]``, ``T | None``."""
    if isinstance(ann, ast.Name):
        return {ann.id}
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _annotation_names(ann.left) | _annotation_names(ann.right)
    if isinstance(ann, ast.Subscript) and _head(ann) in ("Union", "Optional"):
        inner = ann.slice
        return set().union(*(_annotation_names(e) for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner])))
    return set()


def thin(node: ast.AST) -> bool:
    """A wrapper that only passes its call on (``def resnet50(**kw): args = dict(...); return _create(**args, **kw)``):
    at most two statements besides a docstring, none of them compound. Following it costs nothing, so it takes no
    level of the call-depth limit: factories reach the class they build through chains of such wrappers."""
    got: bool | None = getattr(node, "_gg_thin", None)
    if got is None:
        got = False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            got = len(body) <= 2 and all(isinstance(b, (ast.Assign, ast.AnnAssign, ast.Return, ast.Expr))
                                         for b in body)
        node._gg_thin = got  # type: ignore[attr-defined]  # cached on the tree, which it describes
    return got


_ABSTRACT = frozenset({"abstractmethod", "abstractproperty", "abstractclassmethod", "abstractstaticmethod"})
_LISTS = frozenset({"list", "List", "Sequence", "MutableSequence", "Iterable"})
_NUMS = frozenset({"int", "bool", "float"})


def _head(ann: ast.expr) -> str:
    if isinstance(ann, ast.Subscript):
        ann = ann.value
    return ann.attr if isinstance(ann, ast.Attribute) else getattr(ann, "id", "")


def annotated_value(ann: ast.expr | None) -> Val:
    """What a value annotated ``ann`` is, as far as its annotation says: ``List[int]`` a list of numbers,
    ``Tuple[...]`` a tuple, ``int`` a number; anything else unknown."""
    if ann is None:
        return UNKNOWN
    head = _head(ann)
    if head in _NUMS:
        return UNKNOWN_NUM
    if head in _LISTS or head in ("tuple", "Tuple"):
        inner = ann.slice if isinstance(ann, ast.Subscript) else None
        if isinstance(inner, ast.Tuple) and inner.elts:
            inner = inner.elts[0]
        elem = UNKNOWN_NUM if inner is not None and _head(inner) in _NUMS else UNKNOWN
        return Seq(None, elem, "tuple" if head in ("tuple", "Tuple") else "list")
    return UNKNOWN


def stub_result(node: ast.AST) -> Val | None:
    """The value of a call to a method that has no body of its own (a docstring, ``pass``, ``...``) and is
    declared abstract or to return something (``@abstractproperty def angle_dims(self) -> List[int]: pass``):
    its subclasses return it, not the ``None`` its empty body falls through to. None for any other function."""
    got: Any = getattr(node, "_gg_stub", False)
    if got is not False:
        return got  # type: ignore[no-any-return]
    got = None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        empty = all(isinstance(b, ast.Pass) or (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                                                and b.value.value is Ellipsis) for b in body)
        returns = node.returns
        declared = returns is not None and not (isinstance(returns, ast.Constant) and returns.value is None)
        if empty and (declared or any(_head(d) in _ABSTRACT for d in node.decorator_list)):
            got = annotated_value(returns)
    node._gg_stub = got  # type: ignore[attr-defined]  # cached on the tree, which it describes
    return got


def body_size(node: ast.AST) -> int:
    """How many statements a function has (cached on the tree)."""
    n: int | None = getattr(node, "_gg_size", None)
    if n is None:
        n = sum(1 for x in ast.walk(node) if isinstance(x, ast.stmt))
        node._gg_size = n  # type: ignore[attr-defined]
    return n


def widen_default(d: Val, annotation: ast.expr | None = None, name: str = "") -> Val:
    """A parameter whose value the caller did not show (the stand-in ``self`` of a method analysed on its own, or a
    keyword that may come from ``**kwargs``): a flag's default is one possible value, not the only one
    (``residual=False`` may be passed as True), and so is a dropout rate of 0 (``dropout=0.0``: off, a switch like a
    flag), and ``None`` for an argument that may be a tensor (``weight=None``: unannotated, or annotated with
    Tensor). Other defaults (sizes, names, an ``Optional[int]`` None, classes, module instances) are the default
    configuration, and stay."""
    if isinstance(d, Const) and d.known and isinstance(d.value, bool):
        return UNKNOWN_NUM  # a flag: either value is a configuration someone uses
    if isinstance(d, Const) and d.known and type(d.value) in (int, float) and d.value == 0 and "drop" in name.lower():
        return Const(d.value, known=False)  # a dropout rate left off: 0, or any rate someone configures
    if isinstance(d, Const) and d.known and d.value is None and (annotation is None or _mentions_tensor(annotation)):
        return UNKNOWN
    return d


def _mentions_tensor(annotation: ast.expr) -> bool:
    return any((isinstance(x, ast.Name) and x.id == "Tensor") or (isinstance(x, ast.Attribute) and x.attr == "Tensor")
               or (isinstance(x, ast.Constant) and isinstance(x.value, str) and "Tensor" in x.value)
               for x in ast.walk(annotation))


def _arg_sites(an: Any, n: ast.AST, pos: list[Val], kw: dict[str, Val]) -> tuple[tuple[Val, Site], ...]:
    """The values a call passes and where each is written (``update_params(opt, loss_a + loss_b)``; a call on a
    method passes its receiver first, which is not written among the arguments)."""
    if not isinstance(n, ast.Call) or any(isinstance(a, ast.Starred) for a in n.args):
        return ()
    vals = pos[len(pos) - len(n.args):] if len(pos) >= len(n.args) else []
    out = [(v, an.site(a)) for v, a in zip(vals, n.args)]
    out += [(kw[k.arg], an.site(k.value)) for k in n.keywords if k.arg is not None and k.arg in kw]
    return tuple(out)


MAX_RECURSION = 3  # running calls of one function that a walk down a module tree may nest


def _args(fi: FuncInfo, pos: list[Val]) -> list[Val]:
    """The arguments a call gives, without the bound `self` of a method (`self.add_hooks(child)` walks `child`)."""
    return pos[1:] if fi.cls is not None and pos and not fi.is_static else pos


def _first_module(pos: list[Val]) -> Obj | None:
    """The first argument that is a module (what a walk down a module tree is given), or None."""
    for v in pos:
        if isinstance(v, Obj) and v.kind in ("torch", "local", "sequential"):
            return v
    return None
