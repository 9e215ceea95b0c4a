"""The chat-completion use case.

`ChatService` takes a validated request and returns either a complete OpenAI response
or a stream of chunks, plus the headers the edge should send. Paged mode stores the
history as pages, then sends it upstream in the form `gateway.core.form` chooses: raw
(the client's messages as sent, while the thread fits the budget and paging would not
make it smaller) or paged (a Paged Context, with the zoom rounds resolved); pass-through mode
(`X-PCP-Mode: off`, `pcp.enabled: false`, or `model_info.pcp_enabled: false`) forwards
the request untouched and stores nothing. A user message of exactly `/save` is
answered by the gateway itself. A side request a client makes for itself (a client profile's marker,
gateway.core.profiles: aider's history summarizer, opencode's title request) goes upstream as sent and stores
nothing, as pass-through does (`x-pcp-side-request: <profile>`). When Redis does not answer while a paged request is prepared, the
request is served pass-through (`x-pcp-degraded: store-unavailable`) with a warning, or refused with
a 503 when `store.when_unavailable: error`; nothing is lost, since the next request resends the history.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from gateway.adapters.embedder import Embedder
from gateway.adapters.redis_store import RedisStore, ThreadKey
from gateway.adapters.upstream import Upstream
from gateway.config import GatewayConfig
from gateway.core import TokenCounter, message_text, split_blocks
from gateway.core.form import Form, choose_form, pages_for_good
from gateway.errors import StoreUnavailable
from gateway.service.consolidator import Consolidator
from gateway.service.context import ContextBuilder, PagedContext
from gateway.service.identity import named_thread, request_budget, request_time
from gateway.service.paged import PagedChat, pcp_headers
from gateway.service.request import ChatRequest, RequestStats
from gateway.service.router import Router
from gateway.service.split_cache import is_save
from gateway.service.stream_items import KEEPALIVE, Comment, StreamItem
from gateway.service.thread_finder import ThreadFinder

__all__ = ["ChatService", "Completion", "CompletionStream", "KEEPALIVE", "Comment", "StreamItem"]

log = logging.getLogger("gateway.chat")

PASS_THROUGH = {"x-pcp-mode": "off", "x-pcp-form": "pass-through"}
SIDE_REQUEST = {"x-pcp-form": "pass-through"}
DEGRADED = {"x-pcp-form": "pass-through", "x-pcp-degraded": "store-unavailable"}


@dataclass
class Completion:
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class CompletionStream:
    """Chunks as they come; `headers` is final once the first item has been produced."""

    items: AsyncIterator[StreamItem]
    headers: dict[str, str] = field(default_factory=dict)


def _is_save(request: ChatRequest) -> bool:
    last = request.messages[-1]
    return last.get("role") == "user" and is_save(message_text(last))


class ChatService:
    """Routes each request to pass-through, the `/save` command, or paged memory."""

    def __init__(
        self,
        upstream: Upstream,
        store: RedisStore,
        config: GatewayConfig,
        embedder: Embedder | None = None,
        consolidator: Consolidator | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._upstream = upstream
        self._consolidator = consolidator
        self._store = store
        self._config = config
        self._clock = clock
        router = Router(store, embedder, upstream, config.pcp)
        self._builder = ContextBuilder(store, config.pcp, TokenCounter.for_model, upstream.context_window, router, embedder)
        self._paged = PagedChat(store, upstream, config.pcp)
        self._markers = config.pcp.client_markers()
        self._finder = ThreadFinder(store, self._markers)

    @property
    def builder(self) -> ContextBuilder:
        """The context builder of the request path (the inspection API previews contexts with it)."""
        return self._builder

    def _paged_mode(self, request: ChatRequest) -> bool:
        if request.meta.pcp_off or not self._config.pcp.enabled:
            return False
        return all(entry.model_info.get("pcp_enabled", True) is not False for entry in self._config.entries_for(request.model))

    def _as_sent(self, request: ChatRequest) -> dict[str, str] | None:
        """The headers of a request that goes upstream as sent and stores nothing: pass-through mode, or a side
        request of a client's own (gateway.core.profiles); ``None`` for a request of the conversation."""
        if not self._paged_mode(request):
            return PASS_THROUGH
        whose = self._markers.side_request(request.messages)
        return {**SIDE_REQUEST, "x-pcp-side-request": whose} if whose else None

    def _named(self, request: ChatRequest) -> tuple[str | None, ChatRequest]:
        """The thread the request names (``None``: none), and the request without `metadata.pcp_thread`."""
        metadata = request.params.get("metadata")
        named = named_thread(request.meta.thread, metadata.get("pcp_thread") if isinstance(metadata, dict) else None)
        if isinstance(metadata, dict) and "pcp_thread" in metadata:
            rest = {k: v for k, v in metadata.items() if k != "pcp_thread"}
            params = {k: v for k, v in request.params.items() if k != "metadata"} | ({"metadata": rest} if rest else {})
            request = replace(request, params=params)
        request.meta.stats.thread = named
        return named, request

    async def _thread(self, request: ChatRequest, named: str | None) -> ThreadKey | None:
        """The request's thread: the one it names, else the one its history continues (gateway.service.thread_finder);
        None when the store is down and the config says to serve anyway."""
        tenant = request.meta.tenant
        try:
            thread = ThreadKey(tenant, named if named is not None else await self._finder.find(tenant, request.messages))
        except StoreUnavailable as exc:
            self._degrade(request, tenant, exc)
            return None
        request.meta.stats.thread = thread.thread
        return thread

    def _degrade(self, request: ChatRequest, scope: str, exc: StoreUnavailable) -> None:
        """Serve the request pass-through without its memory (or raise, with `store.when_unavailable: error`)."""
        if self._config.store.when_unavailable == "error":
            raise exc
        log.warning("thread %s served pass-through: %s", scope, exc.message)
        stats = request.meta.stats
        stats.form, stats.rounds, stats.degraded = "pass-through", 1, "store-unavailable"

    async def _answered(self, thread: ThreadKey, message: Any) -> None:
        """Claim the answer given in the thread (its next request is found by it); the answer stands if the store fails."""
        if not isinstance(message, dict):
            return
        try:
            await self._finder.answered(thread, message)
        except StoreUnavailable as exc:
            log.warning("thread %s: its answer was not recorded: %s", thread.scope, exc.message)

    async def complete(self, request: ChatRequest) -> Completion:
        named, request = self._named(request)
        stats = request.meta.stats
        as_sent = self._as_sent(request)
        if as_sent is not None:
            stats.form, stats.rounds = "pass-through", 1
            body = await self._upstream.complete(request.model, request.upstream_params())
            return Completion(body=body, headers={**({"x-pcp-thread": named} if named else {}), **as_sent})
        thread = await self._thread(request, named)
        prepared = None
        if thread is not None:
            now = request_time(request.meta.time, self._clock() if self._clock else None)
            if _is_save(request):
                text, headers = await self._save(request, thread, now)
                stats.form, stats.rounds = "local", 0
                return Completion(body=_local_completion(request.model, text), headers=headers)
            prepared = await self._prepare(request, thread, now)
        if thread is None or prepared is None:
            body = await self._upstream.complete(request.model, request.upstream_params())
            return Completion(body=body, headers={**({"x-pcp-thread": thread.thread} if thread else {}), **DEGRADED})
        context, form, raw_tokens = prepared
        if form is Form.RAW:
            body = await self._upstream.complete(request.model, request.upstream_params())
            headers = {**pcp_headers(context, form, raw_tokens), "x-pcp-rounds": "1", "x-pcp-consults": "0"}
        else:
            body, rounds, consults = await self._paged.complete(request, context)
            headers = {**pcp_headers(context), "x-pcp-rounds": str(rounds), "x-pcp-consults": str(consults)}
        choices = body.get("choices")
        await self._answered(thread, choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None)
        return Completion(body=body, headers=headers)

    def stream(self, request: ChatRequest) -> CompletionStream:
        headers: dict[str, str] = {}
        return CompletionStream(items=self._stream(request, headers), headers=headers)

    async def _stream(self, request: ChatRequest, headers: dict[str, str]) -> AsyncIterator[StreamItem]:
        named, request = self._named(request)
        stats = request.meta.stats
        as_sent = self._as_sent(request)
        if as_sent is not None:
            stats.form, stats.rounds = "pass-through", 1
            headers.update({**({"x-pcp-thread": named} if named else {}), **as_sent})
            async for chunk in self._upstream.stream(request.model, request.upstream_params()):
                yield chunk
            return
        thread = await self._thread(request, named)
        prepared = None
        if thread is not None:
            headers["x-pcp-thread"] = thread.thread
            now = request_time(request.meta.time, self._clock() if self._clock else None)
            if _is_save(request):
                text, save_headers = await self._save(request, thread, now)
                headers.update(save_headers)
                stats.form, stats.rounds = "local", 0
                for chunk in _local_chunks(request.model, text, request.include_usage):
                    yield chunk
                return
            prepared = await self._prepare(request, thread, now)
        if thread is None or prepared is None:
            headers.update(DEGRADED)
            async for chunk in self._upstream.stream(request.model, request.upstream_params()):
                yield chunk
            return
        context, form, raw_tokens = prepared
        headers.update(pcp_headers(context, form, raw_tokens))  # sent before the first round: the form is known
        answer = _Answer()
        if form is Form.RAW:
            async for chunk in self._upstream.stream(request.model, request.upstream_params()):
                yield answer.feed(chunk)
            await self._answered(thread, answer.message())
            yield Comment("x-pcp-rounds: 1")
            yield Comment("x-pcp-consults: 0")
            return
        async for item in self._paged.stream(request, context):
            yield answer.feed(item)
        await self._answered(thread, answer.message())

    async def _prepare(self, request: ChatRequest, thread: ThreadKey, now: datetime) -> tuple[PagedContext, Form, int | None] | None:
        """The paged context and the form; None when the store is down and the config says to serve anyway."""
        stats = request.meta.stats
        try:
            context = await self._build(request, thread, now)
            form, raw_tokens = await self._form(request, context)
            await self._background(context, form, raw_tokens)
        except StoreUnavailable as exc:
            self._degrade(request, thread.scope, exc)
            return None
        _note(stats, context, form, raw_tokens)
        return context, form, raw_tokens

    async def _build(self, request: ChatRequest, thread: ThreadKey, now: datetime) -> PagedContext:
        budget = request_budget(request.meta.budget, self._config.budget_for(request.model))
        tools = request.params.get("tools") or []
        return await self._builder.build(request.model, request.messages, tools, thread, now, budget)

    async def _background(self, context: PagedContext, form: Form, raw_tokens: int | None) -> None:
        """Queue the thread's consolidation (its new pages' vectors, then their topics) when the request stored pages,
        or re-embedding when another embedding model made its vectors. Not for a thread sent raw whose next exchange,
        as large as the largest this request stored, would still go raw: nothing compares its vectors or topics
        before it outgrows the budget, and most threads never do. The request that comes within an exchange of the
        budget queues it, so its vectors are made before the first request that is paged needs them (one that goes
        paged earlier, on a larger exchange, ranks the pages still waiting by their words, and queues it); a thread
        that stops short is consolidated by the idle flush (`Consolidator.schedule_idle`, from the thread registry
        in Redis, so a restart loses none of it)."""
        if self._consolidator is None:
            return
        if form is Form.RAW and raw_tokens is not None and raw_tokens + context.grown <= context.ceiling:
            return
        if context.added:
            await self._consolidator.pages_added(context.thread)
        else:  # pages another embedding model made (or a raw thread's, left until now) are embedded in the background
            await self._consolidator.vectors_checked(context.thread)

    async def _form(self, request: ChatRequest, context: PagedContext) -> tuple[Form, int | None]:
        """The form this request goes upstream in, and the client's request size in tokens (``None`` when it
        was not needed: a thread whose history outgrew the budget once stays paged, and is not counted again)."""
        if not self._config.pcp.raw_form:
            return Form.PAGED, None
        paged_before = context.was_paged  # read with the rest of the thread (RedisStore.snapshot)
        if paged_before and not context.exchanges:  # a client cleared its history (aider's /clear): start over raw
            await self._store.mark_paged(context.thread, paged=False)
            paged_before = False
        raw_tokens = None
        if not paged_before:  # counted as the budget counts the paged form: the model's encoding, whole messages
            raw_tokens = context.raw_tokens
            if raw_tokens is None:  # (a thread paged before whose client cleared its history)
                raw_tokens = TokenCounter.for_model(request.model).count_messages(request.messages)
        # the budget, or what the history may fill a request up to when its client's own parts leave less
        budget = context.ceiling
        form = choose_form(raw_tokens=raw_tokens or 0, paged_tokens=context.prompt_tokens, budget=budget, paged_before=paged_before)
        if raw_tokens is not None and pages_for_good(raw_tokens=raw_tokens, budget=budget):  # then it went paged
            await self._store.mark_paged(context.thread)
        return form, raw_tokens

    async def _save(self, request: ChatRequest, thread: ThreadKey, now: datetime) -> tuple[str, dict[str, str]]:
        """`/save`: store what is finished and flush the thread's buffer into a consolidated page."""
        every = split_blocks(request.messages).blocks
        blocks = [every[i] for i in self._builder.history.conversation(every)]
        _, added = await self._builder.history.ingest(thread, blocks, now)
        total = await self._store.page_count(thread)
        pages = f"{total} stored page{'s' if total != 1 else ''}"
        if self._consolidator is None:
            text = f"Saved: this thread ({thread.thread}) has {pages}. Consolidation is off (pcp.consolidation), so there is nothing to flush."
        else:
            if added:
                await self._consolidator.pages_added(thread)
            await self._consolidator.flush_requested(thread)
            text = (
                f"Saved: this thread ({thread.thread}) has {pages}; its current topic is being consolidated now "
                f"(GET /pcp/threads/{thread.thread} shows it, and pending_jobs reaches 0 when it is done)."
            )
        return text, {"x-pcp-thread": thread.thread, "x-pcp-rounds": "0", "x-pcp-pages": f"0/{total}"}


