"""The workspace caller index: code only used under no_grad from other files runs under no_grad.

Labels of the same shapes are proven by running them in tests/fixtures/projects/tracer_called_*; here the index's
own behaviour: what counts as a use, instances bound to names, and answers that follow edits to the callers.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from gradguard.api import check_text
from gradguard.project import Project, SearchPath

TRACER = textwrap.dedent("""
    import torch.nn as nn


    class Tracer(nn.Module):
        def forward(self, points):
            dist = points.norm(dim=-1)
            dist[dist > 1.0] = 1.0
            return dist


    def march(points):
        d = points.norm(dim=-1)
        d[d > 1.0] = 1.0
        return d
""")

RENDERER = textwrap.dedent("""
    import torch
    import torch.nn as nn

    from tracer import Tracer, march


    class Renderer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tracer = Tracer()
            self.head = nn.Linear(3, 1)

        def forward(self, points):
            with torch.no_grad():
                depth = self.tracer(points) + march(points)
            return self.head(points).squeeze(-1) * depth
""")


def workspace(tmp_path: Path) -> Project:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tracer.py").write_text(TRACER)
    (tmp_path / "renderer.py").write_text(RENDERER)
    return Project(SearchPath(roots=[str(tmp_path)]))


def findings(project: Project, tmp_path: Path) -> set[tuple[int, str]]:
    r = check_text(TRACER, str(tmp_path / "tracer.py"), project=project)
    return {(f.line, f.code) for f in r.findings}


def test_module_and_function_used_only_under_no_grad(tmp_path: Path) -> None:
    project = workspace(tmp_path)
    index = project.callers
    assert index.only_under_no_grad("Tracer", True)
    assert index.only_under_no_grad("march", False)
    assert not index.only_under_no_grad("Renderer", True)  # never used at all: no evidence
    assert str(tmp_path / "renderer.py") in index.witnesses("Tracer", True)
    assert findings(project, tmp_path) == set()
    r = check_text(TRACER, str(tmp_path / "tracer.py"), project=project)
    assert str(tmp_path / "renderer.py") in r.deps  # an edit to the caller re-checks (and re-caches) the callee


def test_a_use_with_grad_anywhere_keeps_autograd_on(tmp_path: Path) -> None:
    project = workspace(tmp_path)
    assert findings(project, tmp_path) == set()
    # the editor's buffer: the caller now also runs the tracer and march with autograd on
    project.set_overlay(str(tmp_path / "renderer.py"), RENDERER.replace(
        "        return self.head(points)", "        extra = self.tracer(points) + march(points)\n"
        "        return extra + self.head(points)"))
    assert not project.callers.only_under_no_grad("Tracer", True)
    assert not project.callers.only_under_no_grad("march", False)
    assert findings(project, tmp_path) == {(8, "GG103"), (14, "GG103")}


def test_a_new_caller_file_is_seen(tmp_path: Path) -> None:
    project = workspace(tmp_path)
    assert project.callers.only_under_no_grad("march", False)
    other = tmp_path / "train.py"
    other.write_text("from tracer import march\n\nloss = march(x).sum()\n")
    project.invalidate([str(other)])
    assert not project.callers.only_under_no_grad("march", False)


def test_a_file_that_only_mentions_no_grad_is_not_scanned_for_candidates(tmp_path: Path) -> None:
    # a docstring or comment naming torch.no_grad opens no context: nothing in the file runs under it, so the index
    # does not scan it up front (an edit to such a file costs no re-scan of its text)
    (tmp_path / "notes.py").write_text('"""Segments run in :func:`torch.no_grad` (see below)."""\n\n\n'
                                       "def march(x):\n    return x  # not under torch.no_grad here\n",
                                       encoding="utf-8")
    (tmp_path / "caller.py").write_text("import torch\nfrom notes import march\n\n\nwith torch.no_grad():\n"
                                        "    march(1)\n", encoding="utf-8")
    project = Project(SearchPath(roots=[str(tmp_path)]))
    index = project.callers
    assert index.only_under_no_grad("march", False)
    notes = str((tmp_path / "notes.py").resolve())
    assert notes not in index._marked and str((tmp_path / "caller.py").resolve()) in index._marked


GATE = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def scores(self, x):
            s = torch.sigmoid(self.proj(x))
            s.masked_fill_(s < 0.1, 0.0)
            return s

        def forward(self, x):
            with torch.no_grad():
                keep = self.scores(x) > 0.5
            return self.proj(x) * keep
""")


