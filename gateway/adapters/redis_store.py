"""The Redis connection the gateway owns, and (later) its key layout.

The key layout lives only in this module. Every key of a thread carries the thread's
Redis Cluster hash tag (`<prefix>:{<tenant>:<thread>}:...`) so a thread's keys share
one slot and its multi-key updates stay atomic on a cluster.
"""

from __future__ import annotations

import logging
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from gateway.errors import StoreUnavailable

__all__ = ["open_redis", "RedisStore"]

log = logging.getLogger("gateway.store")

RedisClient = aioredis.Redis | RedisCluster


def open_redis(url: str, *, cluster: bool = False) -> RedisClient:
    """A client for `url` (redis://, rediss://, unix://); a cluster client when asked."""
    if cluster:
        return RedisCluster.from_url(url, decode_responses=False)
    client: aioredis.Redis = aioredis.Redis.from_url(url, decode_responses=False)
    return client


class RedisStore:
    """The gateway's store over one Redis (or Redis Cluster) client."""

    def __init__(self, client: RedisClient, prefix: str = "pcp") -> None:
        self._redis: Any = client
        self.prefix = prefix

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

    def _raise(self, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(f"the store is unavailable: {exc}")
