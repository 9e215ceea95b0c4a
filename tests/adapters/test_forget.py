"""Forgetting a thread in the store, on a real Redis: every key, every job, and a consolidation job that was
running when its thread was deleted ends without writing it back."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import datetime, timezone

import pytest
import redis.asyncio as aioredis

from gateway.adapters.job_queue import JobQueue
from gateway.adapters.manifests import NewPage
from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.adapters.upstream import LiteLLMUpstream
from gateway.config import parse_config
from gateway.core import original_page
from gateway.core.blocks import split_blocks
from gateway.core.lexical import term_counts
from gateway.core.segmentation import FlushReason
from gateway.errors import NotFound
from gateway.service.consolidator import Consolidator
from gateway.service.forgetting import ThreadAdmin
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply

# litellm, imported in-process here (the HTTP tests run it in the gateway's process), builds pydantic
# schemas that warn about its own TypedDicts; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")

NOW = datetime(2026, 2, 14, 10, 30, tzinfo=timezone.utc)


@pytest.fixture
def prefix() -> str:
    return f"forgettest-{uuid.uuid4().hex[:8]}"


def _consolidator(client: aioredis.Redis, prefix: str, upstream_url: str) -> tuple[RedisStore, JobQueue, Consolidator]:
    config = parse_config(
        {
            "model_list": [{"model_name": "fake-model", "litellm_params": {"model": "openai/fake-model", "api_base": upstream_url, "api_key": "k"}}],
            "router_settings": {"num_retries": 0},
            "pcp": {"summarizer_model": "fake-model", "embeddings": False},
        },
        environ={},
    )
    store = RedisStore(client, prefix=prefix)
    queue = JobQueue(client, prefix=prefix)
    return store, queue, Consolidator(store, queue, LiteLLMUpstream(config), None, config.pcp)


async def _store_pages(store: RedisStore, thread: ThreadKey, n: int = 4) -> None:
    messages = []
    for i in range(n):
        messages += [{"role": "user", "content": f"question {i} about sourdough starters"}, {"role": "assistant", "content": f"answer {i}: feed it daily"}]
    blocks = split_blocks([*messages, {"role": "user", "content": "next"}]).blocks
    pages = [original_page(block, NOW, len) for block in blocks[:n]]
    await store.add_pages(thread, [NewPage.of(p, len, term_counts(p.content)) for p in pages], NOW.timestamp())


async def _keys_of(client: aioredis.Redis, prefix: str, thread: ThreadKey) -> list[str]:
    return [key async for key in client.scan_iter(match=f"{prefix}:*{thread.thread}*", count=1000)]


async def test_forgetting_removes_every_key_and_job_of_the_thread_and_no_other(client: aioredis.Redis, prefix: str, fake: FakeUpstream) -> None:
    store, queue, consolidator = _consolidator(client, prefix, fake.url)
    admin = ThreadAdmin(store, consolidator)
    gone, kept = ThreadKey("alice", "t-gone"), ThreadKey("alice", "t-kept")
    for thread in (gone, kept):
        await _store_pages(store, thread)
        await consolidator.pages_added(thread)
        await consolidator.merge_requested(thread)
        await store.mark_paged(thread)
    await queue.ensure_group()
    [held] = await queue.read_new("w1", 1, None)  # a worker holds the first job of `gone`
    assert held.fields["thread"] == gone.scope
    await consolidator.flush_requested(gone)
    await client.zadd(queue.delayed_key, {f'{{"thread": "{gone.scope}", "kind": "flush"}}': 1.0})  # a retry waiting
    assert await consolidator.pending(gone) == 3

    answer = await admin.forget(gone)

    assert answer["pages"] == 4 and answer["jobs"] == 4
    assert set(answer["keys"]) >= {"manifest", "content", "log", "form"}
    assert await _keys_of(client, prefix, gone) == []
    assert await consolidator.pending(gone) == 0
    entries = await client.xrange(queue.stream_key)
    assert [fields["thread"] for _, fields in entries] == [kept.scope, kept.scope]
    assert await client.zrange(queue.delayed_key, 0, -1) == []
    assert not await queue.complete(held)  # the worker that held it finishes: nothing to settle
    assert await consolidator.pending(kept) == 2 and await store.page_count(kept) == 4
    listed = await admin.threads("alice", 0, 10)
    assert [t["id"] for t in listed["data"]] == ["t-kept"] and listed["total"] == 1
    with pytest.raises(NotFound):
        await admin.forget(gone)


async def test_a_consolidation_running_when_its_thread_is_deleted_writes_nothing_back(
    client: aioredis.Redis, prefix: str, upstream: FakeUpstream
) -> None:
    store, _, consolidator = _consolidator(client, prefix, upstream.url)
    admin = ThreadAdmin(store, consolidator)
    thread = ThreadKey("bob", "t-running")
    await _store_pages(store, thread)
    entered, release = threading.Event(), threading.Event()

    def summarizer(request: Recorded) -> Reply:  # the first manifest request waits until the thread is deleted
        entered.set()
        release.wait(30)
        return Reply(content='{"summary": "about sourdough", "clusters": ["sourdough"]}')

    upstream.script(summarizer, *[Reply(content='{"summary": "about sourdough", "clusters": ["sourdough"]}')] * 10)
    running = asyncio.create_task(consolidator.consolidate(thread))
    assert await asyncio.to_thread(entered.wait, 30)
    await admin.forget(thread)
    release.set()
    await running
    await consolidator.flush(thread, FlushReason.SAVE)  # a flush queued before the delete runs after it
    assert await _keys_of(client, prefix, thread) == []
    assert (await admin.threads("bob", 0, 10))["data"] == []
