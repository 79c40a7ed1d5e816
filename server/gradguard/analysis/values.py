"""Abstract values of the interpreter.

A tensor value (:class:`T`) points to a *set* of storages (may-alias): views, ``.detach()`` and plain
assignment share a storage, which stands for torch's version counter. What has been saved for backward is
flow-sensitive state kept per storage in :class:`Heap`, so a mutation through any alias finds every save.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeGuard

from gradguard.analysis.hazards import Site

if TYPE_CHECKING:
    from gradguard.analysis.namespace import ModuleCtx

_ids = itertools.count(1)


def next_id() -> int:
    """Storages and objects are numbered in creation order (deterministic within one analysis)."""
    return next(_ids)

NO, MAYBE, YES = 0, 1, 2  # requires-grad lattice
# views that torch will not let be modified in place (with grad on): one of several outputs of one node, made under
# no_grad, made inside (or returned as-is by) a custom autograd.Function; views of them inherit it
# multi: one of several views (split, unbind); nograd: made under no_grad of a tensor requiring grad; nograd_if: made
# under no_grad of one that did not (a write breaks once the view or another operand requires grad); fnview: returned
# by a custom Function
SPECIAL_VIEWS = ("multi", "nograd", "nograd_if", "fnview")


class Storage:
    """Identity of a version counter. ``param_of`` marks parameters of a module (for optimizer steps)."""

    __slots__ = ("desc", "leaf", "param_of", "sid", "site")

    def __init__(self, desc: str = "", site: Site | None = None, leaf: bool = False, param_of: Any = None):
        self.sid = next(_ids)
        self.desc = desc
        self.site = site
        self.leaf = leaf
        self.param_of = param_of

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<S{self.sid} {self.desc}>"


def ordered(storages: Any) -> list[Storage]:
    """Storages in creation order: iterate this, never the set itself, where order reaches the output."""
    return sorted(storages, key=lambda s: s.sid)


def owner_key(o: Any) -> int:
    """A deterministic order of optimizer owners (modules and leaf storages), by creation."""
    return int(getattr(o, "sid", 0) or getattr(o, "oid", 0))


class Val:
    """Base of abstract values."""

    __slots__ = ()


class UnknownT(Val):
    __slots__ = ()

    def __repr__(self) -> str:  # pragma: no cover
        return "Unknown"


UNKNOWN = UnknownT()


@dataclass(frozen=True, eq=False)
class Const(Val):
    value: Any = None
    known: bool = True


NONE = Const(None)
UNKNOWN_NUM = Const(None, known=False)


@dataclass(frozen=True, eq=False)
class Written(Val):
    """``d[k] = v`` into a dict or list whose keys are not known: kept in the environment under ``"d[k]"``. Reading
    ``d[k]`` while ``d`` and ``k`` still hold the very values they held then (``seq``, ``key``) reads ``v``, not the
    join of every item (fairseq's ``fp32_params[device] = buf.new(n)`` then ``fp32_params[device][a:b].copy_(...)``
    writes the new buffer, not the Parameter an earlier pass stored under another device)."""

    value: Val
    seq: Val
    key: Val


def written_key(d: str, k: str) -> str:
    """The environment entry of ``d[k]``'s last write (not a Python name: no variable can clash with it)."""
    return f"{d}[{k}]"


@dataclass(frozen=True, eq=False)
class Cond(Const):
    """A boolean the code computes from the grad state: ``torch.is_grad_enabled()``, ``x.requires_grad``,
    ``self.training``, and ``and``/``or``/``not`` of them (``formula``: "grad", "rg", "training", "unk", a bool,
    or ("and"|"or", a, b) / ("not", a) / ("either", a, b), the value of one of two paths). Unknown as a value; a
    branch it guards may be one that cannot run while autograd records (see ``recording_allows``)."""

    known: bool = False
    formula: Any = "unk"


def formula_of(v: Val) -> Any:
    if isinstance(v, Cond):
        return v.formula
    if isinstance(v, Const) and v.known:
        return bool(v.value)
    return "unk"


