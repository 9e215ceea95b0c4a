"""The bounded cache every per-process cache uses: least recently used out, a read counts as a use."""

from __future__ import annotations

from gateway.core.lru import Lru


def test_a_put_beyond_capacity_drops_the_least_recently_used_and_a_read_refreshes() -> None:
    cache: Lru[str, int] = Lru(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # now "b" is the least recently used
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2
    cache.put("a", 0)  # a falsy value is still a hit, and replacing one keeps the size
    assert cache.get("a") == 0 and len(cache) == 2