def test_a_method_its_file_only_calls_under_no_grad_is_called_with_grad_elsewhere(tmp_path: Path) -> None:
    """gate.py only calls `scores` under no_grad; a training script calls it with autograd on (an auxiliary loss),
    so its in-place mask is reported. A variable named `scores` elsewhere is not a call of it."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "gate.py").write_text(GATE)
    (tmp_path / "report.py").write_text("scores = [1, 2]\nprint(sorted(scores))\n")
    project = Project(SearchPath(roots=[str(tmp_path)]))
    path = str(tmp_path / "gate.py")
    assert check_text(GATE, path, project=project).findings == []
    train = "from gate import Gate\n\ngate = Gate()\nloss = gate.scores(x).mean()\nloss.backward()\n"
    (tmp_path / "train.py").write_text(train)
    project.invalidate([str(tmp_path / "train.py")])
    got = check_text(GATE, path, project=project)
    assert [(f.code, f.line) for f in got.findings] == [("GG101", 13)]
    assert str(tmp_path / "train.py") in got.deps  # an edit of the script re-checks the gate


def test_an_imported_files_no_grad_answer_follows_edits_of_other_files(tmp_path: Path) -> None:
    """gate.py is read as an import of main.py. When train.py starts calling `scores` with grad on, the next check
    of main.py takes gate.py's answer anew, and depends on train.py (an edit there re-checks main.py)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "gate.py").write_text(GATE)
    main = "import torch\nfrom gate import Gate\n\ngate = Gate()\nout = gate(torch.randn(2, 4)).sum()\n"
    path = str(tmp_path / "main.py")
    project = Project(SearchPath(roots=[str(tmp_path)]))
    assert str(tmp_path / "train.py") not in check_text(main, path, project=project).deps
    (tmp_path / "train.py").write_text("from gate import Gate\n\nGate().scores(x).mean().backward()\n")
    project.invalidate([str(tmp_path / "train.py")])
    assert str(tmp_path / "train.py") in check_text(main, path, project=project).deps


def test_calls_of_a_file_without_contexts_are_read_without_the_full_scan() -> None:
    """A file that opens no no_grad context calls everything outside one: the light reading gives the names the
    full scan gives, and a docstring with an unbalanced bracket does not make a ``def`` look like a call of it."""
    from gradguard.project.context_scan import NO_GRAD_BLOCK, NO_GRAD_DECORATOR, called_names, scan_contexts

    lines = textwrap.dedent('''
        import torch
        from helpers import build, make_head  # an import calls nothing


        def train(model, data):
            """Steps (see `run(`."""
            for x in data:
                loss = model(x).sum()  # report(loss)
                loss.backward()
            return "step(" + str(len(data))


        def evaluate(model):
            return build(model).score()
    ''').split("\n")
    got = called_names(lines)
    assert got == {"model", "sum", "backward", "str", "len", "build", "score"}
    assert got == scan_contexts(lines, NO_GRAD_BLOCK, NO_GRAD_DECORATOR, words=True).called_outside


SIBLING_MODEL = textwrap.dedent("""
    import torch.nn as nn


    def adagrad_step(grad, state_sum, nodes, lr):
        state_sum.index_add_(0, nodes, (grad * grad).mean(1))
        std_values = state_sum[nodes].sqrt_().add_(1e-10).unsqueeze(1)
        return lr * grad / std_values


    class Embedder(nn.Module):
        def fast_learn(self, nodes, state_sum):
            return adagrad_step(-self.emb(nodes), state_sum, nodes, 0.1)
""")

SIBLING_MAIN = textwrap.dedent("""
    import torch
    from model import Embedder

    with torch.no_grad():
        Embedder().fast_learn(torch.arange(4), torch.zeros(6))
""")

SIBLING_TRAINER = textwrap.dedent("""
    import torch


    def adagrad_step(grad, state_sum, nodes, lr):
        return lr * grad


    def run():
        w = torch.randn(4, 3, requires_grad=True)
        adagrad_step(w * 2.0, torch.zeros(6), torch.arange(4), 0.1).sum().backward()
""")


def test_a_sibling_defining_its_own_function_is_a_dependency(tmp_path: Path) -> None:
    # trainer.py calls an `adagrad_step` of its own with grad on: that vetoes nothing for model.py's, which only
    # runs under no_grad. But the answer rests on trainer.py's `def`: once it imports model's instead, model.py's
    # function runs with grad on (its sqrt_ output is then modified by add_), so trainer.py is a dependency.
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(SIBLING_MODEL)
    (tmp_path / "main.py").write_text(SIBLING_MAIN)
    (tmp_path / "trainer.py").write_text(SIBLING_TRAINER)
    project = Project(SearchPath(roots=[str(tmp_path)]))
    path = str(tmp_path / "model.py")
    r = check_text(SIBLING_MODEL, path, project=project)
    assert {(f.line, f.code) for f in r.findings} == set()
    assert str(tmp_path / "trainer.py") in r.deps
    project.set_overlay(str(tmp_path / "trainer.py"), SIBLING_TRAINER.replace(
        "def adagrad_step(grad, state_sum, nodes, lr):\n    return lr * grad\n", "from model import adagrad_step\n"))
    r = check_text(SIBLING_MODEL, path, project=project)
    assert (7, "GG101") in {(f.line, f.code) for f in r.findings}


def test_a_call_of_another_module_function_of_the_same_name_keeps_no_grad(tmp_path: Path) -> None:
    """`march` of tracer.py runs only under no_grad. A file that calls another library's `march` (`geo.march(x)`)
    or a method of that name does not call it; one that calls it through tracer's module (`tr.march(x)`) does."""
    project = workspace(tmp_path)
    other = tmp_path / "walk.py"
    other.write_text("import geo\n\n\nclass Walker:\n    def march(self, x):\n        return x\n\n\n"
                     "loss = geo.march(x).sum() + Walker().march(x).sum()\n")
    project.invalidate([str(other)])
    assert findings(project, tmp_path) == set()
    other.write_text("import tracer as tr\n\nloss = tr.march(x).sum()\n")
    project.invalidate([str(other)])
    assert findings(project, tmp_path) == {(14, "GG103")}
