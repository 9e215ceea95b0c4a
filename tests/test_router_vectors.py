"""A thread's page vectors scored in one matrix product give each page's cosine as the page-by-page dot did; what a
cosine says is counted from the thread's typical page."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.service.router_arrays import EXACT_PAGES, ROW_TYPE, Aligned, Relevance
from gateway.service.router import _above_typical


def test_one_product_scores_each_page_on_its_best_row_and_a_page_without_a_vector_zero() -> None:
    rng = np.random.default_rng(7)

    def unit(*shape: int) -> npt.NDArray[np.float32]:  # embeddings are unit length
        v = rng.standard_normal((*shape, 384)).astype(np.float32)
        return v / np.linalg.norm(v, axis=-1, keepdims=True)

    query = unit()
    vectors = [unit(), None, unit(3), unit(), unit(2)]  # (the third and fifth: a page with the user's sentences too)
    expected = [0.0 if v is None else float(np.dot(v, query)) if v.ndim == 1 else float(np.dot(v, query).max()) for v in vectors]
    scores = Aligned.of(tuple("abcde"), vectors).cosines(query)
    assert np.allclose(scores, expected, rtol=0, atol=1e-3)  # the best pages scored as kept, in half precision: ~1e-4
    assert scores[1] == 0.0 and int(np.argmax(scores)) == int(np.argmax(expected))
    assert Aligned.of(("a", "b"), [None, None]).cosines(query).tolist() == [0.0, 0.0]


def test_the_best_pages_of_the_int8_scan_score_as_kept_and_the_rest_within_its_error() -> None:
    """A thread of more pages than are scored again: the best `EXACT_PAGES` by cosine get the cosines the vectors
    as kept (float16) give, every other page one within int8's error."""
    rng = np.random.default_rng(3)
    vectors: list[npt.NDArray[np.float32] | None] = []
    for i in range(3 * EXACT_PAGES):
        v = rng.standard_normal((1 + (i % 4 == 0) * (i % 7), 384)).astype(np.float32)
        v /= np.linalg.norm(v, axis=-1, keepdims=True)
        vectors.append(None if i % 50 == 7 else v[0] if len(v) == 1 else v)
    query = rng.standard_normal(384).astype(np.float32)  # (near no page in particular: cosines close together)
    query /= np.linalg.norm(query)
    kept = [None if v is None else v.astype(ROW_TYPE).astype(np.float64) for v in vectors]
    expected = np.array([0.0 if v is None else float(np.max(v @ query.astype(ROW_TYPE).astype(np.float64))) for v in kept])
    ids = tuple(f"p{i}" for i in range(len(vectors)))
    scores = Aligned.of(ids, vectors).cosines(query)
    best = np.argsort(-expected, kind="stable")[: EXACT_PAGES - 8]  # (the last few: int8 may swap them with the next)
    assert np.allclose(scores[best], expected[best], rtol=0, atol=1e-6)
    assert np.abs(scores - expected).max() < 5e-3 and np.abs(scores - expected).max() > 1e-6  # the rest: int8's
    assert (scores[[i for i, v in enumerate(vectors) if v is None]] == 0).all()


def test_a_page_at_the_threads_typical_cosine_adds_nothing_and_the_best_adds_all() -> None:
    # cosines of unrelated texts are not 0: a page at the median says nothing of the query
    scores = _above_typical([0.10, 0.16, 0.16, 0.20, 0.56, 0.36, 0.12])  # the median: 0.16
    assert scores.tolist() == pytest.approx([0.0, 0.0, 0.0, 0.1, 1.0, 0.5, 0.0])
    assert _above_typical([]).tolist() == []
    assert _above_typical([0.3, 0.3, 0.3]).tolist() == [0.0, 0.0, 0.0]  # nothing stands out: no semantic signal


def test_a_grown_pool_s_vectors_stack_onto_the_matrix_it_had() -> None:
    """A chat's next request scores the same cosines from the previous matrix with the new pages' rows stacked on."""
    rng = np.random.default_rng(5)
    ids = tuple(f"p{i}" for i in range(7))
    vectors = [None if i == 2 else rng.normal(size=(1 + i % 3, 4)).astype(np.float32) if i % 2 else rng.normal(size=4).astype(np.float32)
               for i in range(7)]
    query = rng.normal(size=4).astype(np.float32)
    whole = Aligned.of(ids, vectors)
    for cut in (0, 2, 3, 6, 7):
        grown = Aligned.of(ids[:cut], vectors[:cut]).extended(ids, vectors[cut:])
        assert grown.ids == ids and grown.cosines(query).tolist() == whole.cosines(query).tolist()


def test_two_pools_grown_from_one_matrix_keep_each_their_own_rows() -> None:
    """Requests whose budgets keep different recent turns out of the pool grow one thread's matrix two ways, and a
    chat grows it request after request: each grown pool scores as if stacked afresh, whichever grew last."""
    rng = np.random.default_rng(11)
    ids = tuple(f"p{i}" for i in range(12))
    vectors = [rng.normal(size=(1 + i % 2, 4)).astype(np.float32) if i % 3 else rng.normal(size=4).astype(np.float32) for i in range(12)]
    query = rng.normal(size=4).astype(np.float32)
    base = Aligned.of(ids[:4], vectors[:4]).extended(ids[:5], vectors[4:5])  # a matrix with room after it
    short = base.extended(ids[:7], vectors[5:7])
    other = base.extended(ids[:6], [rng.normal(size=4).astype(np.float32)])  # grown from the same matrix
    longer = short.extended(ids, vectors[7:])
    for grown, until in ((short, 7), (longer, 12)):
        assert grown.cosines(query).tolist() == Aligned.of(ids[:until], vectors[:until]).cosines(query).tolist()
    assert other.cosines(query)[:5].tolist() == base.cosines(query).tolist()
    assert base.cosines(query).tolist() == Aligned.of(ids[:5], vectors[:5]).cosines(query).tolist()


@given(
    scores=st.lists(st.floats(0.0, 1.0), max_size=12),
    containers=st.lists(st.floats(0.0, 1.0), max_size=4),
    opened=st.lists(st.integers(0, 11), max_size=3),
)
@settings(max_examples=200, deadline=None)
def test_relevance_reads_as_the_dictionary_it_stands_for(scores: list[float], containers: list[float], opened: list[int]) -> None:
    """The router's scores by position, with the values set apart (containers, pages the model opened) over them,
    read page by page and as arrays give what the dictionary of every page gave."""
    ids = [f"p{i}" for i in range(len(scores))]
    folded = {f"c{i}": value for i, value in enumerate(containers)}
    apart = {**folded, **{ids[i]: 1.0 for i in opened if i < len(ids)}}
    expected = {**dict(zip(ids, scores)), **apart}
    relevance = Relevance(dict(zip(ids, range(len(ids)))), np.array(scores, dtype=np.float64)).apart(apart)
    assert dict(relevance) == expected and len(relevance) == len(expected)
    assert all(page in relevance for page in expected) and "elsewhere" not in relevance
    assert relevance.scored().tolist() == [expected[i] for i in ids]
    roots = [*folded, *ids][::-1]  # (the flow's roots in an order of their own)
    position = {root: i for i, root in enumerate(roots)}
    assert relevance.over(roots, relevance.positions(roots), position).tolist() == [expected[r] for r in roots]
