"""A year of conversation: one thread grown to a million tokens and more, measured at each size.

The thread is built from the LongMemEval_S development histories (``bench/datasets.py``): history after history,
its sessions with the answer first (so its question's evidence is always in), then its other sessions while the
step's size is not reached; sessions de-duplicated by session id (the histories share filler sessions) and replayed
in date order. Each history's question is asked at the end of the thread, at the latest question date.

At each step (``--steps``, exchanges; default 600, 2,500, 5,000, 10,000 — about 1M tokens near 2,000 exchanges,
LongMemEval's replies being long) a fresh gateway (``python -m gateway serve``, embedded Redis in a temp dir, the
product's defaults, the scripted fake upstream on loopback) receives the whole thread in one first request, as a
client that starts using the gateway on an old conversation sends it, then:

* **ingest**: that request's wall time and the gateway's CPU for it, as exchanges and tokens (cl100k, messages) per
  second, and the time its background work (manifests, segmentation) took to drain; with ``--import-steps``, the
  same thread through ``pcp-gateway import`` (one request per session, dated) into another thread;
* **per paged request**: the gateway process's CPU (user+sys, all threads: ``bench/request_cpu.py``'s measure) and
  the client's wall time of each question request, p50 / p95, beside what ``json.loads`` of the same body takes
  here (the client's JSON, which the gateway must decode whatever it does next) and the gateway's CPU for that body
  refused once read and parsed (``"n": 0`` after its messages: receiving and parsing it alone, on from the last);
* **first token**: a few streamed paged requests, time to the first content chunk;
* **memory**: Redis' ``used_memory`` growth and the sum of ``MEMORY USAGE`` of the thread's keys, per stored page;
  the gateway's RSS after the questions, and per stored page over its RSS before the first request (after a
  paged request on a short thread of its own has loaded what the paged path loads once);
* **evidence recall** at 2k and 4k (``bench/baselines.py``'s rule: an evidence turn is kept when its whole text
  reaches the model) beside BM25 over ~256-token chunks of the same thread;
* **the map** at 300 tokens: each question asked again, and how many of the thread's top-level topics (containers)
  its context names, by their id or the id of a page below them.

Run from the repository root (one torch thread and ``nice``: the machine is shared):

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python -m bench.long_thread [--steps 600,2500,5000,10000]
        [--import-steps 600,2500] [--write-docs] [--quick]

``--quick``: two small steps with a few questions (minutes), for the tests. ``--write-docs`` writes the table and
the plot into docs/benchmark-results.md (its ``long-thread`` markers) and the summary into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import lzma
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.baselines import COUNTER, Baselines, judge  # noqa: E402
from bench.cpu_clock import cpu_seconds  # noqa: E402
from bench.datasets import (LONGMEMEVAL_DATA, Conversation, Evidence, Question, Turn,  # noqa: E402
                            parse_longmemeval_date)
from bench.evidence_recall import NAMED_ID, leaf_paths  # noqa: E402
from bench.long_thread_report import MAP_BUDGET, Step, row_text, table, write_docs  # noqa: E402

STEPS = (600, 2500, 5000, 10000)
QUICK_STEPS = (40, 120)
BUDGETS = (2000, 4000)
MODEL = "fake-model"
THREAD = "long"
STREAMED = 5  # first-token requests per step
PENDING_WAIT_S = 3600


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- the thread -------------------------------------------------------------------------------------------


def load_items(path: Path = LONGMEMEVAL_DATA) -> list[dict[str, Any]]:
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        items: list[dict[str, Any]] = json.load(fh)
    return items


def _exchanges(session: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for t in session if t.get("role") == "user")


def build_thread(items: Sequence[Mapping[str, Any]], exchanges: int, max_questions: int | None = None) -> Conversation:
    """One thread of about ``exchanges`` exchanges (see the module): the sessions of the histories taken in file order,
    each history's evidence sessions first and then its other sessions while the size is not reached, de-duplicated
    by session id and sorted by date (stable); the questions of the histories taken, with evidence, up to
    ``max_questions``."""
    chosen: dict[str, tuple[datetime, list[Mapping[str, Any]]]] = {}
    questions: list[tuple[Mapping[str, Any], list[str]]] = []
    total = 0
    latest = datetime.min
    for item in items:
        if total >= exchanges or (max_questions is not None and len(questions) >= max_questions):
            break
        dated = list(zip(item["haystack_dates"], item["haystack_session_ids"], item["haystack_sessions"]))
        evidence = [f"{sid}:{n}" for _, sid, raw in dated for n, t in enumerate(raw) if t.get("has_answer") is True]
        answered = {sid for _, sid, raw in dated if any(t.get("has_answer") is True for t in raw)}
        for date, sid, raw in sorted(dated, key=lambda d: d[1] not in answered):  # evidence first (stable)
            if sid in chosen:
                continue
            if sid not in answered and total >= exchanges:
                break
            chosen[sid] = (parse_longmemeval_date(date), raw)
            total += _exchanges(raw)
        latest = max(latest, parse_longmemeval_date(item["question_date"]))
        if evidence and not str(item["question_id"]).endswith("_abs"):
            questions.append((item, evidence))
    sessions: list[tuple[datetime, list[Turn]]] = []
    turns_by_id: dict[str, Turn] = {}
    index = 0
    for sid, (when, raw) in sorted(chosen.items(), key=lambda kv: kv[1][0]):
        turns = []
        for n, t in enumerate(raw):
            turn = Turn(f"{sid}:{n}", t["role"].capitalize(), t["role"], str(t["content"]), len(sessions), index)
            turns.append(turn)
            turns_by_id[turn.id] = turn
            index += 1
        sessions.append((when, turns))
    evidence_of: dict[str, Evidence] = {}
    asked: list[Question] = []
    for item, ids in questions:
        kept = tuple(i for i in ids if i in turns_by_id)
        for i in kept:
            evidence_of[i] = Evidence((turns_by_id[i].text,), turns_by_id[i].index)
        if kept:
            asked.append(Question(str(item["question_id"]), str(item["question"]), str(item["question_type"]), kept))
    last = sessions[-1][0] if sessions else latest
    return Conversation(f"{THREAD}-{total}", sessions, asked, evidence_of, max(latest, last + timedelta(hours=1)))


def messages_of(conv: Conversation) -> list[dict[str, str]]:
    return [{"role": t.role, "content": t.text} for t in conv.turns]


def body_of(history_json: bytes, question: str, stream: bool = False) -> bytes:
    """The request body: the history (already encoded: a JSON array's items) plus the question, without encoding
    the million tokens again for every question."""
    ask = json.dumps({"role": "user", "content": question}).encode()
    head = json.dumps({"model": MODEL, "stream": stream})[:-1].encode()
    return head + b', "messages": [' + history_json + (b", " if history_json else b"") + ask + b"]}"


def refused_body(body: bytes) -> bytes:
    """``body`` with ``"n": 0`` after its messages: the gateway reads and parses it as it does ``body`` (on from the
    thread's last body: the first bytes are the same), then refuses it (400) before any work on the thread."""
    return body[:-1] + b', "n": 0}'


# --- measurement ------------------------------------------------------------------------------------------


class Gateway:
    """One gateway process on an embedded Redis, and the fake upstream it calls."""

    def __init__(self, stack: ExitStack, quick: bool) -> None:
        import httpx
        import psutil

        from bench.request_cpu import wait_idle
        from tests.support.fake_upstream import FakeUpstream
        from tests.support.gateway_process import GatewayProcess, gateway_config

        self.workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pcp-long-")))
        self.fake = stack.enter_context(FakeUpstream())
        # the product's defaults: raw form on, default budget; the whole thread arrives in one body
        self.config = gateway_config(self.fake.url, self.workdir / "data", embedded=True,
                                     pcp={"raw_form": True}, server={"max_body_bytes": 256 * 1024 * 1024})
        # the gateway of this checkout, whatever the editable install points at (the child runs in the temp dir)
        self.gw = GatewayProcess(config=self.config, workdir=self.workdir, env={"PYTHONPATH": str(ROOT)})
        stack.callback(self.gw.stop)
        self.gw.start(timeout=600.0)
        self.proc = psutil.Process(self.gw.process.pid if self.gw.process else 0)
        self.wait_idle = wait_idle
        self.wait_idle(self.proc, timeout=600)
        self.client = stack.enter_context(httpx.Client(timeout=3600.0))
        self.url = self.gw.base_url + "/chat/completions"
        self.quick = quick

    def redis(self) -> Any:
        import redis

        sockets = list((self.workdir / "data").glob("**/redis.sock"))
        return redis.Redis(unix_socket_path=str(sockets[0])) if sockets else None

    def post(self, body: bytes, headers: Mapping[str, str]) -> tuple[Any, float, float]:
        """The response, its wall time and the gateway's CPU for it (seconds)."""
        self.fake.reset()
        cpu0, t0 = cpu_seconds(self.proc), time.perf_counter()
        resp = self.client.post(self.url, content=body, headers={"content-type": "application/json", **headers})
        wall = time.perf_counter() - t0
        return resp, wall, cpu_seconds(self.proc) - cpu0

    def first_token(self, body: bytes, headers: Mapping[str, str]) -> float:
        self.fake.reset()
        t0 = time.perf_counter()
        with self.client.stream("POST", self.url, content=body, headers={"content-type": "application/json", **headers}) as resp:
            first = None
            for line in resp.iter_lines():  # read to the end: the request is done when the gateway says so
                if first is None and line.startswith("data:") and '"content"' in line:
                    first = time.perf_counter() - t0
        return first if first is not None else time.perf_counter() - t0

    def topics(self, thread: str, headers: Mapping[str, str]) -> list[set[str]]:
        """The thread's top-level containers, each with every id below it (a topic is named by any of them)."""
        roots = self.client.get(f"{self.gw.root_url}/pcp/threads/{thread}", headers=dict(headers)).json().get("pages") or []
        topics: list[set[str]] = []
        for root in roots:
            if root.get("type") == "Consolidated":
                paths = leaf_paths([root])  # every leaf below it, with the containers between
                topics.append(set(paths).union(*paths.values()))
        return topics

    def warm(self, headers: Mapping[str, str]) -> None:
        """A paged request on a short thread of its own, its background work drained: the embedding model and what
        the paged path loads once are in the process before the step's thread, whose pages the RSS per page counts."""
        short = [{"role": role, "content": f"{n}: " + "A few words about the weather and the garden today. " * 20}
                 for n in range(6) for role in ("user", "assistant")]
        warm = {**headers, "X-PCP-Thread": "warm-up", "X-PCP-Budget": "300"}
        resp, _, _ = self.post(body_of(json.dumps(short)[1:-1].encode(), "What did we say about the garden?"), warm)
        if resp.status_code != 200:
            raise SystemExit(f"the warm-up request failed: {resp.status_code} {resp.text[:300]}")
        log(f"warm-up: {resp.headers.get('x-pcp-form')}, pages {resp.headers.get('x-pcp-pages')}, RSS {self.proc.memory_info().rss / 2**20:.0f} MB")
        self.pending("warm-up", warm)
        self.wait_idle(self.proc, timeout=600)

    def pending(self, thread: str, headers: Mapping[str, str]) -> None:
        deadline = time.monotonic() + PENDING_WAIT_S
        while time.monotonic() < deadline:
            r = self.client.get(f"{self.gw.root_url}/pcp/threads/{thread}", headers=dict(headers))
            if r.status_code != 200 or not (r.json() or {}).get("pending_jobs", 0):
                return
            time.sleep(0.5)  # a benchmark polling a live process
        log(f"  {thread}: background work still pending after {PENDING_WAIT_S} s")

    def run_import(self, conv: Conversation, thread: str) -> float:
        """``pcp-gateway import`` of the thread (one dated line per message) into ``thread``: its wall time."""
        path = self.workdir / f"{thread}.jsonl"
        messages = [{"role": t.role, "content": t.text, "timestamp": when.isoformat()}
                    for when, turns in conv.sessions for t in turns]
        path.write_text(json.dumps({"thread": thread, "messages": messages}) + "\n", encoding="utf-8")
        import yaml

        config = self.workdir / "import.yaml"
        config.write_text(yaml.safe_dump(self.config), encoding="utf-8")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gateway", "import", str(path), "--config", str(config), "--thread", thread,
                        "--tenant", "anon"], check=True, capture_output=True, timeout=PENDING_WAIT_S, cwd=ROOT)
        return time.perf_counter() - t0


