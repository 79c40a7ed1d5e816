"""The abstract interpreter over the stdlib ``ast``.

It executes a module abstractly: module-level code first (inlining calls into local functions and classes,
so a hazard that spans a caller and a callee is seen with the caller's tensors), then every function and
method on its own with unknown arguments. Tensors carry may-alias storages; the heap records, per storage,
which op saved it for backward; an in-place op on a storage with live saves is a hazard. Loops run twice
(the second iteration sees the first's state), branches are joined (a hazard on any path counts).

The interpreter is split by layer: :mod:`.core` (state, positions, hazards, names), :mod:`.statements`,
:mod:`.expressions`, :mod:`.calls`, :mod:`.nn_modules`, :mod:`.functions` and :mod:`.training`; this module
assembles them and drives one file's analysis.
"""

from __future__ import annotations

import ast
import bisect
import itertools
import re
from collections import Counter
from collections.abc import Callable

from gradguard.analysis.calls import Calls
from gradguard.analysis.common import (
    FOREIGN_PER_FUNCTION,
    GRAPH_MARKERS,
    INT_NAME,
    STANDALONE_DEPTH,
    Budget,
    Frame,
    annotated_tensor,
    scope_nodes,
)
from gradguard.analysis.core import AnalyzerCore
from gradguard.analysis.expressions import Expressions
from gradguard.analysis.functions import Functions
from gradguard.analysis.hazards import Hazard
from gradguard.analysis.imports import Imports
from gradguard.analysis.incremental import (
    Chunk,
    Entry,
    EntryKey,
    FileMemo,
    Plan,
    chunk_index,
    chunks_of,
    reach_chunks,
)
from gradguard.analysis.nn_modules import NNModules
from gradguard.analysis.state import Heap, State
from gradguard.analysis.statements import Statements
from gradguard.analysis.training import Training
from gradguard.analysis.values import (
    MAYBE,
    NO,
    UNKNOWN,
    UNKNOWN_NUM,
    ClassInfo,
    ClassV,
    Const,
    FuncInfo,
    Obj,
    Seq,
    T,
    Val,
    fresh,
)
from gradguard.project.context_scan import allow_mutation_only, no_grad_only
from gradguard.project.grad_uses import ArgShape, passes

_PRIVATE_NAME = re.compile(r"\b_\w+")


_LOSS_WORDS = frozenset({"loss", "losses"})  # a word of a loss helper's name (`soft_dice_loss`, `loss_fn`)


def _references(lines: list[str]) -> Counter[str]:
    """How often each private name (``_helper``, ``self._helper``) occurs in the file's text: one regex pass,
    a fraction of a walk over the tree (comments and strings that name it count too, which only errs toward
    treating a helper as used)."""
    out: Counter[str] = Counter()
    for ln in lines:
        if "_" in ln:
            out.update(_PRIVATE_NAME.findall(ln))
    return out


_BARE_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
_SELF_CALL = re.compile(r"\bself\.([A-Za-z_]\w*)\s*\(")


def _calls(lines: list[str]) -> tuple[Counter[str], Counter[str]]:
    """How often each name is called bare (``helper(...)``) and on ``self`` (``self.helper(...)``) in ``lines``."""
    bare: Counter[str] = Counter()
    on_self: Counter[str] = Counter()
    for ln in lines:
        if "(" in ln:
            bare.update(_BARE_CALL.findall(ln))
            if "self." in ln:
                on_self.update(_SELF_CALL.findall(ln))
    return bare, on_self


def _called_helper(fi: FuncInfo, calls: tuple[Counter[str], Counter[str]], lines: list[str],
                   in_class: dict[int, Counter[str]]) -> bool:
    """A public helper this file calls (a free function called by name, a method called on ``self`` in its own
    class) runs in the contexts its callers give it, which their analyses follow into it, as a private helper does
    (see below). Run alone with made-up arguments it would see contexts that never happen (a batch of data taken
    for a tensor that requires grad). Methods torch calls (``forward``, hooks) and dunder methods always run alone.
    ``in_class``: the ``self.name(...)`` calls counted per class body (filled on demand)."""
    node = fi.node
    if isinstance(node, ast.Lambda):
        return False
    name = node.name
    if name.startswith("__") or name in _TORCH_CALLED or name.startswith("_"):
        return False
    if fi.cls is not None:
        cnode = fi.cls.node
        counts = in_class.get(id(cnode))
        if counts is None:
            counts = in_class[id(cnode)] = _calls(lines[cnode.lineno - 1:cnode.end_lineno or cnode.lineno])[1]
    else:
        counts = calls[0]
    if not counts.get(name):
        return False
    end = getattr(node, "end_lineno", None) or node.lineno
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    own = _calls(lines[start - 1:end])
    return counts[name] > (own[1] if fi.cls is not None else own[0]).get(name, 0) and not _sets_foreign_attrs(
        node, "\n".join(lines[start - 1:end]))


_FOREIGN_MEMO: dict[str, bool] = {}  # a function's text -> _sets_foreign_attrs (an edit re-checks the others as they were)


def _sets_foreign_attrs(node: ast.FunctionDef | ast.AsyncFunctionDef, text: str) -> bool:
    """Does the function set an attribute of an object other than ``self`` (``m.bias = nn.Parameter(...)``)? An
    initializer of objects it is handed (a detection head's biases, a model from a config) runs alone too: what its
    callers pass is often an object the analysis sees only in part. ``text``: the function's source, which
    decides the answer (remembered by it)."""
    got = _FOREIGN_MEMO.get(text)
    if got is None:
        if len(_FOREIGN_MEMO) > 20_000:
            _FOREIGN_MEMO.clear()
        got = _FOREIGN_MEMO[text] = _walk_sets_foreign_attrs(node)
    return got


