"""Segmentation: a thread's pages cut into topics (semantic drift), relayed and split by size, flushed when idle
or on ``/save`` (seed 004 §4.1.2–4.1.3).

Each thread has one :class:`Buffer`: the Original pages *committed* to the current topic, waiting to be frozen
into a Consolidated page, followed by the *pending* pages, not yet decided. A page is judged by its vector, the
embedding of the whole exchange (a short user message says little on its own: "How do I know when it's al
dente?" is about pasta through its reply). A page whose user message carries no content of its own
(``content_free``: "ok", "continue", "thanks") or that has no vector is *neutral*: it goes with the page before it
and says nothing about the topic.

The topic's centre CL is the mean direction of the vectors of its committed pages with content. The first pending
page p with content is decided once ``lookahead`` (W) more pages with content have come after it. With CR the
mean direction of those W, p **opens a new topic** iff::

    cos(p, CR) - cos(p, CL) > drift_margin   and   cos(CL, normalise(CR + p)) < drift_overlap

that is: p is clearly closer to what follows it than to the topic so far, and p with what follows is another
subject than the topic. Otherwise p joins the topic. Judging p against the run it opens, not against a fixed
cosine bar, keeps the cut where the subject changes whatever the cosine scale of a chat's style (short replies,
long ones, lower-case chatter); :class:`SegmentationPolicy` says how the numbers were measured. :func:`admit`:

* a buffer without committed pages (new, after an idle gap, or left pageless by a relay of :func:`flush_now`,
  whose topic the page then continues) commits its first page at once (nothing to flush before it), and so does
  a buffer whose committed pages are all neutral, for its first page with content (nothing to compare it with):
  that page's vector is the topic's first;
* a neutral page at the head of the pending window (none waits before it) is committed with the page before it;
  one that comes after a pending page waits with it and goes wherever that page goes;
* a page **opens a new topic** (``DRIFT``): the committed pages are flushed; the new topic (``topic_id`` = the
  page's id) starts with the page and the neutral pages after it; the pages after those stay pending. A page
  whose vector has another length than CL's (another embedder) opens a new topic without being compared, when
  its turn comes;
* a page that joins the topic is committed with the neutral pages after it. If that would take the committed part
  past ``max_processing_tokens``, it **relays** (``RELAY``, ``carry=True``): the committed pages are flushed and
  the page opens the next buffer of the *same* topic (same ``topic_id`` and CL); the IO side writes the running
  summary of the flush into the new buffer with :func:`with_head_summary`. Past ``container_tokens`` (when set) it
  **splits** (``SPLIT``) the same way, with nothing carried over: a container stays small enough to be shown whole
  in Detail, and metabolic merging joins the parts later. Pending pages count toward neither limit;
* a page that comes ``idle`` or more after the buffer's latest page (in the pages' own time) finds a buffer that
  was already idle: it is flushed (``IDLE``) first and the page starts afresh, so the outcome does not depend on
  whether the idle scheduler ran in between.

A boundary is thus placed at the exchange where the topic changed, found W exchanges with content after it. A
topic is decided before it relays: a page that opens a new topic never relays the old one. Each arriving page
makes at most one more pending page decidable, so :func:`admit` returns at most one flush. It decides every
decidable page up to the first flush: several are decidable only when the lookahead was made smaller since the
buffer was built, and what is left then is decided as the next pages come.

:func:`flush_if_idle` flushes a buffer quiet for ``idle`` (``IDLE``) and :func:`flush_now` flushes on ``/save``
(``SAVE``). Both flush the committed and the pending pages as one run: nothing confirmed a boundary among them,
and no limit is judged on it (the run may pass one by the pending pages: W with content at most, and the
neutral ones among them). After ``DRIFT``, ``IDLE`` and ``SAVE`` the next buffer starts fresh; after ``SPLIT``
and ``RELAY`` it keeps the topic. A flush never has zero pages.

The buffer's life is the table :data:`TRANSITIONS` keyed by (:class:`SegmentState`, :class:`SegmentEvent`),
applied by :func:`next_segment_state`; its illegal moves are a page waiting in an empty buffer (a pending page
always follows a committed one) and a relay or split of an empty buffer.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from gateway.core.errors import IllegalTransition
from gateway.core.pages import utc

__all__ = [
    "TRANSITIONS",
    "Buffer",
    "Flush",
    "FlushReason",
    "SegmentBlock",
    "SegmentEvent",
    "SegmentState",
    "SegmentationPolicy",
    "Step",
    "admit",
    "cosine",
    "flush_if_idle",
    "flush_now",
    "next_segment_state",
    "normalise",
    "with_head_summary",
]


def normalise(vector: Sequence[float]) -> tuple[float, ...]:
    """``vector`` scaled to unit L2 length; the zero vector (or an empty one) is returned unchanged."""
    length = math.sqrt(math.fsum(x * x for x in vector))
    if length == 0.0:
        return tuple(float(x) for x in vector)
    return tuple(x / length for x in vector)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of ``a`` and ``b`` in [-1, 1]; 0.0 when either is zero.

    Raises ``ValueError`` when the lengths differ.
    """
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of length {len(a)} and {len(b)}")
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norm == 0.0:
        return 0.0
    return max(-1.0, min(1.0, math.fsum(x * y for x, y in zip(a, b)) / norm))


