"""Pages: the immutable Original and Consolidated pages with their manifests (DESIGN §1, PCP §IV).

A page id is the first :data:`ID_LENGTH` hex characters of the SHA-256 of the page content (UTF-8; lone
surrogates kept via ``surrogatepass``), so it is the same on every process and machine and ingestion is idempotent.
Timestamps are timezone-aware; a naive datetime is taken to be UTC and stored as aware UTC.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from types import MappingProxyType

from gateway.core.blocks import Block
from gateway.core.extract import extract_clusters, extractive_summary

__all__ = [
    "ID_LENGTH",
    "Page",
    "PageType",
    "consolidated_page",
    "is_page_id",
    "original_page",
    "page_id",
    "utc",
]

ID_LENGTH = 10
_ID_PATTERN = re.compile(r"[0-9a-f]{8,12}")


class PageType(enum.Enum):
    ORIGINAL = "Original"
    CONSOLIDATED = "Consolidated"


def page_id(content: str, salt: str = "") -> str:
    """The content hash id: first 10 hex chars of sha256(salt + NUL + content) (no NUL when ``salt`` is empty).

    ``salt`` lets a caller keep two identical pages apart (e.g. the same exchange repeated in one thread).
    """
    data = f"{salt}\x00{content}" if salt else content
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:ID_LENGTH]


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

    def __post_init__(self) -> None:
        if not is_page_id(self.id):
            raise ValueError(f"page id {self.id!r} is not 8-12 lower-case hex characters")
        if self.tokens < 0:
            raise ValueError("page tokens must be >= 0")
        if self.type is PageType.ORIGINAL and (self.source_ids or self.topic_id is not None):
            raise ValueError("an Original page has no source_ids or topic_id")
        if self.type is PageType.CONSOLIDATED and not self.source_ids:
            raise ValueError("a Consolidated page needs at least one source id")
        if self.id in self.source_ids:
            raise ValueError("a page cannot contain itself")
        object.__setattr__(self, "timestamp", utc(self.timestamp))

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
    names: Mapping[str, str] = MappingProxyType({}),
) -> Page:
    """The Original page of a sealed block; content = ``block.text``, tokens = ``count(block.text)``.

    Without ``summary``/``clusters`` the extractive fallback of :mod:`gateway.core.extract` fills them in (its
    lines opened by the sides' ``names`` where a two-person chat's are known: `gateway.core.labels.side_names`).
    """
    return Page(
        id=page_id(block.text, salt),
        type=PageType.ORIGINAL,
        timestamp=timestamp,
        content=block.text,
        summary=extractive_summary(block, names) if summary is None else summary,
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
