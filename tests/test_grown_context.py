"""A chat's next request derives its context from what the last one derived (gateway.service.page_tree: a tree grown
by the pages it adds, and the tables, columns and documents grown with it): the context must be the one a process
that knows nothing of the thread derives, request after request, as topics are consolidated between them."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from bench.request_cpu import history, question
from gateway.adapters.manifests import Manifest, NewPage, manifest_json, parse_manifest
from gateway.adapters.snapshot import ThreadSnapshot
from gateway.adapters.store_keys import ThreadKey
from gateway.adapters.thread_cache import KnownPages, PageCache
from gateway.bootstrap import Services, background_for, open_services
from gateway.config import GatewayConfig, parse_config
from gateway.core.pages import Page, PageType
from gateway.http.validation import parse_chat_request
from gateway.service import page_tree
from gateway.service.chat import ChatService
from gateway.service.request import RequestMeta
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import gateway_config

START = datetime(2026, 6, 1, 12, tzinfo=timezone.utc)


async def _drain(config: GatewayConfig, services: Services) -> None:
    background = background_for(config, services, 1)
    assert background is not None and services.consolidator is not None
    await background.start()
    while await services.consolidator.pending(ThreadKey("anon", "grown")):
        await asyncio.sleep(0.05)
    await background.stop()


@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")  # litellm's router, built once
def test_a_growing_chat_gets_the_context_a_process_that_knows_nothing_derives(
    fake: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grew = 0
    walked = page_tree._grown_tree

    async def counted(store: Any, key: Any) -> Any:
        nonlocal grew
        found = await walked(store, key)
        grew += found is not None
        return found

    monkeypatch.setattr(page_tree, "_grown_tree", counted)

    def configured(name: str) -> GatewayConfig:
        return parse_config(gateway_config(fake.url, tmp_path / name, pcp={"raw_form": True, "recent_turns": 2}))

    async def run() -> None:
        kept, fresh = configured("kept"), configured("fresh")
        async with open_services(kept) as mine, open_services(fresh) as other:
            chats = [ChatService(s.upstream, s.store, c, s.embedder, s.consolidator) for s, c in ((mine, kept), (other, fresh))]
            messages = history(60)
            for i in range(24):
                if i:
                    messages += [question(i - 1), {"role": "assistant", "content": f"Answer {i}: the reply about topic {i % 7}."}]
                body = json.dumps({"model": "fake-model", "messages": [*messages, question(i)]}).encode()
                budget, at = ("600", "900", "1500")[i % 3], (START + timedelta(minutes=5 * i)).isoformat()
                sent = []
                for chat, services in zip(chats, (mine, other)):
                    if services is other:  # this process forgets what it read and derived of the thread
                        monkeypatch.setattr(other.store, "_pages", PageCache())
                    fake.reset()
                    completion = await chat.complete(parse_chat_request(body, kept.model_names, RequestMeta(thread="grown", budget=budget, time=at)))
                    assert completion.headers.get("x-pcp-form") == "paged"
                    sent.append([r.body["messages"] for r in fake.chat_requests if r.body is not None])
                assert sent[0] == sent[1], f"request {i}"
                if i % 5 == 0:  # topics consolidated between requests: the version changes, nothing is grown across it
                    await _drain(kept, mine)
                    await _drain(fresh, other)

    asyncio.run(run())
    assert grew >= 8  # most requests grew the last one's tree


class _Pages:
    """A thread's stored pages and parent links, as `ThreadSnapshot` reads them (its `PageReader`)."""

    def __init__(self, pages: list[Page], parents: dict[str, str]) -> None:
        self.raw = {p.id: manifest_json(NewPage(p, 5, 3, {})) for p in pages}
        self.parent = parents

    def parsed_manifest(self, thread: ThreadKey, page_id: str, raw: str) -> Manifest:
        return parse_manifest(page_id, raw)

    async def manifests_and_parents(self, thread: ThreadKey, ids: list[str]) -> tuple[list[str | None], list[str | None]]:
        return [self.raw.get(i) for i in ids], [self.parent.get(i) for i in ids]


def test_a_tree_grows_only_by_pages_in_no_container(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages a request adds to the last one's pool join its tree at the end, unless one is in a container:
    then the tree is walked again, and the container stands for its pages once they are all of the history."""
    p = [f"{n:08x}" for n in range(8)]
    topic = "0000000c"
    originals = [Page(i, PageType.ORIGINAL, START + timedelta(minutes=n), f"exchange {n}", f"exchange {n}", (), 10) for n, i in enumerate(p)]
    reader = _Pages([*originals, Page(topic, PageType.CONSOLIDATED, START, "a topic", "a topic", (), 20, (p[3], p[4]))], {p[3]: topic, p[4]: topic})
    known = KnownPages("v1")
    grown: list[bool] = []
    walked = page_tree._grown_tree

    async def counted(store: Any, key: Any) -> Any:
        found = await walked(store, key)
        grown.append(found is not None)
        return found

    monkeypatch.setattr(page_tree, "_grown_tree", counted)

    async def tree(pool: list[str], recent: set[str]) -> tuple[str, ...]:
        snapshot = ThreadSnapshot(reader, ThreadKey("anon", "t"), known, layout=None, views={}, steps=(), page_count=9, paged=True,
                                  asked=None, seen={}, wanted=[], manifests=[], parents=[])  # fmt: skip
        found, _ = await page_tree.visible_tree(snapshot, pool, set(p), frozenset(recent))
        return found.roots

    async def run() -> None:
        assert await tree(p[:2], {p[6], p[7]}) == (p[0], p[1])
        assert await tree(p[:3], {p[7]}) == (p[0], p[1], p[2])  # p[2] is in no container: grown
        assert await tree(p[:5], {p[7]}) == (p[0], p[1], p[2], topic)  # p[3] and p[4] are the topic's: walked
        assert await tree(p[:6], {p[7]}) == (p[0], p[1], p[2], topic, p[5])  # grown from that one

    asyncio.run(run())
    assert grown == [False, True, False, True]
