"""Pages: the immutable Original and Consolidated pages with their manifests (DESIGN §1, PCP §IV).

A page id is the first :data:`ID_LENGTH` hex characters of the SHA-256 of the page content (UTF-8; lone
surrogates kept via ``surrogatepass``), so it is the same on every process and machine and ingestion is idempotent.
Timestamps are timezone-aware; a naive datetime is taken to be UTC and stored as aware UTC.

A page the store has numbered also has a *handle* (:func:`handle_of`): ``p341`` for the 341st page stored in its
thread (Original or Consolidated, from 1). The model sees and names a page by its :attr:`Page.label`, the handle
where it has one: ``[a78c52f0f1]`` is 8 tokens on average in cl100k and o200k, ``[p341]`` 3, on every entry of every
context. A handle never looks like an id (``p`` is no hex digit). The id stays the page's identity everywhere else
(storage, links, views, caches).
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from gateway.core.blocks import Block
from gateway.core.extract import extract_clusters, extractive_summary

__all__ = [
    "HANDLE_PATTERN",
    "ID_LENGTH",
    "Page",
    "PageType",
    "consolidated_page",
    "handle_of",
    "is_page_id",
    "original_page",
    "page_id",
    "utc",
]

ID_LENGTH = 10
_ID_PATTERN = re.compile(r"[0-9a-f]{8,12}")
# the letter of a handle says how many digits follow: p and 3 (p001-p999), q and 4, r and 5, ...
_HANDLE_LETTERS = "pqrstuvw"
HANDLE_PATTERN = re.compile("|".join(f"{letter}[0-9]{{{width}}}" for width, letter in enumerate(_HANDLE_LETTERS, 3)))


class PageType(enum.Enum):
    ORIGINAL = "Original"
    CONSOLIDATED = "Consolidated"


def page_id(content: str, salt: str = "") -> str:
    """The content hash id: first 10 hex chars of sha256(salt + NUL + content) (no NUL when ``salt`` is empty).

    ``salt`` lets a caller keep two identical pages apart (e.g. the same exchange repeated in one thread).
    """
    data = f"{salt}\x00{content}" if salt else content
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:ID_LENGTH]


def handle_of(number: int | None) -> str:
    """The handle of the page numbered ``number`` in its thread; "" for none. ``p`` and three digits up to 999 (``p007``,
    ``p341``), ``q`` and four up to 9,999, ``r`` and five, and so on: every handle is as long as its letter says, so
    none is the beginning of another. With plain numbers a small model that meant ``p1`` wrote ``p12`` (Qwen2.5's
    tokenizer cuts numbers into single digits, and ``p1`` is the start of ``p10``-``p19`` in the same context)."""
    if not number:
        return ""
    width = max(3, len(str(number)))
    return f"{_HANDLE_LETTERS[width - 3]}{number:0{width}d}"


def is_page_id(text: str) -> bool:
    """Whether ``text`` has the shape of a page id (8–12 lower-case hex characters)."""
    return _ID_PATTERN.fullmatch(text) is not None


def utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime; a naive one is taken to be UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


@dataclass(frozen=True)
class Page:
    """A stored page: content plus manifest. Immutable; validated on construction.

    ``tokens`` is the token count of ``content``. Consolidated pages name their children in ``source_ids``
    (Original or older Consolidated pages) and may carry a ``topic_id``; Original pages have neither.
    """

    id: str
    type: PageType
    timestamp: datetime
    content: str
    summary: str
    clusters: tuple[str, ...]
    tokens: int
    source_ids: tuple[str, ...] = ()
    topic_id: str | None = None
    handle: str = ""  # handle_of(its number), once the store has numbered the page in its thread ("": not numbered)

    def __post_init__(self) -> None:
        if not is_page_id(self.id):
            raise ValueError(f"page id {self.id!r} is not 8-12 lower-case hex characters")
        if self.handle and HANDLE_PATTERN.fullmatch(self.handle) is None:
            raise ValueError(f"page handle {self.handle!r} is not a handle (p001, q1000, ...)")
        if self.tokens < 0:
            raise ValueError("page tokens must be >= 0")
        if self.type is PageType.ORIGINAL and (self.source_ids or self.topic_id is not None):
            raise ValueError("an Original page has no source_ids or topic_id")
        if self.type is PageType.CONSOLIDATED and not self.source_ids:
            raise ValueError("a Consolidated page needs at least one source id")
        if self.id in self.source_ids:
            raise ValueError("a page cannot contain itself")
        object.__setattr__(self, "timestamp", utc(self.timestamp))

    @property
    def label(self) -> str:
        """What the model sees and names the page by: its handle, or its id when it has none."""
        return self.handle or self.id

    def with_manifest(self, summary: str, clusters: Sequence[str]) -> Page:
        """This page with a new summary and clusters (e.g. from the summarizer model); id and content unchanged."""
        return replace(self, summary=summary, clusters=tuple(clusters))


def original_page(
    block: Block,
    timestamp: datetime,
    count: Callable[[str], int],
    *,
    summary: str | None = None,
    clusters: Sequence[str] | None = None,
    salt: str = "",
) -> Page:
    """The Original page of a sealed block; content = ``block.text``, tokens = ``count(block.text)``.

    Without ``summary``/``clusters`` the extractive fallback of :mod:`gateway.core.extract` fills them in.
    """
    return Page(
        id=page_id(block.text, salt),
        type=PageType.ORIGINAL,
        timestamp=timestamp,
        content=block.text,
        summary=extractive_summary(block) if summary is None else summary,
        clusters=extract_clusters(block.text, emphasis=block.anchor_text) if clusters is None else tuple(clusters),
        tokens=count(block.text),
    )


def consolidated_page(
    content: str,
    summary: str,
    source_ids: Sequence[str],
    timestamp: datetime,
    count: Callable[[str], int],
    *,
    clusters: Sequence[str] | None = None,
    topic_id: str | None = None,
) -> Page:
    """A Consolidated page over ``source_ids``; its id hashes the content salted with the children's ids."""
    sources = tuple(source_ids)
    return Page(
        id=page_id(content, ",".join(sources)),
        type=PageType.CONSOLIDATED,
        timestamp=timestamp,
        content=content,
        summary=summary,
        clusters=extract_clusters(content, emphasis=summary) if clusters is None else tuple(clusters),
        tokens=count(content),
        source_ids=sources,
        topic_id=topic_id,
    )
