"""Answer quality with a real small model: the client's whole history, the gateway at a budget, BM25 chunks at the
same budget — one fixed, seeded question set over four conversation shapes, asked at temperature 0.

The model is the local one (``scripts/local-model``: llama.cpp's llama-server with Qwen2.5-Coder-1.5B-Instruct);
this starts its own server on a free loopback port (``--threads``, ``--ctx``; one slot, so llama.cpp's prompt cache
keeps one conversation's long prefix between its questions) unless ``--llama-url`` names a running one.

Question set (`bench.answer_set`): ``--questions N`` (default 60) stratified by shape (LoCoMo, its messaging
variant, a REALTALK chat, LongMemEval_S development questions) and by each shape's kinds, with a fixed seed; the
questions of a shape share one conversation, so its full history and its replayed thread serve them all.

Ways, each answering the same user message (the question and "Answer in a few words."):

* ``full``: every history message as the client has it, each session opened by a system line with its date, then
  the question; only where it fits the model's window (a LongMemEval history, ~115k tokens, never does: ``n/a``);
* ``gateway-B``: the real gateway (``python -m gateway serve``, embedded Redis in a temp dir). Each conversation is
  replayed first, exactly as ``bench/evidence_recall.py`` does it (one request per session with the history so
  far and the session's date as ``X-PCP-Time``) but against the scripted upstream, so ingest costs no model time;
  then the question is asked of the real model with ``X-PCP-Budget: B``, Consult rounds and all (the rounds and
  Consult calls are read from ``x-pcp-rounds`` and ``x-pcp-consults``);
* ``bm25-B``: the BM25 chunks of ``bench/baselines.py`` that fit B with the question, in conversation order, each
  chunk a user message opened by its session's date, then the question. The chunks are made of what the client
  sends (``as_sent``: ``user: …`` / ``assistant: …`` lines, names only where the messages carry them): with the
  dataset's names (``Gina: …``), which neither the gateway nor the full history is given on LoCoMo and its
  messaging variant, BM25 alone would be told who said what.

Scores (`bench.answer_scoring`): the judge-free exact-answer score (dates as dates at the gold's grain, numbers as
numbers, lists as sets), token F1, and whether every gold word appears; each way against the gateway question by
question: the mean difference and its bootstrap 95% interval (seeded). Tokens are the model's own prompt tokens
(llama-server's usage, summed over a request's rounds); time is wall time per answer.

Run from the repository root (the model installed with ``scripts/local-model install``):

    .venv/bin/python -m bench.answers [--questions N] [--shapes ...] [--ways full,gateway,bm25] [--budgets 2000] [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.baselines import COUNTER, Baselines, squash  # noqa: E402
from bench.answer_scoring import appears, exact, f1, gold_kind, normalize_dates, paired, tokens  # noqa: E402,F401
from bench.answer_set import SHAPES, Item, question_set  # noqa: E402
from bench.datasets import Conversation, Question, Turn  # noqa: E402
from bench.evidence_recall import history_messages  # noqa: E402
from bench.recall_report import replace_between  # noqa: E402

DOCS = ROOT / "docs" / "real-model.md"
MARKERS = ("<!-- answers:begin -->", "<!-- answers:end -->")  # what --write-docs replaces in DOCS
MODEL = "qwen-local"
ALIAS = "qwen2.5-coder-1.5b"
ASK = "Answer in a few words."
QUESTIONS = 60
MAX_TOKENS = 48
OUTPUT_MARGIN = 256  # tokens of the window left for the answer when deciding whether the full history fits


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- the ways ----------------------------------------------------------------------------------------------

def when_text(when: datetime) -> str:
    return f"{when.day} {when.strftime('%B %Y, %H:%M')}"


def full_messages(conv: Conversation, question: str) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for when, turns in conv.sessions:
        messages.append({"role": "system", "content": f"Conversation session of {when_text(when)}."})
        messages += history_messages(turns)
    return [*messages, {"role": "user", "content": question}]


def bm25_messages(base: Baselines, conv: Conversation, q: Question, question: str, budget: int) -> list[dict[str, str]]:
    chunks = base.chunk_sets[False]
    scores = base.bm25[False].scores(q.text)
    dates = [when for when, _ in conv.sessions]
    total = COUNTER.count_messages([{"role": "user", "content": question}])
    chosen: list[int] = []
    for i in sorted(range(len(chunks)), key=lambda i: (-scores[i], i)):
        text = f"(session of {when_text(dates[chunks[i].turns[0].session])})\n{chunks[i].text}"
        cost = COUNTER.count_message({"role": "user", "content": text})
        if total + cost <= budget:
            total += cost
            chosen.append(i)
    return [*({"role": "user", "content": f"(session of {when_text(dates[chunks[i].turns[0].session])})\n"
               f"{chunks[i].text}"} for i in sorted(chosen)),
            {"role": "user", "content": question}]


@dataclass(frozen=True)
class Reply:
    """One answer as the server gave it: its text, the prompt tokens, rounds and Consult calls, or an error."""

    text: str = ""
    prompt_tokens: int = 0
    rounds: int = 1
    consults: int = 0
    error: str = ""


@dataclass
class Result:
    way: str
    item: Item
    answer: str
    prompt_tokens: int
    seconds: float
    rounds: int = 1
    error: str = ""
    consults: int = 0
    standing: str = ""  # gateway ways: where the evidence stood in the first round (see GatewayWay.standing)

    @property
    def f1(self) -> float:
        return f1(self.answer, self.item.gold)

    @property
    def appears(self) -> bool:
        return appears(self.answer, self.item.gold)

    @property
    def exact(self) -> float:
        return exact(self.answer, self.item.gold)

    def saved(self) -> dict[str, Any]:
        """One line of ``--save``: enough to compare a later run with this one (``--against``)."""
        return {"way": self.way, "key": self.item.key, "answer": self.answer, "prompt_tokens": self.prompt_tokens,
                "seconds": round(self.seconds, 2), "rounds": self.rounds, "error": self.error,
                "consults": self.consults, "standing": self.standing}


def earlier(path: Path, label: str, items: Sequence[Item]) -> list[Result]:
    """An earlier run's results (``--save``) for the questions of ``items``, each way renamed ``<way>@<label>``."""
    by_key = {it.key: it for it in items}
    found: list[Result] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["key"] in by_key:
            found.append(Result(f"{row['way']}@{label}", by_key[row["key"]], row["answer"], int(row["prompt_tokens"]),
                                float(row["seconds"]), int(row["rounds"]), row.get("error", ""),
                                int(row.get("consults", 0)), row.get("standing", "")))
    return found


