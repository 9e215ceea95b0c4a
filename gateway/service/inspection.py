"""What the inspection API shows: a thread's pages as a tree, its views, trace, form and pending jobs
(`GET /pcp/threads/{thread}`), one page whole, a tenant's threads, and the context a question would get.

Tests and benchmarks use `pending_jobs` to wait until a thread's background work is done. The context preview
builds the first round's context as a chat request of the thread would (`ContextBuilder.build`, with the thread's
stored conversation as the history and the question as the live turn) without storing anything, persisting zoom
state or calling the chat model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from gateway.adapters.consolidation_store import ConsolidationStore
from gateway.adapters.manifests import Manifest
from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core import iso_time, message_text
from gateway.errors import InvalidRequest, ModelNotFound
from gateway.service.context import ContextBuilder
from gateway.service.consolidator import Consolidator
from gateway.service.importer import export_messages

__all__ = ["ThreadInspector"]


def _node(manifest: Manifest, by_id: dict[str, Manifest], heat: dict[str, str]) -> dict[str, Any]:
    page = manifest.page
    node: dict[str, Any] = {
        "id": page.id,
        "type": page.type.value,
        "timestamp": iso_time(page.timestamp),
        "summary": page.summary,
        "tokens": page.tokens,
        "heat": int(heat.get(page.id, 0)),
    }
    if page.source_ids:
        node["topic_id"] = page.topic_id
        node["children"] = [_node(by_id[c], by_id, heat) for c in page.source_ids if c in by_id]
    return node


class ThreadInspector:
    def __init__(
        self,
        store: RedisStore,
        consolidator: Consolidator | None,
        builder: ContextBuilder,
        models: Sequence[str],
        budget: Callable[[str], int],
    ) -> None:
        self._store = store
        self._cstore = ConsolidationStore(store)
        self._consolidator = consolidator
        self._builder = builder
        self._models = tuple(models)
        self._budget = budget

    async def page(self, thread: ThreadKey, page_id: str) -> dict[str, Any] | None:
        """One page whole: its manifest and content (None when the thread has no such page)."""
        found = (await self._store.pages(thread, [page_id])).get(page_id)
        if found is None:
            return None
        return {
            "id": found.id,
            "type": found.type.value,
            "timestamp": iso_time(found.timestamp),
            "summary": found.summary,
            "clusters": list(found.clusters),
            "tokens": found.tokens,
            "source_ids": list(found.source_ids),
            "content": found.content,
        }

    async def context(self, thread: ThreadKey, query: str, budget: int | None, model: str | None, now: datetime) -> dict[str, Any]:
        """The context a question on the thread would be sent upstream with, built but not sent or stored."""
        if not query.strip():
            raise InvalidRequest("q (the question to build the context for) is required", param="q")
        name = model or (self._models[0] if self._models else "")
        if name not in self._models:
            raise ModelNotFound(f"the model {name!r} is not in the config; it has {', '.join(self._models)}", param="model")
        history = await export_messages(self._store, thread)
        messages = [*history, {"role": "user", "content": query}]
        budget = budget or self._budget(name)
        built = await self._builder.build(name, messages, [], thread, now, budget, store=False)
        system = next((message_text(m) for m in built.messages if m.get("role") == "system"), "")
        return {
            "thread": thread.thread,
            "model": name,
            "query": query,
            "budget": budget,
            "prompt_tokens": built.prompt_tokens,
            "over_budget": built.over_budget,
            "pages_shown": built.shown,
            "pages_total": built.total,
            "system": system,
            "messages": [dict(m) for m in built.messages],
        }

    async def describe(self, thread: ThreadKey) -> dict[str, Any]:
        # pending jobs first: a job that ends while the rest is read then shows as pending, so pending_jobs == 0
        # means that what follows was read after all of the thread's work was done
        pending = await self._consolidator.pending(thread) if self._consolidator else 0
        manifests, parents = await self._cstore.tree(thread)
        by_id = {m.page.id: m for m in manifests}
        heat = await self._store.client.hgetall(self._store.keys(thread).heat)
        roots = sorted((m for m in manifests if m.page.id not in parents), key=lambda m: (m.page.timestamp, m.page.id))
        views, steps = await self._store.focus(thread)
        segment = await self._cstore.segment(thread)
        return {
            "thread": thread.thread,
            "pages": [_node(m, by_id, heat) for m in roots],
            "total_pages": len(manifests),
            "consolidated_pages": sum(1 for m in manifests if m.page.source_ids),
            "views": {page_id: view.value for page_id, view in views.items()},
            "trace": [{"action": s.action, "target": s.target, "reason": s.reason, "time": iso_time(s.time)} for s in steps],
            "segment": {
                "cursor": segment.cursor,
                "buffer_pages": list(segment.buffer.held_ids),  # committed to the topic, then pending
                "pending_pages": [block.page_id for block in segment.buffer.pending],  # not yet placed in a topic
                "buffer_tokens": segment.buffer.held_tokens,
                "topic_id": segment.buffer.topic_id,
            },
            "form": "paged" if await self._store.was_paged(thread) else "raw",  # paged for good: it outgrew the budget
            "pending_jobs": pending,
        }
