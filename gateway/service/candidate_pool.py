"""Which of a thread's top-level pages become the budget's candidates for one request (see :func:`candidate_pool`).

A request builds :class:`~gateway.core.budget.Candidate` objects only for the pages the budget could show; every
other page goes to the fit as an :class:`~gateway.core.outside.Outside`, which the budget checks could never have
been shown (else the caller takes more, see :data:`POOL_SPARES`). The ranking of every page is array work over a
:class:`PoolTable`, derived once per thread version; only the pages that become candidates, and the few outside
pages that no other outside page dominates, become Python objects.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from gateway.adapters.manifests import Manifest, micros
from gateway.adapters.snapshot import ThreadSnapshot
from gateway.core import Candidate, Excerpt, LineHolds, PageTree, View, ViewState, view_of
from gateway.core.outside import OUTSIDE_MARGIN, Outside, PoolExceeded, outside_at, outside_bound
from gateway.core.pages import utc
from gateway.core.worth import AGE_FLOOR, DEFAULT_HALF_LIFE, FLOOR, NODE_OVERHEAD, RELEVANCE_POWER
from gateway.service.page_excerpts import Offer
from gateway.service.page_tree import kept

__all__ = ["POOL_SPARES", "PoolTable", "candidate_of", "candidate_pool", "could_show", "fits_whole", "kept_table", "refreshed", "showable"]

# How many times the most pages the budget can show are taken as candidates, in priority order, before all are
# (see candidate_pool): most requests need only the first; a few more, with the pages an earlier try's fill could
# have shown (a fill that ends with a few tokens to spare and a small page ranked far down); then four times as many.
POOL_SPARES = (1, 1, 1, 4)


def refreshed(timestamp: datetime, seen: datetime | None) -> datetime:
    """A page's time for its priority: a page opened recently is a quarter younger for it (use keeps it fresher,
    but not fresher than a relevant page the model has not needed yet)."""
    return timestamp + (seen - timestamp) / 4 if seen and seen > timestamp else timestamp


def candidate_of(
    manifest: Manifest,
    relevance: float,
    view: View,
    tree: PageTree,
    manifests: Mapping[str, Manifest],
    wanted: ViewState,
    seen: datetime | None,
    opened: bool,
    offer: Offer | None,
    full: bool,
    floor: int | None = None,
    inside: str | None = None,
    mapped: bool = False,
) -> Candidate:
    """The budget's candidate for a page: its views' costs from its manifest, its relevance, the view asked for
    (``view``; an Unpacked one costs its children as ``wanted`` shows them in ``tree``), when it was last ``seen``,
    whether the model ``opened`` it itself, what it is ``offer``ed besides its line, whether Detail is offered
    (``full``), the excerpt it takes before any page is weighed (``floor``), the container whose map entry it
    makes needless once shown (``inside``), and whether its offer is its own map entry (``mapped``)."""
    page = manifest.page
    unpacked = None
    if view is View.UNPACKED:
        unpacked = sum(
            manifests[kid].page.tokens if view_of(wanted, kid) is View.DETAIL else manifests[kid].summary_tokens
            for kid in tree.kids(page.id)
        ) + 40 * len(tree.kids(page.id))
    line, options, share = offer or (None, (), 1.0)
    # a page the model opened itself stays a node: it asked for that view, and a line would invite it
    # to open the page again
    on_line = manifest.line is LineHolds.CONTENT and not opened
    return Candidate(
        id=page.id,
        relevance=relevance,
        timestamp=refreshed(page.timestamp, seen),
        summary_tokens=manifest.summary_tokens,
        detail_tokens=page.tokens,
        view=view,
        background_tokens=manifest.background_tokens,
        unpacked_tokens=unpacked,
        summary_on_line=manifest.line is not LineHolds.LEAD,
        content_on_line=on_line,
        written=page.timestamp,  # its line's date and place are its own, refreshed or not
        excerpts=tuple(Excerpt(option.tokens, option.coverage) for option in options),
        line_coverage=1.0 if on_line else line,
        pinned=opened,
        detail=full,
        worth_tokens=round(page.tokens * share) if share < 1.0 else None,
        floor=floor if options else None,
        map_entry=0 if mapped and options else None,
        inside=inside,
    )


@dataclass(frozen=True)
class PoolTable:
    """What the pool ranks a thread's top-level pages on, as arrays in their order: what their manifests say,
    which changes only with the thread's version (keep it in ``ThreadSnapshot.derived``)."""

    roots: tuple[str, ...]
    position: dict[str, int]
    written_us: npt.NDArray[np.int64]  # Manifest.written_us: ages from it are exact
    written_ts: npt.NDArray[np.float64]
    gain: npt.NDArray[np.float64]  # Manifest.bound: the best first step's gain per token, the cheapest entry
    cheapest: npt.NDArray[np.int64]
    by_id: npt.NDArray[np.int64]  # each page's place in id order: the fill's last tie-break
    runs: tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]  # cost_runs(cheapest)
    in_id_order: tuple[str, ...]  # the roots sorted (what by_id counts places in)

    @classmethod
    def of(cls, roots: Sequence[str], manifests: Mapping[str, Manifest]) -> PoolTable:
        bounds = [manifests[r].bound for r in roots]
        in_order = sorted(range(len(roots)), key=roots.__getitem__)
        by_id = np.empty(len(roots), dtype=np.int64)
        by_id[in_order] = np.arange(len(roots))
        cheapest = np.array([least for _, least in bounds], dtype=np.int64)
        return cls(
            tuple(roots), {r: i for i, r in enumerate(roots)},
            np.array([manifests[r].written_us for r in roots], dtype=np.int64),
            np.array([manifests[r].written_ts for r in roots], dtype=np.float64),
            np.array([gain for gain, _ in bounds], dtype=np.float64),
            cheapest, by_id, cost_runs(cheapest), tuple(roots[i] for i in in_order),
        )  # fmt: skip

    def grown(self, added: Sequence[str], manifests: Mapping[str, Manifest]) -> PoolTable:
        """The table of this one's roots and ``added`` after them (pages not among them): ``PoolTable.of`` of
        those, with only the added pages' manifests read (a chat's next request adds a page or two to thousands)."""
        if not added:
            return self
        bounds = [manifests[r].bound for r in added]
        roots = self.roots + tuple(added)
        position = {**self.position, **{r: len(self.roots) + i for i, r in enumerate(added)}}
        # an old page's place in id order moves by the added ids before it; an added one's is among all
        before = sorted(bisect.bisect_left(self.in_id_order, r) for r in added)
        in_id_order = list(self.in_id_order)
        for r in sorted(added):
            bisect.insort(in_id_order, r)
        by_id = np.concatenate((
            self.by_id + np.searchsorted(np.array(before, dtype=np.int64), self.by_id, side="right"),
            np.array([bisect.bisect_left(in_id_order, r) for r in added], dtype=np.int64),
        ))  # fmt: skip
        cheapest = np.concatenate((self.cheapest, np.array([least for _, least in bounds], dtype=np.int64)))
        return PoolTable(
            roots, position,
            np.concatenate((self.written_us, np.array([manifests[r].written_us for r in added], dtype=np.int64))),
            np.concatenate((self.written_ts, np.array([manifests[r].written_ts for r in added], dtype=np.float64))),
            np.concatenate((self.gain, np.array([gain for gain, _ in bounds], dtype=np.float64))),
            cheapest, by_id, cost_runs(cheapest), tuple(in_id_order),
        )  # fmt: skip


