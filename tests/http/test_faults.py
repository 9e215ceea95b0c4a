"""Faults the gateway survives: upstream errors retried and routed to fallbacks from the config, a client that
hangs up mid-stream, and SIGTERM while requests and jobs are in flight. Real gateway processes, scripted upstream."""

from __future__ import annotations

import re
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import redis

from tests.support.fake_upstream import Error, FakeUpstream, Recorded, Reply, Response, Slow
from tests.support.gateway_process import GatewayProcess, gateway_config
from tests.http.test_consolidation import ASYNCIO, KEY, PCP, SOURDOUGH, exchanges, settled

OFF = {"X-PCP-Mode": "off"}
HELLO = [{"role": "user", "content": "Hello there"}]


def _faulty_config(upstream_url: str, data_dir: Path) -> dict[str, Any]:
    """`primary` falls back to `backup`, LiteLLM-proxy style: retries and fallbacks in litellm_settings."""
    # every request here is pass-through (X-PCP-Mode: off), which never embeds: no embedding model to load
    config = gateway_config(upstream_url, data_dir, pcp={"embeddings": False})
    config["model_list"] += [
        {"model_name": name, "litellm_params": {"model": f"openai/{name}-model", "api_base": upstream_url, "api_key": "sk-upstream"}}
        for name in ("primary", "backup")
    ]
    config["router_settings"] = {"disable_cooldowns": True, "retry_after": 0}
    config["litellm_settings"] = {"num_retries": 1, "fallbacks": [{"primary": ["backup"]}], "drop_params": True}
    return config


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeUpstream, GatewayProcess]]:
    workdir = tmp_path_factory.mktemp("faults")
    with FakeUpstream() as fake:
        config = _faulty_config(fake.url, workdir / "data")
        try:
            with GatewayProcess(config=config, workdir=workdir) as gateway:
                yield fake, gateway
        finally:
            _drop_keys(config)


@pytest.fixture
def fake(faulty: tuple[FakeUpstream, GatewayProcess]) -> FakeUpstream:
    faulty[0].reset()
    return faulty[0]


@pytest.fixture
def client(faulty: tuple[FakeUpstream, GatewayProcess]) -> openai.OpenAI:
    return openai.OpenAI(base_url=faulty[1].base_url, api_key="sk-client", max_retries=0, default_headers=OFF)


def _models(fake: FakeUpstream) -> list[str]:
    return [str((r.body or {}).get("model")) for r in fake.chat_requests]


def _counter(gateway: GatewayProcess, name: str, model: str) -> float:
    text = httpx.get(gateway.root_url + "/metrics").text
    found = re.search(rf'^{name}_total{{model="{model}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def _by_model(answers: dict[str, Response]) -> Any:
    def answer(rec: Recorded) -> Response:
        return answers[str((rec.body or {}).get("model"))]

    return answer


def test_server_errors_are_retried_as_num_retries_says(client: openai.OpenAI, fake: FakeUpstream, faulty: tuple[FakeUpstream, GatewayProcess]) -> None:
    before = _counter(faulty[1], "pcp_upstream_retries", "fake-model")
    fake.script(Error(503, "busy"), Reply(content="second time lucky"))
    completion = client.chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "second time lucky"
    assert _models(fake) == ["fake-model"] * 2
    assert _counter(faulty[1], "pcp_upstream_retries", "fake-model") == before + 1


def test_an_exhausted_model_falls_back_and_the_fallback_is_counted(client: openai.OpenAI, fake: FakeUpstream, faulty: tuple[FakeUpstream, GatewayProcess]) -> None:
    before = _counter(faulty[1], "pcp_upstream_fallbacks", "primary")
    fake.script(*[_by_model({"primary-model": Error(500, "primary down"), "backup-model": Reply(content="from the backup")})] * 6)
    completion = client.chat.completions.create(model="primary", messages=HELLO)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "from the backup"
    assert _models(fake) == ["primary-model"] * 2 + ["backup-model"]
    assert _counter(faulty[1], "pcp_upstream_fallbacks", "primary") == before + 1


def test_a_stream_falls_back_before_its_first_byte(client: openai.OpenAI, fake: FakeUpstream) -> None:
    fake.script(*[_by_model({"primary-model": Error(429, "slow down"), "backup-model": Reply(content="streamed by the backup")})] * 6)
    stream = client.chat.completions.create(model="primary", messages=HELLO, stream=True)  # type: ignore[arg-type]
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "streamed by the backup"
    assert _models(fake)[-1] == "backup-model"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [(Error(429, "slow down"), 429, "rate_limit_exceeded"), (Error(500, "boom"), 502, "upstream_unavailable")],
)
def test_when_retries_and_fallbacks_are_spent_the_client_gets_an_openai_error(
    client: openai.OpenAI, fake: FakeUpstream, error: Error, status: int, code: str
) -> None:
    fake.script(*[error] * 6)
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="primary", messages=HELLO)  # type: ignore[arg-type]
    assert caught.value.status_code == status
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == code
    assert _models(fake) == ["primary-model"] * 2 + ["backup-model"] * 2


