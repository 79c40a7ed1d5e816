"""nn.Module objects: construction, attributes and parameters, nn.Sequential/ModuleList, subclasses of torch
modules, optimizers' and ctx objects' methods, custom ``autograd.Function``."""

from __future__ import annotations

import ast
from typing import Any

from gradguard.analysis.common import (
    FUNCTION_BASES,
    MAX_APPLY,
    MAX_DEPTH,
    MAX_MODULES_UNROLL,
    Frame,
    is_false,
    is_true,
    note_sized,
    renorms,
    sized_view_of,
)
from gradguard.analysis.functions import widen_default
from gradguard.analysis.hazards import Hazard, SaveRecord, Site
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
    Choice,
    ClassInfo,
    ClassV,
    Const,
    Func,
    FuncInfo,
    ModuleTree,
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
    fresh,
    join,
    known_int,
    list_subclass,
    next_id,
    ordered,
    owner_key,
    seq_elem,
)
from gradguard.knowledge import OpInfo
from gradguard.knowledge import libraries as L


def _callable_instance(v: Val) -> bool:
    """An instance of a plain class of the analysed code that defines ``__call__`` (not a module)."""
    return isinstance(v, Obj) and v.kind == "local" and v.info is not None and "forward" not in v.info.methods \
        and v.info.find_method("__call__") is not None


# torch bases that are not modules: optimizers (and their schedulers), datasets and samplers
_NOT_MODULES = ("torch.optim.", "torch.utils.data.")


# annotations of a sequence of one kind of element: `list[Block]`, `Sequence[Block]`, `tuple[Block, ...]`
_SEQUENCE_ANNOTATIONS = frozenset({"list", "List", "Sequence", "Iterable", "tuple", "Tuple", "MutableSequence"})


def _abstract(node: ast.ClassDef) -> bool:
    """A class that declares abstract methods (or derives from ABC): its instances are its subclasses'."""
    if any(getattr(b, "id", getattr(b, "attr", "")) in ("ABC", "ABCMeta") for b in node.bases) or any(
            k.arg == "metaclass" and getattr(k.value, "id", getattr(k.value, "attr", "")) == "ABCMeta"
            for k in node.keywords):
        return True  # (another metaclass, a registry's or a singleton's, says nothing about subclasses)
    return any(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
               and any(getattr(d, "id", getattr(d, "attr", "")).startswith("abstract") for d in f.decorator_list)
               for f in node.body)


