"""A job worker in a process of its own, for the crash test.

`python -m tests.support.worker_process URL PREFIX VISIBILITY_MS` runs a Worker whose
`work` handler marks `<prefix>:started` with the job id and then sleeps for a minute
before recording its effect, so a test can SIGKILL it mid-job.
"""

from __future__ import annotations

import asyncio
import sys

import redis.asyncio as aioredis

from gateway.adapters.job_queue import Job, JobQueue
from gateway.adapters.job_worker import Worker

__all__ = ["record_effect", "started_key", "result_key", "effects_key"]


def started_key(prefix: str) -> str:
    return f"{prefix}:started"


def result_key(prefix: str, job: str) -> str:
    return f"{prefix}:result:{job}"


def effects_key(prefix: str) -> str:
    return f"{prefix}:effects"


async def record_effect(client: aioredis.Redis, prefix: str, job: Job, who: str) -> None:
    """The job's effect, idempotent: the result is written once per job id, the counter bumped with it."""
    if await client.set(result_key(prefix, job.id), who, nx=True):
        await client.incr(effects_key(prefix))


async def _main(url: str, prefix: str, visibility_ms: int) -> None:
    client = aioredis.Redis.from_url(url, decode_responses=True)
    queue = JobQueue(client, prefix=prefix, visibility_timeout_ms=visibility_ms)

    async def slow(job: Job) -> None:
        await client.set(started_key(prefix), job.id)
        await asyncio.sleep(60)
        await record_effect(client, prefix, job, "doomed")

    await queue.ensure_group()
    await Worker(queue, {"work": slow}, name="doomed", block_ms=100).run(asyncio.Event())


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
