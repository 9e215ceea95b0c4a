"""CPU of a paged request in-process, by thread length, with cProfile: for work on what the request path does per
request, without a gateway process, HTTP or a fresh ingest on every try.

The thread (``bench/request_cpu.py``'s synthetic conversation of ``--turns`` exchanges) is stored once in the Redis
that ``--redis`` names, under a key prefix of its own (``pcpprof-<turns>``), with its consolidation run to the end;
later runs with the same ``--turns`` find it there and only ask. Each measured request is parsed from its JSON body
and served by the real `ChatService` (the scripted fake upstream on loopback answers); its CPU is this process's
(`time.process_time`: all threads), the JSON decoding of its body measured beside (as the gateway's edge reads it: on
from the previous body, `gateway.http.bodies`; and, outside the request's CPU, the whole body by orjson).
The lengths' requests alternate, one of each in turn (each length with its own services and caches, as one
gateway per length would have them): the machine's drift falls on both sides of their ratio, which issue 47's target
is and which is printed budget by budget. ``--growing`` adds an exchange per request, as a chat does;
``--after-commit`` makes each measured request the first after a change of the thread's version, logged as a
consolidation's commit logs it (one that wrote no page: a process reads again only the pages a change wrote).
``--profile`` prints cProfile's top functions over the measured requests' own work (cumulative, then own time);
``--profile-save PREFIX`` also writes each length's stats to ``PREFIX-<turns>.pstats``, to diff the lengths.
``--shape longmemeval`` stores, instead of the synthetic chat, `bench.long_thread`'s thread (LongMemEval_S histories
joined, long replies) of about ``--turns`` exchanges, and asks the same LongMemEval questions at every length.

Run from the repository root (``--flush`` stores the thread again):

    OMP_NUM_THREADS=1 .venv/bin/python -m bench.profile_context --turns 600,10000 [--requests 20] [--warmup 6] [--budget 2000,4000]
        [--shape chat|longmemeval] [--growing] [--after-commit] [--profile [--profile-save PREFIX]]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.long_thread import build_thread, load_items, messages_of  # noqa: E402
from bench.request_cpu import history, question  # noqa: E402
from gateway.adapters.redis_store import new_version  # noqa: E402
from gateway.bootstrap import background_for, open_services  # noqa: E402
from gateway.config import parse_config  # noqa: E402
from gateway.http.bodies import Bodies  # noqa: E402
from gateway.http.validation import parse_chat_request  # noqa: E402
from gateway.service.chat import ChatService  # noqa: E402
from gateway.service.request import RequestMeta  # noqa: E402
from tests.support.fake_upstream import FakeUpstream  # noqa: E402
from tests.support.gateway_process import gateway_config  # noqa: E402

THREAD = "profile"
LONGMEMEVAL_QUESTIONS = 40  # the LongMemEval_S questions the longmemeval shape asks, at every length alike


class Size:
    """One thread length's thread, services and measurements: stored (once) and warmed by `open`, then measured one
    request at a time (`one`), so that the lengths' requests can alternate."""

    @classmethod
    async def open(cls, turns: int, args: argparse.Namespace, fake: FakeUpstream, stack: AsyncExitStack) -> Size:
        size = cls()
        size.turns, size.args = turns, args
        size.prefix = prefix = f"pcpprof-{turns}" if args.shape == "chat" else f"pcpprof-{args.shape}-{turns}"
        raw = gateway_config(fake.url, Path("/tmp/pcp-profile-context"), store={"redis_url": args.redis, "key_prefix": prefix},
                             pcp={"raw_form": True}, server={"max_body_bytes": 1 << 30})
        size.config = config = parse_config(raw)
        if args.shape == "chat":
            size.base, size.questions = history(turns), []
        else:  # bench.long_thread's thread; the questions of its first histories, the same at every length
            items = load_items()
            size.base = messages_of(build_thread(items, turns))
            size.questions = [str(item["question"]) for item in items[:LONGMEMEVAL_QUESTIONS]]
        size.budgets = [int(b) for b in str(args.budget).split(",")]
        size.replies = [m["content"] for m in history(turns + 200)[2 + 2 * turns :: 2]]
        size.salt = time.time_ns()
        services = size.services = await stack.enter_async_context(open_services(config))
        client = services.store.client
        if args.flush:
            keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=10_000)]
            for i in range(0, len(keys), 5000):
                await client.delete(*keys[i : i + 5000])
        size.chat = ChatService(services.upstream, services.store, config, services.embedder, services.consolidator)
        size.bodies = Bodies()  # as the gateway's edge keeps them (gateway.http.bodies)
        size.whole, size.cpu, size.decode = [], [], []
        size.by_budget = {}  # without the decoding: a p50 over two budgets' requests falls between two modes
        size.profiler = None  # (set after the warm-up: the measured requests only)
        stored = await client.exists(f"{prefix}:{{anon:{THREAD}}}:version")
        if not stored:
            t0 = time.perf_counter()
            await size.ask(0)
            print(f"[{turns}] stored the thread in {time.perf_counter() - t0:.1f}s; consolidating", file=sys.stderr, flush=True)
            background = background_for(config, services, 1)
            assert background is not None and services.consolidator is not None
            await background.start()
            from gateway.adapters.store_keys import ThreadKey

            while await services.consolidator.pending(ThreadKey("anon", THREAD)):
                await asyncio.sleep(0.5)
            await background.stop()
        for i in range(1, 1 + args.warmup):  # warm-up: the process's caches, as a running gateway has them
            await size.ask(100 + args.requests + i)  # (questions of both kinds: one about the user reads other vectors)
        size.whole.clear()
        size.profiler = cProfile.Profile() if args.profile else None
        return size

    turns: int
    prefix: str
    questions: list[str]
    args: argparse.Namespace
    config: Any
    base: list[dict[str, Any]]
    budgets: list[int]
    replies: list[str]
    salt: int
    services: Any
    chat: ChatService
    bodies: Bodies
    whole: list[float]
    cpu: list[float]
    decode: list[float]
    by_budget: dict[int, list[float]]
    profiler: cProfile.Profile | None
    completion: Any = None

    async def ask(self, i: int, grow: bool = False) -> tuple[float, float, Any]:
        if grow:  # a chat's next request: the question before, answered, then a new one (each stores a page)
            reply = f"{self.replies[i % len(self.replies)]} (run {self.salt})"  # new pages on every run of the same stored thread
            self.base.extend([question(i - 1), {"role": "assistant", "content": reply}])
        asked = question(i) if not self.questions else {"role": "user", "content": self.questions[i % len(self.questions)]}
        body = json.dumps({"model": "fake-model", "messages": [*self.base, asked]}).encode()
        whole0 = time.process_time()
        orjson.loads(body)  # the body decoded whole, as a gateway that keeps nothing of the last one would
        self.whole.append((time.process_time() - whole0) * 1000)
        cpu0 = time.process_time()
        meta = RequestMeta(tenant="anon", thread=THREAD, budget=str(self.budgets[i % len(self.budgets)]))
        request = parse_chat_request(body, self.config.model_names, meta, self.bodies)
        decoded = time.process_time()
        if self.profiler is not None:  # the request's own work: not the bench's encoding of the body, nor its decoding
            self.profiler.enable()
        completion = await self.chat.complete(request)
        if self.profiler is not None:
            self.profiler.disable()
        cpu1 = time.process_time()
        return (cpu1 - cpu0) * 1000, (decoded - cpu0) * 1000, completion

    async def one(self, i: int) -> None:
        """Measured request ``i``."""
        args, client = self.args, self.services.store.client
        if args.after_commit:  # a new version, logged as a consolidation's commit logs it (one that wrote no page)
            version_key, changes_key = (f"{self.prefix}:{{anon:{THREAD}}}:{name}" for name in ("version", "changes"))
            before, after = await client.get(version_key), new_version()
            await client.set(version_key, after)
            await client.rpush(changes_key, f"{before.decode() if isinstance(before, bytes) else before} {after} ")
        total, decoded, self.completion = await self.ask(100 + i, args.growing)
        self.cpu.append(total)
        self.decode.append(decoded)
        self.by_budget.setdefault(self.budgets[(100 + i) % len(self.budgets)], []).append(total - decoded)

    def report(self) -> dict[str, Any]:
        cpu = self.cpu
        report = {"turns": self.turns, "form": self.completion.headers.get("x-pcp-form"), "pages": self.completion.headers.get("x-pcp-pages"),
                  "cpu_p50": statistics.median(cpu), "cpu_p95": sorted(cpu)[int(0.95 * (len(cpu) - 1))],
                  "decode_p50": statistics.median(self.decode), "whole_p50": statistics.median(self.whole), "cpu_mean": statistics.fmean(cpu),
                  "by_budget": {budget: statistics.median(values) for budget, values in sorted(self.by_budget.items())}}
        if self.profiler is not None:
            out = io.StringIO()
            stats = pstats.Stats(self.profiler, stream=out)
            if self.args.profile_save:
                stats.dump_stats(f"{self.args.profile_save}-{self.turns}.pstats")
            stats.sort_stats("cumulative").print_stats(self.args.top)
            stats.sort_stats("tottime").print_stats(self.args.top)
            report["profile"] = out.getvalue()
        return report


