"""Where a paged request's CPU goes: py-spy on the gateway while it serves one long thread.

Starts the real gateway (embedded Redis) against the fake upstream, ingests a thread of ``--turns`` exchanges
(``bench/request_cpu.py``'s synthetic conversation), then samples the gateway process with py-spy (next to the
venv's Python, else on PATH) while it serves sequential requests (the same history plus a different question each) for
``--seconds``. Prints the share of samples under each of the request path's main functions (inclusive), the
top functions by own samples, and the gateway's CPU per request over the sampled requests. ``--pass-through``
profiles `X-PCP-Mode: off` requests instead, ``--stream`` streamed ones, ``--growing`` a chat's requests: each one
exchange longer than the one before (the question before, answered), so each stores a new page.

Run from the repository root:

    .venv/bin/python -m bench.profile_paged [--turns 600] [--seconds 40] [--rate 100] [--pass-through] [--stream] [--growing] [--raw FILE]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.request_cpu import Bench, _cpu_seconds, history, question, wait_idle  # noqa: E402
from tests.support.fake_upstream import FakeUpstream  # noqa: E402
from tests.support.gateway_process import GatewayProcess, gateway_config  # noqa: E402

IDLE = "EpollSelector.select"  # the event loop waiting: not CPU
# the request path's stages (function names as py-spy reports them), in the order a request runs them
STAGES = (
    "store_history", "_scaffolding", "ingest", "visible_tree", "focus", "open_folded", "_select", "select", "bm25",
    "drop_common_words", "_semantic", "idf_weights", "_shortlist", "_excerpts", "pages", "last_seen",
    "_candidate", "fit_rendered", "measure", "compose", "page_count", "_persist", "complete", "build",
    "count_messages", "embed", "_select_context",
)


def summarize(raw: str, top: int = 25) -> str:
    """Inclusive shares of STAGES and the top functions by own samples, from py-spy's raw (collapsed) output."""
    total = idle = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        if frames and frames[0].startswith("process "):
            frames = frames[1:]
        if frames and frames[0].startswith("thread "):
            frames = frames[1:]
        total += n
        if frames and frames[-1].startswith(IDLE):
            idle += n
            continue
        names = {frame.split(" (")[0].rsplit(".", 1)[-1] for frame in frames}
        for name in names:
            inclusive[name] += n
        if frames:
            leaf = frames[-1]
            own[leaf.split(" (")[0] + " (" + leaf.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"] += n
    total -= idle
    lines = [f"{total} busy samples (shares below are of these; {idle} more waiting in the event loop's select)"]
    lines.append("inclusive share of the request path's stages:")
    for name in STAGES:
        if inclusive[name]:
            lines.append(f"  {name:<20}{100 * inclusive[name] / total:6.1f}%")
    lines.append(f"top {top} functions by own samples:")
    for name, n in own.most_common(top):
        lines.append(f"  {100 * n / total:6.1f}%  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--seconds", type=int, default=40)
    parser.add_argument("--rate", type=int, default=100,
                        help="samples per second (default 100: ~550 busy samples in 40 s at 600 turns, so a "
                             "function's share is good to a few tenths of a millisecond per request)")
    parser.add_argument("--pass-through", action="store_true", help="profile `X-PCP-Mode: off` requests instead of paged ones")
    parser.add_argument("--stream", action="store_true", help="streamed requests (the first token's path included)")
    parser.add_argument("--growing", action="store_true",
                        help="each request one exchange longer than the one before, as a chat sends them (each stores a page)")
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw output here (each stack under its thread's name)")
    parser.add_argument("--summarize", type=Path, help="only summarize this raw py-spy output")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize.read_text()))
        return 0
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        found = shutil.which("py-spy")
        if found is None:
            parser.error("py-spy is neither next to this Python nor on PATH (pip install py-spy)")
        spy = Path(found)
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pcp-profile-")))
        fake = stack.enter_context(FakeUpstream())
        config = gateway_config(fake.url, workdir / "data", embedded=True, pcp={"enabled": True},
                                server={"max_body_bytes": 64 * 1024 * 1024})
        gateway = GatewayProcess(config=config, workdir=workdir)
        stack.callback(gateway.stop)
        gateway.start(timeout=300)
        bench = Bench(gateway, fake, 1, 3)
        wait_idle(bench.proc)
        base = history(args.turns)
        headers = {"X-PCP-Thread": f"profile-{args.turns}"}
        if args.pass_through:
            headers["X-PCP-Mode"] = "off"
        for _ in range(4):  # the first ingests the thread
            bench.counter += 1
            bench._one(base + [question(bench.counter)], headers, args.stream)
        fake.reset()
        wait_idle(bench.proc)
        raw = Path(args.raw or workdir / "profile.raw")
        done = threading.Event()
        served = [0]

        replies = [m["content"] for m in history(args.turns + 2000)[2 + 2 * args.turns :: 2]]

        def drive() -> None:
            while not done.is_set():
                bench.counter += 1
                asked = question(bench.counter)
                bench._one(base + [asked], headers, args.stream)
                if args.growing:  # the next request carries this one's question, answered
                    base.extend([asked, {"role": "assistant", "content": replies[served[0] % len(replies)]}])
                served[0] += 1
                fake.reset()

        cpu0 = _cpu_seconds(bench.proc)
        driver = threading.Thread(target=drive, daemon=True)
        driver.start()
        subprocess.run([str(spy), "record", "-p", str(bench.proc.pid), "-d", str(args.seconds), "-f", "raw", "-o", str(raw),
                        "--nonblocking", "--rate", str(args.rate), "--threads"], check=True, capture_output=True, timeout=args.seconds + 120)
        done.set()
        driver.join(timeout=120)
        cpu1 = _cpu_seconds(bench.proc)
        kind = ("pass-through" if args.pass_through else "paged") + (", streamed" if args.stream else "") + (", growing" if args.growing else "")
        print(f"{args.turns} turns, {kind}: {served[0]} requests sampled, gateway CPU {1000 * (cpu1 - cpu0) / max(served[0], 1):.1f} ms/request "
              f"(py-spy's own overhead on the process included)")
        print(summarize(raw.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