def _outcomes(f: Any) -> frozenset[bool]:
    """The values ``f`` can take while autograd records (grad mode on, the tensors involved requiring grad, the
    module training), whatever the unknown parts are."""
    if isinstance(f, bool):
        return frozenset({f})
    if f in ("grad", "rg", "training"):
        return frozenset({True})
    if isinstance(f, tuple):
        if f[0] == "not":
            return frozenset(not x for x in _outcomes(f[1]))
        a, b = _outcomes(f[1]), _outcomes(f[2])
        if f[0] == "either":
            return a | b
        if f[0] == "and":
            return frozenset(x and y for x in a for y in b)
        return frozenset(x or y for x in a for y in b)
    return frozenset({True, False})


def outcomes(v: Cond) -> frozenset[bool]:
    """What the condition ``v`` can be while autograd records."""
    return _outcomes(v.formula)


def recording_allows(v: Val, outcome: bool) -> bool:
    """Can the condition ``v`` come out ``outcome`` while autograd records? False: the branch it guards only runs
    without autograd (``if not x.requires_grad:``, ``if torch.is_grad_enabled(): ... else: <in place>``)."""
    if not isinstance(v, Cond):
        return True
    return outcome in _outcomes(v.formula)


def recorded(live: list[Val]) -> Cond:
    """A boolean whose other paths only run without autograd (`if not torch.is_grad_enabled(): return False`):
    unknown as a value, and while autograd records, one of the ``live`` paths' values."""
    f = formula_of(live[0])
    for v in live[1:]:
        g = formula_of(v)
        f = f if g == f else ("either", f, g)
    return Cond(formula=f)


def boolish(v: Val) -> bool:
    """A value a grad-state condition may be: a Cond, or a known bool."""
    return isinstance(v, Cond) or (isinstance(v, Const) and v.known and isinstance(v.value, bool))


# Provenance of a graph: (owner, stamp, carry) — owner is a module object or a leaf Storage whose parameters
# ops of this graph used; stamp orders events; carry is the (Site, name, value Site) of a loop-carried assignment.
Prov = tuple[Any, int, Any]


@dataclass(frozen=True, eq=False)
class T(Val):
    storages: frozenset[Storage]
    rg: int = MAYBE
    leaf: bool = False  # a leaf that requires grad, or a view of one
    view: str | None = None  # None | "view" | one of SPECIAL_VIEWS
    view_op: str = ""
    maybe_tensor: bool = False  # an unknown value (parameter, unknown call) that may be a tensor
    maybe_tuple: bool = False  # output of a module call: unpacking it is not unbinding a tensor
    prov: frozenset[Prov] = frozenset()
    alias_of: str | None = None  # `out = x`: the name it aliases (for GG103 fixes)
    alias_site: Site | None = None
    view_site: Site | None = None  # where this view (of another tensor's storage) was made
    origin: str = ""  # how it was made ("sigmoid", "nn.Parameter", ...)
    # known not to be contiguous (a transposed, permuted or strided view): `.contiguous()`, `.reshape()` and
    # `.flatten()` of it return a copy, not a view. False: contiguous, or not known.
    noncontig: bool = False
    # one of several views (split, unbind, iteration) made with grad on: the statement stamp when it was made. A
    # write to its storage after that (an optimizer step on the parameter it views) leaves it a view whose graph
    # torch cannot rebuild (see Heap.wrote).
    made: int = 0
    # complex-valued (view_as_complex, polar, an FFT, a dtype=torch.cfloat factory, or computed from one): its
    # `.float()` is a real copy, never the tensor itself
    cplx: bool = False
    # made by expand() (or a view of what it made that keeps the broadcast dimension): several of its elements
    # share one memory location, so torch refuses to write into it in place; where the expand was
    expanded: Site | None = None
    # made by a factory with no dtype given (`torch.zeros(6)`, `torch.randn(n, d)`): of the default dtype, float32
    # in a file that never mentions another precision (see Calls.float32)
    f32: bool = False
    # surely requires grad: made with grad on, by ops seen here, from a leaf that does (a layer's own weight): `h =
    # self.proj(x)` whatever the batch `x` was (``rg`` YES alone also covers "may": an op on an unknown value)
    sure: bool = False

    def with_(self, **kw: Any) -> T:
        """A copy with the fields ``kw`` changed (``dataclasses.replace``, without its per-call introspection:
        the analysis makes tens of thousands of these per file)."""
        if not _T_FIELDS.issuperset(kw):
            return replace(self, **kw)  # (raises the TypeError replace gives for an unknown field)
        new = object.__new__(T)
        d = new.__dict__
        d.update(self.__dict__)
        d.update(kw)
        return new


_T_FIELDS = frozenset(f.name for f in fields(T))