def _walk_sets_foreign_attrs(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for n in ast.walk(node):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, ast.Attribute) and not (isinstance(t.value, ast.Name) and t.value.id == "self"):
                    return True
    return False


def _loss_helper(fi: FuncInfo) -> bool:
    """A loss helper by its name (`dice_loss`, `compute_loss`): what it returns is what gets differentiated."""
    return not isinstance(fi.node, ast.Lambda) and not _LOSS_WORDS.isdisjoint(fi.node.name.lower().split("_"))


# methods torch (or Lightning, or the autograd engine) calls itself: they run alone whoever else calls them
_TORCH_CALLED = frozenset({"forward", "backward", "setup_context", "jvp", "vjp", "training_step", "validation_step",
                           "test_step", "predict_step", "step", "closure", "extra_repr"})


def _passed_through(helpers: list[FuncInfo], lines: list[str], functions: list[FuncInfo]) -> set[ast.AST]:
    """The free functions of ``helpers`` that the file only calls as a whole statement, ``return helper(...)`` or
    ``helper(...)`` (no other mention outside their own text): torchopt's ``scale_by_rms(...)`` is
    ``return _scale_by_rms(...)``. A caller run alone does not follow such a call (its result leaves the caller
    untouched, see ``Calls._unobserved``), and a helper does not run alone (its callers give it its contexts), so
    its body (and the closures it returns) would be analysed nowhere: the first such call is followed."""
    free = {fi.node.name: fi.node for fi in helpers if fi.cls is None and not isinstance(fi.node, ast.Lambda)}
    if not free:
        return set()
    alt = "|".join(sorted(map(re.escape, free)))
    mention = re.compile(rf"(?<![\w.])({alt})\b")
    statement = re.compile(rf"^[ \t]*(?:return[ \t]+)?({alt})[ \t]*\(", re.M)

    def counts(text: str) -> tuple[Counter[str], Counter[str]]:
        return Counter(mention.findall(text)), Counter(statement.findall(text))

    text = "\n".join(lines)
    mentions, statements = counts(text)
    # a call that is not its statement's whole value (`helper(x).sum().backward()`, `helper(x) + 1`), or one outside
    # the file's functions (the module's own script, `if __name__ == "__main__": main()`, follows every call it
    # makes), is a use: not passed through
    spans = sorted((fi.node.lineno, getattr(fi.node, "end_lineno", None) or fi.node.lineno) for fi in functions
                   if not isinstance(fi.node, ast.Lambda))
    starts = [a for a, _b in spans]
    offsets = list(itertools.accumulate((len(ln) + 1 for ln in lines), initial=0))
    for m in statement.finditer(text):
        line = bisect.bisect_right(offsets, m.start())
        i = bisect.bisect_right(starts, line) - 1
        if i < 0 or spans[i][1] < line or not _call_ends_statement(text, m.end() - 1):
            statements[m.group(1)] -= 1
    out: set[ast.AST] = set()
    for name, node in free.items():
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])  # type: ignore[union-attr]
        own_m, own_s = counts("\n".join(lines[start - 1:getattr(node, "end_lineno", None) or node.lineno]))
        outside = mentions[name] - own_m[name]
        if outside and outside == statements[name] - own_s[name]:
            out.add(node)
    return out


def _call_ends_statement(text: str, open_at: int) -> bool:
    """Does the call whose ``(`` is at ``open_at`` end its line's statement (only a comment after its ``)``)?"""
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                end = text.find("\n", i)
                rest = text[i + 1:end if end >= 0 else len(text)].strip()
                return not rest or rest.startswith("#")
    return False


def _private_helper(fi: FuncInfo, refs: Counter[str], lines: list[str]) -> bool:
    """A private helper (``_name``) used elsewhere in the file runs in the contexts its callers give it, which the
    analyses of those callers follow into it; analysing it alone with made-up arguments would only add contexts
    that never happen (an ``inplace`` flag its callers set only when autograd does not record)."""
    node = fi.node
    if isinstance(node, ast.Lambda):
        return False
    name = node.name
    if not name.startswith("_") or name.startswith("__"):
        return False
    end = getattr(node, "end_lineno", None) or node.lineno
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    own = sum(_PRIVATE_NAME.findall(ln).count(name) for ln in lines[start - 1:end])  # its def and its own uses
    return refs.get(name, 0) > own


