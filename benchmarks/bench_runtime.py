"""Overhead of the runtime doctor: plain vs anomaly mode alone vs the doctor (anomaly mode + write log + backward
diagnosis), on a small CNN, an LSTM and a small transformer training loop (Adam). Each configuration runs in its own
process (the tracer is process-wide) and prints seconds per training step: the best of several timed repeats after
a warm-up, over several rounds that alternate the configurations (the best, not the mean, filters out other load on
the machine). The doctor must stay within 2x anomaly mode alone; the exit status is 1 when it does not.

    python benchmarks/bench_runtime.py [--steps N] [--repeats R] [--rounds K] [--device cpu|cuda] [--models a,b]

The load average is printed before and after: figures taken while it is above the number of cores are noise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

MODELS = ("cnn", "lstm", "transformer")

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server", "gradguard", "runtime", "_child.py")


def _models():  # type: ignore[no-untyped-def]
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)
            self.b1 = nn.BatchNorm2d(16)
            self.c2 = nn.Conv2d(16, 32, 3, padding=1)
            self.b2 = nn.BatchNorm2d(32)
            self.fc = nn.Linear(32 * 8 * 8, 10)

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = F.max_pool2d(F.relu(self.b1(self.c1(x)), inplace=True), 2)
            x = F.max_pool2d(F.relu(self.b2(self.c2(x)), inplace=True), 2)
            return self.fc(x.flatten(1))

    class LSTM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):  # type: ignore[no-untyped-def]
            out, _ = self.lstm(x)
            return self.fc(out[:, -1])

    class Transformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(100, 64)
            self.pos = nn.Parameter(torch.zeros(1, 32, 64))
            layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.1, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):  # type: ignore[no-untyped-def]
            return self.fc(self.enc(self.emb(x) + self.pos).mean(1))

    def cnn_batch():  # type: ignore[no-untyped-def]
        return torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def lstm_batch():  # type: ignore[no-untyped-def]
        return torch.randn(16, 20, 16), torch.randint(0, 10, (16,))

    def transformer_batch():  # type: ignore[no-untyped-def]
        return torch.randint(0, 100, (16, 32)), torch.randint(0, 10, (16,))

    return {"cnn": (CNN, cnn_batch), "lstm": (LSTM, lstm_batch), "transformer": (Transformer, transformer_batch)}


def worker(model_name: str, mode: str, steps: int, repeats: int, device: str = "cpu") -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    if mode == "anomaly":
        torch.autograd.set_detect_anomaly(True, check_nan=False)
    elif mode == "doctor":
        spec = importlib.util.spec_from_file_location("gradguard_child", CHILD)
        assert spec and spec.loader
        child = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(child)
        child.install()
    torch.manual_seed(0)
    cls, batch = _models()[model_name]
    model = cls().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = [tuple(t.to(device) for t in batch()) for _ in range(steps)]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def epoch() -> float:
        sync()
        t0 = time.perf_counter()
        for x, y in data:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        sync()
        return (time.perf_counter() - t0) / steps

    epoch()  # warm-up
    times = [epoch() for _ in range(repeats)]
    return {"s_per_step": min(times), "median": statistics.median(times)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], a.steps, a.repeats, a.device)))
        return 0
    models = [m for m in a.models.split(",") if m]
    print(f"runtime doctor overhead ({a.device}, 1 thread, {a.steps} steps, best of {a.repeats} repeats x "
          f"{a.rounds} rounds, s/step); load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'model':12s} {'plain':>10s} {'anomaly':>10s} {'doctor':>10s} {'doctor/anomaly':>15s} {'doctor/plain':>13s}")
    worst = 0.0
    for model in models:
        res: dict[str, float] = {}
        for _ in range(a.rounds):
            for mode in ("plain", "anomaly", "doctor"):
                out = subprocess.run([sys.executable, __file__, "--steps", str(a.steps), "--repeats", str(a.repeats),
                                      "--device", a.device, "--worker", model, mode],
                                     capture_output=True, text=True, check=True)
                t = json.loads(out.stdout.strip().splitlines()[-1])["s_per_step"]
                res[mode] = min(res.get(mode, t), t)
        ratio = res["doctor"] / res["anomaly"]
        worst = max(worst, ratio)
        print(f"{model:12s} {res['plain']:10.4f} {res['anomaly']:10.4f} {res['doctor']:10.4f} "
              f"{ratio:14.2f}x {res['doctor'] / res['plain']:12.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}; worst doctor/anomaly {worst:.2f}x (limit 2x)")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
