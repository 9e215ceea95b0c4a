"""The consolidator: background jobs that turn a thread's original pages into consolidated ones (DESIGN §5).

Jobs (all idempotent; the queue delivers at least once):
- `consolidate` (after a request stored new pages): manifests from `pcp.summarizer_model` for the new
  pages, then segmentation (drift judged with a lookahead, relay, split; gateway.core.segmentation) over
  their content embeddings; each flush is frozen into a Consolidated page and committed together with the
  segmentation state, pages still pending included.
- `flush` (`/save`, or a buffer idle for `pcp.idle_flush_minutes`): drain, then flush the buffer.
- `merge` (every `pcp.merge_interval_hours`): adjacent same-topic containers that have not been used
  for `pcp.merge_staleness_hours` are merged into a higher container.
After a job that made a container, runs of `CHAPTER` consecutive top-level containers of one level are merged into
a chapter (`chapters`): a thread's top level stays a few containers per power of `CHAPTER` topics, which is what
the map of a context offers (gateway.service.view_choice).
Without a summarizer, or when it fails, the extractive fallbacks of the core are used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import TypeVar

import numpy as np

from gateway.adapters.consolidation_store import ConsolidationStore
from gateway.adapters.embedder import Embedder
from gateway.adapters.embedding_models import DEFAULT_MODEL
from gateway.adapters.job_queue import Job, JobQueue
from gateway.adapters.manifests import Manifest, NewPage
from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.adapters.upstream import Upstream
from gateway.config import PcpSettings
from gateway.core import Page, TokenCounter
from gateway.core.consolidation import (
    CHAPTER,
    MergeCandidate,
    chapter_digest,
    extractive_consolidation,
    freeze,
    manifest_prompt,
    merge_runs,
    next_chapter,
    parse_manifest_answer,
    parse_summarizer_answer,
    summarizer_prompt,
)
from gateway.core.extract import extract_clusters
from gateway.core.labels import label_shapes, without_labels
from gateway.core.lexical import is_low_information, term_counts
from gateway.core.lru import Lru
from gateway.core.segmentation import Buffer, Flush, FlushReason, SegmentationPolicy, SegmentBlock, admit, flush_if_idle, flush_now, with_head_summary
from gateway.errors import GatewayError
from gateway.service.reembedding import Reembedding

__all__ = ["Consolidator"]

CHECKED_THREADS = 10_000  # threads whose vectors a process knows to be its model's

log = logging.getLogger("gateway.consolidator")

Clock = Callable[[], datetime]
T = TypeVar("T")


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Consolidator:
    """Runs the consolidation jobs of every thread; `handlers` is what a Worker registers."""

    def __init__(
        self,
        store: RedisStore,
        queue: JobQueue,
        upstream: Upstream,
        embedder: Embedder | None,
        settings: PcpSettings,
        clock: Clock = _utcnow,
    ) -> None:
        self._store = store
        self._model = embedder.model if embedder is not None else DEFAULT_MODEL
        self._cstore = ConsolidationStore(store, self._model)
        self._reembedding = Reembedding(store, embedder)
        self._current: Lru[str, bool] = Lru(CHECKED_THREADS)  # threads whose vectors are known to be the model's
        self._queue = queue
        self._upstream = upstream
        self._embedder = embedder
        self._settings = settings
        self._clock = clock
        self._count = TokenCounter().count
        self.policy = SegmentationPolicy(
            drift_margin=settings.drift_margin,
            drift_overlap=settings.drift_overlap,
            lookahead=settings.drift_lookahead,
            max_processing_tokens=settings.max_processing_tokens,
            container_tokens=settings.container_tokens,
            idle=timedelta(minutes=settings.idle_flush_minutes),
        )

    @property
    def handlers(self) -> dict[str, Callable[[Job], Awaitable[None]]]:
        return {"consolidate": self._on_consolidate, "flush": self._on_flush, "merge": self._on_merge}

    # -- enqueueing ---------------------------------------------------------------------------------------

    async def pages_added(self, thread: ThreadKey) -> None:
        await self._queue.enqueue("consolidate", thread.scope, {})  # no dedupe: a run already going may have read the log

    async def vectors_checked(self, thread: ThreadKey) -> None:
        """Queue the thread's consolidation (which re-embeds first) when another embedding model made its vectors:
        a request that adds no page queues nothing else. Read once per thread and process while they are current."""
        if self._embedder is None or self._current.get(thread.scope):
            return
        if await self._store.vectors_model(thread) == self._model:
            self._current.put(thread.scope, True)
            return
        await self._queue.enqueue("consolidate", thread.scope, {}, dedupe=f"reembed:{thread.scope}")

    async def flush_requested(self, thread: ThreadKey, reason: FlushReason = FlushReason.SAVE) -> None:
        await self._queue.enqueue("flush", thread.scope, {"reason": reason.value})

    async def merge_requested(self, thread: ThreadKey) -> None:
        await self._queue.enqueue("merge", thread.scope, {}, dedupe=f"merge:{thread.scope}")

    async def forget(self, thread: ThreadKey) -> int:
        """Drop the thread's jobs (queued, running, retrying, dead) and its schedule's dedupe keys."""
        dedupes = [("merge", f"merge:{thread.scope}"), ("flush", f"idle:{thread.scope}")]
        return await self._queue.forget(thread.scope, dedupes)

    async def pending(self, thread: ThreadKey) -> int:
        return await self._queue.pending_for(thread.scope)

    async def schedule_idle(self) -> int:
        """Queue a flush for every thread quiet for longer than the idle limit; returns how many."""
        quiet = (self._clock() - self.policy.idle).timestamp()
        threads = await self._cstore.threads(quiet_since=quiet)
        for thread in threads:
            await self._queue.enqueue("flush", thread.scope, {"reason": FlushReason.IDLE.value}, dedupe=f"idle:{thread.scope}")
        return len(threads)

    async def schedule_merges(self) -> int:
        threads = await self._cstore.threads()
        for thread in threads:
            await self.merge_requested(thread)
        return len(threads)

    # -- jobs ---------------------------------------------------------------------------------------------

    async def _on_consolidate(self, job: Job) -> None:
        await self.consolidate(ThreadKey.from_scope(job.thread))

    async def _on_flush(self, job: Job) -> None:
        reason = FlushReason(job.payload.get("reason", FlushReason.SAVE.value))
        await self.flush(ThreadKey.from_scope(job.thread), reason)

    async def _on_merge(self, job: Job) -> None:
        await self.merge(ThreadKey.from_scope(job.thread))

    async def consolidate(self, thread: ThreadKey) -> None:
        """Feed every page stored since the last run through segmentation, committing at each flush (the thread's
        vectors that another embedding model made are made again first); then the chapters, if it froze a container."""
        if await self._segment(thread):
            await self.chapters(thread)

    async def _segment(self, thread: ThreadKey) -> bool:
        """`consolidate`'s segmentation: whether it froze a container."""
        await self._reembedding.ensure(thread)
        froze = False
        while True:
            record = await self._cstore.segment(thread)
            ids = await self._cstore.log_since(thread, record.cursor)
            if not ids:
                return froze
            found = await self._store.manifests(thread, ids)
            manifests = await self._summarize(thread, [found[i] for i in ids if i in found])
            blocks = {b.page_id: b for b in await self._blocks(thread, [manifests[i] for i in ids if i in manifests])}
            committed, buffer = record.cursor, record.buffer
            for position, page_id in enumerate(ids, start=record.cursor + 1):
                if page_id not in blocks:
                    continue  # pragma: no cover - the log and the manifests are written by one script
                buffer, flush = admit(buffer, blocks[page_id], self.policy)
                if flush is not None:
                    buffer, ok = await self._freeze_and_commit(thread, committed, position, flush, buffer)
                    if not ok:
                        return froze  # another worker got here first: its commit stands
                    froze, committed = True, position
            if not await self._cstore.commit(thread, committed, record.cursor + len(ids), buffer):
                return froze

    async def flush(self, thread: ThreadKey, reason: FlushReason) -> None:
        """Drain what is new, then flush the buffer (now for /save; if quiet long enough for idle); then the chapters,
        once, if either froze a container."""
        froze = await self._segment(thread)
        record = await self._cstore.segment(thread)
        if reason is FlushReason.IDLE:
            buffer, flush = flush_if_idle(record.buffer, self._clock(), self.policy)
        else:
            buffer, flush = flush_now(record.buffer, reason)
        if flush is not None:
            await self._freeze_and_commit(thread, record.cursor, record.cursor, flush, buffer)
            froze = True
        if froze:
            await self.chapters(thread)

    async def merge(self, thread: ThreadKey) -> int:
        """Merge stale adjacent same-topic containers; returns how many higher containers were made."""
        tops = await self._cstore.top_level_consolidated(thread)
        if len(tops) < 2:
            return 0
        seen = await self._store.last_seen(thread, [m.page.id for m in tops])
        candidates = [
            MergeCandidate(m.page.id, m.page.topic_id, m.page.timestamp, max(m.page.timestamp, seen.get(m.page.id, m.page.timestamp)))
            for m in tops
        ]
        runs = merge_runs(candidates, self._clock(), timedelta(hours=self._settings.merge_staleness_hours))
        made = 0
        for run in runs:
            children = list((await self._store.pages(thread, run)).values())
            children.sort(key=lambda p: (p.timestamp, p.id))
            container = await self._container(thread, children, None, children[0].topic_id)
            if await self._cstore.merge(thread, container):
                made += 1
                log.info("merged %d containers of %s into %s", len(children), thread.scope, container.page.id)
        if made:
            await self.chapters(thread)
        return made

    async def chapters(self, thread: ThreadKey) -> int:
        """Merge each run of CHAPTER consecutive top-level containers of one level into a chapter one level up
        (`next_chapter`: the oldest first, a new chapter joining the runs of its level), until none is left; returns
        how many chapters were made. A chapter's content is its children's table of contents (`chapter_digest`)."""
        manifests, parents = await self._cstore.tree(thread)
        pages = {m.page.id: m.page for m in manifests}
        levels: dict[str, int] = {}

        def level(page: str) -> int:
            if page not in levels:
                inner = [kid for kid in pages[page].source_ids if kid in pages and pages[kid].source_ids]
                levels[page] = 1 + max(map(level, inner)) if inner else 0
            return levels[page]

        top = sorted((p for p in pages.values() if p.source_ids and p.id not in parents), key=lambda p: (p.timestamp, p.id))
        made = 0
        while (start := next_chapter([level(p.id) for p in top])) is not None:
            children = top[start : start + CHAPTER]
            content, summary, clusters = chapter_digest(children)
            page = freeze(children, content=content, summary=summary, count=self._count, topic_id=None, clusters=clusters)
            if not await self._cstore.merge(thread, await self._stored(thread, page, children)):
                break  # another worker got here first
            pages[page.id], levels[page.id] = page, level(children[0].id) + 1
            top[start : start + CHAPTER] = [page]
            made += 1
            log.info("gathered %d containers of %s into chapter %s", len(children), thread.scope, page.id)
        return made

    # -- pieces -------------------------------------------------------------------------------------------

    async def _freeze_and_commit(
        self, thread: ThreadKey, expected: int, cursor: int, flush: Flush, buffer: Buffer
    ) -> tuple[Buffer, bool]:
        """Freeze a flushed run into a container and commit it with the state that follows it."""
        children = await self._store.pages(thread, flush.page_ids)
        ordered = [children[i] for i in flush.page_ids if i in children]
        if len(ordered) < 2 and not flush.head_summary:
            # a container of one page adds a level and hides nothing: the page stays top-level as it is
            return buffer, await self._cstore.commit(thread, expected, cursor, buffer)
        container = await self._container(thread, ordered, flush.head_summary, flush.topic_id)
        if flush.carry:  # relay: the running summary heads the next buffer
            buffer = with_head_summary(buffer, container.page.summary, self._count(container.page.summary))
        ok = await self._cstore.commit(thread, expected, cursor, buffer, container)
        if ok:
            log.info("froze %d pages of %s into %s (%s)", len(ordered), thread.scope, container.page.id, flush.reason.value)
        return buffer, ok

    async def _container(self, thread: ThreadKey, children: Sequence[Page], head: str | None, topic: str | None) -> NewPage:
        content, summary = extractive_consolidation(children, head)
        answer = await self._ask(summarizer_prompt(children, head), parse_summarizer_answer)
        if answer is not None:
            content, summary, clusters = answer.content, answer.summary, answer.clusters
        else:  # its keywords without the line labels its lines open with: a speaker's name is on every line
            clusters = extract_clusters(without_labels(content, label_shapes(content.split("\n"))))
        page = freeze(children, content=content, summary=summary, count=self._count, topic_id=topic, clusters=clusters)
        return await self._stored(thread, page, children)

    async def _stored(self, thread: ThreadKey, page: Page, children: Sequence[Page]) -> NewPage:
        """A container as it is stored: its vector the mean of its children's, its terms its content's."""
        vectors = await self._cstore.child_vectors(thread, [c.id for c in children])
        vector = None
        if vectors:
            mean = np.mean(np.stack(vectors), axis=0)
            vector = (mean / (np.linalg.norm(mean) or 1.0)).astype(np.float32)
        # matched without the line labels its children's lines open with (gateway.core.labels), as they are
        matched = without_labels(page.content, label_shapes(page.content.split("\n")))
        return NewPage.of(page, self._count, term_counts(matched), vector, model=self._model)

    async def _ask(self, messages: list[dict[str, str]], parse: Callable[[str], T | None]) -> T | None:
        model = self._settings.summarizer_model
        if model is None:
            return None
        try:
            async with asyncio.timeout(self._settings.summarizer_timeout_ms / 1000):
                body = await self._upstream.complete(model, {"messages": messages, "temperature": 0})
        except (TimeoutError, GatewayError) as exc:
            log.warning("summarizer %s failed (%s); extractive fallback used", model, getattr(exc, "message", "timeout"))
            return None
        choices = body.get("choices") or [{}]
        text = (choices[0].get("message") or {}).get("content")
        answer = parse(text) if isinstance(text, str) else None
        if answer is None:
            log.warning("summarizer %s gave an unusable answer; extractive fallback used", model)
        return answer

    async def _summarize(self, thread: ThreadKey, manifests: Sequence[Manifest]) -> dict[str, Manifest]:
        """Manifests from the summarizer for pages that still have the extractive one."""
        result = {m.page.id: m for m in manifests}
        if self._settings.summarizer_model is None:
            return result
        updated: list[NewPage] = []
        contents = await self._store.pages(thread, [m.page.id for m in manifests])  # one round trip for all
        for manifest in manifests:
            full = contents.get(manifest.page.id)
            if full is None:
                continue
            answer = await self._ask(manifest_prompt(full), parse_manifest_answer)
            if answer is None:
                continue
            new = NewPage.of(full.with_manifest(answer.summary, answer.clusters), self._count, manifest.terms, None, manifest.anchor,
                             called=manifest.called)
            updated.append(new)
            result[full.id] = new.manifest()
        await self._cstore.update_manifests(thread, updated)
        return result

    async def _blocks(self, thread: ThreadKey, manifests: Sequence[Manifest]) -> list[SegmentBlock]:
        """Segmentation's view of the pages: whether the user message is content-free, and the exchange's vector.

        The vector is the page's content embedding stored at ingestion (the user message with its reply: a short
        message says little about its topic on its own); a page stored without one (embeddings were off) is
        embedded now.
        """
        vectors: dict[str, tuple[float, ...]] = {}
        if self._embedder is not None:
            stored = await self._store.vectors(thread, [m.page.id for m in manifests], model=self._model)
            vectors = {page: tuple(float(x) for x in vector) for page, vector in stored.items()}
            missing = [m.page for m in manifests if m.page.id not in vectors]
            if missing:
                contents = await self._store.pages(thread, [p.id for p in missing])
                texts = [contents[p.id].content if p.id in contents else p.summary for p in missing]
                fresh = await self._embedder.embed(texts)
                vectors.update({p.id: tuple(float(x) for x in v) for p, v in zip(missing, fresh)})
        return [
            SegmentBlock(m.page.id, m.page.tokens, is_low_information(m.anchor), vectors.get(m.page.id, ()), m.page.timestamp)
            for m in manifests
        ]