class NNModules(Summaries):
    def module_like(self, cls: ClassInfo) -> bool:
        """An nn.Module (or autograd.Function): a torch base, or a `forward` of its own or of a local base. An
        optimizer, a learning-rate scheduler or a dataset (`torch.optim.Optimizer`, `torch.utils.data.Dataset`
        subclasses) is not one: its methods handle gradients, state and data, not a graph."""
        for c in cls.mro():
            if "forward" in c.methods:
                return True
            for b in c.bases:
                if isinstance(b, Ref) and b.qual.startswith("torch.") and not b.qual.startswith(_NOT_MODULES):
                    return True
        return False

    def nn_module_like(self, cls: ClassInfo) -> bool:
        """An nn.Module proper: a `forward`, or a base from torch.nn (not a torch distribution or other torch base
        whose attributes hold tensors and callables rather than submodules)."""
        for c in cls.mro():
            if "forward" in c.methods:
                return True
            for b in c.bases:
                if isinstance(b, Ref) and b.qual.startswith("torch.nn."):
                    return True
        return False

    def _conv_act(self, o: Obj, x: Val, n: ast.Call, st: State, fr: Frame) -> Val:
        """Calling mmcv's ConvModule (its source not found): its conv, then its activation on the conv's output (the
        norm between them saves its input, not its output)."""
        short = o.qual.rsplit(".", 1)[-1]
        conv = self.kb.get("torch.nn.Conv2d")
        out = self.apply(conv, [x], {}, n, st, fr, display=short, module=o) if conv is not None \
            else self.new_tensor([x], st, short, min_rg=YES)
        act = o.cfg.get("act")
        if not isinstance(out, T) or not isinstance(act, Const) or not isinstance(act.value, str):
            return out if isinstance(act, Const) else self.new_tensor([out], st, short)
        info = self.kb.get(act.value)
        if info is None:
            return self.new_tensor([out], st, short)
        if o.inplace and info.inplace_kwarg:
            info = self.kb.get(f"{info.name}[{info.inplace_kwarg}=True]") or info
        name = act.value.rsplit(".", 1)[-1]
        return self.apply(info, [out], {}, n, st, fr,
                          display=f"{short}'s {name}(inplace=True)" if o.inplace else f"{short}'s {name}", module=o)

    def default_instance(self, cls: ClassInfo) -> Obj:
        key = id(cls)
        obj = self.default_instances.get(key)
        if obj is not None:
            self.reuse(("instance", key))
            return obj
        obj = Obj("local", cls.name, cls)
        obj.training = True  # analysed as trained: eval-only paths are checked where a caller calls .eval()
        self.default_instances[key] = obj
        init = cls.find_method("__init__")
        if init is not None:
            st = State({}, Heap())
            self.cached(("instance", key), lambda: self.inline(init, [obj], {}, st, Frame(None, MAX_DEPTH - 3),
                                                               defaults_only=True))
        return obj

    def annotated_module(self, ann: ast.expr | None, fi: FuncInfo, depth: int = 0) -> Val | None:
        """What a parameter annotated with a module class of the code stands for when no caller is seen:
        ``controlnet: BlockwiseControlNet = None``, ``blocks: list[ResBlock]``, ``Optional["Encoder"]``. An
        instance built with its constructor's defaults (a list of them for a sequence); None for anything else
        (a config, a torch layer, a type the analysis cannot resolve)."""
        if ann is None or depth > 2:
            return None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):  # `Encoder | None`
            return self.annotated_module(ann.left, fi, depth + 1) or self.annotated_module(ann.right, fi, depth + 1)
        if isinstance(ann, ast.Subscript):
            head = ann.value.attr if isinstance(ann.value, ast.Attribute) else getattr(ann.value, "id", "")
            args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            if head in ("Optional", "Union"):
                return next((v for a in args if (v := self.annotated_module(a, fi, depth + 1)) is not None), None)
            if head in _SEQUENCE_ANNOTATIONS and args:
                el = self.annotated_module(args[0], fi, depth + 1)
                return Seq(None, el, "list") if el is not None else None
            return None
        if not isinstance(ann, (ast.Name, ast.Attribute)):
            return None
        st, fr = State({}, Heap()), Frame(fi, MAX_DEPTH - 3)
        v = self.lookup(ann.id, st, fr) if isinstance(ann, ast.Name) else self.ev_nograd(ann, st, fr)
        if isinstance(v, ClassV) and not self._is_function_class(v.info):
            if self.module_like(v.info):
                return self.default_instance(v.info)
            if _abstract(v.info.node):
                # an abstract class (`dynamics_model: ControlAffineSystem`): an instance of one of its subclasses,
                # whose methods and properties the class declares (`-> List[int]`); its state is not known
                return Obj("local", v.info.name, v.info)
        return None

    def _list_items(self, pos: list[Val], n: ast.AST) -> Val:
        """The items of ``list(iterable)`` for a subclass of ``list`` or ``tuple`` built from ``pos``."""
        if not pos:
            return Seq.of(())
        if isinstance(pos[0], (Seq, Alt)):
            return pos[0]
        return Seq(None, self.elem(pos[0], n))

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
            elif isinstance(o, Choice):
                stack.extend(o.alts)  # `define_f(...)`: VGG16_FCN8s or UNet, whichever was built
        return frozenset(out)

    def named_params(self, p: Params) -> Seq:
        """``named_parameters()``: (name, parameter) pairs."""
        return Seq(None, Seq.of((Const("", known=False), self.params_elem(p)), "tuple"), "list")

    def freeze(self, o: Obj, pos: list[Val], kw: dict[str, Val]) -> None:
        """``module.requires_grad_(flag)``: every parameter it reaches stops (or starts) requiring grad."""
        flag = kw.get("requires_grad", pos[0] if pos else Const(True))
        if not (isinstance(flag, Const) and flag.known):
            return
        frozen = not bool(flag.value)
        for x in self.reach(o):
            if isinstance(x, Obj):
                self.touched(x)
                x.cfg["frozen"] = Const(frozen)
                for k, t in list(x.params.items()):
                    if isinstance(t, T):
                        self.set_param(x, k, t.with_(rg=NO if frozen else YES))

    def obj_method(self, o: Obj, name: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                   fr: Frame) -> Val:
        if o.kind == "dist":
            return self.dist_value(o, name, pos, st)
        if name == "requires_grad_" and o.kind != "optimizer":
            self.freeze(o, pos, kw)
            return o
        if name == "register_full_backward_hook" and o.kind in ("torch", "sequential", "modulelist", "local"):
            # from here on its calls wrap their inputs and outputs (see call_obj); the receiver's text names it
            recv = n.func.value if isinstance(n.func, ast.Attribute) else n.func
            o.cfg["full_backward_hook"] = Const(self.text(recv)[:40])
            handle = Obj("hook_handle", "RemovableHandle")
            handle.cfg["module"] = o  # type: ignore[assignment]
            return handle
        if name in _FORWARD_HOOKS and o.kind in ("torch", "sequential", "modulelist", "local") and pos:
            # from here on its calls run the hook: a pre-hook on (module, args) before forward, a hook on
            # (module, args, output) after it; what either returns, when not None, replaces the args or the output
            key = _FORWARD_HOOKS[name]
            with_kwargs = kw.get("with_kwargs")
            # (hook, with_kwargs, a number the handle removes it by: copies of the module keep it)
            entry = Seq.of((pos[0], Const(isinstance(with_kwargs, Const) and with_kwargs.value is True),
                            Const(next_id())))
            prev = o.cfg.get(key)
            hooks = prev.items if isinstance(prev, Seq) and prev.items is not None else ()
            if len(hooks) < MAX_FORWARD_HOOKS:
                self.touched(o)
                o.cfg[key] = Seq.of((*hooks, entry))
            handle = Obj("hook_handle", "RemovableHandle")
            handle.cfg["module"] = o  # type: ignore[assignment]
            handle.cfg["hook"] = entry
            return handle
        if o.kind == "hook_handle" and name == "remove":
            # `handle.remove()`: the module's calls wrap nothing any more (Grad-CAM removes its hooks when done)
            m = o.cfg.get("module")
            if isinstance(m, Obj):
                self.touched(m)
                registered = o.cfg.get("hook")
                if registered is None:
                    m.cfg.pop("full_backward_hook", None)
                number = _hook_number(registered)
                for key in _FORWARD_HOOKS.values():
                    cur = m.cfg.get(key)
                    if number is not None and isinstance(cur, Seq) and cur.items is not None:
                        rest = tuple(h for h in cur.items if _hook_number(h) != number)
                        if rest:
                            m.cfg[key] = Seq.of(rest)
                        else:
                            m.cfg.pop(key, None)
            return NONE
        if o.kind == "opaque":
            if o.cfg.get("unread_class") is not None and (name in ("train", "zero_grad") or "parameters" in name):
                # an instance of a class the analysis cannot read, whose parameters code hands on (to an optimizer),
                # or which it puts in training mode: a model, so what calling it returns may require grad
                o.cfg["trained"] = Const(True)
            if name == "parameters":
                return Params(frozenset({o}))
            if name == "named_parameters":
                return self.named_params(Params(frozenset({o})))
            if name in ("zero_grad", "train", "eval", "to", "cuda", "cpu", "float", "double", "half"):
                return o
            if name in ("step", "backward", "load_state_dict", "state_dict"):
                return UNKNOWN  # an optimizer we cannot see into: which parameters it updates is unknown
            info = self.kb.get(f"Tensor.{name}")
            if info is not None and not info.output_requires_grad and not info.mutates and not name.endswith("_"):
                # `boxes.new_zeros(...)`, `labels.eq(c)`, `x.argmax(1)`: a tensor method whose result never requires
                # grad. If the object is a tensor, it builds no graph; if it is anything else, nothing says what
                # it returns. Either way it is not the output of a model holding its parameters.
                stand_in = T(frozenset({Storage(o.qual or name)}), rg=NO, maybe_tensor=True, origin=o.qual or name)
                recv_node = n.func.value if isinstance(n.func, ast.Attribute) else None
                return self.apply(info, [stand_in, *pos], kw, n, st, fr, display=name, receiver_node=recv_node)
            if name == "forward" and o.cfg.get("unread_class") is not None:
                return self.call_obj(o, pos, kw, n, st, fr, in_seq=None)  # (its other methods: see opaque_child)
            return self.call_obj(self.opaque_child(o, name), pos, kw, n, st, fr, in_seq=None)
        if o.kind == "wrapper" and name == "update_parameters" and o.qual in L.AVERAGED_MODELS:
            inner = o.attrs.get("module")
            if isinstance(inner, Obj):  # the average moves into the copy's parameters, in place
                self.load_state(inner, {}, n, st)
            return NONE
        if o.kind == "scaler":
            # `scaler.scale(loss)`: the loss times the scale, the same graph; `scaler.step(opt)`: `opt.step()` (unless
            # the gradients hold infs or NaNs); `unscale_`, `update`: the gradients and the scale, not the parameters
            if name == "scale" and pos:
                t = pos[0]
                return t.with_(view=None, view_op="", leaf=False, alias_of=None, alias_site=None, view_site=None) \
                    if isinstance(t, T) else t
            if name == "step" and pos and isinstance(pos[0], Obj) and pos[0].kind == "optimizer":
                self.optimizer_step(pos[0], n, st)
                return UNKNOWN
            return NONE if name in ("update", "unscale_") else UNKNOWN
        if o.kind == "optimizer":
            if name == "step":
                self.optimizer_step(o, n, st)
            elif name == "zero_grad":
                self.zero_grad(o, kw.get("set_to_none", pos[0] if pos else None), st)
            return NONE
        if o.kind == "ctx":
            self.touched(o)
            if name == "save_for_backward":
                o.attrs.setdefault("__saved__", Seq((), UNKNOWN))
                cur = o.attrs["__saved__"]
                o.attrs["__saved__"] = Seq.of((*(cur.items or ()), *pos)) if isinstance(cur, Seq) else Seq.of(pos)
                return NONE
            if name == "mark_dirty":
                prev = o.attrs.get("__dirty__")
                o.attrs["__dirty__"] = Seq.of((*(prev.items or ()), *pos)) if isinstance(prev, Seq) else Seq.of(pos)
                calls = self.dirty_at.setdefault(o.oid, [])
                for i, v in enumerate(pos):
                    calls.append((v, self.site(n), self.stmt_site(), self.text(n.args[i]) if i < len(n.args) else ""))
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
        if o.kind == "moduledict" and name in ("items", "values", "keys") and not pos and isinstance(o.entries, Seq):
            return _dict_view(o.entries, name)
        if name == "parameters":
            return Params(self.reach(o))
        if name == "named_parameters":
            return self.named_params(Params(self.reach(o)))
        if name in ("modules", "children", "named_modules", "named_children"):
            return self.submodules(o, recurse=name.endswith("modules"), named=name.startswith("named_"))
        if name in ("buffers", "named_buffers"):
            got = self.module_buffers(o, named=name == "named_buffers", recurse=not is_false(kw.get("recurse")))
            if got is not None:
                return got
        if name in ("_apply", "apply") and pos and (isinstance(pos[0], (Func, Bound, Partial)) or _callable_instance(
                pos[0])) and o.kind in ("torch", "local", "sequential", "modulelist", "moduledict"):
            # (a function, or an instance of a plain class with `__call__`: `model.apply(WeightClipper())`)
            self.apply_to_module(o, name, pos[0], n, st, fr)
            return o
        if name in ("to", "cuda", "cpu", "float", "double", "half", "bfloat16", "requires_grad_", "type"):
            return o
        if name == "forward":
            # (`module.forward(x)` runs forward alone: hooks are run by `module(x)`, Module._call_impl)
            return self._call_obj(o, pos, kw, n, st, fr, in_seq=None)
        if name in ("register_buffer", "register_parameter", "add_module", "register_module", "append", "extend",
                    "insert"):
            self.touched(o)
        if name == "register_buffer" and len(pos) >= 2 and isinstance(pos[0], Const):
            key = str(pos[0].value)
            self.set_attr(o, key, pos[1])
            have = _buffer_names(o)
            if key not in have:
                o.cfg["_buffers"] = Seq.of(tuple(Const(b) for b in (*have, key)))  # for buffers(), in order
            return NONE
        if name == "register_parameter" and len(pos) >= 2 and isinstance(pos[0], Const):
            self.set_attr(o, str(pos[0].value), pos[1])
            return NONE
        if name in ("add_module", "register_module") and len(pos) >= 2:
            # a name built at run time (`"block{}".format(i)`) is still a child, run in the order it was added; it is
            # kept under a key no attribute read can spell
            # (each call adds its own: in a loop, `model.add_module(name, layer)` with a name not known here adds one
            # child per pass, as it does when run, not one that each pass replaces)
            key = str(pos[0].value) if isinstance(pos[0], Const) and pos[0].known \
                else f"<{name} at line {n.lineno}, child {len(o.attrs)}>"
            before = o.attrs.get(key)
            self.set_attr(o, key, pos[1])
            if o.kind == "sequential" or _sequential_subclass(o):  # (`class ConvBn(nn.Sequential)` adding its layers)
                ents = o.entries
                if isinstance(ents, Seq) and ents.items is not None:
                    at = next((i for i, e in enumerate(ents.items) if e is before), None) if before is not None else None
                    if at is not None:  # a name already registered: torch replaces that child where it stands
                        self.set_entries(o, Seq.of((*ents.items[:at], pos[1], *ents.items[at + 1:])))
                    else:
                        self.set_entries(o, Seq.of((*ents.items, pos[1])))
            return NONE
        if (o.kind in ("sequential", "modulelist") or _sequential_subclass(o) or list_subclass(o)) \
                and name in ("append", "extend", "insert") and pos and (o.info is None or o.info.find_method(name) is None):
            ents = o.entries
            if name == "append" and isinstance(ents, Seq) and ents.items is not None:
                self.set_entries(o, Seq.of((*ents.items, pos[0])))
            elif name == "insert" and len(pos) == 2 and isinstance(ents, Seq) and ents.items is not None \
                    and (at := known_int(pos[0])) is not None:
                items = list(ents.items)
                items.insert(at, pos[1])  # (as ModuleList.insert and Python's list.insert place it)
                self.set_entries(o, Seq.of(tuple(items)))
            elif name == "extend" and isinstance(ents, Seq) and ents.items is not None and isinstance(pos[0], Seq) \
                    and pos[0].items is not None:
                self.set_entries(o, Seq.of((*ents.items, *pos[0].items)))
            else:
                self.set_entries(o, Seq(None, join(seq_elem(ents), self.elem(pos[-1], n))))
            return NONE
        if o.kind == "local" and o.info is not None:
            fi = o.info.find_method(name)
            if fi is not None:
                return self.call_func(fi, [o, *pos], kw, st, fr, n)
            if name == "step" and _optimizer_class(o.info):
                # a subclass of a torch optimizer (`class ClipAdam(Adam)`) that keeps the built-in step
                self.optimizer_step(o, n, st)
                return NONE
            if o.info.torch_bases() and name == "zero_grad":
                self.zero_grad(o, kw.get("set_to_none", pos[0] if pos else None), st)
                return UNKNOWN
            if o.info.torch_bases() and name == "load_state_dict" and self.nn_module_like(o.info):
                self.load_state(o, kw, n, st)
                return UNKNOWN
            if o.info.torch_bases() and name in ("apply", "load_state_dict", "state_dict"):
                return UNKNOWN
        if name == "zero_grad" and o.kind in ("torch", "sequential", "modulelist", "moduledict"):
            self.zero_grad(o, kw.get("set_to_none", pos[0] if pos else None), st)
            return UNKNOWN
        if name == "load_state_dict" and o.kind in ("torch", "sequential", "modulelist", "moduledict"):
            self.load_state(o, kw, n, st)
            return UNKNOWN
        if name in ("zero_grad", "apply", "load_state_dict", "state_dict", "named_modules", "register_forward_hook"):
            return UNKNOWN
        if o.kind == "local" and o.info is not None and not any(b.startswith("torch.") for b in o.info.torch_bases()):
            # a callable the class does not define (a config's entry read through `__getattr__`,
            # `self.hp.critic(params)`): what it returns is unknown, but one value (see Calls.call)
            return self.unknown_result(n)
        return UNKNOWN

    def submodules(self, o: Obj, recurse: bool, named: bool) -> Seq:
        """``o.modules()`` (o, then its submodules depth first, each once, in the order they were registered),
        ``o.children()`` (its direct submodules), and their ``named_`` forms ((dotted name, module) pairs), as torch
        lists them: a sequence of the modules known here, when there are at most MAX_MODULES_UNROLL of them (a loop
        over it runs once per module: `for m in self.modules(): if isinstance(m, nn.ReLU): m.inplace = True`), else
        one of unknown length that remembers the tree (a ModuleTree). A submodule that is not known (an unknown
        value, one of several alternatives) is left out: what the loop does to the others still happens to them."""
        got = self.module_list(o, recurse, named, MAX_MODULES_UNROLL)
        if got is None:
            return ModuleTree(o, recurse, named)
        return Seq.of(got, "modules")

    def module_buffers(self, o: Obj, named: bool, recurse: bool) -> Seq | None:
        """``o.buffers()`` / ``o.named_buffers()``: the buffers the code registered on the modules of the tree (with
        their dotted names), in order; None (not known) when the tree holds a torch layer that keeps buffers of its
        own (batch norm's running statistics) or is too large to list."""
        mods = self.module_list(o, recurse=True, named=True, limit=MAX_MODULES_UNROLL) if recurse else \
            [Seq.of((Const(""), o), "tuple")]
        if mods is None:
            return None
        out: list[Val] = []
        for pair in mods:
            assert isinstance(pair, Seq) and pair.items is not None
            prefix, m = pair.items
            if not isinstance(m, Obj):
                return None
            if m.kind == "torch" and any(w in m.qual for w in _BUFFERED_LAYERS):
                return None
            for b in _buffer_names(m):
                v = m.attrs.get(b)
                if v is None or (isinstance(v, Const) and v.value is None):
                    continue  # (a buffer registered as None is not listed)
                if not isinstance(v, T):
                    return None
                full = f"{prefix.value}.{b}" if isinstance(prefix, Const) and prefix.value else b
                out.append(Seq.of((Const(full), v), "tuple") if named else v)
        return Seq.of(tuple(out), "list") if len(out) <= MAX_MODULES_UNROLL else None

    def module_list(self, o: Obj, recurse: bool, named: bool, limit: int) -> list[Val] | None:
        """The modules ``submodules`` lists, or None when there are more than ``limit``."""
        out: list[tuple[str, Obj]] = []
        seen: set[int] = set()

        def visit(x: Obj, prefix: str, top: bool) -> None:
            if x.oid in seen or len(out) > limit:
                return
            seen.add(x.oid)
            if not top or recurse:
                out.append((prefix, x))
            if top or recurse:
                for key, child in self._module_children(x):
                    visit(child, f"{prefix}.{key}" if prefix else key, False)

        visit(o, "", True)
        if len(out) > limit:
            return None
        if named:
            return [Seq.of((Const(k), m), "tuple") for k, m in out]
        return [m for _k, m in out]

    def _module_children(self, x: Obj) -> list[tuple[str, Obj]]:
        """The modules registered on ``x`` that are known: its module attributes, then a container's entries."""
        if x.kind not in ("torch", "local", "sequential", "modulelist", "moduledict"):
            return []
        kids = [(k, a) for k, a in x.attrs.items() if isinstance(a, Obj) and self._is_module(a)]
        ents = x.entries
        if x.kind in ("sequential", "modulelist", "moduledict") and isinstance(ents, Seq) and ents.items is not None:
            keys = ents.keys or tuple(str(i) for i in range(len(ents.items)))
            kids += [(k, e) for k, e in zip(keys, ents.items) if isinstance(e, Obj) and self._is_module(e)]
        return kids

    @staticmethod
    def _writes_in_place(o: Obj) -> bool:
        """A torch layer whose call overwrites its input: its ``inplace`` flag, set at construction or after (`m.inplace
        = ...` after construction is what forward reads)."""
        if o.kind != "torch":
            return False
        flag = o.attrs.get("inplace")
        return is_true(flag) if flag is not None and (is_true(flag) or is_false(flag)) else o.inplace

    def _is_module(self, x: Obj) -> bool:
        if x.kind in ("torch", "sequential", "modulelist", "moduledict"):
            return True
        return x.kind == "local" and x.info is not None and self.module_like(x.info)

    def apply_to_module(self, o: Obj, name: str, fn: Val, n: ast.Call, st: State, fr: Frame) -> None:
        """``module.apply(fn)``: fn on every submodule, then the module, grad mode as it is. ``module._apply(fn)``
        (what ``.to()``, ``.half()`` use): fn on every parameter and its ``.grad``, under no_grad."""
        mods = sorted((x for x in self.reach(o) if isinstance(x, Obj) and x.kind in
                       ("torch", "local", "sequential", "modulelist", "moduledict")),
                      key=lambda x: (x is o, owner_key(x)))[:MAX_APPLY]
        if name == "apply":
            fi = fn.info if isinstance(fn, Func) else fn.func if isinstance(fn, Bound) else \
                fn.info.find_method("__call__") if isinstance(fn, Obj) and fn.info is not None else None
            if fi is not None and not _writes_objects(fi.node):
                # An initialiser (`_init_weights(m)`: nn.init on m's parameters): what it does to one submodule it
                # does to every other of the same class and parameters, at the same lines; one of each is enough.
                # (Whether a graph saved its parameters is part of it: a weight clipper run between forward and
                # backward breaks only the layers whose weights were saved.)
                kept = st.heap.saved
                seen: set[tuple[Any, ...]] = set()
                reps = []
                for m in mods:
                    k = (m.kind, m.qual, id(m.info), tuple(sorted(m.params)),
                         any(s in kept for p in m.params.values() if isinstance(p, T) for s in p.storages))
                    if m is o or k not in seen:
                        seen.add(k)
                        reps.append(m)
                mods = reps
            for m in mods:
                self.call(fn, [m], {}, n, st, fr)
            return
        saved = st.no_grad
        st.no_grad = True
        try:
            for m in mods:
                for p in list(m.params.values()):
                    self.call(fn, [p], {}, n, st, fr)
                    g = [self.grads[s] for s in ordered(p.storages) if s in self.grads]
                    if g:
                        self.call(fn, [g[0]], {}, n, st, fr)
        finally:
            st.no_grad = saved

    def field_tensor(self, o: Obj, st: State) -> Val:
        """An opaque object read off a tensor-like value (`out.q` of a model's output, `out.q.squeeze(-1)`), used
        as a tensor: a tensor computed with that value, requiring grad as it does and keeping its graph. (Anything
        else stays the object.)"""
        src = _field_source(o)
        if src is None:
            return o
        return self.new_tensor([src], st, o.qual or "field")

    def opaque_for(self, t: T) -> Obj:
        """The object an unknown value stands for, once code uses it as one (the same one for the same value)."""
        key = frozenset(t.storages)
        o = self.opaque_objs.get(key)
        if o is None:
            o = self.opaque_objs[key] = Obj("opaque", t.origin)
            o.training = True
        return o

    def _module_attr(self, o: Obj) -> bool:
        """An opaque object that is a module's attribute (`self.head` of an nn.Module, set by a registry): a
        submodule, called on whatever the module's forward has, not a lookup."""
        parent = o.cfg.get("parent")
        if not (isinstance(parent, Obj) and parent.kind == "local" and parent.info is not None):
            return False
        name = o.qual.rsplit(".", 1)[-1]
        return parent.attrs.get(name) is o and (self.nn_module_like(parent.info)
                                                or name in self.param_attrs(parent.info))

    def param_attrs(self, cls: ClassInfo) -> frozenset[str]:
        """The attributes whose parameters the class's code (its own or a base's) reads: ``self.critic.parameters()``
        handed to an optimizer, ``self.net.named_parameters()``. Whatever they hold is a module with parameters,
        even when it was built where the analysis cannot see (a library's network builder)."""
        got: frozenset[str] | None = getattr(cls, "_gg_param_attrs", None)
        if got is None:
            names: set[str] = set()
            for c in cls.mro():
                names |= _param_attrs_of(c.node)
            got = frozenset(names)
            cls._gg_param_attrs = got  # type: ignore[attr-defined]  # cached on the class, which it describes
        return got

    def opaque_child(self, parent: Obj, name: str) -> Obj:
        """``parent.name`` for an object whose class we cannot see into (or an attribute set outside __init__):
        another such object, the same one on every read."""
        c = parent.attrs.get(name)
        if isinstance(c, Obj):
            return c
        qual = parent.qual + "[i]" if name == "[]" else f"{parent.qual}.{name}" if parent.qual else name
        c = Obj("opaque", qual)
        c.training = parent.training
        c.cfg["parent"] = parent  # type: ignore[assignment]
        if parent.cfg.get("unread_class") is not None:
            # an instance of a class the analysis cannot read: calling it (or its `forward`) may run a model, but its
            # other methods return anything (`IntegratedGradients(model).attribute(x)` hands back a detached map)
            c.cfg["data"] = c.cfg["anything"] = Const(True)
        elif parent.cfg.get("data") is not None or (
                parent.kind == "local" and parent.info is not None and not self.module_like(parent.info)
                and name not in self.param_attrs(parent.info)):
            # an attribute of a plain object (a dataset, a frame record, a config) that __init__ did not show:
            # data, not a model; what calling it gives requires grad only if its tensor arguments do
            c.cfg["data"] = Const(True)
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
        out = self.new_tensor([v for v in inputs if not (isinstance(v, T) and v.maybe_tensor)], st,
                              f"{d.qual.rsplit('.', 1)[-1]}.{name}")
        if name == "rsample" and d.qual in L.SAMPLE_SAVING_DISTRIBUTIONS and out.rg != NO and not st.no_grad:
            # (the backward of a Gamma or Dirichlet sample reads the sample)
            short = d.qual.rsplit(".", 1)[-1]
            self.save(out, st, SaveRecord(f"{short}.rsample", "its output", self.stmt_site(), f"{d.qual}.rsample"))
        return out

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
        if name == "step" and _optimizer_class(cls):
            # `super().step()` in a subclass of a built-in optimizer: its update of the parameters the base
            # constructor was given (`super().__init__(params, lr=lr)`)
            self.optimizer_step(obj, n, st)
            return NONE
        if name == "__init__":
            if "torch.nn.Sequential" in tb:
                obj.entries = self._entries(pos)
                obj.kind = "local"
            elif list_subclass(obj):
                obj.entries = self._list_items(pos, n)
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

    def zero_grad(self, o: Obj, set_to_none: Val | None, st: State) -> None:
        """``opt.zero_grad()``, ``model.zero_grad()``: the gradients are set to None (torch's default since 2.0),
        unless ``set_to_none=False`` fills them with zeros."""
        if set_to_none is None or is_true(set_to_none):
            st.heap.cleared = st.heap.cleared | {o}

    def load_state(self, o: Obj, kw: dict[str, Val], n: ast.Call, st: State) -> None:
        """``model.load_state_dict(sd)``: every parameter of the module is copied into in place (under no_grad),
        as a step updates it: a graph built before it that saved a weight finds it changed at its backward (a
        target network synced into the online one between its forward and backward). With ``assign=True`` the
        module takes the given tensors as its new parameters instead: nothing is written."""
        if st.allow_mutation or is_true(kw.get("assign")):
            return
        owners = frozenset(x for x in self.reach(o) if isinstance(x, Obj)) | {o}  # (each layer's parameters)
        st.heap.steps = (*st.heap.steps, self.step_event(owners, self.site(n), self.stmt_site(),
                                                           f"{self.text(n.func)}()", st))

    def optimizer_step(self, o: Obj, n: ast.Call, st: State) -> None:
        """``opt.step()``: the parameters the optimizer was built on are updated in place. Not when their
        gradients are None (``zero_grad()`` since the last backward: torch's optimizers skip such parameters), nor
        by a fused optimizer (``fused=True``: its kernels write without moving the version counters, so no
        backward raises; it silently reads the new values)."""
        if st.allow_mutation:  # allow_mutation_on_saved_tensors keeps copies
            return
        owners = o.cfg.get("owners")
        own = owners.owners if isinstance(owners, Params) else frozenset()
        if is_true(o.cfg.get("fused")):
            return
        if st.heap.cleared and (o in st.heap.cleared or (own and own <= st.heap.cleared)):
            self.unsummarised()  # (a call that steps nothing here may step after a backward elsewhere)
            return
        stmt = self.stmt_site()
        st.heap.steps = (*st.heap.steps, self.step_event(own, self.site(n), stmt, f"{self.text(n.func)}()", st))

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
        pre, post = o.cfg.get("forward_pre_hooks"), o.cfg.get("forward_hooks")
        if isinstance(pre, Seq) or isinstance(post, Seq):
            return self._hooked_call(o, pre, post, pos, kw, n, st, fr, in_seq)
        return self._backward_hooked_call(o, pos, kw, n, st, fr, in_seq)

    def _hooked_call(self, o: Obj, pre: Val | None, post: Val | None, pos: list[Val], kw: dict[str, Val],
                     n: ast.Call, st: State, fr: Frame, in_seq: Obj | None) -> Val:
        """``module(x)`` with forward hooks registered, as ``Module._call_impl`` runs them: each pre-hook gets
        (module, args) (and kwargs, if registered ``with_kwargs``) and may return new args; then forward; then each
        hook gets (module, args, output) and may return a new output."""
        for entry in _hook_entries(pre):
            hook, with_kwargs = entry
            args = Seq.of(tuple(pos))
            if with_kwargs:
                got = self.call(hook, [o, args, Seq(None, UNKNOWN, "dict")], {}, n, st, fr)
                if isinstance(got, Seq) and got.items is not None and len(got.items) == 2 \
                        and isinstance(got.items[0], Seq) and got.items[0].items is not None:
                    pos = list(got.items[0].items)
            else:
                got = self.call(hook, [o, args], {}, n, st, fr)
                if isinstance(got, Seq) and got.kind == "tuple" and got.items is not None:
                    pos = list(got.items)
                elif isinstance(got, T):
                    pos = [got]
        out = self._backward_hooked_call(o, pos, kw, n, st, fr, in_seq)
        for entry in _hook_entries(post):
            hook, with_kwargs = entry
            args = Seq.of(tuple(pos))
            extra: list[Val] = [Seq(None, UNKNOWN, "dict")] if with_kwargs else []
            got = self.call(hook, [o, args, *extra, out], {}, n, st, fr)
            if isinstance(got, (T, Seq)):
                out = got
            elif isinstance(out, T) and out.rg != YES and out.view is None and out.storages \
                    and all(s.leaf for s in out.storages):
                # `output.requires_grad_(True)` in the hook (transformers' enable_input_require_grads, on a frozen
                # embedding): the output the caller gets is now a leaf that requires grad
                out = out.with_(rg=YES, leaf=True)
        return out

    def _backward_hooked_call(self, o: Obj, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame,
                              in_seq: Obj | None) -> Val:
        hook = o.cfg.get("full_backward_hook")
        if isinstance(hook, Const) and not st.no_grad:
            # A module with a full backward hook runs its inputs, and then its outputs, through BackwardHookFunction,
            # which returns them as views made inside a custom Function: a layer that writes into its input
            # (ReLU(inplace=True)), or whoever writes into its output, modifies such a view, and torch raises.
            what = f"the full backward hook registered on `{hook.value}` (BackwardHookFunction)"
            pos = [_hook_view(v, what) for v in pos]
            return _hook_view(self._call_obj(o, pos, kw, n, st, fr, in_seq), what)
        return self._call_obj(o, pos, kw, n, st, fr, in_seq)

    def _call_obj(self, o: Obj, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame,
                  in_seq: Obj | None) -> Val:
        self.effects += 1
        if o.kind == "opaque" and o.cfg.get("anything") is not None:
            return fresh(o.qual[:40], rg=NO, maybe_tensor=True, maybe_tuple=True)
        if o.kind == "opaque":
            # An object we cannot see into (a model passed in as a parameter, self.agent set outside __init__):
            # calling it with grad on gives a tensor that may require grad and keeps its parameters.
            tensors: list[Val] = [v for v in (*pos, *kw.values()) if isinstance(v, T) and not v.maybe_tensor]
            if self.watching:
                self.kept_elsewhere(tensors)  # (a method of an object we cannot see into may keep them)
            src = _field_source(o)
            if src is not None:  # a method of a field of an output (`out.q.squeeze(-1)`): computed from the output
                tensors.append(src)
            # (an instance of a class the analysis cannot read runs a model only once code trains it: see
            # the "trained" mark in obj_method; `GaussianFilter(sigma=2)(heatmap)` is a transform as likely as a model)
            data = o.cfg.get("data") is not None or (o.cfg.get("unread_class") is not None
                                                     and o.cfg.get("trained") is None)
            out = self.new_tensor(tensors, st, o.qual or "module", min_rg=NO if data else MAYBE)
            if data:
                return out.with_(maybe_tuple=True)
            if not pos and not kw and o.cfg.get("parent") is not None:
                # a method of an unknown object called with nothing (`arr.copy()`, `obj.get_state()`): what it
                # gives may not be a tensor at all (a NumPy array, a number)
                return out.with_(maybe_tuple=True, maybe_tensor=True, rg=NO)
            if not tensors and o.cfg.get("parent") is not None and not self._module_attr(o):
                # nor when it is handed no tensor known to be one (`vocab.get_idx_for_item("<STOP>")`,
                # `layer.compute_output_shape(shape)`): a lookup, a shape, a number as likely as a tensor
                return out.with_(maybe_tuple=True, maybe_tensor=True)
            if st.no_grad:
                return out.with_(maybe_tuple=True)
            owners: list[Any] = []
            cur: Any = o
            while isinstance(cur, Obj) and len(owners) < 6:
                owners.append(cur)
                cur = cur.cfg.get("parent")
            return out.with_(maybe_tuple=True, prov=out.prov | {self.graph_use(x) for x in owners})
        if o.kind == "wrapper":  # DataParallel(model)(x) is model(x)
            return self.call(o.attrs.get("module", UNKNOWN), pos, kw, n, st, fr)
        if o.kind == "library" and pos:  # einops layers: Rearrange is a view, Reduce/EinMix make new tensors
            kind = o.cfg.get("kind")
            if isinstance(kind, Const) and kind.value == "conv_act":
                return self._conv_act(o, pos[0], n, st, fr)
            info = self.kb.get("torch.reshape")
            sized = isinstance(kind, Const) and kind.value == "sized_view" and sized_view_of(pos[0])
            if isinstance(kind, Const) and (kind.value == "view" or sized) and info is not None:
                viewed = self.apply(info, [pos[0], UNKNOWN_NUM], {}, n, st, fr, display=o.qual.rsplit(".", 1)[-1])
                return note_sized(viewed, o.qual.rsplit(".", 1)[-1]) if sized else viewed
            return self.new_tensor([pos[0]], st, o.qual.rsplit(".", 1)[-1], min_rg=NO)
        if o.kind == "torch":
            info = self.kb.get(o.qual)
            if info is None:
                return self.new_tensor(pos, st, o.qual, min_rg=YES).with_(maybe_tuple=True)
            inplace = self._writes_in_place(o) and bool(info.inplace_kwarg)  # (a layer without the flag ignores it)
            if inplace:
                info = self.kb.get(f"{info.name}[{info.inplace_kwarg}=True]") or info
            short = o.qual.rsplit(".", 1)[-1]
            display = f"{short}(inplace=True)" if inplace else short
            if short in ("Embedding", "EmbeddingBag"):
                self._renorm(o, short, n, st)
            elif short in _RUNNING_STATS and self.inference_spans and not st.inference and not st.silent:
                self._running_stats(o, short, n, st)
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
                        prov=frozenset({self.graph_use(o)}), maybe_tuple=True)
                return res
            tb = o.info.torch_bases()
            if "torch.nn.Sequential" in tb and pos:
                return self.run_sequential(o, pos[0], n, st, fr)
            tbase = self.torch_base(o.info)
            if tbase is not None:
                return self.call_torch_base(o, *tbase, pos, kw, n, st, fr, in_seq=in_seq)
            call = o.info.find_method("__call__")
            if call is not None:
                # a plain class's instance called (`Normalize(mean, std)(img)`, a transform, a loss object): its
                # __call__ runs with the caller's tensors
                return self.call_func(call, [o, *pos], kw, st, fr, n)
        return UNKNOWN

    def _renorm(self, o: Obj, short: str, n: ast.Call, st: State) -> None:
        """An embedding built with ``max_norm`` renormalizes the rows it looks up in its weight, in place (under
        no_grad), on every call: a differentiable op that used the weight before (a tied output projection, the
        previous step of a decoding loop) finds it changed at backward."""
        mn = o.cfg.get("max_norm")
        if not renorms(mn):
            return
        w = self.module_param(o, "weight")
        self.mutate(w, st, form="module_call", node=n, op=f"{short}(max_norm={mn.value!r})",
                    target=f"{self.text(n.func)}.weight", no_grad_op=True, param_step=False,
                    extra=(("renorm", True),))

    def _running_stats(self, o: Obj, short: str, n: ast.Call, st: State) -> None:
        """A normalization layer built inside inference_mode holds its running statistics as inference tensors: in
        training mode each call updates them in place, which torch refuses outside inference_mode."""
        tracks = o.cfg.get("track_running_stats")
        if o.training is False or is_false(tracks) or (short.startswith("Instance") and not is_true(tracks)) \
                or not any(a <= o.oid < b for a, b in self.inference_spans):
            return
        self.report(Hazard("inference_stats", "module_call", self.site(n), self.stmt_site(),
                           f"{short} (in training mode, updating its running statistics)",
                           f"{self.text(n.func)}.running_mean",
                           related=((o.ctor, f"{short} was created here, inside inference_mode"),)
                           if o.ctor is not None else (),
                           extra=(("ctor_span", o.ctor),) if o.ctor is not None and o.ctor.path == self.mod.path
                           else ()))

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
            if s.items is None and isinstance(s.elem, Obj) and self._writes_in_place(s.elem):
                # entries of unknown number, stood for by one of them: which comes first or last is not known, so
                # an in-place layer among them is not assumed next to itself or at the end (a block list built
                # in a loop of unknown length: [ReLU(inplace=True), conv, bn] * n)
                items = ()
                cur = self.new_tensor([cur], st, "module", min_rg=MAYBE) if isinstance(cur, T) else UNKNOWN
            prev: str | None = None  # what the entry gets is the output of the one before it, after the first
            for m in items:
                if isinstance(m, Seq) and m.kind == "tuple" and m.items and len(m.items) == 2:  # OrderedDict pairs
                    m = m.items[1]
                if isinstance(m, Obj):
                    outer, self.seq_prev = self.seq_prev, prev
                    try:
                        cur = self.call_obj(m, [cur], {}, n, st, fr, in_seq=o if m.kind == "torch" else None)
                    finally:
                        self.seq_prev = outer
                    prev = (m.qual.rsplit(".", 1)[-1] if m.qual else m.info.name if m.info is not None else None) \
                        or None
                elif isinstance(m, (Func, Bound)):
                    cur = self.call(m, [cur], {}, n, st, fr)
                    prev = None
                else:
                    cur = self.new_tensor([cur], st, "module", min_rg=MAYBE) if isinstance(cur, T) else UNKNOWN
                    prev = None
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
        self.effects += 1
        if self._is_function_class(ci):
            return UNKNOWN
        init = ci.find_method("__init__")
        args_key = self.call_key(init, pos, kw, st) if init is not None else None
        key = ("new", fkey_class(ci), args_key) if args_key is not None else None
        if init is not None and not self.affordable(init) and not isinstance(self.summaries.get(key), Summary):
            bare = Obj("local", ci.name, ci)  # a constructor in another module, beyond the budget: contents unknown
            bare.training, bare.ctor = True, self.site(n)
            bare.entries = Seq(None, UNKNOWN)  # (an nn.Sequential subclass's layers: some, not none)
            return bare
        where = self.place_of(ci) if ci.mod is not None and not ci.mod.is_root else None
        place = ("new", where) if where is not None else None
        o = self.summarised(key, pos, kw, st, lambda: self._construct(ci, init, pos, kw, n, st, fr), place, fr.depth)
        if isinstance(o, Obj):
            o.ctor = self.site(n)  # a replayed construction is a copy: it was made here
        return o

    def _construct(self, ci: ClassInfo, init: FuncInfo | None, pos: list[Val], kw: dict[str, Val], n: ast.Call,
                   st: State, fr: Frame) -> Obj:
        o = Obj("local", ci.name, ci)
        o.training = True
        o.ctor = self.site(n)
        fields = ci.record_fields() if init is None else None
        if init is not None:
            if "torch.nn.Sequential" in ci.torch_bases():
                # an nn.Sequential subclass's layers are what its constructor gives `super().__init__` and adds;
                # a constructor cut short (the depth limit) leaves some layers, not none
                o.entries = Seq(None, UNKNOWN)
            self.call_func(init, [o, *pos], kw, st, fr, n)
        elif fields is not None:
            # a dataclass or NamedTuple: fields in order, by keyword, else their defaults
            for i, (name, default) in enumerate(fields):
                v = pos[i] if i < len(pos) else kw.get(name, default if default is not None else UNKNOWN)
                if "**" in kw and i >= len(pos) and name not in kw:
                    v = UNKNOWN if default is None else widen_default(default, name=name)
                self.set_attr(o, name, v)
        elif "torch.nn.Sequential" in ci.torch_bases():
            o.entries = self._entries(pos)
        elif list_subclass(o):
            o.entries = self._list_items(pos, n)
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
        """The torch base's constructor: remember its in-place flag; an optimizer's, the parameters it updates
        (``super().__init__(params, defaults)`` in a ``torch.optim.Optimizer`` subclass: its methods walk
        ``self.param_groups``, as the built-in optimizers' do)."""
        if any(b.startswith("torch.optim.") and ".lr_scheduler" not in b for b in cls.torch_bases()):
            params = kw.get("params", pos[0] if pos else UNKNOWN)
            owners = Params(self.owners_of(params))
            obj.cfg["owners"] = owners
            self.set_attr(obj, "param_groups", Seq.param_groups(owners))
            return
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

    def backward_writes(self, ci: ClassInfo) -> tuple[tuple[int | None, Site, Site, str, str], ...]:
        """The in-place writes a custom Function's ``backward`` makes to what ``ctx.saved_tensors`` gives back:
        (index into the saved tuple or None for any, site, op, name). Read from its source: the names bound by
        ``a, b = ctx.saved_tensors`` (or ``x = ctx.saved_tensors[0]``), bound once, then written in place by a
        ``Tensor`` method ending in ``_``, an augmented assignment, an item write or ``out=``."""
        cached = self._bw_writes.get(id(ci))
        if cached is not None:
            return cached[1]
        out: list[tuple[int | None, Site, Site, str, str]] = []
        fi = ci.find_method("backward")
        node = fi.node if fi is not None else None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.args.args:
            mod = fi.mod if fi is not None and fi.mod is not None else self.mod
            path = mod.path
            tree = self.tree if mod.is_root else (mod.source.tree if mod.source is not None else None)
            helpers = {d.name: d for d in getattr(tree, "body", ()) if isinstance(d, (ast.FunctionDef,
                                                                                     ast.AsyncFunctionDef))}
            out = _backward_writes(node, path, self.kb, helpers)
        res = tuple(out)
        self._bw_writes[id(ci)] = (ci, res)
        return res

    def autograd_apply(self, ci: ClassInfo, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                       fr: Frame) -> Val:
        fwd = ci.find_method("forward")
        if fwd is None:
            return UNKNOWN
        ctx = Obj("ctx")
        setup = ci.find_method("setup_context")
        saved_flag = st.no_grad
        st.no_grad = True
        # a forward that marks its inputs dirty is an in-place op on them, as torch's are: a write to an input that
        # an op saved before the call is reported at the call, with the tensor passed
        inputs_pre: dict[Storage, tuple[SaveRecord, ...]] = {}
        outer_dirty, outer_held = self.dirty_inputs, self.dirty_held
        self.dirty_held = []
        if _marks_dirty(ci):
            for v in pos:
                if isinstance(v, T) and not v.maybe_tensor:
                    inputs_pre.update((sto, st.heap.saved[sto]) for sto in v.storages if sto in st.heap.saved)
            self.dirty_inputs = outer_dirty | frozenset(inputs_pre)
        try:
            if setup is not None:
                # the newer form: forward(*args) without ctx, then setup_context(ctx, inputs, output) saves, marks
                # dirty (torch runs both with grad off)
                res = self.call_func(fwd, list(pos), kw, st, fr, n)
                self.call_func(setup, [ctx, Seq.of(tuple(pos), "tuple"), res], {}, st, fr, n)
            else:
                res = self.call_func(fwd, [ctx, *pos], kw, st, fr, n)
        finally:
            st.no_grad = saved_flag
            self.dirty_inputs = outer_dirty
            held, self.dirty_held = self.dirty_held, outer_held
        rg = YES if any(isinstance(v, T) and v.rg >= MAYBE for v in pos) and not st.no_grad else NO
        prov: frozenset[Any] = frozenset()
        inputs: set[Storage] = set()
        for v in pos:
            if isinstance(v, T):
                prov |= v.prov
                inputs |= v.storages
        dirty_v = ctx.attrs.get("__dirty__")
        dirty = [v for v in (dirty_v.items or ()) if isinstance(v, T)] if isinstance(dirty_v, Seq) else []
        dirty_storages: set[Storage] = set().union(*(v.storages for v in dirty)) if dirty else set()
        calls = self.dirty_at.pop(ctx.oid, ())
        if calls and not st.silent:
            self._dirty_contract(ci, calls, pos, res, rg, n)
        display = f"{ci.name}.apply"
        n_out = len([v for v in res.items or () if isinstance(v, T)]) if isinstance(res, Seq) else 1
        if rg and n_out > 1 and not st.silent:
            # mark_dirty on an input that is a view: autograd must rebase the view on the Function's node, which it can
            # only do for a Function with a single output
            for v in pos:
                if isinstance(v, T) and v.view is not None and v.storages & dirty_storages and not v.maybe_tensor:
                    i = pos.index(v)
                    argsite = self.site(n.args[i]) if i < len(n.args) else None
                    self.report(Hazard("dirty_view", "apply", self.site(n), self.stmt_site(), display,
                                       self.text(n.args[i]) if i < len(n.args) else "input",
                                       extra=(("outputs", n_out), ("arg_span", argsite))))
                    break
        for h, v, recs, hst in held:
            if not v.storages & dirty_storages:  # written but not marked dirty: a plain in-place write
                self.report_saved(h, v, recs, hst)
        if inputs_pre and dirty and not st.silent:
            for i, v in enumerate(pos):
                if isinstance(v, T) and v.storages & dirty_storages and any(s_ in inputs_pre for s_ in v.storages):
                    for sto in v.storages:
                        if sto in inputs_pre:
                            st.heap.saved[sto] = inputs_pre[sto]
                    self.mutate(v, st, form="apply", node=n, op=f"{display} (mark_dirty)",
                                target=self.text(n.args[i]) if i < len(n.args) else "input",
                                site=self.site(n.args[i]) if i < len(n.args) else None,
                                extra=(("arg_span", self.site(n.args[i])),) if i < len(n.args) else ())
        if rg and dirty and not st.silent:
            # mark_dirty: the input is modified in place as the Function runs, with grad on: torch refuses a leaf that
            # requires grad (or a view of one), one of several views, or a view made under no_grad
            for i, v in enumerate(pos):
                if isinstance(v, T) and v.storages & dirty_storages and not v.maybe_tensor and (
                        (v.leaf and v.rg == YES) or v.view in ("multi", "nograd", "nograd_if")):
                    self.mutate(v, st, form="apply", node=n, op=f"{display} (mark_dirty)",
                                target=self.text(n.args[i]) if i < len(n.args) else "input", operands_yes=True,
                                site=self.site(n.args[i]) if i < len(n.args) else None,
                                extra=(("arg_span", self.site(n.args[i])),) if i < len(n.args) else ())
                    break
        fn_view = f"{ci.name}.apply()"

        def fix(v: Val) -> Val:
            if isinstance(v, T):
                # an output that views memory the Function did not make (or an input returned as-is) is a view made
                # inside the custom Function: torch will not let it be modified in place with grad on
                special = not v.maybe_tensor and not (v.storages & dirty_storages) and (
                    v.view is not None or bool(v.storages & inputs))
                # (under no_grad it is a view made in no_grad mode, which torch names instead)
                kind = ("nograd" if any(isinstance(p, T) and p.rg >= MAYBE for p in pos) else "nograd_if") \
                    if st.no_grad else "fnview"
                return v.with_(rg=rg, prov=prov, view=kind if special else None, leaf=False,
                               view_op=fn_view if special else "")
            if isinstance(v, Seq) and v.items is not None:
                return Seq.of([fix(x) for x in v.items], v.kind)
            return v

        if res is UNKNOWN:
            # a forward not followed (the call-depth limit): still a Function's output, new, requiring grad when an
            # input does (it may be a tuple of them)
            res = T(frozenset({Storage(display)}), origin=display, maybe_tuple=True)
        res = fix(res)
        saved = ctx.attrs.get("__saved__")
        if rg and isinstance(saved, Seq):
            own = SaveRecord(display, "a tensor via ctx.save_for_backward", self.site(n), f"{ci.name}.forward")
            self.backward_writes_at_apply(ci, saved, own, res, st)
            for v in saved.items or ():
                if isinstance(v, T):
                    self.save(v, st, own)
        return res

    def _dirty_contract(self, ci: ClassInfo, calls: Any, pos: list[Val], res: Val, rg: int, n: ast.Call) -> None:
        """What torch checks of ``ctx.mark_dirty(t)`` when the forward returns: ``t`` must be an input (with grad on,
        a view of a tensor the forward made is refused; another tensor only warns), and every input marked dirty
        must be among the outputs, with or without grad (``return a.clone()`` after ``a.add_(b)`` is refused)."""
        inputs: set[Storage] = set()
        known = True
        for v in pos:
            for x in (v.items or (v.elem,)) if isinstance(v, Seq) else (v,):
                if isinstance(x, T) and not x.maybe_tensor:
                    inputs |= x.storages
                elif isinstance(x, (T, UnknownT, Seq, Obj)):
                    known = False  # an input the analysis cannot see into
        outs = res.items if isinstance(res, Seq) else (res,) if isinstance(res, T) else None
        returned: set[Storage] = set()
        if outs is not None:
            for x in outs:
                if isinstance(x, T) and not x.maybe_tensor:
                    returned |= x.storages
                elif not isinstance(x, Const):
                    outs = None  # an output the analysis does not know
                    break
        apply_site = (self.site(n), f"`{ci.name}.apply` is called here")
        for v, site, stmt, text in calls:
            if not isinstance(v, T) or v.maybe_tensor or not v.storages:
                continue
            if not v.storages & inputs:
                if known and rg and v.view is not None:
                    self.report(Hazard("dirty_not_input", "method", site, stmt, "mark_dirty", text,
                                       related=(apply_site,), extra=(("view_op", v.view_op or "a view op"),)))
                continue
            if outs is not None and not v.storages & returned:
                self.report(Hazard("dirty_not_returned", "method", site, stmt, "mark_dirty", text,
                                   related=(apply_site,)))

    def backward_writes_at_apply(self, ci: ClassInfo, saved: Seq, own: SaveRecord, res: Val, st: State) -> None:
        """``Fn.apply``, whose backward writes into a tensor it saved: a node made before this one that saved the
        same tensor runs its backward after it and finds it changed; the graph kept for a second backward
        (``retain_graph=True``) finds it changed too (checked at the backward)."""
        writes = self.backward_writes(ci) if not st.silent else ()
        if not writes:
            return
        items = list(saved.items or ())
        prov: frozenset[Any] = frozenset()
        for v in (res.items or ()) if isinstance(res, Seq) else (res,):
            if isinstance(v, T):
                prov |= v.prov
        for idx, wsite, wstmt, op, name in writes:
            for v in (items if idx is None else items[idx:idx + 1]):
                if not isinstance(v, T) or v.maybe_tensor:
                    continue
                earlier = tuple(r for s in ordered(v.storages) for r in st.heap.saved.get(s, ()))
                if earlier:
                    self.report(self.backward_write_hazard(wsite, wstmt, op, name, (*earlier, own), ()))
                self.bw_pending.append((v.storages, prov, (wsite, wstmt, op, name), own))

    def backward_write_hazard(self, wsite: Site, wstmt: Site, op: str, name: str, saves: tuple[SaveRecord, ...],
                              related: tuple[tuple[Site, str], ...]) -> Hazard:
        form = "method" if op.endswith("_") else "augassign" if op.endswith("=") and op != "out=" else \
            "setitem" if op == "item assignment" else "out"
        extra = (("call_span", wsite),) if form == "method" else ()
        return Hazard("backward_write", form, wsite, wstmt, op, name, saves=saves, related=related, extra=extra)


