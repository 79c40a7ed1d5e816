"""Shared pieces of the abstract interpreter: limits, operator tables, frames and small helpers on values."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any, TypeGuard

from gradguard.analysis.hazards import SaveRecord
from gradguard.analysis.state import State
from gradguard.analysis.values import (
    MAYBE,
    UNKNOWN_NUM,
    YES,
    Alt,
    Cond,
    Const,
    FuncInfo,
    Obj,
    Seq,
    Storage,
    T,
    Val,
)

MAX_DEPTH = 6
# keywords that ask a function to write into its argument (`normalize(x, mean, std, inplace=True)`)
FLAG_KEYWORDS = frozenset({"inplace"})
MAX_APPLY = 64  # module.apply(fn): at most this many submodules are visited
STANDALONE_DEPTH = 3  # a function analysed on its own inlines 3 levels of callees (they are analysed on their own too)
# Code in other modules (the project's and libraries') is followed into, within a budget of abstract statements:
# per function analysed on its own, and for the checked file's module-level code (a training script). Small
# callees (blocks, layers, helpers) always fit; library plumbing (pretrained-weight loading, registries) does not,
# and stays unknown, as it was before imports were followed. This keeps the cost linear in the checked code.
# (400 left a model's fourth network, built in another module after three large ones, unseen: joliGEN's
# segmentation net, whose optimizer steps between the forward and the generator's backward. 800 costs 2-4 % on
# timm, 8 % on diffusers.)
FOREIGN_PER_FUNCTION = 800
FOREIGN_MODULE_LEVEL = 5_000
# A small callee (a training-step helper: zero_grad, backward, step) is followed past that budget, up to a slack:
# what a large callee used up must not hide `update_params(optim, loss)` from the function that calls it.
SMALL_FOREIGN = 12
SMALL_FOREIGN_SLACK = 120
MAX_LOOP_PRODUCT = 6  # loops nested in loops: the passes of a nest multiply to at most this
# A loop over a sequence of known length (a ModuleList, `range(3)`, a literal list) runs once per element, with
# each element (and index) bound as it is, for sequences of at most this many elements, while the passes and
# iterations of the enclosing nest multiply to at most 3 * MAX_UNROLL: the last iteration is then the last one
# (`relu(layer(x)) if i < n - 1 else layer(x)` ends without relu).
MAX_UNROLL = 8
# ... and a loop over known constants (layer names, a config's order) is unrolled while the nest multiplies to at
# most this: such loops are switches, whose passes each run one arm
CONST_UNROLL_NEST = 8 * MAX_UNROLL
# `for m in self.modules():` runs once per submodule up to this many (a switch or an initialiser per module)
MAX_MODULES_UNROLL = 48
# a loop over a model's modules that only sets their attributes (`for m in self.modules(): if isinstance(m, nn.ReLU):
# m.inplace = True`) runs once per module of a tree this large: each pass is a type test and an assignment
MAX_MODULES_SET = 2048
BUDGET = 400_000  # abstract statement executions per file: analysis always terminates quickly

BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul", ast.BitAnd: "and_", ast.BitOr: "or_",
    ast.BitXor: "xor", ast.LShift: "lshift", ast.RShift: "rshift",
}
OPSYM = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
}
INFERENCE_MODE = "torch.inference_mode"
NO_GRAD_CTX = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad")
ENABLE_GRAD_CTX = ("torch.enable_grad", "torch.autograd.enable_grad")
AUTOCAST_CTX = ("torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast")
ALLOW_MUT_CTX = ("torch.autograd.graph.allow_mutation_on_saved_tensors",)
PACKING_CTX = ("torch.autograd.graph.save_on_cpu",)  # saved_tensors_hooks itself also runs its pack hook
UNPACKING_CTX = ("torch.autograd.graph.disable_saved_tensors_hooks",)
# `with _unsafe_preserve_version_counter(t):` puts t's version counter back when the block ends: the writes to t
# inside it are invisible to the saved-tensor check
PRESERVE_VERSION_CTX = ("torch.autograd._unsafe_preserve_version_counter",
                        "torch.autograd.graph._unsafe_preserve_version_counter")
CONTAINER_MODULES = {"torch.nn.Sequential": "sequential", "torch.nn.ModuleList": "modulelist",
                     "torch.nn.ModuleDict": "moduledict", "torch.nn.ParameterList": "modulelist"}
PARAMETER = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
FUNCTION_BASES = ("torch.autograd.Function", "torch.autograd.function.Function")


class Budget(Exception):
    pass


class Loop:
    __slots__ = ("breaks", "carried", "continues", "index", "instances", "mirrored", "node", "pass_no", "placed",
                 "step")

    def __init__(self, carried: set[str], node: ast.AST, index: tuple[str, int] | None = None):
        self.node = node
        self.carried = carried
        self.breaks: list[State] = []
        self.continues: list[State] = []
        # `for i in range(n - 1, 0, -1)` (or `enumerate`): the index name and its step. The pass ``pass_no`` sees
        # `lst[i + c]` as the item ``step * pass_no + c`` places from where the loop started (see
        # Expressions.item_instance): each such item its own tensor, ``instances[(storage, place)]``, so that what
        # one iteration saved of `feats[i]` is not what the next one writes as `feats[i + 1]` unless it is the
        # same item; ``mirrored``: a save made through one item, also kept on the list's storage (for a write
        # through another name), with the place it was made at
        self.index = index
        self.step = index[1] if index is not None else 0
        self.pass_no = 0
        self.instances: dict[tuple[Storage, int], Storage] = {}
        self.mirrored: dict[tuple[Storage, SaveRecord], int] = {}
        self.placed: dict[Storage, set[int]] = {}  # tensors `lst[i + c] = v` put into a list, and where


# the builtin containers a value can be tested against (`isinstance(out, tuple)`, `type(out) is dict`)
CONTAINER_TYPES = frozenset({"builtins.tuple", "builtins.list", "builtins.dict"})


class Frame:
    __slots__ = ("assumed", "cls", "depth", "func", "grad_in", "loops", "returns", "self_obj")

    def __init__(self, func: FuncInfo | None, depth: int, self_obj: Val | None = None):
        self.func = func
        # the outermost module call this frame runs in was handed a tensor that requires grad (an adversarial
        # patch, an input being optimised): its eval-mode branches run with grad (see Statements.s_If)
        self.grad_in = False
        self.cls = func.cls if func else None
        self.depth = depth
        self.loops: list[Loop] = []
        self.returns: list[tuple[Val, State]] = []
        self.self_obj = self_obj
        self.assumed: dict[tuple[str, str], bool] = {}  # see flags.correlated_flag: a flag's value on this path


def is_true(v: Val | None) -> bool:
    return isinstance(v, Const) and v.known and v.value is True


def is_false(v: Val | None) -> bool:
    return isinstance(v, Const) and v.known and v.value is False


def known_truth(v: Val | None) -> bool | None:
    """``bool(v)`` for a constant the analysis knows (a flag, a name, None, a number), else None."""
    if isinstance(v, Cond) or not isinstance(v, Const) or not v.known:
        return None
    if v.value is None or isinstance(v.value, (bool, int, float, str, bytes, tuple)):
        return bool(v.value)
    return None


def affine_index(sl: ast.expr) -> tuple[str, int] | None:
    """`i`, `i + 1`, `i - 1`, `1 + i`: the name and the number added to it."""
    if isinstance(sl, ast.Name):
        return sl.id, 0
    if isinstance(sl, ast.BinOp) and isinstance(sl.op, (ast.Add, ast.Sub)):
        a, b = sl.left, sl.right
        if isinstance(a, ast.Name) and isinstance(b, ast.Constant) and type(b.value) is int:
            return a.id, b.value if isinstance(sl.op, ast.Add) else -b.value
        if isinstance(sl.op, ast.Add) and isinstance(b, ast.Name) and isinstance(a, ast.Constant) \
                and type(a.value) is int:
            return b.id, a.value
    return None


def carried_names(body: list[ast.stmt]) -> set[str]:
    """Names read in a loop body before being written in it (live-in) and written in it: loop-carried. The
    statements inside an ``if``, ``with`` or ``try`` are taken in order too: ``if done: q = f(x); loss = -q``
    reads the ``q`` it just wrote, not the previous iteration's."""
    live_in: set[str] = set()
    everything: set[str] = set()
    _live_in(body, set(), live_in, everything)
    return everything & live_in


