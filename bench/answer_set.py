"""The answer benchmark's question set: a fixed, seeded sample of four conversation shapes, stratified by shape and
by each shape's kinds of question, with the questions of a shape sharing one replayed thread where they can.

* ``locomo``: LoCoMo's conversation with the smallest history (``conv-30``, ~13k tokens): temporal, single-hop and
  multi-hop questions;
* ``messaging``: the same conversation as a messaging chat (`bench.datasets.to_messaging`), other questions of it;
* ``realtalk``: the real two-person chat of ``realtalk_dev.json.xz`` with the smallest history: multi-hop,
  temporal and open-domain questions;
* ``longmemeval``: LongMemEval_S development questions, a seeded subset stratified by type (each has its own
  ~115k-token history, so none shares a thread and none fits the model's window whole).

The shares of a set of N are :data:`SHARES` (60: 16, 14, 15, 15); within a shape the kinds take turns, each kind's
questions in a seeded order (:data:`SEED`).
"""

from __future__ import annotations

import json
import lzma
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.datasets import (LOCOMO_DATA, LONGMEMEVAL_DATA, REALTALK_DATA, Conversation, Question, load_locomo,
                            load_longmemeval, load_realtalk, to_messaging)

__all__ = ["Item", "SHAPES", "SHARES", "question_set"]

SEED = 45
SHAPES = ("locomo", "messaging", "realtalk", "longmemeval")
SHARES = {"locomo": 16, "messaging": 14, "realtalk": 15, "longmemeval": 15}  # of 60
KINDS = {
    "locomo": ("2 temporal", "4 single-hop", "1 multi-hop"),
    "messaging": ("2 temporal", "4 single-hop", "1 multi-hop"),
    "realtalk": ("2 temporal", "1 multi-hop", "3 open-domain"),
}


@dataclass
class Item:
    shape: str
    conv: Conversation
    question: Question
    gold: str

    @property
    def key(self) -> str:
        """Unique in a set: the messaging variant asks questions of LoCoMo's conversation under its ids."""
        return f"{self.shape}:{self.question.id}"

    @property
    def thread(self) -> str:
        return f"{self.shape}-{self.conv.id}"


def _locomo_answers(path: Path) -> dict[str, str]:
    return {f"{s['sample_id']}/q{i}": str(qa.get("answer", "")) for s in json.loads(path.read_text(encoding="utf-8"))
            for i, qa in enumerate(s["qa"])}


def _realtalk_answers(path: Path) -> dict[str, str]:
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        return {f"{name}/q{i}": str(qa.get("answer", "")) for name, chat in json.load(fh).items() for i, qa in enumerate(chat["qa"])}


def _longmemeval_answers(path: Path) -> dict[str, str]:
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        return {str(it["question_id"]): str(it["answer"]) for it in json.load(fh)}


def shares(n: int, shapes: Sequence[str] = SHAPES) -> dict[str, int]:
    """How many of ``n`` questions each of ``shapes`` gets: their :data:`SHARES` scaled, largest remainders first
    (0 for the others)."""
    total = sum(SHARES[s] for s in shapes)
    exact = {s: n * SHARES[s] / total if s in shapes else 0.0 for s in SHAPES}
    out = {s: int(exact[s]) for s in SHAPES}
    for s in sorted(shapes, key=lambda s: (-(exact[s] - out[s]), SHAPES.index(s)))[: n - sum(out.values())]:
        out[s] += 1
    return out


def stratified(questions: Sequence[Question], kinds: Sequence[str], n: int, seed: str, skip: frozenset[str] = frozenset()) -> list[Question]:
    """``n`` of ``questions``, the ``kinds`` taking turns, each kind's in a seeded order; in file order."""
    rng = random.Random(seed)
    pools = {k: [q for q in questions if q.category == k and q.id not in skip] for k in kinds}
    for pool in pools.values():
        rng.shuffle(pool)
    picked: list[Question] = []
    while len(picked) < n and any(pools.values()):
        for k in kinds:
            if pools[k] and len(picked) < n:
                picked.append(pools[k].pop())
    order = {q.id: i for i, q in enumerate(questions)}
    return sorted(picked, key=lambda q: order[q.id])


def _smallest(conversations: Sequence[Conversation]) -> Conversation:
    return min(conversations, key=lambda c: sum(len(t.text) for t in c.turns))


def question_set(n: int = 60, shapes: Sequence[str] = SHAPES) -> list[Item]:
    """The fixed set of ``n`` questions over ``shapes`` (see the module docstring)."""
    counts = shares(n, shapes)
    items: list[Item] = []
    if "locomo" in shapes or "messaging" in shapes:
        locomo = load_locomo(LOCOMO_DATA)
        conv = _smallest(locomo.conversations)
        gold = _locomo_answers(LOCOMO_DATA)
        asked = stratified(conv.questions, KINDS["locomo"], counts["locomo"], f"{SEED}/locomo") if "locomo" in shapes else []
        items += [Item("locomo", conv, q, gold[q.id]) for q in asked]
        if "messaging" in shapes:
            messaging = next(c for c in to_messaging(locomo).conversations if c.id == conv.id)
            other = stratified(conv.questions, KINDS["messaging"], counts["messaging"], f"{SEED}/messaging",
                               frozenset(q.id for q in asked))
            items += [Item("messaging", messaging, q, gold[q.id]) for q in other]
    if "realtalk" in shapes:
        chat = _smallest(load_realtalk(REALTALK_DATA).conversations)
        gold = _realtalk_answers(REALTALK_DATA)
        items += [Item("realtalk", chat, q, gold[q.id]) for q in stratified(chat.questions, KINDS["realtalk"], counts["realtalk"], f"{SEED}/realtalk")]
    if "longmemeval" in shapes and counts["longmemeval"]:
        lme = load_longmemeval(LONGMEMEVAL_DATA, counts["longmemeval"])
        gold = _longmemeval_answers(LONGMEMEVAL_DATA)
        items += [Item("longmemeval", c, c.questions[0], gold[c.id]) for c in lme.conversations]
    return items
