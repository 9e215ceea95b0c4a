"""`POST /v1/responses` and `POST /v1/messages`: thin routes over the chat service.

Each translates its API's request into the gateway's chat request (`responses_api`,
`messages_api`), runs it through the same `ChatService` as chat completions — so paging, zoom
rounds, thread identity and pass-through behave the same — and translates the reply or the
stream back. Errors raised here are shaped by the app's one error handler (Anthropic's shape on
`/v1/messages`); a stream that fails after its first byte ends with its API's error event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.errors import GatewayError
from gateway.http.edge import AppState, read_body, request_meta, sse_comment, sse_event
from gateway.http.messages_api import message_object, parse_messages_request
from gateway.http.messages_stream import MessagesEvents
from gateway.http.responses_api import new_id, parse_responses_request, reply_message, response_object
from gateway.http.responses_stream import ResponsesEvents
from gateway.service.chat import Comment, CompletionStream, StreamItem

__all__ = ["api_routes", "is_messages_path"]

log = logging.getLogger("gateway.http")

_MESSAGES_PATHS = ("/v1/messages", "/messages")


def is_messages_path(path: str) -> bool:
    return path.rstrip("/") in _MESSAGES_PATHS or path.startswith(tuple(p + "/" for p in _MESSAGES_PATHS))


class Encoder(Protocol):
    def start(self) -> list[dict[str, Any]]: ...
    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]: ...
    def finish(self) -> list[dict[str, Any]]: ...
    def failure(self, error: GatewayError) -> list[dict[str, Any]]: ...


def _events(events: list[dict[str, Any]]) -> bytes:
    return b"".join(sse_event(e) for e in events)


async def _event_body(
    first: StreamItem | None, items: AsyncIterator[StreamItem], encoder: Encoder, before_finish: Callable[[], Awaitable[None]] | None = None
) -> AsyncIterator[bytes]:
    """Chat stream items as the API's named SSE events; comments (keep-alives, the rounds note) pass as comments."""
    item: StreamItem | None = first
    try:
        yield _events(encoder.start())
        while item is not None:
            yield sse_comment(item.text) if isinstance(item, Comment) else _events(encoder.feed(item))
            item = await anext(items, None)
        closing = encoder.finish()
        if before_finish is not None:
            await before_finish()
        yield _events(closing)
    except GatewayError as exc:
        log.warning("stream failed mid-way: %s", exc.message)
        yield _events(encoder.failure(exc))
    except Exception:
        log.exception("stream failed mid-way")
        yield _events(encoder.failure(GatewayError("the gateway failed while streaming")))
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()


async def _first(stream: CompletionStream) -> StreamItem | None:
    """The first item, awaited before the response starts: a failure here keeps its HTTP status."""
    return await anext(stream.items, None)


def _streaming(body: AsyncIterator[bytes], headers: dict[str, str]) -> StreamingResponse:
    return StreamingResponse(
        body, media_type="text/event-stream", headers={"cache-control": "no-cache", "x-accel-buffering": "no", **headers}
    )


def api_routes(state: AppState) -> list[Route]:
    """The two routes, bound to the app's state."""

    async def responses(request: Request) -> Response:
        assert state.chat is not None and state.responses is not None
        memory = state.responses
        call = parse_responses_request(await read_body(request, state.max_body_bytes), state.models)
        await state.admit(request, call.model)
        meta = request_meta(request)
        chat_request = call.chat_request(await memory.history(meta, call.previous_response_id), meta)
        response_id = new_id("resp")
        if not call.stream:
            completion = await state.chat.complete(chat_request)
            choice = (completion.body.get("choices") or [{}])[0]
            body = response_object(
                call, response_id, reply=choice.get("message") or {}, finish_reason=choice.get("finish_reason"), usage=completion.body.get("usage")
            )
            if call.store:
                await memory.remember(meta, response_id, call.previous_response_id, [*call.turn, reply_message(body["output"])])
            return JSONResponse(body, headers={**completion.headers, "x-pcp-response-id": response_id})
        stream = state.chat.stream(chat_request)
        first = await _first(stream)
        encoder = ResponsesEvents(call, response_id, int(time.time()))

        async def remember() -> None:
            if call.store:
                await memory.remember(meta, response_id, call.previous_response_id, [*call.turn, reply_message(encoder.output)])

        return _streaming(_event_body(first, stream.items, encoder, remember), stream.headers)

    async def messages(request: Request) -> Response:
        assert state.chat is not None
        chat_request = parse_messages_request(await read_body(request, state.max_body_bytes), state.models, request_meta(request))
        await state.admit(request, chat_request.model)
        if not chat_request.stream:
            completion = await state.chat.complete(chat_request)
            return JSONResponse(message_object(chat_request.model, completion.body), headers=completion.headers)
        stream = state.chat.stream(chat_request)
        first = await _first(stream)
        encoder = MessagesEvents(chat_request.model)
        return _streaming(_event_body(first, stream.items, encoder), stream.headers)

    return [
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/responses", responses, methods=["POST"]),
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/messages", messages, methods=["POST"]),
    ]