def _names(nodes: Iterable[ast.AST | None]) -> tuple[list[str], list[str]]:
    loads: list[str] = []
    stores: list[str] = []
    for root in nodes:
        if root is None:
            continue
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                (loads if isinstance(node.ctx, ast.Load) else stores).append(node.id)
    return loads, stores


def _live_in(body: list[ast.stmt], written: set[str], live_in: set[str], everything: set[str]) -> set[str]:
    """Scan ``body`` in order from the names ``written`` before it; returns the names written after it (any
    path: a write in one arm of an ``if`` counts, as a write earlier in the body always did)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            head: list[ast.AST | None] = [stmt.test]
            blocks = [stmt.body, stmt.orelse]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            head = [*(i.context_expr for i in stmt.items), *(i.optional_vars for i in stmt.items)]
            blocks = [stmt.body]
        elif isinstance(stmt, ast.Try):
            head = []
            blocks = [stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody]
        else:
            loads, stores = _names([stmt])
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                loads.append(stmt.target.id)
            live_in.update(n for n in loads if n not in written)
            written = written | set(stores)
            everything.update(stores)
            continue
        loads, stores = _names(head)
        live_in.update(n for n in loads if n not in written)
        written = written | set(stores)
        everything.update(stores)
        after = set(written)
        for block in blocks:
            after |= _live_in(block, set(written), live_in, everything)
        written = after
    return written




NONDIFF_METHODS = ("item", "tolist", "numpy")


NONDIFF_BUILTINS = ("builtins.print", "builtins.float", "builtins.int", "builtins.bool", "builtins.str",
                     "builtins.format", "builtins.repr")


GRAPH_MARKERS = (".backward(", "requires_grad", "Parameter(", "torch.optim", "autograd", "nn.Module", "forward(")


# Parameters by these names hold integer tensors or targets: they do not require grad
INT_NAME = re.compile(r"(^|_)(ids|labels?|mask|masks|indices|index|idx|positions?|targets?|gt|y_true)$")


def annotated_tensor(ann: ast.expr | None) -> bool:
    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        return ann.value.split("[")[0].rsplit(".", 1)[-1] == "Tensor"
    if isinstance(ann, ast.Subscript):  # Optional[Tensor], Union[Tensor, None] (not list[Tensor])
        head = ann.value.attr if isinstance(ann.value, ast.Attribute) else getattr(ann.value, "id", "")
        if head == "Optional":
            return annotated_tensor(ann.slice)
        if head == "Union" and isinstance(ann.slice, ast.Tuple):
            return any(annotated_tensor(e) for e in ann.slice.elts)
        return False
    if isinstance(ann, ast.BinOp):  # Tensor | None
        return annotated_tensor(ann.left) or annotated_tensor(ann.right)
    name = ann.attr if isinstance(ann, ast.Attribute) else ann.id if isinstance(ann, ast.Name) else ""
    return name == "Tensor"


def reads_attr(value: ast.expr, target: ast.Attribute) -> bool:
    want = ast.dump(target.value)
    return any(isinstance(x, ast.Attribute) and x.attr == target.attr and ast.dump(x.value) == want
               for x in ast.walk(value))


def tensors_in(v: Val | None, depth: int = 0) -> list[T]:
    if isinstance(v, T):
        return [v]
    if depth < 2 and isinstance(v, Seq) and v.items is not None:
        out: list[T] = []
        for x in v.items:
            out.extend(tensors_in(x, depth + 1))
        return out
    return []


def storages_of(v: Val, depth: int = 0) -> set[Storage]:
    if isinstance(v, T):
        return set(v.storages)
    if depth < 3 and isinstance(v, Seq):
        out: set[Storage] = set()
        for x in (v.items if v.items is not None else (v.elem,)):
            out |= storages_of(x, depth + 1)
        return out
    return set()


def tensor_facts(v: Val, depth: int = 0, real_only: bool = False) -> tuple[bool, frozenset[Any]]:
    """(may require grad, provenance) of a value that may be a tensor or a sequence of tensors."""
    if isinstance(v, T):
        if real_only and v.maybe_tensor:
            return False, frozenset()
        return v.rg >= MAYBE, v.prov
    if depth < 3 and isinstance(v, (Seq, Alt)):
        rg = False
        prov: frozenset[Any] = frozenset()
        seqs = v.alts if isinstance(v, Alt) else (v,)
        for s in seqs:
            for x in (s.items if s.items is not None else (s.elem,)):
                r, p = tensor_facts(x, depth + 1, real_only)
                rg = rg or r
                prov |= p
        return rg, prov
    return False, frozenset()


MAX_FOLD_ITEMS = 10_000  # constants folded only while small: "ab" * 10**9 is left unknown, not built
MAX_FOLD_BITS = 4_096


def _small(v: Any) -> bool:
    if isinstance(v, bool) or v is None:
        return True
    if isinstance(v, int):
        return v.bit_length() <= MAX_FOLD_BITS
    if isinstance(v, (str, bytes, tuple, list)):
        return len(v) <= MAX_FOLD_ITEMS
    return isinstance(v, (float, complex))


def fold(op: ast.operator, a: Any, b: Any) -> Any:
    """``a op b`` for small constants; None when it is not worth computing (too large, or an error)."""
    if not (_small(a) and _small(b)):
        return None
    if isinstance(op, ast.Mult) and isinstance(a, (str, bytes, tuple, list)) and isinstance(b, int):
        if len(a) * max(b, 0) > MAX_FOLD_ITEMS:
            return None
    if isinstance(op, ast.Mult) and isinstance(b, (str, bytes, tuple, list)) and isinstance(a, int):
        if len(b) * max(a, 0) > MAX_FOLD_ITEMS:
            return None
    if isinstance(op, ast.Mult) and isinstance(a, int) and isinstance(b, int) \
            and a.bit_length() + b.bit_length() > MAX_FOLD_BITS:
        return None
    if isinstance(op, ast.Pow):
        if not isinstance(b, (int, float)) or abs(b) >= 64:
            return None
        if isinstance(a, int) and a.bit_length() * abs(b) > MAX_FOLD_BITS:
            return None
        return a ** b
    if isinstance(op, ast.Add):
        out = a + b
    elif isinstance(op, ast.Sub):
        out = a - b
    elif isinstance(op, ast.Mult):
        out = a * b
    elif isinstance(op, ast.Div):
        out = a / b
    elif isinstance(op, ast.FloorDiv):
        out = a // b
    elif isinstance(op, ast.Mod):
        if isinstance(a, (str, bytes)):
            # "act%d" % (i + 1): formatting one number or string (a key built in a loop); anything else is left
            if not isinstance(b, (int, float, str)):
                return None
            try:
                out = a % b
            except (TypeError, ValueError, KeyError):
                return None
        else:
            out = a % b
    else:
        return None
    return out if _small(out) else None


def known_items(v: Val) -> tuple[Val, ...] | None:
    """The elements of a sequence whose length is known (a list or tuple, a ModuleList or Sequential built from
    one), at most MAX_UNROLL of them; None otherwise."""
    if isinstance(v, Obj) and v.kind in ("sequential", "modulelist"):
        v = v.entries
    if isinstance(v, Seq) and v.items is not None and len(v.items) <= (
            MAX_MODULES_UNROLL if v.kind == "modules" else MAX_UNROLL):
        return tuple(v.items)
    return None


def scope_nodes(scope: ast.AST) -> tuple[ast.AST, ...]:
    """Every node of ``scope`` (a function or module) except the bodies of nested functions, lambdas and classes
    (their ``def``/``class``/``lambda`` nodes themselves are included)."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(n))
    return tuple(out)