@dataclass
class Runner:
    llama: str  # base URL, no /v1
    window: int
    timeout: float
    client: Any = None
    results: list[Result] = field(default_factory=list)
    save: Path | None = None  # each answer is added to it as it comes: a run stopped halfway keeps what it asked

    def chat(self, url: str, model: str, messages: list[dict[str, str]], headers: Mapping[str, str] | None = None) -> Reply:
        body = {"model": model, "messages": messages,
                "temperature": 0, "max_tokens": MAX_TOKENS}
        try:
            r = self.client.post(url + "/chat/completions", json=body, headers=dict(headers or {}), timeout=self.timeout)
        except Exception as exc:  # a timeout or a dropped connection is a result, not a crash of the run
            return Reply(rounds=0, error=f"{type(exc).__name__}: {exc}"[:200])
        if r.status_code != 200:
            return Reply(rounds=0, error=f"HTTP {r.status_code}: {r.text[:200]}")
        data = r.json()
        return Reply((data["choices"][0]["message"].get("content") or "").strip(),
                     int((data.get("usage") or {}).get("prompt_tokens", 0)), int(r.headers.get("x-pcp-rounds", "1")),
                     int(r.headers.get("x-pcp-consults", "0")))

    def record(self, way: str, item: Item, reply: Reply, t0: float, standing: str = "") -> None:
        res = Result(way, item, reply.text, reply.prompt_tokens, time.perf_counter() - t0, reply.rounds, reply.error,
                     reply.consults, standing)
        self.results.append(res)
        if self.save is not None:
            with self.save.open("a", encoding="utf-8") as out:
                out.write(json.dumps(res.saved(), ensure_ascii=False) + "\n")
        log(f"  {way:>12} {item.key}: exact {res.exact:.0f} F1 {res.f1:.2f} {reply.prompt_tokens} tok "
            f"{res.seconds:.0f}s {reply.rounds}r {reply.consults}c {standing + ' ' if standing else ''}"
            f"{reply.error or repr(reply.text[:80])}")


