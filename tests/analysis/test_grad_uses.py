"""Functions whose results the workspace differentiates run with inputs that may require grad.

The label of the shape is proven by running it in tests/fixtures/projects/differentiated_energy(_clean); here the
scan's own behaviour (what reaches a sink, through which names) and the index's answers as the workspace changes.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from gradguard.api import check_text
from gradguard.project import Project, SearchPath
from gradguard.project.grad_uses import ANY_ARGS, differentiated_names, mentions_sink, passes


def names(src: str) -> set[str]:
    return set(differentiated_names(ast.parse(textwrap.dedent(src))))


@pytest.mark.parametrize(("src", "expected"), [
    ("e = energy(x)\ne.backward()\n", {"energy"}),
    ("loss = mse(a, b) + reg.penalty(w)\nloss.backward()\n", {"mse", "penalty"}),
    ("total = 0\nfor x in xs:\n    total += term(x)\ntotal.backward()\n", {"term"}),
    ("out = model(x)\nloss = out.sum()\nloss.backward()\n", {"model", "sum"}),
    ("fn = potential\ne = fn(x)\ne.backward()\n", {"fn", "potential"}),
    ("import torch\ng = torch.autograd.grad(energy(x), x)\n", {"energy"}),
    ("import torch\ne = energy(x)\ng, = torch.autograd.grad(outputs=e, inputs=x)\n", {"energy"}),
    ("from torch.autograd import grad as agrad\ne = energy(x)\nf = agrad(e, x)\n", {"energy"}),
    ("scaler.scale(compute_loss(b)).backward()\n", {"scale", "compute_loss"}),
    ("loss = criterion(p, y)\naccelerator.backward(loss)\n", {"criterion"}),
    ("def training_step(self, batch):\n    loss = self.loss_fn(batch)\n    self.manual_backward(loss)\n",
     {"loss_fn"}),
    ("def step(a, b):\n    e = energy(a)\n    e.backward()\n\ndef other(a):\n    e = metric(a)\n    return e\n",
     {"energy"}),  # scopes do not leak: `e` in other() comes from metric, which nothing differentiates
])
def test_what_reaches_a_sink(src: str, expected: set[str]) -> None:
    assert names(src) == expected


@pytest.mark.parametrize("src", [
    "score = metric(pred, y)\nprint(score)\n",
    "def grad(x):\n    return x\n\ngrad(energy(x))\n",  # a local `grad` is no sink
    "x.grad = compute(x)\n",
    "with torch.no_grad():\n    out = model(x)\n",
])
def test_what_does_not(src: str) -> None:
    assert names(src) == set()


def test_how_the_differentiated_calls_pass_arguments() -> None:
    got = differentiated_names(ast.parse(textwrap.dedent("""
        a = lse(src, index)
        b = lse(src, index, 3, out=buf)
        c = other(*xs)
        fn = energy
        (a + b + c + fn(x)).backward()
    """)))
    assert got["lse"] == {(2, frozenset()), (3, frozenset({"out"}))}
    assert got["other"] == {ANY_ARGS}  # unpacked: any parameter may be passed
    assert got["energy"] == {ANY_ARGS}  # called under another name
    assert passes(got["lse"], 1, "index") and passes(got["lse"], 2, "size") and passes(got["lse"], -1, "out")
    assert not passes(frozenset({(2, frozenset())}), 3, "out")
    assert passes(got["other"], 7, "anything")


def test_mentions_sink() -> None:
    assert mentions_sink("loss.backward()")
    assert mentions_sink("torch.autograd.grad(e, x)")
    assert mentions_sink("from torch.autograd import grad\ngrad(e, x)")
    assert not mentions_sink("p.grad = None\n")


ENERGY = textwrap.dedent("""
    import torch


    def angle_energy(coords, idx, k):
        ab = coords[idx[:, 1]] - coords[idx[:, 0]]
        ab /= torch.norm(ab, dim=1).unsqueeze(1)
        return (k * ab.sum(dim=1) ** 2).sum()