def state_parameters(node: ast.FunctionDef | ast.AsyncFunctionDef,
                     defaults: dict[str, Val]) -> list[tuple[str, tuple[int, ...], ast.Return]]:
    """The parameters a recurrent step reads its state from and returns it through: ``(name, where, return)`` with
    ``where`` the index path of the state in the returned value (``()`` for the value itself). A parameter
    qualifies when it defaults to None, the body unpacks or copies it into names (``Si, Zi = memory``,
    ``h = hx``) and a ``return`` gives those names back, in that order, as one item of the returned tuple, or as the
    whole value when the step also takes a required input (``forward(x, hx=None)``)."""
    a = node.args
    # the step's input: a parameter without a default (besides ``self``); without one, a parameter returned
    # whole is an alternative input (``inputs_embeds=None``), not a state
    required = len([*a.posonlyargs, *a.args]) - len(a.defaults) > 1 or any(d is None for d in a.kw_defaults)
    out: list[tuple[str, tuple[int, ...], ast.Return]] = []
    index: tuple[dict[str, set[tuple[str, ...]]], list[ast.Return]] | None = None
    for name, d in defaults.items():
        if not (isinstance(d, Const) and d.known and d.value is None):
            continue
        if index is None:
            index = _state_index(node)
        shapes = index[0].get(name)
        if not shapes:
            continue
        for x in index[1]:
            assert x.value is not None
            if _names(x.value) in shapes and required:
                out.append((name, (), x))
                break
            if isinstance(x.value, ast.Tuple):
                hit = next((i for i, e in enumerate(x.value.elts) if _names(e) in shapes), None)
                if hit is not None:
                    out.append((name, (hit,), x))
                    break
    return out


