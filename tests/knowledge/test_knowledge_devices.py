"""Knowledge per device and per torch version.

- The packaged table holds CPU facts (probed) and a CUDA overlay (derived from torch's sources where no GPU probed
  it); the analysis reads the union ("saved on any device the code may run on"), a known device reads its own.
- ``gradguard knowledge --regenerate`` writes a table for the installed torch to the user's cache, never into the
  package, and ``load()`` prefers that table; the installed torch's version is read without importing torch.
- The probe runs on a torch that lacks some callables (the package accepts torch>=2.1: ``nn.RMSNorm`` appeared in
  2.4): those entries are left out. Only torch 2.13.0+cpu installs on the development machine (PyPI's Linux wheels
  for older versions are CUDA builds of several GB with their nvidia-* dependencies), so the older torch is
  simulated by removing callables.
- On a machine with a GPU (``-m gpu``), the CUDA probe runs and must confirm every derived CUDA fact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gradguard import knowledge
from gradguard.knowledge import TABLE_PATH, Knowledge, load, merge_devices
from gradguard.knowledge._cuda_facts import DERIVED


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    with open(TABLE_PATH, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("GRADGUARD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GRADGUARD_KNOWLEDGE", raising=False)
    load.cache_clear()  # type: ignore[attr-defined]
    yield
    load.cache_clear()  # type: ignore[attr-defined]


def test_table_says_which_devices_and_torch(raw: dict[str, Any]) -> None:
    devices = raw["devices"]
    assert devices["cpu"] == {"source": "probe", "torch_version": raw["torch_version"]}
    assert "cuda" in devices and devices["cuda"]["source"]
    probed = devices["cuda"]["source"] == "probe (cuda)"
    for name, e in raw["ops"].items():
        ov = e.get("cuda")
        if ov is None:
            continue
        assert set(ov) <= {"source", "saves", "saves_output", "saved_output_indices", "saves_internal", "view_of",
                           "returns_arg", "mutates", "multi_output_view"}, name
        assert ov["source"].endswith("(cuda)") if probed else ov["source"].endswith("(cuda, not probed here)"), name
        for arg, conds in (ov.get("saves") or {}).items():
            assert arg in e["args"] or arg.startswith("self."), (name, arg)
            assert all(c in e["args"] or c.startswith("self.") for c in conds), (name, conds)
        assert all(c in e["args"] or c.startswith("self.") for c in ov.get("saves_output") or []), name


def test_derived_cuda_facts_are_in_the_table(raw: dict[str, Any]) -> None:
    if raw["devices"]["cuda"]["source"] == "probe (cuda)":
        pytest.skip("this table's CUDA facts were probed on a GPU")
    for name in ("torch.nn.GRU", "torch.nn.RNN", "torch.nn.LSTMCell", "torch.nn.RMSNorm", "Tensor.cpu"):
        assert "cuda" in raw["ops"][name], name
    assert set(DERIVED) >= {n for n, e in raw["ops"].items() if "cuda" in e}


def test_union_over_devices_unless_the_device_is_known() -> None:
    kb = load()
    cpu, cuda = load(device="cpu"), load(device="cuda")
    # cuDNN GRU saves its output sequence (element 0); the CPU loop of cells does not
    assert kb.get("torch.nn.GRU").saves_output and kb.get("torch.nn.GRU").saved_output_indices == (0,)  # type: ignore[union-attr]
    assert cpu.get("torch.nn.GRU").saves_output == ()  # type: ignore[union-attr]
    assert "self.weight_ih_l0" in cuda.get("torch.nn.GRU").saves_output  # type: ignore[union-attr]
    # fused RMSNorm saves its weight even when only the weight requires grad
    assert kb.get("torch.nn.RMSNorm").saved_args({"self.weight": True}) == ["self.weight", "x"]  # type: ignore[union-attr]
    assert cpu.get("torch.nn.RMSNorm").saved_args({"self.weight": True}) == []  # type: ignore[union-attr]
    # .cpu() is the tensor itself on CPU, a copy of a CUDA tensor: a possible alias unless the device is known
    assert kb.get("Tensor.cpu").view_of == "self" and cpu.get("Tensor.cpu").view_of == "self"  # type: ignore[union-attr]
    assert cuda.get("Tensor.cpu").view_of is None  # type: ignore[union-attr]
    # entries without an overlay read the same everywhere
    assert kb.get("torch.exp") == cpu.get("torch.exp") == cuda.get("torch.exp")


def test_merge_devices() -> None:
    entry = {"saves": {"a": ["a"]}, "saves_output": [], "view_of": None, "cuda": {"saves": {"a": ["b"], "w": ["a"]},
                                                                                  "saves_output": ["a"]}}
    ov = {"cuda": entry["cuda"]}
    assert merge_devices(entry, ov, None) == {"saves": {"a": ["a", "b"], "w": ["a"]}, "saves_output": ["a"],
                                              "view_of": None}
    assert merge_devices(entry, ov, "cpu") == {"saves": {"a": ["a"]}, "saves_output": [], "view_of": None}
    assert merge_devices(entry, ov, "cuda")["saves"] == {"a": ["b"], "w": ["a"]}


def _tiny_table(version: str, saves_output: list[str]) -> dict[str, Any]:
    return {"torch_version": version, "devices": {"cpu": {"source": "probe", "torch_version": version}},
            "ops": {"torch.exp": {"kind": "function", "args": ["input"], "saves": {}, "saves_output": saves_output,
                                  "source": "probe"}}}


def test_load_prefers_a_table_regenerated_for_the_installed_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(knowledge, "installed_torch_version", lambda: "2.11.0")
    assert knowledge.table_path() == TABLE_PATH  # nothing cached yet
    cached = Path(knowledge.cached_table_path("2.11.0"))
    assert cached.parent.parent.name == "cache" and cached.name == "torch-2.11.0.json"
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(_tiny_table("2.11.0", [])))
    load.cache_clear()  # type: ignore[attr-defined]
    kb = load()
    assert kb.path == str(cached) and kb.torch_version == "2.11.0"
    assert kb.get("torch.exp").saves_output == ()  # type: ignore[union-attr]
    # a table for another torch version is not used
    monkeypatch.setattr(knowledge, "installed_torch_version", lambda: "2.12.0")
    load.cache_clear()  # type: ignore[attr-defined]
    assert load().path == TABLE_PATH


def test_installed_version_is_read_without_importing_torch() -> None:
    code = ("import sys, gradguard.knowledge as k; v = k.installed_torch_version(); k.load(); "
            "assert 'torch' not in sys.modules; print(v)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip()


def test_regenerate_writes_the_cache_never_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    import torch
    from gradguard.knowledge import probe

    before = Path(TABLE_PATH).read_bytes()
    monkeypatch.setattr(probe, "build_table", lambda *a, **k: _tiny_table(torch.__version__, ["input"]))
    assert probe.main() == 0
    cached = Path(knowledge.cached_table_path(torch.__version__))
    assert json.loads(cached.read_text())["ops"]["torch.exp"]["saves_output"] == ["input"]
    assert Path(TABLE_PATH).read_bytes() == before
    assert str(cached) in capsys.readouterr().out
    # --check compares with the table in use: now the cached one
    assert probe.main(check=True) == 0
    monkeypatch.setattr(probe, "build_table", lambda *a, **k: _tiny_table(torch.__version__, []))
    assert probe.main(check=True) == 1


def test_check_against_a_table_from_another_torch_says_what_to_do(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    import torch
    from gradguard.knowledge import probe

    old = tmp_path / "old.json"
    old.write_text(probe._dump(_tiny_table("2.11.0", [])))
    monkeypatch.setattr(probe, "build_table", lambda *a, **k: _tiny_table(torch.__version__, []))
    assert probe.main(output=str(old), check=True) == 1
    err = capsys.readouterr().err
    assert "generated with torch 2.11.0" in err and "--regenerate" in err


def test_cuda_without_a_gpu_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from gradguard.knowledge import probe

    assert probe.main(output="/nonexistent/x.json", device="cuda") == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.torch
def test_probe_runs_on_a_torch_without_some_callables(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an older torch (the package accepts >=2.1) looks like to the probe: callables missing."""
    torch = pytest.importorskip("torch")
    from gradguard.knowledge import _specs
    from gradguard.knowledge._build import build_entries

    monkeypatch.delattr(torch.nn, "RMSNorm")
    monkeypatch.delattr(torch.nn.functional, "rms_norm")
    monkeypatch.delattr(torch.nn, "Mish")
    names = {s.name for s in _specs.all_specs()}
    assert "torch.nn.functional.rms_norm" not in names
    threads = torch.get_num_threads()
    try:
        ops = build_entries()
    finally:
        torch.set_num_threads(threads)
    assert "torch.nn.RMSNorm" not in ops and "torch.nn.Mish" not in ops and "torch.nn.functional.rms_norm" not in ops
    assert ops["torch.nn.ReLU"]["saves_output"] and len(ops) > 900


@pytest.mark.gpu
@pytest.mark.torch
def test_cuda_probe_confirms_the_derived_facts(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from gradguard.knowledge.probe import build_table

    threads = torch.get_num_threads()
    try:
        table = build_table(TABLE_PATH, ("cpu", "cuda"))
    finally:
        torch.set_num_threads(threads)
    assert table["devices"]["cuda"]["source"] == "probe (cuda)"
    kb = Knowledge(table, device="cuda")
    for name, facts in DERIVED.items():
        info = kb.get(name)
        assert info is not None, name
        if "saves_output" in facts:
            assert set(facts["saves_output"]) <= set(info.saves_output), (name, info.saves_output)
            assert set(facts["saved_output_indices"]) <= set(info.saved_output_indices), name
        if "saves" in facts:
            for arg, conds in facts["saves"].items():
                assert set(conds) <= set(info.saves.get(arg, ())), (name, arg, info.saves)
        if "view_of" in facts:
            assert info.view_of == facts["view_of"], name
