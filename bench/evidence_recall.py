"""Evidence recall on three conversation shapes: what share of the turns a question needs reaches the upstream
model, at a budget.

For each shape (``bench/datasets.py``: LoCoMo, its messaging variant, the LongMemEval_S development questions) it
replays every conversation through the real gateway (``python -m gateway serve``, embedded Redis in a temp dir, one
process per shape) against the recording fake upstream on loopback: one non-streamed request per session whose
messages are the whole history so far, exactly as a client sends them (no system message), with the session's date
as ``X-PCP-Time`` and one ``X-PCP-Thread`` per conversation. It waits for the thread's background work, then asks
each question at each budget B (``X-PCP-Budget``) with the full history plus the question, at the question's time.

An evidence turn is *kept* when every one of its texts (one per message it was sent as) appears verbatim in the
message contents the upstream received in the first round (raw, or after XML unescaping). B counts all message
tokens sent upstream (cl100k, per-message overhead included, tool schemas excluded): the question and the
gateway's own instructions count. Baselines (recent turns, BM25 chunks) are computed locally with the same B and
the same rule (``bench/baselines.py``); the report is ``bench/recall_report.py``.

Run from the repository root:

    .venv/bin/python -m bench.evidence_recall [--dataset locomo,messaging,longmemeval] [--conversations N]
        [--questions N] [--budgets 1000,2000,4000] [--no-gateway] [--write-docs] [--pcp KEY=VALUE]
        [--replay-cache DIR] [--held-out]

``--conversations N``: the first N LoCoMo conversations (LoCoMo and messaging). ``--questions N``: at most N
questions per LoCoMo conversation, and a seeded subset of N LongMemEval questions stratified by type.
``--held-out``: LongMemEval questions from outside the 30 (``--questions 30``) that every change was measured on.

``--replay-cache DIR``: for work on what a request does with the store (ranking, excerpts, the budget), not on ingest.
The first run replays every conversation, waits for its background work, stops the gateway and keeps its data
directory (embedded Redis, append-only file) and the replay's statistics in ``DIR/<shape>``, then restarts the gateway
on it and asks. Later runs with the same shape and conversations start the gateway on a copy of that store and only
ask: minutes instead of most of an hour. The store is what the code of the first run ingested (its git revision is
recorded and printed); delete ``DIR/<shape>`` after changing ingest, segmentation or consolidation.

``--dump FILE``: one JSON line per gateway question request (shape, conversation, question, category, budget, the
evidence kept and missed with its texts, and the messages the upstream received), for reading what a miss looked
like.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shlex
import shutil
import subprocess
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.baselines import COUNTER, Baselines, Outcome, content_text, judge, squash  # noqa: E402
from bench.datasets import (LOCOMO_DATA, LONGMEMEVAL_DATA, REALTALK_DATA, Conversation, Dataset,  # noqa: E402
                            Turn, load_locomo, load_longmemeval, load_realtalk, to_messaging, with_names)
from bench.recall_plot import PLOT, SUMMARY_DOCS, plot, summary_rows  # noqa: E402
from bench.recall_report import (CHUNKS, CHUNKS_WITHIN, GATEWAY, RECENT, GatewayStats, section,  # noqa: E402
                                 stats_from_json, stats_to_json, summary_row, write_docs)

DOCS = ROOT / "docs" / "benchmark-results.md"  # each shape's marked section; the summary is in SUMMARY_DOCS
MODEL = "fake-model"
SHAPES = ("locomo", "messaging", "realtalk", "longmemeval", "chinese")
SHAPE_TITLES = ("LoCoMo", "LoCoMo, names in the lines", "Messaging variant of LoCoMo",
                "Messaging variant of LoCoMo, names in the lines", "Real messaging chats (REALTALK)",
                "LongMemEval_S development questions", "Chinese chats (generated)")  # summary order
THREAD_PREFIX = {"locomo": "locomo", "messaging": "messaging", "locomo-names": "locomo-names",
                 "messaging-names": "messaging-names", "realtalk": "realtalk", "longmemeval": "lme", "chinese": "zh"}
PENDING_WAIT_S = 600
NAMED_ID = re.compile(r'(?:^\[|<Node id=")([0-9a-f]{10})(?:\] |")', re.MULTILINE)  # a page named in a context


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def history_messages(turns: Sequence[Turn]) -> list[dict[str, str]]:
    return [{"role": t.role, "content": t.text} for t in turns]


def pick_request(fake: Any, last: str) -> Mapping[str, Any] | None:
    """The first upstream chat request whose last message is `last` (anything else the gateway sent, e.g. a
    background job's call, is ignored); failing that, the first one."""
    chats: list[Mapping[str, Any]] = [r.body for r in fake.chat_requests if r.body]
    for body in chats:
        msgs = body.get("messages") or []
        if msgs and content_text(msgs[-1]) == last:
            return body
    return chats[0] if chats else None


def leaf_paths(tree: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Each page without children in an inspected page tree (`GET /pcp/threads/{thread}`'s ``pages``), with the
    containers above it, outermost first."""
    paths: dict[str, tuple[str, ...]] = {}

    def walk(node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        for child in node.get("children") or ():
            walk(child, (*path, node["id"]))
        if not node.get("children"):
            paths[node["id"]] = path

    for root in tree:
        walk(root, ())
    return paths


def within(outcome: Outcome, holders: Mapping[str, set[str]], context: str) -> int:
    """The evidence of ``outcome`` shown, or named in ``context`` by one of its ``holders``' ids (as an entry's or a
    line's ``[id]``, or a node's id)."""
    named = set(NAMED_ID.findall(context))
    return len(outcome.kept_ids) + sum(bool(holders.get(e, set()) & named) for e in outcome.missed_ids)


class Replayer:
    """One gateway process and the fake upstream it calls, for one shape; records into `stats`."""

    def __init__(self, stack: ExitStack, pcp: Mapping[str, Any], name: str, cache: Path | None = None) -> None:
        import httpx

        from tests.support.fake_upstream import FakeUpstream
        from tests.support.gateway_process import GatewayProcess, gateway_config

        self.stats = GatewayStats(replay_budget=int(pcp.get("budget_tokens", 4000)))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"pcp-evidence-{name}-")))
        self.data_dir = tmp / "data"
        self.cache = cache
        self.name = name
        self.dump: Any = None
        if cache is not None and (cache / "data").is_dir():
            shutil.copytree(cache / "data", self.data_dir)
        self.fake = stack.enter_context(FakeUpstream())
        # the product's defaults (the test harness pages every request: raw_form off); a cached store needs the
        # same key prefix on every run
        store = {"key_prefix": f"pcpbench-{name}"} if cache is not None else {}
        config = gateway_config(self.fake.url, self.data_dir, embedded=True, store=store,
                                pcp={"budget_tokens": 4000, "raw_form": True, **pcp})
        config["server"]["max_body_bytes"] = 64_000_000  # a LongMemEval history is ~0.5 MB of JSON
        log(f"[{name}] starting the gateway (embedded Redis in {tmp}) ...")
        self.gw = GatewayProcess(config=config, workdir=tmp)
        stack.callback(self.gw.stop)
        self.gw.start(timeout=300.0)  # a busy machine can take minutes to load the embedding model
        self.client = stack.enter_context(httpx.Client(timeout=300.0))
        self.url = self.gw.base_url + "/chat/completions"
        self.prefix = THREAD_PREFIX[name]

    def post(self, messages: list[dict[str, str]], headers: dict[str, str]) -> Any:
        self.fake.reset()
        resp = self.client.post(self.url, json={"model": MODEL, "messages": messages}, headers=headers)
        self.stats.requests += 1
        if resp.status_code != 200:
            self.stats.errors.append(f"{resp.status_code}: {resp.text[:200]}")
        return resp

    def check_tokens(self, resp: Any, key: str, budget: int, sent: int) -> None:
        header = resp.headers.get("x-pcp-prompt-tokens")
        if header is not None and header.isdigit():
            self.stats.header_seen += 1
            self.stats.header_over[key] += int(header) > budget
            self.stats.header_mismatch += abs(int(header) - sent) > 2
        self.stats.measured_over[key] += sent > budget
        self.stats.flagged_over[key] += resp.headers.get("x-pcp-over-budget") == "true"

    def headers(self, conv: Conversation, when: datetime) -> dict[str, str]:
        return {"Authorization": f"Bearer sk-{self.prefix}-{conv.id}", "X-PCP-Thread": f"{self.prefix}-{conv.id}",
                "X-PCP-Time": when.isoformat()}

    def replay(self, conv: Conversation) -> None:
        """One request per session with the whole history so far."""
        history: list[Turn] = []
        raw = 0  # the history's message tokens, kept incrementally (a LongMemEval history is ~115k tokens)
        for when, turns in conv.sessions:
            history.extend(turns)
            raw += sum(COUNTER.count_message({"role": t.role, "content": t.text}) for t in turns)
            resp = self.post(history_messages(history), self.headers(conv, when))
            body = pick_request(self.fake, history[-1].text)
            self.stats.replay_requests += 1
            self.stats.replay_forms[resp.headers.get("x-pcp-form", "n/a")] += 1
            if body is None:
                self.stats.no_upstream += 1
                continue
            sent = COUNTER.count_messages(body.get("messages") or [])
            self.check_tokens(resp, "replay", self.stats.replay_budget, sent)
            raw_request = raw + COUNTER.count_messages([])
            if raw_request <= self.stats.replay_budget:
                self.stats.replay_fit.append((sent, raw_request))
        self.fake.reset()

    def wait_pending(self, conv: Conversation) -> None:
        thread = f"{self.prefix}-{conv.id}"
        deadline = time.monotonic() + PENDING_WAIT_S
        while True:
            r = self.client.get(f"{self.gw.root_url}/pcp/threads/{thread}",
                                headers=self.headers(conv, conv.question_time))
            if r.status_code != 200:
                self.stats.pending_endpoint = f"HTTP {r.status_code} (no wait)"
                return
            pending = (r.json() or {}).get("pending_jobs", 0)
            self.stats.pending_endpoint = "polled"
            if not pending:
                return
            if time.monotonic() > deadline:
                log(f"  {thread}: still {pending} pending jobs after {PENDING_WAIT_S} s; asking anyway")
                return
            time.sleep(0.2)  # a benchmark polling a live process, not a test timing assertion

    def holders(self, conv: Conversation) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """For each evidence turn its questions need, the ids one Consult of which opens it (the pages whose content
        holds all its texts, whitespace aside, and the topics holding them), and the ids a Consult of which leads
        to it at last (those and every chapter above: a chapter opens on its table of contents)."""
        thread, headers = f"{self.prefix}-{conv.id}", self.headers(conv, conv.question_time)
        tree = self.client.get(f"{self.gw.root_url}/pcp/threads/{thread}", headers=headers).json().get("pages") or []
        wanted = {e: [squash(html.unescape(t)) for t in conv.evidence[e].texts] for q in conv.questions for e in q.evidence}
        near: dict[str, set[str]] = {e: set() for e in wanted}
        far: dict[str, set[str]] = {e: set() for e in wanted}
        for page, path in leaf_paths(tree).items():
            r = self.client.get(f"{self.gw.root_url}/pcp/threads/{thread}/pages/{page}", headers=headers)
            content = squash(html.unescape(r.json().get("content") or "")) if r.status_code == 200 else ""
            for e, texts in wanted.items():
                if all(t in content for t in texts):
                    near[e].update((page, *path[-1:]))
                    far[e].update((page, *path))
        return near, far

    def ask(self, conv: Conversation, budgets: Sequence[int], baselines: Baselines) -> list[Outcome]:
        full = history_messages(conv.turns)
        outcomes: list[Outcome] = []
        near, far = self.holders(conv)
        for q in conv.questions:
            raw = baselines.raw_tokens(q)
            for budget in budgets:
                headers = {**self.headers(conv, conv.question_time), "X-PCP-Budget": str(budget)}
                resp = self.post([*full, {"role": "user", "content": q.text}], headers)
                body = pick_request(self.fake, q.text)
                form = resp.headers.get("x-pcp-form", "n/a")
                if body is None:
                    self.stats.no_upstream += 1
                    outcomes.append(Outcome(conv.id, q.category, budget, len(q.evidence), (), q.evidence, 0, 0,
                                            raw, form))
                    continue
                out = judge(conv, q, budget, body.get("messages") or [])
                out.raw_tokens, out.form = raw, form
                context = content_text((body.get("messages") or [{}])[0])
                out.reached, out.named = within(out, near, context), within(out, far, context)
                if self.dump is not None:
                    self.dump.write(json.dumps({
                        "shape": self.name, "conversation": conv.id, "question": q.text, "category": q.category,
                        "budget": budget, "tokens": out.tokens, "reached": out.reached, "named": out.named,
                        "kept": {e: conv.evidence[e].texts for e in out.kept_ids},
                        "missed": {e: conv.evidence[e].texts for e in out.missed_ids},
                        "messages": body.get("messages") or []}) + "\n")
                outcomes.append(out)
                self.check_tokens(resp, f"B = {budget}", budget, out.tokens)
                self.stats.rounds[resp.headers.get("x-pcp-rounds", "?")] += 1
                router = resp.headers.get("x-pcp-router-ms")
                try:
                    self.stats.router_ms[conv.id].append(float(router))
                except (TypeError, ValueError):
                    pass
        return outcomes


    def keep(self, conversations: Sequence[str]) -> None:
        """Stop the gateway (Redis flushes its append-only file), copy the store and the replay's statistics into
        the cache, and start again on the same store."""
        assert self.cache is not None
        self.gw.stop()
        if self.cache.exists():
            shutil.rmtree(self.cache)
        shutil.copytree(self.data_dir, self.cache / "data")
        (self.cache / "replay.json").write_text(json.dumps(
            {"conversations": list(conversations), "revision": git_revision(), "stats": stats_to_json(self.stats)}))
        log(f"kept the replayed store in {self.cache}")
        self.gw.start(timeout=300.0)


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cached_replay(cache: Path | None, data: Dataset) -> dict[str, Any] | None:
    """The cache's record when it holds this shape's conversations, else None (the cache is rebuilt)."""
    if cache is None or not (cache / "replay.json").is_file() or not (cache / "data").is_dir():
        return None
    record: dict[str, Any] = json.loads((cache / "replay.json").read_text())
    if set(record.get("conversations", ())) != {c.id for c in data.conversations}:
        log(f"[{data.name}] {cache} holds other conversations; replaying again")
        return None
    return record


def run_gateway(data: Dataset, budgets: Sequence[int], stack: ExitStack, pcp: Mapping[str, Any],
                baselines: Mapping[str, Baselines], cache_root: Path | None = None, dump: Path | None = None
                ) -> tuple[list[Outcome], GatewayStats]:
    cache = cache_root / data.name if cache_root is not None else None
    record = cached_replay(cache, data)
    rep = Replayer(stack, pcp, data.name, cache)
    if dump is not None:
        rep.dump = stack.enter_context(dump.open("a", encoding="utf-8"))
    if cache is not None:
        if record is not None:
            rep.stats = stats_from_json(record["stats"])
            log(f"[{data.name}] asking on the store replayed by {record.get('revision')} ({cache}); "
                f"this checkout is {git_revision()}")
        else:
            for conv in data.conversations:
                t0 = time.perf_counter()
                rep.replay(conv)
                rep.wait_pending(conv)
                rep.stats.replay_s += time.perf_counter() - t0
                log(f"[{data.name}] replayed {conv.id} in {time.perf_counter() - t0:.1f}s")
            rep.keep([c.id for c in data.conversations])
        return ask_all(rep, data, budgets, baselines), rep.stats
    outcomes: list[Outcome] = []
    total = sum(len(c.questions) for c in data.conversations) * len(budgets)
    for ci, conv in enumerate(data.conversations, 1):
        t0 = time.perf_counter()
        rep.replay(conv)
        t1 = time.perf_counter()
        rep.wait_pending(conv)
        t2 = time.perf_counter()
        outcomes += rep.ask(conv, budgets, baselines[conv.id])
        t3 = time.perf_counter()
        rep.stats.replay_s += t2 - t0
        rep.stats.wait_s += t2 - t1
        rep.stats.questions_s += t3 - t2
        done = len(outcomes)
        log(f"[{data.name} {ci}/{len(data.conversations)}] {conv.id}: {len(conv.sessions)} sessions, "
            f"{len(conv.turns)} messages replayed in {t1 - t0:.1f}s + {t2 - t1:.1f}s waiting for background work; "
            f"{len(conv.questions) * len(budgets)} question requests in {t3 - t2:.1f}s; {done}/{total} done, "
            f"{rep.stats.questions_s / max(done, 1) * 1000:.0f} ms/request")
    return outcomes, rep.stats


def ask_all(rep: Replayer, data: Dataset, budgets: Sequence[int], baselines: Mapping[str, Baselines]
            ) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for conv in data.conversations:
        t0 = time.perf_counter()
        outcomes += rep.ask(conv, budgets, baselines[conv.id])
        rep.stats.questions_s += time.perf_counter() - t0
    log(f"[{data.name}] {len(outcomes)} question requests in {rep.stats.questions_s:.1f}s")
    return outcomes


def run_baselines(data: Dataset, budgets: Sequence[int], baselines: Mapping[str, Baselines]
                  ) -> tuple[dict[str, list[Outcome]], dict[str, list[Outcome]]]:
    results: dict[str, list[Outcome]] = {RECENT: [], CHUNKS: [], CHUNKS_WITHIN: []}
    reference: dict[str, list[Outcome]] = {f"{RECENT} (history-only B)": [], f"{CHUNKS} (history-only B)": []}
    for conv in data.conversations:
        b = baselines[conv.id]
        for q in conv.questions:
            for budget in budgets:
                results[RECENT].append(b.recent(q, budget))
                results[CHUNKS].append(b.bm25_chunks(q, budget))
                results[CHUNKS_WITHIN].append(b.bm25_chunks(q, budget, within=True))
                if data.name == "locomo":  # only LoCoMo's reference points count history text alone
                    reference[f"{RECENT} (history-only B)"].append(b.recent(q, budget, history_only=True))
                    reference[f"{CHUNKS} (history-only B)"].append(b.bm25_chunks(q, budget, history_only=True))
    return results, reference


def load_shapes(names: Sequence[str], args: argparse.Namespace) -> list[Dataset]:
    out: list[Dataset] = []
    locomo: Dataset | None = None
    for name in names:
        if name in ("locomo", "messaging"):
            if locomo is None:
                locomo = load_locomo(args.data)
                locomo.conversations = locomo.conversations[: args.conversations]
                for conv in locomo.conversations:
                    conv.questions = conv.questions[: args.questions]
            shape = locomo if name == "locomo" else to_messaging(locomo)
            out.append(with_names(shape) if args.names else shape)
        elif name == "realtalk":
            out.append(load_realtalk(args.realtalk_data))
        elif name == "chinese":
            out.append(load_chinese_shape())
        else:
            out.append(load_longmemeval(args.longmemeval_data, args.questions, held_out=args.held_out))
        log(f"[{name}] loaded {len(out[-1].conversations)} conversation(s), "
            f"{sum(len(c.questions) for c in out[-1].conversations)} questions")
    return out


def load_chinese_shape() -> Dataset:
    """The generated Chinese set (bench/chinese_chats.py), its BM25 baselines on the gateway's own Chinese words."""
    from bench.chinese_chats import load_chinese
    from gateway.adapters.segmenter import JiebaSegmenter
    from gateway.core.lexical import terms
    from gateway.core.scripts import install_segmenter

    install_segmenter(JiebaSegmenter())  # as the gateway's composition root does
    data = load_chinese()
    data.words = terms
    return data


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["recent_turns=1", "router_model=null"]`` -> ``{"recent_turns": 1, "router_model": None}``."""
    import yaml

    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--pcp wants KEY=VALUE, got {item!r}")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str], dict[str, Any], list[int]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dataset", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--conversations", type=int, default=None, help="the first N LoCoMo conversations")
    parser.add_argument("--questions", type=int, default=None,
                        help="at most N questions per LoCoMo conversation; N LongMemEval questions "
                        "(a seeded subset, stratified by type)")
    parser.add_argument("--held-out", action="store_true",
                        help="LongMemEval: questions outside the 30 tuned on (with --questions N, a stratified N of them)")
    parser.add_argument("--budgets", default="1000,2000,4000", help="comma-separated token budgets")
    parser.add_argument("--no-gateway", action="store_true", help="baselines only")
    parser.add_argument("--write-docs", action="store_true", help="replace the shapes' sections of --docs")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the Markdown file of the shapes' sections --write-docs updates")
    parser.add_argument("--summary-docs", type=Path, default=SUMMARY_DOCS,
                        help="the Markdown file of the summary --write-docs updates (its plot: recall.png beside it)")
    parser.add_argument("--data", type=Path, default=LOCOMO_DATA, help="locomo10.json (read in place)")
    parser.add_argument("--longmemeval-data", type=Path, default=LONGMEMEVAL_DATA,
                        help="longmemeval_s_dev.json.xz (read in place)")
    parser.add_argument("--realtalk-data", type=Path, default=REALTALK_DATA,
                        help="realtalk_dev.json.xz (read in place)")
    parser.add_argument("--names", action="store_true",
                        help="LoCoMo and its messaging variant with every line written `Name: text` (as REALTALK is)")
    parser.add_argument("--pcp", action="append", default=[], metavar="KEY=VALUE",
                        help="override a pcp setting of the gateway under test (YAML value), e.g. --pcp recent_turns=1")
    parser.add_argument("--replay-cache", type=Path, default=None, metavar="DIR",
                        help="keep the replayed store in DIR/<shape> and ask on it in later runs (see above)")
    parser.add_argument("--dump", type=Path, default=None, metavar="FILE",
                        help="append each question request's messages and outcome to FILE as JSON lines")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.dataset.split(",") if n.strip()]
    unknown = [n for n in names if n not in SHAPES]
    if unknown or not names:
        parser.error(f"--dataset: unknown {unknown or 'empty'}; choose from {', '.join(SHAPES)}")
    try:
        overrides = parse_overrides(args.pcp)
        budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError as exc:
        parser.error(str(exc))
    if not budgets or min(budgets) <= 0:
        parser.error("--budgets wants positive integers")
    if args.held_out and args.write_docs:
        parser.error("--held-out is a check on other questions: its numbers do not replace the docs' section")
    return args, names, overrides, budgets


def main(argv: Sequence[str] | None = None) -> int:
    args, names, overrides, budgets = parse_args(argv)
    command = ".venv/bin/python -m bench.evidence_recall " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    when = f"{datetime.now().astimezone():%Y-%m-%d %H:%M %Z}"

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    sections: dict[str, str] = {}
    rows: dict[str, str] = {}
    datasets = load_shapes(names, args)
    for data in datasets:
        t0 = time.perf_counter()
        baselines = {c.id: Baselines(c, data.words) for c in data.conversations}
        results, reference = run_baselines(data, budgets, baselines)
        log(f"[{data.name}] baselines in {time.perf_counter() - t0:.1f}s")
        stats = None
        if not args.no_gateway:
            with ExitStack() as stack:
                try:
                    gw, stats = run_gateway(data, budgets, stack, overrides, baselines, args.replay_cache,
                                            args.dump)
                except KeyboardInterrupt:
                    log("interrupted; stopping the gateway and the fake upstream")
                    return 130
            results = {GATEWAY: gw, **results}
        sections[data.name] = section(data, budgets, results, reference, stats, command, when)
        rows[data.title] = summary_row(data, budgets, results, stats, when)
        print(f"\n## {data.title}\n\n{sections[data.name]}\n", flush=True)
    if args.write_docs:
        write_docs(args.docs, sections, rows, SHAPE_TITLES, summary_path=args.summary_docs)
        picture = args.summary_docs.parent / PLOT.name
        plot(summary_rows(args.summary_docs.read_text(encoding="utf-8")), picture)
        log(f"wrote {args.docs}, {args.summary_docs} and {picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
