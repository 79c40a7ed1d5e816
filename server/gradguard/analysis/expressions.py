"""Expressions: names, literals, operators, subscripts (views), attributes, comprehensions, iteration."""

from __future__ import annotations

import ast
import itertools
from typing import Any

from gradguard.analysis.common import (
    BINOPS,
    CONTAINER_TYPES,
    MAX_UNROLL,
    OPSYM,
    STR_METHODS,
    Frame,
    fold,
    is_false,
    is_true,
    known_items,
    known_truth,
    view_made,
)
from gradguard.analysis.core import AnalyzerCore
from gradguard.analysis.hazards import SaveRecord
from gradguard.analysis.state import State, join_states, split_paths
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
    FuncInfo,
    Method,
    ModV,
    Obj,
    Params,
    Ref,
    Seq,
    Storage,
    Super,
    T,
    UnknownT,
    Val,
    Written,
    choice,
    formula_of,
    fresh,
    join,
    join_paths,
    known_int,
    known_str,
    list_subclass,
    ordered,
    owner_key,
    recording_allows,
    seq_elem,
    written_key,
)
from gradguard.knowledge import libraries as L

# classes `type(x) is C` compares exactly (see Calls.call_builtin for `type` of a tensor)
_EXACT_TYPES = CONTAINER_TYPES | {"torch.Tensor"}
# nn.Module's own API: on an object of ours, a name from here is a method of its torch base, not a part
MODULE_API = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
    "named_modules", "apply", "cuda", "cpu", "to", "train", "eval", "zero_grad", "state_dict", "load_state_dict",
    "register_buffer", "register_parameter", "add_module", "register_module", "forward", "requires_grad_", "half",
    "float", "double", "bfloat16", "type", "get_submodule", "get_parameter", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "extra_repr", "share_memory", "xpu", "ipu",
})
_CONTAINERS = frozenset({"sequential", "modulelist", "moduledict"})
_MODULE_KINDS = _CONTAINERS | {"torch", "local"}
_MODULE_TABLES = frozenset({"_parameters", "_buffers", "_modules"})
_CONTAINER_API = frozenset({"append", "extend", "insert", "pop", "index", "count", "keys", "values", "items", "update",
                            "clear", "copy", "get", "setdefault"})
# tensor methods code reads as values without calling them (bound methods passed on): not properties
TENSOR_METHOD_VALUES = frozenset({"size", "dim", "numel", "item", "tolist", "backward", "register_hook"})
# attributes of what a model or distribution returns that are tensors computed from it
TENSOR_PROPERTIES = frozenset({
    "mean", "mode", "stddev", "variance", "probs", "logits", "loc", "scale", "concentration", "rate",
    "last_hidden_state", "pooler_output", "hidden_states", "attentions", "loss", "prediction_logits",
    "sample", "rsample", "pred", "out", "output", "features", "embeddings",
})


def _element_of(e: ast.expr) -> bool:
    """``parents[i]``, ``order[k - 1]``: one element of an index tensor taken by a single integer (a 0-dim tensor when
    the tensor is a vector of indices, as such tables are), not a slice, a tuple or a list of them."""
    return isinstance(e, ast.Subscript) and isinstance(e.slice, (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp)) \
        and not (isinstance(e.slice, ast.Constant) and not isinstance(e.slice.value, int))


# what makes a table of integer indices (a mask, `x > 0`, is no such table: its element is a 0-dim bool)
_INT_TABLES = frozenset({"LongTensor", "IntTensor", "ShortTensor", "tensor", "as_tensor", "from_numpy", "arange",
                         "randperm", "argsort", "argmax", "argmin", "randint"})


def _int_table(v: Val) -> bool:
    """Is ``v`` (an element read off a tensor) from a table of integer indices the code built?"""
    return isinstance(v, T) and not v.maybe_tensor and bool(v.storages) and all(
        s.desc in _INT_TABLES for s in v.storages)


def _strided_index(s: ast.expr) -> bool:
    """Does basic indexing with ``s`` give a strided view of a contiguous tensor? It does when it narrows a dimension
    (an index, a partial slice) after one it keeps whole or in part (``x[:, 0]``, ``x[..., :2]``, ``x[1:3, 0]``), or
    steps (``x[::2]``); ``x[0]``, ``x[1:3]``, ``x[0, 1:3]``, ``x[:, None]`` stay contiguous."""
    kept = False
    for p in s.elts if isinstance(s, ast.Tuple) else [s]:
        if isinstance(p, ast.Constant) and p.value is None:
            continue
        if isinstance(p, ast.Constant) and p.value is Ellipsis:
            kept = True
            continue
        if isinstance(p, ast.Slice):
            if p.step is not None or (kept and (p.lower is not None or p.upper is not None)):
                return True
            kept = True
            continue
        if kept:
            return True
    return False


_EXPR: dict[type, Any] = {}  # node class -> handler (an ``e_*`` method): dispatch without building names


def _ev_children(self: Expressions, node: ast.expr, st: State, fr: Frame) -> Val:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            self.ev(child, st, fr)
    return UNKNOWN


# decorators that make a method read as an attribute (`functools.cached_property`, `abc.abstractproperty`)
_PROPERTIES = frozenset({"property", "cached_property", "abstractproperty"})

