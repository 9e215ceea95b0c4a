"""What counts as kept, and the two baselines the gateway is measured against.

Owns: ``judge`` (an evidence id is kept when every one of its texts is a substring of the message contents the
upstream received, raw or XML-unescaped; a question's checkable answer, ``Question.answer``, is shown when it is
one, case aside), the per-measurement ``Outcome``, and the baselines computed locally on
the same budget B and the same rule:

* recent turns: the most recent messages (as user/assistant messages) that fit with the question;
* BM25 chunks: chunks of consecutive messages of one session, closed once they exceed ~256 tokens, ranked by BM25
  (k1=1.5, b=0.75) against the question and added in rank order while they fit (one user message per chunk,
  ``Speaker: text`` lines, the dataset's names, as the reference points were made; ``as_sent``: ``role: text``
  lines, what a client that sends no names gives a gateway — a message that carries its names in its lines keeps
  them either way);
* BM25 chunks ≤256: the same, but a message joins a chunk only while the chunk stays within 256 tokens (a longer
  message is a chunk of its own).

B counts all message tokens (cl100k, per-message overhead included), the question's included; with
``history_only`` it counts history text only (the definition of the reference points in ``../shared/data``).
"""

from __future__ import annotations

import html
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.datasets import Conversation, Question, Turn
from gateway.core import TokenCounter

CHUNK_TOKENS = 256
BM25_K1, BM25_B = 1.5, 0.75
COUNTER = TokenCounter()


