"""Not a bug: prints facts that a dispatch mode could silently change (version counters, view-ness, inference
tensors, requires_grad) after many kinds of ops, in normal, no_grad and inference mode. The same-outcome test
compares this output with and without the doctor."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)


def facts(name, t):
    try:
        version = t._version
    except RuntimeError:
        version = "-"
    print(name, version, t._is_view(), t.is_inference(), t.requires_grad, t.is_leaf, tuple(t.shape),
          round(float(t.detach().double().sum()), 6))


def run(ctx_name, ctx):
    a = torch.randn(4, 6, requires_grad=True)
    with ctx():
        b = a * 1
        views = {"view": b.view(24), "view_as": b.view_as(b), "reshape": b.reshape(6, 4), "t": b.t(),
                 "slice": b[1:], "select": b[0], "unsqueeze": b.unsqueeze(0), "expand": b[:1].expand(3, 6),
                 "flatten": b.flatten(), "narrow": b.narrow(1, 0, 2), "transpose": b.transpose(0, 1),
                 "unflatten": b.unflatten(1, (2, 3)), "as_strided": b.as_strided((2, 2), (1, 1)),
                 "movedim": b.movedim(0, 1), "diagonal": b.diagonal(), "real": b.view_as_real() if b.is_complex() else b}
        for k, v in views.items():
            facts(f"{ctx_name} {k}", v)
        for i, v in enumerate(b.unbind()):
            facts(f"{ctx_name} unbind{i}", v)
        for i, v in enumerate(b.split(2)):
            facts(f"{ctx_name} split{i}", v)
        c = b.clone()
        c.add_(1)
        c.mul_(2)
        c[0] = 3
        facts(f"{ctx_name} inplace", c)
        d = [b.clone(), b.clone()]
        torch._foreach_add_(d, 1.0)
        torch._foreach_mul_(d, [torch.ones(4, 6), torch.ones(4, 6)])
        torch._foreach_addcmul_(d, d, d, value=0.5)
        torch._foreach_zero_(d)
        facts(f"{ctx_name} foreach0", d[0])
        facts(f"{ctx_name} foreach1", d[1])
        e = b.clone()
        torch.exp(b, out=e) if not b.requires_grad else e.copy_(b.exp())
        facts(f"{ctx_name} out", e)
        f = b.clone()
        F.relu(f, inplace=True)
        F.dropout(f, 0.5, training=True, inplace=True)
        facts(f"{ctx_name} functional_inplace", f)
        g = b.detach()
        g.add_(1)
        facts(f"{ctx_name} detach_then_add", g)
        facts(f"{ctx_name} base_after", b)
        bn = torch.nn.BatchNorm1d(6)
        y = bn(b)
        facts(f"{ctx_name} bn_out", y)
        facts(f"{ctx_name} bn_mean", bn.running_mean)
        facts(f"{ctx_name} bn_batches", bn.num_batches_tracked.float())


run("normal", torch.enable_grad)
run("no_grad", torch.no_grad)
run("inference", torch.inference_mode)
p = [torch.nn.Parameter(torch.randn(3, 3)) for _ in range(3)]
for impl in ({"foreach": False}, {"foreach": True}, {"fused": True}):
    opt = torch.optim.Adam(p, lr=0.1, **impl)
    sum((w * w).sum() for w in p).backward()
    opt.step()
    for i, w in enumerate(p):
        facts(f"adam{impl} p{i}", w)
        facts(f"adam{impl} exp_avg{i}", opt.state[w]["exp_avg"])
    sgd = torch.optim.SGD(p, lr=0.1, momentum=0.9, **impl)
    sum((w * w).sum() for w in p).backward()
    sgd.step()
    for i, w in enumerate(p):
        facts(f"sgd{impl} p{i}", w)
