"""Self-tests of the scripted fake upstream, driven directly by the official openai SDK."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.support.fake_upstream import BrokenStream, Error, FakeUpstream, Recorded, Reply, Slow, ToolCall, Usage

MSGS: list[Any] = [{"role": "user", "content": "hi"}]
CALLS = [ToolCall("get_weather", '{"city": "Paris", "unit": "c"}'),
         ToolCall("get_time", '{"tz": "Europe/Paris"}', id="call_custom")]


@pytest.fixture
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as f:
        yield f


@pytest.fixture
def client(fake: FakeUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.url, api_key="sk-test", max_retries=0, timeout=5) as c:
        yield c


def collect_stream(chunks: Any) -> tuple[str, dict[int, dict[str, Any]], list[Any]]:
    """Reassemble content and tool calls from SDK stream chunks."""
    content, calls, seen = "", dict[int, dict[str, Any]](), list[Any]()
    for chunk in chunks:
        seen.append(chunk)
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": "", "pieces": 0})
                if tc.id:
                    slot["id"], slot["name"] = tc.id, tc.function.name
                if tc.function and tc.function.arguments:
                    slot["arguments"] += tc.function.arguments
                    slot["pieces"] += 1
    return content, calls, seen


def test_plain_reply_and_recording(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Reply(content="hello", usage=Usage(prompt_tokens=3, completion_tokens=2)))
    resp = client.chat.completions.create(model="gpt-x", messages=MSGS, temperature=0.5)
    assert resp.choices[0].message.content == "hello"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == "gpt-x"
    assert resp.usage is not None and resp.usage.total_tokens == 5
    (rec,) = fake.wait_for_requests(1)
    assert (rec.method, rec.path) == ("POST", "/v1/chat/completions")
    assert rec.body == {"model": "gpt-x", "messages": MSGS, "temperature": 0.5}
    assert json.loads(rec.raw) == rec.body
    assert rec.headers["authorization"] == "Bearer sk-test"


def test_queue_order_then_default_and_callable(fake: FakeUpstream, client: openai.OpenAI) -> None:
    def echo(rec: Recorded) -> Reply:
        assert rec.body is not None
        return Reply(content=rec.body["messages"][-1]["content"].upper(), model="echoer")

    fake.script(Reply(content="one"), Reply(content="two"), echo)
    assert fake.pending == 3
    got = [client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
           for i in range(4)]
    assert [r.choices[0].message.content for r in got] == ["one", "two", "Q2", "ok"]
    assert got[2].model == "echoer"
    assert fake.pending == 0
    assert [r.body["messages"][0]["content"] for r in fake.requests if r.body] == ["q0", "q1", "q2", "q3"]
    fake.reset()
    assert fake.requests == [] and fake.pending == 0


def test_parallel_tool_calls_non_stream(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Reply(content=None, tool_calls=CALLS))
    resp = client.chat.completions.create(model="m", messages=MSGS)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [  # type: ignore[union-attr]
        ("call_1", "get_weather", CALLS[0].arguments), ("call_custom", "get_time", CALLS[1].arguments)]


def test_parallel_tool_calls_streamed(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Reply(content="Let me check.", tool_calls=CALLS))
    with client.chat.completions.create(model="m", messages=MSGS, stream=True) as stream:
        content, calls, seen = collect_stream(stream)
    assert content == "Let me check."
    assert {i: (c["id"], c["name"], c["arguments"]) for i, c in calls.items()} == {
        0: ("call_1", "get_weather", CALLS[0].arguments), 1: ("call_custom", "get_time", CALLS[1].arguments)}
    assert all(c["pieces"] > 2 for c in calls.values())  # arguments really arrive fragmented
    assert seen[0].choices[0].delta.role == "assistant"
    assert seen[-1].choices[0].finish_reason == "tool_calls" and seen[-1].usage is None
    assert fake.requests[0].body is not None and fake.requests[0].body["stream"] is True


def test_include_usage_and_wire_format(fake: FakeUpstream) -> None:
    fake.script(Reply(content="abcdefghij", usage=Usage(7, 3)), Reply(content="xy"))
    body = {"model": "m", "messages": MSGS, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.Client() as http:
        first = http.post(f"{fake.url}/chat/completions", json=body)
        second = http.post(f"{fake.url}/chat/completions", json={**body, "stream_options": None})
    assert first.headers["content-type"] == "text/event-stream"
    events = [e.removeprefix("data: ") for e in first.text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:4]] == ["abcd", "efgh", "ij"]
    assert chunks[4]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert chunks[5]["object"] == "chat.completion.chunk" and chunks[5]["choices"] == []
    assert chunks[5]["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    events2 = [e for e in second.text.split("\n\n") if e]
    assert events2[-1] == "data: [DONE]" and '"usage"' not in second.text


@pytest.mark.parametrize(("error", "exc", "code"), [
    (Error(429, "slow down", headers={"retry-after": "1"}), openai.RateLimitError, "rate_limit_exceeded"),
    (Error(401, "bad key"), openai.AuthenticationError, "invalid_api_key"),
    (Error(500), openai.InternalServerError, None),
    (Error(400, "too long", code="context_length_exceeded"), openai.BadRequestError, "context_length_exceeded"),
])
def test_errors(fake: FakeUpstream, client: openai.OpenAI, error: Error, exc: type[openai.APIStatusError],
                code: str | None) -> None:
    fake.script(error, error)
    with pytest.raises(exc) as info:
        client.chat.completions.create(model="m", messages=MSGS)
    assert info.value.status_code == error.status and info.value.code == code
    assert info.value.body["param"] is None and info.value.body["message"] == error.message  # type: ignore[index]
    for name, value in error.headers.items():
        assert info.value.response.headers[name] == value
    with pytest.raises(exc):  # a streamed request gets the JSON error before any SSE
        client.chat.completions.create(model="m", messages=MSGS, stream=True)


def test_broken_stream_raises_mid_stream(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(BrokenStream(content_before="partial answer"), BrokenStream())
    received = ""
    # openai does NOT wrap this: the raw httpx error escapes from the iteration.
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        with client.chat.completions.create(model="m", messages=MSGS, stream=True) as stream:
            for chunk in stream:
                received += chunk.choices[0].delta.content or ""
    assert received == "partial answer"
    with pytest.raises(openai.APIConnectionError):  # non-stream: truncated body -> wrapped
        client.chat.completions.create(model="m", messages=MSGS)
    assert client.chat.completions.create(model="m", messages=MSGS).choices[0].message.content == "ok"


def test_timeout_then_prompt_stop() -> None:
    fake = FakeUpstream().start()
    fake.script(Slow(30))
    with openai.OpenAI(base_url=fake.url, api_key="x", max_retries=0, timeout=0.2) as client:
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="m", messages=MSGS)
    t0 = time.monotonic()
    fake.stop()
    fake.stop()  # idempotent
    assert time.monotonic() - t0 < 1.0


def test_slow_reply_does_not_block_others_and_stop_cuts_it(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Slow(30, content="late"), Reply(content="fast"))
    outcome: list[BaseException | str] = []

    def slow_call() -> None:
        try:
            outcome.append(client.chat.completions.create(model="m", messages=MSGS).choices[0].message.content or "")
        except BaseException as e:  # noqa: BLE001 - recorded for the assertion below
            outcome.append(e)

    worker = threading.Thread(target=slow_call)
    worker.start()
    fake.wait_for_requests(1)
    assert client.chat.completions.create(model="m", messages=MSGS).choices[0].message.content == "fast"
    t0 = time.monotonic()
    fake.stop()  # the in-flight slow response is dropped, not awaited
    worker.join(5)
    assert time.monotonic() - t0 < 2.0
    assert len(outcome) == 1 and isinstance(outcome[0], openai.APIConnectionError)


def test_models_endpoint_and_wait_timeout(fake: FakeUpstream, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["fake-model"]
    assert fake.requests[0].method == "GET" and fake.requests[0].path == "/v1/models"
    assert fake.requests[0].body is None and fake.chat_requests == []
    with pytest.raises(TimeoutError):
        fake.wait_for_requests(2, timeout=0.05)


def test_async_client_stream_and_non_stream(fake: FakeUpstream) -> None:
    fake.script(Reply(content="async hi"), Reply(content="streamed reply", tool_calls=CALLS[:1]))

    async def main() -> tuple[str | None, str, dict[int, dict[str, Any]]]:
        async with openai.AsyncOpenAI(base_url=fake.url, api_key="x", max_retries=0, timeout=5) as client:
            plain = await client.chat.completions.create(model="m", messages=MSGS)
            stream = await client.chat.completions.create(
                model="m", messages=MSGS, stream=True, stream_options={"include_usage": True})
            chunks = [c async for c in stream]
            assert chunks[-1].choices == [] and chunks[-1].usage is not None
            content, calls, _ = collect_stream(chunks)
            return plain.choices[0].message.content, content, calls

    plain, content, calls = asyncio.run(main())
    assert plain == "async hi" and content == "streamed reply"
    assert calls[0]["name"] == "get_weather" and json.loads(calls[0]["arguments"]) == {"city": "Paris", "unit": "c"}
