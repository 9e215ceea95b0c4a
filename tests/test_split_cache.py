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
    return s.system, tuple(b.text for b in s.blocks), tuple(page_id(b.text) for b in s.blocks), s.tail, saves


@settings(max_examples=200, deadline=None)
@given(MESSAGES, MESSAGES, MESSAGES)
def test_growing_histories_split_as_if_fresh(first: list[dict[str, Any]], more: list[dict[str, Any]], other: list[dict[str, Any]]) -> None:
    cache = SplitCache(capacity=1)
    for messages in (first, first + more, other, other + first):
        got = cache.split("thread", messages)
        assert (got.system, tuple(b.text for b in got.blocks), got.ids, got.tail, got.saves) == fresh(messages)
