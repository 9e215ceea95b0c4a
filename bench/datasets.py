"""The three conversation shapes of the evidence-recall benchmark, as one data model.

Owns: reading LoCoMo (``locomo10.json``) and the LongMemEval_S development questions
(``longmemeval_s_dev.json.xz``) in place — neither is ever copied into this repository — and deriving the
messaging variant of LoCoMo. Every shape becomes a list of ``Conversation``s: dated sessions of ``Turn``s (one turn
= one chat message, exactly as the replay sends it) and the questions asked at the end, each naming its evidence.
Evidence is a list of ids; ``Conversation.evidence`` maps an id to the texts that must all reach the upstream model
for it to count as kept, and to its position (for "distance back").

* ``locomo``: speaker_a -> user, speaker_b -> assistant, photos as ``"<text> [shares a photo: <caption>]"``;
  questions of categories 1-4 with their repaired evidence ids.
* ``messaging``: the same conversations and questions, each turn split into consecutive messages of one to three
  sentences (a seeded RNG per turn chooses how many; a one-sentence turn stays one message; the photo suffix stays
  on the last piece), all of the turn's role. An evidence turn is kept when every one of its pieces is.
* ``realtalk``: real messaging chats between two people (REALTALK, ``realtalk_dev.json.xz``), replayed as they are
  exported: speaker_1 -> user, one message per run of one speaker's consecutive lines within a session, each line
  ``Name: text`` (a photo as ``"<text> [shares a photo: <caption>]"``), a session dated by its
  ``session_<N>_date_time``, the questions asked a minute after the chat's last line. An evidence line is kept when
  its ``clean_text`` reaches the model whole.
* ``with_names``: any shape's conversations with each message written ``Name: text`` (every line of it, as a chat
  export writes them; the evidence texts stay without the name): memory must not depend on how a client writes
  its lines.
* ``longmemeval``: one conversation per question (its own history), sessions sorted by ``haystack_dates``
  (stable), roles as given; evidence = turns with ``has_answer: true``; abstention questions (``_abs``) and
  questions without evidence are left out. ``select_questions`` draws a seeded subset stratified by type.
"""

from __future__ import annotations

