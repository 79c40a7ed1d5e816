"""Related locations that point at the fix: the call that passed a saved tensor into the function that writes it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from gradguard.api import check_paths, check_source
from gradguard.config import Config
from gradguard.model import Finding

SOURCE = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class PositionEmbedding(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.emb = nn.Parameter(torch.zeros(1, n))

        def forward(self, data):
            data += self.emb
            return data


    class Layer(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.pos = PositionEmbedding(n)
            self.fc = nn.Linear(n, n)

        def forward(self, data):
            return self.fc(self.pos(data))


    class Net(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.inp = nn.Linear(n, n)
            self.layer = Layer(n)

        def forward(self, x):
            data = torch.relu(self.inp(x))
            return self.layer(data)


    Net(4)(torch.randn(2, 4)).sum().backward()
""")


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(SOURCE.splitlines(), 1) if ln.strip() == text)


def test_write_in_a_callee_points_at_the_outermost_call_that_passed_the_saved_tensor() -> None:
    run = subprocess.run([sys.executable, "-c", SOURCE], capture_output=True, text=True, timeout=120)
    assert "modified by an inplace operation" in run.stderr  # torch agrees it breaks
    found = [f for f in check_source(SOURCE, "net.py") if f.code == "GG101"]
    assert [f.line for f in found] == [_line("data += self.emb")]
    calls = [r for r in found[0].related if "is called here" in r.message]
    # the write is two calls down from relu; the clone belongs where Net.forward hands `data` on
    assert [(r.line, r.message) for r in calls] == [
        (_line("return self.layer(data)"), "`self.layer` is called here with a tensor that relu saved")]


def test_no_call_site_when_the_tensor_was_saved_in_the_same_function() -> None:
    src = "import torch\nx = torch.randn(3, requires_grad=True)\ny = torch.relu(x * 2)\ny += 1\ny.sum().backward()\n"
    found = check_source(src, "a.py")
    assert [f.code for f in found] == ["GG101"]
    assert not [r for r in found[0].related if "is called here" in r.message]


STEP_SOURCE = textwrap.dedent("""
    import torch
    import torch.nn as nn


    def update(actor, critic, actor_opt, critic_opt, obs, target):
        q = critic(torch.cat([obs, actor(obs)], 1))
        critic_loss = (q - target).pow(2).mean()
        actor_loss = -q.mean()
        critic_opt.zero_grad()
        critic_loss.backward(retain_graph=True)
        critic_opt.step()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()


    actor, critic = nn.Linear(3, 2), nn.Linear(5, 1)
    update(actor, critic, torch.optim.SGD(actor.parameters(), lr=0.1), torch.optim.SGD(critic.parameters(), lr=0.1),
           torch.randn(4, 3), torch.randn(4, 1))
""")


def test_a_step_points_at_the_forward_it_made_stale() -> None:
    run = subprocess.run([sys.executable, "-c", STEP_SOURCE], capture_output=True, text=True, timeout=120)
    assert "modified by an inplace operation" in run.stderr  # torch agrees it breaks
    lines = STEP_SOURCE.splitlines()
    found = [f for f in check_source(STEP_SOURCE, "agent.py") if f.code == "GG202"]
    assert [lines[f.line - 1].strip() for f in found] == ["critic_opt.step()"]
    forward = [r for r in found[0].related if "took in the parameters" in r.message]
    assert [lines[r.line - 1].strip() for r in forward] == ["q = critic(torch.cat([obs, actor(obs)], 1))"]


GAN_SOURCE = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Disc(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 8), nn.Tanh())
            self.out = nn.Linear(8, 1)

        def forward(self, x):
            return self.out(self.body(x))


    def train(gen, disc, g_opt, d_opt, batch):
        fake = gen(torch.randn(4, 2))
        d_fake = disc(fake.detach())
        g_score = disc(fake)
        d_loss = d_fake.mean() - disc(batch).mean()
        d_loss.backward()
        d_opt.step()
        g_loss = -g_score.mean()
        g_loss.backward()
        g_opt.step()


    gen, disc = nn.Linear(2, 3), Disc()
    train(gen, disc, torch.optim.Adam(gen.parameters()), torch.optim.Adam(disc.parameters()), torch.randn(4, 3))