_SAVED_ATTRS = ("saved_tensors", "saved_variables")


def _saved_read(e: ast.AST, ctx: str) -> bool:
    return isinstance(e, ast.Attribute) and e.attr in _SAVED_ATTRS and isinstance(e.value, ast.Name) \
        and e.value.id == ctx


def _backward_writes(node: ast.FunctionDef | ast.AsyncFunctionDef, path: str, kb: Any,
                     helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
                     ) -> list[tuple[int | None, Site, Site, str, str]]:
    ctx = node.args.args[0].arg
    bound: dict[str, int | None] = {}
    seqs: set[str] = set()
    counts: dict[str, int] = {}
    for n in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.For, ast.withitem, ast.NamedExpr)):
            t = getattr(n, "target", None) or getattr(n, "optional_vars", None)
            targets = [t] if t is not None else []
        for t in targets:
            for x in ast.walk(t):
                if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                    counts[x.id] = counts.get(x.id, 0) + (0 if isinstance(n, ast.AugAssign) else 1)
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        t, v = n.targets[0], n.value
        if _saved_read(v, ctx):
            if isinstance(t, (ast.Tuple, ast.List)):
                for i, e in enumerate(t.elts):
                    if isinstance(e, ast.Name):
                        bound[e.id] = i
            elif isinstance(t, ast.Name):
                seqs.add(t.id)
        elif isinstance(t, ast.Name) and isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Constant) \
                and isinstance(v.slice.value, int) and (
                    _saved_read(v.value, ctx) or (isinstance(v.value, ast.Name) and v.value.id in seqs)):
            bound[t.id] = v.slice.value
    read = bound
    bound = {k: i for k, i in read.items() if counts.get(k, 0) == 1}
    out = _writes_to(node, bound, path, kb) if bound else []
    for n in ast.walk(node):
        # `a, b = swiglu_backward(a, b, dc)`: a function of the module given the saved tensors writes into them
        # (the gradient computed in their storage); followed one level, into the parameters it never rebinds.
        # (The names it hands over may be bound again by the very statement that calls it, to what it returns.)
        if not ((isinstance(n, ast.Assign) and isinstance(n.value, ast.Call))
                or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call))):
            continue
        call = n.value
        if not (isinstance(call.func, ast.Name) and helpers and call.func.id in helpers):
            continue
        again = {x.id for t in (n.targets if isinstance(n, ast.Assign) else ()) for x in ast.walk(t)
                 if isinstance(x, ast.Name)}
        usable = {k: i for k, i in read.items() if counts.get(k, 0) == 1 + (k in again)}
        h = helpers[call.func.id]
        params = [p.arg for p in (*h.args.posonlyargs, *h.args.args)]
        given = {params[i]: usable[a.id] for i, a in enumerate(call.args)
                 if i < len(params) and isinstance(a, ast.Name) and a.id in usable}
        given.update({k.arg: usable[k.value.id] for k in call.keywords
                      if k.arg in params and isinstance(k.value, ast.Name) and k.value.id in usable})
        if given:
            rebound = {x.id for x in ast.walk(h) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)}
            given = {k: i for k, i in given.items() if k not in rebound}
            if given:
                out += _writes_to(h, given, path, kb)
    return out


