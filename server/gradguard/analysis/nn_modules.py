"""nn.Module objects: construction, attributes and parameters, nn.Sequential/ModuleList, subclasses of torch
modules, optimizers' and ctx objects' methods, custom ``autograd.Function``."""

from __future__ import annotations

import ast
from typing import Any

from gradguard.analysis.common import (
    FUNCTION_BASES,
    MAX_DEPTH,
    Frame,
    is_true,
)
from gradguard.analysis.hazards import SaveRecord
from gradguard.analysis.state import Heap, State
from gradguard.analysis.summaries import Summaries, Summary, fkey_class
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
    Const,
    Func,
    FuncInfo,
    Obj,
    Params,
    Ref,
    Seq,
    Super,
    T,
    Val,
    join,
    seq_elem,
)
from gradguard.knowledge import OpInfo
from gradguard.knowledge import libraries as L


class NNModules(Summaries):
    def module_like(self, cls: ClassInfo) -> bool:
        """An nn.Module (or autograd.Function): a torch base, or a `forward` of its own or of a local base."""
        for c in cls.mro():
            if "forward" in c.methods:
                return True
            for b in c.bases:
                if isinstance(b, Ref) and b.qual.startswith("torch."):
                    return True
        return False

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

    def obj_method(self, o: Obj, name: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                   fr: Frame) -> Val:
        if o.kind == "dist":
            return self.dist_value(o, name, pos, st)
        if o.kind == "opaque":
            if name in ("parameters", "named_parameters"):
                return Params(frozenset({o}))
            if name in ("zero_grad", "train", "eval", "to", "cuda", "cpu", "float", "double", "half", "requires_grad_"):
                return o
            if name in ("step", "backward", "load_state_dict", "state_dict"):
                return UNKNOWN  # an optimizer we cannot see into: which parameters it updates is unknown
            return self.call_obj(self.opaque_child(o, name), pos, kw, n, st, fr, in_seq=None)
        if o.kind == "optimizer":
            if name == "step" and not st.allow_mutation:  # allow_mutation_on_saved_tensors keeps copies
                owners = o.cfg.get("owners")
                own = owners.owners if isinstance(owners, Params) else frozenset()
                stmt = self.stmt_site()
                st.heap.steps = (*st.heap.steps, self.step_event(own, self.site(n), stmt, f"{self.text(n.func)}()"))
            return NONE
        if o.kind == "ctx":
            self.touched(o)
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
                    self.touched(x)
                    x.training = flag
            return o
        if name in ("parameters", "named_parameters", "modules", "children"):
            return Params(self.reach(o)) if name == "parameters" else Seq(None, UNKNOWN)
        if name in ("to", "cuda", "cpu", "float", "double", "half", "bfloat16", "requires_grad_", "type"):
            return o
        if name == "forward":
            return self.call_obj(o, pos, kw, n, st, fr, in_seq=None)
        if name in ("register_buffer", "register_parameter", "add_module", "append", "extend", "insert"):
            self.touched(o)
        if name == "register_buffer" and len(pos) >= 2 and isinstance(pos[0], Const):
            self.set_attr(o, str(pos[0].value), pos[1])
            return NONE
        if name == "register_parameter" and len(pos) >= 2 and isinstance(pos[0], Const):
            self.set_attr(o, str(pos[0].value), pos[1])
            return NONE
        if name == "add_module" and len(pos) >= 2 and isinstance(pos[0], Const):
            self.set_attr(o, str(pos[0].value), pos[1])
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

    def opaque_for(self, t: T) -> Obj:
        """The object an unknown value stands for, once code uses it as one (the same one for the same value)."""
        key = frozenset(t.storages)
        o = self.opaque_objs.get(key)
        if o is None:
            o = self.opaque_objs[key] = Obj("opaque", t.origin)
            o.training = True
        return o

    def opaque_child(self, parent: Obj, name: str) -> Obj:
        """``parent.name`` for an object whose class we cannot see into (or an attribute set outside __init__):
        another such object, the same one on every read."""
        c = parent.attrs.get(name)
        if isinstance(c, Obj):
            return c
        c = Obj("opaque", f"{parent.qual}.{name}" if parent.qual else name)
        c.training = parent.training
        c.cfg["parent"] = parent  # type: ignore[assignment]
        parent.attrs[name] = c  # a cache of what is there, not a write the code made
        return c

    def dist_value(self, d: Obj, name: str, pos: list[Val], st: State) -> Val:
        """A tensor a torch.distributions object computes (``log_prob``, ``entropy``, ``mean``, ``rsample``...):
        new, and depending on the tensors the distribution was built from, unless it is a sample."""
        if name in L.NOT_DIFFERENTIABLE_METHODS:
            return self.new_tensor([], st, f"{d.qual.rsplit('.', 1)[-1]}.{name}")
        inputs: list[Val] = list(pos)
        args = d.cfg.get("args")
        for a in (args.items or ()) if isinstance(args, Seq) else ():
            if isinstance(a, Obj) and a.kind == "dist":  # Independent(Normal(mu, std), 1)
                inner = a.cfg.get("args")
                inputs.extend(inner.items or () if isinstance(inner, Seq) else ())
            else:
                inputs.append(a)
        return self.new_tensor([v for v in inputs if not (isinstance(v, T) and v.maybe_tensor)], st,
                               f"{d.qual.rsplit('.', 1)[-1]}.{name}")

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
        o.ctor = self.site(n)
        if info.inplace_kwarg:
            params = list(info.params)
            flag: Val | None = kw.get(info.inplace_kwarg)
            kwnode = next((k for k in getattr(n, "keywords", []) if k.arg == info.inplace_kwarg), None)
            if flag is not None and kwnode is not None:
                o.kw_site = self.site(kwnode)
            elif info.inplace_kwarg in params:
                i = params.index(info.inplace_kwarg)
                if i < len(pos) and isinstance(n, ast.Call) and i < len(n.args):
                    flag = pos[i]
                    o.kw_site = self.site(n.args[i])
                    o.positional = True
            o.inplace = is_true(flag)
        bound = dict(zip(info.params, pos))
        bound.update(kw)
        o.cfg = bound
        return o

    def call_obj(self, o: Obj, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame,
                 in_seq: Obj | None) -> Val:
        if o.kind == "opaque":
            # An object we cannot see into (a model passed in as a parameter, self.agent set outside __init__):
            # calling it with grad on gives a tensor that may require grad and keeps its parameters.
            tensors: list[Val] = [v for v in (*pos, *kw.values()) if isinstance(v, T) and not v.maybe_tensor]
            out = self.new_tensor(tensors, st, o.qual or "module", min_rg=MAYBE)
            if st.no_grad:
                return out.with_(maybe_tuple=True)
            owners: list[Any] = []
            cur: Any = o
            while isinstance(cur, Obj) and len(owners) < 6:
                owners.append(cur)
                cur = cur.cfg.get("parent")
            return out.with_(maybe_tuple=True, prov=out.prov | {(x, self.stamp, None) for x in owners})
        if o.kind == "wrapper":  # DataParallel(model)(x) is model(x)
            return self.call(o.attrs.get("module", UNKNOWN), pos, kw, n, st, fr)
        if o.kind == "library" and pos:  # einops layers: Rearrange is a view, Reduce/EinMix make new tensors
            kind = o.cfg.get("kind")
            info = self.kb.get("torch.reshape")
            if isinstance(kind, Const) and kind.value == "view" and info is not None:
                return self.apply(info, [pos[0], UNKNOWN_NUM], {}, n, st, fr, display=o.qual.rsplit(".", 1)[-1])
            return self.new_tensor([pos[0]], st, o.qual.rsplit(".", 1)[-1], min_rg=NO)
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
                if res is UNKNOWN and not st.no_grad and any(isinstance(p, T) and p.rg >= MAYBE for p in pos):
                    # its forward could not be followed: the result may keep the module's parameters
                    return self.new_tensor(list(pos), st, o.qual or "module", min_rg=MAYBE).with_(
                        prov=frozenset({(o, self.stamp, None)}), maybe_tuple=True)
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
        init = ci.find_method("__init__")
        args_key = self.call_key(init, pos, kw, st) if init is not None else None
        key = ("new", fkey_class(ci), args_key) if args_key is not None else None
        if init is not None and not self.affordable(init) and not isinstance(self.summaries.get(key), Summary):
            bare = Obj("local", ci.name, ci)  # a constructor in another module, beyond the budget: contents unknown
            bare.training, bare.ctor = True, self.site(n)
            return bare
        o = self.summarised(key, pos, kw, st, lambda: self._construct(ci, init, pos, kw, n, st, fr))
        if isinstance(o, Obj):
            o.ctor = self.site(n)  # a replayed construction is a copy: it was made here
        return o

    def _construct(self, ci: ClassInfo, init: FuncInfo | None, pos: list[Val], kw: dict[str, Val], n: ast.Call,
                   st: State, fr: Frame) -> Obj:
        o = Obj("local", ci.name, ci)
        o.training = True
        o.ctor = self.site(n)
        if init is not None:
            self.call_func(init, [o, *pos], kw, st, fr, n)
        elif "torch.nn.Sequential" in ci.torch_bases():
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
                    self.save(v, st, SaveRecord(display, "a tensor via ctx.save_for_backward", self.site(n),
                                                f"{ci.name}.forward"))
        return res