def test_a_timeout_is_retried_then_answered_504(client: openai.OpenAI, fake: FakeUpstream) -> None:
    fake.script(Slow(3.0), Slow(3.0))
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="slow-model", messages=HELLO)  # type: ignore[arg-type]
    assert caught.value.status_code == 504 and isinstance(caught.value.body, dict) and caught.value.body["code"] == "upstream_timeout"
    assert _models(fake) == ["slow-model"] * 2


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", {"messages": HELLO}),
        ("/responses", {"input": "Hello there"}),
        ("/messages", {"messages": HELLO, "max_tokens": 100}),
    ],
    ids=["chat", "responses", "messages"],
)
def test_a_client_that_hangs_up_mid_stream_cancels_the_upstream_call(
    faulty: tuple[FakeUpstream, GatewayProcess], fake: FakeUpstream, path: str, body: dict[str, Any]
) -> None:
    fake.script(Reply(content="word " * 400, chunk_size=5, chunk_delay=0.02))  # ~8 s if streamed to the end
    with httpx.stream(
        "POST", faulty[1].base_url + path, headers=OFF, json={"model": "fake-model", "stream": True, **body}, timeout=10,
    ) as response:  # fmt: skip
        assert response.status_code == 200
        lines = response.iter_lines()
        while "word" not in next(lines):  # the upstream's text is flowing through
            pass
    deadline = time.monotonic() + 5
    while not fake.closed_early and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(fake.closed_early) == 1, "the upstream stream ran on after the client left"


def _post_in_background(gateway: GatewayProcess, answers: list[httpx.Response], **json: Any) -> threading.Thread:
    def post() -> None:
        answers.append(httpx.post(gateway.base_url + "/chat/completions", headers=OFF, json=json, timeout=30))

    thread = threading.Thread(target=post)
    thread.start()
    return thread


def test_sigterm_finishes_in_flight_requests_and_leaves_jobs_claimable(tmp_path: Path) -> None:
    """SIGTERM while a chat request waits on the upstream and a worker is mid-job (its summarizer call hangs):
    the request is answered, the process exits within the bound, and a restarted gateway finishes the job."""
    thread = "sigterm-" + uuid.uuid4().hex[:8]
    with FakeUpstream() as fake:
        config = gateway_config(
            fake.url, tmp_path / "data", pcp={**PCP, "summarizer_model": "summarizer", "embeddings": False},
            jobs={"shutdown_grace_ms": 300, "visibility_timeout_ms": 1500},
        )  # fmt: skip
        config["model_list"].append({"model_name": "summarizer", "litellm_params": {"model": "openai/summarizer", "api_base": fake.url, "api_key": "k", "timeout": 120}})
        fake.default = _by_model({"summarizer": Slow(60.0, content="never delivered"), "fake-model": Slow(1.5, content="finished after SIGTERM")})  # type: ignore[assignment]
        gateway = GatewayProcess(config=config, workdir=tmp_path).start()
        try:
            memory = openai.OpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0, default_headers={"X-PCP-Thread": thread})
            memory.chat.completions.create(model="fake-model", messages=exchanges(SOURDOUGH + ASYNCIO) + [{"role": "user", "content": "/save"}])  # type: ignore[arg-type]
            _wait_for(lambda: "summarizer" in _models(fake), "the worker never called the summarizer")
            answers: list[httpx.Response] = []
            request = _post_in_background(gateway, answers, model="fake-model", messages=HELLO)
            _wait_for(lambda: "fake-model" in _models(fake), "the chat request never reached the upstream")
            assert gateway.process is not None
            started = time.monotonic()
            gateway.process.send_signal(signal.SIGTERM)
            returncode = gateway.process.wait(timeout=30)
            stopped_in = time.monotonic() - started
            request.join(5)
        finally:
            gateway.stop()
        assert answers and answers[0].status_code == 200, gateway.log()
        assert answers[0].json()["choices"][0]["message"]["content"] == "finished after SIGTERM"
        assert returncode in (0, -signal.SIGTERM) and stopped_in < 1.5 + 0.3 + 5, gateway.log()
        assert "Traceback" not in gateway.log()

        fake.default = Error(500, "summarizer down")  # the job's next worker: extractive fallback
        try:
            with GatewayProcess(config=config, workdir=tmp_path) as restarted:
                data = settled(restarted, thread)
        finally:
            _drop_keys(config)
    assert data["consolidated_pages"] >= 1 and data["pending_jobs"] == 0


def _drop_keys(config: dict[str, Any]) -> None:
    """On a shared Redis (REDIS_URL), remove the keys this gateway wrote."""
    url = config["store"].get("redis_url")
    if url:
        client = redis.Redis.from_url(url)
        try:
            for key in client.scan_iter(match=f"{config['store']['key_prefix']}:*", count=1000):
                client.delete(key)
        finally:
            client.close()


def _wait_for(condition: Callable[[], bool], failure: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.05)
