"""A Redis for the adapter tests (the external one of REDIS_URL, else an embedded one per module) and a client
on it that deletes the keys under the module's own `prefix` fixture afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from gateway.adapters.embedded_redis import EmbeddedRedis
from tests.conftest import external_redis_url


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = external_redis_url()
    if url:
        yield url
        return
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis") / "data")
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
async def client(redis_url: str, prefix: str) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.Redis.from_url(redis_url, decode_responses=True)
    yield redis
    async for key in redis.scan_iter(match=f"{prefix}:*", count=1000):
        await redis.delete(key)
    await redis.aclose()
