"""Reusing a thread's previous split gives exactly what a fresh split gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import page_id, split_blocks
from gateway.service.split_cache import SAVE_COMMAND, SplitCache

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
