"""Reusing a thread's previous split gives exactly what a fresh split gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import page_id, split_blocks
from gateway.service.split_cache import SAVE_COMMAND, Pools, SplitCache

ROLES = st.sampled_from(["user", "assistant", "system"])
MESSAGES = st.lists(st.fixed_dictionaries({"role": ROLES, "content": st.sampled_from(["a", "b", "hello", "", SAVE_COMMAND, f" {SAVE_COMMAND}\n"])}), max_size=14)


def fresh(messages: list[dict[str, Any]]) -> tuple[Any, ...]:
    s = split_blocks(messages)
    saves = tuple(i for i, b in enumerate(s.blocks) if b.anchor_text.strip() == SAVE_COMMAND)
    earlier = tuple(page_id(t) for b in s.blocks for t in b.earlier_texts)
    return s.system, tuple(b.text for b in s.blocks), tuple(page_id(b.text) for b in s.blocks), s.tail, saves, earlier


@settings(max_examples=200, deadline=None)
@given(MESSAGES, MESSAGES, MESSAGES)
def test_growing_histories_split_as_if_fresh(first: list[dict[str, Any]], more: list[dict[str, Any]], other: list[dict[str, Any]]) -> None:
    cache = SplitCache(capacity=1)
    for messages in (first, first + more, other, other + first):
        got = cache.split("thread", messages)
        assert (got.system, tuple(b.text for b in got.blocks), got.ids, got.tail, got.saves, got.earlier) == fresh(messages)


def test_a_block_grown_by_more_replies_names_the_pages_it_was() -> None:
    # a request sealed [question, reply] at the end of its list; the next one carries more replies after it
    first = [{"role": "user", "content": "How was the trip?"}, {"role": "assistant", "content": "Great!"}]
    grown = [*first, {"role": "assistant", "content": "We saw the lakes."}, {"role": "assistant", "content": "And Ann."},
             {"role": "user", "content": "Nice"}]
    cache = SplitCache()
    stored = cache.split("thread", first).ids
    split = cache.split("thread", grown)
    two = page_id(split_blocks(grown[:3]).blocks[0].text)
    assert split.earlier == (stored[0], two) and stored[0] not in split.ids
    # a tool call's reply, or a reply after a user message, is no earlier page
    calls = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "assistant", "content": "done"}, {"role": "user", "content": "ok"}]
    assert SplitCache().split("t", calls).earlier == ()


def pool_afresh(ids: list[str], cut: int, earlier: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...], frozenset[str]]:
    """What `Pools.of` gives, built from nothing: the recent turns' ids, the rest each once in order, and all."""
    recent = frozenset(ids[cut:])
    return recent, tuple(i for i in dict.fromkeys(ids[:cut]) if i not in recent), frozenset(ids).union(earlier)


IDS = st.lists(st.sampled_from("abcdefgh"), max_size=12)
# a request: the last one's ids grown by some (or other ids), its recent turns where it cuts, an earlier page or not
REQUESTS = st.lists(st.tuples(st.booleans(), IDS, st.integers(0, 4), st.sampled_from([(), ("x",), ("a",)])), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(REQUESTS)
def test_a_threads_pools_are_what_its_ids_give_afresh(requests: list[tuple[bool, list[str], int, tuple[str, ...]]]) -> None:
    """Histories that grow, are asked again with other recent turns, say a block again (an id both in the pool's part
    and among the recent turns) or start over: each request's pool is what its ids give afresh."""
    pools, ids = Pools(capacity=1), []
    for grows, more, recent, earlier in requests:
        ids = (ids + more) if grows else more
        cut = max(len(ids) - recent, 0)
        assert pools.of("thread", ids, cut, earlier) == pool_afresh(ids, cut, earlier)


def test_a_history_asked_something_else_keeps_the_last_pool_and_a_turn_more_extends_it() -> None:
    pools = Pools()
    history = [f"p{n}" for n in range(1000)]
    first = pools.of("thread", [*history, "q1"], 1000, ())
    again = pools.of("thread", [*history, "q2"], 1000, ())
    assert again[1] is first[1]  # the same history, another question: not built again
    grown = pools.of("thread", [*history, "q2", "a2", "q3"], 1002, ())
    assert grown[1] == (*history, "q2", "a2") and grown[2] == frozenset([*history, "q2", "a2", "q3"])
    said_again = pools.of("thread", [*history, "q2", "a2", "p3", "q4"], 1002, ())  # p3 said again, among the recent
    assert said_again[1] == (*history[:3], *history[4:], "q2", "a2")
