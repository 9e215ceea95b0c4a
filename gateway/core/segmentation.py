"""Segmentation: semantic adsorption, drift and relay over a thread's buffer of pages (seed 004 §4.1.2–4.1.3).

Each thread has one :class:`Buffer` of Original pages waiting to be frozen into a Consolidated page. The topic
*kernel* is an exponential moving average of the blocks' vectors (the embedding of the whole exchange: a short
user message says little on its own, "How do I know when it's al dente?" is about pasta through its reply), kept
L2-normalised. For each new :class:`SegmentBlock`, :func:`admit` decides:

* a block that carries no content of its own (``content_free``: "ok", "continue", "and then?", "thanks", or no
  user message at all) or has no vector is adsorbed unconditionally and leaves the kernel where it is;
* otherwise a block whose cosine similarity to the kernel is at least ``adsorb_threshold`` is adsorbed and moves
  the kernel toward its vector (weight ``kernel_weight``); a buffer without a kernel (empty, or only
  content-free blocks so far) adopts the block's vector as its kernel;
* otherwise the block is a **suspect**: one exchange off the topic may be an outlier (a side question, or an
  exchange the embedding places badly), so it joins the buffer provisionally, without moving the kernel. The next
  block with content decides: close to the kernel, the suspect was an outlier and stays; off the topic too and
  closer to the suspect than the suspect is to the kernel, the topic **drifted at the suspect**: the pages before
  it are flushed (``DRIFT``) and the suspect, the content-free blocks after it and the new block open a new topic
  whose kernel is the mean of the two; off the topic but not closer, the suspect stays as an outlier and the new
  block is the suspect. A boundary is thus placed at the exchange where the topic changed, one exchange after it
  happened. A suspect that would take the buffer past a size limit, or that meets a pageless buffer, drifts at
  once;
* an adsorbed block that would take the buffer past ``container_tokens`` (when set) **splits** it: the buffer is
  flushed (``SPLIT``) and the block opens the next buffer of the *same* topic, with nothing carried over — a
  container stays small enough to be shown whole in Detail, and metabolic merging joins the parts later;
* an adsorbed block that would take the buffer past ``max_processing_tokens`` **relays**: the buffer is flushed
  (``RELAY``, ``carry=True``) and the block opens the next buffer of the *same* topic (same ``topic_id`` and
  kernel). The IO side writes the running summary of the flush into the new buffer with :func:`with_head_summary`.
* a block that comes ``idle`` or more after the buffer's latest page (in the pages' own time) finds a buffer that
  was already idle: it is flushed (``IDLE``) first and the block starts afresh, so the outcome does not depend on
  whether the idle scheduler ran in between.

Drift is decided before relay: a block that leaves the topic never joins it just because the buffer is full
(seed §4.1.3 relays first and then compares the block to the relayed summary; a drifting block would then flush
a buffer holding only that summary, so the outcome is the same and only one flush is ever needed).

:func:`flush_if_idle` flushes a buffer quiet for ``idle`` (``IDLE``) and :func:`flush_now` flushes on ``/save``
(``SAVE``). After ``DRIFT``, ``IDLE`` and ``SAVE`` the next buffer starts fresh; after ``SPLIT`` and ``RELAY`` it
keeps the topic. A flush never has zero pages; an ``IDLE``, ``SAVE``, ``RELAY`` or ``SPLIT`` flush takes a pending
suspect with the rest (nothing confirmed that it left the topic).

The buffer's life is the table :data:`TRANSITIONS` keyed by (:class:`SegmentState`, :class:`SegmentEvent`),
applied by :func:`next_segment_state`; the only illegal move is a relay from an empty buffer.
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
    "Suspect",
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
    COLLECTING = "COLLECTING"


class SegmentEvent(enum.Enum):
    BLOCK_ADSORBED = "block adsorbed"
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
    """One row of :data:`TRANSITIONS`: the next state, whether the pages are flushed, whether the topic is kept."""

    state: SegmentState
    flush: bool
    keep_topic: bool


_E, _C = SegmentState.EMPTY, SegmentState.COLLECTING
TRANSITIONS: Mapping[tuple[SegmentState, SegmentEvent], Step] = {
    (_E, SegmentEvent.BLOCK_ADSORBED): Step(_C, flush=False, keep_topic=True),
    (_C, SegmentEvent.BLOCK_ADSORBED): Step(_C, flush=False, keep_topic=True),
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

    ``adsorb_threshold`` is 0.35, not DESIGN's 0.6: it compares whole exchanges (all-MiniLM-L6-v2), and two
    exchanges of one chat topic ("How much salt goes in the water?" and "Should I add olive oil to the pot?",
    with their replies) meet at 0.2–0.6, while exchanges of unrelated topics stay under 0.2; the suspect rule
    absorbs the single exchanges of a topic that fall under the bar. On three scripted three-topic chats of short
    messages, every threshold from 0.3 to 0.4 with ``kernel_weight`` 0.5 put every boundary at the right
    exchange (with 0.3, only 0.3 to 0.35 did): 0.35 is the middle of that range.
    """

    adsorb_threshold: float = 0.35
    max_processing_tokens: int = 8000
    kernel_weight: float = 0.5
    idle: timedelta = timedelta(minutes=30)
    container_tokens: int | None = None

    def __post_init__(self) -> None:
        if not -1.0 <= self.adsorb_threshold <= 1.0:
            raise ValueError("adsorb_threshold must be in [-1, 1]")
        if self.max_processing_tokens <= 0:
            raise ValueError("max_processing_tokens must be > 0")
        if self.container_tokens is not None and self.container_tokens <= 0:
            raise ValueError("container_tokens must be > 0")
        if not 0.0 < self.kernel_weight <= 1.0:
            raise ValueError("kernel_weight must be in (0, 1]")
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


