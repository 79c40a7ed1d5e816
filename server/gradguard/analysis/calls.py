"""Calls: dispatch, builtins, torch callables from the knowledge table (what they write, save and return)."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any

from gradguard.analysis.common import (
    AUTOCAST_CTX,
    CONTAINER_MODULES,
    CONTAINER_TYPES,
    ENABLE_GRAD_CTX,
    MAX_UNROLL,
    NO_GRAD_CTX,
    NONDIFF_BUILTINS,
    NONDIFF_METHODS,
    PARAMETER,
    STANDALONE_DEPTH,
    STR_METHODS,
    Frame,
    is_false,
    is_true,
    known_items,
    note_sized,
    renorms,
    sized_view_of,
    str_method,
    tensor_facts,
    tensors_in,
    view_made,
)
from gradguard.analysis.core import AnalyzerCore
from gradguard.analysis.hazards import Hazard, SaveRecord, Site
from gradguard.analysis.overlap import CHECKED_METHODS
from gradguard.analysis.state import Heap, State, join_states, split_paths
from gradguard.analysis.summaries import Cloner
from gradguard.analysis.values import (
    MAYBE,
    NO,
    NONE,
    SPECIAL_VIEWS,
    UNKNOWN,
    UNKNOWN_NUM,
    YES,
    Alt,
    Bound,
    Choice,
    ClassInfo,
    ClassV,
    Cond,
    Const,
    Func,
    Method,
    Obj,
    Params,
    Partial,
    Ref,
    Seq,
    Storage,
    Super,
    T,
    UnknownT,
    Val,
    choice,
    fresh,
    join,
    known_int,
    known_str,
    ordered,
)
from gradguard.knowledge import OpInfo
from gradguard.knowledge import libraries as L

# view ops that return a copy when the input cannot be viewed: not known to alias
MAYBE_ALIAS = ("reshape", "reshape_as", "flatten", "contiguous", "ravel")


class Calls(AnalyzerCore):
    # ------------------------------------------------------------------ calls
    def e_Call(self, n: ast.Call, st: State, fr: Frame) -> Val:
        return self.cutting(n, st, lambda: self._call_expr(n, st, fr))

    def _call_expr(self, n: ast.Call, st: State, fr: Frame) -> Val:
        if isinstance(n.func, ast.Attribute):
            if n.func.attr in NONDIFF_METHODS and not n.args:
                # x.item(), x.tolist(), x.numpy(): the value leaves autograd; what computed x never reaches a loss
                self.ev_nograd(n.func.value, st, fr)
                return UNKNOWN_NUM
            recv = self.ev(n.func.value, st, fr)
            if recv is UNKNOWN and n.func.attr == "requires_grad_" and isinstance(n.func.value, ast.Name) \
                    and not n.keywords and all(isinstance(a, ast.Constant) and a.value is True for a in n.args):
                # `batch = next(loader).cuda(); batch.requires_grad_()`: whatever the unknown value was, it is now a
                # tensor that requires grad, and a leaf (a tensor computed with grad already required it)
                return self.set_requires_grad(fresh(self.text(n.func.value)), Const(True), n.func.value, st, fr)
            fv = self.getattr(recv, n.func.attr, n.func, st)
            if fv is UNKNOWN and isinstance(recv, Obj) and recv.kind == "local" and recv.info is not None \
                    and not n.func.attr.startswith("__") and (self.nn_module_like(recv.info)
                                                             or n.func.attr in self.param_attrs(recv.info)):
                # `self.head(x)`, where __init__ set the head to what a registry built (`build_head(cfg)`): a
                # module we cannot see into, called (see Expressions.e_Attribute)
                fv = self.opaque_child(recv, n.func.attr)
        else:
            fv = self.ev(n.func, st, fr)
            if isinstance(fv, Ref) and fv.qual in NONDIFF_BUILTINS:
                for a in (*(a.value if isinstance(a, ast.Starred) else a for a in n.args), *(k.value for k in n.keywords)):
                    if self._runs_code(a):
                        # `print(fitter.train_step(batch))`: the step runs as it would anywhere, with grad on; only
                        # the number it returns is formatted
                        self.ev(a, st, fr)
                    else:
                        self.ev_nograd(a, st, fr)
                return self.call_builtin(fv.qual[9:], [], {}, n, st, fr) if fv.qual != "builtins.print" else NONE
        pos: list[Val] = []
        for a in n.args:
            if isinstance(a, ast.Starred):
                v = self.ev(a.value, st, fr)
                if isinstance(v, Seq) and v.items is not None:
                    pos.extend(v.items)
                elif isinstance(v, Obj) and (items := known_items(v)) is not None:
                    pos.extend(items)  # `nn.Sequential(*block)` with `block` a ModuleList: its modules, in order
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
            elif isinstance(v, Seq) and (ents := v.entries()) is not None:
                kw.update(ents)  # `**kwargs` whose keys we know: exactly those keywords
            else:
                kw["**"] = UNKNOWN  # `**kwargs` we cannot see into: any keyword may come from it
        out = self.call(fv, pos, kw, n, st, fr)
        if isinstance(fv, (Func, Bound, Method, Partial, ClassV)):
            self._hand_over(n, st, fr)
        return out

    @staticmethod
    def each(v: Choice, st: State, run: Callable[[Val, State], Val]) -> Val:
        """Run ``run`` on each alternative of a Choice from a copy of ``st``; ``st`` becomes the join of the copies
        (as after an if/elif over the branches that built them), the result the choice of the results."""
        outs: list[Val] = []
        heaps: list[Heap] = []
        merged: State | None = None
        for alt in v.alts:
            s = st.copy()
            outs.append(run(alt, s))
            heaps.append(s.heap)
            merged = join_states(merged, s, own=True)
        assert merged is not None
        outs, alt_saved = split_paths(outs, heaps)  # the result, as a name bound on each path (see join_states)
        st.env, st.heap = merged.env, merged.heap if not alt_saved else merged.heap.with_saved(alt_saved)
        return choice(outs)

    def _hand_over(self, n: ast.Call, st: State, fr: Frame) -> None:
        """A keyed dict passed by name to code that may change it (``_update_kwargs(cfg, kwargs)`` running
        ``kwargs.setdefault(...)``): its keys are no longer known. (Values are immutable here: the callee's
        changes rebind its own name, not ours.)"""
        for a in (*n.args, *(k.value for k in n.keywords if k.arg is not None)):
            if isinstance(a, ast.Name):
                v = st.env.get(a.id)
                if isinstance(v, Seq) and v.keys is not None:
                    st.env[a.id] = v.unkeyed()

    def call(self, fv: Val, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame) -> Val:
        if isinstance(fv, Partial):
            out = self.call(fv.func, [*fv.args, *pos], {**dict(fv.kw), **kw}, n, st, fr)
            flag = dict(fv.kw_sites).get("inplace")
            if isinstance(out, Obj) and out.kind == "torch" and out.inplace and flag is not None and "inplace" not in kw:
                out.kw_site = flag  # `partial(nn.ReLU, inplace=True)()`: the flag was given in the partial
            return out
        if isinstance(fv, Choice):
            return self.each(fv, st, lambda alt, s: self.call(alt, pos, kw, n, s, fr))
        if isinstance(fv, Ref):
            return self.call_ref(self.canon(fv.qual), fv.qual, pos, kw, n, st, fr)
        if isinstance(fv, Method):
            return self.call_method(fv, pos, kw, n, st, fr)
        if isinstance(fv, (Func, ClassV)) and self._unobserved(n, pos, kw, st, fr) and not self._follow_once(fv):
            return UNKNOWN
        if isinstance(fv, Func):
            before = self.effects
            out = self.call_func(fv.info, pos, kw, st, fr, n)
            if isinstance(out, Const) and self.save_log and fv.info.closure is None and self.pure_helper(fv.info):
                # `grad_norm = item(torch.norm(t))`, where `item` returns `t.item()`: a helper that keeps nothing of
                # its arguments and returns no tensor ends the graph of what it was given, as `.item()` does (asked
                # only when the expression's ops saved something: the purity test reads the whole module once)
                self.cut_at, self.pure_cut = n, (n, before)
            return out
        if isinstance(fv, Bound):
            return self.call_func(fv.func, [fv.obj, *pos], kw, st, fr, n)
        if isinstance(fv, ClassV):
            return self.instantiate(fv.info, pos, kw, n, st, fr)
        if isinstance(fv, Obj):
            return self.call_obj(fv, pos, kw, n, st, fr, in_seq=None)
        if isinstance(fv, T) and fv.maybe_tensor:
            # an unknown value called like a module (`model(x)` for a model passed in as a parameter; `critic(obs)`
            # for what an unknown factory returned, `critic = hp.critic_cls(params)`: called, it is no tuple)
            return self.call_obj(self.opaque_for(fv), pos, kw, n, st, fr, in_seq=None)
        if isinstance(n.func, ast.Attribute) and n.func.attr == "register_hooks" and pos:
            self.pack_hook(pos[0], n, st, fr)  # grad_fn._raw_saved_self.register_hooks(pack, unpack)
        self._out_kw(kw, n, st, "call")
        if self.watching:
            self.kept_elsewhere((*pos, *kw.values()))
        return UNKNOWN

    def _runs_code(self, a: ast.expr) -> bool:
        """Is ``a`` a call of the program's own code (a function, a method that is not a tensor's), whose body runs
        whatever its result is used for?"""
        if not isinstance(a, ast.Call):
            return False
        f = a.func
        if isinstance(f, ast.Name):
            return True
        return isinstance(f, ast.Attribute) and f.attr not in NONDIFF_METHODS and f"Tensor.{f.attr}" not in self.kb \
            and f"torch.{f.attr}" not in self.kb

    def unknown_result(self, n: ast.Call) -> T:
        """What an entry of an object that the object's class does not define returns when called (a config's
        class read through its `__getattr__`, `critic = self.hp.critic(params)`): unknown, but one value, as a
        parameter of the function is: the object ``critic.parameters()`` gives an optimizer is the one
        ``critic(obs)`` then runs. (Nothing says it requires grad: used as a tensor it is data.)"""
        return fresh(self.text(n.func)[:40], rg=NO, maybe_tensor=True, maybe_tuple=True)

    def dict_method(self, d: Seq, name: str, pos: list[Val], kw: dict[str, Val], recv: ast.expr, st: State,
                    fr: Frame) -> Val:
        """``kwargs.get("inplace", False)``, ``kwargs.pop("act_layer", nn.ReLU)``, ``kwargs.setdefault(...)``,
        ``kw.update(...)`` on a dict whose keys are known. A change rebinds the dict's name (values are immutable
        here); one we cannot follow leaves a dict without keys."""
        ents = d.entries()
        assert ents is not None
        key = known_str(pos[0]) if pos else None
        default = pos[1] if len(pos) > 1 else NONE
        if name in ("get", "pop", "setdefault") and key is not None:
            got = ents.get(key)
            if name == "pop":
                self._rebind(recv, Seq.keyed({k: v for k, v in ents.items() if k != key}), st, fr)
            elif name == "setdefault" and got is None:
                self._rebind(recv, Seq.keyed({**ents, key: default}), st, fr)
            return got if got is not None else default
        if name == "update" and "**" not in kw and len(pos) <= 1:
            more = pos[0].entries() if pos and isinstance(pos[0], Seq) else {} if not pos else None
            if more is not None:
                self._rebind(recv, Seq.keyed({**ents, **more, **kw}), st, fr)
                return NONE
        if name == "copy":
            return d
        # (items/keys/values stay unknown, as for any dict: unrolling a loop over a configuration table's entries
        # costs a pass per entry and finds nothing)
        if name not in ("items", "keys", "values", "__contains__", "__len__"):
            self._rebind(recv, d.unkeyed(), st, fr)  # changed in a way we do not follow
        return join(d.elem, default) if name in ("get", "pop", "setdefault") else UNKNOWN

    def pack_hook(self, hook: Val, n: ast.AST, st: State, fr: Frame) -> None:
        """Run a saved-tensor pack hook on a stand-in for the tensor being saved: torch forbids modifying it."""
        if not isinstance(hook, (Func, Bound, Partial)):
            return
        s = Storage("the tensor being saved", self.site(n))
        self.pack_inputs.add(s)
        call = n if isinstance(n, ast.Call) else ast.Call(func=ast.Name("hook"), args=[], keywords=[])
        self.call(hook, [T(frozenset({s}), rg=NO, origin="pack hook input")], {}, call, st.branch(), fr)

    def record_class(self, pos: list[Val], kw: dict[str, Val], n: ast.Call) -> ClassV | None:
        """``namedtuple("LIFState", ["z", "v", "i"])`` (or ``"z v i"``, ``"z, v, i"``), ``NamedTuple("P", [("x",
        Tensor)])``: a class whose constructor sets those fields, as a ``typing.NamedTuple`` subclass's does (a state
        carried across iterations keeps the tensors it is given). None when the field names are not known."""
        name = known_str(pos[0]) if pos else None
        given = pos[1] if len(pos) > 1 else kw.get("field_names", kw.get("fields"))
        names: list[str] | None = None
        if isinstance(given, Const) and isinstance(given.value, str):
            names = given.value.replace(",", " ").split()
        elif isinstance(given, Seq) and given.items is not None:
            names = []
            for it in given.items:
                if isinstance(it, Seq) and it.items:  # typing.NamedTuple's (name, type) pairs
                    it = it.items[0]
                f = known_str(it)
                if f is None:
                    return None
                names.append(f)
        if name is None or not names or not all(f.isidentifier() for f in names):
            return None
        defaults: list[Val] = []
        d = kw.get("defaults")
        if isinstance(d, Seq) and d.items is not None and len(d.items) <= len(names):
            defaults = list(d.items)  # (the last fields')
        first_default = len(names) - len(defaults)
        node = ast.copy_location(ast.ClassDef(name=name, bases=[], keywords=[], body=[ast.Pass()], decorator_list=[]),
                                 n)
        ci = ClassInfo(node, name, fields=[(f, defaults[i - first_default] if i >= first_default else None)
                                           for i, f in enumerate(names)], tuple_record=True)
        return ClassV(ci)

    def _follow_once(self, fv: Val) -> bool:
        """A helper of this file that it only calls as ``return helper(...)`` (which no caller run alone follows,
        see below) is followed at the first such call: its body and the closures it returns are analysed there, in
        that caller's context (kornia's ``_bilateral_blur_taps(..., in_place, ...)`` is given its flag by callers
        that set it from the grad mode; alone, with a made-up flag, it would see contexts that never happen)."""
        if not isinstance(fv, Func) or fv.info.node not in self.pass_through \
                or fv.info.node in self.followed_through:
            return False
        self.followed_through.add(fv.info.node)
        return True

    def _unobserved(self, n: ast.Call, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame) -> bool:
        """A call, in a function analysed on its own, that cannot matter to any hazard this analysis can find:
        its result is returned or dropped (``model = build(...); return model``), so whatever graph it builds is
        out of this function's reach, and no argument is a tensor in a state a callee could trip over (saved,
        a leaf that requires grad, a special view) or an object. Such a callee sees nothing it would not see
        when it is analysed on its own, so it is not run here (library plumbing is large)."""
        if fr.func is None or fr.depth != STANDALONE_DEPTH:
            return False
        stmt = self.cur_stmt
        node = fr.func.node
        if isinstance(stmt, ast.Assign) and stmt.value is n and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            if stmt.targets[0].id not in _returned_only(node):
                return False
        elif not (isinstance(stmt, (ast.Return, ast.Expr)) and stmt.value is n):
            return False
        saved = st.heap.saved
        return not any(_live(v, saved) for v in (*pos, *kw.values()))

    @staticmethod
    def _negative_slope(info: OpInfo, pos: list[Val], kw: dict[str, Val], module: Obj | None) -> float | None:
        """The slope of an in-place leaky_relu (or of an evaluation-mode rrelu: the mean of its bounds), or the alpha of
        an in-place elu or celu, when it is a known negative number, else None."""
        name = info.name.split("[", 1)[0]

        def num(v: Val | None) -> float | None:
            if isinstance(v, Const) and v.known and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
                return float(v.value)
            return None

        def arg(i: int, key: str, default: float) -> float | None:
            if module is not None:
                v = module.cfg.get(key)
            else:
                v = kw.get(key, pos[i] if i < len(pos) else None)
            return default if v is None else num(v)

        if name in ("torch.nn.functional.leaky_relu", "torch.nn.functional.leaky_relu_", "torch.nn.LeakyReLU",
                    "Tensor.leaky_relu_", "torch._C._nn.leaky_relu_"):
            slope = arg(1, "negative_slope", 0.01)
        elif name in ("torch.nn.functional.elu", "torch.nn.functional.elu_", "torch.nn.ELU", "torch._C._nn.elu_",
                      "torch.nn.functional.celu", "torch.nn.functional.celu_", "torch.nn.CELU", "torch.celu_"):
            # (in-place elu's backward recovers the input from the output, which a negative alpha makes ambiguous:
            # "In-place elu backward calculation is triggered with a negative slope"; celu runs elu with its alpha)
            slope = arg(1, "alpha", 1.0)
        elif name in ("torch.nn.functional.rrelu", "torch.nn.functional.rrelu_", "torch.rrelu_") and module is None:
            training = kw.get("training", pos[3] if len(pos) > 3 else None)
            if training is not None and not is_false(training):
                return None
            lo, hi = arg(1, "lower", 1 / 8), arg(2, "upper", 1 / 3)
            slope = (lo + hi) / 2 if lo is not None and hi is not None else None
        else:
            return None
        return slope if slope is not None and slope < 0 else None

    def _out_kw(self, kw: dict[str, Val], n: ast.Call, st: State, op: str,
                info: OpInfo | None = None, inputs: dict[str, Val] | None = None) -> Val | None:
        out = kw.get("out")
        if isinstance(out, T):
            kwnode = next((k for k in n.keywords if k.arg == "out"), None)
            tgt = self.text(kwnode.value) if kwnode else "out"
            if info is not None and inputs and not st.no_grad and not st.silent:
                # `torch.mul(a, b, out=x)` with `a` requiring grad: out= variants have no derivative, torch refuses
                rg_arg = next((a for a, v in inputs.items() if a != "out" and _requires_grad(v)), None) or next(
                    (a for a, v in inputs.items() if a != "out" and _made_requiring_grad(v)), None)
                if rg_arg is not None:
                    node = self._arg_node(n, info, rg_arg)
                    seq = inputs[rg_arg]
                    if isinstance(node, (ast.List, ast.Tuple)) and isinstance(seq, Seq) and seq.items is not None \
                            and len(node.elts) == len(seq.items):  # `torch.cat([a, b], out=buf)`: name `a`
                        node = next(e for e, x in zip(node.elts, seq.items) if _requires_grad(x))
                    self.report(Hazard("out_rg", "out", self.site(n), self.stmt_site(), op, tgt, extra=(
                        ("out_kw_span", self.site(kwnode) if kwnode else self.site(n)), ("call_span", self.site(n)),
                        ("standalone", self._standalone(n)),
                        ("input", self.text(node) if node is not None else rg_arg))))
                    return out
            self.mutate(out, st, form="out", node=n, op=op, target=tgt,
                        extra=(("out_kw_span", self.site(kwnode) if kwnode else self.site(n)), ("call_span", self.site(n)),
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
        if qual in ("collections.OrderedDict", "typing.OrderedDict"):
            return self.call_builtin("dict", pos, kw, n, st, fr)  # (its entries, in order, as a dict's)
        if qual in PARAMETER:
            rg = NO if is_false(kw.get("requires_grad", pos[1] if len(pos) > 1 else None)) else YES
            return T(frozenset({Storage("an nn.Parameter", self.site(n), leaf=rg == YES)}), rg=rg, leaf=rg == YES,
                     origin="nn.Parameter", cplx=bool(pos) and isinstance(pos[0], T) and pos[0].cplx)
        if qual in CONTAINER_MODULES:
            o = Obj(CONTAINER_MODULES[qual], qual)
            o.training = True
            o.ctor = self.site(n)
            o.entries = self._entries(pos)
            return o
        if qual in L.AVERAGED_MODELS:
            w = Obj("wrapper", qual)
            w.training, w.ctor = True, self.site(n)
            inner = kw.get("model", pos[0] if pos else UNKNOWN)
            w.attrs["module"] = Cloner(-1).value(inner) if isinstance(inner, Obj) else inner  # (its own copy)
            return w
        if qual in _GRAD_SCALERS:
            return Obj("scaler", qual)  # AMP's loss scaler: `scaler.scale(loss).backward()`, `scaler.step(opt)`
        if qual in ("collections.namedtuple", "typing.NamedTuple") and (rec := self.record_class(pos, kw, n)):
            return rec
        if qual.startswith("torch.optim.") and qual.rsplit(".", 1)[-1][:1].isupper() \
                and ".lr_scheduler" not in qual:
            o = Obj("optimizer", qual)
            params = kw.get("params", pos[0] if pos else UNKNOWN)
            o.cfg["owners"] = Params(self.owners_of(params))
            if "fused" in kw:
                o.cfg["fused"] = kw["fused"]
            return o
        if qual in ("torch.autograd.backward",):
            if pos:
                self.backward(pos[0], kw, n, st, fr)
            return NONE
        if qual in ("torch.autograd.grad",):
            # (`retain_graph` defaults to `create_graph`: gradients that are themselves differentiable keep the graph
            # they were computed through, and its saved tensors, for their own backward)
            create = kw.get("create_graph", pos[4] if len(pos) > 4 else Const(False))
            retain = kw.get("retain_graph", pos[3] if len(pos) > 3 else create)
            if isinstance(retain, Const) and retain.known and retain.value is None:
                retain = create
            if pos:
                self.backward(pos[0], {"retain_graph": retain}, n, st, fr)
            if is_true(create) and pos and not st.no_grad:
                # differentiable gradients (a gradient penalty): their graph goes back through the forward's, and
                # keeps what it saved, the parameters of its modules included (an update before their backward
                # breaks it)
                outs = [t for t in tensors_in(pos[0]) if not t.maybe_tensor]
                prov = frozenset(p for t in outs for p in t.prov)
                rg = YES if any(t.rg == YES for t in outs) else MAYBE
                return Seq(None, T(frozenset({Storage("a gradient made with create_graph=True")}), rg=rg, prov=prov,
                                   origin="grad"), "tuple")
            return Seq(None, fresh("grad", rg=NO), "tuple")
        if qual in NO_GRAD_CTX or qual in AUTOCAST_CTX or qual in ENABLE_GRAD_CTX:
            return UNKNOWN
        if qual == "torch.is_grad_enabled":
            return Cond(formula="grad") if not st.no_grad else Const(False)
        if qual.startswith("torch._foreach_"):
            return self.foreach(qual[len("torch._foreach_"):], pos, kw, n, st, fr)
        lib = self.call_library(qual, raw, pos, kw, n, st, fr)
        if lib is not None:
            return lib
        if qual in L.IMPORT_MODULE and pos and not kw:
            # `importlib.import_module("models.resnet")` is that module, found as an import statement finds it;
            # one named by a value the analysis does not know is a module it cannot read
            name = pos[0].value if isinstance(pos[0], Const) and isinstance(pos[0].value, str) else None
            return self.module_value(name) if name and not name.startswith(".") else Ref("<module>")
        if qual in L.VARIABLE:
            data = pos[0] if pos else kw.get("data")
            if is_true(kw.get("requires_grad", pos[1] if len(pos) > 1 else None)):
                return T(frozenset({Storage("created with requires_grad=True (Variable)", self.site(n), leaf=True)}),
                         rg=YES, leaf=True, origin=raw)
            if isinstance(data, T):
                return T(data.storages, rg=NO, origin="detach", maybe_tensor=data.maybe_tensor)  # shares its data
            return UNKNOWN
        if qual in L.LEGACY_TENSOR_CTORS:
            if len(pos) == 1 and not kw and isinstance(pos[0], T) and not pos[0].maybe_tensor:
                return pos[0]  # `torch.Tensor(t)`: t itself, as an alias
            return self.new_tensor([], st, raw.rsplit(".", 1)[-1], min_rg=NO)
        info = kb.get(qual)
        factory = qual.startswith("torch.") and not qual.startswith("torch.nn.") and qual.rsplit(".", 1)[-1][:1].islower()
        if factory and is_true(kw.get("requires_grad")) and (info is None or info.kind != "module"):
            # a factory (`torch.zeros_like(x, requires_grad=True)`, `torch.full(..., requires_grad=True)`): a new
            # leaf that requires grad, whatever the knowledge says of the op otherwise
            return T(frozenset({Storage(f"created with requires_grad=True ({raw.rsplit('.', 1)[-1]})",
                                        self.site(n), leaf=True)}), rg=YES, leaf=True, origin=raw)
        if info is not None:
            if info.kind == "module":
                return self.construct_module(info, pos, kw, n)
            return self.apply(info, pos, kw, n, st, fr, display=raw.rsplit(".", 1)[-1])
        out = self._out_kw(kw, n, st, raw.rsplit(".", 1)[-1])
        if out is not None:
            return out
        if factory:
            if qual in L.TORCH_LOADERS:
                return fresh(raw.rsplit(".", 1)[-1], rg=NO, maybe_tensor=True)
            if qual in L.INDEX_FUNCTIONS:
                return fresh(raw.rsplit(".", 1)[-1], rg=NO, maybe_tuple=True)
            if qual in L.TORCH_FACTORIES:
                made = self.new_tensor([], st, raw.rsplit(".", 1)[-1], min_rg=NO)
                dtype = kw.get("dtype")
                if isinstance(made, T) and ((qual in _DEFAULT_FLOAT_FACTORIES and dtype is None) or (
                        isinstance(dtype, Ref) and dtype.qual in _FLOAT32_DTYPES)):
                    # (of the default dtype, or asked for float32)
                    made = made.with_(f32=True)
                return made
            real = [v for v in (*pos, *kw.values()) if not (isinstance(v, T) and v.maybe_tensor)]
            made = self.new_tensor(real, st, raw.rsplit(".", 1)[-1], min_rg=NO)
            # (a torch function the knowledge does not hold may return several tensors, `torch.unique(x,
            # return_inverse=True)`, `torch.aminmax(x)`: unpacking its result takes them apart, it unbinds nothing)
            return made.with_(maybe_tuple=True) if isinstance(made, T) else made
        if self.watching and not qual.startswith("torch.") and (
                qual.split(".", 1)[0] not in L.DATA_LIBRARIES or qual.split(".", 1)[0] in _KEEPING_LIBRARIES):
            # (torch's functions, `math.log(t)`, `np.asarray(t)` keep nothing of what they are given)
            self.kept_elsewhere((*pos, *kw.values()))
        if not qual.startswith("torch.") and qual.split(".", 1)[0] not in L.DATA_LIBRARIES:
            # a class or factory the analysis cannot read (a library that is not installed, a module it cannot
            # find: `CamNet(21)`, `torchvision.models.resnet18()`): what it makes is one object, which calling may
            # run a model (see nn_modules.opaque_child)
            o = Obj("opaque", raw)
            o.training = True
            o.cfg["unread_class"] = Const(True)
            return o
        return UNKNOWN

    def foreach(self, op: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame) -> Val:
        """``torch._foreach_add_(xs, ys)`` and friends: the single op applied to each element (a list argument gives
        its i-th element, anything else is shared), each element with its own version counter and saves."""
        inplace = op.endswith("_")
        info = self.kb.get(f"Tensor.{op}") if inplace else (self.kb.get(f"torch.{op}") or self.kb.get(f"Tensor.{op}"))
        lists = [v for v in pos if isinstance(v, Seq)]
        if info is None or not lists:
            return UNKNOWN
        sizes = {len(v.items) for v in lists if v.items is not None}
        count = min(sizes) if sizes else None
        first = n.args[0] if n.args else None
        base_text = self.text(first) if first is not None else "tensors"
        outs: list[Val] = []
        for i in range(count if count is not None else 1):
            args = [(v.items[i] if v.items is not None else v.elem) if isinstance(v, Seq) else v for v in pos]
            target = f"{base_text}[{i}]" if count is not None else f"an element of {base_text}"
            outs.append(self.apply(info, args, kw, n, st, fr, display=f"_foreach_{op}", form="foreach",
                                   target_text=target, extra=(("call_span", self.site(n)),)))
        if inplace:
            return NONE
        return Seq.of(tuple(outs), "list") if count is not None else Seq(None, outs[0], "list")

    def call_builtin(self, name: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                     fr: Frame) -> Val:
        if name == "setattr" and len(pos) == 3 and isinstance(pos[0], Obj) and pos[0].kind in ("local", "torch") \
                and isinstance(pos[1], Const) and pos[1].known and isinstance(pos[1].value, str):
            self.set_attr(pos[0], pos[1].value, pos[2])  # `setattr(self, name, default)` with the name known
            return NONE
        if name == "filter" and len(pos) == 2 and isinstance(pos[1], Params):
            return pos[1]  # `filter(lambda p: p.requires_grad, model.parameters())`: some of the same parameters
        if name == "range":
            bounds = [v.value for v in pos if isinstance(v, Const) and v.known and isinstance(v.value, int)
                      and not isinstance(v.value, bool)]
            if pos and len(bounds) == len(pos) and len(pos) <= 3:
                try:
                    r = range(*bounds)
                except (TypeError, ValueError):
                    r = None
                if r is not None and len(r) <= MAX_UNROLL:
                    return Seq.of([Const(i) for i in r], "list")
            return Seq(None, UNKNOWN_NUM)
        if name == "dict" and "**" not in kw and len(pos) <= 1:
            # dict(block=Bottleneck, layers=[3, 4, 6, 3]), dict(model_args, **kwargs): a keyed dict when the
            # entries are all shown
            base = pos[0].entries() if pos and isinstance(pos[0], Seq) else {} if not pos else None
            if base is None and pos and isinstance(pos[0], Seq) and pos[0].items is not None:
                base = _pairs(pos[0].items)  # dict(model.named_modules()): (known name, module) pairs
            if base is not None:
                return Seq.keyed({**base, **kw})
        if name == "len" and pos:
            items = known_items(pos[0])
            if items is not None:
                return Const(len(items))
        if name == "eval" and len(pos) == 1 and len(n.args) == 1 and not n.keywords:
            got = self.dynamic_global(n.args[0], pos[0], fr)  # `eval("Encoder{}".format(kind))`: a registry
            if got is not None:
                return got
        if name == "isinstance" and len(pos) == 2:
            return self.isinstance(pos[0], pos[1])
        if name == "type" and len(pos) == 1 and not kw and isinstance(pos[0], Obj):
            return self.class_of(pos[0])
        if name == "type" and len(pos) == 1 and not kw and isinstance(pos[0], T) and _plain_tensor(pos[0]):
            # `out_type = type(output)` on what an op returned: torch.Tensor, which `out_type is tuple` tells apart
            return Ref("torch.Tensor")
        if name == "hasattr" and len(pos) == 2 and not kw and isinstance(pos[0], T) and not pos[0].maybe_tensor \
                and not pos[0].maybe_tuple and isinstance(pos[1], Const) and pos[1].known \
                and isinstance(pos[1].value, str) \
                and (pos[1].value in _TENSOR_ATTRS or f"Tensor.{pos[1].value}" in self.kb):
            # `if hasattr(t, "item"): return t.item()` on what an op returned: a tensor has every Tensor attribute
            # (one it lacks may still be a subclass's: that test stays open)
            return Const(True)
        if name in ("len", "isinstance", "hasattr", "int", "float", "bool", "str", "print", "id", "type", "abs",
                    "round", "repr", "callable", "issubclass", "hash", "format"):
            return UNKNOWN_NUM
        if name == "enumerate" and pos:
            items = known_items(pos[0])
            if items is not None and not kw:
                return Seq.of([Seq.of([Const(i), x], "tuple") for i, x in enumerate(items)], "list")
            return Seq(None, Seq.of([UNKNOWN_NUM, self.elem(pos[0], n)], "tuple"))
        if name == "zip":
            all_items = [known_items(p) for p in pos]
            if pos and not kw and all(i is not None for i in all_items):
                size = min(len(i) for i in all_items if i is not None)
                return Seq.of([Seq.of([i[k] for i in all_items if i is not None], "tuple") for k in range(size)],
                              "list")
            if pos and not kw and any(i is not None and any(isinstance(x, Obj) for x in i) for i in all_items):
                # `zip(layers, grads)` with the layers known: a pair per layer, each with any one of the others'
                # elements (objects do not join as tensors do: one pass over "any layer" would see the first only)
                size = min(len(i) for i in all_items if i is not None)
                els = [self.elem(p, n) if i is None else None for p, i in zip(pos, all_items)]
                return Seq.of([Seq.of([i[k] if i is not None else e if e is not None else UNKNOWN
                                       for i, e in zip(all_items, els)], "tuple") for k in range(size)], "list")
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
        if name == "getattr" and len(pos) >= 2 and isinstance(pos[1], Const) and pos[1].known \
                and isinstance(pos[1].value, str):
            return self.getattr(pos[0], pos[1].value, n, st)
        if name == "getattr" and len(pos) == 2 and isinstance(pos[0], Obj) and pos[0].kind == "torch" \
                and len(n.args) == 2 and isinstance(n.args[1], ast.JoinedStr) and n.args[1].values \
                and isinstance(head := n.args[1].values[0], ast.Constant) and isinstance(head.value, str) \
                and head.value.startswith(("weight_", "bias_")):
            # `getattr(self.rnn, f"bias_hh_l{i}")`: whichever layer's, a parameter of the torch module
            return self.getattr(pos[0], head.value + "{}", n, st)
        if name in ("sum", "min", "max") and pos:
            el = self.elem(pos[0], n) if len(pos) == 1 else join(pos[0], pos[1])
            if isinstance(el, T):
                return self.new_tensor([el], st, name).with_(maybe_tensor=el.maybe_tensor)
            return UNKNOWN_NUM
        if name == "next" and pos:
            return self.elem(pos[0], n)
        if name == "map" and len(pos) >= 2:
            # map(f, xs): f applied to each element (lambdas over (q, k, v) tuples keep what f does)
            f, its = pos[0], pos[1:]
            if len(its) == 1 and isinstance(its[0], Seq) and its[0].items is not None and len(its[0].items) <= 8:
                return Seq.of([self.call(f, [x], {}, n, st, fr) for x in its[0].items], "list")
            return Seq(None, self.call(f, [self.elem(x, n) for x in its], {}, n, st, fr))
        return UNKNOWN

    def call_library(self, qual: str, raw: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                     fr: Frame) -> Val | None:
        """Callables described in knowledge.libraries (einops, torch utilities, deepcopy, partial); None for
        anything else."""
        if raw in L.PARTIAL or qual in L.PARTIAL:
            sites = tuple((k.arg, self.site(k)) for k in n.keywords if k.arg is not None)
            return Partial(pos[0], tuple(pos[1:]), tuple(kw.items()), sites) if pos else UNKNOWN
        if qual in L.CHAIN and pos and any(isinstance(v, Params) for v in pos) and not kw:
            # `itertools.chain(G.parameters(), D.parameters())`: the parameters of both, for one optimizer
            return Params(frozenset().union(*(self.owners_of(v) for v in pos)))
        if qual in L.PARAMETRIZE and pos and isinstance(pos[0], Obj):
            self.parametrize(qual, pos[0], pos, kw)
        if qual in L.PRUNE and pos and isinstance(pos[0], Obj):
            self.prune(pos[0], pos[1] if len(pos) > 1 else kw.get("name"))
            return pos[0]
        if qual in L.RETURNS_FIRST_ARG:
            return pos[0] if pos else UNKNOWN
        if qual in L.HOOKS_EVERY_MODULE and pos:
            # from here on every module's call wraps its inputs and outputs in BackwardHookFunction (see call_obj)
            if isinstance(pos[0], Obj):
                what = Const(self.text(n.args[0])[:40] if n.args else "module")
                for o in self.reach(pos[0]):
                    if isinstance(o, Obj) and o.kind in ("torch", "sequential", "modulelist", "local"):
                        o.cfg["full_backward_hook"] = what
            return pos[0]
        if qual in L.WRAPPERS:
            w = Obj("wrapper", qual)
            w.training = True
            w.ctor = self.site(n)
            inner = kw.get("module", pos[0] if pos else UNKNOWN)
            w.attrs["module"] = inner
            return w
        if qual in L.CHECKPOINT and pos:
            # `cp.checkpoint(_inner_forward, x)` is `_inner_forward(x)` (what it returns, what it saves and writes).
            # The non-reentrant one saves through its own pack hook (it recomputes what it needs in backward): what
            # the function saves is never version-checked. The reentrant one (the default) saves its inputs.
            packed = st.packed
            if is_false(kw.get("use_reentrant")):
                st.packed = True
            try:
                return self.call(pos[0], pos[1:], {k: v for k, v in kw.items() if k not in L.CHECKPOINT_FLAGS}, n,
                                 st, fr)
            finally:
                st.packed = packed
        if qual in L.AUTOGRAD_FUNCTIONAL and pos:
            return self._autograd_functional(qual, pos, kw, n, st, fr)
        if raw in L.DEEPCOPY or qual in L.DEEPCOPY:
            return Cloner(-1).value(pos[0]) if pos else UNKNOWN
        if qual in L.EINSUM_PATTERN_LAST:
            info = self.kb.get("torch.einsum")
            operands = [v for v in pos if not (isinstance(v, Const) and isinstance(v.value, str))]
            if info is not None:
                return self.apply(info, [Const("pattern"), *operands], {}, n, st, fr, display="einsum")
        if qual in L.VIEW_OF_FIRST:
            info = self.kb.get("torch.reshape")
            pattern = pos[1] if len(pos) > 1 else kw.get("pattern")
            copies = bool(pos) and isinstance(pattern, Const) and isinstance(pattern.value, str) and \
                rearrange_copies(pattern.value)
            if copies and not sized_view_of(pos[0]):
                return self.new_tensor([pos[0]], st, raw.rsplit(".", 1)[-1])
            if info is not None and pos:
                out = self.apply(info, [pos[0], UNKNOWN_NUM], {}, n, st, fr, display=raw.rsplit(".", 1)[-1])
                return note_sized(out, raw.rsplit(".", 1)[-1]) if copies else out
        if qual in L.SPLIT_VIEWS:
            info = self.kb.get("torch.split")
            if info is not None and pos:
                return self.apply(info, [pos[0], UNKNOWN_NUM], {}, n, st, fr, display=raw.rsplit(".", 1)[-1])
        if qual in L.NEW_FROM_TENSORS or qual in L.PACK:
            tensors: list[Val] = []
            for v in pos:
                tensors.extend(tensors_in(v) if isinstance(v, Seq) else [v])
            out = self.new_tensor(tensors, st, raw.rsplit(".", 1)[-1])
            # (`x, ps = pack([cls_tokens, x], "b * d")`: the tensor and the shapes, not two rows of one tensor)
            return Seq.of((out, Seq(None, UNKNOWN_NUM)), "tuple") if qual in L.PACK else out
        if qual.startswith(L.DISTRIBUTIONS_PREFIX) and qual.rsplit(".", 1)[-1][:1].isupper():
            d = Obj("dist", qual)
            d.cfg["args"] = Seq.of([*pos, *kw.values()], "tuple")
            return d
        if qual in L.CONV_ACT_MODULES:
            return self._conv_act_module(qual, pos, kw, n)
        if qual in L.BUILD_ACTIVATION:
            cfg = kw.get("cfg", pos[0] if pos else None)
            ents = cfg.entries() if isinstance(cfg, Seq) else None
            typ = ents.get("type") if ents is not None else None
            info = self.kb.get(L.ACT_TYPES.get(typ.value, "")) if isinstance(typ, Const) and isinstance(
                typ.value, str) else None
            if ents is not None and info is not None:
                return self.construct_module(info, [], {k: v for k, v in ents.items() if k != "type"}, n)
            return None
        kind = L.LIBRARY_MODULES.get(qual)
        if kind is not None:
            o = Obj("library", qual)
            o.training, o.ctor = True, self.site(n)
            pattern = pos[0] if pos else kw.get("pattern")
            if kind == "view" and isinstance(pattern, Const) and isinstance(pattern.value, str) and \
                    rearrange_copies(pattern.value):
                kind = "sized_view"  # `Rearrange("b n (h d) -> (b h) n d")`: a copy but at size 1 (see sized_view_of)
            o.cfg["kind"] = Const(kind)
            return o
        return None

    def _conv_act_module(self, qual: str, pos: list[Val], kw: dict[str, Val], n: ast.Call) -> Obj:
        """mmcv's ConvModule, its source not found: a conv whose output goes through the activation ``act_cfg``
        names (see knowledge.libraries); ``cfg["act"]`` is that activation's torch module, None for none, unknown
        when the configuration cannot be read."""
        o = Obj("library", qual)
        o.training, o.ctor = True, self.site(n)
        o.cfg["kind"] = Const("conv_act")

        def arg(name: str) -> Val | None:
            i = L.CONV_ACT_ARG_INDEX[name]
            return kw.get(name, pos[i] if len(pos) > i else None)

        act: Val = Const(L.ACT_TYPES[L.CONV_ACT_DEFAULT])
        act_type: str | None = L.CONV_ACT_DEFAULT
        cfg, order = arg("act_cfg"), arg("order")
        if cfg is not None:
            ents = cfg.entries() if isinstance(cfg, Seq) else None
            typ = ents.get("type") if ents is not None else None
            if isinstance(cfg, Const) and cfg.value is None:
                act, act_type = Const(None), None
            elif isinstance(typ, Const) and isinstance(typ.value, str) and typ.value in L.ACT_TYPES:
                act, act_type = Const(L.ACT_TYPES[typ.value]), typ.value
            else:
                act, act_type = UNKNOWN, None
        if order is not None and not (isinstance(order, Seq) and order.items is not None and order.items
                                      and isinstance(order.items[-1], Const) and order.items[-1].value == "act"):
            act = UNKNOWN  # the activation is not known to come last
        o.cfg["act"] = act
        inplace = arg("inplace")
        o.inplace = act_type is not None and act_type not in L.ACT_WITHOUT_INPLACE and not is_false(inplace) and (
            inplace is None or is_true(inplace))
        return o

    def isinstance(self, v: Val, cls: Val) -> Val:
        classes = list(cls.items) if isinstance(cls, Seq) and cls.items is not None else [cls]
        answers = []
        for c in classes:
            if isinstance(c, Ref):
                q = self.canon(c.qual)
                if isinstance(v, Const) and v.known and not isinstance(v, Cond) and q in _BUILTIN_TYPES:
                    answers.append(isinstance(v.value, _BUILTIN_TYPES[q]))  # `isinstance(name, str)` on "relu"
                elif (kind := self._callable_kind(v)) is not None and q in _CALLABLE_TYPE_TESTS:
                    # `isinstance(act_layer, str)` on nn.ReLU, `isinstance(norm_layer, functools.partial)`
                    answer = _CALLABLE_TYPE_TESTS[q].get(kind)
                    if answer is None:
                        return UNKNOWN_NUM
                    answers.append(answer)
                elif isinstance(v, T) and q in ("torch.Tensor", "Tensor"):
                    answers.append(True)
                elif isinstance(v, T) and q in CONTAINER_TYPES and not v.maybe_tensor and not v.maybe_tuple:
                    # `if isinstance(forecast, tuple):` on what an op returned: a tensor is no tuple, and iterating
                    # it (`tuple(z.transpose(-1, -2) for z in forecast)`) is not what the code does with it
                    answers.append(False)
                elif isinstance(v, T) and q in PARAMETER and not v.maybe_tensor and (
                        is_param := _is_parameter(v)) is not None:
                    answers.append(is_param)  # `[w] if isinstance(w, nn.Parameter) else list(w)`
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
                elif isinstance(v, Obj) and v.kind in CONTAINER_MODULES.values() and v.qual:
                    if q in (v.qual, "torch.nn.Module"):
                        answers.append(True)
                    elif (cinfo := self.kb.get(q)) is not None and cinfo.kind == "module":
                        answers.append(False)
                    else:
                        return UNKNOWN_NUM
                elif isinstance(v, Obj) and v.kind == "local" and v.info is not None and (
                        answer := self._local_is_torch(v.info, q)) is not None:
                    answers.append(answer)  # a module class of the workspace against `nn.ReLU`
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

    def _local_is_torch(self, info: ClassInfo, q: str) -> bool | None:
        """Is an instance of the workspace class ``info`` one of the torch module class ``q``? True when a base in
        its MRO is ``q``; False when ``q`` is a concrete torch module and every base is a workspace class or a
        torch module class (none of them ``q``); None when a base is unknown (a library's class may derive
        from ``q``)."""
        cinfo = self.kb.get(q)
        if cinfo is None or cinfo.kind != "module":
            return None
        for c in info.mro():
            for b in c.bases:
                if isinstance(b, Ref):
                    bq = self.canon(b.qual)
                    if bq == q:
                        return True
                    binfo = self.kb.get(bq)
                    if bq != "torch.nn.Module" and (binfo is None or binfo.kind != "module"):
                        return None
                elif not isinstance(b, ClassV):
                    return None
        return False

    def _callable_kind(self, v: Val) -> str | None:
        """"class", "function" or "partial" for a value that surely is one (a torch name is a class when
        capitalised, else of unknown kind: "callable"); None for anything else."""
        if isinstance(v, Partial):
            return "partial"
        if isinstance(v, ClassV):
            return "class"
        if isinstance(v, (Func, Bound)):
            return "function"
        if isinstance(v, Ref) and self.is_callable_object(v):
            return "class" if self.canon(v.qual).rsplit(".", 1)[-1][:1].isupper() else "callable"
        return None

    def new_tensor(self, inputs: list[Val], st: State, desc: str, min_rg: int = NO) -> T:
        rg = min_rg
        prov: frozenset[Any] = frozenset()
        for v in inputs:
            if isinstance(v, T):
                rg = max(rg, v.rg)
                prov |= v.prov
            else:
                r, p = tensor_facts(v, real_only=True)  # a list of Python numbers is not a graph
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

    def float32(self, t: T) -> bool:
        """Is ``t`` known to be float32? A tensor that requires grad is floating point or complex; in a file that
        never mentions another real precision (no half, bfloat16, double, autocast, a dtype chosen at run time) a
        real one is the default float32. A file that works with complex numbers or FFTs makes some complex ones
        (see ``T.cplx``); the others stay real."""
        if (t.rg != YES and not t.f32) or t.maybe_tensor or t.cplx:
            return False
        mod = self.mod
        got = self.fp32_files.get(mod.path)
        if got is None:
            # (code only: a comment that mentions mixed precision is not any)
            got = self.fp32_files[mod.path] = not _mentions_other_precision(mod.lines)
        return got

    def _save_args(self, info: OpInfo, bound: dict[str, Val], args: Iterable[str], n: ast.AST, st: State,
                   display: str, receiver_node: ast.AST | None, in_seq: Obj | None, module: Obj | None) -> frozenset[Any]:
        """Record what the op ``info`` saves of the arguments ``args`` (step 2 of apply); the graph uses of the
        leaves it keeps."""
        prov: frozenset[Any] = frozenset()
        site = self.site(n)
        if module is not None and in_seq is not None and module.ctor is not None:
            site = module.ctor
        for a in args:
            for sv in tensors_in(bound.get(a)):
                if info.kind == "operator" and sv.maybe_tensor:
                    continue
                if st.autocast and a in info.autocast_casts:
                    continue
                if a.startswith("self."):
                    what = f"its {a[5:]}"
                else:
                    argtext = self._arg_text(n, info, a, receiver_node) if in_seq is None else ""
                    what = f"its input `{argtext}`" if argtext and len(argtext) <= 40 else "its input"
                if self.inference_spans and not st.inference and not sv.maybe_tensor and not st.silent \
                        and self.inference_tensor(sv) and any(
                            isinstance(v, T) and v.rg == YES and not v.maybe_tensor for v in bound.values()):
                    # made inside inference_mode, and this op must keep it for a graph: torch refuses at the op
                    self.report(Hazard("inference_saved", "call", self.site(n), self.stmt_site(), display,
                                       self.text(n), extra=(("what", what),)))
                self.save(sv, st, SaveRecord(display, what, site, info.name,
                                             sv.view_site if sv.view is not None else None, a))
                if sv.leaf:
                    prov |= {self.graph_use(s) for s in sv.storages if s.leaf}
        return prov

    def _expanded(self, info: OpInfo, pos: list[Val], base: T, n: ast.AST) -> Site | None:
        """Where the expand was, when the view ``info`` makes of ``base`` broadcasts a dimension (``expand``,
        ``expand_as``, ``broadcast_to``; not ``x.expand(-1, -1)``), or keeps one its base broadcast (a transpose, an
        unsqueeze of an expanded tensor)."""
        short = _short(info)
        if short in _EXPANDS:
            sizes = [v for v in pos[1:] if not isinstance(v, T)]
            if len(sizes) == 1 and isinstance(sizes[0], Seq) and sizes[0].items is not None:
                sizes = list(sizes[0].items)
            if short == "expand" and sizes and all(isinstance(v, Const) and v.known and v.value in (-1, 1)
                                                   for v in sizes):
                return None  # nothing broadcast
            return self.site(n)
        return base.expanded if short in _KEEPS_EXPANDED else None

    def stale_views(self, bound: dict[str, Val], n: ast.AST, st: State, display: str,
                    receiver_node: ast.AST | None, info: OpInfo | None) -> None:
        """An op with grad on reads one of several views (``list(weight)``, ``w.unbind(0)``, ``x.split(n)``) of a
        tensor that requires grad, after its storage was written in place (an optimizer step on the parameter, a
        write through the base or another view): torch would rebuild the view's graph, which it cannot do for a
        multi-output view, and raises at this op."""
        for name, v in bound.items():
            if isinstance(v, T) and not v.made:
                continue
            for t in tensors_in(v):
                if not t.made or t.maybe_tensor or not ((t.view == "multi" and t.rg == YES) or t.view == "nograd"):
                    continue
                for rec in self.recording:
                    if t.made < rec[3]:
                        # views made before the call being summarised: whether they are stale depends on what
                        # happened to their tensor since, which the call's key does not hold; it runs each time
                        rec[1] = False
                if not st.heap.wrote and not st.heap.steps:
                    continue
                w = self.stale_view(t, st)
                if w is None or (t.made, w[0]) in self.stale_reported:
                    continue
                self.stale_reported.add((t.made, w[0]))
                if isinstance(n, ast.Call) and info is not None:
                    text = self._arg_text(n, info, name, receiver_node)
                elif isinstance(n, ast.Attribute):
                    text = self.text(n.value)  # `v.grad_fn`
                elif isinstance(n, ast.BinOp):
                    text = self.text(n.left if name in ("self", "input") else n.right)
                else:
                    text = ""
                text = text if text and len(text) <= 40 else self.text(n)[:40]
                related: tuple[tuple[Site, str], ...] = ()
                nograd = t.view == "nograd"
                use = self.site(n)
                if t.view_site is not None:
                    related += ((t.view_site, "the view was made here, with grad off" if nograd
                                 else f"the views were made here ({t.view_op})"),)
                # A view made with grad off, or one of several views, goes stale through an in-place write into its
                # base (or another view of it): that write (in this file) is the finding, as any write that breaks
                # what autograd needs, and the use is where torch raises. Several views made with grad on also go
                # stale through an optimizer step; that finding stays at the use, the first place their graph is
                # asked for (the step is where it belongs, not what to change).
                at_write = (nograd or not w[2]) and w[0].path == use.path and w[0].line != use.line
                if at_write:
                    related += ((use, f"`{text}` is used here ({display}), with grad on: torch raises here"),)
                else:
                    related += ((w[0], f"{w[1]} modifies the tensor {'it views' if nograd else 'they view'} in place "
                                       f"here"),)
                self.report(Hazard("view_stale", "use", w[0] if at_write else use,
                                   w[0] if at_write else self.stmt_site(), display, text,
                                   related=related, extra=(("view_op", t.view_op), ("write_op", w[1]),
                                                           ("write_site", w[0]), ("view_site", t.view_site),
                                                           ("nograd", nograd), ("use_site", use),
                                                           ("at_write", at_write))))
                return

    def apply(self, info: OpInfo, pos: list[Val], kw: dict[str, Val], n: ast.AST, st: State, fr: Frame, *,
              display: str, form: str = "", target_text: str = "", extra: tuple[tuple[str, Any], ...] = (),
              module: Obj | None = None, in_seq: Obj | None = None, receiver_node: ast.AST | None = None) -> Val:
        kb = self.kb
        if any(isinstance(v, Obj) and v.kind == "opaque" for v in pos):
            # `torch.min(critic1(o, a).q, critic2(o, a).q)`: fields of outputs are tensors computed with them
            pos = [self.field_tensor(v, st) if isinstance(v, Obj) and v.kind == "opaque" else v for v in pos]
        if info.name in _BINARY_OVERLOADS and len(pos) >= 2 and isinstance(pos[1], T):
            # torch.max(a, b) / a.min(b): the elementwise maximum/minimum, not a reduction
            info = kb.get(_BINARY_OVERLOADS[info.name]) or info
        if info.name == "torch.einsum" and len(pos) == 2 and isinstance(pos[1], Seq) and pos[1].items is not None:
            # `torch.einsum("nc,ck->nk", [q, queue])`: the operands given as one list (the older signature)
            pos = [pos[0], *pos[1].items]
        bound = self.bind(info, pos, kw)
        if info.name == "torch.nn.functional.embedding" and renorms(mn := bound.get("max_norm")) \
                and isinstance(w := bound.get("weight"), T):
            # F.embedding(ids, weight, max_norm=...) renormalizes the rows it looks up, in place, before the lookup
            fn = self.text(n.func) if isinstance(n, ast.Call) else display
            self.mutate(w, st, form="module_call", node=n, op=f"{fn}(max_norm={mn.value!r})",
                        target=self._arg_text(n, info, "weight", receiver_node), no_grad_op=True, param_step=False,
                        extra=(("renorm", True),))
        if info.name == "Tensor.type" and len(pos) < 2 and "dtype" not in kw:
            return UNKNOWN_NUM  # `x.type()`: the type's name, a string
        if info.name in _SAME_DTYPE_CASTS and info.name != "Tensor.type_as" and any(
                isinstance(v, Ref) and v.qual in _INTEGER_DTYPES for v in (*pos[1:], kw.get("dtype"))):
            # `h.to(torch.int64)`, `x.type(torch.LongTensor)`: an integer or bool copy, which cannot require grad
            # (as `h.long()` is)
            info = kb.get("Tensor.long") or info
            bound = self.bind(info, pos[:1], {})
        if info.name in _DTYPE_CASTS and info.view_of:
            src = bound.get(info.view_of)
            if not (isinstance(src, T) and (src.origin in _FLOAT32_ORIGINS or (
                    info.name == "Tensor.float" and self.float32(src)))):
                # `state.float()` is `state` itself only when it is already float32; of a tensor whose dtype is not
                # known (a parameter, a buffer, a bf16 activation) it may as well be a copy: no alias is assumed
                info = dataclasses.replace(info, view_of=None)
        elif info.name in _SAME_DTYPE_CASTS and not info.view_of:
            # `h.to(torch.float32)`, `p.type_as(q)`: the tensor itself when it already has that dtype
            src, to = bound.get("self"), bound.get("dtype", bound.get("other"))
            if info.grad_from is None:  # (`x.to(y)` takes y's dtype and device, never its gradient)
                info = dataclasses.replace(info, grad_from=("self",))
            if info.name == "Tensor.to" and isinstance(src, T) and src.leaf and src.rg == YES and not src.maybe_tensor \
                    and src.view is None and _to_device(n):
                # `torch.tensor(0., requires_grad=True).to(device)`: on the device it is already on (the CPU it was
                # made on, or the device it was made with) `.to` returns the leaf itself, not a copy
                call = self.text(n)
                call = call[call.rfind(".to("):] if ".to(" in call else call
                return src.with_(view_op=f"`{call}` returns this very tensor when it is already on that device (the "
                                         "CPU for a tensor made without one)")
            if isinstance(src, T) and self.float32(src) and not is_true(bound.get("copy")) and (
                    (isinstance(to, Ref) and to.qual in _FLOAT32_DTYPES) or (isinstance(to, T) and self.float32(to))):
                info = dataclasses.replace(info, view_of="self")
        if info.name in _ANY_CASTS and info.view_of == "self" \
                and isinstance(src := bound.get("self"), T) and src.leaf and src.rg == YES and src.view is None:
            # `w.float()`, `w.to(torch.float32)` of a float32 leaf: the leaf itself, not a view of it (torch's error
            # names the leaf)
            call = self.text(n) if isinstance(n, ast.Call) else display
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and f".{n.func.attr}(" in call:
                call = call[call.rfind(f".{n.func.attr}("):]
            return src.with_(view_op=f"`{call}` returns this very tensor when it already has that dtype")
        if "dim" in bound or (info.kind in ("function", "method") and len(pos) >= 2
                              and not isinstance(pos[1], T)):
            # `x.max(-1)`, `torch.max(x, 1)`: the reduction along a dimension (a (values, indices) pair), not the
            # whole-tensor one; `x.max(y)` was taken for the elementwise maximum above
            short = info.name.split(".", 1)[1] if info.name.startswith("Tensor.") else None
            var = kb.get(f"{info.name}[dim]") or (kb.get(f"torch.{short}[dim]") if short else None)
            if var is not None:
                info = var
                bound = self.bind(info, pos, kw)
        if _all_ones(bound.get("output_size", module.cfg.get("output_size") if module is not None else None)):
            # adaptive_avg_pool2d(x, 1), AdaptiveAvgPool2d((1, 1)): a global average, computed as a mean
            info = kb.get(f"{info.name}[output_size=1]") or info
        for opt in _OPTIONAL_TENSORS:
            # embedding_bag(..., per_sample_weights=w): the call that passes the optional tensor also saves it
            if isinstance(bound.get(opt), T) and (var := kb.get(f"{info.name}[{opt}]")) is not None:
                info = var
                bound = self.bind(info, pos, kw)
        # inplace=True on a functional: switch to its in-place variant
        if info.inplace_kwarg and module is None and is_true(bound.get(info.inplace_kwarg)):
            var = kb.get(f"{info.name}[{info.inplace_kwarg}=True]")
            if var is not None:
                kwnode = next((k for k in getattr(n, "keywords", []) if k.arg == info.inplace_kwarg), None)
                kwsite = self.site(kwnode) if kwnode is not None else self.site(n)
                extra = (*extra, ("kw_span", kwsite), ("ctor_span", self.site(n)), ("positional", kwnode is None))
                form = form or "inplace_kwarg"
                display = f"{display}(inplace=True)"
                info = var
                bound = self.bind(info, pos, kw)
        if (not info.output_requires_grad or info.backward_not_implemented) and not info.mutates \
                and not info.view_of and not info.multi_output_view:
            self.cut_at = n  # see e_Call
        for arg, (wsaves, wout) in info.when_number.items():
            if arg in bound and not isinstance(bound[arg], T):
                info = dataclasses.replace(info, saves=wsaves, saves_output=wout)
        off_alias: Val | None = None
        if info.train_only:
            drop_p = bound.get("p", module.cfg.get("p") if module is not None else None)
            if isinstance(drop_p, Const) and drop_p.known and drop_p.value == 0:
                return self._first_tensor(info, bound)
            if isinstance(drop_p, Const) and not drop_p.known and drop_p.value == 0 and not info.mutates:
                # a rate that defaults to 0 and may be set (see widen_default): at 0, dropout hands back its input
                # itself, so the result may be that very tensor
                off_alias = self._first_tensor(info, bound)
            training = bound.get("training")
            if module is not None:
                if module.training is False:
                    return self._first_tensor(info, bound)
            elif is_false(training) or (training is None and info.train_kwarg_default is False):
                return self._first_tensor(info, bound)
        if module is not None:
            # the layer's own parameters, each read once for this call (a parametrized one is computed anew)
            for a in (*info.saves, *(c for conds in info.saves.values() for c in conds)):
                if a.startswith("self.") and a not in bound:
                    if a[5:] in info.buffers:  # CrossEntropyLoss(weight=w) keeps `w` itself; no weight: nothing
                        given = module.cfg.get(a[5:])
                        if isinstance(given, T):
                            bound[a] = given
                        continue
                    bound[a] = self.module_param(module, a[5:], st, forward=True)
                    own = module.cfg.get(f"_parametrization.{a[5:]}")
                    original = module.cfg.get(f"_parametrization_original.{a[5:]}")
                    if isinstance(own, Obj) and isinstance(original, T) and isinstance(n, ast.Call):
                        got = self.call_obj(own, [original], {}, n, st, fr, in_seq=None)
                        if isinstance(got, T):
                            bound[a] = got
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
            r, pr = tensor_facts(v)
            rgmap[name] = r
            prov |= pr
        any_rg = any(rgmap.values())
        grad_on = not st.no_grad and not info.no_grad
        if grad_on and not st.silent:
            self.stale_views(bound, n, st, display, receiver_node, info)
        if grad_on and prov and self.active_loops and st.heap.steps:
            for (o, stamp, c) in prov:
                if c is not None and c[0] not in self.carry_use and any(
                        e.stamp > stamp and e.updates(o) for e in st.heap.steps):
                    # the first op that builds on a value carried over a step from the previous iteration
                    self.carry_use[c[0]] = (self.site(n), display)
        if module is not None and grad_on and any_rg and any(a.startswith("self.") for a in info.saved_args(rgmap)):
            # the graph keeps this module's parameters (Linear keeps its weight when its input requires grad):
            # an optimizer step on them before backward breaks it
            prov = prov | {self.graph_use(module)}
        # 1. in-place writes
        mutated: T | None = None
        saving = grad_on and any_rg and (info.output_requires_grad or bool(info.mutates))
        presaved: set[str] = set()
        if saving and info.mutates:
            # An operand the op saves that is (a view of) the tensor it writes, `y[:, 1:] *= y[:, :1]`, `y.mul_(y)`:
            # it is saved before the write, which then changes it (torch raises in backward). Save it first. (Not
            # for an unknown argument itself, which may as well be a detached one.)
            written = frozenset(s for m in info.mutates if isinstance(mv := bound.get(m), T) for s in mv.storages)
            for a in info.saved_args(rgmap):
                if a not in info.mutates and any(not sv.maybe_tensor and sv.rg == YES and not sv.storages.isdisjoint(
                        written) for sv in tensors_in(bound.get(a))):
                    presaved.add(a)
            if presaved:
                prov |= self._save_args(info, bound, presaved, n, st, display, receiver_node, in_seq, module)
        if info.kind == "method" and isinstance(n, ast.Call) and receiver_node is not None and "self" in info.mutates \
                and _short(info) in CHECKED_METHODS and self.read_overlap(
                    bound.get("self"), receiver_node, [*n.args, *(k.value for k in n.keywords)], st, form="method",
                    op=display, target=self.text(receiver_node), site=self.site(n)):
            return bound["self"]  # `h[:-1].add_(h[1:])`: refused at the call
        for m in info.mutates:
            mv = bound.get(m)
            if isinstance(mv, T):
                tgt = target_text or (f"{self.seq_prev}(...)" if in_seq is not None and self.seq_prev else
                                      self._arg_text(n, info, m, receiver_node))
                f = form or ("method" if info.kind == "method" else "function")
                ex = extra
                if f == "method" and isinstance(n, ast.Call):
                    ex = (*ex, ("receiver_span", self.site(receiver_node) if receiver_node is not None else self.site(n)),
                          ("call_span", self.site(n)), ("out_of_place", (info.out_of_place or "").rsplit(".", 1)[-1] or None),
                          ("standalone", self._standalone(n)))
                elif f == "function" and isinstance(n, ast.Call):
                    argnode = self._arg_node(n, info, m)
                    ex = (*ex, ("func_text", self.text(n.func)),
                          ("out_of_place_func", info.out_of_place.replace("Tensor.", "torch.") if info.out_of_place else None),
                          ("arg_span", self.site(argnode) if argnode is not None else self.site(n)),
                          ("call_span", self.site(n)), ("standalone", self._standalone(n)))
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
                    if module.kw_site is not None and not _within(module.kw_site, module.ctor) \
                            and module.kw_site.path == self.mod.path:
                        # the flag was turned on after the layer was made (`m.inplace = True` in a loop over the
                        # model's modules, a partial's keyword): that line is what makes this call write in place,
                        # and what a fix changes. The finding sits there (when it is in this file: findings stay
                        # in the file of the write); the call is a related place.
                        site = module.kw_site
                        ex = (*ex, ("called_at", self.site(n)))
                        related = ((self.site(n), f"{display} is called here, in place"),)
                        if module.ctor is not None:
                            related += ((module.ctor, f"{display} was created here"),)
                    elif module.kw_site is not None and not _within(module.kw_site, module.ctor):
                        related = ((module.kw_site, f"{display}: its `inplace` flag is set to True here"),)
                        if module.ctor is not None:
                            related += ((module.ctor, f"{display} was created here"),)
                    elif module.ctor is not None:
                        related = ((module.ctor, f"{display} was created with inplace=True here"),)
                slope = self._negative_slope(info, pos, kw, module)
                if slope is not None and grad_on and mv.rg >= MAYBE and not mv.maybe_tensor and not st.silent:
                    # leaky_relu's in-place backward recovers the input's sign from the output: not for slope < 0
                    self.report(Hazard("neg_slope", f, site or self.site(n), self.stmt_site(), display, tgt,
                                       related=related, extra=(*ex, ("slope", slope))))
                self.mutate(mv, st, form=f, node=n, op=display, target=tgt, extra=ex, no_grad_op=info.no_grad,
                            site=site, related=related, operands_rg=any_rg,
                            operands_yes=any(isinstance(v, T) and v.rg == YES and not v.maybe_tensor
                                             for k, v in bound.items() if k != m))
                if mutated is None:
                    mutated = mv
        out_t = self._out_kw(kw, n, st, display, info, bound) if isinstance(n, ast.Call) else None
        # 2. saves
        site = self.site(n)
        if module is not None and in_seq is not None and module.ctor is not None:
            site = module.ctor
        if saving:
            # (an op whose result never requires grad, like isfinite, builds no graph anyone can backward through)
            prov |= self._save_args(info, bound, [a for a in info.saved_args(rgmap) if a not in presaved], n, st,
                                    display, receiver_node, in_seq, module)
        # 3. the result
        cplx = info.name in _COMPLEX_MAKERS or _complex_dtype(bound.get("dtype")) or (
            info.name not in _REAL_MAKERS and any(isinstance(v, T) and v.cplx for v in bound.values()))
        if info.grad_from is not None:
            any_out = any(rgmap.get(a, False) for a in info.grad_from)
        else:
            any_out = any_rg
        out_rg = YES if any_out and grad_on and info.output_requires_grad else NO
        if not info.output_requires_grad and not info.mutates and not info.view_of and not info.multi_output_view:
            # `torch.ones_like(pred)`, `logits.argmax(1)`, `x > 0`: a result that never requires grad holds no graph,
            # so no module's parameters either (a target made like a prediction is not computed from it)
            prov = frozenset()
        if mutated is not None:
            res: Val = mutated.with_(rg=max(mutated.rg, out_rg) if grad_on else mutated.rg, prov=mutated.prov | prov)
            if isinstance(receiver_node, ast.Name) and isinstance(cur := st.env.get(receiver_node.id), T) \
                    and isinstance(res, T) and cur.storages == mutated.storages \
                    and (res.prov != cur.prov or res.rg != cur.rg):
                # `x.add_(0.05 * grad_x)` as a statement: x now holds what it was computed with, graph included (a
                # later backward through x goes through grad_x's graph)
                st.env[receiver_node.id] = res.with_(rg=max(res.rg, cur.rg), prov=res.prov | cur.prov)
        elif out_t is not None:
            res = out_t
        elif (view_arg := info.view_of or (info.args[0] if info.multi_output_view and info.args else None)) \
                and isinstance(bound.get(view_arg), T) and (
                    not (copies := _copies(info, bound, pos, bound[view_arg])) or (
                        sized_view_of(bound[view_arg]) and _short(info) != "contiguous")):
            base = bound[view_arg]
            assert isinstance(base, T)
            if info.name in ("Tensor.detach", "torch.detach"):
                return T(base.storages, rg=NO, origin="detach")
            if st.no_grad and base.rg >= MAYBE:  # made under no_grad: that outranks being one of several outputs
                view = "nograd"
            elif st.no_grad and not st.silent and not base.maybe_tensor:
                # (not on a path that runs only while autograd is off: what follows it runs so too)
                view = "nograd_if"
            elif info.multi_output_view:
                view = "multi"
            elif base.view in SPECIAL_VIEWS:
                view = base.view
            else:
                view = "view"
            vt = T(base.storages, rg=out_rg if grad_on else NO, leaf=base.leaf, view=view, expanded=self._expanded(
                       info, pos, base, n),
                   view_op=f"{display}()" if info.multi_output_view else base.view_op or display,
                   prov=prov, alias_of=base.alias_of, alias_site=base.alias_site, origin=display,
                   view_site=self.site(n), noncontig=_strided(info, bound, base),
                   made=view_made(view, base, self.stamp, bool(info.multi_output_view)), cplx=cplx)
            if info.multi_output_view:
                return Seq(None, vt, "tuple")
            res = note_sized(vt, display) if copies else vt
        elif info.returns_tuple and info.n_outputs and not only_maybe and (
                info.kind != "module" or info.saved_output_indices):
            # max(dim), sort, topk: separate outputs, of which backward reads some (the indices); LSTM: the output
            # sequence, which its backward reads, and the final state (itself a tuple, `(h, c)`)
            grad_idx = info.grad_output_indices  # topk, sort, max(dim): the indices never require grad
            nested = info.kind == "module"
            outs = [T(frozenset({Storage(f"{display}[{i}]")}), rg=out_rg if not grad_idx or i in grad_idx else NO,
                      prov=prov, origin=display,
                      maybe_tuple=nested and i not in (info.saved_output_indices or ()), cplx=cplx)
                    for i in range(info.n_outputs)]
            if grad_on and any_rg and info.saves_output and info.output_saved(rgmap):
                for i in (info.saved_output_indices or range(info.n_outputs)):
                    if i < len(outs):
                        self.save(outs[i], st, SaveRecord(display, f"its output [{i}]", site, info.name))
            return Seq.of(tuple(outs), "tuple")
        else:
            # Ops that return tuples (topk, sort, max(dim), LSTM): unpacking yields their outputs, not views.
            if only_maybe:
                out_rg = max((v.rg for v in bound.values() if isinstance(v, T)), default=NO)
            res = T(frozenset({Storage(display)}), rg=out_rg, prov=prov, origin=display,
                    maybe_tuple=info.returns_tuple, maybe_tensor=only_maybe, cplx=cplx,
                    sure=out_rg == YES and not only_maybe and any(
                        isinstance(v, T) and v.rg == YES and not v.maybe_tensor and (v.leaf or v.sure)
                        for a, v in bound.items() if info.grad_from is None or a in info.grad_from))
            if only_maybe:
                return res
        if grad_on and any_rg and info.saves_output and info.output_saved(rgmap) and isinstance(res, T):
            self.save(res, st, SaveRecord(display, "its output", site, info.name))
        if isinstance(res, T) and res.view is None and self._linear_view(info, bound, module, fr):
            # F.linear with a bias flattens an input of more than two dimensions, runs addmm and views the result
            # in the input's shape: what a custom Function's forward returns from it is a view made inside the
            # Function, which torch will not let the caller modify in place
            res = res.with_(view="view", view_op=f"{display} (with a bias, on an input of more than two dimensions, "
                                                 "returns a view of its result)", view_site=site)
        if isinstance(res, T) and "pool" in info.name.lower() and is_true(
                bound.get("return_indices", module.cfg.get("return_indices") if module is not None else None)):
            # MaxPool2d(2, return_indices=True), F.max_pool2d(x, 2, return_indices=True): (values, indices), two
            # tensors of their own; the indices carry no gradient
            return Seq.of((res, T(frozenset({Storage(f"{display} indices")}), rg=NO, origin=display)), "tuple")
        return join(off_alias, res) if off_alias is not None else res

    def prune(self, o: Obj, given: Val | None) -> None:
        """``prune.l1_unstructured(layer, "weight", 0.3)``: the parameter becomes ``weight_orig``, a buffer
        ``weight_mask`` (no gradient: writing into it is no leaf's in-place write) is registered, and ``weight`` is
        ``weight_orig * weight_mask``, recomputed before each forward (the product keeps the mask for the
        original's gradient)."""
        name = known_str(given) if given is not None else None
        if name is None or o.kind not in ("torch", "local"):
            return
        self.touched(o)
        original = self.module_param(o, name)
        self.set_param(o, f"{name}_orig", original)
        self.set_param(o, f"{name}_mask", T(frozenset({Storage(f"`{name}_mask` is the pruning mask (a buffer)",
                                                                o.ctor)}), rg=NO, origin=f"{name}_mask"))
        o.cfg[f"_parametrized.{name}"] = Const("prune")
        o.cfg[f"_parametrized_by_hook.{name}"] = Const(True)

    def parametrize(self, qual: str, o: Obj, pos: list[Val], kw: dict[str, Val]) -> None:
        """``spectral_norm(m)``, ``weight_norm(m)``, ``orthogonal(m)``, ``register_parametrization(m, "weight", P())``:
        from now on ``m.weight`` is computed from its original at each read (a new tensor, not a leaf: see
        module_param); the original is the leaf the optimizer updates, reached as
        ``m.parametrizations.weight.original`` (``original0``/``original1`` for weight_norm), or ``m.weight_orig``
        (``m.weight_g``/``m.weight_v``) with the older hook-based utilities."""
        short = qual.rsplit(".", 1)[-1]
        given = pos[1] if len(pos) > 1 else kw.get("tensor_name" if short == "register_parametrization" else "name")
        name = known_str(given) if given is not None else "weight"
        if name is None or o.kind not in ("torch", "local"):
            return
        kind = short if short in ("spectral_norm", "weight_norm", "orthogonal") else "parametrization"
        self.touched(o)
        original = self.module_param(o, name)
        new_style = ".parametriz" in qual
        if kind == "weight_norm":
            made = {k: T(frozenset({Storage(f"`{name}{k}` is a parameter (weight_norm)", o.ctor, leaf=True,
                                            param_of=o)}), rg=original.rg, leaf=original.leaf, origin=f"{name}{k}")
                    for k in ("_g", "_v")}
            for k, t in made.items():
                self.set_param(o, f"{name}{k}", t)
            originals: dict[str, Val] = {"original0": made["_g"], "original1": made["_v"]}
        else:
            originals = {"original": original}
            if not new_style:
                self.set_param(o, f"{name}_orig", original)
            p = pos[2] if len(pos) > 2 else kw.get("parametrization")
            if kind == "parametrization" and isinstance(p, Obj) and p.kind == "local" and p.info is not None \
                    and p.info.find_method("forward") is not None:
                # the code's own parametrization module: each read of `m.weight` runs its forward on the original
                # (a power iteration that updates its buffers in place, then divides by what they give)
                o.cfg[f"_parametrization.{name}"] = p
                o.cfg[f"_parametrization_original.{name}"] = original
        o.cfg[f"_parametrized.{name}"] = Const(kind)
        if not new_style:
            o.cfg[f"_parametrized_by_hook.{name}"] = Const(True)
        if new_style:
            holder = o.attrs.get("parametrizations")
            if not isinstance(holder, Obj):
                holder = Obj("namespace", "torch.nn.utils.parametrize.ModuleDict")
                self.set_attr(o, "parametrizations", holder)
            entry = Obj("namespace", "torch.nn.utils.parametrize.ParametrizationList")
            entry.attrs.update(originals)
            holder.attrs[name] = entry

    def _linear_view(self, info: OpInfo, bound: dict[str, Val], module: Obj | None, fr: Frame) -> bool:
        """Is this linear layer's output, with a bias, computed in a custom autograd Function's own forward?"""
        fi = fr.func
        if fi is None or fi.cls is None or getattr(fi.node, "name", "") != "forward" \
                or not self._is_function_class(fi.cls):
            return False
        if info.name == "torch.nn.functional.linear":
            return isinstance(bound.get("bias"), T)
        return module is not None and info.name == "torch.nn.Linear" and not is_false(module.cfg.get("bias"))

    def _autograd_functional(self, qual: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                             fr: Frame) -> Val:
        """``jacobian(func, inputs)``, ``vjp(func, inputs, v)``...: ``func`` runs on its inputs made differentiable, each
        a new leaf that requires grad (``inp.detach().requires_grad_()``), or, with ``create_graph=True`` and an
        input that requires grad, a view of that input (``inp.view_as(inp)``, a view of a leaf when it is one). An
        in-place write into one inside ``func`` is refused as a write into a leaf."""
        func = pos[0]
        given = pos[1] if len(pos) > 1 else kw.get("inputs", UNKNOWN)
        inputs = list(given.items) if isinstance(given, Seq) and given.kind == "tuple" and given.items is not None \
            else [given]
        made: list[Val] = []
        what = qual.rsplit(".", 1)[-1]
        for v in inputs:
            if not isinstance(v, T):
                made.append(v)
            elif is_true(kw.get("create_graph")) and v.rg == YES and not v.maybe_tensor:
                made.append(v.with_(view="view", view_op=f"{what} (create_graph=True): `inp.view_as(inp)`",
                                    view_site=self.site(n)))
            else:
                made.append(T(frozenset({Storage(f"an input {what} made a leaf that requires grad", self.site(n),
                                                 leaf=True)}), rg=YES, leaf=True, origin=what))
        outer, st.no_grad = st.no_grad, False  # (they run func under enable_grad, whatever the caller's mode)
        try:
            self.call(func, made, {}, n, st, fr)
        finally:
            st.no_grad = outer
        return UNKNOWN

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

    def set_requires_grad(self, t: T, flag: Val, node: ast.expr | None, st: State, fr: Frame) -> T:
        """``t.requires_grad_(flag)`` / ``t.requires_grad = flag``: the tensor ``node`` names changes its flag."""
        if is_false(flag):
            made = t.with_(rg=NO, leaf=False)
            # a module's parameter (`for p in model.llm.parameters(): p.requires_grad_(False)`): the module's own
            # entry for it stops requiring grad too, as torch's flag is on the one tensor
            # (a parameter got by iterating `.parameters()` stands for each parameter of its module)
            for sto in t.storages:
                owner = sto.param_of
                if isinstance(owner, Obj):
                    every = sto not in _owner_storages(owner)
                    if every and owner.kind == "torch":
                        for k in ("weight", "bias"):  # a torch layer's parameters, made when first read
                            self.module_param(owner, k)
                    for k, pv in list(owner.params.items()):
                        if isinstance(pv, T) and (every or sto in pv.storages) and pv.rg != NO:
                            self.set_param(owner, k, pv.with_(rg=NO))
        else:
            leaf = t.view is None and not t.prov
            if leaf:  # the very tensor becomes a leaf that requires grad: every alias of it sees that
                for sto in t.storages:
                    sto.leaf = True
                    sto.desc = f"made a leaf with requires_grad_() ({sto.desc})" if sto.desc else \
                        "made a leaf with requires_grad_()"

                def of_it(v: Val) -> T | None:
                    """``v`` as a view of ``t`` that now views a leaf requiring grad, or None."""
                    if isinstance(v, T) and v.view is not None and not v.leaf and v.storages \
                            and v.storages <= t.storages and v.view not in ("nograd", "nograd_if"):
                        return v.with_(rg=YES, leaf=True)
                    return None

                for name, v in list(st.env.items()):
                    # a view taken before (`b = a[:]; a.requires_grad = True`) is now a view of a leaf that requires
                    # grad: torch reports b.requires_grad, and refuses in-place writes to it; so is one an object in
                    # scope holds (`self.rows = self.table[:]`)
                    if (now := of_it(v)) is not None:
                        st.env[name] = now
                    elif isinstance(v, Obj) and v.kind == "local":
                        for k, av in list(v.attrs.items()):
                            if (now := of_it(av)) is not None:
                                self.set_attr(v, k, now)
            # (a view made under no_grad of a tensor that did not require grad, made to require grad itself: now a
            # view made in no_grad mode of a tensor that requires grad, which no write with grad on may modify)
            made = t.with_(rg=YES, leaf=leaf, view="nograd" if t.view == "nograd_if" else t.view)
        if node is not None:
            self.rebind_expr(node, made, st, fr)  # `y.requires_grad_()` as a statement changes y
        return made

    def _drop_detached_saves(self, expr: ast.expr, st: State) -> None:
        """``V.view(b, n, -1)[mask, 0].detach()``: the only way to the backward nodes of the ops written inside a
        detached temporary is the output ``detach()`` drops, so those nodes never run and what they saved (here the
        index ``mask``) is never read: writing it in place afterwards breaks nothing."""
        if not isinstance(expr, (ast.Subscript, ast.Call, ast.BinOp, ast.UnaryOp)) or any(
                isinstance(x, (ast.NamedExpr, ast.Lambda)) for x in ast.walk(expr)):
            return
        path, first, last = self.mod.path, (expr.lineno, expr.col_offset), \
            (expr.end_lineno or expr.lineno, expr.end_col_offset or 0)
        saved = st.heap.saved
        for s, recs in list(saved.items()):
            keep = tuple(r for r in recs if not (r.site.path == path and first <= (r.site.line, r.site.col)
                                                 and (r.site.end_line, r.site.end_col) <= last))
            if len(keep) != len(recs):
                if keep:
                    saved[s] = keep
                else:
                    del saved[s]

    # method calls -------------------------------------------------------------------
    def call_method(self, m: Method, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame) -> Val:
        recv, name = m.recv, m.name
        recv_node = n.func.value if isinstance(n.func, ast.Attribute) else None
        if isinstance(recv, Const) and isinstance(recv.value, str) and name in STR_METHODS:
            return str_method(recv.value, name, pos, kw)
        if isinstance(recv, T):
            if name == "backward":
                self.backward(recv, kw, n, st, fr)
                return NONE
            if name == "register_post_accumulate_grad_hook" and pos and len(self.post_accumulate_hooks) < 8:
                self.post_accumulate_hooks.append((recv, pos[0]))
                return UNKNOWN
            if name == "register_hook" and pos and recv.prov and not recv.maybe_tensor and len(self.tensor_hooks) < 8:
                self.tensor_hooks.append((recv, pos[0]))
                return UNKNOWN
            if name == "detach":
                if recv_node is not None:
                    self._drop_detached_saves(recv_node, st)
                return T(recv.storages, rg=NO, origin="detach")
            if name == "split" and pos and isinstance(pos[0], Const) and isinstance(pos[0].value, str):
                return Seq(None, Const("", known=False), "list")  # str.split: Tensor.split never takes a str
            if name == "detach_":
                # any view, grad mode or not: "Can't detach views in-place" (reshape may copy: not known to alias)
                if recv.view is not None and not recv.maybe_tensor and recv.origin not in MAYBE_ALIAS \
                        and not st.silent and recv_node is not None:
                    site = self.site(n)
                    self.report(Hazard("view_detach", "method", site, self.stmt_site(), "detach_",
                                       self.text(recv_node),
                                       extra=(("view_op", recv.view_op or "a view op"), ("call_span", site))))
                elif not recv.maybe_tensor and not recv.leaf and not st.silent and recv_node is not None:
                    # a tensor an op saved as an input (not its output): backward refuses it, "Trying to use a saved
                    # tensor that has been detached in-place" (a leaf, a parameter, may be detached: it is saved
                    # as itself)
                    saved = st.heap.saved
                    recs = tuple(r for s_ in ordered(recv.storages) for r in saved.get(s_, ())
                                 if not r.what.startswith("its output"))
                    if recs:
                        site = self.site(n)
                        self.report_saved(Hazard("saved", "method", site, self.stmt_site(), "detach_",
                                                 self.text(recv_node), recs[:1],
                                                 extra=(("receiver_span", self.site(recv_node)), ("call_span", site),
                                                        ("out_of_place", "detach"),
                                                        ("standalone", self._standalone(n)))), recv, recs, st)
                if recv.view is None and recv_node is not None:
                    # the very tensor stops requiring grad (`x.detach_()` as a statement changes x: writing to it
                    # afterwards is not a leaf's in-place write)
                    # (and it no longer holds a graph: what it was computed from is not part of later graphs)
                    made = recv.with_(rg=NO, leaf=False, prov=frozenset())
                    self.rebind_expr(recv_node, made, st, fr)
                    return made
                return T(recv.storages, rg=NO, origin="detach")
            if name == "requires_grad_":
                flag = pos[0] if pos else kw.get("requires_grad", Const(True))
                return self.set_requires_grad(recv, flag, recv_node, st, fr)
            if name in ("size", "dim", "numel", "item", "tolist", "stride", "data_ptr", "element_size", "nelement",
                        "is_contiguous", "get_device", "numpy"):
                return UNKNOWN_NUM
            if name == "split" and recv.maybe_tensor and "split_size" not in kw and "split_size_or_sections" not in kw \
                    and (not pos or (isinstance(pos[0], Const) and isinstance(pos[0].value, str))):
                # `text.split()`, `line.split(",")`: a string's words (a tensor's split needs a size)
                return Seq(None, Const("", known=False), "list")
            info = self.kb.get(f"Tensor.{name}")
            if info is not None and recv.maybe_tensor and pos and name not in _ARG_TAKING_INPLACE \
                    and name.endswith("_") and (info.params or ("self",)) == ("self",):
                # `semiring.zero_(torch.zeros(...))`: an in-place tensor op that takes no argument, given one, is a
                # method of an object (a semiring class passed in), not of a tensor
                return self.obj_method(self.opaque_for(recv), name, pos, kw, n, st, fr)
            if info is not None:
                return self.apply(info, [recv, *pos], kw, n, st, fr, display=name, receiver_node=recv_node)
            out = self._out_kw(kw, n, st, name)
            if out is None and recv.maybe_tensor:
                # not a tensor method: the unknown value is an object (`model.encode(x)`, `opt.step()`)
                return self.obj_method(self.opaque_for(recv), name, pos, kw, n, st, fr)
            return out if out is not None else UNKNOWN
        if isinstance(recv, Obj):
            return self.obj_method(recv, name, pos, kw, n, st, fr)
        if isinstance(recv, Super):
            return self.super_method(recv, name, pos, kw, n, st, fr)
        if isinstance(recv, ClassV):
            if name == "apply" and self._is_function_class(recv.info):
                return self.autograd_apply(recv.info, pos, kw, n, st, fr)
            return UNKNOWN
        if isinstance(recv, (Seq, Params)) and name in ("append", "extend") and isinstance(n.func, ast.Attribute) \
                and pos and (isinstance(recv, Params) or (name == "extend" and isinstance(pos[0], Params))):
            # `params.extend(model.parameters())`: a list of parameters, what an optimizer given it updates
            self._rebind(n.func.value, Params(self.owners_of(recv) | self.owners_of(pos[0])), st, fr)
            return NONE
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
            elif name == "insert" and len(pos) == 2 and recv.items is not None and (at := known_int(pos[0])) is not None:
                # `layers.insert(1, nn.BatchNorm2d(c))`: in that place, as Python puts it
                items = list(recv.items)
                items.insert(at, pos[1])
                new = Seq.of(tuple(items), recv.kind)
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
        if isinstance(recv, Seq) and recv.keys is not None and isinstance(n.func, ast.Attribute):
            return self.dict_method(recv, name, pos, kw, n.func.value, st, fr)
        if isinstance(recv, Seq) and recv.kelem is not None and not pos and name in ("items", "keys", "values"):
            # `masks.items()` of `{layer: mask for ...}`: the layers with their masks
            if name == "values":
                return Seq(recv.items, None) if recv.items is not None else Seq(None, recv.elem)
            if recv.okeys is not None and recv.items is not None:
                return Seq.of(recv.okeys) if name == "keys" else Seq.of(
                    tuple(Seq.of((k, v), "tuple") for k, v in zip(recv.okeys, recv.items)))
            if name == "keys":
                return Seq(None, recv.kelem)
            return Seq(None, Seq.of((recv.kelem, recv.elem), "tuple"))
        if isinstance(recv, Seq) and name == "pop":
            return recv.elem
        if isinstance(recv, (Seq, Alt)) and name in ("index", "count"):
            return UNKNOWN_NUM
        if isinstance(recv, Ref):
            return UNKNOWN
        return UNKNOWN


# builtin types a known constant (a string, a number, None) is checked against
_BUILTIN_TYPES: dict[str, type | tuple[type, ...]] = {
    "builtins.str": str, "builtins.int": int, "builtins.float": float,
    "builtins.bool": bool, "builtins.bytes": bytes, "builtins.tuple": tuple, "builtins.list": list,
    "builtins.dict": dict,
}


# isinstance(v, q) for a class, function or partial v: q -> kind -> answer (no entry: not known)
_NOT_DATA = {"class": False, "function": False, "partial": False, "callable": False}
_CALLABLE_TYPE_TESTS: dict[str, dict[str, bool]] = {
    **{q: _NOT_DATA for q in _BUILTIN_TYPES},
    "functools.partial": {"class": False, "function": False, "partial": True, "callable": False},
    "builtins.type": {"class": True, "function": False, "partial": False},
    "types.FunctionType": {"class": False, "function": True, "partial": False},
}

# views whose result is not contiguous whatever their input (a transposed, permuted, broadcast layout)
_STRIDED_VIEWS = frozenset({"transpose", "t", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "expand",
                            "expand_as", "diagonal", "unfold", "hsplit"})
# views that broadcast a dimension (stride 0), and views that keep the dimensions an expanded base broadcast
_EXPANDS = frozenset({"expand", "expand_as", "broadcast_to"})
_KEEPS_EXPANDED = frozenset({"transpose", "t", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "unsqueeze",
                             "squeeze", "view_as_real"})
# views along a dimension: the parts are strided unless it is the first one
_DIM_VIEWS = frozenset({"select", "narrow", "split", "chunk", "unbind", "tensor_split", "split_with_sizes",
                        "unsafe_split", "unsafe_chunk"})


def rearrange_copies(pattern: str) -> bool:
    """``einops.rearrange(x, pattern)`` returns a new tensor, not a view of ``x``: it merges axes that the
    permutation took apart (``"b n (h d) -> (b h) n d"``: a permute, then a reshape that must copy). A pattern that
    only splits, merges neighbours in order, or permutes is a view wherever ``x``'s strides allow."""
    if "->" not in pattern:
        return False
    lhs, rhs = pattern.split("->", 1)
    axis = re.compile(r"\.\.\.|[A-Za-z_]\w*")  # (a number, `1`, is no axis of the input)
    where = {a: i for i, a in enumerate(axis.findall(lhs))}  # elementary axes of the input, in memory order
    for group in re.findall(r"\(([^()]*)\)", rhs):
        idx = [where[a] for a in axis.findall(group) if a in where]
        if idx and idx != list(range(idx[0], idx[0] + len(idx))):
            return True  # merged axes that are not neighbours, in order, in the input
    return False


#: optional tensor arguments whose calls the knowledge table probes as their own entries (``NAME[arg]``)
_OPTIONAL_TENSORS = ("per_sample_weights",)


def _short(info: OpInfo) -> str:
    return info.name.rsplit(".", 1)[-1]


def _strided(info: OpInfo, bound: dict[str, Val], base: T) -> bool:
    """Is the view ``info`` makes of ``base`` known not to be contiguous?"""
    short = _short(info)
    if short in _STRIDED_VIEWS:
        return True
    if short in _DIM_VIEWS:
        dim = bound.get("dim")
        if isinstance(dim, Const) and dim.known and isinstance(dim.value, int) and not isinstance(dim.value, bool):
            return dim.value != 0 or base.noncontig
    return base.noncontig


def _copies(info: OpInfo, bound: dict[str, Val], pos: list[Val], base: Val) -> bool:
    """A new tensor, not a view, when ``base`` is known not to be contiguous: ``x.contiguous()``, and a reshape to
    one dimension (``x.reshape(-1)``, ``x.reshape(n)``, ``torch.reshape(x, (n,))``, ``x.flatten()``), which cannot
    keep strided elements in a view. (Other reshapes of it may still be views: splitting a dimension, merging ones
    the transpose did not touch.)"""
    if not (isinstance(base, T) and base.noncontig):
        return False
    short = _short(info)
    if short == "contiguous":
        return True
    if short == "flatten":
        start, end = bound.get("start_dim"), bound.get("end_dim")
        return (start is None or _is_num(start, 0)) and (end is None or _is_num(end, -1))
    if short == "reshape":
        shape = [v for v in pos[1:] if not isinstance(v, T)]
        if len(shape) == 1 and isinstance(shape[0], Seq) and shape[0].items is not None:
            shape = list(shape[0].items)
        return len(shape) == 1 and isinstance(v := shape[0], Const) and v.known and type(v.value) is int
    return False


def _plain_tensor(v: T) -> bool:
    """Is ``type(v)`` surely ``torch.Tensor``: the result of an op, neither an unknown value that may be anything,
    nor a parameter (``nn.Parameter`` is a subclass), nor one of an unknown call's outputs."""
    if v.maybe_tensor or v.maybe_tuple or v.leaf:
        return False
    return _is_parameter(v) is False or (v.origin not in ("", "nn.Parameter") and not any(
        s.leaf or s.param_of is not None for s in v.storages))


def _is_parameter(v: T) -> bool | None:
    """``isinstance(v, nn.Parameter)`` for a tensor the analysis made: a module's parameter or an
    ``nn.Parameter(...)`` is one; the output of an op, or a view of either, is not; None when not known."""
    if v.view is not None:
        return False
    if (v.leaf and v.storages and all(s.param_of is not None for s in v.storages)) or v.origin == "nn.Parameter":
        return True
    if not v.leaf and v.rg == YES and v.origin and v.storages and not any(s.leaf for s in v.storages):
        return False
    return None


def _all_ones(v: Val | None) -> bool:
    """An output size of 1 in every dimension: `1`, `(1, 1)`, `[1, 1, 1]` (None keeps that dimension's size)."""
    if isinstance(v, Seq):
        return v.items is not None and len(v.items) > 0 and all(_is_num(x, 1) for x in v.items)
    return v is not None and _is_num(v, 1)


def _owner_storages(o: Obj) -> set[Storage]:
    """The storages of the parameters ``o`` holds itself."""
    return {s for pv in o.params.values() if isinstance(pv, T) for s in pv.storages}


def _pairs(items: tuple[Val, ...]) -> dict[str, Val] | None:
    """The entries of ``dict(items)`` when each item is a pair whose first element is a known string (the later of
    two equal keys wins, as in Python); None otherwise."""
    out: dict[str, Val] = {}
    for it in items:
        if not (isinstance(it, Seq) and it.items is not None and len(it.items) == 2):
            return None
        k = known_str(it.items[0])
        if k is None:
            return None
        out[k] = it.items[1]
    return out


def _is_num(v: Val, n: int) -> bool:
    return isinstance(v, Const) and v.known and v.value == n and not isinstance(v.value, bool)


# attributes of every tensor that the op table does not list as methods (see `hasattr` in Calls.call_builtin)
_TENSOR_ATTRS = frozenset({"shape", "grad", "requires_grad", "is_leaf", "grad_fn", "device", "dtype", "ndim", "T",
                           "__getitem__", "__setitem__", "__len__", "__iter__", "__array__", "data_ptr"})
# in-place tensor methods the op table lists without arguments that torch still calls with some (`random_(0, 10)`,
# `squeeze_(1)`, `apply_(fn)`)
_ARG_TAKING_INPLACE = frozenset({"apply_", "map_", "map2_", "random_", "round_", "squeeze_", "resize_as_sparse_",
                                 "sparse_resize_", "sparse_resize_and_clear_"})
# ops that return their input unchanged only for some dtypes (probed on float32: a view): a cast to the dtype it
# already has; conj_physical, which copies a complex tensor and returns a real one as it is
_DTYPE_CASTS = frozenset({"Tensor.float", "Tensor.conj_physical", "torch.conj_physical"})
# what is float32 whatever the code around it does (the default dtype of torch's random factories)
_FLOAT32_ORIGINS = frozenset({"randn", "rand", "randn_like", "rand_like"})
_SAME_DTYPE_CASTS = frozenset({"Tensor.to", "Tensor.type_as", "Tensor.type"})
_ANY_CASTS = _DTYPE_CASTS | _SAME_DTYPE_CASTS
# ops whose result is complex whatever their inputs, and ops of complex inputs whose result is real
_COMPLEX_MAKERS = frozenset({"torch.view_as_complex", "torch.complex", "torch.polar", "torch.fft.fft", "torch.fft.fft2",
                             "torch.fft.fftn", "torch.fft.ifft", "torch.fft.ifft2", "torch.fft.ifftn", "torch.fft.rfft",
                             "torch.fft.rfft2", "torch.fft.rfftn", "torch.fft.ihfft"})
# factories whose result has the default floating dtype when no dtype is given (not `torch.full` or `torch.arange`,
# whose dtype follows the fill value or the bounds, nor `torch.tensor`, whose data decides)
# data libraries whose objects hold what they are given (a deque, a multiprocessing queue)
_KEEPING_LIBRARIES = frozenset({"collections", "multiprocessing", "threading", "queue", "h5py", "lmdb", "zarr"})
_DEFAULT_FLOAT_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn",
                                      "torch.linspace", "torch.logspace", "torch.eye"})
