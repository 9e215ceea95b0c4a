"""The chat-completion use case.

`ChatService` takes a validated request and returns either a complete OpenAI
response or a stream of chunks, plus the headers the edge should send. It owns the
decision of what goes upstream; the edge owns the wire format.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from gateway.adapters.upstream import Upstream
from gateway.service.request import ChatRequest

__all__ = ["ChatService", "Completion", "CompletionStream", "KEEPALIVE"]


class _KeepAlive:
    """Marker in a stream: nothing to send yet, keep the connection alive."""

    def __repr__(self) -> str:
        return "KEEPALIVE"


KEEPALIVE = _KeepAlive()

StreamItem = dict[str, Any] | _KeepAlive


@dataclass
class Completion:
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class CompletionStream:
    """Chunks as they come; `headers` is final once the first item has been produced."""

    items: AsyncIterator[StreamItem]
    headers: dict[str, str] = field(default_factory=dict)


class ChatService:
    """Forwards chat requests upstream."""

    def __init__(self, upstream: Upstream) -> None:
        self._upstream = upstream

    async def complete(self, request: ChatRequest) -> Completion:
        body = await self._upstream.complete(request.model, request.upstream_params())
        return Completion(body=body)

    def stream(self, request: ChatRequest) -> CompletionStream:
        return CompletionStream(items=self._forward(request))

    async def _forward(self, request: ChatRequest) -> AsyncIterator[StreamItem]:
        async for chunk in self._upstream.stream(request.model, request.upstream_params()):
            yield chunk
