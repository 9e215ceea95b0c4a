"""Background jobs: a Redis Stream with a consumer group, leases, retries and dead letters.

This module owns the job key layout. Every key carries the hash tag of the stream name
right after the prefix, so all of them share one Redis Cluster slot and the bookkeeping
scripts below may touch several at once (`pcp` and `jobs` are the defaults):

- `pcp:{jobs}`                     stream  queued and in-flight jobs; consumer group `workers`
- `pcp:{jobs}:delayed`             zset    retries waiting for their backoff (score: due time)
- `pcp:{jobs}:dead`                stream  jobs that failed `max_attempts` times, with the error
- `pcp:{jobs}:pending`             hash    thread -> jobs enqueued and not yet finished
- `pcp:{jobs}:dedupe:<kind>:<key>` string  id of the queued job holding that dedupe key

Delivery is at least once. A job runs again when its worker dies (or stalls longer than
the visibility timeout) after the handler's effect and before the ack, and when it
fails and is retried. Handlers must therefore be idempotent: key every effect on
`Job.id` (the id `enqueue` returned, stable across retries and re-deliveries) or on
the payload, e.g. with SET NX, HSETNX or content-addressed writes. A handler reports
failure by raising; it is retried after `backoff_ms * 2**(attempts-1)` and, after
`max_attempts`, moved to the dead letters with the error. Every worker on a stream
must handle every kind enqueued on it: a kind without a handler is dead-lettered.

The bookkeeping is exact: each step that finishes a delivery (done, retry, dead
letter) is one Lua script that runs only if its XACK acknowledged the entry, so when
two workers race on one job its pending count drops once and it is retried or
dead-lettered once. Acked entries are XDEL'd in the same script, so the stream holds
only unfinished jobs and needs no MAXLEN (which could drop queued ones); the dead
letters are capped with `MAXLEN ~ dead_letter_limit`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from gateway.errors import StoreUnavailable

__all__ = ["Delivery", "Handler", "Job", "JobQueue"]

log = logging.getLogger("gateway.jobs")

RedisClient = aioredis.Redis | RedisCluster

_ERROR_CHARS = 2_000

_ENQUEUE = """
-- KEYS: stream, pending[, dedupe]  ARGV: thread, dedupe ttl ms, field, value, ...
if #KEYS == 3 and redis.call('EXISTS', KEYS[3]) == 1 then return false end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
if #KEYS == 3 then redis.call('SET', KEYS[3], id, 'PX', ARGV[2]) end
return id
"""

_SETTLE = """
-- Finish a job for good (done, or dead-lettered when fields follow), once.
-- KEYS: stream, pending, dead[, dedupe]  ARGV: group, entry, thread, job id, dead maxlen, field, value, ...
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
if redis.call('HINCRBY', KEYS[2], ARGV[3], -1) <= 0 then redis.call('HDEL', KEYS[2], ARGV[3]) end
if #KEYS == 4 and redis.call('GET', KEYS[4]) == ARGV[4] then redis.call('DEL', KEYS[4]) end
if #ARGV > 5 then redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', unpack(ARGV, 6)) end
return 1
"""

_RETRY = """
-- KEYS: stream, delayed  ARGV: group, entry, due, member
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1
"""

_PROMOTE = """
-- KEYS: delayed, stream  ARGV: now, limit
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, member in ipairs(due) do
  redis.call('ZREM', KEYS[1], member)
  local args = {}
  for field, value in pairs(cjson.decode(member)) do
    args[#args + 1] = field
    args[#args + 1] = value
  end
  redis.call('XADD', KEYS[2], '*', unpack(args))
end
return #due
"""

_EXTEND = """
-- Reset the idle time of the entries this consumer still owns.
-- KEYS: stream  ARGV: group, consumer, entry, ...
local n = 0
for i = 3, #ARGV do
  if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2]) == 1 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    n = n + 1
  end
