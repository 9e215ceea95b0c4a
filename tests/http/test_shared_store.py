"""Two gateway processes on one Redis: what one process keeps of a thread's pages (RedisStore.snapshot's cache)
never hides what the other one changed — here, a thread deleted and stored again through the other process."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.adapters.embedded_redis import EmbeddedRedis
from tests.conftest import external_redis_url
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config

TOPICS = ["sourdough starter", "bicycle gears", "tax forms", "jazz chords"]
BEFORE, AFTER = "2026-01-05T10:00:00+00:00", "2026-03-09T10:00:00+00:00"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = external_redis_url()
    if url:
        yield url
        return
    server = EmbeddedRedis(tmp_path_factory.mktemp("shared-redis") / "data")
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def pair(fake: FakeUpstream, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    prefix = f"pcpshared-{uuid.uuid4().hex[:8]}"
    processes = []
    for name in ("a", "b"):
        workdir: Path = tmp_path_factory.mktemp(f"shared-{name}")
        config = gateway_config(fake.url, workdir / "data", store={"redis_url": redis_url, "key_prefix": prefix},
                                pcp={"budget_tokens": 1200, "recent_turns": 1, "embeddings": False, "consolidation": False, "shortlist": 2})
        processes.append(GatewayProcess(config=config, workdir=workdir).start())
    try:
        yield processes[0], processes[1]
    finally:
        for process in processes:
            process.stop()


def _messages(turns: int, question: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        topic = TOPICS[i % len(TOPICS)]
        messages.append({"role": "user", "content": f"Question {i} about {topic}: what matters for {topic} in case {i}?"})
        messages.append({"role": "assistant", "content": f"Answer {i}: for {topic}, the key fact is code-{i:03d}."})
    return [*messages, {"role": "user", "content": question}]


def _ask(gateway: GatewayProcess, upstream: FakeUpstream, thread: str, when: str) -> tuple[httpx.Response, str]:
    upstream.reset()
    response = httpx.post(
        gateway.base_url + "/chat/completions",
        json={"model": "fake-model", "messages": _messages(14, "What was the key fact about tax forms?")},
        headers={"Authorization": "Bearer sk-tenant-a", "X-PCP-Thread": thread, "X-PCP-Time": when},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    sent = upstream.chat_requests[0].body
    assert sent is not None
    return response, sent["messages"][0]["content"]


def test_a_thread_deleted_and_stored_again_by_another_process_is_read_again(
    pair: tuple[GatewayProcess, GatewayProcess], upstream: FakeUpstream
) -> None:
    here, there = pair
    thread = "shared-" + uuid.uuid4().hex[:10]
    response, context = _ask(here, upstream, thread, BEFORE)
    assert response.headers["x-pcp-pages"].endswith("/14") and "2026-01-05" in context
    _, again = _ask(here, upstream, thread, BEFORE)  # now served from what this process keeps of the thread
    assert again == context

    deleted = httpx.delete(f"{there.root_url}/pcp/threads/{thread}", headers={"Authorization": "Bearer sk-tenant-a"}, timeout=60)
    assert deleted.status_code == 200, deleted.text
    _, fresh = _ask(there, upstream, thread, AFTER)  # the same history stored again, two months later
    assert "2026-03-09" in fresh and "2026-01-05" not in fresh

    response, seen_here = _ask(here, upstream, thread, AFTER)
    assert response.headers["x-pcp-pages"].endswith("/14")
    assert "2026-03-09" in seen_here and "2026-01-05" not in seen_here  # not the pages this process had read before
    _, seen_there = _ask(there, upstream, thread, AFTER)
    assert seen_here == seen_there