class Expressions(AnalyzerCore):
    # ------------------------------------------------------------------ expressions
    def ev(self, node: ast.expr | None, st: State, fr: Frame) -> Val:
        if node is None:
            return NONE
        cls = node.__class__
        m = _EXPR.get(cls)
        if m is None:
            m = _EXPR[cls] = getattr(type(self), "e_" + cls.__name__, _ev_children)
        return m(self, node, st, fr)  # type: ignore[no-any-return]

    def e_Constant(self, n: ast.Constant, st: State, fr: Frame) -> Val:
        return Const(n.value)

    def e_Name(self, n: ast.Name, st: State, fr: Frame) -> Val:
        return self.lookup(n.id, st, fr)

    def e_Tuple(self, n: ast.Tuple | ast.List | ast.Set, st: State, fr: Frame) -> Val:
        items: list[Val] = []
        unknown_len = False
        starred_params: list[Val] | None = [] if any(isinstance(e, ast.Starred) for e in n.elts) else None
        for e in n.elts:
            if isinstance(e, ast.Starred):
                v = self.ev(e.value, st, fr)
                if starred_params is not None:
                    if isinstance(v, Params):
                        starred_params.append(v)
                    else:
                        starred_params = None
                if isinstance(v, Seq) and v.items is not None:
                    items.extend(v.items)
                else:
                    unknown_len = True
                    items.append(self.elem(v, e))
            else:
                items.append(self.ev(e, st, fr))
                starred_params = None
        kind = "tuple" if isinstance(n, ast.Tuple) else "list"
        if starred_params and not isinstance(n, ast.Set):
            # `[*encoder.parameters(), *head.parameters()]`: the parameters of those modules, as an optimizer given
            # the list updates them
            return Params(frozenset().union(*(self.owners_of(v) for v in starred_params)))
        s = Seq.of(items, kind)
        return Seq(None, s.elem, kind) if unknown_len else s

    e_List = e_Tuple

    e_Set = e_Tuple

    def e_Dict(self, n: ast.Dict, st: State, fr: Frame) -> Val:
        if len(n.keys) > 8 and (len(n.keys) > 64 or not all(
                isinstance(v, (ast.Name, ast.Attribute, ast.Constant)) for v in n.values)):
            # configuration tables: nothing autograd-relevant, costly to interpret (a registry of names, as
            # `{ACT_RELU: nn.ReLU, ...}`, is read: a factory picks its layer from it)
            return UNKNOWN
        vals = []
        keyed: dict[str, Val] | None = {}
        for k, v in zip(n.keys, n.values):
            kv = self.ev(k, st, fr) if k is not None else None
            val = self.ev(v, st, fr)
            vals.append(val)
            if keyed is None:
                continue
            if k is not None and (name := known_str(kv)) is not None:
                keyed[name] = val  # a literal key, or a name bound to one (`ACT_RELU: nn.ReLU`)
            elif k is None and isinstance(val, Seq) and (ents := val.entries()) is not None:
                keyed.update(ents)  # {**defaults, "inplace": True}
            else:
                keyed = None
        return Seq.keyed(keyed) if keyed is not None else Seq.of(vals, "dict")

    def e_JoinedStr(self, n: ast.JoinedStr, st: State, fr: Frame) -> Val:
        """An f-string: known when every part is a known string or int shown plainly (`f"layer{i}"` in an unrolled
        loop, a name `getattr` or `add_module` then uses)."""
        parts: list[str] = []
        known = True
        for v in n.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
                continue
            if isinstance(v, ast.FormattedValue):
                x = self.ev_nograd(v.value, st, fr)  # (f"{x.min()}": formatted for a message, never part of a graph)
                if known and v.format_spec is None and v.conversion in (-1, ord("s")) and isinstance(x, Const) \
                        and x.known and type(x.value) in (str, int):
                    parts.append(str(x.value))
                    continue
            else:
                self.ev(v, st, fr)
            known = False
        return Const("".join(parts)) if known else Const("", known=False)

    def e_FormattedValue(self, n: ast.FormattedValue, st: State, fr: Frame) -> Val:
        self.ev_nograd(n.value, st, fr)  # f"{x.min()}": formatted for a message, never part of a graph
        return UNKNOWN_NUM

    def e_Starred(self, n: ast.Starred, st: State, fr: Frame) -> Val:
        return self.ev(n.value, st, fr)

    def e_NamedExpr(self, n: ast.NamedExpr, st: State, fr: Frame) -> Val:
        v = self.ev(n.value, st, fr)
        if isinstance(n.target, ast.Name):
            st.env[n.target.id] = v
        return v

    def e_Lambda(self, n: ast.Lambda, st: State, fr: Frame) -> Val:
        outer = fr.func.closure if fr.func is not None else None  # (the names the enclosing def sees too)
        fi = FuncInfo(n, "<lambda>", closure={**outer, **st.env} if outer else dict(st.env), mod=self.mod)
        self.made_funcs.append(fi)
        return Func(fi)

    def e_IfExp(self, n: ast.IfExp, st: State, fr: Frame) -> Val:
        test = self.ev(n.test, st, fr)
        if is_true(test) or self.is_callable_object(test):  # `norm_layer(...) if norm_layer else nn.Identity()`
            return self.ev(n.body, st, fr)
        if is_false(test):
            return self.ev(n.orelse, st, fr)
        # each arm from its own copy of the state, joined as the arms of an `if` are: `out if self.bn is None else
        # self.bn(out)` is bn's output on one path and the input bn saved on the other, never the input after bn ran
        a, b = st.branch(), st.branch()
        va = self.ev_branch(n.body, a, fr, recording_allows(test, True))
        vb = self.ev_branch(n.orelse, b, fr, recording_allows(test, False))
        (va, vb), alt_saved = split_paths([va, vb], [a.heap, b.heap])
        merged = join_states(a, b, own=True)
        assert merged is not None
        st.env, st.heap = merged.env, merged.heap if not alt_saved else merged.heap.with_saved(alt_saved)
        return join_paths(va, vb)

    def ev_branch(self, node: ast.expr, st: State, fr: Frame, recording: bool) -> Val:
        """An arm of a conditional expression; without autograd when its condition says so."""
        if recording:
            return self.ev(node, st, fr)
        flags = (st.no_grad, st.silent)
        st.no_grad = st.silent = True
        try:
            return self.ev(node, st, fr)
        finally:
            st.no_grad, st.silent = flags

    def e_BoolOp(self, n: ast.BoolOp, st: State, fr: Frame) -> Val:
        # Python's short circuit: `a and b` is `a` when `a` is falsy, and `b` is not evaluated (`layer == "norm" and
        # self.with_norm` on the pass where `layer` is "act" is False, whatever with_norm is); an operand whose
        # truth is known and lets evaluation go on is not a possible result (except the last one)
        out: Val | None = None
        vals = []
        stop = isinstance(n.op, ast.Or)  # the truth that ends evaluation
        last = len(n.values) - 1
        unsure = False  # a possible result whose truth is not known
        for i, v in enumerate(n.values):
            x = self.ev(v, st, fr)
            vals.append(x)
            truth = known_truth(x)
            if truth is None or truth == stop or i == last:
                out = x if out is None else join(out, x)
                unsure = unsure or truth is None
            if truth == stop:
                break
        if unsure and known_truth(out) is not None:
            # `done or (ep_len == max_ep_len)` with `done` unknown: the join took the known operand's value, but
            # the result is as unknown as `done` is
            out = UNKNOWN_NUM
        if any(isinstance(x, Cond) for x in vals):
            op = "and" if isinstance(n.op, ast.And) else "or"
            f = formula_of(vals[0])
            for x in vals[1:]:
                f = (op, f, formula_of(x))
            return Cond(formula=f)
        return out or UNKNOWN

    def ev_nograd(self, node: ast.expr, st: State, fr: Frame) -> Val:
        """Evaluate what only feeds a comparison or an index: no gradient flows back through it, so what its ops
        save is never unpacked by backward."""
        flag = st.no_grad
        outer = self.fed_grad_off is None
        if outer:
            self.fed_grad_off = flag
        st.no_grad = True
        try:
            return self.ev(node, st, fr)
        finally:
            st.no_grad = flag
            if outer:
                self.fed_grad_off = None

    def e_Compare(self, n: ast.Compare, st: State, fr: Frame) -> Val:
        folded = self._fold_compare(n, st, fr)
        if folded is not None:
            return folded
        same = self._same_memory(n, st, fr)
        if same is not None:
            return same
        if len(n.ops) == 1 and isinstance(n.ops[0], (ast.Is, ast.IsNot)) and isinstance(n.left, ast.Attribute) \
                and n.left.attr == "grad_fn" and isinstance(n.comparators[0], ast.Constant) \
                and n.comparators[0].value is None:
            # `x.grad_fn is not None`: x is part of a graph
            self.ev_nograd(n.left.value, st, fr)
            return Cond(formula="rg" if isinstance(n.ops[0], ast.IsNot) else ("not", "rg"))
        vals = [self.ev_nograd(n.left, st, fr), *(self.ev_nograd(c, st, fr) for c in n.comparators)]
        if len(n.ops) == 1 and all(isinstance(v, Const) and v.known and not isinstance(v, Cond) for v in vals):
            return _const_compare(n.ops[0], vals[0], vals[1])  # type: ignore[arg-type]  # `name.find("ReLU") != -1`
        if len(n.ops) == 1 and isinstance(n.ops[0], (ast.Is, ast.IsNot)) and any(
                isinstance(c, ast.Constant) and c.value is None for c in (n.left, n.comparators[0])):
            other = vals[1] if isinstance(n.left, ast.Constant) else vals[0]
            if _surely_not_none(other) or self.is_callable_object(other):
                return Const(isinstance(n.ops[0], ast.IsNot))  # `self.norm is not None` with a module there
        refs = [v for v in vals if isinstance(v, Ref)]
        if len(n.ops) == 1 and isinstance(n.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) and len(refs) == 2:
            a, b = (self.canon(v.qual) for v in refs)
            if "torch.Tensor" in (a, b) and a in _EXACT_TYPES and b in _EXACT_TYPES:
                # `type(out) is tuple` with out a tensor: torch.Tensor is none of the containers
                return Const((a == b) == isinstance(n.ops[0], (ast.Is, ast.Eq)))
        if len(n.ops) == 1 and isinstance(n.ops[0], (ast.In, ast.NotIn)) and isinstance(vals[1], Seq) \
                and (ents := vals[1].entries()) is not None and (name := known_str(vals[0])) is not None:
            return Const((name in ents) == isinstance(n.ops[0], ast.In))  # `"inplace" in kwargs`
        if len(n.ops) == 1 and isinstance(n.ops[0], (ast.In, ast.NotIn)) and isinstance(vals[1], Seq) \
                and vals[1].kind in ("tuple", "list") and vals[1].items is not None \
                and isinstance(key := vals[0], Const) and key.known and type(key.value) in (str, int):
            # `name in ("conv_1", "conv_2")`: a known name among known ones
            among = [x.value for x in vals[1].items if isinstance(x, Const) and x.known and not isinstance(x, Cond)]
            if len(among) == len(vals[1].items):
                found = any(type(x) is type(key.value) and x == key.value for x in among)
                return Const(found == isinstance(n.ops[0], ast.In))
        if any(isinstance(v, T) for v in vals):
            return fresh("comparison", rg=NO)
        return UNKNOWN_NUM

    def _same_memory(self, n: ast.Compare, st: State, fr: Frame) -> Val | None:
        """``query.data_ptr() == key.data_ptr() == value.data_ptr()`` (attention's self-attention test): False when
        two of the tensors are made by different ops (their memory is not shared), True when they are the very same
        tensor; None (not known) otherwise, or for anything but a chain of ``==`` / ``!=`` between ``.data_ptr()``
        calls."""
        parts = [n.left, *n.comparators]
        if not all(isinstance(op, (ast.Eq, ast.NotEq)) for op in n.ops) or not all(
                isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) and p.func.attr == "data_ptr"
                and not p.args and not p.keywords for p in parts):
            return None
        ts = [self.ev_nograd(p.func.value, st, fr) for p in parts]  # type: ignore[attr-defined]
        if not all(isinstance(t, T) and not t.maybe_tensor and t.storages for t in ts):
            return None
        answers: list[bool] = []
        for a, b in itertools.pairwise(ts):
            assert isinstance(a, T) and isinstance(b, T)
            if a.storages.isdisjoint(b.storages):
                answers.append(False)
            elif a.storages == b.storages and len(a.storages) == 1 and a.view is None and b.view is None:
                answers.append(True)
            else:
                return None
        return Const(all(same == isinstance(op, ast.Eq) for same, op in zip(answers, n.ops)))

    def _fold_compare(self, n: ast.Compare, st: State, fr: Frame) -> Val | None:
        """``self.kind == "cross"``, ``num_vector_embeds is not None`` on known constants: the answer (a branch on a
        configuration the code was built with is taken, or not). None: not all operands are known constants."""
        if len(n.ops) != 1 or not _plain_operand(n.left) or not _plain_operand(n.comparators[0]):
            return None
        a = self.ev_nograd(n.left, st, fr)
        b = self.ev_nograd(n.comparators[0], st, fr)
        if isinstance(n.ops[0], (ast.Eq, ast.NotEq)) and any(
                isinstance(x, Ref) and self.canon(x.qual) == "torch.__version__" for x in (a, b)) and any(
                isinstance(x, Const) and x.known and isinstance(x.value, str) and not x.value[:1].isdigit()
                for x in (a, b)):
            # `torch.__version__ == "parrots"` (OpenMMLab's other framework): torch's version is a version number
            return Const(isinstance(n.ops[0], ast.NotEq))
        if not (isinstance(a, Const) and isinstance(b, Const) and a.known and b.known) \
                or isinstance(a, Cond) or isinstance(b, Cond):
            return None
        return _const_compare(n.ops[0], a, b)

    def e_UnaryOp(self, n: ast.UnaryOp, st: State, fr: Frame) -> Val:
        v = self.ev(n.operand, st, fr)
        if isinstance(v, Cond) and isinstance(n.op, ast.Not):
            return Cond(formula=("not", v.formula))
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
        if isinstance(n.op, ast.Not) and self.is_callable_object(v):
            return Const(False)  # `if not act_layer:` on a class: classes and functions are true
        if isinstance(v, Const) and v.known and isinstance(n.op, ast.USub) and isinstance(v.value, (int, float)):
            return Const(-v.value)
        return UNKNOWN_NUM

    def e_BinOp(self, n: ast.BinOp, st: State, fr: Frame) -> Val:
        def run() -> Val:
            a = self.ev(n.left, st, fr)
            b = self.ev(n.right, st, fr)
            return self.binop(a, b, n.op, n, st, fr)

        return self.cutting(n, st, run)  # `(x * w) // 2`

    def binop(self, a: Val, b: Val, op: ast.operator, n: ast.AST, st: State, fr: Frame) -> Val:
        def real(v: Val) -> bool:
            return isinstance(v, T) and not v.maybe_tensor

        if isinstance(a, Obj) and a.kind == "opaque":
            a = self.field_tensor(a, st)
        if isinstance(b, Obj) and b.kind == "opaque":
            b = self.field_tensor(b, st)
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
        if isinstance(op, ast.Add) and (isinstance(a, Params) or isinstance(b, Params)) \
                and isinstance(a, (Params, Seq)) and isinstance(b, (Params, Seq)):
            # `params += list(model.parameters())` on a list of parameters (`[]` to begin with): still what an
            # optimizer given it updates
            return Params(self.owners_of(a) | self.owners_of(b))
        if isinstance(a, Seq) and isinstance(b, Seq) and isinstance(op, ast.Add):
            if a.items is not None and b.items is not None:
                return Seq.of(a.items + b.items, a.kind)
            return Seq(None, join(a.elem, b.elem), a.kind)
        if isinstance(a, Seq) and isinstance(op, ast.Mult):
            if a.items is not None and isinstance(b, Const) and b.known and isinstance(b.value, int) \
                    and not isinstance(b.value, bool) and 0 <= len(a.items) * b.value <= MAX_UNROLL:
                return Seq.of(a.items * b.value, a.kind)  # [h] * 2: a list of known length
            return Seq(None, a.elem, a.kind)  # [x] * n
        if isinstance(a, Const) and isinstance(b, Const) and a.known and b.known:
            try:
                return Const(fold(op, a.value, b.value))
            except Exception:
                return UNKNOWN_NUM
        return UNKNOWN_NUM

    def e_Subscript(self, n: ast.Subscript, st: State, fr: Frame) -> Val:
        if isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name) and n.value.func.id == "globals" \
                and not n.value.args and not n.value.keywords \
                and getattr(self.lookup("globals", st, fr), "qual", None) == "builtins.globals":
            got = self.dynamic_global(n.slice, self.ev_nograd(n.slice, st, fr), fr)  # `globals()[kind + "Net"]`
            return got if got is not None else UNKNOWN
        if isinstance(n.value, ast.Attribute) and n.value.attr in _MODULE_TABLES:
            # `module._parameters["weight"]`: the registry nn.Module's attribute lookup reads, i.e. `module.weight`
            owner = self.ev(n.value.value, st, fr)
            name = known_str(self.ev_nograd(n.slice, st, fr))
            if isinstance(owner, Obj) and owner.kind in _MODULE_KINDS and name is not None:
                return self.getattr(owner, name, n, st)
            base = self.attribute_of(owner, n.value, st)
        else:
            base = self.ev(n.value, st, fr)
        idx = self.ev_nograd(n.slice, st, fr) if not isinstance(n.slice, ast.Constant) else Const(n.slice.value)
        if isinstance(base, T) and (base.maybe_tensor or (isinstance(idx, Const) and idx.known and isinstance(
                idx.value, str))):
            # (a string key: what looked like a tensor is a mapping, `out["backbone_fpn"]`; its entry may be anything)
            return fresh("element", rg=base.rg, maybe_tensor=True)
        if isinstance(base, T):
            if self._advanced_index(n.slice, idx):
                out = self.new_tensor([base], st, "index")
                if not st.no_grad and base.rg >= MAYBE and not base.maybe_tensor and not st.silent:
                    # advanced indexing saves its index tensors (IndexBackward0 scatters the gradient by them)
                    rec = SaveRecord("indexing", f"its index `{self.text(n.slice)}`", self.site(n),
                                     "Tensor.__getitem__", None, "indices")
                    for ix in (idx.items or ()) if isinstance(idx, Seq) else (idx,):
                        if isinstance(ix, T) and not ix.maybe_tensor:
                            self.save(ix, st, rec)
                return out
            view = ("nograd" if base.rg >= MAYBE else "nograd_if") \
                if st.no_grad and not base.maybe_tensor and (base.rg >= MAYBE or not st.silent) else (
                base.view if base.view in SPECIAL_VIEWS else "view")
            made = view_made(view, base, self.stamp, False) if view == "nograd" else 0  # (an item of a multi-output
            # view keeps made=0: only the views the op returned are tracked)
            return T(base.storages, rg=NO if st.no_grad else base.rg, leaf=base.leaf, view=view,
                     view_op=base.view_op or "indexing", maybe_tensor=base.maybe_tensor, prov=base.prov,
                     alias_of=base.alias_of, alias_site=base.alias_site, origin="indexing", view_site=self.site(n),
                     noncontig=base.noncontig or _strided_index(n.slice), made=made)
        if isinstance(base, Seq):
            if isinstance(n.value, ast.Name) and isinstance(n.slice, ast.Name):
                w = st.env.get(written_key(n.value.id, n.slice.id))
                if isinstance(w, Written) and w.seq is base and w.key is idx:
                    return w.value  # the item this code wrote under the same key a moment ago
            if (keyed := base.entries()) is not None:
                if (name := known_str(idx)) is not None and name in keyed:
                    return self.kept_output(n.value, keyed[name], st)
                return base.read(name) if name is not None else base.elem
            if base.wkeys is not None and (name := known_str(idx)) is not None:
                return base.read(name)
            if base.items is not None and isinstance(idx, Const) and idx.known and isinstance(idx.value, int):
                try:
                    return self.kept_output(n.value, base.items[idx.value], st)
                except IndexError:
                    return base.elem
            if isinstance(n.slice, ast.Slice):
                part = _const_slice(base, n.slice)
                return part if part is not None else Seq(None, base.elem, base.kind)
            if isinstance(base.elem, T) and fr.loops and base.kind in ("list", "tuple"):
                return self.item_instance(base.elem, n.slice, st, fr)
            return base.elem
        if isinstance(base, Alt):
            if isinstance(n.slice, ast.Slice):  # `rep = rep[1:]` on lists built differently: each one sliced
                sliced = [_const_slice(a, n.slice) for a in base.alts]
                if all(x is not None for x in sliced):
                    return Alt(tuple(x for x in sliced if x is not None))
            name = known_str(idx) if all(a.kind == "dict" for a in base.alts) else None
            got = seq_elem(base)
            if name is not None:  # (dicts built differently: the entry of whichever one it is)
                reads = [a.read(name) for a in base.alts]
                got = reads[0]
                for r in reads[1:]:
                    got = join(got, r)
            if isinstance(got, T) and fr.loops and all(a.kind in ("list", "tuple") for a in base.alts):
                return self.item_instance(got, n.slice, st, fr)  # (lists of several lengths: any item of them)
            return got
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
            got = seq_elem(ents)
            return self.opaque_child(base, "[]") if got is UNKNOWN else got  # a module we cannot see
        if isinstance(base, Obj) and base.kind == "opaque" and base.cfg.get("data") is None:
            return self.opaque_child(base, "[]")  # `self.model[-1]` of a model we cannot see into: a module of it
        if list_subclass(base) and not isinstance(n.slice, ast.Slice) and base.info is not None \
                and base.info.find_method("__getitem__") is None:
            ents = base.entries  # `self[0]` in a subclass of list: an item
            if isinstance(ents, Seq) and ents.items is not None and (i := known_int(idx)) is not None \
                    and -len(ents.items) <= i < len(ents.items):
                return ents.items[i]
            return seq_elem(ents)
        return UNKNOWN

    def item_instance(self, elem: T, sl: ast.expr, st: State, fr: Frame) -> T:
        """``lst[i + c]`` inside `for i in range(...)` of a list whose items are not told apart: the item ``c``
        places (plus a step per pass) from where the loop's index started, a tensor of its own (see common.Loop).
        A top-down pyramid, `for i in range(n - 1, 0, -1): laterals[i - 1] += up(laterals[i])` after
        `self.gate(laterals[i - 1])` saved the item, writes each item before the next pass saves it: the same
        expression names another item on each pass. Items the code put in the list itself alias nothing more
        than the list's storages do: a save through any item stays on them too, for writes through other names."""
        at = self.item_place(sl, fr)
        if at is None:
            return elem
        loop, k = at
        saved = st.heap.saved
        out: list[Storage] = []
        for s0 in ordered(elem.storages):
            of = self.instance_of.get(s0)
            if of is not None and of[0] is loop:
                s0 = of[1]  # an item read on an earlier pass and put back (`feats[i] += ...`): the list's own
            put = loop.placed.get(s0)
            if put is not None:
                # a tensor this loop put into the list (`feats[i - 1] = conv(feats[i - 1])`): the item at that
                # place, and at no other
                if k in put and s0 not in out:
                    out.append(s0)
                continue
            c = loop.instances.get((s0, k))
            if c is None:
                c = loop.instances[(s0, k)] = Storage(s0.desc, s0.site, s0.leaf, s0.param_of)
                self.instance_of[c] = (loop, s0, k)
                recs = tuple(r for r in saved.get(s0, ()) if loop.mirrored.get((s0, r), k) == k)
                if recs:
                    saved[c] = recs
            if c not in out:
                out.append(c)
        return elem.with_(storages=frozenset(out)) if out else elem

    def _advanced_index(self, sl: ast.expr, idx: Val) -> bool:
        if isinstance(idx, (T, UnknownT, Obj)):
            # a tensor index (or one we cannot tell from a tensor, `x[n_id]`): a copy, not a view; but one element
            # of an index tensor, `x[parents[i]]`, is a 0-dim tensor, which indexes as the integer it holds does
            return not (_element_of(sl) and _int_table(idx))
        if isinstance(sl, (ast.List, ast.ListComp)):
            return True
        if isinstance(sl, ast.Tuple):
            # (a sequence inside the index tuple, `x[:, dims]` with `dims = [0, 2]` or `(0, 2)`, indexes by its
            # elements: a copy, as a tensor there does)
            return any(isinstance(e, (ast.List, ast.ListComp)) for e in sl.elts) or (
                isinstance(idx, Seq) and idx.items is not None and len(idx.items) == len(sl.elts)
                and any((isinstance(x, T) and not (_element_of(e) and _int_table(x)))
                        or (isinstance(x, Seq) and x.kind in ("list", "tuple"))
                        for x, e in zip(idx.items, sl.elts)))
        # `x[dims]` with a list value (a tuple value is one index per dimension, `x[(0, 1)]` is `x[0, 1]`)
        return isinstance(idx, Seq) and idx.kind == "list"


    def e_Slice(self, n: ast.Slice, st: State, fr: Frame) -> Val:
        for x in (n.lower, n.upper, n.step):
            if x is not None:
                self.ev(x, st, fr)
        return UNKNOWN_NUM

    def kept_output(self, call: ast.expr, out: Val, st: State) -> Val:
        """``x.topk(k).indices``, ``x.max(1)[1]``: the only output kept of a call's tuple is one that never requires
        grad, so the op's backward node, reachable only through the outputs dropped here, never runs: what it
        saved (the indices) is never read, and writing the kept output in place breaks nothing."""
        if isinstance(call, ast.Call) and isinstance(out, T) and out.rg == NO and not out.maybe_tensor:
            site = self.site(call)
            saved = st.heap.saved
            for s in out.storages:
                recs = saved.get(s)
                if recs and any(r.site == site for r in recs):
                    keep = tuple(r for r in recs if r.site != site)
                    if keep:
                        saved[s] = keep
                    else:
                        del saved[s]
        return out

    def e_Attribute(self, n: ast.Attribute, st: State, fr: Frame) -> Val:
        return self.attribute_of(self.ev(n.value, st, fr), n, st)

    def attribute_of(self, base: Val, n: ast.Attribute, st: State) -> Val:
        """``n`` (``base.attr``) read, ``base`` being the value of ``n.value``."""
        v = self.getattr(base, n.attr, n, st)
        if isinstance(base, Obj) and not n.attr.startswith("__") and n.attr not in MODULE_API and (
                (v is UNKNOWN and base.kind == "local" and base.info is not None and (
                    self.module_like(base.info) or n.attr in self.param_attrs(base.info)))
                or (isinstance(v, (Method, UnknownT)) and base.kind in _CONTAINERS and not n.attr.startswith("_")
                    and n.attr not in _CONTAINER_API)):
            # a module's attribute that __init__ set to something we cannot see (`self.model, self.save =
            # parse_model(...)`), or one a container does not have (`self.model[-1].m`, where the last layer may
            # be a module a factory built): an object, the same one on every read, that the code may use as a module
            return self.opaque_child(base, n.attr)
        if n.attr == "indices" and isinstance(base, Seq):
            return self.kept_output(n.value, v, st)
        if isinstance(v, Method) and not n.attr.startswith("__"):
            # An attribute read, not a call: `model.reward_model` of an object we cannot see into is another such
            # object; `self.agent` set outside __init__ too; `dist.mean` of a call's tensor-like result is a tensor.
            recv = v.recv
            if isinstance(recv, Obj) and recv.kind == "opaque" and n.attr in ("weight", "bias") \
                    and recv.cfg.get("data") is None and (recv.cfg.get("unread_class") is None
                                                          or recv.cfg.get("trained") is not None):
                # `.weight` / `.bias` of a module we cannot see into (of an instance of a class we cannot read, once
                # the code trains it: `te.Linear(...)` may hold its weight as anything until then)
                return self.module_param(recv, n.attr)
            if isinstance(recv, Obj) and (recv.kind == "opaque" or (
                    recv.kind == "local" and n.attr not in MODULE_API and not n.attr.startswith("_"))):
                return self.opaque_child(recv, n.attr)
            if isinstance(recv, T) and recv.maybe_tensor and self.kb.get(f"Tensor.{n.attr}") is None:
                # an unknown value (a parameter) read like an object: `model.reward_model`, `batch.x`
                return self.opaque_child(self.opaque_for(recv), n.attr)
            if isinstance(recv, T) and not recv.maybe_tensor and n.attr in TENSOR_PROPERTIES:
                return self.new_tensor([recv], st, n.attr)  # `dist.mean`, `outputs.logits` of a call's result
            if isinstance(recv, T) and not recv.maybe_tensor and n.attr not in TENSOR_METHOD_VALUES \
                    and self.kb.get(f"Tensor.{n.attr}") is None:
                # `out.stores`: something of an object. (A tensor method taken as a value, `matrix.matmul` passed
                # as a closure, stays the method: calling it runs the op, not a module's forward.) What a value
                # computed with a module's parameters holds was computed with them: `critic(obs, act).q` used as a
                # tensor keeps the critic's graph (see NNModules.field_tensor). (A value with no graph, such as a
                # forward's `model` argument taken for a tensor, gives its fields nothing.)
                holder = self.opaque_for(recv)
                if recv.prov:
                    holder.cfg.setdefault("src", recv)
                return self.opaque_child(holder, n.attr)
        return v

    def class_of(self, o: Obj) -> Val:
        """``type(o)``, ``o.__class__``: a workspace class, a torch module class, or unknown."""
        if o.kind == "local" and o.info is not None:
            return ClassV(o.info)
        if o.kind in ("torch", "sequential", "modulelist", "moduledict") and o.qual:
            return Ref(o.qual)
        return UNKNOWN

    def getattr(self, base: Val, attr: str, n: ast.AST | None, st: State) -> Val:
        if isinstance(base, Choice):
            return choice([self.getattr(a, attr, n, st) for a in base.alts])
        if attr == "__name__" and self.is_callable_object(base):
            # a class's or function's name (`norm_layer.__name__.lower()` looked up in a table of layers)
            if isinstance(base, ClassV):
                return Const(base.info.name)
            if isinstance(base, Func):
                return Const(getattr(base.info.node, "name", "<lambda>"))
            if isinstance(base, Ref):
                return Const(self.canon(base.qual).rsplit(".", 1)[-1])
        if isinstance(base, Ref):
            return Ref(L.absent_name(f"{base.qual}.{attr}"))
        if isinstance(base, ModV):
            v = self.module_get(base.ctx, attr)
            return v if v is not None else UNKNOWN
        if isinstance(base, T):
            if attr == "data":
                return fresh("`.data`", rg=NO)
            if attr in ("T", "mT", "H", "mH", "real", "imag"):
                info = self.kb.get(f"Tensor.{attr}") or self.kb.get("Tensor.t")
                return T(base.storages, rg=base.rg, leaf=base.leaf,
                         view=base.view if base.view in SPECIAL_VIEWS else "view", view_op=attr, prov=base.prov,
                         noncontig=True) \
                    if info is not None or attr in ("T", "mT") else UNKNOWN
            if attr in ("grad",):
                got = [self.grads[s] for s in ordered(base.storages) if s in self.grads]
                if got:
                    g: Val = got[0]
                    for x in got[1:]:
                        g = join(g, x)
                    return g
                return self.grad_of(base)
            if attr == "requires_grad":
                return Cond(formula="rg") if base.rg >= MAYBE or base.maybe_tensor else Const(False)
            if attr == "grad_fn" and base.made and not st.silent and n is not None:
                # reading a view's grad_fn rebuilds it when its base changed since: for one of several views, or a
                # view made with grad off, torch raises there as at any op (in any grad mode)
                self.stale_views({"self": base}, n, st, "reading `.grad_fn`", None, None)
            if attr in ("shape", "dtype", "device", "ndim", "is_leaf", "grad_fn", "is_cuda"):
                return UNKNOWN_NUM
            return Method(base, attr, n)
        if isinstance(base, Obj):
            if attr == "__class__":
                return self.class_of(base)
            if base.kind == "optimizer" and attr == "param_groups":  # [{"params": [...], "lr": ...}]
                owners = base.cfg.get("owners")
                return Seq.param_groups(owners if isinstance(owners, Params) else UNKNOWN)
            if attr in base.attrs:
                return base.attrs[attr]
            if base.kind == "opaque":
                return Cond(formula="training") if attr == "training" else Method(base, attr, n)
            if base.kind == "dist" and not attr.startswith("_"):
                if attr in ("mean", "mode", "stddev", "variance", "probs", "logits", "scale", "loc", "entropy_"):
                    return self.dist_value(base, attr, [], st)
                return Method(base, attr, n)
            if base.kind == "torch":
                if (info := self.kb.get(base.qual)) is not None and attr in info.buffers:
                    # `crit.weight` of CrossEntropyLoss(weight=w): the very tensor given, or None
                    given = base.cfg.get(attr)
                    return given if isinstance(given, T) else Const(None)
                if attr in ("weight", "bias") or attr.startswith("weight_") or attr.startswith("bias_"):
                    return self.module_param(base, attr, st)
                if attr == "training":
                    return Const(base.training is not False) if base.training is not None else Cond(formula="training")
                return Method(base, attr, n)
            if base.kind == "local" and base.info is not None:
                if attr == "training":
                    return Const(base.training) if base.training is not None else Cond(formula="training")
                fi = base.info.find_method(attr)
                if fi is not None:
                    if isinstance(fi.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                            getattr(d, "id", getattr(d, "attr", None)) in _PROPERTIES for d in fi.node.decorator_list):
                        return self.call_func(fi, [base], {}, st, Frame(None, 1), n)
                    if fi.is_static:
                        return Func(fi)
                    if fi.is_classmethod:
                        return Bound(ClassV(base.info), fi)
                    return Bound(base, fi)
                ca = base.info.class_attr(attr)
                if ca is not None:
                    return ca
                if attr in ("weight", "bias") and self._layer_base(base.info) \
                        and not any(attr in _registered_names(c.node) for c in base.info.mro()):
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
        if isinstance(base, Seq) and base.kind == "tuple" and base.items is not None \
                and attr in ("values", "indices") and len(base.items) == 2:
            return base.items[0 if attr == "values" else 1]  # max(dim).values, topk(k).indices
        if isinstance(base, (Seq, Alt, Params)):
            return Method(base, attr, n)
        if isinstance(base, Const) and base.known and isinstance(base.value, str) and attr in STR_METHODS:
            return Method(base, attr, n)  # `name.lower()` picking an activation by name from a table
        return UNKNOWN

    def grad_of(self, base: T) -> T:
        """``x.grad`` that no assignment set: the gradient a backward accumulated, one tensor per tensor (zeroed in
        place by ``x.grad.zero_()``, read again by the next statement). After a backward with ``create_graph=True``
        it requires grad, and an op that uses it saves it (double backward)."""
        sto = min(base.storages, key=lambda s: s.sid) if base.storages and not base.maybe_tensor else None
        if sto is None:
            return fresh("`.grad`", rg=NO)
        g = self.grad_reads.get(sto)
        if g is None:
            g = self.grad_reads[sto] = fresh("`.grad`", rg=NO)
        if self.graph_grads and g.rg != YES:
            g = self.grad_reads[sto] = g.with_(rg=YES)
        return g

    def _layer_base(self, info: ClassInfo) -> bool:
        """Does the class derive from a layer that may own ``weight``/``bias`` (a torch layer such as nn.Linear, or
        a base the analysis cannot see)? ``nn.Module`` itself and the containers own none: an attribute its
        subclass did not set is not a parameter (a metric's ``add_state("weight", ...)`` buffer)."""
        for q in info.torch_bases():
            c = self.canon(q)
            if c not in _NO_WEIGHT_BASES:
                return True
        return False

    def is_callable_object(self, v: Val) -> bool:
        """A class or function (the code's own, or one of torch's the knowledge table has): never None, never a
        str/number/container, always true."""
        return isinstance(v, (ClassV, Func, Bound)) or (isinstance(v, Ref) and self.canon(v.qual) in self.kb)

    def module_param(self, obj: Obj, name: str, st: State | None = None, forward: bool = False) -> T:
        """``obj.<name>``, a parameter of the module (made on first read). A parametrized one is computed from its
        original: a new tensor, not a leaf, at each read (torch.nn.utils.parametrizations, register_parametrization),
        or at each forward, kept as the attribute until the next one (the older hook-based weight_norm and
        spectral_norm; ``forward``: the read is the module's forward). With grad on (``st``), the computation saves
        what a torch parametrization keeps (the original, or weight_norm's direction and magnitude)."""
        kind = obj.cfg.get(f"_parametrized.{name}")
        if isinstance(kind, Const) and isinstance(kind.value, str):
            hooked = obj.cfg.get(f"_parametrized_by_hook.{name}") is not None
            cur = obj.params.get(f"{name} (computed)")
            if hooked and not forward and isinstance(cur, T):
                return cur
            sources = [p for k in _PARAM_SOURCES.get(kind.value, ("",)) if isinstance(p := obj.params.get(
                f"{name}{k}" if k else name), T)]
            rg = max((p.rg for p in sources), default=YES)
            label = f"`{obj.qual.rsplit('.', 1)[-1]}.{name}`" if obj.qual else f"`{name}`"
            prov: frozenset[Any] = frozenset()
            if st is not None and not st.no_grad and kind.value == "prune" and len(sources) == 2 \
                    and sources[0].rg == YES:
                # weight_orig * weight_mask keeps the mask for the original's gradient
                self.save(sources[1], st, SaveRecord("prune", f"the pruning mask of {name}", self.stmt_site(),
                                                     "torch.nn.utils.prune"))
                prov = frozenset({self.graph_use(obj)})
            elif st is not None and not st.no_grad and kind.value in _SAVES_SOURCES:
                for p in sources:
                    if p.rg == YES:
                        self.save(p, st, SaveRecord(f"{kind.value}", f"the parametrized {name}'s source",
                                                    self.stmt_site(), f"torch.nn.utils.parametrizations.{kind.value}"))
                        prov = frozenset({self.graph_use(obj)})  # its graph keeps the module's parameters
            made = T(frozenset({Storage(f"{label}, computed by its parametrization ({kind.value})")}), rg=rg,
                     origin=f"{name} ({kind.value})", prov=prov)
            if hooked:
                self.set_param(obj, f"{name} (computed)", made)
            return made
        p = obj.params.get(name)
        if p is None:
            label = f"`{obj.qual.rsplit('.', 1)[-1]}.{name}`" if obj.qual else f"`{name}`"
            s = Storage(f"{label} is a parameter", obj.ctor, leaf=True, param_of=obj)
            frozen = obj.cfg.get("frozen")
            if isinstance(frozen, Const) and frozen.value is True:  # `nn.Conv2d(...).requires_grad_(False)`
                p = T(frozenset({s}), rg=NO, leaf=False, origin=name)
            else:
                p = T(frozenset({s}), rg=YES, leaf=True, origin=name)
            obj.params[name] = p
        return p

    # comprehensions ---------------------------------------------------------
    def _comp(self, n: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, st: State, fr: Frame,
              elt: ast.expr, key: ast.expr | None = None) -> Val:
        """A comprehension's value: one element per item when the iterable's items are known, else a sequence of
        unknown length whose element is the element expression evaluated once (a dict comprehension: its values;
        ``key`` is evaluated first, as Python does)."""
        kind = "dict" if key is not None else "list"
        inner = State(dict(st.env), st.heap, st.no_grad, st.autocast, st.allow_mutation, st.silent, st.inference,
                      st.packed)
        for k, g in enumerate(n.generators):
            it = self.ev(g.iter, inner, fr)
            items = known_items(it) if k == 0 and len(n.generators) == 1 else None
            if items is not None:
                # `nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))`: one element per item; a filter
                # (`[m for m in model.modules() if isinstance(m, nn.Linear)]`) keeps the items it is not known to
                # drop, and when it is not known for some, the length is not known either
                out: list[Val] = []
                ks: list[Val] = []
                sure = True
                for x in items:
                    self.assign(g.target, x, inner, fr, self.cur_stmt or ast.Pass())
                    keep = [known_truth(self.ev(cond, inner, fr)) for cond in g.ifs]
                    if False in keep:
                        continue
                    sure = sure and None not in keep
                    if key is not None:
                        ks.append(self.ev(key, inner, fr))
                    out.append(self.ev(elt, inner, fr))
                st.heap = inner.heap
                if not sure:
                    return Seq(None, _join_all(out) or UNKNOWN, kind, kelem=_join_all(ks))
                if key is not None:
                    names = [known_str(k) for k in ks]
                    if all(nm is not None for nm in names) and len(set(names)) == len(names):
                        return Seq.keyed({nm: v for nm, v in zip(names, out) if nm is not None})
                    return Seq(tuple(out), None, kind, kelem=_join_all(ks), okeys=tuple(ks))
                return Seq.of(out, kind)
            self.assign(g.target, self.elem(it, g.iter), inner, fr, self.cur_stmt or ast.Pass())
            for cond in g.ifs:
                self.ev(cond, inner, fr)
            if isinstance(it, Params) and key is None and len(n.generators) == 1 and isinstance(g.target, ast.Name) \
                    and isinstance(elt, ast.Name) and elt.id == g.target.id:
                # `[p for p in disc.parameters() if p.requires_grad]`: some of the same parameters, what an
                # optimizer built on them steps
                st.heap = inner.heap
                return it
        kv = self.ev(key, inner, fr) if key is not None else None
        v = self.ev(elt, inner, fr)
        st.heap = inner.heap
        return Seq(None, v, kind, kelem=kv)

    def e_ListComp(self, n: ast.ListComp, st: State, fr: Frame) -> Val:
        return self._comp(n, st, fr, n.elt)

    e_SetComp = e_ListComp

    e_GeneratorExp = e_ListComp

    def e_DictComp(self, n: ast.DictComp, st: State, fr: Frame) -> Val:
        return self._comp(n, st, fr, n.value, key=n.key)

    def e_Await(self, n: ast.Await, st: State, fr: Frame) -> Val:
        self.ev(n.value, st, fr)
        return UNKNOWN

    e_Yield = e_Await

    e_YieldFrom = e_Await

    # iteration ----------------------------------------------------------------
    def elem(self, v: Val, node: ast.AST | None) -> Val:
        if isinstance(v, T):
            if v.maybe_tuple:
                if v.origin == "element":
                    # an item of an item of what an unknown call returned (`x, (f, h, w) = dit.patchify(x)`): its
                    # structure is not known, and such a nested group is as often sizes or shapes as tensors
                    return fresh("element", rg=v.rg, maybe_tensor=True)
                return T(frozenset({Storage("element")}), rg=v.rg, prov=v.prov, maybe_tuple=True, origin="element")
            if v.maybe_tensor:
                return fresh("element", rg=v.rg, maybe_tensor=True)
            return T(v.storages, rg=v.rg, leaf=v.leaf, view="multi", view_op="iterating a tensor (unbind)",
                     prov=v.prov, origin="iteration of a new tensor" if v.origin in L.NEW_TENSOR_ORIGINS and v.view is None
                     else "iteration", view_site=self.site(node) if node is not None else None,
                     made=self.stamp if v.rg == YES else 0)  # (of a value surely requiring grad: see stale_view)
        if isinstance(v, (Seq, Alt)):
            return seq_elem(v)
        if isinstance(v, Obj) and v.kind in ("sequential", "modulelist", "moduledict"):
            got = seq_elem(v.entries)
            return self.opaque_child(v, "[]") if got is UNKNOWN else got
        if list_subclass(v) and (v.info is None or v.info.find_method("__iter__") is None):
            return seq_elem(v.entries)  # `for processor in self` in a subclass of list
        if isinstance(v, Obj) and v.kind == "opaque" and v.cfg.get("data") is None:
            return self.opaque_child(v, "[]")  # `for mi in m.m`: the modules of a container we cannot see into
        if isinstance(v, Params):
            return self.params_elem(v)
        return UNKNOWN

    def params_elem(self, p: Params) -> T:
        storages = set()
        frozen = bool(p.owners)
        for o in p.owners:
            owner = o.param_of if isinstance(o, Storage) else o
            f = owner.cfg.get("frozen") if isinstance(owner, Obj) else None
            frozen = frozen and isinstance(f, Const) and f.value is True
        for o in sorted(p.owners, key=owner_key):
            if isinstance(o, Storage):
                storages.add(o)
            elif isinstance(o, Obj):
                storages.add(Storage("a parameter from `.parameters()`", None, leaf=True, param_of=o))
        if not storages:
            storages.add(Storage("a parameter", None, leaf=True))
        if frozen:  # module.requires_grad_(False): plain tensors now
            return T(frozenset(storages), rg=NO, leaf=False, origin="parameter")
        return T(frozenset(storages), rg=YES, leaf=True, origin="parameter")


