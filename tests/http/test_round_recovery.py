"""A round the upstream fails because the zoom tools were offered is asked again without them: openai SDK ->
gateway -> scripted upstream. llama-server answers HTTP 500 when it cannot parse the tool call its model wrote
(a page id with its closing quote missing); the client should get an answer from what the model has read, not
an error. A failure of a round without the zoom tools, or one the upstream's request itself caused, stands."""

from __future__ import annotations

import json
import uuid
from typing import Any

import openai
import pytest

from tests.support.fake_upstream import Error, FakeUpstream, Recorded, Reply, ToolCall
from tests.support.gateway_process import GatewayProcess

# what llama-server said when Qwen2.5-Coder-1.5B wrote a Consult call it could not parse (tests/real_model)
LLAMA_PARSE_ERROR = ("Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, "
                     "column 190: syntax error while parsing value - invalid string: missing closing quote; last read: '\"eda227c6'")


def _messages(question: str) -> list[dict[str, Any]]:
    """Enough history that the gateway pages it (the shared gateway's budget is 1,200 tokens)."""
    messages: list[dict[str, Any]] = []
    for i in range(30):
        messages.append({"role": "user", "content": f"Question {i}: what should I check on the boat engine, part {i}?"})
        messages.append({"role": "assistant", "content": f"Answer {i}: check the fuel line, the impeller and filter number {i:03d} every {i + 2} weeks."})
    return [*messages, {"role": "user", "content": question}]


def _client(gateway: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key="sk-recovery", max_retries=0,
                         default_headers={"X-PCP-Thread": "recovery-" + uuid.uuid4().hex[:10]})


def _tools(recorded: Recorded) -> list[str]:
    return [t["function"]["name"] for t in (recorded.body or {}).get("tools", [])]


CONSULT = Reply(content=None, tool_calls=[ToolCall("pcp_consult", json.dumps({"reason": "the filter", "ids": ["0123456789"]}))])


def _answer(gateway: GatewayProcess, stream: bool) -> tuple[str, str]:
    """The client's answer and the rounds the gateway reports."""
    client = _client(gateway)
    messages = _messages("Which filter number was it?")
    if not stream:
        raw = client.chat.completions.with_raw_response.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
        return raw.parse().choices[0].message.content or "", raw.headers["x-pcp-rounds"]
    with client.chat.completions.with_streaming_response.create(model="fake-model", messages=messages, stream=True) as response:  # type: ignore[arg-type]
        text = "".join(chunk.choices[0].delta.content or "" for chunk in response.parse() if chunk.choices)
    return text, "n/a"


@pytest.mark.parametrize("stream", [False, True])
def test_a_zoom_round_the_server_cannot_parse_is_answered_without_the_tools(api_gateway: GatewayProcess, upstream: FakeUpstream, stream: bool) -> None:
    upstream.script(CONSULT, Error(500, LLAMA_PARSE_ERROR, type="server_error"), Reply(content="Filter number 007."))
    text, rounds = _answer(api_gateway, stream)
    assert text == "Filter number 007."
    assert rounds in ("3", "n/a")
    consulted, failed, asked_again = upstream.chat_requests
    assert "pcp_consult" in _tools(consulted) and "pcp_consult" in _tools(failed)
    assert _tools(asked_again) == []  # the same round, without the zoom tools
    assert asked_again.body["messages"] == failed.body["messages"]  # type: ignore[index]
    assert asked_again.body["messages"][-1]["role"] == "tool"  # type: ignore[index]  # what the model read is kept


@pytest.mark.parametrize("stream", [False, True])
def test_a_first_round_the_server_fails_is_answered_from_the_context(api_gateway: GatewayProcess, upstream: FakeUpstream, stream: bool) -> None:
    upstream.script(Error(500, LLAMA_PARSE_ERROR, type="server_error"), Reply(content="From the context."))
    text, _ = _answer(api_gateway, stream)
    assert text == "From the context."
    first, again = upstream.chat_requests
    assert "pcp_consult" in _tools(first) and _tools(again) == []
    assert again.body["messages"] == first.body["messages"]  # type: ignore[index]


def _like_llama_server(answer: str) -> Any:
    """llama-server renders the whole conversation for its model, parsing every earlier tool call's arguments:
    one it cannot parse fails the request (HTTP 500); otherwise ``answer``."""
    def respond(recorded: Recorded) -> Reply | Error:
        for message in (recorded.body or {}).get("messages", []):
            for tool_call in message.get("tool_calls") or []:
                try:
                    json.loads(tool_call["function"]["arguments"])
                except ValueError:
                    return Error(500, LLAMA_PARSE_ERROR, type="server_error")
        return Reply(content=answer)
    return respond


@pytest.mark.parametrize("stream", [False, True])
def test_a_zoom_call_cut_by_max_tokens_does_not_poison_the_next_round(api_gateway: GatewayProcess, upstream: FakeUpstream, stream: bool) -> None:
    cut = ToolCall("pcp_consult", '{"reason": "the code", "ids": ["63310873f6", "eda227c69c", "eda227c6')  # as Qwen's ended
    upstream.script(Reply(content=None, tool_calls=[cut], finish_reason="length"), _like_llama_server("The filter is 007."))
    text, rounds = _answer(api_gateway, stream)
    assert text == "The filter is 007." and rounds in ("2", "n/a")
    sent_back = upstream.chat_requests[1].body["messages"][-2]  # type: ignore[index]
    assert json.loads(sent_back["tool_calls"][0]["function"]["arguments"])["ids"] == ["63310873f6", "eda227c69c"]  # as far as it was read


def test_a_failure_without_the_zoom_tools_reaches_the_client(api_gateway: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(Error(500, LLAMA_PARSE_ERROR, type="server_error"), Error(500, "still failing", type="server_error"))
    with pytest.raises(openai.InternalServerError) as caught:
        _answer(api_gateway, False)
    assert caught.value.status_code == 502 and "still failing" in str(caught.value.body)
    assert len(upstream.chat_requests) == 2  # asked once again, not in a loop


def test_the_upstream_refusing_the_request_is_not_asked_again(api_gateway: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(Error(400, "unknown parameter"))
    with pytest.raises(openai.BadRequestError):
        _answer(api_gateway, False)
    assert len(upstream.chat_requests) == 1
