"""Which sentence-embedding model the embedder runs: the shipped all-MiniLM-L6-v2, or one a user points
`pcp.embedding_model` at.

A user's model is a path to either
* an ONNX export: a ``.onnx`` file, or a folder holding ``model.onnx`` (or ``onnx/model.onnx``, as Hugging Face's
  exports lay it out), with the model's ``tokenizer.json`` in that folder or the one above; or
* a sentence-transformers folder (``config.json``, ``model.safetensors`` or ``pytorch_model.bin``,
  ``tokenizer.json``): exported to ONNX once, as the shipped model is (gateway.adapters.onnx_export; needs torch,
  as scripts/setup installs it), into the models directory, under its weights' digest.

Its pooling is the folder's ``1_Pooling/config.json`` (mean or CLS; mean when there is none) and its longest text
``sentence_bert_config.json``'s ``max_seq_length`` (else :data:`MAX_TOKENS`). A model is named by what its vectors
depend on: the shipped one :data:`DEFAULT_MODEL`, a user's by its file name and the digest of its weights, so the
same model copied to another machine or path keeps its name, and different weights under one path do not.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gateway.errors import ConfigError

__all__ = ["DEFAULT_MODEL", "MAX_TOKENS", "ModelFiles", "UserModel", "user_model"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # the shipped model: vectors stored without a model's name are its
MAX_TOKENS = 256
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
_KEY = "pcp.embedding_model"


@dataclass(frozen=True)
class ModelFiles:
    """What the embedder loads: the ONNX graph, the tokenizer, the pooling ("mean" or "cls") and the longest text in
    tokens."""

    onnx: Path
    tokenizer: Path
    pooling: str = "mean"
    max_tokens: int = MAX_TOKENS


@dataclass(frozen=True)
class UserModel:
    """A user's model: its name (stored with its vectors), its files when it is an ONNX export, else the
    sentence-transformers folder to export (``export``) with the pooling and length it sets."""

    name: str
    tokenizer: Path
    pooling: str
    max_tokens: int
    onnx: Path | None = None
    export: Path | None = None

    def files(self, exported: Path | None = None) -> ModelFiles:
        onnx = self.onnx or exported
        if onnx is None:
            raise ValueError("a sentence-transformers folder is loaded from its export")
        return ModelFiles(onnx, self.tokenizer, self.pooling, self.max_tokens)


def _digest(paths: list[Path], extra: str) -> str:
    digest = hashlib.blake2b(extra.encode(), digest_size=16)
    for path in paths:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:12]


def _settings(folders: list[Path]) -> tuple[str, int]:
    """The pooling and longest text a sentence-transformers folder sets (the first of ``folders`` that has them)."""
    pooling, longest = "mean", MAX_TOKENS
    for folder in folders:
        pool = folder / "1_Pooling" / "config.json"
        if pool.is_file():
            config = json.loads(pool.read_text(encoding="utf-8"))
            if config.get("pooling_mode_cls_token"):
                pooling = "cls"
            elif not config.get("pooling_mode_mean_tokens", True):
                raise ConfigError(f"{_KEY}: {pool}: only mean or CLS pooling is supported")
            break
    for folder in folders:
        bert = folder / "sentence_bert_config.json"
        if bert.is_file():
            longest = int(json.loads(bert.read_text(encoding="utf-8")).get("max_seq_length") or MAX_TOKENS)
            break
    return pooling, longest


@lru_cache(maxsize=8)
def user_model(path: Path) -> UserModel:
    """The model at ``path`` (see the module docstring); a ConfigError naming the key when it is not one. Read once
    per process (its weights are read whole for their digest)."""
    path = path.expanduser().absolute()  # symlinks kept: a folder of links to the files is a model too
    if not path.exists():
        raise ConfigError(f"{_KEY}: {path} does not exist")
    if path.is_file():
        onnx: Path | None = path
    else:
        onnx = next((p for p in (path / "model.onnx", path / "onnx" / "model.onnx") if p.is_file()), None)
    folders = [onnx.parent, onnx.parent.parent] if onnx is not None else [path]
    tokenizer = next((f / "tokenizer.json" for f in folders if (f / "tokenizer.json").is_file()), None)
    if tokenizer is None:
        raise ConfigError(f"{_KEY}: no tokenizer.json in {' or '.join(str(f) for f in folders)}")
    pooling, longest = _settings(folders)
    label = re.sub(r"[^A-Za-z0-9._-]+", "-", (path.stem if path.is_file() else path.name))[:40] or "model"
    if onnx is not None:
        return UserModel(f"{label}-{_digest([onnx, tokenizer], pooling)}", tokenizer, pooling, longest, onnx=onnx)
    weights = next((path / w for w in _WEIGHTS if (path / w).is_file()), None)
    if weights is None or not (path / "config.json").is_file():
        raise ConfigError(f"{_KEY}: {path} holds neither an ONNX export (model.onnx) nor a sentence-transformers "
                          f"model (config.json and {' or '.join(_WEIGHTS)})")
    return UserModel(f"{label}-{_digest([weights, tokenizer], pooling)}", tokenizer, pooling, longest, export=path)
