"""BM25 with arrays gives the core's BM25 (gateway.core.lexical.bm25) float for float, kept terms or new ones; a
ranking's first pages are a stable sort's."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gateway.core.lexical import bm25
from gateway.adapters.postings import Postings
from gateway.service.router import WINDOW_SHARE
from gateway.service.router_arrays import bm25_array, first_by_value

WORDS = [f"w{i}" for i in range(40)]


def test_the_array_sums_are_the_postings_sums_exactly() -> None:
    rng = random.Random(3)
    postings = Postings()
    ids = [f"p{i}" for i in range(300)]
    pages: list[dict[str, int]] = []
    for page in ids:
        counts: dict[str, int] = {}
        for word in rng.choices(WORDS, k=rng.randint(1, 12)):
            counts[word] = counts.get(word, 0) + 1
        postings.add(page, counts)
        pages.append(counts)
    lengths = [rng.randint(1, 40) for _ in ids]
    for query in (["w1", "w2", "w1"], ["w3", "w39", "nowhere"], ["w2", "w7"], [], ["nowhere"]):
        documents = postings.documents(ids, lengths)
        assert documents is not None
        expected = bm25(query, pages, lengths, neighbours=WINDOW_SHARE)
        assert bm25_array(documents, query, WINDOW_SHARE).tolist() == expected  # (new terms, then kept ones)
        assert bm25_array(documents, query, WINDOW_SHARE).tolist() == expected
    fewer = postings.documents(ids[:50], lengths[:50])  # other documents: nothing kept applies
    assert fewer is not None
    assert bm25_array(fewer, ["w1", "w2"], WINDOW_SHARE).tolist() == bm25(["w1", "w2"], pages[:50], lengths[:50], neighbours=WINDOW_SHARE)


@pytest.mark.parametrize("seed", range(5))
def test_the_first_by_value_are_a_stable_sorts_first(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 6, size=300).astype(np.float64) / 5  # many ties
    values[rng.integers(0, 300, size=20)] = -0.5
    ranking = np.argsort(-values, kind="stable")
    for k in (0, 1, 7, 50, 299, 300, 400):
        assert first_by_value(values, k).tolist() == ranking[:k].tolist()