import json
import lzma
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
LOCOMO_DATA = DATA_DIR / "locomo10.json"
LONGMEMEVAL_DATA = DATA_DIR / "longmemeval_s_dev.json.xz"
REALTALK_DATA = DATA_DIR / "realtalk_dev.json.xz"
LOCOMO_CATEGORIES = {1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain", 4: "4 single-hop"}
REALTALK_CATEGORIES = {1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain"}
LONGMEMEVAL_CATEGORIES = ("single-session-user", "single-session-assistant", "single-session-preference",
                          "multi-session", "knowledge-update", "temporal-reasoning")
SELECTION_SEED = 12
TUNED_QUESTIONS = 30  # the LongMemEval subset every change so far was measured (and tuned) on: `--questions 30`


@dataclass(frozen=True)
class Turn:
    id: str  # LoCoMo dia_id ("D3:7"), "<dia_id>#<piece>" for messaging, "<session id>:<n>" for LongMemEval
    speaker: str
    role: str  # user | assistant
    text: str  # exactly what is sent
    session: int  # position of its session in the replay
    index: int  # position in the whole conversation (messages)


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    category: str
    evidence: tuple[str, ...]
    answer: str | None = None  # the gold answer, when a context can be checked by it (see `checkable_answer`)


@dataclass(frozen=True)
class Evidence:
    texts: tuple[str, ...]  # every one must reach the upstream verbatim
    index: int  # the message position of its last piece, for distance back


@dataclass
class Conversation:
    id: str  # also the thread name's suffix
    sessions: list[tuple[datetime, list[Turn]]]
    questions: list[Question]
    evidence: dict[str, Evidence]
    question_time: datetime
    skipped_questions: int = 0

    @property
    def turns(self) -> list[Turn]:
        return [t for _, turns in self.sessions for t in turns]


@dataclass
class Dataset:
    name: str  # locomo | messaging | realtalk | longmemeval; locomo-names | messaging-names (`with_names`)
    title: str
    conversations: list[Conversation]
    categories: tuple[str, ...]
    note: str  # which questions count, for the report
    names: bool = False  # whether the messages are written `Name: text`
    words: Callable[[str], list[str]] | None = None  # the BM25 baselines' words, when not English (bench.baselines)


# --- LoCoMo ------------------------------------------------------------------------------------------------

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


def load_locomo(path: Path = LOCOMO_DATA) -> Dataset:
    convs: list[Conversation] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        a = conv["speaker_a"]
        keys = sorted((int(m.group(1)), k) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        sessions: list[tuple[datetime, list[Turn]]] = []
        index = 0
        for n, key in keys:
            if not conv[key]:  # one conversation has dates for sessions without turns
                continue
            turns = []
            for t in conv[key]:
                role = "user" if t["speaker"] == a else "assistant"
                turns.append(Turn(t["dia_id"], t["speaker"], role, turn_text(t), len(sessions), index))
                index += 1
            sessions.append((parse_locomo_date(conv[f"session_{n}_date_time"]), turns))
        evidence = {t.id: Evidence((t.text,), t.index) for _, ts in sessions for t in ts}
        questions, skipped = [], 0
        for qi, qa in enumerate(sample["qa"]):
            if qa.get("category") not in LOCOMO_CATEGORIES:
                continue
            ids = repair_evidence(qa.get("evidence") or [], set(evidence))
            if not ids:
                skipped += 1
                continue
            chosen = set(ids)
            answer = checkable_answer(qa.get("answer", ""), str(qa["question"]), (evidence[e].texts[0] for e in ids),
                                      (t.text for _, ts in sessions for t in ts if t.id not in chosen))
            questions.append(Question(f"{sample['sample_id']}/q{qi}", str(qa["question"]),
                                      LOCOMO_CATEGORIES[int(qa["category"])], ids, answer))
        convs.append(Conversation(sample["sample_id"], sessions, questions, evidence,
                                  sessions[-1][0] + timedelta(days=1), skipped))
    return Dataset("locomo", "LoCoMo", convs, tuple(LOCOMO_CATEGORIES.values()),
                   "categories 1–4; category 5 (adversarial) excluded")


def checkable_answer(answer: object, question: str, evidence: Iterable[str], others: Iterable[str]) -> str | None:
    """The gold ``answer``, as the text a context that shows it must contain, when that is a fair check: it is in
    one of the ``evidence`` texts verbatim (case aside), in none of the ``others`` (the rest of the history) and
    not in the ``question``, and it is longer than two characters ("2014", "Jaipur Rugs"; not "20", which any
    page may hold). Else None: most answers are said in other words than the evidence's ("7 May 2023" for
    "yesterday"), or counted ("3"), and only the evidence turns can be checked."""
    text = str(answer).strip().rstrip(".").strip().casefold()
    if len(text) <= 2 or text in question.casefold() or not any(text in e.casefold() for e in evidence):
        return None
    return None if any(text in o.casefold() for o in others) else text


# --- the messaging variant ---------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_PHOTO = re.compile(r" \[shares a photo: [^\]]*\]$")


def sentences(text: str) -> list[str]:
    """Sentences of a chat line: split after '.', '!' or '?' followed by whitespace (no abbreviation handling;
    a split after "Mr." only makes one more short message, as people send)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def split_turn(text: str, seed: str) -> list[str]:
    """A turn as consecutive messages of one to three sentences; deterministic for a seed. The photo suffix
    stays on the last piece, so it is never a message of its own."""
    photo = _PHOTO.search(text)
    body = text[: photo.start()] if photo else text
    parts = sentences(body) or [body.strip()]
    rng = random.Random(seed)
    pieces: list[str] = []
    i = 0
    while i < len(parts):
        take = rng.randint(1, 3)
        pieces.append(" ".join(parts[i: i + take]))
        i += take
    if photo:
        pieces[-1] += photo.group(0)
    return pieces


def to_messaging(locomo: Dataset) -> Dataset:
    convs: list[Conversation] = []
    for conv in locomo.conversations:
        sessions: list[tuple[datetime, list[Turn]]] = []
        evidence: dict[str, Evidence] = {}
        index = 0
        for when, turns in conv.sessions:
            messages: list[Turn] = []
            for turn in turns:
                pieces = split_turn(turn.text, f"{conv.id}/{turn.id}")
                for k, piece in enumerate(pieces):
                    messages.append(Turn(f"{turn.id}#{k}", turn.speaker, turn.role, piece, turn.session, index))
                    index += 1
                evidence[turn.id] = Evidence(tuple(pieces), index - 1)
            sessions.append((when, messages))
        convs.append(Conversation(conv.id, sessions, conv.questions, evidence, conv.question_time,
                                  conv.skipped_questions))
    return Dataset("messaging", "Messaging variant of LoCoMo", convs, locomo.categories, locomo.note)


# --- speakers' names in the lines ---------------------------------------------------------------------------


def named_lines(speaker: str, text: str) -> str:
    """``text`` as a chat export writes it: every line ``Name: line``."""
    return "\n".join(f"{speaker}: {line}" for line in text.split("\n"))


def with_names(data: Dataset) -> Dataset:
    """``data`` with every message written ``Name: text``; the same questions, evidence texts and times."""
    convs = [
        Conversation(conv.id, [(when, [Turn(t.id, t.speaker, t.role, named_lines(t.speaker, t.text), t.session, t.index)
                                       for t in turns]) for when, turns in conv.sessions],
                     conv.questions, conv.evidence, conv.question_time, conv.skipped_questions)
        for conv in data.conversations
    ]
    return Dataset(f"{data.name}-names", f"{data.title}, names in the lines", convs, data.categories, data.note,
                   names=True)


# --- REALTALK ----------------------------------------------------------------------------------------------


def parse_realtalk_date(value: str) -> datetime:
    """'30.12.2023, 00:32:20' -> 2023-12-30 00:32:20 (naive; the gateway takes naive as UTC)."""
    return datetime.strptime(value.strip(), "%d.%m.%Y, %H:%M:%S")


def realtalk_conversation(name: str, chat: Mapping[str, Any]) -> Conversation:
    """One chat: a message per run of one speaker's lines in a session, its lines ``Name: text``."""
    user = chat["name"]["speaker_1"]
    keys = sorted((int(m.group(1)), k) for k in chat if (m := re.fullmatch(r"session_(\d+)", k)))
    sessions: list[tuple[datetime, list[Turn]]] = []
    evidence: dict[str, Evidence] = {}
    index = 0
    last = datetime.min
    for n, key in keys:
        messages: list[Turn] = []
        run: list[Mapping[str, Any]] = []

        def close() -> None:
            nonlocal index
            if not run:
                return
            speaker = str(run[0]["speaker"])
            text = "\n".join(f"{speaker}: {turn_text({'text': t['clean_text'], 'blip_caption': t.get('blip_caption')})}"
                             for t in run)
            messages.append(Turn(str(run[0]["dia_id"]), speaker, "user" if speaker == user else "assistant", text,
                                 len(sessions), index))
            for t in run:
                line = str(t["clean_text"]).strip() or turn_text({"text": "", "blip_caption": t.get("blip_caption")}).strip()
                evidence[str(t["dia_id"])] = Evidence((line,), index)
            index += 1
            run.clear()

        for t in chat[key]:
            if run and t["speaker"] != run[0]["speaker"]:
                close()
            run.append(t)
            last = max(last, parse_realtalk_date(t["date_time"]))
        close()
        if messages:
            sessions.append((parse_realtalk_date(chat[f"{key}_date_time"]), messages))
    questions = []
    skipped = 0
    for qi, qa in enumerate(chat["qa"]):
        ids = tuple(dict.fromkeys(e.strip() for e in qa.get("evidence") or [] if e.strip() in evidence))
        if qa.get("category") not in REALTALK_CATEGORIES or not ids:
            skipped += 1
            continue
        questions.append(Question(f"{name}/q{qi}", str(qa["question"]), REALTALK_CATEGORIES[int(qa["category"])], ids))
    return Conversation(name, sessions, questions, evidence, last + timedelta(minutes=1), skipped)


def load_realtalk(path: Path = REALTALK_DATA) -> Dataset:
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        chats = json.load(fh)
    convs = [realtalk_conversation(name, chat) for name, chat in chats.items()]
    return Dataset("realtalk", "Real messaging chats (REALTALK)", convs, tuple(REALTALK_CATEGORIES.values()),
                   "categories 1–3; lines written `Name: text`, as exported", names=True)


# --- LongMemEval_S -----------------------------------------------------------------------------------------

_LME_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) \(\w{3}\) (\d{2}):(\d{2})$")


def parse_longmemeval_date(value: str) -> datetime:
    """'2023/05/20 (Sat) 02:21' -> 2023-05-20 02:21 (naive; the gateway takes naive as UTC)."""
    m = _LME_DATE.match(value.strip())
    if not m:
        raise ValueError(f"unrecognised LongMemEval date: {value!r}")
    year, month, day, hour, minute = (int(g) for g in m.groups())
    return datetime(year, month, day, hour, minute)


def longmemeval_conversation(item: Mapping[str, Any]) -> Conversation:
    """One question with its own history, sessions in date order (stable for equal dates)."""
    dated = sorted(zip((parse_longmemeval_date(d) for d in item["haystack_dates"]), item["haystack_session_ids"],
                       item["haystack_sessions"]), key=lambda s: s[0])
    sessions: list[tuple[datetime, list[Turn]]] = []
    evidence_ids: list[str] = []
    evidence: dict[str, Evidence] = {}
    index = 0
    for when, sid, raw in dated:
        turns = []
        for n, t in enumerate(raw):
            turn = Turn(f"{sid}:{n}", t["role"].capitalize(), t["role"], str(t["content"]), len(sessions), index)
            turns.append(turn)
            if t.get("has_answer") is True:
                evidence_ids.append(turn.id)
                evidence[turn.id] = Evidence((turn.text,), index)
            index += 1
        sessions.append((when, turns))
    qid = str(item["question_id"])
    answer = checkable_answer(item.get("answer", ""), str(item["question"]), (evidence[e].texts[0] for e in evidence_ids),
                              (t.text for _, ts in sessions for t in ts if t.id not in evidence))
    questions = [] if qid.endswith("_abs") or not evidence_ids else [
        Question(qid, str(item["question"]), str(item["question_type"]), tuple(evidence_ids), answer)]
    return Conversation(qid, sessions, questions, evidence, parse_longmemeval_date(item["question_date"]),
                        0 if questions else 1)


def select_questions(items: Sequence[Mapping[str, Any]], n: int | None,
                     seed: int = SELECTION_SEED) -> list[Mapping[str, Any]]:
    """A seeded subset of n usable questions, stratified by question_type (largest-remainder shares), in file
    order; all usable questions when n is None or not smaller."""
    usable = [it for it in items if not str(it["question_id"]).endswith("_abs")
              and any(t.get("has_answer") is True for s in it["haystack_sessions"] for t in s)]
    if n is None or n >= len(usable):
        return usable
    by_type: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(usable):
        by_type[str(it["question_type"])].append(i)
    exact = {t: n * len(ix) / len(usable) for t, ix in by_type.items()}
    share = {t: int(x) for t, x in exact.items()}
    for t in sorted(exact, key=lambda t: (-(exact[t] - share[t]), t))[: n - sum(share.values())]:
        share[t] += 1
    rng = random.Random(seed)
    chosen = [i for t in sorted(by_type) for i in rng.sample(by_type[t], share[t])]
    return [usable[i] for i in sorted(chosen)]


def load_longmemeval(path: Path = LONGMEMEVAL_DATA, questions: int | None = None, held_out: bool = False) -> Dataset:
    """The development questions: all, or a seeded stratified subset of ``questions``; with ``held_out``, taken
    from the questions outside the :data:`TUNED_QUESTIONS` subset (a check on questions no change was tuned on)."""
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        items = json.load(fh)
    left_out = len(items) - len(select_questions(items, None))
    pool, kind = items, "a seeded stratified subset"
    if held_out:
        tuned = {it["question_id"] for it in select_questions(items, TUNED_QUESTIONS)}
        pool, kind = [it for it in items if it["question_id"] not in tuned], f"held out (not among the {TUNED_QUESTIONS} tuned on)"
    convs = [longmemeval_conversation(it) for it in select_questions(pool, questions)]
    return Dataset("longmemeval", "LongMemEval_S development questions", convs, LONGMEMEVAL_CATEGORIES,
                   f"{left_out} abstention / no-evidence question(s) of {len(items)} left out"
                   + (f"; {kind}, {len(convs)}" if questions is not None or held_out else ""))