# str methods the analysis runs on a known string (Python does the same, with no side effect): configuration
# names picked apart or normalised before a table lookup (`get_act_layer(name)`: `name.lower()`)
STR_METHODS = frozenset({
    "lower", "upper", "casefold", "strip", "lstrip", "rstrip", "replace", "startswith", "endswith",
    "removeprefix", "removesuffix", "split", "rsplit", "find", "rfind", "count", "format", "capitalize", "title",
})


def str_method(s: str, name: str, pos: list[Val], kw: dict[str, Val]) -> Val:
    """``s.name(*pos, **kw)`` when every argument is a known string, int or None (or a tuple of strings for
    startswith/endswith); an unknown value of the result's kind otherwise."""
    args: list[Any] = []
    for v in (*pos, *kw.values()):
        if isinstance(v, Const) and v.known and (v.value is None or isinstance(v.value, (str, int))):
            args.append(v.value)
        elif isinstance(v, Seq) and v.items is not None and all(
                isinstance(x, Const) and x.known and isinstance(x.value, str) for x in v.items):
            args.append(tuple(x.value for x in v.items))  # type: ignore[attr-defined]
        else:
            return Seq(None, Const("", known=False), "list") if name in ("split", "rsplit") else UNKNOWN_NUM
    try:
        out = getattr(s, name)(*args[:len(pos)], **dict(zip(kw, args[len(pos):])))
    except (TypeError, ValueError):
        return UNKNOWN_NUM
    if isinstance(out, list):
        return Seq.of([Const(x) for x in out[:MAX_UNROLL]], "list") if len(out) <= MAX_UNROLL else \
            Seq(None, Const("", known=False), "list")
    return Const(out)


