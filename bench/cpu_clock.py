"""Another process's CPU time to the nanosecond.

psutil's ``cpu_times`` reads ``/proc/<pid>/stat``, whose user and system times come in the kernel's clock ticks
(10 ms here): a paged request of 30 ms reads as 20, 30 or 40, so a p50 over requests of one size moves by a tick from
run to run and a ratio of two such p50s by a third. Linux also gives every process a CPU-time clock
(``clock_getcpuclockid``: the scheduler's own sum of the time each of its threads ran, exited ones included), which
``clock_gettime`` reads in nanoseconds for any process of the same user."""

from __future__ import annotations

import time

import psutil

__all__ = ["cpu_seconds"]

_CPUCLOCK_SCHED = 2  # the kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED): (~pid << 3) | 2


def cpu_seconds(proc: psutil.Process) -> float:
    """Seconds of CPU ``proc`` has used (user and system, all its threads), from its CPU-time clock; from psutil's
    ticks where that clock cannot be read (another system, another user). Raises `psutil.Error` for a process that
    is gone."""
    try:
        return time.clock_gettime(((~proc.pid) << 3) | _CPUCLOCK_SCHED)
    except (OSError, AttributeError, OverflowError):
        t = proc.cpu_times()
        return float(t.user + t.system)
