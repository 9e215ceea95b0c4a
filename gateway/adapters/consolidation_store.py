"""The consolidator's side of the thread store: the ingestion log, the segmentation state, and
atomic commits of consolidated pages.

Every commit is one Lua script over one thread's keys (one cluster slot) that checks the
segmentation cursor it started from (compare-and-set), so a job that runs twice — a crashed
worker's job claimed by another — can never write a second container for the same pages.
A merge commit instead checks that none of the merged pages has a parent yet. Every write also
checks that the thread still has pages: a job still running when its thread was deleted
(`DELETE /pcp/threads/{thread}`) ends without writing the thread back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from gateway.adapters.change_log import LOGGED
from gateway.adapters.embedding_models import DEFAULT_MODEL
from gateway.adapters.manifests import Manifest, NewPage, encode_vector, manifest_json, parse_manifest
from gateway.adapters.redis_store import RedisStore, new_version, store_errors
from gateway.adapters.store_keys import ThreadKey, threads_key
from gateway.core.segmentation import Buffer, SegmentBlock

__all__ = ["ConsolidationStore", "SegmentRecord", "buffer_json", "parse_buffer"]


def buffer_json(buffer: Buffer, model: str = DEFAULT_MODEL) -> str:
    """The segmentation buffer as stored in the thread's segment hash (read back by :func:`parse_buffer`), with the
    embedding model its vectors are of (unless the shipped model's: written as before models could be chosen)."""
    return json.dumps(
        {
            **({"model": model} if model != DEFAULT_MODEL else {}),
            "topic_id": buffer.topic_id,
            "page_ids": list(buffer.page_ids),
            "tokens": buffer.tokens,
            "topic_sum": list(buffer.topic_sum) if buffer.topic_sum is not None else None,
            "head_summary": buffer.head_summary,
            "head_tokens": buffer.head_tokens,
            "started_at": _time_json(buffer.started_at),
            "last_at": _time_json(buffer.last_at),
            "pending": [_block_json(block) for block in buffer.pending],
        },
        ensure_ascii=False,
    )


def parse_buffer(raw: str | None, model: str = DEFAULT_MODEL) -> Buffer:
    """The buffer :func:`buffer_json` wrote (or an earlier version: :func:`_from_kernel_form`); a fresh one for
    ``None``. When another embedding model than ``model`` made its vectors, its topic's vector is left out and its
    pending pages join the topic as they are (the next page with content sets the topic's vector again: vectors of
    two models are never compared)."""
    if not raw:
        return Buffer()
    data = json.loads(raw)
    if "topic_sum" not in data:
        data = _from_kernel_form(data)
    if data.get("model", DEFAULT_MODEL) != model:
        pending = data["pending"]
        data = data | {"topic_sum": None, "pending": [], "page_ids": [*data["page_ids"], *(b["id"] for b in pending)],
                       "tokens": data["tokens"] + sum(b["tokens"] for b in pending)}
    return Buffer(
        topic_id=data["topic_id"],
        page_ids=tuple(data["page_ids"]),
        tokens=data["tokens"],
        topic_sum=tuple(data["topic_sum"]) if data["topic_sum"] is not None else None,
        head_summary=data["head_summary"],
        head_tokens=data.get("head_tokens", 0),  # absent in buffers written before relays carried a head
        started_at=_parse_time(data["started_at"]),
        last_at=_parse_time(data["last_at"]),
        pending=tuple(_parse_block(block) for block in data["pending"]),
    )


def _from_kernel_form(data: dict[str, Any]) -> dict[str, Any]:
    """A buffer written before the pending window (an EMA ``kernel``, maybe a ``suspect``) in today's form.

    The kernel, a mean direction, stands for the sum of the pages before the suspect (scaled by their number, at
    least one). The suspect and the content-free pages after it become the pending window, so the lookahead
    decides whether the suspect opened a new topic, as the page after it would have; the suspect's page takes the
    tokens that it and those pages had together (the old buffer kept only their sum), and each of them the
    suspect's timestamp.
    """
    page_ids, tokens, kernel = list(data["page_ids"]), data["tokens"], data.get("kernel")
    suspect = data.get("suspect")  # absent in buffers written before suspects existed
    at = suspect["at"] if suspect else len(page_ids)
    pending = []
    if suspect:
        first = {"id": page_ids[at], "tokens": suspect["tokens"], "free": False, "vector": suspect["vector"]}
        rest = [{"id": page, "tokens": 0, "free": True, "vector": []} for page in page_ids[at + 1 :]]
        pending = [block | {"at": suspect["started_at"]} for block in (first, *rest)]
        tokens -= suspect["tokens"]
    topic_sum = [x * max(at, 1) for x in kernel] if kernel is not None else None
    return data | {"page_ids": page_ids[:at], "tokens": tokens, "topic_sum": topic_sum, "pending": pending}


def _time_json(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _parse_time(raw: str | None) -> datetime | None:
    return datetime.fromisoformat(raw) if raw else None


def _block_json(block: SegmentBlock) -> dict[str, Any]:
    return {
        "id": block.page_id, "tokens": block.tokens, "free": block.content_free,
        "vector": list(block.vector), "at": block.timestamp.isoformat(),
    }  # fmt: skip


def _parse_block(data: dict[str, Any]) -> SegmentBlock:
    return SegmentBlock(data["id"], data["tokens"], data["free"], tuple(data["vector"]), datetime.fromisoformat(data["at"]))


@dataclass(frozen=True)
class SegmentRecord:
    cursor: int
    buffer: Buffer


# Each script that adds a parent link or rewrites a manifest sets the thread's version to a fresh token (the
# last KEYS and ARGV) through the change log's `logged` (gateway.adapters.change_log): what gateway processes cached
# of the thread's pages is read again (RedisStore.snapshot), only the pages the change wrote where the log tells.

_COMMIT = LOGGED + """
-- KEYS: segment, manifest, content, vector, parent, version, changes
-- ARGV: expected cursor, new cursor, buffer json, then optionally: id, manifest, content, vector, child ids...;
-- last: a fresh version token
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end  -- the thread was deleted
local current = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
if current ~= tonumber(ARGV[1]) then return 0 end
if #ARGV >= 8 then
  local id = ARGV[4]
  redis.call('HSETNX', KEYS[2], id, ARGV[5])
  redis.call('HSETNX', KEYS[3], id, ARGV[6])
  if ARGV[7] ~= '' then redis.call('HSETNX', KEYS[4], id, ARGV[7]) end
  local written = {id}
  for i = 8, #ARGV - 1 do
    redis.call('HSET', KEYS[5], ARGV[i], id)
    written[#written + 1] = ARGV[i]
  end
  logged(KEYS[6], KEYS[7], ARGV[#ARGV], written)
end
redis.call('HSET', KEYS[1], 'cursor', ARGV[2], 'buffer', ARGV[3])
return 1
"""

_MERGE = LOGGED + """
-- KEYS: manifest, content, vector, parent, version, changes  ARGV: id, manifest, content, vector, child ids...,
-- version token
for i = 5, #ARGV - 1 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then return 0 end  -- deleted with its thread
end
for i = 5, #ARGV - 1 do
  if redis.call('HEXISTS', KEYS[4], ARGV[i]) == 1 then return 0 end
end
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[3])
if ARGV[4] ~= '' then redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[4]) end
local written = {ARGV[1]}
for i = 5, #ARGV - 1 do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[1])
  written[#written + 1] = ARGV[i]
end
logged(KEYS[5], KEYS[6], ARGV[#ARGV], written)
return 1
"""


_UPDATE_MANIFESTS = LOGGED + """
-- KEYS: manifest, version, changes  ARGV: id, manifest, ..., version token  (only pages still stored: not those of
-- a deleted thread)
local written = {}
for i = 1, #ARGV - 1, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    written[#written + 1] = ARGV[i]
  end
end
if #written > 0 then logged(KEYS[2], KEYS[3], ARGV[#ARGV], written) end
return 1
"""


def _page_args(new: NewPage) -> list[str]:
    vector = encode_vector(new.vector, new.model) if new.vector is not None else ""
    return [new.page.id, manifest_json(new), new.page.content, vector]


class ConsolidationStore:
    """What the consolidator reads and writes, over the same client as the RedisStore."""

    def __init__(self, store: RedisStore, model: str = DEFAULT_MODEL) -> None:
        self._store = store
        self._redis: Any = store.client
        self._model = model  # the embedding model of the vectors it reads and writes

    async def _call(self, coroutine: Any) -> Any:
        with store_errors():
            return await coroutine

    async def segment(self, thread: ThreadKey) -> SegmentRecord:
        raw = await self._call(self._redis.hmget(self._store.keys(thread).segment, ["cursor", "buffer"]))
        return SegmentRecord(int(raw[0] or 0), parse_buffer(raw[1], self._model))

    async def log_since(self, thread: ThreadKey, cursor: int, limit: int = 500) -> list[str]:
        """Original page ids stored after the first `cursor` entries of the ingestion log."""
        items = await self._call(self._redis.lrange(self._store.keys(thread).log, cursor, cursor + limit - 1))
        return [str(item) for item in items]

    async def commit(self, thread: ThreadKey, expected: int, cursor: int, buffer: Buffer, page: NewPage | None = None) -> bool:
        """Advance the segmentation state (and store a container with its parent links) if nobody else has."""
        keys = self._store.keys(thread)
        args: list[str] = [str(expected), str(cursor), buffer_json(buffer, self._model)]
        if page is not None:
            args += _page_args(page) + list(page.page.source_ids)
        args.append(new_version())
        done = await self._call(
            self._redis.eval(_COMMIT, 7, keys.segment, keys.manifest, keys.content, keys.vector, keys.parent, keys.version, keys.changes, *args)
        )
        return bool(done)

    async def merge(self, thread: ThreadKey, page: NewPage) -> bool:
        """Store a container over pages that have no parent yet; False if any of them already has one."""
        keys = self._store.keys(thread)
        args = [*_page_args(page), *page.page.source_ids, new_version()]
        done = await self._call(
            self._redis.eval(_MERGE, 6, keys.manifest, keys.content, keys.vector, keys.parent, keys.version, keys.changes, *args)
        )
        return bool(done)

    async def update_manifests(self, thread: ThreadKey, pages: Sequence[NewPage]) -> None:
        """Replace manifests (a summarizer's summary and clusters); content and vectors are unchanged."""
        if pages:
            keys = self._store.keys(thread)
            args = [part for new in pages for part in (new.page.id, manifest_json(new))]
            await self._call(self._redis.eval(_UPDATE_MANIFESTS, 3, keys.manifest, keys.version, keys.changes, *args, new_version()))

    async def top_level_consolidated(self, thread: ThreadKey) -> list[Manifest]:
        """The thread's consolidated pages that no other page contains, in time order."""
        keys = self._store.keys(thread)
        manifests, parents = await self._call(_both(self._redis, keys.manifest, keys.parent))
        pages = [parse_manifest(page_id, raw) for page_id, raw in manifests.items()]
        top = [m for m in pages if m.page.source_ids and m.page.id not in parents]
        return sorted(top, key=lambda m: (m.page.timestamp, m.page.id))

    async def tree(self, thread: ThreadKey) -> tuple[list[Manifest], dict[str, str]]:
        """Every manifest of the thread and every parent link (for inspection)."""
        keys = self._store.keys(thread)
        manifests, parents = await self._call(_both(self._redis, keys.manifest, keys.parent))
        return [parse_manifest(page_id, raw) for page_id, raw in manifests.items()], dict(parents)

    async def child_vectors(self, thread: ThreadKey, ids: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        return list((await self._store.vectors(thread, ids, model=self._model)).values())

    async def threads(self, quiet_since: float | None = None) -> list[ThreadKey]:
        """Threads in the registry; with `quiet_since`, only those with no page stored after it."""
        upper = "+inf" if quiet_since is None else quiet_since
        scopes = await self._call(self._redis.zrangebyscore(threads_key(self._store.prefix), "-inf", upper))
        return [ThreadKey.from_scope(str(scope)) for scope in scopes]


async def _both(redis: Any, manifest_key: str, parent_key: str) -> tuple[dict[str, str], dict[str, str]]:
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hgetall(manifest_key)
        pipe.hgetall(parent_key)
        manifests, parents = await pipe.execute()
    return manifests, parents
