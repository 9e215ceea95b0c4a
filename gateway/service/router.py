"""The router: which of a thread's pages matter for this query, and in which view (DESIGN §2 steps 4–6).

1. Reconstruction (deterministic host code): a low-information query ("continue", "and then?",
   "it still fails") is joined with the previous block's summary before matching.
2. Broad match: the query is matched without the phrases that date it ("10 days ago": they name a date, not
   what was said). Every candidate is scored by BM25 over its stored term counts (with half of its
   neighbours' counts: the turns around a page are its context) and by the cosine
   between the query's embedding (of the query without the words most of the thread's pages
   contain) and the page's stored embedding (computed once, at ingestion), counted above the thread's median page's;
   the pages written on the days the query names ("10 days ago",
   `gateway.core.when`) are raised by the odds that those days single them out, and so are the pages in the
   form of the answer a question asks for (a duration for "how long have…", a word that places an event in time
   for "when did…"); the best `pcp.shortlist` pages are kept.
   A question about the user is matched on the user's own messages: their terms, and the better of their
   embedding and their best sentence's.
3. Relevance selection: with `pcp.router_model`, one call to that model decides Detail / Summary /
   leave out for the shortlist, within `pcp.router_timeout_ms`; without it, or when it times out,
   fails or answers something unusable, the budget decides every view from the broad-match scores. A request
   never fails because the router did.

The result is a relevance in [0, 1] per page (the budget's priority) and the views asked for.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, time as day_start, timedelta

import numpy as np
import numpy.typing as npt

from gateway.adapters.embedder import Embedder
from gateway.adapters.manifests import Manifest
from gateway.adapters.postings import Documents
from gateway.adapters.redis_store import RedisStore, ThreadKey
from gateway.adapters.upstream import Upstream
from gateway.config import PcpSettings
from gateway.core import View, iso_time, lead_text
from gateway.core.asked import query_source
from gateway.core.languages import LANGUAGES
from gateway.core.lexical import (
    bm25, drop_common_words, drop_terms, drop_time_phrases, is_low_information, stem, table_terms, terms, words,
)
from gateway.core.lru import Lru
from gateway.core.when import named_span
from gateway.core.worth import RELEVANCE_POWER
from gateway.service.router_arrays import ALIGNED_PER_THREAD, ALIGNED_THREADS, Aligned, Relevance, VectorCache, bm25_array, first_by_value
from gateway.errors import GatewayError

__all__ = ["Router", "Selection", "matched_on", "reconstruct_query"]

log = logging.getLogger("gateway.router")

# Measured on LoCoMo (bench/evidence_recall.py and a page-ranking sweep over all ten conversations): lexical
# 0.6 / semantic 0.4 ranks evidence slightly better than 0.4 / 0.6; BM25 alone or MiniLM alone is clearly worse
# than the blend (the rule audit of docs/benchmarks.md).
LEXICAL_WEIGHT = 0.6
SEMANTIC_WEIGHT = 0.4
WINDOW_SHARE = 0.5  # BM25 scores each page with half of its neighbours' words (the rule audit of docs/benchmarks.md)
LEFT_OUT = 0.05  # relevance of a page the router model chose to leave out
COMMON_SHARE = 0.5  # a word found in more than half of the thread's pages is left out of the embedded query
# the words with which a page tells of an event of its own day or of the day before (see `_dated`)
TELLING_TERMS = table_terms([w for language in LANGUAGES for w in language.telling])
# Questions that say what their answer looks like, and the words of the pages that look like it (see `_answer_form`).
# "How long have I been working in my current role?" asks how long a state has lasted until now, and is answered
# where the state was described, as a duration ("my 3 years and 9 months at the company"); a span that ended ("how
# long did it take?") is mostly told as its start and its end, on their days. In LoCoMo, 12 of the 14 evidence
# turns of "how long has/have" questions hold a unit of time, 6 of the 23 of "how long did" questions, 9% of all
# turns; in the LongMemEval_S development set, all 8 evidence messages of its four "how long have" questions, 15%
# of the users' messages. "When did I go to the support group?" is answered by a page's date only if the page says
# how what it tells stands to its day ("I went yesterday", "last Friday", "two weeks ago"): in LoCoMo, 198 of the
# 250 evidence turns of "when did/was/were" questions hold such a word, 11% of all turns.
# (Every language's: gateway.core.languages.)
DURATION_TERMS = table_terms([w for language in LANGUAGES for w in language.durations])
PLACING_TERMS = table_terms([w for language in LANGUAGES for w in language.placing])
ANSWER_FORMS = (
    (re.compile("|".join(language.asks_duration for language in LANGUAGES), re.IGNORECASE), DURATION_TERMS),
    (re.compile("|".join(language.asks_when for language in LANGUAGES), re.IGNORECASE), PLACING_TERMS),
)
EVENT_DAYS = timedelta(weeks=1)  # the longest span that names an event's days ("last week"); longer ones name periods


def reconstruct_query(query: str, previous_summary: str | None) -> str:
    """The text to match on: the query, joined with the previous block's summary when it says too little."""
    if previous_summary and is_low_information(query):
        return f"{query}\n{previous_summary}"
    return query


