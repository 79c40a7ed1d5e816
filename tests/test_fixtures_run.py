"""Labels come from torch: run every fixture and check it raises (or not) what its first line says.

Each fixture starts with ``# torch: error`` or ``# torch: clean``. Error fixtures must die with one of the
autograd in-place RuntimeErrors; clean ones must exit 0. Two worker processes import torch once each and
fork one child per fixture, so the whole set runs in a few seconds.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples"

INPLACE_ERRORS = (
    "modified by an inplace operation",
    "a leaf Variable that requires grad is being used in an in-place operation",
    "is a view and is being modified inplace",
    "is a view and its base or another view of its base has been modified inplace",  # a stale multi-output view
    "A view was created in no_grad mode",
    "A view was created in inference mode and its base or another view of its base has been modified inplace",
    "In-place leakyReLu backward calculation is triggered with a negative slope",
    "In-place elu backward calculation is triggered with a negative slope",
    "functions with out=... arguments don't support automatic differentiation",
    "Inplace update to inference tensor outside InferenceMode",
    "A saved tensor pack hook is modifying its input in place",
    "If your Function modifies inplace an input that is a view of another Tensor",
    "Can't detach views in-place",
    "a leaf Variable that requires grad has been used in an in-place operation",  # mark_dirty on a leaf
    "which was created in no_grad mode",  # a view of a view made under no_grad
    "Trying to use a saved tensor that has been detached in-place",
    "Inference tensors cannot be saved for backward",
    "Some elements marked as dirty during the forward method were not returned as output",
    "ctx.mark_dirty() received a tensor that was not an input",
    "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context",  # an AssertionError
    "more than one element of the written-to tensor refers to a single memory location",  # an expanded tensor
    "some elements of the input tensor and the written-to tensor refer to a single memory location",  # overlap
)

# Imports torch once, then forks a child per script: the child runs it as __main__ with its own stderr.
RUNNER = r"""
import json, os, runpy, signal, sys, tempfile, traceback
import torch

torch.set_num_threads(1)  # tiny scripts; no intra-op thread pool alive across fork()
# Warm up once what every child would otherwise load lazily (optimizers pull in torch._dynamo on first step).
_m = torch.nn.Linear(2, 2)
for _opt in (torch.optim.SGD(_m.parameters(), lr=0.1), torch.optim.Adam(_m.parameters())):
    _m(torch.randn(1, 2)).sum().backward()
    _opt.step()

results = {}
for path in sys.argv[1:]:
    err = tempfile.TemporaryFile(mode="w+")
    pid = os.fork()
    if pid == 0:
        os.dup2(err.fileno(), 2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        signal.alarm(60)
        os.chdir(os.path.dirname(path))
        sys.argv = [path]
        code = 0
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stderr.flush()
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    err.seek(0)
    results[path] = {"rc": os.waitstatus_to_exitcode(status), "stderr": err.read()[-4000:],
                     "cpu": round(usage.ru_utime + usage.ru_stime, 3)}
    err.close()
json.dump(results, sys.stdout)
"""


def label_of(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0].strip()
    assert first in ("# torch: error", "# torch: clean"), f"{path}: first line must be '# torch: error|clean'"
    return first.split(":", 1)[1].strip()


def fixture_files() -> list[Path]:
    files = [*sorted(p for p in FIXTURES.rglob("*.py") if "projects" not in p.relative_to(FIXTURES).parts),
             EXAMPLES / "cnn_inplace.py"]  # multi-file projects: test_fixture_projects.py
    return [p for p in files if p.exists()]


FILES = fixture_files()


@pytest.fixture(scope="module")
def outcomes(venv_python: str) -> dict[str, dict]:
    jobs = 2
    chunks = [[str(p) for p in FILES[i::jobs]] for i in range(jobs)]

    def run(chunk: list[str]) -> dict[str, dict]:
        proc = subprocess.run([venv_python, "-c", RUNNER, *chunk], capture_output=True, text=True, timeout=600,
                              cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    merged: dict[str, dict] = {}
    with ThreadPoolExecutor(jobs) as ex:
        for part in ex.map(run, chunks):
            merged.update(part)
    return merged


def test_fixture_set_is_large_enough() -> None:
    """Every rule has positive and negative fixtures, and every error fixture names its culprit lines."""
    for rule in ("gg101", "gg102", "gg103", "gg104", "gg201", "gg202", "gg301", "gg302"):
        labels = [label_of(p) for p in (FIXTURES / rule).glob("*.py")]
        assert labels.count("error") >= 4 and labels.count("clean") >= 4, rule
    for p in FILES:
        has_marker = "# expect:" in p.read_text(encoding="utf-8")
        assert has_marker == (label_of(p) == "error"), f"{p}: error fixtures need '# expect:' markers, clean ones none"


@pytest.mark.torch
@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_fixture_label_matches_torch(path: Path, outcomes: dict[str, dict]) -> None:
    got = outcomes[str(path)]
    if label_of(path) == "error":
        assert got["rc"] != 0, f"{path.name} is labelled error but ran clean"
        assert any(m in got["stderr"] for m in INPLACE_ERRORS), \
            f"{path.name} failed, but not with an autograd in-place error:\n{got['stderr']}"
    else:
        assert got["rc"] == 0, f"{path.name} is labelled clean but failed:\n{got['stderr']}"
