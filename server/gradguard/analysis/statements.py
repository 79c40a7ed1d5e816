"""Statements: assignment, control flow (branches, loops run twice, try, with-contexts), definitions, imports."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from gradguard.analysis.common import (
    ALLOW_MUT_CTX,
    AUTOCAST_CTX,
    BINOPS,
    CONST_UNROLL_NEST,
    ENABLE_GRAD_CTX,
    INFERENCE_MODE,
    MAX_LOOP_PRODUCT,
    MAX_MODULES_SET,
    MAX_MODULES_UNROLL,
    MAX_UNROLL,
    NO_GRAD_CTX,
    OPSYM,
    PACKING_CTX,
    PRESERVE_VERSION_CTX,
    UNPACKING_CTX,
    Budget,
    Frame,
    Loop,
    carried_names,
    is_false,
    is_true,
    known_items,
    reads_attr,
)
from gradguard.analysis.core import AnalyzerCore
from gradguard.analysis.flags import FlagKey, cached_flag_test, correlated_flag
from gradguard.analysis.hazards import SaveRecord, Site
from gradguard.analysis.state import Heap, State, join_states
from gradguard.analysis.values import (
    MAYBE,
    NO,
    NONE,
    UNKNOWN,
    UNKNOWN_NUM,
    YES,
    Alt,
    Choice,
    ClassInfo,
    ClassV,
    Const,
    Func,
    FuncInfo,
    ModuleTree,
    Obj,
    Params,
    Ref,
    Seq,
    Storage,
    T,
    Val,
    Written,
    join,
    known_str,
    next_id,
    ordered,
    recording_allows,
    written_key,
)

_STMT: dict[type, Any] = {}  # node class -> handler (an ``s_*`` method)


def _skip(self: Statements, s: ast.stmt, st: State, fr: Frame) -> State:
    return st


def _widen_counters(before: State, after: State, carried: set[str]) -> State:
    """A number the loop changes (`step += 1`, `ep_len += 1`) is any number from the next pass on: the passes
    stand for iterations whose count is not known, and `step % 5 == 0` or `ep_len == max_ep_len` is true on
    some of them though false on the first three."""
    env = after.env
    changed = [k for k in carried if isinstance(a := env.get(k), Const) and a.known and _is_number(a.value)
               and isinstance(b := before.env.get(k), Const) and b.known and _is_number(b.value) and a.value != b.value]
    if not changed:
        return after
    out = after.copy()
    for k in changed:
        out.env[k] = UNKNOWN_NUM
    return out


def _aug_targets(stmt: ast.stmt) -> Iterable[ast.Attribute]:
    """``name.attr op= ...`` statements in ``stmt`` (nested defs and classes aside)."""
    todo: list[ast.AST] = [stmt]
    while todo:
        x = todo.pop()
        if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(x, ast.AugAssign) and isinstance(x.target, ast.Attribute) and isinstance(x.target.value, ast.Name):
            yield x.target
        todo.extend(c for c in ast.iter_child_nodes(x) if isinstance(c, (ast.stmt, ast.excepthandler)))


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class Statements(AnalyzerCore):
    # ------------------------------------------------------------------ statements
    def exec_block(self, stmts: Iterable[ast.stmt], st: State | None, fr: Frame, module: bool = False) -> State | None:
        # A block of the module's own code nested in an `if __name__ == "__main__":`, a `try` or a loop: what it
        # binds is global for the functions it calls (`optimizer = ...` then `train(model)`, whose body reads
        # `optimizer`), before the block ends and its state joins the module's
        nested = not module and fr.func is None and fr.depth == 0 and self.mod is self.root
        for s in stmts:
            if st is None:
                return None
            if nested:
                self.globals = st.env
            st = self.exec_stmt(s, st, fr)
            if module and st is not None:
                self.globals = st.env
        return st

    def exec_stmt(self, s: ast.stmt, st: State, fr: Frame) -> State | None:
        self.budget -= 1
        if self.budget <= 0:
            line = s.lineno if self.mod.is_root else (self.entry[1].line if self.entry else 1)
            if self.truncated is None or line < self.truncated:
                self.truncated = line
            raise Budget()
        if self.mod is not self.root:
            self.foreign_used += 1
        self.stamp += 1
        if self.reach_lines is not None and self.mod is self.root:
            self.reach_lines.add(s.lineno)
        prev = self.cur_stmt
        self.cur_stmt = s
        try:
            cls = s.__class__
            m = _STMT.get(cls)
            if m is None:
                m = _STMT[cls] = getattr(type(self), "s_" + cls.__name__, _skip)
            return m(self, s, st, fr)  # type: ignore[no-any-return]
        finally:
            self.cur_stmt = prev

    def s_Expr(self, s: ast.Expr, st: State, fr: Frame) -> State:
        if _dropped_call(s.value):
            self.discarded(s.value, st, fr)  # `model(dummy)`: a graph nobody can backward through
        else:
            self.ev(s.value, st, fr)
        return st

    def s_Pass(self, s: ast.stmt, st: State, fr: Frame) -> State:
        return st

    def s_Assign(self, s: ast.Assign, st: State, fr: Frame) -> State:
        if _dropped_call(s.value) and all(_throwaway(t) for t in s.targets):
            v = self.discarded(s.value, st, fr)  # `_ = model(wave, pad)`
        else:
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
            extra: tuple[tuple[str, Any], ...] = (("target_span", self.site(s.target)),
                                                  ("value_span", self.site(s.value)),
                                                  ("op", OPSYM.get(type(s.op), "+")))
            if isinstance(s.target, ast.Subscript) and isinstance(self.ev(s.target.value, st, fr), (Seq, Alt)):
                # `feats[i] += y` on an item of a Python list: Python puts the result back into the list, so
                # `feats[i] = feats[i] + y` writes nothing a graph holds (a clone of the list is no fix)
                extra = (*extra, ("list_item", True))
            if isinstance(s.target, ast.Subscript) and self.read_overlap(
                    self.ev(s.target.value, st, fr), s.target, [s.value], st, form="augassign", op=sym, target=tgt,
                    site=self.site(s)):
                return st  # `x[1:] += x[:-1]`: refused at the write
            if info is not None:
                out = self.apply(info, [cur, rhs], {}, s, st, fr, display=sym, form="augassign", target_text=tgt,
                                 extra=extra)
            else:
                self.mutate(cur, st, form="augassign", node=s, op=sym, target=tgt, extra=extra)
                out = cur
            if isinstance(s.target, ast.Name):
                st.env[s.target.id] = out if isinstance(out, T) else cur
            elif isinstance(s.target, ast.Attribute) and isinstance(out, T) and out is not cur:
                # `self.reg_loss += l2`: the same tensor, now requiring grad and holding the graph of what was added
                self.assign(s.target, out, st, fr, s)
            elif isinstance(s.target, ast.Subscript):
                base = self.ev(s.target.value, st, fr)
                if isinstance(base, T) and not base.maybe_tensor and not cur.storages & base.storages:
                    # `x[idx] += v` with advanced indexing: Python reads a copy, adds into it, and writes it back
                    # with `x[idx] = copy` (index_put_ on x)
                    self.assign(s.target, out if isinstance(out, T) else cur, st, fr, s)
            return st
        # Python values: x = x op v
        nv = self.binop(cur, rhs, s.op, s, st, fr)
        if isinstance(s.target, (ast.Name, ast.Attribute)):
            self.assign(s.target, nv, st, fr, s)
        return st

    def _outer_carry(self, had: Any, carry: tuple[Site, str, Site, object]) -> Any:
        """The carry a graph use keeps: the one it had, unless that was a loop that has ended (a state carried in a
        model's own loop over time steps, then carried again by the training loop across chunks: the training loop's
        is the one a backward meets)."""
        return had if had is not None and (had[3] == "attribute" or had[3] in self.active_loops) else carry

    def assign(self, t: ast.expr, v: Val, st: State, fr: Frame, stmt: ast.stmt) -> None:
        if isinstance(t, ast.Name):
            if isinstance(v, T) and fr.loops and t.id in fr.loops[-1].carried and v.prov \
                    and isinstance(stmt, ast.Assign):
                carry: tuple[Site, str, Site, object] = (self.site(stmt), t.id, self.site(stmt.value), fr.loops[-1].node)
                v = v.with_(prov=frozenset((o, s, self._outer_carry(c, carry)) for (o, s, c) in v.prov))
            elif isinstance(v, Obj) and v.kind == "local" and v.info is not None and fr.loops \
                    and t.id in fr.loops[-1].carried and isinstance(stmt, ast.Assign) \
                    and v.info.record_fields() is not None:
                # a record of tensors carried over (`state = LIFState(z, v, i)`, a namedtuple or dataclass): each
                # of its tensors carries the previous iteration's graph as a carried tensor does
                carry = (self.site(stmt), t.id, self.site(stmt.value), fr.loops[-1].node)
                self.record_carries[carry[0]] = "tuple" if v.info.tuple_record else "record"
                for fname, fval in list(v.attrs.items()):
                    if isinstance(fval, T) and fval.prov:
                        v.attrs[fname] = fval.with_(prov=frozenset((o, s_, self._outer_carry(c, carry))
                                                                   for (o, s_, c) in fval.prov))
            if isinstance(v, T) and isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) \
                    and fr.func is not None:
                v = v.with_(alias_of=stmt.value.id, alias_site=self.site(stmt.value))
                self.alias_stmt[self.site(stmt.value)] = self.site(stmt)
            st.env[t.id] = v
        elif isinstance(t, (ast.Tuple, ast.List)):
            elts = t.elts
            star = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), None)
            if isinstance(v, Seq) and v.items is not None and star is None and len(v.items) == len(elts):
                for e, item in zip(elts, v.items):
                    self.assign(e, item, st, fr, stmt)
                return
            if isinstance(v, Alt) and star is None and all(s.items is not None and len(s.items) == len(elts)
                                                          for s in v.alts):
                for i, e in enumerate(elts):
                    part: Val = UNKNOWN
                    for k, s in enumerate(v.alts):
                        assert s.items is not None
                        part = s.items[i] if k == 0 else join(part, s.items[i])
                    self.assign(e, part, st, fr, stmt)
                return
            for i, e in enumerate(elts):
                if isinstance(e, ast.Starred):
                    self.assign(e.value, Seq(None, self.elem(v, stmt), "list"), st, fr, stmt)
                elif isinstance(v, Seq) and v.items is not None and star is None and i < len(v.items):
                    self.assign(e, v.items[i], st, fr, stmt)
                elif isinstance(v, Seq) and v.items and star is None and _separate_tensors(v.items):
                    # more names than the outputs the analysis knows of (`a, b, c = torch.unsafe_split(h, 2)`: its
                    # number of outputs depends on the sizes): each further one is a tensor of its own too
                    last = v.items[-1]
                    assert isinstance(last, T)
                    self.assign(e, last.with_(storages=frozenset({Storage(f"{last.origin or 'output'} [{i}]")})),
                                st, fr, stmt)
                else:
                    part = self.elem(v, stmt)
                    if isinstance(v, T) and isinstance(part, T) and part.made:
                        # `c, z = f(x)` on a value taken for a tensor is far more often a tuple the analysis lost
                        # than a tensor unbound by unpacking: its pieces are not kept as views that can go stale
                        part = part.with_(made=0)
                    self.assign(e, part, st, fr, stmt)
        elif isinstance(t, ast.Attribute) and t.attr == "requires_grad":
            cur = self.ev(t.value, st, fr)
            if isinstance(cur, T) and isinstance(v, Const) and v.known:
                if not isinstance(t.value, ast.Attribute):  # `w.requires_grad = True`: w is now a leaf
                    self.set_requires_grad(cur, v, t.value, st, fr)
                else:
                    owner = self.ev(t.value.value, st, fr)
                    # `self.table.requires_grad = True`: the tensor the attribute holds becomes a leaf, as above
                    new = self.set_requires_grad(cur, v, None, st, fr) if v.value and not (
                        isinstance(owner, Obj) and t.value.attr in owner.params) else cur.with_(
                        rg=YES if v.value else NO)
                    if isinstance(owner, Obj):
                        self.touched(owner)
                        if t.value.attr in owner.params:
                            self.set_param(owner, t.value.attr, new)
                        else:
                            self.set_attr(owner, t.value.attr, new)
        elif isinstance(t, ast.Attribute):
            obj = self.ev(t.value, st, fr)
            if isinstance(obj, T) and t.attr == "grad" and isinstance(v, T) and not obj.maybe_tensor:
                for sto in obj.storages:  # `m.weight.grad = g`: module._apply(fn) later runs fn on it
                    self.grads[sto] = v
            if isinstance(obj, Obj):
                if t.attr in ("data", "grad"):
                    return
                if isinstance(v, T) and v.prov and isinstance(stmt, ast.Assign) and reads_attr(stmt.value, t):
                    # state kept on the module and fed back into the next call (self.h = cell(x, self.h))
                    acarry: tuple[Site, str, Site, object] = (self.site(stmt), self.text(t), self.site(stmt.value),
                                                              "attribute")
                    v = v.with_(prov=frozenset((o, s_, c or acarry) for (o, s_, c) in v.prov))
                if t.attr == "inplace" and obj.kind == "torch" and is_true(v) and not obj.inplace:
                    # `m.inplace = True` on a torch layer made without the flag: its calls from here on are in
                    # place (the attribute is what forward reads); this assignment is where the flag comes from
                    obj.kw_site, obj.positional = self.site(stmt.value if isinstance(stmt, ast.Assign) else t), False
                self.set_attr(obj, t.attr, v)
        elif isinstance(t, ast.Subscript):
            base = self.ev(t.value, st, fr)
            key = self.ev_nograd(t.slice, st, fr)
            if isinstance(base, Seq) and (ents := base.entries()) is not None:
                # `kwargs["inplace"] = True`: the entry of a dict whose keys we know; another key, no more keys
                name = known_str(key)
                self._rebind(t.value, Seq.keyed({**ents, name: v}) if name is not None
                             else Seq((*ents.values(), v), None, "dict"), st, fr)
                return
            if isinstance(base, Seq) and base.wkeys is not None and base.items is not None \
                    and (name := known_str(key)) is not None:
                # `group["lr"] = lr` into a dict whose keys are known but not exactly: that key holds the value now
                wk, items = list(base.wkeys), list(base.items)
                if name in wk:
                    items[wk.index(name)] = v
                else:
                    wk.append(name)
                    items.append(v)
                self._rebind(t.value, Seq(tuple(items), None, "dict", wkeys=tuple(wk)), st, fr)
                return
            if (isinstance(key, Const) and isinstance(key.value, str)) or isinstance(t.slice, ast.JoinedStr) or (
                    isinstance(v, Const) and isinstance(v.value, str)) or _str_in_tuple(t.slice):
                # `d["name"] = ...`, `d[key] = "text"`, `td[key, "prompt"] = ...` (a nested key): a dict or list item,
                # not a tensor write (no tensor index holds a string)
                return
            if isinstance(base, T) and not base.maybe_tensor:
                info = self.kb.get("operator.setitem")
                tgt = self.text(t.value)
                extra: tuple[tuple[str, Any], ...] = (("target_span", self.site(t)), ("base_span", self.site(t.value)))
                if base.expanded is not None:
                    # into an expanded tensor: `x[...] = v` writes every element, several of them one memory
                    # location, and torch refuses it; `x[idx] = v` with an index tensor or a mask (index_put_) is
                    # allowed, but not when x requires grad: its backward refuses it. (One row, `x[0] = v`, may
                    # hold no repeated element: which dimension was expanded is not known.)
                    how = "whole" if _whole_index(t.slice) else (
                        "advanced" if base.rg == YES and not st.no_grad and _advanced_index(t.slice, key) else None)
                    if how is not None:
                        extra = (*extra, ("overlap_index", how))
                op = "item assignment" if not isinstance(stmt, ast.AugAssign) else \
                    f"`{OPSYM.get(type(stmt.op), '+')}=` item assignment"
                value_node = getattr(stmt, "value", None)
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(value_node, ast.expr) \
                        and self.read_overlap(base, t, [value_node], st, form="setitem", op=op, target=tgt,
                                              site=self.site(t)):
                    return  # `buf[:-1] = buf[1:]`: refused at the write
                self.mutate(base, st, form="setitem", node=t, op=op, target=tgt, extra=extra,
                            operands_yes=isinstance(v, T) and v.rg == YES and not v.maybe_tensor)
                if info is not None and not st.no_grad:
                    rg = {"self": base.rg >= MAYBE, "value": isinstance(v, T) and v.rg >= MAYBE}
                    for a in info.saved_args(rg):
                        if a == "value" and isinstance(v, T):
                            self.save(v, st, SaveRecord("item assignment", "the assigned value", self.site(stmt),
                                                        info.name))
                if isinstance(v, T) and not v.maybe_tensor and v.rg >= MAYBE and not st.no_grad and not base.leaf \
                        and base.origin not in INTEGER_ORIGINS and (v.rg > base.rg or not v.prov <= base.prov):
                    # `loss[:, idx] = cur_loss`: the tensor written into now requires grad and carries the value's
                    # graph (a CopySlices node over it), as a name for it is read from here on
                    prov = v.prov
                    if isinstance(t.value, ast.Attribute) and prov:
                        # a tensor kept on an object (a memory buffer, `self.memory[n_id] = gru(...)`): it outlives
                        # the iteration, and the next one builds on the graph written into it, as `self.h = ...`
                        vnode = stmt.value if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) \
                            and stmt.value is not None else t
                        wcarry: tuple[Site, str, Site, object] = (self.site(stmt), self.text(t.value),
                                                                  self.site(vnode), "attribute")
                        prov = frozenset((o, s_, c or wcarry) for (o, s_, c) in prov)
                    self._rebind(t.value, base.with_(rg=max(base.rg, v.rg), prov=base.prov | prov), st, fr)
            elif isinstance(base, Obj) and base.kind == "local" and base.info is not None \
                    and (setitem := base.info.find_method("__setitem__")) is not None:
                # `self[good] = data[good]` on an instance whose class defines __setitem__ (a variable wrapping a
                # tensor, `self.tensor[item] = value`): Python calls it
                self.call_func(setitem, [base, key, v], {}, st, fr, _dunder_call(t, "__setitem__", stmt))
            elif isinstance(base, (Seq, Alt)) and isinstance(t.value, (ast.Name, ast.Attribute)) and (
                    replaced := _with_item(base, key, v)) is not None:
                # `rep[0] = nn.ReLU(inplace=False)`: that item is now the new one; `self.topology[j] = parent` too
                self._rebind(t.value, replaced, st, fr)
            elif isinstance(base, Seq) and isinstance(t.value, (ast.Name, ast.Attribute)):
                if isinstance(v, T) and (at := self.item_place(t.slice, fr)) is not None:
                    for sto in v.storages:  # (an item of an index loop: see Expressions.item_instance)
                        at[0].placed.setdefault(sto, set()).add(at[1])
                grown = join(base, Seq(None, v, base.kind)) if base.items is None else \
                    Seq(base.items, join(base.elem, v), base.kind)
                self._rebind(t.value, grown, st, fr)
                if isinstance(t.value, ast.Name) and isinstance(t.slice, ast.Name) and key is not UNKNOWN \
                        and key is not UNKNOWN_NUM and key is not NONE:
                    st.env[written_key(t.value.id, t.slice.id)] = Written(v, grown, key)
        elif isinstance(t, ast.Starred):
            self.assign(t.value, v, st, fr, stmt)

    def s_Delete(self, s: ast.Delete, st: State, fr: Frame) -> State:
        for t in s.targets:
            if isinstance(t, ast.Name):
                st.env.pop(t.id, None)
            elif isinstance(t, ast.Subscript) and isinstance(t.value, (ast.Name, ast.Attribute)):
                d = self.ev(t.value, st, fr)
                if isinstance(d, Seq) and (ents := d.entries()) is not None:  # `del kwargs["pretrained"]`
                    name = known_str(self.ev_nograd(t.slice, st, fr))
                    self._rebind(t.value, Seq.keyed({k: v for k, v in ents.items() if k != name})
                                 if name is not None else d.unkeyed(), st, fr)
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

    def s_FunctionDef(self, s: ast.FunctionDef | ast.AsyncFunctionDef, st: State, fr: Frame) -> State:
        # (a def nested two deep sees its grandparent's names too: `inner` of a decorator factory calls `torch_fn`)
        closure = None if fr.func is None else {**fr.func.closure, **st.env} if fr.func.closure else dict(st.env)
        fi = FuncInfo(s, s.name, cls=None, closure=closure, mod=self.mod)
        self.made_funcs.append(fi)
        for d in s.decorator_list:
            q = self.qual_of(d.func if isinstance(d, ast.Call) else d, st, fr)
            if q in NO_GRAD_CTX:
                fi.no_grad = True
                fi.inference = q == INFERENCE_MODE and self._mode_enabled(d)
            elif q in ENABLE_GRAD_CTX:
                fi.enable_grad = True  # `@torch.enable_grad()`: grad on inside, whatever the caller's mode
            elif self._no_grad_decorator(d, st, fr):
                fi.no_grad = True
        st.env[s.name] = self._decorated(s, Func(fi), st, fr)
        if fr.func is None and fr.depth == 0 and self.mod.is_root:
            self.functions.append(fi)
        elif fr.func is not None and self.mod.is_root and not st.silent and s not in self.nested_seen:
            self.nested_seen.add(s)
            self.nested_defs.append(fi)
        return st

    def _decorated(self, s: ast.FunctionDef | ast.AsyncFunctionDef, fn: Func, st: State, fr: Frame) -> Val:
        """What the name is bound to: the function, passed through each decorator of the code's own (innermost
        first). A decorator that returns a wrapper (``@backend_dispatch(torch_fn, numpy_fn)``, whose ``inner``
        calls ``torch_fn``) makes calls of the name calls of the wrapper. A library decorator, or one whose result
        is not a function the analysis can follow, leaves the function itself (what most of them return)."""
        val: Val = fn
        for d in reversed(s.decorator_list):
            if not isinstance(d, (ast.Name, ast.Attribute, ast.Call)):
                break
            callee = d.func if isinstance(d, ast.Call) else d
            fv = self.lookup(callee.id, st, fr) if isinstance(callee, ast.Name) else self.ev_nograd(callee, st, fr)
            if not isinstance(fv, Func) or not _builds_function(fv.info.node):
                # (a library's decorator, a class, a no_grad context: evaluated nowhere; one that defines no function
                # returns the one it was given, `@register_model` adding it to a table)
                break
            # (run even while another module's names are evaluated, where calls are otherwise not followed; it
            # builds a wrapper at definition time, and reports nothing)
            quiet, self.quiet = self.quiet, 0
            try:
                at_def = State(dict(st.env), Heap(), no_grad=True, silent=True)
                dec = self.ev(d, at_def, fr) if isinstance(d, ast.Call) else fv
                got = self.call_func(dec.info, [val], {}, at_def, fr, d) if isinstance(dec, Func) else None
            finally:
                self.quiet = quiet
            if not isinstance(got, Func):
                break
            val = got
        return val

    s_AsyncFunctionDef = s_FunctionDef

    def _no_grad_decorator(self, d: ast.expr, st: State, fr: Frame) -> bool:
        """A decorator of the code's own (or a library's) that runs the function under no_grad or inference_mode:
        ultralytics' ``@smart_inference_mode()``, a ``@no_grad_if_eval`` wrapper. Its body builds a wrapper (or
        returns a wrapping call) and names ``no_grad`` or ``inference_mode``."""
        target = d.func if isinstance(d, ast.Call) else d
        if not isinstance(target, (ast.Name, ast.Attribute)):
            return False
        v = self.ev_nograd(target, st, fr)
        return isinstance(v, Func) and isinstance(v.info.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
            _applies_no_grad(v.info.node)

    def s_ClassDef(self, s: ast.ClassDef, st: State, fr: Frame) -> State:
        ci = ClassInfo(s, s.name, bases=[self.ev(b, st, fr) for b in s.bases], mod=self.mod)
        self.made_classes.append(ci)
        root = self.mod.is_root
        for b in s.body:
            if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fi = FuncInfo(b, f"{s.name}.{b.name}", cls=ci, mod=self.mod)
                for d in b.decorator_list:
                    dn = d.id if isinstance(d, ast.Name) else (d.attr if isinstance(d, ast.Attribute) else "")
                    if dn == "staticmethod":
                        fi.is_static = True
                    elif dn == "classmethod":
                        fi.is_classmethod = True
                    q = self.qual_of(d.func if isinstance(d, ast.Call) else d, st, fr)
                    if q in NO_GRAD_CTX:
                        fi.no_grad = True
                        fi.inference = q == INFERENCE_MODE and self._mode_enabled(d)
                    elif q in ENABLE_GRAD_CTX:
                        fi.enable_grad = True
                    elif self._no_grad_decorator(d, st, fr):
                        fi.no_grad = True
                ci.methods[b.name] = fi
                if fr.depth == 0 and fr.func is None and root:
                    self.functions.append(fi)
            elif isinstance(b, ast.Assign):
                for t in b.targets:
                    if isinstance(t, ast.Name):
                        ci.attrs[t.id] = self.const_of(b.value) if isinstance(b.value, ast.Constant) else UNKNOWN
            elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name) and b.value is not None:
                # `method: str = "super"`: a class attribute, and a dataclass's or NamedTuple's field default
                ci.attrs[b.target.id] = self.const_of(b.value) if isinstance(b.value, ast.Constant) else UNKNOWN
        if _is_record(s, ci):
            ci.tuple_record = any(isinstance(b, Ref) and b.qual.rsplit(".", 1)[-1] == "NamedTuple" for b in ci.bases)
            fields: list[tuple[str, Val | None]] = []
            for b in s.body:
                if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name) and "ClassVar" not in ast.dump(
                        b.annotation):
                    fields.append((b.target.id, None if b.value is None else _field_default(self, b.value, st, fr)))
            ci.fields = fields
        st.env[s.name] = ClassV(ci)
        if root:
            self.classes.append(ci)
        return st

    def exec_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef, st: State, fr: Frame) -> State | None:
        """A function's body; once per value of a flag it tests twice (see :mod:`.flags`)."""
        split = correlated_flag(node)
        if split is None or split._gg_split in fr.assumed:  # type: ignore[attr-defined]
            return self.exec_block(node.body, st, fr)
        return self.s_If(split, st, fr)

    def s_If(self, s: ast.If, st: State, fr: Frame) -> State | None:
        flag = cached_flag_test(s)
        if flag is not None and flag[0] in fr.assumed:
            # the flag this path assumed (the function's body runs once per value of it)
            return self.exec_block(s.body if fr.assumed[flag[0]] == flag[1] else s.orelse, st, fr)
        test = self.ev(s.test, st, fr)
        if is_true(test) and _eval_only(s.test) and not st.silent and not fr.grad_in:
            # `if not self.training and self.prefilter:` on a module known to be in eval mode: an inference branch,
            # silent as it is when the mode is not known (see recording_allows). Not when the model was handed an
            # input that requires grad: an attack or an explanation differentiates the eval-mode forward.
            was_no_grad = st.no_grad
            st.no_grad = st.silent = True
            out = self.exec_block(s.body, st, fr)
            if out is not None:
                out.no_grad, out.silent = was_no_grad, False
            return out
        if is_true(test) or self.is_callable_object(test):  # `if act_layer:` on a class: true
            return self.exec_block(s.body, st, fr)
        if is_false(test) or (isinstance(test, Const) and test.known and test.value is None):
            return self.exec_block(s.orelse, st, fr)
        split: FlagKey | None = getattr(s, "_gg_split", None)
        no_grad, silent = st.no_grad, st.silent
        body_st = st.branch()
        none_test = _none_test(s.test)
        if none_test is not None and isinstance(st.env.get(none_test[0]), (Obj, Choice)):
            # `if state is not None:` on an object that may be None (`state = None` before a loop that makes it):
            # the arm where the test says None has None, not the object (a record of tensors kept from an
            # earlier iteration would otherwise join the one the other arm made)
            name, is_none = none_test
            (body_st if is_none else st).env[name] = NONE
        if not recording_allows(test, True) or _eval_only(s.test):
            # `if not x.requires_grad:`: this branch only runs without autograd, and nothing there breaks it (nor
            # does `if not self.training and self.prefilter:` with the prefilter flag not known)
            body_st.no_grad = body_st.silent = True
        self.attr_logs.append((next_id(), []))
        if split is not None:
            fr.assumed[split] = True
        jumps = (len(fr.loops[-1].continues) + len(fr.loops[-1].breaks)) if fr.loops else 0
        try:
            a = self.exec_block(s.body, body_st, fr)
        finally:
            log_a = self.attr_logs.pop()[1]
            if split is not None:
                fr.assumed[split] = False
        # (an arm that ends in `continue` or `break` goes on in the loop: what it did to objects stays, as
        # `if i == 0: levels.append(stem); continue` appends the stem for the iterations after it)
        jumped = a is None and fr.loops and len(fr.loops[-1].continues) + len(fr.loops[-1].breaks) > jumps
        if not recording_allows(test, False):
            st.no_grad = st.silent = True
        after_a = [(o, table, name, _logged(o, table, name)) for o, table, name, _old in log_a]
        for o, table, name, old in reversed(log_a):  # the else branch starts from the objects as they were
            _restore(o, table, name, old)
        try:
            b = self.exec_block(s.orelse, st, fr) if s.orelse else st
        finally:
            if split is not None:
                del fr.assumed[split]
        seen: set[tuple[int, str, str]] = set()
        for o, table, name, va in after_a:
            if (id(o), table, name) in seen:
                continue
            seen.add((id(o), table, name))
            vb = _logged(o, table, name)
            if a is None and not jumped:
                continue  # the if branch returned or raised: the else branch's value stands
            if b is None:
                merged = va
            else:
                merged = va if vb is None else vb if va is None else join(va, vb)
            if merged is None:
                _restore(o, table, name, None)
            elif table == "params" and isinstance(merged, T):
                self.set_param(o, name, merged)
            elif table == "entries":
                self.set_entries(o, merged)
            else:
                self.set_attr(o, name, merged)
        out = join_states(a, b, own=True)
        if a is not None and b is not None and out is not None:
            out.no_grad, out.silent = no_grad, silent  # both arms go on: as it was before the if
        return out

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While, st: State, fr: Frame, bind: Any,
              index: tuple[str, int] | None = None) -> State | None:
        carried: set[str] | None = getattr(node, "_gg_carried", None)
        if carried is None:
            carried = carried_names(node.body)
            node._gg_carried = carried  # type: ignore[union-attr]  # cached on the tree it describes
        loop = Loop(carried, node, index)
        # Each pass starts from the previous pass's state (a tensor saved in one iteration and written in the
        # next; a graph carried over an optimizer step). Three passes cover what the third iteration sees that
        # the second does not (state that first requires grad in iteration 2, saves parameters then, and is
        # stepped on before iteration 3's backward); loops nested in loops get fewer passes, so that the
        # product over any nest stays at most MAX_LOOP_PRODUCT and the cost linear in the code.
        product = self.loop_product
        passes = 3 if product == 1 else (2 if product * 2 <= MAX_LOOP_PRODUCT or _trains(node) else 1)
        self.loop_product = product * passes
        fr.loops.append(loop)
        self.active_loops.append(node)
        try:
            entry = st.branch()
            cur: State | None = entry
            exits: State | None = st
            for p in range(passes):
                if cur is None:
                    break
                loop.pass_no = p
                counters = self._attr_counters(node, cur)
                body_in = cur.branch()
                bind(body_in)
                out = self.exec_block(node.body, body_in, fr)
                for c in loop.continues:
                    out = join_states(out, c)
                loop.continues.clear()
                exits = join_states(exits, out)
                if out is not None and cur is not None:
                    out = _widen_counters(cur, out, carried)
                    self._widen_attr_counters(counters, out)
                cur = out  # the next iteration sees this one's state
        finally:
            fr.loops.pop()
            self.active_loops.pop()
            self.loop_product = product
        for b in loop.breaks:
            exits = join_states(exits, b)
        if node.orelse and exits is not None:
            exits = self.exec_block(node.orelse, exits, fr)
        return exits

    def _attr_counters(self, node: ast.For | ast.AsyncFor | ast.While, st: State) -> list[tuple[Obj, str, Val]]:
        """The objects' numbers the loop counts up (`self.steps += 1`) with their values before a pass."""
        targets: list[tuple[str, str]] | None = getattr(node, "_gg_attr_counters", None)
        if targets is None:
            targets = sorted({(t.value.id, t.attr) for x in node.body for t in _aug_targets(x)
                              if isinstance(t.value, ast.Name)})
            node._gg_attr_counters = targets  # type: ignore[union-attr]  # cached on the tree it describes
        out: list[tuple[Obj, str, Val]] = []
        for name, attr in targets:
            o = st.env.get(name)
            if isinstance(o, Obj) and isinstance(v := o.attrs.get(attr), Const) and v.known and _is_number(v.value):
                out.append((o, attr, v))
        return out

    def _widen_attr_counters(self, counters: list[tuple[Obj, str, Val]], st: State) -> None:
        """As :func:`_widen_counters`, for a number kept on an object (`if self.steps > self.train_after:` in the
        same loop, or in a method it calls, is true in some iteration)."""
        for o, attr, before in counters:
            v = o.attrs.get(attr)
            if isinstance(v, Const) and v.known and _is_number(v.value) and v != before:
                self.set_attr(o, attr, UNKNOWN_NUM)

    def s_For(self, s: ast.For | ast.AsyncFor, st: State, fr: Frame) -> State | None:
        it = self.ev(s.iter, st, fr)
        items = known_items(it)
        if isinstance(it, Seq) and it.kind == "modules":
            limit = MAX_MODULES_UNROLL
        elif items is not None and all(isinstance(x, Const) and x.known for x in items):
            # names and numbers (`for layer in self.order: if layer == "conv": ...`): their order is what the loop
            # means, and a single pass over "any of them" would run the arms in an order no run takes
            limit = CONST_UNROLL_NEST
        else:
            limit = 3 * MAX_UNROLL
        if items is not None and self.loop_product * max(len(items), 1) <= limit and not _jumps(s):
            return self._unrolled(s, items, st, fr)
        if isinstance(it, ModuleTree) and _sets_module_attrs(s) and not _jumps(s):
            # `for m in self.modules(): if isinstance(m, nn.ReLU): m.inplace = True` over a large model: each
            # module's pass is a type test and an assignment, and every module matched must change
            every = self.module_list(it.root, it.recurse, it.named, MAX_MODULES_SET // self.loop_product)
            if every is not None:
                return self._unrolled(s, tuple(every), st, fr)
        el = self.elem(it, s.iter)
        per_pass = isinstance(it, (Seq, Alt, Params)) or (isinstance(it, T) and it.maybe_tuple)

        def bind(state: State) -> None:
            # Iterating a list gives a different element each time: what one pass saved of its element is not
            # the next pass's element (iterating a tensor gives views of one storage, which is).
            self.assign(s.target, self.fresh_element(el, state) if per_pass else el, state, fr, s)

        return self._loop(s, st, fr, bind, _loop_index(s))

    def _unrolled(self, node: ast.For | ast.AsyncFor, items: tuple[Val, ...], st: State, fr: Frame) -> State | None:
        """A loop over a sequence of known length: once per element, in order, each element bound as it is (the
        index of ``enumerate`` a constant), so the last iteration is the last one and an empty sequence runs the
        body zero times (MAX_UNROLL)."""
        carried: set[str] | None = getattr(node, "_gg_carried", None)
        if carried is None:
            carried = carried_names(node.body)
            node._gg_carried = carried  # type: ignore[union-attr]
        loop = Loop(carried, node)
        product = self.loop_product
        self.loop_product = product * max(len(items), 1)
        fr.loops.append(loop)
        self.active_loops.append(node)
        cur: State | None = st
        try:
            for x in items:
                if cur is None:
                    break
                body_in = cur.branch()
                self.assign(node.target, x, body_in, fr, node)
                cur = self.exec_block(node.body, body_in, fr)
        finally:
            fr.loops.pop()
            self.active_loops.pop()
            self.loop_product = product
        if node.orelse and cur is not None:
            cur = self.exec_block(node.orelse, cur, fr)
        return cur

    def fresh_element(self, v: Val, st: State, depth: int = 0) -> Val:
        """``v`` as the element of one iteration: tensors get their own storages, which keep what was saved of
        the list's elements before the loop (a write to one of them still trips an earlier save)."""
        if isinstance(v, T):
            if v.origin.startswith("iteration") and v.view == "multi" and v.made:
                # a row of a tensor surely requiring grad (`enumerate(x)`, `zip(x, y)`): every pass views the same
                # storage (a forward's argument iterated may as well be a list of tensors, each its own)
                return v
            saved = st.heap.saved
            copies = []
            for s0 in ordered(v.storages):
                c = Storage(s0.desc, s0.site, s0.leaf, s0.param_of)
                if s0 in saved:
                    saved[c] = saved[s0]
                copies.append(c)
            return v.with_(storages=frozenset(copies))
        if isinstance(v, Seq) and v.items is not None and depth < 2:
            return v.remap(tuple(self.fresh_element(x, st, depth + 1) for x in v.items))
        return v

    s_AsyncFor = s_For

    def s_While(self, s: ast.While, st: State, fr: Frame) -> State | None:
        self.ev(s.test, st, fr)
        return self._loop(s, st, fr, lambda state: self.ev(s.test, state, fr))

    def s_With(self, s: ast.With | ast.AsyncWith, st: State, fr: Frame) -> State | None:
        saved_flags = (st.no_grad, st.autocast, st.allow_mutation, st.inference, st.packed)
        opened = -1
        kept: tuple[T, ...] = ()
        for item in s.items:
            q = self.qual_of(item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr,
                             st, fr)
            if q == INFERENCE_MODE and not self._mode_enabled(item.context_expr):
                continue  # inference_mode(False): grad mode as it was
            if q in NO_GRAD_CTX:
                st.no_grad = True
                if q == INFERENCE_MODE and not st.inference:
                    st.inference = True
                    opened = next_id()
            elif q in ENABLE_GRAD_CTX:
                st.no_grad = False
            elif q == "torch.set_grad_enabled" and isinstance(item.context_expr, ast.Call) and item.context_expr.args:
                flag = self.ev(item.context_expr.args[0], st, fr)
                if is_false(flag):
                    st.no_grad = True
                elif is_true(flag):
                    st.no_grad = False
            elif q in AUTOCAST_CTX:
                enabled = next((k.value for k in item.context_expr.keywords if k.arg == "enabled"), None) \
                    if isinstance(item.context_expr, ast.Call) else None
                if enabled is None or not (isinstance(enabled, ast.Constant) and enabled.value is False):
                    st.autocast = True
            elif q in ALLOW_MUT_CTX:
                st.allow_mutation = True
            elif q in PRESERVE_VERSION_CTX and isinstance(item.context_expr, ast.Call) and item.context_expr.args:
                kept_v = self.ev(item.context_expr.args[0], st, fr)
                if isinstance(kept_v, T) and kept_v.storages:
                    kept = (*kept, kept_v)
            elif q == "torch.autograd.graph.saved_tensors_hooks" and isinstance(item.context_expr, ast.Call) \
                    and item.context_expr.args:
                self.pack_hook(self.ev(item.context_expr.args[0], st, fr), item.context_expr, st, fr)
                st.packed = True
            elif q in PACKING_CTX:
                st.packed = True  # save_on_cpu(): each saved tensor is packed as a copy
            elif q in UNPACKING_CTX:
                st.packed = False  # disable_saved_tensors_hooks(): saves as usual (a hook set here raises)
            else:
                v = self.ev(item.context_expr, st, fr)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, UNKNOWN if not isinstance(v, T) else v, st, fr, s)
                mode = self._generator_grad_mode(item.context_expr, st, fr)
                if mode is not None:
                    st.no_grad = mode  # `with eval_mode(net):` of a @contextmanager that yields under no_grad
        if kept:
            # the block's writes to these tensors leave what ops saved of them as it was
            storages = frozenset().union(*(t.storages for t in kept))
            before = {x: st.heap.saved[x] for x in storages if x in st.heap.saved}
            outer, self.version_kept = self.version_kept, self.version_kept | storages
            try:
                out = self.exec_block(s.body, st, fr)
            finally:
                self.version_kept = outer
            if out is not None:
                out.heap.saved.update(before)
        else:
            out = self.exec_block(s.body, st, fr)
        if opened >= 0:  # tensors made from here to the end of the block are inference tensors
            self.inference_spans.append((opened, next_id()))
        if out is not None:
            out.no_grad, out.autocast, out.allow_mutation, out.inference, out.packed = saved_flags
        # paths that returned inside keep their flags only for their own returns
        return out

    s_AsyncWith = s_With

    def _generator_grad_mode(self, node: ast.expr, st: State, fr: Frame) -> bool | None:
        """The grad mode inside ``with cm(...):`` for a ``@contextmanager`` generator of the code's own (or a
        library's) that yields only inside ``with torch.no_grad()`` / ``inference_mode()`` (True: grad off; monai's
        ``eval_mode``) or only inside ``with torch.enable_grad()`` (False: grad on). None for any other."""
        if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
            return None
        fv = self.lookup(node.func.id, st, fr) if isinstance(node.func, ast.Name) else self.ev_nograd(node.func, st, fr)
        if not isinstance(fv, Func) or not isinstance(fv.info.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        return _yields_in_grad_mode(fv.info.node)

    @staticmethod
    def _mode_enabled(node: ast.expr) -> bool:
        """False for ``inference_mode(False)`` / ``inference_mode(mode=False)``."""
        if not isinstance(node, ast.Call):
            return True
        flag = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "mode"), None)
        return not (isinstance(flag, ast.Constant) and flag.value is False)

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

    def rebind_expr(self, target: ast.expr, v: Val, st: State, fr: Frame) -> None:
        """Give the expression ``target`` (a name, an attribute, an element of a list) the value ``v``: a method that
        changes its receiver's flags in place (``y.requires_grad_()``, ``inputs[0].requires_grad_()``)."""
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, int):
            seq = st.env.get(target.value.id)
            if isinstance(seq, Seq) and seq.items is not None and -len(seq.items) <= target.slice.value < len(seq.items):
                items = list(seq.items)
                items[target.slice.value] = v
                st.env[target.value.id] = Seq.of(items, seq.kind)
            return
        self._rebind(target, v, st, fr)

    def _rebind(self, target: ast.expr, v: Val, st: State, fr: Frame) -> None:
        if isinstance(target, ast.Name):
            st.env[target.id] = v
        elif isinstance(target, ast.Attribute):
            obj = self.ev(target.value, st, fr)
            if isinstance(obj, Obj):
                self.set_attr(obj, target.attr, v)


