"""Importing conversations into memory without an upstream, and exporting a thread's messages.

An imported conversation is stored exactly as the gateway would have stored it had a client sent it: one
request per run of messages that share a time (a session), each carrying the whole history up to the run's
end and dated at the run's time, through the request path's own ingestion (`Ingestion.store_history`:
the same block split, scaffolding rules, page ids, timestamps, embeddings and manifests), and a consolidation
job queued after every request that stored pages, as a chat request queues one. Page ids hash the content, so
importing the same file again stores nothing. Nothing is sent upstream; only the consolidation jobs may call
the summarizer later, as for any thread.

Messages without a time take the time of the message before them (the first ones that of the first dated
message, or the import's time when none is dated). A conversation ending with messages that no reply
follows keeps them out of memory, as a live turn is: they are counted in `ImportResult.unsealed`.

Export gives a thread's messages back in order from its Original pages (see `gateway.core.original`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core.original import page_messages, thread_messages
from gateway.service.chat_files import Conversation
from gateway.service.consolidator import Consolidator
from gateway.service.ingest import Ingestion
from gateway.service.identity import thread_of

__all__ = ["ImportProgress", "ImportResult", "Importer", "Session", "export_messages", "sessions_of"]


@dataclass(frozen=True)
class Session:
    """One replayed request: the history ``messages[:end]``, sent at ``time``."""

    end: int
    time: datetime


def sessions_of(times: Sequence[datetime | None], default: datetime) -> list[Session]:
    """The requests a conversation is replayed as: one per run of messages sharing a time (see the module)."""
    first = next((t for t in times if t is not None), default)
    filled: list[datetime] = []
    for t in times:
        filled.append(t if t is not None else (filled[-1] if filled else first))
    sessions = [Session(n, filled[n - 1]) for n in range(1, len(filled)) if filled[n] != filled[n - 1]]
    if filled:
        sessions.append(Session(len(filled), filled[-1]))
    return sessions


@dataclass
class ImportProgress:
    """What the progress bar shows; updated after every replayed request."""

    requests_total: int
    requests_done: int = 0
    pages_added: int = 0
    pending_jobs: int = 0


@dataclass
class ImportResult:
    threads: list[ThreadKey] = field(default_factory=list)
    pages_added: int = 0
    unsealed: int = 0  # trailing messages no reply follows: not stored, as a live turn is not


class Importer:
    """Stores conversations through the request path's ingestion and queues their consolidation."""

    def __init__(self, history: Ingestion, consolidator: Consolidator | None) -> None:
        self._history = history
        self._consolidator = consolidator

    def thread_key(self, conversation: Conversation, tenant: str, thread: str | None = None) -> ThreadKey:
        """Where a conversation goes: ``thread``, else its own thread name, else the fingerprint a client
        sending it without a thread header would get (tenant and first user message)."""
        return ThreadKey(tenant, thread_of(thread or conversation.thread, None, tenant, conversation.messages))

    async def run(
        self,
        conversations: Sequence[Conversation],
        tenant: str,
        now: datetime,
        *,
        thread: str | None = None,
        on_progress: Callable[[ImportProgress], Any] | None = None,
    ) -> ImportResult:
        plans = [(c, self.thread_key(c, tenant, thread), sessions_of(c.times, now)) for c in conversations]
        progress = ImportProgress(requests_total=sum(len(sessions) for _, _, sessions in plans))
        result = ImportResult()
        for conversation, key, sessions in plans:
            if key not in result.threads:
                result.threads.append(key)
            tail = 0
            for session in sessions:
                stored = await self._history.store_history(key, conversation.messages[: session.end], session.time)
                tail = len(stored.split.tail)
                if stored.added and self._consolidator is not None:
                    await self._consolidator.pages_added(key)
                progress.requests_done += 1
                progress.pages_added += len(stored.added)
                if on_progress is not None:
                    progress.pending_jobs = await self.pending(result.threads)
                    on_progress(progress)
            result.unsealed += tail
        result.pages_added = progress.pages_added
        return result

    async def pending(self, threads: Sequence[ThreadKey]) -> int:
        """Consolidation jobs of these threads not done yet."""
        if self._consolidator is None:
            return 0
        return sum([await self._consolidator.pending(t) for t in threads])


async def export_messages(store: RedisStore, thread: ThreadKey) -> list[dict[str, Any]]:
    """The thread's conversation as stored, in order (empty for an unknown thread)."""
    pages = [page_messages(content, kept) for _, content, kept in await store.originals(thread)]
    return thread_messages(pages)
