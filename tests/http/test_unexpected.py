"""An error no route turned into a response: the client gets the gateway's OpenAI-shaped 500, and the kept-alive
connection it came on still serves the next request (gateway.http.app._Unexpected). Real gateway, real Redis,
scripted upstream; the error is set off by a stored record the gateway cannot read (a page's manifest another program
overwrote). A view or a trace step it cannot read is only left out: the thread goes on answering."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config


def _redis_url(config: dict[str, object]) -> str:
    store = config["store"]
    assert isinstance(store, dict)
    return str(store.get("redis_url") or (Path(store["data_dir"]) / "redis.url").read_text().strip())


MESSAGES = [{"role": "user", "content": "Plan the shed."}, {"role": "assistant", "content": "Cedar, 2 by 3 m."},
            {"role": "user", "content": "What wood did we pick?"}]


@contextmanager
def stored(config: dict[str, Any], thread: str) -> Iterator[tuple[redis.Redis, str, str]]:
    """The gateway's Redis, the key stem of ``thread`` and the id of its first page (after a first request stored
    it); every key of the test's prefix removed afterwards."""
    store = redis.Redis.from_url(_redis_url(config), decode_responses=True)
    try:
        log_key = next(iter(store.scan_iter(match=f"{config['store']['key_prefix']}:*{thread}}}:log")))
        yield store, str(log_key).removesuffix(":log"), str(store.lrange(log_key, 0, 0)[0])
    finally:
        if config["store"].get("redis_url"):
            for key in store.scan_iter(match=f"{config['store']['key_prefix']}:*"):
                store.delete(key)
        store.close()


@dataclass
class Answered:
    """A gateway whose thread has answered one request, and the thread's records in its Redis."""

    fake: FakeUpstream
    gateway: GatewayProcess
    client: httpx.Client
    url: str
    headers: dict[str, str]
    store: redis.Redis
    stem: str  # the thread's keys, without their last part
    page: str  # the id of its first page


@contextmanager
def answered(tmp_path: Path, name: str) -> Iterator[Answered]:
    with FakeUpstream() as fake:
        config = gateway_config(fake.url, tmp_path / "data", pcp={"embeddings": False})
        thread = f"{name}-{uuid.uuid4().hex[:8]}"
        headers = {"X-PCP-Thread": thread}
        with GatewayProcess(config=config, workdir=tmp_path) as gateway, httpx.Client(timeout=60) as client:
            url = gateway.base_url + "/chat/completions"
            assert client.post(url, headers=headers, json={"model": "fake-model", "messages": MESSAGES}).status_code == 200
            with stored(config, thread) as (store, stem, page):
                yield Answered(fake, gateway, client, url, headers, store, stem, page)


def test_an_unexpected_error_is_an_openai_500_and_the_connection_serves_the_next_request(tmp_path: Path) -> None:
    with answered(tmp_path, "broken") as it:
        it.store.hset(it.stem + ":manifest", it.page, "{no manifest")  # not the JSON the gateway wrote
        # a large body: uvicorn closed the connection after an exception raised on to it, and a client's next request
        # on it was reset
        long = [*MESSAGES[:-1], {"role": "user", "content": "notes " * 120_000 + "What wood did we pick?"}]
        failed = it.client.post(it.url, headers=it.headers, json={"model": "fake-model", "messages": long})
        assert failed.status_code == 500
        error = failed.json()["error"]
        assert error["message"] == "the gateway failed unexpectedly; see its log" and error["type"]
        assert "Traceback" not in failed.text
        assert it.client.get(it.gateway.base_url + "/models").status_code == 200  # the same connection, still open
        assert "unexpected error on POST" in it.gateway.log_path.read_text()  # type: ignore[union-attr]


def test_a_stored_view_or_step_the_gateway_cannot_read_is_left_out_and_the_thread_answers(tmp_path: Path) -> None:
    with answered(tmp_path, "unread") as it:
        it.store.hset(it.stem + ":views", it.page, "Sideways")  # a view another version wrote
        it.store.rpush(it.stem + ":trace", "[not a step]")
        again = it.client.post(it.url, headers=it.headers, json={"model": "fake-model", "messages": MESSAGES})
        assert again.status_code == 200, again.text
        assert "Cedar" in str(it.fake.chat_requests[-1].body)  # the page is shown all the same
        logged = it.gateway.log_path.read_text()  # type: ignore[union-attr]
        assert "left out a stored view this gateway cannot read: 'Sideways'" in logged
        assert "left out a stored trace step this gateway cannot read" in logged
