"""The OpenAI Responses API's wire shapes, translated to and from the gateway's chat requests.

Pure: a request body becomes a `ResponsesCall` (this turn's input as OpenAI chat messages, the
chat parameters, and what the response echoes back); a chat reply becomes a `response` object.
Input items: messages (`input_text` / `output_text` / `input_image` / `input_file` parts or a
string), `function_call` and `function_call_output`; `reasoning` items are dropped (a chat model
cannot take them back). Tools are function tools in the flat Responses shape; hosted tools
(`web_search`, `file_search`, ...) and tool namespaces are left out, logged: they run on OpenAI's
side, which a model behind the gateway does not have.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import InvalidRequest
from gateway.http.validation import json_object, known_model
from gateway.service.request import ChatRequest, RequestMeta

__all__ = [
    "ResponsesCall",
    "parse_responses_request",
    "input_messages",
    "response_object",
    "message_item",
    "function_call_item",
    "responses_usage",
    "reply_message",
    "new_id",
]

log = logging.getLogger("gateway.http")

_ROLES = frozenset({"user", "assistant", "system", "developer"})
# Parameters that would change what the request means and that a chat model cannot honour.
_UNSUPPORTED = ("background", "conversation", "prompt")
_COPIED = ("temperature", "top_p", "parallel_tool_calls", "user")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass(frozen=True)
class ResponsesCall:
    """A validated Responses request, in chat terms."""

    model: str
    instructions: str | None
    turn: tuple[dict[str, Any], ...]  # this request's input as chat messages (without instructions)
    previous_response_id: str | None
    params: dict[str, Any]
    stream: bool
    store: bool
    echo: dict[str, Any] = field(default_factory=dict)  # request fields the response object repeats

    def chat_request(self, history: Sequence[Mapping[str, Any]], meta: RequestMeta) -> ChatRequest:
        """The chat request for this turn after `history` (the stored chain, oldest first)."""
        system = [{"role": "system", "content": self.instructions}] if self.instructions else []
        messages = [*system, *(dict(m) for m in history), *self.turn]
        params = dict(self.params)
        if self.stream:
            params["stream_options"] = {"include_usage": True}
        return ChatRequest(model=self.model, messages=messages, stream=self.stream, params=params, meta=meta)


def _text_of_parts(parts: Any, where: str, allowed: Collection[str]) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        raise InvalidRequest(f"{where} must be a string or an array of content parts", param=where)
    texts: list[str] = []
    for j, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed or not isinstance(part.get("text", part.get("refusal")), str):
            raise InvalidRequest(f"{where}[{j}] must be one of: {', '.join(sorted(allowed))} with its text", param=f"{where}[{j}]")
        texts.append(part.get("text", part.get("refusal")))
    return "".join(texts)


def _user_part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image: dict[str, Any] = {"url": part["image_url"]}
        if isinstance(part.get("detail"), str):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file" and (isinstance(part.get("file_data"), str) or isinstance(part.get("file_id"), str)):
        return {"type": "file", "file": {k: part[k] for k in ("file_data", "file_id", "filename") if isinstance(part.get(k), str)}}
    raise InvalidRequest(
        f"{where} must be an input_text, input_image (with an image_url) or input_file part; got {kind!r}", param=where
    )


def _message(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in _ROLES:
        raise InvalidRequest(f"{where}.role must be one of {', '.join(sorted(_ROLES))}; got {role!r}", param=f"{where}.role")
    content = item.get("content")
    if role == "assistant":
        return {"role": "assistant", "content": _text_of_parts(content, f"{where}.content", ("output_text", "refusal", "input_text"))}
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}.content must be a string or an array of content parts", param=f"{where}.content")
    parts = [_user_part(p, f"{where}.content[{j}]") for j, p in enumerate(content)]
    if all(p["type"] == "text" for p in parts):
        return {"role": role, "content": "".join(p["text"] for p in parts)}
    if role != "user":
        raise InvalidRequest(f"{where}.content: only user messages can carry images or files", param=f"{where}.content")
    return {"role": role, "content": parts}


def _function_call(item: Mapping[str, Any], where: str, messages: list[dict[str, Any]]) -> None:
    for key in ("call_id", "name", "arguments"):
        if not isinstance(item.get(key), str):
            raise InvalidRequest(f"{where}.{key} must be a string", param=f"{where}.{key}")
    call = {"id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": item["arguments"]}}
    last = messages[-1] if messages else None
    # consecutive calls (and the text before them) are one assistant message in chat terms
    if last is not None and last["role"] == "assistant":
        last["tool_calls"] = [*last.get("tool_calls", []), call]
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _function_output(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(item.get("call_id"), str):
        raise InvalidRequest(f"{where}.call_id must be a string", param=f"{where}.call_id")
    output = _text_of_parts(item.get("output"), f"{where}.output", ("input_text", "output_text"))
    return {"role": "tool", "tool_call_id": item["call_id"], "content": output}


def input_messages(value: Any) -> list[dict[str, Any]]:
    """`input` (a string or a list of items) as chat messages."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InvalidRequest("input must be a string or a non-empty array of input items", param="input")
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where} must be an object", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, where))
        elif kind == "function_call":
            _function_call(item, where, messages)
        elif kind == "function_call_output":
            messages.append(_function_output(item, where))
        elif kind != "reasoning":
            raise InvalidRequest(
                f"{where}.type {kind!r} is not supported; use message, function_call or function_call_output items",
                param=f"{where}.type",
            )
    return messages


