"""What torch saves on CUDA where it differs from CPU, for tables generated on a machine without a GPU.

``gradguard knowledge --regenerate --device cuda`` measures these facts on a GPU (the same probe, on CUDA tensors)
and stores them with ``"source": "probe (cuda)"``. Where no GPU ran the probe, the table carries the overlays
below instead, each derived from torch's own sources and marked ``"(cuda, not probed here)"``:

- ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` run cuDNN's ``_cudnn_rnn`` on CUDA, whose derivative formula in
  ``derivatives.yaml`` reads ``result0``: the output sequence (element 0 of the returned tuple) is saved whenever
  anything requires grad. On CPU, RNN and GRU run a loop of ATen cells that saves no output.
- ``nn.LSTMCell`` runs ``_thnn_fused_lstm_cell`` on CUDA, which saves ``result1``: the new cell state (element 1 of
  the returned ``(h, c)``).
- ``nn.RMSNorm`` / ``F.rms_norm`` run the fused ``_fused_rms_norm`` kernel on CUDA, which saves the input and the
  weight whenever either requires grad (the CPU composite saves the weight only for the input's gradient).
- ``Tensor.cpu()`` on a CUDA tensor copies it to host memory: the result is a new tensor, not the tensor itself.

Not included: ``nn.GRUCell`` (``_thnn_fused_gru_cell`` saves the hidden state it is given and a workspace, not its
output: derivatives.yaml and the CUDA kernel, which allocates ``hy`` separately); a GPU probe settles it.

Each overlay lists only the fields that differ from the CPU entry; the analysis treats a tensor as saved when it is
saved on any device the code may run on.
"""

from __future__ import annotations

from typing import Any

_NOT_PROBED = "(cuda, not probed here)"

_RNN_SOURCES = ["input", "hx", "self.weight_ih_l0", "self.weight_hh_l0", "self.bias_ih_l0", "self.bias_hh_l0"]
_CELL_SOURCES = ["input", "hx", "self.weight_ih", "self.weight_hh", "self.bias_ih", "self.bias_hh"]

DERIVED: dict[str, dict[str, Any]] = {
    "torch.nn.RNN": {
        "saves_output": _RNN_SOURCES, "saved_output_indices": [0],
        "source": f"derivatives.yaml: _cudnn_rnn reads result0, the output sequence {_NOT_PROBED}",
    },
    "torch.nn.GRU": {
        "saves_output": _RNN_SOURCES, "saved_output_indices": [0],
        "source": f"derivatives.yaml: _cudnn_rnn reads result0, the output sequence {_NOT_PROBED}",
    },
    "torch.nn.LSTM": {
        "saves_output": _RNN_SOURCES, "saved_output_indices": [0],
        "source": f"derivatives.yaml: _cudnn_rnn reads result0, the output sequence {_NOT_PROBED}",
    },
    "torch.nn.LSTMCell": {
        "saves_output": _CELL_SOURCES, "saved_output_indices": [1],
        "source": f"derivatives.yaml: _thnn_fused_lstm_cell reads result1, the new cell state {_NOT_PROBED}",
    },
    "torch.nn.RMSNorm": {
        "saves": {"self.weight": ["x", "self.weight"], "x": ["x", "self.weight"]},
        "source": f"derivatives.yaml: _fused_rms_norm reads input and weight {_NOT_PROBED}",
    },
    "torch.nn.functional.rms_norm": {
        "saves": {"input": ["input", "weight"], "weight": ["input", "weight"]},
        "source": f"derivatives.yaml: _fused_rms_norm reads input and weight {_NOT_PROBED}",
    },
    "Tensor.cpu": {
        "view_of": None, "returns_arg": None,
        "source": f"a CUDA tensor's .cpu() is a copy in host memory, not the tensor itself {_NOT_PROBED}",
    },
}

#: Fields of an entry that may differ between devices (what an overlay can hold, besides ``source``).
DEVICE_FIELDS = ("saves", "saves_output", "saved_output_indices", "saves_internal", "view_of", "returns_arg",
                 "mutates", "multi_output_view")


def derived_overlays(cpu_ops: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The overlays above, for the entries this table has (an older torch may lack nn.RMSNorm), keeping only the
    fields that differ from what the CPU probe found."""
    out: dict[str, dict[str, Any]] = {}
    for name, ov in DERIVED.items():
        cpu = cpu_ops.get(name)
        if cpu is None:
            continue
        diff = {f: v for f, v in ov.items() if f != "source" and cpu.get(f) != v}
        if diff:
            out[name] = {**diff, "source": ov["source"]}
    return out


def probed_overlays(cpu_ops: dict[str, Any], cuda_ops: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per entry, the fields whose CUDA probe differs from the CPU probe."""
    out: dict[str, dict[str, Any]] = {}
    for name, cpu in cpu_ops.items():
        cuda = cuda_ops.get(name)
        if cuda is None or cuda.get("source") == "failed" or cpu.get("source") == "failed":
            continue
        diff = {f: cuda.get(f) for f in DEVICE_FIELDS if cuda.get(f) != cpu.get(f)}
        if diff:
            diff["source"] = "probe (cuda)"
            out[name] = diff
    return out
