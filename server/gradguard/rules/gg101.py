from gradguard.analysis.hazards import Hazard
from gradguard.rules.base import Rule, at, output_phrase


def _target_phrase(h: Hazard) -> str:
    r = h.saves[0] if h.saves else None
    if r is None:
        return "a tensor saved for backward"
    if r.site == h.site and r.what.startswith("its input"):
        # the op saved one of its own operands, a view of the tensor it writes (`y[:, 1:] *= y[:, :1]`)
        return (f"the storage of another operand of {r.op}, which {r.op} itself saves for backward, before this very "
                f"write changes it")
    out = output_phrase(r)
    if out is not None:
        return f"{out} of {r.op} ({at(r.site, h)}), which {r.op} saved for backward"
    return f"a tensor that {r.op} ({at(r.site, h)}) saved for backward"


class InplaceOnSaved(Rule):
    code = "GG101"
    name = "inplace-on-saved-tensor"
    summary = "In-place method or operator (`x.add_()`, `x += y`, ...) on a tensor that an op saved for backward."
    why = """
Autograd keeps a reference to some inputs or outputs of each op, to compute gradients later: `sigmoid`,
`exp`, `relu` keep their output, `x * w` keeps both factors when both require grad, `Linear` and `LayerNorm`
keep their input. Every tensor has a version counter that each in-place op bumps; when `backward()` unpacks
a saved tensor whose version changed, it raises *one of the variables needed for gradient computation has
been modified by an inplace operation*. `x * 2` saves nothing, so `y = x * 2; y += 1` is fine; `y = x.exp();
y += 1` is not. Optional tensors count too: `CrossEntropyLoss(weight=w)` / `F.cross_entropy(..., weight=w)`,
`BCEWithLogitsLoss(pos_weight=...)` and EmbeddingBag's `per_sample_weights` are saved, so class weights updated in
place before the backward break it. A custom `autograd.Function` whose forward marks its input dirty
(`ctx.mark_dirty(x)`) is an in-place op like torch's own: passing it a tensor that an op saved is reported at the
`apply` call.

The check happens only when a backward unpacks the tensor. After `loss.backward(retain_graph=True)` a write
into what that graph saved breaks a later backward through the same graph (`loss.backward()` again, or the next
step's loss through a state that still carries it); a recurrent state detached after each step's backward is
never unpacked again. Such a write is reported when a later backward goes through the kept graph.

A saved-tensor pack hook (`torch.autograd.graph.saved_tensors_hooks(pack, unpack)`, or
`grad_fn._raw_saved_self.register_hooks`) is handed the very tensor being saved: modifying it in place there
raises *A saved tensor pack hook is modifying its input in place* during the forward. What a pack hook keeps is
unpacked without a version check: saves made under `saved_tensors_hooks`, `save_on_cpu()` or inside a non-reentrant
checkpoint (`checkpoint(fn, x, use_reentrant=False)`, which recomputes them) never raise, whatever is written
afterwards (with a hook that keeps the tensor itself, backward silently reads the new values). The reentrant
checkpoint, the default, runs `fn` again with grad on in backward and backpropagates through that run, so a write
inside `fn` into what `fn` saved raises there.

A graph lives on after a backward that keeps it: `retain_graph=True`, and `torch.autograd.grad(...,
create_graph=True)`, whose `retain_graph` defaults to `create_graph` (the gradient it returns is differentiated
later through the same graph, and unpacks what the forward saved). A parameter's post-accumulate-grad hook
(`p.register_post_accumulate_grad_hook(fn)`, an optimizer step fused into backward) runs after each backward, with
grad off: an in-place update of `p` there is a write between that backward and the next one through a kept graph.
The other way round, a graph that nothing holds any more cannot break: an op whose result never requires grad
(`.item()`, `argmax`), or a helper of the file that keeps nothing of its arguments and returns a number
(`item(torch.norm(t))`), drops the graph of what it was given, and writing into `t` afterwards is fine.

`with torch.autograd.graph.allow_mutation_on_saved_tensors():` lets code modify saved tensors by keeping copies
of them in a table that lives as long as the block: a graph that saved tensors inside the block must be
differentiated inside it too, or torch asserts *Trying to backward outside of the 'allow_mutation_on_saved_tensors'
context in which the graph was originally recorded*.
"""
    fix = """
Rewrite the mutation out of place and keep the name: `x += y` becomes `x = x + y`, `x.mul_(2)` becomes
`x = x.mul(2)`. The saved tensor keeps its value; the name points at a new tensor. (`.detach()` does NOT help:
it shares the version counter.) Call `backward()` inside the `allow_mutation_on_saved_tensors()` block whose graph
it differentiates.
"""
    INVALID = ("""
import torch

logits = torch.randn(4, 3, requires_grad=True)
pred = torch.sigmoid(logits)
pred.clamp_(min=1e-4, max=1 - 1e-4)  # sigmoid saved its output
pred.sum().backward()
""", """
import torch

x = torch.randn(3, requires_grad=True)
y = x.exp()
y += 1  # exp saved its output
y.sum().backward()
""", """
import torch
import torch.nn as nn

ln = nn.LayerNorm(8)
x = torch.randn(2, 8, requires_grad=True) * 1.0
x += ln(x)  # LayerNorm saved its input x
x.sum().backward()
""", """
import torch


def pack(t):
    t.mul_(0.5)  # the tensor autograd is saving
    return t


a = torch.randn(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    y = a.exp()
y.sum().backward()
""", """
import torch

w = torch.randn(3, requires_grad=True)
with torch.autograd.graph.allow_mutation_on_saved_tensors():
    h = w * 1.0
    y = h.exp()
    h.add_(1)
y.sum().backward()  # the block that kept exp's output is over
""")
    VALID = ("""
import torch

x = torch.randn(3, requires_grad=True)
y = x * 2
y += 1  # mul by a constant saves nothing
y.sum().backward()
""", """
import torch

x = torch.randn(3, requires_grad=True)
y = x.exp()
y = y + 1
y.sum().backward()
""", """
import torch


def pack(t):
    t = t.mul(0.5)
    return t


a = torch.randn(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t * 2):
    y = a.exp()
y.sum().backward()
""", """
import torch

w = torch.randn(3, requires_grad=True)
with torch.autograd.graph.allow_mutation_on_saved_tensors():
    h = w * 1.0
    y = h.exp()
    h.add_(1)
    y.sum().backward()
""")

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return (h.kind == "saved" and h.form in ("method", "function", "augassign", "foreach", "apply")) or h.kind in (
            "pack_hook", "am_outside")

    @classmethod
    def message(cls, h: Hazard) -> str:
        if h.kind == "pack_hook":
            return (f"{h.op} modifies `{h.target}` in place inside a saved-tensor pack hook: `{h.target}` is the "
                    f"tensor autograd is saving for backward")
        if h.kind == "am_outside":
            r = h.saves[0]
            return (f"backward() runs after the allow_mutation_on_saved_tensors() block in which {r.op} (line "
                    f"{r.site.line}) saved {r.what} for this graph: torch keeps those tensors only while the block runs")
        what = f"`{h.target} {h.op}`" if h.form == "augassign" else f"{h.op}"
        return f"{what} modifies `{h.target}` in place, but it is {_target_phrase(h)}"
