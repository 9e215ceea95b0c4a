"""What every route shares: the app state the routes read, the bounded body reader, the request's
PCP headers, and SSE encoding."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from starlette.requests import Request

from gateway.errors import PayloadTooLarge
from gateway.http.auth import Access, principal_of
from gateway.http.bodies import Bodies
from gateway.http.metrics import GatewayMetrics, QueueProbe
from gateway.service.chat import ChatService
from gateway.service.forgetting import ThreadAdmin
from gateway.service.inspection import ThreadInspector
from gateway.service.request import RequestMeta, RequestStats
from gateway.service.responses import ResponseMemory

__all__ = ["AppState", "read_body", "request_meta", "request_stats", "sse_data", "sse_event", "sse_comment"]


class AppState:
    """What the routes need; filled by the composition root's lifespan."""

    def __init__(
        self, *, models: Collection[str], max_body_bytes: int, access: Access | None = None, metrics: GatewayMetrics | None = None
    ) -> None:
        self.models = tuple(models)
        self.max_body_bytes = max_body_bytes
        self.access = access
        self.metrics = metrics
        self.queue_probe: QueueProbe | None = None
        self.chat: ChatService | None = None
        self.responses: ResponseMemory | None = None
        self.threads: ThreadInspector | None = None
        self.admin: ThreadAdmin | None = None
        self.ping: Callable[[], Any] | None = None
        self.bodies = Bodies()  # long request bodies, to read the next of a conversation on from (gateway.http.bodies)

    async def admit(self, request: Request, model: str) -> None:
        """Whether the caller may call `model` now (its model list and rate; see `gateway.http.auth`)."""
        request_stats(request).model = model
        if self.access is not None:
            await self.access.admit(request, model)


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the request body is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def request_stats(request: Request) -> RequestStats:
    """The request's stats, which the service fills and the edge counts and logs (`gateway.http.observe`)."""
    stats = request.scope.get("pcp.stats")
    if not isinstance(stats, RequestStats):
        stats = request.scope["pcp.stats"] = RequestStats()
    return stats


def request_meta(request: Request) -> RequestMeta:
    """The PCP headers, the client's key (`Authorization`, or Anthropic's `x-api-key` taken as the same
    bearer key) and the tenant the auth middleware decided for it."""
    headers = request.headers
    api_key = headers.get("x-api-key", "").strip()
    return RequestMeta(
        authorization=f"Bearer {api_key}" if api_key else headers.get("authorization"),
        tenant=principal_of(request).tenant,
        stats=request_stats(request),
        thread=headers.get("x-pcp-thread"),
        time=headers.get("x-pcp-time"),
        budget=headers.get("x-pcp-budget"),
        pcp_off=headers.get("x-pcp-mode", "").strip().lower() == "off",
    )


def _json(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def sse_data(data: Any) -> bytes:
    """An unnamed SSE event (chat completions)."""
    return b"data: " + _json(data) + b"\n\n"


def sse_event(data: dict[str, Any]) -> bytes:
    """An SSE event named by its `type` (Responses and Messages APIs)."""
    return b"event: " + str(data["type"]).encode() + b"\ndata: " + _json(data) + b"\n\n"


def sse_comment(text: str) -> bytes:
    return b": " + text.encode() + b"\n\n"