class SegmentState(enum.Enum):
    EMPTY = "EMPTY"  # no pages (possibly a relayed topic and head summary)
    COLLECTING = "COLLECTING"  # committed pages, and possibly pending ones after them


class SegmentEvent(enum.Enum):
    BLOCK_COMMITTED = "block committed"
    BLOCK_PENDING = "block pending"
    DRIFT = "drift"
    SPLIT = "split"
    RELAY = "relay"
    IDLE = "idle"
    SAVE = "save"


class FlushReason(enum.Enum):
    DRIFT = "drift"
    SPLIT = "split"
    RELAY = "relay"
    IDLE = "idle"
    SAVE = "save"


@dataclass(frozen=True)
class Step:
    """One row of :data:`TRANSITIONS`: the next state, whether the committed pages are flushed, whether the topic
    is kept."""

    state: SegmentState
    flush: bool
    keep_topic: bool


_E, _C = SegmentState.EMPTY, SegmentState.COLLECTING
TRANSITIONS: Mapping[tuple[SegmentState, SegmentEvent], Step] = {
    (_E, SegmentEvent.BLOCK_COMMITTED): Step(_C, flush=False, keep_topic=True),
    (_C, SegmentEvent.BLOCK_COMMITTED): Step(_C, flush=False, keep_topic=True),
    (_C, SegmentEvent.BLOCK_PENDING): Step(_C, flush=False, keep_topic=True),
    (_C, SegmentEvent.DRIFT): Step(_E, flush=True, keep_topic=False),
    (_C, SegmentEvent.SPLIT): Step(_E, flush=True, keep_topic=True),
    (_C, SegmentEvent.RELAY): Step(_E, flush=True, keep_topic=True),
    (_C, SegmentEvent.IDLE): Step(_E, flush=True, keep_topic=False),
    (_C, SegmentEvent.SAVE): Step(_E, flush=True, keep_topic=False),
    # A pageless buffer holding a relayed topic: nothing to flush, the relayed topic is dropped.
    (_E, SegmentEvent.DRIFT): Step(_E, flush=False, keep_topic=False),
    (_E, SegmentEvent.IDLE): Step(_E, flush=False, keep_topic=False),
    (_E, SegmentEvent.SAVE): Step(_E, flush=False, keep_topic=False),
}


