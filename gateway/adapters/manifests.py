"""A stored page's manifest: the page without its content, and what is derived from it once, at ingestion (token
counts, term counts, the line it fits, its embeddings), with the JSON and vector encodings it is stored in.

`gateway.adapters.redis_store` stores and reads them; the request path (`gateway.service`) reads their fields.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from functools import cached_property
from sys import intern

import numpy as np
import numpy.typing as npt

from gateway.adapters.embedding_models import DEFAULT_MODEL
from gateway.core import LineHolds, Page, PageType, background_line, line_holds, summary_fits_line
from gateway.core.lexical import LEXICON, restem, term_counts
from gateway.core.outside import outside_bound
from gateway.core.pages import utc
from gateway.core.worth import DAY_OVERHEAD

__all__ = [
    "Manifest", "NewPage", "PENDING_VECTOR", "decode_vector", "encode_vector", "manifest_json", "micros", "parse_manifest", "sentences_vector_field",
    "user_vector_field", "vector_model",
]  # fmt: skip

LINES = 2  # background_tokens counts the line without its date (2), or with it (1, before day headings)


@dataclass(frozen=True)
class Manifest:
    """A stored page without its content, the token counts the budget needs and the term counts of its
    content for lexical matching."""

    page: Page  # content is empty; see RedisStore.pages for the full page
    summary_tokens: int
    background_tokens: int
    terms: Mapping[str, int]
    length: int
    anchor: str = ""  # the user's words as matched (their line labels left out: gateway.service.ingest.matched_texts)
    line: LineHolds = LineHolds.LEAD  # what the page's background line carries whole
    anchor_stored: bool = True  # False: stored before manifests kept their anchor
    called: tuple[tuple[str, str], ...] = ()  # (role, name): its messages of that role call the other side so (labels.called)

    @cached_property
    def own_terms(self) -> Mapping[str, int]:
        """What the user said in the page, as term counts, derived from its anchor when first asked for (a question
        about the user is matched on them, gateway.service.router); the whole page's for a consolidated page (its
        summary speaks for everyone) or one stored without its anchor."""
        if self.page.type is not PageType.ORIGINAL or not self.anchor_stored:
            return self.terms
        return term_counts(self.anchor)

    @cached_property
    def own_length(self) -> int:
        return self.length if self.own_terms is self.terms else sum(self.own_terms.values())

    # Derived once per manifest (a parsed manifest is reused while its stored JSON is unchanged), for the
    # request path's loops over every top-level page of a thread.

    @cached_property
    def written_us(self) -> int:
        """The page's time in whole microseconds since the epoch (UTC): exact, so ages computed from it are the
        same floats as ``timedelta.total_seconds()`` of the datetimes'."""
        return micros(self.page.timestamp)

    @cached_property
    def written_ts(self) -> float:
        """``utc(page.timestamp).timestamp()``."""
        return utc(self.page.timestamp).timestamp()

    @cached_property
    def bound(self) -> tuple[float, int]:
        """:func:`gateway.core.outside.outside_bound` of the page without excerpts (its line and its nodes)."""
        return outside_bound(
            detail_tokens=self.page.tokens, summary_tokens=self.summary_tokens, background_tokens=self.background_tokens,
            content_on_line=self.line is LineHolds.CONTENT,
        )  # fmt: skip


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def micros(moment: datetime) -> int:
    """``moment`` (naive: UTC) in whole microseconds since the epoch."""
    return (utc(moment) - _EPOCH) // timedelta(microseconds=1)


@dataclass(frozen=True)
class NewPage:
    """A page to store with everything derived from it once, at ingestion."""

    page: Page
    summary_tokens: int
    background_tokens: int
    terms: Mapping[str, int]
    vector: npt.NDArray[np.float32] | None = None
    anchor: str = ""
    line: LineHolds = LineHolds.LEAD
    messages: str = ""  # an Original page's messages when its content cannot give them back (gateway.core.original)
    user_vector: npt.NDArray[np.float32] | None = None  # the embedding of the user's own messages, when not the page's
    sentence_vectors: npt.NDArray[np.float32] | None = None  # one row per sentence of theirs, when they wrote several
    model: str = DEFAULT_MODEL  # the embedding model that made the vectors
    # the vector hash's fields embedded later, in the background (a thread sent raw: gateway.service.ingest); they
    # are stored as PENDING_VECTOR, which no model made
    pending: tuple[str, ...] = ()
    called: tuple[tuple[str, str], ...] = ()  # see Manifest.called

    @classmethod
    def of(
        cls,
        page: Page,
        count: Callable[[str], int],
        terms: Mapping[str, int],
        vector: npt.NDArray[np.float32] | None = None,
        anchor: str = "",
        messages: str = "",
        user_vector: npt.NDArray[np.float32] | None = None,
        sentence_vectors: npt.NDArray[np.float32] | None = None,
        model: str = DEFAULT_MODEL,
        pending: tuple[str, ...] = (),
        called: tuple[tuple[str, str], ...] = (),
    ) -> NewPage:
        """``page`` (with its content) and what the request path needs of it, derived here once."""
        return cls(page, count(page.summary), count(background_line(page)), terms, vector, anchor, line_holds(page), messages,
                   user_vector, sentence_vectors, model, pending, called)

    def manifest(self) -> Manifest:
        """The manifest as stored and read back: the page without its content."""
        page = replace(self.page, content="")
        return Manifest(page, self.summary_tokens, self.background_tokens, self.terms, sum(self.terms.values()), self.anchor, self.line,
                        called=self.called)


