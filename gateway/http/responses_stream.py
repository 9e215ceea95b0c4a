"""A chat-completion stream, re-told as Responses API events.

Pure: `ResponsesEvents` is fed the chat chunks the chat service yields and returns the events to
send, each with its `type` and `sequence_number`. Text becomes a `message` output item
(`output_item.added`, `content_part.added`, `output_text.delta`..., then the `.done` events);
each client tool call becomes a `function_call` item with `function_call_arguments` events. An
item is closed when the next one starts; `finish` closes the last and sends `response.completed`
with the whole response (usage included).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors import GatewayError
from gateway.http.chunk_reader import ChunkReader
from gateway.http.responses_api import ResponsesCall, function_call_item, message_item, new_id, response_object

__all__ = ["ResponsesEvents"]

Event = dict[str, Any]


class ResponsesEvents(ChunkReader):
    """The event sequence of one streamed response."""

    def __init__(self, call: ResponsesCall, response_id: str, created: int) -> None:
        super().__init__()
        self._call = call
        self.response_id = response_id
        self._created = created
        self._sequence = 0
        self.output: list[dict[str, Any]] = []  # items as they stand; closed ones are final
        self._texts: dict[int, str] = {}  # output index -> text of a message item
        self._calls: dict[int, int] = {}  # chat tool-call index -> output index
        self._active: int | None = None

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _response(self, status: str) -> dict[str, Any]:
        output = self.output if status != "in_progress" else []
        usage = self.usage if status != "in_progress" else None
        return response_object(
            self._call, self.response_id, output=output, finish_reason=self.finish_reason, usage=usage,
            status=None if status == "completed" else status, created=self._created,
        )  # fmt: skip

    def start(self) -> list[Event]:
        return [
            self._event("response.created", response=self._response("in_progress")),
            self._event("response.in_progress", response=self._response("in_progress")),
        ]

    def feed(self, chunk: Mapping[str, Any]) -> list[Event]:
        delta = self.delta(chunk)
        if delta is None:
            return []
        events: list[Event] = []
        text = delta.get("content")
        if isinstance(text, str) and text:
            events += self._text(text)
        for call in delta.get("tool_calls") or []:
            events += self._call_delta(call)
        return events

    def _text(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._active is None or self._active not in self._texts:
            events += self._close()
            index = self._active = len(self.output)
            item = message_item(new_id("msg"), "", status="in_progress")
            self.output.append(item)
            self._texts[index] = ""
            events.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
            part = {"type": "output_text", "text": "", "annotations": []}
            events.append(self._event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part))
        index = self._active
        self._texts[index] += text
        item_id = self.output[index]["id"]
        return [*events, self._event("response.output_text.delta", item_id=item_id, output_index=index, content_index=0, delta=text, logprobs=[])]

    def _call_delta(self, delta: Mapping[str, Any]) -> list[Event]:
        events: list[Event] = []
        chat_index = delta.get("index", 0)
        function = delta.get("function") or {}
        if chat_index not in self._calls:
            events += self._close()
            index = self._active = self._calls[chat_index] = len(self.output)
            item = function_call_item(new_id("fc"), str(delta.get("id") or ""), str(function.get("name") or ""), "", status="in_progress")
            self.output.append(item)
            events.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
        else:
            index = self._calls[chat_index]
            item = self.output[index]
            # a provider may send the id or name in pieces after the first delta
            item["call_id"] += str(delta.get("id") or "")
            item["name"] += str(function.get("name") or "")
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item["arguments"] += arguments
            events.append(self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=arguments))
        return events

    def _close(self) -> list[Event]:
        index, self._active = self._active, None
        if index is None:
            return []
        item = self.output[index]
        if index in self._texts:
            text = self._texts[index]
            done = self.output[index] = message_item(item["id"], text)
            part = done["content"][0]
            return [
                self._event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0, text=text, logprobs=[]),
                self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part),
                self._event("response.output_item.done", output_index=index, item=done),
            ]
        item["status"] = "completed"
        return [
            self._event(
                "response.function_call_arguments.done", item_id=item["id"], output_index=index, name=item["name"], arguments=item["arguments"]
            ),
            self._event("response.output_item.done", output_index=index, item=dict(item)),
        ]

    def finish(self) -> list[Event]:
        events = self._close()
        return [*events, self._event("response.completed", response=self._response("completed"))]

    def failure(self, error: GatewayError) -> list[Event]:
        """Events for a stream that failed after it started: `error`, then `response.failed`.

        The `error` event also carries the OpenAI error body under `error`, which is what makes the
        OpenAI SDK raise `APIError` instead of yielding an event the caller may not check."""
        body = error.body()["error"]
        failed = {**self._response("failed"), "error": {"code": body["code"] or body["type"], "message": body["message"]}}
        return [
            self._event("error", code=body["code"], message=body["message"], param=body["param"], error=body),
            self._event("response.failed", response=failed),
        ]
