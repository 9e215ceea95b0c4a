"""The token budget: choose each page's view by what it adds per token (PCP §V.3).

Each candidate page has a *priority*, a double decay of age and relevance (:func:`priority`, see
:mod:`gateway.core.worth`), and a few *options*, each with a token cost and a *coverage*, the share of the page it
shows:

* a line in ``<Background_Context>`` (``[id] summary``): coverage ``line_coverage`` (1 when the line holds every
  message verbatim, ``content_on_line``);
* excerpts (``[id]`` and the page's best-matching messages, lines or sentences, ``…`` for the rest, also in
  ``<Background_Context>``; see :mod:`gateway.core.excerpt`), nested, each with its own coverage, the last
  the page whole (coverage 1, without a node's tags: the Detail node is then the choice only of a page the
  model opened, or of one with no excerpts);
* a Summary node (skipped when the line holds the whole summary, ``summary_on_line``);
* a Detail node, coverage 1; an Unpacked node only when asked for (the model opened the container).

An option is worth ``priority ** RELEVANCE_POWER x coverage x detail_tokens``
(:data:`gateway.core.worth.RELEVANCE_POWER`): the share of the page it shows, in the page's own tokens, since a
page that says more is likelier to hold what is asked — in the tokens that can hold it (``worth_tokens``: for a
question about the user, the user's own words, not the replies around them;
:func:`gateway.core.excerpt.speaking_share`). A whole line of a page is then worth about its priority per token,
whatever the page's length, and an excerpt that holds most of a long page's worth in a few tokens is worth much
more. The context is filled by the best value per token: starting from nothing, the step with the highest added
value per added token is taken next — a line for one page, a larger excerpt or the Detail node for another — while
it fits. So a high-priority page gets Detail only when that beats showing more of the others, and a tight budget
shows many pages in part rather than a few whole. Each page's steps follow the upper convex hull of its options, so
a page never pays for a view that a richer one beats per token; a step that no longer fits gives way to a smaller
one that does. Lines and excerpts are filed under one date line per day (the page's own, ``written``), which the
estimate counts once per day, and the element's tags once (``background_overhead``, which also carries the
instructions' line on it); the first node pays ``flow_overhead``, the instructions' line on nodes. Ties go to the
higher priority, then the newer page.

Pages the model opened itself (``pinned``) are placed first, highest priority first, each in the richest view
that fits from the one it asked for down: it asked for that view, and a line would invite it to open the page
again. Then each candidate's ``floor`` excerpt, highest priority first, while it fits: the question of the exchange
a turn follows. A container's entry in the thread's map (``map_entry``) is weighed like any excerpt, filed under one
heading of its own rather than under its day (``MAP_DAY``), and given back once a page ``inside`` it is shown (which
may take the entry's place; the entry is not taken again, but the container's other places still may be).

Contract of :func:`fit_context`: the client-owned part (``fixed_tokens``: system prompt, recent turns, live turn,
plus the XML skeleton) is never reduced. If it fits the budget, the estimated total never exceeds the budget.
If it alone exceeds the budget, the smallest context (no pages at all) is returned with ``over_budget=True``.
Only when it exceeds the model's context window is :class:`ContextWindowExceeded` raised.

Per-page token counts are inputs (precomputed at ingestion, or per request for the few excerpted pages), so
:func:`fit_context` is an estimate; :func:`fit_rendered` checks the real rendering with a measuring callable and
tightens until it fits. With ``outside``, it also checks that the pages left out of the candidates could not
have been shown (:mod:`gateway.core.outside`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from types import MappingProxyType

from gateway.core.candidates import Candidate, Demotion, FitResult, Level, priority, shows_whole
from gateway.core.errors import ContextWindowExceeded
from gateway.core.outside import Outside, check_outside
from gateway.core.views import View
from gateway.core.worth import (
    BACKGROUND_OVERHEAD,
    DAY_OVERHEAD,
    DEFAULT_HALF_LIFE,
    MAP_OVERHEAD,
    NODE_OVERHEAD,
    RELEVANCE_POWER,
    share_of,
)

__all__ = ["Candidate", "Demotion", "FitResult", "Level", "fit_context", "fit_rendered", "priority", "shows_whole"]


_AS_LEVEL = {View.UNPACKED: Level.UNPACKED, View.DETAIL: Level.DETAIL, View.SUMMARY: Level.SUMMARY}
_AS_VIEW = {level: view for view, level in _AS_LEVEL.items()}
_IN_BACKGROUND = (Level.BACKGROUND, Level.EXCERPT)


@dataclass(frozen=True)
class _Policy:
    now: datetime
    half_life: timedelta
    node_overhead: int
    background_overhead: int
    day_overhead: int
    flow_overhead: int = 0
    map_overhead: int = MAP_OVERHEAD


@dataclass(frozen=True)
class _Option:
    """A place for a page: ``level`` (``excerpt``: which excerpt), its cost in tokens and its coverage."""

    level: Level
    cost: int
    coverage: float
    excerpt: int = -1


_NOTHING = _Option(Level.DROPPED, 0, 0.0)
MAP_DAY = date.min  # the heading the map's entries are filed under (it costs ``map_overhead``, not a date line)


def _options(candidate: Candidate, policy: _Policy) -> list[_Option]:
    """Every place ``candidate`` may take (not ``Dropped``), by the module docstring's rules."""
    line_coverage = candidate.line_coverage if candidate.line_coverage is not None else 0.0
    options = [_Option(Level.BACKGROUND, candidate.background_tokens + 1, line_coverage)]
    options += [_Option(Level.EXCERPT, e.tokens + 1, e.coverage, k) for k, e in enumerate(candidate.excerpts)]
    if not candidate.summary_on_line:
        summary = share_of(candidate.summary_tokens, candidate.detail_tokens)
        options.append(_Option(Level.SUMMARY, candidate.summary_tokens + policy.node_overhead, summary))
    if (candidate.detail and not candidate.content_on_line) or candidate.pinned:
        options.append(_Option(Level.DETAIL, candidate.detail_tokens + policy.node_overhead, 1.0))
    if candidate.view is View.UNPACKED:
        options.append(_Option(Level.UNPACKED, (candidate.unpacked_tokens or 0) + policy.node_overhead, 1.0))
    return options