class GatewayWay:
    """The gateway with two models: the scripted upstream for the replay, the real model for the questions."""

    def __init__(self, stack: ExitStack, llama: str) -> None:
        from tests.support.fake_upstream import FakeUpstream
        from tests.support.gateway_process import GatewayProcess, gateway_config

        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pcp-answers-")))
        self.fake = stack.enter_context(FakeUpstream())
        config = gateway_config(self.fake.url, tmp / "data", embedded=True, pcp={"raw_form": True, "max_rounds": 2})
        config["model_list"].append({
            "model_name": MODEL,
            "litellm_params": {"model": f"openai/{ALIAS}", "api_base": llama + "/v1", "api_key": "none", "timeout": 900},
            "model_info": {"max_input_tokens": 32768}})
        config["server"]["max_body_bytes"] = 64_000_000
        self.gw = GatewayProcess(config=config, workdir=tmp)
        stack.callback(self.gw.stop)
        log(f"starting the gateway (embedded Redis in {tmp}) ...")
        self.gw.start(timeout=300.0)
        self.replayed: set[str] = set()
        self.replay_seconds = 0.0
        self._pages: dict[tuple[str, str], str] = {}

    def headers(self, item: Item, when: datetime) -> dict[str, str]:
        return {"X-PCP-Thread": f"answers-{item.thread}", "X-PCP-Time": when.isoformat()}

    def replay(self, client: Any, item: Item) -> None:
        """Replay the item's conversation into its thread, once per shape and conversation."""
        if item.thread in self.replayed:
            return
        t0 = time.perf_counter()
        history: list[Turn] = []
        for when, turns in item.conv.sessions:
            history.extend(turns)
            self.fake.reset()
            client.post(self.gw.base_url + "/chat/completions", headers=self.headers(item, when), timeout=600,
                        json={"model": "fake-model", "messages": history_messages(history)})
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            r = client.get(f"{self.gw.root_url}/pcp/threads/answers-{item.thread}", headers=self.headers(item, item.conv.question_time))
            if r.status_code != 200 or not (r.json() or {}).get("pending_jobs", 0):
                break
            time.sleep(0.2)
        self.replayed.add(item.thread)
        self.replay_seconds += time.perf_counter() - t0

    def standing(self, client: Any, item: Item, budget: int) -> str:
        """Where the question's evidence stands in the context the gateway builds for it at ``budget`` (its first
        round, from the inspection route, without calling the model): ``shown`` (every evidence text is in it),
        ``answer shown`` (what is not shown is in pages the context lists, and the part of them it shows gives the
        gold answer: a number, a list or words, not a date or a yes), ``by id`` (in such pages, the answer not in
        view: one Consult away, a page listed by its id or under a listed container) or ``absent``; ``""`` when the
        question has no evidence texts or the route fails."""
        headers = self.headers(item, item.conv.question_time)
        base = f"{self.gw.root_url}/pcp/threads/answers-{item.thread}"
        r = client.get(base + "/context", params={"q": asked(item), "budget": budget, "model": MODEL}, headers=headers, timeout=120)
        texts = [t for eid in item.question.evidence if eid in item.conv.evidence for t in item.conv.evidence[eid].texts]
        if r.status_code != 200 or not texts:
            return ""
        shown = squash(" ".join(str(m.get("content") or "") for m in r.json()["messages"]))
        missing = [t for t in map(squash, texts) if t not in shown]
        if not missing:
            return "shown"
        listed = {pid for pair in re.findall(r"\[([0-9a-f]{8,12})\]|id=\"([0-9a-f]{8,12})\"", shown) for pid in pair if pid}
        holders = {pid for pid in listed if any(t in self._content(client, base, headers, pid) for t in missing)}
        if not all(any(t in self._content(client, base, headers, pid) for pid in holders) for t in missing):
            return "absent"
        # a long message is shown in part: its answer may be in the part shown, and then nothing needs a Consult
        seen = " ".join(in_view(shown, pid) for pid in holders)
        return "answer shown" if gold_kind(item.gold) in ("number", "list", "text") and exact(seen, item.gold) else "by id"

    def _content(self, client: Any, base: str, headers: Mapping[str, str], page: str) -> str:
        """A page's text and, for a container, its pages' (flattened; read once per page)."""
        key = (base, page)
        if key not in self._pages:
            r = client.get(f"{base}/pages/{page}", headers=headers, timeout=60)
            found = r.json() if r.status_code == 200 else {}
            self._pages[key] = ""  # a container's cycle cannot recurse forever
            self._pages[key] = " ".join([squash(found.get("content") or ""),
                                         *(self._content(client, base, headers, kid) for kid in found.get("source_ids", []))])
        return self._pages[key]


