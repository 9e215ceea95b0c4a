"""Redis failures as the gateway's error (`gateway.errors.StoreUnavailable`): the one place they are translated, for
every module that talks to the store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import RedisError

from gateway.errors import StoreUnavailable

__all__ = ["store_errors"]


@contextmanager
def store_errors() -> Iterator[None]:
    """Redis failures, as the gateway's error: the one place they are translated."""
    try:
        yield
    except (RedisError, OSError) as exc:
        raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
