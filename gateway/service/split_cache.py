"""Splitting a request's history into blocks, reusing the work done for the thread's previous request.

A client resends the whole history each turn. Sealed Logical Blocks never change when messages are
appended, so the blocks (and page ids) of the history the previous request already had are kept per
thread, and only the new messages are split and hashed. Checking that the old history is still a
prefix is one list comparison, done in C.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core import Block, page_id, split_blocks
from gateway.core.messages import SYSTEM_ROLES

__all__ = ["Split", "SplitCache"]


@dataclass(frozen=True)
class Split:
    system: tuple[Mapping[str, Any], ...]
    blocks: tuple[Block, ...]
    ids: tuple[str, ...]
    tail: tuple[Mapping[str, Any], ...]
    sealed: int  # messages up to the end of the last sealed block: the part a later request can reuse


def _split(messages: Sequence[Mapping[str, Any]], offset: int) -> Split:
    segmentation = split_blocks(messages)
    blocks = segmentation.blocks
    sealed = offset + (blocks[-1].indexes[-1] + 1 if blocks else 0)
    return Split(segmentation.system, blocks, tuple(page_id(b.text) for b in blocks), segmentation.tail, sealed)


class SplitCache:
    """The split of each thread's last history, bounded to `capacity` threads (least recent out)."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, tuple[list[Mapping[str, Any]], Split]] = OrderedDict()

    def split(self, scope: str, messages: Sequence[Mapping[str, Any]]) -> Split:
        """Split `messages`; raises what `split_blocks` raises for invalid messages."""
        cached = self._items.get(scope)
        result: Split
        if cached is not None and len(messages) >= len(cached[0]) and list(messages[: len(cached[0])]) == cached[0]:
            prefix, known = cached
            rest = _split(messages[len(prefix) :], len(prefix))
            result = Split(known.system + rest.system, known.blocks + rest.blocks, known.ids + rest.ids, rest.tail,
                           rest.sealed if rest.blocks else known.sealed)  # fmt: skip
        else:
            result = _split(messages, 0)
        prefix = list(messages[: result.sealed])
        system = tuple(m for m in prefix if m.get("role") in SYSTEM_ROLES)  # later ones are re-read each time
        self._items[scope] = (prefix, Split(system, result.blocks, result.ids, (), result.sealed))
        self._items.move_to_end(scope)
        if len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return result
