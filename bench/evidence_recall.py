"""Evidence recall on LoCoMo: what share of the turns a question needs reaches the upstream model, at a budget.

Replays each LoCoMo conversation (read in place from ``../shared/data/locomo10.json``; never copied into this
repository) through the real gateway (``python -m gateway serve``, embedded Redis in a temp dir) against the
recording fake upstream on loopback: one non-streamed request per session, whose messages are the whole history
so far (speaker_a -> user, speaker_b -> assistant, photos as ``[shares a photo: <caption>]``, no system message),
with the session's date as ``X-PCP-Time``. It then waits for the thread's background work and asks every question
of categories 1-4 at each budget B (``X-PCP-Budget``), sending the full history plus the question.

An evidence turn is *kept* when its full text (photo suffix included) appears verbatim in the concatenated message
contents the upstream received in the first round (raw, or after XML unescaping). B counts all message tokens sent
upstream (cl100k, per-message overhead included, tool schemas excluded): the question and the gateway's own
instructions count.

Baselines, computed locally on the same budgets with the same B and the same "kept" rule:

* recent turns: the most recent turns (as user/assistant messages) that fit with the question;
* BM25 chunks: ~256-token chunks of consecutive turns of one session, ranked by BM25 (k1=1.5, b=0.75) against the
  question, added in rank order while they fit (one user message per chunk, "Speaker: text" lines).

Run from the repository root:

    .venv/bin/python -m bench.evidence_recall [--conversations N] [--questions N] [--budgets 1000,2000,4000]
                                              [--no-gateway] [--write-docs] [--data PATH]
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gateway.core import TokenCounter  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.json"
DOCS = ROOT / "docs" / "benchmarks.md"
DOCS_BEGIN = "<!-- evidence-recall:begin -->"
DOCS_END = "<!-- evidence-recall:end -->"
MODEL = "fake-model"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DISTANCE_BUCKETS = ((0, 50, "0–50"), (51, 200, "51–200"), (201, 400, "201–400"), (401, 10**9, "400+"))
CHUNK_TOKENS = 256
BM25_K1, BM25_B = 1.5, 0.75
COUNTER = TokenCounter()
REFERENCE = {  # ../shared/data/README.md, B = history tokens only
    "recent turns": (0.04, 0.09, 0.19),
    "BM25 chunks": (0.73, 0.79, 0.85),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- data --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    role: str  # user | assistant
    text: str  # exactly what is sent (photo suffix included)
    session: int
    index: int  # position in the whole conversation


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[tuple[int, datetime, list[Turn]]]
    questions: list[Question]
    skipped_questions: int = 0

    @property
    def turns(self) -> list[Turn]:
        return [t for _, _, turns in self.sessions for t in turns]

    @property
    def question_time(self) -> datetime:
        return self.sessions[-1][1] + timedelta(days=1)


_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
_DATE = re.compile(r"(\d{1,2})[:.](\d{2})\s*([ap])\.?\s*m\.?\s*(?:on\s+)?(\d{1,2})\s+([A-Za-z]+)\.?,?\s*(\d{4})", re.I)


def parse_locomo_date(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> 2023-05-08 13:56 (naive; the gateway takes naive as UTC)."""
    m = _DATE.search(value)
    if not m:
        raise ValueError(f"unrecognised LoCoMo date: {value!r}")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "p" else 0)
    mon = _MONTHS.get(month[:3].lower())
    if mon is None:
        raise ValueError(f"unrecognised month in LoCoMo date: {value!r}")
    return datetime(int(year), mon, int(day), h, int(minute))


_EVIDENCE = re.compile(r"^D:?(\d+):(\d+)$")


