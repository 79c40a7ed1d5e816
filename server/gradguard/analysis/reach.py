"""Can a backward reach the op that saved a tensor? A syntactic test over one function's body.

torch checks a saved tensor's version only when the backward runs the node that saved it, and a backward runs only
the nodes its root's graph goes through. Training code often writes in place into the output of an op whose graph
no backward takes: the accuracy of a step,

    loss = F.binary_cross_entropy_with_logits(out, y)
    pred = torch.sigmoid(out)          # sigmoid saves its output
    pred[pred > 0.5] = 1               # ... which this changes
    acc = (pred == y).float().mean()   # a comparison: no graph goes on from here
    loss.backward()                    # never reaches sigmoid

The write is harmless there. This module answers, for the function that holds the write, the ops that saved and at
least one backward, whether the saving ops' results can flow into a backward's root. It follows names through
assignments (flow-insensitively, so loops and branches are covered), through in-place writes into local objects
and containers, and through calls; it stops at what carries no graph (comparisons, ``.item()``, ``.detach()``,
``argmax``, ``len``...). It answers "unreached" only when every way out is seen: a value that leaves the function
(returned, yielded, stored on ``self`` or on a parameter, passed to a call that may keep it or run a backward
itself, read by a nested function) counts as reaching a backward. A value that goes nowhere dies with the function:
no backward can reach it (`_, idx = torch.max(x, 1)`: the values are dropped, so max's saved indices are never
checked). Module-level code counts only when it runs a backward itself: its names outlive it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gradguard.analysis.hazards import SaveRecord, Site

_ROOT = "<backward>"  # pseudo-names: a backward's root, what the function returns, what leaves it otherwise
_RET = "<returned>"
_OUT = "<escapes>"

# methods whose result is a Python value, a bool, or detached: no graph goes on from them (the ops the knowledge table
# says end the graph, `argmax`, comparisons, integer casts, `multinomial`, are asked of it: see Flow.ends_graph)
_NO_GRAPH = frozenset({
    "item", "tolist", "numpy", "detach", "size", "dim", "numel", "nelement", "element_size", "data_ptr",
    "is_nonzero", "all", "any", "equal", "allclose", "isclose", "nonzero", "argsort", "argmin", "byte", "short",
    "count_nonzero", "bincount", "isinf",
})
# packages whose functions neither keep what they are given nor run a backward themselves (torch.autograd's are
# told apart by name)
_LIBRARIES = frozenset({
    "torch", "numpy", "math", "einops", "scipy", "random", "operator", "itertools", "functools", "collections",
    "statistics", "cmath", "copy", "json", "pickle", "os", "sys", "time", "logging", "warnings",
    # images, plots, progress bars, experiment logs: they read what they are given
    "torchvision", "PIL", "matplotlib", "cv2", "imageio", "skimage", "sklearn", "pandas", "tqdm", "wandb",
    "tensorboardX",
})
# tensor methods whose names loggers, meters and containers use too (`history.log(p)`, `meter.add(p)`): on an
# object handed in, such a call may keep its argument
_VERBS = frozenset({"log", "add", "put", "index", "sub", "mul", "div", "record_stream", "share_memory"})
# ops returning (values, indices): the indices carry no graph
_VALUES_INDICES = frozenset({"max", "min", "sort", "topk", "kthvalue", "mode", "median", "nanmedian", "cummax",
                             "cummin"})
_WITH_DIM_ONLY = frozenset({"max", "min", "median", "nanmedian"})  # (without a dim: one tensor, or an elementwise max)
_CUT_ATTRS = frozenset({"shape", "dtype", "device", "data", "ndim", "is_cuda", "requires_grad", "grad_fn",
                        "is_leaf", "layout"})
_CUT_BUILTINS = frozenset({"int", "float", "bool", "len", "str", "repr", "isinstance", "id", "type", "hash",
                           "format", "callable", "hasattr"})
# builtins that neither keep nor differentiate what they are given (their result flows on)
_PURE_BUILTINS = frozenset({"print", "min", "max", "sum", "abs", "round", "list", "tuple", "sorted", "zip",
                            "enumerate", "range", "dict", "set", "reversed", "map", "filter", "iter", "next",
                            "getattr", "divmod", "pow", *_CUT_BUILTINS})


def _root_name(e: ast.expr) -> str | None:
    while isinstance(e, (ast.Attribute, ast.Subscript, ast.Call)):
        e = e.func if isinstance(e, ast.Call) else e.value
    return e.id if isinstance(e, ast.Name) else None


def _call_name(c: ast.Call) -> str:
    f = c.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


class Flow:
    """The flow of one function's (or the module's) body: edges ``targets <- sources`` between local names."""

    def __init__(self, node: ast.AST, imports: frozenset[str], libraries: frozenset[str], autograd: frozenset[str],
                 helper: Callable[[str], Flow | None] = lambda name: None,
                 op: Callable[[str], Any] = lambda name: None):
        self.node = node
        self.op = op  # the knowledge table's entry under a name (`Tensor.clamp`, `torch.argmax`), or None
        self.helper = helper  # a function of the module, or one it imports from the project, by name
        self.module = isinstance(node, ast.Module)
        self.imports = imports
        self.libraries = libraries  # the imported names that stand for torch, numpy, math...
        self.autograd = autograd  # names imported from torch.autograd (`from torch.autograd import grad`)
        body = node.body if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
        self.params: set[str] = set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            self.params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p}
        self._pure: bool | None = None
        self.stmts: list[ast.stmt] = []
        self.nested: list[ast.AST] = []
        self.declared: set[str] = set()  # global / nonlocal
        self._collect(body)
        inner: dict[str, list[ast.AST]] = {}
        for d in self.nested:
            if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner.setdefault(d.name, []).append(d)
        self._inner_defs = {k: v[0] for k, v in inner.items() if len(v) == 1 and isinstance(
            v[0], (ast.FunctionDef, ast.AsyncFunctionDef)) and not v[0].decorator_list}
        self._inner_flows: dict[str, Flow | None] = {}
        self.assigned: set[str] = set()
        sources: dict[str, list[ast.AST | None]] = {}
        for s in self.stmts:
            for t, v in _stmt_targets(s):
                for n in _bound(t):
                    self.assigned.add(n.id)
                    sources.setdefault(n.id, []).append(v if n is t else None)
        self.owned = self._owned(sources)
        self.edges: list[tuple[frozenset[str], frozenset[str]]] = []
        # where each edge comes from: a call (what it does with its arguments), or None (the statement's bindings)
        self.origins: list[ast.AST | None] = []
        self._origin: ast.AST | None = None
        self.by_stmt: dict[int, list[int]] = {}
        for s in self.stmts:
            first = len(self.edges)
            self._edges(s)
            self.by_stmt[id(s)] = list(range(first, len(self.edges)))
        self.has_root = any(_ROOT in t for t, _src in self.edges)
        self.captured: set[str] = set()  # names nested functions, lambdas and classes read
        lambdas = [x for s in self.stmts for x in _walk_all(s) if isinstance(x, ast.Lambda)]
        for d in (*self.nested, *lambdas):
            self.captured |= _free_names(d)

    # ------------------------------------------------------------------ what carries a graph
    def graph_names(self, e: ast.AST | None) -> set[str]:
        """Names whose graph may flow into the value of ``e``."""
        out: set[str] = set()
        self._graph_names(e, out)
        return out

    def _graph_names(self, e: ast.AST | None, out: set[str]) -> None:
        if e is None:
            return
        if isinstance(e, ast.Name):
            out.add(e.id)
        elif isinstance(e, ast.Compare):
            return  # a bool
        elif isinstance(e, ast.Attribute):
            if e.attr not in _CUT_ATTRS:
                self._graph_names(e.value, out)
        elif isinstance(e, ast.Call):
            name = _call_name(e)
            if (name in _NO_GRAPH or self.ends_graph(name)) if isinstance(e.func, ast.Attribute) \
                    else name in _CUT_BUILTINS:
                return
            g = self._pure_helper(e.func)
            if g is not None:
                # a function of the module: only the arguments whose graph its result carries
                for p, a in g.bind(e):
                    if p is None or g.returns(p):
                        self._graph_names(a, out)
                return
            self._graph_names(e.func, out)
            for a in e.args:
                self._graph_names(a, out)
            for k in e.keywords:
                self._graph_names(k.value, out)
        elif isinstance(e, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # (what a nested function reads is checked on its own: see captured)
        else:
            for c in ast.iter_child_nodes(e):
                self._graph_names(c, out)

    def ends_graph(self, name: str) -> bool:
        """``name`` is an op whose result never requires grad, or whose backward is not implemented (the table)."""
        info = self.op("Tensor." + name) or self.op("torch." + name)
        return info is not None and (not info.output_requires_grad or info.backward_not_implemented) and \
            not info.mutates and not info.view_of and not info.multi_output_view

    def _pure_helper(self, f: ast.expr) -> Flow | None:
        if not isinstance(f, ast.Name) or f.id in self.assigned or f.id in self.params or f.id in self.libraries:
            return None
        g = self._inner(f.id) if f.id in self._inner_defs else self.helper(f.id)
        return g if g is not None and g.pure() else None

    def _inner(self, name: str) -> Flow | None:
        """A function defined once in this body (`def bernoulli(probs): ...` inside `rsample`)."""
        if name not in self._inner_flows:
            self._inner_flows[name] = None  # (while it is built: a call to itself is not pure)
            self._inner_flows[name] = Flow(self._inner_defs[name], self.imports, self.libraries, self.autograd,
                                           self.helper, self.op)
        return self._inner_flows[name]

    def bind(self, c: ast.Call) -> list[tuple[str | None, ast.expr]]:
        """(parameter, argument) of a call to this function; None for an argument it cannot place."""
        node = self.node
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        names = [p.arg for p in (*node.args.posonlyargs, *node.args.args)]
        out: list[tuple[str | None, ast.expr]] = []
        for i, a in enumerate(c.args):
            out.append((names[i] if i < len(names) and not isinstance(a, ast.Starred) else None, a))
        for k in c.keywords:
            out.append((k.arg if k.arg in self.params else None, k.value))
        return out

    def returns(self, param: str) -> bool:
        """The function's result may carry the graph of ``param``."""
        return _RET in self._closure({param})

    def _collect(self, body: Iterable[ast.stmt]) -> None:
        for s in body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.nested.append(s)
                continue
            if isinstance(s, (ast.Global, ast.Nonlocal)):
                self.declared.update(s.names)
            self.stmts.append(s)
            for field in ("body", "orelse", "finalbody"):
                self._collect(getattr(s, field, ()) or ())
            for h in getattr(s, "handlers", ()) or ():
                self._collect(h.body)
            for c in getattr(s, "cases", ()) or ():
                self._collect(c.body)

    def local(self, name: str | None) -> bool:
        """A name this body binds, that nothing outside it sees."""
        return name is not None and name in self.assigned and name not in self.params and \
            name not in self.declared and name not in self.imports

    def _owned(self, sources: dict[str, list[ast.AST | None]]) -> set[str]:
        """Local names bound only to objects this body made (``buf = []``, ``p = torch.sigmoid(x)``, ``z = a + b``),
        never to one it was handed (``buf = self.buffer``, ``for m in self.meters``): what is stored into them stays
        here."""
        owned = {n for n in sources if self.local(n)}
        changed = True
        while changed:
            changed = False
            for n in list(owned):
                if not all(v is not None and self._made_here(v, owned) for v in sources[n]):
                    owned.discard(n)
                    changed = True
        return owned

    def _made_here(self, v: ast.AST, owned: set[str]) -> bool:
        if isinstance(v, ast.Call):
            root = _root_name(v.func)
            if isinstance(v.func, ast.Name):
                if v.func.id in self.imports:
                    return v.func.id in self.libraries
                # `list(xs)`, `dict(d)`: a new container, holding what it was given
                return v.func.id in _PURE_BUILTINS and v.func.id not in ("getattr", "next", "iter") and \
                    all(x in owned or x in self.imports for x in _loaded(v))
            if root is not None and root in self.imports:
                return root in self.libraries  # torch.zeros(...), torch.sigmoid(x), np.array(...)
            if root is not None and root in owned:
                return True  # a method of an object made here
            return root is None and isinstance(v.func, ast.Attribute) and self._made_here(v.func.value, owned)
        if isinstance(v, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Constant, ast.JoinedStr, ast.BoolOp)):
            return True  # arithmetic makes new tensors
        if isinstance(v, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
                          ast.GeneratorExp)):
            return all(x in owned or x in self.imports for x in _loaded(v))  # (what it holds is made here too)
        if isinstance(v, ast.Name):
            return v.id in owned
        return False

    # ------------------------------------------------------------------ edges
    def _edges(self, s: ast.stmt) -> None:
        exprs: list[ast.AST] = []
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if s.value is not None:
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                src = self.graph_names(s.value)
                if isinstance(s, ast.AugAssign):
                    src |= self.graph_names(s.target)
                    if isinstance(s.target, ast.Name) and s.target.id not in self.owned:
                        # `x += v` on a tensor handed in (or not known to be made here) writes into the caller's
                        self._edge((frozenset({_OUT}), frozenset(src)))
                for t in targets:
                    if _values_indices(s.value) and isinstance(t, ast.Tuple) and len(t.elts) == 2:
                        # `_, idx = (-dist).max(1)`: the values carry the graph on, the indices carry none
                        self._to_target(t.elts[0], src)
                        self._to_target(t.elts[1], set())
                    else:
                        self._to_target(t, src)
                exprs.append(s.value)
                exprs.extend(targets)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self._to_target(s.target, self.graph_names(s.iter))
            exprs.append(s.iter)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                if item.optional_vars is not None:
                    self._to_target(item.optional_vars, self.graph_names(item.context_expr))
                exprs.append(item.context_expr)
        elif isinstance(s, ast.Return):
            self._edge((frozenset({_RET}), frozenset(self.graph_names(s.value))))
            if s.value is not None:
                exprs.append(s.value)
        elif isinstance(s, (ast.If, ast.While)):
            exprs.append(s.test)
        elif isinstance(s, ast.Expr):
            exprs.append(s.value)
        elif isinstance(s, (ast.Assert, ast.Raise, ast.Delete)):
            exprs.extend(c for c in ast.iter_child_nodes(s) if isinstance(c, ast.expr))
        elif isinstance(s, ast.Match):
            exprs.append(s.subject)
        for e in exprs:
            self._calls(e)

    def _to_target(self, t: ast.expr, src: set[str]) -> None:
        if isinstance(t, ast.Name):
            self._edge((frozenset({t.id} if t.id not in self.declared else {t.id, _OUT}), frozenset(src)))
        elif isinstance(t, (ast.Tuple, ast.List)):
            for x in t.elts:
                self._to_target(x, src)
        elif isinstance(t, ast.Starred):
            self._to_target(t.value, src)
        elif isinstance(t, (ast.Attribute, ast.Subscript)):
            # a write into an object or container: it holds the value now (its index reads nothing of the graph)
            base = _root_name(t)
            self._edge((frozenset({base} if base in self.owned else {_OUT}), frozenset(src)))

    def _calls(self, e: ast.AST) -> None:
        for n in _walk_expr(e):
            if isinstance(n, (ast.Yield, ast.YieldFrom)):
                self._edge((frozenset({_OUT}), frozenset(self.graph_names(n.value))))
            elif isinstance(n, ast.NamedExpr):
                self._to_target(n.target, self.graph_names(n.value))
            elif isinstance(n, ast.Call):
                self._call(n)

    def _edge(self, e: tuple[frozenset[str], frozenset[str]]) -> None:
        self.edges.append(e)
        self.origins.append(self._origin)

    def _call(self, c: ast.Call) -> None:
        outer, self._origin = self._origin, c
        try:
            self._call_edges(c)
        finally:
            self._origin = outer

    def _call_edges(self, c: ast.Call) -> None:
        f = c.func
        args: set[str] = set()
        for a in c.args:
            self._graph_names(a, args)
        for k in c.keywords:
            self._graph_names(k.value, args)
        for k in c.keywords:
            if k.arg == "out":
                self._to_target(k.value, args)
        name = _call_name(c)
        recv = f.value if isinstance(f, ast.Attribute) else None
        chain = _dotted(f)
        if "backward" in name.lower() or "autograd" in chain or (isinstance(f, ast.Name) and f.id in self.autograd):
            # `loss.backward()`, `torch.autograd.grad(loss, x)` (any autograd function counts), `scaler.scale(loss)
            # .backward()`, `accelerator.backward(loss)`, Lightning's `self.manual_backward(loss)`
            self._edge((frozenset({_ROOT}), frozenset(args | self.graph_names(recv))))
            return
        if isinstance(f, ast.Name):
            if f.id in _PURE_BUILTINS or f.id in self.libraries or self.local(f.id):
                return  # the result flows on (a local callable: what it keeps, it keeps in itself)
            if self._pure_helper(f) is not None:
                return  # a function of the module that only returns what it computes from its arguments
            self._edge((frozenset({_OUT}), frozenset(args)))
            return
        root = _root_name(f)
        if root is not None and root in self.libraries:
            return  # a library function (torch.*, F.*, np.*): the result flows on
        base = _root_name(recv) if recv is not None else None
        if base is not None and base in self.owned:
            # a method of an object or tensor made here: it may keep its arguments (`preds.append(p)`, `buf.copy_(p)`)
            self._edge((frozenset({base}), frozenset(args)))
            return
        if recv is not None and base not in ("self", "cls") and not name.endswith("_") and name not in _VERBS and \
                self.op("Tensor." + name) is not None:
            return  # `x.clamp(lo, hi)`, `boxes.new_tensor(v)`: an out-of-place tensor method keeps none of its arguments
        if recv is not None and _root_name(recv) is None:
            # a method of a computed value (`torch.sigmoid(x).clamp_()`, `(a + b).sum()`): the result flows on,
            # unless the value is one the function got from outside
            inner = self.graph_names(recv)
            if all(self.local(x) or x in self.libraries for x in inner):
                return
        self._edge((frozenset({_OUT}), frozenset(args)))

    # ------------------------------------------------------------------ the question
    def seeds(self, rec: SaveRecord) -> set[str] | None:
        """The names the differentiable result of the op that made ``rec`` flows into directly, or None if the op is
        not in this body."""
        site = rec.site
        best: ast.stmt | None = None
        for s in self.stmts:
            if _contains(s, site) and (best is None or _contains(best, Site.of(s))):
                best = s
        if best is None:
            return None
        if isinstance(best, ast.Assign) and len(best.targets) == 1 and isinstance(best.targets[0], ast.Tuple) \
                and len(best.targets[0].elts) == 2 and _values_indices(best.value) \
                and _same(Site.of(best.value), site):
            # `_, idx = torch.max(x, 1)`: only the values carry the graph; the indices (which max saved) do not
            first = best.targets[0].elts[0]
            return {n.id for n in ast.walk(first) if isinstance(n, ast.Name)}
        # (a compound statement holds the op in its header, a condition or an iterable: its edges are the header's)
        out: set[str] = set()
        for c in _walk_all(best) if not isinstance(best, ast.Expr) else ast.walk(best.value):
            if isinstance(c, ast.Call) and _same(Site.of(c), site) and _writes_in_place(c):
                # `gate.sigmoid_()`, `torch.relu_(h)`: the op's result is the tensor it wrote, under its own name
                target = c.func.value if isinstance(c.func, ast.Attribute) and _call_name(c).endswith("_") \
                    else (c.args[0] if c.args else None)
                name = _root_name(target) if target is not None else None
                out |= {name} if name is not None and self.local(name) else {_OUT}
            if isinstance(c, ast.Call) and _same(Site.of(c), site):
                for k in c.keywords:
                    if k.arg == "out":  # `torch.mul(a, b, out=c)`: the result is `c`
                        name = _root_name(k.value)
                        out |= {name} if name is not None and self.local(name) else {_OUT}
        for i in self.by_stmt.get(id(best), ()):
            origin, targets = self.origins[i], self.edges[i][0]
            if origin is None or _in_arguments(origin, site) or (_ROOT in targets and _contains(origin, site)):
                # (a call elsewhere in the statement does not see the result, nor does a method of it: what a call
                # does with its arguments is the edge; a backward's root is its receiver too)
                out |= targets
        return out

    def pure(self) -> bool:
        """A function whose arguments reach nothing but its result: no backward, nothing kept (`accuracy(pred, y)`)."""
        if self._pure is None:
            self._pure = False  # (while it is being decided: a recursive call is not pure)
            g = self._closure(self.params)
            self._pure = not (_ROOT in g or _OUT in g or not g.isdisjoint(self.captured) or
                              not g.isdisjoint(self.declared))
        return self._pure

    def reaches(self, seeds: set[str]) -> bool:
        if self.module and not self.has_root:
            return True  # a module's names outlive it (an importer, the next cell of a notebook may differentiate them)
        g = self._closure(seeds)
        return _ROOT in g or _OUT in g or _RET in g or not g.isdisjoint(self.captured) or \
            not g.isdisjoint(self.declared)

    def _closure(self, seeds: set[str]) -> set[str]:
        g = set(seeds)
        changed = True
        while changed:
            changed = False
            for targets, src in self.edges:
                if not targets <= g and not src.isdisjoint(g):
                    g |= targets
                    changed = True
        return g


