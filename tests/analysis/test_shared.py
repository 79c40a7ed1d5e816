"""Call summaries shared between the analyses of one project (gradguard.analysis.shared).

A kept call must give each later analysis exactly what running the call would: the findings of a whole-project
check are the same with the store and without it (a store that keeps nothing), over a fixture package and over
real projects. The store must also be used (later files replay what earlier ones ran), must forget what a changed
file's calls did, and must never be replayed into the analysis of a file the call read.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from gradguard.analysis import functions, interp
from gradguard.api import check_paths, check_text
from gradguard.config import Config
from gradguard.model import Finding
from gradguard.project import Project, SearchPath
from gradguard.project.shared_store import SharedStore
from shared_data import SHARED, require

BLOCKS = """\
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim, act=True):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.act = nn.ReLU() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.fc(x))


def double(x):
    return torch.sigmoid(x) * 2


def scale_(x):
    x.mul_(2)
    return x
"""

TRAIN = """\
import torch
from lib.blocks import Block, double, scale_

model = Block(8)
x = torch.randn(4, 8)
y = model(x)
y += 1  # the ReLU saved its output: error
z = double(torch.randn(3, requires_grad=True))
w = scale_(torch.randn(3)) * z
w.sum().backward()
"""

EVAL = """\
import torch
from lib.blocks import Block, double

model = Block(8)
with torch.no_grad():
    out = model(torch.randn(2, 8))