_REAL_MAKERS = frozenset({"torch.view_as_real", "torch.real", "torch.imag", "torch.abs", "Tensor.abs", "operator.abs",
                          "torch.angle", "Tensor.angle", "torch.fft.irfft", "torch.fft.irfft2", "torch.fft.irfftn",
                          "torch.fft.hfft", "Tensor.float", "Tensor.double", "Tensor.half", "Tensor.bfloat16"})


def _complex_dtype(v: Val | None) -> bool:
    """``dtype=torch.cfloat``, ``dtype=torch.complex64``: a factory that makes a complex tensor."""
    return isinstance(v, Ref) and v.qual.startswith("torch.c") and v.qual[6:] in (
        "complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf")
_DEVICE_WORD = re.compile(r"\bdev(ice)?\b|\.device\b|^['\"]cpu['\"]$")


def _to_device(n: ast.AST) -> bool:
    """``x.to(device)``, ``x.to(self.device)``, ``x.to(p.device)``, ``x.to("cpu")``, ``x.to(device=d)``: a move to
    a device (no dtype, no copy asked for), told by how the argument is written."""
    if not isinstance(n, ast.Call) or len(n.args) > 1 or any(k.arg not in ("device", "non_blocking") for k in n.keywords):
        return False
    if n.args:
        a = n.args[0]
        text = ast.unparse(a) if not isinstance(a, ast.Constant) else repr(a.value)
        return _DEVICE_WORD.search(text) is not None
    return any(k.arg == "device" for k in n.keywords)