def matched_on(query: str, previous_summary: str | None) -> str:
    """What the query is matched on: without the phrases that date it, reconstructed when it says too little."""
    return reconstruct_query(drop_time_phrases(query), previous_summary)


@dataclass(frozen=True)
class Selection:
    relevance: Mapping[str, float]
    views: dict[str, View]
    match_text: str
    # router-model; heuristic; router-model-fallback (asked, but it failed or timed out); unranked (nothing to
    # choose: every page fits whole, or none can; gateway.service.context)
    decided_by: str
    # ``relevance``'s values in the order of the pages scored, where the router's own scores are the relevance
    scores: npt.NDArray[np.float64] | None = None


Positions = Sequence[int] | npt.NDArray[np.intp]  # pages by their position among the scored ones


def _dated(
    scores: npt.NDArray[np.float64], written: Sequence[float] | npt.NDArray[np.float64], query: str, now: datetime,
    telling: Callable[[], Positions] = list,
) -> npt.NDArray[np.float64]:
    """``scores`` with the pages written on the days ``query`` names ("10 days ago", "last Saturday":
    :func:`gateway.core.when.named_span`) raised by as much as those days single them out (:func:`_raised`): a
    question that dates what it asks is as likely to be answered by a page of those days as by any other.

    Of those days' pages, the ones that tell of an event of their day or the day before ("I just got a smoker
    today", "we went yesterday": ``telling``, the positions of the pages that say so) are the ones an event of the
    named day is told in; when there are any, they alone are the pages inside. A day that holds many sessions
    holds few such pages, so they are raised much more than the whole day would be. Only for the days of an event
    (:data:`EVENT_DAYS`): what was done "in the past month" is told on any day, in any words."""
    span = named_span(query, now)
    if span is None or not len(scores):
        return scores
    start, end = (datetime.combine(day, day_start(), now.tzinfo).timestamp() for day in (span[0], span[1] + timedelta(days=1)))
    times = np.asarray(written, dtype=np.float64)
    inside = (times >= start) & (times < end)
    if span[1] - span[0] <= EVENT_DAYS:
        told = _marked(len(scores), telling())
        if (inside & told).any():
            inside &= told
    return _raised(scores, inside)


def _answer_form(scores: npt.NDArray[np.float64], query: str, holding: Callable[[Sequence[str]], Positions]) -> npt.NDArray[np.float64]:
    """``scores`` with the pages in the form of the answer ``query`` asks for (:data:`ANSWER_FORMS`; ``holding``
    gives the positions of the pages that hold any of some words) raised as :func:`_dated` raises a named day's
    pages, by the odds that the form singles them out, whatever else those pages share with the question."""
    for asks, words in ANSWER_FORMS:  # no pages: nothing is inside, and _raised leaves the scores as they are
        if asks.search(query):
            scores = _raised(scores, _marked(len(scores), holding(words)))
    return scores