def next_segment_state(state: SegmentState, event: SegmentEvent) -> Step:
    """The row for ``(state, event)``; raises :class:`IllegalTransition` naming both for a missing pair."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition("segmentation buffer", state.name, event.name) from None


@dataclass(frozen=True)
class SegmentationPolicy:
    """The knobs of segmentation.

    ``lookahead`` (W), ``drift_margin`` and ``drift_overlap`` decide where a topic ends (module docstring). They
    were measured with all-MiniLM-L6-v2 on exchanges embedded as ingestion embeds them (without the transcript's
    role prefixes), over chats made of fifteen scripted topics of six exchanges each (``tests/support/topics.py``
    and ``topic_styles.py``: short, terse, long and lower-case casual replies, some user messages content-free).
    Over the 4,904 decisions of a sample of 383 three-topic chats (each page judged after the right cuts before
    it), W = 3, margin 0.15 and overlap 0.25 made the fewest errors of the grid W 1–3, margin 0.0–0.2, overlap
    0.15–0.35: 4 false cuts and 67 missed of 766 boundaries (the best W = 2 missed 99). Over all 210 ordered pairs
    of the topics they miss 19 boundaries, between related subjects (two food topics, moving and taxes, hiking
    and marathon training) or next to a chat between friends, where the style weighs as much as the subject, and
    cut one topic falsely. The fixed cosine bar they replace (0.35 to a moving average of the topic) cut 70 of
    those 383 chats exactly right; this rule cuts 317.

    A topic's container is frozen once the next topic has had W + 1 exchanges with content (or when the thread
    is idle or saved): a larger W waits longer, and a topic needs W + 1 exchanges for the pages after its first
    to be all its own.
    """

    drift_margin: float = 0.15
    drift_overlap: float = 0.25
    lookahead: int = 3
    max_processing_tokens: int = 8000
    idle: timedelta = timedelta(minutes=30)
    container_tokens: int | None = None

    def __post_init__(self) -> None:
        if not -2.0 <= self.drift_margin <= 2.0:
            raise ValueError("drift_margin must be in [-2, 2] (a difference of two cosines)")
        if not -1.0 <= self.drift_overlap <= 1.0:
            raise ValueError("drift_overlap must be in [-1, 1]")
        if self.lookahead < 1:
            raise ValueError("lookahead must be >= 1")
        if self.max_processing_tokens <= 0:
            raise ValueError("max_processing_tokens must be > 0")
        if self.container_tokens is not None and self.container_tokens <= 0:
            raise ValueError("container_tokens must be > 0")
        if self.idle <= timedelta(0):
            raise ValueError("idle must be positive")


@dataclass(frozen=True)
class SegmentBlock:
    """A new Original page as segmentation sees it: its id and tokens, whether its user message carries no content
    of its own (``content_free``, decided once, cheaply, from the text), and its embedding.

    ``vector`` (the whole exchange's, or empty without an embedder) is stored L2-normalised; ``timestamp`` as
    aware UTC.
    """

    page_id: str
    tokens: int
    content_free: bool
    vector: tuple[float, ...]
    timestamp: datetime

    def __post_init__(self) -> None:
        if self.tokens < 0:
            raise ValueError("token counts must be >= 0")
        object.__setattr__(self, "vector", normalise(self.vector))
        object.__setattr__(self, "timestamp", utc(self.timestamp))

    @property
    def neutral(self) -> bool:
        """Whether the page says nothing about the topic: it goes with the page before it and moves no CL."""
        return self.content_free or not self.vector


@dataclass(frozen=True)
class Buffer:
    """A thread's pages waiting to be frozen, in arrival order. The default value is the fresh, empty buffer.

    ``page_ids`` are the pages committed to the topic ``topic_id``; ``tokens`` = their tokens + ``head_tokens``
    (the tokens of ``head_summary``, the running summary carried in by a relay). ``topic_sum`` is the sum of the
    vectors of the topic's committed pages with content, carried across its relays and splits (its direction is
    CL), ``None`` until one came. ``pending`` are the pages after them not yet decided; the first is one with
    content, and there are pending pages only after committed ones. ``started_at`` is the first committed page's
    timestamp, ``last_at`` the latest of every page held (``None`` without pages).
    """

    topic_id: str | None = None
    page_ids: tuple[str, ...] = ()
    tokens: int = 0
    topic_sum: tuple[float, ...] | None = None
    head_summary: str | None = None
    head_tokens: int = 0
    started_at: datetime | None = None
    last_at: datetime | None = None
    pending: tuple[SegmentBlock, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.head_tokens <= self.tokens:
            raise ValueError("buffer tokens must be >= head_tokens >= 0")
        if self.pending and not (self.page_ids and self.topic_sum is not None):
            raise ValueError("pending pages must follow committed ones of a topic with a vector")
        if self.pending and self.pending[0].neutral:
            raise ValueError("the first pending page must have content (a neutral one goes with the page before it)")

    @property
    def state(self) -> SegmentState:
        return SegmentState.COLLECTING if self.page_ids else SegmentState.EMPTY

    @property
    def held_ids(self) -> tuple[str, ...]:
        """Every page the buffer holds, committed then pending."""
        return (*self.page_ids, *(block.page_id for block in self.pending))

    @property
    def held_tokens(self) -> int:
        """``tokens`` and the pending pages' tokens."""
        return self.tokens + sum(block.tokens for block in self.pending)