def fresh(desc: str = "", rg: int = NO, site: Site | None = None, leaf: bool = False, **kw: Any) -> T:
    return T(frozenset({Storage(desc, site, leaf)}), rg=rg, leaf=leaf, origin=desc, **kw)


class Seq(Val):
    """A list/tuple/dict. ``items`` None means unknown length (all elements approximated by ``elem``).

    A dict whose keys are all known strings (``dict(block=Bottleneck)``, the ``**kwargs`` a call bound, a display
    ``{"inplace": True}``) also has ``keys``, one per item: its entries are exactly those. Any other dict (a
    computed key, an entry written through an unknown key, a dict handed to code that may change it) has none, and
    reads of it give the join of its values, as for a list. A keyed dict handed to code that may change it keeps
    the keys it had as ``wkeys``: a key it never had reads as unknown (see read)."""

    __slots__ = ("_elem", "items", "kelem", "keys", "kind", "okeys", "wkeys")

    def __init__(self, items: tuple[Val, ...] | None, elem: Val | None = UNKNOWN, kind: str = "list",
                 keys: tuple[str, ...] | None = None, kelem: Val | None = None,
                 okeys: tuple[Val, ...] | None = None, wkeys: tuple[str, ...] | None = None):
        self.items = items
        self._elem = elem
        self.kind = kind
        self.keys = keys if items is not None else None
        # a dict that had exactly these string keys, one per item, until code the analysis does not follow may
        # have changed it (see unkeyed)
        self.wkeys = wkeys if items is not None and keys is None and wkeys is not None \
            and len(wkeys) == len(items) else None
        # a dict whose keys are objects (`{layer: mask for layer, mask in ...}`), for ``.items()`` and ``.keys()``:
        # what any key is (None: not known), and each item's key when the items are known
        self.kelem = kelem
        self.okeys = okeys if items is not None and okeys is not None and len(okeys) == len(items) else None

    @property
    def elem(self) -> Val:
        el = self._elem
        if el is None:  # computed on first use: most sequences are never iterated abstractly
            items = self.items or ()
            if len(items) > 1 and all(_functions(v) for v in items):
                # a table of functions (augmentations, losses picked by name): any one of them may be the one
                # taken. (A registry of classes keeps its first, as a configuration's default would.)
                el = choice(list(items))
            else:
                el = UNKNOWN
                for i, v in enumerate(items):
                    el = v if i == 0 else join(el, v)
            self._elem = el
        return el

    @staticmethod
    def of(items: list[Val] | tuple[Val, ...], kind: str = "list") -> Seq:
        return Seq(tuple(items), None, kind)

    @staticmethod
    def keyed(entries: dict[str, Val]) -> Seq:
        """A dict with exactly these string keys."""
        return Seq(tuple(entries.values()), None, "dict", tuple(entries))

    def entries(self) -> dict[str, Val] | None:
        """A keyed dict's entries; None for any other sequence."""
        if self.keys is None or self.items is None:
            return None
        return dict(zip(self.keys, self.items))

    def unkeyed(self) -> Seq:
        """The same dict, its keys no longer known exactly (changed by code we do not follow). What each key held
        is still known to be among its values (see read)."""
        return Seq(self.items, None, self.kind, wkeys=self.keys if self.keys is not None else self.wkeys)

    def remap(self, items: tuple[Val, ...]) -> Seq:
        """The same sequence (kind, keys) holding other items: copies for summaries and kept calls."""
        return Seq(items, None, self.kind, self.keys, wkeys=self.wkeys)

    def read(self, name: str) -> Val:
        """``d[name]`` of a dict, for a known string key. A keyed dict gives that entry. A key the dict does not hold
        (nor held, before code we do not follow changed it) is one that code added, if any: its value is unknown,
        not one of the values the known keys hold (``group["betas"]`` of an optimizer's param group is not its
        ``"params"``). Any other read is one of the dict's values."""
        keys = self.keys if self.keys is not None else self.wkeys
        if keys is None or self.items is None:
            return self.elem
        if self.keys is not None and name in keys:
            return self.items[keys.index(name)]
        return self.elem if name in keys else UNKNOWN

    @staticmethod
    def param_groups(owners: Val) -> Seq:
        """An optimizer's ``param_groups``: a list of dicts whose ``"params"`` are the parameters it updates (its
        other entries are the hyperparameters of its defaults, read as unknown)."""
        return Seq(None, Seq.keyed({"params": owners}), "list")