def _writes_to(node: ast.FunctionDef | ast.AsyncFunctionDef, bound: dict[str, int | None], path: str,
               kb: Any) -> list[tuple[int | None, Site, Site, str, str]]:
    """The in-place writes in ``node``'s body to the names in ``bound`` (each the index of a saved tensor)."""
    stmt_of: dict[int, ast.stmt] = {}
    for st in ast.walk(node):
        if isinstance(st, ast.stmt) and st is not node:
            for sub in ast.walk(st):
                stmt_of[id(sub)] = st  # inner statements come later in the walk and win
    out: list[tuple[int | None, Site, Site, str, str]] = []
    for n in ast.walk(node):
        name, op = None, ""
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name):
            m = n.func.attr
            if m.endswith("_") and not m.startswith("_"):
                info = kb.get(f"Tensor.{m}")
                if info is not None and info.mutates:
                    name, op = n.func.value.id, m
        if isinstance(n, ast.Call) and name is None:
            for k in n.keywords:
                if k.arg == "out" and isinstance(k.value, ast.Name):
                    name, op = k.value.id, "out="
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            name, op = n.target.id, f"{_AUG.get(type(n.op), '?')}="
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Subscript) \
                and isinstance(n.targets[0].value, ast.Name):
            name, op = n.targets[0].value.id, "item assignment"
        if name is not None and name in bound:
            out.append((bound[name], Site.of(n, path), Site.of(stmt_of.get(id(n), n), path), op, name))
    return out


