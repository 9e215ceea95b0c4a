"""Scaffolding: which Logical Blocks of a request are the client's per-request scaffolding, not conversation.

Coding assistants re-send, at fixed places in every request, messages that are not the conversation: few-shot
example exchanges, a repository map, the current contents of the files in the chat, each answered by a canned
acknowledgement (aider: "I have *added these files to the chat*…" → "Ok, any changes I propose will be to those
files."), reminders. Such blocks belong to the skeleton, verbatim and in their place, like the system prompt.
Paged, the examples would be stored and consolidated as memory of the conversation, and the budget could fold
the file the model is editing to one line.

:func:`decide` tells them apart by structure, comparing the request with the thread's previous one (its
:class:`Layout`, remembered per thread). The conversation is the part that grows: a client re-sends it whole
and appends to it; its scaffolding is re-sent at fixed places around it. So, for the sealed blocks of a request:

* **growth**: a block the previous request did not have, and that replaces none of its blocks, is conversation;
  among them, the exchange that answers the previous request's live turn (the same head: first line of the
  user text) marks where the conversation grew;
* **trailing**: a block the previous request had, which now sits after that answer and all of the growth, is
  scaffolding — the conversation does not extend from it (aider's file block, a reminder between the history
  and the live turn);
* **replaced**: a new block with the same head as a block of the previous request that is gone is that block,
  updated in place: scaffolding when the old one was, or when it sits after that answer (the file block after
  an edit). The old version is in no request any more, so it never shows again;
* **lead**: once the thread shows trailing scaffolding, the blocks that open the request and have been there
  since the thread's first request, before any growth, are the client's preamble (aider's examples and repository
  map), if they are all plain exchanges as examples are, and few (:data:`PREAMBLE_BLOCKS`): a history the first
  request brought, followed by a reminder the client re-sends, has the same layout;
* **identity**: a block identical to one that was scaffolding stays scaffolding wherever it moves.

The first request of a thread has nothing to compare with: by its shape alone a client's examples cannot be told
from an imported conversation (both are plain exchanges before the live turn). There the client's own markers
from the config decide, and they stay as hints on top of the structure in every request:

* **pinned** (``pcp.pin``): a block whose user text matches a pin is scaffolding, wherever it sits;
* **preamble** (``pcp.pin_preamble``): the first block matching a preamble marker closes the client's preamble;
  it and every block before it are scaffolding, if every one of them is a plain exchange (one user message
  answered by one assistant message without tool calls). A conversation with tool calls before a stray marker
  is never taken for a preamble.

Without markers, a first request's scaffolding is stored as pages like the conversation; once the next request
shows it is scaffolding, it is out of the conversation and those pages are never shown again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.core.blocks import Block
from gateway.core.messages import tool_calls_of, users_said

__all__ = ["Decision", "Layout", "compile_pins", "decide", "head_of", "is_plain_exchange", "scaffolding_blocks", "settled"]

# a block's kind in a Layout
SCAFFOLD = "s"
GROWN = "g"  # conversation that appeared after the thread's first request
FIRST = "o"  # in the thread's first request, not (yet) known as scaffolding: conversation until shown otherwise
LAYOUT_VERSION = 1
PREAMBLE_BLOCKS = 12  # at most this many blocks are taken for a preamble by structure (see _lead)
_FIRST_LINE = re.compile(r"\S[^\n]*")


def compile_pins(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """The pin patterns compiled; raises ``re.error`` naming the first one that is not a regular expression."""
    return tuple(re.compile(pattern) for pattern in patterns)


def is_plain_exchange(block: Block) -> bool:
    """One user message answered by one assistant message without tool calls: the shape of an example."""
    if len(block.messages) != 2:
        return False
    asked, answered = block.messages
    return asked.get("role") == "user" and answered.get("role") == "assistant" and not tool_calls_of(answered)


def head_of(text: str) -> str:
    """A short hash of the first non-empty line of a block's user text (empty without one): what a block
    updated in place keeps (aider's "I have *added these files to the chat*…", a reminder's opening tag)."""
    found = _FIRST_LINE.search(text)
    line = found.group().strip() if found else ""
    return _digest(line) if line else ""


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=5).hexdigest()


def _matches(block: Block, patterns: Sequence[re.Pattern[str]]) -> bool:
    return bool(block.anchor_text) and any(pattern.search(block.anchor_text) for pattern in patterns)


def scaffolding_blocks(
    blocks: Sequence[Block], pins: Sequence[re.Pattern[str]], preamble: Sequence[re.Pattern[str]] = ()
) -> frozenset[int]:
    """Positions in ``blocks`` of the scaffolding the config's markers name: the pinned blocks, and the closed
    preamble up to the first block matching a ``preamble`` marker (see the module docstring)."""
    return _hinted(blocks, range(len(blocks)), pins, preamble)


def _hinted(
    blocks: Sequence[Block], among: Iterable[int], pins: Sequence[re.Pattern[str]], preamble: Sequence[re.Pattern[str]]
) -> frozenset[int]:
    """:func:`scaffolding_blocks`, looking for markers only in the blocks at positions ``among`` (in order)."""
    if not pins and not preamble:
        return frozenset()
    found: set[int] = set()
    marker = None
    for index in among:
        if _matches(blocks[index], pins):
            found.add(index)
        if marker is None and _matches(blocks[index], preamble):
            marker = index
    if marker is not None and all(is_plain_exchange(blocks[i]) for i in range(marker + 1)):
        found.update(range(marker + 1))
    return frozenset(found)


@dataclass(frozen=True)
class Layout:
    """What is remembered of a thread's last request: its sealed blocks' ids, heads and kinds, in order."""

    ids: tuple[str, ...]
    heads: tuple[str, ...]
    kinds: str  # one of SCAFFOLD / GROWN / FIRST per block
    live: str = ""  # the head of the request's live turn: the block that answers it is the conversation's growth
    hints: str = ""  # which markers decided it (a hash of them): with others, every block is looked at again
    # whether each of its ids has one kind (its copies' too: `settled`), where a request found it so (None: not looked
    # at): the next request on the same blocks does not look again
    settled: bool | None = field(default=None, compare=False)

    def dumps(self, lists: tuple[str, str] | None = None) -> str:
        """The layout as stored; ``lists``: its ids and heads already written (:meth:`lists`), the bulk of it."""
        ids, heads = lists if lists is not None else self.lists()
        rest = [json.dumps(value, separators=(",", ":")) for value in (self.kinds, self.live, self.hints)]
        return f'{{"v":{LAYOUT_VERSION},"ids":{ids},"heads":{heads},"kinds":{rest[0]},"live":{rest[1]},"hints":{rest[2]}}}'

    def lists(self, before: tuple[Layout, tuple[str, str]] | None = None) -> tuple[str, str]:
        """The ids and the heads as they are written in :meth:`dumps`; ``before``, an earlier layout with its lists:
        when its ids and heads begin this one's (a chat's next request), its lists are written on from."""
        if before is not None:
            layout, written = before
            n = len(layout.ids)
            if 0 < n < len(self.ids) and self.ids[:n] == layout.ids and self.heads[:n] == layout.heads:
                more = (json.dumps(self.ids[n:], separators=(",", ":")), json.dumps(self.heads[n:], separators=(",", ":")))
                ids, heads = (f"{old[:-1]},{new[1:]}" for old, new in zip(written, more))
                return ids, heads
        return json.dumps(self.ids, separators=(",", ":")), json.dumps(self.heads, separators=(",", ":"))

    @classmethod
    def loads(cls, raw: str | bytes | None) -> Layout | None:
        """The layout in ``raw``; ``None`` when there is none or it is not one this version wrote (the request
        is then decided as a thread's first)."""
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            ids, heads = (tuple(map(str, data[key])) for key in ("ids", "heads"))
            kinds, live, hints = (str(data[key]) for key in ("kinds", "live", "hints"))
            layout = cls(ids, heads, kinds, live, hints)
        except (ValueError, TypeError, KeyError):
            return None
        ok = data.get("v") == LAYOUT_VERSION and len(layout.ids) == len(layout.heads) == len(layout.kinds)
        return layout if ok and set(layout.kinds) <= {SCAFFOLD, GROWN, FIRST} else None


@dataclass(frozen=True)
class Decision:
    """The scaffolding of a request (positions in its blocks) and the layout to remember for the next one
    (``None``: keep the previous one, this request had no sealed block to learn from)."""

    scaffold: frozenset[int]
    layout: Layout | None


def decide(
    blocks: Sequence[Block],
    ids: Sequence[str],
    tail: Sequence[Mapping[str, Any]],
    previous: Layout | None,
    pins: Sequence[re.Pattern[str]] = (),
    preamble: Sequence[re.Pattern[str]] = (),
) -> Decision:
    """The scaffolding among ``blocks`` (whose page ids are ``ids``; ``tail`` is the request's live turn), given
    the thread's ``previous`` layout (``None`` for its first request): the structural rule of the module
    docstring, with the config's markers on top."""
    live = head_of(users_said(tail))
    hints = _digest(json.dumps([[p.pattern for p in pins], [p.pattern for p in preamble]]))
    if not blocks:
        return Decision(frozenset(), None if previous is not None else Layout((), (), "", live, hints))
    if previous is None:
        hinted = scaffolding_blocks(blocks, pins, preamble)
        first = "".join(SCAFFOLD if i in hinted else FIRST for i in range(len(blocks)))
        return Decision(hinted, Layout(tuple(ids), tuple(head_of(block.anchor_text) for block in blocks), first, live, hints))
    # A block's head, and whether a marker matches it, are functions of its content, hence of its id: for the
    # blocks the previous request had, they are in its layout (a pinned block is there as scaffolding) unless
    # the markers changed since.
    if previous.hints == hints and tuple(ids) == previous.ids and (previous.settled if previous.settled is not None else settled(previous)):
        # the same blocks as the previous request (a new question on the same history, a retry, a tool round): each
        # keeps its kind, and no marker has a new block to look at (what the rule below gives, without its walk)
        return Decision(_scaffold(previous.kinds), Layout(previous.ids, previous.heads, previous.kinds, live, hints, settled=True))
    grown = _grown(blocks, ids, previous, live, hints, pins, preamble) if previous.hints == hints else None
    if grown is not None:
        return grown
    known = dict(zip(previous.ids, previous.heads))
    heads = tuple(known[i] if i in known else head_of(block.anchor_text) for i, block in zip(ids, blocks))
    fresh = range(len(ids)) if previous.hints != hints else (i for i, block_id in enumerate(ids) if block_id not in known)
    hinted = _hinted(blocks, fresh, pins, preamble)
    kinds, trailing = _structural(ids, heads, previous)
    for i in hinted:
        kinds[i] = SCAFFOLD
    if trailing:  # by this request's structure alone: a pin in a plain chat makes no preamble of its history
        _lead(blocks, kinds)
    joined = "".join(kinds)
    return Decision(_scaffold(joined), Layout(tuple(ids), heads, joined, live, hints))


def settled(layout: Layout) -> bool:
    """Whether the rule's walk over ``layout``'s own blocks gives their kinds back: every copy of a block said again
    word for word has the kind of its last copy (which the walk gives them all), as every block of distinct ids has.
    A long history repeats exchanges (LongMemEval's filler sessions do): it is settled after one request on it."""
    last = dict(zip(layout.ids, layout.kinds))
    return len(last) == len(layout.ids) or all(last[i] == kind for i, kind in zip(layout.ids, layout.kinds))


def _scaffold(kinds: str) -> frozenset[int]:
    """The positions of the scaffolding in ``kinds`` (found by the regex engine: a chat of thousands has a few)."""
    return frozenset(m.start() for m in re.finditer(SCAFFOLD, kinds))


def _grown(
    blocks: Sequence[Block], ids: Sequence[str], previous: Layout, live: str, hints: str,
    pins: Sequence[re.Pattern[str]], preamble: Sequence[re.Pattern[str]],
) -> Decision | None:
    """The decision for the previous request's blocks, all of them in their order, with new ones after them (a
    chat's next request), found without the rule's walk over every block: what `_structural` gives them (each old
    block keeps its kind, the new ones are growth: nothing is gone and nothing comes after the growth, so nothing
    trails it), with the markers looking at the new blocks it has not seen. ``None`` when the request is not that
    (or the previous one repeated a block: its copies take their last kind, which the walk decides)."""
    n = len(previous.ids)
    if len(ids) <= n or tuple(ids[:n]) != previous.ids:
        return None
    seen = set(previous.ids)
    if len(seen) != n:
        return None
    heads = previous.heads + tuple(head_of(block.anchor_text) for block in blocks[n:])
    kinds = previous.kinds + GROWN * (len(ids) - n)
    hinted = _hinted(blocks, (i for i in range(n, len(ids)) if ids[i] not in seen), pins, preamble)
    if hinted:
        marked = list(kinds)
        for i in hinted:
            marked[i] = SCAFFOLD
        kinds = "".join(marked)
    return Decision(_scaffold(kinds), Layout(tuple(ids), heads, kinds, live, hints))


def _structural(ids: Sequence[str], heads: Sequence[str], previous: Layout) -> tuple[list[str], bool]:
    """Each block's kind by identity, growth, replacement and trailing position (the lead is decided after),
    and whether some of the client's blocks came after the answer to the previous request's live turn."""
    before = dict(zip(previous.ids, previous.kinds))  # an id repeated within a request keeps its last kind
    present = set(ids)
    # the previous request's blocks that are gone, by head, in order: what a new block may have replaced
    gone: dict[str, list[str]] = {}
    for old, head, kind in zip(previous.ids, previous.heads, previous.kinds):
        if old not in present and head:
            gone.setdefault(head, []).append(kind)
    kinds: list[str] = []
    growth: list[int] = []
    replaced: set[int] = set()  # new blocks updating an old one in place; they take its kind
    # a block said again word for word (aider's "I updated the files." / "Ok." after each edit) is the old block
    # only as often as the previous request had it: the copies beyond are new, so conversation
    copies = Counter(previous.ids)
    for i, (block_id, head) in enumerate(zip(ids, heads)):
        if copies[block_id] > 0:
            copies[block_id] -= 1
            kinds.append(before[block_id])
        elif gone.get(head):
            kinds.append(gone[head].pop(0))
            replaced.add(i)
        else:
            kinds.append(GROWN)
            growth.append(i)
    # The conversation grew by the exchange that answers the previous request's live turn; what the client sends
    # after it, updated in place or re-sent unchanged after all of the growth, is its scaffolding. (A history
    # edited in its middle grows elsewhere: nothing after the edit is taken for scaffolding.)
    answer = next((i for i in growth if previous.live and heads[i] == previous.live), None)
    after = range(answer + 1, len(ids)) if answer is not None else range(0)
    trailing = [i for i in after if i in replaced or (i > growth[-1] and ids[i] in before)]
    for i in trailing:
        kinds[i] = SCAFFOLD
    return kinds, bool(trailing)


def _lead(blocks: Sequence[Block], kinds: list[str]) -> None:
    """Make scaffolding of the blocks that open the request and were there since the thread's first request,
    before any conversation, when they are all plain exchanges and no more than a preamble holds."""
    end = kinds.index(GROWN) if GROWN in kinds else len(kinds)
    lead = [i for i in range(end) if kinds[i] == FIRST]
    # An imported history followed by a client's reminder looks the same; the cap bounds what such a history
    # could keep out of paging (aider's examples, switch and repository map are 3 to 6 blocks).
    if lead and len(lead) <= PREAMBLE_BLOCKS and all(is_plain_exchange(blocks[i]) for i in lead):
        for i in lead:
            kinds[i] = SCAFFOLD
