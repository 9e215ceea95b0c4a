"""Validation of OpenAI chat-completion requests at the edge.

A request that would fail upstream for a reason the client controls is refused here
with a 400 that names the parameter, before anything is stored or sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

import orjson

from gateway.errors import InvalidRequest, ModelNotFound
from gateway.http.bodies import Bodies
from gateway.service.request import ChatRequest, RequestMeta

__all__ = ["parse_chat_request", "json_object", "known_model"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_PLAIN_ROLES = ROLES - {"tool"}  # the roles a message with text content and no tool calls is valid in


def _check_message(index: int, message: Any) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequest(f"{where} must be an object", param=where)
    role = message.get("role")
    if role not in ROLES:
        raise InvalidRequest(
            f"{where}.role must be one of {', '.join(sorted(ROLES))}; got {role!r}", param=f"{where}.role"
        )
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise InvalidRequest(f"{where}.content must be a string, an array of parts or null", param=f"{where}.content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise InvalidRequest(f"{where}.content[{j}] must be an object with a type", param=f"{where}.content[{j}]")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise InvalidRequest(f"{where}.tool_call_id is required for tool messages", param=f"{where}.tool_call_id")
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if role != "assistant" or not isinstance(tool_calls, list):
            raise InvalidRequest(f"{where}.tool_calls must be an array on an assistant message", param=f"{where}.tool_calls")
        for j, call in enumerate(tool_calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise InvalidRequest(
                    f"{where}.tool_calls[{j}] must have an id and a function with a name",
                    param=f"{where}.tool_calls[{j}]",
                )


# a \uD800-\uDFFF escape: JSON lets it stand alone, UTF-8 (Redis, the upstream) cannot carry one that does
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object of text UTF-8 can carry; InvalidRequest otherwise.

    Besides malformed JSON this refuses what `json` parses but the gateway cannot serve: nesting deeper than
    Python's recursion limit, integers of more than 4300 digits, and lone UTF-16 surrogates (`"\\ud800"`).

    A body is read by orjson first (half the time of `json` on a long history: 0.75 against 1.5 ms at 600 turns, on
    the way to every first token). orjson refuses all that `json` refuses and more (NaN, infinities, nesting deeper
    than 1,024, a lone surrogate): such a body is read again by `json`, which says precisely what is wrong, or reads
    it as it always did. (orjson reads an integer beyond 64 bits as a float.)
    """
    try:
        data = orjson.loads(body)  # (it refuses a lone surrogate)
    except orjson.JSONDecodeError:
        data = _json_loads(body)
        if _SURROGATE_ESCAPE.search(body) and _has_lone_surrogate(data):
            raise InvalidRequest("the request body holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair)") from None
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return data


def _json_loads(body: bytes) -> Any:
    """`json`'s reading of a body orjson refused, or InvalidRequest with what is wrong."""
    try:
        return json.loads(body)
    except RecursionError as exc:
        raise InvalidRequest("the request body is nested too deeply") from exc
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, and int() of a 4300+ digit number
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from exc


def _has_lone_surrogate(data: Any) -> bool:
    pending = [data]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def known_model(data: Mapping[str, Any], models: Collection[str]) -> str:
    """The body's `model`, checked against the configured names."""
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("you must provide a model parameter", param="model")
    if model not in models:
        raise ModelNotFound(f"the model {model!r} does not exist; known models: {', '.join(models)}", param="model")
    return model


def parse_chat_request(
    body: bytes, models: Collection[str], meta: RequestMeta | None = None, bodies: Bodies | None = None
) -> ChatRequest:
    """Parse and validate a request body; raise InvalidRequest / ModelNotFound. With ``bodies``, a long body is
    read on from an earlier body it repeats (`gateway.http.bodies`), and kept once valid."""
    read = bodies.read(body, json_object) if bodies is not None else None
    data = read.data if read is not None else json_object(body)
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("you must provide a model parameter", param="model")
    messages = data.get("messages")
    if messages is None:
        raise InvalidRequest("you must provide a messages parameter", param="messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages must be a non-empty array", param="messages")
    checked = read.reused if read is not None else 0
    for index, message in enumerate(messages[checked:], checked):  # (those an earlier body repeated: checked with it)
        # most messages of a long history are plain text: nothing of _check_message can fail for them
        if type(message) is dict and message.get("role") in _PLAIN_ROLES and type(message.get("content")) is str and "tool_calls" not in message:
            continue
        _check_message(index, message)
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise InvalidRequest("stream must be a boolean", param="stream")
    for name in ("stream_options", "metadata", "response_format"):  # litellm fails on anything else, as if upstream
        if data.get(name) is not None and not isinstance(data[name], dict):
            raise InvalidRequest(f"{name} must be an object", param=name)
    tools = data.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise InvalidRequest("tools must be an array of tool objects", param="tools")
    n = data.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise InvalidRequest("n must be a positive integer", param="n")
    if model not in models:
        raise ModelNotFound(f"the model {model!r} does not exist; known models: {', '.join(models)}", param="model")
    params = {k: v for k, v in data.items() if k not in ("model", "messages", "stream")}
    if bodies is not None and read is not None:
        bodies.keep(read)
    return ChatRequest(model=model, messages=messages, stream=stream, params=params, meta=meta or RequestMeta())
