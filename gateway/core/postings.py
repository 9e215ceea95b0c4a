"""Which of a thread's pages contain each term, kept as pages are read, so that one request's lexical statistics
take work in proportion to the pages that contain the query's terms, not to every page of the thread.

`Postings` is filled once per page (a page's term counts never change). `Documents` is one request's
documents (pages in conversation order) over it, and gives what :mod:`gateway.core.lexical`'s ``bm25``,
``idf_weights`` and ``drop_common_words`` need for those documents (positions, counts, length norms; BM25 itself is
summed with arrays by `gateway.service.router_arrays.bm25_array`), exactly, float for float: the same formulas, in
the same order (tests/core/test_postings.py holds them equal to those functions).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from gateway.core.lexical import _length_norms, drop_terms, terms, words

__all__ = ["Documents", "Postings"]

TERMS_KEPT = 4096  # terms whose positions are kept for one set of documents
DOCUMENTS_KEPT = 2  # sets of documents a thread keeps them for


class Postings:
    """Term -> the ids of the pages whose term counts contain it, and each page's counts."""

    def __init__(self) -> None:
        self._pages: dict[str, list[str]] = {}
        self._counts: dict[str, Mapping[str, int]] = {}
        # The last few documents (the same pages request after request, until one is added; two sets when requests
        # alternate, as budgets that keep different recent turns out of the pool do), each with what is derived from
        # them (_Kept); the least recently used set goes first.
        self._kept: OrderedDict[tuple[str, ...], _Kept] = OrderedDict()

    def __contains__(self, page_id: object) -> bool:
        return page_id in self._counts

    def add(self, page_id: str, counts: Mapping[str, int]) -> None:
        """A page's term counts (a page already added is left as it is: its counts never change)."""
        if page_id in self._counts:
            return
        self._counts[page_id] = counts
        for term in counts:
            self._pages.setdefault(term, []).append(page_id)

    def documents(self, ids: Sequence[str], lengths: Sequence[int]) -> Documents | None:
        """``ids`` (distinct pages, every one added, in conversation order, with their lengths) as one request's
        documents; ``None`` when they are not (then the plain functions over the counts apply)."""
        key = tuple(ids)
        kept = self._kept.get(key)
        if kept is None:
            order = {page_id: position for position, page_id in enumerate(ids)}
            if len(order) != len(ids) or any(page_id not in self._counts for page_id in ids):
                return None
            kept = self._kept[key] = _Kept(key, order)
            while len(self._kept) > DOCUMENTS_KEPT:
                self._kept.popitem(last=False)
        elif len(kept.positions) > TERMS_KEPT or len(kept.derived) > TERMS_KEPT:
            kept = self._kept[key] = _Kept(key, kept.order)
        self._kept.move_to_end(key)
        # the same pages' positions and scores never change (a page's counts never do)
        return Documents(self, kept, lengths)


class _Kept:
    """What is derived from one set of documents, for the requests that ask about the same ones: each term's
    positions, per scoring (lengths, neighbours, k1, b) the length norms, the last
    lengths list with its tuple, and what callers keep (Documents.kept)."""

    def __init__(self, ids: tuple[str, ...], order: Mapping[str, int]) -> None:
        self.ids = ids
        self.order = order
        self.positions: dict[str, list[int]] = {}
        self.scoring: tuple[tuple[tuple[int, ...], float, float, float], list[float]] | None = None
        self.lengths: tuple[Sequence[int], tuple[int, ...]] | None = None
        self.derived: dict[Hashable, Any] = {}


class Documents:
    """One request's documents over the thread's postings."""

    def __init__(self, postings: Postings, kept: _Kept, lengths: Sequence[int]) -> None:
        self._postings = postings
        self._kept = kept
        self._order = kept.order
        self._lengths = lengths
        self._ids = kept.ids
        self._positions = kept.positions  # kept for these pages (Postings.documents), shared by their requests

    def __len__(self) -> int:
        return len(self._order)

    @property
    def ids(self) -> tuple[str, ...]:
        """The pages, in conversation order."""
        return self._ids

    @property
    def lengths(self) -> Sequence[int]:
        return self._lengths

    def positions(self, term: str) -> list[int]:
        """The positions (ascending) of the documents that contain ``term``."""
        found = self._positions.get(term)
        if found is None:
            order = self._order
            found = self._positions[term] = sorted(order[p] for p in self._postings._pages.get(term, ()) if p in order)
        return found

    def frequency(self, term: str) -> int:
        return len(self.positions(term))

    def counts(self, term: str) -> list[float]:
        """``term``'s count in each document of :meth:`positions`, in that order."""
        counts, ids = self._postings._counts, self._ids
        return [float(counts[ids[p]].get(term, 0)) for p in self.positions(term)]

    def norms(self, *, k1: float = 1.5, b: float = 0.75, neighbours: float = 0.0) -> list[float]:
        """BM25's length term of each document (as ``lexical.bm25`` weighs them), kept for the same documents."""
        return self._scoring(neighbours, k1, b)[1]

    @property
    def kept(self) -> dict[Hashable, Any]:
        """Where a caller keeps what it derives from these documents (their terms' scores, say) for the requests
        that ask about the same documents, while the thread keeps them (a key must name everything else the value
        depends on)."""
        return self._kept.derived

    def idf_weights(self, query: Sequence[str]) -> dict[str, float]:
        """``lexical.idf_weights(query, documents)``."""
        n = len(self._order)
        weights: dict[str, float] = {}
        for term in dict.fromkeys(query):
            frequency = self.frequency(term)
            if frequency:
                weights[term] = math.log(1.0 + (n - frequency + 0.5) / (frequency + 0.5))
        return weights

    def drop_common_words(self, text: str, share: float) -> str:
        """``lexical.drop_common_words(text, documents, share)``."""
        n = len(self._order)
        wanted = set(terms(text))
        common = {t for t in wanted if self.frequency(t) > share * n} if n else set()
        if not common:
            return text

        reduced = drop_terms(text, common.__contains__)
        return reduced if words(reduced) else text

    def _scoring(self, neighbours: float, k1: float, b: float) -> tuple[Any, list[float]]:
        """The documents' length norms for one scoring, kept for the same documents."""
        key = (self._lengths_key(), neighbours, k1, b)
        kept = self._kept
        if kept.scoring is None or kept.scoring[0] != key:
            kept.scoring = (key, _length_norms(self._lengths, neighbours, k1, b))
        return kept.scoring

    def _lengths_key(self) -> tuple[int, ...]:
        """The documents' lengths as a key of their scoring (the same list object is the same lengths)."""
        kept = self._kept
        if kept.lengths is not None and kept.lengths[0] is self._lengths:
            return kept.lengths[1]
        key = tuple(self._lengths)
        kept.lengths = (self._lengths, key)
        return key

