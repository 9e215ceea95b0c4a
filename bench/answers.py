"""Answer quality with a real small model: the client's whole history, the gateway at a budget, BM25 chunks at the
same budget — one fixed, seeded question set, asked at temperature 0.

The model is the local one (``scripts/local-model``: llama.cpp's llama-server with Qwen2.5-Coder-1.5B-Instruct);
this starts its own server on a free loopback port (``--threads``, ``--ctx``; one slot, so llama.cpp's prompt cache
keeps one conversation's long prefix between its questions) unless ``--llama-url`` names a running one.

Question set (fixed, seeded): LoCoMo temporal and single-hop questions from the conversation with the smallest
history (``--locomo-conversation``) — one conversation, so the full-history prefix is read once and then cached —
and a stratified seeded subset of LongMemEval_S development questions of every type (``bench.datasets``).

Ways, each answering the same user message (the question and "Answer in a few words."):

* ``full``: every history message as the client has it, each session opened by a system line with its date, then
  the question; only where it fits the model's window (a LongMemEval history, ~115k tokens, never does: marked
  ``n/a``);
* ``gateway-B``: the real gateway (``python -m gateway serve``, embedded Redis in a temp dir). Each conversation is
  replayed first, exactly as ``bench/evidence_recall.py`` does it (one request per session with the history so
  far and the session's date as ``X-PCP-Time``) but against the scripted upstream, so ingest costs no model time;
  then the question is asked of the real model with ``X-PCP-Budget: B``, Consult rounds and all;
* ``bm25-B``: the BM25 chunks of ``bench/baselines.py`` that fit B with the question, in conversation order, each
  chunk a user message opened by its session's date, then the question.

Scores: token F1 (SQuAD normalisation) and *appears* (every content word of the gold answer is in the answer),
dates compared as dates: "12 January, 2024", "January 12, 2024" and "2024-01-12" are the same token. Tokens are the
model's own prompt tokens (llama-server's usage, summed over a request's rounds); time is wall time per answer.

Run from the repository root (the model installed with ``scripts/local-model install``):

    .venv/bin/python -m bench.answers [--questions N] [--ways full,gateway,bm25] [--budgets 2000] [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.baselines import COUNTER, Baselines  # noqa: E402
from bench.datasets import (LOCOMO_DATA, LONGMEMEVAL_DATA, Conversation, Question, Turn,  # noqa: E402
                            load_locomo, load_longmemeval)
from bench.evidence_recall import history_messages  # noqa: E402
from bench.recall_report import replace_between  # noqa: E402

DOCS = ROOT / "docs" / "real-model.md"
MARKERS = ("<!-- answers:begin -->", "<!-- answers:end -->")  # what --write-docs replaces in DOCS
MODEL = "qwen-local"
ALIAS = "qwen2.5-coder-1.5b"
ASK = "Answer in a few words."
LOCOMO_KINDS = ("2 temporal", "4 single-hop")
MAX_TOKENS = 48
OUTPUT_MARGIN = 256  # tokens of the window left for the answer when deciding whether the full history fits


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- scoring -----------------------------------------------------------------------------------------------

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE_PATTERNS = [
    (re.compile(r"\b(\d{4})[-/](\d{1,2})[-/](\d{1,2})\b"), ("y", "m", "d")),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I), ("d", "M", "y")),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), ("M", "d", "y")),
    (re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I), ("M", "y")),
]


def _month(name: str) -> int:
    return next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(name.lower().rstrip(".")[:3]))


def normalize_dates(text: str) -> str:
    """Dates written in any of the usual ways become one token: 2024-01-12, or 2024-01 for a month."""
    for pattern, order in _DATE_PATTERNS:
        def iso(m: re.Match[str], order: tuple[str, ...] = order) -> str:
            parts = dict(zip(order, m.groups()))
            month = int(parts["m"]) if "m" in parts else _month(parts["M"])
            day = f"-{int(parts['d']):02d}" if "d" in parts else ""
            return f" {int(parts['y']):04d}-{month:02d}{day} "
        text = pattern.sub(iso, text)
    return text


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation if c != "-"})


def tokens(text: str) -> list[str]:
    text = normalize_dates(str(text)).lower().translate(_PUNCT)
    return [t.strip("-") for t in _ARTICLES.sub(" ", text).split() if t.strip("-")]


def f1(answer: str, gold: str) -> float:
    a, g = tokens(answer), tokens(gold)
    common = sum((Counter(a) & Counter(g)).values())
    if not a or not g or not common:
        return 0.0
    p, r = common / len(a), common / len(g)
    return 2 * p * r / (p + r)


_STOP = frozenset("a an the of on in at to and or is was were be by for from as with it its that this he she they his her their".split())


def appears(answer: str, gold: str) -> bool:
    needed = [t for t in tokens(gold) if t not in _STOP] or tokens(gold)
    have = set(tokens(answer))
    return bool(needed) and all(t in have for t in needed)


# --- the question set --------------------------------------------------------------------------------------

@dataclass
class Item:
    conv: Conversation
    question: Question
    gold: str


def locomo_answers(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for qi, qa in enumerate(sample["qa"]):
            out[f"{sample['sample_id']}/q{qi}"] = str(qa.get("answer", ""))
    return out


def longmemeval_answers(path: Path) -> dict[str, str]:
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        return {str(it["question_id"]): str(it["answer"]) for it in json.load(fh)}


def question_set(n: int, locomo_share: float, conversation: str | None) -> list[Item]:
    """The first ceil(share * n) LoCoMo temporal/single-hop questions of one conversation (alternating the two
    kinds, in file order) and a seeded stratified subset of the LongMemEval questions for the rest."""
    locomo = load_locomo(LOCOMO_DATA)
    if conversation:
        conv = next(c for c in locomo.conversations if c.id == conversation)
    else:  # the smallest history: its full prefix is the cheapest to read once
        conv = min(locomo.conversations, key=lambda c: sum(len(t.text) for t in c.turns))
    gold = locomo_answers(LOCOMO_DATA)
    want = -(-int(n * locomo_share * 100) // 100)
    by_kind = {k: [q for q in conv.questions if q.category == k] for k in LOCOMO_KINDS}
    picked: list[Question] = []
    while len(picked) < want and any(by_kind.values()):
        for k in LOCOMO_KINDS:
            if by_kind[k] and len(picked) < want:
                picked.append(by_kind[k].pop(0))
    items = [Item(conv, q, gold[q.id]) for q in picked]
    rest = n - len(items)
    if rest > 0:
        lme = load_longmemeval(LONGMEMEVAL_DATA, rest)
        answers = longmemeval_answers(LONGMEMEVAL_DATA)
        items += [Item(c, c.questions[0], answers[c.id]) for c in lme.conversations]
    return items


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


@dataclass
class Result:
    way: str
    item: Item
    answer: str
    prompt_tokens: int
    seconds: float
    rounds: int = 1
    error: str = ""

    @property
    def f1(self) -> float:
        return f1(self.answer, self.item.gold)

    @property
    def appears(self) -> bool:
        return appears(self.answer, self.item.gold)


@dataclass
class Runner:
    llama: str  # base URL, no /v1
    window: int
    timeout: float
    client: Any = None
    results: list[Result] = field(default_factory=list)

    def chat(self, url: str, model: str, messages: list[dict[str, str]], headers: Mapping[str, str] | None = None
             ) -> tuple[str, int, int, str]:
        body = {"model": model, "messages": messages,
                "temperature": 0, "max_tokens": MAX_TOKENS}
        try:
            r = self.client.post(url + "/chat/completions", json=body, headers=dict(headers or {}), timeout=self.timeout)
        except Exception as exc:  # a timeout or a dropped connection is a result, not a crash of the run
            return "", 0, 0, f"{type(exc).__name__}: {exc}"[:200]
        if r.status_code != 200:
            return "", 0, 0, f"HTTP {r.status_code}: {r.text[:200]}"
        data = r.json()
        text = (data["choices"][0]["message"].get("content") or "").strip()
        rounds = int(r.headers.get("x-pcp-rounds", "1"))
        return text, int((data.get("usage") or {}).get("prompt_tokens", 0)), rounds, ""

    def record(self, way: str, item: Item, call: tuple[str, int, int, str], t0: float) -> None:
        text, used, rounds, error = call
        res = Result(way, item, text, used, time.perf_counter() - t0, rounds, error)
        self.results.append(res)
        log(f"  {way:>12} {item.question.id}: F1 {res.f1:.2f} {'+' if res.appears else '-'} {used} tok "
            f"{res.seconds:.0f}s {rounds}r {error or repr(text[:80])}")


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

    def headers(self, conv: Conversation, when: datetime) -> dict[str, str]:
        return {"X-PCP-Thread": f"answers-{conv.id}", "X-PCP-Time": when.isoformat()}

    def replay(self, client: Any, conv: Conversation) -> None:
        if conv.id in self.replayed:
            return
        history: list[Turn] = []
        for when, turns in conv.sessions:
            history.extend(turns)
            self.fake.reset()
            client.post(self.gw.base_url + "/chat/completions", headers=self.headers(conv, when), timeout=600,
                        json={"model": "fake-model", "messages": history_messages(history)})
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            r = client.get(f"{self.gw.root_url}/pcp/threads/answers-{conv.id}", headers=self.headers(conv, conv.question_time))
            if r.status_code != 200 or not (r.json() or {}).get("pending_jobs", 0):
                break
            time.sleep(0.2)
        self.replayed.add(conv.id)


@contextmanager
def llama_server(url: str | None, threads: int, ctx: int) -> Iterator[str]:
    if url:
        yield url.rstrip("/")
        return
    from tests.real_model.conftest import GGUF, TEMPLATE, _healthy, _server_binary, model_dir
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
         "-c", str(ctx), "-np", "1", "-t", str(threads), "--jinja", "--no-warmup", "--chat-template-file",
         str(TEMPLATE)], stdout=log_file, stderr=subprocess.STDOUT)
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

def summary(results: Sequence[Result], ways: Sequence[str], items: Sequence[Item]) -> str:
    lines = ["| way | answered | token F1 | gold words appear | prompt tokens / answer | s / answer | errors |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for way in ways:
        rs = [r for r in results if r.way == way]
        if not rs:
            continue
        ok = [r for r in rs if not r.error]
        n = len(rs)
        lines.append(f"| {way} | {n}/{len(items)} | {sum(r.f1 for r in rs) / n:.3f} | "
                     f"{sum(r.appears for r in rs)}/{n} | {sum(r.prompt_tokens for r in ok) / max(len(ok), 1):,.0f} | "
                     f"{sum(r.seconds for r in rs) / n:.1f} | {n - len(ok)} |")
    return "\n".join(lines)


def paired(results: Sequence[Result], ways: Sequence[str]) -> str:
    """Each way against full history on the questions both answered (LoCoMo only: full fits nowhere else)."""
    full = {r.item.question.id: r for r in results if r.way == "full"}
    if not full:
        return ""
    lines = ["| way | questions | its F1 | full history F1 | its tokens / full's |", "|---|---:|---:|---:|---:|"]
    for way in ways:
        if way == "full":
            continue
        rs = [r for r in results if r.way == way and r.item.question.id in full]
        if rs:
            mine = sum(r.f1 for r in rs) / len(rs)
            theirs = sum(full[r.item.question.id].f1 for r in rs) / len(rs)
            share = sum(r.prompt_tokens for r in rs) / max(sum(full[r.item.question.id].prompt_tokens for r in rs), 1)
            lines.append(f"| {way} | {len(rs)} | {mine:.3f} | {theirs:.3f} | {share:.1%} |")
    return "\n".join(lines)


def per_question(results: Sequence[Result], ways: Sequence[str], items: Sequence[Item]) -> str:
    head = "| question | kind | gold | " + " | ".join(ways) + " |"
    lines = [head, "|" + "---|" * (3 + len(ways))]
    by = {(r.way, r.item.question.id): r for r in results}

    def cell(r: Result | None) -> str:
        if r is None:
            return "n/a"
        if r.error:
            return f"error ({r.error[:40]})".replace("|", "/")
        text = " ".join(r.answer.split())[:70].replace("|", "/")
        return f"{r.f1:.2f}{' ✓' if r.appears else ''} {r.rounds}r: {text}"

    for it in items:
        q = it.question
        lines.append(f"| {q.id}: {' '.join(q.text.split())[:80].replace('|', '/')} | {q.category} | "
                     f"{' '.join(it.gold.split())[:50].replace('|', '/')} | "
                     + " | ".join(cell(by.get((w, q.id))) for w in ways) + " |")
    return "\n".join(lines)


def asked(item: Item) -> str:
    """The question as every way sends it."""
    return f"{item.question.text} {ASK}"


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
    parser.add_argument("--questions", type=int, default=40, help="size of the fixed question set (default 40)")
    parser.add_argument("--locomo-share", type=float, default=0.6, help="share of LoCoMo questions (default 0.6)")
    parser.add_argument("--locomo-conversation", default=None, help="LoCoMo sample id (default: the smallest)")
    parser.add_argument("--only", default="", help="comma-separated question ids of the set to ask (a subset)")
    parser.add_argument("--ways", default="full,gateway,bm25", help="comma-separated, of full, gateway, bm25")
    parser.add_argument("--budgets", default="2000", help="comma-separated token budgets (gateway and bm25)")
    parser.add_argument("--llama-url", default=os.environ.get("PCP_LOCAL_MODEL_URL"), help="a running llama-server")
    parser.add_argument("--threads", type=int, default=1, help="llama-server threads (default 1: a shared machine)")
    parser.add_argument("--ctx", type=int, default=32768, help="the model's window (default 32768)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds for one answer")
    parser.add_argument("--write-docs", action="store_true", help=f"write the results to {DOCS.relative_to(ROOT)}")
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args(argv)
    if args.write_docs:  # before an hour of answers, not after
        try:
            marked = replace_between(args.docs.read_text(encoding="utf-8"), MARKERS, "") is not None
        except OSError as exc:
            parser.error(f"--write-docs: cannot read {args.docs} ({exc.strerror}); nothing was asked")
        if not marked:
            parser.error(f"--write-docs: {args.docs} lacks the markers {MARKERS}; nothing was asked")
    import httpx

    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    items = question_set(args.questions, args.locomo_share, args.locomo_conversation)
    if args.only:
        wanted = set(args.only.split(","))
        items = [it for it in items if it.question.id in wanted]
    columns = [w for w in ways if w == "full"] + [f"{w}-{b}" for w in ways if w != "full" for b in budgets]
    log(f"{len(items)} questions ({sum(it.conv.id.startswith('conv-') for it in items)} LoCoMo), ways {columns}")
    started = time.perf_counter()
    with ExitStack() as stack:
        llama = stack.enter_context(llama_server(args.llama_url, args.threads, args.ctx))
        runner = Runner(llama, args.ctx, args.timeout, stack.enter_context(httpx.Client()))
        gateway = GatewayWay(stack, llama) if "gateway" in ways else None
        baselines: dict[str, Baselines] = {}
        # grouped by conversation, and within one by way: llama-server has one slot, so a conversation's full
        # history stays in its prompt cache only while its full-history questions follow one another (a gateway or
        # BM25 request in between replaces it, and the next full question would read the whole history again)
        by_conversation: dict[str, list[Item]] = {}
        for it in sorted(items, key=lambda i: (i.conv.id, i.question.id)):
            by_conversation.setdefault(it.conv.id, []).append(it)
        for group in by_conversation.values():
            conv = group[0].conv
            for it in group if "full" in ways else ():
                log(f"[{it.question.id}] {it.question.text}  (gold: {it.gold})")
                messages = full_messages(conv, asked(it))
                if COUNTER.count_messages(messages) * 1.15 + OUTPUT_MARGIN > args.ctx:  # Qwen's tokens run ~10% above cl100k's
                    log(f"  {'full':>12} {it.question.id}: n/a ({COUNTER.count_messages(messages):,} tokens > window {args.ctx:,})")
                else:
                    t0 = time.perf_counter()
                    runner.record("full", it, runner.chat(llama + "/v1", ALIAS, messages), t0)
            for budget in budgets:
                if gateway is not None:
                    for it in group:
                        log(f"[{it.question.id}] {it.question.text}  (gold: {it.gold})")
                        gateway.replay(runner.client, conv)
                        t0 = time.perf_counter()
                        headers = {**gateway.headers(conv, conv.question_time), "X-PCP-Budget": str(budget)}
                        messages = [*history_messages(conv.turns), {"role": "user", "content": asked(it)}]
                        runner.record(f"gateway-{budget}", it, runner.chat(gateway.gw.base_url, MODEL, messages, headers), t0)
                for it in group if "bm25" in ways else ():
                    base = baselines.setdefault(conv.id, Baselines(conv))
                    t0 = time.perf_counter()
                    messages = bm25_messages(base, conv, it.question, asked(it), budget)
                    runner.record(f"bm25-{budget}", it, runner.chat(llama + "/v1", ALIAS, messages), t0)
    results = runner.results
    table = summary(results, columns, items)
    report = (f"{table}\n\n{paired(results, columns)}\n\n### Per question\n\n"
              "Each cell: token F1, ✓ when every gold word appears, the request's rounds (r), the answer's start.\n\n"
              f"{per_question(results, columns, items)}\n")
    print(report)
    log(f"done in {(time.perf_counter() - started) / 60:.1f} min")
    if args.write_docs:
        command = ".venv/bin/python -m bench.answers " + " ".join(argv if argv is not None else sys.argv[1:])
        write_docs(args.docs, f"Command: `{command}` (run {datetime.now().astimezone():%Y-%m-%d %H:%M %Z})\n\n{report}")
        log(f"wrote {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