_AUG = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@",
        ast.FloorDiv: "//", ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


def _writes_objects(node: ast.AST) -> bool:
    """Does this function set attributes or items, or call setattr / add_module / register_*: could it leave
    submodules of one class different from each other?"""
    for x in ast.walk(node):
        if isinstance(x, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = x.targets if isinstance(x, ast.Assign) else [x.target]
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) or (
                    isinstance(t, (ast.Tuple, ast.List)) and any(isinstance(e, (ast.Attribute, ast.Subscript))
                                                                for e in t.elts)) for t in targets):
                return True
        elif isinstance(x, ast.Call):
            f = x.func
            nm = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if nm in ("setattr", "add_module", "register_buffer", "register_parameter", "register_module",
                      "apply", "__setattr__"):
                return True
    return False



_PARAM_METHODS = frozenset({"parameters", "named_parameters"})


def _param_attrs_of(node: ast.ClassDef) -> set[str]:
    """``X`` of every ``self.X.parameters()`` / ``self.X.named_parameters()`` in the class body (cached on it)."""
    got: set[str] | None = getattr(node, "_gg_param_attrs", None)
    if got is None:
        got = set()
        for x in ast.walk(node):
            if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr in _PARAM_METHODS:
                recv = x.func.value
                if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self":
                    got.add(recv.attr)
        node._gg_param_attrs = got  # type: ignore[attr-defined]
    return got


