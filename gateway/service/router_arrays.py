"""The router's arrays (gateway.service.router): a bounded cache of each page's embedding, a thread's page vectors
stacked in page order so that one matrix product scores them all against a query, and BM25 over the thread's
postings summed with numpy.

Page vectors are kept in half precision (:data:`ROW_TYPE`), and a thread's are stacked again as int8 (`Aligned`):
scoring a query reads every row of a thread, ~3.4 rows a page on a long thread's questions about the user, and that
read is the cost (40,949 rows of 384 values at 10,000 exchanges: 63 MB as float32, ~4.3 ms here; 31 MB as float16,
~2 ms with simsimd's SIMD kernels; 16 MB as int8, ~0.6 ms). The best pages of the int8 scan are scored again from
their float16 vectors: they get the cosines float16 gave."""

from __future__ import annotations

import math

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import simsimd

from gateway.adapters.postings import Documents
from gateway.core.lru import Lru

__all__ = ["ALIGNED_PER_THREAD", "ALIGNED_THREADS", "ROW_TYPE", "Aligned", "Relevance", "VectorCache", "bm25_array", "first_by_value"]

ROW_TYPE = np.float16  # how page vectors are kept in memory, and the best pages of a scan scored (see the module docstring)

ALIGNED_THREADS = 32  # threads whose last requests' page vectors are kept in order
# per thread, the last requests' pages: two, for requests whose budgets keep different recent turns out of the pool
ALIGNED_PER_THREAD = 2


class VectorCache:
    """Page embeddings by (thread, page id), as :data:`ROW_TYPE`, bounded, least recently used out. Pages are
    immutable, so a cached vector never goes stale."""

    def __init__(self, capacity: int = 50_000) -> None:
        self._items: Lru[tuple[str, str], npt.NDArray[np.float16]] = Lru(capacity)

    def get_many(self, scope: str, ids: Sequence[str]) -> tuple[dict[str, npt.NDArray[np.float16]], list[str]]:
        found, missing = {}, []
        for page_id in ids:
            vector = self._items.get((scope, page_id))
            if vector is None:
                missing.append(page_id)
            else:
                found[page_id] = vector
        return found, missing

    def put_many(
        self, scope: str, vectors: Mapping[str, npt.NDArray[np.float32] | npt.NDArray[np.float16]]
    ) -> dict[str, npt.NDArray[np.float16]]:
        """Keep ``vectors``; returns them as kept."""
        kept = {page_id: vector.astype(ROW_TYPE, copy=False) for page_id, vector in vectors.items()}
        for page_id, vector in kept.items():
            self._items.put((scope, page_id), vector)
        return kept


class Relevance(Mapping[str, float]):
    """Each top-level page's relevance, read like the dictionary it stands for: the router's ``scores`` of the pages
    it scored, by the position ``at`` gives each among them, and the values set ``apart`` (a laid-open container's,
    the page the live turn follows, the pages the model opened), which come first. A request reads a few pages one
    by one and every page only as an array (`scored`, `over`): the scores are never made into a dictionary of every
    page, nor looked up page by page."""

    __slots__ = ("_apart", "_at", "_scores")

    def __init__(self, at: Mapping[str, int], scores: npt.NDArray[np.float64], apart: Mapping[str, float] | None = None) -> None:
        self._at, self._scores, self._apart = at, scores, dict(apart or {})

    def __getitem__(self, page: str) -> float:
        value = self._apart.get(page)
        return value if value is not None else float(self._scores[self._at[page]])

    def __contains__(self, page: object) -> bool:
        return page in self._apart or page in self._at

    def __iter__(self) -> Iterator[str]:
        yield from self._at
        yield from (page for page in self._apart if page not in self._at)

    def __len__(self) -> int:
        return len(self._at) + sum(page not in self._at for page in self._apart)

    def apart(self, values: Mapping[str, float]) -> Relevance:
        """These relevances with ``values`` set apart too (over what was)."""
        return Relevance(self._at, self._scores, {**self._apart, **values})

    def scored(self) -> npt.NDArray[np.float64]:
        """The relevance of the scored pages, in their order (a copy)."""
        values = self._scores.copy()
        for page, value in self._apart.items():
            position = self._at.get(page)
            if position is not None:
                values[position] = value
        return values

    def positions(self, pages: Sequence[str]) -> npt.NDArray[np.intp]:
        """Each of ``pages``' position among the scored pages, -1 for one not scored (for `over`)."""
        return np.fromiter(map(lambda page: self._at.get(page, -1), pages), dtype=np.intp, count=len(pages))

    def over(self, roots: Sequence[str], at_roots: npt.NDArray[np.intp], position: Mapping[str, int]) -> npt.NDArray[np.float64]:
        """The relevance of ``roots``: ``at_roots`` gives each root's position among the scored pages (-1: one that
        is not scored, whose relevance is set apart) and ``position`` each root's among ``roots``."""
        values = np.where(at_roots >= 0, self._scores[np.maximum(at_roots, 0)], 0.0) if len(self._scores) else np.zeros(len(roots))
        for page, value in self._apart.items():
            i = position.get(page)
            if i is not None:
                values[i] = value
        return values