def known_str(v: Val | None) -> str | None:
    """The string a value is known to be (a dict key, a keyword name), else None."""
    return v.value if isinstance(v, Const) and v.known and isinstance(v.value, str) else None


def known_int(v: Val | None) -> int | None:
    """The int a value is known to be (not a bool), or None."""
    return v.value if isinstance(v, Const) and v.known and type(v.value) is int else None


class ModuleTree(Seq):
    """``model.modules()`` (or ``children()``, ``named_modules()``) of a tree larger than MAX_MODULES_UNROLL: a
    sequence of unknown length for everything that reads it, which remembers whose modules they are, so that a loop
    that only sets their attributes can still visit each one (Statements.s_For)."""

    __slots__ = ("named", "recurse", "root")

    def __init__(self, root: Any, recurse: bool, named: bool):
        super().__init__(None, UNKNOWN, "list")
        self.root = root
        self.recurse = recurse
        self.named = named


@dataclass(frozen=True, eq=False)
class Alt(Val):
    """Alternative sequences (lists built differently on different paths), kept apart for nn.Sequential."""

    alts: tuple[Seq, ...]


@dataclass(frozen=True, eq=False)
class Ref(Val):
    """A reference to an importable name: ``torch``, ``torch.nn.ReLU``, ``numpy.exp``..."""

    qual: str


@dataclass(eq=False)
class FuncInfo:
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    qual: str
    cls: ClassInfo | None = None
    closure: dict[str, Val] | None = None
    no_grad: bool = False
    inference: bool = False  # decorated with @torch.inference_mode()
    enable_grad: bool = False  # decorated with @torch.enable_grad(): grad on inside, even under the caller's no_grad
    is_static: bool = False
    is_classmethod: bool = False
    mod: ModuleCtx | None = None  # where it is defined (its globals, its source lines)


def _c3_merge(seqs: list[list[ClassInfo]]) -> list[ClassInfo] | None:
    out: list[ClassInfo] = []
    seqs = [list(q) for q in seqs if q]
    while seqs:
        head = next((q[0] for q in seqs if not any(q[0] in r[1:] for r in seqs)), None)
        if head is None:
            return None
        out.append(head)
        seqs = [r for r in ([x for x in q if x is not head] if q[0] is head else q for q in seqs) if r]
    return out


@dataclass(frozen=True, eq=False)
class Func(Val):
    info: FuncInfo


@dataclass(eq=False)
class ClassInfo:
    node: ast.ClassDef
    name: str
    bases: list[Val] = field(default_factory=list)
    methods: dict[str, FuncInfo] = field(default_factory=dict)
    attrs: dict[str, Val] = field(default_factory=dict)
    mod: ModuleCtx | None = None
    # a dataclass's or NamedTuple's fields, in order, with their defaults (None: required): the constructor
    # Python generates for it sets them (see NNModules.instantiate)
    fields: list[tuple[str, Val | None]] | None = None
    tuple_record: bool = False  # a namedtuple or typing.NamedTuple: iterable, rebuilt by `type(r)(*items)`

    def mro(self) -> list[ClassInfo]:
        """The analysed classes of the method resolution order, as Python's C3 linearisation orders them: with
        several bases, a base shared by two of them comes after both (`class AttentiveGRUDecoder(AttentiveRNNDecoder,
        GRUDecoder)` finds GRUDecoder's `get_module` before their common base's abstract one)."""
        direct = [b.info for b in self.bases if isinstance(b, ClassV)]
        if len(direct) <= 1:
            return [self, *direct[0].mro()] if direct else [self]
        merged = _c3_merge([c.mro() for c in direct] + [direct])
        if merged is None:  # (no consistent order: Python refuses the class; keep a depth-first one)
            out: list[ClassInfo] = [self]
            for d in direct:
                out.extend(c for c in d.mro() if c not in out)
            return out
        return [self, *merged]

    def torch_bases(self) -> list[str]:
        out = []
        for c in self.mro():
            for b in c.bases:
                if isinstance(b, Ref):
                    out.append(b.qual)
        return out

    def find_method(self, name: str) -> FuncInfo | None:
        for c in self.mro():
            if name in c.methods:
                return c.methods[name]
        return None

    def record_fields(self) -> list[tuple[str, Val | None]] | None:
        """The fields the generated constructor takes, base classes' first (None: not a dataclass/NamedTuple)."""
        out: dict[str, Val | None] = {}
        found = False
        for c in reversed(self.mro()):
            if c.fields is not None:
                found = True
                out.update(c.fields)
        return list(out.items()) if found else None

    def class_attr(self, name: str) -> Val | None:
        for c in self.mro():
            if name in c.attrs:
                return c.attrs[name]
        return None