# ops whose output is an integer or boolean tensor: a value written into it is cast, and it never requires grad
INTEGER_ORIGINS = frozenset({"long", "int", "short", "byte", "char", "bool", "argmax", "argmin", "argsort", "nonzero",
                             "randint", "randperm", "searchsorted", "bucketize", "isnan", "isinf", "isfinite",
                             "logical_and", "logical_or", "logical_not", "logical_xor"})


def _trains(node: ast.For | ast.AsyncFor | ast.While) -> bool:
    """Does the loop's own body (not a loop nested in it) both backpropagate and step (`for idx, l in
    enumerate(losses): l.backward(retain_graph=True); optimizer[idx].step()`)? Such a loop gets a second pass
    even deep in a nest: what its second iteration backpropagates is what its first one's step changed."""
    got: bool | None = getattr(node, "_gg_trains", None)
    if got is None:
        calls: set[str] = set()
        stack: list[ast.AST] = list(node.body)
        while stack:
            x = stack.pop()
            if isinstance(x, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                              ast.Lambda)):
                continue
            if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr in ("backward", "step"):
                calls.add(x.func.attr)
            stack.extend(ast.iter_child_nodes(x))
        got = len(calls) == 2
        node._gg_trains = got  # type: ignore[union-attr]  # cached on the tree it describes
    return got