PENDING_VECTOR = "pending|"  # a vector field to be embedded in the background: its "model" is no model (vector_model)


def encode_vector(vector: npt.NDArray[np.float32], model: str = DEFAULT_MODEL) -> str:
    """A vector as stored: float16, base64, after the name of the model that made it and a ``|`` (the shipped
    model's are stored without its name, as they were before models could be chosen)."""
    encoded = base64.b64encode(vector.astype(np.float16).tobytes()).decode("ascii")
    return encoded if model == DEFAULT_MODEL else f"{model}|{encoded}"


def vector_model(raw: str | bytes) -> str:
    """The name of the model that made a stored vector."""
    text = raw.decode("ascii") if isinstance(raw, bytes) else raw
    name, bar, _ = text.partition("|")
    return name if bar else DEFAULT_MODEL


def decode_vector(raw: str | bytes) -> npt.NDArray[np.float32]:
    text = raw.decode("ascii") if isinstance(raw, bytes) else raw
    return np.frombuffer(base64.b64decode(text.rpartition("|")[2]), dtype=np.float16).astype(np.float32)


def user_vector_field(page_id: str) -> str:
    """The vector hash's field of a page's second embedding, of the user's own messages (a field of its own, so
    that a gateway that does not know it reads the page's embedding as before)."""
    return f"{page_id}:user"


def sentences_vector_field(page_id: str) -> str:
    """The vector hash's field of the embeddings of the user's sentences, one after the other (a message of several
    sentences: a fact said in passing is averaged away in the message's embedding)."""
    return f"{page_id}:sentences"


def manifest_json(new: NewPage) -> str:
    page = new.page
    return json.dumps(
        {
            "type": page.type.value,
            "timestamp": page.timestamp.isoformat(),
            "summary": page.summary,
            "clusters": list(page.clusters),
            "tokens": page.tokens,
            "source_ids": list(page.source_ids),
            "topic_id": page.topic_id,
            "summary_tokens": new.summary_tokens,
            "background_tokens": new.background_tokens,
            "terms": dict(new.terms),
            "length": sum(new.terms.values()),
            "lexicon": LEXICON,
            "anchor": new.anchor,
            "line": new.line.value,
            "lines": LINES,
            **({"called": [list(pair) for pair in new.called]} if new.called else {}),
        },
        ensure_ascii=False,
    )


def parse_manifest(page_id: str, raw: str, content: str = "") -> Manifest:
    data = json.loads(raw)
    page = Page(
        id=page_id,
        type=PageType(data["type"]),
        timestamp=datetime.fromisoformat(data["timestamp"]),
        content=content,
        summary=data["summary"],
        clusters=tuple(data["clusters"]),
        tokens=data["tokens"],
        source_ids=tuple(data["source_ids"]),
        topic_id=data["topic_id"],
    )
    # a term's string once per process, not once per page that says it: a long thread's manifests keep ~150 terms each
    counts: Mapping[str, int] = {intern(term): count for term, count in data.get("terms", {}).items()}
    length = data.get("length", 0)
    if data.get("lexicon", 1) != LEXICON:  # stored before stemming: parsed once per process (ManifestCache)
        counts = restem(counts, data.get("lexicon", 1))
        length = sum(counts.values())
    # manifests stored before "line" existed: the summary alone tells whether it fits its line
    line = LineHolds(data["line"]) if "line" in data else LineHolds.SUMMARY if summary_fits_line(page) else LineHolds.LEAD
    background = data["background_tokens"]
    if data.get("lines", 1) != LINES:  # counted with the date on the line, which now heads its day's lines
        background = max(background - DAY_OVERHEAD, 1)
    called = tuple((str(role), str(name)) for role, name in data.get("called", ()))
    return Manifest(page, data["summary_tokens"], background, counts, length, data.get("anchor", ""), line, "anchor" in data, called)