def _hook_view(v: Val, what: str) -> Val:
    """``v`` as BackwardHookFunction gives it back: a tensor that requires grad becomes a view made inside a custom
    Function (each one of a tuple); anything else passes unchanged."""
    if isinstance(v, T):
        if v.maybe_tensor or v.rg < MAYBE:
            return v
        return v.with_(view="fnview", view_op=what, leaf=False)
    if isinstance(v, Seq) and v.items is not None and v.kind == "tuple":
        return Seq.of([_hook_view(x, what) for x in v.items], v.kind)
    return v


def _optimizer_class(ci: ClassInfo) -> bool:
    """Does the class derive from one of torch's optimizers (whose ``step`` updates the parameters it was given)?"""
    return any(b.startswith("torch.optim.") and ".lr_scheduler" not in b and b != "torch.optim.Optimizer"
               for b in ci.torch_bases())


def _sequential_subclass(o: Obj) -> bool:
    """An instance of a workspace subclass of ``nn.Sequential``: its entries are the layers it runs."""
    return o.kind == "local" and o.info is not None and "torch.nn.Sequential" in o.info.torch_bases()


def _field_source(o: Obj) -> T | None:
    """The tensor-like value an opaque object was read off (``out`` for ``out.q`` or ``out.q.squeeze``), if any."""
    cur: Any = o
    for _ in range(6):
        if not isinstance(cur, Obj) or cur.kind != "opaque":
            return None
        src = cur.cfg.get("src")
        if isinstance(src, T):
            return src
        cur = cur.cfg.get("parent")
    return None


