"""A long conversation's request body read on from where an earlier body of it stopped.

A client resends the whole history with every turn, so the body of a thread's next request is, byte for byte, an
earlier body up to the end of one of its messages, then the new messages and the rest. Decoding it whole costs what
the history is long (orjson: ~1.5 µs a message, 30 ms at 20,000), and so does everything that then compares the
decoded history with the one before it (`gateway.service.split_cache`) and frees the one before. Where a body begins
with the bytes of an earlier body's first ``m`` messages (one ``memcmp``), those messages are the earlier body's
decoded ones: only the rest is decoded, as orjson would decode it after them (it is read from a document that opens
the messages array at the same place), and the history's messages are the same objects request after request, so
comparing them is comparing identities.

Only a message whose values are all immutable (text, numbers, null) is handed out again; one with a list or an
object inside (content parts, tool calls) is decoded again from its own bytes each time, since a consumer may change
those in place (litellm rewrites content parts). Where a message's bytes are is found, with `json`'s scanner, the
first time a body is resumed from (bodies that no later body continues never pay it), and for a resumed body only
over its new part.

Bodies below `MIN_BYTES` are decoded whole: they cost less than a lookup would save. What is kept is bounded by
`MAX_BODIES` and `MAX_BYTES` (least recently used out); a body continued by a later one is replaced by it.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["Bodies", "Read"]

MIN_BYTES = 1 << 15  # a body this long or longer is kept and may be resumed from (orjson reads 32 KiB in ~0.05 ms)
HEAD_BYTES = 512  # bodies are looked up by their first bytes: the request's parameters before, or its first message
MAX_BODIES = 32
MAX_BYTES = 64 << 20  # (their decoded messages, kept with them, take a few times that)
_CHUNK = 1 << 16  # bytes compared at a time where two bodies differ (an earlier message edited)
PER_HEAD = 4  # bodies kept under one head: conversations that open alike (one system prompt), or a branch
_IMMUTABLE = (str, int, float, bool, type(None))
_WHITESPACE = " \t\n\r"


@dataclass(frozen=True)
class _Layout:
    """Where a body's messages are: byte offsets of the messages array's first byte after ``[``, of each message's
    first and one-past-last byte, and the positions of the messages that may not be handed out again (a list or an
    object inside)."""

    opens: int
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    unshared: tuple[int, ...]


@dataclass(eq=False)
class Read:
    """A decoded body: its JSON object, and how many of its messages were an earlier body's (already checked)."""

    body: bytes
    data: dict[str, Any]
    reused: int = 0
    layout: _Layout | None = field(default=None, repr=False)
    # the messages as decoded, whatever a consumer does to ``data``'s list (set when read on, or when kept); and the
    # body this one was read on from
    messages: tuple[Any, ...] = field(default=(), repr=False)
    parent: Read | None = field(default=None, repr=False)


def _unshared(messages: list[Any], offset: int = 0) -> tuple[int, ...]:
    """The positions (shifted by ``offset``) of the messages that are not objects of immutable values only."""
    return tuple(
        offset + i for i, m in enumerate(messages) if type(m) is not dict or not all(isinstance(v, _IMMUTABLE) for v in m.values())
    )


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


class _Scanner:
    """`json`'s C scanner over a body's text, giving byte offsets."""

    def __init__(self, body: bytes, base: int) -> None:
        self.text = body[base:].decode("utf-8")
        self.base = base
        self._ascii = self.text.isascii()
        self._scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
        self._mark, self._byte = 0, base

    def byte(self, i: int) -> int:
        """The byte offset in the body of the text's position ``i`` (positions asked in increasing order)."""
        if self._ascii:
            return self.base + i
        self._byte += len(self.text[self._mark : i].encode("utf-8"))
        self._mark = i
        return self._byte

    def value_end(self, i: int) -> int:
        return self._scan(self.text, i)[1]

    def elements(self, i: int, first: bool) -> tuple[list[int], list[int]] | None:
        """The text positions of the array elements from ``i`` (just after ``[`` when ``first``, else just after an
        element) to the array's ``]``; None if the text is not such an array."""
        starts: list[int] = []
        ends: list[int] = []
        i = _skip(self.text, i)
        if i < len(self.text) and self.text[i] == "]":
            return starts, ends
        if not first:
            if i >= len(self.text) or self.text[i] != ",":
                return None
            i = _skip(self.text, i + 1)
        while True:
            starts.append(i)
            i = self.value_end(i)
            ends.append(i)
            i = _skip(self.text, i)
            if i < len(self.text) and self.text[i] == "]":
                return starts, ends
            if i >= len(self.text) or self.text[i] != ",":
                return None
            i = _skip(self.text, i + 1)


def _layout(read: Read) -> _Layout | None:
    """Where ``read``'s messages are (its body is one orjson read whole); None where the messages array is not
    found as the top level's "messages" key, or appears twice."""
    scanner = _Scanner(read.body, 0)
    text = scanner.text
    try:
        i = _skip(text, 0)
        if text[i] != "{":
            return None
        i = _skip(text, i + 1)
        found: tuple[int, list[int], list[int]] | None = None
        while text[i] != "}":
            key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            i = _skip(text, i)
            i = _skip(text, i + 1)  # the ':'
            if key == "messages":
                if found is not None or text[i] != "[":
                    return None
                elements = scanner.elements(i + 1, first=True)
                if elements is None:
                    return None
                found = (i + 1, *elements)
            i = _skip(text, scanner.value_end(i))
            if text[i] == ",":
                i = _skip(text, i + 1)
    except (ValueError, IndexError, StopIteration):
        return None
    if found is None:
        return None
    opens, starts, ends = found
    messages = read.data.get("messages")
    if not isinstance(messages, list) or len(messages) != len(starts):
        return None
    first = scanner.byte(opens)  # (byte offsets are asked in increasing order)
    spans = [(scanner.byte(s), scanner.byte(e)) for s, e in zip(starts, ends)]
    return _Layout(first, tuple(s for s, _ in spans), tuple(e for _, e in spans), _unshared(messages))


class Bodies:
    """The process's recent long bodies, by their first bytes."""

    def __init__(self) -> None:
        self._kept: OrderedDict[int, Read] = OrderedDict()  # by id(read), least recently used first
        self._heads: dict[bytes, list[Read]] = {}
        self._bytes = 0

    def read(self, body: bytes, whole: Callable[[bytes], dict[str, Any]]) -> Read:
        """``body`` decoded: by ``whole`` (the plain reading, which says what is wrong with a body) when no kept
        body begins it, else on from the one whose messages it repeats the most of."""
        if len(body) < MIN_BYTES:
            return Read(body, whole(body))
        best: tuple[int, Read, _Layout] | None = None
        for earlier in list(self._heads.get(body[:HEAD_BYTES], ())):
            layout = earlier.layout or self._lay_out(earlier)
            if layout is None:
                continue
            m = _repeated(body, earlier.body, layout)
            if m is not None and (best is None or m > best[0]):
                best = (m, earlier, layout)
        resumed = self._resume(body, *best) if best is not None else None
        return resumed if resumed is not None else Read(body, whole(body))

    def keep(self, read: Read) -> None:
        """Keep ``read`` (a body the request accepted) to resume later bodies from."""
        if len(read.body) < MIN_BYTES or id(read) in self._kept:
            return
        if not read.messages and isinstance(read.data.get("messages"), list):  # (no consumer has had the list yet)
            read.messages = tuple(read.data["messages"])
        parent, read.parent = read.parent, None
        if parent is not None and parent.layout is not None and read.reused >= len(parent.layout.ends) - 1:
            self._drop(parent)  # the body this one continues (or whose live message it replaces) is not needed again
        kin = self._heads.setdefault(read.body[:HEAD_BYTES], [])
        kin.insert(0, read)
        self._kept[id(read)] = read
        self._bytes += len(read.body)
        while len(kin) > PER_HEAD:  # (`_drop` takes it out of `kin`)
            self._drop(kin[-1])
        while self._kept and (len(self._kept) > MAX_BODIES or self._bytes > MAX_BYTES):
            self._drop(next(iter(self._kept.values())))

    def _drop(self, read: Read) -> None:
        if self._kept.pop(id(read), None) is None:
            return
        self._bytes -= len(read.body)
        head = read.body[:HEAD_BYTES]
        kin = self._heads.get(head, [])
        if read in kin:
            kin.remove(read)
        if not kin:
            self._heads.pop(head, None)

    def _lay_out(self, read: Read) -> _Layout | None:
        read.layout = _layout(read)
        if read.layout is None:
            self._drop(read)
        return read.layout

    def _resume(self, body: bytes, m: int, earlier: Read, layout: _Layout) -> Read | None:
        """``body`` read on after ``earlier``'s first ``m`` messages (which it repeats); None when the rest is not
        what orjson reads without complaint (the whole body is then read the plain way)."""
        base = layout.ends[m - 1] if m else layout.opens
        opening = b'{"messages":[0' if m else b'{"messages":['
        try:
            rest = orjson.loads(opening + body[base:])
            head = orjson.loads(earlier.body[: layout.opens] + b"]}")
        except orjson.JSONDecodeError:
            return None
        if type(rest) is not dict or type(head) is not dict:
            return None
        tail = rest.get("messages")
        if type(tail) is not list or (m and (not tail or type(tail[0]) is not int)):
            return None
        messages = list(earlier.messages[:m])
        for i in layout.unshared[: bisect_left(layout.unshared, m)]:  # decoded anew: a consumer may change them
            messages[i] = orjson.loads(earlier.body[layout.starts[i] : layout.ends[i]])
        new = tail[1:] if m else tail
        messages.extend(new)
        data = head
        data["messages"] = messages
        for key, value in rest.items():
            if key != "messages":
                data[key] = value
        read = Read(body, data, m, messages=tuple(messages), parent=earlier)  # (the list is the consumer's)
        scanner = _Scanner(body, base)
        elements = scanner.elements(0, first=not m)
        if elements is not None and len(elements[0]) == len(new):
            spans = [(scanner.byte(s), scanner.byte(e)) for s, e in zip(*elements)]
            read.layout = _Layout(layout.opens, layout.starts[:m] + tuple(s for s, _ in spans),
                                  layout.ends[:m] + tuple(e for _, e in spans),
                                  layout.unshared[: bisect_left(layout.unshared, m)] + _unshared(new, m))  # fmt: skip
        return read


def _repeated(body: bytes, earlier: bytes, layout: _Layout) -> int | None:
    """How many of ``earlier``'s first messages ``body`` repeats byte for byte, head included; None if not even
    the bytes before its messages."""
    same = _common_prefix(body, earlier)
    if same < layout.opens:
        return None
    return bisect_right(layout.ends, same)


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length of the bytes ``a`` and ``b`` begin with alike: memcmp over the whole, then by chunks from the
    start to the first chunk that differs, and by halves within it."""
    n = min(len(a), len(b))
    view = memoryview(b)
    if a.startswith(view[:n]):
        return n
    i = 0
    while a.startswith(view[i : i + _CHUNK], i):
        i += _CHUNK
    low, high = i, min(i + _CHUNK, n)  # a and b agree to `low`, not to `high`
    while high - low > 1:
        mid = (low + high) // 2
        if a.startswith(view[low:mid], low):
            low = mid
        else:
            high = mid
    return low