end
return n
"""


_FORGET = """
-- Remove every job of one thread: queued, held by a worker (acked, so its end changes nothing), waiting
-- for a retry, dead-lettered; its pending count and the given dedupe keys.
-- KEYS: stream, delayed, pending, dead, dedupe...  ARGV: group, thread
local removed = 0
local function of_thread(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'thread' then return fields[i + 1] == ARGV[2] end
  end
  return false
end
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  if of_thread(entry[2]) then
    pcall(redis.call, 'XACK', KEYS[1], ARGV[1], entry[1])
    redis.call('XDEL', KEYS[1], entry[1])
    removed = removed + 1
  end
end
for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local ok, job = pcall(cjson.decode, member)
  if ok and type(job) == 'table' and job['thread'] == ARGV[2] then
    redis.call('ZREM', KEYS[2], member)
    removed = removed + 1
  end
end
redis.call('HDEL', KEYS[3], ARGV[2])
for _, entry in ipairs(redis.call('XRANGE', KEYS[4], '-', '+')) do
  if of_thread(entry[2]) then redis.call('XDEL', KEYS[4], entry[1]) end
end
for i = 5, #KEYS do redis.call('DEL', KEYS[i]) end
return removed
"""


@dataclass(frozen=True)
class Job:
    """A unit of background work, as a handler sees it.

    `id` is the stream entry id `enqueue` returned; it stays the same across retries and
    re-deliveries, so it is the natural idempotency key. `attempts` counts the earlier
    deliveries of this job that failed or were lost with their worker.
    """

    id: str
    kind: str
    thread: str
    payload: dict[str, Any]
    attempts: int
    enqueued_at: float


Handler = Callable[[Job], Awaitable[None]]


@dataclass(frozen=True)
class Delivery:
    """One stream entry handed to a worker: its raw fields and how often it was handed out."""

    entry: str
    fields: Mapping[str, str]
    deliveries: int = 1

    def job(self) -> Job:
        """The job in this entry; KeyError or ValueError when the entry is malformed."""
        payload = json.loads(self.fields["payload"])
        if not isinstance(payload, dict):
            raise ValueError("payload is not a JSON object")
        return Job(
            id=self.fields.get("origin") or self.entry,
            kind=self.fields["kind"],
            thread=self.fields["thread"],
            payload=payload,
            attempts=int(self.fields["attempts"]) + self.deliveries - 1,
            enqueued_at=float(self.fields["enqueued_at"]),
        )


@contextmanager
def _store(action: str) -> Iterator[None]:
    try:
        yield
    except (RedisError, OSError) as exc:
        raise StoreUnavailable(f"job queue: could not {action}: {exc}") from exc


def _no_group(exc: ResponseError) -> bool:
    return str(exc).startswith("NOGROUP")


def _flat(fields: Mapping[str, str]) -> list[str]:
    return [part for pair in fields.items() for part in pair]


class JobQueue:
    """The job stream of one key prefix: enqueueing, inspection, and the steps workers take."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        prefix: str = "pcp",
        stream: str = "jobs",
        group: str = "workers",
        visibility_timeout_ms: int = 30_000,
        max_attempts: int = 5,
        backoff_ms: int = 500,
        clock: Callable[[], float] = time.time,
        dedupe_ttl_ms: int = 3_600_000,
        dead_letter_limit: int = 10_000,
    ) -> None:
        self._redis: Any = redis
        base = f"{prefix}:{{{stream}}}"
        self.stream_key = base
        self.delayed_key = f"{base}:delayed"
        self.dead_key = f"{base}:dead"
        self.pending_key = f"{base}:pending"
        self._dedupe_base = f"{base}:dedupe"
        self.group = group
        self.visibility_timeout_ms = visibility_timeout_ms
        self.max_attempts = max_attempts
        self.backoff_ms = backoff_ms
        self.clock = clock
        self._dedupe_ttl_ms = dedupe_ttl_ms
        self._dead_letter_limit = dead_letter_limit
        self._enqueue = redis.register_script(_ENQUEUE)
        self._settle = redis.register_script(_SETTLE)
        self._retry = redis.register_script(_RETRY)
        self._promote = redis.register_script(_PROMOTE)
        self._extend = redis.register_script(_EXTEND)
        self._forget = redis.register_script(_FORGET)

    def _dedupe_key(self, kind: str, dedupe: str) -> str:
        return f"{self._dedupe_base}:{kind}:{dedupe}"

    async def ensure_group(self) -> None:
        """Create the stream and its consumer group unless they exist."""
        with _store("create the consumer group"):
            try:
                await self._redis.xgroup_create(self.stream_key, self.group, id="0", mkstream=True)
            except ResponseError as exc:
                if not str(exc).startswith("BUSYGROUP"):
                    raise

    async def enqueue(self, kind: str, thread: str, payload: Mapping[str, Any], *, dedupe: str | None = None) -> str | None:
        """Queue a job and return its id; None when a job with this (kind, dedupe) is still unfinished."""
        fields = {
            "kind": kind,
            "thread": thread,
            "payload": json.dumps(dict(payload), ensure_ascii=False, separators=(",", ":")),
            "attempts": "0",
            "enqueued_at": repr(self.clock()),
        }
        keys = [self.stream_key, self.pending_key]
        if dedupe is not None:
            fields["dedupe"] = dedupe
            keys.append(self._dedupe_key(kind, dedupe))
        with _store("enqueue a job"):
            entry = await self._enqueue(keys=keys, args=[thread, self._dedupe_ttl_ms, *_flat(fields)])
        log.debug("job %s %s enqueued for %s", entry, kind, thread)
        return None if entry is None else str(entry)

    async def forget(self, thread: str, dedupes: Sequence[tuple[str, str]] = ()) -> int:
        """Remove every job of `thread` (see `_FORGET`) and the (kind, dedupe) keys given; how many jobs
        were queued, held or waiting. A worker still running one finishes it, and its ack changes nothing."""
        keys = [self.stream_key, self.delayed_key, self.pending_key, self.dead_key, *(self._dedupe_key(k, d) for k, d in dedupes)]
        with _store("remove a thread's jobs"):
            return int(await self._forget(keys=keys, args=[self.group, thread]))

    async def pending_for(self, thread: str) -> int:
        """Jobs of this thread enqueued (retries waiting included) and not yet done or dead-lettered."""
        with _store("read a thread's pending jobs"):
            value = await self._redis.hget(self.pending_key, thread)
        return max(0, int(value or 0))

    async def depth(self) -> dict[str, int]:
        """`stream`: unfinished entries; `pending`: those a worker holds; `delayed`: retries waiting; `dead`."""
        with _store("read the queue depth"):
            stream = await self._redis.xlen(self.stream_key)
            delayed = await self._redis.zcard(self.delayed_key)
            dead = await self._redis.xlen(self.dead_key)
            try:
                pending = (await self._redis.xpending(self.stream_key, self.group))["pending"]
            except ResponseError as exc:
                if not _no_group(exc):
                    raise
                pending = 0
        return {"stream": int(stream), "pending": int(pending), "delayed": int(delayed), "dead": int(dead)}

    async def oldest(self) -> float | None:
        """When the oldest unfinished job on the stream was enqueued (epoch seconds); None when there is none."""
        with _store("read the oldest job"):
            first = await self._redis.xrange(self.stream_key, "-", "+", count=1)
        if not first:
            return None
        entry, fields = first[0]
        try:
            return float(fields["enqueued_at"])
        except (KeyError, ValueError):
            return int(str(entry).split("-")[0]) / 1000

    async def dead_letters(self, count: int = 100) -> list[dict[str, Any]]:
        """The latest dead letters, newest first."""
        with _store("read the dead letters"):
            entries = await self._redis.xrevrange(self.dead_key, "+", "-", count=count)
        return [_dead_letter(entry, fields) for entry, fields in entries]

    # The steps a Worker takes.

    async def promote_due(self, limit: int) -> int:
        """Move up to `limit` retries whose backoff has passed back onto the stream."""
        with _store("promote due retries"):
            moved = await self._promote(keys=[self.delayed_key, self.stream_key], args=[repr(self.clock()), limit])
        return int(moved)

    async def claim_stale(self, consumer: str, count: int, start: str) -> tuple[str, list[Delivery]]:
        """Take over entries idle longer than the visibility timeout; returns the next cursor too."""
        with _store("claim stale jobs"):
            try:
                reply = await self._redis.xautoclaim(
                    self.stream_key, self.group, consumer, self.visibility_timeout_ms, start_id=start, count=count
                )
            except ResponseError as exc:
                if not _no_group(exc):
                    raise
                await self.ensure_group()
                return "0-0", []
            claimed = [(entry, fields) for entry, fields in reply[1] if entry is not None]
            deliveries = [Delivery(entry, fields, await self._times_delivered(entry)) for entry, fields in claimed]
        return str(reply[0]), deliveries

    async def _times_delivered(self, entry: str) -> int:
        rows = await self._redis.xpending_range(self.stream_key, self.group, min=entry, max=entry, count=1)
        return int(rows[0]["times_delivered"]) if rows else 1

    async def read_new(self, consumer: str, count: int, block_ms: int | None) -> list[Delivery]:
        """Entries never delivered before, waiting up to `block_ms` for one (None: no wait)."""
        with _store("read new jobs"):
            try:
                reply = await self._redis.xreadgroup(
                    self.group, consumer, {self.stream_key: ">"}, count=count, block=block_ms
                )
            except ResponseError as exc:
                if not _no_group(exc):
                    raise
                await self.ensure_group()
                return []
        return [Delivery(entry, fields) for _, entries in reply or [] for entry, fields in entries]

    async def complete(self, delivery: Delivery) -> bool:
        """Ack a job that is done; False when another worker had already finished it."""
        return await self._finish(delivery, {})

    async def bury(self, delivery: Delivery, attempts: int, error: str) -> bool:
        """Ack a job and move it to the dead letters with `error`."""
        return await self._finish(delivery, {**_next(delivery, attempts, error), "failed_at": repr(self.clock())})

    async def _finish(self, delivery: Delivery, dead: Mapping[str, str]) -> bool:
        fields = delivery.fields
        keys = [self.stream_key, self.pending_key, self.dead_key]
        if "dedupe" in fields and "kind" in fields:
            keys.append(self._dedupe_key(fields["kind"], fields["dedupe"]))
        origin = fields.get("origin") or delivery.entry
        args: list[str | int] = [self.group, delivery.entry, fields.get("thread", ""), origin, self._dead_letter_limit]
        args += _flat(dead)
        with _store("acknowledge a job"):
            return bool(await self._settle(keys=keys, args=args))

    async def retry_later(self, delivery: Delivery, attempts: int, delay_ms: int, error: str) -> bool:
        """Ack a failed job and schedule it again `delay_ms` from now."""
        member = json.dumps(_next(delivery, attempts, error), ensure_ascii=False, sort_keys=True)
        args = [self.group, delivery.entry, repr(self.clock() + delay_ms / 1000), member]
        with _store("schedule a retry"):
            return bool(await self._retry(keys=[self.stream_key, self.delayed_key], args=args))

    async def extend_lease(self, consumer: str, entries: Sequence[str]) -> int:
        """Reset the idle time of the entries `consumer` still holds, so nobody claims them."""
        with _store("extend a job lease"):
            return int(await self._extend(keys=[self.stream_key], args=[self.group, consumer, *entries]))

    async def forget_consumer(self, consumer: str) -> None:
        """Remove `consumer` from the group if it holds no entries."""
        with _store("remove a consumer"):
            try:
                held = await self._redis.xpending_range(self.stream_key, self.group, "-", "+", 1, consumername=consumer)
                if not held:
                    await self._redis.xgroup_delconsumer(self.stream_key, self.group, consumer)
            except ResponseError as exc:
                if not _no_group(exc):
                    raise


def _next(delivery: Delivery, attempts: int, error: str) -> dict[str, str]:
    """The fields of a job's next life (a retry or a dead letter)."""
    origin = delivery.fields.get("origin") or delivery.entry
    return {**delivery.fields, "origin": origin, "attempts": str(attempts), "error": error[:_ERROR_CHARS]}


def _dead_letter(entry: str, fields: Mapping[str, str]) -> dict[str, Any]:
    try:
        payload: Any = json.loads(fields.get("payload", "null"))
    except ValueError:
        payload = fields.get("payload")
    return {
        "id": entry,
        "job": fields.get("origin", ""),
        "kind": fields.get("kind", ""),
        "thread": fields.get("thread", ""),
        "payload": payload,
        "attempts": int(fields.get("attempts", 0)),
        "error": fields.get("error", ""),
        "enqueued_at": float(fields.get("enqueued_at", 0.0)),
        "failed_at": float(fields.get("failed_at", 0.0)),
    }
