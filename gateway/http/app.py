"""The Starlette application: routes, body limits, and the one place errors become responses."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import GatewayError, InvalidRequest
from gateway.http.api_routes import api_routes, is_messages_path
from gateway.http.auth import AuthMiddleware, principal_of
from gateway.http.edge import AppState, read_body, request_meta, request_stats, sse_comment, sse_data
from gateway.http.metrics import metrics_route
from gateway.http.observe import RequestObserver
from gateway.http.inspect_routes import inspect_routes
from gateway.http.messages_api import anthropic_error
from gateway.http.thread_routes import thread_routes
from gateway.http.validation import parse_chat_request
from gateway.service.chat import Comment, StreamItem
from gateway.adapters.store_keys import ThreadKey
from gateway.service.identity import path_thread

__all__ = ["create_app", "AppState"]

log = logging.getLogger("gateway.http")


def _error_response(request: Request, error: GatewayError) -> JSONResponse:
    return _error_for(request.scope, error)


def _error_for(scope: Scope, error: GatewayError) -> JSONResponse:
    """The one place errors become responses: Anthropic's shape on the Messages API, OpenAI's elsewhere."""
    body = anthropic_error(error) if is_messages_path(scope["path"]) else error.body()
    return JSONResponse(body, status_code=error.status, headers=error.headers)


def _unexpected(request: Request) -> JSONResponse:
    """The answer to an exception nothing turned into a response (logged with its traceback, counted)."""
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    request_stats(request).error = "unexpected"
    return _error_response(request, GatewayError("the gateway failed unexpectedly; see its log"))


class _Unexpected:
    """An exception no route turned into a response becomes the gateway's OpenAI-shaped 500 here, inside the
    application. Left to Starlette's last handler (ServerErrorMiddleware), the response was sent and the exception
    then raised on to the server, and uvicorn closes a connection after an exception: a client's next request on that
    kept-alive connection was reset ("connection reset by peer"). A response that had begun (a stream that broke
    after its first byte) cannot be followed by another: its exception goes on, and the connection closes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            if started:
                raise
            await _unexpected(Request(scope))(scope, receive, send)


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
        chat_request = parse_chat_request(body, state.models, request_meta(request), state.bodies)
        await state.admit(request, chat_request.model)
        if not chat_request.stream:
            completion = await state.chat.complete(chat_request)
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
        allowed = principal_of(request).models
        names = [name for name in state.models if allowed is None or name in allowed]
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "pcp-gateway"} for name in names]
        return JSONResponse({"object": "list", "data": data})

    async def thread_view(request: Request) -> Response:
        assert state.threads is not None
        thread = ThreadKey(principal_of(request).tenant, path_thread(request.path_params["thread"]))
        return JSONResponse(await state.threads.describe(thread))

    async def healthz(request: Request) -> Response:
        ok = bool(state.ping is not None and await state.ping())
        return JSONResponse({"status": "ok" if ok else "degraded", "redis": ok}, status_code=200 if ok else 503)

    async def on_gateway_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GatewayError)
        request_stats(request).error = exc.code or exc.type
        if exc.status >= 500:
            log.warning("%s %s -> %d %s", request.method, request.url.path, exc.status, exc.message)
        return _error_response(request, exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error = InvalidRequest(str(exc.detail), code="not_found" if exc.status_code == 404 else None)
        error.status = exc.status_code
        request_stats(request).error = error.code or error.type
        return _error_response(request, error)

    async def on_unexpected(request: Request, exc: Exception) -> Response:  # raised outside the routes (_Unexpected)
        return _unexpected(request)

    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/models", list_models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/pcp/threads/{thread}", thread_view, methods=["GET"]),
        *thread_routes(state),
        *api_routes(state),
        *inspect_routes(state),
    ]
    if state.metrics is not None:
        routes.append(metrics_route(state.metrics, lambda: state.queue_probe, time.time))
    middleware = [Middleware(AuthMiddleware, access=state.access, render=_error_for)] if state.access is not None else []
    middleware.append(Middleware(_Unexpected))  # innermost: what the observer and the auth see is its response
    if state.metrics is not None:  # outermost: it sees every request, refused ones included
        middleware.insert(0, Middleware(RequestObserver, metrics=state.metrics, routes=routes))
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={GatewayError: on_gateway_error, HTTPException: on_http_error, Exception: on_unexpected},
    )


async def _done_only() -> AsyncIterator[bytes]:
    yield b"data: [DONE]\n\n"