@dataclass(frozen=True, eq=False)
class ClassV(Val):
    info: ClassInfo


class Obj(Val):
    """A (mutable) module or object instance: torch module, nn.Sequential, ModuleList, user class instance."""

    __slots__ = (
        "attrs",
        "cfg",
        "ctor",
        "entries",
        "info",
        "inplace",
        "kind",
        "kw_site",
        "maybe_none",
        "oid",
        "params",
        "positional",
        "qual",
        "training",
    )

    def __init__(self, kind: str, qual: str = "", info: ClassInfo | None = None):
        self.oid = next(_ids)
        self.kind = kind  # "torch" | "sequential" | "modulelist" | "local" | "optimizer" | "ctx"
        self.qual = qual
        self.info = info
        self.attrs: dict[str, Val] = {}
        self.entries: Val = Seq((), UNKNOWN)  # Seq or Alt, for containers
        self.ctor: Site | None = None
        self.kw_site: Site | None = None
        self.positional = False
        self.inplace = False
        self.training: bool | None = None  # None: unknown (default: training)
        self.params: dict[str, T] = {}
        self.cfg: dict[str, Val] = {}
        self.maybe_none = False  # joined with None or an unknown somewhere (`self.bn = BN() if bn else None`)

    def __repr__(self) -> str:  # pragma: no cover
        return f"<Obj {self.kind} {self.qual or (self.info.name if self.info else '')}>"


def copy_contents(c: Obj, o: Obj, value: Any, tensor: Any) -> None:
    """Give ``c`` (a copy of ``o``) ``o``'s flags and its contents passed through ``value`` and ``tensor`` (the
    copies that summaries, and calls kept for the project, make of what a call created)."""
    c.ctor, c.kw_site, c.positional, c.inplace, c.training = o.ctor, o.kw_site, o.positional, o.inplace, o.training
    c.maybe_none = o.maybe_none
    c.attrs = {k: value(v) for k, v in o.attrs.items()}
    c.params = {k: tensor(p) for k, p in o.params.items()}
    c.cfg = {k: value(v) for k, v in o.cfg.items()}
    c.entries = value(o.entries)


@dataclass(frozen=True, eq=False)
class Bound(Val):
    obj: Val
    func: FuncInfo


@dataclass(frozen=True, eq=False)
class Method(Val):
    """``x.name`` where x is a tensor/object and ``name`` is resolved at call time."""

    recv: Val
    name: str
    node: ast.AST | None = None


@dataclass(frozen=True, eq=False)
class Choice(Val):
    """One of several instances of different user classes, as a factory's branches build them (``define_G`` makes
    a ``ResnetGenerator`` or a ``UnetGenerator`` by name). A call, a method or an attribute read runs on each
    alternative from the same state, and the results and states join (see ``Calls.each``)."""

    alts: tuple[Val, ...]


MAX_CHOICE = 4


def _instances(v: Val) -> tuple[Val, ...] | None:
    if isinstance(v, Choice):
        return v.alts
    if isinstance(v, Obj) and (v.info is not None or v.kind == "torch"):
        return (v,)
    return None


def choice(vals: list[Val]) -> Val:
    """Several values, one of which a branch produced: user-class instances of different classes stay apart (a
    Choice); anything else joins as usual."""
    alts: list[Val] = []
    for v in vals:
        for x in (v.alts if isinstance(v, Choice) else (v,)):
            if not any(x is y or (isinstance(x, Bound) and isinstance(y, Bound) and x.func is y.func
                                  and x.obj is y.obj) or (isinstance(x, Ref) and isinstance(y, Ref) and x.qual == y.qual)
                       or (isinstance(x, ClassV) and isinstance(y, ClassV) and x.info is y.info) for y in alts):
                alts.append(x)
    if len(alts) <= 1:
        return alts[0] if alts else UNKNOWN
    if 1 < len(alts) <= MAX_CHOICE and all(_instances(x) is not None or isinstance(x, (Bound, Method, Func))
                                          or _callable(x) for x in alts) \
            and len({(id(x.info) if x.info is not None else x.qual) if isinstance(x, Obj) else id(x)
                     for x in alts}) > 1:
        return Choice(tuple(alts))
    if (rec := join_records(alts)) is not None:
        return rec
    if all(_instances(x) is not None for x in alts):
        return alts[0]  # instances of one class (or too many classes): the first, as a join always did
    out = alts[0]
    for x in alts[1:]:
        out = join(out, x)
    return out