def cost_runs(cheapest: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The pages in order of their cheapest entry (a stable sort), and where each cost's run of them begins."""
    by_cost = np.argsort(cheapest, kind="stable")
    costs = cheapest[by_cost]
    return by_cost, np.flatnonzero(np.concatenate(([True], costs[1:] != costs[:-1]))) if len(costs) else np.zeros(0, dtype=np.intp)


def _first(
    size: int, rank: npt.NDArray[np.float64], stamp: npt.NDArray[np.float64], by_id: npt.NDArray[np.int64]
) -> npt.NDArray[np.intp]:
    """The first ``size`` pages in the fill's order (priority, then newer, then id): ``np.lexsort((by_id, -stamp,
    -rank))[:size]``, sorting only the pages ranked at least as high as the ``size``-th (its ties included)."""
    if size >= len(rank):
        return np.lexsort((by_id, -stamp, -rank))[:size]
    bar = np.partition(-rank, size - 1)[size - 1]
    near = np.flatnonzero(-rank <= bar)
    return near[np.lexsort((by_id[near], -stamp[near], -rank[near]))][:size]


def _frontier(
    worth: npt.NDArray[np.float64], cheapest: npt.NDArray[np.int64], runs: tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]
) -> list[Outside]:
    """The pages (as :class:`Outside`) that no other page is worth at least as much as and cheaper or as cheap
    as: if none of them can be shown, neither can the others. A page's room is the budget left when the fill
    first pops a step worth less than it, which is no more for a page worth less; so a page worth at most
    another's, whose cheapest entry costs at least as much, is shown only if that other one is. ``worth`` is every
    page's, -inf for a page that is not outside; ``runs`` is :func:`cost_runs` of ``cheapest``.

    Only the most worth of each cost can be on that frontier, so the costs' best (one pass over the pages, in
    their order by cost) are what is sorted: as many as there are distinct costs, not pages."""
    by_cost, starts = runs
    best = np.maximum.reduceat(worth[by_cost], starts) if len(worth) else np.zeros(0)
    costs = cheapest[by_cost[starts]] if len(worth) else np.zeros(0, dtype=np.int64)
    present = best > -np.inf
    best, costs = best[present], costs[present]
    order = np.lexsort((costs, -best))  # most worth first, the cheaper first among equals
    costs_sorted = costs[order]
    best_before = np.minimum.accumulate(np.concatenate(([np.iinfo(np.int64).max], costs_sorted[:-1])))
    keep = order[costs_sorted < best_before]
    return [Outside(float(best[i]), int(costs[i])) for i in keep]