@dataclass(frozen=True)
class Flush:
    """Pages to freeze into one Consolidated page, in order (never empty).

    ``head_summary`` must head the summarizer's input for these pages. ``carry`` (only for ``RELAY``): the
    running summary of this flush goes into the next buffer via :func:`with_head_summary`.
    """

    page_ids: tuple[str, ...]
    reason: FlushReason
    topic_id: str | None
    head_summary: str | None
    carry: bool


_EVENT_OF = {reason: SegmentEvent[reason.name] for reason in FlushReason}


def admit(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> tuple[Buffer, Flush | None]:
    """The buffer after ``block`` arrives and the flush it causes, if any (see the module docstring).

    The block always ends up in the returned buffer, committed or pending. A drift opens a topic whose id is the
    deciding page's id; a relay or split keeps ``topic_id`` and ``topic_sum``.
    """
    buffer, flush = flush_if_idle(buffer, block.timestamp, policy)  # judged in the pages' own time
    if flush is not None:
        return _commit(buffer, (block,)), flush
    if not buffer.page_ids or (buffer.topic_sum is None and not block.neutral):
        return _join(buffer, (block,), policy)  # nothing to compare with
    if not buffer.pending and block.neutral:
        return _join(buffer, (block,), policy)  # it goes with the committed page before it
    next_segment_state(buffer.state, SegmentEvent.BLOCK_PENDING)
    return _decide(_with_pending(buffer, (*buffer.pending, block)), policy)


def _decide(buffer: Buffer, policy: SegmentationPolicy) -> tuple[Buffer, Flush | None]:
    """``buffer`` with every decidable pending page decided, up to the first flush."""
    while True:
        head = _decidable(buffer.pending, policy.lookahead)
        if head is None:
            return buffer, None
        unit, following = head
        rest = buffer.pending[len(unit) :]
        assert buffer.topic_sum is not None  # pending pages follow a topic with a vector (Buffer's invariant)
        if _opens_topic(buffer.topic_sum, unit[0].vector, following, policy):
            fresh, flush = _apply(replace(buffer, pending=()), SegmentEvent.DRIFT)
            return _with_pending(_commit(fresh, unit), rest), flush
        buffer, flush = _join(replace(buffer, pending=rest), unit, policy)
        if flush is not None:
            return buffer, flush


def _decidable(
    pending: tuple[SegmentBlock, ...], lookahead: int
) -> tuple[tuple[SegmentBlock, ...], tuple[SegmentBlock, ...]] | None:
    """The first pending page with the neutral pages after it, and the ``lookahead`` pages with content after
    those; ``None`` while fewer than ``lookahead`` (at least one) have come."""
    size = 1
    while size < len(pending) and pending[size].neutral:
        size += 1
    following = tuple(block for block in pending[size:] if not block.neutral)
    if len(following) < lookahead:
        return None
    return pending[:size], following[:lookahead]


def _opens_topic(
    topic_sum: tuple[float, ...], vector: tuple[float, ...], following: Sequence[SegmentBlock], policy: SegmentationPolicy
) -> bool:
    """Whether the page of ``vector`` opens a new topic, given the topic's ``topic_sum`` and the pages with
    content ``following`` it. A vector of another length than the topic's (another embedder) always does;
    following pages of another length than the page's say nothing about it."""
    if len(topic_sum) != len(vector):
        return True
    ahead = [block.vector for block in following if len(block.vector) == len(vector)]
    if not ahead:
        return False
    right = normalise([math.fsum(column) for column in zip(*ahead)])
    closer = cosine(vector, right) - cosine(vector, topic_sum)
    return closer > policy.drift_margin and cosine(topic_sum, [a + b for a, b in zip(right, vector)]) < policy.drift_overlap


def _join(buffer: Buffer, unit: Sequence[SegmentBlock], policy: SegmentationPolicy) -> tuple[Buffer, Flush | None]:
    """``buffer`` with ``unit`` committed, after a relay or split of its committed pages if ``unit`` would take
    them past a limit; the pending pages stay pending."""
    grown = buffer.tokens + sum(block.tokens for block in unit)
    event = None
    if buffer.page_ids and grown > policy.max_processing_tokens:
        event = SegmentEvent.RELAY
    elif buffer.page_ids and policy.container_tokens is not None and grown > policy.container_tokens:
        event = SegmentEvent.SPLIT
    if event is None:
        return _commit(buffer, unit), None
    following, flush = _apply(replace(buffer, pending=()), event)
    return _with_pending(_commit(following, unit), buffer.pending), flush


def _commit(buffer: Buffer, unit: Sequence[SegmentBlock]) -> Buffer:
    """``buffer`` with ``unit`` appended to its committed pages (no limit is checked)."""
    next_segment_state(buffer.state, SegmentEvent.BLOCK_COMMITTED)
    topic_sum = buffer.topic_sum
    for block in unit:
        if not block.neutral:
            topic_sum = _summed(topic_sum, block.vector)
    return replace(
        buffer,
        topic_id=unit[0].page_id if buffer.topic_id is None else buffer.topic_id,
        page_ids=(*buffer.page_ids, *(block.page_id for block in unit)),
        tokens=buffer.tokens + sum(block.tokens for block in unit),
        topic_sum=topic_sum,
        started_at=unit[0].timestamp if buffer.started_at is None else buffer.started_at,
        last_at=_latest(buffer.last_at, unit),
    )


def _summed(topic_sum: tuple[float, ...] | None, vector: tuple[float, ...]) -> tuple[float, ...]:
    """``topic_sum`` plus ``vector``; a vector of another length (another embedder) starts the sum afresh."""
    if topic_sum is None or len(topic_sum) != len(vector):
        return vector
    return tuple(a + b for a, b in zip(topic_sum, vector))


def _latest(last_at: datetime | None, blocks: Sequence[SegmentBlock]) -> datetime | None:
    times = [block.timestamp for block in blocks] + ([] if last_at is None else [last_at])
    return max(times, default=None)


def _with_pending(buffer: Buffer, pending: tuple[SegmentBlock, ...]) -> Buffer:
    """``buffer`` (its committed part) followed by ``pending``."""
    return replace(buffer, pending=pending, last_at=_latest(buffer.last_at, pending))


def _settled(buffer: Buffer) -> Buffer:
    """``buffer`` with its pending pages committed: what an IDLE or SAVE flush takes as one run."""
    if not buffer.pending:
        return buffer
    return _commit(replace(buffer, pending=()), buffer.pending)


def _apply(buffer: Buffer, event: SegmentEvent) -> tuple[Buffer, Flush | None]:
    """Flush the committed pages of ``buffer`` (which holds none pending) on ``event``; the buffer that follows."""
    step = next_segment_state(buffer.state, event)
    flush = None
    if step.flush:
        reason = FlushReason[event.name]
        flush = Flush(buffer.page_ids, reason, buffer.topic_id, buffer.head_summary, carry=reason is FlushReason.RELAY)
    following = Buffer(topic_id=buffer.topic_id, topic_sum=buffer.topic_sum) if step.keep_topic else Buffer()
    return following, flush


def with_head_summary(buffer: Buffer, summary: str, summary_tokens: int) -> Buffer:
    """``buffer`` headed by the running ``summary`` of the relay before it (replacing any earlier head).

    ``tokens`` gains ``summary_tokens`` (and loses the replaced head's). Apply it only to the buffer that the
    relay's :func:`admit` returned — or its successors of the same ``topic_id`` — never to a buffer of another topic.
    """
    if summary_tokens < 0:
        raise ValueError("summary_tokens must be >= 0")
    return replace(
        buffer, head_summary=summary, head_tokens=summary_tokens,
        tokens=buffer.tokens - buffer.head_tokens + summary_tokens,
    )


def flush_if_idle(buffer: Buffer, now: datetime, policy: SegmentationPolicy) -> tuple[Buffer, Flush | None]:
    """An ``IDLE`` flush of every page held (committed and pending) and a fresh buffer when the buffer has pages
    and ``now - last_at >= policy.idle``; otherwise ``buffer`` unchanged and ``None``."""
    if buffer.last_at is None or not buffer.page_ids or utc(now) - buffer.last_at < policy.idle:
        return buffer, None
    return _apply(_settled(buffer), SegmentEvent.IDLE)


def flush_now(buffer: Buffer, reason: FlushReason = FlushReason.SAVE) -> tuple[Buffer, Flush | None]:
    """Flush every page the buffer holds, committed and pending (``/save``). Without pages there is no flush and
    the buffer starts fresh.

    With ``reason=RELAY`` the next buffer keeps the topic (pageless, awaiting :func:`with_head_summary`; the
    pending pages joined the topic); a relay or split from a buffer without pages raises
    :class:`IllegalTransition`.
    """
    return _apply(_settled(buffer), _EVENT_OF[reason])
