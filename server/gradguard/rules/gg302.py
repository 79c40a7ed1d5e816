import os

from gradguard.analysis.hazards import Hazard, Site
from gradguard.rules.base import Rule


def _where(site: Site, here: Site) -> str:
    """``line N``, or ``file.py:N`` for a line in another file than the finding's."""
    return f"line {site.line}" if site.path == here.path else f"{os.path.basename(site.path)}:{site.line}"


class InplaceOnSpecialView(Rule):
    code = "GG302"
    name = "inplace-on-multi-output-view"
    summary = ("In-place op on a view returned by a multi-output view op (`unbind`, `split`, `chunk`, iterating "
               "a tensor), on a view made under `no_grad`, or on a view a custom autograd.Function returned; or "
               "such a view used after the tensor it views changed in place.")
    why = """
`q, k, v = x.chunk(3)`, `x.unbind(0)`, `x.split(n)` and `for row in x` return views produced by one autograd
node with several outputs; autograd cannot rebase such a node when one view changes in place, so torch
raises *Output 0 of UnbindBackward0 is a view and is being modified inplace* at the call, also when only the
write makes the view require grad (`row.copy_(pred[i])` into a buffer that did not). A reshape of such a view that
merges dimensions the split left apart (`rearrange(q, "b n (h d) -> (b h) n d")` of a `chunk(3, dim=-1)` part,
`t.reshape(-1)` of a `chunk(3, dim=1)` part) copies, except where all but one of those dimensions have size 1, a
batch of one: then it is a view, and the same write raises only for that batch size. Likewise a view created under
`no_grad` of a tensor that requires grad cannot be modified in place once grad mode is back on, nor can one of a
tensor that did not, by a write whose operands require grad, nor a view of such a view. A custom Function's
`mark_dirty` is such a write too: on one of several views it is refused the same way.

A custom `autograd.Function` whose forward returns a view (`x.view_as(x)`, `buf.select(0, 0)`) or returns an
input as-is gives a view that autograd cannot rebase either: its custom backward would be replaced, so torch
raises *Output 0 of MyFn is a view and is being modified inplace* (or the no_grad variant of the message). A
Function that `mark_dirty`s an input that is itself a view may return only one tensor. A module with a full
backward hook (`layer.register_full_backward_hook(...)`, as Grad-CAM registers one) runs its inputs and outputs
through such a Function (`BackwardHookFunction`): a `ReLU(inplace=True)` inside the hooked layer or right after it
writes into one of those views.

`ctx.mark_dirty(t)` has a contract that torch checks when the forward returns: every tensor marked dirty must be
returned as an output, the input object itself (*Some elements marked as dirty during the forward method were not
returned as output*), and, with grad on, a view of a tensor the forward made is not an input and is refused
(*ctx.mark_dirty() received a tensor that was not an input*).

Such views also go stale. Once the tensor they view is written in place after they were made (an optimizer
step on the parameter they came from, a write through the base or through another of the views, even under
`no_grad`), the next op with grad on that reads one must rebuild its graph, which torch cannot do for a
multi-output view: *Output 0 of UnbindBackward0 is a view and its base or another view of its base has been
modified inplace*. The classic case keeps `list(weight)` (the rows of a Parameter) for a regulariser across
training steps. Reading the views with grad off, or writing through `.data`, is fine. The finding is on the write
when it is an in-place op in the same file (the use where torch raises is related), and on the use after an
optimizer step.

A view made under `no_grad` (or `inference_mode`) of a tensor that requires grad goes stale the same way: once
that tensor is written in place (in any mode), using the view in an op with grad on raises *A view was created in
no_grad mode and its base or another view of its base has been modified inplace with grad mode enabled*; so does
reading its `.grad_fn`, in any mode. The finding is on that in-place write (the use where torch raises is related).
The view was meant as a constant; take it as one with `.detach()` where it is made (the same values, still no
gradient).

`detach_()` on any view (`x[0]`, `x.view(-1)`, `x.t()`, a `split` output) raises *Can't detach views in-place.
Use detach() instead*, with or without grad: the view shares its autograd metadata with its base.
"""
    fix = """
Rewrite out of place (`q = q * scale`, `h = h.squeeze(0)`), or `.clone()` the view before modifying it. For a
custom Function, return a fresh tensor (`x.clone()`) from its forward, or `.clone()` the view it returns. Next to
a layer with a full backward hook, make the in-place layer out of place (`inplace=False`).
For `v.detach_()` on a view, rebind out of place: `v = v.detach()`. For views used after their tensor
changed, make them again after the change, keep the tensor itself, or make each piece its own single-output view
where they are made (`[w[i] for i in range(len(w))]` for `list(w)`, `x.narrow(...)` for `x.split(n)`), which torch
can rebuild. A Function that modifies an input in place
marks that input dirty (not a tensor its forward made) and returns the input itself (`return a`, not
`a.clone()`).
"""
    INVALID = ("""
import torch

x = torch.randn(4, 6, requires_grad=True) * 1.0
q, k, v = x.chunk(3, dim=-1)
q *= 0.5
(q + k + v).sum().backward()
""", """
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)  # a view: autograd treats the output as made inside the Function

    @staticmethod
    def backward(ctx, grad):
        return grad


x = torch.randn(4, requires_grad=True)
y = Scale.apply(x * 1.0)
y.mul_(2)
y.sum().backward()
""", """
import torch
import torch.nn as nn

w = nn.Parameter(torch.randn(3, 4))
rows = list(w)  # the rows of the weight, views that unbind made
opt = torch.optim.SGD([w], lr=0.1)
for _ in range(2):
    opt.zero_grad()
    sum(r.norm() for r in rows).backward()
    opt.step()
""")
    VALID = ("""
import torch

x = torch.randn(4, 6, requires_grad=True) * 1.0
q, k, v = x.chunk(3, dim=-1)
q = q * 0.5
(q + k + v).sum().backward()
""", """
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


x = torch.randn(4, requires_grad=True)
y = Scale.apply(x * 1.0)
y.mul_(2)
y.sum().backward()
""", """
import torch

x = torch.randn(4, 6, requires_grad=True) * 1.0
q, k, v = x.chunk(3, dim=-1)
q = q.contiguous()  # a chunk of the last dimension is strided: contiguous() copies it
q.mul_(0.5)
(q + k + v).sum().backward()
""", """
import torch
import torch.nn as nn

w = nn.Parameter(torch.randn(3, 4))
rows = [w[i] for i in range(len(w))]  # each row its own view: torch rebuilds it after the step
opt = torch.optim.SGD([w], lr=0.1)
for _ in range(2):
    opt.zero_grad()
    sum(r.norm() for r in rows).backward()
    opt.step()
""")

    @classmethod
    def matches(cls, h: Hazard) -> bool:
        return h.kind in ("view_multi", "view_nograd", "view_fn", "dirty_view", "view_detach", "dirty_not_input",
                          "dirty_not_returned", "view_stale")

    @classmethod
    def message(cls, h: Hazard) -> str:
        src = h.get("view_op") or "a multi-output view op"
        if h.kind == "view_fn":
            return (f"{h.op} modifies `{h.target}` in place, but it is a view returned by {src}: made inside a custom "
                    f"Function's forward (or an input returned as-is), whose backward autograd cannot rewrite")
        if h.kind == "view_stale":
            wop = str(h.get("write_op"))
            wop = wop if " " in wop else f"`{wop}`"
            vs, ws = h.get("view_site"), h.get("write_site")
            made = f" ({_where(vs, h.site)})" if vs is not None else ""
            if h.get("at_write") and not h.get("nograd"):
                us = h.get("use_site")
                use = h.op if " " in h.op else f"`{h.op}`"
                return (f"{wop} modifies in place the tensor of which `{h.target}` is one of several views returned by "
                        f"{src}{made}: torch cannot rebuild the graph of a multi-output view, and raises where {use} "
                        f"uses it ({_where(us, h.site)})")
            if h.get("at_write"):
                us = h.get("use_site")
                use = h.op if " " in h.op else f"`{h.op}`"
                return (f"{wop} modifies in place a tensor that requires grad, of which `{h.target}` is a view made "
                        f"with grad off{made}: with grad on, torch then refuses to use that view, and raises where "
                        f"{use} uses it ({_where(us, h.site)})")
            if h.get("nograd"):
                return (f"{h.op} uses `{h.target}`, a view made with grad off{made} of a tensor that requires grad, "
                        f"after {wop} ({_where(ws, h.site)}) modified the tensor it views in place: with grad on, "
                        f"torch refuses to use such a view, and raises here")
            return (f"{h.op} uses `{h.target}`, one of several views returned by {src}{made}, after {wop} "
                    f"({_where(ws, h.site)}) modified the tensor they view in place: torch cannot rebuild the graph of "
                    f"a multi-output view, and raises here")
        if h.kind == "view_detach":
            return (f"detach_() on `{h.target}`, a view ({src}): torch cannot detach a view in place (it shares "
                    f"autograd metadata with its base)")
        if h.kind == "dirty_view":
            return (f"{h.op} marks `{h.target}` dirty, a view of another tensor, and returns {h.get('outputs')} "
                    f"tensors: a Function that modifies a view in place may return only one")
        if h.kind == "dirty_not_input":
            return (f"mark_dirty(`{h.target}`): `{h.target}` is not an input of the Function but a view made in its "
                    f"forward ({h.get('view_op')}); with grad on, torch refuses it (only inputs the forward modifies in "
                    f"place may be marked dirty)")
        if h.kind == "dirty_not_returned":
            return (f"mark_dirty(`{h.target}`): the input `{h.target}` is marked dirty, but the forward does not return "
                    f"it (a copy or another tensor is not it): torch requires every input modified in place to be "
                    f"returned as an output")
        if h.kind == "view_nograd":
            if h.get("base_rg") is False:
                return (f"{h.op} modifies `{h.target}` in place with grad on, but it is a view made under no_grad ({src}): "
                        f"a write that makes such a view require grad is an error")
            return f"{h.op} modifies `{h.target}` in place, but it is a view made under no_grad ({src}) of a tensor that requires grad"
        return f"{h.op} modifies `{h.target}` in place, but it is one of several views returned by {src}"
