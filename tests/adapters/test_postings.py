"""Lexical statistics from postings are the plain functions' numbers, float for float (gateway.adapters.postings):
if gateway.core.lexical's scoring changes, these fail until the postings follow it."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.lexical import _length_norms, bm25, drop_common_words, idf_weights, terms
from gateway.adapters.manifests import Manifest, NewPage, manifest_json
from gateway.adapters.postings import Documents, Postings, length_norms
from gateway.adapters.thread_cache import ManifestCache, PageCache
from gateway.core.pages import Page, PageType
from gateway.service.router_arrays import bm25_array

VOCABULARY = ["dog", "walk", "cat", "paint", "rex", "garden", "trip", "boot", "jazz", "chord"]
counts = st.dictionaries(st.sampled_from(VOCABULARY), st.integers(min_value=0, max_value=4), max_size=6)
query = st.lists(st.sampled_from([*VOCABULARY, "absent"]), max_size=6)


def _bm25(docs: Documents, words: list[str], neighbours: float = 0.0) -> list[float]:
    """BM25 over the postings, as the router sums it (with arrays)."""
    return bm25_array(docs, words, neighbours).tolist()  # type: ignore[no-any-return]


def _postings(documents: list[dict[str, int]], extra: int = 0) -> tuple[Postings, list[str]]:
    postings = Postings()
    ids = [f"p{i}" for i in range(len(documents))]
    for page_id, doc in zip(ids, documents):
        postings.add(page_id, doc)
    for i in range(extra):  # pages of the thread that are not this request's documents
        postings.add(f"other{i}", {"dog": 1, "cat": 2})
    return postings, ids


@settings(max_examples=300, deadline=None)
@given(st.lists(counts, max_size=12), query, st.sampled_from([0.0, 0.5, 0.25]), st.integers(min_value=0, max_value=3))
def test_bm25_idf_and_common_words_equal_the_plain_functions(
    documents: list[dict[str, int]], words: list[str], neighbours: float, extra: int
) -> None:
    postings, ids = _postings(documents, extra)
    lengths = [sum(d.values()) for d in documents]
    docs = postings.documents(ids, lengths)
    assert docs is not None and len(docs) == len(documents)
    assert _bm25(docs, words, neighbours) == bm25(words, documents, lengths, neighbours=neighbours)
    assert docs.idf_weights(words) == idf_weights(words, documents)
    text = " ".join(words) + " and a Dog's walk"
    for share in (0.0, 0.3, 0.5):
        assert docs.drop_common_words(text, share) == drop_common_words(text, documents, share)


def test_a_page_is_added_once_and_only_known_distinct_pages_are_documents() -> None:
    postings, ids = _postings([{"dog": 1}, {"cat": 1}])
    postings.add("p0", {"cat": 5})  # a page's counts never change: the first ones stay
    assert "p0" in postings and "p9" not in postings
    docs = postings.documents(ids, [1, 1])
    assert docs is not None and docs.positions("dog") == [0] and docs.positions("cat") == [1]
    assert docs.frequency("absent") == 0
    assert postings.documents(["p0", "p0"], [1, 1]) is None  # the same page twice
    assert postings.documents(["p0", "p9"], [1, 1]) is None  # a page never added


def test_documents_in_another_order_score_in_that_order() -> None:
    postings, _ = _postings([{"dog": 2}, {"walk": 1}, {"cat": 1}])
    docs = postings.documents(["p2", "p1", "p0"], [1, 1, 2])
    assert docs is not None
    reordered = [{"cat": 1}, {"walk": 1}, {"dog": 2}]
    assert _bm25(docs, terms("dogs walking"), 0.5) == bm25(terms("dogs walking"), reordered, [1, 1, 2], neighbours=0.5)
    assert _bm25(docs, []) == [0.0, 0.0, 0.0]
    # the next request's documents reuse what was kept for the same pages (a page's length never changes)
    again = postings.documents(["p2", "p1", "p0"], [1, 1, 2])
    assert again is not None
    assert _bm25(again, ["dog"], 0.5) == bm25(["dog"], reordered, [1, 1, 2], neighbours=0.5)
    assert again.norms(neighbours=0.5) is docs.norms(neighbours=0.5)
    empty = postings.documents([], [])
    assert empty is not None and _bm25(empty, ["dog"]) == [] and empty.drop_common_words("dog", 0.5) == "dog"


@settings(max_examples=100, deadline=None)
@given(st.lists(counts, min_size=1, max_size=10), st.lists(query, min_size=1, max_size=4), st.sampled_from([0.0, 0.5]))
def test_scores_kept_for_the_last_documents_stay_those_documents_own(
    documents: list[dict[str, int]], queries: list[list[str]], neighbours: float
) -> None:
    """A request's terms are kept for the next request on the same pages; documents made in between (other
    pages, pages added to the thread) neither use them nor change what older documents score."""
    postings, ids = _postings(documents)
    lengths = [sum(d.values()) for d in documents]
    first = postings.documents(ids, lengths)
    assert first is not None
    for words in queries:
        expected = bm25(words, documents, lengths, neighbours=neighbours)
        assert _bm25(first, words, neighbours) == expected
        again = postings.documents(ids, lengths)
        assert again is not None and _bm25(again, words, neighbours) == expected
        assert _bm25(again, words, neighbours) == expected  # a second time, from what was kept
        postings.add(f"new{len(words)}", {"dog": 3, "jazz": 1})  # the thread grows: these documents do not
        half = postings.documents(ids[: len(ids) // 2 + 1], lengths[: len(ids) // 2 + 1])
        assert half is not None
        assert _bm25(half, words, neighbours) == bm25(words, documents[: len(ids) // 2 + 1], lengths[: len(ids) // 2 + 1], neighbours=neighbours)
        assert _bm25(first, words, neighbours) == expected  # made before `half`: still its own numbers
        assert first.idf_weights(words) == idf_weights(words, documents)


@settings(max_examples=150, deadline=None)
@given(st.lists(counts, min_size=1, max_size=12), st.lists(st.integers(1, 4), min_size=1, max_size=4), query)
def test_documents_that_grow_at_their_end_score_as_made_anew(documents: list[dict[str, int]], steps: list[int], words: list[str]) -> None:
    """A chat's next request has the last one's documents and a page or two more, added since: they are made from
    the kept ones (only the new pages walked) and score as the same documents made from nothing."""
    postings, ids = _postings(documents[:1])
    lengths = [sum(d.values()) for d in documents]
    grown = postings.documents(ids, lengths[:1])
    end = 1
    for step in steps:
        for i in range(end, min(end + step, len(documents))):
            postings.add(f"p{i}", documents[i])
        postings.add(f"between{end}", {"dog": 1})  # a page of the thread that is not a document
        end = min(end + step, len(documents))
        grown = postings.documents([f"p{i}" for i in range(end)], lengths[:end])
        fresh, _ = _postings(documents[:end])
        made = fresh.documents([f"p{i}" for i in range(end)], lengths[:end])
        assert grown is not None and made is not None and grown.ids == made.ids
        assert _bm25(grown, words, 0.5) == _bm25(made, words, 0.5) == bm25(words, documents[:end], lengths[:end], neighbours=0.5)
        assert all(grown.positions(w) == made.positions(w) for w in VOCABULARY)
    assert postings.documents(["p0", "p0"], [1, 1]) is None  # a page twice, though the documents of "p0" are kept


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=50), st.sampled_from([0.0, 0.5, 0.25, 0.3]),
       st.floats(0.5, 2.0), st.floats(0.0, 1.0))
def test_length_norms_with_arrays_are_the_plain_functions_float_for_float(lengths: list[int], neighbours: float, k1: float, b: float) -> None:
    assert length_norms(lengths, neighbours, k1, b) == _length_norms(lengths, neighbours, k1, b)


def test_a_threads_postings_outlive_its_version_and_a_page_whose_counts_differ_is_indexed_again() -> None:
    """A version change (a container, a parent link, a summary rewritten) changes no page's term counts: the new
    version's record takes the postings and indexes only the pages it had not; counts that differ (nothing writes
    such) index this version's pages again."""
    at = datetime(2026, 6, 1, tzinfo=timezone.utc)

    def manifest(n: int, terms: dict[str, int], summary: str = "") -> Manifest:
        return Manifest(Page(f"{n:08x}", PageType.ORIGINAL, at, "", summary, (), 5), 3, 2, terms, sum(terms.values()))

    cache = PageCache()
    first = cache.known("thread", "v1")
    first.read("00000001", manifest(1, {"dog": 2}), None)
    first.read("00000002", manifest(2, {"cat": 1}), None)
    postings = first.postings
    second = cache.known("thread", "v2")
    assert second is not first and second.postings is postings and not second.manifests
    second.read("00000001", manifest(1, {"dog": 2}, "a later summary"), "0000000c")  # the same counts: kept
    second.read("00000003", manifest(3, {"dog": 1}), None)
    assert second.postings is postings and second.parents == {"00000001": "0000000c", "00000003": None}
    docs = second.postings.documents(["00000001", "00000003"], [2, 1])
    assert docs is not None and docs.frequency("dog") == 2 and second.own_postings().documents(["00000003"], [1]) is not None
    second.read("00000002", manifest(2, {"cat": 4}), None)  # counts that differ: this version's pages indexed anew
    assert second.postings is not postings and "00000002" in second.postings
    again = second.postings.documents(["00000001", "00000002", "00000003"], [2, 4, 1])
    assert again is not None and again.frequency("cat") == 1 and again.frequency("dog") == 2


def test_a_manifest_is_parsed_again_only_when_its_stored_json_changes() -> None:
    page = Page("a1a1a1a1a1", PageType.ORIGINAL, datetime(2024, 5, 1, tzinfo=timezone.utc), "", "a first summary", (), 40)
    raw = manifest_json(NewPage(page, 5, 9, {"camera": 2, "lens": 1}))
    cache = ManifestCache()
    first = cache.get("t", "a1a1a1a1a1", raw)
    assert cache.get("t", "a1a1a1a1a1", "".join(list(raw))) is first  # the same JSON, read again (another string)
    rewritten = manifest_json(NewPage(page.with_manifest("a later summary", ()), 5, 9, {"camera": 2, "lens": 1}))
    again = cache.get("t", "a1a1a1a1a1", rewritten)
    assert again is not first and again.page.summary == "a later summary"
    assert cache.get("t", "b2b2b2b2b2", raw) is not first  # another page's key
    # a term's string is one object in every manifest that counts it
    assert next(iter(first.terms)) is next(iter(again.terms))