def view_made(view: str, base: T, now: int, multi_output: bool) -> int:
    """When a view that can go stale was made (see AnalyzerCore.stale_view): one of several views of a tensor that
    requires grad, or a view made with grad off of one that does (and views of such views, which share their
    base's fate); 0 for any other view."""
    if base.maybe_tensor:
        return 0
    if view == "multi":
        return (now if multi_output else base.made) if base.rg == YES else 0
    if view == "nograd":
        return base.made if base.view == "nograd" else now if base.rg == YES else 0
    return 0


def sized_view_of(base: Val) -> bool:
    """Is a copy of ``base`` that is a view wherever the dimensions it merges have size 1 worth keeping as a view?
    A reshape or rearrange that merges axes a permutation or a chunk left apart (``rearrange(q, "b n (h d) -> (b h)
    n d")`` of one of ``chunk(3, dim=-1)``'s parts, ``t.reshape(-1)`` of a strided part) copies, except when all but
    one of those axes have size 1, a batch of one, where torch returns a view. For one of several views that matters
    on its own: writing into it in place with grad on raises then (lucidrains' TimeSformer fixed `q *= scale` for a
    batch of one). For other tensors the copy stands: a write then also needs a saver of the base to break."""
    return isinstance(base, T) and base.view == "multi"


def note_sized(v: Val, what: str) -> Val:
    """``v``, a view that ``what`` made only where the merged dimensions have size 1, saying so in its origin."""
    if not (isinstance(v, T) and v.view == "multi"):
        return v
    return v.with_(view_op=f"{v.view_op or 'a multi-output view op'}, then {what} (a copy, except where the "
                           f"dimensions it merges have size 1, as for a batch of one: then a view)")


def renorms(max_norm: Val | None) -> TypeGuard[Const]:
    """Does an embedding lookup with this ``max_norm`` renormalize its weight in place? Torch does for any value
    but None (``max_norm=True`` is a norm of 1)."""
    return isinstance(max_norm, Const) and max_norm.known and isinstance(max_norm.value, (int, float))