@dataclass(frozen=True, eq=False)
class Params(Val):
    """``model.parameters()``: the objects and leaf storages an optimizer will update."""

    owners: frozenset[Any]


@dataclass(frozen=True, eq=False)
class Partial(Val):
    """``functools.partial(func, *args, **kw)``."""

    func: Val
    args: tuple[Val, ...] = ()
    kw: tuple[tuple[str, Val], ...] = ()
    kw_sites: tuple[tuple[str, Any], ...] = ()  # where each keyword was given (a Site): `inplace=True` in the partial


@dataclass(frozen=True, eq=False)
class ModV(Val):
    """An imported module of the project or a library (``import models``, ``from . import blocks``)."""

    ctx: ModuleCtx


@dataclass(frozen=True, eq=False)
class Super(Val):
    obj: Val
    cls: ClassInfo | None


def join(a: Val, b: Val) -> Val:
    if a is b:
        return a
    if isinstance(a, T) and isinstance(b, T):
        # the kind of view that outranks is told with the op and place that made it
        first, second = (b, a) if b.view in SPECIAL_VIEWS and a.view not in SPECIAL_VIEWS else (a, b)
        return T(a.storages | b.storages, rg=max(a.rg, b.rg), leaf=a.leaf or b.leaf,
                 view=a.view if a.view in SPECIAL_VIEWS else b.view if b.view in SPECIAL_VIEWS else
                 (a.view or b.view), view_op=first.view_op or second.view_op,
                 maybe_tensor=a.maybe_tensor and b.maybe_tensor, maybe_tuple=a.maybe_tuple or b.maybe_tuple,
                 prov=a.prov | b.prov, alias_of=a.alias_of or b.alias_of, alias_site=a.alias_site or b.alias_site,
                 view_site=first.view_site or second.view_site,
                 origin=a.origin or b.origin, noncontig=a.noncontig and b.noncontig, made=max(a.made, b.made),
                 cplx=a.cplx or b.cplx, expanded=a.expanded if a.expanded == b.expanded else None,
                 f32=a.f32 and b.f32, sure=a.sure and b.sure)
    if isinstance(a, T) and b is UNKNOWN:
        return a
    if isinstance(b, T) and a is UNKNOWN:
        return b
    if isinstance(a, T) and isinstance(b, Const):
        return a
    if isinstance(b, T) and isinstance(a, Const):
        return b
    if isinstance(a, Seq) and isinstance(b, Seq) and a.kind == b.kind == "tuple" and a.items is not None \
            and b.items is not None and len(a.items) == len(b.items):
        # `return ind, one_hot` on two paths: a pair whose parts are each either path's
        return Seq.of([join(x, y) for x, y in zip(a.items, b.items)], "tuple")
    if isinstance(a, (Seq, Alt)) and isinstance(b, (Seq, Alt)):
        alts: list[Seq] = []
        for x in (a.alts if isinstance(a, Alt) else (a,)) + (b.alts if isinstance(b, Alt) else (b,)):
            if not any(x is y for y in alts):
                alts.append(x)
        if len(alts) == 1:
            return alts[0]
        if len(alts) == 2 and alts[0].keys is not None and alts[0].keys == alts[1].keys:
            # the same keys on both paths (`kw = dict(a=x) if c else dict(a=y)`): each entry is either path's
            x0, x1 = alts
            assert x0.items is not None and x1.items is not None
            return x0.remap(tuple(join(p, q) for p, q in zip(x0.items, x1.items)))
        if len(alts) <= 6 and all(s.items is not None for s in alts):
            return Alt(tuple(alts))
        el: Val = UNKNOWN
        for i, s in enumerate(alts):
            el = s.elem if i == 0 else join(el, s.elem)
        return Seq(None, el, alts[0].kind)
    if isinstance(a, Const) and isinstance(b, Const):
        if (isinstance(a, Cond) or isinstance(b, Cond)) and boolish(a) and boolish(b):
            return recorded([a, b])  # `recording = False` then, under a test, `recording = x.requires_grad`
        return a if a.value == b.value and a.known and b.known and type(a.value) is type(b.value) else UNKNOWN_NUM
    if isinstance(a, Params) and isinstance(b, Params):
        return Params(a.owners | b.owners)
    if (rec := join_records([a, b])) is not None:
        return rec
    if isinstance(a, (Obj, Choice)) or isinstance(b, (Obj, Choice)):
        keep, other = (a, b) if isinstance(a, (Obj, Choice)) else (b, a)
        if not isinstance(other, (Obj, Choice)):
            # the other path's None (or unknown): `is None` on it stays undecided
            for o in (keep.alts if isinstance(keep, Choice) else (keep,)):
                if isinstance(o, Obj):
                    o.maybe_none = True
        return keep
    if a is UNKNOWN:
        return b
    if b is UNKNOWN:
        return a
    return a