def repair_evidence(raw: Iterable[str], known: set[str]) -> tuple[str, ...]:
    """Split on ';' and whitespace, repair 'D:11:26' -> 'D11:26' and 'D30:05' -> 'D30:5', drop unknown ids."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;\s]+", str(item)):
            m = _EVIDENCE.match(part.strip())
            if not m:
                continue
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia in known and dia not in out:
                out.append(dia)
    return tuple(out)


def turn_text(turn: Mapping[str, Any]) -> str:
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def load(path: Path) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out: list[Conversation] = []
    for sample in data:
        conv = sample["conversation"]
        a, b = conv["speaker_a"], conv["speaker_b"]
        keys = sorted((int(m.group(1)), k) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        sessions: list[tuple[int, datetime, list[Turn]]] = []
        index = 0
        for n, key in keys:
            raw_turns = conv[key] or []
            if not raw_turns:
                continue
            when = parse_locomo_date(conv[f"session_{n}_date_time"])
            turns = []
            for t in raw_turns:
                role = "user" if t["speaker"] == a else "assistant"
                turns.append(Turn(t["dia_id"], t["speaker"], role, turn_text(t), n, index))
                index += 1
            sessions.append((n, when, turns))
        known = {t.dia_id for _, _, ts in sessions for t in ts}
        questions, skipped = [], 0
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = repair_evidence(qa.get("evidence") or [], known)
            if not evidence:
                skipped += 1
                continue
            questions.append(Question(str(qa["question"]), int(qa["category"]), evidence))
        out.append(Conversation(sample["sample_id"], a, b, sessions, questions, skipped))
    return out


# --- measurement -------------------------------------------------------------------------------------------


def content_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def kept(text: str, raw: str, unescaped: str) -> bool:
    return text in raw or text in unescaped


@dataclass
class Outcome:
    """One (question, budget) measurement."""

    conv: str
    category: int
    budget: int
    evidence: int
    kept_ids: tuple[str, ...]
    missed_ids: tuple[str, ...]
    tokens: int
    loose: int = 0  # evidence turns found when whitespace runs are collapsed on both sides (superset of kept)

    @property
    def loose_recall(self) -> float:
        return self.loose / self.evidence

    @property
    def recall(self) -> float:
        return len(self.kept_ids) / self.evidence

    @property
    def all_kept(self) -> bool:
        return not self.missed_ids


def judge(conv: Conversation, by_id: Mapping[str, Turn], q: Question, budget: int,
          messages: Sequence[Mapping[str, Any]], tokens: int | None = None) -> Outcome:
    raw = "\n".join(content_text(m) for m in messages)
    unescaped = html.unescape(raw)
    hit = tuple(e for e in q.evidence if kept(by_id[e].text, raw, unescaped))
    miss = tuple(e for e in q.evidence if e not in hit)
    loose = len(hit)
    if miss:
        flat = squash(unescaped)
        loose += sum(squash(by_id[e].text) in flat for e in miss)
    return Outcome(conv.sample_id, q.category, budget, len(q.evidence), hit, miss,
                   COUNTER.count_messages(messages) if tokens is None else tokens, loose)


def squash(text: str) -> str:
    return " ".join(text.split())


# --- baselines ---------------------------------------------------------------------------------------------

STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below between
both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each few for from
further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his
how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
not of off on once only or other ought our ours ourselves out over own same shan't she she'd she'll she's should
shouldn't so some such than that that's the their theirs them themselves then there there's these they they'd
they'll they're they've this those through to too under until up very was wasn't we we'd we'll we're we've were
weren't what what's when when's where where's which while who who's whom why why's with won't would wouldn't you
you'd you'll you're you've your yours yourself yourselves also just will s t d ll m re ve y
""".split())
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class BM25:
    def __init__(self, docs: Sequence[str], k1: float = BM25_K1, b: float = BM25_B) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(words(d)) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avg = (sum(self.lens) / len(self.lens)) if self.lens else 0.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = [w for w in dict.fromkeys(words(query)) if w in self.idf]
        out = []
        for tf, length in zip(self.tfs, self.lens):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * length / (self.avg or 1.0))
            for w in terms:
                f = tf.get(w, 0)
                if f:
                    s += self.idf[w] * f * (self.k1 + 1) / (f + norm)
            out.append(s)
        return out


