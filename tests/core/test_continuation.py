"""Which thread a request continues, by the claims its history makes: plain calls."""

from __future__ import annotations

from typing import Any

from gateway.core import page_id, split_blocks
from gateway.core.continuation import AMBIGUOUS, Evidence, answer_claims, continued, evidence, opening, page_claim, recent_exchanges


def _ask(*pairs: tuple[str, str], live: str = "next?") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for question, reply in pairs:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]
    return [*messages, {"role": "user", "content": live}]


def _evidence(messages: list[dict[str, Any]], scaffold: frozenset[int] = frozenset(), limit: int = 8) -> tuple[str, ...]:
    split = split_blocks(messages)
    return evidence(split.blocks, [page_id(b.text) for b in split.blocks], split.tail, scaffold, limit).claims


def test_answers_come_first_most_recent_first_then_the_exchanges() -> None:
    messages = _ask(("q1", "a1"), ("q2", "a2"))
    split = split_blocks(messages)
    claims = _evidence(messages)
    assert claims == (*answer_claims("a2", []), *answer_claims("a1", []), *(page_claim(page_id(b.text)) for b in reversed(split.blocks)))
    # the reply is claimed as the gateway returned it, whatever whitespace the client trimmed
    assert answer_claims(" a2\n", []) == answer_claims("a2", []) and answer_claims("", []) == [] == answer_claims(None, [])


def test_tool_calls_are_answers_too_in_the_live_turn_and_in_the_exchanges() -> None:
    call = {"id": "call_7", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "q1"}, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_7", "content": "file"}, {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "call_8"}]},
        {"role": "tool", "tool_call_id": "call_8", "content": "file"},
    ]
    claims = _evidence(messages)
    assert claims[:3] == (*answer_claims(None, ["call_8"]), *answer_claims("a1", ["call_7"]))
    assert answer_claims(None, ["call_8", "call_8", ""]) == answer_claims(None, ["call_8"])


def test_scaffolding_is_no_evidence_and_the_lookup_is_bounded() -> None:
    messages = _ask(("example", "example reply"), *((f"q{n}", f"a{n}") for n in range(20)))
    claims = _evidence(messages, scaffold=frozenset({0}), limit=3)
    assert len(claims) == 6 and answer_claims("a19", [])[0] == claims[0] and answer_claims("a17", [])[0] == claims[2]
    assert answer_claims("example reply", [])[0] not in _evidence(messages, scaffold=frozenset({0}))
    split = split_blocks(messages)
    assert recent_exchanges(split.blocks, {0, 20}, 2) == [19, 18]


def test_the_first_claim_known_and_not_ambiguous_names_the_thread() -> None:
    assert continued(Evidence(("r:1", "r:2", "p:3")), [None, AMBIGUOUS, "t2"]) == "t2"
    assert continued(Evidence(("r:1", "p:3")), ["t1", "t2"]) == "t1"
    assert continued(Evidence(("r:1",)), [AMBIGUOUS]) is None and continued(Evidence(()), []) is None
    # an exchange answered alike in two sessions is no evidence, though one thread only has stored it so far
    assert continued(Evidence(("r:1", "p:3"), {"p:3": "r:1"}), [AMBIGUOUS, "t2"]) is None
    assert continued(Evidence(("r:1", "p:3"), {"p:3": "r:1"}), [None, "t2"]) == "t2"


def test_the_opening_is_the_first_words_that_are_not_scaffolding() -> None:
    split = split_blocks(_ask(("example", "ok"), ("my question", "a1")))
    assert opening(split.blocks, split.tail, {0}) == "my question"
    first = split_blocks([{"role": "system", "content": "s"}, {"role": "user", "content": "my question"}])
    assert opening(first.blocks, first.tail, set()) == "my question"  # the session's first request: its live turn
    only_scaffolding = split_blocks(_ask(("example", "ok"), live="my question"))
    assert opening(only_scaffolding.blocks, only_scaffolding.tail, {0}) == "my question"