_TYPE_TESTS = frozenset({"isinstance", "type", "hasattr", "getattr", "issubclass"})


def _sets_module_attrs(node: ast.For | ast.AsyncFor) -> bool:
    """Does the loop only set attributes of the module it iterates, after type tests (`for m in self.modules(): if
    type(m) in (nn.ReLU, nn.SiLU): m.inplace = True`, `for _, m in model.named_modules(): m.eps = 1e-3`)? No call
    but a type test, no nested loop or function."""
    got: bool | None = getattr(node, "_gg_sets_attrs", None)
    if got is not None:
        return got
    t = node.target
    var = t.id if isinstance(t, ast.Name) else (
        t.elts[-1].id if isinstance(t, ast.Tuple) and t.elts and isinstance(t.elts[-1], ast.Name) else None)
    sets = False
    ok = var is not None
    stack: list[ast.AST] = list(node.body)
    while ok and stack:
        x = stack.pop()
        if isinstance(x, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
                          ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Return, ast.Yield, ast.YieldFrom,
                          ast.Await, ast.Delete, ast.Global, ast.Nonlocal)):
            ok = False
        elif isinstance(x, ast.Call):
            ok = isinstance(x.func, ast.Name) and x.func.id in _TYPE_TESTS
        elif isinstance(x, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = x.targets if isinstance(x, ast.Assign) else [x.target]
            for tg in targets:
                if isinstance(tg, ast.Attribute) and isinstance(tg.value, ast.Name) and tg.value.id == var:
                    sets = True
                elif not isinstance(tg, ast.Name):
                    ok = False
        if ok:
            stack.extend(ast.iter_child_nodes(x))
    got = ok and sets
    node._gg_sets_attrs = got  # type: ignore[union-attr]  # cached on the tree it describes
    return got


def _builds_function(node: ast.AST) -> bool:
    """Does the function define a function or lambda (a decorator that may return a wrapper)?"""
    got: bool | None = getattr(node, "_gg_builds", None)
    if got is None:
        body = node.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        got = any(isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) for b in body for x in ast.walk(b))
        node._gg_builds = got  # type: ignore[attr-defined]  # cached on the tree it describes
    return got