def redis_memory(redis: Any, thread: str) -> tuple[int, int]:
    """Redis' used_memory, and the sum of MEMORY USAGE over the thread's keys."""
    used = int(redis.info("memory")["used_memory"])
    keys = 0
    for key in redis.scan_iter(match=f"*:{thread}}}:*", count=1000):
        keys += int(redis.memory_usage(key, samples=0) or 0)
    return used, keys


def measure_step(target: int, items: Sequence[Mapping[str, Any]], args: argparse.Namespace) -> Step:
    conv = build_thread(items, target, args.questions)
    history = messages_of(conv)
    tokens = COUNTER.count_messages(history)
    step = Step(sum(1 for m in history if m["role"] == "user"), len(history), tokens, questions=len(conv.questions))
    log(f"[{target}] {step.exchanges} exchanges, {len(conv.sessions)} sessions, {tokens:,} tokens, "
        f"{len(conv.questions)} questions")
    history_json = json.dumps(history)[1:-1].encode()
    thread = f"{THREAD}-{target}"
    when = conv.question_time.isoformat()
    headers = {"Authorization": "Bearer sk-long", "X-PCP-Thread": thread}
    with ExitStack() as stack:
        gw = Gateway(stack, args.quick)
        redis = gw.redis()
        gw.warm(headers)
        used0 = redis_memory(redis, thread)[0] if redis is not None else 0
        step.rss_start_mb = gw.proc.memory_info().rss / 2**20
        # the first request carries the whole thread
        first = body_of(history_json, "Hello again! Where were we?")
        resp, wall, cpu = gw.post(first, {**headers, "X-PCP-Time": conv.sessions[-1][0].isoformat()})
        if resp.status_code != 200:
            raise SystemExit(f"the first request failed: {resp.status_code} {resp.text[:300]}")
        step.ingest_s, step.ingest_cpu_s = wall, cpu
        t0 = time.perf_counter()
        gw.pending(thread, headers)
        gw.wait_idle(gw.proc, timeout=PENDING_WAIT_S)
        step.drain_s = time.perf_counter() - t0
        log(f"[{target}] first request {wall:.1f}s ({step.rate:.0f} exchanges/s, CPU {cpu:.1f}s), "
            f"background drained in {step.drain_s:.1f}s")
        baselines = Baselines(conv)
        for q in conv.questions:
            body = body_of(history_json, q.text)  # (once per question: a 17 MB body at 10,000 exchanges)
            resp, _, cpu = gw.post(refused_body(body), {**headers, "X-PCP-Time": when})
            if resp.status_code == 400:
                step.read_ms.append(cpu * 1000)
            else:
                step.errors.append(f"the refused body got {resp.status_code}: {resp.text[:200]}")
            for budget in BUDGETS:
                t1 = time.perf_counter()
                json.loads(body)
                step.decode_ms.append((time.perf_counter() - t1) * 1000)
                resp, wall, cpu = gw.post(body, {**headers, "X-PCP-Time": when, "X-PCP-Budget": str(budget)})
                if resp.status_code != 200:
                    step.errors.append(f"{resp.status_code}: {resp.text[:200]}")
                    continue
                step.pages = int(resp.headers.get("x-pcp-pages", "0/0").split("/")[-1])
                step.cpu_ms.append(cpu * 1000)
                step.wall_ms.append(wall * 1000)
                sent = next((r.body for r in gw.fake.chat_requests if r.body), None) or {}
                mine = judge(conv, q, budget, sent.get("messages") or [])
                theirs = baselines.bm25_chunks(q, budget)
                step.recall.setdefault(f"gateway@{budget}", 0.0)
                step.recall[f"gateway@{budget}"] += mine.recall
                step.recall.setdefault(f"bm25@{budget}", 0.0)
                step.recall[f"bm25@{budget}"] += theirs.recall
        for key in step.recall:
            step.recall[key] /= max(len(conv.questions), 1)
        topics = gw.topics(thread, headers)
        step.map_topics = len(topics)
        for q in conv.questions:
            resp, _, _ = gw.post(body_of(history_json, q.text), {**headers, "X-PCP-Time": when, "X-PCP-Budget": str(MAP_BUDGET)})
            sent = next((r.body for r in gw.fake.chat_requests if r.body), None) or {}
            named = set(NAMED_ID.findall("\n".join(str(m.get("content") or "") for m in sent.get("messages") or [])))
            if resp.status_code == 200 and topics:
                step.map_named.append(sum(bool(ids & named) for ids in topics) / len(topics))
        for i in range(STREAMED):
            question = conv.questions[i % len(conv.questions)].text if conv.questions else "What did we say?"
            step.first_token_ms.append(1000 * gw.first_token(body_of(history_json, question, stream=True),
                                                             {**headers, "X-PCP-Time": when}))
        gw.wait_idle(gw.proc, timeout=600)
        step.rss_mb = gw.proc.memory_info().rss / 2**20
        if redis is not None:
            used, keys = redis_memory(redis, thread)
            step.redis_used_per_page = (used - used0) / max(step.pages, 1)
            step.redis_keys_per_page = keys / max(step.pages, 1)
        if target in args.import_steps:
            step.import_s = gw.run_import(conv, f"import-{target}")
    log(f"[{target}] " + row_text(step))
    return step


