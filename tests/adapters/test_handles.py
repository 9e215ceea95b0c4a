"""Page handles on a real Redis: the store numbers a thread's pages 1, 2, … as it stores them (Original pages as they
are ingested, containers as consolidation commits them), never renumbers a page, keeps the number through a rewritten
summary, and what a request's snapshot learns of the pages it stored is the manifest as stored, byte for byte."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest
import redis.asyncio as aioredis

from gateway.adapters.consolidation_store import ConsolidationStore
from gateway.adapters.manifests import NewPage
from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.config import PcpSettings
from gateway.core import Page, PageType, TokenCounter, background_line, original_page
from gateway.core.blocks import split_blocks
from gateway.core.lexical import term_counts
from gateway.core.segmentation import Buffer
from gateway.service.ingest import Ingestion

NOW = datetime(2026, 2, 14, 10, 30, tzinfo=timezone.utc)
THREAD = ThreadKey("tenant", "handles")


@pytest.fixture
def prefix() -> str:
    return f"handletest-{uuid.uuid4().hex[:8]}"


def _pages(n: int) -> list[NewPage]:
    messages = []
    for i in range(n):
        messages += [{"role": "user", "content": f"question {i} about kites"}, {"role": "assistant", "content": f"answer {i}: fly it in wind {i}"}]
    blocks = split_blocks([*messages, {"role": "user", "content": "next"}]).blocks
    return [NewPage.of(p, len, term_counts(p.content)) for p in (original_page(b, NOW, len) for b in blocks[:n])]


def _container(children: list[NewPage]) -> NewPage:
    page = Page(
        id=f"c{uuid.uuid4().hex[:9]}", type=PageType.CONSOLIDATED, timestamp=NOW, content="the kites topic",
        summary="kites", clusters=(), tokens=10, source_ids=tuple(c.page.id for c in children), topic_id="t1",
    )  # fmt: skip
    return NewPage.of(page, len, term_counts(page.content))


async def test_pages_are_numbered_in_the_order_they_are_stored_and_never_renumbered(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(4)
    ids = [p.page.id for p in pages]

    assert await store.add_pages(THREAD, pages[:2], NOW.timestamp()) == {ids[0]: 1, ids[1]: 2}
    # a resent history: the stored pages keep their numbers, only the new one is numbered
    assert await store.add_pages(THREAD, pages[:3], NOW.timestamp()) == {ids[2]: 3}
    # another thread counts from 1 of its own
    assert await store.add_pages(ThreadKey("tenant", "other"), pages[3:], NOW.timestamp()) == {ids[3]: 1}

    stored = await store.pages(THREAD, ids)
    assert {i: p.handle for i, p in stored.items()} == {ids[0]: "p001", ids[1]: "p002", ids[2]: "p003"}
    assert stored[ids[2]].label == "p003"


async def test_a_snapshot_knows_its_stored_pages_as_the_store_holds_them(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(2)
    ids = [p.page.id for p in pages]
    snapshot = await store.snapshot(THREAD, ids)

    await store.add_pages(THREAD, pages, NOW.timestamp(), snapshot)

    raws = await client.hmget(store.keys(THREAD).manifest, ids)
    known = await snapshot.manifests(ids)  # from what it learned while storing: no read
    assert [known[i] for i in ids] == [store.parsed_manifest(THREAD, i, raw) for i, raw in zip(ids, raws)]
    assert [known[i].page.handle for i in ids] == ["p001", "p002"]


async def test_a_container_is_numbered_when_committed_and_a_rewritten_summary_keeps_the_number(
    client: aioredis.Redis, prefix: str
) -> None:
    store = RedisStore(client, prefix=prefix)
    cstore = ConsolidationStore(store)
    pages = _pages(3)
    await store.add_pages(THREAD, pages, NOW.timestamp())
    first, second = _container(pages[:2]), _container(pages[2:])

    assert await cstore.commit(THREAD, 0, 2, Buffer(), first)
    assert await cstore.merge(THREAD, second)

    numbered = await store.pages(THREAD, [first.page.id, second.page.id])
    assert [numbered[first.page.id].handle, numbered[second.page.id].handle] == ["p004", "p005"]

    rewritten = numbered[first.page.id].with_manifest("kites, and how to fly them", ["kites"])
    await cstore.update_manifests(THREAD, [NewPage.of(rewritten, len, term_counts(rewritten.content))])
    after = (await store.pages(THREAD, [first.page.id]))[first.page.id]
    assert (after.summary, after.handle) == ("kites, and how to fly them", "p004")


async def test_a_deleted_thread_counts_from_one_again(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(2)
    await store.add_pages(THREAD, pages, NOW.timestamp())

    _, removed = await store.forget(THREAD)

    assert "number" in removed
    assert await store.add_pages(THREAD, pages[1:], NOW.timestamp()) == {pages[1].page.id: 1}


async def test_pages_stored_before_numbering_keep_their_id_as_label(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(2)
    await store.add_pages(THREAD, pages, NOW.timestamp())
    keys = store.keys(THREAD)
    old = pages[0].page.id
    raw = await client.hget(keys.manifest, old)
    await client.hset(keys.manifest, old, raw.rsplit(', "number": ', 1)[0] + "}")  # as an older gateway wrote it

    found = (await RedisStore(client, prefix=prefix).pages(THREAD, [old, pages[1].page.id]))
    assert (found[old].handle, found[old].label) == ("", old)
    assert found[pages[1].page.id].label == "p002"


async def test_a_request_counts_the_lines_of_the_pages_it_stores_with_their_own_handles(client: aioredis.Redis, prefix: str) -> None:
    """The store numbers a page as it stores it, after its counts were made: a request counts its pages' lines
    with a handle as wide as the thread's page count after them, which is what they get."""
    store = RedisStore(client, prefix=prefix)
    ingestion = Ingestion(store, PcpSettings(), None)
    counter = TokenCounter()
    messages: list[dict[str, str]] = []
    for i in range(12):
        messages += [{"role": "user", "content": f"Is kite number {i} red?"}, {"role": "assistant", "content": f"Kite {i} is blue."}]
    history = await ingestion.store_history(THREAD, [*messages, {"role": "user", "content": "and the last?"}], NOW)

    manifests = await store.manifests(THREAD, history.ids)
    assert [m.page.handle for m in manifests.values()] == [f"p{n:03d}" for n in range(1, 13)]
    assert all(m.background_tokens == counter.count(background_line(m.page)) for m in manifests.values())
