"""Lexical evidence: term counts computed once per page, and BM25 over them at query time.

A term is a content word reduced to its Snowball (Porter 2) English stem, so "painted", "painting" and
"paints" meet on "paint" (on LoCoMo, stemming lifts evidence recall by about 0.02 at every budget). A page's
term counts are computed when it is stored, so scoring a query against a thread only looks counts up: the
per-request work is proportional to the query's words times the pages considered, never to the text of the
pages. :data:`LEXICON` versions the terms; counts stored under an older version are re-stemmed when read
(:func:`restem`).
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "LEXICON",
    "STOPWORDS",
    "bm25",
    "drop_common_words",
    "drop_time_phrases",
    "idf_weights",
    "is_low_information",
    "restem",
    "stem",
    "term_counts",
    "terms",
    "words",
]

LEXICON = 3  # 1: lower-cased content words; 2: their Snowball English stems; 3: irregular forms as their base word

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
    error works work doesn't does not why how yes no ok okay please keep going do same fix try sure great good
    cool nice perfect fine right alright got it gotcha understood sounds makes sense thx ty""".split()
)


def words(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (stopwords and 1-character tokens removed), in order."""
    found = (w.lower().replace("’", "'") for w in _WORD.findall(text))
    return [w for w in found if len(w) > 1 and w not in STOPWORDS]


# Irregular forms Snowball leaves apart from their base word. A question asks "what did I buy?", "how much did
# I spend?", "where did she go?" in the base form, and the conversation said it in the past: "I bought",
# "I spent", "she went". Regular forms meet by stemming ("painted" -> "paint"); these only by this table. Forms
# that are mostly other words in chat ("a bit", "the ground", "a rose", "bound to") are left out.
_IRREGULAR_FORMS = """arise arose arisen|awake awoke awoken|bear bore borne born|beat beaten|become became|begin began begun|
bend bent|bite bitten|bleed bled|blow blew blown|break broke broken|breed bred|
bring brought|build built|burn burnt|buy bought|catch caught|choose chose chosen|cling clung|come came|
creep crept|deal dealt|dig dug|draw drew drawn|dream dreamt|drink drank drunk|drive drove driven|
eat ate eaten|fall fell fallen|feed fed|feel felt|fight fought|find found|flee fled|fly flew flown|
forbid forbade forbidden|forget forgot forgotten|forgive forgave forgiven|freeze froze frozen|get got gotten|
give gave given|go went gone|grow grew grown|hang hung|hear heard|hide hid hidden|
hold held|keep kept|kneel knelt|know knew known|lay laid|lead led|lean leant|leap leapt|learn learnt|
leave left|lend lent|light lit|lose lost|make made|mean meant|meet met|pay paid|
ride rode ridden|ring rang rung|rise risen|run ran|say said|see saw seen|seek sought|sell sold|
send sent|sew sewn|shake shook shaken|shine shone|shoot shot|show shown|shrink shrank shrunk|
sing sang sung|sink sank sunk|sit sat|sleep slept|slide slid|speak spoke spoken|speed sped|spend spent|
spin spun|spit spat|spring sprang sprung|stand stood|steal stole stolen|stick stuck|
sting stung|stink stank stunk|strike struck|swear swore sworn|sweep swept|swim swam swum|swing swung|
take took taken|teach taught|tear tore torn|tell told|think thought|throw threw thrown|understand understood|
wake woke woken|wear wore worn|weave wove woven|weep wept|win won|write wrote written|
child children|foot feet|man men|mouse mice|person people|tooth teeth|woman women"""
_BASE = {
    form: group.split()[0]
    for group in _IRREGULAR_FORMS.replace("\n", " ").split("|")
    for form in group.split()[1:]
}

_stemmers = threading.local()  # a Snowball stemmer keeps state between calls: one per thread


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The Snowball English stem of a lower-case ``word`` (of its base word, for an irregular form)."""
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(_BASE.get(word, word)))


def terms(text: str) -> list[str]:
    """The stems of ``text``'s content words, in order: what is counted and matched."""
    return [stem(w) for w in words(text)]


def term_counts(text: str) -> dict[str, int]:
    """How often each term occurs in ``text``."""
    return dict(Counter(terms(text)))


def restem(counts: Mapping[str, int], lexicon: int = 1) -> dict[str, int]:
    """Counts stored under an older ``lexicon`` as counts of terms: lexicon-1 words are stemmed; lexicon-2
    stems are left as they are, but an irregular form's (Snowball leaves "bought" as it is) becomes its base
    word's."""
    out: Counter[str] = Counter()
    for word, count in counts.items():
        out[stem(word) if lexicon < 2 or word in _BASE else word] += count
    return dict(out)


