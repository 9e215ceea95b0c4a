"""The Responses API's memory of its own responses: rebuilding a `previous_response_id` chain into
chat messages, and remembering each new turn. The chat itself (paging, zoom rounds, thread
identity) is the chat service's; this only supplies the full history it should see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.adapters.response_store import ResponseStore, StoredTurn
from gateway.errors import InvalidRequest
from gateway.service.request import RequestMeta

__all__ = ["ResponseMemory"]


class ResponseMemory:
    """Stored responses, scoped by the tenant of the request's API key."""

    def __init__(self, store: ResponseStore) -> None:
        self._store = store

    async def history(self, meta: RequestMeta, previous_id: str | None) -> list[Mapping[str, Any]]:
        """The chat messages of every turn up to `previous_id` (none without one)."""
        if previous_id is None:
            return []
        found = await self._store.history(meta.tenant, previous_id)
        if isinstance(found, str):
            which = "" if found == previous_id else f" (an earlier response of its chain, {found!r}, is gone)"
            raise InvalidRequest(
                f"Previous response with id {previous_id!r} not found{which}. Responses are kept by the gateway for a "
                "limited time, only when stored (store: true), and only for the API key that created them.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return found

    async def remember(
        self, meta: RequestMeta, response_id: str, previous_id: str | None, messages: Sequence[Mapping[str, Any]]
    ) -> None:
        await self._store.save(meta.tenant, response_id, StoredTurn(previous_id, tuple(messages)))