def _next_step(options: Sequence[_Option], current: _Option, room: int | None = None) -> _Option | None:
    """The option that adds the most coverage per added token over ``current`` (its next hull step), among
    those that add coverage and, with ``room``, cost at most ``room`` more. Ties: the cheaper option."""
    best: _Option | None = None
    best_slope = 0.0
    for option in options:
        gained, paid = option.coverage - current.coverage, option.cost - current.cost
        if gained <= 0 or (room is not None and paid > room):
            continue
        slope = gained / paid if paid > 0 else float("inf")
        if best is None or slope > best_slope or (slope == best_slope and option.cost < best.cost):
            best, best_slope = option, slope
    return best


class _Plan:
    def __init__(self, candidates: Sequence[Candidate], fixed: int, policy: _Policy):
        self.candidates = list(candidates)
        self.places = {c.id: _NOTHING for c in candidates}
        self.fixed, self.policy = fixed, policy

    def filed(self, candidate: Candidate, option: _Option | None = None) -> date:
        """The heading ``candidate`` is filed under at ``option`` (default: its place): the map's for its map entry,
        else its day's."""
        place = self.places[candidate.id] if option is None else option
        return MAP_DAY if is_entry(candidate, place) else candidate.day

    def total(self) -> int:
        nodes = sum(self.places[c.id].cost for c in self.candidates)
        days = {self.filed(c) for c in self.candidates if self.places[c.id].level in _IN_BACKGROUND}
        flow = any(self.places[c.id].level in _AS_VIEW for c in self.candidates)
        return (
            self.fixed
            + nodes
            + (self.policy.background_overhead if days else 0)
            + sum(self.heading(day) for day in days)
            + (self.policy.flow_overhead if flow else 0)
        )

    def envelope(self, day: date, days: set[date]) -> int:
        """What a first entry in ``<Background_Context>`` adds: the element's tags, and its heading (``day``'s date
        line, or the map's)."""
        return (0 if days else self.policy.background_overhead) + (0 if day in days else self.heading(day))

    def heading(self, day: date) -> int:
        """What the line heading ``day``'s entries costs: its date, or the map's heading."""
        return self.policy.map_overhead if day == MAP_DAY else self.policy.day_overhead

    def result(self, limit: int, ranks: Mapping[str, float]) -> FitResult:
        total = self.total()
        places = self.places
        kept = {c.id: _AS_VIEW[place.level] for c in self.candidates if (place := places[c.id]).level in _AS_VIEW}
        by_time = sorted(self.candidates, key=lambda c: (c.written, c.id))
        asked = {c.id: _AS_LEVEL[c.view] if c.pinned or c.view is View.UNPACKED else None for c in self.candidates}
        demotions = tuple(
            Demotion(c.id, before, places[c.id].level, ranks[c.id])
            for c in sorted(self.candidates, key=lambda c: (ranks[c.id], c.timestamp, c.id))
            if (before := asked[c.id]) is not None and _RANK.index(places[c.id].level) > _RANK.index(before)
        )
        return FitResult(
            views=MappingProxyType(kept),
            background_ids=tuple(c.id for c in by_time if places[c.id].level in _IN_BACKGROUND),
            dropped_ids=tuple(c.id for c in self.candidates if places[c.id].level is Level.DROPPED),
            total_tokens=total,
            over_budget=total > limit,
            demotions=demotions,
            limit=limit,
            excerpts=MappingProxyType({c.id: places[c.id].excerpt for c in self.candidates if places[c.id].level is Level.EXCERPT}),
            mapped=frozenset(c.id for c in self.candidates if is_entry(c, places[c.id])),
        )


