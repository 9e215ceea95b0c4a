"""The job queue against a real Redis: delivery, dedupe, retries, dead letters, crash recovery."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gateway.adapters.job_queue import Job, JobQueue
from gateway.adapters.job_worker import Worker
from gateway.errors import StoreUnavailable
from tests.support.worker_process import effects_key, record_effect, result_key, started_key

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def prefix() -> str:
    return f"jobtest-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def queue(client: aioredis.Redis, prefix: str, clock: Clock) -> JobQueue:
    jobs = JobQueue(client, prefix=prefix, visibility_timeout_ms=200, max_attempts=3, backoff_ms=1000, clock=clock)
    await jobs.ensure_group()
    return jobs


async def eventually(step: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await step():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_a_job_is_handled_acked_and_uncounted(queue: JobQueue, client: aioredis.Redis, prefix: str) -> None:
    seen: list[Job] = []

    async def handle(job: Job) -> None:
        seen.append(job)

    job_id = await queue.enqueue("work", "t:1", {"page": "p1", "text": "naïve 🙂"})
    assert job_id is not None
    assert await queue.pending_for("t:1") == 1
    assert (await queue.depth())["stream"] == 1

    assert await Worker(queue, {"work": handle}, block_ms=10).run_once() == 1

    assert [(j.id, j.kind, j.thread, j.payload, j.attempts) for j in seen] == [
        (job_id, "work", "t:1", {"page": "p1", "text": "naïve 🙂"}, 0)
    ]
    assert await queue.pending_for("t:1") == 0
    assert await queue.depth() == {"stream": 0, "pending": 0, "delayed": 0, "dead": 0}
    assert await client.hlen(f"{prefix}:{{jobs}}:pending") == 0


async def test_dedupe_holds_until_the_job_finishes(queue: JobQueue) -> None:
    async def handle(job: Job) -> None:
        pass

    first = await queue.enqueue("consolidate", "t:1", {}, dedupe="t:1")
    assert first is not None
    assert await queue.enqueue("consolidate", "t:1", {}, dedupe="t:1") is None
    assert await queue.enqueue("consolidate", "t:2", {}, dedupe="t:2") is not None
    assert await queue.enqueue("other", "t:1", {}, dedupe="t:1") is not None
    assert await queue.pending_for("t:1") == 2

    assert await Worker(queue, {"consolidate": handle, "other": handle}, block_ms=10).run_once() == 3

    assert await queue.pending_for("t:1") == 0
    again = await queue.enqueue("consolidate", "t:1", {}, dedupe="t:1")
    assert again is not None and again != first


async def test_a_failing_job_backs_off_then_dies_with_its_error(queue: JobQueue, clock: Clock) -> None:
    calls: list[tuple[str, int, float]] = []

    async def boom(job: Job) -> None:
        calls.append((job.id, job.attempts, clock.now))
        raise RuntimeError(f"boom {job.attempts}")

    worker = Worker(queue, {"work": boom}, block_ms=10)
    payload = {"n": 1, "text": 'a "quoted" naïve 🙂\n'}  # survives the JSON round trip through Lua
    job_id = await queue.enqueue("work", "t:1", payload, dedupe="d")
    assert await worker.run_once() == 1
    assert await queue.depth() == {"stream": 0, "pending": 0, "delayed": 1, "dead": 0}
    assert await queue.pending_for("t:1") == 1
    assert await queue.enqueue("work", "t:1", payload, dedupe="d") is None  # a retry is still unfinished

    for due in (1_001.0, 1_003.0):  # backoff 1 s, then 2 s
        clock.now = due - 0.01
        assert await worker.run_once() == 0
        clock.now = due
        assert await worker.run_once() == 1

    assert calls == [(job_id, 0, 1_000.0), (job_id, 1, 1_001.0), (job_id, 2, 1_003.0)]
    assert await queue.depth() == {"stream": 0, "pending": 0, "delayed": 0, "dead": 1}
    assert await queue.pending_for("t:1") == 0
    [dead] = await queue.dead_letters()
    assert (dead["job"], dead["kind"], dead["thread"], dead["payload"]) == (job_id, "work", "t:1", payload)
    assert (dead["attempts"], dead["error"], dead["failed_at"]) == (3, "RuntimeError: boom 2", 1_003.0)
    assert await queue.enqueue("work", "t:1", payload, dedupe="d") is not None


async def test_a_job_that_fails_once_then_succeeds_is_done(queue: JobQueue, clock: Clock) -> None:
    attempts: list[int] = []

    async def flaky(job: Job) -> None:
        attempts.append(job.attempts)
        if job.attempts == 0:
            raise ConnectionError("upstream hiccup")

    worker = Worker(queue, {"work": flaky}, block_ms=10)
    await queue.enqueue("work", "t:1", {})
    assert await worker.run_once() == 1
    clock.now += 1
    assert await worker.run_once() == 1
    assert attempts == [0, 1]
    assert await queue.depth() == {"stream": 0, "pending": 0, "delayed": 0, "dead": 0}
    assert await queue.pending_for("t:1") == 0


async def test_a_job_is_settled_once_however_often_it_is_acked(queue: JobQueue) -> None:
    await queue.enqueue("work", "t:1", {})
    [delivery] = await queue.read_new("A", 10, None)
    assert await queue.complete(delivery) is True
    assert await queue.complete(delivery) is False  # e.g. a second worker that had claimed it
    assert await queue.retry_later(delivery, 1, 1000, "late failure") is False
    assert await queue.bury(delivery, 1, "late failure") is False
    assert await queue.pending_for("t:1") == 0
    assert await queue.depth() == {"stream": 0, "pending": 0, "delayed": 0, "dead": 0}


async def test_two_workers_share_the_jobs_and_run_each_once(queue: JobQueue) -> None:
    runs: list[str] = []

    async def handle(job: Job) -> None:
        runs.append(job.id)
        await asyncio.sleep(0)

    ids = [await queue.enqueue("work", f"t:{n % 3}", {"n": n}) for n in range(30)]
    stop = asyncio.Event()
    workers = [Worker(queue, {"work": handle}, name=name, block_ms=20, batch=4) for name in ("A", "B")]
    running = [asyncio.create_task(worker.run(stop)) for worker in workers]
    for thread in ("t:0", "t:1", "t:2"):
        await eventually(lambda: _none_pending(queue, thread))
    stop.set()
    await asyncio.wait_for(asyncio.gather(*running), 5)
    assert sorted(runs) == sorted(i for i in ids if i is not None) and len(runs) == 30
    assert await queue.depth() == {"stream": 0, "pending": 0, "delayed": 0, "dead": 0}


async def test_a_kind_without_a_handler_is_dead_lettered(queue: JobQueue) -> None:
    job_id = await queue.enqueue("mystery", "t:1", {})
    assert await Worker(queue, {"work": _never}, name="w1", block_ms=10).run_once() == 1
    [dead] = await queue.dead_letters()
    assert dead["job"] == job_id
    assert dead["error"] == "no handler for job kind 'mystery' on worker w1"
    assert await queue.pending_for("t:1") == 0


async def _never(job: Job) -> None:
    raise AssertionError("not expected to run")


async def test_a_dead_workers_job_is_claimed_and_done_once(queue: JobQueue, client: aioredis.Redis, prefix: str) -> None:
    started, never = asyncio.Event(), asyncio.Event()

    async def hang(job: Job) -> None:
        started.set()
        await never.wait()

    async def finish(job: Job) -> None:
        await record_effect(client, prefix, job, "B")

    job_id = await queue.enqueue("work", "t:1", {})
    assert job_id is not None
    dying = asyncio.create_task(Worker(queue, {"work": hang}, name="A", block_ms=10).run_once())
    await asyncio.wait_for(started.wait(), 5)
    dying.cancel()
    with pytest.raises(asyncio.CancelledError):
        await dying
    assert await queue.pending_for("t:1") == 1

    rescuer = Worker(queue, {"work": finish}, name="B", block_ms=10)
    assert await rescuer.run_once() == 0  # not idle long enough yet
    await eventually(lambda: _ran(rescuer))

    job = Job(job_id, "work", "t:1", {}, 1, 0.0)
    await finish(job)  # a second delivery would change nothing
    assert await client.get(result_key(prefix, job_id)) == "B"
    assert await client.get(effects_key(prefix)) == "1"
    assert await queue.pending_for("t:1") == 0
    assert await queue.depth() == {"stream": 0, "pending": 0, "delayed": 0, "dead": 0}


async def _ran(worker: Worker) -> bool:
    return await worker.run_once() > 0


async def test_a_live_worker_keeps_its_lease_past_the_visibility_timeout(queue: JobQueue) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    async def slow(job: Job) -> None:
        runs.append("A")
        started.set()
        await release.wait()

    await queue.enqueue("work", "t:1", {})
    holder = asyncio.create_task(Worker(queue, {"work": slow}, name="A", block_ms=10).run_once())
    await asyncio.wait_for(started.wait(), 5)
    other = Worker(queue, {"work": _never}, name="B", block_ms=50)
    deadline = time.monotonic() + 0.6  # three visibility timeouts
    while time.monotonic() < deadline:
        assert await other.run_once() == 0
    release.set()
    assert await holder == 1
    assert runs == ["A"]
    assert await queue.pending_for("t:1") == 0


async def test_a_job_that_keeps_killing_its_workers_is_dead_lettered(queue: JobQueue) -> None:
    started = asyncio.Event()

    async def hang(job: Job) -> None:
        started.set()
        await asyncio.Event().wait()

    await queue.enqueue("work", "t:1", {})
    for name in ("A", "B", "C"):  # max_attempts is 3: three lost deliveries
        started.clear()
        worker = Worker(queue, {"work": hang}, name=name, block_ms=10)
        dying = asyncio.create_task(_run_until_started(worker))
        await asyncio.wait_for(started.wait(), 5)
        dying.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dying

    last = Worker(queue, {"work": _never}, name="D", block_ms=10)
    await eventually(lambda: _ran(last))
    [dead] = await queue.dead_letters()
    assert dead["error"] == "lost with its worker 3 times (killed mid-job?)"
    assert await queue.pending_for("t:1") == 0


async def _run_until_started(worker: Worker) -> None:
    while True:
        await worker.run_once()


async def test_a_sigkilled_worker_process_job_is_completed_once(
    queue: JobQueue, client: aioredis.Redis, prefix: str, redis_url: str
) -> None:
    job_id = await queue.enqueue("work", "t:1", {"page": "p1"})
    assert job_id is not None
    command = [sys.executable, "-m", "tests.support.worker_process", redis_url, prefix, "200"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        await eventually(lambda: _started(client, prefix, process), timeout=20)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
        assert process.stderr is not None
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    assert await client.get(started_key(prefix)) == job_id
    assert await queue.pending_for("t:1") == 1

    async def finish(job: Job) -> None:
        await record_effect(client, prefix, job, "B")

    await eventually(lambda: _ran(Worker(queue, {"work": finish}, name="B", block_ms=10)))
    assert await client.get(result_key(prefix, job_id)) == "B"
    assert await client.get(effects_key(prefix)) == "1"
    assert await queue.pending_for("t:1") == 0
    assert await queue.depth() == {"stream": 0, "pending": 0, "delayed": 0, "dead": 0}


async def _started(client: aioredis.Redis, prefix: str, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        assert process.stderr is not None
        raise AssertionError(f"worker process exited: {process.stderr.read().decode()}")
    return bool(await client.exists(started_key(prefix)))


async def test_run_works_until_stopped_and_logs(queue: JobQueue, caplog: pytest.LogCaptureFixture) -> None:
    async def handle(job: Job) -> None:
        pass

    caplog.set_level(logging.INFO, logger="gateway.jobs")
    stop = asyncio.Event()
    running = asyncio.create_task(Worker(queue, {"work": handle}, name="W", block_ms=20).run(stop))
    await queue.enqueue("work", "t:1", {})
    await eventually(lambda: _none_pending(queue, "t:1"))
    stop.set()
    await asyncio.wait_for(running, 5)
    messages = [record.getMessage() for record in caplog.records]
    assert any(" done: " in message and "ms after enqueue" in message for message in messages)
    assert any(message.startswith("job queue ") and "stream=" in message for message in messages)


async def _none_pending(queue: JobQueue, thread: str) -> bool:
    return await queue.pending_for(thread) == 0


async def test_an_unreachable_redis_is_store_unavailable(tmp_path: Path) -> None:
    no_retry = Retry(NoBackoff(), 0)
    client = aioredis.Redis(unix_socket_path=str(tmp_path / "nothing.sock"), decode_responses=True, retry=no_retry)
    jobs = JobQueue(client, prefix="x")
    try:
        with pytest.raises(StoreUnavailable):
            await jobs.enqueue("work", "t:1", {})
        with pytest.raises(StoreUnavailable):
            await jobs.pending_for("t:1")
    finally:
        await client.aclose()