def _jumps(node: ast.For | ast.AsyncFor) -> bool:
    """Does the loop's own body ``break`` or ``continue`` (not one of a loop nested in it)?"""
    stack: list[ast.AST] = list(node.body)
    while stack:
        x = stack.pop()
        if isinstance(x, (ast.Break, ast.Continue)):
            return True
        if isinstance(x, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                          ast.Lambda)):
            if isinstance(x, (ast.For, ast.AsyncFor, ast.While)):
                stack.extend(x.orelse)  # (an else clause of an inner loop belongs to this one)
            continue
        stack.extend(ast.iter_child_nodes(x))
    return False


def _eval_only(test: ast.expr) -> bool:
    """Does the test hold only when a module is not training: `not self.training`, `self.training is False`, or
    an `and` with one of those?"""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return isinstance(test.operand, ast.Attribute) and test.operand.attr == "training"
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_eval_only(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.Eq)):
        a, b = test.left, test.comparators[0]
        return any(isinstance(x, ast.Attribute) and x.attr == "training" and isinstance(y, ast.Constant)
                   and y.value is False for x, y in ((a, b), (b, a)))
    return False


def _loop_index(s: ast.For | ast.AsyncFor) -> tuple[str, int] | None:
    """The loop's index name and step: `for i in range(a, b, -1)` (a step written as a number) and `for i, x in
    enumerate(xs)`, when the body never binds the name itself; None for other loops."""
    got: tuple[tuple[str, int] | None] | None = getattr(s, "_gg_index", None)
    if got is None:
        index = _index_of(s)
        if index is not None and any(isinstance(x, ast.Name) and x.id == index[0] and not isinstance(x.ctx, ast.Load)
                                     for b in s.body for x in ast.walk(b)):
            index = None
        got = (index,)
        s._gg_index = got  # type: ignore[union-attr]  # cached on the tree it describes
    return got[0]