@dataclass
class Chunk:
    turns: list[Turn]
    text: str
    msg_tokens: int  # as one user message (count_message)
    text_tokens: int  # the text alone (the reference's definition)


def make_chunks(conv: Conversation) -> list[Chunk]:
    chunks: list[Chunk] = []
    for _, _, turns in conv.sessions:
        current: list[Turn] = []
        for turn in turns:
            current.append(turn)
            if COUNTER.count(chunk_text(current)) > CHUNK_TOKENS:
                chunks.append(build_chunk(current))
                current = []
        if current:
            chunks.append(build_chunk(current))
    return chunks


def chunk_text(turns: Sequence[Turn]) -> str:
    return "\n".join(f"{t.speaker}: {t.text}" for t in turns)


def build_chunk(turns: list[Turn]) -> Chunk:
    text = chunk_text(turns)
    return Chunk(list(turns), text, COUNTER.count_message({"role": "user", "content": text}), COUNTER.count(text))


class Baselines:
    """Both baselines for one conversation; `history_only` = the reference's B (history text tokens only)."""

    def __init__(self, conv: Conversation) -> None:
        self.conv = conv
        self.turns = conv.turns
        self.by_id = {t.dia_id: t for t in self.turns}
        self.turn_msg_tokens = [COUNTER.count_message({"role": t.role, "content": t.text}) for t in self.turns]
        self.turn_text_tokens = [COUNTER.count(t.text) for t in self.turns]
        self.chunks = make_chunks(conv)
        self.bm25 = BM25([c.text for c in self.chunks])

    def recent(self, q: Question, budget: int, history_only: bool = False) -> Outcome:
        question = {"role": "user", "content": q.text}
        total = 0 if history_only else COUNTER.count_messages([question])
        costs = self.turn_text_tokens if history_only else self.turn_msg_tokens
        kept_turns: list[Turn] = []
        for i in range(len(self.turns) - 1, -1, -1):
            if total + costs[i] > budget:
                break
            total += costs[i]
            kept_turns.append(self.turns[i])
        kept_turns.reverse()
        messages = [{"role": t.role, "content": t.text} for t in kept_turns]
        return judge(self.conv, self.by_id, q, budget, messages, tokens=total)

    def bm25_chunks(self, q: Question, budget: int, history_only: bool = False) -> Outcome:
        question = {"role": "user", "content": q.text}
        total = 0 if history_only else COUNTER.count_messages([question])
        scores = self.bm25.scores(q.text)
        order = sorted(range(len(self.chunks)), key=lambda i: (-scores[i], i))
        chosen: list[int] = []
        for i in order:
            cost = self.chunks[i].text_tokens if history_only else self.chunks[i].msg_tokens
            if total + cost <= budget:
                total += cost
                chosen.append(i)
        messages = [{"role": "user", "content": self.chunks[i].text} for i in sorted(chosen)]
        return judge(self.conv, self.by_id, q, budget, messages, tokens=total)


# --- the gateway run ---------------------------------------------------------------------------------------


@dataclass
class GatewayStats:
    replay_s: float = 0.0
    questions_s: float = 0.0
    router_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    over_budget: list[tuple[int, int]] = field(default_factory=list)  # (B, x-pcp-prompt-tokens) with tokens > B
    measured_over: int = 0  # our own count of the received messages > B
    prompt_header_seen: int = 0
    header_mismatch: int = 0  # |x-pcp-prompt-tokens - our count| > 2
    errors: list[str] = field(default_factory=list)
    pending_endpoint: str = "not tried"
    requests: int = 0
    no_upstream: int = 0
    rounds: Counter[str] = field(default_factory=Counter)


def history_messages(turns: Sequence[Turn]) -> list[dict[str, str]]:
    return [{"role": t.role, "content": t.text} for t in turns]


def pick_request(fake: Any, question: str) -> Mapping[str, Any] | None:
    """The first upstream chat request this question caused (ignoring anything that does not end with it)."""
    chats: list[Mapping[str, Any]] = [r.body for r in fake.chat_requests if r.body]
    for body in chats:
        msgs = body.get("messages") or []
        if msgs and content_text(msgs[-1]) == question:
            return body
    return chats[0] if chats else None