_FORWARD_HOOKS = {"register_forward_pre_hook": "forward_pre_hooks", "register_forward_hook": "forward_hooks"}
MAX_FORWARD_HOOKS = 4


def _hook_entries(hooks: Val | None) -> list[tuple[Val, bool]]:
    """The (hook, with_kwargs) pairs a module's ``forward_hooks`` or ``forward_pre_hooks`` entry holds."""
    if not isinstance(hooks, Seq) or hooks.items is None:
        return []
    out = []
    for e in hooks.items:
        if isinstance(e, Seq) and e.items is not None and len(e.items) == 3:
            flag = e.items[1]
            out.append((e.items[0], isinstance(flag, Const) and flag.value is True))
    return out


def _hook_number(entry: Val | None) -> object:
    """The number a hook entry (see ``_hook_entries``) was registered under; None for anything else."""
    if isinstance(entry, Seq) and entry.items is not None and len(entry.items) == 3:
        num = entry.items[2]
        return num.value if isinstance(num, Const) else None
    return None


# layers whose training-mode call updates running statistics in place
_RUNNING_STATS = frozenset({"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "InstanceNorm1d",
                            "InstanceNorm2d", "InstanceNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
                            "LazyBatchNorm3d"})


# torch layers that keep buffers of their own (running statistics, quantization observers)
_BUFFERED_LAYERS = ("Norm", "Quant", "Observer")


