"""The views of one request's pages: which pages matter for its query (the router, or none when every page fits
whole), what each is offered (its excerpts, Detail), and the budget's choice among them, checked against the
real rendering (DESIGN §2 steps 4–8; gateway.service.context lays out the request and assembles the result).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from gateway.adapters.manifests import Manifest
from gateway.adapters.postings import Documents
from gateway.adapters.redis_store import RedisStore, ThreadKey
from gateway.adapters.snapshot import ThreadSnapshot
from gateway.config import PcpSettings
from gateway.core import Candidate, ContextWindowExceeded, FitResult, LineHolds, Page, PageTree, TokenCounter, View, ViewState, fit_rendered, view_of
from gateway.core.asked import NAMED, named_side, participants, query_source
from gateway.core.lexical import idf_weights, terms
from gateway.core.outside import Outside, PoolExceeded
from gateway.errors import ContextLengthExceeded
from gateway.service.candidate_pool import POOL_SPARES, candidate_of, candidate_pool, kept_table, showable
from gateway.service.page_excerpts import Names, Offer, PageExcerpts
from gateway.service.page_tree import kept
from gateway.service.rendering import Rendering
from gateway.service.router import Router, Selection, matched_on
from gateway.service.router_arrays import Relevance, first_by_value

__all__ = ["RECENT_SHARE", "Fitted", "Layout", "ViewChoice"]

# The exchanges before the last stay verbatim messages while the recent ones take at most this share of the
# budget; longer ones (a burst of messages, a long code reply) are paged like the rest. The last stays whole in
# its sitting (ContextBuilder._same_sitting); after a pause it is held to the same share. The map entries a request
# offers (ViewChoice._map) take at most the same share.
RECENT_SHARE = 0.25
CONTAINER_SHARE = 0.25  # a laid-open container's relevance: this share of its best page's
LEFTOVER = 1e-6  # the least relevance a page can have and still be shown: it takes only what the others leave


@dataclass(frozen=True)
class Layout:
    """What one request's fit works on, once its history is stored and split (`ContextBuilder.build`)."""

    thread: ThreadKey
    snapshot: ThreadSnapshot
    query: str  # the live turn's text as it is matched (its line labels left out: gateway.service.ingest.matched_query)
    ids: Sequence[str]
    flow: PageTree  # the tree the budget and the rendering work on: containers the model has not opened laid open
    folded: Mapping[str, tuple[str, ...]]  # those containers' pages
    manifests: Mapping[str, Manifest]
    state: ViewState  # the thread's zoom state
    now: datetime
    counter: TokenCounter
    rendering: Rendering
    fixed: int  # the context without a page
    ceiling: int  # what the request may fill up to (PagedContext.ceiling)
    limit: int  # the ceiling, within the model's window
    window: int | None
    background_overhead: int
    flow_overhead: int
    seen: Mapping[str, datetime]  # when the model last saw each page
    hopeless: bool  # no page can be shown
    # the exchange the live turn follows in its sitting, paged because it could not stay whole: whatever it matches,
    # its question is shown before any page is weighed, and as much more of its opening as the matching pages leave
    follows: str | None = None
    # who the line labels of the last exchanges name (gateway.service.ingest.speakers_of), asked only of a question
    # that names someone
    speakers: Callable[[], Mapping[str, str]] = dict
    sides: Names = ()  # the names its sides are shown by, in a chat between two people (ThreadSnapshot.side_names)


def _topics(folded: Mapping[str, tuple[str, ...]], manifests: Mapping[str, Manifest], flow: PageTree) -> dict[str, str]:
    """Each laid-open page of a topic, and the topic (a container of exchanges): a page shown names it. A chapter's
    pages name only their own topics, not the chapter's others: none is listed for a chapter (a container of
    containers, ``flow.consolidated`` listing every container)."""
    return {
        p: c for c, inner in folded.items() if flow.consolidated.isdisjoint(manifests[c].page.source_ids) for p in inner
    }


@dataclass(frozen=True)
class Fitted:
    """The budget's choice, and how it was reached."""

    fit: FitResult
    candidates: list[Candidate]  # the pages the fit weighed as candidates
    router_ms: float  # the time the pages' relevance took
    selected_by: str  # gateway.service.router.Selection.decided_by


