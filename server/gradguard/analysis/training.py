"""Training-loop events: ``backward()`` through a graph whose parameters an optimizer step changed (GG201/GG202)."""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from gradguard.analysis.common import (
    Frame,
    is_true,
)
from gradguard.analysis.core import AnalyzerCore
from gradguard.analysis.hazards import Hazard
from gradguard.analysis.state import State
from gradguard.analysis.values import (
    NO,
    T,
    Val,
    fresh,
    owner_key,
)


class Training(AnalyzerCore):
    # backward -------------------------------------------------------------------------
    def backward(self, y: Val, kw: dict[str, Val], n: ast.AST, st: State, fr: Frame | None = None) -> None:
        if not isinstance(y, T):
            return
        if fr is not None and self.tensor_hooks and not st.no_grad:
            self._tensor_hooks(y, kw, n, st, fr)
        self._backward(y, kw, n, st)
        if fr is not None and self.post_accumulate_hooks and not st.no_grad:
            self._post_accumulate(n, st, fr)

    def _tensor_hooks(self, y: T, kw: dict[str, Val], n: ast.AST, st: State, fr: Frame) -> None:
        """The hooks registered with ``t.register_hook(fn)`` on a tensor of ``y``'s graph (one that shares a graph
        use with it) run when the backward reaches t, before the backwards of the ops that made t: an in-place
        write there into a tensor those ops saved (a weight decayed from a gradient hook) is a write before they
        read it."""
        uses = frozenset((o, s) for (o, s, _c) in y.prov)
        hooks, self.tensor_hooks = self.tensor_hooks, []  # (a hook's own backward runs none)
        grad_was = st.no_grad
        st.no_grad = not is_true(kw.get("create_graph"))  # (the engine runs hooks with grad off)
        outer = self.fed_back
        try:
            for t, fn in hooks:
                if isinstance(n, ast.Call) and any((o, s) in uses for (o, s, _c) in t.prov):
                    self.fed_back = (self.stmt_site(), "the tensor hook runs during this backward, before the "
                                                       "backward of the op that saved the tensor")
                    self.call(fn, [fresh("the gradient a hook is given", rg=NO)], {}, n, st, fr)
        finally:
            self.tensor_hooks = hooks
            self.fed_back = outer
            st.no_grad = grad_was

    def _post_accumulate(self, n: ast.AST, st: State, fr: Frame) -> None:
        """The hooks registered with ``p.register_post_accumulate_grad_hook(fn)`` run once the backward has
        accumulated p's gradient: an in-place update of p there (an optimizer step fused into backward) is a write
        after this backward, which a graph kept with ``retain_graph`` finds changed at the next one."""
        hooks, self.post_accumulate_hooks = self.post_accumulate_hooks, []  # (a hook's own backward runs none)
        grad_was, st.no_grad = st.no_grad, True  # (the engine runs hooks with grad off)
        try:
            for p, fn in hooks:
                if p.rg != NO and not p.maybe_tensor and isinstance(n, ast.Call):
                    self.call(fn, [p], {}, n, st, fr)
        finally:
            self.post_accumulate_hooks = hooks
            st.no_grad = grad_was

    def _backward(self, y: T, kw: dict[str, Val], n: ast.AST, st: State) -> None:
        self.backwards += 1
        st.heap.cleared = frozenset()  # (the gradients it accumulates are there for the next step)
        if is_true(kw.get("create_graph")):
            self.graph_grads = True  # the `.grad` it accumulates requires grad (see Expressions.getattr)
        heap = st.heap
        if self.am_saves and not st.allow_mutation and not st.silent:
            # a graph that saved tensors inside allow_mutation_on_saved_tensors() keeps them in that context's
            # table, which is gone once the block ends: torch asserts at the backward
            recs = [r for rs in heap.saved.values() for r in rs if r in self.am_saves]
            if recs:
                site = self.site(n)
                self.report(Hazard("am_outside", "backward", site, self.stmt_site(), "backward()",
                                   self.text(n.func.value) if isinstance(n, ast.Call) and isinstance(
                                       n.func, ast.Attribute) else "", (recs[0],)))
        retain = is_true(kw.get("retain_graph")) or is_true(kw.get("create_graph"))
        # (a graph use the loss reaches through a carried state and by another path is the carry's)
        carried = {(o, s): c for (o, s, c) in y.prov if c is not None}
        for owner, stamp, carry in sorted(y.prov, key=lambda p: (p[1], p[2] is None, owner_key(p[0]))):
            carry = carry or carried.get((owner, stamp))
            if (owner, stamp) in heap.freed:
                continue
            ev = next((e for e in heap.steps if e.stamp > stamp and e.updates(owner)
                       and (owner, stamp) not in e.dead), None)
            if ev is None:
                continue
            bw_stmt = self.stmt_site()
            bw_inner: tuple[tuple[Any, str], ...] = ()
            if self.entry is not None and bw_stmt.path:
                # the backward runs inside another module's helper this file calls: reported at that call, and
                # pointing at the backward itself and at the argument it backpropagates
                bw_inner = ((bw_stmt, "the backward runs here"),)
                bw_stmt = self.entry[1]
                arg = next((site for v, site in self.entry_args
                            if isinstance(v, T) and not v.maybe_tensor and v.storages & y.storages), None)
                if arg is not None and arg != bw_stmt:
                    bw_inner = ((arg, "the helper backpropagates this value"), *bw_inner)
            if carry is not None and (carry[3] in self.active_loops or (carry[3] == "attribute" and self.active_loops)):
                csite, cname, vsite, _loop = carry
                # The in-place op is the step; the fix (.detach()) goes where the state is carried.
                use = self.carry_use.get(csite)
                used = ((use[0], f"`{cname}` from the previous iteration enters this iteration's graph here "
                                 f"({use[1]})"),) if use is not None else ()
                self.report(Hazard("carry", "carry", ev.site, ev.stmt, ev.op, cname,
                                   related=((csite, f"`{cname}` carries the previous iteration's graph here"),
                                            (bw_stmt, "backward reaches the previous iteration's graph here"),
                                            *used),
                                   extra=(("value_span", vsite), ("carry_stmt_span", csite),
                                          ("step_line", ev.site.line), ("backward_line", bw_stmt.line),
                                          ("record", self.record_carries.get(csite)))))
            else:
                inner = ((ev.inner, f"{ev.op} runs here"),) if ev.inner is not None else ()
                chain = self.graph_sites.get((owner, stamp), ())
                step = ev.inner if ev.inner is not None else ev.stmt
                took = next((u for u in reversed(chain) if u.path == step.path), None)
                if took is not None and took.line < step.line:
                    inner = ((took, "the graph took in the parameters here, before the step changed them"), *inner)
                    # the statement of the step's own code that ran it (`disc_out = disc(fake)` in the loop, whose
                    # layer call above is in the model's forward, further up the same file): the last call before
                    # the step in that file is the one in the step's function (the chain's other calls are in
                    # callers, defined around it, or in callees, defined before it)
                    call = max((u for u in chain if u.path == step.path and took.line < u.line < step.line),
                               key=lambda u: u.line, default=None)
                    if call is not None:
                        inner = ((call, "the forward that put them in the graph runs here, before the step"), *inner)
                # the statements to reorder: those of the innermost function that runs both (the update may be
                # made inside a helper this file calls between the forward and the backward)
                step_at, bw_at = ev.stmt, bw_stmt
                here = self.call_stmts
                k = 0
                while k < len(ev.calls) and k < len(here) and ev.calls[k] == here[k]:
                    k += 1
                if k < len(ev.calls):
                    step_at = ev.calls[k]
                    inner = (*inner, (step_at, "the update is made inside the call here"))
                if k < len(here):
                    bw_at = here[k]
                self.report(Hazard("step", "step", ev.site, ev.stmt, ev.op, "",
                                   related=((bw_stmt, "this backward goes through the graph built before the step"),
                                            *inner, *bw_inner),
                                   extra=(("step_stmt_span", step_at), ("backward_line", bw_stmt.line),
                                          ("backward_stmt_span", bw_at))))
            break
        if retain and self.bw_pending:
            # a custom Function's backward writes into what it saved: the kept graph's next backward finds it changed
            keep = []
            for storages, prov, (wsite, wstmt, op, name), own in self.bw_pending:
                alive = any(own in heap.saved.get(s, ()) for s in storages)
                if alive and (prov & y.prov or not (prov and y.prov)):
                    self.report(self.backward_write_hazard(
                        wsite, wstmt, op, name, (own,),
                        ((self.stmt_site(), "retain_graph keeps the graph for another backward, which finds the "
                                            "tensor changed"),)))
                else:
                    keep.append((storages, prov, (wsite, wstmt, op, name), own))
            self.bw_pending = keep
        graphs = frozenset((o, s) for (o, s, _c) in y.prov)
        if self.spent_writes:
            # writes made after an earlier backward kept its graph: this one breaks if it goes through that graph
            wait = []
            for h, theirs in self.spent_writes:
                if not (theirs and graphs) or theirs & graphs:
                    self.report(dataclasses.replace(h, related=(*h.related, (
                        self.stmt_site(), "this backward goes through that graph again (an earlier backward kept it "
                                          "with retain_graph=True)"))))
                elif retain:
                    wait.append((h, theirs))
            self.spent_writes = wait
        if retain:
            for sto, kept in heap.saved.items():
                for r in kept:
                    self.spent.setdefault((sto, r), graphs)
        if not retain:
            heap.freed = heap.freed | {(o, s) for (o, s, _c) in y.prov}
            heap.saved = {}
            self.bw_pending = []
