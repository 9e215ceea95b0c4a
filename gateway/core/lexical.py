"""Lexical evidence: term counts computed once per page, and BM25 over them at query time.

A term is a content word reduced to its Snowball (Porter 2) English stem, so "painted", "painting" and
"paints" meet on "paint" (on LoCoMo, stemming lifts evidence recall by about 0.02 at every budget). A word of a
script written without spaces (Chinese, Japanese, Korean, Thai) is one cut from its run by
:mod:`gateway.core.scripts` (Chinese by the installed segmenter, the rest into character bigrams), as it is.
Stopwords and the replies with no content of their own are every language's of :mod:`gateway.core.languages`. A
page's term counts are computed when it is stored, so scoring a query against a thread only looks counts up: the
per-request work is proportional to the query's words times the pages considered, never to the text of the
pages. :data:`LEXICON` versions the terms; counts stored under an older version are re-derived when read
(:func:`restem`).
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped,unused-ignore]

from gateway.core.languages import ENGLISH, LANGUAGES
from gateway.core.scripts import CJK_PUNCTUATION, HAN, KANA, MARKS, UNSEGMENTED, cut_run, is_japanese

__all__ = [
    "LEXICON",
    "STOPWORDS",
    "bm25",
    "drop_common_words",
    "drop_terms",
    "drop_time_phrases",
    "idf_weights",
    "is_low_information",
    "restem",
    "stem",
    "table_terms",
    "term_counts",
    "terms",
    "words",
]

# 1: lower-cased content words; 2: their Snowball English stems; 3: irregular forms as their base word; 4: words of
# scripts written without spaces cut from their runs (before, a run between two punctuation marks was one word)
LEXICON = 4
_CUT = 4  # the lexicon from which unsegmented runs are cut

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# a text holding any of these is read with _TOKEN (else _WORD reads it, as before: the same words either way)
_SPECIAL = re.compile(f"[{UNSEGMENTED}{MARKS}]")
_LETTERS = rf"(?:[^\W_{UNSEGMENTED}][{MARKS}]*)+"
_TOKEN = re.compile(rf"(?P<run>[{UNSEGMENTED}][{UNSEGMENTED}{MARKS}]*)|(?P<word>{_LETTERS}(?:['’]{_LETTERS})?)")
STOPWORDS = ENGLISH.stopwords
_STOPPED = frozenset().union(*(language.stopwords for language in LANGUAGES))
_LOW_INFORMATION = frozenset().union(*(language.low_information for language in LANGUAGES))
_SAID = _STOPPED | _LOW_INFORMATION  # the words of a reply with no content of its own
_LONGEST_SAID = max(len(w) for w in _SAID)


def _word(word: str) -> str | None:
    """A spaced word as matched: lower-cased, without stopwords and 1-character tokens."""
    word = word.lower().replace("’", "'")
    return word if len(word) > 1 and word not in STOPWORDS else None


def _run_words(words: list[str]) -> list[str]:
    """An unsegmented run's words as matched: without stopwords, and without bigrams of two stopwords."""
    return [w for w in words if w not in _STOPPED and not (len(w) == 2 and w[0] in _STOPPED and w[1] in _STOPPED)]