class ViewChoice:
    """Chooses the views of a request's pages (see the module docstring)."""

    def __init__(self, store: RedisStore, router: Router, settings: PcpSettings, excerpts: PageExcerpts) -> None:
        self._store = store
        self._router = router
        self._settings = settings
        self._excerpts = excerpts

    async def fit(self, layout: Layout, whole: bool) -> Fitted:
        """The budget's choice of views for ``layout``'s pages: ranked by the router, or (``whole``) fitted as equals."""
        thread, manifests, flow, folded, state, rendering = (
            layout.thread, layout.manifests, layout.flow, layout.folded, layout.state, layout.rendering
        )
        started = time.perf_counter()
        relevance, requested, match_text, documents, selected_by, scored_ids, named = await self._select(
            thread, layout.snapshot, layout.query, layout.ids, flow, folded, manifests, state, layout.now, whole, layout.follows,
            layout.speakers,
        )
        router_ms = (time.perf_counter() - started) * 1000
        wanted = rendering.wanted = dict(state)
        wanted.update(requested)
        pages = rendering.pages
        # Detail and excerpts are offered to the pages worth reading whole: the best-matching ones, and those
        # asked for; then to as many more as the budget could show at what those cost (see showable)
        ranked = None if whole else self._ranked(scored_ids, relevance)
        if ranked is None:
            best = [] if layout.hopeless else list(flow.roots)
        else:
            best = ranked[: self._settings.shortlist]
        full = set(best)
        # (the shortlist, then the pages in Detail: a few, never a walk over every page)
        detail_ids = [i for i in dict.fromkeys([*best, *(k for k, v in wanted.items() if v is View.DETAIL)]) if i in flow]
        pages.update(await self._store.pages(thread, detail_ids))
        weights = (
            documents.idf_weights(terms(match_text))
            if documents is not None
            else idf_weights(terms(match_text), [manifests[r].terms for r in flow.roots if r not in folded])
        )
        # a page whose line holds it whole is never cut: the line costs what an excerpt would, and the answer
        # often sits in the message next to the one that matches
        source, side = query_source(match_text), named_side(named)
        about_named = source is None and side is not None
        if about_named:
            source = side

        def offered(ids: Iterable[str]) -> list[str]:
            """The pages among ``ids`` offered excerpts (a question about a named participant is held by their
            messages: a line then shows twice what it holds)."""
            return [i for i in ids if i in pages and (about_named or manifests[i].line is not LineHolds.CONTENT)]

        def excerpted(ids: Iterable[str]) -> dict[str, Offer]:
            return {i: self._excerpts.of(thread, pages[i], weights, layout.counter, source, layout.sides) for i in ids}

        follows = layout.follows if layout.follows is not None and layout.follows in flow and not whole else None
        if follows is not None and follows not in pages:
            pages.update(await self._store.pages(thread, [follows]))
        shortlisted = offered(full)
        await self._cut(thread, pages, [*shortlisted, *([follows] if follows is not None else [])], layout)
        excerpts = rendering.excerpts = excerpted(shortlisted)
        if follows is not None and follows in pages:
            excerpts[follows] = self._excerpts.leading(thread, pages[follows], layout.counter, layout.sides)
        room = layout.limit - layout.fixed
        table = kept_table(layout.snapshot, flow, manifests)  # kept with the thread's version
        rendering.position = table.position
        more = [] if ranked is None else ranked[len(best) : showable(table, best, excerpts, room)]
        if more:
            pages.update(await self._store.pages(thread, more))
            full.update(more)
            more_offered = offered(more)
            await self._cut(thread, pages, more_offered, layout)
            excerpts.update(excerpted(more_offered))
        await self._excerpts.write(self._store, thread)  # the pages this request cut, for any process after it

        # The thread's map (DESIGN §2 step 8): each laid-open container is offered a short entry, weighed like a line
        # of its size, so that the parts of the thread the budget leaves out stay one Consult away where the room
        # allows; a topic's is given back once a page of it is shown (Candidate.inside), which then names the topic.
        # A chapter's is not: a page names its own topic, not the chapter's others. Pages fitted as equals
        # (``whole``) need none.
        maps = {} if whole else self._map(folded, relevance, excerpts, layout)
        inside = kept(layout.snapshot, "inside", flow, lambda: _topics(folded, manifests, flow), lambda before, _: before) if maps else {}
        rendering.excerpts = {**excerpts, **maps}
        made: dict[str, Candidate] = {}

        def candidate(r: str) -> Candidate:
            if r not in made:
                mapped = r in maps
                made[r] = candidate_of(
                    manifests[r], relevance[r], view_of(requested, r), flow, manifests, wanted, layout.seen.get(r), r in state,
                    maps[r] if mapped else excerpts.get(r), r in full or view_of(wanted, r) is View.DETAIL,
                    0 if r == follows else None, inside.get(r), mapped,
                )
            return made[r]

        def fitted(candidates: list[Candidate], outside: Sequence[Outside] = ()) -> FitResult:
            return fit_rendered(
                candidates, fixed_tokens=layout.fixed, budget=layout.ceiling, now=layout.now, measure=rendering.measure,
                window=layout.window, outside=outside, background_overhead=layout.background_overhead,
                flow_overhead=layout.flow_overhead,
            )

        # the relevance of the table's pages in its order, from the scores' array (their positions kept with the tree)
        scores = None if whole else relevance.over(table.roots, kept(
            layout.snapshot, "root_at", flow, lambda: relevance.positions(flow.roots),
            lambda before, added: np.concatenate((before, relevance.positions(added))),
        ), table.position)  # fmt: skip
        must = {r for r in (*state, *requested) if view_of(requested, r) is View.UNPACKED or r in state} | set(excerpts) | set(maps)
        exceeded: list[PoolExceeded] = []
        try:
            for spare in () if whole else POOL_SPARES:
                pool, rest = candidate_pool(table, manifests, relevance, layout.seen, layout.now, room, excerpts, must, spare, scores, exceeded)
                try:
                    fit = fitted([candidate(r) for r in pool], rest)
                    break
                except PoolExceeded as exc:  # a page of the rest might have been shown: take those, or more
                    exceeded.append(exc)
            else:
                fit = fitted([candidate(r) for r in (best if whole else flow.roots)])
        except ContextWindowExceeded as exc:
            raise ContextLengthExceeded(
                f"this request needs {exc.needed} tokens even with its history paged out, more than the model's "
                f"context window of {exc.window} tokens (system prompt, recent turns and the current message are always sent)",
                param="messages",
            ) from exc
        return Fitted(fit, list(made.values()), router_ms, selected_by)

    async def _cut(self, thread: ThreadKey, pages: Mapping[str, Page], ids: Iterable[str], layout: Layout) -> None:
        """The excerpt units of the pages among ``ids`` this process has not cut, where a query cut them before."""
        await self._excerpts.read(self._store, thread, [pages[i] for i in ids if i in pages], layout.counter, layout.sides)

    def _map(
        self, folded: Mapping[str, tuple[str, ...]], relevance: Mapping[str, float], excerpts: Mapping[str, Offer], layout: Layout
    ) -> dict[str, Offer]:
        """The laid-open containers' map entries (`PageExcerpts.mapped`), the most relevant first while they take at
        most RECENT_SHARE of the budget (the candidates the fill weighs for the map: a few, not one per topic)."""
        share, maps = RECENT_SHARE * layout.limit, dict[str, Offer]()
        for container in sorted(folded, key=lambda c: (-relevance[c], c)):
            if container in excerpts:
                continue
            offer = self._excerpts.mapped(layout.manifests[container].page, layout.counter)
            share -= offer[1][0].tokens + 1
            if share < 0:
                break
            maps[container] = offer
        return maps

    async def _select(
        self,
        thread: ThreadKey,
        snapshot: ThreadSnapshot,
        query: str,
        ids: Sequence[str],
        flow: PageTree,
        folded: Mapping[str, tuple[str, ...]],
        manifests: Mapping[str, Manifest],
        state: ViewState,
        now: datetime,
        whole: bool = False,
        follows: str | None = None,
        speakers: Callable[[], Mapping[str, str]] = dict,
    ) -> tuple[Relevance, dict[str, View], str, Documents | None, str, tuple[str, ...], Mapping[str, str]]:
        """Relevance per top-level page, the views asked for (the router's, and the model's own zoom), the
        text matched (the query, reconstructed when it says too little), the pages scored as documents over
        the thread's postings (for their term statistics), who decided the views, and the participants the query
        names with their sides (`_named`; ``speakers``: the names the line labels give them, `Layout.speakers`).

        The router scores every top-level page but the folded containers, in conversation order; a folded
        container is as relevant as a share of its best page, so its summary comes after the pages that match.
        With ``whole`` (every page may be shown whole, or none can), the pages are equals and nothing is scored."""
        columns = _scored(snapshot, flow, folded, manifests)
        scored, scored_ids, lengths, own_lengths = columns.manifests, columns.ids, columns.lengths, columns.own_lengths
        previous = manifests.get(ids[-1]) if ids else None
        if ids and previous is None:
            previous = (await snapshot.manifests(ids[-1:])).get(ids[-1])
        documents = snapshot.postings.documents(scored_ids, lengths)
        summary = previous.page.summary if previous else None
        # (the speakers are read only for a question that may name someone)
        named = self._named(query, snapshot, flow, documents, manifests, speakers()) if documents is not None and NAMED.search(query) else {}
        if whole:
            equal = np.ones(len(scored_ids))
            selection = Selection(Relevance(columns.at, equal), {}, matched_on(query, summary), "unranked", equal)
        else:
            selection = await self._router.select(
                thread, query, summary, scored, documents,
                lambda: snapshot.user_postings.documents(scored_ids, own_lengths), now, named.keys(),
                columns=(scored_ids, columns.written, columns.at),
            )
        values = selection.scores
        if values is None:  # (a router model's relevance, or every page as an equal)
            values = np.fromiter(map(selection.relevance.__getitem__, scored_ids), dtype=np.float64, count=len(scored_ids))
        apart: dict[str, float] = {}
        if folded:  # each laid-open container's best page, by one pass over the scores in the pages' order
            # (the pages a tree adds at its end are after every folded one: their positions stay)
            containers, positions, starts = kept(
                snapshot, "folded_positions", flow, lambda: _folded_positions(folded, columns.at), lambda before, _: before
            )
            best = np.maximum.reduceat(values[positions], starts) if len(positions) else np.zeros(0)
            of = dict(zip(containers, (CONTAINER_SHARE * best).tolist()))
            apart.update({container: of.get(container, 0.0) for container in folded})
        relevance = Relevance(columns.at, values, apart)
        # the exchange the live turn continues (Layout.follows): it takes what the others leave
        if follows is not None and follows in relevance:
            apart[follows] = max(relevance[follows], LEFTOVER)
        apart.update({page: 1.0 for page in state if page in relevance})  # the model opened it: keep it open
        relevance = relevance.apart(apart)
        requested = dict(selection.views)
        requested.update({k: v for k, v in state.items() if k in flow.roots})
        return relevance, requested, selection.match_text, documents, selection.decided_by, scored_ids, named

    @staticmethod
    def _named(
        query: str, snapshot: ThreadSnapshot, flow: PageTree, documents: Documents, manifests: Mapping[str, Manifest],
        speakers: Mapping[str, str],
    ) -> dict[str, str]:
        """The participants ``query`` names, with their sides (`participants`), from the line labels of the last
        exchanges (``speakers``), the thread's postings and its pages' manifests (``documents``: ``flow``'s pages
        the router scores)."""
        users: list[Documents | None] = []

        def said(term: str) -> tuple[int, int]:
            if not users:
                users.append(snapshot.user_postings.documents(documents.ids, documents.lengths))
            mine = users[0].frequency(term) if users[0] is not None else 0
            return mine, documents.frequency(term) - mine

        def spoken(pages: Iterable[str], user: int = 0, others: int = 0) -> tuple[int, int]:
            for page in pages:
                manifest = manifests[page]
                if manifest.own_terms is not manifest.terms:
                    user += manifest.own_length
                    others += manifest.length - manifest.own_length
            return user, others

        def words() -> tuple[int, int]:
            """The words the user and the others say, over the exchanges (a consolidated page's summary speaks for
            both sides): a sum over every page, so kept with the thread's version like the pool's table (and
            added to for the pages a tree grows by: the router scores them all)."""
            return kept(snapshot, "words", flow, lambda: spoken(documents.ids), lambda before, added: spoken(added, *before))

        return participants(query, said, len(documents), words, speakers)

    @staticmethod
    def _ranked(scored: Sequence[str], relevance: Relevance) -> _Ranked:
        """The top-level pages that match the query (``scored``: the pages the router scored), best first."""
        return _Ranked(scored, relevance.scored())


