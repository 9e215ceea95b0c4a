"""Consuming one streamed upstream round: what to pass on to the client, and the reassembled message.

Content streams on as it arrives until the round shows a zoom call (a model that writes
text and then calls a zoom tool in the same message has that text already sent; models
rarely do). Client tool calls are passed on with their indexes renumbered so the
client sees 0, 1, ... even when zoom calls sat between them; zoom calls never reach the
client. Finish reasons and usage are held back: the driver sends them once, at the end.

Text that opens with "{" or a code fence is held back to the end of the round, because it may be a zoom call
written as text (gateway.core.zoom_calls.text_call): the driver sends it then, as one chunk, when the round's
outcome keeps it as the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.core.zoom_calls import ZoomNames

__all__ = ["RoundStream", "add_usage"]


def add_usage(total: dict[str, int], usage: Any) -> None:
    """Add an OpenAI usage object's token counts into `total`."""
    if not isinstance(usage, Mapping):
        return
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(key)
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: str = ""
    ours: bool = False
    client_index: int = -1


@dataclass
class RoundStream:
    """Feed it the chunks of one upstream stream; it returns the chunks to forward."""

    names: ZoomNames
    content: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    saw_zoom: bool = False
    holding: bool = False  # the text so far may be a zoom call written as text: not passed on yet
    _decided: bool = False  # the first non-blank character of the text has been seen
    _calls: dict[int, _Call] = field(default_factory=dict)
    _client_calls: int = 0

    def feed(self, chunk: Mapping[str, Any]) -> dict[str, Any] | None:
        """What to forward of the first choice (index 0; the only one a round reads) of ``chunk``."""
        add_usage(self.usage, chunk.get("usage"))
        choice = next((c for c in chunk.get("choices") or () if c.get("index", 0) == 0), None)
        if choice is None:
            return None
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta") or {}
        out: dict[str, Any] = {}
        if delta.get("role"):
            out["role"] = delta["role"]
        text = delta.get("content")
        if isinstance(text, str) and text:
            self.content += text
            if not self._decided and self.content.strip():
                self._decided = True
                self.holding = self.content.lstrip()[0] in "{`"
                text = self.content  # the blank start, held until now
            if self._decided and not self.holding and not self.saw_zoom:
                out["content"] = text
        forwarded = [c for c in (self._tool_delta(d) for d in delta.get("tool_calls") or []) if c is not None]
        if forwarded:
            out["tool_calls"] = forwarded
        return self._chunk(chunk, out) if out else None

    def _tool_delta(self, delta: Mapping[str, Any]) -> dict[str, Any] | None:
        index = delta.get("index", 0)
        call = self._calls.setdefault(index, _Call())
        function = delta.get("function") or {}
        if delta.get("id"):
            call.id += delta["id"]
        if function.get("name"):
            call.name += function["name"]
            call.ours = call.name in self.names
            if call.ours:
                self.saw_zoom = True
            elif call.client_index < 0:
                call.client_index = self._client_calls
                self._client_calls += 1
        if function.get("arguments"):
            call.arguments += function["arguments"]
        if call.ours or call.client_index < 0:
            return None
        return {**delta, "index": call.client_index}

    @staticmethod
    def others(chunk: Mapping[str, Any]) -> dict[str, Any] | None:
        """``chunk`` with only its other choices (a request with ``n`` > 1, which has a single round: they go
        to the client as they come, finish reasons included), or None when it has none."""
        others = [c for c in chunk.get("choices") or () if c.get("index", 0) != 0]
        if not others:
            return None
        return {**{k: v for k, v in chunk.items() if k not in ("choices", "usage")}, "choices": others}

    @staticmethod
    def _chunk(chunk: Mapping[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in chunk.items() if k not in ("choices", "usage")}
        out["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
        return out

    def message(self) -> dict[str, Any]:
        """The round's assistant message, reassembled (all tool calls, ours included)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for _, c in sorted(self._calls.items())
        ]
        if calls:
            message["tool_calls"] = calls
        return message