@dataclass(frozen=True)
class Suspect:
    """The block that may have opened a new topic: ``at`` is its index in the buffer's ``page_ids``; ``tokens``
    and ``vector`` are those of it and the content-free blocks after it; ``started_at`` its timestamp."""

    at: int
    vector: tuple[float, ...]
    tokens: int
    started_at: datetime


@dataclass(frozen=True)
class Buffer:
    """A thread's pages waiting to be frozen, in arrival order. The default value is the fresh, empty buffer.

    ``tokens`` = the pages' tokens + ``head_tokens`` (the tokens of ``head_summary``, the running summary carried
    in by a relay). ``kernel`` is the L2-normalised topic kernel, ``None`` until a block with a long anchor came.
    ``started_at`` / ``last_at`` are the first and latest page timestamps (``None`` without pages). ``suspect``
    is the pending block that may have left the topic (see the module docstring).
    """

    topic_id: str | None = None
    page_ids: tuple[str, ...] = ()
    tokens: int = 0
    kernel: tuple[float, ...] | None = None
    head_summary: str | None = None
    head_tokens: int = 0
    started_at: datetime | None = None
    last_at: datetime | None = None
    suspect: Suspect | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.head_tokens <= self.tokens:
            raise ValueError("buffer tokens must be >= head_tokens >= 0")
        if self.suspect is not None and not (
            0 < self.suspect.at < len(self.page_ids) and 0 <= self.suspect.tokens <= self.tokens - self.head_tokens
        ):
            raise ValueError("a suspect must follow a page of the buffer and hold no more than its tokens")

    @property
    def state(self) -> SegmentState:
        return SegmentState.COLLECTING if self.page_ids else SegmentState.EMPTY


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


def _apply(buffer: Buffer, event: SegmentEvent) -> tuple[Buffer, Flush | None]:
    step = next_segment_state(buffer.state, event)
    flush = None
    if step.flush:
        reason = FlushReason[event.name]
        flush = Flush(buffer.page_ids, reason, buffer.topic_id, buffer.head_summary, carry=reason is FlushReason.RELAY)
    following = Buffer(topic_id=buffer.topic_id, kernel=buffer.kernel) if step.keep_topic else Buffer()
    return following, flush


def _is_neutral(block: SegmentBlock) -> bool:
    """Whether ``block`` says nothing about the topic: it stays wherever it comes and moves no kernel."""
    return block.content_free or not block.vector