_FLOAT32_DTYPES = frozenset({"torch.float32", "torch.float"})
_GRAD_SCALERS = frozenset({"torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.cpu.amp.GradScaler",
                           "torch.amp.grad_scaler.GradScaler"})
# dtypes (and legacy tensor types) whose tensors cannot require grad
_INTEGER_DTYPES = frozenset(f"torch.{t}" for t in (
    "long", "int64", "int", "int32", "short", "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool",
    "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
    "cuda.LongTensor", "cuda.IntTensor", "cuda.ShortTensor", "cuda.CharTensor", "cuda.ByteTensor", "cuda.BoolTensor"))
# what makes a file's float tensors other than float32: reduced or double precision, autocast, a dtype chosen at
# run time (`.to(dtype)`, `set_default_dtype`), Lightning's `precision=`, code that tests a dtype (`if x.dtype ==
# torch.float32: x = x.clone() else: x = x.float()` expects others)
_OTHER_PRECISION = re.compile(r"\b(half|float16|bfloat16|bf16|fp16|float64|double|autocast|amp|GradScaler|"
                              r"set_default_dtype|is_floating_point)\b|\bprecision\s*=|\.to\(\s*dtype\b|"
                              r"\bdtype\s*=\s*dtype\b|\bdtype\s*(==|!=|\bin\b|\bnot\s+in\b|\bis\b)")
