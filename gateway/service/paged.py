"""Paged chat: drive the zoom rounds of one request over the upstream, streamed or not.

The decisions live in `gateway.core.rounds.zoom_rounds`; this module only performs its
effects (model calls, page loads), sums usage over rounds, persists the thread's views
and trace afterwards, and shapes the client's response. When the upstream fails with a server
error on a round that offered the zoom tools (before any of that round's text reached the client),
the loop is told so (`ZoomRoundFailed`) and asks the round again without them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Generator, Mapping
from typing import Any

from gateway.adapters.redis_store import RedisStore
from gateway.adapters.upstream import Upstream
from gateway.config import PcpSettings
from gateway.core import TokenCounter, View, settle
from gateway.core.form import Form
from gateway.core.rounds import ModelCall, NeedPages, RoundsOutcome, ZoomRoundFailed, zoom_rounds
from gateway.errors import UpstreamServerError
from gateway.service.answer_limit import StreamCut, client_limit, cut_answer, raise_limit
from gateway.service.context import PagedContext
from gateway.service.request import ChatRequest
from gateway.service.stream_items import KEEPALIVE, Comment, StreamItem
from gateway.service.streaming import RoundStream, add_usage

__all__ = ["PagedChat", "pcp_headers"]

log = logging.getLogger("gateway.paged")

KEEPALIVE_SECONDS = 5.0
_TEMPLATE_KEYS = ("id", "object", "created", "model", "system_fingerprint")
_OWN_STREAM_KEYS = ("stream", "stream_options")


def _usage_of(usage: Any, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, Mapping) else None
    return value if isinstance(value, int) else None


def pcp_headers(context: PagedContext, form: Form = Form.PAGED, raw_tokens: int | None = None) -> dict[str, str]:
    """The response headers of a request sent in ``form``; a raw one shows no page and sent ``raw_tokens``."""
    raw = form is Form.RAW
    headers = {
        "x-pcp-thread": context.thread.thread,
        "x-pcp-form": form.value,
        "x-pcp-pages": f"{0 if raw else context.shown}/{context.total}",
        "x-pcp-prompt-tokens": str(raw_tokens if raw and raw_tokens is not None else context.prompt_tokens),
        "x-pcp-history-tokens": str(context.history_tokens),
        "x-pcp-router-ms": f"{context.router_ms:.2f}",
    }
    if context.over_budget and not raw:
        headers["x-pcp-over-budget"] = "true"
    return headers


def _finish(reply: Mapping[str, Any], upstream_reason: str | None) -> str:
    if reply.get("tool_calls"):
        return "tool_calls"
    if upstream_reason in (None, "tool_calls", "function_call"):
        return "stop"
    return upstream_reason


def _asked_again_without_zoom(
    rounds: Generator[ModelCall | NeedPages, Any, RoundsOutcome], call: ModelCall, exc: UpstreamServerError
) -> ModelCall | NeedPages:
    """The loop's next effect after the upstream failed on ``call``: the same round without the zoom tools, when it
    offered them (the failure may be the model's tool call that the server could not parse); else ``exc`` stands."""
    if not call.offer_zoom:
        raise exc
    log.warning("round %d: the upstream failed with the zoom tools offered (%s); asking again without them", call.round, exc.message)
    return rounds.throw(ZoomRoundFailed())


def _count(request: ChatRequest, context: PagedContext, outcome: RoundsOutcome) -> None:
    """The request's rounds and the model's own zoom calls, for the edge's metrics and log line."""
    stats = request.meta.stats
    stats.rounds = outcome.rounds
    new = outcome.steps[len(context.steps) :] if outcome.steps[: len(context.steps)] == context.steps else outcome.steps
    stats.consults += sum(1 for step in new if step.action == "Consult")
    stats.shelves += sum(1 for step in new if step.action == "Shelve")


class PagedChat:
    """Runs a request whose context has been built."""

    def __init__(self, store: RedisStore, upstream: Upstream, settings: PcpSettings) -> None:
        self._store = store
        self._upstream = upstream
        self._settings = settings

    def _rounds(self, request: ChatRequest, context: PagedContext) -> Generator[ModelCall | NeedPages, Any, RoundsOutcome]:
        single_choice = request.params.get("n") in (None, 1)
        return zoom_rounds(
            context.messages,
            tree=context.tree,
            state=context.state,
            steps=context.steps,
            names=context.names,
            now=context.now,
            max_rounds=self._settings.max_rounds if single_choice else 0,
            room=context.room,
            trace_limit=self._settings.trace_limit,
            query=context.query,
            sides=dict(context.sides),
        )

    def _params(self, request: ChatRequest, context: PagedContext, call: ModelCall, stream: bool) -> dict[str, Any]:
        params = {k: v for k, v in request.params.items() if k not in _OWN_STREAM_KEYS}
        if call.offer_zoom:  # a zoom call needs room the client's answer limit may not leave (gateway.service.answer_limit)
            raise_limit(params, self._settings.zoom_round_tokens)
        client_tools = list(request.params.get("tools") or [])
        tools = client_tools + (list(context.zoom_tools) if call.offer_zoom else [])
        if tools:
            params["tools"] = tools
        else:
            for key in ("tools", "tool_choice", "parallel_tool_calls"):
                params.pop(key, None)
        params["messages"] = list(call.messages)
        if stream:
            params["stream_options"] = {"include_usage": True}
        return params

    async def _persist(self, context: PagedContext, outcome: RoundsOutcome) -> None:
        """Keep the model's own zoom moves (not the budget's choices) for the next turns."""
        views: dict[str, View] = dict(context.persisted)
        for page_id in outcome.touched:
            view = outcome.state.get(page_id, View.SUMMARY)
            if view is View.SUMMARY:
                views.pop(page_id, None)
            else:
                views[page_id] = view
        settled = settle(views, context.tree).state
        opened = [i for i, v in context.state.items() if v is View.DETAIL] + [
            i for i in outcome.touched if outcome.state.get(i, View.SUMMARY) is not View.SUMMARY
        ]
        await self._store.touch(context.thread, list(dict.fromkeys(opened)), context.now)
        new_steps = outcome.steps[len(context.steps) :] if outcome.steps[: len(context.steps)] == context.steps else outcome.steps
        await self._store.save_focus(context.thread, settled, new_steps, self._settings.trace_limit)

    def _raised(self, request: ChatRequest, call: ModelCall) -> int | None:
        """The client's answer limit when ``call``'s round is sent with a larger one; else None."""
        limit = client_limit(request.params)
        return limit if call.offer_zoom and limit is not None and limit < self._settings.zoom_round_tokens else None

    async def complete(self, request: ChatRequest, context: PagedContext) -> tuple[dict[str, Any], int, int]:
        """The client's JSON response, the number of upstream calls it took and the Consult calls resolved."""
        rounds = self._rounds(request, context)
        effect = next(rounds)
        usage: dict[str, int] = {}
        body: dict[str, Any] = {}
        while True:
            if isinstance(effect, NeedPages):
                effect = rounds.send(await self._store.pages(context.thread, effect.ids))
                continue
            limit = self._raised(request, effect)
            try:
                body = await self._upstream.complete(request.model, self._params(request, context, effect, stream=False))
            except UpstreamServerError as exc:
                effect = _asked_again_without_zoom(rounds, effect, exc)
                continue
            add_usage(usage, body.get("usage"))
            choices = body.get("choices") or [{}]
            try:
                effect = rounds.send(choices[0].get("message") or {})
            except StopIteration as stop:
                outcome: RoundsOutcome = stop.value
                break
        await self._persist(context, outcome)
        _count(request, context, outcome)
        first = dict(choices[0])
        first["message"] = outcome.reply
        first["finish_reason"] = _finish(outcome.reply, choices[0].get("finish_reason"))
        content = outcome.reply.get("content")
        if limit is not None and isinstance(content, str) and not outcome.reply.get("tool_calls"):
            kept = cut_answer(content, limit, TokenCounter.for_model(request.model), _usage_of(body.get("usage"), "completion_tokens"))
            if kept is not None:  # answered in a zoom round sent with more than the client's limit
                first["message"], first["finish_reason"] = {**outcome.reply, "content": kept}, "length"
        body = {**body, "choices": [first, *choices[1:]]}
        if usage:
            body["usage"] = {**(body.get("usage") or {}), **usage}
        return body, outcome.rounds, outcome.consults

    async def stream(self, request: ChatRequest, context: PagedContext) -> AsyncIterator[StreamItem]:
        """Chunks for the client, keep-alive comments between rounds, and a closing comment with the
        number of rounds. The last round's text streams as it arrives."""
        rounds = self._rounds(request, context)
        effect = next(rounds)
        usage: dict[str, int] = {}
        template: dict[str, Any] = {}
        sent_role = False
        while True:
            if isinstance(effect, NeedPages):
                effect = rounds.send(await self._store.pages(context.thread, effect.ids))
                continue
            round_stream = RoundStream(context.names)
            limit = self._raised(request, effect)
            cut = StreamCut(limit, TokenCounter.for_model(request.model)) if limit is not None else None
            quiet_since = time.monotonic()
            told = False  # whether this round's text reached the client (then a failure cannot be asked again)
            try:
                async for chunk in self._upstream.stream(request.model, self._params(request, context, effect, stream=True)):
                    template = template or {k: v for k, v in chunk.items() if k in _TEMPLATE_KEYS}
                    others = round_stream.others(chunk)
                    if others is not None:
                        told = True
                        yield {**others, **template}
                    out = round_stream.feed(chunk)
                    delta = out["choices"][0]["delta"] if out is not None else {}
                    if sent_role:
                        delta.pop("role", None)
                    if cut is not None and "content" in delta:
                        delta["content"] = cut.take(delta["content"])
                        if not delta["content"]:
                            delta.pop("content")
                    if out is not None and delta:
                        sent_role = sent_role or "role" in delta
                        told = told or any(key != "role" for key in delta)
                        yield {**out, **template}
                        quiet_since = time.monotonic()
                    elif time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                        yield KEEPALIVE
                        quiet_since = time.monotonic()
            except UpstreamServerError as exc:
                if told:
                    raise
                effect = _asked_again_without_zoom(rounds, effect, exc)
                continue
            add_usage(usage, round_stream.usage)
            try:
                effect = rounds.send(round_stream.message())
            except StopIteration as stop:
                outcome: RoundsOutcome = stop.value
                break
            yield KEEPALIVE  # an internal round ended: keep the connection alive while the next one starts
        await self._persist(context, outcome)
        _count(request, context, outcome)
        held = outcome.reply.get("content")
        if cut is not None and round_stream.holding and isinstance(held, str):
            held = cut.take(held)
        if round_stream.holding and isinstance(held, str) and held:  # not a zoom call after all: the answer
            delta = {"content": held} if sent_role else {"role": "assistant", "content": held}
            yield {**template, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        reason = "length" if cut is not None and cut.cut and not outcome.reply.get("tool_calls") else _finish(outcome.reply, round_stream.finish_reason)
        yield {**template, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
        if request.include_usage:
            yield {**template, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        yield Comment(f"x-pcp-rounds: {outcome.rounds}")
        yield Comment(f"x-pcp-consults: {outcome.consults}")
