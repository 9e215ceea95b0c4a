"""Consolidation: freezing flushed pages into a Consolidated page, and choosing what metabolic merging merges.

Owns the summarizer's prompts and the strict parsing of its answers (:func:`summarizer_prompt`,
:func:`parse_summarizer_answer`, :func:`manifest_prompt`, :func:`parse_manifest_answer`), the deterministic
fallback when no summarizer answers (:func:`extractive_consolidation`), the construction of the page
(:func:`freeze`), the choice of runs to merge (:func:`merge_runs`, DESIGN §5), and the chapters that keep a
thread's top level short (:func:`next_chapter`, :func:`chapter_digest`). The prompts ask the model to
keep chains of reasoning, conclusions and explicit negations or corrections (DESIGN §1): a summary that drops a
"no, that was wrong" is worse than a long one.

Everything here is a pure function of its inputs; the model calls themselves belong to the IO side.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any

from gateway.core.extract import lead_text
from gateway.core.pages import Page, consolidated_page, utc

__all__ = [
    "CHAPTER",
    "DIGEST_CAP",
    "HEAD_INTRO",
    "ManifestAnswer",
    "MergeCandidate",
    "SummarizerAnswer",
    "chapter_digest",
    "extractive_consolidation",
    "freeze",
    "manifest_prompt",
    "merge_runs",
    "next_chapter",
    "parse_manifest_answer",
    "parse_summarizer_answer",
    "summarizer_prompt",
]

HEAD_INTRO = "Earlier in this topic: "
DIGEST_CAP = 160
# A chapter holds this many consecutive top-level containers of one level: a thread's top level then has at most
# CHAPTER - 1 containers of each level (a few per power of CHAPTER topics), which is what a context's map offers,
# and a consulted chapter opens on CHAPTER entries.
CHAPTER = 4

_KEEP = (
    "Keep every fact, figure, name, date, decision and conclusion. Keep the chains of reasoning that led to a "
    "conclusion (what was tried, why, and what came of it). Keep explicit negations and corrections exactly, "
    "saying which earlier statement was wrong or superseded and by what (e.g. \"X is not Y\", \"the first fix "
    "did not work because ...\"). Do not drop facts for brevity and do not add anything the conversation does "
    "not say. Write in the language of the conversation."
)
_CLUSTERS = '"clusters": 3 to 8 short lower-case keywords or key phrases someone would search this by.'

_CONSOLIDATE = f"""You consolidate a stretch of a conversation between a user and an AI assistant into one \
memory page. The pages below are consecutive exchanges of one topic, oldest first; an "earlier in this topic" \
summary, when given, is what came just before them.

{_KEEP}

Answer with one JSON object and nothing else:
{{"summary": "...", "content": "...", "clusters": ["...", "..."]}}
- "content": a consolidated account of these exchanges in chronological order that a reader without the \
originals can rely on.
- "summary": a dense digest in a few sentences: the topic, the conclusions, the corrections, and where things \
stand (done, in progress, open). It also heads the next part of this topic, so it must stand on its own.
- {_CLUSTERS}"""

_MANIFEST = f"""You write the manifest of one exchange between a user and an AI assistant: a summary that \
stands in for the exchange when its full text is not shown.

{_KEEP}

Answer with one JSON object and nothing else:
{{"summary": "...", "clusters": ["...", "..."]}}
- "summary": a dense, fact-keeping summary: what the user asked or said, what the assistant answered or did, \
the conclusions and any corrections.
- {_CLUSTERS}"""

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(.*?)\n?```\Z", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class SummarizerAnswer:
    """A parsed consolidation answer: every field non-empty, clusters stripped and de-duplicated in order."""

    summary: str
    content: str
    clusters: tuple[str, ...]


@dataclass(frozen=True)
class ManifestAnswer:
    """A parsed manifest answer for one Original page, as strict as :class:`SummarizerAnswer`."""

    summary: str
    clusters: tuple[str, ...]


def _page_xml(page: Page) -> str:
    return f'<page id="{page.id}" time="{page.timestamp.isoformat()}">\n{page.content}\n</page>'


def summarizer_prompt(children: Sequence[Page], head_summary: str | None) -> list[dict[str, str]]:
    """The chat messages asking a model to consolidate ``children`` (in order) after ``head_summary``.

    The answer is read by :func:`parse_summarizer_answer`.
    """
    parts = [f"<earlier_in_this_topic>\n{head_summary}\n</earlier_in_this_topic>"] if head_summary else []
    parts.extend(_page_xml(child) for child in children)
    return [{"role": "system", "content": _CONSOLIDATE}, {"role": "user", "content": "\n\n".join(parts)}]


def manifest_prompt(page: Page) -> list[dict[str, str]]:
    """The chat messages asking a model for ``page``'s manifest; read by :func:`parse_manifest_answer`."""
    return [{"role": "system", "content": _MANIFEST}, {"role": "user", "content": _page_xml(page)}]


