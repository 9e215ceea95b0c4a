"""The thread of a request that names none (no `X-PCP-Thread`, no `metadata.pcp_thread`): the thread whose claims
its history carries (gateway.core.continuation), else a new one; and the claims of the answers given in a thread.

A new thread is named by the request's tenant and opening (the user's first words, the client's scaffolding left
out: `continuation.opening`), ``f<hash>``, while no thread of that name holds pages. A session's first request
carries only its live turn, and its second carries that turn as its first exchange: both get that name, and so
does a retry of either; from the answer the second request carries on, the thread is found by its claims. When a
thread of that name already holds pages (another session opened with the same words, or this one's first turn
was asked again after the thread moved on), the request carries none of its claims, so it is another
conversation: it gets a thread of its own, ``n<random>``, which its next request finds by the answer claimed.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.adapters.redis_store import RedisStore, ThreadKey
from gateway.core import message_text
from gateway.core.continuation import answer_claims, continued, evidence, opening, page_claim, recent_exchanges
from gateway.core.messages import SYSTEM_ROLES
from gateway.core.profiles import ClientMarkers
from gateway.core.scaffolding import scaffolding_blocks
from gateway.errors import InvalidRequest
from gateway.service.split_cache import SplitCache

__all__ = ["ThreadFinder", "answer_of"]


def _digest(*parts: str) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part.encode("utf-8", "surrogatepass"))
        hasher.update(b"\x00")
    return hasher.hexdigest()[:16]


def answer_of(message: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """The text and the tool call ids of an answer (an OpenAI assistant message, or a stream's reassembly)."""
    calls = message.get("tool_calls")
    ids = [str(c["id"]) for c in calls if isinstance(c, Mapping) and c.get("id")] if isinstance(calls, list) else []
    return message_text(message) or None, ids


class ThreadFinder:
    """Finds the thread of a request that names none, with the client markers of the config in force."""

    def __init__(self, store: RedisStore, markers: ClientMarkers) -> None:
        self._store = store
        self._markers = markers
        self._splits = SplitCache()  # by tenant and first message: a session's requests split only what they add

    async def find(self, tenant: str, messages: Sequence[Mapping[str, Any]]) -> str:
        """The thread ``messages`` continue among the tenant's, else a new thread's id (see the module docstring)."""
        first = next((m for m in messages if m.get("role") not in SYSTEM_ROLES), None)
        scope = f"{tenant}:{_digest(message_text(first)) if first is not None else ''}"
        try:
            split = self._splits.split(scope, messages)
        except ValueError as exc:
            raise InvalidRequest(str(exc), param="messages") from exc
        scaffold = scaffolding_blocks(split.blocks, self._markers.pins, self._markers.preamble)
        found = evidence(split.blocks, split.ids, split.tail, scaffold)
        held = await self._store.claimed(tenant, found.claims)
        thread = continued(found, held)
        if thread is not None:
            return thread
        named = ThreadKey(tenant, "f" + _digest(tenant, opening(split.blocks, split.tail, scaffold)))
        # a thread stored before claims were recorded holds exchanges that no thread claims
        claimed = {claim for claim, holder in zip(found.claims, held) if holder is not None}
        unclaimed = [split.ids[i] for i in recent_exchanges(split.blocks, scaffold) if page_claim(split.ids[i]) not in claimed]
        if await self._store.page_count(named) == 0 or len(await self._store.missing(named, unclaimed)) < len(unclaimed):
            return named.thread
        return "n" + uuid.uuid4().hex[:16]

    async def answered(self, thread: ThreadKey, message: Mapping[str, Any]) -> None:
        """Record the claims of the answer given in ``thread`` (its final reply, or its tool calls)."""
        content, calls = answer_of(message)
        await self._store.claim_answer(thread, answer_claims(content, calls))