_PLAIN = (ast.Name, ast.Attribute, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
          ast.expr_context)


def _plain_operand(node: ast.expr) -> bool:
    """A name, attribute or constant, or arithmetic on them (``self.num_layers - 1``): read without effects."""
    got: bool | None = getattr(node, "_gg_plain", None)
    if got is None:
        got = all(isinstance(x, _PLAIN) for x in ast.walk(node))
        node._gg_plain = got  # type: ignore[attr-defined]  # cached on the tree, which it describes
    return got


def _surely_not_none(v: Val) -> bool:
    """A value that is an object here whatever the unknowns are: a module or instance the code built, a function,
    a class (not an unknown value used as an object, which may be None)."""
    if isinstance(v, Obj):
        return v.kind != "opaque" and not v.maybe_none
    if isinstance(v, (Func, ClassV, Bound, Params)):
        return True
    if isinstance(v, Choice):
        return all(isinstance(a, (Func, Bound)) or _surely_not_none(a) for a in v.alts)
    return False


def _const_compare(op: ast.cmpop, a: Const, b: Const) -> Val:
    """``a op b`` on two known constants, as Python answers it (unknown for other kinds of values)."""
    x, y = a.value, b.value
    if not all(v is None or isinstance(v, (bool, int, float, str)) for v in (x, y)):
        return UNKNOWN_NUM
    try:
        if isinstance(op, ast.Is):
            return Const(x is y if x is None or y is None else x == y)
        if isinstance(op, ast.IsNot):
            return Const(x is not y if x is None or y is None else x != y)
        if isinstance(op, ast.Eq):
            return Const(x == y)
        if isinstance(op, ast.NotEq):
            return Const(x != y)
        if isinstance(op, ast.Lt):
            return Const(x < y)  # type: ignore[operator]
        if isinstance(op, ast.LtE):
            return Const(x <= y)  # type: ignore[operator]
        if isinstance(op, ast.Gt):
            return Const(x > y)  # type: ignore[operator]
        if isinstance(op, ast.GtE):
            return Const(x >= y)  # type: ignore[operator]
    except TypeError:
        return UNKNOWN_NUM
    return UNKNOWN_NUM