@contextmanager
def _steps_file(path: Path | None) -> Iterator[list[Step]]:
    steps: list[Step] = []
    try:
        yield steps
    finally:
        if path is not None:
            path.write_text(json.dumps([asdict(s) for s in steps], indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", help="thread sizes in exchanges (default 600,2500,5000,10000)")
    parser.add_argument("--import-steps", default="", help="steps also measured through `pcp-gateway import`")
    parser.add_argument("--questions", type=int, help="at most this many histories' questions per step")
    parser.add_argument("--quick", action="store_true", help=f"steps {QUICK_STEPS}, 3 questions: for the tests")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the measured steps here")
    parser.add_argument("--from-json", type=Path, help="only report (and write the docs from) steps measured before")
    parser.add_argument("--note", default="", help="a sentence added to the docs' line about the run (the code measured, the load)")
    parser.add_argument("--before-json", type=Path, help="an earlier run's steps, shown in the docs below this one's")
    parser.add_argument("--before-note", default="", help="the sentence that introduces the earlier run")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in (args.steps or ",".join(map(str, QUICK_STEPS if args.quick else STEPS))).split(",") if s.strip()]
    args.import_steps = {int(s) for s in args.import_steps.split(",") if s.strip()}
    if args.quick and args.questions is None:
        args.questions = 3
    meta = (f"Measured {datetime.now():%Y-%m-%d} on this machine (`python -m bench.long_thread`; the product's defaults, "
            f"the fake upstream, {BUDGETS[0]} and {BUDGETS[1]}-token budgets for recall)." + (f" {args.note}" if args.note else ""))
    if args.from_json:
        steps = [Step(**{k: v for k, v in record.items()}) for record in json.loads(args.from_json.read_text())]
    else:
        items = load_items()
        with _steps_file(args.json) as steps:
            for size in sizes:
                steps.append(measure_step(size, items, args))
    print(table(steps))
    if args.write_docs:
        before = [Step(**record) for record in json.loads(args.before_json.read_text())] if args.before_json else []
        write_docs(steps, meta, before=before, before_note=args.before_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
