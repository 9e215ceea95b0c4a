"""Another process's CPU time from its CPU-time clock, to the nanosecond."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from bench.cpu_clock import cpu_seconds


def test_a_process_clock_reads_what_the_process_itself_counts() -> None:
    me = psutil.Process()
    before = time.process_time()
    read = cpu_seconds(me)
    after = time.process_time()
    assert before <= read <= after  # the process's own CPU clock, not /proc's ticks (which round down to 10 ms)


def test_a_busy_child_is_read_within_a_tick_of_proc_and_a_gone_one_raises() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass\ntime.sleep(30)"])
    try:
        proc = psutil.Process(child.pid)
        deadline = time.monotonic() + 30
        while cpu_seconds(proc) < 0.2 and time.monotonic() < deadline:
            time.sleep(0.05)
        ticks = proc.cpu_times()
        assert abs(cpu_seconds(proc) - (ticks.user + ticks.system)) < 0.05
    finally:
        child.kill()
        child.wait()
    with pytest.raises(psutil.Error):
        cpu_seconds(proc)