def run_gateway(convs: Sequence[Conversation], budgets: Sequence[int], max_questions: int | None,
                stack: ExitStack, pcp: Mapping[str, Any]) -> tuple[list[Outcome], GatewayStats]:
    import httpx

    from tests.support.fake_upstream import FakeUpstream
    from tests.support.gateway_process import GatewayProcess, gateway_config

    stats = GatewayStats()
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pcp-evidence-")))
    fake = stack.enter_context(FakeUpstream())
    config = gateway_config(fake.url, tmp / "data", embedded=True, pcp={"budget_tokens": 4000, **pcp})
    config["server"]["max_body_bytes"] = 16_000_000
    log(f"starting the gateway (embedded Redis in {tmp}) ...")
    gw = GatewayProcess(config=config, workdir=tmp)
    stack.callback(gw.stop)
    gw.start()
    client = stack.enter_context(httpx.Client(timeout=60.0))
    url = gw.base_url + "/chat/completions"

    total_q = sum(len(c.questions[:max_questions]) for c in convs) * len(budgets)
    done_q = 0
    t_questions = 0.0
    outcomes: list[Outcome] = []

    def post(messages: list[dict[str, str]], headers: dict[str, str]) -> httpx.Response:
        resp = client.post(url, json={"model": MODEL, "messages": messages}, headers=headers)
        stats.requests += 1
        if resp.status_code != 200:
            stats.errors.append(f"{resp.status_code}: {resp.text[:200]}")
        return resp

    for ci, conv in enumerate(convs, 1):
        thread = f"locomo-{conv.sample_id}"
        base_headers = {"Authorization": f"Bearer sk-locomo-{conv.sample_id}", "X-PCP-Thread": thread}
        # replay: one request per session, the whole history so far
        t0 = time.perf_counter()
        history: list[Turn] = []
        for n, when, turns in conv.sessions:
            history.extend(turns)
            post(history_messages(history), {**base_headers, "X-PCP-Time": when.isoformat()})
        fake.reset()
        # background work
        deadline = time.monotonic() + 600
        while True:
            r = client.get(f"{gw.root_url}/pcp/threads/{thread}", headers=base_headers)
            if r.status_code == 404:
                stats.pending_endpoint = "404 (no wait)"
                break
            if r.status_code != 200:
                stats.pending_endpoint = f"HTTP {r.status_code} (no wait)"
                break
            pending = (r.json() or {}).get("pending_jobs", 0)
            stats.pending_endpoint = "polled"
            if not pending or time.monotonic() > deadline:
                if pending:
                    log(f"  {thread}: still {pending} pending jobs after 600 s; asking anyway")
                break
            time.sleep(0.2)
        replay_s = time.perf_counter() - t0
        stats.replay_s += replay_s
        log(f"[{ci}/{len(convs)}] {thread}: replayed {len(conv.sessions)} sessions, {len(history)} turns "
            f"in {replay_s:.1f}s")

        # questions
        full = history_messages(history)
        by_id = {t.dia_id: t for t in history}
        q_headers = {**base_headers, "X-PCP-Time": conv.question_time.isoformat()}
        t1 = time.perf_counter()
        questions = conv.questions[:max_questions]
        for qi, q in enumerate(questions):
            for budget in budgets:
                fake.reset()
                resp = post([*full, {"role": "user", "content": q.text}], {**q_headers, "X-PCP-Budget": str(budget)})
                body = pick_request(fake, q.text)
                if body is None:
                    stats.no_upstream += 1
                    outcomes.append(Outcome(conv.sample_id, q.category, budget, len(q.evidence), (), q.evidence, 0))
                    continue
                received = body.get("messages") or []
                out = judge(conv, by_id, q, budget, received)
                outcomes.append(out)
                if out.tokens > budget:
                    stats.measured_over += 1
                header = resp.headers.get("x-pcp-prompt-tokens")
                if header is not None and header.isdigit():
                    stats.prompt_header_seen += 1
                    if int(header) > budget:
                        stats.over_budget.append((budget, int(header)))
                    if abs(int(header) - out.tokens) > 2:
                        stats.header_mismatch += 1
                stats.rounds[resp.headers.get("x-pcp-rounds", "?")] += 1
                router = resp.headers.get("x-pcp-router-ms")
                if router is not None:
                    try:
                        stats.router_ms[conv.sample_id].append(float(router))
                    except ValueError:
                        pass
                done_q += 1
            if (qi + 1) % 10 == 0 or qi + 1 == len(questions):
                elapsed = t_questions + time.perf_counter() - t1
                rate = elapsed / max(done_q, 1)
                log(f"  {thread}: {qi + 1}/{len(questions)} questions; overall {done_q}/{total_q} requests, "
                    f"{rate * 1000:.0f} ms/request, ETA {rate * (total_q - done_q) / 60:.1f} min (questions only)")
        t_questions += time.perf_counter() - t1
    stats.questions_s = t_questions
    fake.reset()
    return outcomes, stats


