"""The Responses API's stored turns: what `previous_response_id` points at.

Each stored response keeps only its own turn — the chat messages its input added (without
`instructions`, which do not carry over to the next response) and the assistant's reply — plus
the id of the response it continued. A chain is rebuilt by walking those links back, so a
conversation of N turns is stored once, not N times. Entries expire after a TTL; the key layout
is in `gateway.adapters.store_keys`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.adapters.redis_store import store_errors
from gateway.adapters.store_keys import response_key

__all__ = ["ResponseStore", "StoredTurn", "MAX_CHAIN"]

MAX_CHAIN = 10_000  # links followed at most: a guard, far beyond any conversation a client sends


@dataclass(frozen=True)
class StoredTurn:
    """One response: the turn's chat messages and the response it continued."""

    previous: str | None
    messages: tuple[Mapping[str, Any], ...]


class ResponseStore:
    """Stored responses of each tenant, on the gateway's Redis client."""

    def __init__(self, client: Any, prefix: str, ttl_seconds: int) -> None:
        self._redis = client
        self._prefix = prefix
        self._ttl = ttl_seconds

    async def save(self, tenant: str, response_id: str, turn: StoredTurn) -> None:
        value = json.dumps({"previous": turn.previous, "messages": list(turn.messages)}, ensure_ascii=False)
        with store_errors():
            await self._redis.set(response_key(self._prefix, tenant, response_id), value, ex=self._ttl)

    async def load(self, tenant: str, response_id: str) -> StoredTurn | None:
        with store_errors():
            raw = await self._redis.get(response_key(self._prefix, tenant, response_id))
        if raw is None:
            return None
        data = json.loads(raw)
        previous = data.get("previous")
        return StoredTurn(previous if isinstance(previous, str) else None, tuple(data.get("messages") or ()))

    async def history(self, tenant: str, response_id: str) -> list[Mapping[str, Any]] | str:
        """The messages of the whole chain ending at `response_id`, oldest first; or the id of the first
        link that is missing (never stored, expired, or another tenant's)."""
        turns: list[Sequence[Mapping[str, Any]]] = []
        current: str | None = response_id
        seen: set[str] = set()
        while current is not None and current not in seen and len(turns) < MAX_CHAIN:
            seen.add(current)
            turn = await self.load(tenant, current)
            if turn is None:
                return current
            turns.append(turn.messages)
            current = turn.previous
        return [message for messages in reversed(turns) for message in messages]
