"""A request's snapshot of a thread, on a real Redis: what a gateway process caches of a thread's pages is what
the store holds, after ingestion, consolidation by another process, a rewritten summary, and a deleted thread."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
import redis.asyncio as aioredis

from gateway.adapters.consolidation_store import ConsolidationStore
from gateway.adapters.manifests import NewPage
from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core import Page, PageType, View, original_page
from gateway.core.blocks import split_blocks
from gateway.core.lexical import term_counts
from gateway.core.segmentation import Buffer

NOW = datetime(2026, 2, 14, 10, 30, tzinfo=timezone.utc)
THREAD = ThreadKey("tenant", "snap")


@pytest.fixture
def prefix() -> str:
    return f"snaptest-{uuid.uuid4().hex[:8]}"


def _pages(n: int, when: datetime = NOW) -> list[NewPage]:
    messages = []
    for i in range(n):
        messages += [{"role": "user", "content": f"question {i} about sourdough starters"}, {"role": "assistant", "content": f"answer {i}: feed it daily"}]
    blocks = split_blocks([*messages, {"role": "user", "content": "next"}]).blocks
    return [NewPage.of(p, len, term_counts(p.content)) for p in (original_page(b, when, len) for b in blocks[:n])]


def _container(children: list[NewPage], summary: str = "a topic about sourdough") -> NewPage:
    page = Page(
        id=f"c{uuid.uuid4().hex[:9]}", type=PageType.CONSOLIDATED, timestamp=NOW, content="the whole topic",
        summary=summary, clusters=(), tokens=10, source_ids=tuple(c.page.id for c in children), topic_id="t1",
    )  # fmt: skip
    return NewPage.of(page, len, term_counts(page.content))


async def test_a_snapshot_reads_the_stored_pages_and_what_else_a_request_needs(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(3)
    await store.add_pages(THREAD, pages[:2], NOW.timestamp())
    await store.save_layout(THREAD, '{"layout": 1}')
    await store.save_focus(THREAD, {pages[0].page.id: View.DETAIL}, [], 10)
    await store.touch(THREAD, [pages[1].page.id], NOW)
    ids = [p.page.id for p in pages]

    snapshot = await store.snapshot(THREAD, ids)

    assert snapshot.missing(ids) == [pages[2].page.id]
    assert await snapshot.manifests(ids) == await store.manifests(THREAD, ids)
    assert await snapshot.parents(ids) == {}
    assert snapshot.layout == '{"layout": 1}'
    assert snapshot.views == {pages[0].page.id: View.DETAIL}
    assert snapshot.page_count == 2
    assert snapshot.last_seen(ids) == {pages[1].page.id: NOW}
    assert not snapshot.paged
    await store.mark_paged(THREAD)
    assert (await store.snapshot(THREAD, ids)).paged
    assert snapshot.asked is None
    await store.save_asked(THREAD, "0123abcd", NOW.timestamp())
    assert (await store.snapshot(THREAD, ids)).asked == ("0123abcd", NOW.timestamp())
    await client.set(store.keys(THREAD).asked, "not json")  # a damaged record dates nothing, and fails nothing
    assert (await store.snapshot(THREAD, ids)).asked is None


async def test_pages_stored_by_the_request_are_known_as_read_back(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(2)
    ids = [p.page.id for p in pages]
    snapshot = await store.snapshot(THREAD, ids)
    assert snapshot.missing(ids) == ids and snapshot.page_count == 0
    await RedisStore(client, prefix=prefix).add_pages(THREAD, pages[:1], NOW.timestamp())  # another process was first
    assert await store.add_pages(THREAD, pages, NOW.timestamp(), snapshot) == ids[1:]
    assert snapshot.page_count == 2
    # the page stored here is known without a read; the other one is read
    assert await snapshot.manifests(ids) == await RedisStore(client, prefix=prefix).manifests(THREAD, ids)
    assert snapshot.missing(ids) == []


async def test_a_second_snapshot_takes_unchanged_pages_from_the_process_cache(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(2)
    ids = [p.page.id for p in pages]
    await store.add_pages(THREAD, pages, NOW.timestamp())
    first = await (await store.snapshot(THREAD, ids)).manifests(ids)
    # behind the store's back (no script, so no new version): a process that read the pages does not read them again
    await client.hdel(store.keys(THREAD).manifest, ids[0])
    assert await (await store.snapshot(THREAD, ids)).manifests(ids) == first
    assert list(await (await RedisStore(client, prefix=prefix).snapshot(THREAD, ids)).manifests(ids)) == ids[1:]


async def test_consolidation_by_another_process_is_seen(client: aioredis.Redis, prefix: str) -> None:
    here, there = RedisStore(client, prefix=prefix), RedisStore(client, prefix=prefix)  # two processes' caches
    pages = _pages(3)
    ids = [p.page.id for p in pages]
    await here.add_pages(THREAD, pages, NOW.timestamp())
    assert await (await here.snapshot(THREAD, ids)).parents(ids) == {}

    container = _container(pages[:2])
    assert await ConsolidationStore(there).commit(THREAD, 0, 2, Buffer(), container)
    snapshot = await here.snapshot(THREAD, ids)
    assert await snapshot.parents(ids) == {ids[0]: container.page.id, ids[1]: container.page.id}
    assert (await snapshot.manifests([container.page.id]))[container.page.id].page.summary == "a topic about sourdough"

    renamed = replace(container, page=replace(container.page, summary="sourdough, fed daily"))
    await ConsolidationStore(there).update_manifests(THREAD, [renamed])
    snapshot = await here.snapshot(THREAD, ids)
    assert (await snapshot.manifests([container.page.id]))[container.page.id].page.summary == "sourdough, fed daily"

    merged = _container([container, pages[2]], "the sourdough months")
    assert await ConsolidationStore(there).merge(THREAD, merged)
    snapshot = await here.snapshot(THREAD, ids)
    assert (await snapshot.parents([container.page.id, ids[2]])) == {container.page.id: merged.page.id, ids[2]: merged.page.id}


async def test_a_deleted_thread_stored_again_is_read_again(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(2)
    ids = [p.page.id for p in pages]
    await store.add_pages(THREAD, pages, NOW.timestamp())
    await (await store.snapshot(THREAD, ids)).manifests(ids)

    _, deleted = await store.forget(THREAD)
    assert "version" in deleted
    assert (await store.snapshot(THREAD, ids)).missing(ids) == ids

    later = _pages(2, NOW + timedelta(days=1))  # the same content (the same ids), stored a day later
    assert [p.page.id for p in later] == ids
    await RedisStore(client, prefix=prefix).add_pages(THREAD, later, NOW.timestamp())
    found = await (await store.snapshot(THREAD, ids)).manifests(ids)
    assert {m.page.timestamp for m in found.values()} == {NOW + timedelta(days=1)}


async def test_a_thread_stored_before_versions_gets_one(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    pages = _pages(2)
    ids = [p.page.id for p in pages]
    await store.add_pages(THREAD, pages, NOW.timestamp())
    await client.delete(store.keys(THREAD).version)
    assert len(await (await store.snapshot(THREAD, ids)).manifests(ids)) == 2
    assert await client.get(store.keys(THREAD).version)
    # an empty thread gets none (a deleted thread leaves no key behind)
    await store.snapshot(ThreadKey("tenant", "empty"), ids)
    assert await client.get(store.keys(ThreadKey("tenant", "empty")).version) is None


async def test_a_page_keeps_the_embedding_of_the_users_own_words_beside_its_own(client: aioredis.Redis, prefix: str) -> None:
    import numpy as np

    page_vector, mine = np.array([1.0, 0.0, 0.0], np.float32), np.array([0.0, 1.0, 0.0], np.float32)
    first, second = _pages(2)
    store = RedisStore(client, prefix=prefix)
    await store.add_pages(THREAD, [replace(first, vector=page_vector, user_vector=mine), replace(second, vector=page_vector)], NOW.timestamp())
    ids = [first.page.id, second.page.id]
    assert [v.tolist() for v in (await store.vectors(THREAD, ids)).values()] == [page_vector.tolist()] * 2
    # a page stored without one (or before there were any) answers with its own
    assert [v.tolist() for v in (await store.vectors(THREAD, ids, user=True)).values()] == [mine.tolist(), page_vector.tolist()]


async def test_after_a_change_a_process_reads_again_only_the_pages_it_wrote(client: aioredis.Redis, prefix: str) -> None:
    """The thread's change log names the pages each version change wrote: a process that cached the thread keeps the
    others (here, one deleted behind the store's back shows it was not read again) and reads those; when the log
    does not reach back to the version it cached, it reads every page again."""
    here, there = RedisStore(client, prefix=prefix), RedisStore(client, prefix=prefix)
    pages = _pages(4)
    ids = [p.page.id for p in pages]
    await here.add_pages(THREAD, pages, NOW.timestamp())
    before = await (await here.snapshot(THREAD, ids)).manifests(ids)
    await client.hdel(here.keys(THREAD).manifest, ids[3])  # no script: no change logged

    container = _container(pages[:2])
    assert await ConsolidationStore(there).commit(THREAD, 0, 2, Buffer(), container)
    renamed = replace(container, page=replace(container.page, summary="sourdough, fed daily"))
    await ConsolidationStore(there).update_manifests(THREAD, [renamed])  # two changes since `here` read the thread
    snapshot = await here.snapshot(THREAD, ids)
    found = await snapshot.manifests([*ids, container.page.id])
    assert found[ids[2]] is before[ids[2]] and found[ids[3]] is before[ids[3]]  # kept: no change wrote them
    assert await snapshot.parents(ids) == {ids[0]: container.page.id, ids[1]: container.page.id}
    assert found[container.page.id].page.summary == "sourdough, fed daily"
    assert len(await client.lrange(here.keys(THREAD).changes, 0, -1)) == 2

    merged = _container([container, pages[2]], "the sourdough months")
    assert await ConsolidationStore(there).merge(THREAD, merged)
    await client.delete(here.keys(THREAD).changes)  # a log that no longer reaches back: every page read again
    snapshot = await here.snapshot(THREAD, ids)
    assert snapshot.missing(ids) == [ids[3]]
    assert await snapshot.parents([container.page.id, ids[2]]) == {container.page.id: merged.page.id, ids[2]: merged.page.id}