def kept_table(snapshot: ThreadSnapshot, flow: PageTree, manifests: Mapping[str, Manifest]) -> PoolTable:
    """The :class:`PoolTable` of ``flow``'s top-level pages, kept with the thread's version (the manifests of a
    version's pages never change) for the same tree, and grown from the one it grew from (`page_tree.kept`)."""

    def grow(table: PoolTable, added: tuple[str, ...]) -> PoolTable:
        return table.grown(added, manifests)

    return kept(snapshot, "pool_table", flow, lambda: PoolTable.of(flow.roots, manifests), grow)


def showable(
    table: PoolTable, best: Sequence[str], excerpts: Mapping[str, Offer], room: int
) -> int:
    """How many pages ``room`` tokens could show at the median cost of the ``best`` pages at their cheapest (their
    smallest excerpt, else their cheapest entry): the pages offered excerpts and Detail cover them, since a page
    outside those can only be a line and the budget would not weigh it by what its excerpts are worth. 0 without
    pages."""
    if not best or room <= 0:
        return 0
    costs = [
        min([int(table.cheapest[table.position[page]]), *(option.tokens + 1 for option in (excerpts[page][1] if page in excerpts else ()))])
        for page in best
    ]
    return room // max(int(statistics.median(costs)), 1)


def candidate_pool(
    table: PoolTable,
    manifests: Mapping[str, Manifest],
    relevance: Mapping[str, float],
    seen: Mapping[str, datetime],
    now: datetime,
    room: int,
    excerpts: Mapping[str, Offer],
    must: set[str],
    spare: int = 1,
    scores: npt.NDArray[np.float64] | None = None,
    exceeded: Sequence[PoolExceeded] = (),
) -> tuple[list[str], list[Outside]]:
    """Of ``table``'s top-level pages (see :func:`kept_table`), those that become the budget's candidates, and the
    rest as :class:`Outside` pages.

    The budget shows at most ``room`` // (the cheapest entry of any page) pages, so the candidates are that many
    plus one first in the fill's own order (priority, then newer, then id), and the pages in ``must`` (the model
    opened them or asked them Unpacked; the excerpted ones, whose excerpts may be worth far more per token than
    their priority); the budget checks that none of the rest could have been shown (else the caller fits them
    all). A request then builds candidates for what the budget can show, not for the whole thread. ``spare``
    multiplies the number taken in priority order (the fill goes by value per token, not priority). ``scores``: the
    relevance of ``table``'s pages in its order, where the caller has it as an array. ``exceeded``: what the fits of
    earlier pools raised; the pages left out that any of those fills could have shown are candidates too (a fill
    that ends with a few tokens to spare can take a small page ranked far down: those pages, not four times as many
    of the first)."""
    roots = table.roots
    if not roots or room <= 0:
        return list(roots), []
    # a page's age as timedelta.total_seconds() would give it (exact microseconds, divided once)
    written, stamp = table.written_us, table.written_ts
    if seen:
        written, stamp = written.copy(), stamp.copy()
        for r, last in seen.items():
            i = table.position.get(r)
            if i is not None:
                moment = utc(refreshed(manifests[r].page.timestamp, last))
                written[i], stamp[i] = micros(moment), moment.timestamp()
    ages = np.maximum((micros(now) - written) / 1_000_000, 0.0)
    if scores is None:
        scores = np.fromiter(map(relevance.__getitem__, roots), dtype=np.float64, count=len(roots))
    # gateway.core.worth.rank_by_age, page by page (a last bit may differ: the pool only bounds the work, the
    # fit's check keeps the result exact; an Outside's worth is a hair above its bound)
    rank = (FLOOR + (1.0 - FLOOR) * scores) * (AGE_FLOOR + (1.0 - AGE_FLOOR) * 0.5 ** (ages / DEFAULT_HALF_LIFE.total_seconds()))
    cheapest = int(table.cheapest.min())
    for _, options, _ in excerpts.values():
        cheapest = min([cheapest, *(option.tokens + 1 for option in options)])
    size = spare * (room // cheapest + 1)
    chosen = {roots[i] for i in _first(size, rank, stamp, table.by_id).tolist()} | must
    worth = rank**RELEVANCE_POWER * table.gain * OUTSIDE_MARGIN  # outside_at, page by page
    for fill in exceeded:
        chosen.update(roots[i] for i in np.flatnonzero(could_show(fill, worth, table.cheapest)).tolist())
    out = np.ones(len(roots), dtype=bool)
    out[[table.position[r] for r in chosen if r in table.position]] = False
    rest: list[Outside] = []
    for r in [r for r in excerpts if r not in chosen and r in table.position]:  # (the caller makes them must)
        # its value counted on all its tokens (not only those that can hold the answer): still an upper bound
        i, manifest = table.position[r], manifests[r]
        out[i] = False
        line, options, _ = excerpts[r]
        gain, least = outside_bound(
            detail_tokens=manifest.page.tokens,
            summary_tokens=manifest.summary_tokens,
            background_tokens=manifest.background_tokens,
            line_coverage=line,
            content_on_line=manifest.line is LineHolds.CONTENT,
            excerpts=[Excerpt(option.tokens, option.coverage) for option in options],
        )
        rest.append(outside_at(float(rank[i]), gain, least))
    if out.any():
        # outside_at, page by page
        rest += _frontier(np.where(out, worth, -np.inf), table.cheapest, table.runs)
    # in conversation order, as the fit lists its views
    return [roots[i] for i in sorted(table.position[r] for r in chosen if r in table.position)], rest


def could_show(fill: PoolExceeded, worth: npt.NDArray[np.float64], cheapest: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """`PoolExceeded.shows` of every page at once: which pages, left out with these ``worth`` and ``cheapest``
    entries, the failed ``fill`` might have shown."""
    first = np.searchsorted(np.asarray(fill.floor, dtype=np.float64), -worth, side="right")
    return fill.room - np.asarray(fill.totals, dtype=np.int64)[first] >= cheapest


def fits_whole(roots: Sequence[str], manifests: Mapping[str, Manifest], room: int) -> bool:
    """Whether ``roots`` could all be shown whole in ``room`` tokens, by their stored counts: a page on a line that
    holds it whole, any other as a Detail node. Only whether to try; what is rendered decides
    (`gateway.core.budget.shows_whole`). Stops at the first page that no longer fits: work bounded by the budget,
    not the thread."""
    total = 0
    for root in roots:
        manifest = manifests[root]
        total += manifest.background_tokens + 1 if manifest.line is LineHolds.CONTENT else manifest.page.tokens + NODE_OVERHEAD
        if total > room:
            return False
    return True
