"""Background work of one process: job workers and the schedule that feeds them.

`serve` runs `jobs.workers` workers in-process (default 1); `pcp-gateway worker` runs the
same thing on its own, so more processes share the stream. Every process also runs the
schedule (idle flushes each minute, merges every `pcp.merge_interval_hours`); the queue's
dedupe keys keep several schedulers from queueing the same work twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from gateway.adapters.job_queue import JobQueue
from gateway.adapters.job_worker import Worker
from gateway.errors import StoreUnavailable
from gateway.service.consolidator import Consolidator

__all__ = ["Background"]

log = logging.getLogger("gateway.background")

IDLE_SCAN_SECONDS = 60.0


class Background:
    """Starts and stops the workers and the scheduler of one process."""

    def __init__(
        self, queue: JobQueue, consolidator: Consolidator, *, workers: int, merge_interval_hours: float, shutdown_grace_s: float = 10.0
    ) -> None:
        self._queue = queue
        self._grace = shutdown_grace_s
        self._consolidator = consolidator
        self._workers = workers
        self._merge_interval = merge_interval_hours * 3600
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await self._queue.ensure_group()
        for _ in range(self._workers):
            worker = Worker(self._queue, self._consolidator.handlers)
            self._tasks.append(asyncio.create_task(worker.run(self._stop), name=f"worker-{worker.name}"))
        self._tasks.append(asyncio.create_task(self._schedule(), name="scheduler"))
        for task in self._tasks:
            task.add_done_callback(_report)

    async def _schedule(self) -> None:
        # it wakes for whichever is due first, so a merge interval shorter than the idle scan's is kept too
        loop = asyncio.get_running_loop()
        next_scan, next_merge = loop.time(), loop.time() + self._merge_interval
        while not self._stop.is_set():
            now = loop.time()
            wake: float | None = None
            try:
                if now >= next_scan:
                    await self._consolidator.schedule_idle()
                    next_scan = now + IDLE_SCAN_SECONDS
                if now >= next_merge:
                    await self._consolidator.schedule_merges()
                    next_merge += self._merge_interval * (1 + (now - next_merge) // self._merge_interval)
            except StoreUnavailable as exc:
                log.warning("scheduler: %s", exc.message)
                wake = now + IDLE_SCAN_SECONDS  # what was due is tried again at the next scan
            wake = min(next_scan, next_merge) if wake is None else wake
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), max(0.0, wake - loop.time()))

    async def stop(self) -> None:
        """Let the workers finish the job in hand within the grace, then cancel them: a job cut short stays
        pending under its worker's name, and another worker claims it after the visibility timeout."""
        self._stop.set()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=self._grace)
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        self._tasks.clear()


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background task %s died", task.get_name(), exc_info=task.exception())