async def main_async(args: argparse.Namespace) -> int:
    async with AsyncExitStack() as stack:
        fake = stack.enter_context(FakeUpstream())
        sizes = [await Size.open(int(t), args, fake, stack) for t in args.turns.split(",")]
        for i in range(args.requests):  # the lengths' requests alternate: what the machine does meanwhile falls on both
            for size in sizes:
                await size.one(i)
        reports = [size.report() for size in sizes]
    for report in reports:
        if "profile" in report:
            print(report.pop("profile"))
        print(f"{report['turns']:>6} turns ({report['form']}, pages {report['pages']}): CPU p50 {report['cpu_p50']:.1f} ms, "
              f"p95 {report['cpu_p95']:.1f} ms, of which JSON decoding p50 {report['decode_p50']:.1f} ms (the body whole: "
              f"{report['whole_p50']:.1f}); without it "
              f"{report['cpu_p50'] - report['decode_p50']:.1f} ms; mean {report['cpu_mean']:.1f} ms (with the collector's full "
              f"passes, which the p50 leaves out)", flush=True)
        print("        by budget, without decoding, p50: " + ", ".join(f"{b}: {v:.1f} ms" for b, v in report["by_budget"].items()), flush=True)
    if len(reports) > 1:  # issue 47's target: the longest thread's request over the shortest's, budget by budget
        first, last = reports[0], reports[-1]
        print(f"{last['turns']} / {first['turns']} turns, without decoding, by budget: "
              + ", ".join(f"{b}: {v / first['by_budget'][b]:.2f}×" for b, v in last["by_budget"].items()), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", default="600,10000")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--budget", default="4000", help="X-PCP-Budget; several (2000,4000) alternate request by request")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--warmup", type=int, default=6, help="requests before the measured ones (not measured)")
    parser.add_argument("--shape", choices=("chat", "longmemeval"), default="chat",
                        help="chat: bench.request_cpu's synthetic short exchanges; longmemeval: bench.long_thread's thread")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-save", metavar="PREFIX", help="with --profile: write each length's stats to PREFIX-<turns>.pstats (for pstats or snakeviz)")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--flush", action="store_true", help="store the thread again")
    parser.add_argument("--after-commit", action="store_true",
                        help="each measured request the first after the thread's version changed (a consolidation commits a topic)")
    parser.add_argument("--growing", action="store_true",
                        help="each measured request one exchange longer than the one before, as a chat sends them (each stores a page)")
    args = parser.parse_args(argv)
    if args.growing and args.shape != "chat":
        parser.error("--growing grows the synthetic chat only (--shape chat)")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