_PRINT_OPTIONS = re.compile(r"\bset_printoptions\([^)]*\)?")  # (its `precision=` is the digits printed)
_BINARY_OVERLOADS = {"torch.max": "torch.maximum", "torch.min": "torch.minimum",
                     "Tensor.max": "torch.maximum", "Tensor.min": "torch.minimum"}


_PRECISION_MEMO: dict[str, bool] = {}  # a line -> does its code mention another precision (an edit changes few lines)


def _mentions_other_precision(lines: list[str]) -> bool:
    """Does the code (not a comment) of ``lines`` mention a precision other than float32?"""
    memo = _PRECISION_MEMO
    if len(memo) > 200_000:
        memo.clear()
    for ln in lines:
        got = memo.get(ln)
        if got is None:
            got = memo[ln] = _OTHER_PRECISION.search(_PRINT_OPTIONS.sub("", ln.split("#", 1)[0])) is not None
        if got:
            return True
    return False


def _requires_grad(v: Val, depth: int = 0) -> bool:
    """Surely requires grad: a tensor that does and is a leaf or made from leaves or modules seen here (not just
    the result of a call into code we cannot see), or a list of tensors one of which does."""
    if isinstance(v, T):
        return v.rg == YES and not v.maybe_tensor and (v.leaf or any(
            isinstance(o, Storage) or (isinstance(o, Obj) and o.kind != "opaque") for o, _s, _c in v.prov))
    if isinstance(v, Seq) and v.items is not None and depth < 2:
        return any(_requires_grad(x, depth + 1) for x in v.items)
    return False


