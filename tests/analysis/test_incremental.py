"""Incremental re-analysis of an edited file (gradguard.analysis.incremental).

The editor's re-check of an edited file replays the function runs whose chunks the edit did not touch. Its
findings must be exactly a full analysis' findings: checked here over seeded random edits (comments, inserted and
deleted lines, code changes) of the analyzer fixtures, whose findings move with every line shift, and over real
model code. And it must actually skip work: an edit of one function re-runs that function, not the others.
"""

from __future__ import annotations

import importlib.util
import random
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from gradguard.analysis import interp
from gradguard.api import check_text
from gradguard.model import Finding
from gradguard.project import Project, SearchPath
from shared_data import SHARED, require

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _sig(fs: Sequence[Finding]) -> list[tuple[object, ...]]:
    return sorted((f.code, f.line, f.column, f.end_line, f.end_column, f.message,
                   tuple((r.path, r.line, r.column, r.message) for r in f.related),
                   tuple(sorted(f.facts.items(), key=str))) for f in fs)


def _edit(lines: list[str], rng: random.Random, kind: int) -> None:
    i = rng.randrange(len(lines))
    if kind == 0:
        lines[i] = lines[i].rstrip("\n") + "  # edited\n"
    elif kind == 1:
        lines.insert(i, "\n")  # every later line moves
    elif kind == 2:
        lines[i] = lines[i].replace("inplace=False", "inplace=True").replace(" + ", " += ", 1)
    elif lines[i].strip():
        del lines[i]


def _compare(paths: Sequence[Path], root: Path, edits: int, seed: int) -> int:
    project = Project(SearchPath(roots=[str(root)]))
    rng = random.Random(seed)
    checked = 0
    for p in paths:
        path = str(p)
        lines = p.read_text(encoding="utf-8").splitlines(True)
        project.set_overlay(path, "".join(lines))
        check_text("".join(lines), path, fixes=False, project=project, incremental=True)
        for k in range(edits):
            _edit(lines, rng, k % 4)
            text = "".join(lines)
            project.set_overlay(path, text)
            inc = check_text(text, path, fixes=False, project=project, incremental=True)
            full = check_text(text, path, fixes=False, project=project)
            assert _sig(inc.findings) == _sig(full.findings), (path, k, "".join(lines))
            assert set(full.deps) <= set(inc.deps), path
            checked += 1
    return checked


@pytest.mark.parametrize("seed", [1, 2])
def test_edits_of_the_fixtures_give_a_full_analysis_findings(seed: int) -> None:
    files = sorted(FIXTURES.glob("gg*/pos_*.py"))
    assert len(files) > 60
    assert _compare(files, FIXTURES, edits=4, seed=seed) == 4 * len(files)


def test_edits_of_real_model_code_give_a_full_analysis_findings() -> None:
    # real research code with findings (../shared/wild: the fix commits' projects), and timm's models when installed
    wild = require(SHARED / "wild", "the real fix-commit projects")
    groups = [(wild / n / "project", fs) for n, fs in (
        ("fast-transformers-recurrent", ["fast_transformers/recurrent/attention/linear_attention.py",
                                         "fast_transformers/attention/linear_attention.py"]),
        ("mae-dfer", ["modeling_finetune.py"]),
        ("vq-codebook-mask", ["vector_quantize_pytorch/vector_quantize_pytorch.py"]))]
    spec = importlib.util.find_spec("timm")  # read, never imported (it needs torchvision)
    if spec is not None and spec.submodule_search_locations:
        models = Path(next(iter(spec.submodule_search_locations))) / "models"
        groups.append((models, ["resnet.py", "vision_transformer.py", "efficientnet.py"]))
    for root, names in groups:
        files = [root / n for n in names]
        assert _compare(files, root, edits=6, seed=3) == 6 * len(files)


