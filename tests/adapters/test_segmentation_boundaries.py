"""Topic boundaries with the real embedder: chats of three topics, six exchanges each, ten minutes apart, are cut
at the first exchange of each topic (issue 12 item 5). The vectors are those ingestion stores for a page: the
embedding of its exchange, user message and reply, without the transcript's role prefixes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from gateway.adapters.embedder import MiniLMEmbedder
from gateway.core import TokenCounter
from gateway.core.blocks import split_blocks
from gateway.core.labels import without_labels
from gateway.core.lexical import is_low_information
from gateway.core.pages import original_page
from gateway.core.segmentation import Buffer, SegmentationPolicy, SegmentBlock, admit, flush_now
from tests.support.topic_styles import Topic
from tests.support.topics import OTHER_TOPICS, TOPICS, chat_messages

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
RIGHT = [list(range(0, 6)), list(range(6, 12)), list(range(12, 18))]


class Embedded:
    """The real embedder, with each exchange embedded once for the module."""

    def __init__(self) -> None:
        self.model = MiniLMEmbedder()
        self._seen: dict[str, tuple[float, ...]] = {}

    def vectors(self, texts: list[str]) -> list[tuple[float, ...]]:
        new = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if new:
            self._seen.update({t: tuple(float(x) for x in v) for t, v in zip(new, asyncio.run(self.model.embed(new)))})
        return [self._seen[t] for t in texts]


@pytest.fixture(scope="module")
def embedded() -> Iterator[Embedded]:
    embedded = Embedded()
    yield embedded
    embedded.model.close()


def segments(embedded: Embedded, topics: tuple[Topic, ...], policy: SegmentationPolicy | None = None) -> list[list[int]]:
    """The exchanges (numbered from 0) of each flushed run, then of the rest of the buffer (/save)."""
    count = TokenCounter().count
    blocks = split_blocks(chat_messages(*topics)).blocks
    pages = [original_page(block, T0 + timedelta(minutes=10 * i), count) for i, block in enumerate(blocks)]
    vectors = embedded.vectors([without_labels(page.content, frozenset(), roles=False) for page in pages])
    number = {page.id: i for i, page in enumerate(pages)}
    buffer, runs = Buffer(), []
    for block, page, vector in zip(blocks, pages, vectors):
        segment = SegmentBlock(page.id, page.tokens, is_low_information(block.anchor_text), vector, page.timestamp)
        buffer, flush = admit(buffer, segment, policy or SegmentationPolicy())
        if flush is not None:
            runs.append([number[i] for i in flush.page_ids])
    _, last = flush_now(buffer)
    assert last is not None
    return [*runs, [number[i] for i in last.page_ids]]


@pytest.mark.parametrize("margin", [0.1, SegmentationPolicy().drift_margin, 0.2])
@pytest.mark.parametrize("overlap", [0.2, SegmentationPolicy().drift_overlap])
@pytest.mark.parametrize("topics", [TOPICS, OTHER_TOPICS], ids=["pasta-bicycle-taxes", "tomatoes-laptop-japan"])
def test_three_topics_of_short_messages_are_cut_at_the_right_exchanges(
    embedded: Embedded, topics: tuple[Topic, ...], margin: float, overlap: float
) -> None:
    count = TokenCounter().count
    assert all(count(q) < 12 for topic in topics for q, _ in topic)  # all under the retired "short anchor" bar
    assert segments(embedded, topics, SegmentationPolicy(drift_margin=margin, drift_overlap=overlap)) == RIGHT