_NO_BOUND = object()


def _bound(x: ast.expr | None) -> Any:
    """A slice bound written as a constant (``-1`` included), None when absent, else _NO_BOUND."""
    if x is None:
        return None
    if isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.USub) and isinstance(x.operand, ast.Constant) \
            and isinstance(x.operand.value, int):
        return -x.operand.value
    return x.value if isinstance(x, ast.Constant) else _NO_BOUND


def _const_slice(base: Seq, sl: ast.Slice) -> Seq | None:
    """``base[lo:hi:step]`` with constant bounds (``conv_projections[:-1]``) on a sequence of known items; None
    otherwise."""
    lo, hi, sp = _bound(sl.lower), _bound(sl.upper), _bound(sl.step)
    if base.items is None or _NO_BOUND in (lo, hi, sp):
        return None
    try:
        return Seq.of(base.items[lo:hi:sp], base.kind)  # type: ignore[misc,index]
    except (TypeError, ValueError):
        return None


# torch bases that own no weight or bias of their own
def _registered_names(node: ast.ClassDef) -> frozenset[str]:
    """Names the class registers through a call on ``self`` that takes the name as a string
    (``self.add_state("weight", ...)``, ``self.register_buffer("bias", ...)``, ``setattr(self, "weight", ...)``):
    such an attribute is whatever that call made, not a parameter a layer base owns (cached on the node)."""
    got: frozenset[str] | None = getattr(node, "_gg_registered", None)
    if got is None:
        names = set()
        for x in ast.walk(node):
            if not isinstance(x, ast.Call) or not x.args:
                continue
            f = x.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                first = x.args[0]
            elif isinstance(f, ast.Name) and f.id == "setattr" and len(x.args) >= 2 \
                    and isinstance(x.args[0], ast.Name) and x.args[0].id == "self":
                first = x.args[1]
            else:
                continue
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
        got = frozenset(names)
        node._gg_registered = got  # type: ignore[attr-defined]
    return got


_NO_WEIGHT_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.Sequential",
                              "torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.ParameterList",
                              "torch.nn.ParameterDict", "torch.nn.Identity"})


# the tensors a torch parametrization computes a parametrized weight from, by suffix of the weight's name ("": the
# weight itself, kept as the original), which the computation saves
_PARAM_SOURCES = {
    "spectral_norm": ("",), "orthogonal": ("",), "weight_norm": ("_g", "_v"), "prune": ("_orig", "_mask"),
}
# the parametrizations whose computation saves the original itself: weight_norm keeps its direction and magnitude,
# spectral_norm divides the weight by sigma. orthogonal does not: it maps a new tensor made from it (`X.tril()`,
# then matrix_exp, cayley or householder), so an in-place update of the original breaks no graph.
_SAVES_SOURCES = frozenset({"spectral_norm", "weight_norm"})


def _join_all(vals: list[Val]) -> Val | None:
    """The join of some values (None for none)."""
    out: Val | None = None
    for v in vals:
        out = v if out is None else join(out, v)
    return out
