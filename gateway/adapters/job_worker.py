"""The worker: runs jobs from a `JobQueue`, one at a time, renewing its lease while a job runs.

A clean stop removes the worker's consumer from the group when it holds no jobs; a crash
leaves its jobs to be claimed by another worker after the visibility timeout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress

from gateway.adapters.job_queue import Delivery, Handler, Job, JobQueue
from gateway.errors import StoreUnavailable

__all__ = ["Worker"]

log = logging.getLogger("gateway.jobs")

LEASE_KEEPER_STOP_S = 1.0  # how long a job's end waits for its lease renewal to stop once cancelled


class Worker:
    """Runs jobs from a JobQueue, one at a time, with the handler registered for each kind."""

    def __init__(
        self,
        queue: JobQueue,
        handlers: Mapping[str, Handler],
        *,
        name: str | None = None,
        block_ms: int = 1000,
        batch: int = 10,
        depth_log_interval_s: float = 10.0,
    ) -> None:
        self.queue = queue
        self.handlers = dict(handlers)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.block_ms = block_ms
        self.batch = batch
        self._depth_log_interval_s = depth_log_interval_s
        self._claim_from = "0-0"

    async def run_once(self) -> int:
        """Promote due retries, claim stale jobs, read new ones, run them; returns how many ran."""
        queue = self.queue
        promoted = await queue.promote_due(self.batch)
        self._claim_from, deliveries = await queue.claim_stale(self.name, self.batch, self._claim_from)
        if len(deliveries) < self.batch:
            block = None if deliveries or promoted or self.block_ms <= 0 else self.block_ms
            deliveries += await queue.read_new(self.name, self.batch - len(deliveries), block)
        if deliveries:
            async with self._lease([d.entry for d in deliveries]) as held:
                for delivery in deliveries:
                    await self._handle(delivery)
                    held.discard(delivery.entry)
        return len(deliveries)

    async def run(self, stop: asyncio.Event) -> None:
        """Run jobs until `stop` is set; a Redis outage is logged and waited out."""
        log.info("job worker %s started on %s", self.name, self.queue.stream_key)
        loop = asyncio.get_running_loop()
        next_depth_at, last_depth = 0.0, None
        while not stop.is_set():
            try:
                await self.run_once()
                if loop.time() >= next_depth_at:
                    next_depth_at = loop.time() + self._depth_log_interval_s
                    last_depth = await self._log_depth(last_depth)
            except StoreUnavailable as exc:
                log.warning("job worker %s: %s; retrying in 1 s", self.name, exc)
                with suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
        with suppress(StoreUnavailable):
            await self.queue.forget_consumer(self.name)
        log.info("job worker %s stopped", self.name)

    async def _log_depth(self, last: dict[str, int] | None) -> dict[str, int]:
        depth = await self.queue.depth()
        if depth != last:
            log.info("job queue %s: %s", self.queue.stream_key, " ".join(f"{k}={v}" for k, v in depth.items()))
        return depth

    async def _handle(self, delivery: Delivery) -> None:
        queue = self.queue
        try:
            job = delivery.job()
        except (KeyError, ValueError) as exc:
            await self._bury(delivery, None, f"malformed job entry: {exc!r}")
            return
        handler = self.handlers.get(job.kind)
        if handler is None:
            await self._bury(delivery, job, f"no handler for job kind {job.kind!r} on worker {self.name}")
            return
        if job.attempts >= queue.max_attempts:
            await self._bury(delivery, job, f"lost with its worker {delivery.deliveries - 1} times (killed mid-job?)")
            return
        started = time.monotonic()
        try:
            await handler(job)
        except Exception as exc:  # the job boundary: a handler's failure belongs to its job
            await self._fail(delivery, job, f"{type(exc).__name__}: {exc}")
            return
        await queue.complete(delivery)
        log.info(
            "job %s %s (thread %s) done: %.0f ms after enqueue, %.0f ms running",
            job.id, job.kind, job.thread,
            (queue.clock() - job.enqueued_at) * 1000, (time.monotonic() - started) * 1000,
        )

    async def _fail(self, delivery: Delivery, job: Job, error: str) -> None:
        attempts = job.attempts + 1
        if attempts >= self.queue.max_attempts:
            await self._bury(delivery, job, error, attempts)
            return
        delay_ms = self.queue.backoff_ms * 2 ** (attempts - 1)
        await self.queue.retry_later(delivery, attempts, delay_ms, error)
        log.warning("job %s %s failed (attempt %d), retrying in %d ms: %s", job.id, job.kind, attempts, delay_ms, error)

    async def _bury(self, delivery: Delivery, job: Job | None, error: str, attempts: int | None = None) -> None:
        tries = attempts if attempts is not None else (job.attempts if job else 0)
        await self.queue.bury(delivery, tries, error)
        log.warning("job %s moved to dead letters after %d attempts: %s", job.id if job else delivery.entry, tries, error)

    @asynccontextmanager
    async def _lease(self, entries: list[str]) -> AsyncIterator[set[str]]:
        """While the block runs, keep the entries still in the yielded set from being claimed."""
        held = set(entries)
        keeper = asyncio.create_task(self._keep_leased(held))
        try:
            yield held
        finally:
            keeper.cancel()
            # not `await keeper`: a renewal cancelled mid-command can wait on its connection's close for as long as
            # the server keeps it (seen: a SIGTERM'd gateway that never exited), and awaiting it would also swallow
            # this worker's own cancellation
            await asyncio.wait({keeper}, timeout=LEASE_KEEPER_STOP_S)

    async def _keep_leased(self, held: set[str]) -> None:
        interval = self.queue.visibility_timeout_ms / 3000
        while True:
            await asyncio.sleep(interval)
            if held:
                try:
                    await self.queue.extend_lease(self.name, sorted(held))
                except StoreUnavailable as exc:
                    log.warning("job worker %s could not extend its lease: %s", self.name, exc)