def _json_object(text: str) -> dict[str, Any] | None:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _clusters(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    items = [_text(item) for item in value]
    if any(item is None for item in items):
        return None
    return tuple(dict.fromkeys(item for item in items if item is not None))


def parse_summarizer_answer(text: str) -> SummarizerAnswer | None:
    """The answer as ``{"summary": str, "content": str, "clusters": [str, ...]}`` (optionally in a ```json
    fence; extra keys ignored), or ``None`` when anything is missing, empty or of the wrong type."""
    data = _json_object(text)
    if data is None:
        return None
    summary, content, clusters = _text(data.get("summary")), _text(data.get("content")), _clusters(data.get("clusters"))
    if summary is None or content is None or clusters is None:
        return None
    return SummarizerAnswer(summary, content, clusters)


def parse_manifest_answer(text: str) -> ManifestAnswer | None:
    """The answer as ``{"summary": str, "clusters": [str, ...]}`` with the rules of :func:`parse_summarizer_answer`."""
    data = _json_object(text)
    if data is None:
        return None
    summary, clusters = _text(data.get("summary")), _clusters(data.get("clusters"))
    if summary is None or clusters is None:
        return None
    return ManifestAnswer(summary, clusters)


def extractive_consolidation(children: Sequence[Page], head_summary: str | None) -> tuple[str, str]:
    """``(content, summary)`` of a Consolidated page over ``children`` when no summarizer answers.

    ``content``: ``"Earlier in this topic: <head_summary>"`` (when given) and then every child's content
    verbatim, in order, separated by blank lines. ``summary``: one line per child — the lead of its summary (or of
    its content when the summary is blank), at most :data:`DIGEST_CAP` characters — after the head summary's lead.
    Deterministic. Raises ``ValueError`` without children.

    A head summary that is itself such a summary (a relay after a relay) is taken without its own first line,
    ``"Earlier in this topic: …"``: that line stands in the container before it, and carried on it would nest the
    intro once more at every relay and keep the topic's first exchange at the head of every later summary.
    """
    if not children:
        raise ValueError("a consolidation needs at least one child page")
    if head_summary and head_summary.startswith(HEAD_INTRO):
        head_summary = head_summary.partition("\n")[2]
    head = head_summary if head_summary and head_summary.strip() else None
    content = "\n\n".join(([HEAD_INTRO + head] if head else []) + [child.content for child in children])
    lines = [HEAD_INTRO + lead_text(head, DIGEST_CAP)] if head else []
    for child in children:
        line = lead_text(child.summary, DIGEST_CAP) or lead_text(child.content, DIGEST_CAP)
        if line:
            lines.append(line)
    return content, "\n".join(lines) if lines else "(empty exchange)"


def freeze(
    children: Sequence[Page],
    *,
    content: str,
    summary: str,
    count: Callable[[str], int],
    topic_id: str | None,
    timestamp: datetime | None = None,
    clusters: Sequence[str] | None = None,
) -> Page:
    """The Consolidated page over ``children``: ``source_ids`` are their ids in order.

    ``timestamp`` defaults to the latest child's, so a consolidated page sits where its last exchange happened.
    Without ``clusters`` they are extracted from the content. Raises ``ValueError`` without children or when a
    child appears twice.
    """
    if not children:
        raise ValueError("a Consolidated page needs at least one child")
    ids = [child.id for child in children]
    if len(set(ids)) != len(ids):
        raise ValueError("a child page appears twice")
    moment = max(child.timestamp for child in children) if timestamp is None else timestamp
    return consolidated_page(content, summary, ids, moment, count, clusters=clusters, topic_id=topic_id)


@dataclass(frozen=True)
class MergeCandidate:
    """A top-level Consolidated page of a thread for metabolic merging; ``start``/``end`` span its children."""

    id: str
    topic_id: str | None
    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", utc(self.start))
        object.__setattr__(self, "end", utc(self.end))


def merge_runs(
    pages: Sequence[MergeCandidate], now: datetime, staleness: timedelta, min_run: int = 2
) -> list[tuple[str, ...]]:
    """The ids of each run to merge, in order: maximal runs of consecutive ``pages`` (given in time order) that
    share a ``topic_id`` (never ``None``) and all ended before ``now - staleness``, of at least ``min_run`` pages.

    Runs are disjoint. Raises ``ValueError`` when ``min_run < 2``.
    """
    if min_run < 2:
        raise ValueError("a merge needs at least two pages")
    cutoff = utc(now) - staleness

    def topic(page: MergeCandidate) -> str | None:
        return page.topic_id if page.end < cutoff else None

    runs: list[tuple[str, ...]] = []
    for key, group in groupby(pages, topic):
        ids = tuple(page.id for page in group)
        if key is not None and len(ids) >= min_run:
            runs.append(ids)
    return runs


def next_chapter(levels: Sequence[int], size: int = CHAPTER) -> int | None:
    """Where the oldest run of ``size`` consecutive top-level containers of one level starts, given their levels
    in time order (a topic's container is of level 0, a chapter one above its children); ``None`` when there is
    none. Merged into a chapter one level up, each run leaves at most ``size - 1`` containers of a level on top,
    as the digits of a number in base ``size``."""
    if size < 2:
        raise ValueError("a chapter needs at least two containers")
    run = 0
    for i, level in enumerate(levels):
        run = run + 1 if i and levels[i - 1] == level else 1
        if run == size:
            return i - size + 1
    return None


def chapter_digest(children: Sequence[Page], words: int = 3) -> tuple[str, str, tuple[str, ...]]:
    """``(content, summary, clusters)`` of a chapter over ``children`` (containers, in time order): the content
    lists each child by id with the lead of its summary, a table of contents the model can Consult from; the
    summary, one line of keywords per child; the clusters, each child's first keyword, then each one's second,
    and so on (distinct), so that the chapter's first words name several of its topics. Deterministic: a chapter
    repeats none of its children's text beyond these leads, whatever their size."""
    if not children:
        raise ValueError("a chapter needs at least one child")
    content = "\n".join(f"[{child.id}] {lead_text(child.summary, DIGEST_CAP) or lead_text(child.content, DIGEST_CAP)}" for child in children)
    summary = "\n".join(", ".join(child.clusters[:words]) or lead_text(child.summary, DIGEST_CAP) for child in children)
    clusters: dict[str, None] = {}
    for rank in range(max((len(child.clusters) for child in children), default=0)):
        for child in children:
            if rank < len(child.clusters):
                clusters.setdefault(child.clusters[rank], None)
    return content, summary, tuple(clusters)
