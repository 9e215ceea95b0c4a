"""The model's tool calls as the zoom loop reads and sends them back (gateway.core.rounds): which are the zoom tools'
and which the client's, a zoom call a small model wrote as its message's text, and a call made fit to be replayed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.core.tools import completed_json

__all__ = ["ZoomNames", "replayable", "split_calls", "text_call", "with_text_call", "without_zoom"]


@dataclass(frozen=True)
class ZoomNames:
    """The names under which Consult and Shelve are offered to the model."""

    consult: str = "Consult"
    shelve: str = "Shelve"

    def __contains__(self, name: object) -> bool:
        return name in (self.consult, self.shelve)


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def text_call(content: object, names: ZoomNames) -> dict[str, Any] | None:
    """The zoom call a message's whole text spells as JSON (``{"name": ..., "arguments": ...}``, also in a
    ```json fence), as a tool call; None for any other text."""
    if not isinstance(content, str):
        return None
    text = content.strip()
    fenced = _FENCE.match(text)
    text = fenced.group(1) if fenced else text
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": "text_call", "type": "function", "function": {"name": value["name"], "arguments": encoded}}


def with_text_call(message: Mapping[str, Any], names: ZoomNames) -> Mapping[str, Any]:
    """The message with a zoom call written as its text moved to its tool calls."""
    found = text_call(message.get("content"), names)
    if found is None:
        return message
    if message.get("tool_calls"):  # the text is the call itself, echoed (llama-server's streams do): keep one
        return {**message, "content": None}
    return {**message, "content": None, "tool_calls": [*(message.get("tool_calls") or []), found]}


def split_calls(message: Mapping[str, Any], names: ZoomNames) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The message's tool calls, split into (zoom calls, client calls), each in order."""
    calls = message.get("tool_calls") or []
    ours = [dict(c) for c in calls if isinstance(c, Mapping) and _call_name(c) in names]
    theirs = [dict(c) for c in calls if isinstance(c, Mapping) and _call_name(c) not in names]
    return ours, theirs


def _call_name(call: Mapping[str, Any]) -> str | None:
    function = call.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) else None


def without_zoom(message: Mapping[str, Any], theirs: list[dict[str, Any]]) -> dict[str, Any]:
    reply = {k: v for k, v in message.items() if k != "tool_calls"}
    if theirs:
        reply["tool_calls"] = theirs
    return reply


def replayable(call: Mapping[str, Any]) -> dict[str, Any]:
    """``call`` as it can be sent back in the conversation. A server that renders the conversation for its model
    parses every earlier tool call's arguments (llama-server answers HTTP 500 to the whole request when one is not
    JSON), so arguments cut short are sent as far as they were read (:func:`completed_json`), and any others that
    are not a JSON object as ``{}``; the call's result told the model what was wrong with them."""
    function = call.get("function")
    if not isinstance(function, Mapping):
        return dict(call)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            if isinstance(json.loads(arguments), dict):
                return dict(call)
        except ValueError:
            pass
    completed = completed_json(arguments) if isinstance(arguments, str) else None
    return {**call, "function": {**function, "arguments": completed or "{}"}}