def content_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def squash(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Outcome:
    """One (question, budget) measurement."""

    conv: str
    category: str
    budget: int
    evidence: int
    kept_ids: tuple[str, ...]
    missed_ids: tuple[str, ...]
    tokens: int
    loose: int = 0  # evidence found when whitespace runs are collapsed on both sides (superset of kept)
    raw_tokens: int = 0  # the client's request as sent (history + question), counted like `tokens`
    form: str = "n/a"  # the gateway's x-pcp-form header
    answer_shown: bool | None = None  # whether the question's checkable answer (Question.answer) was received
    # evidence within one Consult (shown, or its page or the topic holding it named by id), and within reach of
    # Consults down the chapters above it (bench.evidence_recall)
    reached: int | None = None
    named: int | None = None

    @property
    def loose_recall(self) -> float:
        return self.loose / self.evidence

    @property
    def recall(self) -> float:
        return len(self.kept_ids) / self.evidence

    @property
    def reach(self) -> float:
        return (self.reached if self.reached is not None else len(self.kept_ids)) / self.evidence

    @property
    def named_share(self) -> float:
        return (self.named if self.named is not None else len(self.kept_ids)) / self.evidence

    @property
    def all_kept(self) -> bool:
        return not self.missed_ids


def judge(conv: Conversation, q: Question, budget: int, messages: Sequence[Mapping[str, Any]],
          tokens: int | None = None) -> Outcome:
    raw = "\n".join(content_text(m) for m in messages)
    unescaped = html.unescape(raw)
    hit = tuple(e for e in q.evidence
                if all(t in raw or t in unescaped for t in conv.evidence[e].texts))
    miss = tuple(e for e in q.evidence if e not in hit)
    loose = len(hit)
    if miss:
        flat = squash(unescaped)
        loose += sum(all(squash(t) in flat for t in conv.evidence[e].texts) for e in miss)
    shown = None if q.answer is None else q.answer in unescaped.casefold() or q.answer in raw.casefold()
    return Outcome(conv.id, q.category, budget, len(q.evidence), hit, miss,
                   COUNTER.count_messages(messages) if tokens is None else tokens, loose, answer_shown=shown)


# --- BM25 --------------------------------------------------------------------------------------------------

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
    def __init__(self, docs: Sequence[str], k1: float = BM25_K1, b: float = BM25_B,
                 tokens: Callable[[str], list[str]] = words) -> None:
        self.k1, self.b = k1, b
        self.words = tokens
        self.tfs = [Counter(tokens(d)) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avg = (sum(self.lens) / len(self.lens)) if self.lens else 0.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = [w for w in dict.fromkeys(self.words(query)) if w in self.idf]
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


def chunk_text(turns: Sequence[Turn], as_sent: bool = False) -> str:
    """The turns as ``Speaker: text`` lines, or with ``as_sent`` as ``role: text`` lines (the labels the gateway's
    page transcript writes); a message already written with its names in its lines stays as it is."""
    return "\n".join(t.text if t.text.startswith(f"{t.speaker}: ") else f"{t.role if as_sent else t.speaker}: {t.text}"
                     for t in turns)


def build_chunk(turns: list[Turn], as_sent: bool = False) -> Chunk:
    text = chunk_text(turns, as_sent)
    return Chunk(list(turns), text, COUNTER.count_message({"role": "user", "content": text}), COUNTER.count(text))


def make_chunks(conv: Conversation, within: bool = False, as_sent: bool = False) -> list[Chunk]:
    """Chunks of consecutive messages of one session. By default a chunk is closed once it exceeds CHUNK_TOKENS
    (the reference's LoCoMo baseline); with `within`, a message joins a chunk only while it stays within
    CHUNK_TOKENS and a longer message is a chunk of its own — which matters when short questions sit between long
    replies (LongMemEval): closing after the overflow glues each question to the long reply that follows it."""
    chunks: list[Chunk] = []
    for _, turns in conv.sessions:
        current: list[Turn] = []
        for turn in turns:
            if within and current and COUNTER.count(chunk_text([*current, turn], as_sent)) > CHUNK_TOKENS:
                chunks.append(build_chunk(current, as_sent))
                current = []
            current.append(turn)
            if not within and COUNTER.count(chunk_text(current, as_sent)) > CHUNK_TOKENS:
                chunks.append(build_chunk(current, as_sent))
                current = []
        if current:
            chunks.append(build_chunk(current, as_sent))
    return chunks


class Baselines:
    """Both baselines for one conversation; `history_only` = the reference's B (history text tokens only);
    `as_sent`: the chunks' lines labelled by role, not by the dataset's names (see :func:`chunk_text`)."""

    def __init__(self, conv: Conversation, tokens: Callable[[str], list[str]] | None = None, as_sent: bool = False) -> None:
        self.conv = conv
        self.turns = conv.turns
        self.turn_msg_tokens = [COUNTER.count_message({"role": t.role, "content": t.text}) for t in self.turns]
        self.turn_text_tokens = [COUNTER.count(t.text) for t in self.turns]
        self.chunk_sets = {False: make_chunks(conv, as_sent=as_sent), True: make_chunks(conv, within=True, as_sent=as_sent)}
        self.bm25 = {k: BM25([c.text for c in chunks], tokens=tokens or words) for k, chunks in self.chunk_sets.items()}

    def raw_tokens(self, q: Question) -> int:
        """The client's whole request: every history message plus the question."""
        return sum(self.turn_msg_tokens) + COUNTER.count_messages([{"role": "user", "content": q.text}])

    def recent(self, q: Question, budget: int, history_only: bool = False) -> Outcome:
        total = 0 if history_only else COUNTER.count_messages([{"role": "user", "content": q.text}])
        costs = self.turn_text_tokens if history_only else self.turn_msg_tokens
        kept_turns: list[Turn] = []
        for i in range(len(self.turns) - 1, -1, -1):
            if total + costs[i] > budget:
                break
            total += costs[i]
            kept_turns.append(self.turns[i])
        kept_turns.reverse()
        messages = [{"role": t.role, "content": t.text} for t in kept_turns]
        return judge(self.conv, q, budget, messages, tokens=total)

    def bm25_chunks(self, q: Question, budget: int, history_only: bool = False, within: bool = False) -> Outcome:
        total = 0 if history_only else COUNTER.count_messages([{"role": "user", "content": q.text}])
        chunks = self.chunk_sets[within]
        scores = self.bm25[within].scores(q.text)
        order = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
        chosen: list[int] = []
        for i in order:
            cost = chunks[i].text_tokens if history_only else chunks[i].msg_tokens
            if total + cost <= budget:
                total += cost
                chosen.append(i)
        messages = [{"role": "user", "content": chunks[i].text} for i in sorted(chosen)]
        return judge(self.conv, q, budget, messages, tokens=total)
