"""The Redis connection the gateway owns, and the key layout of everything it stores.

The key layout lives only in this module. Every key of a thread carries the thread's
Redis Cluster hash tag, `<prefix>:{<tenant>:<thread>}:<what>`, so a thread's keys share
one slot and its multi-key transactions stay atomic on a cluster:

- `...:manifest`  hash  page id -> JSON manifest (everything but the content, plus the
                        token counts of its summary and background line)
- `...:content`   hash  page id -> page content
- `...:vector`    hash  page id -> embedding of the page content (base64 float16)
- `...:parent`    hash  page id -> id of the consolidated page that contains it
- `...:views`     hash  page id -> view (Detail / Unpacked; absent = Summary)
- `...:trace`     list  JSON reasoning-trace steps, oldest first, trimmed to a limit

Pages are content-addressed and written with HSETNX inside one MULTI/EXEC, so the
same history sent twice, or by twenty concurrent requests, stores each page once.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from gateway.core import Page, PageType, Step, View
from gateway.errors import StoreUnavailable

__all__ = ["open_redis", "RedisStore", "ThreadKey", "Manifest", "NewPage"]

log = logging.getLogger("gateway.store")

RedisClient = aioredis.Redis | RedisCluster


def open_redis(url: str, *, cluster: bool = False) -> RedisClient:
    """A client for `url` (redis://, rediss://, unix://); a cluster client when asked."""
    if cluster:
        return RedisCluster.from_url(url, decode_responses=True)
    client: aioredis.Redis = aioredis.Redis.from_url(url, decode_responses=True)
    return client


@dataclass(frozen=True)
class ThreadKey:
    """Who owns a thread: the tenant (derived from the API key) and the thread id."""

    tenant: str
    thread: str


@dataclass(frozen=True)
class Manifest:
    """A stored page without its content, the token counts the budget needs and the term counts of its
    content for lexical matching."""

    page: Page  # content is empty; see RedisStore.pages for the full page
    summary_tokens: int
    background_tokens: int
    terms: Mapping[str, int]
    length: int


@dataclass(frozen=True)
class NewPage:
    """A page to store with everything derived from it once, at ingestion."""

    page: Page
    summary_tokens: int
    background_tokens: int
    terms: Mapping[str, int]
    vector: npt.NDArray[np.float32] | None = None


def encode_vector(vector: npt.NDArray[np.float32]) -> str:
    return base64.b64encode(vector.astype(np.float16).tobytes()).decode("ascii")


def decode_vector(raw: str) -> npt.NDArray[np.float32]:
    return np.frombuffer(base64.b64decode(raw), dtype=np.float16).astype(np.float32)


def _manifest_json(new: NewPage) -> str:
    page = new.page
    return json.dumps(
        {
            "type": page.type.value,
            "timestamp": page.timestamp.isoformat(),
            "summary": page.summary,
            "clusters": list(page.clusters),
            "tokens": page.tokens,
            "source_ids": list(page.source_ids),
            "topic_id": page.topic_id,
            "summary_tokens": new.summary_tokens,
            "background_tokens": new.background_tokens,
            "terms": dict(new.terms),
            "length": sum(new.terms.values()),
        },
        ensure_ascii=False,
    )


def _manifest(page_id: str, raw: str, content: str = "") -> Manifest:
    data = json.loads(raw)
    page = Page(
        id=page_id,
        type=PageType(data["type"]),
        timestamp=datetime.fromisoformat(data["timestamp"]),
        content=content,
        summary=data["summary"],
        clusters=tuple(data["clusters"]),
        tokens=data["tokens"],
        source_ids=tuple(data["source_ids"]),
        topic_id=data["topic_id"],
    )
    return Manifest(page, data["summary_tokens"], data["background_tokens"], data.get("terms", {}), data.get("length", 0))


class RedisStore:
    """The gateway's store over one Redis (or Redis Cluster) client."""

    def __init__(self, client: RedisClient, prefix: str = "pcp") -> None:
        self._redis: Any = client
        self.prefix = prefix

    def _key(self, thread: ThreadKey, what: str) -> str:
        return f"{self.prefix}:{{{thread.tenant}:{thread.thread}}}:{what}"

    async def ping(self) -> bool:
        """True when the server answers."""
        try:
            return bool(await self._redis.ping())
        except (RedisError, OSError) as exc:
            log.warning("redis ping failed: %s", exc)
            return False

    async def close(self) -> None:
        try:
            await self._redis.aclose()
        except (RedisError, OSError):
            pass

    async def missing(self, thread: ThreadKey, ids: Sequence[str]) -> list[str]:
        """The ids (in order) that have no stored page in this thread."""
        if not ids:
            return []
        try:
            present = await self._redis.hmget(self._key(thread, "manifest"), list(ids))
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
        return [page_id for page_id, value in zip(ids, present) if value is None]

    async def add_pages(self, thread: ThreadKey, pages: Iterable[NewPage]) -> int:
        """Store pages atomically, each only if absent; return how many were new."""
        items = list(pages)
        if not items:
            return 0
        manifest, content, vector = self._key(thread, "manifest"), self._key(thread, "content"), self._key(thread, "vector")
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                for new in items:
                    if new.vector is not None:
                        pipe.hsetnx(vector, new.page.id, encode_vector(new.vector))
                    pipe.hsetnx(content, new.page.id, new.page.content)
                    pipe.hsetnx(manifest, new.page.id, _manifest_json(new))  # last: a manifest means complete
                results = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
        ends = itertools.accumulate(3 if new.vector is not None else 2 for new in items)
        return sum(1 for end in ends if results[end - 1])

    async def manifests(self, thread: ThreadKey, ids: Sequence[str]) -> dict[str, Manifest]:
        """Manifests of the stored pages among `ids`."""
        if not ids:
            return {}
        try:
            raws = await self._redis.hmget(self._key(thread, "manifest"), list(ids))
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
        return {page_id: _manifest(page_id, raw) for page_id, raw in zip(ids, raws) if raw is not None}

    async def pages(self, thread: ThreadKey, ids: Sequence[str]) -> dict[str, Page]:
        """Full pages (content included) of the stored pages among `ids`."""
        if not ids:
            return {}
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hmget(self._key(thread, "manifest"), list(ids))
                pipe.hmget(self._key(thread, "content"), list(ids))
                raws, contents = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
        return {
            page_id: _manifest(page_id, raw, content or "").page
            for page_id, raw, content in zip(ids, raws, contents)
            if raw is not None
        }

    async def vectors(self, thread: ThreadKey, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """Content embeddings of the pages among `ids` that have one."""
        if not ids:
            return {}
        try:
            raws = await self._redis.hmget(self._key(thread, "vector"), list(ids))
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
        return {page_id: decode_vector(raw) for page_id, raw in zip(ids, raws) if raw is not None}

    async def parents(self, thread: ThreadKey, ids: Sequence[str]) -> dict[str, str]:
        """The containing consolidated page of each of `ids` that has one."""
        if not ids:
            return {}
        try:
            raws = await self._redis.hmget(self._key(thread, "parent"), list(ids))
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
        return {page_id: parent for page_id, parent in zip(ids, raws) if parent is not None}

    async def page_count(self, thread: ThreadKey) -> int:
        try:
            return int(await self._redis.hlen(self._key(thread, "manifest")))
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc

    async def focus(self, thread: ThreadKey) -> tuple[dict[str, View], tuple[Step, ...]]:
        """The thread's persisted views and reasoning trace."""
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(self._key(thread, "views"))
                pipe.lrange(self._key(thread, "trace"), 0, -1)
                views, trace = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
        steps = []
        for raw in trace:
            data = json.loads(raw)
            steps.append(Step(data["action"], data["target"], data["reason"], datetime.fromisoformat(data["time"])))
        return {page_id: View(view) for page_id, view in views.items()}, tuple(steps)

    async def save_focus(
        self, thread: ThreadKey, views: Mapping[str, View], new_steps: Sequence[Step], trace_limit: int
    ) -> None:
        """Replace the thread's views and append steps to its trace (trimmed to `trace_limit`)."""
        views_key, trace_key = self._key(thread, "views"), self._key(thread, "trace")
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(views_key)
                if views:
                    pipe.hset(views_key, mapping={page_id: view.value for page_id, view in views.items()})
                if new_steps:
                    pipe.rpush(trace_key, *(_step_json(step) for step in new_steps))
                    pipe.ltrim(trace_key, -trace_limit, -1) if trace_limit else pipe.delete(trace_key)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"the store is unavailable: {exc}") from exc


def _step_json(step: Step) -> str:
    return json.dumps(
        {"action": step.action, "target": step.target, "reason": step.reason, "time": step.time.isoformat()},
        ensure_ascii=False,
    )
