"""Splitting a request's history into blocks, reusing the work done for the thread's previous request.

A client resends the whole history each turn. Sealed Logical Blocks never change when messages are
appended — except a block sealed only by the end of the list, which more replies may still extend — so the
other blocks (and page ids) of the history the previous request already had are kept per thread, and only
the new messages are split and hashed. Checking that the old history is still a
prefix is one list comparison, done in C. What a request's ids make (its recent turns, the pool of the rest, the
history's ids: `Pools`) is kept per thread the same way and extended when the next request's ids begin with them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core import Block, page_id, split_blocks
from gateway.core.lru import Lru
from gateway.core.messages import SYSTEM_ROLES

__all__ = ["POOLS_KEPT", "SAVE_COMMAND", "Pools", "Split", "SplitCache", "is_save", "saves_of"]

POOLS_KEPT = 256  # threads whose last request's pool a process keeps (as SplitCache keeps their splits)
SAVE_COMMAND = "/save"  # a user message that asks the gateway to freeze the thread's topics now (never a page)


@dataclass(frozen=True)
class Split:
    system: tuple[Mapping[str, Any], ...]
    blocks: tuple[Block, ...]
    ids: tuple[str, ...]
    tail: tuple[Mapping[str, Any], ...]
    sealed: int  # messages up to the end of the last sealed block: the part a later request can reuse
    saves: tuple[int, ...] = ()  # the positions of the blocks that are a /save command (saves_of)
    # the page ids of the blocks' beginnings that an earlier request may have stored (Block.earlier_texts): their
    # messages are in this history too
    earlier: tuple[str, ...] = ()


def is_save(text: str) -> bool:
    """Whether a user message's ``text`` is the :data:`SAVE_COMMAND`."""
    return text.strip() == SAVE_COMMAND


def saves_of(blocks: Sequence[Block], offset: int = 0) -> tuple[int, ...]:
    """The positions (shifted by ``offset``) of the blocks whose user message is :data:`SAVE_COMMAND`: one search
    in C over their texts, a walk only where one says it."""
    texts = [block.anchor_text for block in blocks]
    if SAVE_COMMAND not in "\n".join(texts):
        return ()
    return tuple(offset + i for i, text in enumerate(texts) if is_save(text))


def _split(messages: Sequence[Mapping[str, Any]], offset: int, offset_blocks: int = 0) -> tuple[Split, int, tuple[str, ...]]:
    """The split of `messages` (positions shifted by `offset`, its blocks' by `offset_blocks`), and how many of its
    blocks a later request may reuse: all but one sealed only by the end of the list, with their `Split.earlier`."""
    segmentation = split_blocks(messages)
    blocks = segmentation.blocks
    reusable = len(blocks) - 1 if segmentation.open_ended else len(blocks)
    sealed = offset + (blocks[reusable - 1].indexes[-1] + 1 if reusable else 0)
    ids = tuple(page_id(b.text) for b in blocks)
    kept = _earlier(blocks[:reusable])
    earlier = kept + _earlier(blocks[reusable:])
    return Split(segmentation.system, blocks, ids, segmentation.tail, sealed, saves_of(blocks, offset_blocks), earlier), reusable, kept


def _earlier(blocks: Sequence[Block]) -> tuple[str, ...]:
    """The page ids of ``blocks``' beginnings an earlier request may have stored (`Split.earlier`)."""
    return tuple(page_id(text) for block in blocks if block.earlier_texts for text in block.earlier_texts)


def _extends(messages: Sequence[Mapping[str, Any]], prefix: list[Mapping[str, Any]]) -> bool:
    """Whether `messages` continue `prefix` so that its blocks stay as they were: the prefix is there, and the
    first message after it that is not a system message (if any) is a user message — an assistant message
    there would still belong to the prefix's last exchange."""
    if len(messages) < len(prefix) or list(messages[: len(prefix)]) != prefix:
        return False
    following = next((m for m in messages[len(prefix) :] if m.get("role") not in SYSTEM_ROLES), None)
    return not prefix or following is None or following.get("role") == "user"