TWO_MODELS = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Gate(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            g = torch.sigmoid(self.fc(x))
            g.mul_(2.0)
            return g * x


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            return self.fc(x).relu() + x


    def helper(x):
        return x * 2
""")


def _runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ran: list[str] = []
    orig = interp.Analyzer.standalone

    def standalone(self: interp.Analyzer, fi: interp.FuncInfo) -> None:
        ran.append(f"{fi.cls.name + '.' if fi.cls else ''}{getattr(fi.node, 'name', '?')}")
        orig(self, fi)

    monkeypatch.setattr(interp.Analyzer, "standalone", standalone)
    return ran


def test_an_edit_reruns_only_what_reads_the_edited_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "models.py")
    project = Project(SearchPath(roots=[str(tmp_path)]))
    ran = _runs(monkeypatch)
    project.set_overlay(path, TWO_MODELS)
    first = check_text(TWO_MODELS, path, fixes=False, project=project, incremental=True)
    assert [(f.code, f.line) for f in first.findings] == [("GG101", 13)]
    assert sorted(ran) == ["Block.__init__", "Block.forward", "Gate.__init__", "Gate.forward", "helper"]

    ran.clear()  # edit Block (two lines longer): Gate's runs are replayed, its finding moves with nothing
    edited = TWO_MODELS.replace("return self.fc(x).relu() + x", "y = self.fc(x).relu()\n\n        return y + x")
    project.set_overlay(path, edited)
    second = check_text(edited, path, fixes=False, project=project, incremental=True)
    assert sorted(ran) == ["Block.__init__", "Block.forward"]
    assert [(f.code, f.line) for f in second.findings] == [("GG101", 13)]

    ran.clear()  # a line inserted above Gate: nothing re-runs, the finding moves down
    shifted = edited.replace("import torch.nn as nn\n", "import torch.nn as nn\n\n", 1)
    project.set_overlay(path, shifted)
    third = check_text(shifted, path, fixes=False, project=project, incremental=True)
    assert ran == []
    assert [(f.code, f.line) for f in third.findings] == [("GG101", 14)]

    ran.clear()  # a module-level statement changed: everything runs again
    imports = shifted.replace("import torch\n", "import torch\nimport math\n", 1)
    project.set_overlay(path, imports)
    check_text(imports, path, fixes=False, project=project, incremental=True)
    assert len(ran) == 5


def test_a_run_that_reused_what_the_module_computed_reads_its_chunks() -> None:
    """The module's own run (`main()` under `__main__`) is the first to call the factory chain; a function run that
    reuses its results reads the factories' chunks too, so that deleting `return model` in one re-runs `main`."""
    fixture = FIXTURES / "gg101" / "pos_factory_chain_of_wrappers.py"
    path = str(fixture)
    text = fixture.read_text(encoding="utf-8")
    project = Project(SearchPath(roots=[str(FIXTURES)]))
    project.set_overlay(path, text)
    first = check_text(text, path, fixes=False, project=project, incremental=True)
    assert [f.code for f in first.findings] == ["GG101"]
    edited = text.replace("        p.requires_grad_(True)\n    return model\n", "        p.requires_grad_(True)\n")
    assert edited != text  # `build` returns None now
    project.set_overlay(path, edited)
    inc = check_text(edited, path, fixes=False, project=project, incremental=True)
    full = check_text(edited, path, fixes=False, project=project)
    assert _sig(inc.findings) == _sig(full.findings) == []


def test_another_file_changing_drops_the_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "models.py")
    other = str(tmp_path / "other.py")
    project = Project(SearchPath(roots=[str(tmp_path)]))
    ran = _runs(monkeypatch)
    project.set_overlay(path, TWO_MODELS)
    check_text(TWO_MODELS, path, fixes=False, project=project, incremental=True)
    project.set_overlay(other, "x = 1\n")
    ran.clear()
    text = TWO_MODELS + "\n"
    project.set_overlay(path, text)
    check_text(text, path, fixes=False, project=project, incremental=True)
    assert len(ran) == 5  # it may import the changed file: nothing is replayed


def test_the_cli_keeps_no_memo(tmp_path: Path) -> None:
    path = tmp_path / "models.py"
    path.write_text(TWO_MODELS, encoding="utf-8")
    project = Project(SearchPath(roots=[str(tmp_path)]))
    check_text(TWO_MODELS, str(path), fixes=False, project=project)
    assert project.memo(str(path)) is None