""")


def test_a_step_points_at_the_call_in_its_own_function_that_ran_the_stale_forward() -> None:
    """The layer that took the weights in is in the model's forward, further up the same file; the statement to move
    is the call of the model in the training function."""
    run = subprocess.run([sys.executable, "-c", GAN_SOURCE], capture_output=True, text=True, timeout=120)
    assert "modified by an inplace operation" in run.stderr  # torch agrees it breaks
    lines = GAN_SOURCE.splitlines()
    found = [f for f in check_source(GAN_SOURCE, "gan.py") if f.code == "GG202"]
    assert [lines[f.line - 1].strip() for f in found] == ["d_opt.step()"]
    calls = [lines[r.line - 1].strip() for r in found[0].related if "runs here, before the step" in r.message]
    assert calls == ["g_score = disc(fake)"]
    took = [lines[r.line - 1].strip() for r in found[0].related if "took in the parameters" in r.message]
    assert took == ["return self.out(self.body(x))"]


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _related(found: list[Finding], code: str) -> list[tuple[str, int, str]]:
    return [(Path(r.path).name, r.line, r.message) for f in found if f.code == code for r in f.related]


def test_an_inplace_flag_given_in_a_partial_points_at_the_partial() -> None:
    """`partial(nn.ReLU, inplace=True)` in a table of another file: the flag's origin is that keyword, not the call
    that made the layer."""
    case = FIXTURES / "projects" / "act_partial_factory"
    found = check_paths([str(case)], Config(), jobs=1, fixes=False, project=True, cache=False)
    layers = (case / "layers.py").read_text().splitlines()
    flag_line = next(i for i, line in enumerate(layers, 1) if "inplace=True" in line)
    rel = _related(found, "GG102")
    assert ("layers.py", flag_line, "ReLU(inplace=True): its `inplace` flag is set to True here") in rel
    assert any(name == "layers.py" and "was created here" in msg for name, _ln, msg in rel)


def test_an_inplace_flag_switched_after_construction_points_at_the_switch() -> None:
    """`m.inplace = True` over the model's modules: the finding is on that line (what makes the call write in place,
    and what the fix changes); the call that then writes in place is related."""
    path = FIXTURES / "gg102" / "pos_dropout_switched_inplace_over_modules.py"
    text = path.read_text()
    lines = text.splitlines()
    switch = next(i for i, line in enumerate(lines, 1) if "m.inplace = True" in line)
    call = next(i for i, line in enumerate(lines, 1) if "return self.drop(h)" in line)
    found = check_source(text, str(path))
    assert [f.line for f in found if f.code == "GG102"] == [switch]
    assert (path.name, call, "Dropout(inplace=True) is called here, in place") in _related(found, "GG102")
    assert f"called at line {call}" in next(f.message for f in found if f.code == "GG102")
    fix = next(x for f in found if f.code == "GG102" for x in f.fixes if x.preferred)
    assert fix.kind == "remove-inplace" and [(e.line, e.text) for e in fix.edits] == [(switch, "False")]


VIEW_OF_LEAF_SOURCE = textwrap.dedent("""
    import math

    import torch.nn as nn

    conv = nn.Conv2d(8, 18, 1)
    b = conv.bias.view(3, -1)
    b[:, 4] += math.log(8 / 640 ** 2)
""")


def test_a_write_into_an_item_of_a_view_of_a_leaf_points_at_the_view() -> None:
    """`b = conv.bias.view(3, -1)` then `b[:, 4] += ...`: the fix goes where the view is taken (`.data.view`, or
    under no_grad), so that line is related."""
    run = subprocess.run([sys.executable, "-c", VIEW_OF_LEAF_SOURCE], capture_output=True, text=True, timeout=120)
    assert "a view of a leaf Variable that requires grad" in run.stderr  # torch agrees it breaks
    lines = VIEW_OF_LEAF_SOURCE.splitlines()
    found = [f for f in check_source(VIEW_OF_LEAF_SOURCE, "head.py") if f.code == "GG301"]
    assert [lines[f.line - 1].strip() for f in found] == ["b[:, 4] += math.log(8 / 640 ** 2)"]
    views = [lines[r.line - 1].strip() for r in found[0].related if "view of the leaf is taken here" in r.message]
    assert views == ["b = conv.bias.view(3, -1)"]