_ENTRY_END = re.compile(r"\[[0-9a-f]{8,12}\]|\d{4}-\d{2}-\d{2}:|other topics:|</Background_Context>|<Node |</Node>")


def in_view(context: str, page: str) -> str:
    """What ``context`` (squashed) shows of ``page``: the text of its ``[page]`` entry and of its Node, up to the
    next entry, date heading or node; "" when it shows neither."""
    parts = []
    for opening in (f"[{page}]", f'id="{page}"'):
        at = context.find(opening)
        if at >= 0:
            start = at + len(opening)
            end = _ENTRY_END.search(context, start)
            parts.append(context[start : end.start() if end else len(context)])
    return " ".join(parts)


@contextmanager
def llama_server(url: str | None, threads: int, ctx: int) -> Iterator[str]:
    if url:
        yield url.rstrip("/")
        return
    from tests.real_model.conftest import GGUF, SERVER_FLAGS, TEMPLATE, _healthy, _server_binary, model_dir
    from tests.support.gateway_process import free_port

    directory = model_dir()
    binary = _server_binary(directory)
    if binary is None or not (directory / GGUF).is_file():
        raise SystemExit(f"no local model in {directory}: run scripts/local-model install")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_file = open(Path(tempfile.gettempdir()) / f"answers-llama-{port}.log", "wb")
    process = subprocess.Popen(
        [str(binary), "-m", str(directory / GGUF), "--host", "127.0.0.1", "--port", str(port), "-a", ALIAS,
         "-c", str(ctx), "-np", "1", "-t", str(threads), *SERVER_FLAGS, "--chat-template-file", str(TEMPLATE)],
        stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not _healthy(base):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"llama-server did not start (log: {log_file.name})")
            time.sleep(0.5)
        log(f"llama-server pid {process.pid} on {base}, {threads} thread(s), window {ctx}")
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log_file.close()


# --- the report --------------------------------------------------------------------------------------------

