"""A tenant's threads: listing them, and forgetting one (every key, every job) on request.

Forgetting is final: the thread's pages, views, trace, segmentation state and registry entries are
deleted, and its jobs with them; a consolidation job already running ends without writing it back
(`gateway.adapters.consolidation_store`). A client that sends the same history again stores it again,
as a new thread would.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core import iso_time
from gateway.errors import NotFound
from gateway.service.consolidator import Consolidator

__all__ = ["ThreadAdmin"]


class ThreadAdmin:
    def __init__(self, store: RedisStore, consolidator: Consolidator | None) -> None:
        self._store = store
        self._consolidator = consolidator

    async def forget(self, thread: ThreadKey) -> dict[str, Any]:
        """Delete the thread; what was removed. NotFound when the tenant has no such thread."""
        jobs = await self._consolidator.forget(thread) if self._consolidator is not None else 0
        pages, keys = await self._store.forget(thread)
        if not keys and not jobs:
            raise NotFound(f"No thread {thread.thread!r} for this key.", param="thread")
        return {"thread": thread.thread, "deleted": True, "pages": pages, "keys": keys, "jobs": jobs}

    async def threads(self, tenant: str, offset: int, limit: int) -> dict[str, Any]:
        """One page of the tenant's threads, most recently used first."""
        entries, total = await self._store.threads_of(tenant, offset, limit)
        data = [
            {"id": e.thread, "pages": e.pages, "last_used": iso_time(datetime.fromtimestamp(e.last_used, timezone.utc))}
            for e in entries
        ]
        more = offset + len(data) < total
        return {"object": "list", "data": data, "total": total, "has_more": more, "next_offset": offset + len(data) if more else None}
