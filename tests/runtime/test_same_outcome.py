"""The doctor never changes what a script does: every case of every corpus the suite can reach runs twice, plainly
and under the doctor, and must end the same way.

Compared per script: the exit status, the exception type and the first line of its message (anomaly mode, which
the doctor turns on, only rewords torch's closing hint: "Hint: enable anomaly detection..." becomes "Hint: the
backtrace further above..."), and, for scripts that exit 0, everything they print on stdout (losses, gradients,
parameters; object addresses in reprs are masked).

Corpora: the labelled corpus and PyTorch's own autograd tests (../shared/corpus, ../shared/torchtests, next to the
repository), tests/fixtures, tests/runtime/cases and examples/. ../shared/wild is not runnable (its projects need
data, weights or a GPU) and is not here.

Speed: two server processes (one plain, one for the doctor) import torch once and fork one child per script; the
doctor's child runs the script through the doctor's own entry point (``_child.main``), which installs anomaly
mode, the write log and the backward wrapper in that child. The whole set takes about a minute on two cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent.parent
SHARED = Path(os.environ.get("GRADGUARD_SHARED", ROOT.parent / "shared"))
CHILD = ROOT / "server" / "gradguard" / "runtime" / "_child.py"


def _shared_cases(name: str) -> list[Path]:
    manifest = SHARED / name / "manifest.json"
    if not manifest.is_file():
        return []
    data = json.loads(manifest.read_text(encoding="utf-8"))
    cases = data["cases"] if isinstance(data, dict) else data
    return [SHARED / name / c["file"] for c in cases]


def all_scripts() -> tuple[list[Path], list[str]]:
    missing = [n for n in ("corpus", "torchtests") if not (SHARED / n / "manifest.json").is_file()]
    scripts = [*_shared_cases("corpus"), *_shared_cases("torchtests"),
               *sorted((ROOT / "tests" / "fixtures").rglob("*.py")),
               *sorted((ROOT / "tests" / "runtime" / "cases").glob("*.py")),
               *sorted((ROOT / "examples").glob("*.py"))]
    return [p for p in scripts if p.is_file()], missing


SCRIPTS, MISSING = all_scripts()

# One server: imports torch, then forks a child per script (cwd = the script's folder, stdout to a file, stderr
# discarded). MODE=plain runs the script with runpy like `python script.py`; MODE=doctor runs it through the
# doctor's child entry point, which writes its facts (exit status, exception) to a JSON file.
SERVER = r"""
import importlib.util, json, os, runpy, signal, sys, tempfile, time
mode, child_path = sys.argv[1], sys.argv[2]
import torch

torch.set_num_threads(1)
# What every child would otherwise load lazily, once (optimizers import torch._dynamo on their first step).
_m = torch.nn.Linear(2, 2)
for _opt in (torch.optim.SGD(_m.parameters(), lr=0.1), torch.optim.Adam(_m.parameters())):
    _m(torch.randn(1, 2)).sum().backward()
    _opt.step()
del _m, _opt
spec = importlib.util.spec_from_file_location("gradguard_runtime_child", child_path)
child = importlib.util.module_from_spec(spec)
spec.loader.exec_module(child)
base_path = list(sys.path)
results = {}
for path in sys.argv[3:]:
    out = tempfile.NamedTemporaryFile(mode="w+", delete=False)
    facts_path = out.name + ".facts.json"
    status_path = out.name + ".status.json"
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(out.fileno(), 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        signal.alarm(120)
        os.chdir(os.path.dirname(path))
        sys.path[:] = [os.path.dirname(path), *base_path[1:]]
        if mode == "doctor":
            child._MAIN_PID = os.getpid()
            os.environ["GRADGUARD_RUN_TRACE"] = "1"
            code = child.main([facts_path, "path", path])
            sys.stdout.flush()
            os._exit(code)
        sys.argv = [path]
        code, exc = 0, None
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException as e:
            code = 1
            exc = {"type": type(e).__name__, "message": str(e)}
        sys.stdout.flush()
        with open(status_path, "w") as fh:
            json.dump({"exception": exc, "exit_code": code}, fh)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    out.seek(0)
    stdout = out.read()
    out.close()
    facts = None
    for p in (facts_path, status_path):
        try:
            with open(p) as fh:
                facts = json.load(fh)
        except (OSError, ValueError):
            pass
    for p in (out.name, facts_path, status_path):
        try:
            os.unlink(p)
        except OSError:
            pass
    exc = (facts or {}).get("exception")
    results[path] = {"rc": rc, "stdout": stdout[-20000:], "s": round(time.perf_counter() - t0, 3),
                     "type": exc["type"] if exc else None, "message": exc["message"] if exc else None}
json.dump(results, sys.stdout)
"""

_HINT = re.compile(r"\s*Hint: .*$")
_ADDR = re.compile(r" (object )?at 0x[0-9a-fA-F]+")


def first_line(message: str | None) -> str | None:
    if message is None:
        return None
    line = message.strip().split("\n")[0]
    return _HINT.sub("", line)


@pytest.fixture(scope="module")
def outcomes(venv_python: str) -> dict[str, dict[str, dict[str, Any]]]:
    paths = [str(p) for p in SCRIPTS]

    def serve(mode: str) -> dict[str, Any]:
        env = dict(os.environ)
        env.pop("GRADGUARD_RUN_CHECK_NAN", None)
        proc = subprocess.run([venv_python, "-c", SERVER, mode, str(CHILD), *paths], capture_output=True,
                              text=True, timeout=1800, cwd=ROOT, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)

    with ThreadPoolExecutor(2) as ex:
        plain, doctor = ex.map(serve, ("plain", "doctor"))
    return {"plain": plain, "doctor": doctor}


def test_every_corpus_is_reachable() -> None:
    if MISSING:
        reason = f"../shared/{', ../shared/'.join(MISSING)} not found next to the repository ({SHARED})"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " (CI=true: every corpus must be checked)")
        pytest.skip(reason)
    assert len(SCRIPTS) >= 65 + 40 + 100


@pytest.mark.parametrize("script", SCRIPTS, ids=[os.path.relpath(p, ROOT.parent) for p in SCRIPTS])
def test_same_outcome(script: Path, outcomes: dict[str, dict[str, dict[str, Any]]]) -> None:
    plain = outcomes["plain"][str(script)]
    doctor = outcomes["doctor"][str(script)]
    assert doctor["rc"] == plain["rc"], (plain, doctor)
    assert doctor["type"] == plain["type"], (plain, doctor)
    assert first_line(doctor["message"]) == first_line(plain["message"]), (plain["message"], doctor["message"])
    if plain["rc"] == 0:
        assert _ADDR.sub(" at 0x?", doctor["stdout"]) == _ADDR.sub(" at 0x?", plain["stdout"])
