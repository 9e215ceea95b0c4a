"""The Redis connection the gateway owns, and the thread store of the request path.

The key layout is in `gateway.adapters.store_keys`. Pages are content-addressed and written by one
Lua script, each only if absent, so the same history sent twice, or by twenty concurrent requests,
stores each page once, and a page is in the consolidation log exactly once. What one request reads of a
thread (`RedisStore.snapshot`) is a `gateway.adapters.snapshot.ThreadSnapshot`.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from gateway.adapters.manifests import (
    PENDING_VECTOR, Manifest, NewPage, encode_vector, manifest_json, sentences_vector_field, user_vector_field,
)  # fmt: skip
from gateway.adapters.change_log import changed_since
from gateway.adapters.focus import parse_focus, step_json
from gateway.adapters.page_vectors import PageVectors
from gateway.adapters.snapshot import ThreadSnapshot
from gateway.adapters.store_errors import store_errors
from gateway.adapters.store_keys import ThreadKey, ThreadKeys, tenant_index_key, tenant_threads_key, threads_key
from gateway.adapters.thread_cache import KnownPages, ManifestCache, PageCache
from gateway.core import Page, Step, View
from gateway.core.continuation import AMBIGUOUS, page_claim

__all__ = ["open_redis", "RedisStore", "ThreadKey", "ThreadEntry", "new_version", "store_errors"]

log = logging.getLogger("gateway.store")

RedisClient = aioredis.Redis | RedisCluster


def open_redis(url: str, *, cluster: bool = False) -> RedisClient:
    """A client for `url` (redis://, rediss://, unix://); a cluster client when asked.

    A broken connection is retried (twice, 50-100 ms apart): after Redis restarts, each pooled connection
    would otherwise fail its first command, and a request be served without memory for nothing.
    """
    if cluster:
        return RedisCluster.from_url(url, decode_responses=True)
    retry = Retry(ExponentialBackoff(cap=0.1, base=0.05), 2)
    client: aioredis.Redis = aioredis.Redis.from_url(url, decode_responses=True, retry=retry, retry_on_error=[RedisConnectionError])
    return client


_ADD_PAGES = """
-- KEYS: manifest, content, vector, log, messages, version (one thread: one slot)
-- ARGV: a fresh version token, then (id, manifest, content, vector, messages, user vector field, user vector,
--       user sentences field, user sentences' vectors) per page
-- New pages change no stored one: the version is only set if the thread has none yet. A vector to be embedded
-- later (PENDING_VECTOR) marks the thread's vectors as not all of one model, under this request's token, so that the
-- background re-embeds them (RedisStore.replace_vectors) in the same atomic step as the page is stored
redis.call('SET', KEYS[6], ARGV[1], 'NX')
local added = {}
for i = 2, #ARGV, 9 do
  local id = ARGV[i]
  if redis.call('HSETNX', KEYS[1], id, ARGV[i + 1]) == 1 then
    if ARGV[i + 3] == 'pending|' or ARGV[i + 6] == 'pending|' or ARGV[i + 8] == 'pending|' then
      redis.call('HSET', KEYS[3], '@model', 'pending:' .. ARGV[1])
    end
    redis.call('HSET', KEYS[2], id, ARGV[i + 2])
    if ARGV[i + 3] ~= '' then redis.call('HSET', KEYS[3], id, ARGV[i + 3]) end
    if ARGV[i + 4] ~= '' then redis.call('HSET', KEYS[5], id, ARGV[i + 4]) end
    if ARGV[i + 6] ~= '' then redis.call('HSET', KEYS[3], ARGV[i + 5], ARGV[i + 6]) end
    if ARGV[i + 8] ~= '' then redis.call('HSET', KEYS[3], ARGV[i + 7], ARGV[i + 8]) end
    redis.call('RPUSH', KEYS[4], id)
    added[#added + 1] = id
  end
end
table.insert(added, 1, redis.call('HLEN', KEYS[1]))  -- first: the thread's page count after
return added
"""


_FORGET = """
-- KEYS: every key of one thread (one slot)  ARGV: nothing
-- returns the thread's page count, then the index (1-based) of each key that existed
local out = {redis.call('HLEN', KEYS[1])}
for i = 1, #KEYS do
  if redis.call('DEL', KEYS[i]) == 1 then out[#out + 1] = i end
end
return out
"""


_VERSION = """
-- KEYS: version, manifest  ARGV: a fresh version token
-- The thread's version; a thread stored before versions existed gets one now (none while it has no page)
local version = redis.call('GET', KEYS[1])
if not version and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SET', KEYS[1], ARGV[1])
  version = ARGV[1]
end
return version
"""


_CLAIM = """
-- KEYS: a tenant's index  ARGV: a thread, then the claims it makes
-- A claim is the thread's while no other thread made it; once two did, it is ambiguous and stays so
for i = 2, #ARGV do
  local holder = redis.call('HGET', KEYS[1], ARGV[i])
  if not holder then redis.call('HSET', KEYS[1], ARGV[i], ARGV[1])
  elseif holder ~= ARGV[1] and holder ~= '""" + AMBIGUOUS + """' then redis.call('HSET', KEYS[1], ARGV[i], '""" + AMBIGUOUS + """') end
end
return 0
"""


_WITHDRAW = """
-- KEYS: a tenant's index  ARGV: a thread, then claims: those the thread holds alone are removed
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 0
"""


def new_version() -> str:
    """A version token no thread had before (a deleted thread's pages must never be taken for a new one's)."""
    return uuid.uuid4().hex


def _parse_asked(raw: str | bytes | None) -> tuple[str, float] | None:
    """The last request's live message record (`RedisStore.save_asked`), or None when absent or unreadable."""
    if raw is None:
        return None
    try:
        text_hash, at = json.loads(raw)
        return str(text_hash), float(at)
    except (ValueError, TypeError):
        return None


@dataclass(frozen=True)
class ThreadEntry:
    """One thread of a tenant, as `GET /pcp/threads` lists it."""

    thread: str
    pages: int
    last_used: float  # the time its last page was stored (seconds since the epoch)


class RedisStore(PageVectors):
    """The gateway's store over one Redis (or Redis Cluster) client (its page vectors: `gateway.adapters.page_vectors`)."""

    def __init__(self, client: RedisClient, prefix: str = "pcp") -> None:
        self._redis: Any = client
        self.prefix = prefix
        self._parsed = ManifestCache()
        self._pages = PageCache()

    def keys(self, thread: ThreadKey) -> ThreadKeys:
        return ThreadKeys(self.prefix, thread)

    @property
    def client(self) -> Any:
        return self._redis

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

    async def snapshot(self, thread: ThreadKey, ids: Sequence[str]) -> ThreadSnapshot:
        """One request's read of the thread (see `ThreadSnapshot`) with the manifests and parents of ``ids``,
        atomically; a second round trip only when the thread's version changed since this process last read it."""
        keys = self.keys(thread)
        cached = self._pages.known(thread.scope, self._pages.version(thread.scope))
        # (on a thread this process knows, usually nothing is unread: the ids its last request found known, compared
        # in C; else a set difference, then a walk only when something is unread)
        asked_ids = tuple(ids)
        unread: list[str] = []
        if asked_ids != cached.complete_for and set(ids).difference(cached.manifests):
            unread = list(dict.fromkeys(i for i in ids if i not in cached.manifests))

        async def read(wanted: list[str]) -> list[Any]:
            with store_errors():
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.eval(_VERSION, 2, keys.version, keys.manifest, new_version())
                    pipe.get(keys.layout)
                    pipe.hgetall(keys.views)
                    pipe.lrange(keys.trace, 0, -1)
                    pipe.hlen(keys.manifest)
                    pipe.hgetall(keys.seen)
                    pipe.get(keys.form)
                    pipe.get(keys.asked)
                    if wanted:
                        pipe.hmget(keys.manifest, wanted)
                        pipe.hmget(keys.parent, wanted)
                    reply: list[Any] = await pipe.execute()
            return reply if wanted else [*reply, [], []]

        reply = await read(unread)
        known = self._pages.known(thread.scope, reply[0])
        if known is not cached and cached.manifests:  # another version: what was cached holds only where no change wrote
            carried = await self._carried(thread, cached, reply[0])
            if carried is not None:
                known = carried
            unread = list(dict.fromkeys(i for i in ids if i not in known.manifests))
            reply = await read(unread)
            if reply[0] != known.version:  # changed again meanwhile: everything read at the version now
                unread = list(dict.fromkeys(ids))
                reply = await read(unread)
            known = self._pages.known(thread.scope, reply[0])
        _, layout, raw_views, trace, count, seen, form, asked, manifests, parents = reply
        views, steps = parse_focus(raw_views, trace)
        snapshot = ThreadSnapshot(
            self, thread, known, layout=layout.decode("utf-8") if isinstance(layout, bytes) else layout, views=views,
            steps=steps, page_count=int(count), paged=form is not None, asked=_parse_asked(asked), seen=seen,
            wanted=unread, manifests=manifests, parents=parents,
        )
        if all(manifest is not None for manifest in manifests):  # every id is known at this version now
            known.complete_for = asked_ids
        self._pages.trim()
        return snapshot

    async def _carried(self, thread: ThreadKey, cached: KnownPages, version: str | None) -> KnownPages | None:
        """What ``cached`` knows of the thread that is still so at ``version``: all but the pages the changes since its
        version wrote, by the thread's change log (gateway.adapters.change_log); ``None`` when the log does not tell."""
        if version is None or cached.version is None:
            return None
        with store_errors():
            entries = await self._redis.lrange(self.keys(thread).changes, 0, -1)
        changed = changed_since(entries, cached.version, version)
        return self._pages.carried(thread.scope, cached, version, changed) if changed is not None else None

    def parsed_manifest(self, thread: ThreadKey, page_id: str, raw: str) -> Manifest:
        """The manifest stored as ``raw``, parsed once per process while that JSON is unchanged."""
        return self._parsed.get(thread.scope, page_id, raw)

    async def manifests_and_parents(self, thread: ThreadKey, ids: list[str]) -> tuple[list[str | None], list[str | None]]:
        """The stored manifest (its JSON) and parent of each of ``ids``, in order, read atomically (``None``: no
        such page; no parent): what a `ThreadSnapshot` reads of pages it was not built with."""
        keys = self.keys(thread)
        with store_errors():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hmget(keys.manifest, ids)
                pipe.hmget(keys.parent, ids)
                manifests, parents = await pipe.execute()
        return manifests, parents

    async def missing(self, thread: ThreadKey, ids: Sequence[str]) -> list[str]:
        """The ids (in order) that have no stored page in this thread."""
        if not ids:
            return []
        with store_errors():
            present = await self._redis.hmget(self.keys(thread).manifest, list(ids))
        return [page_id for page_id, value in zip(ids, present) if value is None]

    async def add_pages(
        self, thread: ThreadKey, pages: Iterable[NewPage], now: float, snapshot: ThreadSnapshot | None = None
    ) -> list[str]:
        """Store pages, each only if absent, atomically; return the ids that were new (now in the log). A request's
        ``snapshot`` of the thread learns the pages stored and the thread's page count after."""
        items = list(pages)
        if not items:
            return []
        keys = self.keys(thread)
        args: list[str] = []
        for new in items:
            later = {field: PENDING_VECTOR for field in new.pending}
            vector = encode_vector(new.vector, new.model) if new.vector is not None else later.get(new.page.id, "")
            mine = (encode_vector(new.user_vector, new.model) if new.user_vector is not None
                    else later.get(user_vector_field(new.page.id), ""))
            sentences = (encode_vector(new.sentence_vectors.ravel(), new.model) if new.sentence_vectors is not None
                         else later.get(sentences_vector_field(new.page.id), ""))
            args += [new.page.id, manifest_json(new), new.page.content, vector, new.messages, user_vector_field(new.page.id), mine,
                     sentences_vector_field(new.page.id), sentences]
        with store_errors():
            reply = await self._redis.eval(
                _ADD_PAGES, 6, keys.manifest, keys.content, keys.vector, keys.log, keys.messages, keys.version, new_version(), *args
            )
            count, *added = reply
            if added:  # the registries and the tenant's index are other slots: separate, idempotent writes
                await self._redis.zadd(threads_key(self.prefix), {thread.scope: now})
                await self._redis.zadd(tenant_threads_key(self.prefix, thread.tenant), {thread.thread: now})
                await self._claim(thread, [page_claim(str(page_id)) for page_id in added])
        ids = [str(page_id) for page_id in added]
        if snapshot is not None:
            snapshot.stored(items, ids)
            snapshot.page_count = int(count)
        return ids

    async def _claim(self, thread: ThreadKey, claims: Sequence[str]) -> None:
        await self._redis.eval(_CLAIM, 1, tenant_index_key(self.prefix, thread.tenant), thread.thread, *claims)

    async def claim_answer(self, thread: ThreadKey, claims: Sequence[str]) -> None:
        """Record in the tenant's index that the thread made these answer claims (gateway.core.continuation), and
        in the thread which they are, so that deleting it withdraws them."""
        if not claims:
            return
        with store_errors():
            await self._claim(thread, claims)
            await self._redis.rpush(self.keys(thread).claims, *claims)

    async def made_claim(self, thread: ThreadKey, claim: str) -> bool:
        """Whether the thread made the answer ``claim`` (`claim_answer`): the gateway gave that answer in it."""
        with store_errors():
            return await self._redis.lpos(self.keys(thread).claims, claim) is not None

    async def claimed(self, tenant: str, claims: Sequence[str]) -> list[str | None]:
        """The thread that made each of ``claims`` in the tenant's index, in order (``None``: no thread did;
        `gateway.core.continuation.AMBIGUOUS`: several did)."""
        if not claims:
            return []
        with store_errors():
            found: list[str | None] = await self._redis.hmget(tenant_index_key(self.prefix, tenant), list(claims))
        return found

    async def manifests(self, thread: ThreadKey, ids: Sequence[str]) -> dict[str, Manifest]:
        """Manifests of the stored pages among `ids`."""
        if not ids:
            return {}
        with store_errors():
            raws = await self._redis.hmget(self.keys(thread).manifest, list(ids))
        found: dict[str, Manifest] = {}
        for page_id, raw in zip(ids, raws):
            if raw is not None:
                found[page_id] = self._parsed.get(thread.scope, page_id, raw)
        return found

    async def pages(self, thread: ThreadKey, ids: Sequence[str]) -> dict[str, Page]:
        """Full pages (content included) of the stored pages among `ids`."""
        if not ids:
            return {}
        with store_errors():
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hmget(self.keys(thread).manifest, list(ids))
                pipe.hmget(self.keys(thread).content, list(ids))
                raws, contents = await pipe.execute()
        parsed, scope = self._parsed, thread.scope  # the manifests as parsed before, while their JSON is unchanged
        return {
            page_id: replace(parsed.get(scope, page_id, raw).page, content=content or "")
            for page_id, raw, content in zip(ids, raws, contents)
            if raw is not None
        }

    async def cuts(self, thread: ThreadKey, fields: Sequence[str]) -> list[str | None]:
        """The stored excerpt units under ``fields`` (`gateway.service.page_excerpts`), ``None`` where none is."""
        if not fields:
            return []
        with store_errors():
            found: list[str | None] = await self._redis.hmget(self.keys(thread).units, list(fields))
        return found

    async def save_cuts(self, thread: ThreadKey, cuts: Mapping[str, str]) -> None:
        """Store pages' excerpt units by field (see :meth:`cuts`): what a page's content gives, once per cut."""
        if cuts:
            with store_errors():
                await self._redis.hset(self.keys(thread).units, mapping=dict(cuts))

    async def originals(self, thread: ThreadKey) -> list[tuple[str, str, str | None]]:
        """Every Original page in the order it was first stored: its id, content and the messages kept for it
        (see `gateway.core.original`; ``None`` when its content gives them back)."""
        keys = self.keys(thread)
        with store_errors():
            ids = [str(i) for i in await self._redis.lrange(keys.log, 0, -1)]
            if not ids:
                return []
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hmget(keys.content, ids)
                pipe.hmget(keys.messages, ids)
                contents, kept = await pipe.execute()
        return [(i, content or "", messages) for i, content, messages in zip(ids, contents, kept)]

    async def parents(self, thread: ThreadKey, ids: Sequence[str]) -> dict[str, str]:
        """The containing consolidated page of each of `ids` that has one."""
        if not ids:
            return {}
        with store_errors():
            raws = await self._redis.hmget(self.keys(thread).parent, list(ids))
        return {page_id: parent for page_id, parent in zip(ids, raws) if parent is not None}

    async def page_count(self, thread: ThreadKey) -> int:
        with store_errors():
            return int(await self._redis.hlen(self.keys(thread).manifest))

    async def was_paged(self, thread: ThreadKey) -> bool:
        """Whether a request of the thread was ever sent upstream paged (see :mod:`gateway.core.form`)."""
        with store_errors():
            return await self._redis.get(self.keys(thread).form) is not None

    async def mark_paged(self, thread: ThreadKey, paged: bool = True) -> None:
        """Record that the thread went paged: from now on it stays paged (until ``paged=False`` forgets it)."""
        with store_errors():
            if paged:
                await self._redis.set(self.keys(thread).form, "paged")
            else:
                await self._redis.delete(self.keys(thread).form)

    async def layout(self, thread: ThreadKey) -> str | None:
        """The thread's last request layout as :meth:`save_layout` stored it (see :mod:`gateway.core.scaffolding`)."""
        with store_errors():
            raw = await self._redis.get(self.keys(thread).layout)
        return raw.decode("utf-8") if isinstance(raw, bytes) else raw

    async def save_asked(self, thread: ThreadKey, text_hash: str, at: float) -> None:
        """Record the request's live user message (a hash of its text) and its time: the exchange it opens is stored
        by the next request, and dated by this one (`ThreadSnapshot.asked`)."""
        with store_errors():
            await self._redis.set(self.keys(thread).asked, json.dumps([text_hash, at]))

    async def save_layout(self, thread: ThreadKey, layout: str) -> None:
        with store_errors():
            await self._redis.set(self.keys(thread).layout, layout)

    async def focus(self, thread: ThreadKey) -> tuple[dict[str, View], tuple[Step, ...]]:
        """The thread's persisted views and reasoning trace."""
        with store_errors():
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(self.keys(thread).views)
                pipe.lrange(self.keys(thread).trace, 0, -1)
                views, trace = await pipe.execute()
        return parse_focus(views, trace)

    async def touch(self, thread: ThreadKey, ids: Sequence[str], when: datetime) -> None:
        """Record that pages were shown in Detail or consulted (heat and last access, for merging and decay)."""
        if not ids:
            return
        keys = self.keys(thread)
        with store_errors():
            async with self._redis.pipeline(transaction=True) as pipe:
                for page_id in ids:
                    pipe.hincrby(keys.heat, page_id, 1)
                pipe.hset(keys.seen, mapping={page_id: when.isoformat() for page_id in ids})
                await pipe.execute()

    async def last_seen(self, thread: ThreadKey, ids: Sequence[str]) -> dict[str, datetime]:
        if not ids:
            return {}
        with store_errors():
            raws = await self._redis.hmget(self.keys(thread).seen, list(ids))
        return {page_id: datetime.fromisoformat(raw) for page_id, raw in zip(ids, raws) if raw is not None}

    async def forget(self, thread: ThreadKey) -> tuple[int, list[str]]:
        """Delete every key of the thread and its registry entries; its page count and which keys existed."""
        every = self.keys(thread).every()
        names = list(every)
        with store_errors():
            async with self._redis.pipeline(transaction=True) as pipe:  # one slot: the thread's
                pipe.hkeys(every["manifest"])
                pipe.lrange(every["claims"], 0, -1)
                page_ids, answers = await pipe.execute()
            claims = [page_claim(str(i)) for i in page_ids] + [str(c) for c in answers]
            for start in range(0, len(claims), 1000):
                await self._redis.eval(_WITHDRAW, 1, tenant_index_key(self.prefix, thread.tenant), thread.thread, *claims[start : start + 1000])
            reply = await self._redis.eval(_FORGET, len(names), *every.values())
            await self._redis.zrem(threads_key(self.prefix), thread.scope)
            await self._redis.zrem(tenant_threads_key(self.prefix, thread.tenant), thread.thread)
        return int(reply[0]), [names[int(i) - 1] for i in reply[1:]]

    async def threads_of(self, tenant: str, offset: int, limit: int) -> tuple[list[ThreadEntry], int]:
        """A page of the tenant's threads, most recently used first, and how many it has in all."""
        key = tenant_threads_key(self.prefix, tenant)
        with store_errors():
            total = int(await self._redis.zcard(key))
            rows = await self._redis.zrevrange(key, offset, offset + limit - 1, withscores=True) if limit > 0 else []
            counts = [int(await self._redis.hlen(self.keys(ThreadKey(tenant, str(t))).manifest)) for t, _ in rows]
        return [ThreadEntry(str(t), n, float(score)) for (t, score), n in zip(rows, counts)], total

    async def save_focus(
        self, thread: ThreadKey, views: Mapping[str, View], new_steps: Sequence[Step], trace_limit: int
    ) -> None:
        """Replace the thread's views and append steps to its trace (trimmed to `trace_limit`)."""
        views_key, trace_key = self.keys(thread).views, self.keys(thread).trace
        with store_errors():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(views_key)
                if views:
                    pipe.hset(views_key, mapping={page_id: view.value for page_id, view in views.items()})
                if new_steps:
                    pipe.rpush(trace_key, *(step_json(step) for step in new_steps))
                    pipe.ltrim(trace_key, -trace_limit, -1) if trace_limit else pipe.delete(trace_key)
                await pipe.execute()