def _index_of(s: ast.For | ast.AsyncFor) -> tuple[str, int] | None:
    it, tgt = s.iter, s.target
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords):
        return None
    if it.func.id == "enumerate" and len(it.args) == 1 and isinstance(tgt, ast.Tuple) and len(tgt.elts) == 2 \
            and isinstance(tgt.elts[0], ast.Name):
        return tgt.elts[0].id, 1
    if it.func.id != "range" or not 1 <= len(it.args) <= 3 or not isinstance(tgt, ast.Name):
        return None
    if len(it.args) < 3:
        return tgt.id, 1
    step = _int_literal(it.args[2])
    return (tgt.id, step) if step else None


def _int_literal(e: ast.expr) -> int | None:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = _int_literal(e.operand)
        return -v if v is not None else None
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _with_item(base: Seq | Alt, key: Val, v: Val) -> Seq | Alt | None:
    """A list of known items (or each of several) with the item at the constant index ``key`` replaced by ``v``;
    None when the index or the length is not known, or it is a dict."""
    if not (isinstance(key, Const) and key.known and isinstance(key.value, int) and not isinstance(key.value, bool)):
        return None
    i = key.value
    out = []
    for s in (base.alts if isinstance(base, Alt) else (base,)):
        if s.items is None or s.keys is not None or s.kind not in ("list", "modules") or not -len(s.items) <= i < len(s.items):
            return None
        items = list(s.items)
        items[i] = v
        out.append(Seq.of(items, s.kind))
    return out[0] if len(out) == 1 else Alt(tuple(out))