def is_entry(candidate: Candidate, option: _Option) -> bool:
    """Whether ``option`` is ``candidate``'s entry in the thread's map."""
    return option.level is Level.EXCERPT and option.excerpt == candidate.map_entry


_RANK = (Level.UNPACKED, Level.DETAIL, Level.SUMMARY, Level.EXCERPT, Level.BACKGROUND, Level.DROPPED)


def _limit(budget: int, window: int | None) -> int:
    if budget < 0 or (window is not None and window < 0):
        raise ValueError("budget and window must be >= 0")
    return budget if window is None else min(budget, window)


def _fit(
    candidates: Sequence[Candidate], fixed: int, limit: int, policy: _Policy, *, minimal: bool, outside: Sequence[Outside] = ()
) -> FitResult:
    if len({c.id for c in candidates}) != len(candidates):
        raise ValueError("candidate ids must be unique")
    plan = _Plan(candidates, fixed, policy)
    ranks = {c.id: priority(c, policy.now, policy.half_life) for c in candidates}
    if minimal:
        return plan.result(limit, ranks)
    order = sorted(candidates, key=lambda c: (-ranks[c.id], -c.timestamp.timestamp(), c.id))
    options = {c.id: _options(c, policy) for c in candidates}
    running, days, flowing = fixed, set[date](), False
    by_id = {c.id: c for c in candidates}
    shown: set[str] = set()  # the containers a page of which is shown: their map entries are not needed
    returned: list[str] = []  # the containers whose entries were given back: the fill offers their other places again
    regained = 0  # the tokens map entries gave back: room the fill's total can grow by again (`check_outside`)

    def held(candidate: Candidate) -> int:
        """What the map entry of ``candidate``'s container costs while it holds its place (0: none to give back)."""
        holder = by_id.get(candidate.inside) if candidate.inside is not None and candidate.inside not in shown else None
        return plan.places[holder.id].cost if holder is not None and is_entry(holder, plan.places[holder.id]) else 0

    def needless(candidate: Candidate, option: _Option) -> bool:
        """Whether ``option`` is the map entry of a container a page of which is shown."""
        return candidate.id in shown and is_entry(candidate, option)

    def take(candidate: Candidate, option: _Option) -> bool:
        """Place ``candidate`` at ``option`` if the total stays within the limit, its container's map entry given
        back (a shown page names its topic)."""
        nonlocal running, flowing, regained
        if needless(candidate, option):
            return False
        before = plan.places[candidate.id]
        entering = option.level in _IN_BACKGROUND and before.level not in _IN_BACKGROUND
        first_node = option.level in _AS_VIEW and not flowing
        paid = option.cost - before.cost + (plan.envelope(plan.filed(candidate, option), days) if entering else 0)
        paid += policy.flow_overhead if first_node else 0
        back = held(candidate)
        if running + paid - back > limit:
            return False
        # under another heading than before: a line that becomes its map entry, or an entry that goes for a line, an
        # excerpt or a node (its heading is then the map's no more)
        refiled = before.level in _IN_BACKGROUND and plan.filed(candidate, option) != plan.filed(candidate, before)
        if not back and not refiled:
            running += paid
            plan.places[candidate.id] = option
            if entering:
                days.add(plan.filed(candidate))
        else:  # an entry goes (given back, or the container shown otherwise) or comes in place of a line: the total
            # is counted again (the headings and tags the entries share)
            holder = candidate.inside if back else None
            kept = {i: plan.places[i] for i in (holder, candidate.id) if i is not None}
            if holder is not None:
                plan.places[holder] = _NOTHING
            plan.places[candidate.id] = option
            total = plan.total()
            if total > limit:
                plan.places.update(kept)
                return False
            if holder is not None:
                returned.append(holder)
            regained += max(running + paid - total, 0)
            running = total
            days.clear()
            days.update(plan.filed(c) for c in candidates if plan.places[c.id].level in _IN_BACKGROUND)
        if candidate.inside is not None:
            shown.add(candidate.inside)
        flowing = flowing or first_node
        return True

    for candidate in (c for c in order if c.pinned):  # the model's own choice first, richest that fits
        for option in sorted(options[candidate.id], key=lambda o: (_RANK.index(o.level), -o.coverage, o.cost)):
            if _RANK.index(option.level) >= _RANK.index(_AS_LEVEL[candidate.view]) and take(candidate, option):
                break
    for candidate in (c for c in order if c.floor is not None and plan.places[c.id] is _NOTHING):
        take(candidate, next(o for o in options[candidate.id] if o.level is Level.EXCERPT and o.excerpt == candidate.floor))
    # Then the best value per token: a heap of each page's next step, (-value per token, page's place in
    # priority order, the step). A step that no longer fits gives way to the page's best step that is cheaper.
    heap: list[tuple[float, int, _Option]] = []

    def offer(at: int, room: int | None) -> None:
        candidate = order[at]
        current = plan.places[candidate.id]
        step = _next_step([o for o in options[candidate.id] if not needless(candidate, o)], current, room)
        if step is not None:
            paid = step.cost - current.cost
            value = ranks[candidate.id] ** RELEVANCE_POWER * (step.coverage - current.coverage) * max(candidate.worth, 1)
            heapq.heappush(heap, (-(value / paid) if paid > 0 else -math.inf, at, step))

    position = {c.id: at for at, c in enumerate(order)}
    for at in range(len(order)):
        offer(at, None)
    pops: list[tuple[float, int]] = []  # (value per token popped, the total before it): what `outside` is checked on
    while heap:
        key, at, step = heapq.heappop(heap)
        candidate = order[at]
        if step.coverage <= plan.places[candidate.id].coverage:  # offered before its entry was given back, and
            continue  # outgrown since
        pops.append((-key, running))
        if take(candidate, step):
            offer(at, None)
        else:
            offer(at, min(step.cost - plan.places[candidate.id].cost - 1, limit - running + held(candidate)))
        while returned:  # a container whose entry was given back may still take its line or a node
            offer(position[returned.pop()], None)
    if outside:
        check_outside(outside, pops, running, limit, regained)
    return plan.result(limit, ranks)


