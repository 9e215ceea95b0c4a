"""Which of a thread's pages contain each term, kept as pages are read, so that one request's lexical statistics
take work in proportion to the pages that contain the query's terms, not to every page of the thread.

`Postings` is filled once per page (a page's term counts never change). `Documents` is one request's
documents (pages in conversation order) over it, and gives what :mod:`gateway.core.lexical`'s ``bm25``,
``idf_weights`` and ``drop_common_words`` need for those documents (positions, counts, length norms; BM25 itself is
summed with arrays by `gateway.service.router_arrays.bm25_array`), exactly, float for float: the same formulas, in
the same order (tests/adapters/test_postings.py holds them equal to those functions).
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from gateway.core.lexical import drop_terms, terms, words

__all__ = ["Documents", "Postings"]

TERMS_KEPT = 4096  # terms whose positions are kept for one set of documents
DOCUMENTS_KEPT = 2  # sets of documents a thread keeps them for


class Postings:
    """Term -> the pages whose term counts contain it (by their place in the order they were added), with its count
    in each."""

    def __init__(self) -> None:
        # per term, the pages that contain it (by their place in the order they were added) and its count in each, as
        # C arrays of unsigned ints (a list holds a pointer and, past 256, an int object for each: 36 bytes, not 4; a
        # long thread's postings are millions of them)
        self._pages: dict[str, array[int]] = {}
        self._tallies: dict[str, array[int]] = {}
        self._added: dict[str, int] = {}  # page id -> its place in the order pages were added
        # The last few documents (the same pages request after request, until one is added; two sets when requests
        # alternate, as budgets that keep different recent turns out of the pool do), each with what is derived from
        # them (_Kept); the least recently used set goes first.
        self._kept: OrderedDict[tuple[str, ...], _Kept] = OrderedDict()

    def __contains__(self, page_id: object) -> bool:
        return page_id in self._added

    def add(self, page_id: str, counts: Mapping[str, int]) -> None:
        """A page's term counts (a page already added is left as it is: its counts never change)."""
        if page_id in self._added:
            return
        place = self._added[page_id] = len(self._added)
        pages, tallies = self._pages, self._tallies
        for term, count in counts.items():
            if term in pages:
                pages[term].append(place)
                tallies[term].append(count)
            else:
                pages[term], tallies[term] = array("I", (place,)), array("I", (count,))

    def documents(self, ids: Sequence[str], lengths: Sequence[int]) -> Documents | None:
        """``ids`` (distinct pages, every one added, in conversation order, with their lengths) as one request's
        documents; ``None`` when they are not (then the plain functions over the counts apply)."""
        key = tuple(ids)
        kept = self._kept.get(key)
        if kept is None:
            added = self._added
            # a chat's next request: the documents of one before it and a page or two more (only those are walked)
            before = next((k for k in reversed(self._kept.values()) if len(k.ids) < len(key) and key[: len(k.ids)] == k.ids), None)
            start = len(before.ids) if before is not None else 0
            more = key[start:]
            order = {**before.order} if before is not None else {}
            order.update((page_id, start + place) for place, page_id in enumerate(more))
            if len(order) != len(ids) or any(page_id not in added for page_id in more):
                return None
            # each added page's position among the documents (-1: not one of them)
            position = np.full(len(added), -1, dtype=np.intp)
            if before is not None:
                position[: len(before.position)] = before.position
            position[np.fromiter(map(added.__getitem__, more), dtype=np.intp, count=len(more))] = np.arange(start, len(ids))
            kept = self._kept[key] = _Kept(key, order, position)
            while len(self._kept) > DOCUMENTS_KEPT:
                self._kept.popitem(last=False)
        elif len(kept.positions) > TERMS_KEPT or len(kept.derived) > TERMS_KEPT:
            kept = self._kept[key] = _Kept(key, kept.order, kept.position)
        self._kept.move_to_end(key)
        # the same pages' positions and scores never change (a page's counts never do)
        return Documents(self, kept, lengths)


class _Kept:
    """What is derived from one set of documents, for the requests that ask about the same ones: each term's
    positions, per scoring (lengths, neighbours, k1, b) the length norms, the last
    lengths list with its tuple, and what callers keep (Documents.kept)."""

    def __init__(self, ids: tuple[str, ...], order: Mapping[str, int], position: npt.NDArray[np.intp]) -> None:
        self.ids = ids
        self.order = order
        self.position = position  # by a page's place in Postings' order of adding, its position here (-1: none)
        self.positions: dict[str, tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]] = {}
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

    def occurrences(self, term: str) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """The positions (ascending) of the documents that contain ``term``, and its count in each: array work over
        the pages that contain it, kept for these documents."""
        found = self._positions.get(term)
        if found is None:
            places = self._postings._pages.get(term)
            if places is None:
                found = (np.zeros(0, dtype=np.intp), np.zeros(0))
            else:
                position = self._kept.position
                # (places in the order of adding: those past the position map's end were added after these documents)
                known = bisect.bisect_left(places, len(position))
                at = position[np.asarray(places[:known], dtype=np.intp)]
                inside = at >= 0
                at, tally = at[inside], np.asarray(self._postings._tallies[term][:known], dtype=np.float64)[inside]
                order = np.argsort(at, kind="stable")
                found = (at[order], tally[order])
            self._positions[term] = found
        return found

    def positions(self, term: str) -> list[int]:
        """The positions (ascending) of the documents that contain ``term``."""
        return self.occurrences(term)[0].tolist()  # type: ignore[no-any-return]

    def frequency(self, term: str) -> int:
        return len(self.occurrences(term)[0])


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
            kept.scoring = (key, length_norms(self._lengths, neighbours, k1, b))
        return kept.scoring

    def _lengths_key(self) -> tuple[int, ...]:
        """The documents' lengths as a key of their scoring (the same list object is the same lengths)."""
        kept = self._kept
        if kept.lengths is not None and kept.lengths[0] is self._lengths:
            return kept.lengths[1]
        key = tuple(self._lengths)
        kept.lengths = (self._lengths, key)
        return key


def length_norms(lengths: Sequence[int], neighbours: float, k1: float, b: float) -> list[float]:
    """``lexical._length_norms``, float for float (the same operations on each length, in the same order, and the
    average summed by Python's ``sum`` in the same order), with arrays instead of a Python pass per document: a
    thread's thousands of pages are new documents each time a page joins them."""
    values = np.asarray(lengths, dtype=np.float64)
    if neighbours and len(values):
        around = np.zeros(len(values))
        around[1:] += values[:-1]  # (0.0 + the one before: exact, as the plain function's 0.0 at the ends)
        around[:-1] += values[1:]
        values = values + neighbours * around
    windowed = values.tolist()
    average = (sum(windowed) / len(windowed)) or 1.0
    return (k1 * ((1.0 - b) + b * values / average)).tolist()  # type: ignore[no-any-return]

