"""A package named on the command line (or one of its files) resolves its own absolute imports.

``gradguard check ultralytics`` with no git root or configuration above it: the package's modules import each
other as ``from ultralytics.utils.torch_utils import smart_inference_mode``, which Python finds through the
directory that holds the package. The workspace roots include it, found as mypy finds it (up while a directory has
an ``__init__.py``). Each file's label is proven by running it with torch as a module of its package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gradguard.api import check_paths
from gradguard.config import Config
from gradguard.project import workspace_roots

DECORATOR = textwrap.dedent("""
    import functools

    import torch


    def smart_inference_mode(mode=True):
        def decorate(fn):
            if not mode:
                @functools.wraps(fn)
                def disable(*args, **kwargs):
                    with torch.inference_mode(False), torch.no_grad():
                        return fn(*args, **kwargs)

                return disable
            if torch.is_inference_mode_enabled():
                return fn  # already in inference mode when decorated
            return torch.inference_mode()(fn)

        return decorate
""")

ENCODER = textwrap.dedent("""
    import torch
    import torch.nn as nn

    from {pkg}.utils.torch_utils import smart_inference_mode


    class TextEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 4)

        {decorator}
        def encode_text(self, texts):
            feats = self.proj(texts)
            feats /= feats.norm(p=2, dim=-1, keepdim=True)
            return feats


    if __name__ == "__main__":
        enc = TextEncoder()
        enc.encode_text(torch.randn(2, 8)).sum().backward()
""")


def make_package(tmp: Path, pkg: str, decorated: bool) -> Path:
    root = tmp / pkg
    for d in (root, root / "utils", root / "nn"):
        d.mkdir(parents=True)
        (d / "__init__.py").write_text("")
    (root / "utils" / "torch_utils.py").write_text(DECORATOR)
    (root / "nn" / "text_model.py").write_text(
        ENCODER.format(pkg=pkg, decorator="@smart_inference_mode()" if decorated else "# (not decorated)"))
    return root


def run_module(tmp: Path, module: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tmp)}
    return subprocess.run([sys.executable, "-m", module], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=120)


def test_roots_include_the_directory_holding_the_package(tmp_path: Path) -> None:
    root = make_package(tmp_path, "textpkg", decorated=True)
    roots = workspace_roots([str(root)])
    assert roots[0] == str(root) and str(tmp_path) in roots
    roots = workspace_roots([str(root / "nn" / "text_model.py")])
    assert roots[0] == str(root / "nn") and str(tmp_path) in roots
    # a directory that is not a package adds nothing above it
    assert workspace_roots([str(tmp_path)]) == [str(tmp_path)]


@pytest.mark.parametrize("named", ["package", "file"])
def test_decorator_imported_absolutely_from_the_package_is_followed(tmp_path: Path, named: str) -> None:
    root = make_package(tmp_path, "textpkg", decorated=True)
    ran = run_module(tmp_path, "textpkg.nn.text_model")
    # under inference mode nothing is saved for backward, and the output cannot be differentiated at all
    assert "modified by an inplace operation" not in ran.stderr
    assert "does not require grad" in ran.stderr, ran.stderr
    target = root if named == "package" else root / "nn" / "text_model.py"
    found = check_paths([str(target)], Config(), jobs=1, fixes=False, project=True, cache=False)
    assert found == [], [f"{f.path}:{f.line} {f.code} {f.message}" for f in found]


def test_the_same_code_without_the_decorator_is_reported(tmp_path: Path) -> None:
    root = make_package(tmp_path, "textpkg", decorated=False)
    ran = run_module(tmp_path, "textpkg.nn.text_model")
    assert "modified by an inplace operation" in ran.stderr, ran.stderr
    found = check_paths([str(root)], Config(), jobs=1, fixes=False, project=True, cache=False)
    assert [(Path(f.path).name, f.line, f.code) for f in found] == [("text_model.py", 16, "GG101")]


FUNCTIONAL = textwrap.dedent("""
    import torch


    def disparity(a, b):
        a = a - a.mean(dim=1, keepdim=True)
        a /= torch.linalg.norm(a, dim=[1, 2], keepdim=True)
        return (a - b).pow(2).sum()
""")

METRIC = textwrap.dedent("""
    import torch
    import torch.nn as nn

    from {pkg}.functional import disparity


    class Disparity(nn.Module):
        def forward(self, a, b):
            return disparity(a, b)


    if __name__ == "__main__":
        Disparity()(torch.randn(2, 5, 3, requires_grad=True), torch.randn(2, 5, 3)).backward()
""")


def test_a_finding_another_file_revealed_names_its_own_file_one_way(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The functional is reported through the module that calls it with inputs that may require grad (torchmetrics'
    procrustes_disparity, called by its metric's update): its related lines name the file as the finding does."""
    root = tmp_path / "metricpkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "functional.py").write_text(FUNCTIONAL)
    (root / "metric.py").write_text(METRIC.format(pkg="metricpkg"))
    ran = run_module(tmp_path, "metricpkg.metric")
    assert "modified by an inplace operation" in ran.stderr, ran.stderr
    monkeypatch.chdir(tmp_path)
    found = check_paths(["metricpkg"], Config(), jobs=1, fixes=False, project=True, cache=False)
    assert [(f.path, f.line, f.code) for f in found] == [(os.path.join("metricpkg", "functional.py"), 7, "GG101")]
    assert {r.path for r in found[0].related} == {found[0].path}
