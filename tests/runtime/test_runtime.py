"""The runtime doctor (`gradguard run`), end to end: every test runs real scripts with torch in a child process.

Scripts run two at a time (a small thread pool, which also exercises ``run_script`` from worker threads).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from gradguard.runtime.api import run_script

pytestmark = [pytest.mark.torch, pytest.mark.slow]

HERE = Path(__file__).parent
CASES = HERE / "cases"
ROOT = HERE.parent.parent
GRADGUARD = [sys.executable, "-m", "gradguard"]


def _corpus() -> Path | None:
    for p in (os.environ.get("GRADGUARD_CORPUS"), ROOT.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if p and (Path(p) / "manifest.json").is_file():
            return Path(p)
    return None


CORPUS = _corpus()


def _markers(path: Path) -> dict[str, list[int]]:
    """Lines labelled ``# gg: culprit`` / ``# gg: saved`` in a case file."""
    out: dict[str, list[int]] = {"culprit": [], "saved": []}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = re.search(r"# gg: ([a-z ]+)$", line)
        if m:
            for word in m.group(1).split():
                out.setdefault(word, []).append(i)
    return out


def _run_many(jobs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    def one(item: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        name, kw = item
        chunks: list[str] = []
        rep = run_script(on_output=chunks.append, timeout=kw.pop("timeout", 240), **kw)
        rep["_output"] = "".join(chunks)
        return name, rep

    with ThreadPoolExecutor(2) as ex:
        return dict(ex.map(one, jobs.items()))


# --------------------------------------------------------------------------------------------------------------
# Seeds and other case scripts of this repository.

SEED_CASES = sorted(p.name for p in CASES.glob("seed_*.py"))
# One script per error family (the in-place call raising, leaky_relu_ in backward, foreach writes, a view whose base
# was written, a compiled LSTM): each names its culprit (and saving) lines with `# gg:` markers.
FAMILY_CASES = sorted(p.name for p in CASES.glob("family_*.py"))


@pytest.fixture(scope="module")
def case_reports() -> dict[str, dict[str, Any]]:
    jobs = {name: {"path": str(CASES / name)} for name in [*SEED_CASES, *FAMILY_CASES]}
    jobs["train_deterministic.py"] = {"path": str(CASES / "train_deterministic.py")}
    jobs["compiled_and_hop.py"] = {"path": str(CASES / "compiled_and_hop.py")}
    jobs["dataloader_workers.py"] = {"path": str(CASES / "dataloader_workers.py")}
    jobs["raises_other.py"] = {"path": str(CASES / "raises_other.py")}
    jobs["prints_a_lot.py"] = {"path": str(CASES / "prints_a_lot.py")}
    return _run_many(jobs)


def _lines(items: list[dict[str, Any]], path: Path) -> set[int]:
    return {int(c["line"]) for c in items if os.path.realpath(c["path"]) == os.path.realpath(path)}


@pytest.mark.parametrize("name", SEED_CASES)
def test_seed_case(case_reports: dict[str, dict[str, Any]], name: str) -> None:
    rep = case_reports[name]
    path = CASES / name
    marks = _markers(path)
    if not marks["culprit"]:
        assert rep["status"] == "clean", rep
        assert rep["culprits"] == [] and rep["diagnostics"] == []
        return
    assert rep["status"] == "error", (rep["status"], rep.get("error"), rep["_output"][-2000:])
    assert rep["exit_code"] == 1
    assert "modified by an inplace operation" in rep["error"]["message"]
    assert set(marks["culprit"]) <= _lines(rep["culprits"], path), rep["culprits"]
    assert set(marks["saved"]) <= _lines(rep["saved_by"], path), rep["saved_by"]
    # every culprit is also a diagnostic of the same shape as `gradguard check --format json`, plus the source
    for d in rep["diagnostics"]:
        assert set(d) >= {"path", "line", "column", "end_line", "end_column", "code", "severity", "message",
                          "related", "fixes"}
        assert d["source"] == "gradguard-run" and re.fullmatch(r"GG\d{3}", d["code"])
    assert _lines(rep["diagnostics"], path) >= set(marks["culprit"])
    # the tensor, its versions and the fix are in the text report
    from gradguard.runtime.report import format_text

    text = format_text(rep)
    assert "expected version" in text and "fix (GG" in text


@pytest.mark.parametrize("name", FAMILY_CASES)
def test_family_case(case_reports: dict[str, dict[str, Any]], name: str) -> None:
    """Every family gets a line: the culprit (and, where there is one, the saving line), the tensor, the fix."""
    from gradguard.runtime.report import format_text

    rep = case_reports[name]
    path = CASES / name
    marks = _markers(path)
    if not marks["culprit"]:  # family_compiled_lstm: not an in-place error, and it must fail as without the doctor
        assert rep["status"] == "failed" and rep["exit_code"] == 1, rep.get("error")
        assert rep["error"]["message"].startswith("Trying to backward through the graph a second time"), rep["error"]
        assert "expected Tensor()" not in rep["_output"]
        return
    assert rep["status"] == "error", (rep["status"], rep.get("error"), rep["_output"][-2000:])
    assert rep["exit_code"] == 1
    assert set(marks["culprit"]) <= _lines(rep["culprits"], path), rep["culprits"]
    assert set(marks["saved"]) <= _lines(rep["saved_by"], path), rep["saved_by"]
    for d in rep["diagnostics"]:
        assert re.fullmatch(r"GG\d{3}", d["code"]) and "Fix: " in d["message"], d
    text = format_text(rep)
    assert "fix (GG" in text and "not found" not in text, text


def test_seed_000_names_keras_lines(case_reports: dict[str, dict[str, Any]]) -> None:
    """The user's line (model.fit), the Keras line that assigns the state, and the LSTM call that saved it."""
    rep = case_reports["seed_000_keras_stateful_lstm.py"]
    assert rep["status"] == "error"
    culprit = rep["culprits"][0]
    assert culprit["path"].endswith("seed_000_keras_stateful_lstm.py")
    assert "model.fit" in next(f["code"] for f in culprit["frames"] if f["kind"] == "user")
    lib = [f for f in culprit["frames"] if f["kind"] == "lib"]
    assert any(f["path"].endswith(os.path.join("keras", "src", "layers", "rnn", "rnn.py"))
               and "self_state.assign(state)" in f["code"] for f in lib), lib
    saved = rep["saved_by"][0]
    assert saved["path"].endswith("seed_000_keras_stateful_lstm.py")
    assert any("backend.lstm(" in f["code"] for f in saved["frames"]), saved["frames"]
    related = " ".join(r["message"] for d in rep["diagnostics"] for r in d["related"])
    assert "self_state.assign(state)" in related and "keras" in related


@pytest.mark.parametrize("name", ["train_deterministic.py", "compiled_and_hop.py"])
def test_clean_results_bit_identical(case_reports: dict[str, dict[str, Any]], name: str) -> None:
    """Losses, gradients and parameters of clean scripts are bit-identical with and without the doctor."""
    rep = case_reports[name]
    assert rep["status"] == "clean" and rep["exit_code"] == 0 and rep["error"] is None, rep["_output"][-2000:]
    assert rep["stats"]["traced"] and rep["stats"]["ops"] > 10
    plain = subprocess.run([sys.executable, str(CASES / name)], capture_output=True, text=True,
                           timeout=240, check=True).stdout
    assert "0x" in plain
    ours = [ln for ln in rep["_output"].splitlines() if "0x" in ln or "digest" in ln]
    assert ours == [ln for ln in plain.splitlines() if "0x" in ln or "digest" in ln]
    if name == "train_deterministic.py":
        assert rep["stats"]["ops"] > 100 and rep["stats"]["writes"] > 0
        assert rep["stats"]["overhead_estimate_s"] >= 0


def test_dataloader_workers(case_reports: dict[str, dict[str, Any]]) -> None:
    rep = case_reports["dataloader_workers.py"]
    assert rep["status"] == "clean", rep["_output"][-2000:]
    plain = subprocess.run([sys.executable, str(CASES / "dataloader_workers.py")], capture_output=True, text=True,
                           timeout=240, check=True).stdout
    assert rep["_output"].strip() == plain.strip()


def test_failure_for_another_reason(case_reports: dict[str, dict[str, Any]]) -> None:
    rep = case_reports["raises_other.py"]
    assert rep["status"] == "failed" and rep["exit_code"] == 1
    assert rep["error"]["type"] == "RuntimeError" and "mat1 and mat2" in rep["error"]["message"]
    assert rep["culprits"] == [] and rep["diagnostics"] == []
    out = rep["_output"]
    assert "before the error" in out
    # the traceback is passed through as Python prints it: starts at the script, no runpy/gradguard frames
    assert "Traceback (most recent call last):" in out and 'raises_other.py", line 7' in out
    assert "runpy" not in out and "_child.py" not in out
    assert rep["traceback"][0]["line"] == 7


def test_prints_a_lot(case_reports: dict[str, dict[str, Any]]) -> None:
    rep = case_reports["prints_a_lot.py"]
    assert rep["status"] == "clean"
    out = rep["_output"]
    lines = [ln for ln in out.splitlines() if ln.startswith("line ")]
    assert lines == [f"line {i}" for i in range(20000)]
    assert out.count("err ") == 20 and "done" in out


# --------------------------------------------------------------------------------------------------------------
# The labelled corpus: every error case still fails and names a labelled culprit line; every clean case stays clean.

def _corpus_cases() -> list[dict[str, Any]]:
    if CORPUS is None:
        return []
    data = json.loads((CORPUS / "manifest.json").read_text())
    return data["cases"] if isinstance(data, dict) else data


CORPUS_CASES = _corpus_cases()


@pytest.fixture(scope="module")
def corpus_reports() -> dict[str, dict[str, Any]]:
    assert CORPUS is not None
    return _run_many({c["id"]: {"path": str(CORPUS / c["file"]), "cwd": str(CORPUS / "cases")} for c in CORPUS_CASES})


@pytest.mark.skipif(CORPUS is None, reason="the shared corpus is not next to this checkout")
@pytest.mark.parametrize("case", CORPUS_CASES, ids=[c["id"] for c in CORPUS_CASES])
def test_corpus_case(corpus_reports: dict[str, dict[str, Any]], case: dict[str, Any]) -> None:
    rep = corpus_reports[case["id"]]
    assert CORPUS is not None
    path = CORPUS / case["file"]
    if case["expected"] == "error":
        assert rep["status"] == "error", (rep["status"], rep.get("error"))
        assert rep["exit_code"] != 0
        # torch's own message (the hint differs: anomaly mode is on under the doctor)
        observed = case["observed_error_first_line"].removeprefix("RuntimeError: ")
        assert rep["error"]["message"].split(" Hint:")[0] == observed.split(" Hint:")[0]
        named = _lines(rep["culprits"], path)
        assert named & set(case["culprit_lines"]), (named, case["culprit_lines"])
    else:
        assert rep["status"] == "clean", (rep["status"], rep.get("error"), rep["_output"][-1500:])
        assert rep["exit_code"] == 0 and rep["culprits"] == [] and rep["diagnostics"] == []


# --------------------------------------------------------------------------------------------------------------
# PyTorch's own autograd tests (public third): every error case names a labelled line, every clean case stays clean.

TORCHTESTS = ROOT.parent / "shared" / "torchtests"


def _torchtests_cases() -> list[dict[str, Any]]:
    if not (TORCHTESTS / "manifest.json").is_file():
        return []
    data = json.loads((TORCHTESTS / "manifest.json").read_text())
    return data["cases"] if isinstance(data, dict) else data


TORCHTESTS_CASES = _torchtests_cases()


@pytest.fixture(scope="module")
def torchtests_reports() -> dict[str, dict[str, Any]]:
    return _run_many({c["id"]: {"path": str(TORCHTESTS / c["file"]), "cwd": str(TORCHTESTS / "cases")}
                      for c in TORCHTESTS_CASES})


@pytest.mark.skipif(not TORCHTESTS_CASES, reason="../shared/torchtests is not next to this checkout")
@pytest.mark.parametrize("case", TORCHTESTS_CASES, ids=[c["id"] for c in TORCHTESTS_CASES])
def test_torchtests_case(torchtests_reports: dict[str, dict[str, Any]], case: dict[str, Any]) -> None:
    rep = torchtests_reports[case["id"]]
    path = TORCHTESTS / case["file"]
    if case["expected"] == "error":
        assert rep["status"] == "error", (rep["status"], rep.get("error"))
        assert rep["error"]["type"] == (case.get("exception_type") or "RuntimeError")
        named = _lines(rep["culprits"], path)
        assert named & set(case["culprit_lines"]), (named, case["culprit_lines"], rep["culprits"])
        for c in rep["culprits"]:
            assert c["message"] and (c.get("fix") or c["code"]), c
    else:
        assert rep["status"] == "clean", (rep["status"], rep.get("error"), rep["_output"][-1500:])
        assert rep["culprits"] == [] and rep["diagnostics"] == []


# --------------------------------------------------------------------------------------------------------------
# Process handling: syntax errors, timeouts, Ctrl-C, the CLI, -m, import cost.

def test_syntax_error(tmp_path: Path) -> None:
    p = tmp_path / "broken.py"
    p.write_text("import torch\nx = (1,\nprint(x)\n")
    out: list[str] = []
    rep = run_script(str(p), on_output=out.append, timeout=120)
    assert rep["status"] == "failed" and rep["exit_code"] == 1
    assert rep["error"]["type"] == "SyntaxError"
    assert "SyntaxError" in "".join(out) and "broken.py" in "".join(out)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its (killed) parent counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


_HANG = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("grandchild", child.pid, flush=True)
time.sleep(600)
"""


def test_timeout_kills_script_and_its_children(tmp_path: Path) -> None:
    p = tmp_path / "hang.py"
    p.write_text(_HANG)
    out: list[str] = []
    t0 = time.monotonic()
    rep = run_script(str(p), on_output=out.append, timeout=6)
    assert time.monotonic() - t0 < 60
    assert rep["status"] == "failed" and rep["error"]["type"] == "Timeout"
    pid = int(re.search(r"grandchild (\d+)", "".join(out)).group(1))  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_stops_script_and_children(tmp_path: Path) -> None:
    p = tmp_path / "hang.py"
    p.write_text(_HANG)
    # (Ctrl-C as a terminal delivers it: with SIGINT handled and not blocked, even when this test runs where it is
    # ignored or blocked, as in a shell's background job, whose children inherit both)
    proc = subprocess.Popen([*GRADGUARD, "run", "--format", "json", str(p)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_as_in_a_terminal)
    assert proc.stderr is not None
    line = ""
    deadline = time.monotonic() + 120
    while "grandchild" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
    pid = int(line.split()[1])
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    rep = json.loads(stdout)
    assert rep["status"] == "failed" and rep["error"]["type"] == "KeyboardInterrupt"
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def test_cli_json_and_exit_code(tmp_path: Path) -> None:
    p = tmp_path / "fails.py"
    p.write_text("import torch\na = torch.randn(3, requires_grad=True)\nb = a.sigmoid()\nb.mul_(2)\n"
                 "print('user output')\nb.sum().backward()\n")
    proc = subprocess.run([*GRADGUARD, "run", "--format", "json", str(p)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    rep = json.loads(proc.stdout)  # only the report on stdout: the script's output went to stderr
    assert "user output" in proc.stderr
    assert rep["status"] == "error"
    assert [(c["line"], c["op"]) for c in rep["culprits"]] == [(4, "mul_")]
    assert [(s["line"], s["op"]) for s in rep["saved_by"]] == [(3, "sigmoid")]
    assert rep["diagnostics"][0]["related"][0]["line"] == 3
    # the static analyzer's fixes for the same line come along, for an editor's quick fix
    assert rep["diagnostics"][0]["fixes"] and rep["diagnostics"][0]["fixes"][0]["edits"]
    text = subprocess.run([*GRADGUARD, "run", str(p)], capture_output=True, text=True, timeout=120)
    assert text.returncode == 1
    assert "changed by  `mul_` at" in text.stderr and "saved by    `sigmoid` at" in text.stderr
    assert "user output" in text.stdout


def test_cli_module_and_args(tmp_path: Path) -> None:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import sys\nimport torch\nprint('args', sys.argv[1:])\nsys.exit(3)\n")
    proc = subprocess.run([*GRADGUARD, "run", "--format", "json", "-m", "mypkg", "a", "--b"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 3
    assert "args ['a', '--b']" in proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["status"] == "failed" and rep["exit_code"] == 3


def test_cli_python_option(tmp_path: Path) -> None:
    p = tmp_path / "which.py"
    p.write_text("import sys\nprint('exe', sys.executable)\n")
    proc = subprocess.run([*GRADGUARD, "run", "--python", sys.executable, str(p)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and f"exe {sys.executable}" in proc.stdout
    assert "the script never imported torch" in proc.stderr
    bad = subprocess.run([*GRADGUARD, "run", "--format", "json", "--python", str(tmp_path / "nope"), str(p)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert json.loads(bad.stdout)["error"]["type"] == "LaunchError"


def test_why_no_saved_tensor_hooks() -> None:
    """The design note in docs/runtime.md, checked on the installed torch: identity saved-tensor hooks switch off
    torch's version check (the in-place error silently disappears), and torch.func refuses to run under them."""
    import torch

    a = torch.randn(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        b = a.sigmoid()
        b.mul_(2)
        b.sum().backward()  # no error: wrong gradients
    assert a.grad is not None
    a.grad = None
    b = a.sigmoid()
    b.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t), pytest.raises(RuntimeError):
        torch.func.grad(lambda t: t.sin().sum())(torch.randn(3))


def test_api_import_does_not_import_torch() -> None:
    code = "import sys, gradguard.runtime.api, gradguard.runtime.report; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_torch_imported_after_script_env(tmp_path: Path) -> None:
    """The tracer waits for the script's own `import torch`: what the script does before it still applies."""
    p = tmp_path / "env_first.py"
    p.write_text("import os, sys\nassert 'torch' not in sys.modules\nos.environ['OMP_NUM_THREADS'] = '1'\n"
                 "import torch\nprint('threads', torch.get_num_threads())\n")
    out: list[str] = []
    rep = run_script(str(p), on_output=out.append, timeout=120)
    assert rep["status"] == "clean", "".join(out)
    assert "threads 1" in "".join(out)
    assert rep["stats"]["traced"]
