"""Topic boundaries with the real embedder: scripted chats of three topics, six short exchanges each, are cut
at the first exchange of each topic (issue 12 item 5). The vectors are those ingestion stores for a page: the
embedding of its content, user message and reply."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from gateway.adapters.embedder import MiniLMEmbedder
from gateway.core import TokenCounter
from gateway.core.blocks import split_blocks
from gateway.core.lexical import is_low_information
from gateway.core.pages import original_page
from gateway.core.segmentation import Buffer, SegmentationPolicy, SegmentBlock, admit, flush_now
from tests.support.topics import OTHER_TOPICS, TOPICS, chat_messages

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def embedder() -> Iterator[MiniLMEmbedder]:
    model = MiniLMEmbedder()
    yield model
    model.close()


def segments(embedder: MiniLMEmbedder, topics: tuple[list[tuple[str, str]], ...], policy: SegmentationPolicy) -> list[list[int]]:
    """The exchanges (numbered from 0) of each flushed run, then of the rest of the buffer."""
    count = TokenCounter().count
    blocks = split_blocks(chat_messages(*topics)).blocks
    pages = [original_page(block, T0 + timedelta(minutes=i), count) for i, block in enumerate(blocks)]
    vectors = asyncio.run(embedder.embed([page.content for page in pages]))
    number = {page.id: i for i, page in enumerate(pages)}
    buffer, runs = Buffer(), []
    for block, page, vector in zip(blocks, pages, vectors):
        segment = SegmentBlock(page.id, page.tokens, is_low_information(block.anchor_text), tuple(float(x) for x in vector), page.timestamp)
        buffer, flush = admit(buffer, segment, policy)
        if flush is not None:
            runs.append([number[i] for i in flush.page_ids])
    _, last = flush_now(buffer)
    assert last is not None
    return [*runs, [number[i] for i in last.page_ids]]


@pytest.mark.parametrize("threshold", [0.3, SegmentationPolicy().adsorb_threshold, 0.4])
@pytest.mark.parametrize("topics", [TOPICS, OTHER_TOPICS], ids=["pasta-bicycle-taxes", "tomatoes-laptop-japan"])
def test_three_topics_of_short_messages_are_cut_at_the_right_exchanges(
    embedder: MiniLMEmbedder, topics: tuple[list[tuple[str, str]], ...], threshold: float
) -> None:
    count = TokenCounter().count
    assert all(count(q) < 12 for topic in topics for q, _ in topic)  # all under the retired "short anchor" bar
    policy = SegmentationPolicy(adsorb_threshold=threshold)
    assert segments(embedder, topics, policy) == [list(range(0, 6)), list(range(6, 12)), list(range(12, 18))]