class _Ranked:
    """The pages with a relevance above 0, best first, ties in conversation order (a stable sort on the negated
    relevance, as sorted(reverse=True) would give them), ranked and made into ids only as far as they are sliced: a
    request reads the first few of a ranking of every page."""

    def __init__(self, scored: Sequence[str], values: npt.NDArray[np.float64]) -> None:
        self._ids = scored
        self._values = values
        self._positive = int(np.count_nonzero(self._values > 0))
        self._order = np.zeros(0, dtype=np.intp)  # the ranking's first pages, as far as it was read

    def __len__(self) -> int:
        return self._positive

    def __getitem__(self, part: slice) -> list[str]:
        stop = part.indices(self._positive)[1]
        if stop > len(self._order):  # ranked further: at least twice as far, for the next slice
            self._order = first_by_value(self._values, min(max(stop, 2 * len(self._order), 64), self._positive))
        ids = self._ids
        return [ids[i] for i in self._order[part].tolist()]


def _folded_positions(
    folded: Mapping[str, tuple[str, ...]], at: Mapping[str, int]
) -> tuple[list[str], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The laid-open containers that hold pages, their pages' positions among the scored pages (``at``) one container
    after another, and where each container's begin (for ``np.maximum.reduceat``)."""
    containers = [c for c, pages in folded.items() if pages]
    sizes = [len(folded[c]) for c in containers]
    positions = np.fromiter((at[p] for c in containers for p in folded[c]), dtype=np.intp, count=sum(sizes))
    return containers, positions, np.cumsum([0, *sizes[:-1]], dtype=np.intp)


def _scored(
    snapshot: ThreadSnapshot, flow: PageTree, folded: Mapping[str, tuple[str, ...]], manifests: Mapping[str, Manifest]
) -> _Scored:
    """The top-level pages the router scores (all but the folded containers), as :class:`_Scored`, kept with the
    thread's version for the same tree (the very object, which open_folded_kept keeps), and grown from the tree
    it grew from: the pages it adds at its end are leaves, none of them folded."""

    def compute() -> _Scored:
        return _Scored.of([manifests[r] for r in flow.roots if r not in folded])

    def grow(before: _Scored, added: tuple[str, ...]) -> _Scored:
        return before.grown([manifests[r] for r in added])

    return kept(snapshot, "scored", flow, compute, grow)


@dataclass(frozen=True)
class _Scored:
    """The manifests of the pages the router scores, their ids, lengths, the lengths of their users' own words and
    their times."""

    manifests: list[Manifest]
    ids: tuple[str, ...]
    lengths: list[int]
    own_lengths: list[int]
    written: npt.NDArray[np.float64]
    at: dict[str, int]  # each id's position

    @classmethod
    def of(cls, scored: list[Manifest], offset: int = 0) -> _Scored:
        ids = tuple(m.page.id for m in scored)
        return cls(
            scored, ids, [m.length for m in scored], [m.own_length for m in scored],
            np.array([m.written_ts for m in scored], dtype=np.float64), dict(zip(ids, range(offset, offset + len(ids)))),
        )  # fmt: skip

    def grown(self, added: list[Manifest]) -> _Scored:
        more = _Scored.of(added, len(self.ids))
        return _Scored(
            self.manifests + more.manifests, self.ids + more.ids, self.lengths + more.lengths,
            self.own_lengths + more.own_lengths, np.concatenate((self.written, more.written)), {**self.at, **more.at},
        )  # fmt: skip