def _state_index(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[dict[str, set[tuple[str, ...]]], list[ast.Return]]:
    """The function's own copies of a name into names (``Si, Zi = memory``: memory -> {("Si", "Zi")}) and its
    returns of a value, in the order scope_nodes gives them (read once per function: cached on the tree it
    describes)."""
    got = getattr(node, "_gg_state_index", None)
    if got is None:
        copies: dict[str, set[tuple[str, ...]]] = {}
        returns: list[ast.Return] = []
        for x in scope_nodes(node):
            if isinstance(x, ast.Assign) and isinstance(x.value, ast.Name):
                for t in x.targets:
                    names = _names(t)
                    if names:
                        copies.setdefault(x.value.id, set()).add(names)
            elif isinstance(x, ast.Return) and x.value is not None:
                returns.append(x)
        got = (copies, returns)
        node._gg_state_index = got  # type: ignore[union-attr]
    return got


def _names(e: ast.expr) -> tuple[str, ...] | None:
    """``h`` -> ("h",); ``(a, b)`` or ``[a, b]`` of plain names -> ("a", "b"); anything else -> None."""
    if isinstance(e, ast.Name):
        return (e.id,)
    if isinstance(e, (ast.Tuple, ast.List)) and e.elts and all(isinstance(x, ast.Name) for x in e.elts):
        return tuple(x.id for x in e.elts)  # type: ignore[attr-defined]
    return None


def _at(v: Val, where: tuple[int, ...]) -> Val | None:
    for i in where:
        if not isinstance(v, Seq) or v.items is None or i >= len(v.items):
            return None
        v = v.items[i]
    return v


_DEF_NAME = re.compile(r"\s*(?:async\s+)?def\s+(\w+)")


def _ng_only_lines(lines: list[str], seeds: frozenset[int] = frozenset(),
                   vetoed: Callable[[set[str], set[str]], set[str]] | None = None,
                   scanned: set[int] | None = None) -> set[int]:
    """The defs of ``lines`` that only run under no_grad. ``vetoed(names)``: which of these names other files use
    outside no_grad (the file's own uses are not all of them: `agent.py` calls `model.calculate_fractions(...)` with
    grad on, `model.py` only under no_grad). ``scanned``: the answer without seeds and vetoes, when a scan of
    these lines already gave it."""
    if seeds or any(("no_grad" in ln or "inference_mode" in ln or "set_grad_enabled" in ln or "(ctx" in ln)
                    for ln in lines):
        got = set(scanned) if scanned is not None and not seeds else no_grad_only(lines, seeds)
        if got and vetoed is not None:
            defs = [(lines[ln - 1], m.group(1)) for ln in got if 0 < ln <= len(lines)
                    and (m := _DEF_NAME.match(lines[ln - 1]))]
            top = {name for text, name in defs if not text[:1].isspace()}  # module-level functions
            veto = frozenset(vetoed({name for _text, name in defs}, top))
            if veto:
                got = no_grad_only(lines, seeds, veto)
        return got
    return set()


def unpacked(node: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """Names the function's own body uses as lists of tensors, not as one: it unpacks them into several targets
    (`z1, z2 = z`), or indexes them in step with a list of modules (`x[i] = self.m[i](x[i])`, a detection head's
    per-level convolutions on the feature maps it was given)."""
    got: frozenset[str] | None = getattr(node, "_gg_unpacked", None)
    if got is None:
        names: set[str] = set()
        for x in scope_nodes(node):
            if isinstance(x, ast.Assign) and isinstance(x.value, ast.Name) \
                    and any(isinstance(t, (ast.Tuple, ast.List)) for t in x.targets):
                names.add(x.value.id)
            elif isinstance(x, ast.Call) and isinstance(x.func, ast.Subscript) \
                    and isinstance(x.func.value, ast.Attribute) and isinstance(x.func.slice, ast.Name):
                # `self.m[i](x[i])`: the i-th module on the i-th input
                idx = x.func.slice.id
                names.update(a.value.id for a in x.args if isinstance(a, ast.Subscript)
                             and isinstance(a.value, ast.Name) and isinstance(a.slice, ast.Name) and a.slice.id == idx)
        got = frozenset(names)
        node._gg_unpacked = got  # type: ignore[union-attr]  # cached on the tree it describes
    return got


def _am_only_lines(lines: list[str]) -> set[int]:
    if any("allow_mutation_on_saved_tensors" in ln for ln in lines):
        return allow_mutation_only(lines)
    return set()


def _packed_only(tree: ast.Module, lines: list[str]) -> frozenset[str]:
    """Names of functions only ever passed to a non-reentrant checkpoint (``checkpoint(fn, x, use_reentrant=False)``):
    what they save goes through its pack hook, never version-checked (see ``State.packed``). Every occurrence of the
    name in the text, but its ``def``, must be such an argument."""
    if not any("use_reentrant" in ln for ln in lines):
        return frozenset()
    passed: Counter[str] = Counter()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and n.args and (
                (isinstance(n.func, ast.Name) and n.func.id == "checkpoint")
                or (isinstance(n.func, ast.Attribute) and n.func.attr == "checkpoint")) \
                and any(k.arg == "use_reentrant" and isinstance(k.value, ast.Constant) and k.value.value is False
                        for k in n.keywords):
            a = n.args[0]
            name = a.id if isinstance(a, ast.Name) else a.attr if isinstance(a, ast.Attribute) else None
            if name is not None:
                passed[name] += 1
    out = set()
    for name, k in passed.items():
        word = re.compile(rf"(?<!def )\b{re.escape(name)}\b")
        if sum(len(word.findall(ln)) for ln in lines if name in ln) == k:
            out.add(name)
    return frozenset(out)


MAX_ESCAPED = 16  # nested defs run on their own after one function's run (see Analyzer.run_escaped)


class Analyzer(Statements, Imports, Expressions, Calls, NNModules, Functions, Training, AnalyzerCore):
    _ng_only: set[int] | None = None
    _file_ng: set[int] | None = None
    _ng_inputs: tuple[frozenset[int], set[int] | None] | None = None
    _am_only: set[int] | None = None
    _packed_names: frozenset[str] | None = None
    context_deps: set[str]  # files whose uses of a name put one of this analysis's functions under no_grad

    memo_in: FileMemo | None = None  # the last analysis of this file (incremental re-analysis), if any
    memo_out: FileMemo | None = None  # this analysis, for the next one (when recording)
    reused_deps: tuple[str, ...] = ()  # modules that replayed function runs read

    # ------------------------------------------------------------------ driver
    def run(self, record: bool = False) -> list[Hazard]:
        """Analyse the file. ``record``: keep a :class:`FileMemo` (``memo_out``) so the next analysis of an edited
        text replays the function runs the edit cannot change (``memo_in``, see :mod:`.incremental`)."""
        self.context_deps = set()
        st = State({}, Heap())
        fr = Frame(None, 0)
        if record:  # what the module's own run computes and caches is reused by function runs: record what it read
            self.reach_lines, self.reach_names = set(), set()
        self.script_calls = {}
        try:
            self.exec_block(self.tree.body, st, fr, module=True)
        except Budget:
            pass  # exec_stmt noted where (see AnalyzerCore.truncated)
        finally:
            self.reach_lines = self.reach_names = None
            script_calls, self.script_calls = self.script_calls, None
        try:
            self.run_escaped()  # the closures the module's own code made (`update = scale_by_rms()`)
        except Budget:
            pass
        chunks = chunks_of(self.tree, self.lines) if record else []
        starts, names = chunk_index(chunks)
        plan = None
        if record:
            self.memo_out = FileMemo(chunks, self.file_facts(), self._context_rel(chunks, starts), 0)
            plan = self._plan(self.memo_out)
        refs = _references(self.lines)
        calls = _calls(self.lines)
        in_class: dict[int, Counter[str]] = {}
        helpers = [fi for fi in self.functions if _private_helper(fi, refs, self.lines) or (
            _called_helper(fi, calls, self.lines, in_class) and not _loss_helper(fi)
            and (fi.node.lineno not in self._file_ng_only() or not self._called_elsewhere(fi)))]
        # (a loss helper's arguments are what gets differentiated, whoever calls it; a function another file calls
        # with grad on is that file's to give contexts to, and this file's to report in: it runs alone too, unless
        # this file also calls it with grad on, which gives it that context here)
        skip = {id(fi) for fi in helpers}
        if helpers:
            # (helpers whose every call a caller run alone does not follow: the first such call is followed)
            self.pass_through = _passed_through(helpers, self.lines, self.functions)
        for fi in list(self.functions):
            if id(fi) in skip:
                continue
            if self._run_by_script(fi, script_calls):
                continue
            key = self._entry_key(fi, chunks, starts) if record else None
            if key is not None and plan is not None and self._replay(plan, key):
                continue
            self.budget = max(self.budget, 20_000)
            self.foreign_used, self.foreign_limit = 0, FOREIGN_PER_FUNCTION
            if key is not None:
                self.reach_lines, self.reach_names, self.entry_log = set(), set(), []
                self.reach_unknown = False
            try:
                self.standalone(fi)
            except Budget:
                continue
            finally:
                if key is not None and self.memo_out is not None:
                    assert self.reach_lines is not None and self.reach_names is not None
                    reach = reach_chunks(chunks, starts, names, self.reach_lines, self.reach_names)
                    # (-1: a chunk no edit keeps, so that a run that reused what it cannot trace is run again)
                    self.memo_out.entries[key] = Entry(tuple(self.entry_log or ()),
                                                       reach | {-1} if self.reach_unknown else reach)
                self.reach_lines = self.reach_names = self.entry_log = None
        return sorted(self.hazards.values(), key=lambda h: (h.site.line, h.site.col))

    def _run_by_script(self, fi: FuncInfo, script_calls: dict[ast.AST, bool]) -> bool:
        """A method (a module's forward, the `forecast` it calls) that this file's own script runs, every time with
        inputs the analysis knows (made here: `model(torch.randn(8, 24, 3))`), of a class no other workspace file
        uses: the script is its whole program, and what the script's calls found is what torch does with it. Run
        alone, it would take its inputs for tensors that may require grad, which no call gives it (an input
        normalised in place, `x_enc /= stdev`, is data here). (Another method that calls it and that the script
        does not run still runs it, with what that method passes.)"""
        node = fi.node
        if fi.cls is None or isinstance(node, ast.Lambda) or node.name == "__init__" \
                or not script_calls.get(node) or self.truncated is not None:
            return False
        return not (self.project is not None and self.file
                    and self.project.callers.mentioned_elsewhere(fi.cls.name, self.file))

    def dispose(self) -> None:
        """Break the reference cycles the analysis built (a class's methods and their class, a module's names
        and their functions' module, instances and their classes), so that when it is dropped its objects and the
        syntax tree they point into go at once, by reference counting. Otherwise the editor's re-checks leave one
        tree per keystroke to the cyclic garbage collector, whose pauses (100+ ms for a 5,000-line file's tree)
        land on a later keystroke."""
        for ctx in (self.root, *self.loaded.values()):
            ctx.env.clear()
        for ci in self.made_classes:
            ci.methods.clear()
            ci.attrs.clear()
            ci.bases.clear()
        for fi in self.made_funcs:
            fi.closure = None
        for cache in (self.default_instances, self.summaries, self.footprints, self.opaque_objs, self.defaults_cache, self.hazards,
                      self.cache_reach):
            cache.clear()
        self.functions.clear()
        self.classes.clear()
        self.made_classes.clear()
        self.made_funcs.clear()
        self.__dict__.clear()  # closures made during the run (cached calls, callbacks) may still point at it

    def file_facts(self) -> tuple[object, ...]:
        """What every function run depends on that no single chunk holds (the device its text settles, too, and the
        functions only a non-reentrant checkpoint runs)."""
        return (self.graph_file, self.file, self.kb.device, self.packed_names)

    def _context_rel(self, chunks: list[Chunk], starts: list[int]) -> dict[int, frozenset[int]]:
        """Per chunk, its lines (relative to its start) that only run under no_grad (positive) or only inside
        allow_mutation_on_saved_tensors (negative): an edit elsewhere (a caller) can move them."""
        ng_only = self._own_ng_only()
        if self._am_only is None:
            self._am_only = _am_only_lines(self.lines)
        out: dict[int, set[int]] = {}
        for sign, lines in ((1, ng_only), (-1, self._am_only)):
            for ln in lines:
                i = bisect.bisect_right(starts, ln) - 1
                if i >= 0:
                    out.setdefault(i, set()).add(sign * (ln - chunks[i].start + 1))
        return {i: frozenset(v) for i, v in out.items()}

    def _plan(self, new: FileMemo) -> Plan | None:
        """How the last analysis' memo maps onto this one (None: nothing of it can be replayed)."""
        old = self.memo_in
        if old is None or old.kind_key != new.kind_key:
            return None
        plan = Plan(old, new.chunks)
        if not plan.usable:
            return None
        rel = new.ng_rel
        if any(old.ng_rel.get(o, frozenset()) != rel.get(n, frozenset()) for n, o in plan.new_to_old.items()):
            return None  # what runs under no_grad moved in a def the edit did not touch: a caller changed
        return plan

    @staticmethod
    def _entry_key(fi: FuncInfo, chunks: list[Chunk], starts: list[int]) -> EntryKey | None:
        node = fi.node
        if isinstance(node, ast.Lambda) or (fi.mod is not None and not fi.mod.is_root):
            return None
        i = bisect.bisect_right(starts, node.lineno) - 1
        if i < 0 or node.lineno > chunks[i].end:
            return None
        return i, node.lineno - chunks[i].start, node.name

    def _replay(self, plan: Plan, key: EntryKey) -> bool:
        """Replay the function run ``key`` from the last analysis when the edit cannot have changed it."""
        e = plan.reusable(key)
        moved = plan.moved(e, self.file) if e is not None else None
        if moved is None:
            return False
        hazards, reach = moved
        self.reused_deps = plan.old.deps
        for h in hazards:
            k = h.key()
            if k not in self.hazards:
                self.hazards[k] = h
        assert self.memo_out is not None
        self.memo_out.entries[key] = Entry(hazards, reach)
        return True

    @property
    def graph_file(self) -> bool:
        """Does this file build or train autograd graphs (modules, Functions, backward, parameters, optimizers)?"""
        if self._graph_file is None:
            self._graph_file = any(self.module_like(c) for c in self.classes) or any(
                k in ln for ln in self.lines for k in GRAPH_MARKERS)
        return self._graph_file

    def ng_only(self, fi: FuncInfo) -> bool:
        node = fi.node
        if isinstance(node, ast.Lambda):
            return False
        if fi.cls is not None and node.name in ("forward", "setup_context") \
                and fi.cls.find_method("setup_context") is not None:
            return True  # an autograd.Function's forward in the newer form (no ctx): autograd runs it with grad off
        mod = fi.mod or self.root
        src = mod.source
        if src is None:
            return node.lineno in self._own_ng_only()
        # What the workspace's other files do is part of the answer: it is kept for one project generation, with
        # the files it read, which every analysis that uses it depends on.
        gen = self.project.generation if self.project is not None and not src.library else 0
        if src._ng_only is None or src.extra.get("ng_only_generation") != gen:
            tree = src.tree
            outer, self.context_deps = self.context_deps, set()
            try:
                src._ng_only = _ng_only_lines(src.lines, self._ng_seeds(tree, src.library, src.path) if tree is not None
                                              else frozenset(), None if src.library else self._used_elsewhere(src.path))
                src.extra["ng_only_generation"] = gen
                src.extra["ng_only_deps"] = frozenset(self.context_deps)
            finally:
                self.context_deps = outer | self.context_deps
        else:
            deps = src.extra.get("ng_only_deps")
            if isinstance(deps, frozenset):
                self.context_deps.update(deps)
        return node.lineno in src._ng_only

    def _own_ng_only(self) -> set[int]:
        """The checked file's defs that only run under no_grad (computed once per analysis)."""
        if self._ng_only is None:
            seeds, scanned = self._own_ng_inputs()
            self._ng_only = _ng_only_lines(self.lines, seeds, self._used_elsewhere(self.file), scanned)
        return self._ng_only

    def _file_ng_only(self) -> set[int]:
        """The checked file's defs that only run under no_grad as far as its own code calls them: referenced only
        under no_grad, or from code that other files only run under no_grad (the seeds); whether other files call
        them with grad on is left out."""
        if self._file_ng is None:
            seeds, scanned = self._own_ng_inputs()
            self._file_ng = _ng_only_lines(self.lines, seeds, None, scanned)
        return self._file_ng

    def _own_ng_inputs(self) -> tuple[frozenset[int], set[int] | None]:
        """The seeds of the checked file's no-grad-only scan, and the scan without seeds or vetoes when the
        workspace index already made it of this very text (the file being typed in); once per analysis."""
        if self._ng_inputs is None:
            seeds = self._ng_seeds(self.tree, False, self.file)
            scanned = self.project.callers.ng_only_of(self.file, self.lines) \
                if self.project is not None and self.file and not seeds else None
            self._ng_inputs = (seeds, scanned)
        return self._ng_inputs

    def _ng_seeds(self, tree: ast.Module, library: bool, path: str = "") -> frozenset[int]:
        """The defs in ``tree`` that the workspace only ever uses under no_grad, from other files too: functions
        and methods by name; a class's ``forward`` when its instances are only called under no_grad."""
        if self.project is None or library:
            return frozenset()
        index = self.project.callers
        out: set[int] = set()

        def only(name: str, is_class: bool, home: str = "") -> bool:
            if not index.only_under_no_grad(name, is_class, home):
                return False
            self.context_deps.update(index.witnesses(name, is_class, home))
            return True

        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                whole = only(node.name, True, path)
                for m in node.body:
                    if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    if m.name in ("forward", "__call__"):
                        if whole:
                            out.add(m.lineno)
                    elif not m.name.startswith("__") and only(m.name, False):
                        out.add(m.lineno)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and only(node.name, False, path):
                out.add(node.lineno)
        return frozenset(out)

    def _called_elsewhere(self, fi: FuncInfo) -> bool:
        """Does a workspace file other than ``fi``'s call ``fi``'s name outside no_grad? (That file is a dependency of
        the answer.)"""
        src = fi.mod.source if fi.mod is not None and not fi.mod.is_root else None
        path = src.path if src is not None else self.file
        if self.project is None or not path or isinstance(fi.node, ast.Lambda):
            return False
        top_level = fi.node.col_offset == 0
        files = self.project.callers.used_outside(fi.node.name, path, top_level=top_level)
        self.context_deps.update(files or self.project.callers.siblings(fi.node.name, path, top_level))
        return bool(files)

    def _used_elsewhere(self, path: str) -> Callable[[set[str], set[str]], set[str]] | None:
        """A function from names (and those of them defined at module level) to those of them that workspace files
        other than ``path`` use outside no_grad (None without a project)."""
        if self.project is None or not path:
            return None
        index = self.project.callers

        def vetoed(names: set[str], top: set[str]) -> set[str]:
            out = set()
            for name in names:
                files = index.used_outside(name, path, top_level=name in top)
                if files:
                    out.add(name)
                    self.context_deps.update(files)
                else:
                    self.context_deps.update(index.siblings(name, path, top_level=name in top))
            return out

        return vetoed

    def differentiated(self, fi: FuncInfo) -> bool:
        """Does the workspace differentiate what ``fi`` returns (by its name, :mod:`gradguard.project.grad_uses`), or
        is it a loss helper by name? Then its arguments may require grad, as a module's inputs may, in whatever file
        it is defined."""
        node = fi.node
        if isinstance(node, ast.Lambda):
            return False
        if _loss_helper(fi):
            return True  # a loss helper (`dice_loss`, `compute_loss`): what it returns is what gets differentiated
        if self.project is None or (fi.mod is not None and fi.mod.source is not None and fi.mod.source.library):
            return False
        files = self.project.callers.differentiated(node.name)
        self.context_deps.update(files)
        return bool(files)

    def _witness_calls(self, fi: FuncInfo) -> frozenset[ArgShape] | None:
        """How the workspace calls ``fi`` where it differentiates the result (see :meth:`differentiated`); None
        when every parameter may be passed (a loss helper by its name, no such call known)."""
        node = fi.node
        if isinstance(node, ast.Lambda) or _loss_helper(fi) or self.project is None:
            return None
        return self.project.callers.differentiated_calls(node.name) or None

    def am_only(self, fi: FuncInfo) -> bool:
        """Only ever called inside ``allow_mutation_on_saved_tensors()``."""
        node = fi.node
        if isinstance(node, ast.Lambda):
            return False
        src = (fi.mod or self.root).source
        if src is None:
            if self._am_only is None:
                self._am_only = _am_only_lines(self.lines)
            return node.lineno in self._am_only
        if src._am_only is None:
            src._am_only = _am_only_lines(src.lines)
        return node.lineno in src._am_only

    def packed_only(self, fi: FuncInfo) -> bool:
        """Only ever run by a non-reentrant checkpoint of this file (see :func:`_packed_only`)."""
        node = fi.node
        if isinstance(node, ast.Lambda) or (fi.mod is not None and not fi.mod.is_root):
            return False
        return node.name in self.packed_names

    @property
    def packed_names(self) -> frozenset[str]:
        if self._packed_names is None:
            self._packed_names = _packed_only(self.tree, self.lines)
        return self._packed_names

    def standalone(self, fi: FuncInfo) -> None:
        self.run_alone(fi)
        self.run_escaped()

    def run_escaped(self) -> None:
        """Nested defs the runs so far made and nothing they ran called: they escape (`return update_fn`,
        `tree_map(f, ...)`, `register_hook(hook)`), and whoever receives them calls them with arguments the analysis
        does not see. They run on their own, with the closure their maker's run gave them (run after a function's
        run, their findings are that run's)."""
        if self._escaping:
            return
        self._escaping = True
        try:
            ran = 0
            while self.nested_defs and ran < MAX_ESCAPED:
                nxt = self.nested_defs.pop(0)
                if nxt.node in self.called_defs:
                    continue
                ran += 1
                self.budget = max(self.budget, 20_000)
                self.foreign_used, self.foreign_limit = 0, FOREIGN_PER_FUNCTION
                self.run_alone(nxt)
        finally:
            self._escaping = False

    def run_alone(self, fi: FuncInfo) -> None:
        node = fi.node
        if isinstance(node, ast.Lambda):
            return
        if node.name == "__init__" and fi.cls is not None and self.module_like(fi.cls) \
                and not self._is_function_class(fi.cls):
            # A module's constructor with its parameters' defaults (flags either way): the run that builds the
            # instance its other methods are analysed on; one run serves both.
            self.default_instance(fi.cls)
            return
        env: dict[str, Val] = {}
        self_obj: Val | None = None
        args = node.args
        params = [*args.posonlyargs, *args.args]
        defaults = self._defaults(fi)
        params_first = ""
        if fi.cls is not None and not fi.is_static and params:
            first = params_first = params[0].arg
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
            param_rg = MAYBE if module_like or self.differentiated(fi) else NO
            by_witness = not module_like
        else:
            param_rg = MAYBE if self.graph_file or self.differentiated(fi) else NO
            by_witness = not self.graph_file
        # Requiring grad because the workspace differentiates what the function returns: only the parameters those
        # calls pass may (`scatter_logsumexp(src, index)` leaves `out=None` as it is)
        witness = self._witness_calls(fi) if param_rg == MAYBE and by_witness else None
        for i, p in enumerate(params + list(args.kwonlyargs)):
            # forward's required arguments are its tensors; an optional one (`scale=None`) may be anything
            # (unless the code unpacks it, `z1, z2 = z`: a list of tensors, as normalizing flows pass them)
            is_tensor = annotated_tensor(p.annotation) or (tensor_params and p.annotation is None
                                                            and p.arg not in defaults and p.arg not in unpacked(node))
            unpassed = witness is not None and not passes(witness, i if i < len(params) else -1, p.arg)
            # (token ids, labels, masks, indices: integer tensors)
            rg = NO if INT_NAME.search(p.arg) or unpassed else param_rg
            d = defaults.get(p.arg)
            # A default is one possible value, not the only one: a caller may pass a tensor for `weight=None`,
            # `inplace=True` for `inplace=False`. Sizes and rates keep their default (they select no hazard).
            if isinstance(d, Const) and d.known and isinstance(d.value, (int, float)) and not isinstance(d.value, bool):
                env[p.arg] = d
            elif isinstance(d, Const) and d.known and d.value is not None:
                env[p.arg] = UNKNOWN_NUM
            elif d is not None and not isinstance(d, Const):
                env[p.arg] = d  # `norm_layer=nn.LayerNorm`, `act=nn.ReLU()`: what the default usage runs
            elif not is_tensor and (typed := self.annotated_module(p.annotation, fi)) is not None:
                env[p.arg] = typed  # `controlnet: BlockwiseControlNet = None`: an instance of that module class
            else:
                env[p.arg] = v = fresh(p.arg, rg=rg, maybe_tensor=not is_tensor)
                if rg == NO and not is_tensor and fi.cls is None and isinstance(v, T):
                    # a parameter of a function in a file that builds no graph: called (`matmul_closure(q)`, a
                    # closure passed in), it is a function of its arguments, not a model whose parameters require
                    # grad. (A plain class's method may still be handed a model: a diffusers attention processor's
                    # `attn.to_qkv(hidden_states)`.)
                    self.opaque_for(v).cfg["data"] = Const(True)
        if args.vararg:
            env[args.vararg.arg] = Seq(None, UNKNOWN, "tuple")
        if args.kwarg:
            env[args.kwarg.arg] = UNKNOWN
        no_grad = (fi.no_grad or self.ng_only(fi) or (
            fi.cls is not None and self._is_function_class(fi.cls)
            and node.name in ("forward", "backward", "setup_context", "jvp", "vjp"))) and not fi.enable_grad
        selves: list[Val | None] = [self_obj]
        if self_obj is not None and fi.cls is not None:
            # a base class's method that calls hooks its subclasses fill in (`o, c, h = self.forward_cell(x, h)`,
            # which raises NotImplementedError in the base): it runs again on each such subclass's instance
            selves += [self.default_instance(sub) for sub in self._template_subclasses(fi)]
        for me in selves:
            if me is not self_obj and me is not None:
                env = {**env, params_first: me}
            st = State(dict(env), Heap(), no_grad=no_grad, allow_mutation=self.am_only(fi), packed=self.packed_only(fi))
            fr = Frame(fi, STANDALONE_DEPTH, me)
            self.active.append(fi)
            self.active_objs.append(None)
            # The default instance is shared by the runs of its class's methods: the objects one run gives it
            # (`self.agent = agent` in `initialize`) are there when another method runs alone, but the state of its
            # tensors is not (`self.table.requires_grad = True` in `make_trainable`; a frozen parameter).
            kept = ({k: v for k, v in me.attrs.items() if isinstance(v, T)}, dict(me.params)) \
                if isinstance(me, Obj) and me.kind == "local" else None
            try:
                self.exec_body(node, st, fr)
                if tensor_params and node.name == "forward":
                    self._fed_back(fi, env, fr, no_grad)
            finally:
                self.active.pop()
                self.active_objs.pop()
                if kept is not None and isinstance(me, Obj):
                    me.attrs.update(kept[0])
                    me.params = kept[1]

    def _template_subclasses(self, fi: FuncInfo) -> list[ClassInfo]:
        """This file's subclasses of ``fi``'s class that inherit ``fi`` and override a method it calls on ``self``
        (at most three)."""
        base = fi.cls
        node = fi.node
        if base is None or isinstance(node, ast.Lambda) or node.name == "__init__":
            return []
        subs = [c for c in self.classes if c is not base and c.mod is base.mod and base in c.mro()
                and c.find_method(node.name) is fi]
        if not subs:
            return []  # (no subclass here inherits it: the body need not be read)
        hooks: frozenset[str] | None = getattr(node, "_gg_self_calls", None)
        if hooks is None:
            hooks = frozenset(x.func.attr for x in ast.walk(node) if isinstance(x, ast.Call)
                              and isinstance(x.func, ast.Attribute) and isinstance(x.func.value, ast.Name)
                              and x.func.value.id == "self")
            node._gg_self_calls = hooks  # type: ignore[union-attr]  # cached on the tree, which it describes
        # ... or a part the constructor asks the subclass to build (`self.module = self.get_module()` in the base's
        # __init__, `get_module` returning nn.LSTM in LSTMDecoder): what the method calls is that part
        hooks = hooks | _built_by_hooks(base)
        if not hooks:
            return []
        out = []
        for c in subs:
            if any(c.find_method(h) is not base.find_method(h) for h in hooks):
                out.append(c)
                if len(out) == 3:
                    break
        return out

    def _fed_back(self, fi: FuncInfo, env: dict[str, Val], fr: Frame, no_grad: bool) -> None:
        """A recurrent step: ``forward(x, memory=None)`` reads its state from a parameter (``Si, Zi = memory``,
        ``h = hx``) and returns it (``return out, [Si, Zi]``, ``return h``), so whoever steps it passes the state
        the last call returned back into the next one. The body runs a second time with that state and the first
        call's saves: an in-place update of the state then writes into what the previous step saved."""
        node = fi.node
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for param, where, ret in state_parameters(node, self._defaults(fi)):
            for v, rs in fr.returns:
                state = _at(v, where)
                if state is None:
                    continue
                env2 = {**env, param: state}
                fr2 = Frame(fi, STANDALONE_DEPTH, fr.self_obj)
                self.fed_back = (self.site(ret), f"the state `{param}` that this returns is passed back into the next "
                                                 f"call, where it is modified after this call's ops saved it")
                try:
                    self.exec_body(node, State(env2, rs.heap, no_grad=no_grad, allow_mutation=self.am_only(fi),
                                               packed=self.packed_only(fi)), fr2)
                finally:
                    self.fed_back = None
                return


def _built_by_hooks(cls: ClassInfo) -> frozenset[str]:
    """Methods that the constructors of ``cls`` and its bases (within the analysed code) call on ``self`` to build an
    attribute: ``self.module = self.get_module()``."""
    out: set[str] = set()
    for c in cls.mro():
        init = c.methods.get("__init__")
        if init is None or isinstance(init.node, ast.Lambda):
            continue
        got: frozenset[str] | None = getattr(init.node, "_gg_built_by", None)
        if got is None:
            got = frozenset(
                st.value.func.attr for st in ast.walk(init.node)
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call)
                and isinstance(st.value.func, ast.Attribute) and isinstance(st.value.func.value, ast.Name)
                and st.value.func.value.id == "self"
                and any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                        for t in st.targets))
            init.node._gg_built_by = got  # type: ignore[union-attr]  # cached on the tree, which it describes
        out |= got
    return frozenset(out)