def drop_common_words(text: str, documents: Sequence[Mapping[str, int]], share: float) -> str:
    """``text`` without the content words whose term occurs in more than ``share`` of ``documents``.

    Such words (in a chat, mostly the participants' names) tell no document apart. BM25 weighs them down by
    itself; an embedding has no such weighting, so the text a query is embedded from leaves them out. When
    nothing informative would remain, ``text`` is returned unchanged. O(documents x distinct query terms).
    """
    n = len(documents)
    wanted = set(terms(text))
    common = {t for t in wanted if sum(1 for counts in documents if t in counts) > share * n} if n else set()
    if not common:
        return text

    def keep(match: re.Match[str]) -> str:
        word = match.group(0).lower().replace("’", "'")
        return "" if len(word) > 1 and word not in STOPWORDS and stem(word) in common else match.group(0)

    reduced = " ".join(_WORD.sub(keep, text).split())
    return reduced if words(reduced) else text


_COUNT = r"(?:\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a couple of|a few|few|several|many)"
_UNIT = r"(?:days?|weeks?|months?|years?)"
_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_TIME_PHRASE = re.compile(
    rf"\b(?:(?:in|over|during|within) )?(?:the )?(?:past|last) (?:{_COUNT} )?{_UNIT}\b"  # in the past month, the last 3 weeks
    rf"|\b{_COUNT} {_UNIT} (?:ago|back|earlier)\b"  # two weeks ago, how many days ago
    rf"|\blast (?:week|weekend|month|year|night|{_DAYS})\b|\bthis (?:week|month|year)\b"
    r"|\b(?:the day before )?yesterday\b",
    re.IGNORECASE,
)
_SPACE_BEFORE_STOP = re.compile(r"\s+([?.!,;:])")


def drop_time_phrases(text: str) -> str:
    """``text`` without the phrases that place what it asks in time ("two weeks ago", "last Saturday", "in the past
    month"). Their words name a date, not what was said: matched as words, "week" and "ago" pull towards every
    message that mentions a week ("meal plans for the upcoming week"), and the message that holds the answer says
    "today" or nothing about time. When nothing informative would remain, ``text`` is returned unchanged."""
    reduced = _SPACE_BEFORE_STOP.sub(r"\1", " ".join(_TIME_PHRASE.sub(" ", text).split()))
    return reduced if reduced != text and words(reduced) else text


def idf_weights(query: Sequence[str], documents: Sequence[Mapping[str, int]]) -> dict[str, float]:
    """Each distinct query term's BM25 inverse document frequency over ``documents`` (terms no document
    contains weigh nothing: they tell no page apart). O(documents x distinct query terms)."""
    n = len(documents)
    weights: dict[str, float] = {}
    for term in dict.fromkeys(query):
        frequency = sum(1 for counts in documents if term in counts)
        if frequency:
            weights[term] = math.log(1.0 + (n - frequency + 0.5) / (frequency + 0.5))
    return weights


def is_low_information(text: str) -> bool:
    """Whether a text carries no content of its own ("continue", "and then?", "it still fails", "great, thanks"):
    as a query it is too little to match on; as a user message it stays in the topic it comes in."""
    tokens = (w.lower().replace("’", "'") for w in _WORD.findall(text))
    return not any(t not in _LOW_INFORMATION and t not in STOPWORDS for t in tokens)


def bm25(
    query: Sequence[str],
    documents: Sequence[Mapping[str, int]],
    lengths: Sequence[int],
    *,
    k1: float = 1.5,
    b: float = 0.75,
    neighbours: float = 0.0,
) -> list[float]:
    """Okapi BM25 of ``query`` (terms, repeats allowed) against each document's term counts.

    With ``neighbours`` = w > 0, ``documents`` are taken to be in conversation order and each is scored as a
    window: its own counts and length plus w times those of the documents just before and after it. A page
    whose surroundings cover more of the query then ranks higher (on LoCoMo, w = 0.5 lifts evidence recall by
    0.01-0.03). The cost stays O(documents x query terms), as for plain BM25.
    """
    n = len(documents)
    if n == 0 or not query:
        return [0.0] * n
    norms = _length_norms(lengths, neighbours, k1, b)
    scores = [0.0] * n
    for term in dict.fromkeys(query):
        tf = _windowed([float(counts.get(term, 0)) for counts in documents], neighbours)
        frequency = sum(1 for f in tf if f)
        if not frequency:
            continue
        weight = math.log(1.0 + (n - frequency + 0.5) / (frequency + 0.5))
        for i, f in enumerate(tf):
            if f:
                scores[i] += weight * f * (k1 + 1.0) / (f + norms[i])
    return scores


def _length_norms(lengths: Sequence[int], neighbours: float, k1: float, b: float) -> list[float]:
    """BM25's length term of each document, ``k1 * (1 - b + b * length / average length)``, over the windowed
    lengths (``neighbours``: see :func:`bm25`)."""
    windowed = _windowed([float(length) for length in lengths], neighbours)
    average = (sum(windowed) / len(windowed)) or 1.0
    return [k1 * (1.0 - b + b * length / average) for length in windowed]


def _windowed(values: list[float], share: float) -> list[float]:
    """Each value plus ``share`` times its neighbours' (none at the ends)."""
    if not share:
        return values
    last = len(values) - 1
    return [v + share * ((values[i - 1] if i else 0.0) + (values[i + 1] if i < last else 0.0)) for i, v in enumerate(values)]