def fit_context(
    candidates: Sequence[Candidate],
    *,
    fixed_tokens: int,
    budget: int,
    now: datetime,
    window: int | None = None,
    half_life: timedelta = DEFAULT_HALF_LIFE,
    node_overhead: int = NODE_OVERHEAD,
    background_overhead: int = BACKGROUND_OVERHEAD,
    day_overhead: int = DAY_OVERHEAD,
    flow_overhead: int = 0,
    map_overhead: int = MAP_OVERHEAD,
) -> FitResult:
    """Choose each candidate's place so that the estimated total fits ``min(budget, window)``.

    Raises :class:`ContextWindowExceeded` when ``fixed_tokens`` alone exceeds ``window``, ``ValueError`` for
    duplicate candidate ids or a negative budget.
    """
    limit = _limit(budget, window)
    if window is not None and fixed_tokens > window:
        raise ContextWindowExceeded(fixed_tokens, window)
    policy = _Policy(now, half_life, node_overhead, background_overhead, day_overhead, flow_overhead, map_overhead)
    return _fit(candidates, fixed_tokens, limit, policy, minimal=fixed_tokens > limit)


def fit_rendered(
    candidates: Sequence[Candidate],
    *,
    fixed_tokens: int,
    budget: int,
    now: datetime,
    measure: Callable[[FitResult], int],
    window: int | None = None,
    half_life: timedelta = DEFAULT_HALF_LIFE,
    node_overhead: int = NODE_OVERHEAD,
    background_overhead: int = BACKGROUND_OVERHEAD,
    day_overhead: int = DAY_OVERHEAD,
    flow_overhead: int = 0,
    map_overhead: int = MAP_OVERHEAD,
    max_rounds: int = 4,
    outside: Sequence[Outside] = (),
) -> FitResult:
    """:func:`fit_context`, checked against the real output.

    ``measure(result)`` must render the context for ``result`` and return its true token count (fixed part
    included). While the measurement exceeds the limit, the fit is redone with the overshoot taken off the
    budget; after ``max_rounds`` the smallest context (no pages) is used. The returned ``total_tokens`` is the
    measured count, so ``over_budget`` is true only if even the smallest context does not fit. Raises
    :class:`ContextWindowExceeded` if the smallest context exceeds ``window``.

    ``outside``: the pages left out of ``candidates`` (a long thread's tail, see
    :class:`gateway.core.outside.Outside`); the result is the one all of them as candidates would give (but for
    ``dropped_ids``, which does not list them), or :class:`gateway.core.outside.PoolExceeded` is raised when that
    cannot be shown.
    """
    limit = _limit(budget, window)
    if window is not None and fixed_tokens > window:
        raise ContextWindowExceeded(fixed_tokens, window)
    policy = _Policy(now, half_life, node_overhead, background_overhead, day_overhead, flow_overhead, map_overhead)
    margin = 0
    for _ in range(max_rounds):
        target = limit - margin
        result = _fit(candidates, fixed_tokens, max(target, 0), policy, minimal=fixed_tokens > target, outside=outside)
        measured = measure(result)
        if measured <= limit or not (result.views or result.background_ids):
            break
        # tighten by the estimate's own error, not just the overshoot: a greedy fill asked for a budget
        # only 2 tokens smaller may pick the very same pages, and the loop would end at the empty context
        margin = max(margin + measured - limit, measured - result.total_tokens)
    else:
        result = _fit(candidates, fixed_tokens, limit, policy, minimal=True)
        measured = measure(result)
    if window is not None and measured > window:
        raise ContextWindowExceeded(measured, window)
    return replace(result, total_tokens=measured, over_budget=measured > limit, limit=limit)