""")


def check_energy(project: Project, tmp_path: Path) -> tuple[set[tuple[int, str]], list[str]]:
    r = check_text(ENERGY, str(tmp_path / "energy.py"), project=project)
    return {(f.line, f.code) for f in r.findings}, list(r.deps)


def test_a_differentiated_function_takes_inputs_that_may_require_grad(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "energy.py").write_text(ENERGY)
    project = Project(SearchPath(roots=[str(tmp_path)]))
    # nothing in the workspace differentiates it, and the file builds no graph: its inputs are data
    assert check_energy(project, tmp_path)[0] == set()
    test = tmp_path / "test_energy.py"
    test.write_text("from energy import angle_energy\n\n\ndef test_grad(coords, idx, k):\n"
                    "    e = angle_energy(coords, idx, k)\n    e.backward()\n")
    project.invalidate([str(test)])
    assert project.callers.differentiated("angle_energy") == [str(test)]
    found, deps = check_energy(project, tmp_path)
    assert found == {(7, "GG101")}
    assert str(test) in deps  # an edit to the test file re-checks (and re-caches) the energy
    # an edit that leaves the differentiated names as they were (a keystroke in a comment) keeps the table
    table = project.callers._differentiated
    project.set_overlay(str(test), test.read_text() + "# more\n")
    assert project.callers.differentiated("angle_energy") == [str(test)]
    assert project.callers._differentiated is table
    # the editor's buffer: the test now only prints the energy
    project.set_overlay(str(test), "from energy import angle_energy\n\nprint(angle_energy(1, 2, 3))\n")
    assert project.callers.differentiated("angle_energy") == []
    assert check_energy(project, tmp_path)[0] == set()


def test_only_the_workspace_is_read(tmp_path: Path) -> None:
    # a library's code that differentiates something of the same name says nothing about the user's function
    lib = tmp_path / "site"
    lib.mkdir()
    (lib / "trainer_lib.py").write_text("def fit(angle_energy, x):\n    e = angle_energy(x)\n    e.backward()\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("")
    (ws / "energy.py").write_text(ENERGY)
    (ws / "train.py").write_text("import trainer_lib\nfrom energy import angle_energy\n\n"
                                 "trainer_lib.fit(angle_energy, 1)\n")
    project = Project(SearchPath(roots=[str(ws)], site=[str(lib)]))
    assert project.callers.differentiated("angle_energy") == []
    assert check_energy(project, ws)[0] == set()


LOSSES = textwrap.dedent("""
    import torch


    def {name}(logits, target):
        probs = torch.sigmoid(logits)
        probs[target == 255] = 0
        return (probs * target).mean()
""")


@pytest.mark.parametrize(("name", "found"), [
    ("soft_dice_loss", True), ("compute_loss", True), ("loss_fn", True), ("losses_for_batch", True),
    ("dice_score", False),  # a metric: nothing says its inputs require grad
    ("glossary", False), ("lossless_resize", False),  # `loss` as part of another word
])
def test_a_loss_helper_by_name_is_differentiated(name: str, found: bool) -> None:
    r = check_text(LOSSES.format(name=name), "losses.py", project=None)
    assert [(f.line, f.code) for f in r.findings] == ([(7, "GG103")] if found else [])


def test_the_index_keeps_no_trees(tmp_path: Path) -> None:
    # the editor's workspace index reads every file that mentions a sink; only the analysis keeps parsed trees
    (tmp_path / "pyproject.toml").write_text("")
    for i in range(3):
        (tmp_path / f"train{i}.py").write_text(f"e = energy{i}(x)\ne.backward()\n")
    project = Project(SearchPath(roots=[str(tmp_path)]))
    assert project.callers.differentiated("energy1") == [str(tmp_path / "train1.py")]
    sf = project.source(str(tmp_path / "train1.py"))
    assert sf is not None and not sf._parsed