def words(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (stopwords and 1-character tokens removed; a word cut from a run of
    an unsegmented script may be one character), in order."""
    if text.isascii() or _SPECIAL.search(text) is None:
        found = (w.lower().replace("’", "'") for w in _WORD.findall(text))
        return [w for w in found if len(w) > 1 and w not in STOPWORDS]
    japanese = is_japanese(text)
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        if match.lastgroup == "word":
            if (word := _word(match.group(0))) is not None:
                out.append(word)
        else:
            for _, cut in cut_run(match.group(0), japanese):
                out.extend(_run_words(cut))
    return out


def drop_terms(text: str, dropped: Callable[[str], bool]) -> str:
    """``text`` without its content words whose term is ``dropped``, spaces collapsed (a word cut from an
    unsegmented run goes alone; a run cut into bigrams goes whole when every bigram of it is dropped)."""
    if text.isascii() or _SPECIAL.search(text) is None:

        def keep(match: re.Match[str]) -> str:
            word = _word(match.group(0))
            return "" if word is not None and dropped(stem(word)) else match.group(0)

        return " ".join(_WORD.sub(keep, text).split())
    japanese = is_japanese(text)

    def kept(match: re.Match[str]) -> str:
        if match.lastgroup == "word":
            word = _word(match.group(0))
            return "" if word is not None and dropped(stem(word)) else match.group(0)
        pieces = cut_run(match.group(0), japanese)
        return "".join(piece for piece, cut in pieces if not ((found := _run_words(cut)) and all(dropped(w) for w in found)))

    return " ".join(_TOKEN.sub(kept, text).split())


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


def table_terms(words: Sequence[str]) -> tuple[str, ...]:
    """The terms of a table's words (:mod:`gateway.core.languages`), each taken as one word: a spaced word's stem,
    an unsegmented word as it is (each is one word of its segmenter's dictionary)."""
    return tuple(stem(w.lower()) if _SPECIAL.search(w) is None else w for w in words)


def restem(counts: Mapping[str, int], lexicon: int = 1) -> dict[str, int]:
    """Counts stored under an older ``lexicon`` as counts of terms: lexicon-1 words are stemmed; lexicon-2
    stems are left as they are, but an irregular form's (Snowball leaves "bought" as it is) becomes its base
    word's; before lexicon 4, a word holding a run of an unsegmented script (a whole Chinese clause) is cut into
    its terms, each with the word's count."""
    out: Counter[str] = Counter()
    for word, count in counts.items():
        if lexicon < _CUT and _SPECIAL.search(word) is not None:
            for term in terms(word):
                out[term] += count
        else:
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
    reduced = drop_terms(text, common.__contains__)
    return reduced if words(reduced) else text


# each language's phrases, with the characters a text must hold for them to apply (None: any text)
_TIME_PHRASES = tuple((re.compile(language.script) if language.script else None, re.compile(language.time_phrases, re.IGNORECASE))
                      for language in LANGUAGES)
_SPACE_BEFORE_STOP = re.compile(r"\s+([?.!,;:])")
# a space left where a phrase was taken out of text written without spaces
_SPACE_IN_RUN = re.compile(rf"(?<=[{HAN}{KANA}{CJK_PUNCTUATION}]) | (?=[{HAN}{KANA}{CJK_PUNCTUATION}])")


def drop_time_phrases(text: str) -> str:
    """``text`` without the phrases that place what it asks in time ("two weeks ago", "last Saturday", "in the past
    month", 三天前, 上周五; every language's, :mod:`gateway.core.languages`). Their words name a date, not what was
    said: matched as words, "week" and "ago" pull towards every message that mentions a week ("meal plans for the
    upcoming week"), and the message that holds the answer says "today" or nothing about time. When nothing
    informative would remain, ``text`` is returned unchanged."""
    reduced, found, ascii = text, False, text.isascii()
    for script, phrases in _TIME_PHRASES:
        if script is None or (not ascii and script.search(text) is not None):
            reduced, count = phrases.subn(" ", reduced)
            found = found or count > 0
    reduced = " ".join(reduced.split())
    if found and not reduced.isascii() and _SPECIAL.search(reduced) is not None:
        reduced = _SPACE_IN_RUN.sub("", reduced)
    reduced = _SPACE_BEFORE_STOP.sub(r"\1", reduced)
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


def _said_only(run: str) -> bool:
    """Whether an unsegmented run is made of words with no content of their own, end to end (found in the tables
    alone, whatever segmenter is installed: "还是不行" is 还是 + 不行)."""
    reached = [True] + [False] * len(run)
    for end in range(1, len(run) + 1):
        reached[end] = any(reached[start] and run[start:end] in _SAID for start in range(max(0, end - _LONGEST_SAID), end))
    return reached[-1]


def is_low_information(text: str) -> bool:
    """Whether a text carries no content of its own ("continue", "and then?", "it still fails", "great, thanks",
    然后呢, 还是不行): as a query it is too little to match on; as a user message it stays in the topic it comes
    in."""
    if text.isascii() or _SPECIAL.search(text) is None:
        tokens = (w.lower().replace("’", "'") for w in _WORD.findall(text))
        return not any(t not in _SAID for t in tokens)
    for match in _TOKEN.finditer(text):
        if match.lastgroup == "word":
            if match.group(0).lower().replace("’", "'") not in _SAID:
                return False
        elif not _said_only(match.group(0)):
            return False
    return True


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
