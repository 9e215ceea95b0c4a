"""Chinese word segmentation for lexical matching: jieba's dictionary and algorithm, through `rjieba` (its Rust
port, jieba-rs, with the dictionary compiled in: nothing is read from disk or downloaded, nothing is written).

The dictionary is loaded once per process, on first use: only when a text with Han characters is first matched,
so a process that never sees Chinese never pays for it (measured here: ~0.16 s of CPU and ~34 MB resident). After
that a clause costs a few microseconds. The composition root installs it (:func:`gateway.core.scripts.
install_segmenter`); precise mode with the HMM for words not in the dictionary, as jieba's ``cut``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["JiebaSegmenter"]

log = logging.getLogger("gateway.segmenter")


class JiebaSegmenter:
    """A :data:`gateway.core.scripts.Segmenter`: a run of Han characters -> its words (their concatenation the
    run), loaded lazily, once, and safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jieba: Any = None

    @property
    def loaded(self) -> bool:
        return self._jieba is not None

    def _load(self) -> Any:
        with self._lock:
            if self._jieba is None:
                started = time.perf_counter()
                # deferred until the first Chinese text: English-only processes never load it; importing builds
                # the module's one segmenter and its dictionary (a second instance would hold a second copy)
                import rjieba

                self._jieba = rjieba
                log.info("Chinese segmenter loaded in %.2fs", time.perf_counter() - started)
        return self._jieba

    def __call__(self, run: str) -> Sequence[str]:
        jieba = self._jieba if self._jieba is not None else self._load()
        words: list[str] = jieba.cut(run)
        return words