def _made_requiring_grad(v: Val) -> bool:
    """A tensor an op seen here made from one that requires grad (`h = self.proj(x)`: the layer's weight does), so
    it does too, whatever the input was."""
    return isinstance(v, T) and v.sure and v.rg == YES and not v.maybe_tensor and not v.maybe_tuple


def _live(v: Val, saved: dict[Any, Any], depth: int = 0) -> bool:
    """May ``v`` carry something a callee could trip over or keep: an object, a tensor that is saved, a leaf
    that requires grad, a special view?"""
    if isinstance(v, (Const, UnknownT, Ref, Func, ClassV)):
        return False
    if isinstance(v, Partial):
        return any(_live(x, saved, depth + 1) for x in v.args) or any(_live(x, saved, depth + 1) for _, x in v.kw)
    if isinstance(v, T):
        if not v.maybe_tensor and v.rg >= MAYBE:
            return True  # a tensor that may require grad: the callee may build a graph of it that this one uses
        return (v.leaf and v.rg == YES) or v.view in SPECIAL_VIEWS or any(s in saved for s in v.storages)
    if isinstance(v, Seq) and depth < 3:
        return any(_live(x, saved, depth + 1) for x in (v.items if v.items is not None else (v.elem,)))
    return True


def _returned_only(node: ast.AST) -> frozenset[str]:
    """Names a function reads only as ``return name`` (``model = build(...); return model``)."""
    got: frozenset[str] | None = getattr(node, "_gg_returned_only", None)
    if got is None:
        loads: dict[str, int] = {}
        returned: dict[str, int] = {}
        for x in ast.walk(node):
            if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load):
                loads[x.id] = loads.get(x.id, 0) + 1
            elif isinstance(x, ast.Return) and isinstance(x.value, ast.Name):
                returned[x.value.id] = returned.get(x.value.id, 0) + 1
        got = frozenset(k for k, c in returned.items() if loads.get(k) == c)
        node._gg_returned_only = got  # type: ignore[attr-defined]  # cached on the tree, which it describes
    return got


def _within(inner: Site, outer: Site | None) -> bool:
    return outer is not None and inner.path == outer.path and \
        (outer.line, outer.col) <= (inner.line, inner.col) and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)

