"""Gateway CPU per request: pass-through vs paged mode, and how it scales with the conversation's length.

Starts the real gateway (``python -m gateway serve``, embedded Redis in a temp dir) against the scripted
fake upstream on loopback, sends N sequential requests per case with the official ``openai`` SDK and reports
the gateway process's own CPU time (user+sys, all its threads; the embedded Redis child is reported apart)
per request, the client-side p50 wall time and the size of the prompt the upstream received.

Paged cases measure the steady state: a first request ingests the thread, warm-up requests follow, then
every measured request sends the same fixed history plus a different final question.

Run from the repository root:

    .venv/bin/python -m bench.request_cpu [--requests 30] [--turns 10,100,300,600] [--warmup 3]

The standard: no more CPU per request than a plain gateway (LiteLLM proxy, ~13 ms here), and no growth
with the conversation's length (the slope line).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from openai import OpenAI

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.cpu_clock import cpu_seconds
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config

MODEL = "fake-model"
PLAIN_GATEWAY_MS = 13.0  # LiteLLM proxy, measured on this machine

# --- deterministic, varied conversation text -------------------------------------------------------------

def _words(text: str) -> list[str]:
    return text.split()


_TOPICS = [
    "postgres replication", "kubernetes autoscaling", "rust lifetimes", "react hydration", "kafka consumer lag",
    "terraform state", "python packaging", "oauth token refresh", "grpc deadlines", "redis eviction",
    "css grid layout", "docker layer caching", "bash quoting", "git rebase conflicts", "tls certificate rotation",
    "numpy broadcasting", "sql window functions", "nginx rate limiting", "prometheus alerting", "s3 lifecycle rules",
    "jwt validation", "webpack chunking", "linux cgroups", "elasticsearch mappings", "go channels",
    "java garbage collection", "android permissions", "graphql pagination", "ci pipeline caching", "dns propagation",
]
_NOUNS = _words("""cluster service index query cache queue worker replica shard node pod request response header token
secret config manifest schema migration table column partition lock thread process buffer socket endpoint
route handler middleware build artifact image layer volume mount budget deadline timeout retry backoff metric
dashboard alert log trace span sample batch window offset cursor snapshot checkpoint""")
_VERBS = _words("""restart scale drain rebuild migrate rotate validate flush compact rebalance throttle retry profile
cache shard replicate invalidate serialize deploy rollback patch tune monitor benchmark index""")
_ADJS = _words("""stale slow flaky idle hot cold large tiny noisy quiet broken healthy expensive cheap partial
concurrent sequential lazy eager transient persistent regional global primary secondary""")
_Q_TEMPLATES = [
    "Why does my {t} setup keep hitting {a} {n} problems after we {v} the {n2}?",
    "How should I {v} the {n} when the {t} {n2} is {a}?",
    "Can you explain what happens to the {n} if I {v} it during {t} work with a {a} {n2}?",
    "What is the safest way to {v} a {a} {n} in {t} without losing the {n2}?",
]
_A_SENTENCES = [
    "In {t}, a {a} {n} usually means the {n2} was not ready when you tried to {v} it.",
    "First {v} the {n} and check whether the {n2} stays {a} under load.",
    "If the {n} is {a}, look at the {n2} metrics before you {v} anything else.",
    "A common fix is to {v} the {n2} in small batches so the {n} never becomes {a}.",
    "You can confirm it by watching the {n} while you {v} the {n2} on a staging {n3}.",
    "Keep the {n} {a} only for a short window, then {v} the {n2} and compare the numbers.",
    "With {t}, the defaults assume a {a} {n}, which is why the {n2} behaves differently here.",
]


def _fill(rng: random.Random, template: str, topic: str) -> str:
    return template.format(t=topic, a=rng.choice(_ADJS), n=rng.choice(_NOUNS), n2=rng.choice(_NOUNS),
                           n3=rng.choice(_NOUNS), v=rng.choice(_VERBS))


def _user_text(rng: random.Random, topic: str, turn: int) -> str:
    parts = [_fill(rng, rng.choice(_Q_TEMPLATES), topic) for _ in range(2)]
    parts.append(f"Context: we run {rng.randint(2, 64)} {rng.choice(_NOUNS)}s, step {turn}, "
                 f"and the {rng.choice(_NOUNS)} is {rng.choice(_ADJS)} about {rng.randint(5, 95)}% of the time.")
    return " ".join(parts)


def _assistant_text(rng: random.Random, topic: str) -> str:
    return " ".join(_fill(rng, rng.choice(_A_SENTENCES), topic) for _ in range(rng.randint(3, 5)))


def history(turns: int, seed: int = 7) -> list[dict[str, str]]:
    """`turns` finished user/assistant exchanges (each message ~60-100 tokens), after a system prompt."""
    rng = random.Random(seed)
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are a helpful engineering assistant."}]
    for turn in range(turns):
        topic = _TOPICS[(turn // 5 + rng.randrange(3)) % len(_TOPICS)]
        messages.append({"role": "user", "content": _user_text(rng, topic, turn)})
        messages.append({"role": "assistant", "content": _assistant_text(rng, topic)})
    return messages


def question(i: int) -> dict[str, str]:
    rng = random.Random(100_000 + i)
    topic = _TOPICS[i % len(_TOPICS)]
    return {"role": "user", "content": f"New question #{i}: " + _fill(rng, rng.choice(_Q_TEMPLATES), topic)}


# --- measurement ----------------------------------------------------------------------------------------


@dataclass
class Row:
    case: str
    turns: int
    requests: int
    cpu_ms: float
    redis_ms: float
    p50_ms: float
    upstream_messages: int
    upstream_kb: float


def _cpu_seconds(proc: psutil.Process | None) -> float:
    if proc is None:
        return 0.0
    try:
        return cpu_seconds(proc)
    except psutil.Error:
        return 0.0


def wait_idle(proc: psutil.Process, *, window: float = 0.5, max_share: float = 0.03, timeout: float = 180.0) -> float:
    """Block until `proc` uses less than `max_share` of a core over `window` seconds (background work such as
    loading the embedding model at start, or deferred work of earlier requests, must not land in a batch).
    Returns the seconds waited."""
    started = time.monotonic()
    last = _cpu_seconds(proc)
    while time.monotonic() - started < timeout:
        time.sleep(window)
        now = _cpu_seconds(proc)
        if now - last < max_share * window:
            break
        last = now
    return time.monotonic() - started


class Bench:
    def __init__(self, gateway: GatewayProcess, fake: FakeUpstream, requests: int, warmup: int) -> None:
        assert gateway.process is not None
        self.proc = psutil.Process(gateway.process.pid)
        children = self.proc.children(recursive=True)
        self.redis = children[0] if children else None
        self.fake = fake
        self.requests = requests
        self.warmup = warmup
        self.client = OpenAI(base_url=gateway.base_url, api_key="bench-key", max_retries=0, timeout=300)
        self.counter = 0

    def _one(self, messages: list[dict[str, str]], headers: dict[str, str], stream: bool) -> float:
        sent: Any = messages
        start = time.perf_counter()
        if stream:
            chunks = self.client.chat.completions.create(model=MODEL, messages=sent, stream=True, extra_headers=headers)
            text = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
        else:
            reply = self.client.chat.completions.create(model=MODEL, messages=sent, extra_headers=headers)
            text = reply.choices[0].message.content or ""
        elapsed = time.perf_counter() - start
        if text != "ok":
            raise RuntimeError(f"unexpected reply {text!r}")
        return elapsed

    def case(self, name: str, turns: int, *, paged: bool, stream: bool = False) -> Row:
        base = history(turns)
        headers = {"X-PCP-Thread": f"bench-{name}-{turns}"}
        if not paged:
            headers["X-PCP-Mode"] = "off"
        for _ in range(self.warmup + (1 if paged else 0)):  # paged: the first request ingests the thread
            self.counter += 1
            self._one(base + [question(self.counter)], headers, stream)
        self.fake.reset()
        wait_idle(self.proc)  # let deferred work of the warm-up settle
        cpu0, redis0 = _cpu_seconds(self.proc), _cpu_seconds(self.redis)
        walls = []
        for _ in range(self.requests):
            self.counter += 1
            walls.append(self._one(base + [question(self.counter)], headers, stream))
        time.sleep(0.3)  # count deferred per-request work (e.g. litellm callbacks) too
        cpu1, redis1 = _cpu_seconds(self.proc), _cpu_seconds(self.redis)
        received = self.fake.chat_requests
        sizes = [len((r.body or {}).get("messages") or []) for r in received]
        kbytes = [len(r.raw) / 1024 for r in received]
        self.fake.reset()
        n = self.requests
        return Row(name, turns, n, (cpu1 - cpu0) * 1000 / n, (redis1 - redis0) * 1000 / n,
                   statistics.median(walls) * 1000, int(statistics.median(sizes)) if sizes else 0,
                   statistics.mean(kbytes) if kbytes else 0.0)


HEADER = (f"{'case':<14}{'turns':>6}{'reqs':>6}{'CPU ms/req':>12}{'redis ms/req':>14}{'p50 wall ms':>13}"
          f"{'upstream msgs':>15}{'upstream KB':>13}")


def format_row(r: Row) -> str:
    return (f"{r.case:<14}{r.turns:>6}{r.requests:>6}{r.cpu_ms:>12.1f}{r.redis_ms:>14.2f}{r.p50_ms:>13.1f}"
            f"{r.upstream_messages:>15}{r.upstream_kb:>13.1f}")


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30, help="measured requests per case (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up requests per case (default 3)")
    parser.add_argument("--turns", default="10,100,300,600", help="paged conversation sizes (default 10,100,300,600)")
    parser.add_argument("--stream-turns", type=int, default=300, help="conversation size of the streaming case")
    parser.add_argument("--keep-log", action="store_true", help="print the gateway log at the end")
    args = parser.parse_args(argv)
    turns = [int(t) for t in args.turns.split(",") if t.strip()]
    if args.requests < 1 or not turns or min(turns) < 0:
        parser.error("--requests must be >= 1 and --turns a comma-separated list of sizes")

    signal.signal(signal.SIGTERM, _on_sigterm)
    rows: list[Row] = []
    gateway: GatewayProcess | None = None
    with ExitStack() as stack:
        try:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pcp-bench-")))
            fake = stack.enter_context(FakeUpstream())
            config = gateway_config(fake.url, workdir / "data", embedded=True, pcp={"enabled": True},
                                    server={"max_body_bytes": 64 * 1024 * 1024})
            gateway = GatewayProcess(config=config, workdir=workdir)
            stack.callback(gateway.stop)
            gateway.start()
            bench = Bench(gateway, fake, args.requests, args.warmup)
            waited = wait_idle(bench.proc)  # e.g. the embedding model loads in the background at start
            print(f"gateway pid {bench.proc.pid}, embedded redis pid {bench.redis.pid if bench.redis else '?'}; "
                  f"{args.requests} requests per case after {args.warmup} warm-up; {os.cpu_count()} CPUs; "
                  f"start-up settled after {waited:.1f}s\n", flush=True)
            print(HEADER)
            print("-" * len(HEADER), flush=True)

            def run(*a: Any, **kw: Any) -> None:
                rows.append(bench.case(*a, **kw))
                print(format_row(rows[-1]), flush=True)

            run("off", 2, paged=False)
            run("off", max(turns), paged=False)
            for t in turns:
                run("paged", t, paged=True)
            if args.stream_turns > 0:
                run("paged-stream", args.stream_turns, paged=True, stream=True)
        except KeyboardInterrupt:
            print("\ninterrupted; stopping the gateway and the fake upstream", file=sys.stderr)
            return 130
        except BaseException:
            if gateway is not None and gateway.log_path is not None:
                print("--- gateway log (tail) ---", file=sys.stderr)
                print("\n".join(gateway.log().splitlines()[-40:]), file=sys.stderr)
            raise
        finally:
            if args.keep_log and gateway is not None:
                print(gateway.log())

    paged = {r.turns: r for r in rows if r.case == "paged"}
    print()
    if paged:
        lo, hi = min(paged), max(paged)
        print(f"slope: paged CPU at {hi} turns - at {lo} turns = {paged[hi].cpu_ms - paged[lo].cpu_ms:+.1f} ms/request "
              f"({(paged[hi].cpu_ms - paged[lo].cpu_ms) / max(hi - lo, 1) * 100:+.2f} ms per 100 turns)")
        worst = max(r.cpu_ms for r in rows if r.case.startswith("paged"))
        print(f"worst paged CPU/request {worst:.1f} ms vs plain gateway ~{PLAIN_GATEWAY_MS:.0f} ms: "
              f"{'OK' if worst <= PLAIN_GATEWAY_MS else 'OVER'}")
    print("CPU ms/req = gateway process only (user+sys, all threads); redis ms = its embedded Redis child.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
