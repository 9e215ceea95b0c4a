"""Lexical evidence: word counts computed once per page, and BM25 over them at query time.

A page's term counts are computed when it is stored, so scoring a query against a thread
only looks counts up: the per-request work is proportional to the query's words times
the pages considered, never to the text of the pages.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

__all__ = ["STOPWORDS", "words", "term_counts", "bm25", "is_low_information"]

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers him his how i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours out over own same she should so some such than that the their theirs them then
    there these they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself user assistant tool ok okay yes yeah oh really please thanks
    thank s t don didn doesn isn wasn aren weren i'm it's that's""".split()
)
_LOW_INFORMATION = frozenset(
    """continue go on next then and more again what else so still it that this fails failed broke broken
    error works work doesn't does not why how yes no ok okay please keep going do same fix try""".split()
)


def words(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (stopwords and 1-character tokens removed), in order."""
    found = (w.lower().replace("’", "'") for w in _WORD.findall(text))
    return [w for w in found if len(w) > 1 and w not in STOPWORDS]


def term_counts(text: str) -> dict[str, int]:
    """How often each content word occurs in ``text``."""
    return dict(Counter(words(text)))


def is_low_information(text: str) -> bool:
    """Whether a query carries too little to match on ("continue", "and then?", "it still fails")."""
    tokens = (w.lower().replace("’", "'") for w in _WORD.findall(text))
    return not any(t not in _LOW_INFORMATION and t not in STOPWORDS for t in tokens)


def bm25(
    query: Sequence[str],
    documents: Sequence[Mapping[str, int]],
    lengths: Sequence[int],
    *,
    k1: float = 1.5,
    b: float = 0.75,
) -> list[float]:
    """Okapi BM25 of ``query`` (terms, repeats allowed) against each document's term counts."""
    n = len(documents)
    if n == 0 or not query:
        return [0.0] * n
    average = (sum(lengths) / n) or 1.0
    terms = list(dict.fromkeys(query))
    frequency = {t: sum(1 for d in documents if t in d) for t in terms}
    weight = {t: math.log(1.0 + (n - frequency[t] + 0.5) / (frequency[t] + 0.5)) for t in terms}
    scores = []
    for counts, length in zip(documents, lengths):
        norm = k1 * (1.0 - b + b * length / average)
        score = 0.0
        for term in terms:
            tf = counts.get(term)
            if tf:
                score += weight[term] * tf * (k1 + 1.0) / (tf + norm)
        scores.append(score)
    return scores
