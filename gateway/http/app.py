"""The Starlette application: routes, body limits, and the one place errors become responses."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.errors import GatewayError, InvalidRequest
from gateway.http.api_routes import api_routes, is_messages_path
from gateway.http.inspect_routes import inspect_routes
from gateway.http.edge import AppState, read_body, request_meta, sse_comment, sse_data
from gateway.http.messages_api import anthropic_error
from gateway.http.validation import parse_chat_request
from gateway.service.chat import Comment, StreamItem
from gateway.adapters.store_keys import ThreadKey
from gateway.service.identity import tenant_of

__all__ = ["create_app", "AppState"]

log = logging.getLogger("gateway.http")


def _error_response(request: Request, error: GatewayError) -> JSONResponse:
    """The one place errors become responses: Anthropic's shape on the Messages API, OpenAI's elsewhere."""
    body = anthropic_error(error) if is_messages_path(request.url.path) else error.body()
    return JSONResponse(body, status_code=error.status, headers=error.headers)


async def _sse_body(first: StreamItem, items: AsyncIterator[StreamItem]) -> AsyncIterator[bytes]:
    """Encode chunks as SSE; a failure after the first byte ends with an error event."""
    item: StreamItem | None = first
    try:
        while True:
            if isinstance(item, Comment):
                yield sse_comment(item.text)
            elif isinstance(item, dict):
                yield sse_data(item)
            try:
                item = await items.__anext__()
            except StopAsyncIteration:
                break
        yield b"data: [DONE]\n\n"
    except GatewayError as exc:
        log.warning("stream failed mid-way: %s", exc.message)
        yield sse_data(exc.body())
    except Exception:
        log.exception("stream failed mid-way")
        yield sse_data(GatewayError("the gateway failed while streaming").body())
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()


def create_app(
    state: AppState, lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None
) -> Starlette:
    """The ASGI app; `lifespan` builds the services into `state`."""

    async def chat_completions(request: Request) -> Response:
        assert state.chat is not None
        body = await read_body(request, state.max_body_bytes)
        chat_request = parse_chat_request(body, state.models, request_meta(request))
        started = time.perf_counter()
        if not chat_request.stream:
            completion = await state.chat.complete(chat_request)
            log.info("chat %s %.0f ms", chat_request.model, (time.perf_counter() - started) * 1000)
            return JSONResponse(completion.body, headers=completion.headers)
        stream = state.chat.stream(chat_request)
        try:
            first = await stream.items.__anext__()  # errors before the first byte keep their status
        except StopAsyncIteration:
            first = None
        body_iter = _sse_body(first, stream.items) if first is not None else _done_only()
        headers = {"cache-control": "no-cache", "x-accel-buffering": "no", **stream.headers}
        return StreamingResponse(body_iter, media_type="text/event-stream", headers=headers)

    async def list_models(request: Request) -> Response:
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "pcp-gateway"} for name in state.models]
        return JSONResponse({"object": "list", "data": data})

    async def thread_view(request: Request) -> Response:
        assert state.threads is not None
        thread = ThreadKey(tenant_of(request_meta(request).authorization), request.path_params["thread"])
        return JSONResponse(await state.threads.describe(thread))

    async def healthz(request: Request) -> Response:
        ok = bool(state.ping is not None and await state.ping())
        return JSONResponse({"status": "ok" if ok else "degraded", "redis": ok}, status_code=200 if ok else 503)

    async def on_gateway_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GatewayError)
        if exc.status >= 500:
            log.warning("%s %s -> %d %s", request.method, request.url.path, exc.status, exc.message)
        return _error_response(request, exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error = InvalidRequest(str(exc.detail), code="not_found" if exc.status_code == 404 else None)
        error.status = exc.status_code
        return _error_response(request, error)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return _error_response(request, GatewayError("the gateway failed unexpectedly; see its log"))

    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/models", list_models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/pcp/threads/{thread}", thread_view, methods=["GET"]),
        *api_routes(state),
        *inspect_routes(state),
    ]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={GatewayError: on_gateway_error, HTTPException: on_http_error, Exception: on_unexpected},
    )


async def _done_only() -> AsyncIterator[bytes]:
    yield b"data: [DONE]\n\n"