def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summary(results: Sequence[Result], ways: Sequence[str], items: Sequence[Item]) -> str:
    lines = ["| way | answered | exact answer | token F1 | gold words appear | prompt tokens / answer | s / answer | "
             "rounds / answer | answers after a Consult | Consult calls | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for way in ways:
        rs = [r for r in results if r.way == way]
        if not rs:
            continue
        ok = [r for r in rs if not r.error]
        n = len(rs)
        lines.append(f"| {way} | {n}/{len(items)} | {_mean([r.exact for r in rs]):.3f} | {_mean([r.f1 for r in rs]):.3f} | "
                     f"{sum(r.appears for r in rs)}/{n} | {_mean([r.prompt_tokens for r in ok]):,.0f} | "
                     f"{_mean([r.seconds for r in rs]):.1f} | {_mean([r.rounds for r in ok]):.2f} | "
                     f"{sum(r.consults > 0 for r in rs)} | {sum(r.consults for r in rs)} | {n - len(ok)} |")
    return "\n".join(lines)


def standings(results: Sequence[Result], ways: Sequence[str]) -> str:
    lines = ["| way | evidence in the first round | questions | exact answer | Consult called | right after a Consult |",
             "|---|---|---:|---:|---:|---:|"]
    for way in (w for w in ways if w.startswith("gateway")):
        rs = [r for r in results if r.way == way]
        for standing in ("shown", "answer shown", "by id", "absent", ""):
            group = [r for r in rs if r.standing == standing]
            if group:
                consulted = [r for r in group if r.consults > 0]
                lines.append(f"| {way} | {standing or 'n/a'} | {len(group)} | {_mean([r.exact for r in group]):.3f} | "
                             f"{len(consulted)} | {sum(r.exact == 1 for r in consulted)} |")
    return "\n".join(lines)


def by_shape(results: Sequence[Result], ways: Sequence[str], items: Sequence[Item]) -> str:
    """Exact-answer score and token F1 of each way, per shape and kind."""
    lines = ["| shape | kind | questions | " + " | ".join(ways) + " |", "|---|---|---:|" + "---|" * len(ways)]
    by = {(r.way, r.item.key): r for r in results}
    groups: dict[tuple[str, str], list[Item]] = {}
    for it in items:
        groups.setdefault((it.shape, it.question.category), []).append(it)
    for (shape, kind), group in groups.items():
        cells = []
        for way in ways:
            rs = [by[(way, it.key)] for it in group if (way, it.key) in by]
            cells.append(f"{_mean([r.exact for r in rs]):.2f} / {_mean([r.f1 for r in rs]):.2f}" if rs else "n/a")
        lines.append(f"| {shape} | {kind} | {len(group)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def comparisons(results: Sequence[Result], ways: Sequence[str]) -> str:
    """Each gateway way against each other way, question by question, on the questions both answered."""
    by = {(r.way, r.item.key): r for r in results}
    lines = ["| gateway against | questions | exact: mean difference [95% interval] | better / worse / same | "
             "token F1: mean difference [95% interval] | better / worse / same | its prompt tokens / theirs |",
             "|---|---:|---|---:|---|---:|---:|"]
    for mine in (w for w in ways if w.startswith("gateway")):
        for other in (w for w in ways if w != mine):
            keys = [k for (w, k) in by if w == mine and (other, k) in by]
            if not keys:
                continue
            a, b = [by[(mine, k)] for k in keys], [by[(other, k)] for k in keys]
            ex, fs = paired([r.exact for r in a], [r.exact for r in b]), paired([r.f1 for r in a], [r.f1 for r in b])
            share = sum(r.prompt_tokens for r in a) / max(sum(r.prompt_tokens for r in b), 1)
            lines.append(f"| {mine} vs {other} | {len(keys)} | {ex.mean:+.3f} [{ex.low:+.3f}, {ex.high:+.3f}] | "
                         f"{ex.better} / {ex.worse} / {ex.tied} | {fs.mean:+.3f} [{fs.low:+.3f}, {fs.high:+.3f}] | "
                         f"{fs.better} / {fs.worse} / {fs.tied} | {share:.1%} |")
    return "\n".join(lines)


def per_question(results: Sequence[Result], ways: Sequence[str], items: Sequence[Item]) -> str:
    head = "| question | kind | gold | " + " | ".join(ways) + " |"
    lines = [head, "|" + "---|" * (3 + len(ways))]
    by = {(r.way, r.item.key): r for r in results}

    def cell(r: Result | None) -> str:
        if r is None:
            return "n/a"
        if r.error:
            return f"error ({r.error[:40]})".replace("|", "/")
        text = " ".join(r.answer.split())[:70].replace("|", "/")
        consults = f" {r.consults}c" if r.consults else ""
        return f"{r.f1:.2f}{' =' if r.exact else ''} {r.rounds}r{consults}: {text}"

    for it in items:
        q = it.question
        lines.append(f"| {it.key}: {' '.join(q.text.split())[:80].replace('|', '/')} | {q.category} | "
                     f"{' '.join(it.gold.split())[:50].replace('|', '/')} | "
                     + " | ".join(cell(by.get((w, it.key))) for w in ways) + " |")
    return "\n".join(lines)


def report(results: Sequence[Result], columns: Sequence[str], items: Sequence[Item]) -> str:
    return (f"{summary(results, columns, items)}\n\n"
            "Where each question's evidence stood in the gateway's first round (`shown`: every evidence text in the "
            "context; `answer shown`: the rest in pages it lists, the part of them shown giving the answer; `by id`: the "
            "rest in a page listed by its id, one Consult away; `absent`), and what the model did "
            "(exact-answer score, questions with a Consult call, and of those the ones answered right):\n\n"
            f"{standings(results, columns)}\n\n"
            "Each way against the gateway, per question (bootstrap over the questions, 10,000 resamples, seed 45; "
            "a difference within 0.05 counts as the same):\n\n"
            f"{comparisons(results, columns)}\n\n"
            "Per shape and kind (exact answer / token F1):\n\n"
            f"{by_shape(results, columns, items)}\n\n### Per question\n\n"
            "Each cell: token F1, = when the exact-answer score is 1, the request's rounds (r) and Consult calls (c), "
            "the answer's start.\n\n"
            f"{per_question(results, columns, items)}\n")


def by_standing(items: Sequence[Item], budget: int, kept: set[str]) -> list[Item]:
    """The items whose evidence stands as one of ``kept`` in the gateway's first round at ``budget`` (all of them
    when ``kept`` is empty), each conversation replayed into a gateway of its own and its questions' contexts read
    from the inspection route: no model is asked. Prints each item's standing."""
    import httpx

    found: list[Item] = []
    with ExitStack() as stack:
        client = stack.enter_context(httpx.Client())
        gateway = GatewayWay(stack, "http://127.0.0.1:9")  # the model is never called: only contexts are read
        for it in items:
            gateway.replay(client, it)
            standing = gateway.standing(client, it, budget)
            log(f"  {standing or '-':>6}  {it.key}  {it.question.category}: {it.question.text}")
            if not kept or standing in kept:
                found.append(it)
    log(f"{len(found)} of {len(items)} questions kept" + (f" ({', '.join(sorted(kept))})" if kept else ""))
    return found


def asked(item: Item) -> str:
    """The question as every way sends it."""
    return f"{item.question.text} {ASK}"


def _command(argv: Sequence[str] | None) -> str:
    """The command line of this run, as the docs quote it."""
    return ".venv/bin/python -m bench.answers " + " ".join(argv if argv is not None else sys.argv[1:])


def write_docs(path: Path, body: str) -> None:
    """Replace the run's marked section of ``path`` (:data:`MARKERS`), keeping the rest of the page; fail loudly
    when the markers are missing rather than overwrite the page."""
    text = path.read_text(encoding="utf-8")
    new = replace_between(text, MARKERS, body)
    if new is None:
        raise SystemExit(f"{path}: markers {MARKERS} not found")
    path.write_text(new, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=QUESTIONS, help=f"size of the fixed question set (default {QUESTIONS})")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--only", default="", help="comma-separated question keys of the set to ask (shape:id, a subset)")
    parser.add_argument("--ways", default="full,gateway,bm25", help="comma-separated, of full, gateway, bm25")
    parser.add_argument("--budgets", default="2000", help="comma-separated token budgets (gateway and bm25)")
    parser.add_argument("--llama-url", default=os.environ.get("PCP_LOCAL_MODEL_URL"), help="a running llama-server")
    parser.add_argument("--threads", type=int, default=1, help="llama-server threads (default 1: a shared machine)")
    parser.add_argument("--ctx", type=int, default=32768, help="the model's window (default 32768)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds for one answer")
    parser.add_argument("--write-docs", action="store_true", help=f"write the results to {DOCS.relative_to(ROOT)}")
    parser.add_argument("--docs", type=Path, default=DOCS)
    parser.add_argument("--save", type=Path, default=None, metavar="FILE", help="write every answer to FILE (JSON lines)")
    parser.add_argument("--report", type=Path, default=None, metavar="FILE",
                        help="ask nothing: the report of a run saved with --save (its questions, --write-docs as usual)")
    parser.add_argument("--against", default="", metavar="FILE[:LABEL]",
                        help="compare with an earlier run's --save FILE, its ways named <way>@LABEL (default: before)")
    parser.add_argument("--standing", default="", metavar="S,...",
                        help="ask only the questions whose evidence stands so in the gateway's first round at the first "
                             "budget, of shown, answer-shown, by-id, absent (each conversation replayed and its questions' contexts read "
                             "first, without the model); with --ways none, list every question's standing and ask nothing")
    args = parser.parse_args(argv)
    if args.write_docs:  # before an hour of answers, not after
        try:
            marked = replace_between(args.docs.read_text(encoding="utf-8"), MARKERS, "") is not None
        except OSError as exc:
            parser.error(f"--write-docs: cannot read {args.docs} ({exc.strerror}); nothing was asked")
        if not marked:
            parser.error(f"--write-docs: {args.docs} lacks the markers {MARKERS}; nothing was asked")
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    if not shapes or any(s not in SHAPES for s in shapes):
        parser.error(f"--shapes: choose from {', '.join(SHAPES)}")
    import httpx

    ways = [w.strip() for w in args.ways.split(",") if w.strip() and w.strip() != "none"]
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    items = question_set(args.questions, shapes)
    if args.only:
        wanted = set(args.only.split(","))
        items = [it for it in items if it.key in wanted]
    kept = {s.strip().replace("-", " ") for s in args.standing.split(",") if s.strip()}
    if kept - {"shown", "answer shown", "by id", "absent"}:
        parser.error("--standing: choose from shown, answer-shown, by-id, absent")
    columns = [w for w in ways if w == "full"] + [f"{w}-{b}" for w in ways if w != "full" for b in budgets]
    if args.report:  # (with --standing, the gateway answers that stood so when they were asked)
        saved = [replace(r, way=r.way.rpartition("@")[0]) for r in earlier(args.report, "saved", items)]
        saved = [r for r in saved if not kept or r.standing in kept]
        asked_items = [it for it in items if any(r.item.key == it.key for r in saved)]
        body = report(saved, [c for c in dict.fromkeys(r.way for r in saved)], asked_items)
        print(body)
        if args.write_docs:
            write_docs(args.docs, f"Command: `{_command(argv)}` (the report of a saved run)\n\n{body}")
        return 0
    if kept or not ways:
        items = by_standing(items, budgets[0], kept)
        if not ways:
            return 0
    log(f"{len(items)} questions ({', '.join(f'{s}: {sum(it.shape == s for it in items)}' for s in shapes)}), ways {columns}")
    started = time.perf_counter()
    replay_seconds = 0.0
    with ExitStack() as stack:
        llama = stack.enter_context(llama_server(args.llama_url, args.threads, args.ctx))
        if args.save:
            args.save.write_text("", encoding="utf-8")
        runner = Runner(llama, args.ctx, args.timeout, stack.enter_context(httpx.Client()), save=args.save)
        gateway = GatewayWay(stack, llama) if "gateway" in ways else None
        # grouped by thread (a shape's conversation), and within one by way: llama-server has one slot, so a
        # conversation's full history stays in its prompt cache only while its full-history questions follow one
        # another (a gateway or BM25 request in between replaces it, and the next would read it all again)
        by_thread: dict[str, list[Item]] = {}
        for it in items:
            by_thread.setdefault(it.thread, []).append(it)
        for group in by_thread.values():
            conv = group[0].conv
            for it in group if "full" in ways else ():
                log(f"[{it.key}] {it.question.text}  (gold: {it.gold})")
                messages = full_messages(conv, asked(it))
                if COUNTER.count_messages(messages) * 1.15 + OUTPUT_MARGIN > args.ctx:  # Qwen's tokens run ~10% above cl100k's
                    log(f"  {'full':>12} {it.key}: n/a ({COUNTER.count_messages(messages):,} tokens > window {args.ctx:,})")
                else:
                    t0 = time.perf_counter()
                    runner.record("full", it, runner.chat(llama + "/v1", ALIAS, messages), t0)
            base = Baselines(conv, as_sent=True) if "bm25" in ways else None
            for budget in budgets:
                if gateway is not None:
                    for it in group:
                        log(f"[{it.key}] {it.question.text}  (gold: {it.gold})")
                        gateway.replay(runner.client, it)
                        t0 = time.perf_counter()
                        headers = {**gateway.headers(it, conv.question_time), "X-PCP-Budget": str(budget)}
                        messages = [*history_messages(conv.turns), {"role": "user", "content": asked(it)}]
                        reply = runner.chat(gateway.gw.base_url, MODEL, messages, headers)
                        answered = time.perf_counter()
                        standing = gateway.standing(runner.client, it, budget)  # (its time is not the answer's)
                        runner.record(f"gateway-{budget}", it, reply, t0 + time.perf_counter() - answered, standing)
                for it in group if base is not None else ():
                    assert base is not None
                    t0 = time.perf_counter()
                    messages = bm25_messages(base, conv, it.question, asked(it), budget)
                    runner.record(f"bm25-{budget}", it, runner.chat(llama + "/v1", ALIAS, messages), t0)
        replay_seconds = gateway.replay_seconds if gateway is not None else 0.0
    results = runner.results
    minutes = (time.perf_counter() - started) / 60
    if args.save:
        log(f"saved {len(results)} answers to {args.save}")
    if args.against:
        path, _, label = args.against.partition(":")
        before = earlier(Path(path), label or "before", items)
        results = [*results, *before]
        columns = [*columns, *dict.fromkeys(r.way for r in before)]
    body = report(results, columns, items)
    print(body)
    log(f"done in {minutes:.1f} min (replays into the gateway: {replay_seconds / 60:.1f} min)")
    if args.write_docs:
        write_docs(args.docs, f"Command: `{_command(argv)}` (run {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; "
                              f"{minutes:.1f} minutes, {replay_seconds / 60:.1f} of them replaying into the gateway)\n\n{body}")
        log(f"wrote {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