def _leaves(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> bool:
    """Whether ``block`` does not belong to the buffer's topic."""
    if _is_neutral(block) or buffer.kernel is None:
        return False
    if len(buffer.kernel) != len(block.vector):  # a kernel from another embedder is no topic to stay in
        return True
    return cosine(buffer.kernel, block.vector) < policy.adsorb_threshold


def _moved(
    kernel: tuple[float, ...] | None, block: SegmentBlock, policy: SegmentationPolicy
) -> tuple[float, ...] | None:
    if _is_neutral(block):
        return kernel
    if kernel is None:
        return block.vector
    weight = policy.kernel_weight
    return normalise([(1.0 - weight) * k + weight * a for k, a in zip(kernel, block.vector)])


def _adsorb(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy, *, suspected: bool = False) -> Buffer:
    """``buffer`` with ``block`` appended. A block adsorbed as a suspect (or after one) leaves the kernel alone."""
    next_segment_state(buffer.state, SegmentEvent.BLOCK_ADSORBED)
    suspect = buffer.suspect
    if suspected:
        suspect = Suspect(len(buffer.page_ids), block.vector, block.tokens, block.timestamp)
    elif suspect is not None:
        suspect = replace(suspect, tokens=suspect.tokens + block.tokens) if _is_neutral(block) else None
    return replace(
        buffer,
        topic_id=block.page_id if buffer.topic_id is None else buffer.topic_id,
        page_ids=(*buffer.page_ids, block.page_id),
        tokens=buffer.tokens + block.tokens,
        kernel=buffer.kernel if suspected else _moved(buffer.kernel, block, policy),
        started_at=block.timestamp if buffer.started_at is None else buffer.started_at,
        last_at=block.timestamp if buffer.last_at is None else max(buffer.last_at, block.timestamp),
        suspect=suspect,
    )


def admit(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> tuple[Buffer, Flush | None]:
    """The buffer after ``block`` arrives and the flush it causes, if any (see the module docstring).

    The block always ends up in the returned buffer. A drift at a suspect opens a topic whose id is the suspect's
    page id; an immediate drift one whose id is the block's page id and whose kernel is its vector; a relay keeps
    ``topic_id`` and the kernel (moved toward the block's vector).
    """
    buffer, flush = flush_if_idle(buffer, block.timestamp, policy)  # judged in the pages' own time
    if flush is not None:
        return _adsorb(buffer, block, policy), flush
    if buffer.suspect is not None and _leaves(buffer, block, policy):
        if _confirms(buffer.suspect, buffer, block):
            return _drift_at_suspect(buffer, block, policy)
        buffer = replace(buffer, suspect=None)  # the suspect was closer to the topic: it stays, the block waits
    event = _flush_event(buffer, block, policy)
    if event is None and _leaves(buffer, block, policy):
        return _adsorb(buffer, block, policy, suspected=True), None
    if event is not None:
        buffer, flush = _apply(buffer, event)
    return _adsorb(buffer, block, policy), flush


def _flush_event(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> SegmentEvent | None:
    """What ``block`` does to a buffer that is not idle: drift, relay or split it, or nothing (it joins, maybe as
    a suspect). A block that leaves the topic drifts at once only where it cannot wait as a suspect: on a
    pageless buffer, or one it would take past a size limit."""
    grown = buffer.tokens + block.tokens
    relay = bool(buffer.page_ids) and grown > policy.max_processing_tokens
    split = bool(buffer.page_ids) and policy.container_tokens is not None and grown > policy.container_tokens
    if _leaves(buffer, block, policy) and (relay or split or not buffer.page_ids or _alien(buffer, block)):
        return SegmentEvent.DRIFT
    if relay:
        return SegmentEvent.RELAY
    if split:
        return SegmentEvent.SPLIT
    return None


def _confirms(suspect: Suspect, buffer: Buffer, block: SegmentBlock) -> bool:
    """Whether ``block`` (off the topic) confirms that ``suspect`` opened a new one: it is closer to the suspect
    than the suspect is to the topic (a block of another embedder always does)."""
    if _alien(buffer, block) or buffer.kernel is None:
        return True
    return cosine(suspect.vector, block.vector) >= cosine(suspect.vector, buffer.kernel)


def _alien(buffer: Buffer, block: SegmentBlock) -> bool:
    return buffer.kernel is not None and len(buffer.kernel) != len(block.vector)


def _drift_at_suspect(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> tuple[Buffer, Flush]:
    """The suspect's topic is confirmed by ``block``: flush the pages before it; they, with ``block``, go on."""
    suspect = buffer.suspect
    assert suspect is not None
    next_segment_state(buffer.state, SegmentEvent.DRIFT)
    flush = Flush(buffer.page_ids[: suspect.at], FlushReason.DRIFT, buffer.topic_id, buffer.head_summary, carry=False)
    tail = buffer.page_ids[suspect.at :]
    same = len(suspect.vector) == len(block.vector)
    kernel = normalise([a + b for a, b in zip(suspect.vector, block.vector)]) if same else block.vector
    following = Buffer(
        topic_id=tail[0], page_ids=tail, tokens=suspect.tokens, kernel=kernel,
        started_at=suspect.started_at, last_at=buffer.last_at,
    )  # fmt: skip
    return replace(_adsorb(following, block, policy), kernel=kernel), flush


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
    """An ``IDLE`` flush and a fresh buffer when the buffer has pages and ``now - last_at >= policy.idle``;
    otherwise ``buffer`` unchanged and ``None``."""
    if buffer.last_at is None or not buffer.page_ids or utc(now) - buffer.last_at < policy.idle:
        return buffer, None
    return _apply(buffer, SegmentEvent.IDLE)


def flush_now(buffer: Buffer, reason: FlushReason = FlushReason.SAVE) -> tuple[Buffer, Flush | None]:
    """Flush whatever the buffer holds (``/save``). Without pages there is no flush and the buffer starts fresh.

    With ``reason=RELAY`` the next buffer keeps the topic (pageless, awaiting :func:`with_head_summary`); a
    relay from a buffer without pages raises :class:`IllegalTransition`.
    """
    return _apply(buffer, _EVENT_OF[reason])
