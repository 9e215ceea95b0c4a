"""Segmentation: semantic adsorption, drift and relay over a thread's buffer of pages (seed 004 §4.1.2–4.1.3).

Each thread has one :class:`Buffer` of Original pages waiting to be frozen into a Consolidated page. The topic
*kernel* is an exponential moving average of the anchor (user message) embeddings, kept L2-normalised. For each
new :class:`SegmentBlock`, :func:`admit` decides:

* a block whose anchor is short (fewer than ``short_anchor_tokens``: "continue", "that failed", or no user
  message at all) is adsorbed unconditionally and leaves the kernel where it is — the embedding of a two-word
  correction says nothing about the topic;
* otherwise a block whose cosine similarity to the kernel is at least ``adsorb_threshold`` is adsorbed and moves
  the kernel toward its anchor (weight ``kernel_weight``); a buffer without a kernel (empty, or only short
  anchors so far) adopts the anchor as its kernel;
* otherwise the block **drifts**: the buffer is flushed (``DRIFT``) and the block opens a new topic;
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
keeps the topic. A flush never has zero pages.

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

    ``short_anchor_tokens`` is 12, not DESIGN's ~50: on conversational data most user messages are 10–40 tokens,
    so a 50-token bar would adsorb nearly every block unconditionally and a drift could never happen; 12 tokens
    (eight or nine English words, a short Chinese sentence) still covers "continue", "that failed, try again".
    """

    adsorb_threshold: float = 0.6
    short_anchor_tokens: int = 12
    max_processing_tokens: int = 8000
    kernel_weight: float = 0.3
    idle: timedelta = timedelta(minutes=30)
    container_tokens: int | None = None

    def __post_init__(self) -> None:
        if not -1.0 <= self.adsorb_threshold <= 1.0:
            raise ValueError("adsorb_threshold must be in [-1, 1]")
        if self.short_anchor_tokens < 0 or self.max_processing_tokens <= 0:
            raise ValueError("short_anchor_tokens must be >= 0 and max_processing_tokens > 0")
        if self.container_tokens is not None and self.container_tokens <= 0:
            raise ValueError("container_tokens must be > 0")
        if not 0.0 < self.kernel_weight <= 1.0:
            raise ValueError("kernel_weight must be in (0, 1]")
        if self.idle <= timedelta(0):
            raise ValueError("idle must be positive")


@dataclass(frozen=True)
class SegmentBlock:
    """A new Original page as segmentation sees it: its id and tokens, its anchor's tokens and embedding.

    ``anchor`` is stored L2-normalised; ``timestamp`` as aware UTC.
    """

    page_id: str
    tokens: int
    anchor_tokens: int
    anchor: tuple[float, ...]
    timestamp: datetime

    def __post_init__(self) -> None:
        if self.tokens < 0 or self.anchor_tokens < 0:
            raise ValueError("token counts must be >= 0")
        object.__setattr__(self, "anchor", normalise(self.anchor))
        object.__setattr__(self, "timestamp", utc(self.timestamp))


@dataclass(frozen=True)
class Buffer:
    """A thread's pages waiting to be frozen, in arrival order. The default value is the fresh, empty buffer.

    ``tokens`` = the pages' tokens + ``head_tokens`` (the tokens of ``head_summary``, the running summary carried
    in by a relay). ``kernel`` is the L2-normalised topic kernel, ``None`` until a block with a long anchor came.
    ``started_at`` / ``last_at`` are the first and latest page timestamps (``None`` without pages).
    """

    topic_id: str | None = None
    page_ids: tuple[str, ...] = ()
    tokens: int = 0
    kernel: tuple[float, ...] | None = None
    head_summary: str | None = None
    head_tokens: int = 0
    started_at: datetime | None = None
    last_at: datetime | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.head_tokens <= self.tokens:
            raise ValueError("buffer tokens must be >= head_tokens >= 0")

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


def _is_short(block: SegmentBlock, policy: SegmentationPolicy) -> bool:
    return block.anchor_tokens < policy.short_anchor_tokens


def _drifts(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> bool:
    if _is_short(block, policy) or buffer.kernel is None:
        return False
    if len(buffer.kernel) != len(block.anchor):  # a kernel from another embedder is no topic to stay in
        return True
    return cosine(buffer.kernel, block.anchor) < policy.adsorb_threshold


def _moved(
    kernel: tuple[float, ...] | None, block: SegmentBlock, policy: SegmentationPolicy
) -> tuple[float, ...] | None:
    if _is_short(block, policy):
        return kernel
    if kernel is None:
        return block.anchor
    weight = policy.kernel_weight
    return normalise([(1.0 - weight) * k + weight * a for k, a in zip(kernel, block.anchor)])


def _adsorb(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> Buffer:
    next_segment_state(buffer.state, SegmentEvent.BLOCK_ADSORBED)
    return replace(
        buffer,
        topic_id=block.page_id if buffer.topic_id is None else buffer.topic_id,
        page_ids=(*buffer.page_ids, block.page_id),
        tokens=buffer.tokens + block.tokens,
        kernel=_moved(buffer.kernel, block, policy),
        started_at=block.timestamp if buffer.started_at is None else buffer.started_at,
        last_at=block.timestamp if buffer.last_at is None else max(buffer.last_at, block.timestamp),
    )


def admit(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> tuple[Buffer, Flush | None]:
    """The buffer after ``block`` arrives and the flush it causes, if any (see the module docstring).

    The block always ends up in the returned buffer. A drift opens a topic whose id is the block's page id and
    whose kernel is its anchor; a relay keeps ``topic_id`` and the kernel (moved toward the block's anchor).
    """
    buffer, flush = flush_if_idle(buffer, block.timestamp, policy)  # judged in the pages' own time
    event = None if flush else _flush_event(buffer, block, policy)
    if event is not None:
        buffer, flush = _apply(buffer, event)
    return _adsorb(buffer, block, policy), flush


def _flush_event(buffer: Buffer, block: SegmentBlock, policy: SegmentationPolicy) -> SegmentEvent | None:
    """What ``block`` does to a buffer that is not idle: drift, relay or split it, or nothing (it joins)."""
    if _drifts(buffer, block, policy):
        return SegmentEvent.DRIFT
    grown = buffer.tokens + block.tokens
    if buffer.page_ids and grown > policy.max_processing_tokens:
        return SegmentEvent.RELAY
    if buffer.page_ids and policy.container_tokens is not None and grown > policy.container_tokens:
        return SegmentEvent.SPLIT
    return None


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