def _yields_in_grad_mode(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool | None:
    """For a ``@contextmanager`` generator: True when every ``yield`` sits inside ``with torch.no_grad()`` (or
    ``inference_mode()``, ``set_grad_enabled(False)``), False when every one sits inside ``with
    torch.enable_grad()`` (or ``set_grad_enabled(True)``), else None. Cached on the tree."""
    got: bool | str | None = getattr(node, "_gg_yield_mode", "")
    if got != "":
        return got  # type: ignore[return-value]
    modes: set[bool | None] = set()
    if any((d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")) == "contextmanager"
           for d in node.decorator_list):
        _yield_modes(node.body, None, modes)
    got = modes.pop() if len(modes) == 1 else None
    node._gg_yield_mode = got  # type: ignore[union-attr]  # cached on the tree, which it describes
    return got


def _grad_ctx_mode(e: ast.expr) -> bool | None:
    """The grad mode a ``with`` item sets, read from its text: True (off), False (on), None (neither)."""
    f = e.func if isinstance(e, ast.Call) else e
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    args = e.args if isinstance(e, ast.Call) else []
    flag = args[0] if args else None
    if name == "no_grad":
        return True
    if name == "inference_mode":  # (inference_mode(False) leaves the grad mode as it was)
        return None if isinstance(flag, ast.Constant) and flag.value is False else True
    if name == "enable_grad":
        return False
    if name == "set_grad_enabled" and isinstance(flag, ast.Constant) and isinstance(flag.value, bool):
        return not flag.value
    return None


def _yield_modes(stmts: list[ast.stmt], mode: bool | None, out: set[bool | None]) -> None:
    for s in stmts:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a nested def's yields are its own
        inner = mode
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                m = _grad_ctx_mode(item.context_expr)
                if m is not None:
                    inner = m
        for field in ("test", "value", "iter", "items", "targets", "target", "msg", "exc", "subject"):
            for x in _as_list(getattr(s, field, None)):
                if isinstance(x, ast.AST) and any(isinstance(y, (ast.Yield, ast.YieldFrom)) for y in ast.walk(x)):
                    out.add(mode)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for x in _as_list(getattr(s, field, None)):
                if isinstance(x, ast.stmt):
                    _yield_modes([x], inner if field == "body" else mode, out)
                elif isinstance(x, (ast.ExceptHandler, ast.match_case)):
                    _yield_modes(x.body, mode, out)


def _as_list(v: object) -> list[object]:
    return v if isinstance(v, list) else [v] if v is not None else []


def _applies_no_grad(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A decorator shape (a nested def, or ``return torch.no_grad()(fn)``) that names no_grad or inference_mode."""
    got: bool | None = getattr(node, "_gg_applies_no_grad", None)
    if got is None:
        names = nested = False
        for x in ast.walk(node):
            if (isinstance(x, ast.Attribute) and x.attr in ("no_grad", "inference_mode")) or (
                    isinstance(x, ast.Name) and x.id in ("no_grad", "inference_mode")):
                names = True
            elif (x is not node and isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))) or (
                    isinstance(x, ast.Return) and isinstance(x.value, ast.Call) and isinstance(x.value.func, ast.Call)):
                nested = True
        got = names and nested
        node._gg_applies_no_grad = got  # type: ignore[union-attr]  # cached on the tree, which it describes
    return got


def _logged(o: Obj, table: str, name: str) -> Val | None:
    """What an object holds now under one entry of a branch's log (see AnalyzerCore.set_attr)."""
    if table == "entries":
        return o.entries
    got: Val | None = getattr(o, table).get(name)
    return got


def _restore(o: Obj, table: str, name: str, old: Val | None) -> None:
    if table == "entries":
        if old is not None:
            o.entries = old
    elif old is None:
        getattr(o, table).pop(name, None)
    else:
        getattr(o, table)[name] = old


def _dunder_call(t: ast.Subscript, name: str, stmt: ast.stmt) -> ast.Call:
    """The call Python makes for ``t`` (``x[i] = v`` is ``x.__setitem__(i, v)``), made once per target and kept on
    it: the call node is where the callee's findings and summaries are keyed."""
    made: ast.Call | None = getattr(t, "_gg_dunder", None)
    if made is None:
        value = getattr(stmt, "value", None)
        made = ast.Call(func=ast.Attribute(value=t.value, attr=name, ctx=ast.Load()),
                        args=[t.slice, *([value] if isinstance(value, ast.expr) else [])], keywords=[])
        ast.copy_location(made, t)
        ast.copy_location(made.func, t)
        t._gg_dunder = made  # type: ignore[attr-defined]  # cached on the tree it belongs to
    return made


def _none_test(test: ast.expr) -> tuple[str, bool] | None:
    """``name is None`` (name, True) or ``name is not None`` (name, False)."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None \
            and isinstance(test.ops[0], (ast.Is, ast.IsNot)):
        return test.left.id, isinstance(test.ops[0], ast.Is)
    return None


def _is_record(s: ast.ClassDef, ci: ClassInfo) -> bool:
    """A dataclass (``@dataclass``, ``@dataclasses.dataclass(...)``) or a ``typing.NamedTuple`` subclass: Python
    writes its constructor from the annotated fields."""
    for d in s.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if (isinstance(f, ast.Name) and f.id == "dataclass") or (isinstance(f, ast.Attribute) and f.attr == "dataclass"):
            return True
    return any(isinstance(b, Ref) and b.qual.rsplit(".", 1)[-1] == "NamedTuple" for b in ci.bases)


def _field_default(an: Any, value: ast.expr, st: State, fr: Frame) -> Val:
    """A field's default as the generated constructor gives it: the value, or ``field(default=...)``'s; a
    ``default_factory`` or anything else unknown."""
    if isinstance(value, ast.Constant):
        return Const(value.value)
    if isinstance(value, ast.Call) and ((isinstance(value.func, ast.Name) and value.func.id == "field") or (
            isinstance(value.func, ast.Attribute) and value.func.attr == "field")):
        for k in value.keywords:
            if k.arg == "default":
                return _field_default(an, k.value, st, fr)
        return UNKNOWN
    got: Val = an.ev(value, st, fr)
    return got


def _str_in_tuple(node: ast.expr) -> bool:
    """``x[a, "name"]``: an index tuple holding a string is a mapping's nested key (a TensorDict's), never a
    tensor index."""
    return isinstance(node, ast.Tuple) and any(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                               for e in node.elts)


def _whole_index(node: ast.expr) -> bool:
    """``x[:]``, ``x[...]``: an index that selects every element."""
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    return bool(parts) and all(
        (isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None)
        or (isinstance(p, ast.Constant) and p.value is Ellipsis) for p in parts)


def _advanced_index(node: ast.expr, key: Val) -> bool:
    """An index with a tensor or a list in it (``x[idx]``, ``x[mask]``, ``x[:, [0, 2]]``): advanced indexing,
    which writes through index_put_. (An element of an index table, ``x[order[i]]``, is a 0-dim tensor that indexes
    as an integer.)"""
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    if any(isinstance(p, ast.List) for p in parts):
        return True
    vals = key.items if isinstance(key, Seq) and key.kind == "tuple" and key.items is not None \
        and isinstance(node, ast.Tuple) else (key,)
    return any(isinstance(v, T) and not v.maybe_tensor and not isinstance(p, ast.Subscript)
               for p, v in zip(parts, vals))


def _separate_tensors(items: tuple[Val, ...]) -> bool:
    """Outputs that are tensors of their own (not views, no two sharing a storage)."""
    seen: set[Any] = set()
    for x in items:
        if not isinstance(x, T) or x.view is not None or x.maybe_tensor or not x.storages or x.storages & seen:
            return False
        seen |= x.storages
    return True


# methods that keep what they are given in their receiver (a list, a queue, a buffer), or write into it in place
_KEEPING_METHODS = frozenset({"append", "appendleft", "extend", "extendleft", "insert", "add", "update", "setdefault",
                              "put", "put_nowait", "push", "store", "register_buffer", "register_parameter",
                              "add_module", "register_module", "__setitem__", "copy_", "set_"})


def _dropped_call(n: ast.expr) -> bool:
    """A call whose result the statement drops, not one that keeps its argument in its receiver
    (``outs.append(model(x))``) or writes into it (``x.add_(y)``)."""
    if not isinstance(n, ast.Call):
        return False
    f = n.func
    return not (isinstance(f, ast.Attribute) and (f.attr in _KEEPING_METHODS or f.attr.endswith("_")))


def _throwaway(t: ast.expr) -> bool:
    """``_``, or a tuple of them: the conventional name for a value nobody reads."""
    if isinstance(t, ast.Name):
        return t.id == "_"
    return isinstance(t, (ast.Tuple, ast.List)) and all(_throwaway(e) for e in t.elts)