out += 1  # made under no_grad: fine
h = Block(8)(torch.randn(2, 8))
h.add_(1)  # the ReLU saved it: error
s = double(torch.randn(3, requires_grad=True))
s.sum().backward()
"""


def _sig(fs: Sequence[Finding]) -> list[tuple[object, ...]]:
    return sorted((f.path, f.code, f.line, f.column, f.message,
                   tuple((r.path, r.line, r.column, r.message) for r in f.related),
                   tuple(sorted(f.facts.items(), key=str))) for f in fs)


def _package(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "blocks.py").write_text(BLOCKS)
    for i in range(3):
        (tmp_path / f"train{i}.py").write_text(TRAIN)
        (tmp_path / f"eval{i}.py").write_text(EVAL)
    return tmp_path


def _check(root: Path, keep: bool) -> tuple[list[tuple[object, ...]], SharedStore]:
    project = Project(SearchPath(roots=[str(root)]))
    if not keep:
        project.shared = SharedStore(0)
    found = check_paths([str(root)], Config(), jobs=1, fixes=False, project=project)
    return _sig(found), project.shared


def test_later_files_replay_and_find_the_same(tmp_path: Path) -> None:
    root = _package(tmp_path)
    off, empty = _check(root, keep=False)
    on, store = _check(root, keep=True)
    assert on == off
    assert len(empty) == 0
    assert len(store) > 0 and store.hits > 0
    codes = [(Path(str(s[0])).name, s[1]) for s in on]
    assert ("train0.py", "GG101") in codes and ("eval0.py", "GG101") in codes


def test_a_kept_call_is_not_replayed_into_a_file_it_read(tmp_path: Path) -> None:
    root = _package(tmp_path)
    project = Project(SearchPath(roots=[str(root)]))
    blocks = str(root / "lib" / "blocks.py")
    text = (root / "train0.py").read_text()
    check_text(text, str(root / "train0.py"), fixes=False, project=project)
    assert len(project.shared) > 0
    # the block's own file, checked after calls into it were kept: its findings are its own analysis'
    extra = BLOCKS + "\nm = Block(4)\nq = m(torch.randn(2, 4))\nq.relu_()\n"
    project.set_overlay(blocks, extra)
    with_store = check_text(extra, blocks, fixes=False, project=project)
    alone = Project(SearchPath(roots=[str(root)]))
    alone.shared = SharedStore(0)
    alone.set_overlay(blocks, extra)
    assert _sig(with_store.findings) == _sig(check_text(extra, blocks, fixes=False, project=alone).findings)


def test_a_changed_file_drops_the_calls_that_read_it(tmp_path: Path) -> None:
    root = _package(tmp_path)
    project = Project(SearchPath(roots=[str(root)]))
    train = str(root / "train0.py")
    first = check_text(TRAIN, train, fixes=False, project=project)
    assert len(project.shared) > 0
    assert str(root / "lib" / "blocks.py") in first.deps
    # Block now ends in Sigmoid, which also saves its output; scale_ no longer writes in place
    changed = BLOCKS.replace("nn.ReLU()", "nn.Sigmoid()").replace("x.mul_(2)", "x = x * 2")
    project.set_overlay(str(root / "lib" / "blocks.py"), changed)
    assert len(project.shared) == 0
    again = check_text(TRAIN, train, fixes=False, project=project)
    fresh = Project(SearchPath(roots=[str(root)]))
    fresh.shared = SharedStore(0)
    fresh.set_overlay(str(root / "lib" / "blocks.py"), changed)
    assert _sig(again.findings) == _sig(check_text(TRAIN, train, fixes=False, project=fresh).findings)
    assert any("Sigmoid" in f.message or "sigmoid" in f.message for f in again.findings)


def test_the_store_starts_again_when_full() -> None:
    store = SharedStore(2)
    store.put("a", frozenset({"/x.py"}), 1)
    store.put("b", frozenset({"/y.py"}), 2)
    store.put("c", frozenset({"/y.py"}), 3)
    assert len(store) == 1 and store.get("c") == 3 and store.get("a") is None
    store.changed(["/y.py"], listing_changed=False)
    assert len(store) == 0


@pytest.mark.parametrize("case", ["mae-dfer", "vq-codebook-mask", "fast-transformers-recurrent", "holocron-losses"])
def test_real_projects_find_the_same_with_the_store(case: str) -> None:
    require(SHARED / "wild" / case / "project")
    root = SHARED / "wild" / case / "project"
    off, _ = _check(root, keep=False)
    on, store = _check(root, keep=True)
    assert on == off
    assert store.hits > 0


def test_editor_rechecks_agree_with_a_fresh_project(tmp_path: Path) -> None:
    """The editor keeps one project: re-checks of an edited file replay what the earlier checks kept."""
    root = _package(tmp_path)
    project = Project(SearchPath(roots=[str(root)]))
    path = str(root / "eval0.py")
    text = EVAL
    for edit in ("", "\nk = Block(8, act=False)(torch.randn(2, 8))\nk.add_(1)\n",
                 "\nv = double(torch.randn(3, requires_grad=True))\nv.mul_(2)\n"):
        text += edit
        project.set_overlay(path, text)
        got = check_text(text, path, fixes=False, project=project, incremental=True)
        fresh = Project(SearchPath(roots=[str(root)]))
        fresh.shared = SharedStore(0)
        fresh.set_overlay(path, text)
        assert _sig(got.findings) == _sig(check_text(text, path, fixes=False, project=fresh).findings)
    assert project.shared.hits > 0


CHOICE_BLOCK = '''\
import os
import torch
import torch.nn as nn


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return x * (torch.rand_like(x) > self.p)


class Block(nn.Module):
    def __init__(self, dim, drop=0.0):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.drop = DropPath(drop) if drop > 0.0 else nn.Identity()

    def forward(self, x):
        return self.drop(self.fc(x)).sigmoid()


block = Block(8, drop=float(os.environ.get("DROP", "0")))
x = torch.randn(2, 8, requires_grad=True)
outs = [block(x) for _ in range(4)]
z = block(x)
z.add_(1)
'''


def test_calls_on_an_object_holding_a_choice_are_summarised(monkeypatch: pytest.MonkeyPatch) -> None:
    """``self.drop`` is a DropPath or an Identity (a Choice): the block's calls in the same state are replayed,
    not run again, and the replay leaves what running it leaves (sigmoid's saved output, written by ``add_``)."""
    from gradguard.analysis import functions

    runs: list[str] = []
    inline = functions.Functions.inline

    def counting(self, fi, *a, **k):  # type: ignore[no-untyped-def]
        runs.append(fi.qual)
        return inline(self, fi, *a, **k)

    monkeypatch.setattr(functions.Functions, "inline", counting)
    r = check_text(CHOICE_BLOCK, "choice_block.py", fixes=False, project=None)
    assert [(f.line, f.code) for f in r.findings] == [(29, "GG101")]
    # the first call (x not yet saved) and the second (x saved by the first's Linear) run; the other four replay
    assert runs.count("Block.forward") == 2


STEP_HELPER = textwrap.dedent("""
    def update_params(optim, loss, retain_graph=False):
        optim.zero_grad()
        loss.backward(retain_graph=retain_graph)
        optim.step()
""")

AGENT = textwrap.dedent("""
    import torch
    import torch.nn as nn

    from nets import Net
    from utils import update_params


    class Agent:
        def __init__(self):
            self.net = Net()
            self.head_optim = torch.optim.SGD(self.net.head.parameters(), lr=0.1)
            self.body_optim = torch.optim.SGD(self.net.body.parameters(), lr=0.1)

        def learn(self, x):
            h, out = self.net(x)
            shared = out.pow(2).mean()
            update_params(self.head_optim, out.mean() + shared, retain_graph=True)
            update_params(self.body_optim, h.mean() + shared)
""")

NETS = textwrap.dedent("""
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            h = self.body(x)
            a = h * 2
            b = a + 1
            c = b - 1
            d = c * 0.5
            out = self.head(d)
            return h, out
""")


def test_a_small_step_helper_is_followed_after_a_large_callee_used_the_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A function's budget for other modules' code (common.FOREIGN_PER_FUNCTION) is spent on the model; the small
    helper that steps an optimizer between two backward passes is still followed (fqf-iqn-qrdqn's update_params)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "utils.py").write_text(STEP_HELPER)
    (tmp_path / "nets.py").write_text(NETS)
    monkeypatch.setattr(interp, "FOREIGN_PER_FUNCTION", 6)  # the model's forward alone uses more
    project = Project(SearchPath(roots=[str(tmp_path)]))
    got = check_text(AGENT, str(tmp_path / "agent.py"), project=project)
    assert [(f.code, f.line) for f in got.findings] == [("GG202", 18)]
    monkeypatch.setattr(functions, "SMALL_FOREIGN_SLACK", 0)
    project = Project(SearchPath(roots=[str(tmp_path)]))
    assert check_text(AGENT, str(tmp_path / "agent.py"), project=project).findings == []