def _stmt_targets(s: ast.stmt) -> list[tuple[ast.expr, ast.AST | None]]:
    """(target, the value bound to it when that is the whole right-hand side) of the bindings ``s`` makes."""
    if isinstance(s, ast.Assign):
        return [(t, s.value) for t in s.targets]
    if isinstance(s, ast.AnnAssign):
        return [(s.target, s.value)]
    if isinstance(s, ast.AugAssign):
        return [(s.target, s.target)]  # the same object, changed in place (or a new one made from it)
    if isinstance(s, (ast.For, ast.AsyncFor)):
        return [(s.target, None)]
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return [(i.optional_vars, None) for i in s.items if i.optional_vars is not None]
    return [(n.target, n.value) for n in _walk_all(s) if isinstance(n, ast.NamedExpr)]


def _bound(t: ast.expr) -> Iterable[ast.Name]:
    """The names a target binds (`x[i] = v` and `o.a = v` bind none)."""
    if isinstance(t, ast.Name):
        yield t
    elif isinstance(t, (ast.Tuple, ast.List)):
        for x in t.elts:
            yield from _bound(x)
    elif isinstance(t, ast.Starred):
        yield from _bound(t.value)


def _walk_expr(e: ast.AST) -> Iterable[ast.AST]:
    """The nodes of an expression, not entering lambdas."""
    todo = [e]
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, ast.Lambda):
                todo.append(c)


