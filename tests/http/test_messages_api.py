"""`POST /v1/messages` from outside: the anthropic SDK -> gateway -> scripted upstream, real Redis."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import pytest

from gateway.core import TokenCounter
from tests.support.fake_upstream import BrokenStream, Error, FakeUpstream, Recorded, Reply, ToolCall, Usage
from tests.support.gateway_process import GatewayProcess

BUDGET = 1200
TOPICS = ["sourdough starter", "bicycle gears", "tax forms", "python asyncio", "hiking boots", "jazz chords"]
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def gw(api_gateway: GatewayProcess) -> GatewayProcess:
    """The gateway this module shares with the other API surface's (tests/http/conftest.py); each test has a
    thread of its own."""
    assert api_gateway.config["pcp"]["budget_tokens"] == BUDGET
    return api_gateway


Connect = Callable[..., anthropic.Anthropic]


@pytest.fixture
def connect(gw: GatewayProcess) -> Iterator[Connect]:
    """`connect(key=..., bearer=False, **headers)`: an SDK client on the gateway (the key sent as `x-api-key`,
    or as a bearer token), closed after the test."""
    made: list[anthropic.Anthropic] = []

    def make(key: str = "sk-tenant-m", *, bearer: bool = False, **headers: str) -> anthropic.Anthropic:
        auth: dict[str, Any] = {"auth_token": key} if bearer else {"api_key": key}
        made.append(anthropic.Anthropic(base_url=gw.root_url, max_retries=0, default_headers=headers, **auth))
        return made[-1]

    yield make
    for client in made:
        client.close()


def _thread() -> str:
    return "m-" + uuid.uuid4().hex[:12]


def _sent(upstream: FakeUpstream) -> dict[str, Any]:
    body = upstream.chat_requests[-1].body
    assert body is not None
    return body


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        topic = TOPICS[i % len(TOPICS)]
        messages.append({"role": "user", "content": f"Question {i} about {topic}: what matters in case {i}?"})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Answer {i}: for {topic} the key fact is code-{i:03d}, check it every {i + 2} days."}]})
    return messages


def test_system_and_a_multi_turn_conversation(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    upstream.script(Reply(content="Paris.", usage=Usage(prompt_tokens=30, completion_tokens=2)))
    raw = connect(**{"X-PCP-Thread": _thread()}).messages.with_raw_response.create(
        model="fake-model",
        max_tokens=100,
        system="You are a geography tutor.",
        messages=[
            {"role": "user", "content": "Capital of Italy?"},
            {"role": "assistant", "content": "Rome."},
            {"role": "user", "content": [{"type": "text", "text": "And of France?"}]},
        ],
        stop_sequences=["\n\n"],
        extra_body={"temperature": 0.3},  # this SDK version no longer takes it as an argument
    )
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant" and message.model == "fake-model"
    assert [(b.type, b.text) for b in message.content] == [("text", "Paris.")]  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn" and (message.usage.input_tokens, message.usage.output_tokens) == (30, 2)
    sent = _sent(upstream)
    assert sent["messages"][0]["role"] == "system" and sent["messages"][0]["content"].startswith("You are a geography tutor.")
    assert sent["messages"][1:] == [
        {"role": "user", "content": "Capital of Italy?"},
        {"role": "assistant", "content": "Rome."},
        {"role": "user", "content": "And of France?"},
    ]
    # max_tokens 100 arrives as max_tokens; the round offers Consult, so it is sent with pcp.zoom_round_tokens (256)
    assert "tools" in sent and sent["max_tokens"] == 256 and sent["stop"] == ["\n\n"] and sent["temperature"] == 0.3
    assert raw.headers["x-pcp-rounds"] == "1"


def test_system_blocks_and_an_image_pass_through(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    connect(**{"X-PCP-Thread": _thread()}).messages.create(
        model="fake-model",
        max_tokens=50,
        system=[{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "What is in this picture?"},
        ]}],  # fmt: skip
    )
    sent = _sent(upstream)["messages"]
    assert sent[0]["content"].startswith("Part one.\n\nPart two.")
    assert sent[-1] == {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "text", "text": "What is in this picture?"},
    ]}  # fmt: skip


def test_streamed_text_has_the_messages_events(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    upstream.script(Reply(content="Streaming works fine.", chunk_size=5, usage=Usage(prompt_tokens=21, completion_tokens=4)))
    client = connect(**{"X-PCP-Thread": _thread()})
    events = list(client.messages.create(model="fake-model", max_tokens=64, messages=[{"role": "user", "content": "Say something"}], stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["message_start", "content_block_start"] and types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert "".join(e.delta.text for e in events if e.type == "content_block_delta") == "Streaming works fine."  # type: ignore[union-attr]
    delta = events[-2]
    assert delta.delta.stop_reason == "end_turn" and delta.usage.output_tokens == 4 and delta.usage.input_tokens == 21  # type: ignore[union-attr]


def test_the_stream_helper_accumulates_the_final_message(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    upstream.script(Reply(content="Helper text, in pieces.", chunk_size=3, usage=Usage(prompt_tokens=9, completion_tokens=5)))
    with connect(**{"X-PCP-Thread": _thread()}).messages.stream(
        model="fake-model", max_tokens=64, system="Be nice.", messages=[{"role": "user", "content": "Hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Helper text, in pieces." and final.content[0].text == text  # type: ignore[union-attr]
    assert (final.usage.input_tokens, final.usage.output_tokens) == (9, 5)


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_use_tool_result_round_trip(gw: GatewayProcess, upstream: FakeUpstream, stream: bool, connect: Connect) -> None:
    client = connect(**{"X-PCP-Thread": _thread()})
    upstream.script(
        Reply(content="Let me check.", tool_calls=[ToolCall("get_weather", '{"city": "Paris"}', id="toolu_01")]),
        Reply(content="It is sunny in Paris."),
    )
    question: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    if stream:
        with client.messages.stream(model="fake-model", max_tokens=200, messages=question, tools=[WEATHER], tool_choice={"type": "auto"}) as s:  # type: ignore[list-item]
            events = list(s)
            first = s.get_final_message()
        assert "input_json" in [e.type for e in events]  # the helper's event for input_json_delta
    else:
        first = client.messages.create(model="fake-model", max_tokens=200, messages=question, tools=[WEATHER], tool_choice={"type": "auto"})  # type: ignore[list-item]
    assert [b.type for b in first.content] == ["text", "tool_use"] and first.stop_reason == "tool_use"
    use = first.content[1]
    assert (use.id, use.name, use.input) == ("toolu_01", "get_weather", {"city": "Paris"})  # type: ignore[union-attr]
    sent = _sent(upstream)
    names = [t["function"]["name"] for t in sent["tools"]]
    assert names[0] == "get_weather" and sent["tools"][0]["function"]["parameters"] == WEATHER["input_schema"]
    assert {"pcp_consult", "pcp_shelve"} <= set(names) and sent["tool_choice"] == "auto"
    follow_up: list[Any] = [
        *question,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny, 24 C"}, {"type": "text", "text": "Thanks!"}]},
    ]
    second = client.messages.create(model="fake-model", max_tokens=200, messages=follow_up, tools=[WEATHER])  # type: ignore[list-item]
    assert second.content[0].text == "It is sunny in Paris." and second.stop_reason == "end_turn"  # type: ignore[union-attr]
    messages = _sent(upstream)["messages"]
    assert messages[-3]["content"] == "Let me check."
    assert messages[-3]["tool_calls"] == [{"id": "toolu_01", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    assert messages[-2:] == [{"role": "tool", "tool_call_id": "toolu_01", "content": "sunny, 24 C"}, {"role": "user", "content": "Thanks!"}]


def _consult_then_answer(recorded: Recorded) -> Reply:
    if recorded.body and any(m["role"] == "tool" for m in recorded.body["messages"]):
        return Reply(content="From the page: code-004.")
    return Reply(content=None, tool_calls=[ToolCall("pcp_consult", json.dumps({"reason": "need the fact", "ids": ["0000"]}), id="call_z")])


@pytest.mark.parametrize("stream", [False, True])
def test_zoom_rounds_stay_inside_the_gateway(gw: GatewayProcess, upstream: FakeUpstream, stream: bool, connect: Connect) -> None:
    upstream.script(_consult_then_answer, _consult_then_answer)
    client = connect(**{"X-PCP-Thread": _thread()})
    messages: list[Any] = [*_conversation(20), {"role": "user", "content": "What was the fact about hiking boots in case 4?"}]
    if stream:
        with client.messages.stream(model="fake-model", max_tokens=100, messages=messages) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(model="fake-model", max_tokens=100, messages=messages)
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", "From the page: code-004.")]
    assert message.stop_reason == "end_turn" and _sent(upstream)["messages"][-1]["role"] == "tool"


def test_a_long_conversation_is_paged_within_the_budget(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    messages: list[Any] = [*_conversation(40), {"role": "user", "content": "What was the key fact about jazz chords?"}]
    raw = connect(**{"X-PCP-Thread": _thread(), "X-PCP-Budget": "900"}).messages.with_raw_response.create(
        model="fake-model", max_tokens=100, system="You remember things.", messages=messages
    )
    assert raw.parse().content[0].text == "ok"  # type: ignore[union-attr]
    sent = _sent(upstream)["messages"]
    assert sent[0]["content"].startswith("You remember things.") and "<PagedContext" in sent[0]["content"]
    assert len(sent) == 1 + 4 + 1 and TokenCounter().count_messages(sent) <= 900
    assert int(raw.headers["x-pcp-prompt-tokens"]) <= 900 < int(raw.headers["x-pcp-history-tokens"])
    assert raw.headers["x-pcp-pages"].endswith("/40")


def test_a_clients_reminders_in_the_first_message_are_not_memory(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    """Claude Code's way: its skills list in <system-reminder> parts of the session's first message, no thread header.
    The session is one thread, and the reminders are no page's words: a question that shares words with them
    ("code") gets the exchanges about it, not the skills list. Once that first exchange is paged, its reminders stay
    in the request, after the client's system prompt, as sent."""
    key = f"sk-{uuid.uuid4().hex[:8]}"
    skills = "\n".join(f"- skill-{n}: Review the current code diff for correctness bugs, level {n}." for n in range(12))
    first: Any = {"role": "user", "content": [{"type": "text", "text": f"<system-reminder>\nSkills:\n{skills}\n</system-reminder>"},
                                               {"type": "text", "text": f"Hello {uuid.uuid4().hex[:8]}, let us talk."}]}
    opened = connect(key).messages.with_raw_response.create(model="fake-model", max_tokens=10, messages=[first])
    messages: list[Any] = [first, {"role": "assistant", "content": "ok"}, *_conversation(4), {"role": "user", "content": "What was the code for tax forms?"}]
    raw = connect(key, **{"X-PCP-Budget": "900"}).messages.with_raw_response.create(model="fake-model", max_tokens=100, messages=messages)
    assert raw.headers["x-pcp-thread"] == opened.headers["x-pcp-thread"]  # found by what it carries
    sent = _sent(upstream)["messages"]
    client, _, context = sent[0]["content"].partition("<PagedContext")
    assert context and "skill-" not in context and "system-reminder" not in context
    assert client.strip() == first["content"][0]["text"]  # the session's context, as sent, once
    assert "Hello" not in json.dumps(sent[1:])  # (the first exchange is paged)
    assert "code-002" in json.dumps(sent)  # the tax forms' answer