SPARE_ROWS = 256  # rows of room a thread's matrix of page vectors gets to grow into: a quarter of its rows, at least this
EXACT_PAGES = 256  # the pages whose cosine the int8 scan's best are scored again as the vectors are kept (see Aligned)
_I8 = 127.0  # the magnitude a row's (or the query's) largest value is scaled to in int8


def _quantized(rows: npt.NDArray[np.floating[Any]]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """``rows`` as int8, each row scaled so that its largest magnitude is 127, and each row's scale back."""
    scales = np.maximum(np.abs(rows).max(axis=1), np.float32(1e-12)).astype(np.float32) / np.float32(_I8)
    return np.rint(rows / scales[:, None]).astype(np.int8), scales


@dataclass
class _Spare:
    """Stacked rows with room to grow: the first ``used`` rows and scales, and the first vectors, are some `Aligned`'s."""

    data: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]
    vectors: list[npt.NDArray[np.float16]]
    used: int


@dataclass(frozen=True)
class Aligned:
    """A thread's page vectors in page order, stacked once: one matrix product scores them all against a query. A
    page with the user's sentences embedded too (gateway.service.ingest) has several rows and matches on the best of
    them; a page without a vector scores 0.

    The stack is int8 (each row scaled to its largest magnitude): a long thread's questions about the user read
    ~3.4 rows a page, and that read was the cost of a request's scoring (40,949 rows at 10,000 exchanges: 31 MB as
    float16, ~2 ms; 16 MB as int8, ~0.6 ms). int8 moves a cosine by up to ~2.5e-3, enough to reorder pages of close
    cosines, so the :data:`EXACT_PAGES` best pages of that scan are scored again from their vectors as kept
    (:data:`ROW_TYPE`, the cosines the stack gave before it was int8). The rest keep a cosine within that error: it
    reaches a context only through the thread's median (`_above_typical`) or where a page far down by meaning
    competes by its words or its age (2 of 20 contexts at 4k on a thread of 10,000 exchanges; none of 1,149 on the
    evidence-recall sets)."""

    ids: tuple[str, ...]
    rows: npt.NDArray[np.int8]  # every vector's rows, page after page
    scales: npt.NDArray[np.float32]  # each row's scale (its value = its int8 times this)
    # the vectors of the pages that have rows, in order, as kept: the first len(starts) of this list, which a pool
    # grown from this one may have extended (see `extended`)
    vectors: list[npt.NDArray[np.float16]]
    starts: npt.NDArray[np.intp]  # the first row of each page that has rows
    has: npt.NDArray[np.bool_]  # which pages have rows
    # the stack ``rows`` is the start of, with room to grow (see `extended`); None: rows is a matrix of its own
    spare: _Spare | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, ids: tuple[str, ...], vectors: Sequence[npt.NDArray[np.float32] | npt.NDArray[np.float16] | None]) -> Aligned:
        present = [(v.reshape(1, -1) if v.ndim == 1 else v).astype(ROW_TYPE, copy=False) for v in vectors if v is not None]
        sizes = [len(v) for v in present]
        starts = np.cumsum([0, *sizes[:-1]], dtype=np.intp)
        if present:
            rows, scales = _quantized(np.vstack(present, dtype=np.float32))
        else:
            rows, scales = np.zeros((0, 0), dtype=np.int8), np.zeros(0, dtype=np.float32)
        return cls(ids, rows, scales, present, starts, np.array([v is not None for v in vectors], dtype=bool))

    def extended(self, ids: tuple[str, ...], vectors: Sequence[npt.NDArray[np.float32] | npt.NDArray[np.float16] | None]) -> Aligned:
        """These pages and then ``ids[len(self.ids):]`` (whose ``vectors`` are given): a chat's next request, whose
        pool gained the pages that left its recent turns, stacks only theirs onto the matrix it has."""
        more = Aligned.of(ids[len(self.ids) :], vectors)
        has = np.concatenate((self.has, more.has))
        if not len(more.rows):
            return Aligned(ids, self.rows, self.scales, self.vectors, self.starts, has, self.spare)
        if not len(self.rows):
            return Aligned(ids, more.rows, more.scales, more.vectors, more.starts, has)
        starts = np.concatenate((self.starts, more.starts + len(self.rows)))
        used, added, pages = len(self.rows), len(more.rows), len(self.starts)
        spare = self.spare
        # The rows go into the room after this matrix when no other extension of it took that room (two pools of a
        # thread may grow from one matrix): a chat's request then copies its new rows, not the whole thread's.
        if spare is None or spare.used != used or len(spare.vectors) != pages or spare.data.shape[0] < used + added:
            room = used + added + max((used + added) // 4, SPARE_ROWS)
            spare = _Spare(np.empty((room, self.rows.shape[1]), dtype=np.int8), np.empty(room, dtype=np.float32),
                           self.vectors[:pages], used)
            spare.data[:used], spare.scales[:used] = self.rows, self.scales
        spare.data[used : used + added], spare.scales[used : used + added] = more.rows, more.scales
        spare.vectors.extend(more.vectors)
        spare.used = used + added
        return Aligned(ids, spare.data[: used + added], spare.scales[: used + added], spare.vectors, starts, has, spare)

    def cosines(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """Each page's best row's dot with ``query`` (a cosine: the vectors are unit length), 0 for one without rows:
        the int8 stack's, the best :data:`EXACT_PAGES` pages' again from their vectors as kept."""
        scores = np.zeros(len(self.ids))
        if not len(self.rows):
            return scores
        scale = max(float(np.abs(query).max()), 1e-12) / _I8
        small = np.rint(query / scale).astype(np.int8).reshape(1, -1)
        dots = np.asarray(simsimd.cdist(small, self.rows, metric="dot", out_dtype="float32"))[0]
        dots *= self.scales
        best = np.maximum.reduceat(dots, self.starts).astype(np.float64) * scale
        top = np.argpartition(best, -EXACT_PAGES)[-EXACT_PAGES:] if len(best) > EXACT_PAGES else np.arange(len(best))
        again = [self.vectors[i] for i in top.tolist()]
        sizes = np.fromiter(map(len, again), dtype=np.intp, count=len(again))
        exact = np.asarray(simsimd.cdist(query.astype(ROW_TYPE).reshape(1, -1), np.vstack(again), metric="dot"))[0]
        best[top] = np.maximum.reduceat(exact, np.cumsum(sizes) - sizes)
        scores[self.has] = best
        return scores


def bm25_array(
    documents: Documents, query: Sequence[str], neighbours: float, k1: float = 1.5, b: float = 0.75
) -> npt.NDArray[np.float64]:
    """``lexical.bm25`` over ``documents`` with arrays, float for float: each term's windowed
    frequencies (its count plus ``neighbours`` times its neighbours'), weight and BM25 terms are array operations in
    the same order as there, and each term's scores are added to every document it scores at once, term after term.
    A term's scores are kept for the same documents (`Documents.kept`): a term seen before costs no work per
    document, a new one only the gathering of its documents' counts."""
    n = len(documents)
    scores = np.zeros(n)
    if not n or not query:
        return scores
    kept = documents.kept
    norms: npt.NDArray[np.float64] | None = kept.get(("norms", k1, b, neighbours))
    if norms is None:
        norms = kept[("norms", k1, b, neighbours)] = np.asarray(documents.norms(k1=k1, b=b, neighbours=neighbours))
    for term in dict.fromkeys(query):
        found: tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]] | None = kept.get(("bm25", term, k1, b, neighbours))
        if found is None:
            found = kept[("bm25", term, k1, b, neighbours)] = _term_scores(documents, term, norms, k1, neighbours)
        scores[found[0]] += found[1]
    return scores