class _Answer:
    """The first choice's message of a streamed answer, reassembled from the chunks passed on to the client."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, str] = {}

    def feed(self, item: StreamItem) -> StreamItem:
        choices = item.get("choices") if isinstance(item, dict) else None
        delta = choices[0].get("delta") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if isinstance(delta, dict):
            if isinstance(delta.get("content"), str):
                self._text.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                if isinstance(call, dict) and call.get("id"):
                    self._calls.setdefault(int(call.get("index") or 0), str(call["id"]))
        return item

    def message(self) -> dict[str, Any]:
        calls = [{"id": call_id} for _, call_id in sorted(self._calls.items())]
        return {"role": "assistant", "content": "".join(self._text), **({"tool_calls": calls} if calls else {})}


def _note(stats: RequestStats, context: PagedContext, form: Form, raw_tokens: int | None) -> None:
    """What the edge counts of a paged-mode request (the same numbers as its x-pcp-* headers)."""
    stats.form = form.value
    stats.prompt_tokens = raw_tokens if form is Form.RAW and raw_tokens is not None else context.prompt_tokens
    stats.history_tokens = context.history_tokens
    stats.router_fallback = context.selected_by == "router-model-fallback"
    stats.over_budget = form is Form.PAGED and context.over_budget
    if form is Form.RAW:
        stats.rounds = 1


def _local_completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-pcp-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _local_chunks(model: str, text: str, include_usage: bool) -> list[dict[str, Any]]:
    base = {"id": f"chatcmpl-pcp-{uuid.uuid4().hex[:24]}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
    return chunks
