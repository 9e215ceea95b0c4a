"""Per-key requests-per-minute limits, shared by every gateway process through Redis.

A sliding window: one sorted set per key (`<prefix>:rate:<key digest>`) of the request times of the last
minute, checked and appended by one Lua script, so N gateways enforce one limit and a burst at a minute's
boundary is not let through twice. When Redis does not answer the limit is not enforced (logged): the
request is served as the store's outage allows, not refused for it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

__all__ = ["RateLimiter"]

log = logging.getLogger("gateway.rate_limit")

WINDOW_MS = 60_000

_ACQUIRE = """
-- KEYS: window  ARGV: now ms, window ms, limit, member
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return tostring(tonumber(oldest[2]) + tonumber(ARGV[2]) - tonumber(ARGV[1]))
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return false
"""


class RateLimiter:
    def __init__(self, redis: Any, prefix: str, clock: Callable[[], float] = time.time) -> None:
        self._redis = redis
        self._prefix = prefix
        self._clock = clock
        self._script = redis.register_script(_ACQUIRE)

    async def acquire(self, key_id: str, rpm: int) -> float | None:
        """Count one request of `key_id`; None when allowed, else the seconds until a slot frees."""
        now_ms = int(self._clock() * 1000)
        try:
            wait = await self._script(keys=[f"{self._prefix}:rate:{key_id}"], args=[now_ms, WINDOW_MS, rpm, f"{now_ms}-{uuid.uuid4().hex[:8]}"])
        except (RedisError, OSError) as exc:
            log.warning("rate limit not enforced: the store is unavailable (%s)", exc)
            return None
        return None if wait is None else max(float(wait), 0.0) / 1000