# --- report ------------------------------------------------------------------------------------------------


def mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def fmt(x: float) -> str:
    return "—" if x != x else f"{x:.3f}"


def percentile(xs: Sequence[float], p: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def recall_table(results: Mapping[str, list[Outcome]], budgets: Sequence[int]) -> str:
    cats = " | ".join(f"{c} {name}" for c, name in CATEGORIES.items())
    lines = [f"| method | B | recall | {cats} | all-evidence | tokens used (mean) | questions |",
             "|---|---:|---:|" + "---:|" * len(CATEGORIES) + "---:|---:|---:|"]
    for method, outs in results.items():
        for budget in budgets:
            rows = [o for o in outs if o.budget == budget]
            if not rows:
                continue
            per_cat = " | ".join(fmt(mean(o.recall for o in rows if o.category == c)) for c in CATEGORIES)
            lines.append(f"| {method} | {budget} | **{fmt(mean(o.recall for o in rows))}** | {per_cat} | "
                         f"{fmt(mean(o.all_kept for o in rows))} | {mean(o.tokens for o in rows):.0f} | {len(rows)} |")
    return "\n".join(lines)


def bucket(distance: int) -> str:
    for lo, hi, name in DISTANCE_BUCKETS:
        if lo <= distance <= hi:
            return name
    return DISTANCE_BUCKETS[-1][2]


def misses_table(outs: Sequence[Outcome], convs: Mapping[str, Conversation], budget: int) -> str:
    n_turns = {cid: len(c.turns) for cid, c in convs.items()}
    by_id = {cid: {t.dia_id: t for t in c.turns} for cid, c in convs.items()}
    cells: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])  # (cat, bucket) -> [missed, total]
    for o in outs:
        if o.budget != budget:
            continue
        for dia, missed in [*((d, False) for d in o.kept_ids), *((d, True) for d in o.missed_ids)]:
            distance = n_turns[o.conv] - 1 - by_id[o.conv][dia].index
            counts = cells[(o.category, bucket(distance))]
            counts[0] += missed
            counts[1] += 1
    names = [name for _, _, name in DISTANCE_BUCKETS]

    def cell(cs: Iterable[tuple[int, str]]) -> str:
        m = sum(cells[c][0] for c in cs if c in cells)
        t = sum(cells[c][1] for c in cs if c in cells)
        return f"{m}/{t}" + (f" ({m / t:.0%})" if t else "")

    lines = ["| category \\ distance back (turns) | " + " | ".join(names) + " | all |",
             "|---|" + "---:|" * (len(names) + 1)]
    for c, cname in CATEGORIES.items():
        lines.append(f"| {c} {cname} | " + " | ".join(cell([(c, b)]) for b in names)
                     + f" | {cell([(c, b) for b in names])} |")
    lines.append("| all | " + " | ".join(cell([(c, b) for c in CATEGORIES]) for b in names)
                 + f" | {cell([(c, b) for c in CATEGORIES for b in names])} |")
    return "\n".join(lines)


