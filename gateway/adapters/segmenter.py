"""Chinese word segmentation for lexical matching: jieba's dictionary and algorithm, through `rjieba` (its Rust
port, jieba-rs, with the dictionary compiled in: nothing is read from disk or downloaded, nothing is written).

A run is cut as jieba's precise mode cuts it, and each word of three characters or more also counts the shorter
dictionary words within it, as jieba's search mode indexes them (自行车 -> 自行, 行车, 自行车; 密码锁 -> 密码, 密码锁): a
question that says 密码 meets a page that says 密码锁. On the generated Chinese set (bench/chinese_chats.py), BM25
over fixed chunks finds 0.61 / 0.69 / 0.73 of the evidence at 1k / 2k / 4k tokens with them, 0.55 / 0.62 / 0.66
with precise words alone (and 0.55 / 0.65 / 0.69 with character bigrams).

The dictionary is loaded once per process, on first use: only when a text with Han characters is first matched,
so a process that never sees Chinese never pays for it (measured here: ~0.16 s of CPU and ~34 MB resident). After
that a clause costs a few microseconds (a word's shorter words are looked up once per process: :data:`WORDS_KEPT`).
The composition root installs it (:func:`gateway.core.scripts.install_segmenter`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

__all__ = ["JiebaSegmenter", "WORDS_KEPT"]

WORDS_KEPT = 100_000  # words whose shorter words are kept once looked up

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

    def __call__(self, run: str) -> Sequence[tuple[str, Sequence[str]]]:
        jieba = self._jieba if self._jieba is not None else self._load()
        words: list[str] = jieba.cut(run)
        return [(word, _terms(jieba, word) if len(word) > 2 else (word,)) for word in words]


@lru_cache(maxsize=WORDS_KEPT)
def _terms(jieba: Any, word: str) -> tuple[str, ...]:
    """A long word's terms: its shorter dictionary words (two, then three characters long), then itself."""
    pairs = [word[i : i + 2] for i in range(len(word) - 1)]
    threes = [word[i : i + 3] for i in range(len(word) - 2)] if len(word) > 3 else []
    return (*(w for w in [*pairs, *threes] if jieba.has_word(w)), word)
