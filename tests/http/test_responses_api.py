"""`POST /v1/responses` from outside: the openai SDK's `client.responses` -> gateway -> scripted upstream, real Redis."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from gateway.core import TokenCounter
from tests.support.fake_upstream import BrokenStream, FakeUpstream, Recorded, Reply, ToolCall, Usage
from tests.support.gateway_process import GatewayProcess

BUDGET = 1200
TOPICS = ["sourdough starter", "bicycle gears", "tax forms", "python asyncio", "hiking boots", "jazz chords"]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def gw(api_gateway: GatewayProcess) -> GatewayProcess:
    """The gateway this module shares with the other API surface's (tests/http/conftest.py); each test has a
    thread of its own."""
    assert api_gateway.config["pcp"]["budget_tokens"] == BUDGET
    return api_gateway


Connect = Callable[..., openai.OpenAI]


@pytest.fixture
def connect(gw: GatewayProcess) -> Iterator[Connect]:
    """`connect(key=..., **headers)`: an SDK client on the gateway, closed after the test."""
    made: list[openai.OpenAI] = []

    def make(key: str = "sk-tenant-r", **headers: str) -> openai.OpenAI:
        made.append(openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, default_headers=headers))
        return made[-1]

    yield make
    for client in made:
        client.close()


def _thread() -> str:
    return "r-" + uuid.uuid4().hex[:12]


def _sent(upstream: FakeUpstream, back: int = 1) -> dict[str, Any]:
    body = upstream.chat_requests[-back].body
    assert body is not None
    return body


def _items(turns: int) -> list[dict[str, Any]]:
    """`turns` finished exchanges as Responses input items, each with a fact to remember."""
    items: list[dict[str, Any]] = []
    for i in range(turns):
        topic = TOPICS[i % len(TOPICS)]
        items.append({"role": "user", "content": [{"type": "input_text", "text": f"Question {i} about {topic}: what matters in case {i}?"}]})
        items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"Answer {i}: for {topic} the key fact is code-{i:03d}, check it every {i + 2} days."}]})
    return items


def test_string_input_with_instructions(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    upstream.script(Reply(content="Hello there.", usage=Usage(prompt_tokens=12, completion_tokens=3)))
    raw = connect(**{"X-PCP-Thread": _thread()}).responses.with_raw_response.create(model="fake-model", input="Hi", instructions="Be brief.")
    response = raw.parse()
    assert response.output_text == "Hello there." and response.status == "completed"
    assert response.id.startswith("resp_") and response.model == "fake-model" and response.instructions == "Be brief."
    assert response.output[0].type == "message" and response.output[0].role == "assistant"
    assert response.usage is not None and (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (12, 3, 15)
    sent = _sent(upstream)["messages"]
    assert sent[0]["role"] == "system" and sent[0]["content"].startswith("Be brief.")
    assert sent[-1] == {"role": "user", "content": "Hi"}
    assert raw.headers["x-pcp-rounds"] == "1" and raw.headers["x-pcp-response-id"] == response.id


def test_items_become_chat_messages(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Answer in French."}]},
        {"role": "user", "content": "What is 2+2?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "user", "content": [{"type": "input_text", "text": "And 3+3? "}, {"type": "input_text", "text": "Quickly."}]},
    ]
    response = connect(**{"X-PCP-Thread": _thread()}).responses.create(model="fake-model", input=items, temperature=0.2, max_output_tokens=50)  # type: ignore[arg-type]
    assert response.output_text == "ok"
    sent = _sent(upstream)
    assert sent["messages"][0]["role"] in ("system", "developer") and "Answer in French." in sent["messages"][0]["content"]
    assert sent["messages"][1:] == [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3? Quickly."},
    ]
    # max_output_tokens arrives as max_tokens; the round offers Consult, so it is sent with pcp.zoom_round_tokens (256)
    assert sent["temperature"] == 0.2 and "tools" in sent and sent["max_tokens"] == 256


def test_previous_response_id_rebuilds_the_conversation(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    client = connect()
    opener = f"My name is Ada {uuid.uuid4().hex[:6]}."
    upstream.script(Reply(content="Nice to meet you, Ada."), Reply(content="You are Ada."), Reply(content="Still Ada."))
    first = client.responses.with_raw_response.create(model="fake-model", input=opener, instructions="You are terse.")
    second = client.responses.with_raw_response.create(model="fake-model", input="What is my name?", previous_response_id=first.parse().id)
    assert second.parse().output_text == "You are Ada." and second.parse().previous_response_id == first.parse().id
    sent = _sent(upstream)["messages"]
    # instructions do not carry over to the next response; the turns do, in order
    assert all("You are terse." not in str(m.get("content")) for m in sent)
    assert [m for m in sent if m["role"] != "system"] == [
        {"role": "user", "content": opener},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": "What is my name?"},
    ]
    # the same thread: the fingerprint of the key and the first user message, as for chat completions
    assert first.headers["x-pcp-thread"] == second.headers["x-pcp-thread"]
    third = client.responses.create(model="fake-model", input="Again?", previous_response_id=second.parse().id, stream=True)
    events = list(third)
    assert events[-1].type == "response.completed"
    assert [m["content"] for m in _sent(upstream)["messages"] if m["role"] == "user"] == [opener, "What is my name?", "Again?"]


def test_streamed_text_has_the_responses_events(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    upstream.script(Reply(content="Streaming works fine.", chunk_size=5, usage=Usage(prompt_tokens=20, completion_tokens=4)))
    client = connect(**{"X-PCP-Thread": _thread()})
    events = list(client.responses.create(model="fake-model", input="Say something", stream=True))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Streaming works fine."
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = events[-1].response  # type: ignore[union-attr]
    assert done.output_text == "Streaming works fine." and done.usage is not None and done.usage.input_tokens == 20
    # a streamed response is stored like any other: the next turn continues it
    client.responses.create(model="fake-model", input="More", previous_response_id=done.id)
    assert {"role": "assistant", "content": "Streaming works fine."} in _sent(upstream)["messages"]


def test_stream_helper_accumulates_the_final_response(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    upstream.script(Reply(content="Helper text."))
    with connect(**{"X-PCP-Thread": _thread()}).responses.stream(model="fake-model", input="Hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Helper text." and final.status == "completed"


@pytest.mark.parametrize("stream", [False, True])
def test_a_function_tool_round_trip(gw: GatewayProcess, upstream: FakeUpstream, stream: bool, connect: Connect) -> None:
    client = connect(**{"X-PCP-Thread": _thread()})
    upstream.script(Reply(content=None, tool_calls=[ToolCall("get_weather", '{"city": "Paris"}', id="call_w1")]), Reply(content="It is sunny in Paris."))
    if stream:
        events = list(client.responses.create(model="fake-model", input="Weather in Paris?", tools=[WEATHER], tool_choice="auto", stream=True))  # type: ignore[list-item]
        types = [e.type for e in events]
        assert "response.function_call_arguments.delta" in types and "response.function_call_arguments.done" in types
        first = events[-1].response  # type: ignore[union-attr]
    else:
        first = client.responses.create(model="fake-model", input="Weather in Paris?", tools=[WEATHER], tool_choice="auto")  # type: ignore[list-item]
    call = first.output[0]
    assert len(first.output) == 1 and call.type == "function_call"
    assert (call.name, call.call_id, json.loads(call.arguments)) == ("get_weather", "call_w1", {"city": "Paris"})
    sent = _sent(upstream)
    names = [t["function"]["name"] for t in sent["tools"]]
    assert names[0] == "get_weather" and sent["tools"][0]["function"]["parameters"] == WEATHER["parameters"]
    assert sent["tool_choice"] == "auto" and {"pcp_consult", "pcp_shelve"} <= set(names)
    output = [{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 24 C"}]
    second = client.responses.create(model="fake-model", input=output, previous_response_id=first.id, tools=[WEATHER])  # type: ignore[arg-type, list-item]
    assert second.output_text == "It is sunny in Paris."
    messages = _sent(upstream)["messages"]
    assert messages[-2]["role"] == "assistant" and not messages[-2].get("content")
    assert messages[-2]["tool_calls"] == [{"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    assert messages[-1] == {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 24 C"}


def test_function_calls_in_the_input_items_pair_with_their_outputs(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    items = [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city":"Rome"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "cold"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "warm"}]},
    ]
    connect(**{"X-PCP-Thread": _thread()}).responses.create(model="fake-model", input=items, tools=[WEATHER])  # type: ignore[arg-type, list-item]
    messages = _sent(upstream)["messages"]
    assert [c["id"] for c in messages[-3]["tool_calls"]] == ["c1", "c2"]
    assert messages[-2:] == [{"role": "tool", "tool_call_id": "c1", "content": "cold"}, {"role": "tool", "tool_call_id": "c2", "content": "warm"}]


def _consult_then_answer(recorded: Recorded) -> Reply:
    if recorded.body and any(m["role"] == "tool" for m in recorded.body["messages"]):
        return Reply(content="From the page: code-004.")
    return Reply(content=None, tool_calls=[ToolCall("pcp_consult", json.dumps({"reason": "need the fact", "ids": ["0000"]}), id="call_z")])


@pytest.mark.parametrize("stream", [False, True])
def test_zoom_rounds_stay_inside_the_gateway(gw: GatewayProcess, upstream: FakeUpstream, stream: bool, connect: Connect) -> None:
    upstream.script(_consult_then_answer, _consult_then_answer)
    client = connect(**{"X-PCP-Thread": _thread()})
    items = [*_items(20), {"role": "user", "content": "What was the fact about hiking boots in case 4?"}]
    if stream:
        events = list(client.responses.create(model="fake-model", input=items, stream=True))  # type: ignore[arg-type]
        assert not any(e.type.startswith("response.function_call") for e in events)
        response = events[-1].response  # type: ignore[union-attr]
    else:
        response = client.responses.create(model="fake-model", input=items)  # type: ignore[arg-type]
    assert response.output_text == "From the page: code-004."
    assert [item.type for item in response.output] == ["message"]
    assert _sent(upstream)["messages"][-1]["role"] == "tool"  # the second round carried the consult's result


def test_a_long_conversation_is_paged_within_the_budget(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    items = [*_items(40), {"role": "user", "content": "What was the key fact about jazz chords?"}]
    raw = connect(**{"X-PCP-Thread": _thread(), "X-PCP-Budget": "900"}).responses.with_raw_response.create(model="fake-model", input=items)  # type: ignore[arg-type]
    assert raw.parse().output_text == "ok"
    sent = _sent(upstream)["messages"]
    assert "<PagedContext" in sent[0]["content"] and len(sent) == 1 + 4 + 1
    assert TokenCounter().count_messages(sent) <= 900 and int(raw.headers["x-pcp-prompt-tokens"]) <= 900
    assert int(raw.headers["x-pcp-history-tokens"]) > 900 and raw.headers["x-pcp-pages"].endswith("/40")


def test_a_long_chain_of_responses_is_paged_within_the_budget(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    client = connect(f"sk-chain-{uuid.uuid4().hex[:6]}", **{"X-PCP-Budget": "700"})
    previous: str | None = None
    for i in range(14):
        topic = TOPICS[i % len(TOPICS)]
        upstream.script(Reply(content=f"Answer {i}: for {topic} the key fact is code-{i:03d}, check it every {i + 2} days."))
        kwargs: dict[str, Any] = {"previous_response_id": previous} if previous else {}
        raw = client.responses.with_raw_response.create(model="fake-model", input=f"Question {i} about {topic}: what matters in case {i}?", **kwargs)
        previous = raw.parse().id
    sent = _sent(upstream)["messages"]
    assert "<PagedContext" in sent[0]["content"] and "code-000" not in json.dumps(sent[1:])
    assert TokenCounter().count_messages(sent) <= 700
    assert raw.headers["x-pcp-pages"].endswith("/13")  # every earlier turn of the chain is a page of one thread


@pytest.mark.parametrize("stream", [False, True])
def test_pass_through_and_metadata_thread(gw: GatewayProcess, upstream: FakeUpstream, stream: bool, connect: Connect) -> None:
    client = connect(**{"X-PCP-Mode": "off"})
    upstream.script(Reply(content="plain", usage=Usage(prompt_tokens=7, completion_tokens=1)))
    raw = client.responses.with_raw_response.create(model="fake-model", input="Hi", instructions="Sys.", metadata={"pcp_thread": "meta-thread"}, stream=stream)
    response = [e for e in raw.parse() if e.type == "response.completed"][0].response if stream else raw.parse()  # type: ignore[union-attr, attr-defined]
    assert response.output_text == "plain" and response.usage.input_tokens == 7
    assert raw.headers["x-pcp-mode"] == "off" and raw.headers["x-pcp-thread"] == "meta-thread"
    sent = _sent(upstream)
    assert sent["messages"] == [{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"}] and "metadata" not in sent


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "fake-model"}, "input"),
        ({"model": "fake-model", "input": []}, "input"),
        ({"model": "fake-model", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"model": "fake-model", "input": [{"type": "web_search_call"}]}, "input[0].type"),
        ({"model": "fake-model", "input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, "input[0].arguments"),
        ({"model": "fake-model", "input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"model": "fake-model", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": "fake-model", "input": "x", "tool_choice": "sometimes"}, "tool_choice"),
        ({"model": "fake-model", "input": "x", "stream": "yes"}, "stream"),
        ({"model": "fake-model", "input": "x", "background": True}, "background"),
    ],
)
def test_bad_input_is_an_openai_shaped_400(gw: GatewayProcess, body: dict[str, Any], param: str) -> None:
    response = httpx.post(gw.base_url + "/responses", json=body, headers={"authorization": "Bearer k"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_unknown_model_and_unknown_previous_response(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    client = connect()
    with pytest.raises(openai.NotFoundError) as missing_model:
        client.responses.create(model="no-such-model", input="x")
    assert missing_model.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as missing:
        client.responses.create(model="fake-model", input="x", previous_response_id="resp_nope")
    assert missing.value.code == "previous_response_not_found" and missing.value.param == "previous_response_id"
    # a response is only visible to the API key that created it, and only when stored
    mine = client.responses.create(model="fake-model", input=f"secret {uuid.uuid4().hex}")
    with pytest.raises(openai.BadRequestError):
        connect(key="sk-someone-else").responses.create(model="fake-model", input="x", previous_response_id=mine.id)
    unstored = client.responses.create(model="fake-model", input="x", store=False)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="fake-model", input="x", previous_response_id=unstored.id)
    assert len(upstream.chat_requests) == 2  # refused requests never reached the upstream


def test_a_stream_failing_midway_ends_with_an_error_event(gw: GatewayProcess, upstream: FakeUpstream, connect: Connect) -> None:
    upstream.script(BrokenStream(content_before="partial answer"))
    events: list[Any] = []
    with pytest.raises(openai.APIError):
        for event in connect(**{"X-PCP-Thread": _thread()}).responses.create(model="fake-model", input="Hi", stream=True):
            events.append(event)
    assert events[0].type == "response.created" and "response.completed" not in [e.type for e in events]
