"""Process environment the gateway needs before any heavy library is imported.

litellm fetches a model cost map from the network at import time unless told not to,
tiktoken downloads its encodings on first use, and huggingface_hub looks models up
online. On an offline machine each of those hangs or fails, so the gateway sets the
switches itself, once, before anything imports those libraries. A value the user has
already set is never overwritten.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import MutableMapping
from pathlib import Path

__all__ = ["prepare_environment", "litellm_tokenizers_dir"]


def litellm_tokenizers_dir() -> Path | None:
    """Where litellm ships tiktoken's encoding files, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "litellm_core_utils" / "tokenizers"
        if candidate.is_dir():
            return candidate
    return None


def prepare_environment(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set the offline switches (unless already set) and keep torch to one thread."""
    environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    environ.setdefault("HF_HUB_OFFLINE", "1")
    environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no tqdm bars in a server's log (they break JSON lines)
    environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    environ.setdefault("OMP_NUM_THREADS", "1")
    environ.setdefault("MKL_NUM_THREADS", "1")
    # litellm copies every call's messages for its logging payloads, shortening base64 images (after the call, per
    # call, in proportion to the history); the gateway keeps no litellm logging payload: 0 turns that off
    environ.setdefault("MAX_BASE64_LENGTH_FOR_LOGGING", "0")
    if "TIKTOKEN_CACHE_DIR" not in environ:
        tokenizers = litellm_tokenizers_dir()
        if tokenizers is not None:
            environ["TIKTOKEN_CACHE_DIR"] = str(tokenizers)
