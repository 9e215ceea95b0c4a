"""The gateway as a drop-in OpenAI proxy, driven through the official SDK (PCP off)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.support.fake_upstream import BrokenStream, Error, FakeUpstream, Reply, Slow, ToolCall, Usage
from tests.support.gateway_process import GatewayProcess

OFF = {"X-PCP-Mode": "off"}


@pytest.fixture
def client(gateway: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key="sk-client", max_retries=0, default_headers=OFF)


@pytest.fixture
def aclient(gateway: GatewayProcess) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gateway.base_url, api_key="sk-client", max_retries=0, default_headers=OFF)


HELLO = [{"role": "user", "content": "Hello there"}]


def test_models_list_names_the_config_models(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["fake-model", "slow-model"]


def test_healthz_reports_redis(gateway: GatewayProcess) -> None:
    response = httpx.get(gateway.root_url + "/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "redis": True}


def test_non_stream_chat_returns_the_upstream_answer(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content="General Kenobi", usage=Usage(prompt_tokens=12, completion_tokens=3)))
    completion = client.chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "General Kenobi"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens == 15
    sent = upstream.chat_requests[-1].body
    assert sent is not None and sent["messages"] == HELLO and sent["model"] == "fake-model"


def test_a_long_conversation_resent_with_an_earlier_message_changed_reaches_the_upstream_as_sent(
    client: openai.OpenAI, upstream: FakeUpstream
) -> None:
    # over 32 KiB: the gateway reads each body on from the one before (gateway.http.bodies)
    history: list[dict[str, Any]] = []
    for i in range(40):
        history += [{"role": "user", "content": f"part {i}: " + "words " * 200}, {"role": "assistant", "content": f"noted {i}"}]
    sent_bodies = [
        [*history, {"role": "user", "content": "first"}],
        [*history, {"role": "assistant", "content": "x"}, {"role": "user", "content": "second"}],
        [*history[:10], {"role": "user", "content": "part 5 changed"}, *history[11:], {"role": "user", "content": "third"}],
        [*history, {"role": "user", "content": "fourth", "name": "ann"}],
    ]
    for messages in sent_bodies:
        upstream.script(Reply(content="ok"))
        client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
        received = upstream.chat_requests[-1].body
        assert received is not None and received["messages"] == messages


def test_every_client_parameter_reaches_the_upstream(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    client.chat.completions.create(
        model="fake-model",
        messages=HELLO,  # type: ignore[arg-type]
        temperature=0.3,
        top_p=0.9,
        tools=tools,  # type: ignore[arg-type]
        tool_choice="auto",
        parallel_tool_calls=False,
        response_format={"type": "json_object"},
        max_tokens=77,
        stop=["END"],
        n=1,
        seed=42,
        user="user-7",
        logprobs=True,
        top_logprobs=2,
        presence_penalty=0.1,
        frequency_penalty=0.2,
        extra_body={"custom_knob": {"depth": 3}},
    )
    sent = upstream.chat_requests[-1].body
    assert sent is not None
    expected: dict[str, Any] = {
        "temperature": 0.3, "top_p": 0.9, "tools": tools, "tool_choice": "auto", "parallel_tool_calls": False,
        "response_format": {"type": "json_object"}, "max_tokens": 77, "stop": ["END"], "n": 1, "seed": 42,
        "user": "user-7", "logprobs": True, "top_logprobs": 2, "presence_penalty": 0.1, "frequency_penalty": 0.2,
        "custom_knob": {"depth": 3},
    }  # fmt: skip
    assert {k: sent.get(k) for k in expected} == expected


def test_max_completion_tokens_reaches_the_upstream(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    client.chat.completions.create(model="fake-model", messages=HELLO, max_completion_tokens=55)  # type: ignore[arg-type]
    sent = upstream.chat_requests[-1].body
    assert sent is not None and sent.get("max_completion_tokens") == 55


def test_stream_with_usage(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content="streamed words arrive in pieces", usage=Usage(prompt_tokens=20, completion_tokens=6)))
    stream = client.chat.completions.create(
        model="fake-model", messages=HELLO, stream=True, stream_options={"include_usage": True}  # type: ignore[arg-type]
    )
    text, usage, finish = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert text == "streamed words arrive in pieces"
    assert finish == "stop"
    assert usage is not None and usage.prompt_tokens == 20 and usage.completion_tokens == 6
    sent = upstream.chat_requests[-1].body
    assert sent is not None and sent["stream"] is True


def test_parallel_tool_calls_reach_the_client_intact(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    calls = [ToolCall("get_weather", '{"city": "Paris"}', id="call_a"), ToolCall("get_time", '{"tz": "Europe/Paris"}', id="call_b")]
    upstream.script(Reply(content=None, tool_calls=calls))
    message = client.chat.completions.create(model="fake-model", messages=HELLO).choices[0].message  # type: ignore[arg-type]
    assert message.tool_calls is not None
    got = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]  # type: ignore[union-attr]
    assert got == [("call_a", "get_weather", {"city": "Paris"}), ("call_b", "get_time", {"tz": "Europe/Paris"})]


def test_streamed_tool_call_deltas_reassemble(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    calls = [ToolCall("get_weather", '{"city": "Paris", "unit": "celsius"}', id="call_a"), ToolCall("get_time", '{"tz": "UTC"}', id="call_b")]
    upstream.script(Reply(content=None, tool_calls=calls, chunk_size=3))
    stream = client.chat.completions.create(model="fake-model", messages=HELLO, stream=True)  # type: ignore[arg-type]
    assembled: dict[int, dict[str, str]] = {}
    finish = None
    deltas = 0
    for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                deltas += 1
                entry = assembled.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                if call.function is not None:
                    entry["name"] += call.function.name or ""
                    entry["arguments"] += call.function.arguments or ""
    assert finish == "tool_calls"
    assert deltas > 4  # the arguments really arrived in pieces
    assert assembled == {
        0: {"id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
        1: {"id": "call_b", "name": "get_time", "arguments": '{"tz": "UTC"}'},
    }


async def test_async_client_non_stream_and_stream(aclient: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content="async one"), Reply(content="async two"))
    completion = await aclient.chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "async one"
    stream = await aclient.chat.completions.create(model="fake-model", messages=HELLO, stream=True)  # type: ignore[arg-type]
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "async two"
    await aclient.close()


@pytest.mark.parametrize(
    ("error", "exc_type", "status", "code"),
    [
        (Error(429, "slow down"), openai.RateLimitError, 429, "rate_limit_exceeded"),
        (Error(401, "bad key"), openai.AuthenticationError, 401, "invalid_api_key"),
        (Error(500, "boom"), openai.InternalServerError, 502, "upstream_unavailable"),
        (Error(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens.", code="context_length_exceeded"), openai.BadRequestError, 400, "context_length_exceeded"),
    ],
)
def test_upstream_errors_are_mapped(
    client: openai.OpenAI, upstream: FakeUpstream, error: Error, exc_type: type[openai.APIStatusError], status: int, code: str
) -> None:
    upstream.script(error)
    with pytest.raises(exc_type) as caught:
        client.chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]
    assert caught.value.status_code == status
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == code


def test_upstream_timeout_is_504(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.script(Slow(3.0))
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="slow-model", messages=HELLO)  # type: ignore[arg-type]
    assert caught.value.status_code == 504


def test_stream_failing_before_the_first_byte_keeps_its_status(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.script(Error(429, "slow down"))
    with pytest.raises(openai.RateLimitError):
        for _ in client.chat.completions.create(model="fake-model", messages=HELLO, stream=True):  # type: ignore[arg-type]
            pass


def test_stream_failing_midway_ends_with_an_error_event(client: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.script(BrokenStream(content_before="partial answer"))
    received = ""
    with pytest.raises(openai.APIError) as caught:
        for chunk in client.chat.completions.create(model="fake-model", messages=HELLO, stream=True):  # type: ignore[arg-type]
            received += "".join(c.delta.content or "" for c in chunk.choices)
    assert "partial answer".startswith(received)
    assert "upstream" in str(caught.value)


def _post(gateway: GatewayProcess, content: bytes, **headers: str) -> httpx.Response:
    return httpx.post(gateway.base_url + "/chat/completions", content=content, headers={"content-type": "application/json", **headers})


def _assert_openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    return dict(error)


def test_malformed_json_is_400(gateway: GatewayProcess) -> None:
    error = _assert_openai_error(_post(gateway, b'{"model": "fake-model", "messages": ['), 400)
    assert error["type"] == "invalid_request_error"


def test_missing_messages_is_400(client: openai.OpenAI, gateway: GatewayProcess) -> None:
    error = _assert_openai_error(_post(gateway, b'{"model": "fake-model"}'), 400)
    assert error["param"] == "messages"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="fake-model", messages=[])


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": HELLO}, "model"),
        ({"model": "fake-model", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"model": "fake-model", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "fake-model", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"model": "fake-model", "messages": HELLO, "stream": "yes"}, "stream"),
        ({"model": "fake-model", "messages": HELLO, "n": 0}, "n"),
        ({"model": "fake-model", "messages": HELLO, "tools": "lookup"}, "tools"),
    ],
)
def test_invalid_fields_are_400_naming_the_param(gateway: GatewayProcess, body: dict[str, Any], param: str) -> None:
    assert _assert_openai_error(_post(gateway, json.dumps(body).encode()), 400)["param"] == param


def test_json_that_is_not_an_object_is_400(gateway: GatewayProcess) -> None:
    _assert_openai_error(_post(gateway, b"[1, 2]"), 400)


def test_unknown_model_is_404(client: openai.OpenAI, gateway: GatewayProcess) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-99", messages=HELLO)  # type: ignore[arg-type]
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "model_not_found"


def test_body_too_large_is_413(gateway: GatewayProcess, upstream: FakeUpstream) -> None:
    big = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "x" * 1_200_000}]}).encode()
    _assert_openai_error(_post(gateway, big), 413)
    assert upstream.chat_requests == []


def test_unknown_route_is_an_openai_shaped_404(gateway: GatewayProcess) -> None:
    _assert_openai_error(httpx.get(gateway.base_url + "/nothing-here"), 404)