def _buffer_names(o: Obj) -> tuple[str, ...]:
    """The names the code registered with ``register_buffer`` on ``o``, in order."""
    got = o.cfg.get("_buffers")
    if isinstance(got, Seq) and got.items is not None:
        return tuple(str(x.value) for x in got.items if isinstance(x, Const))
    return ()


def _dict_view(d: Seq, name: str) -> Seq:
    """``d.items()`` / ``.values()`` / ``.keys()`` of a ModuleDict's entries: one item per entry when the keys are
    known and few (a loop over the heads runs each head), else one of unknown length that stands for them all."""
    ents = d.entries()
    if ents is not None and len(ents) <= MAX_MODULES_UNROLL:
        if name == "values":
            return Seq.of(tuple(ents.values()))
        if name == "keys":
            return Seq.of(tuple(Const(k) for k in ents))
        return Seq.of(tuple(Seq.of((Const(k), v), "tuple") for k, v in ents.items()))
    key = Const("", known=False)
    if name == "values":
        return Seq(None, seq_elem(d))
    if name == "keys":
        return Seq(None, key)
    return Seq(None, Seq.of((key, seq_elem(d)), "tuple"))


def _marks_dirty(ci: ClassInfo) -> bool:
    """Does the Function's forward (or setup_context) call ``ctx.mark_dirty``? (Read once per class: cached on it.)"""
    got = getattr(ci.node, "_gg_marks_dirty", None)
    if got is None:
        got = any(isinstance(x, ast.Attribute) and x.attr == "mark_dirty"
                  for name in ("forward", "setup_context") if (fi := ci.find_method(name)) is not None
                  for x in ast.walk(fi.node))
        ci.node._gg_marks_dirty = got  # type: ignore[attr-defined]
    return got