def reference_table(results: Mapping[str, list[Outcome]], budgets: Sequence[int]) -> str:
    lines = ["| method (B = history text tokens only) | " + " | ".join(f"@{b}" for b in budgets)
             + " | reference @1k / @2k / @4k |", "|---|" + "---:|" * len(budgets) + "---|"]
    for method, outs in results.items():
        ref = REFERENCE.get(method.replace(" (history-only B)", ""))
        vals = " | ".join(fmt(mean(o.recall for o in outs if o.budget == b)) for b in budgets)
        lines.append(f"| {method} | {vals} | {' / '.join(f'{r:.2f}' for r in ref) if ref else ''} |")
    return "\n".join(lines)


def router_lines(stats: GatewayStats, convs: Mapping[str, Conversation]) -> list[str]:
    every = [ms for xs in stats.router_ms.values() for ms in xs]
    if not every:
        return ["- router ms (`x-pcp-router-ms`) over the question requests: n/a (header absent)",
                "- router ms p50 on the longest thread: n/a (header absent)"]
    out = [f"- router ms over the question requests ({len(every)}): p50 {percentile(every, .5):.1f}, "
           f"p90 {percentile(every, .9):.1f}"]
    longest = max((cid for cid in stats.router_ms), key=lambda cid: len(convs[cid].turns))
    n = len(convs[longest].turns)
    xs = stats.router_ms[longest]
    note = "" if n >= 600 else " — no thread of ≥ 600 turns in this run"
    out.append(f"- router ms p50 on the longest thread ({n} turns, {longest}): {percentile(xs, .5):.1f} "
               f"(p90 {percentile(xs, .9):.1f}, {len(xs)} requests){note}")
    return out


def report(args: argparse.Namespace, convs: Sequence[Conversation], budgets: Sequence[int],
           results: dict[str, list[Outcome]], reference: dict[str, list[Outcome]],
           stats: GatewayStats | None, command: str) -> str:
    by_cid = {c.sample_id: c for c in convs}
    n_q = sum(len(c.questions[: args.questions]) for c in convs)
    skipped = sum(c.skipped_questions for c in convs)
    parts = [
        f"Command: `{command}` (run {datetime.now().astimezone():%Y-%m-%d %H:%M %Z})",
        "",
        f"Data: {len(convs)} conversation(s), {sum(len(c.turns) for c in convs)} turns, {n_q} questions of categories "
        f"1–4 ({skipped} without usable evidence skipped; category 5 excluded). B = all message tokens sent upstream "
        "in the first round (cl100k with per-message overhead, tool schemas excluded; the question and the "
        "gateway's instructions count). An evidence turn is kept when its full text (photo suffix included) is a "
        "substring of the message contents the upstream received, raw or XML-unescaped.",
        "",
        recall_table(results, budgets),
        "",
        "Baselines with the reference's definition of B (history text tokens only, no question, no overhead), to "
        "check them against `../shared/data/README.md`:",
        "",
        reference_table(reference, budgets),
    ]
    if stats is not None:
        gw = results.get("pcp gateway", [])
        miss_budget = 2000 if 2000 in budgets else budgets[0]
        over = stats.over_budget
        parts += [
            "",
            f"Gateway misses at B = {miss_budget} (missed / evidence turns), by category and distance back "
            "(turns between the evidence turn and the end of the conversation):",
            "",
            misses_table(gw, by_cid, miss_budget),
            "",
            "Gateway run:",
            "",
            f"- wall time: replay {stats.replay_s:.1f} s, questions {stats.questions_s:.1f} s "
            f"({stats.questions_s / max(len(gw), 1) * 1000:.0f} ms per question request); "
            f"{stats.requests} requests, {len(stats.errors)} errors, {stats.no_upstream} without an upstream call",
            f"- `X-PCP-Budget` honoured: "
            + ("n/a (no `x-pcp-prompt-tokens` header)" if not stats.prompt_header_seen else
               ("yes (every `x-pcp-prompt-tokens` ≤ B)" if not over else
                f"**no** — {len(over)}/{stats.prompt_header_seen} responses report `x-pcp-prompt-tokens` > B "
                f"(e.g. B={over[0][0]}: {over[0][1]})"))
            + f"; by our own count {stats.measured_over}/{len(gw)} received prompts exceed B",
            "- whitespace-insensitive recall (evidence text found once whitespace runs are collapsed on both "
            "sides; not the measure above): "
            + ", ".join(f"@{b} {fmt(mean(o.loose_recall for o in gw if o.budget == b))}" for b in budgets),
            f"- `x-pcp-prompt-tokens` vs our count of the received messages: {stats.header_mismatch} differ by > 2",
            f"- `x-pcp-rounds`: {dict(stats.rounds)}; background-work endpoint: {stats.pending_endpoint}",
            *router_lines(stats, by_cid),
        ]
        if stats.errors:
            parts += ["", "First errors:", "", *(f"- `{e}`" for e in stats.errors[:5])]
    return "\n".join(parts)


