"""The interpreter's core: per-file state, source positions, hazard reporting, saves, and name lookup.

The layers above (statements, expressions, calls, nn modules, functions, training events) are mixins over
:class:`AnalyzerCore`; the methods one layer calls on another are declared here so each layer type-checks alone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gradguard.analysis.common import (
    BUDGET,
    FOREIGN_MODULE_LEVEL,
    MAX_DEPTH,
    Budget,
    Frame,
    Loop,
    affine_index,
)
from gradguard.analysis.hazards import Hazard, SaveRecord, Site
from gradguard.analysis.namespace import ModuleCtx
from gradguard.analysis.overlap import partial_overlap
from gradguard.analysis.reach import BackwardReach
from gradguard.analysis.state import MAX_SAVES, Heap, State, StepEvent
from gradguard.analysis.values import (
    MAYBE,
    NO,
    UNKNOWN,
    UNKNOWN_NUM,
    YES,
    ClassInfo,
    Const,
    Func,
    FuncInfo,
    Obj,
    Params,
    Ref,
    Seq,
    Storage,
    Super,
    T,
    Val,
    next_id,
    ordered,
)
from gradguard.knowledge import Knowledge, OpInfo, load
from gradguard.model import source_lines

if TYPE_CHECKING:
    from gradguard.project.resolver import Module, Project

_ROOT_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


_ITEM_OF_NAME = re.compile(r"([A-Za-z_]\w*)\[")


# in-place ops torch lets write into an expanded tensor: a fill with one value (what every shared element gets
# anyway), masked_fill_ and index_fill_ (deprecated: a warning), and the ones that change only the shape
OVERLAP_ALLOWED = frozenset({
    "fill_", "zero_", "masked_fill_", "index_fill_", "index_put_", "squeeze_", "unsqueeze_", "t_", "transpose_",
    "swapdims_", "swapaxes_", "resize_", "resize_as_", "as_strided_", "requires_grad_", "detach_",
})


# what in a program's text may put it on a GPU (a device name or variable, a move, a launcher that picks one)
_COMMENT = re.compile(r"#[^\n]*")
_DEVICE_WORDS = re.compile(r"cuda|device|gpu|\.to\(|accelerat|distributed|lightning|set_default|mps|xla|rank")


def program_device(source: str) -> str | None:
    """The device the program runs on, when its text settles it: "cpu" for one whose code (comments aside) never
    names a device or moves a tensor (a plain script runs on the CPU), else None (any device: the facts of every
    device apply). Only a few ops save differently on CUDA (cuDNN RNNs, the fused LSTM cell)."""
    return None if _DEVICE_WORDS.search(_COMMENT.sub("", source)) else "cpu"


class AnalyzerCore:
    def __init__(self, tree: ast.Module, source: str, path: str, kb: Knowledge | None = None,
                 project: Project | None = None, file: str = ""):
        self.tree = tree
        self.path = path
        self.kb = kb or load(device=program_device(source))
        self.lines = source_lines(source)
        self.project = project
        self.file = file  # the checked file's absolute path when it is a real file ("" otherwise)
        self.root = ModuleCtx("", self.lines)
        self.mod = self.root  # the module whose code runs now (positions and text refer to it)
        self.loaded: dict[str, ModuleCtx] = {}  # other modules this analysis reached, by absolute path
        self.quiet = 0  # > 0 while other modules' top-level names are evaluated: no hazards, no inlining
        # the grad mode around the outermost value evaluated only to feed a comparison, an index or `.item()`
        # (see Expressions.ev_nograd): None outside one
        self.fed_grad_off: bool | None = None
        # the entry before the one an nn.Sequential is running (its output is what this entry gets), by name
        self.seq_prev: str | None = None
        self.foreign_used = 0  # statements run in other modules' code (see Functions.affordable)
        self.foreign_limit = FOREIGN_MODULE_LEVEL
        # (see set_attr, Statements.s_If) per open branch: (o, "attrs", "params" or "entries", name, the value before)
        self.attr_logs: list[tuple[int, list[tuple[Obj, str, str, Val | None]]]] = []
        self.opaque_objs: dict[frozenset[Storage], Obj] = {}  # unknown values used as objects (see opaque_for)
        self.loop_product = 1  # product of the passes of the loops running now (see Statements._loop)
        self.carry_use: dict[Site, tuple[Site, str]] = {}  # carried value (its assignment) -> first op using it
        # carries of records (their assignment -> "tuple" for a namedtuple, "record" for a dataclass)
        self.record_carries: dict[Site, str] = {}
        self.defaults_cache: dict[int, dict[str, Val]] = {}  # id(FuncInfo) -> its defaults (FuncInfos live on)
        self.entry: tuple[Site, Site] | None = None  # the checked file's call (site, statement) into another module
        self.entry_args: tuple[tuple[Val, Site], ...] = ()  # that call's arguments: (value, where it is written)
        # [marker, pure, cut, stamp at the call] of the calls being summarised, outermost first
        self.recording: list[list[Any]] = []
        # calls being followed: (callee, call, what it calls, its `inplace=True` keyword if it has one, its statement)
        self.call_chain: list[tuple[FuncInfo, Site, str, Site | None, Site]] = []
        self.call_stmts: list[Site] = []  # the statements of calls between this file's functions being followed
        self.fp32_files: dict[str, bool] = {}  # module path -> its float tensors are float32 (see Calls.float32)
        self.backwards = 0  # backward() calls seen so far
        self.summaries: dict[Any, Any] = {}  # call context -> Summary (or NOT_SUMMARISED): see .summaries
        self.footprints: dict[Any, Any] = {}  # call context -> what its recorded run read and needed (.shared.Rec)
        self.shared_recs: list[Any] = []  # the footprints of the calls being recorded, outermost first
        self.shared_files: set[str] = set()  # modules read by the project's kept calls replayed here (.shared)
        self.reported = 0  # hazards reported so far (a kept call reported none)
        self.hazards: dict[tuple[Any, ...], Hazard] = {}
        # stale views reported: (when the view was made, where its tensor was written), one finding per pair (the
        # first op that reads it raises; what a later op derives from it never exists)
        self.stale_reported: set[tuple[Any, Any]] = set()
        self.stamp = 0
        # (owner, stamp) of a graph's provenance -> where that graph took the owner's parameters in: the calls being
        # followed and the statement. GG202 points at the one in the step's file, the forward the step made stale.
        self.graph_sites: dict[tuple[Any, int], tuple[Site, ...]] = {}
        self.budget = BUDGET
        self.truncated: int | None = None  # the line where the analysis ran out of budget, if it did
        self.active: list[FuncInfo] = []
        self.active_objs: list[Obj | None] = []  # the module each running call was given first (see _descends)
        self.functions: list[FuncInfo] = []
        # nested defs of the checked file made while its functions run, and the defs the analysis called: one never
        # called escapes (returned, passed to a library's `tree_map`, registered as a hook) and runs on its own
        self.nested_defs: list[FuncInfo] = []  # (not yet looked at, in the order they were made)
        self.nested_seen: set[ast.AST] = set()
        # helpers the file only calls as `return helper(...)` (see interp._passed_through), and those of them a
        # caller run alone has followed once
        self.pass_through: set[ast.AST] = set()
        self.followed_through: set[ast.AST] = set()
        self.called_defs: set[ast.AST] = set()
        # while the module's own code runs (a script): the defs it called, each with whether every call gave it
        # arguments the analysis knows (tensors it made, not values of unknown origin): see Interp.run
        self.script_calls: dict[ast.AST, bool] | None = None
        self._escaping = False
        self.classes: list[ClassInfo] = []
        # every class and def the run made, in any module (their cycles are broken when the analysis is disposed)
        self.made_classes: list[ClassInfo] = []
        self.made_funcs: list[FuncInfo] = []
        self.default_instances: dict[int, Obj] = {}
        self.cur_stmt: ast.stmt | None = None
        self.active_loops: list[ast.AST] = []
        self.alias_stmt: dict[Site, Site] = {}
        self._graph_file: bool | None = None
        self.inference_spans: list[tuple[int, int]] = []  # storage ids made inside inference_mode: [first, end)
        self.pack_inputs: set[Storage] = set()  # what a saved-tensor pack hook is given
        # `p.register_post_accumulate_grad_hook(fn)`: (p, fn), run after each backward (see Training.backward)
        self.post_accumulate_hooks: list[tuple[T, Val]] = []
        # `t.register_hook(fn)`: (t, fn), run by a backward through t's graph before its ops' backwards (see
        # Training.backward)
        self.tensor_hooks: list[tuple[T, Val]] = []
        self.dirty_at: dict[int, list[tuple[Val, Site, Site, str]]] = {}  # ctx oid -> its mark_dirty calls
        # the inputs of a running custom Function whose forward marks its inputs dirty: a write to one of them is
        # the `apply` call's, reported there (see NNModules.autograd_apply)
        self.dirty_inputs: frozenset[Storage] = frozenset()
        # the writes into those inputs, held until the forward returns: those to inputs it does not mark dirty are
        # plain in-place writes, reported where they are
        self.dirty_held: list[tuple[Hazard, T, tuple[SaveRecord, ...], State]] = []
        self.am_saves: set[SaveRecord] = set()  # saves made inside allow_mutation_on_saved_tensors()
        self.version_kept: frozenset[Storage] = frozenset()  # writes to these move no version (PRESERVE_VERSION_CTX)
        # Saves that no backward can reach (see Calls.e_Call): the saves recorded while the outermost call
        # expression runs, the count of calls into other code and in-place writes, and the call whose op cuts
        # the graph (argmax, multinomial, binomial)
        self.save_log: list[tuple[Storage, SaveRecord]] = []
        # the items `lst[i + c]` of index loops (see common.Loop): item storage -> (its loop, the list's storage,
        # its place)
        self.instance_of: dict[Storage, tuple[Loop, Storage, int]] = {}
        self.effects = 0
        self.call_depth = 0
        self.cut_at: ast.AST | None = None
        # calls whose result nobody keeps, running (see discarded): [the id mark when it began, nothing it did kept
        # a tensor anywhere else so far]
        self.watching: list[list[Any]] = []
        # custom Functions' backward writes into what they saved: summaries per class, and applies awaiting a
        # backward that keeps the graph (storages, provenance of the outputs, the write, the Function's save)
        self._bw_writes: dict[int, tuple[Any, tuple[Any, ...]]] = {}
        self.bw_pending: list[tuple[frozenset[Storage], frozenset[Any], tuple[Any, ...], SaveRecord]] = []
        # A backward that keeps its graph (retain_graph=True) has unpacked what was saved so far: the saves it
        # went through, and the graphs of its root (`spent`). A write into those afterwards breaks only a later
        # backward through the same graph: it waits in `spent_writes` (with the graphs of the written tensor) for
        # one, and is dropped when none comes (a recurrent state detached after each step's backward).
        self.spent: dict[tuple[Storage, SaveRecord], frozenset[Any]] = {}
        self.spent_writes: list[tuple[Hazard, frozenset[Any]]] = []
        self.grads: dict[Storage, T] = {}  # `p.grad = g`: the tensor's .grad (flow-insensitive)
        # `.grad` read where no assignment set it: one tensor per storage; and whether a backward with
        # create_graph=True ran, after which those gradients require grad
        self.grad_reads: dict[Storage, T] = {}
        self.graph_grads = False
        self.fed_back: tuple[Site, str] | None = None  # a recurrent step run again with its returned state
        # Incremental re-analysis (see .incremental): while a function run is recorded, the checked file's lines it
        # executed and module-level names it read; what a cached result read, given to every run that reuses it.
        self.reach_lines: set[int] | None = None
        self.reach_names: set[str] | None = None
        self.cache_reach: dict[Any, tuple[frozenset[int], frozenset[str]]] = {}
        self.reach_unknown = False  # the run reused a result computed while nothing was recorded
        self.entry_log: list[Hazard] | None = None
        self._reach: BackwardReach | None = None  # see unreached
        self._reach_of: dict[str, BackwardReach | None] = {}  # the same, for other modules' functions
        # (call, effects before it): a pure helper of this file returned no tensor, so the call cuts the graph
        self.pure_cut: tuple[ast.AST, int] | None = None

    def inference_tensor(self, val: T) -> bool:
        """Whether ``val`` was made inside inference_mode (a parameter made there by lazy analysis is not): every
        tensor it may be was (an item of a list that also holds the ordinary input, `[x, *features]`, is not)."""
        return bool(val.storages) and all(
            s.param_of is None and not s.leaf and any(a <= s.sid < b for a, b in self.inference_spans)
            for s in val.storages)

    @property
    def globals(self) -> dict[str, Val]:
        return self.root.env

    @globals.setter
    def globals(self, env: dict[str, Val]) -> None:
        self.root.env = env

    def _defaults(self, fi: FuncInfo) -> dict[str, Val]:
        """Parameter defaults, evaluated once per function like Python does, in the defining module's scope
        (``norm_layer=nn.LayerNorm``, ``act=nn.ReLU(inplace=True)``, ``norm=partial(nn.GroupNorm, 8)``)."""
        got = self.defaults_cache.get(id(fi))
        if got is not None:
            self.reuse(("defaults", id(fi)))
            return got
        return self.cached(("defaults", id(fi)), lambda: self._eval_defaults(fi))  # type: ignore[no-any-return]

    def _eval_defaults(self, fi: FuncInfo) -> dict[str, Val]:
        node = fi.node
        out: dict[str, Val] = {}
        a = node.args
        pos = [*a.posonlyargs, *a.args]
        pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
                 *((p, kd) for p, kd in zip(a.kwonlyargs, a.kw_defaults) if kd is not None)]
        for p, d in pairs:
            out[p.arg] = self.const_of(d) if isinstance(d, ast.Constant) else self.default_value(fi, d)
        self.defaults_cache[id(fi)] = out
        return out

    def default_value(self, fi: FuncInfo, d: ast.expr) -> Val:
        """A non-constant default: a reference (a class, a function), a partial, a module instance."""
        if not isinstance(d, (ast.Name, ast.Attribute, ast.Call, ast.Tuple, ast.List, ast.UnaryOp, ast.BinOp)):
            return UNKNOWN_NUM
        saved = (self.mod, self.cur_stmt)
        if fi.mod is not None:
            self.mod = fi.mod
        self.quiet += 1
        try:
            st = State(dict(fi.closure or {}), Heap())
            v = self.ev(d, st, Frame(None, MAX_DEPTH - 2))
        except Budget:
            raise
        except RecursionError:
            v = UNKNOWN_NUM
        finally:
            self.mod, self.cur_stmt = saved
            self.quiet -= 1
        return UNKNOWN_NUM if v is UNKNOWN else v

    def const_of(self, node: ast.expr) -> Val:
        if isinstance(node, ast.Constant):
            return Const(node.value)
        return UNKNOWN_NUM

    # ------------------------------------------------------------------ hazards
    def site(self, node: Any) -> Site:
        return Site.of(node, self.mod.path)

    def text(self, node: ast.AST | None) -> str:
        return self.mod.text(node)

    def report(self, h: Hazard) -> None:
        if self.quiet:
            return
        self.reported += 1
        flagged = self.flagged_call(h)
        if flagged is not None:
            h = flagged
        passed = self.passed_at(h) if flagged is None else None
        if passed is not None:
            h = replace(h, related=(*h.related, passed))
        if h.site.path and self.file:
            h = h.anchored(self.file)  # found in another module: name the checked file where it is referred to
            if passed is not None:
                passed = h.related[-1]
        k = h.key()
        got = self.hazards.get(k)
        if got is None:
            self.hazards[k] = h
        elif passed is not None and passed not in got.related:
            self.hazards[k] = replace(got, related=(*got.related, passed))
        if self.entry_log is not None:
            self.entry_log.append(h)

    def cached(self, key: Any, compute: Any) -> Any:
        """``compute()`` for a result cached across function runs under ``key``, recording what it read so a run
        that reuses it reads that too (incremental re-analysis; free when nothing is recorded)."""
        if self.reach_lines is None:
            return compute()
        outer_l, outer_n = self.reach_lines, self.reach_names
        self.reach_lines, self.reach_names = set(), set()
        try:
            return compute()
        finally:
            inner_l, inner_n = self.reach_lines, self.reach_names
            assert inner_l is not None and inner_n is not None and outer_n is not None
            self.cache_reach[key] = (frozenset(inner_l), frozenset(inner_n))
            outer_l.update(inner_l)
            outer_n.update(inner_n)
            self.reach_lines, self.reach_names = outer_l, outer_n

    def reuse(self, key: Any) -> None:
        """A result cached under ``key`` is reused: the current run reads what computing it read."""
        if self.reach_lines is not None:
            got = self.cache_reach.get(key)
            if got is not None:
                assert self.reach_names is not None
                self.reach_lines.update(got[0])
                self.reach_names.update(got[1])
            else:
                self.reach_unknown = True  # what it read is not known: the run cannot be replayed later

    def step_event(self, owners: frozenset[Any], site: Site, stmt: Site, op: str, st: State) -> StepEvent:
        """A step made here; inside another module's function called from the checked file, it is reported at
        that call (the helper is fine, the order in this file is not) and points into the helper."""
        if self.entry is not None and site.path != "":
            return StepEvent(self.stamp, owners, self.entry[0], self.entry[1], op, site, tuple(self.call_stmts),
                             st.heap.freed)
        return StepEvent(self.stamp, owners, site, stmt, op, None, tuple(self.call_stmts), st.heap.freed)

    def set_attr(self, o: Obj, name: str, v: Val) -> None:
        """``o.name = v``, remembered while a branch runs so that the other branch starts from the old value and
        the two are joined afterwards (objects live outside the flow-sensitive state)."""
        if o.kind == "opaque" and name not in o.attrs:
            # an object we cannot see into had some value there already, unknown (`if not hasattr(args, "x"):
            # args.x = "sgd"` leaves it "sgd" or what it was)
            self.opaque_child(o, name)
        self._log(o, "attrs", name, o.attrs.get(name))
        o.attrs[name] = v
        if isinstance(v, Obj) and v.kind == "opaque" and v.cfg.get("unread_class") is not None \
                and o.kind == "local" and o.info is not None and self.nn_module_like(o.info):
            # `self.backbone = resnet50(...)` of a library the analysis cannot read, in a module: a part of it,
            # trained with it (see NNModules.obj_method)
            v.cfg["trained"] = Const(True)

    def _log(self, o: Obj, table: str, name: str, old: Any) -> None:
        """Remember ``o``'s old ``table`` entry while a branch runs; objects made inside the branch are its own."""
        self.touched(o)
        if self.attr_logs and o.oid <= self.attr_logs[-1][0]:
            self.attr_logs[-1][1].append((o, table, name, old))

    def set_entries(self, o: Obj, v: Val) -> None:
        """A container module's entries change (``seq.add_module(...)``, ``layers.append(...)``): remembered while a
        branch runs, as :meth:`set_attr` does (``if leaky: add LeakyReLU else: add ReLU`` adds one of them)."""
        self._log(o, "entries", "", o.entries)
        o.entries = v

    def set_param(self, o: Obj, name: str, v: T) -> None:
        """A module's parameter changes its flags (``m.weight.requires_grad = False``, ``m.requires_grad_(False)``):
        remembered while a branch runs, as :meth:`set_attr` does."""
        self._log(o, "params", name, o.params.get(name))
        o.params[name] = v

    def passed_at(self, h: Hazard) -> tuple[Site, str] | None:
        """A write inside a called function into a tensor that an op of a caller saved: the call that passed the
        tensor in, outermost (where a `.clone()` of the argument fixes it)."""
        if not h.saves or not self.call_chain or h.kind != "saved":
            return None
        r = h.saves[0]
        hit: tuple[FuncInfo, Site, str, Site | None, Site] | None = None
        for link in reversed(self.call_chain):
            if _inside(r.site, link[0]):
                break
            hit = link
        if hit is None:
            return None
        return hit[1], f"`{hit[2]}` is called here with a tensor that {r.op} saved"

    def flagged_call(self, h: Hazard) -> Hazard | None:
        """A write inside a called function into a tensor an op outside it saved, made by a call that asked for it
        with ``inplace=True`` (``normalize(fake, mean, std, inplace=True)``, whose body writes into its argument only
        when told to): the hazard of that keyword at that call (outermost such call), as for ``F.relu(x,
        inplace=True)``. The function is fine; the call's flag is the bug, and what a fix changes."""
        if h.kind != "saved" or not h.saves or not self.call_chain:
            return None
        r = h.saves[0]
        for fi, call, callee, flag, stmt in self.call_chain:
            if flag is None or _inside(r.site, fi):
                continue
            return Hazard("saved", "inplace_kwarg", call, stmt, f"{callee}(inplace=True)", h.target, h.saves,
                          ((h.site, f"{h.op} writes into `{h.target}` in place here, as `inplace=True` asks"),
                           *h.related),
                          (("kw_span", flag), ("ctor_span", call), ("positional", False), ("inner_op", h.op)))
        return None

    def unsummarised(self) -> None:
        """A call was cut short here by the budget for other modules' code: the calls in progress gave what they gave
        with what was left of it, which a call from elsewhere would not, so none is summarised."""
        for rec in self.recording:
            rec[1] = False
        for w in self.watching:
            w[1] = False

    def cut_at_depth(self) -> None:
        """A call was cut short here by the depth limit: the calls in progress gave what they gave at their depth,
        so each one's summary serves calls at that depth or deeper (which would be cut at least as early), not
        shallower ones."""
        for rec in self.recording:
            rec[2] = True

    def touched(self, o: Obj) -> None:
        """``o`` is written (an attribute, an entry, its training flag): a call in progress that did not create
        it has an effect beyond its arguments and result, and is not summarised."""
        for rec in self.recording:
            if o.oid <= rec[0]:
                rec[1] = False
        for w in self.watching:
            if o.oid <= w[0]:
                w[1] = False

    def graph_use(self, owner: Any) -> tuple[Any, int, None]:
        """A provenance entry: ``owner``'s parameters enter a graph now (see graph_sites)."""
        key = (owner, self.stamp)
        if key not in self.graph_sites:
            self.graph_sites[key] = (*(c[1] for c in self.call_chain), self.stmt_site())
        return (owner, self.stamp, None)

    def stmt_site(self) -> Site:
        return Site.of(self.cur_stmt, self.mod.path) if self.cur_stmt is not None else Site(1, 0, 1, 1, self.mod.path)

    def param_loop(self, val: T, target: str) -> tuple[Site, str] | None:
        """The innermost ``for`` loop around the current statement that binds the written name to a module's
        parameter (``for p in model.parameters()``, ``for name, p in ...named_parameters()``, ``for p in
        group["params"]``): a hand-written parameter update, (the loop's site, the loop variable)."""
        if not any(s.param_of is not None for s in val.storages) or self.cur_stmt is None:
            return None
        m = _ROOT_NAME.match(target)
        if m is None:
            return None
        name = m.group(0)
        cur = self.cur_stmt
        for node in reversed(self.active_loops):
            if not isinstance(node, (ast.For, ast.AsyncFor)):
                continue
            if not any(n is cur for b in node.body for n in ast.walk(b)):  # the loop around this statement
                continue
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.target)):
                return Site.of(node, self.mod.path), name
        return None

    def read_overlap(self, val: Val | None, written: ast.AST, reads: list[ast.expr], st: State, *, form: str, op: str,
                     target: str, site: Site) -> bool:
        """An elementwise in-place op that writes ``written`` (a slice of a tensor, whose value is ``val``) and reads
        another slice of that tensor overlapping it (``x[1:] += x[:-1]``): torch refuses it at the call, in any grad
        mode (see .overlap). Reported; True when it was."""
        if st.silent or not isinstance(val, T) or val.maybe_tensor or val.noncontig or val.expanded is not None:
            return False
        for r in reads:
            if partial_overlap(written, r):
                self.report(Hazard("overlap_read", form, site, self.stmt_site(), op, target,
                                   related=((self.site(r), f"`{self.text(r)}` is read here: it overlaps "
                                                           f"`{self.text(written)}` in memory"),),
                                   extra=(("read_span", self.site(r)), ("read_text", self.text(r)),
                                          ("written_text", self.text(written)))))
                return True
        return False

    def mutate(self, val: Val, st: State, *, form: str, node: ast.AST, op: str, target: str,
               extra: tuple[tuple[str, Any], ...] = (), no_grad_op: bool = False,
               site: Site | None = None, related: tuple[tuple[Site, str], ...] = (), operands_rg: bool = False,
               operands_yes: bool = False, param_step: bool = True) -> None:
        """An in-place write to ``val`` (``operands_rg``: another operand of the op may require grad;
        ``operands_yes``: one surely does, so the write makes ``val`` require grad; ``param_step``: a write to a
        parameter counts as an update of its module, checked against later backwards)."""
        if not isinstance(val, T):
            return
        self.effects += 1
        for w in self.watching:
            if any(s.sid <= w[0] for s in val.storages):
                w[1] = False  # a tensor that existed before the call now holds what it computed
        if st.silent:
            for s in val.storages:  # the write happens (versions move), but nothing recorded can break
                st.heap.saved.pop(s, None)
            self.wrote(val, st, site or self.site(node), op)
            return
        site = site or self.site(node)
        stmt = self.stmt_site()
        grad_on = not (st.no_grad or no_grad_op)
        if self.pack_inputs and not self.pack_inputs.isdisjoint(val.storages):
            self.report(Hazard("pack_hook", form, site, stmt, op, target, related=related, extra=extra))
            return
        if self.inference_spans and not st.inference and not val.maybe_tensor and self.inference_tensor(val):
            self.report(Hazard("inference", form, site, stmt, op, target, related=related, extra=extra))
            return
        if val.leaf and val.rg == YES and grad_on and not (val.view == "multi" and not val.maybe_tensor):
            # (one of several views of a leaf: torch names the multi-output view first, as below)
            origin = next((s.desc for s in ordered(val.storages) if s.leaf and s.desc), "")
            loop = self.param_loop(val, target)
            if loop is not None:
                extra = (*extra, ("param_loop", loop[0]), ("loop_var", loop[1]))
            if val.view is not None:
                # where the view was taken is where a fix often goes (`.data.view(...)`, or under no_grad); for an
                # item of a view (`b[:, 4] += ...` with `b = bias.view(3, -1)`), where that view was taken
                made = val
                m = _ITEM_OF_NAME.match(target)
                if m is not None and isinstance(base := st.env.get(m.group(1)), T) and base.view is not None:
                    made = base
                if made.view_site is not None and made.view_site.line != site.line \
                        and not any(r[0] == made.view_site for r in related):
                    related = (*related, (made.view_site,
                                          f"the view of the leaf is taken here ({made.view_op or 'view'})"))
            self.report(Hazard("leaf", form, site, stmt, op, target, related=related,
                               extra=(*extra, ("leaf_origin", origin), ("is_view", val.view is not None),
                                      *((("same_tensor", val.view_op),) if val.view is None and val.view_op else ()))))
            return
        if val.view == "multi" and grad_on and not val.maybe_tensor and (val.rg >= MAYBE or (
                operands_yes and val.origin != "iteration")):
            # (a write that makes one of several views require grad: for views the code made with split, unbind or
            # chunk; iterating a value taken for a tensor may as well be iterating a tuple of them)
            self.report(Hazard("view_multi", form, site, stmt, op, target, related=related,
                               extra=(*extra, ("view_op", val.view_op), ("of_leaf", val.leaf))))
            return
        # (a view made under no_grad of a tensor that did not require grad requires none itself: torch objects to
        # a write that would make it. A name that is such a view on one path and an activation that requires grad
        # on another is neither; one made to require grad, `y.requires_grad_()`, became a "nograd" view.)
        if (val.view == "nograd" or (val.view == "nograd_if" and operands_yes)) and grad_on:
            self.report(Hazard("view_nograd", form, site, stmt, op, target, related=related,
                               extra=(*extra, ("view_op", val.view_op), ("base_rg", val.view == "nograd"))))
            return
        if val.expanded is not None and not val.maybe_tensor and op.split("(", 1)[0] not in OVERLAP_ALLOWED \
                and (form != "setitem" or any(k == "overlap_index" for k, _v in extra)):
            # (whatever the grad mode: the write itself is refused, before anything could be saved or changed)
            self.report(Hazard("overlap", form, site, stmt, op, target,
                               related=(*related, (val.expanded, f"`{target}` is expanded here: several of its "
                                                                  f"elements are one memory location")),
                               extra=(*extra, ("expanded_site", val.expanded))))
            return
        if val.view == "fnview" and grad_on and (val.rg >= MAYBE or operands_rg) and not val.maybe_tensor:
            self.report(Hazard("view_fn", form, site, stmt, op, target, related=related,
                               extra=(*extra, ("view_op", val.view_op))))
            return
        self.wrote(val, st, site, op)
        saved = st.heap.saved
        recs: list[SaveRecord] = []
        for s in ordered(val.storages):
            for r in saved.get(s, ()):
                if r not in recs:
                    recs.append(r)
            if (of := self.instance_of.get(s)) is not None:
                iloop, s0, k = of  # an item of an index loop: what was saved of the list since, but of no other item
                for r in saved.get(s0, ()):
                    if r not in recs and iloop.mirrored.get((s0, r), k) == k:
                        recs.append(r)
        if len(val.storages) > 1:
            # a value that is one of several tensors (the arms of a branch, the layers a list may hold): an op that
            # saved one of them as its own output explains the write best (the others may be from other paths)
            recs.sort(key=lambda r: r.what != "its output")
        param_update = st.no_grad and any(s.param_of is not None for s in val.storages)
        held = bool(recs and self.dirty_inputs and val.storages & self.dirty_inputs)  # (see dirty_held)
        if recs and not st.allow_mutation and not param_update and not (
                self.version_kept and val.storages <= self.version_kept) and not self.unreached(site, recs):
            ex = extra
            if not val.leaf and not val.maybe_tensor and val.storages and all(
                    s.param_of is None and not s.leaf for s in val.storages):
                ex = (*ex, ("plain_tensor", True))  # `crit.weight` of a loss: no Parameter, the fix may rebind it
            if val.alias_of and form == "setitem" and val.alias_site is not None:
                # `out = x; out[i] = v`: the alias is where a copy was meant; report there, point at the write.
                ex = (*ex, ("alias_of", val.alias_of), ("alias_site", val.alias_site))
                related = ((site, f"{op} into `{target}` modifies `{val.alias_of}` here"), *related)
                site = self.alias_stmt.get(val.alias_site, site)
            if self.fed_back is not None:
                related = (*related, self.fed_back)
            h = Hazard("saved", form, site, stmt, op, target, tuple(recs), related, ex)
            if held:
                self.dirty_held.append((h, val, tuple(recs), st))
            else:
                self.report_saved(h, val, recs, st)
        for s in val.storages:
            saved.pop(s, None)
        owners = frozenset(s.param_of for s in val.storages if s.param_of is not None)
        if owners and not st.allow_mutation and param_step:
            # the module, and the parameter itself for a graph that saved it directly (`m.weight.mul(m.weight)`)
            owners |= frozenset(s for s in val.storages if s.param_of is not None)  # under allow_mutation_on_saved_tensors torch keeps a copy
            st.heap.steps = (*st.heap.steps, self.step_event(owners, site, stmt, f"in-place update of `{target}`", st))

    def item_place(self, sl: ast.expr, fr: Frame) -> tuple[Loop, int] | None:
        """The index loop and the place that `lst[i + c]` names on this pass (see common.Loop)."""
        place = affine_index(sl)
        if place is None:
            return None
        loop = next((lp for lp in reversed(fr.loops) if lp.index is not None and lp.index[0] == place[0]), None)
        return (loop, loop.step * loop.pass_no + place[1]) if loop is not None else None

    def report_saved(self, h: Hazard, val: T, recs: Sequence[SaveRecord], st: State) -> None:
        """Report a write into what ``recs`` saved, or keep it for a later backward when a backward that kept its
        graph has already been through every one of them (see ``spent``)."""
        if self.spent and not self.quiet:
            graphs: set[Any] = set()
            for r in recs:
                got = [self.spent.get((s, r)) for s in val.storages if r in st.heap.saved.get(s, ())]
                if not got or any(g is None for g in got):
                    break
                graphs.update(x for g in got if g is not None for x in g)
            else:
                mine = frozenset((o, s_) for (o, s_, _c) in val.prov)
                self.spent_writes.append((h, mine or frozenset(graphs)))
                return
        self.report(h)

    def wrote(self, val: T, st: State, site: Site, op: str) -> None:
        """Remember an in-place write to ``val``'s storages (its version moves; see stale_view)."""
        w = (self.stamp, site, op)
        wrote = st.heap.wrote
        for s in val.storages:
            wrote[s] = w

    def stale_view(self, v: T, st: State) -> tuple[Site, str, bool] | None:
        """One of several views made at stamp ``v.made`` whose storage was written in place since (by a write
        through any alias, or by an optimizer step or update of the parameter it views): where, by what, and
        whether it was a step.
        Every storage the view may be of must have been written: a view the analysis could not tell apart from
        another tensor (two storages) is not stale because the other one changed."""
        last: tuple[int, Site, str, bool] | None = None
        wrote = st.heap.wrote
        for s in v.storages:
            mine: tuple[int, Site, str, bool] | None = None
            w = wrote.get(s)
            if w is not None and w[0] > v.made:
                mine = (*w, False)
            if s.leaf or s.param_of is not None:
                for e in st.heap.steps:
                    if e.stamp > v.made and e.updates(s) and (mine is None or e.stamp > mine[0]):
                        mine = (e.stamp, e.inner or e.site, e.op, True)
            if mine is None:
                return None
            if last is None or mine[0] > last[0]:
                last = mine
        return (last[1], last[2], last[3]) if last is not None else None

    def unreached(self, site: Site, recs: list[SaveRecord]) -> bool:
        """The write at ``site`` is in a function whose backwards cannot reach the ops of ``recs`` (see .reach)."""
        if not site.path:
            return self.backward_reach().unreached(site, recs)
        # A write in another module's function, into what an op of that same function saved: whether what the op
        # made leaves that function is a question of its own text (`probs = torch.exp(lp).clamp_(0, 1)`, read only by
        # `torch.bernoulli(probs).byte()`: exp's node is reached by no backward, whoever calls the function).
        if any(r.site.path != site.path for r in recs):
            return False
        if site.path not in self._reach_of:
            self._reach_of[site.path] = self._module_reach(site.path)
        reach = self._reach_of[site.path]
        if reach is None:
            return False
        return reach.unreached(replace(site, path=""), [replace(r, site=replace(r.site, path=""), view=None)
                                                        for r in recs])

    def _module_reach(self, path: str) -> BackwardReach | None:
        ctx = self.loaded.get(path)
        src = ctx.source if ctx is not None else None
        tree = src.tree if src is not None else None
        return BackwardReach(tree, None, self.kb.get) if tree is not None else None

    def backward_reach(self) -> BackwardReach:
        if self._reach is None:
            self._reach = BackwardReach(self.tree, self._reach_resolve, self.kb.get)
        return self._reach

    def pure_helper(self, fi: FuncInfo) -> bool:
        """A function of the checked file defined once at its top level whose arguments reach nothing but its
        result (no backward, nothing kept: see reach.Flow.pure)."""
        if (fi.mod is not None and not fi.mod.is_root) or isinstance(fi.node, ast.Lambda) or fi.cls is not None:
            return False
        flow = self.backward_reach().helper(fi.node.name)
        return flow is not None and flow.node is fi.node and flow.pure()

    def _reach_resolve(self, name: str) -> tuple[ast.AST, ast.Module, str] | None:
        """A function this file imports from another module, with that module's tree (for .reach)."""
        v = self.module_get(self.root, name)
        if not isinstance(v, Func) or v.info.mod is None or v.info.mod.source is None:
            return None
        tree = v.info.mod.source.tree
        return (v.info.node, tree, v.info.mod.path) if tree is not None else None

    def save(self, val: Val, st: State, rec: SaveRecord) -> None:
        if not isinstance(val, T) or st.packed:
            return  # (what a pack hook kept is unpacked without a version check: no write makes it raise)
        saved = st.heap.saved
        for s in val.storages:
            have = saved.get(s, ())
            if len(have) < MAX_SAVES and rec not in have:
                saved[s] = (*have, rec)
                self.save_log.append((s, rec))
                if (of := self.instance_of.get(s)) is not None:
                    loop, s0, k = of  # an item of an index loop: the list's storage keeps the save too
                    base = saved.get(s0, ())
                    if len(base) < MAX_SAVES and rec not in base:
                        saved[s0] = (*base, rec)
                        loop.mirrored[(s0, rec)] = k
        if st.allow_mutation:
            self.am_saves.add(rec)

    def cutting(self, n: ast.AST, st: State, run: Callable[[], Val]) -> Val:
        """Evaluate the call or operator ``n`` (``run``); if its op cuts the graph, drop what its operands' ops saved
        (see ``cut``). The save log lives while the outermost call or operator runs."""
        mark, effects = len(self.save_log), self.effects
        self.call_depth += 1
        try:
            out = run()
            if self.cut_at is n:
                self.cut(n, mark, effects, st)
            return out
        finally:
            self.call_depth -= 1
            if not self.call_depth:
                self.save_log.clear()

    def kept_elsewhere(self, vals: Iterable[Val]) -> None:
        """Code the analysis cannot follow was handed these values: it may keep what the calls being watched
        computed beyond their results (see discarded)."""
        if self.watching and any(isinstance(v, (T, Seq, Obj)) for v in vals):
            for w in self.watching:
                w[1] = False

    def discarded(self, n: ast.expr, st: State, fr: Frame) -> Val:
        """Evaluate the call ``n``, whose result nobody keeps (``model(dummy)`` to build lazy layers, ``_ =
        model(x)``). What its ops saved for the graph of that result can never be unpacked: no backward can reach
        a graph whose output is dropped, so a later write into a weight it saved breaks nothing. Not when the
        call kept a tensor elsewhere: set an attribute of an object that existed before it (``self.out = y``),
        wrote in place into a tensor that did, handed tensors to code the analysis cannot follow, or was cut
        short (see kept_elsewhere, touched)."""
        watch: list[Any] = [next_id(), True]
        self.watching.append(watch)
        mark = len(self.save_log)
        self.call_depth += 1
        try:
            out = self.ev(n, st, fr)
            if watch[1] and len(self.save_log) > mark:
                self.drop_logged(mark, st)
            return out
        finally:
            self.watching.pop()
            self.call_depth -= 1
            if not self.call_depth:
                self.save_log.clear()

    def log_saves(self, saved: dict[Storage, tuple[SaveRecord, ...]], s: Storage,
                  recs: tuple[SaveRecord, ...]) -> None:
        """Add ``recs`` (a replayed call's saves) to what ``s`` saved, logged as :meth:`save` logs them."""
        have = saved.get(s, ())
        saved[s] = (*have, *recs)
        if self.call_depth:
            self.save_log.extend((s, r) for r in recs if r not in have)

    def cut(self, n: ast.AST, mark: int, effects: int, st: State) -> None:
        """``n``'s op cuts the graph (argmax, multinomial: the result never requires grad; binomial, ``//``:
        backward through it raises "not implemented"). What the ops written inside its operands saved can then never
        be unpacked: their results feed only ``n``, so no backward reaches them (``torch.binomial(n, prob /
        remainder)``, then ``remainder -= prob``). Not when the operands ran other code, wrote in place or bound a
        name (``:=``): a result could be kept elsewhere. ``mark`` and ``effects``: ``save_log``'s length and
        ``effects`` before the operands ran."""
        self.cut_at = None
        pure, self.pure_cut = self.pure_cut, None
        if self.effects != effects and not (pure is not None and pure[0] is n and pure[1] == effects):
            return  # (the operands ran other code; a pure helper's own run is the call itself, see Calls.call)
        if any(isinstance(x, ast.NamedExpr) for x in ast.walk(n)):
            return
        self.drop_logged(mark, st)

    def drop_logged(self, mark: int, st: State) -> None:
        """Forget the saves logged since ``mark``: no backward can reach the graph they were made for."""
        saved = st.heap.saved
        for s, rec in self.save_log[mark:]:
            have = saved.get(s)
            if have is not None and rec in have:
                rest = tuple(r for r in have if r is not rec)
                if rest:
                    saved[s] = rest
                else:
                    del saved[s]

    # ------------------------------------------------------------------ names & refs
    def lookup(self, name: str, st: State, fr: Frame) -> Val:
        v = st.env.get(name)
        if v is not None:
            return v
        if fr.func is not None and fr.func.closure is not None:
            v = fr.func.closure.get(name)
            if v is not None:
                return v
        mod = fr.func.mod if fr.func is not None and fr.func.mod is not None else self.mod
        v = self.module_get(mod, name)
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

    # ------------------------------------------------------------------ declared here, defined in a layer
    def module_get(self, mod: ModuleCtx, name: str) -> Val | None:
        raise NotImplementedError

    def dynamic_global(self, arg: ast.expr, v: Val, fr: Frame) -> Val | None:
        raise NotImplementedError

    def dist_value(self, d: Obj, name: str, pos: list[Val], st: State) -> Val:
        raise NotImplementedError

    def opaque_child(self, parent: Obj, name: str) -> Obj:
        raise NotImplementedError

    def rebind_expr(self, target: ast.expr, v: Val, st: State, fr: Frame) -> None:
        raise NotImplementedError

    def pack_hook(self, hook: Val, n: ast.AST, st: State, fr: Frame) -> None:
        raise NotImplementedError

    def set_requires_grad(self, t: T, flag: Val, node: ast.expr | None, st: State, fr: Frame) -> T:
        raise NotImplementedError

    def opaque_for(self, t: T) -> Obj:
        raise NotImplementedError

    def unknown_result(self, n: ast.Call) -> T:
        raise NotImplementedError

    def module_value(self, name: str) -> Val:
        raise NotImplementedError

    def stale_views(self, bound: dict[str, Val], n: ast.AST, st: State, display: str,
                    receiver_node: ast.AST | None, info: OpInfo | None) -> None:
        raise NotImplementedError

    def field_tensor(self, o: Obj, st: State) -> Val:
        raise NotImplementedError


    def exec_stmt(self, s: ast.stmt, st: State, fr: Frame) -> State | None:
        raise NotImplementedError

    def affordable(self, fi: FuncInfo) -> bool:
        raise NotImplementedError

    def _entries(self, pos: list[Val]) -> Val:
        raise NotImplementedError

    def _is_function_class(self, ci: ClassInfo) -> bool:
        raise NotImplementedError

    def _rebind(self, target: ast.expr, v: Val, st: State, fr: Frame) -> None:
        raise NotImplementedError

    def apply(self, info: OpInfo, pos: list[Val], kw: dict[str, Val], n: ast.AST, st: State, fr: Frame, *,
              display: str, form: str = "", target_text: str = "", extra: tuple[tuple[str, Any], ...] = (),
              module: Obj | None = None, in_seq: Obj | None = None, receiver_node: ast.AST | None = None) -> Val:
        raise NotImplementedError

    def assign(self, t: ast.expr, v: Val, st: State, fr: Frame, stmt: ast.stmt) -> None:
        raise NotImplementedError

    def autograd_apply(self, ci: ClassInfo, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                       fr: Frame) -> Val:
        raise NotImplementedError

    def backward(self, y: Val, kw: dict[str, Val], n: ast.AST, st: State, fr: Frame | None = None) -> None:
        raise NotImplementedError

    def binop(self, a: Val, b: Val, op: ast.operator, n: ast.AST, st: State, fr: Frame) -> Val:
        raise NotImplementedError

    def call(self, fv: Val, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame) -> Val:
        raise NotImplementedError

    def call_func(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
                  n: ast.AST | None) -> Val:
        raise NotImplementedError

    def ctx_of(self, m: Module) -> ModuleCtx:
        raise NotImplementedError

    def note_module(self, path: str) -> None:
        raise NotImplementedError

    def call_obj(self, o: Obj, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State, fr: Frame,
                 in_seq: Obj | None) -> Val:
        raise NotImplementedError

    def construct_module(self, info: OpInfo, pos: list[Val], kw: dict[str, Val], n: ast.AST) -> Obj:
        raise NotImplementedError

    def annotated_module(self, ann: ast.expr | None, fi: FuncInfo, depth: int = 0) -> Val | None:
        raise NotImplementedError

    def default_instance(self, cls: ClassInfo) -> Obj:
        raise NotImplementedError

    def elem(self, v: Val, node: ast.AST | None) -> Val:
        raise NotImplementedError

    def module_list(self, o: Obj, recurse: bool, named: bool, limit: int) -> list[Val] | None:
        raise NotImplementedError

    def ev(self, node: ast.expr | None, st: State, fr: Frame) -> Val:
        raise NotImplementedError

    def ev_nograd(self, node: ast.expr, st: State, fr: Frame) -> Val:
        raise NotImplementedError

    def exec_block(self, stmts: Iterable[ast.stmt], st: State | None, fr: Frame, module: bool = False) -> State | None:
        raise NotImplementedError

    def exec_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef, st: State, fr: Frame) -> State | None:
        raise NotImplementedError

    def class_of(self, o: Obj) -> Val:
        raise NotImplementedError

    def getattr(self, base: Val, attr: str, n: ast.AST | None, st: State) -> Val:
        raise NotImplementedError

    def inline(self, fi: FuncInfo, pos: list[Val], kw: dict[str, Val], st: State, fr: Frame,
               defaults_only: bool = False) -> Val:
        raise NotImplementedError

    def instantiate(self, ci: ClassInfo, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                    fr: Frame) -> Val:
        raise NotImplementedError

    def module_like(self, cls: ClassInfo) -> bool:
        raise NotImplementedError

    def param_attrs(self, cls: ClassInfo) -> frozenset[str]:
        raise NotImplementedError

    def nn_module_like(self, cls: ClassInfo) -> bool:
        raise NotImplementedError

    def module_param(self, obj: Obj, name: str, st: State | None = None, forward: bool = False) -> T:
        raise NotImplementedError

    def is_callable_object(self, v: Val) -> bool:
        raise NotImplementedError

    def new_tensor(self, inputs: list[Val], st: State, desc: str, min_rg: int = NO) -> T:
        raise NotImplementedError

    def ng_only(self, fi: FuncInfo) -> bool:
        raise NotImplementedError

    def am_only(self, fi: FuncInfo) -> bool:
        raise NotImplementedError

    def params_elem(self, p: Params) -> T:
        raise NotImplementedError

    def backward_write_hazard(self, wsite: Site, wstmt: Site, op: str, name: str, saves: tuple[SaveRecord, ...],
                              related: tuple[tuple[Site, str], ...]) -> Hazard:
        raise NotImplementedError

    def obj_method(self, o: Obj, name: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                   fr: Frame) -> Val:
        raise NotImplementedError

    def owners_of(self, v: Val) -> frozenset[Any]:
        raise NotImplementedError

    def reach(self, obj: Obj) -> frozenset[Any]:
        raise NotImplementedError

    def super_method(self, sup: Super, name: str, pos: list[Val], kw: dict[str, Val], n: ast.Call, st: State,
                     fr: Frame) -> Val:
        raise NotImplementedError


def _inside(site: Site, fi: FuncInfo) -> bool:
    """Is ``site`` in the body of ``fi``?"""
    mod = fi.mod
    path = "" if mod is None or mod.is_root else mod.path
    if site.path != path and not (site.path and mod is not None and site.path == mod.path):
        return False
    node = fi.node
    return node.lineno <= site.line <= (getattr(node, "end_lineno", None) or node.lineno)