def _dotted(e: ast.expr) -> str:
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        parts.append(e.id)
    return ".".join(reversed(parts))


def _contains(s: ast.AST, site: Site) -> bool:
    start = (s.lineno, s.col_offset)  # type: ignore[attr-defined]
    end = (getattr(s, "end_lineno", None) or s.lineno, getattr(s, "end_col_offset", None) or 0)  # type: ignore[attr-defined]
    return start <= (site.line, site.col) and (site.end_line, site.end_col) <= end


class BackwardReach:
    """Per checked file: does a backward of the function holding a write reach the ops that saved what it wrote?"""

    def __init__(self, tree: ast.Module, resolve: Callable[[str], tuple[ast.AST, ast.Module, str] | None] | None = None,
                 op: Callable[[str], Any] = lambda name: None):
        self.tree = tree
        self.op = op
        # an imported name -> (its function's node, that module's tree, its path), when it is a function of the
        # project's (see AnalyzerCore.unreached); None: imported names stay unknown
        self.resolve = resolve
        self._others: dict[str, BackwardReach] = {}
        imports: set[str] = set()
        libraries: set[str] = set()
        autograd: set[str] = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    imports.add((a.asname or a.name).split(".")[0])
                    if a.name.split(".")[0] in _LIBRARIES:
                        libraries.add((a.asname or a.name).split(".")[0])
            elif isinstance(n, ast.ImportFrom):
                lib = not n.level and (n.module or "").split(".")[0] in _LIBRARIES
                for a in n.names:
                    imports.add(a.asname or a.name)
                    if lib:
                        libraries.add(a.asname or a.name)
                    if "autograd" in (n.module or ""):
                        autograd.add(a.asname or a.name)
        self.imports = frozenset(imports)
        self.libraries = frozenset(libraries)
        self.autograd = frozenset(autograd)
        self._spans: list[ast.AST] | None = None
        self._flows: dict[int, Flow] = {}
        self._building: set[int] = set()
        # the module's functions, by name: those defined once at the top level and never rebound there
        defs: dict[str, list[ast.AST]] = {}
        for n in tree.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defs.setdefault(n.name, []).append(n)
            else:
                for t, _v in _stmt_targets(n) if isinstance(n, ast.stmt) else ():
                    for b in _bound(t):
                        defs.setdefault(b.id, []).append(b)
        self._defs = {k: v[0] for k, v in defs.items()
                      if len(v) == 1 and isinstance(v[0], (ast.FunctionDef, ast.AsyncFunctionDef))
                      and not v[0].decorator_list}

    def _holder(self, site: Site) -> ast.AST:
        if self._spans is None:
            self._spans = [n for n in ast.walk(self.tree)
                           if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))]
        best: ast.AST = self.tree
        for n in self._spans:
            if _contains(n, site) and (best is self.tree or _contains(best, Site.of(n))):
                best = n
        return best

    def _flow(self, node: ast.AST) -> Flow:
        flow = self._flows.get(id(node))
        if flow is None:
            flow = self._flows[id(node)] = Flow(node, self.imports, self.libraries, self.autograd, self._helper,
                                                self.op)
        return flow

    def helper(self, name: str) -> Flow | None:
        """The flow of the module's function ``name`` (defined once at the top level, undecorated), or None."""
        return self._helper(name) if name in self._defs else None

    def _helper(self, name: str) -> Flow | None:
        node = self._defs.get(name)
        if node is None and name in self.imports and self.resolve is not None:
            # a function imported from another module of the project (mmdet's `bbox_overlaps`): its own module's
            # flow, whose imported names stay unknown
            got = self.resolve(name)
            if got is None:
                return None
            fnode, tree, path = got
            other = self._others.get(path)
            if other is None:
                other = self._others[path] = BackwardReach(tree, op=self.op)
            return other._helper(fnode.name) if isinstance(fnode, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                other._defs.get(fnode.name) is fnode else None
        if node is None or id(node) in self._building:
            return None  # (a function that calls itself, while its flow is being built: not pure)
        self._building.add(id(node))
        try:
            return self._flow(node)
        finally:
            self._building.discard(id(node))

    def unreached(self, site: Site, saves: Sequence[SaveRecord]) -> bool:
        """True when no backward can reach the ops of ``saves``: the write at ``site`` is harmless."""
        if site.path or not saves or any(r.site.path for r in saves):
            return False
        holder = self._holder(site)
        if not isinstance(holder, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        flow = self._flow(holder)
        seeds: set[str] = set()
        for r in saves:
            if self._holder(r.site) is not holder:
                return False
            got = flow.seeds(r)
            if got is None:
                return False
            seeds |= got
        return not flow.reaches(seeds)


def _free_names(d: ast.AST) -> set[str]:
    """The names a nested function, lambda or class reads from around it: those it reads but never binds itself
    (its parameters, its assignments, the functions and classes it defines)."""
    loads: set[str] = set()
    bound: set[str] = set()
    for n in ast.walk(d):
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not d:
            bound.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            loads.update(n.names)
    return loads - bound


def _values_indices(v: ast.expr | None) -> bool:
    """``x.max(1)``, ``torch.sort(x)``, ``x.topk(k)``: a call returning (values, indices)."""
    return isinstance(v, ast.Call) and _call_name(v) in _VALUES_INDICES \
        and (_call_name(v) not in _WITH_DIM_ONLY or _dim_given(v))


def _dim_given(c: ast.Call) -> bool:
    """``x.max(1)``, ``torch.max(x, dim=-1)``: a reduction over a dim, which returns (values, indices); not
    ``torch.max(a, b)``, the elementwise maximum."""
    if any(k.arg == "dim" for k in c.keywords):
        return True
    for d in c.args:
        if isinstance(d, ast.UnaryOp) and isinstance(d.op, ast.USub):
            d = d.operand
        if isinstance(d, ast.Constant) and isinstance(d.value, int) and not isinstance(d.value, bool):
            return True
    return False


def _writes_in_place(c: ast.Call) -> bool:
    name = _call_name(c)
    return (name.endswith("_") and not name.endswith("__")) or any(
        k.arg == "inplace" and not (isinstance(k.value, ast.Constant) and k.value.value is False) for k in c.keywords)


def _in_arguments(c: ast.AST, site: Site) -> bool:
    if not isinstance(c, ast.Call):
        return _contains(c, site)
    return any(_contains(a, site) for a in (*c.args, *(k.value for k in c.keywords)))


def _same(a: Site, b: Site) -> bool:
    return (a.line, a.col, a.end_line, a.end_col) == (b.line, b.col, b.end_line, b.end_col)


def _loaded(e: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(e) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _walk_all(s: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a statement's own expressions (not those of the statements it holds)."""
    for c in ast.iter_child_nodes(s):
        if isinstance(c, ast.stmt):
            continue
        yield from ast.walk(c)
