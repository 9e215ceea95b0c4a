"""One record per HTTP request: a request id, the metrics, and one structured access-log line.

The outermost middleware: it gives each request a `RequestStats` (in its scope) that the routes and the
chat service fill as they learn the model, thread, form, rounds and tokens, and when the response has been
sent — streaming included — it counts the request (`gateway.http.metrics`) and logs one line on
`gateway.access` with the request id, tenant, thread, model, form, rounds, tokens, status and latency.
The line never holds message content or keys. The request id is the client's `X-Request-Id` when it is a
plain token, else a new one; it is returned in `x-request-id`.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.auth import Principal
from gateway.http.metrics import GatewayMetrics
from gateway.service.request import RequestStats

__all__ = ["RequestObserver"]

log = logging.getLogger("gateway.access")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._\-]{1,64}")


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text: str = value.decode("latin-1").strip()
            if _REQUEST_ID.fullmatch(text):
                return text
    return uuid.uuid4().hex


class RequestObserver:
    def __init__(self, app: ASGIApp, metrics: GatewayMetrics, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    def _route(self, scope: Scope) -> str:
        """The route's path template (bounded label values: an unknown path is `other`)."""
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                return str(getattr(route, "path", "other"))
        return "other"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stats = scope["pcp.stats"] = RequestStats()
        request_id = _request_id(scope)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message = {**message, "headers": [*message.get("headers", ()), (b"x-request-id", request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = self._route(scope)
            self.metrics.observe(route, status, seconds, stats)
            if route != "/healthz" and route != "/metrics":
                principal = scope.get("pcp.principal")
                tenant = principal.tenant if isinstance(principal, Principal) else None
                _log_line(request_id, scope["method"], route, status, seconds, tenant, stats)


def _log_line(request_id: str, method: str, route: str, status: int, seconds: float, tenant: str | None, stats: RequestStats) -> None:
    fields: dict[str, Any] = {
        "request_id": request_id,
        "method": method,
        "route": route,
        "status": status,
        "latency_ms": round(seconds * 1000, 1),
        "tenant": tenant,
        "thread": stats.thread,
        "model": stats.model,
        "form": stats.form,
        "rounds": stats.rounds,
        "prompt_tokens": stats.prompt_tokens,
        "history_tokens": stats.history_tokens,
        "over_budget": stats.over_budget or None,
        "consults": stats.consults,
        "shelves": stats.shelves,
        "error": stats.error,
        "degraded": stats.degraded,
    }
    text = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None and k not in ("method", "route", "status"))
    log.info("%s %s %d %s", method, route, status, text, extra={"fields": fields})
