"""The pure translations of the Responses and Messages APIs, by plain calls: the shapes the SDK tests do not reach."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.errors import InvalidRequest, UpstreamTimeout
from gateway.http.messages_api import anthropic_error, message_object, parse_messages_request, stop_reason, tool_input
from gateway.http.messages_stream import MessagesEvents
from gateway.http.responses_api import input_messages, parse_responses_request, reply_message, response_object
from gateway.http.responses_stream import ResponsesEvents
from gateway.service.request import RequestMeta

MODELS = ("m",)


def _responses(**body: Any) -> Any:
    return parse_responses_request(json.dumps({"model": "m", "input": "x", **body}).encode(), MODELS)


def _messages(**body: Any) -> Any:
    data = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}], **body}
    return parse_messages_request(json.dumps(data).encode(), MODELS, RequestMeta())


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _call(index: int, arguments: str, name: str | None = None, call_id: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments} | ({"name": name} if name else {})
    return _chunk({"tool_calls": [{"index": index, "function": function} | ({"id": call_id} if call_id else {})]})


def test_responses_user_parts_images_files_and_refusals() -> None:
    messages = input_messages([
        {"role": "user", "content": [
            {"type": "input_text", "text": "Look:"},
            {"type": "input_image", "image_url": "https://x/cat.png", "detail": "low"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,AA==", "filename": "a.pdf"},
        ]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        {"role": "system", "content": [{"type": "input_text", "text": "Sys"}]},
    ])  # fmt: skip
    assert messages == [
        {"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,AA==", "filename": "a.pdf"}},
        ]},
        {"role": "assistant", "content": "No."},
        {"role": "system", "content": "Sys"},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "param"),
    [
        ([{"role": "system", "content": [{"type": "input_image", "image_url": "u"}]}], "input[0].content"),
        ([{"role": "user", "content": [{"type": "input_audio"}]}], "input[0].content[0]"),
        ([{"role": "user", "content": 5}], "input[0].content"),
        ([{"role": "assistant", "content": [{"type": "output_text"}]}], "input[0].content[0]"),
        ([{"type": "function_call_output", "output": "x"}], "input[0].call_id"),
        ([{"type": "function_call_output", "call_id": "c", "output": 5}], "input[0].output"),
        (["text"], "input[0]"),
    ],
)
def test_responses_bad_items_name_the_field(value: Any, param: str) -> None:
    with pytest.raises(InvalidRequest) as error:
        input_messages(value)
    assert error.value.param == param


def test_responses_parameters_map_to_chat() -> None:
    call = _responses(
        tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}],
        tool_choice={"type": "function", "name": "f"},
        text={"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}},
        metadata={"pcp_thread": "t1", "other": "kept in the echo only"},
        parallel_tool_calls=False,
        user="u1",
    )
    assert call.params == {
        "parallel_tool_calls": False,
        "user": "u1",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True}},
        "metadata": {"pcp_thread": "t1"},
    }
    assert call.echo["metadata"]["other"] == "kept in the echo only"
    assert _responses(text={"format": {"type": "json_object"}}).params["response_format"] == {"type": "json_object"}
    assert "response_format" not in _responses(text={"format": {"type": "text"}}).params
    for bad in ({"input": [{"type": "reasoning", "summary": []}]}, {"text": {"format": {"type": "xml"}}}, {"metadata": 5}, {"instructions": 5}, {"previous_response_id": ""}, {"tools": {}}):
        with pytest.raises(InvalidRequest):
            _responses(**bad)


def test_hosted_and_server_tools_are_left_out() -> None:
    function = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    hosted = [{"type": "web_search", "external_web_access": False}, {"type": "namespace", "name": "agents", "tools": []}]
    assert [t["function"]["name"] for t in _responses(tools=[*hosted, function]).params["tools"]] == ["f"]
    assert "tools" not in _responses(tools=hosted).params
    server = {"type": "web_search_20250305", "name": "web_search"}
    assert [t["function"]["name"] for t in _messages(tools=[server, {"name": "g", "input_schema": {}}]).params["tools"]] == ["g"]
    assert "tools" not in _messages(tools=[server]).params


def test_a_truncated_response_is_incomplete() -> None:
    body = response_object(_responses(), "resp_1", reply={"content": "cut"}, finish_reason="length", usage={"prompt_tokens": 3, "completion_tokens": 2})
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["usage"]["total_tokens"] == 5


def test_responses_stream_text_after_a_call_and_late_arguments() -> None:
    events = ResponsesEvents(_responses(), "resp_1", 0)
    out = events.start()
    for chunk in (
        _call(0, '{"a":', name="f", call_id="c0"),
        _call(1, "{}", name="g", call_id="c1"),
        _call(0, "1}"),  # a late delta for the first call: it still lands on its own item
        _chunk({"content": "done"}),
        _chunk({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
    ):
        out += events.feed(chunk)
    out += events.finish()
    added = [e["item"]["type"] for e in out if e["type"] == "response.output_item.added"]
    assert added == ["function_call", "function_call", "message"]
    final = out[-1]["response"]
    assert [i.get("arguments") for i in final["output"]] == ['{"a":1}', "{}", None]
    assert reply_message(final["output"]) == {
        "role": "assistant", "content": "done",
        "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
            {"id": "c1", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }  # fmt: skip
    failed = events.failure(UpstreamTimeout("slow"))
    assert [e["type"] for e in failed] == ["error", "response.failed"] and failed[0]["error"]["code"] == "upstream_timeout"


def test_messages_blocks_map_to_chat() -> None:
    request = _messages(
        messages=[
            {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}, {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": [
                    {"type": "text", "text": "failed"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}},
                ]},
            ]},
            {"role": "user", "content": [{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "AA=="}}]},
        ],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        metadata={"user_id": "u1", "pcp_thread": "t"},
        top_k=5,
    )  # fmt: skip
    assert request.messages == [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}, {"type": "text", "text": "doc"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "Error: failed"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]},
        {"role": "user", "content": [{"type": "file", "file": {"file_data": "data:application/pdf;base64,AA=="}}]},
    ]
    assert request.params == {"max_tokens": 10, "tool_choice": "required", "parallel_tool_calls": False, "user": "u1", "metadata": {"pcp_thread": "t"}}
    assert _messages(tool_choice={"type": "tool", "name": "f"}).params["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert _messages(tool_choice={"type": "none"}).params["tool_choice"] == "none"


@pytest.mark.parametrize(
    "body",
    [
        {"max_tokens": True},
        {"temperature": "hot"},
        {"stop_sequences": "END"},
        {"stream": "yes"},
        {"metadata": []},
        {"tools": {}},
        {"tools": [{"name": "f"}]},
        {"tools": [5]},
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file"}}]}]},
        {"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "url"}}]}]},
        {"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}]}]},
        {"messages": [{"role": "user", "content": [5]}]},
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "assistant", "content": [{"type": "image"}]}]},
        {"messages": [{"role": "user", "content": []}]},
    ],
)
def test_messages_bad_input_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        _messages(**body)


def test_messages_replies_and_stop_reasons() -> None:
    completion = {
        "choices": [{"message": {"content": None, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "not json"}}]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 1},
    }
    message = message_object("m", completion)
    assert message["content"] == [{"type": "tool_use", "id": "c", "name": "f", "input": {"arguments": "not json"}}]
    assert message["stop_reason"] == "tool_use" and message["usage"]["input_tokens"] == 4
    assert tool_input("[1]") == {"arguments": [1]} and tool_input("") == {}
    assert [stop_reason(r) for r in ("stop", "length", "content_filter", None, "weird")] == ["end_turn", "max_tokens", "refusal", "end_turn", "end_turn"]
    assert anthropic_error(UpstreamTimeout("slow")) == {"type": "error", "error": {"type": "timeout_error", "message": "slow"}}


def test_messages_stream_blocks_are_sequential() -> None:
    events = MessagesEvents("m")
    out = events.start()
    for chunk in (_chunk({"role": "assistant", "content": "Hi"}), _call(0, '{"a"', name="f", call_id="c"), _call(0, ":1}"), _chunk({"content": "bye"}), _chunk({}, "length")):
        out += events.feed(chunk)
    out += events.finish()
    assert [(e["type"], e.get("index")) for e in out] == [
        ("message_start", None),
        ("content_block_start", 0), ("content_block_delta", 0), ("content_block_stop", 0),
        ("content_block_start", 1), ("content_block_delta", 1), ("content_block_delta", 1), ("content_block_stop", 1),
        ("content_block_start", 2), ("content_block_delta", 2), ("content_block_stop", 2),
        ("message_delta", None), ("message_stop", None),
    ]  # fmt: skip
    assert out[-2]["delta"]["stop_reason"] == "max_tokens"
    assert MessagesEvents.failure(UpstreamTimeout("slow"))[0]["type"] == "error"