def _marked(count: int, positions: Positions) -> npt.NDArray[np.bool_]:
    """``count`` flags, true at ``positions``."""
    flags = np.zeros(count, dtype=bool)
    flags[np.asarray(positions, dtype=np.intp)] = True
    return flags


def _raised(scores: npt.NDArray[np.float64], inside: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """``scores`` with the pages ``inside`` raised by as much as they are singled out: if half of the time the answer
    is among them and otherwise anywhere, a page of theirs is (pages outside) / (pages inside) times likelier than
    one outside. That odds ratio multiplies what the budget makes of a page's relevance
    (:data:`gateway.core.worth.RELEVANCE_POWER`), hence its root here. When most pages are inside, nothing is raised;
    the scores are normalised to the best again."""
    within = int(inside.sum())
    if not within or within * 2 >= len(scores):
        return scores
    factor = ((len(scores) - within) / within) ** (1.0 / RELEVANCE_POWER)
    return _normalised(np.where(inside, scores * factor, scores))


def _above_typical(cosines: Sequence[float] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each page's cosine above the thread's median page's, over the best page's (:func:`_normalised`). Texts about
    different things are not at cosine 0: on a LoCoMo thread the median page is at ~0.16 from a question whose best
    page is at ~0.57. Normalised from 0, every page kept that share of the semantic weight, so a page that says
    nothing of the question ranked as if it said a little; BM25 has no such floor (a page without the words
    scores 0). From the median, half of the pages add nothing and the rest are spread over the whole scale."""
    values = np.asarray(cosines, dtype=np.float64)
    return _normalised(values - float(np.median(values))) if len(values) else values


def _normalised(scores: Sequence[float] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Scores over the best one, negatives as 0 (all 0 when none is positive)."""
    values = np.asarray(scores, dtype=np.float64)
    top = float(values.max()) if len(values) else 0.0
    return np.maximum(values, 0.0) / top if top > 0 else np.zeros(len(values))


class Router:
    """Scores a thread's candidate pages for one query and chooses their views."""

    def __init__(self, store: RedisStore, embedder: Embedder | None, upstream: Upstream, settings: PcpSettings) -> None:
        self._store = store
        self._embedder = embedder
        self._upstream = upstream
        self._settings = settings
        self.vectors = VectorCache()
        # per thread, its last request's pages and their vectors in that order (pages and vectors never change)
        self._aligned: Lru[str, list[Aligned]] = Lru(ALIGNED_THREADS)

    async def _semantic(self, thread: ThreadKey, match_text: str, ids: Sequence[str], user: bool = False) -> npt.NDArray[np.float64]:
        """Cosine of the query with each page's embedding (with ``user``, the embedding of the user's own messages,
        or the best of it and their sentences')."""
        if self._embedder is None or not ids:
            return np.zeros(len(ids))
        scope = f"{thread.tenant}:{thread.thread}" + (" user" if user else "")
        key = tuple(ids)
        recent = self._aligned.get(scope) or []
        last = next((a for a in recent if a.ids == key), None)
        grown = next((a for a in recent if len(a.ids) < len(key) and key[: len(a.ids)] == a.ids), None)
        if last is not None:  # the same pages as one of the thread's last requests
            aligned = last
        else:
            wanted = key[len(grown.ids) :] if grown is not None else key  # (a grown pool: only its new pages)
            found, missing = self.vectors.get_many(scope, wanted)
            if missing:
                fetched = await self._store.vectors(thread, missing, user, self._embedder.model)  # its model's only
                found.update(self.vectors.put_many(scope, fetched))
            vectors = [found.get(i) for i in wanted]
            aligned = grown.extended(key, vectors) if grown is not None else Aligned.of(key, vectors)
            if len(found) == len(wanted):  # a page without a vector is asked for again next time
                self._aligned.put(scope, [aligned, *recent][:ALIGNED_PER_THREAD])
        # the embedder keeps what it computed by text: an agent's tool rounds, a retry or a regenerated answer ask
        # the same live message again, and the next request stores it with its exchange
        query = (await self._embedder.embed([match_text]))[0]
        return aligned.cosines(query)

    async def select(
        self,
        thread: ThreadKey,
        query: str,
        previous_summary: str | None,
        roots: Sequence[Manifest],
        documents: Documents | None = None,
        own: Callable[[], Documents | None] | None = None,
        now: datetime | None = None,
        names: Collection[str] = (),
        *,
        columns: tuple[Sequence[str], npt.NDArray[np.float64], Mapping[str, int]],
    ) -> Selection:
        """Relevance and views for ``roots`` (in conversation order); ``documents``, the same pages over the
        thread's postings, gives the lexical statistics without looking at every page (the same numbers), and
        ``own`` gives the same for the user's own messages, on which a question about the user is matched;
        ``now``, the request's time, dates the days a query names ("10 days ago"); ``names``, the participants it
        names (`gateway.core.asked.participants`); ``columns``, the pages' ids, times (`Manifest.written_ts`) and each
        id's position, as the caller keeps them with the thread's version (gateway.service.view_choice)."""
        text = matched_on(query, previous_summary)
        ids, written, at = columns
        counts = [m.terms for m in roots] if documents is None else []  # (only without the postings)
        query_terms = terms(text)
        about_user = query_source(text) == "user"
        mine: Documents | None = None
        if about_user:
            # what the user said about themselves is in their messages; a long reply that repeats the question's
            # words (advice on lenses) outscores the one line that says which lens, and only by its length
            mine = own() if own is not None else None
            lexical = _normalised(
                bm25_array(mine, query_terms, WINDOW_SHARE) if mine is not None
                else bm25(query_terms, [m.own_terms for m in roots], [m.own_length for m in roots], neighbours=WINDOW_SHARE)
            )
        elif documents is not None:
            lexical = _normalised(bm25_array(documents, query_terms, WINDOW_SHARE))
        else:
            lexical = _normalised(bm25(query_terms, counts, [m.length for m in roots], neighbours=WINDOW_SHARE))
        common = (documents.drop_common_words(text, COMMON_SHARE) if documents is not None
                  else drop_common_words(text, counts, COMMON_SHARE))
        # the embedding has no IDF: words in most pages (the participants' names) only pull it towards pages that
        # mention them (on LoCoMo, leaving them out adds ~0.01 recall at 2k and 4k); and a participant's name says
        # whose words answer (gateway.service.view_choice), not what they said: "what are Fahim's hobbies?" is
        # embedded as "what are hobbies?" (a label is left out of every page's embedding too; BM25 still finds
        # the pages that say the name)
        if names:
            named = {stem(word) for word in names}
            unnamed = drop_terms(common, named.__contains__)
            common = unnamed if words(unnamed) else common
        semantic = _above_typical(await self._semantic(thread, common, ids, about_user))
        scores = _normalised(LEXICAL_WEIGHT * lexical + SEMANTIC_WEIGHT * semantic)
        told = mine if about_user else documents

        def holding(words: Sequence[str]) -> Positions:
            """The positions of the pages (the user's own messages, for a question about the user) that hold any of
            ``words`` (from the postings' arrays as they are)."""
            if told is not None:
                return np.concatenate([told.occurrences(term)[0] for term in words]) if words else []
            return [i for i, m in enumerate(roots) if any(t in (m.own_terms if about_user else m.terms) for t in words)]

        if now is not None:
            scores = _dated(scores, written, query, now, lambda: holding(TELLING_TERMS))
        scores = _answer_form(scores, query, holding)
        relevance = Relevance(at, scores)
        # best first, ties in conversation order (a stable sort on the negated scores, as sorted() would)
        shortlist = [ids[i] for i in first_by_value(scores, self._settings.shortlist).tolist()]
        decided = await self._ask_router(text, shortlist, roots, relevance)
        if decided is not None:
            return Selection(decided[0], decided[1], text, "router-model")
        asked = self._settings.router_model is not None and bool(shortlist)
        # without a router model the budget alone chooses every page's view: Detail picks by score changed no
        # question of any shape (the rule audit of docs/benchmarks.md)
        return Selection(relevance, {}, text, "router-model-fallback" if asked else "heuristic", scores)

    async def _ask_router(
        self, match_text: str, shortlist: Sequence[str], roots: Sequence[Manifest], relevance: Mapping[str, float]
    ) -> tuple[dict[str, float], dict[str, View]] | None:
        model = self._settings.router_model
        if model is None or not shortlist:
            return None
        listed = set(shortlist)
        manifests = {m.page.id: m for m in roots if m.page.id in listed}
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._settings.router_timeout_ms / 1000):
                body = await self._upstream.complete(model, _router_request(match_text, shortlist, manifests))
            choice = parse_router_answer(body, set(shortlist))
        except TimeoutError:
            log.warning("router model %s timed out after %d ms; heuristic used", model, self._settings.router_timeout_ms)
            return None
        except GatewayError as exc:
            log.warning("router model %s failed (%s); heuristic used", model, exc.message)
            return None
        if choice is None:
            log.warning("router model %s gave an unusable answer; heuristic used", model)
            return None
        detail, summary = choice
        log.debug("router model chose %d detail, %d summary in %.0f ms", len(detail), len(summary), (time.perf_counter() - started) * 1000)
        chosen = dict(relevance)
        for page_id in shortlist:
            if page_id in detail:
                chosen[page_id] = 1.0
            elif page_id in summary:
                chosen[page_id] = max(relevance[page_id], 0.5)
            else:
                chosen[page_id] = min(relevance[page_id], LEFT_OUT)
        return chosen, {page_id: View.DETAIL for page_id in shortlist if page_id in detail}


_ROUTER_PROMPT = """You select memory pages for an assistant. Given the user's query and numbered pages from \
earlier in the conversation (id, date, summary), decide which pages the assistant needs: "detail" = it needs the \
full text, "summary" = the summary is enough context, any page not listed is left out. Choose only pages that \
really bear on the query. Answer with one JSON object and nothing else, like \
{"detail": ["a1b2c3d4e5"], "summary": ["f6e5d4c3b2"]}."""


def _router_request(match_text: str, shortlist: Sequence[str], manifests: Mapping[str, Manifest]) -> dict[str, object]:
    lines = [
        f"- id={i} date={iso_time(manifests[i].page.timestamp)[:10]}: {lead_text(manifests[i].page.summary, 300)}"
        for i in shortlist
    ]
    user = f"Query: {match_text}\n\nPages:\n" + "\n".join(lines)
    return {
        "messages": [{"role": "system", "content": _ROUTER_PROMPT}, {"role": "user", "content": user}],
        "temperature": 0,
        "max_tokens": 400,
    }


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_router_answer(body: Mapping[str, object], known: set[str]) -> tuple[set[str], set[str]] | None:
    """The (detail, summary) ids of a router answer, or None when it is not usable."""
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    match = _JSON_OBJECT.search(text) if isinstance(text, str) else None
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    picked: list[set[str]] = []
    for key in ("detail", "summary"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return None
        picked.append({v.strip().lower() for v in value} & known)
    detail, summary = picked
    if not detail and not summary and (data.get("detail") or data.get("summary")):
        return None  # it named pages, but none of ours: it did not understand
    return detail, summary - detail