def join_records(vals: list[Val]) -> Obj | None:
    """Records of one class (namedtuple, dataclass, NamedTuple) that two paths made: one record whose fields are
    either path's (`state = LIFState(z, v, i)` in a loop: after it, the state of the entry or of an iteration, whose
    tensors carry that iteration's graph). None unless every value is such a record of one class."""
    first = vals[0] if vals else None
    if not isinstance(first, Obj) or first.kind != "local" or first.info is None \
            or first.info.record_fields() is None or len(vals) < 2:
        return None
    if not all(isinstance(v, Obj) and v.kind == "local" and v.info is first.info for v in vals[1:]):
        return None
    objs = [v for v in vals if isinstance(v, Obj)]
    out = Obj("local", first.qual, first.info)
    out.ctor, out.training, out.maybe_none = first.ctor, first.training, any(o.maybe_none for o in objs)
    for o in objs:
        for k, v in o.attrs.items():
            out.attrs[k] = join(out.attrs[k], v) if k in out.attrs else v
    return out


def join_paths(a: Val, b: Val) -> Val:
    """The value of a name after two paths that bound it differently (the arms of an if, a function's returns):
    instances of different user classes stay apart as a Choice (``net = ResnetGenerator()`` or ``net =
    UnetGenerator()``); anything else joins. (The elements of a list, joined for an unknown index, do not: the
    analysis runs each element of a known list on its own.)"""
    ia, ib = _instances(a), _instances(b)
    if ia is not None and ib is not None:
        return choice([*ia, *ib])
    ca, cb = _callables(a), _callables(b)
    if ca is not None and cb is not None:
        return choice([*ca, *cb])  # `fn = self._gconv if gc else self._fc`: either may run
    return join(a, b)


def _callables(v: Val) -> tuple[Val, ...] | None:
    """Functions, bound methods and classes (the code's own, or torch's by name): what a branch picks to call or
    instantiate later (`norm_act_layer = norm_layer` or a table's entry)."""
    if isinstance(v, Choice) and all(_callable(x) for x in v.alts):
        return v.alts
    if _callable(v):
        return (v,)
    return None


def _functions(v: Val) -> bool:
    """A function or bound method, or a choice of them."""
    return all(isinstance(x, (Func, Bound)) for x in (v.alts if isinstance(v, Choice) else (v,)))


def _callable(v: Val) -> bool:
    if isinstance(v, (Bound, Func, ClassV)):
        return True
    return isinstance(v, Ref) and v.qual.startswith("torch.nn.") and v.qual.rsplit(".", 1)[-1][:1].isupper()


def seq_elem(v: Val) -> Val:
    if isinstance(v, Seq):
        return v.elem
    if isinstance(v, Alt):
        el: Val = UNKNOWN
        for i, s in enumerate(v.alts):
            el = s.elem if i == 0 else choice([el, s.elem]) if _functions(el) and _functions(s.elem) else join(el, s.elem)
        return el
    return UNKNOWN


_BUILTIN_SEQUENCES = frozenset({"builtins.list", "builtins.tuple"})


def list_subclass(o: Val) -> TypeGuard[Obj]:
    """An instance of a workspace subclass of ``list`` or ``tuple`` (``class LogitsProcessorList(list)``): its
    entries are its items, which iterating ``self`` yields."""
    return isinstance(o, Obj) and o.kind == "local" and o.info is not None \
        and not _BUILTIN_SEQUENCES.isdisjoint(o.info.torch_bases())
