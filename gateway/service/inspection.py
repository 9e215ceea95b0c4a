"""What `GET /pcp/threads/{thread}` shows: a thread's pages as a tree, its views, trace, form and pending jobs.

Tests and benchmarks use `pending_jobs` to wait until a thread's background work is done.
"""

from __future__ import annotations

from typing import Any

from gateway.adapters.consolidation_store import ConsolidationStore
from gateway.adapters.redis_store import Manifest, RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core import iso_time
from gateway.service.consolidator import Consolidator

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
    def __init__(self, store: RedisStore, consolidator: Consolidator | None) -> None:
        self._store = store
        self._cstore = ConsolidationStore(store)
        self._consolidator = consolidator

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
                "buffer_pages": list(segment.buffer.page_ids),
                "buffer_tokens": segment.buffer.tokens,
                "topic_id": segment.buffer.topic_id,
            },
            "form": "paged" if await self._store.was_paged(thread) else "raw",  # what its last request went as
            "pending_jobs": pending,
        }
