"""The benchmark's derived data: the messaging split, LongMemEval dates and order, the stratified subset."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from bench.baselines import judge
from bench.datasets import (Conversation, Dataset, Evidence, Question, Turn, checkable_answer,
                            longmemeval_conversation, parse_longmemeval_date, select_questions, sentences, split_turn,
                            to_messaging)


def squash(text: str) -> str:
    return " ".join(text.split())


TEXTS = [
    "Hey Mel! Good to see you! How have you been? I went to a support group yesterday. It was powerful.",
    "Wow, that's cool.",
    "I painted a lake sunrise last year!  It's special to me.\nWant to see it? Here. And this one too.",
    "Look at this. [shares a photo: a dog on a beach]",
    "Just one line [shares a photo: a cake]",
]


@pytest.mark.parametrize("text", TEXTS)
def test_split_turn_is_deterministic_and_reassembles_the_turn(text: str) -> None:
    pieces = split_turn(text, "conv-1/D1:3")
    assert pieces == split_turn(text, "conv-1/D1:3")
    assert squash(" ".join(pieces)) == squash(text)
    assert all(piece and piece == piece.strip() for piece in pieces)
    for piece in pieces[:-1]:
        assert 1 <= len(sentences(piece)) <= 3


def test_split_turn_keeps_one_sentence_whole_and_the_photo_on_the_last_piece() -> None:
    assert split_turn("Wow, that's cool.", "s") == ["Wow, that's cool."]
    assert split_turn("Just one line [shares a photo: a cake]", "s") == ["Just one line [shares a photo: a cake]"]
    pieces = split_turn("One. Two. Three. Four. Five. Six. Seven. [shares a photo: a dog]", "seed")
    assert pieces[-1].endswith("[shares a photo: a dog]") and len(pieces) >= 3
    assert all(1 <= len(sentences(p.replace(" [shares a photo: a dog]", ""))) <= 3 for p in pieces)


def test_split_turn_depends_on_its_seed() -> None:
    text = " ".join(f"Sentence {i}." for i in range(30))
    assert len({tuple(split_turn(text, f"seed-{i}")) for i in range(10)}) > 1


def _locomo(texts: list[str]) -> Dataset:
    turns = [Turn(f"D1:{i + 1}", "Ann" if i % 2 == 0 else "Bob", "user" if i % 2 == 0 else "assistant", text, 0, i)
             for i, text in enumerate(texts)]
    evidence = {t.id: Evidence((t.text,), t.index) for t in turns}
    question = Question("c/q0", "Where did Ann go yesterday?", "4 single-hop", ("D1:1",))
    conv = Conversation("c", [(datetime(2023, 5, 8, 13, 56), turns)], [question], evidence, datetime(2023, 5, 9))
    return Dataset("locomo", "LoCoMo", [conv], ("4 single-hop",), "")


def test_messaging_sends_each_turn_as_consecutive_messages_of_its_role_and_needs_every_piece() -> None:
    locomo = _locomo(TEXTS)
    conv = to_messaging(locomo).conversations[0]
    by_turn: dict[str, list[Turn]] = {}
    for message in conv.turns:
        by_turn.setdefault(message.id.split("#")[0], []).append(message)
    assert [m.index for m in conv.turns] == list(range(len(conv.turns)))
    for turn in locomo.conversations[0].turns:
        messages = by_turn[turn.id]
        assert {m.role for m in messages} == {turn.role}
        assert conv.evidence[turn.id].texts == tuple(m.text for m in messages)
        assert conv.evidence[turn.id].index == messages[-1].index
    question = conv.questions[0]
    pieces = conv.evidence["D1:1"].texts
    assert len(pieces) >= 2
    everything = [{"role": "user", "content": p} for p in pieces]
    assert judge(conv, question, 1000, everything).recall == 1.0
    assert judge(conv, question, 1000, everything[:-1]).recall == 0.0


def test_an_answer_checks_a_context_only_when_its_evidence_alone_says_it() -> None:
    evidence = ["1. Jaipur Rugs: a private company that employs over 40,000 people."]
    others = ["Rugs are woven by hand.", "The year was 2014."]
    question = "Which company employs over 40,000 people in rugs?"
    assert checkable_answer("Jaipur Rugs.", question, evidence, others) == "jaipur rugs"
    assert checkable_answer("Rugs", question, evidence, others) is None  # in the question, and said elsewhere
    assert checkable_answer("2014", question, evidence, others) is None  # not in the evidence
    assert checkable_answer(40, question, evidence, others) is None  # too short to be told from any number
    assert checkable_answer("a weaving firm", question, evidence, others) is None  # said in other words


def test_the_answer_is_shown_when_the_context_holds_it_whatever_the_turn() -> None:
    turn = Turn("s:1", "Assistant", "assistant", "Try these stores:\n1. Nostalgia, based in India.\n2. Dharma Trading.", 0, 0)
    question = Question("q", "Which store is based in India?", "single-session-assistant", ("s:1",), "nostalgia")
    conv = Conversation("c", [(datetime(2023, 5, 8), [turn])], [question], {"s:1": Evidence((turn.text,), 0)},
                        datetime(2023, 5, 9))
    excerpt = [{"role": "system", "content": "[a1] assistant: … 1. Nostalgia, based in India. …"}]
    assert (judge(conv, question, 1000, excerpt).recall, judge(conv, question, 1000, excerpt).answer_shown) == (0.0, True)
    assert judge(conv, question, 1000, [{"role": "user", "content": question.text}]).answer_shown is False
    unchecked = Question("q2", "Which store?", "single-session-assistant", ("s:1",))
    assert judge(conv, unchecked, 1000, excerpt).answer_shown is None


def test_longmemeval_dates_parse_and_reject_other_forms() -> None:
    assert parse_longmemeval_date("2023/05/20 (Sat) 02:21") == datetime(2023, 5, 20, 2, 21)
    with pytest.raises(ValueError, match="unrecognised LongMemEval date"):
        parse_longmemeval_date("20 May 2023")


def _item(qid: str, qtype: str, evidence: bool = True) -> dict[str, Any]:
    return {
        "question_id": qid, "question_type": qtype, "question": "Which city?",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/01 (Mon) 09:00", "2023/05/20 (Sat) 02:21"],
        "haystack_session_ids": ["late-a", "early", "late-b"],
        "haystack_sessions": [
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            [{"role": "assistant", "content": "c"}, {"role": "user", "content": "d", "has_answer": evidence}],
            [{"role": "user", "content": "e", "has_answer": False}],
        ],
    }


def test_longmemeval_sessions_replay_in_stable_date_order_with_their_evidence() -> None:
    conv = longmemeval_conversation(_item("q1", "multi-session"))
    assert [[t.id for t in turns] for _, turns in conv.sessions] == [
        ["early:0", "early:1"], ["late-a:0", "late-a:1"], ["late-b:0"]]
    assert [t.role for t in conv.turns] == ["assistant", "user", "user", "assistant", "user"]
    assert [t.index for t in conv.turns] == [0, 1, 2, 3, 4]
    assert conv.questions == [Question("q1", "Which city?", "multi-session", ("early:1",))]
    assert conv.evidence["early:1"] == Evidence(("d",), 1)
    assert conv.question_time == datetime(2023, 6, 1, 10, 0)
    assert longmemeval_conversation(_item("q2_abs", "multi-session")).questions == []
    assert longmemeval_conversation(_item("q3", "multi-session", evidence=False)).questions == []


def test_select_questions_is_seeded_stratified_and_leaves_out_unusable_ones() -> None:
    items = [_item(f"a{i}", "temporal-reasoning") for i in range(6)] + [_item(f"b{i}", "multi-session")
                                                                         for i in range(3)]
    items += [_item("c_abs", "multi-session"), _item("d", "knowledge-update", evidence=False)]
    assert len(select_questions(items, None)) == 9
    chosen = select_questions(items, 3)
    assert chosen == select_questions(items, 3)
    assert [it["question_type"] for it in chosen].count("temporal-reasoning") == 2
    assert [it["question_type"] for it in chosen].count("multi-session") == 1
    ids = [str(it["question_id"]) for it in items]
    assert sorted((ids.index(str(it["question_id"])) for it in chosen)) == [ids.index(str(it["question_id"]))
                                                                            for it in chosen]
    assert select_questions(items, 3, seed=1) != chosen or select_questions(items, 3, seed=2) != chosen