class SplitCache:
    """The split of each thread's last history, bounded to `capacity` threads (least recent out)."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, tuple[list[Mapping[str, Any]], Split]] = OrderedDict()

    def split(self, scope: str, messages: Sequence[Mapping[str, Any]]) -> Split:
        """Split `messages`; raises what `split_blocks` raises for invalid messages."""
        cached = self._items.get(scope)
        result: Split
        if cached is not None and _extends(messages, cached[0]):
            prefix, known = cached
            rest, reusable, rest_earlier = _split(messages[len(prefix) :], len(prefix), len(known.blocks))
            result = Split(known.system + rest.system, known.blocks + rest.blocks, known.ids + rest.ids, rest.tail,
                           rest.sealed if reusable else known.sealed, known.saves + rest.saves, known.earlier + rest.earlier)  # fmt: skip
            earlier = known.earlier + rest_earlier
            reusable += len(known.blocks)
            system, start = known.system, len(prefix)  # the known prefix's system messages, then the new part's
        else:
            result, reusable, earlier = _split(messages, 0)
            system, start = (), 0
        # the system messages of the part a later request reuses (later ones are re-read each time)
        system += tuple(m for m in messages[start : result.sealed] if m.get("role") in SYSTEM_ROLES)
        prefix = list(messages[: result.sealed])
        kept = Split(system, result.blocks[:reusable], result.ids[:reusable], (), result.sealed,
                     tuple(i for i in result.saves if i < reusable), earlier)  # fmt: skip
        self._items[scope] = (prefix, kept)
        self._items.move_to_end(scope)
        if len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return result


@dataclass(frozen=True)
class _Pool:
    """A request's ids (a tuple: compared with the next request's) and what `Pools.of` made of them; ``order`` and
    ``seen`` the distinct ids before the recent turns (``ids[:cut]``), in order and as a set."""

    ids: tuple[str, ...]
    cut: int
    earlier: tuple[str, ...]
    recent: frozenset[str]
    pool: tuple[str, ...]
    history: frozenset[str]
    order: tuple[str, ...]
    seen: frozenset[str]


class Pools:
    """Per thread, what its last request's ids made (see :meth:`of`), least recently used out."""

    def __init__(self, capacity: int = POOLS_KEPT) -> None:
        self._last: Lru[str, _Pool] = Lru(capacity)

    def of(
        self, scope: str, ids: Sequence[str], cut: int, earlier: tuple[str, ...]
    ) -> tuple[frozenset[str], tuple[str, ...], frozenset[str]]:
        """The ids of the recent turns (``ids[cut:]``), the pool (the rest, each once, in conversation order) and the
        history's (with the pages an earlier request stored of a block this history has grown: `Split.earlier`).
        A new question on the same history (an agent's tool rounds, a retry) gets the thread's last ones: its ids
        are compared with theirs in C, where building them anew is a Python pass over every exchange. One whose ids
        before its recent turns begin with the last one's (the same history asked something else, or grown by a
        turn) extends the last one's distinct ids by its new ones, and passes over them again only where a recent
        turn's id is among them (a block said again)."""
        key, last = tuple(ids), self._last.get(scope)
        if last is not None and last.cut == cut and last.earlier == earlier and last.ids == key:
            return last.recent, last.pool, last.history
        head = key[:cut]
        if last is not None and cut >= last.cut and head[: last.cut] == last.ids[: last.cut]:
            new = tuple(dict.fromkeys(i for i in head[last.cut :] if i not in last.seen))
            order, seen = (last.order + new, last.seen.union(new)) if new else (last.order, last.seen)
        else:
            order, seen = tuple(dict.fromkeys(head)), frozenset(head)
        recent = frozenset(key[cut:])
        pool = order if recent.isdisjoint(seen) else tuple(i for i in order if i not in recent)
        made = _Pool(key, cut, earlier, recent, pool, seen.union(recent, earlier), order, seen)
        self._last.put(scope, made)
        return made.recent, made.pool, made.history