def _tools(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise InvalidRequest("tools must be an array", param="tools")
    tools: list[dict[str, Any]] = []
    for j, tool in enumerate(value):
        where = f"tools[{j}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise InvalidRequest(f"{where} must be a tool object with a type", param=where)
        if tool["type"] != "function":
            # hosted tools (web_search, file_search, ...) and namespaces run on OpenAI's side, which a chat
            # model behind the gateway does not have: the model is simply not offered them
            log.info("responses: left out tool %s of type %r (only function tools reach the model)", where, tool["type"])
            continue
        if not isinstance(tool.get("name"), str):
            raise InvalidRequest(f"{where}.name must be a string", param=f"{where}.name")
        function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(value: Any) -> Any:
    if value in ("auto", "none", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
        return {"type": "function", "function": {"name": value["name"]}}
    raise InvalidRequest("tool_choice must be auto, none, required or {type: function, name}", param="tool_choice")


def _response_format(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if fmt is None or (isinstance(fmt, dict) and fmt.get("type") == "text"):
        return None
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    raise InvalidRequest("text.format must be text, json_object or json_schema with a schema", param="text.format")


def _params(data: Mapping[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {k: data[k] for k in _COPIED if data.get(k) is not None}
    if data.get("tools") is not None:
        tools = _tools(data["tools"])
        if tools:
            params["tools"] = tools
    if data.get("tool_choice") is not None:
        params["tool_choice"] = _tool_choice(data["tool_choice"])
    limit = data.get("max_output_tokens")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidRequest("max_output_tokens must be a positive integer", param="max_output_tokens")
        params["max_tokens"] = limit
    response_format = _response_format(data.get("text"))
    if response_format is not None:
        params["response_format"] = response_format
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidRequest("metadata must be an object", param="metadata")
    if isinstance(metadata, dict) and "pcp_thread" in metadata:
        params["metadata"] = {"pcp_thread": metadata["pcp_thread"]}
    return params


def _flag(data: Mapping[str, Any], key: str, default: bool) -> bool:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidRequest(f"{key} must be a boolean", param=key)
    return value


def parse_responses_request(body: bytes, models: Collection[str]) -> ResponsesCall:
    """Validate a `POST /v1/responses` body; raise InvalidRequest / ModelNotFound."""
    data = json_object(body)
    for key in _UNSUPPORTED:
        if data.get(key) not in (None, False):
            raise InvalidRequest(f"{key} is not supported by this gateway", param=key)
    if "input" not in data:
        raise InvalidRequest("you must provide an input parameter", param="input")
    turn = input_messages(data["input"])
    if not turn:
        raise InvalidRequest("input has no message or tool output (reasoning items alone are not a turn)", param="input")
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest("instructions must be a string", param="instructions")
    previous = data.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise InvalidRequest("previous_response_id must be a response id", param="previous_response_id")
    params = _params(data)
    stream, store = _flag(data, "stream", False), _flag(data, "store", True)
    model = known_model(data, models)
    echo = {
        "instructions": instructions,
        "previous_response_id": previous,
        "tools": data.get("tools") or [],
        "tool_choice": data.get("tool_choice") or "auto",
        "temperature": data.get("temperature"),
        "top_p": data.get("top_p"),
        "max_output_tokens": data.get("max_output_tokens"),
        "parallel_tool_calls": data.get("parallel_tool_calls", True),
        "metadata": data.get("metadata") or {},
        "text": data.get("text") or {"format": {"type": "text"}},
        "user": data.get("user"),
        "store": store,
    }
    return ResponsesCall(model, instructions or None, tuple(turn), previous, params, stream, store, echo)


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" else []
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def function_call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments, "status": status}


def responses_usage(usage: Any) -> dict[str, Any]:
    """A chat `usage` as the Responses API counts it."""
    counts = usage if isinstance(usage, Mapping) else {}
    prompt = int(counts.get("prompt_tokens") or 0)
    completion = int(counts.get("completion_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": int(counts.get("total_tokens") or prompt + completion),
    }


def _output(reply: Mapping[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text = reply.get("content")
    if isinstance(text, str) and text:
        items.append(message_item(new_id("msg"), text))
    for call in reply.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append(function_call_item(new_id("fc"), str(call.get("id")), str(function.get("name")), str(function.get("arguments") or "")))
    return items


def response_object(
    call: ResponsesCall,
    response_id: str,
    *,
    output: list[dict[str, Any]] | None = None,
    reply: Mapping[str, Any] | None = None,
    finish_reason: str | None = "stop",
    usage: Any = None,
    status: str | None = None,
    created: int | None = None,
) -> dict[str, Any]:
    """The `response` object: from the chat `reply` (or already built `output` items)."""
    items = output if output is not None else _output(reply or {})
    incomplete = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(finish_reason or "")
    return {
        "id": response_id,
        "object": "response",
        "created_at": created if created is not None else int(time.time()),
        "status": status or ("incomplete" if incomplete else "completed"),
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete and status is None else None,
        "model": call.model,
        "output": items,
        "usage": responses_usage(usage) if usage is not None else None,
        "truncation": "disabled",
        "reasoning": {"effort": None, "summary": None},
        **call.echo,
    }


def reply_message(output: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The chat assistant message an `output` list stands for (what the next turn's history holds)."""
    text = "".join(part.get("text", "") for item in output if item["type"] == "message" for part in item["content"])
    calls = [
        {"id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": item["arguments"]}}
        for item in output
        if item["type"] == "function_call"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message