def write_docs(section: str) -> None:
    block = f"{DOCS_BEGIN}\n{section}\n{DOCS_END}"
    if DOCS.exists():
        text = DOCS.read_text(encoding="utf-8")
        if DOCS_BEGIN in text and DOCS_END in text:
            head, rest = text.split(DOCS_BEGIN, 1)
            text = head + block + rest.split(DOCS_END, 1)[1]
        else:
            text = text.rstrip("\n") + "\n\n## Evidence recall on LoCoMo — latest results\n\n" + block + "\n"
    else:
        text = ("# Benchmarks\n\n## Evidence recall on LoCoMo — latest results\n\n"
                "Written by `bench/evidence_recall.py --write-docs`.\n\n" + block + "\n")
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    DOCS.write_text(text, encoding="utf-8")
    log(f"wrote {DOCS}")


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=None, help="use the first N conversations (default all)")
    parser.add_argument("--questions", type=int, default=None, help="at most N questions per conversation")
    parser.add_argument("--budgets", default="1000,2000,4000", help="comma-separated token budgets")
    parser.add_argument("--no-gateway", action="store_true", help="baselines only")
    parser.add_argument("--write-docs", action="store_true", help=f"replace the results section of {DOCS.name}")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json (read in place)")
    parser.add_argument("--pcp", action="append", default=[], metavar="KEY=VALUE",
                        help="override a pcp setting of the gateway under test (YAML value), e.g. --pcp recent_turns=1")
    args = parser.parse_args(argv)
    try:
        overrides = parse_overrides(args.pcp)
    except ValueError as exc:
        parser.error(str(exc))
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    command = ".venv/bin/python -m bench.evidence_recall " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))

    convs = load(args.data)[: args.conversations]
    log(f"loaded {len(convs)} conversations from {args.data}")

    results: dict[str, list[Outcome]] = {}
    stats: GatewayStats | None = None

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    with ExitStack() as stack:
        try:
            if not args.no_gateway:
                results["pcp gateway"], stats = run_gateway(convs, budgets, args.questions, stack, overrides)
        except KeyboardInterrupt:
            log("interrupted; stopping the gateway and the fake upstream")
            return 130

    base_recent, base_bm25, ref_recent, ref_bm25 = [], [], [], []
    for conv in convs:
        b = Baselines(conv)
        for q in conv.questions[: args.questions]:
            for budget in budgets:
                base_recent.append(b.recent(q, budget))
                base_bm25.append(b.bm25_chunks(q, budget))
                ref_recent.append(b.recent(q, budget, history_only=True))
                ref_bm25.append(b.bm25_chunks(q, budget, history_only=True))
    results["recent turns"] = base_recent
    results["BM25 chunks"] = base_bm25
    reference = {"recent turns (history-only B)": ref_recent, "BM25 chunks (history-only B)": ref_bm25}

    section = report(args, convs, budgets, results, reference, stats, command)
    print(section)
    if args.write_docs:
        write_docs(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
