"""A chat-completion stream, re-told as Anthropic Messages stream events.

Pure: `MessagesEvents` is fed the chat chunks the chat service yields and returns the events to
send: `message_start`, then per content block `content_block_start`, `content_block_delta`
(`text_delta` or `input_json_delta`) and `content_block_stop` (a block stops when the next one
starts), then `message_delta` (stop reason, usage) and `message_stop`. Input tokens are known
only when the upstream's usage arrives, at the end: `message_start` says 0 and `message_delta`
carries the real counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors import GatewayError
from gateway.http.chunk_reader import ChunkReader
from gateway.http.messages_api import anthropic_error, anthropic_usage, new_message_id, stop_reason

__all__ = ["MessagesEvents"]

Event = dict[str, Any]


class MessagesEvents(ChunkReader):
    """The event sequence of one streamed message."""

    def __init__(self, model: str) -> None:
        super().__init__()
        self._model = model
        self._blocks: list[str] = []  # block index -> "text" or "tool_use"
        self._calls: dict[int, int] = {}  # chat tool-call index -> block index
        self._active: int | None = None

    def start(self) -> list[Event]:
        message: dict[str, Any] = {
            "id": new_message_id(), "type": "message", "role": "assistant", "model": self._model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": anthropic_usage(None),
        }  # fmt: skip
        return [{"type": "message_start", "message": message}]

    def feed(self, chunk: Mapping[str, Any]) -> list[Event]:
        delta = self.delta(chunk)
        if delta is None:
            return []
        events: list[Event] = []
        text = delta.get("content")
        if isinstance(text, str) and text:
            if self._active is None or self._blocks[self._active] != "text":
                events += self._open("text", {"type": "text", "text": ""})
            events.append({"type": "content_block_delta", "index": self._active, "delta": {"type": "text_delta", "text": text}})
        for call in delta.get("tool_calls") or []:
            events += self._call_delta(call)
        return events

    def _open(self, kind: str, block: dict[str, Any]) -> list[Event]:
        events = self._close()
        self._active = len(self._blocks)
        self._blocks.append(kind)
        return [*events, {"type": "content_block_start", "index": self._active, "content_block": block}]

    def _call_delta(self, delta: Mapping[str, Any]) -> list[Event]:
        events: list[Event] = []
        chat_index = delta.get("index", 0)
        function = delta.get("function") or {}
        if chat_index not in self._calls:
            block = {"type": "tool_use", "id": str(delta.get("id") or ""), "name": str(function.get("name") or ""), "input": {}}
            events += self._open("tool_use", block)
            self._calls[chat_index] = len(self._blocks) - 1
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            # a call's arguments arriving after the next block started (interleaved parallel calls, which
            # OpenAI-style streams do not send) still go to its own index, where clients accumulate them
            index = self._calls[chat_index]
            events.append({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": arguments}})
        return events

    def _close(self) -> list[Event]:
        index, self._active = self._active, None
        return [] if index is None else [{"type": "content_block_stop", "index": index}]

    def finish(self) -> list[Event]:
        usage = anthropic_usage(self.usage)
        delta = {"stop_reason": stop_reason(self.finish_reason), "stop_sequence": None}
        return [
            *self._close(),
            {"type": "message_delta", "delta": delta, "usage": {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"]}},
            {"type": "message_stop"},
        ]

    @staticmethod
    def failure(error: GatewayError) -> list[Event]:
        return [anthropic_error(error)]
