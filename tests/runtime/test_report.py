"""The report builder on recorded facts (no child process): statuses, rule codes, culprit lines, text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradguard.runtime.report import build_report, format_text

MSG = ("one of the variables needed for gradient computation has been modified by an inplace operation: "
       "[torch.FloatTensor [3]], which is output 0 of Relu, is at version 1; expected version 0 instead.")


def _frame(path: Path, line: int, kind: str = "user", code: str = "") -> dict[str, Any]:
    return {"path": str(path), "line": line, "column": 5, "end_line": line, "end_column": 20, "func": "f",
            "kind": kind, "code": code}


def _facts(script: Path, write: dict[str, Any], uncaught: bool = True, exit_code: int = 1) -> dict[str, Any]:
    return {
        "version": 1, "exit_code": exit_code, "stats": {"ops": 10, "writes": 1, "traced": True},
        "exception": {"type": "RuntimeError", "message": MSG, "frames": [_frame(script, 9)]} if uncaught else None,
        "incidents": [{
            "kind": "version", "message": MSG, "expected_version": 0, "actual_version": 1,
            "tensor": {"type": "torch.FloatTensor", "dtype": "float32", "shape": [3]}, "output_of": "Relu",
            "node": "ReluBackward0", "saved_by": [_frame(script, 3, code="y = x.relu()")],
            "backward_at": [_frame(script, 9, code="loss.backward()")], "writes": [write], "uncaught": uncaught,
        }],
    }


def _script(tmp_path: Path) -> Path:
    p = tmp_path / "s.py"
    p.write_text("import torch\nx = torch.randn(3, requires_grad=True)\ny = x.relu()\nout = y\nout[0] = 1\n"
                 "y.mul_(2)\nm = torch.empty(3)\ntorch.bernoulli(y, out=m)\nloss.backward()\n")
    return p


def test_version_error_method(tmp_path: Path) -> None:
    s = _script(tmp_path)
    w = {"op": "mul_", "arg": "self", "version_before": 0, "frames": [_frame(s, 6, code="y.mul_(2)")], "via": []}
    rep = build_report(_facts(s, w), exit_code=1, target=str(s), static_fixes=False)
    assert rep["status"] == "error" and rep["error"]["type"] == "RuntimeError"
    assert [(c["line"], c["op"], c["code"]) for c in rep["culprits"]] == [(6, "mul_", "GG101")]
    assert [(x["line"], x["op"]) for x in rep["saved_by"]] == [(3, "relu")]
    d = rep["diagnostics"][0]
    assert d["source"] == "gradguard-run" and d["severity"] == "error" and d["line"] == 6
    assert {r["line"] for r in d["related"]} == {3, 9}
    text = format_text(rep)
    assert "saved by    `relu` at" in text and "changed by  `mul_` at" in text and "fix (GG101)" in text


def test_rule_codes_from_the_write(tmp_path: Path) -> None:
    s = _script(tmp_path)
    cases = [
        ({"op": "addcdiv_", "arg": "self", "version_before": 0, "frames": [_frame(s, 6)],
          "via": ["optim/adam.py:_single_tensor_adam", "optim/adam.py:step"]}, "GG202"),
        ({"op": "bernoulli", "arg": "out", "version_before": 0, "frames": [_frame(s, 8)], "via": []}, "GG104"),
        ({"op": "relu_", "arg": "self", "version_before": 0, "frames": [_frame(s, 6)],
          "via": ["nn/functional.py:relu"]}, "GG102"),
        ({"op": "copy_", "arg": "self", "version_before": 0, "frames": [_frame(s, 5)], "via": []}, "GG103"),
    ]
    for w, code in cases:
        rep = build_report(_facts(s, w), exit_code=1, target=str(s), static_fixes=False)
        assert rep["culprits"][0]["code"] == code, (w, rep["culprits"])


def test_setitem_through_alias_names_the_alias_line(tmp_path: Path) -> None:
    s = _script(tmp_path)
    w = {"op": "copy_", "arg": "self", "version_before": 0, "frames": [_frame(s, 5)], "via": []}
    rep = build_report(_facts(s, w), exit_code=1, target=str(s), static_fixes=False)
    assert [c["line"] for c in rep["culprits"]] == [5, 4]
    assert "out = y.clone()" in rep["culprits"][1]["message"]


def test_inplace_module_names_its_construction(tmp_path: Path) -> None:
    s = _script(tmp_path)
    w = {"op": "relu_", "arg": "self", "version_before": 0, "frames": [_frame(s, 6)], "via": [],
         "module": {"type": "ReLU", "constructed_at": [_frame(s, 2, code="nn.ReLU(inplace=True)")]}}
    rep = build_report(_facts(s, w), exit_code=1, target=str(s), static_fixes=False)
    assert [(c["line"], c["code"]) for c in rep["culprits"]] == [(2, "GG102"), (6, "GG102")]
    assert rep["culprits"][0]["message"].startswith("ReLU(inplace=True) overwrites its input")


def test_library_write_keeps_the_library_frames(tmp_path: Path) -> None:
    s = _script(tmp_path)
    lib = tmp_path / "site-packages" / "keras" / "src" / "layers" / "rnn" / "rnn.py"
    w = {"op": "copy_", "arg": "self", "version_before": 0, "via": [],
         "frames": [_frame(lib, 442, "lib", "self_state.assign(state)"), _frame(s, 6, code="model.fit(x, y)")]}
    rep = build_report(_facts(s, w), exit_code=1, target=str(s), static_fixes=False)
    c = rep["culprits"][0]
    assert c["line"] == 6 and c["path"] == str(s)
    assert any("keras/src/layers/rnn/rnn.py:442" in r["message"] for r in rep["diagnostics"][0]["related"])
    assert "inside keras (keras/src/layers/rnn/rnn.py:442)" in format_text(rep)


def test_statuses(tmp_path: Path) -> None:
    s = _script(tmp_path)
    w = {"op": "mul_", "arg": "self", "version_before": 0, "frames": [_frame(s, 6)], "via": []}
    caught = build_report(_facts(s, w, uncaught=False, exit_code=0), exit_code=0, target=str(s), static_fixes=False)
    assert caught["status"] == "clean" and caught["culprits"] == [] and caught["caught_errors"] == [MSG]
    caught_then_exit = build_report(_facts(s, w, uncaught=False, exit_code=1), exit_code=1, target=str(s),
                                    static_fixes=False)
    assert caught_then_exit["status"] == "error" and caught_then_exit["culprits"][0]["line"] == 6
    timeout = build_report(None, exit_code=-15, target=str(s), timed_out=True, timeout=5)
    assert timeout["status"] == "failed" and timeout["error"]["type"] == "Timeout"
    assert "stopped (Timeout)" in format_text(timeout)
    died = build_report(None, exit_code=-9, target=str(s))
    assert died["status"] == "failed" and died["error"]["type"] == "ChildDied"
    clean = build_report({"exit_code": 0, "incidents": [], "exception": None,
                          "stats": {"ops": 5, "writes": 0, "traced": True, "overhead_estimate_s": 0.01}},
                         exit_code=0, target=str(s), elapsed=1.5)
    assert clean["status"] == "clean" and clean["error"] is None
    assert "estimated doctor overhead 0.01 s" in format_text(clean)
    unexplained = build_report({"exit_code": 1, "incidents": [], "stats": {},
                                "exception": {"type": "RuntimeError", "message": MSG, "frames": []}},
                               exit_code=1, target=str(s))
    assert unexplained["status"] == "error" and unexplained["culprits"] == []
    assert "not found" in format_text(unexplained)
    other = build_report({"exit_code": 1, "incidents": [], "stats": {},
                          "exception": {"type": "ValueError", "message": "boom", "frames": [_frame(s, 2)]}},
                         exit_code=1, target=str(s))
    assert other["status"] == "failed" and other["error"] == {"type": "ValueError", "message": "boom"}


def _forward_facts(script: Path, inc: dict[str, Any], message: str) -> dict[str, Any]:
    return {"version": 1, "exit_code": 1, "stats": {"ops": 3, "writes": 1, "traced": True},
            "exception": {"type": "RuntimeError", "message": message, "frames": [_frame(script, 5)]},
            "incidents": [{**inc, "message": message, "uncaught": True}]}


def test_forward_families_name_line_tensor_and_fix(tmp_path: Path) -> None:
    s = _script(tmp_path)
    msg = "A view was created in no_grad mode and is being modified inplace with grad mode enabled."
    inc = {"kind": "no_grad_view", "raised_at": [_frame(s, 6, code="y.mul_(2)")], "receiver": "y", "op": "mul_",
           "tensor": {"type": "torch.FloatTensor", "shape": [3], "is_view": True},
           "origin": [{**_frame(s, 4, code="out = y"), "under": "no_grad"}],
           "base": {"name": "x", "tensor": {"shape": [3]}, "origin": [_frame(s, 2)]}}
    rep = build_report(_forward_facts(s, inc, msg), exit_code=1, target=str(s), static_fixes=False)
    assert rep["status"] == "error"
    c = rep["culprits"][0]
    assert (c["line"], c["code"], c["family"]) == (6, "GG302", "no_grad_view")
    assert "made under `torch.no_grad()` (line 4)" in c["message"] and "`x`" in c["message"]
    assert "same grad mode" in c["fix"]
    text = format_text(rep)
    assert "raised by   `mul_`" in text and "[under no_grad]" in text and "view of     `x`" in text
    assert "fix (GG302): make the view and the in-place change under the same grad mode" in text


def test_pack_hook_names_the_write_inside_the_hook(tmp_path: Path) -> None:
    s = _script(tmp_path)
    msg = "A saved tensor pack hook is modifying its input in place."
    inc = {"kind": "pack_hook", "raised_at": [_frame(s, 9, code="register_hooks(...)")], "op": "add_",
           "writes": [{"op": "add_", "arg": "self", "version_before": 0, "frames": [_frame(s, 5, code="x += 1")],
                       "via": []}]}
    rep = build_report(_forward_facts(s, inc, msg), exit_code=1, target=str(s), static_fixes=False)
    assert [(c["line"], c["code"]) for c in rep["culprits"]] == [(5, "GG101")]
    assert any(r["line"] == 9 for r in rep["diagnostics"][0]["related"])


def test_every_family_has_a_code_and_a_fix() -> None:
    from gradguard.runtime._child import FAMILIES
    from gradguard.runtime.report import FAMILY_CODE, FAMILY_FIX, FIX

    for _, kind in FAMILIES:
        assert FAMILY_CODE[kind] in FIX, kind
        assert FAMILY_FIX.get(kind) or FIX[FAMILY_CODE[kind]], kind
