"""The Anthropic Messages API's wire shapes, translated to and from the gateway's chat requests.

Pure: a `POST /v1/messages` body becomes a `ChatRequest` (OpenAI chat messages: `system` first,
`tool_result` blocks as `tool` messages right after the assistant's calls, images as
`image_url` parts, documents as `file` parts); a chat reply becomes a `message`; gateway errors
become Anthropic's `{"type": "error", "error": {"type", "message"}}`. `thinking` blocks and
`cache_control` marks are dropped: a chat model cannot take them back. Server tools (web search,
code execution, ...) are left out, logged: they run on Anthropic's side.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from gateway.errors import GatewayError, InvalidRequest
from gateway.http.validation import json_object, known_model
from gateway.service.request import ChatRequest, RequestMeta

__all__ = ["parse_messages_request", "message_object", "stop_reason", "anthropic_error", "anthropic_usage", "tool_input", "new_message_id"]

log = logging.getLogger("gateway.http")

_DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use", "content_filter": "refusal"}
_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    413: "request_too_large", 429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error",
}  # fmt: skip


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def _image(source: Any, where: str) -> dict[str, Any]:
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64" and isinstance(source.get("media_type"), str) and isinstance(source.get("data"), str):
        return {"type": "image_url", "image_url": {"url": f"data:{source['media_type']};base64,{source['data']}"}}
    if kind == "url" and isinstance(source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": source["url"]}}
    raise InvalidRequest(f"{where}.source must be a base64 source (media_type, data) or a url source", param=f"{where}.source")


def _document(source: Any, where: str) -> dict[str, Any]:
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "text" and isinstance(source.get("data"), str):
        return {"type": "text", "text": source["data"]}
    if kind == "base64" and isinstance(source.get("media_type"), str) and isinstance(source.get("data"), str):
        return {"type": "file", "file": {"file_data": f"data:{source['media_type']};base64,{source['data']}"}}
    raise InvalidRequest(f"{where}.source must be a text or base64 document source", param=f"{where}.source")


def _user_part(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        return _image(block.get("source"), where)
    if kind == "document":
        return _document(block.get("source"), where)
    raise InvalidRequest(f"{where} must be a text, image, document or tool_result block; got {kind!r}", param=where)


def _tool_result(block: Mapping[str, Any], where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The tool message, and the images the result carried (chat tool messages hold text only)."""
    if not isinstance(block.get("tool_use_id"), str):
        raise InvalidRequest(f"{where}.tool_use_id must be a string", param=f"{where}.tool_use_id")
    content = block.get("content", "")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for j, part in enumerate(content):
            converted = _user_part(part if isinstance(part, dict) else {}, f"{where}.content[{j}]")
            if converted["type"] == "text":
                texts.append(converted["text"])
            else:
                images.append(converted)
    else:
        raise InvalidRequest(f"{where}.content must be a string or an array of blocks", param=f"{where}.content")
    text = "\n".join(texts)
    if block.get("is_error") is True:
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": block["tool_use_id"], "content": text}, images


def _user(content: list[Any], where: str) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InvalidRequest(f"{at} must be an object with a type", param=at)
        if block["type"] == "tool_result":
            message, images = _tool_result(block, at)
            tools.append(message)
            parts += images
        elif block["type"] not in _DROPPED_BLOCKS:
            parts.append(_user_part(block, at))
    # tool results answer the previous assistant turn, so in chat terms they come first
    if not parts:
        return tools
    if all(p["type"] == "text" for p in parts):
        return [*tools, {"role": "user", "content": "\n".join(p["text"] for p in parts)}]
    return [*tools, {"role": "user", "content": parts}]


