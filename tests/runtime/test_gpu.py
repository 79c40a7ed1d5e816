"""The runtime doctor on CUDA: skipped without a GPU, run wherever ``torch.cuda.is_available()`` (``-m gpu``).

Each script runs plainly and under the doctor: the outcome must be the same (exit status, exception type, first line
of the message, printed values), and for the error scripts the doctor names the culprit line (``# gg: culprit``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gradguard.runtime.api import run_script

pytestmark = [pytest.mark.gpu, pytest.mark.torch, pytest.mark.slow]


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


if not _cuda():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

SCRIPTS: dict[str, str] = {
    # cuDNN's GRU saves its output sequence: an in-place write on it fails on CUDA (and runs clean on CPU).
    "gru_output_inplace": """
import torch
torch.manual_seed(0)
gru = torch.nn.GRU(8, 16).cuda()
x = torch.randn(5, 3, 8, device="cuda")
out, h = gru(x)
out.mul_(2)  # gg: culprit
out.sum().backward()
""",
    "relu_then_inplace": """
import torch
a = torch.randn(4, 8, device="cuda", requires_grad=True)
b = torch.relu(a)
b += 1  # gg: culprit
b.sum().backward()
""",
    "leaf_inplace": """
import torch
w = torch.randn(3, device="cuda", requires_grad=True)
w.add_(1)  # gg: culprit
""",
    # SGD defaults to its foreach implementation for CUDA parameters.
    "optimizer_step_between_backward": """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(2, 4, device="cuda")
h = torch.tanh(model(x))
loss1 = h.sum()
loss2 = model(h).sum()
loss1.backward(retain_graph=True)
opt.step()  # gg: culprit
loss2.backward()
""",
    "foreach_saved": """
import torch
a = torch.randn(4, device="cuda", requires_grad=True)
b = a * 1
part = (b * b).sum()
torch._foreach_mul_([b], 2.0)  # gg: culprit
part.backward()
""",
    "clean_cnn_amp": """
import torch
import torch.nn as nn
torch.manual_seed(0)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x = torch.randn(4, 3, 16, 16, device="cuda")
    y = torch.randint(0, 10, (4,), device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", loss.item().hex())
print("digest", sum(p.double().sum().item() for p in model.parameters()).hex())
""",
    "clean_lstm": """
import torch
torch.manual_seed(0)
torch.backends.cudnn.deterministic = True
lstm = torch.nn.LSTM(8, 16, num_layers=2).cuda()
opt = torch.optim.SGD(lstm.parameters(), lr=0.1)
for step in range(3):
    out, _ = lstm(torch.randn(5, 2, 8, device="cuda"))
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", loss.item().hex())
""",
}


def _markers(text: str) -> set[int]:
    return {i for i, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith("# gg: culprit")}


def _plain(path: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    last = [ln for ln in proc.stderr.splitlines() if re.match(r"^\w+(\.\w+)*(Error|Exception): ", ln)]
    return {"rc": proc.returncode, "stdout": proc.stdout, "last": last[-1] if last else None}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_cuda_same_outcome_and_culprit(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text(SCRIPTS[name].lstrip())
    plain = _plain(path)
    chunks: list[str] = []
    rep = run_script(str(path), on_output=chunks.append, timeout=300)
    out = "".join(chunks)
    assert rep["exit_code"] == plain["rc"], (plain, rep.get("error"))
    if plain["rc"] == 0:
        assert rep["status"] == "clean", rep.get("error")
        ours = [ln for ln in out.splitlines() if ln.startswith(("loss", "digest"))]
        assert ours == [ln for ln in plain["stdout"].splitlines() if ln.startswith(("loss", "digest"))]
        assert rep["stats"].get("overhead_estimate_s") is None and rep["stats"].get("overhead_note")
        return
    exc_type, _, message = (plain["last"] or "").partition(": ")
    assert rep["error"]["type"] == exc_type.rsplit(".", 1)[-1]
    assert rep["error"]["message"].split(" Hint:")[0].split("\n")[0] == message.split(" Hint:")[0]
    assert rep["status"] == "error"
    named = {c["line"] for c in rep["culprits"] if Path(c["path"]) == path}
    assert _markers(SCRIPTS[name].lstrip()) <= named, rep["culprits"]
