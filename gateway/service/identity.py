"""Who a request belongs to (tenant, thread) and what time it is for it.

The tenant is decided at the HTTP edge (`gateway.http.auth`): with keys configured it is the tenant the
key is configured for; without keys it is `key_tenant` of whatever key the client sent. Thread precedence: the `X-PCP-Thread` header, then `metadata.pcp_thread` in the body,
then a fingerprint of (tenant, first user message). The system prompt is deliberately
left out of the fingerprint: IDE assistants fill it with volatile details (the time,
open files) that would split one conversation into many threads.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from gateway.core import message_text, utc
from gateway.errors import InvalidRequest

__all__ = ["key_tenant", "named_thread", "thread_of", "path_thread", "request_time", "request_budget"]

_SAFE_THREAD = re.compile(r"[A-Za-z0-9._\-]{1,128}")


def _digest(*parts: str, length: int = 16) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part.encode("utf-8", "surrogatepass"))
        hasher.update(b"\x00")
    return hasher.hexdigest()[:length]


def key_tenant(authorization: str | None) -> str:
    """A stable, non-reversible tenant id from the client's API key ("anon" without one): the tenant of a
    gateway without configured keys."""
    if not authorization:
        return "anon"
    scheme, _, key = authorization.partition(" ")
    token = key.strip() if scheme.lower() == "bearer" else authorization.strip()
    return "t" + _digest(token, length=12) if token else "anon"


def _clean(thread: str) -> str:
    """A thread id safe inside a Redis hash tag: kept when plain, hashed otherwise."""
    return thread if _SAFE_THREAD.fullmatch(thread) else "h" + _digest(thread)


def path_thread(thread: str) -> str:
    """A thread id from a URL path, as the gateway reports them (`x-pcp-thread`); anything else is refused."""
    if not _SAFE_THREAD.fullmatch(thread):
        raise InvalidRequest(f"{thread[:80]!r} is not a thread id (1-128 of A-Z a-z 0-9 . _ -)", param="thread")
    return thread


def named_thread(header: str | None, metadata_thread: Any) -> str | None:
    """The thread a request names, by header or metadata (see the module docstring); ``None`` when it names none."""
    if header and header.strip():
        return _clean(header.strip())
    if isinstance(metadata_thread, str) and metadata_thread.strip():
        return _clean(metadata_thread.strip())
    return None


def thread_of(header: str | None, metadata_thread: Any, tenant: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """The thread named, else the fingerprint of (tenant, first user message) (see the module docstring)."""
    named = named_thread(header, metadata_thread)
    if named is not None:
        return named
    first_user = next((message_text(m) for m in messages if m.get("role") == "user"), "")
    return "f" + _digest(tenant, first_user)


def request_time(header: str | None, clock: datetime | None = None) -> datetime:
    """`X-PCP-Time` (ISO 8601; naive means UTC) or the clock's now."""
    if header is None or not header.strip():
        return clock if clock is not None else datetime.now(timezone.utc)
    try:
        return utc(datetime.fromisoformat(header.strip()))
    except ValueError as exc:
        raise InvalidRequest(
            f"X-PCP-Time must be an ISO 8601 date-time such as 2026-02-14T10:30:00Z; got {header!r}",
            param="X-PCP-Time",
        ) from exc


MAX_BUDGET = 10_000_000


def request_budget(header: str | None, default: int) -> int:
    """`X-PCP-Budget` (a positive token count) or the configured budget."""
    if header is None or not header.strip():
        return default
    value = header.strip()
    if not (value.isascii() and value.isdigit()) or not 0 < int(value) <= MAX_BUDGET:
        raise InvalidRequest(f"X-PCP-Budget must be a whole number of tokens between 1 and {MAX_BUDGET}; got {header!r}", param="X-PCP-Budget")
    return int(value)