def _term_scores(
    documents: Documents, term: str, norms: npt.NDArray[np.float64], k1: float, neighbours: float
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """The positions a term scores (ascending) and its BM25 term in each (see :func:`bm25_array`)."""
    positions, counts = documents.occurrences(term)
    if not len(positions):
        return positions, np.zeros(0)
    n = len(documents)
    dense = np.zeros(n + 2)  # dense[q + 1]: the count at position q; 0.0 beyond either end
    dense[positions + 1] = counts
    near = np.zeros(n + 2, dtype=bool)  # near[q + 1]: position q holds the term or is next to one that does
    near[positions] = near[positions + 1] = near[positions + 2] = True
    window = np.flatnonzero(near[1 : n + 1])
    f = dense[window + 1] + neighbours * (dense[window] + dense[window + 2])
    window, f = window[f != 0], f[f != 0]
    frequency = len(f)
    weight = math.log(1.0 + (n - frequency + 0.5) / (frequency + 0.5))
    return window, weight * f * (k1 + 1.0) / (f + norms[window])


def first_by_value(values: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.intp]:
    """The positions of ``values``' first ``k`` in the order ``np.argsort(-values, kind="stable")`` gives (highest
    first, ties by position), sorting only the values as high as the ``k``-th and its ties: a request reads the
    first few of a ranking of every page."""
    n = len(values)
    if k >= n:
        return np.argsort(-values, kind="stable")[:k]
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    bar = np.partition(values, n - k)[n - k]  # the k-th highest
    near = np.flatnonzero(values >= bar)  # (in position order: the stable sort keeps it among ties)
    return near[np.argsort(-values[near], kind="stable")][:k]
