"""A first, honest relevance signal: lexical overlap between the query and a page.

Each page is scored by the share of the query's content words that appear in the page's
clusters or summary, with clusters counting double. It is deliberately simple; the
embedding + router stages replace it in their own issue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gateway.core import Page

__all__ = ["query_terms", "lexical_relevance"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    """a an and are as at be but by can could did do does for from had has have he her him his how i if in
    into is it its me my no not of on or our she so that the their them then there these they this to
    up us was we were what when where which who why will with would you your about any all also just
    like more some tell than too very yes ok okay please thanks""".split()
)


def query_terms(text: str) -> frozenset[str]:
    """The lower-cased content words of `text`."""
    return frozenset(w for w in (m.lower() for m in _WORD.findall(text)) if len(w) > 1 and w not in _STOP)


def lexical_relevance(terms: frozenset[str], pages: Iterable[Page]) -> dict[str, float]:
    """Relevance in [0, 1] of each page to a query given as `query_terms`."""
    scores: dict[str, float] = {}
    for page in pages:
        if not terms:
            scores[page.id] = 0.0
            continue
        clusters = query_terms(" ".join(page.clusters))
        summary = query_terms(page.summary)
        hits = sum(2.0 if term in clusters else 1.0 if term in summary else 0.0 for term in terms)
        scores[page.id] = min(1.0, hits / (2.0 * len(terms)) * 1.5)
    return scores