def test_x_api_key_and_bearer_are_the_same_tenant(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    key, opener = f"sk-{uuid.uuid4().hex[:8]}", f"Hello {uuid.uuid4().hex[:8]}"
    question: list[Any] = [{"role": "user", "content": opener}]
    by_key = connect(key).messages.with_raw_response.create(model="fake-model", max_tokens=10, messages=question)
    by_bearer = connect(key, bearer=True).messages.with_raw_response.create(model="fake-model", max_tokens=10, messages=question)
    other = connect(key + "x").messages.with_raw_response.create(model="fake-model", max_tokens=10, messages=question)
    assert by_key.headers["x-pcp-thread"] == by_bearer.headers["x-pcp-thread"] != other.headers["x-pcp-thread"]
    assert upstream.chat_requests[-1].headers["authorization"] == "Bearer sk-upstream"  # the client's key never goes upstream


@pytest.mark.parametrize("stream", [False, True])
def test_pass_through_and_metadata_thread(gw: GatewayProcess, upstream: FakeUpstream, stream: bool, connect: Connect) -> None:
    upstream.script(Reply(content="plain", usage=Usage(prompt_tokens=7, completion_tokens=1)))
    client = connect(**{"X-PCP-Mode": "off"})
    question: list[Any] = [{"role": "user", "content": "Hi"}]
    if stream:
        with client.messages.stream(model="fake-model", max_tokens=5, system="Sys.", messages=question, metadata={"pcp_thread": "meta-thread"}) as s:  # type: ignore[typeddict-unknown-key]
            message = s.get_final_message()
            headers = s.response.headers
    else:
        raw = client.messages.with_raw_response.create(model="fake-model", max_tokens=5, system="Sys.", messages=question, metadata={"pcp_thread": "meta-thread"})  # type: ignore[typeddict-unknown-key]
        message, headers = raw.parse(), raw.headers
    assert message.content[0].text == "plain" and message.usage.input_tokens == 7  # type: ignore[union-attr]
    assert headers["x-pcp-mode"] == "off" and headers["x-pcp-thread"] == "meta-thread"
    sent = _sent(upstream)
    assert sent["messages"] == [{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"}] and "metadata" not in sent


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": "fake-model", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ({"model": "fake-model", "max_tokens": 10}, "messages"),
        ({"model": "fake-model", "max_tokens": 10, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        ({"model": "fake-model", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "video"}]}]}, "messages[0].content[0]"),
        ({"model": "fake-model", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": 5, "input_schema": {}}]}, "tools[0].name"),
        ({"model": "fake-model", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "sometimes"}}, "tool_choice"),
        ({"model": "fake-model", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}], "system": 5}, "system"),
    ],
)
def test_bad_input_is_an_anthropic_shaped_400(gw: GatewayProcess, body: dict[str, Any], fragment: str) -> None:
    response = httpx.post(gw.root_url + "/v1/messages", json=body, headers={"x-api-key": "k"})
    assert response.status_code == 400
    payload = response.json()
    assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error" and fragment in payload["error"]["message"]


def test_sdk_errors_have_anthropic_types(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    client = connect()
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="claude-nonexistent", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert missing.value.body == {"type": "error", "error": {"type": "not_found_error", "message": missing.value.body["error"]["message"]}}  # type: ignore[index]
    malformed = httpx.post(gw.root_url + "/v1/messages", content=b"{not json", headers={"x-api-key": "k"})
    assert malformed.status_code == 400 and malformed.json()["error"]["type"] == "invalid_request_error"
    upstream.script(Error(429, "slow down", headers={"retry-after": "3"}))
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model="fake-model", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert limited.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert httpx.get(gw.root_url + "/v1/messages").json()["type"] == "error"  # wrong method: still Anthropic's shape


def test_a_stream_failing_midway_ends_with_an_error_event(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    upstream.script(BrokenStream(content_before="partial answer"))
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError):
        for event in connect(**{"X-PCP-Thread": _thread()}).messages.create(
            model="fake-model", max_tokens=10, messages=[{"role": "user", "content": "x"}], stream=True
        ):
            seen.append(event.type)
    assert seen[0] == "message_start" and "message_stop" not in seen