def _assistant(content: list[Any], where: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append({"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}})
        elif kind not in _DROPPED_BLOCKS:
            raise InvalidRequest(f"{at} must be a text or tool_use block (with id and name); got {kind!r}", param=at)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise InvalidRequest("messages must be a non-empty array", param="messages")
    out: list[dict[str, Any]] = []
    for index, message in enumerate(value):
        where = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise InvalidRequest(f"{where}.role must be user or assistant; got {role!r}", param=f"{where}.role")
        content = message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
        elif not isinstance(content, list):
            raise InvalidRequest(f"{where}.content must be a string or an array of content blocks", param=f"{where}.content")
        elif role == "user":
            out += _user(content, where)
        else:
            out.append(_assistant(content, where))
    return out


def _system(value: Any) -> list[dict[str, Any]]:
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, str):
        return [{"role": "system", "content": value}]
    if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in value):
        return [{"role": "system", "content": "\n\n".join(b["text"] for b in value)}]
    raise InvalidRequest("system must be a string or an array of text blocks", param="system")


def _tools(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise InvalidRequest("tools must be an array", param="tools")
    tools: list[dict[str, Any]] = []
    for j, tool in enumerate(value):
        where = f"tools[{j}]"
        if not isinstance(tool, dict):
            raise InvalidRequest(f"{where} must be a tool object", param=where)
        if tool.get("type", "custom") != "custom":
            # server tools (web_search_20250305, code_execution, ...) run on Anthropic's side, which a model
            # behind the gateway does not have: the model is simply not offered them
            log.info("messages: left out server tool %s of type %r", where, tool.get("type"))
            continue
        if not isinstance(tool.get("name"), str):
            raise InvalidRequest(f"{where}.name must be a string", param=f"{where}.name")
        if not isinstance(tool.get("input_schema"), dict):
            raise InvalidRequest(f"{where}.input_schema must be a JSON schema object", param=f"{where}.input_schema")
        function = {"name": tool["name"], "parameters": tool["input_schema"]}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(value: Any, params: dict[str, Any]) -> None:
    kind = value.get("type") if isinstance(value, dict) else None
    choices = {"auto": "auto", "any": "required", "none": "none"}
    if kind in choices:
        params["tool_choice"] = choices[kind]
    elif kind == "tool" and isinstance(value.get("name"), str):
        params["tool_choice"] = {"type": "function", "function": {"name": value["name"]}}
    else:
        raise InvalidRequest("tool_choice must be {type: auto | any | none} or {type: tool, name}", param="tool_choice")
    if value.get("disable_parallel_tool_use") is True and kind != "none":
        params["parallel_tool_calls"] = False


def _params(data: Mapping[str, Any]) -> dict[str, Any]:
    limit = data.get("max_tokens")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidRequest("max_tokens is required and must be a positive integer", param="max_tokens")
    params: dict[str, Any] = {"max_tokens": limit}
    for key in ("temperature", "top_p"):
        if data.get(key) is not None:
            if isinstance(data[key], bool) or not isinstance(data[key], (int, float)):
                raise InvalidRequest(f"{key} must be a number", param=key)
            params[key] = data[key]
    stops = data.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise InvalidRequest("stop_sequences must be an array of strings", param="stop_sequences")
        if stops:
            params["stop"] = stops
    if data.get("tools") is not None:
        tools = _tools(data["tools"])
        if tools:
            params["tools"] = tools
    if data.get("tool_choice") is not None:
        _tool_choice(data["tool_choice"], params)
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidRequest("metadata must be an object", param="metadata")
    if isinstance(metadata, dict):
        if isinstance(metadata.get("user_id"), str):
            params["user"] = metadata["user_id"]
        if "pcp_thread" in metadata:
            params["metadata"] = {"pcp_thread": metadata["pcp_thread"]}
    return params


def parse_messages_request(body: bytes, models: Collection[str], meta: RequestMeta) -> ChatRequest:
    """Validate a `POST /v1/messages` body into a chat request; raise InvalidRequest / ModelNotFound."""
    data = json_object(body)
    conversation = _messages(data.get("messages"))
    if not conversation:
        raise InvalidRequest("messages hold no content (thinking blocks alone are not a turn)", param="messages")
    messages = [*_system(data.get("system")), *conversation]
    params = _params(data)
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequest("stream must be a boolean", param="stream")
    if stream:
        params["stream_options"] = {"include_usage": True}
    return ChatRequest(model=known_model(data, models), messages=messages, stream=bool(stream), params=params, meta=meta)


def tool_input(arguments: Any) -> dict[str, Any]:
    """A chat call's JSON arguments as a tool_use `input` object (unparseable text is kept, not lost)."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except json.JSONDecodeError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def stop_reason(finish_reason: str | None) -> str:
    return _STOP_REASONS.get(finish_reason or "stop", "end_turn")


def anthropic_usage(usage: Any) -> dict[str, int]:
    counts = usage if isinstance(usage, Mapping) else {}
    return {
        "input_tokens": int(counts.get("prompt_tokens") or 0),
        "output_tokens": int(counts.get("completion_tokens") or 0),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message_object(model: str, completion: Mapping[str, Any]) -> dict[str, Any]:
    """A chat completion as an Anthropic `message`."""
    choice = (completion.get("choices") or [{}])[0]
    reply = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if isinstance(reply.get("content"), str) and reply["content"]:
        content.append({"type": "text", "text": reply["content"]})
    for call in reply.get("tool_calls") or []:
        function = call.get("function") or {}
        content.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": tool_input(function.get("arguments"))})
    return {
        "id": new_message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(choice.get("finish_reason")),
        "stop_sequence": None,
        "usage": anthropic_usage(completion.get("usage")),
    }


def anthropic_error(error: GatewayError) -> dict[str, Any]:
    """The gateway error as Anthropic's error body."""
    kind = _ERROR_TYPES.get(error.status, "api_error" if error.status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}
